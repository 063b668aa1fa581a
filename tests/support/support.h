// Shared test support: golden files recorded from JAX and array comparisons.
#pragma once

#include "support/golden.h"

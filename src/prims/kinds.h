// The rules a primitive gets from its kind (ir/primitive.h) when its family writes none.
#pragma once

#include "ir/primitive.h"

namespace spmd {

// Fills in the rules `p.kind` implies and `p` does not have yet.
void complete_rules_from_kind(Primitive& p);

}  // namespace spmd

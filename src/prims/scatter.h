// The scatter-add primitive (JAX's scatter_add_p), which gather's transpose emits: params as
// JAX's ScatterDimensionNumbers, flattened like gather's, plus the update computation.
#pragma once

#include <spmd/array.h>

#include "backends/cpu/scatter.h"

#include <string>

namespace spmd {

// Binds scatter-add as lax.scatter_add does. `mode` is gather's: "clip", "fill" (out-of-bounds
// windows dropped) or "promise_in_bounds".
Array scatter_add(const Array& operand, const Array& indices, const Array& updates,
                  const cpu::ScatterDims& dims, bool indices_are_sorted, bool unique_indices,
                  const std::string& mode);

}  // namespace spmd

// The scatter primitives (JAX's scatter_p, scatter_add_p, scatter_mul_p, scatter_min_p and
// scatter_max_p) as indexed updates and gather's transpose bind them: params as JAX's
// ScatterDimensionNumbers, flattened like gather's, plus the update computation.
#pragma once

#include <spmd/array.h>

#include "backends/cpu/scatter.h"

#include <string>

namespace spmd {

// Binds scatter primitive `name` ("scatter", "scatter-add", "scatter-mul", "scatter-min" or
// "scatter-max") as lax.scatter, lax.scatter_add, ... do. `mode` is gather's: "clip", "fill"
// (out-of-bounds windows dropped) or "promise_in_bounds" (dropped too, as XLA does).
Array scatter(const std::string& name, const Array& operand, const Array& indices,
              const Array& updates, const cpu::ScatterDims& dims, bool indices_are_sorted,
              bool unique_indices, const std::string& mode);
Array scatter_add(const Array& operand, const Array& indices, const Array& updates,
                  const cpu::ScatterDims& dims, bool indices_are_sorted, bool unique_indices,
                  const std::string& mode);

}  // namespace spmd

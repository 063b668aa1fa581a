// The gather primitive as rules of other families bind it (sort's jvp, scatter-add's transpose):
// params as JAX's GatherDimensionNumbers, flattened. The dynamic_slice primitive for the passes
// that build and recognise its equations.
#pragma once

#include <spmd/array.h>

#include "backends/cpu/copy.h"
#include "ir/params.h"

#include <string>

namespace spmd {

struct Primitive;

// Binds gather as lax.gather does. `mode` is "clip", "fill" or "promise_in_bounds"; `fill_value`
// is None or a number.
Array gather(const Array& operand, const Array& indices, const cpu::GatherDims& dims,
             const std::string& mode, ParamValue fill_value, bool indices_are_sorted,
             bool unique_indices);
// lax.gather's fill_value for a gather of tangents or cotangents: 0 when out-of-bounds windows
// are filled (mode "fill"), None otherwise.
ParamValue zero_fill(const std::string& mode);
// dynamic_slice (params: slice_sizes; operands: the array, then one start index per dim).
const Primitive& dynamic_slice_primitive();

}  // namespace spmd

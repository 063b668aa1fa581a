// Text forms of array values, exactly as NumPy prints them: str() ("[0 1 4]") and JAX's repr()
// ("Array([0, 1, 4], dtype=int32)"), with NumPy's default print options.
#pragma once

#include <spmd/dtype.h>
#include <spmd/shape.h>

#include <string>

namespace spmd {

// `data` holds shape.size() elements of dtype t in row-major order.
std::string format_array_str(const void* data, DType t, const Shape& shape);
std::string format_array_repr(const void* data, DType t, const Shape& shape, bool weak_type);
// NumPy's repr of an ndarray ("array([0.5, 1. ])"), with the dtype only where NumPy writes it.
std::string format_ndarray_repr(const void* data, DType t, const Shape& shape);

}  // namespace spmd

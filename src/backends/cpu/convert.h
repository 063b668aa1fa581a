// Element type conversion on contiguous buffers, with XLA's semantics: float → int truncates
// toward zero and saturates (NaN → 0), anything → bool is "!= 0", float narrowing rounds to
// nearest even.
#pragma once

#include <spmd/dtype.h>

#include <cstdint>

namespace spmd::cpu {

void convert(const void* in, DType from, void* out, DType to, int64_t n);

// Converts one value of any dtype to double / int64 (for printing, item(), scalar params).
double load_as_double(const void* in, DType t, int64_t index = 0);

}  // namespace spmd::cpu

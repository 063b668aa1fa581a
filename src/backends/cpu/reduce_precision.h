// XLA's ReducePrecision: each floating-point value rounded to the nearest value (ties to even)
// with `mantissa_bits` explicit mantissa bits and an exponent range of `exponent_bits`, still in
// its own dtype. Values beyond the reduced range become infinities of their sign, values at or
// below its smallest normal become zeros of their sign; NaNs pass unchanged.
#pragma once

#include <spmd/dtype.h>

#include <cstdint>

namespace spmd::cpu {

// `t` is float16, bfloat16, float32 or float64; exponent_bits ≥ 1, mantissa_bits ≥ 0.
void reduce_precision(DType t, const void* in, void* out, int64_t n, int exponent_bits,
                      int mantissa_bits);

}  // namespace spmd::cpu

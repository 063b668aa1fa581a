// Vectorised transcendental and rounding functions on contiguous buffers (Google Highway, runtime
// SIMD dispatch). float32 and float64 are computed natively; bfloat16 and float16 through float32.
#pragma once

#include <spmd/dtype.h>

#include <cstdint>
#include <string_view>

namespace spmd::cpu {

enum class UnaryMathOp : uint8_t {
  exp, exp2, expm1, log, log1p, log2, log10,
  sin, cos, tan, asin, acos, atan,
  sinh, cosh, tanh, asinh, acosh, atanh,
  logistic, erf, erfc, erf_inv,
  sqrt, rsqrt, cbrt,
};

// out[i] = op(in[i]) for i < n; `t` must be a floating dtype. in and out may alias.
void unary_math(UnaryMathOp op, DType t, const void* in, void* out, int64_t n);

// The largest error of unary_math against the correctly rounded result, in ulps of float32,
// over finite inputs of the function's domain (documented and checked by the kernel tests).
int unary_math_ulp_bound_f32(UnaryMathOp op);

std::string_view unary_math_name(UnaryMathOp op);

}  // namespace spmd::cpu

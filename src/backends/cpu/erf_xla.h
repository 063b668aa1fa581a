// XLA:CPU's float32 erf: a rational approximation evaluated with fused multiply-adds. spmd uses
// it for float32 (and, through float32, 16-bit) erf so values equal JAX's bit for bit.
#pragma once

#include <cstdint>

namespace spmd::cpu {

void erf_f32_xla(const float* in, float* out, int64_t n);

}  // namespace spmd::cpu

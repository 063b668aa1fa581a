// Kernels behind the random primitives: the Threefry-2x32 block cipher (20 rounds, JAX's
// rotation schedule and key injection), the two-word counter iota, and the fused multiply-add
// that uniform sampling needs to round as XLA's fused code does.
#pragma once

#include <spmd/dtype.h>

#include <cstdint>

namespace spmd::cpu {

// One operand of an elementwise kernel: n contiguous values, or one value used for every index.
struct BroadcastOperand {
  const void* data;
  bool broadcast;
};

// (y1[i], y2[i]) = threefry2x32((k1[i], k2[i]), (x1[i], x2[i])) for i < n; operands are uint32.
void threefry2x32(BroadcastOperand k1, BroadcastOperand k2, BroadcastOperand x1,
                  BroadcastOperand x2, uint32_t* y1, uint32_t* y2, int64_t n);

// hi[i], lo[i] = the high and low words of the 64-bit index i, for i < n.
void iota_2x32(uint32_t* hi, uint32_t* lo, int64_t n);

// out[i] = x[i] * y[i] + z[i] rounded once, for i < n, in floating dtype `t`. 16-bit floats
// compute in float32 (where their product is exact) and round to `t` at the end.
void fma(DType t, BroadcastOperand x, BroadcastOperand y, BroadcastOperand z, void* out, int64_t n);

}  // namespace spmd::cpu

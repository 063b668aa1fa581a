// The Threefry-2x32 block cipher (20 rounds), the counter-based hash behind jax.random.
#pragma once

#include <cstdint>

namespace spmd::cpu {

// (y1[i], y2[i]) = threefry2x32((k1[i], k2[i]), (x1[i], x2[i])) for i < n. Each key operand is
// either n values or one (stride 0 when `key_broadcast`).
void threefry2x32(const uint32_t* k1, const uint32_t* k2, bool key_broadcast, const uint32_t* x1,
                  const uint32_t* x2, uint32_t* y1, uint32_t* y2, int64_t n);

}  // namespace spmd::cpu

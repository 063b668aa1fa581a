// Threefry-2x32 with JAX's rotation schedule and key injection; a plain loop over independent
// lanes, which the compiler vectorises.
#include "backends/cpu/threefry.h"

#include "backends/cpu/parallel.h"

namespace spmd::cpu {
namespace {

inline uint32_t rotl(uint32_t v, int r) {
  return (v << r) | (v >> (32 - r));
}

inline void hash(uint32_t k1, uint32_t k2, uint32_t& x1, uint32_t& x2) {
  static constexpr int kRot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  const uint32_t ks[3] = {k1, k2, k1 ^ k2 ^ 0x1BD11BDAu};
  x1 += ks[0];
  x2 += ks[1];
  for (int group = 0; group < 5; ++group) {
    for (int r : kRot[group & 1]) {
      x1 += x2;
      x2 = rotl(x2, r);
      x2 ^= x1;
    }
    x1 += ks[(group + 1) % 3];
    x2 += ks[(group + 2) % 3] + uint32_t(group + 1);
  }
}

}  // namespace

void threefry2x32(const uint32_t* k1, const uint32_t* k2, bool key_broadcast, const uint32_t* x1,
                  const uint32_t* x2, uint32_t* y1, uint32_t* y2, int64_t n) {
  parallel_for(n, 1 << 14, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      uint32_t a = x1[i], c = x2[i];
      int64_t k = key_broadcast ? 0 : i;
      hash(k1[k], k2[k], a, c);
      y1[i] = a;
      y2[i] = c;
    }
  });
}

}  // namespace spmd::cpu

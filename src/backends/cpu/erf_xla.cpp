// XLA:CPU's float32 erf: x·P(x²)/Q(x²) with the coefficients and fma order XLA emits, and ±1
// beyond |x| = 3.8325069 (where erf rounds to ±1 in float32).
#include "backends/cpu/erf_xla.h"

#include "backends/cpu/parallel.h"

#include <cmath>

namespace spmd::cpu {
namespace {

float erf_one(float x) {
  constexpr float kClamp = 3.832506856900711f;
  if (std::fabs(x) >= kClamp) return std::copysign(1.0f, x);
  const float x2 = x * x;
  float p = std::fma(x2, 0.00022905065861350646f, 0.0034082910107109506f);
  p = std::fma(x2, p, 0.050955695062380861f);
  p = std::fma(x2, p, 0.18520832239976145f);
  p = std::fma(x2, p, 1.128379143519084f);
  p = x * p;
  float q = std::fma(x2, -1.1791602954361697e-7f, 0.000023547966471313185f);
  q = std::fma(x2, q, 0.0010179625278914885f);
  q = std::fma(x2, q, 0.014070470171167667f);
  q = std::fma(x2, q, 0.11098505178285362f);
  q = std::fma(x2, q, 0.49746925110067538f);
  q = std::fma(x2, q, 1.0f);
  return p / q;
}

}  // namespace

void erf_f32_xla(const float* in, float* out, int64_t n) {
  parallel_for(n, 1 << 15, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[i] = erf_one(in[i]);
  });
}

}  // namespace spmd::cpu

// The oneDNN matmul primitives (batched float32 products, bfloat16) are cached by shape, keeping
// the 512 most recently used: a shape used again between many others keeps its primitive.
#include <gtest/gtest.h>

#include "backends/cpu/gemm.h"

#include <cstdint>
#include <vector>

namespace sp = spmd;
namespace cpu = spmd::cpu;

namespace {

constexpr int64_t kBatch = 2, kM = 8, kN = 8;

// A batched float32 product of kBatch × (kM × k) · (k × kN), checked against a plain loop.
void expect_product(int64_t k) {
  const cpu::GemmShape s{kBatch, kM, kN, k, false, false};
  std::vector<float> a(size_t(kBatch * kM * k)), b(size_t(kBatch * k * kN)),
      c(size_t(kBatch * kM * kN));
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(i % 7) - 3.f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = float(i % 5) - 2.f;
  cpu::gemm(sp::DType::float32, sp::DType::float32, s, a.data(), b.data(), c.data());
  for (int64_t p = 0; p < kBatch; ++p)
    for (int64_t i = 0; i < kM; ++i)
      for (int64_t j = 0; j < kN; ++j) {
        float want = 0;  // small integers: every order of summation gives the same value
        for (int64_t q = 0; q < k; ++q)
          want += a[size_t((p * kM + i) * k + q)] * b[size_t((p * k + q) * kN + j)];
        ASSERT_EQ(c[size_t((p * kM + i) * kN + j)], want) << "k " << k;
      }
}

TEST(MatmulPrimitiveCache, KeepsAShapeUsedBetweenManyOthers) {
  constexpr int64_t kHot = 8, kCold = 600;  // more shapes than the cache keeps
  expect_product(kHot);
  const int64_t start = cpu::matmul_primitives_created();
  for (int64_t j = 0; j < kCold; ++j) {
    expect_product(kHot);
    expect_product(kHot + 1 + j);
  }
  expect_product(kHot);
  // One primitive per cold shape, none for the hot one (a cache that starts over when full makes
  // it again).
  EXPECT_EQ(cpu::matmul_primitives_created() - start, kCold);
  // The 511 most recent cold shapes are still kept beside the hot one, the earlier ones not.
  for (int64_t j = kCold - 511; j < kCold; ++j) expect_product(kHot + 1 + j);
  EXPECT_EQ(cpu::matmul_primitives_created() - start, kCold);
  expect_product(kHot + 1);
  EXPECT_EQ(cpu::matmul_primitives_created() - start, kCold + 1);
}

}  // namespace

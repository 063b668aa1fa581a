// cpu::select_n with a bool selector, on the paths that read the selector as bytes and load both
// cases for every element (the vector blend): each pairing of full and 0-d operands, lengths with
// a vector tail and over several parallel chunks, and element types of 1 to 8 bytes. Selection is
// exact, so the expected values are the chosen elements themselves.
#include "backends/cpu/elementwise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace spmd {
namespace {

// Operands of one select: a random mask, two cases, each 0-d or of length n.
template <class T>
struct SelectCase {
  SelectCase(int64_t n, bool full_which, bool full0, bool full1, uint32_t seed) : n(n) {
    std::mt19937 rng(seed);
    which.resize(size_t(full_which ? n : 1));
    for (auto& w : which) w = (rng() & 1) != 0;
    c0.resize(size_t(full0 ? n : 1));
    c1.resize(size_t(full1 ? n : 1));
    for (size_t i = 0; i < c0.size(); ++i) c0[i] = T(int64_t(i % 97) - 50);
    for (size_t i = 0; i < c1.size(); ++i) c1[i] = T(int64_t(i % 89) + 7);
  }
  static Shape shape_of(size_t size, int64_t n) { return size == 1 && n != 1 ? Shape{} : Shape{n}; }
  std::vector<T> run() const {
    std::vector<T> out(static_cast<size_t>(n));
    const void* cases[2] = {c0.data(), c1.data()};
    const Shape shapes[2] = {shape_of(c0.size(), n), shape_of(c1.size(), n)};
    cpu::select_n(DType::bool_, which.data(), shape_of(which.size(), n), cases, shapes,
                  dtype_of_v<T>, out.data(), Shape{n});
    return out;
  }
  T expected(int64_t i) const {
    const bool w = which[which.size() == 1 ? 0 : size_t(i)];
    return w ? c1[c1.size() == 1 ? 0 : size_t(i)] : c0[c0.size() == 1 ? 0 : size_t(i)];
  }
  int64_t n;
  std::vector<uint8_t> which;  // bytes 0 and 1, as bool arrays hold them
  std::vector<T> c0, c1;
};

template <class T>
void check_every_pairing() {
  // 1 element, a length with a vector tail, and one of several parallel chunks.
  for (int64_t n : {int64_t(1), int64_t(1037), int64_t(1) << 17})
    for (int pairing = 0; pairing < 8; ++pairing) {
      const bool full_which = pairing & 1, full0 = pairing & 2, full1 = pairing & 4;
      SelectCase<T> c(n, full_which, full0, full1, uint32_t(n * 8 + pairing));
      const std::vector<T> out = c.run();
      int64_t wrong = 0;
      for (int64_t i = 0; i < n; ++i) wrong += out[size_t(i)] != c.expected(i);
      EXPECT_EQ(wrong, 0) << "n " << n << " pairing " << pairing;
    }
}

TEST(SelectKernel, FloatPicksTheChosenCaseForEveryPairing) { check_every_pairing<float>(); }
TEST(SelectKernel, DoublePicksTheChosenCaseForEveryPairing) { check_every_pairing<double>(); }
TEST(SelectKernel, Int8PicksTheChosenCaseForEveryPairing) { check_every_pairing<int8_t>(); }
TEST(SelectKernel, Int16PicksTheChosenCaseForEveryPairing) { check_every_pairing<int16_t>(); }
TEST(SelectKernel, Int64PicksTheChosenCaseForEveryPairing) { check_every_pairing<int64_t>(); }

// A ReLU's backward pass: the cotangent where the mask is set, +0 elsewhere, and -0 and NaN in
// the cotangent kept where chosen.
TEST(SelectKernel, ReluMaskKeepsSignedZerosAndNaNs) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<uint8_t> mask = {1, 0, 1, 0, 1, 1};
  const std::vector<float> ct = {-0.0f, nan, nan, -3.0f, 2.5f, -1.0f};
  const float zero = 0.0f;
  std::vector<float> out(ct.size(), 7.0f);
  const void* cases[2] = {&zero, ct.data()};
  const Shape shapes[2] = {Shape{}, Shape{6}};
  cpu::select_n(DType::bool_, mask.data(), Shape{6}, cases, shapes, DType::float32, out.data(),
                Shape{6});
  EXPECT_TRUE(std::signbit(out[0]) && out[0] == 0.0f);
  EXPECT_TRUE(!std::signbit(out[1]) && out[1] == 0.0f);
  EXPECT_TRUE(std::isnan(out[2]));
  EXPECT_TRUE(!std::signbit(out[3]) && out[3] == 0.0f);
  EXPECT_EQ(out[4], 2.5f);
  EXPECT_EQ(out[5], -1.0f);
}

}  // namespace
}  // namespace spmd

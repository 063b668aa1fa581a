// A dynamic_slice whose window is one contiguous run of its operand (whole rows) is a view of the
// operand's buffer inside a run: no copy, and a product reading it packs that part of the operand
// once for later runs. Views never leave a run: a result that is one is copied, so a caller can
// neither keep the whole operand alive through it nor, by donating it, write over the operand.
#include <gtest/gtest.h>
#include <spmd/spmd.h>

#include "backends/cpu/buffer_view.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/parallel.h"
#include "core/array_impl.h"

#include <cstdint>
#include <vector>

namespace {

namespace sp = spmd;
namespace cpu = spmd::cpu;
using sp::Array;

// Small integers: every product and sum below is exact in float32, in any order.
std::vector<float> small_ints(int64_t n, int seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float((i * 7 + seed) % 5) - 2.0f;
  return v;
}

bool is_view(const Array& x) {
  return cpu::view_source(x.impl()->buffer) != nullptr;
}

TEST(SliceView, RowsOfAWeightAreReadInPlaceAndPackedOnce) {
  constexpr int64_t kRows = 256, kK = 512, kBlock = 128, kM = 128;
  const std::vector<float> wv = small_ints(kRows * kK, 1), xv = small_ints(kM * kK, 2);
  Array w = sp::array(wv, sp::Shape{kRows, kK}), x = sp::array(xv, sp::Shape{kM, kK});
  auto f = sp::jit([](const Array& w, const Array& x, const Array& start) {
    Array rows = sp::lax::dynamic_slice_in_dim(w, start, kBlock, 0);
    return sp::lax::dot_general(x, rows, {.lhs_contracting = {1}, .rhs_contracting = {1}, .lhs_batch = {}, .rhs_batch = {}});
  });
  cpu::set_thread_limit(1);  // one thread, as a device's products run
  for (int start : {0, 128}) {
    std::vector<float> want(size_t(kM * kBlock), 0.0f);
    for (int64_t i = 0; i < kM; ++i)
      for (int64_t j = 0; j < kBlock; ++j)
        for (int64_t p = 0; p < kK; ++p)
          want[size_t(i * kBlock + j)] += xv[size_t(i * kK + p)] * wv[size_t((start + j) * kK + p)];
    EXPECT_EQ(f(w, x, Array(start)).to_vector<float>(), want) << "start " << start;
    // The second run finds the block's packed form: no product on an unpacked B. A copied slice
    // is a new buffer every run, held once, and never packed.
    const cpu::PackedGemmCounts before = cpu::packed_gemm_counts();
    EXPECT_EQ(f(w, x, Array(start)).to_vector<float>(), want) << "start " << start;
    const cpu::PackedGemmCounts after = cpu::packed_gemm_counts();
    EXPECT_EQ(after.unpacked_sightings - before.unpacked_sightings, 0) << "start " << start;
    EXPECT_EQ(after.packed_products - before.packed_products, 1) << "start " << start;
  }
  cpu::set_thread_limit(0);
}

TEST(SliceView, AResultThatWouldBeAViewIsACopy) {
  const std::vector<float> wv = small_ints(64 * 32, 3);
  Array w = sp::array(wv, sp::Shape{64, 32});
  auto rows = [](const Array& w) { return sp::lax::dynamic_slice_in_dim(w, Array(16), 16, 0); };
  Array out = sp::jit(rows)(w);
  EXPECT_FALSE(is_view(out));
  EXPECT_EQ(out.to_vector<float>(), std::vector<float>(wv.begin() + 16 * 32, wv.begin() + 32 * 32));
  // Donated, the copy is written over in place; the operand keeps its values.
  Array doubled = sp::jit([](const Array& r) { return r * 2.0f; }, {.donate_argnums = {0}})(out);
  std::vector<float> want(wv.begin() + 16 * 32, wv.begin() + 32 * 32);
  for (float& v : want) v *= 2.0f;
  EXPECT_EQ(doubled.to_vector<float>(), want);
  EXPECT_EQ(w.to_vector<float>(), wv);
}

// A view read by an elementwise equation that could write in place (the view dies there) gets a
// buffer of its own: writing over the view would change the operand.
TEST(SliceView, ElementwiseResultsOfAViewDoNotWriteOverTheOperand) {
  const std::vector<float> wv = small_ints(64 * 32, 4);
  Array w = sp::array(wv, sp::Shape{64, 32});
  auto f = sp::jit(
      [](const Array& w) {
        Array r = sp::lax::dynamic_slice_in_dim(w, Array(32), 32, 0) + 1.0f;
        return std::vector<Array>{r, w};
      },
      {.donate_argnums = {0}});
  const std::vector<Array> out = f(w);
  std::vector<float> want(wv.begin() + 32 * 32, wv.end());
  for (float& v : want) v += 1.0f;
  EXPECT_EQ(out[0].to_vector<float>(), want);
  EXPECT_EQ(out[1].to_vector<float>(), wv);
}

// Windows that are not one run of memory (part of every row) are copied, with the same values.
TEST(SliceView, ColumnWindowsAreCopies) {
  const std::vector<float> wv = small_ints(8 * 32, 5);
  Array w = sp::array(wv, sp::Shape{8, 32});
  Array out = sp::jit([](const Array& w) {
    return sp::lax::dynamic_slice(w, {Array(0), Array(16)}, {8, 16});
  })(w);
  std::vector<float> want;
  for (int64_t i = 0; i < 8; ++i)
    for (int64_t j = 16; j < 32; ++j) want.push_back(wv[size_t(i * 32 + j)]);
  EXPECT_EQ(out.to_vector<float>(), want);
}

}  // namespace

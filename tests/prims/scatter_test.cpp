// scatter-add (src/prims/scatter.cpp): accumulation of repeated indices, windows, batching dims,
// the out-of-bounds modes, and the shape rule's errors. Expected values are JAX's
// (lax.scatter_add with the same dimension numbers).
#include <spmd/error.h>
#include <spmd/ops.h>

#include <gtest/gtest.h>

#include "core/trace.h"
#include "ir/params.h"
#include "prims/primitive.h"
#include "prims/scatter.h"
#include "support/golden.h"

namespace spmd {
namespace {

using spmd_test::arrays_equal;

// update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,): one
// element per index, as the transpose of x[i] emits.
const cpu::ScatterDims kElementwise{{}, {0}, {0}, {}, {}};

TEST(ScatterAdd, RepeatedIndicesAccumulate) {
  Array x = array<float>({1, 2, 3, 4, 5});
  Array idx = array<int32_t>({1, 3, 1}, Shape{3, 1});
  Array upd = array<float>({10, 20, 30});
  Array out = scatter_add(x, idx, upd, kElementwise, false, false, "fill");
  EXPECT_TRUE(arrays_equal(out, array<float>({1, 42, 3, 24, 5})));
}

TEST(ScatterAdd, RowWindowsAddWholeRows) {
  // The transpose of jnp.take(x, [0, 2, 4, 2], axis=0) on a (5, 3) operand.
  Array zeros = array<float>(std::vector<float>(15, 0.0f), Shape{5, 3});
  Array idx = array<int32_t>({0, 2, 4, 2}, Shape{4, 1});
  Array upd = array<float>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, Shape{4, 3});
  Array out = scatter_add(zeros, idx, upd, {{1}, {0}, {0}, {}, {}}, false, false, "fill");
  Array expected = array<float>({1, 2, 3, 0, 0, 0, 14, 16, 18, 0, 0, 0, 7, 8, 9}, Shape{5, 3});
  EXPECT_TRUE(arrays_equal(out, expected));
}

TEST(ScatterAdd, OutOfBoundsElementsAreDroppedOrClamped) {
  Array zeros = array<float>({0, 0, 0, 0, 0});
  Array idx = array<int32_t>({-1, 5, 2}, Shape{3, 1});
  Array upd = array<float>({1, 2, 3});
  EXPECT_TRUE(arrays_equal(scatter_add(zeros, idx, upd, kElementwise, false, false, "fill"),
                           array<float>({0, 0, 3, 0, 0})));
  EXPECT_TRUE(
      arrays_equal(scatter_add(zeros, idx, upd, kElementwise, false, false, "promise_in_bounds"),
                   array<float>({0, 0, 3, 0, 0})));
  EXPECT_TRUE(arrays_equal(scatter_add(zeros, idx, upd, kElementwise, false, false, "clip"),
                           array<float>({1, 0, 3, 0, 2})));
}

TEST(ScatterAdd, WindowThatDoesNotFitIsDroppedWholeOrClampedInside) {
  // Windows of 2 elements starting at 3 and at -1 in a 4-element operand.
  Array zeros = array<float>({0, 0, 0, 0});
  Array idx = array<int32_t>({3, -1}, Shape{2, 1});
  Array upd = array<float>({1, 2, 10, 20}, Shape{2, 2});
  const cpu::ScatterDims dims{{1}, {}, {0}, {}, {}};
  EXPECT_TRUE(arrays_equal(scatter_add(zeros, idx, upd, dims, false, false, "fill"),
                           array<float>({0, 0, 0, 0})));
  EXPECT_TRUE(arrays_equal(scatter_add(zeros, idx, upd, dims, false, false, "clip"),
                           array<float>({10, 20, 1, 2})));
}

TEST(ScatterAdd, BatchingDimsPairOperandRowsWithIndexRows) {
  // The transpose of take_along_axis(x, idx, axis=1) for x of shape (3, 4), idx of shape (3, 2).
  Array zeros = array<float>(std::vector<float>(12, 0.0f), Shape{3, 4});
  Array idx = array<int32_t>({0, 0, 3, 1, 2, 2}, Shape{3, 2, 1});
  Array upd = array<float>({1, 2, 3, 4, 5, 6}, Shape{3, 2});
  Array out = scatter_add(zeros, idx, upd, {{}, {1}, {1}, {0}, {0}}, false, false, "fill");
  Array expected = array<float>({3, 0, 0, 0, 0, 4, 0, 3, 0, 0, 11, 0}, Shape{3, 4});
  EXPECT_TRUE(arrays_equal(out, expected));
}

TEST(ScatterAdd, IntegerOperandsAndUnsignedIndices) {
  Array x = array<int32_t>({5, 5, 5});
  Array idx = array<uint32_t>({2, 2, 0}, Shape{3, 1});
  Array upd = array<int32_t>({1, 2, 3});
  EXPECT_TRUE(arrays_equal(scatter_add(x, idx, upd, kElementwise, false, false, "fill"),
                           array<int32_t>({8, 5, 8})));
}

// Integer accumulation wraps modulo 2^32 as in XLA: 2147483647 + 1 + (-2147483648) is 0, as
// lax.scatter_add gives.
TEST(ScatterAdd, IntegerOverflowWrapsAround) {
  Array x = array<int32_t>({2147483647, 0});
  Array idx = array<int32_t>({0, 0}, Shape{2, 1});
  Array upd = array<int32_t>({1, -2147483647 - 1});
  EXPECT_TRUE(arrays_equal(scatter_add(x, idx, upd, kElementwise, false, false, "fill"),
                           array<int32_t>({0, 0})));
}

TEST(ScatterAdd, ShapeRuleRejectsBadOperands) {
  Array x = array<float>({0, 0, 0});
  Array idx = array<int32_t>({0}, Shape{1, 1});
  EXPECT_THROW(
      scatter_add(x, idx, array<double>({1.0}).astype(float16), kElementwise, false, false, "fill"),
      TypeError);
  EXPECT_THROW(scatter_add(x, array<float>({0}, Shape{1, 1}), array<float>({1}), kElementwise,
                           false, false, "fill"),
               TypeError);
  const Array flag = array(std::vector<bool>{true}, Shape{1});
  EXPECT_THROW(scatter_add(flag, idx, flag, kElementwise, false, false, "fill"), TypeError);
  // Two updates for one index.
  EXPECT_THROW(scatter_add(x, idx, array<float>({1, 2}), kElementwise, false, false, "fill"),
               ShapeError);
  // The index vector has 1 entry, scatter_dims_to_operand_dims 2.
  EXPECT_THROW(
      scatter_add(x, idx, array<float>({1}), {{}, {0}, {0, 0}, {}, {}}, false, false, "fill"),
      ShapeError);
  EXPECT_THROW(scatter_add(x, idx, array<float>({1}), kElementwise, false, false, "wrap"),
               ValueError);
}

TEST(ScatterAdd, UpdateComputationIsSharedPerDtype) {
  // Equal scatters must have equal params (cache keys): the add computation is one object per
  // dtype, compared by identity.
  Array x = array<float>({0, 0});
  Array idx = array<int32_t>({1}, Shape{1, 1});
  Array upd = array<float>({1});
  Params seen[2];
  for (Params& p : seen) {
    struct Recorder : Trace {
      Params* out;
      explicit Recorder(Params* o) : out(o) {}
      std::vector<Array> process_primitive(const Primitive& p, std::span<const Array> in,
                                           const Params& params) override {
        *out = params;
        CurrentTraceScope eager(nullptr);
        return spmd::bind(p, in, params);
      }
      const char* transformation_name() const override { return "test"; }
    };
    auto trace = std::make_shared<Recorder>(&p);
    CurrentTraceScope scope(trace.get());
    scatter_add(x, idx, upd, kElementwise, false, false, "fill");
  }
  EXPECT_TRUE(seen[0] == seen[1]);
  EXPECT_TRUE(seen[0].has("update_jaxpr"));
}

}  // namespace
}  // namespace spmd

// Control flow inside a partitioned jit, against JAX 0.10.2 (tools/goldens/gen_cf_partition.py):
// fori_loop, while_loop, scan and cond run their bodies on the blocks of their carries and
// operands, as Shardy propagates through them. Results have JAX's splits and values; an
// elementwise loop moves no byte; a sum over a split dim inside a body is completed by a psum
// inside the per-device body, which sp::explain lists.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "sharding/golden_cases.h"
#include "support/golden.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace {

namespace sp = spmd;
namespace lax = sp::lax;
using sp::Array;
using sp::None;
using sp::P;

using sharding_test::placed;
using sharding_test::placed_here;

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class ControlFlowPartition : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sp::device_count() < 8) GTEST_SKIP() << "needs 8 devices";
  }

  sp::Mesh mesh = sp::make_mesh({4, 2}, {"a", "b"});
  Array x = sp::arange(64.0f).reshape({8, 8});
  Array w = sp::arange(64.0f).reshape({8, 8}) / 64;
  Array xs3 = sp::arange(192.0f).reshape({3, 8, 8}) / 100;

  Array put(const Array& v, sp::PartitionSpec spec) const {
    Array r = sp::device_put(v, sp::NamedSharding(mesh, spec));
    r.block_until_ready();
    return r;
  }

  // Compares the leaves of a case with JAX's: where they are and their values.
  static void expect_jax(const std::string& name, const std::vector<Array>& leaves) {
    static const auto* blocks = new std::map<std::string, std::string>(
        spmd_test::golden_blocks("partitioning/cf_results.txt"));
    ASSERT_TRUE(blocks->count(name)) << "no golden case " << name;
    EXPECT_EQ(placed(leaves), placed_here(blocks->at(name), leaves)) << name;
    const auto& values = spmd_test::load_golden("partitioning/cf_values.npz");
    for (size_t i = 0; i < leaves.size(); ++i)
      EXPECT_TRUE(
          spmd_test::arrays_close(leaves[i], values.at(name + "/" + std::to_string(i)), 2e-6, 1e-5))
          << name << " leaf " << i;
  }
};

Array fori_elementwise(const Array& u) {
  return lax::fori_loop(
      0, 5, [](const Array&, const Array& c) { return sp::sin(c) * 0.5 + 1; }, u);
}

Array while_sum_predicate(const Array& u) {
  return lax::while_loop([](const Array& c) { return c.sum() < 1e5; },
                         [](const Array& c) { return c * 2 + 1; }, u);
}

Array fori_centered(const Array& u) {
  return lax::fori_loop(
      0, 3, [](const Array&, const Array& c) { return (c - c.mean({0})) * 1.5; }, u);
}

TEST_F(ControlFlowPartition, ForiLoopOfElementwiseStepsStaysSplit) {
  Array u = put(x, P("a", "b"));
  sp::runtime::reset_transfer_stats();
  Array r = sp::jit(fori_elementwise)(u);
  r.block_until_ready();
  EXPECT_EQ(sp::runtime::transfer_stats().total_bytes(), 0);
  expect_jax("fori_elementwise", {r});
  const std::string text = sp::explain(fori_elementwise, u);
  EXPECT_NE(text.find("collectives: none"), std::string::npos) << text;
}

// A constraint only inside a body places a jit of uncommitted arguments on its mesh, as in JAX.
TEST_F(ControlFlowPartition, AConstraintInsideABodyPlacesTheComputation) {
  const sp::NamedSharding s_ab(mesh, P("a", "b"));
  auto fori_constrained = [&](const Array& u) {
    return lax::fori_loop(
        0, 3,
        [&](const Array&, const Array& c) { return sp::with_sharding_constraint(c * 2.0, s_ab); },
        u);
  };
  expect_jax("fori_constrained_uncommitted", {sp::jit(fori_constrained)(x)});
  auto cond_constrained = [&](const Array& u) {
    return lax::cond(
        u.sum() > 0, [&](const Array& v) { return sp::with_sharding_constraint(v * 2.0, s_ab); },
        [](const Array& v) { return v; }, u);
  };
  expect_jax("cond_constrained_uncommitted", {sp::jit(cond_constrained)(x)});
}

TEST_F(ControlFlowPartition, WhileLoopWithASumPredicate) {
  Array u = put(x, P("a", "b"));
  Array r = sp::jit(while_sum_predicate)(u);
  expect_jax("while_sum_predicate", {r});
  // The predicate's sum is completed across the devices inside cond_fun, every step.
  const std::string text = sp::explain(while_sum_predicate, u);
  EXPECT_EQ(count(text, "psum over ('a', 'b')"), 1u) << text;
  EXPECT_NE(text.find("in cond_jaxpr of while (equation"), std::string::npos) << text;
  EXPECT_EQ(count(text, "all_gather"), 0u) << text;
}

TEST_F(ControlFlowPartition, ScanOverColumnsSplitKeepsTheStepsSplit) {
  auto f = [](const Array& u) {
    return lax::scan([](const Array& c, const Array& r) { return std::make_pair(c + r, c + r); },
                     sp::zeros({8}), u);
  };
  Array u = put(x, P(None, "a"));
  sp::runtime::reset_transfer_stats();
  auto [carry, ys] = sp::jit(f)(u);
  ys.block_until_ready();
  EXPECT_EQ(sp::runtime::transfer_stats().total_bytes(), 0);
  expect_jax("scan_cumsum", {carry, ys});
}

TEST_F(ControlFlowPartition, CondRunsItsBranchesOnShards) {
  auto f = [](const Array& p, const Array& u) {
    return lax::cond(
        p, [](const Array& v) { return sp::sin(v); }, [](const Array& v) { return sp::cos(v); }, u);
  };
  Array u = put(x, P("a", "b"));
  Array yes = put(Array(true), P()), no = put(Array(false), P());
  sp::runtime::reset_transfer_stats();
  Array r = sp::jit(f)(yes, u);
  r.block_until_ready();
  EXPECT_EQ(sp::runtime::transfer_stats().total_bytes(), 0);
  expect_jax("cond_true", {r});
  expect_jax("cond_false", {sp::jit(f)(no, u)});
}

TEST_F(ControlFlowPartition, CondOnAShardedSum) {
  auto f = [](const Array& u) {
    return lax::cond(
        u.sum() > 2000, [](const Array& v) { return v - v.mean({0}); },
        [](const Array& v) { return v * 2; }, u);
  };
  Array u = put(x, P("a", "b"));
  expect_jax("cond_sum_predicate", {sp::jit(f)(u)});
  const std::string text = sp::explain(f, u);
  EXPECT_NE(text.find("in branches[1] of cond (equation"), std::string::npos) << text;
}

TEST_F(ControlFlowPartition, ASumOverASplitDimInsideALoopIsAPsumInTheBody) {
  Array u = put(x, P("a", "b"));
  expect_jax("fori_centered", {sp::jit(fori_centered)(u)});
  const std::string text = sp::explain(fori_centered, u);
  EXPECT_NE(text.find("1. psum over 'a': in jaxpr of scan (equation"), std::string::npos) << text;
  EXPECT_EQ(count(text, "all_gather"), 0u) << text;
}

TEST_F(ControlFlowPartition, ScanOfASplitMatmul) {
  auto f = [](const Array& wm, const Array& xs, const Array& h0) {
    return lax::scan(
        [&](const Array& h, const Array& xr) {
          Array next = sp::tanh(sp::matmul(h, wm) + xr);
          return std::make_pair(next, next.sum());
        },
        h0, xs);
  };
  auto [h, ys] = sp::jit(f)(put(w, P(None, "b")), put(xs3, P(None, "a")), put(x / 64, P("a")));
  expect_jax("scan_matmul", {h, ys});
}

TEST_F(ControlFlowPartition, GradThroughAScanOfASplitMatmul) {
  auto loss = [](const Array& wm, const Array& xs, const Array& h0) {
    auto [h, ys] = lax::scan(
        [&](const Array& c, const Array& xr) {
          Array next = sp::tanh(sp::matmul(c, wm) + xr);
          return std::make_pair(next, next.sum());
        },
        h0, xs);
    return h.sum() + ys.sum();
  };
  Array g =
      sp::jit(sp::grad(loss))(put(w, P(None, "b")), put(xs3, P(None, "a")), put(x / 64, P("a")));
  expect_jax("grad_scan_matmul", {g});
}

}  // namespace

// A device thread runs loop bodies of meshes of different sizes one after another: an
// all_to_all (whose params do not say its axis size) in one must not reuse the types it had
// over a larger axis of the same name. Here each step moves the weight's split from its
// columns to its rows (a max over its columns, completed by no reduce-scatter), on blocks of the
// same shape over 4 devices and over 2.
TEST_F(ControlFlowPartition, ACollectiveInALoopBodyTakesTheSizeOfItsMesh) {
  auto f = [](const Array& wm, const Array& u, const Array& xs) {
    auto step = [&](const Array& c, const Array& xr) {
      const Array next = sp::tanh(sp::max(wm * u, {1}) + c * 0.5f + xr);
      return std::make_pair(next, next);
    };
    return lax::scan(step, sp::zeros({8}), xs).second;
  };
  for (int n : {4, 2}) {
    const sp::Mesh m = sp::make_mesh({n}, {"x"});
    const Array wm = sp::arange(float(16 * n)).reshape({8, 2 * n}) / 64;
    const Array u = sp::arange(float(2 * n)) / 8;
    const Array xs = sp::arange(24.0f).reshape({3, 8}) / 10;
    const Array got = sp::jit(f)(sp::device_put(wm, sp::NamedSharding(m, P(None, "x"))), u,
                                 sp::device_put(xs, sp::NamedSharding(m, P(None, "x"))));
    EXPECT_TRUE(spmd_test::arrays_close(got, f(wm, u, xs), 1e-6, 1e-6)) << n << " devices";
    EXPECT_NE(sp::jit(f)
                  .explain(sp::device_put(wm, sp::NamedSharding(m, P(None, "x"))), u,
                           sp::device_put(xs, sp::NamedSharding(m, P(None, "x"))))
                  .find("all_to_all over 'x'"),
              std::string::npos);
  }
}

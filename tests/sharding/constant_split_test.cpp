// A constant read by two uses split differently, against JAX 0.10.2 (goldens from
// tools/goldens/gen_constant_split.py; the cases use its names): every use of a constant
// expression (a constant, iota, or broadcast / reshape / slice / elementwise ops of constants)
// and of a scalar's broadcast gets a copy of its own before propagation, so each takes its other
// operand's split and nothing moves; a constraint is one value with one split. Each
// case checks the printed shardings, the values, and the collectives `explain` lists.
#include <gtest/gtest.h>
#include <spmd/spmd.h>

#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "support/golden.h"

namespace {

namespace sp = spmd;
using sp::Array;
using sp::None;
using sp::P;

std::string golden(const std::string& name) {
  const auto blocks = spmd_test::golden_blocks("sharding/constant_split.txt");
  auto it = blocks.find(name);
  return it == blocks.end() ? "(missing golden " + name + ")" : it->second;
}

template <class T>
std::string reprs(const T& tree) {
  return spmd_test::sharding_reprs(sp::tree_flatten(tree).first);
}

Array loss_product(const std::tuple<Array, Array>& uv) {
  return sp::sum(std::get<0>(uv) * std::get<1>(uv));
}

class ConstantSplitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sp::device_count() < 8) GTEST_SKIP() << "needs 8 devices (SPMD_CPU_DEVICES=8)";
  }

  // jit(o * u, o * v) with o = make(): the shardings, values and collectives of the case.
  void expect_shared(const std::string& name, const std::function<Array()>& make,
                     const std::string& collectives = "collectives: none") {
    auto f = [&make](const Array& a, const Array& b) {
      const Array o = make();
      return std::make_tuple(o * a, o * b);
    };
    auto jitted = sp::jit(f);
    const auto [ou, ov] = jitted(u, v);
    EXPECT_EQ(reprs(std::make_tuple(ou, ov)), golden(name)) << name;
    const Array o = make();
    EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(ou), o * x)) << name;
    EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(ov), o * x)) << name;
    EXPECT_NE(jitted.explain(u, v).find(collectives), std::string::npos)
        << name << ":\n" << jitted.explain(u, v);
  }

  sp::Mesh m = sp::make_mesh({8}, {"a"});
  Array x = sp::arange(256.0f).reshape({16, 16});
  Array u = sp::device_put(x, sp::NamedSharding(m, P("a", None)));
  Array v = sp::device_put(x, sp::NamedSharding(m, P(None, "a")));
};

TEST_F(ConstantSplitTest, EachGradientFollowsTheOtherOperandAndNothingMoves) {
  const auto uv = std::make_tuple(u, v);
  const auto eager = sp::grad(loss_product)(uv);
  EXPECT_EQ(reprs(eager), golden("grad_product"));
  auto jitted = sp::jit(sp::grad(loss_product));
  const auto [du, dv] = jitted(uv);
  EXPECT_EQ(reprs(std::make_tuple(du, dv)), golden("jit_grad_product"));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(du), x));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(dv), x));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(std::get<0>(eager)), x));
  // The cotangent's broadcast is copied for each product, and the loss itself is unused.
  const std::string account = jitted.explain(uv);
  EXPECT_NE(account.find("collectives: none"), std::string::npos) << account;
}

TEST_F(ConstantSplitTest, ConstantExpressionsAreCopiedForEachUse) {
  expect_shared("ones", [] { return sp::ones({16, 16}); });
  expect_shared("sin_of_ones", [] { return sp::sin(sp::ones({16, 16})); });
  expect_shared("iota", [] { return sp::lax::broadcasted_iota(sp::float32, {16, 16}, 1); });
  // The slice of the copy split along its columns is computed in place: each device takes
  // its block of the whole constant, with no halo.
  expect_shared("reshaped_and_sliced", [] {
    return sp::lax::slice(sp::ones({512}).reshape({16, 32}), {0, 8}, {16, 24});
  });
}

TEST_F(ConstantSplitTest, AScalarsBroadcastIsCopiedForEachUse) {
  auto f = [](const Array& a, const Array& b, const Array& s) {
    const Array o = sp::broadcast_to(s, {16, 16});
    return std::make_tuple(o * a, o * b);
  };
  const Array s(2.0f);
  const auto [ou, ov] = sp::jit(f)(u, v, s);
  EXPECT_EQ(reprs(std::make_tuple(ou, ov)), golden("scalar_broadcast"));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(ou), x * 2.0f));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(ov), x * 2.0f));
  EXPECT_NE(sp::jit(f).explain(u, v, s).find("collectives: none"), std::string::npos);
}

TEST_F(ConstantSplitTest, AConstantThatIsAlsoAnOutputLeavesReplicated) {
  auto f = [](const Array& a, const Array& b) {
    const Array o = sp::ones({16, 16});
    return std::make_tuple(o, o * a, o * b);
  };
  const auto r = sp::jit(f)(u, v);
  EXPECT_EQ(reprs(r), golden("also_an_output"));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(std::get<0>(r)), sp::ones({16, 16})));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(std::get<2>(r)), x));
}

TEST_F(ConstantSplitTest, AConstrainedConstantIsOneValue) {
  const sp::NamedSharding rows(m, P("a"));
  expect_shared(
      "constrained",
      [&rows] { return sp::with_sharding_constraint(sp::ones({16, 16}), rows); },
      "all_to_all");
}

}  // namespace

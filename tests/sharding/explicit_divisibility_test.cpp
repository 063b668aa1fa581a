// On a mesh with Explicit axes, a sharding's dims split by Explicit axes must divide the array's
// dims: JAX 0.10.2 checks it for the array's type, before the placement's own check, with the
// type's text (goldens tests/goldens/explicit/divisibility_errors.txt, recorded by
// tools/goldens/gen_explicit_divisibility.py; X = arange(48).reshape(8, 6)).
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "support/golden.h"

namespace {

namespace sp = spmd;
using sp::None;
using sp::P;

constexpr sp::AxisType kE = sp::AxisType::Explicit;
constexpr sp::AxisType kA = sp::AxisType::Auto;

class ExplicitDivisibilityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sp::device_count() < 8) GTEST_SKIP() << "needs 8 devices (SPMD_CPU_DEVICES=8)";
  }
  static sp::Array x() { return sp::arange(48.f).reshape({8, 6}); }
  static sp::NamedSharding on(const sp::Shape& shape, std::vector<sp::AxisType> types,
                              sp::PartitionSpec spec) {
    std::vector<std::string> names{"a", "b"};
    names.resize(size_t(shape.ndim()));
    return sp::NamedSharding(sp::make_mesh(shape, names, std::move(types)), std::move(spec));
  }
  // f's error against case `name`, after the API's bracketed prefix.
  static void expect_error(const std::string& name, const std::string& api,
                           const std::function<void()>& f) {
    std::string got = "(no error)";
    try {
      f();
    } catch (const sp::ShardingError& e) {
      got = e.what();
    }
    EXPECT_EQ(got, "[" + api + "] " + spmd_test::jax_error("explicit/divisibility_errors.txt", name))
        << name;
  }
};

TEST_F(ExplicitDivisibilityTest, PlacingOnExplicitAxesChecksTheType) {
  expect_error("put_explicit_columns", "device_put",
               [] { sp::device_put(x(), on({4, 2}, {kE, kE}, P(None, "a"))); });
  expect_error("put_explicit_tuple", "device_put",
               [] { sp::device_put(x(), on({2, 4}, {kE, kE}, P(None, sp::AxisNames(std::vector<std::string>{"a", "b"})))); });
  // A spec shorter than the array is padded with None in the type's sharding.
  expect_error("put_explicit_short_spec", "device_put",
               [] { sp::device_put(x().T(), on({4, 2}, {kE, kE}, P("a"))); });
  expect_error("put_explicit_1d", "device_put",
               [] { sp::device_put(sp::arange(6.f), on({4, 2}, {kE, kE}, P("a"))); });
  expect_error("put_explicit_one_axis", "device_put",
               [] { sp::device_put(x(), on({8}, {kE}, P(None, "a"))); });
}

TEST_F(ExplicitDivisibilityTest, ReshardChecksTheTypeEagerlyAndTraced) {
  expect_error("reshard_explicit_columns", "reshard",
               [] { sp::reshard(x(), on({4, 2}, {kE, kE}, P(None, "a"))); });
  const sp::NamedSharding columns = on({4, 2}, {kE, kE}, P(None, "a"));
  expect_error("jit_reshard_explicit_columns", "reshard", [&] {
    sp::jit([&](const sp::Array& v) { return sp::reshard(v, columns); })(x());
  });
}

TEST_F(ExplicitDivisibilityTest, OnAMixedMeshOnlyTheExplicitAxesAreTheTypes) {
  // The type keeps 'a' of ('a', 'b'): 4 does not divide 6.
  expect_error("put_mixed_tuple_explicit_part", "device_put", [] {
    sp::device_put(x(), on({4, 2}, {kE, kA}, P(None, sp::AxisNames(std::vector<std::string>{"a", "b"}))));
  });
  expect_error("put_mixed_explicit_axis", "device_put",
               [] { sp::device_put(x(), on({4, 2}, {kE, kA}, P(None, "a"))); });
  // An Auto axis splitting a dim unevenly is the placement's error, as on an Auto mesh.
  expect_error("put_mixed_auto_axis", "device_put",
               [] { sp::device_put(x(), on({4, 2}, {kA, kE}, P(None, "a"))); });
  expect_error("put_mixed_auto_and_explicit", "device_put",
               [] { sp::device_put(x(), on({4, 2}, {kA, kE}, P("b", "a"))); });
}

TEST_F(ExplicitDivisibilityTest, OutShardingsAreTypesToo) {
  const sp::Mesh m = sp::make_mesh({4, 2}, {"a", "b"}, {kE, kE});
  const sp::Array v = sp::device_put(x(), sp::NamedSharding(m, P("a", None)));
  const sp::Array w = sp::device_put(sp::ones({6, 6}), sp::NamedSharding(m, P(None, None)));
  const sp::NamedSharding columns(m, P(None, "a")), rows(m, P("a", None));
  auto matmul = [&](const sp::Array& a, const sp::Array& b) { return sp::matmul(a, b, columns); };
  auto reshape = [&](const sp::Array& a) { return sp::reshape(a, {6, 8}, rows); };
  expect_error("matmul_out_sharding", "dot_general", [&] { matmul(v, w); });
  expect_error("jit_matmul_out_sharding", "dot_general", [&] { sp::jit(matmul)(v, w); });
  expect_error("reshape_out_sharding", "reshape", [&] { reshape(v); });
  expect_error("jit_reshape_out_sharding", "reshape", [&] { sp::jit(reshape)(v); });
  expect_error("einsum_out_sharding", "dot_general",
               [&] { sp::einsum("ij,jk->ik", {v, w}, {.out_sharding = columns}); });
}

TEST_F(ExplicitDivisibilityTest, EvenSplitsStillPlace) {
  const sp::Array y = sp::device_put(x(), on({4, 2}, {kE, kE}, P("a", "b")));
  EXPECT_EQ(sp::type_of(y).str(), "float32[8@a,6@b]");
  EXPECT_TRUE(sp::array_equal(y, x()));
}

}  // namespace

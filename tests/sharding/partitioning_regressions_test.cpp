// Failures the differential tester (differential_test.cpp) found, minimised: each runs a program
// on committed inputs and checks its values and where the results live. The seed in each
// comment is the tester's program that first showed it.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace sp = spmd;
using sp::Array;
using sp::P;

namespace {

bool on_mesh(const Array& x, const sp::Mesh& mesh) {
  auto named = std::dynamic_pointer_cast<const sp::NamedSharding>(x.sharding());
  return x.committed() && named && named->mesh() == mesh;
}

std::vector<float> iota_values(int64_t n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(i) * scale;
  return v;
}

// Seeds 86 and 594: jit's out_shardings must win over a sharding constraint on the returned
// value, as JAX reshards the result to out_shardings. The constrained split was returned as it
// was.
TEST(PartitioningRegressions, OutShardingsReshardAConstrainedResult) {
  if (sp::devices().size() < 8) GTEST_SKIP() << "needs 8 devices";
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"x", "y"});
  Array plain = sp::array(iota_values(64, 1), {8, 8});
  Array x = sp::device_put(plain, sp::NamedSharding(mesh, P("x")));
  auto constrained = [&mesh](const Array& a) {
    return sp::with_sharding_constraint(a, sp::NamedSharding(mesh, P("x", "y")));
  };
  sp::NamedSharding want(mesh, P("y", "x"));
  Array y = sp::jit(constrained, {.out_shardings = want})(x);
  EXPECT_TRUE(sp::array_equal(sp::device_get(y), plain));
  ASSERT_TRUE(on_mesh(y, mesh));
  EXPECT_EQ(*y.sharding(), want) << y.sharding()->repr();
}

// Seed 190: the same with a replicated out_shardings: the result came out split over 'x'.
TEST(PartitioningRegressions, ReplicatedOutShardingsGatherAConstrainedResult) {
  if (sp::devices().size() < 8) GTEST_SKIP() << "needs 8 devices";
  sp::Mesh mesh = sp::make_mesh({2, 4}, {"x", "y"});
  Array plain = sp::array(iota_values(8, 1), {8});
  Array x = sp::device_put(plain, sp::NamedSharding(mesh, P("y")));
  auto constrained = [&mesh](const Array& a) {
    return sp::with_sharding_constraint(a * 2, sp::NamedSharding(mesh, P("x")));
  };
  sp::NamedSharding want(mesh, P());
  Array y = sp::jit(constrained, {.out_shardings = want})(x);
  EXPECT_TRUE(sp::array_equal(sp::device_get(y), plain * 2));
  ASSERT_TRUE(on_mesh(y, mesh));
  EXPECT_EQ(*y.sharding(), want) << y.sharding()->repr();
}

// Seeds 19 and 208: eager value_and_grad of a function of a committed array computes on the
// default device and returns uncommitted results; JAX returns the value and the gradient
// committed to the argument's mesh (here P() and P('x')).
TEST(PartitioningRegressions, EagerValueAndGradOfCommittedArgumentsStaysOnTheMesh) {
  if (sp::devices().size() < 8) GTEST_SKIP() << "needs 8 devices";
  sp::Mesh mesh = sp::make_mesh({8}, {"x"});
  Array plain = sp::array(iota_values(16, 1.0f / 16), {16});
  Array x = sp::device_put(plain, sp::NamedSharding(mesh, P("x")));
  auto [value, grad] = sp::value_and_grad([](const Array& a) { return sp::sum(a * a); })(x);
  EXPECT_EQ(sp::device_get(value).item<float>(), 1240.0f / 256);  // exact: sum of k^2 / 256
  EXPECT_TRUE(sp::array_equal(sp::device_get(grad), plain * 2));
  EXPECT_TRUE(on_mesh(value, mesh)) << value.sharding()->repr();
  EXPECT_TRUE(on_mesh(grad, mesh)) << grad.sharding()->repr();
}

}  // namespace

// Failures the differential tester (differential_test.cpp) found, minimised: each runs a program
// on committed inputs and checks its values and where the results live. The seed in each
// comment is the tester's program that first showed it.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
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

// Programs whose annotations split only results: a constraint or out_shardings splitting a dim
// the operands replicate, reductions and products whose result is constrained to a split their
// operands lack, on 1-D and 2-D meshes with dims the axes divide and dims they do not (split
// inside the program: arguments must divide). A rule
// that fixed the result's split but not the operands' would compute on the wrong blocks (half
// zeros, once). Each must give the unsharded result exactly (small integer values).
struct ResultOnlySplit {
  std::string name;
  sp::Shape mesh_shape;
  std::vector<sp::Shape> shapes;
  std::vector<P> in_specs;
  // The program; `constrain(x, spec)` is with_sharding_constraint on the mesh (none unsharded).
  std::function<Array(const std::vector<Array>&,
                      const std::function<Array(const Array&, const P&)>& constrain)>
      fn;
  std::optional<P> out_spec = {};  // jit's out_shardings
};

Array small_integers(const sp::Shape& shape, int salt) {
  std::vector<float> v(static_cast<size_t>(shape.size()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(int(i * 7 + size_t(salt) * 3) % 9 - 4);
  return sp::array(v, shape);
}

std::vector<ResultOnlySplit> result_only_splits() {
  using V = const std::vector<Array>&;
  using C = const std::function<Array(const Array&, const P&)>&;
  const P x("x"), xy("x", "y"), none_x(sp::None, "x"), none_y(sp::None, "y"), rep;
  return {
      {"elementwise of replicated operands constrained to split", {8}, {{16, 4}, {16, 4}},
       {rep, rep}, [=](V a, C c) { return c(a[0] * a[1] + 1.0f, x); }},
      {"out_shardings split a replicated dim", {8}, {{16, 8}}, {rep},
       [](V a, C) { return sp::sin(a[0]) * 0.0f + a[0] * 2.0f; }, none_x},
      {"sum over a split dim constrained to split the kept dim", {8}, {{16, 8}}, {x},
       [=](V a, C c) { return c(sp::sum(a[0], {0}), x); }},
      {"sum of a replicated operand constrained to split", {4, 2}, {{6, 8}}, {rep},
       [=](V a, C c) { return c(sp::sum(a[0], {0}), P(("x"))); }},
      {"sum over a dim split unevenly, constrained", {4, 2}, {{6, 10}}, {rep},
       [=](V a, C c) { return c(sp::sum(c(a[0], P("y", "x")), {0}), x); }},
      {"max over both dims constrained to replicate", {4, 2}, {{8, 8}}, {xy},
       [=](V a, C c) { return c(sp::max(a[0], {0, 1}), rep); }},
      {"dot of a contracting split constrained to split both result dims", {4, 2},
       {{8, 16}, {16, 4}}, {none_x, P("x")},
       [=](V a, C c) { return c(sp::matmul(a[0], a[1]), xy); }},
      {"dot of replicated operands constrained to split", {4, 2}, {{8, 6}, {6, 4}}, {rep, rep},
       [=](V a, C c) { return c(sp::matmul(a[0], a[1]), P("y", "x")); }},
      {"dot constrained to a transposed split", {4, 2}, {{8, 8}, {8, 8}}, {xy, xy},
       [=](V a, C c) { return c(sp::matmul(a[0], a[1]), P("y", "x")); }},
      {"dot split unevenly, result constrained to split", {4, 2}, {{5, 7}, {7, 3}}, {rep, rep},
       [=](V a, C c) { return c(sp::matmul(c(a[0], none_y), a[1]), xy); }},
      {"batched dot constrained to split the contracting-free dims", {2, 4}, {{2, 6, 8}, {2, 8, 4}},
       {P(sp::None, sp::None, "y"), P(sp::None, "y")},
       [=](V a, C c) { return c(sp::matmul(a[0], a[1]), P(sp::None, "y", "x")); }},
      {"dot of a split operand constrained then summed", {8}, {{16, 8}, {8, 8}}, {x, none_x},
       [=](V a, C c) { return sp::sum(c(sp::matmul(a[0], a[1]), none_x), {1}); }},
      {"constrained product feeding an elementwise op", {4, 2}, {{8, 8}, {8, 8}}, {x, none_y},
       [=](V a, C c) { return c(sp::matmul(a[0], a[1]), P("y")) + a[0]; }},
      {"transpose constrained to split", {8}, {{8, 16}}, {x},
       [=](V a, C c) { return c(sp::transpose(a[0]), x); }},
      {"cumsum constrained to split its dim", {4, 2}, {{8, 6}}, {rep},
       [=](V a, C c) { return c(sp::cumsum(a[0], 0), xy); }},
      {"broadcast constrained to split", {4, 2}, {{6}}, {rep},
       [=](V a, C c) { return c(sp::broadcast_to(a[0], {8, 6}), xy); }},
      {"reshape constrained to split", {8}, {{4, 8}}, {none_x},
       [=](V a, C c) { return c(sp::reshape(a[0], {32}), x); }},
      {"argmax over a split dim constrained to split the kept dim", {8}, {{16, 8}}, {x},
       [=](V a, C c) { return c(sp::argmax(a[0], 0), x); }},
      {"argmin over a dim split on both axes, constrained", {4, 2}, {{8, 4}},
       {P(sp::AxisNames(std::vector<std::string>{"x", "y"}))}, [=](V a, C c) { return c(sp::argmin(a[0], 0), P("y")); }},
      {"cumsum over a split dim constrained to the other split", {4, 2}, {{8, 8}}, {xy},
       [=](V a, C c) { return c(sp::cumsum(a[0], 0), P("y", "x")); }},
      {"dot whose contracting axis splits the constrained result", {8}, {{8, 16}, {16, 8}},
       {none_x, x}, [=](V a, C c) { return c(sp::matmul(a[0], a[1]), x); }},
      {"dot of crosswise splits constrained", {4, 2}, {{8, 8}, {8, 8}}, {P("y", "x"), xy},
       [=](V a, C c) { return c(sp::matmul(a[0], a[1]), xy); }},
      {"sort along a split dim constrained", {8}, {{16, 4}}, {x},
       [=](V a, C c) { return c(sp::sort(a[0], 0), x); }},
      {"flip of an unevenly split dim constrained", {8}, {{12}}, {rep},
       [=](V a, C c) { return c(sp::flip(c(a[0], x)), x); }},
      {"concatenate constrained to another axis", {4, 2}, {{4, 4}, {12, 4}}, {x, x},
       [=](V a, C c) { return c(sp::concatenate({a[0], a[1]}, 0), P("y")); }},
      {"pad constrained to split", {8}, {{6}}, {rep},
       [=](V a, C c) { return c(sp::pad(a[0], {{1, 1}}), x); }},
      {"slice of a split dim constrained", {8}, {{16, 4}}, {x},
       [=](V a, C c) { return c(sp::lax::slice(a[0], {3, 0}, {11, 4}), x); }},
      {"dynamic_slice of a split dim constrained", {4, 2}, {{16, 4}}, {x},
       [=](V a, C c) {
         return c(sp::lax::dynamic_slice_in_dim(a[0], sp::array(std::vector<int32_t>{5}, {}), 8),
                  xy);
       }},
      {"reshape merging split dims constrained", {4, 2}, {{4, 8}}, {xy},
       [=](V a, C c) { return c(sp::reshape(a[0], {32}), P("y")); }},
      {"reshape of an uneven split constrained", {4, 2}, {{6, 4}}, {rep},
       [=](V a, C c) { return c(sp::reshape(c(a[0], x), {3, 8}), P(sp::None, "x")); }},
      {"gradient through a constrained product", {4, 2}, {{8, 8}, {8, 4}}, {x, rep},
       [=](V a, C c) {
         return sp::grad([&](const Array& u) { return sp::sum(c(sp::matmul(u, a[1]), xy)); })(
             a[0]);
       }},
      {"min over a split dim, kept dims constrained", {4, 2}, {{8, 6}}, {x},
       [=](V a, C c) { return c(sp::min(a[0], {0}, true), P(sp::None, "y")); }},
      {"broadcast operand split on the dim the result does not split", {8}, {{8}, {8, 8}},
       {x, rep}, [=](V a, C c) { return c(a[1] + a[0], x); }},
      {"outer product constrained to split its columns", {4, 2}, {{8}}, {x},
       [=](V a, C c) {
         return c(sp::reshape(a[0], {8, 1}) * sp::reshape(a[0], {1, 8}), P(sp::None, "x"));
       }},
      {"product constrained in a loop carry", {4, 2}, {{8, 8}, {8, 8}}, {x, none_y},
       [=](V a, C c) {
         return sp::lax::fori_loop(
             0, 2,
             [&](const Array&, const Array& v) { return c(sp::matmul(v, a[1]) * 0.25f, xy); },
             a[0]);
       }},
      {"reduction of a transposed constrained value", {4, 2}, {{8, 8}}, {rep},
       [=](V a, C c) { return sp::sum(sp::transpose(c(a[0], xy)), {0}); }},
  };
}

TEST(PartitioningRegressions, ResultOnlySplitsGiveTheUnshardedValues) {
  if (sp::devices().size() < 8) GTEST_SKIP() << "needs 8 devices";
  for (const ResultOnlySplit& c : result_only_splits()) {
    SCOPED_TRACE(c.name);
    std::vector<std::string> names = {"x", "y"};
    names.resize(size_t(c.mesh_shape.ndim()));
    sp::Mesh mesh = sp::make_mesh(c.mesh_shape, names);
    std::vector<Array> plain, placed;
    for (size_t i = 0; i < c.shapes.size(); ++i) {
      plain.push_back(small_integers(c.shapes[i], int(i)));
      placed.push_back(sp::device_put(plain.back(), sp::NamedSharding(mesh, c.in_specs[i])));
    }
    auto unsharded = [&](const Array& v, const P&) { return v; };
    auto constrained = [&](const Array& v, const P& spec) {
      return sp::with_sharding_constraint(v, sp::NamedSharding(mesh, spec));
    };
    Array want = sp::jit([&](const std::vector<Array>& a) { return c.fn(a, unsharded); })(plain);
    sp::JitOptions options;
    if (c.out_spec) options.out_shardings = sp::NamedSharding(mesh, *c.out_spec);
    Array got = sp::jit([&](const std::vector<Array>& a) { return c.fn(a, constrained); },
                        options)(placed);
    EXPECT_TRUE(sp::array_equal(sp::device_get(got), want))
        << "got " << sp::str(sp::device_get(got)) << "\nwant " << sp::str(want);
    EXPECT_TRUE(on_mesh(got, mesh)) << got.sharding()->repr();
  }
}

}  // namespace

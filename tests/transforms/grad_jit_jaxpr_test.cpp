// make_jaxpr of grad through jit calls and shard_maps against JAX 0.10.2's text
// (tools/goldens/gen_grad_jaxprs2.py): a call is kept as a forward `jit` equation (primal
// outputs, then residuals) and a transposed one of the same name (residuals, then cotangents);
// a shard_map's residuals leave first, along their existing leading dim, and its transpose
// takes the cotangents first. The gradients' values are JAX's.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "support/golden.h"
#include "support/golden_values.h"

#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace sp = spmd;
using sp::P;
using spmd_test::arrays_close;
using spmd_test::golden_text;

namespace {

using Pair = std::tuple<sp::Array, sp::Array>;

// The gradient JAX computed for case `name`: one line of values per differentiated argument.
std::vector<std::vector<float>> golden_grads(const std::string& name) {
  return spmd_test::golden_float_lines("grad_jaxprs2/" + name + ".grad.txt");
}

sp::Array from(const std::vector<float>& values, const sp::Shape& shape) {
  return sp::array(values).reshape(shape);
}

// xs() of the generator: 0.25·i + start.
sp::Array xs(float start = 0.5f) {
  return sp::arange(3.0f) * 0.25f + start;
}

auto g = sp::jit([](const sp::Array& x) { return sp::sin(x) * x; }, {.name = "g"});
auto h = sp::jit([](const sp::Array& x) { return 2.0f * x; }, {.name = "h"});
auto outer = sp::jit([](const sp::Array& x) { return g(x) + 1.0f; }, {.name = "outer"});
auto two = sp::jit([](const sp::Array& x, const sp::Array& y) { return sp::exp(x) * y; },
                   {.name = "two"});
auto pair = sp::jit(
    [](const sp::Array& x) {
      sp::Array square = x * x;  // traced first, as in JAX
      return Pair(square, sp::cos(x));
    },
    {.name = "pair"});
auto power = sp::jit([](const sp::Array& x, int n) { return sp::integer_pow(x, n); },
                     {.name = "power"});
auto tree = sp::jit(
    [](const std::map<std::string, sp::Array>& p) { return sp::tanh(p.at("w")) * p.at("b"); },
    {.name = "tree"});
auto first = sp::jit([](const sp::Array& x, const sp::Array&) { return x * 3.0f; },
                     {.name = "first"});

// For the shard_map cases (named sm_...), the gradients print the shardings JAX's do.
void expect_shardings(const std::string& name, const std::vector<sp::Array>& grads) {
  if (name.rfind("sm_", 0) != 0) return;
  std::string got;
  for (const sp::Array& g : grads) got += g.sharding()->repr() + "\n";
  EXPECT_EQ(got, golden_text("grad_jaxprs2/" + name + ".sharding.txt") + "\n");
}

// Checks the text of make_jaxpr(grad(f)) and the gradient of one argument.
template <class F>
void check_one(const std::string& name, F loss, const sp::Array& x) {
  SCOPED_TRACE(name);
  EXPECT_EQ(sp::make_jaxpr(sp::grad(loss))(x).str(), golden_text("grad_jaxprs2/" + name + ".txt"));
  const std::vector<std::vector<float>> want = golden_grads(name);
  ASSERT_EQ(want.size(), 1u);
  const sp::Array grad = sp::grad(loss)(x);
  EXPECT_TRUE(arrays_close(grad, from(want[0], x.shape())));
  expect_shardings(name, {grad});
}

// Checks the text of make_jaxpr(grad(f)) of two arguments passed as one tuple, and both
// gradients.
template <class F>
void check_two(const std::string& name, F loss, const sp::Array& x, const sp::Array& y) {
  SCOPED_TRACE(name);
  const Pair args(x, y);
  EXPECT_EQ(sp::make_jaxpr(sp::grad(loss))(args).str(), golden_text("grad_jaxprs2/" + name + ".txt"));
  const std::vector<std::vector<float>> want = golden_grads(name);
  ASSERT_EQ(want.size(), 2u);
  auto [gx, gy] = sp::grad(loss)(args);
  EXPECT_TRUE(arrays_close(gx, from(want[0], x.shape())));
  EXPECT_TRUE(arrays_close(gy, from(want[1], y.shape())));
  expect_shardings(name, {gx, gy});
}

TEST(GradJitJaxpr, KeepsTheCallAsAForwardAndATransposedCall) {
  check_one("jit_sin_mul", [](const sp::Array& x) { return sp::sum(g(x)); }, xs());
}

TEST(GradJitJaxpr, LinearBodyKeepsNoResiduals) {
  check_one("jit_linear", [](const sp::Array& x) { return sp::sum(h(x)); }, xs());
}

TEST(GradJitJaxpr, NestedCalls) {
  check_one("jit_nested", [](const sp::Array& x) { return sp::sum(outer(x)); }, xs());
}

TEST(GradJitJaxpr, StaticArgument) {
  check_one("jit_static", [](const sp::Array& x) { return sp::sum(power(x, 3)); }, xs());
}

TEST(GradJitJaxpr, UnusedResultHasAZeroCotangent) {
  check_one("jit_unused_result", [](const sp::Array& x) { return sp::sum(std::get<1>(pair(x))); },
            xs());
}

TEST(GradJitJaxpr, UnderVmap) {
  auto loss = [](const sp::Array& x) { return sp::sum(sp::vmap(g)(x)); };
  check_one("jit_under_vmap", loss, sp::arange(6.0f).reshape({2, 3}) * 0.25f);
}

TEST(GradJitJaxpr, ChainOfCalls) {
  check_one("jit_chain", [](const sp::Array& x) { return sp::sum(h(g(x))); }, xs());
}

TEST(GradJitJaxpr, TwoArguments) {
  check_two("jit_two_args", [](const Pair& p) { return sp::sum(two(std::get<0>(p), std::get<1>(p))); },
            xs(), xs(1.0f));
}

TEST(GradJitJaxpr, OneOfTwoArgumentsDifferentiated) {
  SCOPED_TRACE("jit_two_args_first");
  auto loss = [](const sp::Array& x, const sp::Array& y) { return sp::sum(two(x, y)); };
  EXPECT_EQ(sp::make_jaxpr(sp::grad(loss))(xs(), xs(1.0f)).str(), golden_text("grad_jaxprs2/jit_two_args_first.txt"));
  const std::vector<std::vector<float>> want = golden_grads("jit_two_args_first");
  EXPECT_TRUE(arrays_close(sp::grad(loss)(xs(), xs(1.0f)), from(want[0], {3})));
}

TEST(GradJitJaxpr, TwoResults) {
  auto loss = [](const sp::Array& x) {
    sp::Array u = std::get<0>(pair(x));
    return sp::sum(u + std::get<1>(pair(x)));
  };
  check_one("jit_two_results", loss, xs());
}

TEST(GradJitJaxpr, ResultThatIsTheCallsInput) {
  auto ident = sp::jit([](const sp::Array& x) { return Pair(x, sp::sin(x)); }, {.name = "ident"});
  auto loss = [&](const sp::Array& x) {
    sp::Array u = std::get<0>(ident(x));
    return sp::sum(u * std::get<1>(ident(x)));
  };
  check_one("jit_forwarded_result", loss, xs());
}

TEST(GradJitJaxpr, PytreeArgument) {
  auto loss = [](const Pair& p) {
    return sp::sum(tree(std::map<std::string, sp::Array>{{"w", std::get<0>(p)}, {"b", std::get<1>(p)}}));
  };
  check_two("jit_pytree", loss, xs(), xs(1.0f));
}

TEST(GradJitJaxpr, ArgumentTheBodyDoesNotRead) {
  check_two("jit_unread_arg",
            [](const Pair& p) { return sp::sum(first(std::get<0>(p), std::get<1>(p))); }, xs(),
            xs(1.0f));
}

// grid() of the generator: 0.03125·i + start, as 8 × 8.
sp::Array grid(float start = 0.0f) {
  return sp::arange(64.0f).reshape({8, 8}) * 0.03125f + start;
}

const sp::Mesh& mesh_a() {
  static const sp::Mesh mesh(sp::create_device_mesh({8}), {"a"});
  return mesh;
}

// The loss sum(shard_map(body)(x)) over mesh_a.
template <class Body>
auto summed(Body body, P in, P out, bool check_vma = true) {
  auto f = sp::shard_map(body, mesh_a(), in, out, {.check_vma = check_vma});
  return [f](const sp::Array& x) { return sp::sum(f(x)); };
}

TEST(GradShardMapJaxpr, ResidualsLeaveFirstAlongTheExistingDim) {
  check_one("sm_sin", summed([](const sp::Array& v) { return sp::sin(v); }, P("a", sp::None),
                             P("a", sp::None)),
            grid());
  check_one("sm_sin_mul",
            summed([](const sp::Array& v) { return sp::sin(v) * v; }, P("a"), P("a")), grid());
}

TEST(GradShardMapJaxpr, ResidualThatIsTheOutput) {
  check_one("sm_exp", summed([](const sp::Array& v) { return sp::exp(v); }, P(sp::None, "a"),
                             P(sp::None, "a")),
            grid());
}

TEST(GradShardMapJaxpr, BlocksSplitOnDimOne) {
  check_one("sm_sin_mul_dim1",
            summed([](const sp::Array& v) { return sp::sin(v) * v; }, P(sp::None, "a"),
                   P(sp::None, "a")),
            grid());
}

TEST(GradShardMapJaxpr, TwoAxesWithoutVmaCheck) {
  sp::Mesh mesh(sp::create_device_mesh({4, 2}), {"x", "y"});
  auto f = sp::shard_map([](const sp::Array& v) { return sp::sin(v) * v; }, mesh,
                         P("x", sp::None), P("x", sp::None), {.check_vma = false});
  check_one("sm_sin_mul_2d_no_vma", [f](const sp::Array& x) { return sp::sum(f(x)); }, grid());
}

TEST(GradShardMapJaxpr, ScalarResidual) {
  check_one("sm_scalar_residual",
            summed([](const sp::Array& v) { return sp::sum(v) * v; }, P("a", sp::None),
                   P("a", sp::None)),
            grid());
}

TEST(GradShardMapJaxpr, UnderPsum) {
  check_one("sm_psum_sin",
            summed([](const sp::Array& v) { return sp::lax::psum(sp::sin(v), "a"); },
                   P("a", sp::None), P()),
            grid());
}

TEST(GradShardMapJaxpr, TwoOperands) {
  auto f = sp::shard_map([](const sp::Array& u, const sp::Array& v) { return u * v; }, mesh_a(),
                         {P("a", sp::None), P("a", sp::None)}, P("a", sp::None));
  check_two("sm_mul_two", [f](const Pair& p) { return sp::sum(f(std::get<0>(p), std::get<1>(p))); },
            grid(), grid(1.0f));
}

TEST(GradShardMapJaxpr, LinearBody) {
  check_one("sm_linear", summed([](const sp::Array& v) { return 2.0f * v; }, P("a", sp::None),
                                P("a", sp::None)),
            grid());
}

}  // namespace

// make_jaxpr of grad through jit calls with in_shardings/out_shardings, and of the pullback of an
// eager vjp, against JAX 0.10.2's text (tools/goldens/gen_grad_jaxprs3.py): the call is kept as
// a forward `jit` and a transposed one whose shardings are the forward's swapped; an eager vjp's
// pullback holds the transposed call. Values and the gradients' shardings are JAX's. Also: an
// eager grad through a call traces the call's transposition once.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "support/golden.h"
#include "support/golden_values.h"
#include "transforms/interpreters.h"

#include <string>
#include <tuple>
#include <vector>

namespace sp = spmd;
using sp::P;
using spmd_test::arrays_close;
using spmd_test::golden_text;

namespace {

using Pair = std::tuple<sp::Array, sp::Array>;

std::string golden(const std::string& name, const std::string& suffix) {
  return golden_text("grad_jaxprs3/" + name + suffix);
}

// Checks results against the golden values of `name` (and, with `shardings`, their shardings).
void expect_values(const std::string& name, const std::vector<sp::Array>& got, bool shardings) {
  const std::vector<std::vector<float>> want =
      spmd_test::golden_float_lines("grad_jaxprs3/" + name + ".grad.txt");
  ASSERT_EQ(want.size(), got.size());
  std::string printed;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(arrays_close(got[i], sp::array(want[i]).reshape(got[i].shape()))) << i;
    if (shardings) printed += got[i].sharding()->repr() + "\n";
  }
  if (shardings) {
    EXPECT_EQ(printed, golden(name, ".sharding.txt") + "\n");
  }
}

// xs() of the generator: 0.25·i + start.
sp::Array xs(int64_t n = 8, float start = 0.5f) {
  return sp::arange(float(n)) * 0.25f + start;
}

const sp::Mesh& mesh_a() {
  static const sp::Mesh mesh(sp::create_device_mesh({8}), {"a"});
  return mesh;
}
sp::NamedSharding split() {
  return sp::NamedSharding(mesh_a(), P("a"));
}
sp::NamedSharding whole() {
  return sp::NamedSharding(mesh_a(), P());
}

sp::Array sin_mul(const sp::Array& x) {
  return sp::sin(x) * x;
}

// Checks make_jaxpr(grad(sum ∘ call)) at x (xs() by default), the gradient and its sharding.
template <class Call>
void check_grad(const std::string& name, Call call, const sp::Array& x = xs()) {
  SCOPED_TRACE(name);
  auto loss = [call](const sp::Array& x) { return sp::sum(call(x)); };
  EXPECT_EQ(sp::make_jaxpr(sp::grad(loss))(x).str(), golden(name, ".txt"));
  expect_values(name, {sp::grad(loss)(x)}, true);
}

TEST(GradJitShardingsJaxpr, InAndOutShardingsSwapInTheTransposedCall) {
  check_grad(
      "jit_shard_both",
      sp::jit(sin_mul, {.name = "sin_mul", .in_shardings = split(), .out_shardings = whole()}));
}

TEST(GradJitShardingsJaxpr, InShardingsOnly) {
  check_grad("jit_shard_in", sp::jit(sin_mul, {.name = "sin_mul", .in_shardings = split()}));
}

TEST(GradJitShardingsJaxpr, OutShardingsOnly) {
  check_grad("jit_shard_out", sp::jit(sin_mul, {.name = "sin_mul", .out_shardings = split()}));
}

TEST(GradJitShardingsJaxpr, TwoArgumentsShardedDifferently) {
  SCOPED_TRACE("jit_shard_two");
  auto two = sp::jit([](const sp::Array& x, const sp::Array& y) { return sp::exp(x) * y; },
                     {.name = "two", .in_shardings = {split(), whole()}, .out_shardings = split()});
  auto loss = [two](const Pair& p) { return sp::sum(two(std::get<0>(p), std::get<1>(p))); };
  const Pair args(xs(), xs(8, 1.0f));
  EXPECT_EQ(sp::make_jaxpr(sp::grad(loss))(args).str(), golden("jit_shard_two", ".txt"));
  auto [gx, gy] = sp::grad(loss)(args);
  expect_values("jit_shard_two", {gx, gy}, true);
}

auto g = sp::jit(sin_mul, {.name = "g"});

// Checks make_jaxpr(pullback)(ones) of an eager vjp of one argument, and the pullback's value.
template <class F>
void check_pullback(const std::string& name, F f) {
  SCOPED_TRACE(name);
  auto [out, pullback] = sp::vjp(f, xs(3));
  const sp::Array ct = sp::ones_like(out);
  EXPECT_EQ(sp::make_jaxpr([&](const sp::Array& c) { return std::get<0>(pullback(c)); })(ct).str(),
            golden(name, ".txt"));
  expect_values(name, {std::get<0>(pullback(ct))}, false);
}

TEST(EagerVjpJaxpr, PullbackKeepsTheTransposedCall) {
  check_pullback("eager_vjp_call", [](const sp::Array& x) { return g(x); });
}

TEST(EagerVjpJaxpr, CallBetweenOtherOperations) {
  check_pullback("eager_vjp_inner_call", [](const sp::Array& x) { return sp::cos(g(x)); });
}

TEST(EagerVjpJaxpr, TwoArguments) {
  SCOPED_TRACE("eager_vjp_two");
  auto two = sp::jit([](const sp::Array& x, const sp::Array& y) { return sp::exp(x) * y; },
                     {.name = "plain_two"});
  auto [out, pullback] = sp::vjp(two, xs(3), xs(3, 1.0f));
  const sp::Array ct = sp::ones_like(out);
  EXPECT_EQ(sp::make_jaxpr([&](const sp::Array& c) { return pullback(c); })(ct).str(),
            golden("eager_vjp_two", ".txt"));
  auto [gx, gy] = pullback(ct);
  expect_values("eager_vjp_two", {gx, gy}, false);
}

// An eager grad through a call traces the call's transposition on its first call only, for
// every placement of the same types.
TEST(EagerGradThroughCall, TracesTheTransposedCallOnce) {
  auto h = sp::jit([](const sp::Array& x) { return sp::tanh(x) * x; }, {.name = "h"});
  auto loss = [h](const sp::Array& x) { return sp::sum(h(x)); };
  const sp::Array first = sp::grad(loss)(xs(5));
  const int64_t traced = sp::transposed_call_trace_count();
  for (int i = 0; i < 3; ++i) {
    const sp::Array again = sp::grad(loss)(xs(5, 0.25f * float(i)));
    EXPECT_EQ(again.shape(), first.shape());
  }
  auto [out, pullback] = sp::vjp(h, xs(5));
  pullback(sp::ones_like(out));
  pullback(sp::ones_like(out));
  EXPECT_EQ(sp::transposed_call_trace_count(), traced);
  // Another operand type traces it again.
  sp::grad(loss)(xs(6));
  EXPECT_EQ(sp::transposed_call_trace_count(), traced + 1);
}

// grid() of the generator: 0.03125·i + start, as 8 × 8.
sp::Array grid(float start = 0.0f) {
  return sp::arange(64.0f).reshape({8, 8}) * 0.03125f + start;
}

// Checks make_jaxpr of jvp(f) of one primal and one tangent, and the primal and tangent
// outputs' values and shardings.
template <class F>
void check_jvp(const std::string& name, F f) {
  SCOPED_TRACE(name);
  auto both = [f](const sp::Array& x, const sp::Array& t) { return sp::jvp(f, x, t); };
  EXPECT_EQ(sp::make_jaxpr(both)(grid(), grid(1.0f)).str(), golden(name, ".txt"));
  auto [leaves, def] = sp::tree_flatten(both(grid(), grid(1.0f)));
  expect_values(name, leaves, true);
}

TEST(JvpShardMapJaxpr, OneShardMapOfPrimalsAndTangents) {
  check_jvp("jvp_sm_sin_mul", sp::shard_map([](const sp::Array& v) { return sp::sin(v) * v; },
                                            mesh_a(), P("a"), P("a")));
}

TEST(JvpShardMapJaxpr, TangentReplicatedAsThePrimal) {
  check_jvp("jvp_sm_psum_sin",
            sp::shard_map([](const sp::Array& v) { return sp::lax::psum(sp::sin(v), "a"); },
                          mesh_a(), P("a", sp::None), P()));
}

TEST(JvpShardMapJaxpr, TwoResults) {
  check_jvp("jvp_sm_two_results",
            sp::shard_map(
                [](const sp::Array& v) {
                  sp::Array e = sp::exp(v);  // traced first, as in JAX
                  return Pair(e, 2.0f * v);
                },
                mesh_a(), P(sp::None, "a"), {P(sp::None, "a"), P(sp::None, "a")}));
}

TEST(GradShardMapConstJaxpr, ConstantAfterTheResiduals) {
  const sp::Array c = sp::arange(8.0f) * 0.5f;
  check_grad(
      "sm_const",
      sp::shard_map([c](const sp::Array& v) { return sp::sin(v) * c; }, mesh_a(), P("a"), P("a")),
      grid());
}

TEST(GradShardMapConstJaxpr, ReplicatedOperandSummedWithOutSharding) {
  SCOPED_TRACE("sm_replicated_operand");
  auto f = sp::shard_map([](const sp::Array& u, const sp::Array& v) { return u * v; }, mesh_a(),
                         {P("a"), P()}, P("a"));
  auto loss = [f](const Pair& p) { return sp::sum(f(std::get<0>(p), std::get<1>(p))); };
  const Pair args(grid(), grid()[0]);
  EXPECT_EQ(sp::make_jaxpr(sp::grad(loss))(args).str(),
            golden("sm_replicated_operand", ".txt"));
  auto [gu, gv] = sp::grad(loss)(args);
  expect_values("sm_replicated_operand", {gu, gv}, true);
}

TEST(GradShardMapConstJaxpr, ReshapeTransposedOntoTheManualMesh) {
  check_grad("sm_reshape",
             sp::shard_map([](const sp::Array& v) { return sp::sin(sp::reshape(v, {8})); },
                           mesh_a(), P("a"), P("a")),
             grid());
}

TEST(GradShardMapConstJaxpr, ConstantResidualWithoutVmaCheck) {
  const sp::Array c = (sp::arange(8.0f) * 0.5f).reshape({1, 8});
  check_grad("sm_const_no_vma",
             sp::shard_map([c](const sp::Array& v) { return sp::sin(v) * c; }, mesh_a(), P("a"),
                           P("a"), {.check_vma = false}),
             grid());
}

TEST(JvpJitJaxpr, OneCallOfPrimalsAndTangents) {
  auto both = [](const sp::Array& x, const sp::Array& t) { return sp::jvp(g, x, t); };
  EXPECT_EQ(sp::make_jaxpr(both)(xs(3), xs(3, 1.0f)).str(), golden("jvp_jit_sin_mul", ".txt"));
  auto [out, tout] = both(xs(3), xs(3, 1.0f));
  expect_values("jvp_jit_sin_mul", {out, tout}, false);
}

}  // namespace

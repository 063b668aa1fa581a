// A jit equation's params as JAX 0.10.2 prints them (tools/goldens/gen_jit_ctx_mesh.py):
// `jit[name=g ctx_mesh=... jaxpr={...}]`, ctx_mesh being the mesh in context (sp::use_mesh) or,
// without one, the abstract mesh of a shard_map body that keeps an Explicit axis; the calls
// transformations derive from a call keep it. The jaxpr text and the values.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "support/golden.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace {

namespace sp = spmd;
using sp::Array;
using sp::P;

using Fn = std::function<std::vector<Array>(std::vector<Array>)>;

class JitCtxMesh : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sp::device_count() < 8) GTEST_SKIP() << "needs 8 CPU devices";
  }

  // make_jaxpr(f) under `mesh` (none: no mesh in context) prints JAX's text of case `name`, and
  // f gives JAX's values (sin within float32 rounding).
  static void expect_case(const std::string& name, const std::optional<sp::Mesh>& mesh, const Fn& f,
                          const std::vector<Array>& args) {
    auto scope = sp::use_mesh(mesh ? *mesh : sp::Mesh());
    EXPECT_EQ(sp::make_jaxpr(f)(args).str(),
              spmd_test::golden_blocks("jit_ctx_mesh/cases.txt").at(name))
        << name;
    const std::vector<Array> outs = f(args);
    const auto& values = spmd_test::load_golden("jit_ctx_mesh/values.npz");
    for (size_t i = 0; i < outs.size(); ++i) {
      const std::string key = outs.size() == 1 ? name : name + "." + std::to_string(i);
      EXPECT_TRUE(spmd_test::arrays_close(sp::device_get(outs[i]), values.at(key))) << key;
    }
  }

  static Array g(const Array& x) { return sp::lax::mul(sp::lax::sin(x), 2.0f); }
  static Array jit_g(const Array& x) { return sp::jit(g, {.name = "g"})(x); }
  static Array plus_one(const Array& x) { return sp::lax::add(jit_g(x), 1.0f); }
  // f of one argument as a function of the list of arguments.
  template <class F>
  static Fn unary(F f) {
    return [f](std::vector<Array> xs) { return std::vector<Array>{f(xs[0])}; };
  }
  static std::function<Array(Array)> smap(const sp::Mesh& mesh, const P& in, const P& out) {
    return sp::shard_map([](Array t) { return jit_g(t); }, mesh, in, out);
  }

  static inline const sp::Mesh auto_ = sp::make_mesh({8}, {"a"}, {sp::AxisType::Auto});
  static inline const sp::Mesh explicit_ =
      sp::make_mesh({4, 2}, {"a", "b"}, {sp::AxisType::Explicit, sp::AxisType::Explicit});
  static Array x8() { return sp::arange(8.0f); }
  static Array v() { return sp::arange(64.0f).reshape({8, 8}); }
  static Array put(const Array& x, const P& spec) {
    return sp::device_put(x, sp::NamedSharding(explicit_, spec));
  }
};

TEST_F(JitCtxMesh, ANestedCallPrintsTheMeshInContext) {
  expect_case("nested_no_mesh", std::nullopt, unary(plus_one), {x8()});
  expect_case("nested_auto", auto_, unary(plus_one), {x8()});
  expect_case("nested_explicit", explicit_, unary(plus_one), {x8()});
  expect_case("nested_explicit_committed", explicit_, unary(plus_one), {put(x8(), P("a"))});
}

TEST_F(JitCtxMesh, AnOuterCallAndTheCallItHolds) {
  auto outer = sp::jit(plus_one, {.name = "outer"});
  expect_case("outer_jit_explicit", explicit_, unary(outer), {x8()});
  expect_case("outer_jit_committed_no_mesh", std::nullopt, unary(outer), {put(v(), P("a", "b"))});
}

TEST_F(JitCtxMesh, CallsTransformationsDeriveKeepIt) {
  expect_case("vmap_auto", auto_, unary(sp::vmap(jit_g)), {v()});
  expect_case("jvp_explicit", explicit_,
              [](std::vector<Array> xs) {
                auto [y, t] = sp::jvp(jit_g, xs[0], xs[0]);
                return std::vector<Array>{y, t};
              },
              {x8()});
  expect_case("vjp_auto", auto_,
              unary([](const Array& x) { return std::get<0>(sp::vjp(jit_g, x).second(x)); }),
              {x8()});
}

// Inside a shard_map body: the mesh in context when there is one; else nothing for a body
// manual over every axis of its mesh.
TEST_F(JitCtxMesh, InAShardMapBody) {
  expect_case("smap_auto", std::nullopt, unary(smap(auto_, P("a"), P("a"))), {x8()});
  expect_case("smap_auto_set_mesh", auto_, unary(smap(auto_, P("a"), P("a"))), {x8()});
  const Array x = put(v(), P("a", "b"));
  expect_case("smap_explicit", std::nullopt, unary(smap(explicit_, P("a", "b"), P("a", "b"))), {x});
  expect_case("smap_explicit_set_mesh", explicit_, unary(smap(explicit_, P("a", "b"), P("a", "b"))),
              {x});
}

// A vmapped shard_map manual over 'b' only (its batch split over Explicit 'a'): without a mesh
// in context the body's abstract mesh, 'a' Explicit and 'b' Manual.
TEST_F(JitCtxMesh, InAPartialManualBody) {
  const Array x = put(v(), P("a", "b"));
  auto vmapped = [] { return sp::vmap(smap(explicit_, P("b"), P("b"))); };
  expect_case("partial_manual", std::nullopt, unary(vmapped()), {x});
  expect_case("partial_manual_set_mesh", explicit_, unary(vmapped()), {x});
  expect_case("partial_manual_under_jit", explicit_,
              unary(sp::jit(vmapped(), {.name = "<lambda>"})), {x});
}

}  // namespace

// Explicit sharding mode against JAX 0.10.2, continued: traced *_like ops and autodiff's zeros
// and placeholders keep their operand's type, and the transposes of broadcasting ops and tile
// give the cotangent its primal's sharding (goldens in tests/goldens/explicit/*3.*, recorded by
// tools/goldens/gen_explicit3.py; the cases use its names).
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "sharding/explicit_goldens.h"
#include "support/golden.h"

namespace {

namespace sp = spmd;
using sp::None;
using sp::P;

class Explicit3Test : public spmd_test::ExplicitGoldenTest<3> {
 protected:
  static std::string text(const std::string& name) { return block("texts3.txt", name); }
};

using Unary = std::function<sp::Array(const sp::Array&)>;

// Traced, a *_like has its operand's type; a jit returning it lays it out so.
TEST_F(Explicit3Test, TracedLikesHaveTheirOperandsType) {
  struct Case {
    Unary f;
    sp::Array x;
  };
  const std::map<std::string, Case> cases = {
      {"zeros_like", {[](const sp::Array& v) { return sp::zeros_like(v); }, put(X, P("a", "b"))}},
      {"ones_like", {[](const sp::Array& v) { return sp::ones_like(v); }, put(X, P("a", "b"))}},
      {"full_like",
       {[](const sp::Array& v) { return sp::full_like(v, sp::Array(3.0f)); },
        put(X, P(None, "a"))}},
      {"zeros_like_int",
       {[](const sp::Array& v) { return sp::zeros_like(v, sp::int32); }, put(X, P("b", "a"))}},
      {"ones_like_plus",
       {[](const sp::Array& v) {
          sp::Array twice = v * 2.0f;
          return twice + sp::ones_like(v);
        },
        put(X, P("a", None))}},
  };
  auto scope = sp::use_mesh(m);
  for (const auto& [name, c] : cases) {
    EXPECT_EQ(sp::make_jaxpr(c.f)(c.x).str(), text("jaxpr_" + name)) << name;
    check(name, {sp::jit(c.f)(c.x)});
  }
}

// The placeholders cond's linearization returns for residuals one branch lacks (JAX's
// empty_like_aval) have the residual's type.
TEST_F(Explicit3Test, CondResidualPlaceholdersHaveTheirType) {
  auto f = [](const sp::Array& v, const sp::Array& p) {
    return sp::sum(sp::lax::cond(
        p, [](const sp::Array& w) { return sp::sin(w); },
        [](const sp::Array& w) { return w * 3.0f; }, v));
  };
  const sp::Array x = put(X, P("a", "b"));
  auto scope = sp::use_mesh(m);
  EXPECT_EQ(sp::make_jaxpr(sp::grad(f))(x, sp::Array(true)).str(),
            text("jaxpr_grad_cond_residuals"));
  check("grad_cond_residuals", {sp::grad(f)(x, sp::Array(true))});
}

using Binary = std::function<sp::Array(const sp::Array&, const sp::Array&)>;

// The grads' jaxprs (the cotangent seed resharded as JAX's), types and
// values: the reshapes and sums of the transposes carry the primal's sharding as JAX's do.
TEST_F(Explicit3Test, TransposesGiveTheCotangentItsPrimalsSharding) {
  struct Case {
    Binary f;
    sp::Array u, v;
  };
  const sp::Array x = put(X, P("a", "b"));
  const std::map<std::string, Case> cases = {
      {"grad_convert",
       {[](const sp::Array& u, const sp::Array&) {
          return sp::sum(sp::astype(u, sp::float32) * 2.0f);
        },
        put(sp::astype(X, sp::bfloat16), P("a", "b")), x}},
      {"grad_mul_unbroadcast",
       {[](const sp::Array& u, const sp::Array& v) { return sp::sum(u * v); },
        put(sp::lax::slice(X, {0, 0}, {16, 1}), P("a", None)), x}},
      {"grad_add_unbroadcast",
       {[](const sp::Array& u, const sp::Array& v) { return sp::sum(sp::sin(u + v)); },
        put(sp::lax::slice(X, {0, 0}, {1, 16}), P(None, "b")), x}},
      {"grad_tile",
       {[](const sp::Array& u, const sp::Array&) {
          return sp::sum(sp::sin(sp::tile(u, {1, 2})));
        },
        put(X, P("a", None)), x}},
  };
  auto scope = sp::use_mesh(m);
  for (const auto& [name, c] : cases) {
    check(name, {sp::grad(c.f)(c.u, c.v)});
    // The one-argument cases take x as an unused second argument, which their jaxprs lack.
    const bool two = name == "grad_mul_unbroadcast" || name == "grad_add_unbroadcast";
    const std::string jaxpr =
        two ? sp::make_jaxpr(sp::grad(c.f))(c.u, c.v).str()
            : sp::make_jaxpr(sp::grad([&](const sp::Array& u) { return c.f(u, x); }))(c.u).str();
    EXPECT_EQ(jaxpr, text("jaxpr_" + name)) << name;
  }
}

// An out_sharding given to an op prints as it was written (P('a',) for a [16, 16] result),
// where the shardings the transposes pass on print in full (P('a', None) above), as in JAX.
TEST_F(Explicit3Test, GivenOutShardingsPrintAsWritten) {
  auto f = [&](const sp::Array& v) { return sp::reshape(v, {16, 16}, S(P("a"))); };
  EXPECT_EQ(sp::make_jaxpr(f)(put(sp::arange(256.0f), P("b"))).str(),
            text("jaxpr_reshape_given_spec"));
  // vmap adds an unsplit entry for the batch dim to the spec as written.
  const sp::Array rows = put(sp::arange(512.0f).reshape({2, 256}), P(None, "b"));
  EXPECT_EQ(sp::make_jaxpr(sp::vmap(f))(rows).str(), text("jaxpr_vmap_reshape_given_spec"));
}

// tile repeats only unsplit dims, as JAX's type rule allows.
TEST_F(Explicit3Test, TileRepeatsUnsplitDimsOnly) {
  check("tile_unsplit_reps", {sp::tile(put(X, P("a", None)), {1, 2})});
  const std::string what = spmd_test::error_message([&] { sp::tile(put(X, P("a", "b")), {2, 3}); });
  EXPECT_EQ(what, "[tile] " + error("tile_split"));
}

// jit's out_shardings given as PartitionSpecs are read over the mesh in context, an Explicit
// one as an Auto one: the results have the types the specs give them.
TEST_F(Explicit3Test, JitOutShardingsTakeSpecsOverTheMeshInContext) {
  auto twice = [](const sp::Array& v) { return v * 2.0f; };
  const sp::Array x = put(X, P("a", "b"));
  const std::string no_mesh =
      spmd_test::error_message([&] { sp::jit(twice, {.out_shardings = P("a")})(x); });
  EXPECT_EQ(no_mesh, "[jit] " + error("out_spec_no_mesh"));
  auto scope = sp::use_mesh(m);
  check("out_spec_swapped", {sp::jit(twice, {.out_shardings = P("b", "a")})(x)});
  check("out_spec_columns", {sp::jit(twice, {.out_shardings = P(None, "a")})(x)});
  check("out_spec_replicated", {sp::jit(twice, {.out_shardings = P()})(x)});
  auto pair = sp::jit(
      [](const sp::Array& v) {
        return std::pair{v * 2.0f, sp::sum(v)};
      },
      {.out_shardings = {P("b"), P()}});
  auto [doubled, total] = pair(x);
  check("out_spec_tuple", {doubled, total});
  check("out_spec_uncommitted_arg", {sp::jit(twice, {.out_shardings = P("a", "b")})(X)});
}

// A vjp pullback run eagerly on an uncommitted cotangent gives what JAX's gives: a result
// computed with a committed residual is laid out as it (sin's cos), the others stay
// uncommitted. A cotangent typed with another sharding than its output raises JAX's error (as
// jnp.ones made under JAX's mesh context does, committed and unsplit).
TEST_F(Explicit3Test, EagerPullbacksOfUncommittedCotangents) {
  auto pullback = [](const Unary& f, const sp::Array& x, std::optional<sp::NamedSharding> ct) {
    auto [y, pull] = sp::vjp(f, x);
    const sp::Array ones = sp::ones(y.shape(), y.dtype());
    return std::get<0>(pull(ct ? sp::device_put(ones, *ct) : ones));
  };
  struct Case {
    Unary f;
    sp::Array x;
  };
  const sp::Array column = sp::lax::slice(X, {0, 0}, {16, 1});
  const std::map<std::string, Case> cases = {
      {"sin", {[](const sp::Array& v) { return sp::sin(v); }, put(X, P("a", "b"))}},
      {"reshape", {[](const sp::Array& v) { return sp::reshape(v, {256}); }, put(X, P("a", None))}},
      {"mul_unbroadcast", {[&](const sp::Array& v) { return v * X; }, put(column, P("a", None))}},
      {"neg", {[](const sp::Array& v) { return -v; }, put(X, P("a", "b"))}},
  };
  for (const auto& [name, c] : cases) {
    check("pullback_" + name, {pullback(c.f, c.x, std::nullopt)});
    const std::string what = spmd_test::error_message([&] { pullback(c.f, c.x, S(P())); });
    EXPECT_EQ(what, "[vjp] " + error("pullback_" + name + "_in_mesh")) << name;
  }
  const Unary sine = [](const sp::Array& v) { return sp::sin(v); };
  const sp::Array x = put(X, P("a", "b"));
  check("pullback_sin_ct_typed", {pullback(sine, x, S(P("a", "b")))});
  EXPECT_EQ(spmd_test::error_message([&] { pullback(sine, x, S(P("a"))); }),
            "[vjp] " + error("pullback_sin_ct_rows"));
}

}  // namespace

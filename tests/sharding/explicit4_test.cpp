// Explicit sharding mode against JAX 0.10.2 under vmap and in control flow: vmap over a dim split
// over Explicit axes splits the batch dim of batched out_shardings and of broadcast unbatched
// values over those axes (JAX's get_sharding_for_vmap and batching.broadcast), raises JAX's
// errors for mapped arguments split differently, and control flow keeps the types its resharding
// bodies give (goldens in tests/goldens/explicit/*4.*, recorded by tools/goldens/gen_explicit4.py;
// the cases use its names).
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <regex>
#include <string>
#include <tuple>
#include <vector>

#include "sharding/explicit_goldens.h"
#include "support/golden.h"

namespace {

namespace sp = spmd;
using sp::None;
using sp::P;

class Explicit4Test : public spmd_test::ExplicitGoldenTest<4> {
 protected:
  // JAX's jaxpr of case `name`, its NumPy ints (batching's) spelled as plain ints, and the
  // params they alone pushed past the line width back on one line.
  static std::string text(const std::string& name) {
    const std::string jaxpr = spmd_test::without_numpy_ints(block("texts4.txt", "jaxpr_" + name));
    return std::regex_replace(jaxpr, std::regex(R"(\[\n +([^\n]*)\n +\])"), "[$1]");
  }
  // The message of the error f raises, without its "[api] " prefix.
  template <class F>
  static std::string message(F&& f) {
    const std::string what = spmd_test::error_message(f);
    return what.substr(what.find("] ") + 2);
  }
};

using Unary = std::function<sp::Array(const sp::Array&)>;
using Binary = std::function<sp::Array(const sp::Array&, const sp::Array&)>;

// The batched out_sharding of reshard, reshape, dot_general and broadcast_in_dim splits the batch
// dim over the Explicit axes that split the mapped dim, as JAX's get_sharding_for_vmap.
TEST_F(Explicit4Test, BatchedOutShardingsSplitTheBatchDimAsTheMappedDim) {
  auto scope = sp::use_mesh(m);
  struct Case {
    Unary f;
    sp::VmapOptions options;
    sp::Array x;
  };
  const std::map<std::string, Case> unary = {
      {"vmap_reshard",
       {[](const sp::Array& v) { return sp::reshard(v, P("b")); }, {}, put(X, P("a", None))}},
      {"vmap_reshard_in_axes1",
       {[](const sp::Array& v) { return sp::reshard(v, P("a")); }, {.in_axes = {1}},
        put(X, P(None, "b"))}},
      {"vmap_reshape",
       {[](const sp::Array& v) { return sp::reshape(v, {4, 4}, P("b")); }, {},
        put(X, P("a", None))}},
      {"vmap_broadcast_in_dim",
       {[](const sp::Array& v) { return sp::lax::broadcast_in_dim(v, {16, 4}, {0}, P("b")); }, {},
        put(X, P("a", None))}},
      {"vmap_full_like",
       {[](const sp::Array& v) { return sp::full_like(v, sp::Array(2.0f)); }, {},
        put(X, P("a", "b"))}},
      {"vmap_tuple_axes",
       {[](const sp::Array& v) { return sp::reshape(v, {4, 8}, P()); }, {},
        put(X.reshape({8, 32}), P(sp::axes("a", "b")))}},
  };
  for (const auto& [name, c] : unary) {
    EXPECT_EQ(sp::make_jaxpr(sp::vmap(c.f, c.options))(c.x).str(), text(name)) << name;
    check(name, {sp::vmap(c.f, c.options)(c.x)});
  }
  const sp::Array lhs = put(X.reshape({4, 4, 16}), P("a")), rhs = put(X.reshape({4, 16, 4}), P("a"));
  const std::map<std::string, Binary> binary = {
      {"vmap_dot_general",
       [](const sp::Array& v, const sp::Array& w) {
         return sp::lax::dot_general(v, w, {{1}, {0}, {}, {}}, std::nullopt, P(None, "b"));
       }},
      {"vmap_matmul", [](const sp::Array& v, const sp::Array& w) { return sp::matmul(v, w, P("b")); }},
  };
  for (const auto& [name, f] : binary) {
    EXPECT_EQ(sp::make_jaxpr(sp::vmap(f))(lhs, rhs).str(), text(name)) << name;
    check(name, {sp::vmap(f)(lhs, rhs)});
  }
}

// An unbatched typed value broadcast along the batch dim (an unbatched result, an unbatched
// carry) has it split over the mapped axes, as JAX's batching.broadcast; broadcasting ops
// broadcast their unbatched operand with a size-1 dim instead.
TEST_F(Explicit4Test, BroadcastUnbatchedValuesSplitTheBatchDim) {
  auto scope = sp::use_mesh(m);
  struct Case {
    Binary f;
    sp::VmapOptions options;
    sp::Array x;
  };
  const Binary second = [](const sp::Array&, const sp::Array& c) { return c; };
  const std::map<std::string, Case> cases = {
      {"vmap_add_unbatched",
       {[](const sp::Array& v, const sp::Array& w) { return v + w; }, {.in_axes = {0, None}},
        put(X, P("a", None))}},
      {"vmap_out_unbatched", {second, {.in_axes = {0, None}}, put(X, P("a", None))}},
      {"vmap_out_unbatched_axis1",
       {second, {.in_axes = {0, None}, .out_axes = {1}}, put(X, P("a", None))}},
      {"vmap_fori_unbatched_init",
       {[](const sp::Array& v, const sp::Array& c) {
          return sp::lax::fori_loop(
              0, 3, [v](const sp::Array&, const sp::Array& k) { return k + v; }, c);
        },
        {.in_axes = {0, None}}, put(X, P("a", "b"))}},
  };
  const sp::Array row = put(X[0], P("b"));
  for (const auto& [name, c] : cases) {
    EXPECT_EQ(sp::make_jaxpr(sp::vmap(c.f, c.options))(c.x, row).str(), text(name)) << name;
    check(name, {sp::vmap(c.f, c.options)(c.x, row)});
  }
}

// grad inside vmap: the cotangents' reduce_sum (broadcast_in_dim's transpose) carries the
// batched primal's sharding.
TEST_F(Explicit4Test, GradInsideVmapKeepsTheBatchedTypes) {
  auto scope = sp::use_mesh(m);
  const std::map<std::string, Unary> cases = {
      {"vmap_grad_sin", sp::grad([](const sp::Array& v) { return sp::sum(sp::sin(v)); })},
      {"vmap_grad_broadcast", sp::grad([](const sp::Array& v) {
         return sp::sum(sp::sin(sp::broadcast_to(v, {4, 16})));
       })},
  };
  const sp::Array x = put(X, P("a", "b"));
  for (const auto& [name, f] : cases) {
    EXPECT_EQ(sp::make_jaxpr(sp::vmap(f))(x).str(), text(name)) << name;
    check(name, {sp::vmap(f)(x)});
  }
}

// auto_axes under vmap (its reshard to out_sharding batched as the mapped dim) and grad (the
// cotangent goes back to the Auto mesh and back to its primal's type) give JAX's jaxprs (its
// reshards), types and values, run eagerly and under jit.
TEST_F(Explicit4Test, AutoAxesUnderVmapAndGrad) {
  auto scope = sp::use_mesh(m);
  const Unary batched = sp::vmap([](const sp::Array& v) {
    return sp::auto_axes([](const sp::Array& w) { return w * 2.0f; }, {}, P("b"))(v);
  });
  const sp::Array rows = put(X, P("a", None));
  EXPECT_EQ(sp::make_jaxpr(batched)(rows).str(), text("vmap_auto_axes"));
  check("vmap_auto_axes", {batched(rows)});
  check("vmap_auto_axes", {sp::jit(batched)(rows)});
  const Unary grad = sp::grad([](const sp::Array& v) {
    return sp::sum(sp::auto_axes([](const sp::Array& w) { return sp::sin(w) * 2.0f; }, {},
                                 P("a", "b"))(v));
  });
  const sp::Array x = put(X, P("a", "b"));
  EXPECT_EQ(sp::make_jaxpr(grad)(x).str(), text("grad_auto_axes"));
  check("grad_auto_axes", {grad(x)});
  check("grad_auto_axes", {sp::jit(grad)(x)});
}

// JAX's errors: mapped dims split differently (an uncommitted argument's is unsplit), an
// unmapped argument split over the mapped axes, and a body splitting another dim over them.
TEST_F(Explicit4Test, VmapRaisesJaxsErrorsForInconsistentSplits) {
  auto scope = sp::use_mesh(m);
  const Binary add = [](const sp::Array& v, const sp::Array& w) { return v + w; };
  const sp::Array rows = put(X, P("a", None));
  EXPECT_EQ(message([&] { sp::vmap(add)(rows, put(X, P("b", None))); }),
            error("vmap_inconsistent"));
  EXPECT_EQ(message([&] { sp::vmap(add)(rows, X); }), error("vmap_inconsistent_uncommitted"));
  const sp::Array wide = X.reshape({8, 32});
  EXPECT_EQ(message([&] { sp::vmap(add)(put(wide, P(sp::axes("a", "b"))), put(wide, P("b"))); }),
            error("vmap_inconsistent_tuple"));
  EXPECT_EQ(message([&] { sp::vmap(add, {.in_axes = {0, None}})(rows, put(X[0], P("a"))); }),
            error("vmap_unmapped_split"));
  EXPECT_EQ(message([&] {
              sp::vmap([](const sp::Array& v) { return sp::reshard(v, P("a")); })(rows);
            }),
            error("vmap_reshard_mapped_axis"));
}

// Control flow whose bodies reshard: the results have the types the bodies give, laid out so.
TEST_F(Explicit4Test, ControlFlowResultsHaveTheirBodiesTypes) {
  auto scope = sp::use_mesh(m);
  const sp::Array x = put(X, P("a", "b"));
  auto cond = [](const sp::Array& p, const sp::Array& v) {
    return sp::lax::cond(
        p, [](const sp::Array& w) { return sp::reshard(w * 2.0f, P("b", "a")); },
        [](const sp::Array& w) { return sp::reshard(w, P("b", "a")); }, v);
  };
  EXPECT_EQ(sp::make_jaxpr(cond)(sp::Array(true), x).str(), text("cond_both_reshard"));
  check("cond_both_reshard", {cond(sp::Array(true), x)});
  using Carry = std::tuple<sp::Array, sp::Array>;
  auto round_trip = [](const sp::Array& v) {
    Carry out = sp::lax::while_loop(
        [](const Carry& c) { return std::get<0>(c) < 3; },
        [](const Carry& c) {
          sp::Array next = std::get<0>(c) + 1;
          sp::Array swapped = sp::reshard(std::get<1>(c), P("b", "a"));
          return Carry{next, sp::reshard(swapped * 2.0f, P("a", "b"))};
        },
        Carry{sp::Array(0), v});
    return std::get<1>(out);
  };
  EXPECT_EQ(sp::make_jaxpr(round_trip)(x).str(), text("while_reshard_round_trip"));
  check("while_reshard_round_trip", {round_trip(x)});
  // The carry the body returns unchanged becomes a const of the scan (num_carry=0), as in JAX.
  auto ys_split = [](const sp::Array& v, const sp::Array& r) {
    auto [carry, ys] = sp::lax::scan(
        [](const sp::Array& c, const sp::Array& s) { return std::pair{c, c * s}; }, v, r);
    return std::vector<sp::Array>{carry, ys};
  };
  EXPECT_EQ(sp::make_jaxpr(ys_split)(x, sp::arange(3.0f)).str(), text("scan_ys_split"));
  check("scan_ys_split", ys_split(x, sp::arange(3.0f)));
  auto typed_scan = [](const sp::Array& c, const sp::Array& xs) {
    auto [k, y] = sp::lax::scan(
        [](const sp::Array& k, const sp::Array& s) { return std::pair{k + s, s * 2.0f}; }, c, xs);
    return std::vector<sp::Array>{k, y};
  };
  const sp::Array zeros = put(sp::zeros({16}), P("b")), xs = put(X, P(None, "b"));
  EXPECT_EQ(sp::make_jaxpr(typed_scan)(zeros, xs).str(), text("scan_typed_carry_and_xs"));
  check("scan_typed_carry_and_xs", typed_scan(zeros, xs));
}

// JAX's text without the lines naming Python functions and their source lines (from `first` up
// to the blank line before "The output of").
std::string without_sources(std::string text, const std::string& first) {
  const size_t from = text.find(first), to = text.find("The output of");
  return text.erase(from, to - from);
}

// Bodies changing a type raise JAX's errors, less what JAX reads off the Python source.
TEST_F(Explicit4Test, ControlFlowTypeMismatchesRaiseJaxsErrors) {
  auto scope = sp::use_mesh(m);
  const sp::Array x = put(X, P("a", "b"));
  auto same = [](const sp::Array& w) { return w; };
  EXPECT_EQ(message([&] {
              sp::lax::cond(
                  sp::Array(true), [](const sp::Array& w) { return sp::reshard(w, P()); }, same,
                  x);
            }),
            without_sources(error("cond_unsplit_vs_split"), "true_fun is"));
  const std::vector<Unary> branches = {
      same, [](const sp::Array& w) { return sp::reshard(w, P(None, "b")); },
      [](const sp::Array& w) { return w + 1.0f; }};
  EXPECT_EQ(message([&] { sp::lax::switch_(sp::Array(1), branches, put(X, P("a", None))); }),
            without_sources(error("switch_mismatch"), "branch 0 is"));
  using Pair = std::tuple<sp::Array, sp::Array>;
  EXPECT_EQ(message([&] {
              sp::lax::fori_loop(
                  0, 3,
                  [](const sp::Array&, const Pair& c) {
                    return Pair{std::get<0>(c), sp::reshard(std::get<1>(c), P())};
                  },
                  Pair{x, x});
            }),
            error("fori_tuple_mismatch"));
  EXPECT_EQ(message([&] {
              sp::lax::scan(
                  [](const sp::Array& k, const sp::Array& s) {
                    return std::pair{k + s, s * 2.0f};
                  },
                  sp::zeros({16}), put(X, P(None, "b")));
            }),
            spmd_test::replaced(error("scan_unsplit_init"), "carry k has", "carry carry has"));
}

}  // namespace

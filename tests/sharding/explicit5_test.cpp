// Explicit sharding mode against JAX 0.10.2: the types of control-flow results. cond and switch
// whose branches agree, while_loop and fori_loop whose bodies keep their carries' types, and
// scan's carries and stacked outputs (the stacked dim unsplit) give JAX's types, specs and values
// run eagerly, under jit, under grad and under vmap; branches that disagree and bodies that change
// a carry's type raise JAX's errors (goldens in tests/goldens/explicit/*5.*, recorded by
// tools/goldens/gen_explicit5.py; the cases use its names).
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "sharding/explicit_goldens.h"
#include "support/golden.h"

namespace {

namespace sp = spmd;
using sp::None;
using sp::P;
using Leaves = std::vector<sp::Array>;

class Explicit5Test : public spmd_test::ExplicitGoldenTest<5> {
 protected:
  // JAX's text of error `name` without the lines naming Python functions and their source
  // (from "true_fun is" or "branch 0 is" up to the blank line before "The output of"), and with
  // the body's carry argument (`c` of while_change, `k` of scan_change, names C++ cannot see)
  // named `carry` as spmd names it.
  static std::string jax_message(const std::string& name) {
    std::string text = spmd_test::replaced(
        spmd_test::replaced(error(name), "component c[", "component carry["), "carry k has",
        "carry carry has");
    const size_t from = text.find(" is <lambda> at ");
    if (from == std::string::npos) return text;
    const size_t start = text.rfind("\n\n", from) + 2, to = text.find("The output of");
    return text.erase(start, to - start);
  }
  // The message of the error f raises, without its "[api] " prefix.
  template <class F>
  static std::string message(F&& f) {
    const std::string what = spmd_test::error_message(f);
    return what.substr(what.find("] ") + 2);
  }
  // Case `name`: JAX's error when it raised one, else the leaves f gives checked.
  template <class F>
  static void expect(const std::string& name, F&& f) {
    const auto errors = spmd_test::golden_blocks("explicit/errors5.txt");
    if (errors.count(name)) {
      EXPECT_EQ(message(f), jax_message(name)) << name;
      return;
    }
    check(name, f());
  }
  // f (returning its leaves) eagerly, under jit, the grad of the sum of its leaves with respect
  // to its first argument, and vmapped over the leading dims of `vargs` (None where not mapped).
  template <class F, class... A>
  void variants(const std::string& name, F f, const std::tuple<A...>& args,
                const std::tuple<A...>& vargs, sp::VmapOptions vmap_options) {
    auto summed = [f](const A&... a) {
      sp::Array total = sp::Array(0.0f);
      for (const sp::Array& leaf : f(a...)) total = total + sp::sum(leaf);
      return total;
    };
    std::apply(
        [&](const A&... a) {
          expect(name, [&] { return f(a...); });
          if (!spmd_test::golden_blocks("explicit/errors5.txt").count(name)) {
            EXPECT_EQ(sp::make_jaxpr(f)(a...).str(), block("texts5.txt", "jaxpr_" + name)) << name;
            EXPECT_EQ(sp::make_jaxpr(sp::jit(f, {.name = "<lambda>"}))(a...).str(),
                      block("texts5.txt", "jaxpr_" + name + "_jit"))
                << name;
          }
          expect(name + "_jit", [&] { return sp::jit(f)(a...); });
          expect(name + "_grad", [&] { return Leaves{sp::grad(summed)(a...)}; });
        },
        args);
    std::apply(
        [&](const A&... a) {
          expect(name + "_vmap", [&] { return sp::vmap(f, vmap_options)(a...); });
        },
        vargs);
  }

  sp::Array Y = sp::arange(512.0f).reshape({2, 16, 16});
};

using Unary = std::function<sp::Array(const sp::Array&)>;

// cond and switch whose branches agree have their branches' type, resharding or not.
TEST_F(Explicit5Test, CondAndSwitchResultsHaveTheBranchesType) {
  auto scope = sp::use_mesh(m);
  auto twice = [](const sp::Array& w) { return w * 2.0f; };
  auto sine = [](const sp::Array& w) { return sp::sin(w); };
  auto cond = [=](const sp::Array& v, const sp::Array& p) {
    return Leaves{sp::lax::cond(p, twice, sine, v)};
  };
  // A batched predicate makes the cond a select_n, whose typed selector must have the cases'
  // sharding: unsplit, it raises JAX's error for cases split over `a`.
  const sp::Array yes(true), no(false), both = sp::array({true, false});
  variants("cond_agree", cond, std::tuple{put(X, P("a", None)), yes},
           std::tuple{put(Y, P(None, "a", None)), put(both, P())}, {.in_axes = {0, 0}});
  variants("cond_split_batch", cond, std::tuple{put(X, P("b")), yes},
           std::tuple{put(Y, P("b")), put(both, P("b"))}, {.in_axes = {0, 0}});
  variants("cond_agree_false", cond, std::tuple{put(X, P("a", "b")), no},
           std::tuple{put(Y, P(None, "a", "b")), no}, {.in_axes = {0, None}});
  auto both_reshard = [](const sp::Array& v, const sp::Array& p) {
    return Leaves{sp::lax::cond(
        p, [](const sp::Array& w) { return sp::reshard(w * 2.0f, P(None, "b")); },
        [](const sp::Array& w) { return sp::reshard(sp::cos(w), P(None, "b")); }, v)};
  };
  variants("cond_both_reshard", both_reshard, std::tuple{put(X, P("a", None)), yes},
           std::tuple{put(Y, P(None, "a", None)), yes}, {.in_axes = {0, None}});
  const std::vector<Unary> branches = {twice, sine,
                                       [](const sp::Array& w) { return w + 1.0f; }};
  auto switch_ = [branches](const sp::Array& v, const sp::Array& i) {
    return Leaves{sp::lax::switch_(i, branches, v)};
  };
  variants("switch_agree", switch_, std::tuple{put(X, P("a", "b")), sp::Array(2)},
           std::tuple{put(Y, P(None, "a", "b")), put(sp::array({0, 1}), P())},
           {.in_axes = {0, 0}});
}

// select_n's Explicit checks, with no mesh in context: typed cases share one sharding, and a
// typed selector that is not a scalar has theirs; untyped operands take the typed ones'. A
// vmapped cond's uncommitted batched predicate is such an untyped selector.
TEST_F(Explicit5Test, SelectNChecksItsOperandsShardings) {
  const sp::Array rows = put(X, P("a")), gt = X > 3.0f;
  expect("select_cases_differ",
         [&] { return Leaves{sp::lax::select_n(sp::Array(true), {rows, put(X, P("b"))})}; });
  expect("select_which_differs",
         [&] { return Leaves{sp::lax::select_n(put(gt, P("b")), {rows, rows})}; });
  expect("select_which_untyped", [&] { return Leaves{sp::lax::select_n(gt, {rows, rows})}; });
  expect("select_case_untyped", [&] { return Leaves{sp::lax::select_n(gt, {rows, X})}; });
  expect("select_which_same", [&] {
    return Leaves{sp::lax::select_n(put(gt, P("a", "b")), {put(X, P("a", "b")), X + 1.0f})};
  });
  expect("cond_vmap_uncommitted_pred", [&] {
    return Leaves{sp::vmap([](const sp::Array& v, const sp::Array& p) {
      return sp::lax::cond(
          p, [](const sp::Array& w) { return w * 2.0f; },
          [](const sp::Array& w) { return sp::sin(w); }, v);
    })(put(Y, P(None, "a")), sp::array({true, false}))};
  });
}

using Pair = std::tuple<sp::Array, sp::Array>;

// Loops whose bodies keep their carries' types: the results have the carries' types.
TEST_F(Explicit5Test, LoopResultsHaveTheirCarriesTypes) {
  auto scope = sp::use_mesh(m);
  auto while_keep = [](const sp::Array& v) {
    Pair out = sp::lax::while_loop(
        [](const Pair& c) { return std::get<0>(c) < 3; },
        [](const Pair& c) { return Pair{std::get<0>(c) + 1, std::get<1>(c) * 2.0f + 1.0f}; },
        Pair{sp::Array(0), v});
    return Leaves{std::get<1>(out)};
  };
  variants("while_keep", while_keep, std::tuple{put(X, P("a", "b"))},
           std::tuple{put(Y, P(None, "a", "b"))}, {});
  auto fori_keep = [](const sp::Array& v) {
    return Leaves{sp::lax::fori_loop(
        0, 3, [](const sp::Array&, const sp::Array& w) { return w * 2.0f + 1.0f; }, v)};
  };
  variants("fori_keep", fori_keep, std::tuple{put(X, P(None, "b"))},
           std::tuple{put(Y, P(None, None, "b"))}, {});
  auto fori_tuple_keep = [](const sp::Array& v) {
    Pair out = sp::lax::fori_loop(
        0, 2,
        [](const sp::Array&, const Pair& c) {
          return Pair{std::get<0>(c) * std::get<1>(c), sp::sin(std::get<1>(c))};
        },
        Pair{v, v + 1.0f});
    return Leaves{std::get<0>(out), std::get<1>(out)};
  };
  variants("fori_tuple_keep", fori_tuple_keep, std::tuple{put(X, P("b", "a"))},
           std::tuple{put(Y, P(None, "b", "a"))}, {});
}

// scan's carries keep their types and its stacked outputs have the body's with the stacked dim
// unsplit, in either direction.
TEST_F(Explicit5Test, ScanResultsHaveTheCarriesAndStackedBodyTypes) {
  auto scope = sp::use_mesh(m);
  using Body = std::function<std::pair<sp::Array, sp::Array>(const sp::Array&, const sp::Array&)>;
  auto scanned = [](Body body, bool reverse) {
    return [body, reverse](const sp::Array& c, const sp::Array& xs) {
      auto [carry, ys] = sp::lax::scan(body, c, xs, std::nullopt, reverse);
      return Leaves{carry, ys};
    };
  };
  const std::vector<std::tuple<std::string, Body, bool, const char*>> cases = {
      {"scan_carry_ys",
       [](const sp::Array& k, const sp::Array& r) { return std::pair{k + r, k * r}; }, false,
       "b"},
      {"scan_ys_only",
       [](const sp::Array& k, const sp::Array& r) { return std::pair{k, sp::sin(r) * k}; },
       false, "a"},
      {"scan_reverse",
       [](const sp::Array& k, const sp::Array& r) { return std::pair{k * 0.5f + r, k}; }, true,
       "a"},
  };
  for (const auto& [name, body, reverse, axis] : cases) {
    const sp::Array y0 = sp::lax::index_in_dim(Y, 0, 1, false);
    variants(name, scanned(body, reverse), std::tuple{put(X[0], P(axis)), put(X, P(None, axis))},
             std::tuple{put(y0, P(None, axis)), put(Y, P(None, None, axis))}, {});
  }
}

// Branches that disagree and bodies that change a carry's type raise JAX's errors, eagerly and
// under jit; reverse-mode through while_loop raises JAX's error.
TEST_F(Explicit5Test, DisagreeingBranchesAndChangedCarriesRaiseJaxsErrors) {
  auto scope = sp::use_mesh(m);
  auto same = [](const sp::Array& w) { return w; };
  auto both = [](const std::string& name, auto f, const auto&... args) {
    expect(name, [&] { return Leaves{f(args...)}; });
    expect(name + "_jit", [&] { return Leaves{sp::jit(f)(args...)}; });
  };
  both("cond_disagree", [=](const sp::Array& v, const sp::Array& p) {
    return sp::lax::cond(p, same, [](const sp::Array& w) { return sp::reshard(w, P("b")); }, v);
  }, put(X, P("a", None)), sp::Array(true));
  const std::vector<Unary> branches = {
      same, [](const sp::Array& w) { return sp::sin(w); },
      [](const sp::Array& w) { return sp::reshard(w, P("b", "a")); }};
  both("switch_disagree", [=](const sp::Array& v, const sp::Array& i) {
    return sp::lax::switch_(i, branches, v);
  }, put(X, P("a", "b")), sp::Array(0));
  auto while_change = [](const sp::Array& v) {
    return std::get<1>(sp::lax::while_loop(
        [](const Pair& c) { return std::get<0>(c) < 3; },
        [](const Pair& c) { return Pair{std::get<0>(c) + 1, sp::reshard(std::get<1>(c), P("b"))}; },
        Pair{sp::Array(0), v}));
  };
  both("while_change", while_change, put(X, P("a", None)));
  both("fori_change", [](const sp::Array& v) {
    return sp::lax::fori_loop(
        0, 3, [](const sp::Array&, const sp::Array& w) { return sp::reshard(w, P(None, "a")); },
        v);
  }, put(X, P("a", "b")));
  both("scan_change", [](const sp::Array& c, const sp::Array& xs) {
    return sp::lax::scan(
               [](const sp::Array& k, const sp::Array& r) {
                 return std::pair{sp::reshard(k + r, P()), r};
               },
               c, xs)
        .first;
  }, put(X[0], P("b")), put(X, P(None, "b")));
  both("while_grad", [](const sp::Array& v) {
    return sp::grad([](const sp::Array& w) {
      Pair out = sp::lax::while_loop(
          [](const Pair& c) { return std::get<0>(c) < 3; },
          [](const Pair& c) { return Pair{std::get<0>(c) + 1, std::get<1>(c) * 2.0f + 1.0f}; },
          Pair{sp::Array(0), w});
      return sp::sum(std::get<1>(out));
    })(v);
  }, put(X, P("a", "b")));
}

}  // namespace

namespace {

// auto_axes binds JAX's reshards onto its Auto mesh and back: over some of the mesh's axes (the
// others keep their split), under grad (the cotangent goes back through both), and not at all
// when the axes are Auto already; an open dim in out_sharding on a mesh without Auto axes is
// JAX's ValueError.
TEST_F(Explicit5Test, AutoAxesReshardsOntoItsAutoMeshAndBack) {
  const std::map<std::string, Unary> cases = {
      {"auto_axes_partial",
       [](const sp::Array& v) {
         return sp::auto_axes([](const sp::Array& w) { return w * 2.0f; }, {"a"},
                              P("a", "b"))(v);
       }},
      {"auto_axes_partial_grad", sp::grad([](const sp::Array& v) {
         return sp::sum(sp::auto_axes([](const sp::Array& w) { return sp::sin(w) * 2.0f; },
                                      {"b"}, P("a", None))(v));
       })},
  };
  {
    auto scope = sp::use_mesh(m);
    const sp::Array x = put(X, P("a", "b"));
    for (const auto& [name, f] : cases) {
      EXPECT_EQ(sp::make_jaxpr(f)(x).str(), block("texts5.txt", "jaxpr_" + name)) << name;
      expect(name, [&] { return Leaves{f(x)}; });
      expect(name, [&] { return Leaves{sp::jit(f)(x)}; });
    }
  }
  {
    auto scope = sp::use_mesh(m);
    expect("auto_axes_open_dims", [&] {
      return Leaves{sp::auto_axes([](const sp::Array& w) { return w * 2.0f; }, {},
                                  P("a", P::UNCONSTRAINED))(put(X, P("a")))};
    });
  }
  const sp::Mesh m_auto = sp::make_mesh({4, 2}, {"a", "b"});
  auto scope = sp::use_mesh(m_auto);
  const Unary already = [](const sp::Array& v) {
    return sp::auto_axes([](const sp::Array& w) { return sp::sin(w) * 2.0f; }, {}, P("a"))(v);
  };
  const sp::Array rows = sp::device_put(X, sp::NamedSharding(m_auto, P("a")));
  EXPECT_EQ(sp::make_jaxpr(already)(rows).str(),
            block("texts5.txt", "jaxpr_auto_axes_already_auto"));
  expect("auto_axes_already_auto", [&] { return Leaves{already(rows)}; });
}

}  // namespace

// Explicit sharding mode against JAX 0.10.2, continued: grad keeps the types of typed values in
// their cotangents (broadcast_in_dim's sharding param), control flow keeps the types of its
// carries and raises JAX's errors when a body changes them, and auto_axes / explicit_axes take
// trees (goldens in tests/goldens/explicit/*2.*, recorded by tools/goldens/gen_explicit2.py;
// the cases use its names).
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
using spmd_test::golden_blocks;

constexpr sp::AxisType kE = sp::AxisType::Explicit;

class Explicit2Test : public spmd_test::ExplicitGoldenTest<2> {
 protected:
  static std::string type(const std::string& name) { return block("types2.txt", name); }
  static std::string text(const std::string& name) { return block("texts2.txt", name); }
  // The types of the leaves, space-separated, as types2.txt has them.
  static std::string types_of(const std::vector<sp::Array>& leaves) {
    std::string out;
    for (const sp::Array& v : leaves) {
      if (!out.empty()) out += ' ';
      out += sp::type_of(v).str();
    }
    return out;
  }
  // The leaves' types and values against case `name`.
  static void check(const std::string& name, const std::vector<sp::Array>& leaves) {
    EXPECT_EQ(types_of(leaves), type(name)) << name;
    for (size_t i = 0; i < leaves.size(); ++i) {
      const std::string key = leaves.size() == 1 ? name : name + "." + std::to_string(i);
      EXPECT_TRUE(spmd_test::arrays_close(sp::device_get(leaves[i]), value(key))) << key;
    }
  }
  // The message of the error f raises, without its "[api] " prefix.
  template <class F>
  static std::string message(F&& f) {
    const std::string what = spmd_test::error_message(f);
    return what.substr(what.find("] ") + 2);
  }
  sp::Array put(const sp::Array& v, const sp::PartitionSpec& spec) const {
    return sp::device_put(v, S(spec));
  }
  sp::NamedSharding S(const sp::PartitionSpec& spec) const { return sp::NamedSharding(m, spec); }

  sp::Mesh m = sp::make_mesh({4, 2}, {"a", "b"}, {kE, kE});
  sp::Mesh mesh_auto = sp::make_mesh({4, 2}, {"a", "b"});
  sp::Array X = sp::arange(256.0f).reshape({16, 16});
};

// JAX prints some broadcast dims as (np.int64(1),), a Python artefact of jnp.mean's NumPy ints;
// spmd's integer params print as plain ints.
using spmd_test::without_numpy_ints;

// Each grad case: the gradient's type and values, and the jaxpr of the grad (its cotangent
// seed resharded onto the output's abstract mesh, as JAX's).
TEST_F(Explicit2Test, CotangentsKeepTheTypesOfTheirPrimals) {
  using F = std::function<sp::Array(const sp::Array&, const sp::Array&)>;
  struct Case {
    F f;
    sp::Array u, v;
  };
  const std::map<std::string, Case> cases = {
      {"grad_sum_squares",
       {[](const sp::Array& u, const sp::Array&) { return sp::sum(u * u); }, put(X, P("a", "b")),
        X}},
      {"grad_reshape_out_sharding",
       {[&](const sp::Array& u, const sp::Array&) {
          return sp::sum(sp::reshape(u, {256}, S(P("a"))));
        },
        put(X, P(None, "b")), X}},
      {"grad_matmul_out_sharding",
       {[&](const sp::Array& u, const sp::Array& v) {
          return sp::sum(sp::matmul(u, v, S(P(None, "a"))));
        },
        put(X, P(None, "a")), put(X, P("a", None))}},
      {"grad_mean",
       {[](const sp::Array& u, const sp::Array&) { return sp::mean(u); }, put(X, P("a", "b")), X}},
      {"grad_mean_axis0",
       {[](const sp::Array& u, const sp::Array&) { return sp::sum(sp::mean(u, {0})); },
        put(X, P("a", "b")), X}},
      {"grad_sin_rows",
       {[](const sp::Array& u, const sp::Array&) { return sp::sum(sp::sin(u) * 2.0f); },
        put(X, P("a", None)), X}},
      {"grad_unused_arg",
       {[](const sp::Array&, const sp::Array& v) { return sp::sum(v); }, put(X, P("a", "b")),
        put(X, P(None, "a"))}},
  };
  for (const auto& [name, c] : cases) {
    // The one-argument cases take X as an unused second argument, which their jaxprs lack.
    const bool two = name == "grad_matmul_out_sharding" || name == "grad_unused_arg";
    check(name, {sp::grad(c.f)(c.u, c.v)});
    const std::string jaxpr =
        two ? sp::make_jaxpr(sp::grad(c.f))(c.u, c.v).str()
            : sp::make_jaxpr(sp::grad([&](const sp::Array& u) { return c.f(u, X); }))(c.u).str();
    EXPECT_EQ(jaxpr, without_numpy_ints(text("jaxpr_" + name))) << name;
  }
}

// lax.broadcast_in_dim's out_sharding gives the result that type, from a typed operand or not.
TEST_F(Explicit2Test, BroadcastInDimTakesAnOutSharding) {
  sp::Array row = sp::lax::broadcast_in_dim(put(X[0], P("b")), {16, 16}, {1}, S(P("a", "b")));
  EXPECT_EQ(sp::type_of(row).str(), "float32[16@a,16@b]");
  EXPECT_EQ(*row.sharding(), S(P("a", "b")));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(row),
                                      sp::broadcast_to(X[0].reshape({1, 16}), {16, 16})));
  auto f = [&](const sp::Array& s) {
    return sp::lax::broadcast_in_dim(s, {16, 16}, {}, S(P("a")));
  };
  sp::Array ones = sp::jit(f)(sp::Array(1.0f));
  EXPECT_EQ(*ones.sharding(), S(P("a")));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(ones), sp::ones({16, 16})));
}

TEST_F(Explicit2Test, ControlFlowKeepsTheTypesOfItsCarries) {
  auto twice = [](const sp::Array& v) { return v * 2.0f; };
  auto plus_one = [](const sp::Array& v) { return v + 1.0f; };
  auto sine = [](const sp::Array& v) { return sp::sin(v); };
  const sp::Array x = put(X, P("a", "b"));
  check("cond", {sp::lax::cond(sp::Array(true), twice, plus_one, x)});
  check("cond_jit", {sp::jit([&](const sp::Array& p, const sp::Array& v) {
          return sp::lax::cond(p, twice, sine, v);
        })(sp::Array(false), x)});
  using Carry = std::tuple<sp::Array, sp::Array>;
  Carry w = sp::lax::while_loop([](const Carry& c) { return std::get<0>(c) < 3; },
                                [](const Carry& c) {
                                  return Carry{std::get<0>(c) + 1, std::get<1>(c) * 2.0f};
                                },
                                Carry{sp::array<int32_t>({0}, sp::Shape{}), x});
  check("while", {std::get<0>(w), std::get<1>(w)});
  check("fori", {sp::lax::fori_loop(
                    0, 3, [](const sp::Array&, const sp::Array& v) { return v * 2.0f; }, x)});
  auto step = [](const sp::Array& c, const sp::Array& r) { return std::pair{c + r, c * 2.0f}; };
  auto [c, ys] = sp::lax::scan(step, put(X[0], P("a")), put(X, P(None, "a")));
  check("scan", {c, ys});
  auto [c2, ys2] = sp::lax::scan(
      [](const sp::Array& c, const sp::Array& r) {
        return std::pair{c, sp::sin(r)};
      },
      put(X[0], P("b")), put(X, P(None, "a")));
  check("scan_ys", {c2, ys2});
  auto scanned = sp::jit([&](const sp::Array& c, const sp::Array& xs) {
    return sp::lax::scan(step, c, xs);
  })(put(X[0], P("a")), put(X, P(None, "a")));
  check("scan_jit", {scanned.first, scanned.second});
}

TEST_F(Explicit2Test, ControlFlowJaxprsPrintTheTypes) {
  const sp::Array x = put(X, P("a", "b"));
  EXPECT_EQ(sp::make_jaxpr([](const sp::Array& v) {
              return sp::lax::fori_loop(
                  0, 3, [](const sp::Array&, const sp::Array& w) { return w * 2.0f; }, v);
            })(x)
                .str(),
            text("jaxpr_fori"));
  EXPECT_EQ(sp::make_jaxpr([](const sp::Array& p, const sp::Array& v) {
              return sp::lax::cond(
                  p, [](const sp::Array& w) { return w * 2.0f; },
                  [](const sp::Array& w) { return sp::sin(w); }, v);
            })(sp::Array(true), x)
                .str(),
            text("jaxpr_cond"));
  EXPECT_EQ(sp::make_jaxpr([](const sp::Array& c, const sp::Array& xs) {
              return sp::lax::scan(
                  [](const sp::Array& c, const sp::Array& r) {
                    return std::pair{c + r, c * 2.0f};
                  },
                  c, xs);
            })(put(X[0], P("a")), put(X, P(None, "a")))
                .str(),
            text("jaxpr_scan"));
}

// `text` with every occurrence of `from` replaced by `to`.
using spmd_test::replaced;

// JAX's messages name Python functions, their source lines and argument names; spmd's name the
// carry `carry` and leave the functions out. The rest is JAX's text, and fori_loop's, whose body
// is JAX's own, is JAX's in full.
TEST_F(Explicit2Test, BodiesThatChangeACarrysTypeRaiseJaxsErrors) {
  const sp::Array x = put(X, P("a", "b"));
  auto twice = [](const sp::Array& v) { return v * 2.0f; };
  std::string cond = error("cond_mismatch");
  cond.erase(cond.find("true_fun is"), cond.find("The output of") - cond.find("true_fun is"));
  EXPECT_EQ(message([&] {
              sp::lax::cond(
                  sp::Array(true), twice,
                  [&](const sp::Array& v) { return sp::reshard(v, S(P("a"))); }, x);
            }),
            cond);
  using Carry = std::tuple<sp::Array, sp::Array>;
  EXPECT_EQ(message([&] {
              sp::lax::while_loop(
                  [](const Carry& c) { return std::get<0>(c) < 3; },
                  [&](const Carry& c) {
                    return Carry{std::get<0>(c) + 1, sp::reshard(std::get<1>(c), S(P("a")))};
                  },
                  Carry{sp::Array(0), x});
            }),
            replaced(error("while_mismatch"), "component c[1]", "component carry[1]"));
  EXPECT_EQ(
      message([&] {
        sp::lax::fori_loop(
            0, 3,
            [&](const sp::Array&, const sp::Array& v) { return sp::reshard(v, S(P(None, "a"))); },
            x);
      }),
      error("fori_mismatch"));
  EXPECT_EQ(message([&] {
              sp::lax::scan(
                  [&](const sp::Array& c, const sp::Array& r) {
                    return std::pair{sp::reshard(c, S(P("b"))), r};
                  },
                  put(X[0], P("a")), put(X, P(None, "a")));
            }),
            replaced(error("scan_mismatch"), "carry c has", "carry carry has"));
  EXPECT_EQ(message([&] {
              sp::lax::scan(
                  [](const sp::Array& c, const sp::Array& r) {
                    return std::pair{c + r, r};
                  },
                  put(X[0], P()), put(X, P("a", None)));
            }),
            error("scan_xs_split"));
}

TEST_F(Explicit2Test, AutoAxesTakesTrees) {
  const sp::Array u = put(X, P(None, "a")), v = put(X, P("a", None));
  using Pair = std::pair<sp::Array, sp::Array>;
  auto pair_fn = [](const Pair& t) { return Pair{sp::matmul(t.first, t.second), t.first * 2.0f}; };
  Pair r = sp::auto_axes(pair_fn, {}, {S(P("a", None)), S(P(None, "b"))})(Pair{u, v});
  check("auto_pair_arg", {r.first, r.second});
  auto two = [](const sp::Array& a, const sp::Array& b) {
    return std::tuple{sp::matmul(a, b), b + 1.0f};
  };
  auto [p, q] = sp::auto_axes(two, {}, S(P("a", None)))(u, v);
  check("auto_one_sharding", {p, q});
  using Dict = std::map<std::string, sp::Array>;
  Dict d = sp::auto_axes(
      [](const Dict& in) {
        return Dict{{"p", sp::matmul(in.at("x"), in.at("y"))}, {"q", in.at("x")}};
      },
      {}, sp::ShardingTree{S(P("a", "b")), S(P())})(Dict{{"x", u}, {"y", v}});
  check("auto_dict", {d.at("p"), d.at("q")});
  EXPECT_EQ(message([&] { sp::auto_axes(two, {}, sp::ShardingTree{S(P("a", None))})(u, v); }),
            error("auto_prefix_mismatch"));
  EXPECT_EQ(message([&] {
              sp::auto_axes(two, {}, {S(P("a", None)), {}})(u, v);
            }),
            error("auto_none_leaf"));
}

TEST_F(Explicit2Test, ExplicitAxesTakesTrees) {
  const sp::Array x = sp::device_put(X, sp::NamedSharding(mesh_auto, P("a", "b")));
  const sp::Array y = sp::device_put(X, sp::NamedSharding(mesh_auto, P()));
  auto on_auto = [&](const sp::PartitionSpec& spec) { return sp::NamedSharding(mesh_auto, spec); };
  auto two = sp::jit([&](const sp::Array& p, const sp::Array& q) {
    return sp::explicit_axes(
        [](const sp::Array& a, const sp::Array& b) {
          return std::tuple{sp::sum(a, {0}), a * b};
        },
        {}, {on_auto(P("a", "b")), on_auto(P("a", None))})(p, q);
  });
  auto [s, prod] = two(x, y);
  check("explicit_two_args", {s, prod});
  auto one = sp::jit([&](const sp::Array& p, const sp::Array& q) {
    return sp::explicit_axes(
        [](const sp::Array& a, const sp::Array& b) {
          return std::tuple{a + b, b};
        },
        {}, on_auto(P(None, "b")))(p, q);
  });
  auto [sum, same] = one(x, y);
  check("explicit_one_sharding", {sum, same});
  using Pair = std::pair<sp::Array, sp::Array>;
  auto pair = sp::jit([&](const sp::Array& p, const sp::Array& q) {
    return sp::explicit_axes([](const Pair& t) { return t.first + t.second; }, {},
                             {{on_auto(P("a")), on_auto(P("a"))}})(Pair{p, q});
  });
  check("explicit_pair_arg", {pair(x, y)});
  EXPECT_EQ(message([&] {
              sp::explicit_axes([](const sp::Array& a, const sp::Array& b) { return a + b; }, {},
                                {on_auto(P("a")), on_auto(P("a")), on_auto(P())})(x, y);
            }),
            error("explicit_prefix_mismatch"));
}

}  // namespace

// Explicit sharding mode ("sharding in types") against JAX 0.10.2: meshes with axis types, the
// shardings that types carry, each op's result sharding and errors, out_sharding arguments,
// reshard and auto_axes / explicit_axes (goldens in tests/goldens/explicit, recorded by
// tools/goldens/gen_explicit.py; the cases use its names and spellings).
#include <spmd/config.h>
#include <spmd/error.h>
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>

#include "support/golden.h"

namespace {

namespace sp = spmd;
using sp::P;
using spmd_test::error_message;
using spmd_test::golden_blocks;
using spmd_test::jax_error;

constexpr sp::AxisType kE = sp::AxisType::Explicit;
constexpr sp::AxisType kA = sp::AxisType::Auto;
constexpr sp::AxisType kM = sp::AxisType::Manual;

class ExplicitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sp::device_count() < 8) GTEST_SKIP() << "needs 8 devices (SPMD_CPU_DEVICES=8)";
  }
  static std::string text(const std::string& name) {
    static const auto blocks = golden_blocks("explicit/texts.txt");
    auto it = blocks.find(name);
    return it == blocks.end() ? "(missing golden " + name + ")" : it->second;
  }
  static std::string error(const std::string& name) {
    return jax_error("explicit/errors.txt", name);
  }

  static std::string type(const std::string& name) {
    static const auto blocks = golden_blocks("explicit/types.txt");
    auto it = blocks.find(name);
    return it == blocks.end() ? "(missing golden " + name + ")" : it->second;
  }
  // put(v, *spec) of gen_explicit.py.
  sp::Array put(const sp::Array& v, const sp::PartitionSpec& spec) const {
    return sp::device_put(v, sp::NamedSharding(m, spec));
  }
  // The type of f's result, or the error it raises without its "[api] " prefix.
  template <class F>
  static std::string type_or_error(F&& f) {
    try {
      // Waits for the launch: a run still in flight at exit would outlive the kernels' state.
      return sp::typeof(f().block_until_ready()).str();
    } catch (const sp::Error& e) {
      std::string what = e.what();
      return what.substr(what.find("] ") + 2);
    }
  }

  sp::Mesh m = sp::make_mesh({4, 2}, {"a", "b"}, {kE, kE});
  sp::Array X = sp::arange(256.0f).reshape({16, 16});
  sp::Mesh mixed = sp::make_mesh({4, 2}, {"a", "b"}, {kE, kA});
};

TEST_F(ExplicitTest, MeshReprsPrintTheAxisTypes) {
  EXPECT_EQ(m.repr(), text("mesh_explicit_repr"));
  EXPECT_EQ(m.str(), text("mesh_explicit_str"));
  sp::Mesh three = sp::make_mesh({2, 2, 2}, {"a", "b", "c"}, {kE, kA, kM});
  EXPECT_EQ(three.repr(), text("mesh_mixed_repr"));
  EXPECT_EQ(three.str(), text("mesh_mixed_str"));
  EXPECT_EQ(three.axis_types(), (std::vector<sp::AxisType>{kE, kA, kM}));
  EXPECT_EQ(three.axis_type("c"), kM);
  EXPECT_EQ(sp::NamedSharding(m, P("a", "b")).repr(), text("sharding_repr"));
}

TEST_F(ExplicitTest, MakeMeshDefaultsToAuto) {
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"a", "b"});
  EXPECT_EQ(mesh.axis_types(), (std::vector<sp::AxisType>{kA, kA}));
  EXPECT_FALSE(mesh.has_explicit_axes());
  EXPECT_TRUE(m.has_explicit_axes());
}

TEST_F(ExplicitTest, MeshesDifferingInAxisTypesDiffer) {
  EXPECT_EQ(text("mesh_types_equal"), "False");
  EXPECT_FALSE(m == mixed);
  EXPECT_TRUE(m == sp::make_mesh({4, 2}, {"a", "b"}, {kE, kE}));
  EXPECT_FALSE(sp::NamedSharding(m, P("a")) == sp::NamedSharding(mixed, P("a")));
}

TEST_F(ExplicitTest, AxisTypesMustMatchTheAxisNames) {
  EXPECT_EQ(error_message<sp::ValueError>([] {
              sp::make_mesh({4, 2}, {"a", "b"}, {kE});
            }),
            "[Mesh] " + error("make_mesh_types_count"));
}

TEST_F(ExplicitTest, ReshardNamesTheTypeOfAnAutoAxis) {
  sp::Array x = sp::arange(256.0f).reshape({16, 16});
  EXPECT_EQ(
      error_message<sp::ValueError>([&] { sp::reshard(x, sp::NamedSharding(mixed, P("b"))); }),
      "[reshard] " + error("reshard_auto_axis"));
}

TEST_F(ExplicitTest, TypesCarryTheShardingOverExplicitAxes) {
  EXPECT_EQ(sp::typeof(X).str(), type("unsharded"));
  EXPECT_EQ(sp::type_of(put(X, P("a", "b"))).str(), type("put_ab"));
  EXPECT_EQ(sp::typeof(put(X, P("a", "b"))).str(), type("put_ab"));
  EXPECT_EQ(sp::typeof(put(X, P("a"))).str(), type("put_a"));
  EXPECT_EQ(sp::typeof(put(X, P(sp::axes("a", "b"), sp::None))).str(), type("put_tuple"));
  EXPECT_EQ(sp::typeof(put(X, P())).str(), type("put_replicated"));
  EXPECT_EQ(sp::typeof(sp::device_put(X, sp::NamedSharding(mixed, P("a", "b")))).str(),
            type("put_mixed_ab"));
  EXPECT_EQ(sp::typeof(put(sp::zeros({8, 4, 6}, sp::int32), P(sp::None, "a", "b"))).str(),
            type("put_int_3d"));
  EXPECT_EQ(sp::typeof(put(X, P("a", "b"))).repr(), text("typeof_repr"));
  EXPECT_EQ(sp::typeof(X).repr(), text("typeof_repr_unsharded"));
  EXPECT_EQ(sp::typeof(put(X, P("a", "b"))).spec(), P("a", "b"));
  // Auto axes are not part of types.
  sp::Mesh autos = sp::make_mesh({4, 2}, {"a", "b"});
  EXPECT_EQ(sp::typeof(sp::device_put(X, sp::NamedSharding(autos, P("a", "b")))).str(),
            "float32[16,16]");
  // A gathered value is uncommitted: its type carries no sharding.
  EXPECT_EQ(sp::typeof(sp::device_get(put(X, P("a", "b")))).str(), "float32[16,16]");
}

TEST_F(ExplicitTest, JaxprsPrintTheShardingsOfTypes) {
  EXPECT_EQ(sp::make_jaxpr([](const sp::Array& a) { return a * 2.0f; })(put(X, P("a", "b"))).str(),
            text("jaxpr_mul"));
  EXPECT_EQ(sp::make_jaxpr([](const sp::Array& a) { return sp::sin(a); })(
                put(X, P(sp::axes("a", "b"), sp::None)))
                .str(),
            text("jaxpr_sin_tuple"));
  EXPECT_EQ(sp::make_jaxpr([](const sp::Array& a, const sp::Array& b) { return sp::matmul(a, b); })(
                put(X, P("a", sp::None)), put(X, P(sp::None, "b")))
                .str(),
            text("jaxpr_matmul"));
}

// Each case of gen_explicit.py's CASES: the result's type, or JAX's error for it.
TEST_F(ExplicitTest, OpsDecideTheShardingOfTheirResultsAsJax) {
  using sp::None;
  auto add = [](const sp::Array& a, const sp::Array& b) { return a + b; };
  const sp::Array row0 = X[0];
  const std::map<std::string, std::function<sp::Array()>> cases = {
      {"sin", [&] { return sp::sin(put(X, P("a", "b"))); }},
      {"jit_exp",
       [&] { return sp::jit([](const sp::Array& v) { return sp::exp(v); })(put(X, P("a", "b"))); }},
      {"astype", [&] { return put(X, P("a", "b")).astype(sp::int32); }},
      {"mul_scalar", [&] { return put(X, P("a", None)) * 2.0f; }},
      {"add_same", [&] { return put(X, P("a", None)) + put(X, P("a", None)); }},
      {"add_replicated", [&] { return put(X, P("a", None)) + put(X, P()); }},
      {"add_uncommitted", [&] { return put(X, P("a", None)) + X; }},
      {"add_refines", [&] { return put(X, P("a", "b")) + put(X, P("a", None)); }},
      {"add_row_b", [&] { return put(X, P("a", None)) + put(row0, P("b")); }},
      {"add_a_b_dims", [&] { return put(X, P("a", None)) + put(X, P(None, "b")); }},
      {"jit_add", [&] { return sp::jit(add)(put(X, P("a", None)), put(X, P(None, "b"))); }},
      {"where",
       [&] {
         return sp::where(put(X, P("a", None)) > 3.0f, put(X, P("a", None)), sp::Array(0.0f));
       }},
      {"add_different_dims", [&] { return put(X, P("a", None)) + put(X, P(None, "a")); }},
      {"add_different_axes", [&] { return put(X, P("a", None)) + put(X, P("b", None)); }},
      {"add_tuple_vs_axis",
       [&] { return put(X, P(sp::axes("a", "b"), None)) + put(X, P("a", None)); }},
      {"add_row_same_axis", [&] { return put(X, P("a", None)) + put(row0, P("a")); }},
      {"jit_add_different_dims",
       [&] { return sp::jit(add)(put(X, P("a", None)), put(X, P(None, "a"))); }},
      {"matmul_a_b", [&] { return sp::matmul(put(X, P("a", None)), put(X, P(None, "b"))); }},
      {"matmul_contract_lhs", [&] { return sp::matmul(put(X, P(None, "a")), put(X, P())); }},
      {"matmul_contract_rhs", [&] { return sp::matmul(put(X, P()), put(X, P("a", None))); }},
      {"matmul_contract_both",
       [&] { return sp::matmul(put(X, P(None, "a")), put(X, P("a", None))); }},
      {"matmul_contract_both_b",
       [&] { return sp::matmul(put(X, P("a", "b")), put(X, P("b", None))); }},
      {"matmul_contract_mismatch",
       [&] { return sp::matmul(put(X, P(None, "b")), put(X, P("a", None))); }},
      {"matmul_same_axis_out",
       [&] { return sp::matmul(put(X, P("a", None)), put(X, P(None, "a"))); }},
      {"jit_matmul",
       [&] {
         return sp::jit([](const sp::Array& u, const sp::Array& v) { return sp::matmul(u, v); })(
             put(X, P("a", None)), put(X, P(None, "b")));
       }},
      {"matvec", [&] { return sp::matmul(put(X, P("a", None)), put(row0, P())); }},
      {"batched_matmul",
       [&] {
         return sp::matmul(put(sp::ones({4, 8, 16}), P("a", None, None)),
                           put(sp::ones({4, 16, 8}), P("a", None, "b")));
       }},
      {"sum0", [&] { return sp::sum(put(X, P("a", "b")), {0}); }},
      {"sum1", [&] { return sp::sum(put(X, P("a", "b")), {1}); }},
      {"sum_all", [&] { return sp::sum(put(X, P("a", "b"))); }},
      {"sum_keepdims", [&] { return sp::sum(put(X, P("a", "b")), {1}, true); }},
      {"max1", [&] { return sp::max(put(X, P("a", "b")), {1}); }},
      {"mean0", [&] { return sp::mean(put(X, P("a", "b")), {0}); }},
      {"argmax1", [&] { return sp::argmax(put(X, P("a", "b")), 1); }},
      {"transpose", [&] { return put(X, P("a", "b")).T(); }},
      {"transpose_3d",
       [&] {
         return sp::transpose(put(X.reshape({4, 4, 16}), P("a", None, "b")), {2, 0, 1});
       }},
      {"reshape_split_major",
       [&] {
         return put(X, P("a", None)).reshape({4, 4, 16});
       }},
      {"reshape_split_minor",
       [&] {
         return put(X, P(None, "b")).reshape({16, 2, 8});
       }},
      {"reshape_merge_major", [&] { return put(X, P("a", None)).reshape({256}); }},
      {"reshape_merge_both", [&] { return put(X, P("a", "b")).reshape({256}); }},
      {"reshape_merge_3d",
       [&] {
         return put(X.reshape({4, 4, 16}), P("a", None, None)).reshape({16, 16});
       }},
      {"reshape_split_both",
       [&] {
         return put(X, P("a", "b")).reshape({4, 4, 2, 8});
       }},
      {"reshape_merge_minor", [&] { return put(X, P(None, "b")).reshape({256}); }},
      {"reshape_out_sharding",
       [&] { return sp::reshape(put(X, P(None, "b")), {256}, sp::NamedSharding(m, P("a"))); }},
      {"reshape_out_sharding_split",
       [&] {
         return sp::reshape(put(X, P("a", "b")), {4, 4, 2, 8},
                            sp::NamedSharding(m, P("a", None, "b")));
       }},
      {"matmul_out_sharding",
       [&] {
         return sp::matmul(put(X, P(None, "a")), put(X, P("a", None)),
                           sp::NamedSharding(m, P(None, "a")));
       }},
      {"dot_out_sharding",
       [&] {
         return sp::dot(put(X, P(None, "a")), put(X, P("a", None)),
                        sp::NamedSharding(m, P("a", "b")));
       }},
      {"matmul_out_sharding_free",
       [&] {
         return sp::matmul(put(X, P("a", None)), put(X, P(None, "b")),
                           sp::NamedSharding(m, P("b", "a")));
       }},
      {"expand_dims", [&] { return sp::expand_dims(put(X, P("a", "b")), {0}); }},
      {"broadcast_to",
       [&] {
         return sp::broadcast_to(put(row0, P("a")), {8, 16});
       }},
      {"cumsum_free_dim", [&] { return sp::cumsum(put(X, P("a", None)), 1); }},
      {"cumsum_sharded_dim", [&] { return sp::cumsum(put(X, P("a", None)), 0); }},
      {"sort_free_dim", [&] { return sp::sort(put(X, P("a", None)), 1); }},
      {"concatenate0",
       [&] {
         return sp::concatenate({put(X, P("a", None)), put(X, P("a", None))}, 0);
       }},
      {"concatenate1",
       [&] {
         return sp::concatenate({put(X, P("a", None)), put(X, P("a", None))}, 1);
       }},
      {"zeros_like", [&] { return sp::zeros_like(put(X, P("a", "b"))); }},
      {"ones_like", [&] { return sp::ones_like(put(X, P("a", None))); }},
      {"full_like",
       [&] { return sp::full_like(put(X, P(None, sp::axes("a", "b"))), sp::Array(3.0f)); }},
      {"zeros_like_int", [&] { return sp::zeros_like(put(X, P("a", "b")), sp::int32); }},
      {"grad_reshape_out_sharding",
       [&] {
         return sp::grad([&](const sp::Array& v) {
           return sp::sum(sp::reshape(v, {256}, sp::NamedSharding(m, P("a"))));
         })(put(X, P(None, "b")));
       }},
      {"grad_matmul_out_sharding",
       [&] {
         const sp::Array y = put(X, P("a", None));
         return sp::grad([&](const sp::Array& u) {
           return sp::sum(sp::matmul(u, y, sp::NamedSharding(m, P(None, "a"))));
         })(put(X, P(None, "a")));
       }},
      {"reshard_uncommitted", [&] { return sp::reshard(X, sp::NamedSharding(m, P("a"))); }},
      {"reshard_moves",
       [&] { return sp::reshard(put(X, P("a", None)), sp::NamedSharding(m, P(None, "a"))); }},
      {"reshard_jit",
       [&] {
         return sp::jit([&](const sp::Array& v) {
           return sp::reshard(v, sp::NamedSharding(m, P(None, sp::axes("a", "b"))));
         })(put(X, P("a", "b")));
       }},
      {"reshard_mixed", [&] { return sp::reshard(X, sp::NamedSharding(mixed, P(None, "a"))); }},
      {"mesh_mismatch",
       [&] { return put(X, P("a")) + sp::device_put(X, sp::NamedSharding(mixed, P("a"))); }},
  };
  const auto types = golden_blocks("explicit/types.txt");
  for (const auto& [name, f] : cases) {
    auto it = types.find(name);
    const std::string expected = it != types.end() ? it->second : error(name);
    EXPECT_EQ(type_or_error(f), expected) << name;
  }
}

TEST_F(ExplicitTest, JaxprsPrintOutShardings) {
  using sp::None;
  // JAX's jaxpr leaves dot_general's out_sharding out; the result's type shows it.
  EXPECT_EQ(sp::make_jaxpr([&](const sp::Array& u, const sp::Array& v) {
              return sp::matmul(u, v, sp::NamedSharding(m, P(None, "a")));
            })(put(X, P(None, "a")), put(X, P("a", None)))
                .str(),
            text("jaxpr_matmul_out_sharding"));
  EXPECT_EQ(sp::make_jaxpr([&](const sp::Array& u) {
              return sp::reshape(u, {256}, sp::NamedSharding(m, P("a")));
            })(put(X, P(None, "b")))
                .str(),
            text("jaxpr_reshape_out_sharding"));
  EXPECT_EQ(
      sp::make_jaxpr([](const sp::Array& u) { return sp::reshape(u, {256}); })(put(X, P("a", "b")))
          .str(),
      text("jaxpr_reshape_merge"));
}

TEST_F(ExplicitTest, OutShardingsLayOutTheResult) {
  using sp::None;
  sp::Array prod =
      sp::matmul(put(X, P(None, "a")), put(X, P("a", None)), sp::NamedSharding(m, P(None, "a")));
  EXPECT_EQ(prod.sharding()->repr(), text("result_sharding_matmul_out"));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(prod), sp::matmul(X, X)));
  sp::Array flat = sp::reshape(put(X, P(None, "b")), {256}, sp::NamedSharding(m, P("a")));
  EXPECT_EQ(flat.sharding()->repr(), text("result_sharding_reshape_out"));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(flat), X.reshape({256})));
  // Operands with no sharding in their types: the result is placed where out_sharding says.
  sp::Array placed = sp::dot(X, X, sp::NamedSharding(m, P("a", "b")));
  EXPECT_EQ(*placed.sharding(), sp::NamedSharding(m, P("a", "b")));
  EXPECT_EQ(sp::typeof(placed).str(), "float32[16@a,16@b]");
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(placed), sp::matmul(X, X)));
}

TEST_F(ExplicitTest, OutShardingsNameExplicitAxesOnly) {
  sp::Mesh autos = sp::make_mesh({4, 2}, {"a", "b"});
  EXPECT_EQ(error_message<sp::ValueError>(
                [&] { sp::matmul(X, X, sp::NamedSharding(autos, P(sp::None, "a"))); }),
            "[dot_general] " + error("matmul_out_sharding_auto"));
  EXPECT_EQ(error_message<sp::ValueError>(
                [&] { sp::reshape(X, {256}, sp::NamedSharding(autos, P("a"))); }),
            "[reshape] " + error("reshape_out_sharding_auto"));
}

// JAX's *_like of a committed array keeps its sharding, on Auto meshes too.
TEST_F(ExplicitTest, LikeOfACommittedArrayKeepsItsSharding) {
  using sp::None;
  EXPECT_EQ(sp::zeros_like(put(X, P("a", "b"))).sharding()->repr(), text("like_sharding_explicit"));
  sp::Mesh autos = sp::make_mesh({4, 2}, {"a", "b"});
  sp::Array on_auto = sp::device_put(X, sp::NamedSharding(autos, P("a", None)));
  sp::Array ones = sp::ones_like(on_auto);
  EXPECT_EQ(ones.sharding()->repr(), text("like_sharding_auto"));
  EXPECT_EQ(ones.committed() ? "True" : "False", text("like_committed_auto"));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(ones), sp::ones({16, 16})));
  sp::Array full =
      sp::full_like(sp::device_put(X, sp::NamedSharding(autos, P(None, "b"))), sp::Array(2.0f));
  EXPECT_EQ(full.sharding()->repr(), text("full_like_sharding_auto"));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(full), sp::full({16, 16}, sp::Array(2.0f))));
  EXPECT_EQ(sp::zeros_like(X).committed() ? "True" : "False", text("like_uncommitted"));
}

// The types f sees inside auto_axes / explicit_axes and returns, then the wrapped result's, as
// gen_explicit.py's inner_types records them.
template <class Wrap, class F, class... Args>
std::string inner_types(Wrap wrap, F f, const Args&... args) {
  std::string seen;
  auto g = [&](const auto&... vs) {
    sp::Array out = f(vs...);
    for (const sp::Array& v : {vs..., out}) seen += sp::typeof(v).str() + " ";
    return out;
  };
  return seen + sp::typeof(wrap(g)(args...)).str();
}

TEST_F(ExplicitTest, AutoAxesRunsWithAxesMadeAuto) {
  using sp::None;
  auto matmul = [](const sp::Array& u, const sp::Array& v) { return sp::matmul(u, v); };
  const sp::NamedSharding rows(m, P("a", None));
  auto all = [&](auto g) { return sp::auto_axes(g, {}, rows); };
  EXPECT_EQ(inner_types(all, matmul, put(X, P(None, "a")), put(X, P("a", None))),
            text("auto_axes_inner_all"));
  // Without auto_axes the product is ambiguous (matmul_contract_both).
  sp::Array prod = sp::auto_axes(matmul, {}, rows)(put(X, P(None, "a")), put(X, P("a", None)));
  EXPECT_EQ(sp::typeof(prod).str(), type("auto_axes_matmul"));
  EXPECT_EQ(*prod.sharding(), rows);
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(prod), sp::matmul(X, X)));
  auto sin = [](const sp::Array& v) { return sp::sin(v); };
  auto one = [&](auto g) { return sp::auto_axes(g, {"a"}, sp::NamedSharding(m, P("b", None))); };
  EXPECT_EQ(inner_types(one, sin, put(X, P("a", "b"))), text("auto_axes_inner_one"));
  EXPECT_EQ(sp::typeof(one(sin)(put(X, P("a", "b")))).str(), type("auto_axes_one_axis"));
  sp::Array doubled = sp::jit([&](const sp::Array& u) {
    return sp::auto_axes([](const sp::Array& v) { return v * 2.0f; }, {},
                         sp::NamedSharding(m, P(None, "b")))(u);
  })(put(X, P("a", "b")));
  EXPECT_EQ(sp::typeof(doubled).str(), type("auto_axes_jit")) << doubled.sharding()->repr();
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(doubled), X * 2.0f));
}

TEST_F(ExplicitTest, ExplicitAxesRunsWithAxesMadeExplicit) {
  sp::Mesh autos = sp::make_mesh({4, 2}, {"a", "b"});
  const sp::Array x = sp::device_put(X, sp::NamedSharding(autos, P("a", "b")));
  auto sum0 = [](const sp::Array& v) { return sp::sum(v, {0}); };
  auto all = [&](auto g) {
    return sp::explicit_axes(g, {}, sp::NamedSharding(autos, P("a", "b")));
  };
  EXPECT_EQ(inner_types(all, sum0, x), text("explicit_axes_inner"));
  auto twice = [](const sp::Array& v) { return v * 2.0f; };
  auto one = [&](auto g) {
    return sp::explicit_axes(g, {"b"}, sp::NamedSharding(autos, P(sp::None, "b")));
  };
  EXPECT_EQ(inner_types(one, twice, x), text("explicit_axes_inner_one"));
  sp::Array summed = sp::jit([&](const sp::Array& u) { return all(sum0)(u); })(x);
  EXPECT_EQ(sp::typeof(summed).str(), type("explicit_axes_set_mesh"));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(summed), sp::sum(X, {0})));
}

// The partitioner lays results out as their types say (Explicit shardings are fixed), and the
// values are those of the unsharded computation.
TEST_F(ExplicitTest, ResultsAreLaidOutAsTheirTypesSay) {
  using sp::None;
  sp::Array prod = sp::matmul(put(X, P("a", None)), put(X, P(None, "b")));
  EXPECT_EQ(*prod.sharding(), sp::NamedSharding(m, P("a", "b")));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(prod), sp::matmul(X, X)));
  sp::Array partial = sp::matmul(put(X, P(None, "a")), put(X, P()));
  EXPECT_EQ(*partial.sharding(), sp::NamedSharding(m, P()));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(partial), sp::matmul(X, X)));
  sp::Array sum = sp::sum(put(X, P("a", "b")), {0});
  EXPECT_EQ(sum.sharding()->repr(), text("result_sharding_sum"));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(sum), sp::sum(X, {0})));
  sp::Array both = put(X, P("a", None)) + put(X, P(None, "b"));
  EXPECT_EQ(both.sharding()->repr(), text("result_sharding_add"));
  auto f = sp::jit([](const sp::Array& u) { return sp::sin(u).T(); });
  sp::Array t = f(put(X, P("a", "b")));
  EXPECT_EQ(*t.sharding(), sp::NamedSharding(m, P("b", "a")));
  EXPECT_TRUE(spmd_test::arrays_close(sp::device_get(t), sp::sin(X).T()));
}

}  // namespace

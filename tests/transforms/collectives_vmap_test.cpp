// Collectives under vmap with axis names against JAX (tools/goldens/gen_collectives.py): the
// batched jaxprs, values for several dtypes and nested vmaps over axis tuples (2-D and 3-D),
// gradients through the linear collectives, and JAX's error texts.
#include <spmd/parallel.h>
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "core/axis_env.h"
#include "support/golden.h"
#include "transforms/jaxpr_text_support.h"

#include <fstream>
#include <functional>
#include <map>
#include <string>

namespace sp = spmd;
using sp::Array;

namespace {

using Fn = std::function<Array(const Array&)>;

std::string jaxpr_golden(const std::string& name) {
  return spmd_test::golden_text("collectives/jaxpr_" + name + ".txt");
}

Array golden_value(const std::string& key) {
  return spmd_test::load_golden("collectives/values.npz").at(key);
}

Array golden_grad(const std::string& key) {
  return spmd_test::load_golden("collectives/grads.npz").at(key);
}

// JAX's message for an error case (errors.txt), with jax.shard_map spelled as in spmd.
std::string jax_error(const std::string& name) {
  std::ifstream in(spmd_test::golden_path("collectives/errors.txt"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + ": ", 0) != 0) continue;
    std::string msg = line.substr(name.size() + 2);
    auto at = msg.find("`jax.shard_map`");
    if (at != std::string::npos) msg.replace(at, 15, "`sp::shard_map`");
    return msg;
  }
  ADD_FAILURE() << "no recorded error " << name;
  return {};
}

Array vmap_i(const Fn& f, const Array& x) {
  return sp::vmap(f, {.axis_name = "i"})(x);
}

// vmap over i of vmap over j (of vmap over k): the leading dims are the named axes.
Array nested2(const Fn& f, const Array& x) {
  auto inner = sp::vmap(f, {.axis_name = "j"});
  return sp::vmap([&](const Array& v) { return inner(v); }, {.axis_name = "i"})(x);
}

Array nested3(const Fn& f, const Array& x) {
  auto k = sp::vmap(f, {.axis_name = "k"});
  auto j = sp::vmap([&](const Array& v) { return k(v); }, {.axis_name = "j"});
  return sp::vmap([&](const Array& v) { return j(v); }, {.axis_name = "i"})(x);
}

// Integers bitwise; floats to 1e-6 (sums run in another order than XLA's, so a result near zero
// after cancellation may be many ulps away while its absolute error stays at the inputs' scale).
void expect_matches(const Array& got, const Array& want) {
  if (sp::is_floating(want.dtype()))
    EXPECT_TRUE(spmd_test::arrays_close(got, want, 1e-6, 1e-6));
  else
    EXPECT_TRUE(spmd_test::arrays_equal(got, want));
}

void check_value(const std::string& name, const Fn& batched) {
  SCOPED_TRACE(name);
  expect_matches(batched(golden_value(name + ".x")), golden_value(name + ".y"));
}

std::vector<std::pair<int, int>> shift(int n, int by) {
  std::vector<std::pair<int, int>> perm;
  for (int j = 0; j < n; ++j) perm.emplace_back(j, (j + by) % n);
  return perm;
}

// ---- jaxpr texts ------------------------------------------------------------------------------
struct JaxprCase {
  const char* name;
  Fn f;
  sp::Shape shape;
};

TEST(CollectiveVmap, JaxprTextsMatchJax) {
  const std::vector<JaxprCase> cases = {
      {"psum", [](const Array& v) { return sp::psum(v, "i"); }, {4, 2}},
      {"pmean", [](const Array& v) { return sp::pmean(v, "i"); }, {4, 2}},
      {"pmax", [](const Array& v) { return sp::pmax(v, "i"); }, {4, 2}},
      {"pmin", [](const Array& v) { return sp::pmin(v, "i"); }, {4, 2}},
      {"psum_bool", [](const Array& v) { return sp::psum(v > 1.0, "i"); }, {4, 2}},
      {"all_gather", [](const Array& v) { return sp::all_gather(v, "i"); }, {4, 2}},
      {"all_gather_tiled",
       [](const Array& v) { return sp::all_gather(v, "i", {.tiled = true}); },
       {4, 2}},
      {"all_gather_axis1",
       [](const Array& v) { return sp::all_gather(v, "i", {.axis = 1}); },
       {4, 4, 2}},
      {"psum_scatter", [](const Array& v) { return sp::psum_scatter(v, "i"); }, {4, 4, 2}},
      {"psum_scatter_tiled",
       [](const Array& v) { return sp::psum_scatter(v, "i", {.tiled = true}); },
       {4, 4, 2}},
      {"all_to_all", [](const Array& v) { return sp::all_to_all(v, "i", 0, 0); }, {4, 4, 2}},
      {"all_to_all_tiled",
       [](const Array& v) { return sp::all_to_all(v, "i", 0, 1, {.tiled = true}); },
       {4, 4, 2}},
      {"axis_index", [](const Array& v) { return v + sp::axis_index("i"); }, {4, 2}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto batched = sp::vmap(c.f, {.axis_name = "i"});
    EXPECT_EQ(sp::make_jaxpr(batched)(jaxpr_text::f32(c.shape)).str(), jaxpr_golden(c.name));
  }
}

// Inside an axis environment (JAX's make_jaxpr(f, axis_env=[('i', 4)])) the collectives
// themselves are staged, with JAX's params.
TEST(CollectiveVmap, JaxprTextsInAxisEnvMatchJax) {
  const std::vector<JaxprCase> cases = {
      {"env_psum", [](const Array& v) { return sp::psum(v, "i"); }, {2}},
      {"env_pmax_groups",
       [](const Array& v) {
         return sp::pmax(v, "i", {.axis_index_groups = sp::AxisIndexGroups{{0, 1}, {2, 3}}});
       },
       {2}},
      {"env_all_gather", [](const Array& v) { return sp::all_gather(v, "i"); }, {2}},
      {"env_psum_scatter",
       [](const Array& v) { return sp::psum_scatter(v, "i", {.tiled = true}); },
       {4}},
      {"env_ppermute", [](const Array& v) { return sp::ppermute(v, "i", shift(4, 1)); }, {2}},
      {"env_all_to_all", [](const Array& v) { return sp::all_to_all(v, "i", 0, 0); }, {4, 2}},
      {"env_axis_index", [](const Array& v) { return v + sp::axis_index("i"); }, {2}},
      {"env_pmin", [](const Array& v) { return sp::pmin(v, "i"); }, {2}},
      {"env_pmin_groups",
       [](const Array& v) {
         return sp::pmin(v, "i", {.axis_index_groups = sp::AxisIndexGroups{{0, 2}, {1, 3}}});
       },
       {2}},
      {"env_pbroadcast", [](const Array& v) { return sp::pbroadcast(v, "i", 2); }, {2}},
  };
  sp::AxisEnvScope env({{"i", 4, "pmap"}});
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(sp::make_jaxpr(c.f)(jaxpr_text::f32(c.shape)).str(), jaxpr_golden(c.name));
  }
}

// ---- values -----------------------------------------------------------------------------------
TEST(CollectiveVmap, ReductionsMatchJax) {
  for (const char* tag : {"f32", "i32"}) {
    std::string t = tag;
    check_value("psum_" + t, [](const Array& x) {
      return vmap_i([](const Array& v) { return sp::psum(v, "i"); }, x);
    });
    check_value("pmax_" + t, [](const Array& x) {
      return vmap_i([](const Array& v) { return sp::pmax(v, "i"); }, x);
    });
    check_value("pmin_" + t, [](const Array& x) {
      return vmap_i([](const Array& v) { return sp::pmin(v, "i"); }, x);
    });
    check_value("pmean_" + t, [](const Array& x) {
      return vmap_i([](const Array& v) { return sp::pmean(v, "i"); }, x);
    });
  }
  check_value("psum_bool", [](const Array& x) {
    return vmap_i([](const Array& v) { return sp::psum(v > 0.0, "i"); }, x);
  });
}

// A value that does not vary over the axis sums to value · axis size.
TEST(CollectiveVmap, PsumOfUnbatchedValueMultipliesByAxisSize) {
  check_value("psum_unbatched", [](const Array& x) {
    return vmap_i([](const Array& v) { return v + sp::psum(sp::full({3}, 2.0f), "i"); }, x);
  });
}

TEST(CollectiveVmap, GathersAndPermutationsMatchJax) {
  for (const char* tag : {"f32", "i32"}) {
    std::string t = tag;
    check_value("all_gather_" + t, [](const Array& x) {
      return vmap_i([](const Array& v) { return sp::all_gather(v, "i"); }, x);
    });
    check_value("ppermute_" + t, [](const Array& x) {
      return vmap_i([](const Array& v) { return sp::ppermute(v, "i", shift(8, 1)); }, x);
    });
  }
  check_value("ppermute_bf16", [](const Array& x) {
    return vmap_i([](const Array& v) { return sp::ppermute(v, "i", shift(8, 3)); }, x);
  });
  check_value("all_gather_tiled", [](const Array& x) {
    return vmap_i([](const Array& v) { return sp::all_gather(v, "i", {.tiled = true}); }, x);
  });
  check_value("all_gather_axis1", [](const Array& x) {
    return vmap_i([](const Array& v) { return sp::all_gather(v, "i", {.axis = 1}); }, x);
  });
  check_value("pshuffle", [](const Array& x) {
    return vmap_i([](const Array& v) { return sp::pshuffle(v, "i", {3, 1, 4, 0, 5, 7, 6, 2}); }, x);
  });
  check_value("axis_index", [](const Array& x) {
    return vmap_i([](const Array& v) { return v + sp::axis_index("i"); }, x);
  });
}

TEST(CollectiveVmap, ScattersAndAllToAllMatchJax) {
  check_value("psum_scatter", [](const Array& x) {
    return vmap_i([](const Array& v) { return sp::psum_scatter(v, "i"); }, x);
  });
  check_value("psum_scatter_tiled", [](const Array& x) {
    return vmap_i([](const Array& v) { return sp::psum_scatter(v, "i", {.tiled = true}); }, x);
  });
  check_value("psum_scatter_dim1", [](const Array& x) {
    return vmap_i(
        [](const Array& v) {
          return sp::psum_scatter(v, "i", {.scatter_dimension = 1, .tiled = true});
        },
        x);
  });
  check_value("all_to_all", [](const Array& x) {
    return vmap_i([](const Array& v) { return sp::all_to_all(v, "i", 0, 0); }, x);
  });
  check_value("all_to_all_tiled", [](const Array& x) {
    return vmap_i([](const Array& v) { return sp::all_to_all(v, "i", 0, 1, {.tiled = true}); }, x);
  });
  check_value("all_to_all_split1", [](const Array& x) {
    return vmap_i([](const Array& v) { return sp::all_to_all(v, "i", 1, 0); }, x);
  });
}

// A partial permutation leaves zeros where no source sends (JAX's vmap accepts only full ones;
// the values follow pmap's semantics).
TEST(CollectiveVmap, PpermuteWithoutSourceGivesZeros) {
  Array x = sp::arange(8.0f).reshape({4, 2});
  Array y = vmap_i([](const Array& v) { return sp::ppermute(v, "i", {{0, 1}, {1, 2}}); }, x);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0, 0, 0, 1, 2, 3, 0, 0}));
}

TEST(CollectiveVmap, NestedAxisTuplesMatchJax) {
  check_value("nested_psum_ij", [](const Array& x) {
    return nested2([](const Array& v) { return sp::psum(v, sp::axes("i", "j")); }, x);
  });
  check_value("nested_psum_ji", [](const Array& x) {
    return nested2([](const Array& v) { return sp::psum(v, sp::axes("j", "i")); }, x);
  });
  check_value("nested_psum_i", [](const Array& x) {
    return nested2([](const Array& v) { return sp::psum(v, "i"); }, x);
  });
  check_value("nested_pmax_ij", [](const Array& x) {
    return nested2([](const Array& v) { return sp::pmax(v, sp::axes("i", "j")); }, x);
  });
  check_value("nested_axis_index_ij", [](const Array& x) {
    return nested2([](const Array& v) { return v * 0.0f + sp::axis_index(sp::axes("i", "j")); }, x);
  });
  check_value("nested_axis_index_ji", [](const Array& x) {
    return nested2([](const Array& v) { return v * 0.0f + sp::axis_index(sp::axes("j", "i")); }, x);
  });
  check_value("nested_all_gather_i", [](const Array& x) {
    return nested2([](const Array& v) { return sp::all_gather(v, "i"); }, x);
  });
  check_value("nested_all_to_all_ij", [](const Array& x) {
    return nested2(
        [](const Array& v) { return sp::all_to_all(v, sp::axes("i", "j"), 0, 0, {.tiled = true}); },
        x);
  });
  check_value("nested_all_to_all_ji", [](const Array& x) {
    return nested2(
        [](const Array& v) { return sp::all_to_all(v, sp::axes("j", "i"), 0, 0, {.tiled = true}); },
        x);
  });
  check_value("nested_all_to_all_untiled", [](const Array& x) {
    return nested2([](const Array& v) { return sp::all_to_all(v, sp::axes("i", "j"), 0, 1); }, x);
  });
  check_value("nested3_psum_ijk", [](const Array& x) {
    return nested3([](const Array& v) { return sp::psum(v, sp::axes("i", "j", "k")); }, x);
  });
  check_value("nested3_psum_ik", [](const Array& x) {
    return nested3([](const Array& v) { return sp::psum(v, sp::axes("i", "k")); }, x);
  });
  check_value("nested3_axis_index", [](const Array& x) {
    return nested3(
        [](const Array& v) { return v * 0.0f + sp::axis_index(sp::axes("i", "j", "k")); }, x);
  });
}

// all_gather and psum_scatter over a tuple that includes the vmap axis, checked against the
// reference semantics: instance (a, b) is number a · size_b + b.
TEST(CollectiveVmap, TupleGatherAndScatterFollowMajorToMinorOrder) {
  Array x = sp::arange(2 * 3 * 2.0).reshape({2, 3, 2}).astype(sp::float32);
  Array gathered = nested2([](const Array& v) { return sp::all_gather(v, sp::axes("i", "j")); }, x);
  Array expect = sp::broadcast_to(x.reshape({1, 1, 6, 2}), {2, 3, 6, 2});
  EXPECT_TRUE(spmd_test::arrays_equal(gathered, expect));
  Array minor_first =
      nested2([](const Array& v) { return sp::all_gather(v, sp::axes("j", "i")); }, x);
  Array swapped = sp::transpose(x, {1, 0, 2}).reshape({1, 1, 6, 2});
  EXPECT_TRUE(spmd_test::arrays_equal(minor_first, sp::broadcast_to(swapped, {2, 3, 6, 2})));

  Array y = sp::arange(2 * 3 * 12.0).reshape({2, 3, 12}).astype(sp::float32);
  Array scattered = nested2(
      [](const Array& v) { return sp::psum_scatter(v, sp::axes("i", "j"), {.tiled = true}); }, y);
  Array total = sp::sum(y, {0, 1});
  EXPECT_TRUE(spmd_test::arrays_equal(scattered, total.reshape({2, 3, 2})));
  Array minor_major = nested2(
      [](const Array& v) { return sp::psum_scatter(v, sp::axes("j", "i"), {.tiled = true}); }, y);
  Array by_j_then_i = sp::transpose(total.reshape({3, 2, 2}), {1, 0, 2});
  EXPECT_TRUE(spmd_test::arrays_equal(minor_major, by_j_then_i));
  Array z = sp::arange(2 * 3 * 6.0).reshape({2, 3, 6}).astype(sp::float32);
  Array untiled =
      nested2([](const Array& v) { return sp::psum_scatter(v, sp::axes("i", "j")); }, z);
  EXPECT_TRUE(spmd_test::arrays_equal(untiled, sp::sum(z, {0, 1}).reshape({2, 3})));
}

// A jitted function called under vmap is batched through its body, also when its only
// collective-dependent value (axis_index) has no batched operand; jit of vmap runs as one unit.
TEST(CollectiveVmap, ComposesWithJit) {
  Array x = sp::arange(8.0f).reshape({4, 2});
  auto body = sp::jit([](const Array& v) { return sp::psum(v, "i") + sp::axis_index("i"); });
  Array y = vmap_i([&](const Array& v) { return body(v); }, x);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{12, 16, 13, 17, 14, 18, 15, 19}));
  auto whole =
      sp::jit(sp::vmap([](const Array& v) { return sp::pmax(v, "i"); }, {.axis_name = "i"}));
  EXPECT_EQ(whole(x).to_vector<float>(), (std::vector<float>{6, 7, 6, 7, 6, 7, 6, 7}));
}

// One jit object traced under an axis of size 4 is traced again under size 2: the cache key
// includes the named axes in scope, so psum's size is not reused from the first trace.
TEST(CollectiveVmap, JitRetracesUnderAnotherAxisSize) {
  auto body = sp::jit([](const Array& v) { return sp::psum(sp::ones_like(v), "i"); });
  Array four = vmap_i([&](const Array& v) { return body(v); }, sp::zeros({4}));
  Array two = vmap_i([&](const Array& v) { return body(v); }, sp::zeros({2}));
  EXPECT_EQ(four.to_vector<float>(), (std::vector<float>{4, 4, 4, 4}));
  EXPECT_EQ(two.to_vector<float>(), (std::vector<float>{2, 2}));
}

// Control flow whose operands are all unbatched still runs its collectives over the vmap axis
// (JAX: [4 4 4 4], [12 12 12 12] twice, [0 1 2 3]).
TEST(CollectiveVmap, CollectivesInsideControlFlowWithUnbatchedOperands) {
  namespace lax = sp::lax;
  const Array x = sp::zeros({4});
  auto in_cond = [](const Array& v) {
    return v + lax::cond(
                   Array(true), [](const Array& u) { return sp::psum(u, "i"); },
                   [](const Array& u) { return u; }, Array(1.0f));
  };
  auto in_fori = [](const Array& v) {
    return v + lax::fori_loop(
                   0, 3,
                   [](const Array&, const Array& c) { return c + sp::psum(Array(1.0f), "i"); },
                   Array(0.0f));
  };
  auto in_while = [](const Array& v) {
    return v + lax::while_loop([](const Array& c) { return c < 10.0f; },
                               [](const Array& c) { return c + sp::psum(Array(1.0f), "i"); },
                               Array(0.0f));
  };
  auto index_in_cond = [](const Array& v) {
    return v + lax::cond(
                   Array(true), [](const Array& u) { return u * sp::axis_index("i"); },
                   [](const Array& u) { return u; }, Array(1.0f));
  };
  EXPECT_EQ(vmap_i(in_cond, x).to_vector<float>(), (std::vector<float>{4, 4, 4, 4}));
  EXPECT_EQ(vmap_i(in_fori, x).to_vector<float>(), (std::vector<float>{12, 12, 12, 12}));
  EXPECT_EQ(vmap_i(in_while, x).to_vector<float>(), (std::vector<float>{12, 12, 12, 12}));
  EXPECT_EQ(vmap_i(index_in_cond, x).to_vector<float>(), (std::vector<float>{0, 1, 2, 3}));
}

// ppermute and pbroadcast over a tuple that includes the vmap axis address instances by their
// index over the tuple (a · size_j + b), as on a mesh.
TEST(CollectiveVmap, TuplePpermuteAndPbroadcastAddressInstancesMajorToMinor) {
  Array x = sp::arange(2 * 3 * 2.0).reshape({2, 3, 2}).astype(sp::float32);
  Array flat = x.reshape({6, 2});
  Array shifted =
      nested2([](const Array& v) { return sp::ppermute(v, sp::axes("i", "j"), shift(6, 1)); }, x);
  Array rolled =
      sp::concatenate({sp::lax::slice_in_dim(flat, 5, 6), sp::lax::slice_in_dim(flat, 0, 5)}, 0);
  EXPECT_TRUE(spmd_test::arrays_equal(shifted, rolled.reshape({2, 3, 2})));
  Array partial = nested2(
      [](const Array& v) {
        return sp::ppermute(v, sp::axes("j", "i"), {{0, 5}, {5, 0}});
      },
      x);
  // Over (j, i) instance (a, b) is number b · 2 + a: 0 is (0, 0) and 5 is (1, 2).
  std::vector<float> want(12, 0.0f);
  want[0] = 10, want[1] = 11, want[10] = 0, want[11] = 1;
  EXPECT_EQ(partial.to_vector<float>(), want);
  Array broadcast =
      nested2([](const Array& v) { return sp::pbroadcast(v, sp::axes("i", "j"), 4); }, x);
  EXPECT_TRUE(spmd_test::arrays_equal(
      broadcast,
      sp::broadcast_to(sp::lax::slice_in_dim(flat, 4, 5).reshape({1, 1, 2}), {2, 3, 2})));
}

// ---- grads -------------------------------------------------------------------------------------
void check_grad(const std::string& name, const Fn& f) {
  SCOPED_TRACE(name);
  Array x = golden_grad(name + ".x");
  Array w = golden_grad(name + ".w");
  auto loss = [&](const Array& v) { return sp::sum(vmap_i(f, v) * w); };
  EXPECT_TRUE(spmd_test::arrays_close(sp::grad(loss)(x), golden_grad(name + ".g"), 1e-5, 1e-5));
}

TEST(CollectiveVmap, GradsThroughCollectivesMatchJax) {
  check_grad("psum", [](const Array& v) { return sp::psum(v, "i"); });
  check_grad("psum_sin", [](const Array& v) { return sp::sin(v) * sp::psum(v * v, "i"); });
  check_grad("all_gather", [](const Array& v) { return sp::all_gather(v, "i"); });
  check_grad("all_gather_tiled",
             [](const Array& v) { return sp::all_gather(v, "i", {.tiled = true}); });
  check_grad("ppermute", [](const Array& v) { return sp::ppermute(v, "i", shift(4, 1)); });
  check_grad("all_to_all", [](const Array& v) { return sp::all_to_all(v, "i", 0, 0); });
  check_grad("all_to_all_tiled",
             [](const Array& v) { return sp::all_to_all(v, "i", 0, 1, {.tiled = true}); });
  check_grad("psum_scatter", [](const Array& v) { return sp::psum_scatter(v, "i"); });
  check_grad("psum_scatter_tiled",
             [](const Array& v) { return sp::psum_scatter(v, "i", {.tiled = true}); });
}

// grad inside vmap: the collectives themselves are transposed (psum to psum, all_gather to
// psum_scatter and back, ppermute to the inverse permutation, all_to_all to the swapped one).
void check_grad_inside(const std::string& name, const Fn& f) {
  SCOPED_TRACE(name);
  auto per_instance = [&](const Array& v, const Array& wv) {
    return sp::grad([&](const Array& u) { return sp::sum(f(u) * wv); })(v);
  };
  Array g = sp::vmap(per_instance, {.axis_name = "i"})(golden_grad(name + ".x"),
                                                       golden_grad(name + ".w"));
  EXPECT_TRUE(spmd_test::arrays_close(g, golden_grad(name + ".g"), 1e-5, 1e-5));
}

TEST(CollectiveVmap, GradsInsideVmapTransposeTheCollectives) {
  check_grad_inside("in_psum", [](const Array& v) { return sp::psum(v, "i"); });
  check_grad_inside("in_pmean", [](const Array& v) { return sp::pmean(v, "i"); });
  check_grad_inside("in_all_gather", [](const Array& v) { return sp::all_gather(v, "i"); });
  check_grad_inside("in_all_gather_tiled",
                    [](const Array& v) { return sp::all_gather(v, "i", {.tiled = true}); });
  check_grad_inside("in_ppermute",
                    [](const Array& v) { return sp::ppermute(v, "i", shift(4, 1)); });
  check_grad_inside("in_all_to_all", [](const Array& v) { return sp::all_to_all(v, "i", 0, 0); });
  check_grad_inside("in_all_to_all_tiled",
                    [](const Array& v) { return sp::all_to_all(v, "i", 0, 1, {.tiled = true}); });
  check_grad_inside("in_psum_scatter", [](const Array& v) { return sp::psum_scatter(v, "i"); });
  check_grad_inside("in_psum_scatter_tiled",
                    [](const Array& v) { return sp::psum_scatter(v, "i", {.tiled = true}); });
}

// pbroadcast's cotangent is the sum of all instances' cotangents, delivered to the source only
// (JAX's rule; JAX's own vmap of pbroadcast fails, so this is checked by hand).
TEST(CollectiveVmap, PbroadcastTransposeSendsTheSumToTheSource) {
  Array x = sp::arange(8.0f).reshape({4, 2});
  Array w = sp::arange(1.0f, 9.0f).reshape({4, 2});
  auto per_instance = [](const Array& v, const Array& wv) {
    return sp::grad([&](const Array& u) { return sp::sum(sp::pbroadcast(u, "i", 2) * wv); })(v);
  };
  Array g = sp::vmap(per_instance, {.axis_name = "i"})(x, w);
  EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{0, 0, 0, 0, 16, 20, 0, 0}));
}

// pvary changes no value under vmap, and transposes to psum (pmap semantics).
TEST(CollectiveVmap, PvaryIsIdentityAndTransposesToPsum) {
  Array x = sp::arange(8.0f).reshape({4, 2});
  Array w = sp::arange(1.0f, 9.0f).reshape({4, 2});
  EXPECT_TRUE(
      spmd_test::arrays_equal(vmap_i([](const Array& v) { return sp::lax::pvary(v, "i"); }, x), x));
  auto per_instance = [](const Array& v, const Array& wv) {
    return sp::grad([&](const Array& u) { return sp::sum(sp::lax::pvary(u, "i") * wv); })(v);
  };
  Array g = sp::vmap(per_instance, {.axis_name = "i"})(x, w);
  EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{16, 20, 16, 20, 16, 20, 16, 20}));
}

// ---- errors ------------------------------------------------------------------------------------
template <class E>
void expect_error(const std::string& name, const std::string& api, const std::function<void()>& f) {
  SCOPED_TRACE(name);
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const E& e) {
    EXPECT_EQ(std::string(e.what()), "[" + api + "] " + jax_error(name));
  }
}

TEST(CollectiveVmap, ErrorsUseJaxWording) {
  Array x = sp::ones({4, 2});
  auto under_vmap = [&](Fn f) { return [f, x] { vmap_i(f, x); }; };
  expect_error<sp::NameError>("psum_unbound", "psum",
                              under_vmap([](const Array& v) { return sp::psum(v, "j"); }));
  expect_error<sp::NameError>("axis_index_unbound", "axis_index",
                              under_vmap([](const Array& v) { return v + sp::axis_index("j"); }));
  expect_error<sp::NameError>("all_gather_unbound", "all_gather",
                              under_vmap([](const Array& v) { return sp::all_gather(v, "j"); }));
  expect_error<sp::ValueError>("all_to_all_size", "all_to_all", under_vmap([](const Array& v) {
                                 return sp::all_to_all(v, "i", 0, 0);
                               }));
  expect_error<sp::ValueError>("all_to_all_tiled_size", "all_to_all", [] {
    vmap_i([](const Array& v) { return sp::all_to_all(v, "i", 0, 0, {.tiled = true}); },
           sp::ones({4, 3}));
  });
  expect_error<sp::ValueError>("pshuffle_not_permutation", "pshuffle",
                               under_vmap([](const Array& v) {
                                 return sp::pshuffle(v, "i", {0, 0, 1, 2});
                               }));
  expect_error<sp::NotImplementedError>(
      "groups_in_vmap", "psum", under_vmap([](const Array& v) {
        return sp::psum(v, "i", {.axis_index_groups = sp::AxisIndexGroups{{0, 1}, {2, 3}}});
      }));
  expect_error<sp::AxisError>("all_gather_axis", "all_gather", under_vmap([](const Array& v) {
                                return sp::all_gather(v, "i", {.axis = 2});
                              }));
}

TEST(CollectiveVmap, ShapeErrorsInAxisEnvUseJaxWording) {
  sp::AxisEnvScope env({{"i", 4, "pmap"}});
  expect_error<sp::ValueError>("psum_scatter_size", "psum_scatter", [] {
    sp::make_jaxpr([](const Array& v) { return sp::psum_scatter(v, "i"); })(sp::ones({2}));
  });
  expect_error<sp::ValueError>("psum_scatter_tiled_size", "psum_scatter", [] {
    sp::make_jaxpr([](const Array& v) { return sp::psum_scatter(v, "i", {.tiled = true}); })(
        sp::ones({3}));
  });
  expect_error<sp::ValueError>("groups_cover", "psum", [] {
    sp::make_jaxpr([](const Array& v) {
      return sp::psum(v, "i", {.axis_index_groups = sp::AxisIndexGroups{{0, 1}, {1, 2}}});
    })(sp::ones({2}));
  });
  expect_error<sp::ValueError>("ppermute_duplicate", "ppermute", [] {
    sp::make_jaxpr([](const Array& v) {
      return sp::ppermute(v, "i", {{0, 1}, {0, 2}});
    })(sp::ones({2}));
  });
}

}  // namespace

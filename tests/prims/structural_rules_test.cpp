// Rule-level tests of the structural jvp and transpose rules (src/prims/reduce.cpp, shape.cpp,
// indexing.cpp, scatter.cpp, linalg.cpp, sort.cpp).
// A table of primitives, shapes and params drives two checks on concrete float64 arrays: every
// jvp against central finite differences (with symbolic-zero tangents too), and every transpose
// against the dot-product identity <ct, L(t)> = <T(ct), t>. Recorded equations check that the
// rules emit JAX's primitives in JAX's order (sequences taken from jax.make_jaxpr).
#include <spmd/lax.h>
#include <spmd/ops.h>

#include <gtest/gtest.h>

#include "core/trace.h"
#include "prims/primitive.h"
#include "support/config_scope.h"
#include "support/golden.h"

#include <cmath>
#include <functional>
#include <random>
#include <set>
#include <string>

namespace spmd {
namespace {

using Ints = std::vector<int64_t>;
using lax::DotDimensionNumbers;
using lax::PadConfig;
using spmd_test::arrays_close;
using spmd_test::X64Scope;

// ---- inputs ---------------------------------------------------------------------------------
class Rng {
 public:
  explicit Rng(unsigned seed) : gen_(seed) {}
  Array uniform(const Shape& s, double lo = -1, double hi = 1) {
    std::uniform_real_distribution<double> d(lo, hi);
    std::vector<double> v(size_t(s.size()));
    for (double& x : v) x = d(gen_);
    return array<double>(v, s);
  }

 private:
  std::mt19937 gen_;
};

Array i32(std::vector<int32_t> v, const Shape& s) {
  return array<int32_t>(v, s);
}
Array i32(int32_t v) {
  return array<int32_t>({v}, Shape{});
}

using Inputs = std::vector<Array>;

// One primitive application under test.
struct Case {
  std::string prim;
  Params params;
  std::function<Inputs(Rng&)> make;           // the primal inputs
  std::vector<size_t> diff;                   // inputs that get tangents
  std::vector<std::vector<size_t>> linear{};  // input sets the transpose is tested on
  // Linear in each input with the others fixed (dot_general); otherwise linear in the inputs of
  // the union of `linear` together, so the ones not transposed are set to zero.
  bool bilinear = false;
};

std::string label(const Case& c, size_t i) {
  return c.prim + " case " + std::to_string(i);
}

Params reduce_params(Ints axes) {
  return {{"axes", axes}};
}
Params scan_params(int64_t axis, bool reverse) {
  return {{"axis", axis}, {"reverse", reverse}};
}
Params dot_params(DotDimensionNumbers d) {
  return {{"dimension_numbers", d},
          {"precision", NoneParam{}},
          {"preferred_element_type", NoneParam{}},
          {"out_sharding", NoneParam{}}};
}
Params gather_params(Ints offset, Ints collapsed, Ints start_map, Ints operand_batching,
                     Ints indices_batching, Ints slice_sizes, std::string mode) {
  return {{"offset_dims", offset},
          {"collapsed_slice_dims", collapsed},
          {"start_index_map", start_map},
          {"operand_batching_dims", operand_batching},
          {"start_indices_batching_dims", indices_batching},
          {"slice_sizes", slice_sizes},
          {"mode", mode},
          {"fill_value", NoneParam{}},
          {"indices_are_sorted", false},
          {"unique_indices", false}};
}
Params scatter_params(Ints window, Ints inserted, Ints to_operand, std::string mode) {
  return {{"update_window_dims", window},
          {"inserted_window_dims", inserted},
          {"scatter_dims_to_operand_dims", to_operand},
          {"operand_batching_dims", Ints{}},
          {"scatter_indices_batching_dims", Ints{}},
          {"indices_are_sorted", false},
          {"unique_indices", false},
          {"mode", mode}};
}

// Single float input of the given shape.
std::function<Inputs(Rng&)> one(Shape s) {
  return [s](Rng& r) { return Inputs{r.uniform(s)}; };
}

std::vector<Case> cases() {
  std::vector<Case> c;
  // Reductions.
  c.push_back(
      {"reduce_sum", {{"axes", Ints{1}}, {"out_sharding", NoneParam{}}}, one({2, 3}), {0}, {{0}}});
  c.push_back({"reduce_sum",
               {{"axes", Ints{0, 2}}, {"out_sharding", NoneParam{}}},
               one({2, 3, 4}),
               {0},
               {{0}}});
  c.push_back(
      {"reduce_sum", {{"axes", Ints{}}, {"out_sharding", NoneParam{}}}, one({}), {0}, {{0}}});
  c.push_back({"reduce_prod", reduce_params({0}), one({5, 3}), {0}});
  c.push_back({"reduce_prod", reduce_params({1}), one({2, 3}), {0}});
  c.push_back({"reduce_prod", reduce_params({0, 2}), one({2, 3, 4}), {0}});
  c.push_back({"reduce_prod", reduce_params({}), one({}), {0}});
  c.push_back({"reduce_prod", reduce_params({0}), one({0, 3}), {0}});
  // A zero factor: a rule dividing the product by each element would fail here.
  c.push_back({"reduce_prod",
               reduce_params({0}),
               [](Rng&) {
                 return Inputs{array<double>({0.5, 0.0, -1.5, 2.0, 0.7}, Shape{5})};
               },
               {0}});
  c.push_back({"reduce_max", reduce_params({1}), one({3, 4}), {0}});
  c.push_back({"reduce_max", reduce_params({0, 2}), one({2, 3, 4}), {0}});
  c.push_back({"reduce_max", reduce_params({}), one({}), {0}});
  c.push_back({"reduce_min", reduce_params({0}), one({3, 4}), {0}});
  // Cumulative scans.
  c.push_back({"cumsum", scan_params(0, false), one({5}), {0}, {{0}}});
  c.push_back({"cumsum", scan_params(1, true), one({3, 4}), {0}, {{0}}});
  c.push_back({"cumprod", scan_params(0, false), one({5}), {0}});
  c.push_back({"cumprod", scan_params(0, true), one({4, 3}), {0}});
  c.push_back({"cumprod",
               scan_params(0, false),
               [](Rng&) {
                 return Inputs{array<double>({0.5, -2.0, 0.0, 1.5}, Shape{4})};
               },
               {0}});
  c.push_back({"cummax", scan_params(0, false), one({5}), {0}});
  c.push_back({"cummax", scan_params(1, false), one({2, 6}), {0}});
  c.push_back({"cummin", scan_params(0, true), one({7, 2}), {0}});
  c.push_back({"cumlogsumexp", scan_params(0, false), one({5}), {0}});
  c.push_back({"cumlogsumexp", scan_params(1, true), one({3, 4}), {0}});
  c.push_back({"cumlogsumexp", scan_params(0, false), one({1}), {0}});
  // Shape manipulation.
  c.push_back(
      {"broadcast_in_dim",
       {{"shape", Ints{2, 3}}, {"broadcast_dimensions", Ints{1}}, {"sharding", NoneParam{}}},
       one({3}),
       {0},
       {{0}}});
  c.push_back(
      {"broadcast_in_dim",
       {{"shape", Ints{2, 4, 3}}, {"broadcast_dimensions", Ints{1, 2}}, {"sharding", NoneParam{}}},
       one({1, 3}),
       {0},
       {{0}}});
  c.push_back({"broadcast_in_dim",
               {{"shape", Ints{2, 2}}, {"broadcast_dimensions", Ints{}}, {"sharding", NoneParam{}}},
               one({}),
               {0},
               {{0}}});
  c.push_back({"reshape",
               {{"new_sizes", Ints{3, 2}}, {"dimensions", NoneParam{}}, {"sharding", NoneParam{}}},
               one({2, 3}),
               {0},
               {{0}}});
  c.push_back({"reshape",
               {{"new_sizes", Ints{1, 1}}, {"dimensions", NoneParam{}}, {"sharding", NoneParam{}}},
               one({}),
               {0},
               {{0}}});
  c.push_back({"squeeze", {{"dimensions", Ints{1}}}, one({2, 1, 3}), {0}, {{0}}});
  c.push_back({"squeeze", {{"dimensions", Ints{0}}}, one({1}), {0}, {{0}}});
  c.push_back({"transpose", {{"permutation", Ints{2, 0, 1}}}, one({2, 3, 4}), {0}, {{0}}});
  c.push_back({"rev", {{"dimensions", Ints{0, 1}}}, one({3, 4}), {0}, {{0}}});
  c.push_back({"tile", {{"reps", Ints{2, 3}}}, one({2, 3}), {0}, {{0}}});
  c.push_back({"tile", {{"reps", Ints{}}}, one({}), {0}, {{0}}});
  c.push_back({"concatenate",
               {{"dimension", int64_t{0}}},
               [](Rng& r) {
                 return Inputs{r.uniform({2, 3}), r.uniform({1, 3}), r.uniform({4, 3})};
               },
               {0, 1, 2},
               {{0, 1, 2}, {1}, {0, 2}}});
  c.push_back({"split", {{"sizes", Ints{2, 0, 3}}, {"axis", int64_t{0}}}, one({5, 3}), {0}, {{0}}});
  c.push_back({"split", {{"sizes", Ints{1, 3}}, {"axis", int64_t{1}}}, one({2, 4}), {0}, {{0}}});
  c.push_back({"stack",
               {{"axis", int64_t{1}}},
               [](Rng& r) {
                 return Inputs{r.uniform({2, 3}), r.uniform({2, 3})};
               },
               {0, 1},
               {{0, 1}, {1}}});
  c.push_back({"stack",
               {{"axis", int64_t{0}}},
               [](Rng& r) {
                 return Inputs{r.uniform({}), r.uniform({}), r.uniform({})};
               },
               {0, 1, 2},
               {{0, 1, 2}}});
  c.push_back({"unstack", {{"axis", int64_t{1}}}, one({2, 3, 4}), {0}, {{0}}});
  c.push_back({"pad",
               {{"padding_config", std::vector<PadConfig>{{1, 2, 0}, {0, 1, 1}}}},
               [](Rng& r) {
                 return Inputs{r.uniform({3, 4}), r.uniform({})};
               },
               {0, 1},
               {{0, 1}, {0}, {1}}});
  c.push_back({"pad",
               {{"padding_config", std::vector<PadConfig>{{-1, 1, 1}, {2, -2, 0}}}},
               [](Rng& r) {
                 return Inputs{r.uniform({3, 4}), r.uniform({})};
               },
               {0, 1},
               {{0, 1}, {0}}});
  c.push_back(
      {"slice",
       {{"start_indices", Ints{1, 0}}, {"limit_indices", Ints{4, 6}}, {"strides", NoneParam{}}},
       one({5, 6}),
       {0},
       {{0}}});
  c.push_back(
      {"slice",
       {{"start_indices", Ints{1, 0}}, {"limit_indices", Ints{5, 6}}, {"strides", Ints{2, 3}}},
       one({5, 6}),
       {0},
       {{0}}});
  c.push_back({"slice",
               {{"start_indices", Ints{2}}, {"limit_indices", Ints{2}}, {"strides", Ints{2}}},
               one({4}),
               {0},
               {{0}}});
  // Indexing.
  c.push_back({"dynamic_slice",
               {{"slice_sizes", Ints{2, 2}}},
               [](Rng& r) {
                 return Inputs{r.uniform({5, 4}), i32(1), i32(3)};
               },
               {0},
               {{0}}});
  c.push_back({"dynamic_update_slice",
               {},
               [](Rng& r) {
                 return Inputs{r.uniform({5, 4}), r.uniform({2, 3}), i32(4), i32(1)};
               },
               {0, 1},
               {{0, 1}, {0}, {1}}});
  c.push_back({"gather",
               gather_params({1}, {0}, {0}, {}, {}, {1, 3}, "fill"),
               [](Rng& r) {
                 return Inputs{r.uniform({5, 3}), i32({0, 2, 4, 2}, {4, 1})};
               },
               {0},
               {{0}}});
  // Out-of-bounds windows filled with 0 (the default NaN fill would make L(t) non-linear).
  Params filled = gather_params({1}, {0}, {0}, {}, {}, {1, 3}, "fill");
  filled.set("fill_value", int64_t{0});
  c.push_back({"gather",
               filled,
               [](Rng& r) {
                 return Inputs{r.uniform({5, 3}), i32({-1, 2, 5, 2}, {4, 1})};
               },
               {0},
               {{0}}});
  c.push_back({"gather",
               gather_params({1, 2}, {}, {0}, {}, {}, {2, 3}, "clip"),
               [](Rng& r) {
                 return Inputs{r.uniform({5, 3}), i32({4, -2, 1}, {3, 1})};
               },
               {0},
               {{0}}});
  c.push_back({"gather",
               gather_params({}, {1}, {1}, {0}, {0}, {1, 1}, "fill"),
               [](Rng& r) {
                 return Inputs{r.uniform({3, 4}), i32({0, 0, 3, 1, 2, 2}, {3, 2, 1})};
               },
               {0},
               {{0}}});
  c.push_back({"scatter-add",
               scatter_params({}, {0}, {0}, "fill"),
               [](Rng& r) {
                 return Inputs{r.uniform({5}), i32({1, 3, 1, 7}, {4, 1}), r.uniform({4})};
               },
               {0, 2},
               {{0, 2}, {0}, {2}}});
  c.push_back({"scatter-add",
               scatter_params({1}, {0}, {0}, "clip"),
               [](Rng& r) {
                 return Inputs{r.uniform({5, 3}), i32({1, 9}, {2, 1}), r.uniform({2, 3})};
               },
               {0, 2},
               {{0, 2}, {2}}});
  // dot_general: plain, batched, transposed and multiple contracting layouts.
  auto dot = [&](Shape a, Shape b, DotDimensionNumbers d) {
    c.push_back({"dot_general",
                 dot_params(d),
                 [a, b](Rng& r) {
                   return Inputs{r.uniform(a), r.uniform(b)};
                 },
                 {0, 1},
                 {{0}, {1}},
                 /*bilinear=*/true});
  };
  dot({3, 4}, {4, 5}, {{1}, {0}, {}, {}});
  dot({4, 3}, {5, 4}, {{0}, {1}, {}, {}});
  dot({2, 3, 4}, {2, 4, 5}, {{2}, {1}, {0}, {0}});
  dot({3, 2, 4}, {4, 5, 2}, {{2}, {0}, {1}, {2}});
  dot({2, 3, 4}, {4, 2, 5}, {{0, 2}, {1, 0}, {}, {}});
  dot({2, 3, 4, 5}, {5, 3, 6, 4}, {{3, 2}, {0, 3}, {1}, {1}});
  dot({4}, {4}, {{0}, {0}, {}, {}});
  dot({3}, {2}, {{}, {}, {}, {}});
  // sort: one operand, and a key with a payload.
  c.push_back({"sort",
               {{"dimension", int64_t{0}}, {"is_stable", true}, {"num_keys", int64_t{1}}},
               one({6}),
               {0}});
  c.push_back({"sort",
               {{"dimension", int64_t{0}}, {"is_stable", true}, {"num_keys", int64_t{1}}},
               [](Rng& r) {
                 return Inputs{r.uniform({3, 4}), r.uniform({3, 4})};
               },
               {0, 1}});
  c.push_back({"sort",
               {{"dimension", int64_t{1}}, {"is_stable", true}, {"num_keys", int64_t{1}}},
               [](Rng& r) {
                 return Inputs{r.uniform({3, 4}), r.uniform({3, 4})};
               },
               {1}});
  return c;
}

// The structural primitives, and which of them are linear in some input.
const std::set<std::string> kDifferentiable = {"reduce_sum",
                                               "reduce_prod",
                                               "reduce_max",
                                               "reduce_min",
                                               "cumsum",
                                               "cumprod",
                                               "cummax",
                                               "cummin",
                                               "cumlogsumexp",
                                               "broadcast_in_dim",
                                               "reshape",
                                               "squeeze",
                                               "transpose",
                                               "rev",
                                               "concatenate",
                                               "pad",
                                               "slice",
                                               "split",
                                               "stack",
                                               "unstack",
                                               "tile",
                                               "dynamic_slice",
                                               "dynamic_update_slice",
                                               "gather",
                                               "scatter-add",
                                               "dot_general",
                                               "sort"};
const std::set<std::string> kNonDifferentiable = {"reduce_and", "reduce_or", "reduce_xor", "argmax",
                                                  "argmin"};
const std::set<std::string> kLinear = {"reduce_sum",
                                       "cumsum",
                                       "broadcast_in_dim",
                                       "reshape",
                                       "squeeze",
                                       "transpose",
                                       "rev",
                                       "concatenate",
                                       "pad",
                                       "slice",
                                       "split",
                                       "stack",
                                       "unstack",
                                       "tile",
                                       "dynamic_slice",
                                       "dynamic_update_slice",
                                       "gather",
                                       "scatter-add",
                                       "dot_general"};

// ---- evaluation helpers ----------------------------------------------------------------------
std::vector<Array> eval(const Case& c, const Inputs& x) {
  return spmd::bind(primitive(c.prim), x, c.params);
}

double dot_product(const Array& a, const Array& b) {
  return sum(multiply(a, b)).item<double>();
}

// x + s·t for the inputs with a tangent.
Inputs shifted(const Inputs& x, const Inputs& t, double s) {
  Inputs out = x;
  for (size_t i = 0; i < x.size(); ++i)
    if (t[i].valid()) out[i] = add(x[i], multiply(t[i], Array(s)));
  return out;
}

// Central finite differences of the primitive along t.
std::vector<Array> finite_difference(const Case& c, const Inputs& x, const Inputs& t) {
  const double eps = 1e-6;
  std::vector<Array> hi = eval(c, shifted(x, t, eps)), lo = eval(c, shifted(x, t, -eps));
  std::vector<Array> out;
  for (size_t k = 0; k < hi.size(); ++k)
    out.push_back(multiply(subtract(hi[k], lo[k]), Array(0.5 / eps)));
  return out;
}

void check_jvp(const Case& c, const Inputs& x, const Inputs& t, const std::string& what) {
  SCOPED_TRACE(what);
  const Primitive& p = primitive(c.prim);
  ASSERT_TRUE(p.jvp) << c.prim << " has no jvp rule";
  JvpResult r = p.jvp(x, t, c.params);
  std::vector<Array> expected_primals = eval(c, x);
  std::vector<Array> fd = finite_difference(c, x, t);
  ASSERT_EQ(r.primals_out.size(), expected_primals.size());
  ASSERT_EQ(r.tangents_out.size(), expected_primals.size());
  for (size_t k = 0; k < fd.size(); ++k) {
    EXPECT_TRUE(arrays_close(r.primals_out[k], expected_primals[k], 1e-12, 1e-12));
    Array tangent = r.tangents_out[k].valid() ? r.tangents_out[k] : zeros_like(fd[k]);
    EXPECT_TRUE(arrays_close(tangent, fd[k], 1e-6, 1e-6)) << "output " << k;
  }
}

// Runs one table entry; an exception fails that entry and the loop goes on to the next.
void run_case(const std::string& what, const std::function<void()>& check) {
  try {
    check();
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": " << e.what();
  }
}

// ---- jvp against finite differences ------------------------------------------------------------
TEST(StructuralJvp, MatchesFiniteDifferences) {
  X64Scope x64;
  const std::vector<Case> all = cases();
  for (size_t i = 0; i < all.size(); ++i) {
    const Case& c = all[i];
    Rng rng(unsigned(17 + i));
    Inputs x = c.make(rng);
    Inputs t(x.size());
    for (size_t j : c.diff) t[j] = rng.uniform(x[j].shape());
    run_case(label(c, i), [&] { check_jvp(c, x, t, label(c, i)); });
  }
}

// Each differentiable input's tangent alone, the others symbolic zeros.
TEST(StructuralJvp, SymbolicZeroTangentsContributeNothing) {
  X64Scope x64;
  const std::vector<Case> all = cases();
  for (size_t i = 0; i < all.size(); ++i) {
    const Case& c = all[i];
    if (c.diff.size() < 2) continue;
    for (size_t only : c.diff) {
      Rng rng(unsigned(101 + i));
      Inputs x = c.make(rng);
      Inputs t(x.size());
      t[only] = rng.uniform(x[only].shape());
      const std::string what = label(c, i) + ", tangent of input " + std::to_string(only);
      run_case(what, [&] { check_jvp(c, x, t, what); });
    }
  }
}

// ---- transpose: the dot-product identity -------------------------------------------------------
void check_transpose(const Case& c, const std::vector<size_t>& linear, Rng& rng,
                     bool zero_first_cotangent, const std::string& what) {
  SCOPED_TRACE(what);
  const Primitive& p = primitive(c.prim);
  ASSERT_TRUE(p.transpose) << c.prim << " has no transpose rule";
  Inputs x = c.make(rng);
  auto is_linear = [&](size_t i) {
    return std::find(linear.begin(), linear.end(), i) != linear.end();
  };
  // Jointly linear inputs that are not transposed here are zero, so that the map is linear.
  for (const auto& set : c.linear)
    for (size_t i : set)
      if (!c.bilinear && !is_linear(i)) x[i] = zeros_like(x[i]);
  Inputs t(x.size()), applied = x;
  std::vector<LinearInput> in;
  for (size_t i = 0; i < x.size(); ++i) {
    if (is_linear(i)) {
      t[i] = rng.uniform(x[i].shape());
      applied[i] = t[i];
      in.push_back(LinearInput{Array(), aval_of(x[i])});
    } else {
      in.push_back(LinearInput{x[i], aval_of(x[i])});
    }
  }
  std::vector<Array> y = eval(c, applied);
  std::vector<Array> ct;
  double lhs = 0;
  for (size_t k = 0; k < y.size(); ++k) {
    ct.push_back(zero_first_cotangent && k == 0 ? Array() : rng.uniform(y[k].shape()));
    if (ct.back().valid()) lhs += dot_product(ct.back(), y[k]);
  }
  std::vector<Array> ct_in = p.transpose(ct, in, c.params);
  ASSERT_EQ(ct_in.size(), x.size());
  double rhs = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!is_linear(i)) {
      EXPECT_FALSE(ct_in[i].valid()) << "cotangent for known input " << i;
      continue;
    }
    if (!ct_in[i].valid()) continue;  // a symbolic zero
    EXPECT_EQ(ct_in[i].shape(), x[i].shape()) << "input " << i;
    EXPECT_EQ(ct_in[i].dtype(), x[i].dtype()) << "input " << i;
    rhs += dot_product(ct_in[i], t[i]);
  }
  EXPECT_NEAR(lhs, rhs, 1e-10 * (1 + std::abs(lhs)));
}

TEST(StructuralTranspose, SatisfiesDotProductIdentity) {
  X64Scope x64;
  const std::vector<Case> all = cases();
  for (size_t i = 0; i < all.size(); ++i) {
    const Case& c = all[i];
    for (size_t s = 0; s < c.linear.size(); ++s) {
      Rng rng(unsigned(7 + 31 * i + s));
      const std::string what = label(c, i) + ", linear set " + std::to_string(s);
      run_case(what, [&] { check_transpose(c, c.linear[s], rng, false, what); });
    }
  }
}

// Multi-output primitives get symbolic zeros for some output cotangents.
TEST(StructuralTranspose, AcceptsZeroCotangentsOfSomeOutputs) {
  X64Scope x64;
  const std::vector<Case> all = cases();
  for (size_t i = 0; i < all.size(); ++i) {
    const Case& c = all[i];
    if (c.prim != "split" && c.prim != "unstack") continue;
    Rng rng(unsigned(3 + i));
    run_case(label(c, i), [&] { check_transpose(c, c.linear[0], rng, true, label(c, i)); });
  }
}

// ---- coverage ------------------------------------------------------------------------------
TEST(StructuralRules, EveryStructuralPrimitiveHasItsRulesAndATestCase) {
  std::set<std::string> with_jvp_case, with_transpose_case;
  for (const Case& c : cases()) {
    with_jvp_case.insert(c.prim);
    if (!c.linear.empty()) with_transpose_case.insert(c.prim);
  }
  const std::vector<std::string> names = primitive_registry().names();
  const std::set<std::string> registered(names.begin(), names.end());
  for (const std::string& name : kDifferentiable) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(registered.count(name));
    const Primitive& p = primitive(name);
    EXPECT_TRUE(p.jvp);
    EXPECT_FALSE(p.non_differentiable);
    EXPECT_TRUE(with_jvp_case.count(name)) << "no jvp test case";
    EXPECT_EQ(bool(p.transpose), kLinear.count(name) == 1);
    if (kLinear.count(name)) {
      EXPECT_TRUE(with_transpose_case.count(name)) << "no transpose case";
    }
  }
  for (const std::string& name : kNonDifferentiable) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(primitive(name).non_differentiable);
    EXPECT_FALSE(primitive(name).jvp);
  }
}

// ---- the equations each rule emits ------------------------------------------------------------
struct Recorded {
  std::string name;
  Params params;
  std::vector<Array> inputs;
};

// Records every primitive bound while current, and evaluates it eagerly.
class Recorder : public Trace {
 public:
  std::vector<Array> process_primitive(const Primitive& p, std::span<const Array> in,
                                       const Params& params) override {
    eqns.push_back({p.name, params, {in.begin(), in.end()}});
    CurrentTraceScope eager(nullptr);
    return spmd::bind(p, in, params);
  }
  const char* transformation_name() const override { return "record"; }
  std::vector<Recorded> eqns;
};

std::vector<Recorded> record(const std::function<void()>& f) {
  auto trace = std::make_shared<Recorder>();
  {
    CurrentTraceScope scope(trace.get());
    f();
  }
  trace->finish();
  return trace->eqns;
}

std::vector<std::string> names_of(const std::vector<Recorded>& eqns) {
  std::vector<std::string> out;
  for (const Recorded& e : eqns) out.push_back(e.name);
  return out;
}

std::vector<Recorded> record_jvp(const std::string& prim, const Inputs& x, const Inputs& t,
                                 const Params& params) {
  return record([&] { primitive(prim).jvp(x, t, params); });
}

std::vector<Recorded> record_transpose(const std::string& prim, const std::vector<Array>& ct,
                                       const std::vector<LinearInput>& in, const Params& params) {
  return record([&] { primitive(prim).transpose(ct, in, params); });
}

LinearInput linear(const Array& like) {
  return {Array(), aval_of(like)};
}
LinearInput known(const Array& x) {
  return {x, aval_of(x)};
}

std::vector<std::string> repeat(std::vector<std::string> block, int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.insert(out.end(), block.begin(), block.end());
  return out;
}

TEST(StructuralEmit, ReduceProdJvpIsJaxsProductTree) {
  Rng rng(1);
  Array x = rng.uniform({5, 3}).astype(float32);
  const std::vector<std::string> level = {"slice", "slice", "slice", "slice", "pad",
                                          "pad",   "mul",   "mul",   "mul",   "add_any"};
  std::vector<std::string> expected = repeat(level, 2);
  for (const char* n :
       {"slice", "slice", "slice", "slice", "mul", "mul", "mul", "add_any", "squeeze", "squeeze"})
    expected.push_back(n);
  EXPECT_EQ(names_of(record_jvp("reduce_prod", {x}, {x}, reduce_params({0}))), expected);
}

TEST(StructuralEmit, ReduceMaxJvpIsJaxsChooserRule) {
  Rng rng(2);
  Array x = rng.uniform({3, 4}).astype(float32);
  std::vector<Recorded> eqns = record_jvp("reduce_max", {x}, {x}, reduce_params({1}));
  EXPECT_EQ(names_of(eqns),
            (std::vector<std::string>{"reduce_max", "reshape", "eq", "convert_element_type",
                                      "reduce_sum", "mul", "reduce_sum", "div"}));
}

TEST(StructuralEmit, ChooserRuleAveragesTiedTangents) {
  X64Scope x64;
  Array x = array<double>({1.0, 3.0, 3.0, 2.0}, Shape{4});
  Array t = array<double>({10.0, 20.0, 40.0, 80.0}, Shape{4});
  JvpResult r = primitive("reduce_max").jvp(Inputs{x}, Inputs{t}, reduce_params({0}));
  EXPECT_DOUBLE_EQ(r.tangents_out[0].item<double>(), 30.0);
}

TEST(StructuralEmit, CumulativeJvpIsJaxsAssociativeScan) {
  Rng rng(3);
  Array x = rng.uniform({4}).astype(float32);
  const std::vector<std::string> combine = {"slice", "slice", "slice", "slice",
                                            "mul",   "mul",   "mul",   "add_any"};
  const std::vector<std::string> merge = {"slice", "slice", "concatenate", "concatenate", "pad",
                                          "pad",   "pad",   "pad",         "add",         "add"};
  std::vector<std::string> expected = repeat(combine, 3);
  expected.insert(expected.end(), merge.begin(), merge.end());
  expected.insert(expected.end(), combine.begin(), combine.end());
  expected.insert(expected.end(), merge.begin(), merge.end());
  EXPECT_EQ(names_of(record_jvp("cumprod", {x}, {x}, scan_params(0, false))), expected);
}

// JAX stages logaddexp's primal inside a custom_jvp_call; its equations are the same ones,
// inlined.
TEST(StructuralEmit, CumlogsumexpJvpInlinesLogaddexpsCustomRule) {
  Rng rng(4);
  Array x = rng.uniform({2}).astype(float32);
  const std::vector<std::string> primal = {"max", "sub", "ne",    "add", "abs",
                                           "neg", "exp", "log1p", "add", "select_n"};
  const std::vector<std::string> part = {
      "eq", "broadcast_in_dim", "select_n", "eq", "broadcast_in_dim", "select_n", "sub", "exp",
      "mul"};
  auto logaddexp = [&] {
    std::vector<std::string> out = primal;
    for (int i = 0; i < 2; ++i) out.insert(out.end(), part.begin(), part.end());
    out.push_back("add");
    return out;
  };
  std::vector<std::string> expected = {"rev", "rev", "slice", "slice", "slice", "slice"};
  for (const std::string& n : logaddexp()) expected.push_back(n);
  for (const char* n : {"slice", "slice", "slice", "slice"}) expected.push_back(n);
  for (const std::string& n : logaddexp()) expected.push_back(n);
  for (const char* n : {"slice", "slice", "concatenate", "concatenate", "pad", "pad", "pad", "pad",
                        "add", "add", "rev", "rev"})
    expected.push_back(n);
  EXPECT_EQ(names_of(record_jvp("cumlogsumexp", {x}, {x}, scan_params(0, true))), expected);
}

TEST(StructuralEmit, SortJvpGathersTangentsWithSortedIota) {
  Rng rng(5);
  Array x = rng.uniform({3, 4}).astype(float32);
  Params p{{"dimension", int64_t{0}}, {"is_stable", true}, {"num_keys", int64_t{1}}};
  std::vector<Recorded> eqns = record_jvp("sort", {x}, {x}, p);
  ASSERT_EQ(names_of(eqns),
            (std::vector<std::string>{"iota", "sort", "broadcast_in_dim", "gather"}));
  EXPECT_EQ(eqns[0].params.get<DType>("dtype"), DType::uint32);
  const Params& g = eqns[3].params;
  EXPECT_EQ(g.get_ints("operand_batching_dims"), Ints{1});
  EXPECT_EQ(g.get_ints("start_indices_batching_dims"), Ints{1});
  EXPECT_EQ(g.get_ints("collapsed_slice_dims"), Ints{0});
  EXPECT_EQ(g.get_ints("slice_sizes"), (Ints{1, 1}));
  EXPECT_EQ(g.get<std::string>("mode"), "promise_in_bounds");
}

TEST(StructuralEmit, DynamicSliceJvpSlicesTheTangentFirst) {
  Rng rng(6);
  Array x = rng.uniform({5, 3}).astype(float32), t = rng.uniform({5, 3}).astype(float32);
  std::vector<Recorded> eqns =
      record_jvp("dynamic_slice", {x, i32(1), i32(1)}, {t, Array(), Array()},
                 Params{{"slice_sizes", Ints{2, 2}}});
  ASSERT_EQ(names_of(eqns), (std::vector<std::string>{"dynamic_slice", "dynamic_slice"}));
  EXPECT_EQ(eqns[0].inputs[0].impl(), t.impl());
  EXPECT_EQ(eqns[1].inputs[0].impl(), x.impl());
}

TEST(StructuralEmit, DotGeneralTransposeUsesJaxsDimensionNumbers) {
  Rng rng(7);
  Array a = rng.uniform({2, 3, 4}).astype(float32), b = rng.uniform({2, 4, 5}).astype(float32);
  Array ct = rng.uniform({2, 3, 5}).astype(float32);
  const Params p = dot_params({{2}, {1}, {0}, {0}});
  // jax.grad of sum(dot_general(a, b)): rhs: dot_general(ct, a) then transpose (0, 2, 1);
  // lhs: dot_general(ct, b).
  std::vector<Recorded> rhs = record_transpose("dot_general", {ct}, {known(a), linear(b)}, p);
  ASSERT_EQ(names_of(rhs), (std::vector<std::string>{"dot_general", "transpose"}));
  EXPECT_EQ(rhs[0].params.get<DotDimensionNumbers>("dimension_numbers"),
            (DotDimensionNumbers{{1}, {1}, {0}, {0}}));
  EXPECT_EQ(rhs[0].inputs[1].impl(), a.impl());
  EXPECT_EQ(rhs[1].params.get_ints("permutation"), (Ints{0, 2, 1}));
  std::vector<Recorded> lhs = record_transpose("dot_general", {ct}, {linear(a), known(b)}, p);
  ASSERT_EQ(names_of(lhs), (std::vector<std::string>{"dot_general"}));
  EXPECT_EQ(lhs[0].params.get<DotDimensionNumbers>("dimension_numbers"),
            (DotDimensionNumbers{{2}, {2}, {0}, {0}}));
}

TEST(StructuralEmit, DotGeneralTransposeConvertsBackToTheOperandType) {
  Rng rng(8);
  Array a = rng.uniform({3, 4}).astype(bfloat16), b = rng.uniform({5, 4}).astype(bfloat16);
  Params p = dot_params({{1}, {1}, {}, {}});
  p.set("preferred_element_type", DType::float32);
  Array ct = rng.uniform({3, 5}).astype(float32);
  std::vector<Recorded> rhs = record_transpose("dot_general", {ct}, {known(a), linear(b)}, p);
  ASSERT_EQ(names_of(rhs), (std::vector<std::string>{"dot_general", "convert_element_type"}));
  EXPECT_EQ(rhs[0].params.get<DotDimensionNumbers>("dimension_numbers"),
            (DotDimensionNumbers{{0}, {0}, {}, {}}));
  EXPECT_EQ(rhs[0].params.get<DType>("preferred_element_type"), DType::float32);
  EXPECT_EQ(rhs[1].params.get<DType>("new_dtype"), DType::bfloat16);
  std::vector<Recorded> lhs = record_transpose("dot_general", {ct}, {linear(a), known(b)}, p);
  ASSERT_EQ(names_of(lhs), (std::vector<std::string>{"dot_general", "convert_element_type"}));
  EXPECT_EQ(lhs[0].params.get<DotDimensionNumbers>("dimension_numbers"),
            (DotDimensionNumbers{{1}, {0}, {}, {}}));
}

TEST(StructuralEmit, GatherTransposeScatterAddsIntoZeros) {
  Rng rng(9);
  Array x = rng.uniform({5, 3}).astype(float32);
  Array idx = i32({0, 2, 4, 2}, {4, 1});
  Array ct = rng.uniform({4, 3}).astype(float32);
  std::vector<Recorded> eqns =
      record_transpose("gather", {ct}, {linear(x), known(idx)},
                       gather_params({1}, {0}, {0}, {}, {}, {1, 3}, "fill"));
  ASSERT_EQ(names_of(eqns), (std::vector<std::string>{"broadcast_in_dim", "scatter-add"}));
  const Params& s = eqns[1].params;
  EXPECT_EQ(s.get_ints("update_window_dims"), Ints{1});
  EXPECT_EQ(s.get_ints("inserted_window_dims"), Ints{0});
  EXPECT_EQ(s.get_ints("scatter_dims_to_operand_dims"), Ints{0});
  EXPECT_EQ(s.get<std::string>("mode"), "fill");
  EXPECT_TRUE(s.has("update_jaxpr"));
}

TEST(StructuralEmit, PadTransposeUnpadsThenSumsForThePaddingValue) {
  Rng rng(10);
  Array x = rng.uniform({3, 4}).astype(float32), v = rng.uniform({}).astype(float32);
  Array ct = rng.uniform({6, 8}).astype(float32);
  Params p{{"padding_config", std::vector<PadConfig>{{1, 2, 0}, {0, 1, 1}}}};
  std::vector<Recorded> eqns = record_transpose("pad", {ct}, {linear(x), linear(v)}, p);
  ASSERT_EQ(names_of(eqns),
            (std::vector<std::string>{"pad", "slice", "reduce_sum", "reduce_sum", "sub"}));
  EXPECT_EQ(eqns[0].params.get<std::vector<PadConfig>>("padding_config"),
            (std::vector<PadConfig>{{-1, -2, 0}, {0, -1, 0}}));
  EXPECT_EQ(eqns[1].params.get_ints("strides"), (Ints{1, 2}));
}

TEST(StructuralEmit, BroadcastTransposeRestoresUnitDimsOnlyWhenThereAreAny) {
  Rng rng(11);
  Array ct = rng.uniform({2, 4, 3}).astype(float32);
  Params p{
      {"shape", Ints{2, 4, 3}}, {"broadcast_dimensions", Ints{1, 2}}, {"sharding", NoneParam{}}};
  std::vector<Recorded> eqns =
      record_transpose("broadcast_in_dim", {ct}, {linear(rng.uniform({1, 3}))}, p);
  ASSERT_EQ(names_of(eqns), (std::vector<std::string>{"reduce_sum", "broadcast_in_dim"}));
  EXPECT_EQ(eqns[0].params.get_ints("axes"), (Ints{0, 1}));
  Array ct2 = rng.uniform({2, 3}).astype(float32);
  Params p2{{"shape", Ints{2, 3}}, {"broadcast_dimensions", Ints{1}}, {"sharding", NoneParam{}}};
  EXPECT_EQ(names_of(record_transpose("broadcast_in_dim", {ct2}, {linear(rng.uniform({3}))}, p2)),
            (std::vector<std::string>{"reduce_sum"}));
}

TEST(StructuralEmit, ScalarReduceSumTransposeEmitsNothing) {
  Array ct = array<float>({2.0f}, Shape{});
  Params p{{"axes", Ints{}}, {"out_sharding", NoneParam{}}};
  EXPECT_TRUE(record_transpose("reduce_sum", {ct}, {linear(ct)}, p).empty());
}

TEST(StructuralEmit, StackTransposesToUnstackAndBack) {
  Rng rng(12);
  Array a = rng.uniform({2, 3}).astype(float32);
  Array ct = rng.uniform({2, 2, 3}).astype(float32);
  EXPECT_EQ(names_of(record_transpose("stack", {ct}, {linear(a), linear(a)},
                                      Params{{"axis", int64_t{1}}})),
            (std::vector<std::string>{"unstack"}));
  EXPECT_EQ(names_of(record_transpose("unstack", {a, Array()}, {linear(ct)},
                                      Params{{"axis", int64_t{1}}})),
            (std::vector<std::string>{"broadcast_in_dim", "stack"}));
}

TEST(StructuralEmit, TileTransposeReshapesAndSums) {
  Rng rng(13);
  Array ct = rng.uniform({4, 3}).astype(float32);
  std::vector<Recorded> eqns =
      record_transpose("tile", {ct}, {linear(rng.uniform({2, 3}))}, Params{{"reps", Ints{2, 1}}});
  ASSERT_EQ(names_of(eqns), (std::vector<std::string>{"reshape", "reduce_sum"}));
  EXPECT_EQ(eqns[0].params.get_ints("new_sizes"), (Ints{2, 2, 1, 3}));
  EXPECT_EQ(eqns[1].params.get_ints("axes"), (Ints{0, 2}));
}

}  // namespace
}  // namespace spmd

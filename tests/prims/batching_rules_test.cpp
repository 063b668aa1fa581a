// Batching rules (the family files in src/prims, and the kinds in src/prims/kinds.cpp): every
// primitive's rule, applied to operands batched at various dimensions (or not batched), must
// equal binding the primitive on each batch element and stacking the results; selected rules
// must emit JAX's equations in JAX's order.
#include "prims/rule_util.h"

#include <spmd/spmd.h>

#include "core/trace.h"
#include "prims/primitive.h"
#include "prims/scatter.h"
#include "support/support.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

namespace sp = spmd;

namespace {

constexpr int kN = sp::kNotBatched;
// Stands for the last position of the batched operand (the unbatched rank).
constexpr int kLast = 100;
constexpr int64_t kBatch = 3;

struct ArgSpec {
  sp::Shape shape;
  sp::DType dtype = sp::float32;
  double lo = -2, hi = 2;
};

struct Case {
  std::string prim;
  std::vector<ArgSpec> args;
  sp::Params params;
  std::vector<std::vector<int>> dims;  // one batch dim per argument, per configuration
};

template <class T>
sp::Array from_values(const std::vector<T>& v, sp::DType t, const sp::Shape& s) {
  return sp::array_from_bytes(v.data(), t, s);
}

sp::Array random_array(const sp::Shape& s, sp::DType t, double lo, double hi, std::mt19937& rng) {
  const size_t n = size_t(s.size());
  std::uniform_real_distribution<double> real(lo, hi);
  std::uniform_int_distribution<int64_t> integer{int64_t(lo), int64_t(hi)};
  if (t == sp::float32) {
    std::vector<float> v(n);
    for (float& x : v) x = float(real(rng));
    return from_values(v, t, s);
  }
  if (t == sp::int32) {
    std::vector<int32_t> v(n);
    for (int32_t& x : v) x = int32_t(integer(rng));
    return from_values(v, t, s);
  }
  if (t == sp::uint32) {  // random bits
    std::vector<uint32_t> v(n);
    for (uint32_t& x : v) x = uint32_t(rng());
    return from_values(v, t, s);
  }
  if (t == sp::uint8) {
    std::vector<uint8_t> v(n);
    for (uint8_t& x : v) x = uint8_t(rng());
    return from_values(v, t, s);
  }
  if (t == sp::bool_) {
    std::vector<uint8_t> v(n);
    for (uint8_t& x : v) x = uint8_t(rng() & 1);
    return from_values(v, t, s);
  }
  throw std::logic_error("random_array: unsupported dtype");
}

sp::Shape with_batch(const sp::Shape& s, int dim) {
  std::vector<int64_t> d = s.dims();
  d.insert(d.begin() + dim, kBatch);
  return sp::Shape(d);
}

std::string dims_str(const std::vector<int>& dims) {
  std::string s = "dims (";
  for (size_t i = 0; i < dims.size(); ++i)
    s.append(i ? ", " : "").append(dims[i] == kN ? std::string("-") : std::to_string(dims[i]));
  return s + ")";
}

::testing::AssertionResult same_values(const sp::Array& actual, const sp::Array& expected) {
  if (sp::is_floating(expected.dtype()))
    return spmd_test::arrays_close(actual, expected, 1e-5, 1e-6);
  return spmd_test::arrays_equal(actual, expected);
}

// Applies the rule once per configuration of c.dims and compares every output, moved to batch
// dimension 0, with the primitive bound on each batch element's slices, stacked.
void check_against_loop(const Case& c, std::mt19937& rng) {
  const sp::Primitive& p = sp::primitive(c.prim);
  ASSERT_TRUE(p.batch) << c.prim << " has no batch rule";
  for (std::vector<int> dims : c.dims) {
    ASSERT_EQ(dims.size(), c.args.size()) << c.prim;
    SCOPED_TRACE(c.prim + " " + dims_str(dims));
    std::vector<sp::Array> args;
    for (size_t i = 0; i < dims.size(); ++i) {
      const ArgSpec& a = c.args[i];
      if (dims[i] == kLast) dims[i] = a.shape.ndim();
      const sp::Shape s = dims[i] == kN ? a.shape : with_batch(a.shape, dims[i]);
      args.push_back(random_array(s, a.dtype, a.lo, a.hi, rng));
    }
    const sp::BatchResult r = p.batch(args, dims, c.params, sp::BatchContext{kBatch, ""});
    std::vector<std::vector<sp::Array>> per_element;  // [output][b]
    for (int64_t b = 0; b < kBatch; ++b) {
      std::vector<sp::Array> slices;
      for (size_t i = 0; i < dims.size(); ++i)
        slices.push_back(dims[i] == kN ? args[i]
                                       : sp::lax::index_in_dim(args[i], b, dims[i], false));
      std::vector<sp::Array> outs = sp::bind(p, slices, c.params);
      per_element.resize(outs.size());
      for (size_t k = 0; k < outs.size(); ++k) per_element[k].push_back(outs[k]);
    }
    ASSERT_EQ(r.outputs.size(), per_element.size());
    ASSERT_EQ(r.dims.size(), r.outputs.size());
    for (size_t k = 0; k < r.outputs.size(); ++k) {
      ASSERT_TRUE(r.dims[k] == kN || (r.dims[k] >= 0 && r.dims[k] < r.outputs[k].ndim()))
          << "output " << k << " has batch dim " << r.dims[k] << " but rank "
          << r.outputs[k].ndim();
      const sp::Array expected =
          sp::bind1(sp::primitive("stack"), per_element[k], sp::Params{{"axis", int64_t(0)}});
      const sp::Array actual = sp::move_batch_dim(r.outputs[k], r.dims[k], 0, kBatch);
      EXPECT_TRUE(same_values(actual, expected)) << "output " << k;
    }
  }
}

// ---- the case table -----------------------------------------------------------------------------
using Dims = std::vector<std::vector<int>>;

sp::Params dot_params(std::vector<int64_t> lc, std::vector<int64_t> rc, std::vector<int64_t> lb,
                      std::vector<int64_t> rb) {
  return {{"dimension_numbers", sp::lax::DotDimensionNumbers{lc, rc, lb, rb}},
          {"precision", sp::NoneParam{}},
          {"preferred_element_type", sp::NoneParam{}},
          {"out_sharding", sp::NoneParam{}}};
}

sp::Params gather_params(std::vector<int64_t> offset, std::vector<int64_t> collapsed,
                         std::vector<int64_t> start_map, std::vector<int64_t> operand_batching,
                         std::vector<int64_t> indices_batching, std::vector<int64_t> slice_sizes,
                         const std::string& mode) {
  return {{"offset_dims", offset},
          {"collapsed_slice_dims", collapsed},
          {"start_index_map", start_map},
          {"operand_batching_dims", operand_batching},
          {"start_indices_batching_dims", indices_batching},
          {"slice_sizes", slice_sizes},
          {"mode", mode},
          {"fill_value", sp::NoneParam{}},
          {"indices_are_sorted", false},
          {"unique_indices", false}};
}

// Input range of each unary primitive (its domain, where it is restricted).
ArgSpec unary_arg(const std::string& name, sp::Shape shape) {
  static const std::map<std::string, std::pair<double, double>> domains = {
      {"log", {0.5, 3}},     {"sqrt", {0.5, 3}},     {"rsqrt", {0.5, 3}},
      {"log1p", {-0.5, 3}},  {"acosh", {1.2, 3}},    {"asin", {-0.9, 0.9}},
      {"acos", {-0.9, 0.9}}, {"atanh", {-0.9, 0.9}}, {"erf_inv", {-0.9, 0.9}},
      {"tan", {-1, 1}}};
  static const std::set<std::string> integer = {"not", "population_count", "clz"};
  if (integer.count(name)) return {std::move(shape), sp::int32, -1000, 1000};
  auto it = domains.find(name);
  if (it == domains.end()) return {std::move(shape)};
  return {std::move(shape), sp::float32, it->second.first, it->second.second};
}

void add_unary_cases(std::vector<Case>& cases) {
  const std::pair<const char*, sp::Params> unary[] = {
      {"neg", {}},
      {"abs", {}},
      {"sign", {}},
      {"floor", {}},
      {"ceil", {}},
      {"round", {{"rounding_method", int64_t(1)}}},
      {"is_finite", {}},
      {"not", {}},
      {"square", {}},
      {"population_count", {}},
      {"clz", {}},
      {"copy", {}},
      {"integer_pow", {{"y", int64_t(3)}}},
      {"reduce_precision", {{"exponent_bits", int64_t(5)}, {"mantissa_bits", int64_t(2)}}},
      {"convert_element_type",
       {{"new_dtype", sp::int32}, {"weak_type", false}, {"sharding", sp::NoneParam{}}}},
  };
  for (const auto& [name, params] : unary)
    cases.push_back({name, {unary_arg(name, {2, 3})}, params, {{0}, {1}, {kLast}}});
  for (const char* name :
       {"exp",   "exp2",     "expm1", "log",  "log1p",   "sin",  "cos",   "tan",
        "asin",  "acos",     "atan",  "sinh", "cosh",    "tanh", "asinh", "acosh",
        "atanh", "logistic", "erf",   "erfc", "erf_inv", "sqrt", "rsqrt", "cbrt"}) {
    cases.push_back({name, {unary_arg(name, {2, 3})}, {}, {{0}, {1}, {kLast}}});
    cases.push_back({name, {unary_arg(name, {})}, {}, {{0}}});
  }
  cases.push_back({"stop_gradient", {{{2, 3}}}, {}, {{1}}});
  cases.push_back({"stop_gradient", {{{2, 3}, sp::int32, -5, 5}}, {}, {{0}}});
  cases.push_back({"bitcast_convert_type", {{{2, 3}}}, {{"new_dtype", sp::int32}}, {{0}, {kLast}}});
  cases.push_back(
      {"bitcast_convert_type", {{{2}, sp::uint32}}, {{"new_dtype", sp::uint8}}, {{0}, {kLast}}});
  // The consumed last dimension must not be the batch dimension.
  cases.push_back({"bitcast_convert_type",
                   {{{2, 4}, sp::uint8}},
                   {{"new_dtype", sp::uint32}},
                   {{0}, {1}, {kLast}}});
}

// Same-shape operands, a scalar operand, and size-1 dims broadcast by the primitive.
void add_binary_cases(std::vector<Case>& cases, const char* name, ArgSpec x, ArgSpec y) {
  auto shaped = [](ArgSpec a, sp::Shape s) {
    a.shape = std::move(s);
    return a;
  };
  cases.push_back({name,
                   {shaped(x, {2, 3}), shaped(y, {2, 3})},
                   {},
                   {{0, 0}, {1, 1}, {kLast, 0}, {kN, 1}, {2, kN}}});
  cases.push_back({name, {shaped(x, {2, 3}), shaped(y, {})}, {}, {{0, kN}, {kN, 0}, {1, 0}}});
  cases.push_back({name, {shaped(x, {2, 1}), shaped(y, {2, 3})}, {}, {{0, 0}, {kN, 2}, {1, kN}}});
}

void add_elementwise_cases(std::vector<Case>& cases) {
  const ArgSpec f{{}}, positive{{}, sp::float32, 0.5, 2}, ints{{}, sp::int32, -100, 100},
      shift{{}, sp::int32, 0, 8};
  for (const char* name : {"add", "sub", "mul", "max", "min", "atan2", "nextafter", "eq", "ne",
                           "lt", "le", "gt", "ge"})
    add_binary_cases(cases, name, f, f);
  add_binary_cases(cases, "div", f, positive);
  add_binary_cases(cases, "rem", f, positive);
  add_binary_cases(cases, "pow", positive, f);
  for (const char* name : {"and", "or", "xor"}) add_binary_cases(cases, name, ints, ints);
  for (const char* name : {"shift_left", "shift_right_logical", "shift_right_arithmetic"})
    add_binary_cases(cases, name, ints, shift);

  const ArgSpec words{{3}, sp::uint32}, word{{}, sp::uint32};
  cases.push_back({"threefry2x32",
                   {words, words, words, words},
                   {},
                   {{0, 0, 0, 0}, {kN, kN, 0, 1}, {0, kN, kN, kN}}});
  cases.push_back(
      {"threefry2x32", {word, word, words, words}, {}, {{0, 0, kN, kN}, {kN, kN, 1, 0}}});
  cases.push_back(
      {"fma", {{{2, 3}}, {{2, 3}}, {{2, 3}}}, {}, {{0, kN, 1}, {kN, kN, 0}, {0, 0, 0}}});
  cases.push_back({"fma", {{{2, 3}}, {{}}, {{}}}, {}, {{1, 0, kN}}});
  cases.push_back(
      {"add_any", {{{2, 3}}, {{2, 3}}}, {}, {{0, 0}, {kN, 1}, {2, kN}, {0, 1}, {kLast, 0}}});

  cases.push_back({"clamp",
                   {{{}}, {{2, 3}}, {{}}},
                   {},
                   {{kN, 0, kN}, {0, kN, kN}, {0, 1, 0}, {kN, kN, 0}, {0, 0, 0}}});
  cases.push_back(
      {"clamp", {{{2, 3}}, {{2, 3}}, {{2, 3}}}, {}, {{0, 0, 0}, {1, kN, 0}, {kN, 2, kN}}});
  cases.push_back({"clamp", {{{}}, {{}}, {{}}}, {}, {{0, kN, kN}, {kN, 0, kN}, {0, 0, 0}}});

  const ArgSpec pred{{2, 3}, sp::bool_}, scalar_pred{{}, sp::bool_}, which{{2, 3}, sp::int32, 0, 2};
  cases.push_back({"select_n",
                   {pred, {{2, 3}}, {{2, 3}}},
                   {},
                   {{0, 0, 0}, {kN, 1, 0}, {0, kN, kN}, {1, kN, 2}, {kN, 0, 0}, {kN, 0, 1}}});
  cases.push_back(
      {"select_n", {which, {{2, 3}}, {{2, 3}}, {{2, 3}}}, {}, {{0, kN, 1, kN}, {kN, 2, 2, 2}}});
  cases.push_back({"select_n",
                   {scalar_pred, {{2, 3}}, {{2, 3}}},
                   {},
                   {{0, 0, 0}, {kN, 0, 1}, {0, kN, kN}, {0, 1, kN}}});
}

void add_reduction_cases(std::vector<Case>& cases) {
  for (const std::string name : {"reduce_sum", "reduce_prod", "reduce_max", "reduce_min"}) {
    auto axes = [&](std::vector<int64_t> a) {
      sp::Params p{{"axes", a}};
      if (name == "reduce_sum") p.set("out_sharding", sp::NoneParam{});
      return p;
    };
    cases.push_back({name, {{{2, 3, 4}}}, axes({0, 2}), {{0}, {1}, {2}, {kLast}}});
    cases.push_back({name, {{{2, 3}}}, axes({1}), {{0}, {kLast}}});
  }
  for (const char* name : {"reduce_and", "reduce_or"})
    cases.push_back({name,
                     {{{2, 3, 4}, sp::bool_}},
                     {{"axes", std::vector<int64_t>{1}}},
                     {{0}, {1}, {2}, {3}}});
  cases.push_back({"reduce_xor",
                   {{{2, 3, 4}, sp::int32, -50, 50}},
                   {{"axes", std::vector<int64_t>{0, 1}}},
                   {{0}, {1}, {3}}});
  for (const char* name : {"argmax", "argmin"})
    for (int64_t axis : {0, 1})
      cases.push_back({name,
                       {{{2, 3, 4}}},
                       {{"axes", std::vector<int64_t>{axis}}, {"index_dtype", sp::int32}},
                       {{0}, {1}, {2}, {3}}});
  for (const char* name : {"cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"}) {
    cases.push_back(
        {name, {{{3, 4}}}, {{"axis", int64_t(1)}, {"reverse", false}}, {{0}, {1}, {2}}});
    cases.push_back({name, {{{3, 4}}}, {{"axis", int64_t(0)}, {"reverse", true}}, {{0}, {1}, {2}}});
  }
}

void add_shape_cases(std::vector<Case>& cases) {
  cases.push_back({"dot_general",
                   {{{2, 3}}, {{3, 4}}},
                   dot_params({1}, {0}, {}, {}),
                   {{0, 0}, {1, kN}, {kN, 2}, {2, 1}, {kN, 0}}});
  cases.push_back({"dot_general",
                   {{{5, 2, 3}}, {{5, 3, 4}}},
                   dot_params({2}, {1}, {0}, {0}),
                   {{1, kLast}, {kN, 0}, {3, kN}, {0, 0}, {kN, 2}}});
  cases.push_back(
      {"dot_general", {{{3}}, {{3}}}, dot_params({0}, {0}, {}, {}), {{0, 1}, {kN, 0}, {1, kN}}});
  cases.push_back(
      {"dot_general", {{{4, 3}}, {{3, 2}}}, dot_params({1}, {0}, {}, {}), {{1, kN}, {kN, 1}}});

  auto bid = [](std::vector<int64_t> shape, std::vector<int64_t> dims) {
    return sp::Params{
        {"shape", shape}, {"broadcast_dimensions", dims}, {"sharding", sp::NoneParam{}}};
  };
  cases.push_back({"broadcast_in_dim", {{{3}}}, bid({2, 3}, {1}), {{0}, {1}}});
  cases.push_back({"broadcast_in_dim", {{{3, 1}}}, bid({3, 4}, {0, 1}), {{0}, {1}, {2}}});
  cases.push_back({"broadcast_in_dim", {{{}}}, bid({2, 2}, {}), {{0}}});
  auto reshape = [](std::vector<int64_t> sizes) {
    return sp::Params{
        {"new_sizes", sizes}, {"dimensions", sp::NoneParam{}}, {"sharding", sp::NoneParam{}}};
  };
  cases.push_back({"reshape", {{{2, 3}}}, reshape({3, 2}), {{0}, {1}, {2}}});
  cases.push_back({"reshape", {{{2, 3}}}, reshape({6}), {{1}}});
  cases.push_back({"reshape", {{{}}}, reshape({1}), {{0}}});
  cases.push_back(
      {"squeeze", {{{2, 1, 3}}}, {{"dimensions", std::vector<int64_t>{1}}}, {{0}, {1}, {2}, {3}}});
  cases.push_back({"transpose",
                   {{{2, 3, 4}}},
                   {{"permutation", std::vector<int64_t>{2, 0, 1}}},
                   {{0}, {1}, {3}}});
  cases.push_back(
      {"rev", {{{2, 3}}}, {{"dimensions", std::vector<int64_t>{0, 1}}}, {{0}, {1}, {2}}});
  cases.push_back({"rev", {{{2, 3}}}, {{"dimensions", std::vector<int64_t>{1}}}, {{0}, {2}}});
  cases.push_back({"concatenate",
                   {{{2, 3}}, {{1, 3}}, {{4, 3}}},
                   {{"dimension", int64_t(0)}},
                   {{0, 0, 0}, {kN, 1, kN}, {2, kN, 0}}});
  cases.push_back(
      {"concatenate", {{{3, 2}}, {{3, 1}}}, {{"dimension", int64_t(1)}}, {{0, 1}, {kN, 2}}});
  for (int64_t axis : {0, 1, 2})
    cases.push_back({"stack",
                     {{{2, 3}}, {{2, 3}}},
                     {{"axis", axis}},
                     {{0, 0}, {1, 1}, {2, 2}, {kN, 1}, {0, kN}}});
  cases.push_back({"split",
                   {{{5, 3}}},
                   {{"sizes", std::vector<int64_t>{2, 3}}, {"axis", int64_t(0)}},
                   {{0}, {1}, {2}}});
  cases.push_back({"split",
                   {{{5, 3}}},
                   {{"sizes", std::vector<int64_t>{1, 2}}, {"axis", int64_t(1)}},
                   {{0}, {1}, {2}}});
  for (int64_t axis : {0, 1})
    cases.push_back({"unstack", {{{2, 3}}}, {{"axis", axis}}, {{0}, {1}, {2}}});
  cases.push_back({"tile", {{{2, 3}}}, {{"reps", std::vector<int64_t>{2, 1}}}, {{0}, {1}, {2}}});
  using Pads = std::vector<sp::lax::PadConfig>;
  cases.push_back({"pad",
                   {{{3}}, {{}}},
                   {{"padding_config", Pads{{1, 2, 1}}}},
                   {{0, kN}, {kN, 0}, {0, 0}, {1, 0}}});
  cases.push_back({"pad",
                   {{{2, 3}}, {{}}},
                   {{"padding_config", Pads{{1, 0, 0}, {-1, 2, 1}}}},
                   {{1, kN}, {kN, 0}, {2, 0}}});
  cases.push_back({"sort",
                   {{{3, 4}}, {{3, 4}, sp::int32, -9, 9}},
                   {{"dimension", int64_t(1)}, {"is_stable", true}, {"num_keys", int64_t(1)}},
                   {{0, kN}, {kN, 2}, {1, 0}, {2, 2}, {kN, 1}}});
  cases.push_back({"sort",
                   {{{3, 4}, sp::int32, 0, 2}, {{3, 4}}},
                   {{"dimension", int64_t(0)}, {"is_stable", true}, {"num_keys", int64_t(1)}},
                   {{0, 0}, {1, kN}, {kN, 2}}});
  cases.push_back({"sort",
                   {{{5}}},
                   {{"dimension", int64_t(0)}, {"is_stable", true}, {"num_keys", int64_t(1)}},
                   {{0}, {1}}});
}

void add_indexing_cases(std::vector<Case>& cases) {
  auto slice = [](std::vector<int64_t> start, std::vector<int64_t> limit, sp::ParamValue strides) {
    return sp::Params{{"start_indices", start}, {"limit_indices", limit}, {"strides", strides}};
  };
  cases.push_back({"slice", {{{5, 6}}}, slice({1, 0}, {4, 6}, sp::NoneParam{}), {{0}, {1}, {2}}});
  cases.push_back(
      {"slice", {{{5, 6}}}, slice({0, 1}, {5, 6}, std::vector<int64_t>{2, 3}), {{0}, {1}, {2}}});

  const ArgSpec take_idx{{2, 1}, sp::int32, 0, 4}, wild_idx{{2, 1}, sp::int32, -1, 6};
  const sp::Params take = gather_params({1}, {0}, {0}, {}, {}, {1, 3}, "clip");
  const Dims take_dims{{0, kN}, {kN, 0}, {1, 1}, {2, kLast}, {kN, 2}};
  cases.push_back({"gather", {{{5, 3}}, take_idx}, take, take_dims});
  cases.push_back({"gather", {{{5, 3}}, wild_idx}, take, take_dims});
  cases.push_back({"gather",
                   {{{5, 3}}, wild_idx},
                   gather_params({1}, {0}, {0}, {}, {}, {1, 3}, "fill"),
                   take_dims});
  cases.push_back({"gather",
                   {{{4, 5}}, {{4, 2, 1}, sp::int32, 0, 4}},
                   gather_params({}, {1}, {1}, {0}, {0}, {1, 1}, "clip"),
                   {{0, 0}, {1, kN}, {kN, 1}, {2, 3}}});

  const ArgSpec start{{}, sp::int32, -2, 7};
  const sp::Params sizes23{{"slice_sizes", std::vector<int64_t>{2, 3}}};
  cases.push_back({"dynamic_slice",
                   {{{5, 6}}, start, start},
                   sizes23,
                   {{0, kN, kN}, {kN, 0, kN}, {1, 0, 0}, {2, kN, 0}, {kN, 0, 0}}});
  cases.push_back({"dynamic_slice",
                   {{{5}}, start},
                   {{"slice_sizes", std::vector<int64_t>{2}}},
                   {{0, kN}, {kN, 0}, {1, 0}}});
  cases.push_back({"dynamic_slice", {{{}}}, {{"slice_sizes", std::vector<int64_t>{}}}, {{0}}});
  cases.push_back({"dynamic_update_slice",
                   {{{5, 6}}, {{2, 3}}, start, start},
                   {},
                   {{0, kN, kN, kN},
                    {kN, 0, kN, kN},
                    {1, 2, kN, kN},
                    {kN, kN, 0, kN},
                    {0, 0, 0, 0},
                    {2, kN, kN, 0},
                    {kN, 1, 0, 0}}});
  cases.push_back(
      {"dynamic_update_slice", {{{5, 6}}, {{5, 6}}, start, start}, {}, {{kN, 0, 0, kN}}});
}

// A scatter primitive's params (with its update computation) as the scatter family binds them.
sp::Params scatter_params(const std::string& name);

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  add_unary_cases(cases);
  add_elementwise_cases(cases);
  add_reduction_cases(cases);
  add_shape_cases(cases);
  add_indexing_cases(cases);
  for (const char* name : {"scatter", "scatter-add", "scatter-mul", "scatter-min", "scatter-max"})
    cases.push_back({name,
                     {{{5, 3}}, {{2, 1}, sp::int32, -1, 5}, {{2, 3}}},
                     scatter_params(name),
                     {{0, kN, kN}, {kN, kN, 0}, {kN, 0, 0}, {1, kN, 2}, {0, 1, kN}}});
  return cases;
}

// Never batched: primitives without operands, and custom_lin, which exists only inside the linear
// program grad builds and transposes away before any vmap sees it (vmap of a jvp raises as JAX).
// `fusion` exists only in compiled Programs, after every transformation.
const std::set<std::string> kNeverBatched = {"iota", "iota_2x32_shape", "empty2", "custom_lin",
                                             "fusion"};
// Primitives holding sub-programs: vmap batches the call's sub-program equation by equation;
// the control flow rules batch their bodies (control_flow_test.cpp), custom_vjp_call and
// custom_jvp_call their functions (transforms_test.cpp).
const std::set<std::string> kBatchedByVmap = {
    "jit", "cond", "while", "scan", "custom_vjp_call", "custom_jvp_call"};
// Rules tested against vmap-with-axis-name and JAX's values in their own suites: the collectives
// (collectives_vmap_test.cpp), shard_map (shard_map_test.cpp), debug printing,
// sharding_constraint and device_put (against JAX's jaxprs in sharding/sharding_api_test.cpp),
// and reshard (sharding/explicit_reshard_test.cpp).
const std::set<std::string> kTestedElsewhere = {
    "psum",           "pmax",      "pmin",        "all_gather",          "reduce_scatter",
    "all_to_all",     "ppermute",  "pbroadcast",  "axis_index",          "pvary",
    "psum_invariant", "shard_map", "debug_print", "sharding_constraint", "device_put",
    "reshard"};

// ---- equation recording ---------------------------------------------------------------------
std::string ints_str(const std::vector<int64_t>& v, bool brackets = false) {
  std::string s = brackets ? "[" : "(";
  for (size_t i = 0; i < v.size(); ++i) s.append(i ? ", " : "").append(std::to_string(v[i]));
  if (!brackets && v.size() == 1) s += ",";
  return s + (brackets ? "]" : ")");
}

std::string param_str(const sp::ParamValue& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, sp::NoneParam>) {
          return "None";
        } else if constexpr (std::is_same_v<T, bool>) {
          return x ? "True" : "False";
        } else if constexpr (std::is_same_v<T, int64_t>) {
          return std::to_string(x);
        } else if constexpr (std::is_same_v<T, std::string>) {
          return x;
        } else if constexpr (std::is_same_v<T, sp::DType>) {
          return std::string(sp::dtype_name(x));
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          return ints_str(x);
        } else if constexpr (std::is_same_v<T, sp::lax::DotDimensionNumbers>) {
          return "((" + ints_str(x.lhs_contracting, true) + ", " +
                 ints_str(x.rhs_contracting, true) + "), (" + ints_str(x.lhs_batch, true) + ", " +
                 ints_str(x.rhs_batch, true) + "))";
        } else if constexpr (std::is_same_v<T, std::vector<sp::lax::PadConfig>>) {
          std::string s = "(";
          for (size_t i = 0; i < x.size(); ++i)
            s.append(i ? ", " : "").append(ints_str({x[i].low, x[i].high, x[i].interior}));
          return s + (x.size() == 1 ? ",)" : ")");
        } else {
          return "<?>";
        }
      },
      v);
}

// Records each bound primitive as `name[k=v ...] in-types -> out-types` and evaluates it.
class RecordingTrace : public sp::Trace {
 public:
  std::vector<std::string> equations;
  sp::Params last_params;

  std::vector<sp::Array> process_primitive(const sp::Primitive& p, std::span<const sp::Array> in,
                                           const sp::Params& params) override {
    sp::CurrentTraceScope eager(nullptr);
    std::vector<sp::Array> out = sp::bind(p, in, params);
    std::string s = p.name;
    if (!params.items().empty()) {
      s += "[";
      bool first = true;
      for (const auto& [k, v] : params.items()) {
        s.append(first ? "" : " ").append(k).append("=").append(param_str(v));
        first = false;
      }
      s += "]";
    }
    for (const sp::Array& x : in) s.append(" ").append(sp::aval_of(x).str());
    s += " ->";
    for (const sp::Array& x : out) s.append(" ").append(sp::aval_of(x).str());
    equations.push_back(s);
    last_params = params;
    return out;
  }
  const char* transformation_name() const override { return "record"; }
};

sp::Params scatter_params(const std::string& name) {
  auto trace = std::make_shared<RecordingTrace>();
  sp::CurrentTraceScope scope(trace.get());
  sp::scatter(name, sp::zeros({5, 3}), sp::zeros({2, 1}, sp::int32), sp::zeros({2, 3}),
              sp::cpu::ScatterDims{{1}, {0}, {0}, {}, {}}, false, false, "fill");
  return trace->last_params;
}

struct Recorded {
  sp::BatchResult result;
  std::vector<std::string> equations;
};

// The rule of `prim` applied to `args` batched at `dims`, under a vmap whose size is the extent
// of the first batched argument's batch dim, with the equations it binds.
Recorded record(const char* prim, const std::vector<sp::Array>& args, const std::vector<int>& dims,
                const sp::Params& params) {
  auto trace = std::make_shared<RecordingTrace>();
  sp::CurrentTraceScope scope(trace.get());
  size_t first = 0;
  while (first < dims.size() && dims[first] == kN) ++first;
  const int64_t size = first < dims.size() ? args[first].shape()[dims[first]] : kBatch;
  sp::BatchResult r = sp::primitive(prim).batch(args, dims, params, sp::BatchContext{size, ""});
  return {std::move(r), trace->equations};
}

}  // namespace

// ---- coverage -----------------------------------------------------------------------------------
TEST(BatchRules, EveryPrimitiveWithOperandsHasARuleAndATestCase) {
  std::set<std::string> tested;
  for (const Case& c : all_cases()) tested.insert(c.prim);
  for (const std::string& name : sp::primitive_registry().names()) {
    if (kBatchedByVmap.count(name)) continue;
    if (kNeverBatched.count(name)) {
      EXPECT_FALSE(sp::primitive(name).batch) << name;
      continue;
    }
    EXPECT_TRUE(sp::primitive(name).batch) << name << " has no batch rule";
    if (kTestedElsewhere.count(name)) continue;
    EXPECT_TRUE(tested.count(name)) << name << " has no batching test case";
  }
}

TEST(BatchRules, AgreeWithBindingEachBatchElement) {
  std::mt19937 rng(1234);
  for (const Case& c : all_cases()) check_against_loop(c, rng);
}

// ---- JAX's equations ----------------------------------------------------------------------------
// Expected equations transcribed from jax.make_jaxpr(jax.vmap(...)) with JAX 0.10.2, every param
// shown (JAX's printer hides some).
TEST(BatchRules, DotGeneralOfTwoBatchedOperandsAddsALeadingDotBatchDim) {
  // vmap(lambda x, y: jnp.tanh(jnp.dot(x, y))) on f32[8,2,3], f32[8,3,4].
  auto dot = record("dot_general", {sp::zeros({8, 2, 3}), sp::zeros({8, 3, 4})}, {0, 0},
                    dot_params({1}, {0}, {}, {}));
  EXPECT_EQ(
      dot.equations,
      (std::vector<std::string>{
          "dot_general[dimension_numbers=(([2], [1]), ([0], [0])) out_sharding=None "
          "precision=None preferred_element_type=None] f32[8,2,3] f32[8,3,4] -> f32[8,2,4]"}));
  EXPECT_EQ(dot.result.dims, std::vector<int>{0});
  auto tanh = record("tanh", dot.result.outputs, dot.result.dims, {});
  EXPECT_EQ(tanh.equations, std::vector<std::string>{"tanh f32[8,2,4] -> f32[8,2,4]"});
  EXPECT_EQ(tanh.result.dims, std::vector<int>{0});
}

TEST(BatchRules, DotGeneralWithOneBatchedOperandKeepsItAsAFreeDim) {
  const sp::Params p = dot_params({1}, {0}, {}, {});
  auto lhs = record("dot_general", {sp::zeros({2, 8, 3}), sp::zeros({3, 4})}, {1, kN}, p);
  EXPECT_EQ(lhs.equations,
            (std::vector<std::string>{
                "dot_general[dimension_numbers=(([2], [0]), ([], [])) out_sharding=None "
                "precision=None preferred_element_type=None] f32[2,8,3] f32[3,4] -> f32[2,8,4]"}));
  EXPECT_EQ(lhs.result.dims, std::vector<int>{1});
  auto rhs = record("dot_general", {sp::zeros({2, 3}), sp::zeros({3, 4, 8})}, {kN, 2}, p);
  EXPECT_EQ(rhs.equations,
            (std::vector<std::string>{
                "dot_general[dimension_numbers=(([1], [0]), ([], [])) out_sharding=None "
                "precision=None preferred_element_type=None] f32[2,3] f32[3,4,8] -> f32[2,4,8]"}));
  EXPECT_EQ(rhs.result.dims, std::vector<int>{2});
}

TEST(BatchRules, BroadcastingPrimitiveMovesBatchDimsToTheFront) {
  auto row = record("add", {sp::zeros({3, 4}), sp::zeros({3})}, {1, kN}, {});
  EXPECT_EQ(row.equations,
            (std::vector<std::string>{
                "transpose[permutation=(1, 0)] f32[3,4] -> f32[4,3]",
                "broadcast_in_dim[broadcast_dimensions=(1,) shape=(1, 3) sharding=None] f32[3] -> "
                "f32[1,3]",
                "add f32[4,3] f32[1,3] -> f32[4,3]"}));
  // A batched scalar meets an unbatched matrix: the unbatched operand is broadcast first.
  auto scalar = record("add", {sp::zeros({4}), sp::zeros({2, 3})}, {0, kN}, {});
  EXPECT_EQ(scalar.equations,
            (std::vector<std::string>{
                "broadcast_in_dim[broadcast_dimensions=(1, 2) shape=(1, 2, 3) sharding=None] "
                "f32[2,3] -> f32[1,2,3]",
                "broadcast_in_dim[broadcast_dimensions=(0,) shape=(4, 1, 1) sharding=None] f32[4] "
                "-> f32[4,1,1]",
                "add f32[4,1,1] f32[1,2,3] -> f32[4,2,3]"}));
  auto same = record("add", {sp::zeros({4, 2, 3}), sp::zeros({})}, {0, kN}, {});
  EXPECT_EQ(same.equations, std::vector<std::string>{"add f32[4,2,3] f32[] -> f32[4,2,3]"});
}

TEST(BatchRules, ReduceSumShiftsItsAxesPastTheBatchDim) {
  auto r = record("reduce_sum", {sp::zeros({2, 4, 3})}, {1},
                  {{"axes", std::vector<int64_t>{1}}, {"out_sharding", sp::NoneParam{}}});
  EXPECT_EQ(r.equations, std::vector<std::string>{
                             "reduce_sum[axes=(2,) out_sharding=None] f32[2,4,3] -> f32[2,4]"});
  EXPECT_EQ(r.result.dims, std::vector<int>{1});
}

TEST(BatchRules, ReshapeMovesTheBatchDimToTheFrontFirst) {
  auto r = record("reshape", {sp::zeros({2, 5, 3})}, {1},
                  {{"new_sizes", std::vector<int64_t>{6}},
                   {"dimensions", sp::NoneParam{}},
                   {"sharding", sp::NoneParam{}}});
  EXPECT_EQ(r.equations,
            (std::vector<std::string>{
                "transpose[permutation=(1, 0, 2)] f32[2,5,3] -> f32[5,2,3]",
                "reshape[dimensions=None new_sizes=(5, 6) sharding=None] f32[5,2,3] -> f32[5,6]"}));
}

TEST(BatchRules, SelectNWithABatchedScalarSelectorBroadcastsEverything) {
  auto r = record("select_n", {sp::zeros({5}, sp::bool_), sp::zeros({2, 3}), sp::zeros({2, 3})},
                  {0, kN, kN}, {});
  EXPECT_EQ(r.equations,
            (std::vector<std::string>{
                "broadcast_in_dim[broadcast_dimensions=(1, 2) shape=(5, 2, 3) sharding=None] "
                "f32[2,3] -> f32[5,2,3]",
                "broadcast_in_dim[broadcast_dimensions=(1, 2) shape=(5, 2, 3) sharding=None] "
                "f32[2,3] -> f32[5,2,3]",
                "broadcast_in_dim[broadcast_dimensions=(0,) shape=(5, 2, 3) sharding=None] "
                "bool[5] -> bool[5,2,3]",
                "select_n bool[5,2,3] f32[5,2,3] f32[5,2,3] -> f32[5,2,3]"}));
}

TEST(BatchRules, ClampWithABatchedScalarMinimum) {
  auto r = record("clamp", {sp::zeros({5}), sp::zeros({2, 3}), sp::zeros({})}, {0, kN, kN}, {});
  EXPECT_EQ(r.equations,
            (std::vector<std::string>{
                "broadcast_in_dim[broadcast_dimensions=(1, 2) shape=(5, 2, 3) sharding=None] "
                "f32[2,3] -> f32[5,2,3]",
                "broadcast_in_dim[broadcast_dimensions=() shape=(5, 2, 3) sharding=None] f32[] -> "
                "f32[5,2,3]",
                "broadcast_in_dim[broadcast_dimensions=(0,) shape=(5, 2, 3) sharding=None] f32[5] "
                "-> f32[5,2,3]",
                "clamp f32[5,2,3] f32[5,2,3] f32[5,2,3] -> f32[5,2,3]"}));
}

TEST(BatchRules, SortBroadcastsUnbatchedOperandsToTheBatchedShape) {
  auto r = record("sort", {sp::zeros({4, 5, 3}), sp::zeros({4, 3}, sp::int32)}, {1, kN},
                  {{"dimension", int64_t(0)}, {"is_stable", true}, {"num_keys", int64_t(1)}});
  EXPECT_EQ(r.equations,
            (std::vector<std::string>{
                "broadcast_in_dim[broadcast_dimensions=(0, 2) shape=(4, 5, 3) sharding=None] "
                "i32[4,3] -> i32[4,5,3]",
                "sort[dimension=0 is_stable=True num_keys=1] f32[4,5,3] i32[4,5,3] -> f32[4,5,3] "
                "i32[4,5,3]"}));
  EXPECT_EQ(r.result.dims, (std::vector<int>{1, 1}));
}

TEST(BatchRules, ConcatenateBringsEveryOperandToTheFront) {
  auto r = record("concatenate", {sp::zeros({4, 5, 3}), sp::zeros({2, 3})}, {1, kN},
                  {{"dimension", int64_t(0)}});
  EXPECT_EQ(r.equations,
            (std::vector<std::string>{
                "transpose[permutation=(1, 0, 2)] f32[4,5,3] -> f32[5,4,3]",
                "broadcast_in_dim[broadcast_dimensions=(1, 2) shape=(5, 2, 3) sharding=None] "
                "f32[2,3] -> f32[5,2,3]",
                "concatenate[dimension=1] f32[5,4,3] f32[5,2,3] -> f32[5,6,3]"}));
}

TEST(BatchRules, PadWithABatchedPaddingValueSelectsItIn) {
  auto r = record("pad", {sp::zeros({3}), sp::zeros({4})}, {kN, 0},
                  {{"padding_config", std::vector<sp::lax::PadConfig>{{1, 2, 1}}}});
  EXPECT_EQ(r.equations,
            (std::vector<std::string>{
                "broadcast_in_dim[broadcast_dimensions=(1,) shape=(4, 3) sharding=None] f32[3] -> "
                "f32[4,3]",
                "pad[padding_config=((0, 0, 0), (1, 2, 1))] f32[4,3] f32[] -> f32[4,8]",
                "broadcast_in_dim[broadcast_dimensions=() shape=(4, 3) sharding=None] bool[] -> "
                "bool[4,3]",
                "pad[padding_config=((0, 0, 0), (1, 2, 1))] bool[4,3] bool[] -> bool[4,8]",
                "broadcast_in_dim[broadcast_dimensions=(0,) shape=(4, 8) sharding=None] f32[4] -> "
                "f32[4,8]",
                "select_n bool[4,8] f32[4,8] f32[4,8] -> f32[4,8]"}));
}

TEST(BatchRules, DynamicSliceBecomesAGatherAsInJax) {
  // vmap(lambda x, i: lax.dynamic_slice(x, (i, 1), (2, 2)), (1, 0)) on f32[5,4,3], i32[4].
  auto r = record("dynamic_slice", {sp::zeros({5, 4, 3}), sp::zeros({4}, sp::int32), sp::Array(1)},
                  {1, 0, kN}, {{"slice_sizes", std::vector<int64_t>{2, 2}}});
  EXPECT_EQ(r.equations,
            (std::vector<std::string>{
                "broadcast_in_dim[broadcast_dimensions=(0,) shape=(4, 1) sharding=None] i32[4] -> "
                "i32[4,1]",
                "broadcast_in_dim[broadcast_dimensions=() shape=(4, 1) sharding=None] i32[] -> "
                "i32[4,1]",
                "concatenate[dimension=1] i32[4,1] i32[4,1] -> i32[4,2]",
                "transpose[permutation=(1, 0, 2)] f32[5,4,3] -> f32[4,5,3]",
                "gather[collapsed_slice_dims=() fill_value=None indices_are_sorted=True mode=clip "
                "offset_dims=(1, 2) operand_batching_dims=(0,) slice_sizes=(1, 2, 2) "
                "start_index_map=(1, 2) start_indices_batching_dims=(0,) unique_indices=True] "
                "f32[4,5,3] i32[4,2] -> f32[4,2,2]"}));
  EXPECT_EQ(r.result.dims, std::vector<int>{0});
  // Unbatched indices: (4, 2, 2) windows of the whole batch.
  auto u = record("dynamic_slice", {sp::zeros({5, 4, 3}), sp::Array(2), sp::Array(1)}, {1, kN, kN},
                  {{"slice_sizes", std::vector<int64_t>{2, 2}}});
  EXPECT_EQ(
      u.equations,
      (std::vector<std::string>{
          "broadcast_in_dim[broadcast_dimensions=() shape=(1,) sharding=None] i32[] -> i32[1]",
          "broadcast_in_dim[broadcast_dimensions=() shape=(1,) sharding=None] i32[] -> i32[1]",
          "concatenate[dimension=0] i32[1] i32[1] -> i32[2]",
          "transpose[permutation=(1, 0, 2)] f32[5,4,3] -> f32[4,5,3]",
          "gather[collapsed_slice_dims=() fill_value=None indices_are_sorted=True mode=clip "
          "offset_dims=(0, 1, 2) operand_batching_dims=() slice_sizes=(4, 2, 2) "
          "start_index_map=(1, 2) start_indices_batching_dims=() unique_indices=True] "
          "f32[4,5,3] i32[2] -> f32[4,2,2]"}));
}

TEST(BatchRules, DynamicUpdateSliceWithBatchedStartsClampsPerElement) {
  // Starts beyond the operand clamp separately for each batch element.
  sp::Array x = sp::zeros({3, 4});
  sp::Array u = sp::ones({3, 2});
  sp::Array starts = sp::array<int32_t>({-5, 1, 9});
  auto r = record("dynamic_update_slice", {x, u, starts}, {0, 0, 0}, {});
  sp::Array out = sp::move_batch_dim(r.result.outputs[0], r.result.dims[0], 0, 3);
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{1, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1}));
}

TEST(BatchRules, ReshapeWithDimensionsIsRejected) {
  EXPECT_THROW(
      sp::primitive("reshape").batch(std::vector<sp::Array>{sp::zeros({3, 2})}, std::vector<int>{0},
                                     {{"new_sizes", std::vector<int64_t>{2}},
                                      {"dimensions", std::vector<int64_t>{0}},
                                      {"sharding", sp::NoneParam{}}},
                                     sp::BatchContext{3, ""}),
      sp::ValueError);
}

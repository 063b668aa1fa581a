// Reductions and scans: jnp and lax functions against values recorded from JAX
// (tools/goldens/gen_reductions.py), the kernels' layouts against a plain reference, large arrays
// against double-precision sums, thread-count independence and every error path.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "ops/op_util.h"
#include "support/config_scope.h"
#include "support/golden.h"

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <sstream>

namespace sp = spmd;
using sp::Array;

namespace {

using spmd_test::ThreadsScope;
using spmd_test::X64Scope;

// Restores the x64 setting when a test ends, even on an early return.
std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep)) out.push_back(part);
  return out;
}

// ---- golden cases -------------------------------------------------------------------------------
struct Case {
  std::string key, op, dtype, axes, extra;
  bool keepdims = false;
  Array x, y, expected;
};

sp::Axes jnp_axes(const std::string& s) {
  sp::Axes out;
  if (s == "all" || s == "e") return out;
  for (const std::string& a : split(s, ',')) out.push_back(std::stoi(a));
  return out;
}
std::vector<int64_t> lax_axes(const std::string& s) {
  std::vector<int64_t> out;
  for (int a : jnp_axes(s)) out.push_back(a);
  return out;
}
std::optional<int> one_axis(const std::string& s) {
  if (s == "all") return std::nullopt;
  return std::stoi(s);
}

using CaseFn = std::function<Array(const Case&)>;

Array lax_prim(const char* prim, const Case& c) {
  return sp::ops::apply(prim, {c.x}, sp::Params{{"axes", lax_axes(c.axes)}});
}
Array lax_scan(const char* prim, const Case& c) {
  return sp::ops::apply(
      prim, {c.x}, sp::Params{{"axis", int64_t(std::stoi(c.axes))}, {"reverse", c.extra == "1"}});
}
Array as_array(bool v) {
  return sp::array(std::vector<bool>{v}, sp::Shape{});
}

const std::map<std::string, CaseFn>& case_table() {
  static const std::map<std::string, CaseFn> table = [] {
    std::map<std::string, CaseFn> t;
    auto jnp = [&](const char* name, Array (*f)(const Array&, const sp::Axes&, bool)) {
      t[name] = [f](const Case& c) { return f(c.x, jnp_axes(c.axes), c.keepdims); };
    };
    jnp("sum", sp::sum), jnp("prod", sp::prod), jnp("max", sp::max), jnp("min", sp::min);
    jnp("mean", sp::mean), jnp("all", sp::all), jnp("any", sp::any);
    jnp("logsumexp", sp::logsumexp);
    t["var"] = [](const Case& c) {
      return sp::var(c.x, jnp_axes(c.axes), c.keepdims, std::stoi(c.extra));
    };
    t["std"] = [](const Case& c) {
      return sp::std(c.x, jnp_axes(c.axes), c.keepdims, std::stoi(c.extra));
    };
    t["argmax"] = [](const Case& c) { return sp::argmax(c.x, one_axis(c.axes), c.keepdims); };
    t["argmin"] = [](const Case& c) { return sp::argmin(c.x, one_axis(c.axes), c.keepdims); };
    t["cumsum"] = [](const Case& c) { return sp::cumsum(c.x, one_axis(c.axes)); };
    t["cumprod"] = [](const Case& c) { return sp::cumprod(c.x, one_axis(c.axes)); };
    t["lax.reduce_sum"] = [](const Case& c) { return sp::lax::reduce_sum(c.x, lax_axes(c.axes)); };
    t["lax.reduce_prod"] = [](const Case& c) {
      return sp::lax::reduce_prod(c.x, lax_axes(c.axes));
    };
    t["lax.reduce_max"] = [](const Case& c) { return sp::lax::reduce_max(c.x, lax_axes(c.axes)); };
    t["lax.reduce_min"] = [](const Case& c) { return sp::lax::reduce_min(c.x, lax_axes(c.axes)); };
    t["lax.reduce_and"] = [](const Case& c) { return sp::lax::reduce_and(c.x, lax_axes(c.axes)); };
    t["lax.reduce_or"] = [](const Case& c) { return sp::lax::reduce_or(c.x, lax_axes(c.axes)); };
    t["lax.reduce_xor"] = [](const Case& c) { return lax_prim("reduce_xor", c); };
    t["lax.argmax"] = [](const Case& c) {
      return sp::lax::argmax(c.x, std::stoi(c.axes), sp::dtype_from_name(c.extra));
    };
    t["lax.argmin"] = [](const Case& c) {
      return sp::lax::argmin(c.x, std::stoi(c.axes), sp::dtype_from_name(c.extra));
    };
    t["lax.cumsum"] = [](const Case& c) {
      return sp::lax::cumsum(c.x, std::stoi(c.axes), c.extra == "1");
    };
    t["lax.cumprod"] = [](const Case& c) {
      return sp::lax::cumprod(c.x, std::stoi(c.axes), c.extra == "1");
    };
    t["lax.cummax"] = [](const Case& c) {
      return sp::lax::cummax(c.x, std::stoi(c.axes), c.extra == "1");
    };
    t["lax.cummin"] = [](const Case& c) {
      return sp::lax::cummin(c.x, std::stoi(c.axes), c.extra == "1");
    };
    t["lax.cumlogsumexp"] = [](const Case& c) { return lax_scan("cumlogsumexp", c); };
    t["isclose"] = [](const Case& c) { return sp::isclose(c.x, c.y, 1e-5, 1e-8, c.extra == "1"); };
    t["allclose"] = [](const Case& c) {
      return as_array(sp::allclose(c.x, c.y, 1e-5, 1e-8, c.extra == "1"));
    };
    t["array_equal"] = [](const Case& c) {
      return as_array(sp::array_equal(c.x, c.y, c.extra == "1"));
    };
    return t;
  }();
  return table;
}

std::vector<Case> load_cases(const char* file) {
  const auto& arrays = spmd_test::load_golden(file);
  std::vector<Case> cases;
  for (const auto& [name, value] : arrays) {
    if (name.starts_with("in|")) continue;
    std::vector<std::string> f = split(name, '|');
    if (f.size() != 6) continue;
    Case c{name, f[0], f[1], f[2], f[4], f[3] == "1", {}, {}, value};
    c.x = arrays.at("in|" + f[5]);
    auto y = arrays.find("in|" + f[5] + "|y");
    if (y != arrays.end()) c.y = y->second;
    cases.push_back(std::move(c));
  }
  return cases;
}

// Float sums differ from XLA's in summation order only: a relative error of a few units of the
// result's type. Everything else (integers, bools, extrema, indices) must match exactly.
::testing::AssertionResult matches_jax(const Array& got, const Array& want) {
  if (!sp::is_floating(want.dtype())) return spmd_test::arrays_equal(got, want);
  switch (want.dtype()) {
    case sp::float64:
      return spmd_test::arrays_close(got, want, 1e-12, 1e-12);
    case sp::float32:
      return spmd_test::arrays_close(got, want, 2e-6, 2e-6);
    case sp::float16:
      return spmd_test::arrays_close(got, want, 2e-3, 1e-3);
    default:
      return spmd_test::arrays_close(got, want, 1.6e-2, 1e-2);
  }
}

bool is_exact_op(const std::string& op) {
  for (const char* e : {"max", "min", "all", "any", "argmax", "argmin", "lax.reduce_max",
                        "lax.reduce_min", "lax.cummax", "lax.cummin", "lax.argmax", "lax.argmin",
                        "isclose", "allclose", "array_equal"})
    if (op == e) return true;
  return false;
}

void check_golden(const char* file, size_t min_cases) {
  std::vector<Case> cases = load_cases(file);
  ASSERT_GE(cases.size(), min_cases);
  std::map<std::string, int> seen;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key);
    auto fn = case_table().find(c.op);
    ASSERT_NE(fn, case_table().end()) << "no C++ function for " << c.op;
    Array got;
    try {
      got = fn->second(c);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "threw: " << e.what();
      continue;
    }
    if (is_exact_op(c.op))
      EXPECT_TRUE(spmd_test::arrays_equal(got, c.expected));
    else
      EXPECT_TRUE(matches_jax(got, c.expected));
    ++seen[c.op];
  }
  EXPECT_EQ(seen.size(), case_table().size()) << "some functions have no golden cases";
}

// ---- helpers for the hand-written tests ---------------------------------------------------------
std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = dist(gen);
  return v;
}

std::vector<int32_t> random_ints(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> dist(-1000, 1000);
  std::vector<int32_t> v(n);
  for (int32_t& i : v) i = dist(gen);
  return v;
}

template <class E>
void expect_error(const std::function<void()>& f, const std::string& message) {
  try {
    f();
    ADD_FAILURE() << "expected an exception with message: " << message;
  } catch (const E& e) {
    EXPECT_EQ(std::string(e.what()), message);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

// Sums of int32 `x` over `axes` by plain index arithmetic.
std::vector<int64_t> reference_sum(const std::vector<int32_t>& x, const sp::Shape& shape,
                                   const std::vector<int64_t>& axes) {
  std::vector<bool> reduced(size_t(shape.ndim()), false);
  for (int64_t a : axes) reduced[size_t(a)] = true;
  std::vector<int64_t> out_strides(size_t(shape.ndim()), 0);
  int64_t out_size = 1;
  for (int d = shape.ndim() - 1; d >= 0; --d) {
    if (reduced[size_t(d)]) continue;
    out_strides[size_t(d)] = out_size;
    out_size *= shape[d];
  }
  std::vector<int64_t> out(size_t(out_size), 0);
  std::vector<int64_t> index(size_t(shape.ndim()), 0);
  for (size_t i = 0; i < x.size(); ++i) {
    int64_t o = 0;
    for (int d = 0; d < shape.ndim(); ++d) o += index[size_t(d)] * out_strides[size_t(d)];
    out[size_t(o)] += x[i];
    for (int d = shape.ndim() - 1; d >= 0; --d) {
      if (++index[size_t(d)] < shape[d]) break;
      index[size_t(d)] = 0;
    }
  }
  return out;
}

}  // namespace

// ---- golden values
// --------------------------------------------------------------------------------
TEST(ReductionsGolden, MatchJaxForEveryFunctionAndDtype) {
  check_golden("reductions.npz", 1500);
}

TEST(ReductionsGolden, MatchJaxWith64BitTypes) {
  X64Scope x64(true);
  check_golden("reductions_x64.npz", 900);
}

// ---- dtype rules
// ----------------------------------------------------------------------------------
TEST(Reductions, SumAndProdPromoteNarrowIntegersLikeJnp) {
  Array i8 = sp::array<int8_t>({100, 100, 100});
  EXPECT_EQ(sp::sum(i8).dtype(), sp::int32);
  EXPECT_EQ(sp::sum(i8).item<int32_t>(), 300);
  EXPECT_EQ(sp::prod(i8).item<int32_t>(), 1000000);
  EXPECT_EQ(sp::sum(sp::array<uint8_t>({200, 100})).dtype(), sp::uint32);
  EXPECT_EQ(sp::sum(sp::array<uint8_t>({200, 100})).item<uint32_t>(), 300u);
  EXPECT_EQ(sp::sum(sp::ones({5}, sp::bool_)).dtype(), sp::int32);
  EXPECT_EQ(sp::sum(sp::ones({5}, sp::bool_)).item<int32_t>(), 5);
  EXPECT_EQ(sp::sum(sp::ones({5}, sp::bfloat16)).dtype(), sp::bfloat16);
  EXPECT_EQ(sp::mean(sp::arange(4)).dtype(), sp::float32);
  EXPECT_EQ(sp::var(sp::arange(4)).dtype(), sp::float32);
  EXPECT_EQ(sp::max(i8).dtype(), sp::int8);
  EXPECT_EQ(sp::argmax(i8).dtype(), sp::int32);
  EXPECT_EQ(sp::all(sp::arange(3)).dtype(), sp::bool_);
  // Scans keep the dtype (int8 wraps) except bool, which counts in the default int.
  EXPECT_EQ(sp::cumsum(i8).to_vector<int32_t>(), (std::vector<int32_t>{100, -56, 44}));
  EXPECT_EQ(sp::cumsum(sp::ones({3}, sp::bool_)).dtype(), sp::int32);
}

TEST(Reductions, X64WidensToSixtyFourBitDefaults) {
  X64Scope x64(true);
  EXPECT_EQ(sp::sum(sp::array<int32_t>({1, 2})).dtype(), sp::int64);
  EXPECT_EQ(sp::sum(sp::array<uint8_t>({1, 2})).dtype(), sp::uint64);
  // jnp's to_inexact_dtype keeps 32-bit integers in float32 even with x64.
  EXPECT_EQ(sp::mean(sp::array<int32_t>({1, 2})).dtype(), sp::float32);
  EXPECT_EQ(sp::mean(sp::array<int64_t>({1, 2})).dtype(), sp::float64);
  EXPECT_EQ(sp::argmax(sp::array<int32_t>({1, 2})).dtype(), sp::int64);
  EXPECT_EQ(sp::lax::argmax(sp::array<int32_t>({1, 2}), 0, sp::int64).dtype(), sp::int64);
}

TEST(Reductions, JnpResultsAreStronglyTypedButLaxKeepsWeakType) {
  Array weak(2.5);
  ASSERT_TRUE(weak.weak_type());
  EXPECT_FALSE(sp::sum(weak).weak_type());
  EXPECT_FALSE(sp::max(weak).weak_type());
  EXPECT_TRUE(sp::lax::reduce_sum(weak, {}).weak_type());
  EXPECT_TRUE(sp::lax::reduce_max(weak, {}).weak_type());
  EXPECT_FALSE(sp::lax::argmax(sp::lax::broadcast_in_dim(weak, {3}, {}), 0).weak_type());
}

// ---- axes and keepdims --------------------------------------------------------------------------
TEST(Reductions, NegativeAxesAndKeepdims) {
  Array x = sp::arange(24.0f).reshape({2, 3, 4});
  EXPECT_TRUE(spmd_test::arrays_equal(sp::sum(x, {-1}), sp::sum(x, {2})));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::sum(x, {-3, -1}), sp::sum(x, {0, 2})));
  Array k = sp::sum(x, {0, 2}, true);
  EXPECT_EQ(k.shape(), (sp::Shape{1, 3, 1}));
  EXPECT_EQ(k.to_vector<float>(), (std::vector<float>{60, 92, 124}));
  EXPECT_EQ(sp::max(x, {}, true).shape(), (sp::Shape{1, 1, 1}));
  EXPECT_EQ(sp::argmax(x, 1, true).shape(), (sp::Shape{2, 1, 4}));
  EXPECT_EQ(sp::argmin(x, std::nullopt, true).shape(), (sp::Shape{1, 1, 1}));
  EXPECT_EQ(sp::mean(x, {1}, true).shape(), (sp::Shape{2, 1, 4}));
  EXPECT_EQ(sp::var(x, {-1}, true).shape(), (sp::Shape{2, 3, 1}));
  EXPECT_EQ(sp::logsumexp(x, {0}, true).shape(), (sp::Shape{1, 3, 4}));
}

TEST(Reductions, ScalarsReduceToThemselves) {
  Array s = sp::array<float>({4.5f}, sp::Shape{});
  EXPECT_EQ(sp::sum(s).item<float>(), 4.5f);
  EXPECT_EQ(sp::max(s).item<float>(), 4.5f);
  EXPECT_EQ(sp::argmax(s).item<int32_t>(), 0);
  EXPECT_EQ(sp::cumsum(s).shape(), (sp::Shape{1}));
  EXPECT_EQ(sp::mean(s).item<float>(), 4.5f);
}

// ---- empty and zero-size
// -------------------------------------------------------------------------
TEST(Reductions, EmptyReductionsGiveTheIdentity) {
  EXPECT_EQ(sp::sum(sp::zeros({0})).item<float>(), 0.f);
  EXPECT_EQ(sp::prod(sp::zeros({0})).item<float>(), 1.f);
  EXPECT_TRUE(sp::all(sp::zeros({0})).item<bool>());
  EXPECT_FALSE(sp::any(sp::zeros({0})).item<bool>());
  EXPECT_TRUE(std::isnan(sp::mean(sp::zeros({0})).item<float>()));
  EXPECT_EQ(sp::lax::reduce_max(sp::zeros({0}), {0}).item<float>(), -INFINITY);
  EXPECT_EQ(sp::lax::reduce_min(sp::zeros({0}), {0}).item<float>(), INFINITY);
  EXPECT_EQ(sp::lax::reduce_max(sp::zeros({0}, sp::int8), {0}).item<int32_t>(), -128);
  EXPECT_EQ(sp::lax::reduce_min(sp::zeros({0}, sp::uint8), {0}).item<int32_t>(), 255);
  EXPECT_EQ(sp::lax::reduce_and(sp::zeros({0}, sp::int32), {0}).item<int32_t>(), -1);
  EXPECT_EQ(sp::logsumexp(sp::zeros({0})).item<float>(), -INFINITY);
  Array z = sp::sum(sp::zeros({3, 0, 2}), {1});
  EXPECT_EQ(z.shape(), (sp::Shape{3, 2}));
  EXPECT_EQ(z.to_vector<float>(), std::vector<float>(6, 0.f));
  EXPECT_EQ(sp::max(sp::zeros({0, 4}), {1}).shape(), (sp::Shape{0}));
  EXPECT_EQ(sp::cumsum(sp::zeros({2, 0}), 1).shape(), (sp::Shape{2, 0}));
}

TEST(Reductions, MaxAndMinOfZeroSizeRaiseValueError) {
  expect_error<sp::ValueError>(
      [] { (void)sp::max(sp::zeros({0})); },
      "[max] zero-size array to reduction operation max which has no identity");
  expect_error<sp::ValueError>(
      [] {
        (void)sp::min(sp::zeros({2, 0}), {1});
      },
      "[min] zero-size array to reduction operation min which has no identity");
}

TEST(Reductions, ArgmaxOfEmptyAxisRaisesValueError) {
  expect_error<sp::ValueError>([] { (void)sp::argmax(sp::zeros({0})); },
                               "[argmax] attempt to get argmax of an empty sequence");
  expect_error<sp::ValueError>(
      [] {
        (void)sp::argmin(sp::zeros({3, 0}), 1);
      },
      "[argmin] attempt to get argmin of an empty sequence");
  expect_error<sp::ValueError>(
      [] {
        (void)sp::lax::argmax(sp::zeros({0, 3}), 0);
      },
      "[argmax] the reduced dimension must be non-empty, got shape (0, 3) and axis 0");
}

// ---- values
// ---------------------------------------------------------------------------------------
TEST(Reductions, MaxMinPropagateNanAndOrderSignedZeros) {
  Array x = sp::array<float>({1.f, NAN, 3.f});
  EXPECT_TRUE(std::isnan(sp::max(x).item<float>()));
  EXPECT_TRUE(std::isnan(sp::min(x).item<float>()));
  EXPECT_EQ(sp::argmax(x).item<int32_t>(), 1);
  EXPECT_EQ(sp::argmin(x).item<int32_t>(), 1);
  Array zeros = sp::array<float>({-0.f, 0.f, -0.f});
  EXPECT_FALSE(std::signbit(sp::max(zeros).item<float>()));
  EXPECT_TRUE(std::signbit(sp::min(sp::array<float>({0.f, -0.f})).item<float>()));
  EXPECT_EQ(sp::argmax(zeros).item<int32_t>(), 0);
}

TEST(Reductions, VarianceWithTooLargeDdofIsNan) {
  Array x = sp::array<float>({1.f, 2.f, 4.f});
  EXPECT_NEAR(sp::std(x, {}, false, 1).item<float>(), 1.5275252f, 1e-6f);
  EXPECT_TRUE(std::isnan(sp::var(x, {}, false, 3).item<float>()));
  EXPECT_TRUE(std::isnan(sp::var(x, {}, false, 5).item<float>()));
}

TEST(Reductions, LogsumexpHandlesInfinities) {
  EXPECT_EQ(sp::logsumexp(sp::full({3}, -INFINITY)).item<float>(), -INFINITY);
  EXPECT_EQ(sp::logsumexp(sp::array<float>({1.f, INFINITY})).item<float>(), INFINITY);
  EXPECT_NEAR(sp::logsumexp(sp::array<float>({1000.f, 1000.f})).item<float>(),
              1000.f + std::log(2.f), 1e-3f);
  EXPECT_EQ(sp::logsumexp(sp::arange(3)).dtype(), sp::float32);
}

TEST(Reductions, ComparisonsFollowNumpy) {
  Array a = sp::array<float>({1.f, NAN, INFINITY});
  Array b = sp::array<float>({1.f + 1e-6f, NAN, INFINITY});
  EXPECT_FALSE(sp::allclose(a, b));
  EXPECT_TRUE(sp::allclose(a, b, 1e-5, 1e-8, true));
  EXPECT_FALSE(sp::array_equal(a, a));
  EXPECT_TRUE(sp::array_equal(a, a, true));
  EXPECT_FALSE(sp::array_equal(sp::zeros({2}), sp::zeros({3})));
  EXPECT_TRUE(sp::array_equal(sp::zeros({2}), sp::zeros({2}, sp::int32)));
  EXPECT_EQ(sp::isclose(sp::zeros({2, 1}), sp::zeros({3})).shape(), (sp::Shape{2, 3}));
  EXPECT_THROW((void)sp::allclose(sp::zeros({2}), sp::zeros({3})), sp::ShapeError);
}

// ---- kernel layouts ---------------------------------------------------------------------------
TEST(ReductionKernels, EveryAxisCombinationMatchesAReference) {
  const std::vector<sp::Shape> shapes = {{5, 1, 7}, {3, 4, 5, 6}, {2, 1, 3, 1, 4}, {65, 3},
                                         {3, 65},   {2, 2000, 3}, {1, 1, 1}};
  uint32_t seed = 1;
  for (const sp::Shape& shape : shapes) {
    std::vector<int32_t> x = random_ints(size_t(shape.size()), seed++);
    Array a = sp::array(x, shape);
    for (int mask = 0; mask < (1 << shape.ndim()); ++mask) {
      std::vector<int64_t> axes;
      for (int d = 0; d < shape.ndim(); ++d)
        if (mask & (1 << d)) axes.push_back(d);
      SCOPED_TRACE(shape.str() + " axes " + sp::Shape(axes).str());
      std::vector<int64_t> want = reference_sum(x, shape, axes);
      std::vector<int32_t> got = sp::lax::reduce_sum(a, axes).to_vector<int32_t>();
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << i;
    }
  }
}

TEST(ReductionKernels, LargeFloatSumsStayCloseToTheExactSum) {
  // 0.1f summed one by one in float32 drifts by about 1%; pairwise summation does not.
  const int64_t n = (1 << 22) + 7;
  float s = sp::sum(sp::full({n}, 0.1f)).item<float>();
  EXPECT_NEAR(s / (double(n) * double(0.1f)), 1.0, 1e-6);

  std::vector<float> v = random_floats(size_t(1 << 20), 7, 0.f, 1.f);
  double exact = 0;
  for (float f : v) exact += f;
  EXPECT_NEAR(sp::sum(sp::array(v)).item<float>() / exact, 1.0, 1e-6);
  // 16-bit floats accumulate in float32: a bfloat16 running sum would stop at 256.
  EXPECT_EQ(sp::lax::reduce_sum(sp::ones({1 << 20}, sp::bfloat16), {0}).item<float>(),
            float(1 << 20));
}

TEST(ReductionKernels, LargeRowColumnAndMiddleSumsMatchDoubleReference) {
  // A tall matrix (column sums accumulate rows), a wide one (row sums over contiguous runs) and
  // a middle axis.
  for (const auto& [shape, axis] : std::vector<std::pair<sp::Shape, int>>{{{1 << 19, 3}, 0},
                                                                          {{4096, 600}, 0},
                                                                          {{600, 1 << 11}, 1},
                                                                          {{64, 1 << 12, 5}, 1},
                                                                          {{3, 1 << 20}, 1}}) {
    SCOPED_TRACE(shape.str());
    std::vector<float> v = random_floats(size_t(shape.size()), uint32_t(shape[0]));
    std::vector<float> got = sp::sum(sp::array(v, shape), {axis}).to_vector<float>();
    int64_t outer = 1, n = shape[axis], inner = 1;
    for (int d = 0; d < shape.ndim(); ++d)
      (d < axis ? outer : d > axis ? inner : n) *= d == axis ? 1 : shape[d];
    ASSERT_EQ(int64_t(got.size()), outer * inner);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < inner; ++j) {
        double exact = 0, magnitude = 0;
        for (int64_t i = 0; i < n; ++i) {
          float f = v[size_t((o * n + i) * inner + j)];
          exact += f;
          magnitude += std::abs(f);
        }
        ASSERT_NEAR(got[size_t(o * inner + j)], exact, 1e-6 * magnitude + 1e-6)
            << "output " << o * inner + j;
      }
  }
}

TEST(ReductionKernels, LargeArgmaxFindsTheFirstMaximum) {
  std::vector<float> v = random_floats(size_t(3 << 20), 11);
  v[2'500'000] = 5.f;
  v[3'000'000] = 5.f;
  Array x = sp::array(v);
  EXPECT_EQ(sp::argmax(x).item<int32_t>(), 2'500'000);
  EXPECT_EQ(sp::max(x).item<float>(), 5.f);
  v[2'000'000] = NAN;
  v[2'900'000] = NAN;
  EXPECT_EQ(sp::argmin(sp::array(v)).item<int32_t>(), 2'000'000);
  // Column-wise on a tall matrix.
  std::vector<float> m = random_floats(size_t(1 << 20) * 4, 12);
  m[size_t(700'000) * 4 + 2] = 9.f;
  EXPECT_EQ(sp::argmax(sp::array(m, {1 << 20, 4}), 0).to_vector<int32_t>()[2], 700'000);
}

TEST(ReductionKernels, LargeCumsumMatchesDoublePrefixSums) {
  std::vector<float> v = random_floats(size_t(1 << 20) + 3, 13);
  std::vector<float> got = sp::cumsum(sp::array(v)).to_vector<float>();
  double exact = 0, magnitude = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    exact += v[i];
    magnitude += std::abs(v[i]);
    ASSERT_NEAR(got[i], exact, 1e-5 * magnitude + 1e-5) << i;
  }
  std::vector<float> rev = sp::lax::cumsum(sp::array(v), 0, true).to_vector<float>();
  double tail = 0;
  for (size_t i = v.size(); i-- > 0;) {
    tail += v[i];
    ASSERT_NEAR(rev[i], tail, 1e-5 * magnitude + 1e-5) << i;
  }
}

TEST(ReductionKernels, ResultsDoNotDependOnTheThreadCount) {
  // One thread, two, and more than there are outputs: the kernels then split single outputs.
  std::vector<float> v = random_floats(size_t(3 << 20), 21);
  auto compute = [&] {
    Array x = sp::array(v);
    Array rows = x.reshape({3, 1 << 20});
    return std::vector<Array>{sp::sum(x),
                              sp::sum(x.reshape({1 << 20, 3}), {0}),
                              sp::sum(rows, {1}),
                              sp::sum(x.reshape({1024, 3072}), {0}),
                              sp::max(x.reshape({1024, 3, 1024}), {0, 2}),
                              sp::cumsum(x),
                              sp::cumsum(rows, 1),
                              sp::argmax(x),
                              sp::logsumexp(rows, {1})};
  };
  std::vector<Array> serial;
  {
    ThreadsScope one(1);
    serial = compute();
  }
  for (int threads : {2, 5}) {
    ThreadsScope scope(threads);
    std::vector<Array> parallel = compute();
    for (size_t i = 0; i < serial.size(); ++i)
      EXPECT_TRUE(spmd_test::arrays_equal(parallel[i], serial[i]))
          << "result " << i << " with " << threads << " threads";
  }
}

// ---- errors -------------------------------------------------------------------------------------
TEST(ReductionErrors, BadAxesRaise) {
  Array x = sp::zeros({2, 3});
  EXPECT_THROW((void)sp::sum(x, {2}), sp::AxisError);
  EXPECT_THROW((void)sp::mean(x, {-3}), sp::AxisError);
  EXPECT_THROW((void)sp::sum(x, {0, -2}), sp::ValueError);
  EXPECT_THROW((void)sp::argmax(x, 2), sp::AxisError);
  EXPECT_THROW((void)sp::cumsum(x, 2), sp::AxisError);
  EXPECT_THROW((void)sp::cummax(x, -3), sp::AxisError);
  expect_error<sp::AxisError>([&] { (void)sp::lax::reduce_sum(x, {2}); },
                              "[reduce_sum] axis 2 is out of bounds for array of dimension 2");
  expect_error<sp::AxisError>([&] { (void)sp::lax::reduce_max(x, {-1}); },
                              "[reduce_max] axis -1 is out of bounds for array of dimension 2");
  expect_error<sp::ValueError>(
      [&] {
        (void)sp::lax::reduce_min(x, {1, 1});
      },
      "[reduce_min] duplicate value in 'axes' of reduction: (1, 1)");
  expect_error<sp::AxisError>([&] { (void)sp::lax::argmax(x, 5); },
                              "[argmax] axis 5 is out of bounds for array of dimension 2");
  expect_error<sp::AxisError>([&] { (void)sp::lax::cumsum(x, -1); },
                              "[cumsum] axis -1 is out of bounds for array of shape (2, 3)");
  expect_error<sp::ValueError>(
      [&] {
        (void)sp::ops::apply(
            "argmax", {x},
            sp::Params{{"axes", std::vector<int64_t>{0, 1}}, {"index_dtype", sp::int32}});
      },
      "[argmax] expected exactly one axis, got (0, 1)");
}

TEST(ReductionErrors, WrongDtypesRaiseTypeError) {
  Array b = sp::ones({3}, sp::bool_);
  expect_error<sp::TypeError>(
      [&] { (void)sp::lax::reduce_sum(b, {0}); },
      "[reduce_sum] does not accept dtype bool. Accepted dtypes are subtypes of number.");
  expect_error<sp::TypeError>(
      [&] { (void)sp::lax::cumsum(b, 0); },
      "[cumsum] does not accept dtype bool. Accepted dtypes are subtypes of number.");
  EXPECT_THROW((void)sp::cummax(b, 0), sp::TypeError);
  EXPECT_THROW((void)sp::lax::reduce_prod(b, {0}), sp::TypeError);
  expect_error<sp::TypeError>(
      [] { (void)sp::lax::reduce_and(sp::ones({3}), {0}); },
      "[reduce_and] logical reduction requires operand dtype bool or int, got float32.");
  expect_error<sp::TypeError>([] { (void)sp::lax::argmax(sp::ones({3}), 0, sp::float32); },
                              "[argmax] index_dtype must be an integer type, but got float32");
  expect_error<sp::TypeError>(
      [] {
        (void)sp::ops::apply("cumlogsumexp", {sp::arange(3)},
                             sp::Params{{"axis", int64_t(0)}, {"reverse", false}});
      },
      "[cumlogsumexp] expected a floating-point dtype, got int32");
}

namespace {

// Integer sums, products and their scans wrap modulo 2^bits, as in XLA (values are JAX's, with
// dtype= keeping the input type: sum([max, max, 3]) = 1).
template <class T>
void expect_wrapping_reductions(sp::DType t) {
  SCOPED_TRACE(sp::dtype_name(t));
  const T hi = std::numeric_limits<T>::max(), lo = std::numeric_limits<T>::min();
  auto exact = [&](std::vector<T> v) {
    return sp::array_from_bytes(v.data(), t, {int64_t(v.size())});
  };
  using V = std::vector<T>;
  EXPECT_EQ(sp::lax::reduce_sum(exact({hi, hi, 3}), {0}).template item<T>(), T(1));
  EXPECT_EQ(sp::lax::reduce_prod(exact({hi, hi, 3}), {0}).template item<T>(), T(3));
  EXPECT_EQ(sp::lax::cumsum(exact({hi, 1, 1}), 0).template to_vector<T>(), (V{hi, lo, T(lo + 1)}));
  EXPECT_EQ(sp::lax::cumprod(exact({hi, 2, 2}), 0).template to_vector<T>(),
            (V{hi, static_cast<T>(-2), static_cast<T>(-4)}));
}

}  // namespace

TEST(Reductions, IntegerSumsProductsAndScansWrapAround) {
  X64Scope x64(true);
  expect_wrapping_reductions<int8_t>(sp::int8);
  expect_wrapping_reductions<int16_t>(sp::int16);
  expect_wrapping_reductions<int32_t>(sp::int32);
  expect_wrapping_reductions<int64_t>(sp::int64);
  expect_wrapping_reductions<uint8_t>(sp::uint8);
  expect_wrapping_reductions<uint16_t>(sp::uint16);
  expect_wrapping_reductions<uint32_t>(sp::uint32);
  expect_wrapping_reductions<uint64_t>(sp::uint64);
  // jnp.sum of int32 keeps int32: 2147483647 + 1 wraps.
  Array x = sp::array<int32_t>({2147483647, 1});
  EXPECT_EQ(sp::sum(x).item<int32_t>(), -2147483648);
  EXPECT_EQ(sp::cumsum(x).to_vector<int32_t>(), (std::vector<int32_t>{2147483647, -2147483648}));
}

// jnp elementwise functions against values recorded from JAX (tools/goldens/gen_elementwise.py),
// JAX's promotion table, broadcasting and the error paths.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "support/config_scope.h"
#include "support/golden.h"

#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>

namespace sp = spmd;
using sp::Array;

namespace {

using OpFn = std::function<Array(const std::vector<Array>&)>;

const std::map<std::string, OpFn>& op_table() {
  static const std::map<std::string, OpFn> table = [] {
    std::map<std::string, OpFn> t;
    auto u = [&](const char* n, Array (*f)(const Array&)) {
      t[n] = [f](const std::vector<Array>& a) { return f(a[0]); };
    };
    auto b = [&](const char* n, Array (*f)(const Array&, const Array&)) {
      t[n] = [f](const std::vector<Array>& a) { return f(a[0], a[1]); };
    };
    u("negative", sp::negative), u("positive", sp::positive), u("abs", sp::abs);
    u("sign", sp::sign), u("floor", sp::floor), u("ceil", sp::ceil), u("round", sp::round);
    u("trunc", sp::trunc), u("sqrt", sp::sqrt), u("rsqrt", sp::rsqrt), u("cbrt", sp::cbrt);
    u("exp", sp::exp), u("exp2", sp::exp2), u("expm1", sp::expm1), u("log", sp::log);
    u("log1p", sp::log1p), u("log2", sp::log2), u("log10", sp::log10), u("sin", sp::sin);
    u("cos", sp::cos), u("tan", sp::tan), u("arcsin", sp::arcsin), u("arccos", sp::arccos);
    u("arctan", sp::arctan), u("sinh", sp::sinh), u("cosh", sp::cosh), u("tanh", sp::tanh);
    u("arcsinh", sp::arcsinh), u("arccosh", sp::arccosh), u("arctanh", sp::arctanh);
    u("square", sp::square), u("reciprocal", sp::reciprocal), u("isnan", sp::isnan);
    u("isinf", sp::isinf), u("isfinite", sp::isfinite), u("signbit", sp::signbit);
    u("logical_not", sp::logical_not), u("bitwise_not", sp::bitwise_not);
    u("sigmoid", sp::sigmoid), u("erf", sp::erf), u("erfc", sp::erfc);
    u("erf_inv", sp::erf_inv), u("relu", sp::relu);
    b("add", sp::add), b("subtract", sp::subtract), b("multiply", sp::multiply);
    b("divide", sp::divide), b("floor_divide", sp::floor_divide);
    b("remainder", sp::remainder), b("fmod", sp::fmod), b("power", sp::power);
    b("maximum", sp::maximum), b("minimum", sp::minimum), b("arctan2", sp::arctan2);
    b("hypot", sp::hypot), b("logaddexp", sp::logaddexp), b("nextafter", sp::nextafter);
    b("equal", sp::equal), b("not_equal", sp::not_equal), b("less", sp::less);
    b("less_equal", sp::less_equal), b("greater", sp::greater);
    b("greater_equal", sp::greater_equal), b("logical_and", sp::logical_and);
    b("logical_or", sp::logical_or), b("logical_xor", sp::logical_xor);
    b("bitwise_and", sp::bitwise_and), b("bitwise_or", sp::bitwise_or);
    b("bitwise_xor", sp::bitwise_xor), b("left_shift", sp::left_shift);
    b("right_shift", sp::right_shift);
    t["where"] = [](const std::vector<Array>& a) { return sp::where(a[0], a[1], a[2]); };
    t["clip"] = [](const std::vector<Array>& a) { return sp::clip(a[0], a[1], a[2]); };
    return t;
  }();
  return table;
}

// Largest difference from JAX's value, in ulps of the result dtype. Correctly rounded
// operations must agree exactly; transcendental functions may differ by a few ulps because XLA
// and spmd use different polynomial approximations.
int64_t allowed_ulps(const std::string& op, sp::DType t) {
  static const std::map<std::string, int64_t> f32 = {
      {"exp", 2},     {"exp2", 2},    {"expm1", 3},     {"log", 2},     {"log1p", 3},
      {"log2", 3},    {"log10", 3},   {"sin", 2},       {"cos", 2},     {"tan", 4},
      {"arcsin", 3},  {"arccos", 3},  {"arctan", 3},    {"sinh", 4},    {"cosh", 3},
      {"tanh", 4},    {"arcsinh", 4}, {"arccosh", 4},   {"arctanh", 4}, {"cbrt", 2},
      {"rsqrt", 1},   {"sigmoid", 3}, {"erf", 0},       {"erfc", 8},    {"power", 3},
      {"arctan2", 3}, {"hypot", 2},   {"logaddexp", 4}, {"erf_inv", 0}};
  // Functions jnp composes from several primitives: XLA fuses them and, for 16-bit floats, keeps
  // the intermediates in float32, while eager spmd rounds after each primitive.
  static const std::set<std::string> composite = {"log2",   "log10",   "hypot", "logaddexp",
                                                  "divide", "arctan2", "power", "trunc"};
  bool half = t == sp::bfloat16 || t == sp::float16;
  if (half && composite.count(op)) return 3;
  auto it = f32.find(op);
  if (it == f32.end()) return 0;
  if (t == sp::float64 && op == "erf") return 1;  // float32 erf is XLA's; float64 is Highway's
  // 16-bit results are rounded from float32: a float32 difference may flip the last bit.
  if (half) return 1;
  return it->second;
}

struct GoldenCase {
  std::string key, op, dtype;
  std::vector<Array> inputs;
  Array expected;
};

std::vector<GoldenCase> load_cases(const char* file) {
  const auto& arrays = spmd_test::load_golden(file);
  std::vector<GoldenCase> cases;
  for (const auto& [name, value] : arrays) {
    if (!name.ends_with("|out")) continue;
    std::string key = name.substr(0, name.size() - 4);
    GoldenCase c{key, key.substr(0, key.find('|')), "", {}, value};
    c.dtype = key.substr(c.op.size() + 1, key.find('|', c.op.size() + 1) - c.op.size() - 1);
    for (const char* arg : {"|x", "|y", "|z"}) {
      auto it = arrays.find(key + arg);
      if (it != arrays.end()) c.inputs.push_back(it->second);
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

void check_cases(const char* file, size_t min_cases) {
  auto cases = load_cases(file);
  ASSERT_GE(cases.size(), min_cases);
  for (const GoldenCase& c : cases) {
    SCOPED_TRACE(c.key);
    auto it = op_table().find(c.op);
    ASSERT_NE(it, op_table().end()) << "no C++ function for " << c.op;
    Array got = it->second(c.inputs);
    EXPECT_TRUE(spmd_test::arrays_close_ulp(got, c.expected, allowed_ulps(c.op, got.dtype())));
  }
}

}  // namespace

TEST(ElementwiseGolden, MatchesJaxForEveryOpAndDtype) {
  check_cases("elementwise.npz", 300);
}

TEST(ElementwiseGolden, MatchesJaxWith64BitTypes) {
  sp::config::enable_x64(true);
  check_cases("elementwise_x64.npz", 100);
  sp::config::enable_x64(false);
}

TEST(Promotion, BinaryAddFollowsJaxPromotionTable) {
  std::ifstream in(spmd_test::golden_path("promotion.txt"));
  ASSERT_TRUE(in) << "missing promotion.txt";
  auto make = [](const std::string& name) -> Array {
    if (name == "weak_int") return Array(1);
    if (name == "weak_float") return Array(1.0);
    return sp::zeros({}, sp::dtype_from_name(name));
  };
  std::string line;
  int checked = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string a, b, result;
    int weak;
    fields >> a >> b >> result >> weak;
    Array r = make(a) + make(b);
    EXPECT_EQ(sp::dtype_name(r.dtype()), result) << a << " + " << b;
    EXPECT_EQ(r.weak_type(), bool(weak)) << a << " + " << b;
    ++checked;
  }
  EXPECT_GT(checked, 100);
}

TEST(Elementwise, ScalarsAreWeaklyTyped) {
  Array x = sp::arange(4.0f).astype(sp::bfloat16);
  EXPECT_EQ((x + 1.0).dtype(), sp::bfloat16);
  EXPECT_EQ((sp::arange(4) / 2).dtype(), sp::float32);
  EXPECT_EQ((sp::arange(4) * 2).dtype(), sp::int32);
  EXPECT_TRUE(Array(3).weak_type());
  EXPECT_FALSE(sp::arange(3).weak_type());
  EXPECT_EQ((sp::arange(4) / 2).to_vector<float>(), (std::vector<float>{0, 0.5f, 1, 1.5f}));
}

TEST(Elementwise, BroadcastsSizeOneDimsAndLowerRanks) {
  Array col = sp::array({1.f, 2.f, 3.f}).reshape({3, 1});
  Array row = sp::array({10.f, 20.f});
  Array s = col + row;
  EXPECT_EQ(s.shape(), (sp::Shape{3, 2}));
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{11, 21, 12, 22, 13, 23}));
  Array big = sp::ones({2, 3, 4}) * sp::arange(4.0f);
  EXPECT_EQ(big.shape(), (sp::Shape{2, 3, 4}));
  EXPECT_EQ(big.sum().item<float>(), 36.f);
}

TEST(Elementwise, LargeArraysUseTheSameValuesAsSmallOnes) {
  // Big enough to be split across threads, with a broadcast operand.
  Array x = sp::arange(1 << 20).astype(sp::float32).reshape({1024, 1024});
  Array y = x * sp::arange(1024.0f) - 3.0;
  std::vector<float> v = y.to_vector<float>();
  for (int i : {0, 1, 1023, 1024, 500000, (1 << 20) - 1})
    EXPECT_EQ(v[size_t(i)], float(i) * float(i % 1024) - 3.0f) << i;
}

TEST(Elementwise, IncompatibleShapesRaiseShapeError) {
  try {
    (void)(sp::ones({3}) + sp::ones({4}));
    FAIL() << "expected ShapeError";
  } catch (const sp::ShapeError& e) {
    EXPECT_EQ(std::string(e.what()),
              "[add] operands could not be broadcast together with shapes (3,) (4,)");
  }
  EXPECT_THROW((void)sp::where(sp::ones({2}) > 0, sp::ones({3}), 0.0), sp::ShapeError);
}

TEST(Elementwise, WrongDtypesRaiseTypeError) {
  EXPECT_THROW((void)sp::bitwise_and(sp::ones({2}), sp::ones({2})), sp::TypeError);
  EXPECT_THROW((void)sp::left_shift(sp::ones({2}), 1), sp::TypeError);
  EXPECT_THROW((void)(sp::ones({2}, sp::bool_) - sp::ones({2}, sp::bool_)), sp::TypeError);
  EXPECT_THROW((void)sp::sign(sp::ones({2}, sp::bool_)), sp::TypeError);
  EXPECT_THROW((void)sp::lax::integer_pow(sp::arange(3), -1), sp::TypeError);
}

namespace {

// A 1-d array of dtype t holding exactly `values` (no canonicalisation).
template <class T>
Array exact(sp::DType t, const std::vector<T>& values) {
  return sp::array_from_bytes(values.data(), t, {int64_t(values.size())});
}

// Integer arithmetic wraps modulo 2^bits, as XLA defines it; the expected values are JAX's
// (int32: 2147483647 + 1 = -2147483648, -(-2147483648) = -2147483648).
template <class T>
void expect_wrapping_arithmetic(sp::DType t) {
  SCOPED_TRACE(sp::dtype_name(t));
  const T hi = std::numeric_limits<T>::max(), lo = std::numeric_limits<T>::min();
  const Array x = exact<T>(t, {hi, lo}), one = exact<T>(t, {1}), two = exact<T>(t, {2});
  using V = std::vector<T>;
  EXPECT_EQ((x + one).template to_vector<T>(), (V{lo, T(lo + 1)}));
  EXPECT_EQ((x - one).template to_vector<T>(), (V{T(hi - 1), hi}));
  EXPECT_EQ((-x).template to_vector<T>(), (V{T(lo + 1), lo}));
  EXPECT_EQ(sp::abs(x).template to_vector<T>(), (V{hi, lo}));
  EXPECT_EQ((x * two).template to_vector<T>(), (V{static_cast<T>(-2), 0}));
  EXPECT_EQ(sp::square(x).template to_vector<T>(), (V{1, 0}));
  EXPECT_EQ(sp::lax::integer_pow(x, 2).template to_vector<T>(), (V{1, 0}));
  EXPECT_EQ(sp::lax::integer_pow(x, 3).template to_vector<T>(), (V{hi, 0}));
  EXPECT_EQ(sp::power(x, two).template to_vector<T>(), (V{1, 0}));
}

}  // namespace

// jnp.power's cases (JAX 0.10.2's values): a concrete 0-d integer exponent, weak or not, is a
// static integer_pow of the base's dtype, refused for negative powers of integers; integer
// exponent arrays of an integer base use only their low 6 bits; a floating base with integer
// exponents keeps pow's derivative finite at 0 where the exponent is 0.
TEST(Elementwise, PowerFollowsJnpCases) {
  const Array n = sp::array({-2147483647 - 1, -7, -1, 0, 7, 2147483647});
  try {
    (void)sp::power(n, Array(-1));
    FAIL() << "expected TypeError";
  } catch (const sp::TypeError& e) {
    EXPECT_EQ(std::string(e.what()),
              "[integer_pow] Integers cannot be raised to negative powers, got "
              "integer_pow(int32[6], -1)");
  }
  EXPECT_THROW((void)sp::power(n, sp::asarray(Array(-2), sp::int8)), sp::TypeError);
  const Array small = sp::asarray(sp::array({2, 3}), sp::int8);
  const Array cubed = sp::power(small, sp::asarray(Array(3), sp::int32));
  EXPECT_EQ(cubed.dtype(), sp::int8);  // the exponent's dtype does not promote the base
  EXPECT_EQ(cubed.to_vector<int8_t>(), (std::vector<int8_t>{8, 27}));
  EXPECT_EQ(sp::power(n, sp::array({-1, -2, -1, 0, -1, 2})).to_vector<int32_t>(),
            (std::vector<int32_t>{0, 767209169, -1, 1, 1075496887, 1}));
  EXPECT_EQ(sp::power(sp::asarray(sp::array({3}), sp::uint8), sp::asarray(sp::array({200}), sp::uint8))
                .to_vector<uint8_t>(),
            (std::vector<uint8_t>{161}));
  EXPECT_EQ(sp::power(sp::array({0, 0, 2}), sp::array({0, 3, -1})).to_vector<int32_t>(),
            (std::vector<int32_t>{1, 0, 0}));
  const Array b = sp::array(std::vector<bool>{true, false}, {2});
  EXPECT_EQ(sp::power(b, Array(2)).dtype(), sp::int32);
  EXPECT_EQ(sp::power(b, b).to_vector<int32_t>(), (std::vector<int32_t>{1, 1}));  // 0^0 = 1
  EXPECT_EQ(sp::power(sp::array({2.0f, 3.0f}), sp::asarray(Array(true), sp::bool_))
                .to_vector<float>(),
            (std::vector<float>{2, 3}));
  const Array e = sp::array({0, 1, 2, 3, -1});
  auto f = [&](const Array& x) { return sp::sum(sp::power(x, e)); };
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(sp::grad(f)(sp::zeros({5})).to_vector<float>(),
            (std::vector<float>{0, 1, 0, 0, -inf}));
  EXPECT_EQ(sp::grad(f)(sp::array({2.f, -1.5f, 3.f, 0.5f, 4.f})).to_vector<float>(),
            (std::vector<float>{0, 1, 6, 0.75f, -0.0625f}));
}

// lax.pow takes a floating base and a floating or integer exponent only (JAX's TypeErrors).
TEST(Elementwise, LaxPowRefusesIntegerBasesAndBoolExponents) {
  try {
    (void)sp::lax::pow(sp::array({2, 3}), sp::array({1.f, 2.f}));
    FAIL() << "expected TypeError";
  } catch (const sp::TypeError& e) {
    EXPECT_EQ(std::string(e.what()),
              "[pow] pow does not accept dtype int32 at position 0. Accepted dtypes at position 0 "
              "are subtypes of floating, complexfloating.");
  }
  try {
    (void)sp::lax::pow(sp::ones({2}), sp::array(std::vector<bool>{true, false}, {2}));
    FAIL() << "expected TypeError";
  } catch (const sp::TypeError& e) {
    EXPECT_EQ(std::string(e.what()),
              "[pow] pow does not accept dtype bool at position 1. Accepted dtypes at position 1 "
              "are subtypes of integer, floating, complexfloating.");
  }
  EXPECT_EQ(sp::lax::pow(sp::array({2.f, 2.f}), sp::asarray(sp::array({3, 4}), sp::uint32))
                .to_vector<float>(),
            (std::vector<float>{8, 16}));
}

TEST(Elementwise, IntegerOverflowWrapsAroundAsInXla) {
  spmd_test::X64Scope x64(true);
  expect_wrapping_arithmetic<int8_t>(sp::int8);
  expect_wrapping_arithmetic<int16_t>(sp::int16);
  expect_wrapping_arithmetic<int32_t>(sp::int32);
  expect_wrapping_arithmetic<int64_t>(sp::int64);
  expect_wrapping_arithmetic<uint8_t>(sp::uint8);
  expect_wrapping_arithmetic<uint16_t>(sp::uint16);
  expect_wrapping_arithmetic<uint32_t>(sp::uint32);
  expect_wrapping_arithmetic<uint64_t>(sp::uint64);
}

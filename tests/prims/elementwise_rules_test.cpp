// The jvp and transpose rules of the elementwise primitives (src/prims/elementwise.cpp,
// unary_math.cpp, random.cpp): which primitives have rules, tangents against central finite
// differences, transposes by the dot-product identity, and the equations each rule stages against
// those JAX 0.10.2 stages.
#include "core/trace.h"
#include "prims/families.h"
#include "prims/primitive.h"
#include "support/config_scope.h"
#include "support/golden.h"
#include "prims/rule_util.h"

#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <set>
#include <sstream>
#include <unordered_map>

namespace sp = spmd;

namespace {

// ---- which primitives have which rules ---------------------------------------------------------
std::set<std::string> names(const std::string& space_separated) {
  std::set<std::string> out;
  std::istringstream words(space_separated);
  for (std::string w; words >> w;) out.insert(w);
  return out;
}

const std::set<std::string> kJvpRule = names(
    "exp exp2 expm1 log log1p sin cos tan asin acos atan sinh cosh tanh asinh acosh atanh "
    "logistic erf erfc erf_inv sqrt rsqrt cbrt neg abs square integer_pow copy add sub mul div "
    "rem pow max min atan2 clamp select_n convert_element_type add_any fma reduce_precision");
const std::set<std::string> kZeroTangent = names(
    "sign floor ceil round is_finite stop_gradient eq ne lt le gt ge and or xor not shift_left "
    "shift_right_logical shift_right_arithmetic population_count clz bitcast_convert_type iota "
    "threefry2x32 iota_2x32_shape");
// JAX has no derivative for nextafter either.
const std::set<std::string> kNoRule = names("nextafter");
const std::set<std::string> kTranspose =
    names("add sub neg mul div copy select_n add_any convert_element_type reduce_precision");

// The primitives of the families these rules cover, from a registry of just those families.
std::vector<std::string> family_primitives() {
  sp::PrimitiveRegistry r;
  sp::register_elementwise_primitives(r);
  sp::register_unary_math_primitives(r);
  sp::register_random_primitives(r);
  std::vector<std::string> names = r.names();
  names.push_back("add_any");
  return names;
}

TEST(AdElementwiseRules, EveryPrimitiveOfTheFamiliesIsClassified) {
  for (const std::string& name : family_primitives()) {
    int lists = kJvpRule.count(name) + kZeroTangent.count(name) + kNoRule.count(name);
    EXPECT_EQ(lists, 1) << name << " must be listed once: a new primitive needs a rule";
  }
}

TEST(AdElementwiseRules, DifferentiablePrimitivesHaveJvpRules) {
  for (const std::string& name : kJvpRule) {
    const sp::Primitive& p = sp::primitive(name);
    EXPECT_TRUE(bool(p.jvp)) << name;
    EXPECT_FALSE(p.non_differentiable) << name;
  }
}

TEST(AdElementwiseRules, PiecewiseConstantAndIntegerPrimitivesHaveZeroTangents) {
  for (const std::string& name : kZeroTangent) {
    const sp::Primitive& p = sp::primitive(name);
    EXPECT_TRUE(p.non_differentiable) << name;
    EXPECT_FALSE(bool(p.jvp)) << name;
  }
  for (const std::string& name : kNoRule) {
    EXPECT_FALSE(sp::primitive(name).non_differentiable) << name;
    EXPECT_FALSE(bool(sp::primitive(name).jvp)) << name;
  }
}

TEST(AdElementwiseRules, OnlyLinearPrimitivesHaveTransposeRules) {
  for (const std::string& name : family_primitives())
    EXPECT_EQ(bool(sp::primitive(name).transpose), kTranspose.count(name) == 1) << name;
}

// ---- random inputs -----------------------------------------------------------------------------
// Where an operand's values are drawn from: [lo, hi), optionally with a random sign; integer
// dtypes take whole numbers in [lo, hi].
struct Domain {
  sp::DType dtype = sp::float64;
  double lo = -2, hi = 2;
  bool either_sign = false;
};

struct Operand {
  sp::Array array;
  std::vector<double> values;
};

Operand make_operand(const std::vector<double>& values, sp::DType t, const sp::Shape& shape) {
  sp::Array a = sp::asarray(sp::array(values, shape), t);
  return {a, values};
}

Operand random_operand(std::mt19937& rng, const Domain& d, const sp::Shape& shape) {
  std::uniform_real_distribution<double> u(d.lo, d.hi);
  std::bernoulli_distribution coin(0.5);
  std::vector<double> v(size_t(shape.size()));
  for (double& x : v) {
    if (sp::is_bool(d.dtype)) {
      x = coin(rng);
    } else if (sp::is_integer(d.dtype)) {
      x = std::floor(std::uniform_real_distribution<double>(d.lo, d.hi + 1)(rng));
    } else {
      x = u(rng) * (d.either_sign && coin(rng) ? -1 : 1);
    }
  }
  return make_operand(v, d.dtype, shape);
}

double host_dot(const sp::Array& a, const sp::Array& b) {
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  EXPECT_EQ(x.size(), y.size());
  double s = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) s += x[i] * y[i];
  return s;
}

// ---- jvp against central finite differences ----------------------------------------------------
struct JvpCase {
  std::string prim;
  sp::Params params;
  std::vector<Domain> domains;
  std::vector<std::vector<sp::Shape>> shapes;
};

const std::vector<std::vector<sp::Shape>> kUnaryShapes = {{{}}, {{3}}, {{2, 3}}};
const std::vector<std::vector<sp::Shape>> kBinaryShapes = {
    {{2, 3}, {2, 3}}, {{2, 3}, {}}, {{}, {2, 3}}, {{2, 3}, {1, 3}}, {{2, 1}, {1, 3}}, {{}, {}}};

std::vector<JvpCase> jvp_cases() {
  const Domain any{}, positive{sp::float64, 0.5, 2}, open_unit{sp::float64, -0.9, 0.9};
  const Domain away_from_zero{sp::float64, 0.2, 2, true};
  std::vector<JvpCase> cases;
  auto unary = [&](const char* name, Domain d) { cases.push_back({name, {}, {d}, kUnaryShapes}); };
  for (const char* name : {"exp", "exp2", "expm1", "sin", "cos", "atan", "sinh", "cosh", "tanh",
                           "asinh", "logistic", "erf", "erfc", "neg", "square", "copy"})
    unary(name, any);
  for (const char* name : {"log", "sqrt", "rsqrt"}) unary(name, positive);
  for (const char* name : {"asin", "acos", "atanh", "erf_inv"}) unary(name, open_unit);
  unary("log1p", {sp::float64, -0.5, 2});
  unary("tan", {sp::float64, -1.2, 1.2});
  unary("acosh", {sp::float64, 1.5, 3});
  unary("abs", away_from_zero);
  unary("cbrt", away_from_zero);
  for (int64_t y : {0, 1, 2, 3, -2})
    cases.push_back({"integer_pow", sp::Params{{"y", y}}, {away_from_zero}, kUnaryShapes});
  auto binary = [&](const char* name, Domain x, Domain y) {
    cases.push_back({name, {}, {x, y}, kBinaryShapes});
  };
  for (const char* name : {"add", "sub", "mul", "max", "min", "atan2", "add_any"})
    binary(name, any, any);
  cases.back().shapes = {{{2, 3}, {2, 3}}, {{}, {}}};  // add_any: equal types only
  binary("div", any, positive);
  // x / y stays inside (1, 2) in magnitude, away from rem's jumps.
  binary("rem", {sp::float64, 1.2, 1.8, true}, {sp::float64, 1.0, 1.1});
  binary("pow", positive, any);
  const Domain lo{sp::float64, -0.6, -0.4}, x{sp::float64, -1, 1}, hi{sp::float64, 0.4, 0.6};
  cases.push_back({"clamp", {}, {lo, x, hi}, {{{}, {2, 3}, {}}, {{2, 3}, {2, 3}, {2, 3}}}});
  cases.push_back({"fma", {}, {any, any, any}, {{{2, 3}, {2, 3}, {2, 3}}, {{2, 3}, {}, {1, 3}}}});
  const Domain pred{sp::bool_}, which{sp::int32, 0, 2};
  cases.push_back({"select_n",
                   {},
                   {pred, any, any},
                   {{{2, 3}, {2, 3}, {2, 3}}, {{}, {2, 3}, {2, 3}}, {{2, 3}, {2, 3}, {}}}});
  cases.push_back({"select_n", {}, {which, any, any, any}, {{{2, 3}, {2, 3}, {2, 3}, {2, 3}}}});
  return cases;
}

// Checks the jvp rule's tangent when the tangents of `active` operands are random and the rest
// symbolic zeros, against (f(x + eps t) - f(x - eps t)) / (2 eps).
void check_jvp(const JvpCase& c, const std::vector<sp::Shape>& shapes,
               const std::vector<size_t>& active, std::mt19937& rng) {
  const sp::Primitive& p = sp::primitive(c.prim);
  const double eps = 1e-6;
  std::vector<Operand> x, t;
  std::vector<sp::Array> primals, tangents, plus, minus;
  for (size_t i = 0; i < shapes.size(); ++i) {
    x.push_back(random_operand(rng, c.domains[i], shapes[i]));
    t.push_back(random_operand(rng, Domain{}, shapes[i]));
    primals.push_back(x[i].array);
    bool on = std::find(active.begin(), active.end(), i) != active.end();
    tangents.push_back(on ? t[i].array : sp::Array());
    std::vector<double> up = x[i].values, down = x[i].values;
    for (size_t j = 0; on && j < up.size(); ++j) {
      up[j] += eps * t[i].values[j];
      down[j] -= eps * t[i].values[j];
    }
    plus.push_back(make_operand(up, c.domains[i].dtype, shapes[i]).array);
    minus.push_back(make_operand(down, c.domains[i].dtype, shapes[i]).array);
  }
  sp::JvpResult r = p.jvp(primals, tangents, c.params);
  sp::Array f_plus = sp::bind1(p, plus, c.params), f_minus = sp::bind1(p, minus, c.params);
  std::vector<double> up = f_plus.to_vector<double>(), down = f_minus.to_vector<double>();
  std::vector<double> fd(up.size());
  for (size_t j = 0; j < fd.size(); ++j) fd[j] = (up[j] - down[j]) / (2 * eps);
  ASSERT_EQ(r.primals_out.size(), 1u);
  ASSERT_EQ(r.tangents_out.size(), 1u);
  EXPECT_TRUE(spmd_test::arrays_equal(r.primals_out[0], sp::bind1(p, primals, c.params)));
  ASSERT_TRUE(r.tangents_out[0].valid()) << "symbolic zero tangent";
  EXPECT_TRUE(
      spmd_test::arrays_close(r.tangents_out[0], sp::array(fd, f_plus.shape()), 1e-6, 1e-6));
}

std::string shapes_str(const std::vector<sp::Shape>& shapes) {
  std::string s;
  for (const sp::Shape& shape : shapes) s += shape.str() + " ";
  return s;
}

TEST(AdElementwiseJvp, TangentsMatchFiniteDifferences) {
  spmd_test::X64Scope x64;
  std::mt19937 rng(42);
  for (const JvpCase& c : jvp_cases()) {
    std::vector<size_t> differentiable;
    for (size_t i = 0; i < c.domains.size(); ++i)
      if (sp::is_floating(c.domains[i].dtype)) differentiable.push_back(i);
    for (const std::vector<sp::Shape>& shapes : c.shapes) {
      SCOPED_TRACE(c.prim + " " + shapes_str(shapes));
      check_jvp(c, shapes, differentiable, rng);
      if (differentiable.size() < 2) continue;
      for (size_t i : differentiable) {
        SCOPED_TRACE("only operand " + std::to_string(i) + " has a tangent");
        check_jvp(c, shapes, {i}, rng);
      }
    }
  }
}

TEST(AdElementwiseJvp, MaxAndMinShareTheTangentOfTiedOperands) {
  spmd_test::X64Scope x64;
  sp::Array x = sp::array({1.0, 2.0, 3.0}), tx = sp::array({1.0, 1.0, 1.0});
  sp::Array y = sp::array({1.0, 0.0, 5.0}), ty = sp::array({3.0, 3.0, 3.0});
  std::vector<sp::Array> primals{x, y}, tangents{tx, ty};
  for (const char* name : {"max", "min"}) {
    sp::JvpResult r = sp::primitive(name).jvp(primals, tangents, {});
    std::vector<double> want =
        std::string(name) == "max" ? std::vector<double>{2, 1, 3} : std::vector<double>{2, 3, 1};
    EXPECT_EQ(r.tangents_out[0].to_vector<double>(), want) << name;
  }
}

TEST(AdElementwiseJvp, ConvertElementTypeConvertsTheTangentOrDropsItForIntegers) {
  spmd_test::X64Scope x64;
  sp::Array x = sp::array({1.5, -2.25}), t = sp::array({0.1, 3.0});
  std::vector<sp::Array> primals{x}, tangents{t};
  sp::Params to_f32{
      {"new_dtype", sp::float32}, {"weak_type", false}, {"sharding", sp::NoneParam{}}};
  sp::JvpResult r = sp::primitive("convert_element_type").jvp(primals, tangents, to_f32);
  EXPECT_TRUE(spmd_test::arrays_equal(r.tangents_out[0], sp::asarray(t, sp::float32)));
  sp::Params to_int{{"new_dtype", sp::int32}, {"weak_type", false}, {"sharding", sp::NoneParam{}}};
  r = sp::primitive("convert_element_type").jvp(primals, tangents, to_int);
  EXPECT_TRUE(spmd_test::arrays_equal(r.primals_out[0], sp::array({1, -2})));
  EXPECT_FALSE(r.tangents_out[0].valid());
}

// JAX's pow takes an integer exponent (jnp.power(float, int array) stages one), as spmd's does.
bool pow_takes_integer_exponents() {
  sp::AbstractValue x{sp::Shape{}, sp::float32, false}, y{sp::Shape{}, sp::int32, false};
  std::vector<sp::AbstractValue> in{x, y};
  try {
    sp::abstract_eval(sp::primitive("pow"), in, {});
    return true;
  } catch (const sp::TypeError&) {
    return false;
  }
}

TEST(AdElementwiseJvp, IntegerExponentOfPowHasNoTangentContribution) {
  ASSERT_TRUE(pow_takes_integer_exponents());
  spmd_test::X64Scope x64;
  sp::Array x = sp::array({2.0, 0.0}), y = sp::asarray(sp::array({3, 0}), sp::int32);
  sp::Array tx = sp::array({1.0, 1.0}), ty = sp::asarray(sp::array({1, 1}), sp::int32);
  std::vector<sp::Array> primals{x, y}, tangents{tx, ty};
  sp::JvpResult r = sp::primitive("pow").jvp(primals, tangents, {});
  // d/dx x^3 = 12 at 2; x^0 is constant, also at x = 0.
  EXPECT_EQ(r.tangents_out[0].to_vector<double>(), (std::vector<double>{12, 0}));
  JvpCase c{"pow", {}, {{sp::float64, 0.5, 2}, {sp::int32, -2, 3}}, kBinaryShapes};
  std::mt19937 rng(3);
  for (const std::vector<sp::Shape>& shapes : c.shapes) {
    SCOPED_TRACE(shapes_str(shapes));
    check_jvp(c, shapes, {0}, rng);
  }
}

// ---- transposes by the dot-product identity ----------------------------------------------------
struct TransposeCase {
  std::string prim;
  sp::Params params;
  std::vector<Domain> domains;
  std::vector<sp::Shape> shapes;
  std::vector<size_t> linear;
};

std::vector<TransposeCase> transpose_cases() {
  const Domain any{}, positive{sp::float64, 0.5, 2}, pred{sp::bool_}, which{sp::int32, 0, 2};
  const Domain f32{sp::float32};
  std::vector<TransposeCase> cases;
  for (const char* name : {"add", "sub"}) {
    cases.push_back({name, {}, {any, any}, {{2, 3}, {1, 3}}, {0, 1}});
    cases.push_back({name, {}, {any, any}, {{2, 3}, {}}, {0, 1}});
    cases.push_back({name, {}, {any, any}, {{}, {2, 3}}, {0}});
    cases.push_back({name, {}, {any, any}, {{2, 1}, {1, 3}}, {0, 1}});
    cases.push_back({name, {}, {any, any}, {{2, 3}, {2, 3}}, {1}});
  }
  cases.push_back({"neg", {}, {any}, {{2, 3}}, {0}});
  cases.push_back({"copy", {}, {any}, {{2, 3}}, {0}});
  cases.push_back({"add_any", {}, {any, any}, {{2, 3}, {2, 3}}, {0, 1}});
  cases.push_back({"mul", {}, {any, any}, {{2, 3}, {1, 3}}, {0}});
  cases.push_back({"mul", {}, {any, any}, {{2, 3}, {1, 3}}, {1}});
  cases.push_back({"mul", {}, {any, any}, {{}, {2, 3}}, {0}});
  cases.push_back({"mul", {}, {any, any}, {{2, 1}, {1, 3}}, {1}});
  cases.push_back({"div", {}, {any, positive}, {{2, 3}, {1, 3}}, {0}});
  cases.push_back({"div", {}, {any, positive}, {{}, {2, 3}}, {0}});
  cases.push_back({"div", {}, {any, positive}, {{1, 3}, {2, 3}}, {0}});
  sp::Params to_f32{
      {"new_dtype", sp::float32}, {"weak_type", false}, {"sharding", sp::NoneParam{}}};
  sp::Params to_f64{
      {"new_dtype", sp::float64}, {"weak_type", false}, {"sharding", sp::NoneParam{}}};
  cases.push_back({"convert_element_type", to_f32, {any}, {{2, 3}}, {0}});
  cases.push_back({"convert_element_type", to_f64, {f32}, {{2, 3}}, {0}});
  cases.push_back({"select_n", {}, {pred, any, any}, {{2, 3}, {2, 3}, {2, 3}}, {1, 2}});
  cases.push_back({"select_n", {}, {pred, any, any}, {{2, 3}, {2, 3}, {2, 3}}, {2}});
  cases.push_back({"select_n", {}, {pred, any, any}, {{}, {2, 3}, {2, 3}}, {1}});
  cases.push_back(
      {"select_n", {}, {which, any, any, any}, {{2, 3}, {2, 3}, {2, 3}, {2, 3}}, {1, 3}});
  // spmd's select_n also broadcasts its cases.
  cases.push_back({"select_n", {}, {pred, any, any}, {{2, 3}, {2, 3}, {}}, {2}});
  cases.push_back({"select_n", {}, {pred, any, any}, {{2, 3}, {1, 3}, {2, 3}}, {1, 2}});
  return cases;
}

TEST(AdElementwiseTranspose, SatisfiesTheDotProductIdentity) {
  spmd_test::X64Scope x64;
  std::mt19937 rng(7);
  for (const TransposeCase& c : transpose_cases()) {
    SCOPED_TRACE(c.prim + " " + shapes_str(c.shapes));
    const sp::Primitive& p = sp::primitive(c.prim);
    // L(t) = f(known, t) - f(known, 0): the linear part (known addends drop out).
    std::vector<sp::Array> applied, offset;
    std::vector<sp::LinearInput> inputs;
    std::vector<sp::Array> t;
    for (size_t i = 0; i < c.shapes.size(); ++i) {
      sp::Array v = random_operand(rng, c.domains[i], c.shapes[i]).array;
      bool linear = std::find(c.linear.begin(), c.linear.end(), i) != c.linear.end();
      applied.push_back(v);
      offset.push_back(linear ? sp::zeros_like(v) : v);
      inputs.push_back({linear ? sp::Array() : v, sp::aval_of(v)});
      t.push_back(linear ? v : sp::Array());
    }
    sp::Array out = sp::bind1(p, applied, c.params);
    sp::Array linear_part = sp::subtract(out, sp::bind1(p, offset, c.params));
    std::vector<sp::Array> ct{random_operand(rng, Domain{out.dtype()}, out.shape()).array};
    std::vector<sp::Array> back = p.transpose(ct, inputs, c.params);
    ASSERT_EQ(back.size(), c.shapes.size());
    double lhs = host_dot(ct[0], linear_part), rhs = 0;
    for (size_t i = 0; i < back.size(); ++i) {
      if (!t[i].valid()) {
        EXPECT_FALSE(back[i].valid()) << "cotangent for known operand " << i;
        continue;
      }
      ASSERT_TRUE(back[i].valid()) << "no cotangent for linear operand " << i;
      EXPECT_EQ(sp::aval_of(back[i]).shape, sp::aval_of(t[i]).shape) << i;
      EXPECT_EQ(back[i].dtype(), t[i].dtype()) << i;
      rhs += host_dot(back[i], t[i]);
    }
    const double tol =
        out.dtype() == sp::float32 || t[c.linear[0]].dtype() == sp::float32 ? 1e-5 : 1e-12;
    EXPECT_NEAR(lhs, rhs, tol * (1 + std::abs(lhs)));
  }
}

TEST(AdElementwiseTranspose, RejectsOperandsThatCannotBeLinear) {
  sp::Array x = sp::array({1.0f, 2.0f});
  sp::AbstractValue a = sp::aval_of(x);
  std::vector<sp::Array> ct{x};
  std::vector<sp::LinearInput> both{{sp::Array(), a}, {sp::Array(), a}};
  std::vector<sp::LinearInput> denominator{{x, a}, {sp::Array(), a}};
  EXPECT_THROW(sp::primitive("mul").transpose(ct, both, {}), std::logic_error);
  EXPECT_THROW(sp::primitive("div").transpose(ct, denominator, {}), std::logic_error);
}

TEST(AdElementwiseTranspose, ConvertFromIntegerHasNoCotangent) {
  sp::Array x = sp::asarray(sp::array({1, 2}), sp::int32);
  std::vector<sp::Array> ct{sp::array({1.0f, 2.0f})};
  std::vector<sp::LinearInput> in{{sp::Array(), sp::aval_of(x)}};
  sp::Params to_f32{
      {"new_dtype", sp::float32}, {"weak_type", false}, {"sharding", sp::NoneParam{}}};
  EXPECT_FALSE(sp::primitive("convert_element_type").transpose(ct, in, to_f32)[0].valid());
}

// ---- the equations each rule stages, against JAX's
// ------------------------------------------------- Records the primitives bound while it is
// current, as `out = prim[params] in...` with JAX's variable names (a, b, ..., z, ba, ...), unnamed
// 0-d values printed as literals, and evaluates each one eagerly.
class Recorder : public sp::Trace {
 public:
  std::vector<sp::Array> process_primitive(const sp::Primitive& p,
                                           std::span<const sp::Array> inputs,
                                           const sp::Params& params) override {
    std::string ins;
    for (const sp::Array& x : inputs) ins.append(" ").append(name_of(x));
    std::vector<sp::Array> outs;
    {
      sp::CurrentTraceScope eager(nullptr);
      outs = sp::bind(p, inputs, params);
    }
    std::string line;
    for (const sp::Array& o : outs) line.append(line.empty() ? "" : " ").append(define(o));
    lines_.push_back(line.append(" = ").append(p.name).append(params_str(params)).append(ins));
    return outs;
  }
  const char* transformation_name() const override { return "record"; }

  std::string define(const sp::Array& x) {
    std::string name;
    for (size_t n = names_.size();; n /= 26) {
      name.insert(name.begin(), char('a' + n % 26));
      if (n < 26) break;
    }
    names_[x.impl().get()] = name;
    named_.push_back(x);  // keeps the address from being reused by a later value
    return name;
  }
  std::string name_of(const sp::Array& x) {
    auto it = names_.find(x.impl().get());
    if (it != names_.end()) return it->second;
    if (x.ndim() != 0) return "?";
    sp::CurrentTraceScope eager(nullptr);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", x.item<double>());
    return buf;
  }
  std::string text(const std::vector<sp::Array>& outputs) {
    std::string s;
    for (const std::string& line : lines_) s.append(s.empty() ? "" : "; ").append(line);
    s += " ->";
    for (const sp::Array& o : outputs) s.append(" ").append(name_of(o));
    return s;
  }

 private:
  static std::string params_str(const sp::Params& params) {
    std::string s;
    for (const char* key :
         {"y", "axes", "new_sizes", "shape", "new_dtype", "broadcast_dimensions"}) {
      if (!params.has(key)) continue;
      s.append(s.empty() ? "" : " ").append(key).append("=");
      const sp::ParamValue& v = params.at(key);
      if (auto* i = std::get_if<int64_t>(&v)) s += std::to_string(*i);
      if (auto* t = std::get_if<sp::DType>(&v)) s += sp::dtype_name(*t);
      if (auto* dims = std::get_if<std::vector<int64_t>>(&v)) {
        s += "(";
        for (size_t k = 0; k < dims->size(); ++k)
          s.append(k ? "," : "").append(std::to_string((*dims)[k]));
        s += ")";
      }
    }
    return s.empty() ? s : "[" + s + "]";
  }
  std::unordered_map<const void*, std::string> names_;
  std::vector<sp::Array> named_;
  std::vector<std::string> lines_;
};

struct Typed {
  sp::DType dtype;
  sp::Shape shape;
};
struct StagedCase {
  std::string prim;
  sp::Params params;
  std::vector<Typed> in;
  std::vector<size_t> active;  // jvp: operands with tangents; transpose: linear operands
  std::string jax;
};

// Values do not change what is staged; these keep every primitive in its domain.
sp::Array filled(const Typed& t) {
  if (sp::is_bool(t.dtype))
    return sp::array(std::vector<bool>(size_t(t.shape.size()), true), t.shape);
  double v = sp::is_integer(t.dtype) ? 1 : 0.5;
  return sp::asarray(sp::full(t.shape, sp::Array(v)), t.dtype);
}

std::string staged_jvp(const StagedCase& c) {
  std::vector<sp::Array> primals, tangents;
  for (const Typed& t : c.in) primals.push_back(filled(t));
  for (size_t i = 0; i < c.in.size(); ++i) tangents.emplace_back();
  for (size_t i : c.active) tangents[i] = filled(c.in[i]);
  auto rec = std::make_shared<Recorder>();
  for (const sp::Array& x : primals) rec->define(x);
  for (size_t i : c.active) rec->define(tangents[i]);
  sp::CurrentTraceScope scope(rec.get());
  sp::JvpResult r = sp::primitive(c.prim).jvp(primals, tangents, c.params);
  return rec->text({r.primals_out[0], r.tangents_out[0]});
}

std::string staged_transpose(const StagedCase& c) {
  std::vector<sp::Array> values;
  std::vector<sp::LinearInput> inputs;
  for (size_t i = 0; i < c.in.size(); ++i) {
    values.push_back(filled(c.in[i]));
    bool linear = std::find(c.active.begin(), c.active.end(), i) != c.active.end();
    inputs.push_back({linear ? sp::Array() : values[i], sp::aval_of(values[i])});
  }
  sp::Array out = sp::bind1(sp::primitive(c.prim), values, c.params);
  std::vector<sp::Array> ct{filled({out.dtype(), out.shape()})};
  auto rec = std::make_shared<Recorder>();
  for (const sp::LinearInput& in : inputs)
    if (!in.is_linear()) rec->define(in.value);
  rec->define(ct[0]);
  sp::CurrentTraceScope scope(rec.get());
  std::vector<sp::Array> back = sp::primitive(c.prim).transpose(ct, inputs, c.params);
  std::vector<sp::Array> linear_cts;
  for (size_t i : c.active) linear_cts.push_back(back[i]);
  return rec->text(linear_cts);
}

const sp::DType f32 = sp::float32, i32 = sp::int32, pred = sp::bool_;
const sp::Params kToBf16{
    {"new_dtype", sp::bfloat16}, {"weak_type", false}, {"sharding", sp::NoneParam{}}};

// Generated from JAX 0.10.2: make_jaxpr of jax.jvp (only the `active` operands differentiated,
// the others closed over) of the primitive on float32 values.
const std::vector<StagedCase> kJaxJvp = {
    {"exp", {}, {{f32, {3}}}, {0}, "c = exp a; d = mul b c -> c d"},
    {"exp2", {}, {{f32, {3}}}, {0}, "c = exp2 a; d = log 2; e = mul b c; f = mul d e -> c f"},
    {"expm1", {}, {{f32, {3}}}, {0}, "c = expm1 a; d = add c 1; e = mul b d -> c e"},
    {"log", {}, {{f32, {3}}}, {0}, "c = log a; d = div b a -> c d"},
    {"log1p", {}, {{f32, {3}}}, {0}, "c = log1p a; d = add a 1; e = div b d -> c e"},
    {"sin", {}, {{f32, {3}}}, {0}, "c = sin a; d = cos a; e = mul b d -> c e"},
    {"cos", {}, {{f32, {3}}}, {0}, "c = cos a; d = sin a; e = mul b d; f = neg e -> c f"},
    {"tan", {}, {{f32, {3}}}, {0}, "c = tan a; d = square c; e = add 1 d; f = mul b e -> c f"},
    {"asin",
     {},
     {{f32, {3}}},
     {0},
     "c = asin a; d = square a; e = sub 1 d; f = rsqrt e; g = mul b f -> c g"},
    {"acos",
     {},
     {{f32, {3}}},
     {0},
     "c = acos a; d = square a; e = sub 1 d; f = rsqrt e; g = neg f; h = mul b g -> c h"},
    {"atan", {}, {{f32, {3}}}, {0}, "c = atan a; d = square a; e = add 1 d; f = div b e -> c f"},
    {"sinh", {}, {{f32, {3}}}, {0}, "c = sinh a; d = cosh a; e = mul b d -> c e"},
    {"cosh", {}, {{f32, {3}}}, {0}, "c = cosh a; d = sinh a; e = mul b d -> c e"},
    {"tanh",
     {},
     {{f32, {3}}},
     {0},
     "c = tanh a; d = mul b c; e = add b d; f = sub 1 c; g = mul e f -> c g"},
    {"asinh",
     {},
     {{f32, {3}}},
     {0},
     "c = asinh a; d = square a; e = add d 1; f = rsqrt e; g = mul b f -> c g"},
    {"acosh",
     {},
     {{f32, {3}}},
     {0},
     "c = acosh a; d = square a; e = sub d 1; f = rsqrt e; g = mul b f -> c g"},
    {"atanh",
     {},
     {{f32, {3}}},
     {0},
     "c = atanh a; d = add 1 a; e = integer_pow[y=-1] d; f = sub 1 a; g = div b f; h = mul e g "
     "-> c h"},
    {"logistic",
     {},
     {{f32, {3}}},
     {0},
     "c = logistic a; d = sub 1 c; e = mul c d; f = mul b e -> c f"},
    {"erf",
     {},
     {{f32, {3}}},
     {0},
     "c = erf a; d = square a; e = neg d; f = exp e; g = mul b f; h = mul 1.12837923 g -> c h"},
    {"erfc",
     {},
     {{f32, {3}}},
     {0},
     "c = erfc a; d = square a; e = neg d; f = exp e; g = mul b f; h = mul -1.12837923 g -> c h"},
    {"erf_inv",
     {},
     {{f32, {3}}},
     {0},
     "c = erf_inv a; d = square c; e = exp d; f = mul b e; g = mul 0.886226952 f -> c g"},
    {"sqrt", {}, {{f32, {3}}}, {0}, "c = sqrt a; d = div 0.5 c; e = mul b d -> c e"},
    {"rsqrt",
     {},
     {{f32, {3}}},
     {0},
     "c = rsqrt a; d = div c a; e = mul -0.5 d; f = mul b e -> c f"},
    {"cbrt",
     {},
     {{f32, {3}}},
     {0},
     "c = cbrt a; d = integer_pow[y=-2] c; e = mul 0.333333343 d; f = mul b e -> c f"},
    {"neg", {}, {{f32, {3}}}, {0}, "c = neg a; d = neg b -> c d"},
    {"abs", {}, {{f32, {3}}}, {0}, "c = abs a; d = ge a 0; e = neg b; f = select_n d e b -> c f"},
    {"square", {}, {{f32, {3}}}, {0}, "c = square a; d = mul 2 a; e = mul b d -> c e"},
    {"abs", {}, {{f32, {}}}, {0}, "c = abs a; d = ge a 0; e = neg b; f = select_n d e b -> c f"},
    {"tanh",
     {},
     {{f32, {}}},
     {0},
     "c = tanh a; d = mul b c; e = add b d; f = sub 1 c; g = mul e f -> c g"},
    {"exp2", {}, {{f32, {}}}, {0}, "c = exp2 a; d = log 2; e = mul b c; f = mul d e -> c f"},
    {"integer_pow",
     sp::Params{{"y", int64_t(0)}},
     {{f32, {3}}},
     {0},
     "c = integer_pow[y=0] a; d = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 0 -> c d"},
    {"integer_pow",
     sp::Params{{"y", int64_t(1)}},
     {{f32, {3}}},
     {0},
     "c = integer_pow[y=1] a -> c b"},
    {"integer_pow",
     sp::Params{{"y", int64_t(2)}},
     {{f32, {3}}},
     {0},
     "c = integer_pow[y=2] a; d = mul 2 a; e = mul b d -> c e"},
    {"integer_pow",
     sp::Params{{"y", int64_t(3)}},
     {{f32, {3}}},
     {0},
     "c = integer_pow[y=3] a; d = integer_pow[y=2] a; e = mul 3 d; f = mul b e -> c f"},
    {"integer_pow",
     sp::Params{{"y", int64_t(-2)}},
     {{f32, {3}}},
     {0},
     "c = integer_pow[y=-2] a; d = integer_pow[y=-3] a; e = mul -2 d; f = mul b e -> c f"},
    {"integer_pow",
     sp::Params{{"y", int64_t(0)}},
     {{f32, {}}},
     {0},
     "c = integer_pow[y=0] a -> c 0"},
    {"copy", {}, {{f32, {3}}}, {0}, "c = copy a; d = copy b -> c d"},
    {"add", {}, {{f32, {3}}, {f32, {3}}}, {0, 1}, "e = add a b; f = add c d -> e f"},
    {"add", {}, {{f32, {3}}, {f32, {3}}}, {0}, "d = add a b -> d c"},
    {"add", {}, {{f32, {3}}, {f32, {3}}}, {1}, "d = add a b -> d c"},
    {"sub", {}, {{f32, {3}}, {f32, {3}}}, {0, 1}, "e = sub a b; f = sub c d -> e f"},
    {"sub", {}, {{f32, {3}}, {f32, {3}}}, {0}, "d = sub a b -> d c"},
    {"sub", {}, {{f32, {3}}, {f32, {3}}}, {1}, "d = sub a b; e = neg c -> d e"},
    {"mul",
     {},
     {{f32, {3}}, {f32, {3}}},
     {0, 1},
     "e = mul a b; f = mul c b; g = mul a d; h = add_any f g -> e h"},
    {"mul", {}, {{f32, {3}}, {f32, {3}}}, {0}, "d = mul a b; e = mul c b -> d e"},
    {"mul", {}, {{f32, {3}}, {f32, {3}}}, {1}, "d = mul a b; e = mul a c -> d e"},
    {"div",
     {},
     {{f32, {3}}, {f32, {3}}},
     {0, 1},
     "e = div a b; f = div c b; g = neg d; h = mul g a; i = integer_pow[y=-2] b; j = mul h i; "
     "k = add_any f j -> e k"},
    {"div", {}, {{f32, {3}}, {f32, {3}}}, {0}, "d = div a b; e = div c b -> d e"},
    {"div",
     {},
     {{f32, {3}}, {f32, {3}}},
     {1},
     "d = div a b; e = neg c; f = mul e a; g = integer_pow[y=-2] b; h = mul f g -> d h"},
    {"rem",
     {},
     {{f32, {3}}, {f32, {3}}},
     {0, 1},
     "e = rem a b; f = neg d; g = div a b; h = sign g; i = div a b; j = abs i; k = floor j; "
     "l = mul h k; m = mul f l; n = add_any c m -> e n"},
    {"rem", {}, {{f32, {3}}, {f32, {3}}}, {0}, "d = rem a b -> d c"},
    {"rem",
     {},
     {{f32, {3}}, {f32, {3}}},
     {1},
     "d = rem a b; e = neg c; f = div a b; g = sign f; h = div a b; i = abs h; j = floor i; "
     "k = mul g j; l = mul e k -> d l"},
    {"pow",
     {},
     {{f32, {3}}, {f32, {3}}},
     {0, 1},
     "e = pow a b; f = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 1; g = sub b f; "
     "h = pow a g; i = mul b h; j = mul c i; k = eq a 0; "
     "l = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 1; m = select_n k a l; n = log m; "
     "o = mul n e; p = mul d o; q = add_any j p -> e q"},
    {"pow",
     {},
     {{f32, {3}}, {f32, {3}}},
     {0},
     "d = pow a b; e = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 1; f = sub b e; "
     "g = pow a f; h = mul b g; i = mul c h -> d i"},
    {"pow",
     {},
     {{f32, {3}}, {f32, {3}}},
     {1},
     "d = pow a b; e = eq a 0; f = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 1; "
     "g = select_n e a f; h = log g; i = mul h d; j = mul c i -> d j"},
    {"max",
     {},
     {{f32, {3}}, {f32, {3}}},
     {0},
     "d = max a b; e = eq a d; f = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 1; "
     "g = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 0; h = select_n e g f; "
     "i = eq b d; j = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 2; "
     "k = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 1; l = select_n i k j; "
     "m = div h l; n = mul c m -> d n"},
    {"max",
     {},
     {{f32, {3}}, {f32, {3}}},
     {1},
     "d = max a b; e = eq b d; f = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 1; "
     "g = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 0; h = select_n e g f; "
     "i = eq a d; j = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 2; "
     "k = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 1; l = select_n i k j; "
     "m = div h l; n = mul c m -> d n"},
    {"min",
     {},
     {{f32, {3}}, {f32, {3}}},
     {0, 1},
     "e = min a b; f = eq a e; g = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 1; "
     "h = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 0; i = select_n f h g; "
     "j = eq b e; k = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 2; "
     "l = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 1; m = select_n j l k; "
     "n = div i m; o = mul c n; p = eq b e; "
     "q = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 1; "
     "r = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 0; s = select_n p r q; "
     "t = eq a e; u = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 2; "
     "v = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 1; w = select_n t v u; "
     "x = div s w; y = mul d x; z = add_any o y -> e z"},
    {"max",
     {},
     {{f32, {}}, {f32, {}}},
     {0, 1},
     "e = max a b; f = eq a e; g = select_n f 0 1; h = eq b e; i = select_n h 1 2; j = div g i; "
     "k = mul c j; l = eq b e; m = select_n l 0 1; n = eq a e; o = select_n n 1 2; p = div m o; "
     "q = mul d p; r = add_any k q -> e r"},
    {"atan2",
     {},
     {{f32, {3}}, {f32, {3}}},
     {0, 1},
     "e = atan2 a b; f = square a; g = square b; h = add f g; i = div b h; j = mul c i; "
     "k = neg a; l = square a; m = square b; n = add l m; o = div k n; p = mul d o; "
     "q = add_any j p -> e q"},
    {"add",
     {},
     {{f32, {2, 3}}, {f32, {1, 3}}},
     {1},
     "d = add a b; e = reshape[new_sizes=(3)] c; "
     "f = broadcast_in_dim[shape=(2,3) broadcast_dimensions=(1)] e -> d f"},
    {"add", {}, {{f32, {2, 3}}, {f32, {1, 3}}}, {0}, "d = add a b -> d c"},
    {"add",
     {},
     {{f32, {3}}, {f32, {}}},
     {1},
     "d = add a b; e = broadcast_in_dim[shape=(3) broadcast_dimensions=()] c -> d e"},
    {"add", {}, {{f32, {}}, {f32, {3}}}, {0, 1}, "e = add a b; f = add c d -> e f"},
    {"sub",
     {},
     {{f32, {2, 3}}, {f32, {1, 3}}},
     {1},
     "d = sub a b; e = neg c; f = reshape[new_sizes=(3)] e; "
     "g = broadcast_in_dim[shape=(2,3) broadcast_dimensions=(1)] f -> d g"},
    {"sub",
     {},
     {{f32, {3}}, {f32, {}}},
     {1},
     "d = sub a b; e = neg c; f = broadcast_in_dim[shape=(3) broadcast_dimensions=()] e -> d f"},
    {"mul",
     {},
     {{f32, {}}, {f32, {3}}},
     {0, 1},
     "e = mul a b; f = mul c b; g = mul a d; h = add_any f g -> e h"},
    {"div",
     {},
     {{f32, {3}}, {f32, {}}},
     {1},
     "d = div a b; e = neg c; f = mul e a; g = integer_pow[y=-2] b; h = mul f g -> d h"},
    {"rem",
     {},
     {{f32, {2, 3}}, {f32, {1, 3}}},
     {1},
     "d = rem a b; e = neg c; f = div a b; g = sign f; h = div a b; i = abs h; j = floor i; "
     "k = mul g j; l = mul e k -> d l"},
    {"rem",
     {},
     {{f32, {}}, {f32, {3}}},
     {0, 1},
     "e = rem a b; f = broadcast_in_dim[shape=(3) broadcast_dimensions=()] c; g = neg d; "
     "h = div a b; i = sign h; j = div a b; k = abs j; l = floor k; m = mul i l; n = mul g m; "
     "o = add_any f n -> e o"},
    {"atan2",
     {},
     {{f32, {3}}, {f32, {}}},
     {1},
     "d = atan2 a b; e = neg a; f = square a; g = square b; h = add f g; i = div e h; "
     "j = mul c i -> d j"},
    {"pow",
     {},
     {{f32, {}}, {f32, {3}}},
     {0, 1},
     "e = pow a b; f = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 1; g = sub b f; "
     "h = pow a g; i = mul b h; j = mul c i; k = eq a 0; l = select_n k a 1; m = log l; "
     "n = mul m e; o = mul d n; p = add_any j o -> e p"},
    {"clamp",
     {},
     {{f32, {3}}, {f32, {3}}, {f32, {3}}},
     {0, 1, 2},
     "g = clamp a b c; h = gt a b; i = lt a c; j = and h i; "
     "k = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 0; l = select_n j k d; "
     "m = gt b a; n = lt b c; o = and m n; "
     "p = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 0; q = select_n o p e; "
     "r = lt c b; s = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 0; "
     "t = select_n r s f; u = add_any l q; v = add_any u t -> g v"},
    {"clamp",
     {},
     {{f32, {}}, {f32, {3}}, {f32, {}}},
     {1},
     "e = clamp a b c; f = gt b a; g = lt b c; h = and f g; "
     "i = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 0; j = select_n h i d -> e j"},
    {"select_n",
     {},
     {{pred, {3}}, {f32, {3}}, {f32, {3}}},
     {1},
     "e = select_n a b c; f = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 0; "
     "g = select_n a d f -> e g"},
    {"select_n",
     {},
     {{pred, {3}}, {f32, {3}}, {f32, {3}}},
     {1, 2},
     "f = select_n a b c; g = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 0; "
     "h = select_n a d e -> f h"},
    {"select_n",
     {},
     {{i32, {3}}, {f32, {3}}, {f32, {3}}, {f32, {3}}},
     {1, 3},
     "g = select_n a b c d; h = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 0; "
     "i = select_n a e h f -> g i"},
    {"select_n",
     {},
     {{pred, {}}, {f32, {3}}, {f32, {3}}},
     {2},
     "e = select_n a b c; f = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 0; "
     "g = select_n a f d -> e g"},
    {"convert_element_type",
     kToBf16,
     {{f32, {3}}},
     {0},
     "c = convert_element_type[new_dtype=bfloat16] a; "
     "d = convert_element_type[new_dtype=bfloat16] b -> c d"},
    {"add_any", {}, {{f32, {3}}, {f32, {3}}}, {0, 1}, "e = add_any a b; f = add_any c d -> e f"},
    {"add_any",
     {},
     {{f32, {3}}, {f32, {3}}},
     {1},
     "d = add_any a b; e = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 0; "
     "f = add_any e c -> d f"},
};

// As kJaxJvp, for lax.pow with an integer exponent.
const std::vector<StagedCase> kJaxJvpIntegerExponent = {
    {"pow",
     {},
     {{f32, {3}}, {i32, {3}}},
     {0},
     "d = pow a b; e = convert_element_type[new_dtype=float32] b; f = eq e 0; "
     "g = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 0; h = eq e 0; "
     "i = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 1; j = select_n h e i; "
     "k = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 1; l = sub e k; m = pow a l; "
     "n = mul j m; o = select_n f n g; p = mul c o -> d p"},
    {"pow",
     {},
     {{f32, {}}, {i32, {3}}},
     {0},
     "d = pow a b; e = convert_element_type[new_dtype=float32] b; "
     "f = broadcast_in_dim[shape=(3) broadcast_dimensions=()] a; g = eq e 0; "
     "h = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 0; i = eq e 0; "
     "j = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 1; k = select_n i e j; "
     "l = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 1; m = sub e l; n = pow f m; "
     "o = mul k n; p = select_n g o h; q = mul c p -> d q"},
};

// Generated from JAX 0.10.2: make_jaxpr of jax.linear_transpose of the primitive in its
// `active` operands, the known operands and then the cotangent as the jaxpr's inputs.
const std::vector<StagedCase> kJaxTranspose = {
    {"add",
     {},
     {{f32, {2, 3}}, {f32, {1, 3}}},
     {0, 1},
     "b = reduce_sum[axes=(0)] a; c = reshape[new_sizes=(1,3)] b -> a c"},
    {"add", {}, {{f32, {3}}, {f32, {}}}, {0, 1}, "b = reduce_sum[axes=(0)] a -> a b"},
    {"add", {}, {{f32, {}}, {f32, {3}}}, {0, 1}, "b = reduce_sum[axes=(0)] a -> b a"},
    {"add", {}, {{f32, {3}}, {f32, {3}}}, {0}, " -> b"},
    {"sub",
     {},
     {{f32, {2, 3}}, {f32, {1, 3}}},
     {0, 1},
     "b = neg a; c = reduce_sum[axes=(0)] b; d = reshape[new_sizes=(1,3)] c -> a d"},
    {"sub", {}, {{f32, {3}}, {f32, {}}}, {0, 1}, "b = neg a; c = reduce_sum[axes=(0)] b -> a c"},
    {"sub", {}, {{f32, {}}, {f32, {3}}}, {0, 1}, "b = reduce_sum[axes=(0)] a; c = neg a -> b c"},
    {"sub", {}, {{f32, {3}}, {f32, {3}}}, {0}, "c = neg b -> b"},
    {"sub", {}, {{f32, {3}}, {f32, {3}}}, {1}, "c = neg b -> c"},
    {"neg", {}, {{f32, {3}}}, {0}, "b = neg a -> b"},
    {"copy", {}, {{f32, {3}}}, {0}, "b = copy a -> b"},
    {"mul",
     {},
     {{f32, {1, 3}}, {f32, {2, 3}}},
     {0},
     "c = mul b a; d = reduce_sum[axes=(0)] c; e = reshape[new_sizes=(1,3)] d -> e"},
    {"mul", {}, {{f32, {3}}, {f32, {}}}, {1}, "c = mul a b; d = reduce_sum[axes=(0)] c -> d"},
    {"mul", {}, {{f32, {}}, {f32, {3}}}, {0}, "c = mul b a; d = reduce_sum[axes=(0)] c -> d"},
    {"mul", {}, {{f32, {3}}, {f32, {3}}}, {1}, "c = mul a b -> c"},
    {"div", {}, {{f32, {}}, {f32, {3}}}, {0}, "c = div b a; d = reduce_sum[axes=(0)] c -> d"},
    {"div", {}, {{f32, {3}}, {f32, {3}}}, {0}, "c = div b a -> c"},
    {"div",
     {},
     {{f32, {1, 3}}, {f32, {2, 3}}},
     {0},
     "c = div b a; d = reduce_sum[axes=(0)] c; e = reshape[new_sizes=(1,3)] d -> e"},
    {"convert_element_type",
     kToBf16,
     {{f32, {3}}},
     {0},
     "b = convert_element_type[new_dtype=float32] a -> b"},
    {"select_n",
     {},
     {{pred, {3}}, {f32, {3}}, {f32, {3}}},
     {1, 2},
     "c = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 0; d = select_n a b c; "
     "e = select_n a c b -> d e"},
    {"select_n",
     {},
     {{pred, {3}}, {f32, {3}}, {f32, {3}}},
     {2},
     "d = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 0; e = select_n a d c -> e"},
    {"select_n",
     {},
     {{i32, {3}}, {f32, {3}}, {f32, {3}}, {f32, {3}}},
     {1, 3},
     "d = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 0; e = eq a 0; "
     "f = select_n e d c; g = eq a 2; h = select_n g d c -> f h"},
    {"select_n",
     {},
     {{pred, {}}, {f32, {3}}, {f32, {3}}},
     {1},
     "d = broadcast_in_dim[shape=(3) broadcast_dimensions=()] 0; e = select_n a c d -> e"},
    {"add_any", {}, {{f32, {3}}, {f32, {3}}}, {0, 1}, " -> a a"},
};

std::string describe(const StagedCase& c) {
  std::string s = c.prim + " on";
  for (const Typed& t : c.in) s.append(" ").append(sp::dtype_name(t.dtype)).append(t.shape.str());
  s += ", operands";
  for (size_t i : c.active) s.append(" ").append(std::to_string(i));
  return s;
}

TEST(AdElementwiseStaging, JvpRulesStageJaxsEquations) {
  for (const StagedCase& c : kJaxJvp) EXPECT_EQ(staged_jvp(c), c.jax) << describe(c);
}

TEST(AdElementwiseStaging, PowJvpWithIntegerExponentStagesJaxsEquations) {
  ASSERT_TRUE(pow_takes_integer_exponents());
  for (const StagedCase& c : kJaxJvpIntegerExponent) EXPECT_EQ(staged_jvp(c), c.jax) << describe(c);
}

// A 0-d exponent, staged by make_jaxpr: the harness above would hand pow a concrete scalar,
// which converts eagerly (a C++ number's conversion), so this case is traced as JAX traces it.
TEST(AdElementwiseStaging, PowJvpWithScalarIntegerExponentPrintsJaxsJaxpr) {
  // jax.make_jaxpr(lambda a, b: jax.jvp(lambda u: lax.pow(u, b), (a,), (a,)))(f32[3], i32[]).
  auto f = [](const sp::Array& x, const sp::Array& y) {
    return sp::jvp(
        [&](const sp::Array& u) {
          return sp::bind1(sp::primitive("pow"), {u, y});
        },
        x, x);
  };
  EXPECT_EQ(sp::make_jaxpr(f)(sp::zeros({3}), sp::zeros({}, sp::int32)).str(),
            R"({ lambda ; a:f32[3] b:i32[]. let
    c:f32[3] = pow a b
    d:f32[] = convert_element_type[new_dtype=float32 weak_type=False] b
    e:f32[3] = broadcast_in_dim d
    f:bool[3] = eq e 0.0:f32[]
    g:f32[3] = broadcast_in_dim 0.0:f32[]
    h:bool[3] = eq e 0.0:f32[]
    i:f32[3] = broadcast_in_dim 1.0:f32[]
    j:f32[3] = select_n h e i
    k:f32[3] = broadcast_in_dim 1.0:f32[]
    l:f32[3] = sub e k
    m:f32[3] = pow a l
    n:f32[3] = mul j m
    o:f32[3] = select_n f n g
    p:f32[3] = mul a o
  in (c, p) })");
  // d/dx x^3 · x = 3x³, and 0 where the exponent is 0 (JAX: [24. 81. 0.] and [0. 0. 0.]).
  sp::Array x = sp::array(std::vector<float>{2, 3, 0}, sp::Shape{3});
  EXPECT_EQ(sp::jit(f)(x, sp::full({}, 3, sp::int32)).second.to_vector<float>(),
            (std::vector<float>{24, 81, 0}));
  EXPECT_EQ(sp::jit(f)(x, sp::full({}, 0, sp::int32)).second.to_vector<float>(),
            (std::vector<float>{0, 0, 0}));
}

TEST(AdElementwiseStaging, TransposeRulesStageJaxsEquations) {
  for (const StagedCase& c : kJaxTranspose) EXPECT_EQ(staged_transpose(c), c.jax) << describe(c);
}

}  // namespace

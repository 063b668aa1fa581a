// jnp-level elementwise functions and operators: promotion and rank broadcasting as jax.numpy
// does, then the elementwise primitives. Composite functions follow JAX's formulas so values
// and (later) jaxprs agree.
#include <spmd/lax.h>
#include <spmd/ops.h>

#include "ops/op_util.h"

#include <spmd/transforms.h>

#include "core/trace.h"

#include <array>

#include <cmath>
#include <limits>

namespace spmd {
namespace {

using ops::constant_like;

std::vector<Array> promote_args(const char* api, const Array& x, const Array& y) {
  return ops::promote_shapes(api, ops::promote_dtypes({x, y}));
}
std::vector<Array> promote_args_inexact(const char* api, const Array& x, const Array& y) {
  return ops::promote_shapes(api, ops::promote_dtypes_inexact({x, y}));
}
Array binary(const char* prim, const char* api, const Array& x, const Array& y) {
  auto a = promote_args(api, x, y);
  return ops::apply(prim, {a[0], a[1]});
}
Array binary_inexact(const char* prim, const char* api, const Array& x, const Array& y) {
  auto a = promote_args_inexact(api, x, y);
  return ops::apply(prim, {a[0], a[1]});
}
// An integer divisor with its zeros replaced by ones: jnp's remainder and fmod give 0 for an
// integer divided by 0 (NumPy's answer), where the rem primitive gives the dividend.
Array nonzero_integer_divisor(const Array& q) {
  if (!is_integer(q.dtype()) || is_bool(q.dtype())) return q;
  return where(equal(q, constant_like(q, 0)), constant_like(q, 1), q);
}

Array unary_inexact(const char* prim, const Array& x) {
  return ops::apply(prim, {ops::promote_inexact(x)});
}
bool is_int_like(const Array& x) {
  return !is_floating(x.dtype());
}
void reject_bool(const char* api, const Array& x) {
  if (is_bool(x.dtype()))
    throw TypeError(ops::prefix(api) + "not supported for boolean arrays; use logical_" +
                    "not/logical_xor or convert with astype");
}

}  // namespace

// ---- unary -----------------------------------------------------------------------------------
Array negative(const Array& x) {
  reject_bool("negative", x);
  return ops::apply("neg", {x});
}
Array positive(const Array& x) {
  return x;
}
Array abs(const Array& x) {
  if (is_bool(x.dtype()) || is_unsigned_integer(x.dtype())) return x;
  return ops::apply("abs", {x});
}
Array sign(const Array& x) {
  if (is_bool(x.dtype())) throw TypeError("[sign] does not accept dtype bool");
  return ops::apply("sign", {x});
}
Array floor(const Array& x) {
  return is_int_like(x) ? x : ops::apply("floor", {x});
}
Array ceil(const Array& x) {
  return is_int_like(x) ? x : ops::apply("ceil", {x});
}
Array round(const Array& x) {
  return is_int_like(x) ? x : ops::apply("round", {x}, Params{{"rounding_method", int64_t(1)}});
}
Array trunc(const Array& x) {
  if (is_int_like(x)) return x;
  return where(less(x, constant_like(x, 0)), ceil(x), floor(x));
}
Array sqrt(const Array& x) {
  return unary_inexact("sqrt", x);
}
Array rsqrt(const Array& x) {
  return unary_inexact("rsqrt", x);
}
Array cbrt(const Array& x) {
  return unary_inexact("cbrt", x);
}
Array exp(const Array& x) {
  return unary_inexact("exp", x);
}
Array exp2(const Array& x) {
  return unary_inexact("exp2", x);
}
Array expm1(const Array& x) {
  return unary_inexact("expm1", x);
}
Array log(const Array& x) {
  return unary_inexact("log", x);
}
Array log1p(const Array& x) {
  return unary_inexact("log1p", x);
}
Array log2(const Array& x) {
  Array f = ops::promote_inexact(x);
  return ops::apply("div", {ops::apply("log", {f}), ops::apply("log", {constant_like(f, 2)})});
}
Array log10(const Array& x) {
  Array f = ops::promote_inexact(x);
  return ops::apply("div", {ops::apply("log", {f}), ops::apply("log", {constant_like(f, 10)})});
}
Array sin(const Array& x) {
  return unary_inexact("sin", x);
}
Array cos(const Array& x) {
  return unary_inexact("cos", x);
}
Array tan(const Array& x) {
  return unary_inexact("tan", x);
}
Array arcsin(const Array& x) {
  return unary_inexact("asin", x);
}
Array arccos(const Array& x) {
  return unary_inexact("acos", x);
}
Array arctan(const Array& x) {
  return unary_inexact("atan", x);
}
Array sinh(const Array& x) {
  return unary_inexact("sinh", x);
}
Array cosh(const Array& x) {
  return unary_inexact("cosh", x);
}
Array tanh(const Array& x) {
  return unary_inexact("tanh", x);
}
Array arcsinh(const Array& x) {
  return unary_inexact("asinh", x);
}
Array arccosh(const Array& x) {
  return unary_inexact("acosh", x);
}
Array arctanh(const Array& x) {
  return unary_inexact("atanh", x);
}
Array square(const Array& x) {
  reject_bool("square", x);
  return ops::apply("square", {x});
}
Array reciprocal(const Array& x) {
  return ops::apply("integer_pow", {ops::promote_inexact(x)}, Params{{"y", int64_t(-1)}});
}
Array isnan(const Array& x) {
  if (is_int_like(x)) return zeros_like(x, bool_);
  return ops::apply("ne", {x, x});
}
Array isinf(const Array& x) {
  if (is_int_like(x)) return zeros_like(x, bool_);
  return ops::apply("eq", {ops::apply("abs", {x}), constant_like(x, INFINITY)});
}
Array isfinite(const Array& x) {
  if (is_int_like(x)) return ones_like(x, bool_);
  return ops::apply("is_finite", {x});
}
Array signbit(const Array& x) {
  DType t = x.dtype();
  if (is_bool(t)) return zeros_like(x, bool_);
  if (is_integer(t)) return less(x, constant_like(x, 0));
  DType bits_t = itemsize(t) == 2 ? int16 : itemsize(t) == 4 ? int32 : int64;
  Array bits = lax::bitcast_convert_type(x, bits_t);
  return lax::shift_right_logical(bits, ops::scalar(itemsize(t) * 8 - 1, bits_t)).astype(bool_);
}
Array logical_not(const Array& x) {
  return ops::apply("not", {ops::convert(x, bool_)});
}
Array bitwise_not(const Array& x) {
  ops::require_integer_or_bool("bitwise_not", x);
  return ops::apply("not", {x});
}
Array invert(const Array& x) {
  return bitwise_not(x);
}
Array sigmoid(const Array& x) {
  return unary_inexact("logistic", x);
}
Array logistic(const Array& x) {
  return sigmoid(x);
}
Array erf(const Array& x) {
  return unary_inexact("erf", x);
}
Array erfc(const Array& x) {
  return unary_inexact("erfc", x);
}
Array erf_inv(const Array& x) {
  return unary_inexact("erf_inv", x);
}
Array relu(const Array& x) {
  std::array<Array, 1> args{x};
  if (!innermost_trace(args)) return maximum(x, 0);
  // Traced, relu is jax.nn.relu: a custom_jvp function around a call named relu, whose jvp
  // passes the tangent where x > 0 (max's own rule would split it at ties).
  static const auto relu_fn =
      custom_jvp(jit([](const Array& v) { return maximum(v, 0); }, {.name = "relu"}),
                 [](const std::tuple<Array>& primals, const std::tuple<Array>& tangents) {
                   const Array& v = std::get<0>(primals);
                   const Array& g = std::get<0>(tangents);
                   // One statement per operation: C++ leaves the order of argument evaluation open.
                   Array out = relu(v);
                   Array positive = greater(v, 0);
                   Array zeros = full_like(g, 0);
                   return std::make_pair(out, lax::select_n(positive, {zeros, g}));
                 },
                 {.name = "relu", .jvp_name = "jvp"});
  return relu_fn(x);
}

// ---- binary ----------------------------------------------------------------------------------
Array add(const Array& x, const Array& y) {
  auto a = promote_args("add", x, y);
  return ops::apply(is_bool(a[0].dtype()) ? "or" : "add", {a[0], a[1]});
}
Array subtract(const Array& x, const Array& y) {
  auto a = promote_args("subtract", x, y);
  reject_bool("subtract", a[0]);
  return ops::apply("sub", {a[0], a[1]});
}
Array multiply(const Array& x, const Array& y) {
  auto a = promote_args("multiply", x, y);
  return ops::apply(is_bool(a[0].dtype()) ? "and" : "mul", {a[0], a[1]});
}
Array divide(const Array& x, const Array& y) {
  return binary_inexact("div", "divide", x, y);
}
Array true_divide(const Array& x, const Array& y) {
  return divide(x, y);
}

Array floor_divide(const Array& x, const Array& y) {
  auto a = promote_args("floor_divide", x, y);
  Array p = a[0], q = a[1];
  if (is_bool(p.dtype())) throw TypeError("[floor_divide] not supported for boolean arrays");
  if (is_unsigned_integer(p.dtype())) return ops::apply("div", {p, q});
  if (is_signed_integer(p.dtype())) {
    // Round toward negative infinity: adjust truncating division where signs differ.
    Array div = ops::apply("div", {p, q});
    Array zero = constant_like(p, 0);
    Array select = logical_and(not_equal(ops::apply("sign", {p}), ops::apply("sign", {q})),
                               not_equal(ops::apply("rem", {p, q}), zero));
    return where(select, subtract(div, constant_like(div, 1)), div);
  }
  // Floats: Python's divmod formula, as jnp's _float_divmod (a zero divisor divides the dividend
  // itself, so x // 0 is ±inf, and 0 // 0 nan).
  Array mod = ops::apply("rem", {p, q});
  Array corrected = where(equal(q, constant_like(q, 0)), p, ops::apply("sub", {p, mod}));
  Array div = ops::apply("div", {corrected, q});
  Array zero = constant_like(mod, 0);
  Array ind = logical_and(not_equal(mod, zero),
                          not_equal(ops::apply("sign", {q}), ops::apply("sign", {mod})));
  div = where(ind, ops::apply("sub", {div, constant_like(div, 1)}), div);
  return ops::apply("round", {div}, Params{{"rounding_method", int64_t(0)}});
}

Array remainder(const Array& x, const Array& y) {
  auto a = promote_args("remainder", x, y);
  Array p = a[0], q = a[1];
  if (is_bool(p.dtype())) throw TypeError("[remainder] not supported for boolean arrays");
  q = nonzero_integer_divisor(q);
  Array trunc_mod = ops::apply("rem", {p, q});
  Array zero = constant_like(trunc_mod, 0);
  Array do_plus = logical_and(not_equal(less(trunc_mod, zero), less(q, constant_like(q, 0))),
                              not_equal(trunc_mod, zero));
  return where(do_plus, ops::apply("add", {trunc_mod, q}), trunc_mod);
}
Array mod(const Array& x, const Array& y) {
  return remainder(x, y);
}
Array fmod(const Array& x, const Array& y) {
  auto a = promote_args("fmod", x, y);
  return ops::apply("rem", {a[0], nonzero_integer_divisor(a[1])});
}

namespace {
// jnp's _pow_int_int: binary exponentiation over the exponent's low 6 bits (more would overflow
// any base above 1), each step a select, so a negative exponent gives what its bits give.
Array pow_int_int(Array x, Array y) {
  const Array zero = ops::scalar(0, y.dtype()), one = ops::scalar(1, y.dtype());
  const Array base_zero = lax::eq(x, zero);
  const Array exponent_nonzero = lax::ne(y, zero);
  Array acc = where(lax::bitwise_and(base_zero, exponent_nonzero), zero, one);
  for (int bit = 0; bit < 6; ++bit) {
    const Array odd = lax::bitwise_and(y, one);
    const Array times = lax::mul(acc, x);
    acc = where(odd, times, acc);
    x = lax::mul(x, x);
    y = lax::shift_right_logical(y, one);
  }
  return acc;
}
}  // namespace

// jnp.power's cases: a concrete integer scalar exponent is a static integer_pow (the base only
// made numeric); integer or bool operands take binary exponentiation; a floating base with an
// integer exponent is lax.pow without promotion (its derivative at a zero base stays finite);
// otherwise both promote first.
Array power(const Array& x, const Array& y) {
  if (y.ndim() == 0 && (is_integer(y.dtype()) || is_bool(y.dtype())) && is_concrete(y)) {
    const int64_t e = y.item<int64_t>();
    if (e < std::numeric_limits<int>::min() || e > std::numeric_limits<int>::max())
      throw ValueError("[power] a concrete integer exponent must fit 32 bits, got " +
                       std::to_string(e));
    return integer_pow(is_bool(x.dtype()) ? ops::convert(x, int32) : x, int(e));
  }
  const std::vector<Array> shaped = ops::promote_shapes("power", {x, y});
  // Promoted as jnp's promote_args_numeric (bools to int32) before the case is known, so traced
  // programs hold the same equations as JAX's (an unused conversion in the third case).
  std::vector<Array> a = ops::promote_dtypes(shaped);
  if (is_bool(a[0].dtype())) a = {ops::convert(a[0], int32), ops::convert(a[1], int32)};
  if (is_integer(a[0].dtype())) return pow_int_int(a[0], a[1]);
  if (is_floating(x.dtype()) && is_integer(y.dtype()) && !is_bool(y.dtype()))
    return ops::apply("pow", {shaped[0], shaped[1]});
  return ops::apply("pow", {a[0], a[1]});
}
Array integer_pow(const Array& x, int y) {
  return lax::integer_pow(x, y);
}
Array maximum(const Array& x, const Array& y) {
  return binary("max", "maximum", x, y);
}
Array minimum(const Array& x, const Array& y) {
  return binary("min", "minimum", x, y);
}
Array arctan2(const Array& y, const Array& x) {
  return binary_inexact("atan2", "arctan2", y, x);
}

Array hypot(const Array& x, const Array& y) {
  auto a = promote_args_inexact("hypot", x, y);
  Array p = abs(a[0]), q = abs(a[1]);
  Array inf = constant_like(p, INFINITY);
  Array idx_inf = logical_or(equal(p, inf), equal(q, inf));
  Array hi = maximum(p, q), lo = minimum(p, q);
  Array zero = constant_like(hi, 0);
  Array safe = where(equal(hi, zero), ones_like(hi), hi);
  Array r = where(equal(hi, zero), hi,
                  multiply(hi, sqrt(add(constant_like(hi, 1), square(divide(lo, safe))))));
  return where(idx_inf, inf, r);
}

Array logaddexp(const Array& x, const Array& y) {
  auto a = promote_args_inexact("logaddexp", x, y);
  Array amax = maximum(a[0], a[1]);
  Array delta = subtract(a[0], a[1]);
  return where(isnan(delta), add(a[0], a[1]), add(amax, log1p(exp(negative(abs(delta))))));
}
Array nextafter(const Array& x, const Array& y) {
  return binary_inexact("nextafter", "nextafter", x, y);
}

Array equal(const Array& x, const Array& y) {
  return binary("eq", "equal", x, y);
}
Array not_equal(const Array& x, const Array& y) {
  return binary("ne", "not_equal", x, y);
}
Array less(const Array& x, const Array& y) {
  return binary("lt", "less", x, y);
}
Array less_equal(const Array& x, const Array& y) {
  return binary("le", "less_equal", x, y);
}
Array greater(const Array& x, const Array& y) {
  return binary("gt", "greater", x, y);
}
Array greater_equal(const Array& x, const Array& y) {
  return binary("ge", "greater_equal", x, y);
}

namespace {
Array logical(const char* prim, const char* api, const Array& x, const Array& y) {
  auto a = ops::promote_shapes(api, {ops::convert(x, bool_), ops::convert(y, bool_)});
  return ops::apply(prim, {a[0], a[1]});
}
Array bitwise(const char* prim, const char* api, const Array& x, const Array& y) {
  auto a = promote_args(api, x, y);
  ops::require_integer_or_bool(api, a[0]);
  return ops::apply(prim, {a[0], a[1]});
}
}  // namespace

Array logical_and(const Array& x, const Array& y) {
  return logical("and", "logical_and", x, y);
}
Array logical_or(const Array& x, const Array& y) {
  return logical("or", "logical_or", x, y);
}
Array logical_xor(const Array& x, const Array& y) {
  return logical("xor", "logical_xor", x, y);
}
Array bitwise_and(const Array& x, const Array& y) {
  return bitwise("and", "bitwise_and", x, y);
}
Array bitwise_or(const Array& x, const Array& y) {
  return bitwise("or", "bitwise_or", x, y);
}
Array bitwise_xor(const Array& x, const Array& y) {
  return bitwise("xor", "bitwise_xor", x, y);
}

Array left_shift(const Array& x, const Array& y) {
  auto a = promote_args("left_shift", x, y);
  if (!is_integer(a[0].dtype()))
    throw TypeError("[left_shift] expected integer arrays, got " +
                    std::string(dtype_name(a[0].dtype())));
  return ops::apply("shift_left", {a[0], a[1]});
}
Array right_shift(const Array& x, const Array& y) {
  auto a = promote_args("right_shift", x, y);
  DType t = a[0].dtype();
  if (!is_integer(t))
    throw TypeError("[right_shift] expected integer arrays, got " + std::string(dtype_name(t)));
  return ops::apply(is_signed_integer(t) ? "shift_right_arithmetic" : "shift_right_logical",
                    {a[0], a[1]});
}

namespace {
// jnp's _where: a non-bool condition compared with zero; a scalar condition selects without
// being broadcast; an empty result is x's.
Array where_impl(const Array& condition, const Array& x, const Array& y) {
  const Array c =
      is_bool(condition.dtype())
          ? condition
          : lax::ne(condition, ops::scalar(0, condition.dtype(), condition.weak_type()));
  auto v = ops::promote_dtypes({x, y});
  std::vector<Array> b = c.ndim() == 0 ? ops::broadcast_arrays("where", {v[0], v[1]})
                                       : ops::broadcast_arrays("where", {c, v[0], v[1]});
  if (c.ndim() == 0) b.insert(b.begin(), c);
  if (b[1].size() == 0) return b[1];
  return ops::apply("select_n", {b[0], b[2], b[1]});
}
}  // namespace

Array where(const Array& condition, const Array& x, const Array& y) {
  // Traced, where is a call named _where, as jnp.where is a jitted function in JAX.
  std::array<Array, 3> args{condition, x, y};
  if (innermost_trace(args)) {
    static const auto where_jit = jit(where_impl, {.name = "_where"});
    return where_jit(condition, x, y);
  }
  return where_impl(condition, x, y);
}

Array clip(const Array& x, const Array& lo, const Array& hi) {
  return minimum(maximum(x, lo), hi);
}

Array astype(const Array& x, DType dtype) {
  return ops::convert(x, canonicalize_dtype(dtype));
}
Array stop_gradient(const Array& x) {
  return lax::stop_gradient(x);
}

// ---- operators -------------------------------------------------------------------------------
Array operator+(const Array& x, const Array& y) {
  return add(x, y);
}
Array operator-(const Array& x, const Array& y) {
  return subtract(x, y);
}
Array operator*(const Array& x, const Array& y) {
  return multiply(x, y);
}
Array operator/(const Array& x, const Array& y) {
  return divide(x, y);
}
Array operator%(const Array& x, const Array& y) {
  return remainder(x, y);
}
Array operator-(const Array& x) {
  return negative(x);
}
Array operator+(const Array& x) {
  return positive(x);
}
Array operator==(const Array& x, const Array& y) {
  return equal(x, y);
}
Array operator!=(const Array& x, const Array& y) {
  return not_equal(x, y);
}
Array operator<(const Array& x, const Array& y) {
  return less(x, y);
}
Array operator<=(const Array& x, const Array& y) {
  return less_equal(x, y);
}
Array operator>(const Array& x, const Array& y) {
  return greater(x, y);
}
Array operator>=(const Array& x, const Array& y) {
  return greater_equal(x, y);
}
Array operator&(const Array& x, const Array& y) {
  return bitwise_and(x, y);
}
Array operator|(const Array& x, const Array& y) {
  return bitwise_or(x, y);
}
Array operator^(const Array& x, const Array& y) {
  return bitwise_xor(x, y);
}
Array operator~(const Array& x) {
  return bitwise_not(x);
}
Array operator!(const Array& x) {
  return logical_not(x);
}
Array operator<<(const Array& x, const Array& y) {
  return left_shift(x, y);
}
Array operator>>(const Array& x, const Array& y) {
  return right_shift(x, y);
}

// ---- lax elementwise ---------------------------------------------------------------------------
namespace lax {

Array convert_element_type(const Array& x, DType new_dtype) {
  return ops::convert(x, canonicalize_dtype(new_dtype));
}
Array bitcast_convert_type(const Array& x, DType new_dtype) {
  return ops::apply("bitcast_convert_type", {x},
                    Params{{"new_dtype", canonicalize_dtype(new_dtype)}});
}
Array iota(DType dtype, int64_t size) {
  return broadcasted_iota(dtype, Shape{size}, 0);
}
Array broadcasted_iota(DType dtype, const Shape& shape, int dimension) {
  for (int64_t d : shape)
    if (d < 0) throw ValueError("[iota] negative dimensions are not allowed, got " + shape.str());
  return bind1(primitive("iota"), std::span<const Array>{},
               Params{{"dtype", canonicalize_dtype(dtype)},
                      {"shape", shape.dims()},
                      {"dimension", int64_t(dimension)},
                      {"sharding", NoneParam{}}});
}
Array select_n(const Array& which, const std::vector<Array>& cases) {
  std::vector<Array> in{which};
  in.insert(in.end(), cases.begin(), cases.end());
  return ops::apply("select_n", in);
}
Array select(const Array& pred, const Array& on_true, const Array& on_false) {
  return select_n(pred, {on_false, on_true});
}
Array clamp(const Array& lo, const Array& x, const Array& hi) {
  return ops::apply("clamp", {lo, x, hi});
}
Array integer_pow(const Array& x, int y) {
  if (is_bool(x.dtype())) throw TypeError("[integer_pow] not supported for boolean arrays");
  return ops::apply("integer_pow", {x}, Params{{"y", int64_t(y)}});
}
Array shift_left(const Array& x, const Array& y) {
  return ops::apply("shift_left", {x, y});
}
Array shift_right_logical(const Array& x, const Array& y) {
  return ops::apply("shift_right_logical", {x, y});
}
Array shift_right_arithmetic(const Array& x, const Array& y) {
  return ops::apply("shift_right_arithmetic", {x, y});
}
Array add(const Array& x, const Array& y) {
  return ops::apply("add", {x, y});
}
Array sub(const Array& x, const Array& y) {
  return ops::apply("sub", {x, y});
}
Array mul(const Array& x, const Array& y) {
  return ops::apply("mul", {x, y});
}
Array max(const Array& x, const Array& y) {
  return ops::apply("max", {x, y});
}
Array min(const Array& x, const Array& y) {
  return ops::apply("min", {x, y});
}
Array eq(const Array& x, const Array& y) {
  return ops::apply("eq", {x, y});
}
Array ne(const Array& x, const Array& y) {
  return ops::apply("ne", {x, y});
}
Array bitwise_or(const Array& x, const Array& y) {
  return ops::apply("or", {x, y});
}
Array rem(const Array& x, const Array& y) {
  return ops::apply("rem", {x, y});
}
Array div(const Array& x, const Array& y) {
  return ops::apply("div", {x, y});
}
Array pow(const Array& x, const Array& y) {
  return ops::apply("pow", {x, y});
}
Array ge(const Array& x, const Array& y) {
  return ops::apply("ge", {x, y});
}
Array gt(const Array& x, const Array& y) {
  return ops::apply("gt", {x, y});
}
Array lt(const Array& x, const Array& y) {
  return ops::apply("lt", {x, y});
}
Array bitwise_and(const Array& x, const Array& y) {
  return ops::apply("and", {x, y});
}
Array neg(const Array& x) {
  return ops::apply("neg", {x});
}
Array sign(const Array& x) {
  return ops::apply("sign", {x});
}
Array abs(const Array& x) {
  return ops::apply("abs", {x});
}
Array floor(const Array& x) {
  return ops::apply("floor", {x});
}
Array square(const Array& x) {
  return ops::apply("square", {x});
}
Array exp(const Array& x) {
  return ops::apply("exp", {x});
}
Array log(const Array& x) {
  return ops::apply("log", {x});
}
Array sin(const Array& x) {
  return ops::apply("sin", {x});
}
Array cos(const Array& x) {
  return ops::apply("cos", {x});
}
Array sinh(const Array& x) {
  return ops::apply("sinh", {x});
}
Array cosh(const Array& x) {
  return ops::apply("cosh", {x});
}
Array rsqrt(const Array& x) {
  return ops::apply("rsqrt", {x});
}
Array population_count(const Array& x) {
  return ops::apply("population_count", {x});
}
Array clz(const Array& x) {
  return ops::apply("clz", {x});
}
Array stop_gradient(const Array& x) {
  return ops::apply("stop_gradient", {x});
}
Array reduce_precision(const Array& x, int exponent_bits, int mantissa_bits) {
  return ops::apply(
      "reduce_precision", {x},
      Params{{"exponent_bits", int64_t(exponent_bits)}, {"mantissa_bits", int64_t(mantissa_bits)}});
}

}  // namespace lax
}  // namespace spmd

// Primitive family: elementwise arithmetic, comparisons, bitwise ops, rounding, select, clamp,
// type conversion and iota, with add_any and empty2, which the transformations emit. Binary
// primitives accept 0-d operands and size-1 dims (as JAX's jaxprs show: `add a 1.0:f32[]`),
// broadcast by the kernel.
//
// Each section defines a group of primitives with their rules. The jvp and transpose rules are
// written as JAX writes them (jax/_src/lax/lax.py), the batching rules as JAX's `_*_batch_rule`s,
// so that transformed programs print as JAX's do; primitives without a batching rule batch by
// their kind (prims/kinds.cpp). Each operation of a rule is its own statement: C++ leaves the
// order of argument evaluation open, and staged equations must come in JAX's order.
#include "prims/families.h"
#include "prims/primitive.h"
#include "prims/rule_util.h"
#include "sharding/type_sharding.h"

#include <spmd/error.h>
#include <spmd/lax.h>

#include "backends/cpu/convert.h"
#include "backends/cpu/elementwise.h"
#include "ops/op_util.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace spmd {
namespace {

using cpu::BinaryOp;
using cpu::UnaryOp;
using lax::add;
using lax::div;
using lax::eq;
using lax::mul;
using lax::neg;
using lax::select;
using lax::sub;

std::string prefix(const std::string& name) {
  return "[" + name + "] ";
}

// ---- type rules and kernels shared by the family ------------------------------------------------
// Result of an n-ary elementwise primitive: equal dtypes, ranks equal or 0-d, dims equal or 1.
AbstractValue broadcast_operands(const std::string& name, std::span<const AbstractValue> in) {
  AbstractValue out{Shape{}, in[0].dtype, true};
  for (const AbstractValue& a : in) {
    if (a.dtype != in[0].dtype)
      throw TypeError(prefix(name) + "operands must have the same dtype, got " +
                      std::string(dtype_name(in[0].dtype)) + " and " +
                      std::string(dtype_name(a.dtype)));
    out.weak_type = out.weak_type && a.weak_type;
    if (a.shape.ndim() == 0) continue;
    if (out.shape.ndim() == 0) {
      out.shape = a.shape;
      continue;
    }
    if (a.shape.ndim() != out.shape.ndim())
      throw ShapeError(prefix(name) + "operands must have equal ranks or be scalars, got shapes " +
                       out.shape.str() + " and " + a.shape.str());
    for (int i = 0; i < a.shape.ndim(); ++i) {
      int64_t& o = out.shape[i];
      if (a.shape[i] == o || a.shape[i] == 1) continue;
      if (o != 1)
        throw ShapeError(prefix(name) + "incompatible shapes for broadcasting: " + out.shape.str() +
                         " and " + a.shape.str());
      o = a.shape[i];
    }
  }
  return out;
}

enum class Kinds { any, numeric, floating, integer, int_or_bool };

void check_kind(const std::string& name, DType t, Kinds kinds) {
  bool ok = kinds == Kinds::any || (kinds == Kinds::numeric && !is_bool(t)) ||
            (kinds == Kinds::floating && is_floating(t)) ||
            (kinds == Kinds::integer && is_integer(t)) ||
            (kinds == Kinds::int_or_bool && !is_floating(t));
  if (ok) return;
  const char* want = kinds == Kinds::numeric    ? "a numeric"
                     : kinds == Kinds::floating ? "a floating-point"
                     : kinds == Kinds::integer  ? "an integer"
                                                : "an integer or boolean";
  throw TypeError(prefix(name) + "expected " + want + " dtype, got " + std::string(dtype_name(t)));
}

std::vector<AbstractValue> one(AbstractValue a) {
  return {std::move(a)};
}

// The fused-loop form of a binary kernel op (ir/primitive.h), where it has one.
ScalarOp scalar_op_of(BinaryOp op) {
  switch (op) {
    case BinaryOp::add:
      return ScalarOp::add;
    case BinaryOp::sub:
      return ScalarOp::sub;
    case BinaryOp::mul:
      return ScalarOp::mul;
    case BinaryOp::div:
      return ScalarOp::div;
    case BinaryOp::max:
      return ScalarOp::max;
    case BinaryOp::min:
      return ScalarOp::min;
    case BinaryOp::eq:
      return ScalarOp::eq;
    case BinaryOp::ne:
      return ScalarOp::ne;
    case BinaryOp::lt:
      return ScalarOp::lt;
    case BinaryOp::le:
      return ScalarOp::le;
    case BinaryOp::gt:
      return ScalarOp::gt;
    case BinaryOp::ge:
      return ScalarOp::ge;
    default:
      return ScalarOp::none;
  }
}

ScalarOp scalar_op_of(UnaryOp op) {
  switch (op) {
    case UnaryOp::neg:
      return ScalarOp::neg;
    case UnaryOp::abs:
      return ScalarOp::abs;
    case UnaryOp::square:
      return ScalarOp::square;
    case UnaryOp::copy:
      return ScalarOp::copy;
    default:
      return ScalarOp::none;
  }
}

Primitive& define_binary(PrimitiveRegistry& r, const char* name, BinaryOp op, Kinds kinds) {
  std::string n = name;
  Primitive& p = r.define(
      n,
      [n, op, kinds](std::span<const AbstractValue> in, const Params&) {
        AbstractValue out = broadcast_operands(n, in);
        check_kind(n, out.dtype, kinds);
        if (cpu::is_comparison(op)) out = AbstractValue{out.shape, DType::bool_, false};
        return std::vector<AbstractValue>{out};
      },
      [op](const KernelArgs& a) {
        cpu::binary(op, a.in[0].aval->dtype, a.in[0].data, a.in[0].aval->shape, a.in[1].data,
                    a.in[1].aval->shape, a.out[0].data, a.out[0].aval->shape);
      });
  p.elementwise = true;
  p.kind = PrimitiveKind::broadcasting;
  p.scalar_op = scalar_op_of(op);
  return p;
}

Primitive& define_unary(PrimitiveRegistry& r, const char* name, UnaryOp op, Kinds kinds,
                        bool to_bool = false) {
  std::string n = name;
  Primitive& p = r.define(
      n,
      [n, kinds, to_bool](std::span<const AbstractValue> in, const Params&) {
        check_kind(n, in[0].dtype, kinds);
        AbstractValue out = in[0];
        if (to_bool) out = AbstractValue{out.shape, DType::bool_, false};
        return std::vector<AbstractValue>{out};
      },
      [op](const KernelArgs& a) {
        cpu::unary(op, a.in[0].aval->dtype, a.in[0].data, a.out[0].data, a.in[0].aval->size());
      });
  p.elementwise = true;
  p.kind = PrimitiveKind::unary;
  p.scalar_op = scalar_op_of(op);
  return p;
}

// ---- helpers for the rules ----------------------------------------------------------------------
// JAX's full_like(x, v, shape=shape) (_zeros, _ones, _twos): x's dtype and weak type, a
// literal when 0-d, else a broadcast.
Array full_like(const Array& x, double v, const Shape& shape) {
  Array s = scalar_like(x, v);
  if (shape.ndim() == 0) return s;
  return lax::broadcast_in_dim(s, shape, {});
}
Array full_like(const Array& x, double v) {
  return full_like(x, v, x.shape());
}

// JAX's _replace_zero: ones where x is zero, so the caller's log or division stays finite.
Array replace_zero(const Array& x) {
  Array is_zero_x = eq(x, const_of(x, 0));
  Array ones = full_like(x, 1);
  return select(is_zero_x, ones, x);
}

// JAX's _unbroadcast: the cotangent of an operand the primitive broadcast (0-d, or size-1 dims)
// is the output cotangent summed over the broadcast dims, then reshaped to the operand's shape
// and sharding.
Array unbroadcast(const AbstractValue& aval, const Array& ct) {
  const Shape& s = ct.shape();
  if (s == aval.shape) return ct;
  std::vector<int64_t> dims;
  for (int i = 0; i < s.ndim(); ++i)
    if (aval.shape.ndim() == 0 || s[i] != aval.shape[i]) dims.push_back(i);
  if (aval.shape.ndim() == 0) return lax::reduce_sum(ct, dims);
  Array summed = dims.empty() ? ct : lax::reduce_sum(ct, dims);
  return ops::reshape(summed, aval.shape, aval.sharding);
}

// The tangent rule of one operand of a two-operand primitive.
using BinaryTangentRule = Array (*)(const Array& g, const Array& x, const Array& y,
                                    const Array& ans);
JvpRule binary_jvp(const Primitive& p, BinaryTangentRule lhs, BinaryTangentRule rhs) {
  return standard_jvp(
      p, {[lhs](const Array& g, const Primal& in) { return lhs(g, in.x[0], in.x[1], in.ans); },
          [rhs](const Array& g, const Primal& in) { return rhs(g, in.x[0], in.x[1], in.ans); }});
}

const AbstractValue& type_of(const LinearInput& in) {
  return in.is_linear() ? in.aval : aval_of(in.value);
}
// The cotangents of the linear inputs; known inputs get none.
std::vector<Array> linear_only(std::span<const LinearInput> in, std::vector<Array> cts) {
  for (size_t i = 0; i < in.size(); ++i)
    if (!in[i].is_linear()) cts[i] = Array();
  return cts;
}
[[noreturn]] void nonlinear(const char* prim, const char* why) {
  throw std::logic_error(std::string("transpose of ") + prim + ": " + why);
}

// ---- add, sub and add_any: linear -------------------------------------------------------------
// A lone tangent is broadcast to the output (JAX's _add_jvp / _sub_jvp).
JvpRule add_sub_jvp(const Primitive& p, bool is_sub) {
  return
      [p = &p, is_sub](std::span<const Array> x, std::span<const Array> t, const Params& params) {
        Array ans = bind1(*p, x, params);
        Array out;
        if (is_zero(t[0]) && is_zero(t[1])) return JvpResult{{ans}, {out}};
        if (is_zero(t[0])) {
          out = maybe_broadcast(ans.shape(), is_sub ? neg(t[1]) : t[1]);
        } else if (is_zero(t[1])) {
          out = maybe_broadcast(ans.shape(), t[0]);
        } else {
          out = is_sub ? sub(t[0], t[1]) : add(t[0], t[1]);
        }
        return JvpResult{{ans}, {out}};
      };
}

// As in JAX, both operands' cotangents are formed even when one operand is known (the caller
// drops it), so the staged equations stay JAX's.
std::vector<Array> add_transpose(std::span<const Array> ct, std::span<const LinearInput> in,
                                 const Params&) {
  Array ct_x = unbroadcast(type_of(in[0]), ct[0]);
  Array ct_y = unbroadcast(type_of(in[1]), ct[0]);
  return linear_only(in, {ct_x, ct_y});
}
std::vector<Array> sub_transpose(std::span<const Array> ct, std::span<const LinearInput> in,
                                 const Params&) {
  Array ct_x = unbroadcast(type_of(in[0]), ct[0]);
  Array ct_y = unbroadcast(type_of(in[1]), neg(ct[0]));
  return linear_only(in, {ct_x, ct_y});
}

// add_any: the sum of two cotangent contributions of the same type.
std::vector<AbstractValue> add_any_shape_rule(std::span<const AbstractValue> in, const Params&) {
  if (in.size() != 2 || !(in[0].shape == in[1].shape) || in[0].dtype != in[1].dtype)
    throw TypeError("[add_any] expected two operands of the same type, got " + in[0].str() +
                    " and " + in[1].str());
  return one(in[0]);
}
void add_any_kernel(const KernelArgs& a) {
  cpu::binary(BinaryOp::add, a.in[0].aval->dtype, a.in[0].data, a.in[0].aval->shape, a.in[1].data,
              a.in[1].aval->shape, a.out[0].data, a.out[0].aval->shape);
}
std::vector<Array> add_any_transpose(std::span<const Array> ct, std::span<const LinearInput> in,
                                     const Params&) {
  return linear_only(in, {ct[0], ct[0]});
}
// JAX's add_batched: the unbatched side is broadcast at the other's batch dimension.
BatchRule add_any_batch(const Primitive& p) {
  return [p = &p](std::span<const Array> args, std::span<const int> dims, const Params&,
                  const BatchContext& ctx) {
    Array x = args[0], y = args[1];
    const int bx = dims[0], by = dims[1];
    if (bx == by) return result_at(bind1(*p, {x, y}), bx);
    if (!is_batched(bx)) {
      x = move_batch_dim(x, kNotBatched, by, ctx);
      return result_at(bind1(*p, {x, y}), by);
    }
    if (!is_batched(by)) {
      y = move_batch_dim(y, kNotBatched, bx, ctx);
      return result_at(bind1(*p, {x, y}), bx);
    }
    return result_at(bind1(*p, {batch_moveaxis(x, bx, by), y}), by);
  };
}

void define_add_sub(PrimitiveRegistry& r) {
  Primitive& add_p = define_binary(r, "add", BinaryOp::add, Kinds::numeric);
  add_p.jvp = add_sub_jvp(add_p, false);
  add_p.transpose = add_transpose;
  Primitive& sub_p = define_binary(r, "sub", BinaryOp::sub, Kinds::numeric);
  sub_p.jvp = add_sub_jvp(sub_p, true);
  sub_p.transpose = sub_transpose;
  Primitive& add_any = r.define("add_any", add_any_shape_rule, add_any_kernel);
  add_any.scalar_op = ScalarOp::add;
  add_any.elementwise = true;
  add_any.jvp = linear_jvp_rule(add_any);
  add_any.transpose = add_any_transpose;
  add_any.batch = add_any_batch(add_any);
  add_any.sharding_rule = elementwise_sharding;
}

// ---- mul and div: linear in one operand -------------------------------------------------------
Array mul_jvp_lhs(const Array& g, const Array&, const Array& y, const Array&) {
  return mul(g, y);
}
Array mul_jvp_rhs(const Array& g, const Array& x, const Array&, const Array&) {
  return mul(x, g);
}
// mul is bilinear: linear in exactly one operand, the other a known factor.
std::vector<Array> mul_transpose(std::span<const Array> ct, std::span<const LinearInput> in,
                                 const Params&) {
  if (in[0].is_linear() == in[1].is_linear())
    nonlinear("mul", "exactly one operand must be linear");
  if (in[0].is_linear())
    return std::vector<Array>{unbroadcast(in[0].aval, mul(ct[0], in[1].value)), Array()};
  return std::vector<Array>{Array(), unbroadcast(in[1].aval, mul(in[0].value, ct[0]))};
}

Array div_jvp_lhs(const Array& g, const Array&, const Array& y, const Array&) {
  return div(g, y);
}
Array div_jvp_rhs(const Array& g, const Array& x, const Array& y, const Array&) {
  Array minus_g_x = mul(neg(g), x);
  Array inv_y2 = lax::integer_pow(y, -2);
  return mul(minus_g_x, inv_y2);
}
std::vector<Array> div_transpose(std::span<const Array> ct, std::span<const LinearInput> in,
                                 const Params&) {
  if (!in[0].is_linear() || in[1].is_linear()) nonlinear("div", "only the numerator can be linear");
  return std::vector<Array>{unbroadcast(in[0].aval, div(ct[0], in[1].value)), Array()};
}

void define_mul_div(PrimitiveRegistry& r) {
  Primitive& mul_p = define_binary(r, "mul", BinaryOp::mul, Kinds::numeric);
  mul_p.jvp = binary_jvp(mul_p, mul_jvp_lhs, mul_jvp_rhs);
  mul_p.transpose = mul_transpose;
  mul_p.hides_param = [](std::string_view key, const ParamValue& v) {
    return key == "out_dtype" && is_none(v);
  };
  Primitive& div_p = define_binary(r, "div", BinaryOp::div, Kinds::numeric);
  div_p.jvp = binary_jvp(div_p, div_jvp_lhs, div_jvp_rhs);
  div_p.transpose = div_transpose;
}

// ---- rem, pow, max, min, atan2, nextafter -----------------------------------------------------
// rem(x, y) = x - y trunc(x / y).
Array rem_jvp_lhs(const Array& g, const Array&, const Array&, const Array& ans) {
  return maybe_broadcast(ans.shape(), g);
}
Array rem_jvp_rhs(const Array& g, const Array& x, const Array& y, const Array&) {
  Array minus_g = neg(g);
  Array sign_q = lax::sign(div(x, y));
  Array abs_q = lax::abs(div(x, y));
  Array trunc_abs = lax::floor(abs_q);
  Array trunc_q = mul(sign_q, trunc_abs);
  return mul(minus_g, trunc_q);
}

// pow: as a binary op, and, as JAX's pow, a floating base with an integer exponent, which the
// kernel converts to the base's dtype first (XLA's lowering).
Primitive& define_pow(PrimitiveRegistry& r) {
  Primitive& p = r.define(
      "pow",
      [](std::span<const AbstractValue> in, const Params&) {
        if (in.size() != 2)
          throw ValueError("[pow] expected 2 operands (a base and an exponent), got " +
                           std::to_string(in.size()));
        auto refuse = [&](int position, const char* accepted) {
          throw TypeError("[pow] pow does not accept dtype " +
                          std::string(dtype_name(in[position].dtype)) + " at position " +
                          std::to_string(position) + ". Accepted dtypes at position " +
                          std::to_string(position) + " are subtypes of " + accepted + ".");
        };
        if (!is_floating(in[0].dtype)) refuse(0, "floating, complexfloating");
        if (is_bool(in[1].dtype)) refuse(1, "integer, floating, complexfloating");
        if (in[0].dtype != in[1].dtype) {
          if (!is_integer(in[1].dtype))
            throw TypeError(
                "[pow] the first argument to pow must have an inexact dtype (float or complex), "
                "and the second argument must have an inexact or integer dtype, and two inexact "
                "dtypes must match, but got " +
                std::string(dtype_name(in[0].dtype)) + " and " +
                std::string(dtype_name(in[1].dtype)) + " respectively.");
          AbstractValue y = in[1];
          y.dtype = in[0].dtype;
          const AbstractValue both[2] = {in[0], y};
          return std::vector<AbstractValue>{broadcast_operands("pow", both)};
        }
        return std::vector<AbstractValue>{broadcast_operands("pow", in)};
      },
      [](const KernelArgs& a) {
        const DType t = a.in[0].aval->dtype;
        const void* y = a.in[1].data;
        std::vector<std::byte> converted;
        if (a.in[1].aval->dtype != t) {
          converted.resize(size_t(a.in[1].aval->size() * int64_t(itemsize(t))));
          cpu::convert(y, a.in[1].aval->dtype, converted.data(), t, a.in[1].aval->size());
          y = converted.data();
        }
        cpu::binary(BinaryOp::pow, t, a.in[0].data, a.in[0].aval->shape, y, a.in[1].aval->shape,
                    a.out[0].data, a.out[0].aval->shape);
      });
  p.elementwise = true;
  p.kind = PrimitiveKind::broadcasting;
  return p;
}

// pow's derivative in its base: y x^(y-1), made 0 where an integer exponent is 0 (0^0 = 1).
Array pow_jvp_lhs(const Array& g, const Array& x0, const Array& y0, const Array& ans) {
  const bool int_exponent = is_integer(y0.dtype());
  const DType result = x0.dtype();  // JAX's result_type(x, y): pow's base is floating
  Array x = lax::convert_element_type(x0, result);
  Array y = lax::convert_element_type(y0, result);
  Array jac;
  if (int_exponent) {
    if (x.shape() != y.shape()) {
      x = maybe_broadcast(ans.shape(), x);
      y = maybe_broadcast(ans.shape(), y);
    }
    Array y_zero = eq(y, const_of(y, 0));
    Array zeros = full_like(y, 0);
    Array y_safe = replace_zero(y);
    Array y_minus_1 = sub(y, full_like(y, 1));
    Array x_pow = lax::pow(x, y_minus_1);
    Array slope = mul(y_safe, x_pow);
    jac = select(y_zero, zeros, slope);
  } else {
    Array y_minus_1 = sub(y, full_like(y, 1));
    Array x_pow = lax::pow(x, y_minus_1);
    jac = mul(y, x_pow);
  }
  return mul(g, jac);
}
// pow's derivative in its exponent: log(x) x^y (log(1) = 0 where x is 0).
Array pow_jvp_rhs(const Array& g, const Array& x, const Array& y, const Array& ans) {
  if (!is_floating(y.dtype())) return Array();  // integer exponents carry no tangent
  Array log_x = lax::log(replace_zero(x));
  Array slope = mul(log_x, ans);
  Array out = mul(g, slope);
  return lax::convert_element_type(out, y.dtype());
}

// JAX's _balanced_eq: 1 where x chose the result of max/min, halved where both operands tie.
Array balanced_eq(const Array& x, const Array& z, const Array& y) {
  Array x_chosen = eq(x, z);
  Array ones = full_like(z, 1);
  Array zeros = full_like(z, 0);
  Array num = select(x_chosen, ones, zeros);
  Array y_chosen = eq(y, z);
  Array twos = full_like(z, 2);
  Array ones2 = full_like(z, 1);
  Array den = select(y_chosen, twos, ones2);
  return div(num, den);
}
Array max_min_jvp_lhs(const Array& g, const Array& x, const Array& y, const Array& ans) {
  Array share = balanced_eq(x, ans, y);
  return mul(g, share);
}
Array max_min_jvp_rhs(const Array& g, const Array& x, const Array& y, const Array& ans) {
  Array share = balanced_eq(y, ans, x);
  return mul(g, share);
}

Array atan2_jvp_lhs(const Array& g, const Array& x, const Array& y, const Array&) {
  Array x2 = lax::square(x);
  Array y2 = lax::square(y);
  Array slope = div(y, add(x2, y2));
  return mul(g, slope);
}
Array atan2_jvp_rhs(const Array& g, const Array& x, const Array& y, const Array&) {
  Array minus_x = neg(x);
  Array x2 = lax::square(x);
  Array y2 = lax::square(y);
  Array slope = div(minus_x, add(x2, y2));
  return mul(g, slope);
}

void define_nonlinear_binaries(PrimitiveRegistry& r) {
  Primitive& rem = define_binary(r, "rem", BinaryOp::rem, Kinds::numeric);
  rem.jvp = binary_jvp(rem, rem_jvp_lhs, rem_jvp_rhs);
  Primitive& pow = define_pow(r);
  pow.jvp = binary_jvp(pow, pow_jvp_lhs, pow_jvp_rhs);
  Primitive& max = define_binary(r, "max", BinaryOp::max, Kinds::any);
  max.jvp = binary_jvp(max, max_min_jvp_lhs, max_min_jvp_rhs);
  Primitive& min = define_binary(r, "min", BinaryOp::min, Kinds::any);
  min.jvp = binary_jvp(min, max_min_jvp_lhs, max_min_jvp_rhs);
  Primitive& atan2 = define_binary(r, "atan2", BinaryOp::atan2, Kinds::floating);
  atan2.jvp = binary_jvp(atan2, atan2_jvp_lhs, atan2_jvp_rhs);
  // JAX has no derivative for nextafter either.
  define_binary(r, "nextafter", BinaryOp::nextafter, Kinds::floating);
}

// ---- comparisons, bitwise ops and shifts: zero tangents ---------------------------------------
void define_bool_and_integer_binaries(PrimitiveRegistry& r) {
  const std::tuple<const char*, BinaryOp, Kinds> table[] = {
      {"eq", BinaryOp::eq, Kinds::any},
      {"ne", BinaryOp::ne, Kinds::any},
      {"lt", BinaryOp::lt, Kinds::any},
      {"le", BinaryOp::le, Kinds::any},
      {"gt", BinaryOp::gt, Kinds::any},
      {"ge", BinaryOp::ge, Kinds::any},
      {"and", BinaryOp::bit_and, Kinds::int_or_bool},
      {"or", BinaryOp::bit_or, Kinds::int_or_bool},
      {"xor", BinaryOp::bit_xor, Kinds::int_or_bool},
      {"shift_left", BinaryOp::shift_left, Kinds::integer},
      {"shift_right_logical", BinaryOp::shift_right_logical, Kinds::integer},
      {"shift_right_arithmetic", BinaryOp::shift_right_arithmetic, Kinds::integer},
  };
  for (const auto& [name, op, kinds] : table)
    define_binary(r, name, op, kinds).non_differentiable = true;
}

// ---- unary arithmetic ---------------------------------------------------------------------------
Array square_jvp(const Array& g, const Array& x, const Array&) {
  Array two_x = mul(const_of(x, 2), x);
  return mul(g, two_x);
}
// abs' = sign(x), spelled as JAX does: g where x >= 0, else -g.
Array abs_jvp(const Array& g, const Array& x, const Array&) {
  Array nonneg = lax::ge(x, scalar_like(x, 0));
  Array minus_g = neg(g);
  return select(nonneg, g, minus_g);
}

std::vector<Array> neg_transpose(std::span<const Array> ct, std::span<const LinearInput>,
                                 const Params&) {
  return {neg(ct[0])};
}
TransposeRule copy_transpose(const Primitive& copy) {
  return [p = &copy](std::span<const Array> ct, std::span<const LinearInput>, const Params&) {
    return std::vector<Array>{bind1(*p, {ct[0]})};
  };
}

// lax.stop_gradient binds only for floating-point values.
BatchRule stop_gradient_batch(const Primitive& stop_gradient) {
  return [p = &stop_gradient](std::span<const Array> args, std::span<const int> dims, const Params&,
                              const BatchContext&) {
    if (!is_floating(args[0].dtype())) return result_at(args[0], dims[0]);
    return result_at(bind1(*p, {args[0]}), dims[0]);
  };
}

std::vector<AbstractValue> round_shape_rule(std::span<const AbstractValue> in, const Params&) {
  check_kind("round", in[0].dtype, Kinds::floating);
  return one(in[0]);
}
void round_kernel(const KernelArgs& a) {
  UnaryOp op = a.params.get_int("rounding_method") == 0 ? UnaryOp::round_away : UnaryOp::round_even;
  cpu::unary(op, a.in[0].aval->dtype, a.in[0].data, a.out[0].data, a.in[0].aval->size());
}

std::vector<AbstractValue> integer_pow_shape_rule(std::span<const AbstractValue> in,
                                                  const Params& p) {
  check_kind("integer_pow", in[0].dtype, Kinds::numeric);
  if (is_integer(in[0].dtype) && p.get_int("y") < 0)
    throw TypeError("[integer_pow] Integers cannot be raised to negative powers, got integer_pow(" +
                    in[0].typeof_str() + ", " + std::to_string(p.get_int("y")) + ")");
  return one(in[0]);
}
void integer_pow_kernel(const KernelArgs& a) {
  cpu::integer_pow(a.in[0].aval->dtype, a.in[0].data, a.out[0].data, a.in[0].aval->size(),
                   a.params.get_int("y"));
}
Array integer_pow_jvp(const Array& g, const Primal& p) {
  const Array& x = p.x[0];
  const int64_t y = p.params.get_int("y");
  if (y == 0) return full_like(g, 0);
  if (y == 1) return g;
  if (y == 2) {
    Array two_x = mul(const_of(x, 2), x);
    return mul(g, two_x);
  }
  Array pow_y1 = lax::integer_pow(x, int(y - 1));
  Array slope = mul(const_of(x, double(y)), pow_y1);
  return mul(g, slope);
}

void define_unary_arithmetic(PrimitiveRegistry& r) {
  Primitive& neg_p = define_unary(r, "neg", UnaryOp::neg, Kinds::numeric);
  neg_p.jvp = linear_jvp_rule(neg_p);
  neg_p.transpose = neg_transpose;
  Primitive& copy = define_unary(r, "copy", UnaryOp::copy, Kinds::any);
  copy.jvp = linear_jvp_rule(copy);
  copy.transpose = copy_transpose(copy);
  Primitive& abs = define_unary(r, "abs", UnaryOp::abs, Kinds::numeric);
  abs.jvp = unary_jvp(abs, abs_jvp);
  Primitive& square = define_unary(r, "square", UnaryOp::square, Kinds::numeric);
  square.jvp = unary_jvp(square, square_jvp);
  Primitive& integer_pow = r.define("integer_pow", integer_pow_shape_rule, integer_pow_kernel);
  integer_pow.scalar_op = ScalarOp::integer_pow;
  integer_pow.elementwise = true;
  integer_pow.kind = PrimitiveKind::unary;
  integer_pow.jvp = standard_jvp(integer_pow, {integer_pow_jvp});
}

// Piecewise constant or not real-valued: zero tangents (JAX's defjvp_zero, or integer-only
// primitives whose inputs never carry tangents).
void define_zero_tangent_unaries(PrimitiveRegistry& r) {
  const std::tuple<const char*, UnaryOp, Kinds, bool> table[] = {
      {"sign", UnaryOp::sign, Kinds::numeric, false},
      {"floor", UnaryOp::floor, Kinds::floating, false},
      {"ceil", UnaryOp::ceil, Kinds::floating, false},
      {"is_finite", UnaryOp::is_finite, Kinds::floating, /*to_bool=*/true},
      {"not", UnaryOp::bit_not, Kinds::int_or_bool, false},
      {"population_count", UnaryOp::population_count, Kinds::integer, false},
      {"clz", UnaryOp::clz, Kinds::integer, false},
  };
  for (const auto& [name, op, kinds, to_bool] : table)
    define_unary(r, name, op, kinds, to_bool).non_differentiable = true;
  Primitive& round = r.define("round", round_shape_rule, round_kernel);
  round.elementwise = true;
  round.kind = PrimitiveKind::unary;
  round.non_differentiable = true;
  Primitive& stop_gradient = define_unary(r, "stop_gradient", UnaryOp::copy, Kinds::any);
  stop_gradient.non_differentiable = true;
  stop_gradient.batch = stop_gradient_batch(stop_gradient);
}

// ---- conversions and iota -----------------------------------------------------------------------
std::vector<AbstractValue> convert_shape_rule(std::span<const AbstractValue> in, const Params& p) {
  return one({in[0].shape, p.get<DType>("new_dtype"), p.get<bool>("weak_type")});
}
void convert_kernel(const KernelArgs& a) {
  cpu::convert(a.in[0].data, a.in[0].aval->dtype, a.out[0].data, a.out[0].aval->dtype,
               a.in[0].aval->size());
}
// The tangent is converted alike, except to integer or bool types, whose tangents are zero
// (JAX's float0).
JvpRule convert_jvp(const Primitive& convert) {
  return [p = &convert](std::span<const Array> x, std::span<const Array> t, const Params& params) {
    Array ans = bind1(*p, x, params);
    if (!is_floating(params.get<DType>("new_dtype"))) return JvpResult{{ans}, {Array()}};
    return JvpResult{{ans}, {bind1(*p, {t[0]}, params)}};
  };
}
TransposeRule convert_transpose(const Primitive& convert) {
  return [p = &convert](std::span<const Array> ct, std::span<const LinearInput> in, const Params&) {
    const AbstractValue& old = in[0].aval;
    if (!is_floating(old.dtype)) return std::vector<Array>{Array()};
    Params back{{"new_dtype", old.dtype}, {"weak_type", old.weak_type}, {"sharding", NoneParam{}}};
    return std::vector<Array>{bind1(*p, {ct[0]}, back)};
  };
}

std::vector<AbstractValue> bitcast_shape_rule(std::span<const AbstractValue> in, const Params& p) {
  DType to = p.get<DType>("new_dtype");
  int from_size = itemsize(in[0].dtype), to_size = itemsize(to);
  Shape s = in[0].shape;
  if (is_bool(in[0].dtype) != is_bool(to) && from_size == to_size && is_bool(to))
    throw TypeError("[bitcast_convert_type] cannot bitcast to or from bool");
  if (to_size < from_size) {
    s.push_back(from_size / to_size);
  } else if (to_size > from_size) {
    if (s.ndim() == 0 || s[s.ndim() - 1] != to_size / from_size)
      throw ShapeError("[bitcast_convert_type] converting " + std::string(dtype_name(in[0].dtype)) +
                       " to " + std::string(dtype_name(to)) + " needs a last dimension of size " +
                       std::to_string(to_size / from_size) + ", got shape " + in[0].shape.str());
    std::vector<int64_t> d(s.begin(), s.end() - 1);
    s = Shape(d);
  }
  return one({s, to, false});
}
// Elementwise between types of one width; otherwise the extra last dim of the narrower type's
// side holds the pieces of one element of the wider type, which a device needs whole.
ShardingRule bitcast_sharding(std::span<const AbstractValue> in, std::span<const AbstractValue> out,
                              const Params&) {
  const Shape &x = in[0].shape, &y = out[0].shape;
  const Shape& longer = x.ndim() > y.ndim() ? x : y;
  const int common = std::min(x.ndim(), y.ndim());
  ShardingRule rule;
  ShardingRule::Tensor dims;
  for (int d = 0; d < longer.ndim(); ++d)
    dims.push_back({rule.add_factor(
        longer[d], d < common ? FactorKind::pass_through : FactorKind::need_replication)});
  rule.operands = {{dims.begin(), dims.begin() + x.ndim()}};
  rule.results = {{dims.begin(), dims.begin() + y.ndim()}};
  return rule;
}
void bitcast_kernel(const KernelArgs& a) {
  std::memcpy(a.out[0].data, a.in[0].data, size_t(a.in[0].aval->nbytes()));
}
// Vectorized as in JAX, except that a conversion to a wider type consumes the last dimension,
// which then must not be the batch dimension.
BatchRule bitcast_batch(const Primitive& bitcast) {
  return [p = &bitcast](std::span<const Array> args, std::span<const int> dims,
                        const Params& params, const BatchContext&) {
    Array x = args[0];
    int dim = dims[0];
    const DType to = params.get<DType>("new_dtype");
    if (itemsize(to) > itemsize(x.dtype()) && dim == x.ndim() - 1) {
      x = batch_moveaxis(x, dim, 0);
      dim = 0;
    }
    return result_at(bind1(*p, {x}, params), dim);
  };
}

std::vector<AbstractValue> iota_shape_rule(std::span<const AbstractValue>, const Params& p) {
  Shape s(p.get_ints("shape"));
  int64_t d = p.get_int("dimension");
  if (d < 0 || d >= s.ndim())
    throw AxisError("[iota] dimension " + std::to_string(d) + " is out of range for shape " +
                    s.str());
  return one({s, p.get<DType>("dtype"), false});
}
void iota_kernel(const KernelArgs& a) {
  cpu::iota(a.out[0].aval->dtype, a.out[0].aval->shape, int(a.params.get_int("dimension")),
            a.out[0].data);
}

// Bit reinterpretation and iota have no derivative; iota takes no operands, so it is never
// batched.
void define_conversions(PrimitiveRegistry& r) {
  Primitive& convert = r.define("convert_element_type", convert_shape_rule, convert_kernel);
  convert.elementwise = true;
  convert.scalar_op = ScalarOp::copy;  // a float32 to float32 conversion
  convert.kind = PrimitiveKind::unary;
  convert.jvp = convert_jvp(convert);
  convert.transpose = convert_transpose(convert);
  convert.hides_param = [](std::string_view key, const ParamValue&) { return key == "sharding"; };
  Primitive& bitcast = r.define("bitcast_convert_type", bitcast_shape_rule, bitcast_kernel);
  bitcast.non_differentiable = true;
  bitcast.batch = bitcast_batch(bitcast);
  bitcast.sharding_rule = bitcast_sharding;
  Primitive& iota = r.define("iota", iota_shape_rule, iota_kernel);
  iota.non_differentiable = true;
  // A device's block of an iota would need the block's offset.
  iota.sharding_rule = replicated_sharding;
  iota.keeps_constants = true;
}

// ---- select_n and clamp -------------------------------------------------------------------------
std::vector<AbstractValue> select_n_shape_rule(std::span<const AbstractValue> in, const Params&) {
  if (in.size() < 2 || in.size() > 8)
    throw ValueError("[select_n] expected between 1 and 7 cases, got " +
                     std::to_string(in.size() - 1));
  const AbstractValue& which = in[0];
  if (which.dtype != DType::bool_ && which.dtype != DType::int32)
    throw TypeError("[select_n] the selector must be bool or int32, got " +
                    std::string(dtype_name(which.dtype)));
  if (which.dtype == DType::bool_ && in.size() > 3)
    throw ValueError("[select_n] a bool selector takes at most two cases");
  AbstractValue out = broadcast_operands("select_n", in.subspan(1));
  if (which.shape.ndim() != 0 && !(which.shape == out.shape))
    throw ShapeError("[select_n] the selector must be a scalar or have the cases' shape " +
                     out.shape.str() + ", got " + which.shape.str());
  if (out.shape.ndim() == 0) out.shape = which.shape;
  return one(out);
}
void select_n_kernel(const KernelArgs& a) {
  std::vector<const void*> cases;
  std::vector<Shape> shapes;
  for (size_t i = 1; i < a.in.size(); ++i) {
    cases.push_back(a.in[i].data);
    shapes.push_back(a.in[i].aval->shape);
  }
  cpu::select_n(a.in[0].aval->dtype, a.in[0].data, a.in[0].aval->shape, cases, shapes,
                a.out[0].aval->dtype, a.out[0].data, a.out[0].aval->shape);
}
// The predicate has no tangent; the output tangent selects among the case tangents.
JvpRule select_n_jvp(const Primitive& select_n) {
  return [p = &select_n](std::span<const Array> x, std::span<const Array> t, const Params& params) {
    Array ans = bind1(*p, x, params);
    const Array* first = nullptr;
    for (size_t i = 1; i < t.size() && !first; ++i)
      if (!is_zero(t[i])) first = &t[i];
    if (!first) return JvpResult{{ans}, {Array()}};
    // JAX's cases have one shape; spmd's broadcast, so zeros take the output's shape.
    Array zeros = full_like(*first, 0, ans.shape());
    std::vector<Array> operands{x[0]};
    for (size_t i = 1; i < t.size(); ++i) operands.push_back(is_zero(t[i]) ? zeros : t[i]);
    return JvpResult{{ans}, {bind1(*p, operands, params)}};
  };
}
// Each case's cotangent goes where that case was chosen. JAX's select_n has equal case shapes;
// spmd's also broadcasts cases, whose cotangents are then unbroadcast.
std::vector<Array> select_n_transpose(std::span<const Array> ct, std::span<const LinearInput> in,
                                      const Params&) {
  if (in[0].is_linear()) nonlinear("select_n", "the predicate cannot be linear");
  const Array& which = in[0].value;
  Array zeros = full_like(ct[0], 0);
  std::vector<Array> out(in.size());
  for (size_t i = 1; i < in.size(); ++i) {
    if (!in[i].is_linear()) continue;
    Array chosen;
    if (is_bool(which.dtype())) {
      chosen = i == 1 ? select(which, zeros, ct[0]) : select(which, ct[0], zeros);
    } else {
      Array is_case = eq(which, const_of(which, double(i - 1)));
      chosen = select(is_case, ct[0], zeros);
    }
    out[i] = unbroadcast(in[i].aval, chosen);
  }
  return out;
}
// lax.broadcast_to: x's dims become the trailing dims of `shape`.
Array broadcast_to(const Array& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  std::vector<int64_t> dims;
  for (int i = shape.ndim() - x.ndim(); i < shape.ndim(); ++i) dims.push_back(i);
  return lax::broadcast_in_dim(x, shape, dims);
}
// JAX's _select_batch_rule.
BatchResult select_n_batch(const Primitive& select_n, std::span<const Array> args,
                           std::span<const int> dims, const BatchContext& ctx) {
  auto bind_cases = [&](const Array& which, const std::vector<Array>& cases) {
    std::vector<Array> in{which};
    in.insert(in.end(), cases.begin(), cases.end());
    return bind1(select_n, in);
  };
  Array which = args[0];
  const int which_d = dims[0];
  std::vector<Array> cases(args.begin() + 1, args.end());
  const std::vector<int> case_dims(dims.begin() + 1, dims.end());
  auto all_cases = [&](auto pred) { return std::all_of(case_dims.begin(), case_dims.end(), pred); };
  if (all_cases([&](int d) { return d == which_d; })) {
    if (!(which.shape() == cases[0].shape()))  // a scalar selector of non-scalar cases
      which = lax::broadcast_in_dim(which, cases[0].shape(), {which_d});
    return result_at(bind_cases(which, cases), which_d);
  }
  if (which.ndim() == 0 && all_cases(is_batched)) {
    if (all_cases([&](int d) { return d == case_dims[0]; }))
      return result_at(bind_cases(which, cases), case_dims[0]);
    if (std::all_of(cases.begin(), cases.end(),
                    [&](const Array& c) { return c.shape() == cases[0].shape(); })) {
      for (size_t i = 1; i < cases.size(); ++i)
        cases[i] = batch_moveaxis(cases[i], case_dims[i], case_dims[0]);
      return result_at(bind_cases(which, cases), case_dims[0]);
    }
  }
  if (which.ndim() > 0) which = bdim_at_front(which, which_d, ctx);
  if (!std::all_of(cases.begin(), cases.end(), [](const Array& c) { return c.ndim() == 0; }))
    for (size_t i = 0; i < cases.size(); ++i)
      cases[i] = bdim_at_front(cases[i], case_dims[i], ctx);
  if (which.ndim() > 0 && which.ndim() < cases[0].ndim())
    which = lax::broadcast_in_dim(which, cases[0].shape(), {0});
  if (which.ndim() > cases[0].ndim())
    for (Array& c : cases) c = broadcast_to(c, which.shape());
  return result_at(bind_cases(which, cases), 0);
}

std::vector<AbstractValue> clamp_shape_rule(std::span<const AbstractValue> in, const Params&) {
  AbstractValue out = broadcast_operands("clamp", in);
  if (!(in[1].shape == out.shape))
    throw ShapeError("[clamp] min and max must be scalars or have the operand's shape " +
                     in[1].shape.str());
  out.weak_type = in[1].weak_type;
  return one(out);
}
void clamp_kernel(const KernelArgs& a) {
  cpu::clamp(a.out[0].aval->dtype, a.in[0].data, a.in[0].aval->shape, a.in[1].data,
             a.in[1].aval->shape, a.in[2].data, a.in[2].aval->shape, a.out[0].data,
             a.out[0].aval->shape);
}
// clamp(lo, x, hi): each tangent passes where its operand is the result.
Array clamp_jvp_lo(const Array& g, const Primal& p) {
  const Array &lo = p.x[0], &x = p.x[1], &hi = p.x[2];
  Array above = lax::gt(lo, x);
  Array below = lax::lt(lo, hi);
  Array chosen = lax::bitwise_and(above, below);
  return select(chosen, g, full_like(x, 0));
}
Array clamp_jvp_x(const Array& g, const Primal& p) {
  const Array &lo = p.x[0], &x = p.x[1], &hi = p.x[2];
  Array above = lax::gt(x, lo);
  Array below = lax::lt(x, hi);
  Array chosen = lax::bitwise_and(above, below);
  return select(chosen, g, full_like(x, 0));
}
Array clamp_jvp_hi(const Array& g, const Primal& p) {
  const Array &x = p.x[1], &hi = p.x[2];
  Array chosen = lax::lt(hi, x);
  return select(chosen, g, full_like(x, 0));
}
// JAX's _clamp_batch_rule: special cases avoid moving dims; otherwise everything is brought to
// the front and scalars/vectors are broadcast to the operand's shape.
BatchResult clamp_batch(const Primitive& clamp, std::span<const Array> args,
                        std::span<const int> dims) {
  Array lo = args[0], x = args[1], hi = args[2];
  auto bind_clamp = [&] { return bind1(clamp, {lo, x, hi}); };
  const int lo_d = dims[0], x_d = dims[1], hi_d = dims[2];
  const int64_t size = mapped_size(args, dims);
  if (lo_d == x_d && x_d == hi_d) {
    if ((lo.shape() == x.shape() && x.shape() == hi.shape()) || (lo.ndim() == 0 && hi.ndim() == 0))
      return result_at(bind_clamp(), x_d);
    if (lo.ndim() == 1 && hi.ndim() == 1) {
      lo = lax::broadcast_in_dim(lo, x.shape(), {lo_d});
      hi = lax::broadcast_in_dim(hi, x.shape(), {hi_d});
      return result_at(bind_clamp(), x_d);
    }
  } else if (lo.ndim() == 0 && hi.ndim() == 0 && is_batched(x_d)) {
    return result_at(bind_clamp(), x_d);
  }
  if (lo.ndim() > 0) lo = bdim_at_front(lo, lo_d, size);
  if (hi.ndim() > 0) hi = bdim_at_front(hi, hi_d, size);
  if (x.ndim() > 0) x = bdim_at_front(x, x_d, size);
  if (lo.ndim() == 0 && x.ndim() > 0) lo = lax::broadcast_in_dim(lo, x.shape(), {});
  if (hi.ndim() == 0 && x.ndim() > 0) hi = lax::broadcast_in_dim(hi, x.shape(), {});
  if (lo.ndim() > 0 && lo.ndim() < x.ndim()) lo = lax::broadcast_in_dim(lo, x.shape(), {0});
  if (hi.ndim() > 0 && hi.ndim() < x.ndim()) hi = lax::broadcast_in_dim(hi, x.shape(), {0});
  if (lo.ndim() > x.ndim()) x = lax::broadcast_in_dim(x, lo.shape(), {});
  return result_at(bind_clamp(), 0);
}

// JAX's _select_sharding_rule in Explicit mode: typed cases of one shape share one sharding,
// and a typed selector that is not a scalar has theirs. The result is sharded as the factors say
// (cases broadcast in spmd, where JAX's have one shape).
void select_n_type_sharding(const Primitive& select_n, std::span<const AbstractValue> in,
                            std::span<AbstractValue> out, const Params& params) {
  const AbstractValue* first = nullptr;
  std::string all;
  bool differ = false;
  for (const AbstractValue& c : in.subspan(1)) {
    if (!c.sharding || !(c.shape == out[0].shape)) continue;
    all += (first ? ", " : "") + ParamTraits<TypeSharding>::str(*c.sharding);
    if (!first) first = &c;
    differ = differ || c.sharding != first->sharding;
  }
  if (differ)
    throw ShardingError("[select_n] select cases must have the same shardings, got [" + all +
                        "].");
  const AbstractValue& which = in[0];
  if (first && which.sharding && which.shape.ndim() != 0 && which.sharding != first->sharding)
    throw ShardingError(
        "[select_n] select `which` must be scalar or have the same sharding as cases, got "
        "`which` sharding " +
        ParamTraits<TypeSharding>::str(*which.sharding) + " but case sharding " +
        ParamTraits<TypeSharding>::str(*first->sharding) + ".");
  factor_type_shardings(select_n, in, out, params);
}

// A batching rule from a function of the primitive, its operands and their batch dimensions.
using BatchFn = BatchResult (*)(const Primitive&, std::span<const Array>, std::span<const int>);
BatchRule batch_of(const Primitive& p, BatchFn fn) {
  return [p = &p, fn](std::span<const Array> args, std::span<const int> dims, const Params&,
                      const BatchContext&) { return fn(*p, args, dims); };
}

void define_select_clamp(PrimitiveRegistry& r) {
  Primitive& select_n = r.define("select_n", select_n_shape_rule, select_n_kernel);
  select_n.scalar_op = ScalarOp::select;
  select_n.elementwise = true;
  select_n.jvp = select_n_jvp(select_n);
  select_n.transpose = select_n_transpose;
  select_n.batch = [p = &select_n](std::span<const Array> args, std::span<const int> dims,
                                    const Params&, const BatchContext& ctx) {
    return select_n_batch(*p, args, dims, ctx);
  };
  select_n.sharding_rule = elementwise_sharding;
  select_n.type_sharding_rule = [p = &select_n](std::span<const AbstractValue> in,
                                                std::span<AbstractValue> out,
                                                const Params& params) {
    select_n_type_sharding(*p, in, out, params);
  };
  Primitive& clamp = r.define("clamp", clamp_shape_rule, clamp_kernel);
  clamp.elementwise = true;
  clamp.jvp = standard_jvp(clamp, {clamp_jvp_lo, clamp_jvp_x, clamp_jvp_hi});
  clamp.batch = batch_of(clamp, clamp_batch);
  clamp.sharding_rule = elementwise_sharding;
}

// ---- empty2 -------------------------------------------------------------------------------------
// An uninitialised scalar in JAX, used to fill slots no computation reads; zeros here, so that
// every run computes the same bytes.
std::vector<AbstractValue> empty2_shape_rule(std::span<const AbstractValue> in, const Params& p) {
  if (!in.empty()) throw TypeError("[empty2] takes no operands, got " + std::to_string(in.size()));
  return one({Shape{}, p.get<DType>("dtype"), false});
}
void empty2_kernel(const KernelArgs& a) {
  std::memset(a.out[0].data, 0, size_t(a.out[0].aval->nbytes()));
}

}  // namespace

Array add_cotangents(const Array& a, const Array& b) {
  if (is_zero(a)) return b;
  if (is_zero(b)) return a;
  return bind1(primitive("add_any"), {a, b});
}

void register_elementwise_primitives(PrimitiveRegistry& r) {
  define_add_sub(r);
  define_mul_div(r);
  define_nonlinear_binaries(r);
  define_bool_and_integer_binaries(r);
  define_unary_arithmetic(r);
  define_zero_tangent_unaries(r);
  define_conversions(r);
  define_select_clamp(r);
}

void register_empty_primitive(PrimitiveRegistry& r) {
  // A scalar without operands: nothing to split.
  r.define("empty2", empty2_shape_rule, empty2_kernel).sharding_rule = replicated_sharding;
}

}  // namespace spmd

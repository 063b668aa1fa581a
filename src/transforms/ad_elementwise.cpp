// Forward-mode (jvp) and transpose rules of the elementwise primitives, written as JAX writes
// them (jax/_src/lax/lax.py and special.py) so that differentiated programs print as JAX's do.
// Each operation is its own statement: C++ leaves the order of argument evaluation open, and
// staged equations must come in JAX's order.
#include "prims/rule_util.h"

#include <spmd/lax.h>

#include "ops/op_util.h"
#include "prims/primitive.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

namespace spmd {
namespace {

// ---- one primitive each, under lax's names --------------------------------------------------
Array unary(const char* prim, const Array& x) {
  return ops::apply(prim, {x});
}
Array binary(const char* prim, const Array& x, const Array& y) {
  return ops::apply(prim, {x, y});
}
Array add(const Array& x, const Array& y) {
  return binary("add", x, y);
}
Array sub(const Array& x, const Array& y) {
  return binary("sub", x, y);
}
Array mul(const Array& x, const Array& y) {
  return binary("mul", x, y);
}
Array div(const Array& x, const Array& y) {
  return binary("div", x, y);
}
Array eq(const Array& x, const Array& y) {
  return binary("eq", x, y);
}
Array neg(const Array& x) {
  return unary("neg", x);
}
Array square(const Array& x) {
  return unary("square", x);
}
Array log(const Array& x) {
  return unary("log", x);
}
Array rsqrt(const Array& x) {
  return unary("rsqrt", x);
}
Array exp(const Array& x) {
  return unary("exp", x);
}
// lax.select(pred, on_true, on_false) binds select_n with the cases the other way round.
Array select(const Array& pred, const Array& on_true, const Array& on_false) {
  return lax::select_n(pred, {on_false, on_true});
}

// ---- constants -------------------------------------------------------------------------------
// JAX's _const(x, v): a scalar of x's dtype that is never weakly typed.
Array const_of(const Array& x, double v) {
  return ops::scalar(v, x.dtype(), false);
}
// JAX's _one(x) / _zero(x): a scalar with x's dtype and weak type.
Array scalar_like(const Array& x, double v) {
  return ops::constant_like(x, v);
}
// JAX's full_like(x, v, shape=shape) (_zeros, _ones, _twos): x's dtype and weak type, a
// literal when 0-d, else a broadcast.
Array full_like(const Array& x, double v, const Shape& shape) {
  Array s = ops::constant_like(x, v);
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

// ---- implicit broadcasting -------------------------------------------------------------------
// JAX's _maybe_broadcast: x (0-d or with size-1 dims) broadcast to `target`.
Array maybe_broadcast(const Shape& target, const Array& x) {
  const Shape& s = x.shape();
  if (s == target) return x;
  if (s.ndim() == 0) return lax::broadcast_in_dim(x, target, {});
  std::vector<int64_t> kept, kept_sizes;
  for (int i = 0; i < s.ndim(); ++i) {
    if (s[i] != target[i]) continue;
    kept.push_back(i);
    kept_sizes.push_back(s[i]);
  }
  Array squeezed = lax::reshape(x, Shape(kept_sizes));
  return lax::broadcast_in_dim(squeezed, target, kept);
}

// JAX's _unbroadcast: the cotangent of an operand the primitive broadcast (0-d, or size-1 dims)
// is the output cotangent summed over the broadcast dims, then reshaped to the operand's shape.
Array unbroadcast(const AbstractValue& aval, const Array& ct) {
  const Shape& s = ct.shape();
  if (s == aval.shape) return ct;
  std::vector<int64_t> dims;
  for (int i = 0; i < s.ndim(); ++i)
    if (aval.shape.ndim() == 0 || s[i] != aval.shape[i]) dims.push_back(i);
  if (aval.shape.ndim() == 0) return lax::reduce_sum(ct, dims);
  Array summed = dims.empty() ? ct : lax::reduce_sum(ct, dims);
  return lax::reshape(summed, aval.shape);
}

// ---- jvp rule builders -----------------------------------------------------------------------
// What a tangent rule sees besides the tangent: the primal inputs, output and params.
struct Primal {
  std::span<const Array> x;
  const Array& ans;
  const Params& params;
};
// The contribution of one input's tangent `g` to the output tangent (a rule of JAX's
// defjvp/defjvp2); an invalid Array is a zero contribution.
using TangentRule = std::function<Array(const Array& g, const Primal& p)>;
using UnaryRule = Array (*)(const Array& g, const Array& x, const Array& ans);
using BinaryRule = Array (*)(const Array& g, const Array& x, const Array& y, const Array& ans);

// JAX's standard_jvp: the primal, then every non-zero tangent's contribution in input order,
// then their sum with add_any.
void defjvp(PrimitiveRegistry& r, const char* name, std::vector<TangentRule> rules) {
  Primitive& prim = r.at(name);
  const Primitive* p = &prim;
  prim.jvp = [p, rules = std::move(rules)](std::span<const Array> x, std::span<const Array> t,
                                           const Params& params) {
    Array ans = bind1(*p, x, params);
    std::vector<Array> parts;
    for (size_t i = 0; i < rules.size(); ++i)
      if (rules[i] && !is_zero(t[i])) parts.push_back(rules[i](t[i], Primal{x, ans, params}));
    Array out;
    for (const Array& part : parts) out = add_cotangents(out, part);
    return JvpResult{{ans}, {out}};
  };
}
void defjvp_unary(PrimitiveRegistry& r, const char* name, UnaryRule rule) {
  defjvp(r, name, {[rule](const Array& g, const Primal& p) { return rule(g, p.x[0], p.ans); }});
}
void defjvp_binary(PrimitiveRegistry& r, const char* name, BinaryRule lhs, BinaryRule rhs) {
  defjvp(r, name,
         {[lhs](const Array& g, const Primal& p) { return lhs(g, p.x[0], p.x[1], p.ans); },
          [rhs](const Array& g, const Primal& p) { return rhs(g, p.x[0], p.x[1], p.ans); }});
}

// A primitive linear in all its inputs (rules.h linear_jvp).
void deflinear_jvp(PrimitiveRegistry& r, const char* name) {
  Primitive& prim = r.at(name);
  const Primitive* p = &prim;
  prim.jvp = [p](std::span<const Array> x, std::span<const Array> t, const Params& params) {
    return linear_jvp(*p, x, t, params);
  };
}

void def_zero_jvp(PrimitiveRegistry& r, std::initializer_list<const char*> names) {
  for (const char* name : names) r.at(name).non_differentiable = true;
}

// ---- unary math ------------------------------------------------------------------------------
void register_unary_math_jvps(PrimitiveRegistry& r) {
  defjvp_unary(r, "exp",
               [](const Array& g, const Array&, const Array& ans) { return mul(g, ans); });
  defjvp_unary(r, "exp2", [](const Array& g, const Array& x, const Array& ans) {
    Array log2 = log(const_of(x, 2));
    Array g_ans = mul(g, ans);
    return mul(log2, g_ans);
  });
  defjvp_unary(r, "log", [](const Array& g, const Array& x, const Array&) { return div(g, x); });
  defjvp_unary(r, "expm1", [](const Array& g, const Array&, const Array& ans) {
    Array exp_x = add(ans, scalar_like(ans, 1));
    return mul(g, exp_x);
  });
  defjvp_unary(r, "log1p", [](const Array& g, const Array& x, const Array&) {
    Array x_plus_1 = add(x, scalar_like(x, 1));
    return div(g, x_plus_1);
  });
  defjvp_unary(r, "tanh", [](const Array& g, const Array& x, const Array& ans) {
    Array g_ans = mul(g, ans);
    Array lhs = add(g, g_ans);
    Array rhs = sub(scalar_like(x, 1), ans);
    return mul(lhs, rhs);
  });
  defjvp_unary(r, "logistic", [](const Array& g, const Array&, const Array& ans) {
    Array one_minus = sub(scalar_like(ans, 1), ans);
    Array slope = mul(ans, one_minus);
    return mul(g, slope);
  });
  defjvp_unary(r, "sin", [](const Array& g, const Array& x, const Array&) {
    Array cos_x = unary("cos", x);
    return mul(g, cos_x);
  });
  defjvp_unary(r, "cos", [](const Array& g, const Array& x, const Array&) {
    Array sin_x = unary("sin", x);
    Array g_sin = mul(g, sin_x);
    return neg(g_sin);
  });
  defjvp_unary(r, "tan", [](const Array& g, const Array& x, const Array& ans) {
    Array ans2 = square(ans);
    Array sec2 = add(const_of(x, 1), ans2);
    return mul(g, sec2);
  });
  defjvp_unary(r, "asin", [](const Array& g, const Array& x, const Array&) {
    Array x2 = square(x);
    Array d = sub(const_of(x, 1), x2);
    Array slope = rsqrt(d);
    return mul(g, slope);
  });
  defjvp_unary(r, "acos", [](const Array& g, const Array& x, const Array&) {
    Array x2 = square(x);
    Array d = sub(const_of(x, 1), x2);
    Array rs = rsqrt(d);
    Array slope = neg(rs);
    return mul(g, slope);
  });
  defjvp_unary(r, "atan", [](const Array& g, const Array& x, const Array&) {
    Array x2 = square(x);
    Array d = add(const_of(x, 1), x2);
    return div(g, d);
  });
  defjvp_unary(r, "sinh", [](const Array& g, const Array& x, const Array&) {
    Array cosh_x = unary("cosh", x);
    return mul(g, cosh_x);
  });
  defjvp_unary(r, "cosh", [](const Array& g, const Array& x, const Array&) {
    Array sinh_x = unary("sinh", x);
    return mul(g, sinh_x);
  });
  defjvp_unary(r, "asinh", [](const Array& g, const Array& x, const Array&) {
    Array x2 = square(x);
    Array d = add(x2, scalar_like(x, 1));
    Array slope = rsqrt(d);
    return mul(g, slope);
  });
  defjvp_unary(r, "acosh", [](const Array& g, const Array& x, const Array&) {
    Array x2 = square(x);
    Array d = sub(x2, scalar_like(x, 1));
    Array slope = rsqrt(d);
    return mul(g, slope);
  });
  defjvp_unary(r, "atanh", [](const Array& g, const Array& x, const Array&) {
    Array one_plus = add(scalar_like(x, 1), x);
    Array inv = lax::integer_pow(one_plus, -1);  // lax.reciprocal
    Array one_minus = sub(scalar_like(x, 1), x);
    Array g_over = div(g, one_minus);
    return mul(inv, g_over);
  });
  // erf' = 2/sqrt(pi) exp(-x^2); erfc' is its negative; erf_inv' = sqrt(pi)/2 exp(erf_inv(x)^2).
  defjvp_unary(r, "erf", [](const Array& g, const Array& x, const Array&) {
    Array x2 = square(x);
    Array e = exp(neg(x2));
    Array g_e = mul(g, e);
    return mul(const_of(x, 2 / std::sqrt(std::numbers::pi)), g_e);
  });
  defjvp_unary(r, "erfc", [](const Array& g, const Array& x, const Array&) {
    Array x2 = square(x);
    Array e = exp(neg(x2));
    Array g_e = mul(g, e);
    return mul(const_of(x, -2 / std::sqrt(std::numbers::pi)), g_e);
  });
  defjvp_unary(r, "erf_inv", [](const Array& g, const Array& x, const Array& ans) {
    Array e = exp(square(ans));
    Array g_e = mul(g, e);
    return mul(const_of(x, std::sqrt(std::numbers::pi) / 2), g_e);
  });
  defjvp_unary(r, "sqrt", [](const Array& g, const Array& x, const Array& ans) {
    Array slope = div(const_of(x, 0.5), ans);
    return mul(g, slope);
  });
  defjvp_unary(r, "rsqrt", [](const Array& g, const Array& x, const Array& ans) {
    Array ratio = div(ans, x);
    Array slope = mul(const_of(x, -0.5), ratio);
    return mul(g, slope);
  });
  defjvp_unary(r, "cbrt", [](const Array& g, const Array& x, const Array& ans) {
    Array inv2 = lax::integer_pow(ans, -2);
    Array slope = mul(const_of(x, 1.0 / 3.0), inv2);
    return mul(g, slope);
  });
}

// ---- other unary arithmetic ------------------------------------------------------------------
void register_unary_arith_jvps(PrimitiveRegistry& r) {
  defjvp_unary(r, "square", [](const Array& g, const Array& x, const Array&) {
    Array two_x = mul(const_of(x, 2), x);
    return mul(g, two_x);
  });
  // abs' = sign(x), spelled as JAX does: g where x >= 0, else -g.
  defjvp_unary(r, "abs", [](const Array& g, const Array& x, const Array&) {
    Array nonneg = binary("ge", x, scalar_like(x, 0));
    Array minus_g = neg(g);
    return select(nonneg, g, minus_g);
  });
  defjvp(r, "integer_pow", {[](const Array& g, const Primal& p) {
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
         }});
  deflinear_jvp(r, "neg");
  deflinear_jvp(r, "copy");
}

// ---- binary arithmetic -----------------------------------------------------------------------
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

// pow's derivative in its base: y x^(y-1), made 0 where an integer exponent is 0 (0^0 = 1).
Array pow_jvp_lhs(const Array& g, const Array& x0, const Array& y0, const Array& ans) {
  const bool int_exponent = is_integer(y0.dtype());
  const DType result = x0.dtype();  // JAX's result_type(x, y): pow's base is floating
  Array x = ops::convert(x0, result);
  Array y = ops::convert(y0, result);
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
    Array x_pow = binary("pow", x, y_minus_1);
    Array slope = mul(y_safe, x_pow);
    jac = select(y_zero, zeros, slope);
  } else {
    Array y_minus_1 = sub(y, full_like(y, 1));
    Array x_pow = binary("pow", x, y_minus_1);
    jac = mul(y, x_pow);
  }
  return mul(g, jac);
}
// pow's derivative in its exponent: log(x) x^y (log(1) = 0 where x is 0).
Array pow_jvp_rhs(const Array& g, const Array& x, const Array& y, const Array& ans) {
  if (!is_floating(y.dtype())) return Array();  // integer exponents carry no tangent
  Array log_x = log(replace_zero(x));
  Array slope = mul(log_x, ans);
  Array out = mul(g, slope);
  return ops::convert(out, y.dtype());
}

void register_binary_jvps(PrimitiveRegistry& r) {
  defjvp_binary(
      r, "mul",
      [](const Array& g, const Array&, const Array& y, const Array&) { return mul(g, y); },
      [](const Array& g, const Array& x, const Array&, const Array&) { return mul(x, g); });
  defjvp_binary(
      r, "div",
      [](const Array& g, const Array&, const Array& y, const Array&) { return div(g, y); },
      [](const Array& g, const Array& x, const Array& y, const Array&) {
        Array minus_g_x = mul(neg(g), x);
        Array inv_y2 = lax::integer_pow(y, -2);
        return mul(minus_g_x, inv_y2);
      });
  // rem(x, y) = x - y trunc(x / y).
  defjvp_binary(
      r, "rem",
      [](const Array& g, const Array&, const Array&, const Array& ans) {
        return maybe_broadcast(ans.shape(), g);
      },
      [](const Array& g, const Array& x, const Array& y, const Array&) {
        Array minus_g = neg(g);
        Array sign_q = unary("sign", div(x, y));
        Array abs_q = unary("abs", div(x, y));
        Array trunc_abs = unary("floor", abs_q);
        Array trunc_q = mul(sign_q, trunc_abs);
        return mul(minus_g, trunc_q);
      });
  defjvp_binary(r, "pow", pow_jvp_lhs, pow_jvp_rhs);
  for (const char* name : {"max", "min"}) {
    defjvp_binary(
        r, name,
        [](const Array& g, const Array& x, const Array& y, const Array& ans) {
          Array share = balanced_eq(x, ans, y);
          return mul(g, share);
        },
        [](const Array& g, const Array& x, const Array& y, const Array& ans) {
          Array share = balanced_eq(y, ans, x);
          return mul(g, share);
        });
  }
  defjvp_binary(
      r, "atan2",
      [](const Array& g, const Array& x, const Array& y, const Array&) {
        Array x2 = square(x);
        Array y2 = square(y);
        Array slope = div(y, add(x2, y2));
        return mul(g, slope);
      },
      [](const Array& g, const Array& x, const Array& y, const Array&) {
        Array minus_x = neg(x);
        Array x2 = square(x);
        Array y2 = square(y);
        Array slope = div(minus_x, add(x2, y2));
        return mul(g, slope);
      });
}

// add and sub: a lone tangent is broadcast to the output (JAX's _add_jvp / _sub_jvp).
void register_add_sub_jvps(PrimitiveRegistry& r) {
  for (const char* name : {"add", "sub"}) {
    Primitive& prim = r.at(name);
    const Primitive* p = &prim;
    const bool is_sub = std::string_view(name) == "sub";
    prim.jvp = [p, is_sub](std::span<const Array> x, std::span<const Array> t,
                           const Params& params) {
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
  deflinear_jvp(r, "add_any");
}

// fma (spmd's fused x*y + z) differentiates as the multiply and add it fuses.
void register_fma_jvp(PrimitiveRegistry& r) {
  defjvp(r, "fma",
         {[](const Array& g, const Primal& p) { return mul(g, p.x[1]); },
          [](const Array& g, const Primal& p) { return mul(p.x[0], g); },
          [](const Array& g, const Primal& p) { return maybe_broadcast(p.ans.shape(), g); }});
}

// ---- selection and conversion ----------------------------------------------------------------
// clamp(lo, x, hi): each tangent passes where its operand is the result.
void register_clamp_jvp(PrimitiveRegistry& r) {
  defjvp(r, "clamp",
         {[](const Array& g, const Primal& p) {
            const Array &lo = p.x[0], &x = p.x[1], &hi = p.x[2];
            Array above = binary("gt", lo, x);
            Array below = binary("lt", lo, hi);
            Array chosen = binary("and", above, below);
            return select(chosen, g, full_like(x, 0));
          },
          [](const Array& g, const Primal& p) {
            const Array &lo = p.x[0], &x = p.x[1], &hi = p.x[2];
            Array above = binary("gt", x, lo);
            Array below = binary("lt", x, hi);
            Array chosen = binary("and", above, below);
            return select(chosen, g, full_like(x, 0));
          },
          [](const Array& g, const Primal& p) {
            const Array &x = p.x[1], &hi = p.x[2];
            Array chosen = binary("lt", hi, x);
            return select(chosen, g, full_like(x, 0));
          }});
}

// select_n: the predicate has no tangent; the output tangent selects among the case tangents.
void register_select_n_jvp(PrimitiveRegistry& r) {
  Primitive& prim = r.at("select_n");
  const Primitive* p = &prim;
  prim.jvp = [p](std::span<const Array> x, std::span<const Array> t, const Params& params) {
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

// convert_element_type: the tangent is converted alike, except to integer or bool types, whose
// tangents are zero (JAX's float0).
void register_convert_jvp(PrimitiveRegistry& r) {
  Primitive& prim = r.at("convert_element_type");
  const Primitive* p = &prim;
  prim.jvp = [p](std::span<const Array> x, std::span<const Array> t, const Params& params) {
    Array ans = bind1(*p, x, params);
    if (!is_floating(params.get<DType>("new_dtype"))) return JvpResult{{ans}, {Array()}};
    return JvpResult{{ans}, {bind1(*p, {t[0]}, params)}};
  };
}

// ---- transposes ------------------------------------------------------------------------------
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

void register_transposes(PrimitiveRegistry& r) {
  // As in JAX, both operands' cotangents are formed even when one operand is known (the
  // caller drops it), so the staged equations stay JAX's.
  r.at("add").transpose = [](std::span<const Array> ct, std::span<const LinearInput> in,
                             const Params&) {
    Array ct_x = unbroadcast(type_of(in[0]), ct[0]);
    Array ct_y = unbroadcast(type_of(in[1]), ct[0]);
    return linear_only(in, {ct_x, ct_y});
  };
  r.at("sub").transpose = [](std::span<const Array> ct, std::span<const LinearInput> in,
                             const Params&) {
    Array ct_x = unbroadcast(type_of(in[0]), ct[0]);
    Array ct_y = unbroadcast(type_of(in[1]), neg(ct[0]));
    return linear_only(in, {ct_x, ct_y});
  };
  r.at("add_any").transpose = [](std::span<const Array> ct, std::span<const LinearInput> in,
                                 const Params&) {
    return linear_only(in, {ct[0], ct[0]});
  };
  r.at("neg").transpose = [](std::span<const Array> ct, std::span<const LinearInput>,
                             const Params&) { return std::vector<Array>{neg(ct[0])}; };
  r.at("copy").transpose = [](std::span<const Array> ct, std::span<const LinearInput>,
                              const Params&) { return std::vector<Array>{unary("copy", ct[0])}; };
  // mul is bilinear: linear in exactly one operand, the other a known factor.
  r.at("mul").transpose = [](std::span<const Array> ct, std::span<const LinearInput> in,
                             const Params&) {
    if (in[0].is_linear() == in[1].is_linear())
      nonlinear("mul", "exactly one operand must be linear");
    if (in[0].is_linear())
      return std::vector<Array>{unbroadcast(in[0].aval, mul(ct[0], in[1].value)), Array()};
    return std::vector<Array>{Array(), unbroadcast(in[1].aval, mul(in[0].value, ct[0]))};
  };
  r.at("div").transpose = [](std::span<const Array> ct, std::span<const LinearInput> in,
                             const Params&) {
    if (!in[0].is_linear() || in[1].is_linear())
      nonlinear("div", "only the numerator can be linear");
    return std::vector<Array>{unbroadcast(in[0].aval, div(ct[0], in[1].value)), Array()};
  };
  r.at("convert_element_type").transpose = [](std::span<const Array> ct,
                                              std::span<const LinearInput> in, const Params&) {
    const AbstractValue& old = in[0].aval;
    if (!is_floating(old.dtype)) return std::vector<Array>{Array()};
    Params back{{"new_dtype", old.dtype}, {"weak_type", old.weak_type}, {"sharding", NoneParam{}}};
    return std::vector<Array>{ops::apply("convert_element_type", {ct[0]}, back)};
  };
  // select_n routes each case's cotangent through where that case was chosen. JAX's select_n has
  // equal case shapes; spmd's also broadcasts cases, whose cotangents are then unbroadcast.
  r.at("select_n").transpose = [](std::span<const Array> ct, std::span<const LinearInput> in,
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
  };
}

}  // namespace

void register_elementwise_ad_rules(PrimitiveRegistry& r) {
  // Outputs that are piecewise constant or not real numbers: zero tangents (JAX's defjvp_zero,
  // or integer-only primitives whose inputs never carry tangents).
  def_zero_jvp(r, {"sign",
                   "floor",
                   "ceil",
                   "round",
                   "is_finite",
                   "stop_gradient",
                   "eq",
                   "ne",
                   "lt",
                   "le",
                   "gt",
                   "ge",
                   "and",
                   "or",
                   "xor",
                   "not",
                   "shift_left",
                   "shift_right_logical",
                   "shift_right_arithmetic",
                   "population_count",
                   "clz",
                   "bitcast_convert_type",
                   "iota",
                   "threefry2x32",
                   "iota_2x32_shape"});
  register_unary_math_jvps(r);
  register_unary_arith_jvps(r);
  register_binary_jvps(r);
  register_add_sub_jvps(r);
  register_fma_jvp(r);
  register_clamp_jvp(r);
  register_select_n_jvp(r);
  register_convert_jvp(r);
  register_transposes(r);
}

}  // namespace spmd

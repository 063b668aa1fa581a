// Primitive family: functions of floating-point arrays. The transcendental and root functions
// are one primitive per function with JAX's name, all computed by the Highway kernels of
// cpu::unary_math; each table row holds a primitive's jvp, written as JAX writes it
// (jax/_src/lax/lax.py and special.py) so that differentiated programs print as JAX's do; they
// batch as unary primitives (prims/kinds.cpp). Each operation of a rule is its own statement: C++
// leaves the order of argument evaluation open, and staged equations must come in JAX's order.
#include "prims/families.h"
#include "prims/primitive.h"
#include "prims/rule_util.h"

#include <spmd/error.h>
#include <spmd/lax.h>

#include "backends/cpu/convert.h"
#include "backends/cpu/elementwise.h"
#include "backends/cpu/erf_xla.h"
#include "backends/cpu/reduce_precision.h"
#include "backends/cpu/unary_math.h"

#include <cmath>
#include <cstddef>
#include <numbers>
#include <vector>

namespace spmd {

namespace {

// JAX lowers exp2(x) to exp(log(2) · x) in x's dtype: log(2) and the product are rounded to
// that dtype (16-bit floats round the product, then take exp in float32). Computing it the same
// way keeps results equal to JAX's.
void exp2_kernel(const KernelArgs& a) {
  const DType t = a.in[0].aval->dtype;
  const Shape& shape = a.in[0].aval->shape;
  const int64_t n = shape.size();
  const DType ct = (t == DType::bfloat16 || t == DType::float16) ? DType::float32 : t;
  double ln2 = std::log(2.0);
  std::byte ln2_t[8], ln2_c[8];
  cpu::convert(&ln2, DType::float64, ln2_t, t, 1);
  cpu::convert(ln2_t, t, ln2_c, ct, 1);
  std::vector<std::byte> tmp(size_t(n * itemsize(ct)));
  cpu::convert(a.in[0].data, t, tmp.data(), ct, n);
  cpu::binary(cpu::BinaryOp::mul, ct, tmp.data(), shape, ln2_c, Shape{}, tmp.data(), shape);
  if (ct != t) {  // round the product to the 16-bit type and back
    std::vector<std::byte> rounded(size_t(n * itemsize(t)));
    cpu::convert(tmp.data(), ct, rounded.data(), t, n);
    cpu::convert(rounded.data(), t, tmp.data(), ct, n);
  }
  cpu::unary_math(cpu::UnaryMathOp::exp, ct, tmp.data(), tmp.data(), n);
  cpu::convert(tmp.data(), ct, a.out[0].data, t, n);
}

// float32 erf (and 16-bit erf, which XLA evaluates in float32) uses XLA's own approximation so
// results equal JAX's; float64 keeps the more accurate Highway kernel.
void erf_kernel(const KernelArgs& a) {
  const DType t = a.in[0].aval->dtype;
  const int64_t n = a.in[0].aval->size();
  if (t == DType::float64) {
    cpu::unary_math(cpu::UnaryMathOp::erf, t, a.in[0].data, a.out[0].data, n);
    return;
  }
  if (t == DType::float32) {
    cpu::erf_f32_xla(a.in[0].as<float>(), a.out[0].as<float>(), n);
    return;
  }
  std::vector<float> tmp(static_cast<size_t>(n));
  cpu::convert(a.in[0].data, t, tmp.data(), DType::float32, n);
  cpu::erf_f32_xla(tmp.data(), tmp.data(), n);
  cpu::convert(tmp.data(), DType::float32, a.out[0].data, t, n);
}

using Op = cpu::UnaryMathOp;
using lax::add;
using lax::div;
using lax::mul;
using lax::neg;
using lax::square;
using lax::sub;

// One row per primitive: its name, its kernel and its jvp, the output tangent from the operand's
// tangent g, the operand x and the output ans.
struct UnaryMath {
  const char* name;
  Op op;
  UnaryTangentRule jvp;
};

const UnaryMath kUnaryMath[] = {
    {"exp", Op::exp, [](const Array& g, const Array&, const Array& ans) { return mul(g, ans); }},
    {"exp2", Op::exp2,
     [](const Array& g, const Array& x, const Array& ans) {
       Array log2 = lax::log(const_of(x, 2));
       Array g_ans = mul(g, ans);
       return mul(log2, g_ans);
     }},
    {"expm1", Op::expm1,
     [](const Array& g, const Array&, const Array& ans) {
       Array exp_x = add(ans, scalar_like(ans, 1));
       return mul(g, exp_x);
     }},
    {"log", Op::log, [](const Array& g, const Array& x, const Array&) { return div(g, x); }},
    {"log1p", Op::log1p,
     [](const Array& g, const Array& x, const Array&) {
       Array x_plus_1 = add(x, scalar_like(x, 1));
       return div(g, x_plus_1);
     }},
    {"sin", Op::sin,
     [](const Array& g, const Array& x, const Array&) {
       Array cos_x = lax::cos(x);
       return mul(g, cos_x);
     }},
    {"cos", Op::cos,
     [](const Array& g, const Array& x, const Array&) {
       Array sin_x = lax::sin(x);
       Array g_sin = mul(g, sin_x);
       return neg(g_sin);
     }},
    {"tan", Op::tan,
     [](const Array& g, const Array& x, const Array& ans) {
       Array ans2 = square(ans);
       Array sec2 = add(const_of(x, 1), ans2);
       return mul(g, sec2);
     }},
    {"asin", Op::asin,
     [](const Array& g, const Array& x, const Array&) {
       Array x2 = square(x);
       Array d = sub(const_of(x, 1), x2);
       Array slope = lax::rsqrt(d);
       return mul(g, slope);
     }},
    {"acos", Op::acos,
     [](const Array& g, const Array& x, const Array&) {
       Array x2 = square(x);
       Array d = sub(const_of(x, 1), x2);
       Array rs = lax::rsqrt(d);
       Array slope = neg(rs);
       return mul(g, slope);
     }},
    {"atan", Op::atan,
     [](const Array& g, const Array& x, const Array&) {
       Array x2 = square(x);
       Array d = add(const_of(x, 1), x2);
       return div(g, d);
     }},
    {"sinh", Op::sinh,
     [](const Array& g, const Array& x, const Array&) {
       Array cosh_x = lax::cosh(x);
       return mul(g, cosh_x);
     }},
    {"cosh", Op::cosh,
     [](const Array& g, const Array& x, const Array&) {
       Array sinh_x = lax::sinh(x);
       return mul(g, sinh_x);
     }},
    {"tanh", Op::tanh,
     [](const Array& g, const Array& x, const Array& ans) {
       Array g_ans = mul(g, ans);
       Array lhs = add(g, g_ans);
       Array rhs = sub(scalar_like(x, 1), ans);
       return mul(lhs, rhs);
     }},
    {"asinh", Op::asinh,
     [](const Array& g, const Array& x, const Array&) {
       Array x2 = square(x);
       Array d = add(x2, scalar_like(x, 1));
       Array slope = lax::rsqrt(d);
       return mul(g, slope);
     }},
    {"acosh", Op::acosh,
     [](const Array& g, const Array& x, const Array&) {
       Array x2 = square(x);
       Array d = sub(x2, scalar_like(x, 1));
       Array slope = lax::rsqrt(d);
       return mul(g, slope);
     }},
    {"atanh", Op::atanh,
     [](const Array& g, const Array& x, const Array&) {
       Array one_plus = add(scalar_like(x, 1), x);
       Array inv = lax::integer_pow(one_plus, -1);  // lax.reciprocal
       Array one_minus = sub(scalar_like(x, 1), x);
       Array g_over = div(g, one_minus);
       return mul(inv, g_over);
     }},
    {"logistic", Op::logistic,
     [](const Array& g, const Array&, const Array& ans) {
       Array one_minus = sub(scalar_like(ans, 1), ans);
       Array slope = mul(ans, one_minus);
       return mul(g, slope);
     }},
    // erf' = 2/sqrt(pi) exp(-x^2); erfc' is its negative; erf_inv' = sqrt(pi)/2 exp(erf_inv(x)^2).
    {"erf", Op::erf,
     [](const Array& g, const Array& x, const Array&) {
       Array x2 = square(x);
       Array e = lax::exp(neg(x2));
       Array g_e = mul(g, e);
       return mul(const_of(x, 2 / std::sqrt(std::numbers::pi)), g_e);
     }},
    {"erfc", Op::erfc,
     [](const Array& g, const Array& x, const Array&) {
       Array x2 = square(x);
       Array e = lax::exp(neg(x2));
       Array g_e = mul(g, e);
       return mul(const_of(x, -2 / std::sqrt(std::numbers::pi)), g_e);
     }},
    {"erf_inv", Op::erf_inv,
     [](const Array& g, const Array& x, const Array& ans) {
       Array e = lax::exp(square(ans));
       Array g_e = mul(g, e);
       return mul(const_of(x, std::sqrt(std::numbers::pi) / 2), g_e);
     }},
    {"sqrt", Op::sqrt,
     [](const Array& g, const Array& x, const Array& ans) {
       Array slope = div(const_of(x, 0.5), ans);
       return mul(g, slope);
     }},
    {"rsqrt", Op::rsqrt,
     [](const Array& g, const Array& x, const Array& ans) {
       Array ratio = div(ans, x);
       Array slope = mul(const_of(x, -0.5), ratio);
       return mul(g, slope);
     }},
    {"cbrt", Op::cbrt,
     [](const Array& g, const Array& x, const Array& ans) {
       Array inv2 = lax::integer_pow(ans, -2);
       Array slope = mul(const_of(x, 1.0 / 3.0), inv2);
       return mul(g, slope);
     }},
};

std::vector<AbstractValue> floating_operand(const std::string& name,
                                            std::span<const AbstractValue> in) {
  if (!is_floating(in[0].dtype))
    throw TypeError("[" + name + "] expected a floating-point dtype, got " +
                    std::string(dtype_name(in[0].dtype)));
  return {in[0]};
}

CpuKernel kernel_of(Op op) {
  if (op == Op::exp2) return exp2_kernel;
  if (op == Op::erf) return erf_kernel;
  return [op](const KernelArgs& a) {
    cpu::unary_math(op, a.in[0].aval->dtype, a.in[0].data, a.out[0].data, a.in[0].aval->size());
  };
}

// ---- reduce_precision
// ---------------------------------------------------------------------------- Rounds to a narrower
// float format within the operand's dtype (XLA's ReducePrecision). Linear as JAX defines it:
// tangents and cotangents are rounded the same way.
std::vector<AbstractValue> reduce_precision_rule(std::span<const AbstractValue> in,
                                                 const Params& p) {
  if (p.get_int("exponent_bits") < 1)
    throw ValueError("[reduce_precision] reduce_precision: exponent_bits must be positive; got " +
                     std::to_string(p.get_int("exponent_bits")));
  if (p.get_int("mantissa_bits") < 0)
    throw ValueError(
        "[reduce_precision] reduce_precision: mantissa_bits must be non-negative; got " +
        std::to_string(p.get_int("mantissa_bits")));
  if (!is_floating(in[0].dtype))
    throw TypeError("[reduce_precision] reduce_precision does not accept dtype " +
                    std::string(dtype_name(in[0].dtype)) +
                    ". Accepted dtypes are subtypes of floating.");
  return {in[0]};
}

void reduce_precision_kernel(const KernelArgs& a) {
  cpu::reduce_precision(a.in[0].aval->dtype, a.in[0].data, a.out[0].data, a.in[0].aval->size(),
                        int(a.params.get_int("exponent_bits")),
                        int(a.params.get_int("mantissa_bits")));
}

void define_reduce_precision(PrimitiveRegistry& r) {
  Primitive& p = r.define("reduce_precision", reduce_precision_rule, reduce_precision_kernel);
  p.elementwise = true;
  p.kind = PrimitiveKind::unary;
  deflinear(p,
            [&p](std::span<const Array> cts, std::span<const LinearInput>, const Params& params) {
              return std::vector<Array>{bind1(p, {cts[0]}, params)};
            });
}

}  // namespace

// The fused-loop form (ir/primitive.h) of the functions that have one.
ScalarOp scalar_op_of(cpu::UnaryMathOp op) {
  if (op == cpu::UnaryMathOp::sqrt) return ScalarOp::sqrt;
  if (op == cpu::UnaryMathOp::rsqrt) return ScalarOp::rsqrt;
  return ScalarOp::none;
}

void register_unary_math_primitives(PrimitiveRegistry& r) {
  for (const UnaryMath& def : kUnaryMath) {
    std::string n = def.name;
    Primitive& p = r.define(
        n,
        [n](std::span<const AbstractValue> in, const Params&) { return floating_operand(n, in); },
        kernel_of(def.op));
    p.elementwise = true;
    p.kind = PrimitiveKind::unary;
    p.scalar_op = scalar_op_of(def.op);
    p.jvp = unary_jvp(p, def.jvp);
  }
  define_reduce_precision(r);
}

}  // namespace spmd

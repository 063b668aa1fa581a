// Primitive family: transcendental and root functions of floating-point arrays, one primitive
// per function with JAX's name, all computed by the Highway kernels of cpu::unary_math.
#include "prims/families.h"
#include "prims/primitive.h"

#include <spmd/error.h>

#include "backends/cpu/convert.h"
#include "backends/cpu/elementwise.h"
#include "backends/cpu/erf_xla.h"
#include "backends/cpu/unary_math.h"

#include <cmath>
#include <cstddef>
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

}  // namespace

void register_unary_math_primitives(PrimitiveRegistry& r) {
  using Op = cpu::UnaryMathOp;
  const std::pair<const char*, Op> table[] = {
      {"exp", Op::exp},     {"exp2", Op::exp2},   {"expm1", Op::expm1},
      {"log", Op::log},     {"log1p", Op::log1p}, {"sin", Op::sin},
      {"cos", Op::cos},     {"tan", Op::tan},     {"asin", Op::asin},
      {"acos", Op::acos},   {"atan", Op::atan},   {"sinh", Op::sinh},
      {"cosh", Op::cosh},   {"tanh", Op::tanh},   {"asinh", Op::asinh},
      {"acosh", Op::acosh}, {"atanh", Op::atanh}, {"logistic", Op::logistic},
      {"erf", Op::erf},     {"erfc", Op::erfc},   {"erf_inv", Op::erf_inv},
      {"sqrt", Op::sqrt},   {"rsqrt", Op::rsqrt}, {"cbrt", Op::cbrt},
  };
  for (const auto& [name, op] : table) {
    std::string n = name;
    Primitive& p = r.define(
        n,
        [n](std::span<const AbstractValue> in, const Params&) {
          if (!is_floating(in[0].dtype))
            throw TypeError("[" + n + "] expected a floating-point dtype, got " +
                            std::string(dtype_name(in[0].dtype)));
          return std::vector<AbstractValue>{in[0]};
        },
        op == Op::exp2  ? CpuKernel(exp2_kernel)
        : op == Op::erf ? CpuKernel(erf_kernel)
                        : CpuKernel([op = op](const KernelArgs& a) {
                            cpu::unary_math(op, a.in[0].aval->dtype, a.in[0].data, a.out[0].data,
                                            a.in[0].aval->size());
                          }));
    p.elementwise = true;
    p.kind = PrimitiveKind::unary;
  }
}

}  // namespace spmd

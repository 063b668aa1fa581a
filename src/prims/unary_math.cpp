// Primitive family: transcendental and root functions of floating-point arrays, one primitive
// per function with JAX's name, all computed by the Highway kernels of cpu::unary_math.
#include "prims/families.h"
#include "prims/primitive.h"

#include <spmd/error.h>

#include "backends/cpu/unary_math.h"

namespace spmd {

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
    r.define(
        n,
        [n](std::span<const AbstractValue> in, const Params&) {
          if (!is_floating(in[0].dtype))
            throw TypeError("[" + n + "] expected a floating-point dtype, got " +
                            std::string(dtype_name(in[0].dtype)));
          return std::vector<AbstractValue>{in[0]};
        },
        [op = op](const KernelArgs& a) {
          cpu::unary_math(op, a.in[0].aval->dtype, a.in[0].data, a.out[0].data,
                          a.in[0].aval->size());
        });
  }
}

}  // namespace spmd

// jnp.sort / jnp.argsort and lax.sort, each one sort primitive as JAX binds it.
#include <spmd/lax.h>
#include <spmd/ops.h>

#include "ops/op_util.h"

namespace spmd {

namespace lax {
std::vector<Array> sort(const std::vector<Array>& operands, int64_t dimension, int num_keys) {
  if (operands.empty()) throw ValueError("[sort] requires at least one operand");
  if (num_keys < 1 || size_t(num_keys) > operands.size())
    throw ValueError("[sort] num_keys=" + std::to_string(num_keys) + " must be between 1 and " +
                     std::to_string(operands.size()) + " (the number of operands)");
  const int dim = ops::canonicalize_axis("sort", int(dimension), operands[0].ndim());
  return ops::apply_multi(
      "sort", operands,
      Params{{"dimension", int64_t(dim)}, {"is_stable", true}, {"num_keys", int64_t(num_keys)}});
}
}  // namespace lax

Array sort(const Array& x, int axis) {
  const int dim = ops::canonicalize_axis("sort", axis, x.ndim());
  return lax::sort({x}, dim, 1)[0];
}

Array argsort(const Array& x, int axis) {
  const int dim = ops::canonicalize_axis("argsort", axis, x.ndim());
  Array iota = lax::broadcasted_iota(default_int_dtype(), x.shape(), dim);
  return lax::sort({x, iota}, dim, 1)[1];
}

}  // namespace spmd

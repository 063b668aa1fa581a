// jnp.sort / jnp.argsort and lax.sort.
#include <spmd/lax.h>
#include <spmd/ops.h>

#include "ops/op_util.h"

namespace spmd {

namespace lax {
std::vector<Array> sort(const std::vector<Array>& operands, int64_t dimension, int num_keys) {
  if (operands.empty()) throw ValueError("[sort] expected at least one operand");
  int dim = ops::canonicalize_axis("sort", int(dimension), operands[0].ndim());
  return ops::apply_multi(
      "sort", operands,
      Params{{"dimension", int64_t(dim)}, {"is_stable", true}, {"num_keys", int64_t(num_keys)}});
}
}  // namespace lax

Array sort(const Array& x, int axis) {
  if (x.ndim() == 0) return x;
  return lax::sort({x}, axis, 1)[0];
}

Array argsort(const Array& x, int axis) {
  if (x.ndim() == 0) throw ValueError("[argsort] expected an array of at least one dimension");
  int ax = ops::canonicalize_axis("argsort", axis, x.ndim());
  Array iota = lax::broadcasted_iota(int32, x.shape(), ax);
  return lax::sort({x, iota}, ax, 1)[1];
}

}  // namespace spmd

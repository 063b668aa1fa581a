// Primitive family: sort. One primitive sorts n same-shape operands together along a dimension,
// ordered lexicographically by the first num_keys of them (jax.lax.sort's sort_p). The sort is
// always stable, so is_stable only records what the caller asked for.
#include "prims/families.h"
#include "prims/primitive.h"

#include <spmd/error.h>

#include "backends/cpu/sort.h"

#include <limits>
#include <string>
#include <vector>

namespace spmd {
namespace {

std::vector<AbstractValue> sort_shape_rule(std::span<const AbstractValue> in, const Params& p) {
  if (in.empty()) throw ValueError("[sort] requires at least one operand");
  const Shape& shape = in[0].shape;
  for (const AbstractValue& a : in) {
    if (a.shape == shape) continue;
    std::string shapes;
    for (const AbstractValue& b : in) shapes.append(" ").append(b.shape.str());
    throw ShapeError("[sort] operands must have equal shapes, got:" + shapes);
  }
  const int64_t dim = p.get_int("dimension"), keys = p.get_int("num_keys");
  if (dim < 0 || dim >= shape.ndim())
    throw AxisError("[sort] dimension " + std::to_string(dim) +
                    " is out of bounds for operands of shape " + shape.str());
  if (keys < 1 || keys > int64_t(in.size()))
    throw ValueError("[sort] num_keys=" + std::to_string(keys) + " must be between 1 and " +
                     std::to_string(in.size()) + " (the number of operands)");
  if (shape[int(dim)] > int64_t(std::numeric_limits<uint32_t>::max()))
    throw ValueError("[sort] dimensions of 2^32 or more elements are not supported, got shape " +
                     shape.str());
  return std::vector<AbstractValue>(in.begin(), in.end());
}

void sort_kernel(const KernelArgs& a) {
  std::vector<cpu::SortOperand> operands;
  operands.reserve(a.in.size());
  for (size_t i = 0; i < a.in.size(); ++i)
    operands.push_back({a.in[i].data, a.out[i].data, a.in[i].aval->dtype});
  cpu::sort(operands, int(a.params.get_int("num_keys")), a.in[0].aval->shape,
            int(a.params.get_int("dimension")));
}

}  // namespace

void register_sort_primitives(PrimitiveRegistry& r) {
  r.define("sort", sort_shape_rule, sort_kernel);
}

}  // namespace spmd

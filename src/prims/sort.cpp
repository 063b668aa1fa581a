// Primitive family: sort. One primitive sorts n same-shape operands together along a dimension,
// keyed lexicographically by the first num_keys of them (jax.lax.sort).
#include "prims/families.h"
#include "prims/primitive.h"

#include <spmd/error.h>

#include "backends/cpu/sort.h"

namespace spmd {

void register_sort_primitives(PrimitiveRegistry& r) {
  r.define(
      "sort",
      [](std::span<const AbstractValue> in, const Params& p) {
        if (in.empty()) throw ValueError("[sort] expected at least one operand");
        int64_t dim = p.get_int("dimension"), keys = p.get_int("num_keys");
        if (dim < 0 || dim >= in[0].shape.ndim())
          throw AxisError("[sort] dimension " + std::to_string(dim) +
                          " is out of bounds for operands of shape " + in[0].shape.str());
        if (keys < 1 || keys > int64_t(in.size()))
          throw ValueError("[sort] num_keys must be between 1 and the number of operands, got " +
                           std::to_string(keys));
        for (const AbstractValue& a : in)
          if (!(a.shape == in[0].shape))
            throw ShapeError("[sort] operands must have equal shapes, got " + in[0].shape.str() +
                             " and " + a.shape.str());
        return std::vector<AbstractValue>(in.begin(), in.end());
      },
      [](const KernelArgs& a) {
        std::vector<cpu::SortOperand> ops;
        for (size_t i = 0; i < a.in.size(); ++i)
          ops.push_back({a.in[i].data, a.out[i].data, a.in[i].aval->dtype});
        cpu::sort(ops, int(a.params.get_int("num_keys")), a.in[0].aval->shape,
                  int(a.params.get_int("dimension")));
      });
}

}  // namespace spmd

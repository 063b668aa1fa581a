// Primitive family: sort. One primitive sorts n same-shape operands together along a dimension,
// ordered lexicographically by the first num_keys of them (jax.lax.sort's sort_p). The sort is
// always stable, so is_stable only records what the caller asked for. Its jvp and batching rules
// emit what JAX's do (jax/_src/lax/lax.py).
#include "prims/families.h"
#include "prims/indexing.h"
#include "prims/primitive.h"
#include "prims/rule_util.h"

#include <spmd/error.h>
#include <spmd/lax.h>

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

// ---- transformation rules ----------------------------------------------------------------------
using Ints = std::vector<int64_t>;

// JAX's _sort_jvp: the operands sorted together with an iota, whose sorted values gather each
// tangent. The iota is uint32, JAX's int_dtype_for_shape for every size sort accepts.
JvpResult sort_jvp(const Primitive& self, std::span<const Array> x, std::span<const Array> t,
                   const Params& p) {
  const Shape& shape = x[0].shape();
  const int64_t dim = p.get_int("dimension");
  std::vector<Array> operands = to_vector(x);
  operands.push_back(lax::broadcasted_iota(DType::uint32, shape, int(dim)));
  std::vector<Array> sorted = spmd::bind(self, operands, p);
  Array idx = expand_dims_or_forward(sorted.back(), {shape.ndim()});
  sorted.pop_back();
  const Ints batch = remaining(shape.ndim(), {dim});
  const cpu::GatherDims g{{}, {dim}, {dim}, batch, batch, Ints(size_t(shape.ndim()), 1)};
  JvpResult r{sorted, {}};
  for (const Array& ti : t)
    r.tangents_out.push_back(
        is_zero(ti) ? Array() : gather(ti, idx, g, "promise_in_bounds", NoneParam{}, false, false));
  return r;
}

// JAX's _sort_batch_rule: unbatched operands are broadcast to the first batched operand's shape
// and batched ones moved to its batch dimension.
BatchResult sort_batch(const Primitive& self, std::span<const Array> args,
                       std::span<const int> dims, const Params& params, const BatchContext&) {
  size_t first = 0;
  while (!is_batched(dims[first])) ++first;
  const Shape& shape = args[first].shape();
  const int bdim = dims[first];
  std::vector<Array> xs;
  for (size_t i = 0; i < args.size(); ++i) {
    if (is_batched(dims[i])) {
      xs.push_back(batch_moveaxis(args[i], dims[i], bdim));
      continue;
    }
    Ints kept = range(0, shape.ndim());
    kept.erase(kept.begin() + bdim);
    xs.push_back(lax::broadcast_in_dim(args[i], shape, kept));
  }
  const int64_t dimension = params.get_int("dimension");
  Params p = params;
  p.set("dimension", dimension + (bdim <= dimension ? 1 : 0));
  return all_at(spmd::bind(self, xs, p), bdim);
}

// Every operand and result shares one factor per dim; the sorted dim needs its whole extent, the
// others sort their rows apart.
ShardingRule sort_sharding(std::span<const AbstractValue> in, std::span<const AbstractValue> out,
                           const Params& params) {
  const int64_t dimension = params.get_int("dimension");
  const Shape& shape = in[0].shape;
  ShardingRule rule;
  ShardingRule::Tensor dims;
  for (int d = 0; d < shape.ndim(); ++d)
    dims.push_back({rule.add_factor(
        shape[d], d == dimension ? FactorKind::need_replication : FactorKind::pass_through)});
  rule.operands.assign(in.size(), dims);
  rule.results.assign(out.size(), dims);
  rule.pad_all();
  return rule;
}

}  // namespace

void register_sort_primitives(PrimitiveRegistry& r) {
  Primitive& sort = r.define("sort", sort_shape_rule, sort_kernel);
  sort.jvp = binding(sort, sort_jvp);
  sort.batch = binding(sort, sort_batch);
  sort.sharding_rule = sort_sharding;
}

}  // namespace spmd

// Batching (vmap) rules of elementwise primitives. Each rule receives operands with their batch
// dimensions and binds the primitives that JAX's batching rule for the same primitive binds, in
// the same order and with the same params, so vmapped programs print as JAX's do
// (jax/_src/interpreters/batching.py and the `_*_batch_rule`s of jax/_src/lax/).
#include "prims/rule_util.h"

#include <spmd/lax.h>

#include "ops/op_util.h"
#include "prims/primitive.h"

#include <algorithm>

namespace spmd {
namespace {

// lax.broadcast_to: x's dims become the trailing dims of `shape`.
Array broadcast_to(const Array& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  return lax::broadcast_in_dim(x, shape, range(shape.ndim() - x.ndim(), shape.ndim()));
}

// ---- elementwise ----------------------------------------------------------------------------
// JAX's add_batched: the unbatched side is broadcast at the other's batch dimension.
BatchResult add_any_rule(std::span<const Array> args, std::span<const int> dims, const Params&,
                         const BatchContext&) {
  Array x = args[0], y = args[1];
  const int bx = dims[0], by = dims[1];
  if (bx == by) return result_at(ops::apply("add_any", {x, y}), bx);
  if (!is_batched(bx)) {
    x = move_batch_dim(x, kNotBatched, by, y.shape()[by]);
    return result_at(ops::apply("add_any", {x, y}), by);
  }
  if (!is_batched(by)) {
    y = move_batch_dim(y, kNotBatched, bx, x.shape()[bx]);
    return result_at(ops::apply("add_any", {x, y}), bx);
  }
  return result_at(ops::apply("add_any", {batch_moveaxis(x, bx, by), y}), by);
}

// lax.stop_gradient binds only for floating-point values.
BatchResult stop_gradient_rule(std::span<const Array> args, std::span<const int> dims,
                               const Params&, const BatchContext&) {
  if (!is_floating(args[0].dtype())) return result_at(args[0], dims[0]);
  return result_at(ops::apply("stop_gradient", {args[0]}), dims[0]);
}

// Vectorized as in JAX, except that a conversion to a wider type consumes the last dimension,
// which then must not be the batch dimension.
BatchResult bitcast_convert_type_rule(std::span<const Array> args, std::span<const int> dims,
                                      const Params& params, const BatchContext&) {
  Array x = args[0];
  int dim = dims[0];
  const DType to = params.get<DType>("new_dtype");
  if (itemsize(to) > itemsize(x.dtype()) && dim == x.ndim() - 1) {
    x = batch_moveaxis(x, dim, 0);
    dim = 0;
  }
  return result_at(ops::apply("bitcast_convert_type", {x}, params), dim);
}

Array clamp_of(const Array& lo, const Array& x, const Array& hi) {
  return ops::apply("clamp", {lo, x, hi});
}

// JAX's _clamp_batch_rule: special cases avoid moving dims; otherwise everything is brought to
// the front and scalars/vectors are broadcast to the operand's shape.
BatchResult clamp_rule(std::span<const Array> args, std::span<const int> dims, const Params&,
                       const BatchContext&) {
  Array lo = args[0], x = args[1], hi = args[2];
  const int lo_d = dims[0], x_d = dims[1], hi_d = dims[2];
  const int64_t size = mapped_size(args, dims);
  if (lo_d == x_d && x_d == hi_d) {
    if ((lo.shape() == x.shape() && x.shape() == hi.shape()) || (lo.ndim() == 0 && hi.ndim() == 0))
      return result_at(clamp_of(lo, x, hi), x_d);
    if (lo.ndim() == 1 && hi.ndim() == 1) {
      lo = lax::broadcast_in_dim(lo, x.shape(), {lo_d});
      hi = lax::broadcast_in_dim(hi, x.shape(), {hi_d});
      return result_at(clamp_of(lo, x, hi), x_d);
    }
  } else if (lo.ndim() == 0 && hi.ndim() == 0 && is_batched(x_d)) {
    return result_at(clamp_of(lo, x, hi), x_d);
  }
  if (lo.ndim() > 0) lo = bdim_at_front(lo, lo_d, size);
  if (hi.ndim() > 0) hi = bdim_at_front(hi, hi_d, size);
  if (x.ndim() > 0) x = bdim_at_front(x, x_d, size);
  if (lo.ndim() == 0 && x.ndim() > 0) lo = lax::broadcast_in_dim(lo, x.shape(), {});
  if (hi.ndim() == 0 && x.ndim() > 0) hi = lax::broadcast_in_dim(hi, x.shape(), {});
  if (lo.ndim() > 0 && lo.ndim() < x.ndim()) lo = lax::broadcast_in_dim(lo, x.shape(), {0});
  if (hi.ndim() > 0 && hi.ndim() < x.ndim()) hi = lax::broadcast_in_dim(hi, x.shape(), {0});
  if (lo.ndim() > x.ndim()) x = lax::broadcast_in_dim(x, lo.shape(), {});
  return result_at(clamp_of(lo, x, hi), 0);
}

Array select_n_of(const Array& which, const std::vector<Array>& cases) {
  std::vector<Array> in{which};
  in.insert(in.end(), cases.begin(), cases.end());
  return ops::apply("select_n", in);
}

// JAX's _select_batch_rule.
BatchResult select_n_rule(std::span<const Array> args, std::span<const int> dims, const Params&,
                          const BatchContext&) {
  Array which = args[0];
  const int which_d = dims[0];
  std::vector<Array> cases(args.begin() + 1, args.end());
  const std::vector<int> case_dims(dims.begin() + 1, dims.end());
  const int64_t size = mapped_size(args, dims);
  auto all_cases = [&](auto pred) { return std::all_of(case_dims.begin(), case_dims.end(), pred); };
  if (all_cases([&](int d) { return d == which_d; })) {
    if (!(which.shape() == cases[0].shape()))  // a scalar selector of non-scalar cases
      which = lax::broadcast_in_dim(which, cases[0].shape(), {which_d});
    return result_at(select_n_of(which, cases), which_d);
  }
  if (which.ndim() == 0 && all_cases(is_batched)) {
    if (all_cases([&](int d) { return d == case_dims[0]; }))
      return result_at(select_n_of(which, cases), case_dims[0]);
    if (std::all_of(cases.begin(), cases.end(),
                    [&](const Array& c) { return c.shape() == cases[0].shape(); })) {
      for (size_t i = 1; i < cases.size(); ++i)
        cases[i] = batch_moveaxis(cases[i], case_dims[i], case_dims[0]);
      return result_at(select_n_of(which, cases), case_dims[0]);
    }
  }
  if (which.ndim() > 0) which = bdim_at_front(which, which_d, size);
  if (!std::all_of(cases.begin(), cases.end(), [](const Array& c) { return c.ndim() == 0; }))
    for (size_t i = 0; i < cases.size(); ++i)
      cases[i] = bdim_at_front(cases[i], case_dims[i], size);
  if (which.ndim() > 0 && which.ndim() < cases[0].ndim())
    which = lax::broadcast_in_dim(which, cases[0].shape(), {0});
  if (which.ndim() > cases[0].ndim())
    for (Array& c : cases) c = broadcast_to(c, which.shape());
  return result_at(select_n_of(which, cases), 0);
}

}  // namespace

void register_batch_rules(PrimitiveRegistry& r) {
  r.at("add_any").batch = add_any_rule;
  r.at("stop_gradient").batch = stop_gradient_rule;
  r.at("bitcast_convert_type").batch = bitcast_convert_type_rule;
  r.at("clamp").batch = clamp_rule;
  r.at("select_n").batch = select_n_rule;
}

}  // namespace spmd

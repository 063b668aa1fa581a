// Batching (vmap) rules. Each rule receives operands with their batch dimensions and binds the
// primitives that JAX's batching rule for the same primitive binds, in the same order and with
// the same params, so vmapped programs print as JAX's do (jax/_src/interpreters/batching.py and
// the `_*_batch_rule`s of jax/_src/lax/). dynamic_update_slice differs: JAX batches it into a
// scatter, which spmd does not have.
#include "prims/rule_util.h"

#include <spmd/error.h>
#include <spmd/lax.h>

#include "ops/op_util.h"
#include "prims/primitive.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace spmd {
namespace {

using Ints = std::vector<int64_t>;

bool is_batched(int dim) {
  return dim != kNotBatched;
}

bool contains(const Ints& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// The size of the mapped axis, read off the first batched operand as JAX's rules do.
int64_t mapped_size(std::span<const Array> args, std::span<const int> dims) {
  for (size_t i = 0; i < args.size(); ++i)
    if (is_batched(dims[i])) return args[i].shape()[dims[i]];
  throw std::logic_error("batching rule called without a batched operand");
}

BatchResult single(Array out, int dim) {
  return {{std::move(out)}, {dim}};
}

BatchResult all_at(std::vector<Array> outs, int dim) {
  std::vector<int> dims(outs.size(), dim);
  return {std::move(outs), std::move(dims)};
}

// JAX's batching.moveaxis: a transpose of an operand that has a batch dimension.
Array moveaxis(const Array& x, int from, int to) {
  return move_batch_dim(x, from, to, 0);
}

// JAX's batching.bdim_at_front: batched operands are transposed, others broadcast to `size`.
Array bdim_at_front(const Array& x, int dim, int64_t size) {
  return move_batch_dim(x, dim, 0, size);
}

// lax.broadcast(x, (size,)): a new leading dimension. It emits the same equation as
// bdim_at_front of an unbatched operand, but JAX prints its broadcast_dimensions as plain ints
// where batching.broadcast's print as np.int64, so the two are kept apart.
Array broadcast_leading(const Array& x, int64_t size) {
  return move_batch_dim(x, kNotBatched, 0, size);
}

Ints iota_ints(int64_t begin, int64_t end) {
  Ints out;
  for (int64_t i = begin; i < end; ++i) out.push_back(i);
  return out;
}

// Dimension numbers after a batch dimension is inserted at `b`: dims at or after b shift by one.
Ints bump(const Ints& dims, int64_t b) {
  Ints out;
  for (int64_t d : dims) out.push_back(d + (d >= b ? 1 : 0));
  return out;
}

Ints add_each(const Ints& dims, int64_t k) {
  Ints out;
  for (int64_t d : dims) out.push_back(d + k);
  return out;
}

Ints insert_at(Ints v, int64_t pos, int64_t value) {
  v.insert(v.begin() + pos, value);
  return v;
}

Ints prepend(int64_t value, const Ints& v) {
  return insert_at(v, 0, value);
}

std::vector<Array> to_vector(std::span<const Array> args) {
  return std::vector<Array>(args.begin(), args.end());
}

// ---- dot_general ------------------------------------------------------------------------------
// JAX's _dot_general_batch_dim_nums: two batched operands gain a leading dot batch dimension;
// one batched operand's batch dimension becomes one of its free dimensions.
BatchResult dot_general_rule(std::span<const Array> args, std::span<const int> dims,
                             const Params& params, const BatchContext&) {
  const int lbd = dims[0], rbd = dims[1];
  const int lhs_ndim = args[0].ndim(), rhs_ndim = args[1].ndim();
  lax::DotDimensionNumbers d = params.get<lax::DotDimensionNumbers>("dimension_numbers");
  int result_dim = 0;
  if (is_batched(lbd) && is_batched(rbd)) {
    d.lhs_batch = prepend(lbd, bump(d.lhs_batch, lbd));
    d.rhs_batch = prepend(rbd, bump(d.rhs_batch, rbd));
    d.lhs_contracting = bump(d.lhs_contracting, lbd);
    d.rhs_contracting = bump(d.rhs_contracting, rbd);
  } else if (is_batched(lbd)) {
    // Free lhs dims (counted in the unbatched numbering) that precede the batch dimension.
    int before = 0;
    for (int i = 0; i < lhs_ndim; ++i)
      if (!contains(d.lhs_batch, i) && !contains(d.lhs_contracting, i) && i < lbd) ++before;
    result_dim = int(d.lhs_batch.size()) + before;
    d.lhs_batch = bump(d.lhs_batch, lbd);
    d.lhs_contracting = bump(d.lhs_contracting, lbd);
  } else {
    int before = 0;
    for (int i = 0; i < rhs_ndim; ++i)
      if (!contains(d.rhs_batch, i) && !contains(d.rhs_contracting, i) && i < rbd) ++before;
    result_dim = lhs_ndim - int(d.lhs_contracting.size()) + before;
    d.rhs_batch = bump(d.rhs_batch, rbd);
    d.rhs_contracting = bump(d.rhs_contracting, rbd);
  }
  Params p = params;
  p.set("dimension_numbers", d);
  return single(ops::apply("dot_general", {args[0], args[1]}, p), result_dim);
}

// ---- reductions and scans ---------------------------------------------------------------------
// JAX's _sort_batch_rule: unbatched operands are broadcast to the first batched operand's shape
// and batched ones moved to its batch dimension.
BatchResult sort_rule(std::span<const Array> args, std::span<const int> dims, const Params& params,
                      const BatchContext&) {
  size_t first = 0;
  while (!is_batched(dims[first])) ++first;
  const Shape& shape = args[first].shape();
  const int bdim = dims[first];
  std::vector<Array> xs;
  for (size_t i = 0; i < args.size(); ++i) {
    if (is_batched(dims[i])) {
      xs.push_back(moveaxis(args[i], dims[i], bdim));
      continue;
    }
    Ints kept = iota_ints(0, shape.ndim());
    kept.erase(kept.begin() + bdim);
    xs.push_back(lax::broadcast_in_dim(args[i], shape, kept));
  }
  const int64_t dimension = params.get_int("dimension");
  Params p = params;
  p.set("dimension", dimension + (bdim <= dimension ? 1 : 0));
  return all_at(ops::apply_multi("sort", xs, p), bdim);
}

// ---- shape ------------------------------------------------------------------------------------
BatchResult broadcast_in_dim_rule(std::span<const Array> args, std::span<const int> dims,
                                  const Params& params, const BatchContext&) {
  const Array x = moveaxis(args[0], dims[0], 0);
  Params p = params;
  p.set("shape", prepend(args[0].shape()[dims[0]], params.get_ints("shape")));
  p.set("broadcast_dimensions", prepend(0, add_each(params.get_ints("broadcast_dimensions"), 1)));
  return single(ops::apply("broadcast_in_dim", {x}, p), 0);
}

BatchResult reshape_rule(std::span<const Array> args, std::span<const int> dims,
                         const Params& params, const BatchContext&) {
  if (!std::holds_alternative<NoneParam>(params.at("dimensions")))
    throw ValueError("[vmap] reshape with dimensions other than None cannot be batched");
  const Array x = moveaxis(args[0], dims[0], 0);
  const Ints sizes = prepend(x.shape()[0], params.get_ints("new_sizes"));
  return single(lax::reshape(x, Shape(sizes)), 0);
}

BatchResult squeeze_rule(std::span<const Array> args, std::span<const int> dims,
                         const Params& params, const BatchContext&) {
  const Array x = moveaxis(args[0], dims[0], 0);
  return single(lax::squeeze(x, add_each(params.get_ints("dimensions"), 1)), 0);
}

BatchResult transpose_rule(std::span<const Array> args, std::span<const int> dims,
                           const Params& params, const BatchContext&) {
  const int bdim = dims[0];
  const Ints perm = prepend(bdim, bump(params.get_ints("permutation"), bdim));
  return single(lax::transpose(args[0], perm), 0);
}

BatchResult rev_rule(std::span<const Array> args, std::span<const int> dims, const Params& params,
                     const BatchContext&) {
  const Ints dimensions = bump(params.get_ints("dimensions"), dims[0]);
  return single(ops::apply("rev", {args[0]}, Params{{"dimensions", dimensions}}), dims[0]);
}

// Batched operands are moved to the front and unbatched ones broadcast there (concatenate's
// and stack's general case).
std::vector<Array> all_at_front(std::span<const Array> args, std::span<const int> dims) {
  const int64_t size = mapped_size(args, dims);
  std::vector<Array> xs;
  for (size_t i = 0; i < args.size(); ++i)
    xs.push_back(is_batched(dims[i]) ? moveaxis(args[i], dims[i], 0)
                                     : broadcast_leading(args[i], size));
  return xs;
}

BatchResult concatenate_rule(std::span<const Array> args, std::span<const int> dims,
                             const Params& params, const BatchContext&) {
  return single(lax::concatenate(all_at_front(args, dims), params.get_int("dimension") + 1), 0);
}

BatchResult stack_rule(std::span<const Array> args, std::span<const int> dims, const Params& params,
                       const BatchContext&) {
  const int64_t axis = params.get_int("axis");
  const int bdim = dims[0];
  if (is_batched(bdim) && std::all_of(dims.begin(), dims.end(), [&](int d) { return d == bdim; })) {
    const bool before = axis <= bdim;
    return single(ops::apply("stack", to_vector(args), Params{{"axis", before ? axis : axis + 1}}),
                  before ? bdim + 1 : bdim);
  }
  return single(ops::apply("stack", all_at_front(args, dims), Params{{"axis", axis + 1}}), 0);
}

BatchResult split_rule(std::span<const Array> args, std::span<const int> dims, const Params& params,
                       const BatchContext&) {
  const int64_t axis = params.get_int("axis");
  Params p = params;
  p.set("axis", axis >= dims[0] ? axis + 1 : axis);
  return all_at(ops::apply_multi("split", {args[0]}, p), dims[0]);
}

// JAX's _unstack_batch_rule.
BatchResult unstack_rule(std::span<const Array> args, std::span<const int> dims,
                         const Params& params, const BatchContext&) {
  const int64_t axis = params.get_int("axis");
  const int bdim = dims[0];
  const bool before = axis < bdim;
  return all_at(ops::apply_multi("unstack", {args[0]}, Params{{"axis", before ? axis : axis + 1}}),
                before ? bdim - 1 : bdim);
}

BatchResult tile_rule(std::span<const Array> args, std::span<const int> dims, const Params& params,
                      const BatchContext&) {
  const Ints reps = insert_at(params.get_ints("reps"), dims[0], 1);
  return single(ops::apply("tile", {args[0]}, Params{{"reps", reps}}), dims[0]);
}

// JAX's _pad_batch_rule. A batched padding value cannot be a pad operand: pad with zeros, then
// select the padding value wherever a padded mask of trues is false.
BatchResult pad_rule(std::span<const Array> args, std::span<const int> dims, const Params& params,
                     const BatchContext&) {
  Array x = args[0];
  const Array& value = args[1];
  int x_d = dims[0];
  const int value_d = dims[1];
  if (!is_batched(x_d)) {
    x = broadcast_leading(x, value.shape()[value_d]);
    x_d = 0;
  }
  auto config = params.get<std::vector<lax::PadConfig>>("padding_config");
  config.insert(config.begin() + x_d, lax::PadConfig{});
  if (!is_batched(value_d)) return single(lax::pad(x, value, config), x_d);
  const Array padded = lax::pad(x, ops::constant_like(x, 0), config);
  const Array mask =
      lax::pad(lax::broadcast_in_dim(Array(true), x.shape(), {}), Array(false), config);
  const Array values = lax::broadcast_in_dim(value, padded.shape(), {x_d});
  return single(lax::select(mask, padded, values), x_d);
}

// ---- slicing and gather -----------------------------------------------------------------------
BatchResult slice_rule(std::span<const Array> args, std::span<const int> dims, const Params& params,
                       const BatchContext&) {
  const int bdim = dims[0];
  Params p = params;
  p.set("start_indices", insert_at(params.get_ints("start_indices"), bdim, 0));
  p.set("limit_indices", insert_at(params.get_ints("limit_indices"), bdim, args[0].shape()[bdim]));
  if (!std::holds_alternative<NoneParam>(params.at("strides")))
    p.set("strides", insert_at(params.get_ints("strides"), bdim, 1));
  return single(ops::apply("slice", {args[0]}, p), bdim);
}

// JAX's _gather_batching_rule: a batched operand gains a full-size offset dimension; batched
// indices gain a leading batch dimension of the index array; both batched become a gather batch
// dimension pair (operand_batching_dims / start_indices_batching_dims).
BatchResult gather_rule(std::span<const Array> args, std::span<const int> dims,
                        const Params& params, const BatchContext&) {
  Array operand = args[0], indices = args[1];
  const int operand_d = dims[0], indices_d = dims[1];
  Params p = params;
  const Ints offset = params.get_ints("offset_dims");
  const Ints collapsed = params.get_ints("collapsed_slice_dims");
  const Ints start_map = params.get_ints("start_index_map");
  const Ints operand_batching = params.get_ints("operand_batching_dims");
  const Ints indices_batching = params.get_ints("start_indices_batching_dims");
  const Ints slice_sizes = params.get_ints("slice_sizes");
  if (is_batched(operand_d) && !is_batched(indices_d)) {
    operand = moveaxis(operand, operand_d, 0);
    p.set("slice_sizes", prepend(operand.shape()[0], slice_sizes));
    p.set("offset_dims", prepend(0, add_each(offset, 1)));
    p.set("collapsed_slice_dims", add_each(collapsed, 1));
    p.set("operand_batching_dims", add_each(operand_batching, 1));
    p.set("start_index_map", add_each(start_map, 1));
  } else if (!is_batched(operand_d)) {
    indices = moveaxis(indices, indices_d, 0);
    p.set("offset_dims", add_each(offset, 1));
    p.set("start_indices_batching_dims", add_each(indices_batching, 1));
    // Batching accesses into one array may repeat or reorder indices.
    p.set("unique_indices", false);
    p.set("indices_are_sorted", false);
  } else {
    operand = moveaxis(operand, operand_d, 0);
    indices = moveaxis(indices, indices_d, 0);
    p.set("slice_sizes", prepend(operand.shape()[0] == 0 ? 0 : 1, slice_sizes));
    p.set("collapsed_slice_dims", add_each(collapsed, 1));
    p.set("operand_batching_dims", prepend(0, add_each(operand_batching, 1)));
    p.set("start_indices_batching_dims", prepend(0, add_each(indices_batching, 1)));
    p.set("offset_dims", add_each(offset, 1));
    p.set("start_index_map", add_each(start_map, 1));
  }
  return single(ops::apply("gather", {operand, indices}, p), 0);
}

// Scalar start indices as one index vector (JAX's _batch_dynamic_slice_indices): unbatched,
// shape (n,); with any index batched, shape (size, n) batched at 0. Mixed index dtypes are
// first converted to one integer type so they can be concatenated.
std::pair<Array, int> batch_slice_indices(std::vector<Array> indices, std::span<const int> dims) {
  if (indices.empty()) return {make_uninitialized({Shape{0}, DType::int32, false}), kNotBatched};
  const bool mixed = std::any_of(indices.begin(), indices.end(),
                                 [&](const Array& i) { return i.dtype() != indices[0].dtype(); });
  if (mixed) {
    const bool wide = std::any_of(indices.begin(), indices.end(),
                                  [](const Array& i) { return i.itemsize() == 8; });
    for (Array& i : indices) i = ops::convert(i, wide ? DType::int64 : DType::int32);
  }
  std::vector<Array> parts;
  if (std::none_of(dims.begin(), dims.end(), is_batched)) {
    for (const Array& i : indices) parts.push_back(lax::broadcast_in_dim(i, Shape{1}, {}));
    return {lax::concatenate(parts, 0), kNotBatched};
  }
  const int64_t size = mapped_size(indices, dims);
  for (size_t k = 0; k < indices.size(); ++k)
    parts.push_back(
        lax::broadcast_in_dim(indices[k], Shape{size, 1}, is_batched(dims[k]) ? Ints{0} : Ints{}));
  return {lax::concatenate(parts, 1), 0};
}

// JAX batches dynamic_slice as a gather with clamped (CLIP) indices.
BatchResult dynamic_slice_rule(std::span<const Array> args, std::span<const int> dims,
                               const Params& params, const BatchContext& ctx) {
  const int ndim = args[0].ndim() - (is_batched(dims[0]) ? 1 : 0);
  auto [index, index_d] = batch_slice_indices(to_vector(args.subspan(1)), dims.subspan(1));
  const Ints all = iota_ints(0, ndim);
  const Params gather{{"offset_dims", all},
                      {"collapsed_slice_dims", Ints{}},
                      {"start_index_map", all},
                      {"operand_batching_dims", Ints{}},
                      {"start_indices_batching_dims", Ints{}},
                      {"slice_sizes", params.get_ints("slice_sizes")},
                      {"mode", std::string("clip")},
                      {"fill_value", NoneParam{}},
                      {"indices_are_sorted", true},
                      {"unique_indices", true}};
  const Array gather_args[] = {args[0], index};
  const int gather_dims[] = {dims[0], index_d};
  return gather_rule(gather_args, gather_dims, gather, ctx);
}

// dynamic_update_slice. JAX batches it into a scatter; spmd has no scatter, so: with unbatched
// start indices the batch dimension becomes a leading dimension updated from index 0; with
// batched start indices the update is padded on each side by the room it has in the operand,
// and a batched dynamic_slice of it (and of a mask of where it lands) is selected into the
// operand.
BatchResult dynamic_update_slice_rule(std::span<const Array> args, std::span<const int> dims,
                                      const Params&, const BatchContext& ctx) {
  const int64_t size = mapped_size(args, dims);
  const Array operand = bdim_at_front(args[0], dims[0], size);
  const Array update = bdim_at_front(args[1], dims[1], size);
  const std::span<const Array> starts = args.subspan(2);
  const std::span<const int> start_dims = dims.subspan(2);
  if (std::none_of(start_dims.begin(), start_dims.end(), is_batched)) {
    const DType index_type = starts.empty() ? DType::int32 : starts[0].dtype();
    std::vector<Array> in{operand, update, ops::scalar(0, index_type)};
    in.insert(in.end(), starts.begin(), starts.end());
    return single(ops::apply("dynamic_update_slice", in), 0);
  }
  std::vector<lax::PadConfig> config{lax::PadConfig{}};
  std::vector<Array> window_starts;
  for (size_t k = 0; k < starts.size(); ++k) {
    const int64_t room = operand.shape()[int(k) + 1] - update.shape()[int(k) + 1];
    config.push_back({room, room, 0});
    Array s = starts[k];
    if (s.itemsize() < 4) s = ops::convert(s, DType::int32);
    const Array clamped =
        ops::apply("clamp", {ops::scalar(0, s.dtype()), s, ops::scalar(double(room), s.dtype())});
    window_starts.push_back(ops::apply("sub", {ops::scalar(double(room), s.dtype()), clamped}));
  }
  const Params slice{{"slice_sizes", Ints(operand.shape().begin() + 1, operand.shape().end())}};
  auto window = [&](const Array& padded, int padded_d) {
    std::vector<Array> in{padded};
    in.insert(in.end(), window_starts.begin(), window_starts.end());
    std::vector<int> in_dims{padded_d};
    in_dims.insert(in_dims.end(), start_dims.begin(), start_dims.end());
    BatchResult r = dynamic_slice_rule(in, in_dims, slice, ctx);
    return move_batch_dim(r.outputs[0], r.dims[0], 0, size);
  };
  const Array values = window(lax::pad(update, ops::constant_like(update, 0), config), 0);
  const std::vector<lax::PadConfig> mask_config(config.begin() + 1, config.end());
  const Shape update_shape(update.shape().begin() + 1, update.shape().end());
  const Array ones = lax::broadcast_in_dim(Array(true), update_shape, {});
  const Array mask = window(lax::pad(ones, Array(false), mask_config), kNotBatched);
  return single(lax::select(mask, values, operand), 0);
}

// JAX's _scatter_batching_rule: the operand and updates get the batch dimension in front; with
// unbatched indices it is an extra update window dimension, with batched indices a scatter batch
// dimension pair (operand_batching_dims / scatter_indices_batching_dims).
BatchRule scatter(std::string name) {
  return [name](std::span<const Array> args, std::span<const int> dims, const Params& params,
                const BatchContext&) {
    const int64_t size = mapped_size(args, dims);
    const Array operand = bdim_at_front(args[0], dims[0], size);
    const Array updates = bdim_at_front(args[2], dims[2], size);
    Array indices = args[1];
    const Ints window = params.get_ints("update_window_dims");
    const Ints inserted = params.get_ints("inserted_window_dims");
    const Ints to_operand = params.get_ints("scatter_dims_to_operand_dims");
    const Ints operand_batching = params.get_ints("operand_batching_dims");
    const Ints indices_batching = params.get_ints("scatter_indices_batching_dims");
    Params p = params;
    p.set("inserted_window_dims", add_each(inserted, 1));
    p.set("scatter_dims_to_operand_dims", add_each(to_operand, 1));
    if (!is_batched(dims[1])) {
      p.set("update_window_dims", prepend(0, add_each(window, 1)));
      p.set("operand_batching_dims", add_each(operand_batching, 1));
    } else {
      indices = bdim_at_front(indices, dims[1], size);
      p.set("update_window_dims", add_each(window, 1));
      p.set("operand_batching_dims", prepend(0, add_each(operand_batching, 1)));
      p.set("scatter_indices_batching_dims", prepend(0, add_each(indices_batching, 1)));
    }
    return single(ops::apply(name.c_str(), {operand, indices, updates}, p), 0);
  };
}

// ---- registration -----------------------------------------------------------------------------
}  // namespace

void register_batch_rules(PrimitiveRegistry& r) {
  r.at("dot_general").batch = dot_general_rule;
  r.at("sort").batch = sort_rule;
  r.at("broadcast_in_dim").batch = broadcast_in_dim_rule;
  r.at("reshape").batch = reshape_rule;
  r.at("squeeze").batch = squeeze_rule;
  r.at("transpose").batch = transpose_rule;
  r.at("rev").batch = rev_rule;
  r.at("concatenate").batch = concatenate_rule;
  r.at("stack").batch = stack_rule;
  r.at("split").batch = split_rule;
  r.at("tile").batch = tile_rule;
  r.at("pad").batch = pad_rule;
  r.at("slice").batch = slice_rule;
  r.at("gather").batch = gather_rule;
  r.at("dynamic_slice").batch = dynamic_slice_rule;
  r.at("dynamic_update_slice").batch = dynamic_update_slice_rule;
  // Primitives that the differentiation rules introduce, when present.
  if (r.find("unstack")) r.at("unstack").batch = unstack_rule;
  if (r.find("scatter-add")) r.at("scatter-add").batch = scatter("scatter-add");
  // iota and iota_2x32_shape take no operands, so they are never batched.
}

}  // namespace spmd

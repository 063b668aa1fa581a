// Primitive family: shape manipulation — broadcast_in_dim, reshape, transpose, squeeze, rev,
// concatenate, stack, unstack, pad, slice, split and tile, with JAX's parameter names, each with
// its type rule, kernel, transformation rules and sharding rule. Every kernel is a strided copy
// (src/backends/cpu/copy.h); the shape rules validate exactly what XLA would reject.
#include "prims/families.h"
#include "prims/primitive.h"
#include "prims/rule_util.h"

#include <spmd/error.h>
#include <spmd/lax.h>

#include "backends/cpu/copy.h"
#include "ops/op_util.h"
#include "sharding/type_sharding.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>

namespace spmd {
namespace {

std::string ints_str(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}

std::vector<AbstractValue> one(Shape shape, const AbstractValue& like, bool weak) {
  return {AbstractValue{std::move(shape), like.dtype, weak}};
}

void require_unary(const char* name, std::span<const AbstractValue> in) {
  if (in.size() != 1)
    throw ValueError("[" + std::string(name) + "] expected one operand, got " +
                     std::to_string(in.size()));
}

// Dimensions that must be distinct and within [0, ndim).
void check_dims(const char* name, const std::vector<int64_t>& dims, int ndim) {
  std::vector<bool> seen(size_t(ndim), false);
  for (int64_t d : dims) {
    if (d < 0 || d >= ndim)
      throw AxisError("[" + std::string(name) + "] dimensions must be in [0, " +
                      std::to_string(ndim) + "), got " + ints_str(dims));
    if (seen[size_t(d)])
      throw ValueError("[" + std::string(name) + "] dimensions must be unique, got " +
                       ints_str(dims));
    seen[size_t(d)] = true;
  }
}

const Operand& in0(const KernelArgs& a) {
  return a.in[0];
}
int isize(const KernelArgs& a) {
  return itemsize(a.out[0].aval->dtype);
}

// The jvp and transpose rules below emit the primitives JAX's rules emit (jax/_src/lax/lax.py,
// slicing.py), the batching rules those of JAX's `_*_batch_rule`s, in the same order and with the
// same params, so transformed programs print as JAX's do. Every operation is its own statement:
// C++ leaves the order of argument evaluation open.
using Ints = std::vector<int64_t>;
using Cotangents = std::span<const Array>;
using Inputs = std::span<const LinearInput>;

// Replaces symbolic zeros among the cotangents of a multi-output primitive's outputs.
std::vector<Array> instantiate_all(Cotangents cts, const std::vector<AbstractValue>& avals) {
  std::vector<Array> out;
  for (size_t i = 0; i < cts.size(); ++i) out.push_back(instantiate_zero(cts[i], avals[i]));
  return out;
}

// Keeps the entries of `parts` for the linear inputs (JAX returns them for every input; the
// others are discarded by the caller anyway).
std::vector<Array> for_linear(std::vector<Array> parts, Inputs in) {
  for (size_t i = 0; i < in.size(); ++i)
    if (!in[i].is_linear()) parts[i] = Array();
  return parts;
}

// lax.broadcast(x, (size,)): a new leading dimension. It emits the same equation as
// bdim_at_front of an unbatched operand, but JAX prints its broadcast_dimensions as plain ints
// where batching.broadcast's print as np.int64, so the two are kept apart.
Array broadcast_leading(const Array& x, int64_t size) {
  return move_batch_dim(x, kNotBatched, 0, size);
}

// Batched operands are moved to the front and unbatched ones broadcast there (concatenate's
// and stack's general case).
std::vector<Array> all_at_front(std::span<const Array> args, std::span<const int> dims) {
  const int64_t size = mapped_size(args, dims);
  std::vector<Array> xs;
  for (size_t i = 0; i < args.size(); ++i)
    xs.push_back(is_batched(dims[i]) ? batch_moveaxis(args[i], dims[i], 0)
                                     : broadcast_leading(args[i], size));
  return xs;
}

// ---- sharding rules (ir/sharding_rule.h) --------------------------------------------------------
// Shardy's rules, with one difference: where the extents of a dim differ between tensors (a
// concatenated, padded or sliced dim), each tensor's dim has a factor of its own, so that factor
// sizes always multiply to the dim's size; such factors need replication.
using Factors = ShardingRule::Tensor;

ShardingRule::Dim unsplit(ShardingRule& rule, int64_t size) {
  return {rule.add_factor(size, FactorKind::need_replication)};
}

// The rule of a primitive that keeps every dim in place (its scalar operands aside): dim d is
// one factor of every tensor, split as any when `kept(d)`; a dim where data moves needs
// replication, with a factor per tensor where the extents differ, or, with `share_moved`, one
// permutation factor of the result's extent (the joined dim of concatenate, padded dims).
ShardingRule dimwise_sharding(std::span<const AbstractValue> in, std::span<const AbstractValue> out,
                              const std::function<bool(int)>& kept, bool share_moved = false) {
  const Shape& shape = out[0].shape;
  ShardingRule rule;
  std::vector<Factors> tensors;
  for (const AbstractValue& t : in) tensors.emplace_back(size_t(t.shape.ndim()));
  for (const AbstractValue& t : out) tensors.emplace_back(size_t(t.shape.ndim()));
  auto extent = [&](size_t t, int d) {
    return (t < in.size() ? in[t] : out[t - in.size()]).shape[d];
  };
  for (int d = 0; d < shape.ndim(); ++d) {
    bool same = true;
    for (size_t t = 0; t < tensors.size(); ++t)
      same = same && (tensors[t].empty() || extent(t, d) == shape[d]);
    const bool moved = !kept(d);
    const FactorKind kind = !moved  ? FactorKind::pass_through
                            : !same ? FactorKind::permutation
                                    : FactorKind::need_replication;
    if (moved && share_moved) same = true;
    const int f = same ? rule.add_factor(shape[d], kind) : -1;
    for (size_t t = 0; t < tensors.size(); ++t)
      if (!tensors[t].empty())
        tensors[t][size_t(d)] = same ? ShardingRule::Dim{f} : unsplit(rule, extent(t, d));
  }
  rule.operands.assign(tensors.begin(), tensors.begin() + long(in.size()));
  rule.results.assign(tensors.begin() + long(in.size()), tensors.end());
  rule.pad_all();
  return rule;
}

// The equation with param `key` spelling the block's result shape instead of the global one.
LocalizeFn localize_result_shape(const Primitive& self, const char* key) {
  return [&self, key](const Params& params, std::span<const AbstractValue>,
                      std::span<const AbstractValue> local_out) {
    Params p = params;
    p.set(key, local_out[0].shape.dims());
    return LocalEquation{&self, std::move(p)};
  };
}

// ---- broadcast_in_dim ---------------------------------------------------------------------------
std::vector<AbstractValue> broadcast_in_dim_rule(std::span<const AbstractValue> in,
                                                 const Params& p) {
  require_unary("broadcast_in_dim", in);
  const AbstractValue& x = in[0];
  const auto& shape = p.get_ints("shape");
  const auto& dims = p.get_ints("broadcast_dimensions");
  auto fail = [&](const std::string& what) {
    throw ShapeError("[broadcast_in_dim] " + what + "; got operand of shape " + x.shape.str() +
                     ", target shape " + ints_str(shape) + ", broadcast_dimensions " +
                     ints_str(dims));
  };
  for (int64_t d : shape)
    if (d < 0) fail("shape must have every element be nonnegative");
  if (int(dims.size()) != x.shape.ndim())
    fail("broadcast_dimensions must have one entry per operand dimension");
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] >= int64_t(shape.size()) || (i > 0 && dims[i] <= dims[i - 1]))
      fail("broadcast_dimensions must be strictly increasing and within the target rank");
    const int64_t od = x.shape[int(i)];
    if (od != 1 && od != shape[size_t(dims[i])])
      fail(
          "operand dimension sizes must either be 1, or be equal to their corresponding "
          "dimensions in the target broadcast shape");
  }
  return one(Shape(shape), x, x.weak_type);
}

void broadcast_in_dim_kernel(const KernelArgs& a) {
  const Shape& in = in0(a).aval->shape;
  const auto& dims = a.params.get_ints("broadcast_dimensions");
  std::vector<int64_t> strides(size_t(a.out[0].aval->shape.ndim()), 0);
  const auto in_strides = in.strides();
  for (size_t i = 0; i < dims.size(); ++i)
    if (in[int(i)] != 1) strides[size_t(dims[i])] = in_strides[i];
  cpu::strided_copy(in0(a).data, strides, a.out[0].data, a.out[0].aval->shape, isize(a));
}

// JAX's _broadcast_in_dim_transpose_rule: sum over the broadcast dims into the operand's
// sharding less its size-1 dims, then restore those.
Array broadcast_in_dim_transpose(const Array& ct, const AbstractValue& operand, const Params& p) {
  const Ints& dims = p.get_ints("broadcast_dimensions");
  Ints unit_dims, kept;
  std::optional<TypeSharding> summed_sharding = operand.sharding;
  if (summed_sharding) summed_sharding->dims.clear();
  for (int i = 0; i < operand.shape.ndim(); ++i) {
    if (operand.shape[i] == 1) {
      unit_dims.push_back(i);
      continue;
    }
    kept.push_back(dims[size_t(i)]);
    if (summed_sharding) summed_sharding->dims.push_back(operand.sharding->dims[size_t(i)]);
  }
  const Ints axes = remaining(ct.ndim(), kept);
  Array summed = ops::reduce_sum(ct, axes, summed_sharding);
  return expand_dims_or_forward(summed, unit_dims);
}

// Operand dim i is result dim broadcast_dimensions[i] unless it is a size-1 dim that broadcasts;
// the result's other dims are its own factors.
ShardingRule broadcast_in_dim_sharding(std::span<const AbstractValue> in,
                                       std::span<const AbstractValue> out, const Params& p) {
  const Shape &x = in[0].shape, &y = out[0].shape;
  const Ints& dims = p.get_ints("broadcast_dimensions");
  ShardingRule rule;
  Factors operand(size_t(x.ndim())), result;
  for (int d = 0; d < y.ndim(); ++d) result.push_back({rule.add_factor(y[d])});
  for (int i = 0; i < x.ndim(); ++i)
    if (x[i] == y[int(dims[size_t(i)])]) operand[size_t(i)] = result[size_t(dims[size_t(i)])];
  rule.operands = {std::move(operand)};
  rule.results = {std::move(result)};
  rule.pad_all();
  return rule;
}

BatchResult broadcast_in_dim_batch(const Primitive& self, std::span<const Array> args,
                                   std::span<const int> dims, const Params& params,
                                   const BatchContext& ctx) {
  const Array x = batch_moveaxis(args[0], dims[0], 0);
  Params p = params;
  p.set("shape", prepend(args[0].shape()[dims[0]], params.get_ints("shape")));
  p.set("broadcast_dimensions", prepend(0, add_each(params.get_ints("broadcast_dimensions"), 1)));
  p.set("sharding", batched_out_sharding(params, "sharding", 0, ctx.explicit_mesh_axis));
  return result_at(bind1(self, {x}, p), 0);
}

// ---- reshape, squeeze: same bytes, new shape
// ------------------------------------------------------
std::vector<AbstractValue> reshape_rule(std::span<const AbstractValue> in, const Params& p) {
  require_unary("reshape", in);
  const auto& sizes = p.get_ints("new_sizes");
  if (!std::holds_alternative<NoneParam>(p.at("dimensions")))
    throw ValueError("[reshape] only dimensions=None is supported");
  Shape shape(sizes);
  bool negative = std::any_of(sizes.begin(), sizes.end(), [](int64_t d) { return d < 0; });
  if (!negative)
    check_shape_size(shape, itemsize(in[0].dtype), std::string(dtype_name(in[0].dtype)).c_str(),
                     "reshape");
  if (negative || shape.size() != in[0].shape.size())
    throw ShapeError("[reshape] cannot reshape array of shape " + in[0].shape.str() +
                     " into shape " + shape.str());
  return one(shape, in[0], in[0].weak_type);
}

void copy_kernel(const KernelArgs& a) {
  cpu::copy(in0(a).data, a.out[0].data, a.out[0].aval->size(), isize(a));
}

std::vector<AbstractValue> squeeze_rule(std::span<const AbstractValue> in, const Params& p) {
  require_unary("squeeze", in);
  const Shape& s = in[0].shape;
  const auto& dims = p.get_ints("dimensions");
  check_dims("squeeze", dims, s.ndim());
  std::vector<int64_t> out;
  for (int d = 0; d < s.ndim(); ++d) {
    bool drop = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (drop && s[d] != 1)
      throw ShapeError(
          "[squeeze] cannot select an axis to squeeze out which has size not "
          "equal to one, got shape=" +
          s.str() + " and dimensions=" + ints_str(dims));
    if (!drop) out.push_back(s[d]);
  }
  return one(Shape(out), in[0], in[0].weak_type);
}

// One side of a reshape as the rule walks it, major to minor: the dim it is at and the part of
// that dim's size no factor covers yet. Size-1 dims are stepped over and keep no factor.
struct ReshapeWalk {
  const Shape& shape;
  Factors dims;
  int d = -1;
  int64_t left = 1;

  // Moves to the next dim with something left; false past the last.
  bool next() {
    while (left == 1) {
      if (++d == shape.ndim()) return false;
      left = shape[d];
    }
    return true;
  }
  void take(int factor, int64_t size) {
    dims[size_t(d)].push_back(factor);
    left /= size;
  }
  // The rest of the current dim as a factor of this side only.
  int64_t take_rest(ShardingRule& rule) {
    const int64_t rest = left;
    take(rule.add_factor(rest, FactorKind::need_replication), rest);
    return rest;
  }
};

// Where the two sides' next factors share no divisor, the major part of what is left is taken
// as one factor per side and dim, up to the dims where both sides' products meet again: those
// elements are laid out differently on the two sides, and a device needs them all.
void take_unshared(ShardingRule& rule, ReshapeWalk& a, ReshapeWalk& b) {
  int64_t pa = a.take_rest(rule), pb = b.take_rest(rule);
  while (pa != pb) {
    ReshapeWalk& w = pa < pb ? a : b;
    int64_t& product = pa < pb ? pa : pb;
    w.next();
    product *= w.take_rest(rule);
  }
}

// Shardy's compound factors: both shapes are products of one sequence of factors, each dim of
// consecutive ones, so that a block of the factors is the same elements on both sides. Where
// the sides' remaining sizes share a divisor it is a common factor.
ShardingRule reshape_sharding(std::span<const AbstractValue> in, std::span<const AbstractValue> out,
                              const Params&) {
  const Shape &x = in[0].shape, &y = out[0].shape;
  if (x.size() == 0) return replicated_sharding_rule(in, out);
  ShardingRule rule;
  ReshapeWalk a{x, Factors(size_t(x.ndim()))}, b{y, Factors(size_t(y.ndim()))};
  while (a.next() && b.next()) {
    const int64_t common = std::gcd(a.left, b.left);
    if (common == 1) {
      take_unshared(rule, a, b);
      continue;
    }
    const int f = rule.add_factor(common);
    a.take(f, common);
    b.take(f, common);
  }
  rule.operands = {std::move(a.dims)};
  rule.results = {std::move(b.dims)};
  rule.pad_all();
  return rule;
}

// ---- reshape's Explicit-mode type rule, as JAX's _reshape_sharding_rule: a reshape that only
// adds or drops size-1 dims, splits one dim or merges dims into one keeps the operand's axes on
// the dims they end up on; any other reshape of a sharded value needs an out_sharding.

using AxisList = std::vector<std::string>;
using AxisSplit = std::vector<AxisList>;  // per dim, its mesh axes, major first

[[noreturn]] void unsupported_reshape(const AbstractValue& x, const Ints& new_sizes) {
  throw ShardingError(
      "[reshape] This reshape is not supported. Please specify the sharding of the output via "
      "the `out_sharding` argument of jax.lax.reshape. Got operand type: " +
      x.typeof_str() + ", new sizes: " + ints_str(new_sizes));
}

// One dim of the shorter shape: the same size in the longer shape, or the run of longer-shape
// dims it is split into.
struct Piece {
  bool split = false;
  Ints sizes;
};

int64_t product_of(const Ints& sizes) {
  return std::accumulate(sizes.begin(), sizes.end(), int64_t(1), std::multiplies<>());
}

// JAX's _split_on_one_axis: `to` as `from` with one dim split into a run of dims (trailing
// size-1 dims on both sides set aside); nullopt when it is not. Splitting two dims is
// unsupported.
std::optional<std::vector<Piece>> split_one_dim(Ints from, Ints to, const AbstractValue& x,
                                                const Ints& new_sizes) {
  if (to.size() <= from.size()) return std::nullopt;
  size_t ones = 0;
  while (!from.empty() && from.back() == 1 && to.back() == 1) {
    ++ones;
    from.pop_back();
    to.pop_back();
  }
  std::vector<Piece> out;
  int splits = 0;
  for (size_t i = 0, j = 0; j < to.size(); ++i, ++j) {
    if (i >= from.size()) return std::nullopt;
    if (from[i] == to[j]) {
      out.push_back({false, {from[i]}});
      continue;
    }
    if (++splits > 1) unsupported_reshape(x, new_sizes);
    Ints run{to[j]};
    // The run ends where it covers from[i], unless size-1 dims follow that the next dim of
    // `from` does not start with.
    for (size_t next = j + 1; product_of(run) != from[i] || (next < to.size() && to[next] == 1);
         ++next) {
      if (product_of(run) > from[i]) return std::nullopt;
      if (product_of(run) == from[i] && i + 1 < from.size() && to[next] == from[i + 1]) break;
      if (++j >= to.size()) return std::nullopt;
      run.push_back(to[j]);
    }
    out.push_back({true, std::move(run)});
  }
  if (out.size() != from.size()) return std::nullopt;
  out.insert(out.end(), ones, Piece{false, {1}});
  return out;
}

// JAX's split_partitions: the axes of one dim dealt out, major first, to the dims of `sizes`,
// each taking axes while it has a size left to split; every axis must divide what is left.
AxisSplit deal_axes(const TypeSharding& t, const AxisList& axes, const Ints& sizes,
                    const AbstractValue& x, const Ints& new_sizes) {
  AxisSplit out;
  size_t next = 0;
  for (int64_t left : sizes) {
    AxisList dim;
    while (left > 1 && next < axes.size()) {
      const int64_t n = t.size_of({axes[next]});
      if (left % n != 0) unsupported_reshape(x, new_sizes);
      left /= n;
      dim.push_back(axes[next++]);
    }
    out.push_back(std::move(dim));
  }
  if (next != axes.size()) unsupported_reshape(x, new_sizes);
  return out;
}

// Only size-1 dims come or go: the other dims keep their axes in order.
AxisSplit move_ones(const AbstractValue& x, const Ints& new_sizes) {
  AxisSplit kept, out;
  for (int d = 0; d < x.shape.ndim(); ++d)
    if (x.shape[d] != 1) kept.push_back(x.sharding->dims[size_t(d)]);
  auto next = kept.begin();
  for (int64_t n : new_sizes) out.push_back(n == 1 ? AxisList{} : *next++);
  return out;
}

AxisSplit split_dim(const AbstractValue& x, const std::vector<Piece>& pieces,
                    const Ints& new_sizes) {
  AxisSplit out;
  for (size_t d = 0; d < pieces.size(); ++d) {
    const AxisList& axes = x.sharding->dims[d];
    if (!pieces[d].split) {
      out.push_back(axes);
      continue;
    }
    const AxisSplit dealt = deal_axes(*x.sharding, axes, pieces[d].sizes, x, new_sizes);
    out.insert(out.end(), dealt.begin(), dealt.end());
  }
  return out;
}

// The merged dims' axes, major first, go to the merged dim: an unsplit dim may only follow
// the split ones.
AxisSplit merge_dims(const AbstractValue& x, const std::vector<Piece>& pieces,
                     const Ints& new_sizes) {
  AxisSplit out;
  size_t d = 0;
  for (size_t r = 0; r < pieces.size(); ++r) {
    if (!pieces[r].split) {
      out.push_back(x.sharding->dims[d++]);
      continue;
    }
    AxisList axes;
    bool gap = false;
    for (size_t k = 0; k < pieces[r].sizes.size(); ++k, ++d) {
      const AxisList& dim = x.sharding->dims[d];
      if (!dim.empty() && gap) unsupported_reshape(x, new_sizes);
      gap = gap || dim.empty();
      axes.insert(axes.end(), dim.begin(), dim.end());
    }
    out.push_back(deal_axes(*x.sharding, axes, {new_sizes[r]}, x, new_sizes)[0]);
  }
  return out;
}

Ints without_ones(const Ints& sizes) {
  Ints out;
  std::copy_if(sizes.begin(), sizes.end(), std::back_inserter(out),
               [](int64_t n) { return n != 1; });
  return out;
}

AxisSplit reshape_split(const AbstractValue& x, const Ints& new_sizes) {
  const AxisSplit& dims = x.sharding->dims;
  if (std::all_of(dims.begin(), dims.end(), [](const AxisList& a) { return a.empty(); }))
    return AxisSplit(new_sizes.size());
  const Ints shape = x.shape.dims();
  if (without_ones(shape) == without_ones(new_sizes)) return move_ones(x, new_sizes);
  if (auto pieces = split_one_dim(shape, new_sizes, x, new_sizes))
    return split_dim(x, *pieces, new_sizes);
  if (auto pieces = split_one_dim(new_sizes, shape, x, new_sizes))
    return merge_dims(x, *pieces, new_sizes);
  unsupported_reshape(x, new_sizes);
}

// A given out_sharding (the "sharding" param) is applied before this rule runs.
void reshape_type_sharding(std::span<const AbstractValue> in, std::span<AbstractValue> out,
                           const Params& p) {
  out[0].sharding =
      TypeSharding{in[0].sharding->mesh, reshape_split(in[0], p.get_ints("new_sizes"))};
}

ShardingRule squeeze_sharding(std::span<const AbstractValue> in, std::span<const AbstractValue>,
                              const Params& p) {
  const Shape& x = in[0].shape;
  const Ints& dims = p.get_ints("dimensions");
  ShardingRule rule;
  Factors operand(size_t(x.ndim())), result;
  for (int d = 0; d < x.ndim(); ++d) {
    if (std::find(dims.begin(), dims.end(), d) != dims.end()) continue;
    operand[size_t(d)] = {rule.add_factor(x[d])};
    result.push_back(operand[size_t(d)]);
  }
  rule.operands = {std::move(operand)};
  rule.results = {std::move(result)};
  rule.pad_all();
  return rule;
}

// As JAX, the cotangent goes back to the operand's shape with the operand's sharding (which an
// Explicit-mode reshape back may not be able to infer).
Array reshape_transpose(const Array& ct, const AbstractValue& operand, const Params& p) {
  if (!operand.sharding) return lax::reshape(ct, operand.shape);
  Params params = p;
  params.set("new_sizes", operand.shape.dims());
  params.set("sharding", object_param(*operand.sharding));
  return bind1(primitive("reshape"), {ct}, params);
}

BatchResult reshape_batch(std::span<const Array> args, std::span<const int> dims,
                          const Params& params, const BatchContext& ctx) {
  if (!std::holds_alternative<NoneParam>(params.at("dimensions")))
    throw ValueError("[vmap] reshape with dimensions other than None cannot be batched");
  const Array x = batch_moveaxis(args[0], dims[0], 0);
  Params p = params;
  p.set("new_sizes", prepend(x.shape()[0], params.get_ints("new_sizes")));
  // JAX's get_sharding_for_vmap: the batch dim is split over vmap's explicit mesh axes.
  p.set("sharding", batched_out_sharding(params, "sharding", 0, ctx.explicit_mesh_axis));
  return result_at(bind1(primitive("reshape"), {x}, p), 0);
}

Array squeeze_transpose(const Array& ct, const AbstractValue&, const Params& p) {
  return expand_dims_or_forward(ct, p.get_ints("dimensions"));
}

BatchResult squeeze_batch(std::span<const Array> args, std::span<const int> dims,
                          const Params& params, const BatchContext&) {
  const Array x = batch_moveaxis(args[0], dims[0], 0);
  return result_at(lax::squeeze(x, add_each(params.get_ints("dimensions"), 1)), 0);
}

// ---- transpose ----------------------------------------------------------------------------------
std::vector<AbstractValue> transpose_rule(std::span<const AbstractValue> in, const Params& p) {
  require_unary("transpose", in);
  const Shape& s = in[0].shape;
  const auto& perm = p.get_ints("permutation");
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool valid = int(perm.size()) == s.ndim();
  for (size_t i = 0; valid && i < sorted.size(); ++i) valid = sorted[i] == int64_t(i);
  if (!valid)
    throw ValueError(
        "[transpose] permutation isn't a permutation of operand dimensions, got "
        "permutation " +
        ints_str(perm) + " for operand shape " + s.str());
  std::vector<int64_t> dims;
  for (int64_t d : perm) dims.push_back(s[int(d)]);
  return one(Shape(dims), in[0], in[0].weak_type);
}

void transpose_kernel(const KernelArgs& a) {
  const auto& perm = a.params.get_ints("permutation");
  const auto in_strides = in0(a).aval->shape.strides();
  std::vector<int64_t> strides;
  for (int64_t d : perm) strides.push_back(in_strides[size_t(d)]);
  cpu::strided_copy(in0(a).data, strides, a.out[0].data, a.out[0].aval->shape, isize(a));
}

// Result dim k is operand dim permutation[k].
ShardingRule transpose_sharding(std::span<const AbstractValue>, std::span<const AbstractValue> out,
                                const Params& p) {
  const Ints& perm = p.get_ints("permutation");
  ShardingRule rule;
  Factors operand(perm.size()), result;
  for (size_t k = 0; k < perm.size(); ++k) {
    result.push_back({rule.add_factor(out[0].shape[int(k)])});
    operand[size_t(perm[k])] = result.back();
  }
  rule.operands = {std::move(operand)};
  rule.results = {std::move(result)};
  rule.pad_all();
  return rule;
}

Array transpose_transpose(const Array& ct, const AbstractValue&, const Params& p) {
  return lax::transpose(ct, argsort(p.get_ints("permutation")));
}

BatchResult transpose_batch(std::span<const Array> args, std::span<const int> dims,
                            const Params& params, const BatchContext&) {
  const int bdim = dims[0];
  const Ints perm = prepend(bdim, bump(params.get_ints("permutation"), bdim));
  return result_at(lax::transpose(args[0], perm), 0);
}

// ---- rev ----------------------------------------------------------------------------------------
std::vector<AbstractValue> rev_rule(std::span<const AbstractValue> in, const Params& p) {
  require_unary("rev", in);
  check_dims("rev", p.get_ints("dimensions"), in[0].shape.ndim());
  return one(in[0].shape, in[0], in[0].weak_type);
}

void rev_kernel(const KernelArgs& a) {
  const Shape& s = in0(a).aval->shape;
  if (s.size() == 0) return;
  std::vector<int64_t> strides = s.strides();
  int64_t offset = 0;
  for (int64_t d : a.params.get_ints("dimensions")) {
    offset += (s[int(d)] - 1) * strides[size_t(d)];
    strides[size_t(d)] = -strides[size_t(d)];
  }
  const char* base = static_cast<const char*>(in0(a).data) + offset * isize(a);
  cpu::strided_copy(base, strides, a.out[0].data, s, isize(a));
}

ShardingRule rev_sharding(std::span<const AbstractValue> in, std::span<const AbstractValue> out,
                          const Params& p) {
  const Ints& dims = p.get_ints("dimensions");
  ShardingRule rule = dimwise_sharding(
      in, out, [&](int d) { return std::find(dims.begin(), dims.end(), d) == dims.end(); });
  for (int64_t d : dims) rule.shifts.push_back({int(d), -1, in[0].shape[int(d)] - 1});
  return rule;
}

Array rev_transpose(const Array& ct, const AbstractValue&, const Params& p) {
  return lax::rev(ct, p.get_ints("dimensions"));
}

BatchResult rev_batch(const Primitive& self, std::span<const Array> args, std::span<const int> dims,
                      const Params& params, const BatchContext&) {
  const Ints dimensions = bump(params.get_ints("dimensions"), dims[0]);
  return result_at(bind1(self, {args[0]}, Params{{"dimensions", dimensions}}), dims[0]);
}

// ---- concatenate --------------------------------------------------------------------------------
std::vector<AbstractValue> concatenate_rule(std::span<const AbstractValue> in, const Params& p) {
  if (in.empty()) throw ValueError("[concatenate] need at least one operand");
  const int64_t dim = p.get_int("dimension");
  const Shape& s0 = in[0].shape;
  if (dim < 0 || dim >= s0.ndim())
    throw AxisError("[concatenate] dimension " + std::to_string(dim) +
                    " is out of bounds for operands of rank " + std::to_string(s0.ndim()));
  Shape out = s0;
  bool weak = true;
  for (size_t i = 0; i < in.size(); ++i) {
    const AbstractValue& x = in[i];
    if (x.dtype != in[0].dtype)
      throw TypeError("[concatenate] requires arguments to have the same dtypes, got " +
                      std::string(dtype_name(in[0].dtype)) + ", " +
                      std::string(dtype_name(x.dtype)));
    bool same = x.shape.ndim() == s0.ndim();
    for (int d = 0; same && d < s0.ndim(); ++d) same = d == dim || x.shape[d] == s0[d];
    if (!same)
      throw ShapeError("[concatenate] operands must have equal shapes except along dimension " +
                       std::to_string(dim) + ", got " + s0.str() + " and " + x.shape.str());
    if (i > 0) out[int(dim)] += x.shape[int(dim)];
    weak = weak && x.weak_type;
  }
  return one(out, in[0], weak);
}

void concatenate_kernel(const KernelArgs& a) {
  const Shape& out = a.out[0].aval->shape;
  const int dim = int(a.params.get_int("dimension"));
  const auto out_strides = out.strides();
  char* dst = static_cast<char*>(a.out[0].data);
  for (const Operand& x : a.in) {
    const Shape& s = x.aval->shape;
    const auto in_strides = s.strides();
    cpu::strided_copy(x.data, in_strides, dst, out_strides, s.dims(), isize(a));
    dst += s[dim] * out_strides[size_t(dim)] * isize(a);
  }
}

// concatenate and split: the dim (param `key`) along which the pieces lie needs replication.
ShardingRuleFn pieces_along(const char* key, bool share_moved) {
  return [key, share_moved](std::span<const AbstractValue> in, std::span<const AbstractValue> out,
                            const Params& p) {
    const int64_t dim = p.get_int(key);
    return dimwise_sharding(
        in, out, [dim](int d) { return d != dim; }, share_moved);
  };
}

// Element j of the joined dim is element j - o of the operand that starts at o.
ShardingRule concatenate_sharding(std::span<const AbstractValue> in,
                                  std::span<const AbstractValue> out, const Params& p) {
  const int dim = int(p.get_int("dimension"));
  ShardingRule rule = pieces_along("dimension", /*share_moved=*/true)(in, out, p);
  int64_t start = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    rule.shifts.push_back({dim, 1, -start, 1, int(k)});
    start += in[k].shape[dim];
  }
  return rule;
}

std::vector<Array> concatenate_transpose(const Primitive& split, Cotangents ct, Inputs in,
                                         const Params& p) {
  const int64_t dim = p.get_int("dimension");
  Ints sizes;
  for (const LinearInput& x : in) sizes.push_back(x.aval.shape[int(dim)]);
  return for_linear(
      spmd::bind(split, std::vector<Array>{ct[0]}, Params{{"sizes", sizes}, {"axis", dim}}), in);
}

BatchResult concatenate_batch(std::span<const Array> args, std::span<const int> dims,
                              const Params& params, const BatchContext&) {
  return result_at(lax::concatenate(all_at_front(args, dims), params.get_int("dimension") + 1), 0);
}

// ---- pad ----------------------------------------------------------------------------------------
std::vector<AbstractValue> pad_rule(std::span<const AbstractValue> in, const Params& p) {
  if (in.size() != 2) throw ValueError("[pad] expected an operand and a padding value");
  const AbstractValue &x = in[0], &v = in[1];
  const auto& config = p.get<std::vector<lax::PadConfig>>("padding_config");
  if (x.dtype != v.dtype)
    throw TypeError("[pad] operand and padding_value must be same dtype: got " +
                    std::string(dtype_name(x.dtype)) + " and " + std::string(dtype_name(v.dtype)));
  if (v.shape.ndim() != 0)
    throw ShapeError("[pad] padding_value must be a scalar, got shape " + v.shape.str());
  if (int(config.size()) != x.shape.ndim())
    throw ValueError("[pad] padding_config must have one entry per operand dimension, got " +
                     std::to_string(config.size()) + " for operand shape " + x.shape.str());
  std::vector<int64_t> dims;
  for (int d = 0; d < x.shape.ndim(); ++d) {
    const lax::PadConfig& c = config[size_t(d)];
    if (c.interior < 0)
      throw ValueError("[pad] interior padding must be nonnegative, got " +
                       std::to_string(c.interior) + " for dimension " + std::to_string(d));
    const int64_t n = x.shape[d];
    // In 128 bits: padding near 2^62 on both sides overflows int64.
    const __int128 wide =
        __int128(c.low) + c.high + n + __int128(std::max<int64_t>(0, n - 1)) * c.interior;
    if (wide > INT64_MAX)
      throw ValueError("[pad] array is too big; dimension " + std::to_string(d) +
                       " after padding has more than 2^63 - 1 elements, got padding (low=" +
                       std::to_string(c.low) + ", high=" + std::to_string(c.high) + ", interior=" +
                       std::to_string(c.interior) + ") of operand shape " + x.shape.str());
    if (wide < 0)
      throw ShapeError("[pad] dimension size after padding is not at least 0, got " +
                       (wide < INT64_MIN ? "less than -2^63" : std::to_string(int64_t(wide))) +
                       " for dimension " + std::to_string(d) + " of operand shape " +
                       x.shape.str());
    dims.push_back(int64_t(wide));
  }
  return one(Shape(dims), x, x.weak_type && v.weak_type);
}

// Fills the output with the padding value, then copies the operand elements that land inside
// the output onto their (interior-spaced) positions.
void pad_kernel(const KernelArgs& a) {
  const Shape& s = in0(a).aval->shape;
  const Shape& out = a.out[0].aval->shape;
  const auto& config = a.params.get<std::vector<lax::PadConfig>>("padding_config");
  const int bytes = isize(a);
  const auto in_strides = s.strides(), out_strides = out.strides();
  std::vector<int64_t> n(size_t(s.ndim())), is(n.size()), os(n.size());
  int64_t in_off = 0, out_off = 0;
  bool covers_output = true;
  for (int d = 0; d < s.ndim(); ++d) {
    const lax::PadConfig& c = config[size_t(d)];
    const int64_t step = c.interior + 1;
    const int64_t first = c.low < 0 ? (-c.low + step - 1) / step : 0;
    const int64_t end =
        std::min(s[d], out[d] - c.low <= 0 ? 0 : (out[d] - c.low + step - 1) / step);
    n[size_t(d)] = std::max<int64_t>(0, end - first);
    is[size_t(d)] = in_strides[size_t(d)];
    os[size_t(d)] = out_strides[size_t(d)] * step;
    in_off += first * in_strides[size_t(d)];
    out_off += (c.low + first * step) * out_strides[size_t(d)];
    covers_output = covers_output && n[size_t(d)] == out[d] && step == 1;
  }
  if (!covers_output) cpu::fill(a.out[0].data, a.in[1].data, out.size(), bytes);
  const char* src = static_cast<const char*>(in0(a).data) + in_off * bytes;
  char* dst = static_cast<char*>(a.out[0].data) + out_off * bytes;
  cpu::strided_copy(src, is, dst, os, n, bytes);
}

// Dims without padding pass through; padded dims need replication.
ShardingRule pad_sharding(std::span<const AbstractValue> in, std::span<const AbstractValue> out,
                          const Params& p) {
  const auto& config = p.get<std::vector<lax::PadConfig>>("padding_config");
  ShardingRule rule = dimwise_sharding(
      in, out,
      [&](int d) {
        const lax::PadConfig& c = config[size_t(d)];
        return c.low == 0 && c.high == 0 && c.interior == 0;
      },
      /*share_moved=*/true);
  // Element j of a padded dim is element (j - low) / (interior + 1) of the operand where
  // interior + 1 divides j - low, or the padding value.
  for (size_t d = 0; d < config.size(); ++d)
    if (config[d].low != 0 || config[d].high != 0 || config[d].interior != 0)
      rule.shifts.push_back({int(d), 1, -config[d].low, config[d].interior + 1});
  if (!rule.shifts.empty()) rule.fill = 1;
  return rule;
}

// JAX's _pad_transpose: the operand's cotangent is the cotangent unpadded (negative padding)
// and strided past the interior padding; the padding value's is everything else.
std::vector<Array> pad_transpose(const Primitive& slice, Cotangents cts, Inputs in,
                                 const Params& p) {
  const Array& t = cts[0];
  const auto& config = p.get<std::vector<lax::PadConfig>>("padding_config");
  auto total = [&](const Array& x) { return lax::reduce_sum(x, range(0, t.ndim())); };
  auto unpad = [&] {
    std::vector<lax::PadConfig> unpad_config;
    Ints zeros, strides;
    for (const lax::PadConfig& c : config) {
      unpad_config.push_back({-c.low, -c.high, 0});
      zeros.push_back(0);
      strides.push_back(c.interior + 1);
    }
    Array unpadded = lax::pad(t, const_of(t, 0), unpad_config);
    const Params params{
        {"start_indices", zeros}, {"limit_indices", unpadded.shape().dims()}, {"strides", strides}};
    return bind1(slice, {unpadded}, params);
  };
  Array operand_ct = in[0].is_linear() ? unpad() : Array();
  Array value_ct;
  if (in[1].is_linear()) {
    Array whole = total(t);
    Array inner = total(is_zero(operand_ct) ? unpad() : operand_ct);
    value_ct = lax::sub(whole, inner);
  }
  return {operand_ct, value_ct};
}

// JAX's _pad_batch_rule. A batched padding value cannot be a pad operand: pad with zeros, then
// select the padding value wherever a padded mask of trues is false.
BatchResult pad_batch(std::span<const Array> args, std::span<const int> dims, const Params& params,
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
  if (!is_batched(value_d)) return result_at(lax::pad(x, value, config), x_d);
  const Array padded = lax::pad(x, ops::constant_like(x, 0), config);
  const Array mask =
      lax::pad(lax::broadcast_in_dim(Array(true), x.shape(), {}), Array(false), config);
  const Array values = lax::broadcast_in_dim(value, padded.shape(), {x_d});
  return result_at(lax::select(mask, padded, values), x_d);
}

// ---- slice --------------------------------------------------------------------------------------
std::vector<int64_t> slice_strides(const Params& p, size_t rank) {
  if (std::holds_alternative<NoneParam>(p.at("strides"))) return std::vector<int64_t>(rank, 1);
  return p.get_ints("strides");
}

std::vector<AbstractValue> slice_rule(std::span<const AbstractValue> in, const Params& p) {
  require_unary("slice", in);
  const Shape& s = in[0].shape;
  const auto& start = p.get_ints("start_indices");
  const auto& limit = p.get_ints("limit_indices");
  const auto strides = slice_strides(p, start.size());
  if (int(start.size()) != s.ndim() || limit.size() != start.size() ||
      strides.size() != start.size())
    throw ValueError(
        "[slice] start_indices, limit_indices and strides must have one entry per "
        "operand dimension, got " +
        ints_str(start) + ", " + ints_str(limit) + " and " + ints_str(strides) +
        " for operand shape " + s.str());
  std::vector<int64_t> dims;
  for (int d = 0; d < s.ndim(); ++d) {
    const int64_t b = start[size_t(d)], e = limit[size_t(d)], st = strides[size_t(d)];
    if (b < 0 || e > s[d] || b > e)
      throw IndexError("[slice] indices must satisfy 0 <= start <= limit <= size, got start " +
                       ints_str(start) + " and limit " + ints_str(limit) + " for operand shape " +
                       s.str());
    if (st <= 0) throw ValueError("[slice] strides must be positive, got " + ints_str(strides));
    dims.push_back((e - b + st - 1) / st);
  }
  return one(Shape(dims), in[0], in[0].weak_type);
}

bool whole_dim(const Params& p, const Shape& operand, int d) {
  const auto strides = slice_strides(p, size_t(operand.ndim()));
  return p.get_ints("start_indices")[size_t(d)] == 0 && strides[size_t(d)] == 1 &&
         p.get_ints("limit_indices")[size_t(d)] == operand[d];
}

// Dims taken whole pass through; a sliced dim is one permutation factor of the result's extent,
// as Shardy's (its split propagates between the operand and the result, and the partitioner
// moves halos along it). Element j of a sliced dim is element start + stride * j of the
// operand.
ShardingRule slice_sharding(std::span<const AbstractValue> in, std::span<const AbstractValue> out,
                            const Params& p) {
  ShardingRule rule = dimwise_sharding(
      in, out, [&](int d) { return whole_dim(p, in[0].shape, d); },
      /*share_moved=*/true);
  const Ints& start = p.get_ints("start_indices");
  const auto strides = slice_strides(p, start.size());
  for (int d = 0; d < in[0].shape.ndim(); ++d)
    if (!whole_dim(p, in[0].shape, d))
      rule.shifts.push_back({d, strides[size_t(d)], start[size_t(d)]});
  return rule;
}

// A dim taken whole ends at the block's extent. Other dims are not split, and their limits stay:
// a limit never exceeds the extent, so taking the smaller of the two changes only the former.
LocalizeFn localize_slice(const Primitive& slice) {
  return [&slice](const Params& params, std::span<const AbstractValue> local_in,
                  std::span<const AbstractValue>) {
    Ints limit = params.get_ints("limit_indices");
    for (size_t d = 0; d < limit.size(); ++d)
      limit[d] = std::min(limit[d], local_in[0].shape[int(d)]);
    Params p = params;
    p.set("limit_indices", limit);
    return LocalEquation{&slice, std::move(p)};
  };
}

void slice_kernel(const KernelArgs& a) {
  const Shape& s = in0(a).aval->shape;
  const auto& start = a.params.get_ints("start_indices");
  const auto steps = slice_strides(a.params, start.size());
  std::vector<int64_t> strides = s.strides();
  int64_t offset = 0;
  for (size_t d = 0; d < strides.size(); ++d) {
    offset += start[d] * strides[d];
    strides[d] *= steps[d];
  }
  const char* base = static_cast<const char*>(in0(a).data) + offset * isize(a);
  cpu::strided_copy(base, strides, a.out[0].data, a.out[0].aval->shape, isize(a));
}

// JAX's _slice_impl: an eager slice without strides runs as a dynamic_slice with runtime start
// indices, whose sharding rule leaves the sliced dims unsplit, so an eager slice of a split dim
// returns it whole where the same slice under jit keeps the split. An uncommitted operand's
// slice is the same either way, and the slice primitive is cheaper to run.
std::vector<Array> slice_impl(std::span<const Array> in, const Params& p) {
  if (!std::holds_alternative<NoneParam>(p.at("strides")) || !in[0].committed())
    return apply_primitive(primitive("slice"), in, p);
  // The slice's own checks and errors first: dynamic_slice would clamp bad starts.
  const std::vector<AbstractValue> out = slice_rule({&aval_of(in[0]), 1}, p);
  std::vector<Array> args{in[0]};
  for (int64_t start : p.get_ints("start_indices"))
    args.push_back(ops::scalar(double(start), int32, /*weak=*/true));
  return spmd::bind(primitive("dynamic_slice"), args, Params{{"slice_sizes", out[0].shape.dims()}});
}

// JAX's _slice_transpose: the cotangent padded back to the operand's shape, strides becoming
// interior padding.
Array slice_transpose(const Array& ct, const AbstractValue& operand, const Params& p) {
  const Ints& start = p.get_ints("start_indices");
  const Ints& limit = p.get_ints("limit_indices");
  const ParamValue& strides_param = p.at("strides");
  std::vector<lax::PadConfig> pads;
  for (size_t d = 0; d < start.size(); ++d) {
    const int64_t stride =
        std::holds_alternative<NoneParam>(strides_param) ? 1 : p.get_ints("strides")[d];
    const int64_t n = ct.shape()[int(d)];
    const int64_t real_limit =
        stride == 1 ? limit[d] : start[d] + (n == 0 ? 0 : 1 + (n - 1) * stride);
    pads.push_back({start[d], operand.shape[int(d)] - real_limit, stride - 1});
  }
  return lax::pad(ct, const_of(ct, 0), pads);
}

BatchResult slice_batch(const Primitive& self, std::span<const Array> args,
                        std::span<const int> dims, const Params& params, const BatchContext&) {
  const int bdim = dims[0];
  Params p = params;
  p.set("start_indices", insert_at(params.get_ints("start_indices"), bdim, 0));
  p.set("limit_indices", insert_at(params.get_ints("limit_indices"), bdim, args[0].shape()[bdim]));
  if (!std::holds_alternative<NoneParam>(params.at("strides")))
    p.set("strides", insert_at(params.get_ints("strides"), bdim, 1));
  return result_at(bind1(self, {args[0]}, p), bdim);
}

// ---- stack and unstack --------------------------------------------------------------------------
std::vector<AbstractValue> stack_rule(std::span<const AbstractValue> in, const Params& p) {
  if (in.empty()) throw ValueError("[stack] expects at least one operand, got 0");
  const Shape& s0 = in[0].shape;
  const int64_t axis = p.get_int("axis");
  if (axis < 0 || axis > s0.ndim())
    throw AxisError("[stack] axis " + std::to_string(axis) +
                    " is out of bounds for operands of "
                    "rank " +
                    std::to_string(s0.ndim()));
  bool weak = true;
  for (const AbstractValue& x : in) {
    if (x.dtype != in[0].dtype)
      throw TypeError("[stack] requires arguments to have the same dtypes, got " +
                      std::string(dtype_name(in[0].dtype)) + ", " +
                      std::string(dtype_name(x.dtype)));
    if (!(x.shape == s0))
      throw ShapeError("[stack] all input arrays must have the same shape, got " + s0.str() +
                       " and " + x.shape.str());
    weak = weak && x.weak_type;
  }
  std::vector<int64_t> dims = s0.dims();
  dims.insert(dims.begin() + axis, int64_t(in.size()));
  return one(Shape(dims), in[0], weak);
}

// Operand k fills index k of the new axis: the output strides without that axis.
void stack_kernel(const KernelArgs& a) {
  const size_t axis = size_t(a.params.get_int("axis"));
  const Shape& s = in0(a).aval->shape;
  std::vector<int64_t> out_strides = a.out[0].aval->shape.strides();
  const int64_t step = out_strides[axis] * isize(a);
  out_strides.erase(out_strides.begin() + long(axis));
  const auto in_strides = s.strides();
  char* dst = static_cast<char*>(a.out[0].data);
  for (const Operand& x : a.in) {
    cpu::strided_copy(x.data, in_strides, dst, out_strides, s.dims(), isize(a));
    dst += step;
  }
}

// stack and unstack: the dim `axis` of the stacked tensor indexes the pieces and needs
// replication; the pieces' dims are the stacked tensor's others.
ShardingRule stacked_sharding(const AbstractValue& stacked, size_t pieces, const Params& p,
                              bool stacking) {
  const int64_t axis = p.get_int("axis");
  ShardingRule rule;
  Factors whole, piece;
  for (int d = 0; d < stacked.shape.ndim(); ++d) {
    whole.push_back(d == axis ? unsplit(rule, stacked.shape[d])
                              : ShardingRule::Dim{rule.add_factor(stacked.shape[d])});
    if (d != axis) piece.push_back(whole.back());
  }
  std::vector<Factors> many(pieces, piece);
  rule.operands = stacking ? many : std::vector<Factors>{whole};
  rule.results = stacking ? std::vector<Factors>{whole} : many;
  rule.pad_all();
  return rule;
}

ShardingRule stack_sharding(std::span<const AbstractValue> in, std::span<const AbstractValue> out,
                            const Params& p) {
  return stacked_sharding(out[0], in.size(), p, true);
}
ShardingRule unstack_sharding(std::span<const AbstractValue> in, std::span<const AbstractValue> out,
                              const Params& p) {
  return stacked_sharding(in[0], out.size(), p, false);
}

// unstack (JAX's unstack_p, which stack's transpose emits): the slices of the operand along
// `axis`, that dimension removed.
std::vector<AbstractValue> unstack_rule(std::span<const AbstractValue> in, const Params& p) {
  if (in.size() != 1) throw ValueError("[unstack] expected one operand");
  const AbstractValue& x = in[0];
  const int64_t axis = p.get_int("axis");
  if (axis < 0 || axis >= x.shape.ndim())
    throw AxisError("[unstack] axis " + std::to_string(axis) +
                    " is out of bounds for an operand of shape " + x.shape.str());
  std::vector<int64_t> dims = x.shape.dims();
  dims.erase(dims.begin() + axis);
  return std::vector<AbstractValue>(size_t(x.shape[int(axis)]),
                                    AbstractValue{Shape(dims), x.dtype, x.weak_type});
}

void unstack_kernel(const KernelArgs& a) {
  const size_t axis = size_t(a.params.get_int("axis"));
  std::vector<int64_t> strides = a.in[0].aval->shape.strides();
  const int bytes = itemsize(a.in[0].aval->dtype);
  const int64_t step = strides[axis] * bytes;
  strides.erase(strides.begin() + long(axis));
  const char* src = static_cast<const char*>(a.in[0].data);
  for (const Result& out : a.out) {
    cpu::strided_copy(src, strides, out.data, out.aval->shape, bytes);
    src += step;
  }
}

std::vector<Array> stack_transpose(const Primitive& unstack, Cotangents ct, Inputs in,
                                   const Params& p) {
  return for_linear(
      spmd::bind(unstack, std::vector<Array>{ct[0]}, Params{{"axis", p.get_int("axis")}}), in);
}

BatchResult stack_batch(const Primitive& self, std::span<const Array> args,
                        std::span<const int> dims, const Params& params, const BatchContext&) {
  const int64_t axis = params.get_int("axis");
  const int bdim = dims[0];
  if (is_batched(bdim) && std::all_of(dims.begin(), dims.end(), [&](int d) { return d == bdim; })) {
    const bool before = axis <= bdim;
    return result_at(spmd::bind1(self, args, Params{{"axis", before ? axis : axis + 1}}),
                     before ? bdim + 1 : bdim);
  }
  return result_at(spmd::bind1(self, all_at_front(args, dims), Params{{"axis", axis + 1}}), 0);
}

std::vector<Array> unstack_transpose(const Primitive& stack, Cotangents ct, Inputs in,
                                     const Params& p) {
  const int64_t axis = p.get_int("axis");
  AbstractValue piece = in[0].aval;
  std::vector<int64_t> dims = piece.shape.dims();
  dims.erase(dims.begin() + axis);
  piece.shape = Shape(dims);
  if (piece.sharding) piece.sharding->dims.erase(piece.sharding->dims.begin() + axis);
  std::vector<AbstractValue> avals(ct.size(), piece);
  return {spmd::bind1(stack, instantiate_all(ct, avals), Params{{"axis", axis}})};
}

// JAX's _unstack_batch_rule.
BatchResult unstack_batch(const Primitive& self, std::span<const Array> args,
                          std::span<const int> dims, const Params& params, const BatchContext&) {
  const int64_t axis = params.get_int("axis");
  const int bdim = dims[0];
  const bool before = axis < bdim;
  return all_at(
      spmd::bind(self, std::vector<Array>{args[0]}, Params{{"axis", before ? axis : axis + 1}}),
      before ? bdim - 1 : bdim);
}

// ---- split (several outputs) and tile ----------------------------------------------------------
std::vector<AbstractValue> split_rule(std::span<const AbstractValue> in, const Params& p) {
  require_unary("split", in);
  const Shape& s = in[0].shape;
  const auto& sizes = p.get_ints("sizes");
  const int64_t axis = p.get_int("axis");
  if (axis < 0 || axis >= s.ndim())
    throw AxisError("[split] axis " + std::to_string(axis) +
                    " is out of bounds for an operand "
                    "of rank " +
                    std::to_string(s.ndim()));
  int64_t total = 0;
  for (int64_t n : sizes) {
    if (n < 0) throw ValueError("[split] sizes must be nonnegative, got " + ints_str(sizes));
    total += n;
  }
  if (total != s[int(axis)])
    throw ShapeError("[split] sum of sizes " + std::to_string(total) +
                     " must be equal to "
                     "dimension " +
                     std::to_string(axis) + " of the operand shape " + s.str());
  std::vector<AbstractValue> out;
  for (int64_t n : sizes) {
    Shape piece = s;
    piece[int(axis)] = n;
    out.push_back(AbstractValue{piece, in[0].dtype, in[0].weak_type});
  }
  return out;
}

void split_kernel(const KernelArgs& a) {
  const int axis = int(a.params.get_int("axis"));
  const auto strides = in0(a).aval->shape.strides();
  const char* src = static_cast<const char*>(in0(a).data);
  for (const Result& r : a.out) {
    cpu::strided_copy(src, strides, r.data, r.aval->shape, isize(a));
    src += r.aval->shape[axis] * strides[size_t(axis)] * isize(a);
  }
}

// JAX's _split_transpose_rule: the output cotangents (zeros instantiated) concatenated.
std::vector<Array> split_transpose(Cotangents ct, Inputs in, const Params& p) {
  std::vector<AbstractValue> avals;
  for (int64_t n : p.get_ints("sizes")) {
    AbstractValue piece = in[0].aval;
    piece.shape[int(p.get_int("axis"))] = n;
    avals.push_back(piece);
  }
  return {lax::concatenate(instantiate_all(ct, avals), p.get_int("axis"))};
}

BatchResult split_batch(const Primitive& self, std::span<const Array> args,
                        std::span<const int> dims, const Params& params, const BatchContext&) {
  const int64_t axis = params.get_int("axis");
  Params p = params;
  p.set("axis", axis >= dims[0] ? axis + 1 : axis);
  return all_at(spmd::bind(self, std::vector<Array>{args[0]}, p), dims[0]);
}

std::vector<AbstractValue> tile_rule(std::span<const AbstractValue> in, const Params& p) {
  require_unary("tile", in);
  const Shape& s = in[0].shape;
  const auto& reps = p.get_ints("reps");
  if (int(reps.size()) != s.ndim())
    throw ValueError("[tile] reps must have one entry per operand dimension, got " +
                     ints_str(reps) + " for operand shape " + s.str());
  std::vector<int64_t> dims;
  for (int d = 0; d < s.ndim(); ++d) {
    if (reps[size_t(d)] < 0)
      throw ValueError("[tile] reps must be nonnegative, got " + ints_str(reps));
    // JAX's rule: the repetitions of a split dim would each need the whole dim.
    if (reps[size_t(d)] != 1 && in[0].sharding && !in[0].sharding->dims[size_t(d)].empty())
      throw ShardingError("[tile] Operand cannot be sharded on dimension " + std::to_string(d) +
                          " when the tiling is non-trivial. Got input type: " + in[0].typeof_str() +
                          " with reps: " + ints_str(reps));
    dims.push_back(s[d] * reps[size_t(d)]);
  }
  return one(Shape(dims), in[0], in[0].weak_type);
}

// The output seen as (r0, n0, r1, n1, …) reads the operand with stride 0 on each r.
void tile_kernel(const KernelArgs& a) {
  const Shape& s = in0(a).aval->shape;
  const auto& reps = a.params.get_ints("reps");
  const auto in_strides = s.strides();
  std::vector<int64_t> view, strides;
  for (int d = 0; d < s.ndim(); ++d) {
    view.insert(view.end(), {reps[size_t(d)], s[d]});
    strides.insert(strides.end(), {0, in_strides[size_t(d)]});
  }
  cpu::strided_copy(in0(a).data, strides, a.out[0].data, Shape(view), isize(a));
}

// A dim repeated reps times is [r, n] in the result: the repetitions, a factor of the result
// only, major to the operand's dim n. A block holds whole repetitions of a block of the operand.
ShardingRule tile_sharding(std::span<const AbstractValue> in, std::span<const AbstractValue>,
                           const Params& p) {
  const Shape& x = in[0].shape;
  const Ints& reps = p.get_ints("reps");
  ShardingRule rule;
  Factors operand, result;
  for (int d = 0; d < x.ndim(); ++d) {
    result.emplace_back();
    if (reps[size_t(d)] != 1) result.back().push_back(rule.add_factor(reps[size_t(d)]));
    operand.push_back({rule.add_factor(x[d])});
    result.back().push_back(operand.back()[0]);
  }
  rule.operands = {std::move(operand)};
  rule.results = {std::move(result)};
  rule.pad_all();
  return rule;
}

// The repetitions a block holds.
LocalizeFn localize_tile(const Primitive& tile) {
  return [&tile](const Params& params, std::span<const AbstractValue> local_in,
                 std::span<const AbstractValue> local_out) {
    Ints reps = params.get_ints("reps");
    const Shape &x = local_in[0].shape, &y = local_out[0].shape;
    for (int d = 0; d < x.ndim(); ++d)
      if (x[d] > 0) reps[size_t(d)] = y[d] / x[d];
    Params p = params;
    p.set("reps", reps);
    return LocalEquation{&tile, std::move(p)};
  };
}

// JAX's _tile_transpose_rule: the cotangent seen as (reps_0, n_0, reps_1, n_1, …), each n_i
// split as the operand's dim i, summed over the repetitions.
Array tile_transpose(const Array& ct, const AbstractValue& operand, const Params& p) {
  const Ints& reps = p.get_ints("reps");
  std::vector<int64_t> split_shape;
  Ints axes;
  std::optional<TypeSharding> split_sharding = operand.sharding;
  if (split_sharding) split_sharding->dims.clear();
  for (int i = 0; i < operand.shape.ndim(); ++i) {
    split_shape.insert(split_shape.end(), {reps[size_t(i)], operand.shape[i]});
    axes.push_back(2 * i);
    if (split_sharding)
      split_sharding->dims.insert(split_sharding->dims.end(),
                                  {{}, operand.sharding->dims[size_t(i)]});
  }
  Array reshaped = ops::reshape(ct, Shape(split_shape), split_sharding);
  return lax::reduce_sum(reshaped, axes);
}

BatchResult tile_batch(const Primitive& self, std::span<const Array> args,
                       std::span<const int> dims, const Params& params, const BatchContext&) {
  const Ints reps = insert_at(params.get_ints("reps"), dims[0], 1);
  return result_at(bind1(self, {args[0]}, Params{{"reps", reps}}), dims[0]);
}

}  // namespace

void register_shape_primitives(PrimitiveRegistry& r) {
  Primitive& broadcast_in_dim =
      r.define("broadcast_in_dim", broadcast_in_dim_rule, broadcast_in_dim_kernel);
  deflinear(broadcast_in_dim, unary_transpose(broadcast_in_dim_transpose));
  broadcast_in_dim.batch = binding(broadcast_in_dim, broadcast_in_dim_batch);
  broadcast_in_dim.sharding_rule = broadcast_in_dim_sharding;
  broadcast_in_dim.keeps_constants = true;
  broadcast_in_dim.spreads_scalar = true;
  broadcast_in_dim.localize = localize_result_shape(broadcast_in_dim, "shape");
  broadcast_in_dim.hides_param = [](std::string_view key, const ParamValue& v) {
    return key == "shape" || key == "sharding" ||
           (key == "broadcast_dimensions" && is_empty_ints(v));
  };

  Primitive& reshape = r.define("reshape", reshape_rule, copy_kernel);
  reshape.output_aliases_input = true;
  reshape.keeps_constants = true;
  deflinear(reshape, unary_transpose(reshape_transpose));
  reshape.batch = reshape_batch;
  reshape.sharding_rule = reshape_sharding;
  reshape.type_sharding_rule = reshape_type_sharding;
  reshape.localize = localize_result_shape(reshape, "new_sizes");

  Primitive& squeeze = r.define("squeeze", squeeze_rule, copy_kernel);
  squeeze.output_aliases_input = true;
  squeeze.keeps_constants = true;
  deflinear(squeeze, unary_transpose(squeeze_transpose));
  squeeze.batch = squeeze_batch;
  squeeze.sharding_rule = squeeze_sharding;

  Primitive& transpose = r.define("transpose", transpose_rule, transpose_kernel);
  deflinear(transpose, unary_transpose(transpose_transpose));
  transpose.batch = transpose_batch;
  transpose.sharding_rule = transpose_sharding;

  Primitive& rev = r.define("rev", rev_rule, rev_kernel);
  deflinear(rev, unary_transpose(rev_transpose));
  rev.batch = binding(rev, rev_batch);
  rev.sharding_rule = rev_sharding;
  rev.keeps_constants = true;

  Primitive& concatenate = r.define("concatenate", concatenate_rule, concatenate_kernel);
  Primitive& split = r.define("split", split_rule, split_kernel);
  deflinear(concatenate, binding(split, concatenate_transpose));
  concatenate.batch = concatenate_batch;
  deflinear(split, split_transpose);
  split.batch = binding(split, split_batch);
  concatenate.sharding_rule = concatenate_sharding;
  concatenate.keeps_constants = true;
  split.sharding_rule = pieces_along("axis", /*share_moved=*/false);

  Primitive& stack = r.define("stack", stack_rule, stack_kernel);
  Primitive& unstack = r.define("unstack", unstack_rule, unstack_kernel);
  deflinear(stack, binding(unstack, stack_transpose));
  stack.batch = binding(stack, stack_batch);
  deflinear(unstack, binding(stack, unstack_transpose));
  unstack.batch = binding(unstack, unstack_batch);
  stack.sharding_rule = stack_sharding;
  unstack.sharding_rule = unstack_sharding;

  Primitive& pad = r.define("pad", pad_rule, pad_kernel);
  Primitive& slice = r.define("slice", slice_rule, slice_kernel);
  deflinear(pad, binding(slice, pad_transpose));
  pad.batch = pad_batch;
  deflinear(slice, unary_transpose(slice_transpose));
  slice.batch = binding(slice, slice_batch);
  pad.sharding_rule = pad_sharding;
  pad.keeps_constants = true;
  slice.sharding_rule = slice_sharding;
  slice.keeps_constants = true;
  slice.localize = localize_slice(slice);
  slice.impl = slice_impl;
  slice.type_sharding_rule = keep_operand_sharding("slice", "slicing");

  Primitive& tile = r.define("tile", tile_rule, tile_kernel);
  deflinear(tile, unary_transpose(tile_transpose));
  tile.batch = binding(tile, tile_batch);
  tile.sharding_rule = tile_sharding;
  tile.localize = localize_tile(tile);
}

}  // namespace spmd

// Helpers shared by the transformation rules.
#include "prims/rule_util.h"

#include <spmd/error.h>
#include <spmd/lax.h>

#include "backends/cpu/elementwise.h"
#include "core/axis_env.h"
#include "ops/op_util.h"
#include "prims/collectives.h"
#include "prims/families.h"
#include "prims/primitive.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <stdexcept>

namespace spmd {

Array zeros_like_aval(const AbstractValue& aval) {
  Array zero = ops::scalar(0.0, aval.dtype, aval.weak_type);
  if (aval.shape.ndim() != 0) zero = ops::broadcast_in_dim(zero, aval.shape, {}, aval.sharding);
  // Inside shard_map the zeros vary over the same mesh axes as the value they stand for.
  return aval.vma.empty() ? zero : collectives::pvary_cast(zero, aval.vma);
}

Array empty_like_aval(const AbstractValue& aval) {
  Array empty = spmd::bind1(
      primitive("empty2"), std::span<const Array>{},
      Params{{"dtype", aval.dtype}, {"memory_space", std::string("MemorySpace.Device")}});
  // Inside shard_map the placeholder varies over the same mesh axes as the value it stands for.
  if (!aval.vma.empty()) empty = collectives::pvary_cast(empty, aval.vma);
  if (aval.shape.ndim() == 0) return empty;
  return ops::broadcast_in_dim(empty, aval.shape, {}, aval.sharding);
}

Array instantiate_zero(const Array& tangent, const AbstractValue& aval) {
  return is_zero(tangent) ? zeros_like_aval(aval) : tangent;
}

Array const_of(const Array& x, double v) {
  return ops::scalar(v, x.dtype(), false);
}

Array scalar_like(const Array& x, double v) {
  return ops::constant_like(x, v);
}

Array maybe_broadcast(const Shape& target, const Array& x) {
  const Shape& s = x.shape();
  if (s == target) return x;
  if (s.ndim() == 0) return lax::broadcast_in_dim(x, target, {});
  std::vector<int64_t> kept, kept_sizes;
  for (int i = 0; i < s.ndim(); ++i) {
    if (s[i] != target[i]) continue;
    kept.push_back(i);
    kept_sizes.push_back(s[i]);
  }
  Array squeezed = lax::reshape(x, Shape(kept_sizes));
  return lax::broadcast_in_dim(squeezed, target, kept);
}

JvpRule standard_jvp(const Primitive& p, std::vector<TangentRule> rules) {
  return [p = &p, rules = std::move(rules)](std::span<const Array> x, std::span<const Array> t,
                                            const Params& params) {
    Array ans = bind1(*p, x, params);
    std::vector<Array> parts;
    for (size_t i = 0; i < rules.size(); ++i)
      if (rules[i] && !is_zero(t[i])) parts.push_back(rules[i](t[i], Primal{x, ans, params}));
    Array out;
    for (const Array& part : parts) out = add_cotangents(out, part);
    return JvpResult{{ans}, {out}};
  };
}

JvpRule unary_jvp(const Primitive& p, UnaryTangentRule rule) {
  return standard_jvp(
      p, {[rule](const Array& g, const Primal& in) { return rule(g, in.x[0], in.ans); }});
}

JvpResult linear_jvp(const Primitive& p, std::span<const Array> x, std::span<const Array> t,
                     const Params& params) {
  JvpResult r;
  r.primals_out = spmd::bind(p, x, params);
  if (std::all_of(t.begin(), t.end(), is_zero)) {
    r.tangents_out.resize(r.primals_out.size());
    return r;
  }
  std::vector<Array> tangents;
  for (size_t i = 0; i < x.size(); ++i) tangents.push_back(instantiate_zero(t[i], aval_of(x[i])));
  r.tangents_out = spmd::bind(p, tangents, params);
  return r;
}

namespace {

// x broadcast to a new dim of extent `size` at `to`, the result typed `sharding` when given.
Array insert_batch_dim(const Array& x, int to, int64_t size,
                       const std::optional<TypeSharding>& sharding) {
  std::vector<int64_t> shape(x.shape().begin(), x.shape().end());
  shape.insert(shape.begin() + to, size);
  std::vector<int64_t> dims;
  for (int i = 0; i < x.ndim(); ++i) dims.push_back(i < to ? i : i + 1);
  // As JAX's batching.broadcast, the broadcast value is cast to vary over vmap's spmd_axis_name.
  if (sharding)
    return spmd_names_insert_pvary(ops::broadcast_in_dim(x, Shape(shape), dims, sharding));
  return spmd_names_insert_pvary(lax::broadcast_in_dim(x, Shape(shape), dims));
}

}  // namespace

Array move_batch_dim(const Array& x, int from, int to, int64_t axis_size) {
  if (from == to) return x;
  if (from == kNotBatched) return insert_batch_dim(x, to, axis_size, std::nullopt);
  std::vector<int64_t> perm(static_cast<size_t>(x.ndim()));
  std::iota(perm.begin(), perm.end(), 0);
  perm.erase(perm.begin() + from);
  perm.insert(perm.begin() + to, from);
  return lax::transpose(x, perm);
}

JvpRule linear_jvp_rule(const Primitive& p) {
  return [p = &p](std::span<const Array> x, std::span<const Array> t, const Params& params) {
    return linear_jvp(*p, x, t, params);
  };
}

void deflinear(Primitive& prim, TransposeRule transpose) {
  prim.jvp = linear_jvp_rule(prim);
  prim.transpose = std::move(transpose);
}

void deflinear(PrimitiveRegistry& r, const char* name, TransposeRule transpose) {
  deflinear(r.at(name), std::move(transpose));
}

// ---- dimension lists ----------------------------------------------------------------------------
std::vector<int64_t> range(int64_t begin, int64_t end) {
  std::vector<int64_t> out;
  for (int64_t i = begin; i < end; ++i) out.push_back(i);
  return out;
}

std::vector<int64_t> remaining(int64_t n, const std::vector<int64_t>& removed,
                               const std::vector<int64_t>& also_removed) {
  auto has = [](const std::vector<int64_t>& v, int64_t x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i)
    if (!has(removed, i) && !has(also_removed, i)) out.push_back(i);
  return out;
}

std::vector<int64_t> argsort(const std::vector<int64_t>& v) {
  std::vector<int64_t> order = range(0, int64_t(v.size()));
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return v[size_t(a)] < v[size_t(b)]; });
  return order;
}

std::vector<int64_t> concat(std::vector<int64_t> a, const std::vector<int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<int64_t> bump(const std::vector<int64_t>& dims, int64_t b) {
  std::vector<int64_t> out;
  for (int64_t d : dims) out.push_back(d + (d >= b ? 1 : 0));
  return out;
}

std::vector<int64_t> add_each(const std::vector<int64_t>& dims, int64_t k) {
  std::vector<int64_t> out;
  for (int64_t d : dims) out.push_back(d + k);
  return out;
}

std::vector<int64_t> insert_at(std::vector<int64_t> v, int64_t pos, int64_t value) {
  v.insert(v.begin() + pos, value);
  return v;
}

std::vector<int64_t> prepend(int64_t value, const std::vector<int64_t>& v) {
  return insert_at(v, 0, value);
}

Array strong_zeros(const Shape& shape, DType dtype) {
  return zeros_like_aval(AbstractValue{shape, dtype, false});
}

Array broadcast_or_forward(const Array& x, const Shape& shape, const std::vector<int64_t>& dims,
                           const std::optional<TypeSharding>& sharding) {
  if (x.shape() == shape && dims == range(0, x.ndim()) &&
      (!sharding || sharding == aval_of(x).sharding))
    return x;
  return ops::broadcast_in_dim(x, shape, dims, sharding);
}

Array expand_dims_or_forward(const Array& x, const std::vector<int64_t>& dims) {
  std::vector<int64_t> shape, kept;
  for (int64_t i = 0, k = 0; i < x.ndim() + int64_t(dims.size()); ++i) {
    if (std::find(dims.begin(), dims.end(), i) != dims.end()) {
      shape.push_back(1);
    } else {
      shape.push_back(x.shape()[int(k++)]);
      kept.push_back(i);
    }
  }
  return broadcast_or_forward(x, Shape(shape), kept);
}

TransposeRule unary_transpose(Array (*rule)(const Array& ct, const AbstractValue& operand,
                                            const Params& params)) {
  return [rule](std::span<const Array> ct, std::span<const LinearInput> in, const Params& params) {
    return std::vector<Array>{rule(ct[0], in[0].aval, params)};
  };
}

// ---- sharding -----------------------------------------------------------------------------------
ShardingRule elementwise_sharding(std::span<const AbstractValue> in,
                                  std::span<const AbstractValue> out, const Params&) {
  return elementwise_sharding_rule(in, out);
}

ShardingRule replicated_sharding(std::span<const AbstractValue> in,
                                 std::span<const AbstractValue> out, const Params&) {
  return replicated_sharding_rule(in, out);
}

// ---- batching -----------------------------------------------------------------------------------
std::vector<Array> to_vector(std::span<const Array> xs) {
  return {xs.begin(), xs.end()};
}

int64_t mapped_size(std::span<const Array> args, std::span<const int> dims) {
  for (size_t i = 0; i < args.size(); ++i)
    if (is_batched(dims[i])) return args[i].shape()[dims[i]];
  throw std::logic_error("batching rule called without a batched operand");
}

BatchResult result_at(Array out, int dim) {
  return {{std::move(out)}, {dim}};
}

BatchResult all_at(std::vector<Array> outs, int dim) {
  std::vector<int> dims(outs.size(), dim);
  return {std::move(outs), std::move(dims)};
}

Array batch_moveaxis(const Array& x, int from, int to) {
  return move_batch_dim(x, from, to, 0);
}

Array bdim_at_front(const Array& x, int dim, int64_t size) {
  return move_batch_dim(x, dim, 0, size);
}

Array move_batch_dim(const Array& x, int from, int to, const BatchContext& ctx) {
  const std::optional<TypeSharding>& typed = aval_of(x).sharding;
  if (from != kNotBatched || !typed || ctx.explicit_mesh_axis.empty())
    return move_batch_dim(x, from, to, ctx.axis_size);
  TypeSharding sharding = *typed;
  sharding.dims.insert(sharding.dims.begin() + to, ctx.explicit_mesh_axis);
  return insert_batch_dim(x, to, ctx.axis_size, sharding);
}

Array bdim_at_front(const Array& x, int dim, const BatchContext& ctx) {
  return move_batch_dim(x, dim, 0, ctx);
}

std::vector<std::string> varying_spmd_axis_names() {
  std::vector<std::string> manual;
  for (const std::string& a : spmd_axis_names()) {
    const std::optional<AxisFrame> frame = find_axis(a);
    if (frame && frame->vma) manual.push_back(a);
  }
  return manual;
}

Array spmd_names_insert_pvary(const Array& x) {
  const std::vector<std::string> manual = varying_spmd_axis_names();
  if (manual.empty()) return x;
  std::vector<std::string> missing = vma_minus(manual, aval_of(x).vma);
  return missing.empty() ? x : collectives::pvary_cast(x, std::move(missing));
}

std::vector<Array> spmd_names_insert_pvary(std::vector<Array> xs) {
  for (Array& x : xs) x = spmd_names_insert_pvary(x);
  return xs;
}

PartitionSpec batch_spec(const PartitionSpec& spec, int dim, const BatchContext& ctx) {
  std::vector<PartitionSpec::Entry> entries = spec.entries();
  if (int(entries.size()) < dim) entries.resize(size_t(dim));
  PartitionSpec::Entry batch;
  if (!ctx.spmd_axis_name.empty()) batch = AxisNames(ctx.spmd_axis_name, true);
  entries.insert(entries.begin() + dim, std::move(batch));
  return PartitionSpec(std::move(entries));
}

bool names_spmd_axis(const PartitionSpec& spec, const BatchContext& ctx) {
  for (int d = 0; d < spec.size(); ++d)
    for (const std::string& a : spec.axes_of(d))
      if (std::count(ctx.spmd_axis_name.begin(), ctx.spmd_axis_name.end(), a)) return true;
  return false;
}

VmaRule vma_as_traced(const Primitive& p) {
  return [&p](std::span<const AbstractValue> in, const Params& params) {
    VmaTypes vma;
    for (AbstractValue& t : p.shape_rule(in, params)) vma.push_back(std::move(t.vma));
    return vma;
  };
}

}  // namespace spmd

// Primitive family: collectives over named axes with JAX's names, params, shape rules and errors,
// each with its transformation rules after JAX's jax/_src/lax/parallel.py. This file holds the
// reductions (psum, pmax, pmin) and the collectives that move data (all_gather, reduce_scatter,
// all_to_all, ppermute, pbroadcast); axis_ops.cpp holds axis_index, pvary and psum_invariant.
// Kernels run on a device thread of a launch (pmap, shard_map) and talk to the launch's
// Communicator; under vmap the batching rules replace them before anything runs: a collective
// over the vmap's axis is computed along the batch dimension, one over other axes is bound again
// with the batch dimension kept.
#include "prims/collectives.h"

#include <spmd/error.h>
#include <spmd/lax.h>
#include <spmd/ops.h>

#include "backends/cpu/copy.h"
#include "backends/cpu/reduce.h"
#include "core/axis_env.h"
#include "ops/op_util.h"
#include "prims/families.h"
#include "prims/primitive.h"
#include "prims/rule_util.h"
#include "runtime/launch.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>

namespace spmd {
namespace {

std::string prefix(const char* api) {
  return std::string("[") + api + "] ";
}

// Python's repr of a tuple of int tuples: ((0, 1), (2,)).
std::string int_tuples(const std::vector<std::vector<int>>& tuples) {
  std::string s = "(";
  for (size_t i = 0; i < tuples.size(); ++i) {
    s += i ? ", (" : "(";
    for (size_t k = 0; k < tuples[i].size(); ++k)
      s += (k ? ", " : "") + std::to_string(tuples[i][k]);
    s += tuples[i].size() == 1 ? ",)" : ")";
  }
  return s + (tuples.size() == 1 ? ",)" : ")");
}

}  // namespace

namespace collectives {
namespace {

// Python's repr of psum's axes tuple: ('x', 0).
std::string axes_repr(const std::vector<ReduceAxis>& axes) {
  std::string repr = "(";
  for (size_t i = 0; i < axes.size(); ++i) {
    repr += i ? ", " : "";
    if (auto* a = std::get_if<int64_t>(&axes[i]))
      repr += std::to_string(*a);
    else
      repr += "'" + std::get<std::string>(axes[i]) + "'";
  }
  return repr + (axes.size() == 1 ? ",)" : ")");
}

void hash_ints(size_t& h, const std::vector<int>& xs) {
  hash_combine(h, xs.size());
  for (int x : xs) hash_combine(h, std::hash<int>{}(x));
}

}  // namespace
}  // namespace collectives

// The collectives' parameter values that the plain ParamValue alternatives do not cover.
template <>
struct ParamTraits<std::vector<collectives::ReduceAxis>> {
  static constexpr std::string_view name = "psum axes";
  static std::string str(const std::vector<collectives::ReduceAxis>& axes) {
    return collectives::axes_repr(axes);
  }
  static size_t hash(const std::vector<collectives::ReduceAxis>& axes) {
    size_t h = 0;
    for (const auto& a : axes)
      hash_combine(
          h,
          std::visit([](const auto& x) { return std::hash<std::decay_t<decltype(x)>>{}(x); }, a));
    return h;
  }
};

template <>
struct ParamTraits<AxisIndexGroups> {
  static constexpr std::string_view name = "axis_index_groups";
  static std::string str(const AxisIndexGroups& groups) { return int_tuples(groups); }
  static size_t hash(const AxisIndexGroups& groups) {
    size_t h = 0;
    for (const auto& g : groups) collectives::hash_ints(h, g);
    return h;
  }
};

template <>
struct ParamTraits<collectives::Perm> {
  static constexpr std::string_view name = "ppermute perm";
  static std::string str(const collectives::Perm& perm) {
    std::vector<std::vector<int>> pairs;
    for (auto [s, d] : perm) pairs.push_back({s, d});
    return int_tuples(pairs);
  }
  static size_t hash(const collectives::Perm& perm) {
    size_t h = 0;
    for (auto [s, d] : perm) collectives::hash_ints(h, {s, d});
    return h;
  }
};

namespace collectives {

std::vector<ReduceAxis> read_axes(const Params& p) {
  const ParamValue& v = p.at("axes");
  std::vector<ReduceAxis> out;
  if (auto* names = std::get_if<std::vector<std::string>>(&v)) {
    for (const auto& n : *names) out.emplace_back(n);
  } else if (auto* ints = std::get_if<std::vector<int64_t>>(&v)) {
    for (int64_t a : *ints) out.emplace_back(a);
  } else {
    out = p.get_object<std::vector<ReduceAxis>>("axes");
  }
  return out;
}

// All names or all positions print as the plain tuples; a mix needs its own value.
ParamValue axes_param(const std::vector<ReduceAxis>& axes) {
  std::vector<std::string> names = named_axes(axes);
  std::vector<int64_t> positions = positional_axes(axes);
  if (positions.empty()) return names;
  if (names.empty()) return positions;
  return object_param(axes);
}

std::vector<std::string> named_axes(const std::vector<ReduceAxis>& axes) {
  std::vector<std::string> out;
  for (const auto& a : axes)
    if (auto* n = std::get_if<std::string>(&a)) out.push_back(*n);
  return out;
}

std::vector<int64_t> positional_axes(const std::vector<ReduceAxis>& axes) {
  std::vector<int64_t> out;
  for (const auto& a : axes)
    if (auto* d = std::get_if<int64_t>(&a)) out.push_back(*d);
  return out;
}

ParamValue names_param(const AxisNames& names) {
  if (names.is_tuple() || names.size() != 1) return names.names();
  return names.names()[0];
}

ParamValue tuple_param(const std::vector<std::string>& names) {
  return names;
}

std::vector<std::string> read_names(const Params& p, const char* key) {
  const ParamValue& v = p.at(key);
  if (auto* s = std::get_if<std::string>(&v)) return {*s};
  return std::get<std::vector<std::string>>(v);
}

ParamValue groups_param(const std::optional<AxisIndexGroups>& groups) {
  if (!groups) return NoneParam{};
  return object_param(*groups);
}

void validate_groups(const std::optional<AxisIndexGroups>& groups, const char* api) {
  if (!groups) return;
  std::vector<int> seen;
  for (const auto& g : *groups) seen.insert(seen.end(), g.begin(), g.end());
  std::sort(seen.begin(), seen.end());
  for (size_t i = 0; i < seen.size(); ++i)
    if (seen[i] != int(i))
      throw ValueError(prefix(api) + "axis_index_groups must cover all indices exactly once");
}

std::optional<AxisIndexGroups> read_groups(const Params& p) {
  if (!p.has("axis_index_groups")) return std::nullopt;
  const ParamValue& v = p.at("axis_index_groups");
  if (std::holds_alternative<NoneParam>(v)) return std::nullopt;
  return p.get_object<AxisIndexGroups>("axis_index_groups");
}

ParamValue perm_param(const Perm& perm) {
  return object_param(perm);
}

const Perm& read_perm(const Params& p) {
  return p.get_object<Perm>("perm");
}

int64_t axis_size_of(const std::string& name, const char* api) {
  if (auto frame = find_axis(name)) return frame->size;
  if (const runtime::LaunchContext* ctx = runtime::current_launch()) {
    int a = ctx->axis_of(name);
    if (a >= 0) return ctx->axis_sizes[size_t(a)];
  }
  throw NameError(prefix(api) + "unbound axis name: " + name);
}

void check_distinct(const std::vector<std::string>& names, const char* api) {
  for (auto it = names.begin(); it != names.end(); ++it)
    if (std::find(names.begin(), it, *it) != it)
      throw ValueError(prefix(api) + "repeated axis in `axis_name` argument, got " +
                       tuple_repr(names));
}

int64_t axes_size(const std::vector<std::string>& names, const char* api) {
  check_distinct(names, api);
  int64_t n = 1;
  for (const auto& name : names) n *= axis_size_of(name, api);
  return n;
}

std::vector<std::string> communicating_axes(const Params& params) {
  return params.has("axes") ? named_axes(read_axes(params)) : read_names(params);
}

}  // namespace collectives

namespace collectives {

void check_bound(const std::vector<std::string>& names, const char* api) {
  check_distinct(names, api);
  for (const auto& name : names) {
    if (find_axis(name)) continue;
    const runtime::LaunchContext* ctx = runtime::current_launch();
    if (ctx && ctx->axis_of(name) >= 0) continue;
    throw NameError(prefix(api) + "Found an unbound axis name: " + name +
                    ". To fix this, please call " + api + " under `sp::shard_map`.");
  }
}

namespace {

// The subgroup of `g` that holds this device (positions along the named axes).
runtime::Group subgroup_of(const char* api, const runtime::Group& g,
                           const AxisIndexGroups& groups) {
  for (const auto& sub : groups) {
    auto it = std::find(sub.begin(), sub.end(), g.me);
    if (it == sub.end()) continue;
    runtime::Group mine;
    for (int k : sub) mine.ranks.push_back(g.ranks[size_t(k)]);
    mine.me = int(it - sub.begin());
    return mine;
  }
  throw ValueError(prefix(api) + "axis_index_groups must cover all indices exactly once");
}

// Whether two lists of axis names are equal, compared character by character: names are a few
// characters, for which a call of memcmp per name costs more (this runs for every collective).
bool same_names(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string& x = a[i];
    const std::string& y = b[i];
    if (x.size() != y.size()) return false;
    for (size_t k = 0; k < x.size(); ++k)
      if (x[k] != y[k]) return false;
  }
  return true;
}

}  // namespace

Participants participants(const char* api, const std::vector<std::string>& names,
                          const std::optional<AxisIndexGroups>& groups) {
  const runtime::LaunchContext* ctx = runtime::current_launch();
  if (ctx)
    for (const runtime::LaunchContext::KnownGroup& k : ctx->known_groups)
      if (same_names(k.names, names) && k.subgroups == groups)
        return Participants{ctx, k.group.ranks, k.group.me};
  for (const auto& name : names)
    if (!ctx || ctx->axis_of(name) < 0) throw NameError(prefix(api) + "unbound axis name: " + name);
  runtime::Group g = runtime::group_over(*ctx, names);
  if (groups) g = subgroup_of(api, g, *groups);
  const auto& known = ctx->known_groups.emplace_back(
      runtime::LaunchContext::KnownGroup{names, groups, std::move(g)});
  return Participants{ctx, known.group.ranks, known.group.me};
}

std::vector<std::string> typed(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const std::string& n : names) {
    std::optional<AxisFrame> f = find_axis(n);
    if (f && f->vma) out.push_back(n);
  }
  return out;
}

std::string tuple_repr(const std::vector<std::string>& names) {
  std::string s = "(";
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", '" : "'") + names[i] + "'";
  return s + (names.size() == 1 ? ",)" : ")");
}

std::string frozenset_repr(const std::vector<std::string>& names) {
  if (names.empty()) return "frozenset()";
  std::string s = "frozenset({";
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", '" : "'") + names[i] + "'";
  return s + "})";
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::vector<std::string> without(const std::vector<std::string>& names, const std::string& name) {
  std::vector<std::string> out;
  for (const auto& n : names)
    if (n != name) out.push_back(n);
  return out;
}

Params with(Params p, const char* key, ParamValue value) {
  p.set(key, std::move(value));
  return p;
}

BatchResult single(Array out, int dim) {
  return {{std::move(out)}, {dim}};
}

Primitive& define_collective(PrimitiveRegistry& r, const char* name, ShapeRule shape,
                             CpuKernel kernel) {
  Primitive& p = r.define(name, std::move(shape), std::move(kernel));
  p.device_dependent = true;
  p.axis_names = communicating_axes;
  // Collectives run only in manual bodies (shard_map, pmap), on per-device values the
  // partitioner never splits: their rule is never consulted, and replicated is always correct.
  p.sharding_rule = [](std::span<const AbstractValue> in, std::span<const AbstractValue> out,
                       const Params&) { return replicated_sharding_rule(in, out); };
  // In a body manual over some mesh axes only, types split dims over the others (a vmapped
  // shard_map's batch dim, split over an Explicit axis): a collective over manual axes keeps
  // its operand's splits (a result of another rank is unsplit unless its primitive says how,
  // with_changed_rank_splits).
  p.type_sharding_rule = [](std::span<const AbstractValue> in, std::span<AbstractValue> out,
                            const Params&) {
    for (size_t k = 0; k < out.size() && !in.empty(); ++k) {
      const AbstractValue& from = in[std::min(k, in.size() - 1)];
      if (!from.sharding) continue;
      out[k].sharding = from.sharding;
      if (from.shape.ndim() != out[k].shape.ndim())
        out[k].sharding->dims.assign(size_t(out[k].shape.ndim()), {});
    }
  };
  return p;
}

namespace {

// The type sharding rule of a collective whose untiled form inserts (all_gather) or removes
// (reduce_scatter) the dim its param `dim_key` names: the operand's other dims keep their splits
// (a vmapped shard_map's batch dim its split over an Explicit axis), the inserted dim unsplit.
// JAX 0.10.2 keeps the operand's spec by position instead, which agrees wherever the split dims
// come before that dim (a batch dim vmap puts first).
void with_changed_rank_splits(Primitive& p, const char* dim_key) {
  p.type_sharding_rule = [dim_key](std::span<const AbstractValue> in, std::span<AbstractValue> out,
                                   const Params& params) {
    if (!in[0].sharding) return;
    out[0].sharding = in[0].sharding;
    std::vector<std::vector<std::string>>& dims = out[0].sharding->dims;
    const auto at = dims.begin() + params.get_int(dim_key);
    if (out[0].shape.ndim() > in[0].shape.ndim()) dims.insert(at, std::vector<std::string>());
    if (out[0].shape.ndim() < in[0].shape.ndim()) dims.erase(at);
  };
}

}  // namespace

}  // namespace collectives

namespace {

using namespace collectives;
using runtime::ReduceOp;
using Ints = std::vector<int64_t>;

// The number of instances one collective spans: the axis size, or a subgroup's size.
int64_t group_size(const std::optional<AxisIndexGroups>& groups, int64_t axis_size,
                   const char* api) {
  if (!groups) return axis_size;
  validate_groups(groups, api);
  int64_t covered = 0;
  for (const auto& g : *groups) covered += int64_t(g.size());
  if (covered != axis_size)
    throw ValueError(prefix(api) + "axis_index_groups must cover all indices exactly once");
  return int64_t((*groups)[0].size());
}

// all_gather, psum_scatter and all_to_all stack or split by the group size, so JAX requires that
// "all groups must be the same size" (its lowering fails on others, or splits by the first's).
void check_equal_groups(const std::optional<AxisIndexGroups>& groups, const char* api) {
  if (!groups) return;
  for (const auto& g : *groups)
    if (g.size() != (*groups)[0].size())
      throw ValueError(prefix(api) + "axis_index_groups must all be the same size, got " +
                       int_tuples(*groups));
}

int checked_dim(int64_t d, int ndim, const char* api) {
  if (d < 0 || d >= ndim)
    throw AxisError(prefix(api) + "axis " + std::to_string(d) +
                    " is out of bounds for array of dimension " + std::to_string(ndim));
  return int(d);
}

// Python's str of an axis_name param: i or ('i', 'j').
std::string names_repr(const ParamValue& v) {
  if (auto* s = std::get_if<std::string>(&v)) return *s;
  const auto& names = std::get<std::vector<std::string>>(v);
  std::string out = "(";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", '" : "'") + names[i] + "'";
  return out + (names.size() == 1 ? ",)" : ")");
}

void no_groups_in_vmap(const Params& p, const char* api) {
  if (read_groups(p))
    throw NotImplementedError(std::string("[") + api +
                              "] axis_index_groups not supported in vmap collectives. Please "
                              "open a feature request!");
}

// ---- shape helpers of the batching rules (JAX's _moveaxis, _splitaxis, _foldaxis) ----------
Array move_axis(const Array& x, int from, int to) {
  return move_batch_dim(x, from, to, 0);
}

// Splits dim `axis` into (factor, size / factor).
Array split_axis(const Array& x, int axis, int64_t factor) {
  Ints dims = x.shape().dims();
  int64_t size = dims[size_t(axis)];
  dims[size_t(axis)] = size / factor;
  dims.insert(dims.begin() + axis, factor);
  return lax::reshape(x, Shape(dims));
}

// Merges dims axis and axis + 1.
Array fold_axis(const Array& x, int axis) {
  Ints dims = x.shape().dims();
  dims[size_t(axis)] *= dims[size_t(axis) + 1];
  dims.erase(dims.begin() + axis + 1);
  return lax::reshape(x, Shape(dims));
}

// The names before and after `frame` in a tuple of axis names (major and minor to it).
std::pair<std::vector<std::string>, std::vector<std::string>> around(
    const std::vector<std::string>& names, const std::string& frame) {
  auto it = std::find(names.begin(), names.end(), frame);
  return {{names.begin(), it}, {it + 1, names.end()}};
}

// Collectives that move data keep their result varying over the axes they name (and over what
// the operand varied).
VmaTypes varying_over_names(std::span<const AbstractValue> in, const Params& p) {
  return {vma_union(in.empty() ? std::vector<std::string>{} : in[0].vma, typed(read_names(p)))};
}

// ---- psum, pmax, pmin -----------------------------------------------------------------------
ShapeRule reduction_shape(const char* api) {
  return [api](std::span<const AbstractValue> in, const Params& p) {
    const AbstractValue& x = in[0];
    std::vector<ReduceAxis> axes = read_axes(p);
    std::vector<std::string> names = named_axes(axes);
    std::vector<int64_t> positions = positional_axes(axes);
    check_bound(names, api);
    std::optional<AxisIndexGroups> groups = read_groups(p);
    if (groups && !positions.empty())
      throw ValueError(prefix(api) +
                       "axis_index_groups can only be used with reductions over named axes, "
                       "but got: " +
                       axes_repr(axes));
    if (groups) group_size(groups, axes_size(names, api), api);
    std::vector<bool> dropped(size_t(x.shape.ndim()), false);
    for (int64_t d : positions) dropped[size_t(checked_dim(d, x.shape.ndim(), api))] = true;
    std::vector<int64_t> dims;
    for (int d = 0; d < x.shape.ndim(); ++d)
      if (!dropped[size_t(d)]) dims.push_back(x.shape[d]);
    return std::vector<AbstractValue>{{Shape(dims), x.dtype, x.weak_type}};
  };
}

// The communicator has no bool reductions: bools reduce as bytes, where max is `or`, min `and`.
DType wire_dtype(DType t) {
  return is_bool(t) ? uint8 : t;
}

// The reduction over the named axes of `local` (the operand, already reduced over any positional
// axes) into the kernel's output: the buffer the communicator hands over when the caller lets the
// kernel provide it. The operand's own buffer goes along, so that a reduction between processes
// can send from it without a copy.
void all_reduce_over(const char* api, ReduceOp op, const std::vector<std::string>& names,
                     const KernelArgs& a, const void* local) {
  const AbstractValue& out = *a.out[0].aval;
  Participants p = participants(api, names, read_groups(a.params));
  std::shared_ptr<Buffer> owner;
  if (local == a.in[0].data && a.in[0].buffer) owner = *a.in[0].buffer;
  if (a.out[0].buffer)
    *a.out[0].buffer = p.ctx->comm->all_reduce_shared(api, p.ranks, p.me, op, wire_dtype(out.dtype),
                                                      out.shape, local, std::move(owner));
  else
    p.ctx->comm->all_reduce(api, p.ranks, p.me, op, wire_dtype(out.dtype), out.shape, local,
                            a.out[0].data);
}

// The caller's blocks of a collective of several operands, for the Communicator: each operand's
// type, data and output (with its buffer, for the primitives that give one for the group).
std::vector<runtime::Communicator::Block> blocks_of(const KernelArgs& a, bool group_results) {
  std::vector<runtime::Communicator::Block> blocks;
  for (size_t k = 0; k < a.in.size(); ++k) {
    const AbstractValue& in = *a.in[k].aval;
    runtime::Communicator::Block b{in.dtype, in.shape, a.in[k].data, a.out[k].data};
    if (group_results) b.result = a.out[k].buffer;
    blocks.push_back(std::move(b));
  }
  return blocks;
}

// The kernel of one operand, on each operand in turn: a meeting per operand.
void each_operand(const CpuKernel& kernel, const KernelArgs& a) {
  for (size_t k = 0; k < a.in.size(); ++k)
    kernel(KernelArgs{a.in.subspan(k, 1), a.out.subspan(k, 1), a.params});
}

CpuKernel single_reduction_kernel(const char* api, cpu::ReduceOp local_op, ReduceOp op);

// psum, pmax or pmin of several operands over named axes: one meeting for all. Positional axes
// (a vmapped reduction) reduce each operand on its own.
CpuKernel reduction_kernel(const char* api, cpu::ReduceOp local_op, ReduceOp op) {
  CpuKernel single = single_reduction_kernel(api, local_op, op);
  return [api, op, single](const KernelArgs& a) {
    if (a.in.size() == 1) return single(a);
    const auto* names = std::get_if<std::vector<std::string>>(&a.params.at("axes"));
    if (!names) return each_operand(single, a);
    Participants p = participants(api, *names, read_groups(a.params));
    std::vector<runtime::Communicator::Block> blocks = blocks_of(a, true);
    for (size_t k = 0; k < blocks.size(); ++k) {
      blocks[k].dtype = wire_dtype(blocks[k].dtype);
      if (a.in[k].buffer) blocks[k].in_owner = *a.in[k].buffer;
    }
    p.ctx->comm->all_reduce(api, p.ranks, p.me, op, blocks);
  };
}

CpuKernel single_reduction_kernel(const char* api, cpu::ReduceOp local_op, ReduceOp op) {
  return [api, local_op, op](const KernelArgs& a) {
    // Named axes alone, the common case, are read as they are stored (a reduction in a chain
    // of collectives pays for every copy).
    if (const auto* names = std::get_if<std::vector<std::string>>(&a.params.at("axes")))
      return all_reduce_over(api, op, *names, a, a.in[0].data);
    std::vector<ReduceAxis> axes = read_axes(a.params);
    std::vector<std::string> names = named_axes(axes);
    std::vector<int64_t> positions = positional_axes(axes);
    const AbstractValue& in = *a.in[0].aval;
    const AbstractValue& out = *a.out[0].aval;
    const void* local = a.in[0].data;
    std::vector<std::byte> reduced;
    if (!positions.empty()) {
      if (names.empty()) {
        void* dst = a.out[0].data;
        if (a.out[0].buffer) {
          *a.out[0].buffer = Buffer::allocate(size_t(out.nbytes()));
          dst = (*a.out[0].buffer)->data();
        }
        cpu::reduce(local_op, in.dtype, a.in[0].data, in.shape, positions, dst);
        return;
      }
      reduced.resize(size_t(out.nbytes()));
      cpu::reduce(local_op, in.dtype, a.in[0].data, in.shape, positions, reduced.data());
      local = reduced.data();
    }
    all_reduce_over(api, op, names, a, local);
  };
}

// JAX's _batched_reduction_collective: the named axis of this vmap becomes the positional batch
// dimension of the same reduction. Over an unbatched operand, a sum of n equal values is n · x;
// a max or min is x.
BatchRule reduction_batch(const Primitive& reduction, bool sums) {
  const Primitive* self = &reduction;
  return [self, sums](std::span<const Array> args, std::span<const int> dims, const Params& p,
                      const BatchContext& ctx) {
    const char* name = self->name.c_str();
    const std::vector<ReduceAxis> axes = read_axes(p);
    const bool has_frame = contains(named_axes(axes), ctx.axis_name);
    auto rebind = [&](const Array& x, const std::vector<ReduceAxis>& ax) {
      return bind1(*self, {x}, with(p, "axes", axes_param(ax)));
    };
    Array v = args[0];
    int d = dims[0];
    if (d == kNotBatched) {
      if (!has_frame) return single(rebind(v, axes), kNotBatched);
      no_groups_in_vmap(p, name);
      std::vector<ReduceAxis> rest;
      for (const auto& a : axes)
        if (a != ReduceAxis(ctx.axis_name)) rest.push_back(a);
      Array arg = rest.empty() ? v : rebind(v, rest);
      if (!sums) return single(arg, kNotBatched);
      Array n = ops::scalar(double(ctx.axis_size), arg.dtype(), false);
      return single(lax::mul(n, arg), kNotBatched);
    }
    const bool has_positional = !positional_axes(axes).empty();
    if (!has_frame && !has_positional) return single(rebind(v, axes), d);
    no_groups_in_vmap(p, name);
    if (d != 0) v = move_axis(v, d, 0);
    std::vector<ReduceAxis> mapped;
    for (const auto& a : axes) {
      if (auto* pos = std::get_if<int64_t>(&a))
        mapped.emplace_back(*pos + 1);
      else if (std::get<std::string>(a) == ctx.axis_name)
        mapped.emplace_back(int64_t{0});
      else
        mapped.push_back(a);
    }
    return single(rebind(v, mapped), has_frame ? kNotBatched : 0);
  };
}

// psum is linear and transposes to psum over the named axes; positional axes broadcast back.
std::vector<Array> psum_transpose(const Primitive& psum, std::span<const Array> cts,
                                  std::span<const LinearInput> in, const Params& p) {
  const std::vector<ReduceAxis> axes = read_axes(p);
  Array ct = cts[0];
  const Ints positions = positional_axes(axes);
  if (!positions.empty()) {
    const Shape& shape = in[0].aval.shape;
    Ints kept;
    for (int d = 0; d < shape.ndim(); ++d)
      if (std::find(positions.begin(), positions.end(), d) == positions.end()) kept.push_back(d);
    ct = lax::broadcast_in_dim(ct, shape, kept);
  }
  const std::vector<std::string> names = named_axes(axes);
  if (names.empty()) return {ct};
  std::vector<ReduceAxis> named(names.begin(), names.end());
  return {bind1(psum, {ct}, with(p, "axes", axes_param(named)))};
}

VmaTypes reduction_vma(std::span<const AbstractValue> in, const Params& p) {
  return {vma_minus(in[0].vma, named_axes(read_axes(p)))};
}

// Every member of the group gets the same result, which one buffer holds. `sums` marks psum:
// linear, and n · x over an unbatched operand.
Primitive& define_reduction(PrimitiveRegistry& r, const char* name, cpu::ReduceOp local_op,
                            ReduceOp op, bool sums) {
  Primitive& p =
      define_collective(r, name, reduction_shape(name), reduction_kernel(name, local_op, op));
  p.allocates_outputs = true;
  p.per_element_across_devices = true;
  p.batch = reduction_batch(p, sums);
  p.vma_rule = reduction_vma;
  if (sums) deflinear(r, name, std::bind_front(psum_transpose, std::cref(p)));
  return p;
}

// ---- all_gather and reduce_scatter (psum_scatter), each the other's transpose ----------------
std::vector<AbstractValue> all_gather_shape(std::span<const AbstractValue> in, const Params& p) {
  const AbstractValue& x = in[0];
  std::vector<std::string> names = read_names(p);
  axes_size(names, "all_gather");
  check_equal_groups(read_groups(p), "all_gather");
  const int64_t n = p.get_int("axis_size");
  const bool tiled = p.get<bool>("tiled");
  int d = checked_dim(p.get_int("all_gather_dimension"), x.shape.ndim() + (tiled ? 0 : 1),
                      "all_gather");
  std::vector<int64_t> dims = x.shape.dims();
  if (tiled)
    dims[size_t(d)] *= n;
  else
    dims.insert(dims.begin() + d, n);
  return {{Shape(dims), x.dtype, x.weak_type}};
}

std::vector<AbstractValue> reduce_scatter_shape(std::span<const AbstractValue> in,
                                                const Params& p) {
  const AbstractValue& x = in[0];
  axes_size(read_names(p), "psum_scatter");
  check_equal_groups(read_groups(p), "psum_scatter");
  const int64_t n = p.get_int("axis_size");
  int d = checked_dim(p.get_int("scatter_dimension"), x.shape.ndim(), "psum_scatter");
  std::vector<int64_t> dims = x.shape.dims();
  const int64_t size = dims[size_t(d)];
  if (p.get<bool>("tiled")) {
    if (size % n != 0)
      throw ValueError("[psum_scatter] tiled reduce_scatter operand scatter dimension size " +
                       std::to_string(size) + " must be divisible by shard_count " +
                       std::to_string(n));
    dims[size_t(d)] = size / n;
  } else {
    if (size != n)
      throw ValueError("[psum_scatter] reduce_scatter operand scatter dimension size " +
                       std::to_string(size) + " must match shard count " + std::to_string(n));
    dims.erase(dims.begin() + d);
  }
  return {{Shape(dims), x.dtype, x.weak_type}};
}

void all_gather_kernel(const KernelArgs& a) {
  Participants p = participants("all_gather", read_names(a.params), read_groups(a.params));
  const AbstractValue& in = *a.in[0].aval;
  const int axis = int(a.params.get_int("all_gather_dimension"));
  const bool tiled = a.params.get<bool>("tiled");
  if (a.in.size() > 1)
    p.ctx->comm->all_gather("all_gather", p.ranks, p.me, axis, tiled, blocks_of(a, true));
  else if (a.out[0].buffer)
    *a.out[0].buffer = p.ctx->comm->all_gather_shared("all_gather", p.ranks, p.me, in.dtype,
                                                      in.shape, axis, tiled, a.in[0].data);
  else
    p.ctx->comm->all_gather("all_gather", p.ranks, p.me, in.dtype, in.shape, axis, tiled,
                            a.in[0].data, a.out[0].data);
}

void reduce_scatter_kernel(const KernelArgs& a) {
  Participants p = participants("psum_scatter", read_names(a.params), read_groups(a.params));
  const AbstractValue& in = *a.in[0].aval;
  if (a.in.size() > 1)
    return p.ctx->comm->reduce_scatter("psum_scatter", p.ranks, p.me, ReduceOp::sum,
                                       int(a.params.get_int("scatter_dimension")),
                                       blocks_of(a, false));
  p.ctx->comm->reduce_scatter("psum_scatter", p.ranks, p.me, ReduceOp::sum, in.dtype, in.shape,
                              int(a.params.get_int("scatter_dimension")), a.in[0].data,
                              a.out[0].data);
}

Params all_gather_params(const std::vector<std::string>& names, int64_t dim, bool tiled,
                         const std::optional<AxisIndexGroups>& groups, int64_t size) {
  return Params{{"all_gather_dimension", dim},
                {"axis_index_groups", groups_param(groups)},
                {"axis_name", tuple_param(names)},
                {"axis_size", size},
                {"tiled", tiled}};
}

Params reduce_scatter_params(const std::vector<std::string>& names, int64_t dim, bool tiled,
                             const std::optional<AxisIndexGroups>& groups, int64_t size) {
  return Params{{"axis_index_groups", groups_param(groups)},
                {"axis_name", tuple_param(names)},
                {"axis_size", size},
                {"scatter_dimension", dim},
                {"tiled", tiled}};
}

// all_gather or reduce_scatter under a vmap of another axis: the collective runs as it is, its
// `dim_key` dimension shifted past the batch dimension (which a non-tiled result's new
// dimension shifts in turn).
BatchResult batch_over_other_axis(const Primitive& prim, const Array& x, int d, const Params& p,
                                  const char* dim_key) {
  if (d == kNotBatched) return single(bind1(prim, {x}, p), kNotBatched);
  int64_t g = p.get_int(dim_key);
  if (d <= g)
    g += 1;
  else if (!p.get<bool>("tiled"))
    d += 1;
  return single(bind1(prim, {x}, with(p, dim_key, g)), d);
}

BatchResult all_gather_batch(const Primitive& all_gather, std::span<const Array> args,
                             std::span<const int> dims, const Params& p, const BatchContext& ctx) {
  const std::vector<std::string> names = read_names(p);
  if (!contains(names, ctx.axis_name))
    return batch_over_other_axis(all_gather, args[0], dims[0], p, "all_gather_dimension");
  int64_t g = p.get_int("all_gather_dimension");
  const bool tiled = p.get<bool>("tiled");
  Array x = args[0];
  int d = dims[0];
  no_groups_in_vmap(p, "all_gather");
  const int64_t n = ctx.axis_size;
  Array y;
  if (names.size() == 1) {
    y = move_batch_dim(x, d, int(g), n);
  } else {
    // Gathered order is major to minor over the tuple: this axis's instances sit between the
    // gathered blocks of the names before it and those after it.
    auto [major, minor] = around(names, ctx.axis_name);
    y = move_batch_dim(x, d, 0, n);
    if (!minor.empty()) {
      y = bind1(all_gather, {y},
                all_gather_params(minor, 1, false, std::nullopt, axes_size(minor, "all_gather")));
      y = fold_axis(y, 0);
    }
    if (!major.empty()) {
      y = bind1(all_gather, {y},
                all_gather_params(major, 0, false, std::nullopt, axes_size(major, "all_gather")));
      y = fold_axis(y, 0);
    }
    y = move_axis(y, 0, int(g));
  }
  if (tiled) y = fold_axis(y, int(g));
  return single(y, kNotBatched);
}

std::vector<Array> all_gather_transpose(const Primitive& reduce_scatter, std::span<const Array> cts,
                                        std::span<const LinearInput>, const Params& p) {
  return {
      bind1(reduce_scatter, {cts[0]},
            reduce_scatter_params(read_names(p), p.get_int("all_gather_dimension"),
                                  p.get<bool>("tiled"), read_groups(p), p.get_int("axis_size")))};
}

BatchResult reduce_scatter_batch(const Primitive& reduce_scatter, std::span<const Array> args,
                                 std::span<const int> dims, const Params& p,
                                 const BatchContext& ctx) {
  const std::vector<std::string> names = read_names(p);
  if (!contains(names, ctx.axis_name))
    return batch_over_other_axis(reduce_scatter, args[0], dims[0], p, "scatter_dimension");
  int64_t g = p.get_int("scatter_dimension");
  const bool tiled = p.get<bool>("tiled");
  Array x = args[0];
  int d = dims[0];
  no_groups_in_vmap(p, "psum_scatter");
  const int64_t n = ctx.axis_size;
  Array y = d == kNotBatched ? lax::mul(x, ops::scalar(double(n), x.dtype(), true))
                             : lax::reduce_sum(x, {d});
  const int dy = int(g);
  if (names.size() == 1) {
    if (tiled) y = split_axis(y, dy, n);
    return single(y, dy);
  }
  // This axis's sum is done; the other names reduce-scatter over their combined index, and the
  // chunk order is major to minor over the tuple.
  auto [major, minor] = around(names, ctx.axis_name);
  const int64_t n_major = axes_size(major, "psum_scatter");
  const int64_t n_minor = axes_size(minor, "psum_scatter");
  Ints shape = y.shape().dims();
  const int64_t chunk = shape[size_t(dy)] / (n_major * n * n_minor);
  shape[size_t(dy)] = chunk;
  shape.insert(shape.begin() + dy, {n_major, n, n_minor});
  y = lax::reshape(y, Shape(shape));
  y = move_axis(y, dy + 1, dy);
  y = fold_axis(y, dy + 1);
  std::vector<std::string> rest = major;
  rest.insert(rest.end(), minor.begin(), minor.end());
  y = bind1(reduce_scatter, {y},
            reduce_scatter_params(rest, dy + 1, false, std::nullopt, n_major * n_minor));
  // Untiled, each chunk is one element: its dim goes.
  if (!tiled) y = lax::squeeze(y, {dy + 1});
  return single(y, dy);
}

std::vector<Array> reduce_scatter_transpose(const Primitive& all_gather, std::span<const Array> cts,
                                            std::span<const LinearInput>, const Params& p) {
  return {bind1(all_gather, {cts[0]},
                all_gather_params(read_names(p), p.get_int("scatter_dimension"),
                                  p.get<bool>("tiled"), read_groups(p), p.get_int("axis_size")))};
}

// Results that are the same on every member of the group live in one buffer they share (all
// gathers do; a scatter's differ).
const Primitive& define_gather_scatter(PrimitiveRegistry& r) {
  Primitive& all_gather = define_collective(r, "all_gather", all_gather_shape, all_gather_kernel);
  all_gather.allocates_outputs = true;
  Primitive& reduce_scatter =
      define_collective(r, "reduce_scatter", reduce_scatter_shape, reduce_scatter_kernel);
  all_gather.batch = std::bind_front(all_gather_batch, std::cref(all_gather));
  deflinear(r, "all_gather", std::bind_front(all_gather_transpose, std::cref(reduce_scatter)));
  all_gather.vma_rule = varying_over_names;
  with_changed_rank_splits(all_gather, "all_gather_dimension");
  with_changed_rank_splits(reduce_scatter, "scatter_dimension");
  reduce_scatter.batch = std::bind_front(reduce_scatter_batch, std::cref(reduce_scatter));
  deflinear(r, "reduce_scatter", std::bind_front(reduce_scatter_transpose, std::cref(all_gather)));
  reduce_scatter.vma_rule = varying_over_names;
  return all_gather;
}

// ---- all_to_all: transposes to the swapped exchange -------------------------------------------
// The primitive always has the tiled shape rule; the untiled form is the public function's
// expand_dims / squeeze around it, as in JAX.
std::vector<AbstractValue> all_to_all_shape(std::span<const AbstractValue> in, const Params& p) {
  const AbstractValue& x = in[0];
  std::vector<std::string> names = read_names(p);
  check_bound(names, "all_to_all");
  check_equal_groups(read_groups(p), "all_to_all");
  const int64_t n = group_size(read_groups(p), axes_size(names, "all_to_all"), "all_to_all");
  int split = checked_dim(p.get_int("split_axis"), x.shape.ndim(), "all_to_all");
  int concat = checked_dim(p.get_int("concat_axis"), x.shape.ndim(), "all_to_all");
  std::vector<int64_t> dims = x.shape.dims();
  if (dims[size_t(split)] % n != 0)
    throw ValueError("[all_to_all] The size of all_to_all split_axis (" +
                     std::to_string(dims[size_t(split)]) +
                     ") has to be divisible by the size of the named axis " +
                     names_repr(p.at("axis_name")) + " (" + std::to_string(n) + ")");
  dims[size_t(split)] /= n;
  dims[size_t(concat)] *= n;
  return {{Shape(dims), x.dtype, false}};
}

void all_to_all_kernel(const KernelArgs& a) {
  Participants p = participants("all_to_all", read_names(a.params), read_groups(a.params));
  const AbstractValue& in = *a.in[0].aval;
  const int split = int(a.params.get_int("split_axis"));
  const int concat = int(a.params.get_int("concat_axis"));
  if (a.in.size() > 1)
    return p.ctx->comm->all_to_all("all_to_all", p.ranks, p.me, split, concat, blocks_of(a, false));
  p.ctx->comm->all_to_all("all_to_all", p.ranks, p.me, in.dtype, in.shape, split, concat,
                          a.in[0].data, a.out[0].data);
}

Params all_to_all_params(const Params& p, const std::vector<std::string>& names, int64_t split,
                         int64_t concat) {
  Params q = with(p, "axis_name", tuple_param(names));
  q.set("split_axis", split);
  q.set("concat_axis", concat);
  return q;
}

// JAX's _all_to_all_batched_collective for a tuple of names: chunks are gathered into three
// leading dims [major, this axis, minor], exchanged over the major names, split locally over
// this axis, exchanged over the minor names, then folded into concat_axis.
BatchResult all_to_all_tuple_batch(const Primitive& all_to_all, Array x, int d, int64_t split,
                                   int64_t concat, const std::vector<std::string>& names,
                                   const Params& p, const BatchContext& ctx) {
  auto [major, minor] = around(names, ctx.axis_name);
  x = lax::expand_dims(move_axis(x, d, 0), {0, 2});
  split += 3;
  concat += 3;
  if (!major.empty()) x = bind1(all_to_all, {x}, all_to_all_params(p, major, split, 0));
  x = split_axis(x, int(split), ctx.axis_size);
  int64_t new_d = split;
  if (split <= concat) concat += 1;
  split += 1;
  if (!minor.empty()) x = bind1(all_to_all, {x}, all_to_all_params(p, minor, split, 2));
  x = fold_axis(fold_axis(x, 0), 0);
  concat -= 2;
  new_d -= 2;
  x = fold_axis(move_axis(x, 0, int(concat) - 1), int(concat) - 1);
  return single(x, int(new_d) - 1);
}

BatchResult all_to_all_batch(const Primitive& all_to_all, std::span<const Array> args,
                             std::span<const int> dims, const Params& p, const BatchContext& ctx) {
  const std::vector<std::string> names = read_names(p);
  int64_t split = p.get_int("split_axis");
  int64_t concat = p.get_int("concat_axis");
  Array x = args[0];
  int d = dims[0];
  if (!contains(names, ctx.axis_name)) {
    if (d == kNotBatched) return single(bind1(all_to_all, {x}, p), kNotBatched);
    Params q = with(p, "split_axis", split + (d <= split ? 1 : 0));
    q.set("concat_axis", concat + (d <= concat ? 1 : 0));
    return single(bind1(all_to_all, {x}, q), d);
  }
  no_groups_in_vmap(p, "all_to_all");
  const int64_t n = ctx.axis_size;
  if (d == kNotBatched) {
    x = move_batch_dim(x, kNotBatched, 0, n);
    d = 0;
  }
  if (names.size() > 1)
    return all_to_all_tuple_batch(all_to_all, x, d, split, concat, names, p, ctx);
  if (split == concat) {
    const int axis = int(split) + (d <= split ? 1 : 0);
    const int d_pre_split = d;
    x = split_axis(x, axis, n);
    if (axis <= d) d += 1;
    Ints perm;
    for (int i = 0; i < x.ndim(); ++i) perm.push_back(i == d ? axis : i == axis ? d : i);
    x = lax::transpose(x, perm);
    return single(fold_axis(x, axis), d_pre_split);
  }
  Array concatenated = fold_axis(move_axis(x, d, int(concat)), int(concat));
  return single(split_axis(concatenated, int(split), n), int(split));
}

std::vector<Array> all_to_all_transpose(const Primitive& all_to_all, std::span<const Array> cts,
                                        std::span<const LinearInput>, const Params& p) {
  Params q = with(p, "split_axis", p.get_int("concat_axis"));
  q.set("concat_axis", p.get_int("split_axis"));
  return {bind1(all_to_all, {cts[0]}, q)};
}

void define_all_to_all(PrimitiveRegistry& r) {
  Primitive& all_to_all = define_collective(r, "all_to_all", all_to_all_shape, all_to_all_kernel);
  all_to_all.batch = std::bind_front(all_to_all_batch, std::cref(all_to_all));
  deflinear(r, "all_to_all", std::bind_front(all_to_all_transpose, std::cref(all_to_all)));
  all_to_all.vma_rule = varying_over_names;
}

// ---- ppermute: transposes to the inverse permutation
// ------------------------------------------------------------------- Negative perm entries count
// from the end, as Python indexing in JAX's lowering does; after that, sources and destinations
// must be unique.
Perm normalized_perm(const Perm& perm, int64_t n) {
  Perm out;
  for (auto [s, d] : perm) out.emplace_back(int(((s % n) + n) % n), int(((d % n) + n) % n));
  return out;
}

void check_perm(const Perm& perm, int64_t n) {
  for (auto [s, d] : perm)
    for (int index : {s, d})
      if (index < -n || index >= n)
        throw ValueError("[ppermute] perm index " + std::to_string(index) +
                         " is out of range for an axis of size " + std::to_string(n));
  Perm norm = normalized_perm(perm, n);
  std::vector<int> srcs, dsts;
  for (auto [s, d] : norm) {
    srcs.push_back(s);
    dsts.push_back(d);
  }
  auto unique = [](std::vector<int> v) {
    std::sort(v.begin(), v.end());
    return std::adjacent_find(v.begin(), v.end()) == v.end();
  };
  if (!unique(srcs) || !unique(dsts)) {
    std::vector<std::vector<int>> pairs;
    for (auto [src, dst] : perm) pairs.push_back({src, dst});
    std::string text = int_tuples(pairs);
    throw ValueError("[ppermute] ppermute sources and destinations must be unique, got " + text +
                     ".");
  }
}

std::vector<AbstractValue> ppermute_shape(std::span<const AbstractValue> in, const Params& p) {
  std::vector<std::string> names = read_names(p);
  check_bound(names, "ppermute");
  check_perm(read_perm(p), axes_size(names, "ppermute"));
  return {in[0]};
}

void ppermute_kernel(const KernelArgs& a) {
  Participants p = participants("ppermute", read_names(a.params));
  const AbstractValue& in = *a.in[0].aval;
  Perm perm = normalized_perm(read_perm(a.params), int64_t(p.ranks.size()));
  p.ctx->comm->permute("ppermute", p.ranks, p.me, perm, in.dtype, in.shape, a.in[0].data,
                       a.out[0].data);
}

// The size of the product of `names`, which include this vmap's axis: its own frame has left the
// axis environment once the function was traced.
int64_t tuple_size(const std::vector<std::string>& names, const BatchContext& ctx) {
  return ctx.axis_size * axes_size(without(names, ctx.axis_name), "vmap");
}

// The index of each of this vmap's instances over a tuple of names that includes it:
// idx_major · (n · size_minor) + t · size_minor + idx_minor for batch position t.
Array tuple_instance_index(const std::vector<std::string>& names, const BatchContext& ctx) {
  auto [major, minor] = around(names, ctx.axis_name);
  const int64_t n_minor = axes_size(minor, "axis_index");
  Array index = lax::iota(int32, ctx.axis_size) * Array(int(n_minor));
  if (!minor.empty()) index = index + axis_index(AxisNames(minor));
  if (!major.empty())
    index = index + axis_index(AxisNames(major)) * Array(int(ctx.axis_size * n_minor));
  return index;
}

// For each destination instance its source under `perm` (entries modulo n), or -1.
std::vector<int> sources_by_destination(const Perm& perm, int64_t n) {
  std::vector<int> source_of(size_t(n), -1);
  for (auto [s, t] : perm) source_of[size_t(((t % n) + n) % n)] = int(((s % n) + n) % n);
  return source_of;
}

// ppermute over a tuple that includes this vmap's axis: each instance takes its source's block
// from a gather over the tuple, or zeros when no pair sends to it.
BatchResult ppermute_tuple_batch(const Primitive& all_gather, const Array& x, int d,
                                 const std::vector<std::string>& names, const Params& p,
                                 const BatchContext& ctx) {
  std::vector<int> source_of = sources_by_destination(read_perm(p), tuple_size(names, ctx));
  Array blocks = gather_over_tuple(all_gather, x, d, names, ctx);
  Array sources = take(array(source_of), tuple_instance_index(names, ctx));
  Array picked = take(blocks, maximum(sources, Array(0)), 0);
  Array has_source = lax::broadcast_in_dim(sources >= Array(0), picked.shape(), {0});
  return single(where(has_source, picked, zeros_like(picked)), 0);
}

BatchResult ppermute_batch(const Primitive& ppermute, const Primitive& all_gather,
                           std::span<const Array> args, std::span<const int> dims, const Params& p,
                           const BatchContext& ctx) {
  const std::vector<std::string> names = read_names(p);
  Array x = args[0];
  int d = dims[0];
  if (!contains(names, ctx.axis_name)) return single(bind1(ppermute, {x}, p), d);
  if (names.size() > 1) return ppermute_tuple_batch(all_gather, x, d, names, p, ctx);
  const int64_t n = ctx.axis_size;
  std::vector<int> source_of = sources_by_destination(read_perm(p), n);
  const bool full = std::find(source_of.begin(), source_of.end(), -1) == source_of.end();
  if (d == kNotBatched) {
    if (full) return single(x, kNotBatched);
    x = move_batch_dim(x, kNotBatched, 0, n);
    d = 0;
  }
  std::vector<Array> pieces;
  for (int64_t dst = 0; dst < n; ++dst) {
    int src = source_of[size_t(dst)];
    if (src >= 0) {
      pieces.push_back(lax::slice_in_dim(x, src, src + 1, 1, d));
    } else {
      Ints shape = x.shape().dims();
      shape[size_t(d)] = 1;
      pieces.push_back(zeros_like_aval({Shape(shape), x.dtype(), false}));
    }
  }
  return single(lax::concatenate(pieces, d), d);
}

std::vector<Array> ppermute_transpose(const Primitive& ppermute, std::span<const Array> cts,
                                      std::span<const LinearInput>, const Params& p) {
  Perm inverse;
  for (auto [s, t] : read_perm(p)) inverse.emplace_back(t, s);
  return {bind1(ppermute, {cts[0]}, with(p, "perm", perm_param(inverse)))};
}

void define_ppermute(PrimitiveRegistry& r, const Primitive& all_gather) {
  Primitive& ppermute = define_collective(r, "ppermute", ppermute_shape, ppermute_kernel);
  ppermute.batch = std::bind_front(ppermute_batch, std::cref(ppermute), std::cref(all_gather));
  deflinear(r, "ppermute", std::bind_front(ppermute_transpose, std::cref(ppermute)));
  ppermute.vma_rule = varying_over_names;
}

// ---- several operands: combined collectives -------------------------------------------------
// A collective of several operands with one set of params is that many collectives met once
// (XLA's combined collectives; JAX's psum binds every leaf of a tree this way). compile's
// combine_collectives makes them from equations of one operand. Each rule is the one operand's,
// operand by operand.
void accept_several_operands(Primitive& p) {
  p.combinable = true;
  p.shape_rule = [one = p.shape_rule, name = p.name](std::span<const AbstractValue> in,
                                                      const Params& params) {
    if (in.size() == 1) return one(in, params);
    if (in.empty()) throw TypeError("[" + name + "] expects at least one operand, got none");
    std::vector<AbstractValue> out;
    for (size_t k = 0; k < in.size(); ++k) out.push_back(one(in.subspan(k, 1), params).at(0));
    return out;
  };
  p.vma_rule = [one = p.vma_rule](std::span<const AbstractValue> in, const Params& params) {
    if (in.size() == 1) return one(in, params);
    VmaTypes out;
    for (size_t k = 0; k < in.size(); ++k) out.push_back(one(in.subspan(k, 1), params).at(0));
    return out;
  };
  p.type_sharding_rule = [one = p.type_sharding_rule](std::span<const AbstractValue> in,
                                                      std::span<AbstractValue> out,
                                                      const Params& params) {
    for (size_t k = 0; k < in.size() && k < out.size(); ++k)
      one(in.subspan(k, 1), out.subspan(k, 1), params);
  };
  p.batch = [one = p.batch](std::span<const Array> args, std::span<const int> dims,
                            const Params& params, const BatchContext& ctx) {
    if (args.size() == 1) return one(args, dims, params, ctx);
    BatchResult out;
    for (size_t k = 0; k < args.size(); ++k) {
      BatchResult r = one(args.subspan(k, 1), dims.subspan(k, 1), params, ctx);
      out.outputs.push_back(r.outputs.at(0));
      out.dims.push_back(r.dims.at(0));
    }
    return out;
  };
  if (!p.transpose) return;
  p.transpose = [one = p.transpose](std::span<const Array> cts, std::span<const LinearInput> in,
                                    const Params& params) {
    if (cts.size() == 1) return one(cts, in, params);
    std::vector<Array> out;
    for (size_t k = 0; k < cts.size(); ++k)
      out.push_back(is_zero(cts[k]) ? Array() : one(cts.subspan(k, 1), in.subspan(k, 1), params).at(0));
    return out;
  };
}

}  // namespace

Array collectives::gather_over_tuple(const Primitive& all_gather, const Array& x, int d,
                                     const std::vector<std::string>& names,
                                     const BatchContext& ctx) {
  Params p = all_gather_params(names, 0, false, std::nullopt, tuple_size(names, ctx));
  Array arg[] = {x};
  int dim[] = {d};
  return all_gather_batch(all_gather, arg, dim, p, ctx).outputs[0];
}

Array collectives::reduce_over(const Primitive& reduction, const Array& x,
                               const std::vector<std::string>& axes,
                               const std::optional<AxisIndexGroups>& groups) {
  const std::vector<ReduceAxis> names(axes.begin(), axes.end());
  const Params params{{"axes", axes_param(names)}, {"axis_index_groups", groups_param(groups)}};
  return spmd::bind(reduction, std::span<const Array>(&x, 1), params).front();
}

// pmax and pmin have no scatter primitive: an all_to_all of the chunks (instance i receives
// every instance's chunk i, in instance order) and a local max or min over them send the bytes
// a reduce-scatter sends, and give the all-reduce's values exactly (max and min do not round).
Array collectives::scatter_over(const Primitive& reduction, const Array& x, const AxisNames& names,
                                int dim) {
  if (&reduction == &psum_primitive())
    return psum_scatter(x, names, {.scatter_dimension = dim, .tiled = true});
  const int64_t n = axis_size(names);
  std::vector<int64_t> dims = x.shape().dims();
  dims[size_t(dim)] /= n;
  dims.insert(dims.begin() + dim, n);
  const Array chunks = lax::reshape(all_to_all(x, names, dim, dim, {.tiled = true}), Shape(dims));
  return &reduction == &pmax_primitive() ? lax::reduce_max(chunks, {dim})
                                         : lax::reduce_min(chunks, {dim});
}

const Primitive& collectives::psum_primitive() {
  static const Primitive& psum = primitive("psum");
  return psum;
}
const Primitive& collectives::pmax_primitive() {
  static const Primitive& pmax = primitive("pmax");
  return pmax;
}
const Primitive& collectives::pmin_primitive() {
  static const Primitive& pmin = primitive("pmin");
  return pmin;
}
const Primitive& collectives::all_gather_primitive() {
  static const Primitive& all_gather = primitive("all_gather");
  return all_gather;
}
const Primitive& collectives::reduce_scatter_primitive() {
  static const Primitive& reduce_scatter = primitive("reduce_scatter");
  return reduce_scatter;
}
const Primitive& collectives::all_to_all_primitive() {
  static const Primitive& all_to_all = primitive("all_to_all");
  return all_to_all;
}

void register_collective_primitives(PrimitiveRegistry& r) {
  const Primitive& psum = define_reduction(r, "psum", cpu::ReduceOp::sum, ReduceOp::sum, true);
  define_reduction(r, "pmax", cpu::ReduceOp::max, ReduceOp::max, false);
  define_reduction(r, "pmin", cpu::ReduceOp::min, ReduceOp::min, false);
  const Primitive& all_gather = define_gather_scatter(r);
  define_all_to_all(r);
  for (const char* name : {"psum", "pmax", "pmin", "all_gather", "reduce_scatter", "all_to_all"})
    accept_several_operands(r.at(name));
  define_ppermute(r, all_gather);
  collectives::register_axis_primitives(r, psum, all_gather);
}

}  // namespace spmd

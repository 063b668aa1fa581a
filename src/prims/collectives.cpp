// Primitive family: collectives over named axes (psum, pmax, pmin, all_gather, reduce_scatter,
// ppermute, all_to_all, pbroadcast, axis_index, pvary) with JAX's names, params, shape rules and
// errors. Their kernels run on a device thread of a launch (pmap, shard_map) and talk to the
// launch's Communicator; under vmap the batching rules replace them before anything runs.
#include "prims/collectives.h"

#include <spmd/error.h>

#include "backends/cpu/copy.h"
#include "backends/cpu/reduce.h"
#include "core/axis_env.h"
#include "prims/families.h"
#include "prims/primitive.h"
#include "runtime/launch.h"

#include <algorithm>
#include <cstring>
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

// Every primitive of the family.
constexpr const char* kPrimitives[] = {"psum",           "pmax",     "pmin",       "all_gather",
                                       "reduce_scatter", "ppermute", "all_to_all", "pbroadcast",
                                       "axis_index",     "pvary"};

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

int64_t axes_size(const std::vector<std::string>& names, const char* api) {
  int64_t n = 1;
  for (const auto& name : names) n *= axis_size_of(name, api);
  return n;
}

bool names_axis(const std::string& prim, const Params& params, const std::string& axis) {
  if (axis.empty()) return false;
  if (std::find_if(std::begin(kPrimitives), std::end(kPrimitives),
                   [&](const char* c) { return prim == c; }) == std::end(kPrimitives))
    return false;
  std::vector<std::string> names =
      params.has("axes") ? named_axes(read_axes(params)) : read_names(params);
  return std::find(names.begin(), names.end(), axis) != names.end();
}

}  // namespace collectives

namespace {

using namespace collectives;
using runtime::ReduceOp;

// JAX's _check_axis_names: every name must be bound while the collective is staged or run.
void check_bound(const std::vector<std::string>& names, const char* api) {
  for (const auto& name : names) {
    if (find_axis(name)) continue;
    const runtime::LaunchContext* ctx = runtime::current_launch();
    if (ctx && ctx->axis_of(name) >= 0) continue;
    throw NameError(prefix(api) + "Found an unbound axis name: " + name +
                    ". To fix this, please call " + api + " under `sp::shard_map`.");
  }
}

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

// ---- shape rules ----------------------------------------------------------------------------
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

std::vector<AbstractValue> all_gather_shape(std::span<const AbstractValue> in, const Params& p) {
  const AbstractValue& x = in[0];
  std::vector<std::string> names = read_names(p);
  for (const auto& n : names) axis_size_of(n, "all_gather");
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
  for (const auto& n : read_names(p)) axis_size_of(n, "psum_scatter");
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

// Negative perm entries count from the end, as Python indexing in JAX's lowering does; after
// that, sources and destinations must be unique.
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

std::vector<AbstractValue> pbroadcast_shape(std::span<const AbstractValue> in, const Params& p) {
  std::vector<std::string> names = read_names(p);
  check_bound(names, "pbroadcast");
  int64_t n = axes_size(names, "pbroadcast");
  int64_t source = p.get_int("source");
  if (source < 0 || source >= n)
    throw ValueError(
        "[pbroadcast] collective broadcast doesn't fit in the axis size! The source must be in "
        "[0, " +
        std::to_string(n) + "), got " + std::to_string(source));
  return {in[0]};
}

std::vector<AbstractValue> axis_index_shape(std::span<const AbstractValue>, const Params& p) {
  check_bound(read_names(p), "axis_index");
  return {{Shape{}, int32, false}};
}

std::vector<AbstractValue> pvary_shape(std::span<const AbstractValue> in, const Params& p) {
  check_bound(read_names(p, "axes"), "pvary");
  return {in[0]};
}

// ---- kernels --------------------------------------------------------------------------------
// The devices this one meets in a collective over `names`: the launch's group over those mesh
// axes, narrowed to the listed subgroup holding this device when axis_index_groups is given.
struct Participants {
  const runtime::LaunchContext* ctx;
  std::vector<int> ranks;
  int me = 0;
};

Participants participants(const char* api, const std::vector<std::string>& names,
                          const std::optional<AxisIndexGroups>& groups = std::nullopt) {
  const runtime::LaunchContext* ctx = runtime::current_launch();
  for (const auto& name : names)
    if (!ctx || ctx->axis_of(name) < 0) throw NameError(prefix(api) + "unbound axis name: " + name);
  runtime::Group g = runtime::group_over(*ctx, names);
  Participants p{ctx, g.ranks, g.me};
  if (!groups) return p;
  for (const auto& sub : *groups) {
    auto it = std::find(sub.begin(), sub.end(), g.me);
    if (it == sub.end()) continue;
    p.ranks.clear();
    for (int k : sub) p.ranks.push_back(g.ranks[size_t(k)]);
    p.me = int(it - sub.begin());
    return p;
  }
  throw ValueError(prefix(api) + "axis_index_groups must cover all indices exactly once");
}

// The communicator has no bool reductions: bools reduce as bytes, where max is `or`, min `and`.
DType wire_dtype(DType t) {
  return is_bool(t) ? uint8 : t;
}

CpuKernel reduction_kernel(const char* api, cpu::ReduceOp local_op, ReduceOp op) {
  return [api, local_op, op](const KernelArgs& a) {
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
    Participants p = participants(api, names, read_groups(a.params));
    if (a.out[0].buffer)
      *a.out[0].buffer = p.ctx->comm->all_reduce_shared(api, p.ranks, p.me, op,
                                                        wire_dtype(out.dtype), out.shape, local);
    else
      p.ctx->comm->all_reduce(api, p.ranks, p.me, op, wire_dtype(out.dtype), out.shape, local,
                              a.out[0].data);
  };
}

void all_gather_kernel(const KernelArgs& a) {
  Participants p = participants("all_gather", read_names(a.params), read_groups(a.params));
  const AbstractValue& in = *a.in[0].aval;
  const int axis = int(a.params.get_int("all_gather_dimension"));
  const bool tiled = a.params.get<bool>("tiled");
  if (a.out[0].buffer)
    *a.out[0].buffer = p.ctx->comm->all_gather_shared("all_gather", p.ranks, p.me, in.dtype,
                                                      in.shape, axis, tiled, a.in[0].data);
  else
    p.ctx->comm->all_gather("all_gather", p.ranks, p.me, in.dtype, in.shape, axis, tiled,
                            a.in[0].data, a.out[0].data);
}

void reduce_scatter_kernel(const KernelArgs& a) {
  Participants p = participants("psum_scatter", read_names(a.params), read_groups(a.params));
  const AbstractValue& in = *a.in[0].aval;
  p.ctx->comm->reduce_scatter("psum_scatter", p.ranks, p.me, ReduceOp::sum, in.dtype, in.shape,
                              int(a.params.get_int("scatter_dimension")), a.in[0].data,
                              a.out[0].data);
}

void all_to_all_kernel(const KernelArgs& a) {
  Participants p = participants("all_to_all", read_names(a.params), read_groups(a.params));
  const AbstractValue& in = *a.in[0].aval;
  p.ctx->comm->all_to_all("all_to_all", p.ranks, p.me, in.dtype, in.shape,
                          int(a.params.get_int("split_axis")), int(a.params.get_int("concat_axis")),
                          a.in[0].data, a.out[0].data);
}

void ppermute_kernel(const KernelArgs& a) {
  Participants p = participants("ppermute", read_names(a.params));
  const AbstractValue& in = *a.in[0].aval;
  Perm perm = normalized_perm(read_perm(a.params), int64_t(p.ranks.size()));
  p.ctx->comm->permute("ppermute", p.ranks, p.me, perm, in.dtype, in.shape, a.in[0].data,
                       a.out[0].data);
}

// A gather of every member's block, of which the source's is kept.
void pbroadcast_kernel(const KernelArgs& a) {
  Participants p = participants("pbroadcast", read_names(a.params));
  const AbstractValue& in = *a.in[0].aval;
  std::shared_ptr<Buffer> all = p.ctx->comm->all_gather_shared(
      "pbroadcast", p.ranks, p.me, in.dtype, in.shape, 0, false, a.in[0].data);
  std::memcpy(
      a.out[0].data,
      static_cast<const std::byte*>(all->data()) + size_t(a.params.get_int("source") * in.nbytes()),
      size_t(in.nbytes()));
}

void axis_index_kernel(const KernelArgs& a) {
  Participants p = participants("axis_index", read_names(a.params));
  *a.out[0].as<int32_t>() = p.me;
}

void pvary_kernel(const KernelArgs& a) {
  std::memcpy(a.out[0].data, a.in[0].data, size_t(a.in[0].aval->nbytes()));
}

}  // namespace

void register_collective_primitives(PrimitiveRegistry& r) {
  r.define("psum", reduction_shape("psum"),
           reduction_kernel("psum", cpu::ReduceOp::sum, ReduceOp::sum));
  r.define("pmax", reduction_shape("pmax"),
           reduction_kernel("pmax", cpu::ReduceOp::max, ReduceOp::max));
  r.define("pmin", reduction_shape("pmin"),
           reduction_kernel("pmin", cpu::ReduceOp::min, ReduceOp::min));
  r.define("all_gather", all_gather_shape, all_gather_kernel);
  r.define("reduce_scatter", reduce_scatter_shape, reduce_scatter_kernel);
  r.define("all_to_all", all_to_all_shape, all_to_all_kernel);
  r.define("ppermute", ppermute_shape, ppermute_kernel);
  r.define("pbroadcast", pbroadcast_shape, pbroadcast_kernel);
  r.define("axis_index", axis_index_shape, axis_index_kernel);
  r.define("pvary", pvary_shape, pvary_kernel);
  // Each device computes its own result: constant folding must leave them to the devices.
  for (const char* name : collectives::kPrimitives) r.at(name).device_dependent = true;
  // Results that are the same on every member of the group live in one buffer they share.
  for (const char* name : {"psum", "pmax", "pmin", "all_gather"})
    r.at(name).allocates_outputs = true;
}

}  // namespace spmd

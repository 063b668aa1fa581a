// The collective primitives' parameters, shared by the family's files (collectives.cpp,
// axis_ops.cpp) and the public functions (ops/parallel_ops.cpp). Params are spelled as JAX 0.10
// prints them.
#pragma once

#include <spmd/parallel.h>

#include "ir/params.h"
#include "ir/primitive.h"

#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace spmd {
class PrimitiveRegistry;
namespace runtime {
struct LaunchContext;
}
}  // namespace spmd

namespace spmd::collectives {

// An entry of psum/pmax/pmin's `axes`: a named axis or, once vmap has batched the reduction, a
// positional dimension (JAX's psum[axes=(0, 'j')]).
using ReduceAxis = std::variant<int64_t, std::string>;
std::vector<ReduceAxis> read_axes(const Params& p);
ParamValue axes_param(const std::vector<ReduceAxis>& axes);
std::vector<std::string> named_axes(const std::vector<ReduceAxis>& axes);
std::vector<int64_t> positional_axes(const std::vector<ReduceAxis>& axes);

// `axis_name` as given (a string prints as i, a tuple as ('i',)); read back as a list of names.
ParamValue names_param(const AxisNames& names);
ParamValue tuple_param(const std::vector<std::string>& names);
std::vector<std::string> read_names(const Params& p, const char* key = "axis_name");

// axis_index_groups: None or a tuple of tuples.
ParamValue groups_param(const std::optional<AxisIndexGroups>& groups);
std::optional<AxisIndexGroups> read_groups(const Params& p);
// JAX's _validate_reduce_axis_index_groups: the groups cover 0..total-1 exactly once.
void validate_groups(const std::optional<AxisIndexGroups>& groups, const char* api);

// ppermute's perm: (source, destination) pairs.
using Perm = std::vector<std::pair<int, int>>;
ParamValue perm_param(const Perm& perm);
const Perm& read_perm(const Params& p);

// The size of a named axis: from the axis environment while tracing, else from the device launch
// running the caller. NameError "[api] unbound axis name: i" when neither binds it.
int64_t axis_size_of(const std::string& name, const char* api);
// ValueError "[api] repeated axis in `axis_name` argument, got ('i', 'i')" (JAX's numpy error
// for a name given twice).
void check_distinct(const std::vector<std::string>& names, const char* api);
// The product of the named axes' sizes; the names must be distinct.
int64_t axes_size(const std::vector<std::string>& names, const char* api);

// The named axes a collective's params say it communicates over (Primitive::axis_names).
std::vector<std::string> communicating_axes(const Params& params);
// pvary over `axes` as the vma rules insert it: a cast, with no check of the axis environment.
Array pvary_cast(const Array& x, std::vector<std::string> axes);

// The family's primitives, for passes that rewrite collectives (compile/passes.cpp); psum's is
// below.
const Primitive& all_gather_primitive();
const Primitive& reduce_scatter_primitive();
const Primitive& all_to_all_primitive();
const Primitive& axis_index_primitive();  // defined in axis_ops.cpp

// ---- shared by the family's files ----------------------------------------------------------
// Defines a primitive of the family. Each device computes its own result: constant folding
// leaves them to the devices, and the sharding rule is the replicated one.
Primitive& define_collective(PrimitiveRegistry& r, const char* name, ShapeRule shape,
                             CpuKernel kernel);

// JAX's _check_axis_names: every name must be bound while the collective is staged or run.
void check_bound(const std::vector<std::string>& names, const char* api);

// The devices this one meets in a collective over `names`: the launch's group over those mesh
// axes, narrowed to the listed subgroup holding this device when axis_index_groups is given.
// `ranks` lies in the launch context's known groups, valid for the rest of the launch.
struct Participants {
  const runtime::LaunchContext* ctx;
  std::span<const int> ranks;
  int me = 0;
};
Participants participants(const char* api, const std::vector<std::string>& names,
                          const std::optional<AxisIndexGroups>& groups = std::nullopt);

// The names bound by a shard_map that checks vma (under vmap or pmap nothing is typed).
std::vector<std::string> typed(const std::vector<std::string>& names);
// Python's repr of a tuple of names, ('i',), and of a frozenset of them, for vma errors.
std::string tuple_repr(const std::vector<std::string>& names);
std::string frozenset_repr(const std::vector<std::string>& names);

bool contains(const std::vector<std::string>& names, const std::string& name);
std::vector<std::string> without(const std::vector<std::string>& names, const std::string& name);
Params with(Params p, const char* key, ParamValue value);
BatchResult single(Array out, int dim);

// Under vmap, every instance's block over a tuple of names that includes the vmap's axis
// (`x` batched along `d`), stacked in instance order (unbatched): all_gather's batching rule.
Array gather_over_tuple(const Primitive& all_gather, const Array& x, int d,
                        const std::vector<std::string>& names, const BatchContext& ctx);

// psum, pmax and pmin, for the sharding rules of other families whose partial results they
// complete (dot_general, reduce_sum, reduce_max, reduce_min). Only once the registry is built.
// `reduction` (psum, pmax or pmin, a sharding rule's combiner) of x over the named axes (within
// each of `groups` when given), bound as the partitioner emits it.
Array reduce_over(const Primitive& reduction, const Array& x, const std::vector<std::string>& axes,
                  const std::optional<AxisIndexGroups>& groups = std::nullopt);
// The reduce-scatter form of `reduction` over the named axes: x's dim `dim` is cut into as many
// chunks as the axes have instances, and instance i keeps the reduction of every instance's
// chunk i (a tiled psum_scatter for a sum).
Array scatter_over(const Primitive& reduction, const Array& x, const AxisNames& names, int dim);
const Primitive& psum_primitive();
const Primitive& pmax_primitive();
const Primitive& pmin_primitive();

// pbroadcast, axis_index, pvary and psum_invariant (axis_ops.cpp), whose rules use psum and
// all_gather.
void register_axis_primitives(PrimitiveRegistry& r, const Primitive& psum,
                              const Primitive& all_gather);

}  // namespace spmd::collectives

// The collective primitives' parameters, shared by their shape rules and kernels
// (collectives.cpp), their transformation rules (transforms/collective_rules.cpp) and the public
// functions (ops/parallel_ops.cpp). Params are spelled as JAX 0.10 prints them.
#pragma once

#include <spmd/parallel.h>

#include "ir/params.h"

#include <string>
#include <utility>
#include <variant>
#include <vector>

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
int64_t axes_size(const std::vector<std::string>& names, const char* api);

// Whether the equation `prim[params]` is a collective over `axis` (vmap calls such a
// collective's batching rule even when no operand is batched).
bool names_axis(const std::string& prim, const Params& params, const std::string& axis);

}  // namespace spmd::collectives

// Collectives over named axes, as jax.lax's parallel operators: psum, pmean, pmax, pmin,
// all_gather, psum_scatter, ppermute, pshuffle, all_to_all, axis_index, axis_size, pvary and
// pbroadcast. They work inside pmap and shard_map bodies and inside vmap with an axis_name;
// `name` is one axis name ("i") or a tuple of them (sp::axes("rows", "cols")).
#pragma once

#include <spmd/array.h>
#include <spmd/axis_names.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace spmd {

// Replica subgroups along the named axes: each inner list holds axis indices; together they
// cover every index exactly once. The reduction then runs within each subgroup.
using AxisIndexGroups = std::vector<std::vector<int>>;

struct ReduceOptions {
  std::optional<AxisIndexGroups> axis_index_groups = {};
};
struct AllGatherOptions {
  int axis = 0;        // where the gathered dimension goes (tiled: the dimension concatenated)
  bool tiled = false;  // concatenate along `axis` instead of stacking along a new one
  std::optional<AxisIndexGroups> axis_index_groups = {};
};
struct PsumScatterOptions {
  int scatter_dimension = 0;
  bool tiled = false;  // keep the scattered dimension (chunks) instead of removing it
  std::optional<AxisIndexGroups> axis_index_groups = {};
};
struct AllToAllOptions {
  bool tiled = false;
  std::optional<AxisIndexGroups> axis_index_groups = {};
};

// Sum over the instances along `name`; bool operands are summed as int32. A value that is not
// traced (the same on every instance) gives value · axis size.
Array psum(const Array& x, const AxisNames& name, const ReduceOptions& options = {});
// psum / axis size.
Array pmean(const Array& x, const AxisNames& name, const ReduceOptions& options = {});
Array pmax(const Array& x, const AxisNames& name, const ReduceOptions& options = {});
Array pmin(const Array& x, const AxisNames& name, const ReduceOptions& options = {});

// Every instance's x, stacked along a new dimension `axis` (or concatenated along it, tiled).
Array all_gather(const Array& x, const AxisNames& name, const AllGatherOptions& options = {});
// The sum over instances, scattered: instance i gets S[i] along scatter_dimension (untiled,
// which needs shape[d] == axis size) or the i-th of axis-size equal chunks (tiled).
Array psum_scatter(const Array& x, const AxisNames& name, const PsumScatterOptions& options = {});
// perm: (source, destination) pairs of axis indices, sources unique and destinations unique.
// Instance dst gets x of instance src; instances that are no destination get zeros.
Array ppermute(const Array& x, const AxisNames& name, std::vector<std::pair<int, int>> perm);
// perm a permutation of the axis indices: instance i gets x of instance perm[i].
Array pshuffle(const Array& x, const AxisNames& name, std::vector<int> perm);
// Splits x along split_axis into axis-size chunks, sends chunk j to instance j and concatenates
// the chunks received along concat_axis. Untiled, shape[split_axis] must equal the axis size
// and that dimension is replaced by a new one at concat_axis.
Array all_to_all(const Array& x, const AxisNames& name, int split_axis, int concat_axis,
                 const AllToAllOptions& options = {});

// The int32 index of this instance along `name`; for a tuple (a, b): idx_a · size_b + idx_b.
Array axis_index(const AxisNames& name);
// The number of instances along `name` (the product for a tuple).
int64_t axis_size(const AxisNames& name);

// Marks x as varying over `name` (a type cast; the values are unchanged).
Array pvary(const Array& x, const AxisNames& name);
// Every instance gets x of instance `source`.
Array pbroadcast(const Array& x, const AxisNames& name, int source);

namespace lax {
using spmd::all_gather;
using spmd::all_to_all;
using spmd::axis_index;
using spmd::axis_size;
using spmd::pbroadcast;
using spmd::pmax;
using spmd::pmean;
using spmd::pmin;
using spmd::ppermute;
using spmd::pshuffle;
using spmd::psum;
using spmd::psum_scatter;
using spmd::pvary;
}  // namespace lax

}  // namespace spmd

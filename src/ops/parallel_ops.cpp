// The collectives' public functions (include/spmd/parallel.h): argument checks and the
// conversions JAX's jax.lax wrappers make (bool psum as int32, pmean as psum / n, pshuffle as a
// ppermute, untiled all_to_all as expand_dims / squeeze around the tiled primitive), then bind.
#include <spmd/error.h>
#include <spmd/lax.h>
#include <spmd/ops.h>
#include <spmd/parallel.h>

#include "core/axis_env.h"
#include "ops/op_util.h"
#include "prims/collectives.h"
#include "runtime/launch.h"

#include <algorithm>

namespace spmd {
namespace {

// Whether every name is a mesh axis of an enclosing shard_map that checks vma.
bool typed_axes(const std::vector<std::string>& names) {
  if (names.empty()) return false;
  for (const std::string& n : names) {
    std::optional<AxisFrame> f = find_axis(n);
    if (!f || !f->vma) return false;
  }
  return true;
}

using namespace collectives;

int64_t group_size(const AxisNames& name, const std::optional<AxisIndexGroups>& groups,
                   const char* api) {
  if (groups) return int64_t((*groups)[0].size());
  return axes_size(name.names(), api);
}

Params reduce_params(const AxisNames& name, const std::optional<AxisIndexGroups>& groups) {
  std::vector<ReduceAxis> axes(name.names().begin(), name.names().end());
  return Params{{"axes", axes_param(axes)}, {"axis_index_groups", groups_param(groups)}};
}

// Inside shard_map with check_vma a reduction's operand must vary over every reduced axis; JAX
// casts it first (insert_collective_pvary), so its jaxpr shows the pvary.
Array varying_over(const Array& x, const AxisNames& name) {
  if (!typed_axes(name.names())) return x;
  std::vector<std::string> missing = vma_minus(name.names(), aval_of(x).vma);
  return missing.empty() ? x : pvary(x, AxisNames(missing, true));
}

Array reduce(const char* prim, const Array& x, const AxisNames& name,
             const std::optional<AxisIndexGroups>& groups) {
  validate_groups(groups, prim);
  return ops::apply(prim, {varying_over(x, name)}, reduce_params(name, groups));
}

}  // namespace

Array psum(const Array& x, const AxisNames& name, const ReduceOptions& options) {
  if (name.empty()) return x;
  validate_groups(options.axis_index_groups, "psum");
  Array v = is_bool(x.dtype()) ? ops::convert(x, int32) : x;
  // A value that is not traced is the same on every instance (JAX's constant case); inside a
  // device launch, concrete values are the device's own and are summed for real.
  if (is_concrete(v) && !runtime::current_launch()) {
    int64_t n = group_size(name, options.axis_index_groups, "psum");
    return ops::apply("mul", {ops::scalar(double(n), v.dtype(), false), v});
  }
  if (typed_axes(name.names())) {
    // Inside shard_map with check_vma: psum_invariant, the operand first made varying over
    // every summed axis (JAX's bind_psum_invariant).
    // JAX raises NotImplementedError with no message here.
    if (options.axis_index_groups)
      throw NotImplementedError(
          "[psum] axis_index_groups are not supported inside shard_map with check_vma=true, got "
          "axis_index_groups=" +
          std::get<ObjectParam>(groups_param(options.axis_index_groups)).object->str() +
          "; pass check_vma=false to reduce within the groups");
    return ops::apply("psum_invariant", {varying_over(v, name)}, Params{{"axes", name.names()}});
  }
  return ops::apply("psum", {v}, reduce_params(name, options.axis_index_groups));
}

Array pmean(const Array& x, const AxisNames& name, const ReduceOptions& options) {
  Array total = psum(x, name, options);
  int64_t n = group_size(name, options.axis_index_groups, "pmean");
  return divide(total, Array(long(n)));
}

Array pmax(const Array& x, const AxisNames& name, const ReduceOptions& options) {
  if (name.empty()) return x;
  return reduce("pmax", x, name, options.axis_index_groups);
}

Array pmin(const Array& x, const AxisNames& name, const ReduceOptions& options) {
  if (name.empty()) return x;
  return reduce("pmin", x, name, options.axis_index_groups);
}

Array all_gather(const Array& x, const AxisNames& name, const AllGatherOptions& options) {
  if (name.empty()) return x;
  validate_groups(options.axis_index_groups, "all_gather");
  int64_t n = group_size(name, options.axis_index_groups, "all_gather");
  int dim = ops::canonicalize_axis("all_gather", options.axis, x.ndim() + (options.tiled ? 0 : 1));
  return ops::apply("all_gather", {x},
                    Params{{"all_gather_dimension", int64_t(dim)},
                           {"axis_index_groups", groups_param(options.axis_index_groups)},
                           {"axis_name", tuple_param(name.names())},
                           {"axis_size", n},
                           {"tiled", options.tiled}});
}

Array psum_scatter(const Array& x, const AxisNames& name, const PsumScatterOptions& options) {
  if (name.empty()) return x;
  validate_groups(options.axis_index_groups, "psum_scatter");
  int64_t n = group_size(name, options.axis_index_groups, "psum_scatter");
  int dim = ops::canonicalize_axis("psum_scatter", options.scatter_dimension, x.ndim());
  return ops::apply("reduce_scatter", {x},
                    Params{{"axis_index_groups", groups_param(options.axis_index_groups)},
                           {"axis_name", tuple_param(name.names())},
                           {"axis_size", n},
                           {"scatter_dimension", int64_t(dim)},
                           {"tiled", options.tiled}});
}

Array ppermute(const Array& x, const AxisNames& name, std::vector<std::pair<int, int>> perm) {
  return ops::apply("ppermute", {x},
                    Params{{"axis_name", tuple_param(name.names())}, {"perm", perm_param(perm)}});
}

Array pshuffle(const Array& x, const AxisNames& name, std::vector<int> perm) {
  std::vector<int> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool is_permutation = true;
  for (size_t i = 0; i < sorted.size(); ++i) is_permutation = is_permutation && sorted[i] == int(i);
  if (!is_permutation) {
    std::string text = "[";
    for (size_t i = 0; i < perm.size(); ++i) text += (i ? ", " : "") + std::to_string(perm[i]);
    throw ValueError("[pshuffle] `perm` does not represent a permutation: " + text + "]");
  }
  std::vector<std::pair<int, int>> pairs;
  for (size_t i = 0; i < perm.size(); ++i) pairs.emplace_back(perm[i], int(i));
  return ppermute(x, name, std::move(pairs));
}

Array all_to_all(const Array& x, const AxisNames& name, int split_axis, int concat_axis,
                 const AllToAllOptions& options) {
  validate_groups(options.axis_index_groups, "all_to_all");
  int64_t n = group_size(name, options.axis_index_groups, "all_to_all");
  int split = ops::canonicalize_axis("all_to_all", split_axis, x.ndim());
  int concat = ops::canonicalize_axis("all_to_all", concat_axis, x.ndim());
  Array v = x;
  // The tiled size check is the primitive's shape rule.
  if (!options.tiled) {
    if (x.shape()[split] != n)
      throw ValueError(
          "[all_to_all] all_to_all requires the size of the mapped axis axis_name to equal "
          "x.shape[split_axis], but they are " +
          std::to_string(n) + " and " + std::to_string(x.shape()[split]) + " respectively.");
    // The primitive is tiled; the untiled form moves the split dimension to concat_axis.
    if (split < concat) {
      concat += 1;
      v = lax::expand_dims(v, {concat});
    } else if (concat < split) {
      v = lax::expand_dims(v, {concat});
      split += 1;
    }
  }
  Array out = ops::apply("all_to_all", {v},
                         Params{{"axis_index_groups", groups_param(options.axis_index_groups)},
                                {"axis_name", names_param(name)},
                                {"concat_axis", int64_t(concat)},
                                {"split_axis", int64_t(split)},
                                {"tiled", options.tiled}});
  if (!options.tiled && split != concat) out = lax::squeeze(out, {split});
  return out;
}

// For a tuple, the index over the product of the axes, minor name fastest (as JAX composes it).
Array axis_index(const AxisNames& name) {
  check_distinct(name.names(), "axis_index");
  if (!name.is_tuple() && name.size() == 1)
    return ops::apply("axis_index", std::vector<Array>{}, Params{{"axis_name", name.names()[0]}});
  Array index = ops::scalar(0, int32, true);
  int64_t inner = 1;
  for (auto it = name.names().rbegin(); it != name.names().rend(); ++it) {
    Array i = axis_index(AxisNames(*it));
    index = index + i * Array(long(inner));
    inner *= axis_size(AxisNames(*it));
  }
  return index;
}

int64_t axis_size(const AxisNames& name) {
  return axes_size(name.names(), "axis_size");
}

Array pvary(const Array& x, const AxisNames& name) {
  if (name.empty()) return x;
  // Over the axes of a shard_map or pmap without check_vma nothing is typed, and JAX binds
  // nothing (a pvary there would transpose to a sum). vmap axes keep the primitive.
  bool untyped_manual = true;
  for (const std::string& n : name.names()) {
    std::optional<AxisFrame> f = find_axis(n);
    untyped_manual = untyped_manual && f && f->binder != "vmap" && !f->vma;
  }
  if (untyped_manual) return x;
  return ops::apply("pvary", {x}, Params{{"axes", tuple_param(name.names())}});
}

Array pbroadcast(const Array& x, const AxisNames& name, int source) {
  return ops::apply("pbroadcast", {x},
                    Params{{"axis_name", names_param(name)}, {"source", int64_t(source)}});
}

}  // namespace spmd

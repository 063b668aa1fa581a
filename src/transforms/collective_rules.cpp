// Differentiation and batching rules of the collectives, after JAX's rules in
// jax/_src/lax/parallel.py with pmap semantics (no varying-axes typing): psum is linear and
// transposes to psum, all_gather and psum_scatter transpose to each other, ppermute to the inverse
// permutation, all_to_all to the swapped one, pvary to psum. Under vmap with an axis_name a
// collective over that axis is computed along the batch dimension; one over other axes is bound
// again with the batch dimension kept.
#include "prims/rule_util.h"

#include <spmd/error.h>
#include <spmd/lax.h>
#include <spmd/ops.h>
#include <spmd/parallel.h>

#include "ops/op_util.h"
#include "prims/collectives.h"
#include "prims/primitive.h"

#include <algorithm>

namespace spmd {
namespace {

using namespace collectives;
using Ints = std::vector<int64_t>;

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

Array bind_as(const char* prim, const Array& x, const Params& p) {
  return bind1(primitive(prim), {x}, p);
}

BatchResult single(Array out, int dim) {
  return {{std::move(out)}, {dim}};
}

void no_groups_in_vmap(const Params& p, const char* api) {
  if (read_groups(p))
    throw NotImplementedError(std::string("[") + api +
                              "] axis_index_groups not supported in vmap collectives. Please "
                              "open a feature request!");
}

// ---- shape helpers (JAX's _moveaxis, _splitaxis, _foldaxis) --------------------------------
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

// ---- psum, pmax, pmin -----------------------------------------------------------------------
// JAX's _batched_reduction_collective: the named axis of this vmap becomes the positional batch
// dimension of the same reduction.
BatchRule reduction_batch(const char* name) {
  return [name](std::span<const Array> args, std::span<const int> dims, const Params& p,
                const BatchContext& ctx) {
    const std::vector<ReduceAxis> axes = read_axes(p);
    const bool has_frame = contains(named_axes(axes), ctx.axis_name);
    const bool is_sum = std::string(name) == "psum";
    auto rebind = [&](const Array& x, const std::vector<ReduceAxis>& ax) {
      return bind_as(name, x, with(p, "axes", axes_param(ax)));
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
      if (!is_sum) return single(arg, kNotBatched);
      Array n = ops::scalar(double(ctx.axis_size), arg.dtype(), false);
      return single(ops::apply("mul", {n, arg}), kNotBatched);
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

std::vector<Array> psum_transpose(std::span<const Array> cts, std::span<const LinearInput> in,
                                  const Params& p) {
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
  return {bind_as("psum", ct, with(p, "axes", axes_param(named)))};
}

// ---- all_gather -------------------------------------------------------------------------------
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

BatchResult all_gather_batch(std::span<const Array> args, std::span<const int> dims,
                             const Params& p, const BatchContext& ctx) {
  const std::vector<std::string> names = read_names(p);
  int64_t g = p.get_int("all_gather_dimension");
  const bool tiled = p.get<bool>("tiled");
  Array x = args[0];
  int d = dims[0];
  if (!contains(names, ctx.axis_name)) {
    if (d == kNotBatched) return single(bind_as("all_gather", x, p), kNotBatched);
    if (d <= g)
      g += 1;
    else if (!tiled)
      d += 1;
    return single(bind_as("all_gather", x, with(p, "all_gather_dimension", g)), d);
  }
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
      y = bind_as("all_gather", y,
                  all_gather_params(minor, 1, false, std::nullopt, axes_size(minor, "all_gather")));
      y = fold_axis(y, 0);
    }
    if (!major.empty()) {
      y = bind_as("all_gather", y,
                  all_gather_params(major, 0, false, std::nullopt, axes_size(major, "all_gather")));
      y = fold_axis(y, 0);
    }
    y = move_axis(y, 0, int(g));
  }
  if (tiled) y = fold_axis(y, int(g));
  return single(y, kNotBatched);
}

std::vector<Array> all_gather_transpose(std::span<const Array> cts, std::span<const LinearInput>,
                                        const Params& p) {
  return {
      bind_as("reduce_scatter", cts[0],
              reduce_scatter_params(read_names(p), p.get_int("all_gather_dimension"),
                                    p.get<bool>("tiled"), read_groups(p), p.get_int("axis_size")))};
}

// ---- reduce_scatter (psum_scatter) ------------------------------------------------------------
BatchResult reduce_scatter_batch(std::span<const Array> args, std::span<const int> dims,
                                 const Params& p, const BatchContext& ctx) {
  const std::vector<std::string> names = read_names(p);
  int64_t g = p.get_int("scatter_dimension");
  const bool tiled = p.get<bool>("tiled");
  Array x = args[0];
  int d = dims[0];
  if (!contains(names, ctx.axis_name)) {
    if (d == kNotBatched) return single(bind_as("reduce_scatter", x, p), kNotBatched);
    if (d <= g)
      g += 1;
    else if (!tiled)
      d += 1;
    return single(bind_as("reduce_scatter", x, with(p, "scatter_dimension", g)), d);
  }
  no_groups_in_vmap(p, "psum_scatter");
  const int64_t n = ctx.axis_size;
  Array y = d == kNotBatched ? ops::apply("mul", {x, ops::scalar(double(n), x.dtype(), true)})
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
  y = bind_as("reduce_scatter", y,
              reduce_scatter_params(rest, dy + 1, false, std::nullopt, n_major * n_minor));
  // Untiled, each chunk is one element: its dim goes.
  if (!tiled) y = lax::squeeze(y, {dy + 1});
  return single(y, dy);
}

std::vector<Array> reduce_scatter_transpose(std::span<const Array> cts,
                                            std::span<const LinearInput>, const Params& p) {
  return {bind_as("all_gather", cts[0],
                  all_gather_params(read_names(p), p.get_int("scatter_dimension"),
                                    p.get<bool>("tiled"), read_groups(p), p.get_int("axis_size")))};
}

// ---- ppermute, pbroadcast ----------------------------------------------------------------------
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

// Every instance's block over a tuple of names that includes this vmap's axis, stacked in
// instance order (unbatched).
Array gather_over_tuple(const Array& x, int d, const std::vector<std::string>& names,
                        const BatchContext& ctx) {
  Params p = all_gather_params(names, 0, false, std::nullopt, tuple_size(names, ctx));
  Array arg[] = {x};
  int dim[] = {d};
  return all_gather_batch(arg, dim, p, ctx).outputs[0];
}

// For each destination instance its source under `perm` (entries modulo n), or -1.
std::vector<int> sources_by_destination(const Perm& perm, int64_t n) {
  std::vector<int> source_of(size_t(n), -1);
  for (auto [s, t] : perm) source_of[size_t(((t % n) + n) % n)] = int(((s % n) + n) % n);
  return source_of;
}

// ppermute over a tuple that includes this vmap's axis: each instance takes its source's block
// from a gather over the tuple, or zeros when no pair sends to it.
BatchResult ppermute_tuple_batch(const Array& x, int d, const std::vector<std::string>& names,
                                 const Params& p, const BatchContext& ctx) {
  std::vector<int> source_of = sources_by_destination(read_perm(p), tuple_size(names, ctx));
  Array blocks = gather_over_tuple(x, d, names, ctx);
  Array sources = take(array(source_of), tuple_instance_index(names, ctx));
  Array picked = take(blocks, maximum(sources, Array(0)), 0);
  Array has_source = lax::broadcast_in_dim(sources >= Array(0), picked.shape(), {0});
  return single(where(has_source, picked, zeros_like(picked)), 0);
}

BatchResult ppermute_batch(std::span<const Array> args, std::span<const int> dims, const Params& p,
                           const BatchContext& ctx) {
  const std::vector<std::string> names = read_names(p);
  Array x = args[0];
  int d = dims[0];
  if (!contains(names, ctx.axis_name)) return single(bind_as("ppermute", x, p), d);
  if (names.size() > 1) return ppermute_tuple_batch(x, d, names, p, ctx);
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

std::vector<Array> ppermute_transpose(std::span<const Array> cts, std::span<const LinearInput>,
                                      const Params& p) {
  Perm inverse;
  for (auto [s, t] : read_perm(p)) inverse.emplace_back(t, s);
  return {bind_as("ppermute", cts[0], with(p, "perm", perm_param(inverse)))};
}

BatchResult pbroadcast_batch(std::span<const Array> args, std::span<const int> dims,
                             const Params& p, const BatchContext& ctx) {
  const std::vector<std::string> names = read_names(p);
  Array x = args[0];
  int d = dims[0];
  if (!contains(names, ctx.axis_name)) return single(bind_as("pbroadcast", x, p), d);
  if (names.size() > 1) {
    Array blocks = gather_over_tuple(x, d, names, ctx);
    return single(lax::index_in_dim(blocks, p.get_int("source"), 0, false), kNotBatched);
  }
  if (d == kNotBatched) return single(x, kNotBatched);
  return single(lax::index_in_dim(x, p.get_int("source"), d, false), kNotBatched);
}

// JAX's _pbroadcast_transpose_rule: the summed cotangent goes back to the source only.
std::vector<Array> pbroadcast_transpose(std::span<const Array> cts, std::span<const LinearInput>,
                                        const Params& p) {
  std::vector<std::string> names = read_names(p);
  AxisNames axis(names,
                 names.size() != 1 || !std::holds_alternative<std::string>(p.at("axis_name")));
  const Array& t = cts[0];
  Array is_source =
      ops::apply("eq", {axis_index(axis), ops::scalar(double(p.get_int("source")), int32, false)});
  Array total = psum(t, axis);
  Array zeros = zeros_like_aval({t.shape(), t.dtype(), false});
  Array pred = t.ndim() ? lax::broadcast_in_dim(is_source, t.shape(), {}) : is_source;
  return {lax::select(pred, total, zeros)};
}

// ---- all_to_all ---------------------------------------------------------------------------------
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
BatchResult all_to_all_tuple_batch(Array x, int d, int64_t split, int64_t concat,
                                   const std::vector<std::string>& names, const Params& p,
                                   const BatchContext& ctx) {
  auto [major, minor] = around(names, ctx.axis_name);
  x = lax::expand_dims(move_axis(x, d, 0), {0, 2});
  split += 3;
  concat += 3;
  if (!major.empty()) x = bind_as("all_to_all", x, all_to_all_params(p, major, split, 0));
  x = split_axis(x, int(split), ctx.axis_size);
  int64_t new_d = split;
  if (split <= concat) concat += 1;
  split += 1;
  if (!minor.empty()) x = bind_as("all_to_all", x, all_to_all_params(p, minor, split, 2));
  x = fold_axis(fold_axis(x, 0), 0);
  concat -= 2;
  new_d -= 2;
  x = fold_axis(move_axis(x, 0, int(concat) - 1), int(concat) - 1);
  return single(x, int(new_d) - 1);
}

BatchResult all_to_all_batch(std::span<const Array> args, std::span<const int> dims,
                             const Params& p, const BatchContext& ctx) {
  const std::vector<std::string> names = read_names(p);
  int64_t split = p.get_int("split_axis");
  int64_t concat = p.get_int("concat_axis");
  Array x = args[0];
  int d = dims[0];
  if (!contains(names, ctx.axis_name)) {
    if (d == kNotBatched) return single(bind_as("all_to_all", x, p), kNotBatched);
    Params q = with(p, "split_axis", split + (d <= split ? 1 : 0));
    q.set("concat_axis", concat + (d <= concat ? 1 : 0));
    return single(bind_as("all_to_all", x, q), d);
  }
  no_groups_in_vmap(p, "all_to_all");
  const int64_t n = ctx.axis_size;
  if (d == kNotBatched) {
    x = move_batch_dim(x, kNotBatched, 0, n);
    d = 0;
  }
  if (names.size() > 1) return all_to_all_tuple_batch(x, d, split, concat, names, p, ctx);
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

std::vector<Array> all_to_all_transpose(std::span<const Array> cts, std::span<const LinearInput>,
                                        const Params& p) {
  Params q = with(p, "split_axis", p.get_int("concat_axis"));
  q.set("concat_axis", p.get_int("split_axis"));
  return {bind_as("all_to_all", cts[0], q)};
}

// ---- axis_index, pvary ------------------------------------------------------------------------
BatchResult axis_index_batch(std::span<const Array>, std::span<const int>, const Params& p,
                             const BatchContext& ctx) {
  if (!contains(read_names(p), ctx.axis_name))
    return single(bind1(primitive("axis_index"), std::span<const Array>{}, p), kNotBatched);
  return single(lax::iota(int32, ctx.axis_size), 0);
}

// Under vmap every value already varies along the vmap axis: only the other names remain.
BatchResult pvary_batch(std::span<const Array> args, std::span<const int> dims, const Params& p,
                        const BatchContext& ctx) {
  std::vector<std::string> rest = without(read_names(p, "axes"), ctx.axis_name);
  if (rest.empty()) return single(args[0], dims[0]);
  return single(bind_as("pvary", args[0], with(p, "axes", tuple_param(rest))), dims[0]);
}

std::vector<Array> pvary_transpose(std::span<const Array> cts, std::span<const LinearInput>,
                                   const Params& p) {
  std::vector<std::string> names = read_names(p, "axes");
  std::vector<ReduceAxis> axes(names.begin(), names.end());
  return {bind_as("psum", cts[0],
                  Params{{"axes", axes_param(axes)}, {"axis_index_groups", NoneParam{}}})};
}

}  // namespace

void register_collective_rules(PrimitiveRegistry& r) {
  for (const char* name : {"psum", "pmax", "pmin"}) r.at(name).batch = reduction_batch(name);
  deflinear(r, "psum", psum_transpose);
  r.at("all_gather").batch = all_gather_batch;
  deflinear(r, "all_gather", all_gather_transpose);
  r.at("reduce_scatter").batch = reduce_scatter_batch;
  deflinear(r, "reduce_scatter", reduce_scatter_transpose);
  r.at("ppermute").batch = ppermute_batch;
  deflinear(r, "ppermute", ppermute_transpose);
  r.at("pbroadcast").batch = pbroadcast_batch;
  deflinear(r, "pbroadcast", pbroadcast_transpose);
  r.at("all_to_all").batch = all_to_all_batch;
  deflinear(r, "all_to_all", all_to_all_transpose);
  r.at("axis_index").batch = axis_index_batch;
  r.at("axis_index").non_differentiable = true;
  r.at("pvary").batch = pvary_batch;
  deflinear(r, "pvary", pvary_transpose);
}

}  // namespace spmd

// The SPMD partitioner: a global Program and a split for each of its values (propagation) become
// the program every device runs on its blocks. Each equation runs on blocks split as its
// sharding rule's factors say; operands are resharded to that split first (slicing is free,
// all-to-all moves an axis between dims, all-gather removes one), partial results of reduction
// factors are completed by the rule's combiner, and results are resharded to their propagated
// split. The per-device program is traced with the mesh axes in scope, so the collectives are
// the ones shard_map bodies use.
#include "compile/partition.h"

#include <spmd/lax.h>
#include <spmd/ops.h>
#include <spmd/parallel.h>

#include "compile/passes.h"
#include "core/axis_env.h"
#include "ir/primitive.h"
#include "prims/collectives.h"
#include "prims/primitive.h"
#include "sharding/type_sharding.h"
#include "transforms/halo.h"
#include "transforms/staging.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <map>
#include <numeric>
#include <set>
#include <unordered_map>
#include <utility>

namespace spmd {
namespace {

using AxisList = std::vector<std::string>;
using Split = std::vector<AxisList>;

bool is_prefix(const AxisList& a, const AxisList& b) {
  return a.size() <= b.size() && std::equal(a.begin(), a.end(), b.begin());
}

AxisNames names_of(const AxisList& axes) {
  return axes.size() == 1 ? AxisNames(axes[0]) : AxisNames(axes, true);
}

// A device's block of a value and how the value is split. `kept` is set where the block is laid
// out otherwise, by sub-axes a reshape gave its dims (one halo::Layout a dim): the ops that keep
// the factors carry them on, and the first that needs whole axes moves the block to `split`
// (or to the split it needs) by one relayout.
struct Local {
  Array value;
  Split split;
  std::vector<halo::Layout> kept = {};
};

int64_t nbytes(const Array& x) {
  return aval_of(x).nbytes();
}

// Called for each collective a reshard inserts: what it is and the bytes each device sends.
using CollectiveLog = std::function<void(std::string collective, int64_t bytes_sent)>;

int64_t product(const AxisList& axes) {
  return axes.empty() ? 1 : axis_size(names_of(axes));
}

// Whether `axes` split a dim of extent n into blocks of equal size. Otherwise the blocks have
// the ceil size and the last ones hold padding (JAX's layout: block i covers [i*b, (i+1)*b)).
bool even(int64_t n, const AxisList& axes) {
  return n % product(axes) == 0;
}

// The whole of dim d, gathered from blocks split by `axes` (padded or not).
Array gather_whole(const Array& x, int d, int64_t n, const AxisList& axes,
                   const CollectiveLog& log) {
  log("all_gather over " + names_of(axes).repr() + " along dim " + std::to_string(d),
      nbytes(x) * (product(axes) - 1));
  Array whole = all_gather(x, names_of(axes), AllGatherOptions{.axis = d, .tiled = true});
  return whole.shape()[d] == n ? whole : lax::slice_in_dim(whole, 0, n, 1, d);
}

// This device's block of dim d split by `axes`, sliced from the whole dim: padded at the end
// to a whole number of ceil-sized blocks first when the split is uneven.
Array padded_block(const Array& x, int d, const AxisList& axes) {
  const int64_t n = x.shape()[d], k = product(axes), b = (n + k - 1) / k;
  std::vector<lax::PadConfig> config(size_t(x.ndim()));
  config[size_t(d)].high = b * k - n;
  const Array padded = b * k == n ? x : lax::pad(x, zeros(Shape{}, x.dtype()), config);
  return lax::dynamic_slice_in_dim(padded, axis_index(names_of(axes)) * Array(int(b)), b, d);
}

// What `combiner` completes partial results with when one side is empty: 0 for psum, the
// lowest value for pmax and the highest for pmin (the reductions of an empty array).
Array identity_of(const Primitive& combiner, DType dtype) {
  const Array empty = zeros(Shape{0}, dtype);
  if (&combiner == &collectives::pmax_primitive()) return lax::reduce_max(empty, {0});
  if (&combiner == &collectives::pmin_primitive()) return lax::reduce_min(empty, {0});
  return zeros(Shape{}, dtype);
}

// The layout of dim d of a block split as `split` of a value of shape `global`: ceil-sized
// blocks of its axes.
halo::Layout layout_of(const Split& split, const Shape& global, int d) {
  const int64_t k = product(split[size_t(d)]);
  return {split[size_t(d)], (global[d] + k - 1) / k};
}

// The dims a reshard from `from` to `to` moves between padded blocks: those it changes that
// are split unevenly on either side, with the changed dims that share an axis with them (an
// axis leaving one dim for another), since a ppermute over an axis mixes the blocks of every
// dim it splits.
std::vector<int> padded_moves(const Split& from, const Split& to, const Shape& global) {
  std::vector<int> dims;
  AxisList axes;
  auto take = [&](size_t d) {
    dims.push_back(int(d));
    axes.insert(axes.end(), from[d].begin(), from[d].end());
    axes.insert(axes.end(), to[d].begin(), to[d].end());
  };
  for (size_t d = 0; d < from.size(); ++d)
    if (from[d] != to[d] && (!even(global[int(d)], from[d]) || !even(global[int(d)], to[d])))
      take(d);
  auto shares = [&](const AxisList& a) {
    return std::any_of(a.begin(), a.end(), [&](const std::string& x) {
      return std::find(axes.begin(), axes.end(), x) != axes.end();
    });
  };
  for (bool grew = !dims.empty(); grew;) {
    grew = false;
    for (size_t d = 0; d < from.size(); ++d)
      if (from[d] != to[d] && std::find(dims.begin(), dims.end(), int(d)) == dims.end() &&
          (shares(from[d]) || shares(to[d]))) {
        take(d);
        grew = true;
      }
  }
  std::sort(dims.begin(), dims.end());
  return dims;
}

// The layouts of `dims` on both sides of a reshard from `from` to `to`, and their extents: what
// halo::relayout moves between.
struct DimLayouts {
  std::vector<halo::Layout> source, target;
  std::vector<int64_t> extents;
};

DimLayouts layouts_of(const Split& from, const Split& to, const Shape& global,
                      const std::vector<int>& dims) {
  DimLayouts l;
  for (int d : dims) {
    l.source.push_back(layout_of(from, global, d));
    l.target.push_back(layout_of(to, global, d));
    l.extents.push_back(global[d]);
  }
  return l;
}

// The bytes each device sends in halo::relayout of block `x` along `dims` laid out as `l`.
std::optional<int64_t> relayout_bytes(const Array& x, const std::vector<int>& dims,
                                      const DimLayouts& l) {
  return halo::relayout_bytes(aval_of(x), dims, l.source, l.target, l.extents);
}

// x moved to `to` along `dims` by halo::relayout, when that sends no more bytes than one
// all_gather of them would.
std::optional<Array> relayout_if_cheaper(const Array& x, const Split& from, const Split& to,
                                         const Shape& global, const std::vector<int>& dims,
                                         const CollectiveLog& log) {
  int64_t sources = 1;
  for (int d : dims) sources *= product(from[size_t(d)]);
  const DimLayouts l = layouts_of(from, to, global, dims);
  const std::optional<int64_t> bytes = relayout_bytes(x, dims, l);
  if (sources == 1 || !bytes || *bytes > nbytes(x) * (sources - 1)) return std::nullopt;
  return halo::relayout(x, dims, l.source, l.target, l.extents, log);
}

// Axes moving whole from the minor end of dim `d` to the minor end of dim `e`, one of them split
// unevenly, where their padded blocks nest: the block of `d` they leave holds whole blocks of
// theirs (or the whole dim, its padding then sliced off), and the block of `e` they arrive on is
// whole or holds whole blocks of the new split (padded at the end first when whole).
struct PaddedAllToAll {
  int d, e;
  AxisList axes;
};

std::optional<PaddedAllToAll> padded_all_to_all_of(const Split& from, const Split& to,
                                                   const Shape& global, int d, int e) {
  const AxisList& kept = to[size_t(d)];
  const AxisList& held = from[size_t(e)];
  if (!is_prefix(kept, from[size_t(d)]) || !is_prefix(held, to[size_t(e)])) return std::nullopt;
  const AxisList axes(from[size_t(d)].begin() + std::ptrdiff_t(kept.size()), from[size_t(d)].end());
  if (axes.empty() || !std::equal(axes.begin(), axes.end(), to[size_t(e)].begin() +
                                  std::ptrdiff_t(held.size()), to[size_t(e)].end()))
    return std::nullopt;
  auto ceil_div = [](int64_t n, int64_t k) { return (n + k - 1) / k; };
  const int64_t m = product(axes), kd = product(kept), ke = product(held);
  const bool leaves = kept.empty() || ceil_div(global[d], kd) == m * ceil_div(global[d], kd * m);
  const bool arrives =
      held.empty() || ceil_div(global[e], ke) == m * ceil_div(global[e], ke * m);
  if (!leaves || !arrives) return std::nullopt;
  return PaddedAllToAll{d, e, axes};
}

// x moved to `to` along the two `dims` by one all_to_all of the padded blocks, as XLA's
// partitioner moves an axis off an unevenly split dim, when the blocks nest
// (padded_all_to_all_of) and that sends no more bytes than the ppermutes of halo::relayout.
std::optional<Array> padded_all_to_all(const Array& x, const Split& from, const Split& to,
                                       const Shape& global, const std::vector<int>& dims,
                                       const CollectiveLog& log) {
  if (dims.size() != 2 || global[dims[0]] == 0 || global[dims[1]] == 0) return std::nullopt;
  std::optional<PaddedAllToAll> move = padded_all_to_all_of(from, to, global, dims[0], dims[1]);
  if (!move) move = padded_all_to_all_of(from, to, global, dims[1], dims[0]);
  if (!move) return std::nullopt;
  const int d = move->d, e = move->e;
  const int64_t m = product(move->axes);
  const int64_t rows = layout_of(to, global, e).block * m;
  std::vector<lax::PadConfig> config(size_t(x.ndim()));
  config[size_t(e)].high = rows - x.shape()[e];
  const Array padded = rows == x.shape()[e] ? x : lax::pad(x, zeros(Shape{}, x.dtype()), config);
  const int64_t bytes = nbytes(padded) * (m - 1) / m;
  const std::optional<int64_t> ppermutes =
      relayout_bytes(x, dims, layouts_of(from, to, global, dims));
  if (ppermutes && *ppermutes < bytes) return std::nullopt;
  log("all_to_all over " + names_of(move->axes).repr() + " from dim " + std::to_string(d) +
          " to dim " + std::to_string(e) + " of the padded blocks",
      bytes);
  const Array y = all_to_all(padded, names_of(move->axes), e, d, AllToAllOptions{.tiled = true});
  const int64_t block = layout_of(to, global, d).block;
  return y.shape()[d] == block ? y : lax::slice_in_dim(y, 0, block, 1, d);
}

// The dims `padded_moves` names, moved to `to` by ppermutes (halo::relayout) when some stays
// split and that sends no more bytes than one all_gather of them; else each of them split
// unevenly is gathered whole (and sliced again by reshard).
Array reshard_padded(Array x, Split& from, const Split& to, const Shape& global,
                     const CollectiveLog& log) {
  const std::vector<int> dims = padded_moves(from, to, global);
  if (dims.empty()) return x;
  if (std::any_of(dims.begin(), dims.end(), [&](int d) { return !to[size_t(d)].empty(); })) {
    std::optional<Array> y = padded_all_to_all(x, from, to, global, dims, log);
    if (!y) y = relayout_if_cheaper(x, from, to, global, dims, log);
    if (y) {
      for (int d : dims) from[size_t(d)] = to[size_t(d)];
      return *y;
    }
  }
  for (int d : dims) {
    const AxisList& axes = from[size_t(d)];
    if (axes.empty() || (even(global[d], axes) && even(global[d], to[size_t(d)]))) continue;
    x = gather_whole(x, d, global[d], axes, log);
    from[size_t(d)].clear();
  }
  return x;
}

// One collective of the even plan between two splits: an axis moving from dim `d` to dim `e`
// (all-to-all), or the axes leaving dim `d` (one all-gather).
struct PlanStep {
  bool all_to_all;
  AxisList axes;
  size_t d, e;
};

// The collectives that move a block from split `from` to a split that, on each dim, `to` then
// slices: axes that move between dims go by all-to-all, axes that leave a dim go by one
// all-gather; `from` becomes what they leave.
std::vector<PlanStep> even_plan(Split& from, const Split& to, const Shape& global) {
  const size_t rank = from.size();
  std::vector<PlanStep> steps;
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t d = 0; d < rank && !moved; ++d) {
      if (from[d].empty() || is_prefix(from[d], to[d])) continue;
      const std::string a = from[d].back();
      for (size_t e = 0; e < rank && !moved; ++e) {
        if (e == d || !is_prefix(from[e], to[e]) || to[e].size() <= from[e].size() ||
            to[e][from[e].size()] != a || !even(global[int(e)], to[e]))
          continue;
        steps.push_back({true, {a}, d, e});
        from[d].pop_back();
        from[e].push_back(a);
        moved = true;
      }
    }
  }
  // The axes that leave a dim go in one all_gather over all of them (major to minor, as they
  // split it): one collective, and one result buffer that the group's members share.
  for (size_t d = 0; d < rank; ++d) {
    size_t kept = 0;
    while (kept < from[d].size() && kept < to[d].size() && from[d][kept] == to[d][kept]) ++kept;
    if (kept == from[d].size()) continue;
    steps.push_back({false, AxisList(from[d].begin() + std::ptrdiff_t(kept), from[d].end()), d, d});
    from[d].resize(kept);
  }
  return steps;
}

// The bytes each device sends in `steps` from a block of `bytes`.
int64_t plan_bytes(const std::vector<PlanStep>& steps, int64_t bytes) {
  int64_t sent = 0;
  for (const PlanStep& s : steps) {
    const int64_t n = product(s.axes);
    sent += s.all_to_all ? bytes * (n - 1) / n : bytes * (n - 1);
    if (!s.all_to_all) bytes *= n;
  }
  return sent;
}

// Even dims whose axes change moved by ppermutes of the rows each device lacks
// (halo::relayout), when that sends fewer bytes than the even plan's all-to-alls and
// all-gathers: `P(('a', 'b'))` to `P(('b', 'a'))` swaps blocks between devices, where gathering
// would send 7 of them. The changed dims and those sharing their axes move together.
std::optional<Array> relayout_if_fewer_bytes(const Array& x, Split& from, const Split& to,
                                             const Shape& global, int64_t planned,
                                             const CollectiveLog& log) {
  std::vector<int> dims;
  AxisList axes;
  for (size_t d = 0; d < from.size(); ++d)
    if (from[d] != to[d]) {
      dims.push_back(int(d));
      axes.insert(axes.end(), from[d].begin(), from[d].end());
      axes.insert(axes.end(), to[d].begin(), to[d].end());
    }
  for (size_t d = 0; d < from.size(); ++d)
    if (from[d] == to[d])
      for (const std::string& a : from[d])
        if (std::find(axes.begin(), axes.end(), a) != axes.end()) return std::nullopt;
  if (dims.empty()) return std::nullopt;
  const DimLayouts l = layouts_of(from, to, global, dims);
  const std::optional<int64_t> bytes = relayout_bytes(x, dims, l);
  if (!bytes || *bytes >= planned) return std::nullopt;
  Array y = halo::relayout(x, dims, l.source, l.target, l.extents, log);
  for (int d : dims) from[size_t(d)] = to[size_t(d)];
  return y;
}

// Moves a block from split `from` to split `to` of a value of shape `global` with the fewest
// bytes: axes that move between dims go by all-to-all, axes that leave a dim go by one
// all-gather, axes that arrive are slices of what the device already holds; where ppermutes of
// the rows each device lacks send fewer bytes than those, they move instead. Dims split unevenly
// on either side move the rows each device lacks by ppermutes (reshard_padded), or are
// gathered whole and sliced again when that moves more: their padded blocks do not nest.
Array reshard(Array x, Split from, const Split& to, const Shape& global, const CollectiveLog& log) {
  const size_t rank = from.size();
  x = reshard_padded(std::move(x), from, to, global, log);
  Split gathered = from;
  const std::vector<PlanStep> steps = even_plan(gathered, to, global);
  const int64_t planned = plan_bytes(steps, nbytes(x));
  if (planned > 0)
    if (std::optional<Array> y = relayout_if_fewer_bytes(x, from, to, global, planned, log))
      return *y;
  for (const PlanStep& s : steps) {
    const int64_t n = product(s.axes);
    if (s.all_to_all) {
      log("all_to_all over '" + s.axes[0] + "' from dim " + std::to_string(s.d) + " to dim " +
              std::to_string(s.e),
          nbytes(x) * (n - 1) / n);
      x = all_to_all(x, s.axes[0], int(s.e), int(s.d), AllToAllOptions{.tiled = true});
    } else {
      log("all_gather over " + names_of(s.axes).repr() + " along dim " + std::to_string(s.d),
          nbytes(x) * (n - 1));
      x = all_gather(x, names_of(s.axes), AllGatherOptions{.axis = int(s.d), .tiled = true});
    }
  }
  from = std::move(gathered);
  for (size_t d = 0; d < rank; ++d)
    if (from[d] != to[d] && !even(global[int(d)], to[d])) {
      x = padded_block(x, int(d), to[d]);
      from[d] = to[d];
    }
  std::vector<Array> starts;
  std::vector<int64_t> sizes = x.shape().dims();
  bool slice = false;
  for (size_t d = 0; d < rank; ++d) {
    const AxisList extra(to[d].begin() + std::ptrdiff_t(from[d].size()), to[d].end());
    if (extra.empty()) {
      starts.push_back(Array(0));
      continue;
    }
    sizes[d] /= axis_size(names_of(extra));
    starts.push_back(axis_index(names_of(extra)) * Array(int(sizes[d])));
    slice = true;
  }
  return slice ? lax::dynamic_slice(x, starts, sizes) : x;
}

// The split an output leaves with when it is not the propagated one, and why.
struct OutputSplit {
  Split split;
  std::string cause;
};

PartitionedProgram partition_in_scope(const Program& global, const Mesh& mesh,
                                      const std::vector<std::optional<ValueSplit>>& in,
                                      const std::vector<std::optional<ValueSplit>>& out,
                                      bool padded_boundary,
                                      const std::vector<std::optional<HeldArgument>>& held = {});

// Whether the partitioner runs `e`, an equation of `program` with bodies and its values split as
// `splits`, on the padded blocks of the dims its operands and results split unevenly.
bool bodies_keep_padding(const Program& program, const Mesh& mesh,
                         const std::vector<ValueSplit>& splits, const Equation& e,
                         const ShardingRule& rule);

// Whether every equation of `program`, its inputs and outputs split as given, runs on the padded
// blocks of the dims split unevenly in it, as the partitioner decides for each equation: such a
// dim is one factor that the rule pads (passed through, or reduced by the combiner), a
// constraint's operand already split as the constraint says, or a value of control flow whose
// bodies keep it padded.
bool keeps_padding(const Program& program0, const Mesh& mesh,
                   const std::vector<std::optional<ValueSplit>>& in,
                   const std::vector<std::optional<ValueSplit>>& out) {
  const Program program = prepared_for_partitioning(program0);
  const std::vector<ValueSplit> splits = propagate_shardings(program, mesh, in, out);
  auto keeps = [&](const ShardingRule& rule, int var, const ShardingRule::Tensor* dims,
                   const Split* fixed, size_t k) {
    const Split& split = splits[size_t(var)].dims;
    for (size_t d = 0; d < split.size(); ++d) {
      if (even(program.types[size_t(var)].shape[int(d)], split[d]) || rule.is_open(k, d)) continue;
      if (fixed) {
        if (d >= fixed->size() || (*fixed)[d] != split[d]) return false;
        continue;
      }
      if (!dims || d >= dims->size() || (*dims)[d].size() != 1) return false;
      const int f = (*dims)[d][0];
      const FactorKind kind = rule.factor_kinds[size_t(f)];
      if (!rule.pads(f) ||
          !(kind == FactorKind::pass_through || (kind == FactorKind::reduction && rule.combiner)))
        return false;
    }
    return true;
  };
  for (const Equation& e : program.equations) {
    const ShardingRule rule = sharding_rule_of(program, e);
    if (!rule.bodies.empty()) {
      if (!bodies_keep_padding(program, mesh, splits, e, rule)) return false;
      continue;
    }
    auto at = [](const auto& v, size_t i) { return i < v.size() ? &v[i] : nullptr; };
    for (size_t k = 0; k < e.inputs.size(); ++k)
      if (!e.inputs[k].is_literal() &&
          !keeps(rule, e.inputs[k].var, at(rule.operands, k), at(rule.fixed_operands, k), k))
        return false;
    for (size_t r = 0; r < e.outputs.size(); ++r)
      if (!keeps(rule, e.outputs[r], at(rule.results, r), at(rule.fixed_results, r), r))
        return false;
  }
  return true;
}

class Partitioner {
 public:
  // `out` holds the splits of the outputs that leave otherwise than propagation split them:
  // out_shardings win over the propagated splits (a constraint on a returned value included),
  // and uneven dims leave gathered.
  Partitioner(const Program& global, const Mesh& mesh, std::vector<ValueSplit> splits,
              std::vector<std::optional<OutputSplit>> out,
              std::vector<std::optional<HeldArgument>> held = {})
      : global_(global),
        mesh_(mesh),
        splits_(std::move(splits)),
        out_(std::move(out)),
        held_(std::move(held)),
        producer_(global.types.size(), -1),
        users_(global.types.size()) {
    for (size_t i = 0; i < global.equations.size(); ++i) {
      for (int v : global.equations[i].outputs) producer_[size_t(v)] = int(i);
      for (const Atom& a : global.equations[i].inputs)
        if (!a.is_literal()) users_[size_t(a.var)].push_back(int(i));
    }
    // An input that arrives unsplit is whole on every device, as a constant is.
    std::vector<bool> whole(global.types.size(), false);
    for (int v : global.invars) {
      const Split& split = splits_[size_t(v)].dims;
      whole[size_t(v)] = std::all_of(split.begin(), split.end(), [](auto& a) { return a.empty(); });
    }
    constant_ = constant_expressions(global, std::move(whole));
  }

  std::vector<InsertedCollective> take_collectives() { return std::move(collectives_); }

  // The splits of an equation with bodies: of its operands and results (whole rank), and the
  // closed splits of each body's inputs and outputs.
  struct BodySplits {
    std::vector<Split> in, out;
    std::vector<std::vector<std::optional<ValueSplit>>> body_in, body_out;
  };

  // The splits of the values an equation shares with its bodies: padded blocks of the dims
  // split unevenly for each value that every body keeps padded (values in the padding then stay
  // there from step to step, and reductions mask them as outside), given the values taken
  // before it; those dims gathered for the others, once rather than in every step.
  BodySplits body_splits(const Equation& e, const ShardingRule& rule) const {
    std::vector<bool> padded(rule.body_values().size(), false);
    BodySplits chosen = body_splits(e, rule, padded);
    for (size_t v = 0; v < padded.size(); ++v) {
      padded[v] = true;
      BodySplits tried = body_splits(e, rule, padded);
      if (tried.in == chosen.in && tried.out == chosen.out) continue;
      if (keep_padding(rule, tried))
        chosen = std::move(tried);
      else
        padded[v] = false;
    }
    return chosen;
  }

  std::vector<Array> run(std::span<const Array> args) {
    env_.assign(global_.types.size(), {});
    for (size_t i = 0; i < global_.invars.size(); ++i)
      env_[size_t(global_.invars[i])] =
          Local{i < held_.size() && held_[i] ? arranged(args[i], *held_[i], i) : args[i],
                splits_[size_t(global_.invars[i])].dims};
    for (size_t i = 0; i < global_.constvars.size(); ++i) {
      const int v = global_.constvars[i];
      const Split whole(size_t(global_.types[size_t(v)].shape.ndim()));
      env_[size_t(v)] =
          Local{moved(global_.consts[i], whole, splits_[size_t(v)].dims,
                      global_.types[size_t(v)].shape, "a constant of the program", true),
                splits_[size_t(v)].dims};
    }
    for (const Equation& e : global_.equations) run_equation(e);
    std::vector<Array> outs;
    for (size_t i = 0; i < global_.outputs.size(); ++i) {
      const Atom& a = global_.outputs[i];
      if (a.is_literal()) {
        outs.push_back(a.literal);
        continue;
      }
      Local& x = env_[size_t(a.var)];
      const Shape& shape = global_.type_of(a).shape;
      if (!x.kept.empty()) {
        const Split& to = i < out_.size() && out_[i] ? out_[i]->split : x.split;
        x = Local{
            settled(x, shape, to,
                    "output " + std::to_string(i) + " leaves split as " +
                        ValueSplit{to, {}}.spec().repr() + ", from the sub-axes its reshape kept",
                    !(i < out_.size() && out_[i])),
            to};
      }
      outs.push_back(i < out_.size() && out_[i]
                         ? moved(x.value, x.split, out_[i]->split, shape, out_[i]->cause, false)
                         : x.value);
    }
    return outs;
  }

 private:
  const Array& value(const Atom& a) const { return env_[size_t(a.var)].value; }

  // A value moved by moved(): from split `split` to `to`, giving `result`.
  struct Reshard {
    Array from;
    Split split, to;
    Array result;
  };

  // Argument i, held on each device as its own sharding puts it, moved to its split on the mesh:
  // one ppermute over all the mesh's axes, whose linear index is the device's position.
  Array arranged(const Array& x, const HeldArgument& held, size_t i) {
    std::vector<std::pair<int, int>> perm;
    for (size_t p = 0; p < held.source.size(); ++p) perm.emplace_back(held.source[p], int(p));
    const AxisList all = mesh_.axis_names();
    collectives_.push_back({"ppermute over " + names_of(all).repr(),
                            "argument " + std::to_string(i) +
                                " is on the mesh's devices in another order or arrangement (" +
                                held.held->repr() + ")",
                            nbytes(x), held.implicit});
    return ppermute(x, names_of(all), std::move(perm));
  }

  // reshard, recording each collective it inserts with its cause. A value already moved to
  // `to` for an earlier use is read from there: the bytes move once (and explain lists them
  // once).
  Array moved(const Array& x, const Split& from, const Split& to, const Shape& global,
              const std::string& cause, bool implicit) {
    for (const Reshard& r : reshards_)
      if (r.from.impl() == x.impl() && r.split == from && r.to == to) return r.result;
    Array y = reshard(x, from, to, global, [&](std::string collective, int64_t bytes) {
      collectives_.push_back({std::move(collective), cause, bytes, implicit});
    });
    if (y.impl() != x.impl()) reshards_.push_back({x, from, to, y});
    return y;
  }

  std::string equation_name(const Equation& e) const {
    return e.primitive->name + " (equation " + std::to_string(&e - global_.equations.data()) + ")";
  }

  std::string operand_cause(const Equation& e, size_t k, const Split& split) const {
    return "operand " + std::to_string(k) + " of " + equation_name(e) + " is needed split as " +
           ValueSplit{split, {}}.spec().repr();
  }

  // An operand's reshard is asked for by the program when the primitive fixes its split (a
  // sharding constraint, a shard_map's in_specs).
  static bool fixes_splits(const ShardingRule& rule) {
    return !rule.fixed_operands.empty() || !rule.fixed_results.empty();
  }

  // The factor splits of an equation, and whether they leave its reduced factors whole over axes
  // a result is wanted split over (choose_factors).
  struct FactorChoice {
    std::vector<AxisList> f;
    bool whole_reduced = false;
    bool gathered = false;  // the reduced factors whole everywhere (no partial results)
  };

  // The factor splits `e` runs with. By default the results' propagated splits for factors they
  // hold, otherwise the operands' current ones (the largest operand's first), made consistent
  // (an axis splits one factor; a compound dim splits a minor factor only when the major ones
  // are fully split; the reduced factors first, so a result wanted split over their axes is a
  // reduce-scatter of partial results). Where a result asks for an axis a reduced factor holds,
  // the other plan gives it to the result's factor instead: the operands move so that the
  // reduced dims are whole over it and each device computes only its own block of the result
  // (a weight gradient over a split batch, wanted split over its rows: the activations
  // all-gathered and the output gradients all_to_all'd, where the partial product is a whole
  // weight per device). A third plan leaves the reduced factors whole everywhere: the operands
  // split along them are gathered and no partial result is completed (`x @ y` with x replicated
  // and y split along the contracted dim, for a result no smaller than y: XLA's choice), taken
  // only where it also sends fewer bytes than the partial plan, the rendezvous aside. The plan
  // that costs each device fewer bytes is taken (`cost`; ties keep the first). With
  // `compound`, the results may split the major factor of a compound dim unevenly
  // (major_padded).
  FactorChoice choose_factors(const Equation& e, const ShardingRule& rule,
                              bool compound = false) const {
    std::vector<AxisList> f(size_t(rule.num_factors()));
    std::vector<bool> set(f.size(), false);
    // Whether another factor that is not reduced was given axis `a` by an earlier offer (a
    // result's, or a larger operand's): a later operand does not take it from that factor.
    auto held_elsewhere = [&](size_t k, const std::string& a) {
      for (size_t j = 0; j < f.size(); ++j)
        if (j != k && set[j] && rule.factor_kinds[j] != FactorKind::reduction &&
            std::find(f[j].begin(), f[j].end(), a) != f[j].end())
          return true;
      return false;
    };
    auto offer = [&](const ShardingRule::Tensor& dims, const Split& split, bool uneven) {
      for (size_t d = 0; d < dims.size() && d < split.size(); ++d) {
        AxisList axes = split[d];
        for (int factor : dims[d]) {
          const size_t k = size_t(factor);
          AxisList mine = uneven && major_padded(rule, factor)
                              ? take_major(axes, rule.factor_sizes[k])
                              : take_factor(axes, rule.factor_sizes[k], rule.pads(factor));
          if (set[k] || mine.empty()) continue;
          if (rule.factor_kinds[k] != FactorKind::reduction)
            mine.erase(std::find_if(mine.begin(), mine.end(),
                                    [&](const std::string& a) { return held_elsewhere(k, a); }),
                       mine.end());
          if (mine.empty()) continue;
          f[k] = std::move(mine);
          set[k] = true;
        }
      }
    };
    for (size_t r = 0; r < e.outputs.size() && r < rule.results.size(); ++r)
      offer(rule.results[r], splits_[size_t(e.outputs[r])].dims, compound);
    AxisList wanted;
    for (size_t k = 0; k < f.size(); ++k)
      if (rule.factor_kinds[k] != FactorKind::reduction)
        wanted.insert(wanted.end(), f[k].begin(), f[k].end());
    std::vector<size_t> order;
    for (size_t k = 0; k < e.inputs.size() && k < rule.operands.size(); ++k)
      if (!e.inputs[k].is_literal()) order.push_back(k);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return global_.type_of(e.inputs[a]).shape.size() > global_.type_of(e.inputs[b]).shape.size();
    });
    for (size_t k : order) offer(rule.operands[k], env_[size_t(e.inputs[k].var)].split, false);
    FactorChoice partial{settled(rule, f), false};
    if (!rule.combiner) return partial;
    std::vector<AxisList> unreduced = partial.f;
    bool reduced = false;
    for (size_t k = 0; k < unreduced.size(); ++k)
      if (rule.factor_kinds[k] == FactorKind::reduction) {
        reduced = reduced || !unreduced[k].empty();
        unreduced[k].clear();
      }
    if (!reduced) return partial;
    FactorChoice best = partial;
    int64_t best_cost = cost(e, rule, partial.f);
    auto consider = [&](FactorChoice plan) {
      if (plan.f == best.f) return;
      const int64_t c = cost(e, rule, plan.f);
      if (c < best_cost) best = std::move(plan), best_cost = c;
    };
    bool given_away = false;
    for (size_t k = 0; k < f.size(); ++k) {
      if (rule.factor_kinds[k] != FactorKind::reduction) continue;
      auto given = std::remove_if(f[k].begin(), f[k].end(), [&](const std::string& a) {
        return std::find(wanted.begin(), wanted.end(), a) != wanted.end();
      });
      given_away = given_away || given != f[k].end();
      f[k].erase(given, f[k].end());
    }
    if (given_away) consider(FactorChoice{settled(rule, f), true});
    FactorChoice gathered{settled(rule, std::move(unreduced)), true, true};
    if (cost(e, rule, gathered.f, 0) < cost(e, rule, partial.f, 0)) consider(std::move(gathered));
    return best;
  }

  // Offered factor splits with the factors that cannot be split cleared, made consistent.
  std::vector<AxisList> settled(const ShardingRule& rule, std::vector<AxisList> f) const {
    for (size_t k = 0; k < f.size(); ++k)
      if (rule.factor_kinds[k] == FactorKind::need_replication ||
          rule.factor_kinds[k] == FactorKind::permutation ||
          (rule.factor_kinds[k] == FactorKind::reduction && !rule.combiner))
        f[k].clear();
    make_consistent(rule, f);
    return f;
  }

  // What running `e` with factor splits `f` costs each device, in bytes: those its operands'
  // reshards send, those of the result blocks it computes, and those sent to complete the
  // results and move them to their propagated splits, with `per_collective` (kRendezvousBytes
  // unless given) more for each collective. The plans choose_factors weighs do the same
  // arithmetic; they differ in what they send and in the size of the results each device writes
  // (a partial result is the whole of the dims the reduced axes do not split), which `writes`
  // leaves out when false.
  int64_t cost(const Equation& e, const ShardingRule& rule, const std::vector<AxisList>& f,
               int64_t per_collective = kRendezvousBytes, bool writes = true) const {
    int64_t bytes = 0;
    for (size_t k = 0; k < e.inputs.size() && k < rule.operands.size(); ++k) {
      if (e.inputs[k].is_literal()) continue;
      // An operand that keeps sub-axes counted as moved to its split first.
      const Local& x = env_[size_t(e.inputs[k].var)];
      const AbstractValue held =
          x.kept.empty() ? aval_of(x.value) : block_type(global_.type_of(e.inputs[k]), x.split);
      bytes += reshard_cost(held, x.split, join(rule.operands[k], f),
                            global_.type_of(e.inputs[k]).shape, per_collective);
    }
    AxisList partial;
    for (size_t k = 0; k < f.size(); ++k)
      if (rule.factor_kinds[k] == FactorKind::reduction)
        partial.insert(partial.end(), f[k].begin(), f[k].end());
    for (size_t r = 0; r < e.outputs.size() && r < rule.results.size(); ++r) {
      const AbstractValue& type = global_.types[size_t(e.outputs[r])];
      const Split& want = splits_[size_t(e.outputs[r])].dims;
      Split out = join(rule.results[r], f);
      const AbstractValue block = block_type(type, out);
      const int64_t n = product(partial), size = block.nbytes();
      if (writes) bytes += size;
      if (partial.empty()) {
        bytes += reshard_cost(block, out, want, type.shape, per_collective);
      } else if (std::optional<ScatterPlan> plan = scatter_plan(e, r, partial, out, block.shape)) {
        const int64_t s = product(plan->scatter), rest = n / s, sliced = size / plan->sliced;
        bytes += per_collective + sliced * (s - 1) / s;
        if (rest > 1) bytes += per_collective + 2 * (sliced / s) * (rest - 1) / rest;
      } else {
        bytes += per_collective + 2 * size * (n - 1) / n +
                 reshard_cost(block, out, want, type.shape, per_collective);
      }
    }
    return bytes;
  }

  // What choose_factors counts for each collective beside its bytes: every device meets its
  // peers. In one process a 4 KiB collective over 8 devices takes 50–65 µs on this machine and
  // over 2 devices 3–4 µs (docs/PERFORMANCE.md, "The Communicator alone"), the time of copying
  // some 30–500 KiB; between processes it is more.
  static constexpr int64_t kRendezvousBytes = 64 << 10;

  // What moving a block of type `block` from split `from` to `to` costs each device: the bytes
  // it sends and `per_collective` (kRendezvousBytes unless given) for each collective (the
  // reshard traced on its own, its collectives counted and the trace dropped).
  int64_t reshard_cost(const AbstractValue& block, const Split& from, const Split& to,
                       const Shape& global, int64_t per_collective = kRendezvousBytes) const {
    if (from == to) return 0;
    int64_t bytes = 0;
    auto count = [&](std::span<const Array> x) {
      return std::vector<Array>{reshard(x[0], from, to, global, [&](const std::string&, int64_t b) {
        bytes += per_collective + b;
      })};
    };
    trace_to_program(count, std::vector<AbstractValue>{block}, "partitioner");
    return bytes;
  }

  // The leading axes of `axes` whose product divides `size` (all of them when `uneven`),
  // removed from `axes`; stops at the first that does not fit, or once the factor is fully
  // split.
  AxisList take_factor(AxisList& axes, int64_t size, bool uneven) const {
    if (uneven) return std::exchange(axes, {});
    AxisList out;
    int64_t n = 1;
    size_t i = 0;
    while (i < axes.size() && n != size && size % (n * mesh_.axis_size(axes[i])) == 0) {
      n *= mesh_.axis_size(axes[i]);
      out.push_back(axes[i++]);
    }
    axes.erase(axes.begin(), axes.begin() + std::ptrdiff_t(i));
    if (n != size) axes.clear();
    return out;
  }

  // The axes of a compound dim for its major factor: as take_factor does when they split it
  // evenly and whole (the rest then split the minor factors), else all of them, unevenly.
  AxisList take_major(AxisList& axes, int64_t size) const {
    AxisList rest = axes;
    AxisList out = take_factor(rest, size, false);
    if (product(out) != size) return std::exchange(axes, {});
    axes = std::move(rest);
    return out;
  }

  int64_t product(const AxisList& axes) const {
    int64_t n = 1;
    for (const std::string& a : axes) n *= mesh_.axis_size(a);
    return n;
  }

  // An axis that two factors ask for goes to the first; the reduced factors of a sum, max or
  // min come first, since a result wanted split over their axes is then a reduce-scatter of the
  // partial results, where splitting the result instead gathers the operands the reduced axes
  // split.
  void make_consistent(const ShardingRule& rule, std::vector<AxisList>& f) const {
    std::vector<size_t> order(f.size());
    std::iota(order.begin(), order.end(), 0);
    if (rule.combiner)
      std::stable_partition(order.begin(), order.end(), [&](size_t k) {
        return rule.factor_kinds[k] == FactorKind::reduction;
      });
    AxisList used;
    for (size_t k : order) {
      AxisList& axes = f[k];
      auto clash = std::find_if(axes.begin(), axes.end(), [&](const std::string& a) {
        return std::find(used.begin(), used.end(), a) != used.end();
      });
      axes.erase(clash, axes.end());
      used.insert(used.end(), axes.begin(), axes.end());
    }
    // A factor cleared in one tensor's compound dim clears those after it in the others' (a
    // reshape's [3, 8] to [6, 4] holds the factor 2 before the 4 on one side, after the 3 on the
    // other), until none changes.
    bool trimmed = true;
    auto trim = [&](const ShardingRule::Tensor& dims) {
      for (const ShardingRule::Dim& dim : dims)
        for (size_t j = 1; j < dim.size(); ++j)
          if (product(f[size_t(dim[j - 1])]) != rule.factor_sizes[size_t(dim[j - 1])] &&
              !f[size_t(dim[j])].empty()) {
            f[size_t(dim[j])].clear();
            trimmed = true;
          }
    };
    while (trimmed) {
      trimmed = false;
      for (const auto& t : rule.operands) trim(t);
      for (const auto& t : rule.results) trim(t);
    }
  }

  static Split join(const ShardingRule::Tensor& dims, const std::vector<AxisList>& f) {
    Split out;
    for (const ShardingRule::Dim& dim : dims) {
      AxisList axes;
      for (int factor : dim)
        axes.insert(axes.end(), f[size_t(factor)].begin(), f[size_t(factor)].end());
      out.push_back(std::move(axes));
    }
    return out;
  }

  AbstractValue block_type(AbstractValue t, const Split& split) const {
    t.shape = block_shape(t.shape, split, mesh_);
    t.sharding.reset();
    return t;
  }

  // Whether an operand of `e` keeps sub-axes.
  bool keeps_sub_axes(const Equation& e) const {
    return std::any_of(e.inputs.begin(), e.inputs.end(), [&](const Atom& a) {
      return !a.is_literal() && !env_[size_t(a.var)].kept.empty();
    });
  }

  // Runs `e` on blocks split as `in`, giving results split as `out`; false when the primitive
  // cannot run on such blocks (its localized types disagree).
  bool try_local(const Equation& e, const ShardingRule& rule, const std::vector<Split>& in,
                 const std::vector<Split>& out, bool implicit, std::vector<Array>& results,
                 const std::string& why = "") {
    std::vector<Array> args;
    std::vector<AbstractValue> in_types, out_types;
    for (size_t k = 0; k < e.inputs.size(); ++k) {
      const Atom& a = e.inputs[k];
      if (a.is_literal()) {
        args.push_back(a.literal);
      } else {
        const Local& x = env_[size_t(a.var)];
        args.push_back(moved(x.value, x.split, in[k], global_.type_of(a).shape,
                             operand_cause(e, k, in[k]) + why, implicit));
        if (rule.combiner && k < rule.operands.size())
          args.back() =
              masked(args.back(), rule, rule.operands[k], in[k], global_.type_of(a).shape);
      }
      in_types.push_back(aval_of(args.back()));
    }
    for (size_t r = 0; r < e.outputs.size(); ++r)
      out_types.push_back(block_type(global_.types[size_t(e.outputs[r])], out[r]));
    LocalEquation local{e.primitive, without_out_sharding(e.params)};
    if (e.primitive->localize) local = e.primitive->localize(local.params, in_types, out_types);
    if (!local.primitive) {
      results = args;
      return true;
    }
    if (!types_match(*local.primitive, in_types, local.params, out_types)) return false;
    results = spmd::bind(*local.primitive, args, local.params);
    return true;
  }

  // Whether `primitive` on blocks of types `in` gives blocks of types `out`.
  static bool types_match(const Primitive& primitive, const std::vector<AbstractValue>& in,
                          const Params& params, const std::vector<AbstractValue>& out) {
    try {
      std::vector<AbstractValue> got = abstract_eval(primitive, in, params);
      if (got.size() != out.size()) return false;
      for (size_t r = 0; r < got.size(); ++r)
        if (got[r].shape != out[r].shape || got[r].dtype != out[r].dtype) return false;
    } catch (const std::exception&) {
      return false;
    }
    return true;
  }

  // `x` (a block split as `split` of a value of shape `global`) with the padding of its unevenly
  // split reduced dims set to the combiner's identity: whatever the padding held (a padded block
  // holds whatever the ops before computed there) adds nothing to the partial results.
  static Array masked(Array x, const ShardingRule& rule, const ShardingRule::Tensor& dims,
                      const Split& split, const Shape& global) {
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d].size() != 1 || rule.factor_kinds[size_t(dims[d][0])] != FactorKind::reduction ||
          even(global[int(d)], split[d]))
        continue;
      const Array start = axis_index(names_of(split[d])) * Array(int(x.shape()[int(d)]));
      const Array index = lax::broadcasted_iota(int32, x.shape(), int(d)) + start;
      x = where(lax::lt(index, Array(int(global[int(d)]))), x,
                identity_of(*rule.combiner, x.dtype()));
    }
    return x;
  }

  void run_equation(const Equation& e) {
    std::vector<AbstractValue> in_types, out_types;
    for (const Atom& a : e.inputs) in_types.push_back(global_.type_of(a));
    for (int v : e.outputs) out_types.push_back(global_.types[size_t(v)]);
    const ShardingRule rule = sharding_rule_of(global_, e);
    if (keeps_sub_axes(e)) {
      if (run_on_kept_layouts(e, rule) || reduce_on_kept_layouts(e, rule) ||
          run_on_factor_blocks(e, rule))
        return;
      // An operand moved to a constraint's split for `e` keeps its sub-axes for its other uses
      // (and the program's outputs), which expect its blocks as they are or in its own split.
      std::vector<std::pair<int, Local>> kept = settle_operands(e, rule);
      run_settled(e, rule, in_types, out_types);
      for (auto& [v, x] : kept) env_[size_t(v)] = std::move(x);
      return;
    }
    run_settled(e, rule, in_types, out_types);
  }

  // `e` on operands none of which keeps sub-axes.
  void run_settled(const Equation& e, const ShardingRule& rule,
                   const std::vector<AbstractValue>& in_types,
                   const std::vector<AbstractValue>& out_types) {
    if (!rule.bodies.empty()) return run_with_bodies(e, rule);
    if (!rule.shifts.empty() && run_on_whole_constant(e, rule)) return;
    if (!rule.shifts.empty() && run_with_halos(e, rule)) return;
    if (run_on_major_blocks(e, rule)) return;
    if (run_on_factor_blocks(e, rule)) return;
    std::vector<Split> in, out;
    AxisList partial;
    FactorChoice choice;
    if (!rule.fixed_operands.empty() || !rule.fixed_results.empty()) {
      in = rule.fixed_operands;
      out = rule.fixed_results;
      in.resize(e.inputs.size());
      out.resize(e.outputs.size());
      for (size_t k = 0; k < in.size(); ++k) {
        in[k].resize(size_t(in_types[k].shape.ndim()));
        in[k] = with_open_dims(std::move(in[k]), rule, e, k, splits_);
      }
      for (size_t r = 0; r < out.size(); ++r) {
        out[r].resize(size_t(out_types[r].shape.ndim()));
        out[r] = with_open_dims(std::move(out[r]), rule, e, r, splits_);
      }
    } else {
      choice = choose_factors(e, rule);
      for (const auto& t : rule.operands) in.push_back(join(t, choice.f));
      for (const auto& t : rule.results) out.push_back(join(t, choice.f));
      for (size_t k = 0; k < choice.f.size(); ++k)
        if (rule.factor_kinds[k] == FactorKind::reduction)
          partial.insert(partial.end(), choice.f[k].begin(), choice.f[k].end());
    }
    // Operands moved so that a result is computed where it is wanted split are part of the
    // equation, as the reduce-scatter they replace would be.
    const std::string why =
        choice.gathered        ? ": its reduced dims are gathered, which sends fewer bytes than "
                                 "completing partial results"
        : choice.whole_reduced ? ": its reduced dims are whole where its result is split over "
                                 "their axes, in place of a reduce-scatter of partial results"
                               : "";
    std::vector<Array> results;
    if (!try_local(e, rule, in, out, !fixes_splits(rule) && !choice.whole_reduced, results, why)) {
      in.clear();
      out.clear();
      partial.clear();
      for (const AbstractValue& t : in_types) in.push_back(Split(size_t(t.shape.ndim())));
      for (const AbstractValue& t : out_types) out.push_back(Split(size_t(t.shape.ndim())));
      results =
          spmd::bind(*e.primitive, gathered_operands(e, in), without_out_sharding(e.params));
    }
    if (!partial.empty()) {
      std::sort(partial.begin(), partial.end(), [&](const std::string& a, const std::string& b) {
        return mesh_.axis_position(a) < mesh_.axis_position(b);
      });
      for (size_t i = 0; i < results.size(); ++i) complete(e, rule, i, partial, results[i], out[i]);
    }
    store_results(e, results, out);
  }

  // Whether factor f may be split unevenly as the major factor of a compound dim (a reshape's):
  // the rule runs it on padded blocks and it leads every dim holding it, so that a block of it
  // is a run of whole rows of each such dim, padded at the end as an uneven split is.
  static bool major_padded(const ShardingRule& rule, int f) {
    if (!rule.factor_pads[size_t(f)]) return false;
    bool compound = false;
    for (const std::vector<ShardingRule::Tensor>* side : {&rule.operands, &rule.results})
      for (const ShardingRule::Tensor& t : *side)
        for (const ShardingRule::Dim& dim : t) {
          if (std::find(dim.begin(), dim.end(), f) == dim.end()) continue;
          if (dim[0] != f) return false;
          compound = compound || dim.size() > 1;
        }
    return compound;
  }

  // The dims of a tensor (factors `dims`, global type `t`, split as `split` by the factor
  // splits `f`) whose blocks hold whole rows of a major factor split unevenly, where that
  // differs from the split's ceil-sized blocks: the relayout between the two.
  struct MajorBlocks {
    bool uneven = false;  // a compound dim is led by a factor split unevenly
    std::vector<int> led;  // the dims led by a factor split unevenly
    std::vector<int> dims;
    std::vector<halo::Layout> split, major;
    std::vector<int64_t> extents;
  };

  MajorBlocks major_blocks(const ShardingRule& rule, const ShardingRule::Tensor& dims,
                           const Shape& shape, const Split& split,
                           const std::vector<AxisList>& f) const {
    MajorBlocks m;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d].empty()) continue;
      const int64_t size = rule.factor_sizes[size_t(dims[d][0])];
      const int64_t k = product(f[size_t(dims[d][0])]);
      if (size % k == 0) continue;
      m.led.push_back(int(d));
      if (dims[d].size() < 2) continue;
      m.uneven = true;
      const halo::Layout ceil_blocks = layout_of(split, shape, int(d));
      const int64_t rows = (size + k - 1) / k * (shape[int(d)] / size);
      if (rows == ceil_blocks.block) continue;
      m.dims.push_back(int(d));
      m.split.push_back(ceil_blocks);
      m.major.push_back({split[d], rows});
      m.extents.push_back(shape[int(d)]);
    }
    return m;
  }

  // The block type of a value of type `t` split as `split`, with the dims of `m` in blocks of
  // whole rows of their major factor.
  AbstractValue major_block_type(const AbstractValue& t, const Split& split,
                                 const MajorBlocks& m) const {
    AbstractValue b = block_type(t, split);
    for (size_t i = 0; i < m.dims.size(); ++i) b.shape[m.dims[i]] = m.major[i].block;
    return b;
  }

  CollectiveLog logged(const std::string& cause) {
    return [this, cause](std::string collective, int64_t bytes) {
      collectives_.push_back({std::move(collective), cause, bytes, true});
    };
  }

  static bool has_compound_dim(const ShardingRule& rule) {
    for (const std::vector<ShardingRule::Tensor>* side : {&rule.operands, &rule.results})
      for (const ShardingRule::Tensor& t : *side)
        for (const ShardingRule::Dim& dim : t)
          if (dim.size() > 1) return true;
    return false;
  }

  // How an equation runs on blocks of whole rows of major factors: the splits of its operands
  // and results, their dims in such blocks, and the blocks' types.
  struct MajorPlan {
    std::vector<Split> in, out;
    std::vector<MajorBlocks> in_blocks, out_blocks;
    std::vector<AbstractValue> in_types, out_types;
  };

  // The plan of `e` on blocks of whole rows of the major factors its results split unevenly;
  // nothing when no compound dim is led by such a factor, or when the relayouts to and from
  // those blocks send no fewer bytes than gathering the operands' dims that hold the factors.
  std::optional<MajorPlan> plan_major_blocks(const Equation& e, const ShardingRule& rule) const {
    const std::vector<AxisList> f = choose_factors(e, rule, /*compound=*/true).f;
    MajorPlan p;
    int64_t relayouts = 0, gathers = 0;
    bool any = false;
    for (size_t k = 0; k < e.inputs.size(); ++k) {
      const AbstractValue& t = global_.type_of(e.inputs[k]);
      p.in.push_back(join(rule.operands[k], f));
      const MajorBlocks& m =
          p.in_blocks.emplace_back(major_blocks(rule, rule.operands[k], t.shape, p.in.back(), f));
      p.in_types.push_back(major_block_type(t, p.in.back(), m));
      any = any || m.uneven;
      if (e.inputs[k].is_literal()) continue;
      const Local& x = env_[size_t(e.inputs[k].var)];
      int64_t held = 1;
      for (int d : m.led) held *= product(x.split[size_t(d)]);
      gathers += nbytes(x.value) * (held - 1);
      if (m.dims.empty()) continue;
      const std::optional<int64_t> bytes = halo::relayout_bytes(
          block_type(t, p.in.back()), m.dims, m.split, m.major, m.extents);
      if (!bytes) return std::nullopt;
      relayouts += *bytes;
    }
    for (size_t r = 0; r < e.outputs.size(); ++r) {
      const AbstractValue& t = global_.types[size_t(e.outputs[r])];
      p.out.push_back(join(rule.results[r], f));
      const MajorBlocks& m = p.out_blocks.emplace_back(
          major_blocks(rule, rule.results[r], t.shape, p.out.back(), f));
      p.out_types.push_back(major_block_type(t, p.out.back(), m));
      any = any || m.uneven;
      if (m.dims.empty()) continue;
      const std::optional<int64_t> bytes =
          halo::relayout_bytes(p.out_types.back(), m.dims, m.major, m.split, m.extents);
      if (!bytes) return std::nullopt;
      relayouts += *bytes;
    }
    if (!any || relayouts >= gathers) return std::nullopt;
    return p;
  }

  // A reshape whose result is wanted split unevenly along the major factor of a compound dim
  // ([6, 4] merged into [24], [10, 8] split into [5, 16], 4 ways) runs on blocks of whole rows
  // of that factor, as XLA's partitioner reshapes padded blocks: the operand moves to such
  // blocks and the result from them to its split by ppermutes of the rows each device lacks
  // (halo::relayout), when that sends fewer bytes than the even factors' plan (plan_major_blocks).
  bool run_on_major_blocks(const Equation& e, const ShardingRule& rule) {
    if (!has_compound_dim(rule) || fixes_splits(rule) ||
        e.outputs.size() != rule.results.size() || e.inputs.size() != rule.operands.size())
      return false;
    const std::optional<MajorPlan> p = plan_major_blocks(e, rule);
    if (!p) return false;
    LocalEquation local{e.primitive, without_out_sharding(e.params)};
    if (e.primitive->localize)
      local = e.primitive->localize(local.params, p->in_types, p->out_types);
    if (!local.primitive || !types_match(*local.primitive, p->in_types, local.params, p->out_types))
      return false;
    std::vector<Array> args;
    for (size_t k = 0; k < e.inputs.size(); ++k) {
      const Atom& a = e.inputs[k];
      const Shape& shape = global_.type_of(a).shape;
      const std::string cause = operand_cause(e, k, p->in[k]) + ", in blocks of whole rows of " +
                                "the major factor of its merged or split dims";
      const Array x = a.is_literal() ? moved(a.literal, Split(size_t(shape.ndim())), p->in[k],
                                            shape, cause, true)
                                     : moved(value(a), env_[size_t(a.var)].split, p->in[k], shape,
                                             cause, true);
      const MajorBlocks& m = p->in_blocks[k];
      args.push_back(m.dims.empty() ? x
                                    : halo::relayout(x, m.dims, m.split, m.major, m.extents,
                                                     logged(cause)));
    }
    std::vector<Array> results = spmd::bind(*local.primitive, args, local.params);
    for (size_t r = 0; r < results.size(); ++r) {
      const MajorBlocks& m = p->out_blocks[r];
      if (m.dims.empty()) continue;
      results[r] = halo::relayout(results[r], m.dims, m.major, m.split, m.extents,
                                  logged("result " + std::to_string(r) + " of " +
                                         equation_name(e) + " goes from blocks of whole rows " +
                                         "of the major factor of its merged or split dims to " +
                                         ValueSplit{p->out[r], {}}.spec().repr()));
    }
    store_results(e, results, p->out);
    return true;
  }

  // The layout of a factor split by a part of `axes`, a sub-axis: the device with index i along
  // them holds block (i / div) % mod, of `block` rows. Where the part is some of the axes whole
  // (Shardy's 'a':(1)2 of an axis of 2 is 'a'), it is spelled so, so that equal splits compare
  // equal; a part of size 1 is no split.
  halo::Layout sub_axis_layout(const AxisList& axes, int64_t block, int64_t div,
                               int64_t mod) const {
    if (mod == 1) return {{}, block};
    AxisList part;
    int64_t below = 1, start = 0;
    for (size_t i = axes.size(); i-- > 0;) {
      const int64_t n = mesh_.axis_size(axes[i]);
      if (below >= div && below * n <= div * mod) {
        if (part.empty()) start = below;
        part.insert(part.begin(), axes[i]);
      }
      below *= n;
    }
    if (start == div && product(part) == mod) return {part, block};
    return {axes, block, div, mod};
  }

  // How many blocks a layout splits its dim into.
  int64_t blocks_of(const halo::Layout& l) const {
    return l.mod ? l.mod : product(l.axes) / l.div;
  }

  // The layouts of a reshape's factors (indexed by factor) on the side whose dims are `dims`, of
  // `shape`, each dim laid out as `layouts` says. A dim of one factor splits it as the dim is
  // split (ceil-sized blocks, padded at the end). A compound dim split evenly into blocks that
  // are boxes of its factors (the minor factors whole, a part of one factor, one row of each
  // major one: [2, 2, 6] merged into [24] split 8 ways is rows i / 4 and (i / 2) % 2 and
  // columns [3 (i % 2), 3 (i % 2) + 3)) splits each factor by a sub-axis of its axes, as
  // Shardy's 'x':(1)2, 'x':(2)2 and 'x':(4)2 (a part of the dim's own sub-axis when it has
  // one). Nothing when a compound dim's blocks are not such boxes, a size-1 dim is split or a
  // dim is empty.
  std::optional<std::vector<halo::Layout>> factor_layouts(
      const ShardingRule& rule, const ShardingRule::Tensor& dims, const Shape& shape,
      std::span<const halo::Layout> layouts) const {
    std::vector<halo::Layout> out(rule.factor_sizes.size());
    for (size_t d = 0; d < dims.size(); ++d)
      if (!split_factors(rule, dims[d], shape[int(d)], layouts[d], out)) return std::nullopt;
    return out;
  }

  // factor_layouts of a side split as `split`.
  std::optional<std::vector<halo::Layout>> factor_layouts(const ShardingRule& rule,
                                                          const ShardingRule::Tensor& dims,
                                                          const Shape& shape,
                                                          const Split& split) const {
    return factor_layouts(rule, dims, shape, layouts_of(split, shape));
  }

  static std::vector<halo::Layout> layouts_of(const Split& split, const Shape& shape) {
    std::vector<halo::Layout> out;
    for (int d = 0; d < shape.ndim(); ++d) out.push_back(layout_of(split, shape, d));
    return out;
  }

  // The layouts of the factors of one dim (of `n` rows, laid out as `l`) written into `out`;
  // false when its blocks are not boxes of them (factor_layouts).
  bool split_factors(const ShardingRule& rule, const ShardingRule::Dim& dim, int64_t n,
                     const halo::Layout& l, std::vector<halo::Layout>& out) const {
    const int64_t k = blocks_of(l);
    if (n == 0) return false;
    if (dim.empty()) return k == 1;
    if (dim.size() == 1) {
      out[size_t(dim[0])] = k > 1 ? l : halo::Layout{{}, n};
      return true;
    }
    if (n % k != 0 || l.block != n / k) return false;
    auto size = [&](size_t j) { return rule.factor_sizes[size_t(dim[j])]; };
    // The factor j the block's extent ends in: whole factors minor to it, a part m of it.
    const int64_t b = n / k;
    size_t j = dim.size() - 1;
    int64_t trail = 1;
    while (j > 0 && b > trail * size(j)) trail *= size(j--);
    if (b % trail != 0 || size(j) % (b / trail) != 0) return false;
    const int64_t m = b / trail, parts = size(j) / m;
    for (size_t t = j + 1; t < dim.size(); ++t) out[size_t(dim[t])] = {{}, size(t)};
    out[size_t(dim[j])] = sub_axis_layout(l.axes, m, l.div, parts);
    for (int64_t t = int64_t(j) - 1, div = parts; t >= 0; div *= size(size_t(t--)))
      out[size_t(dim[size_t(t)])] = sub_axis_layout(l.axes, 1, l.div * div, size(size_t(t)));
    return true;
  }

  // The layout of each of `dims` (of `shape`) whose factors are laid out as `factors`: the dim's
  // blocks are the boxes of its factors' blocks. Nothing when some dim's factors do not make
  // such boxes (a minor factor split under a major one left whole), or a dim would be padded.
  std::optional<std::vector<halo::Layout>> dim_layouts(
      const ShardingRule& rule, const ShardingRule::Tensor& dims, const Shape& shape,
      const std::vector<halo::Layout>& factors) const {
    std::vector<halo::Layout> out;
    for (size_t d = 0; d < dims.size(); ++d) {
      const int64_t n = shape[int(d)];
      AxisList axes;
      int64_t k = 1, div = 1;
      bool plain = true, same = true;
      const AxisList* first = nullptr;
      for (int f : dims[d]) {
        const halo::Layout& l = factors[size_t(f)];
        if (l.axes.empty()) continue;
        k *= blocks_of(l);
        div = l.div;
        plain = plain && l.div == 1 && l.mod == 0;
        same = same && (!first || *first == l.axes);
        if (!first) first = &l.axes;
        axes.insert(axes.end(), l.axes.begin(), l.axes.end());
      }
      if (!plain && !same) return std::nullopt;
      if (!plain) axes = *first;
      if (n % k != 0) return std::nullopt;
      const halo::Layout l = axes.empty() ? halo::Layout{{}, n}
                             : plain      ? halo::Layout{axes, n / k}
                                          : sub_axis_layout(axes, n / k, div, k);
      std::vector<halo::Layout> check(factors.size());
      if (!split_factors(rule, dims[d], n, l, check)) return std::nullopt;
      for (int f : dims[d])
        if (!(check[size_t(f)] == factors[size_t(f)])) return std::nullopt;
      out.push_back(l);
    }
    return out;
  }

  // Whether each side of `rule` holds every factor once, in order, all passed through: a
  // reshape's, whose blocks are then the same elements in factor space (the shape of the factors)
  // on both sides.
  static bool factors_in_order(const ShardingRule& rule) {
    if (rule.operands.size() != 1 || rule.results.size() != 1) return false;
    for (const ShardingRule::Tensor* side : {&rule.operands[0], &rule.results[0]}) {
      int next = 0;
      for (const ShardingRule::Dim& dim : *side)
        for (int f : dim)
          if (f != next++ || rule.factor_kinds[size_t(f)] != FactorKind::pass_through) return false;
      if (size_t(next) != rule.factor_sizes.size()) return false;
    }
    return true;
  }

  // The factors whose layouts differ between `from` and `to`, with those that share an axis with
  // them (a relayout over an axis mixes the blocks of every dim it splits).
  static std::vector<int> moved_factors(const std::vector<halo::Layout>& from,
                                        const std::vector<halo::Layout>& to) {
    std::vector<bool> moved(from.size(), false);
    AxisList axes;
    auto take = [&](size_t f) {
      moved[f] = true;
      for (const halo::Layout* l : {&from[f], &to[f]})
        axes.insert(axes.end(), l->axes.begin(), l->axes.end());
    };
    auto shares = [&](const halo::Layout& l) {
      return std::any_of(l.axes.begin(), l.axes.end(), [&](const std::string& a) {
        return std::find(axes.begin(), axes.end(), a) != axes.end();
      });
    };
    for (size_t f = 0; f < from.size(); ++f)
      if (!(from[f] == to[f])) take(f);
    for (bool grew = true; grew;) {
      grew = false;
      for (size_t f = 0; f < from.size(); ++f)
        if (!moved[f] && (shares(from[f]) || shares(to[f]))) {
          take(f);
          grew = true;
        }
    }
    std::vector<int> dims;
    for (size_t f = 0; f < moved.size(); ++f)
      if (moved[f]) dims.push_back(int(f));
    return dims;
  }

  // What halo::relayout moves between layouts `from` and `to` (of dims or factors of `extents`
  // rows): the dims whose layouts differ, with those sharing their axes (moved_factors), and
  // their layouts and extents.
  struct LayoutMove {
    std::vector<int> dims;
    std::vector<halo::Layout> from, to;
    std::vector<int64_t> extents;
  };

  static LayoutMove layout_move(const std::vector<halo::Layout>& from,
                                const std::vector<halo::Layout>& to,
                                std::span<const int64_t> extents) {
    LayoutMove m{moved_factors(from, to), {}, {}, {}};
    for (int d : m.dims) {
      m.from.push_back(from[size_t(d)]);
      m.to.push_back(to[size_t(d)]);
      m.extents.push_back(extents[size_t(d)]);
    }
    return m;
  }

  // The bytes each device sends when `e` runs on the factor splits choose_factors gives: its
  // operands' reshards and its results' moves to their propagated splits.
  int64_t factor_plan_bytes(const Equation& e, const ShardingRule& rule) const {
    const std::vector<AxisList> f = choose_factors(e, rule).f;
    int64_t bytes = 0;
    for (size_t k = 0; k < e.inputs.size() && k < rule.operands.size(); ++k) {
      if (e.inputs[k].is_literal()) continue;
      const Local& x = env_[size_t(e.inputs[k].var)];
      bytes += reshard_cost(aval_of(x.value), x.split, join(rule.operands[k], f),
                            global_.type_of(e.inputs[k]).shape, 0);
    }
    for (size_t r = 0; r < e.outputs.size() && r < rule.results.size(); ++r) {
      const AbstractValue& type = global_.types[size_t(e.outputs[r])];
      const Split out = join(rule.results[r], f);
      bytes += reshard_cost(block_type(type, out), out, splits_[size_t(e.outputs[r])].dims,
                            type.shape, 0);
    }
    return bytes;
  }

  // A reshape runs in factor space (the shape of its factors, [2, 2, 6] for [2, 2, 6] merged into
  // [24] or [6, 4] into [2, 12]) where both its operand's split and its result's wanted split
  // are splits of the factors (factor_layouts: sub-axes where a compound dim's blocks are parts
  // of rows of its factors): the operand's block is reshaped to its block of the factors, moved
  // to the result's block of them by ppermutes of the rows each device lacks (halo::relayout,
  // only the factors whose splits differ and those sharing their axes), and reshaped to the
  // result's block. Taken when that sends fewer bytes than the factors' plan (which gathers the
  // compound dims split otherwise than along whole major factors); XLA's partitioner moves such
  // reshapes with all-to-alls, collective-permutes and all-gathers.
  bool run_on_factor_blocks(const Equation& e, const ShardingRule& rule) {
    if (!has_compound_dim(rule) || fixes_splits(rule) || !factors_in_order(rule) ||
        e.inputs.size() != 1 || e.outputs.size() != 1 || e.inputs[0].is_literal())
      return false;
    const Local& x = env_[size_t(e.inputs[0].var)];
    const AbstractValue& in = global_.type_of(e.inputs[0]);
    const AbstractValue& out = global_.types[size_t(e.outputs[0])];
    const Split& want = splits_[size_t(e.outputs[0])].dims;
    const auto from = x.kept.empty() ? factor_layouts(rule, rule.operands[0], in.shape, x.split)
                                     : factor_layouts(rule, rule.operands[0], in.shape, x.kept);
    const auto to = factor_layouts(rule, rule.results[0], out.shape, want);
    if (!from || !to) return false;
    const LayoutMove move = layout_move(*from, *to, rule.factor_sizes);
    std::vector<int64_t> held, needed;
    for (size_t f = 0; f < from->size(); ++f) {
      held.push_back((*from)[f].block);
      needed.push_back((*to)[f].block);
    }
    AbstractValue block = aval_of(x.value);
    if (block.shape.size() != Shape(held).size()) return false;
    block.shape = Shape(held);
    const std::optional<int64_t> bytes =
        halo::relayout_bytes(block, move.dims, move.from, move.to, move.extents);
    if (!bytes) return false;
    const int64_t plan = x.kept.empty() ? factor_plan_bytes(e, rule) : *bytes + 1;
    if (keep_sub_axes(e, rule, x, *from, std::min(*bytes, plan))) return true;
    if (*bytes >= plan) return false;
    AbstractValue moved_block = block;
    moved_block.shape = Shape(needed);
    const std::vector<AbstractValue> in_types{moved_block}, out_types{block_type(out, want)};
    LocalEquation local{e.primitive, without_out_sharding(e.params)};
    if (e.primitive->localize) local = e.primitive->localize(local.params, in_types, out_types);
    if (!local.primitive || !types_match(*local.primitive, in_types, local.params, out_types))
      return false;
    Array y = lax::reshape(x.value, block.shape);
    if (!move.dims.empty())
      y = halo::relayout(y, move.dims, move.from, move.to, move.extents,
                         logged(equation_name(e) + " moves its blocks of the factors " +
                                Shape(rule.factor_sizes).str() + " from its operand's split " +
                                split_str(x) + " to its result's " +
                                ValueSplit{want, {}}.spec().repr()));
    store_results(e, {spmd::bind(*local.primitive, std::vector<Array>{y}, local.params)[0]},
                  {want});
    return true;
  }

  // How a value's block is split, for explain: its sub-axes where it keeps them.
  std::string split_str(const Local& x) const {
    return x.kept.empty() ? ValueSplit{x.split, {}}.spec().repr() : halo::layouts_str(x.kept);
  }

  // A reshape (operand `x`, its factors laid out as `from`) whose result's dims are boxes of
  // those factor blocks split by sub-axes, which its propagated split cannot name (Shardy's
  // 'b':(1)2 and 'b':(2)2 of [2, 6] reshaped from [12] split by 'b'), keeps them: each device
  // reshapes its block and moves nothing, and the ops after it that keep the factors
  // (run_on_kept_layouts) run on those blocks up to the first that needs whole axes, where one
  // relayout moves the block (settled). Taken when the reshape leads through such ops to a
  // constraint or its operand keeps sub-axes already, the split it would move to (`bytes` each
  // device sends) costs something, and the relayout from the kept blocks to that split sends no
  // more.
  bool keep_sub_axes(const Equation& e, const ShardingRule& rule, const Local& x,
                     const std::vector<halo::Layout>& from, int64_t bytes) {
    const int v = e.outputs[0];
    if (bytes == 0 || (x.kept.empty() && !leads_to_a_constraint(v))) return false;
    const AbstractValue& out = global_.types[size_t(v)];
    const auto keep = dim_layouts(rule, rule.results[0], out.shape, from);
    if (!keep || std::none_of(keep->begin(), keep->end(), [](const halo::Layout& l) {
          return l.div != 1 || l.mod != 0;
        }))
      return false;
    AbstractValue block = block_type(out, splits_[size_t(v)].dims);
    for (size_t d = 0; d < keep->size(); ++d) block.shape[int(d)] = (*keep)[d].block;
    const LayoutMove move =
        layout_move(*keep, layouts_of(splits_[size_t(v)].dims, out.shape), out.shape.dims());
    const std::optional<int64_t> settling =
        halo::relayout_bytes(block, move.dims, move.from, move.to, move.extents);
    if (!settling || *settling > bytes) return false;
    const std::vector<AbstractValue> in_types{aval_of(x.value)}, out_types{block};
    LocalEquation local{e.primitive, without_out_sharding(e.params)};
    if (e.primitive->localize) local = e.primitive->localize(local.params, in_types, out_types);
    if (!local.primitive || !types_match(*local.primitive, in_types, local.params, out_types))
      return false;
    env_[size_t(v)] =
        Local{spmd::bind(*local.primitive, std::vector<Array>{x.value}, local.params)[0],
              splits_[size_t(v)].dims, *keep};
    return true;
  }

  // Whether `rule` runs on blocks laid out by any layouts of its factors, passing them from its
  // operands to its results: every dim one factor passed through (elementwise ops, transposes),
  // or a reshape's factors in order on both sides.
  static bool passes_layouts(const ShardingRule& rule) {
    if (!rule.bodies.empty() || !rule.shifts.empty() || fixes_splits(rule)) return false;
    if (has_compound_dim(rule)) return factors_in_order(rule);
    for (const std::vector<ShardingRule::Tensor>* side : {&rule.operands, &rule.results})
      for (const ShardingRule::Tensor& t : *side)
        for (const ShardingRule::Dim& dim : t)
          if (dim.size() != 1 || rule.factor_kinds[size_t(dim[0])] != FactorKind::pass_through)
            return false;
    return true;
  }

  // Whether `v` reaches, through equations that pass layouts on, one that fixes its operands'
  // splits (a constraint) or a reduction: keeping sub-axes then moves the block once, to the
  // split the constraint asks for, or reduces it first (reduce_on_kept_layouts) and moves the
  // smaller result, where moving it to `v`'s propagated split first moved it twice. Toward other
  // consumers a relayout from sub-axes sends the bytes of the gather it replaces in more
  // collectives, so the reshape does not keep them.
  bool leads_to_a_constraint(int v) {
    if (auto it = leads_.find(v); it != leads_.end()) return it->second;
    bool leads = false;
    for (int i : users_[size_t(v)]) {
      const Equation& u = global_.equations[size_t(i)];
      const ShardingRule rule = sharding_rule_of(global_, u);
      if (fixes_splits(rule) || reduces_on_layouts(rule)) leads = true;
      if (!leads && passes_layouts(rule))
        for (int w : u.outputs) leads = leads || leads_to_a_constraint(w);
      if (leads) break;
    }
    return leads_[v] = leads;
  }

  // Whether `rule` reduces factors that the combiner completes (a sum, max or min, a dot), every
  // dim one factor that it reduces or passes through.
  static bool reduces_on_layouts(const ShardingRule& rule) {
    if (!rule.combiner || !rule.bodies.empty() || !rule.shifts.empty() || fixes_splits(rule) ||
        rule.results.size() != 1)
      return false;
    for (const std::vector<ShardingRule::Tensor>* side : {&rule.operands, &rule.results})
      for (const ShardingRule::Tensor& t : *side)
        for (const ShardingRule::Dim& dim : t)
          if (dim.size() != 1) return false;
    return std::any_of(rule.factor_kinds.begin(), rule.factor_kinds.end(),
                       [](FactorKind k) { return k == FactorKind::reduction; }) &&
           std::all_of(rule.factor_kinds.begin(), rule.factor_kinds.end(), [](FactorKind k) {
             return k == FactorKind::reduction || k == FactorKind::pass_through;
           });
  }

  // A sum, max, min or dot (reduces_on_layouts) with an operand that keeps sub-axes runs on its
  // blocks: the other operands are moved to the same layouts of the factors they share with it
  // (slicing a whole operand sends nothing; their other dims must be whole), each device reduces
  // its block of the reduced dims, and the combiner completes the partial results over only the
  // devices that hold different blocks of those dims and the same blocks of the others
  // (reduction_groups: axis_index_groups over the axes of the reduced dims' layouts). The
  // result keeps the layouts of its dims, so the equation after it that needs whole axes moves
  // the smaller result once. Taken when that sends fewer bytes than moving the kept operands to
  // their propagated splits and running the equation on those.
  bool reduce_on_kept_layouts(const Equation& e, const ShardingRule& rule) {
    if (!reduces_on_layouts(rule) || e.inputs.size() != rule.operands.size() ||
        e.outputs.size() != 1)
      return false;
    std::vector<std::optional<halo::Layout>> of(rule.factor_sizes.size());
    int64_t settling = 0;
    for (size_t k = 0; k < e.inputs.size(); ++k) {
      const Atom& a = e.inputs[k];
      if (a.is_literal() || env_[size_t(a.var)].kept.empty()) continue;
      const Local& x = env_[size_t(a.var)];
      const Shape& shape = global_.type_of(a).shape;
      for (size_t d = 0; d < rule.operands[k].size(); ++d) {
        std::optional<halo::Layout>& l = of[size_t(rule.operands[k][d][0])];
        if (l && !(*l == x.kept[d])) return false;
        l = x.kept[d];
      }
      const LayoutMove in = layout_move(x.kept, layouts_of(x.split, shape), shape.dims());
      const std::optional<int64_t> bytes =
          halo::relayout_bytes(aval_of(x.value), in.dims, in.from, in.to, in.extents);
      if (!bytes) return false;
      settling += *bytes;
    }
    // The other operands' moves to those layouts (their dims of factors no kept operand holds
    // whole, taken as they are).
    std::vector<LayoutMove> moves(e.inputs.size());
    int64_t bytes = 0;
    for (size_t k = 0; k < e.inputs.size(); ++k) {
      const Atom& a = e.inputs[k];
      if (a.is_literal() || !env_[size_t(a.var)].kept.empty()) continue;
      const Local& x = env_[size_t(a.var)];
      const Shape& shape = global_.type_of(a).shape;
      const std::vector<halo::Layout> from = layouts_of(x.split, shape);
      std::vector<halo::Layout> to;
      for (size_t d = 0; d < rule.operands[k].size(); ++d) {
        std::optional<halo::Layout>& l = of[size_t(rule.operands[k][d][0])];
        if (!l) {
          if (!x.split[d].empty()) return false;
          l = from[d];
        }
        to.push_back(*l);
      }
      moves[k] = layout_move(from, to, shape.dims());
      const std::optional<int64_t> sent = halo::relayout_bytes(
          aval_of(x.value), moves[k].dims, moves[k].from, moves[k].to, moves[k].extents);
      if (!sent) return false;
      bytes += *sent;
    }
    std::vector<halo::Layout> reduced;
    int64_t blocks = 1;
    for (size_t f = 0; f < of.size(); ++f) {
      if (rule.factor_kinds[f] != FactorKind::reduction) continue;
      if (!of[f] || rule.factor_sizes[f] % of[f]->block != 0) return false;
      blocks *= rule.factor_sizes[f] / of[f]->block;
      reduced.push_back(*of[f]);
    }
    const int v = e.outputs[0];
    AbstractValue block = global_.types[size_t(v)];
    block.sharding.reset();
    std::vector<halo::Layout> kept;
    for (size_t d = 0; d < rule.results[0].size(); ++d) {
      if (!of[size_t(rule.results[0][d][0])]) return false;
      kept.push_back(*of[size_t(rule.results[0][d][0])]);
      block.shape[int(d)] = kept.back().block;
    }
    const std::optional<ReductionGroups> groups = reduction_groups(reduced, kept, blocks);
    if (!groups) return false;
    const Split& want = splits_[size_t(v)].dims;
    const Shape& shape = global_.types[size_t(v)].shape;
    const LayoutMove out = layout_move(kept, layouts_of(want, shape), shape.dims());
    const std::optional<int64_t> out_bytes =
        halo::relayout_bytes(block, out.dims, out.from, out.to, out.extents);
    const int64_t combining = 2 * block.nbytes() * (blocks - 1) / blocks;
    if (!out_bytes || bytes + combining + *out_bytes >=
                          settling + cost(e, rule, choose_factors(e, rule).f, 0, false))
      return false;
    std::vector<AbstractValue> in_types;
    for (size_t k = 0; k < e.inputs.size(); ++k) {
      const Atom& a = e.inputs[k];
      in_types.push_back(a.is_literal() ? aval_of(a.literal) : aval_of(env_[size_t(a.var)].value));
      for (size_t i = 0; i < moves[k].dims.size(); ++i)
        in_types.back().shape[moves[k].dims[i]] = moves[k].to[i].block;
    }
    const std::vector<AbstractValue> out_types{block};
    LocalEquation local{e.primitive, without_out_sharding(e.params)};
    if (e.primitive->localize) local = e.primitive->localize(local.params, in_types, out_types);
    if (!local.primitive || !types_match(*local.primitive, in_types, local.params, out_types))
      return false;
    std::vector<Array> args;
    for (size_t k = 0; k < e.inputs.size(); ++k) {
      const Atom& a = e.inputs[k];
      args.push_back(a.is_literal() ? a.literal : env_[size_t(a.var)].value);
      if (!moves[k].dims.empty())
        args.back() = halo::relayout(
            args.back(), moves[k].dims, moves[k].from, moves[k].to, moves[k].extents,
            logged(operand_cause(e, k, env_[size_t(a.var)].split) + ", in the layouts " +
                   halo::layouts_str(moves[k].to) + " its other operands' sub-axes give"));
    }
    Array r = spmd::bind(*local.primitive, args, local.params)[0];
    if (blocks > 1) {
      collectives_.push_back(
          {rule.combiner->name + " over " + names_of(groups->axes).repr() +
               (groups->groups ? " in groups of " + std::to_string(blocks) : ""),
           rule.combiner->name + " completes the partial results of " + equation_name(e) +
               " over the blocks of its reduced dims its operand's sub-axes split",
           combining, false});
      r = collectives::reduce_over(*rule.combiner, r, groups->axes, groups->groups);
    }
    env_[size_t(v)] = Local{r, want, out.dims.empty() ? std::vector<halo::Layout>{} : kept};
    return true;
  }

  // The axes a reduction on kept layouts completes its partial results over, and the groups of
  // their indices (none when it is all of them) whose devices hold the same blocks of the
  // result and each a different block of the reduced dims.
  struct ReductionGroups {
    AxisList axes;
    std::optional<AxisIndexGroups> groups;
  };

  // The groups for reduced dims laid out as `reduced` (`blocks` blocks of them in all) and result
  // dims laid out as `kept`: every device's block indices computed from its mesh coordinates;
  // nothing when the devices that hold the same result blocks do not hold each block of the
  // reduced dims exactly once, or the groups differ along the other axes.
  std::optional<ReductionGroups> reduction_groups(const std::vector<halo::Layout>& reduced,
                                                  const std::vector<halo::Layout>& kept,
                                                  int64_t blocks) const {
    ReductionGroups g;
    for (const halo::Layout& l : reduced)
      for (const std::string& a : l.axes)
        if (std::find(g.axes.begin(), g.axes.end(), a) == g.axes.end()) g.axes.push_back(a);
    std::sort(g.axes.begin(), g.axes.end(), [&](const std::string& a, const std::string& b) {
      return mesh_.axis_position(a) < mesh_.axis_position(b);
    });
    if (blocks == 1) return g;
    const AxisList& all = mesh_.axis_names();
    AxisList others;
    for (const std::string& a : all)
      if (std::find(g.axes.begin(), g.axes.end(), a) == g.axes.end()) others.push_back(a);
    // Per (result blocks, index along the other axes): the indices along g.axes and the blocks
    // of the reduced dims of its devices.
    std::map<std::vector<int64_t>, std::vector<std::pair<int, std::vector<int64_t>>>> members;
    std::unordered_map<std::string, int64_t> at;
    for (int64_t device = 0; device < product(all); ++device) {
      for (size_t i = all.size(), rest = size_t(device); i-- > 0;) {
        at[all[i]] = int64_t(rest) % mesh_.axis_size(all[i]);
        rest /= size_t(mesh_.axis_size(all[i]));
      }
      auto index = [&](const AxisList& axes) {
        int64_t i = 0;
        for (const std::string& a : axes) i = i * mesh_.axis_size(a) + at[a];
        return i;
      };
      std::vector<int64_t> key, red;
      for (const halo::Layout& l : kept) key.push_back(l.index_of(index(l.axes)));
      key.push_back(index(others));
      for (const halo::Layout& l : reduced) red.push_back(l.index_of(index(l.axes)));
      members[key].emplace_back(int(index(g.axes)), red);
    }
    std::set<std::vector<int>> found;
    for (auto& [key, m] : members) {
      if (int64_t(m.size()) != blocks) return std::nullopt;
      std::sort(m.begin(), m.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
      for (size_t i = 1; i < m.size(); ++i)
        if (m[i].second == m[i - 1].second) return std::nullopt;
      std::vector<int> group;
      for (const auto& [t, red] : m) group.push_back(t);
      std::sort(group.begin(), group.end());
      found.insert(group);
    }
    if (int64_t(found.size()) * blocks != product(g.axes)) return std::nullopt;
    if (found.size() > 1) g.groups = AxisIndexGroups(found.begin(), found.end());
    return g;
  }

  // An equation that passes layouts on (passes_layouts, not a reshape) whose operands all keep
  // the same sub-axes for each factor (scalars aside) runs on those blocks and its results keep
  // them.
  bool run_on_kept_layouts(const Equation& e, const ShardingRule& rule) {
    if (has_compound_dim(rule) || !passes_layouts(rule) ||
        e.inputs.size() != rule.operands.size() || e.outputs.size() != rule.results.size())
      return false;
    std::vector<std::optional<halo::Layout>> of(rule.factor_sizes.size());
    std::vector<Array> args;
    std::vector<AbstractValue> in_types, out_types;
    for (size_t k = 0; k < e.inputs.size(); ++k) {
      const Atom& a = e.inputs[k];
      const ShardingRule::Tensor& dims = rule.operands[k];
      args.push_back(a.is_literal() ? a.literal : env_[size_t(a.var)].value);
      in_types.push_back(aval_of(args.back()));
      if (dims.empty()) continue;
      if (a.is_literal() || env_[size_t(a.var)].kept.empty()) return false;
      const std::vector<halo::Layout>& kept = env_[size_t(a.var)].kept;
      for (size_t d = 0; d < dims.size(); ++d) {
        std::optional<halo::Layout>& l = of[size_t(dims[d][0])];
        if (l && !(*l == kept[d])) return false;
        l = kept[d];
      }
    }
    std::vector<std::vector<halo::Layout>> kept(e.outputs.size());
    for (size_t r = 0; r < e.outputs.size(); ++r) {
      AbstractValue t = global_.types[size_t(e.outputs[r])];
      t.sharding.reset();
      for (size_t d = 0; d < rule.results[r].size(); ++d) {
        const std::optional<halo::Layout>& l = of[size_t(rule.results[r][d][0])];
        if (!l) return false;
        kept[r].push_back(*l);
        t.shape[int(d)] = l->block;
      }
      out_types.push_back(t);
    }
    if (std::none_of(of.begin(), of.end(), [](const auto& l) { return l.has_value(); }))
      return false;
    LocalEquation local{e.primitive, without_out_sharding(e.params)};
    if (e.primitive->localize) local = e.primitive->localize(local.params, in_types, out_types);
    if (!local.primitive || !types_match(*local.primitive, in_types, local.params, out_types))
      return false;
    const std::vector<Array> results = spmd::bind(*local.primitive, args, local.params);
    for (size_t r = 0; r < e.outputs.size(); ++r)
      env_[size_t(e.outputs[r])] =
          Local{results[r], splits_[size_t(e.outputs[r])].dims, std::move(kept[r])};
    return true;
  }

  // The block of `x`, which keeps sub-axes, moved to the blocks of split `to` (of a value of
  // shape `global`) by one relayout.
  Array settled(const Local& x, const Shape& global, const Split& to, const std::string& cause,
                bool implicit) {
    const LayoutMove move = layout_move(x.kept, layouts_of(to, global), global.dims());
    if (move.dims.empty()) return x.value;
    return halo::relayout(x.value, move.dims, move.from, move.to, move.extents,
                          [&](std::string collective, int64_t bytes) {
                            collectives_.push_back({std::move(collective), cause, bytes, implicit});
                          });
  }

  // The operands of `e` that keep sub-axes, moved to the split `e` needs them in (a
  // constraint's, else their propagated one), before `e` runs as any equation does. Returns
  // those moved to a split other than their own, as they were.
  std::vector<std::pair<int, Local>> settle_operands(const Equation& e, const ShardingRule& rule) {
    std::vector<std::pair<int, Local>> elsewhere;
    for (size_t k = 0; k < e.inputs.size(); ++k) {
      const Atom& a = e.inputs[k];
      if (a.is_literal() || env_[size_t(a.var)].kept.empty()) continue;
      Local& x = env_[size_t(a.var)];
      const Shape& shape = global_.type_of(a).shape;
      Split to = x.split;
      if (fixes_splits(rule)) {
        to = k < rule.fixed_operands.size() ? rule.fixed_operands[k] : Split{};
        to.resize(size_t(shape.ndim()));
        to = with_open_dims(std::move(to), rule, e, k, splits_);
      }
      if (to != x.split) elsewhere.emplace_back(a.var, x);
      x = Local{settled(x, shape, to,
                        operand_cause(e, k, to) + ", from the sub-axes its reshape kept",
                        !fixes_splits(rule)),
                to};
    }
    return elsewhere;
  }

  // An equation that moves data along dims at affine indices (slice, pad, rev) keeps them split
  // as its result is: each device gets from its neighbours only the rows its block needs, where
  // that moves fewer bytes than gathering the dims (halo.h). Exchanging halos is part of the
  // equation, as completing a sum is, not a reshard.
  // The whole of `v`, a constant expression, computed on every device from the program's
  // constants and unsplit inputs (once per value).
  Array whole_of(int v) {
    if (auto it = wholes_.find(v); it != wholes_.end()) return it->second;
    Array whole;
    if (std::find(global_.invars.begin(), global_.invars.end(), v) != global_.invars.end()) {
      whole = env_[size_t(v)].value;
    } else if (producer_[size_t(v)] < 0) {
      const auto at = std::find(global_.constvars.begin(), global_.constvars.end(), v);
      whole = global_.consts[size_t(at - global_.constvars.begin())];
    } else {
      const Equation& e = global_.equations[size_t(producer_[size_t(v)])];
      std::vector<Array> in;
      for (const Atom& a : e.inputs) in.push_back(a.is_literal() ? a.literal : whole_of(a.var));
      whole = spmd::bind(*e.primitive, in, without_out_sharding(e.params))[0];
    }
    return wholes_[v] = whole;
  }

  // An equation that moves data along a dim (slice, pad, rev, concatenate) of constants, whose
  // result is split along such a dim: each device computes the whole constant and takes its
  // block of the result, where halos would move its neighbours' rows.
  bool run_on_whole_constant(const Equation& e, const ShardingRule& rule) {
    if (e.outputs.size() != 1 || !constant_[size_t(e.outputs[0])]) return false;
    const int out = e.outputs[0];
    const Split& want = splits_[size_t(out)].dims;
    if (std::none_of(rule.shifts.begin(), rule.shifts.end(), [&](const ShardingRule::Shift& s) {
          return !want[size_t(s.dim)].empty();
        }))
      return false;
    const Shape& shape = global_.types[size_t(out)].shape;
    const Array block = moved(whole_of(out), Split(size_t(shape.ndim())), want, shape,
                              "the block of " + equation_name(e) + ", a constant", true);
    store_results(e, {block}, {want});
    return true;
  }

  bool run_with_halos(const Equation& e, const ShardingRule& rule) {
    std::vector<Shape> shapes;
    for (const Atom& a : e.inputs) shapes.push_back(global_.type_of(a).shape);
    const Split& want = splits_[size_t(e.outputs[0])].dims;
    const auto plans =
        halo::plan(rule.shifts, shapes, global_.types[size_t(e.outputs[0])].shape, want);
    auto literal = [&](const ShardingRule::Shift& s) {
      return e.inputs[size_t(s.operand)].is_literal();
    };
    if (!plans || std::any_of(rule.shifts.begin(), rule.shifts.end(), literal)) return false;
    std::vector<Array> blocks(e.inputs.size());
    for (const ShardingRule::Shift& shift : rule.shifts) {
      const size_t k = size_t(shift.operand);
      const Local& x = env_[size_t(e.inputs[k].var)];
      if (!blocks[k].valid())
        blocks[k] = moved(x.value, x.split, want, shapes[k], operand_cause(e, k, want), true);
    }
    Array fill;
    if (rule.fill >= 0) {
      const Atom& a = e.inputs[size_t(rule.fill)];
      fill = a.is_literal() ? a.literal : value(a);
    }
    const std::string cause =
        "the halo of " + equation_name(e) + ": its result blocks read rows their neighbours hold";
    const Array result = halo::run(*plans, blocks, fill, [&](std::string c, int64_t bytes) {
      collectives_.push_back({std::move(c), cause, bytes, false});
    });
    store_results(e, {result}, {want});
    return true;
  }

  // Moves each result of `e`, a block split as `out`, to its propagated split.
  void store_results(const Equation& e, const std::vector<Array>& results,
                     const std::vector<Split>& out) {
    for (size_t r = 0; r < e.outputs.size(); ++r) {
      const ValueSplit& want = splits_[size_t(e.outputs[r])];
      const bool annotated = !want.closed.empty() && want.closed[0];
      const std::string cause =
          "result " + std::to_string(r) + " of " + equation_name(e) + " goes to the split " +
          std::string(annotated ? "asked for" : "chosen") + ", " + want.spec().repr();
      env_[size_t(e.outputs[r])] =
          Local{moved(results[r], out[r], want.dims, global_.types[size_t(e.outputs[r])].shape,
                      cause, !annotated),
                want.dims};
    }
  }

  // The rank a body sees of a value shared with it.
  int rank_in_body(const Equation& e, const ShardingRule& rule,
                   const ShardingRule::Member& m) const {
    if (m.body < 0) {
      const Atom outer =
          m.output ? Atom::of_var(e.outputs[size_t(m.index)]) : e.inputs[size_t(m.index)];
      return global_.type_of(outer).shape.ndim() - m.lead;
    }
    const Program& body = *rule.bodies[size_t(m.body)].program;
    const Atom inner =
        m.output ? body.outputs[size_t(m.index)] : Atom::of_var(body.invars[size_t(m.index)]);
    return body.type_of(inner).shape.ndim();
  }

  // The split (in the body's rank) of one value an equation shares with its bodies: its
  // propagated split as a result, else as an operand, without the leading dims the body does
  // not see; unsplit when no body holds it (a cond's index, a predicate), which every device
  // must then hold whole. Dims split unevenly are kept when `padded`, else gathered.
  Split body_value_split(const Equation& e, const ShardingRule& rule,
                         const std::vector<ShardingRule::Member>& value, bool padded) const {
    const ShardingRule::Member* outer = nullptr;
    bool in_body = false;
    for (const ShardingRule::Member& m : value) {
      in_body |= m.body >= 0;
      if (m.body < 0 && (!outer || (m.output && !outer->output)) &&
          (m.output || !e.inputs[size_t(m.index)].is_literal()))
        outer = &m;
    }
    if (!in_body || !outer) return Split(size_t(rank_in_body(e, rule, value.front())));
    const int var =
        outer->output ? e.outputs[size_t(outer->index)] : e.inputs[size_t(outer->index)].var;
    const Split& whole = splits_[size_t(var)].dims;
    Split split(whole.begin() + outer->lead, whole.end());
    Shape shape = global_.types[size_t(var)].shape;
    shape = Shape(shape.begin() + outer->lead, shape.end());
    return padded ? split : even_split(split, shape, mesh_);
  }

  // A batched predicate's lanes (ShardingRule::Link): the body and output it is, and how many
  // leading dims of the carries it holds; nothing when the predicate is whole.
  struct Lanes {
    int body = -1, output = -1, dims = 0;
  };

  static Lanes lanes_of(const ShardingRule& rule) {
    for (size_t b = 0; b < rule.bodies.size(); ++b)
      for (size_t o = 0; o < rule.bodies[b].outputs.size(); ++o) {
        const ShardingRule::Link& link = rule.bodies[b].outputs[o];
        if (link.index < 0 && link.lead > 0) return {int(b), int(o), link.lead};
      }
    return {};
  }

  // The input of body `b` that is operand `operand`, or -1.
  static int input_of(const ShardingRule& rule, size_t b, int operand) {
    const auto& inputs = rule.bodies[b].inputs;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].index == operand) return int(i);
    return -1;
  }

  // Whether every other body sees all the inputs of the predicate's body, to compute the
  // predicate again where it selects the lanes that advance.
  static bool lanes_recomputable(const ShardingRule& rule, const Lanes& lanes) {
    const auto& inputs = rule.bodies[size_t(lanes.body)].inputs;
    for (size_t b = 0; b < rule.bodies.size(); ++b)
      for (const ShardingRule::Link& link : inputs)
        if (int(b) != lanes.body && input_of(rule, b, link.index) < 0) return false;
    return true;
  }

  // A batched predicate is split as the leading dims of the carries (the values that are
  // results) when they all agree and the predicate can be computed again in the other bodies;
  // otherwise those dims stay whole, so that every device holds every lane.
  static void share_lanes(const ShardingRule& rule,
                          const std::vector<std::vector<ShardingRule::Member>>& values,
                          std::vector<Split>& splits) {
    const Lanes lanes = lanes_of(rule);
    if (lanes.dims == 0) return;
    auto is_carry = [](const std::vector<ShardingRule::Member>& value) {
      return std::any_of(value.begin(), value.end(),
                         [](const ShardingRule::Member& m) { return m.body < 0 && m.output; });
    };
    const auto k = std::ptrdiff_t(lanes.dims);
    std::optional<Split> lane;
    bool agree = lanes_recomputable(rule, lanes);
    for (size_t v = 0; v < values.size(); ++v) {
      if (!is_carry(values[v])) continue;
      const Split leading(splits[v].begin(), splits[v].begin() + k);
      if (!lane) lane = leading;
      agree = agree && *lane == leading;
    }
    if (!lane || !agree) lane = Split(size_t(k));
    for (size_t v = 0; v < values.size(); ++v) {
      if (is_carry(values[v])) std::copy(lane->begin(), lane->end(), splits[v].begin());
      for (const ShardingRule::Member& m : values[v])
        if (m.body == lanes.body && m.output && m.index == lanes.output) splits[v] = *lane;
    }
  }

  // The splits of the values `e` shares with its bodies, with the dims split unevenly kept for
  // the values marked `padded`, gathered for the others.
  BodySplits body_splits(const Equation& e, const ShardingRule& rule,
                         const std::vector<bool>& padded) const {
    BodySplits s{std::vector<Split>(e.inputs.size()), std::vector<Split>(e.outputs.size()), {}, {}};
    for (const ShardingRule::Body& body : rule.bodies) {
      s.body_in.emplace_back(body.inputs.size());
      s.body_out.emplace_back(body.outputs.size());
    }
    const std::vector<std::vector<ShardingRule::Member>> values = rule.body_values();
    std::vector<Split> splits;
    for (size_t v = 0; v < values.size(); ++v)
      splits.push_back(body_value_split(e, rule, values[v], padded[v]));
    share_lanes(rule, values, splits);
    for (size_t v = 0; v < values.size(); ++v) {
      const Split& split = splits[v];
      for (const ShardingRule::Member& m : values[v]) {
        if (m.body >= 0) {
          const ValueSplit closed{split, std::vector<bool>(split.size(), true)};
          (m.output ? s.body_out : s.body_in)[size_t(m.body)][size_t(m.index)] = closed;
          continue;
        }
        Split whole(size_t(m.lead));
        whole.insert(whole.end(), split.begin(), split.end());
        (m.output ? s.out : s.in)[size_t(m.index)] = std::move(whole);
      }
    }
    return s;
  }

  bool keep_padding(const ShardingRule& rule, const BodySplits& s) const {
    for (size_t b = 0; b < rule.bodies.size(); ++b)
      if (!keeps_padding(*rule.bodies[b].program, mesh_, s.body_in[b], s.body_out[b])) return false;
    return true;
  }

  // An equation with bodies (control flow) runs them on blocks: each value it shares with its
  // bodies gets one split, the operands move to it, each body is partitioned for it (with the
  // collectives it needs inside, such as the psum completing a sum over a split dim), and the
  // equation runs with the per-device bodies. A predicate or index stays whole, so every
  // device takes the same branch and the same number of steps.
  void run_with_bodies(const Equation& e, const ShardingRule& rule) {
    const BodySplits s = body_splits(e, rule);
    std::vector<ProgramRef> local;
    for (size_t b = 0; b < rule.bodies.size(); ++b) {
      PartitionedProgram part = partition_in_scope(*rule.bodies[b].program, mesh_, s.body_in[b],
                                                   s.body_out[b], /*padded_boundary=*/true);
      for (InsertedCollective& c : part.collectives) {
        c.cause =
            "in " + rule.bodies[b].name + " of " + equation_name(e) + ", each step: " + c.cause;
        collectives_.push_back(std::move(c));
      }
      local.push_back(std::make_shared<const Program>(std::move(part.body)));
    }
    split_lanes(e, rule, s, local);
    std::vector<Array> args;
    for (size_t k = 0; k < e.inputs.size(); ++k) {
      const Atom& a = e.inputs[k];
      const Shape& shape = global_.type_of(a).shape;
      const std::string cause = operand_cause(e, k, s.in[k]);
      args.push_back(
          a.is_literal()
              ? moved(a.literal, Split(size_t(shape.ndim())), s.in[k], shape, cause, true)
              : moved(value(a), env_[size_t(a.var)].split, s.in[k], shape, cause, true));
    }
    store_results(e, spmd::bind(*e.primitive, args, rule.with_bodies(e.params, std::move(local))),
                  s.out);
  }

  // A batched predicate split over devices: each device holds its lanes, but all must run the
  // same number of steps (the bodies may hold collectives), so the predicate body gives every
  // lane the or of all lanes on all devices (a pmax; lanes in the padding do not count), and
  // each other body computes the local predicate again to advance only its active lanes, as
  // JAX's batched while does.
  void split_lanes(const Equation& e, const ShardingRule& rule, const BodySplits& s,
                   std::vector<ProgramRef>& local) {
    const Lanes lanes = lanes_of(rule);
    if (lanes.dims == 0) return;
    const Split& lane = s.body_out[size_t(lanes.body)][size_t(lanes.output)]->dims;
    AxisList axes;
    for (const AxisList& d : lane) axes.insert(axes.end(), d.begin(), d.end());
    if (axes.empty()) return;
    const ShardingRule::Body& cond = rule.bodies[size_t(lanes.body)];
    const Shape global = cond.program->out_types()[size_t(lanes.output)].shape;
    const ProgramRef local_cond = local[size_t(lanes.body)];
    const size_t output = size_t(lanes.output);
    auto any_lane = [=](std::span<const Array> args) {
      std::vector<Array> outs = eval_program(*local_cond, args);
      Array pred = outs[output];
      for (size_t d = 0; d < lane.size(); ++d) {
        if (even(global[int(d)], lane[d])) continue;
        const Array start = axis_index(names_of(lane[d])) * Array(int(pred.shape()[int(d)]));
        const Array index = lax::broadcasted_iota(int32, pred.shape(), int(d)) + start;
        pred = lax::bitwise_and(pred, lax::lt(index, Array(int(global[int(d)]))));
      }
      std::vector<int64_t> all(size_t(pred.ndim()));
      std::iota(all.begin(), all.end(), 0);
      const Array any = lax::convert_element_type(lax::reduce_or(pred, all), int32);
      outs[output] =
          lax::broadcast_in_dim(lax::gt(pmax(any, names_of(axes)), Array(0)), pred.shape(), {});
      return outs;
    };
    collectives_.push_back({"pmax over " + names_of(axes).repr(),
                            "in " + cond.name + " of " + equation_name(e) +
                                ", each step: the or of the batched predicate over the devices "
                                "holding its lanes",
                            2 * 4 * (product(axes) - 1) / product(axes), false});
    const std::vector<AbstractValue> cond_types = local_cond->in_types();
    local[size_t(lanes.body)] =
        std::make_shared<const Program>(trace_to_program(any_lane, cond_types, "partitioner"));
    for (size_t b = 0; b < rule.bodies.size(); ++b)
      if (int(b) != lanes.body)
        local[b] = advancing_active_lanes(rule, b, lanes, local_cond, local[b]);
  }

  // Body `b` of a batched while, advancing only the lanes whose predicate holds on this device.
  static ProgramRef advancing_active_lanes(const ShardingRule& rule, size_t b, const Lanes& lanes,
                                           const ProgramRef& local_cond, const ProgramRef& body) {
    std::vector<int> cond_inputs, carry_inputs;
    for (const ShardingRule::Link& link : rule.bodies[size_t(lanes.body)].inputs)
      cond_inputs.push_back(input_of(rule, b, link.index));
    for (const ShardingRule::Link& link : rule.bodies[b].outputs) {
      int carried = -1;
      for (auto [operand, result] : rule.carries)
        if (result == link.index) carried = input_of(rule, b, operand);
      carry_inputs.push_back(carried);
    }
    const size_t output = size_t(lanes.output);
    auto step = [=](std::span<const Array> args) {
      std::vector<Array> cond_args;
      for (int i : cond_inputs) cond_args.push_back(args[size_t(i)]);
      const Array pred = eval_program(*local_cond, cond_args)[output];
      std::vector<Array> outs = eval_program(*body, args);
      std::vector<int64_t> dims(size_t(pred.ndim()));
      std::iota(dims.begin(), dims.end(), 0);
      for (size_t r = 0; r < outs.size(); ++r) {
        if (carry_inputs[r] < 0) continue;
        const Array which = lax::broadcast_in_dim(pred, outs[r].shape(), dims);
        outs[r] = lax::select_n(which, {args[size_t(carry_inputs[r])], outs[r]});
      }
      return outs;
    };
    const std::vector<AbstractValue> types = body->in_types();
    return std::make_shared<const Program>(trace_to_program(step, types, "partitioner"));
  }

  // Completes result `i` of `e`, partial over the axes `partial` and a block split as `have`,
  // by the rule's combiner: as a reduce-scatter where its wanted split holds reduced axes, else
  // all of it on every device (a psum, then slices of the wanted split).
  void complete(const Equation& e, const ShardingRule& rule, size_t i, const AxisList& partial,
                Array& r, Split& have) {
    if (std::optional<Array> kept = scattered(e, rule, i, partial, r, have)) {
      r = std::move(*kept);
      have = splits_[size_t(e.outputs[i])].dims;
      return;
    }
    reduce(e, rule, partial, r);
  }

  void reduce(const Equation& e, const ShardingRule& rule, const AxisList& axes, Array& r) {
    const int64_t n = product(axes);
    collectives_.push_back({rule.combiner->name + " over " + names_of(axes).repr(),
                            rule.combiner->name + " completes the partial results of " +
                                equation_name(e) + " over its reduced dims",
                            2 * nbytes(r) * (n - 1) / n, false});
    r = collectives::reduce_over(*rule.combiner, r, axes);
  }

  // Partial results `r` (a block split as `have`) of a sum, max or min completed where result
  // `i` of `e` is wanted split over some of the reduced axes `partial`, with `have`'s axes
  // leading each dim: a reduce-scatter over them, so each device receives only the block it
  // keeps (half an all-reduce's bytes). The wanted axes that are not reduced are slices of `r`
  // taken first, a local transpose orders the blocks as the reduced axes scatter them when they
  // split several dims or other axes come between, and the reduced axes the result is not split
  // over are completed afterwards on the smaller block. Nothing when the wanted split does not
  // extend `have` or holds no reduced axis.
  std::optional<Array> scattered(const Equation& e, const ShardingRule& rule, size_t i,
                                 const AxisList& partial, const Array& r, const Split& have) {
    const std::optional<ScatterPlan> plan = scatter_plan(e, i, partial, have, r.shape());
    if (!plan) return std::nullopt;
    Array x = scattered_blocks(e, *rule.combiner, r, plan->extra, plan->scatter);
    AxisList rest;
    std::copy_if(
        partial.begin(), partial.end(), std::back_inserter(rest), [&](const std::string& a) {
          return std::find(plan->scatter.begin(), plan->scatter.end(), a) == plan->scatter.end();
        });
    if (!rest.empty()) reduce(e, rule, rest, x);
    return x;
  }

  // How `scattered` completes result i of `e` from partial results over `partial` in a block of
  // shape `block` split as `have`: the axes that split each dim further (`extra`, major to
  // minor) and the reduced ones among them, which the reduce-scatter goes over; `sliced` is the
  // product of the others, taken as slices first.
  struct ScatterPlan {
    Split extra;
    AxisList scatter;
    int64_t sliced = 1;
  };

  std::optional<ScatterPlan> scatter_plan(const Equation& e, size_t i, const AxisList& partial,
                                          const Split& have, const Shape& block) const {
    const int var = e.outputs[i];
    const Split& want = splits_[size_t(var)].dims;
    if (want.size() != have.size()) return std::nullopt;
    auto reduced = [&](const std::string& a) {
      return std::find(partial.begin(), partial.end(), a) != partial.end();
    };
    ScatterPlan plan{Split(want.size()), {}, 1};
    for (size_t d = 0; d < want.size(); ++d) {
      if (!is_prefix(have[d], want[d])) return std::nullopt;
      AxisList& extra = plan.extra[d];
      extra.assign(want[d].begin() + std::ptrdiff_t(have[d].size()), want[d].end());
      if (extra.empty()) continue;
      if (!even(global_.types[size_t(var)].shape[int(d)], want[d]) ||
          block[int(d)] % product(extra) != 0)
        return std::nullopt;
      for (const std::string& a : extra)
        if (reduced(a))
          plan.scatter.push_back(a);
        else
          plan.sliced *= mesh_.axis_size(a);
    }
    if (plan.scatter.empty()) return std::nullopt;
    return plan;
  }

  // The reduce-scatter of `r` over `scatter` into the blocks that split each dim d further by
  // `extra[d]` (major to minor; the axes not in `scatter` are slices of `r`).
  Array scattered_blocks(const Equation& e, const Primitive& combiner, const Array& r,
                         const Split& extra, const AxisList& scatter) {
    const auto d =
        std::find_if(extra.begin(), extra.end(), [](const AxisList& a) { return !a.empty(); });
    if (*d == scatter && std::count_if(extra.begin(), extra.end(),
                                       [](const AxisList& a) { return !a.empty(); }) == 1)
      return scatter_chunks(e, combiner, r, scatter, int(d - extra.begin()));
    // r viewed with a dim per axis of `extra` before each dim's block: the axes not reduced are
    // sliced to this device's index, the reduced ones moved to the front in `scatter`'s order.
    std::vector<int64_t> sizes, block;
    std::vector<std::string> labels;
    for (size_t k = 0; k < extra.size(); ++k) {
      for (const std::string& a : extra[k]) {
        sizes.push_back(mesh_.axis_size(a));
        labels.push_back(a);
      }
      block.push_back(r.shape()[int(k)] / product(extra[k]));
      sizes.push_back(block.back());
      labels.emplace_back();
    }
    Array x = lax::reshape(r, Shape(sizes));
    std::vector<int64_t> perm;
    for (const std::string& a : scatter)
      perm.push_back(std::find(labels.begin(), labels.end(), a) - labels.begin());
    std::vector<int64_t> front{product(scatter)};
    for (size_t j = 0; j < labels.size(); ++j) {
      if (std::find(scatter.begin(), scatter.end(), labels[j]) != scatter.end()) continue;
      if (!labels[j].empty()) x = lax::dynamic_slice_in_dim(x, axis_index(labels[j]), 1, int(j));
      perm.push_back(int64_t(j));
      front.push_back(x.shape()[int(j)]);
    }
    if (!std::is_sorted(perm.begin(), perm.end())) x = lax::transpose(x, perm);
    x = lax::reshape(x, Shape(front));
    return lax::reshape(scatter_chunks(e, combiner, x, scatter, 0), Shape(block));
  }

  // `combiner`'s reduce-scatter of `x` along dim d over `scatter`, in the account: a sum's
  // psum_scatter, a max's or min's all_to_all (and local max or min), with the same bytes.
  Array scatter_chunks(const Equation& e, const Primitive& combiner, const Array& x,
                       const AxisList& scatter, int d) {
    const int64_t n = product(scatter);
    const bool sum = &combiner == &collectives::psum_primitive();
    const std::string kind = &combiner == &collectives::pmax_primitive() ? "max" : "min";
    const std::string collective = sum ? "psum_scatter" : "all_to_all";
    const std::string how =
        sum ? "psum_scatter completes" : "all_to_all and a local " + kind + " complete";
    collectives_.push_back({collective + " over " + names_of(scatter).repr(),
                            how + " the partial results of " + equation_name(e) +
                                " where its result is split over them",
                            nbytes(x) * (n - 1) / n, false});
    return collectives::scatter_over(combiner, x, names_of(scatter), d);
  }

  std::vector<Array> gathered_operands(const Equation& e, const std::vector<Split>& in) {
    std::vector<Array> args;
    for (size_t k = 0; k < e.inputs.size(); ++k) {
      const Atom& a = e.inputs[k];
      if (a.is_literal()) {
        args.push_back(a.literal);
        continue;
      }
      const Local& x = env_[size_t(a.var)];
      args.push_back(moved(x.value, x.split, in[k], global_.type_of(a).shape,
                           equation_name(e) + " runs on whole operands (no per-block form)", true));
    }
    return args;
  }

  const Program& global_;
  const Mesh& mesh_;
  std::vector<ValueSplit> splits_;
  std::vector<Local> env_;
  std::vector<InsertedCollective> collectives_;
  std::vector<Reshard> reshards_;  // the values moved so far, read again by later uses
  std::vector<std::optional<OutputSplit>> out_;
  std::vector<std::optional<HeldArgument>> held_;
  std::vector<bool> constant_;  // constant expressions, of constants and unsplit inputs
  std::vector<int> producer_;   // the equation defining each variable, or -1
  std::vector<std::vector<int>> users_;  // the equations reading each variable
  std::unordered_map<int, Array> wholes_;  // whole_of's values
  std::unordered_map<int, bool> leads_;     // leads_to_a_constraint's answers
};

bool bodies_keep_padding(const Program& program, const Mesh& mesh,
                         const std::vector<ValueSplit>& splits, const Equation& e,
                         const ShardingRule& rule) {
  const Partitioner::BodySplits s = Partitioner(program, mesh, splits, {}).body_splits(e, rule);
  auto kept = [&](int var, const Split& chosen) {
    const Split& split = splits[size_t(var)].dims;
    for (size_t d = 0; d < split.size(); ++d)
      if (!even(program.types[size_t(var)].shape[int(d)], split[d]) && chosen[d] != split[d])
        return false;
    return true;
  };
  for (size_t k = 0; k < e.inputs.size(); ++k)
    if (!e.inputs[k].is_literal() && !kept(e.inputs[k].var, s.in[k])) return false;
  for (size_t r = 0; r < e.outputs.size(); ++r)
    if (!kept(e.outputs[r], s.out[r])) return false;
  return true;
}

std::vector<AxisFrame> frames_of(const Mesh& mesh) {
  std::vector<AxisFrame> frames;
  for (const auto& [axis, size] : mesh.shape())
    frames.push_back({axis, size, "partitioner", false});
  return frames;
}

// partition_program with the mesh axes already in scope: for the program and, recursively, the
// bodies of its control flow, whose boundary may be padded (`padded_boundary`): their inputs
// arrive and their outputs leave as the blocks of the equation that runs them.
PartitionedProgram partition_in_scope(const Program& global0, const Mesh& mesh,
                                      const std::vector<std::optional<ValueSplit>>& in,
                                      const std::vector<std::optional<ValueSplit>>& out,
                                      bool padded_boundary,
                                      const std::vector<std::optional<HeldArgument>>& held) {
  const Program global = prepared_for_partitioning(global0);
  std::vector<ValueSplit> splits = propagate_shardings(global, mesh, in, out);
  PartitionedProgram result;
  std::vector<AbstractValue> block_types;
  for (int v : global.invars) {
    // A jit's arguments arrive in even blocks; uneven dims are sliced from them where they are
    // used. A body's arrive in the (padded) blocks of its equation.
    std::vector<AxisList>& dims = splits[size_t(v)].dims;
    if (!padded_boundary) dims = even_split(dims, global.types[size_t(v)].shape, mesh);
    AbstractValue t = global.types[size_t(v)];
    t.shape = block_shape(t.shape, splits[size_t(v)].dims, mesh);
    t.sharding.reset();
    block_types.push_back(std::move(t));
    result.in_specs.push_back(splits[size_t(v)].spec());
  }
  // Arrays hold even blocks only: as JAX does, a result split unevenly inside leaves with those
  // dims gathered (out_shardings are even, place checks them). A body's results stay padded.
  std::vector<std::optional<OutputSplit>> asked(global.outputs.size());
  for (size_t i = 0; i < asked.size(); ++i) {
    const Atom& a = global.outputs[i];
    if (a.is_literal()) {
      result.out_specs.push_back(PartitionSpec());
      continue;
    }
    const bool given = i < out.size() && out[i];
    const Split& inside = splits[size_t(a.var)].dims;
    Split want = given ? out[i]->dims : inside;
    if (!padded_boundary) want = even_split(want, global.type_of(a).shape, mesh);
    result.out_specs.push_back(ValueSplit{want, {}}.spec());
    if (given || want != inside)
      asked[i] = OutputSplit{std::move(want),
                             "output " + std::to_string(i) +
                                 (given ? " goes to its out_sharding"
                                        : " leaves with the dims split unevenly inside gathered")};
  }
  Partitioner partitioner(global, mesh, std::move(splits), std::move(asked), held);
  result.body = trace_to_program(
      [&partitioner](std::span<const Array> args) { return partitioner.run(args); }, block_types,
      "partitioner");
  result.collectives = partitioner.take_collectives();
  return result;
}

}  // namespace

Program prepared_for_partitioning(const Program& p) {
  return split_constant_uses(dead_code_elimination(inline_calls(p)));
}

PartitionedProgram partition_program(const Program& global, const Mesh& mesh,
                                     const std::vector<std::optional<ValueSplit>>& in,
                                     const std::vector<std::optional<ValueSplit>>& out,
                                     const std::vector<std::optional<HeldArgument>>& held) {
  AxisEnvScope axes(frames_of(mesh));
  return partition_in_scope(global, mesh, in, out, /*padded_boundary=*/false, held);
}

}  // namespace spmd

// Nested pmap on one device per instance: the probe that watches an outer pmap's body for the
// pmaps nested in it, the layout that spreads the body over a mesh with one axis per level, and
// how a nested pmap runs inside that layout (nested_pmap.h).
#include "transforms/higher_order/nested_pmap.h"

#include <spmd/device.h>
#include <spmd/lax.h>
#include <spmd/ops.h>
#include <spmd/parallel.h>

#include "core/array_impl.h"
#include "prims/collectives.h"
#include "prims/primitive.h"

#include <algorithm>
#include <memory>
#include <numeric>

namespace spmd::transform_detail {

// The levels a spread body is traced with: the outer pmap's nested levels, in depth order.
struct SpreadLevel {
  std::string axis;  // the pmap's axis name
  int64_t size = 0;
  std::string mesh_axis;  // its mesh axis (unnamed levels get one of their own)
  bool direct = false;    // part of the blocks: the level's instances are the devices' blocks
};
struct SpreadPlan {
  std::vector<SpreadLevel> levels;
};

// The body of one level being traced, watched for the nested call it makes.
struct BodyWatch {
  std::vector<const ArrayImpl*> args;
  const Trace* trace = nullptr;
  size_t equations_at_start = 0;
  int calls = 0;
  bool call_took_args = false;
  std::vector<const ArrayImpl*> call_results;
  size_t equations_after_call = 0;
};

namespace {

thread_local NestingProbe* t_probe = nullptr;
thread_local const SpreadPlan* t_spread = nullptr;
thread_local size_t t_spread_depth = 0;  // levels of t_spread the thread is inside

// Makes a plan current for a spread body's trace, at depth 0.
class SpreadScope {
 public:
  explicit SpreadScope(const SpreadPlan* plan) : plan_(t_spread), depth_(t_spread_depth) {
    t_spread = plan;
    t_spread_depth = 0;
  }
  ~SpreadScope() {
    t_spread = plan_;
    t_spread_depth = depth_;
  }
  SpreadScope(const SpreadScope&) = delete;
  SpreadScope& operator=(const SpreadScope&) = delete;

 private:
  const SpreadPlan* plan_;
  size_t depth_;
};

class OneLevelDeeper {
 public:
  OneLevelDeeper() { ++t_spread_depth; }
  ~OneLevelDeeper() { --t_spread_depth; }
  OneLevelDeeper(const OneLevelDeeper&) = delete;
  OneLevelDeeper& operator=(const OneLevelDeeper&) = delete;
};

const SpreadLevel* current_spread_level() {
  if (!t_spread || t_spread_depth >= t_spread->levels.size()) return nullptr;
  return &t_spread->levels[t_spread_depth];
}

std::vector<const ArrayImpl*> impls_of(std::span<const Array> xs) {
  std::vector<const ArrayImpl*> out;
  for (const Array& x : xs) out.push_back(x.impl().get());
  return out;
}

bool identical(std::span<const Array> xs, const std::vector<const ArrayImpl*>& impls) {
  return impls_of(xs) == impls;
}

StagingTrace* current_staging() {
  return dynamic_cast<StagingTrace*>(current_trace());
}

size_t equations_now() {
  StagingTrace* t = current_staging();
  return t ? t->num_equations() : 0;
}

int normalised(int dim, int rank) {
  return dim < 0 ? dim + rank : dim;
}

// Whether the body being finished closed over values of another trace (an enclosing body's).
bool captured_traced_values(const StagingTrace* trace, std::span<const Array> outs) {
  if (!trace || trace->captured_traced_values()) return true;
  for (const Array& o : outs)
    if (!is_concrete(o) && !trace->owns(o)) return true;
  return false;
}

}  // namespace

NestingProbe::NestingProbe() : saved_(t_probe) {
  t_probe = this;
}
NestingProbe::~NestingProbe() {
  stop();
}
void NestingProbe::stop() {
  if (t_probe == this) t_probe = saved_;
}

std::vector<Array> run_pmap_body(const FlatFn& fn, std::span<const Array> args) {
  NestingProbe* probe = t_probe;
  if (!probe) return fn(args);
  const size_t depth = probe->bodies.size();
  StagingTrace* trace = current_staging();
  BodyWatch watch;
  watch.args = impls_of(args);
  watch.trace = trace;
  watch.equations_at_start = equations_now();
  probe->bodies.push_back(&watch);
  std::vector<Array> outs;
  try {
    outs = fn(args);
  } catch (...) {
    probe->bodies.pop_back();
    throw;
  }
  probe->bodies.pop_back();
  if (watch.calls > 0) {
    bool whole = watch.calls == 1 && watch.call_took_args && identical(outs, watch.call_results) &&
                 trace && equations_now() == watch.equations_after_call;
    NestedLevel& inner = probe->levels[depth];
    inner.whole_body = inner.whole_body && whole;
  }
  if (depth > 0 && captured_traced_values(trace, outs)) probe->levels[depth - 1].whole_body = false;
  return outs;
}

std::vector<Array> probe_nested_pmap(
    const NestedPmapCall& call, const FlatFn& fn, std::span<const Array> leaves,
    const std::function<std::vector<Array>(const FlatFn&)>& batched) {
  NestingProbe* probe = t_probe;
  if (!probe || probe->bodies.empty()) return batched(fn);
  const size_t d = probe->bodies.size() - 1;
  if (probe->levels.size() <= d) probe->levels.resize(d + 1);
  {
    NestedLevel& level = probe->levels[d];
    if (level.calls == 0) {
      level.axis = call.axis;
      level.size = call.size;
      level.in_dims = call.in_dims;
    } else if (level.axis != call.axis || level.size != call.size) {
      probe->uniform = false;
    }
    ++level.calls;
  }
  if (call.devices_given) probe->uniform = false;
  BodyWatch& watch = *probe->bodies.back();
  ++watch.calls;
  watch.call_took_args = identical(leaves, watch.args) && watch.trace &&
                         watch.trace == current_staging() &&
                         equations_now() == watch.equations_at_start;
  std::vector<Array> outs =
      batched([&fn](std::span<const Array> xs) { return run_pmap_body(fn, xs); });
  watch.call_results = impls_of(outs);
  watch.equations_after_call = equations_now();
  NestedLevel& level = probe->levels[d];  // deeper calls may have grown the vector
  level.out_dims.clear();
  for (size_t k = 0; k < outs.size(); ++k) {
    const Axis& a = call.out_axes[call.out_axes.size() == 1 ? 0 : k];
    level.out_dims.push_back(a.dim ? std::optional<int>(normalised(*a.dim, outs[k].ndim()))
                                   : std::nullopt);
  }
  return outs;
}

namespace {

// Where a value's mapped dims go: the outer pmap's (dim 0) and then each direct level's (a dim
// among those left), as a PartitionSpec over the spread mesh and the mapped dims in order.
struct Placement {
  PartitionSpec spec;
  Axes dims;
};

std::optional<Placement> place(int rank, bool outer_mapped, const std::string& outer_axis,
                               const std::vector<std::optional<int>>& level_dims,
                               const SpreadPlan& plan) {
  std::vector<int> left(size_t(std::max(rank, 0)));
  std::iota(left.begin(), left.end(), 0);
  std::vector<PartitionSpec::Entry> entries(left.size());
  Axes dims;
  auto take = [&](int d, const std::string& axis) {
    if (d < 0 || size_t(d) >= left.size()) return false;
    entries[size_t(left[size_t(d)])] = AxisNames(axis);
    dims.push_back(left[size_t(d)]);
    left.erase(left.begin() + d);
    return true;
  };
  if (outer_mapped && !take(0, outer_axis)) return std::nullopt;
  for (size_t l = 0; l < level_dims.size(); ++l)
    if (level_dims[l] && !take(*level_dims[l], plan.levels[l].mesh_axis)) return std::nullopt;
  std::sort(dims.begin(), dims.end());
  return Placement{PartitionSpec(entries), dims};
}

// The levels of a probe as a plan over distinct mesh axes; nullopt when they cannot be spread.
std::optional<SpreadPlan> plan_levels(const NestingProbe& probe, const OuterPmap& outer) {
  if (!probe.uniform || probe.levels.empty()) return std::nullopt;
  SpreadPlan plan;
  std::vector<std::string> names{outer.axis};
  int64_t total = outer.size;
  bool direct = true;
  for (size_t l = 0; l < probe.levels.size(); ++l) {
    const NestedLevel& level = probe.levels[l];
    std::string mesh_axis =
        level.axis == kInternalAxisName ? level.axis + "_" + std::to_string(l + 1) : level.axis;
    // A name that shadows an enclosing level's stays batched.
    if (level.calls == 0 || std::find(names.begin(), names.end(), mesh_axis) != names.end())
      return std::nullopt;
    direct = direct && level.calls == 1 && level.whole_body;
    plan.levels.push_back({level.axis, level.size, mesh_axis, direct});
    names.push_back(mesh_axis);
    total *= level.size;
  }
  if (total > device_count()) return std::nullopt;
  return plan;
}

}  // namespace

std::optional<SpreadLayout> spread_layout(const NestingProbe& probe, const OuterPmap& outer,
                                          const FlatFn& fn) {
  std::optional<SpreadPlan> levels = plan_levels(probe, outer);
  if (!levels) return std::nullopt;
  auto plan = std::make_shared<const SpreadPlan>(std::move(*levels));
  std::vector<std::string> names{outer.axis};
  std::vector<int64_t> sizes{outer.size};
  for (const SpreadLevel& l : plan->levels) {
    names.push_back(l.mesh_axis);
    sizes.push_back(l.size);
  }
  int64_t total = 1;
  for (int64_t s : sizes) total *= s;
  std::vector<Device> all = devices();
  SpreadLayout layout{
      Mesh(std::vector<Device>(all.begin(), all.begin() + total), Shape(sizes), names), {}, {}, {}};
  // Operands and results along the direct levels become the blocks' dims.
  auto place_all = [&](const std::vector<int>& ranks, const std::vector<bool>& mapped, auto dims_of,
                       std::vector<PartitionSpec>& specs, std::vector<Axes>& dims) {
    for (size_t i = 0; i < ranks.size(); ++i) {
      std::vector<std::optional<int>> level_dims;
      for (size_t l = 0; l < plan->levels.size() && plan->levels[l].direct; ++l) {
        const std::vector<std::optional<int>>& of_level = dims_of(probe.levels[l]);
        if (of_level.size() != ranks.size()) return false;
        level_dims.push_back(of_level[i]);
      }
      std::optional<Placement> p = place(ranks[i], mapped[i], outer.axis, level_dims, *plan);
      if (!p) return false;
      specs.push_back(p->spec);
      dims.push_back(p->dims);
    }
    return true;
  };
  std::vector<Axes> squeezed, expanded;
  auto in_dims = [](const NestedLevel& l) -> const auto& {
    return l.in_dims;
  };
  auto out_dims = [](const NestedLevel& l) -> const auto& {
    return l.out_dims;
  };
  if (!place_all(outer.in_ranks, outer.in_mapped, in_dims, layout.in_specs, squeezed) ||
      !place_all(outer.out_ranks, outer.out_mapped, out_dims, layout.out_specs, expanded))
    return std::nullopt;
  layout.body = [plan, fn, squeezed, expanded](std::span<const Array> blocks) {
    SpreadScope scope(plan.get());
    std::vector<Array> args;
    for (size_t i = 0; i < blocks.size(); ++i)
      args.push_back(squeezed[i].empty() ? blocks[i] : squeeze(blocks[i], squeezed[i]));
    std::vector<Array> outs = fn(args);
    for (size_t k = 0; k < outs.size() && k < expanded.size(); ++k)
      if (!expanded[k].empty()) outs[k] = expand_dims(outs[k], expanded[k]);
    return outs;
  };
  return layout;
}

std::optional<std::vector<Array>> run_direct_pmap(const std::string& axis, const FlatFn& fn,
                                                  std::span<const Array> leaves) {
  const SpreadLevel* level = current_spread_level();
  if (!level || !level->direct || level->axis != axis) return std::nullopt;
  OneLevelDeeper inside;
  return fn(leaves);
}

namespace {

// The instances' values stacked along `dim` on every device: an all_gather whose transpose
// takes each instance's own slice (psum_invariant transposes to pvary, not to a sum), as the
// values outside the nested pmap are one value held by all of its devices.
Array gather_instances(const Array& x, const std::string& axis, int64_t size, int dim) {
  if (x.dtype() == bool_) return gather_instances(x.astype(int32), axis, size, dim).astype(bool_);
  std::vector<int64_t> shape = x.shape().dims();
  shape.insert(shape.begin() + dim, size);
  std::vector<Array> starts(shape.size(), Array(0));
  starts[size_t(dim)] = axis_index(axis);
  Array placed =
      lax::dynamic_update_slice(zeros(Shape(shape), x.dtype()), expand_dims(x, {dim}), starts);
  return bind1(primitive("psum_invariant"), {placed},
               Params{{"axes", std::vector<std::string>{axis}}});
}

// A value shared by the instances, cast to varying over their axis so that the cotangents the
// instances give it are summed over them (sp::pvary is a no-op on these untyped axes).
Array cast_varying(const Array& x, const std::string& axis) {
  return collectives::pvary_cast(x, {axis});
}

}  // namespace

std::optional<std::vector<Array>> run_gathered_pmap(const NestedPmapCall& call, const FlatFn& fn,
                                                    std::span<const Array> leaves) {
  const SpreadLevel* level = current_spread_level();
  if (!level || level->direct || level->axis != call.axis || level->size != call.size)
    return std::nullopt;
  OneLevelDeeper inside;
  const std::string& axis = level->mesh_axis;
  // Everything the instances share is cast to varying over the level's axis (pvary), so the
  // cotangents the instances give it are summed over them.
  Array index = axis_index(axis);
  std::vector<Array> args;
  std::vector<AbstractValue> types;
  for (size_t i = 0; i < leaves.size(); ++i) {
    Array x = cast_varying(leaves[i], axis);
    if (call.in_dims[i]) x = lax::dynamic_index_in_dim(x, index, *call.in_dims[i], false);
    args.push_back(x);
    types.push_back(aval_of(x));
  }
  std::vector<Array> operands;
  Program body = hoist_consts(trace_to_program(fn, types, "pmap"), &operands);
  for (Array& c : operands)
    if (!is_concrete(c)) c = cast_varying(c, axis);
  operands.insert(operands.end(), args.begin(), args.end());
  std::vector<Array> outs = eval_program(body, operands);
  for (size_t k = 0; k < outs.size(); ++k) {
    const Axis& a = call.out_axes[call.out_axes.size() == 1 ? 0 : k];
    if (a.dim)
      outs[k] =
          gather_instances(outs[k], axis, level->size, normalised(*a.dim, outs[k].ndim() + 1));
  }
  return outs;
}

NoSpread::NoSpread() : saved_(t_spread) {
  t_spread = nullptr;
}
NoSpread::~NoSpread() {
  t_spread = saved_;
}

}  // namespace spmd::transform_detail

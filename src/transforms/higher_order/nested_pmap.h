// Nested pmap on one device per instance. An outer pmap traces its body once as usual (inner
// pmaps batched by vmap: the Program that is printed and differentiated) while a NestingProbe
// records the pmaps nested in it, level by level. When the levels are uniform, the body is traced
// again as a shard_map over a mesh with one axis per level (SpreadLayout); running the outer
// equation runs that one, instance (r, c) on device r·C + c.
#pragma once

#include <spmd/array.h>
#include <spmd/sharding.h>
#include <spmd/transforms.h>

#include "transforms/staging.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace spmd::transform_detail {

// JAX's name for the axis of a pmap without axis_name (no collective can name it).
inline constexpr const char* kInternalAxisName = "_internal_pmap_axis_name";

// A pmap called while another pmap's body is traced.
struct NestedPmapCall {
  std::string axis;                         // its axis name (kInternalAxisName when unnamed)
  int64_t size = 0;                         // its mapped size
  std::vector<std::optional<int>> in_dims;  // per leaf, normalised
  std::vector<Axis> out_axes;               // one for all results or one per result
  bool devices_given = false;
};

// One depth of nesting as the probe saw it.
struct NestedLevel {
  std::string axis;
  int64_t size = 0;
  std::vector<std::optional<int>> in_dims;   // of its leaves
  std::vector<std::optional<int>> out_dims;  // of its results, normalised
  int calls = 0;
  // Each call was all its enclosing body did (its arguments in, its results out, nothing else
  // recorded) and its own body closed over no traced value: the levels down to here can be
  // one shard_map whose blocks are the instances.
  bool whole_body = true;
};

struct BodyWatch;  // the body of one level being traced (nested_pmap.cpp)

// Current on this thread for its lifetime (while the outermost pmap traces its body).
class NestingProbe {
 public:
  NestingProbe();
  ~NestingProbe();
  NestingProbe(const NestingProbe&) = delete;
  NestingProbe& operator=(const NestingProbe&) = delete;
  // No longer current (before the destructor).
  void stop();

  std::vector<NestedLevel> levels;  // levels[d]: the pmaps at depth d + 1
  bool uniform = true;              // one axis name and size per depth, no explicit devices
  std::vector<BodyWatch*> bodies;   // the bodies being traced, outermost first

 private:
  NestingProbe* saved_;
};

// Runs a pmap's body on its instance arguments; with a probe current, watches it.
std::vector<Array> run_pmap_body(const FlatFn& fn, std::span<const Array> args);

// A pmap nested in another's body, traced as `batched` maps it (vmap); recorded by the current
// probe if there is one.
std::vector<Array> probe_nested_pmap(
    const NestedPmapCall& call, const FlatFn& fn, std::span<const Array> leaves,
    const std::function<std::vector<Array>(const FlatFn&)>& batched);

// The outer pmap's body over a mesh with one axis per level of nesting: the outer axis, then
// each level's. Operands and results are laid out as the outer pmap's shard_map has them (the
// mapped dim first, or absent).
struct SpreadLayout {
  Mesh mesh;
  std::vector<PartitionSpec> in_specs;
  std::vector<PartitionSpec> out_specs;
  FlatFn body;
};
struct OuterPmap {
  std::string axis;
  int64_t size = 0;
  std::vector<bool> in_mapped;   // per operand: mapped along dim 0
  std::vector<int> in_ranks;     // per operand
  std::vector<bool> out_mapped;  // per result: mapped along dim 0
  std::vector<int> out_ranks;    // per result block, with the mapped dim
};
std::optional<SpreadLayout> spread_layout(const NestingProbe& probe, const OuterPmap& outer,
                                          const FlatFn& fn);

// A pmap called while a SpreadLayout's body is traced, at a level the layout made part of the
// blocks: its leaves are already one instance's values. nullopt when the level is not one.
std::optional<std::vector<Array>> run_direct_pmap(const std::string& axis, const FlatFn& fn,
                                                  std::span<const Array> leaves);
// At a level the layout spread over a mesh axis: each device takes its instance's slice, runs
// the body, and the instances' results are gathered. nullopt when the call is not one the
// layout planned for (it is then batched as before).
std::optional<std::vector<Array>> run_gathered_pmap(const NestedPmapCall& call, const FlatFn& fn,
                                                    std::span<const Array> leaves);
struct SpreadPlan;
// While a pmap runs as a vmap inside a spread body, pmaps nested in it are batched too.
class NoSpread {
 public:
  NoSpread();
  ~NoSpread();
  NoSpread(const NoSpread&) = delete;
  NoSpread& operator=(const NoSpread&) = delete;

 private:
  const SpreadPlan* saved_;
};

}  // namespace spmd::transform_detail

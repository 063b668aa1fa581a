// The named axes in scope while a function is traced: vmap with an axis_name, shard_map's mesh
// axes and pmap push frames; collectives look names up here to check them and to learn axis
// sizes (all_gather's output shape depends on it). Thread-local, innermost frame last.
#pragma once

#include "core/array_impl.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace spmd {

struct AxisFrame {
  std::string name;
  int64_t size = 0;
  // Who bound it: vmap, pmap or shard_map, by name (collectives under vmap are batched; under
  // pmap/shard_map they run on devices).
  std::string binder;
  // Values vary over this axis by type (shard_map with check_vma): collectives and mixing
  // operands follow the varying-manual-axes rules.
  bool vma = false;
};

// Frames in scope on this thread, outermost first.
const std::vector<AxisFrame>& axis_env();
// The innermost frame named `name`, if any.
std::optional<AxisFrame> find_axis(const std::string& name);

// The union of `a` and `b`, ordered as the axes are in scope (mesh order).
std::vector<std::string> vma_union(const std::vector<std::string>& a,
                                   const std::vector<std::string>& b);
// Names in `a` not in `b`, in scope order.
std::vector<std::string> vma_minus(const std::vector<std::string>& a,
                                   const std::vector<std::string>& b);

// The spmd_axis_name of the vmaps whose batching rules run on this thread, outermost first (JAX's
// AxisEnv.spmd_axis_names): inside shard_map with check_vma, batching rules mark the values they
// batch as varying over those that are manual axes (prims/rule_util.h, spmd_names_insert_pvary).
const std::vector<std::string>& spmd_axis_names();

// The mesh axes that vmaps whose functions are traced on this thread map over because their
// arguments' batch dims are split over them (Explicit axes; JAX's
// AxisEnv.explicit_mesh_axis_names): a shard_map traced there is manual over its mesh's other axes
// only.
const std::vector<std::string>& explicit_mesh_axis_names();

// The thread-local lists of axis names above.
enum class AxisNameList { spmd, explicit_mesh };

// Adds names to one of those lists for the scope's lifetime.
class AxisNamesScope {
 public:
  AxisNamesScope(AxisNameList list, const std::vector<std::string>& names);
  ~AxisNamesScope();
  AxisNamesScope(const AxisNamesScope&) = delete;
  AxisNamesScope& operator=(const AxisNamesScope&) = delete;

 private:
  std::vector<std::string>& list_;
  size_t size_before_;
};

// The abstract mesh in context while a shard_map body is traced on this thread (JAX's
// get_abstract_mesh() there): the body's mesh, the axes it is manual over Manual; empty outside
// bodies. A jit staged in the body prints it as its ctx_mesh when it has an Explicit axis.
const std::vector<TypeSharding::Axis>& body_mesh();

// Sets body_mesh() for the scope's lifetime.
class BodyMeshScope {
 public:
  explicit BodyMeshScope(std::vector<TypeSharding::Axis> mesh);
  ~BodyMeshScope();
  BodyMeshScope(const BodyMeshScope&) = delete;
  BodyMeshScope& operator=(const BodyMeshScope&) = delete;

 private:
  std::vector<TypeSharding::Axis> previous_;
};

// Pushes frames for the scope's lifetime.
class AxisEnvScope {
 public:
  explicit AxisEnvScope(std::vector<AxisFrame> frames);
  ~AxisEnvScope();
  AxisEnvScope(const AxisEnvScope&) = delete;
  AxisEnvScope& operator=(const AxisEnvScope&) = delete;

 private:
  size_t pushed_;
};

}  // namespace spmd

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

// The abstract mesh of the shard_map body being traced on this thread, its manual axes typed
// Manual (JAX's get_abstract_mesh() there): a value staged there whose type has no mesh (made
// from constants alone: zeros, arange, random values, a closed-over array plus one) is on it,
// unsplit, and a jit staged there prints it as its ctx_mesh when it has an Explicit axis. Null
// outside bodies.
const TypeSharding* body_mesh();

// Makes `mesh` (its axes; its dims are not read) the body mesh for the scope's lifetime.
class BodyMeshScope {
 public:
  explicit BodyMeshScope(TypeSharding mesh);
  ~BodyMeshScope();
  BodyMeshScope(const BodyMeshScope&) = delete;
  BodyMeshScope& operator=(const BodyMeshScope&) = delete;

 private:
  std::optional<TypeSharding> previous_;
};

// `t` on the body mesh, unsplit, when a body is being traced and t's type has no mesh.
void on_body_mesh(AbstractValue& t);

}  // namespace spmd

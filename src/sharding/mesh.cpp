// Mesh, make_mesh and create_device_mesh: devices arranged in an N-d array with named axes.
#include <spmd/error.h>
#include <spmd/sharding.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <ostream>
#include <set>

#include "sharding/context_mesh.h"
#include "sharding/python_repr.h"

namespace spmd {
namespace {

void check_mesh(const std::vector<Device>& devices, const Shape& shape,
                const std::vector<std::string>& names) {
  if (int(names.size()) != shape.ndim())
    throw ShardingError(
        "[Mesh] Mesh requires the ndim of its first argument (`devices`) to equal the length of "
        "its second argument (`axis_names`), but got devices.ndim == " +
        std::to_string(shape.ndim()) + " and len(axis_names) == " + std::to_string(names.size()) +
        ".");
  for (int d = 0; d < shape.ndim(); ++d)
    if (shape[d] < 1)
      throw ShardingError("[Mesh] every mesh axis needs at least one device, got axis '" +
                          names[size_t(d)] + "' of size " + std::to_string(shape[d]) +
                          " in mesh shape " + shape.str());
  if (int64_t(devices.size()) != shape.size())
    throw ShardingError("[Mesh] a mesh of shape " + shape.str() + " needs " +
                        std::to_string(shape.size()) + " devices, got " +
                        std::to_string(devices.size()));
  if (std::set<std::string>(names.begin(), names.end()).size() != names.size())
    throw ShardingError("[Mesh] axis names must be unique, got " +
                        python_repr::tuple_of_names(names));
  runtime::check_devices(devices, "Mesh");
  // JAX 0.10 accepts a repeated device here and fails only when the mesh is used (a bare
  // safe_zip length error); spmd refuses it where the mistake is made.
  std::set<int> seen;
  for (const Device& d : devices)
    if (!seen.insert(d.id).second)
      throw ShardingError("[Mesh] a device may appear in a mesh only once, but " + repr(d) +
                          " appears more than once");
}

std::string types_tuple(const std::vector<AxisType>& types) {
  std::vector<std::string> names;
  for (AxisType t : types) names.emplace_back(axis_type_name(t));
  return python_repr::tuple(names);
}

void check_axis_types(const std::vector<std::string>& names, const std::vector<AxisType>& types) {
  if (types.size() != names.size())
    throw ValueError(
        "[Mesh] Number of axis names should match the number of axis_types. Got axis_names=" +
        python_repr::tuple_of_names(names) + " and axis_types=" + types_tuple(types));
}

// The first prod(shape) devices, or JAX's error naming `api`.
std::vector<Device> first_devices(const Shape& shape, const char* api) {
  // A negative dim would make the product meaningless (two of them even a right-looking one); a
  // zero is refused by Mesh, naming the axis.
  for (int64_t d : shape)
    if (d < 0)
      throw ShardingError(std::string("[") + api +
                          "] every mesh axis needs at least one device, got mesh shape " +
                          shape.str());
  std::vector<Device> all = devices();
  if (int64_t(all.size()) < shape.size())
    throw ShardingError(std::string("[") + api + "] Number of devices " +
                        std::to_string(all.size()) + " must be >= the product of mesh_shape " +
                        shape.str());
  all.resize(size_t(shape.size()));
  return all;
}

}  // namespace

DeviceMesh create_device_mesh(const Shape& mesh_shape) {
  return DeviceMesh{mesh_shape, first_devices(mesh_shape, "create_device_mesh")};
}

const char* axis_type_name(AxisType type) {
  switch (type) {
    case AxisType::Auto:
      return "Auto";
    case AxisType::Explicit:
      return "Explicit";
    case AxisType::Manual:
      return "Manual";
  }
  return "Auto";
}

Mesh::Mesh(std::vector<Device> devices, Shape shape, std::vector<std::string> axis_names,
           std::vector<AxisType> axis_types)
    : devices_(std::move(devices)),
      devices_shape_(std::move(shape)),
      axis_names_(std::move(axis_names)),
      axis_types_(std::move(axis_types)) {
  if (axis_types_.empty()) axis_types_.assign(axis_names_.size(), AxisType::Auto);
  check_axis_types(axis_names_, axis_types_);
  check_mesh(devices_, devices_shape_, axis_names_);
  for (int i = 0; i < devices_shape_.ndim(); ++i)
    shape_.emplace_back(axis_names_[size_t(i)], devices_shape_[i]);
}

Mesh::Mesh(const DeviceMesh& mesh, std::vector<std::string> axis_names,
           std::vector<AxisType> axis_types)
    : Mesh(mesh.devices, mesh.shape, std::move(axis_names), std::move(axis_types)) {}

int Mesh::axis_position(std::string_view name) const {
  auto it = std::find(axis_names_.begin(), axis_names_.end(), name);
  return it == axis_names_.end() ? -1 : int(it - axis_names_.begin());
}

int64_t Mesh::axis_size(std::string_view name) const {
  int pos = axis_position(name);
  if (pos < 0)
    throw ShardingError("[Mesh] axis name '" + std::string(name) +
                        "' is not in the mesh: " + python_repr::tuple_of_names(axis_names_));
  return devices_shape_[pos];
}

AxisType Mesh::axis_type(std::string_view name) const {
  axis_size(name);
  return axis_types_[size_t(axis_position(name))];
}

bool Mesh::has_explicit_axes() const {
  return std::find(axis_types_.begin(), axis_types_.end(), AxisType::Explicit) != axis_types_.end();
}

std::vector<int> Mesh::device_ids() const {
  std::vector<int> ids;
  for (const Device& d : devices_) ids.push_back(d.id);
  return ids;
}

std::string Mesh::repr() const {
  return "Mesh(axis_sizes=" + python_repr::tuple_of_ints(devices_shape_.dims()) +
         ", axis_names=" + python_repr::tuple_of_names(axis_names_) +
         ", axis_types=" + types_tuple(axis_types_) + ")";
}

std::string Mesh::str() const {
  if (devices_.empty()) return "Mesh()";  // JAX's empty mesh, jax.sharding.get_mesh() outside any
  std::string out = "Mesh(";
  for (const auto& [name, size] : shape_)
    out += python_repr::quoted(name) + ": " + std::to_string(size) + ", ";
  return out + "axis_types=" + types_tuple(axis_types_) + ")";
}

std::ostream& operator<<(std::ostream& os, const Mesh& mesh) {
  return os << mesh.repr();
}

Mesh make_mesh(const Shape& axis_shapes, std::vector<std::string> axis_names,
               std::vector<AxisType> axis_types) {
  if (!axis_types.empty()) check_axis_types(axis_names, axis_types);
  return Mesh(first_devices(axis_shapes, "make_mesh"), axis_shapes, std::move(axis_names),
              std::move(axis_types));
}

// ---- the mesh in context (jax.set_mesh) ---------------------------------------------------------

namespace {

struct ProcessMesh {
  std::mutex mutex;
  Mesh mesh;
  // Whether `mesh` has devices: every jit call reads the mesh in context for its cache key, and
  // without a mesh that read takes no lock.
  std::atomic<bool> set{false};
};

ProcessMesh& process_mesh() {
  static ProcessMesh* m = new ProcessMesh;  // never destroyed: threads may read it at exit
  return *m;
}

// The mesh of the calling thread's innermost use_mesh; nullopt outside any.
thread_local std::optional<Mesh> thread_mesh;

// JAX's error for a PartitionSpec given to `api` with no mesh in context.
[[noreturn]] void spec_without_mesh(const std::string& api, const std::string& what,
                                    const PartitionSpec& spec) {
  const std::string prefix = "[" + api + "] ";
  if (api == "device_put")
    throw ValueError(prefix +
                     "Please set a mesh via `jax.set_mesh` if a PartitionSpec is passed "
                     "to device_put");
  // jit names its arguments bare ("in_shardings"); with_sharding_constraint calls its own
  // "shardings" there.
  const bool jit_argument = what == "in_shardings" || what == "out_shardings";
  if (jit_argument || api == "with_sharding_constraint") {
    const std::string arg = jit_argument ? what : "shardings";
    throw RuntimeError(prefix + api +
                       " requires a non-empty mesh in context if you are passing "
                       "`PartitionSpec`s to " +
                       arg +
                       ". You can define a context mesh via `jax.set_mesh(mesh)`. Alternatively, "
                       "provide `Sharding`s to " +
                       arg + " and then the mesh context manager is not required.");
  }
  throw ValueError(prefix +
                   "Using PartitionSpec when you are not under a mesh context is not allowed. "
                   "Please pass a NamedSharding instance or enter into a mesh context via "
                   "`jax.set_mesh`. Got " +
                   spec.repr());
}

}  // namespace

void set_mesh(const Mesh& mesh) {
  ProcessMesh& m = process_mesh();
  std::lock_guard lock(m.mutex);
  m.mesh = mesh;
  m.set = mesh.size() > 0;
}

MeshScope::MeshScope(const Mesh& mesh) : previous_(thread_mesh) {
  thread_mesh = mesh;
}

MeshScope::~MeshScope() {
  thread_mesh = std::move(previous_);
}

MeshScope use_mesh(const Mesh& mesh) {
  return MeshScope(mesh);
}

Mesh get_mesh() {
  if (thread_mesh) return *thread_mesh;
  ProcessMesh& m = process_mesh();
  if (!m.set) return Mesh();
  std::lock_guard lock(m.mutex);
  return m.mesh;
}

NamedSharding over_context_mesh(const PartitionSpec& spec, const std::string& api,
                                const std::string& what) {
  const Mesh mesh = get_mesh();
  if (mesh.size() == 0) spec_without_mesh(api, what, spec);
  spec.check(mesh, api);
  return NamedSharding(mesh, spec);
}

std::optional<NamedSharding> OutSharding::resolve(std::string_view api) const {
  if (spec_) return over_context_mesh(*spec_, std::string(api), "out_sharding");
  return sharding_;
}

}  // namespace spmd

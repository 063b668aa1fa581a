// Meshes, partition specs and shardings (jax.sharding): which block of a global array each device
// holds. The geometry is computed in one place (JAX's iota tile assignment, see
// src/sharding/geometry.h); shard shapes, index maps, replica ids and the pictures derive from it.
#pragma once

#include <spmd/axis_names.h>
#include <spmd/device.h>
#include <spmd/shape.h>
#include <spmd/transforms.h>  // sp::None

#include <concepts>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace spmd {

// An N-d arrangement of devices, row-major (what mesh_utils.create_device_mesh returns).
struct DeviceMesh {
  Shape shape;
  std::vector<Device> devices;
};

// The first prod(shape) devices of sp::devices() in order, as JAX's mesh_utils does on CPU.
// Throws ShardingError when there are fewer devices.
DeviceMesh create_device_mesh(const Shape& mesh_shape);

// How the sharding over a mesh axis is decided (jax.sharding.AxisType). Auto: by the
// partitioner, from the shardings of the arguments and annotations. Explicit: by the program,
// where shardings are part of the values' types (sp::type_of, or sp::typeof in strict C++ dialects)
// and each op's rule decides its result's. Manual: by the user, inside shard_map.
enum class AxisType { Auto, Explicit, Manual };

// "Auto", "Explicit", "Manual", as JAX prints an axis type inside a mesh repr.
const char* axis_type_name(AxisType type);

// Devices arranged in an N-d array with one name per axis (jax.sharding.Mesh), each axis with its
// type (Auto unless given).
class Mesh {
 public:
  // An empty mesh (no devices, no axes): a placeholder to assign a real mesh to.
  Mesh() = default;
  // `devices` row-major with prod(shape) entries, each one of sp::devices() (else ValueError),
  // no device twice, one unique name per axis.
  // `axis_types` empty means all Auto; else one per axis.
  Mesh(std::vector<Device> devices, Shape shape, std::vector<std::string> axis_names,
       std::vector<AxisType> axis_types = {});
  Mesh(const DeviceMesh& mesh, std::vector<std::string> axis_names,
       std::vector<AxisType> axis_types = {});

  // Axis name → size, in axis order (mesh.shape).
  const std::vector<std::pair<std::string, int64_t>>& shape() const { return shape_; }
  const std::vector<std::string>& axis_names() const { return axis_names_; }
  // One per axis, in axis order.
  const std::vector<AxisType>& axis_types() const { return axis_types_; }
  // The type of axis `name`; throws ShardingError naming the mesh's axes for an unknown name.
  AxisType axis_type(std::string_view name) const;
  // Whether some axis is Explicit: values on this mesh carry their sharding in their types.
  bool has_explicit_axes() const;
  // Throws ShardingError naming the mesh's axes for an unknown name.
  int64_t axis_size(std::string_view name) const;
  // The position of `name` among the axes, or -1.
  int axis_position(std::string_view name) const;
  int64_t size() const { return int64_t(devices_.size()); }
  const std::vector<Device>& devices() const { return devices_; }  // flat, row-major
  std::vector<int> device_ids() const;
  const Shape& devices_shape() const { return devices_shape_; }

  // "Mesh(axis_sizes=(4, 2), axis_names=('x', 'y'), axis_types=(Auto, Auto))", as repr(mesh).
  std::string repr() const;
  // "Mesh('x': 4, 'y': 2, axis_types=(Explicit, Auto))", as str(mesh) and inside
  // NamedSharding's repr.
  std::string str() const;
  // Meshes whose axes differ only in type are different meshes, as in JAX.
  bool operator==(const Mesh& o) const {
    return devices_ == o.devices_ && devices_shape_ == o.devices_shape_ &&
           axis_names_ == o.axis_names_ && axis_types_ == o.axis_types_;
  }

 private:
  std::vector<Device> devices_;
  Shape devices_shape_;
  std::vector<std::string> axis_names_;
  std::vector<AxisType> axis_types_;
  std::vector<std::pair<std::string, int64_t>> shape_;
};

std::ostream& operator<<(std::ostream& os, const Mesh& mesh);

// jax.make_mesh on CPU: the first prod(axis_shapes) devices, row-major. Throws ShardingError
// ("Number of devices 1 must be >= the product of mesh_shape (4, 2)") when there are fewer.
// Axes are Auto unless `axis_types` gives one type per axis (JAX 0.10's make_mesh defaults to
// Explicit; spmd keeps Auto, the mode its programs were written for).
Mesh make_mesh(const Shape& axis_shapes, std::vector<std::string> axis_names,
               std::vector<AxisType> axis_types = {});

// The mesh in context (jax.set_mesh). Where a Sharding is expected (device_put,
// with_sharding_constraint, jit's in_shardings and out_shardings, reshard, auto_axes,
// explicit_axes), a PartitionSpec then means NamedSharding(mesh, spec); without a mesh it raises
// JAX's error for that API. set_mesh sets the mesh for every thread (an empty Mesh() unsets it);
// use_mesh sets it for the calling thread while the returned scope lives, as
// `with jax.set_mesh(mesh):` does, and scopes nest:
//   auto scope = sp::use_mesh(mesh);
//   Array y = sp::device_put(x, P("a"));  // NamedSharding(mesh, P("a"))
void set_mesh(const Mesh& mesh);
class [[nodiscard]] MeshScope {
 public:
  explicit MeshScope(const Mesh& mesh);
  ~MeshScope();
  MeshScope(const MeshScope&) = delete;
  MeshScope& operator=(const MeshScope&) = delete;

 private:
  std::optional<Mesh> previous_;
};
MeshScope use_mesh(const Mesh& mesh);
// The mesh in context: the calling thread's innermost use_mesh, else set_mesh's, else an empty
// Mesh() (jax.sharding.get_mesh).
Mesh get_mesh();

// JAX's PartitionSpec.UNCONSTRAINED, spelled sp::P::UNCONSTRAINED: a dim a sharding constraint
// leaves open, to be split as propagation decides (`{?}` in StableHLO).
struct UnconstrainedAxis {
  bool operator==(const UnconstrainedAxis&) const = default;
};

// What P(...) takes for one dim: an axis name, sp::axes(...), sp::None or P::UNCONSTRAINED.
template <class E>
concept PartitionSpecEntry =
    std::convertible_to<const E&, AxisNames> || std::same_as<std::remove_cvref_t<E>, NoneAxis> ||
    std::same_as<std::remove_cvref_t<E>, UnconstrainedAxis>;

// How each array dim is split over mesh axes (jax.sharding.PartitionSpec): per dim, None (not
// split), one axis name, or several (major to minor). Missing trailing entries mean None, and mesh
// axes the spec does not mention hold replicas. P() is fully replicated. A dim may be
// P::UNCONSTRAINED, accepted by with_sharding_constraint only, where propagation decides its
// split inside jit; device_put, jit's in/out_shardings, shard_map's specs and an op's
// out_sharding refuse it with JAX's errors.
class PartitionSpec {
 public:
  // nullopt is None. A tuple of one name is stored as that name and an empty tuple as None,
  // as JAX canonicalises them.
  using Entry = std::optional<AxisNames>;
  static constexpr UnconstrainedAxis UNCONSTRAINED{};

  PartitionSpec() = default;
  explicit PartitionSpec(std::vector<Entry> entries);
  // `entries` with the dims `unconstrained` marks (one flag per entry, or empty) left open; their
  // entries must be None.
  PartitionSpec(std::vector<Entry> entries, std::vector<bool> unconstrained);
  // P("x", sp::None, sp::axes("a", "b")), P(P::UNCONSTRAINED, "b").
  template <PartitionSpecEntry First, PartitionSpecEntry... Rest>
  explicit PartitionSpec(const First& first, const Rest&... rest)
      : PartitionSpec(std::vector<Entry>{to_entry(first), to_entry(rest)...},
                      std::vector<bool>{is_open(first), is_open(rest)...}) {}

  int size() const { return int(entries_.size()); }
  const std::vector<Entry>& entries() const { return entries_; }
  // The entry for array dim `d`; None past the end.
  Entry operator[](int d) const;
  // The mesh axes that split dim `d`, major first (empty for None, UNCONSTRAINED or past the
  // end).
  std::vector<std::string> axes_of(int d) const;
  // Whether dim `d` is P::UNCONSTRAINED.
  bool is_unconstrained(int d) const;
  bool has_unconstrained() const { return !unconstrained_.empty(); }
  // One flag per entry (empty when no dim is UNCONSTRAINED).
  const std::vector<bool>& unconstrained() const { return unconstrained_; }

  // Duplicate or unknown mesh axes throw ShardingError "[api] " + JAX's message.
  void check(const Mesh& mesh, std::string_view api = "NamedSharding") const;
  // An axis splitting two dims throws check's ShardingError (JAX's DuplicateSpecError).
  void check_unique(std::string_view api) const;

  // "P('x', None)", "P(('x', 'y'),)", "P()", "P(UNCONSTRAINED, 'b')", as JAX 0.10 prints a
  // PartitionSpec.
  std::string repr() const;
  bool operator==(const PartitionSpec& o) const = default;

 private:
  static Entry to_entry(NoneAxis) { return std::nullopt; }
  static Entry to_entry(UnconstrainedAxis) { return std::nullopt; }
  static Entry to_entry(const AxisNames& names) { return names; }
  template <class E>
  static bool is_open(const E&) {
    return std::same_as<E, UnconstrainedAxis>;
  }

  std::vector<Entry> entries_;
  std::vector<bool> unconstrained_;
};
using P = PartitionSpec;

std::ostream& operator<<(std::ostream& os, const PartitionSpec& spec);

// Half-open range [start, stop) of one array dim.
struct Slice {
  int64_t start = 0;
  int64_t stop = 0;
  bool operator==(const Slice&) const = default;
};

// One device's block of a global array: its index (one Slice per dim) and replica id (0 for the
// first device holding that block, 1 for the next, ...).
struct ShardSlot {
  Device device;
  std::vector<Slice> index;
  int replica_id = 0;
};

// Where the blocks of an array live (jax.sharding.Sharding). Arrays hold
// std::shared_ptr<const Sharding>.
class Sharding {
 public:
  virtual ~Sharding() = default;

  // The devices in the sharding's own order (mesh order for NamedSharding).
  virtual const std::vector<Device>& device_list() const = 0;
  // Every device's block of a `global`-shaped array, in device_list() order. Throws ShardingError
  // (see check_shape) when the shape does not fit.
  virtual std::vector<ShardSlot> layout(const Shape& global) const = 0;
  virtual bool is_fully_replicated() const = 0;
  virtual std::string repr() const = 0;
  virtual bool equals(const Sharding& other) const = 0;

  // Throws ShardingError "[api] " + JAX's message when an array of shape `global` cannot have
  // this sharding (spec longer than the rank, dims not divisible by their mesh axes).
  void check_shape(const Shape& global, std::string_view api) const;

  // The devices sorted by id (JAX's device_set).
  std::vector<Device> device_set() const;
  int num_devices() const { return int(device_list().size()); }
  Shape shard_shape(const Shape& global) const;
  // Each device's index, in device_list() order (the order of JAX's dict).
  std::vector<std::pair<Device, std::vector<Slice>>> devices_indices_map(const Shape& global) const;

 protected:
  // The message check_shape reports, without the API prefix; nullopt if the shape fits.
  virtual std::optional<std::string> shape_error(const Shape& global) const = 0;
};

// Equal when both put every block on the same devices: same kind, mesh (devices in order, axis
// names) and spec up to trailing Nones. Python's == on NamedSharding is stricter about trailing
// Nones; this is the comparison that decides whether data has to move.
bool operator==(const Sharding& a, const Sharding& b);
std::ostream& operator<<(std::ostream& os, const Sharding& sharding);

// A spec over a mesh (jax.sharding.NamedSharding). The constructor checks the spec's axes.
class NamedSharding : public Sharding {
 public:
  NamedSharding(Mesh mesh, PartitionSpec spec);

  const Mesh& mesh() const { return mesh_; }
  const PartitionSpec& spec() const { return spec_; }

  const std::vector<Device>& device_list() const override { return mesh_.devices(); }
  std::vector<ShardSlot> layout(const Shape& global) const override;
  bool is_fully_replicated() const override;
  // "NamedSharding(mesh=Mesh('x': 4, 'y': 2, axis_types=(Auto, Auto)), spec=P('x',),
  // memory_kind=device)"
  std::string repr() const override;
  bool equals(const Sharding& other) const override;

 protected:
  std::optional<std::string> shape_error(const Shape& global) const override;

 private:
  Mesh mesh_;
  PartitionSpec spec_;
  // The last layout computed and its global shape: every launch of a program asks for the same
  // ones. Shared by copies, which have the same mesh and spec.
  struct Memo;
  std::shared_ptr<Memo> memo_;
};

// An op's out_sharding argument (JAX's keyword of dot, matmul, einsum, reshape, ...): none, a
// NamedSharding, or a PartitionSpec over the mesh in context (sp::use_mesh), read when the op
// runs: sp::matmul(a, b, P("x")).
class OutSharding {
 public:
  OutSharding() = default;
  OutSharding(std::nullopt_t) {}
  OutSharding(const NamedSharding& sharding) : sharding_(sharding) {}
  OutSharding(const std::optional<NamedSharding>& sharding) : sharding_(sharding) {}
  OutSharding(const PartitionSpec& spec) : spec_(spec) {}

  // The sharding, or nullopt for none. A PartitionSpec with no mesh in context raises JAX's
  // ValueError "[api] Using PartitionSpec when you are not under a mesh context is not
  // allowed. ..."; one naming axes the mesh lacks, ShardingError.
  std::optional<NamedSharding> resolve(std::string_view api) const;

 private:
  std::optional<NamedSharding> sharding_;
  std::optional<PartitionSpec> spec_;
};

// The whole array on one device (jax.sharding.SingleDeviceSharding).
class SingleDeviceSharding : public Sharding {
 public:
  // Throws ValueError for a device that is not one of devices().
  explicit SingleDeviceSharding(Device device);

  const Device& device() const { return devices_[0]; }
  const std::vector<Device>& device_list() const override { return devices_; }
  std::vector<ShardSlot> layout(const Shape& global) const override;
  bool is_fully_replicated() const override { return true; }
  // "SingleDeviceSharding(device=CpuDevice(id=0), memory_kind=device)"
  std::string repr() const override;
  bool equals(const Sharding& other) const override;

 protected:
  std::optional<std::string> shape_error(const Shape&) const override { return std::nullopt; }

 private:
  std::vector<Device> devices_;
};

struct VisualizeOptions {
  double scale = 1.0;
  int min_width = 9;
  int max_width = 80;
  // Background colours instead of borders. Unset: visualize_sharding colours when stdout is a
  // terminal; sharding_to_string never does.
  std::optional<bool> use_color = {};
  // The two dims to draw for arrays of rank > 2 (the other dims are folded in).
  std::optional<std::pair<int, int>> dims = {};
};

// The picture jax.debug.visualize_sharding prints: one cell per distinct block, labelled with the
// platform and the ids of the devices holding it ("CPU 0,1"). Without colour, the text equals
// JAX's byte for byte. Rank other than 1 and 2 throws ShardingError unless `dims` names two dims.
std::string sharding_to_string(const Shape& shape, const Sharding& sharding,
                               const VisualizeOptions& options = {});
// Prints sharding_to_string to stdout.
void visualize_sharding(const Shape& shape, const Sharding& sharding,
                        const VisualizeOptions& options = {});

}  // namespace spmd

// Sharding's derived queries, NamedSharding and SingleDeviceSharding. Geometry comes from
// geometry.cpp only.
#include <spmd/error.h>
#include <spmd/sharding.h>

#include <algorithm>
#include <mutex>
#include <ostream>

#include "sharding/geometry.h"
#include "sharding/python_repr.h"

namespace spmd {

namespace {

// JAX's check of an array type's sharding (core._check_divisibility): on a mesh with Explicit
// axes, the type keeps each dim's Explicit axes only (all of them when every axis is Explicit)
// and their product must divide the dim. Its text names the type's sharding, an AbstractMesh.
std::optional<std::string> explicit_divisibility_error(const Mesh& mesh, const PartitionSpec& spec,
                                                       const Shape& global) {
  if (!mesh.has_explicit_axes()) return std::nullopt;
  const int rank = global.ndim();
  std::vector<PartitionSpec::Entry> kept(static_cast<size_t>(rank));
  std::optional<std::string> error;
  for (int d = 0; d < rank && d < spec.size(); ++d) {
    std::vector<std::string> axes;
    for (const std::string& a : spec.axes_of(d))
      if (mesh.axis_type(a) == AxisType::Explicit) axes.push_back(a);
    if (axes.empty()) continue;
    int64_t parts = 1;
    for (const std::string& a : axes) parts *= mesh.axis_size(a);
    kept[size_t(d)] = axes.size() == 1 ? AxisNames(axes[0]) : AxisNames(axes);
    if (!error && global[d] % parts != 0)
      error = "Sharding spec " + python_repr::tuple_of_names(axes) + " implies that array axis " +
              std::to_string(d) + " is partitioned " + std::to_string(parts) +
              " times, but does not evenly divide the dimension size " +
              std::to_string(global[d]) + ". Got shape: " + global.str() + " and sharding ";
  }
  if (!error) return std::nullopt;
  const std::string mesh_str = mesh.str();  // Mesh('a': 4, ..., axis_types=(...))
  return *error + "NamedSharding(mesh=Abstract" + mesh_str.substr(0, mesh_str.size() - 1) +
         ", device_kind=cpu, num_cores=None, platform=cpu), spec=" +
         PartitionSpec(std::move(kept)).repr() + ")";
}

}  // namespace

void Sharding::check_shape(const Shape& global, std::string_view api) const {
  if (auto message = shape_error(global))
    throw ShardingError("[" + std::string(api) + "] " + *message);
}

std::vector<Device> Sharding::device_set() const {
  std::vector<Device> out = device_list();
  std::sort(out.begin(), out.end());
  return out;
}

Shape Sharding::shard_shape(const Shape& global) const {
  std::vector<ShardSlot> slots = layout(global);
  Shape out;
  for (const Slice& s : slots.front().index) out.push_back(s.stop - s.start);
  return out;
}

std::vector<std::pair<Device, std::vector<Slice>>> Sharding::devices_indices_map(
    const Shape& global) const {
  std::vector<std::pair<Device, std::vector<Slice>>> out;
  for (ShardSlot& slot : layout(global)) out.emplace_back(slot.device, std::move(slot.index));
  return out;
}

bool operator==(const Sharding& a, const Sharding& b) {
  return a.equals(b);
}

std::ostream& operator<<(std::ostream& os, const Sharding& sharding) {
  return os << sharding.repr();
}

struct NamedSharding::Memo {
  std::mutex mu;
  std::optional<Shape> shape;  // set once `layout` is that shape's
  std::vector<ShardSlot> layout;
};

NamedSharding::NamedSharding(Mesh mesh, PartitionSpec spec)
    : mesh_(std::move(mesh)), spec_(std::move(spec)), memo_(std::make_shared<Memo>()) {
  // An empty Mesh() is a placeholder (get_mesh() outside any mesh): no device can hold a block.
  if (mesh_.devices().empty())
    throw ShardingError("[NamedSharding] NamedSharding requires a non-empty mesh. Got " +
                        mesh_.str());
  spec_.check(mesh_);
}

std::optional<std::string> NamedSharding::shape_error(const Shape& global) const {
  if (memo_) {
    std::lock_guard lock(memo_->mu);
    if (memo_->shape == global) return std::nullopt;  // a shape laid out before fits
  }
  const int rank = global.ndim();
  if (spec_.size() > rank)
    return "Sharding " + repr() + " is only valid for values of rank at least " +
           std::to_string(spec_.size()) + ", but was applied to a value of rank " +
           std::to_string(rank) + "." +
           (rank == 0 ? " For scalars the PartitionSpec should be P()" : "");
  if (auto type_error = explicit_divisibility_error(mesh_, spec_, global)) return type_error;
  std::vector<int64_t> tiles = tile_assignment(mesh_, spec_, rank).tiles;
  for (int d = 0; d < rank; ++d) {
    if (global[d] % tiles[size_t(d)] == 0) continue;
    std::string factors;
    for (size_t i = 0; i < tiles.size(); ++i) factors += (i ? ", " : "") + std::to_string(tiles[i]);
    return "Sharding " + repr() + " implies that array axis " + std::to_string(d) +
           " is partitioned " + std::to_string(tiles[size_t(d)]) +
           " times, but the dimension size is " + std::to_string(global[d]) +
           " (full shape: " + global.str() + ", per-dimension tiling factors: [" + factors +
           "] should evenly divide the shape)";
  }
  return std::nullopt;
}

std::vector<ShardSlot> NamedSharding::layout(const Shape& global) const {
  if (memo_) {
    std::lock_guard lock(memo_->mu);
    if (memo_->shape == global) return memo_->layout;
  }
  check_shape(global, "NamedSharding");
  std::vector<ShardSlot> made = tile_layout(mesh_, spec_, global);
  if (!memo_) return made;  // a moved-from sharding
  std::lock_guard lock(memo_->mu);
  memo_->shape = global;
  memo_->layout = made;
  return made;
}

bool NamedSharding::is_fully_replicated() const {
  return tile_assignment(mesh_, spec_, spec_.size()).replication == mesh_.size();
}

std::string NamedSharding::repr() const {
  return "NamedSharding(mesh=" + mesh_.str() + ", spec=" + spec_.repr() + ", memory_kind=device)";
}

// Trailing Nones do not change a sharding: P('x') and P('x', None) are equal.
static bool same_entries(const PartitionSpec& a, const PartitionSpec& b) {
  static const PartitionSpec::Entry none;
  const std::vector<PartitionSpec::Entry>&x = a.entries(), &y = b.entries();
  for (size_t i = 0; i < std::max(x.size(), y.size()); ++i)
    if ((i < x.size() ? x[i] : none) != (i < y.size() ? y[i] : none)) return false;
  return true;
}

bool NamedSharding::equals(const Sharding& other) const {
  if (this == &other) return true;
  auto* o = dynamic_cast<const NamedSharding*>(&other);
  return o && mesh_ == o->mesh_ && same_entries(spec_, o->spec_);
}

SingleDeviceSharding::SingleDeviceSharding(Device device) : devices_{std::move(device)} {
  runtime::check_devices(devices_, "SingleDeviceSharding");
}

std::vector<ShardSlot> SingleDeviceSharding::layout(const Shape& global) const {
  ShardSlot slot{devices_[0], {}, 0};
  for (int64_t n : global) slot.index.push_back(Slice{0, n});
  return {slot};
}

std::string SingleDeviceSharding::repr() const {
  return "SingleDeviceSharding(device=" + spmd::repr(devices_[0]) + ", memory_kind=device)";
}

bool SingleDeviceSharding::equals(const Sharding& other) const {
  auto* o = dynamic_cast<const SingleDeviceSharding*>(&other);
  return o && o->device() == device();
}

}  // namespace spmd

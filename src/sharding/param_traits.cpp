// Meshes and partition specs as primitive parameters.
#include "sharding/param_traits.h"

#include "sharding/python_repr.h"

#include <functional>

namespace spmd {

namespace {
void hash_names(size_t& h, const std::vector<std::string>& names) {
  hash_combine(h, names.size());
  for (const std::string& n : names) hash_combine(h, std::hash<std::string>{}(n));
}
}  // namespace

size_t hash_mesh(const Mesh& mesh) {
  size_t h = 0;
  for (const Device& d : mesh.devices()) hash_combine(h, std::hash<int>{}(d.id));
  for (int64_t n : mesh.devices_shape().dims()) hash_combine(h, std::hash<int64_t>{}(n));
  hash_names(h, mesh.axis_names());
  for (AxisType t : mesh.axis_types()) hash_combine(h, size_t(t));
  return h;
}

size_t hash_spec(const PartitionSpec& spec) {
  size_t h = size_t(spec.size());
  for (const PartitionSpec::Entry& e : spec.entries()) {
    hash_combine(h, e ? size_t(e->is_tuple()) + 1 : 0);
    if (e) hash_names(h, e->names());
  }
  for (int d = 0; d < spec.size(); ++d) hash_combine(h, size_t(spec.is_unconstrained(d)));
  return h;
}

std::string ParamTraits<std::vector<PartitionSpec>>::str(const std::vector<PartitionSpec>& specs) {
  std::vector<std::string> items;
  for (const PartitionSpec& s : specs) items.push_back(s.repr());
  return python_repr::tuple(items);
}

size_t ParamTraits<std::vector<PartitionSpec>>::hash(const std::vector<PartitionSpec>& specs) {
  size_t h = specs.size();
  for (const PartitionSpec& s : specs) hash_combine(h, hash_spec(s));
  return h;
}

size_t ParamTraits<std::shared_ptr<const Sharding>>::hash(
    const std::shared_ptr<const Sharding>& sharding) {
  size_t h = 0;
  for (const Device& d : sharding->device_list()) hash_combine(h, std::hash<int>{}(d.id));
  if (auto* named = dynamic_cast<const NamedSharding*>(sharding.get()))
    hash_combine(h, hash_spec(named->spec()));
  return h;
}

bool ShardingList::any() const {
  for (const auto& s : items)
    if (s) return true;
  return false;
}

std::string ParamTraits<ShardingList>::str(const ShardingList& list) {
  std::vector<std::string> items;
  for (size_t i = 0; i < list.items.size(); ++i) {
    const auto& s = list.items[i];
    const bool device = i < list.as_device.size() && list.as_device[i];
    items.push_back(!s ? list.absent : device ? repr(s->device_list().front()) : s->repr());
  }
  return python_repr::tuple(items);
}

size_t ParamTraits<ShardingList>::hash(const ShardingList& list) {
  size_t h = list.items.size();
  for (const auto& s : list.items)
    hash_combine(h, s ? ParamTraits<std::shared_ptr<const Sharding>>::hash(s) : 0);
  return h;
}

bool ParamTraits<ShardingList>::equal(const ShardingList& a, const ShardingList& b) {
  if (a.items.size() != b.items.size() || a.absent != b.absent || a.as_device != b.as_device)
    return false;
  for (size_t i = 0; i < a.items.size(); ++i) {
    const auto &x = a.items[i], &y = b.items[i];
    if (!x != !y || (x && !ParamTraits<std::shared_ptr<const Sharding>>::equal(x, y))) return false;
  }
  return true;
}

std::string ParamTraits<std::set<int64_t>>::str(const std::set<int64_t>& dims) {
  std::string out;
  for (int64_t d : dims) out += (out.empty() ? "" : ", ") + std::to_string(d);
  return "frozenset({" + out + "})";
}

size_t ParamTraits<std::set<int64_t>>::hash(const std::set<int64_t>& dims) {
  size_t h = dims.size();
  for (int64_t d : dims) hash_combine(h, std::hash<int64_t>{}(d));
  return h;
}

}  // namespace spmd

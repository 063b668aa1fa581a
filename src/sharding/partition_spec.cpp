// PartitionSpec: canonical entries, Python-style repr and the checks against a mesh.
#include <spmd/error.h>
#include <spmd/sharding.h>

#include <algorithm>
#include <map>
#include <ostream>

#include "sharding/python_repr.h"

namespace spmd {

PartitionSpec::PartitionSpec(std::vector<Entry> entries) : entries_(std::move(entries)) {
  // JAX treats ('x',) as 'x' and () as None; canonical entries make equal specs compare equal.
  for (Entry& e : entries_) {
    if (!e) continue;
    if (e->empty())
      e.reset();
    else if (e->size() == 1 && e->is_tuple())
      e = AxisNames(e->names()[0]);
  }
}

PartitionSpec::PartitionSpec(std::vector<Entry> entries, std::vector<bool> unconstrained)
    : PartitionSpec(std::move(entries)) {
  unconstrained.resize(entries_.size());
  for (size_t d = 0; d < unconstrained.size(); ++d)
    if (unconstrained[d] && entries_[d])
      throw ValueError("[PartitionSpec] an UNCONSTRAINED dim names no mesh axes, got " +
                       entries_[d]->repr() + " at dim " + std::to_string(d));
  if (std::find(unconstrained.begin(), unconstrained.end(), true) != unconstrained.end())
    unconstrained_ = std::move(unconstrained);
}

bool PartitionSpec::is_unconstrained(int d) const {
  return d >= 0 && d < int(unconstrained_.size()) && unconstrained_[size_t(d)];
}

PartitionSpec::Entry PartitionSpec::operator[](int d) const {
  if (d < 0 || d >= size()) return std::nullopt;
  return entries_[size_t(d)];
}

std::vector<std::string> PartitionSpec::axes_of(int d) const {
  Entry e = (*this)[d];
  return e ? e->names() : std::vector<std::string>{};
}

namespace {

// The mesh axes the spec names, in order of first use, and how often each is named.
std::vector<std::string> named_axes(const PartitionSpec& spec, std::map<std::string, int>* uses) {
  std::vector<std::string> order;
  for (int d = 0; d < spec.size(); ++d)
    for (const std::string& name : spec.axes_of(d))
      if ((*uses)[name]++ == 0) order.push_back(name);
  return order;
}

}  // namespace

void PartitionSpec::check_unique(std::string_view api) const {
  std::map<std::string, int> uses;
  std::string duplicates;
  for (const std::string& name : named_axes(*this, &uses))
    if (uses[name] > 1) duplicates += (duplicates.empty() ? "`" : ", `") + name + "`";
  if (!duplicates.empty())
    throw ShardingError("[" + std::string(api) +
                        "] A single NamedSharding spec specification can map every mesh axis to "
                        "at most one positional dimension, but " +
                        repr() + " has duplicate entries for " + duplicates);
}

void PartitionSpec::check(const Mesh& mesh, std::string_view api) const {
  check_unique(api);
  std::map<std::string, int> uses;
  for (const std::string& name : named_axes(*this, &uses))
    if (mesh.axis_position(name) < 0)
      throw ShardingError(
          "[" + std::string(api) + "] Resource axis: " + name + " of " + repr() +
          " is not found in mesh: " + python_repr::tuple_of_names(mesh.axis_names()) + ".");
  const std::vector<AxisType>& types = mesh.axis_types();
  if (has_unconstrained() && !types.empty() &&
      std::find(types.begin(), types.end(), AxisType::Auto) == types.end()) {
    std::vector<std::string> names;
    for (AxisType t : types) names.push_back(axis_type_name(t));
    throw ShardingError("[" + std::string(api) + "] " + repr() +
                        " cannot contain `P.UNCONSTRAINED` when no mesh axis_types are `Auto`. "
                        "Got mesh axis_types: " +
                        python_repr::tuple(names));
  }
}

std::string PartitionSpec::repr() const {
  std::vector<std::string> items;
  for (int d = 0; d < size(); ++d) {
    const Entry& e = entries_[size_t(d)];
    items.push_back(e ? e->repr() : is_unconstrained(d) ? "UNCONSTRAINED" : "None");
  }
  std::string t = python_repr::tuple(items);
  return "P" + t;
}

std::ostream& operator<<(std::ostream& os, const PartitionSpec& spec) {
  return os << spec.repr();
}

}  // namespace spmd

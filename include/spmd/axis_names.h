// Names of mapped axes: one name ("i") or a tuple of names (sp::axes("rows", "cols")), accepted
// wherever JAX accepts an axis name or a tuple of them.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <vector>

namespace spmd {

class AxisNames {
 public:
  AxisNames() = default;
  // A null pointer throws ValueError: no axis is written sp::None (in a PartitionSpec).
  AxisNames(const char* name);
  // nullptr is not a name; in P(...) write sp::None for a dim that is not split.
  AxisNames(std::nullptr_t) = delete;
  AxisNames(std::string name) : names_{std::move(name)} {}
  AxisNames(std::vector<std::string> names, bool is_tuple = true)
      : names_(std::move(names)), tuple_(is_tuple) {}

  const std::vector<std::string>& names() const { return names_; }
  size_t size() const { return names_.size(); }
  bool empty() const { return names_.empty(); }
  // Written as a tuple (axes(...)), even of one name: prints as ('a',) the way Python does.
  bool is_tuple() const { return tuple_; }
  bool operator==(const AxisNames&) const = default;
  // Python's repr: 'i' or ('rows', 'cols').
  std::string repr() const;

 private:
  std::vector<std::string> names_;
  bool tuple_ = false;
};

// A tuple of axis names, major to minor: sp::axes("rows", "cols").
template <class... S>
AxisNames axes(const S&... names) {
  return AxisNames(std::vector<std::string>{std::string(names)...}, true);
}

}  // namespace spmd

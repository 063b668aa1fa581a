// Python's repr of the small values sharding objects print: strings, tuples of ints and strings.
// Shared by the reprs of AxisNames, Mesh, PartitionSpec and NamedSharding.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace spmd::python_repr {

// 'x' (double quotes when the string holds a single quote and no double quote, as Python).
inline std::string quoted(const std::string& s) {
  char q = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    if (c == q || c == '\\') out += '\\';
    out += c;
  }
  return out + q;
}

// A tuple of already formatted items: (a, b), (a,), ().
inline std::string tuple(const std::vector<std::string>& items) {
  std::string out = "(";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out + (items.size() == 1 ? ",)" : ")");
}

inline std::string tuple_of_names(const std::vector<std::string>& names) {
  std::vector<std::string> items;
  for (const auto& n : names) items.push_back(quoted(n));
  return tuple(items);
}

inline std::string tuple_of_ints(const std::vector<int64_t>& values) {
  std::vector<std::string> items;
  for (int64_t v : values) items.push_back(std::to_string(v));
  return tuple(items);
}

}  // namespace spmd::python_repr

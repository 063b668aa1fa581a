// An insertion-ordered map from names to values: Python's collections.OrderedDict, the type of
// torch's state_dict. As a tree node (spmd/tree.h) its children flatten in insertion order.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace spmd {

namespace ordered_dict_detail {
// KeyError "[OrderedDict] no key 'k'; keys are 'a', 'b'" (one definition, in core/tree.cpp).
[[noreturn]] void throw_missing_key(std::string_view key, const std::vector<std::string>& keys);
}  // namespace ordered_dict_detail

template <class V>
class OrderedDict {
 public:
  using value_type = std::pair<std::string, V>;
  using mapped_type = V;
  using iterator = typename std::vector<value_type>::iterator;
  using const_iterator = typename std::vector<value_type>::const_iterator;

  OrderedDict() = default;
  OrderedDict(std::initializer_list<value_type> items) {
    for (const value_type& item : items) insert(item.first, item.second);
  }

  // Adds `key` at the end, or replaces its value where it is (as Python's d[key] = value).
  V& insert(const std::string& key, V value) {
    auto [it, added] = index_.try_emplace(key, items_.size());
    if (added) return items_.emplace_back(key, std::move(value)).second;
    return items_[it->second].second = std::move(value);
  }
  // The value of `key`, added at the end (value-initialised) when absent.
  V& operator[](const std::string& key) {
    auto it = index_.find(key);
    return it == index_.end() ? insert(key, V{}) : items_[it->second].second;
  }
  // Raises KeyError naming the keys when `key` is absent.
  const V& at(std::string_view key) const { return items_[position(key)].second; }
  V& at(std::string_view key) { return items_[position(key)].second; }
  bool contains(std::string_view key) const { return index_.contains(std::string(key)); }

  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    out.reserve(items_.size());
    for (const value_type& item : items_) out.push_back(item.first);
    return out;
  }

  iterator begin() { return items_.begin(); }
  iterator end() { return items_.end(); }
  const_iterator begin() const { return items_.begin(); }
  const_iterator end() const { return items_.end(); }

  // Same keys in the same order with equal values (Python's OrderedDict equality).
  bool operator==(const OrderedDict& other) const { return items_ == other.items_; }

 private:
  size_t position(std::string_view key) const {
    auto it = index_.find(std::string(key));
    if (it == index_.end()) ordered_dict_detail::throw_missing_key(key, keys());
    return it->second;
  }

  std::vector<value_type> items_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace spmd

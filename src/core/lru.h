// LruCache: at most a given number of entries, dropping the least recently used one when a new
// entry would exceed it, as JAX's in-memory caches do (jax._src.util's lru_cache and
// weakref_lru_cache, jaxlib's PjitFunctionCache). Entries are found by a hash and a predicate, so
// a lookup can compare against the caller's own values without building a key. A plain
// container, so that the kernels may use it too (the compile caches around it are in
// core/lru_cache.h).
#pragma once

#include <spmd/config.h>

#include <cstddef>
#include <iterator>
#include <list>
#include <unordered_map>
#include <utility>

namespace spmd {

// Entries of type E, most recently used first. Not synchronised: callers lock as they need.
template <class E>
class LruCache {
 public:
  // The entry with hash `h` that `matches` accepts, made the most recently used; null if none.
  template <class Match>
  E* find(size_t h, Match&& matches) {
    auto [first, last] = index_.equal_range(h);
    for (auto it = first; it != last; ++it)
      if (matches(static_cast<const E&>(it->second->second))) {
        order_.splice(order_.begin(), order_, it->second);
        return &it->second->second;
      }
    return nullptr;
  }

  // Adds `entry` under hash `h` as the most recently used one, then drops the least recently used
  // ones beyond `capacity` (at least the new one stays).
  E& insert(size_t h, E entry, size_t capacity = config::compile_cache_size()) {
    order_.emplace_front(h, std::move(entry));
    index_.emplace(h, order_.begin());
    while (order_.size() > capacity && order_.size() > 1) evict_oldest();
    return order_.front().second;
  }

  // Drops the entries `dead` accepts.
  template <class Dead>
  void erase_if(Dead&& dead) {
    for (auto it = order_.begin(); it != order_.end();)
      it = dead(static_cast<const E&>(it->second)) ? erase(it) : std::next(it);
  }

  // Calls `visit` on each entry, most recently used first, leaving the order as it is.
  template <class Visit>
  void for_each(Visit&& visit) const {
    for (const auto& [h, entry] : order_) visit(entry);
  }

  size_t size() const { return order_.size(); }
  void clear() {
    index_.clear();
    order_.clear();
  }

 private:
  using Order = std::list<std::pair<size_t, E>>;

  using Iterator = typename Order::iterator;

  Iterator erase(Iterator entry) {
    auto [first, last] = index_.equal_range(entry->first);
    for (auto it = first; it != last; ++it)
      if (it->second == entry) {
        index_.erase(it);
        break;
      }
    return order_.erase(entry);
  }
  void evict_oldest() { erase(std::prev(order_.end())); }

  Order order_;
  std::unordered_multimap<size_t, Iterator> index_;
};

}  // namespace spmd

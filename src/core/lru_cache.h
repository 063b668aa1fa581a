// Bounded caches. LruCache keeps at most a given number of entries, dropping the least recently
// used one when a new entry would exceed it, as JAX's in-memory caches do (jax._src.util's
// lru_cache and weakref_lru_cache, jaxlib's PjitFunctionCache). Entries are found by a hash and a
// predicate, so a lookup can compare against the caller's own values without building a key.
//
// The process's compile caches register themselves (register_cache) so that clear_caches() can
// empty them and cache_sizes() count them; caches held per thread or per object compare a
// generation (cache_generation) with the one they were filled at and start afresh when
// clear_caches() advanced it.
#pragma once

#include <spmd/config.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <optional>
#include <string>
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

// Registers a process-wide cache under `name`: how many entries it holds and how to empty it
// (each takes the cache's own lock). Caches register once, on first use.
void register_cache(std::string name, std::function<size_t()> size, std::function<void()> clear);

// Advanced by clear_caches(): a cache kept per thread or per object that was filled at an older
// generation starts afresh.
uint64_t cache_generation();

// A process-wide LruCache of values by key under a lock, registered under its name, holding
// `capacity` entries (0: config::compile_cache_size()). Make it once and never destroy it (device
// threads may still run what it holds at exit).
template <class Key, class Value>
class SharedLruCache {
 public:
  explicit SharedLruCache(std::string name, size_t capacity = 0) : capacity_(capacity) {
    register_cache(
        std::move(name),
        [this] {
          std::lock_guard lock(mu_);
          return cache_.size();
        },
        [this] {
          LruCache<Entry> dropped;  // destroyed outside the lock
          std::lock_guard lock(mu_);
          std::swap(dropped, cache_);
        });
  }

  // The value cached for `key` (of hash `h`, compared by `equal`), else make()'s, then cached.
  // make() runs under the lock, so each key is made once; if it throws nothing is cached.
  template <class Equal, class Make>
  Value get_or_make(const Key& key, size_t h, Equal&& equal, Make&& make) {
    std::lock_guard lock(mu_);
    if (Entry* hit = cache_.find(h, [&](const Entry& e) { return equal(e.key, key); }))
      return hit->value;
    return cache_.insert(h, Entry{key, make()}, capacity()).value;
  }

  // The value cached under hash `h` for the key `matches` accepts, made the most recently used;
  // nullopt if none. Entries whose key `dead` accepts are dropped first.
  template <class Match, class Dead>
  std::optional<Value> find(size_t h, Match&& matches, Dead&& dead) {
    std::lock_guard lock(mu_);
    cache_.erase_if([&](const Entry& e) { return dead(e.key); });
    if (Entry* hit = cache_.find(h, [&](const Entry& e) { return matches(e.key); }))
      return hit->value;
    return std::nullopt;
  }
  // Caches `value` for `key` (found absent by find, without the lock since).
  void insert(Key key, size_t h, Value value) {
    std::lock_guard lock(mu_);
    cache_.insert(h, Entry{std::move(key), std::move(value)}, capacity());
  }

 private:
  struct Entry {
    Key key;
    Value value;
  };
  size_t capacity() const { return capacity_ ? capacity_ : config::compile_cache_size(); }

  const size_t capacity_;
  std::mutex mu_;
  LruCache<Entry> cache_;
};

// An LruCache kept per thread (thread_local) or per object, emptied when clear_caches() has run
// since it was last used.
template <class E>
class LocalLruCache {
 public:
  LruCache<E>& get() {
    const uint64_t now = cache_generation();
    if (generation_ != now) {
      cache_.clear();
      generation_ = now;
    }
    return cache_;
  }

 private:
  LruCache<E> cache_;
  uint64_t generation_ = cache_generation();
};

}  // namespace spmd

// Bounded compile caches, on LruCache (core/lru.h).
//
// The process's compile caches register themselves (register_cache) so that clear_caches() can
// empty them and cache_sizes() count them; caches held per thread or per object compare a
// generation (cache_generation) with the one they were filled at and start afresh when
// clear_caches() advanced it.
#pragma once

#include <spmd/config.h>

#include "core/lru.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

namespace spmd {

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

// The registry of compile caches behind clear_caches() and detail::cache_sizes().
#include "core/lru_cache.h"

#include <atomic>
#include <mutex>
#include <vector>

namespace spmd {
namespace {

struct RegisteredCache {
  std::string name;
  std::function<size_t()> size;
  std::function<void()> clear;
};

struct Registry {
  std::mutex mu;
  std::vector<RegisteredCache> caches;
};

// Never destroyed: caches may register from threads still running at exit.
Registry& registry() {
  static Registry& r = *new Registry;
  return r;
}

std::atomic<uint64_t> g_generation{0};

}  // namespace

void register_cache(std::string name, std::function<size_t()> size, std::function<void()> clear) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  r.caches.push_back({std::move(name), std::move(size), std::move(clear)});
}

uint64_t cache_generation() {
  return g_generation.load(std::memory_order_acquire);
}

void clear_caches() {
  g_generation.fetch_add(1, std::memory_order_acq_rel);
  Registry& r = registry();
  std::vector<RegisteredCache> caches;
  {
    std::lock_guard lock(r.mu);
    caches = r.caches;
  }
  // Outside the registry's lock: clearing drops compiled programs, whose destruction may reach
  // other caches.
  for (const RegisteredCache& c : caches) c.clear();
}

namespace detail {
std::map<std::string, size_t> cache_sizes() {
  Registry& r = registry();
  std::vector<RegisteredCache> caches;
  {
    std::lock_guard lock(r.mu);
    caches = r.caches;
  }
  std::map<std::string, size_t> sizes;
  for (const RegisteredCache& c : caches) sizes[c.name] += c.size();
  return sizes;
}
}  // namespace detail

}  // namespace spmd

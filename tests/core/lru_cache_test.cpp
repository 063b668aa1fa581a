// The bounded caches behind every compile cache (src/core/lru_cache.h): least recently used
// eviction, lookups that refresh an entry, clear_caches() and its generation, and a shared cache
// used from several threads while another clears it (also built into spmd_tsan_tests).
#include <spmd/config.h>
#include <spmd/error.h>

#include <gtest/gtest.h>

#include "core/lru_cache.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace sp = spmd;

namespace {

struct Item {
  int key;
  std::string value;
};

Item* find_key(sp::LruCache<Item>& cache, int key) {
  // A poor hash (key % 3) puts several keys under one hash, as colliding signatures do.
  return cache.find(size_t(key % 3), [&](const Item& e) { return e.key == key; });
}

void add(sp::LruCache<Item>& cache, int key, size_t capacity) {
  cache.insert(size_t(key % 3), Item{key, std::to_string(key)}, capacity);
}

TEST(LruCache, KeepsTheMostRecentlyUsedUpToItsCapacity) {
  sp::LruCache<Item> cache;
  for (int k = 0; k < 10'000; ++k) add(cache, k, 8);
  EXPECT_EQ(cache.size(), 8u);
  for (int k = 0; k < 10'000 - 8; k += 97) EXPECT_EQ(find_key(cache, k), nullptr) << k;
  for (int k = 10'000 - 8; k < 10'000; ++k) {
    ASSERT_NE(find_key(cache, k), nullptr) << k;
    EXPECT_EQ(find_key(cache, k)->value, std::to_string(k));
  }
}

TEST(LruCache, ALookupKeepsAnEntry) {
  sp::LruCache<Item> cache;
  add(cache, -1, 4);
  for (int k = 0; k < 1000; ++k) {
    ASSERT_NE(find_key(cache, -1), nullptr) << k;  // the hot entry, used before each insert
    add(cache, k, 4);
  }
  EXPECT_EQ(cache.size(), 4u);
  EXPECT_NE(find_key(cache, -1), nullptr);
  EXPECT_NE(find_key(cache, 999), nullptr);
  EXPECT_EQ(find_key(cache, 996), nullptr);  // the fourth most recent was dropped for -1
}

TEST(LruCache, EraseIfAndClear) {
  sp::LruCache<Item> cache;
  for (int k = 0; k < 10; ++k) add(cache, k, 100);
  cache.erase_if([](const Item& e) { return e.key % 2 == 0; });
  EXPECT_EQ(cache.size(), 5u);
  EXPECT_EQ(find_key(cache, 4), nullptr);
  EXPECT_NE(find_key(cache, 5), nullptr);
  // The index stays consistent: evictions after erase_if drop the right entries.
  for (int k = 10; k < 20; ++k) add(cache, k, 3);
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_NE(find_key(cache, 19), nullptr);
  EXPECT_EQ(find_key(cache, 16), nullptr);
  cache.clear();
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(find_key(cache, 19), nullptr);
}

TEST(LruCache, CapacityComesFromConfig) {
  EXPECT_EQ(sp::config::compile_cache_size(), sp::config::kDefaultCompileCacheSize);
  sp::config::set_compile_cache_size(5);
  sp::LruCache<Item> cache;
  for (int k = 0; k < 100; ++k) cache.insert(size_t(k), Item{k, ""});
  EXPECT_EQ(cache.size(), 5u);
  sp::config::set_compile_cache_size(sp::config::kDefaultCompileCacheSize);
  try {
    sp::config::set_compile_cache_size(0);
    FAIL() << "expected ValueError";
  } catch (const sp::ValueError& e) {
    EXPECT_STREQ(e.what(),
                 "[config.set_compile_cache_size] expected a size of at least 1, got 0");
  }
  EXPECT_EQ(sp::config::compile_cache_size(), sp::config::kDefaultCompileCacheSize);
}

TEST(LruCache, ClearCachesEmptiesSharedAndLocalCaches) {
  static auto& shared = *new sp::SharedLruCache<int, int>("lru test cache", 16);
  for (int k = 0; k < 40; ++k)
    EXPECT_EQ(shared.get_or_make(k, size_t(k), std::equal_to<int>(), [&] { return k * k; }),
              k * k);
  EXPECT_EQ(sp::detail::cache_sizes().at("lru test cache"), 16u);
  sp::LocalLruCache<Item> local;
  add(local.get(), 1, 10);
  ASSERT_EQ(local.get().size(), 1u);
  sp::clear_caches();
  EXPECT_EQ(sp::detail::cache_sizes().at("lru test cache"), 0u);
  EXPECT_EQ(local.get().size(), 0u);
  // A cleared key is made again.
  int made = 0;
  EXPECT_EQ(shared.get_or_make(3, 3, std::equal_to<int>(), [&] { return ++made, 9; }), 9);
  EXPECT_EQ(made, 1);
}

// Threads fill and read a shared cache and their own local ones while another clears them all:
// every value read is the one made for its key (ThreadSanitizer checks the locking).
TEST(LruCache, ClearCachesWhileOtherThreadsUseTheCaches) {
  static auto& shared = *new sp::SharedLruCache<int, std::shared_ptr<const int>>("lru race", 8);
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  std::vector<std::thread> users;
  for (int t = 0; t < 4; ++t)
    users.emplace_back([&, t] {
      thread_local sp::LocalLruCache<Item> local;
      for (int i = 0; !stop || i < 2000; ++i) {
        const int k = (i * 7 + t) % 24;
        std::shared_ptr<const int> v = shared.get_or_make(
            k, size_t(k), std::equal_to<int>(), [&] { return std::make_shared<const int>(k + 1); });
        if (*v != k + 1) ++wrong;
        if (Item* hit = find_key(local.get(), k)) {
          if (hit->value != std::to_string(k)) ++wrong;
        } else {
          add(local.get(), k, 6);
        }
      }
    });
  for (int i = 0; i < 200; ++i) {
    sp::clear_caches();
    (void)sp::detail::cache_sizes();
  }
  stop = true;
  for (std::thread& u : users) u.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_LE(sp::detail::cache_sizes().at("lru race"), 8u);
}

}  // namespace

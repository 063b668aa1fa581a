// Aligned host allocations for CPU device buffers. Blocks from 128 KiB are kept in a bounded
// cache when freed and handed out again: a fresh large allocation costs a page fault per 4 KiB
// on first touch, which made large elementwise ops run at a fifth of memory bandwidth. (From
// 1 MiB, the blocks of 8 devices training an MLP, 512 KiB of activations each, missed the cache:
// caching them made `spmd train --mesh 8` 3-5 % faster.) Blocks of up to 1 KiB are kept per
// thread, a few of each size (SmallBlocks below).
#include "core/buffer.h"

#include <spmd/error.h>

#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <vector>

namespace spmd {
namespace {

constexpr size_t kAlign = 64;
constexpr size_t kCacheMin = size_t(1) << 17;  // blocks from 128 KiB are cached
constexpr size_t kGranule = size_t(64) << 10;  // large sizes round up to 64 KiB
// Larger requests cannot be rounded up to a granule without overflow, nor be met by any system.
constexpr size_t kMaxBytes = size_t(1) << 62;

[[noreturn]] void throw_exhausted(size_t nbytes) {
  throw ResourceExhaustedError("RESOURCE_EXHAUSTED: Out of memory allocating " +
                               std::to_string(nbytes) + " bytes.");
}

class BlockCache {
 public:
  // A cached block of at least `bytes` and at most 1.25 × bytes, or nullptr. Of the blocks of
  // the best size, the one given back last: it is the likeliest to be in the cache still
  // (handing out the oldest made a loop that allocates a result per call write to memory).
  size_t cached() {
    std::lock_guard lock(mu_);
    return cached_;
  }
  void* take(size_t bytes) {
    std::lock_guard lock(mu_);
    auto it = by_size_.lower_bound(bytes);
    if (it == by_size_.end() || it->first > bytes + bytes / 4) return nullptr;
    it = std::prev(by_size_.upper_bound(it->first));  // equal keys keep their insertion order
    void* p = it->second.data;
    cached_ -= it->first;
    by_age_.erase(it->second.stamp);
    by_size_.erase(it);
    return p;
  }
  // Keeps the block for reuse. When that takes the cache over its limit, the blocks given back
  // longest ago are freed instead (a workload that moved on to other sizes must not keep the
  // current one from being cached); a block larger than the whole limit is freed at once.
  // Frees every cached block (an allocation failed: give the memory back to the system).
  void release() {
    std::vector<void*> blocks;
    {
      std::lock_guard lock(mu_);
      for (auto& [bytes, entry] : by_size_) blocks.push_back(entry.data);
      by_size_.clear();
      by_age_.clear();
      cached_ = 0;
    }
    for (void* q : blocks) std::free(q);
  }
  void give(void* p, size_t bytes) {
    std::vector<void*> evicted;
    {
      std::lock_guard lock(mu_);
      if (bytes > Buffer::kCacheLimit) {
        evicted.push_back(p);
      } else {
        while (cached_ + bytes > Buffer::kCacheLimit) {
          auto oldest = by_age_.begin()->second;
          evicted.push_back(oldest->second.data);
          cached_ -= oldest->first;
          by_age_.erase(by_age_.begin());
          by_size_.erase(oldest);
        }
        const uint64_t stamp = next_stamp_++;
        by_age_.emplace(stamp, by_size_.emplace(bytes, Entry{p, stamp}));
        cached_ += bytes;
      }
    }
    for (void* q : evicted) std::free(q);
  }

 private:
  struct Entry {
    void* data;
    uint64_t stamp;  // when it was given back
  };
  std::mutex mu_;
  std::multimap<size_t, Entry> by_size_;
  std::map<uint64_t, std::multimap<size_t, Entry>::iterator> by_age_;
  uint64_t next_stamp_ = 0;
  size_t cached_ = 0;
};

BlockCache& cache() {
  static BlockCache* c = new BlockCache();  // outlives every static Array
  return *c;
}

// Blocks of up to 1 KiB given back on a thread, kept for that thread's next allocations of the
// same capacity (at most kSmallKept of each): a small aligned_alloc takes glibc's memalign path,
// several times malloc's cost, and a collective between processes allocates a small result per
// call. A block may be given back on another thread than the one that took it (it is plain
// memory); a thread's blocks are freed when it ends.
constexpr size_t kSmallMax = 1024;
constexpr size_t kSmallKept = 8;

class SmallBlocks {
 public:
  ~SmallBlocks();
  void* take(size_t capacity) {
    Class& c = classes_[capacity / kAlign - 1];
    return c.count ? c.blocks[--c.count] : nullptr;
  }
  bool give(void* p, size_t capacity) {
    Class& c = classes_[capacity / kAlign - 1];
    if (c.count == kSmallKept) return false;
    c.blocks[c.count++] = p;
    return true;
  }

 private:
  struct Class {
    void* blocks[kSmallKept];
    size_t count = 0;
  };
  Class classes_[kSmallMax / kAlign] = {};
};

thread_local bool t_small_blocks_gone = false;

SmallBlocks::~SmallBlocks() {
  t_small_blocks_gone = true;
  for (Class& c : classes_)
    for (size_t i = 0; i < c.count; ++i) std::free(c.blocks[i]);
}

// The calling thread's small blocks; null once its thread-local storage is being destroyed.
SmallBlocks* small_blocks() {
  if (t_small_blocks_gone) return nullptr;
  thread_local SmallBlocks blocks;
  return &blocks;
}

void* take_small(size_t capacity) {
  SmallBlocks* b = capacity <= kSmallMax ? small_blocks() : nullptr;
  return b ? b->take(capacity) : nullptr;
}

void free_small(void* p, size_t capacity) {
  SmallBlocks* b = capacity <= kSmallMax ? small_blocks() : nullptr;
  if (!b || !b->give(p, capacity)) std::free(p);
}

size_t capacity_for(size_t nbytes) {
  size_t rounded = (nbytes + kAlign - 1) / kAlign * kAlign;
  if (rounded >= kCacheMin) rounded = (rounded + kGranule - 1) / kGranule * kGranule;
  return rounded ? rounded : kAlign;
}

}  // namespace

std::shared_ptr<Buffer> Buffer::allocate(size_t nbytes) {
  if (nbytes > kMaxBytes) throw_exhausted(nbytes);
  size_t capacity = capacity_for(nbytes);
  void* p = capacity >= kCacheMin ? cache().take(capacity) : take_small(capacity);
  if (!p) p = std::aligned_alloc(kAlign, capacity);
  if (!p && capacity >= kCacheMin) {
    cache().release();
    p = std::aligned_alloc(kAlign, capacity);
  }
  if (!p) throw_exhausted(nbytes);
  // The Buffer and its reference count in one allocation (make_shared), not two.
  struct Made final : Buffer {
    Made(void* data, size_t n, size_t cap) : Buffer(data, n, cap) {}
  };
  try {
    return std::make_shared<Made>(p, nbytes, capacity);
  } catch (...) {
    std::free(p);
    throw;
  }
}

size_t Buffer::cached_bytes() {
  return cache().cached();
}

// A Buffer of capacity 0 is a view of another's memory (backends/cpu/buffer_view.h), which the
// other frees: allocations always have a capacity.
Buffer::~Buffer() {
  if (capacity_ == 0) return;
  if (capacity_ < kCacheMin)
    free_small(data_, capacity_);
  else
    cache().give(data_, capacity_);
}

}  // namespace spmd

// Aligned host allocations for CPU device buffers. Large blocks are kept in a bounded cache when
// freed and handed out again: a fresh large allocation costs a page fault per 4 KiB on first
// touch, which made large elementwise ops run at a fifth of memory bandwidth.
#include "runtime/buffer.h"

#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>
#include <new>

namespace spmd {
namespace {

constexpr size_t kAlign = 64;
constexpr size_t kCacheMin = size_t(1) << 20;    // blocks from 1 MiB are cached
constexpr size_t kCacheLimit = size_t(2) << 30;  // at most 2 GiB kept for reuse
constexpr size_t kGranule = size_t(64) << 10;    // large sizes round up to 64 KiB

class BlockCache {
 public:
  // A cached block of at least `bytes` and at most 1.25 × bytes, or nullptr. Of the blocks of
  // the best size, the one given back last: it is the likeliest to be in the cache still
  // (handing out the oldest made a loop that allocates a result per call write to memory).
  void* take(size_t bytes) {
    std::lock_guard lock(mu_);
    auto it = free_.lower_bound(bytes);
    if (it == free_.end() || it->first > bytes + bytes / 4) return nullptr;
    it = std::prev(free_.upper_bound(it->first));  // equal keys keep their insertion order
    void* p = it->second;
    cached_ -= it->first;
    free_.erase(it);
    return p;
  }
  // Keeps the block for reuse; false when the cache is full (the caller frees it).
  bool give(void* p, size_t bytes) {
    std::lock_guard lock(mu_);
    if (cached_ + bytes > kCacheLimit) return false;
    free_.emplace(bytes, p);
    cached_ += bytes;
    return true;
  }

 private:
  std::mutex mu_;
  std::multimap<size_t, void*> free_;
  size_t cached_ = 0;
};

BlockCache& cache() {
  static BlockCache* c = new BlockCache();  // outlives every static Array
  return *c;
}

size_t capacity_for(size_t nbytes) {
  size_t rounded = (nbytes + kAlign - 1) / kAlign * kAlign;
  if (rounded >= kCacheMin) rounded = (rounded + kGranule - 1) / kGranule * kGranule;
  return rounded ? rounded : kAlign;
}

}  // namespace

std::shared_ptr<Buffer> Buffer::allocate(size_t nbytes) {
  size_t capacity = capacity_for(nbytes);
  void* p = capacity >= kCacheMin ? cache().take(capacity) : nullptr;
  if (!p) p = std::aligned_alloc(kAlign, capacity);
  if (!p) throw std::bad_alloc();
  return std::shared_ptr<Buffer>(new Buffer(p, nbytes, capacity));
}

Buffer::~Buffer() {
  if (capacity_ < kCacheMin || !cache().give(data_, capacity_)) std::free(data_);
}

}  // namespace spmd

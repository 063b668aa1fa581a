// The cache of large freed blocks: the block freed last is handed out first, and the cache
// stays within its limit by releasing the blocks freed longest ago.
#include "core/buffer.h"

#include <gtest/gtest.h>

#include <vector>

namespace spmd {
namespace {

TEST(BufferCache, HandsOutTheBlockFreedLast) {
  const size_t bytes = size_t(3) << 20;
  std::shared_ptr<Buffer> a = Buffer::allocate(bytes), b = Buffer::allocate(bytes);
  void* pa = a->data();
  void* pb = b->data();
  a.reset();
  b.reset();
  std::shared_ptr<Buffer> first = Buffer::allocate(bytes);
  std::shared_ptr<Buffer> second = Buffer::allocate(bytes - 4096);  // sizes within 1.25x share
  EXPECT_EQ(first->data(), pb);
  EXPECT_EQ(second->data(), pa);
  EXPECT_EQ(second->nbytes(), bytes - 4096);
}

// Blocks of 3/8 of the limit, never touched, so they cost address space only. After freeing
// three, the third is kept although the first two filled most of the cache.
TEST(BufferCache, NewlyFreedBlocksDisplaceTheOldestBeyondTheLimit) {
  const size_t bytes = Buffer::kCacheLimit / 8 * 3;
  std::vector<std::shared_ptr<Buffer>> blocks;
  std::vector<void*> data;
  for (int i = 0; i < 3; ++i) {
    blocks.push_back(Buffer::allocate(bytes));
    data.push_back(blocks.back()->data());
  }
  for (auto& b : blocks) {
    b.reset();
    EXPECT_LE(Buffer::cached_bytes(), Buffer::kCacheLimit);
  }
  std::shared_ptr<Buffer> again = Buffer::allocate(bytes);
  EXPECT_EQ(again->data(), data[2]);
  std::shared_ptr<Buffer> next = Buffer::allocate(bytes);
  EXPECT_EQ(next->data(), data[1]);
  // A block larger than the whole cache is released at once.
  const size_t before = Buffer::cached_bytes();
  Buffer::allocate(Buffer::kCacheLimit + (size_t(1) << 20)).reset();
  EXPECT_EQ(Buffer::cached_bytes(), before);
}

}  // namespace
}  // namespace spmd

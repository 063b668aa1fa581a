// Results the Executable allocates are written over in place once dead, as donated arguments
// are: a chain of elementwise equations, random bits' threefry2x32 included, holds one or two
// buffers of the shape instead of one per step. Each test runs in a fresh process (ctest), so the
// buffer cache starts empty and its growth counts the blocks a run freed.
#include <gtest/gtest.h>
#include <spmd/spmd.h>

#include "core/buffer.h"

#include <cstdint>
#include <vector>

namespace {

namespace sp = spmd;
using sp::Array;

// An unusual size, so no block another computation freed can serve it.
constexpr int64_t kCount = 3'000'017;
constexpr size_t kBlock = size_t(kCount) * 4;

TEST(IntermediateBuffers, RandomBitsHashOverTheCounterWords) {
  auto bits = [](const Array& key) { return sp::random::bits(key, {kCount}); };
  Array key = sp::random::key(7);
  const size_t before = sp::Buffer::cached_bytes();
  Array out = sp::jit(bits)(key).block_until_ready();
  // The counter words (hi, lo) are hashed in place and xor-ed into the first: of the two
  // blocks the run allocates, one is the result and one is freed. Allocating the hashes and the
  // xor afresh left three blocks freed.
  const size_t freed = sp::Buffer::cached_bytes() - before;
  EXPECT_GE(freed, kBlock);
  EXPECT_LT(freed, 2 * kBlock);
  EXPECT_EQ(out.to_vector<uint32_t>(), bits(key).to_vector<uint32_t>());
}

}  // namespace

// sp::data::Batches: an epoch visits every example once, in the order
// jax.random.permutation(jax.random.fold_in(key, epoch), n) recorded from JAX
// (tools/goldens/gen_fashion_mnist.py), with images and labels gathered together.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "data/golden_lines.h"
#include "support/golden.h"

#include <algorithm>
#include <cstdint>
#include <numeric>

namespace sp = spmd;
using sp::Array;
using spmd_test::error_message;
using spmd_test::golden_line;

namespace {

constexpr const char* kGolden = "data/epoch_order.txt";

// n examples whose label is their index and whose image row is [2 * index, 2 * index + 1].
sp::data::Dataset indexed(int64_t n) {
  return {sp::arange(float(2 * n)).reshape({n, 2}), sp::arange(0, n, 1, sp::int32)};
}

// The labels of every batch, in visiting order, after checking each batch's images are the
// rows of its labels and its size is `batch_size` (`last_size` for the final batch).
std::vector<int32_t> visited(const sp::data::Batches& batches, int64_t batch_size,
                             int64_t last_size) {
  std::vector<int32_t> order;
  int64_t seen = 0;
  for (auto [images, labels] : batches) {
    const int64_t expected = ++seen == batches.num_batches() ? last_size : batch_size;
    EXPECT_EQ(images.shape(), sp::Shape({expected, 2}));
    EXPECT_EQ(labels.shape(), sp::Shape({expected}));
    EXPECT_FALSE(images.committed());
    const std::vector<int32_t> ids = labels.to_vector<int32_t>();
    const std::vector<float> rows = images.to_vector<float>();
    for (size_t k = 0; k < ids.size(); ++k) {
      EXPECT_EQ(rows[2 * k], float(2 * ids[k]));
      EXPECT_EQ(rows[2 * k + 1], float(2 * ids[k] + 1));
    }
    order.insert(order.end(), ids.begin(), ids.end());
  }
  EXPECT_EQ(seen, batches.num_batches());
  return order;
}

TEST(Batches, ShuffledEpochFollowsJaxPermutationOfFoldIn) {
  const std::vector<int32_t> jax0 = golden_line<int32_t>(kGolden, "n100.key0.epoch0");
  const std::vector<int32_t> jax1 = golden_line<int32_t>(kGolden, "n100.key0.epoch1");
  ASSERT_EQ(jax0.size(), 100u);
  sp::data::Batches epoch0(indexed(100), 32, sp::random::key(0), 0, /*drop_last=*/false);
  sp::data::Batches epoch1(indexed(100), 32, sp::random::key(0), 1, /*drop_last=*/false);
  EXPECT_EQ(epoch0.num_batches(), 4);
  EXPECT_EQ(visited(epoch0, 32, 4), jax0);
  EXPECT_EQ(visited(epoch1, 32, 4), jax1);
}

TEST(Batches, EveryExampleOncePerEpoch) {
  for (uint32_t epoch : {0u, 1u, 7u}) {
    std::vector<int32_t> order =
        visited(sp::data::Batches(indexed(100), 32, sp::random::key(3), epoch, false), 32, 4);
    EXPECT_FALSE(std::is_sorted(order.begin(), order.end()));
    std::sort(order.begin(), order.end());
    std::vector<int32_t> all(100);
    std::iota(all.begin(), all.end(), 0);
    EXPECT_EQ(order, all) << "epoch " << epoch;
  }
}

TEST(Batches, DropLastSkipsThePartialBatchByDefault) {
  sp::data::Batches batches(indexed(100), 32, sp::random::key(0), 0);
  EXPECT_EQ(batches.num_batches(), 3);
  const std::vector<int32_t> jax0 = golden_line<int32_t>(kGolden, "n100.key0.epoch0");
  EXPECT_EQ(visited(batches, 32, 32), std::vector<int32_t>(jax0.begin(), jax0.begin() + 96));
}

TEST(Batches, TrainingSplitOrderMatchesJax) {
  for (auto [seed, epoch] : {std::pair{0u, 0u}, {42u, 3u}}) {
    const std::string name =
        "n60000.key" + std::to_string(seed) + ".epoch" + std::to_string(epoch) + ".first20";
    sp::data::Batches batches(indexed(60000), 20, sp::random::key(seed), epoch);
    EXPECT_EQ(batches.num_batches(), 3000);
    EXPECT_EQ(batches[0].second.to_vector<int32_t>(), golden_line<int32_t>(kGolden, name));
  }
}

TEST(Batches, InOrderKeepsTheLastPartialBatchByDefault) {
  std::vector<int32_t> all(100);
  std::iota(all.begin(), all.end(), 0);
  sp::data::Batches batches(indexed(100), 30);
  EXPECT_EQ(batches.num_batches(), 4);
  EXPECT_EQ(visited(batches, 30, 10), all);
  sp::data::Batches dropped(indexed(100), 30, /*drop_last=*/true);
  EXPECT_EQ(dropped.num_batches(), 3);
  EXPECT_EQ(visited(dropped, 30, 30), std::vector<int32_t>(all.begin(), all.begin() + 90));
}

TEST(Batches, BatchLargerThanTheDataset) {
  EXPECT_EQ(sp::data::Batches(indexed(10), 16, sp::random::key(0), 0).num_batches(), 0);
  EXPECT_EQ(sp::data::Batches(indexed(10), 16, sp::random::key(0), 0, false).num_batches(), 1);
  // A batch_size near INT64_MAX: one partial batch holding every example (no overflow to 0).
  sp::data::Batches whole(indexed(10), INT64_MAX);
  ASSERT_EQ(whole.num_batches(), 1);
  EXPECT_EQ(whole[0].second.to_vector<int32_t>(),
            sp::arange(0, 10, 1, sp::int32).to_vector<int32_t>());
  EXPECT_EQ(sp::data::Batches(indexed(10), INT64_MAX, /*drop_last=*/true).num_batches(), 0);
}

TEST(BatchesErrors, BadArguments) {
  EXPECT_EQ(error_message<sp::ValueError>([] { sp::data::Batches(indexed(10), 0); }),
            "[Batches] batch_size must be positive, got 0");
  sp::data::Dataset mismatched{sp::zeros({10, 2}), sp::zeros({9}, sp::int32)};
  EXPECT_EQ(error_message<sp::ValueError>([&] { sp::data::Batches(mismatched, 2); }),
            "[Batches] images and labels must have the same number of examples, got 10 and 9");
  EXPECT_EQ(error_message<sp::ValueError>([] { sp::data::Batches(sp::data::Dataset{}, 2); }),
            "[Batches] the dataset's images and labels must both be arrays");
  sp::data::Batches batches(indexed(10), 4);
  EXPECT_EQ(error_message<sp::IndexError>([&] { batches[3]; }),
            "[Batches] batch index 3 is out of range for 3 batches");
}

}  // namespace

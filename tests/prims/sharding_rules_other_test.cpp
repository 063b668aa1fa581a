// The sharding rules of the primitives outside the kinds (sort, indexing, random, collectives):
// their factor form in Shardy's text, and dynamic_slice's localized equation on blocks.
#include "prims/primitive.h"

#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sp = spmd;

namespace {

sp::AbstractValue f32(sp::Shape shape) {
  return {std::move(shape), sp::float32, false};
}
sp::AbstractValue u32(sp::Shape shape) {
  return {std::move(shape), sp::uint32, false};
}
const sp::AbstractValue kIndex{sp::Shape{}, sp::int32, false};

std::string rule_str(const char* name, const std::vector<sp::AbstractValue>& in,
                     const sp::Params& params) {
  const sp::Primitive& p = sp::primitive(name);
  const std::vector<sp::AbstractValue> out = sp::abstract_eval(p, in, params);
  return p.sharding_rule(in, out, params).str();
}

TEST(ShardingRulesOther, SortNeedsItsSortedDimWhole) {
  const sp::Params params{{"dimension", int64_t{1}}, {"is_stable", true}, {"num_keys", int64_t{1}}};
  EXPECT_EQ(rule_str("sort", {f32({4, 8, 2}), f32({4, 8, 2})}, params),
            "([i, j, k], [i, j, k])->([i, j, k], [i, j, k]) {i=4, j=8, k=2} need_replication={j}");
}

// A window as wide as its dim starts at 0 whatever the start index says: the dim passes
// through. A narrower one reads at a runtime offset.
TEST(ShardingRulesOther, DynamicSlicePassesThroughFullWidthDims) {
  const sp::Params params{{"slice_sizes", std::vector<int64_t>{8, 2, 5}}};
  EXPECT_EQ(rule_str("dynamic_slice", {f32({8, 6, 5}), kIndex, kIndex, kIndex}, params),
            "([i, j, l], [], [], [])->([i, k, l]) {i=8, j=6, k=2, l=5} need_replication={j, k}");
}

TEST(ShardingRulesOther, DynamicUpdateSliceSharesFullWidthDimsWithTheUpdate) {
  EXPECT_EQ(rule_str("dynamic_update_slice", {f32({8, 6}), f32({8, 1}), kIndex, kIndex}, {}),
            "([i, j], [i, k], [], [])->([i, j]) {i=8, j=6, k=1} need_replication={j, k}");
}

// Elementwise, with an operand that broadcasts along a size-1 dim.
TEST(ShardingRulesOther, Threefry2x32IsElementwise) {
  EXPECT_EQ(rule_str("threefry2x32", {u32({4, 1}), u32({}), u32({4, 3}), u32({4, 3})}, {}),
            "([i, 1], [], [i, j], [i, j])->([i, j], [i, j]) {i=4, j=3}");
}

TEST(ShardingRulesOther, Iota2x32ShapeNeedsItsDimsWhole) {
  const sp::Params params{{"shape", std::vector<int64_t>{2, 3}}};
  EXPECT_EQ(rule_str("iota_2x32_shape", {}, params),
            "()->([i, j], [k, l]) {i=2, j=3, k=2, l=3} need_replication={i, j, k, l}");
}

// take_along_axis's form: index batch dims pass through to the result, with the operand's
// batching dim they pair with; the gathered dim and the index vector are needed whole.
sp::Params batched_gather_params() {
  return {{"offset_dims", std::vector<int64_t>{}},
          {"collapsed_slice_dims", std::vector<int64_t>{1}},
          {"start_index_map", std::vector<int64_t>{1}},
          {"operand_batching_dims", std::vector<int64_t>{0}},
          {"start_indices_batching_dims", std::vector<int64_t>{0}},
          {"slice_sizes", std::vector<int64_t>{1, 1}},
          {"mode", std::string("clip")},
          {"fill_value", sp::NoneParam{}},
          {"indices_are_sorted", false},
          {"unique_indices", false}};
}

TEST(ShardingRulesOther, GatherPassesIndexBatchDimsThrough) {
  const sp::AbstractValue indices{sp::Shape{6, 3, 1}, sp::int32, false};
  EXPECT_EQ(rule_str("gather", {f32({6, 8}), indices}, batched_gather_params()),
            "([i, l], [i, j, k])->([i, j]) {i=6, j=3, k=1, l=8} need_replication={k, l}");
}

// Blocks of the batch dim (3 blocks of 2) gathered apart give the global result, out-of-range
// indices clamped included.
TEST(ShardingRulesOther, GatherBlocksOfBatchDimsGiveTheGlobalResult) {
  const sp::Primitive& p = sp::primitive("gather");
  const sp::Params params = batched_gather_params();
  const sp::Array x = sp::arange(48.0f).reshape({6, 8});
  const sp::Array idx =
      sp::array({7, 0, 3, 9, -2, 1, 5, 5, 2, 0, 6, 4, 1, 8, 3, 2, 7, 0}).reshape({6, 3, 1});
  const sp::Array global = sp::bind1(p, {x, idx}, params);
  std::vector<sp::Array> blocks;
  for (int64_t b = 0; b < 3; ++b)
    blocks.push_back(sp::bind1(p,
                               {sp::lax::slice_in_dim(x, 2 * b, 2 * b + 2, 1, 0),
                                sp::lax::slice_in_dim(idx, 2 * b, 2 * b + 2, 1, 0)},
                               params));
  EXPECT_EQ(sp::concatenate(blocks, 0).to_vector<float>(), global.to_vector<float>());
}

// Collectives run only in manual bodies; their rule is the replicated one.
TEST(ShardingRulesOther, CollectivesAreReplicated) {
  const std::vector<sp::AbstractValue> in{f32({4, 2})}, out{f32({16, 2})};
  EXPECT_EQ(sp::primitive("all_gather").sharding_rule(in, out, {}).str(),
            "([i, j])->([k, l]) {i=4, j=2, k=16, l=2} need_replication={i, j, k, l}");
}

// The rule's blocks: with dim 0 split in 4 and dim 1 (sliced at a runtime offset) whole, each
// device slices its f32[2,6] block of f32[8,6] to the f32[2,2] block of the f32[8,2] result.
TEST(ShardingRulesOther, DynamicSliceLocalizesItsSliceSizes) {
  const sp::Primitive& p = sp::primitive("dynamic_slice");
  const sp::Params params{{"slice_sizes", std::vector<int64_t>{8, 2}}};
  const std::vector<sp::AbstractValue> local_in{f32({2, 6}), kIndex, kIndex},
      local_out{f32({2, 2})};
  ASSERT_TRUE(p.localize);
  const sp::LocalEquation local = p.localize(params, local_in, local_out);
  EXPECT_EQ(local.primitive, &p);
  EXPECT_EQ(local.params.get_ints("slice_sizes"), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(sp::abstract_eval(*local.primitive, local_in, local.params), local_out);
}

// The localized equation computes each device's block: the blocks of the operand sliced apart
// and stacked give the global result, wherever the runtime start points (the primitive clamps it
// as XLA does; lax::dynamic_slice's wrapping of negative starts happens before it).
TEST(ShardingRulesOther, DynamicSliceBlocksGiveTheGlobalResult) {
  const sp::Primitive& p = sp::primitive("dynamic_slice");
  const sp::Params params{{"slice_sizes", std::vector<int64_t>{8, 2}}};
  const sp::Array x = sp::arange(48.0f).reshape({8, 6});
  for (int start : {-3, 0, 3, 9}) {
    const sp::Array s0 = sp::array({start}).reshape({}), s1 = sp::array({start - 1}).reshape({});
    const sp::Array global = sp::bind1(p, {x, s0, s1}, params);
    const std::vector<sp::AbstractValue> local_in{f32({2, 6}), sp::aval_of(s0), sp::aval_of(s1)},
        local_out{f32({2, 2})};
    const sp::LocalEquation local = p.localize(params, local_in, local_out);
    std::vector<sp::Array> blocks;
    for (int64_t b = 0; b < 4; ++b) {
      const sp::Array block = sp::lax::slice_in_dim(x, 2 * b, 2 * b + 2, 1, 0);
      blocks.push_back(sp::bind1(*local.primitive, {block, s0, s1}, local.params));
    }
    EXPECT_EQ(sp::concatenate(blocks, 0).to_vector<float>(), global.to_vector<float>())
        << "start " << start;
  }
}

}  // namespace

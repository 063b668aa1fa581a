// The sharding rules of the structural and elementwise families (src/prims/shape.cpp, linalg.cpp,
// elementwise.cpp, reduce.cpp, unary_math.cpp): each rule's Shardy text (the factorizations of
// openxla/shardy's op_sharding_rule_registry tests where Shardy has the same rule), the block
// types of localized equations, and, on random shapes, that factor sizes multiply to every dim's
// size and that running an equation on the blocks of a split factor gives the result's blocks.
#include <spmd/lax.h>
#include <spmd/ops.h>

#include <gtest/gtest.h>

#include "prims/families.h"
#include "prims/primitive.h"
#include "support/golden.h"

#include <numeric>
#include <random>
#include <string>

namespace spmd {
namespace {

using Ints = std::vector<int64_t>;
using lax::DotDimensionNumbers;
using lax::PadConfig;
using Types = std::vector<AbstractValue>;

AbstractValue of(DType t, Ints dims) {
  return {Shape(dims), t, false};
}
AbstractValue f32(Ints dims) {
  return of(float32, std::move(dims));
}

// One equation: a primitive applied to operands of global types, and its rule.
struct Eqn {
  const Primitive& p;
  Types in;
  Params params;
  Types out;
  ShardingRule rule;
};

Eqn eqn(const char* name, Types in, Params params = {}) {
  const Primitive& p = primitive(name);
  Types out = abstract_eval(p, in, params);
  ShardingRule rule = p.sharding_rule(in, out, params);
  return {p, std::move(in), std::move(params), std::move(out), std::move(rule)};
}

std::string rule_str(const char* name, Types in, Params params = {}) {
  return eqn(name, std::move(in), std::move(params)).rule.str();
}

Params dot_params(DotDimensionNumbers d) {
  return {{"dimension_numbers", std::move(d)},
          {"precision", NoneParam{}},
          {"preferred_element_type", NoneParam{}},
          {"out_sharding", NoneParam{}}};
}
Params broadcast_params(Ints shape, Ints dims) {
  return {{"shape", std::move(shape)},
          {"broadcast_dimensions", std::move(dims)},
          {"sharding", NoneParam{}}};
}
Params reshape_params(Ints sizes) {
  return {{"new_sizes", std::move(sizes)}, {"dimensions", NoneParam{}}, {"sharding", NoneParam{}}};
}
Params slice_params(Ints start, Ints limit, ParamValue strides = NoneParam{}) {
  return {{"start_indices", std::move(start)},
          {"limit_indices", std::move(limit)},
          {"strides", std::move(strides)}};
}

// ---- the blocks of a split -----------------------------------------------------------------
// The block type of `t` when factor f is split in splits[f] parts. A permutation factor has the
// result's extent in every tensor and is never split: its dims keep their extent.
AbstractValue block_type(const AbstractValue& t, const ShardingRule::Tensor& dims,
                         const ShardingRule& rule, const Ints& splits) {
  AbstractValue block = t;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d].empty() || rule.factor_kinds[size_t(dims[d][0])] == FactorKind::permutation)
      continue;
    int64_t n = 1;
    for (int f : dims[d]) n *= rule.factor_sizes[size_t(f)] / splits[size_t(f)];
    block.shape[int(d)] = n;
  }
  return block;
}

Types block_types(const Types& ts, const std::vector<ShardingRule::Tensor>& dims,
                  const ShardingRule& rule, const Ints& splits) {
  Types out;
  for (size_t t = 0; t < ts.size(); ++t) out.push_back(block_type(ts[t], dims[t], rule, splits));
  return out;
}

LocalEquation localized(const Eqn& e, const Types& local_in, const Types& local_out) {
  if (!e.p.localize) return {&e.p, e.params};
  return e.p.localize(e.params, local_in, local_out);
}

// The localized equation on the block types gives the block result types.
void expect_localizes(const Eqn& e, Ints splits) {
  splits.resize(size_t(e.rule.num_factors()), 1);
  const Types local_in = block_types(e.in, e.rule.operands, e.rule, splits);
  const Types local_out = block_types(e.out, e.rule.results, e.rule, splits);
  const LocalEquation local = localized(e, local_in, local_out);
  EXPECT_EQ(local.primitive, &e.p);
  EXPECT_EQ(abstract_eval(*local.primitive, local_in, local.params), local_out);
}

// Block c of s along every dim whose major factor is f (f is major wherever it appears).
Array block_of(const Array& x, const ShardingRule::Tensor& dims, int f, int64_t c, int64_t s) {
  Ints start(size_t(x.ndim()), 0), limit = x.shape().dims();
  for (size_t d = 0; d < dims.size(); ++d)
    if (!dims[d].empty() && dims[d][0] == f) {
      start[d] = c * limit[d] / s;
      limit[d] = (c + 1) * limit[d] / s;
    }
  return lax::slice(x, start, limit);
}

bool contains(const ShardingRule::Tensor& dims, int f) {
  for (const auto& d : dims)
    if (std::find(d.begin(), d.end(), f) != d.end()) return true;
  return false;
}

// Factor f split in s parts: each part's equation on the operands' blocks gives the results'
// blocks, or (f a reduction) parts whose sum is the result.
void expect_blocks_agree(const Eqn& e, int f, int64_t s, std::mt19937& gen) {
  std::vector<Array> xs;
  std::uniform_int_distribution<int> value(-4, 4);
  for (const AbstractValue& t : e.in) {
    std::vector<float> v(size_t(t.size()));
    for (float& x : v) x = float(value(gen));
    xs.push_back(array<float>(v, t.shape));
  }
  const std::vector<Array> global = spmd::bind(e.p, xs, e.params);
  std::vector<Array> sums(global.size());
  for (int64_t c = 0; c < s; ++c) {
    std::vector<Array> blocks;
    for (size_t i = 0; i < xs.size(); ++i)
      blocks.push_back(block_of(xs[i], e.rule.operands[i], f, c, s));
    Ints splits(size_t(e.rule.num_factors()), 1);
    splits[size_t(f)] = s;
    const LocalEquation local = localized(e, block_types(e.in, e.rule.operands, e.rule, splits),
                                          block_types(e.out, e.rule.results, e.rule, splits));
    const std::vector<Array> outs = spmd::bind(*local.primitive, blocks, local.params);
    for (size_t r = 0; r < outs.size(); ++r) {
      if (contains(e.rule.results[r], f)) {
        EXPECT_TRUE(
            spmd_test::arrays_equal(outs[r], block_of(global[r], e.rule.results[r], f, c, s)))
            << e.p.name << " " << e.rule.str() << " factor " << f << " block " << c;
      } else {
        sums[r] = c == 0 ? outs[r] : lax::add(sums[r], outs[r]);
      }
    }
  }
  for (size_t r = 0; r < sums.size(); ++r) {
    if (sums[r].valid()) {
      EXPECT_TRUE(spmd_test::arrays_equal(sums[r], global[r])) << e.p.name << " " << e.rule.str();
    }
  }
}

// ---- Shardy's text, primitive by primitive --------------------------------------------------
TEST(ShardingRules, DotGeneralContractsWithPsum) {
  const Eqn e = eqn("dot_general", {f32({8, 4}), f32({4, 16})}, dot_params({{1}, {0}, {}, {}}));
  EXPECT_EQ(e.rule.str(), "([i, k], [k, j])->([i, j]) {i=8, j=16, k=4} reduction={k}");
  EXPECT_EQ(e.rule.combiner, &primitive("psum"));
  EXPECT_EQ(rule_str("dot_general", {f32({2, 4, 8, 4, 64, 32}), f32({16, 32, 64, 4, 2})},
                     dot_params({{5, 4}, {1, 2}, {0, 1}, {4, 3}})),
            "([i, j, k, l, o, n], [m, n, o, j, i])->([i, j, k, l, m]) "
            "{i=2, j=4, k=8, l=4, m=16, n=32, o=64} reduction={n, o}");
}

TEST(ShardingRules, BoolDotGeneralReplicatesItsContraction) {
  const Eqn e =
      eqn("dot_general", {of(bool_, {8, 4}), of(bool_, {4, 16})}, dot_params({{1}, {0}, {}, {}}));
  EXPECT_EQ(e.rule.str(), "([i, k], [k, j])->([i, j]) {i=8, j=16, k=4} need_replication={k}");
  EXPECT_EQ(e.rule.combiner, nullptr);
}

TEST(ShardingRules, ReductionsNameTheCollectiveThatCompletesThem) {
  const Params axes{{"axes", Ints{1}}};
  EXPECT_EQ(rule_str("reduce_sum", {f32({2, 64, 13})}, axes),
            "([i, j, k])->([i, k]) {i=2, j=64, k=13} reduction={j}");
  EXPECT_EQ(eqn("reduce_sum", {f32({2, 64})}, axes).rule.combiner, &primitive("psum"));
  EXPECT_EQ(eqn("reduce_max", {of(int8, {2, 64})}, axes).rule.combiner, &primitive("pmax"));
  EXPECT_EQ(eqn("reduce_min", {of(bool_, {2, 64})}, axes).rule.combiner, &primitive("pmin"));
  EXPECT_EQ(eqn("reduce_and", {of(bool_, {2, 64})}, axes).rule.combiner, &primitive("pmin"));
  EXPECT_EQ(eqn("reduce_or", {of(bool_, {2, 64})}, axes).rule.combiner, &primitive("pmax"));
  // Bitwise and/or of integers, products and arg-reductions have no collective.
  EXPECT_EQ(eqn("reduce_and", {of(int32, {2, 64})}, axes).rule.combiner, nullptr);
  EXPECT_EQ(eqn("reduce_or", {of(uint8, {2, 64})}, axes).rule.combiner, nullptr);
  EXPECT_EQ(eqn("reduce_xor", {of(bool_, {2, 64})}, axes).rule.combiner, nullptr);
  EXPECT_EQ(eqn("reduce_prod", {f32({2, 64})}, axes).rule.combiner, nullptr);
  EXPECT_EQ(eqn("argmax", {f32({2, 64})}, {{"axes", Ints{1}}, {"index_dtype", int32}}).rule.str(),
            "([i, j])->([i]) {i=2, j=64} reduction={j}");
  EXPECT_EQ(rule_str("cumsum", {f32({2, 64})}, {{"axis", int64_t{1}}, {"reverse", false}}),
            "([i, j])->([i, j]) {i=2, j=64} need_replication={j}");
}

TEST(ShardingRules, BroadcastInDimMapsOperandDimsAndSkipsBroadcastOnes) {
  EXPECT_EQ(
      rule_str("broadcast_in_dim", {f32({2, 13, 1})}, broadcast_params({2, 64, 13, 1}, {0, 2, 3})),
      "([i, k, l])->([i, j, k, l]) {i=2, j=64, k=13, l=1}");
  EXPECT_EQ(
      rule_str("broadcast_in_dim", {f32({2, 1, 13})}, broadcast_params({2, 64, 13}, {0, 1, 2})),
      "([i, 1, k])->([i, j, k]) {i=2, j=64, k=13}");
  EXPECT_EQ(rule_str("broadcast_in_dim", {f32({})}, broadcast_params({2, 1, 13}, {})),
            "([])->([i, j, k]) {i=2, j=1, k=13}");
}

TEST(ShardingRules, BroadcastInDimLocalizesItsShape) {
  const Eqn e =
      eqn("broadcast_in_dim", {f32({2, 1, 13})}, broadcast_params({2, 64, 13}, {0, 1, 2}));
  expect_localizes(e, {2, 4});
  expect_localizes(e, {1, 64, 13});
}

TEST(ShardingRules, ReshapeUsesCompoundFactors) {
  auto reshape = [](Ints from, Ints to) {
    return rule_str("reshape", {f32(from)}, reshape_params(to));
  };
  EXPECT_EQ(reshape({2, 4}, {8}), "([i, j])->([ij]) {i=2, j=4}");
  EXPECT_EQ(reshape({8}, {2, 4}), "([ij])->([i, j]) {i=2, j=4}");
  EXPECT_EQ(reshape({4, 12}, {4, 2, 3, 2}), "([i, jkl])->([i, j, k, l]) {i=4, j=2, k=3, l=2}");
  EXPECT_EQ(reshape({8, 4, 5}, {2, 16, 5}), "([ij, k, l])->([i, jk, l]) {i=2, j=4, k=4, l=5}");
  EXPECT_EQ(reshape({1, 8, 4}, {8, 1, 4, 1}), "([1, i, j])->([i, 1, j, 1]) {i=8, j=4}");
  EXPECT_EQ(reshape({1, 1}, {}), "([1, 1])->([]) {}");
}

TEST(ShardingRules, ReshapeReplicatesGroupsItCannotFactor) {
  auto reshape = [](Ints from, Ints to) {
    return rule_str("reshape", {f32(from)}, reshape_params(to));
  };
  EXPECT_EQ(reshape({3, 2}, {2, 3}),
            "([i, l])->([j, k]) {i=3, j=2, k=3, l=2} need_replication={i, j, k, l}");
  // The common major factor 2 of 6 and 4 still splits both.
  EXPECT_EQ(reshape({6, 4}, {4, 6}),
            "([ij, m])->([ik, l]) {i=2, j=3, k=2, l=6, m=4} need_replication={j, k, l, m}");
  EXPECT_EQ(reshape({5, 3, 7}, {15, 7}), "([i, j, k])->([ij, k]) {i=5, j=3, k=7}");
  EXPECT_EQ(reshape({4, 0}, {0, 8}),
            "([i, j])->([k, l]) {i=4, j=0, k=0, l=8} need_replication={i, j, k, l}");
}

TEST(ShardingRules, ReshapeLocalizesNewSizes) {
  const Eqn e = eqn("reshape", {f32({8, 4, 5})}, reshape_params({2, 16, 5}));
  expect_localizes(e, {2});
  expect_localizes(e, {2, 2});
  expect_localizes(e, {2, 4, 2, 5});
}

TEST(ShardingRules, SqueezeTransposeRev) {
  EXPECT_EQ(rule_str("squeeze", {f32({4, 1, 8})}, {{"dimensions", Ints{1}}}),
            "([i, 1, j])->([i, j]) {i=4, j=8}");
  EXPECT_EQ(rule_str("transpose", {f32({256, 32, 64, 100})}, {{"permutation", Ints{3, 1, 0, 2}}}),
            "([k, j, l, i])->([i, j, k, l]) {i=100, j=32, k=256, l=64}");
  EXPECT_EQ(rule_str("rev", {f32({4, 32, 8, 2})}, {{"dimensions", Ints{1, 3}}}),
            "([i, j, k, l])->([i, j, k, l]) {i=4, j=32, k=8, l=2} need_replication={j, l}");
}

// Shardy's permutation factor: the joined dim has the result's extent in every tensor, so a
// split of an operand's joined dim propagates to the result.
TEST(ShardingRules, ConcatenatePermutesItsJoinedDimAndSplitReplicatesIt) {
  EXPECT_EQ(
      rule_str("concatenate", {f32({4, 3, 256}), f32({4, 5, 256})}, {{"dimension", int64_t{1}}}),
      "([i, j, k], [i, j, k])->([i, j, k]) {i=4, j=8, k=256} permutation={j}");
  EXPECT_EQ(rule_str("split", {f32({4, 8})}, {{"sizes", Ints{3, 5}}, {"axis", int64_t{1}}}),
            "([i, j])->([i, k], [i, l]) {i=4, j=8, k=3, l=5} need_replication={j, k, l}");
}

TEST(ShardingRules, StackAndUnstackReplicateTheStackedDim) {
  EXPECT_EQ(rule_str("stack", {f32({4, 8}), f32({4, 8})}, {{"axis", int64_t{1}}}),
            "([i, k], [i, k])->([i, j, k]) {i=4, j=2, k=8} need_replication={j}");
  EXPECT_EQ(rule_str("unstack", {f32({4, 2, 8})}, {{"axis", int64_t{1}}}),
            "([i, j, k])->([i, k], [i, k]) {i=4, j=2, k=8} need_replication={j}");
}

TEST(ShardingRules, PadPermutesPaddedDims) {
  const Params p{{"padding_config", std::vector<PadConfig>{{1, 1, 0}, {-1, -1, 0}, {0, 0, 0}}}};
  EXPECT_EQ(rule_str("pad", {f32({28, 28, 16}), f32({})}, p),
            "([i, j, k], [])->([i, j, k]) {i=30, j=26, k=16} permutation={i, j}");
}

// As Shardy's: a sliced dim is one permutation factor of the result's extent.
TEST(ShardingRules, SlicePermutesSlicedDimsAndLocalizesWholeOnes) {
  const Eqn e = eqn("slice", {f32({32, 4, 8})}, slice_params({0, 1, 4}, {32, 2, 8}, Ints{1, 1, 2}));
  EXPECT_EQ(e.rule.str(), "([i, j, k])->([i, j, k]) {i=32, j=1, k=2} permutation={j, k}");
  expect_localizes(e, {4});
  expect_localizes(eqn("slice", {f32({6, 8})}, slice_params({0, 0}, {6, 5})), {3});
}

TEST(ShardingRules, TileRepetitionsAreAFactorOfTheResult) {
  const Eqn e = eqn("tile", {f32({4, 3})}, {{"reps", Ints{1, 4}}});
  EXPECT_EQ(e.rule.str(), "([i, k])->([i, jk]) {i=4, j=4, k=3}");
  expect_localizes(e, {2, 2});
  expect_localizes(e, {1, 4, 3});
}

TEST(ShardingRules, ElementwiseOperandsShareFactorsExceptBroadcastDims) {
  EXPECT_EQ(rule_str("add_any", {f32({4, 8}), f32({4, 8})}),
            "([i, j], [i, j])->([i, j]) {i=4, j=8}");
  EXPECT_EQ(rule_str("add", {f32({4, 1}), f32({4, 8})}), "([i, 1], [i, j])->([i, j]) {i=4, j=8}");
  EXPECT_EQ(rule_str("select_n", {of(bool_, {}), f32({4, 8}), f32({4, 8})}),
            "([], [i, j], [i, j])->([i, j]) {i=4, j=8}");
  EXPECT_EQ(rule_str("clamp", {f32({}), f32({4, 8}), f32({})}),
            "([], [i, j], [])->([i, j]) {i=4, j=8}");
  EXPECT_EQ(rule_str("integer_pow", {f32({4, 8})}, {{"y", int64_t{3}}}),
            "([i, j])->([i, j]) {i=4, j=8}");
  EXPECT_EQ(rule_str("sin", {f32({4, 8})}, {{"accuracy", NoneParam{}}}),
            "([i, j])->([i, j]) {i=4, j=8}");
}

TEST(ShardingRules, ConversionsAndIota) {
  EXPECT_EQ(rule_str("convert_element_type", {f32({4, 8})},
                     {{"new_dtype", int32}, {"weak_type", false}, {"sharding", NoneParam{}}}),
            "([i, j])->([i, j]) {i=4, j=8}");
  EXPECT_EQ(rule_str("bitcast_convert_type", {of(uint32, {4, 2, 2})}, {{"new_dtype", uint64}}),
            "([i, j, k])->([i, j]) {i=4, j=2, k=2} need_replication={k}");
  EXPECT_EQ(rule_str("bitcast_convert_type", {of(uint64, {4, 2})}, {{"new_dtype", uint32}}),
            "([i, j])->([i, j, k]) {i=4, j=2, k=2} need_replication={k}");
  EXPECT_EQ(rule_str("bitcast_convert_type", {f32({4, 2})}, {{"new_dtype", int32}}),
            "([i, j])->([i, j]) {i=4, j=2}");
  EXPECT_EQ(rule_str("iota", {},
                     {{"dtype", int32},
                      {"shape", Ints{4, 8}},
                      {"dimension", int64_t{1}},
                      {"sharding", NoneParam{}}}),
            "()->([i, j]) {i=4, j=8} need_replication={i, j}");
  EXPECT_EQ(rule_str("empty2", {}, {{"dtype", float32}}), "()->([]) {}");
}

// Every primitive of the families here ends with a rule, its kind's or its own.
TEST(ShardingRules, EveryPrimitiveOfTheseFamiliesHasOne) {
  PrimitiveRegistry families;
  for (auto define :
       {register_elementwise_primitives, register_empty_primitive, register_unary_math_primitives,
        register_reduce_primitives, register_shape_primitives, register_linalg_primitives})
    define(families);
  for (const std::string& name : families.names())
    EXPECT_TRUE(primitive(name).sharding_rule) << name;
}

// ---- random shapes ----------------------------------------------------------------------------
class RandomEqns {
 public:
  explicit RandomEqns(unsigned seed) : gen_(seed) {}
  std::mt19937& gen() { return gen_; }
  int64_t size() { return pick({1, 2, 3, 4, 6, 8}); }
  Ints shape(int rank) {
    Ints s;
    for (int d = 0; d < rank; ++d) s.push_back(size());
    return s;
  }
  int rank() { return int(std::uniform_int_distribution<int>(0, 3)(gen_)); }
  bool coin() { return std::uniform_int_distribution<int>(0, 1)(gen_) == 1; }
  int64_t below(int64_t n) { return std::uniform_int_distribution<int64_t>(0, n - 1)(gen_); }

  // Two groupings of one random sequence of primes, or of it and a permutation of it.
  Eqn reshape() {
    Ints primes;
    for (int k = 0, n = 1 + int(below(5)); k < n; ++k) primes.push_back(pick({2, 2, 3, 5}));
    const Ints from = group(primes);
    if (coin()) std::shuffle(primes.begin(), primes.end(), gen_);
    return eqn("reshape", {f32(from)}, reshape_params(group(primes)));
  }
  Eqn broadcast_in_dim() {
    const Ints out = shape(1 + rank());
    Ints dims, in;
    for (int d = 0; d < int(out.size()); ++d)
      if (coin()) {
        dims.push_back(d);
        in.push_back(coin() ? out[size_t(d)] : 1);
      }
    return eqn("broadcast_in_dim", {f32(in)}, broadcast_params(out, dims));
  }
  Eqn transpose() {
    const Ints in = shape(1 + rank());
    Ints perm(in.size());
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), gen_);
    return eqn("transpose", {f32(in)}, {{"permutation", perm}});
  }
  // Batch, free and contracting dims in random order on each side.
  Eqn dot_general() {
    const Ints batch = shape(int(below(2))), contract = shape(1 + int(below(2)));
    const Ints lhs_free = shape(int(below(2))), rhs_free = shape(int(below(2)));
    DotDimensionNumbers d;
    const Ints lhs = place(batch, contract, lhs_free, d.lhs_batch, d.lhs_contracting);
    const Ints rhs = place(batch, contract, rhs_free, d.rhs_batch, d.rhs_contracting);
    return eqn("dot_general", {f32(lhs), f32(rhs)}, dot_params(d));
  }
  Eqn slice() {
    const Ints in = shape(1 + rank());
    Ints start, limit, strides;
    for (int64_t n : in) {
      const bool whole = coin();
      start.push_back(whole ? 0 : below(n));
      limit.push_back(whole ? n : start.back() + 1 + below(n - start.back()));
      strides.push_back(whole ? 1 : 1 + below(2));
    }
    return eqn("slice", {f32(in)}, slice_params(start, limit, strides));
  }

 private:
  int64_t pick(std::initializer_list<int64_t> values) {
    return *(values.begin() + below(int64_t(values.size())));
  }
  // The product of `primes` as consecutive groups, with size-1 dims here and there.
  Ints group(const Ints& primes) {
    Ints dims;
    for (int64_t p : primes) {
      if (dims.empty() || coin()) dims.push_back(1);
      dims.back() *= p;
      if (coin() && coin()) dims.push_back(1);
    }
    return dims;
  }
  // The dims of one side in random order; `batch_at` and `contract_at` get their positions.
  Ints place(const Ints& batch, const Ints& contract, const Ints& free, Ints& batch_at,
             Ints& contract_at) {
    std::vector<std::pair<int, size_t>> dims;  // (0 batch, 1 contracting, 2 free; index)
    for (size_t i = 0; i < batch.size(); ++i) dims.emplace_back(0, i);
    for (size_t i = 0; i < contract.size(); ++i) dims.emplace_back(1, i);
    for (size_t i = 0; i < free.size(); ++i) dims.emplace_back(2, i);
    std::shuffle(dims.begin(), dims.end(), gen_);
    Ints shape;
    batch_at.assign(batch.size(), 0);
    contract_at.assign(contract.size(), 0);
    for (size_t k = 0; k < dims.size(); ++k) {
      const auto [role, i] = dims[k];
      shape.push_back(role == 0 ? batch[i] : role == 1 ? contract[i] : free[i]);
      if (role == 0) batch_at[i] = int64_t(k);
      if (role == 1) contract_at[i] = int64_t(k);
    }
    return shape;
  }

  std::mt19937 gen_;
};

void expect_consistent(const Eqn& e) {
  auto check = [&](const Types& ts, const std::vector<ShardingRule::Tensor>& dims) {
    ASSERT_EQ(ts.size(), dims.size()) << e.rule.str();
    for (size_t t = 0; t < ts.size(); ++t) {
      ASSERT_EQ(int(dims[t].size()), ts[t].shape.ndim()) << e.rule.str();
      for (int d = 0; d < ts[t].shape.ndim(); ++d) {
        int64_t product = 1;
        bool permuted = false;  // a permutation factor has the result's extent in every tensor
        for (int f : dims[t][size_t(d)]) {
          product *= e.rule.factor_sizes[size_t(f)];
          permuted = permuted || e.rule.factor_kinds[size_t(f)] == FactorKind::permutation;
        }
        if (!permuted) {
          EXPECT_EQ(product, ts[t].shape[d]) << e.p.name << " " << e.rule.str() << " tensor " << t;
        }
      }
    }
  };
  check(e.in, e.rule.operands);
  check(e.out, e.rule.results);
}

// A factor that may be split and is major in every dim it is part of, so that its blocks are
// contiguous; -1 when there is none.
int splittable_factor(const ShardingRule& rule, std::mt19937& gen) {
  std::vector<int> candidates;
  for (int f = 0; f < rule.num_factors(); ++f) {
    if (rule.factor_kinds[size_t(f)] == FactorKind::need_replication ||
        rule.factor_kinds[size_t(f)] == FactorKind::permutation || rule.factor_sizes[size_t(f)] < 2)
      continue;
    bool major = true;
    for (const auto* tensors : {&rule.operands, &rule.results})
      for (const auto& t : *tensors)
        for (const auto& d : t)
          major = major && (std::find(d.begin(), d.end(), f) == d.end() || d[0] == f);
    if (major) candidates.push_back(f);
  }
  if (candidates.empty()) return -1;
  return candidates[std::uniform_int_distribution<size_t>(0, candidates.size() - 1)(gen)];
}

int64_t smallest_divisor(int64_t n) {
  int64_t p = 2;
  while (n % p != 0) ++p;
  return p;
}

TEST(ShardingRules, RandomRulesAreConsistentAndTheirBlocksAgree) {
  RandomEqns random(20240611);
  for (int k = 0; k < 40; ++k) {
    for (const Eqn& e : {random.reshape(), random.broadcast_in_dim(), random.transpose(),
                         random.dot_general(), random.slice()}) {
      expect_consistent(e);
      const int f = splittable_factor(e.rule, random.gen());
      if (f >= 0)
        expect_blocks_agree(e, f, smallest_divisor(e.rule.factor_sizes[size_t(f)]), random.gen());
    }
  }
}

}  // namespace
}  // namespace spmd

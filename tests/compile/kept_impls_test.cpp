// A run keeps the ArrayImpls of values that died with nothing else holding them and gives them to
// later results (compile/executable.cpp): each result must still get its own type and data, and
// a value something else holds (an argument, a result) must never be emptied or reused.
#include <gtest/gtest.h>
#include <spmd/spmd.h>

#include "compile/executable.h"

#include <functional>
#include <string>
#include <vector>

namespace {

namespace sp = spmd;
using sp::Array;

std::vector<float> iota_f32(int n, float from) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[size_t(i)] = from + float(i);
  return v;
}

// Values of several shapes and dtypes die one after another, so later results of other shapes
// and dtypes take their impls; one intermediate is also a result, which must keep its data.
std::vector<Array> mixed(const Array& x, const Array& k) {
  Array doubled = x * 2.0;                          // f32[6], dies in the reshape
  Array grid = sp::reshape(doubled, {2, 3});        // f32[2,3], shares doubled's buffer
  Array counts = sp::astype(k, sp::float32) + 1.0;  // f32[3] from int32[3]
  Array rows = sp::sum(grid, {1});                  // f32[2]
  Array scaled = grid * 0.5;                        // f32[2,3], a result
  Array total = sp::sum(counts) + sp::sum(rows);    // f32[], a result
  Array flags = k > 1;                              // bool[3], a result
  return {scaled, total, flags, rows};
}

// Runs `chain` (a shard_map over 8 devices, P("i") in and out, blocks of 2) on three arguments and
// checks each result: element j of device d's block is want(s_j, x), x its argument element and
// s_j the sum over the blocks of element j; each block on its device, the argument untouched.
void check_chain(const std::function<Array(const Array&)>& chain, const sp::Mesh& mesh,
                 const std::function<float(float s, float x)>& want_of) {
  for (int call = 0; call < 3; ++call) {
    const std::vector<float> xs = iota_f32(16, float(call));
    Array x = sp::device_put(sp::array(xs, {16}), sp::NamedSharding(mesh, sp::P("i")));
    Array y = chain(x);
    float s[2] = {0, 0};
    for (int d = 0; d < 8; ++d) s[0] += xs[size_t(2 * d)], s[1] += xs[size_t(2 * d + 1)];
    std::vector<float> want;
    for (int k = 0; k < 16; ++k) want.push_back(want_of(s[k % 2], xs[size_t(k)]));
    EXPECT_EQ(y.to_vector<float>(), want) << "call " << call;
    const auto shards = y.addressable_shards();
    ASSERT_EQ(shards.size(), 8u);
    for (int d = 0; d < 8; ++d) EXPECT_EQ(shards[size_t(d)].device.id, d);
    EXPECT_EQ(x.to_vector<float>(), xs);
  }
}

TEST(KeptImpls, ResultsOfEveryShapeAndDtypeGetTheirOwnTypeAndValues) {
  auto f = sp::jit([](const Array& x, const Array& k) { return mixed(x, k); });
  for (int call = 0; call < 4; ++call) {
    const std::vector<float> xs = iota_f32(6, float(call));
    const std::vector<int32_t> ks = {call, call + 1, call + 2};
    Array x = sp::array(xs, sp::Shape{6});
    Array k = sp::array(ks, sp::Shape{3});
    std::vector<Array> out = f(x, k);
    ASSERT_EQ(out.size(), 4u);
    EXPECT_EQ(out[0].shape(), (sp::Shape{2, 3}));
    EXPECT_EQ(out[0].dtype(), sp::float32);
    EXPECT_EQ(out[1].shape(), sp::Shape{});
    EXPECT_EQ(out[1].dtype(), sp::float32);
    EXPECT_EQ(out[2].shape(), sp::Shape{3});
    EXPECT_EQ(out[2].dtype(), sp::bool_);
    EXPECT_EQ(out[3].shape(), sp::Shape{2});
    // Every value is exact in float32 (small integers and halves).
    EXPECT_EQ(out[0].to_vector<float>(), xs) << "call " << call;  // (2x) * 0.5
    const float row0 = 2 * (xs[0] + xs[1] + xs[2]), row1 = 2 * (xs[3] + xs[4] + xs[5]);
    EXPECT_EQ(out[3].to_vector<float>(), (std::vector<float>{row0, row1})) << "call " << call;
    const float counts = float(ks[0] + ks[1] + ks[2] + 3);
    EXPECT_EQ(out[1].item<float>(), counts + row0 + row1) << "call " << call;
    EXPECT_EQ(out[2].to_vector<bool>(), (std::vector<bool>{ks[0] > 1, ks[1] > 1, ks[2] > 1}));
    // The arguments died inside the run while the caller held them: untouched.
    EXPECT_EQ(x.to_vector<float>(), xs);
    EXPECT_EQ(k.to_vector<int32_t>(), ks);
  }
}

TEST(KeptImpls, AResultOfAnEarlierRunIsNotReusedByALaterOne) {
  auto f = sp::jit([](const Array& x) { return sp::exp(x * 0.0) + x; });  // 1 + x
  std::vector<Array> kept;
  for (int call = 0; call < 6; ++call) kept.push_back(f(sp::array(iota_f32(5, float(call)), {5})));
  for (int call = 0; call < 6; ++call)
    EXPECT_EQ(kept[size_t(call)].to_vector<float>(), iota_f32(5, float(call) + 1)) << call;
}

TEST(KeptImpls, AShardMapChainOfPsumsOnEightDevices) {
  // Each psum's operand dies at the psum, whose result takes its impl in the next launch's run.
  sp::Mesh mesh = sp::make_mesh({8}, {"i"});
  auto chain = sp::jit(sp::shard_map(
      [](Array b) {
        Array first = sp::lax::psum(b, "i");
        Array second = sp::lax::psum(first * 2.0, "i");
        return sp::lax::psum(second + b, "i");
      },
      mesh, sp::P("i"), sp::P("i")));
  // psum(b) = s; psum(2 s) = 16 s; psum(16 s + b) = 8 · 16 s + s.
  check_chain(chain, mesh, [](float s, float) { return 8 * (16 * s) + s; });
}

// Equations that only retype their operand (pvary) are left out of a run: their readers read the
// operand. A chained psum in a checking shard_map has one in front of it (the sum is invariant,
// psum takes a varying value), and so do values mixing an invariant sum with the block. Each value
// read after such a pvary must be the operand's: the sums of every device's blocks, on its device.
TEST(RetypesRunAsNothing, ThePvaryOfAChainOfPsumsIsNotRun) {
  sp::Mesh mesh = sp::make_mesh({8}, {"i"});
  auto chain = sp::jit(sp::shard_map(
      [](Array b) {
        Array s1 = sp::lax::psum(b, "i");         // invariant
        Array s2 = sp::lax::psum(s1, "i");        // pvary(s1), then psum: 8 · s1
        Array mixed = s2 + b;                     // pvary(s2) + b
        Array s3 = sp::lax::psum(s2 * 2.0, "i");  // pvary(2 · s2), then psum: 16 · s2
        return mixed * 0.5 + s3 + s1 * 0.0;       // invariant terms read again after the psums
      },
      mesh, sp::P("i"), sp::P("i")));
  sp::clear_equation_profile();
  sp::set_equation_profiling(true);
  check_chain(chain, mesh, [](float s, float x) { return (8 * s + x) * 0.5f + 16 * (8 * s); });
  sp::set_equation_profiling(false);
  const std::vector<sp::EquationProfileEntry> profile = sp::equation_profile();
  sp::clear_equation_profile();
  int64_t psums = 0;
  for (const sp::EquationProfileEntry& e : profile) {
    EXPECT_NE(e.equation.rfind("pvary", 0), 0u) << e.equation;
    if (e.equation.rfind("psum", 0) == 0) psums += e.count;
  }
  EXPECT_EQ(psums, 3 * 3 * 8);  // three psums per run, on 8 devices, three calls
}

// A pvary whose result leaves the program, or is an operand of an eager equation, keeps its run.
TEST(RetypesRunAsNothing, AResultThatLeavesTheProgramIsStillMade) {
  sp::Mesh mesh = sp::make_mesh({8}, {"i"});
  auto f = sp::jit(sp::shard_map([](Array b) { return sp::lax::pvary(sp::lax::psum(b, "i"), "i"); },
                                 mesh, sp::P("i"), sp::P("i")));
  const std::vector<float> xs = iota_f32(16, 1.0f);
  Array x = sp::device_put(sp::array(xs, {16}), sp::NamedSharding(mesh, sp::P("i")));
  sp::clear_equation_profile();
  sp::set_equation_profiling(true);
  Array y = f(x);
  const std::vector<float> got = y.to_vector<float>();
  sp::set_equation_profiling(false);
  float s[2] = {0, 0};
  for (int d = 0; d < 8; ++d) s[0] += xs[size_t(2 * d)], s[1] += xs[size_t(2 * d + 1)];
  std::vector<float> want;
  for (int d = 0; d < 8; ++d) want.insert(want.end(), {s[0], s[1]});
  EXPECT_EQ(got, want);
  int64_t pvarys = 0;
  for (const sp::EquationProfileEntry& e : sp::equation_profile())
    if (e.equation.rfind("pvary", 0) == 0) pvarys += e.count;
  sp::clear_equation_profile();
  EXPECT_EQ(pvarys, 8);
}

}  // namespace

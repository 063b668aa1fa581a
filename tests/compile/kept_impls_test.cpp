// A run keeps the ArrayImpls of values that died with nothing else holding them and gives them to
// later results (compile/executable.cpp): each result must still get its own type and data, and
// a value something else holds (an argument, a result) must never be emptied or reused.
#include <gtest/gtest.h>
#include <spmd/spmd.h>

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
  for (int call = 0; call < 3; ++call) {
    const std::vector<float> xs = iota_f32(16, float(call));
    Array x = sp::device_put(sp::array(xs, {16}), sp::NamedSharding(mesh, sp::P("i")));
    Array y = chain(x);
    // Block d holds xs[2d], xs[2d+1]; s_j = the sum over blocks of element j.
    float s[2] = {0, 0};
    for (int d = 0; d < 8; ++d) s[0] += xs[size_t(2 * d)], s[1] += xs[size_t(2 * d + 1)];
    std::vector<float> want;
    for (int d = 0; d < 8; ++d)
      for (int j = 0; j < 2; ++j) want.push_back(8 * (16 * s[j]) + s[j]);
    EXPECT_EQ(y.to_vector<float>(), want) << "call " << call;
    const auto shards = y.addressable_shards();
    ASSERT_EQ(shards.size(), 8u);
    for (int d = 0; d < 8; ++d) EXPECT_EQ(shards[size_t(d)].device.id, d);
    EXPECT_EQ(x.to_vector<float>(), xs);
  }
}

}  // namespace

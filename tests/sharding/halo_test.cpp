// Slices, pads and reversals along split dims inside jit, against JAX 0.10.2
// (tools/goldens/gen_halo.py): as XLA's SPMD partitioner, the partitioner keeps such dims split
// and each device gets only the rows its result block needs from its neighbours (ppermute)
// instead of the whole dim (all_gather). Windows of convolutions and pools written with pads and
// slices over a batch-and-height split image take the same path.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "sharding/golden_cases.h"
#include "support/golden.h"

#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace {

namespace sp = spmd;
using sp::Array;
using sp::P;
using sp::lax::PadConfig;

using sharding_test::placed;

class HaloTest : public ::testing::Test {
 public:
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"a", "b"});
  sp::Mesh mesh8 = sp::make_mesh({8}, {"x"});

  Array on(const Array& x, sp::PartitionSpec spec) const {
    return sp::device_put(x, sp::NamedSharding(mesh, spec));
  }

  Array r16 = on(sp::arange(16.0f) - 5, P("a"));
  Array r28 = on(sp::arange(28.0f) * 0.5f, P("a"));
  Array r32 = sp::device_put(sp::arange(32.0f) - 7, sp::NamedSharding(mesh8, P("x")));
  Array r32ab = on(sp::arange(32.0f) * 2 - 9, P(sp::axes("a", "b")));
  Array m16 = on(sp::arange(96.0f).reshape({16, 6}) - 40, P("a", "b"));
  Array m16x8 = on(sp::arange(128.0f).reshape({16, 8}) / 4, P("a", "b"));
  Array img = on(sp::sin(sp::arange(512.0f)).reshape({4, 16, 8}), P("b", "a"));
};

Array slice(const Array& x, int64_t start, int64_t limit, int64_t stride = 1, int axis = 0) {
  return sp::lax::slice_in_dim(x, start, limit, stride, axis);
}

Array pad1(const Array& x, float value, PadConfig c) {
  return sp::lax::pad(x, Array(value), {c});
}

Array conv1d_same(const Array& u) {
  const Array p = sp::pad(u, {{1, 1}});
  return slice(p, 0, 16) * 0.25f + slice(p, 1, 17) * 0.5f - slice(p, 2, 18) * 0.75f;
}

Array conv2d_same(const Array& u) {
  static const float w[3][3] = {{0.25f, -0.5f, 1.0f}, {0.75f, 2.0f, -1.0f}, {0.5f, 1.5f, -0.25f}};
  const Array p = sp::pad(u, {{0, 0}, {1, 1}, {1, 1}});
  Array out = sp::zeros_like(u);
  for (int dy = 0; dy < 3; ++dy)
    for (int dx = 0; dx < 3; ++dx)
      out = out + sp::lax::slice(p, {0, dy, dx}, {4, dy + 16, dx + 8}) * w[dy][dx];
  return out;
}

// A 3-wide, stride-2 max pool over the height, padded with -inf.
Array max_pool_3x2(const Array& u) {
  const Array p = sp::lax::pad(u, Array(-std::numeric_limits<float>::infinity()),
                               {PadConfig{}, PadConfig{1, 1, 0}, PadConfig{}});
  auto window = [&](int64_t start) { return slice(p, start, start + 15, 2, 1); };
  return sp::maximum(sp::maximum(window(0), window(1)), window(2));
}

struct Case {
  std::string name;
  std::function<Array(const Array&)> f;
  Array HaloTest::*arg;
};

std::vector<Case> cases() {
  return {
      {"slice_shift1", [](const Array& u) { return slice(u, 1, 13); }, &HaloTest::r16},
      {"slice_2d",
       [](const Array& u) {
         return sp::lax::slice(u, {3, 1}, {15, 7});
       },
       &HaloTest::m16x8},
      {"slice_several", [](const Array& u) { return slice(u, 2, 26); }, &HaloTest::r32},
      {"slice_far", [](const Array& u) { return slice(u, 0, 8); }, &HaloTest::r32},
      {"slice_axis_tuple", [](const Array& u) { return slice(u, 5, 29); }, &HaloTest::r32ab},
      {"pad_axis_tuple",
       [](const Array& u) {
         return pad1(u, 3.0f, {3, -3, 0});
       },
       &HaloTest::r32ab},
      {"slice_strided", [](const Array& u) { return slice(u, 2, 26, 2); }, &HaloTest::r28},
      {"slice_strided_3", [](const Array& u) { return slice(u, 1, 13, 3); }, &HaloTest::r16},
      {"slice_uneven", [](const Array& u) { return slice(u, 1, 15); }, &HaloTest::r16},
      {"pad_positive",
       [](const Array& u) {
         return sp::pad(u, {{1, 3}});
       },
       &HaloTest::r16},
      {"pad_value_2d",
       [](const Array& u) {
         return sp::lax::pad(u, Array(-5.0f), {PadConfig{2, 2, 0}, PadConfig{1, 1, 0}});
       },
       &HaloTest::m16},
      {"pad_negative",
       [](const Array& u) {
         return pad1(u, 0.0f, {-1, -3, 0});
       },
       &HaloTest::r16},
      {"pad_mixed",
       [](const Array& u) {
         return pad1(u, 7.0f, {-2, 2, 0});
       },
       &HaloTest::r16},
      {"pad_far",
       [](const Array& u) {
         return pad1(u, 1.0f, {6, -2, 0});
       },
       &HaloTest::r16},
      {"rev", [](const Array& u) { return sp::lax::rev(u, {0}); }, &HaloTest::r16},
      {"rev_2d",
       [](const Array& u) {
         return sp::lax::rev(u, {0, 1});
       },
       &HaloTest::m16},
      {"rev_mesh8", [](const Array& u) { return sp::lax::rev(u, {0}) * 2; }, &HaloTest::r32},
      {"conv1d_valid",
       [](const Array& u) {
         return slice(u, 0, 14) * 0.25f + slice(u, 1, 15) * 0.5f - slice(u, 2, 16) * 0.75f;
       },
       &HaloTest::r16},
      {"conv1d_same", conv1d_same, &HaloTest::r16},
      {"conv2d_same", conv2d_same, &HaloTest::img},
      {"max_pool", max_pool_3x2, &HaloTest::img},
  };
}

// Values and where the results are split, as JAX gives them.
TEST_F(HaloTest, ResultsAndSplitsAreJaxs) {
  const auto blocks = spmd_test::golden_blocks("halo/results.txt");
  const auto& values = spmd_test::load_golden("halo/values.npz");
  for (const Case& c : cases()) {
    const Array y = sp::jit(c.f)(this->*c.arg);
    ASSERT_TRUE(blocks.count(c.name)) << "no golden case " << c.name;
    EXPECT_EQ(placed({y}), sharding_test::placed_here(blocks.at(c.name), {y})) << c.name;
    EXPECT_TRUE(spmd_test::arrays_close(y, values.at(c.name + "/0"), 1e-6, 1e-6)) << c.name;
  }
}

// Where XLA moves halos with collective-permutes and gathers nothing, the per-device program
// ppermutes rows too and gathers nothing, and `explain` names the equation that needs them.
TEST_F(HaloTest, ExplainShowsPpermutesWhereJaxGathersNothing) {
  const auto hlo = spmd_test::golden_blocks("halo/hlo.txt");
  for (const Case& c : cases()) {
    ASSERT_TRUE(hlo.count(c.name)) << "no golden case " << c.name;
    const std::string text = sp::jit(c.f).explain(this->*c.arg);
    EXPECT_NE(text.find("ppermute over"), std::string::npos) << c.name << "\n" << text;
    if (hlo.at(c.name).find("all-gather") == std::string::npos) {
      EXPECT_EQ(text.find("all_gather"), std::string::npos) << c.name << "\n" << text;
    }
  }
}

// The account of a halo: the rows each neighbour sends, the equation that reads them and the
// bytes. x[1:13] over 4 devices: block i reads rows [3i + 1, 3i + 4), so each device sends the
// last two rows of its block (8 bytes) to the next one.
TEST_F(HaloTest, ExplainNamesTheRowsTheEquationAndTheBytes) {
  const std::string text = sp::jit([](const Array& u) { return slice(u, 1, 13); }).explain(r16);
  EXPECT_NE(text.find("ppermute over 'a' along dim 0: rows [2, 4) of the block 1 before"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("the halo of slice (equation 0)"), std::string::npos) << text;
  EXPECT_NE(text.find("8 bytes"), std::string::npos) << text;
  EXPECT_EQ(text.find("all_gather"), std::string::npos) << text;
}

}  // namespace

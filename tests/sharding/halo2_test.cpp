// Concatenations, pads with interior padding and reversals of unevenly split dims along split
// dims inside jit, against JAX 0.10.2 (tools/goldens/gen_halo2.py): the partitioner keeps such
// dims split and each device gets only the rows its result block needs from its neighbours
// (ppermute), where XLA gathers a concatenation's operands whole and moves halos for the rest.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "sharding/golden_cases.h"
#include "support/golden.h"

#include <functional>
#include <string>
#include <vector>

namespace {

namespace sp = spmd;
using sp::Array;
using sp::P;
using sp::lax::PadConfig;

using sharding_test::placed;

class Halo2Test : public ::testing::Test {
 public:
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"a", "b"});
  sp::Mesh mesh8 = sp::make_mesh({8}, {"x"});

  Array on(const Array& x, sp::PartitionSpec spec) const {
    return sp::device_put(x, sp::NamedSharding(mesh, spec));
  }
  Array on8(const Array& x) const { return sp::device_put(x, sp::NamedSharding(mesh8, P("x"))); }

  Array r16 = on(sp::arange(16.0f) - 5, P("a"));
  Array s16 = on(sp::arange(16.0f) * -0.5f + 3, P("a"));
  Array r8 = on(sp::arange(8.0f) * 3 + 1, P("a"));
  Array r12 = on(sp::arange(12.0f) * 0.25f - 2, P("a"));
  Array r32 = on8(sp::arange(32.0f) - 7);
  Array r16x = on8(sp::arange(16.0f) * 2 + 100);
  Array m16 = on(sp::arange(96.0f).reshape({16, 6}) - 40, P("a", "b"));
  Array m8 = on(sp::arange(48.0f).reshape({8, 6}) * -1, P("a", "b"));
  Array r10 = sp::arange(10.0f) - 3;
};

Array pad1(const Array& x, float value, PadConfig c) {
  return sp::lax::pad(x, Array(value), {c});
}

// 10 rows split unevenly (over 8 devices: 2, 2, 2, 2, 2, 0, 0, 0), reversed and weighed by row.
Array rev_uneven(const Array& u, const sp::NamedSharding& split) {
  const Array v = sp::with_sharding_constraint(u * 2, split);
  return sp::sum(sp::lax::rev(v, {0}) * (sp::arange(10.0f) * 0.5f + 1));
}

using Fn = std::function<Array(const std::vector<Array>&)>;

struct Case {
  std::string name;
  Fn f;
  std::vector<Array Halo2Test::*> args;
};

std::vector<Case> cases(const Halo2Test& t) {
  using T = Halo2Test;
  const sp::NamedSharding over_x(t.mesh8, P("x")), over_a(t.mesh, P("a"));
  auto concat = [](int dim) {
    return [dim](const std::vector<Array>& u) { return sp::concatenate(u, dim); };
  };
  auto pad = [](float value, PadConfig c) {
    return [=](const std::vector<Array>& u) { return pad1(u[0], value, c); };
  };
  return {
      {"concat_equal", concat(0), {&T::r16, &T::s16}},
      {"concat_unequal", concat(0), {&T::r16, &T::r8}},
      {"concat_three", concat(0), {&T::r8, &T::r12, &T::r8}},
      {"concat_mesh8", concat(0), {&T::r32, &T::r16x}},
      {"concat_2d", concat(0), {&T::m16, &T::m8}},
      {"pad_interior", pad(1.0f, {0, 1, 1}), {&T::r16}},
      {"pad_interior_shift", pad(-2.0f, {3, 2, 1}), {&T::r16}},
      {"pad_interior_2", pad(1.0f, {1, 1, 2}), {&T::r16}},
      {"pad_interior_3", pad(4.0f, {2, 1, 3}), {&T::r16}},
      {"pad_interior_mesh8", pad(1.5f, {5, 4, 1}), {&T::r32}},
      {"pad_interior_2d",
       [](const std::vector<Array>& u) {
         return sp::lax::pad(u[0], Array(0.5f), {PadConfig{1, 0, 1}, PadConfig{0, 1, 1}});
       },
       {&T::m16}},
      {"rev_uneven",
       [=](const std::vector<Array>& u) { return rev_uneven(u[0], over_x); },
       {&T::r10}},
      {"rev_uneven_a",
       [=](const std::vector<Array>& u) { return rev_uneven(u[0], over_a); },
       {&T::r10}},
  };
}

std::vector<Array> args_of(const Halo2Test& t, const Case& c) {
  std::vector<Array> args;
  for (Array Halo2Test::*a : c.args) args.push_back(t.*a);
  return args;
}

// Values and where the results are split, as JAX gives them.
TEST_F(Halo2Test, ResultsAndSplitsAreJaxs) {
  const auto blocks = spmd_test::golden_blocks("halo2/results.txt");
  const auto& values = spmd_test::load_golden("halo2/values.npz");
  for (const Case& c : cases(*this)) {
    const Array y = sp::jit(c.f)(args_of(*this, c));
    ASSERT_TRUE(blocks.count(c.name)) << "no golden case " << c.name;
    EXPECT_EQ(placed({y}), blocks.at(c.name)) << c.name;
    EXPECT_TRUE(spmd_test::arrays_close(y, values.at(c.name + "/0"), 1e-6, 1e-6)) << c.name;
  }
}

// No case gathers a dim: where XLA moves rows (collective-permutes, or all-gathers of a
// concatenation's operands and of the 2-D interior pad), the per-device program ppermutes the
// rows the blocks need; where XLA moves nothing (each block spreads its own rows), neither does
// spmd.
TEST_F(Halo2Test, ExplainShowsPpermutesAndNoGathers) {
  const auto hlo = spmd_test::golden_blocks("halo2/hlo.txt");
  for (const Case& c : cases(*this)) {
    ASSERT_TRUE(hlo.count(c.name)) << "no golden case " << c.name;
    const std::string text = sp::jit(c.f).explain(args_of(*this, c));
    const bool moves = hlo.at(c.name).find("collective-permute") != std::string::npos ||
                       hlo.at(c.name).find("all-gather") != std::string::npos;
    EXPECT_EQ(text.find("ppermute over") != std::string::npos, moves) << c.name << "\n" << text;
    EXPECT_EQ(text.find("all_gather"), std::string::npos) << c.name << "\n" << text;
  }
}

// The account of a concatenation's halos: 16 + 8 rows over 4 devices make result blocks of 6
// rows. Device i < 3 reads rows of x's block i + 1 (the first 2, 4 and 4 of its 4 rows), so
// each sends rows [0, 4) one block back (16 bytes); device 2 reads y's block 0 and device 3 its
// blocks 1 to 3, so each sends its 2 rows two blocks and one block on (8 bytes each): 32 bytes
// a device where all_gathers of both would send 3 * 16 + 3 * 8 = 72.
TEST_F(Halo2Test, ExplainNamesTheRowsAndBytesOfAConcatenation) {
  const std::string text = sp::jit([](const Array& u, const Array& v) {
                             return sp::concatenate({u, v});
                           }).explain(r16, r8);
  for (const char* line : {"rows [0, 4) of the block 1 after: the halo of concatenate (equation "
                           "0): its result blocks read rows their neighbours hold; each device "
                           "sends 16 bytes",
                           "rows [0, 2) of the block 2 before: the halo of concatenate (equation "
                           "0): its result blocks read rows their neighbours hold; each device "
                           "sends 8 bytes",
                           "rows [0, 2) of the block 1 before: the halo of concatenate (equation "
                           "0): its result blocks read rows their neighbours hold; each device "
                           "sends 8 bytes"})
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  EXPECT_EQ(text.find("all_gather"), std::string::npos) << text;
}

// pad (3, 2, 1) of 16 rows over 4 devices spreads them over 36: block i holds positions
// [9i - 3, 9i + 6), rows [0, 3), [3, 8), [8, 12) and [12, 16). Only row 3 lies in another
// block, so one row (4 bytes) moves, as XLA's one collective-permute of f32[1].
TEST_F(Halo2Test, ExplainNamesTheRowAnInteriorPadMoves) {
  const std::string text = sp::jit([](const Array& u) {
                             return pad1(u, -2.0f, {3, 2, 1});
                           }).explain(r16);
  EXPECT_NE(text.find("ppermute over 'a' along dim 0: rows [3, 4) of the block 1 before: the "
                      "halo of pad (equation 0)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("each device sends 4 bytes"), std::string::npos) << text;
  EXPECT_EQ(text.find("ppermute over 'a' along dim 0: rows [", text.find("rows [3, 4)") + 1),
            std::string::npos)
      << text;
}

// Reversing 3 rows over 2 devices (2 and 1) trades the padded blocks (2 rows) and then shifts
// one row past the padding: 3 rows, where gathering the dim moves the other block's 2. The dim
// is gathered instead, and the values are the same.
TEST_F(Halo2Test, AHaloThatMovesMoreThanTheGatherGathers) {
  const sp::NamedSharding split(sp::make_mesh({2}, {"x"}), P("x"));
  const Array w = sp::array({1.0f, 10.0f, 100.0f});
  const auto f = sp::jit([&](const Array& u) {
    return sp::sum(sp::lax::rev(sp::with_sharding_constraint(u * 2, split), {0}) * w);
  });
  const Array r3 = sp::array({1.0f, 2.0f, 3.0f});
  EXPECT_TRUE(spmd_test::arrays_close(f(r3), Array(6.0f + 40.0f + 200.0f), 0, 0));
  const std::string text = f.explain(r3);
  EXPECT_NE(text.find("all_gather over 'x' along dim 0"), std::string::npos) << text;
  EXPECT_EQ(text.find("ppermute"), std::string::npos) << text;
}

const int64_t kLengths[] = {1, 2, 3, 5, 7};
const int64_t kEdges[] = {-2, -1, 0, 1, 3};

// Small interior pads of small lengths over 2, 4 and 8 devices agree with the pad of
// the whole array, exactly.
TEST(HaloSweep, InteriorPadsAgreeWithTheWholeArray) {
  for (int devices : {2, 4, 8}) {
    const sp::Mesh mesh = sp::make_mesh({devices}, {"x"});
    const sp::NamedSharding over_x(mesh, P("x"));
    for (int64_t n : kLengths)
      for (int64_t interior : {1, 2})
        for (int64_t low : kEdges)
          for (int64_t high : kEdges) {
            const int64_t m = low + high + n + (n - 1) * interior;
            if (m <= 0) continue;
            const PadConfig c{low, high, interior};
            const Array x = sp::arange(float(n)) + 1;
            const auto f = sp::jit([&](const Array& u) {
              return sp::lax::pad(sp::with_sharding_constraint(u * 2, over_x), Array(-1.0f), {c}) +
                     1;
            });
            const std::string at = std::to_string(devices) + " devices, n " + std::to_string(n) +
                                   ", pad (" + std::to_string(low) + ", " + std::to_string(high) +
                                   ", " + std::to_string(interior) + ")";
            try {
              EXPECT_TRUE(
                  spmd_test::arrays_close(f(x), sp::lax::pad(x * 2, Array(-1.0f), {c}) + 1, 0, 0))
                  << at;
            } catch (const std::exception& e) {
              ADD_FAILURE() << at << ": " << e.what();
            }
          }
  }
}

// Concatenations of two or three small arrays split over 2, 4 and 8 devices, and every
// reversal of a small array split unevenly, agree with the whole array's, exactly.
TEST(HaloSweep, ConcatenationsAndReversalsAgreeWithTheWholeArray) {
  for (int devices : {2, 4, 8}) {
    const sp::Mesh mesh = sp::make_mesh({devices}, {"x"});
    const sp::NamedSharding over_x(mesh, P("x"));
    auto split = [&](const Array& u) { return sp::with_sharding_constraint(u * 2, over_x); };
    for (int64_t n : kLengths) {
      const Array x = sp::arange(float(n)) + 1;
      const auto rev = sp::jit([&](const Array& u) { return sp::lax::rev(split(u), {0}) + 1; });
      EXPECT_TRUE(spmd_test::arrays_close(rev(x), sp::lax::rev(x * 2, {0}) + 1, 0, 0))
          << devices << " devices, rev of " << n;
      for (int64_t m : kLengths) {
        const Array y = sp::arange(float(m)) * -3;
        const auto two = sp::jit([&](const Array& u, const Array& v) {
          return sp::concatenate({split(u), split(v)}) + 1;
        });
        EXPECT_TRUE(spmd_test::arrays_close(two(x, y), sp::concatenate({x * 2, y * 2}) + 1, 0, 0))
            << devices << " devices, concatenate " << n << " and " << m;
        const auto three = sp::jit([&](const Array& u, const Array& v) {
          return sp::concatenate({split(v), split(u), split(v)}) + 1;
        });
        EXPECT_TRUE(
            spmd_test::arrays_close(three(x, y), sp::concatenate({y * 2, x * 2, y * 2}) + 1, 0, 0))
            << devices << " devices, concatenate " << m << ", " << n << " and " << m;
      }
    }
  }
}

}  // namespace

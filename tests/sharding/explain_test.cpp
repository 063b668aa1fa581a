// sp::explain and config::implicit_resharding: every collective the partitioner inserts is
// reported with its cause and bytes, and resharding no annotation asked for can be refused.
#include <spmd/spmd.h>

#include "support/config_scope.h"
#include "support/golden.h"

#include <gtest/gtest.h>

namespace sp = spmd;
using sp::P;

namespace {

class Explain : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sp::device_count() < 8) GTEST_SKIP() << "needs 8 devices";
    mesh = sp::make_mesh({4, 2}, {"a", "b"});
    x = sp::arange(16 * 16).astype(sp::float32).reshape({16, 16});
  }
  sp::Array put(const P& spec) { return sp::device_put(x, sp::NamedSharding(mesh, spec)); }
  sp::Mesh mesh;
  sp::Array x;
};

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST_F(Explain, AlignedOperandsNeedNoCollective) {
  const std::string text =
      sp::explain([](const sp::Array& l, const sp::Array& r) { return sp::matmul(l, r); },
                  put(P("a", sp::None)), put(P(sp::None, "b")));
  EXPECT_NE(text.find("outputs: P('a', 'b')"), std::string::npos) << text;
  EXPECT_NE(text.find("collectives: none"), std::string::npos) << text;
}

// Axes that leave one dim go in one all_gather over all of them (one collective, one shared
// result buffer), not one all_gather per axis.
TEST_F(Explain, AxesLeavingADimGoInOneAllGather) {
  auto f = sp::jit([](const sp::Array& y) { return y * 2.0; },
                   {.out_shardings = sp::NamedSharding(mesh, P())});
  const std::string text = f.explain(put(P(sp::axes("a", "b"))));
  EXPECT_EQ(count(text, "all_gather over"), 1u) << text;
  EXPECT_NE(text.find("all_gather over ('a', 'b') along dim 0"), std::string::npos) << text;
  EXPECT_TRUE(spmd_test::arrays_equal(f(put(P(sp::axes("a", "b")))), x * 2.0));
}

TEST_F(Explain, ASumOverASplitDimNamesItsPsumAndBytes) {
  const std::string text =
      sp::explain([](const sp::Array& y) { return sp::sum(y, {0}); }, put(P("a", "b")));
  // Each device sums its f32[4,8] block to f32[8] (32 bytes); a ring psum over 4 devices sends
  // 2 · 32 · 3/4 bytes.
  EXPECT_NE(text.find("1. psum over 'a': psum completes the partial results of reduce_sum "
                      "(equation 0) over its reduced dims; each device sends 48 bytes\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(count(text, "implicit resharding"), 0u) << text;
}

TEST_F(Explain, ASumWantedSplitOverItsReducedAxisScatters) {
  auto f = sp::jit([](const sp::Array& y) { return sp::sum(y, {0}); },
                   {.out_shardings = sp::NamedSharding(mesh, P("a"))});
  const std::string text = f.explain(put(P("a", sp::None)));
  // Each device sums its f32[4,16] block to f32[16] (64 bytes) and keeps a quarter of the total:
  // a ring reduce-scatter over 4 devices sends 64 · 3/4 bytes, half of a psum's.
  EXPECT_NE(text.find("1. psum_scatter over 'a': psum_scatter completes the partial results of "
                      "reduce_sum (equation 0) where its result is split over them; each device "
                      "sends 48 bytes\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(count(text, "psum over"), 0u) << text;
  sp::Array got = f(put(P("a", sp::None)));
  EXPECT_EQ(got.sharding()->repr(), sp::NamedSharding(mesh, P("a")).repr());
  EXPECT_EQ(got.to_vector<float>(), sp::sum(x, {0}).to_vector<float>());
}

TEST_F(Explain, AConflictIsAnImplicitResharding) {
  const std::string text = sp::explain([](const sp::Array& l, const sp::Array& r) { return l + r; },
                                       put(P("a")), put(P("b")));
  EXPECT_GE(count(text, "(implicit resharding)"), 1u) << text;
  EXPECT_NE(text.find("operand 1 of add (equation 0) is needed split as"), std::string::npos)
      << text;
}

// Two equations that need one value moved alike read one reshard: the bytes move once and the
// account lists them once (it listed an all_to_all per use).
TEST_F(Explain, AValueMovedForTwoUsesMovesOnce) {
  auto f = [](const sp::Array& l, const sp::Array& r) { return std::make_tuple(l * r, l + r); };
  const sp::Array l = put(P("a", sp::None)), r = put(P(sp::None, "a"));
  const std::string text = sp::explain(f, l, r);
  EXPECT_EQ(count(text, "all_to_all over 'a'"), 1u) << text;
  const auto [product, sum] = sp::jit(f)(l, r);
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(product), x * x));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(sum), x + x));
}

TEST_F(Explain, UncommittedArgumentsRunWhole) {
  const std::string text = sp::explain([](const sp::Array& y) { return sp::sin(y); }, x);
  EXPECT_EQ(text.rfind("no argument is committed", 0), 0u) << text;
}

TEST_F(Explain, ImplicitReshardingCanBeRefused) {
  spmd_test::ImplicitReshardingScope scope(sp::config::ImplicitResharding::error);
  sp::Array l = put(P("a")), r = put(P(sp::None, "a"));
  EXPECT_THROW(sp::jit([](const sp::Array& u, const sp::Array& v) { return u * v; })(l, r),
               sp::ShardingError);
  // An aligned computation and a reduction's psum are not resharding.
  sp::Array s = sp::jit([](const sp::Array& u) { return sp::sum(sp::sin(u), {0}); })(l);
  EXPECT_TRUE(spmd_test::arrays_close(s, sp::sum(sp::sin(x), {0}), 1e-5, 1e-6));
}

TEST_F(Explain, ImplicitReshardingCanWarn) {
  spmd_test::ImplicitReshardingScope scope(sp::config::ImplicitResharding::warn);
  sp::Array l = put(P("b")), r = put(P(sp::None, "b"));
  ::testing::internal::CaptureStderr();
  sp::Array out = sp::jit([](const sp::Array& u, const sp::Array& v) { return u - v; })(l, r);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("implicit resharding (config::implicit_resharding is warn)"),
            std::string::npos)
      << err;
  EXPECT_TRUE(spmd_test::arrays_equal(out, x - x));
}

}  // namespace

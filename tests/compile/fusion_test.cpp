// Elementwise fusion and the passes that prepare it (inlined calls, scalar broadcasts read
// directly): which equations are fused, and that fused Programs give the eager values bit for bit
// (the same kernels run, tile by tile).
#include <gtest/gtest.h>
#include <spmd/spmd.h>

#include "core/array_impl.h"
#include "ir/program.h"
#include "support/config_scope.h"

#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

namespace sp = spmd;
using sp::Array;

int count(const std::string& text, const std::string& word) {
  int n = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
  return n;
}

::testing::AssertionResult bitwise_equal(const Array& got, const Array& want) {
  if (got.shape() != want.shape() || got.dtype() != want.dtype())
    return ::testing::AssertionFailure()
           << "got " << sp::dtype_name(got.dtype()) << got.shape().str() << ", want "
           << sp::dtype_name(want.dtype()) << want.shape().str();
  const auto* a = static_cast<const unsigned char*>(sp::host_data(got, "test"));
  const auto* b = static_cast<const unsigned char*>(sp::host_data(want, "test"));
  const size_t n = size_t(got.nbytes()),
               item = size_t(got.nbytes() / std::max<int64_t>(1, got.size()));
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i])
      return ::testing::AssertionFailure()
             << "first difference at element " << i / item << " of " << got.size();
  return ::testing::AssertionSuccess();
}

Array uniform(uint32_t seed, sp::Shape shape, double lo = -2.0, double hi = 2.0) {
  return sp::random::uniform(sp::random::key(seed), shape, sp::float32, lo, hi);
}

// The bias, relu and relu-mask of a dense layer's forward pass, as reverse mode stages them.
std::pair<Array, Array> bias_relu(const Array& h, const Array& b) {
  Array z = h + b;
  return {sp::maximum(z, 0.0f), z > 0.0f};
}

TEST(Fusion, BiasReluAndMaskBecomeOneFusion) {
  auto jf = sp::jit(bias_relu);
  Array h = uniform(1, {32, 8}), b = uniform(2, {8});
  EXPECT_EQ(jf.lower_optimized(h, b).str(), R"({ lambda ; a:f32[32,8] b:f32[8]. let
    c:f32[1,8] = broadcast_in_dim[broadcast_dimensions=(1,)] b
    d:f32[32,8] e:bool[32,8] = fusion[
      jaxpr={ lambda ; f:f32[32,8] g:f32[1,8]. let
          h:f32[32,8] = add f g
          i:f32[32,8] = max h 0.0:f32[]
          j:bool[32,8] = gt h 0.0:f32[]
        in (i, j) }
    ] a c
  in (d, e) })");
  auto [relu, mask] = jf(h, b);
  auto [want_relu, want_mask] = bias_relu(h, b);
  EXPECT_TRUE(bitwise_equal(relu, want_relu));
  EXPECT_TRUE(bitwise_equal(mask, want_mask));
}

struct Case {
  std::string name;
  std::function<std::vector<Array>(const std::vector<Array>&)> fn;
  std::vector<Array> args;
};

std::vector<Case> cases() {
  using V = std::vector<Array>;
  std::vector<Case> out;
  // Flat tiling: one tile, several tiles with a short last one, tiles spread over threads.
  for (sp::Shape shape : {sp::Shape{1000}, sp::Shape{3, 70001}, sp::Shape{256, 1024}}) {
    out.push_back({"chain " + shape.str(),
                   [](const V& a) { return V{sp::tanh(a[0] * a[1] + 0.5f) - sp::exp(-a[0])}; },
                   {uniform(3, shape), uniform(4, shape)}});
  }
  // Row tiling: operands broadcast along dim 0 and along dim 1.
  out.push_back({"rows",
                 [](const V& a) { return V{sp::sin((a[0] + a[1]) * a[2])}; },
                 {uniform(5, {300, 129}), uniform(6, {1, 129}), uniform(7, {300, 1})}});
  // Values of other element sizes in one chain (run with x64 on): f64, bool and int32 tiles
  // at their own offsets.
  out.push_back({"dtypes",
                 [](const V& a) {
                   Array wide = a[0].astype(sp::float64) * 3.0;
                   Array mask = wide > 1.0;
                   Array ints = (wide * 100.0).astype(sp::int32) + 7;
                   return V{sp::where(mask, wide, -wide) + (ints * 3).astype(sp::float64), mask};
                 },
                 {uniform(8, {5, 40000})}});
  // A select against a zeros array, and a clamp.
  out.push_back({"select and clamp",
                 [](const V& a) {
                   Array zeros = sp::zeros_like(a[0]);
                   return V{sp::where(a[0] > 0.0f, a[1], zeros),
                            sp::lax::clamp(sp::full({}, -0.5f, sp::float32), a[0] * a[1],
                                           sp::full({}, 0.5f, sp::float32))};
                 },
                 {uniform(9, {70000}), uniform(10, {70000})}});
  // An intermediate read by a reduction between fused equations: it is written out, and the
  // equations after the reduction form another fusion.
  out.push_back({"split by a reduction",
                 [](const V& a) {
                   Array t = a[0] * 2.0f + 1.0f;
                   Array s = sp::sum(t);
                   return V{sp::exp(t - s / 1e5f) * 0.5f, s};
                 },
                 {uniform(11, {50000}, -0.1, 0.1)}});
  // A small leading dim with a broadcast operand: not fused (too few rows to tile).
  out.push_back({"few rows",
                 [](const V& a) { return V{sp::exp(a[0] + a[1]) * 2.0f}; },
                 {uniform(12, {4, 30000}), uniform(13, {1, 30000})}});
  // Integer arithmetic and shifts.
  out.push_back({"integers",
                 [](const V& a) {
                   Array i = a[0].astype(sp::int32);
                   return V{sp::lax::shift_right_logical(i * 3 + 7, sp::full({}, 1, sp::int32)) ^
                            i};
                 },
                 {uniform(14, {66000}, -1000.0, 1000.0)}});
  return out;
}

TEST(Fusion, ResultsEqualEagerBitForBit) {
  spmd_test::X64Scope x64;
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    auto jf = sp::jit(c.fn);
    std::vector<Array> got = jf(c.args), want = c.fn(c.args);
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(bitwise_equal(got[k], want[k])) << k;
    // The optimised Program is well typed.
    EXPECT_NO_THROW(jf.lower_optimized(c.args).program().verify());
  }
}

TEST(Fusion, WhichEquationsAreFused) {
  spmd_test::X64Scope x64;
  std::vector<Case> all = cases();
  auto text = [&](const std::string& name) {
    for (const Case& c : all)
      if (c.name == name) return sp::jit(c.fn).lower_optimized(c.args).str();
    return std::string("no case ") + name;
  };
  EXPECT_EQ(count(text("chain (3, 70001)"), "fusion"), 1);
  EXPECT_EQ(count(text("rows"), "fusion"), 1);
  EXPECT_EQ(count(text("dtypes"), "fusion"), 1);
  // The reduction reads t: t's chain is written out before it, the rest is fused after it.
  std::string split = text("split by a reduction");
  EXPECT_EQ(count(split, "fusion"), 2) << split;
  EXPECT_LT(split.find("fusion"), split.find("reduce_sum")) << split;
  EXPECT_GT(split.rfind("fusion"), split.find("reduce_sum")) << split;
  EXPECT_EQ(count(text("few rows"), "fusion"), 0);
}

TEST(ForwardScalarBroadcasts, SelectAgainstZerosReadsTheScalar) {
  auto f = [](const Array& x, const Array& y) { return sp::where(x > 0.0f, y, sp::zeros_like(y)); };
  Array x = uniform(15, {64, 64}), y = uniform(16, {64, 64});
  std::string after = sp::jit(f).lower_optimized(x, y).str();
  EXPECT_EQ(count(after, "broadcast_in_dim"), 0) << after;
  EXPECT_TRUE(bitwise_equal(sp::jit(f)(x, y), f(x, y)));
}

TEST(InlineCalls, JitAndCustomJvpCallsLeaveNoCall) {
  // relu is a custom_jvp around a jit call named relu, as jax.nn.relu is.
  auto inner = sp::jit([](const Array& x) { return sp::relu(x) * 2.0f; });
  auto loss = [&](const Array& w, const Array& x) { return sp::sum(inner(sp::dot(x, w))); };
  Array w = uniform(17, {16, 8}), x = uniform(18, {32, 16});
  auto g = sp::jit(sp::grad(loss));
  std::string before = g.lower(w, x).str(), after = g.lower_optimized(w, x).str();
  EXPECT_GT(count(before, "custom_jvp_call"), 0) << before;
  EXPECT_GT(count(before, "jit["), 0) << before;
  EXPECT_EQ(count(after, "custom_jvp_call"), 0) << after;
  EXPECT_EQ(count(after, "jit["), 0) << after;
  EXPECT_TRUE(bitwise_equal(g(w, x), sp::grad(loss)(w, x)));
}

TEST(Fusion, DonatedBufferTakesASingleOutput) {
  // The single output is written by the last step, after every read of `a`: it takes a's buffer.
  auto last = [](const Array& a) { return sp::sin(a) * 2.0f + a; };
  Array x = uniform(19, {4096});
  std::vector<float> values = x.to_vector<float>();
  const void* before = sp::host_data(x, "test");
  Array y = sp::jit(last, {.donate_argnums = {0}})(x);
  EXPECT_EQ(sp::host_data(y, "test"), before);
  EXPECT_TRUE(bitwise_equal(y, last(sp::array(values, sp::Shape{4096}))));
  // With two outputs, the first is written before a later step reads `a`: nothing takes it.
  auto early = [](const Array& a) {
    Array t = sp::sin(a);
    return std::pair<Array, Array>{t, t * a};
  };
  Array x2 = sp::array(values, sp::Shape{4096});
  const void* before2 = sp::host_data(x2, "test");
  auto [t, u] = sp::jit(early, {.donate_argnums = {0}})(x2);
  EXPECT_NE(sp::host_data(t, "test"), before2);
  EXPECT_NE(sp::host_data(u, "test"), before2);
  auto [want_t, want_u] = early(sp::array(values, sp::Shape{4096}));
  EXPECT_TRUE(bitwise_equal(t, want_t));
  EXPECT_TRUE(bitwise_equal(u, want_u));
}

}  // namespace

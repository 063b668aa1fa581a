// Elementwise fusion and the passes that prepare it (inlined calls, scalar broadcasts read
// directly): which equations are fused, and that fused Programs give the eager values bit for bit
// (the same kernels run, tile by tile).
#include <gtest/gtest.h>
#include <spmd/spmd.h>

#include "compile/fusion.h"
#include "core/array_impl.h"
#include "ir/program.h"
#include "prims/primitive.h"
#include "support/config_scope.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
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

// Byte for byte; with any_nan, a NaN equals any NaN (which operand's NaN an addition passes on
// is the compiler's choice of operand order in the kernels, and IEEE leaves it open).
::testing::AssertionResult bitwise_equal(const Array& got, const Array& want,
                                         bool any_nan = false) {
  if (got.shape() != want.shape() || got.dtype() != want.dtype())
    return ::testing::AssertionFailure()
           << "got " << sp::dtype_name(got.dtype()) << got.shape().str() << ", want "
           << sp::dtype_name(want.dtype()) << want.shape().str();
  const auto* a = static_cast<const unsigned char*>(sp::host_data(got, "test"));
  const auto* b = static_cast<const unsigned char*>(sp::host_data(want, "test"));
  const size_t n = size_t(got.nbytes()),
               item = size_t(got.nbytes() / std::max<int64_t>(1, got.size()));
  if (any_nan && got.dtype() == sp::float32) {
    std::vector<float> x = got.to_vector<float>(), y = want.to_vector<float>();
    for (size_t i = 0; i < x.size(); ++i) {
      uint32_t xb, yb;
      std::memcpy(&xb, &x[i], 4);
      std::memcpy(&yb, &y[i], 4);
      if (xb != yb && !(std::isnan(x[i]) && std::isnan(y[i])))
        return ::testing::AssertionFailure() << "first difference at element " << i << " of "
                                             << got.size() << ": " << x[i] << " against " << y[i];
    }
    return ::testing::AssertionSuccess();
  }
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
    c:f32[1,8] = reshape[dimensions=None new_sizes=(1, 8) sharding=None] b
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

namespace {

// Whether each fusion of f's optimised Program runs generated code.
std::vector<bool> generated_loops(const sp::ClosedJaxpr& jaxpr) {
  std::vector<bool> out;
  for (const sp::Equation& e : jaxpr.program().equations)
    if (e.primitive->name == "fusion") out.push_back(sp::fusion_runs_generated_loop(e.params));
  return out;
}

// Every pair of these values: signed zeros, infinities, NaN, a denormal (flushed, as XLA:CPU
// does), the largest finite float, and ordinary numbers.
std::pair<Array, Array> special_pairs(int64_t repeat_to) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const std::vector<float> v{0.0f,    -0.0f,    inf,  -inf,  nan,  1e-40f, -1e-40f,
                             3.4e38f, -3.4e38f, 1.0f, -1.0f, 2.5f, -0.75f, 1e-30f};
  std::vector<float> a, b;
  while (int64_t(a.size()) < repeat_to)
    for (float x : v)
      for (float y : v) {
        a.push_back(x);
        b.push_back(y);
      }
  a.resize(size_t(repeat_to));
  b.resize(size_t(repeat_to));
  return {sp::array(a, sp::Shape{repeat_to}), sp::array(b, sp::Shape{repeat_to})};
}

TEST(FusedLoop, ArithmeticChainsRunGeneratedCodeAndEqualTheKernelsBitForBit) {
  using V = std::vector<Array>;
  std::vector<std::pair<std::string, std::function<V(const V&)>>> fns = {
      {"add sub mul", [](const V& a) { return V{((a[0] * 2.0f + a[1]) * 0.5f - a[0]) * a[1]}; }},
      {"div", [](const V& a) { return V{a[0] / a[1] + a[1] / a[0]}; }},
      {"div by a literal", [](const V& a) { return V{(a[0] + a[1]) / 3.0f}; }},
      {"div by a 0-d input", [](const V& a) { return V{(a[0] - a[1]) / a[2]}; }},
      {"max min",
       [](const V& a) {
         Array m = sp::maximum(a[0], a[1]);
         return V{m + sp::minimum(a[1], a[0]) * 0.5f, sp::minimum(m, a[0] * 2.0f)};
       }},
      {"max with a literal", [](const V& a) { return V{sp::maximum(a[0] * a[1], 0.0f) - a[1]}; }},
      {"neg abs", [](const V& a) { return V{-sp::abs(a[0] - a[1]) + sp::abs(-a[1] * a[0])}; }},
      {"intermediate output",
       [](const V& a) {
         Array t = a[0] * a[1];
         return V{t, t + a[0], -t};
       }},
  };
  // Lengths around the 8-lane passes and the threads' ranges: the masked tail of 1..7 lanes.
  for (int64_t n : {1, 7, 8, 9, 15, 196, 70001}) {
    auto [x, y] = special_pairs(n);
    Array s = sp::full({}, -4.0f, sp::float32);
    for (const auto& [name, fn] : fns) {
      SCOPED_TRACE(name + " on " + std::to_string(n));
      V args{x, y, s};
      auto jf = sp::jit(fn);
      EXPECT_EQ(generated_loops(jf.lower_optimized(args)), std::vector<bool>{true});
      V got = jf(args), want = fn(args);
      ASSERT_EQ(got.size(), want.size());
      for (size_t k = 0; k < got.size(); ++k)
        EXPECT_TRUE(bitwise_equal(got[k], want[k], /*any_nan=*/true)) << k;
    }
  }
}

TEST(FusedLoop, OtherChainsKeepTheTileKernel) {
  Array x = uniform(20, {4096}), y = uniform(21, {4096});
  // A transcendental, integers, and more live values than registers: each keeps calling the
  // equations' kernels per tile, with the same values.
  auto tanh_chain = [](const Array& a, const Array& b) { return sp::tanh(a * b) + a; };
  auto mask_chain = [](const Array& a, const Array& b) {
    return (a * 100.0f).astype(sp::int32).astype(sp::float32) + b;
  };
  auto wide = [](const Array& a, const Array& b) {
    std::vector<Array> t;
    for (int i = 0; i < 14; ++i) t.push_back(a * float(i + 1) + b);
    Array sum = t[0];
    for (int i = 1; i < 14; ++i) sum = sum + t[size_t(i)] * t[size_t(13 - i)];
    return sum;
  };
  for (auto [name, f] :
       std::vector<std::pair<std::string, std::function<Array(const Array&, const Array&)>>>{
           {"tanh", tanh_chain}, {"mask", mask_chain}, {"wide", wide}}) {
    SCOPED_TRACE(name);
    auto jf = sp::jit(f);
    EXPECT_EQ(generated_loops(jf.lower_optimized(x, y)), std::vector<bool>{false});
    EXPECT_TRUE(bitwise_equal(jf(x, y), f(x, y)));
  }
}

}  // namespace

namespace {

TEST(FusedLoop, RepeatedConstantsAndDivisorsShareRegisters) {
  // Three optimizer-like updates joined by a shared scale repeat four literals and a 0-d divisor:
  // one register each, where a register per use would need more than the 13 there are.
  using V = std::vector<Array>;
  auto f = [](const V& a) {
    const Array scale = a[6] * 2.0f;
    V out;
    for (int i = 0; i < 3; ++i) {
      const Array &g = a[size_t(2 * i)], &m = a[size_t(2 * i + 1)];
      out.push_back((m * 0.9f + g * 0.1f) * scale / a[7]);
      out.push_back((m * 0.999f + g * g * 0.001f) * scale / a[7]);
    }
    return out;
  };
  V args;
  for (int i = 0; i < 7; ++i) args.push_back(uniform(30 + uint32_t(i), {1000}));
  args.push_back(sp::full({}, 0.75f, sp::float32));
  auto jf = sp::jit(f);
  EXPECT_EQ(generated_loops(jf.lower_optimized(args)), std::vector<bool>{true});
  V got = jf(args), want = f(args);
  for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(bitwise_equal(got[k], want[k])) << k;
}

TEST(FusedLoop, ChainTooLongForTheCodeBufferKeepsTheTiles) {
  // 1200 max/min steps with a few values live: more code than the generator's buffer holds.
  auto f = [](const Array& a, const Array& b) {
    Array t = a;
    for (int i = 0; i < 600; ++i) t = sp::minimum(sp::maximum(t, b * 0.5f), a + 1.0f);
    return t;
  };
  Array x = uniform(22, {1000}), y = uniform(23, {1000});
  auto jf = sp::jit(f);
  EXPECT_EQ(generated_loops(jf.lower_optimized(x, y)), std::vector<bool>{false});
  EXPECT_TRUE(bitwise_equal(jf(x, y), f(x, y)));
}

}  // namespace

namespace {

TEST(FusedLoop, RowsWithBroadcastOperandsRunGeneratedCode) {
  // A dense layer's bias, relu and mask, and a per-row scale: the loop runs once per row, the
  // bias a row shared by all, the scale one value per row. Rows of 1001 end in a 1-lane tail.
  auto layer = [](const Array& h, const Array& bias, const Array& scale) {
    Array z = (h + bias) * scale;
    return std::vector<Array>{sp::maximum(z, 0.0f), z > 0.0f, z - bias};
  };
  for (sp::Shape shape : {sp::Shape{40, 1001}, sp::Shape{300, 64}}) {
    SCOPED_TRACE(shape.str());
    auto [x, y] = special_pairs(shape.size());
    Array h = x.reshape(shape);
    Array bias = y.reshape(shape)[0].reshape({1, shape[1]});
    Array scale = uniform(24, {shape[0], 1});
    auto jf = sp::jit(layer);
    EXPECT_EQ(generated_loops(jf.lower_optimized(h, bias, scale)), std::vector<bool>{true});
    std::vector<Array> got = jf(h, bias, scale), want = layer(h, bias, scale);
    for (size_t k = 0; k < got.size(); ++k)
      EXPECT_TRUE(bitwise_equal(got[k], want[k], /*any_nan=*/true)) << k;
  }
  // Rows shorter than the loop's passes keep the tiles.
  Array h = uniform(25, {64, 16}), bias = uniform(26, {1, 16}), scale = uniform(27, {64, 1});
  auto jf = sp::jit(layer);
  EXPECT_EQ(generated_loops(jf.lower_optimized(h, bias, scale)), std::vector<bool>{false});
  std::vector<Array> got = jf(h, bias, scale), want = layer(h, bias, scale);
  for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(bitwise_equal(got[k], want[k])) << k;
}

}  // namespace

namespace {

TEST(FusedLoop, BroadcastScalarsAreReadAsScalars) {
  // max's gradient mask selects between broadcast 1s and 2s, and adam divides by the broadcast of
  // a weakly typed bias correction, converted: neither broadcast can be forwarded into its
  // equation (a select needs cases of its predicate's shape, a conversion keeps its operand's
  // shape), but the generated loop reads the scalars from registers and the broadcasts go.
  auto f = [](const Array& h, const Array& b, const Array& one, const Array& count) {
    const sp::Shape shape = h.shape();
    auto filled = [&](const Array& v) { return sp::broadcast_to(v, shape); };
    Array z = h + b, relu = sp::maximum(z, 0.0f);
    Array mask = sp::where(z == relu, filled(one), filled(one * 0.0f)) /
                 sp::where(relu == 0.0f, filled(one * 2.0f), filled(one));
    // The count made a weak float first, as optax's traced bias correction sees it (a concrete
    // integer exponent would make jnp.power an integer_pow when f runs eagerly).
    Array correction = Array(1) - sp::power(Array(0.9), count * 1.0);
    return std::vector<Array>{relu, mask, z / filled(correction)};
  };
  auto [x, y] = special_pairs(64 * 80);
  Array h = x.reshape({64, 80}), b = uniform(28, {1, 80});
  Array one = sp::full({}, 1.0f, sp::float32), count = sp::full({}, 3, sp::int32);
  auto jf = sp::jit(f);
  const sp::ClosedJaxpr optimized = jf.lower_optimized(h, b, one, count);
  EXPECT_EQ(::count(optimized.str(), "broadcast_in_dim"), 0) << optimized.str();
  // The bias correction's own 0-d fusion, then the layer's, as generated code.
  EXPECT_EQ(generated_loops(optimized), (std::vector<bool>{false, true}));
  std::vector<Array> got = jf(h, b, one, count), want = f(h, b, one, count);
  for (size_t k = 0; k < got.size(); ++k)
    EXPECT_TRUE(bitwise_equal(got[k], want[k], /*any_nan=*/true)) << k;
}

}  // namespace

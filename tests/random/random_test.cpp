// jax.random reproduced bit for bit: the threefry test vectors, the random primitives, and every
// function against outputs recorded from JAX (tools/goldens/gen_random.py) in both threefry
// modes, with and without x64.
#include "prims/primitive.h"

#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "support/golden.h"

#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <tuple>

namespace sp = spmd;
namespace rnd = spmd::random;
using sp::Array;

namespace {

// ---- the cases of tools/goldens/gen_random.py, by name ------------------------------------------

using Sampler = std::function<Array(const Array& key, const sp::Shape& shape)>;
using Fixed = std::function<Array(const Array& key)>;

Array logits() {
  return sp::log(sp::array({{0.1f, 0.2f, 0.7f}, {0.5f, 0.25f, 0.25f}}));
}

sp::Shape with_last(const sp::Shape& s, int64_t d) {
  sp::Shape out = s;
  out.push_back(d);
  return out;
}

const std::map<std::string, Sampler>& samplers_x32() {
  static const std::map<std::string, Sampler> s = {
      {"bits_u32", [](auto& k, auto& s) { return rnd::bits(k, s); }},
      {"bits_u8", [](auto& k, auto& s) { return rnd::bits(k, s, sp::uint8); }},
      {"bits_u16", [](auto& k, auto& s) { return rnd::bits(k, s, sp::uint16); }},
      {"uniform_f32", [](auto& k, auto& s) { return rnd::uniform(k, s); }},
      {"uniform_f32_range",
       [](auto& k, auto& s) { return rnd::uniform(k, s, sp::float32, -3.3, 5.7); }},
      {"uniform_bf16", [](auto& k, auto& s) { return rnd::uniform(k, s, sp::bfloat16); }},
      {"uniform_bf16_range",
       [](auto& k, auto& s) { return rnd::uniform(k, s, sp::bfloat16, -3.3, 5.7); }},
      {"uniform_f16", [](auto& k, auto& s) { return rnd::uniform(k, s, sp::float16); }},
      {"uniform_f16_range",
       [](auto& k, auto& s) { return rnd::uniform(k, s, sp::float16, -3.0, 5.0); }},
      {"normal_f32", [](auto& k, auto& s) { return rnd::normal(k, s); }},
      {"normal_bf16", [](auto& k, auto& s) { return rnd::normal(k, s, sp::bfloat16); }},
      {"normal_f16", [](auto& k, auto& s) { return rnd::normal(k, s, sp::float16); }},
      {"truncated_normal_f32",
       [](auto& k, auto& s) { return rnd::truncated_normal(k, -1.5, 0.5, s); }},
      {"truncated_normal_bf16",
       [](auto& k, auto& s) { return rnd::truncated_normal(k, -1.0, 2.0, s, sp::bfloat16); }},
      {"truncated_normal_f16",
       [](auto& k, auto& s) { return rnd::truncated_normal(k, -2.0, 1.0, s, sp::float16); }},
      {"truncated_normal_f32_b",
       [](auto& k, auto& s) { return rnd::truncated_normal(k, 0.25, 4.0, s); }},
      {"truncated_normal_bf16_b",
       [](auto& k, auto& s) { return rnd::truncated_normal(k, -0.3, 3.7, s, sp::bfloat16); }},
      {"truncated_normal_f16_b",
       [](auto& k, auto& s) { return rnd::truncated_normal(k, -3.1, 0.2, s, sp::float16); }},
      {"bernoulli", [](auto& k, auto& s) { return rnd::bernoulli(k, 0.3, s); }},
      {"bernoulli_bf16",
       [](auto& k, auto& s) { return rnd::bernoulli(k, Array(0.7f).astype(sp::bfloat16), s); }},
      {"randint", [](auto& k, auto& s) { return rnd::randint(k, s, 0, 10); }},
      {"randint_i8", [](auto& k, auto& s) { return rnd::randint(k, s, -5, 3, sp::int8); }},
      {"randint_u8_full", [](auto& k, auto& s) { return rnd::randint(k, s, 0, 256, sp::uint8); }},
      {"randint_i16", [](auto& k, auto& s) { return rnd::randint(k, s, -1000, 1000, sp::int16); }},
      {"randint_u16_full",
       [](auto& k, auto& s) { return rnd::randint(k, s, 0, 65536, sp::uint16); }},
      {"randint_u32",
       [](auto& k, auto& s) { return rnd::randint(k, s, 3, INT32_MAX, sp::uint32); }},
      {"randint_i32_full",
       [](auto& k, auto& s) { return rnd::randint(k, s, INT32_MIN, INT32_MAX); }},
      {"randint_empty_range", [](auto& k, auto& s) { return rnd::randint(k, s, 7, 3); }},
      {"randint_float_bounds", [](auto& k, auto& s) { return rnd::randint(k, s, 2.7, 9.2); }},
      {"categorical",
       [](auto& k, auto& s) { return rnd::categorical(k, logits(), -1, with_last(s, 2)); }},
  };
  return s;
}

const std::map<std::string, Sampler>& samplers_x64() {
  static const std::map<std::string, Sampler> s = {
      {"bits_u64", [](auto& k, auto& s) { return rnd::bits(k, s, sp::uint64); }},
      {"bits_u32", [](auto& k, auto& s) { return rnd::bits(k, s, sp::uint32); }},
      {"uniform_f64", [](auto& k, auto& s) { return rnd::uniform(k, s, sp::float64); }},
      {"uniform_f64_range",
       [](auto& k, auto& s) { return rnd::uniform(k, s, sp::float64, -3.3, 5.7); }},
      {"uniform_f32_range",
       [](auto& k, auto& s) { return rnd::uniform(k, s, sp::float32, -3.3, 5.7); }},
      {"normal_f64", [](auto& k, auto& s) { return rnd::normal(k, s, sp::float64); }},
      {"truncated_normal_f64",
       [](auto& k, auto& s) { return rnd::truncated_normal(k, -1.5, 0.5, s, sp::float64); }},
      {"bernoulli", [](auto& k, auto& s) { return rnd::bernoulli(k, 0.3, s); }},
      {"randint_i64",
       [](auto& k, auto& s) {
         return rnd::randint(k, s, -(int64_t(1) << 40), int64_t(1) << 40, sp::int64);
       }},
      {"randint_u64",
       [](auto& k, auto& s) {
         Array hi = sp::array(std::vector<uint64_t>{(uint64_t(1) << 63) + 12345}, sp::Shape{});
         return rnd::randint(k, s, 5, hi, sp::uint64);
       }},
      {"randint_i32_wide",
       [](auto& k, auto& s) {
         return rnd::randint(k, s, -(int64_t(1) << 31), int64_t(1) << 31, sp::int32);
       }},
      {"randint_u32_full",
       [](auto& k, auto& s) { return rnd::randint(k, s, 0, int64_t(1) << 32, sp::uint32); }},
      {"randint_i8", [](auto& k, auto& s) { return rnd::randint(k, s, -5, 3, sp::int8); }},
  };
  return s;
}

const std::map<std::string, Fixed>& fixed_x32() {
  static const std::map<std::string, Fixed> s = {
      {"key", [](auto& k) { return k; }},
      {"split_0", [](auto& k) { return rnd::split(k, 0); }},
      {"split_1", [](auto& k) { return rnd::split(k, 1); }},
      {"split_2", [](auto& k) { return rnd::split(k); }},
      {"split_5", [](auto& k) { return rnd::split(k, 5); }},
      {"fold_in_0", [](auto& k) { return rnd::fold_in(k, 0); }},
      {"fold_in_7", [](auto& k) { return rnd::fold_in(k, 7); }},
      {"fold_in_4000000000", [](auto& k) { return rnd::fold_in(k, 4000000000u); }},
      {"permutation_0", [](auto& k) { return rnd::permutation(k, 0); }},
      {"permutation_1", [](auto& k) { return rnd::permutation(k, 1); }},
      {"permutation_10", [](auto& k) { return rnd::permutation(k, 10); }},
      {"permutation_2000", [](auto& k) { return rnd::permutation(k, 2000); }},
      {"permutation_scalar_array", [](auto& k) { return rnd::permutation(k, Array(6), 0); }},
      {"permutation_floats", [](auto& k) { return rnd::permutation(k, sp::arange(9.0f) / 2); }},
      {"permutation_rows",
       [](auto& k) {
         return rnd::permutation(k, sp::arange(12).reshape({4, 3}), 0);
       }},
      {"permutation_columns",
       [](auto& k) {
         return rnd::permutation(k, sp::arange(12).reshape({4, 3}), 1);
       }},
      {"categorical", [](auto& k) { return rnd::categorical(k, logits()); }},
      {"categorical_axis0", [](auto& k) { return rnd::categorical(k, logits(), 0); }},
      {"categorical_axis0_shape",
       [](auto& k) {
         return rnd::categorical(k, logits(), 0, sp::Shape{4, 3});
       }},
      {"categorical_broadcast",
       [](auto& k) {
         return rnd::categorical(k, sp::lax::slice_in_dim(logits(), 0, 1), -1, sp::Shape{6});
       }},
      {"categorical_bf16",
       [](auto& k) { return rnd::categorical(k, logits().astype(sp::bfloat16)); }},
      {"uniform_array_bounds",
       [](auto& k) {
         return rnd::uniform(k, {3, 4}, sp::float32, sp::arange(4.0f), sp::arange(4.0f) * 2 + 1);
       }},
      {"truncated_normal_array_bounds",
       [](auto& k) {
         return rnd::truncated_normal(k, sp::array({-3.0f, -1.0f, 0.0f}),
                                      sp::array({1.0f, 2.0f}, sp::Shape{2, 1}));
       }},
      {"bernoulli_array_p",
       [](auto& k) {
         return rnd::bernoulli(k, sp::array({0.1f, 0.5f, 0.9f}));
       }},
      {"bernoulli_array_p_shape",
       [](auto& k) {
         return rnd::bernoulli(k, sp::array({0.1f, 0.5f, 0.9f}), sp::Shape{2, 3});
       }},
      {"randint_array_bounds",
       [](auto& k) {
         return rnd::randint(k, {2, 3}, sp::array({0, 10, -5}),
                             sp::array({5, 100}, sp::Shape{2, 1}));
       }},
  };
  return s;
}

const std::map<std::string, Fixed>& fixed_x64() {
  static const std::map<std::string, Fixed> s = {
      {"key", [](auto& k) { return k; }},
      {"split_3", [](auto& k) { return rnd::split(k, 3); }},
      {"fold_in_7", [](auto& k) { return rnd::fold_in(k, 7); }},
      {"permutation_10", [](auto& k) { return rnd::permutation(k, 10); }},
      {"categorical",
       [](auto& k) {
         return rnd::categorical(k, sp::log(sp::array({{0.1, 0.2, 0.7}, {0.5, 0.25, 0.25}})));
       }},
  };
  return s;
}

// ---- running the goldens ------------------------------------------------------------------------

struct Case {
  std::string mode, name, shape;
  uint64_t seed = 0;
};

// "mode|name|seed|shape"
Case parse(const std::string& key) {
  const size_t a = key.find('|'), b = key.find('|', a + 1), c = key.find('|', b + 1);
  return {key.substr(0, a), key.substr(a + 1, b - a - 1), key.substr(c + 1),
          std::stoull(key.substr(b + 1, c - b - 1))};
}

sp::Shape parse_shape(const std::string& s) {
  std::vector<int64_t> dims;
  if (s == "s") return sp::Shape{};
  for (size_t at = 0; at <= s.size();) {
    size_t x = s.find('x', at);
    if (x == std::string::npos) x = s.size();
    dims.push_back(std::stoll(s.substr(at, x - at)));
    at = x + 1;
  }
  return sp::Shape(dims);
}

// Every case is compared bit for bit.
::testing::AssertionResult matches(const std::string&, const Array& got, const Array& expected) {
  return spmd_test::arrays_equal(got, expected);
}

Array run_case(const Case& c, const Array& key, bool x64) {
  const auto& samplers = x64 ? samplers_x64() : samplers_x32();
  const auto& fixed = x64 ? fixed_x64() : fixed_x32();
  if (c.shape == "-") {
    auto it = fixed.find(c.name);
    if (it == fixed.end()) throw std::runtime_error("no C++ case for " + c.name);
    return it->second(key);
  }
  auto it = samplers.find(c.name);
  if (it == samplers.end()) throw std::runtime_error("no C++ sampler for " + c.name);
  return it->second(key, parse_shape(c.shape));
}

// Runs every "mode|..." golden of `file`; returns how many were checked.
size_t check_goldens(const char* file, bool x64) {
  size_t checked = 0;
  sp::config::enable_x64(x64);
  for (const auto& [name, expected] : spmd_test::load_golden(file)) {
    if (name.rfind("part|", 0) != 0 && name.rfind("stable|", 0) != 0) continue;
    const Case c = parse(name);
    sp::config::set_threefry_partitionable(c.mode == "part");
    Array got = run_case(c, rnd::key(c.seed), x64);
    EXPECT_TRUE(matches(c.name, got, expected)) << name;
    ++checked;
  }
  sp::config::set_threefry_partitionable(true);
  sp::config::enable_x64(false);
  return checked;
}

// The Threefry-2x32 definition of JAX_FACTS.md, written out plainly.
std::pair<uint32_t, uint32_t> reference_threefry(uint32_t k1, uint32_t k2, uint32_t x1,
                                                 uint32_t x2) {
  const uint32_t ks[3] = {k1, k2, k1 ^ k2 ^ 0x1BD11BDAu};
  const int rot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  x1 += ks[0];
  x2 += ks[1];
  for (int i = 0; i < 5; ++i) {
    for (int r : rot[i % 2]) {
      x1 += x2;
      x2 = (x2 << r) | (x2 >> (32 - r));
      x2 ^= x1;
    }
    x1 += ks[(i + 1) % 3];
    x2 += ks[(i + 2) % 3] + uint32_t(i + 1);
  }
  return {x1, x2};
}

Array u32(std::vector<uint32_t> v) {
  return sp::array(v);
}
Array u32_scalar(uint32_t v) {
  return sp::array(std::vector<uint32_t>{v}, sp::Shape{});
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const sp::Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

// ---- threefry -----------------------------------------------------------------------------------

TEST(Threefry, MatchesReferenceVectors) {
  auto run = [](uint32_t k1, uint32_t k2, uint32_t x1, uint32_t x2) {
    auto [y1, y2] = rnd::threefry2x32(u32({k1}), u32({k2}), u32({x1}), u32({x2}));
    return std::make_pair(y1.item<uint32_t>(), y2.item<uint32_t>());
  };
  EXPECT_EQ(run(0, 0, 0, 0), std::make_pair(0x6b200159u, 0x99ba4efeu));
  EXPECT_EQ(run(~0u, ~0u, ~0u, ~0u), std::make_pair(0x1cb996fcu, 0xbb002be7u));
  EXPECT_EQ(run(0x13198a2e, 0x03707344, 0x243f6a88, 0x85a308d3),
            std::make_pair(0xc4923a9cu, 0x483df7a0u));
}

TEST(Threefry, PrimitiveMatchesJaxWithFullAndScalarKeys) {
  const auto& g = spmd_test::load_golden("random.npz");
  const Array in[4] = {g.at("threefry|in0"), g.at("threefry|in1"), g.at("threefry|in2"),
                       g.at("threefry|in3")};
  auto [y1, y2] = rnd::threefry2x32(in[0], in[1], in[2], in[3]);
  EXPECT_TRUE(spmd_test::arrays_equal(y1, g.at("threefry|full|y1")));
  EXPECT_TRUE(spmd_test::arrays_equal(y2, g.at("threefry|full|y2")));
  auto [s1, s2] = rnd::threefry2x32(u32_scalar(0x13198A2E), u32_scalar(0x03707344), in[2], in[3]);
  EXPECT_TRUE(spmd_test::arrays_equal(s1, g.at("threefry|scalar_keys|y1")));
  EXPECT_TRUE(spmd_test::arrays_equal(s2, g.at("threefry|scalar_keys|y2")));
}

TEST(Threefry, EveryLengthAndBroadcastPatternMatchesTheDefinition) {
  // Lengths around the vector width exercise the vector loop and the scalar remainder; keys
  // broadcast along one dim go through the expanded-operand path.
  for (int64_t n : {0, 1, 7, 15, 16, 17, 31, 33, 64, 100, 257}) {
    const size_t len = static_cast<size_t>(n);
    std::vector<uint32_t> a(len), b(len), c(len), d(len);
    for (int64_t i = 0; i < n; ++i) {
      a[size_t(i)] = uint32_t(i * 2654435761u);
      b[size_t(i)] = uint32_t(i * 40503u + 7);
      c[size_t(i)] = uint32_t(i ^ 0x9e3779b9u);
      d[size_t(i)] = uint32_t(3 * i);
    }
    auto [y1, y2] = rnd::threefry2x32(u32(a), u32(b), u32(c), u32(d));
    auto [z1, z2] = rnd::threefry2x32(u32_scalar(5), u32_scalar(9), u32(c), u32(d));
    auto v1 = y1.to_vector<uint32_t>(), v2 = y2.to_vector<uint32_t>();
    auto w1 = z1.to_vector<uint32_t>(), w2 = z2.to_vector<uint32_t>();
    for (size_t i = 0; i < size_t(n); ++i) {
      ASSERT_EQ(std::make_pair(v1[i], v2[i]), reference_threefry(a[i], b[i], c[i], d[i])) << i;
      ASSERT_EQ(std::make_pair(w1[i], w2[i]), reference_threefry(5, 9, c[i], d[i])) << i;
    }
  }
  Array keys = sp::array(std::vector<uint32_t>{1, 2, 3}, sp::Shape{3, 1});
  Array counts = sp::arange(12).astype(sp::uint32).reshape({3, 4});
  auto [y1, y2] = rnd::threefry2x32(keys, keys, counts, counts);
  ASSERT_EQ(y1.shape(), (sp::Shape{3, 4}));
  EXPECT_EQ(y2.to_vector<uint32_t>()[6], reference_threefry(2, 2, 6, 6).second);
}

TEST(Threefry, RejectsNonUint32AndMismatchedShapes) {
  Array c = sp::arange(3).astype(sp::uint32);
  EXPECT_EQ(error_of([&] { rnd::threefry2x32(c, c, c, sp::arange(3)); }),
            "[threefry2x32] operands must be uint32, got int32");
  EXPECT_THROW(rnd::threefry2x32(c, c, c, sp::arange(4).astype(sp::uint32)), sp::ShapeError);
  EXPECT_THROW(rnd::threefry2x32(c.reshape({3, 1}), c, c, c), sp::ShapeError);
}

TEST(RandomPrimitives, Iota2x32ShapeGivesTheFlatIndexWords) {
  auto words = sp::bind(sp::primitive("iota_2x32_shape"), {},
                        sp::Params{{"shape", std::vector<int64_t>{2, 3}}});
  EXPECT_EQ(words[0].to_vector<uint32_t>(), std::vector<uint32_t>(6, 0u));
  EXPECT_EQ(words[1].to_vector<uint32_t>(), (std::vector<uint32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(words[1].shape(), (sp::Shape{2, 3}));
}

TEST(RandomPrimitives, FmaRoundsOnceWhereMultiplyThenAddRoundsTwice) {
  // (1 + 2^-23)(1 - 2^-23) = 1 - 2^-46: a float32 product rounds to 1 and the sum to 0.
  Array x(1.0f + std::ldexp(1.0f, -23)), y(1.0f - std::ldexp(1.0f, -23)), z(-1.0f);
  Array fused = sp::bind1(sp::primitive("fma"), {sp::full({5}, x), y, z});
  EXPECT_EQ(fused.to_vector<float>(), std::vector<float>(5, -std::ldexp(1.0f, -46)));
  EXPECT_EQ((x * y + z).item<float>(), 0.0f);
  Array h = sp::bind1(sp::primitive("fma"),
                      {Array(1.5f).astype(sp::bfloat16), Array(2.0f).astype(sp::bfloat16),
                       Array(0.25f).astype(sp::bfloat16)});
  EXPECT_EQ(h.dtype(), sp::bfloat16);
  EXPECT_EQ(h.item<float>(), 3.25f);
  sp::config::enable_x64(true);
  Array xd(1.0 + std::ldexp(1.0, -52)), yd(1.0 - std::ldexp(1.0, -52)), zd(-1.0);
  EXPECT_EQ(sp::bind1(sp::primitive("fma"), {xd, yd, zd}).item<double>(), -std::ldexp(1.0, -104));
  sp::config::enable_x64(false);
}

// ---- keys, splitting, bits ----------------------------------------------------------------------

TEST(Random, KeyTakesTheSeedAsJaxDoes) {
  EXPECT_EQ(rnd::key(42).to_vector<uint32_t>(), (std::vector<uint32_t>{0, 42}));
  // Without x64 JAX keeps the low 32 bits of a seed; with x64 it splits all 64.
  EXPECT_EQ(rnd::key((uint64_t(1) << 32) + 5).to_vector<uint32_t>(), (std::vector<uint32_t>{0, 5}));
  EXPECT_EQ(rnd::PRNGKey(uint64_t(-1)).to_vector<uint32_t>(),
            (std::vector<uint32_t>{0, 0xFFFFFFFFu}));
  sp::config::enable_x64(true);
  EXPECT_EQ(rnd::key((uint64_t(1) << 32) + 5).to_vector<uint32_t>(), (std::vector<uint32_t>{1, 5}));
  EXPECT_EQ(rnd::key(uint64_t(INT64_MIN)).to_vector<uint32_t>(),
            (std::vector<uint32_t>{0x80000000u, 0}));
  sp::config::enable_x64(false);
}

TEST(Random, DocumentedVectorsOfKeyZero) {
  Array k = rnd::key(0);
  EXPECT_EQ(rnd::split(k).to_vector<uint32_t>(),
            (std::vector<uint32_t>{1797259609u, 2579123966u, 928981903u, 3453687069u}));
  EXPECT_EQ(rnd::uniform(k, {4}).to_vector<float>(),
            (std::vector<float>{0.94766700f, 0.97857988f, 0.33229148f, 0.46866846f}));
  EXPECT_EQ(rnd::normal(k, {4, 4})[0].to_vector<float>(),
            (std::vector<float>{1.6226422f, 2.0252647f, -0.43359444f, -0.07861735f}));
}

TEST(Random, LargeDrawsHashEveryElementsIndex) {
  // Partitionable bits are y1 ^ y2 of hash(key, (0, i)): check a large draw (split across
  // threads and vector lanes) at scattered indices against the definition.
  Array k = rnd::key(7);
  const int64_t n = 300001;
  std::vector<uint32_t> bits = rnd::bits(k, {n}).to_vector<uint32_t>();
  for (int64_t i : {int64_t(0), int64_t(1), int64_t(15), int64_t(16), int64_t(65535),
                    int64_t(65536), int64_t(150000), n - 2, n - 1}) {
    auto [y1, y2] = reference_threefry(0, 7, 0, uint32_t(i));
    EXPECT_EQ(bits[size_t(i)], y1 ^ y2) << i;
  }
}

TEST(Random, EveryFunctionMatchesJaxInBothModes) {
  EXPECT_GE(check_goldens("random.npz", false), 1900u);
}

TEST(Random, SixtyFourBitFunctionsMatchJaxWithX64) {
  EXPECT_GE(check_goldens("random_x64.npz", true), 450u);
}

TEST(Random, ResultsAreStronglyTyped) {
  Array k = rnd::key(2);
  EXPECT_FALSE(rnd::uniform(k, {2}).weak_type());
  EXPECT_FALSE(rnd::normal(k, {2}).weak_type());
  EXPECT_FALSE(rnd::randint(k, {2}, 0, 10).weak_type());
  EXPECT_FALSE(rnd::randint(k, {2}, 0, 10, sp::int8).weak_type());
  EXPECT_EQ(rnd::bernoulli(k, 0.5, sp::Shape{2}).dtype(), sp::bool_);
}

TEST(Random, ResultsDoNotDependOnTheThreadCount) {
  Array k = rnd::key(9);
  auto draw = [&] {
    return std::make_tuple(rnd::normal(k, {200001}), rnd::permutation(k, 70001),
                           rnd::randint(k, {100003}, -7, 1000));
  };
  const int threads = sp::config::num_threads();
  auto [n1, p1, r1] = draw();
  sp::config::set_num_threads(1);
  auto [n2, p2, r2] = draw();
  sp::config::set_num_threads(threads);
  EXPECT_TRUE(spmd_test::arrays_equal(n1, n2));
  EXPECT_TRUE(spmd_test::arrays_equal(p1, p2));
  EXPECT_TRUE(spmd_test::arrays_equal(r1, r2));
}

TEST(Random, SixtyFourBitRequestsWithoutX64BecomeThirtyTwoBit) {
  Array k = rnd::key(3);
  Array b = rnd::bits(k, {5}, sp::uint64);
  EXPECT_EQ(b.dtype(), sp::uint32);
  EXPECT_TRUE(spmd_test::arrays_equal(b, rnd::bits(k, {5})));
  EXPECT_EQ(rnd::uniform(k, {2}, sp::float64).dtype(), sp::float32);
  EXPECT_EQ(rnd::randint(k, {2}, 0, 5, sp::int64).dtype(), sp::int32);
}

TEST(Random, ShuffleTakesOneSortRoundUpTo1625ElementsAndTwoAbove) {
  // JAX's round count is ceil(3 ln n / ln(2^32 - 1)); each round splits the key and sorts by
  // fresh 32-bit keys.
  auto rounds_of_sorting = [](Array key, int n, int rounds) {
    Array x = sp::arange(n);
    for (int r = 0; r < rounds; ++r) {
      Array keys = rnd::split(key);
      key = keys[0];
      x = sp::lax::sort({rnd::bits(keys[1], {n}), x}, 0, 1)[1];
    }
    return x;
  };
  Array k = rnd::key(1);
  EXPECT_TRUE(spmd_test::arrays_equal(rnd::permutation(k, 1625), rounds_of_sorting(k, 1625, 1)));
  EXPECT_TRUE(spmd_test::arrays_equal(rnd::permutation(k, 1626), rounds_of_sorting(k, 1626, 2)));
  EXPECT_FALSE(sp::array_equal(rnd::permutation(k, 1626), rounds_of_sorting(k, 1626, 1)));
}

// ---- errors -------------------------------------------------------------------------------------

TEST(Random, BadKeysAreRejectedWithTheApiName) {
  EXPECT_EQ(error_of([] { rnd::split(sp::zeros({3}, sp::uint32)); }),
            "[random.split] expected a key array of shape (2,) and dtype uint32, got an array of "
            "shape (3,) and dtype uint32");
  EXPECT_EQ(error_of([] { rnd::uniform(sp::zeros({2}, sp::int32)); }),
            "[random.uniform] expected a key array of shape (2,) and dtype uint32, got an array "
            "of shape (2,) and dtype int32");
  Array batch = rnd::split(rnd::key(0), 3);
  EXPECT_THROW(rnd::fold_in(batch, 1), sp::TypeError);
  EXPECT_THROW(rnd::normal(batch, {2}), sp::TypeError);
  EXPECT_THROW(rnd::permutation(batch, 3), sp::TypeError);
  EXPECT_THROW(rnd::categorical(batch, logits()), sp::TypeError);
  EXPECT_THROW(rnd::bits(Array(), {2}), sp::ValueError);
}

TEST(Random, BadDtypesAreRejectedAsJaxDoes) {
  Array k = rnd::key(1);
  EXPECT_EQ(error_of([&] { rnd::bits(k, {2}, sp::float32); }),
            "[random.bits] dtype argument must be an unsigned int dtype, got float32");
  EXPECT_THROW(rnd::bits(k, {2}, sp::int32), sp::ValueError);
  EXPECT_EQ(error_of([&] { rnd::uniform(k, {2}, sp::int32); }),
            "[random.uniform] dtype argument must be a float dtype, got int32");
  EXPECT_THROW(rnd::normal(k, {2}, sp::uint8), sp::ValueError);
  EXPECT_THROW(rnd::truncated_normal(k, -1, 1, {2}, sp::int32), sp::ValueError);
  EXPECT_EQ(error_of([&] { rnd::randint(k, {2}, 0, 5, sp::float32); }),
            "[random.randint] randint only accepts integer dtypes, got float32");
  EXPECT_THROW(rnd::randint(k, {2}, 0, 5, sp::bool_), sp::TypeError);
  EXPECT_EQ(error_of([&] { rnd::bernoulli(k, 1); }),
            "[random.bernoulli] probability p must have a floating dtype, got int32");
  EXPECT_THROW(rnd::categorical(k, sp::arange(3)), sp::ValueError);
}

TEST(Random, BadShapesAndArgumentsAreRejected) {
  Array k = rnd::key(1);
  EXPECT_EQ(error_of([&] {
              rnd::randint(k, {4}, sp::zeros({3, 4}, sp::int32), 9);
            }),
            "[random.randint] parameter shapes must be broadcast-compatible with shape argument, "
            "and the result of broadcasting the shapes must equal the shape argument, but got "
            "result (3, 4) for shape argument (4,)");
  EXPECT_THROW(rnd::randint(k, {4}, sp::zeros({3}, sp::int32), 9), sp::ShapeError);
  EXPECT_THROW(rnd::uniform(k, {3}, sp::float32, sp::zeros({2, 3})), sp::ValueError);
  EXPECT_THROW(rnd::bernoulli(k, sp::full({3}, 0.5f), sp::Shape{2}), sp::ShapeError);
  EXPECT_THROW(rnd::categorical(k, logits(), -1, sp::Shape{3}), sp::ShapeError);
  EXPECT_THROW(rnd::categorical(k, logits(), 2), sp::AxisError);
  EXPECT_THROW(rnd::categorical(k, Array(1.0f)), sp::AxisError);
  EXPECT_EQ(error_of([&] {
              rnd::uniform(k, {2, -1});
            }),
            "[random.uniform] shape dimensions must be non-negative, got (2, -1)");
  EXPECT_THROW(rnd::split(k, -1), sp::ValueError);
  EXPECT_THROW(rnd::permutation(k, -1), sp::ValueError);
  EXPECT_THROW(rnd::permutation(k, Array(3.0f)), sp::TypeError);
  EXPECT_THROW(rnd::permutation(k, sp::arange(4), 1), sp::AxisError);
}

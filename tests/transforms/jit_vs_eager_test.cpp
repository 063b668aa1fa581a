// jit gives bit-identical results to eager evaluation: the same kernels run, only staged,
// optimised (CSE, DCE, constant folding) and executed as one Program.
#include <gtest/gtest.h>
#include <spmd/spmd.h>

#include <cstring>
#include <functional>

namespace {

namespace sp = spmd;
using sp::Array;

struct Case {
  const char* name;
  std::function<Array(const Array&, const Array&)> f;
};

std::vector<Case> cases() {
  return {
      {"add_mul_literals", [](auto& x, auto& y) { return x * 2.0 + y - 1.5; }},
      {"div_rem", [](auto& x, auto& y) { return sp::remainder(x / (y + 3.0), 0.7); }},
      {"unary_math",
       [](auto& x, auto&) {
         return sp::exp(x) + sp::log1p(sp::abs(x)) + sp::tanh(x) + sp::erf(x) + sp::sin(x);
       }},
      {"compare_where", [](auto& x, auto& y) { return sp::where(x > y, x, y * 0.5); }},
      {"integer_ops",
       [](auto& x, auto&) {
         Array i = sp::floor(x * 10.0).astype(sp::int32);
         return ((i * 3) % 7 + (i >> 1)).astype(sp::float32);
       }},
      {"reductions", [](auto& x, auto& y) { return x.sum({0}) + y.max({0}) + sp::mean(x * y); }},
      {"argmax_cumsum",
       [](auto& x, auto&) {
         return sp::cumsum(x, 1) + x.argmax(1).astype(sp::float32).reshape({4, 1});
       }},
      {"shapes",
       [](auto& x, auto& y) {
         return sp::concatenate({x.T(), y.T()}, 0).reshape({3, 4, 2}).sum({2});
       }},
      {"dot", [](auto& x, auto& y) { return sp::dot(x, y.T()); }},
      {"softmax", [](auto& x, auto&) { return x - sp::logsumexp(x, {1}, true); }},
      {"constants_folded",
       [](auto& x, auto&) {
         return x * (sp::ones({4, 3}) * 2.0 + sp::arange(3.0f));
       }},
      {"random",
       [](auto& x, auto&) {
         return x + sp::random::normal(sp::random::key(3), {4, 3});
       }},
      {"sort", [](auto& x, auto&) { return sp::sort(x, 1); }},
      {"clip_pow",
       [](auto& x, auto& y) { return sp::clip(sp::power(sp::abs(x) + 0.5, y), 0.1, 2.0); }},
  };
}

bool bit_equal(const Array& a, const Array& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  return std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

TEST(JitVsEager, BitIdentical) {
  Array x = sp::random::normal(sp::random::key(1), {4, 3});
  Array y = sp::random::normal(sp::random::key(2), {4, 3});
  for (const Case& c : cases()) {
    Array eager = c.f(x, y);
    Array jitted = sp::jit(c.f)(x, y);
    EXPECT_TRUE(bit_equal(eager, jitted)) << c.name << "\neager " << eager << "\njit   " << jitted;
  }
}

}  // namespace

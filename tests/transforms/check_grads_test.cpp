// Gradients of the differentiable operations through the public transformations, checked with
// check_grads (jvp against finite differences, vjp against jvp) in float64, to second order.
#include <gtest/gtest.h>
#include <spmd/spmd.h>

#include "support/check_grads.h"
#include "support/config_scope.h"

namespace {

namespace sp = spmd;
using sp::Array;
using spmd_test::check_grads;

struct Case {
  const char* name;
  std::function<Array(const std::vector<Array>&)> f;
  std::vector<sp::Shape> shapes;
  bool positive = false;  // inputs in (0.5, 2) instead of around 0
};

Array input(const sp::Shape& s, unsigned seed, bool positive) {
  Array u = sp::random::uniform(sp::random::key(int(seed)), s, sp::float64, -1.0, 1.0);
  return positive ? u * 0.75 + 1.25 : u;
}

std::vector<Case> cases() {
  return {
      {"sin_cos", [](auto& a) { return sp::sin(a[0]) * sp::cos(a[0]); }, {{3}}},
      {"tanh_exp", [](auto& a) { return sp::tanh(sp::exp(a[0])); }, {{2, 3}}},
      {"log_sqrt", [](auto& a) { return sp::log(a[0]) + sp::sqrt(a[0]); }, {{4}}, true},
      {"div_pow", [](auto& a) { return sp::power(a[0], a[1]) / a[1]; }, {{3}, {3}}, true},
      {"logistic_erf", [](auto& a) { return sp::sigmoid(a[0]) + sp::erf(a[0]); }, {{5}}},
      {"arc",
       [](auto& a) { return sp::arcsin(a[0] * 0.5) + sp::arctan2(a[0], a[0] + 3.0); },
       {{4}}},
      {"broadcasting", [](auto& a) { return a[0] * a[1] - a[1]; }, {{2, 3}, {3}}},
      {"dot", [](auto& a) { return sp::dot(a[0], a[1]); }, {{2, 3}, {3, 4}}},
      {"batched_matmul", [](auto& a) { return sp::matmul(a[0], a[1]); }, {{2, 2, 3}, {2, 3, 2}}},
      {"sum_mean", [](auto& a) { return sp::sum(a[0], {1}) * sp::mean(a[0]); }, {{3, 4}}},
      {"max_reduce", [](auto& a) { return sp::max(a[0], {0}); }, {{4, 3}}},
      {"logsumexp", [](auto& a) { return sp::logsumexp(a[0], {1}); }, {{2, 5}}},
      {"reshape_transpose",
       [](auto& a) {
         return a[0].reshape({3, 2}).T() * 2.0;
       },
       {{2, 3}}},
      {"concat_slice",
       [](auto& a) {
         return sp::concatenate({a[0], a[1]}, 0)[1] * a[0][0];
       },
       {{2, 3}, {1, 3}}},
      {"where_maximum",
       [](auto& a) { return sp::where(a[0] > 0.0, a[0] * a[0], sp::maximum(a[0], a[1])); },
       {{6}, {6}}},
      {"cumsum_prod", [](auto& a) { return sp::cumsum(a[0], 0) * sp::prod(a[0]); }, {{4}}, true},
      {"mlp",
       [](auto& a) { return sp::sum(sp::relu(sp::dot(a[0], a[1]) + 0.1) * a[0].sum()); },
       {{2, 3}, {3, 3}}},
  };
}

TEST(CheckGrads, EveryCaseToSecondOrder) {
  spmd_test::X64Scope x64;
  for (const Case& c : cases()) {
    std::vector<Array> args;
    for (size_t i = 0; i < c.shapes.size(); ++i)
      args.push_back(input(c.shapes[i], unsigned(i + 1), c.positive));
    auto flat = [f = c.f](std::span<const Array> xs) {
      return std::vector<Array>{f(std::vector<Array>(xs.begin(), xs.end()))};
    };
    EXPECT_EQ(check_grads(flat, args, {.order = 2}), "") << c.name;
  }
}

// The checker itself fails on a wrong derivative: a function whose jvp and vjp disagree with its
// values (stop_gradient hides part of the dependence).
TEST(CheckGrads, DetectsAWrongDerivative) {
  spmd_test::X64Scope x64;
  auto flat = [](std::span<const Array> xs) {
    return std::vector<Array>{xs[0] * sp::lax::stop_gradient(xs[0])};
  };
  EXPECT_NE(check_grads(flat, {input({3}, 1, false)}), "");
}

}  // namespace

// cond and switch drop the outputs every branch passes straight through, as JAX 0.10.2's do
// (tools/goldens/gen_cond_forwarding.py): the cond equation has fewer outputs and the caller
// reads the input itself. The jaxpr text (plain, under jit, under grad) and the values.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "support/golden.h"

#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace {

namespace sp = spmd;
using sp::Array;
using Pair = std::tuple<Array, Array>;
using Fn = std::function<Pair(std::vector<Array>)>;

const std::string kCases = "cond_forwarding/cases.txt";

// make_jaxpr(f)(args) prints JAX's text of case `name` and f gives its values.
void expect_case(const std::string& name, const Fn& f, const std::vector<Array>& args) {
  EXPECT_EQ(sp::make_jaxpr(f)(args).str(), spmd_test::golden_blocks(kCases).at(name)) << name;
  const auto& values = spmd_test::load_golden("cond_forwarding/values.npz");
  const auto [first, second] = f(args);
  EXPECT_TRUE(spmd_test::arrays_close(sp::device_get(first), values.at(name + ".0"))) << name;
  EXPECT_TRUE(spmd_test::arrays_close(sp::device_get(second), values.at(name + ".1"))) << name;
}

Array x() {
  return sp::arange(3.0f);
}
Array y() {
  return sp::array({0.5f, -1.0f, 2.0f});
}

Pair pass_second(const Array& p, const Array& u, const Array& v) {
  return sp::lax::cond(
      p,
      [](const Array& a, const Array& b) {
        return Pair{sp::lax::sin(a), b};
      },
      [](const Array& a, const Array& b) {
        return Pair{sp::lax::cos(a), b};
      },
      u, v);
}

Fn of_three(Pair (*f)(const Array&, const Array&, const Array&)) {
  return [f](std::vector<Array> a) { return f(a[0], a[1], a[2]); };
}

TEST(CondForwarding, AnOutputEveryBranchPassesThroughIsTheInput) {
  expect_case("pass_second", of_three(pass_second), {Array(true), x(), y()});
  expect_case("pass_second_false", of_three(pass_second), {Array(false), x(), y()});
  auto pass_first = [](std::vector<Array> a) {
    return sp::lax::cond(
        a[0],
        [](const Array& u) {
          return Pair{u, sp::lax::sin(u)};
        },
        [](const Array& u) {
          return Pair{u, sp::lax::cos(u)};
        },
        a[1]);
  };
  expect_case("pass_first", pass_first, {Array(true), x()});
}

TEST(CondForwarding, OutputsNotPassedThroughByEveryBranchStay) {
  auto one_branch_only = [](std::vector<Array> a) {
    return sp::lax::cond(
        a[0],
        [](const Array& u) {
          return Pair{u, sp::lax::sin(u)};
        },
        [](const Array& u) {
          return Pair{sp::lax::neg(u), sp::lax::cos(u)};
        },
        a[1]);
  };
  expect_case("one_branch_only", one_branch_only, {Array(false), x()});
  auto different_inputs = [](const Array& p, const Array& u, const Array& v) {
    return sp::lax::cond(
        p,
        [](const Array& a, const Array& b) {
          return Pair{a, sp::lax::sin(b)};
        },
        [](const Array& a, const Array& b) {
          return Pair{b, sp::lax::cos(a)};
        },
        u, v);
  };
  expect_case("different_inputs",
              [&](std::vector<Array> a) { return different_inputs(a[0], a[1], a[2]); },
              {Array(false), x(), y()});
}

TEST(CondForwarding, SwitchPrunesToo) {
  using Branch = std::function<Pair(const Array&, const Array&)>;
  const std::vector<Branch> branches{[](const Array& a, const Array& b) {
                                       return Pair{sp::lax::sin(a), b};
                                     },
                                     [](const Array& a, const Array& b) {
                                       return Pair{sp::lax::cos(a), b};
                                     },
                                     [](const Array& a, const Array& b) {
                                       return Pair{sp::lax::neg(a), b};
                                     }};
  expect_case("switch_pass",
              [&](std::vector<Array> a) { return sp::lax::switch_(a[0], branches, a[1], a[2]); },
              {sp::full({}, 2, sp::int32), x(), y()});
}

TEST(CondForwarding, UnderJitAndGrad) {
  expect_case("pass_second_jit", sp::jit(of_three(pass_second), {.name = "pass_second"}),
              {Array(true), x(), y()});
  // grad with respect to both arguments (argnums=(0, 1)), as one tuple argument.
  auto summed = [](const Pair& uv) {
    const auto [s, t] = pass_second(Array(true), std::get<0>(uv), std::get<1>(uv));
    const Array s_sum = sp::lax::reduce_sum(s, {0});  // Python's order of evaluation
    return sp::lax::add(s_sum, sp::lax::reduce_sum(t, {0}));
  };
  auto both = [g = sp::grad(summed)](std::vector<Array> a) { return g(Pair{a[0], a[1]}); };
  expect_case("pass_second_grad", both, {x(), y()});
}

}  // namespace

// make_jaxpr's text against JAX's own (tools/goldens/gen_jaxpr.py writes tests/goldens/jaxpr/):
// each test traces the C++ twin of one Python function from tests/goldens/jaxpr/MANIFEST.md and
// compares the printed jaxpr byte for byte, so names, params, literals and line breaks all count.
#include <spmd/control_flow.h>
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "support/config_scope.h"
#include "transforms/jaxpr_text_support.h"

#include <fstream>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace sp = spmd;
using sp::Array;

namespace {

using jaxpr_text::boolean;
using jaxpr_text::f32;
using jaxpr_text::golden;
using jaxpr_text::i32;

// The jnp functions the Python sources pass by name.
const auto sin_fn = [](const Array& x) { return sp::sin(x); };
const auto cos_fn = [](const Array& x) { return sp::cos(x); };
Array sin_chain(Array v) {
  for (int i = 0; i < 11; ++i) v = sp::sin(v);
  return v;
}

using Branch = std::function<Array(const Array&)>;
using Carry = std::pair<Array, Array>;

TEST(JaxprText, CondTwoOperands) {
  auto f = [](const Array& p, const Array& x, const Array& y) {
    return sp::lax::cond(
        p, [](const Array& a, const Array& b) { return a + b; },
        [](const Array& a, const Array& b) { return a * b; }, x, y);
  };
  EXPECT_EQ(sp::make_jaxpr(f)(boolean({}), f32({3}), f32({3})).str(), golden("cond_two_operands"));
}

// Each sub-jaxpr decides on its own whether it fits on one line.
TEST(JaxprText, CondBranchMixedLayout) {
  auto f = [](const Array& p, const Array& x) {
    return sp::lax::cond(p, sp::grad(sin_fn), cos_fn, x);
  };
  EXPECT_EQ(sp::make_jaxpr(f)(boolean({}), f32({})).str(), golden("cond_branch_mixed_layout"));
}

TEST(JaxprText, CondComputedPred) {
  auto f = [](const Array& x) { return sp::lax::cond(sp::sum(x) > 0, sin_fn, cos_fn, x); };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({3})).str(), golden("cond_computed_pred"));
}

// switch clamps the index into range, then binds cond with the branches in order.
TEST(JaxprText, SwitchThreeBranches) {
  auto f = [](const Array& i, const Array& x) {
    return sp::lax::switch_(
        i, std::vector<Branch>{sin_fn, cos_fn, [](const Array& v) { return v * 2.0; }}, x);
  };
  EXPECT_EQ(sp::make_jaxpr(f)(i32({}), f32({3})).str(), golden("switch_three_branches"));
}

// The weakly typed 0 of the initial carry is an operand literal: "] 0:i32[] a".
TEST(JaxprText, WhileLoopCounter) {
  auto f = [](const Array& x) {
    return sp::lax::while_loop([](const Carry& c) { return c.first < 10; },
                               [](const Carry& c) {
                                 return Carry{c.first + 1, c.second * 2.0};
                               },
                               Carry{Array(0), x});
  };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({3})).str(), golden("while_loop_counter"));
}

// A static trip count makes fori_loop a scan whose carry includes the counter.
TEST(JaxprText, ForiLoopStatic) {
  auto f = [](const Array& x) {
    return sp::lax::fori_loop(
        0, 3, [](const Array& i, const Array& c) { return c * 2.0 + i; }, x);
  };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({3})).str(), golden("fori_loop_static"));
}

TEST(JaxprText, ScanCarryAndStack) {
  auto f = [](const Array& c0, const Array& xs) {
    return sp::lax::scan(
        [](const Array& c, const Array& x) {
          return std::pair<Array, Array>{c + x, sp::sin(c)};
        },
        c0, xs);
  };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({3}), f32({5, 3})).str(), golden("scan_carry_and_stack"));
}

// A carry the body returns unchanged becomes a const; an xs stacked unchanged is not scanned.
TEST(JaxprText, ScanForwarded) {
  auto f = [](const Array& a, const Array& b, const Array& xs) {
    return sp::lax::scan(
        [](const std::tuple<Array, Array>& c, const Array& x) {
          const auto& [c0, c1] = c;
          return std::pair{std::tuple{c0 + x, c1}, std::tuple{x, c1 * x}};
        },
        std::tuple{a, b}, xs);
  };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({3}), f32({3}), f32({5, 3})).str(), golden("scan_forwarded"));
  const Array a = sp::arange(3.0f), b = sp::arange(3.0f) + 1.0f;
  const Array xs = sp::arange(15.0f).reshape({5, 3});
  auto [carry, ys] = f(a, b, xs);
  EXPECT_TRUE(sp::array_equal(std::get<0>(carry), a + sp::sum(xs, {0})));
  EXPECT_TRUE(sp::array_equal(std::get<1>(carry), b));
  EXPECT_TRUE(sp::array_equal(std::get<0>(ys), xs));
  EXPECT_TRUE(sp::array_equal(std::get<1>(ys), b * xs));
}

TEST(JaxprText, GradScan) {
  auto f = [](const Array& c0, const Array& xs) {
    auto body = [](const Array& c, const Array& x) {
      return std::pair<Array, std::optional<Array>>{sp::sin(c) * x, std::nullopt};
    };
    return sp::sum(sp::lax::scan(body, c0, xs).first);
  };
  EXPECT_EQ(sp::make_jaxpr(sp::grad(f))(f32({3}), f32({5, 3})).str(), golden("grad_scan"));
}

// A batched predicate turns cond into both branches and a select_n.
TEST(JaxprText, VmapCond) {
  auto f = [](const Array& p, const Array& x) { return sp::lax::cond(p, sin_fn, cos_fn, x); };
  EXPECT_EQ(sp::make_jaxpr(sp::vmap(f))(boolean({4}), f32({4, 3})).str(), golden("vmap_cond"));
}

// ---- grad of cond: every residual slot gets an empty2 placeholder in every branch ----------

// The sin * cos branch needs four residuals, the other none: it fills all four with
// placeholders, and the first branch, now longer than ten equations, is hoisted.
TEST(JaxprText, GradCondResidualCounts) {
  auto f = [](const Array& x) {
    auto sin_times_cos = [](const Array& v) {
      Array s = sp::sin(v);
      return s * sp::cos(v);
    };
    return sp::sum(sp::lax::cond(
        Array(true), sin_times_cos, [](const Array& v) { return v * 2.0; }, x));
  };
  EXPECT_EQ(sp::make_jaxpr(sp::grad(f))(f32({3})).str(), golden("grad_cond_residual_counts"));
}

// A residual that is an operand (the exp branch's v) is output as it is.
TEST(JaxprText, GradSwitchThreeBranches) {
  auto f = [](const Array& x) {
    std::vector<Branch> branches{sin_fn, cos_fn, [](const Array& v) { return sp::exp(v) * v; }};
    return sp::sum(sp::lax::switch_(Array(1), branches, x));
  };
  EXPECT_EQ(sp::make_jaxpr(sp::grad(f))(f32({3})).str(), golden("grad_switch_three_branches"));
}

// A scalar placeholder is the empty2 alone, with no broadcast.
TEST(JaxprText, GradCondScalarResidual) {
  auto f = [](const Array& s) {
    return sp::lax::cond(
        s > 0, sin_fn, [](const Array& v) { return v * v; }, s);
  };
  EXPECT_EQ(sp::make_jaxpr(sp::grad(f))(f32({})).str(), golden("grad_cond_scalar_residual"));
}

TEST(JaxprText, GradCondOperandInBothBranches) {
  auto f = [](const Array& x, const Array& y) {
    return sp::sum(sp::lax::cond(
        Array(true), [](const Array& a, const Array& b) { return a * b; },
        [](const Array& a, const Array& b) { return sp::sin(a) + b; }, x, y));
  };
  EXPECT_EQ(sp::make_jaxpr(sp::grad(f))(f32({3}), f32({3})).str(),
            golden("grad_cond_operand_in_both_branches"));
}

// Residuals of different types take slots per type, in order of first appearance.
TEST(JaxprText, GradCondResidualTypes) {
  auto f = [](const std::pair<Array, Array>& xs) {
    return sp::sum(sp::lax::cond(
        Array(true), [](const Array& a, const Array& b) { return sp::sin(a) * b; },
        [](const Array& a, const Array& b) { return a * sp::cos(b); }, xs.first, xs.second));
  };
  EXPECT_EQ(sp::make_jaxpr(sp::grad(f))(std::pair<Array, Array>{f32({3}), f32({})}).str(),
            golden("grad_cond_residual_types"));
}

// Linear branches need no residuals, so there is nothing to fill.
TEST(JaxprText, GradCondLinearBranches) {
  auto f = [](const Array& x) {
    return sp::sum(sp::lax::cond(
        Array(true), [](const Array& v) { return v * 2.0; }, [](const Array& v) { return v + 1.0; },
        x));
  };
  EXPECT_EQ(sp::make_jaxpr(sp::grad(f))(f32({3})).str(), golden("grad_cond_linear_branches"));
}

// Inside a call the placeholders' params break over lines like any other equation's. JAX names
// the call after the Python lambda.
TEST(JaxprText, JitGradCond) {
  auto f = [](const Array& x) { return sp::sum(sp::lax::cond(Array(true), sin_fn, cos_fn, x)); };
  EXPECT_EQ(sp::make_jaxpr(sp::jit(sp::grad(f), {.name = "<lambda>"}))(f32({3})).str(),
            golden("jit_grad_cond"));
}

TEST(JaxprText, CondLongBranchHoisted) {
  auto f = [](const Array& p, const Array& x) { return sp::lax::cond(p, sin_chain, cos_fn, x); };
  EXPECT_EQ(sp::make_jaxpr(f)(boolean({}), f32({3})).str(), golden("cond_long_branch_hoisted"));
}

}  // namespace

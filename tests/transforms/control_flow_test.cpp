// lax::cond, switch_, while_loop, fori_loop and scan: values against plain C++ loops, eagerly and
// under jit, errors in JAX's wording, and derivatives against finite differences.
#include <spmd/control_flow.h>
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "ir/program.h"
#include "prims/primitive.h"
#include "support/config_scope.h"
#include "support/golden.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sp = spmd;
using sp::Array;

namespace {

Array vec(std::vector<float> v) {
  return sp::array(v);
}

void expect_close(const Array& got, std::vector<float> want) {
  std::vector<float> g = got.to_vector<float>();
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], want[i], 1e-5f) << "at " << i;
}

TEST(ControlFlow, CondPicksBranch) {
  auto f = [](const Array& p, const Array& x) {
    return sp::lax::cond(
        p, [](const Array& a) { return sp::sin(a); }, [](const Array& a) { return sp::cos(a); }, x);
  };
  Array x = vec({0.5f, 1.0f});
  expect_close(f(Array(true), x), {std::sin(0.5f), std::sin(1.0f)});
  expect_close(f(Array(false), x), {std::cos(0.5f), std::cos(1.0f)});
  expect_close(sp::jit(f)(Array(true), x), {std::sin(0.5f), std::sin(1.0f)});
  expect_close(sp::jit(f)(Array(false), x), {std::cos(0.5f), std::cos(1.0f)});
}

TEST(ControlFlow, CondClosesOverValues) {
  Array c = vec({10.0f, 20.0f});
  auto f = [&](const Array& p, const Array& x) {
    return sp::lax::cond(
        p, [&](const Array& a) { return a + c; }, [](const Array& a) { return a * 2.0; }, x);
  };
  Array x = vec({1.0f, 2.0f});
  expect_close(sp::jit(f)(Array(true), x), {11.0f, 22.0f});
  expect_close(sp::jit(f)(Array(false), x), {2.0f, 4.0f});
  // A value of the enclosing trace becomes an operand of the cond.
  auto g = [](const Array& p, const Array& x) {
    Array y = x * 3.0;
    return sp::lax::cond(
        p, [&](const Array& a) { return a + y; }, [](const Array& a) { return a; }, x);
  };
  expect_close(sp::jit(g)(Array(true), x), {4.0f, 8.0f});
  expect_close(sp::jit(g)(Array(false), x), {1.0f, 2.0f});
}

TEST(ControlFlow, CondBranchTypesMustAgree) {
  auto f = [](const Array& x) {
    return sp::lax::cond(
        Array(true), [](const Array& a) { return a; },
        [](const Array& a) { return sp::lax::convert_element_type(a, sp::int32); }, x);
  };
  try {
    f(vec({1.0f}));
    FAIL() << "expected TypeError";
  } catch (const sp::TypeError& e) {
    EXPECT_NE(std::string(e.what()).find("must have identical types"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(sp::lax::cond(
                   vec({1.0f, 0.0f}), [](const Array& a) { return a; },
                   [](const Array& a) { return a; }, vec({1.0f})),
               sp::TypeError);
}

TEST(ControlFlow, SwitchClampsIndex) {
  using Branch = std::function<Array(const Array&)>;
  std::vector<Branch> branches{[](const Array& a) { return a + 1.0; },
                               [](const Array& a) { return a * 2.0; },
                               [](const Array& a) { return a - 5.0; }};
  auto f = [&](const Array& i, const Array& x) { return sp::lax::switch_(i, branches, x); };
  Array x = vec({3.0f});
  expect_close(f(Array(-4), x), {4.0f});
  expect_close(f(Array(0), x), {4.0f});
  expect_close(f(Array(1), x), {6.0f});
  expect_close(f(Array(2), x), {-2.0f});
  expect_close(sp::jit(f)(Array(7), x), {-2.0f});
  expect_close(sp::jit(f)(Array(1), x), {6.0f});
  EXPECT_THROW(sp::lax::switch_(Array(0), std::vector<Branch>{}, x), sp::ValueError);
}

using Carry = std::pair<Array, Array>;

TEST(ControlFlow, WhileLoopMatchesLoop) {
  auto f = [](const Array& x) {
    return sp::lax::while_loop([](const Carry& c) { return c.first < 10; },
                               [](const Carry& c) {
                                 return Carry{c.first + 1, c.second * 2.0};
                               },
                               Carry{Array(0), x});
  };
  std::vector<float> want{1.0f, -0.5f};
  for (int i = 0; i < 10; ++i)
    for (float& w : want) w *= 2.0f;
  for (auto fn :
       {std::function<Carry(const Array&)>(f), std::function<Carry(const Array&)>(sp::jit(f))}) {
    Carry out = fn(vec({1.0f, -0.5f}));
    EXPECT_EQ(out.first.item<int32_t>(), 10);
    expect_close(out.second, want);
  }
}

TEST(ControlFlow, WhileLoopErrors) {
  auto changes_type = [](const Array& x) {
    return sp::lax::while_loop([](const Array& c) { return sp::sum(c) < 10.0; },
                               [](const Array& c) {
                                 return sp::lax::concatenate({c, c}, 0);
                               },
                               x);
  };
  try {
    changes_type(vec({1.0f}));
    FAIL() << "expected TypeError";
  } catch (const sp::TypeError& e) {
    EXPECT_NE(std::string(e.what()).find("body_fun output and input must have identical types"),
              std::string::npos)
        << e.what();
  }
  auto not_bool = [](const Array& x) {
    return sp::lax::while_loop([](const Array& c) { return sp::sum(c); },
                               [](const Array& c) { return c; }, x);
  };
  EXPECT_THROW(not_bool(vec({1.0f})), sp::TypeError);
}

TEST(ControlFlow, ForiLoopMatchesLoop) {
  auto f = [](const Array& x) {
    return sp::lax::fori_loop(
        2, 6, [](const Array& i, const Array& c) { return c * 2.0 + i; }, x);
  };
  std::vector<float> want{1.0f, 0.0f};
  for (int i = 2; i < 6; ++i)
    for (float& w : want) w = w * 2.0f + float(i);
  expect_close(f(vec({1.0f, 0.0f})), want);
  expect_close(sp::jit(f)(vec({1.0f, 0.0f})), want);
  // An empty range returns the initial value.
  auto empty = [](const Array& x) {
    return sp::lax::fori_loop(
        3, 3, [](const Array&, const Array& c) { return c + 1.0; }, x);
  };
  expect_close(empty(vec({5.0f})), {5.0f});
}

TEST(ControlFlow, ForiLoopDynamicBounds) {
  auto f = [](const Array& lo, const Array& hi, const Array& x) {
    return sp::lax::fori_loop(
        lo, hi, [](const Array& i, const Array& c) { return c * 2.0 + i; }, x);
  };
  std::vector<float> want{1.0f, 0.0f};
  for (int i = 2; i < 6; ++i)
    for (float& w : want) w = w * 2.0f + float(i);
  expect_close(f(Array(2), Array(6), vec({1.0f, 0.0f})), want);
  expect_close(sp::jit(f)(Array(2), Array(6), vec({1.0f, 0.0f})), want);
  expect_close(f(Array(6), Array(2), vec({1.0f, 0.0f})), {1.0f, 0.0f});
  // Reverse mode needs a static trip count.
  auto loss = [&](const Array& x) { return sp::sum(f(Array(0), Array(3), x)); };
  EXPECT_THROW(sp::grad(loss)(vec({1.0f})), sp::ValueError);
}

TEST(ControlFlow, ForiLoopDynamicBoundsJaxprMatchesJax) {
  // jax.make_jaxpr(lambda lo, hi, x: lax.fori_loop(lo, hi, lambda i, c: c * 2.0 + i, x)).
  auto f = [](const Array& lo, const Array& hi, const Array& x) {
    return sp::lax::fori_loop(
        lo, hi, [](const Array& i, const Array& c) { return c * 2.0 + i; }, x);
  };
  const char* want = R"({ lambda ; a:i32[] b:i32[] c:f32[3]. let
    _:i32[] _:i32[] d:f32[3] = while[
      body_jaxpr={ lambda ; e:i32[] f:i32[] g:f32[3]. let
          h:i32[] = add e 1:i32[]
          i:f32[3] = mul g 2.0:f32[]
          j:f32[] = convert_element_type[new_dtype=float32 weak_type=False] e
          k:f32[3] = add i j
        in (h, f, k) }
      body_nconsts=0
      cond_jaxpr={ lambda ; l:i32[] m:i32[] n:f32[3]. let
          o:bool[] = lt l m
        in (o,) }
      cond_nconsts=0
    ] a b c
  in (d,) })";
  Array i = sp::zeros({}, sp::int32);
  EXPECT_EQ(sp::make_jaxpr(f)(i, i, sp::zeros({3}, sp::float32)).str(), want);
}

TEST(ControlFlow, ScanMatchesLoop) {
  auto body = [](const Array& c, const Array& x) {
    return std::pair<Array, Array>{c + x, sp::sin(c)};
  };
  auto f = [&](const Array& c0, const Array& xs) { return sp::lax::scan(body, c0, xs); };
  Array c0 = vec({0.5f, 1.0f});
  Array xs = sp::array<float>({0, 1, 2, 3, 4, 5}, {3, 2});
  std::vector<float> c{0.5f, 1.0f}, ys;
  std::vector<float> xv = xs.to_vector<float>();
  for (int t = 0; t < 3; ++t)
    for (int k = 0; k < 2; ++k) {
      ys.push_back(std::sin(c[size_t(k)]));
      c[size_t(k)] += xv[size_t(t * 2 + k)];
    }
  for (auto out : {f(c0, xs), sp::jit(f)(c0, xs)}) {
    expect_close(out.first, c);
    EXPECT_EQ(out.second.shape(), (sp::Shape{3, 2}));
    expect_close(out.second, ys);
  }
}

TEST(ControlFlow, ScanReverse) {
  auto body = [](const Array& c, const Array& x) {
    return std::pair<Array, Array>{c * 10.0 + x, c};
  };
  Array xs = vec({1.0f, 2.0f, 3.0f});
  auto out = sp::lax::scan(body, Array(0.0f), xs, std::nullopt, /*reverse=*/true);
  // Steps visit 3, 2, 1; ys are stored at the step's own index.
  EXPECT_NEAR(out.first.item<float>(), 321.0f, 1e-4f);
  expect_close(out.second, {32.0f, 3.0f, 0.0f});
}

TEST(ControlFlow, ScanCarryTypeMustNotChange) {
  auto body = [](const Array& c, const Array& x) {
    return std::pair<Array, Array>{sp::lax::convert_element_type(c, sp::int32), x};
  };
  EXPECT_THROW(sp::lax::scan(body, Array(0.0f), vec({1.0f, 2.0f})), sp::TypeError);
}

TEST(ControlFlow, ScanWithoutXsUsesLength) {
  auto body = [](const Array& c, const std::optional<Array>&) {
    return std::pair<Array, Array>{c * 2.0, c};
  };
  auto out = sp::lax::scan(body, Array(1.0f), std::optional<Array>{}, 4);
  EXPECT_NEAR(out.first.item<float>(), 16.0f, 1e-6f);
  expect_close(out.second, {1.0f, 2.0f, 4.0f, 8.0f});
  EXPECT_THROW(sp::lax::scan(body, Array(1.0f), std::optional<Array>{}), sp::ValueError);
  // A length disagreeing with the xs is an error.
  auto with_x = [](const Array& c, const Array& x) { return std::pair<Array, Array>{c + x, c}; };
  EXPECT_THROW(sp::lax::scan(with_x, Array(0.0f), vec({1.0f, 2.0f}), 3), sp::ValueError);
}

// ---- derivatives and batching ---------------------------------------------------------------

// Central finite differences of a scalar function along each coordinate of x (float64).
std::vector<double> finite_diff(const std::function<Array(const Array&)>& f, const Array& x) {
  std::vector<double> v = x.to_vector<double>(), out;
  const double eps = 1e-6;
  for (size_t i = 0; i < v.size(); ++i) {
    std::vector<double> hi = v, lo = v;
    hi[i] += eps;
    lo[i] -= eps;
    double fh = f(sp::array(hi, x.shape())).item<double>();
    double fl = f(sp::array(lo, x.shape())).item<double>();
    out.push_back((fh - fl) / (2 * eps));
  }
  return out;
}

void expect_grad_matches(const std::function<Array(const Array&)>& f, const Array& x) {
  std::vector<double> got = sp::grad(f)(x).to_vector<double>(), want = finite_diff(f, x);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-6 * (1 + std::abs(want[i]))) << "at " << i;
}

TEST(ControlFlowAd, GradScanMatchesFiniteDifferences) {
  spmd_test::X64Scope x64;
  Array w = sp::array<double>({0.5, -1.5, 2.0});
  Array xs =
      sp::array<double>({0.1, 0.2, 0.3, -0.4, 0.5, 0.6, 0.7, -0.8, 0.9, 1.0, 1.1, 1.2}, {4, 3});
  auto body = [&](const Array& c, const Array& x) {
    return std::pair<Array, Array>{sp::sin(c) * x + w * c, c * c};
  };
  auto total = [&](const Array& c0, const Array& x) {
    auto [c, ys] = sp::lax::scan(body, c0, x);
    return sp::sum(c) + sp::sum(ys);
  };
  Array c0 = sp::array<double>({0.3, -0.2, 0.8});
  expect_grad_matches([&](const Array& c) { return total(c, xs); }, c0);
  expect_grad_matches([&](const Array& x) { return total(c0, x); }, xs);
  // Reverse scans differentiate too.
  auto reversed = [&](const Array& c) {
    auto out = sp::lax::scan(body, c, xs, std::nullopt, /*reverse=*/true);
    return sp::sum(out.first) + sp::sum(out.second);
  };
  expect_grad_matches(reversed, c0);
  expect_grad_matches([&](const Array& c) { return sp::jit(reversed)(c); }, c0);
}

TEST(ControlFlowAd, GradForiLoop) {
  spmd_test::X64Scope x64;
  auto f = [](const Array& x) {
    return sp::sum(sp::lax::fori_loop(
        0, 3, [](const Array& i, const Array& c) { return sp::sin(c) * 1.5 + i; }, x));
  };
  expect_grad_matches(f, sp::array<double>({0.2, -0.7}));
}

TEST(ControlFlowAd, GradCond) {
  spmd_test::X64Scope x64;
  Array y = sp::array<double>({2.0, -3.0});
  for (bool p : {true, false}) {
    auto f = [&, p](const Array& x) {
      return sp::sum(sp::lax::cond(
          Array(p), [&](const Array& a) { return sp::sin(a) * y; },
          [](const Array& a) { return sp::cos(a) * a; }, x));
    };
    expect_grad_matches(f, sp::array<double>({0.4, 1.3}));
    expect_grad_matches([&](const Array& x) { return sp::jit(f)(x); },
                        sp::array<double>({0.4, 1.3}));
  }
}

TEST(ControlFlowAd, GradAndVmapSwitch) {
  spmd_test::X64Scope x64;
  using Branch = std::function<Array(const Array&)>;
  std::vector<Branch> branches{[](const Array& a) { return sp::sin(a); },
                               [](const Array& a) { return a * a; },
                               [](const Array& a) { return sp::exp(a) * 0.5; }};
  for (int i = 0; i < 3; ++i) {
    auto f = [&, i](const Array& x) { return sp::sum(sp::lax::switch_(Array(i), branches, x)); };
    expect_grad_matches(f, sp::array<double>({0.3, -0.6}));
  }
  auto g = [&](const Array& i, const Array& x) { return sp::lax::switch_(i, branches, x); };
  Array idx = sp::array<int32_t>({2, 0, 1, 5});
  Array xs = sp::array<double>({0.1, 0.2, 0.3, 0.4});
  std::vector<double> got = sp::vmap(g)(idx, xs).to_vector<double>();
  std::vector<double> want{std::exp(0.1) * 0.5, std::sin(0.2), 0.3 * 0.3, std::exp(0.4) * 0.5};
  for (size_t k = 0; k < 4; ++k) EXPECT_NEAR(got[k], want[k], 1e-12) << k;
}

TEST(ControlFlowAd, JvpWhileLoop) {
  spmd_test::X64Scope x64;
  auto f = [](const Array& x) {
    return sp::lax::while_loop([](const Carry& c) { return c.first < 5; },
                               [](const Carry& c) {
                                 return Carry{c.first + 1, c.second * c.second * 0.5};
                               },
                               Carry{Array(0), x})
        .second;
  };
  Array x = sp::array<double>({1.1, 0.9});
  auto [out, tangent] = sp::jvp(f, x, sp::array<double>({1.0, 0.0}));
  // x_{k+1} = x_k^2 / 2: dx_5/dx_0 = prod of x_k over k < 5.
  double v = 1.1, d = 1.0;
  for (int k = 0; k < 5; ++k) {
    d *= v;
    v = v * v * 0.5;
  }
  EXPECT_NEAR(out.to_vector<double>()[0], v, 1e-12);
  EXPECT_NEAR(tangent.to_vector<double>()[0], d, 1e-12);
  EXPECT_EQ(tangent.to_vector<double>()[1], 0.0);
  try {
    sp::grad([&](const Array& a) { return sp::sum(f(a)); })(x);
    FAIL() << "expected ValueError";
  } catch (const sp::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("Reverse-mode differentiation does not work for "
                                         "lax.while_loop or lax.fori_loop with dynamic start/stop "
                                         "values."),
              std::string::npos)
        << e.what();
  }
}

TEST(ControlFlowBatch, VmapCondBatchedPredicate) {
  auto f = [](const Array& p, const Array& x) {
    return sp::lax::cond(
        p, [](const Array& a) { return sp::sin(a); }, [](const Array& a) { return a * 3.0; }, x);
  };
  Array ps = sp::array(std::vector<bool>{true, false, true}, {3});
  Array xs = sp::array<float>({0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f}, {3, 2});
  Array got = sp::vmap(f)(ps, xs);
  std::vector<float> x = xs.to_vector<float>(), want;
  for (size_t i = 0; i < 6; ++i) want.push_back(i / 2 == 1 ? x[i] * 3.0f : std::sin(x[i]));
  expect_close(got, want);
}

TEST(ControlFlowBatch, VmapCondUnbatchedPredicate) {
  Array xs = sp::array<float>({0.1f, 0.2f, 0.3f, 0.4f}, {2, 2});
  for (bool p : {true, false}) {
    auto f = [p](const Array& x) {
      return sp::lax::cond(
          Array(p), [](const Array& a) { return sp::sin(a); },
          [](const Array& a) { return a * 3.0; }, x);
    };
    std::vector<float> want;
    for (float v : xs.to_vector<float>()) want.push_back(p ? std::sin(v) : v * 3.0f);
    expect_close(sp::vmap(f)(xs), want);
    expect_close(sp::jit(sp::vmap(f))(xs), want);
  }
}

TEST(ControlFlowBatch, VmapScan) {
  auto f = [](const Array& c0, const Array& xs) {
    return sp::lax::scan(
        [](const Array& c, const Array& x) {
          return std::pair<Array, Array>{c * x + 1.0, sp::sin(c)};
        },
        c0, xs);
  };
  // Batch of 2 over the carry only; xs shared: [3 steps, 2 features].
  Array c0 = sp::array<float>({0.5f, 1.0f, -0.5f, 2.0f}, {2, 2});
  Array xs = sp::array<float>({1.0f, 2.0f, 0.5f, -1.0f, 3.0f, 0.25f}, {3, 2});
  sp::VmapOptions options;
  options.in_axes = {0, sp::None};
  auto [c, ys] = sp::vmap(f, options)(c0, xs);
  EXPECT_EQ(ys.shape(), (sp::Shape{2, 3, 2}));
  std::vector<float> cv = c0.to_vector<float>(), xv = xs.to_vector<float>(), want_c, want_ys;
  for (int b = 0; b < 2; ++b) {
    std::vector<float> carry{cv[size_t(b * 2)], cv[size_t(b * 2 + 1)]};
    for (int t = 0; t < 3; ++t)
      for (int k = 0; k < 2; ++k) {
        want_ys.push_back(std::sin(carry[size_t(k)]));
        carry[size_t(k)] = carry[size_t(k)] * xv[size_t(t * 2 + k)] + 1.0f;
      }
    want_c.insert(want_c.end(), carry.begin(), carry.end());
  }
  expect_close(c, want_c);
  expect_close(ys, want_ys);
}

TEST(ControlFlowBatch, VmapWhileLoop) {
  // Each lane doubles until it exceeds its own limit: the predicate is batched.
  auto f = [](const Array& x, const Array& limit) {
    return sp::lax::while_loop([&](const Array& c) { return c < limit; },
                               [](const Array& c) { return c * 2.0; }, x);
  };
  Array xs = sp::array<float>({1.0f, 3.0f, 0.5f});
  Array limits = sp::array<float>({10.0f, 4.0f, 0.1f});
  std::vector<float> want;
  for (size_t i = 0; i < 3; ++i) {
    float v = xs.to_vector<float>()[i];
    while (v < limits.to_vector<float>()[i]) v *= 2.0f;
    want.push_back(v);
  }
  expect_close(sp::vmap(f)(xs, limits), want);
  // An unbatched predicate keeps one loop over the batched carry.
  auto g = [](const Array& x) {
    return sp::lax::while_loop([](const Carry& c) { return c.first < 3; },
                               [](const Carry& c) {
                                 return Carry{c.first + 1, c.second + 1.5};
                               },
                               Carry{Array(0), x})
        .second;
  };
  expect_close(sp::vmap(g)(xs), {5.5f, 7.5f, 5.0f});
}

// ---- jaxpr text of forward mode, as JAX 0.10.2 prints it ---------------------------------------

TEST(ControlFlowAd, JvpScanJaxprMatchesJax) {
  // jax.make_jaxpr(lambda c, x, t: jax.jvp(f, (c, x), (t, x))) with
  // f = lambda c0, xs: lax.scan(lambda c, x: (jnp.sin(c) * x, jnp.cos(c)), c0, xs).
  auto f = [](const Array& c0, const Array& xs) {
    return sp::lax::scan(
        [](const Array& c, const Array& x) {
          return std::pair<Array, Array>{sp::sin(c) * x, sp::cos(c)};
        },
        c0, xs);
  };
  auto g = [&](const Array& c, const Array& x, const Array& t) {
    return sp::jvp([&](const Array& a, const Array& b) { return f(a, b); }, std::make_tuple(c, x),
                   std::make_tuple(t, x));
  };
  // The body is long enough that JAX hoists it above the outer jaxpr.
  const char* want = R"(let jaxpr = { lambda ; a:f32[3] b:f32[3] c:f32[3] d:f32[3]. let
    e:f32[3] = sin a
    f:f32[3] = cos a
    g:f32[3] = mul b f
    h:f32[3] = mul e c
    i:f32[3] = mul g c
    j:f32[3] = mul e d
    k:f32[3] = add_any i j
    l:f32[3] = cos a
    m:f32[3] = sin a
    n:f32[3] = mul b m
    o:f32[3] = neg n
  in (h, k, l, o) } in
{ lambda ; p:f32[3] q:f32[5,3] r:f32[3]. let
    s:f32[3] t:f32[3] u:f32[5,3] v:f32[5,3] = scan[
      jaxpr=jaxpr
      length=5
      num_carry=2
      num_consts=0
      reverse=False
      unroll=1
    ] p r q q
  in (s, u, t, v) })";
  Array c = sp::zeros({3}, sp::float32), x = sp::zeros({5, 3}, sp::float32);
  EXPECT_EQ(sp::make_jaxpr(g)(c, x, c).str(), want);
}

TEST(ControlFlowAd, JvpCondJaxprMatchesJax) {
  // jax.make_jaxpr(lambda p, x, t: jax.jvp(lambda x: lax.cond(p, jnp.sin, jnp.cos, x), (x,),
  // (t,))).
  auto g = [](const Array& p, const Array& x, const Array& t) {
    auto f = [&](const Array& a) {
      return sp::lax::cond(
          p, [](const Array& v) { return sp::sin(v); }, [](const Array& v) { return sp::cos(v); },
          a);
    };
    return sp::jvp(f, x, t);
  };
  const char* want = R"({ lambda ; a:bool[] b:f32[3] c:f32[3]. let
    d:i32[] = convert_element_type[new_dtype=int32 weak_type=False] a
    e:f32[3] f:f32[3] = cond[
      branches=(
        { lambda ; g:f32[3] h:f32[3]. let
            i:f32[3] = cos g
            j:f32[3] = sin g
            k:f32[3] = mul h j
            l:f32[3] = neg k
          in (i, l) }
        { lambda ; m:f32[3] n:f32[3]. let
            o:f32[3] = sin m
            p:f32[3] = cos m
            q:f32[3] = mul n p
          in (o, q) }
      )
    ] d b c
  in (e, f) })";
  Array x = sp::zeros({3}, sp::float32);
  EXPECT_EQ(sp::make_jaxpr(g)(sp::zeros({}, sp::bool_), x, x).str(), want);
}

TEST(ControlFlowAd, JvpWhileJaxprMatchesJax) {
  // jax.make_jaxpr(lambda x, t: jax.jvp(f, (x,), (t,))) with f = lambda x: lax.while_loop(
  //     lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] * c[1] * 0.5), (0, x))[1].
  auto f = [](const Array& x) {
    return sp::lax::while_loop([](const Carry& c) { return c.first < 5; },
                               [](const Carry& c) {
                                 return Carry{c.first + 1, c.second * c.second * 0.5};
                               },
                               Carry{Array(0), x})
        .second;
  };
  auto g = [&](const Array& x, const Array& t) { return sp::jvp(f, x, t); };
  const char* want = R"({ lambda ; a:f32[2] b:f32[2]. let
    _:i32[] c:f32[2] d:f32[2] = while[
      body_jaxpr={ lambda ; e:i32[] f:f32[2] g:f32[2]. let
          h:i32[] = add e 1:i32[]
          i:f32[2] = mul f f
          j:f32[2] = mul g f
          k:f32[2] = mul f g
          l:f32[2] = add_any j k
          m:f32[2] = mul i 0.5:f32[]
          n:f32[2] = mul l 0.5:f32[]
        in (h, m, n) }
      body_nconsts=0
      cond_jaxpr={ lambda ; o:i32[] p:f32[2] q:f32[2]. let
          r:bool[] = lt o 5:i32[]
        in (r,) }
      cond_nconsts=0
    ] 0:i32[] a b
  in (c, d) })";
  Array x = sp::zeros({2}, sp::float32);
  EXPECT_EQ(sp::make_jaxpr(g)(x, x).str(), want);
}

// ---- jaxpr text of vmap, as JAX 0.10.2 prints it ---------------------------------------------

TEST(ControlFlowBatch, VmapScanJaxprMatchesJax) {
  // jax.vmap(lambda c0, xs: lax.scan(lambda c, x: (c * x + 1.0, jnp.sin(c)), c0, xs)) on
  // f32[2,2], f32[2,3,2]: xs are scanned along axis 1 of the batched array.
  auto f = [](const Array& c0, const Array& xs) {
    return sp::lax::scan(
        [](const Array& c, const Array& x) {
          return std::pair<Array, Array>{c * x + 1.0, sp::sin(c)};
        },
        c0, xs);
  };
  const char* want = R"({ lambda ; a:f32[2,2] b:f32[2,3,2]. let
    c:f32[3,2,2] = transpose[permutation=(1, 0, 2)] b
    d:f32[2,2] e:f32[3,2,2] = scan[
      jaxpr={ lambda ; f:f32[2,2] g:f32[2,2]. let
          h:f32[2,2] = mul f g
          i:f32[2,2] = add h 1.0:f32[]
          j:f32[2,2] = sin f
        in (i, j) }
      length=3
      num_carry=1
      num_consts=0
      reverse=False
      unroll=1
    ] a c
    k:f32[2,3,2] = transpose[permutation=(1, 0, 2)] e
  in (d, k) })";
  EXPECT_EQ(
      sp::make_jaxpr(sp::vmap(f))(sp::zeros({2, 2}, sp::float32), sp::zeros({2, 3, 2}, sp::float32))
          .str(),
      want);
}

TEST(ControlFlowBatch, VmapWhileJaxprMatchesJax) {
  // jax.vmap(lambda x, lim: lax.while_loop(lambda c: c < lim, lambda c: c * 2.0, x)): the
  // batched predicate stays in the loop.
  auto f = [](const Array& x, const Array& limit) {
    return sp::lax::while_loop([&](const Array& c) { return c < limit; },
                               [](const Array& c) { return c * 2.0; }, x);
  };
  const char* want = R"({ lambda ; a:f32[3] b:f32[3]. let
    c:f32[3] = while[
      body_jaxpr={ lambda ; d:f32[3]. let e:f32[3] = mul d 2.0:f32[] in (e,) }
      body_nconsts=0
      cond_jaxpr={ lambda ; f:f32[3] g:f32[3]. let h:bool[3] = lt g f in (h,) }
      cond_nconsts=1
    ] b a
  in (c,) })";
  Array x = sp::zeros({3}, sp::float32);
  EXPECT_EQ(sp::make_jaxpr(sp::vmap(f))(x, x).str(), want);
}

TEST(ControlFlowBatch, VmapCondUnbatchedPredicateJaxprMatchesJax) {
  // jax.vmap(lambda p, x: lax.cond(p, jnp.sin, jnp.cos, x), in_axes=(None, 0)).
  auto f = [](const Array& p, const Array& x) {
    return sp::lax::cond(
        p, [](const Array& v) { return sp::sin(v); }, [](const Array& v) { return sp::cos(v); }, x);
  };
  sp::VmapOptions options;
  options.in_axes = {sp::None, 0};
  const char* want = R"({ lambda ; a:bool[] b:f32[4,3]. let
    c:i32[] = convert_element_type[new_dtype=int32 weak_type=False] a
    d:f32[4,3] = cond[
      branches=(
        { lambda ; e:f32[4,3]. let f:f32[4,3] = cos e in (f,) }
        { lambda ; g:f32[4,3]. let h:f32[4,3] = sin g in (h,) }
      )
    ] c b
  in (d,) })";
  EXPECT_EQ(
      sp::make_jaxpr(sp::vmap(f, options))(sp::zeros({}, sp::bool_), sp::zeros({4, 3}, sp::float32))
          .str(),
      want);
}

// Each branch of the primal cond fills every residual slot with an `empty2` placeholder, then
// puts its own residual in its slot; the replaced placeholders stay, as in JAX's text.
TEST(ControlFlowAd, GradCondJaxprMatchesJax) {
  // jax.make_jaxpr(jax.grad(lambda x: jnp.sum(lax.cond(True, jnp.sin, jnp.cos, x)))).
  auto f = [](const Array& x) {
    return sp::sum(sp::lax::cond(
        Array(true), [](const Array& v) { return sp::sin(v); },
        [](const Array& v) { return sp::cos(v); }, x));
  };
  const char* want = R"({ lambda ; a:f32[3]. let
    b:f32[3] c:f32[3] = cond[
      branches=(
        { lambda ; d:f32[3]. let
            e:f32[3] = cos d
            f:f32[3] = sin d
            g:f32[] = empty2[dtype=float32 memory_space=MemorySpace.Device] 
            h:f32[3] = broadcast_in_dim g
          in (e, f) }
        { lambda ; i:f32[3]. let
            j:f32[3] = sin i
            k:f32[3] = cos i
            l:f32[] = empty2[dtype=float32 memory_space=MemorySpace.Device] 
            m:f32[3] = broadcast_in_dim l
          in (j, k) }
      )
    ] 1:i32[] a
    _:f32[] = reduce_sum[axes=(0,) out_sharding=None] b
    n:f32[3] = broadcast_in_dim 1.0:f32[]
    o:f32[3] = cond[
      branches=(
        { lambda ; p:f32[3] q:f32[3]. let
            r:f32[3] = neg q
            s:f32[3] = mul r p
          in (s,) }
        { lambda ; t:f32[3] u:f32[3]. let v:f32[3] = mul u t in (v,) }
      )
    ] 1:i32[] c n
  in (o,) })";
  EXPECT_EQ(sp::make_jaxpr(sp::grad(f))(sp::zeros({3}, sp::float32)).str(), want);
}

// Inside shard_map the placeholders vary over the mesh axes as the residuals they stand for
// (JAX pvaries them too), so every branch of the primal cond has the same output types.
TEST(ControlFlowAd, GradCondInShardMapPlaceholdersVaryLikeTheirSlots) {
  sp::Mesh mesh = sp::make_mesh({2}, {"x"});
  auto body = [](const Array& x) {
    return sp::lax::cond(
        Array(true), [](const Array& v) { return sp::sin(v); },
        [](const Array& v) { return v * 2.0; }, x);
  };
  auto f = [&](const Array& x) {
    return sp::sum(sp::shard_map(body, mesh, sp::P("x"), sp::P("x"))(x));
  };
  Array x = sp::arange(4.0f);
  sp::ClosedJaxpr jaxpr = sp::make_jaxpr(sp::grad(f))(x);
  const sp::Program& outer = jaxpr.program();
  const sp::Program& inner = *outer.equations.at(0).params.get<sp::ProgramRef>("jaxpr");
  auto cond = std::find_if(inner.equations.begin(), inner.equations.end(),
                           [](const sp::Equation& e) { return e.primitive->name == "cond"; });
  ASSERT_NE(cond, inner.equations.end());
  const auto& branches = cond->params.get<std::vector<sp::ProgramRef>>("branches");
  std::vector<sp::AbstractValue> first = branches[0]->out_types(),
                                 second = branches[1]->out_types();
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(first, second);
  for (const sp::AbstractValue& t : first) EXPECT_EQ(t.vma, std::vector<std::string>{"x"});
  expect_close(sp::grad(f)(x), {1.0f, std::cos(1.0f), std::cos(2.0f), std::cos(3.0f)});
}

TEST(ControlFlowAd, NestedControlFlowUnderGrad) {
  spmd_test::X64Scope x64;
  auto body = [](const Array& c, const Array& x) {
    Array next = sp::lax::cond(
        x > 0.0, [](const Array& a) { return sp::sin(a); }, [](const Array& a) { return a * 2.0; },
        c);
    return std::pair<Array, Array>{next, next};
  };
  Array xs = sp::array<double>({1.0, -1.0, 2.0});
  auto f = [&](const Array& c0) {
    auto [c, ys] = sp::lax::scan(body, c0, xs);
    return c + sp::sum(ys);
  };
  // Forward mode works through the nesting.
  Array c0(0.3);
  auto [out, tangent] = sp::jvp(f, c0, Array(1.0));
  double fh = f(Array(0.3 + 1e-6)).item<double>(), fl = f(Array(0.3 - 1e-6)).item<double>();
  EXPECT_NEAR(tangent.item<double>(), (fh - fl) / 2e-6, 1e-6);
  // Reverse mode splits the nested cond into its primal and tangent parts too.
  expect_grad_matches(f, c0);
}

TEST(ControlFlowAd, GradScanInsideCond) {
  spmd_test::X64Scope x64;
  Array xs = sp::array<double>({0.5, -1.0, 1.5});
  for (bool p : {true, false}) {
    auto f = [&, p](const Array& c0) {
      auto scanned = [&](const Array& c) {
        auto body = [](const Array& carry, const Array& x) {
          return std::pair<Array, Array>{sp::sin(carry * x), carry};
        };
        auto [last, ys] = sp::lax::scan(body, c, xs);
        return last * sp::sum(ys);
      };
      return sp::lax::cond(
          Array(p), scanned, [](const Array& c) { return sp::exp(c); }, c0);
    };
    expect_grad_matches(f, Array(0.7));
  }
}

TEST(ControlFlowAd, GradScanWithConstJaxprMatchesJax) {
  // jax.make_jaxpr(jax.grad(f)) with f = lambda c0, xs, w: jnp.sum(lax.scan(
  //     lambda c, x: (jnp.sin(c) * x + w * c, None), c0, xs)[0]): w is a const of the scan and a
  // residual passed to the transposed scan as a const.
  auto f = [](const Array& c0, const Array& xs, const Array& w) {
    auto body = [&](const Array& c, const Array& x) {
      Array sx = sp::sin(c) * x;  // sequenced: C++ leaves the order of `+`'s operands open
      return std::pair<Array, std::optional<Array>>{sx + w * c, std::nullopt};
    };
    return sp::sum(sp::lax::scan(body, c0, xs).first);
  };
  const char* want = R"({ lambda ; a:f32[3] b:f32[5,3] c:f32[3]. let
    d:f32[3] e:f32[5,3] = scan[
      jaxpr={ lambda ; f:f32[3] g:f32[3] h:f32[3]. let
          i:f32[3] = sin g
          j:f32[3] = cos g
          k:f32[3] = mul i h
          l:f32[3] = mul f g
          m:f32[3] = add k l
        in (m, j) }
      length=5
      num_carry=1
      num_consts=1
      reverse=False
      unroll=1
    ] c a b
    _:f32[] = reduce_sum[axes=(0,) out_sharding=None] d
    n:f32[3] = broadcast_in_dim 1.0:f32[]
    o:f32[3] = scan[
      jaxpr={ lambda ; p:f32[3] q:f32[3] r:f32[3] s:f32[3]. let
          t:f32[3] = mul p q
          u:f32[3] = mul q s
          v:f32[3] = mul u r
          w:f32[3] = add_any t v
        in (w,) }
      length=5
      num_carry=1
      num_consts=1
      reverse=True
      unroll=1
    ] c n e b
  in (o,) })";
  Array v = sp::zeros({3}, sp::float32);
  EXPECT_EQ(sp::make_jaxpr(sp::grad(f))(v, sp::zeros({5, 3}, sp::float32), v).str(), want);
}

TEST(ControlFlowAd, GradForiLoopJaxprMatchesJax) {
  // jax.make_jaxpr(jax.grad(lambda x: jnp.sum(lax.fori_loop(0, 3, lambda i, c: jnp.sin(c) * 1.5
  //     + i, x)))): the integer counter carries no tangent.
  auto f = [](const Array& x) {
    return sp::sum(sp::lax::fori_loop(
        0, 3,
        [](const Array& i, const Array& c) {
          Array s = sp::sin(c) * 1.5;
          return s + i;
        },
        x));
  };
  const char* want = R"({ lambda ; a:f32[2]. let
    _:i32[] b:f32[2] c:f32[3,2] = scan[
      jaxpr={ lambda ; d:i32[] e:f32[2]. let
          f:i32[] = add d 1:i32[]
          g:f32[2] = sin e
          h:f32[2] = cos e
          i:f32[2] = mul g 1.5:f32[]
          j:f32[] = convert_element_type[new_dtype=float32 weak_type=False] d
          k:f32[2] = add i j
        in (f, k, h) }
      length=3
      num_carry=2
      num_consts=0
      reverse=False
      unroll=1
    ] 0:i32[] a
    _:f32[] = reduce_sum[axes=(0,) out_sharding=None] b
    l:f32[2] = broadcast_in_dim 1.0:f32[]
    m:f32[2] = scan[
      jaxpr={ lambda ; n:f32[2] o:f32[2]. let
          p:f32[2] = mul n 1.5:f32[]
          q:f32[2] = mul p o
        in (q,) }
      length=3
      num_carry=1
      num_consts=0
      reverse=True
      unroll=1
    ] l c
  in (m,) })";
  EXPECT_EQ(sp::make_jaxpr(sp::grad(f))(sp::zeros({2}, sp::float32)).str(), want);
}

TEST(ControlFlowBatch, VmapOfGradScanMatchesPerExampleGrad) {
  spmd_test::X64Scope x64;
  Array xs = sp::array<double>({0.5, -1.0, 1.5, 0.25}, {4, 1});
  auto loss = [&](const Array& c0) {
    auto body = [](const Array& c, const Array& x) {
      return std::pair<Array, Array>{sp::sin(c) * x + c, c * c};
    };
    auto [c, ys] = sp::lax::scan(body, c0, xs);
    return sp::sum(c) + sp::sum(ys);
  };
  Array batch = sp::array<double>({0.1, 0.7, -0.4}, {3, 1});
  std::vector<double> got = sp::vmap(sp::grad(loss))(batch).to_vector<double>();
  std::vector<double> b = batch.to_vector<double>();
  for (size_t k = 0; k < 3; ++k)
    EXPECT_NEAR(got[k], sp::grad(loss)(sp::array<double>({b[k]})).item<double>(), 1e-12) << k;
}

}  // namespace

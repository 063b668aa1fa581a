// jit, grad, jvp, vjp and vmap: values against eager evaluation and closed forms, their
// compositions, caching, and errors.
#include <gtest/gtest.h>
#include <spmd/spmd.h>

#include "core/array_impl.h"

#include <cmath>

namespace {

namespace sp = spmd;
using sp::Array;

Array f32(std::vector<float> v, sp::Shape s) {
  return sp::array(v, s);
}

void expect_close(const Array& a, const std::vector<float>& want, float tol = 1e-5f) {
  std::vector<float> got = a.to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

TEST(Jit, MatchesEagerAndCachesBySignature) {
  auto f = [](const Array& x, const Array& y) { return sp::tanh(sp::dot(x, y)) * 2.0 + x.sum(); };
  auto jf = sp::jit(f);
  Array x = sp::random::normal(sp::random::key(0), {2, 3});
  Array y = sp::random::normal(sp::random::key(1), {3, 4});
  Array eager = f(x, y);
  Array jitted = jf(x, y);
  EXPECT_EQ(jitted.shape(), eager.shape());
  expect_close(jitted, eager.to_vector<float>());
  jf(x * 2.0, y);  // same signature: no new trace
  EXPECT_EQ(jf.trace_count(), 1);
  jf(sp::zeros({5, 3}), y);  // new shape: traced again
  EXPECT_EQ(jf.trace_count(), 2);
}

TEST(Jit, StaticArgumentsArePartOfTheSignature) {
  auto jf = sp::jit([](const Array& x, int power) { return sp::integer_pow(x, power); });
  Array x = f32({1, 2, 3}, {3});
  expect_close(jf(x, 2), {1, 4, 9});
  expect_close(jf(x, 3), {1, 8, 27});
  EXPECT_EQ(jf.trace_count(), 2);
  jf(x, 2);
  EXPECT_EQ(jf.trace_count(), 2);
}

TEST(Jit, TreesInAndOut) {
  auto jf = sp::jit([](const std::pair<Array, Array>& p) {
    return std::make_tuple(p.first + p.second, p.first * p.second);
  });
  auto [s, m] = jf(std::make_pair(f32({1, 2}, {2}), f32({3, 4}, {2})));
  expect_close(s, {4, 6});
  expect_close(m, {3, 8});
}

TEST(Jit, LowerShowsTheProgramBeforeAndAfterPasses) {
  auto jf = sp::jit([](const Array& x) {
    Array unused = sp::sin(x);
    Array a = sp::cos(x);
    Array b = sp::cos(x);
    return a + b;
  });
  std::string before = jf.lower(f32({1, 2}, {2})).str();
  std::string after = jf.lower_optimized(f32({1, 2}, {2})).str();
  EXPECT_NE(before.find("sin"), std::string::npos);
  EXPECT_EQ(after.find("sin"), std::string::npos);   // dead code removed
  EXPECT_EQ(after.find("cos"), after.rfind("cos"));  // the two cos merged
}

TEST(Jit, ConstantsAreFolded) {
  auto jf = sp::jit([](const Array& x) { return x * (sp::ones({2}) * 3.0); });
  std::string after = jf.lower_optimized(f32({1, 2}, {2})).str();
  EXPECT_EQ(after.find("broadcast_in_dim"), std::string::npos) << after;
  expect_close(jf(f32({1, 2}, {2})), {3, 6});
}

TEST(Jit, ReadingATracedValueNamesTheTransformation) {
  auto jf = sp::jit([](const Array& x) { return Array(x.item<float>()); });
  try {
    jf(f32({1}, {}));
    FAIL() << "expected ConcretizationError";
  } catch (const sp::ConcretizationError& e) {
    EXPECT_NE(std::string(e.what()).find("jit"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("sp::where"), std::string::npos) << e.what();
  }
}

TEST(Jit, LeakedTracerRaises) {
  Array leaked;
  auto jf = sp::jit([&](const Array& x) {
    leaked = x;
    return x + 1.0;
  });
  jf(f32({1, 2}, {2}));
  EXPECT_THROW(leaked + 1.0, sp::UnexpectedTracerError);
}

TEST(Grad, ClosedForms) {
  auto f = [](const Array& x) { return (sp::sin(x) * x).sum(); };
  Array x = f32({0.5f, 1.0f, 2.0f}, {3});
  Array g = sp::grad(f)(x);
  std::vector<float> want;
  for (float v : x.to_vector<float>()) want.push_back(std::cos(v) * v + std::sin(v));
  expect_close(g, want);
}

TEST(Grad, SecondDerivativeAndClosures) {
  auto d2 = sp::grad(sp::grad([](const Array& x) { return sp::sin(x); }));
  EXPECT_NEAR(d2(Array(0.7f)).item<float>(), -std::sin(0.7f), 1e-6);
  // grad(x -> grad(y -> x*y)(1.0))(2.0) == 1
  auto outer = sp::grad(
      [](const Array& x) { return sp::grad([&](const Array& y) { return x * y; })(Array(1.0f)); });
  EXPECT_FLOAT_EQ(outer(Array(2.0f)).item<float>(), 1.0f);
}

TEST(Grad, ComposesWithJitAndVmap) {
  auto f = [](const Array& x) { return (sp::tanh(x) * x).sum(); };
  Array x = f32({0.1f, -0.3f, 0.8f, 1.5f}, {4});
  Array g = sp::grad(f)(x);
  expect_close(sp::jit(sp::grad(f))(x), g.to_vector<float>());
  expect_close(sp::grad(sp::jit(f))(x), g.to_vector<float>());
  // vmap(grad(scalar f)) over the elements equals grad of the sum.
  auto scalar_f = [](const Array& v) { return sp::tanh(v) * v; };
  expect_close(sp::vmap(sp::grad(scalar_f))(x), g.to_vector<float>());
  expect_close(sp::jit(sp::grad([&](const Array& v) { return sp::vmap(scalar_f)(v).sum(); }))(x),
               g.to_vector<float>());
}

TEST(Grad, ValueAndGradAndArgnums) {
  auto f = [](const Array& w, const Array& b) { return (w * w + b).sum(); };
  Array w = f32({1, 2}, {2}), b = f32({3, 4}, {2});
  auto [value, gw] = sp::value_and_grad(f)(w, b);
  EXPECT_FLOAT_EQ(value.item<float>(), 12.0f);
  expect_close(gw, {2, 4});
  expect_close(sp::grad(f, {.argnums = {1}})(w, b), {1, 1});
}

TEST(Grad, ParameterTrees) {
  using Params = std::pair<Array, Array>;
  auto loss = [](const Params& p, const Array& x) {
    return sp::sum(sp::square(sp::dot(x, p.first) + p.second));
  };
  Params p{f32({1, 2}, {2, 1}), f32({0.5f}, {1})};
  Array x = f32({1, 1, 2, 0}, {2, 2});
  Params g = sp::grad(loss)(p, x);
  // residuals r = x·w + b = [3.5, 2.5]; dL/dw = 2 xᵀ r, dL/db = 2 Σ r.
  expect_close(g.first, {2 * (3.5f + 5.0f), 2 * 3.5f});
  expect_close(g.second, {12.0f});
}

TEST(Grad, Errors) {
  EXPECT_THROW(sp::grad([](const Array& x) { return x * 2.0; })(f32({1, 2}, {2})),
               sp::TypeError);  // non-scalar output
  EXPECT_THROW(sp::grad([](const Array& x) { return x; })(Array(1)), sp::TypeError);  // int input
  try {
    sp::grad([](const Array& x) { return x * 2.0; })(f32({1, 2}, {2}));
  } catch (const sp::TypeError& e) {
    EXPECT_NE(std::string(e.what()).find("Gradient only defined for scalar-output functions"),
              std::string::npos);
  }
}

}  // namespace

namespace transforms_test {

// An aux tree of grad(f, {.has_aux = true}): Arrays and a static leaf.
struct Stats {
  Array mean;
  std::vector<Array> parts;
  int count = 0;
};
SPMD_TREE(Stats, mean, parts, count);

}  // namespace transforms_test

namespace {

// f(x) = Σ x², aux = (mean(x), 2x): g = 2x.
std::pair<Array, std::pair<Array, Array>> loss_with_aux(const Array& x) {
  return {(x * x).sum(), {x.mean(), x * 2.0}};
}

TEST(Grad, HasAuxReturnsTheGradientAndTheAux) {
  Array x = f32({0, 1, 2}, {3});
  auto [g, aux] = sp::grad(loss_with_aux, {.has_aux = true})(x);
  expect_close(g, {0, 2, 4});
  expect_close(aux.first, {1});
  expect_close(aux.second, {0, 2, 4});
  EXPECT_TRUE(sp::is_concrete(aux.first));
}

TEST(Grad, ValueAndGradHasAuxReturnsValueAuxAndGradient) {
  Array x = f32({0, 1, 2}, {3});
  auto [value_aux, g] = sp::value_and_grad(loss_with_aux, {.has_aux = true})(x);
  EXPECT_FLOAT_EQ(value_aux.first.item<float>(), 5.0f);
  expect_close(value_aux.second.first, {1});
  expect_close(value_aux.second.second, {0, 2, 4});
  expect_close(g, {0, 2, 4});
}

TEST(Grad, AuxIsAnyTree) {
  using transforms_test::Stats;
  auto f = [](const Array& w, const Array& x) {
    Array y = sp::sin(w) * x;
    Stats s{y.mean(), {y, sp::argmax(y, 0)}, int(y.size())};
    return std::make_tuple(y.sum(), s);
  };
  Array w = f32({0.5f, 1.0f}, {2}), x = f32({3, -1}, {2});
  auto [g, s] = sp::grad(f, {.has_aux = true})(w, x);
  expect_close(g, {3 * std::cos(0.5f), -std::cos(1.0f)});
  std::vector<float> y = {3 * std::sin(0.5f), -std::sin(1.0f)};
  expect_close(s.mean, {(y[0] + y[1]) / 2});
  expect_close(s.parts[0], y);
  EXPECT_EQ(s.parts[1].dtype(), sp::DType::int32);
  EXPECT_EQ(s.parts[1].item<int>(), 0);
  EXPECT_EQ(s.count, 2);
  // Differentiating the second argument returns its gradient with the same aux.
  auto [gx, s2] = sp::grad(f, {.argnums = {1}, .has_aux = true})(w, x);
  expect_close(gx, {std::sin(0.5f), std::sin(1.0f)});
  expect_close(s2.parts[0], y);
}

TEST(Grad, HasAuxComposesWithJitAndVmap) {
  Array x = f32({0, 1, 2}, {3});
  // grad of a jitted function with aux.
  auto [g1, aux1] = sp::grad(sp::jit(loss_with_aux), {.has_aux = true})(x);
  expect_close(g1, {0, 2, 4});
  expect_close(aux1.second, {0, 2, 4});
  // jit of grad with aux: both come out of the compiled call as concrete arrays.
  auto jitted = sp::jit(sp::grad(loss_with_aux, {.has_aux = true}));
  auto [g2, aux2] = jitted(x);
  expect_close(g2, {0, 2, 4});
  expect_close(aux2.first, {1});
  EXPECT_TRUE(sp::is_concrete(aux2.first));
  EXPECT_TRUE(sp::is_concrete(aux2.second));
  // vmap over rows: per-row gradients and per-row aux.
  auto row = [](const Array& r) { return std::make_pair((r * r).sum(), r.max()); };
  Array xs = f32({1, 2, 3, 4}, {2, 2});
  auto [g3, aux3] = sp::vmap(sp::grad(row, {.has_aux = true}))(xs);
  expect_close(g3, {2, 4, 6, 8});
  expect_close(aux3, {2, 4});
  EXPECT_TRUE(sp::is_concrete(aux3));
}

TEST(Grad, HasAuxMustMatchWhatTheFunctionReturns) {
  Array x = f32({0, 1, 2}, {3});
  try {
    sp::grad(loss_with_aux)(x);
    FAIL() << "a pair without has_aux must raise";
  } catch (const sp::TypeError& e) {
    EXPECT_NE(std::string(e.what()).find("has_aux"), std::string::npos) << e.what();
  }
  try {
    sp::value_and_grad([](const Array& v) { return (v * v).sum(); }, {.has_aux = true})(x);
    FAIL() << "has_aux without a pair must raise";
  } catch (const sp::TypeError& e) {
    EXPECT_NE(std::string(e.what()).find("[value_and_grad] expected function with aux output to "
                                         "return a two-element tuple"),
              std::string::npos)
        << e.what();
  }
}

TEST(Jvp, DirectionalDerivative) {
  auto [y, t] =
      sp::jvp([](const Array& x) { return sp::exp(x) * 3.0; }, f32({0, 1}, {2}), f32({1, 2}, {2}));
  expect_close(y, {3, 3 * std::exp(1.0f)});
  expect_close(t, {3, 6 * std::exp(1.0f)}, 1e-4f);
}

TEST(Vjp, PullbackOfTwoArguments) {
  auto [out, pullback] = sp::vjp([](const Array& a, const Array& b) { return a * b; },
                                 f32({1, 2}, {2}), f32({3, 4}, {2}));
  expect_close(out, {3, 8});
  auto [ga, gb] = pullback(f32({1, 1}, {2}));
  expect_close(ga, {3, 4});
  expect_close(gb, {1, 2});
}

TEST(Jacobian, ForwardAndReverseAgreeWithTheClosedForm) {
  // f(x) = [x0 * x1, sin(x2), x0 + x2]: J = [[x1, x0, 0], [0, cos x2, 0]... rows per output.
  auto f = [](const Array& x) { return sp::stack({x[0] * x[1], sp::sin(x[2]), x[0] + x[2]}); };
  Array x = f32({2, 3, 0.5f}, {3});
  std::vector<float> want = {3, 2, 0, 0, 0, std::cos(0.5f), 1, 0, 1};
  Array jf = sp::jacfwd(f)(x), jr = sp::jacrev(f)(x);
  EXPECT_EQ(jf.shape(), sp::Shape({3, 3}));
  EXPECT_EQ(jr.shape(), sp::Shape({3, 3}));
  expect_close(jf, want);
  expect_close(jr, want);
}

TEST(Jacobian, HessianOfACubic) {
  auto f = [](const Array& x) { return sp::sum(x * x * x); };
  Array h = sp::hessian(f)(f32({1, -2}, {2}));
  EXPECT_EQ(h.shape(), sp::Shape({2, 2}));
  expect_close(h, {6, 0, 0, -12});
}

TEST(Vmap, MatchesALoop) {
  auto f = [](const Array& x, const Array& y) { return sp::tanh(sp::dot(x, y)); };
  Array xs = sp::random::normal(sp::random::key(2), {4, 2, 3});
  Array ys = sp::random::normal(sp::random::key(3), {4, 3, 5});
  Array batched = sp::vmap(f)(xs, ys);
  ASSERT_EQ(batched.shape(), sp::Shape({4, 2, 5}));
  for (int i = 0; i < 4; ++i) expect_close(batched[i], f(xs[i], ys[i]).to_vector<float>());
}

TEST(Vmap, InAxesNoneAndOutAxes) {
  auto f = [](const Array& x, const Array& w) { return sp::dot(w, x); };
  Array w = sp::random::normal(sp::random::key(4), {3, 2});
  Array xs = sp::random::normal(sp::random::key(5), {2, 6});  // batch along axis 1
  Array out = sp::vmap(f, {.in_axes = {1, sp::None}, .out_axes = {1}})(xs, w);
  ASSERT_EQ(out.shape(), sp::Shape({3, 6}));
  expect_close(out, sp::dot(w, xs).to_vector<float>());
  // Nested vmap gives an outer product.
  auto mul = [](const Array& a, const Array& b) { return a * b; };
  auto outer = sp::vmap(sp::vmap(mul, {.in_axes = {sp::None, 0}}), {.in_axes = {0, sp::None}});
  Array o = outer(f32({1, 2}, {2}), f32({3, 4, 5}, {3}));
  expect_close(o, {3, 4, 5, 6, 8, 10});
}

TEST(Vmap, Errors) {
  auto f = [](const Array& x, const Array& y) { return x + y; };
  try {
    sp::vmap(f)(sp::zeros({8, 2}), sp::zeros({4, 2}));
    FAIL() << "expected ValueError";
  } catch (const sp::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("vmap got inconsistent sizes for array axes to be mapped"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(sp::vmap(f, {.in_axes = {0, 0, 0}})(sp::zeros({2}), sp::zeros({2})), sp::ValueError);
  EXPECT_THROW(sp::vmap(f, {.in_axes = {2}})(sp::zeros({2}), sp::zeros({2})), sp::ValueError);
}

}  // namespace

namespace {

// A clipped gradient: f(x) = sin(x), backward pass scales the cotangent by 0.5 * cos(x).
auto scaled_sin() {
  return sp::custom_vjp(
      [](const Array& x) { return sp::sin(x); },
      [](const Array& x) { return std::make_pair(sp::sin(x), sp::cos(x)); },
      [](const Array& cos_x, const Array& ct) { return std::make_tuple(ct * cos_x * 0.5); });
}

TEST(CustomVjp, UsesTheUserBackwardPass) {
  auto f = scaled_sin();
  Array x = f32({0.3f, 1.2f}, {2});
  expect_close(f(x), {std::sin(0.3f), std::sin(1.2f)});
  Array g = sp::grad([&](const Array& v) { return f(v).sum(); })(x);
  expect_close(g, {0.5f * std::cos(0.3f), 0.5f * std::cos(1.2f)});
  // The same under jit, and composed with vmap of the gradient.
  expect_close(sp::jit(sp::grad([&](const Array& v) { return f(v).sum(); }))(x),
               g.to_vector<float>());
  expect_close(sp::vmap(sp::grad([&](const Array& v) { return f(v); }))(x), g.to_vector<float>());
}

TEST(CustomVjp, VmapEvaluatesTheFunction) {
  auto f = scaled_sin();
  Array xs = f32({0.1f, 0.2f, 0.3f, 0.4f}, {2, 2});
  expect_close(sp::vmap(f)(xs), sp::sin(xs).to_vector<float>());
}

// f(x) = x³ with a jvp rule that doubles the true tangent, so every derivative shows the rule
// was used (3x² · 2).
Array doubled_cube(const Array& x) {
  static const auto f =
      sp::custom_jvp([](const Array& v) { return v * v * v; },
                     [](const std::tuple<Array>& primals, const std::tuple<Array>& tangents) {
                       const Array& v = std::get<0>(primals);
                       Array out = doubled_cube(v);
                       return std::make_pair(out, v * v * 6.0 * std::get<0>(tangents));
                     });
  return f(x);
}

TEST(CustomJvp, EveryDerivativeUsesTheRule) {
  Array x = f32({0.5f, -2.0f}, {2});
  expect_close(doubled_cube(x), {0.125f, -8.0f});
  auto [y, t] = sp::jvp(doubled_cube, x, f32({1.0f, 0.5f}, {2}));
  expect_close(y, {0.125f, -8.0f});
  expect_close(t, {1.5f, 12.0f});
  auto loss = [](const Array& v) { return doubled_cube(v).sum(); };
  expect_close(sp::grad(loss)(x), {1.5f, 24.0f});
  expect_close(sp::jit(sp::grad(loss))(x), {1.5f, 24.0f});
  // Batched, the call keeps its rule: vmap of grad, grad of vmap, jvp of vmap.
  expect_close(sp::vmap(sp::grad(doubled_cube))(x), {1.5f, 24.0f});
  expect_close(sp::grad([](const Array& v) { return sp::vmap(doubled_cube)(v).sum(); })(x),
               {1.5f, 24.0f});
  auto [yb, tb] = sp::jvp(sp::vmap(doubled_cube), x, f32({1.0f, 1.0f}, {2}));
  expect_close(tb, {1.5f, 24.0f});
  // Second order differentiates the rule's own tangent: d/dx 6x² = 12x.
  expect_close(sp::grad(sp::grad(doubled_cube))(Array(0.5f)), {6.0f});
}

TEST(CustomJvp, RuleWithWrongTangentTypeRaises) {
  auto f = sp::custom_jvp([](const Array& v) { return v * 2.0; },
                          [](const std::tuple<Array>& p, const std::tuple<Array>&) {
                            return std::make_pair(std::get<0>(p) * 2.0, sp::zeros({5}));
                          });
  EXPECT_THROW(sp::grad([&](const Array& v) { return f(v).sum(); })(f32({1, 2}, {2})),
               sp::TypeError);
}

// jax.nn.relu's derivative is 0 at 0 (its rule selects the tangent where x > 0), where max's
// own rule would give 0.5.
TEST(CustomJvp, ReluGradientIsZeroAtZero) {
  Array x = f32({-1.0f, 0.0f, 2.0f}, {3});
  auto loss = [](const Array& v) { return sp::relu(v).sum(); };
  expect_close(sp::grad(loss)(x), {0.0f, 0.0f, 1.0f});
  expect_close(sp::jit(sp::grad(loss))(x), {0.0f, 0.0f, 1.0f});
  expect_close(sp::vmap(sp::grad(sp::relu))(x), {0.0f, 0.0f, 1.0f});
  expect_close(sp::relu(x), {0.0f, 0.0f, 2.0f});
  expect_close(sp::jit(sp::relu)(x), {0.0f, 0.0f, 2.0f});
}

TEST(CustomVjp, ForwardModeRaisesAsInJax) {
  auto f = scaled_sin();
  EXPECT_THROW(sp::jvp(f, f32({1}, {1}), f32({1}, {1})), sp::TypeError);
}

}  // namespace

// Buffer donation (jit's donate_argnums): the Executable writes elementwise results over donated
// buffers, the donated Array is deleted as in JAX, and nothing else sharing the data changes.
#include <gtest/gtest.h>
#include <spmd/spmd.h>

#include "compile/executable.h"
#include "core/array_impl.h"

#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace {

namespace sp = spmd;
using sp::Array;

Array f32(std::vector<float> v) {
  return sp::array(v, sp::Shape{int64_t(v.size())});
}

const void* data_of(const Array& x) {
  return sp::host_data(x, "test");
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const sp::Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Donation, ElementwiseResultsWriteOverTheDonatedBuffer) {
  auto f = [](const Array& a) { return sp::sin(a) * 2.0 + 1.0; };
  std::vector<float> values(1000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.01f * float(i);
  Array x = f32(values);
  const void* before = data_of(x);
  Array y = sp::jit(f, {.donate_argnums = {0}})(x);
  EXPECT_EQ(data_of(y), before);
  std::vector<float> got = y.to_vector<float>();
  for (size_t i = 0; i < values.size(); ++i)
    EXPECT_NEAR(got[i], std::sin(values[i]) * 2.0f + 1.0f, 1e-6f) << "at " << i;
  EXPECT_TRUE(x.is_deleted());
  // Without donation the argument keeps its buffer and its values.
  Array x2 = f32(values);
  Array y2 = sp::jit(f)(x2);
  EXPECT_NE(data_of(y2), data_of(x2));
  EXPECT_FALSE(x2.is_deleted());
  EXPECT_EQ(x2.to_vector<float>(), values);
}

TEST(Donation, BufferIsTakenOnlyAfterTheArgumentsLastUse) {
  // `a` is read again by the add, so sin must not write over it; the add may.
  auto f = [](const Array& a) { return sp::sin(a) + a; };
  Array x = f32({0.5f, 1.0f, 2.0f});
  const void* before = data_of(x);
  Array y = sp::jit(f, {.donate_argnums = {0}})(x);
  EXPECT_EQ(data_of(y), before);
  std::vector<float> got = y.to_vector<float>();
  EXPECT_NEAR(got[0], std::sin(0.5f) + 0.5f, 1e-6f);
  EXPECT_NEAR(got[1], std::sin(1.0f) + 1.0f, 1e-6f);
  EXPECT_NEAR(got[2], std::sin(2.0f) + 2.0f, 1e-6f);
}

TEST(Donation, NonElementwiseResultsGetTheirOwnBuffer) {
  // dot_general reads all of `a` for each output element: it must not write over `a`.
  Array x = sp::array({1.0f, 2.0f, 3.0f, 4.0f}, sp::Shape{2, 2});
  Array y = sp::jit([](const Array& a) { return sp::dot(a, a); }, {.donate_argnums = {0}})(x);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{7, 10, 15, 22}));
  EXPECT_TRUE(x.is_deleted());  // an output of its shape and dtype took it, as in JAX
}

TEST(Donation, DeletedArrayRaisesJaxError) {
  Array x = f32({0, 1, 2});
  Array alias = x;  // another handle to the same array, deleted with it (as in Python)
  auto jf = sp::jit([](const Array& a) { return a * 2.0; }, {.donate_argnums = {0}});
  Array y = jf(x);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0, 2, 4}));
  EXPECT_TRUE(x.is_deleted());
  EXPECT_TRUE(alias.is_deleted());
  EXPECT_EQ(x.shape(), sp::Shape{3});  // the type stays readable, as JAX's x.shape
  EXPECT_EQ(error_of([&] { (void)(x + 1.0); }),
            "[add] Array has been deleted with shape=float32[3].");
  EXPECT_EQ(error_of([&] { (void)x.to_vector<float>(); }),
            "[to_vector] Array has been deleted with shape=float32[3].");
  EXPECT_NE(error_of([&] { (void)sp::str(x); }).find("] Array has been deleted"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { (void)jf(x); }), "[jit] Array has been deleted with shape=float32[3].");
  EXPECT_EQ(error_of([&] { (void)sp::jit([](const Array& a) { return a; })(alias); }),
            "[jit] Array has been deleted with shape=float32[3].");
  EXPECT_THROW(x.block_until_ready(), sp::RuntimeError);
}

TEST(Donation, OtherArgumentsAreUntouched) {
  Array x = f32({1, 2, 3}), w = f32({10, 20, 30});
  const void* x_data = data_of(x);
  const void* w_data = data_of(w);
  Array y =
      sp::jit([](const Array& a, const Array& b) { return a * b; }, {.donate_argnums = {0}})(x, w);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{10, 40, 90}));
  EXPECT_EQ(data_of(y), x_data);
  EXPECT_FALSE(w.is_deleted());
  EXPECT_EQ(data_of(w), w_data);
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{10, 20, 30}));
}

TEST(Donation, DataSharedWithAnotherArrayIsNotOverwritten) {
  // An eager reshape shares x's buffer: donating x deletes x but must leave `view` intact.
  Array x = sp::array({1.0f, 2.0f, 3.0f, 4.0f}, sp::Shape{2, 2});
  Array view = x.reshape({4});
  ASSERT_EQ(data_of(view), data_of(x));
  Array y = sp::jit([](const Array& a) { return a * 10.0; }, {.donate_argnums = {0}})(x);
  EXPECT_TRUE(x.is_deleted());
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{10, 20, 30, 40}));
  EXPECT_EQ(view.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_NE(data_of(y), data_of(view));
}

TEST(Donation, ValueAnotherResultStillHoldsIsNotOverwritten) {
  // The inner call returns its argument itself, so `b` is the donated array: sin must not write
  // over it even though `a` is dead after sin.
  auto identity = sp::jit([](const Array& v) { return v; });
  auto f = [&](const Array& a) {
    Array b = identity(a);
    return std::make_pair(sp::sin(a), b);
  };
  Array x = f32({0.5f, 1.0f});
  auto [s, b] = sp::jit(f, {.donate_argnums = {0}})(x);
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{0.5f, 1.0f}));
  EXPECT_NEAR(s.to_vector<float>()[1], std::sin(1.0f), 1e-6f);
}

TEST(Donation, ConstantTheFunctionClosedOverKeepsItsValue) {
  Array c = f32({1, 2, 3});
  auto jf = sp::jit([c](const Array& a) { return a * 2.0 + c; }, {.donate_argnums = {0}});
  // c is both the closed-over constant and the donated argument: 2c + c, never 2c + 2c.
  Array y = jf(c);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{3, 6, 9}));
  EXPECT_TRUE(c.is_deleted());
  // The cached constant still holds c's values.
  EXPECT_EQ(jf(f32({1, 1, 1})).to_vector<float>(), (std::vector<float>{3, 4, 5}));
}

TEST(Donation, OnlyArgumentsAnOutputCanTakeAreDeleted) {
  // As JAX's _set_up_aliases: each output takes the first donated argument of its shape and
  // dtype; the rest are left alone (JAX warns that they were not usable).
  Array x = f32({1, 2, 3}), w = f32({1, 1, 1});
  Array y = sp::jit([](const Array& a, const Array& b) { return a + b; },
                    {.donate_argnums = {0, 1}})(x, w);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{2, 3, 4}));
  EXPECT_TRUE(x.is_deleted());
  EXPECT_FALSE(w.is_deleted());
  Array s = f32({1, 2, 3});
  Array total = sp::jit([](const Array& a) { return a.sum(); }, {.donate_argnums = {0}})(s);
  EXPECT_FLOAT_EQ(total.item<float>(), 6.0f);
  EXPECT_FALSE(s.is_deleted());
  // Donated leaves of a tree argument.
  Array p = f32({1, 2, 3}), q = f32({4, 5, 6});
  Array r = sp::jit([](const std::pair<Array, Array>& t) { return t.first * t.second; },
                    {.donate_argnums = {0}})(std::make_pair(p, q));
  EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{4, 10, 18}));
  EXPECT_TRUE(p.is_deleted());
  EXPECT_FALSE(q.is_deleted());
}

TEST(Donation, ArgumentErrorsFollowJax) {
  auto add = [](const Array& a, const Array& b) { return a + b; };
  Array x = f32({1, 2, 3});
  EXPECT_EQ(error_of([&] {
              sp::jit(add, {.donate_argnums = {0, 2}})(x, x);
            }),
            "[jit] Jitted function has donate_argnums=(0, 2), but only accepts 2 positional "
            "arguments.");
  EXPECT_EQ(error_of([&] { sp::jit(add, {.donate_argnums = {-3}})(x, x); }),
            "[jit] Jitted function has donate_argnums=(-3,), but only accepts 2 positional "
            "arguments.");
  // A negative index in range donates nothing, as in JAX.
  Array w = f32({1, 1, 1});
  sp::jit(add, {.donate_argnums = {-1}})(x, w);
  EXPECT_FALSE(w.is_deleted());
  // Non-Array arguments are static, and static arguments cannot be donated.
  auto scale = [](const Array& a, int k) { return a * float(k); };
  EXPECT_THROW(sp::jit(scale, {.donate_argnums = {1}})(x, 2), sp::ValueError);
  // The same array donated and used by another argument of the call: XLA's error, nothing
  // deleted.
  EXPECT_EQ(error_of([&] { sp::jit(add, {.donate_argnums = {0}})(x, x); }),
            "[jit] Attempt to use a buffer that was previously donated in the same call "
            "(flattened argument 1, first use: 0). Toy example for this bug: "
            "`f(donate(a), a)`.");
  EXPECT_EQ(error_of([&] { sp::jit(add, {.donate_argnums = {1}})(x, x); }),
            "[jit] Attempt to donate a buffer which is also used by the same call (flattened "
            "argument 1, first use: 0). Toy example for this bug: `f(a, donate(a))`.");
  EXPECT_FALSE(x.is_deleted());
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 2, 3}));
}

TEST(Donation, UnderGradAndVmapValuesAreKept) {
  auto f = [](const Array& a) { return sp::sin(a) * a; };
  auto jf = sp::jit(f, {.donate_argnums = {0}});
  Array x = f32({0.5f, 1.0f, 2.0f});
  // Inside grad and vmap the jitted call is traced: its argument is not donated.
  Array g = sp::grad([&](const Array& a) { return jf(a).sum(); })(x);
  std::vector<float> got = g.to_vector<float>();
  std::vector<float> xs = {0.5f, 1.0f, 2.0f};
  for (size_t i = 0; i < xs.size(); ++i)
    EXPECT_NEAR(got[i], std::cos(xs[i]) * xs[i] + std::sin(xs[i]), 1e-6f);
  EXPECT_FALSE(x.is_deleted());
  EXPECT_EQ(x.to_vector<float>(), xs);
  Array v = sp::vmap(jf)(x);
  got = v.to_vector<float>();
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_NEAR(got[i], std::sin(xs[i]) * xs[i], 1e-6f);
  EXPECT_EQ(x.to_vector<float>(), xs);
  // A jitted grad donates its own argument.
  Array y = f32(xs);
  Array gy =
      sp::jit(sp::grad([&](const Array& a) { return f(a).sum(); }), {.donate_argnums = {0}})(y);
  std::vector<float> want = g.to_vector<float>();
  got = gy.to_vector<float>();
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6f);
  EXPECT_TRUE(y.is_deleted());
}

// The equation profile counts every equation of every run made while it is on, under its
// primitive and result types, and nothing while it is off.
TEST(EquationProfile, CountsTheEquationsOfTheRunsMadeWhileOn) {
  auto f = sp::jit([](const Array& a, const Array& b) { return sp::matmul(a, b) + 1.0f; });
  const Array a = sp::ones({4, 3}), b = sp::ones({3, 5});
  EXPECT_EQ(f(a, b).to_vector<float>(), std::vector<float>(20, 4.0f));  // compiled and run
  sp::clear_equation_profile();
  sp::set_equation_profiling(true);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(f(a, b).to_vector<float>()[0], 4.0f);
  }
  sp::set_equation_profiling(false);
  EXPECT_EQ(f(a, b).to_vector<float>()[0], 4.0f);
  const std::vector<sp::EquationProfileEntry> profile = sp::equation_profile();
  sp::clear_equation_profile();
  int64_t products = 0;
  for (size_t i = 0; i < profile.size(); ++i) {
    if (profile[i].equation == "dot_general f32[4,5]") products += profile[i].count;
    EXPECT_GE(profile[i].cpu_seconds, 0.0) << profile[i].equation;
    EXPECT_GE(profile[i].wall_seconds, 0.0) << profile[i].equation;
    if (i > 0) {
      EXPECT_LE(profile[i].cpu_seconds, profile[i - 1].cpu_seconds);
    }
  }
  EXPECT_EQ(products, 3);
  EXPECT_TRUE(sp::equation_profile().empty());
}

}  // namespace

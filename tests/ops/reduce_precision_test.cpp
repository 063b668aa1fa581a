// lax::reduce_precision, the primitive added by following the "adding a primitive" walkthrough
// (docs/ARCHITECTURE.md): its values eager and under jit, its jaxprs under grad, jvp and vmap,
// and its errors, all against JAX 0.10.2 (tools/goldens/gen_reduce_precision.py).
#include <spmd/spmd.h>

#include "support/golden.h"

#include <gtest/gtest.h>

#include <string>

namespace {

namespace sp = spmd;
using spmd_test::arrays_equal;
using spmd_test::error_message;
using spmd_test::golden_text;
using spmd_test::load_golden;

std::string jaxpr(const char* name) {
  return golden_text(std::string("reduce_precision/") + name + ".txt");
}

sp::Array rp(const sp::Array& x) {
  return sp::lax::reduce_precision(x, 5, 10);
}

TEST(ReducePrecision, ValuesMatchJaxEagerAndUnderJit) {
  const auto& golden = load_golden("reduce_precision/values.npz");
  for (const char* key : {"float32|5|10", "float32|8|7", "bfloat16|4|3", "float16|2|1"}) {
    const std::string k = key;
    const size_t a = k.find('|'), b = k.rfind('|');
    const int e = std::stoi(k.substr(a + 1, b - a - 1)), m = std::stoi(k.substr(b + 1));
    const sp::Array& x = golden.at(k + "|x");
    const sp::Array& y = golden.at(k + "|y");
    EXPECT_TRUE(arrays_equal(sp::lax::reduce_precision(x, e, m), y)) << key;
    auto jitted = sp::jit([e, m](const sp::Array& v) { return sp::lax::reduce_precision(v, e, m); });
    EXPECT_TRUE(arrays_equal(jitted(x), y)) << key;
  }
}

TEST(ReducePrecision, KeepsTheWeakType) {
  sp::Array y = sp::lax::reduce_precision(sp::Array(3.14159), 5, 2);
  EXPECT_TRUE(y.weak_type());
  EXPECT_EQ(y.item<float>(), 3.0f);
}

TEST(ReducePrecision, JaxprsMatchJax) {
  sp::Array x = sp::zeros({2, 3});
  EXPECT_EQ(sp::make_jaxpr(rp)(x).str(), jaxpr("reduce_precision"));
  auto loss = [](const sp::Array& v) { return sp::sum(rp(v)); };
  EXPECT_EQ(sp::make_jaxpr(sp::grad(loss))(x).str(), jaxpr("grad_reduce_precision"));
  auto tangent = [](const sp::Array& v, const sp::Array& t) { return sp::jvp(rp, v, t); };
  EXPECT_EQ(sp::make_jaxpr(tangent)(x, x).str(), jaxpr("jvp_reduce_precision"));
  EXPECT_EQ(sp::make_jaxpr(sp::vmap(rp, {.in_axes = {1}}))(x).str(), jaxpr("vmap_reduce_precision"));
}

TEST(ReducePrecision, GradientRoundsTheCotangent) {
  // d/dx sum(rp(x) * c) = rp(c): the cotangent is rounded as the value is.
  sp::Array c = sp::array({1.0f, 3.14159265f, 1e-5f});
  auto loss = [&](const sp::Array& v) { return sp::sum(rp(v) * c); };
  sp::Array g = sp::grad(loss)(sp::ones({3}));
  EXPECT_TRUE(arrays_equal(g, rp(c)));
}

TEST(ReducePrecision, BadInputRaisesJaxsErrors) {
  sp::Array x = sp::ones({3});
  EXPECT_EQ(error_message<sp::ValueError>([&] { sp::lax::reduce_precision(x, 0, 1); }),
            "[reduce_precision] reduce_precision: exponent_bits must be positive; got 0");
  EXPECT_EQ(error_message<sp::ValueError>([&] { sp::lax::reduce_precision(x, 2, -1); }),
            "[reduce_precision] reduce_precision: mantissa_bits must be non-negative; got -1");
  EXPECT_EQ(error_message<sp::TypeError>(
                [&] { sp::lax::reduce_precision(sp::ones({3}, sp::DType::int32), 5, 2); }),
            "[reduce_precision] reduce_precision does not accept dtype int32. Accepted dtypes are "
            "subtypes of floating.");
}

}  // namespace

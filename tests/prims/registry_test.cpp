// The primitive registry: JAX's primitive names are registered, shape rules run without kernels,
// and bind evaluates eagerly.
#include "prims/primitive.h"

#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace sp = spmd;

TEST(Registry, HasJaxPrimitiveNames) {
  for (const char* name : {"add",      "sub",         "mul",          "div",
                           "max",      "eq",          "select_n",     "convert_element_type",
                           "iota",     "sin",         "exp",          "tanh",
                           "logistic", "erf_inv",     "integer_pow",  "broadcast_in_dim",
                           "reshape",  "transpose",   "reduce_sum",   "reduce_max",
                           "argmax",   "dot_general", "threefry2x32", "iota_2x32_shape",
                           "sort",     "concatenate", "slice",        "dynamic_slice",
                           "gather"})
    EXPECT_NE(sp::primitive_registry().find(name), nullptr) << name;
}

TEST(Registry, ShapeRuleGivesTypesWithoutRunningKernels) {
  sp::AbstractValue x{sp::Shape{2, 3}, sp::float32, false};
  sp::AbstractValue s{sp::Shape{}, sp::float32, true};
  std::vector<sp::AbstractValue> in{x, s};
  auto out = sp::abstract_eval(sp::primitive("add"), in, {});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], x);  // strong f32[2,3] + weak f32[] is strong f32[2,3]
  auto cmp = sp::abstract_eval(sp::primitive("lt"), in, {});
  EXPECT_EQ(cmp[0].dtype, sp::bool_);
  std::vector<sp::AbstractValue> mixed{x, sp::AbstractValue{sp::Shape{2, 3}, sp::int32, false}};
  EXPECT_THROW(sp::abstract_eval(sp::primitive("add"), mixed, {}), sp::TypeError);
}

TEST(Registry, BindRunsThePrimitiveEagerly) {
  sp::Array x = sp::arange(4), y = sp::Array(10);
  sp::Array z = sp::bind1(sp::primitive("add"), {x, sp::astype(y, sp::int32)});
  EXPECT_EQ(z.to_vector<int>(), (std::vector<int>{10, 11, 12, 13}));
}

TEST(Registry, ReshapeAndSqueezeShareTheInputBufferEagerly) {
  sp::Array x = sp::arange(12.0f).reshape({3, 4});
  sp::Array y = sp::reshape(x, {4, 3});
  sp::Array z = sp::squeeze(x.reshape({1, 12}));
  EXPECT_EQ(y.impl()->buffer, x.impl()->buffer);
  EXPECT_EQ(z.impl()->buffer, x.impl()->buffer);
  EXPECT_EQ(y.shape(), (sp::Shape{4, 3}));
  EXPECT_EQ(z.to_vector<float>(), x.to_vector<float>());
  sp::Array t = sp::transpose(x);  // a real copy
  EXPECT_NE(t.impl()->buffer, x.impl()->buffer);
}

// empty2 (the placeholder of residual slots a cond branch does not fill) takes no operands and
// gives a scalar of its dtype; spmd fills it with zeros, eagerly and in a compiled program.
TEST(Registry, Empty2IsAZeroScalarOfItsDtype) {
  sp::Params params{{"dtype", sp::int32}, {"memory_space", std::string("MemorySpace.Device")}};
  auto types = sp::abstract_eval(sp::primitive("empty2"), {}, params);
  ASSERT_EQ(types.size(), 1u);
  EXPECT_EQ(types[0], (sp::AbstractValue{sp::Shape{}, sp::int32, false}));
  sp::AbstractValue x{sp::Shape{2}, sp::int32, false};
  EXPECT_THROW(sp::abstract_eval(sp::primitive("empty2"), {&x, 1}, params), sp::TypeError);
  EXPECT_EQ(sp::bind1(sp::primitive("empty2"), {}, params).item<int32_t>(), 0);
  auto plus_empty = [params](const sp::Array& v) {
    return v + sp::bind1(sp::primitive("empty2"), {}, params);
  };
  sp::Array v = sp::array<int32_t>({3, -4});
  EXPECT_EQ(sp::jit(plus_empty)(v).to_vector<int32_t>(), (std::vector<int32_t>{3, -4}));
}

// pow takes a floating base with an integer exponent, as JAX's lax.pow: the exponent is
// converted to the base's dtype first. Values from JAX 0.10.2's lax.pow.
TEST(Registry, PowTakesAnIntegerExponent) {
  sp::Array x = sp::array(std::vector<float>{2.0f, 0.5f, 0.0f, 0.0f, -2.0f, 3.0f}, sp::Shape{6});
  sp::Array y = sp::asarray(sp::array({3, -2, 0, -1, 3, 40}), sp::int32);
  sp::Array got = sp::bind1(sp::primitive("pow"), {x, y});
  EXPECT_EQ(got.dtype(), sp::float32);
  EXPECT_EQ(got.to_vector<float>(),
            (std::vector<float>{8.0f, 4.0f, 1.0f, HUGE_VALF, -8.0f, 1.2157665106179654e+19f}));
  // A 0-d exponent broadcasts; under jit and vmap the same values.
  sp::Array two = sp::full({}, 2, sp::int32);
  auto pow2 = [&](const sp::Array& v) { return sp::bind1(sp::primitive("pow"), {v, two}); };
  const std::vector<float> squares{4.0f, 0.25f, 0.0f, 0.0f, 4.0f, 9.0f};
  EXPECT_EQ(pow2(x).to_vector<float>(), squares);
  EXPECT_EQ(sp::jit(pow2)(x).to_vector<float>(), squares);
  EXPECT_EQ(sp::vmap(pow2)(x.reshape({2, 3})).to_vector<float>(), squares);
  // JAX's errors for the dtypes it refuses.
  auto error_of = [](sp::Array a, sp::Array b) -> std::string {
    try {
      sp::bind1(sp::primitive("pow"), {a, b});
    } catch (const sp::TypeError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(error_of(x, sp::zeros({6}, sp::float16)),
            "[pow] the first argument to pow must have an inexact dtype (float or complex), and "
            "the second argument must have an inexact or integer dtype, and two inexact dtypes "
            "must match, but got float32 and float16 respectively.");
  EXPECT_NE(error_of(y, x), "no error");
}

// The coverage tests call type rules with any number of operands; pow's read a second one
// without checking (a heap overflow under ASan).
TEST(Registry, PowWithOneOperandRaises) {
  const sp::AbstractValue x{sp::Shape{4}, sp::DType::float32};
  EXPECT_THROW(sp::abstract_eval(sp::primitive("pow"), std::span(&x, 1), {}), sp::ValueError);
}

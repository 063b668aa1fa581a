// make_jaxpr's text against JAX's own (tools/goldens/gen_jaxpr.py writes tests/goldens/jaxpr/):
// each test traces the C++ twin of one Python function from tests/goldens/jaxpr/MANIFEST.md and
// compares the printed jaxpr byte for byte, so names, params, literals and line breaks all count.
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
const auto tanh_dot = [](const Array& x, const Array& y) { return sp::tanh(sp::dot(x, y)); };

// The helpers of MANIFEST.md.
Array g(const Array& x) {
  return sp::sin(x) * 2.0;
}

using MlpParams = std::tuple<Array, Array, Array, Array>;
Array mlp_loss(const MlpParams& params, const Array& x, const Array& y) {
  const auto& [w1, b1, w2, b2] = params;
  Array h = sp::maximum(sp::dot(x, w1) + b1, 0.0);
  Array out = sp::dot(h, w2) + b2;
  return sp::mean(sp::integer_pow(out - y, 2));
}


using Branch = std::function<Array(const Array&)>;
using Carry = std::pair<Array, Array>;

// ---- the Pmap cookbook ------------------------------------------------------------------------

TEST(JaxprText, CookbookTanhDot) {
  EXPECT_EQ(sp::make_jaxpr(tanh_dot)(f32({2, 3}), f32({3, 4})).str(), golden("cookbook_tanh_dot"));
}

TEST(JaxprText, CookbookVmapTanhDot) {
  EXPECT_EQ(sp::make_jaxpr(sp::vmap(tanh_dot))(f32({8, 2, 3}), f32({8, 3, 4})).str(),
            golden("cookbook_vmap_tanh_dot"));
}

// ---- elementwise chains and literals ----------------------------------------------------------

TEST(JaxprText, ElementwiseSinCosChain) {
  // C++ leaves the evaluation order of operands unspecified: statements fix Python's order.
  auto f = [](const Array& x) {
    Array a = sp::sin(x) * 2;
    Array b = a + sp::cos(x);
    return b - 1.5;
  };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({3})).str(), golden("elementwise_sin_cos_chain"));
}

TEST(JaxprText, ElementwiseExpLog) {
  auto f = [](const Array& x) { return sp::log(sp::exp(x) + 1.0) * 0.5; };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({2, 3})).str(), golden("elementwise_exp_log"));
}

TEST(JaxprText, ElementwiseTwoInputs) {
  auto f = [](const Array& x, const Array& y) {
    Array num = x * y + x;
    return num / (y - 3.0);
  };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({3}), f32({3})).str(), golden("elementwise_two_inputs"));
}

// 0.1 rounds to float32 and prints as the shortest repr of that float widened to double.
TEST(JaxprText, LiteralInexactFloat) {
  auto f = [](const Array& x) { return x * 0.1; };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({3})).str(), golden("literal_inexact_float"));
}

// Python's float repr: exponent form from 1e16 and below 1e-4, "inf" and "nan" bare.
TEST(JaxprText, LiteralFloatFormats) {
  auto f = [](const Array& x) {
    return (x * -2.5 + 1e20) * 1e-5 + std::numeric_limits<double>::infinity() -
           std::numeric_limits<double>::quiet_NaN();
  };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({3})).str(), golden("literal_float_formats"));
}

TEST(JaxprText, LiteralFloatExponentCutoffs) {
  auto f = [](const Array& x) { return (x * 1e16 + 1e15) * 123456789.0 + 5e-324; };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({3})).str(), golden("literal_float_exponent_cutoffs"));
}

TEST(JaxprText, LiteralInt) {
  auto f = [](const Array& n) { return n * 100000 - 7; };
  EXPECT_EQ(sp::make_jaxpr(f)(i32({3})).str(), golden("literal_int"));
}

// ---- weak types -------------------------------------------------------------------------------

TEST(JaxprText, WeakMulIntLiteral) {
  auto f = [](const Array& x) { return x * 2; };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({3})).str(), golden("weak_mul_int_literal"));
}

TEST(JaxprText, WeakAddFloatLiteral) {
  auto f = [](const Array& x) { return x + 1.0; };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({3})).str(), golden("weak_add_float_literal"));
}

TEST(JaxprText, WeakIntArrayDiv) {
  auto f = [](const Array& n) { return n / 2; };
  EXPECT_EQ(sp::make_jaxpr(f)(i32({3})).str(), golden("weak_int_array_div"));
}

TEST(JaxprText, WeakIntArrayMul) {
  auto f = [](const Array& n) { return n * 3; };
  EXPECT_EQ(sp::make_jaxpr(f)(i32({3})).str(), golden("weak_int_array_mul"));
}

// A weakly typed argument (Python's 1.0) prints as plain f32[]. Array(1.0) rather than 1.0, so
// that it is traced, not a static argument.
TEST(JaxprText, WeakScalarArg) {
  auto f = [](const Array& s) { return s * 2; };
  EXPECT_EQ(sp::make_jaxpr(f)(Array(1.0)).str(), golden("weak_scalar_arg"));
}

TEST(JaxprText, WeakScalarArgTimesArray) {
  auto f = [](const Array& s, const Array& x) { return x * s; };
  EXPECT_EQ(sp::make_jaxpr(f)(Array(1.0), f32({3})).str(), golden("weak_scalar_arg_times_array"));
}

// jnp.where is itself jitted in JAX: it prints as a jit[name=_where] call.
TEST(JaxprText, WhereRelu) {
  auto f = [](const Array& x) { return sp::where(x > 0, x, 0.0); };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({3})).str(), golden("where_relu"));
}

TEST(JaxprText, MaximumRelu) {
  auto f = [](const Array& x) { return sp::maximum(x, 0.0); };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({3})).str(), golden("maximum_relu"));
}

// A non-bool condition is compared with zero; a scalar one selects without being broadcast.
TEST(JaxprText, WhereScalarIntCondition) {
  auto f = [](const Array& c, const Array& x) { return sp::where(c, x, 0.0); };
  EXPECT_EQ(sp::make_jaxpr(f)(i32({}), f32({3})).str(), golden("where_scalar_int_condition"));
}

// jnp.power of a traced exponent: binary exponentiation over the exponent's low 6 bits for
// integers (bools made int32 first), pow itself for a floating base and integer exponents.
TEST(JaxprText, PowerOfTracedExponents) {
  auto f = [](const Array& x, const Array& e) { return sp::power(x, e); };
  EXPECT_EQ(sp::make_jaxpr(f)(i32({3}), i32({3})).str(), golden("power_int_int"));
  EXPECT_EQ(sp::make_jaxpr(f)(boolean({3}), boolean({3})).str(), golden("power_bool_bool"));
  EXPECT_EQ(sp::make_jaxpr(f)(f32({3}), i32({3})).str(), golden("power_float_int"));
}

// ---- custom_jvp -------------------------------------------------------------------------------
// jax.nn.relu is a custom_jvp function around a jit call; its jvp selects the tangent.
TEST(JaxprText, NnRelu) {
  auto f = [](const Array& x) { return sp::relu(x); };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({3})).str(), golden("nn_relu"));
  EXPECT_EQ(sp::make_jaxpr(sp::vmap(f))(f32({2, 3})).str(), golden("vmap_nn_relu"));
  auto jvp = [](const Array& x, const Array& t) { return sp::jvp(sp::relu, x, t); };
  EXPECT_EQ(sp::make_jaxpr(jvp)(f32({3}), f32({3})).str(), golden("jvp_nn_relu"));
}

// A user's custom_jvp function with a weakly typed scalar argument, and its jvp.
Array sin_scaled(const Array& x, const Array& y) {
  static const auto f = sp::custom_jvp(
      [](const Array& a, const Array& b) { return sp::sin(a) * b; },
      [](const std::tuple<Array, Array>& primals, const std::tuple<Array, Array>& tangents) {
        const auto& [a, b] = primals;
        const auto& [ta, tb] = tangents;
        Array out = sin_scaled(a, b);
        Array along_a = sp::cos(a) * ta * b;
        Array along_b = sp::sin(a) * tb;
        return std::make_pair(out, along_a + along_b);
      },
      {.name = "sin_scaled", .jvp_name = "sin_scaled_jvp"});
  return f(x, y);
}

TEST(JaxprText, CustomJvpUser) {
  auto f = [](const Array& x, const Array& y) { return sin_scaled(x, y); };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({3}), Array(1.0)).str(), golden("custom_jvp_user"));
  auto jvp = [](const Array& x, const Array& t) {
    return sp::jvp([](const Array& v) { return sin_scaled(v, Array(2.0)); }, x, t);
  };
  EXPECT_EQ(sp::make_jaxpr(jvp)(f32({3}), f32({3})).str(), golden("jvp_custom_jvp_user"));
}

// ---- broadcasting -----------------------------------------------------------------------------

TEST(JaxprText, BroadcastRow) {
  auto f = [](const Array& x, const Array& b) { return x + b; };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({2, 3}), f32({3})).str(), golden("broadcast_row"));
}

TEST(JaxprText, BroadcastOuter) {
  auto f = [](const Array& a, const Array& b) { return a * b; };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({2, 1}), f32({1, 3})).str(), golden("broadcast_outer"));
}

TEST(JaxprText, BroadcastScalarArray) {
  auto f = [](const Array& x, const Array& s) { return x - s; };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({2, 3}), f32({})).str(), golden("broadcast_scalar_array"));
}

// ---- reductions -------------------------------------------------------------------------------

TEST(JaxprText, ReduceSumAll) {
  auto f = [](const Array& x) { return sp::sum(x); };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({2, 3})).str(), golden("reduce_sum_all"));
}

TEST(JaxprText, ReduceSumAxisKeepdims) {
  auto f = [](const Array& x) { return sp::sum(x, {1}, /*keepdims=*/true); };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({2, 3})).str(), golden("reduce_sum_axis_keepdims"));
}

TEST(JaxprText, ReduceMeanAll) {
  auto f = [](const Array& x) { return sp::mean(x); };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({2, 3})).str(), golden("reduce_mean_all"));
}

TEST(JaxprText, ReduceMeanAxis0) {
  auto f = [](const Array& x) { return sp::mean(x, {0}); };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({2, 3})).str(), golden("reduce_mean_axis0"));
}

TEST(JaxprText, ReduceMaxKeepdims) {
  auto f = [](const Array& x) { return sp::max(x, {-1}, /*keepdims=*/true); };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({2, 3})).str(), golden("reduce_max_keepdims"));
}

TEST(JaxprText, ArgmaxAxis1) {
  auto f = [](const Array& x) { return sp::argmax(x, 1); };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({2, 3})).str(), golden("argmax_axis1"));
}

// ---- dot / matmul -----------------------------------------------------------------------------

TEST(JaxprText, DotVectorMatrix) {
  auto f = [](const Array& v, const Array& m) { return sp::dot(v, m); };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({3}), f32({3, 4})).str(), golden("dot_vector_matrix"));
}

TEST(JaxprText, MatmulBatched) {
  auto f = [](const Array& a, const Array& b) { return sp::matmul(a, b); };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({5, 2, 3}), f32({5, 3, 4})).str(), golden("matmul_batched"));
}

// ---- shapes and creation ----------------------------------------------------------------------

TEST(JaxprText, ReshapeTranspose) {
  auto f = [](const Array& x) { return x.reshape({3, 2}).T(); };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({2, 3})).str(), golden("reshape_transpose"));
}

TEST(JaxprText, TransposeT) {
  auto f = [](const Array& x) { return x.T(); };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({2, 3})).str(), golden("transpose_T"));
}

TEST(JaxprText, ConcatenateAxis0) {
  auto f = [](const Array& x, const Array& y) { return sp::concatenate({x, y}, 0); };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({2, 3}), f32({1, 3})).str(), golden("concatenate_axis0"));
}

// x[1:3]: basic slicing binds slice with strides=None.
TEST(JaxprText, SliceRows) {
  auto f = [](const Array& x) { return sp::lax::slice(x, {1, 0}, {3, 3}); };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({4, 3})).str(), golden("slice_rows"));
}

// Creation inside a traced function is staged (broadcast_in_dim of a literal), not a constant.
TEST(JaxprText, ZerosOnesInside) {
  auto f = [](const Array& x) {
    Array a = x * sp::ones({2, 3});
    return a + sp::zeros({2, 3});
  };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({2, 3})).str(), golden("zeros_ones_inside"));
}

// iota has no operands, so its line ends in a space after "]".
TEST(JaxprText, ArangeInside) {
  auto f = [](const Array& x) { return x + sp::arange(3.0f); };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({3})).str(), golden("arange_inside"));
}

// A concrete array captured from outside becomes a constvar before the ";".
TEST(JaxprText, ClosureConstant) {
  const Array konst = sp::arange(3.0f);
  auto f = [konst](const Array& x) { return x + konst; };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({3})).str(), golden("closure_constant"));
}

// ---- nested jit -------------------------------------------------------------------------------

// JAX names the call after the Python function (name=g); C++ has no function names to read.
TEST(JaxprText, NestedJit) {
  auto f = [](const Array& x) { return sp::jit(g, {.name = "g"})(x) + 1.0; };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({3})).str(), golden("nested_jit"));
}

// The same sub-jaxpr used twice is printed once, first, as "let g = { ... } in".
TEST(JaxprText, NestedJitTwice) {
  // One jitted object, so both calls share its traced Program (JAX caches by function).
  auto jg = sp::jit(g, {.name = "g"});
  auto f = [&](const Array& x) { return jg(jg(x)); };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({3})).str(), golden("nested_jit_twice"));
}

// Only the top-level jaxpr names unused results "_"; inside the call they get fresh names.
TEST(JaxprText, NestedJitDeadCodeNames) {
  auto f = [](const Array& x) { return sp::jit(sp::grad(g), {.name = "g"})(x); };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({})).str(), golden("nested_jit_dead_code_names"));
}

// ---- grad -------------------------------------------------------------------------------------

TEST(JaxprText, GradSin) {
  EXPECT_EQ(sp::make_jaxpr(sp::grad(sin_fn))(f32({})).str(), golden("grad_sin"));
}

TEST(JaxprText, GradSquare) {
  auto f = [](const Array& x) { return x * x; };
  EXPECT_EQ(sp::make_jaxpr(sp::grad(f))(f32({})).str(), golden("grad_square"));
}

TEST(JaxprText, GradSumTanh) {
  auto f = [](const Array& x) { return sp::sum(sp::tanh(x)); };
  EXPECT_EQ(sp::make_jaxpr(sp::grad(f))(f32({3})).str(), golden("grad_sum_tanh"));
}

TEST(JaxprText, GradMlpLoss) {
  MlpParams params{f32({3, 4}), f32({4}), f32({4, 2}), f32({2})};
  EXPECT_EQ(sp::make_jaxpr(sp::grad(mlp_loss))(params, f32({5, 3}), f32({5, 2})).str(),
            golden("grad_mlp_loss"));
}

TEST(JaxprText, GradGradSin) {
  EXPECT_EQ(sp::make_jaxpr(sp::grad(sp::grad(sin_fn)))(f32({})).str(), golden("grad_grad_sin"));
}

TEST(JaxprText, ValueAndGradSumSq) {
  auto f = [](const Array& x) { return sp::sum(sp::integer_pow(x, 2)); };
  EXPECT_EQ(sp::make_jaxpr(sp::value_and_grad(f))(f32({3})).str(), golden("value_and_grad_sum_sq"));
}

// ---- vmap -------------------------------------------------------------------------------------

TEST(JaxprText, VmapElementwise) {
  auto f = [](const Array& x) { return sp::sin(x) * 2.0; };
  EXPECT_EQ(sp::make_jaxpr(sp::vmap(f))(f32({4, 3})).str(), golden("vmap_elementwise"));
}

// JAX prints the batched reduction's axes as (np.int64(1),): its batching rule makes NumPy ints,
// a Python artefact spmd's integer params do not carry. The comparison spells them as plain ints.
using spmd_test::without_numpy_ints;

TEST(JaxprText, VmapSumAxis) {
  auto f = [](const Array& x) { return sp::sum(x, {0}); };
  EXPECT_EQ(sp::make_jaxpr(sp::vmap(f))(f32({4, 2, 3})).str(),
            without_numpy_ints(golden("vmap_sum_axis")));
}

TEST(JaxprText, VmapDotUnbatchedArg) {
  auto dot = [](const Array& a, const Array& b) { return sp::dot(a, b); };
  EXPECT_EQ(
      sp::make_jaxpr(sp::vmap(dot, {.in_axes = {0, sp::None}}))(f32({4, 3}), f32({3, 2})).str(),
      golden("vmap_dot_unbatched_arg"));
}

TEST(JaxprText, VmapGrad) {
  auto f = [](const Array& x) { return sp::sin(x) * x; };
  EXPECT_EQ(sp::make_jaxpr(sp::vmap(sp::grad(f)))(f32({4})).str(), golden("vmap_grad"));
}

TEST(JaxprText, GradOfVmap) {
  auto f = [](const Array& w, const Array& xs) {
    return sp::sum(sp::vmap([&w](const Array& r) { return sp::tanh(sp::dot(r, w)); })(xs));
  };
  EXPECT_EQ(sp::make_jaxpr(sp::grad(f))(f32({3}), f32({4, 3})).str(), golden("grad_of_vmap"));
}

TEST(JaxprText, VmapInAxes1) {
  auto f = [](const Array& v) { return sp::sum(v * v); };
  EXPECT_EQ(sp::make_jaxpr(sp::vmap(f, {.in_axes = {1}}))(f32({3, 4})).str(),
            without_numpy_ints(golden("vmap_in_axes_1")));
}

TEST(JaxprText, VmapOutAxes1) {
  auto f = [](const Array& v) { return v * 2.0 + 1.0; };
  EXPECT_EQ(sp::make_jaxpr(sp::vmap(f, {.out_axes = {1}}))(f32({4, 3})).str(),
            golden("vmap_out_axes_1"));
}

// ---- control flow -----------------------------------------------------------------------------

// cond prints its branches false first (branches=(false_fn, true_fn)), indexed by int32(pred).
TEST(JaxprText, JvpSin) {
  auto f = [](const Array& x, const Array& t) {
    return sp::jvp(sin_fn, std::tuple<Array>{x}, std::tuple<Array>{t});
  };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({3}), f32({3})).str(), golden("jvp_sin"));
}

TEST(JaxprText, JvpTwoInputs) {
  auto f = [](const Array& x, const Array& y, const Array& tx, const Array& ty) {
    auto h = [](const Array& a, const Array& b) { return a * sp::sin(b); };
    return sp::jvp(h, std::tuple<Array, Array>{x, y}, std::tuple<Array, Array>{tx, ty});
  };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({3}), f32({3}), f32({3}), f32({3})).str(),
            golden("jvp_two_inputs"));
}

// ---- line breaking at 80 columns --------------------------------------------------------------

// With the jaxpr flat, equations are separated by "; ".
TEST(JaxprText, TwoEqnsOneLine) {
  auto f = [](const Array& x) { return sp::cos(sp::sin(x)); };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({})).str(), golden("two_eqns_one_line"));
}

TEST(JaxprText, LineFitsAt80) {
  auto f = [](const Array& x) { return x * 1.3; };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({300})).str(), golden("line_fits_at_80"));
}

TEST(JaxprText, LineBreaksAt81) {
  auto f = [](const Array& x) { return x * 0.1; };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({3, 4})).str(), golden("line_breaks_at_81"));
}

// Only "[...]" has to fit; the operands after it may run the line to 82 columns.
TEST(JaxprText, ParamsFitLinePast80) {
  auto f = [](const Array& x) { return sp::lax::slice(x, {10, 0}, {19, 3}); };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({20, 3})).str(), golden("params_fit_line_past_80"));
}

TEST(JaxprText, ParamsBreak) {
  auto f = [](const Array& x) { return sp::lax::slice(x, {10, 0}, {110, 3}); };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({200, 3})).str(), golden("params_break"));
}

// Binder lists wrap word by word, and a break is taken only when the column is already past 79,
// so the first line here is 87 characters long.
TEST(JaxprText, ManyArgsWrap) {
  auto f = [](const Array& a, const Array& b, const Array& c, const Array& d, const Array& e,
              const Array& f_, const Array& g_, const Array& h, const Array& i, const Array& j,
              const Array& k,
              const Array& l) { return a + b + c + d + e + f_ + g_ + h + i + j + k + l; };
  Array x = f32({2, 3});
  EXPECT_EQ(sp::make_jaxpr(f)(x, x, x, x, x, x, x, x, x, x, x, x).str(), golden("many_args_wrap"));
}

TEST(JaxprText, ManyOutputsWrap) {
  auto f = [](const Array& x) {
    std::vector<Array> outs;
    for (int i = 0; i < 30; ++i) outs.push_back(x + double(i));
    return outs;
  };
  EXPECT_EQ(sp::make_jaxpr(f)(f32({2})).str(), golden("many_outputs_wrap"));
}

// A sub-jaxpr of more than ten equations is printed first as "let jaxpr = ... in".
TEST(JaxprText, NoArgs) {
  auto f = [] { return sp::ones({3}); };
  EXPECT_EQ(sp::make_jaxpr(f)().str(), golden("no_args"));
}

TEST(JaxprText, NoEqnsIdentity) {
  auto f = [](const Array& x) { return x; };
  EXPECT_EQ(sp::make_jaxpr(f)(Array(1.0)).str(), golden("no_eqns_identity"));
}

TEST(JaxprText, NoOutputs) {
  auto f = [](const Array&) { return std::tuple<>{}; };
  EXPECT_EQ(sp::make_jaxpr(f)(Array(1.0)).str(), golden("no_outputs"));
}

// A constant scalar output prints as a literal in the "in (...)" list.
TEST(JaxprText, LiteralOutput) {
  auto f = [](const Array& x) { return std::pair<Array, Array>{x, Array(2.0)}; };
  EXPECT_EQ(sp::make_jaxpr(f)(Array(1.0)).str(), golden("literal_output"));
}

TEST(JaxprText, BoolLiteral) {
  auto f = [](const Array& b) { return sp::logical_or(b, true); };
  EXPECT_EQ(sp::make_jaxpr(f)(boolean({3})).str(), golden("bool_literal"));
}

// ---- x64 --------------------------------------------------------------------------------------

TEST(JaxprText, X64MulAdd) {
  spmd_test::X64Scope x64;
  auto f = [](const Array& x, const Array& n) { return x * 2 + n; };
  EXPECT_EQ(sp::make_jaxpr(f)(sp::zeros({3}, sp::float64), sp::zeros({3}, sp::int64)).str(),
            golden("x64_mul_add"));
}

}  // namespace

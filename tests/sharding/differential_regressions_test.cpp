// Regressions the differential tester (differential_test.cpp) found, each reduced to the op that
// went wrong: values against exact arithmetic or NumPy-equivalent host computations, and types
// against JAX 0.10.2's (noted where checked).
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include <vector>

namespace {

namespace sp = spmd;
using sp::Array;
using sp::None;
using sp::P;

constexpr sp::AxisType kE = sp::AxisType::Explicit;

bool enough_devices() {
  return sp::devices().size() >= 8;
}

// A reshard of a broadcast scalar that moves an axis between dims (as grad's cotangent seed
// takes after a reshard): [4@x,4@y] to [4,4@x].
TEST(DifferentialRegressions, ReshardOfABroadcastScalarMovesAnAxisAcrossDims) {
  if (!enough_devices()) GTEST_SKIP() << "needs 8 devices";
  const sp::Mesh mesh = sp::make_mesh({4, 2}, {"x", "y"}, {kE, kE});
  auto f = [&](const Array& s) {
    Array b = sp::lax::broadcast_in_dim(s, {4, 4}, {}, sp::NamedSharding(mesh, P("x", "y")));
    return sp::reshard(b, sp::NamedSharding(mesh, P(None, "x")));
  };
  Array out = sp::jit(f)(sp::device_put(Array(2.0f), sp::NamedSharding(mesh, P())));
  EXPECT_EQ(sp::type_of(out).str(), "~float32[4,4@x]");  // JAX's: the C++ number is weak
  EXPECT_EQ(sp::device_get(out).to_vector<float>(), std::vector<float>(16, 2.0f));
}

// jnp.where broadcasts its operands to the sharding their dims agree on (JAX's
// lax.broadcast_shardings): a size-1 operand takes the split of the dims it meets, so that
// select_n's cases match. JAX 0.10.2 gives float32[8@y].
TEST(DifferentialRegressions, WhereBroadcastsASizeOneOperandToTheSplitItMeets) {
  if (!enough_devices()) GTEST_SKIP() << "needs 8 devices";
  const sp::Mesh mesh = sp::make_mesh({2, 4}, {"x", "y"}, {kE, kE});
  const Array a = sp::device_put(sp::arange(8.0f), sp::NamedSharding(mesh, P("y")));
  const Array b = sp::device_put(sp::array(std::vector<float>{3}), sp::NamedSharding(mesh, P()));
  auto f = [](const Array& a, const Array& b) { return sp::where(a > b, a, b * 2); };
  for (const Array& out : {sp::jit(f)(a, b), f(a, b)}) {
    EXPECT_EQ(sp::type_of(out).str(), "float32[8@y]");
    EXPECT_EQ(sp::device_get(out).to_vector<float>(), (std::vector<float>{6, 6, 6, 6, 4, 5, 6, 7}));
  }
}

// Seeds 5751, 7628, 11306, 11430 and 12639 of the uneven run: a split value gathered whole and
// split again twice is, per device, all_gather then own-block dynamic_slice twice; the second
// pair's operand is the first pair's slice, which own_blocks_of_collectives removes, so its
// substitute must be resolved through the first ("use of an empty Array handle" before).
TEST(DifferentialRegressions, GatheredAndSplitAgainTwiceKeepsTheOwnBlock) {
  if (!enough_devices()) GTEST_SKIP() << "needs 8 devices";
  const sp::Mesh mesh = sp::make_mesh({4}, {"x"});
  auto f = [&](const Array& a) {
    Array h = a;
    for (const P& spec : {P(), P("x"), P(), P("x")})
      h = sp::with_sharding_constraint(h, sp::NamedSharding(mesh, spec));
    return sp::concatenate({h, h * 2});
  };
  const Array a = sp::arange(1.0f, 9.0f);
  Array out = sp::jit(f)(sp::device_put(a, sp::NamedSharding(mesh, P("x"))));
  EXPECT_EQ(sp::device_get(out).to_vector<float>(),
            (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 2, 4, 6, 8, 10, 12, 14, 16}));
}

// Seed 161001 of the "more" run: [8] split P(('y', 'x')) reshaped to [4, 2] keeps the sub-axes of
// its split ('y' and 'x':(1)2 on the 4, 'x':(2)2 on the 2) for the two constraints it feeds; the
// first moved it to P(None, 'y') for good, so the second use and the output P('y') read those
// blocks as theirs (the output came out transposed before).
TEST(DifferentialRegressions, AKeptReshapeConstrainedTwiceAndReturnedKeepsItsBlocks) {
  if (!enough_devices()) GTEST_SKIP() << "needs 8 devices";
  const sp::Mesh mesh = sp::make_mesh({4, 2}, {"x", "y"});
  auto constrain = [&](const Array& v, const P& spec) {
    return sp::with_sharding_constraint(v, sp::NamedSharding(mesh, spec));
  };
  auto f = [&](const Array& a) {
    const Array d = (constrain(a, P(sp::axes("y", "x"))) * 2).reshape({4, 2});
    const Array g = sp::concatenate({constrain(d, P(None, "y")), constrain(d + 1, P(None, "y"))}, 1);
    return std::vector<Array>{g, d};
  };
  const std::vector<Array> out =
      sp::jit(f)(sp::device_put(sp::arange(8.0f), sp::NamedSharding(mesh, P("y"))));
  EXPECT_EQ(sp::device_get(out[1]).to_vector<float>(),
            (std::vector<float>{0, 2, 4, 6, 8, 10, 12, 14}));
  EXPECT_EQ(sp::device_get(out[0]).to_vector<float>(),
            (std::vector<float>{0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15}));
}

// Seed 16416 of the wide run: an uncommitted value resharded to two shardings on an Explicit mesh
// (one feeding a batched dot_general, one a comparison); the reshards' cotangents go back to its
// untyped sharding, unsplit, and add (add_any raised "incompatible shardings for broadcasting"
// before).
TEST(DifferentialRegressions, GradOfTwoReshardsOfAnUntypedValue) {
  if (!enough_devices()) GTEST_SKIP() << "needs 8 devices";
  const sp::Mesh mesh = sp::make_mesh({2, 1, 4}, {"x", "y", "z"}, {kE, kE, kE});
  auto on = [&](const Array& v, const P& spec) {
    return sp::reshard(v, sp::NamedSharding(mesh, spec));
  };
  const P zy_x(sp::axes("z", "y"), "x");
  auto f = [&](const Array& a, const Array& c) {
    const Array g = on(c, P(sp::axes("z", "y")));
    const Array h = sp::lax::dot_general(g, on(a, zy_x), {{1}, {2}, {0}, {0}});
    const Array j = sp::transpose(h, {2, 0, 1}) * 0.25f;
    const Array k = on(c, P("x", sp::axes("z", "y")));
    return sp::sum(sp::where(k > j, k, j * 2)) + sp::sum(j);
  };
  const Array a = sp::device_put(sp::full({4, 4, 4}, Array(1.0f)), sp::NamedSharding(mesh, zy_x));
  const Array c = sp::full({4, 4, 1}, Array(1.0f));
  auto grad_f = sp::value_and_grad(f, {.argnums = {1}});
  for (const auto& [value, grad] : {grad_f(a, c), sp::jit(grad_f)(a, c)}) {
    // j is 1 everywhere (four ones summed, times 0.25) and k is 1: where picks 2 * j.
    EXPECT_EQ(sp::device_get(value).item<float>(), 48.0f);
    // d/dc through g: 3 per element of j (2 by where, 1 by the sum), times 0.25, over the four
    // elements of a each meets; none through k (where picks the other case).
    EXPECT_EQ(sp::device_get(grad).to_vector<float>(), std::vector<float>(16, 3.0f));
  }
}

}  // namespace

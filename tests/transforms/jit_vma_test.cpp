// A jit inside a shard_map body with check_vma types each result as its body's result, as JAX's
// pjit does: one call returns a value varying over 'a' beside an invariant one, or one varying
// over 'a' beside one varying over 'b', and what follows (psums, the pvary casts before them and
// before an operation joining both) is typed from there. make_jaxpr's text and the values
// against JAX 0.10.2 (tests/goldens/jit_vma, recorded by tools/goldens/gen_jit_vma.py; the cases
// use its names).
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "support/golden.h"

namespace {

namespace sp = spmd;
using sp::Array;
using sp::P;

sp::Mesh mesh8() {
  return sp::Mesh(sp::create_device_mesh({8}), {"a"});
}
sp::Mesh mesh42() {
  return sp::Mesh(sp::create_device_mesh({4, 2}), {"a", "b"});
}

const Array x16 = sp::arange(16.0f), x8 = sp::arange(8.0f);
const Array y2 = sp::arange(2.0f) + 1.0f, y4 = sp::arange(4.0f) + 1.0f;

// JAX's jit of `sin_twice`: (sin u, v * 2).
auto sin_twice = sp::jit(
    [](const Array& u, const Array& v) { return std::tuple{sp::sin(u), v * 2.0f}; },
    {.name = "sin_twice"});

std::tuple<Array, Array> varying_and_invariant(const Array& x, const Array& y) {
  auto [r, s] = sin_twice(x, y);
  return {sp::lax::psum(r, "a"), sp::lax::psum(s, "a")};
}

std::tuple<Array, Array, Array> over_a_and_b(const Array& x, const Array& y) {
  auto [r, s] = sin_twice(x, y);
  return {sp::lax::psum(r, "a"), sp::lax::psum(s, "b"), r + s};
}

std::tuple<Array, Array, Array> mixed_operands(const Array& x, const Array& y) {
  auto [r, s, t] = sp::jit([](const Array& u, const Array& v) {
    return std::tuple{u * v, v + 1.0f, sp::cos(v)};
  }, {.name = "<lambda>"})(x, y);
  return {sp::lax::psum(r, "a"), s, t * s};
}

Array nested(const Array& x, const Array& y) {
  auto [r, s] = sp::jit([](const Array& u, const Array& v) { return sin_twice(u, v); },
                        {.name = "<lambda>"})(x, y);
  return sp::lax::psum(r, "a") + s;
}

auto over_a_and_b_map() {
  return sp::shard_map(over_a_and_b, mesh42(), {P("a"), P("b")},
                       {P("b"), P("a"), P(sp::axes("a", "b"))}, {.name = "over_a_and_b"});
}

// JAX's grad with argnums (0, 1): the arguments as one tuple.
Array loss(const std::tuple<Array, Array>& xy) {
  Array total(0.0f);
  for (const Array& o : sp::tree_flatten(std::apply(over_a_and_b_map(), xy)).first)
    total = total + sp::sum(o);
  return total;
}

// make_jaxpr of f on args equals JAX's text of case `name`, and f's result leaves its values.
template <class F, class... A>
void expect_case(const std::string& name, F f, const A&... args) {
  const auto blocks = spmd_test::golden_blocks("jit_vma/jaxprs.txt");
  ASSERT_TRUE(blocks.count(name)) << name;
  EXPECT_EQ(sp::make_jaxpr(f)(args...).str(), blocks.at(name)) << name;
  const auto& values = spmd_test::load_golden("jit_vma/values.npz");
  const std::vector<Array> leaves = sp::tree_flatten(f(args...)).first;
  for (size_t i = 0; i < leaves.size(); ++i) {
    const std::string key = name + "/" + std::to_string(i);
    ASSERT_TRUE(values.count(key)) << key;
    EXPECT_TRUE(spmd_test::arrays_close(leaves[i], values.at(key), 1e-6, 1e-6)) << key;
  }
  EXPECT_FALSE(values.count(name + "/" + std::to_string(leaves.size()))) << name;
}

TEST(JitVma, ResultsVaryingAndInvariantKeepTheirOwnTypes) {
  expect_case("varying_and_invariant",
              sp::shard_map(varying_and_invariant, mesh8(), {P("a"), P()}, {P(), P()},
                            {.name = "varying_and_invariant"}),
              x16, y2);
}

TEST(JitVma, ResultsVaryingOverDifferentAxesAreCastWhereJaxCasts) {
  expect_case("over_a_and_b", over_a_and_b_map(), x8, y4);
}

TEST(JitVma, EachResultVariesAsItsOperandsInTheBody) {
  expect_case("mixed_operands",
              sp::shard_map(mixed_operands, mesh42(), {P("a"), P("b")}, {P("b"), P("b"), P("b")},
                            {.name = "mixed_operands"}),
              x8, y4);
}

TEST(JitVma, NestedJitsPassEachResultsTypeOut) {
  expect_case("nested",
              sp::shard_map(nested, mesh8(), {P("a"), P()}, P(), {.name = "nested"}), x16, y2);
}

TEST(JitVma, GradThroughAJitWithResultsOfDifferentTypes) {
  expect_case("grad_over_a_and_b", sp::grad(loss), std::tuple{x8, y4});
}

}  // namespace

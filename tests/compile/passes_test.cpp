// Program passes run by jit: a transposed 2-D product becomes the product with its operands
// swapped, and a broadcast that only inserts unit dims becomes a reshape; both give the same
// values. Each use of a constant expression gets a copy of its own before propagation. Constant
// folding inside a partitioned compile does not wait on that compile. A slice of an elementwise
// result computes the window alone.
#include <gtest/gtest.h>
#include <spmd/spmd.h>

#include "compile/partition.h"
#include "compile/passes.h"
#include "core/array_impl.h"
#include "ir/program.h"
#include "prims/primitive.h"
#include "sharding/type_sharding.h"
#include "support/golden.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

namespace {

namespace sp = spmd;
using sp::Array;
using DN = sp::lax::DotDimensionNumbers;

Array arange_matrix(int64_t rows, int64_t cols, float scale) {
  return (sp::arange(float(rows * cols)) * scale).reshape({rows, cols});
}

int count(const std::string& text, const std::string& word) {
  int n = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
  return n;
}

// The weight gradient of a dense layer as reverse mode writes it: (hᵀ·g)ᵀ from a product that
// contracts the batch dims of both operands, then a transpose.
Array weight_gradient_transposed(const Array& h, const Array& g) {
  return sp::transpose(sp::lax::dot_general(h, g, DN{{0}, {0}, {}, {}}), {1, 0});
}

TEST(FoldTransposedProducts, TransposeOfAProductBecomesTheSwappedProduct) {
  auto jf = sp::jit(weight_gradient_transposed);
  Array h = arange_matrix(4, 3, 0.5f), g = arange_matrix(4, 5, 0.25f);
  std::string after = jf.lower_optimized(h, g).str();
  EXPECT_EQ(count(after, "transpose"), 0) << after;
  EXPECT_EQ(count(after, "dot_general"), 1) << after;
  Array want = weight_gradient_transposed(h, g);  // eager: the product, then the transpose
  Array got = jf(h, g);
  ASSERT_EQ(got.shape(), (sp::Shape{5, 3}));
  EXPECT_TRUE(sp::allclose(got, want, 1e-6, 1e-6)) << got << "\n" << want;
}

TEST(FoldTransposedProducts, SeesThroughThePsumOfADataParallelGradient) {
  // Each device's share of a weight gradient, summed over the batch axis and transposed into
  // the parameter's layout: the psum sums the swapped product instead, and no transpose is left.
  const sp::Mesh mesh = sp::make_mesh({2}, {"b"});
  auto body = [](const Array& h, const Array& g) {
    return sp::transpose(sp::psum(sp::lax::dot_general(h, g, DN{{0}, {0}, {}, {}}), "b"), {1, 0});
  };
  auto f = sp::shard_map(body, mesh, {sp::P("b"), sp::P("b")}, sp::P());
  Array h = arange_matrix(4, 3, 0.5f), g = arange_matrix(4, 5, 0.25f);
  const sp::ClosedJaxpr traced = sp::make_jaxpr(f)(h, g);
  ASSERT_EQ(traced.program().equations.size(), 1u);
  // The body as compiling it sees it: its types on the manual mesh split nothing.
  const sp::ProgramRef compiled_body = sp::without_unsplit_types(
      traced.program().equations[0].params.get<sp::ProgramRef>("jaxpr"));
  const sp::Program& per_device = *compiled_body;
  ASSERT_EQ(count(per_device.str(), "transpose"), 1) << per_device.str();
  const std::string after =
      sp::dead_code_elimination(sp::fold_transposed_products(per_device)).str();
  EXPECT_EQ(count(after, "transpose"), 0) << after;
  EXPECT_EQ(count(after, "psum"), 1) << after;
  EXPECT_EQ(count(after, "f32[5,3] = psum"), 1) << after;  // shard_map stages psum_invariant
  Array got = sp::jit(f)(h, g);
  ASSERT_EQ(got.shape(), (sp::Shape{5, 3}));
  EXPECT_TRUE(sp::allclose(got, weight_gradient_transposed(h, g), 1e-6, 1e-6)) << got;
}

TEST(FoldTransposedProducts, ProductUsedElsewhereKeepsItsTranspose) {
  auto jf = sp::jit([](const Array& h, const Array& g) {
    Array product = sp::lax::dot_general(h, g, DN{{0}, {0}, {}, {}});
    return product.sum() + sp::transpose(product, {1, 0}).sum();
  });
  Array h = arange_matrix(4, 3, 0.5f), g = arange_matrix(4, 5, 0.25f);
  std::string after = jf.lower_optimized(h, g).str();
  EXPECT_EQ(count(after, "transpose"), 1) << after;
  EXPECT_EQ(count(after, "dot_general"), 1) << after;
}

TEST(FoldTransposedProducts, ReverseModeWeightGradientsNeedNoTranspose) {
  auto loss = [](const Array& w, const Array& x) { return sp::relu(sp::dot(x, w)).sum(); };
  Array w = arange_matrix(3, 5, 0.1f) - 0.7f, x = arange_matrix(4, 3, 0.2f) - 1.0f;
  auto grad = sp::jit(sp::grad(loss));
  std::string after = grad.lower_optimized(w, x).str();
  EXPECT_EQ(count(after, "transpose"), 0) << after;
  // dL/dw = xᵀ · [x·w > 0], computed eagerly (no passes).
  Array want = sp::dot(x.T(), sp::astype(sp::greater(sp::dot(x, w), 0.0f), sp::float32));
  EXPECT_TRUE(sp::allclose(grad(w, x), want, 1e-6, 1e-6)) << grad(w, x) << "\n" << want;
}

}  // namespace

namespace {

// expand_dims prints as broadcast_in_dim (as in JAX) and runs as a reshape sharing the buffer.
TEST(UnitBroadcastsToReshapes, InsertingUnitDimsSharesTheOperandsBytes) {
  auto f = [](const Array& x) {
    return std::make_tuple(sp::expand_dims(x * 2.0f, {0, 2}), sp::broadcast_to(x, {3, 4}));
  };
  auto jf = sp::jit(f);
  Array x = sp::arange(4.0f);
  EXPECT_EQ(count(sp::make_jaxpr(f)(x).str(), "broadcast_in_dim"), 2);
  std::string after = jf.lower_optimized(x).str();
  EXPECT_EQ(count(after, "broadcast_in_dim"), 1) << after;  // the real broadcast stays
  EXPECT_EQ(count(after, "reshape[dimensions=None new_sizes=(1, 4, 1)"), 1) << after;
  auto [e, b] = jf(x);
  EXPECT_EQ(e.shape(), (sp::Shape{1, 4, 1}));
  EXPECT_EQ(e.to_vector<float>(), (std::vector<float>{0, 2, 4, 6}));
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}));
  auto [y, z] = sp::jit([](const Array& v) {
    Array w = v + 1.0f;
    return std::make_tuple(w, sp::expand_dims(w, {0}));
  })(x);
  EXPECT_EQ(z.impl()->buffer, y.impl()->buffer);
  EXPECT_EQ(z.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
}

}  // namespace

namespace {

// A bias added to a whole product, then one device's columns taken (a row-parallel layer at
// 4x2): the add runs on the window alone, reading the bias's window, and joins the fusion that
// reads the slice. Values are the add-then-slice ones, clamped starts included.
TEST(SliceBeforeElementwise, AWindowOfASumAddsTheWindowsOfItsOperands) {
  auto f = [](const Array& x, const Array& b, const Array& i) {
    Array y = x + b.reshape({1, 6});
    return sp::maximum(sp::lax::dynamic_slice(y, {Array(0), i}, {4, 3}), 0.0f);
  };
  auto jf = sp::jit(f);
  Array x = arange_matrix(4, 6, 1.0f) - 11.0f;
  Array b = sp::arange(6.0f) * 0.5f;
  std::string after = jf.lower_optimized(x, b, Array(1)).str();
  EXPECT_EQ(count(after, "f32[4,6] = add"), 0) << after;  // the old pass added all 6 columns
  EXPECT_EQ(count(after, "f32[1,3] = dynamic_slice"), 1) << after;
  EXPECT_EQ(count(after, "f32[4,3] = add"), 1) << after;
  for (int start : {-2, 0, 1, 3, 5}) {
    Array i(start);
    EXPECT_EQ(jf(x, b, i).to_vector<float>(), f(x, b, i).to_vector<float>()) << start;
  }
}

// An elementwise result that something else reads too is computed whole, once.
TEST(SliceBeforeElementwise, AResultReadElsewhereIsComputedWhole) {
  auto f = [](const Array& x, const Array& i) {
    Array y = sp::exp(x);
    return std::make_tuple(sp::lax::dynamic_slice(y, {i, Array(0)}, {2, 6}), y);
  };
  auto jf = sp::jit(f);
  Array x = arange_matrix(4, 6, 0.25f);
  std::string after = jf.lower_optimized(x, Array(1)).str();
  EXPECT_EQ(count(after, "f32[4,6] = exp"), 1) << after;
  EXPECT_EQ(count(after, "f32[2,6] = exp"), 0) << after;
  auto [s, y] = jf(x, Array(1));
  auto [s0, y0] = f(x, Array(1));
  EXPECT_EQ(s.to_vector<float>(), s0.to_vector<float>());
  EXPECT_EQ(y.to_vector<float>(), y0.to_vector<float>());
}

}  // namespace

namespace {

// The equations of `p` that run primitive `name`.
std::vector<const sp::Equation*> equations_of(const sp::Program& p, const std::string& name) {
  std::vector<const sp::Equation*> out;
  for (const sp::Equation& e : p.equations)
    if (e.primitive->name == name) out.push_back(&e);
  return out;
}

TEST(SplitConstantUses, EachUseOfAConstantExpressionReadsACopyOfItsOwn) {
  // o = sin(ones) read by two products and returned; s = sum(x), a 0-d value, read twice.
  auto f = [](const Array& x, const Array& y) {
    const Array o = sp::sin(sp::ones({4, 4}));
    const Array s = sp::sum(x);
    return std::make_tuple(o * x, o * y, o, x * s, y * s);
  };
  const Array x = arange_matrix(4, 4, 1.0f);
  const sp::Program before = sp::make_jaxpr(f)(x, x).program();
  ASSERT_EQ(equations_of(before, "sin").size(), 1u);
  const sp::Program after = sp::split_constant_uses(before);
  after.verify();
  // Three uses (two products and the output), three copies of the whole sub-computation; the
  // original, then unused, is gone.
  const auto sines = equations_of(after, "sin");
  ASSERT_EQ(sines.size(), 3u);
  EXPECT_EQ(equations_of(after, "broadcast_in_dim").size(), 3u);
  std::vector<int> read;
  for (const sp::Equation* e : equations_of(after, "mul"))
    if (!e->inputs[0].is_literal()) read.push_back(e->inputs[0].var);
  read.push_back(after.outputs[2].var);
  for (const sp::Equation* e : sines)
    EXPECT_EQ(std::count(read.begin(), read.end(), e->outputs[0]), 1) << "a copy read once";
  // The 0-d sum is shared; the other values keep their ids.
  EXPECT_EQ(equations_of(after, "reduce_sum").size(), 1u);
  for (size_t k : {0, 1, 3, 4}) EXPECT_EQ(after.outputs[k].var, before.outputs[k].var);
  EXPECT_EQ(after.invars, before.invars);
}

TEST(SplitConstantUses, ABroadcastOfAScalarIsCopiedAndWhatDependsOnArgumentsIsNot) {
  auto f = [](const Array& x, const Array& s) {
    const Array spread = sp::broadcast_to(s, {4, 4});
    const Array e = sp::exp(x);
    return std::make_tuple(spread * x, spread + x, e * x, e + x);
  };
  const Array x = arange_matrix(4, 4, 1.0f);
  const sp::Program before = sp::make_jaxpr(f)(x, Array(2.0f)).program();
  const sp::Program after = sp::split_constant_uses(before);
  after.verify();
  EXPECT_EQ(equations_of(after, "broadcast_in_dim").size(),
            equations_of(before, "broadcast_in_dim").size() + 1);
  EXPECT_EQ(equations_of(after, "exp").size(), 1u);
}

TEST(SplitConstantUses, AClosedOverArrayAndItsConcatenationAreCopiedForEachUse) {
  // c, a constant of the jaxpr, read by two products; d, its concatenation, returned twice.
  const Array c = arange_matrix(4, 4, 1.0f);
  auto f = [&c](const Array& x, const Array& y) {
    const Array d = sp::concatenate({c, c}, 1);
    return std::make_tuple(c * x, c * y, d, d);
  };
  const sp::Program before = sp::make_jaxpr(f)(c, c).program();
  ASSERT_EQ(before.constvars.size(), 1u);
  const sp::Program after = sp::split_constant_uses(before);
  after.verify();
  // A concatenation of constants is a constant expression: one copy per output, each reading
  // its own copy of c; the products read one each.
  EXPECT_EQ(equations_of(after, "concatenate").size(), 2u);
  EXPECT_EQ(after.constvars.size(), 4u);
  EXPECT_NE(after.outputs[2].var, after.outputs[3].var);
}

// A partitioned program whose constant folding meets a committed constant would compile that
// eager op with the partitioned compile in progress on the same thread: it raises instead of
// waiting for its own lock.
TEST(ConstantFolding, ACommittedConstantInAPartitionedCompileRaisesInsteadOfHanging) {
  if (sp::device_count() < 8) GTEST_SKIP() << "needs 8 devices (SPMD_CPU_DEVICES=8)";
  const sp::Mesh mesh = sp::make_mesh({8}, {"a"});
  const Array c = sp::device_put(sp::arange(16.0f), sp::NamedSharding(mesh, sp::P("a")));
  sp::Program program;
  const int v = program.new_var(sp::aval_of(c));
  program.constvars = {v};
  program.consts = {c};
  const sp::Primitive& sin = sp::primitive("sin");
  const int out = program.new_var(sp::abstract_eval(sin, {{sp::aval_of(c)}}, {}).front());
  program.equations.push_back({&sin, {}, {sp::Atom::of_var(v)}, {out}});
  program.outputs = {sp::Atom::of_var(out)};
  // Replicated, the constant's sine is one the body can fold.
  const std::vector<std::shared_ptr<const sp::Sharding>> out_shardings = {
      std::make_shared<const sp::NamedSharding>(mesh, sp::P())};
  const std::optional<sp::Placement> placement =
      sp::place(program, {}, {}, out_shardings, "f", {});
  ASSERT_TRUE(placement);
  const auto ref = std::make_shared<const sp::Program>(std::move(program));
  EXPECT_EQ(spmd_test::error_message<std::logic_error>(
                [&] { sp::compile_partitioned(ref, *placement); }),
            "[jit] internal error: compiling a partitioned program ran an eager op on committed "
            "operands, which needs a partitioned compile of its own");
}

}  // namespace

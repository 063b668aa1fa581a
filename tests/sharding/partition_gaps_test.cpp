// Partitioning against JAX 0.10.2 (tools/goldens/gen_partition_gaps.py) where the partitioner
// moves fewer bytes than a plain reading of the splits would: a reduction wanted split over its
// reduced axes is a reduce-scatter (over several dims, in another axis order, beside axes that
// are slices, with the reduced axes it is not split over summed after), or a product whose
// result is large computes only its own block from operands moved so that the contracting dim is
// whole, control flow keeps padded blocks per value, and reshards between meshes on the same
// devices are collectives.
// Results have JAX's splits and values; sp::explain lists every collective with its bytes.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "sharding/golden_cases.h"
#include "support/config_scope.h"
#include "support/golden.h"

#include <map>
#include <string>
#include <vector>

namespace {

namespace sp = spmd;
using sp::Array;
using sp::None;
using sp::P;

// `golden`, in placed_on_devices()'s format, with only the shards of this process's devices (see
// sharding_test::placed_here), the mesh's device ids kept.
std::string placed_here(const std::string& golden, const std::vector<Array>& leaves) {
  const std::vector<std::string> lines = spmd_test::split_fields(golden, '\n');
  if (lines.size() != leaves.size()) return golden;
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const size_t bar = lines[i].rfind('|');
    if (i) out += '\n';
    out += bar == std::string::npos
               ? lines[i]
               : sharding_test::placed_here(lines[i].substr(0, bar), {leaves[i]}) +
                     lines[i].substr(bar);
  }
  return out;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class PartitionGaps : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sp::device_count() < 8) GTEST_SKIP() << "needs 8 devices";
  }

  sp::Mesh mesh = sp::make_mesh({4, 2}, {"a", "b"});
  sp::Mesh mesh3 = sp::make_mesh({2, 2, 2}, {"a", "b", "c"});
  sp::Mesh mesh8 = sp::make_mesh({8}, {"a"});
  Array x16 = sp::arange(256.0f).reshape({16, 16});
  Array w16 = sp::arange(128.0f).reshape({16, 8}) / 16;
  Array x3 = sp::arange(1024.0f).reshape({8, 8, 16});

  static Array put(const sp::Mesh& m, const Array& v, sp::PartitionSpec spec) {
    Array r = sp::device_put(v, sp::NamedSharding(m, spec));
    r.block_until_ready();
    return r;
  }

  // Compares the leaves of a case with JAX's: where they are and their values.
  static void expect_jax(const std::string& name, const std::vector<Array>& leaves) {
    static const auto* blocks = new std::map<std::string, std::string>(
        spmd_test::golden_blocks("partitioning/gaps_results.txt"));
    ASSERT_TRUE(blocks->count(name)) << "no golden case " << name;
    EXPECT_EQ(sharding_test::placed_on_devices(leaves), placed_here(blocks->at(name), leaves))
        << name;
    const auto& values = spmd_test::load_golden("partitioning/gaps_values.npz");
    for (size_t i = 0; i < leaves.size(); ++i)
      EXPECT_TRUE(
          spmd_test::arrays_close(leaves[i], values.at(name + "/" + std::to_string(i)), 2e-6, 1e-5))
          << name << " leaf " << i;
  }
};

Array matmul(const Array& u, const Array& v) {
  return sp::matmul(u, v);
}

Array sum0(const Array& u) {
  return sp::sum(u, {0});
}

// XLA's CPU pipeline completes these reductions with an all-reduce and a dynamic-slice
// (gaps_xla.txt); its GPU pipeline, and spmd, with a reduce-scatter, which sends half the bytes.
TEST_F(PartitionGaps, AReductionSplitOverTwoDimsScatters) {
  auto f = sp::jit(matmul, {.out_shardings = sp::NamedSharding(mesh, P("a", "b"))});
  const Array l = put(mesh, sp::lax::slice(x16, {0, 0}, {8, 16}), P(None, sp::axes("a", "b")));
  const Array r = put(mesh, w16, P(sp::axes("a", "b"), None));
  const std::string text = f.explain(l, r);
  // Each device's partial product is f32[8,8] (256 bytes); a reduce-scatter over 8 devices sends
  // 256 · 7/8 bytes, after a local transpose that orders the f32[2,4] blocks as they scatter.
  EXPECT_NE(text.find("1. psum_scatter over ('a', 'b'): psum_scatter completes the partial "
                      "results of dot_general (equation 0) where its result is split over them; "
                      "each device sends 224 bytes\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(count(text, "psum over"), 0u) << text;
  EXPECT_EQ(count(text, "transpose"), 1u) << text;
  expect_jax("scatter_two_dims", {f(l, r)});
}

TEST_F(PartitionGaps, AReductionScattersInTheWantedAxisOrder) {
  auto f = sp::jit(sum0, {.out_shardings = sp::NamedSharding(mesh, P(sp::axes("b", "a")))});
  const Array u = put(mesh, x16, P(sp::axes("a", "b"), None));
  const std::string text = f.explain(u);
  EXPECT_NE(text.find("1. psum_scatter over ('b', 'a'): psum_scatter completes the partial "
                      "results of reduce_sum (equation 0) where its result is split over them; "
                      "each device sends 56 bytes\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(count(text, "psum over"), 0u) << text;
  expect_jax("scatter_other_order", {f(u)});
}

TEST_F(PartitionGaps, AReductionScattersBesideAnAxisItSlices) {
  auto f = sp::jit(sum0, {.out_shardings = sp::NamedSharding(mesh3, P(sp::axes("b", "c"), "a"))});
  const Array u = put(mesh3, x3, P("a", "b", None));
  const std::string text = f.explain(u);
  // The f32[4,16] partial sum is sliced over 'c' first (free), then its f32[2,16] (128 bytes)
  // reduce-scattered over 'a': 128 · 1/2 bytes.
  EXPECT_NE(text.find("1. psum_scatter over 'a': psum_scatter completes the partial results of "
                      "reduce_sum (equation 0) where its result is split over them; each device "
                      "sends 64 bytes\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(count(text, "psum over"), 0u) << text;
  EXPECT_EQ(count(text, "all_to_all"), 0u) << text;
  expect_jax("scatter_beside_a_slice", {f(u)});
}

TEST_F(PartitionGaps, AReductionScattersThenSumsTheAxesItIsNotSplitOver) {
  auto f = sp::jit(sum0, {.out_shardings = sp::NamedSharding(mesh3, P("b", "a"))});
  const Array u = put(mesh3, x3, P(sp::axes("a", "c"), "b", None));
  const std::string text = f.explain(u);
  // f32[4,16] partial sums (256 bytes): a reduce-scatter over 'a' sends 128 bytes, then a psum
  // over 'c' of the f32[4,8] half sends 2 · 128 · 1/2; a psum over both would send 384.
  EXPECT_NE(text.find("1. psum_scatter over 'a': psum_scatter completes the partial results of "
                      "reduce_sum (equation 0) where its result is split over them; each device "
                      "sends 128 bytes\n"
                      "  2. psum over 'c': psum completes the partial results of reduce_sum "
                      "(equation 0) over its reduced dims; each device sends 128 bytes\n"),
            std::string::npos)
      << text;
  expect_jax("scatter_then_psum", {f(u)});
}

// Signed multiples of 1/8 scattered over the array, as the generator makes them: every sum of
// products of them is exact in float32.
Array scrambled(int64_t rows, int64_t cols, int shift = 0) {
  const Array i = (sp::arange(int(rows * cols)) * 37 + shift) % 17 - 8;
  return (i.astype(sp::DType::float32) / 8.0f).reshape({rows, cols});
}

// dW = gᵀ·x over the rows of both (a linear layer's weight gradient over a batch).
Array weight_grad(const Array& g, const Array& x) {
  return sp::lax::dot_general(g, x, {.lhs_contracting = {0}, .rhs_contracting = {0}, .lhs_batch = {}, .rhs_batch = {}});
}

// y = h·wᵀ (a linear layer with a torch-layout weight).
Array column_parallel(const Array& h, const Array& w) {
  return sp::lax::dot_general(h, w, {.lhs_contracting = {1}, .rhs_contracting = {1}, .lhs_batch = {}, .rhs_batch = {}});
}

const std::string kWhole =
    ": its reduced dims are whole where its result is split over their axes, in place of a "
    "reduce-scatter of partial results; each device sends ";

// A product whose contracting dim is split over the axis its result is wanted split over on a
// free dim runs either as partial products and a reduce-scatter or on operands moved so that the
// contracting dim is whole, whichever costs each device fewer bytes (those sent, 64 KiB per
// collective, and those of the results it computes). Here partial products would be a whole
// f32[256,192] per device (196608 bytes) and a reduce-scatter sending 196608 · 7/8; moving the
// operands sends 28672 (g's f32[32,256] block all_to_all'd, so that each device holds all rows of
// its 32 columns) and 24576 · 7 (x's rows all-gathered), and each device computes only its
// f32[32,192] rows. XLA all-reduces the partial products.
TEST_F(PartitionGaps, AWeightGradientMovesItsOperandsInsteadOfScatteringPartialProducts) {
  auto f = sp::jit(weight_grad, {.out_shardings = sp::NamedSharding(mesh8, P("a", None))});
  const Array g = put(mesh8, scrambled(256, 256), P("a", None));
  const Array x = put(mesh8, scrambled(256, 192, 5), P("a", None));
  const std::string text = f.explain(g, x);
  EXPECT_NE(text.find("1. all_to_all over 'a' from dim 0 to dim 1: operand 0 of dot_general "
                      "(equation 0) is needed split as P(None, 'a')" +
                      kWhole + "28672 bytes\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("2. all_gather over 'a' along dim 0: operand 1 of dot_general (equation 0) "
                      "is needed split as P()" +
                      kWhole + "172032 bytes\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(count(text, "psum"), 0u) << text;
  EXPECT_EQ(count(text, "implicit resharding"), 0u) << text;
  expect_jax("whole_weight_gradient", {f(g, x)});
}

// The moves are part of the product, as the reduce-scatter they replace would be: a program
// that asks for no resharding still runs.
TEST_F(PartitionGaps, MovedOperandsOfAProductAreNotImplicitResharding) {
  spmd_test::ImplicitReshardingScope strict(sp::config::ImplicitResharding::error);
  auto f = sp::jit(weight_grad, {.out_shardings = sp::NamedSharding(mesh8, P("a", None))});
  expect_jax("whole_weight_gradient", {f(put(mesh8, scrambled(256, 256), P("a", None)),
                                         put(mesh8, scrambled(256, 192, 5), P("a", None)))});
}

// An f32[8,8] result: the partial products (256 bytes) and their reduce-scatter (224) cost less
// than moving the operands (224 + 256 · 7, in two collectives).
TEST_F(PartitionGaps, AProductWithASmallResultKeepsTheReduceScatter) {
  auto f = sp::jit(weight_grad, {.out_shardings = sp::NamedSharding(mesh8, P("a", None))});
  const Array g = put(mesh8, scrambled(64, 8), P("a", None));
  const Array x = put(mesh8, scrambled(64, 8, 5), P("a", None));
  const std::string text = f.explain(g, x);
  EXPECT_NE(text.find("1. psum_scatter over 'a': psum_scatter completes the partial results of "
                      "dot_general (equation 0) where its result is split over them; each device "
                      "sends 224 bytes\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(count(text, "; each device sends "), 1u) << text;
  expect_jax("whole_small_result", {f(g, x)});
}

// A column-parallel layer on features split over 'b': h's f32[4,16] block is all-gathered over
// 'b' (256 bytes), as XLA does, where partial products would move the weight's f32[8,32] block
// to a column split (512 bytes) every call and reduce-scatter f32[4,16] partial products.
TEST_F(PartitionGaps, AColumnParallelLayerGathersItsInputFeatures) {
  auto f = sp::jit(column_parallel, {.out_shardings = sp::NamedSharding(mesh, P("a", "b"))});
  const Array h = put(mesh, scrambled(16, 32), P("a", "b"));
  const Array w = put(mesh, scrambled(16, 32, 3), P("b"));
  const std::string text = f.explain(h, w);
  EXPECT_NE(text.find("1. all_gather over 'b' along dim 1: operand 0 of dot_general (equation 0) "
                      "is needed split as P('a',)" +
                      kWhole + "256 bytes\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(count(text, "; each device sends "), 1u) << text;
  expect_jax("whole_column_parallel", {f(h, w)});
}

Array fori_body(const Array& i, const Array& c) {
  return sp::sin(c) + c.max({0}) * 0.5f - i;
}

// Moves data along the padded dim: each step would gather it.
Array rolled_body(const Array&, const Array& c) {
  return sp::roll(c, 1, 0) * 0.5f + c.max({0});
}

Array on_a(const sp::Mesh& m, const Array& v) {
  return sp::with_sharding_constraint(v, sp::NamedSharding(m, P("a")));
}

// Two carries split unevenly (10 rows over 4 devices): the one whose body keeps its padded
// blocks stays padded; only the one whose body rolls it is gathered, once, before the loop.
TEST_F(PartitionGaps, ALoopGathersOnlyTheCarriesItsBodyGathers) {
  auto f = sp::jit([&](const Array& u) {
    auto body = [](const Array& i, const std::vector<Array>& cs) {
      return std::vector<Array>{fori_body(i, cs[0]), rolled_body(i, cs[1])};
    };
    const std::vector<Array> cs =
        sp::lax::fori_loop(0, 3, body, std::vector<Array>{on_a(mesh, -u - 1), on_a(mesh, -u - 2)});
    return std::vector<Array>{cs[0].max({0}), cs[1].max({0})};
  });
  const Array x10 = sp::arange(60.0f).reshape({10, 6});
  const std::string text = f.explain(x10);
  EXPECT_EQ(count(text, "all_gather over"), 1u) << text;
  EXPECT_NE(text.find("all_gather over 'a' along dim 0: operand 2 of scan"), std::string::npos)
      << text;
  EXPECT_EQ(count(text, "each step: all_gather"), 0u) << text;
  expect_jax("fori_padded_and_rolled", f(x10));
}

// A loop in a loop body that keeps the padded carry keeps it too: nothing is gathered.
TEST_F(PartitionGaps, ANestedLoopKeepingPaddedBlocksKeepsThem) {
  auto f = sp::jit([&](const Array& u) {
    auto outer = [](const Array&, const Array& c) {
      return sp::lax::fori_loop(0, 2, fori_body, c) * 0.5f;
    };
    return sp::lax::fori_loop(0, 2, outer, on_a(mesh, -u - 1)).max({0});
  });
  const Array x10 = sp::arange(60.0f).reshape({10, 6});
  const std::string text = f.explain(x10);
  EXPECT_EQ(count(text, "all_gather over"), 0u) << text;
  EXPECT_NE(text.find("f32[3,6]"), std::string::npos) << text;
  expect_jax("fori_nested_padded", {f(x10)});
}

sp::Mesh mesh_on(const std::vector<int>& ids, sp::Shape shape, std::vector<std::string> names) {
  std::vector<sp::Device> devices;
  for (int id : ids) devices.push_back(sp::devices()[size_t(id)]);
  return sp::Mesh(devices, std::move(shape), std::move(names));
}

const Array x8 = sp::arange(64.0f).reshape({8, 8});

// An in_sharding over the same devices in the reverse order: the argument arrives where it is
// and one ppermute inside the program moves each device's f32[2,4] block (32 bytes) to its
// place; the in_sharding asked for it, so it is no implicit resharding.
TEST_F(PartitionGaps, AnInShardingOnReorderedDevicesIsAPpermute) {
  const sp::Mesh rev = mesh_on({7, 6, 5, 4, 3, 2, 1, 0}, sp::Shape{4, 2}, {"a", "b"});
  spmd_test::ImplicitReshardingScope refuse(sp::config::ImplicitResharding::error);
  auto f = sp::jit([](const Array& u) { return u * 2.0f; },
                   {.in_shardings = sp::NamedSharding(rev, P("a", "b"))});
  const Array u = put(mesh, x8, P("a", "b"));
  const std::string text = f.explain(u);
  EXPECT_NE(text.find("1. ppermute over ('a', 'b'): argument 0 is on the mesh's devices in "
                      "another order or arrangement (NamedSharding(mesh=Mesh('a': 4, 'b': 2, "
                      "axis_types=(Auto, Auto)), spec=P('a', 'b'), memory_kind=device)); each "
                      "device sends 32 bytes\n"),
            std::string::npos)
      << text;
  expect_jax("held_reversed_in_shardings", {f(u)});
}

// The same devices in the same order under other axes: the argument's blocks already are where
// P(('a', 'b')) puts them, so it enters the program with that split, and the move to the
// constraint's split is an all_to_all inside the program, in explain's account, not a copy
// before it.
TEST_F(PartitionGaps, AnArgumentUnderOtherAxesEntersWithTheSplitOfItsBlocks) {
  const sp::Mesh line = sp::make_mesh({8}, {"x"});
  auto f = sp::jit([&](const Array& u) {
    return sp::with_sharding_constraint(u * 2.0f + 1.0f, sp::NamedSharding(mesh, P("a", "b")));
  });
  const Array u = put(line, x8, P("x"));
  const std::string text = f.explain(u);
  EXPECT_NE(text.find("inputs: P(('a', 'b'),)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("all_to_all over 'b' from dim 0 to dim 1"), std::string::npos) << text;
  expect_jax("relabelled_arrangement", {f(u)});
}

// Blocks that no split over the program's mesh puts where they are (the 'y' blocks of a
// (2, 4) mesh, on a (4, 2) one) are moved by one ppermute into the split that moves fewest of
// them; no resharding was asked for, so it is implicit. (JAX 0.10.2 raises an IndivisibleError
// for this program's result; the values are the unsplit computation's.)
TEST_F(PartitionGaps, AnArgumentInAnotherArrangementIsPermutedIntoASplit) {
  const sp::Mesh grid = sp::make_mesh({2, 4}, {"x", "y"});
  auto f = sp::jit([&](const Array& u) {
    return sp::with_sharding_constraint(u * 2.0f + 1.0f, sp::NamedSharding(mesh, P("a")));
  });
  const Array u = put(grid, x8, P("y"));
  const std::string text = f.explain(u);
  EXPECT_NE(text.find("1. ppermute over ('a', 'b'): argument 0 is on the mesh's devices in another "
                      "order or arrangement"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("(implicit resharding)"), std::string::npos) << text;
  const Array got = f(u);
  EXPECT_EQ(got.sharding()->repr(), sp::NamedSharding(mesh, P("a")).repr());
  EXPECT_TRUE(spmd_test::arrays_equal(got, x8 * 2.0f + 1.0f));
}

// An in_sharding on other devices: the argument is copied block by block before the program
// runs, as JAX does, and explain's account lists the copies (f32[2,8] blocks, 64 bytes).
TEST_F(PartitionGaps, AnInShardingOnOtherDevicesListsItsBlockCopies) {
  const sp::Mesh low = mesh_on({0, 1, 2, 3}, sp::Shape{4}, {"x"});
  const sp::Mesh high = mesh_on({4, 5, 6, 7}, sp::Shape{4}, {"x"});
  auto f = sp::jit([](const Array& u) { return u * 2.0f; },
                   {.in_shardings = sp::NamedSharding(high, P("x"))});
  const Array u = put(low, x8, P("x"));
  const std::string text = f.explain(u);
  EXPECT_NE(text.find("1. device_put block copies: argument 0 moves from the devices [0, 1, 2, 3] "
                      "to its blocks of P('x',) on the devices [4, 5, 6, 7], before the program "
                      "runs; each device sends 64 bytes\n"),
            std::string::npos)
      << text;
  expect_jax("copied_device_sets", {f(u)});
}

// A constraint inside jit on a mesh over the same devices in the same order, for an argument
// whose f32[2,4] blocks no split of that mesh holds: the launch copies it to the rows P('x')
// puts on each device first (each device holds half of its row already: 16 bytes come from
// another), and explain's account lists the copies.
TEST_F(PartitionGaps, AnArgumentNoSplitOfTheMeshHoldsListsItsBlockCopies) {
  const sp::Mesh line = sp::make_mesh({8}, {"x"});
  auto f = sp::jit([&](const Array& u) {
    return sp::with_sharding_constraint(u * 2.0f + 1.0f, sp::NamedSharding(line, P("x")));
  });
  const Array u = put(mesh, x8, P("a", "b"));
  const std::string text = f.explain(u);
  EXPECT_NE(text.find("1. device_put block copies: argument 0 moves from the devices [0, 1, 2, 3, "
                      "4, 5, 6, 7] to its blocks of P('x',) on the devices [0, 1, 2, 3, 4, 5, "
                      "6, 7], before the program runs; each device sends 16 bytes\n"),
            std::string::npos)
      << text;
  expect_jax("copied_arrangement", {f(u)});
}

}  // namespace

namespace {

// x replicated times y split along the contracted dim, for a replicated result no larger than y:
// gathering y (3/4 of its 1 KiB) sends half of what completing the partial products does (a
// psum of the 1 KiB result, 2 · 3/4 of it), so the partitioner gathers, as XLA does.
TEST_F(PartitionGaps, AContractedSplitIsGatheredWhereThatSendsLess) {
  const Array y = put(mesh, x16 / 256, P("a"));
  const Array x = put(mesh, x16, P());
  auto f = sp::jit([](const Array& a, const Array& b) { return sp::matmul(a, b); },
                   {.out_shardings = sp::NamedSharding(mesh, P())});
  const std::string text = f.explain(x, y);
  EXPECT_NE(text.find("1. all_gather over 'a' along dim 0: operand 1 of dot_general (equation 0) "
                      "is needed split as P(): its reduced dims are gathered, which sends fewer "
                      "bytes than completing partial results; each device sends 768 bytes\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(count(text, "psum"), 0u) << text;
  EXPECT_TRUE(spmd_test::arrays_close(f(x, y), sp::matmul(x16, x16 / 256), 0, 0));
  // Where y is larger than the result, the psum of the [4, 64] partial products (2 · 3/4 of
  // 1 KiB) sends less than gathering the [16, 64] y (3/4 of 4 KiB): the partial plan stays.
  const Array wide = put(mesh, sp::arange(1024.0f).reshape({16, 64}) / 1024, P("a"));
  const Array thin = put(mesh, sp::arange(64.0f).reshape({4, 16}), P());
  const std::string kept = f.explain(thin, wide);
  EXPECT_NE(kept.find("psum over 'a'"), std::string::npos) << kept;
  EXPECT_EQ(count(kept, "all_gather"), 0u) << kept;
}

// x split P(None, 'a') plus y split P('a'), the sum wanted as x is split: y moves (one all_to_all),
// where taking the rows' split from y moved x and then the sum back.
TEST_F(PartitionGaps, AnOperandDoesNotTakeAnAxisTheResultGivesAnotherDim) {
  const Array x = put(mesh, x16, P(None, "a"));
  const Array y = put(mesh, x16 * 3, P("a"));
  auto f = sp::jit([](const Array& a, const Array& b) { return a + b; });
  const std::string text = f.explain(x, y);
  EXPECT_EQ(count(text, "each device sends"), 1u) << text;
  EXPECT_NE(text.find("operand 1 of add (equation 0) is needed split as P(None, 'a')"),
            std::string::npos)
      << text;
  const Array sum = f(x, y);
  EXPECT_EQ(sum.sharding()->repr(), sp::NamedSharding(mesh, P(None, "a")).repr());
  EXPECT_TRUE(spmd_test::arrays_close(sum, x16 * 4, 0, 0));
}

}  // namespace

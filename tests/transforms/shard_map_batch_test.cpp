// vmap of shard_map and vmap with spmd_axis_name inside a shard_map body, against JAX 0.10.2
// (tools/goldens/gen_shard_map_batch.py): a batched shard_map keeps each batch dim where in_axes
// put it (its specs get the dim there, unsplit or split over spmd_axis_name, and its results keep
// the dims the body gives them), and vmap's spmd_axis_name naming manual axes marks the batched
// values varying over them (JAX's spmd_names_insert_pvary), so the results must be split over
// those axes. Jaxpr text, values and JAX's errors.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "support/golden.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace {

namespace sp = spmd;
using sp::Array;
using sp::None;
using sp::P;

const std::string kGolden = "shard_map_batch/cases.txt";

const std::map<std::string, std::string>& blocks() {
  static const auto* b = new std::map<std::string, std::string>(spmd_test::golden_blocks(kGolden));
  return *b;
}

// JAX's jaxpr of a case, its NumPy ints spelled as spmd prints them.
std::string golden_jaxpr(const std::string& name) {
  return spmd_test::rejoined_params(spmd_test::without_numpy_ints(blocks().at(name)));
}

void expect_values(const std::string& name, const std::vector<Array>& leaves) {
  const auto& values = spmd_test::load_golden("shard_map_batch/values.npz");
  for (size_t i = 0; i < leaves.size(); ++i) {
    const std::string key = name + "/" + std::to_string(i);
    ASSERT_TRUE(values.count(key)) << key;
    EXPECT_TRUE(spmd_test::arrays_close(leaves[i], values.at(key), 1e-6, 1e-6)) << key;
  }
}

class ShardMapBatch : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sp::device_count() < 8) GTEST_SKIP() << "needs 8 devices";
  }

  sp::Mesh mesh = sp::make_mesh({4, 2}, {"a", "b"});
  Array x88 = sp::arange(64.0f).reshape({8, 8});
  Array x848 = sp::arange(256.0f).reshape({8, 4, 8});
  Array w8 = sp::arange(8.0f) / 8.0f;
  Array s = Array(0.5f).astype(sp::float32);  // not weakly typed, as np.float32(0.5)

  using Fn1 = std::function<Array(const Array&)>;
  using Fn2 = std::function<Array(const Array&, const Array&)>;

  // make_jaxpr(f)(args...) prints JAX's text and f(args...) gives JAX's values.
  template <class F, class... Args>
  static void expect_case(const std::string& name, F f, const Args&... args) {
    ASSERT_TRUE(blocks().count(name)) << "no golden case " << name;
    EXPECT_EQ(sp::make_jaxpr(f)(args...).str(), golden_jaxpr(name)) << name;
    expect_values(name, sp::tree_flatten(f(args...)).first);
  }

  auto smap(Fn1 body, sp::PartitionSpec in, sp::PartitionSpec out) const {
    return sp::shard_map(std::move(body), mesh, std::move(in), std::move(out));
  }
  static Array affine(const Array& v) { return v * 2.0f + 1.0f; }
  static Array column_sums(const Array& v) { return sp::lax::psum(sp::sum(v, {0}), "b"); }
  // vmap(f) with spmd_axis_name "a" (and in_axes), as a shard_map body.
  static Fn1 inner(Fn1 f, int in_axis = 0) {
    return [f, in_axis](const Array& v) {
      return sp::vmap(f, {.in_axes = {in_axis}, .spmd_axis_name = {"a"}})(v);
    };
  }
};

const sp::VmapOptions kSpmd{.spmd_axis_name = {"a"}};

TEST_F(ShardMapBatch, TheBatchDimStaysWhereInAxesPutIt) {
  expect_case("in0", sp::vmap(smap(affine, P("b"), P("b"))), x88);
  expect_case("in1", sp::vmap(smap(affine, P("b"), P("b")), {.in_axes = {1}}), x88);
  expect_case("inm1", sp::vmap(smap(affine, P("b"), P("b")), {.in_axes = {-1}}), x848);
  expect_case("in1_out1", sp::vmap(smap(affine, P("b"), P("b")), {.in_axes = {1}, .out_axes = {1}}),
              x88);
}

TEST_F(ShardMapBatch, SpmdAxisNameSplitsTheBatchDimWhereItIs) {
  expect_case("in0_spmd", sp::vmap(smap(affine, P("b"), P("b")), kSpmd), x88);
  expect_case("in1_spmd",
              sp::vmap(smap(affine, P("b"), P("b")), {.in_axes = {1}, .spmd_axis_name = {"a"}}),
              x88);
  expect_case("inm1_spmd",
              sp::vmap(smap(affine, P("b"), P("b")), {.in_axes = {-1}, .spmd_axis_name = {"a"}}),
              x848);
  expect_case("in1_out1_spmd",
              sp::vmap(smap(affine, P("b"), P("b")),
                       {.in_axes = {1}, .out_axes = {1}, .spmd_axis_name = {"a"}}),
              x88);
}

TEST_F(ShardMapBatch, ResultsKeepTheDimsTheBodyGivesThem) {
  expect_case("sum_in1", sp::vmap(smap(column_sums, P("b"), P()), {.in_axes = {1}}), x848);
  expect_case("sum_in1_spmd",
              sp::vmap(smap(column_sums, P("b"), P()), {.in_axes = {1}, .spmd_axis_name = {"a"}}),
              x848);
  expect_case("sum_inm1", sp::vmap(smap(column_sums, P("b"), P()), {.in_axes = {-1}}), x848);
}

TEST_F(ShardMapBatch, BatchedAndUnbatchedOperandsAndResults) {
  auto scaled = sp::shard_map([](const Array& v, const Array& w) { return v * w; }, mesh,
                              {P("b"), P("b")}, P("b"));
  expect_case("mixed_in1", sp::vmap(scaled, {.in_axes = {1, None}}), x88, w8);
  expect_case("mixed_in1_spmd", sp::vmap(scaled, {.in_axes = {1, None}, .spmd_axis_name = {"a"}}),
              x88, w8);
  auto pair = sp::shard_map(
      [](const Array& v, const Array& w) {
        return std::vector<Array>{v * 2.0f, w + 1.0f};
      },
      mesh, {P("b"), P()}, {P("b"), P()});
  expect_case("unbatched_result", sp::vmap(pair, {.in_axes = {1, None}, .out_axes = {0, None}}),
              x88, w8);
  expect_case(
      "unbatched_result_spmd",
      sp::vmap(pair, {.in_axes = {1, None}, .out_axes = {0, None}, .spmd_axis_name = {"a"}}), x88,
      w8);
}

TEST_F(ShardMapBatch, SpmdAxisNameInsideTheBodyMarksBatchedValuesVarying) {
  expect_case("inner_split", smap(inner([](const Array& r) { return r * 2.0f; }), P("a"), P("a")),
              x88);
  expect_case("inner_replicated_add",
              smap(inner([](const Array& r) { return r + 1.0f; }), P(), P("a")), x88);
  expect_case("inner_replicated_sin",
              smap(inner([](const Array& r) { return sp::sin(r); }), P(), P("a")), x88);
  expect_case(
      "inner_in1",
      smap(inner([](const Array& r) { return r * 2.0f; }, 1), P(None, "b"), P(sp::axes("b", "a"))),
      x88);
  auto broadcast_operand = sp::shard_map(
      [](const Array& v, const Array& w) {
        return sp::vmap([&](const Array& r) { return r * w; }, kSpmd)(v);
      },
      mesh, {P("a"), P()}, P("a"));
  expect_case("inner_broadcast_operand", broadcast_operand, x88, w8);
  auto unbatched_operand = sp::shard_map(
      [](const Array& v, const Array& t) {
        return sp::vmap([](const Array& r, const Array& u) { return r + u; },
                        {.in_axes = {0, None}, .spmd_axis_name = {"a"}})(v, t);
      },
      mesh, {P("b"), P()}, P(sp::axes("b", "a")));
  expect_case("inner_unbatched_operand", unbatched_operand, x88, s);
  auto jitted_sin = sp::jit([](const Array& r) { return sp::sin(r); }, {.name = "sin"});
  expect_case("inner_jit", smap(inner(jitted_sin), P(), P("a")), x88);
}

TEST_F(ShardMapBatch, NestedSpmdAxisNamesInsideTheBodyMarkValuesVaryingOverAll) {
  auto nested = [](const Array& v) {
    return sp::vmap(sp::vmap([](const Array& r) { return r + 1.0f; }, {.spmd_axis_name = {"b"}}),
                    kSpmd)(v);
  };
  expect_case("inner_nested", smap(nested, P(), P("a", "b")), x848);
}

TEST_F(ShardMapBatch, ResultsVaryingOverTheNameNeedItInOutSpecs) {
  auto error = [&](const std::string& name, Fn1 body, sp::PartitionSpec in, sp::PartitionSpec out) {
    const std::string want =
        "[shard_map] " +
        spmd_test::replaced(spmd_test::jax_error(kGolden, name), "'_rem_singleton'", "'body'");
    EXPECT_EQ(spmd_test::error_message<sp::ShardingError>(
                  [&] { sp::shard_map(body, mesh, in, out, {.name = "body"})(x88); }),
              want)
        << name;
  };
  error("inner_replicated_add_out_unsplit", inner([](const Array& r) { return r + 1.0f; }), P(),
        P());
  error("inner_split_b_out_b", inner([](const Array& r) { return r * 2.0f; }), P("b"), P("b"));
  error("inner_jit_out_unsplit",
        inner(sp::jit([](const Array& r) { return sp::sin(r); }, {.name = "sin"})), P(), P());
}

}  // namespace

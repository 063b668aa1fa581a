// vmap of a shard_map on an all-Explicit mesh, against JAX 0.10.2
// (tools/goldens/gen_shard_map_partial_manual.py): with the batch dim split over Explicit axis
// 'a', the shard_map is manual over 'b' only and its body keeps the batch dim whole, typed split
// over 'a' (`c:f32[8@a,4]{V:b}`); with the batch dim unsplit it is manual over both axes. The
// jaxpr text, eagerly and under jit, the results' types and values. Also the types and values
// of arrays a body makes from constants alone (on the body's manual mesh) and grad's seed
// under make_jaxpr of an argument committed over an Auto mesh.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "core/array_impl.h"
#include "sharding/type_sharding.h"
#include "support/golden.h"
#include "transforms/interpreters.h"

#include <functional>
#include <string>
#include <vector>

namespace {

namespace sp = spmd;
using sp::Array;
using sp::None;
using sp::P;

const std::string kCases = "shard_map_partial_manual/cases.txt";

std::string golden(const std::string& name) {
  return spmd_test::rejoined_params(
      spmd_test::without_numpy_ints(spmd_test::golden_blocks(kCases).at(name)));
}

class ShardMapPartialManual : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sp::device_count() < 8) GTEST_SKIP() << "needs 8 CPU devices";
  }

  using Fn = std::function<Array(std::vector<Array>)>;

  // make_jaxpr(f) and make_jaxpr(jit(f)) print JAX's text (`fn` names the Python function jit
  // names its equation after); f and jit(f) give JAX's types and values.
  static void expect_case(const std::string& name, const Fn& f, const std::vector<Array>& args,
                          const std::string& fn = "affine") {
    auto scope = sp::use_mesh(mesh_);
    EXPECT_EQ(sp::make_jaxpr(f)(args).str(), golden(name + ".jaxpr")) << name;
    EXPECT_EQ(sp::make_jaxpr(sp::jit(f, {.name = fn}))(args).str(), golden(name + ".jit_jaxpr"))
        << name;
    const Array want = spmd_test::load_golden("shard_map_partial_manual/values.npz").at(name);
    const Array eager = f(args);
    EXPECT_EQ(sp::typeof(eager).str(), golden(name + ".type")) << name;
    EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(eager), want)) << name;
    const Array jitted = sp::jit(f)(args);
    EXPECT_EQ(sp::typeof(jitted).str(), golden(name + ".jit_type")) << name;
    EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(jitted), want)) << name;
  }

  static inline const sp::Mesh mesh_ =
      sp::make_mesh({4, 2}, {"a", "b"}, {sp::AxisType::Explicit, sp::AxisType::Explicit});

  static Array put(const P& spec) {
    return sp::device_put(sp::arange(64.0f).reshape({8, 8}), sp::NamedSharding(mesh_, spec));
  }
  static Array affine(Array t) { return sp::lax::add(sp::lax::mul(t, 2.0f), 1.0f); }
  static std::function<Array(Array)> smap(std::function<Array(Array)> body, const P& in,
                                          const P& out) {
    return sp::shard_map(std::move(body), mesh_, in, out);
  }
  // vmap(g) with the options, as a function of a list of arguments (g takes one).
  template <class G>
  static Fn vmapped(G g, sp::VmapOptions options = {}) {
    return [g, options](std::vector<Array> xs) { return sp::vmap(g, options)(xs[0]); };
  }
  // The same for a g of two arguments.
  template <class G>
  static Fn vmapped2(G g, sp::VmapOptions options = {}) {
    return [g, options](std::vector<Array> xs) { return sp::vmap(g, options)(xs[0], xs[1]); };
  }
};

TEST_F(ShardMapPartialManual, ABatchSplitOverAnExplicitAxisLeavesItNonManual) {
  expect_case("split", vmapped(smap(affine, P("b"), P("b"))), {put(P("a", "b"))});
  expect_case("split_in1", vmapped(smap(affine, P("b"), P("b")), {.in_axes = {1}, .out_axes = {1}}),
              {put(P("b", "a"))});
}

TEST_F(ShardMapPartialManual, ACollectiveOverTheManualAxis) {
  auto row_psum = [](Array t) { return sp::lax::psum(sp::lax::mul(t, t), "b"); };
  expect_case("split_psum", vmapped(smap(row_psum, P("b"), P())), {put(P("a", "b"))}, "row_psum");
}

TEST_F(ShardMapPartialManual, AnUnbatchedOperandBroadcastAlongTheBatch) {
  auto scaled = sp::shard_map([](Array t, Array u) { return sp::lax::mul(t, u); }, mesh_,
                              sp::SpecTree{P("b"), P("b")}, P("b"));
  const Array u = sp::device_put(sp::arange(8.0f), sp::NamedSharding(mesh_, P("b")));
  expect_case("split_unbatched", vmapped2(scaled, {.in_axes = {0, None}}), {put(P("a", "b")), u},
              "scaled");
}

// Collectives whose result's rank differs from their operand's: the batch dim keeps its split
// over 'a' in the body's types and in the results.
TEST_F(ShardMapPartialManual, AnUntiledAllGatherKeepsTheBatchSplit) {
  auto gather = [](int axis) {
    return [axis](Array t) { return sp::lax::all_gather(t, "b", {.axis = axis}); };
  };
  expect_case("split_all_gather", vmapped(smap(gather(0), P("b"), P(None, "b"))),
              {put(P("a", "b"))}, "<lambda>");
  expect_case("split_all_gather_axis1", vmapped(smap(gather(1), P("b"), P("b"))),
              {put(P("a", "b"))}, "<lambda>");
}

// With the batch dim after the gathered one, its split stays on it: device k of 'b' gathers
// column i of x as [2,4] blocks, so r[g, j, i] = x[4g + j % 4, i] (exact arithmetic; JAX 0.10.2
// keeps the operand's spec by position and types this result float32[2,8@(b,a),8]).
TEST_F(ShardMapPartialManual, AnAllGatherBeforeTheBatchDimKeepsItsSplit) {
  auto scope = sp::use_mesh(mesh_);
  auto f = sp::vmap(smap([](Array t) { return sp::lax::all_gather(t, "b"); }, P("b"), P(None, "b")),
                    {.in_axes = {1}, .out_axes = {2}});
  const Array x = put(P("b", "a"));
  const Array rows = sp::arange(64.0f).reshape({2, 4, 8});  // x[4g + j, i]
  const Array want = sp::lax::concatenate({rows, rows}, 1);
  for (const Array& r : {f(x), sp::jit(f)(x)}) {
    EXPECT_EQ(sp::typeof(r).str(), "float32[2,8@b,8@a]");
    EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(r), sp::device_get(want)));
  }
}

// JAX 0.10.2 types an untiled psum_scatter here but fails running it (an AssertionError), so the
// values are by exact arithmetic: device k of 'b' holds, per row, the sum over 'b' of the k-th
// pair of its block's 4 columns, so the result is x[:, :4] + x[:, 4:].
TEST_F(ShardMapPartialManual, AnUntiledPsumScatterKeepsTheBatchSplit) {
  auto scope = sp::use_mesh(mesh_);
  auto scatter = [](Array t) { return sp::lax::psum_scatter(t.reshape({2, 2}), "b"); };
  const Fn f = vmapped(smap(scatter, P("b"), P("b")));
  const std::vector<Array> args{put(P("a", "b"))};
  EXPECT_EQ(sp::make_jaxpr(f)(args).str(), golden("split_psum_scatter.jaxpr"));
  const Array v = sp::arange(64.0f).reshape({8, 8});
  const Array want =
      sp::lax::add(sp::lax::slice(v, {0, 0}, {8, 4}), sp::lax::slice(v, {0, 4}, {8, 8}));
  for (const Array& r : {f(args), sp::jit(f)(args)}) {
    EXPECT_EQ(sp::typeof(r).str(), golden("split_psum_scatter.type"));
    EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(r), sp::device_get(want)));
  }
}

TEST_F(ShardMapPartialManual, AnUnsplitBatchLeavesItManualOverEveryAxis) {
  expect_case("unsplit", vmapped(smap(affine, P("b"), P("b"))), {put(P(None, "b"))});
}

TEST_F(ShardMapPartialManual, AValueTheBodyMakesMultipliesTheBatch) {
  auto times_made = [](Array t) { return sp::lax::mul(t, sp::arange(4.0f)); };
  expect_case("split_made", vmapped(smap(times_made, P("b"), P("b"))), {put(P("a", "b"))},
              "times_made");
}

TEST_F(ShardMapPartialManual, SpmdAxisNameOverTheSplitAxisMakesTheSameProgram) {
  expect_case("split_spmd", vmapped(smap(affine, P("b"), P("b")), {.spmd_axis_name = {"a"}}),
              {put(P("a", "b"))});
}

// An eager call localizes the body to the blocks the devices run once: a second call with the
// same types traces nothing again, and gives the same values.
TEST_F(ShardMapPartialManual, ASecondEagerCallDoesNotTraceTheBodyAgain) {
  auto scope = sp::use_mesh(mesh_);
  auto f = sp::vmap(
      smap([](Array t) { return sp::lax::sub(sp::lax::mul(t, 3.0f), 4.0f); }, P("b"), P("b")));
  const Array x = put(P("a", "b"));
  const int64_t before = sp::localized_body_trace_count();
  const Array first = f(x);
  EXPECT_EQ(sp::localized_body_trace_count(), before + 1);
  const Array second = f(x);
  EXPECT_EQ(sp::localized_body_trace_count(), before + 1);
  const Array want = sp::arange(64.0f).reshape({8, 8}) * 3.0f - 4.0f;  // exact in float32
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(first), sp::device_get(want)));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(second), sp::device_get(want)));
}

}  // namespace

namespace {

// grad through the partial-manual shard_map, eagerly and under jit: d/dx sum(2x + 1) = 2 and
// d/dx sum(psum_b(x * x)) = 2x, by exact arithmetic.
TEST(ShardMapPartialManualGrad, DifferentiatesThroughTheVmappedShardMap) {
  if (sp::device_count() < 8) GTEST_SKIP() << "needs 8 CPU devices";
  const sp::Mesh mesh =
      sp::make_mesh({4, 2}, {"a", "b"}, {sp::AxisType::Explicit, sp::AxisType::Explicit});
  auto scope = sp::use_mesh(mesh);
  const Array v = sp::arange(64.0f).reshape({8, 8});
  const Array x = sp::device_put(v, sp::NamedSharding(mesh, P("a", "b")));
  auto affine =
      sp::vmap(sp::shard_map([](Array t) { return t * 2.0f + 1.0f; }, mesh, P("b"), P("b")));
  auto row_psum = sp::vmap(sp::shard_map(
      [](Array t) { return sp::lax::psum(sp::lax::mul(t, t), "b"); }, mesh, P("b"), P()));
  auto g1 = sp::grad([&](Array t) { return sp::sum(affine(t)); });
  auto g2 = sp::grad([&](Array t) { return sp::sum(row_psum(t)); });
  const Array twos = sp::full({8, 8}, 2.0f);
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(g1(x)), sp::device_get(twos)));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(sp::jit(g1)(x)), sp::device_get(twos)));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(g2(x)), sp::device_get(v * 2.0f)));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(sp::jit(g2)(x)), sp::device_get(v * 2.0f)));
}

}  // namespace

namespace {

// JAX's text of a value's type and its sharding, as the generator's record() prints them (an
// untyped value is on JAX's empty mesh).
std::string type_and_sharding(const std::string& name, const Array& x) {
  const sp::AbstractValue& t = sp::aval_of(x);
  std::string spec = "P(";
  for (int d = 0; d < x.ndim(); ++d) spec += d ? ", None" : "None";
  spec += x.ndim() == 1 ? ",)" : ")";
  return name + " " + sp::type_of(x).str() + "\n" +
         (t.sharding ? sp::ParamTraits<sp::TypeSharding>::str(*t.sharding)
                     : "NamedSharding(mesh=AbstractMesh((), axis_types=()), spec=" + spec + ")");
}

// Values a shard_map body makes from constants alone are on the body's manual mesh; an array
// closed over keeps JAX's empty mesh.
class ShardMapMadeValues : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sp::device_count() < 8) GTEST_SKIP() << "needs 8 CPU devices";
  }

  std::function<Array(Array)> making(const sp::Mesh& mesh, const P& spec) {
    return sp::shard_map(
        [this](Array t) {
          record("zeros", sp::zeros({4}));
          record("full", sp::full({4}, 2.0f));
          record("arange", sp::arange(4.0f));
          record("normal", sp::random::normal(sp::random::key(0), {4}));
          record("closed", closed_);
          record("closed_plus_one", closed_ + 1.0f);
          return t;
        },
        mesh, spec, spec);
  }

  void record(const std::string& name, const Array& x) {
    if (!seen_.empty()) seen_ += '\n';
    seen_ += type_and_sharding(name, x);
  }

  // The types recorded in the body (`name`, under jit `name`.jit) and the values it makes.
  void expect_made(const std::string& name, const sp::Mesh& mesh, const P& spec) {
    const Array x =
        sp::device_put(sp::arange(64.0f).reshape({8, 8}), sp::NamedSharding(mesh, spec));
    for (bool jitted : {false, true}) {
      auto f = making(mesh, spec);  // afresh: a shard_map keeps the bodies it traced
      seen_.clear();
      const Array out = jitted ? sp::jit(f)(x) : f(x);
      EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(out), sp::device_get(x)));
      const std::string key = jitted ? name + ".jit" : name;
      EXPECT_EQ(seen_, spmd_test::golden_blocks(kCases).at(key)) << key;
    }
    auto made = sp::shard_map(
        [this](Array) {
          return std::vector<Array>{sp::zeros({4}), sp::full({4}, 2.0f), sp::arange(4.0f),
                                    sp::random::normal(sp::random::key(0), {4}),
                                    closed_ + 1.0f};
        },
        mesh, spec, P());
    const std::vector<Array> values = made(x);
    const auto& want = spmd_test::load_golden("shard_map_partial_manual/values.npz");
    const char* keys[] = {"zeros", "full", "arange", "normal", "closed_plus_one"};
    for (size_t i = 0; i < values.size(); ++i)
      EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(values[i]),
                                          want.at(name + "." + keys[i])))
          << keys[i];
  }

  Array closed_ = sp::ones({4});
  std::string seen_;
};

TEST_F(ShardMapMadeValues, OnAnExplicitMeshTheyAreOnTheBodysManualMesh) {
  const sp::Mesh mesh =
      sp::make_mesh({4, 2}, {"a", "b"}, {sp::AxisType::Explicit, sp::AxisType::Explicit});
  expect_made("made_explicit", mesh, P("a", "b"));
}

TEST_F(ShardMapMadeValues, OnAnAutoMeshTheyAreOnTheBodysManualMesh) {
  const sp::Mesh mesh = sp::make_mesh({8}, {"a"}, {sp::AxisType::Auto});
  expect_made("made_auto", mesh, P("a"));
}

// The transpose of a reshape of zeros made in a body passes its operand's sharding, on the
// body's manual mesh.
TEST_F(ShardMapMadeValues, GradThroughAReshapeOfMadeZeros) {
  const sp::Mesh mesh =
      sp::make_mesh({4, 2}, {"a", "b"}, {sp::AxisType::Explicit, sp::AxisType::Explicit});
  auto body = [](Array t) {
    Array z = sp::lax::add(sp::zeros({2, 4}), t);
    return sp::expand_dims(sp::lax::reduce_sum(sp::lax::reshape(z, {8}), {0}), sp::Axes{0});
  };
  auto f = sp::shard_map(body, mesh, P("a", "b"), P(sp::AxisNames(std::vector<std::string>{"a", "b"})));
  auto g = sp::grad([&](Array t) { return sp::sum(f(t)); });
  const Array x =
      sp::device_put(sp::arange(64.0f).reshape({8, 8}), sp::NamedSharding(mesh, P("a", "b")));
  EXPECT_EQ(sp::make_jaxpr(g)(x).str(), golden("grad_reshaped_zeros"));
  auto scope = sp::use_mesh(mesh);
  const Array want = spmd_test::load_golden("shard_map_partial_manual/values.npz")
                         .at("grad_reshaped_zeros");
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(g(x)), want));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(sp::jit(g)(x)), want));
}

// make_jaxpr(grad) of an array committed over an Auto mesh reshards the seed onto that mesh; of
// an uncommitted one, under use_mesh too, the seed is a plain broadcast.
TEST(ShardMapPartialManualSeed, ACommittedArgumentsMeshReshardsTheSeed) {
  if (sp::device_count() < 8) GTEST_SKIP() << "needs 8 CPU devices";
  const sp::Mesh mesh = sp::make_mesh({4, 2}, {"a", "b"}, {sp::AxisType::Auto, sp::AxisType::Auto});
  auto g = sp::grad([](Array t) { return sp::sum(sp::sin(t)); });
  const Array v = sp::arange(64.0f).reshape({8, 8});
  const Array x = sp::device_put(v, sp::NamedSharding(mesh, P("a", "b")));
  EXPECT_EQ(sp::make_jaxpr(g)(x).str(), golden("grad_committed_auto"));
  // Inside jit and vmap too: their traces see the mesh the arrays are committed over.
  auto jitted = sp::jit(g, {.name = "<lambda>"});
  EXPECT_EQ(sp::make_jaxpr(jitted)(x).str(), golden("grad_committed_auto_jit"));
  EXPECT_EQ(sp::make_jaxpr(sp::vmap(g))(x).str(), golden("grad_committed_auto_vmap"));
  // The mesh is part of the jit's signature there (as of JAX's types): an uncommitted argument
  // of the same shape is traced anew, without the reshard; concrete calls, whose traces do not
  // see their arguments' meshes, share that entry.
  EXPECT_EQ(sp::make_jaxpr(jitted)(v).str().find("reshard"), std::string::npos);
  EXPECT_EQ(jitted.trace_count(), 2);
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(jitted(x)), sp::device_get(jitted(v))));
  EXPECT_EQ(jitted.trace_count(), 2);
  auto scope = sp::use_mesh(mesh);
  EXPECT_EQ(sp::make_jaxpr(g)(v).str(), golden("grad_uncommitted_auto_set_mesh"));
}

}  // namespace

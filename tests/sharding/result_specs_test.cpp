// How results print a PartitionSpec with trailing Nones, against JAX 0.10.2 (goldens from
// tools/goldens/gen_result_specs.py; the cases use its names): jit's out_shardings and
// device_put keep the spec as given, a jit result split like its first sharded argument takes
// that argument's sharding, and other results print the spec without trailing Nones. Outside
// jit, grad runs op by op as JAX's does, so a gradient prints as the last op of its backward pass
// leaves it; shard_map results print their out_specs as given and pmap results a NamedSharding
// on the pmap's mesh.
#include <gtest/gtest.h>
#include <spmd/spmd.h>

#include <string>
#include <tuple>
#include <vector>

#include "support/golden.h"

namespace {

namespace sp = spmd;
using sp::None;
using sp::P;

std::string golden(const std::string& name) {
  const auto blocks = spmd_test::golden_blocks("sharding/result_specs.txt");
  auto it = blocks.find(name);
  return it == blocks.end() ? "(missing golden " + name + ")" : it->second;
}

std::string reprs(const std::vector<sp::Array>& leaves) {
  std::string out;
  for (const sp::Array& x : leaves) {
    if (!out.empty()) out += '\n';
    out += x.sharding()->repr();
  }
  return out;
}

template <class T>
std::string reprs(const T& tree) {
  return reprs(sp::tree_flatten(tree).first);
}

sp::Array twice(const sp::Array& v) {
  return v * 2.0f;
}

sp::Array loss_sin(const sp::Array& w) {
  return sp::sum(sp::sin(w) * 2.0f);
}

sp::Array loss_square(const sp::Array& w) {
  return sp::sum(w * w);
}

sp::Array loss_product(const std::tuple<sp::Array, sp::Array>& uv) {
  return sp::sum(std::get<0>(uv) * std::get<1>(uv));
}

class ResultSpecsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sp::device_count() < 8) GTEST_SKIP() << "needs 8 devices (SPMD_CPU_DEVICES=8)";
  }
  sp::NamedSharding S(const P& spec) const { return sp::NamedSharding(m, spec); }
  sp::NamedSharding S2(const P& spec) const { return sp::NamedSharding(m2, spec); }
  static sp::Array put(const sp::Array& v, const sp::NamedSharding& s) {
    return sp::device_put(v, s);
  }
  static auto out_jit(const sp::NamedSharding& s) { return sp::jit(twice, {.out_shardings = s}); }
  static auto in_jit(const sp::NamedSharding& s) { return sp::jit(twice, {.in_shardings = s}); }
  static auto sm(const P& spec, const sp::Mesh& mesh) {
    return sp::shard_map(twice, mesh, spec, spec);
  }
  auto sm(const P& spec) const { return sm(spec, m); }

  sp::Mesh m = sp::make_mesh({8}, {"a"});
  sp::Mesh m2 = sp::make_mesh({4, 2}, {"a", "b"});
  sp::Array x = sp::arange(64.0f).reshape({8, 8});
  sp::Array x3 = sp::arange(64.0f).reshape({8, 4, 2});
};

TEST_F(ResultSpecsTest, OutShardingsKeepTheSpecAsGiven) {
  sp::Array r = out_jit(S(P("a", None)))(x);
  EXPECT_EQ(reprs(r), golden("out_a_none"));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(r), x * 2.0f));
  EXPECT_EQ(reprs(out_jit(S(P(None, "a")))(x)), golden("out_none_a"));
  EXPECT_EQ(reprs(out_jit(S(P(None, None)))(x)), golden("out_none_none"));
  EXPECT_EQ(reprs(out_jit(S(P("a")))(x)), golden("out_a"));
  EXPECT_EQ(reprs(out_jit(S(P()))(x)), golden("out_empty"));
  EXPECT_EQ(reprs(out_jit(S(P("a", None, None)))(x3)), golden("out_a_none_none_3d"));
  EXPECT_EQ(reprs(out_jit(S(P("a", None)))(put(x, S(P("a"))))), golden("out_a_none_committed"));
  EXPECT_EQ(reprs(out_jit(S2(P("a", None)))(x)), golden("out_a_none_mesh2"));
  auto pair = sp::jit([](const sp::Array& v) { return std::make_tuple(v, sp::sum(v, {1})); },
                      {.out_shardings = {S(P("a", None)), S(P("a"))}});
  EXPECT_EQ(reprs(pair(x)), golden("out_tree"));
}

TEST_F(ResultSpecsTest, DevicePutKeepsTheSpecAsGiven) {
  EXPECT_EQ(reprs(put(x, S(P("a", None)))), golden("put_a_none"));
  EXPECT_EQ(reprs(put(x, S(P(None, None)))), golden("put_none_none"));
  EXPECT_EQ(reprs(put(x, S(P("a")))), golden("put_a"));
  EXPECT_EQ(reprs(put(x3, S(P("a", None, None)))), golden("put_a_none_none_3d"));
  EXPECT_EQ(reprs(put(put(x, S(P(None, "a"))), S(P("a", None)))), golden("put_moved_a_none"));
}

TEST_F(ResultSpecsTest, InShardingsOfUncommittedArgumentsOutsideAMeshPrintTheProgramsSpec) {
  EXPECT_EQ(reprs(in_jit(S(P("a", None)))(x)), golden("in_a_none"));
  EXPECT_EQ(reprs(in_jit(S(P(None, None)))(x)), golden("in_none_none"));
  EXPECT_EQ(reprs(in_jit(S2(P("a", None)))(x)), golden("in_a_none_mesh2"));
  {
    auto scope = sp::use_mesh(m);
    EXPECT_EQ(reprs(in_jit(S(P("a", None)))(x)), golden("in_a_none_in_context"));
  }
  EXPECT_EQ(reprs(in_jit(S(P("a", None)))(put(x, S(P("a", None))))), golden("in_a_none_committed"));
  auto add = sp::jit([](const sp::Array& u, const sp::Array& v) { return u + v; },
                     {.in_shardings = {S(P("a", None)), sp::ShardingTree()}});
  EXPECT_EQ(reprs(add(x, put(x, S(P("a"))))), golden("in_first_committed_second"));
}

TEST_F(ResultSpecsTest, ResultsSplitLikeTheFirstArgumentTakeItsSharding) {
  auto doubled = sp::jit(twice);
  sp::Array r = doubled(put(x, S(P("a", None))));
  EXPECT_EQ(reprs(r), golden("committed_a_none"));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(r), x * 2.0f));
  EXPECT_EQ(reprs(doubled(put(x, S(P(None, None))))), golden("committed_none_none"));
  EXPECT_EQ(reprs(doubled(put(x, S(P("a"))))), golden("committed_a"));
  EXPECT_EQ(reprs(doubled(put(x, S2(P("a", None))))), golden("committed_a_none_mesh2"));
  EXPECT_EQ(reprs(doubled(put(x3, S(P("a", None, None))))), golden("committed_a_none_3d"));
  auto summed = sp::jit([](const sp::Array& v) { return sp::sum(v, {1}); });
  EXPECT_EQ(reprs(summed(put(x, S(P("a", None))))), golden("committed_sum"));
  auto transposed = sp::jit([](const sp::Array& v) { return v.T(); });
  EXPECT_EQ(reprs(transposed(put(x, S(P("a", None))))), golden("committed_transpose"));
  auto add = sp::jit([](const sp::Array& u, const sp::Array& v) { return u + v; });
  EXPECT_EQ(reprs(add(put(x, S(P("a", None))), put(x, S(P("a"))))),
            golden("committed_first_a_none"));
  EXPECT_EQ(reprs(add(put(x, S(P("a"))), put(x, S(P("a", None))))), golden("committed_first_a"));
  EXPECT_EQ(reprs(add(x, put(x, S(P("a", None))))), golden("committed_second"));
  auto scaled = sp::jit([](const sp::Array& s, const sp::Array& v) { return v * s; });
  EXPECT_EQ(reprs(scaled(sp::asarray(2.0f), put(x, S(P("a", None))))),
            golden("committed_after_scalar"));
  auto both = sp::jit([](const sp::Array& v) { return std::make_tuple(v + 1.0f, v.T()); });
  EXPECT_EQ(reprs(both(put(x, S(P("a", None))))), golden("committed_two_results"));
}

TEST_F(ResultSpecsTest, EagerOpsKeepTheArgumentsSpec) {
  EXPECT_EQ(reprs(put(x, S(P("a", None))) * 2.0f), golden("eager_a_none"));
  EXPECT_EQ(reprs(put(x, S(P(None, None))) + 1.0f), golden("eager_none_none"));
}

TEST_F(ResultSpecsTest, GradOutsideJitPrintsAsItsLastOp) {
  sp::Array g = sp::grad(loss_sin)(put(x, S(P("a", None))));
  EXPECT_EQ(reprs(g), golden("grad_sin"));
  EXPECT_TRUE(sp::allclose(sp::device_get(g), sp::cos(x) * 2.0f));
  sp::Array g2 = sp::grad(loss_square)(put(x, S(P("a", None))));
  EXPECT_EQ(reprs(g2), golden("grad_square"));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(g2), x * 2.0f));
  EXPECT_EQ(reprs(sp::grad(loss_square)(put(x, S(P("a"))))), golden("grad_square_a"));
  EXPECT_EQ(reprs(sp::grad(loss_square)(put(x, S(P(None, None))))),
            golden("grad_square_none_none"));
  EXPECT_EQ(reprs(sp::grad(loss_square)(put(x, S2(P("a", "b"))))), golden("grad_square_mesh2"));
  auto uv = std::make_tuple(put(x, S(P("a", None))), put(x, S(P("a"))));
  EXPECT_EQ(reprs(sp::grad(loss_product)(uv)), golden("grad_two_args"));
  auto [value, grad] = sp::value_and_grad(loss_sin)(put(x, S(P("a", None))));
  EXPECT_EQ(reprs(std::make_tuple(value, grad)), golden("value_and_grad_sin"));
  EXPECT_TRUE(sp::allclose(sp::device_get(value), sp::sum(sp::sin(x) * 2.0f)));
}

TEST_F(ResultSpecsTest, GradUnderJitFollowsJitsRule) {
  auto g = sp::jit(sp::grad(loss_sin));
  sp::Array r = g(put(x, S(P("a", None))));
  EXPECT_EQ(reprs(r), golden("jit_grad_sin"));
  EXPECT_TRUE(sp::allclose(sp::device_get(r), sp::cos(x) * 2.0f));
  EXPECT_EQ(reprs(g(put(x, S(P("a"))))), golden("jit_grad_sin_a"));
  EXPECT_EQ(reprs(g(put(x, S(P(None, "a"))))), golden("jit_grad_sin_none_a"));
  EXPECT_EQ(reprs(g(put(x, S2(P("a", None))))), golden("jit_grad_sin_mesh2"));
  auto uv = std::make_tuple(put(x, S(P("a", None))), put(x, S(P("a"))));
  EXPECT_EQ(reprs(sp::jit(sp::grad(loss_product))(uv)), golden("jit_grad_two_args"));
  auto [value, grad] = sp::jit(sp::value_and_grad(loss_sin))(put(x, S(P("a", None))));
  EXPECT_EQ(reprs(std::make_tuple(value, grad)), golden("jit_value_and_grad_sin"));
}

TEST_F(ResultSpecsTest, ShardMapResultsPrintTheirOutSpecs) {
  sp::Array r = sm(P("a", None))(x);
  EXPECT_EQ(reprs(r), golden("sm_a_none"));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(r), x * 2.0f));
  EXPECT_EQ(reprs(sm(P("a"))(x)), golden("sm_a"));
  EXPECT_EQ(reprs(sm(P(None, "a"))(x)), golden("sm_none_a"));
  EXPECT_EQ(reprs(sm(P("a", None))(put(x, S(P("a", None))))), golden("sm_a_none_committed"));
  auto summed = [&](const P& out) {
    return sp::shard_map([](const sp::Array& v) { return sp::lax::psum(v, "a"); }, m, P("a"),
                         out);
  };
  EXPECT_EQ(reprs(summed(P())(x)), golden("sm_psum_empty"));
  EXPECT_EQ(reprs(summed(P(None, None))(x)), golden("sm_psum_none_none"));
  EXPECT_EQ(reprs(sm(P("a", "b"), m2)(x)), golden("sm_mesh2_a_b"));
  EXPECT_EQ(reprs(sm(P("a", None), m2)(x)), golden("sm_mesh2_a_none"));
  EXPECT_EQ(reprs(sp::jit(sm(P("a", None)))(x)), golden("jit_sm_a_none"));
  EXPECT_EQ(reprs(sp::jit(sm(P("a", None)))(put(x, S(P("a", None))))),
            golden("jit_sm_a_none_committed"));
  auto loss = [&](const sp::Array& v) { return sp::sum(sp::square(sm(P("a", None))(v))); };
  sp::Array g = sp::grad(loss)(put(x, S(P("a", None))));
  EXPECT_EQ(reprs(g), golden("grad_sm_a_none"));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(g), x * 8.0f));
  EXPECT_EQ(reprs(sp::grad(loss)(x)), golden("grad_sm_a_none_uncommitted"));
}

TEST_F(ResultSpecsTest, PmapResultsAreNamedShardingsOnThePmapMesh) {
  sp::Array r = sp::pmap(twice)(x);
  EXPECT_EQ(reprs(r), golden("pmap"));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(r), x * 2.0f));
  EXPECT_EQ(reprs(sp::pmap(twice, {.axis_name = "i"})(x)), golden("pmap_named"));
  EXPECT_EQ(reprs(sp::pmap(twice)(x3)), golden("pmap_3d"));
  EXPECT_EQ(reprs(sp::pmap(twice)(put(x, S(P("a", None))))), golden("pmap_committed"));
  EXPECT_EQ(reprs(sp::pmap(twice, {.out_axes = {1}})(x)), golden("pmap_out_axes_1"));
  auto summed = sp::pmap([](const sp::Array& v) { return sp::lax::psum(v, "i"); },
                         {.axis_name = "i", .out_axes = {None}});
  sp::Array s = summed(x);
  EXPECT_EQ(reprs(s), golden("pmap_out_axes_none"));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(s), sp::sum(x, {0})));
}

}  // namespace

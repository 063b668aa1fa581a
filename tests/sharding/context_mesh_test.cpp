// The mesh in context (sp::set_mesh / sp::use_mesh, JAX's jax.set_mesh) against JAX 0.10.2
// (goldens from tools/goldens/gen_context_mesh.py): the shardings PartitionSpecs stand for in
// device_put, with_sharding_constraint, jit's in_shardings and out_shardings, reshard,
// auto_axes and explicit_axes, the types of Explicit-mode results, get_mesh, and the errors.
#include <gtest/gtest.h>
#include <spmd/spmd.h>

#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "support/golden.h"

namespace {

namespace sp = spmd;
using sp::P;

std::string golden(const std::string& name) {
  return spmd_test::golden_blocks("sharding/context_mesh.txt").at(name);
}

std::string jax_error(const std::string& api, const std::string& name) {
  return "[" + api + "] " + spmd_test::jax_error("sharding/context_mesh.txt", name);
}

// One line per leaf: repr(sharding) and committed, as the golden writes them.
std::string shardings_of(const std::vector<sp::Array>& leaves) {
  std::string out;
  for (const sp::Array& x : leaves) {
    if (!out.empty()) out += '\n';
    out += x.sharding()->repr() + (x.committed() ? " 1" : " 0");
  }
  return out;
}

template <class T>
std::string shardings_of(const T& tree) {
  return shardings_of(sp::tree_flatten(tree).first);
}

class ContextMeshTest : public ::testing::Test {
 protected:
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"a", "b"});
  sp::Mesh mesh2 = sp::make_mesh({2, 4}, {"a", "b"});
  sp::Mesh emesh =
      sp::make_mesh({4, 2}, {"a", "b"}, {sp::AxisType::Explicit, sp::AxisType::Explicit});
  sp::Array x = sp::arange(32.0f).reshape({8, 4});
  sp::Array sq = sp::arange(64.0f).reshape({8, 8});
};

TEST_F(ContextMeshTest, DevicePutReadsSpecsOverTheMeshInContext) {
  auto scope = sp::use_mesh(mesh);
  sp::Array y = sp::device_put(x, P("a"));
  EXPECT_EQ(shardings_of(y), golden("device_put"));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(y), x));
  std::tuple<sp::Array, std::map<std::string, sp::Array>> tree{x, {{"w", x}}};
  EXPECT_EQ(shardings_of(sp::device_put(tree, {P("a"), {P(sp::None, "b")}})),
            golden("device_put_tree"));
}

TEST_F(ContextMeshTest, JitShardingsAndConstraintsReadSpecs) {
  auto scope = sp::use_mesh(mesh);
  auto doubled =
      sp::jit([](const sp::Array& v) { return v * 2.0f; }, {.out_shardings = P(sp::None, "b")});
  sp::Array d = doubled(sp::device_put(x, P("a")));
  EXPECT_EQ(shardings_of(d), golden("jit_out_shardings"));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(d), x * 2.0f));
  auto plus = sp::jit([](const sp::Array& v) { return v + 1.0f; }, {.in_shardings = P("a", "b")});
  EXPECT_EQ(shardings_of(plus(x)), golden("jit_in_shardings"));
  auto pair =
      sp::jit([](const sp::Array& v, const sp::Array& w) { return std::make_tuple(v + w, v - w); },
              {.in_shardings = {P("a"), P("a")}, .out_shardings = {P(), P("b")}});
  EXPECT_EQ(shardings_of(pair(x, x)), golden("jit_tree_shardings"));
  auto constrained =
      sp::jit([](const sp::Array& v) { return sp::with_sharding_constraint(v * 2.0f, P("b")); });
  sp::Array c = constrained(x);
  EXPECT_EQ(shardings_of(c), golden("wsc_in_jit"));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(c), x * 2.0f));
}

TEST_F(ContextMeshTest, ScopesNestAndAJitReadsTheMeshOfEachCall) {
  {
    auto outer = sp::use_mesh(mesh);
    {
      auto inner = sp::use_mesh(mesh2);
      EXPECT_EQ(shardings_of(sp::device_put(x, P("a"))), golden("nested_inner"));
    }
    EXPECT_EQ(shardings_of(sp::device_put(x, P("a"))), golden("nested_after"));
  }
  auto tripled = sp::jit([](const sp::Array& v) { return v * 3.0f; }, {.out_shardings = P("a")});
  std::vector<sp::Array> both;
  {
    auto scope = sp::use_mesh(mesh);
    both.push_back(tripled(x));
  }
  {
    auto scope = sp::use_mesh(mesh2);
    both.push_back(tripled(x));
  }
  EXPECT_EQ(shardings_of(both), golden("jit_called_under_other_mesh"));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(both[1]), x * 3.0f));
}

TEST_F(ContextMeshTest, GetMeshNamesTheMeshInContext) {
  EXPECT_EQ(sp::get_mesh().str(), golden("get_mesh_outside"));
  auto scope = sp::use_mesh(mesh);
  EXPECT_EQ(sp::get_mesh().str(), golden("get_mesh_inside"));
}

// set_mesh sets the mesh of every thread; use_mesh only that of its own thread, over it.
TEST_F(ContextMeshTest, SetMeshIsForEveryThreadAndUseMeshForOne) {
  sp::set_mesh(mesh);
  std::string seen_by_other;
  {
    auto scope = sp::use_mesh(mesh2);
    std::thread([&] { seen_by_other = sp::get_mesh().str(); }).join();
    EXPECT_EQ(sp::get_mesh(), mesh2);
  }
  EXPECT_EQ(seen_by_other, mesh.str());
  EXPECT_EQ(shardings_of(sp::device_put(x, P("a"))), golden("device_put"));
  sp::set_mesh(sp::Mesh());
  EXPECT_EQ(sp::get_mesh().str(), golden("get_mesh_outside"));
  EXPECT_NE(spmd_test::error_message([&] { sp::device_put(x, P("a")); }), "(no error)");
}

TEST_F(ContextMeshTest, ExplicitModeTypesFollowSpecs) {
  using sp::None;
  auto scope = sp::use_mesh(emesh);
  sp::Array y = sp::device_put(x, P("a"));
  EXPECT_EQ(sp::typeof(y).str(), golden("explicit_device_put"));
  EXPECT_EQ(sp::typeof(sp::reshard(y, P(None, "b"))).str(), golden("explicit_reshard"));
  auto f = sp::jit([](const sp::Array& v) { return sp::reshard(v * 2.0f, P("b")); });
  sp::Array r = f(y);
  EXPECT_EQ(sp::typeof(r).str(), golden("explicit_jit_reshard"));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(r), x * 2.0f));
  auto matmul = [](const sp::Array& u, const sp::Array& w) { return sp::matmul(u, w); };
  sp::Array prod = sp::auto_axes(matmul, {}, P("a"))(sp::device_put(sq, P(None, "a")),
                                                     sp::device_put(sq, P("a", None)));
  EXPECT_EQ(sp::typeof(prod).str(), golden("auto_axes_spec"));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(prod), sp::matmul(sq, sq)));
}

TEST_F(ContextMeshTest, OutShardingArgumentsTakeSpecs) {
  using sp::None;
  auto scope = sp::use_mesh(emesh);
  const sp::Array cols = sp::device_put(sq, P(None, "a")), rows = sp::device_put(sq, P("a", None));
  sp::Array prod = sp::matmul(cols, rows, P("a"));
  EXPECT_EQ(sp::typeof(prod).str(), golden("matmul_out_sharding"));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(prod), sp::matmul(sq, sq)));
  sp::Array e = sp::einsum("ij,jk->ik", {cols, rows}, {.out_sharding = P(None, "b")});
  EXPECT_EQ(sp::typeof(e).str(), golden("einsum_out_sharding"));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(e), sp::matmul(sq, sq)));
  sp::Array r = sp::reshape(sp::device_put(x, P("a")), {4, 8}, P("a"));
  EXPECT_EQ(sp::typeof(r).str(), golden("reshape_out_sharding"));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(r), x.reshape({4, 8})));
}

TEST_F(ContextMeshTest, ExplicitAxesTakesTheMeshInContext) {
  auto scope = sp::use_mesh(mesh);
  auto sum0 = [](const sp::Array& v) { return sp::sum(v, {0}); };
  auto f = sp::jit([&](const sp::Array& u) { return sp::explicit_axes(sum0, {}, P("a", "b"))(u); });
  sp::Array summed = f(sp::device_put(sq, P("a", "b")));
  EXPECT_EQ(sp::typeof(summed).str(), golden("explicit_axes_spec"));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(summed), sp::sum(sq, {0})));
}

TEST_F(ContextMeshTest, ErrorsAreJaxs) {
  auto twice = [](const sp::Array& v) { return v * 2.0f; };
  EXPECT_EQ(
      spmd_test::error_message([&] { sp::jit(twice, {.out_shardings = P(sp::None, "b")})(x); }),
      jax_error("jit", "jit_out_without_mesh"));
  EXPECT_EQ(spmd_test::error_message([&] { sp::jit(twice, {.in_shardings = P("a")})(x); }),
            jax_error("jit", "jit_in_without_mesh"));
  EXPECT_EQ(spmd_test::error_message([&] { sp::matmul(sq, sq, P("a")); }),
            jax_error("matmul", "matmul_out_sharding_without_mesh"));
  {
    auto scope = sp::use_mesh(mesh);
    EXPECT_EQ(spmd_test::error_message([&] { sp::device_put(x, P("zz")); }),
              jax_error("device_put", "unknown_axis"));
    EXPECT_EQ(spmd_test::error_message([&] {
                sp::device_put(sp::ones({3, 4}), P("a"));
              }),
              jax_error("device_put", "indivisible"));
    EXPECT_EQ(spmd_test::error_message([&] { sp::reshard(x, P("b")); }),
              jax_error("reshard", "reshard_auto_axis"));
  }
  auto scope = sp::use_mesh(emesh);
  sp::Mesh other =
      sp::make_mesh({2, 4}, {"a", "b"}, {sp::AxisType::Explicit, sp::AxisType::Explicit});
  EXPECT_EQ(spmd_test::error_message([&] {
              sp::auto_axes(twice, {}, sp::NamedSharding(other, P("a")))(sp::device_put(x, P("a")));
            }),
            jax_error("auto_axes", "auto_axes_other_mesh"));
}

}  // namespace

// Typed primitive parameters print as the jaxpr shows them and compare and hash by content:
// meshes and specs built separately are equal, different ones differ; custom differentiation
// rules compare by identity. Programs compare structurally, so equal programs built separately
// share one cached Executable.
#include <gtest/gtest.h>
#include <spmd/spmd.h>

#include "compile/compiled.h"
#include "compile/fusion.h"
#include "core/array_impl.h"
#include "ir/primitive.h"
#include "ir/program.h"
#include "prims/collectives.h"
#include "sharding/param_traits.h"

#include <algorithm>
#include <memory>
#include <string>

namespace {

namespace sp = spmd;
using sp::P;

std::string text(const sp::ParamValue& v) {
  return std::get<sp::ObjectParam>(v).object->str();
}

void expect_same(const sp::ParamValue& a, const sp::ParamValue& b) {
  sp::Params pa{{"v", a}}, pb{{"v", b}};
  EXPECT_TRUE(pa == pb);
  EXPECT_EQ(pa.hash(), pb.hash());
}

void expect_different(const sp::ParamValue& a, const sp::ParamValue& b) {
  sp::Params pa{{"v", a}}, pb{{"v", b}};
  EXPECT_FALSE(pa == pb);
  EXPECT_NE(pa.hash(), pb.hash());
}

TEST(TypedParams, MeshesBuiltSeparatelyAreEqual) {
  auto mesh = [](std::vector<std::string> names) {
    return sp::object_param(sp::Mesh(sp::create_device_mesh({2, 2}), std::move(names)));
  };
  expect_same(mesh({"x", "y"}), mesh({"x", "y"}));
  expect_different(mesh({"x", "y"}), mesh({"y", "x"}));
  EXPECT_EQ(text(mesh({"x", "y"})), "Mesh('x': 2, 'y': 2, axis_types=(Auto, Auto))");
}

TEST(TypedParams, ShardingsMadeApartAreEqualWhenTheyPlaceAlike) {
  using ShardingPtr = std::shared_ptr<const sp::Sharding>;
  sp::DeviceMesh devices = sp::create_device_mesh({2, 2});
  auto sharding = [&](sp::PartitionSpec spec, bool reversed = false) {
    sp::DeviceMesh d = devices;
    if (reversed) std::reverse(d.devices.begin(), d.devices.end());
    return sp::object_param(
        ShardingPtr(std::make_shared<sp::NamedSharding>(sp::Mesh(d, {"x", "y"}), std::move(spec))));
  };
  expect_same(sharding(P("x")), sharding(P("x")));
  expect_different(sharding(P("x")), sharding(P("y")));
  // The same text on devices in another order puts blocks elsewhere.
  expect_different(sharding(P("x")), sharding(P("x"), /*reversed=*/true));
}

TEST(TypedParams, PartitionSpecListsCompareByContent) {
  auto specs = [](std::vector<sp::PartitionSpec> s) { return sp::object_param(std::move(s)); };
  expect_same(specs({P("x"), P()}), specs({P("x"), P()}));
  expect_different(specs({P("x"), P()}), specs({P("y"), P()}));
  expect_different(specs({P("x")}), specs({P("x"), P()}));
  EXPECT_EQ(text(specs({P("x"), P()})), "(P('x',), P())");
  EXPECT_EQ(text(specs({P(sp::axes("x", "y"))})), "(P(('x', 'y'),),)");
}

TEST(TypedParams, CollectiveParamsCompareByContent) {
  namespace c = sp::collectives;
  expect_same(c::groups_param(sp::AxisIndexGroups{{0, 1}, {2, 3}}),
              c::groups_param(sp::AxisIndexGroups{{0, 1}, {2, 3}}));
  expect_different(c::groups_param(sp::AxisIndexGroups{{0, 1}, {2, 3}}),
                   c::groups_param(sp::AxisIndexGroups{{0, 2}, {1, 3}}));
  EXPECT_EQ(text(c::groups_param(sp::AxisIndexGroups{{0, 1}, {2}})), "((0, 1), (2,))");

  expect_same(c::perm_param({{0, 1}, {1, 0}}), c::perm_param({{0, 1}, {1, 0}}));
  expect_different(c::perm_param({{0, 1}, {1, 0}}), c::perm_param({{1, 0}, {0, 1}}));
  EXPECT_EQ(text(c::perm_param({{0, 1}})), "((0, 1),)");

  std::vector<c::ReduceAxis> mixed{int64_t(0), std::string("j")};
  expect_same(c::axes_param(mixed), c::axes_param(mixed));
  expect_different(c::axes_param(mixed), c::axes_param({int64_t(1), std::string("j")}));
  EXPECT_EQ(text(c::axes_param(mixed)), "(0, 'j')");
  EXPECT_EQ(c::read_axes(sp::Params{{"axes", c::axes_param(mixed)}}), mixed);
}

sp::ProgramRef traced(const sp::ClosedJaxpr& jaxpr) {
  return std::make_shared<const sp::Program>(jaxpr.program());
}

auto sharded_sum(const sp::PartitionSpec& in) {
  sp::Mesh mesh(sp::create_device_mesh({4}), {"x"});
  return sp::shard_map([](sp::Array a) { return sp::lax::psum(a, "x"); }, mesh, {in}, P(),
                       {.check_vma = false, .name = "sharded_sum"});
}

TEST(TypedParams, ShardMapsOverEqualMeshesAndSpecsHaveEqualParams) {
  sp::Array a = sp::arange(8.0f);
  sp::ProgramRef one = traced(sp::make_jaxpr(sharded_sum(P("x")))(a));
  sp::ProgramRef two = traced(sp::make_jaxpr(sharded_sum(P("x")))(a));
  sp::ProgramRef other = traced(sp::make_jaxpr(sharded_sum(P()))(a));
  const sp::Params& p1 = one->equations.back().params;
  const sp::Params& p2 = two->equations.back().params;
  EXPECT_TRUE(p1 == p2);
  EXPECT_EQ(p1.hash(), p2.hash());
  EXPECT_EQ(text(p1.at("newly_manual_axes")), "frozenset({'x'})");
  EXPECT_TRUE(*one == *two);
  EXPECT_EQ(one->hash(), two->hash());
  EXPECT_FALSE(one->equations.back().params == other->equations.back().params);
  EXPECT_FALSE(*one == *other);
}

TEST(TypedParams, FusionPlansCompareByTheirBody) {
  auto f = [](sp::Array x) { return sp::exp(sp::sin(x) * 2.0) + 1.0; };
  auto g = [](sp::Array x) { return sp::exp(sp::cos(x) * 2.0) + 1.0; };
  sp::Array x = sp::arange(64.0f);
  auto fused = [&](auto fn) { return sp::fuse_elementwise(sp::make_jaxpr(fn)(x).program()); };
  sp::Program a = fused(f), b = fused(f), c = fused(g);
  ASSERT_EQ(a.equations.size(), 1u);
  ASSERT_EQ(a.equations[0].primitive->name, "fusion");
  EXPECT_TRUE(a.equations[0].params == b.equations[0].params);
  EXPECT_EQ(a.equations[0].params.hash(), b.equations[0].params.hash());
  EXPECT_FALSE(a.equations[0].params == c.equations[0].params);
}

// A rule holds user functions: only the same rule object is equal, as in JAX.
TEST(TypedParams, CustomJvpRulesCompareByIdentity) {
  auto f = sp::custom_jvp([](const sp::Array& x) { return sp::sin(x); },
                          [](std::tuple<sp::Array> p, std::tuple<sp::Array> t) {
                            auto [x] = p;
                            auto [dx] = t;
                            return std::make_pair(sp::sin(x), sp::cos(x) * dx);
                          });
  sp::Array x = sp::arange(4.0f);
  sp::ProgramRef one = traced(sp::make_jaxpr(f)(x));
  sp::ProgramRef two = traced(sp::make_jaxpr(f)(x));
  const sp::Params& p1 = one->equations.back().params;
  EXPECT_TRUE(p1 == sp::Params(p1));
  EXPECT_FALSE(p1 == two->equations.back().params);
  EXPECT_EQ(text(p1.at("jvp")), "<lambda>");
}

TEST(ProgramContent, EqualProgramsBuiltSeparatelyShareOneCompiled) {
  auto f = [](sp::Array x) { return sp::sin(x) * 3.0; };
  sp::Array x = sp::arange(4.0f);
  sp::ProgramRef one = traced(sp::make_jaxpr(f)(x));
  sp::ProgramRef two = traced(sp::make_jaxpr(f)(x));
  sp::ProgramRef other = traced(sp::make_jaxpr([](sp::Array y) { return sp::sin(y) * 4.0; })(x));
  ASSERT_NE(one.get(), two.get());
  EXPECT_TRUE(*one == *two);
  EXPECT_EQ(one->hash(), two->hash());
  EXPECT_FALSE(*one == *other);
  EXPECT_EQ(sp::compile_program(one), sp::compile_program(two));
  EXPECT_NE(sp::compile_program(one), sp::compile_program(other));
}

TEST(ProgramContent, ConstantsCompareByValue) {
  sp::Program p =
      sp::make_jaxpr([](sp::Array x) { return sp::sin(x); })(sp::arange(3.0f)).program();
  sp::Program q = p, r = p;
  int v = q.new_var(sp::aval_of(sp::arange(3.0f)));
  q.constvars.push_back(v);
  q.consts.push_back(sp::arange(3.0f));
  r.new_var(sp::aval_of(sp::arange(3.0f)));
  r.constvars.push_back(v);
  r.consts.push_back(sp::arange(3.0f));
  EXPECT_TRUE(q == r);
  r.consts.back() = sp::arange(3.0f) + 1.0;
  EXPECT_FALSE(q == r);
}

}  // namespace

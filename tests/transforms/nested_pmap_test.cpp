// Nested pmap runs one instance per device: instance (r, c) of pmap(pmap(f, cols), rows) on
// device r·C + c, with the values of the same nesting of vmaps (how JAX's goldens are recorded).
#include <spmd/device.h>
#include <spmd/parallel.h>
#include <spmd/placement.h>
#include <spmd/shard_map.h>
#include <spmd/spmd.h>

#include "support/processes.h"
#include "support/support.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

namespace sp = spmd;
using sp::P;
using spmd_test::arrays_close;
using spmd_test::arrays_equal;
using spmd_test::first_ids_here;
using spmd_test::shard_ids;

namespace {

sp::Array data(const sp::Shape& shape, unsigned seed) {
  return sp::random::normal(sp::random::key(int(seed)), shape);
}

// Every shard of `y` on its own device, device k holding the block of instance k (under
// mpirun, those of this process's devices).
void expect_one_instance_per_device(const sp::Array& y, int instances) {
  EXPECT_EQ(shard_ids(y), first_ids_here(instances));
  for (const sp::Shard& s : y.addressable_shards()) EXPECT_EQ(s.replica_id, 0) << s.device.id;
}

TEST(NestedPmap, DirectNestingPlacesInstanceRowColOnDeviceRowTimesColsPlusCol) {
  sp::Array x = data({4, 2, 3}, 1);
  auto f = [](sp::Array v) { return sp::sin(v) * 2.0f; };
  sp::Array y = sp::pmap(sp::pmap(f, {.axis_name = "cols"}), {.axis_name = "rows"})(x);
  EXPECT_TRUE(arrays_close(y, sp::sin(x) * 2.0f, 1e-6, 1e-6));
  EXPECT_EQ(shard_ids(y), first_ids_here(8));
  for (const sp::Shard& s : y.addressable_shards()) {
    const int r = s.device.id / 2, c = s.device.id % 2;
    EXPECT_EQ(s.index[0], (sp::Slice{r, r + 1}));
    EXPECT_EQ(s.index[1], (sp::Slice{c, c + 1}));
    EXPECT_EQ(s.data.shape(), (sp::Shape{1, 1, 3}));
    EXPECT_TRUE(arrays_close(s.data, sp::sin(x[r][c]).reshape({1, 1, 3}) * 2.0f, 1e-6, 1e-6));
  }
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"rows", "cols"});
  EXPECT_TRUE(y.sharding()->equals(sp::NamedSharding(mesh, P("rows", "cols"))))
      << y.sharding()->repr();
  // The result behaves like any array.
  EXPECT_TRUE(arrays_close(y / 2, sp::sin(x), 1e-6, 1e-6));
  EXPECT_EQ(y.to_vector<float>().size(), 24u);
  EXPECT_NE(sp::str(y).find("["), std::string::npos);
}

TEST(NestedPmap, DirectNestingMovesOnlyTheInputShards) {
  sp::Array x = sp::arange(48.0f).reshape({2, 4, 6});
  x.block_until_ready();
  auto f = sp::pmap(
      sp::pmap([](sp::Array v) { return v * 3.0f + sp::psum(v, "j"); }, {.axis_name = "j"}),
      {.axis_name = "i"});
  sp::runtime::reset_transfer_stats();
  sp::Array y = f(x);
  y.block_until_ready();
  sp::runtime::TransferStats stats = sp::runtime::transfer_stats();
  // One block per device (under mpirun, per device of this process).
  const int here = int(first_ids_here(8).size());
  EXPECT_EQ(stats.host_to_device_bytes, x.nbytes() / 8 * here);
  EXPECT_EQ(stats.transfers, here);
  EXPECT_EQ(stats.device_to_device_bytes, 0);
  EXPECT_EQ(stats.device_to_host_bytes, 0);
  EXPECT_TRUE(arrays_equal(y, x * 3.0f + sp::sum(x, {1}, true)));
}

TEST(NestedPmap, UnnamedLevelsAlsoRunOnePerDevice) {
  sp::Array x = data({2, 4, 5}, 2);
  sp::Array y = sp::pmap(sp::pmap([](sp::Array v) { return sp::exp(v); }))(x);
  EXPECT_TRUE(arrays_close(y, sp::exp(x), 1e-6, 1e-6));
  expect_one_instance_per_device(y, 8);
}

// The Pmap Cookbook's normalisations over rows, cols and both.
TEST(NestedPmap, CollectivesOverEachAxisAndBothMatchNestedVmap) {
  auto body = [](sp::Array v) {
    return std::make_tuple(v / sp::psum(v, "rows"), v / sp::psum(v, "cols"),
                           v / sp::psum(v, sp::axes("rows", "cols")),
                           sp::all_gather(v, "cols") + sp::axis_index(sp::axes("rows", "cols")),
                           sp::ppermute(v, "rows", {{0, 1}, {1, 2}, {2, 3}, {3, 0}}));
  };
  sp::Array x = (sp::arange(24.0f) + 1.0f).reshape({4, 2, 3});
  auto got = sp::pmap(sp::pmap(body, {.axis_name = "cols"}), {.axis_name = "rows"})(x);
  auto want = sp::vmap(sp::vmap(body, {.axis_name = "cols"}), {.axis_name = "rows"})(x);
  EXPECT_TRUE(arrays_close(std::get<0>(got), std::get<0>(want), 1e-6, 1e-6));
  EXPECT_TRUE(arrays_close(std::get<1>(got), std::get<1>(want), 1e-6, 1e-6));
  EXPECT_TRUE(arrays_close(std::get<2>(got), std::get<2>(want), 1e-6, 1e-6));
  EXPECT_TRUE(arrays_equal(std::get<3>(got), std::get<3>(want)));
  EXPECT_TRUE(arrays_equal(std::get<4>(got), std::get<4>(want)));
  expect_one_instance_per_device(std::get<0>(got), 8);
  expect_one_instance_per_device(std::get<3>(got), 8);
  // Each instance's sum over both axes sees all 24 values.
  EXPECT_TRUE(arrays_close(sp::sum(std::get<2>(got), {0, 1}), sp::ones({3}), 1e-6, 1e-6));
}

TEST(NestedPmap, WorkBeforeAndAfterTheInnerPmapRunsOnEveryDevice) {
  auto inner = [](sp::Array v) { return v / sp::psum(v, "cols") + sp::pmax(v, "rows"); };
  auto outer_body = [&](sp::Array row) {
    sp::Array doubled = row * 2.0f;
    sp::Array mapped = sp::pmap(inner, {.axis_name = "cols"})(doubled);
    return mapped + sp::psum(row, "rows") + 1.0f;
  };
  auto vmapped_body = [&](sp::Array row) {
    sp::Array mapped = sp::vmap(inner, {.axis_name = "cols"})(row * 2.0f);
    return mapped + sp::psum(row, "rows") + 1.0f;
  };
  sp::Array x = (sp::arange(16.0f) + 1.0f).reshape({2, 4, 2});
  sp::Array got = sp::pmap(outer_body, {.axis_name = "rows"})(x);
  sp::Array want = sp::vmap(vmapped_body, {.axis_name = "rows"})(x);
  EXPECT_TRUE(arrays_close(got, want, 1e-6, 1e-6));
  // The outer instance's value is held by all of its inner devices.
  EXPECT_EQ(shard_ids(got), first_ids_here(8));
}

TEST(NestedPmap, InnerInAxesNoneAndOutAxesMatchNestedVmap) {
  auto body = [](sp::Array v, sp::Array w) { return sp::psum(v, "cols") * w + v; };
  sp::Array x = data({2, 3, 4}, 3);  // rows along dim 0, cols along dim 2 (dim 1 of a row)
  sp::Array w = data({2, 3}, 4);
  sp::PmapOptions inner{.axis_name = "cols", .in_axes = {1, sp::None}, .out_axes = {1}};
  sp::Array got = sp::pmap(sp::pmap(body, inner), {.axis_name = "rows"})(x, w);
  sp::Array want =
      sp::vmap(sp::vmap(body, {.in_axes = {1, sp::None}, .out_axes = {1}, .axis_name = "cols"}),
               {.axis_name = "rows"})(x, w);
  EXPECT_TRUE(arrays_close(got, want, 1e-5, 1e-5));
  EXPECT_EQ(shard_ids(got), first_ids_here(8));
  // Direct nesting: the result's cols dim is split too (a [1, 3, 1] block per device).
  if (auto one = spmd_test::shard_on(got, 1)) {
    EXPECT_EQ(one->data.shape(), (sp::Shape{1, 3, 1}));
    EXPECT_EQ(one->index[2], (sp::Slice{1, 2}));
  }
}

// An inner pmap whose body reads the outer instance's whole argument is not one block per device.
TEST(NestedPmap, InnerBodyClosingOverTheOuterArgumentSeesTheWholeRow) {
  auto make = [](auto map) {
    return [map](sp::Array row) {
      return map([&](sp::Array v) { return v * sp::sum(row) + sp::psum(v, "cols"); })(row);
    };
  };
  auto pmap_inner = [](auto f) { return sp::pmap(f, {.axis_name = "cols"}); };
  auto vmap_inner = [](auto f) { return sp::vmap(f, {.axis_name = "cols"}); };
  sp::Array x = data({4, 2}, 8);
  sp::Array got = sp::pmap(make(pmap_inner), {.axis_name = "rows"})(x);
  sp::Array want = sp::vmap(make(vmap_inner), {.axis_name = "rows"})(x);
  EXPECT_TRUE(arrays_close(got, want, 1e-5, 1e-5));
  EXPECT_TRUE(arrays_close(got, x * sp::sum(x, {1}, true) + sp::sum(x, {1}, true), 1e-5, 1e-5));
  EXPECT_EQ(shard_ids(got), first_ids_here(8));
}

TEST(NestedPmap, InnerPmapCalledTwiceInTheBody) {
  auto inner = [](sp::Array v) { return sp::psum(v, "cols") - v; };
  auto outer_body = [&](sp::Array row) {
    auto p = sp::pmap(inner, {.axis_name = "cols"});
    return p(p(row));
  };
  sp::Array x = data({2, 4}, 5);
  sp::Array got = sp::pmap(outer_body, {.axis_name = "rows"})(x);
  sp::Array want = sp::vmap(
      [&](sp::Array row) {
        auto v = sp::vmap(inner, {.axis_name = "cols"});
        return v(v(row));
      },
      {.axis_name = "rows"})(x);
  EXPECT_TRUE(arrays_close(got, want, 1e-5, 1e-5));
  EXPECT_EQ(shard_ids(got), first_ids_here(8));
}

TEST(NestedPmap, GradOfNestedPmapMatchesNestedVmap) {
  auto body = [](sp::Array v) {
    return sp::sin(v) * sp::psum(v * v, "cols") / sp::psum(v, "rows");
  };
  auto pmapped = sp::pmap(sp::pmap(body, {.axis_name = "cols"}), {.axis_name = "rows"});
  auto vmapped = sp::vmap(sp::vmap(body, {.axis_name = "cols"}), {.axis_name = "rows"});
  sp::Array x = (sp::arange(8.0f) + 1.0f).reshape({4, 2}) / 4.0f;
  sp::Array got = sp::grad([&](sp::Array a) { return sp::sum(pmapped(a)); })(x);
  sp::Array want = sp::grad([&](sp::Array a) { return sp::sum(vmapped(a)); })(x);
  EXPECT_TRUE(arrays_close(got, want, 1e-5, 1e-5));
}

// As the Cookbook's cell: grad inside the outer body through an inner pmap that closes over the
// outer instance's values, and a gradient with respect to such a closed-over value (the
// instances' contributions are summed).
TEST(NestedPmap, GradInsideTheOuterBodyMatchesNestedVmap) {
  auto make = [](auto map) {
    return [map](sp::Array x) {
      sp::Array y = sp::sin(x);
      auto g = map([&](sp::Array z) { return sp::cos(z) * sp::tan(y.sum()) * sp::tanh(x).sum(); });
      sp::Array dz = sp::grad([&](sp::Array w) { return sp::sum(g(w)); })(x);
      sp::Array ds = sp::grad([&](sp::Array s) {
        return sp::sum(map([&](sp::Array z) { return z * s + sp::psum(z * s, "cols"); })(x));
      })(sp::Array(1.5f));
      return std::make_pair(dz, ds);
    };
  };
  auto pmap_inner = [](auto f) { return sp::pmap(f, {.axis_name = "cols"}); };
  auto vmap_inner = [](auto f) { return sp::vmap(f, {.axis_name = "cols"}); };
  sp::Array x = sp::arange(8.0f).reshape({4, 2});
  auto got = sp::pmap(make(pmap_inner), {.axis_name = "rows"})(x);
  auto want = sp::vmap(make(vmap_inner), {.axis_name = "rows"})(x);
  EXPECT_TRUE(arrays_close(got.first, want.first, 1e-5, 1e-5));
  EXPECT_TRUE(arrays_close(got.second, want.second, 1e-5, 1e-5));
  EXPECT_EQ(shard_ids(got.first), first_ids_here(8));
}

TEST(NestedPmap, ThreeLevelsRunOneInstancePerDevice) {
  auto body = [](sp::Array v) {
    return std::make_tuple(sp::psum(v, "a") + sp::psum(v, "b") * 10.0f + sp::psum(v, "c") * 100.0f,
                           sp::psum(v, sp::axes("a", "b", "c")),
                           sp::axis_index(sp::axes("a", "b", "c")));
  };
  sp::Array x = data({2, 2, 2, 3}, 6);
  auto got = sp::pmap(sp::pmap(sp::pmap(body, {.axis_name = "c"}), {.axis_name = "b"}),
                      {.axis_name = "a"})(x);
  auto want = sp::vmap(sp::vmap(sp::vmap(body, {.axis_name = "c"}), {.axis_name = "b"}),
                       {.axis_name = "a"})(x);
  EXPECT_TRUE(arrays_close(std::get<0>(got), std::get<0>(want), 1e-5, 1e-5));
  EXPECT_TRUE(arrays_close(std::get<1>(got), std::get<1>(want), 1e-5, 1e-5));
  EXPECT_TRUE(arrays_equal(std::get<2>(got), std::get<2>(want)));
  expect_one_instance_per_device(std::get<0>(got), 8);
  if (auto five = spmd_test::shard_on(std::get<0>(got), 5)) {
    EXPECT_EQ(five->index[1], (sp::Slice{0, 1}));
    EXPECT_EQ(five->index[2], (sp::Slice{1, 2}));
  }
}

TEST(NestedPmap, ThreeLevelsWithWorkBetweenThem) {
  auto innermost = [](sp::Array v) { return v * sp::psum(v, "c") + sp::psum(v, "a"); };
  auto middle = [&](auto map) {
    return [&, map](sp::Array v) { return map(innermost)(v + sp::psum(v, "b")) * 2.0f; };
  };
  auto pm = [](const char* name) {
    return [name](auto f) { return sp::pmap(f, {.axis_name = name}); };
  };
  auto vm = [](const char* name) {
    return [name](auto f) { return sp::vmap(f, {.axis_name = name}); };
  };
  sp::Array x = data({2, 2, 2}, 7);
  sp::Array got = pm("a")(pm("b")(middle(pm("c"))))(x);
  sp::Array want = vm("a")(vm("b")(middle(vm("c"))))(x);
  EXPECT_TRUE(arrays_close(got, want, 1e-5, 1e-5));
  EXPECT_EQ(shard_ids(got), first_ids_here(8));
}

// The printed program stays the one JAX's make_jaxpr would give a single pmap over the outer axis
// (the inner pmap batched); the spread layout is how it runs, not what it prints.
TEST(NestedPmap, JaxprShowsTheOuterMeshOnly) {
  auto f =
      sp::pmap(sp::pmap([](sp::Array v) { return v / sp::psum(v, "cols"); }, {.axis_name = "cols"}),
               {.axis_name = "rows"});
  std::string text = sp::make_jaxpr(f)(sp::ones({4, 2})).str();
  EXPECT_NE(text.find("mesh=Mesh('rows': 4, axis_types=(Auto,))"), std::string::npos) << text;
  EXPECT_EQ(text.find("'cols': 2"), std::string::npos) << text;
  EXPECT_NE(text.find("psum[axes=(0,) axis_index_groups=None]"), std::string::npos) << text;
}

TEST(NestedPmap, MoreInstancesThanDevicesRaises) {
  auto f =
      sp::pmap(sp::pmap([](sp::Array v) { return v + 1; }, {.axis_name = "j"}), {.axis_name = "i"});
  try {
    f(sp::zeros({4, 4}));
    FAIL() << "expected ValueError";
  } catch (const sp::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("requires 16 logical devices, but only 8"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace

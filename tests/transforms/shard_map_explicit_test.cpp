// shard_map's checks of its specs on an Explicit mesh, against JAX 0.10.2
// (tools/goldens/gen_shard_map_explicit.py): on a mesh whose axes are all Explicit each
// argument's type must have its in_spec; under vmap of an argument whose batch dim is split over
// an Explicit axis, that axis is not manual (the specs may not name it) and the types are
// compared without it; a mesh with an Auto axis compares nothing. Error texts word for word,
// results' values and types.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "support/golden.h"

#include <functional>
#include <map>
#include <string>

namespace {

namespace sp = spmd;
using sp::Array;
using sp::P;

const std::string kCases = "shard_map_explicit/cases.txt";

class ShardMapExplicit : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sp::device_count() < 8) GTEST_SKIP() << "needs 8 CPU devices";
  }

  // Runs `f` and compares what it gives (its type and values, or its error) with JAX's case.
  static void expect_case(const std::string& name, const std::function<Array()>& f) {
    const std::string want = spmd_test::golden_blocks(kCases).at(name);
    if (want.rfind("OK ", 0) != 0) {
      EXPECT_EQ(spmd_test::error_message<sp::ValueError>(f),
                "[shard_map] " + spmd_test::jax_error(kCases, name))
          << name;
      return;
    }
    Array r = f();
    EXPECT_EQ("OK " + sp::typeof(r).str(), want) << name;
    EXPECT_TRUE(spmd_test::arrays_equal(
        sp::device_get(r), spmd_test::load_golden("shard_map_explicit/values.npz").at(name)))
        << name;
  }

  sp::Mesh explicit_ =
      sp::make_mesh({4, 2}, {"a", "b"}, {sp::AxisType::Explicit, sp::AxisType::Explicit});
  sp::Mesh mixed_ = sp::make_mesh({4, 2}, {"a", "b"}, {sp::AxisType::Explicit, sp::AxisType::Auto});
  Array v_ = sp::arange(64.0f).reshape({8, 8});

  Array put(const sp::Mesh& mesh, const P& spec) const {
    return sp::device_put(v_, sp::NamedSharding(mesh, spec));
  }
  std::function<Array(Array)> twice(const sp::Mesh& mesh, const P& in, const P& out) const {
    return sp::shard_map([](Array t) { return t * 2.0f; }, mesh, in, out);
  }
  std::function<Array(Array, Array)> added(const sp::SpecTree& in, const P& out) const {
    return sp::shard_map([](Array s, Array t) { return s + t; }, explicit_, in, out);
  }
};

TEST_F(ShardMapExplicit, EachArgumentsTypeMustHaveItsInSpec) {
  const sp::Mesh& e = explicit_;
  expect_case("typed_ab_spec_a", [&] { return twice(e, P("a"), P("a"))(put(e, P("a", "b"))); });
  expect_case("typed_ab_spec_ab",
              [&] { return twice(e, P("a", "b"), P("a", "b"))(put(e, P("a", "b"))); });
  expect_case("typed_a_spec_a", [&] { return twice(e, P("a"), P("a"))(put(e, P("a"))); });
  expect_case("replicated_spec_a", [&] { return twice(e, P("a"), P("a"))(put(e, P())); });
  expect_case("untyped_spec_a", [&] { return twice(e, P("a"), P("a"))(v_); });
  expect_case("untyped_spec_none", [&] { return twice(e, P(), P())(v_); });
  expect_case("second_arg_differs", [&] {
    return added(sp::SpecTree{P("a"), P("a")}, P("a"))(put(e, P("a")), put(e, P(sp::None, "a")));
  });
}

TEST_F(ShardMapExplicit, AMeshWithAnAutoAxisComparesNothing) {
  expect_case("mixed_mesh_not_compared", [&] {
    return twice(mixed_, P(sp::None, "b"), P(sp::None, "b"))(put(mixed_, P("a")));
  });
}

TEST_F(ShardMapExplicit, UnderVmapTheVmappedAwayAxisIsNotManual) {
  const sp::Mesh& e = explicit_;
  // The result keeps the batch dim split over 'a' (float32[8@a,8@b]).
  expect_case("vmap_spec_b",
              [&] { return sp::vmap(twice(e, P("b"), P("b")))(put(e, P("a", "b"))); });
  expect_case("vmap_in_spec_vmapped_axis",
              [&] { return sp::vmap(twice(e, P("a"), P("a")))(put(e, P("a", "b"))); });
  expect_case("vmap_out_spec_vmapped_axis",
              [&] { return sp::vmap(twice(e, P(), P("a")))(put(e, P("a", "b"))); });
  expect_case("vmap_spec_unsplit",
              [&] { return sp::vmap(twice(e, P(sp::None), P(sp::None)))(put(e, P("a", "b"))); });
  sp::VmapOptions axis1{.in_axes = {1}};
  expect_case("vmap_axis1_spec_b",
              [&] { return sp::vmap(twice(e, P("b"), P("b")), axis1)(put(e, P(sp::None, "a"))); });
  expect_case("vmap_axis1_spec_vmapped_axis",
              [&] { return sp::vmap(twice(e, P("a"), P("a")), axis1)(put(e, P(sp::None, "a"))); });
  expect_case("vmap_tuple_specs_vmapped_axis", [&] {
    return sp::vmap(added(sp::SpecTree{P("b"), P("a")}, P("b")))(put(e, P("a", "b")),
                                                                 put(e, P("a")));
  });
}

}  // namespace

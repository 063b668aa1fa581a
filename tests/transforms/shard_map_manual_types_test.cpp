// The types of values inside shard_map bodies against JAX 0.10.2's
// (tools/goldens/gen_shard_map_manual_types.py): a value's type is on the shard_map's mesh with
// the axes the body is manual over typed Manual (an Explicit axis an enclosing vmap maps over
// keeps its type), printed as jax.typeof(v) and the repr of its sharding.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "core/array_impl.h"
#include "sharding/type_sharding.h"
#include "support/golden.h"

#include <string>
#include <vector>

namespace {

namespace sp = spmd;
using sp::Array;
using sp::P;

const std::string kCases = "shard_map_manual_types/cases.txt";

class ShardMapManualTypes : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sp::device_count() < 8) GTEST_SKIP() << "needs 8 CPU devices";
    seen_.clear();
  }

  // Records each value's type as the generator prints it: jax.typeof(v), then its sharding.
  void record(std::initializer_list<Array> xs) {
    for (const Array& x : xs) {
      const sp::AbstractValue& t = sp::aval_of(x);
      if (!seen_.empty()) seen_ += "\n";
      seen_ += sp::type_of(x).str() + "\n" +
               (t.sharding ? sp::ParamTraits<sp::TypeSharding>::str(*t.sharding) : "None");
    }
  }

  void expect_recorded(const std::string& name) {
    EXPECT_EQ(seen_, spmd_test::golden_blocks(kCases).at(name)) << name;
  }

  std::function<Array(Array, Array)> auto_body(bool check_vma) {
    return sp::shard_map(
        [this](Array u, Array w) {
          Array r = u * w;
          Array s = sp::sum(r);
          record({u, w, r, s});
          return r;
        },
        auto_, {P("a"), P()}, P("a"), {.check_vma = check_vma});
  }
  std::function<Array(Array)> explicit_body(const sp::Mesh& mesh, const P& in, const P& out) {
    return sp::shard_map(
        [this](Array u) {
          Array r = u * 2.0f;
          record({u, r});
          return r;
        },
        mesh, in, out);
  }

  sp::Mesh auto_ = sp::make_mesh({8}, {"a"}, {sp::AxisType::Auto});
  sp::Mesh explicit_ =
      sp::make_mesh({4, 2}, {"a", "b"}, {sp::AxisType::Explicit, sp::AxisType::Explicit});
  sp::Mesh mixed_ = sp::make_mesh({4, 2}, {"a", "b"}, {sp::AxisType::Explicit, sp::AxisType::Auto});
  Array v_ = sp::arange(64.0f).reshape({8, 8});
  std::string seen_;
};

TEST_F(ShardMapManualTypes, AnAutoMeshBecomesManual) {
  auto_body(true)(v_, v_[0]);
  expect_recorded("auto_body");
}

TEST_F(ShardMapManualTypes, WithoutVmaCheckTheTypesVaryOverNothing) {
  auto_body(false)(v_, v_[0]);
  expect_recorded("auto_body_no_vma");
}

TEST_F(ShardMapManualTypes, ExplicitAxesBecomeManualAndUnsplit) {
  const Array typed = sp::device_put(v_, sp::NamedSharding(explicit_, P("a", "b")));
  explicit_body(explicit_, P("a", "b"), P("a", "b"))(typed);
  expect_recorded("explicit_body");
}

TEST_F(ShardMapManualTypes, EveryAxisOfAMixedMeshBecomesManual) {
  const Array typed = sp::device_put(v_, sp::NamedSharding(mixed_, P("a")));
  explicit_body(mixed_, P(sp::None, "b"), P(sp::None, "b"))(typed);
  expect_recorded("mixed_body");
}

TEST_F(ShardMapManualTypes, AVmappedAwayExplicitAxisStaysExplicit) {
  const Array typed = sp::device_put(v_, sp::NamedSharding(explicit_, P("a", "b")));
  sp::vmap(explicit_body(explicit_, P("b"), P("b")))(typed);
  expect_recorded("vmap_body");
}

// A vmapped shard_map is manual over 'b' only and keeps the batch dim split over 'a', in its
// body's types and its result's, as JAX's (more cases in shard_map_partial_manual_test.cpp).
TEST_F(ShardMapManualTypes, AVmappedShardMapKeepsTheBatchSplitOverTheExplicitAxis) {
  const Array typed = sp::device_put(v_, sp::NamedSharding(explicit_, P("a", "b")));
  auto vmapped = sp::vmap(explicit_body(explicit_, P("b"), P("b")));
  EXPECT_EQ(sp::make_jaxpr(vmapped)(typed).str(),
            spmd_test::golden_blocks(kCases).at("vmap_jaxpr"));
  const Array want = sp::arange(64.0f).reshape({8, 8}) * 2.0f;
  const Array eager = vmapped(typed);
  EXPECT_EQ(sp::type_of(eager).str(), spmd_test::golden_blocks(kCases).at("vmap_result"));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(eager), sp::device_get(want)));
  const Array jitted = sp::jit(vmapped)(typed);
  EXPECT_EQ(sp::type_of(jitted).str(), spmd_test::golden_blocks(kCases).at("vmap_jit_result"));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(jitted), sp::device_get(want)));
  EXPECT_EQ(jitted.sharding()->repr(), sp::NamedSharding(explicit_, P("a", "b")).repr());
}

}  // namespace

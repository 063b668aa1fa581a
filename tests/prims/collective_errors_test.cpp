// Misused collectives inside shard_map: the messages, compared in full with JAX 0.10.2's text
// (tests/goldens/errors/api_errors.txt, written by tools/goldens/gen_errors.py) where JAX has one
// and with spmd's own where it has none.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "core/axis_env.h"
#include "prims/collectives.h"
#include "prims/primitive.h"
#include "support/golden.h"

namespace sp = spmd;
using sp::Array;
using sp::P;
using spmd_test::error_message;

namespace {

std::string api_error(const std::string& name) {
  return spmd_test::jax_error("errors/api_errors.txt", name);
}

sp::Mesh mesh4() {
  return sp::make_mesh({4}, {"x"});
}

// JAX asserts this in pbroadcast's batching rule (its shard_map cannot lower pbroadcast on CPU);
// spmd adds the range and the source it got.
TEST(CollectiveErrors, PbroadcastSourceOutsideTheAxis) {
  const std::string jax = api_error("pbroadcast_source_out_of_range");
  for (int source : {4, -1}) {
    auto f = sp::shard_map([source](const Array& b) { return sp::pbroadcast(b, "x", source); },
                           mesh4(), P("x"), P("x"));
    EXPECT_EQ(
        error_message<sp::ValueError>([&] { f(sp::ones({8})); }),
        "[pbroadcast] " + jax + " The source must be in [0, 4), got " + std::to_string(source));
  }
}

// JAX 0.10.2 removed lax.pvary (lax.pcast(to='varying') refuses earlier); the text is the pvary
// primitive's own check.
TEST(CollectiveErrors, PvaryOfAValueAlreadyVaryingAsJax) {
  auto f = sp::shard_map([](const Array& blk) { return sp::lax::pvary(blk, "x"); },
                         sp::Mesh(sp::create_device_mesh({4, 2}), {"x", "y"}), P("x"), P("x"));
  EXPECT_EQ(error_message<sp::ValueError>([&] { f(sp::zeros({8})); }),
            "[pvary] " + api_error("pvary_already_varying"));
}

// JAX raises NotImplementedError with an empty message here.
TEST(CollectiveErrors, PsumWithGroupsUnderCheckVma) {
  sp::AxisIndexGroups groups{{0, 1}, {2, 3}};
  auto sum_in_groups = [groups](const Array& b) {
    return sp::psum(b, "x", {.axis_index_groups = groups});
  };
  auto checked = sp::shard_map(sum_in_groups, mesh4(), P("x"), P("x"));
  EXPECT_EQ(error_message<sp::NotImplementedError>([&] { checked(sp::arange(4.0f)); }),
            "[psum] axis_index_groups are not supported inside shard_map with check_vma=true, got "
            "axis_index_groups=((0, 1), (2, 3)); pass check_vma=false to reduce within the groups");
  auto unchecked = sp::shard_map(sum_in_groups, mesh4(), P("x"), P("x"), {.check_vma = false});
  EXPECT_EQ(unchecked(sp::arange(4.0f)).to_vector<float>(), (std::vector<float>{1, 1, 5, 5}));
}

// Only a reduction that vmap has turned positional can get here (the public functions take
// names), so the primitive is checked directly, as JAX's is.
TEST(CollectiveErrors, GroupsWithPositionalAxesAsJax) {
  sp::AxisEnvScope env({{"x", 4, "shard_map"}});
  sp::AbstractValue x{sp::Shape{2, 4}, sp::float32, false};
  sp::Params params{
      {"axes", sp::collectives::axes_param({std::string("x"), int64_t{0}})},
      {"axis_index_groups", sp::collectives::groups_param(sp::AxisIndexGroups{{0, 1}, {2, 3}})}};
  EXPECT_EQ(error_message<sp::ValueError>([&] {
              sp::abstract_eval(sp::primitive("psum"), {&x, 1}, params);
            }),
            "[psum] " + api_error("psum_groups_positional_axes"));
}

// JAX 0.10.2 has no message: eager shard_map raises IndexError "list index out of range", vmap
// asserts "Permutation doesn't match the axis size!", and jit takes indices modulo the size.
TEST(CollectiveErrors, PpermuteIndexOutsideTheAxis) {
  for (auto [pair, bad] : {std::pair{std::pair{0, 4}, 4}, std::pair{std::pair{-5, 0}, -5}}) {
    auto f = sp::shard_map(
        [pair](const Array& b) {
          return sp::ppermute(b, "x", {pair, {1, 2}});
        },
        mesh4(), P("x"), P("x"));
    EXPECT_EQ(
        error_message<sp::ValueError>([&] { f(sp::ones({8})); }),
        "[ppermute] perm index " + std::to_string(bad) + " is out of range for an axis of size 4");
  }
}

}  // namespace

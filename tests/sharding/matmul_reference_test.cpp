// Seed 001's matmul_reference: a jit'd dot of sharded operands constrained to P('x', None) gives
// JAX's values, sharding and picture (tests/goldens/seeds, tools/goldens/gen_seeds.py).
#include <spmd/spmd.h>

#include "support/golden.h"

#include <gtest/gtest.h>

namespace sp = spmd;
using sp::P;

namespace {

TEST(MatmulReference, PartitionedDotWithAConstraintIsJaxs) {
  sp::Mesh mesh(sp::create_device_mesh({4, 2}), {"x", "y"});
  sp::Array a =
      sp::device_put(sp::arange(8 * 16.0f).reshape({8, 16}), sp::NamedSharding(mesh, P("x", "y")));
  sp::Array b =
      sp::device_put(sp::arange(16 * 4.0f).reshape({16, 4}), sp::NamedSharding(mesh, P("y")));
  auto matmul_reference = sp::jit([&](const sp::Array& a, const sp::Array& b) {
    return sp::with_sharding_constraint(sp::dot(a, b), sp::NamedSharding(mesh, P("x", sp::None)));
  });
  sp::Array c_ref = matmul_reference(a, b);
  EXPECT_TRUE(spmd_test::arrays_equal(
      c_ref, spmd_test::load_golden("seeds/001_values.npz").at("07_matmul_reference")));
  EXPECT_EQ(c_ref.sharding()->repr() + "\n" + sp::sharding_to_string(c_ref),
            spmd_test::golden_text("seeds/extra_matmul_reference_sharding.txt") + "\n");
}

}  // namespace

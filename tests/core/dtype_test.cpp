// JAX's type promotion table, weak types and dtype facts.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

namespace sp = spmd;

TEST(DType, PromotionMatchesJaxLattice) {
  EXPECT_EQ(sp::promote_types(sp::int32, sp::float32), sp::float32);
  EXPECT_EQ(sp::promote_types(sp::uint8, sp::int8), sp::int16);
  EXPECT_EQ(sp::promote_types(sp::bfloat16, sp::float16), sp::float32);
  EXPECT_EQ(sp::promote_types(sp::bool_, sp::uint8), sp::uint8);
  EXPECT_EQ(sp::promote_types(sp::bool_, sp::bool_), sp::bool_);
  // Without x64, 64-bit results canonicalise to 32-bit ones.
  EXPECT_EQ(sp::promote_types(sp::uint32, sp::int32), sp::int32);
  EXPECT_EQ(sp::promote_types(sp::int64, sp::bfloat16), sp::bfloat16);
}

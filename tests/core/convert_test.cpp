// dtype conversion (astype / convert_element_type) against JAX: 16-bit float rounding, float →
// int saturation, NaN → 0, integer wrap-around, bool.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "support/golden.h"

#include <cmath>

namespace sp = spmd;

TEST(Convert, EveryDtypePairMatchesJax) {
  sp::config::enable_x64(true);
  const auto& arrays = spmd_test::load_golden("convert.npz");
  int checked = 0;
  for (const auto& [name, x] : arrays) {
    if (!name.ends_with("|x")) continue;
    std::string key = name.substr(0, name.size() - 2);
    const sp::Array& expected = arrays.at(key + "|out");
    SCOPED_TRACE(key);
    EXPECT_TRUE(spmd_test::arrays_equal(x.astype(expected.dtype()), expected));
    ++checked;
  }
  sp::config::enable_x64(false);
  EXPECT_GT(checked, 80);
}

TEST(Convert, HalfTypesRoundTripEveryBitPattern) {
  for (uint32_t b = 0; b < 65536; ++b) {
    auto h = sp::float16_t::from_bits(uint16_t(b));
    float f = float(h);
    if (std::isnan(f)) continue;
    EXPECT_EQ(sp::float16_t(f).bits, b);
    auto g = sp::bfloat16_t::from_bits(uint16_t(b));
    float fb = float(g);
    if (std::isnan(fb)) continue;
    EXPECT_EQ(sp::bfloat16_t(fb).bits, b);
  }
}

#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "support/golden.h"

#include <string>

namespace {

namespace sp = spmd;
using sp::Array;
using sp::P;
using sp::lax::PadConfig;

// Every small interior pad of every small length over 2, 4 and 8 devices agrees with the pad of
// the whole array, exactly.
TEST(HaloSweep, InteriorPadsAgreeWithTheWholeArray) {
  for (int devices : {2, 4, 8}) {
    const sp::Mesh mesh = sp::make_mesh({devices}, {"x"});
    const sp::NamedSharding over_x(mesh, P("x"));
    for (int64_t n = 1; n <= 9; ++n)
      for (int64_t interior = 0; interior <= 3; ++interior)
        for (int64_t low = -2; low <= 3; ++low)
          for (int64_t high = -2; high <= 3; ++high) {
            const int64_t m = low + high + n + (n - 1) * interior;
            if (m <= 0) continue;
            const PadConfig c{low, high, interior};
            const Array x = sp::arange(float(n)) + 1;
            const auto f = sp::jit([&](const Array& u) {
              return sp::lax::pad(sp::with_sharding_constraint(u * 2, over_x), Array(-1.0f), {c}) +
                     1;
            });
            const std::string at = std::to_string(devices) + " devices, n " + std::to_string(n) +
                                   ", pad (" + std::to_string(low) + ", " + std::to_string(high) +
                                   ", " + std::to_string(interior) + ")";
            try {
              EXPECT_TRUE(
                  spmd_test::arrays_close(f(x), sp::lax::pad(x * 2, Array(-1.0f), {c}) + 1, 0, 0))
                  << at;
            } catch (const std::exception& e) {
              ADD_FAILURE() << at << ": " << e.what();
            }
          }
  }
}

// Every concatenation of two or three small arrays split over 2, 4 and 8 devices, and every
// reversal of a small unevenly split array, agree with the whole array's, exactly.
TEST(HaloSweep, ConcatenationsAndReversalsAgreeWithTheWholeArray) {
  for (int devices : {2, 4, 8}) {
    const sp::Mesh mesh = sp::make_mesh({devices}, {"x"});
    const sp::NamedSharding over_x(mesh, P("x"));
    auto split = [&](const Array& u) { return sp::with_sharding_constraint(u * 2, over_x); };
    for (int64_t n = 1; n <= 9; ++n) {
      const Array x = sp::arange(float(n)) + 1;
      const auto rev = sp::jit([&](const Array& u) { return sp::lax::rev(split(u), {0}) + 1; });
      EXPECT_TRUE(spmd_test::arrays_close(rev(x), sp::lax::rev(x * 2, {0}) + 1, 0, 0))
          << devices << " devices, rev of " << n;
      for (int64_t m = 1; m <= 9; ++m) {
        const Array y = sp::arange(float(m)) * -3;
        const auto two = sp::jit([&](const Array& u, const Array& v) {
          return sp::concatenate({split(u), split(v)}) + 1;
        });
        EXPECT_TRUE(spmd_test::arrays_close(two(x, y), sp::concatenate({x * 2, y * 2}) + 1, 0, 0))
            << devices << " devices, concatenate " << n << " and " << m;
        const auto three = sp::jit([&](const Array& u, const Array& v) {
          return sp::concatenate({split(v), split(u), split(v)}) + 1;
        });
        EXPECT_TRUE(
            spmd_test::arrays_close(three(x, y), sp::concatenate({y * 2, x * 2, y * 2}) + 1, 0, 0))
            << devices << " devices, concatenate " << m << ", " << n << " and " << m;
      }
    }
  }
}

}  // namespace

// The golden-file support every JAX comparison relies on (tests/support/golden.h): ulp
// distances per dtype, the three array comparisons and their failure messages, and the
// cached golden loader. (It lives here because tests/support/*.cpp is built into the support
// library, not the test binary.)
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "support/golden.h"

#include <cmath>
#include <limits>

namespace sp = spmd;
using sp::Array;
using sp::DType;
using spmd_test::ulp_distance;

namespace {

constexpr int64_t kFar = std::numeric_limits<int64_t>::max();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

template <class T>
Array raw(DType t, const std::vector<T>& values, const sp::Shape& shape) {
  return sp::array_from_bytes(values.data(), t, shape);
}
template <class T>
Array raw(DType t, const std::vector<T>& values) {
  return raw(t, values, sp::Shape{int64_t(values.size())});
}

std::string message(const ::testing::AssertionResult& r) {
  return r.message();
}

}  // namespace

TEST(GoldenUlpDistance, CountsRepresentableValuesInEachFloatType) {
  EXPECT_EQ(ulp_distance(1.0, std::nextafter(1.0f, 2.0f), sp::float32), 1);
  EXPECT_EQ(ulp_distance(1.0, std::nextafter(1.0, 2.0), sp::float64), 1);
  EXPECT_EQ(ulp_distance(1.0, std::nextafter(1.0, 2.0), sp::float32), 0);  // rounds to 1.0f
  EXPECT_EQ(ulp_distance(1.0, 1.0 + 1.0 / 128, sp::bfloat16), 1);
  EXPECT_EQ(ulp_distance(1.0, 1.0 + 1.0 / 1024, sp::float16), 1);
  EXPECT_EQ(ulp_distance(1.0, 2.0, sp::float16), 1024);
  EXPECT_EQ(ulp_distance(-1.0, 1.0, sp::bfloat16), 2 * 0x3f80);
}

TEST(GoldenUlpDistance, SignedZerosAreEqualAndDistancesCrossZero) {
  EXPECT_EQ(ulp_distance(0.0, -0.0, sp::float32), 0);
  double tiny = std::numeric_limits<float>::denorm_min();
  EXPECT_EQ(ulp_distance(tiny, -tiny, sp::float32), 2);
  EXPECT_EQ(ulp_distance(5e-324, -5e-324, sp::float64), 2);
}

TEST(GoldenUlpDistance, NaNMatchesOnlyNaNAndInfinitiesOnlyThemselves) {
  EXPECT_EQ(ulp_distance(kNaN, kNaN, sp::float32), 0);
  EXPECT_EQ(ulp_distance(kNaN, 1.0, sp::float32), kFar);
  EXPECT_EQ(ulp_distance(kInf, kInf, sp::float16), 0);
  EXPECT_EQ(ulp_distance(kInf, std::numeric_limits<float>::max(), sp::float32), kFar);
  EXPECT_EQ(ulp_distance(kInf, -kInf, sp::float64), kFar);
}

TEST(GoldenUlpDistance, IntegersUseTheAbsoluteDifference) {
  EXPECT_EQ(ulp_distance(5, -3, sp::int32), 8);
  EXPECT_EQ(ulp_distance(1, 0, sp::bool_), 1);
  EXPECT_EQ(ulp_distance(-1e19, 1e19, sp::int64), kFar);
}

TEST(GoldenArraysEqual, NaNsMatchButSignedZerosDiffer) {
  Array a = raw<float>(sp::float32, {1.0f, float(kNaN), 0.0f});
  EXPECT_TRUE(spmd_test::arrays_equal(a, raw<float>(sp::float32, {1.0f, -float(kNaN), 0.0f})));
  auto r = spmd_test::arrays_equal(a, raw<float>(sp::float32, {1.0f, float(kNaN), -0.0f}));
  EXPECT_FALSE(r);
  EXPECT_NE(message(r).find("1 of 3 elements of float32(3,) differ (exact)"), std::string::npos)
      << message(r);
  EXPECT_NE(message(r).find("first at index (2,) [flat 2]: actual 0 (0x0), expected -0 "
                            "(0x80000000), 0 ulps"),
            std::string::npos)
      << message(r);
}

TEST(GoldenArraysEqual, ShapeDtypeAndEmptyHandleMismatchesFail) {
  Array x = raw<int32_t>(sp::int32, {1, 2, 3, 4});
  EXPECT_NE(message(spmd_test::arrays_equal(x, raw<int32_t>(sp::int32, {1, 2, 3, 4}, {2, 2})))
                .find("shape mismatch: actual (4,), expected (2, 2)"),
            std::string::npos);
  EXPECT_NE(message(spmd_test::arrays_equal(x, raw<int64_t>(sp::int64, {1, 2, 3, 4})))
                .find("dtype mismatch: actual int32, expected int64"),
            std::string::npos);
  EXPECT_NE(message(spmd_test::arrays_equal(Array(), x)).find("actual is an empty Array handle"),
            std::string::npos);
  Array empty = raw<int32_t>(sp::int32, {}, {2, 0});
  EXPECT_TRUE(spmd_test::arrays_equal(empty, empty));
}

TEST(GoldenArraysEqual, ReportsMultiIndexAndExact64BitIntegers) {
  int64_t big = std::numeric_limits<int64_t>::max();
  Array a = raw<int64_t>(sp::int64, {0, 0, 0, big}, {2, 2});
  Array b = raw<int64_t>(sp::int64, {0, 0, 0, big - 1}, {2, 2});
  auto r = spmd_test::arrays_equal(a, b);
  EXPECT_NE(message(r).find("index (1, 1) [flat 3]: actual 9223372036854775807, expected "
                            "9223372036854775806, 1 ulps"),
            std::string::npos)
      << message(r);
}

TEST(GoldenArraysCloseUlp, AllowsUpToMaxUlpsInTheArraysOwnDtype) {
  Array a = raw<uint16_t>(sp::bfloat16, {0x3f80, 0x4000, 0x7f80});
  Array b = raw<uint16_t>(sp::bfloat16, {0x3f81, 0x3ffe, 0x7f80});
  EXPECT_TRUE(spmd_test::arrays_close_ulp(a, b, 2));
  auto r = spmd_test::arrays_close_ulp(a, b, 1);
  EXPECT_FALSE(r);
  EXPECT_NE(message(r).find("index (1,) [flat 1]: actual 2 (0x4000), expected 1.984375 (0x3ffe), "
                            "2 ulps; largest distance 2 ulps"),
            std::string::npos)
      << message(r);
}

TEST(GoldenArraysCloseUlp, InfinityNeverMatchesAFiniteValue) {
  float max = std::numeric_limits<float>::max();
  auto r = spmd_test::arrays_close_ulp(raw<float>(sp::float32, {float(kInf)}),
                                       raw<float>(sp::float32, {max}), 1000000);
  EXPECT_FALSE(r);
  EXPECT_NE(message(r).find("inf ulps"), std::string::npos) << message(r);
  EXPECT_TRUE(spmd_test::arrays_close_ulp(raw<float>(sp::float32, {float(kNaN)}),
                                          raw<float>(sp::float32, {float(kNaN)}), 0));
}

TEST(GoldenArraysCloseUlp, IntegerExtremesSaturateInsteadOfOverflowing) {
  Array a = raw<int64_t>(sp::int64, {std::numeric_limits<int64_t>::min()});
  Array b = raw<int64_t>(sp::int64, {std::numeric_limits<int64_t>::max()});
  EXPECT_FALSE(spmd_test::arrays_close_ulp(a, b, kFar - 1));
  Array c = raw<uint64_t>(sp::uint64, {0});
  Array d = raw<uint64_t>(sp::uint64, {~uint64_t(0)});
  EXPECT_FALSE(spmd_test::arrays_close_ulp(c, d, kFar - 1));
  EXPECT_TRUE(spmd_test::arrays_close_ulp(raw<int8_t>(sp::int8, {-128}),
                                          raw<int8_t>(sp::int8, {127}), 255));
}

TEST(GoldenArraysClose, UsesNumpysAllcloseRule) {
  Array e = raw<double>(sp::float64, {100.0, 0.0, kInf, kNaN});
  EXPECT_TRUE(
      spmd_test::arrays_close(raw<double>(sp::float64, {100.1, 1e-9, kInf, kNaN}), e, 1e-3, 1e-8));
  EXPECT_FALSE(
      spmd_test::arrays_close(raw<double>(sp::float64, {100.2, 0.0, kInf, kNaN}), e, 1e-3, 1e-8));
  EXPECT_FALSE(
      spmd_test::arrays_close(raw<double>(sp::float64, {100.0, 0.0, -kInf, kNaN}), e, 1e-3, 1e-8));
  EXPECT_FALSE(
      spmd_test::arrays_close(raw<double>(sp::float64, {100.0, 0.0, kInf, 0.0}), e, 1e-3, 1e-8));
}

TEST(GoldenLoad, CachesEachFileAndKeepsStoredDtypes) {
  const auto& first = spmd_test::load_golden("io/savez.npz");
  const auto& again = spmd_test::load_golden("io/savez.npz");
  EXPECT_EQ(&first, &again);
  EXPECT_EQ(first.at("ints").dtype(), sp::int64);
  EXPECT_EQ(spmd_test::golden_path("io/x.npy"), std::string(SPMD_GOLDEN_DIR) + "/io/x.npy");
  EXPECT_THROW(spmd_test::load_golden("io/no_such_file.npz"), sp::IOError);
}

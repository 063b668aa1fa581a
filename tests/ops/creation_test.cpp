// Array creation against JAX (tools/goldens/gen_creation.py), element access and its errors.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "support/golden.h"

namespace sp = spmd;
using sp::Array;

namespace {
Array golden(const char* name) {
  return spmd_test::load_golden("creation.npz").at(name);
}
}  // namespace

TEST(Creation, RangesMatchJax) {
  EXPECT_TRUE(spmd_test::arrays_equal(sp::arange(8), golden("arange_8")));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::arange(8.0), golden("arange_8f")));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::arange(8.0f), golden("arange_8f")));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::arange(2, 11, 3), golden("arange_2_11_3")));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::arange(10, 0, -3), golden("arange_10_0_-3")));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::arange(0.0, 1.0, 0.1), golden("arange_0_1_0.1")));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::arange(-1.5, 2.2, 0.7), golden("arange_-1.5_2.2_0.7")));
}

// XLA fuses linspace's start·(1 − step) + stop·step chain and its float results can differ from
// eager evaluation by a few ulps; endpoints and integer results are exact.
TEST(Creation, LinspaceMatchesJax) {
  auto close = [](const Array& got, const char* name) {
    return spmd_test::arrays_close_ulp(got, golden(name), 8);
  };
  EXPECT_TRUE(close(sp::linspace(0, 1, 7), "linspace_0_1_7"));
  EXPECT_TRUE(close(sp::linspace(-3, 11, 50), "linspace_-3_11_50"));
  EXPECT_TRUE(close(sp::linspace(0, 1, 7, false), "linspace_0_1_7_noend"));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::linspace(2, 5, 1), golden("linspace_2_5_1")));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::linspace(0, 10, 6, true, sp::int32),
                                      golden("linspace_0_10_6_int32")));
  EXPECT_TRUE(close(sp::linspace(0.1, 0.9, 9, true, sp::bfloat16), "linspace_0.1_0.9_9_bf16"));
  Array l = sp::linspace(-3, 11, 50);
  EXPECT_EQ(l[0].item<float>(), -3.f);
  EXPECT_EQ(l[-1].item<float>(), 11.f);
}

TEST(Creation, EyeFullZerosOnesMatchJax) {
  EXPECT_TRUE(spmd_test::arrays_equal(sp::eye(3), golden("eye_3")));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::eye(3, 4, 1), golden("eye_3_4_1")));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::eye(4, 3, -2, sp::int32), golden("eye_4_3_-2_int32")));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::full({2, 3}, 7.5), golden("full_2x3_7.5")));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::zeros({2, 0}), golden("zeros_2x0")));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::ones({3}, sp::int8), golden("ones_3_int8")));
}

TEST(Creation, ArrayFromCxxDataKeepsValuesAndCanonicalisesDtype) {
  Array a = sp::array({{1, 2, 3}, {4, 5, 6}});
  EXPECT_EQ(a.shape(), (sp::Shape{2, 3}));
  EXPECT_EQ(a.dtype(), sp::int32);
  EXPECT_EQ(a.to_vector<int>(), (std::vector<int>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(sp::array({1.0, 2.0}).dtype(), sp::float32);  // no x64: float64 → float32
  EXPECT_EQ(sp::array(std::vector<bool>{true, false}, {2}).to_vector<bool>(),
            (std::vector<bool>{true, false}));
  sp::config::enable_x64(true);
  EXPECT_EQ(sp::array({1.0, 2.0}).dtype(), sp::float64);
  EXPECT_EQ(sp::arange(3.0).dtype(), sp::float64);
  sp::config::enable_x64(false);
}

// jnp.array(3.0), jnp.array(3) and jnp.array(True) of Python scalars: 0-d, float32 / int32
// weakly typed, bool strongly (JAX 0.10.2: `Array(3., dtype=float32, weak_type=True)`).
TEST(Creation, ArrayOfOneScalarIsZeroDimensionalAsJnpArray) {
  Array f = sp::array(3.0), i = sp::array(3), b = sp::array(true);
  EXPECT_EQ(f.shape(), sp::Shape{});
  EXPECT_EQ(sp::repr(f), "Array(3., dtype=float32, weak_type=True)");
  EXPECT_EQ(sp::repr(i), "Array(3, dtype=int32, weak_type=True)");
  EXPECT_EQ(sp::repr(b), "Array(True, dtype=bool)");
  EXPECT_EQ((i + sp::astype(sp::array({1}), sp::int8)).dtype(), sp::int8);
}

TEST(Creation, ItemAndToVectorConvertLikeAstype) {
  Array x = sp::array({1.75f, -2.5f, 3.f});
  EXPECT_EQ(x.to_vector<int>(), (std::vector<int>{1, -2, 3}));
  EXPECT_EQ(x[1].item<float>(), -2.5f);
  EXPECT_EQ(x[-1].item<double>(), 3.0);
  EXPECT_EQ(sp::array({1.f, 0.f}).to_vector<bool>(), (std::vector<bool>{true, false}));
}

// An empty std::vector's data() is null: creating from it, or copying an empty array out into
// one, must not pass the null pointer to memcpy (undefined even for zero bytes; UBSan's
// nonnull-attribute check reports it).
TEST(Creation, EmptyArraysFromAndToNullHostPointers) {
  for (sp::DType t : {sp::float32, sp::int8, sp::bfloat16}) {
    Array a = sp::array_from_bytes(nullptr, t, {0, 3});
    EXPECT_EQ(a.shape(), (sp::Shape{0, 3}));
    EXPECT_EQ(a.dtype(), t);
    EXPECT_TRUE(a.to_vector<float>().empty());
    EXPECT_TRUE(a.to_vector<double>().empty());  // a conversion, not a copy
  }
  Array f = sp::array(std::vector<float>{}, {0});
  EXPECT_EQ(f.dtype(), sp::float32);
  EXPECT_TRUE(f.to_vector<float>().empty());
  EXPECT_EQ(sp::array(std::vector<double>{}, {2, 0}).shape(), (sp::Shape{2, 0}));
  EXPECT_TRUE(sp::array(std::vector<bool>{}, {0}).to_vector<bool>().empty());
}

TEST(Creation, BadArgumentsRaiseClearErrors) {
  try {
    (void)sp::array({1.f, 2.f, 3.f}, sp::Shape{2, 2});
    FAIL();
  } catch (const sp::ValueError& e) {
    EXPECT_EQ(std::string(e.what()), "[array] got 3 values for shape (2, 2), which holds 4");
  }
  EXPECT_THROW((void)sp::zeros({-1, 2}), sp::ValueError);
  EXPECT_THROW((void)sp::arange(0, 5, 0), sp::ValueError);
  EXPECT_THROW((void)sp::linspace(0, 1, -1), sp::ValueError);
  EXPECT_THROW((void)sp::array({{1, 2}, {3}}), sp::ValueError);
  EXPECT_THROW((void)sp::arange(3).item<int>(), sp::ValueError);
  EXPECT_THROW((void)sp::arange(3)[3], sp::IndexError);
  EXPECT_THROW((void)Array()[0], sp::ValueError);
  EXPECT_THROW((void)Array(int64_t(1) << 40), sp::ValueError);
}

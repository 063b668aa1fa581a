// sort / argsort / lax::sort: total order with NaNs last, stability, several operands, any axis.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include <cmath>

namespace sp = spmd;

TEST(Sort, FloatsInTotalOrderWithNaNLast) {
  sp::Array x = sp::array({3.f, NAN, -0.f, 0.f, -INFINITY, 1.f, INFINITY, -2.f});
  std::vector<float> v = sp::sort(x).to_vector<float>();
  std::vector<float> head(v.begin(), v.end() - 1);
  EXPECT_EQ(head, (std::vector<float>{-INFINITY, -2.f, -0.f, 0.f, 1.f, 3.f, INFINITY}));
  EXPECT_TRUE(std::signbit(v[2]));
  EXPECT_TRUE(std::isnan(v.back()));
}

TEST(Sort, ArgsortIsStableAlongAnyAxis) {
  sp::Array x = sp::array({{3, 1, 3, 1}, {0, 0, 2, 1}});
  EXPECT_EQ(sp::argsort(x).to_vector<int>(), (std::vector<int>{1, 3, 0, 2, 0, 1, 3, 2}));
  EXPECT_EQ(sp::argsort(x, 0).to_vector<int>(), (std::vector<int>{1, 1, 1, 0, 0, 0, 0, 1}));
  EXPECT_EQ(sp::sort(x, 0).to_vector<int>(), (std::vector<int>{0, 0, 2, 1, 3, 1, 3, 1}));
}

TEST(Sort, SeveralOperandsSortTogetherByTheFirstKeys) {
  sp::Array k1 = sp::array({1, 0, 1, 0}), k2 = sp::array({2, 9, 1, 3});
  sp::Array v = sp::array({10.f, 20.f, 30.f, 40.f});
  auto out = sp::lax::sort({k1, k2, v}, 0, 2);
  EXPECT_EQ(out[0].to_vector<int>(), (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(out[1].to_vector<int>(), (std::vector<int>{3, 9, 1, 2}));
  EXPECT_EQ(out[2].to_vector<float>(), (std::vector<float>{40, 20, 30, 10}));
  auto by_first = sp::lax::sort({k1, v}, 0, 1);  // stable: ties keep their order
  EXPECT_EQ(by_first[1].to_vector<float>(), (std::vector<float>{20, 40, 10, 30}));
}

TEST(Sort, BadArgumentsRaise) {
  EXPECT_THROW((void)sp::sort(sp::arange(3), 1), sp::AxisError);
  EXPECT_THROW((void)sp::lax::sort({sp::arange(3), sp::arange(4)}, 0, 1), sp::ShapeError);
  EXPECT_THROW((void)sp::lax::sort({sp::arange(3)}, 0, 2), sp::ValueError);
  EXPECT_THROW((void)sp::argsort(sp::Array(1)), sp::ValueError);
}

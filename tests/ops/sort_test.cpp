// sort / argsort / lax::sort against JAX (tests/goldens/random_sort.npz, written by
// tools/goldens/gen_random.py) and against a plain stable sort with JAX's comparator: -0 equals
// +0, NaNs last and equal, denormals equal zero (float16's excepted), several operands, any axis.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "support/golden.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

namespace sp = spmd;
using sp::Array;

namespace {

int axis_of(const std::string& case_name) {
  const size_t at = case_name.find("_axis");
  return at == std::string::npos ? -1 : std::stoi(case_name.substr(at + 5));
}

// Checks every "<prefix>dtype|case|x" golden's sort and argsort; returns how many.
size_t check_sort_goldens(const std::string& prefix) {
  const auto& g = spmd_test::load_golden("random_sort.npz");
  size_t checked = 0;
  for (const auto& [name, x] : g) {
    if (name.rfind(prefix, 0) != 0 || name.size() < 2 || name.substr(name.size() - 2) != "|x")
      continue;
    const std::string stem = name.substr(0, name.size() - 1);
    if (prefix.empty() && stem.rfind("x64|", 0) == 0) continue;
    const int axis = axis_of(stem);
    EXPECT_TRUE(spmd_test::arrays_equal(sp::sort(x, axis), g.at(stem + "sort"))) << stem;
    EXPECT_TRUE(spmd_test::arrays_equal(sp::argsort(x, axis), g.at(stem + "argsort"))) << stem;
    ++checked;
  }
  return checked;
}

// JAX's comparator on one value: NaNs last and equal; -0, and denormals where XLA:CPU reads
// them as zero, equal +0.
struct RefKey {
  bool nan;
  double value;
  bool operator<(const RefKey& o) const {
    if (nan != o.nan) return !nan;
    return !nan && value < o.value;
  }
};

RefKey ref_key(double v, bool flush, double min_normal) {
  if (std::isnan(v)) return {true, 0.0};
  if (v == 0 || (flush && std::fabs(v) < min_normal)) return {false, 0.0};
  return {false, v};
}

// Stable argsort of one row by the reference comparator.
std::vector<int64_t> reference_argsort(const std::vector<double>& row, bool flush,
                                       double min_normal) {
  std::vector<RefKey> keys;
  for (double v : row) keys.push_back(ref_key(v, flush, min_normal));
  std::vector<int64_t> idx(row.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](int64_t a, int64_t b) { return keys[size_t(a)] < keys[size_t(b)]; });
  return idx;
}

// argsort of `x` along `axis` by the reference, as a flat row-major int32 vector.
std::vector<int> reference_argsort_axis(const Array& x, int axis, bool flush, double min_normal) {
  axis = sp::normalize_axis(axis, x.ndim(), "reference");
  Array moved = sp::moveaxis(x, axis, -1);
  const int64_t len = x.shape()[axis], rows = len ? x.size() / len : 0;
  std::vector<double> all = moved.to_vector<double>();
  std::vector<int> out;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> row(all.begin() + r * len, all.begin() + (r + 1) * len);
    for (int64_t i : reference_argsort(row, flush, min_normal)) out.push_back(int(i));
  }
  Array flat = sp::array(out, moved.shape());
  return sp::moveaxis(flat, -1, axis).to_vector<int>();
}

Array random_with_specials(sp::DType t, const sp::Shape& shape, std::mt19937& gen) {
  std::vector<float> v(size_t(shape.size()));
  std::uniform_int_distribution<int> pick(0, 9), small(-6, 6);
  const float specials[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -1e-41f};
  for (float& f : v) f = pick(gen) < 2 ? specials[gen() % 8] : float(small(gen)) / 2;
  return sp::array(v, shape).astype(t);
}

}  // namespace

TEST(Sort, EveryDtypeAndAxisMatchesJax) {
  EXPECT_GE(check_sort_goldens(""), 38u);
}

TEST(Sort, SixtyFourBitTypesMatchJaxWithX64) {
  sp::config::enable_x64(true);
  EXPECT_GE(check_sort_goldens("x64|"), 10u);
  EXPECT_EQ(sp::argsort(sp::arange(3)).dtype(), sp::int64);
  sp::config::enable_x64(false);
  EXPECT_EQ(sp::argsort(sp::arange(3)).dtype(), sp::int32);
}

TEST(Sort, SeveralOperandsSortTogetherAsJax) {
  const auto& g = spmd_test::load_golden("random_sort.npz");
  const std::vector<Array> in = {g.at("multi|in0"), g.at("multi|in1"), g.at("multi|in2")};
  for (int keys : {1, 2}) {
    std::vector<Array> out = sp::lax::sort(in, 1, keys);
    for (size_t i = 0; i < 3; ++i)
      EXPECT_TRUE(spmd_test::arrays_equal(
          out[i], g.at("multi|keys" + std::to_string(keys) + "|out" + std::to_string(i))))
          << keys << " " << i;
  }
}

TEST(Sort, ZerosAndNaNsCompareAsJaxSortThem) {
  // Recorded from jnp.argsort: -0 == +0 and NaN == -NaN, ties kept in input order.
  Array x = sp::array({1.0f, NAN, -NAN, -INFINITY, 0.0f, -0.0f, INFINITY, -1.0f, 0.0f, -0.0f});
  EXPECT_EQ(sp::argsort(x).to_vector<int>(), (std::vector<int>{3, 7, 4, 5, 8, 9, 0, 6, 1, 2}));
  std::vector<float> s = sp::sort(x).to_vector<float>();
  EXPECT_TRUE(std::signbit(s[3]) && !std::signbit(s[2]));  // values move unchanged
  EXPECT_TRUE(std::isnan(s[8]) && std::isnan(s[9]) && std::signbit(s[9]));
}

TEST(Sort, DenormalsEqualZeroExceptInFloat16) {
  // XLA:CPU compares with denormals read as zero; float16 compares in float32, where its
  // subnormals are normal numbers.
  Array x = sp::array({1e-40f, -1e-45f, 0.0f, -0.0f, 1e-45f, -1e-40f, 1e-38f, -1e-38f});
  EXPECT_EQ(sp::argsort(x).to_vector<int>(), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(sp::sort(x).to_vector<float>()[0], 1e-40f);  // not flushed in the output
  Array h = sp::array({6e-8f, -6e-8f, 0.0f, 1e-5f, -1e-5f}).astype(sp::float16);
  EXPECT_EQ(sp::argsort(h).to_vector<int>(), (std::vector<int>{4, 1, 2, 0, 3}));
}

TEST(Sort, MatchesAStableReferenceSortOnRandomInput) {
  std::mt19937 gen(5);
  struct Case {
    sp::DType t;
    sp::Shape shape;
    int axis;
  };
  const Case cases[] = {
      {sp::float32, {3000}, 0},    {sp::float32, {40, 33}, 0}, {sp::float32, {40, 33}, 1},
      {sp::bfloat16, {500, 7}, 0}, {sp::float16, {6, 400}, 1}, {sp::int32, {2, 3, 300}, 1},
      {sp::int8, {1000, 3}, 0},    {sp::uint16, {3, 700}, -1}, {sp::float32, {2000, 40}, 1},
      {sp::int16, {3, 4, 5}, 2},   {sp::uint8, {257}, 0},      {sp::float32, {1, 1}, 0},
  };
  for (const Case& c : cases) {
    Array x = random_with_specials(c.t, c.shape, gen);
    const bool flush = c.t != sp::float16;
    const double min_normal = c.t == sp::float16 ? 6.103515625e-05 : 1.1754943508222875e-38;
    EXPECT_EQ(sp::argsort(x, c.axis).to_vector<int>(),
              reference_argsort_axis(x, c.axis, flush, min_normal))
        << sp::dtype_name(c.t) << c.shape;
  }
}

TEST(Sort, SecondKeyBreaksTiesAndValuesFollow) {
  Array k1 = sp::array({1, 0, 1, 0, 1}), k2 = sp::array({2.f, 9.f, NAN, 3.f, -1.f});
  Array v = sp::array({10, 20, 30, 40, 50}).astype(sp::uint8);
  auto out = sp::lax::sort({k1, k2, v}, 0, 2);
  EXPECT_EQ(out[0].to_vector<int>(), (std::vector<int>{0, 0, 1, 1, 1}));
  EXPECT_EQ(out[2].to_vector<int>(), (std::vector<int>{40, 20, 50, 10, 30}));
  auto by_first = sp::lax::sort({k1, v}, 0, 1);  // stable: ties keep their order
  EXPECT_EQ(by_first[1].to_vector<int>(), (std::vector<int>{20, 40, 10, 30, 50}));
  EXPECT_EQ(out[2].dtype(), sp::uint8);
}

TEST(Sort, EmptyAndSingletonDimensions) {
  Array e = sp::zeros({0, 3});
  EXPECT_EQ(sp::sort(e, 0).shape(), (sp::Shape{0, 3}));
  EXPECT_EQ(sp::argsort(sp::zeros({2, 0})).shape(), (sp::Shape{2, 0}));
  EXPECT_EQ(sp::argsort(sp::zeros({2, 0})).dtype(), sp::int32);
  Array one = sp::array({3.f, 1.f}, sp::Shape{2, 1});
  EXPECT_EQ(sp::sort(one).to_vector<float>(), (std::vector<float>{3.f, 1.f}));
  EXPECT_EQ(sp::sort(one, 0).to_vector<float>(), (std::vector<float>{1.f, 3.f}));
}

TEST(Sort, BadArgumentsRaise) {
  EXPECT_THROW(sp::sort(sp::arange(3), 1), sp::AxisError);
  EXPECT_THROW(sp::sort(Array(1.0f)), sp::AxisError);
  EXPECT_THROW(sp::argsort(Array(1)), sp::AxisError);
  EXPECT_THROW(sp::lax::sort({sp::arange(3), sp::arange(4)}, 0, 1), sp::ShapeError);
  EXPECT_THROW(sp::lax::sort({sp::arange(3)}, 0, 2), sp::ValueError);
  EXPECT_THROW(sp::lax::sort({sp::arange(3)}, 0, 0), sp::ValueError);
  EXPECT_THROW(sp::lax::sort({}, 0, 1), sp::ValueError);
  try {
    sp::lax::sort({sp::arange(3), sp::arange(4)}, 0, 1);
  } catch (const sp::ShapeError& e) {
    EXPECT_EQ(std::string(e.what()), "[sort] operands must have equal shapes, got: (3,) (4,)");
  }
}

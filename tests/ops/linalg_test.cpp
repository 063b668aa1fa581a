// lax.dot_general and jnp's contractions against values recorded from JAX
// (tools/goldens/gen_linalg.py), large products against a double-precision loop, the GEMM
// kernels' layouts and thread counts, and every error path.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "backends/cpu/gemm.h"
#include "prims/primitive.h"
#include "support/config_scope.h"
#include "support/golden.h"

#include <cmath>
#include <map>
#include <random>
#include <string>

namespace sp = spmd;
using sp::Array;
using sp::lax::DotDimensionNumbers;

namespace {

using spmd_test::ThreadsScope;
using spmd_test::X64Scope;

// Restores the process-wide settings a test changes, even when it fails.
// ---- goldens ----------------------------------------------------------------------------------
struct GoldenCase {
  std::string key, op;
  Array x, y, expected, dims, pref;
};

std::vector<GoldenCase> load_cases(const char* file) {
  const auto& arrays = spmd_test::load_golden(file);
  auto get = [&](const std::string& name) {
    auto it = arrays.find(name);
    return it == arrays.end() ? Array() : it->second;
  };
  std::vector<GoldenCase> cases;
  for (const auto& [name, value] : arrays) {
    if (!name.ends_with("|out")) continue;
    std::string key = name.substr(0, name.size() - 4);
    cases.push_back({key, key.substr(0, key.find('|')), get(key + "|x"), get(key + "|y"), value,
                     get(key + "|dims"), get(key + "|pref")});
  }
  return cases;
}

DotDimensionNumbers decode_dims(const Array& flat) {
  std::vector<int> v = flat.to_vector<int>();
  std::vector<std::vector<int64_t>> parts;
  for (size_t i = 0; i < v.size(); i += size_t(v[i]) + 1)
    parts.emplace_back(v.begin() + long(i) + 1, v.begin() + long(i) + 1 + v[i]);
  return {parts.at(0), parts.at(1), parts.at(2), parts.at(3)};
}

Array run_case(const GoldenCase& c) {
  if (c.op == "dot_general") {
    std::optional<sp::DType> pref;
    if (c.pref.valid()) pref = c.pref.dtype();
    return sp::lax::dot_general(c.x, c.y, decode_dims(c.dims), pref);
  }
  if (c.op == "matmul") return sp::matmul(c.x, c.y);
  if (c.op == "dot") return sp::dot(c.x, c.y);
  if (c.op == "vdot") return sp::vdot(c.x, c.y);
  if (c.op == "inner") return sp::inner(c.x, c.y);
  if (c.op == "outer") return sp::outer(c.x, c.y);
  if (c.op == "tensordot") {
    auto pos = c.key.find("|axes");
    int axes = pos == std::string::npos ? 1 : std::stoi(c.key.substr(pos + 5));
    return sp::tensordot(c.x, c.y, axes);
  }
  ADD_FAILURE() << "no C++ function for " << c.op;
  return Array();
}

// Integers and bools must agree exactly. Floats may differ by the accumulation order: XLA and
// oneDNN/OpenBLAS sum in different orders, and a 16-bit result may then round the other way.
::testing::AssertionResult matches_jax(const Array& got, const Array& expected) {
  switch (expected.dtype()) {
    case sp::float32:
      return spmd_test::arrays_close(got, expected, 1e-5, 1e-5);
    case sp::float64:
      return spmd_test::arrays_close(got, expected, 1e-12, 1e-12);
    case sp::bfloat16:
      return spmd_test::arrays_close(got, expected, 1.0 / 128, 1e-4);
    case sp::float16:
      return spmd_test::arrays_close(got, expected, 1.0 / 1024, 1e-4);
    default:
      return spmd_test::arrays_equal(got, expected);
  }
}

void check_golden_file(const char* file, size_t min_cases) {
  auto cases = load_cases(file);
  ASSERT_GE(cases.size(), min_cases);
  for (const GoldenCase& c : cases) {
    SCOPED_TRACE(c.key);
    try {
      EXPECT_TRUE(matches_jax(run_case(c), c.expected));
    } catch (const std::exception& e) {
      ADD_FAILURE() << "threw: " << e.what();
    }
  }
}

// ---- references -------------------------------------------------------------------------------
std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// C = A·B for row-major A (m×k) and B (k×n), summed in double.
std::vector<double> naive_matmul(const std::vector<float>& a, const std::vector<float>& b, int m,
                                 int k, int n) {
  std::vector<double> c(size_t(m) * size_t(n), 0.0);
  for (int i = 0; i < m; ++i)
    for (int p = 0; p < k; ++p)
      for (int j = 0; j < n; ++j)
        c[size_t(i) * size_t(n) + size_t(j)] += double(a[size_t(i) * size_t(k) + size_t(p)]) *
                                                double(b[size_t(p) * size_t(n) + size_t(j)]);
  return c;
}

// Largest |got - want| relative to sqrt(k) (the size of a typical rounding error of a k-term sum
// of unit-sized products).
template <class T>
double max_error(const std::vector<T>& got, const std::vector<double>& want, int k) {
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::abs(double(got[i]) - want[i]) / std::sqrt(double(k)));
  return worst;
}

template <class E>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("wrong exception type: ") + e.what();
  }
  return "no exception";
}

Array dg(const Array& x, const Array& y, DotDimensionNumbers d,
         std::optional<sp::DType> pref = std::nullopt) {
  return sp::lax::dot_general(x, y, d, pref);
}

}  // namespace

// ---- goldens ----------------------------------------------------------------------------------
TEST(LinalgGolden, MatchesJaxForEveryLayoutAndDtype) {
  check_golden_file("linalg.npz", 400);
}

TEST(LinalgGolden, MatchesJaxWith64BitTypes) {
  X64Scope x64;
  check_golden_file("linalg_x64.npz", 100);
}

// ---- shapes and types -------------------------------------------------------------------------
TEST(DotGeneral, OutputHasBatchThenLhsFreeThenRhsFreeDims) {
  Array out = dg(sp::ones({5, 2, 3, 7}), sp::ones({7, 4, 2, 6}), {{3}, {0}, {1}, {2}});
  EXPECT_EQ(out.shape(), (sp::Shape{2, 5, 3, 4, 6}));
  EXPECT_EQ(out.dtype(), sp::float32);
  EXPECT_EQ(out.to_vector<float>()[0], 7.0f);
}

TEST(DotGeneral, ShapeRuleFollowsXlaTypeOrderingAndWeakTypes) {
  const sp::Primitive& p = sp::primitive("dot_general");
  auto eval = [&](sp::DType l, sp::DType r, sp::ParamValue pref, bool weak = false) {
    std::vector<sp::AbstractValue> in{{sp::Shape{2, 3}, l, weak}, {sp::Shape{3}, r, weak}};
    sp::Params params{{"dimension_numbers", DotDimensionNumbers{{1}, {0}, {}, {}}},
                      {"precision", sp::NoneParam{}},
                      {"preferred_element_type", pref},
                      {"out_sharding", sp::NoneParam{}}};
    return sp::abstract_eval(p, in, params).at(0);
  };
  EXPECT_EQ(eval(sp::uint8, sp::int8, sp::NoneParam{}).dtype, sp::int8);
  EXPECT_EQ(eval(sp::float16, sp::bfloat16, sp::NoneParam{}).dtype, sp::bfloat16);
  EXPECT_EQ(eval(sp::int32, sp::float16, sp::NoneParam{}).dtype, sp::float16);
  EXPECT_EQ(eval(sp::bool_, sp::int8, sp::NoneParam{}).dtype, sp::int8);
  EXPECT_EQ(eval(sp::int8, sp::int8, sp::int32).dtype, sp::int32);
  EXPECT_EQ(eval(sp::float32, sp::float32, sp::bfloat16).dtype, sp::bfloat16);
  EXPECT_EQ(eval(sp::float32, sp::float32, sp::NoneParam{}).shape, (sp::Shape{2}));
  EXPECT_TRUE(eval(sp::float32, sp::float32, sp::NoneParam{}, true).weak_type);
  EXPECT_FALSE(eval(sp::float32, sp::float32, sp::NoneParam{}).weak_type);
}

TEST(Dot, WeakScalarsKeepTheArrayDtype) {
  Array x = sp::array({1, 2, 3}).astype(sp::int8);
  Array r = sp::dot(x, 3);
  EXPECT_EQ(r.dtype(), sp::int8);
  EXPECT_EQ(r.to_vector<int>(), (std::vector<int>{3, 6, 9}));
  Array s = sp::dot(Array(2.0f), Array(3.0f));
  EXPECT_TRUE(s.weak_type());
  EXPECT_EQ(s.item<float>(), 6.0f);
  EXPECT_EQ(sp::dot(sp::arange(3.0f), 2.0).dtype(), sp::float32);
}

TEST(Dot, IntegerProductsWrapAround) {
  Array a = sp::array({100, 100}).astype(sp::int8).reshape({1, 2});
  Array b = sp::array({100, 100}).astype(sp::int8).reshape({2, 1});
  EXPECT_EQ(sp::matmul(a, b).item<int>(), 32);  // 20000 mod 256
  EXPECT_EQ(dg(a, b, {{1}, {0}, {}, {}}, sp::int32).item<int>(), 20000);
  Array big = sp::array({2000000000, 2000000000}).reshape({1, 2});
  EXPECT_EQ(sp::dot(big, sp::array({2, 0})).item<int>(), int32_t(uint32_t(4000000000u)));
}

TEST(Dot, BoolProductIsOrOfAnds) {
  Array a = sp::array(std::vector<bool>{true, false, false, false}, {2, 2});
  Array b = sp::array(std::vector<bool>{true, true, true, false}, {2, 2});
  Array r = sp::matmul(a, b);
  EXPECT_EQ(r.dtype(), sp::bool_);
  EXPECT_EQ(r.to_vector<bool>(), (std::vector<bool>{true, true, false, false}));
  EXPECT_EQ(dg(a, b, {{1}, {0}, {}, {}}, sp::int32).to_vector<int>(),
            (std::vector<int>{1, 1, 0, 0}));
}

TEST(Dot, ZeroSizedContractionGivesZeros) {
  Array r = sp::matmul(sp::ones({300, 0}), sp::ones({0, 200}));
  EXPECT_EQ(r.shape(), (sp::Shape{300, 200}));
  EXPECT_EQ(sp::max(sp::abs(r)).item<float>(), 0.0f);
  Array i = sp::matmul(sp::ones({3, 0}, sp::int16), sp::ones({0, 2}, sp::int16));
  EXPECT_EQ(i.to_vector<int>(), (std::vector<int>(6, 0)));
  EXPECT_EQ(sp::matmul(sp::ones({0, 3}), sp::ones({3, 4})).shape(), (sp::Shape{0, 4}));
}

// ---- large products ---------------------------------------------------------------------------
TEST(Matmul, LargeFloat32MatchesDoubleReference) {
  const int m = 300, k = 500, n = 200;
  auto a = random_floats(size_t(m * k), 1), b = random_floats(size_t(k * n), 2);
  auto want = naive_matmul(a, b, m, k, n);
  Array x = sp::array(a, {m, k}), y = sp::array(b, {k, n});
  EXPECT_LT(max_error(sp::matmul(x, y).to_vector<float>(), want, k), 1e-5);
  // The same product from transposed storage of both operands.
  Array r = dg(x.T(), y.T(), {{0}, {1}, {}, {}});
  EXPECT_LT(max_error(r.to_vector<float>(), want, k), 1e-5);
}

TEST(Matmul, LargeBatchedProductsMatchPerBatchResults) {
  const int batch = 3, m = 70, k = 90, n = 50;
  auto a = random_floats(size_t(batch * m * k), 3), b = random_floats(size_t(batch * k * n), 4);
  Array r = sp::matmul(sp::array(a, {batch, m, k}), sp::array(b, {batch, k, n}));
  std::vector<float> got = r.to_vector<float>();
  for (int i = 0; i < batch; ++i) {
    std::vector<float> ai(a.begin() + i * m * k, a.begin() + (i + 1) * m * k);
    std::vector<float> bi(b.begin() + i * k * n, b.begin() + (i + 1) * k * n);
    std::vector<float> gi(got.begin() + i * m * n, got.begin() + (i + 1) * m * n);
    EXPECT_LT(max_error(gi, naive_matmul(ai, bi, m, k, n), k), 1e-5) << "batch " << i;
  }
}

TEST(Matmul, LargeBfloat16AccumulatesInFloat32) {
  const int m = 64, k = 512, n = 48;
  auto a = random_floats(size_t(m * k), 5), b = random_floats(size_t(k * n), 6);
  for (float& v : a) v = float(sp::bfloat16_t(v));
  for (float& v : b) v = float(sp::bfloat16_t(v));
  auto want = naive_matmul(a, b, m, k, n);
  Array x = sp::array(a, {m, k}).astype(sp::bfloat16),
        y = sp::array(b, {k, n}).astype(sp::bfloat16);
  Array wide = dg(x, y, {{1}, {0}, {}, {}}, sp::float32);
  EXPECT_EQ(wide.dtype(), sp::float32);
  EXPECT_LT(max_error(wide.to_vector<float>(), want, k), 1e-5);
  Array narrow = sp::matmul(x, y);
  EXPECT_EQ(narrow.dtype(), sp::bfloat16);
  std::vector<float> got = narrow.to_vector<float>();
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], std::abs(want[i]) / 128 + 1e-4) << i;
}

TEST(Matmul, LargeFloat64MatchesDoubleReference) {
  X64Scope x64;
  const int m = 120, k = 150, n = 90;
  auto a = random_floats(size_t(m * k), 7), b = random_floats(size_t(k * n), 8);
  auto want = naive_matmul(a, b, m, k, n);
  Array x = sp::array(a, {m, k}).astype(sp::float64), y = sp::array(b, {k, n}).astype(sp::float64);
  Array r = sp::matmul(x, y);
  EXPECT_EQ(r.dtype(), sp::float64);
  EXPECT_LT(max_error(r.to_vector<double>(), want, k), 1e-14);
}

TEST(Matmul, LargeIntegerProductsMatchExactSums) {
  const int m = 40, k = 64, n = 30;
  std::vector<int> a(size_t(m * k)), b(size_t(k * n));
  for (size_t i = 0; i < a.size(); ++i) a[i] = int(i % 17) - 8;
  for (size_t i = 0; i < b.size(); ++i) b[i] = int(i % 13) - 6;
  Array r = sp::matmul(sp::array(a, {m, k}), sp::array(b, {k, n}).T().T());
  std::vector<int> got = r.to_vector<int>();
  for (int i = 0; i < m; i += 7)
    for (int j = 0; j < n; j += 5) {
      int want = 0;
      for (int p = 0; p < k; ++p) want += a[size_t(i * k + p)] * b[size_t(p * n + j)];
      EXPECT_EQ(got[size_t(i * n + j)], want) << i << "," << j;
    }
}

TEST(Matmul, OneAndTwoThreadsGiveTheSameValues) {
  const int m = 130, k = 140, n = 150;
  Array x = sp::array(random_floats(size_t(m * k), 9), {m, k});
  Array y = sp::array(random_floats(size_t(k * n), 10), {k, n});
  std::vector<float> one, two;
  {
    ThreadsScope threads(1);
    one = sp::matmul(x, y).to_vector<float>();
  }
  {
    ThreadsScope threads(2);
    two = sp::matmul(x, y).to_vector<float>();
    EXPECT_EQ(sp::matmul(x, y).to_vector<float>(), two);  // the cached primitive again
  }
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); ++i) ASSERT_NEAR(one[i], two[i], 1e-4) << i;
}

// Every kernel family, storage order and batch count, small (loops) and large (libraries), on
// small integers whose products and sums every dtype represents exactly (int8 wraps around).
TEST(Gemm, KernelsHandleEveryStorageOrderAndBatch) {
  X64Scope x64;  // float64 operands
  const std::vector<std::pair<sp::DType, sp::DType>> kinds = {
      {sp::float32, sp::float32}, {sp::bfloat16, sp::float32}, {sp::bfloat16, sp::bfloat16},
      {sp::float64, sp::float64}, {sp::int32, sp::int32},      {sp::int8, sp::int8},
      {sp::uint16, sp::uint16},   {sp::bool_, sp::bool_}};
  for (auto [in, out] : kinds)
    for (int64_t batch : {1, 3})
      for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{2, 2, 3}, {20, 24, 40}})
        for (int ta = 0; ta < 2; ++ta)
          for (int tb = 0; tb < 2; ++tb) {
            SCOPED_TRACE(std::string(sp::dtype_name(in)) + "->" + std::string(sp::dtype_name(out)) +
                         " batch " + std::to_string(batch) + " m " + std::to_string(m) + " ta " +
                         std::to_string(ta) + " tb " + std::to_string(tb));
            const int64_t lo = sp::is_bool(in) ? 0 : -2, span = sp::is_bool(in) ? 2 : 5;
            // Logical A[b][i][p] and B[b][p][j], laid out as the storage order says.
            std::vector<int64_t> a(size_t(batch * m * k)), b(size_t(batch * k * n));
            for (int64_t q = 0; q < batch; ++q)
              for (int64_t i = 0; i < m; ++i)
                for (int64_t p = 0; p < k; ++p)
                  a[size_t(q * m * k + (ta ? p * m + i : i * k + p))] = lo + (q + i * 3 + p) % span;
            for (int64_t q = 0; q < batch; ++q)
              for (int64_t p = 0; p < k; ++p)
                for (int64_t j = 0; j < n; ++j)
                  b[size_t(q * k * n + (tb ? j * k + p : p * n + j))] = lo + (q + p * 2 + j) % span;
            std::vector<int64_t> want(size_t(batch * m * n), 0);
            for (int64_t q = 0; q < batch; ++q)
              for (int64_t i = 0; i < m; ++i)
                for (int64_t j = 0; j < n; ++j)
                  for (int64_t p = 0; p < k; ++p)
                    want[size_t((q * m + i) * n + j)] +=
                        a[size_t(q * m * k + (ta ? p * m + i : i * k + p))] *
                        b[size_t(q * k * n + (tb ? j * k + p : p * n + j))];
            auto typed = [](const std::vector<int64_t>& v, sp::DType t) {
              return sp::array(std::vector<int64_t>(v), sp::Shape{int64_t(v.size())}).astype(t);
            };
            Array ta_arr = typed(a, in), tb_arr = typed(b, in);
            Array c = sp::zeros({batch * m * n}, out);
            sp::cpu::GemmShape shape{batch, m, n, k, bool(ta), bool(tb)};
            sp::cpu::gemm(in, out, shape, sp::host_data(ta_arr, "test"),
                          sp::host_data(tb_arr, "test"),
                          const_cast<void*>(sp::host_data(c, "test")));
            EXPECT_TRUE(spmd_test::arrays_equal(c, typed(want, out)));
          }
  EXPECT_TRUE(sp::cpu::gemm_supports(sp::bfloat16, sp::float32));
  EXPECT_FALSE(sp::cpu::gemm_supports(sp::float16, sp::float16));
}

// ---- errors -----------------------------------------------------------------------------------
TEST(DotGeneral, RejectsBadDimensionNumbers) {
  Array x = sp::ones({2, 3}), y = sp::ones({3, 4}), b = sp::ones({2, 3, 4});
  EXPECT_EQ(error_of<sp::AxisError>([&] {
              dg(x, y, {{2}, {0}, {}, {}});
            }),
            "[dot_general] requires lhs dimension numbers to be nonnegative and less than the "
            "number of axes of the lhs value, got lhs_batch of () and lhs_contracting of (2,) "
            "for lhs of rank 2");
  EXPECT_EQ(error_of<sp::AxisError>([&] {
              dg(x, y, {{1}, {-1}, {}, {}});
            }),
            "[dot_general] requires rhs dimension numbers to be nonnegative and less than the "
            "number of axes of the rhs value, got rhs_batch of () and rhs_contracting of (-1,) "
            "for rhs of rank 2");
  EXPECT_EQ(error_of<sp::ValueError>([&] {
              dg(b, b, {{2}, {1}, {0}, {}});
            }),
            "[dot_general] requires equal numbers of lhs_batch and rhs_batch dimensions, got "
            "lhs_batch (0,) and rhs_batch ()");
  EXPECT_EQ(error_of<sp::ValueError>([&] {
              dg(b, b, {{2}, {2}, {0, 0}, {0, 1}});
            }),
            "[dot_general] requires lhs batch dimensions to be distinct, got lhs_batch (0, 0)");
  EXPECT_EQ(error_of<sp::ValueError>([&] {
              dg(b, b, {{1, 2}, {1, 1}, {}, {}});
            }),
            "[dot_general] requires rhs contracting dimensions to be distinct, got "
            "rhs_contracting (1, 1)");
  EXPECT_EQ(error_of<sp::ValueError>([&] {
              dg(b, b, {{0}, {0}, {0}, {0}});
            }),
            "[dot_general] requires lhs batch dimensions to be disjoint from contracting "
            "dimensions, got lhs_batch (0,) and lhs_contracting (0,)");
  EXPECT_EQ(error_of<sp::ValueError>([&] {
              dg(x, y, {{1}, {}, {}, {}});
            }),
            "[dot_general] requires equal numbers of lhs_contracting and rhs_contracting "
            "dimensions, got lhs_contracting (1,) and rhs_contracting ()");
  EXPECT_EQ(error_of<sp::ShapeError>([&] {
              dg(b, sp::ones({3, 4, 2}), {{2}, {1}, {0}, {0}});
            }),
            "[dot_general] requires lhs batch dimensions and rhs batch dimensions to have the "
            "same shape, got (2,) and (3,)");
  EXPECT_EQ(error_of<sp::ShapeError>([&] {
              dg(x, y, {{0}, {0}, {}, {}});
            }),
            "[dot_general] requires contracting dimensions to have the same shape, got (2,) and "
            "(3,)");
}

TEST(DotGeneral, RejectsNarrowerPreferredIntegerType) {
  Array x = sp::ones({2, 3}, sp::int32), y = sp::ones({3}, sp::int32);
  EXPECT_EQ(error_of<sp::TypeError>([&] {
              dg(x, y, {{1}, {0}, {}, {}}, sp::int8);
            }),
            "[dot_general] `preferred_element_type` must not be narrower than the original "
            "type, got preferred_element_type of int8 for result type of int32");
  EXPECT_EQ(error_of<sp::TypeError>([&] {
              dg(x, y, {{1}, {0}, {}, {}}, sp::bool_);
            }),
            "[dot_general] `preferred_element_type` must not be narrower than the original "
            "type, got preferred_element_type of bool for result type of int32");
  // Floats may narrow.
  EXPECT_EQ(dg(sp::ones({2, 3}), sp::ones({3}), {{1}, {0}, {}, {}}, sp::float16).dtype(),
            sp::float16);
}

TEST(LaxDot, AcceptsOnlyUnbatchedProducts) {
  EXPECT_EQ(sp::lax::dot(sp::ones({2, 3}), sp::ones({3})).shape(), (sp::Shape{2}));
  EXPECT_EQ(sp::lax::dot(sp::ones({3}), sp::ones({3}), sp::float64).dtype(), sp::float32);
  EXPECT_EQ(error_of<sp::ShapeError>([] {
              sp::lax::dot(sp::ones({2, 2, 3}), sp::ones({3}));
            }),
            "[lax.dot] expects an un-batched matrix-matrix, matrix-vector or vector-vector "
            "product with matching inner dimensions (use lax::dot_general for anything else), "
            "got shapes (2, 2, 3) and (3,)");
  EXPECT_THROW(sp::lax::dot(sp::ones({2, 3}), sp::ones({4})), sp::ShapeError);
  EXPECT_THROW(sp::lax::dot(Array(1.0f), sp::ones({1})), sp::ShapeError);
}

TEST(Matmul, RejectsScalarsAndMismatchedDims) {
  EXPECT_EQ(error_of<sp::ValueError>([] { sp::matmul(Array(1.0f), sp::ones({3})); }),
            "[matmul] input operand 0 must have ndim at least 1, but it has ndim 0");
  EXPECT_EQ(error_of<sp::ValueError>([] { sp::matmul(sp::ones({3}), Array(1.0f)); }),
            "[matmul] input operand 1 must have ndim at least 1, but it has ndim 0");
  EXPECT_EQ(error_of<sp::ShapeError>([] {
              sp::matmul(sp::ones({2, 3}), sp::ones({4, 5}));
            }),
            "[matmul] input operand 1 has a mismatch in its core dimension 0, with gufunc "
            "signature (n?,k),(k,m?)->(n?,m?) (size 4 is different from 3), got shapes (2, 3) "
            "and (4, 5)");
  EXPECT_THROW(sp::matmul(sp::ones({3}), sp::ones({4})), sp::ShapeError);
  EXPECT_EQ(error_of<sp::ShapeError>([] {
              sp::matmul(sp::ones({2, 3, 4}), sp::ones({5, 4, 2}));
            }),
            "[matmul] incompatible shapes for matmul arguments: (2, 3, 4) and (5, 4, 2) (batch "
            "dimensions 2 and 5 cannot be broadcast)");
}

TEST(Dot, RejectsMisalignedShapes) {
  EXPECT_EQ(error_of<sp::ShapeError>([] {
              sp::dot(sp::ones({2, 3}), sp::ones({4, 5}));
            }),
            "[dot] shapes (2, 3) and (4, 5) not aligned: 3 (dim 1) != 4 (dim 0)");
  EXPECT_EQ(error_of<sp::ShapeError>([] { sp::dot(sp::ones({3}), sp::ones({4})); }),
            "[dot] shapes (3,) and (4,) not aligned: 3 (dim 0) != 4 (dim 0)");
  EXPECT_EQ(error_of<sp::ShapeError>([] {
              sp::inner(sp::ones({2, 3}), sp::ones({3, 2}));
            }),
            "[inner] shapes (2, 3) and (3, 2) not aligned: 3 (dim 1) != 2 (dim 1)");
  EXPECT_EQ(error_of<sp::ShapeError>([] {
              sp::vdot(sp::ones({2, 3}), sp::ones({5}));
            }),
            "[vdot] the arrays must have the same number of elements, got shapes (2, 3) and "
            "(5,)");
}

TEST(Tensordot, RejectsBadAxes) {
  EXPECT_EQ(error_of<sp::ValueError>([] {
              sp::tensordot(sp::ones({2, 3}), sp::ones({3}), 2);
            }),
            "[tensordot] number of tensordot axes (axes 2) exceeds input ranks ((2, 3) and "
            "(3,))");
  EXPECT_EQ(error_of<sp::ValueError>([] { sp::tensordot(sp::ones({2}), sp::ones({2}), -1); }),
            "[tensordot] the number of axes must be non-negative, got -1");
  EXPECT_EQ(error_of<sp::ShapeError>([] {
              sp::tensordot(sp::ones({2, 3}), sp::ones({2, 3}), 1);
            }),
            "[tensordot] shape mismatch for sum: the last 1 dims of a and the first 1 dims of b "
            "must agree, got shapes (2, 3) and (2, 3)");
  Array outer = sp::tensordot(sp::ones({2}), sp::ones({3}), 0);
  EXPECT_EQ(outer.shape(), (sp::Shape{2, 3}));
}

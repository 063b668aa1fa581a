// Text forms of array values against NumPy's str() and JAX's repr(): goldens recorded by
// tools/goldens/gen_format.py (every dtype and rank, summarised, scientific, nan/inf, 16-bit
// floats) plus a few hand-written cases.
#include "core/format.h"

#include <spmd/array.h>
#include <spmd/dtype.h>
#include <spmd/error.h>
#include <spmd/shape.h>

#include <gtest/gtest.h>

#include "support/golden.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace sp = spmd;

namespace {

struct FormatCase {
  std::string name;
  sp::DType dtype = sp::DType::float32;
  sp::Shape shape;
  bool weak = false;
  std::vector<uint8_t> data;
  std::string str;
  std::string repr;
};

std::vector<uint8_t> from_hex(const std::string& hex) {
  std::vector<uint8_t> out(hex.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) out[i] = uint8_t(std::stoi(hex.substr(2 * i, 2), 0, 16));
  return out;
}

std::string rest_of(const std::string& line, const std::string& key) {
  return line.size() > key.size() ? line.substr(key.size() + 1) : "";
}

std::string read_text(std::istream& in, const std::string& header, const std::string& key) {
  int count = std::stoi(rest_of(header, key));
  std::string text, line;
  for (int i = 0; i < count; ++i) {
    std::getline(in, line);
    text += (i ? "\n" : "") + line;
  }
  return text;
}

// Elements NumPy does not show hold 0xff bytes (NaN, -1 or the maximum), which would change
// the output if the formatter read them.
void fill_shown(FormatCase& c, const std::vector<int64_t>& offsets, const std::string& hex) {
  size_t item = size_t(sp::itemsize(c.dtype));
  std::vector<uint8_t> shown = from_hex(hex);
  c.data.assign(size_t(c.shape.size()) * item, 0xff);
  if (c.dtype == sp::DType::bool_) c.data.assign(c.data.size(), 1);
  for (size_t i = 0; i < offsets.size(); ++i)
    std::memcpy(&c.data[size_t(offsets[i]) * item], &shown[i * item], item);
}

std::vector<FormatCase> load_cases() {
  std::ifstream in(spmd_test::golden_path("format/cases.txt"));
  std::vector<FormatCase> cases;
  std::string line;
  std::vector<int64_t> offsets;
  while (std::getline(in, line)) {
    if (line.starts_with("case ")) {
      cases.emplace_back();
      cases.back().name = rest_of(line, "case");
      offsets.clear();
      continue;
    }
    if (cases.empty()) continue;
    FormatCase& c = cases.back();
    if (line.starts_with("dtype ")) {
      c.dtype = sp::dtype_from_name(rest_of(line, "dtype"));
    } else if (line.starts_with("shape")) {
      std::istringstream dims(rest_of(line, "shape"));
      std::vector<int64_t> d;
      for (int64_t v; dims >> v;) d.push_back(v);
      c.shape = sp::Shape(d);
    } else if (line.starts_with("weak ")) {
      c.weak = rest_of(line, "weak") == "1";
    } else if (line.starts_with("offsets ")) {
      std::istringstream list(rest_of(line, "offsets"));
      for (int64_t v; list >> v;) offsets.push_back(v);
    } else if (line.starts_with("data")) {
      if (offsets.empty())
        c.data = from_hex(rest_of(line, "data"));
      else
        fill_shown(c, offsets, rest_of(line, "data"));
    } else if (line.starts_with("str ")) {
      c.str = read_text(in, line, "str");
    } else if (line.starts_with("repr ")) {
      c.repr = read_text(in, line, "repr");
    }
  }
  return cases;
}

// Copies into a plain buffer: std::vector<bool> has no contiguous data().
template <class T>
std::string str_of(const std::vector<T>& values, sp::Shape shape) {
  std::unique_ptr<T[]> buffer(new T[values.size() + 1]);
  std::copy(values.begin(), values.end(), buffer.get());
  return sp::format_array_str(buffer.get(), sp::dtype_of_v<T>, shape);
}

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

TEST(Format, EveryGoldenCaseMatchesNumpyStrAndJaxRepr) {
  std::vector<FormatCase> cases = load_cases();
  ASSERT_GT(cases.size(), 500u);
  for (const FormatCase& c : cases) {
    SCOPED_TRACE(c.name);
    ASSERT_EQ(c.data.size(), size_t(c.shape.size()) * size_t(sp::itemsize(c.dtype)));
    EXPECT_EQ(sp::format_array_str(c.data.data(), c.dtype, c.shape), c.str);
    EXPECT_EQ(sp::format_array_repr(c.data.data(), c.dtype, c.shape, c.weak), c.repr);
  }
}

TEST(Format, IntegersPadToTheWidestElement) {
  EXPECT_EQ(str_of<int32_t>({0, 1, 4, 9, 16, 25, 36, 49}, {8}), "[ 0  1  4  9 16 25 36 49]");
  EXPECT_EQ(str_of<int8_t>({-128, 5}, {2}), "[-128    5]");
  EXPECT_EQ(str_of<uint64_t>({18446744073709551615ull}, {}), "18446744073709551615");
}

TEST(Format, FloatsUseTheirOwnDtypesShortestDigits) {
  EXPECT_EQ(str_of<float>({0.f, 1.f / 6, 1.f / 3, 0.5f}, {4}),
            "[0.         0.16666667 0.33333334 0.5       ]");
  EXPECT_EQ(str_of<double>({0, 1.0 / 6, 1.0 / 3, 0.5}, {4}),
            "[0.         0.16666667 0.33333333 0.5       ]");
  EXPECT_EQ(str_of<sp::float16_t>({sp::float16_t(0.1f), sp::float16_t(1.f / 3)}, {2}),
            "[0.1    0.3333]");
  EXPECT_EQ(str_of<float>({1.f / 3}, {}), "0.33333334");
}

TEST(Format, PositionalColumnsAlignOnThePoint) {
  std::vector<float> v;
  for (int i = 0; i < 8; ++i) v.push_back(float(i * i) / 2);
  EXPECT_EQ(str_of(v, {8}), "[ 0.   0.5  2.   4.5  8.  12.5 18.  24.5]");
  EXPECT_EQ(str_of<double>({-0.0, 1.5}, {2}), "[-0.   1.5]");
}

TEST(Format, ScientificNotationForWideRangesAndNonFiniteValues) {
  EXPECT_EQ(str_of<double>({1e-5, 0.5, 2}, {3}), "[1.e-05 5.e-01 2.e+00]");
  EXPECT_EQ(str_of<double>({1e-100, 1e5}, {2}), "[1.e-100 1.e+005]");
  EXPECT_EQ(str_of<float>({float(kNan), 1.f, -float(kInf)}, {3}), "[ nan   1. -inf]");
  EXPECT_EQ(str_of<double>({kNan, -kInf}, {2}), "[ nan -inf]");
}

TEST(Format, BoolsAndBfloat16) {
  EXPECT_EQ(str_of<bool>({true, false}, {2}), "[ True False]");
  EXPECT_EQ(str_of<bool>({true}, {}), "True");
  EXPECT_EQ(str_of<sp::bfloat16_t>({sp::bfloat16_t(1.5f), sp::bfloat16_t(2.f)}, {2}), "[1.5 2]");
  EXPECT_EQ(str_of<sp::bfloat16_t>({sp::bfloat16_t(0.1f)}, {}), "0.100098");
}

TEST(Format, EmptyArrays) {
  EXPECT_EQ(str_of<float>({}, {0}), "[]");
  EXPECT_EQ(str_of<float>({}, {0, 3}), "[]");
  float none = 0;
  EXPECT_EQ(sp::format_array_repr(&none, sp::DType::float32, sp::Shape{0, 3}, false),
            "Array([], shape=(0, 3), dtype=float32)");
}

TEST(Format, ReprShowsDtypeAndWeakType) {
  int32_t three = 3;
  EXPECT_EQ(sp::format_array_repr(&three, sp::DType::int32, sp::Shape{}, true),
            "Array(3, dtype=int32, weak_type=True)");
  std::vector<int32_t> v{0, 1, 4};
  EXPECT_EQ(sp::format_array_repr(v.data(), sp::DType::int32, sp::Shape{3}, false),
            "Array([0, 1, 4], dtype=int32)");
  std::vector<float> f{0.f, 0.5f};
  EXPECT_EQ(sp::format_array_repr(f.data(), sp::DType::float32, sp::Shape{2}, false),
            "Array([0. , 0.5], dtype=float32)");
}

TEST(Format, NestedArraysBreakLinesBetweenRowsAndBlocks) {
  std::vector<int32_t> v(12);
  for (int i = 0; i < 12; ++i) v[size_t(i)] = i;
  EXPECT_EQ(str_of(v, {2, 2, 3}), "[[[ 0  1  2]\n  [ 3  4  5]]\n\n [[ 6  7  8]\n  [ 9 10 11]]]");
  EXPECT_EQ(sp::format_array_repr(v.data(), sp::DType::int32, sp::Shape{2, 6}, false),
            "Array([[ 0,  1,  2,  3,  4,  5],\n       [ 6,  7,  8,  9, 10, 11]], dtype=int32)");
}

TEST(Format, SummarisedMillionElementArrayFormatsOnlyTheShownElements) {
  std::vector<float> v(1000 * 1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i % 1000);
  // Hidden elements take no part in the format, as in NumPy: a wide value or a NaN in the
  // middle changes neither the widths nor the notation.
  v[500 * 1000 + 500] = 123456789.0f;
  v[400 * 1000 + 3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(str_of(v, {1000, 1000}),
            "[[  0.   1.   2. ... 997. 998. 999.]\n"
            " [  0.   1.   2. ... 997. 998. 999.]\n"
            " [  0.   1.   2. ... 997. 998. 999.]\n"
            " ...\n"
            " [  0.   1.   2. ... 997. 998. 999.]\n"
            " [  0.   1.   2. ... 997. 998. 999.]\n"
            " [  0.   1.   2. ... 997. 998. 999.]]");
}

namespace {

struct NumpyReprCase {
  std::string name;
  std::vector<int64_t> dims;
  std::vector<double> values;
  std::string repr;
};

// tests/goldens/format/numpy_repr.txt (tools/goldens/gen_numpy_repr.py).
std::vector<NumpyReprCase> numpy_repr_cases() {
  std::ifstream f(std::string(SPMD_GOLDEN_DIR) + "/format/numpy_repr.txt");
  std::vector<NumpyReprCase> cases;
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("case ", 0) != 0) continue;
    NumpyReprCase c;
    c.name = line.substr(5);
    std::getline(f, line);
    std::istringstream dims(line.substr(5));
    for (int64_t d; dims >> d;) c.dims.push_back(d);
    std::getline(f, line);
    std::vector<uint8_t> bytes = from_hex(line.substr(5));
    c.values.resize(bytes.size() / 8);
    if (!bytes.empty()) std::memcpy(c.values.data(), bytes.data(), bytes.size());
    std::getline(f, line);
    int n = std::stoi(line.substr(5));
    for (int i = 0; i < n; ++i) {
      std::getline(f, line);
      c.repr += (i ? "\n" : "") + line;
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

TEST(Format, NumpyReprOfFloat64MatchesNumpy) {
  std::vector<NumpyReprCase> cases = numpy_repr_cases();
  ASSERT_GE(cases.size(), 10u);
  for (const NumpyReprCase& c : cases)
    EXPECT_EQ(sp::format_ndarray_repr(c.values.data(), sp::DType::float64, sp::Shape(c.dims)),
              c.repr)
        << c.name;
}

TEST(Format, NumpyReprTakesAShapeThatHoldsTheValues) {
  EXPECT_EQ(sp::numpy_repr({0.5, 1.0, -2.25}), "array([ 0.5 ,  1.  , -2.25])");
  EXPECT_EQ(sp::numpy_repr({1, 2, 3, 4}, sp::Shape{2, 2}), "array([[1., 2.],\n       [3., 4.]])");
  try {
    sp::numpy_repr({1, 2, 3}, sp::Shape{2, 2});
    FAIL() << "expected ValueError";
  } catch (const sp::ValueError& e) {
    EXPECT_STREQ(e.what(), "[numpy_repr] shape (2, 2) holds 4 values, got 3");
  }
}

}  // namespace

// Golden files and array comparisons for tests. Elements are read straight from the arrays' host
// buffers so the comparisons do not depend on spmd's own conversion kernels being right.
#include "support/golden.h"

#include <spmd/sharding.h>
#include "support/golden_values.h"

#include <spmd/io.h>

#include "core/array_impl.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <limits>
#include <mutex>
#include <sstream>

namespace spmd_test {
namespace {

using spmd::Array;
using spmd::DType;

constexpr int64_t kFar = std::numeric_limits<int64_t>::max();

// Sign-magnitude float bits mapped onto a line where neighbours differ by one (+0 == -0).
int64_t ordered_key(uint64_t bits, int width) {
  uint64_t sign = uint64_t(1) << (width - 1);
  int64_t magnitude = int64_t(bits & (sign - 1));
  return (bits & sign) ? -magnitude : magnitude;
}

int64_t key_distance(int64_t a, int64_t b) {
  // The true difference is below 2^64, so unsigned arithmetic gets it exactly; then saturate.
  uint64_t d = a > b ? uint64_t(a) - uint64_t(b) : uint64_t(b) - uint64_t(a);
  return d > uint64_t(kFar) ? kFar : int64_t(d);
}

// Raw bits of element i of a floating array, and the width of its type.
uint64_t float_bits(const void* data, DType t, int64_t i) {
  int size = spmd::itemsize(t);
  uint64_t bits = 0;
  std::memcpy(&bits, static_cast<const char*>(data) + i * size, size_t(size));
  return bits;
}

bool bits_are_nan(uint64_t bits, DType t) {
  switch (t) {
    case DType::bfloat16:
      return (bits & 0x7fff) > 0x7f80;
    case DType::float16:
      return (bits & 0x7fff) > 0x7c00;
    case DType::float32:
      return (bits & 0x7fffffffu) > 0x7f800000u;
    default:
      return (bits & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
  }
}

bool bits_are_inf(uint64_t bits, DType t) {
  switch (t) {
    case DType::bfloat16:
      return (bits & 0x7fff) == 0x7f80;
    case DType::float16:
      return (bits & 0x7fff) == 0x7c00;
    case DType::float32:
      return (bits & 0x7fffffffu) == 0x7f800000u;
    default:
      return (bits & 0x7fffffffffffffffull) == 0x7ff0000000000000ull;
  }
}

// Distance between two floating elements given as raw bits of dtype t.
int64_t float_bits_distance(uint64_t a, uint64_t b, DType t) {
  bool a_nan = bits_are_nan(a, t), b_nan = bits_are_nan(b, t);
  if (a_nan || b_nan) return a_nan && b_nan ? 0 : kFar;
  int width = 8 * spmd::itemsize(t);
  int64_t ka = ordered_key(a, width), kb = ordered_key(b, width);
  if ((bits_are_inf(a, t) || bits_are_inf(b, t)) && ka != kb) return kFar;
  return key_distance(ka, kb);
}

// |a - b| for two integer or bool elements, exact for 64-bit values, saturating.
int64_t integer_distance(const void* a, const void* b, DType t, int64_t i) {
  return spmd::dispatch_dtype(t, [&](auto tag) -> int64_t {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      T x = static_cast<const T*>(a)[i], y = static_cast<const T*>(b)[i];
      if constexpr (std::is_same_v<T, bool>) {
        return x != y;
      } else if constexpr (std::is_unsigned_v<T>) {
        uint64_t d = x > y ? uint64_t(x - y) : uint64_t(y - x);
        return d > uint64_t(kFar) ? kFar : int64_t(d);
      } else {
        return key_distance(int64_t(x), int64_t(y));
      }
    }
    return 0;
  });
}

int64_t element_distance(const void* a, const void* b, DType t, int64_t i) {
  if (spmd::is_floating(t)) return float_bits_distance(float_bits(a, t, i), float_bits(b, t, i), t);
  return integer_distance(a, b, t, i);
}

// The 16-bit float types convert to float only.
template <class T>
double to_double(T v) {
  if constexpr (std::is_same_v<T, spmd::bfloat16_t> || std::is_same_v<T, spmd::float16_t>)
    return double(float(v));
  else
    return double(v);
}

double element_as_double(const void* data, DType t, int64_t i) {
  return spmd::dispatch_dtype(
      t, [&](auto tag) { return to_double(static_cast<const decltype(tag)*>(data)[i]); });
}

// Element i printed exactly: integers in full, floats with enough digits to round-trip.
std::string element_str(const void* data, DType t, int64_t i) {
  std::ostringstream os;
  spmd::dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    T v = static_cast<const T*>(data)[i];
    if constexpr (std::is_same_v<T, bool>)
      os << (v ? "True" : "False");
    else if constexpr (std::is_integral_v<T>)
      os << +v;
    else
      os << std::setprecision(std::is_same_v<T, double> ? 17 : 9) << to_double(v);
  });
  if (spmd::is_floating(t)) os << " (0x" << std::hex << float_bits(data, t, i) << ")";
  return os.str();
}

// "(1, 2)" for flat index 5 of shape (2, 3).
std::string index_str(const spmd::Shape& shape, int64_t flat) {
  std::vector<int64_t> index(size_t(shape.ndim()));
  for (int d = shape.ndim() - 1; d >= 0; --d) {
    index[size_t(d)] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  return spmd::Shape(index).str();
}

::testing::AssertionResult check_same_type(const Array& actual, const Array& expected) {
  if (!actual.valid() || !expected.valid())
    return ::testing::AssertionFailure()
           << (actual.valid() ? "expected" : "actual") << " is an empty Array handle";
  if (actual.shape() != expected.shape())
    return ::testing::AssertionFailure()
           << "shape mismatch: actual " << actual.shape() << ", expected " << expected.shape();
  if (actual.dtype() != expected.dtype())
    return ::testing::AssertionFailure()
           << "dtype mismatch: actual " << spmd::dtype_name(actual.dtype()) << ", expected "
           << spmd::dtype_name(expected.dtype());
  return ::testing::AssertionSuccess();
}

// Walks both arrays; `differs(a, b, i)` says whether element i fails. Reports the first failure
// with both values and their ulp distance, and how many elements failed.
template <class Differs>
::testing::AssertionResult compare(const Array& actual, const Array& expected,
                                   const std::string& rule, Differs differs) {
  auto same = check_same_type(actual, expected);
  if (!same) return same;
  const void* a = spmd::host_data(actual, "compare");
  const void* b = spmd::host_data(expected, "compare");
  DType t = actual.dtype();
  int64_t first = -1, failures = 0, worst = 0;
  for (int64_t i = 0; i < actual.size(); ++i) {
    if (!differs(a, b, i)) continue;
    if (first < 0) first = i;
    ++failures;
    worst = std::max(worst, element_distance(a, b, t, i));
  }
  if (first < 0) return ::testing::AssertionSuccess();
  auto ulps = [](int64_t d) { return d == kFar ? std::string("inf") : std::to_string(d); };
  return ::testing::AssertionFailure()
         << failures << " of " << actual.size() << " elements of " << spmd::dtype_name(t)
         << actual.shape() << " differ (" << rule << "); first at index "
         << index_str(actual.shape(), first) << " [flat " << first << "]: actual "
         << element_str(a, t, first) << ", expected " << element_str(b, t, first) << ", "
         << ulps(element_distance(a, b, t, first)) << " ulps; largest distance " << ulps(worst)
         << " ulps";
}

}  // namespace

std::string golden_text(std::string_view relative) {
  std::ifstream in(golden_path(relative), std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing golden " << relative;
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

std::map<std::string, std::string> golden_blocks(std::string_view relative) {
  std::map<std::string, std::string> out;
  std::istringstream in(golden_text(relative));
  std::string line, name;
  while (std::getline(in, line)) {
    if (line.rfind("=== ", 0) == 0)
      name = line.substr(4);
    else if (!name.empty())
      out[name] += (out[name].empty() ? "" : "\n") + line;
  }
  return out;
}

std::string jax_error(std::string_view relative, std::string_view name) {
  std::istringstream in(golden_text(relative));
  const std::string header = "=== " + std::string(name);
  std::string line, text;
  bool found = false, inside = false;
  while (std::getline(in, line)) {
    if (line.rfind("=== ", 0) == 0) {
      if (inside) break;
      inside = found = line == header;
      continue;
    }
    if (inside) text += (text.empty() ? "" : "\n") + line;
  }
  EXPECT_TRUE(found) << "no case " << name << " in " << relative;
  size_t colon = text.find(": ");
  return colon == std::string::npos ? text : text.substr(colon + 2);
}

std::string rejoined_params(const std::string& text) {
  std::vector<std::string> lines = split_fields(text, '\n');
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string line = lines[i];
    if (!line.empty() && line.back() == '[') {
      std::string joined = line;
      size_t j = i + 1;
      for (; j < lines.size() && lines[j].find_first_not_of(' ') != lines[j].find(']'); ++j)
        joined +=
            (joined.back() == '[' ? "" : " ") + lines[j].substr(lines[j].find_first_not_of(' '));
      if (j < lines.size()) {
        joined += lines[j].substr(lines[j].find(']'));
        if (joined.size() <= 80) {
          line = joined;
          i = j;
        }
      }
    }
    out += (out.empty() ? "" : "\n") + line;
  }
  return out;
}

std::string without_numpy_ints(std::string jaxpr) {
  for (size_t at; (at = jaxpr.find("np.int64(")) != std::string::npos;) {
    const size_t close = jaxpr.find(')', at);
    jaxpr = jaxpr.substr(0, at) + jaxpr.substr(at + 9, close - at - 9) + jaxpr.substr(close + 1);
  }
  return jaxpr;
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = 0; (at = text.find(from, at)) != std::string::npos; at += to.size())
    text.replace(at, from.size(), to);
  return text;
}

std::vector<std::string> split_fields(const std::string& s, char sep) {
  std::vector<std::string> out(1);
  for (char c : s) {
    if (c == sep)
      out.emplace_back();
    else
      out.back() += c;
  }
  return out;
}

std::vector<std::vector<float>> golden_float_lines(std::string_view relative) {
  std::istringstream lines(golden_text(relative));
  std::vector<std::vector<float>> out;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream values(line);
    out.emplace_back();
    for (double v; values >> v;) out.back().push_back(float(v));
  }
  return out;
}

std::string golden_path(std::string_view relative) {
  std::string root = SPMD_GOLDEN_DIR;
  if (!root.empty() && root.back() != '/') root += '/';
  return root + std::string(relative);
}

const std::map<std::string, Array>& load_golden(std::string_view npz_relative_path) {
  static std::mutex mutex;
  static std::map<std::string, std::map<std::string, Array>, std::less<>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(npz_relative_path);
  if (it == cache.end())
    it =
        cache
            .emplace(std::string(npz_relative_path), spmd::load_npz(golden_path(npz_relative_path)))
            .first;
  return it->second;
}

std::string sharding_reprs(const std::vector<Array>& leaves) {
  std::string out;
  for (const Array& x : leaves) {
    if (!out.empty()) out += '\n';
    out += x.sharding()->repr();
  }
  return out;
}

::testing::AssertionResult arrays_equal(const Array& actual, const Array& expected) {
  DType t = actual.valid() ? actual.dtype() : DType::float32;
  return compare(actual, expected, "exact", [t](const void* a, const void* b, int64_t i) {
    if (!spmd::is_floating(t)) return integer_distance(a, b, t, i) != 0;
    uint64_t x = float_bits(a, t, i), y = float_bits(b, t, i);
    if (bits_are_nan(x, t) && bits_are_nan(y, t)) return false;
    return x != y;
  });
}

::testing::AssertionResult arrays_close_ulp(const Array& actual, const Array& expected,
                                            int64_t max_ulps) {
  DType t = actual.valid() ? actual.dtype() : DType::float32;
  return compare(actual, expected, "max " + std::to_string(max_ulps) + " ulps",
                 [t, max_ulps](const void* a, const void* b, int64_t i) {
                   return element_distance(a, b, t, i) > max_ulps;
                 });
}

::testing::AssertionResult arrays_close(const Array& actual, const Array& expected, double rtol,
                                        double atol) {
  DType t = actual.valid() ? actual.dtype() : DType::float32;
  std::ostringstream rule;
  rule << "rtol " << rtol << ", atol " << atol;
  return compare(actual, expected, rule.str(), [=](const void* a, const void* b, int64_t i) {
    double x = element_as_double(a, t, i), y = element_as_double(b, t, i);
    if (std::isnan(x) || std::isnan(y)) return !(std::isnan(x) && std::isnan(y));
    if (std::isinf(x) || std::isinf(y)) return x != y;
    return !(std::fabs(x - y) <= atol + rtol * std::fabs(y));
  });
}

int64_t ulp_distance(double a, double b, DType t) {
  if (!spmd::is_floating(t)) {
    if (std::isnan(a) || std::isnan(b)) return kFar;
    double d = std::fabs(a - b);
    return d >= 9.2e18 ? kFar : int64_t(d);
  }
  auto bits_of = [t](double v) -> uint64_t {
    switch (t) {
      case DType::bfloat16:
        return spmd::bfloat16_t::from_float(float(v));
      case DType::float16:
        return spmd::float16_t::from_float(float(v));
      case DType::float32: {
        float f = float(v);
        uint32_t u;
        std::memcpy(&u, &f, 4);
        return u;
      }
      default: {
        uint64_t u;
        std::memcpy(&u, &v, 8);
        return u;
      }
    }
  };
  return float_bits_distance(bits_of(a), bits_of(b), t);
}

}  // namespace spmd_test

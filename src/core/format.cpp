// NumPy's text form of array values (str(np.asarray(x)) with the default print options) and
// JAX's Array repr built on np.array2string. Only the elements that are shown get formatted, so
// printing a huge summarised array costs about as much as printing its corners.
#include "core/format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace spmd {
namespace {

// NumPy's default print options.
constexpr int kPrecision = 8;
constexpr int64_t kThreshold = 1000;
constexpr int64_t kEdgeItems = 3;
constexpr int kLineWidth = 75;

// ---------------------------------------------------------------------------------------------
// Decimal digits of floating-point values.

// A non-negative finite value written as d0.d1d2... x 10^exponent without trailing zeros
// ("0" with exponent 0 for zero).
struct Decimal {
  std::string digits;
  int exponent = 0;
};

void trim_trailing_zeros(std::string& digits) {
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
}

// Reads std::to_chars' scientific output: "1.25e-05", "3e+10".
Decimal parse_scientific(std::string_view s) {
  Decimal d;
  size_t e = s.find('e');
  for (char c : s.substr(0, e))
    if (c != '.') d.digits.push_back(c);
  size_t exp_start = e + 1 + (s[e + 1] == '+' ? 1 : 0);
  std::from_chars(s.data() + exp_start, s.data() + s.size(), d.exponent);
  trim_trailing_zeros(d.digits);
  return d;
}

template <class F>
Decimal shortest_float_decimal(F v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  return parse_scientific({buf, size_t(r.ptr - buf)});
}

// `v` correctly rounded to `frac_digits` digits after the first significant one.
Decimal rounded_scientific(double v, int frac_digits) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific, frac_digits);
  return parse_scientific({buf, size_t(r.ptr - buf)});
}

// `v` correctly rounded to `frac_digits` digits after the decimal point.
Decimal rounded_fixed(double v, int frac_digits) {
  char buf[400];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, frac_digits);
  std::string_view s(buf, size_t(r.ptr - buf));
  size_t dot = s.find('.');
  Decimal d;
  d.digits = std::string(s.substr(0, dot));
  d.exponent = int(d.digits.size()) - 1;
  if (dot != std::string_view::npos) d.digits += s.substr(dot + 1);
  size_t first = d.digits.find_first_not_of('0');
  if (first == std::string::npos) return {"0", 0};
  d.digits.erase(0, first);
  d.exponent -= int(first);
  trim_trailing_zeros(d.digits);
  return d;
}

// A p-digit decimal candidate mantissa * 10^(exponent - p + 1).
struct Candidate {
  int64_t mantissa;
  int p;
  int exponent;
  double value() const {
    std::string s = std::to_string(mantissa) + "e" + std::to_string(exponent - p + 1);
    double v = 0;
    std::from_chars(s.data(), s.data() + s.size(), v);
    return v;
  }
  Decimal decimal() const {
    Decimal d{std::to_string(mantissa), exponent};
    trim_trailing_zeros(d.digits);
    return d;
  }
};

int64_t pow10_int(int p) {
  int64_t r = 1;
  while (p-- > 0) r *= 10;
  return r;
}

// The p-digit candidate next to `c` in direction `dir` (+1 or -1), staying at p digits.
Candidate step(Candidate c, int dir) {
  c.mantissa += dir;
  if (c.mantissa == pow10_int(c.p)) {
    c.mantissa = pow10_int(c.p - 1);
    ++c.exponent;
  } else if (c.mantissa == pow10_int(c.p - 1) - 1) {
    c.mantissa = pow10_int(c.p) - 1;
    --c.exponent;
  }
  return c;
}

// Shortest digits that read back as the same float16 (NumPy's Dragon4 "unique" mode): the
// fewest significant digits with a decimal inside the value's rounding interval, the one
// nearest the value when two qualify. Interval ends count when the mantissa is even, since
// round-half-even reading lands on the even value.
Decimal shortest_half_decimal(uint16_t bits) {
  bits &= 0x7fff;
  if (bits == 0) return {"0", 0};
  double v = float16_t::to_float(bits);
  int biased_exponent = bits >> 10;
  double ulp = std::ldexp(1.0, std::max(biased_exponent, 1) - 25);
  bool power_of_two = (bits & 0x3ff) == 0 && biased_exponent > 1;
  double lo = v - (power_of_two ? ulp / 4 : ulp / 2);
  double hi = v + ulp / 2;
  bool inclusive = (bits & 1) == 0;
  auto inside = [&](double c) { return inclusive ? lo <= c && c <= hi : lo < c && c < hi; };
  for (int p = 1;; ++p) {
    Decimal nearest = rounded_scientific(v, p - 1);
    nearest.digits.resize(size_t(p), '0');
    Candidate c{std::stoll(nearest.digits), p, nearest.exponent};
    double cv = c.value();
    if (inside(cv) || p >= 17) return c.decimal();
    Candidate other = step(c, cv < v ? 1 : -1);
    if (inside(other.value())) return other.decimal();
  }
}

Decimal shortest_decimal(double v, DType t) {
  v = std::fabs(v);
  switch (t) {
    case DType::float16:
      return shortest_half_decimal(float16_t(float(v)).bits);
    case DType::float32:
      return shortest_float_decimal(float(v));
    default:
      return shortest_float_decimal(v);
  }
}

int fraction_digits_positional(const Decimal& d) {
  return std::max(0, int(d.digits.size()) - 1 - d.exponent);
}

// Splits a decimal into the digits before and after the point.
void positional_parts(const Decimal& d, std::string& int_part, std::string& frac_part) {
  int n = int(d.digits.size());
  if (d.exponent >= 0) {
    int int_len = d.exponent + 1;
    int_part = d.digits.substr(0, size_t(std::min(int_len, n)));
    int_part.resize(size_t(int_len), '0');
    frac_part = int_len < n ? d.digits.substr(size_t(int_len)) : "";
  } else {
    int_part = "0";
    frac_part = std::string(size_t(-d.exponent - 1), '0') + d.digits;
  }
}

// "e+05", "e-100": at least two exponent digits, or `digits` when more.
std::string exponent_text(int exponent, int digits) {
  std::string e = std::to_string(std::abs(exponent));
  if (int(e.size()) < digits) e.insert(0, size_t(digits) - e.size(), '0');
  return std::string(exponent < 0 ? "e-" : "e+") + e;
}

int exponent_digit_count(int exponent) {
  return std::max(2, int(std::to_string(std::abs(exponent)).size()));
}

std::string pad_left(std::string s, size_t width) {
  if (s.size() < width) s.insert(0, width - s.size(), ' ');
  return s;
}

// ---------------------------------------------------------------------------------------------
// Element formatters: each turns the shown elements into words of NumPy's common width.

// NumPy picks scientific notation from the finite non-zero magnitudes, deciding in the array's
// own dtype (so float32 1e-4, stored as 9.99999975e-05, still counts as 1e-4).
bool needs_scientific(const std::vector<double>& values, DType t) {
  double max_abs = 0, min_abs = INFINITY;
  for (double v : values) {
    double a = std::fabs(v);
    if (!std::isfinite(v) || a == 0) continue;
    max_abs = std::max(max_abs, a);
    min_abs = std::min(min_abs, a);
  }
  if (max_abs == 0) return false;
  switch (t) {
    case DType::float16:
      return max_abs >= 1e3 || min_abs < float16_t::to_float(float16_t(1e-4f).bits) ||
             float16_t::to_float(float16_t(float(max_abs) / float(min_abs)).bits) > 1000.f;
    case DType::float32:
      return max_abs >= 1e6 || min_abs < double(1e-4f) || float(max_abs) / float(min_abs) > 1e3f;
    default:
      return max_abs >= 1e8 || min_abs < 1e-4 || max_abs / min_abs > 1e3;
  }
}

// The widths NumPy's FloatingFormat settles on for one array (its first pass).
struct FloatFormat {
  bool scientific = false;
  size_t pad_left = 0;   // characters before the point, sign included
  size_t pad_right = 0;  // characters after the point (the exponent too in scientific form)
  size_t precision = 0;  // fraction digits in scientific form
  int exp_digits = 0;
};

// The unique digits of a finite value, cut at kPrecision fraction digits.
Decimal first_pass_digits(double v, DType t, bool scientific) {
  Decimal d = shortest_decimal(v, t);
  if (scientific && int(d.digits.size()) - 1 > kPrecision)
    return rounded_scientific(std::fabs(v), kPrecision);
  if (!scientific && fraction_digits_positional(d) > kPrecision)
    return rounded_fixed(std::fabs(v), kPrecision);
  return d;
}

FloatFormat fill_float_format(const std::vector<double>& values, const std::vector<Decimal>& digits,
                              bool scientific) {
  FloatFormat f;
  f.scientific = scientific;
  bool any_finite = false, any_non_finite = false, negative_inf = false;
  for (size_t i = 0; i < values.size(); ++i) {
    double v = values[i];
    if (!std::isfinite(v)) {
      any_non_finite = true;
      negative_inf |= std::isinf(v) && v < 0;
      continue;
    }
    any_finite = true;
    const Decimal& d = digits[i];
    size_t sign = std::signbit(v) ? 1 : 0;
    if (scientific) {
      f.pad_left = std::max(f.pad_left, sign + 1);
      f.precision = std::max(f.precision, d.digits.size() - 1);
      f.exp_digits = std::max(f.exp_digits, exponent_digit_count(d.exponent));
    } else {
      std::string int_part, frac_part;
      positional_parts(d, int_part, frac_part);
      f.pad_left = std::max(f.pad_left, sign + int_part.size());
      f.pad_right = std::max(f.pad_right, frac_part.size());
    }
  }
  // "nan" and "inf" are right-aligned with the whole number, exponent included.
  if (scientific && any_finite) f.pad_right = size_t(f.exp_digits) + 2 + f.precision;
  if (any_non_finite) {
    int offset = int(f.pad_right) + 1;
    f.pad_left = size_t(std::max({int(f.pad_left), 3 - offset, 3 + int(negative_inf) - offset}));
  }
  return f;
}

std::string render_float(double v, Decimal d, const FloatFormat& f) {
  if (std::isnan(v)) return pad_left("nan", f.pad_left + f.pad_right + 1);
  if (std::isinf(v)) return pad_left(v < 0 ? "-inf" : "inf", f.pad_left + f.pad_right + 1);
  std::string sign = std::signbit(v) ? "-" : "";
  if (f.scientific) {
    // NumPy's second pass asks Dragon4 for at least `precision` digits, so a value with fewer
    // unique digits shows its exact binary value rounded there (float32 0.3 prints as
    // 3.0000001e-01 next to a value that needs eight digits).
    if (d.digits.size() - 1 != f.precision) d = rounded_scientific(std::fabs(v), int(f.precision));
    std::string frac = d.digits.substr(1);
    frac.resize(f.precision, '0');
    return pad_left(sign + d.digits[0], f.pad_left) + "." + frac +
           exponent_text(d.exponent, f.exp_digits);
  }
  std::string int_part, frac_part;
  positional_parts(d, int_part, frac_part);
  frac_part.resize(f.pad_right, ' ');
  return pad_left(sign + int_part, f.pad_left) + "." + frac_part;
}

std::vector<std::string> format_floats(const std::vector<double>& values, DType t) {
  bool scientific = needs_scientific(values, t);
  std::vector<Decimal> digits(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    if (std::isfinite(values[i])) digits[i] = first_pass_digits(values[i], t, scientific);
  FloatFormat f = fill_float_format(values, digits, scientific);
  std::vector<std::string> words;
  words.reserve(values.size());
  for (size_t i = 0; i < values.size(); ++i) words.push_back(render_float(values[i], digits[i], f));
  return words;
}

// ml_dtypes prints bfloat16 through C++ stream output of the float value, i.e. printf's %g.
std::string bfloat16_text(float f) {
  if (std::isnan(f)) return "nan";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", double(f));
  return buf;
}

template <class T>
double element_as_double(const void* data, int64_t offset) {
  const T& x = static_cast<const T*>(data)[offset];
  if constexpr (std::is_same_v<T, bfloat16_t> || std::is_same_v<T, float16_t>)
    return double(float(x));
  else
    return double(x);
}

template <class T>
std::string integer_text(T x) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

// Words for the elements at `offsets`, padded as NumPy pads them within one array.
std::vector<std::string> format_words(const void* data, DType t,
                                      const std::vector<int64_t>& offsets, bool zero_d) {
  std::vector<std::string> words;
  words.reserve(offsets.size());
  dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    const T* p = static_cast<const T*>(data);
    if constexpr (std::is_same_v<T, bool>) {
      for (int64_t o : offsets) words.push_back(p[o] ? (zero_d ? "True" : " True") : "False");
    } else if constexpr (std::is_integral_v<T>) {
      size_t width = 0;
      for (int64_t o : offsets) {
        words.push_back(integer_text(p[o]));
        width = std::max(width, words.back().size());
      }
      for (std::string& w : words) w = pad_left(std::move(w), width);
    } else if constexpr (std::is_same_v<T, bfloat16_t>) {
      for (int64_t o : offsets) words.push_back(bfloat16_text(float(p[o])));
    } else {
      std::vector<double> values;
      values.reserve(offsets.size());
      for (int64_t o : offsets) values.push_back(element_as_double<T>(data, o));
      words = format_floats(values, t);
    }
  });
  return words;
}

// str() of a NumPy scalar: floats print their shortest digits in full, positionally between
// 1e-4 and a per-dtype bound, otherwise in scientific form ("1e+16", "1.5e-05").
std::string float_scalar_text(double v, DType t) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  double a = std::fabs(v);
  double upper = t == DType::float16 ? 1e3 : t == DType::float32 ? 1e6 : 1e16;
  Decimal d = shortest_decimal(v, t);
  std::string sign = std::signbit(v) ? "-" : "";
  if (a == 0 || (a >= 1e-4 && a < upper)) {
    std::string int_part, frac_part;
    positional_parts(d, int_part, frac_part);
    return sign + int_part + "." + (frac_part.empty() ? "0" : frac_part);
  }
  std::string frac = d.digits.size() > 1 ? "." + d.digits.substr(1) : "";
  return sign + d.digits.substr(0, 1) + frac + exponent_text(d.exponent, 2);
}

std::string scalar_str(const void* data, DType t) {
  return dispatch_dtype(t, [&](auto tag) -> std::string {
    using T = decltype(tag);
    const T& x = *static_cast<const T*>(data);
    if constexpr (std::is_same_v<T, bool>)
      return x ? "True" : "False";
    else if constexpr (std::is_integral_v<T>)
      return integer_text(x);
    else if constexpr (std::is_same_v<T, bfloat16_t>)
      return bfloat16_text(float(x));
    else
      return float_scalar_text(element_as_double<T>(data, 0), t);
  });
}

// ---------------------------------------------------------------------------------------------
// Layout: NumPy's _formatArray line breaking and bracket nesting.

bool summarised_axis(bool summarise, int64_t dim) {
  return summarise && dim > 2 * kEdgeItems;
}

// Offsets of the shown elements in printing order: with summarisation each long axis keeps
// only its first and last kEdgeItems entries.
void collect_offsets(const Shape& shape, const std::vector<int64_t>& strides, bool summarise,
                     int axis, int64_t base, std::vector<int64_t>& out) {
  if (axis == shape.ndim()) {
    out.push_back(base);
    return;
  }
  int64_t dim = shape[axis];
  auto visit = [&](int64_t i) {
    collect_offsets(shape, strides, summarise, axis + 1, base + i * strides[size_t(axis)], out);
  };
  if (summarised_axis(summarise, dim)) {
    for (int64_t i = 0; i < kEdgeItems; ++i) visit(i);
    for (int64_t i = dim - kEdgeItems; i < dim; ++i) visit(i);
  } else {
    for (int64_t i = 0; i < dim; ++i) visit(i);
  }
}

std::string rstrip(std::string_view s) {
  size_t end = s.find_last_not_of(" \n");
  return std::string(s.substr(0, end == std::string_view::npos ? 0 : end + 1));
}

class ArrayLayout {
 public:
  ArrayLayout(const Shape& shape, const std::vector<std::string>& words, bool summarise,
              std::string_view separator)
      : shape_(shape), words_(words), summarise_(summarise), separator_(separator) {}

  std::string format(const std::string& next_line_prefix, int line_width) {
    next_word_ = 0;
    return recurse(0, next_line_prefix, line_width);
  }

 private:
  // Appends `word` to `line`, first moving `line` into `s` when the word would overflow.
  static void extend_line(std::string& s, std::string& line, const std::string& word,
                          int line_width, const std::string& next_line_prefix) {
    bool needs_wrap =
        line.size() + word.size() > size_t(line_width) && line.size() > next_line_prefix.size();
    if (needs_wrap) {
      s += rstrip(line) + "\n";
      line = next_line_prefix;
    }
    line += word;
  }

  std::string recurse(int axis, const std::string& hanging_indent, int curr_width) {
    if (axis == shape_.ndim()) return words_[next_word_++];
    std::string next_hanging_indent = hanging_indent + " ";
    int next_width = curr_width - 1;
    int64_t dim = shape_[axis];
    bool show_summary = summarised_axis(summarise_, dim);
    int64_t leading = show_summary ? kEdgeItems : 0;
    int64_t trailing = show_summary ? kEdgeItems : dim;
    int axes_left = shape_.ndim() - axis;
    std::string s;
    if (axes_left == 1) {
      int elem_width = curr_width - std::max<int>(int(rstrip(separator_).size()), 1);
      std::string line = hanging_indent;
      auto add = [&](const std::string& word, bool last) {
        extend_line(s, line, word, elem_width, hanging_indent);
        if (!last) line += separator_;
      };
      for (int64_t i = 0; i < leading; ++i)
        add(recurse(axis + 1, next_hanging_indent, next_width), false);
      if (show_summary) add("...", false);
      for (int64_t i = trailing; i > 1; --i)
        add(recurse(axis + 1, next_hanging_indent, next_width), false);
      add(recurse(axis + 1, next_hanging_indent, next_width), true);
      s += line;
    } else {
      std::string line_sep = rstrip(separator_) + std::string(size_t(axes_left - 1), '\n');
      for (int64_t i = 0; i < leading; ++i)
        s += hanging_indent + recurse(axis + 1, next_hanging_indent, next_width) + line_sep;
      if (show_summary) s += hanging_indent + "..." + line_sep;
      for (int64_t i = trailing; i > 1; --i)
        s += hanging_indent + recurse(axis + 1, next_hanging_indent, next_width) + line_sep;
      s += hanging_indent + recurse(axis + 1, next_hanging_indent, next_width);
    }
    return "[" + s.substr(hanging_indent.size()) + "]";
  }

  const Shape& shape_;
  const std::vector<std::string>& words_;
  bool summarise_;
  std::string separator_;
  size_t next_word_ = 0;
};

// np.array2string for a non-empty array; `prefix` is the text printed before the array on its
// first line, `line_width` the width left after any suffix.
std::string array2string(const void* data, DType t, const Shape& shape, std::string_view separator,
                         std::string_view prefix, int line_width) {
  bool summarise = shape.size() > kThreshold;
  std::vector<int64_t> offsets;
  collect_offsets(shape, shape.strides(), summarise, 0, 0, offsets);
  std::vector<std::string> words = format_words(data, t, offsets, shape.ndim() == 0);
  ArrayLayout layout(shape, words, summarise, separator);
  return layout.format(std::string(prefix.size() + 1, ' '), line_width);
}

}  // namespace

std::string format_array_str(const void* data, DType t, const Shape& shape) {
  if (shape.ndim() == 0) return scalar_str(data, t);
  if (shape.size() == 0) return "[]";
  return array2string(data, t, shape, " ", "", kLineWidth);
}

std::string format_array_repr(const void* data, DType t, const Shape& shape, bool weak_type) {
  const std::string prefix = "Array(";
  std::string dtype_text = "dtype=" + std::string(dtype_name(t));
  if (weak_type) dtype_text += ", weak_type=True";
  // JAX passes suffix=",", which NumPy takes off the line width.
  std::string body = shape.size() == 0 ? "[], shape=" + shape.str()
                                       : array2string(data, t, shape, ", ", prefix, kLineWidth - 1);
  // JAX's own rule (including its off-by-two length and a same-line spacer of prefix width).
  size_t newline = body.rfind('\n');
  int64_t last_line_len =
      int64_t(body.size()) - (newline == std::string::npos ? -1 : int64_t(newline)) + 1;
  bool too_long = last_line_len + int64_t(dtype_text.size()) + 2 > kLineWidth;
  std::string spacer = too_long ? std::string(prefix.size(), ' ') : " ";
  return prefix + body + "," + spacer + dtype_text + ")";
}

std::string format_ndarray_repr(const void* data, DType t, const Shape& shape) {
  const std::string prefix = "array(";
  // np.array_repr: suffix ")" is taken off the line width; the dtype is written unless NumPy
  // infers it from the text (float64, int64, bool).
  std::string body =
      shape.size() == 0 ? "[]" : array2string(data, t, shape, ", ", prefix, kLineWidth - 1);
  std::vector<std::string> extras;
  // NumPy 2.2 names the shape of summarised arrays too.
  if ((shape.size() == 0 && shape.ndim() != 1) || shape.size() > kThreshold)
    extras.push_back("shape=" + shape.str());
  bool implied = t == DType::float64 || t == DType::int64 || t == DType::bool_;
  if (!implied || shape.size() == 0) extras.push_back("dtype=" + std::string(dtype_name(t)));
  if (extras.empty()) return prefix + body + ")";
  std::string head = prefix + body + ",";
  std::string tail;
  for (size_t i = 0; i < extras.size(); ++i) tail += (i ? ", " : "") + extras[i];
  tail += ")";
  size_t newline = head.rfind('\n');
  size_t last_line_len = head.size() - (newline == std::string::npos ? 0 : newline + 1);
  std::string spacer = last_line_len + tail.size() + 1 > size_t(kLineWidth)
                           ? "\n" + std::string(prefix.size(), ' ')
                           : " ";
  return head + spacer + tail;
}

}  // namespace spmd

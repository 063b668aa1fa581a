// Golden values recorded from JAX (tools/goldens/*.py write them under tests/goldens/) and the
// array comparisons tests use against them. Failure messages name the first mismatching index,
// both values and their distance in ulps, so a failing test says what went wrong.
#pragma once

#include <spmd/array.h>
#include <spmd/dtype.h>
#include <spmd/error.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace spmd_test {

// Absolute path of a file under tests/goldens/ (the SPMD_GOLDEN_DIR compile definition).
std::string golden_path(std::string_view relative);
// A text golden's contents without its final newline; a missing file fails the current test.
std::string golden_text(std::string_view relative);
// The message of one case of an error golden in the block format of seeds/extra_errors.txt and
// errors/api_errors.txt (`=== <case>`, then `<ExceptionType>: <message>` up to the next `=== `),
// without the exception type; a missing case fails the current test.
std::string jax_error(std::string_view relative, std::string_view name);
// Every case of a golden in that block format: the lines after each `=== <case>` up to the next,
// by case.
std::map<std::string, std::string> golden_blocks(std::string_view relative);
// A jaxpr JAX printed with NumPy ints (batching rules make them: `(np.int64(1),)`), spelled as
// plain ints as spmd's integer params print.
std::string without_numpy_ints(std::string jaxpr);
// JAX's printer breaks an equation's params over lines when they do not fit in 80 columns; with
// its NumPy ints spelled shorter, the params that then fit go back on one line, as spmd prints
// them.
std::string rejoined_params(const std::string& text);
// `text` with every `from` replaced by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to);
// The fields of one line of a text golden between separators, empty ones included ("a,,b" has
// three; "" has one).
std::vector<std::string> split_fields(const std::string& s, char sep);

// The what() of the E that f() throws, or "(no error)"; another exception escapes to the test.
template <class E = spmd::Error, class F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "(no error)";
}

// The arrays of tests/goldens/<npz_relative_path>, keyed by member name (without ".npy").
// Each file is read once per process; the returned map lives until exit. Dtypes are kept
// exactly as stored (int64/float64 stay 64-bit whatever the x64 setting). Throws spmd::IOError
// if the file is missing or corrupt.
const std::map<std::string, spmd::Array>& load_golden(std::string_view npz_relative_path);

// The repr of each array's sharding, one a line (a tree's leaves: tree_flatten(t).first).
std::string sharding_reprs(const std::vector<spmd::Array>& leaves);

// Same shape, same dtype and identical elements. Floats compare bitwise except that every NaN
// equals every NaN (so +0.0 and -0.0 differ).
::testing::AssertionResult arrays_equal(const spmd::Array& actual, const spmd::Array& expected);

// Same shape and dtype, and every element within `max_ulps` units in the last place of the
// array's own dtype. NaN matches NaN only; an infinity matches only the same infinity. For
// integer and bool dtypes the distance is the absolute difference of the values.
::testing::AssertionResult arrays_close_ulp(const spmd::Array& actual, const spmd::Array& expected,
                                            int64_t max_ulps);

// Same shape and dtype, and |actual - expected| <= atol + rtol * |expected| elementwise
// (NumPy's allclose rule, evaluated in double). NaN matches NaN; infinities must be equal.
::testing::AssertionResult arrays_close(const spmd::Array& actual, const spmd::Array& expected,
                                        double rtol = 1e-6, double atol = 1e-6);

// How many representable values of dtype `t` lie between a and b (both are first rounded to
// `t`); 0 when equal, with +0 and -0 counted as equal. Saturates at INT64_MAX when either is
// NaN (unless both are) or when an infinity meets a different value. For integer and bool
// dtypes, |a - b| (saturating).
int64_t ulp_distance(double a, double b, spmd::DType t);

}  // namespace spmd_test

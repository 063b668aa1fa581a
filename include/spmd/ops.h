// The array operations, named as in jax.numpy: creation, elementwise math with NumPy
// broadcasting and JAX type promotion, reductions, shape manipulation, indexing and linear
// algebra. Each validates its arguments and hands primitives to spmd::bind.
#pragma once

#include <spmd/array.h>
#include <spmd/lax_types.h>
#include <spmd/sharding.h>

#include <concepts>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace spmd {

// ---- creation -------------------------------------------------------------------------------
// From C++ data. Element types map to dtypes (double → float32 and int64_t → int32 unless x64).
template <Scalar T>
Array array(const std::vector<T>& values, const Shape& shape);
template <Scalar T>
Array array(const std::vector<T>& values) {
  return array(values, Shape{int64_t(values.size())});
}
template <Scalar T>
Array array(std::initializer_list<T> values) {
  return array(std::vector<T>(values));
}
template <Scalar T>
Array array(std::initializer_list<T> values, const Shape& shape) {
  return array(std::vector<T>(values), shape);
}
template <Scalar T>
Array array(std::initializer_list<std::initializer_list<T>> rows);
Array array(const std::vector<bool>& values, const Shape& shape);
// A 0-d array of one value, as jnp.array(3.0) of a Python scalar: the same as Array(value),
// weakly typed (bool strongly).
template <Scalar T>
Array array(T value) {
  return Array(value);
}
// Copies `bytes` (row-major, dtype t) into a new array.
Array array_from_bytes(const void* bytes, DType t, const Shape& shape);
Array asarray(const Array& x, std::optional<DType> dtype = std::nullopt);

Array zeros(const Shape& shape, DType dtype = float32);
Array ones(const Shape& shape, DType dtype = float32);
Array full(const Shape& shape, const Array& fill_value, std::optional<DType> dtype = std::nullopt);
Array zeros_like(const Array& x, std::optional<DType> dtype = std::nullopt);
Array ones_like(const Array& x, std::optional<DType> dtype = std::nullopt);
Array full_like(const Array& x, const Array& fill_value, std::optional<DType> dtype = std::nullopt);
Array empty(const Shape& shape, DType dtype = float32);  // zero-filled, as in JAX
// arange(8) is int32, arange(8.0f) / arange(8.0) float32 (float64 with x64).
Array arange(int stop);
Array arange(int start, int stop, int step = 1);
Array arange(int64_t start, int64_t stop, int64_t step, DType dtype);
Array arange(double stop);
Array arange(double start, double stop, double step = 1.0);
Array arange(float stop);
Array linspace(double start, double stop, int64_t num = 50, bool endpoint = true,
               DType dtype = float32);
Array eye(int64_t n, std::optional<int64_t> m = std::nullopt, int64_t k = 0, DType dtype = float32);
Array identity(int64_t n, DType dtype = float32);

// ---- elementwise: unary -----------------------------------------------------------------------
Array negative(const Array& x);
Array positive(const Array& x);
Array abs(const Array& x);
Array sign(const Array& x);
Array floor(const Array& x);
Array ceil(const Array& x);
Array round(const Array& x);  // half to even, as jnp.round
Array trunc(const Array& x);
Array sqrt(const Array& x);
Array rsqrt(const Array& x);
Array cbrt(const Array& x);
Array exp(const Array& x);
Array exp2(const Array& x);
Array expm1(const Array& x);
Array log(const Array& x);
Array log1p(const Array& x);
Array log2(const Array& x);
Array log10(const Array& x);
Array sin(const Array& x);
Array cos(const Array& x);
Array tan(const Array& x);
Array arcsin(const Array& x);
Array arccos(const Array& x);
Array arctan(const Array& x);
Array sinh(const Array& x);
Array cosh(const Array& x);
Array tanh(const Array& x);
Array arcsinh(const Array& x);
Array arccosh(const Array& x);
Array arctanh(const Array& x);
Array square(const Array& x);
Array reciprocal(const Array& x);
Array isnan(const Array& x);
Array isinf(const Array& x);
Array isfinite(const Array& x);
Array signbit(const Array& x);
Array logical_not(const Array& x);
Array bitwise_not(const Array& x);
Array invert(const Array& x);
// jax.nn / jax.scipy.special spellings.
Array sigmoid(const Array& x);
Array logistic(const Array& x);
Array erf(const Array& x);
Array erfc(const Array& x);
Array erf_inv(const Array& x);
Array relu(const Array& x);

// ---- elementwise: binary (NumPy broadcasting, JAX promotion) -----------------------------------
Array add(const Array& x, const Array& y);
Array subtract(const Array& x, const Array& y);
Array multiply(const Array& x, const Array& y);
Array divide(const Array& x, const Array& y);  // true division: integers give floats
Array true_divide(const Array& x, const Array& y);
Array floor_divide(const Array& x, const Array& y);
Array remainder(const Array& x, const Array& y);  // sign of the divisor, as Python's %
Array mod(const Array& x, const Array& y);
Array fmod(const Array& x, const Array& y);  // sign of the dividend, as C's fmod
// jnp.power: a concrete 0-d integer exponent (a C++ integer) is integer_pow of x, which refuses
// negative powers of integers; integer or bool operands otherwise use binary exponentiation over
// the exponent's low 6 bits, as JAX's does.
Array power(const Array& x, const Array& y);
Array integer_pow(const Array& x, int y);
Array maximum(const Array& x, const Array& y);
Array minimum(const Array& x, const Array& y);
Array arctan2(const Array& y, const Array& x);
Array hypot(const Array& x, const Array& y);
Array logaddexp(const Array& x, const Array& y);
Array nextafter(const Array& x, const Array& y);
Array equal(const Array& x, const Array& y);
Array not_equal(const Array& x, const Array& y);
Array less(const Array& x, const Array& y);
Array less_equal(const Array& x, const Array& y);
Array greater(const Array& x, const Array& y);
Array greater_equal(const Array& x, const Array& y);
Array logical_and(const Array& x, const Array& y);
Array logical_or(const Array& x, const Array& y);
Array logical_xor(const Array& x, const Array& y);
Array bitwise_and(const Array& x, const Array& y);
Array bitwise_or(const Array& x, const Array& y);
Array bitwise_xor(const Array& x, const Array& y);
Array left_shift(const Array& x, const Array& y);
Array right_shift(const Array& x, const Array& y);  // arithmetic for signed, logical for unsigned
Array where(const Array& condition, const Array& x, const Array& y);
Array clip(const Array& x, const Array& lo, const Array& hi);

// ---- reductions -------------------------------------------------------------------------------
// `axes` empty means all axes. Integer/bool sums promote as in JAX (bool → int32).
Array sum(const Array& x, const Axes& axes = {}, bool keepdims = false);
Array prod(const Array& x, const Axes& axes = {}, bool keepdims = false);
Array max(const Array& x, const Axes& axes = {}, bool keepdims = false);
Array min(const Array& x, const Axes& axes = {}, bool keepdims = false);
Array mean(const Array& x, const Axes& axes = {}, bool keepdims = false);
Array var(const Array& x, const Axes& axes = {}, bool keepdims = false, int ddof = 0);
Array std(const Array& x, const Axes& axes = {}, bool keepdims = false, int ddof = 0);
Array all(const Array& x, const Axes& axes = {}, bool keepdims = false);
Array any(const Array& x, const Axes& axes = {}, bool keepdims = false);
Array argmax(const Array& x, std::optional<int> axis = std::nullopt, bool keepdims = false);
Array argmin(const Array& x, std::optional<int> axis = std::nullopt, bool keepdims = false);
Array logsumexp(const Array& x, const Axes& axes = {}, bool keepdims = false);
Array cumsum(const Array& x, std::optional<int> axis = std::nullopt);
Array cumprod(const Array& x, std::optional<int> axis = std::nullopt);
Array cummax(const Array& x, int axis);
Array cummin(const Array& x, int axis);
bool allclose(const Array& a, const Array& b, double rtol = 1e-5, double atol = 1e-8,
              bool equal_nan = false);
bool array_equal(const Array& a, const Array& b, bool equal_nan = false);
Array isclose(const Array& a, const Array& b, double rtol = 1e-5, double atol = 1e-8,
              bool equal_nan = false);

// ---- shape manipulation -------------------------------------------------------------------------
// One dim may be -1. `out_sharding` as JAX's: the result's sharding (Explicit axes only), for
// reshapes of sharded values whose result sharding JAX does not infer.
Array reshape(const Array& x, const Shape& new_shape, const OutSharding& out_sharding = {});
Array transpose(const Array& x, const Axes& axes = {});  // empty: reverse
Array swapaxes(const Array& x, int axis1, int axis2);
Array moveaxis(const Array& x, int source, int destination);
Array moveaxis(const Array& x, const Axes& source, const Axes& destination);
Array expand_dims(const Array& x, const Axes& axes);
Array squeeze(const Array& x, const Axes& axes = {});  // empty: every size-1 dim
Array ravel(const Array& x);
Array broadcast_to(const Array& x, const Shape& shape);
Shape broadcast_shapes(const Shape& a, const Shape& b);
std::vector<Array> broadcast_arrays(const std::vector<Array>& xs);
Array concatenate(const std::vector<Array>& xs, int axis = 0);
Array stack(const std::vector<Array>& xs, int axis = 0);
Array hstack(const std::vector<Array>& xs);
Array vstack(const std::vector<Array>& xs);
// Splits into n equal pieces (ShapeError if indivisible) or at the given indices.
std::vector<Array> split(const Array& x, int n, int axis = 0);
std::vector<Array> split(const Array& x, const std::vector<int64_t>& indices, int axis);
Array flip(const Array& x, const Axes& axes = {});
// Pad widths per dim as (before, after); mode "constant" with `constant_value`.
Array pad(const Array& x, const std::vector<std::pair<int64_t, int64_t>>& pad_width,
          const Array& constant_value = 0);
Array tile(const Array& x, const std::vector<int64_t>& reps);
Array repeat(const Array& x, int64_t repeats, std::optional<int> axis = std::nullopt);
Array roll(const Array& x, int64_t shift, std::optional<int> axis = std::nullopt);
Array tril(const Array& x, int64_t k = 0);
Array triu(const Array& x, int64_t k = 0);

// ---- indexing ---------------------------------------------------------------------------------
// jnp.take along an axis (no axis: the flattened array). Out-of-range indices raise IndexError
// for concrete indices (JAX clamps or fills; spmd reports them).
Array take(const Array& x, const Array& indices, std::optional<int> axis = std::nullopt);
Array take_along_axis(const Array& x, const Array& indices, int axis);
Array one_hot(const Array& x, int64_t num_classes, DType dtype = float32);

// ---- sorting ------------------------------------------------------------------------------------
// Stable ascending sort along `axis` (NaNs last, as NumPy).
Array sort(const Array& x, int axis = -1);
Array argsort(const Array& x, int axis = -1);

// ---- linear algebra -----------------------------------------------------------------------------
// The `precision` of jnp.dot, jnp.matmul and jnp.einsum (JAX's PrecisionLike): none, a
// lax::Precision or one of its names ("default", "fastest", "bfloat16", "high", "bfloat16_3x",
// "tensorfloat32", "highest", "float32") for both operands, a tuple of two Precisions or two names,
// one per operand, or a lax::DotAlgorithmPreset, the name of one ("BF16_BF16_F32") or a
// lax::DotAlgorithm.
struct EinsumPrecision {
  using Item =
      std::variant<lax::Precision, std::string, lax::DotAlgorithmPreset, lax::DotAlgorithm>;
  EinsumPrecision() = default;
  EinsumPrecision(lax::Precision precision) : items{precision} {}
  EinsumPrecision(const char* name) : items{std::string(name)} {}
  EinsumPrecision(std::string name) : items{std::move(name)} {}
  EinsumPrecision(lax::DotAlgorithmPreset preset) : items{preset} {}
  EinsumPrecision(const lax::DotAlgorithm& algorithm) : items{algorithm} {}
  EinsumPrecision(std::initializer_list<Item> tuple) : items(tuple), is_tuple(true) {}
  std::vector<Item> items;  // none when empty and not a tuple
  bool is_tuple = false;
};

// `out_sharding` as JAX's: the product's sharding (Explicit axes only), needed where the
// operands' shardings leave it ambiguous (contracting dims sharded on both sides).
Array dot(const Array& a, const Array& b, const OutSharding& out_sharding = {},
          const EinsumPrecision& precision = {});
// Batch dims broadcast.
Array matmul(const Array& a, const Array& b, const OutSharding& out_sharding = {},
             const EinsumPrecision& precision = {});
Array vdot(const Array& a, const Array& b);
Array inner(const Array& a, const Array& b);
Array outer(const Array& a, const Array& b);
Array tensordot(const Array& a, const Array& b, int axes = 2);

// jnp.einsum's `optimize`: how the operands are paired, as opt_einsum's contract_path. A
// strategy by name, in any case ("auto", "auto-hq", "optimal", "dp", "dynamic-programming",
// "greedy", "random-greedy", "random-greedy-128", "branch-all", "branch-2", "branch-1", "eager",
// "opportunistic"), true ("optimal"), false (positions 0 and 1 each time, JAX's unoptimized
// order), or a path: the positions contracted at each step, the result
// appended at the end, as jnp.einsum_path gives it ({{1, 2}, {0, 1}}).
struct EinsumOptimize {
  using Path = std::vector<std::vector<int64_t>>;
  EinsumOptimize(const char* strategy) : value(std::string(strategy)) {}
  EinsumOptimize(std::string strategy) : value(std::move(strategy)) {}
  EinsumOptimize(bool optimize) : value(optimize) {}
  EinsumOptimize(std::initializer_list<std::vector<int64_t>> path) : value(Path(path)) {}
  EinsumOptimize(Path path) : value(std::move(path)) {}
  std::variant<std::string, bool, Path> value;
};

// jnp.einsum's keyword arguments. out_sharding (Explicit axes only) is the result's sharding,
// as matmul's; preferred_element_type the type to accumulate in and return; precision the
// precision param of every dot_general.
struct EinsumOptions {
  OutSharding out_sharding = {};
  std::optional<DType> preferred_element_type = std::nullopt;
  EinsumOptimize optimize = "auto";
  EinsumPrecision precision = {};
};
// Einstein summation, as jnp.einsum: "ij,jk->ik", implicit output ("ij,jk": the labels seen
// once, sorted), `...` for broadcast dims, repeated labels for diagonals ("ii->i", "ii").
// Three or more operands are contracted pairwise in the order `optimize` picks.
//   einsum("ij,jk->ik", a, b);  einsum("ij,jk->ik", {a, b}, {.out_sharding = s});
//   einsum("ij,jk,kl->il", {a, b, c}, {.optimize = "greedy", .precision = "highest"});
Array einsum(std::string_view subscripts, const std::vector<Array>& operands,
             const EinsumOptions& options = {});
template <class... Operands>
requires(std::convertible_to<const Operands&, Array>&&...) Array
    einsum(std::string_view subscripts, const Array& first, const Operands&... rest) {
  return einsum(subscripts, std::vector<Array>{first, Array(rest)...});
}

// ---- dtype --------------------------------------------------------------------------------------
Array astype(const Array& x, DType dtype);
Array stop_gradient(const Array& x);

// ---- operators --------------------------------------------------------------------------------
Array operator+(const Array& x, const Array& y);
Array operator-(const Array& x, const Array& y);
Array operator*(const Array& x, const Array& y);
Array operator/(const Array& x, const Array& y);
Array operator%(const Array& x, const Array& y);
Array operator-(const Array& x);
Array operator+(const Array& x);
Array operator==(const Array& x, const Array& y);
Array operator!=(const Array& x, const Array& y);
Array operator<(const Array& x, const Array& y);
Array operator<=(const Array& x, const Array& y);
Array operator>(const Array& x, const Array& y);
Array operator>=(const Array& x, const Array& y);
Array operator&(const Array& x, const Array& y);
Array operator|(const Array& x, const Array& y);
Array operator^(const Array& x, const Array& y);
Array operator~(const Array& x);
Array operator!(const Array& x);
Array operator<<(const Array& x, const Array& y);
Array operator>>(const Array& x, const Array& y);

}  // namespace spmd

// spmd::lax: the primitive-level operations of jax.lax — exact shapes, no implicit broadcasting
// or promotion beyond what each primitive defines.
#pragma once

#include <spmd/array.h>
#include <spmd/lax_types.h>
#include <spmd/sharding.h>

#include <optional>
#include <vector>

namespace spmd::lax {

// `out_sharding` (over Explicit axes only; a PartitionSpec is over the mesh in context) is the
// result's sharding, as JAX's out_sharding argument: it decides the result's type where the
// operands' shardings would be ambiguous or conflict. `precision` lands in the params only (see
// Precision).
Array dot_general(const Array& lhs, const Array& rhs, const DotDimensionNumbers& dimension_numbers,
                  std::optional<DType> preferred_element_type = std::nullopt,
                  const OutSharding& out_sharding = {},
                  std::optional<DotPrecision> precision = std::nullopt);
Array dot(const Array& lhs, const Array& rhs,
          std::optional<DType> preferred_element_type = std::nullopt,
          const OutSharding& out_sharding = {});

// iota along `dimension` of `shape` (a 1-D iota when shape has one dim).
Array iota(DType dtype, int64_t size);
Array broadcasted_iota(DType dtype, const Shape& shape, int dimension);
Array convert_element_type(const Array& x, DType new_dtype);
// Reinterprets the bits; equal itemsize keeps the shape.
Array bitcast_convert_type(const Array& x, DType new_dtype);
// With out_sharding (Explicit axes only, JAX's keyword), the result has that sharding.
Array broadcast_in_dim(const Array& x, const Shape& shape,
                       const std::vector<int64_t>& broadcast_dimensions,
                       const OutSharding& out_sharding = {});
Array reshape(const Array& x, const Shape& new_sizes, const OutSharding& out_sharding = {});
Array transpose(const Array& x, const std::vector<int64_t>& permutation);
Array squeeze(const Array& x, const std::vector<int64_t>& dimensions);
Array expand_dims(const Array& x, const std::vector<int64_t>& dimensions);
Array rev(const Array& x, const std::vector<int64_t>& dimensions);
Array concatenate(const std::vector<Array>& xs, int64_t dimension);
Array pad(const Array& x, const Array& padding_value, const std::vector<PadConfig>& config);

// Static slicing: start inclusive, limit exclusive, optional strides.
Array slice(const Array& x, const std::vector<int64_t>& start_indices,
            const std::vector<int64_t>& limit_indices, const std::vector<int64_t>& strides = {});
Array slice_in_dim(const Array& x, int64_t start, int64_t limit, int64_t stride = 1, int axis = 0);
Array index_in_dim(const Array& x, int64_t index, int axis = 0, bool keepdims = true);
// Dynamic slicing: start indices are scalar integer arrays (or C++ ints) clamped so the slice
// fits, as in XLA.
Array dynamic_slice(const Array& x, const std::vector<Array>& start_indices,
                    const std::vector<int64_t>& slice_sizes);
Array dynamic_update_slice(const Array& x, const Array& update,
                           const std::vector<Array>& start_indices);
Array dynamic_slice_in_dim(const Array& x, const Array& start, int64_t size, int axis = 0);
Array dynamic_index_in_dim(const Array& x, const Array& index, int axis = 0, bool keepdims = true);

// select_n(which, cases...): which is bool (2 cases) or int32.
Array select_n(const Array& which, const std::vector<Array>& cases);
Array select(const Array& pred, const Array& on_true, const Array& on_false);
Array clamp(const Array& lo, const Array& x, const Array& hi);

Array reduce_sum(const Array& x, const std::vector<int64_t>& axes);
Array reduce_prod(const Array& x, const std::vector<int64_t>& axes);
Array reduce_max(const Array& x, const std::vector<int64_t>& axes);
Array reduce_min(const Array& x, const std::vector<int64_t>& axes);
Array reduce_and(const Array& x, const std::vector<int64_t>& axes);
Array reduce_or(const Array& x, const std::vector<int64_t>& axes);
Array reduce_xor(const Array& x, const std::vector<int64_t>& axes);
Array argmax(const Array& x, int64_t axis, DType index_dtype = int32);
Array argmin(const Array& x, int64_t axis, DType index_dtype = int32);
Array cumsum(const Array& x, int64_t axis, bool reverse = false);
Array cumprod(const Array& x, int64_t axis, bool reverse = false);
Array cummax(const Array& x, int64_t axis, bool reverse = false);
Array cummin(const Array& x, int64_t axis, bool reverse = false);
Array cumlogsumexp(const Array& x, int64_t axis, bool reverse = false);

// Sorts `operands` together along `dimension`, ordered lexicographically by the first
// `num_keys` operands (jax.lax.sort). Stable.
std::vector<Array> sort(const std::vector<Array>& operands, int64_t dimension = -1,
                        int num_keys = 1);

// Elementwise primitives under jax.lax's names: operands of one dtype (weak or not), no
// promotion.
Array add(const Array& x, const Array& y);
Array sub(const Array& x, const Array& y);
Array mul(const Array& x, const Array& y);
Array pow(const Array& x, const Array& y);
Array max(const Array& x, const Array& y);
Array min(const Array& x, const Array& y);
Array eq(const Array& x, const Array& y);
Array ne(const Array& x, const Array& y);
Array ge(const Array& x, const Array& y);
Array gt(const Array& x, const Array& y);
Array lt(const Array& x, const Array& y);
Array bitwise_and(const Array& x, const Array& y);
Array bitwise_or(const Array& x, const Array& y);
Array neg(const Array& x);
Array sign(const Array& x);
Array abs(const Array& x);
Array floor(const Array& x);
Array square(const Array& x);
Array exp(const Array& x);
Array log(const Array& x);
Array sin(const Array& x);
Array cos(const Array& x);
Array sinh(const Array& x);
Array cosh(const Array& x);
Array rsqrt(const Array& x);

// Elementwise primitives that jnp spells differently.
Array integer_pow(const Array& x, int y);
Array shift_left(const Array& x, const Array& y);
Array shift_right_logical(const Array& x, const Array& y);
Array shift_right_arithmetic(const Array& x, const Array& y);
Array rem(const Array& x, const Array& y);  // C fmod semantics
Array div(const Array& x, const Array& y);  // rounds toward zero for integers
Array population_count(const Array& x);
Array clz(const Array& x);
Array stop_gradient(const Array& x);
// x rounded to the nearest value of a float format with `exponent_bits` (≥ 1) and
// `mantissa_bits` (≥ 0), still in x's dtype: overflow gives infinities, underflow zeros
// (jax.lax.reduce_precision).
Array reduce_precision(const Array& x, int exponent_bits, int mantissa_bits);

}  // namespace spmd::lax

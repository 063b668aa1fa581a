// jax.random in C++. Every function composes the threefry2x32 primitive with ordinary ops the
// way jax/_src/random (core.py, prng.py, threefry2x32.py) does, so results equal JAX's bit for
// bit in both threefry modes and a trace records the same steps.
#include <spmd/config.h>
#include <spmd/lax.h>
#include <spmd/ops.h>
#include <spmd/random.h>

#include "ops/op_util.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace spmd::random {
namespace {

// ---- arguments ----------------------------------------------------------------------------------

std::string describe(const Array& x) {
  return "an array of shape " + x.shape().str() + " and dtype " +
         std::string(dtype_name(x.dtype()));
}

void check_key(const char* api, const Array& key) {
  if (key.shape() == Shape{2} && key.dtype() == uint32) return;
  throw TypeError(ops::prefix(api) + "expected a key array of shape (2,) and dtype uint32, got " +
                  describe(key));
}

void check_shape(const char* api, const Shape& shape) {
  for (int64_t d : shape)
    if (d < 0)
      throw ValueError(ops::prefix(api) + "shape dimensions must be non-negative, got " +
                       shape.str());
  check_shape_size(shape, 1, nullptr, api);  // the element count; bytes are checked per dtype
}

// JAX's _check_shape: parameters must broadcast to exactly the requested shape.
void check_param_shapes(const char* api, const Shape& shape, std::vector<Shape> params) {
  params.insert(params.begin(), shape);
  Shape result = ops::broadcast_shapes(api, params);
  if (result == shape) return;
  throw ValueError(ops::prefix(api) +
                   "parameter shapes must be broadcast-compatible with shape argument, and the "
                   "result of broadcasting the shapes must equal the shape argument, but got "
                   "result " +
                   result.str() + " for shape argument " + shape.str());
}

DType float_dtype(const char* api, DType requested) {
  DType t = canonicalize_dtype(requested);
  if (!is_floating(t))
    throw ValueError(ops::prefix(api) + "dtype argument must be a float dtype, got " +
                     std::string(dtype_name(t)));
  return t;
}

// ---- constants and small shape steps ------------------------------------------------------------

// An integer constant of dtype t from the two's complement bits of its value (so 64-bit values
// never pass through double); the low itemsize(t) bytes are kept.
Array int_constant(uint64_t bits, DType t) {
  return array_from_bytes(&bits, t, Shape{});
}

// An integer dtype's range: every minimum fits int64_t and every maximum uint64_t.
struct IntRange {
  int64_t min;
  uint64_t max;
};
IntRange int_range(DType t) {
  IntRange r{0, 0};
  dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>)
      r = {int64_t(std::numeric_limits<T>::min()), uint64_t(std::numeric_limits<T>::max())};
  });
  return r;
}

DType unsigned_of_width(int bits) {
  return bits == 8 ? uint8 : bits == 16 ? uint16 : bits == 32 ? uint32 : uint64;
}

// lax.broadcast_to_rank: leading size-1 dims up to `rank`.
Array broadcast_to_rank(const Array& x, int rank) {
  const int missing = rank - x.ndim();
  if (missing <= 0) return x;
  std::vector<int64_t> dims(size_t(missing), 1), mapped;
  dims.insert(dims.end(), x.shape().begin(), x.shape().end());
  for (int i = 0; i < x.ndim(); ++i) mapped.push_back(missing + i);
  return lax::broadcast_in_dim(x, Shape(dims), mapped);
}

// ---- the hash -----------------------------------------------------------------------------------

Array key_word(const Array& key, int64_t i) {
  return lax::index_in_dim(key, i, 0, false);
}

std::pair<Array, Array> hash(const Array& key, const Array& x1, const Array& x2) {
  return threefry2x32(key_word(key, 0), key_word(key, 1), x1, x2);
}

// JAX's threefry_2x32(key, count): the flat counts split into two halves (zero-padded when odd
// in size), hashed as pairs, and joined back.
Array hash_counts(const Array& key, const Array& count) {
  const int64_t n = count.size();
  Array flat = count.reshape({n});
  if (n % 2) flat = concatenate({flat, zeros({1}, uint32)});
  const int64_t half = (n + 1) / 2;
  auto [y1, y2] =
      hash(key, lax::slice_in_dim(flat, 0, half), lax::slice_in_dim(flat, half, 2 * half));
  Array out = concatenate({y1, y2});
  if (n % 2) out = lax::slice_in_dim(out, 0, n);
  return out.reshape(count.shape());
}

// prng.iota_2x32_shape: the high and low words of every element's flat index.
std::pair<Array, Array> iota_2x32_shape(const Shape& shape) {
  if (shape.ndim() == 0) return {zeros({}, uint32), zeros({}, uint32)};
  auto words = ops::apply_multi("iota_2x32_shape", {}, Params{{"shape", shape.dims()}});
  return {words[0], words[1]};
}

// ---- split and random bits, in both threefry modes ----------------------------------------------

Array split_keys(const Array& key, int64_t num) {
  if (config::threefry_partitionable()) {
    auto [hi, lo] = iota_2x32_shape({num});
    auto [y1, y2] = hash(key, hi, lo);
    return stack({y1, y2}, 1);
  }
  return hash_counts(key, lax::iota(uint32, 2 * num)).reshape({num, 2});
}

Array bits_partitionable(const Array& key, int bit_width, const Shape& shape) {
  auto [hi, lo] = iota_2x32_shape(shape);
  auto [y1, y2] = hash(key, hi, lo);
  if (bit_width == 64) {
    Array high = lax::convert_element_type(y1, uint64);
    return lax::shift_left(high, ops::scalar(32, uint64)) | lax::convert_element_type(y2, uint64);
  }
  if (bit_width == 32) return y1 ^ y2;
  return lax::convert_element_type(y1 ^ y2, unsigned_of_width(bit_width));
}

// 8- and 16-bit values cut from 32-bit words, low bits first (a view of the words).
Array narrow_words(const Array& words, int bit_width) {
  const int64_t count = words.size(), per_word = 32 / bit_width;
  Array shifts = lax::broadcasted_iota(uint32, {per_word, 1}, 0) * ops::scalar(bit_width, uint32);
  Array parts = lax::shift_right_logical(lax::broadcast_in_dim(words, {1, count}, {1}), shifts);
  parts = ops::scalar(double((1u << bit_width) - 1), uint32) & parts;
  Array flat = lax::reshape(lax::transpose(parts, {1, 0}), {count * per_word});
  return lax::convert_element_type(flat, unsigned_of_width(bit_width));
}

Array bits_original(const char* api, const Array& key, int bit_width, const Shape& shape) {
  const int64_t size = shape.size();
  const int64_t count = (bit_width * size + 31) / 32;
  // JAX hashes beyond 2^32 - 1 words in blocks under split keys; such sizes do not fit here.
  if (count >= int64_t(std::numeric_limits<uint32_t>::max()))
    throw ValueError(ops::prefix(api) +
                     "the non-partitionable threefry mode supports fewer than "
                     "2^32 - 1 random words, got shape " +
                     shape.str());
  Array words = hash_counts(key, lax::iota(uint32, count));
  if (bit_width == 64) {
    std::vector<Array> halves = spmd::split(words, 2);
    Array high = lax::convert_element_type(halves[0], uint64);
    return (lax::shift_left(high, ops::scalar(32, uint64)) |
            lax::convert_element_type(halves[1], uint64))
        .reshape(shape);
  }
  if (bit_width < 32) words = lax::slice_in_dim(narrow_words(words, bit_width), 0, size);
  return words.reshape(shape);
}

Array random_bits(const char* api, const Array& key, int bit_width, const Shape& shape) {
  if (config::threefry_partitionable()) return bits_partitionable(key, bit_width, shape);
  return bits_original(api, key, bit_width, shape);
}

// ---- floats -------------------------------------------------------------------------------------

struct FloatBits {
  int nbits, nmant, min_exp;
};
FloatBits float_bits(DType t) {
  switch (t) {
    case DType::bfloat16:
      return {16, 7, -126};
    case DType::float16:
      return {16, 10, -14};
    case DType::float64:
      return {64, 52, -1022};
    default:
      return {32, 23, -126};
  }
}

// floats * span + lo. XLA fuses the multiply and add of float32/float64 into one rounding;
// 16-bit floats round after each step.
Array scale_and_shift(const Array& floats, const Array& span, const Array& lo) {
  if (itemsize(floats.dtype()) >= 4) return ops::apply("fma", {floats, span, lo});
  return floats * span + lo;
}

// jax.random._uniform: mantissa bits under the exponent of 1.0 give [1, 2); minus one, scaled.
Array uniform_floats(const char* api, const Array& key, const Shape& shape, DType t,
                     const Array& minval, const Array& maxval) {
  const Array lo = broadcast_to_rank(lax::convert_element_type(minval, t), shape.ndim());
  const Array hi = broadcast_to_rank(lax::convert_element_type(maxval, t), shape.ndim());
  const FloatBits f = float_bits(t);
  const DType ut = unsigned_of_width(f.nbits);
  // Fewer than 8 mantissa bits (bfloat16): draw 8 bits, as JAX does.
  const int rng_bits = f.nmant < 8 ? 8 : f.nbits;
  Array bits = random_bits(api, key, rng_bits, shape);
  if (rng_bits != f.nbits) bits = lax::convert_element_type(bits, ut);
  Array one_bits = lax::bitcast_convert_type(ops::scalar(1.0, t), ut);
  Array mantissa = lax::shift_right_logical(bits, ops::scalar(rng_bits - f.nmant, ut)) | one_bits;
  Array floats = lax::bitcast_convert_type(mantissa, t) - ops::scalar(1.0, t);
  return maximum(lo, scale_and_shift(floats, hi - lo, lo).reshape(shape));
}

Array gumbel(const Array& key, const Shape& shape, DType t) {
  const Array tiny = ops::scalar(std::ldexp(1.0, float_bits(t).min_exp), t);
  Array u = uniform_floats("random.categorical", key, shape, t, tiny, ops::scalar(1.0, t));
  return negative(log(negative(log(u))));
}

// x / sqrt(2) as XLA:CPU evaluates a division by a constant: x times the reciprocal, rounded to
// x's dtype. bfloat16 arithmetic is moved to float32 before that rewrite, so there the
// reciprocal stays float32, which is how spmd's bfloat16 division computes.
Array divide_by_sqrt2(const Array& x) {
  const DType t = x.dtype();
  const Array sqrt2 = ops::scalar(std::sqrt(2.0), t);
  if (t == bfloat16) return x / sqrt2;
  if (t == float64) return x * ops::scalar(1.0 / std::sqrt(2.0), t);
  return x * ops::scalar(double(1.0f / sqrt2.item<float>()), t);
}

// ---- integers -----------------------------------------------------------------------------------

// JAX's _convert_and_clip_integer: clip into both types' common range, then convert.
Array convert_and_clip(const Array& x, DType t) {
  const IntRange from = int_range(x.dtype()), to = int_range(t);
  Array lo = int_constant(uint64_t(std::max(from.min, to.min)), x.dtype());
  Array hi = int_constant(std::min(from.max, to.max), x.dtype());
  return astype(clip(x, lo, hi), t);
}

Array as_integer(const Array& x) {
  return is_integer(x.dtype()) ? x : astype(x, default_int_dtype());
}

// jax.random._randint for 32- and 64-bit dtypes: two draws of nbits combined modulo the span.
Array randint_bits(const Array& key, const Shape& shape, const Array& minval, const Array& maxval,
                   DType t) {
  const Array min_in = as_integer(minval), max_in = as_integer(maxval);
  // maxval beyond t's range (randint(key, s, 0, 2**32, uint32)) makes the span one larger.
  const Array out_of_range =
      greater(max_in, convert_and_clip(int_constant(int_range(t).max, t), max_in.dtype()));
  const Array lo = broadcast_to_rank(convert_and_clip(min_in, t), shape.ndim());
  const Array hi = broadcast_to_rank(convert_and_clip(max_in, t), shape.ndim());
  const int nbits = itemsize(t) * 8;
  const DType ut = unsigned_of_width(nbits);
  const Array keys = split_keys(key, 2);
  const Array higher = random_bits("random.randint", keys[0], nbits, shape);
  const Array lower = random_bits("random.randint", keys[1], nbits, shape);

  Array span = lax::convert_element_type(hi - lo, ut);
  span = where(less_equal(hi, lo), ones_like(span), span);
  span = where(logical_and(out_of_range, greater(hi, lo)), span + ops::scalar(1, ut), span);
  // 2^nbits mod span without overflow: (2^(nbits/2) mod span)^2 mod span.
  Array multiplier = lax::rem(int_constant(uint64_t(1) << (nbits / 2), ut), span);
  multiplier = lax::rem(multiplier * multiplier, span);
  Array offset = lax::rem(higher, span) * multiplier + lax::rem(lower, span);
  offset = lax::rem(offset, span);
  return lo + lax::convert_element_type(offset, t);
}

// ---- permutations -------------------------------------------------------------------------------

// jax.random._shuffle: sort under fresh 32-bit keys, enough rounds that ties are unlikely.
Array shuffle(Array key, Array x, int axis) {
  const double size = double(std::max<int64_t>(1, x.size()));
  const int rounds =
      int(std::ceil(3.0 * std::log(size) / std::log(double(std::numeric_limits<uint32_t>::max()))));
  for (int r = 0; r < rounds; ++r) {
    Array keys = split_keys(key, 2);
    key = keys[0];
    Array sort_keys = random_bits("random.permutation", keys[1], 32, x.shape());
    x = lax::sort({sort_keys, x}, axis, 1)[1];
  }
  return x;
}

Shape without_axis(const Shape& s, int axis) {
  std::vector<int64_t> dims(s.begin(), s.end());
  dims.erase(dims.begin() + axis);
  return Shape(dims);
}

}  // namespace

// ---- keys ---------------------------------------------------------------------------------------

Array key(uint64_t seed) {
  // JAX converts the seed to its default integer first: without x64 only the low word survives.
  const uint32_t high = config::x64_enabled() ? uint32_t(seed >> 32) : 0;
  return array(std::vector<uint32_t>{high, uint32_t(seed)}, Shape{2});
}

Array PRNGKey(uint64_t seed) {
  return key(seed);
}

std::pair<Array, Array> threefry2x32(const Array& key1, const Array& key2, const Array& x1,
                                     const Array& x2) {
  auto out = ops::apply_multi("threefry2x32", {key1, key2, x1, x2});
  return {out[0], out[1]};
}

Array split(const Array& key, int64_t num) {
  check_key("random.split", key);
  if (num < 0)
    throw ValueError("[random.split] num must be non-negative, got " + std::to_string(num));
  return split_keys(key, num);
}

Array fold_in(const Array& key, uint32_t data) {
  check_key("random.fold_in", key);
  // threefry_seed(data) is (data >> 32, data) = (0, data) for 32-bit data.
  return hash_counts(key, array(std::vector<uint32_t>{0, data}, Shape{2}));
}

// ---- samplers -----------------------------------------------------------------------------------

Array bits(const Array& key, const Shape& shape, DType dtype) {
  check_key("random.bits", key);
  check_shape("random.bits", shape);
  const DType t = canonicalize_dtype(dtype);
  if (!is_unsigned_integer(t))
    throw ValueError("[random.bits] dtype argument must be an unsigned int dtype, got " +
                     std::string(dtype_name(t)));
  return random_bits("random.bits", key, itemsize(t) * 8, shape);
}

Array uniform(const Array& key, const Shape& shape, DType dtype, const Array& minval,
              const Array& maxval) {
  check_key("random.uniform", key);
  check_shape("random.uniform", shape);
  const DType t = float_dtype("random.uniform", dtype);
  check_param_shapes("random.uniform", shape, {minval.shape(), maxval.shape()});
  return uniform_floats("random.uniform", key, shape, t, minval, maxval);
}

Array normal(const Array& key, const Shape& shape, DType dtype) {
  check_key("random.normal", key);
  check_shape("random.normal", shape);
  const DType t = float_dtype("random.normal", dtype);
  // lo = nextafter(-1, 0): open at -1, where erf_inv is -inf.
  const Array lo = ops::scalar(-1.0 + std::ldexp(1.0, -(float_bits(t).nmant + 1)), t);
  Array u = uniform_floats("random.normal", key, shape, t, lo, ops::scalar(1.0, t));
  return ops::scalar(std::sqrt(2.0), t) * erf_inv(u);
}

Array truncated_normal(const Array& key, const Array& lower, const Array& upper, const Shape& shape,
                       DType dtype) {
  const char* api = "random.truncated_normal";
  check_key(api, key);
  check_shape(api, shape);
  const DType t = float_dtype(api, dtype);
  // An empty shape means JAX's shape=None: the broadcast shape of the bounds.
  const Shape s = shape.ndim() ? shape : ops::broadcast_shapes(api, {lower.shape(), upper.shape()});
  if (shape.ndim()) check_param_shapes(api, s, {lower.shape(), upper.shape()});
  const Array sqrt2 = ops::scalar(std::sqrt(2.0), t);
  const Array lo = lax::convert_element_type(lower, t), hi = lax::convert_element_type(upper, t);
  Array u = uniform_floats(api, key, s, t, erf(divide_by_sqrt2(lo)), erf(divide_by_sqrt2(hi)));
  Array out = sqrt2 * erf_inv(u);
  Array above_lower = nextafter(lax::stop_gradient(lo), ops::scalar(INFINITY, t));
  Array below_upper = nextafter(lax::stop_gradient(hi), ops::scalar(-INFINITY, t));
  return minimum(below_upper, maximum(above_lower, out));
}

Array bernoulli(const Array& key, const Array& p, std::optional<Shape> shape) {
  check_key("random.bernoulli", key);
  if (!is_floating(p.dtype()))
    throw TypeError("[random.bernoulli] probability p must have a floating dtype, got " +
                    std::string(dtype_name(p.dtype())));
  const Shape s = shape.value_or(p.shape());
  check_shape("random.bernoulli", s);
  if (shape) check_param_shapes("random.bernoulli", s, {p.shape()});
  const Array prob = lax::convert_element_type(p, p.dtype());
  Array u = uniform_floats("random.bernoulli", key, s, prob.dtype(), ops::scalar(0.0, prob.dtype()),
                           ops::scalar(1.0, prob.dtype()));
  return less(u, prob);
}

Array randint(const Array& key, const Shape& shape, const Array& minval, const Array& maxval,
              DType dtype) {
  check_key("random.randint", key);
  check_shape("random.randint", shape);
  const DType t = canonicalize_dtype(dtype);
  if (!is_integer(t))
    throw TypeError("[random.randint] randint only accepts integer dtypes, got " +
                    std::string(dtype_name(t)));
  check_param_shapes("random.randint", shape, {minval.shape(), maxval.shape()});
  if (itemsize(t) >= 4) return randint_bits(key, shape, minval, maxval, t);
  // 8- and 16-bit integers are drawn as int32 in [min, max + 1) of the narrow type.
  const IntRange r = int_range(t);
  Array lo =
      clip(astype(minval, int32), int_constant(uint64_t(r.min), int32), int_constant(r.max, int32));
  Array hi = clip(astype(maxval, int32), int_constant(uint64_t(r.min), int32),
                  int_constant(r.max + 1, int32));
  return astype(randint_bits(key, shape, lo, hi, int32), t);
}

Array permutation(const Array& key, int64_t n) {
  check_key("random.permutation", key);
  if (n < 0)
    throw ValueError("[random.permutation] n must be non-negative, got " + std::to_string(n));
  return shuffle(key, arange(0, n, 1, default_int_dtype()), 0);
}

Array permutation(const Array& key, const Array& x, int axis) {
  check_key("random.permutation", key);
  const int ax = ops::canonicalize_axis("random.permutation", axis, std::max(1, x.ndim()));
  if (x.ndim() == 0) {
    if (!is_integer(x.dtype()))
      throw TypeError("[random.permutation] x must be an integer or at least 1-dimensional, got " +
                      describe(x));
    return permutation(key, x.item<int64_t>());
  }
  if (x.ndim() == 1) return shuffle(key, x, ax);
  Array order = shuffle(key, arange(0, x.shape()[ax], 1, default_int_dtype()), 0);
  return take(x, order, ax);
}

Array categorical(const Array& key, const Array& logits, int axis, std::optional<Shape> shape) {
  const char* api = "random.categorical";
  check_key(api, key);
  if (!is_floating(logits.dtype()))
    throw ValueError(ops::prefix(api) + "logits must have a float dtype, got " +
                     std::string(dtype_name(logits.dtype())));
  const int ax = ops::canonicalize_axis(api, axis, logits.ndim());
  const Shape batch = without_axis(logits.shape(), ax);
  const Shape s = shape.value_or(batch);
  check_shape(api, s);
  if (shape) check_param_shapes(api, s, {batch});
  // Samples of shape s: leading dims of s beyond the batch are independent draws.
  const int extra = s.ndim() - batch.ndim();
  std::vector<int64_t> noise(s.begin(), s.end());
  noise.insert(noise.begin() + extra + ax, logits.shape()[ax]);
  std::vector<int64_t> expanded(size_t(extra), 1);
  expanded.insert(expanded.end(), logits.shape().begin(), logits.shape().end());
  Array g = gumbel(key, Shape(noise), logits.dtype());
  return argmax(g + logits.reshape(Shape(expanded)), extra + ax);
}

}  // namespace spmd::random

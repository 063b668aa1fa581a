// jax.random in C++: every function is composed from the threefry2x32 primitive and ordinary
// ops exactly as JAX composes it, so results are equal bit for bit (and stay traceable).
#include <spmd/config.h>
#include <spmd/lax.h>
#include <spmd/ops.h>
#include <spmd/random.h>

#include "ops/op_util.h"

#include <cmath>
#include <limits>

namespace spmd::random {
namespace {

std::string describe(const Array& x) {
  x.shape();  // raises for an empty handle
  return std::string(dtype_name(x.dtype())) + x.shape().str();
}

void check_key(const char* api, const Array& key) {
  if (!(key.shape() == Shape{2}) || key.dtype() != uint32)
    throw TypeError(ops::prefix(api) +
                    "expected a key array of shape (2,) and dtype uint32 "
                    "(from random::key), got " +
                    describe(key));
}

Array word(const Array& key, int64_t i) {
  return lax::index_in_dim(key, i, 0, false);
}
Array u32(uint64_t v) {
  return ops::scalar(double(v), uint32);
}

// threefry2x32 of the key with counter words (x1, x2) of any equal shape.
std::pair<Array, Array> hash(const Array& key, const Array& x1, const Array& x2) {
  return threefry2x32(word(key, 0), word(key, 1), x1, x2);
}

// JAX's threefry_2x32(key, count): the flat counter split into two halves (padded when odd).
Array hash_flat(const Array& key, const Array& count) {
  int64_t n = count.size();
  Array flat = count.reshape({n});
  if (n % 2) flat = concatenate({flat, zeros({1}, uint32)});
  int64_t half = (n + 1) / 2;
  auto [y1, y2] =
      hash(key, lax::slice_in_dim(flat, 0, half), lax::slice_in_dim(flat, half, 2 * half));
  Array out = concatenate({y1, y2});
  if (n % 2) out = lax::slice_in_dim(out, 0, n);
  return out.reshape(count.shape());
}

// Counter words of the flat index of every element of `shape` (partitionable mode).
std::pair<Array, Array> iota_2x32(const char* api, const Shape& shape) {
  if (shape.size() > int64_t(std::numeric_limits<uint32_t>::max()))
    throw ValueError(ops::prefix(api) +
                     "shapes with 2^32 or more elements are not supported, got " + shape.str());
  Array lo = lax::iota(uint32, shape.size()).reshape(shape);
  return {zeros(shape, uint32), lo};
}

int bit_width_of(const char* api, DType t) {
  if (!is_unsigned_integer(t))
    throw TypeError(ops::prefix(api) + "expected an unsigned integer dtype, got " +
                    std::string(dtype_name(t)));
  return itemsize(t) * 8;
}

Array random_bits(const char* api, const Array& key, int bit_width, const Shape& shape) {
  DType out_t = bit_width == 8    ? uint8
                : bit_width == 16 ? uint16
                : bit_width == 32 ? uint32
                                  : uint64;
  if (bit_width == 64 && !config::x64_enabled())
    throw TypeError(ops::prefix(api) + "64-bit random bits need x64 (config::enable_x64(true))");
  if (config::threefry_partitionable()) {
    auto [hi, lo] = iota_2x32(api, shape);
    auto [y1, y2] = hash(key, hi, lo);
    if (bit_width == 64)
      return lax::shift_left(y1.astype(uint64), ops::scalar(32, uint64)) | y2.astype(uint64);
    return lax::convert_element_type(y1 ^ y2, out_t);
  }
  // The original ("stable") derivation: hash a flat iota of 32-bit words and view it.
  int64_t size = shape.size();
  int64_t max_count = (int64_t(bit_width) * size + 31) / 32;
  if (max_count > int64_t(std::numeric_limits<uint32_t>::max()))
    throw ValueError(ops::prefix(api) + "too many random bits requested for shape " + shape.str());
  Array bits = hash_flat(key, lax::iota(uint32, max_count));
  if (bit_width == 64) {
    auto halves = split(bits, 2);
    Array out = lax::shift_left(halves[0].astype(uint64), ops::scalar(32, uint64)) |
                halves[1].astype(uint64);
    return out.reshape(shape);
  }
  if (bit_width < 32) {
    int per_word = 32 / bit_width;
    Array shifts = lax::broadcasted_iota(uint32, {per_word, 1}, 0) * u32(uint64_t(bit_width));
    Array words = lax::broadcast_in_dim(bits, {per_word, max_count}, {1});
    Array parts = lax::shift_right_logical(
                      words, lax::broadcast_in_dim(shifts, {per_word, max_count}, {0, 1})) &
                  u32((uint64_t(1) << bit_width) - 1);
    Array flat = parts.T().reshape({max_count * per_word});
    return lax::slice_in_dim(flat.astype(out_t), 0, size).reshape(shape);
  }
  return bits.reshape(shape);
}

Array split_keys(const Array& key, int64_t num) {
  if (config::threefry_partitionable()) {
    auto [hi, lo] = iota_2x32("random.split", {num});
    auto [y1, y2] = hash(key, hi, lo);
    return stack({y1, y2}, 1);
  }
  return hash_flat(key, lax::iota(uint32, num * 2)).reshape({num, 2});
}

struct FloatLayout {
  int nbits, nmant;
};
FloatLayout layout(const char* api, DType t) {
  switch (t) {
    case DType::bfloat16:
      return {16, 7};
    case DType::float16:
      return {16, 10};
    case DType::float32:
      return {32, 23};
    case DType::float64:
      return {64, 52};
    default:
      throw ValueError(ops::prefix(api) + "dtype argument must be a float dtype, got " +
                       std::string(dtype_name(t)));
  }
}

Array broadcast_to_rank(const Array& x, int rank) {
  if (x.ndim() >= rank) return x;
  return ops::broadcast_to("random", x, [&] {
    std::vector<int64_t> d(size_t(rank - x.ndim()), 1);
    d.insert(d.end(), x.shape().begin(), x.shape().end());
    return Shape(d);
  }());
}

Array uniform_impl(const char* api, const Array& key, const Shape& shape, DType dtype,
                   const Array& minval, const Array& maxval) {
  check_key(api, key);
  DType t = canonicalize_dtype(dtype);
  FloatLayout f = layout(api, t);
  Array lo = broadcast_to_rank(lax::convert_element_type(minval, t), shape.ndim());
  Array hi = broadcast_to_rank(lax::convert_element_type(maxval, t), shape.ndim());
  DType ut = f.nbits == 16 ? uint16 : f.nbits == 32 ? uint32 : uint64;
  // Types with fewer than 8 mantissa bits (bfloat16) draw 8 random bits, as JAX does.
  const int rng_bits = f.nmant < 8 ? 8 : f.nbits;
  Array bits = random_bits(api, key, rng_bits, shape);
  if (rng_bits != f.nbits) bits = lax::convert_element_type(bits, ut);
  Array one_bits = lax::bitcast_convert_type(ops::scalar(1.0, t), ut);
  Array float_bits = lax::shift_right_logical(bits, ops::scalar(rng_bits - f.nmant, ut)) | one_bits;
  Array floats = lax::bitcast_convert_type(float_bits, t) - ops::scalar(1.0, t);
  Array scaled = floats * (hi - lo) + lo;
  return maximum(lo, scaled.reshape(shape));
}

}  // namespace

Array key(uint64_t seed) {
  uint32_t k1 = config::x64_enabled() ? uint32_t(seed >> 32) : 0;
  return array(std::vector<uint32_t>{k1, uint32_t(seed & 0xFFFFFFFFu)}, Shape{2});
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
  auto [y1, y2] = hash(key, u32(0).reshape({1}), u32(data).reshape({1}));
  return concatenate({y1, y2});
}

Array bits(const Array& key, const Shape& shape, DType dtype) {
  check_key("random.bits", key);
  return random_bits("random.bits", key, bit_width_of("random.bits", canonicalize_dtype(dtype)),
                     shape);
}

Array uniform(const Array& key, const Shape& shape, DType dtype, const Array& minval,
              const Array& maxval) {
  return uniform_impl("random.uniform", key, shape, dtype, minval, maxval);
}

Array normal(const Array& key, const Shape& shape, DType dtype) {
  DType t = canonicalize_dtype(dtype);
  layout("random.normal", t);
  Array lo = nextafter(ops::scalar(-1.0, t), ops::scalar(0.0, t));
  Array u = uniform_impl("random.normal", key, shape, t, lo, ops::scalar(1.0, t));
  return ops::scalar(std::sqrt(2.0), t) * erf_inv(u);
}

Array truncated_normal(const Array& key, const Array& lower, const Array& upper, const Shape& shape,
                       DType dtype) {
  DType t = canonicalize_dtype(dtype);
  layout("random.truncated_normal", t);
  Shape s = shape.ndim()
                ? shape
                : ops::broadcast_shapes("random.truncated_normal", {lower.shape(), upper.shape()});
  Array sqrt2 = ops::scalar(std::sqrt(2.0), t);
  Array lo = lax::convert_element_type(lower, t), hi = lax::convert_element_type(upper, t);
  Array a = erf(lo / sqrt2), b = erf(hi / sqrt2);
  Array u = uniform_impl("random.truncated_normal", key, s, t, a, b);
  Array out = sqrt2 * erf_inv(u);
  return clip(out, nextafter(lax::stop_gradient(lo), ops::scalar(INFINITY, t)),
              nextafter(lax::stop_gradient(hi), ops::scalar(-INFINITY, t)));
}

Array bernoulli(const Array& key, const Array& p, std::optional<Shape> shape) {
  if (!is_floating(p.dtype()))
    throw TypeError("[random.bernoulli] probability p must have a floating dtype, got " +
                    describe(p));
  Array prob = lax::convert_element_type(p, p.dtype());
  Shape s = shape.value_or(prob.shape());
  return less(uniform_impl("random.bernoulli", key, s, prob.dtype(), 0.0, 1.0), prob);
}

}  // namespace spmd::random

namespace spmd::random {
namespace {

// Converts an integer bound to `t`, clipping it into t's range first (JAX's
// _convert_and_clip_integer).
Array convert_and_clip(const Array& v, DType t) {
  if (v.dtype() == t) return v;
  double lo = 0, hi = 0;
  dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      lo = double(std::numeric_limits<T>::min());
      hi = double(std::numeric_limits<T>::max());
    }
  });
  DType wide = promote_types(v.dtype(), t);
  Array clipped = clip(v.astype(wide), ops::scalar(lo, wide), ops::scalar(hi, wide));
  return lax::convert_element_type(clipped, t);
}

Array shuffle(Array key, Array x, int axis) {
  double rounds = std::ceil(3.0 * std::log(double(std::max<int64_t>(1, x.size()))) /
                            std::log(double(std::numeric_limits<uint32_t>::max())));
  for (int r = 0; r < int(rounds); ++r) {
    Array keys = split_keys(key, 2);
    key = keys[0];
    Array sort_keys = random_bits("random.permutation", keys[1], 32, x.shape());
    x = lax::sort({sort_keys, x}, axis, 1)[1];
  }
  return x;
}

}  // namespace

Array randint(const Array& key, const Shape& shape, const Array& minval, const Array& maxval,
              DType dtype) {
  check_key("random.randint", key);
  DType t = canonicalize_dtype(dtype);
  if (!is_integer(t))
    throw TypeError("[random.randint] randint only accepts integer dtypes, got " +
                    std::string(dtype_name(t)));
  Array lo = is_integer(minval.dtype()) ? minval : minval.astype(default_int_dtype());
  Array hi = is_integer(maxval.dtype()) ? maxval : maxval.astype(default_int_dtype());
  double t_min = 0, t_max = 0;
  dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      t_min = double(std::numeric_limits<T>::min());
      t_max = double(std::numeric_limits<T>::max());
    }
  });
  if (itemsize(t) < 4) {
    // JAX draws 8- and 16-bit integers as int32 in [min, max + 1) of the narrow type.
    Array lo32 = clip(lo.astype(int32), ops::scalar(t_min, int32), ops::scalar(t_max, int32));
    Array hi32 = clip(hi.astype(int32), ops::scalar(t_min, int32), ops::scalar(t_max + 1, int32));
    return lax::convert_element_type(randint(key, shape, lo32, hi32, int32), t);
  }
  // maxval beyond the dtype (randint(key, s, 0, 256, uint8)) needs a span of 2^nbits.
  Array out_of_range = greater(hi, convert_and_clip(ops::scalar(t_max, t), hi.dtype()));
  lo = broadcast_to_rank(convert_and_clip(lo, t), shape.ndim());
  hi = broadcast_to_rank(convert_and_clip(hi, t), shape.ndim());
  const int nbits = itemsize(t) * 8;
  Array keys = split_keys(key, 2);
  Array higher_bits = random_bits("random.randint", keys[0], nbits, shape);
  Array lower_bits = random_bits("random.randint", keys[1], nbits, shape);
  DType ut = nbits == 8 ? uint8 : nbits == 16 ? uint16 : nbits == 32 ? uint32 : uint64;
  Array span = lax::convert_element_type(hi - lo, ut);
  span = where(less_equal(hi, lo), ones_like(span), span);
  span = where(logical_and(out_of_range, greater(hi, lo)), span + ops::scalar(1, ut), span);
  Array multiplier = lax::rem(ops::scalar(std::ldexp(1.0, nbits / 2), ut), span);
  multiplier = lax::rem(multiplier * multiplier, span);
  Array offset = lax::rem(higher_bits, span) * multiplier + lax::rem(lower_bits, span);
  offset = lax::rem(offset, span);
  return lo + lax::convert_element_type(offset, t);
}

Array permutation(const Array& key, int64_t n) {
  check_key("random.permutation", key);
  if (n < 0)
    throw ValueError("[random.permutation] n must be non-negative, got " + std::to_string(n));
  return shuffle(key, arange(0, n, 1, default_int_dtype()), 0);
}

Array permutation(const Array& key, const Array& x, int axis) {
  check_key("random.permutation", key);
  if (x.ndim() == 0)
    throw TypeError("[random.permutation] x must be an integer or at least 1-dimensional");
  int ax = ops::canonicalize_axis("random.permutation", axis, x.ndim());
  if (x.ndim() == 1) return shuffle(key, x, ax);
  Array ind = shuffle(key, arange(0, x.shape()[ax], 1, default_int_dtype()), 0);
  return take(x, ind, ax);
}

Array categorical(const Array& key, const Array& logits, int axis, std::optional<Shape> shape) {
  check_key("random.categorical", key);
  if (!is_floating(logits.dtype()))
    throw ValueError("[random.categorical] logits must have a float dtype, got " +
                     describe(logits));
  int ax = ops::canonicalize_axis("random.categorical", axis, logits.ndim());
  std::vector<int64_t> batch;
  for (int i = 0; i < logits.ndim(); ++i)
    if (i != ax) batch.push_back(logits.shape()[i]);
  Shape s = shape.value_or(Shape(batch));
  if (s.ndim() < int(batch.size()) ||
      !std::equal(batch.begin(), batch.end(), s.dims().end() - int64_t(batch.size())))
    throw ShapeError("[random.categorical] shape " + s.str() +
                     " must end with the logits' batch shape " + Shape(batch).str());
  std::vector<int64_t> prefix(s.begin(), s.end() - int64_t(batch.size()));
  std::vector<int64_t> full = prefix;
  std::vector<int64_t> logits_dims = batch;
  logits_dims.insert(logits_dims.begin() + ax, logits.shape()[ax]);
  full.insert(full.end(), logits_dims.begin(), logits_dims.end());
  DType t = logits.dtype();
  // Gumbel noise: -log(-log(u)) with u uniform in [tiny, 1).
  double tiny = t == float64   ? std::numeric_limits<double>::min()
                : t == float16 ? 6.103515625e-05
                               : std::numeric_limits<float>::min();
  Array u = uniform_impl("random.categorical", key, Shape(full), t, ops::scalar(tiny, t),
                         ops::scalar(1.0, t));
  Array gumbel = negative(log(negative(log(u))));
  Array expanded = logits;
  if (!prefix.empty()) {
    std::vector<int64_t> dims(prefix.size(), 1);
    dims.insert(dims.end(), logits.shape().begin(), logits.shape().end());
    expanded = logits.reshape(Shape(dims));
  }
  return argmax(gumbel + expanded, ax + int(prefix.size()));
}

}  // namespace spmd::random

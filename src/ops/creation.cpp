// Array creation: from C++ data, constants (zeros, ones, full), ranges (arange, linspace) and
// eye. Fills are broadcast_in_dim of a scalar, as jnp.full is.
#include <spmd/config.h>
#include <spmd/lax.h>
#include <spmd/ops.h>
#include <spmd/placement.h>

#include "backends/cpu/convert.h"
#include "ops/op_util.h"
#include "prims/sharding.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace spmd {
namespace {

void check_shape(const char* api, const Shape& shape, DType dtype) {
  AbstractValue{shape, canonicalize_dtype(dtype)}.checked_nbytes(api);
}

Array from_host(const char* api, const void* data, DType from, size_t count, const Shape& shape) {
  check_shape(api, shape, from);
  if (int64_t(count) != shape.size())
    throw ValueError(ops::prefix(api) + "got " + std::to_string(count) + " values for shape " +
                     shape.str() + ", which holds " + std::to_string(shape.size()));
  DType t = canonicalize_dtype(from);
  Array out = make_uninitialized(AbstractValue{shape, t, false}, api);
  cpu::convert(data, from, out.impl()->buffer->data(), t, int64_t(count));
  return out;
}

// The length of an arange of `count` (≥ 0, or NaN) elements, checked as an array of `dtype`.
int64_t arange_length(double count, DType dtype) {
  if (!(count > 0)) return 0;
  // 2^63 is exact in double; a count from there on cannot be an array's length.
  const int64_t n = count < 0x1p63 ? int64_t(count) : std::numeric_limits<int64_t>::max();
  check_shape("arange", Shape{n}, dtype);
  return n;
}

// Host storage for `n` values of T, with the library's error when the system has no memory.
template <class T>
std::shared_ptr<Buffer> host_values(int64_t n, const char* api) {
  int64_t bytes = 0;
  if (!__builtin_mul_overflow(n, int64_t(sizeof(T)), &bytes)) {
    try {
      return Buffer::allocate(size_t(bytes));
    } catch (const ResourceExhaustedError& e) {
      throw ResourceExhaustedError(ops::prefix(api) + e.what());
    }
  }
  throw ResourceExhaustedError(
      ops::prefix(api) + "RESOURCE_EXHAUSTED: Out of memory allocating more than 2^63 bytes.");
}

Array fill(const char* api, const Shape& shape, const Array& value, DType dtype,
           bool weak_type = false) {
  check_shape(api, shape, dtype);
  Array v = ops::convert(value, canonicalize_dtype(dtype), weak_type);
  return ops::broadcast_to(api, v, shape);
}

}  // namespace

template <Scalar T>
Array array(const std::vector<T>& values, const Shape& shape) {
  return from_host("array", values.data(), dtype_of_v<T>, values.size(), shape);
}

template <Scalar T>
Array array(std::initializer_list<std::initializer_list<T>> rows) {
  std::vector<T> flat;
  size_t cols = rows.size() ? rows.begin()->size() : 0;
  for (const auto& row : rows) {
    if (row.size() != cols)
      throw ValueError("[array] rows must have equal lengths, got " + std::to_string(cols) +
                       " and " + std::to_string(row.size()));
    flat.insert(flat.end(), row.begin(), row.end());
  }
  return array(flat, Shape{int64_t(rows.size()), int64_t(cols)});
}

#define SPMD_INSTANTIATE_ARRAY(T)                               \
  template Array array<T>(const std::vector<T>&, const Shape&); \
  template Array array<T>(std::initializer_list<std::initializer_list<T>>);
SPMD_INSTANTIATE_ARRAY(int8_t)
SPMD_INSTANTIATE_ARRAY(int16_t)
SPMD_INSTANTIATE_ARRAY(int32_t)
SPMD_INSTANTIATE_ARRAY(int64_t)
SPMD_INSTANTIATE_ARRAY(long long)
SPMD_INSTANTIATE_ARRAY(uint8_t)
SPMD_INSTANTIATE_ARRAY(uint16_t)
SPMD_INSTANTIATE_ARRAY(uint32_t)
SPMD_INSTANTIATE_ARRAY(uint64_t)
SPMD_INSTANTIATE_ARRAY(bfloat16_t)
SPMD_INSTANTIATE_ARRAY(float16_t)
SPMD_INSTANTIATE_ARRAY(float)
SPMD_INSTANTIATE_ARRAY(double)
#undef SPMD_INSTANTIATE_ARRAY

Array array(const std::vector<bool>& values, const Shape& shape) {
  std::vector<uint8_t> bytes(values.begin(), values.end());
  return from_host("array", bytes.data(), bool_, bytes.size(), shape);
}

Array array_from_bytes(const void* bytes, DType t, const Shape& shape) {
  check_shape("array_from_bytes", shape, t);
  Array out = make_uninitialized(AbstractValue{shape, t, false}, "array_from_bytes");
  // `bytes` may be null for an empty shape; memcpy must not see a null pointer even then.
  if (out.nbytes() > 0) std::memcpy(out.impl()->buffer->data(), bytes, size_t(out.nbytes()));
  return out;
}

Array asarray(const Array& x, std::optional<DType> dtype) {
  return dtype ? astype(x, *dtype) : x;
}

Array zeros(const Shape& shape, DType dtype) {
  return fill("zeros", shape, 0, dtype);
}
Array ones(const Shape& shape, DType dtype) {
  return fill("ones", shape, 1, dtype);
}
Array empty(const Shape& shape, DType dtype) {
  return fill("empty", shape, 0, dtype);
}
// As lax.full: without a dtype, a weakly typed fill value (a C++ number) gives a weakly typed
// array.
Array full(const Shape& shape, const Array& fill_value, std::optional<DType> dtype) {
  return fill("full", shape, fill_value, dtype.value_or(fill_value.dtype()),
              !dtype && fill_value.weak_type());
}
namespace {

// As JAX's full_like: a traced value's *_like has the value's type, sharding included (Explicit
// axes); a committed array's is laid out as that array (on Auto and Explicit meshes alike); an
// uncommitted array's is uncommitted.
Array fill_like(const char* api, const Array& x, const Array& value, DType dtype) {
  const std::optional<TypeSharding>& typed = aval_of(x).sharding;
  if (!is_concrete(x) && typed) {
    Array v = ops::convert(value, canonicalize_dtype(dtype));
    // JAX's full of a 0-d value with a sharding reshards the literal onto its mesh.
    return x.ndim() > 0 ? ops::broadcast_in_dim(v, x.shape(), {}, typed)
                        : reshard_to(v, *typed, NoneParam{});
  }
  Array filled = fill(api, x.shape(), value, dtype);
  if (!is_concrete(x) || !x.committed()) return filled;
  return device_put(filled, x.sharding());
}

}  // namespace

Array zeros_like(const Array& x, std::optional<DType> dtype) {
  return fill_like("zeros_like", x, 0, dtype.value_or(x.dtype()));
}
Array ones_like(const Array& x, std::optional<DType> dtype) {
  return fill_like("ones_like", x, 1, dtype.value_or(x.dtype()));
}
Array full_like(const Array& x, const Array& fill_value, std::optional<DType> dtype) {
  return fill_like("full_like", x, fill_value, dtype.value_or(x.dtype()));
}

Array arange(int stop) {
  return arange(0, stop, 1);
}
Array arange(int start, int stop, int step) {
  return arange(int64_t(start), int64_t(stop), int64_t(step), default_int_dtype());
}
Array arange(int64_t start, int64_t stop, int64_t step, DType dtype) {
  if (step == 0) throw ValueError("[arange] step must not be zero");
  // In 128 bits: stop − start and the rounding need not fit in int64.
  const __int128 span = __int128(stop) - start;
  const __int128 count = (span + step + (step > 0 ? -1 : 1)) / step;
  const int64_t n = arange_length(count > 0 ? double(count) : 0.0, dtype);
  if (start == 0 && step == 1) return lax::iota(dtype, n);
  std::shared_ptr<Buffer> values = host_values<int64_t>(n, "arange");
  auto* v = static_cast<int64_t*>(values->data());
  for (int64_t i = 0; i < n; ++i) v[i] = start + i * step;
  return astype(from_host("arange", v, int64, size_t(n), Shape{n}), dtype);
}
Array arange(double stop) {
  return arange(0.0, stop, 1.0);
}
Array arange(float stop) {
  return arange(0.0, double(stop), 1.0);
}
Array arange(double start, double stop, double step) {
  if (step == 0) throw ValueError("[arange] step must not be zero");
  if (!std::isfinite(start) || !std::isfinite(stop) || !std::isfinite(step))
    throw ValueError("[arange] arguments must be finite");
  const int64_t n = arange_length(std::ceil((stop - start) / step), default_float_dtype());
  if (start == 0 && step == 1) return lax::iota(default_float_dtype(), n);  // jnp's fast path
  // jnp.arange calls np.arange with the target dtype, which stores start and start + step in
  // that dtype and fills x[i] = x[0] + i * (x[1] - x[0]) in it.
  auto fill = [&](auto zero) {
    using T = decltype(zero);
    std::shared_ptr<Buffer> values = host_values<T>(n, "arange");
    auto* v = static_cast<T*>(values->data());
    T first = T(start), delta = T(T(start + step) - first);
    for (int64_t i = 0; i < n; ++i) v[i] = i == 1 ? T(start + step) : T(first + T(i) * delta);
    return from_host("arange", v, dtype_of_v<T>, size_t(n), Shape{n});
  };
  return default_float_dtype() == float64 ? fill(0.0) : fill(0.0f);
}

Array linspace(double start, double stop, int64_t num, bool endpoint, DType dtype) {
  if (num < 0)
    throw ValueError("[linspace] number of samples must be non-negative, got " +
                     std::to_string(num));
  DType t = canonicalize_dtype(dtype);
  DType ct = is_floating(t) ? promote_types(t, float32) : default_float_dtype();
  if (num == 0) return zeros({0}, t);
  Array lo = ops::scalar(start, ct), hi = ops::scalar(stop, ct);
  if (num == 1) return astype(lo.reshape({1}), t);
  int64_t div = endpoint ? num - 1 : num;
  // start·(1 − step) + stop·step with step = iota / div, as jnp.linspace computes it.
  Array step = divide(lax::iota(ct, num), ops::scalar(double(div), ct));
  Array out = add(multiply(lo, subtract(ops::scalar(1, ct), step)), multiply(hi, step));
  if (endpoint) out = concatenate({lax::slice(out, {0}, {num - 1}), hi.reshape({1})});
  if (is_integer(t)) out = floor(out);
  return astype(out, t);
}

Array eye(int64_t n, std::optional<int64_t> m, int64_t k, DType dtype) {
  int64_t cols = m.value_or(n);
  if (n < 0 || cols < 0)
    throw ValueError("[eye] negative dimensions are not allowed, got N=" + std::to_string(n) +
                     " and M=" + std::to_string(cols));
  Shape s{n, cols};
  Array rows = lax::broadcasted_iota(int32, s, 0), c = lax::broadcasted_iota(int32, s, 1);
  return astype(equal(add(rows, Array(int(k))), c), dtype);
}
Array identity(int64_t n, DType dtype) {
  return eye(n, std::nullopt, 0, dtype);
}

}  // namespace spmd

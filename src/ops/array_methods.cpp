// The Array handle's parts that run ops or kernels: construction from C++ scalars, element
// access (item, to_vector, x[i]) and the method spellings of jnp functions (x.sum(), x.T()).
// They live here rather than in core so that core includes nothing above it.
#include <spmd/array.h>
#include <spmd/config.h>
#include <spmd/error.h>
#include <spmd/lax.h>
#include <spmd/ops.h>

#include "backends/cpu/convert.h"
#include "core/array_impl.h"

#include <limits>

namespace spmd {
namespace {

template <class T>
Array scalar_array(T value, DType dtype, bool weak) {
  Array out = make_uninitialized(AbstractValue{Shape{}, dtype, weak});
  cpu::convert(&value, dtype_of_v<T>, out.impl()->buffer->data(), dtype, 1);
  return out;
}

// A scalar made from a C++ number: a literal wherever a trace reads it (ArrayImpl::scalar_literal).
Array literal_scalar(Array x) {
  x.impl()->scalar_literal = true;
  return x;
}

Array weak_int(long long v) {
  if (!config::x64_enabled() &&
      (v > std::numeric_limits<int32_t>::max() || v < std::numeric_limits<int32_t>::min()))
    throw ValueError("[Array] the C++ integer " + std::to_string(v) +
                     " is too large to convert to int32 (enable x64 for 64-bit integers)");
  return literal_scalar(scalar_array<int64_t>(v, default_int_dtype(), true));
}

}  // namespace

Array::Array(bool v) : Array(scalar_array<bool>(v, DType::bool_, false)) {}
Array::Array(int v) : Array(weak_int(v)) {}
Array::Array(long v) : Array(weak_int(v)) {}
Array::Array(long long v) : Array(weak_int(v)) {}
Array::Array(unsigned v) : Array(weak_int(v)) {}
Array::Array(float v)
    : Array(literal_scalar(scalar_array<double>(v, default_float_dtype(), true))) {}
Array::Array(double v)
    : Array(literal_scalar(scalar_array<double>(v, default_float_dtype(), true))) {}

void Array::copy_to_host(DType target, void* out, const char* api, bool require_scalar) const {
  const ArrayImpl& impl = checked();
  if (require_scalar && impl.aval.size() != 1)
    throw ValueError("[" + std::string(api) +
                     "] can only convert an array of size 1 to a scalar, got shape " +
                     impl.aval.shape.str());
  cpu::convert(host_data(*this, api), impl.aval.dtype, out, target, impl.aval.size());
}

Array Array::astype(DType t) const {
  return spmd::astype(*this, t);
}
Array Array::reshape(const Shape& s) const {
  return spmd::reshape(*this, s);
}
Array Array::T() const {
  return spmd::transpose(*this);
}
Array Array::transpose(const Axes& axes) const {
  return spmd::transpose(*this, axes);
}
Array Array::flatten() const {
  return spmd::ravel(*this);
}
Array Array::squeeze(const Axes& axes) const {
  return spmd::squeeze(*this, axes);
}
Array Array::sum(const Axes& a, bool k) const {
  return spmd::sum(*this, a, k);
}
Array Array::prod(const Axes& a, bool k) const {
  return spmd::prod(*this, a, k);
}
Array Array::max(const Axes& a, bool k) const {
  return spmd::max(*this, a, k);
}
Array Array::min(const Axes& a, bool k) const {
  return spmd::min(*this, a, k);
}
Array Array::mean(const Axes& a, bool k) const {
  return spmd::mean(*this, a, k);
}
Array Array::var(const Axes& a, bool k) const {
  return spmd::var(*this, a, k);
}
Array Array::std(const Axes& a, bool k) const {
  return spmd::std(*this, a, k);
}
Array Array::all(const Axes& a, bool k) const {
  return spmd::all(*this, a, k);
}
Array Array::any(const Axes& a, bool k) const {
  return spmd::any(*this, a, k);
}
Array Array::argmax(int axis) const {
  return spmd::argmax(*this, axis);
}
Array Array::argmin(int axis) const {
  return spmd::argmin(*this, axis);
}
Array Array::cumsum(int axis) const {
  return spmd::cumsum(*this, axis);
}
Array Array::clip(const Array& lo, const Array& hi) const {
  return spmd::clip(*this, lo, hi);
}
Array Array::dot(const Array& other) const {
  return spmd::dot(*this, other);
}
Array Array::swapaxes(int a, int b) const {
  return spmd::swapaxes(*this, a, b);
}

Array Array::operator[](int64_t i) const {
  const Shape& s = shape();
  if (s.ndim() == 0) throw IndexError("[Array::operator[]] too many indices for a 0-d array");
  if (i < -s[0] || i >= s[0])
    throw IndexError("[Array::operator[]] index " + std::to_string(i) +
                     " is out of bounds for axis 0 with size " + std::to_string(s[0]));
  if (i < 0) i += s[0];
  // As jnp's indexing: an array on several devices is indexed by a dynamic_slice (its static
  // slice would keep a split JAX's eager indexing does not), others by a static slice.
  if (is_concrete(*this) && sharding() && sharding()->num_devices() > 1)
    return lax::dynamic_index_in_dim(*this, Array(static_cast<long long>(i)), 0, false);
  // jnp's x[i]: a slice without strides (printed `strides=None`, where lax.index_in_dim's are
  // ones) and a squeeze.
  std::vector<int64_t> starts(size_t(s.ndim()), 0), limits = s.dims();
  starts[0] = i;
  limits[0] = i + 1;
  return lax::squeeze(lax::slice(*this, starts, limits, {}), {0});
}

}  // namespace spmd

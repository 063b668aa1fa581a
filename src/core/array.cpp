// The Array handle: construction from scalars, element access and the method spellings of ops.
#include <spmd/array.h>
#include <spmd/config.h>
#include <spmd/error.h>
#include <spmd/lax.h>
#include <spmd/ops.h>

#include "backends/cpu/convert.h"
#include "core/array_impl.h"
#include "core/format.h"
#include "core/trace.h"
#include "runtime/sharded.h"

#include <cstring>
#include <limits>
#include <ostream>

namespace spmd {

std::string AbstractValue::str() const {
  std::string s(dtype_short(dtype));
  s += "[";
  for (int i = 0; i < shape.ndim(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  s += "]";
  if (!vma.empty()) {
    std::string names;
    for (size_t i = 0; i < vma.size(); ++i) names += (i ? "," : "") + vma[i];
    s += "{V:" + (vma.size() == 1 ? names : "(" + names + ")") + "}";
  }
  return s;
}

Array make_array(AbstractValue aval, std::shared_ptr<Buffer> buffer) {
  auto impl = std::make_shared<ArrayImpl>();
  impl->aval = std::move(aval);
  impl->buffer = std::move(buffer);
  return Array(std::move(impl));
}

int64_t AbstractValue::checked_nbytes(const char* api) const {
  return check_shape_size(shape, itemsize(dtype), std::string(dtype_name(dtype)).c_str(), api);
}

Array make_uninitialized(AbstractValue aval, const char* api) {
  const int64_t nbytes = aval.checked_nbytes(api);
  std::shared_ptr<Buffer> buffer;
  try {
    buffer = Buffer::allocate(size_t(nbytes));
  } catch (const ResourceExhaustedError& e) {
    throw ResourceExhaustedError("[" + std::string(api) + "] " + e.what() +
                                 " The array has shape " + aval.shape.str() + " and dtype " +
                                 std::string(dtype_name(aval.dtype)) + ".");
  }
  return make_array(std::move(aval), std::move(buffer));
}

const AbstractValue& aval_of(const Array& x) {
  if (!x.impl()) throw ValueError("[Array] use of an empty Array handle");
  return x.impl()->aval;
}

namespace {

// JAX's text, with the dtype's full name: "Array has been deleted with shape=float32[3]."
[[noreturn]] void throw_deleted(const AbstractValue& aval, const char* api) {
  std::string dims;
  for (int i = 0; i < aval.shape.ndim(); ++i) {
    if (i) dims += ",";
    dims += std::to_string(aval.shape[i]);
  }
  throw RuntimeError("[" + std::string(api) + "] Array has been deleted with shape=" +
                     std::string(dtype_name(aval.dtype)) + "[" + dims + "].");
}

}  // namespace

bool is_concrete(const Array& x) {
  return x.impl() && (x.impl()->buffer || x.impl()->sharded);
}

const std::shared_ptr<Buffer>& concrete_buffer(const Array& x, const char* api) {
  if (!x.impl()) throw ValueError("[" + std::string(api) + "] use of an empty Array handle");
  const ArrayImpl& impl = *x.impl();
  if (impl.buffer) return impl.buffer;
  if (impl.sharded) return impl.sharded->gathered(impl.aval);
  if (impl.deleted) throw_deleted(impl.aval, api);
  const char* transform = impl.trace ? impl.trace->transformation_name() : "a transformation";
  throw ConcretizationError(
      "[" + std::string(api) + "] cannot read the value of an array traced by " + transform +
      " (abstract value " + impl.aval.str() +
      "): its value is not known while tracing. Use sp::where or sp::lax::cond for "
      "value-dependent choices, or mark the argument static.");
}

const void* host_data(const Array& x, const char* api) {
  return concrete_buffer(x, api)->data();
}

Array take_and_delete(const Array& x) {
  ArrayImpl& impl = *x.impl();
  auto taken = std::make_shared<ArrayImpl>();
  taken->aval = impl.aval;
  taken->buffer = std::move(impl.buffer);
  taken->sharded = std::move(impl.sharded);
  impl.deleted = true;
  return Array(std::move(taken));
}

namespace {

template <class T>
Array scalar_array(T value, DType dtype, bool weak) {
  Array out = make_uninitialized(AbstractValue{Shape{}, dtype, weak});
  cpu::convert(&value, dtype_of_v<T>, out.impl()->buffer->data(), dtype, 1);
  return out;
}

Array weak_int(long long v) {
  if (!config::x64_enabled() &&
      (v > std::numeric_limits<int32_t>::max() || v < std::numeric_limits<int32_t>::min()))
    throw ValueError("[Array] the C++ integer " + std::to_string(v) +
                     " is too large to convert to int32 (enable x64 for 64-bit integers)");
  return scalar_array<int64_t>(v, default_int_dtype(), true);
}

}  // namespace

Array::Array(bool v) : Array(scalar_array<bool>(v, DType::bool_, false)) {}
Array::Array(int v) : Array(weak_int(v)) {}
Array::Array(long v) : Array(weak_int(v)) {}
Array::Array(long long v) : Array(weak_int(v)) {}
Array::Array(unsigned v) : Array(weak_int(v)) {}
Array::Array(float v) : Array(scalar_array<double>(v, default_float_dtype(), true)) {}
Array::Array(double v) : Array(scalar_array<double>(v, default_float_dtype(), true)) {}

const ArrayImpl& Array::checked() const {
  if (!impl_) throw ValueError("[Array] use of an empty Array handle");
  return *impl_;
}

const Shape& Array::shape() const {
  return checked().aval.shape;
}
DType Array::dtype() const {
  return checked().aval.dtype;
}
bool Array::weak_type() const {
  return checked().aval.weak_type;
}
int Array::ndim() const {
  return shape().ndim();
}
int64_t Array::size() const {
  return shape().size();
}
int64_t Array::itemsize() const {
  return spmd::itemsize(dtype());
}
int64_t Array::nbytes() const {
  return size() * itemsize();
}

void Array::copy_to_host(DType target, void* out, const char* api, bool require_scalar) const {
  const ArrayImpl& impl = checked();
  if (require_scalar && impl.aval.size() != 1)
    throw ValueError("[" + std::string(api) +
                     "] can only convert an array of size 1 to a scalar, got shape " +
                     impl.aval.shape.str());
  cpu::convert(host_data(*this, api), impl.aval.dtype, out, target, impl.aval.size());
}

bool Array::is_deleted() const {
  return checked().deleted;
}

const Array& Array::block_until_ready() const {
  const ArrayImpl& impl = checked();
  if (impl.deleted) throw_deleted(impl.aval, "block_until_ready");
  if (impl.sharded) impl.sharded->wait();
  return *this;
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
  return lax::index_in_dim(*this, i, 0, /*keepdims=*/false);
}

std::string str(const Array& x) {
  const ArrayImpl& impl = *x.impl();
  return format_array_str(host_data(x, "print"), impl.aval.dtype, impl.aval.shape);
}

std::string repr(const Array& x) {
  const ArrayImpl& impl = *x.impl();
  return format_array_repr(host_data(x, "repr"), impl.aval.dtype, impl.aval.shape,
                           impl.aval.weak_type);
}

std::string numpy_repr(const std::vector<double>& values, const Shape& shape) {
  Shape s = shape.ndim() == 0 ? Shape({int64_t(values.size())}) : shape;
  if (s.size() != int64_t(values.size()))
    throw ValueError("[numpy_repr] shape " + s.str() + " holds " + std::to_string(s.size()) +
                     " values, got " + std::to_string(values.size()));
  return format_ndarray_repr(values.data(), DType::float64, s);
}

std::ostream& operator<<(std::ostream& os, const Array& x) {
  return os << str(x);
}

}  // namespace spmd

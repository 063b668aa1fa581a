// The Array handle: its abstract value, its concrete storage and printing. Construction from
// scalars, element access and the method spellings of ops need kernels and ops, which live
// above core (src/ops/array_methods.cpp).
#include <spmd/array.h>
#include <spmd/error.h>

#include "core/array_impl.h"
#include "core/format.h"
#include "core/trace.h"

#include <ostream>

namespace spmd {

int64_t TypeSharding::size_of(const std::vector<std::string>& axes) const {
  int64_t n = 1;
  for (const Axis& a : mesh)
    for (const std::string& name : axes)
      if (a.name == name) n *= a.size;
  return n;
}

std::string TypeSharding::dim_str(int d, int64_t n) const {
  std::string s = std::to_string(n);
  const std::vector<std::string>& axes = dims[size_t(d)];
  if (axes.empty()) return s;
  std::string names;
  for (size_t i = 0; i < axes.size(); ++i) names += (i ? "," : "") + axes[i];
  return s + "@" + (axes.size() == 1 ? names : "(" + names + ")");
}

namespace {

std::string dims_str(const AbstractValue& t) {
  std::string s = "[";
  for (int i = 0; i < t.shape.ndim(); ++i) {
    if (i) s += ",";
    s += t.sharding ? t.sharding->dim_str(i, t.shape[i]) : std::to_string(t.shape[i]);
  }
  return s + "]";
}

// The axes a value varies over, as JAX prints them after its shape: "{V:a}", "{V:(a,b)}".
std::string vma_str(const AbstractValue& t) {
  if (t.vma.empty()) return "";
  std::string names;
  for (size_t i = 0; i < t.vma.size(); ++i) names += (i ? "," : "") + t.vma[i];
  return "{V:" + (t.vma.size() == 1 ? names : "(" + names + ")") + "}";
}

}  // namespace

std::string AbstractValue::typeof_str() const {
  return std::string(dtype_name(dtype)) + dims_str(*this) + vma_str(*this);
}

std::string AbstractValue::str() const {
  return std::string(dtype_short(dtype)) + dims_str(*this) + vma_str(*this);
}

Array make_array(AbstractValue aval, std::shared_ptr<Buffer> buffer) {
  aval.sharding.reset();
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

std::vector<AbstractValue> types_of(std::span<const Array> xs) {
  std::vector<AbstractValue> out;
  out.reserve(xs.size());
  for (const Array& x : xs) out.push_back(aval_of(x));
  return out;
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
  if (impl.sharded) return gathered_buffer(*impl.sharded, impl.aval);
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

bool Array::is_deleted() const {
  return checked().deleted;
}

const Array& Array::block_until_ready() const {
  const ArrayImpl& impl = checked();
  if (impl.deleted) throw_deleted(impl.aval, "block_until_ready");
  if (impl.sharded) wait_until_filled(*impl.sharded);
  return *this;
}

std::string str(const Array& x) {
  const void* data = host_data(x, "print");  // raises for an empty handle
  const ArrayImpl& impl = *x.impl();
  return format_array_str(data, impl.aval.dtype, impl.aval.shape);
}

std::string repr(const Array& x) {
  const void* data = host_data(x, "repr");
  const ArrayImpl& impl = *x.impl();
  return format_array_repr(data, impl.aval.dtype, impl.aval.shape, impl.aval.weak_type);
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

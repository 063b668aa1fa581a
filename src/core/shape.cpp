// Shape arithmetic and axis normalisation.
#include <spmd/error.h>
#include <spmd/shape.h>

#include <optional>
#include <ostream>
#include <string>

namespace spmd {

namespace {

[[noreturn]] void throw_too_big(const Shape& shape, const std::string& what, const char* api) {
  throw ValueError("[" + std::string(api) +
                   "] array is too big; `arr.size * arr.dtype.itemsize` is larger than the "
                   "maximum possible size, got shape " +
                   shape.str() + what);
}

// The product of `factor` and the nonzero dims, or nullopt when it overflows int64.
std::optional<int64_t> nonzero_product(const std::vector<int64_t>& dims, int64_t factor) {
  int64_t n = factor;
  for (int64_t d : dims)
    if (d != 0 && __builtin_mul_overflow(n, d, &n)) return std::nullopt;
  return n;
}

}  // namespace

int64_t Shape::size() const {
  for (int64_t d : dims_)
    if (d == 0) return 0;
  std::optional<int64_t> n = nonzero_product(dims_, 1);
  if (!n) throw_too_big(*this, "", "shape");
  return *n;
}

int64_t Shape::dim(int axis) const {
  return dims_[size_t(normalize_axis(axis, ndim(), "shape"))];
}

std::vector<int64_t> Shape::strides() const {
  std::vector<int64_t> s(dims_.size());
  int64_t acc = 1;
  for (size_t i = dims_.size(); i-- > 0;) {
    s[i] = acc;
    if (__builtin_mul_overflow(acc, dims_[i], &acc)) throw_too_big(*this, "", "shape");
  }
  return s;
}

int64_t check_shape_size(const Shape& shape, int64_t itemsize, const char* dtype_name,
                         const char* api) {
  for (int64_t d : shape)
    if (d < 0)
      throw ValueError("[" + std::string(api) +
                       "] negative dimensions are not allowed, got shape " + shape.str());
  if (!nonzero_product(shape.dims(), itemsize))
    throw_too_big(shape, dtype_name ? " of " + std::string(dtype_name) : "", api);
  return shape.size() * itemsize;
}

std::string Shape::str() const {
  std::string s = "(";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[i]);
  }
  if (dims_.size() == 1) s += ",";
  return s + ")";
}

std::ostream& operator<<(std::ostream& os, const Shape& s) {
  return os << s.str();
}

int normalize_axis(int axis, int ndim, const char* api) {
  if (axis < -ndim || axis >= ndim)
    throw AxisError("[" + std::string(api) + "] axis " + std::to_string(axis) +
                    " is out of bounds for array of dimension " + std::to_string(ndim));
  return axis < 0 ? axis + ndim : axis;
}

}  // namespace spmd

// Shape arithmetic and axis normalisation.
#include <spmd/error.h>
#include <spmd/shape.h>

#include <ostream>
#include <string>

namespace spmd {

int64_t Shape::size() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

int64_t Shape::dim(int axis) const {
  return dims_[size_t(normalize_axis(axis, ndim(), "shape"))];
}

std::vector<int64_t> Shape::strides() const {
  std::vector<int64_t> s(dims_.size());
  int64_t acc = 1;
  for (size_t i = dims_.size(); i-- > 0;) {
    s[i] = acc;
    acc *= dims_[i];
  }
  return s;
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

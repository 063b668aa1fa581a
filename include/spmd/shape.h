// Shapes and axis lists. A Shape is a list of non-negative dimension sizes; it compares, hashes
// and prints like a Python tuple: (2, 3), (4,), ().
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <string>
#include <vector>

namespace spmd {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}
  template <class It>
  Shape(It first, It last) : dims_(first, last) {}

  int ndim() const { return int(dims_.size()); }
  // Product of the dims (1 for a scalar, 0 when a dim is 0); throws ValueError when it does not
  // fit in int64, which no array's shape does (check_shape_size).
  int64_t size() const;
  int64_t operator[](int i) const { return dims_[size_t(i)]; }
  int64_t& operator[](int i) { return dims_[size_t(i)]; }
  int64_t dim(int axis) const;  // negative axes count from the end; throws IndexError
  const std::vector<int64_t>& dims() const { return dims_; }
  std::vector<int64_t>::const_iterator begin() const { return dims_.begin(); }
  std::vector<int64_t>::const_iterator end() const { return dims_.end(); }
  bool empty() const { return dims_.empty(); }
  void push_back(int64_t d) { dims_.push_back(d); }
  // Row-major element strides (in elements); throws ValueError as size() does.
  std::vector<int64_t> strides() const;

  bool operator==(const Shape&) const = default;
  std::string str() const;  // "(2, 3)", "(4,)", "()"

 private:
  std::vector<int64_t> dims_;
};

std::ostream& operator<<(std::ostream& os, const Shape& s);

// NumPy's limit on the shape of an array with elements of `itemsize` bytes: every dim is
// non-negative and the product of the nonzero dims times `itemsize` is at most 2^63 − 1 bytes.
// Every element count, stride and byte offset of such a shape fits in int64, so kernels index it
// without checks. Returns the array's bytes; throws ValueError starting "[api] " otherwise,
// naming the shape and `dtype_name` (when not null).
int64_t check_shape_size(const Shape& shape, int64_t itemsize, const char* dtype_name,
                         const char* api);

// A list of axes as the user passes them: `sum(x, {0, 1})`.
using Axes = std::vector<int>;

// Normalises a possibly negative axis against `ndim`; throws AxisError naming `api` otherwise.
int normalize_axis(int axis, int ndim, const char* api);

}  // namespace spmd

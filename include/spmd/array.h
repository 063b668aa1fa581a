// spmd::Array: an immutable, reference-counted n-d array handle (JAX's jax.Array). Arrays are
// cheap to copy; every operation returns a new Array. C++ scalars convert implicitly to weakly
// typed 0-d arrays, like Python scalars in JAX: `x + 1.0` keeps x's float dtype.
#pragma once

#include <spmd/dtype.h>
#include <spmd/shape.h>

#include <concepts>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace spmd {

struct ArrayImpl;
class Sharding;
struct Shard;
class IndexUpdate;

template <class T>
concept Scalar =
    std::is_arithmetic_v<T> || std::is_same_v<T, bfloat16_t> || std::is_same_v<T, float16_t>;

class Array {
 public:
  // An empty handle; any use other than assignment raises ValueError.
  Array() = default;
  // Weakly typed scalars (int → int32, floating → float32; 64-bit with x64). bool is strong.
  Array(bool v);
  Array(int v);
  Array(long v);
  Array(long long v);
  Array(unsigned v);
  Array(float v);
  Array(double v);

  const Shape& shape() const;
  DType dtype() const;
  bool weak_type() const;
  int ndim() const;
  int64_t size() const;
  int64_t nbytes() const;
  int64_t itemsize() const;
  bool valid() const { return impl_ != nullptr; }
  // Whether the array was donated to a jit call (JitOptions::donate_argnums): its shape and
  // dtype stay readable, any use of its value raises RuntimeError, as in JAX.
  bool is_deleted() const;

  // The single element as T (converted as by astype). Raises unless size() == 1.
  template <Scalar T>
  T item() const {
    T out;
    copy_to_host(dtype_of_v<T>, &out, "item", /*require_scalar=*/true);
    return out;
  }
  // All elements in row-major order, converted to T as by astype.
  template <Scalar T>
  requires(!std::is_same_v<T, bool>) std::vector<T> to_vector()
  const {
    std::vector<T> out(static_cast<size_t>(size()));
    copy_to_host(dtype_of_v<T>, out.data(), "to_vector", false);
    return out;
  }
  // std::vector<bool> has no data(); elements come out as bytes.
  template <std::same_as<bool> T>
  std::vector<bool> to_vector() const {
    std::vector<uint8_t> bytes(static_cast<size_t>(size()));
    copy_to_host(DType::bool_, bytes.data(), "to_vector", false);
    return std::vector<bool>(bytes.begin(), bytes.end());
  }

  // Methods mirroring jax.Array's.
  Array astype(DType t) const;
  Array reshape(const Shape& new_shape) const;  // one dim may be -1
  Array T() const;
  Array transpose(const Axes& axes = {}) const;
  Array flatten() const;
  Array ravel() const { return flatten(); }
  Array squeeze(const Axes& axes = {}) const;
  Array sum(const Axes& axes = {}, bool keepdims = false) const;
  Array prod(const Axes& axes = {}, bool keepdims = false) const;
  Array max(const Axes& axes = {}, bool keepdims = false) const;
  Array min(const Axes& axes = {}, bool keepdims = false) const;
  Array mean(const Axes& axes = {}, bool keepdims = false) const;
  Array var(const Axes& axes = {}, bool keepdims = false) const;
  Array std(const Axes& axes = {}, bool keepdims = false) const;
  Array all(const Axes& axes = {}, bool keepdims = false) const;
  Array any(const Axes& axes = {}, bool keepdims = false) const;
  Array argmax(int axis) const;
  Array argmin(int axis) const;
  Array cumsum(int axis) const;
  Array clip(const Array& lo, const Array& hi) const;
  Array dot(const Array& other) const;
  Array swapaxes(int a, int b) const;
  // x[i]: the sub-array at index i of axis 0 (negative i counts from the end).
  Array operator[](int64_t i) const;
  // x.at[...] (jax.Array.at): indexed reads and updates, each index an integer, sp::slice(...),
  // sp::Ellipsis or an integer Array, e.g. x.at(1, sp::slice(0, 3)).set(v) for x.at[1, 0:3],
  // x.at(sp::slice(), idx).add(1.0) for x.at[:, idx], x.at(idx).get(). See IndexUpdate below.
  template <class... Indices>
  IndexUpdate at(const Indices&... indices) const;

  // Blocks until the value is computed on every device holding it; an error raised while
  // computing it (on any device) is rethrown here.
  const Array& block_until_ready() const;

  // Where the array lives (placement.h): its sharding (a SingleDeviceSharding on the default
  // device for arrays that were never placed), its shards on this process's devices in the
  // sharding's device order, whether every device holds all of it, whether this process holds
  // every shard (false when the sharding spans other processes' devices), and whether it was
  // placed explicitly (device_put or a sharded computation) rather than created on the default
  // device.
  std::shared_ptr<const Sharding> sharding() const;
  std::vector<Shard> addressable_shards() const;
  bool is_fully_replicated() const;
  bool is_fully_addressable() const;
  bool committed() const;
  // The values of addressable shard i (negative i counts from the end), as
  // jax.Array.addressable_data: the first shard's for a fully replicated array, whatever i.
  // Raises IndexError outside the shards.
  Array addressable_data(int64_t i) const;

  // Internal: the implementation record.
  const std::shared_ptr<ArrayImpl>& impl() const { return impl_; }
  explicit Array(std::shared_ptr<ArrayImpl> impl) : impl_(std::move(impl)) {}

 private:
  void copy_to_host(DType target, void* out, const char* api, bool require_scalar) const;
  const ArrayImpl& checked() const;
  std::shared_ptr<ArrayImpl> impl_;
};

// ---- indexed updates (x.at[...]) -------------------------------------------------------------
// Python's slice start:stop:step as an index of one axis; unset bounds (std::nullopt) run to the
// ends as in Python and negative bounds count from the end.
struct IndexSlice {
  std::optional<int64_t> start, stop;
  int64_t step = 1;
};
// sp::slice() is Python's `:`, sp::slice(1, 3) `1:3`, sp::slice(std::nullopt, std::nullopt, -1)
// `::-1`.
inline IndexSlice slice(std::optional<int64_t> start = std::nullopt,
                        std::optional<int64_t> stop = std::nullopt, int64_t step = 1) {
  return IndexSlice{start, stop, step};
}
// Python's `...`: as many `:` as the other indices leave axes.
struct EllipsisIndex {};
inline constexpr EllipsisIndex Ellipsis{};

// One index of x.at(...): an integer (static), a slice, an ellipsis or an integer array
// (NumPy's advanced indexing; several arrays broadcast together).
struct AtIndex {
  enum class Kind { integer, slice, ellipsis, array };
  Kind kind;
  int64_t integer = 0;
  IndexSlice slice;
  Array array;
  template <std::integral T>
  requires(!std::is_same_v<T, bool>) AtIndex(T i) : kind(Kind::integer), integer(int64_t(i)) {}
  AtIndex(const IndexSlice& s) : kind(Kind::slice), slice(s) {}
  AtIndex(EllipsisIndex) : kind(Kind::ellipsis) {}
  AtIndex(const Array& a) : kind(Kind::array), array(a) {}
};

// JAX's mode, indices_are_sorted and unique_indices arguments of the .at[] methods. mode ""
// is JAX's default: updates out of bounds are dropped ("drop" / "fill"), reads are clamped
// ("clip" / "promise_in_bounds"); "clip" clamps updates too, "fill" fills reads with fill_value
// (NaN, the minimum signed or maximum unsigned integer, or true when unset).
struct AtOptions {
  std::string mode;
  bool indices_are_sorted = false;
  bool unique_indices = false;
  std::optional<double> fill_value;
};

// x.at(...): what JAX's x.at[...] returns. Each method returns a new array; `v` broadcasts to
// the indexed shape as NumPy broadcasts (a C++ scalar is weakly typed), and the result keeps x's
// dtype. With repeated indices, add and mul accumulate, min and max combine, and set keeps one
// of the updates (which one is unspecified in JAX; here the last).
class IndexUpdate {
 public:
  IndexUpdate(Array x, std::vector<AtIndex> indices)
      : x_(std::move(x)), indices_(std::move(indices)) {}
  Array get(const AtOptions& options = {}) const;
  Array set(const Array& v, const AtOptions& options = {}) const;
  Array add(const Array& v, const AtOptions& options = {}) const;
  Array mul(const Array& v, const AtOptions& options = {}) const;
  Array min(const Array& v, const AtOptions& options = {}) const;
  Array max(const Array& v, const AtOptions& options = {}) const;

 private:
  Array x_;
  std::vector<AtIndex> indices_;
};

template <class... Indices>
IndexUpdate Array::at(const Indices&... indices) const {
  return IndexUpdate(*this, std::vector<AtIndex>{AtIndex(indices)...});
}

// NumPy's str(x): "[0 1 4 9]", "[0.         0.16666667 0.33333334 0.5       ]".
std::ostream& operator<<(std::ostream& os, const Array& x);
std::string str(const Array& x);
// JAX's repr(x): "Array([0, 1, 4], dtype=int32)".
std::string repr(const Array& x);
// NumPy's repr of float64 values on the host laid out in `shape` (1-D when empty): what Python
// shows for NumPy results such as np.sin(x) of an Array, "array([0.        , 0.84147098])".
std::string numpy_repr(const std::vector<double>& values, const Shape& shape = Shape());

}  // namespace spmd

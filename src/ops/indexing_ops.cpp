// lax slicing (static and dynamic) and the jnp indexing functions take, take_along_axis and
// one_hot. Negative indices wrap as in NumPy; concrete out-of-range indices raise IndexError,
// and the gathers are built with the dimension numbers jax.numpy uses.
#include <spmd/lax.h>
#include <spmd/ops.h>

#include "ops/op_util.h"

#include <algorithm>
#include <limits>
#include <string>

namespace spmd {
namespace {

// A start index of a dynamic slice as a 0-d integer array, negative values wrapped once by the
// dimension size (statically when the value is known, as jax does for Python ints).
Array normalize_start(const char* api, const Array& i, int64_t size) {
  if (!is_integer(i.dtype()))
    throw TypeError(ops::prefix(api) + "start indices must have an integer type, got " +
                    std::string(dtype_name(i.dtype())));
  if (i.ndim() != 0)
    throw ShapeError(ops::prefix(api) + "start indices must be scalars, got shape " +
                     i.shape().str());
  if (is_unsigned_integer(i.dtype())) return i;
  if (is_concrete(i)) {
    const int64_t v = i.item<int64_t>();
    if (v >= 0) return i;
    // A narrow index type may not hold the wrapped value.
    const DType t = itemsize(i.dtype()) < 4 ? int32 : i.dtype();
    return ops::scalar(double(v + size), t, i.weak_type());
  }
  return lax::select(less(i, 0), add(i, ops::scalar(double(size), i.dtype())), i);
}

std::vector<Array> normalize_starts(const char* api, const Array& x,
                                    const std::vector<Array>& starts) {
  if (int(starts.size()) != x.ndim())
    throw ValueError(ops::prefix(api) +
                     "length of slice indices must match number of operand "
                     "dimensions, got " +
                     std::to_string(starts.size()) + " indices for shape " + x.shape().str());
  std::vector<Array> out;
  for (size_t d = 0; d < starts.size(); ++d)
    out.push_back(normalize_start(api, starts[d], x.shape()[int(d)]));
  return out;
}

// Raises IndexError for the first index outside [-size, size) of a concrete index array.
// Returns whether any index may be negative (always true for traced signed indices).
bool check_bounds(const char* api, const Array& indices, int axis, int64_t size) {
  if (is_unsigned_integer(indices.dtype()) && !is_concrete(indices)) return false;
  if (!is_concrete(indices)) return true;
  bool negative = false;
  const void* data = host_data(indices, api);
  dispatch_dtype(indices.dtype(), [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      const T* p = static_cast<const T*>(data);
      for (int64_t k = 0; k < indices.size(); ++k) {
        const bool bad = std::is_unsigned_v<T> ? uint64_t(p[k]) >= uint64_t(size)
                                               : (int64_t(p[k]) < -size || int64_t(p[k]) >= size);
        if (bad)
          throw IndexError(ops::prefix(api) + "index " + std::to_string(p[k]) +
                           " is out of bounds for axis " + std::to_string(axis) + " with size " +
                           std::to_string(size));
        negative = negative || p[k] < T(0);
      }
    }
  });
  return negative;
}

void require_integer_indices(const char* api, const Array& indices) {
  if (!is_integer(indices.dtype()))
    throw TypeError(ops::prefix(api) + "indices must have an integer type, got " +
                    std::string(dtype_name(indices.dtype())));
}

struct GatherSpec {
  std::vector<int64_t> offset_dims, collapsed_slice_dims, start_index_map;
  std::vector<int64_t> operand_batching_dims, start_indices_batching_dims, slice_sizes;
};

Array gather(const Array& x, const Array& indices, const GatherSpec& g) {
  return ops::apply("gather", {x, indices},
                    Params{{"offset_dims", g.offset_dims},
                           {"collapsed_slice_dims", g.collapsed_slice_dims},
                           {"start_index_map", g.start_index_map},
                           {"operand_batching_dims", g.operand_batching_dims},
                           {"start_indices_batching_dims", g.start_indices_batching_dims},
                           {"slice_sizes", g.slice_sizes},
                           {"mode", std::string("fill")},
                           {"fill_value", NoneParam{}},
                           {"indices_are_sorted", false},
                           {"unique_indices", false}});
}

Array zeros_of(const Shape& shape, const Array& like) {
  return lax::broadcast_in_dim(ops::scalar(0, like.dtype(), like.weak_type()), shape, {});
}

}  // namespace

// ---- lax: static slices -------------------------------------------------------------------------
namespace lax {

Array slice(const Array& x, const std::vector<int64_t>& start_indices,
            const std::vector<int64_t>& limit_indices, const std::vector<int64_t>& strides) {
  ParamValue s = strides.empty() ? ParamValue(NoneParam{}) : ParamValue(strides);
  return ops::apply(
      "slice", {x},
      Params{{"start_indices", start_indices}, {"limit_indices", limit_indices}, {"strides", s}});
}

Array slice_in_dim(const Array& x, int64_t start, int64_t limit, int64_t stride, int axis) {
  const int dim = ops::canonicalize_axis("slice_in_dim", axis, x.ndim());
  const int64_t n = x.shape()[dim];
  std::vector<int64_t> starts(size_t(x.ndim()), 0), limits = x.shape().dims();
  std::vector<int64_t> strides(size_t(x.ndim()), 1);
  starts[size_t(dim)] = start < 0 ? start + n : start;
  limits[size_t(dim)] = limit < 0 ? limit + n : limit;
  strides[size_t(dim)] = stride;
  return slice(x, starts, limits, strides);
}

Array index_in_dim(const Array& x, int64_t index, int axis, bool keepdims) {
  const int dim = ops::canonicalize_axis("index_in_dim", axis, x.ndim());
  const int64_t n = x.shape()[dim];
  const int64_t i = index < 0 ? index + n : index;
  if (i < 0 || i >= n)
    throw IndexError("[index_in_dim] index " + std::to_string(index) +
                     " is out of bounds for axis " + std::to_string(dim) + " with size " +
                     std::to_string(n));
  Array out = slice_in_dim(x, i, i + 1, 1, dim);
  return keepdims ? out : squeeze(out, std::vector<int64_t>{dim});
}

// ---- lax: dynamic slices ------------------------------------------------------------------------
Array dynamic_slice(const Array& x, const std::vector<Array>& start_indices,
                    const std::vector<int64_t>& slice_sizes) {
  std::vector<Array> in{x};
  for (Array& s : normalize_starts("dynamic_slice", x, start_indices)) in.push_back(std::move(s));
  return ops::apply("dynamic_slice", in, Params{{"slice_sizes", slice_sizes}});
}

Array dynamic_update_slice(const Array& x, const Array& update,
                           const std::vector<Array>& start_indices) {
  std::vector<Array> in{x, update};
  for (Array& s : normalize_starts("dynamic_update_slice", x, start_indices))
    in.push_back(std::move(s));
  return ops::apply("dynamic_update_slice", in);
}

Array dynamic_slice_in_dim(const Array& x, const Array& start, int64_t size, int axis) {
  const int dim = ops::canonicalize_axis("dynamic_slice_in_dim", axis, x.ndim());
  if (!is_integer(start.dtype()))
    throw TypeError("[dynamic_slice_in_dim] start index must have an integer type, got " +
                    std::string(dtype_name(start.dtype())));
  std::vector<Array> starts(size_t(x.ndim()), ops::scalar(0, start.dtype(), start.weak_type()));
  starts[size_t(dim)] = start;
  std::vector<int64_t> sizes = x.shape().dims();
  sizes[size_t(dim)] = size;
  return dynamic_slice(x, starts, sizes);
}

Array dynamic_index_in_dim(const Array& x, const Array& index, int axis, bool keepdims) {
  const int dim = ops::canonicalize_axis("dynamic_index_in_dim", axis, x.ndim());
  Array out = dynamic_slice_in_dim(x, index, 1, dim);
  return keepdims ? out : squeeze(out, std::vector<int64_t>{dim});
}

}  // namespace lax

// ---- jnp: take ----------------------------------------------------------------------------------
Array take(const Array& x, const Array& indices, std::optional<int> axis) {
  require_integer_indices("take", indices);
  const Array a = axis ? x : ravel(x);
  const int dim = axis ? ops::canonicalize_axis("take", *axis, x.ndim()) : 0;
  const int64_t n = a.shape()[dim];
  const bool negative = check_bounds("take", indices, dim, n);
  const int q = indices.ndim();
  std::vector<int64_t> out_shape(a.shape().begin(), a.shape().begin() + dim);
  out_shape.insert(out_shape.end(), indices.shape().begin(), indices.shape().end());
  out_shape.insert(out_shape.end(), a.shape().begin() + dim + 1, a.shape().end());
  if (n == 0 && indices.size() != 0)
    throw IndexError("[take] cannot do a non-empty take from an empty axis");
  if (indices.size() == 0) return zeros_of(Shape(out_shape), a);

  Array idx = negative ? ops::wrap_negative(indices, n) : indices;
  std::vector<int64_t> idx_shape = idx.shape().dims(), bdims;
  for (int i = 0; i < q; ++i) bdims.push_back(i);
  idx_shape.push_back(1);
  idx = lax::broadcast_in_dim(idx, Shape(idx_shape), bdims);

  GatherSpec g;
  for (int d = 0; d < dim; ++d) g.offset_dims.push_back(d);
  for (int d = dim + q; d < a.ndim() + q - 1; ++d) g.offset_dims.push_back(d);
  g.collapsed_slice_dims = {dim};
  g.start_index_map = {dim};
  g.slice_sizes = a.shape().dims();
  g.slice_sizes[size_t(dim)] = 1;
  return gather(a, idx, g);
}

// ---- jnp: take_along_axis -----------------------------------------------------------------------
Array take_along_axis(const Array& x, const Array& indices, int axis) {
  require_integer_indices("take_along_axis", indices);
  const int rank = x.ndim();
  if (indices.ndim() != rank)
    throw ShapeError(
        "[take_along_axis] indices and arr must have the same number of "
        "dimensions; " +
        std::to_string(indices.ndim()) + " vs. " + std::to_string(rank));
  const int dim = ops::canonicalize_axis("take_along_axis", axis, rank);
  const int64_t n = x.shape()[dim];
  const Shape& idx_shape = indices.shape();
  Shape arr_shape = x.shape();
  arr_shape[dim] = 1;
  const Shape out_shape = ops::broadcast_shapes("take_along_axis", {idx_shape, arr_shape});
  const bool negative = check_bounds("take_along_axis", indices, dim, n);
  if (n == 0 || out_shape.size() == 0) return zeros_of(out_shape, x);

  Array idx = negative ? ops::wrap_negative(indices, n) : indices;

  std::vector<int64_t> gather_shape;
  for (int i = 0; i < rank; ++i)
    if (i == dim || idx_shape[i] != 1) gather_shape.push_back(out_shape[i]);
  gather_shape.push_back(1);
  idx = lax::reshape(idx, Shape(gather_shape));

  GatherSpec g;
  std::vector<int64_t> squeezed;
  int64_t new_i = 0, j = 0;
  for (int i = 0; i < rank; ++i) {
    if (i == dim) {
      g.slice_sizes.push_back(1);
      g.start_index_map.push_back(new_i);
      g.collapsed_slice_dims.push_back(new_i);
      ++new_i, ++j;
    } else if (idx_shape[i] == 1) {
      g.offset_dims.push_back(i);
      g.slice_sizes.push_back(arr_shape[i]);
      ++new_i;
    } else if (arr_shape[i] == 1) {
      squeezed.push_back(i);
      ++j;
    } else {
      g.slice_sizes.push_back(arr_shape[i] == 0 ? 0 : 1);
      g.operand_batching_dims.push_back(new_i);
      g.start_indices_batching_dims.push_back(j);
      ++new_i, ++j;
    }
  }
  return gather(lax::squeeze(x, squeezed), idx, g);
}

// ---- jax.nn.one_hot -----------------------------------------------------------------------------
Array one_hot(const Array& x, int64_t num_classes, DType dtype) {
  if (num_classes < 0)
    throw ValueError("[one_hot] num_classes must be nonnegative, got " +
                     std::to_string(num_classes));
  if (is_bool(x.dtype()))
    throw TypeError("[one_hot] expected an integer or floating-point array, got bool");
  const int r = x.ndim();
  std::vector<int64_t> classes_shape(size_t(r), 1);
  classes_shape.push_back(num_classes);
  Array lhs = lax::expand_dims(x, {r});
  Array rhs = lax::broadcasted_iota(x.dtype(), Shape(classes_shape), r);
  return ops::convert(equal(lhs, rhs), canonicalize_dtype(dtype));
}

}  // namespace spmd

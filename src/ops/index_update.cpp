// x.at[...] (jax.Array.at): the index list becomes the gather JAX's _index_to_gather builds
// (jax/_src/numpy/indexing.py); get() gathers with it (or slices, when every index is static),
// the updates scatter with the transposed dimension numbers, as jax/_src/ops/scatter.py does.
#include <spmd/error.h>
#include <spmd/lax.h>
#include <spmd/ops.h>

#include "ops/op_util.h"
#include "prims/indexing.h"
#include "prims/scatter.h"

#include <algorithm>
#include <limits>
#include <string>

namespace spmd {
namespace {

using Ints = std::vector<int64_t>;
using Kind = AtIndex::Kind;

// What _index_to_gather returns: the gather that reads x[idx], the shape of its result before
// reversal, and the result dims that slices with negative steps reverse.
struct GatherIndexer {
  cpu::GatherDims dims;
  Array indices;
  Shape slice_shape;
  Ints reversed_y_dims;
  bool advanced = false;  // some index is an array: indices neither sorted nor unique
};

// Python's slice.indices(size) and the slice's length (core.canonicalize_slice).
struct CanonicalSlice {
  int64_t start, step, size;
};

CanonicalSlice canonicalize_slice(const IndexSlice& s, int64_t n) {
  if (s.step == 0) throw ValueError("[at] slice step cannot be zero");
  const int64_t step = s.step;
  auto bound = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t i = *v < 0 ? *v + n : *v;
    return step > 0 ? std::clamp<int64_t>(i, 0, n) : std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t start = bound(s.start, step > 0 ? 0 : n - 1);
  const int64_t stop = bound(s.stop, step > 0 ? n : -1);
  int64_t size = 0;
  if (step > 0 && stop > start) size = (stop - start + step - 1) / step;
  if (step < 0 && start > stop) size = (start - stop - step - 1) / -step;
  return {start, step, size};
}

// JAX's spelling of a type in messages: float32[2,3].
std::string type_str(DType t, const Shape& shape) {
  std::string out = std::string(dtype_name(t)) + "[";
  for (int d = 0; d < shape.ndim(); ++d) out += (d ? "," : "") + std::to_string(shape[d]);
  return out + "]";
}
std::string type_str(const Array& a) {
  return type_str(a.dtype(), a.shape());
}

// The index list with the ellipsis expanded and trailing `:` added, checked as JAX checks it.
std::vector<AtIndex> expand_indices(const std::vector<AtIndex>& raw, int ndim) {
  int64_t used = 0, ellipses = 0;
  for (const AtIndex& i : raw) {
    if (i.kind == Kind::ellipsis)
      ++ellipses;
    else
      ++used;
    if (i.kind != Kind::array) continue;
    if (!i.array.valid()) throw ValueError("[at] an index array is empty (default-constructed)");
    if (is_bool(i.array.dtype()))
      throw TypeError("[at] boolean array indices are not supported, got " + type_str(i.array) +
                      "; use sp::where to select by a mask");
    if (!is_integer(i.array.dtype()))
      throw TypeError("[at] Indexer must have integer or boolean type, got indexer with type " +
                      std::string(dtype_name(i.array.dtype())));
  }
  if (ellipses > 1) throw IndexError("[at] an index can only have a single ellipsis ('...')");
  if (used > ndim)
    throw IndexError("[at] Too many indices: array is " + std::to_string(ndim) +
                     "-dimensional, but " + std::to_string(used) + " were indexed");
  std::vector<AtIndex> out;
  for (const AtIndex& i : raw) {
    if (i.kind != Kind::ellipsis) {
      out.push_back(i);
      continue;
    }
    for (int64_t k = 0; k < ndim - used; ++k) out.push_back(slice());
  }
  while (int64_t(out.size()) < ndim) out.push_back(slice());
  return out;
}

// Advanced indexing applies when some index is an array with dims; integers then count as
// advanced indices too (NumPy's rule).
bool is_advanced(const std::vector<AtIndex>& idx) {
  return std::any_of(idx.begin(), idx.end(),
                     [](const AtIndex& i) { return i.kind == Kind::array && i.array.ndim() > 0; });
}

bool is_advanced_item(const AtIndex& i) {
  return i.kind == Kind::array || i.kind == Kind::integer;
}

// A static integer index normalised as JAX normalises Python ints (negatives wrap once; out of
// range values stay, and the gather clamps or the scatter drops them).
Array integer_index(int64_t i, int64_t size, DType index_dtype) {
  return ops::scalar(double(i < 0 ? i + size : i), index_dtype);
}

Array array_index(const Array& a, int64_t size, DType index_dtype) {
  Array idx = is_unsigned_integer(a.dtype()) ? a : ops::wrap_negative(a, size);
  return ops::convert(idx, index_dtype);
}

GatherIndexer index_to_gather(const Shape& shape, const std::vector<AtIndex>& raw) {
  // Whether the advanced indices sit next to each other, judged before the ellipsis expands.
  Ints advanced_pos;
  for (size_t k = 0; k < raw.size(); ++k)
    if (is_advanced_item(raw[k])) advanced_pos.push_back(int64_t(k));
  bool contiguous = true;
  for (size_t k = 1; k < advanced_pos.size(); ++k)
    contiguous = contiguous && advanced_pos[k] == advanced_pos[k - 1] + 1;
  const std::vector<AtIndex> idx = expand_indices(raw, shape.ndim());
  const bool advanced = is_advanced(idx);
  int64_t largest = 0;
  for (int64_t d : shape.dims()) largest = std::max(largest, d);
  const DType index_dtype = largest > std::numeric_limits<int32_t>::max() ? int64 : int32;

  GatherIndexer g;
  g.advanced = advanced;
  std::vector<std::pair<Array, int64_t>> gather_indices;  // (array, first dim it aligns with)
  Ints gather_indices_shape, slice_shape, offset_dims, collapsed, start_index_map, slice_sizes;
  int64_t first_advanced = -1;
  for (size_t k = 0; k < idx.size(); ++k)
    if (advanced && is_advanced_item(idx[k])) {
      first_advanced = int64_t(k);
      break;
    }
  int64_t collapsed_y_axis = 0;
  for (size_t k = 0; k < idx.size(); ++k) {
    const int x_axis = int(k);
    const int64_t n = shape[x_axis];
    if (advanced && (contiguous ? int64_t(k) == first_advanced : k == 0)) {
      std::vector<Array> arrays;
      Ints axes;
      for (size_t j = 0; j < idx.size(); ++j) {
        if (!is_advanced_item(idx[j])) continue;
        const int64_t size = shape[int(j)];
        arrays.push_back(idx[j].kind == Kind::integer
                             ? integer_index(idx[j].integer, size, index_dtype)
                             : array_index(idx[j].array, size, index_dtype));
        axes.push_back(int64_t(j));
      }
      arrays = ops::broadcast_arrays("at", arrays);
      const int64_t start_dim = int64_t(gather_indices_shape.size());
      for (const Array& a : arrays) gather_indices.push_back({a, start_dim});
      const Ints bshape = arrays[0].shape().dims();
      gather_indices_shape.insert(gather_indices_shape.end(), bshape.begin(), bshape.end());
      start_index_map.insert(start_index_map.end(), axes.begin(), axes.end());
      collapsed.insert(collapsed.end(), axes.begin(), axes.end());
      slice_shape.insert(slice_shape.end(), bshape.begin(), bshape.end());
      collapsed_y_axis += int64_t(bshape.size());
    }
    const AtIndex& i = idx[k];
    if (advanced && is_advanced_item(i)) {
      slice_sizes.push_back(1);
      continue;
    }
    if (i.kind == Kind::integer || i.kind == Kind::array) {  // a scalar index
      if (n == 0)
        throw IndexError("[at] index is out of bounds for axis " + std::to_string(x_axis) +
                         " with size 0");
      gather_indices.push_back({i.kind == Kind::integer ? integer_index(i.integer, n, index_dtype)
                                                        : array_index(i.array, n, index_dtype),
                                int64_t(gather_indices_shape.size())});
      collapsed.push_back(x_axis);
      slice_sizes.push_back(1);
      start_index_map.push_back(x_axis);
      continue;
    }
    const CanonicalSlice s = canonicalize_slice(i.slice, n);
    slice_shape.push_back(s.size);
    if (s.step == 1) {
      if (s.size != n) {
        gather_indices.push_back(
            {ops::scalar(double(s.start), index_dtype), int64_t(gather_indices_shape.size())});
        start_index_map.push_back(x_axis);
      }
      slice_sizes.push_back(s.size);
      offset_dims.push_back(collapsed_y_axis);
    } else {
      Array positions = lax::add(
          ops::scalar(double(s.start), index_dtype),
          lax::mul(ops::scalar(double(s.step), index_dtype), lax::iota(index_dtype, s.size)));
      if (s.step < 0) {
        g.reversed_y_dims.push_back(collapsed_y_axis);
        positions = lax::rev(positions, {0});
      }
      slice_sizes.push_back(1);
      gather_indices.push_back({positions, int64_t(gather_indices_shape.size())});
      start_index_map.push_back(x_axis);
      gather_indices_shape.push_back(s.size);
      collapsed.push_back(x_axis);
    }
    ++collapsed_y_axis;
  }

  if (gather_indices.empty()) {
    g.indices = zeros({0}, index_dtype);
  } else if (gather_indices.size() == 1) {
    const Array& a = gather_indices[0].first;
    g.indices = lax::expand_dims(a, {a.ndim()});
  } else {
    Ints full = gather_indices_shape;
    full.push_back(1);
    std::vector<Array> parts;
    for (const auto& [a, start] : gather_indices) {
      Ints dims;
      for (int d = 0; d < a.ndim(); ++d) dims.push_back(start + d);
      parts.push_back(lax::broadcast_in_dim(a, Shape(full), dims));
    }
    g.indices = lax::concatenate(parts, int64_t(gather_indices_shape.size()));
  }
  std::sort(collapsed.begin(), collapsed.end());
  g.dims = cpu::GatherDims{offset_dims, collapsed, start_index_map, {}, {}, slice_sizes};
  g.slice_shape = Shape(slice_shape);
  return g;
}

// jnp's static-slice path for reads: every index an in-range integer or a slice.
std::optional<Array> static_slice(const Array& x, const std::vector<AtIndex>& raw) {
  const std::vector<AtIndex> idx = expand_indices(raw, x.ndim());
  Ints starts, limits, strides, rev_axes, squeeze_axes;
  bool unit_strides = true;
  for (size_t k = 0; k < idx.size(); ++k) {
    const int64_t n = x.shape()[int(k)];
    const AtIndex& i = idx[k];
    if (i.kind == Kind::array) return std::nullopt;
    if (i.kind == Kind::integer) {
      // An integer out of range reads the nearest element, as jnp's dynamic_slice path does.
      if (n == 0) return std::nullopt;
      const int64_t v = std::clamp<int64_t>(i.integer < 0 ? i.integer + n : i.integer, 0, n - 1);
      starts.push_back(v), limits.push_back(v + 1), strides.push_back(1);
      squeeze_axes.push_back(int64_t(k));
      continue;
    }
    const CanonicalSlice s = canonicalize_slice(i.slice, n);
    if (s.step > 0) {
      starts.push_back(s.start);
      limits.push_back(s.size == 0 ? s.start : s.start + (s.size - 1) * s.step + 1);
    } else {
      const int64_t last = s.start + (s.size - 1) * s.step;
      starts.push_back(s.size == 0 ? 0 : last);
      limits.push_back(s.size == 0 ? 0 : s.start + 1);
      rev_axes.push_back(int64_t(k));
    }
    const int64_t stride = s.step > 0 ? s.step : -s.step;
    strides.push_back(stride);
    unit_strides = unit_strides && stride == 1;
  }
  Array out = x;
  if (starts != Ints(starts.size(), 0) || limits != x.shape().dims() || !unit_strides)
    out = lax::slice(x, starts, limits, unit_strides ? Ints{} : strides);
  if (!rev_axes.empty()) out = lax::rev(out, rev_axes);
  if (!squeeze_axes.empty()) out = lax::squeeze(out, squeeze_axes);
  return out;
}

void check_mode(const std::string& mode) {
  if (mode != "" && mode != "clip" && mode != "fill" && mode != "drop" &&
      mode != "promise_in_bounds")
    throw ValueError("[at] Unknown gather mode \"" + mode + "\"");
}

// JAX's _scatter_update: x and v promoted together, v broadcast to the indexed shape, the
// scatter, and the result converted back to x's dtype.
Array scatter_update(const char* prim, const Array& x, const std::vector<AtIndex>& indices,
                     const Array& v, const AtOptions& o) {
  check_mode(o.mode);
  if (!x.valid() || !v.valid()) throw ValueError("[at] the array or the update is empty");
  const GatherIndexer g = index_to_gather(x.shape(), indices);
  if (g.slice_shape.size() == 0) return x;
  const std::vector<Array> promoted = ops::promote_dtypes({x, v});
  Array y = promoted[1];
  bool fits = y.ndim() <= g.slice_shape.ndim();
  for (int i = 0; fits && i < y.ndim(); ++i)
    fits = y.shape()[i] == 1 || y.shape()[i] == g.slice_shape[g.slice_shape.ndim() - y.ndim() + i];
  if (!fits)
    throw ValueError("[at] Incompatible types for broadcasting: input type=" + type_str(y) +
                     " and requested type=" + type_str(y.dtype(), g.slice_shape));
  y = ops::broadcast_to("at", y, g.slice_shape);
  if (!g.reversed_y_dims.empty()) y = lax::rev(y, g.reversed_y_dims);
  const cpu::ScatterDims dims{
      g.dims.offset_dims, g.dims.collapsed_slice_dims, g.dims.start_index_map, {}, {}};
  const std::string mode = o.mode == "" || o.mode == "drop" ? "fill" : o.mode;
  Array out = scatter(prim, promoted[0], g.indices, y, dims, !g.advanced || o.indices_are_sorted,
                      !g.advanced || o.unique_indices, mode);
  return ops::convert(out, x.dtype(), x.weak_type());
}

}  // namespace

Array IndexUpdate::get(const AtOptions& o) const {
  check_mode(o.mode);
  if (!x_.valid()) throw ValueError("[at] the array is empty (default-constructed)");
  if (o.mode == "" || o.mode == "promise_in_bounds")
    if (std::optional<Array> sliced = static_slice(x_, indices_)) return *sliced;
  const GatherIndexer g = index_to_gather(x_.shape(), indices_);
  if (g.slice_shape.size() == 0) return zeros(g.slice_shape, x_.dtype());
  const std::string mode = o.mode == "" ? "promise_in_bounds" : o.mode == "drop" ? "fill" : o.mode;
  ParamValue fill = NoneParam{};
  if (o.fill_value) fill = *o.fill_value;
  Array y = x_;
  if (g.indices.size() != 0)
    y = gather(x_, g.indices, g.dims, mode, fill, !g.advanced || o.indices_are_sorted,
               !g.advanced || o.unique_indices);
  if (!g.reversed_y_dims.empty()) y = lax::rev(y, g.reversed_y_dims);
  return y;
}

Array IndexUpdate::set(const Array& v, const AtOptions& o) const {
  return scatter_update("scatter", x_, indices_, v, o);
}
Array IndexUpdate::add(const Array& v, const AtOptions& o) const {
  return scatter_update("scatter-add", x_, indices_, v, o);
}
Array IndexUpdate::mul(const Array& v, const AtOptions& o) const {
  return scatter_update("scatter-mul", x_, indices_, v, o);
}
Array IndexUpdate::min(const Array& v, const AtOptions& o) const {
  return scatter_update("scatter-min", x_, indices_, v, o);
}
Array IndexUpdate::max(const Array& v, const AtOptions& o) const {
  return scatter_update("scatter-max", x_, indices_, v, o);
}

}  // namespace spmd

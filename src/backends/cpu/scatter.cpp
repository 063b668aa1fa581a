// XLA's scatter on the host: the element offsets of one update window are computed once, then
// each index vector places that window in the operand. Windows run in order on one thread, so
// repeated indices combine deterministically (the last update wins for a plain scatter).
#include "backends/cpu/scatter.h"

#include "backends/cpu/convert.h"
#include "backends/cpu/wrapping.h"

#include <algorithm>
#include <cstring>

namespace spmd::cpu {
namespace {

bool contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// Row-major iteration over `shape`: calls f(index) for every index vector.
template <class F>
void for_each_index(const std::vector<int64_t>& shape, F&& f) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    f(idx);
    for (size_t k = shape.size(); k-- > 0;) {
      if (++idx[k] < shape[k]) break;
      idx[k] = 0;
    }
  }
}

// What does not depend on the index values: the window's shape in the operand, and each window
// element's offset in the operand and in the updates.
struct ScatterPlan {
  std::vector<int64_t> window;      // per operand dim: the window size (1 when inserted)
  std::vector<int64_t> scatter_n;   // sizes of the updates' scatter dims
  std::vector<int64_t> scatter_us;  // their strides in the updates
  std::vector<int64_t> operand_offset, update_offset;  // per window element
};

ScatterPlan plan_scatter(const Shape& operand_shape, const Shape& updates_shape,
                         const ScatterDims& g) {
  ScatterPlan p;
  const auto os = operand_shape.strides(), us = updates_shape.strides();
  std::vector<int64_t> wn, wos, wus;
  size_t k = 0;
  for (int d = 0; d < operand_shape.ndim(); ++d) {
    if (contains(g.inserted_window_dims, d) || contains(g.operand_batching_dims, d)) {
      p.window.push_back(1);
      continue;
    }
    const int64_t u = g.update_window_dims[k++];
    p.window.push_back(updates_shape[int(u)]);
    wn.push_back(updates_shape[int(u)]);
    wos.push_back(os[size_t(d)]);
    wus.push_back(us[size_t(u)]);
  }
  for_each_index(wn, [&](const std::vector<int64_t>& w) {
    int64_t o = 0, u = 0;
    for (size_t i = 0; i < w.size(); ++i) o += w[i] * wos[i], u += w[i] * wus[i];
    p.operand_offset.push_back(o);
    p.update_offset.push_back(u);
  });
  for (int d = 0; d < updates_shape.ndim(); ++d) {
    if (contains(g.update_window_dims, d)) continue;
    p.scatter_n.push_back(updates_shape[d]);
    p.scatter_us.push_back(us[size_t(d)]);
  }
  return p;
}

template <class T>
constexpr bool kHalf = std::is_same_v<T, bfloat16_t> || std::is_same_v<T, float16_t>;

// The combiners as lax's add, mul, min and max compute them: integers wrap, and min and max
// propagate NaN.
template <class T>
T combine_values(ScatterCombine c, T a, T b) {
  if constexpr (kHalf<T>) {
    return T(combine_values(c, float(a), float(b)));
  } else {
    switch (c) {
      case ScatterCombine::set:
        return b;
      case ScatterCombine::add:
        return wrapping_add(a, b);
      case ScatterCombine::mul:
        return wrapping_mul(a, b);
      case ScatterCombine::min:
        return (a != a || a < b) ? a : b;
      case ScatterCombine::max:
        return (a != a || a > b) ? a : b;
    }
    return b;
  }
}

template <class T>
void scatter_typed(ScatterCombine c, const int64_t* indices, const T* updates, T* out,
                   const Shape& operand_shape, const ScatterPlan& p, const ScatterDims& g,
                   int64_t index_len, bool clip) {
  const auto os = operand_shape.strides();
  const size_t rank = size_t(operand_shape.ndim());
  std::vector<int64_t> start(rank);
  int64_t position = 0;
  for_each_index(p.scatter_n, [&](const std::vector<int64_t>& coord) {
    const int64_t* iv = indices + position++ * index_len;
    std::fill(start.begin(), start.end(), 0);
    for (int64_t k = 0; k < index_len; ++k)
      start[size_t(g.scatter_dims_to_operand_dims[size_t(k)])] = iv[k];
    for (size_t j = 0; j < g.operand_batching_dims.size(); ++j)
      start[size_t(g.operand_batching_dims[j])] = coord[size_t(g.scatter_indices_batching_dims[j])];
    int64_t base = 0, ubase = 0;
    for (size_t d = 0; d < rank; ++d) {
      const int64_t hi = operand_shape[int(d)] - p.window[d];
      if (start[d] < 0 || start[d] > hi) {
        if (!clip) return;
        start[d] = std::clamp<int64_t>(start[d], 0, hi);
      }
      base += start[d] * os[d];
    }
    for (size_t k = 0; k < coord.size(); ++k) ubase += coord[k] * p.scatter_us[k];
    for (size_t e = 0; e < p.operand_offset.size(); ++e) {
      T& dst = out[base + p.operand_offset[e]];
      dst = combine_values(c, dst, updates[ubase + p.update_offset[e]]);
    }
  });
}

}  // namespace

void scatter(ScatterCombine combine, const void* operand, const Shape& operand_shape, DType dtype,
             const void* indices, const Shape& indices_shape, DType index_dtype,
             const void* updates, const Shape& updates_shape, const ScatterDims& dims, bool clip,
             void* out) {
  std::memcpy(out, operand, size_t(operand_shape.size() * itemsize(dtype)));
  if (updates_shape.size() == 0) return;
  const ScatterPlan plan = plan_scatter(operand_shape, updates_shape, dims);
  std::vector<int64_t> idx(size_t(indices_shape.size()));
  convert(indices, index_dtype, idx.data(), DType::int64, int64_t(idx.size()));
  const int64_t index_len = indices_shape[indices_shape.ndim() - 1];
  dispatch_dtype(dtype, [&](auto t) {
    using T = decltype(t);
    scatter_typed(combine, idx.data(), static_cast<const T*>(updates), static_cast<T*>(out),
                  operand_shape, plan, dims, index_len, clip);
  });
}

}  // namespace spmd::cpu

// Primitive family: indexing — dynamic_slice and dynamic_update_slice (start indices are scalar
// operands, clamped so the window fits, as XLA does) and XLA's gather with JAX's parameters,
// which jnp.take, take_along_axis and x[i] lower to.
#include "prims/dimension_numbers.h"
#include "prims/families.h"
#include "prims/primitive.h"

#include <spmd/error.h>

#include "backends/cpu/convert.h"
#include "backends/cpu/copy.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace spmd {
namespace {

using namespace dimension_numbers;

// Scalar integer start indices, one per operand dimension, from in[first, …).
void check_start_indices(const char* name, std::span<const AbstractValue> in, size_t first,
                         int rank) {
  const size_t count = in.size() - first;
  if (int(count) != rank)
    throw ValueError("[" + std::string(name) + "] expected " + std::to_string(rank) +
                     " start indices for an operand of rank " + std::to_string(rank) + ", got " +
                     std::to_string(count));
  for (size_t i = first; i < in.size(); ++i) {
    if (!is_integer(in[i].dtype))
      throw TypeError("[" + std::string(name) + "] start indices must have an integer type, got " +
                      std::string(dtype_name(in[i].dtype)));
    if (in[i].shape.ndim() != 0)
      throw ShapeError("[" + std::string(name) + "] start indices must be scalars, got shape " +
                       in[i].shape.str());
  }
}

// The start of each window dimension, clamped to [0, size - window].
std::vector<int64_t> clamped_starts(const KernelArgs& a, size_t first,
                                    const std::vector<int64_t>& window) {
  const Shape& s = a.in[0].aval->shape;
  std::vector<int64_t> starts;
  for (int d = 0; d < s.ndim(); ++d) {
    const Operand& op = a.in[first + size_t(d)];
    int64_t v = 0;
    cpu::convert(op.data, op.aval->dtype, &v, DType::int64, 1);
    starts.push_back(std::clamp<int64_t>(v, 0, s[d] - window[size_t(d)]));
  }
  return starts;
}

int64_t flat_offset(const std::vector<int64_t>& starts, const std::vector<int64_t>& strides) {
  int64_t off = 0;
  for (size_t d = 0; d < starts.size(); ++d) off += starts[d] * strides[d];
  return off;
}

// ---- dynamic_slice ------------------------------------------------------------------------------
std::vector<AbstractValue> dynamic_slice_rule(std::span<const AbstractValue> in, const Params& p) {
  if (in.empty()) throw ValueError("[dynamic_slice] expected an operand");
  const Shape& s = in[0].shape;
  const auto& sizes = p.get_ints("slice_sizes");
  check_start_indices("dynamic_slice", in, 1, s.ndim());
  if (int(sizes.size()) != s.ndim())
    throw ValueError("[dynamic_slice] slice_sizes must have one entry per operand dimension, got " +
                     ints_str(sizes) + " for operand shape " + s.str());
  for (int d = 0; d < s.ndim(); ++d)
    if (sizes[size_t(d)] < 0 || sizes[size_t(d)] > s[d])
      throw ShapeError(
          "[dynamic_slice] slice_sizes must be nonnegative and at most the operand "
          "shape, got slice_sizes " +
          ints_str(sizes) + " for operand shape " + s.str());
  return {AbstractValue{Shape(sizes), in[0].dtype, in[0].weak_type}};
}

void dynamic_slice_kernel(const KernelArgs& a) {
  const Shape& out = a.out[0].aval->shape;
  const int bytes = itemsize(a.out[0].aval->dtype);
  if (out.size() == 0) return;
  const auto strides = a.in[0].aval->shape.strides();
  const int64_t off = flat_offset(clamped_starts(a, 1, out.dims()), strides);
  const char* src = static_cast<const char*>(a.in[0].data) + off * bytes;
  cpu::strided_copy(src, strides, a.out[0].data, out, bytes);
}

// ---- dynamic_update_slice -----------------------------------------------------------------------
std::vector<AbstractValue> dynamic_update_slice_rule(std::span<const AbstractValue> in,
                                                     const Params&) {
  if (in.size() < 2) throw ValueError("[dynamic_update_slice] expected an operand and an update");
  const AbstractValue &x = in[0], &u = in[1];
  if (x.dtype != u.dtype)
    throw TypeError("[dynamic_update_slice] requires arguments to have the same dtypes, got " +
                    std::string(dtype_name(x.dtype)) + ", " + std::string(dtype_name(u.dtype)));
  bool fits = u.shape.ndim() == x.shape.ndim();
  for (int d = 0; fits && d < x.shape.ndim(); ++d) fits = u.shape[d] <= x.shape[d];
  if (!fits)
    throw ShapeError(
        "[dynamic_update_slice] update shape must have the operand's rank and be no "
        "larger than the operand, got update shape " +
        u.shape.str() + " for operand shape " + x.shape.str());
  check_start_indices("dynamic_update_slice", in, 2, x.shape.ndim());
  return {AbstractValue{x.shape, x.dtype, x.weak_type && u.weak_type}};
}

void dynamic_update_slice_kernel(const KernelArgs& a) {
  const AbstractValue& out = *a.out[0].aval;
  const Shape& u = a.in[1].aval->shape;
  const int bytes = itemsize(out.dtype);
  cpu::copy(a.in[0].data, a.out[0].data, out.size(), bytes);
  if (u.size() == 0) return;
  const auto out_strides = out.shape.strides();
  const int64_t off = flat_offset(clamped_starts(a, 2, u.dims()), out_strides);
  const auto u_strides = u.strides();
  cpu::strided_copy(a.in[1].data, u_strides, static_cast<char*>(a.out[0].data) + off * bytes,
                    out_strides, u.dims(), bytes);
}

// ---- gather -------------------------------------------------------------------------------------
cpu::GatherDims gather_dims(const Params& p) {
  return {p.get_ints("offset_dims"),
          p.get_ints("collapsed_slice_dims"),
          p.get_ints("start_index_map"),
          p.get_ints("operand_batching_dims"),
          p.get_ints("start_indices_batching_dims"),
          p.get_ints("slice_sizes")};
}

[[noreturn]] void gather_fail(const std::string& what) {
  throw ShapeError("[gather] " + what);
}

std::vector<AbstractValue> gather_rule(std::span<const AbstractValue> in, const Params& p) {
  if (in.size() != 2) throw ValueError("[gather] expected an operand and indices");
  const AbstractValue &x = in[0], &idx = in[1];
  const cpu::GatherDims g = gather_dims(p);
  const std::string& mode = p.get<std::string>("mode");
  if (mode != "clip" && mode != "fill" && mode != "promise_in_bounds")
    throw ValueError("[gather] mode must be 'clip', 'fill' or 'promise_in_bounds', got '" + mode +
                     "'");
  if (!is_integer(idx.dtype))
    throw TypeError("[gather] indices must have an integer type, got " +
                    std::string(dtype_name(idx.dtype)));
  const int r = x.shape.ndim(), q = idx.shape.ndim();
  if (q < 1) gather_fail("indices must have at least one dimension (the index vector)");
  if (int64_t(g.start_index_map.size()) != idx.shape[q - 1])
    gather_fail("start_index_map has " + std::to_string(g.start_index_map.size()) +
                " entries but the index vector has size " + std::to_string(idx.shape[q - 1]));
  if (int(g.slice_sizes.size()) != r)
    gather_fail("slice_sizes must have one entry per operand dimension, got " +
                ints_str(g.slice_sizes) + " for operand shape " + x.shape.str());
  for (int d = 0; d < r; ++d)
    if (g.slice_sizes[size_t(d)] < 0 || g.slice_sizes[size_t(d)] > x.shape[d])
      gather_fail("slice_sizes must be in [0, operand size], got " + ints_str(g.slice_sizes) +
                  " for operand shape " + x.shape.str());
  check_dim_list("gather", "collapsed_slice_dims", g.collapsed_slice_dims, r, true);
  check_dim_list("gather", "operand_batching_dims", g.operand_batching_dims, r, true);
  check_dim_list("gather", "start_index_map", g.start_index_map, r, false);
  check_dim_list("gather", "start_indices_batching_dims", g.start_indices_batching_dims, q - 1,
                 false);
  check_batching_dims(
      "gather",
      {"start_indices_batching_dims", "collapsed_slice_dims", "start_index_map", "start indices"},
      x, idx, g.operand_batching_dims, g.start_indices_batching_dims, g.collapsed_slice_dims,
      g.start_index_map);
  std::vector<int64_t> window;
  for (int d = 0; d < r; ++d) {
    const bool collapsed = contains(g.collapsed_slice_dims, d);
    if ((collapsed || contains(g.operand_batching_dims, d)) && g.slice_sizes[size_t(d)] > 1)
      gather_fail("collapsed and batching dimensions must have slice size at most 1, got " +
                  ints_str(g.slice_sizes));
    if (!collapsed && !contains(g.operand_batching_dims, d))
      window.push_back(g.slice_sizes[size_t(d)]);
  }
  const int out_rank = q - 1 + int(g.offset_dims.size());
  if (window.size() != g.offset_dims.size())
    gather_fail("offset_dims must have one entry per window dimension (" +
                std::to_string(window.size()) + "), got " + ints_str(g.offset_dims));
  check_dim_list("gather", "offset_dims", g.offset_dims, out_rank, true);
  std::vector<int64_t> out;
  size_t w = 0, b = 0;
  for (int o = 0; o < out_rank; ++o)
    out.push_back(contains(g.offset_dims, o) ? window[w++] : idx.shape[int(b++)]);
  return {AbstractValue{Shape(out), x.dtype, x.weak_type}};
}

// One element of `t` holding JAX's default gather fill: NaN, the lowest signed value, the
// largest unsigned value, or true.
void default_fill(DType t, void* out) {
  dispatch_dtype(t, [&](auto v) {
    using T = decltype(v);
    T fill;
    if constexpr (std::is_same_v<T, bool>) {
      fill = true;
    } else if constexpr (std::is_integral_v<T>) {
      fill = std::is_signed_v<T> ? std::numeric_limits<T>::min() : std::numeric_limits<T>::max();
    } else {
      fill = T(std::numeric_limits<float>::quiet_NaN());
    }
    std::memcpy(out, &fill, sizeof(T));
  });
}

void gather_kernel(const KernelArgs& a) {
  const AbstractValue& x = *a.in[0].aval;
  const cpu::GatherDims g = gather_dims(a.params);
  alignas(8) unsigned char fill[8];
  const void* fill_value = nullptr;
  if (a.params.get<std::string>("mode") == "fill") {
    const ParamValue& f = a.params.at("fill_value");
    if (const double* v = std::get_if<double>(&f)) {
      cpu::convert(v, DType::float64, fill, x.dtype, 1);
    } else if (const int64_t* i = std::get_if<int64_t>(&f)) {
      cpu::convert(i, DType::int64, fill, x.dtype, 1);
    } else {
      default_fill(x.dtype, fill);
    }
    fill_value = fill;
  }
  cpu::gather(a.in[0].data, x.shape, x.dtype, a.in[1].data, a.in[1].aval->shape,
              a.in[1].aval->dtype, a.out[0].data, a.out[0].aval->shape, g, fill_value);
}

}  // namespace

void register_indexing_primitives(PrimitiveRegistry& r) {
  r.define("dynamic_slice", dynamic_slice_rule, dynamic_slice_kernel);
  r.define("dynamic_update_slice", dynamic_update_slice_rule, dynamic_update_slice_kernel);
  r.define("gather", gather_rule, gather_kernel);
}

}  // namespace spmd

// Primitive family: indexing — dynamic_slice and dynamic_update_slice (start indices are scalar
// operands, clamped so the window fits, as XLA does) and XLA's gather with JAX's parameters,
// which jnp.take, take_along_axis and x[i] lower to; each with its type rule, kernel and
// transformation rules.
#include "prims/indexing.h"

#include "prims/dimension_numbers.h"
#include "prims/families.h"
#include "prims/primitive.h"
#include "prims/rule_util.h"
#include "prims/scatter.h"

#include <spmd/error.h>
#include <spmd/lax.h>

#include "backends/cpu/buffer_view.h"
#include "backends/cpu/convert.h"
#include "backends/cpu/copy.h"
#include "ops/op_util.h"
#include "sharding/type_sharding.h"

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

// ---- transformation rules
// ------------------------------------------------------------------------ The rules emit the
// primitives JAX's rules emit (jax/_src/lax/slicing.py), in the same order and with the same
// params, so transformed programs print as JAX's do. dynamic_update_slice's batching differs: JAX
// batches it into a scatter.
using Ints = std::vector<int64_t>;
using Cotangents = std::span<const Array>;
using Inputs = std::span<const LinearInput>;

std::vector<Array> concat_arrays(std::vector<Array> a, const std::vector<Array>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Params gather_params(const cpu::GatherDims& d, const std::string& mode, ParamValue fill_value,
                     bool indices_are_sorted, bool unique_indices) {
  return {{"offset_dims", d.offset_dims},
          {"collapsed_slice_dims", d.collapsed_slice_dims},
          {"start_index_map", d.start_index_map},
          {"operand_batching_dims", d.operand_batching_dims},
          {"start_indices_batching_dims", d.start_indices_batching_dims},
          {"slice_sizes", d.slice_sizes},
          {"mode", mode},
          {"fill_value", std::move(fill_value)},
          {"indices_are_sorted", indices_are_sorted},
          {"unique_indices", unique_indices}};
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

// Whether a window of `out` in `in` is one run of the operand's memory: size 1 before the first
// dim it takes more of, whole dims after it.
bool is_contiguous_window(const Shape& in, const Shape& out) {
  int d = 0;
  while (d < out.ndim() && out[d] == 1) ++d;
  for (++d; d < out.ndim(); ++d)
    if (out[d] != in[d]) return false;
  return true;
}

// The result is a view of the operand's buffer when the caller lets the kernel provide it
// (compile/executable.cpp), the window is contiguous and it starts at an allocation's
// alignment: a slice of whole rows (a device's rows of a replicated weight) costs no copy, and
// products reading it can share the packed form of that part of the operand (gemm.cpp).
void dynamic_slice_kernel(const KernelArgs& a) {
  const Shape& out = a.out[0].aval->shape;
  const int bytes = itemsize(a.out[0].aval->dtype);
  const auto strides = a.in[0].aval->shape.strides();
  const int64_t off = out.size() == 0 ? 0 : flat_offset(clamped_starts(a, 1, out.dims()), strides);
  const size_t byte_offset = size_t(off * bytes), nbytes = size_t(out.size() * bytes);
  // Storage given with the buffer (a donated argument's, where the result is to land) is used.
  std::shared_ptr<Buffer>* result = a.out[0].data ? nullptr : a.out[0].buffer;
  if (result) {
    const std::shared_ptr<Buffer>* source = a.in[0].buffer;
    if (source && *source && (*source)->data() == a.in[0].data && out.size() > 0 &&
        is_contiguous_window(a.in[0].aval->shape, out) && byte_offset % cpu::kViewAlignment == 0) {
      *result = cpu::make_buffer_view(*source, byte_offset, nbytes);
      return;
    }
    *result = Buffer::allocate(nbytes);
  }
  if (out.size() == 0) return;
  const char* src = static_cast<const char*>(a.in[0].data) + byte_offset;
  cpu::strided_copy(src, strides, result ? (*result)->data() : a.out[0].data, out, bytes);
}

// JAX's _dynamic_slice_jvp slices the tangent before the primal.
JvpResult dynamic_slice_jvp(const Primitive& self, std::span<const Array> x,
                            std::span<const Array> t, const Params& p) {
  std::vector<Array> args = to_vector(x);
  args[0] = t[0];
  Array tangent = is_zero(t[0]) ? Array() : bind1(self, args, p);
  Array primal = bind1(self, x, p);
  return JvpResult{{primal}, {tangent}};
}

std::vector<Array> dynamic_slice_transpose(const Primitive& dynamic_update_slice, Cotangents ct,
                                           Inputs in, const Params&) {
  std::vector<Array> args{strong_zeros(in[0].aval.shape, in[0].aval.dtype), ct[0]};
  for (size_t i = 1; i < in.size(); ++i) args.push_back(in[i].value);
  std::vector<Array> out(in.size());
  out[0] = bind1(dynamic_update_slice, args);
  return out;
}

// JAX's _gather_batching_rule: a batched operand gains a full-size offset dimension; batched
// indices gain a leading batch dimension of the index array; both batched become a gather batch
// dimension pair (operand_batching_dims / start_indices_batching_dims).
BatchResult gather_batch(const Primitive& gather, std::span<const Array> args,
                         std::span<const int> dims, const Params& params, const BatchContext&) {
  Array operand = args[0], indices = args[1];
  const int operand_d = dims[0], indices_d = dims[1];
  Params p = params;
  const Ints offset = params.get_ints("offset_dims");
  const Ints collapsed = params.get_ints("collapsed_slice_dims");
  const Ints start_map = params.get_ints("start_index_map");
  const Ints operand_batching = params.get_ints("operand_batching_dims");
  const Ints indices_batching = params.get_ints("start_indices_batching_dims");
  const Ints slice_sizes = params.get_ints("slice_sizes");
  if (is_batched(operand_d) && !is_batched(indices_d)) {
    operand = batch_moveaxis(operand, operand_d, 0);
    p.set("slice_sizes", prepend(operand.shape()[0], slice_sizes));
    p.set("offset_dims", prepend(0, add_each(offset, 1)));
    p.set("collapsed_slice_dims", add_each(collapsed, 1));
    p.set("operand_batching_dims", add_each(operand_batching, 1));
    p.set("start_index_map", add_each(start_map, 1));
  } else if (!is_batched(operand_d)) {
    indices = batch_moveaxis(indices, indices_d, 0);
    p.set("offset_dims", add_each(offset, 1));
    p.set("start_indices_batching_dims", add_each(indices_batching, 1));
    // Batching accesses into one array may repeat or reorder indices.
    p.set("unique_indices", false);
    p.set("indices_are_sorted", false);
  } else {
    operand = batch_moveaxis(operand, operand_d, 0);
    indices = batch_moveaxis(indices, indices_d, 0);
    p.set("slice_sizes", prepend(operand.shape()[0] == 0 ? 0 : 1, slice_sizes));
    p.set("collapsed_slice_dims", add_each(collapsed, 1));
    p.set("operand_batching_dims", prepend(0, add_each(operand_batching, 1)));
    p.set("start_indices_batching_dims", prepend(0, add_each(indices_batching, 1)));
    p.set("offset_dims", add_each(offset, 1));
    p.set("start_index_map", add_each(start_map, 1));
  }
  return result_at(bind1(gather, {operand, indices}, p), 0);
}

// Scalar start indices as one index vector (JAX's _batch_dynamic_slice_indices): unbatched,
// shape (n,); with any index batched, shape (size, n) batched at 0. Mixed index dtypes are
// first converted to one integer type so they can be concatenated.
std::pair<Array, int> batch_slice_indices(std::vector<Array> indices, std::span<const int> dims) {
  if (indices.empty()) return {make_uninitialized({Shape{0}, DType::int32, false}), kNotBatched};
  const bool mixed = std::any_of(indices.begin(), indices.end(),
                                 [&](const Array& i) { return i.dtype() != indices[0].dtype(); });
  if (mixed) {
    const bool wide = std::any_of(indices.begin(), indices.end(),
                                  [](const Array& i) { return i.itemsize() == 8; });
    for (Array& i : indices) i = ops::convert(i, wide ? DType::int64 : DType::int32);
  }
  std::vector<Array> parts;
  if (std::none_of(dims.begin(), dims.end(), is_batched)) {
    for (const Array& i : indices) parts.push_back(lax::broadcast_in_dim(i, Shape{1}, {}));
    return {lax::concatenate(parts, 0), kNotBatched};
  }
  const int64_t size = mapped_size(indices, dims);
  for (size_t k = 0; k < indices.size(); ++k)
    parts.push_back(
        lax::broadcast_in_dim(indices[k], Shape{size, 1}, is_batched(dims[k]) ? Ints{0} : Ints{}));
  return {lax::concatenate(parts, 1), 0};
}

// JAX batches dynamic_slice as a gather with clamped (CLIP) indices.
BatchResult dynamic_slice_batch(const Primitive& gather, std::span<const Array> args,
                                std::span<const int> dims, const Params& params,
                                const BatchContext& ctx) {
  const int ndim = args[0].ndim() - (is_batched(dims[0]) ? 1 : 0);
  auto [index, index_d] = batch_slice_indices(to_vector(args.subspan(1)), dims.subspan(1));
  const Ints all = range(0, ndim);
  const cpu::GatherDims g{all, {}, all, {}, {}, params.get_ints("slice_sizes")};
  const Array gather_args[] = {args[0], index};
  const int gather_dims[] = {dims[0], index_d};
  return gather_batch(gather, gather_args, gather_dims,
                      gather_params(g, "clip", NoneParam{}, true, true), ctx);
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

JvpResult dynamic_update_slice_jvp(const Primitive& self, std::span<const Array> x,
                                   std::span<const Array> t, const Params& p) {
  Array primal = bind1(self, x, p);
  std::vector<Array> args = to_vector(x);
  args[0] = instantiate_zero(t[0], aval_of(x[0]));
  args[1] = instantiate_zero(t[1], aval_of(x[1]));
  return JvpResult{{primal}, {bind1(self, args, p)}};
}

// JAX's _dynamic_update_slice_transpose_rule: the operand gets the cotangent with the updated
// window zeroed, the update gets that window.
std::vector<Array> dynamic_update_slice_transpose(const Primitive& self,
                                                  const Primitive& dynamic_slice, Cotangents cts,
                                                  Inputs in) {
  const Array& t = cts[0];
  std::vector<Array> starts;
  for (size_t i = 2; i < in.size(); ++i) starts.push_back(in[i].value);
  const Shape& update_shape = in[1].aval.shape;
  Array zeros = zeros_like_aval(AbstractValue{update_shape, t.dtype(), t.weak_type()});
  std::vector<Array> out(in.size());
  if (in[0].is_linear()) out[0] = bind1(self, concat_arrays({t, zeros}, starts));
  if (in[1].is_linear())
    out[1] = bind1(dynamic_slice, concat_arrays({t}, starts),
                   Params{{"slice_sizes", update_shape.dims()}});
  return out;
}

// dynamic_update_slice. JAX batches it into a scatter; here, with unbatched start indices the
// batch dimension becomes a leading dimension updated from index 0; with batched start indices
// the update is padded on each side by the room it has in the operand, and a batched
// dynamic_slice of it (and of a mask of where it lands) is selected into the operand.
BatchResult dynamic_update_slice_batch(const Primitive& self, const Primitive& gather,
                                       std::span<const Array> args, std::span<const int> dims,
                                       const BatchContext& ctx) {
  const int64_t size = mapped_size(args, dims);
  const Array operand = bdim_at_front(args[0], dims[0], size);
  const Array update = bdim_at_front(args[1], dims[1], size);
  const std::span<const Array> starts = args.subspan(2);
  const std::span<const int> start_dims = dims.subspan(2);
  if (std::none_of(start_dims.begin(), start_dims.end(), is_batched)) {
    const DType index_type = starts.empty() ? DType::int32 : starts[0].dtype();
    std::vector<Array> in{operand, update, ops::scalar(0, index_type)};
    in.insert(in.end(), starts.begin(), starts.end());
    return result_at(bind1(self, in), 0);
  }
  std::vector<lax::PadConfig> config{lax::PadConfig{}};
  std::vector<Array> window_starts;
  for (size_t k = 0; k < starts.size(); ++k) {
    const int64_t room = operand.shape()[int(k) + 1] - update.shape()[int(k) + 1];
    config.push_back({room, room, 0});
    Array s = starts[k];
    if (s.itemsize() < 4) s = ops::convert(s, DType::int32);
    const Array clamped =
        lax::clamp(ops::scalar(0, s.dtype()), s, ops::scalar(double(room), s.dtype()));
    window_starts.push_back(lax::sub(ops::scalar(double(room), s.dtype()), clamped));
  }
  const Params slice{{"slice_sizes", Ints(operand.shape().begin() + 1, operand.shape().end())}};
  auto window = [&](const Array& padded, int padded_d) {
    std::vector<Array> in{padded};
    in.insert(in.end(), window_starts.begin(), window_starts.end());
    std::vector<int> in_dims{padded_d};
    in_dims.insert(in_dims.end(), start_dims.begin(), start_dims.end());
    BatchResult r = dynamic_slice_batch(gather, in, in_dims, slice, ctx);
    return move_batch_dim(r.outputs[0], r.dims[0], 0, size);
  };
  const Array values = window(lax::pad(update, ops::constant_like(update, 0), config), 0);
  const std::vector<lax::PadConfig> mask_config(config.begin() + 1, config.end());
  const Shape update_shape(update.shape().begin() + 1, update.shape().end());
  const Array ones = lax::broadcast_in_dim(Array(true), update_shape, {});
  const Array mask = window(lax::pad(ones, Array(false), mask_config), kNotBatched);
  return result_at(lax::select(mask, values, operand), 0);
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

// JAX's _gather_jvp_rule: the tangent gathered like the primal, out-of-bounds windows filled
// with 0.
JvpResult gather_jvp(const Primitive& self, std::span<const Array> x, std::span<const Array> t,
                     const Params& p) {
  Array primal = bind1(self, {x[0], x[1]}, p);
  if (is_zero(t[0])) return JvpResult{{primal}, {Array()}};
  Params tangent_params = p;
  tangent_params.set("fill_value", zero_fill(p.get<std::string>("mode")));
  return JvpResult{{primal}, {bind1(self, {t[0], x[1]}, tangent_params)}};
}

// JAX's _gather_transpose_rule: the cotangent scatter-added into zeros of the operand's shape.
std::vector<Array> gather_transpose(Cotangents ct, Inputs in, const Params& p) {
  Array zeros = strong_zeros(in[0].aval.shape, ct[0].dtype());
  const cpu::ScatterDims dims{p.get_ints("offset_dims"), p.get_ints("collapsed_slice_dims"),
                              p.get_ints("start_index_map"), p.get_ints("operand_batching_dims"),
                              p.get_ints("start_indices_batching_dims")};
  Array out = scatter_add(zeros, in[1].value, ct[0], dims, p.get<bool>("indices_are_sorted"),
                          p.get<bool>("unique_indices"), p.get<std::string>("mode"));
  return {out, Array()};
}

// ---- sharding rules -----------------------------------------------------------------------------
// A window dim as wide as its operand dim has start 0 whatever the start index says (the start is
// clamped so the window fits), on the whole array as on any block of it: that dim passes through.
// A narrower window reads at a runtime offset, so the dim and the window dim need the whole
// extent.
int window_dim_factor(ShardingRule& rule, int64_t size, int64_t window, int* window_factor) {
  if (window == size) return *window_factor = rule.add_factor(size);
  const int f = rule.add_factor(size, FactorKind::need_replication);
  *window_factor = rule.add_factor(window, FactorKind::need_replication);
  return f;
}

// Start indices are scalars: tensors without dims.
void add_start_indices(ShardingRule& rule, int rank) {
  rule.operands.insert(rule.operands.end(), size_t(rank), ShardingRule::Tensor{});
}

ShardingRule dynamic_slice_sharding(std::span<const AbstractValue> in,
                                    std::span<const AbstractValue> out, const Params&) {
  const Shape &x = in[0].shape, &window = out[0].shape;
  ShardingRule rule;
  ShardingRule::Tensor operand, result;
  for (int d = 0; d < x.ndim(); ++d) {
    int w = 0;
    operand.push_back({window_dim_factor(rule, x[d], window[d], &w)});
    result.push_back({w});
  }
  rule.operands.push_back(std::move(operand));
  add_start_indices(rule, x.ndim());
  rule.results.push_back(std::move(result));
  rule.pad_all();
  return rule;
}

// A window dim passed through whole is split with its operand dim: on blocks its slice size
// is the block's extent (the other dims are whole, where the slice size never exceeds it).
LocalEquation gather_localize(const Primitive& self, const Params& params,
                              std::span<const AbstractValue> local_in,
                              std::span<const AbstractValue>) {
  Ints sizes = params.get_ints("slice_sizes");
  for (size_t d = 0; d < sizes.size(); ++d)
    sizes[d] = std::min(sizes[d], local_in[0].shape[int(d)]);
  Params p = params;
  p.set("slice_sizes", sizes);
  return {&self, std::move(p)};
}

// slice_sizes spells the window's global size; on blocks it is the block result's.
LocalEquation dynamic_slice_localize(const Primitive& self, const Params& params,
                                     std::span<const AbstractValue>,
                                     std::span<const AbstractValue> local_out) {
  Params p = params;
  p.set("slice_sizes", local_out[0].shape.dims());
  return {&self, std::move(p)};
}

// The operand and the result share their dims; the update's dims pass through with them where
// the update covers the whole dim.
ShardingRule dynamic_update_slice_sharding(std::span<const AbstractValue> in,
                                           std::span<const AbstractValue>, const Params&) {
  const Shape &x = in[0].shape, &u = in[1].shape;
  ShardingRule rule;
  ShardingRule::Tensor operand, update;
  for (int d = 0; d < x.ndim(); ++d) {
    int w = 0;
    operand.push_back({window_dim_factor(rule, x[d], u[d], &w)});
    update.push_back({w});
  }
  rule.operands = {operand, update};
  add_start_indices(rule, x.ndim());
  rule.results.push_back(std::move(operand));
  rule.pad_all();
  return rule;
}

// Each index of the batch dims of `indices` (all but the last, the index vector) gathers its
// slice on its own, so those dims pass through to the result's batch dims, together with the
// operand's batching dims they pair with. An operand dim no index reads and the window takes
// whole passes through to its offset dim, as Shardy's gather rule has it (jnp's strided
// indexing keeps the other dims' split so). The operand's other dims are read at runtime
// offsets and the window dims follow them: those need the whole extent.
ShardingRule gather_sharding(std::span<const AbstractValue> in, std::span<const AbstractValue> out,
                             const Params& params) {
  const cpu::GatherDims g = gather_dims(params);
  const Shape &x = in[0].shape, &idx = in[1].shape;
  ShardingRule rule;
  ShardingRule::Tensor indices, result;
  for (int d = 0; d + 1 < idx.ndim(); ++d) indices.push_back({rule.add_factor(idx[d])});
  indices.push_back({rule.add_factor(idx[idx.ndim() - 1], FactorKind::need_replication)});
  ShardingRule::Tensor operand(size_t(x.ndim()));
  for (size_t j = 0; j < g.operand_batching_dims.size(); ++j)
    operand[size_t(g.operand_batching_dims[j])] = indices[size_t(g.start_indices_batching_dims[j])];
  // The factor of each offset dim, in order: the operand dims neither collapsed nor batching.
  std::vector<int> windows;
  for (int d = 0; d < x.ndim(); ++d) {
    if (!operand[size_t(d)].empty() || contains(g.collapsed_slice_dims, d)) {
      if (operand[size_t(d)].empty())
        operand[size_t(d)] = {rule.add_factor(x[d], FactorKind::need_replication)};
      continue;
    }
    const bool whole = g.slice_sizes[size_t(d)] == x[d] && !contains(g.start_index_map, d);
    const int f =
        rule.add_factor(x[d], whole ? FactorKind::pass_through : FactorKind::need_replication);
    operand[size_t(d)] = {f};
    windows.push_back(
        whole ? f : rule.add_factor(g.slice_sizes[size_t(d)], FactorKind::need_replication));
  }
  const Shape& o = out[0].shape;
  for (int d = 0, b = 0, w = 0; d < o.ndim(); ++d)
    result.push_back(contains(g.offset_dims, d) ? ShardingRule::Dim{windows[size_t(w++)]}
                                                : indices[size_t(b++)]);
  rule.operands = {std::move(operand), std::move(indices)};
  rule.results.push_back(std::move(result));
  // The batch dims run on padded blocks: the kernel clamps every index (or fills), so indices
  // in the padding, whatever they hold, read inside the operand.
  rule.pad_all();
  return rule;
}

}  // namespace

void register_indexing_primitives(PrimitiveRegistry& r) {
  Primitive& dynamic_slice = r.define("dynamic_slice", dynamic_slice_rule, dynamic_slice_kernel);
  Primitive& dynamic_update_slice =
      r.define("dynamic_update_slice", dynamic_update_slice_rule, dynamic_update_slice_kernel);
  Primitive& gather = r.define("gather", gather_rule, gather_kernel);

  dynamic_slice.jvp = binding(dynamic_slice, dynamic_slice_jvp);
  dynamic_slice.transpose = binding(dynamic_update_slice, dynamic_slice_transpose);
  dynamic_slice.batch = binding(gather, dynamic_slice_batch);
  dynamic_slice.allocates_outputs = true;  // a view of the operand where it can be

  const Primitive* dus = &dynamic_update_slice;
  const Primitive* ds = &dynamic_slice;
  const Primitive* g = &gather;
  dynamic_update_slice.jvp = binding(dynamic_update_slice, dynamic_update_slice_jvp);
  dynamic_update_slice.transpose = [dus, ds](Cotangents ct, Inputs in, const Params&) {
    return dynamic_update_slice_transpose(*dus, *ds, ct, in);
  };
  dynamic_update_slice.batch = [dus, g](std::span<const Array> args, std::span<const int> dims,
                                        const Params&, const BatchContext& ctx) {
    return dynamic_update_slice_batch(*dus, *g, args, dims, ctx);
  };

  dynamic_slice.sharding_rule = dynamic_slice_sharding;
  dynamic_slice.type_sharding_rule = keep_operand_sharding("dynamic_slice", "dynamic_slice");
  dynamic_slice.localize = [ds](const Params& params, std::span<const AbstractValue> local_in,
                                std::span<const AbstractValue> local_out) {
    return dynamic_slice_localize(*ds, params, local_in, local_out);
  };
  dynamic_update_slice.sharding_rule = dynamic_update_slice_sharding;
  gather.sharding_rule = gather_sharding;
  gather.localize = [g](const Params& params, std::span<const AbstractValue> local_in,
                        std::span<const AbstractValue> local_out) {
    return gather_localize(*g, params, local_in, local_out);
  };

  gather.jvp = binding(gather, gather_jvp);
  gather.transpose = gather_transpose;
  gather.batch = binding(gather, gather_batch);
}

Array gather(const Array& operand, const Array& indices, const cpu::GatherDims& dims,
             const std::string& mode, ParamValue fill_value, bool indices_are_sorted,
             bool unique_indices) {
  return bind1(
      primitive("gather"), {operand, indices},
      gather_params(dims, mode, std::move(fill_value), indices_are_sorted, unique_indices));
}

ParamValue zero_fill(const std::string& mode) {
  if (mode == "fill") return int64_t{0};
  return NoneParam{};
}

const Primitive& dynamic_slice_primitive() {
  static const Primitive& p = primitive("dynamic_slice");
  return p;
}

}  // namespace spmd

// Forward-mode (jvp) and transpose rules of the structural primitives: reductions, cumulative
// scans, shape manipulation, slicing and indexing, dot_general and sort. Each rule emits the
// primitives JAX's rule emits (jax/_src/lax/lax.py, slicing.py, control_flow/loops.py), in the
// same order and with the same params, so differentiated programs print as JAX's do. Every
// operation is its own statement: C++ leaves the order of argument evaluation open.
#include "prims/rule_util.h"

#include <spmd/error.h>
#include <spmd/lax.h>

#include "backends/cpu/copy.h"
#include "ops/op_util.h"
#include "prims/primitive.h"
#include "prims/scatter.h"

#include <algorithm>
#include <limits>

namespace spmd {
namespace {

using Ints = std::vector<int64_t>;
using lax::DotDimensionNumbers;
using lax::PadConfig;

// ---- small helpers --------------------------------------------------------------------------
Ints range(int64_t begin, int64_t end) {
  Ints out;
  for (int64_t i = begin; i < end; ++i) out.push_back(i);
  return out;
}

bool contains(const Ints& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// [0, n) without the entries of `removed` (JAX's `remaining`).
Ints remaining(int64_t n, const Ints& removed, const Ints& also_removed = {}) {
  Ints out;
  for (int64_t i = 0; i < n; ++i)
    if (!contains(removed, i) && !contains(also_removed, i)) out.push_back(i);
  return out;
}

Ints argsort(const Ints& v) {
  Ints order = range(0, int64_t(v.size()));
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return v[size_t(a)] < v[size_t(b)]; });
  return order;
}

Ints concat(Ints a, const Ints& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<Array> to_vector(std::span<const Array> xs) {
  return {xs.begin(), xs.end()};
}

std::vector<Array> concat_arrays(std::vector<Array> a, const std::vector<Array>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// lax.full(shape, 0, dtype): zeros that are not weakly typed.
Array strong_zeros(const Shape& shape, DType dtype) {
  return zeros_like_aval(AbstractValue{shape, dtype, false});
}

// lax.broadcast_in_dim as JAX stages it: an identity broadcast is forwarded to its operand
// instead of being recorded.
Array broadcast_in_dim(const Array& x, const Shape& shape, const Ints& dims) {
  if (x.shape() == shape && dims == range(0, x.ndim())) return x;
  return lax::broadcast_in_dim(x, shape, dims);
}

// lax.expand_dims: a broadcast_in_dim inserting size-1 dims at `dims` (sorted) of the result.
Array expand_dims(const Array& x, const Ints& dims) {
  std::vector<int64_t> shape;
  Ints kept;
  for (int64_t i = 0, k = 0; i < x.ndim() + int64_t(dims.size()); ++i) {
    if (contains(dims, i)) {
      shape.push_back(1);
    } else {
      shape.push_back(x.shape()[int(k++)]);
      kept.push_back(i);
    }
  }
  return broadcast_in_dim(x, Shape(shape), kept);
}

Params slice_params(const Ints& start, const Ints& limit, const Ints& strides) {
  return {{"start_indices", start}, {"limit_indices", limit}, {"strides", strides}};
}

Params gather_params(const Ints& offset_dims, const Ints& collapsed, const Ints& start_index_map,
                     const Ints& operand_batching, const Ints& indices_batching,
                     const Ints& slice_sizes, const std::string& mode, ParamValue fill_value,
                     bool indices_are_sorted, bool unique_indices) {
  return {{"offset_dims", offset_dims},
          {"collapsed_slice_dims", collapsed},
          {"start_index_map", start_index_map},
          {"operand_batching_dims", operand_batching},
          {"start_indices_batching_dims", indices_batching},
          {"slice_sizes", slice_sizes},
          {"mode", mode},
          {"fill_value", std::move(fill_value)},
          {"indices_are_sorted", indices_are_sorted},
          {"unique_indices", unique_indices}};
}

// lax.gather's fill_value for a gather of tangents or cotangents: 0 when out-of-bounds windows
// are filled, None otherwise.
ParamValue zero_fill(const Params& p) {
  if (p.get<std::string>("mode") == "fill") return int64_t{0};
  return NoneParam{};
}

// ---- rule builders ------------------------------------------------------------------------
using Cotangents = std::span<const Array>;
using Inputs = std::span<const LinearInput>;

// A rule for a primitive with one output and one input, which must be the linear one.
TransposeRule unary_transpose(Array (*rule)(const Array& ct, const AbstractValue& operand,
                                            const Params& params)) {
  return [rule](Cotangents ct, Inputs in, const Params& params) {
    return std::vector<Array>{rule(ct[0], in[0].aval, params)};
  };
}

// Replaces symbolic zeros among the cotangents of a multi-output primitive's outputs.
std::vector<Array> instantiate_all(Cotangents cts, const std::vector<AbstractValue>& avals) {
  std::vector<Array> out;
  for (size_t i = 0; i < cts.size(); ++i) out.push_back(instantiate_zero(cts[i], avals[i]));
  return out;
}

// Keeps the entries of `parts` for the linear inputs (JAX returns them for every input; the
// others are discarded by the caller anyway).
std::vector<Array> for_linear(std::vector<Array> parts, Inputs in) {
  for (size_t i = 0; i < in.size(); ++i)
    if (!in[i].is_linear()) parts[i] = Array();
  return parts;
}

// ---- forward mode inside rules ------------------------------------------------------------
// Rules that JAX writes as jax.jvp of a function (reduce_prod, the cumulative scans) evaluate
// that function on duals: each primitive goes through its own jvp rule when a tangent is
// non-zero and is bound alone otherwise, exactly as a jvp trace processes it.
struct Dual {
  Array primal, tangent;  // an invalid tangent is a symbolic zero
};

std::vector<Dual> jvp_bind(const char* name, const std::vector<Dual>& in,
                           const Params& params = {}) {
  const Primitive& p = primitive(name);
  std::vector<Array> x, t;
  bool any_tangent = false;
  for (const Dual& d : in) {
    x.push_back(d.primal);
    t.push_back(d.tangent);
    any_tangent = any_tangent || !is_zero(d.tangent);
  }
  std::vector<Dual> out;
  if (!any_tangent || p.non_differentiable) {
    for (Array& y : spmd::bind(p, x, params)) out.push_back({std::move(y), Array()});
    return out;
  }
  if (!p.jvp)
    throw std::logic_error("[jvp] primitive '" + p.name + "' has no differentiation rule");
  JvpResult r = p.jvp(x, t, params);
  for (size_t i = 0; i < r.primals_out.size(); ++i)
    out.push_back({std::move(r.primals_out[i]), std::move(r.tangents_out[i])});
  return out;
}

Dual jvp_bind1(const char* name, const std::vector<Dual>& in, const Params& params = {}) {
  return jvp_bind(name, in, params).front();
}

// lax.slice_in_dim(x, start, limit, stride, axis).
Dual slice_in_dim(const Dual& x, int axis, int64_t start, int64_t limit, int64_t stride) {
  const Shape& s = x.primal.shape();
  Ints starts(size_t(s.ndim()), 0), limits = s.dims(), strides(size_t(s.ndim()), 1);
  starts[size_t(axis)] = start;
  limits[size_t(axis)] = limit;
  strides[size_t(axis)] = stride;
  return jvp_bind1("slice", {x}, slice_params(starts, limits, strides));
}

// lax.pad(x, value, config) with the padding only along `axis`.
Dual pad_in_dim(const Dual& x, const Array& value, int axis, PadConfig c) {
  std::vector<PadConfig> config(size_t(x.primal.ndim()));
  config[size_t(axis)] = c;
  return jvp_bind1("pad", {x, Dual{value, Array()}}, Params{{"padding_config", config}});
}

Dual rev_in_dim(const Dual& x, int axis) {
  return jvp_bind1("rev", {x}, Params{{"dimensions", Ints{axis}}});
}

// ---- reductions ---------------------------------------------------------------------------
Array reduce_sum_transpose(const Array& ct, const AbstractValue& operand, const Params& p) {
  const Ints dims = remaining(operand.shape.ndim(), p.get_ints("axes"));
  return broadcast_in_dim(ct, operand.shape, dims);
}

// lax.reshape(x, new_shape, dimensions=perm). spmd's reshape takes dimensions=None only, so the
// permutation is its own transpose.
Array permute_and_reshape(const Array& x, const Ints& perm, const Shape& new_shape) {
  Array permuted = lax::transpose(x, perm);
  return lax::reshape(permuted, new_shape);
}

// JAX's _reduce_prod_jvp_rule: the reduced axes moved to the front and flattened, then a tree of
// pairwise products (halves multiplied, an odd half padded with 1) differentiated as it goes.
JvpResult reduce_prod_jvp(std::span<const Array> x, std::span<const Array> t, const Params& p) {
  const Ints& axes = p.get_ints("axes");
  const Shape& shape = x[0].shape();
  const Ints non_axes = remaining(shape.ndim(), axes);
  int64_t n = 1;
  std::vector<int64_t> kept_shape;
  for (int64_t a : axes) n *= shape[int(a)];
  for (int64_t d : non_axes) kept_shape.push_back(shape[int(d)]);
  const Ints perm = concat(axes, non_axes);
  const Shape flat(concat({n}, kept_shape));
  Array primal = permute_and_reshape(x[0], perm, flat);
  Array tangent = permute_and_reshape(instantiate_zero(t[0], aval_of(x[0])), perm, flat);
  Dual acc{primal, tangent};
  const Array one = const_of(x[0], 1);
  while (acc.primal.shape()[0] > 1) {
    const int64_t m = acc.primal.shape()[0], m1 = (m + 1) / 2;
    Dual lo = slice_in_dim(acc, 0, 0, m1, 1);
    Dual hi = slice_in_dim(acc, 0, m1, m, 1);
    if (m - m1 != m1) hi = pad_in_dim(hi, one, 0, PadConfig{0, 1, 0});
    acc = jvp_bind1("mul", {lo, hi});
  }
  if (acc.primal.shape()[0] == 0) {
    Array ones = broadcast_in_dim(one, Shape(kept_shape), {});
    Array zeros = strong_zeros(Shape(kept_shape), x[0].dtype());
    return JvpResult{{ones}, {zeros}};
  }
  Dual out = jvp_bind1("squeeze", {acc}, Params{{"dimensions", Ints{0}}});
  return JvpResult{{out.primal}, {out.tangent}};
}

// JAX's _reduce_chooser_jvp_rule (reduce_max, reduce_min): the tangent averaged over the
// locations equal to the result.
JvpResult chooser_jvp(const Primitive& prim, std::span<const Array> x, std::span<const Array> t,
                      const Params& p) {
  Array ans = bind1(prim, x, p);
  const Ints& axes = p.get_ints("axes");
  std::vector<int64_t> kept_dims;
  for (int d = 0; d < x[0].ndim(); ++d)
    kept_dims.push_back(contains(axes, d) ? 1 : x[0].shape()[d]);
  Array expanded = lax::reshape(ans, Shape(kept_dims));
  Array equal = ops::apply("eq", {x[0], expanded});
  Array locations = ops::convert(equal, t[0].dtype(), false);
  Array counts = lax::reduce_sum(locations, axes);
  Array chosen = ops::apply("mul", {t[0], locations});
  Array total = lax::reduce_sum(chosen, axes);
  Array tangent = ops::apply("div", {total, counts});
  return JvpResult{{ans}, {tangent}};
}

// ---- cumulative scans -----------------------------------------------------------------------
using Combine = Dual (*)(const Dual&, const Dual&);

// associative_scan's _interleave: a's elements at even positions, b's at odd ones.
Dual interleave(const Dual& a, const Dual& b, int axis) {
  const bool same = a.primal.shape()[axis] == b.primal.shape()[axis];
  Dual spread_a = pad_in_dim(a, const_of(a.primal, 0), axis, PadConfig{0, same ? 1 : 0, 1});
  Dual spread_b = pad_in_dim(b, const_of(b.primal, 0), axis, PadConfig{1, same ? 0 : 1, 1});
  return jvp_bind1(is_bool(a.primal.dtype()) ? "or" : "add", {spread_a, spread_b});
}

// associative_scan's _scan: combine adjacent pairs, scan those recursively (the odd results),
// then combine them with the remaining elements (the even results) and interleave.
Dual associative_scan(const Dual& elems, Combine combine, int axis) {
  const int64_t n = elems.primal.shape()[axis];
  if (n < 2) return elems;
  Dual firsts = slice_in_dim(elems, axis, 0, n - 1, 2);
  Dual seconds = slice_in_dim(elems, axis, 1, n, 2);
  Dual reduced = combine(firsts, seconds);
  Dual odd = associative_scan(reduced, combine, axis);
  Dual even;
  if (n % 2 == 0) {
    Dual head = slice_in_dim(odd, axis, 0, odd.primal.shape()[axis] - 1, 1);
    Dual rest = slice_in_dim(elems, axis, 2, n, 2);
    even = combine(head, rest);
  } else {
    Dual rest = slice_in_dim(elems, axis, 2, n, 2);
    even = combine(odd, rest);
  }
  Dual first = slice_in_dim(elems, axis, 0, 1, 1);
  Dual joined = jvp_bind1("concatenate", {first, even}, Params{{"dimension", int64_t(axis)}});
  return interleave(joined, odd, axis);
}

Dual combine_mul(const Dual& a, const Dual& b) {
  return jvp_bind1("mul", {a, b});
}
Dual combine_max(const Dual& a, const Dual& b) {
  return jvp_bind1("max", {a, b});
}
Dual combine_min(const Dual& a, const Dual& b) {
  return jvp_bind1("min", {a, b});
}

// jax.lax.logaddexp's _replace_inf: zeros where x is +inf.
Array replace_inf(const Array& x) {
  Array inf = const_of(x, std::numeric_limits<double>::infinity());
  Array is_inf = ops::apply("eq", {x, inf});
  Array zeros = zeros_like_aval(aval_of(x));
  return lax::select_n(is_inf, {x, zeros});
}

// logaddexp is a custom_jvp function in JAX: its primal is computed without tangents, then its
// own jvp rule gives the tangent. (JAX stages the primal inside a custom_jvp_call; here its
// equations are inlined.)
Dual combine_logaddexp(const Dual& a, const Dual& b) {
  const Array t1 = instantiate_zero(a.tangent, aval_of(a.primal));
  const Array t2 = instantiate_zero(b.tangent, aval_of(b.primal));
  const Array &x1 = a.primal, &x2 = b.primal;
  Array amax = ops::apply("max", {x1, x2});
  Array delta = ops::apply("sub", {x1, x2});
  Array is_nan = ops::apply("ne", {delta, delta});
  Array plain = ops::apply("add", {x1, x2});
  Array magnitude = ops::apply("abs", {delta});
  Array negated = ops::apply("neg", {magnitude});
  Array decay = ops::apply("exp", {negated});
  Array correction = ops::apply("log1p", {decay});
  Array shifted = ops::apply("add", {amax, correction});
  Array out = lax::select_n(is_nan, {shifted, plain});
  // The tangent: t_i · exp(x_i - out), with +inf replaced by 0 so inf - inf gives no NaN.
  auto part = [&](const Array& t, const Array& x) {
    Array xi = replace_inf(x);
    Array oi = replace_inf(out);
    Array diff = ops::apply("sub", {xi, oi});
    Array scale = ops::apply("exp", {diff});
    return ops::apply("mul", {t, scale});
  };
  Array part1 = part(t1, x1);
  Array part2 = part(t2, x2);
  return Dual{out, ops::apply("add", {part1, part2})};
}

// JAX's _cumulative_jvp_rule: jax.jvp of associative_scan with the scan's combining function.
JvpRule cumulative_jvp(Combine combine) {
  return [combine](std::span<const Array> x, std::span<const Array> t, const Params& p) {
    const int axis = int(p.get_int("axis"));
    const bool reverse = p.get<bool>("reverse");
    Dual elems{x[0], instantiate_zero(t[0], aval_of(x[0]))};
    if (reverse) elems = rev_in_dim(elems, axis);
    Dual out = associative_scan(elems, combine, axis);
    if (reverse) out = rev_in_dim(out, axis);
    return JvpResult{{out.primal}, {out.tangent}};
  };
}

Array cumsum_transpose(const Array& ct, const AbstractValue&, const Params& p) {
  return lax::cumsum(ct, p.get_int("axis"), !p.get<bool>("reverse"));
}

void register_reduction_rules(PrimitiveRegistry& r) {
  deflinear(r, "reduce_sum", unary_transpose(reduce_sum_transpose));
  r.at("reduce_prod").jvp = reduce_prod_jvp;
  for (const char* name : {"reduce_max", "reduce_min"}) {
    Primitive& prim = r.at(name);
    const Primitive* p = &prim;
    prim.jvp = [p](std::span<const Array> x, std::span<const Array> t, const Params& params) {
      return chooser_jvp(*p, x, t, params);
    };
  }
  for (const char* name : {"reduce_and", "reduce_or", "reduce_xor", "argmax", "argmin"})
    r.at(name).non_differentiable = true;
  deflinear(r, "cumsum", unary_transpose(cumsum_transpose));
  r.at("cumprod").jvp = cumulative_jvp(combine_mul);
  r.at("cummax").jvp = cumulative_jvp(combine_max);
  r.at("cummin").jvp = cumulative_jvp(combine_min);
  r.at("cumlogsumexp").jvp = cumulative_jvp(combine_logaddexp);
}

// ---- shape manipulation ---------------------------------------------------------------------
// JAX's _broadcast_in_dim_transpose_rule: sum over the broadcast dims, then restore the operand's
// size-1 dims.
Array broadcast_in_dim_transpose(const Array& ct, const AbstractValue& operand, const Params& p) {
  const Ints& dims = p.get_ints("broadcast_dimensions");
  Ints unit_dims, kept;
  for (int i = 0; i < operand.shape.ndim(); ++i) {
    if (operand.shape[i] == 1)
      unit_dims.push_back(i);
    else
      kept.push_back(dims[size_t(i)]);
  }
  const Ints axes = remaining(ct.ndim(), kept);
  Array summed = lax::reduce_sum(ct, axes);
  return expand_dims(summed, unit_dims);
}

Array reshape_transpose(const Array& ct, const AbstractValue& operand, const Params&) {
  return lax::reshape(ct, operand.shape);
}

Array squeeze_transpose(const Array& ct, const AbstractValue&, const Params& p) {
  return expand_dims(ct, p.get_ints("dimensions"));
}

Array transpose_transpose(const Array& ct, const AbstractValue&, const Params& p) {
  return lax::transpose(ct, argsort(p.get_ints("permutation")));
}

Array rev_transpose(const Array& ct, const AbstractValue&, const Params& p) {
  return lax::rev(ct, p.get_ints("dimensions"));
}

// JAX's _tile_transpose_rule: the cotangent seen as (reps_0, n_0, reps_1, n_1, …), summed over
// the repetitions.
Array tile_transpose(const Array& ct, const AbstractValue& operand, const Params& p) {
  const Ints& reps = p.get_ints("reps");
  std::vector<int64_t> split_shape;
  Ints axes;
  for (int i = 0; i < operand.shape.ndim(); ++i) {
    split_shape.insert(split_shape.end(), {reps[size_t(i)], operand.shape[i]});
    axes.push_back(2 * i);
  }
  Array reshaped = lax::reshape(ct, Shape(split_shape));
  return lax::reduce_sum(reshaped, axes);
}

std::vector<Array> concatenate_transpose(Cotangents ct, Inputs in, const Params& p) {
  const int64_t dim = p.get_int("dimension");
  Ints sizes;
  for (const LinearInput& x : in) sizes.push_back(x.aval.shape[int(dim)]);
  return for_linear(ops::apply_multi("split", {ct[0]}, Params{{"sizes", sizes}, {"axis", dim}}),
                    in);
}

// JAX's _split_transpose_rule: the output cotangents (zeros instantiated) concatenated.
std::vector<Array> split_transpose(Cotangents ct, Inputs in, const Params& p) {
  std::vector<AbstractValue> avals;
  for (int64_t n : p.get_ints("sizes")) {
    AbstractValue piece = in[0].aval;
    piece.shape[int(p.get_int("axis"))] = n;
    avals.push_back(piece);
  }
  return {lax::concatenate(instantiate_all(ct, avals), p.get_int("axis"))};
}

std::vector<Array> stack_transpose(Cotangents ct, Inputs in, const Params& p) {
  return for_linear(ops::apply_multi("unstack", {ct[0]}, Params{{"axis", p.get_int("axis")}}), in);
}

std::vector<Array> unstack_transpose(Cotangents ct, Inputs in, const Params& p) {
  const int64_t axis = p.get_int("axis");
  AbstractValue piece = in[0].aval;
  std::vector<int64_t> dims = piece.shape.dims();
  dims.erase(dims.begin() + axis);
  piece.shape = Shape(dims);
  std::vector<AbstractValue> avals(ct.size(), piece);
  return {ops::apply("stack", instantiate_all(ct, avals), Params{{"axis", axis}})};
}

// JAX's _pad_transpose: the operand's cotangent is the cotangent unpadded (negative padding)
// and strided past the interior padding; the padding value's is everything else.
std::vector<Array> pad_transpose(Cotangents cts, Inputs in, const Params& p) {
  const Array& t = cts[0];
  const auto& config = p.get<std::vector<PadConfig>>("padding_config");
  auto total = [&](const Array& x) { return lax::reduce_sum(x, range(0, t.ndim())); };
  auto unpad = [&] {
    std::vector<PadConfig> unpad_config;
    Ints zeros, strides;
    for (const PadConfig& c : config) {
      unpad_config.push_back({-c.low, -c.high, 0});
      zeros.push_back(0);
      strides.push_back(c.interior + 1);
    }
    Array unpadded = lax::pad(t, const_of(t, 0), unpad_config);
    return ops::apply("slice", {unpadded}, slice_params(zeros, unpadded.shape().dims(), strides));
  };
  Array operand_ct = in[0].is_linear() ? unpad() : Array();
  Array value_ct;
  if (in[1].is_linear()) {
    Array whole = total(t);
    Array inner = total(is_zero(operand_ct) ? unpad() : operand_ct);
    value_ct = ops::apply("sub", {whole, inner});
  }
  return {operand_ct, value_ct};
}

// JAX's _slice_transpose: the cotangent padded back to the operand's shape, strides becoming
// interior padding.
Array slice_transpose(const Array& ct, const AbstractValue& operand, const Params& p) {
  const Ints& start = p.get_ints("start_indices");
  const Ints& limit = p.get_ints("limit_indices");
  const ParamValue& strides_param = p.at("strides");
  std::vector<PadConfig> pads;
  for (size_t d = 0; d < start.size(); ++d) {
    const int64_t stride =
        std::holds_alternative<NoneParam>(strides_param) ? 1 : p.get_ints("strides")[d];
    const int64_t n = ct.shape()[int(d)];
    const int64_t real_limit =
        stride == 1 ? limit[d] : start[d] + (n == 0 ? 0 : 1 + (n - 1) * stride);
    pads.push_back({start[d], operand.shape[int(d)] - real_limit, stride - 1});
  }
  return lax::pad(ct, const_of(ct, 0), pads);
}

void register_shape_rules(PrimitiveRegistry& r) {
  deflinear(r, "broadcast_in_dim", unary_transpose(broadcast_in_dim_transpose));
  deflinear(r, "reshape", unary_transpose(reshape_transpose));
  deflinear(r, "squeeze", unary_transpose(squeeze_transpose));
  deflinear(r, "transpose", unary_transpose(transpose_transpose));
  deflinear(r, "rev", unary_transpose(rev_transpose));
  deflinear(r, "tile", unary_transpose(tile_transpose));
  deflinear(r, "concatenate", concatenate_transpose);
  deflinear(r, "split", split_transpose);
  deflinear(r, "stack", stack_transpose);
  deflinear(r, "unstack", unstack_transpose);
  deflinear(r, "pad", pad_transpose);
  deflinear(r, "slice", unary_transpose(slice_transpose));
}

// ---- dynamic slicing and gather -------------------------------------------------------------
// JAX's _dynamic_slice_jvp slices the tangent before the primal.
JvpResult dynamic_slice_jvp(std::span<const Array> x, std::span<const Array> t, const Params& p) {
  std::vector<Array> args = to_vector(x);
  args[0] = t[0];
  Array tangent = is_zero(t[0]) ? Array() : ops::apply("dynamic_slice", args, p);
  Array primal = ops::apply("dynamic_slice", to_vector(x), p);
  return JvpResult{{primal}, {tangent}};
}

std::vector<Array> dynamic_slice_transpose(Cotangents ct, Inputs in, const Params&) {
  std::vector<Array> args{strong_zeros(in[0].aval.shape, in[0].aval.dtype), ct[0]};
  for (size_t i = 1; i < in.size(); ++i) args.push_back(in[i].value);
  std::vector<Array> out(in.size());
  out[0] = ops::apply("dynamic_update_slice", args);
  return out;
}

JvpResult dynamic_update_slice_jvp(std::span<const Array> x, std::span<const Array> t,
                                   const Params& p) {
  Array primal = ops::apply("dynamic_update_slice", to_vector(x), p);
  std::vector<Array> args = to_vector(x);
  args[0] = instantiate_zero(t[0], aval_of(x[0]));
  args[1] = instantiate_zero(t[1], aval_of(x[1]));
  return JvpResult{{primal}, {ops::apply("dynamic_update_slice", args, p)}};
}

// JAX's _dynamic_update_slice_transpose_rule: the operand gets the cotangent with the updated
// window zeroed, the update gets that window.
std::vector<Array> dynamic_update_slice_transpose(Cotangents cts, Inputs in, const Params&) {
  const Array& t = cts[0];
  std::vector<Array> starts;
  for (size_t i = 2; i < in.size(); ++i) starts.push_back(in[i].value);
  const Shape& update_shape = in[1].aval.shape;
  Array zeros = zeros_like_aval(AbstractValue{update_shape, t.dtype(), t.weak_type()});
  std::vector<Array> out(in.size());
  if (in[0].is_linear()) {
    std::vector<Array> args = concat_arrays({t, zeros}, starts);
    out[0] = ops::apply("dynamic_update_slice", args);
  }
  if (in[1].is_linear()) {
    std::vector<Array> args = concat_arrays({t}, starts);
    out[1] = ops::apply("dynamic_slice", args, Params{{"slice_sizes", update_shape.dims()}});
  }
  return out;
}

// JAX's _gather_jvp_rule: the tangent gathered like the primal, out-of-bounds windows filled
// with 0.
JvpResult gather_jvp(std::span<const Array> x, std::span<const Array> t, const Params& p) {
  Array primal = ops::apply("gather", {x[0], x[1]}, p);
  if (is_zero(t[0])) return JvpResult{{primal}, {Array()}};
  Params tangent_params = p;
  tangent_params.set("fill_value", zero_fill(p));
  return JvpResult{{primal}, {ops::apply("gather", {t[0], x[1]}, tangent_params)}};
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

// JAX's _scatter_addsub_jvp: scatter-add is linear in the operand and the updates together.
JvpResult scatter_add_jvp(std::span<const Array> x, std::span<const Array> t, const Params& p) {
  const Primitive& prim = primitive("scatter-add");
  Array primal = bind1(prim, x, p);
  if (is_zero(t[0]) && is_zero(t[2])) return JvpResult{{primal}, {Array()}};
  Array operand_t = instantiate_zero(t[0], aval_of(x[0]));
  Array updates_t = instantiate_zero(t[2], aval_of(x[2]));
  return JvpResult{{primal}, {bind1(prim, {operand_t, x[1], updates_t}, p)}};
}

// JAX's _scatter_addsub_transpose_rule: the operand's cotangent passes through, the updates'
// is gathered from it window by window.
std::vector<Array> scatter_add_transpose(Cotangents cts, Inputs in, const Params& p) {
  const Array& t = cts[0];
  std::vector<Array> out(3);
  if (in[0].is_linear()) out[0] = t;
  if (!in[2].is_linear()) return out;
  const Ints& window_dims = p.get_ints("update_window_dims");
  const Ints& inserted = p.get_ints("inserted_window_dims");
  const Ints& batching = p.get_ints("operand_batching_dims");
  Ints slice_sizes;
  for (int i = 0, pos = 0; i < t.ndim(); ++i) {
    if (contains(inserted, i) || contains(batching, i))
      slice_sizes.push_back(1);
    else
      slice_sizes.push_back(in[2].aval.shape[int(window_dims[size_t(pos++)])]);
  }
  Params g = gather_params(window_dims, inserted, p.get_ints("scatter_dims_to_operand_dims"),
                           batching, p.get_ints("scatter_indices_batching_dims"), slice_sizes,
                           p.get<std::string>("mode"), zero_fill(p), false, false);
  out[2] = ops::apply("gather", {t, in[1].value}, g);
  return out;
}

void register_indexing_rules(PrimitiveRegistry& r) {
  r.at("dynamic_slice").jvp = dynamic_slice_jvp;
  r.at("dynamic_slice").transpose = dynamic_slice_transpose;
  r.at("dynamic_update_slice").jvp = dynamic_update_slice_jvp;
  r.at("dynamic_update_slice").transpose = dynamic_update_slice_transpose;
  r.at("gather").jvp = gather_jvp;
  r.at("gather").transpose = gather_transpose;
  r.at("scatter-add").jvp = scatter_add_jvp;
  r.at("scatter-add").transpose = scatter_add_transpose;
}

// ---- dot_general ----------------------------------------------------------------------------
// JAX's bilinear jvp: dot_general of each tangent with the other primal, summed.
JvpResult dot_general_jvp(std::span<const Array> x, std::span<const Array> t, const Params& p) {
  Array ans = ops::apply("dot_general", {x[0], x[1]}, p);
  Array lhs_part = is_zero(t[0]) ? Array() : ops::apply("dot_general", {t[0], x[1]}, p);
  Array rhs_part = is_zero(t[1]) ? Array() : ops::apply("dot_general", {x[0], t[1]}, p);
  return JvpResult{{ans}, {add_cotangents(lhs_part, rhs_part)}};
}

// JAX's _dot_general_transpose_lhs: contract the cotangent with y over y's free dims, then
// permute the result into x's dimension order. `swap_ans` when x was the rhs (its free dims
// come last in the output).
Array dot_transpose_lhs(const Array& g, const AbstractValue& x, const Array& y,
                        const DotDimensionNumbers& d, const Params& p, bool swap_ans) {
  const Ints x_kept = remaining(x.shape.ndim(), d.lhs_contracting, d.lhs_batch);
  const Ints y_kept = remaining(y.ndim(), d.rhs_contracting, d.rhs_batch);
  const int64_t nb = int64_t(d.lhs_batch.size());
  const int64_t y_begin = swap_ans ? nb : nb + int64_t(x_kept.size());
  DotDimensionNumbers dims{range(y_begin, y_begin + int64_t(y_kept.size())), y_kept, range(0, nb),
                           d.rhs_batch};
  Ints x_contract_sorted_by_y;
  for (int64_t i : argsort(d.rhs_contracting))
    x_contract_sorted_by_y.push_back(d.lhs_contracting[size_t(i)]);
  const Ints unsorted_axes = concat(concat(d.lhs_batch, x_kept), x_contract_sorted_by_y);
  Params params = p;
  params.set("dimension_numbers", dims);
  // The forward product's output sharding does not describe this one's.
  params.set("out_sharding", NoneParam{});
  Array contracted = ops::apply("dot_general", {g, y}, params);
  Array x_bar = lax::transpose(contracted, argsort(unsorted_axes));
  if (x_bar.dtype() != x.dtype) x_bar = ops::convert(x_bar, x.dtype, x.weak_type);
  return x_bar;
}

std::vector<Array> dot_general_transpose(Cotangents ct, Inputs in, const Params& p) {
  const auto& d = p.get<DotDimensionNumbers>("dimension_numbers");
  if (in[0].is_linear())
    return {dot_transpose_lhs(ct[0], in[0].aval, in[1].value, d, p, false), Array()};
  const DotDimensionNumbers swapped{d.rhs_contracting, d.lhs_contracting, d.rhs_batch, d.lhs_batch};
  return {Array(), dot_transpose_lhs(ct[0], in[1].aval, in[0].value, swapped, p, true)};
}

// ---- sort -------------------------------------------------------------------------------------
// JAX's _sort_jvp: the operands sorted together with an iota, whose sorted values gather each
// tangent. The iota is uint32, JAX's int_dtype_for_shape for every size sort accepts.
JvpResult sort_jvp(std::span<const Array> x, std::span<const Array> t, const Params& p) {
  const Shape& shape = x[0].shape();
  const int64_t dim = p.get_int("dimension");
  std::vector<Array> operands = to_vector(x);
  operands.push_back(lax::broadcasted_iota(DType::uint32, shape, int(dim)));
  std::vector<Array> sorted = ops::apply_multi("sort", operands, p);
  Array idx = expand_dims(sorted.back(), {shape.ndim()});
  sorted.pop_back();
  const Ints batch = remaining(shape.ndim(), {dim});
  const Params g = gather_params({}, {dim}, {dim}, batch, batch, Ints(size_t(shape.ndim()), 1),
                                 "promise_in_bounds", NoneParam{}, false, false);
  JvpResult r{sorted, {}};
  for (const Array& ti : t)
    r.tangents_out.push_back(is_zero(ti) ? Array() : ops::apply("gather", {ti, idx}, g));
  return r;
}

// ---- unstack ----------------------------------------------------------------------------------
// unstack (JAX's unstack_p, which stack's transpose emits): the slices of the operand along
// `axis`, that dimension removed.
std::vector<AbstractValue> unstack_rule(std::span<const AbstractValue> in, const Params& p) {
  if (in.size() != 1) throw ValueError("[unstack] expected one operand");
  const AbstractValue& x = in[0];
  const int64_t axis = p.get_int("axis");
  if (axis < 0 || axis >= x.shape.ndim())
    throw AxisError("[unstack] axis " + std::to_string(axis) +
                    " is out of bounds for an operand of shape " + x.shape.str());
  std::vector<int64_t> dims = x.shape.dims();
  dims.erase(dims.begin() + axis);
  return std::vector<AbstractValue>(size_t(x.shape[int(axis)]),
                                    AbstractValue{Shape(dims), x.dtype, x.weak_type});
}

void unstack_kernel(const KernelArgs& a) {
  const size_t axis = size_t(a.params.get_int("axis"));
  std::vector<int64_t> strides = a.in[0].aval->shape.strides();
  const int bytes = itemsize(a.in[0].aval->dtype);
  const int64_t step = strides[axis] * bytes;
  strides.erase(strides.begin() + long(axis));
  const char* src = static_cast<const char*>(a.in[0].data);
  for (const Result& out : a.out) {
    cpu::strided_copy(src, strides, out.data, out.aval->shape, bytes);
    src += step;
  }
}

}  // namespace

void register_structural_ad_rules(PrimitiveRegistry& r) {
  r.define("unstack", unstack_rule, unstack_kernel);
  register_scatter_primitives(r);
  register_reduction_rules(r);
  register_shape_rules(r);
  register_indexing_rules(r);
  r.at("dot_general").jvp = dot_general_jvp;
  r.at("dot_general").transpose = dot_general_transpose;
  r.at("sort").jvp = sort_jvp;
}

}  // namespace spmd

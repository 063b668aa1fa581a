// jnp-level reductions and scans (sum, mean, var, argmax, cumsum, logsumexp, isclose, …) and
// their lax counterparts. Dtype rules follow jax.numpy's _reduction: narrow integers sum in the
// default integer type, 16-bit floats sum in float32, and keepdims restores the reduced dims.
#include <spmd/lax.h>
#include <spmd/ops.h>

#include "ops/op_util.h"
#include "sharding/type_sharding.h"

#include <cmath>
#include <string>

namespace spmd {
namespace {

using Positions = std::vector<int64_t>;

DType default_uint_dtype() {
  return canonicalize_dtype(DType::uint64);
}

// jnp's _promote_integer_dtype: bools and narrow integers widen to the default integer type
// of their signedness.
DType promote_integer_dtype(DType t) {
  if (is_bool(t)) return default_int_dtype();
  if (is_unsigned_integer(t) && itemsize(t) < itemsize(default_uint_dtype()))
    return default_uint_dtype();
  if (is_signed_integer(t) && itemsize(t) < itemsize(default_int_dtype()))
    return default_int_dtype();
  return t;
}

DType upcast_f16(DType t) {
  return t == DType::bfloat16 || t == DType::float16 ? DType::float32 : t;
}

// jnp's to_inexact_dtype: integers of up to 32 bits (and bools) become float32, 64-bit ones
// float64.
DType to_inexact(DType t) {
  if (is_floating(t)) return t;
  return canonicalize_dtype(itemsize(t) == 8 ? DType::float64 : DType::float32);
}

int64_t reduced_count(const Array& x, const Positions& pos) {
  int64_t n = 1;
  for (int64_t a : pos) n *= x.shape()[int(a)];
  return n;
}

Params reduce_params(const char* prim, const Positions& pos) {
  Params p{{"axes", pos}};
  if (std::string_view(prim) == "reduce_sum") p.set("out_sharding", NoneParam{});
  return p;
}

// Puts the reduced dims (sorted positions in the unreduced shape) back as size 1, with the
// broadcast_in_dim that JAX's lax.expand_dims emits.
Array keep_dims(const Array& r, const Positions& pos, bool keepdims) {
  if (!keepdims || pos.empty()) return r;
  const int ndim = r.ndim() + int(pos.size());
  std::vector<int64_t> dims, kept;
  for (int d = 0, i = 0, p = 0; d < ndim; ++d) {
    if (p < int(pos.size()) && pos[size_t(p)] == d) {
      dims.push_back(1);
      ++p;
    } else {
      dims.push_back(r.shape()[i++]);
      kept.push_back(d);
    }
  }
  return lax::broadcast_in_dim(r, Shape(dims), kept);
}

// jnp's _reduction: convert to the computation dtype, reduce, restore the reduced dims as size
// 1 if asked, convert to the result dtype.
Array reduction(const char* prim, const Array& a, const Positions& pos, bool keepdims,
                DType computation, DType result) {
  Array r = ops::apply(prim, {ops::convert(a, computation)}, reduce_params(prim, pos));
  return ops::convert(keep_dims(r, pos, keepdims), result);
}

// jnp's _cast_to_numeric: bools count as the default integer type.
Array cast_to_numeric(const Array& x) {
  return is_bool(x.dtype()) ? ops::convert(x, default_int_dtype(), x.weak_type()) : x;
}

// jnp.sum / jnp.prod, optionally with an explicit dtype (which also turns off the float32
// upcast of 16-bit floats, as in JAX).
Array sum_or_prod(const char* prim, const Array& x, const Positions& pos, bool keepdims,
                  std::optional<DType> dtype = std::nullopt) {
  Array a = cast_to_numeric(x);
  DType result = dtype ? *dtype : promote_integer_dtype(a.dtype());
  DType computation = dtype ? result : upcast_f16(result);
  return reduction(prim, a, pos, keepdims, computation, result);
}

Array extremum(const char* api, const char* prim, const Array& x, const Axes& axes, bool keepdims) {
  Positions pos = ops::canonicalize_axes(api, axes, x.ndim());
  for (int64_t a : pos)
    if (x.shape()[int(a)] == 0)
      throw ValueError(ops::prefix(api) + "zero-size array to reduction operation " + api +
                       " which has no identity");
  return reduction(prim, x, pos, keepdims, x.dtype(), x.dtype());
}

Array logical_reduction(const char* api, const char* prim, const Array& x, const Axes& axes,
                        bool keepdims) {
  Positions pos = ops::canonicalize_axes(api, axes, x.ndim());
  return reduction(prim, ops::convert(x, DType::bool_), pos, keepdims, DType::bool_, DType::bool_);
}

// jnp's _mean; `dtype` given means the caller already chose the computation type.
Array mean_of(const Array& x, const Positions& pos, bool keepdims,
              std::optional<DType> dtype = std::nullopt) {
  DType result = dtype ? *dtype : to_inexact(x.dtype());
  DType computation = dtype ? result : upcast_f16(result);
  Array total = sum_or_prod("reduce_sum", x, pos, keepdims, computation);
  Array count = ops::scalar(double(reduced_count(x, pos)), computation);
  return ops::convert(ops::apply("div", {total, count}), result);
}

Array variance(const char* api, const Array& x, const Axes& axes, bool keepdims, int ddof) {
  Positions pos = ops::canonicalize_axes(api, axes, x.ndim());
  DType dtype = to_inexact(x.dtype());
  DType computation = upcast_f16(dtype);
  Array a = ops::convert(x, computation);
  Array centered = square(ops::apply("sub", {a, mean_of(a, pos, true, computation)}));
  Array normalizer = ops::apply("sub", {ops::scalar(double(reduced_count(a, pos)), computation),
                                        ops::scalar(double(ddof), computation)});
  Array total = sum_or_prod("reduce_sum", centered, pos, keepdims, computation);
  Array result = ops::convert(ops::apply("div", {total, normalizer}), dtype);
  return where(greater(normalizer, 0), result, NAN);
}

Array arg_extremum(const char* api, const char* prim, const Array& x, std::optional<int> axis,
                   bool keepdims) {
  Array a = x;
  int ax = 0;
  Positions dims;
  if (!axis) {
    if (x.ndim() != 1) a = lax::reshape(x, Shape{x.size()});
    for (int d = 0; d < x.ndim(); ++d) dims.push_back(d);
  } else {
    ax = ops::canonicalize_axis(api, *axis, x.ndim());
    dims.push_back(ax);
  }
  if (a.shape()[ax] == 0)
    throw ValueError(ops::prefix(api) + "attempt to get " + api + " of an empty sequence");
  Array r =
      ops::apply(prim, {a}, Params{{"axes", Positions{ax}}, {"index_dtype", default_int_dtype()}});
  return keep_dims(r, dims, keepdims);
}

// jnp's _cumulative_reduction: no axis flattens; bools accumulate as the default integer.
Array cumulative(const char* api, const char* prim, const Array& x, std::optional<int> axis) {
  Array a = x;
  if (!axis && x.ndim() != 1) a = lax::reshape(x, Shape{x.size()});
  int ax = ops::canonicalize_axis(api, axis.value_or(0), a.ndim());
  DType result = is_bool(a.dtype()) ? promote_integer_dtype(a.dtype()) : a.dtype();
  Array r = ops::apply(prim, {ops::convert(a, result)},
                       Params{{"axis", int64_t(ax)}, {"reverse", false}});
  return ops::convert(r, result);
}

Array scan(const char* prim, const Array& x, int64_t axis, bool reverse) {
  return ops::apply(prim, {x}, Params{{"axis", axis}, {"reverse", reverse}});
}

}  // namespace

// ---- jnp reductions ---------------------------------------------------------------------------
Array sum(const Array& x, const Axes& axes, bool keepdims) {
  return sum_or_prod("reduce_sum", x, ops::canonicalize_axes("sum", axes, x.ndim()), keepdims);
}
Array prod(const Array& x, const Axes& axes, bool keepdims) {
  return sum_or_prod("reduce_prod", x, ops::canonicalize_axes("prod", axes, x.ndim()), keepdims);
}
Array max(const Array& x, const Axes& axes, bool keepdims) {
  return extremum("max", "reduce_max", x, axes, keepdims);
}
Array min(const Array& x, const Axes& axes, bool keepdims) {
  return extremum("min", "reduce_min", x, axes, keepdims);
}
Array all(const Array& x, const Axes& axes, bool keepdims) {
  return logical_reduction("all", "reduce_and", x, axes, keepdims);
}
Array any(const Array& x, const Axes& axes, bool keepdims) {
  return logical_reduction("any", "reduce_or", x, axes, keepdims);
}
Array mean(const Array& x, const Axes& axes, bool keepdims) {
  return mean_of(x, ops::canonicalize_axes("mean", axes, x.ndim()), keepdims);
}
Array var(const Array& x, const Axes& axes, bool keepdims, int ddof) {
  return variance("var", x, axes, keepdims, ddof);
}
Array std(const Array& x, const Axes& axes, bool keepdims, int ddof) {
  return sqrt(variance("std", x, axes, keepdims, ddof));
}
Array argmax(const Array& x, std::optional<int> axis, bool keepdims) {
  return arg_extremum("argmax", "argmax", x, axis, keepdims);
}
Array argmin(const Array& x, std::optional<int> axis, bool keepdims) {
  return arg_extremum("argmin", "argmin", x, axis, keepdims);
}

// jax.nn.logsumexp: shift by the (finite) maximum so exp cannot overflow.
Array logsumexp(const Array& x, const Axes& axes, bool keepdims) {
  Array a = ops::promote_inexact(x);
  Positions pos = ops::canonicalize_axes("logsumexp", axes, a.ndim());
  DType t = a.dtype();
  // jnp.max with initial=-inf: an empty reduction gives -inf instead of raising.
  Array m = ops::apply("reduce_max", {ops::convert(a, t)}, reduce_params("reduce_max", pos));
  m = keep_dims(ops::apply("max", {ops::scalar(-INFINITY, t), m}), pos, keepdims);
  Array amax = lax::stop_gradient(lax::select(isfinite(m), m, zeros_like(m)));
  Array shift = keepdims ? amax : keep_dims(amax, pos, true);
  Array exp_a = ops::apply("exp", {ops::apply("sub", {a, ops::convert(shift, t)})});
  Array sumexp = sum_or_prod("reduce_sum", exp_a, pos, keepdims);
  Array log_sum = ops::apply("log", {ops::apply("abs", {sumexp})});
  return ops::apply("add", {log_sum, ops::convert(amax, sumexp.dtype())});
}

Array cumsum(const Array& x, std::optional<int> axis) {
  return cumulative("cumsum", "cumsum", x, axis);
}
Array cumprod(const Array& x, std::optional<int> axis) {
  return cumulative("cumprod", "cumprod", x, axis);
}
Array cummax(const Array& x, int axis) {
  return scan("cummax", x, ops::canonicalize_axis("cummax", axis, x.ndim()), false);
}
Array cummin(const Array& x, int axis) {
  return scan("cummin", x, ops::canonicalize_axis("cummin", axis, x.ndim()), false);
}

// ---- comparisons ----------------------------------------------------------------------------
Array isclose(const Array& a, const Array& b, double rtol, double atol, bool equal_nan) {
  std::vector<Array> p = ops::promote_shapes("isclose", ops::promote_dtypes({a, b}));
  p = ops::promote_dtypes_inexact(p);
  const Array& x = p[0];
  const Array& y = p[1];
  DType t = x.dtype();
  Array tolerance = ops::apply(
      "add",
      {ops::scalar(atol, t), ops::apply("mul", {ops::scalar(rtol, t), ops::apply("abs", {y})})});
  Array in_range = ops::apply("le", {ops::apply("abs", {ops::apply("sub", {x, y})}), tolerance});
  Array out = logical_or(ops::apply("eq", {x, y}), logical_and(isfinite(y), in_range));
  return equal_nan ? logical_or(out, logical_and(isnan(x), isnan(y))) : out;
}

bool allclose(const Array& a, const Array& b, double rtol, double atol, bool equal_nan) {
  return all(isclose(a, b, rtol, atol, equal_nan)).item<bool>();
}

bool array_equal(const Array& a, const Array& b, bool equal_nan) {
  if (a.shape() != b.shape()) return false;
  Array eq = equal(a, b);
  if (equal_nan) eq = logical_or(eq, logical_and(isnan(a), isnan(b)));
  return all(eq).item<bool>();
}

Array ops::reduce_sum(const Array& x, const std::vector<int64_t>& axes,
                      const std::optional<TypeSharding>& sharding) {
  Params p = reduce_params("reduce_sum", axes);
  if (sharding) p.set("out_sharding", object_param(*sharding));
  return ops::apply("reduce_sum", {x}, p);
}

// ---- lax ----------------------------------------------------------------------------------------
namespace lax {

Array reduce_sum(const Array& x, const std::vector<int64_t>& axes) {
  return ops::apply("reduce_sum", {x}, reduce_params("reduce_sum", axes));
}
Array reduce_prod(const Array& x, const std::vector<int64_t>& axes) {
  return ops::apply("reduce_prod", {x}, reduce_params("reduce_prod", axes));
}
Array reduce_max(const Array& x, const std::vector<int64_t>& axes) {
  return ops::apply("reduce_max", {x}, reduce_params("reduce_max", axes));
}
Array reduce_min(const Array& x, const std::vector<int64_t>& axes) {
  return ops::apply("reduce_min", {x}, reduce_params("reduce_min", axes));
}
Array reduce_and(const Array& x, const std::vector<int64_t>& axes) {
  return ops::apply("reduce_and", {x}, reduce_params("reduce_and", axes));
}
Array reduce_or(const Array& x, const std::vector<int64_t>& axes) {
  return ops::apply("reduce_or", {x}, reduce_params("reduce_or", axes));
}
Array reduce_xor(const Array& x, const std::vector<int64_t>& axes) {
  return ops::apply("reduce_xor", {x}, reduce_params("reduce_xor", axes));
}
Array argmax(const Array& x, int64_t axis, DType index_dtype) {
  return ops::apply(
      "argmax", {x},
      Params{{"axes", Positions{axis}}, {"index_dtype", canonicalize_dtype(index_dtype)}});
}
Array argmin(const Array& x, int64_t axis, DType index_dtype) {
  return ops::apply(
      "argmin", {x},
      Params{{"axes", Positions{axis}}, {"index_dtype", canonicalize_dtype(index_dtype)}});
}
Array cumsum(const Array& x, int64_t axis, bool reverse) {
  return scan("cumsum", x, axis, reverse);
}
Array cumprod(const Array& x, int64_t axis, bool reverse) {
  return scan("cumprod", x, axis, reverse);
}
Array cummax(const Array& x, int64_t axis, bool reverse) {
  return scan("cummax", x, axis, reverse);
}
Array cummin(const Array& x, int64_t axis, bool reverse) {
  return scan("cummin", x, axis, reverse);
}
Array cumlogsumexp(const Array& x, int64_t axis, bool reverse) {
  return scan("cumlogsumexp", x, axis, reverse);
}

}  // namespace lax
}  // namespace spmd

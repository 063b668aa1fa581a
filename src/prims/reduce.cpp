// Primitive family: reductions (reduce_sum, reduce_prod, reduce_max, reduce_min, reduce_and,
// reduce_or, reduce_xor), argmax/argmin and the cumulative scans (cumsum, cumprod, cummax,
// cummin, cumlogsumexp), with JAX's names, params and type rules, then their jvp and transpose
// rules; batching and sharding rules come from their kind, with the collective that completes a
// sharded reduction where one does exactly. Each rule emits the primitives JAX's rule emits
// (jax/_src/lax/lax.py, control_flow/loops.py), in the same order and with the same params, so
// differentiated programs print as JAX's do. Every operation is its own statement: C++ leaves the
// order of argument evaluation open.
#include "prims/collectives.h"
#include "prims/families.h"
#include "prims/kinds.h"
#include "prims/primitive.h"
#include "prims/rule_util.h"

#include <spmd/error.h>
#include <spmd/lax.h>
#include <spmd/ops.h>

#include "backends/cpu/reduce.h"
#include "core/trace.h"
#include "ops/op_util.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace spmd {
namespace {

using cpu::ArgReduceOp;
using cpu::ReduceOp;
using cpu::ScanOp;
using Ints = std::vector<int64_t>;
using lax::PadConfig;

std::string prefix(const std::string& name) {
  return "[" + name + "] ";
}

std::string name_of(DType t) {
  return std::string(dtype_name(t));
}

// The operand's shape without `axes`, which must be unique and in range.
Shape reduced_shape(const std::string& name, const Shape& shape, const std::vector<int64_t>& axes) {
  std::vector<bool> dropped(size_t(shape.ndim()), false);
  for (int64_t a : axes) {
    if (a < 0 || a >= shape.ndim())
      throw AxisError(prefix(name) + "axis " + std::to_string(a) +
                      " is out of bounds for array of dimension " + std::to_string(shape.ndim()));
    if (dropped[size_t(a)])
      throw ValueError(prefix(name) +
                       "duplicate value in 'axes' of reduction: " + Shape(axes).str());
    dropped[size_t(a)] = true;
  }
  std::vector<int64_t> dims;
  for (int d = 0; d < shape.ndim(); ++d)
    if (!dropped[size_t(d)]) dims.push_back(shape[d]);
  return Shape(dims);
}

void require_number(const std::string& name, DType t) {
  if (is_bool(t))
    throw TypeError(prefix(name) + "does not accept dtype bool. Accepted dtypes are subtypes of " +
                    "number.");
}

enum class Accepts { numbers, any, ints_and_bool };

Primitive& define_reduce(PrimitiveRegistry& r, const char* name, ReduceOp op, Accepts accepts) {
  std::string n = name;
  Primitive& p = r.define(
      n,
      [n, accepts](std::span<const AbstractValue> in, const Params& p) {
        const AbstractValue& x = in[0];
        if (accepts == Accepts::numbers) require_number(n, x.dtype);
        if (accepts == Accepts::ints_and_bool && is_floating(x.dtype))
          throw TypeError(prefix(n) + "logical reduction requires operand dtype bool or int, got " +
                          name_of(x.dtype) + ".");
        // Logical reductions drop the weak type, as JAX's _strip_weak_type does.
        bool weak = accepts != Accepts::ints_and_bool && x.weak_type;
        return std::vector<AbstractValue>{
            {reduced_shape(n, x.shape, p.get_ints("axes")), x.dtype, weak}};
      },
      [op](const KernelArgs& a) {
        cpu::reduce(op, a.in[0].aval->dtype, a.in[0].data, a.in[0].aval->shape,
                    a.params.get_ints("axes"), a.out[0].data);
      });
  p.kind = PrimitiveKind::reducer;
  return p;
}

Primitive& define_arg_reduce(PrimitiveRegistry& r, const char* name, ArgReduceOp op) {
  std::string n = name;
  Primitive& p = r.define(
      n,
      [n](std::span<const AbstractValue> in, const Params& p) {
        const AbstractValue& x = in[0];
        const std::vector<int64_t>& axes = p.get_ints("axes");
        if (axes.size() != 1)
          throw ValueError(prefix(n) + "expected exactly one axis, got " + Shape(axes).str());
        DType index_dtype = p.get<DType>("index_dtype");
        if (!is_integer(index_dtype))
          throw TypeError(prefix(n) + "index_dtype must be an integer type, but got " +
                          name_of(index_dtype));
        Shape out = reduced_shape(n, x.shape, axes);
        if (x.shape[int(axes[0])] < 1)
          throw ValueError(prefix(n) + "the reduced dimension must be non-empty, got shape " +
                           x.shape.str() + " and axis " + std::to_string(axes[0]));
        return std::vector<AbstractValue>{{out, index_dtype, false}};
      },
      [op](const KernelArgs& a) {
        cpu::arg_reduce(op, a.in[0].aval->dtype, a.in[0].data, a.in[0].aval->shape,
                        int(a.params.get_ints("axes")[0]), a.out[0].aval->dtype, a.out[0].data);
      });
  p.kind = PrimitiveKind::reducer;
  return p;
}

Primitive& define_scan(PrimitiveRegistry& r, const char* name, ScanOp op) {
  std::string n = name;
  Primitive& p = r.define(
      n,
      [n, op](std::span<const AbstractValue> in, const Params& p) {
        const AbstractValue& x = in[0];
        int64_t axis = p.get_int("axis");
        (void)p.get<bool>("reverse");
        if (axis < 0 || axis >= x.shape.ndim())
          throw AxisError(prefix(n) + "axis " + std::to_string(axis) +
                          " is out of bounds for array of shape " + x.shape.str());
        require_number(n, x.dtype);
        if (op == ScanOp::logsumexp && !is_floating(x.dtype))
          throw TypeError(prefix(n) + "expected a floating-point dtype, got " + name_of(x.dtype));
        return std::vector<AbstractValue>{x};
      },
      [op](const KernelArgs& a) {
        cpu::cumulative(op, a.in[0].aval->dtype, a.in[0].data, a.in[0].aval->shape,
                        int(a.params.get_int("axis")), a.params.get<bool>("reverse"),
                        a.out[0].data);
      });
  p.kind = PrimitiveKind::cumulative;
  return p;
}

// ---- forward mode inside rules ------------------------------------------------------------------
// Rules that JAX writes as jax.jvp of a function (reduce_prod, the cumulative scans) evaluate that
// function on dual values of this trace: each primitive goes through its own jvp rule when a
// tangent is non-zero and is bound alone otherwise, exactly as a jvp trace processes it.
class DualTrace : public Trace {
 public:
  Array dual(Array primal, Array tangent) {
    auto impl = std::make_shared<ArrayImpl>();
    impl->aval = aval_of(primal);
    impl->trace = shared_from_this();
    impl->trace_slot = int64_t(values_.size());
    values_.emplace_back(std::move(primal), std::move(tangent));
    return Array(std::move(impl));
  }
  // x's primal and tangent; values of other traces have a zero (invalid) tangent.
  std::pair<Array, Array> split(const Array& x) const {
    if (x.impl() && x.impl()->trace.get() == this) return values_[size_t(x.impl()->trace_slot)];
    return {x, Array()};
  }
  std::vector<Array> process_primitive(const Primitive& p, std::span<const Array> inputs,
                                       const Params& params) override {
    std::vector<Array> x, t;
    bool any_tangent = false;
    for (const Array& in : inputs) {
      auto [primal, tangent] = split(in);
      any_tangent = any_tangent || !is_zero(tangent);
      x.push_back(std::move(primal));
      t.push_back(std::move(tangent));
    }
    std::vector<Array> outs, tangents;
    if (!any_tangent || p.non_differentiable) {
      outs = spmd::bind(p, x, params);
    } else {
      if (!p.jvp)
        throw std::logic_error("[jvp] primitive '" + p.name + "' has no differentiation rule");
      JvpResult r = p.jvp(x, t, params);
      outs = std::move(r.primals_out);
      tangents = std::move(r.tangents_out);
    }
    tangents.resize(outs.size());
    std::vector<Array> duals;
    for (size_t i = 0; i < outs.size(); ++i)
      duals.push_back(dual(std::move(outs[i]), std::move(tangents[i])));
    return duals;
  }
  const char* transformation_name() const override { return "jvp"; }

 private:
  std::vector<std::pair<Array, Array>> values_;
};

// jax.jvp(f, (x,), (t,)) for f of one operand and one result, with t instantiated.
JvpResult jvp_of(const std::function<Array(DualTrace&, const Array&)>& f, const Array& x,
                 const Array& t) {
  auto trace = std::make_shared<DualTrace>();
  Array in = trace->dual(x, instantiate_zero(t, aval_of(x)));
  auto [primal, tangent] = trace->split(f(*trace, in));
  trace->finish();
  return JvpResult{{primal}, {tangent}};
}

// ---- reductions ---------------------------------------------------------------------------------
Array reduce_sum_transpose(const Array& ct, const AbstractValue& operand, const Params& p) {
  const Ints dims = remaining(operand.shape.ndim(), p.get_ints("axes"));
  return broadcast_or_forward(ct, operand.shape, dims, operand.sharding);
}

// lax.reshape(x, new_shape, dimensions=perm). spmd's reshape takes dimensions=None only, so the
// permutation is its own transpose.
Array permute_and_reshape(const Array& x, const Ints& perm, const Shape& new_shape) {
  Array permuted = lax::transpose(x, perm);
  return lax::reshape(permuted, new_shape);
}

// _reduce_prod_tree: halves multiplied pairwise, an odd half padded with 1.
Array reduce_prod_tree(const Array& x, const Array& one) {
  Array acc = x;
  while (acc.shape()[0] > 1) {
    const int64_t m = acc.shape()[0], m1 = (m + 1) / 2;
    Array lo = lax::slice_in_dim(acc, 0, m1, 1, 0);
    Array hi = lax::slice_in_dim(acc, m1, m, 1, 0);
    if (m - m1 != m1) {
      std::vector<PadConfig> config(size_t(hi.ndim()));
      config[0] = PadConfig{0, 1, 0};
      hi = lax::pad(hi, one, config);
    }
    acc = lax::mul(lo, hi);
  }
  return acc;
}

// JAX's _reduce_prod_jvp_rule: the reduced axes moved to the front and flattened, then the tree
// of products differentiated as it goes.
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
  const Array one = const_of(x[0], 1);
  bool empty = false;
  JvpResult r = jvp_of(
      [&](DualTrace&, const Array& in) {
        Array acc = reduce_prod_tree(in, one);
        empty = acc.shape()[0] == 0;
        return empty ? acc : lax::squeeze(acc, {0});
      },
      primal, tangent);
  if (!empty) return r;
  Array ones = broadcast_or_forward(one, Shape(kept_shape), {});
  Array zeros = strong_zeros(Shape(kept_shape), x[0].dtype());
  return JvpResult{{ones}, {zeros}};
}

// JAX's _reduce_chooser_jvp_rule (reduce_max, reduce_min): the tangent averaged over the
// locations equal to the result.
JvpRule chooser_jvp(const Primitive& prim) {
  return [&prim](std::span<const Array> x, std::span<const Array> t, const Params& p) {
    Array ans = bind1(prim, x, p);
    const Ints& axes = p.get_ints("axes");
    std::vector<int64_t> kept_dims;
    for (int d = 0; d < x[0].ndim(); ++d)
      kept_dims.push_back(std::count(axes.begin(), axes.end(), d) ? 1 : x[0].shape()[d]);
    Array expanded = lax::reshape(ans, Shape(kept_dims));
    Array equal = lax::eq(x[0], expanded);
    Array locations = ops::convert(equal, t[0].dtype(), false);
    Array counts = lax::reduce_sum(locations, axes);
    Array chosen = lax::mul(t[0], locations);
    Array total = lax::reduce_sum(chosen, axes);
    Array tangent = lax::div(total, counts);
    return JvpResult{{ans}, {tangent}};
  };
}

// ---- cumulative scans ---------------------------------------------------------------------------
using Combine = std::function<Array(const Array&, const Array&)>;

// associative_scan's _interleave: a's elements at even positions, b's at odd ones.
Array interleave(const Array& a, const Array& b, int axis) {
  const bool same = a.shape()[axis] == b.shape()[axis];
  std::vector<PadConfig> config_a(size_t(a.ndim())), config_b(size_t(b.ndim()));
  config_a[size_t(axis)] = PadConfig{0, same ? 1 : 0, 1};
  config_b[size_t(axis)] = PadConfig{1, same ? 0 : 1, 1};
  Array spread_a = lax::pad(a, const_of(a, 0), config_a);
  Array spread_b = lax::pad(b, const_of(b, 0), config_b);
  if (is_bool(a.dtype())) return lax::bitwise_or(spread_a, spread_b);
  return lax::add(spread_a, spread_b);
}

// associative_scan's _scan: combine adjacent pairs, scan those recursively (the odd results),
// then combine them with the remaining elements (the even results) and interleave.
Array associative_scan(const Array& elems, const Combine& combine, int axis) {
  const int64_t n = elems.shape()[axis];
  if (n < 2) return elems;
  Array firsts = lax::slice_in_dim(elems, 0, n - 1, 2, axis);
  Array seconds = lax::slice_in_dim(elems, 1, n, 2, axis);
  Array reduced = combine(firsts, seconds);
  Array odd = associative_scan(reduced, combine, axis);
  Array even;
  if (n % 2 == 0) {
    Array head = lax::slice_in_dim(odd, 0, odd.shape()[axis] - 1, 1, axis);
    Array rest = lax::slice_in_dim(elems, 2, n, 2, axis);
    even = combine(head, rest);
  } else {
    Array rest = lax::slice_in_dim(elems, 2, n, 2, axis);
    even = combine(odd, rest);
  }
  Array first = lax::slice_in_dim(elems, 0, 1, 1, axis);
  Array joined = lax::concatenate({first, even}, axis);
  return interleave(joined, odd, axis);
}

// jax.lax.logaddexp's _replace_inf: zeros where x is +inf.
Array replace_inf(const Array& x) {
  Array inf = const_of(x, std::numeric_limits<double>::infinity());
  Array is_inf = lax::eq(x, inf);
  Array zeros = zeros_like_aval(aval_of(x));
  return lax::select_n(is_inf, {x, zeros});
}

// logaddexp is a custom_jvp function in JAX: its primal is computed without tangents, then its
// own jvp rule gives the tangent. (JAX stages the primal inside a custom_jvp_call; here its
// equations are inlined.)
Array logaddexp(DualTrace& trace, const Array& a, const Array& b) {
  auto [x1, t1_or_zero] = trace.split(a);
  auto [x2, t2_or_zero] = trace.split(b);
  const Array t1 = instantiate_zero(t1_or_zero, aval_of(x1));
  const Array t2 = instantiate_zero(t2_or_zero, aval_of(x2));
  Array amax = lax::max(x1, x2);
  Array delta = lax::sub(x1, x2);
  Array is_nan = lax::ne(delta, delta);
  Array plain = lax::add(x1, x2);
  Array magnitude = spmd::abs(delta);
  Array negated = spmd::negative(magnitude);
  Array decay = spmd::exp(negated);
  Array correction = spmd::log1p(decay);
  Array shifted = lax::add(amax, correction);
  Array out = lax::select_n(is_nan, {shifted, plain});
  // The tangent: t_i · exp(x_i - out), with +inf replaced by 0 so inf - inf gives no NaN.
  auto part = [&](const Array& t, const Array& x) {
    Array xi = replace_inf(x);
    Array oi = replace_inf(out);
    Array diff = lax::sub(xi, oi);
    Array scale = spmd::exp(diff);
    return lax::mul(t, scale);
  };
  Array part1 = part(t1, x1);
  Array part2 = part(t2, x2);
  return trace.dual(out, lax::add(part1, part2));
}

// JAX's _cumulative_jvp_rule: jax.jvp of associative_scan with the scan's combining function.
JvpRule cumulative_jvp(Array (*combine)(DualTrace&, const Array&, const Array&)) {
  return [combine](std::span<const Array> x, std::span<const Array> t, const Params& p) {
    const int axis = int(p.get_int("axis"));
    const bool reverse = p.get<bool>("reverse");
    auto scan = [&](DualTrace& trace, const Array& in) {
      Combine bound = [&](const Array& a, const Array& b) { return combine(trace, a, b); };
      Array elems = reverse ? lax::rev(in, {axis}) : in;
      Array out = associative_scan(elems, bound, axis);
      return reverse ? lax::rev(out, {axis}) : out;
    };
    return jvp_of(scan, x[0], t[0]);
  };
}

Array combine_mul(DualTrace&, const Array& a, const Array& b) {
  return lax::mul(a, b);
}
Array combine_max(DualTrace&, const Array& a, const Array& b) {
  return lax::max(a, b);
}
Array combine_min(DualTrace&, const Array& a, const Array& b) {
  return lax::min(a, b);
}

Array cumsum_transpose(const Array& ct, const AbstractValue&, const Params& p) {
  return lax::cumsum(ct, p.get_int("axis"), !p.get<bool>("reverse"));
}

// ---- sharding ---------------------------------------------------------------------------------
// The reducer's rule with `combiner` completing the partial results of devices that hold parts
// of a reduced dim, for operands of the dtypes on which it computes the same reduction; on
// others the reduced dims need replication.
ShardingRuleFn completed_by(const Primitive& (*combiner)(), bool (*exact)(DType)) {
  return [combiner, exact](std::span<const AbstractValue> in, std::span<const AbstractValue> out,
                           const Params& params) {
    ShardingRule rule = reducer_sharding(in, out, params);
    if (exact(in[0].dtype)) rule.combiner = &combiner();
    return rule;
  };
}

bool any_dtype(DType) {
  return true;
}
// and and or of bools are min and max; of integers they are bitwise.
bool bools(DType t) {
  return is_bool(t);
}

}  // namespace

void register_reduce_primitives(PrimitiveRegistry& r) {
  Primitive& reduce_sum = define_reduce(r, "reduce_sum", ReduceOp::sum, Accepts::numbers);
  deflinear(reduce_sum, unary_transpose(reduce_sum_transpose));
  define_reduce(r, "reduce_prod", ReduceOp::prod, Accepts::numbers).jvp = reduce_prod_jvp;
  Primitive& reduce_max = define_reduce(r, "reduce_max", ReduceOp::max, Accepts::any);
  reduce_max.jvp = chooser_jvp(reduce_max);
  Primitive& reduce_min = define_reduce(r, "reduce_min", ReduceOp::min, Accepts::any);
  reduce_min.jvp = chooser_jvp(reduce_min);
  Primitive& reduce_and = define_reduce(r, "reduce_and", ReduceOp::bit_and, Accepts::ints_and_bool);
  reduce_and.non_differentiable = true;
  Primitive& reduce_or = define_reduce(r, "reduce_or", ReduceOp::bit_or, Accepts::ints_and_bool);
  reduce_or.non_differentiable = true;
  define_reduce(r, "reduce_xor", ReduceOp::bit_xor, Accepts::ints_and_bool).non_differentiable =
      true;
  define_arg_reduce(r, "argmax", ArgReduceOp::argmax).non_differentiable = true;
  define_arg_reduce(r, "argmin", ArgReduceOp::argmin).non_differentiable = true;
  deflinear(define_scan(r, "cumsum", ScanOp::sum), unary_transpose(cumsum_transpose));
  define_scan(r, "cumprod", ScanOp::prod).jvp = cumulative_jvp(combine_mul);
  define_scan(r, "cummax", ScanOp::max).jvp = cumulative_jvp(combine_max);
  define_scan(r, "cummin", ScanOp::min).jvp = cumulative_jvp(combine_min);
  define_scan(r, "cumlogsumexp", ScanOp::logsumexp).jvp = cumulative_jvp(logaddexp);

  reduce_sum.sharding_rule = completed_by(collectives::psum_primitive, any_dtype);
  reduce_max.sharding_rule = completed_by(collectives::pmax_primitive, any_dtype);
  reduce_min.sharding_rule = completed_by(collectives::pmin_primitive, any_dtype);
  reduce_and.sharding_rule = completed_by(collectives::pmin_primitive, bools);
  reduce_or.sharding_rule = completed_by(collectives::pmax_primitive, bools);
}

}  // namespace spmd

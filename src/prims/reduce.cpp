// Primitive family: reductions (reduce_sum, reduce_prod, reduce_max, reduce_min, reduce_and,
// reduce_or, reduce_xor), argmax/argmin and the cumulative scans (cumsum, cumprod, cummax,
// cummin, cumlogsumexp), with JAX's names, params and type rules.
#include "prims/families.h"
#include "prims/primitive.h"

#include <spmd/error.h>

#include "backends/cpu/reduce.h"

namespace spmd {
namespace {

using cpu::ArgReduceOp;
using cpu::ReduceOp;
using cpu::ScanOp;

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

void define_reduce(PrimitiveRegistry& r, const char* name, ReduceOp op, Accepts accepts) {
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
}

void define_arg_reduce(PrimitiveRegistry& r, const char* name, ArgReduceOp op) {
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
}

void define_scan(PrimitiveRegistry& r, const char* name, ScanOp op) {
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
}

}  // namespace

void register_reduce_primitives(PrimitiveRegistry& r) {
  define_reduce(r, "reduce_sum", ReduceOp::sum, Accepts::numbers);
  define_reduce(r, "reduce_prod", ReduceOp::prod, Accepts::numbers);
  define_reduce(r, "reduce_max", ReduceOp::max, Accepts::any);
  define_reduce(r, "reduce_min", ReduceOp::min, Accepts::any);
  define_reduce(r, "reduce_and", ReduceOp::bit_and, Accepts::ints_and_bool);
  define_reduce(r, "reduce_or", ReduceOp::bit_or, Accepts::ints_and_bool);
  define_reduce(r, "reduce_xor", ReduceOp::bit_xor, Accepts::ints_and_bool);
  define_arg_reduce(r, "argmax", ArgReduceOp::argmax);
  define_arg_reduce(r, "argmin", ArgReduceOp::argmin);
  define_scan(r, "cumsum", ScanOp::sum);
  define_scan(r, "cumprod", ScanOp::prod);
  define_scan(r, "cummax", ScanOp::max);
  define_scan(r, "cummin", ScanOp::min);
  define_scan(r, "cumlogsumexp", ScanOp::logsumexp);
}

}  // namespace spmd

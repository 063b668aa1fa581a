// Shared op-layer helpers: promotion, rank broadcasting, axes and constants.
#include "ops/op_util.h"

#include "core/trace.h"

#include <spmd/lax.h>
#include <spmd/ops.h>

#include "backends/cpu/convert.h"

#include <algorithm>

namespace spmd::ops {

std::string prefix(const char* api) {
  std::string s = "[";  // appended piecewise: GCC 12 warns falsely on "[" + std::string
  s += api;
  s += "] ";
  return s;
}

Array convert(const Array& x, DType t, bool weak_type) {
  const AbstractValue& a = aval_of(x);
  if (a.dtype == t && a.weak_type == weak_type) return x;
  // A concrete scalar (a C++ number) converts now, as JAX converts Python scalars with NumPy: it
  // enters traced programs as a literal of the new type, not as a staged conversion.
  if (is_concrete(x) && a.shape.ndim() == 0) {
    CurrentTraceScope eager(nullptr);
    return apply("convert_element_type", {x},
                 Params{{"new_dtype", t}, {"weak_type", weak_type}, {"sharding", NoneParam{}}});
  }
  return apply("convert_element_type", {x},
               Params{{"new_dtype", t}, {"weak_type", weak_type}, {"sharding", NoneParam{}}});
}

Array as_array(const Array& x) {
  if (!x.valid() || !x.impl()->scalar_literal) return x;
  auto impl = std::make_shared<ArrayImpl>(*x.impl());
  impl->scalar_literal = false;
  return Array(std::move(impl));
}

std::vector<Array> promote_dtypes(const std::vector<Array>& xs) {
  if (xs.empty()) return xs;
  PromotedType p{aval_of(xs[0]).dtype, aval_of(xs[0]).weak_type};
  for (size_t i = 1; i < xs.size(); ++i) {
    const AbstractValue& a = aval_of(xs[i]);
    p = promote_weak(p.dtype, p.weak, a.dtype, a.weak_type);
  }
  std::vector<Array> out;
  out.reserve(xs.size());
  for (const Array& x : xs) out.push_back(as_array(convert(x, p.dtype, p.weak)));
  return out;
}

std::vector<Array> promote_dtypes_inexact(const std::vector<Array>& xs) {
  std::vector<Array> out = promote_dtypes(xs);
  for (Array& x : out) x = promote_inexact(x);
  return out;
}

Array promote_inexact(const Array& x) {
  const AbstractValue& a = aval_of(x);
  if (is_floating(a.dtype)) return x;
  // JAX's to_inexact_dtype: only 64-bit integers become float64 (with x64); the rest float32.
  DType t = a.weak_type ? default_float_dtype()
                        : canonicalize_dtype(itemsize(a.dtype) == 8 ? float64 : float32);
  return convert(x, t, a.weak_type);
}

Shape broadcast_shapes(const char* api, const std::vector<Shape>& shapes) {
  int ndim = 0;
  for (const Shape& s : shapes) ndim = std::max(ndim, s.ndim());
  std::vector<int64_t> out(size_t(ndim), 1);
  for (const Shape& s : shapes) {
    for (int i = 0; i < s.ndim(); ++i) {
      int64_t& o = out[size_t(ndim - s.ndim() + i)];
      int64_t d = s[i];
      if (d == o || d == 1) continue;
      if (o != 1) {
        std::string msg = prefix(api);
        msg += "operands could not be broadcast together with shapes";
        for (const Shape& t : shapes) {
          msg += ' ';
          msg += t.str();
        }
        throw ShapeError(msg);
      }
      o = d;
    }
  }
  return Shape(out);
}

std::vector<Array> promote_shapes(const char* api, const std::vector<Array>& xs) {
  std::vector<Shape> shapes;
  for (const Array& x : xs) shapes.push_back(aval_of(x).shape);
  Shape result = broadcast_shapes(api, shapes);
  std::vector<Array> out;
  out.reserve(xs.size());
  for (const Array& x : xs) {
    const Shape& s = aval_of(x).shape;
    if (s.ndim() == 0 || s.ndim() == result.ndim()) {
      out.push_back(x);
      continue;
    }
    // Leading size-1 dims, as jnp does; the primitive broadcasts size-1 dims itself.
    std::vector<int64_t> dims(size_t(result.ndim() - s.ndim()), 1);
    dims.insert(dims.end(), s.begin(), s.end());
    std::vector<int64_t> bdims;
    for (int i = 0; i < s.ndim(); ++i) bdims.push_back(result.ndim() - s.ndim() + i);
    out.push_back(lax::broadcast_in_dim(x, Shape(dims), bdims));
  }
  return out;
}

Array broadcast_to(const char* api, const Array& x, const Shape& shape) {
  const Shape& s = aval_of(x).shape;
  if (s == shape) return x;
  AbstractValue{shape, aval_of(x).dtype}.checked_nbytes(api);
  // Each of x's dims, aligned with the trailing dims of `shape`, is 1 or the same size.
  bool fits = s.ndim() <= shape.ndim();
  for (int i = 0; fits && i < s.ndim(); ++i)
    fits = s[i] == 1 || s[i] == shape[shape.ndim() - s.ndim() + i];
  if (!fits)
    throw ShapeError(prefix(api) + "cannot broadcast an array of shape " + s.str() + " to shape " +
                     shape.str());
  std::vector<int64_t> bdims;
  for (int i = 0; i < s.ndim(); ++i) bdims.push_back(shape.ndim() - s.ndim() + i);
  return lax::broadcast_in_dim(x, shape, bdims);
}

Array wrap_negative(const Array& indices, int64_t size) {
  Array idx = indices;
  if (itemsize(idx.dtype()) < 4) idx = convert(idx, int32);
  return where(less(idx, 0), add(idx, Array(static_cast<long long>(size))), idx);
}

int canonicalize_axis(const char* api, int axis, int ndim) {
  return normalize_axis(axis, ndim, api);
}

std::vector<int64_t> canonicalize_axes(const char* api, const Axes& axes, int ndim) {
  std::vector<int64_t> out;
  if (axes.empty()) {
    for (int i = 0; i < ndim; ++i) out.push_back(i);
    return out;
  }
  for (int a : axes) out.push_back(normalize_axis(a, ndim, api));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    throw ValueError(prefix(api) +
                     "duplicate value in 'axis': " + Shape(axes.begin(), axes.end()).str());
  return out;
}

Array scalar(double value, DType dtype, bool weak) {
  Array out = make_uninitialized(AbstractValue{Shape{}, dtype, weak});
  cpu::convert(&value, DType::float64, out.impl()->buffer->data(), dtype, 1);
  return out;
}

Array constant_like(const Array& x, double value) {
  const AbstractValue& a = aval_of(x);
  return scalar(value, a.dtype, a.weak_type);
}

Array apply(const char* prim, std::initializer_list<Array> inputs, const Params& params) {
  return bind1(primitive(prim), std::span<const Array>(inputs.begin(), inputs.size()), params);
}

Array apply(const char* prim, const std::vector<Array>& inputs, const Params& params) {
  return bind1(primitive(prim), inputs, params);
}

std::vector<Array> apply_multi(const char* prim, const std::vector<Array>& inputs,
                               const Params& params) {
  return spmd::bind(primitive(prim), inputs, params);
}

void require_floating(const char* api, const Array& x) {
  DType t = aval_of(x).dtype;
  if (!is_floating(t))
    throw TypeError(prefix(api) + "expected a floating-point array, got " +
                    std::string(dtype_name(t)));
}

void require_sharding(const char* api, const Sharding* sharding) {
  if (!sharding) throw ValueError(prefix(api) + "expected a sharding, got a null pointer");
}

void require_integer_or_bool(const char* api, const Array& x) {
  DType t = aval_of(x).dtype;
  if (is_floating(t))
    throw TypeError(prefix(api) + "expected an integer or boolean array, got " +
                    std::string(dtype_name(t)));
}

}  // namespace spmd::ops

// jnp-level linear algebra (dot, matmul, vdot, inner, outer, tensordot) and lax.dot_general /
// lax.dot. Each picks dimension numbers as jax.numpy does, asks dot_general for the promoted
// result type and converts to it, so values and jaxprs follow JAX.
#include <spmd/lax.h>
#include <spmd/ops.h>

#include "ops/einsum_precision.h"
#include "ops/op_util.h"

#include <algorithm>
#include <numeric>

namespace spmd {
namespace {

using Dims = std::vector<int64_t>;

std::string shapes_str(const Array& a, const Array& b) {
  return a.shape().str() + " and " + b.shape().str();
}

// JAX's result_type(a, b) with its weak flag: the dtype jnp's contractions produce.
PromotedType result_type(const Array& a, const Array& b) {
  return promote_weak(a.dtype(), a.weak_type(), b.dtype(), b.weak_type());
}

// A weakly typed integer operand (a C++ int) takes the promoted integer type first: dot_general
// would otherwise pick its int32 over the array's narrower type and then refuse the narrower
// preferred_element_type (JAX raises for jnp.dot(int8_array, 3)). Every other mix goes to
// dot_general as it is, as in JAX, which converts the operands itself.
std::pair<Array, Array> promote_integer_operands(const Array& a, const Array& b, PromotedType t) {
  if (is_floating(t.dtype)) return {a, b};
  auto fit = [&](const Array& x) {
    return x.weak_type() && x.dtype() != t.dtype ? ops::convert(x, t.dtype, true) : x;
  };
  return {fit(a), fit(b)};
}

// dot_general at the promoted type, then JAX's final convert_element_type (weak flag).
Array contract(const Array& a, const Array& b, const lax::DotDimensionNumbers& dims,
               const std::optional<NamedSharding>& out_sharding = std::nullopt,
               const std::optional<lax::DotPrecision>& precision = std::nullopt) {
  const PromotedType t = result_type(a, b);
  auto [x, y] = promote_integer_operands(a, b, t);
  return ops::convert(lax::dot_general(x, y, dims, t.dtype, out_sharding, precision), t.dtype,
                      t.weak);
}

// dot_general's result shape: batch dims, then lhs free dims, then rhs free dims.
Shape dot_general_shape(const Array& lhs, const Array& rhs, const lax::DotDimensionNumbers& d) {
  std::vector<int64_t> dims;
  for (int64_t i : d.lhs_batch) dims.push_back(lhs.shape()[int(i)]);
  for (int i = 0; i < lhs.ndim(); ++i)
    if (!std::count(d.lhs_batch.begin(), d.lhs_batch.end(), i) &&
        !std::count(d.lhs_contracting.begin(), d.lhs_contracting.end(), i))
      dims.push_back(lhs.shape()[i]);
  for (int i = 0; i < rhs.ndim(); ++i)
    if (!std::count(d.rhs_batch.begin(), d.rhs_batch.end(), i) &&
        !std::count(d.rhs_contracting.begin(), d.rhs_contracting.end(), i))
      dims.push_back(rhs.shape()[i]);
  return Shape(dims);
}

Dims iota_dims(int64_t begin, int64_t end) {
  Dims d;
  for (int64_t i = begin; i < end; ++i) d.push_back(i);
  return d;
}

// NumPy's alignment message: "shapes (2, 3) and (4, 5) not aligned: 3 (dim 1) != 4 (dim 0)".
void check_aligned(const char* api, const Array& a, int64_t da, const Array& b, int64_t db) {
  if (a.shape()[int(da)] == b.shape()[int(db)]) return;
  throw ShapeError(ops::prefix(api) + "shapes " + shapes_str(a, b) +
                   " not aligned: " + std::to_string(a.shape()[int(da)]) + " (dim " +
                   std::to_string(da) + ") != " + std::to_string(b.shape()[int(db)]) + " (dim " +
                   std::to_string(db) + ")");
}

// ---- matmul -----------------------------------------------------------------------------------
// JAX's plan for matmul: which size-1 batch dims to squeeze, which batch dims dot_general
// batches over, and how to permute its output back into broadcast order.
struct MatmulPlan {
  Dims a_squeeze, b_squeeze, both_squeeze, a_batch, b_batch, perm;
};

MatmulPlan plan_matmul(const Array& a, const Array& b) {
  const bool a_mat = a.ndim() > 1, b_mat = b.ndim() > 1;
  const int na = a_mat ? a.ndim() - 2 : 0, nb = b_mat ? b.ndim() - 2 : 0;
  const int n = std::max(na, nb);
  MatmulPlan p;
  Dims idx_batch, idx_a, idx_b;
  for (int i = 0; i < n; ++i) {
    const int ia = i - (n - na), ib = i - (n - nb);
    const int64_t da = ia >= 0 ? a.shape()[ia] : -1, db = ib >= 0 ? b.shape()[ib] : -1;
    const int64_t a_pos = int64_t(idx_batch.size() + idx_a.size());
    const int64_t b_pos = int64_t(idx_batch.size() + idx_b.size());
    if (da < 0) {
      idx_b.push_back(i);
    } else if (db < 0) {
      idx_a.push_back(i);
    } else if (da == 1 && db == 1) {
      p.a_squeeze.push_back(a_pos + int64_t(p.a_squeeze.size()));
      p.b_squeeze.push_back(b_pos + int64_t(p.b_squeeze.size()));
      p.both_squeeze.push_back(i);
    } else if (da == 1) {
      idx_b.push_back(i);
      p.a_squeeze.push_back(a_pos + int64_t(p.a_squeeze.size()));
    } else if (db == 1) {
      idx_a.push_back(i);
      p.b_squeeze.push_back(b_pos + int64_t(p.b_squeeze.size()));
    } else if (da == db) {
      p.a_batch.push_back(a_pos);
      p.b_batch.push_back(b_pos);
      idx_batch.push_back(i);
    } else {
      throw ShapeError("[matmul] incompatible shapes for matmul arguments: " + shapes_str(a, b) +
                       " (batch dimensions " + std::to_string(da) + " and " + std::to_string(db) +
                       " cannot be broadcast)");
    }
  }
  if (a_mat) idx_a.push_back(n);
  if (b_mat) idx_b.push_back(n + (a_mat ? 1 : 0));
  Dims order = idx_batch;
  order.insert(order.end(), idx_a.begin(), idx_a.end());
  order.insert(order.end(), idx_b.begin(), idx_b.end());
  p.perm.resize(order.size());
  std::iota(p.perm.begin(), p.perm.end(), int64_t(0));
  std::sort(p.perm.begin(), p.perm.end(),
            [&](int64_t x, int64_t y) { return order[size_t(x)] < order[size_t(y)]; });
  return p;
}

bool is_identity(const Dims& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != int64_t(i)) return false;
  return true;
}

void check_matmul_operands(const Array& a, const Array& b) {
  for (int i = 0; i < 2; ++i) {
    const Array& x = i == 0 ? a : b;
    if (x.ndim() < 1)
      throw ValueError("[matmul] input operand " + std::to_string(i) +
                       " must have ndim at least 1, but it has ndim " + std::to_string(x.ndim()));
  }
  const int64_t ka = a.shape()[a.ndim() - 1];
  const int kb_axis = b.ndim() == 1 ? 0 : b.ndim() - 2;
  const int64_t kb = b.shape()[kb_axis];
  if (ka != kb)
    throw ShapeError("[matmul] input operand 1 has a mismatch in its core dimension 0, with " +
                     std::string("gufunc signature (n?,k),(k,m?)->(n?,m?) (size ") +
                     std::to_string(kb) + " is different from " + std::to_string(ka) +
                     "), got shapes " + shapes_str(a, b));
}

}  // namespace

// ---- lax ----------------------------------------------------------------------------------------
namespace lax {

Array dot_general(const Array& lhs, const Array& rhs, const DotDimensionNumbers& dimension_numbers,
                  std::optional<DType> preferred_element_type, const OutSharding& out_sharding_arg,
                  std::optional<DotPrecision> precision) {
  const std::optional<NamedSharding> out_sharding = out_sharding_arg.resolve("dot_general");
  ParamValue precision_value = NoneParam{};
  if (precision) precision_value = object_param(*precision);
  ParamValue preferred = NoneParam{};
  if (preferred_element_type) preferred = canonicalize_dtype(*preferred_element_type);
  ParamValue out = NoneParam{};
  if (out_sharding)
    out = ops::out_sharding_value("dot_general", out_sharding,
                                  dot_general_shape(lhs, rhs, dimension_numbers));
  Array result = ops::apply("dot_general", {lhs, rhs},
                            Params{{"dimension_numbers", dimension_numbers},
                                   {"precision", precision_value},
                                   {"preferred_element_type", preferred},
                                   {"out_sharding", out}});
  return ops::with_out_sharding(result, out_sharding, {lhs, rhs});
}

Array dot(const Array& lhs, const Array& rhs, std::optional<DType> preferred_element_type,
          const OutSharding& out_sharding_arg) {
  const std::optional<NamedSharding> out_sharding = out_sharding_arg.resolve("dot");
  const int nl = lhs.ndim(), nr = rhs.ndim();
  if (nl < 1 || nl > 2 || nr < 1 || nr > 2 || lhs.shape()[nl - 1] != rhs.shape()[0])
    throw ShapeError("[lax.dot] expects an un-batched matrix-matrix, matrix-vector or " +
                     std::string("vector-vector product with matching inner dimensions (use ") +
                     "lax::dot_general for anything else), got shapes " + shapes_str(lhs, rhs));
  return dot_general(lhs, rhs, DotDimensionNumbers{{nl - 1}, {0}, {}, {}}, preferred_element_type,
                     out_sharding);
}

}  // namespace lax

// ---- jnp ----------------------------------------------------------------------------------------
Array dot(const Array& a, const Array& b, const OutSharding& out_sharding_arg,
          const EinsumPrecision& precision) {
  const std::optional<NamedSharding> out_sharding = out_sharding_arg.resolve("dot");
  lax::DotDimensionNumbers dims;
  if (a.ndim() > 0 && b.ndim() > 0) {
    const int64_t db = b.ndim() == 1 ? 0 : b.ndim() - 2;
    check_aligned("dot", a, a.ndim() - 1, b, db);
    dims.lhs_contracting = {a.ndim() - 1};
    dims.rhs_contracting = {db};
  }
  return contract(a, b, dims, out_sharding, ops::canonicalize_precision(precision, "dot"));
}

// As jnp.matmul, out_sharding is the sharding of the dot_general inside.
Array matmul(const Array& a, const Array& b, const OutSharding& out_sharding_arg,
             const EinsumPrecision& precision) {
  const std::optional<NamedSharding> out_sharding = out_sharding_arg.resolve("matmul");
  check_matmul_operands(a, b);
  const PromotedType t = result_type(a, b);
  auto [x, y] = promote_integer_operands(a, b, t);
  const MatmulPlan p = plan_matmul(x, y);
  if (!p.a_squeeze.empty()) x = lax::squeeze(x, p.a_squeeze);
  if (!p.b_squeeze.empty()) y = lax::squeeze(y, p.b_squeeze);
  const int b_mat = b.ndim() > 1 ? 1 : 0;
  Array out = lax::dot_general(
      x, y, lax::DotDimensionNumbers{{x.ndim() - 1}, {y.ndim() - 1 - b_mat}, p.a_batch, p.b_batch},
      t.dtype, out_sharding, ops::canonicalize_precision(precision, "matmul"));
  if (!is_identity(p.perm)) out = lax::transpose(out, p.perm);
  if (!p.both_squeeze.empty()) out = lax::expand_dims(out, p.both_squeeze);
  return ops::convert(out, t.dtype, t.weak);
}

Array vdot(const Array& a, const Array& b) {
  if (a.size() != b.size())
    throw ShapeError("[vdot] the arrays must have the same number of elements, got shapes " +
                     shapes_str(a, b));
  return dot(ravel(a), ravel(b));
}

Array inner(const Array& a, const Array& b) {
  if (a.ndim() == 0 || b.ndim() == 0) return multiply(a, b);
  check_aligned("inner", a, a.ndim() - 1, b, b.ndim() - 1);
  return contract(a, b, lax::DotDimensionNumbers{{a.ndim() - 1}, {b.ndim() - 1}, {}, {}});
}

Array outer(const Array& a, const Array& b) {
  auto p = ops::promote_dtypes({a, b});
  Array x = ravel(p[0]), y = ravel(p[1]);
  x = lax::broadcast_in_dim(x, Shape{x.size(), 1}, {0});
  y = lax::broadcast_in_dim(y, Shape{1, y.size()}, {1});
  return multiply(x, y);
}

Array tensordot(const Array& a, const Array& b, int axes) {
  if (axes < 0)
    throw ValueError("[tensordot] the number of axes must be non-negative, got " +
                     std::to_string(axes));
  if (axes > std::min(a.ndim(), b.ndim()))
    throw ValueError("[tensordot] number of tensordot axes (axes " + std::to_string(axes) +
                     ") exceeds input ranks (" + shapes_str(a, b) + ")");
  const Dims ca = iota_dims(a.ndim() - axes, a.ndim()), cb = iota_dims(0, axes);
  for (int i = 0; i < axes; ++i)
    if (a.shape()[int(ca[size_t(i)])] != b.shape()[int(cb[size_t(i)])])
      throw ShapeError("[tensordot] shape mismatch for sum: the last " + std::to_string(axes) +
                       " dims of a and the first " + std::to_string(axes) +
                       " dims of b must agree, got shapes " + shapes_str(a, b));
  return contract(a, b, lax::DotDimensionNumbers{ca, cb, {}, {}});
}

}  // namespace spmd

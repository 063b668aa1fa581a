// Helpers shared by the transformation rules.
#include "prims/rule_util.h"

#include <spmd/error.h>
#include <spmd/lax.h>

#include "backends/cpu/elementwise.h"
#include "ops/op_util.h"
#include "prims/families.h"
#include "prims/primitive.h"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace spmd {

Array zeros_like_aval(const AbstractValue& aval) {
  Array zero = ops::scalar(0.0, aval.dtype, aval.weak_type);
  if (aval.shape.ndim() == 0) return zero;
  return lax::broadcast_in_dim(zero, aval.shape, {});
}

Array empty_like_aval(const AbstractValue& aval) {
  Array empty = spmd::bind1(
      primitive("empty2"), std::span<const Array>{},
      Params{{"dtype", aval.dtype}, {"memory_space", std::string("MemorySpace.Device")}});
  // Inside shard_map the placeholder varies over the same mesh axes as the value it stands for.
  if (!aval.vma.empty())
    empty = spmd::bind1(primitive("pvary"), {empty}, Params{{"axes", aval.vma}});
  if (aval.shape.ndim() == 0) return empty;
  return lax::broadcast_in_dim(empty, aval.shape, {});
}

Array instantiate_zero(const Array& tangent, const AbstractValue& aval) {
  return is_zero(tangent) ? zeros_like_aval(aval) : tangent;
}

Array add_cotangents(const Array& a, const Array& b) {
  if (is_zero(a)) return b;
  if (is_zero(b)) return a;
  return ops::apply("add_any", {a, b});
}

JvpResult linear_jvp(const Primitive& p, std::span<const Array> x, std::span<const Array> t,
                     const Params& params) {
  JvpResult r;
  r.primals_out = spmd::bind(p, x, params);
  if (std::all_of(t.begin(), t.end(), is_zero)) {
    r.tangents_out.resize(r.primals_out.size());
    return r;
  }
  std::vector<Array> tangents;
  for (size_t i = 0; i < x.size(); ++i) tangents.push_back(instantiate_zero(t[i], aval_of(x[i])));
  r.tangents_out = spmd::bind(p, tangents, params);
  return r;
}

Array move_batch_dim(const Array& x, int from, int to, int64_t axis_size) {
  if (from == to) return x;
  if (from == kNotBatched) {
    std::vector<int64_t> shape(x.shape().begin(), x.shape().end());
    shape.insert(shape.begin() + to, axis_size);
    std::vector<int64_t> dims;
    for (int i = 0; i < x.ndim(); ++i) dims.push_back(i < to ? i : i + 1);
    return lax::broadcast_in_dim(x, Shape(shape), dims);
  }
  std::vector<int64_t> perm(static_cast<size_t>(x.ndim()));
  std::iota(perm.begin(), perm.end(), 0);
  perm.erase(perm.begin() + from);
  perm.insert(perm.begin() + to, from);
  return lax::transpose(x, perm);
}

void deflinear(PrimitiveRegistry& r, const char* name, TransposeRule transpose) {
  Primitive& prim = r.at(name);
  const Primitive* p = &prim;
  prim.jvp = [p](std::span<const Array> x, std::span<const Array> t, const Params& params) {
    return linear_jvp(*p, x, t, params);
  };
  prim.transpose = std::move(transpose);
}

}  // namespace spmd

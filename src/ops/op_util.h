// Helpers shared by the op layer (src/ops/*.cpp): argument checks, JAX's implicit promotion
// and rank broadcasting, axis canonicalisation and typed constants. Ops call these, then bind.
#pragma once

#include <spmd/array.h>
#include <spmd/error.h>
#include <spmd/sharding.h>

#include "core/array_impl.h"
#include "prims/primitive.h"

#include <optional>
#include <string>
#include <vector>

namespace spmd::ops {

// "[api] " prefix for error messages.
std::string prefix(const char* api);

// JAX's check that a sharding passed to `api` (reshard, an out_sharding) names Explicit axes
// only: ValueError naming the first Auto or Manual axis.
void require_explicit_axes(const char* api, const NamedSharding& sharding);
// An out_sharding argument of `api` as the param that carries it into the primitive: its split
// over the mesh's Explicit axes for a result of shape `shape` (which it must fit); None when
// unset.
ParamValue out_sharding_value(const char* api, const std::optional<NamedSharding>& sharding,
                              const Shape& shape);
// The result of an op given an out_sharding: where its operands' types had no sharding (so no
// mesh puts the computation on devices), it is placed there (reshard), so that it has it in
// every case as in JAX.
Array with_out_sharding(const Array& out, const std::optional<NamedSharding>& sharding,
                        std::initializer_list<Array> operands);
// lax.broadcast_in_dim with its `sharding` param given as a type's sharding (the transposes
// and zeros of a typed value pass its type's, so that the cotangent keeps it, as JAX's do);
// none infers it from the operand.
Array broadcast_in_dim(const Array& x, const Shape& shape, const std::vector<int64_t>& dims,
                       const std::optional<TypeSharding>& sharding);
// lax.reshape and lax.reduce_sum with their out_sharding given as a type's sharding, as the
// transposes pass it; none infers it from the operand.
Array reshape(const Array& x, const Shape& new_sizes, const std::optional<TypeSharding>& sharding);
Array reduce_sum(const Array& x, const std::vector<int64_t>& axes,
                 const std::optional<TypeSharding>& sharding);

// convert_element_type(x, t); a no-op when the dtype and weak type already match.
Array convert(const Array& x, DType t, bool weak_type = false);
// x as jnp converts a Python scalar: a scalar made from a C++ number (ArrayImpl::scalar_literal)
// becomes an ordinary array over the same data; anything else is returned as it is.
Array as_array(const Array& x);
// JAX's promote_dtypes: converts every argument to their common (possibly weak) dtype; scalars
// made from C++ numbers become ordinary arrays (as_array), as jnp's asarray makes them.
std::vector<Array> promote_dtypes(const std::vector<Array>& xs);
// promote_dtypes, then ints/bools to the default float type (jnp.promote_dtypes_inexact).
std::vector<Array> promote_dtypes_inexact(const std::vector<Array>& xs);
Array promote_inexact(const Array& x);
// NumPy broadcasting of shapes; ShapeError naming `api` when incompatible.
Shape broadcast_shapes(const char* api, const std::vector<Shape>& shapes);
// Rank promotion only (JAX's _promote_shapes): lower-rank non-scalars get leading size-1 dims
// via broadcast_in_dim; size-1 dims stay for the primitive to broadcast.
std::vector<Array> promote_shapes(const char* api, const std::vector<Array>& xs);
// Full broadcast to `shape` (broadcast_in_dim), no-op when equal.
Array broadcast_to(const char* api, const Array& x, const Shape& shape);
// jnp's _broadcast_arrays: xs broadcast to their common shape and, on a mesh with Explicit axes,
// to the sharding JAX's lax.broadcast_shardings gives them (each dim split as the operands
// that split it, which must agree), so that the results' types match. ShardingError naming
// `api` when two operands split a dim differently.
std::vector<Array> broadcast_arrays(const char* api, const std::vector<Array>& xs);

// where(i < 0, i + size, i), as jnp's index normalisation. Narrow signed indices are widened
// first so that the sum cannot overflow.
Array wrap_negative(const Array& indices, int64_t size);

// Validated, non-negative, sorted axes; empty `axes` means all of them. Duplicates raise.
std::vector<int64_t> canonicalize_axes(const char* api, const Axes& axes, int ndim);
int canonicalize_axis(const char* api, int axis, int ndim);

// A scalar constant with x's dtype and weak type (lax._const).
Array constant_like(const Array& x, double value);
// A 0-d array of the given dtype.
Array scalar(double value, DType dtype, bool weak = false);

// Applies a primitive by name.
Array apply(const char* prim, std::initializer_list<Array> inputs, const Params& params = {});
Array apply(const char* prim, const std::vector<Array>& inputs, const Params& params = {});
std::vector<Array> apply_multi(const char* prim, const std::vector<Array>& inputs,
                               const Params& params = {});

// Type checks with JAX-style messages.
void require_floating(const char* api, const Array& x);
void require_integer_or_bool(const char* api, const Array& x);
// ValueError "[api] expected a sharding, got a null pointer" for a null shared_ptr<const Sharding>.
void require_sharding(const char* api, const Sharding* sharding);

}  // namespace spmd::ops

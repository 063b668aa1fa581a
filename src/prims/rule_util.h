// Helpers for writing transformation rules (the rule types are in ir/primitive.h). Rules are
// written with spmd operations, so whatever they emit is recorded by the trace that is current
// when they run, and differentiates or batches again.
#pragma once

#include <spmd/array.h>

#include "ir/primitive.h"

#include <functional>
#include <span>
#include <vector>

namespace spmd {

class PrimitiveRegistry;

// ---- helpers shared by rule files ---------------------------------------------------------------
// A concrete or staged zero of the given type (broadcast_in_dim of a 0.0 literal, as JAX's
// zeros_like_aval).
Array zeros_like_aval(const AbstractValue& aval);
// A placeholder of the given type whose value no computation reads (JAX's empty_like_aval: an
// `empty2` scalar broadcast to the shape). spmd fills it with zeros.
Array empty_like_aval(const AbstractValue& aval);
// Replaces a symbolic zero with zeros of `aval`; returns other tangents unchanged.
Array instantiate_zero(const Array& tangent, const AbstractValue& aval);
// JAX's add_any (adds two cotangent contributions; zeros are skipped).
Array add_cotangents(const Array& a, const Array& b);
// JAX's linear_jvp, the jvp of a primitive linear in all its inputs: the primitive on the
// primals, then on the tangents with zeros instantiated (all-zero tangents stay symbolic).
JvpResult linear_jvp(const Primitive& p, std::span<const Array> primals,
                     std::span<const Array> tangents, const Params& params);
// Registers a primitive linear in its inputs: linear_jvp as its jvp, `transpose` as its
// transpose rule.
void deflinear(PrimitiveRegistry& r, const char* name, TransposeRule transpose);
// Moves the batch dimension of x from `from` to `to` (kNotBatched broadcasts to axis_size).
Array move_batch_dim(const Array& x, int from, int to, int64_t axis_size);

// Registration, called once when the primitive registry is built (registry.cpp).
void register_elementwise_ad_rules(PrimitiveRegistry& r);
void register_structural_ad_rules(PrimitiveRegistry& r);
void register_batch_rules(PrimitiveRegistry& r);

}  // namespace spmd

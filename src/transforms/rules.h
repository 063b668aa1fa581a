// Transformation rules attached to primitives: forward-mode differentiation (jvp), transposition
// of linear primitives (the backward half of reverse mode) and batching (vmap). Rules are written
// with spmd operations, so whatever they emit is recorded by the trace that is current when they
// run, and differentiates or batches again.
#pragma once

#include <spmd/array.h>

#include "core/array_impl.h"
#include "ir/params.h"

#include <functional>
#include <span>
#include <vector>

namespace spmd {

class PrimitiveRegistry;
struct Primitive;

// ---- jvp ----------------------------------------------------------------------------------------
// A tangent is an Array, or an invalid (default-constructed) Array standing for a symbolic zero.
inline bool is_zero(const Array& tangent) {
  return !tangent.valid();
}

struct JvpResult {
  std::vector<Array> primals_out;
  std::vector<Array> tangents_out;  // invalid entries are symbolic zeros
};
// Called only when at least one tangent is non-zero. Emits the primal operation first, then the
// operations the tangent needs, in JAX's order, so that staged programs print as JAX's do.
using JvpRule = std::function<JvpResult(std::span<const Array> primals,
                                        std::span<const Array> tangents, const Params& params)>;

// ---- transpose ----------------------------------------------------------------------------------
// An input of a linear equation: either a known value (a residual, `value` valid) or the linear
// input being transposed (`value` invalid; only its type is known: JAX's UndefinedPrimal).
struct LinearInput {
  Array value;
  AbstractValue aval;
  bool is_linear() const { return !value.valid(); }
};
// Given the cotangents of the outputs (invalid = zero; the rule is not called when all are zero),
// returns one cotangent per input: for linear inputs the accumulated contribution (invalid when
// zero), for known inputs an invalid Array.
using TransposeRule = std::function<std::vector<Array>(
    std::span<const Array> cotangents, std::span<const LinearInput> inputs, const Params& params)>;

// ---- batching -----------------------------------------------------------------------------------
// Marks an unbatched operand in BatchRule's `dims`.
inline constexpr int kNotBatched = -1;
struct BatchResult {
  std::vector<Array> outputs;
  std::vector<int> dims;  // batch dimension of each output, or kNotBatched
};
struct BatchContext {
  int64_t axis_size = 0;
  std::string axis_name;  // empty when the vmap has no name
};
// `args` hold the batched values; dims[i] is the batch dimension of args[i] or kNotBatched.
// Called only when at least one argument is batched.
using BatchRule = std::function<BatchResult(std::span<const Array> args, std::span<const int> dims,
                                            const Params& params, const BatchContext& ctx)>;

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

// What a primitive is: a name, a type rule, a CPU kernel and its transformation rules (jvp,
// transpose, batching, vma), as fields of one value. The IR's equations point at these; the
// family files in src/prims fill them in (prims/registry.cpp lists the families), and the
// interpreters read them. Nothing here knows any particular primitive.
#pragma once

#include <spmd/array.h>

#include "core/array_impl.h"
#include "ir/params.h"
#include "ir/sharding_rule.h"

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace spmd {

class Buffer;
struct Primitive;

// ---- kernels ------------------------------------------------------------------------------------
// A kernel's view of one input or output: host data plus its type.
struct Operand {
  const void* data;
  const AbstractValue* aval;
  // The buffer holding `data`, when the caller has it (kernels may keep derived data per buffer).
  const std::shared_ptr<Buffer>* buffer = nullptr;
  template <class T>
  const T* as() const {
    return static_cast<const T*>(data);
  }
};
struct Result {
  void* data;
  const AbstractValue* aval;
  // For allocates_outputs: the output Array's buffer, which the kernel sets; `data` is null, or
  // storage it may use (a donated buffer). Null for other primitives and callers giving storage.
  std::shared_ptr<Buffer>* buffer = nullptr;
  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
};
struct KernelArgs {
  std::span<const Operand> in;
  std::span<const Result> out;
  const Params& params;
};

using ShapeRule =
    std::function<std::vector<AbstractValue>(std::span<const AbstractValue>, const Params&)>;
using CpuKernel = std::function<void(const KernelArgs&)>;

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
  // The Explicit mesh axes splitting the mapped dim of the arguments (JAX's
  // AxisData.explicit_mesh_axis), empty when it is unsplit: a batched out_sharding and a broadcast
  // of an unbatched typed value split the batch dim over them, as JAX's get_sharding_for_vmap and
  // batching.broadcast do.
  std::vector<std::string> explicit_mesh_axis = {};
  // vmap's spmd_axis_name (JAX's AxisData.spmd_name), empty when it has none: the batching
  // rules of sharding constraints, jit's in/out shardings and shard_map split the batch dim over
  // these mesh axes. At most one of it and explicit_mesh_axis is set.
  std::vector<std::string> spmd_axis_name = {};
};
// `args` hold the batched values; dims[i] is the batch dimension of args[i] or kNotBatched.
// Called only when at least one argument is batched.
using BatchRule = std::function<BatchResult(std::span<const Array> args, std::span<const int> dims,
                                            const Params& params, const BatchContext& ctx)>;

// ---- vma ----------------------------------------------------------------------------------------
// The mesh axes each output varies over (one list per output), inside shard_map with check_vma.
using VmaTypes = std::vector<std::vector<std::string>>;
using VmaRule = std::function<VmaTypes(std::span<const AbstractValue>, const Params&)>;

// ---- the primitive ------------------------------------------------------------------------------
// How a primitive maps its operands to its outputs. The kind decides the rules a primitive gets
// when its family does not write one (prims/kinds.cpp), as JAX's defvectorized,
// defbroadcasting and reducer_batcher do.
enum class PrimitiveKind {
  other,         // every rule written out by the family
  unary,         // one operand, elementwise (JAX's defvectorized)
  broadcasting,  // operands of one shape or scalars, elementwise (JAX's defbroadcasting)
  reducer,       // one operand reduced over the dims in param `axes`
  cumulative,    // one operand scanned along the dim in param `axis`
};

// The scalar function an elementwise primitive applies to float32 elements, for generators of
// fused loops (compile/fused_loop.cpp); none when it has no such form.
enum class ScalarOp : uint8_t {
  // clang-format off
  none, add, sub, mul, div, max, min, neg, abs, sqrt, rsqrt, square, integer_pow, copy,
  eq, ne, lt, le, gt, ge, select,
  // clang-format on
};

struct Primitive {
  std::string name;
  PrimitiveKind kind = PrimitiveKind::other;
  ScalarOp scalar_op = ScalarOp::none;
  ShapeRule shape_rule;
  CpuKernel cpu_kernel;
  // The single output has the same bytes as the first input (reshape, squeeze): eager evaluation
  // shares the input's buffer instead of copying. Arrays are immutable, so sharing is safe.
  bool output_aliases_input = false;
  // Each output element depends only on the operands' elements at the same index (operands of
  // the output's shape) and on broadcast operands: the kernel may write its output over an
  // operand of the output's shape and element size (donated buffers, compile/executable.cpp).
  bool elementwise = false;
  // The kernel provides its outputs' buffers through Result::buffer when the caller passes it
  // (collectives whose result one buffer can hold for every device, dynamic_slice's view of its
  // operand); a caller that passes only `data` gets the result written there.
  bool allocates_outputs = false;
  // Transformation rules; empty when the primitive has none: jvp of a primitive without a rule
  // raises, transpose exists only for linear primitives.
  JvpRule jvp;
  TransposeRule transpose;
  BatchRule batch;
  // The primitive's outputs do not depend differentiably on its inputs (comparisons, integer
  // ops, argmax, iota, random bits): jvp gives symbolic zero tangents without a rule.
  bool non_differentiable = false;
  // The result depends on the device that computes it (collectives, axis_index): never
  // computed at compile time by constant folding.
  bool device_dependent = false;
  // Without a rule, outputs vary over the union of the operands' axes and operands that vary
  // over fewer are cast up with pvary first, as JAX does; collectives change them.
  VmaRule vma_rule;
  // Has an effect beyond its outputs (debug printing): never removed or merged by the passes.
  bool effectful = false;
  // An equation of it whose operands are all constant (literals, constants, or results of such
  // equations) is a constant expression, which every use gets a copy of before sharding
  // propagation (compile/passes.h, split_constant_uses), as Shardy's constant splitter does:
  // iota, broadcast_in_dim, reshape, squeeze, slice, pad, rev, concatenate, and every
  // elementwise primitive.
  bool keeps_constants = false;
  // Spreads a 0-d operand over its result's shape (broadcast_in_dim): every use of such an
  // equation gets a copy of its own too, whatever the operand.
  bool spreads_scalar = false;
  // An Array-level implementation used instead of cpu_kernel when set: primitives that run
  // sub-programs (jit calls, control flow) evaluate them as Programs.
  std::function<std::vector<Array>(std::span<const Array>, const Params&)> eager;
  // What an eager bind runs in place of the one-primitive program (JAX's impl), when that
  // differs: slice without strides runs as a dynamic_slice, as JAX's does. Only bind reads it;
  // a compiled program runs the primitive itself.
  std::function<std::vector<Array>(std::span<const Array>, const Params&)> impl;
  // A call: the param holding the sub-program it runs on its operands as they are, which the
  // passes may inline (jit, custom_jvp_call, custom_vjp_call); empty for other primitives.
  std::string call_body;
  // Partial evaluation of a loop body (JAX's scan known-hoisting, which evaluates what the body
  // computes from its consts alone outside the loop) meeting a call of it that reads values the
  // loop computes: the call's sub-program takes its place there (custom_jvp_call: JAX keeps no
  // custom rule for a computation partial evaluation splits, since it only builds linear ones).
  bool inlined_when_partly_known = false;
  // Or the call stays in the body and leaves in the enclosing program an equation of no
  // operands with these params (custom_vjp_call: JAX's partial evaluation takes every operand of
  // such a call as unknown and stages its known part, of nothing, outside the loop).
  std::function<Params(const Params&)> known_part_when_partly_known;
  // For a call whose meaning is more than its sub-program (jit's in_shardings and out_shardings):
  // the program the passes inline in its place. Unset: the call_body param's program.
  std::function<std::shared_ptr<const Program>(const Params&)> inlined_body;
  // A collective whose output element at an index combines the operand's elements at that index
  // on the devices of the group (psum, pmax, pmin): a permutation of dims commutes with it.
  bool per_element_across_devices = false;
  // Takes several operands with one set of params, each giving the result it gives alone: a
  // collective of several operands meets its group once for all of them (XLA's combined
  // collectives). Equations of it that could run together may be combined into one
  // (compile/passes.h, combine_collectives).
  bool combinable = false;
  // The named axes an equation communicates over (collectives): under vmap with one of them as
  // its axis name the equation is batched even when no operand is.
  std::function<std::vector<std::string>(const Params&)> axis_names;
  // How the primitive's operand and result dims split over mesh axes (ir/sharding_rule.h), for
  // propagation and the partitioner. Every primitive has one: its kind's, its family's, or
  // replicated_sharding_rule when its blocks cannot be computed apart.
  ShardingRuleFn sharding_rule;
  // Explicit mode: sets the results' type shardings (AbstractValue::sharding) from the operands'
  // where JAX's rule for the primitive is not its factor rule's (reshape); unset: derived from
  // sharding_rule (sharding/type_sharding.h).
  std::function<void(std::span<const AbstractValue> in, std::span<AbstractValue> out,
                     const Params& params)>
      type_sharding_rule;
  // What a device runs on its blocks, when the params spell global sizes or the primitive is a
  // boundary with a per-device body; unset: the equation as it is, on the blocks.
  LocalizeFn localize;
  // Params the jaxpr text leaves out, as JAX's printer does for this primitive.
  std::function<bool(std::string_view key, const ParamValue& value)> hides_param;
  // A call whose sub-program's variables print with the names of the caller's operands and
  // results, as JAX prints pjit.
  bool body_named_after_caller = false;
};

}  // namespace spmd

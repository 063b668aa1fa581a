// The Program interpreters behind jvp, vjp and vmap, for rules of primitives that hold
// sub-programs (jit calls, control flow) to transform their bodies.
#pragma once

#include "ir/program.h"
#include "prims/rule_util.h"

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace spmd {

// Evaluates `program` on primals and tangents (invalid = symbolic zero) with the jvp rules;
// primal operations go to the current context, tangent operations wherever their inputs live.
std::pair<std::vector<Array>, std::vector<Array>> jvp_program(const Program& program,
                                                              std::span<const Array> primals,
                                                              std::span<const Array> tangents);
// Where a residual of a linearized body comes from: one of the body's inputs, one of its
// outputs, a further value the body computes (an extra output of the forward program), or a value
// from outside the body (a constant, or a value of an outer trace).
struct ResidualSource {
  enum class Kind { input, output, extra, outside } kind;
  size_t index = 0;  // into the inputs, the outputs or the extras
  Array value;       // kind == outside
};

// A body linearized as JAX's linearize_jaxpr does it, called while the trace of a forward
// program is current and `xs` are its inputs: the primal equations go to that trace, the tangent
// equations (for the inputs with nonzero[i]) to a Program of their own.
struct LinearizedBody {
  std::vector<Array> outs;                // the primal outputs
  std::vector<bool> nonzero_out;          // whether each output's tangent is nonzero
  Program tangent;                        // constants (the residuals) and nonzero tangents in,
                                          // nonzero output tangents out
  std::vector<ResidualSource> residuals;  // one per constant of `tangent`
  std::vector<Array> extras;              // the residuals of kind extra
};
// With scalars_as_residuals, the concrete 0-d values the tangent equations read (the literals of
// `body`, constants its rules make) are residuals of kind extra, as JAX's partial evaluation of a
// shard_map body, which runs the function again, finds them staged in the forward trace; scalars
// made from C++ numbers (ArrayImpl::scalar_literal: JAX's Python scalars given to lax functions,
// NumPy scalars) stay literals.
LinearizedBody linearize_body(const Program& body, std::span<const Array> xs,
                              const std::vector<bool>& nonzero, bool scalars_as_residuals = false);

// Transposes a linear Program (constants = residuals): output cotangents to input cotangents.
// seeds[i], when given and valid, is where input i's cotangent starts: each cotangent computed
// for it is added to it as soon as it is computed (JAX's accumulators of a transposed scan's
// consts).
std::vector<Array> transpose_program(const Program& linear, std::span<const Array> cotangents,
                                     std::span<const Array> seeds = {});
// Whether a primitive holding a body (a call, a shard_map) is being linearized: its nonzero
// tangents are staged into a trace inner to the one its primals are computed in (grad and vjp,
// also an eager vjp of concrete primals), rather than computed beside the primals (jvp).
bool linearizing(std::span<const Array> primals, std::span<const Array> tangents);
// How many times a `jit` call's transposition has been traced (calls of one body, on operands of
// the same types, share one).
int64_t transposed_call_trace_count();
// How many times a shard_map manual over some axes of its mesh only has had its body localized
// to the blocks its devices run (a trace; equations of the same params share one).
int64_t localized_body_trace_count();
// Evaluates `program` with the batching rules; dims[i] is args[i]'s batch dim or kNotBatched.
std::pair<std::vector<Array>, std::vector<int>> batch_program(const Program& program,
                                                              std::span<const Array> args,
                                                              std::span<const int> dims,
                                                              const BatchContext& ctx);

}  // namespace spmd

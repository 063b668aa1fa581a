// The Program interpreters behind jvp, vjp and vmap, for rules of primitives that hold
// sub-programs (jit calls, control flow) to transform their bodies.
#pragma once

#include "ir/program.h"
#include "prims/rule_util.h"

#include <span>
#include <utility>
#include <vector>

namespace spmd {

// Evaluates `program` on primals and tangents (invalid = symbolic zero) with the jvp rules;
// primal operations go to the current context, tangent operations wherever their inputs live.
std::pair<std::vector<Array>, std::vector<Array>> jvp_program(const Program& program,
                                                              std::span<const Array> primals,
                                                              std::span<const Array> tangents);
// Transposes a linear Program (constants = residuals): output cotangents to input cotangents.
std::vector<Array> transpose_program(const Program& linear, std::span<const Array> cotangents);
// Evaluates `program` with the batching rules; dims[i] is args[i]'s batch dim or kNotBatched.
std::pair<std::vector<Array>, std::vector<int>> batch_program(const Program& program,
                                                              std::span<const Array> args,
                                                              std::span<const int> dims,
                                                              const BatchContext& ctx);

}  // namespace spmd

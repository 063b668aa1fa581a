// The shardings results print when JAX runs a computation op by op outside jit, as its grad,
// vjp and jvp do, where spmd runs the same computation as one partitioned program.
#pragma once

#include <spmd/array.h>

#include "ir/program.h"

#include <span>
#include <vector>

namespace spmd {

struct Placement;

// The results of `program` run on `operands` as placed by `placement` get the shardings they
// print when JAX runs it op by op: each equation is an eager op (a result laid out like its
// committed first operand takes that operand's sharding, one of uncommitted operands stays
// uncommitted, others print the spec read back from the program, as compiled.h's
// recover_user_shardings decides for jit); an equation whose rule fixes its results (shard_map,
// sharding_constraint, grad's seed) prints those. Only how a sharding prints changes: a result
// keeps its own sharding where the account ends at an equal one.
void recover_op_by_op_shardings(std::vector<Array>& results, const Program& program,
                                std::span<const Array> operands, const Placement& placement);

}  // namespace spmd

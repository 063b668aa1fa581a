// Program-to-Program optimisation passes run by jit before execution.
#pragma once

#include "ir/program.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace spmd {

// Removes equations whose outputs nothing reads, and constants nothing uses.
Program dead_code_elimination(const Program& p);
// Reuses the output of an earlier identical equation (same primitive, params and inputs).
Program common_subexpression_elimination(const Program& p);
// Evaluates equations whose inputs are all literals or constants and whose outputs are small;
// their outputs become constants (0-d: literals).
Program constant_folding(const Program& p);
// A 2-D transpose of a 2-D dot_general used only there becomes the dot_general with its
// operands swapped ((A·B)ᵀ = Bᵀ·Aᵀ), as the transposes of weight gradients are in reverse mode;
// the product then writes the transposed layout itself. A collective that acts element by
// element (psum) between the product and the transpose is seen through: it then sums the
// transposed product.
Program fold_transposed_products(const Program& p);
// Replaces calls (jit, custom_jvp_call, custom_vjp_call) by their bodies: the Program then
// shows every equation to the other passes, and runs without a nested executable per call.
Program inline_calls(const Program& p);
// An elementwise equation reads a 0-d value directly instead of its broadcast (a `zeros` the
// size of the output, say) when the equation's shape rule gives the same result; the broadcast
// is then usually dead.
Program forward_scalar_broadcasts(const Program& p);
// The 0-d atom that variable `v` of `p` broadcasts, through any chain of broadcast_in_dim, or
// nullopt; `producer[v]` is the index of the equation that defines v, or -1.
std::optional<Atom> scalar_broadcast_source(const Program& p, std::span<const int> producer, int v);
// A broadcast_in_dim that only inserts dims of size 1 (expand_dims, pmap putting back the
// mapped axis) becomes a reshape: the same bytes, so the result shares the operand's buffer
// instead of a copy.
Program unit_broadcasts_to_reshapes(const Program& p);
// For each variable of `p`, whether it is a constant expression: a constant, or the one output
// of an equation of a primitive that keeps constants (Primitive::keeps_constants, or
// elementwise; neither effectful nor device dependent) whose operands all are constant
// expressions or literals (an iota has none). `seeds` (indexed by variable, when given) marks
// other variables to count as constants.
std::vector<bool> constant_expressions(const Program& p, std::vector<bool> seeds = {});
// A dynamic_slice of an elementwise equation's result that nothing else reads becomes that
// equation over the same slices of its operands (an operand that broadcasts along a dim is
// sliced at 0 there): only the window is computed, and the equation can then fuse with what
// reads the slice. A bias added to a whole psum before one device's columns are taken is then
// added to those columns alone. The values are the same bit for bit.
Program slice_before_elementwise(const Program& p);
// Gives every use of a constant expression (a constant, or an equation of a primitive that
// keeps constants whose operands all are: Primitive::keeps_constants) and of a 0-d value's
// broadcast its own copy of that sub-computation, as Shardy's constant splitter does before
// propagation: uses split differently then take each its own split, where one shared value
// would be split for one use and moved for the others. 0-d values are shared (never split).
// Variable ids of `p` keep their meaning; the copies take new ids, and originals left unused
// are dropped.
Program split_constant_uses(const Program& p);
// The sizes of the mesh axes a per-device program runs over, by name (Mesh::shape()).
using AxisSizes = std::vector<std::pair<std::string, int64_t>>;
// A dynamic_slice that keeps, along one dim, the block of a collective's result that the device's
// own index over the collective's axes selects (the block size times that index as its start,
// evaluated device by device; 0 along the other dims) reads less: of a psum's result that
// nothing else reads, it becomes a psum_scatter (each device sums and writes its block alone);
// of a tiled all_gather's result along the gathered dim, it is the all_gather's operand, the
// device's own block. The values are the same bit for bit. `axes` gives the axes' sizes; with
// none (a program not on a mesh) nothing changes.
Program own_blocks_of_collectives(const Program& p, const AxisSizes& axes);
// A psum_scatter (tiled, along dim s) of a sum over dim 0 of `x`, where the program also sends
// `x` through an all_to_all over the same axes that splits dim s + 1 and concatenates dim 0,
// becomes the sum over dim 0 of that all_to_all's result: each device already receives every
// row of its block of columns, so it sums them without meeting its peers again (a bias's
// gradient beside its weight's, at data parallel). The sum runs in another order (all rows at
// once, where the psum_scatter added each device's partial sums).
Program sums_from_all_to_alls(const Program& p);
// Equations in levels by the meetings on the way to them: first the work that reads no
// collective's result (directly or through other equations), then the collectives whose operands
// that work gives (an equation whose sub-programs hold one counts as one), then the work that
// reads them, then the next collectives, and so on, each level in the program's order. A device
// does all the work it can before it meets its peers, and meets them several times in a row
// rather than between its pieces of work (a training step's loss psum'd between the forward and
// the backward pass, the all_to_alls of output gradients between the backward pass's products).
// A collective's level is at least that of the collective before it, so the collectives keep
// their sequence and every device's program meets its groups in the same order; the values are
// the same bit for bit. A program with an effectful equation (debug printing) keeps its order.
Program local_work_before_collectives(const Program& p);
// Collectives that meet their peers one after another (after local_work_before_collectives, the
// meetings of a level) and could meet once become one equation of several operands (XLA's
// collective combiners): equations of one combinable primitive (Primitive::combinable) with
// equal params, hence over the same group, where none reads what the meetings between them
// give. The combined equation meets where the first of them did. A collective whose results no
// meeting needs before a later level holding one like it (a bias's gradient psum_scatter'd a
// level before its weight's) first waits for that level, with the work that reads it. The values
// are the same bit for bit. A program with an effectful equation is left as it is.
Program combine_collectives(const Program& p);
// All of the above and elementwise fusion (fusion.h), in an order that lets each expose work for
// the next. `axes`: the mesh axes of a per-device program (own_blocks_of_collectives).
Program optimize(const Program& p, const AxisSizes& axes = {});

}  // namespace spmd

// Elementwise fusion. Equations that are elementwise over one shape and feed each other become
// one `fusion` equation holding them as a sub-program. Its kernel runs the whole chain on one
// tile of the shape at a time, so the values between the equations live in a tile-sized scratch
// that stays in the core's cache, and only the values used outside the chain reach memory; or,
// for float32 arithmetic, generated code that keeps the chain in registers (fused_loop.h).
#pragma once

#include "ir/program.h"

#include <cstddef>

namespace spmd {

// Groups elementwise equations as above; equations outside any group of two or more, and the
// order of everything else, are unchanged.
Program fuse_elementwise(const Program& p);

// Whether the `fusion` equation with `params` may write its output over its input `input` (a
// dead, unshared buffer of the output's shape and element size): it has a single output, which
// its last step writes after the earlier steps have read the same tile of every operand.
bool fusion_may_write_over(const Params& params, size_t input);

// Whether the `fusion` equation with `params` runs generated code (fused_loop.h) rather than its
// equations' kernels tile by tile.
bool fusion_runs_generated_loop(const Params& params);

}  // namespace spmd

// Generated machine code for fused float32 arithmetic. A fusion whose values are float32 of one
// shape (or 0-d) and bool of that shape, and whose equations are add, sub, mul, div, max, min,
// neg, abs, comparisons and a bool select_n, becomes one AVX2 loop (xbyak) that keeps the chain
// in registers: each element is loaded and stored once, where the tile-by-tile kernel stores and
// reloads it once per equation. Results equal the equations' own kernels bit for bit (XLA's
// reciprocal multiply for a 0-d divisor, NaN and signed-zero rules of max and min included),
// except which of two NaN operands an operation passes on.
#pragma once

#include "ir/program.h"

#include <cstdint>
#include <memory>

namespace spmd {

class FusedLoop {
 public:
  // The loop for `body` (the sub-program of a fusion over `shape`), or nullptr when it has a
  // value or an equation the generator does not take, needs more registers than there are, or
  // the CPU lacks AVX2.
  static std::unique_ptr<FusedLoop> compile(const Program& body, const Shape& shape);
  ~FusedLoop();

  // Elements [0, n): ins[k] points at body input k's first element (a 0-d input: its value),
  // outs[k] at output k's first element.
  void run(int64_t n, const void* const* ins, void* const* outs) const;

 private:
  struct Code;
  explicit FusedLoop(std::unique_ptr<Code> code);
  std::unique_ptr<Code> code_;
};

}  // namespace spmd

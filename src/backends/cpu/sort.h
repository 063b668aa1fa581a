// Sorting along one dimension: several operands reordered together, ordered lexicographically by
// the first `num_keys`, stable. Keys compare as JAX's sort comparator on XLA:CPU: -0 equals +0,
// NaNs of either sign come after +inf and equal each other, and denormals equal zero (XLA:CPU
// reads them as zero; float16 subnormals are float32 normals there, so they keep their order).
#pragma once

#include <spmd/dtype.h>
#include <spmd/shape.h>

#include <span>

namespace spmd::cpu {

struct SortOperand {
  const void* in;
  void* out;
  DType dtype;
};

// All operands have `shape`; `shape[dimension]` is below 2^32.
void sort(std::span<const SortOperand> operands, int num_keys, const Shape& shape, int dimension);

}  // namespace spmd::cpu

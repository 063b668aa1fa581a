// Sorting along one dimension: several operands reordered together, ordered lexicographically by
// the first `num_keys`; floats in JAX's total order (-NaN < -inf < … < -0 < +0 < … < inf < NaN).
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

// All operands have `shape`; sorting is stable along `dimension`.
void sort(std::span<const SortOperand> operands, int num_keys, const Shape& shape, int dimension);

}  // namespace spmd::cpu

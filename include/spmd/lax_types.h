// The plain parameter types of spmd::lax operations (dimension numbers, padding). They sit apart
// from lax.h so that the IR and the kernels can hold them without the operations.
#pragma once

#include <cstdint>
#include <vector>

namespace spmd::lax {

// Contracting and batch dimensions of dot_general, as ((lhs_contract, rhs_contract),
// (lhs_batch, rhs_batch)).
struct DotDimensionNumbers {
  std::vector<int64_t> lhs_contracting;
  std::vector<int64_t> rhs_contracting;
  std::vector<int64_t> lhs_batch;
  std::vector<int64_t> rhs_batch;
  bool operator==(const DotDimensionNumbers&) const = default;
};

// jax.lax.Precision: how precisely an accelerator computes a dot_general (the CPU kernels
// compute every one alike, so it only travels in the params).
enum class Precision { DEFAULT, HIGH, HIGHEST };

// dot_general's precision param, one per operand, as JAX's canonicalize_precision makes it.
struct DotPrecision {
  Precision lhs = Precision::DEFAULT;
  Precision rhs = Precision::DEFAULT;
  bool operator==(const DotPrecision&) const = default;
};

// Padding config per dim: (low, high, interior). Negative low/high crop.
struct PadConfig {
  int64_t low = 0, high = 0, interior = 0;
  bool operator==(const PadConfig&) const = default;
};

}  // namespace spmd::lax

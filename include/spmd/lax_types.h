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

// Padding config per dim: (low, high, interior). Negative low/high crop.
struct PadConfig {
  int64_t low = 0, high = 0, interior = 0;
  bool operator==(const PadConfig&) const = default;
};

}  // namespace spmd::lax

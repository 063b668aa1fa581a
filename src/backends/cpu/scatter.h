// The CPU kernel of XLA's scatter with addition as the combiner (JAX's scatter-add), the
// transpose of gather: every update window is added into a copy of the operand, so repeated
// indices accumulate.
#pragma once

#include <spmd/dtype.h>
#include <spmd/shape.h>

#include <cstdint>
#include <vector>

namespace spmd::cpu {

// XLA's ScatterDimensionNumbers, with the index vector in the last dimension of the indices.
struct ScatterDims {
  std::vector<int64_t> update_window_dims;
  std::vector<int64_t> inserted_window_dims;
  std::vector<int64_t> scatter_dims_to_operand_dims;
  std::vector<int64_t> operand_batching_dims;
  std::vector<int64_t> scatter_indices_batching_dims;
};

// out = operand with each update window added at its index. A window that does not fit in the
// operand is clamped into it (`clip`) or dropped whole, as XLA does for out-of-bounds updates.
void scatter_add(const void* operand, const Shape& operand_shape, DType dtype, const void* indices,
                 const Shape& indices_shape, DType index_dtype, const void* updates,
                 const Shape& updates_shape, const ScatterDims& dims, bool clip, void* out);

}  // namespace spmd::cpu

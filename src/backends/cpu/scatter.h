// The CPU kernel of XLA's scatter (JAX's scatter, scatter-add, scatter-mul, scatter-min and
// scatter-max): every update window is combined into a copy of the operand, in order, so repeated
// indices accumulate and, for a plain scatter, the last update wins.
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

// How an update meets the operand's element it lands on.
enum class ScatterCombine { set, add, mul, min, max };

// out = operand with each update window combined at its index. A window that does not fit in the
// operand is clamped into it (`clip`) or dropped whole, as XLA does for out-of-bounds updates.
void scatter(ScatterCombine combine, const void* operand, const Shape& operand_shape, DType dtype,
             const void* indices, const Shape& indices_shape, DType index_dtype,
             const void* updates, const Shape& updates_shape, const ScatterDims& dims, bool clip,
             void* out);

}  // namespace spmd::cpu

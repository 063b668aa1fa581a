// Copy kernels behind the shape and indexing primitives. One strided copy covers broadcast
// (stride 0), transpose (permuted strides, tiled), slice and rev (offset, scaled or negative
// strides), pad, concatenate and dynamic_update_slice (strided destinations); gather copies
// one window per index vector.
#pragma once

#include <spmd/dtype.h>
#include <spmd/shape.h>

#include <cstdint>
#include <span>
#include <vector>

namespace spmd::cpu {

// out[i_0, …, i_{n-1}] = in[Σ i_k · in_strides[k]] into a contiguous row-major `out_shape`
// (strides in elements of `itemsize` bytes; they may be zero or negative).
void strided_copy(const void* in, const std::vector<int64_t>& in_strides, void* out,
                  const Shape& out_shape, int itemsize);

// out[Σ i_k · out_strides[k]] = in[Σ i_k · in_strides[k]] over every index of `shape`. `in` and
// `out` point at the element of index (0, …, 0). Destinations must not overlap each other.
void strided_copy(const void* in, std::span<const int64_t> in_strides, void* out,
                  std::span<const int64_t> out_strides, std::span<const int64_t> shape,
                  int itemsize);

// Contiguous copy of n elements and fill of n elements with *value, split across threads.
void copy(const void* in, void* out, int64_t n, int itemsize);
void fill(void* out, const void* value, int64_t n, int itemsize);

// XLA's gather, with the index vector in the last dimension of the indices.
struct GatherDims {
  std::vector<int64_t> offset_dims;
  std::vector<int64_t> collapsed_slice_dims;
  std::vector<int64_t> start_index_map;
  std::vector<int64_t> operand_batching_dims;
  std::vector<int64_t> start_indices_batching_dims;
  std::vector<int64_t> slice_sizes;
};
// Out-of-range windows are clamped into the operand (`fill_value` null) or, when `fill_value`
// points at one element of the operand's dtype, replaced by that value as a whole.
void gather(const void* operand, const Shape& operand_shape, DType dtype, const void* indices,
            const Shape& indices_shape, DType index_dtype, void* out, const Shape& out_shape,
            const GatherDims& dims, const void* fill_value);

}  // namespace spmd::cpu

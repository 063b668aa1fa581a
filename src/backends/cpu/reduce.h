// Reduction and scan kernels: reduce over any set of axes, argmax/argmin along one axis and
// cumulative sums, products, extrema and log-sum-exp. Float sums are pairwise over fixed blocks,
// so results are identical whatever the thread count; 16-bit floats accumulate in float32.
#pragma once

#include <spmd/dtype.h>
#include <spmd/shape.h>

#include <cstdint>
#include <span>

namespace spmd::cpu {

enum class ReduceOp : uint8_t { sum, prod, max, min, bit_and, bit_or, bit_xor };

// out (the input's shape without `axes`, row-major) = op over `axes` (unique, any order). An
// empty reduction gives the identity: 0, 1, -inf / the lowest integer, +inf / the highest, all
// ones, 0, 0. max and min propagate NaN and order -0.0 below +0.0, as XLA does.
void reduce(ReduceOp op, DType t, const void* in, const Shape& shape, std::span<const int64_t> axes,
            void* out);

enum class ArgReduceOp : uint8_t { argmax, argmin };

// Index of the first maximum (minimum) along `axis`, which must be non-empty; a NaN counts as
// the extreme value, so the first NaN wins. Indices are written as `index_t`.
void arg_reduce(ArgReduceOp op, DType t, const void* in, const Shape& shape, int axis,
                DType index_t, void* out);

enum class ScanOp : uint8_t { sum, prod, max, min, logsumexp };

// Inclusive scan along `axis` (from the end when `reverse`); out has the input's shape.
void cumulative(ScanOp op, DType t, const void* in, const Shape& shape, int axis, bool reverse,
                void* out);

}  // namespace spmd::cpu

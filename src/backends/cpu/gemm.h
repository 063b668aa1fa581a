// Matrix multiplication kernels: batched GEMM on oneDNN (float32, bfloat16), OpenBLAS (float64)
// and plain loops (float16 through float32, integers, bool), and XLA's dot_general on host
// buffers of any layout, which packs its operands into GEMM layouts.
#pragma once

#include <spmd/dtype.h>
#include <spmd/lax_types.h>
#include <spmd/shape.h>

#include <cstdint>
#include <memory>

namespace spmd {
class Buffer;
}

namespace spmd::cpu {

// C[b] = op(A[b]) · op(B[b]) for b in [0, batch): A is M×K (stored K×M when trans_a), B is K×N
// (stored N×K when trans_b), C is M×N; every matrix is row-major and the batches are contiguous.
struct GemmShape {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
};

// Supported (operand, result) dtype pairs: (float32, float32), (bfloat16, float32),
// (bfloat16, bfloat16), (float64, float64), (bool, bool) and (t, t) for every integer t.
// Integer products and sums wrap around; bool is the or of ands. K = 0 gives zeros.
// `b_buffer`, when given, is the buffer whose data `b` is: float32 products that read the same
// buffer again (other devices, later runs) then share one packed copy of B; a view
// (buffer_view.h) is taken as the part of its parent it is, so views of one block share it too.
void gemm(DType operand, DType result, const GemmShape& shape, const void* a, const void* b,
          void* c, const std::shared_ptr<Buffer>* b_buffer = nullptr);
bool gemm_supports(DType operand, DType result);

// What the packed-B path of float32 products (one thread, a B buffer given) has done in this
// process so far: products that ran on dnnl_sgemm because the cache had no packed B for them
// (B seen for the first time and held fewer than three times, or held by one array alone), parts
// of B packed (a B is packed whole, or in two halves of its columns for products of at most 128
// rows, which the devices meeting it pack at once), and products run on a packed B.
struct PackedGemmCounts {
  int64_t unpacked_sightings = 0, parts_packed = 0, packed_products = 0;
};
PackedGemmCounts packed_gemm_counts();

// The oneDNN matmul primitives (batched float32, bfloat16) this process has created. They are
// cached by dtypes, shape and thread count, keeping the 512 most recently used: a shape met
// again within the last 512 distinct ones creates none.
int64_t matmul_primitives_created();

// XLA's DotGeneral on row-major buffers. The output holds the batch dims (in lhs_batch order),
// then lhs free dims, then rhs free dims. As on XLA:CPU, operands of different dtypes (and
// integer operands of a float or wider result) are first converted to the output dtype; floats
// then accumulate in float32 (float64 when either side is float64) and integers compute in the
// output type with wrap-around. The dimension numbers must already be valid (the primitive's
// shape rule checks them). `rhs_buffer` is as gemm's `b_buffer`.
void dot_general(const void* lhs, DType lhs_dtype, const Shape& lhs_shape, const void* rhs,
                 DType rhs_dtype, const Shape& rhs_shape, const lax::DotDimensionNumbers& dims,
                 void* out, DType out_dtype, const std::shared_ptr<Buffer>* rhs_buffer = nullptr);

}  // namespace spmd::cpu

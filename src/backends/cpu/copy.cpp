// Strided copies. Dims are first simplified (size-1 dims dropped, dims that walk memory as one
// merged), then rows of the innermost dim are copied by memcpy (unit strides), a fill (stride
// 0) or a strided loop; a transpose, whose innermost output dim is strided in the input, is
// copied in square tiles so that reads and writes both use whole cache lines.
#include "backends/cpu/copy.h"

#include "backends/cpu/convert.h"
#include "backends/cpu/parallel.h"

#include <algorithm>
#include <cstring>

#ifdef __SSE2__
#include <emmintrin.h>
#include <xmmintrin.h>
#endif

namespace spmd::cpu {
namespace {

constexpr int64_t kGrain = int64_t(1) << 15;  // elements per parallel task

struct Dim {
  int64_t n, is, os;  // size, input stride, output stride (elements)
};

// Drops size-1 dims and merges neighbours that are one dim in both layouts. Returns false when
// the copy is empty.
bool simplify(std::span<const int64_t> shape, std::span<const int64_t> is,
              std::span<const int64_t> os, std::vector<Dim>& dims) {
  dims.clear();
  for (size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] == 0) return false;
    if (shape[k] == 1) continue;
    Dim d{shape[k], is[k], os[k]};
    if (!dims.empty() && dims.back().is == d.is * d.n && dims.back().os == d.os * d.n) {
      dims.back() = {dims.back().n * d.n, d.is, d.os};
    } else {
      dims.push_back(d);
    }
  }
  return true;
}

// Multi-index over dims[0, k) with the matching input and output offsets.
class Walker {
 public:
  explicit Walker(std::span<const Dim> dims) : dims_(dims), idx_(dims.size(), 0) {}
  void seek(int64_t flat) {
    in_ = out_ = 0;
    for (size_t k = dims_.size(); k-- > 0;) {
      idx_[k] = flat % dims_[k].n;
      flat /= dims_[k].n;
      in_ += idx_[k] * dims_[k].is;
      out_ += idx_[k] * dims_[k].os;
    }
  }
  void next() {
    for (size_t k = dims_.size(); k-- > 0;) {
      in_ += dims_[k].is;
      out_ += dims_[k].os;
      if (++idx_[k] < dims_[k].n) return;
      in_ -= dims_[k].is * dims_[k].n;
      out_ -= dims_[k].os * dims_[k].n;
      idx_[k] = 0;
    }
  }
  int64_t in() const { return in_; }
  int64_t out() const { return out_; }

 private:
  std::span<const Dim> dims_;
  std::vector<int64_t> idx_;
  int64_t in_ = 0, out_ = 0;
};

template <class T>
inline void copy_row(const T* in, T* out, const Dim& d) {
  const int64_t n = d.n, is = d.is, os = d.os;
  if (os == 1) {
    if (is == 1) {
      std::memcpy(out, in, size_t(n) * sizeof(T));
    } else if (is == 0) {
      std::fill(out, out + n, *in);
    } else if (is == -1) {
      std::reverse_copy(in - (n - 1), in + 1, out);
    } else {
      for (int64_t i = 0; i < n; ++i) out[i] = in[i * is];
    }
  } else {
    for (int64_t i = 0; i < n; ++i) out[i * os] = in[i * is];
  }
}

// `rows` rows of `last` starting at in/out, consecutive rows `mid` strides apart.
template <class T>
inline void copy_plane(const T* in, T* out, int64_t rows, const Dim& mid, const Dim& last) {
  for (int64_t r = 0; r < rows; ++r) copy_row(in + r * mid.is, out + r * mid.os, last);
}

// Rows [begin, end) of the rows formed by every dim but the last. The two innermost dims run
// as plain loops so that short rows cost no index bookkeeping.
template <class T>
void copy_rows(const T* in, T* out, std::span<const Dim> dims, int64_t begin, int64_t end) {
  const Dim& last = dims.back();
  if (dims.size() == 1) return copy_row(in, out, last);
  const Dim& mid = dims[dims.size() - 2];
  Walker w(dims.first(dims.size() - 2));
  w.seek(begin / mid.n);
  int64_t m = begin % mid.n;
  for (int64_t row = begin; row < end; w.next()) {
    const int64_t count = std::min(mid.n - m, end - row);
    copy_plane(in + w.in() + m * mid.is, out + w.out() + m * mid.os, count, mid, last);
    row += count;
    m = 0;
  }
}

// In-register transposes of an N×N block: out[i·os + j] = in[i + j·is] for i, j < N. They
// move bits only, so any element type of the size works.
template <class T>
struct MicroTranspose {
  static constexpr int64_t N = 1;
  static void run(const T* in, int64_t, T* out, int64_t) { *out = *in; }
};

#ifdef __SSE2__
template <>
struct MicroTranspose<uint32_t> {
  static constexpr int64_t N = 4;
  static void run(const uint32_t* in, int64_t is, uint32_t* out, int64_t os) {
    auto ld = [&](int64_t j) { return _mm_loadu_ps(reinterpret_cast<const float*>(in + j * is)); };
    __m128 r0 = ld(0), r1 = ld(1), r2 = ld(2), r3 = ld(3);
    _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
    _mm_storeu_ps(reinterpret_cast<float*>(out), r0);
    _mm_storeu_ps(reinterpret_cast<float*>(out + os), r1);
    _mm_storeu_ps(reinterpret_cast<float*>(out + 2 * os), r2);
    _mm_storeu_ps(reinterpret_cast<float*>(out + 3 * os), r3);
  }
};

template <>
struct MicroTranspose<uint64_t> {
  static constexpr int64_t N = 2;
  static void run(const uint64_t* in, int64_t is, uint64_t* out, int64_t os) {
    __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in));
    __m128i r1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + is));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_unpacklo_epi64(r0, r1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + os), _mm_unpackhi_epi64(r0, r1));
  }
};

template <>
struct MicroTranspose<uint16_t> {
  static constexpr int64_t N = 8;
  static void run(const uint16_t* in, int64_t is, uint16_t* out, int64_t os) {
    __m128i a[8], b[8], c[8];
    for (int j = 0; j < 8; ++j)
      a[j] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + j * is));
    for (int k = 0; k < 4; ++k) {
      b[2 * k] = _mm_unpacklo_epi16(a[2 * k], a[2 * k + 1]);
      b[2 * k + 1] = _mm_unpackhi_epi16(a[2 * k], a[2 * k + 1]);
    }
    for (int h = 0; h < 2; ++h) {  // rows 0-3 (h = 0) and 4-7 (h = 1)
      const __m128i* bb = b + 4 * h;
      c[4 * h] = _mm_unpacklo_epi32(bb[0], bb[2]);      // cols 0, 1
      c[4 * h + 1] = _mm_unpackhi_epi32(bb[0], bb[2]);  // cols 2, 3
      c[4 * h + 2] = _mm_unpacklo_epi32(bb[1], bb[3]);  // cols 4, 5
      c[4 * h + 3] = _mm_unpackhi_epi32(bb[1], bb[3]);  // cols 6, 7
    }
    for (int k = 0; k < 4; ++k) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (2 * k) * os),
                       _mm_unpacklo_epi64(c[k], c[4 + k]));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (2 * k + 1) * os),
                       _mm_unpackhi_epi64(c[k], c[4 + k]));
    }
  }
};

template <>
struct MicroTranspose<uint8_t> {
  static constexpr int64_t N = 8;
  static void run(const uint8_t* in, int64_t is, uint8_t* out, int64_t os) {
    __m128i a[8];
    for (int j = 0; j < 8; ++j)
      a[j] = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(in + j * is));
    const __m128i b0 = _mm_unpacklo_epi8(a[0], a[1]), b1 = _mm_unpacklo_epi8(a[2], a[3]);
    const __m128i b2 = _mm_unpacklo_epi8(a[4], a[5]), b3 = _mm_unpacklo_epi8(a[6], a[7]);
    const __m128i c0 = _mm_unpacklo_epi16(b0, b1), c1 = _mm_unpackhi_epi16(b0, b1);
    const __m128i c2 = _mm_unpacklo_epi16(b2, b3), c3 = _mm_unpackhi_epi16(b2, b3);
    const __m128i d[4] = {_mm_unpacklo_epi32(c0, c2), _mm_unpackhi_epi32(c0, c2),
                          _mm_unpacklo_epi32(c1, c3), _mm_unpackhi_epi32(c1, c3)};
    for (int k = 0; k < 4; ++k) {
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out + (2 * k) * os), d[k]);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out + (2 * k + 1) * os), _mm_srli_si128(d[k], 8));
    }
  }
};
#endif

// Outputs larger than this are written with non-temporal stores: they would not stay in cache,
// and streaming them skips reading each destination line before it is overwritten.
constexpr int64_t kStreamBytes = int64_t(8) << 20;

// n elements from a buffer to a row of the output, by non-temporal stores when asked and the
// destination is 16-byte aligned.
template <bool Stream, class T>
inline void store_row(T* dst, const T* src, int64_t n) {
#ifdef __SSE2__
  const size_t bytes = size_t(n) * sizeof(T);
  if (Stream && (reinterpret_cast<uintptr_t>(dst) & 15) == 0 && bytes % 16 == 0) {
    auto* d = reinterpret_cast<__m128i*>(dst);
    const auto* s = reinterpret_cast<const __m128i*>(src);
    for (size_t k = 0; k < bytes / 16; ++k) _mm_stream_si128(d + k, _mm_load_si128(s + k));
    return;
  }
#endif
  std::memcpy(dst, src, size_t(n) * sizeof(T));
}

// Tile edge in elements: two cache lines of each row per tile, at least one micro block.
template <class T>
constexpr int64_t kTile = std::max<int64_t>(MicroTranspose<T>::N, 128 / int64_t(sizeof(T)));
// Tiles are visited in square blocks of this edge (1 KiB of each row) so that the pages a block
// touches stay within the TLB.
template <class T>
constexpr int64_t kBlock = 8 * kTile<T>;

// out[i·os + j] = in[i + j·is] for one tile (n_i, n_j ≤ kTile). The tile is transposed into a
// small contiguous buffer, then written out row by row: with power-of-two strides the rows of a
// tile share one cache set, and touching them a few at a time avoids the evictions.
template <bool Stream, class T>
void transpose_tile(const T* in, int64_t is, T* out, int64_t os, int64_t ni, int64_t nj) {
  using Micro = MicroTranspose<T>;
  constexpr int64_t B = kTile<T>, N = Micro::N;
  alignas(64) T buf[B * B];
  const int64_t ni_full = ni - ni % N, nj_full = nj - nj % N;
  for (int64_t j = 0; j < nj_full; j += N)
    for (int64_t i = 0; i < ni_full; i += N) Micro::run(in + i + j * is, is, buf + i * B + j, B);
  for (int64_t j = 0; j < nj; ++j) {
    const int64_t i0 = j < nj_full ? ni_full : 0;
    for (int64_t i = i0; i < ni; ++i) buf[i * B + j] = in[i + j * is];
  }
  for (int64_t i = 0; i < ni; ++i) store_row<Stream>(out + i * os, buf + i * B, nj);
}

// An n_i × n_j transpose by tiles, in blocks.
template <bool Stream, class T>
void transpose_block(const T* in, int64_t is, T* out, int64_t os, int64_t ni, int64_t nj) {
  constexpr int64_t B = kTile<T>;
  for (int64_t j0 = 0; j0 < nj; j0 += B)
    for (int64_t i0 = 0; i0 < ni; i0 += B)
      transpose_tile<Stream>(in + i0 + j0 * is, is, out + i0 * os + j0, os, std::min(B, ni - i0),
                             std::min(B, nj - j0));
}

// A copy whose output is contiguous along the last dim and whose input is contiguous along
// dim p: blocks over (p, last) split across threads.
template <class T>
void copy_transposed(const T* in, T* out, const std::vector<Dim>& dims, size_t p) {
  constexpr int64_t block = kBlock<T>;
  std::vector<Dim> outer;
  for (size_t k = 0; k + 1 < dims.size(); ++k)
    if (k != p) outer.push_back(dims[k]);
  const Dim dp = dims[p], dl = dims.back();
  const int64_t bi = (dp.n + block - 1) / block, bj = (dl.n + block - 1) / block;
  int64_t outer_n = 1;
  for (const Dim& d : outer) outer_n *= d.n;
  const int64_t per_outer = bi * bj;
  const int64_t block_elems = std::min(block, dp.n) * std::min(block, dl.n);
  const bool stream = outer_n * dp.n * dl.n * int64_t(sizeof(T)) > kStreamBytes;
  parallel_for(outer_n * per_outer, std::max<int64_t>(1, kGrain / block_elems),
               [&](int64_t b, int64_t e) {
                 Walker w(outer);
                 w.seek(b / per_outer);
                 int64_t k = b % per_outer;
                 for (int64_t u = b; u < e; ++u) {
                   const int64_t i0 = (k / bj) * block, j0 = (k % bj) * block;
                   const T* src = in + w.in() + i0 * dp.is + j0 * dl.is;
                   T* dst = out + w.out() + i0 * dp.os + j0;
                   const int64_t ni = std::min(block, dp.n - i0), nj = std::min(block, dl.n - j0);
                   if (stream) {
                     transpose_block<true>(src, dl.is, dst, dp.os, ni, nj);
                   } else {
                     transpose_block<false>(src, dl.is, dst, dp.os, ni, nj);
                   }
                   if (++k == per_outer) {
                     k = 0;
                     w.next();
                   }
                 }
#ifdef __SSE2__
                 if (stream) _mm_sfence();
#endif
               });
}

template <class T>
void copy_typed(const T* in, T* out, const std::vector<Dim>& dims) {
  if (dims.empty()) {
    *out = *in;
    return;
  }
  const Dim& last = dims.back();
  if (last.os == 1 && last.is != 1 && last.is != 0 && last.n > 1) {
    for (size_t p = 0; p + 1 < dims.size(); ++p)
      if (dims[p].is == 1) return copy_transposed(in, out, dims, p);
  }
  std::span<const Dim> all(dims);
  if (dims.size() == 1) {
    // One long row: split the row itself.
    parallel_for(last.n, kGrain, [&](int64_t b, int64_t e) {
      copy_row(in + b * last.is, out + b * last.os, Dim{e - b, last.is, last.os});
    });
    return;
  }
  int64_t rows = 1;
  for (size_t k = 0; k + 1 < dims.size(); ++k) rows *= dims[k].n;
  parallel_for(rows, std::max<int64_t>(1, kGrain / last.n),
               [&](int64_t b, int64_t e) { copy_rows(in, out, all, b, e); });
}

template <class F>
void dispatch_size(int itemsize, F&& f) {
  switch (itemsize) {
    case 1:
      return f(uint8_t{});
    case 2:
      return f(uint16_t{});
    case 4:
      return f(uint32_t{});
    default:
      return f(uint64_t{});
  }
}

}  // namespace

void strided_copy(const void* in, std::span<const int64_t> in_strides, void* out,
                  std::span<const int64_t> out_strides, std::span<const int64_t> shape,
                  int itemsize) {
  std::vector<Dim> dims;
  if (!simplify(shape, in_strides, out_strides, dims)) return;
  dispatch_size(itemsize, [&](auto t) {
    using T = decltype(t);
    copy_typed(static_cast<const T*>(in), static_cast<T*>(out), dims);
  });
}

void strided_copy(const void* in, const std::vector<int64_t>& in_strides, void* out,
                  const Shape& out_shape, int itemsize) {
  std::vector<int64_t> out_strides = out_shape.strides();
  strided_copy(in, std::span<const int64_t>(in_strides), out, out_strides, out_shape.dims(),
               itemsize);
}

void copy(const void* in, void* out, int64_t n, int itemsize) {
  const auto* src = static_cast<const char*>(in);
  auto* dst = static_cast<char*>(out);
  parallel_for(n, kGrain * 4, [&](int64_t b, int64_t e) {
    std::memcpy(dst + b * itemsize, src + b * itemsize, size_t((e - b) * itemsize));
  });
}

void fill(void* out, const void* value, int64_t n, int itemsize) {
  dispatch_size(itemsize, [&](auto t) {
    using T = decltype(t);
    T v;
    std::memcpy(&v, value, sizeof(T));
    T* dst = static_cast<T*>(out);
    parallel_for(n, kGrain * 4, [&](int64_t b, int64_t e) { std::fill(dst + b, dst + e, v); });
  });
}

// ---- gather -------------------------------------------------------------------------------------
namespace {

bool contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// The parts of a gather that do not depend on the index values.
struct GatherPlan {
  std::vector<Dim> window;        // window dims, simplified (operand and output strides)
  int64_t window_size = 1;        // elements per window
  std::vector<int64_t> batch_n;   // index batch dims (all but the index vector dim)
  std::vector<int64_t> batch_os;  // output stride of each batch dim
  std::vector<int64_t> lo_clamp;  // per operand dim: the largest valid start
  std::vector<int64_t> op_strides;
  int64_t index_len = 0;
  bool empty = false;
};

GatherPlan plan_gather(const Shape& operand_shape, const Shape& indices_shape,
                       const Shape& out_shape, const GatherDims& g) {
  GatherPlan p;
  p.op_strides = operand_shape.strides();
  const std::vector<int64_t> out_strides = out_shape.strides();
  std::vector<int64_t> wn, wis, wos;
  size_t k = 0;
  for (int d = 0; d < operand_shape.ndim(); ++d) {
    p.lo_clamp.push_back(operand_shape[d] - g.slice_sizes[size_t(d)]);
    if (contains(g.collapsed_slice_dims, d) || contains(g.operand_batching_dims, d)) continue;
    wn.push_back(g.slice_sizes[size_t(d)]);
    wis.push_back(p.op_strides[size_t(d)]);
    wos.push_back(out_strides[size_t(g.offset_dims[k++])]);
  }
  p.empty = !simplify(wn, wis, wos, p.window) || out_shape.size() == 0;
  for (const Dim& d : p.window) p.window_size *= d.n;
  const int q = indices_shape.ndim();
  p.index_len = indices_shape[q - 1];
  int b = 0;
  for (int o = 0; o < out_shape.ndim(); ++o) {
    if (contains(g.offset_dims, o)) continue;
    p.batch_n.push_back(indices_shape[b++]);
    p.batch_os.push_back(out_strides[size_t(o)]);
  }
  return p;
}

template <class T>
void gather_typed(const T* operand, const int64_t* indices, T* out, const GatherPlan& p,
                  const GatherDims& g, const T* fill_value) {
  int64_t batches = 1;
  for (int64_t n : p.batch_n) batches *= n;
  const size_t nb = p.batch_n.size(), rank = p.lo_clamp.size();
  std::span<const Dim> window(p.window);
  // The fill source repeats one element: input strides 0.
  std::vector<Dim> fill_window = p.window;
  for (Dim& d : fill_window) d.is = 0;
  const int64_t rows = window.empty() ? 1 : p.window_size / window.back().n;
  auto run = [&](int64_t begin, int64_t end) {
    std::vector<int64_t> coord(nb), start(rank);
    int64_t rem = begin;
    for (size_t k = nb; k-- > 0;) {
      coord[k] = rem % p.batch_n[k];
      rem /= p.batch_n[k];
    }
    for (int64_t b = begin; b < end; ++b) {
      std::fill(start.begin(), start.end(), 0);
      const int64_t* iv = indices + b * p.index_len;
      for (int64_t k = 0; k < p.index_len; ++k) start[size_t(g.start_index_map[size_t(k)])] = iv[k];
      for (size_t j = 0; j < g.operand_batching_dims.size(); ++j)
        start[size_t(g.operand_batching_dims[j])] = coord[size_t(g.start_indices_batching_dims[j])];
      bool in_bounds = true;
      int64_t in_off = 0, out_off = 0;
      for (size_t d = 0; d < rank; ++d) {
        int64_t s = start[d];
        if (s < 0 || s > p.lo_clamp[d]) {
          in_bounds = false;
          s = std::clamp<int64_t>(s, 0, p.lo_clamp[d]);
        }
        in_off += s * p.op_strides[d];
      }
      for (size_t k = 0; k < nb; ++k) out_off += coord[k] * p.batch_os[k];
      T* dst = out + out_off;
      if (window.empty()) {
        *dst = !in_bounds && fill_value ? *fill_value : operand[in_off];
      } else if (!in_bounds && fill_value) {
        copy_rows(fill_value, dst, fill_window, 0, rows);
      } else {
        copy_rows(operand + in_off, dst, window, 0, rows);
      }
      for (size_t k = nb; k-- > 0;) {
        if (++coord[k] < p.batch_n[k]) break;
        coord[k] = 0;
      }
    }
  };
  parallel_for(batches, std::max<int64_t>(1, kGrain / std::max<int64_t>(p.window_size, 8)), run);
}

}  // namespace

void gather(const void* operand, const Shape& operand_shape, DType dtype, const void* indices,
            const Shape& indices_shape, DType index_dtype, void* out, const Shape& out_shape,
            const GatherDims& dims, const void* fill_value) {
  GatherPlan plan = plan_gather(operand_shape, indices_shape, out_shape, dims);
  if (plan.empty) return;
  std::vector<int64_t> idx(size_t(indices_shape.size()));
  convert(indices, index_dtype, idx.data(), DType::int64, int64_t(idx.size()));
  dispatch_size(itemsize(dtype), [&](auto t) {
    using T = decltype(t);
    gather_typed(static_cast<const T*>(operand), idx.data(), static_cast<T*>(out), plan, dims,
                 static_cast<const T*>(fill_value));
  });
}

}  // namespace spmd::cpu

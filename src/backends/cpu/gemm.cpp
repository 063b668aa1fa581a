// GEMM kernels and dot_general on the host. float32 products run on oneDNN (dnnl_sgemm, or the
// matmul primitive for batches), bfloat16 on oneDNN's matmul primitive (cached per shape),
// float64 on OpenBLAS, everything else and tiny products on loops. dot_general packs operands
// into (batch, M, K) × (batch, K, N) layouts only when they are not already in one (possibly
// transposed) GEMM layout.
#include "backends/cpu/gemm.h"

#include "backends/cpu/buffer_view.h"
#include "backends/cpu/clones.h"
#include "backends/cpu/convert.h"
#include "backends/cpu/copy.h"
#include "backends/cpu/parallel.h"
#include "core/buffer.h"
#include "core/lru.h"

#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <numeric>
#include <type_traits>
#include <vector>

namespace spmd::cpu {
namespace {

// Products below this many multiply-adds per matrix cost less in a loop than a library call
// (dnnl_sgemm returns in about 0.2 µs for an 8×8×8 product).
constexpr int64_t kSmallGemm = 512;
// Multiply-adds per parallel_for chunk in the loop kernels.
constexpr int64_t kLoopGrain = 64 * 1024;

// Multiply-adds worth waking one more library thread for (about 30 µs of one core's work).
constexpr int64_t kMacsPerThread = int64_t(1) << 23;

bool is_small(const GemmShape& s) {
  return s.m * s.n * s.k < kSmallGemm;
}

// Small products run on one thread: waking OpenMP's team costs more than they take, and a team
// member descheduled by a busy machine stalls the whole product at its barrier.
int gemm_threads(const GemmShape& s) {
  const int64_t macs = s.batch * s.m * s.n * s.k;
  return int(std::clamp<int64_t>(macs / kMacsPerThread, 1, max_threads()));
}

// ---- thread counts ----------------------------------------------------------------------------
// oneDNN runs on OpenMP, whose thread count is a per-thread setting; OpenBLAS has one global one.
// Both follow spmd's own count so the libraries never oversubscribe the machine.
void use_omp_threads(int n) {
  if (omp_get_max_threads() != n) omp_set_num_threads(n);
}
void use_openblas_threads(int n) {
  if (openblas_get_num_threads() != n) openblas_set_num_threads(n);
}

// ---- loop kernels -----------------------------------------------------------------------------
// One row of C, from the row of A at `a` (elements `a_step` apart along k) and B at `b`.
// Sizes arrive as plain values: a byte-sized store could otherwise alias them and stop the
// compiler from vectorising. acc holds n accumulators of type W.
struct RowGeometry {
  int64_t n, k, a_step;
  bool b_transposed;
};

// Compiled for AVX-512 and AVX2 too (clones.h).
template <class T, class W, class Out>
SPMD_WIDE_VECTOR_CLONES void row_product(const T* a, const T* b, W* acc, Out* c, RowGeometry g) {
  const int64_t n = g.n, k = g.k, a_step = g.a_step;
  if (g.b_transposed) {  // B stored N×K: each output is a dot product over contiguous k
    for (int64_t j = 0; j < n; ++j) {
      W sum = 0;
      for (int64_t p = 0; p < k; ++p) sum += W(a[p * a_step]) * W(b[j * k + p]);
      c[j] = Out(sum);
    }
    return;
  }
  for (int64_t j = 0; j < n; ++j) acc[j] = W(0);
  for (int64_t p = 0; p < k; ++p) {
    const W x = W(a[p * a_step]);
    const T* brow = b + p * n;
    for (int64_t j = 0; j < n; ++j) acc[j] += x * W(brow[j]);
  }
  for (int64_t j = 0; j < n; ++j) c[j] = Out(acc[j]);
}

SPMD_WIDE_VECTOR_CLONES void bool_row_product(const uint8_t* a, const uint8_t* b, uint8_t* c,
                                              RowGeometry g) {
  const int64_t n = g.n, k = g.k, a_step = g.a_step;
  if (g.b_transposed) {
    for (int64_t j = 0; j < n; ++j) {
      uint8_t any = 0;
      for (int64_t p = 0; p < k && !any; ++p) any = a[p * a_step] & b[j * k + p];
      c[j] = any;
    }
    return;
  }
  std::memset(c, 0, size_t(n));
  for (int64_t p = 0; p < k; ++p) {
    if (!a[p * a_step]) continue;
    const uint8_t* brow = b + p * n;
    for (int64_t j = 0; j < n; ++j) c[j] |= brow[j];
  }
}

// Splits the batch·M output rows across threads; row(a_row, b_matrix, c_row) computes one row.
template <class T, class Out, class RowFn>
void for_each_row(const GemmShape& s, const T* a, const T* b, Out* c, RowFn&& row) {
  const int64_t grain = std::max<int64_t>(1, kLoopGrain / std::max<int64_t>(1, s.n * s.k));
  const int64_t a_row_step = s.trans_a ? 1 : s.k;
  parallel_for(s.batch * s.m, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t batch = r / s.m, i = r % s.m;
      row(a + batch * s.m * s.k + i * a_row_step, b + batch * s.k * s.n, c + r * s.n);
    }
  });
}

RowGeometry row_geometry(const GemmShape& s) {
  return {s.n, s.k, s.trans_a ? s.m : 1, s.trans_b};
}

// Float products accumulate in Acc (float or double) and are rounded once into Out.
template <class T, class Acc, class Out>
void float_loop_gemm(const GemmShape& s, const T* a, const T* b, Out* c) {
  const RowGeometry g = row_geometry(s);
  for_each_row(s, a, b, c, [&](const T* ar, const T* bm, Out* cr) {
    std::vector<Acc> acc(size_t(g.n));
    row_product<T, Acc, Out>(ar, bm, acc.data(), cr, g);
  });
}

// Integer products wrap around as in XLA: the arithmetic runs on unsigned words (no signed
// overflow) and the low bits are kept.
template <class T>
void int_loop_gemm(const GemmShape& s, const T* a, const T* b, T* c) {
  using W = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;
  const RowGeometry g = row_geometry(s);
  for_each_row(s, a, b, c, [&](const T* ar, const T* bm, T* cr) {
    std::vector<W> acc(size_t(g.n));
    row_product<T, W, T>(ar, bm, acc.data(), cr, g);
  });
}

// Boolean products: C[i, j] = any_k (A[i, k] and B[k, j]).
void bool_loop_gemm(const GemmShape& s, const uint8_t* a, const uint8_t* b, uint8_t* c) {
  const RowGeometry g = row_geometry(s);
  for_each_row(s, a, b, c, [&](const uint8_t* ar, const uint8_t* bm, uint8_t* cr) {
    bool_row_product(ar, bm, cr, g);
  });
}

// ---- oneDNN -----------------------------------------------------------------------------------
dnnl::memory::data_type onednn_type(DType t) {
  return t == DType::bfloat16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
}

// A batch of rows×cols matrices, stored cols×rows when transposed.
dnnl::memory::desc matrix_desc(DType t, int64_t batch, int64_t rows, int64_t cols,
                               bool transposed) {
  dnnl::memory::dims strides = transposed ? dnnl::memory::dims{rows * cols, 1, rows}
                                          : dnnl::memory::dims{rows * cols, cols, 1};
  return dnnl::memory::desc({batch, rows, cols}, onednn_type(t), strides);
}

struct MatmulKey {
  DType operand, result;
  GemmShape shape;
  int threads;
  bool operator==(const MatmulKey& o) const {
    const GemmShape &a = shape, &b = o.shape;
    return operand == o.operand && result == o.result && threads == o.threads &&
           a.batch == b.batch && a.m == b.m && a.n == b.n && a.k == b.k && a.trans_a == b.trans_a &&
           a.trans_b == b.trans_b;
  }
};
struct MatmulKeyHash {
  size_t operator()(const MatmulKey& k) const {
    size_t h = size_t(k.operand) * 31 + size_t(k.result);
    for (int64_t v : {k.shape.batch, k.shape.m, k.shape.n, k.shape.k, int64_t(k.threads),
                      int64_t(k.shape.trans_a) * 2 + int64_t(k.shape.trans_b)})
      h = h * 1000003 ^ std::hash<int64_t>()(v);
    return h;
  }
};

// A matmul primitive with its memory descriptors; null `primitive` when oneDNN has no fast
// implementation for the key (it would fall back to its slow reference code).
struct CachedMatmul {
  std::unique_ptr<dnnl::matmul> primitive;
  dnnl::memory::desc a, b, c, scratchpad;
};

dnnl::engine& onednn_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

std::shared_ptr<const CachedMatmul> create_matmul(const MatmulKey& key) {
  auto out = std::make_shared<CachedMatmul>();
  const GemmShape& s = key.shape;
  out->a = matrix_desc(key.operand, s.batch, s.m, s.k, s.trans_a);
  out->b = matrix_desc(key.operand, s.batch, s.k, s.n, s.trans_b);
  out->c = matrix_desc(key.result, s.batch, s.m, s.n, false);
  // One primitive runs on many device threads at once: with the library's scratchpad (shared by
  // all primitives, tied to the creating thread) concurrent runs corrupt each other's partial
  // sums, so each run brings its own (onednn_gemm).
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  try {
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(out->a, out->b, out->c), attr,
                                    onednn_engine());
    if (std::string_view(pd.impl_info_str()).starts_with("ref")) return out;
    out->scratchpad = pd.scratchpad_desc();
    out->primitive = std::make_unique<dnnl::matmul>(pd);
  } catch (const dnnl::error&) {
    out->primitive.reset();
  }
  return out;
}

// Primitive creation costs tens of microseconds; repeated shapes reuse it. The cache keeps the
// kMatmulCacheSize most recently used, so a program meeting many shapes keeps its frequent ones.
// Primitives are created under the lock: device threads meeting a new shape at once would
// otherwise create it in parallel through oneDNN's own primitive cache, whose sharing
// ThreadSanitizer cannot follow.
constexpr size_t kMatmulCacheSize = 512;
std::atomic<int64_t> matmuls_created{0};

std::shared_ptr<const CachedMatmul> cached_matmul(const MatmulKey& key) {
  struct Entry {
    MatmulKey key;
    std::shared_ptr<const CachedMatmul> matmul;
  };
  static std::mutex mu;
  static LruCache<Entry> cache;
  const size_t h = MatmulKeyHash()(key);
  std::lock_guard lock(mu);
  if (Entry* hit = cache.find(h, [&](const Entry& e) { return e.key == key; })) return hit->matmul;
  auto created = create_matmul(key);
  matmuls_created.fetch_add(1, std::memory_order_relaxed);
  cache.insert(h, Entry{key, created}, kMatmulCacheSize);
  return created;
}

// Runs the product on oneDNN; false when oneDNN has no fast kernel for it.
bool onednn_gemm(DType operand, DType result, const GemmShape& s, const void* a, const void* b,
                 void* c) {
  const int threads = gemm_threads(s);
  use_omp_threads(threads);
  auto mm = cached_matmul(MatmulKey{operand, result, s, threads});
  if (!mm->primitive) return false;
  dnnl::engine& engine = onednn_engine();
  thread_local dnnl::stream stream(engine);
  dnnl::memory ma(mm->a, engine, const_cast<void*>(a));
  dnnl::memory mb(mm->b, engine, const_cast<void*>(b));
  dnnl::memory mc(mm->c, engine, c);
  thread_local std::vector<std::byte> scratch;
  if (scratch.size() < mm->scratchpad.get_size()) scratch.resize(mm->scratchpad.get_size());
  dnnl::memory ms(mm->scratchpad, engine, scratch.data());
  mm->primitive->execute(
      stream,
      {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}, {DNNL_ARG_SCRATCHPAD, ms}});
  stream.wait();
  return true;
}

// ---- packed B operands --------------------------------------------------------------------------
// dnnl_sgemm copies B into panels on every call, which costs 10–20 % of a one-thread product at
// 128 rows (more for a transposed B). The devices of a process often multiply by the same
// buffer (a weight replicated over the batch axis is one buffer they share), and a program run
// in a loop multiplies by the same weights every time, so B is packed once for all of them.
// oneDNN 2.6 exports its packed-GEMM entry points without declaring them in a public header;
// they are declared weak so that a oneDNN without them makes every product take dnnl_sgemm.
// The library is column-major: our row-major C = op(A)·op(B) is its Cᵀ = op(B)ᵀ·op(A)ᵀ, so our
// B is its "A". On one thread the packed product is dnnl_sgemm's bit for bit for M ≥ 16; below
// that its transposed-B path fails, and at M = 1 dnnl_sgemm takes a matrix-vector kernel.
}  // namespace
}  // namespace spmd::cpu

namespace dnnl::impl::cpu {
[[gnu::weak]] dnnl_status_t sgemm_pack_get_size(const char* identifier, const char* transa,
                                                const char* transb, const dnnl_dim_t* M,
                                                const dnnl_dim_t* N, const dnnl_dim_t* K,
                                                const dnnl_dim_t* lda, const dnnl_dim_t* ldb,
                                                size_t* size, bool* pack);
[[gnu::weak]] dnnl_status_t sgemm_pack(const char* identifier, const char* transa,
                                       const char* transb, const dnnl_dim_t* M, const dnnl_dim_t* N,
                                       const dnnl_dim_t* K, const dnnl_dim_t* lda,
                                       const dnnl_dim_t* ldb, const float* src, float* dst);
[[gnu::weak]] dnnl_status_t sgemm_compute(const char* transa, const char* transb,
                                          const dnnl_dim_t* M, const dnnl_dim_t* N,
                                          const dnnl_dim_t* K, const float* A,
                                          const dnnl_dim_t* lda, const float* B,
                                          const dnnl_dim_t* ldb, const float* beta, float* C,
                                          const dnnl_dim_t* ldc);
}  // namespace dnnl::impl::cpu

namespace spmd::cpu {
namespace {

// Rows below which the packed product is not used (see above), and the B elements below which
// packing saves too little to be worth a cache entry.
constexpr int64_t kPackedMinRows = 64;
constexpr int64_t kPackedMinElements = int64_t(1) << 16;
// B is packed in two halves of its columns (two products of half the width, written side by
// side) when the product has at most this many rows: the devices that meet an unpacked B then
// pack a half each. On one thread the halves' products equal the whole's bit for bit up to 640
// rows (checked for K from 256 to 4096, N from 512 to 4096, every transpose); at 768 and more
// rows with a transposed B oneDNN blocks the sum over K differently for the narrower product.
// At 256 rows the two narrower products cost more than the halved packing saves (a `--mesh
// 4x2` training epoch, whose products have 256 rows, took 3 % longer with the split).
constexpr int64_t kSplitPackMaxRows = 128;
// Columns of B below which it is packed whole, and the multiple a half's width keeps.
constexpr int64_t kSplitPackMinColumns = 256;
constexpr int64_t kSplitPackAlign = 64;
// A buffer held this many times at its first sighting is packed then: several devices (or
// arrays) share it and will read it, where a buffer one array and one run hold waits for its
// second product.
constexpr long kPackAtFirstSightingHolders = 3;

bool packing_available() {
  return dnnl::impl::cpu::sgemm_pack_get_size && dnnl::impl::cpu::sgemm_pack &&
         dnnl::impl::cpu::sgemm_compute;
}

// Columns [begin, end) of B, packed on their own.
struct PackedPart {
  int64_t begin = 0, end = 0;
  std::once_flag once;
  std::shared_ptr<Buffer> packed;  // null when oneDNN declined to pack
};

// B of one product shape, packed from one buffer (from byte `offset` of it) in one or two parts.
struct PackedB {
  GemmShape shape;
  size_t offset = 0;
  std::vector<std::unique_ptr<PackedPart>> parts;
  std::atomic<size_t> arrivals{0};  // which part a product packs first
};

std::shared_ptr<PackedB> make_packed_b(const GemmShape& s, size_t offset) {
  auto p = std::make_shared<PackedB>();
  p->shape = s;
  p->offset = offset;
  const int64_t half = s.n / 2 / kSplitPackAlign * kSplitPackAlign;
  std::vector<int64_t> bounds = {0, s.n};
  if (s.m <= kSplitPackMaxRows && s.n >= kSplitPackMinColumns && half > 0) bounds = {0, half, s.n};
  for (size_t i = 0; i + 1 < bounds.size(); ++i) {
    p->parts.push_back(std::make_unique<PackedPart>());
    p->parts.back()->begin = bounds[i];
    p->parts.back()->end = bounds[i + 1];
  }
  return p;
}

// The packed forms of one buffer. The entry holds a reference to the buffer: its memory cannot
// be reused for another value, and a run writes over a buffer only when it is the sole owner (a
// donated argument), so every packed copy stays what the buffer holds.
struct PackedSource {
  std::shared_ptr<Buffer> buffer;
  std::vector<std::shared_ptr<PackedB>> products;
};

class PackedCache {
 public:
  // The entry for B = `source`'s data from byte `offset` (B a view of that part of it, as a
  // device's rows of a weight are) in product `s`, or null while B has been seen only once:
  // packing pays when a second device or a second run reads the same B. Only buffers that more
  // than one array holds get an entry: a value of one run alone (an activation) is read once,
  // and a reference from the cache would keep the run from reusing its memory. A buffer held
  // kPackAtFirstSightingHolders times or more is packed at its first sighting.
  std::shared_ptr<PackedB> find(const std::shared_ptr<Buffer>& source, size_t offset,
                                const GemmShape& s) {
    std::lock_guard lock(mu_);
    // Buffers only the cache still holds are dead values.
    std::erase_if(sources_, [](const PackedSource& e) { return e.buffer.use_count() == 1; });
    auto it = std::find_if(sources_.begin(), sources_.end(),
                           [&](const PackedSource& e) { return e.buffer == source; });
    const bool shared_widely = source.use_count() >= kPackAtFirstSightingHolders;
    if (it == sources_.end()) {
      if (source.use_count() < 2) return nullptr;
      if (sources_.size() >= kMaxSources) sources_.erase(sources_.begin());
      it = sources_.insert(sources_.end(), PackedSource{source, {}});
    }
    for (auto& p : it->products)
      if (p->offset == offset && same_product(p->shape, s)) return p;
    it->products.push_back(make_packed_b(s, offset));
    // Otherwise the first sighting only records the shape.
    return shared_widely ? it->products.back() : nullptr;
  }

 private:
  static constexpr size_t kMaxSources = 32;
  static bool same_product(const GemmShape& a, const GemmShape& b) {
    return a.m == b.m && a.n == b.n && a.k == b.k && a.trans_b == b.trans_b;
  }
  std::mutex mu_;
  std::vector<PackedSource> sources_;
};

// Never destroyed: its entries hold buffers, which must not go back to the allocator's cache
// after that is gone at exit.
PackedCache& packed_cache() {
  static PackedCache& cache = *new PackedCache;
  return cache;
}

std::atomic<int64_t> unpacked_sightings{0}, parts_packed{0}, packed_products{0};

// Columns [begin, end) of our B (K×N, or N×K when transposed) in the library's terms: its "A",
// (end - begin)×K column-major, and where that part's columns of C start.
struct LibraryDims {
  dnnl_dim_t m, n, k, ld_b, ld_a, ld_c;
  char trans_b, trans_a;
  int64_t b_offset, c_offset;
};
LibraryDims library_dims(const GemmShape& s, const PackedPart& part) {
  return {part.end - part.begin,
          s.m,
          s.k,
          s.trans_b ? s.k : s.n,
          s.trans_a ? s.m : s.k,
          s.n,
          s.trans_b ? 'T' : 'N',
          s.trans_a ? 'T' : 'N',
          s.trans_b ? part.begin * s.k : part.begin,
          part.begin};
}

void pack_part(const GemmShape& s, PackedPart& part, const float* b) {
  namespace lib = dnnl::impl::cpu;
  const LibraryDims d = library_dims(s, part);
  size_t bytes = 0;
  bool pack = false;
  if (lib::sgemm_pack_get_size("A", &d.trans_b, &d.trans_a, &d.m, &d.n, &d.k, &d.ld_b, &d.ld_a,
                               &bytes, &pack) != dnnl_success ||
      !pack)
    return;
  auto packed = Buffer::allocate(bytes);
  if (lib::sgemm_pack("A", &d.trans_b, &d.trans_a, &d.m, &d.n, &d.k, &d.ld_b, &d.ld_a,
                      b + d.b_offset, static_cast<float*>(packed->data())) == dnnl_success) {
    part.packed = std::move(packed);
    parts_packed.fetch_add(1, std::memory_order_relaxed);
  }
}

// Every part of `e` packed: a product takes the parts in turn from the one its arrival picks,
// so products meeting an unpacked B pack different parts at once (and then wait for the rest).
bool pack_all(PackedB& e, const float* b) {
  const size_t n = e.parts.size();
  const size_t first = e.arrivals.fetch_add(1, std::memory_order_relaxed) % n;
  bool all = true;
  for (size_t i = 0; i < n; ++i) {
    PackedPart& part = *e.parts[(first + i) % n];
    std::call_once(part.once, [&] { pack_part(e.shape, part, b); });
    all = all && part.packed;
  }
  return all;
}

// Runs the product on a packed copy of B when B is `b_buffer`'s data and has been seen before
// (or is shared widely); false when the caller should run it on dnnl_sgemm. A view's B is
// looked up as the part of its parent it is, so the devices reading one block of a buffer
// through views of their own share one packed copy of it.
bool packed_sgemm(const GemmShape& s, const float* a, const float* b, float* c,
                  const std::shared_ptr<Buffer>* b_buffer) {
  if (!b_buffer || !*b_buffer || (*b_buffer)->data() != b || s.batch != 1 || s.m < kPackedMinRows ||
      s.n * s.k < kPackedMinElements || gemm_threads(s) != 1 || !packing_available())
    return false;
  const ViewSource* view = view_source(*b_buffer);
  std::shared_ptr<PackedB> e = view ? packed_cache().find(view->parent, view->offset, s)
                                    : packed_cache().find(*b_buffer, 0, s);
  if (!e) {
    unpacked_sightings.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  if (!pack_all(*e, b)) return false;
  const char packed = 'P';
  const float beta = 0.0f;
  for (const auto& part : e->parts) {
    const LibraryDims d = library_dims(s, *part);
    if (dnnl::impl::cpu::sgemm_compute(&packed, &d.trans_a, &d.m, &d.n, &d.k,
                                       static_cast<const float*>(part->packed->data()), &d.ld_b, a,
                                       &d.ld_a, &beta, c + d.c_offset, &d.ld_c) != dnnl_success)
      return false;
  }
  packed_products.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace

PackedGemmCounts packed_gemm_counts() {
  return {unpacked_sightings.load(), parts_packed.load(), packed_products.load()};
}

int64_t matmul_primitives_created() {
  return matmuls_created.load(std::memory_order_relaxed);
}

namespace {

// float32 GEMM. One product runs on dnnl_sgemm (faster than the matmul primitive for large
// square products on one thread, and cheaper to call), or on a packed B shared with earlier
// products; a batch runs on the matmul primitive, which spreads the batch across threads.
void sgemm(const GemmShape& s, const float* a, const float* b, float* c,
           const std::shared_ptr<Buffer>* b_buffer = nullptr) {
  if (is_small(s)) return float_loop_gemm<float, float, float>(s, a, b, c);
  use_omp_threads(gemm_threads(s));
  if (packed_sgemm(s, a, b, c, b_buffer)) return;
  if (s.batch > 1 && onednn_gemm(DType::float32, DType::float32, s, a, b, c)) return;
  for (int64_t i = 0; i < s.batch; ++i)
    dnnl_sgemm(s.trans_a ? 'T' : 'N', s.trans_b ? 'T' : 'N', s.m, s.n, s.k, 1.0f, a + i * s.m * s.k,
               s.trans_a ? s.m : s.k, b + i * s.k * s.n, s.trans_b ? s.k : s.n, 0.0f,
               c + i * s.m * s.n, s.n);
}

// bfloat16 operands, float32 accumulation, result in float32 or bfloat16.
template <class Out>
void bf16_gemm(const GemmShape& s, const bfloat16_t* a, const bfloat16_t* b, Out* c) {
  constexpr DType result = dtype_of_v<Out>;
  if (is_small(s)) return float_loop_gemm<bfloat16_t, float, Out>(s, a, b, c);
  if (onednn_gemm(DType::bfloat16, result, s, a, b, c)) return;
  // No bfloat16 kernel on this CPU: widen to float32 (exact) and round the result.
  const int64_t na = s.batch * s.m * s.k, nb = s.batch * s.k * s.n, nc = s.batch * s.m * s.n;
  auto wide = Buffer::allocate(size_t(na + nb) * 4);
  float* wa = static_cast<float*>(wide->data());
  convert(a, DType::bfloat16, wa, DType::float32, na);
  convert(b, DType::bfloat16, wa + na, DType::float32, nb);
  if constexpr (result == DType::float32) {
    sgemm(s, wa, wa + na, c);
  } else {
    auto wc = Buffer::allocate(size_t(nc) * 4);
    sgemm(s, wa, wa + na, static_cast<float*>(wc->data()));
    convert(wc->data(), DType::float32, c, result, nc);
  }
}

void dgemm(const GemmShape& s, const double* a, const double* b, double* c) {
  if (is_small(s)) return float_loop_gemm<double, double, double>(s, a, b, c);
  use_openblas_threads(gemm_threads(s));
  for (int64_t i = 0; i < s.batch; ++i)
    cblas_dgemm(CblasRowMajor, s.trans_a ? CblasTrans : CblasNoTrans,
                s.trans_b ? CblasTrans : CblasNoTrans, blasint(s.m), blasint(s.n), blasint(s.k),
                1.0, a + i * s.m * s.k, blasint(s.trans_a ? s.m : s.k), b + i * s.k * s.n,
                blasint(s.trans_b ? s.k : s.n), 0.0, c + i * s.m * s.n, blasint(s.n));
}

// ---- dot_general planning ---------------------------------------------------------------------
// The dtypes a dot_general computes in, following XLA:CPU. Operands of different dtypes (and
// integer operands of a float or wider product) are first converted to the output dtype; then
// 16-bit floats accumulate in float32, float64 anywhere makes it float64, and integers compute
// in the output type.
struct ComputeTypes {
  DType input;    // what each operand is converted to first
  DType operand;  // what the GEMM reads
  DType result;   // what the GEMM writes
};
ComputeTypes compute_types(DType lhs, DType rhs, DType out) {
  const DType input = (lhs != rhs || (!is_floating(lhs) && out != lhs)) ? out : lhs;
  if (!is_floating(input)) return {input, input, input};
  if (input == DType::float64 || out == DType::float64)
    return {input, DType::float64, DType::float64};
  if (input == DType::bfloat16)
    return {input, DType::bfloat16, out == DType::bfloat16 ? DType::bfloat16 : DType::float32};
  return {input, DType::float32, DType::float32};
}

std::vector<int64_t> free_dims(int ndim, const std::vector<int64_t>& contract,
                               const std::vector<int64_t>& batch) {
  std::vector<int64_t> out;
  for (int64_t d = 0; d < ndim; ++d)
    if (std::find(contract.begin(), contract.end(), d) == contract.end() &&
        std::find(batch.begin(), batch.end(), d) == batch.end())
      out.push_back(d);
  return out;
}

int64_t product(const Shape& shape, const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= shape[int(d)];
  return p;
}

std::vector<int64_t> concat(std::initializer_list<const std::vector<int64_t>*> parts) {
  std::vector<int64_t> out;
  for (const auto* p : parts) out.insert(out.end(), p->begin(), p->end());
  return out;
}

// Whether reading the operand in `perm` order walks its memory in order (size-1 dims do not
// move anything, so they may sit anywhere).
bool is_in_order(const Shape& shape, const std::vector<int64_t>& perm) {
  int64_t last = -1;
  for (int64_t d : perm) {
    if (shape[int(d)] == 1) continue;
    if (d < last) return false;
    last = d;
  }
  return true;
}

// One operand as the GEMM will read it.
struct GemmOperand {
  const void* data;
  bool transposed;
  std::shared_ptr<Buffer> storage;  // owns packed or converted data
};

// Brings an operand into `plain` order (batch, rows, K-or-cols), or the `transposed` order when
// its memory already is in that one and the kernel reads it, converting it through ct.input to
// ct.operand.
GemmOperand prepare(const void* data, DType from, const Shape& shape, const ComputeTypes& ct,
                    const std::vector<int64_t>& plain, const std::vector<int64_t>& transposed,
                    bool allow_transposed) {
  GemmOperand op{data, false, nullptr};
  const int64_t n = shape.size();
  if (!is_in_order(shape, plain)) {
    if (allow_transposed && is_in_order(shape, transposed)) {
      op.transposed = true;
    } else {
      const std::vector<int64_t> strides = shape.strides();
      std::vector<int64_t> in_strides, out_dims;
      for (int64_t d : plain) {
        in_strides.push_back(strides[size_t(d)]);
        out_dims.push_back(shape[int(d)]);
      }
      op.storage = Buffer::allocate(size_t(n * itemsize(from)));
      strided_copy(data, in_strides, op.storage->data(), Shape(out_dims), itemsize(from));
      op.data = op.storage->data();
    }
  }
  for (DType to : {ct.input, ct.operand}) {
    if (from == to) continue;
    auto converted = Buffer::allocate(size_t(n * itemsize(to)));
    convert(op.data, from, converted->data(), to, n);
    op.storage = std::move(converted);
    op.data = op.storage->data();
    from = to;
  }
  return op;
}

// Orders of the contracting-dimension pairs worth trying: as given, by lhs dim, by rhs dim.
std::vector<std::vector<size_t>> contract_orders(const lax::DotDimensionNumbers& dims) {
  std::vector<size_t> given(dims.lhs_contracting.size());
  std::iota(given.begin(), given.end(), size_t(0));
  auto by = [&](const std::vector<int64_t>& key) {
    std::vector<size_t> order = given;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t x, size_t y) { return key[x] < key[y]; });
    return order;
  };
  return {given, by(dims.lhs_contracting), by(dims.rhs_contracting)};
}

std::vector<int64_t> pick(const std::vector<int64_t>& v, const std::vector<size_t>& order) {
  std::vector<int64_t> out;
  for (size_t i : order) out.push_back(v[i]);
  return out;
}

// The GEMM-ready orders of both operands for one ordering of the contracting pairs.
struct OperandOrders {
  std::vector<int64_t> lhs_plain, lhs_trans, rhs_plain, rhs_trans;
};
OperandOrders operand_orders(const lax::DotDimensionNumbers& dims, const std::vector<size_t>& order,
                             const std::vector<int64_t>& lhs_free,
                             const std::vector<int64_t>& rhs_free) {
  const std::vector<int64_t> lc = pick(dims.lhs_contracting, order);
  const std::vector<int64_t> rc = pick(dims.rhs_contracting, order);
  return {concat({&dims.lhs_batch, &lhs_free, &lc}), concat({&dims.lhs_batch, &lc, &lhs_free}),
          concat({&dims.rhs_batch, &rc, &rhs_free}), concat({&dims.rhs_batch, &rhs_free, &rc})};
}

// Elements that would have to be packed under these orders.
int64_t packing_cost(const OperandOrders& o, const Shape& lhs, const Shape& rhs) {
  int64_t cost = 0;
  if (!is_in_order(lhs, o.lhs_plain) && !is_in_order(lhs, o.lhs_trans)) cost += lhs.size();
  if (!is_in_order(rhs, o.rhs_plain) && !is_in_order(rhs, o.rhs_trans)) cost += rhs.size();
  return cost;
}

}  // namespace

bool gemm_supports(DType operand, DType result) {
  if (operand == DType::bfloat16) return result == DType::float32 || result == DType::bfloat16;
  if (operand == DType::float16) return false;
  return operand == result;
}

namespace {

// A product with K = 1 is an outer product: each element one multiply, as XLA rewrites such a
// dot. A GEMM would add it to a zero accumulator, which turns -0 (0 times a negative) into +0.
// With K = 1 both operand orders have the same layout.
template <class T>
void outer_product(const GemmShape& s, const T* a, const T* b, T* c) {
  for (int64_t batch = 0; batch < s.batch; ++batch, a += s.m, b += s.n)
    for (int64_t i = 0; i < s.m; ++i, c += s.n)
      for (int64_t j = 0; j < s.n; ++j) c[j] = a[i] * b[j];
}

}  // namespace

void gemm(DType operand, DType result, const GemmShape& s, const void* a, const void* b, void* c,
          const std::shared_ptr<Buffer>* b_buffer) {
  const int64_t nc = s.batch * s.m * s.n;
  if (nc == 0) return;
  if (s.k == 0) {
    std::memset(c, 0, size_t(nc * itemsize(result)));
    return;
  }
  if (s.k == 1 && operand == result && operand == DType::float32)
    return outer_product(s, static_cast<const float*>(a), static_cast<const float*>(b),
                         static_cast<float*>(c));
  if (s.k == 1 && operand == result && operand == DType::float64)
    return outer_product(s, static_cast<const double*>(a), static_cast<const double*>(b),
                         static_cast<double*>(c));
  switch (operand) {
    case DType::float32:
      return sgemm(s, static_cast<const float*>(a), static_cast<const float*>(b),
                   static_cast<float*>(c), b_buffer);
    case DType::float64:
      return dgemm(s, static_cast<const double*>(a), static_cast<const double*>(b),
                   static_cast<double*>(c));
    case DType::bfloat16: {
      auto pa = static_cast<const bfloat16_t*>(a), pb = static_cast<const bfloat16_t*>(b);
      if (result == DType::bfloat16) return bf16_gemm(s, pa, pb, static_cast<bfloat16_t*>(c));
      return bf16_gemm(s, pa, pb, static_cast<float*>(c));
    }
    case DType::bool_:
      return bool_loop_gemm(s, static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b),
                            static_cast<uint8_t*>(c));
    default:
      dispatch_dtype(operand, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
          int_loop_gemm(s, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(c));
      });
  }
}

void dot_general(const void* lhs, DType lhs_dtype, const Shape& lhs_shape, const void* rhs,
                 DType rhs_dtype, const Shape& rhs_shape, const lax::DotDimensionNumbers& dims,
                 void* out, DType out_dtype, const std::shared_ptr<Buffer>* rhs_buffer) {
  const auto lhs_free = free_dims(lhs_shape.ndim(), dims.lhs_contracting, dims.lhs_batch);
  const auto rhs_free = free_dims(rhs_shape.ndim(), dims.rhs_contracting, dims.rhs_batch);
  GemmShape s;
  s.batch = product(lhs_shape, dims.lhs_batch);
  s.m = product(lhs_shape, lhs_free);
  s.n = product(rhs_shape, rhs_free);
  s.k = product(lhs_shape, dims.lhs_contracting);
  const int64_t n_out = s.batch * s.m * s.n;
  if (n_out == 0) return;
  if (s.k == 0) {
    std::memset(out, 0, size_t(n_out * itemsize(out_dtype)));
    return;
  }

  OperandOrders orders;
  int64_t best = -1;
  for (const auto& order : contract_orders(dims)) {
    OperandOrders o = operand_orders(dims, order, lhs_free, rhs_free);
    int64_t cost = packing_cost(o, lhs_shape, rhs_shape);
    if (best < 0 || cost < best) best = cost, orders = std::move(o);
  }

  const ComputeTypes ct = compute_types(lhs_dtype, rhs_dtype, out_dtype);
  GemmOperand b = prepare(rhs, rhs_dtype, rhs_shape, ct, orders.rhs_plain, orders.rhs_trans,
                          /*allow_transposed=*/true);
  // The loop kernels read a transposed A well only when B is not transposed too.
  const bool library_kernel = is_floating(ct.operand);
  GemmOperand a = prepare(lhs, lhs_dtype, lhs_shape, ct, orders.lhs_plain, orders.lhs_trans,
                          library_kernel || !b.transposed);
  s.trans_a = a.transposed;
  s.trans_b = b.transposed;

  // A packed or converted B is this call's own copy, not the buffer's data.
  const std::shared_ptr<Buffer>* b_buffer = b.storage ? nullptr : rhs_buffer;
  if (ct.result == out_dtype) return gemm(ct.operand, ct.result, s, a.data, b.data, out, b_buffer);
  auto result = Buffer::allocate(size_t(n_out * itemsize(ct.result)));
  gemm(ct.operand, ct.result, s, a.data, b.data, result->data(), b_buffer);
  convert(result->data(), ct.result, out, out_dtype, n_out);
}

}  // namespace spmd::cpu

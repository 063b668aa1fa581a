// One thread's float32 FMA peak, and the per-device products of a `spmd train` step at batch
// 1024 on every single-thread kernel this machine offers: dnnl_sgemm, oneDNN's packed GEMM on a
// B packed beforehand (what spmd's packed path runs), the matmul primitive (brgemm) on plain
// weights and on weights reordered once to the layout it picks (format_tag::any), and OpenBLAS.
// Rates are GFLOP per second of the thread's CPU clock (a loaded machine stretches wall time,
// not this), the median of 5 runs of 0.3 s each. Not part of the library build; from the
// repository root:
//   g++ -O2 -march=native -std=c++20 tools/train_gemm_candidates.cpp -ldnnl -lopenblas -o /tmp/tgc
//   OMP_NUM_THREADS=1 /tmp/tgc
#include <cblas.h>
#include <immintrin.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <functional>
#include <vector>

// oneDNN 2.6 exports its packed-GEMM entry points without declaring them (as gemm.cpp does).
namespace dnnl::impl::cpu {
dnnl_status_t sgemm_pack_get_size(const char*, const char*, const char*, const dnnl_dim_t*,
                                  const dnnl_dim_t*, const dnnl_dim_t*, const dnnl_dim_t*,
                                  const dnnl_dim_t*, size_t*, bool*);
dnnl_status_t sgemm_pack(const char*, const char*, const char*, const dnnl_dim_t*,
                         const dnnl_dim_t*, const dnnl_dim_t*, const dnnl_dim_t*,
                         const dnnl_dim_t*, const float*, float*);
dnnl_status_t sgemm_compute(const char*, const char*, const dnnl_dim_t*, const dnnl_dim_t*,
                            const dnnl_dim_t*, const float*, const dnnl_dim_t*, const float*,
                            const dnnl_dim_t*, const float*, float*, const dnnl_dim_t*);
}  // namespace dnnl::impl::cpu

namespace {

double thread_cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// GFLOP per CPU-second of `run`, which does `flop` operations: the median of 5 runs of 0.3 s.
double rate(double flop, const std::function<void()>& run) {
  run();
  std::vector<double> rates;
  for (int rep = 0; rep < 5; ++rep) {
    int calls = 0;
    const double start = thread_cpu_seconds();
    while (thread_cpu_seconds() - start < 0.3) run(), ++calls;
    rates.push_back(flop * calls / (thread_cpu_seconds() - start) / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  return rates[2];
}

// 12 independent chains of 16-wide FMAs: more than the FMA units' latency times their count.
double fma_peak() {
  constexpr int kChains = 12;
  constexpr long kIterations = 50'000'000;
  const double start = thread_cpu_seconds();
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(0.001f * float(i));
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  for (long it = 0; it < kIterations; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
  __m512 sum = acc[0];
  for (int i = 1; i < kChains; ++i) sum = _mm512_add_ps(sum, acc[i]);
  float lanes[16];
  _mm512_storeu_ps(lanes, sum);
  volatile float sink = lanes[0];
  (void)sink;
  return double(kIterations) * kChains * 16 * 2 / (thread_cpu_seconds() - start) / 1e9;
}

struct Shape {
  long m, n, k;
  bool trans_a, trans_b;
};

dnnl::memory::desc matrix(long rows, long cols, bool transposed) {
  using dims = dnnl::memory::dims;
  return {{rows, cols},
          dnnl::memory::data_type::f32,
          transposed ? dims{1, rows} : dims{cols, 1}};
}

void compare(const Shape& s, dnnl::engine& engine, dnnl::stream& stream) {
  std::vector<float> a(size_t(s.m * s.k)), b(size_t(s.k * s.n)), c(size_t(s.m * s.n));
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(i % 17) * 0.01f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = float(i % 13) * 0.01f;
  const double flop = 2.0 * double(s.m * s.n * s.k);
  const long lda = s.trans_a ? s.m : s.k, ldb = s.trans_b ? s.k : s.n;
  const char ta = s.trans_a ? 'T' : 'N', tb = s.trans_b ? 'T' : 'N';
  const double sgemm = rate(flop, [&] {
    dnnl_sgemm(ta, tb, s.m, s.n, s.k, 1.f, a.data(), lda, b.data(), ldb, 0.f, c.data(), s.n);
  });
  const double openblas = rate(flop, [&] {
    cblas_sgemm(CblasRowMajor, s.trans_a ? CblasTrans : CblasNoTrans,
                s.trans_b ? CblasTrans : CblasNoTrans, int(s.m), int(s.n), int(s.k), 1.f, a.data(),
                int(lda), b.data(), int(ldb), 0.f, c.data(), int(s.n));
  });
  // The library is column-major: our B is its "A".
  const dnnl_dim_t lm = s.n, ln = s.m, lk = s.k, l_ldb = ldb, l_lda = lda, l_ldc = s.n;
  size_t bytes = 0;
  bool pack = false;
  dnnl::impl::cpu::sgemm_pack_get_size("A", &tb, &ta, &lm, &ln, &lk, &l_ldb, &l_lda, &bytes, &pack);
  std::vector<float> packed(bytes / sizeof(float) + 16);
  dnnl::impl::cpu::sgemm_pack("A", &tb, &ta, &lm, &ln, &lk, &l_ldb, &l_lda, b.data(),
                              packed.data());
  const char p = 'P';
  const float beta = 0;
  const double packed_rate = rate(flop, [&] {
    dnnl::impl::cpu::sgemm_compute(&p, &ta, &lm, &ln, &lk, packed.data(), &l_ldb, a.data(), &l_lda,
                                   &beta, c.data(), &l_ldc);
  });
  const auto ad = matrix(s.m, s.k, s.trans_a), bd = matrix(s.k, s.n, s.trans_b),
             cd = matrix(s.m, s.n, false);
  dnnl::memory ma(ad, engine, a.data()), mb(bd, engine, b.data()), mc(cd, engine, c.data());
  dnnl::matmul::primitive_desc plain_pd(dnnl::matmul::desc(ad, bd, cd), engine);
  dnnl::matmul plain(plain_pd);
  const double plain_rate = rate(flop, [&] {
    plain.execute(stream, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
    stream.wait();
  });
  const dnnl::memory::desc any({s.k, s.n}, dnnl::memory::data_type::f32,
                               dnnl::memory::format_tag::any);
  dnnl::matmul::primitive_desc any_pd(dnnl::matmul::desc(ad, any, cd), engine);
  dnnl::memory reordered(any_pd.weights_desc(), engine);
  dnnl::reorder(mb, reordered).execute(stream, mb, reordered);
  stream.wait();
  dnnl::matmul any_weights(any_pd);
  const double any_rate = rate(flop, [&] {
    any_weights.execute(stream,
                        {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, reordered}, {DNNL_ARG_DST, mc}});
    stream.wait();
  });
  std::printf("[%ld, %ld] x [%ld, %ld]%s%s: sgemm %.1f  packed %.1f  matmul %.1f (%s)  "
              "matmul on reordered weights %.1f (%s)  openblas %.1f\n",
              s.m, s.k, s.k, s.n, s.trans_a ? " A^T" : "", s.trans_b ? " B^T" : "", sgemm,
              packed_rate, plain_rate, plain_pd.impl_info_str(), any_rate,
              any_pd.impl_info_str(), openblas);
}

}  // namespace

int main() {
  openblas_set_num_threads(1);
  std::printf("one thread's FMA peak: %.1f GFLOP per CPU-second\n", fma_peak());
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  // --mesh 8: x·Wᵀ of layers 1-2 and 0, dy·W, the weight gradients computed where they are kept;
  // then the one-device step's 1024-row products.
  const Shape shapes[] = {{128, 1024, 1024, false, true}, {128, 1024, 784, false, true},
                          {128, 1024, 1024, false, false}, {128, 1024, 1024, true, false},
                          {128, 784, 1024, true, false},  {1024, 1024, 1024, false, true},
                          {1024, 1024, 1024, false, false}, {1024, 1024, 1024, true, false}};
  for (const Shape& s : shapes) compare(s, engine, stream);
}

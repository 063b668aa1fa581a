// GEMM throughput probe: float32 through spmd::matmul against raw oneDNN (dnnl_sgemm and the
// matmul primitive), and float64 through OpenBLAS against Eigen, on 1 and 2 threads. Prints
// GFLOP/s (best of several runs). Not part of the library build; build it by hand from the
// repository root against a built library (here build-linalg):
//   g++ -O3 -march=native -std=c++20 -fopenmp tools/gemm_probe.cpp -Iinclude \
//     -I/usr/include/eigen3 $(pkg-config --cflags openblas) -Lbuild-linalg -lspmd \
//     -Wl,-rpath,$PWD/build-linalg -ldnnl $(pkg-config --libs openblas) -o /tmp/gemm_probe
//   /tmp/gemm_probe [f32|bf16|f64|all] [threads, e.g. 1 or 2; default both]
#include <spmd/spmd.h>

#include <cblas.h>
#include <omp.h>
#include <Eigen/Core>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// GFLOP/s of the best run; runs repeat until about a second has passed (at least 3).
double gflops(int64_t n, const std::function<void()>& run) {
  run();  // warm-up: primitive creation, first-touch of pages, thread start
  double best = 1e30, spent = 0;
  for (int i = 0; i < 3 || (spent < 1.0 && i < 50); ++i) {
    double t = seconds();
    run();
    double dt = seconds() - t;
    best = std::min(best, dt);
    spent += dt;
  }
  return 2.0 * double(n) * double(n) * double(n) / best * 1e-9;
}

void set_threads(int n) {
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
  Eigen::setNbThreads(n);
  spmd::config::set_num_threads(n);
}

double onednn_matmul(int64_t n, const float* a, const float* b, float* c) {
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  dnnl::memory::desc d({n, n}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab);
  dnnl::matmul mm(dnnl::matmul::primitive_desc(dnnl::matmul::desc(d, d, d), engine));
  dnnl::memory ma(d, engine, const_cast<float*>(a)), mb(d, engine, const_cast<float*>(b)),
      mc(d, engine, c);
  return gflops(n, [&] {
    mm.execute(stream, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
    stream.wait();
  });
}

void probe_f32(const std::vector<int>& threads) {
  std::printf("float32 GEMM, GFLOP/s (n×n · n×n)\n");
  std::printf("%7s %4s %12s %14s %12s %8s\n", "n", "thr", "dnnl_sgemm", "dnnl matmul", "spmd",
              "spmd/sgemm");
  for (int t : threads) {
    set_threads(t);
    for (int64_t n : {256, 1024, 2048, 4096}) {
      std::vector<float> a(size_t(n * n)), b(size_t(n * n)), c(size_t(n * n));
      for (size_t i = 0; i < a.size(); ++i) a[i] = float(i % 7) - 3, b[i] = float(i % 5) - 2;
      double raw = gflops(n, [&] {
        dnnl_sgemm('N', 'N', n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
      });
      double prim = onednn_matmul(n, a.data(), b.data(), c.data());
      spmd::Array x = spmd::array(a, {n, n}), y = spmd::array(b, {n, n});
      double ours = gflops(n, [&] { spmd::matmul(x, y).block_until_ready(); });
      std::printf("%7ld %4d %12.1f %14.1f %12.1f %7.0f%%\n", long(n), t, raw, prim, ours,
                  100 * ours / raw);
    }
  }
}

void probe_bf16(const std::vector<int>& threads) {
  std::printf("bfloat16 GEMM through spmd::matmul (float32 accumulation), GFLOP/s\n");
  for (int t : threads) {
    set_threads(t);
    for (int64_t n : {1024, 2048}) {
      spmd::Array x = spmd::ones({n, n}, spmd::bfloat16), y = spmd::ones({n, n}, spmd::bfloat16);
      double ours = gflops(n, [&] { spmd::matmul(x, y).block_until_ready(); });
      std::printf("%7ld %4d %12.1f\n", long(n), t, ours);
    }
  }
}

void probe_f64(const std::vector<int>& threads) {
  std::printf("float64 GEMM, GFLOP/s\n");
  std::printf("%7s %4s %12s %12s %12s\n", "n", "thr", "OpenBLAS", "Eigen", "spmd");
  for (int t : threads) {
    set_threads(t);
    for (int64_t n : {1024, 4096}) {
      Eigen::MatrixXd ea = Eigen::MatrixXd::Random(n, n), eb = Eigen::MatrixXd::Random(n, n);
      Eigen::MatrixXd ec(n, n);
      double blas = gflops(n, [&] {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(n), int(n), int(n), 1.0,
                    ea.data(), int(n), eb.data(), int(n), 0.0, ec.data(), int(n));
      });
      double eigen = gflops(n, [&] { ec.noalias() = ea * eb; });
      spmd::config::enable_x64(true);
      spmd::Array x = spmd::ones({n, n}, spmd::float64), y = spmd::ones({n, n}, spmd::float64);
      double ours = gflops(n, [&] { spmd::matmul(x, y).block_until_ready(); });
      spmd::config::enable_x64(false);
      std::printf("%7ld %4d %12.1f %12.1f %12.1f\n", long(n), t, blas, eigen, ours);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string what = argc > 1 ? argv[1] : "all";
  std::vector<int> threads{1, 2};
  if (argc > 2) threads = {std::atoi(argv[2])};
  if (what == "f32" || what == "all") probe_f32(threads);
  if (what == "bf16" || what == "all") probe_bf16(threads);
  if (what == "f64" || what == "all") probe_f64(threads);
  return 0;
}

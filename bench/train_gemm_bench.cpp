// The GEMM floor of one `spmd train` step (the MLP 784-1024-1024-1024-10 at batch 1024): every
// device runs its share of the step's products (forward, the gradients of the inputs and of the
// weights) through spmd's own GEMM kernel, all devices at once on their own threads with the
// kernel thread count the runtime gives them. The time per step times the steps of an epoch is
// what the epoch would take if it did nothing but its GEMMs; on a busy machine, cpu_floor_s (the
// CPU time the GEMMs took, spread over every core) says the same.
//
//   build/bench/spmd_bench --benchmark_filter=TrainGemm
#include "backends/cpu/gemm.h"
#include "backends/cpu/parallel.h"
#include "core/buffer.h"

#include <spmd/config.h>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <barrier>
#include <cstring>
#include <ctime>
#include <memory>
#include <thread>
#include <vector>

namespace {

namespace cpu = spmd::cpu;

constexpr int64_t kBatch = 1024;
constexpr int64_t kStepsPerEpoch = 60000 / kBatch;

// One device's products for a layer of `in` → `out` features at `rows` samples per device:
// y = x·Wᵀ (W stored out×in), dx = dy·W (skipped for the first layer, whose input is data) and
// dW = dyᵀ·x.
void layer_products(int64_t rows, int64_t in, int64_t out, bool input_grad,
                    std::vector<cpu::GemmShape>& products) {
  products.push_back({.batch = 1, .m = rows, .n = out, .k = in, .trans_b = true});
  if (input_grad) products.push_back({.batch = 1, .m = rows, .n = in, .k = out});
  products.push_back({.batch = 1, .m = out, .n = in, .k = rows, .trans_a = true});
}

// A device's products on a data × model mesh: the batch split `data` ways, layer 1's outputs
// and layer 2's inputs split `model` ways (the seed's column- and row-parallel layers), and
// layer 0's outputs split `model` ways too (as spmd train lays them out).
std::vector<cpu::GemmShape> device_products(int64_t data, int64_t model) {
  const int64_t rows = kBatch / data;
  std::vector<cpu::GemmShape> products;
  layer_products(rows, 784, 1024 / model, false, products);
  layer_products(rows, 1024, 1024 / model, true, products);
  layer_products(rows, 1024 / model, 1024, true, products);
  layer_products(rows, 1024, 10, true, products);
  return products;
}

// CPU time of every thread of the process: under a load that shares the cores it still says
// what the GEMMs cost.
double process_cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

double flops(const std::vector<cpu::GemmShape>& products) {
  double total = 0;
  for (const auto& s : products) total += 2.0 * double(s.batch * s.m * s.n * s.k);
  return total;
}

// Runs one step's products on one device thread.
struct Device {
  explicit Device(const std::vector<cpu::GemmShape>& products) : products(products) {
    int64_t biggest = 0;
    for (const auto& s : products) biggest = std::max({biggest, s.m * s.k, s.k * s.n, s.m * s.n});
    a.assign(size_t(biggest), 0.5f);
    b.assign(size_t(biggest), 0.25f);
    c.assign(size_t(biggest), 0.0f);
  }
  void step() {
    for (const auto& s : products)
      cpu::gemm(spmd::DType::float32, spmd::DType::float32, s, a.data(), b.data(), c.data());
  }
  std::vector<cpu::GemmShape> products;
  std::vector<float> a, b, c;
};

void BM_TrainGemm(benchmark::State& state) {
  const int64_t data = state.range(0), model = state.range(1), devices = data * model;
  const int threads = std::max(1, spmd::config::num_threads() / int(devices));
  const std::vector<cpu::GemmShape> products = device_products(data, model);
  // Device threads live through the whole run (as the runtime's do): a thread made per step would
  // bring a fresh OpenMP team each time, whose idle threads spin beside the next one.
  std::barrier sync(devices + 1);
  bool stop = false;
  std::vector<std::thread> running;
  for (int64_t i = 0; i < devices; ++i)
    running.emplace_back([&] {
      cpu::DenormalsAreZero ftz;
      cpu::set_thread_limit(threads);
      Device d(products);
      for (;;) {
        sync.arrive_and_wait();
        if (stop) return;
        d.step();
        sync.arrive_and_wait();
      }
    });
  const double cpu_start = process_cpu_seconds();
  for (auto _ : state) {
    sync.arrive_and_wait();
    sync.arrive_and_wait();
  }
  const double cpu_per_step = (process_cpu_seconds() - cpu_start) / double(state.iterations());
  stop = true;
  sync.arrive_and_wait();
  for (auto& t : running) t.join();
  const double step_flops = flops(products) * double(devices);
  state.counters["FLOPS"] =
      benchmark::Counter(step_flops, benchmark::Counter::kIsIterationInvariantRate);
  // What a machine as busy as this one was gives per CPU-second, and the epoch's GEMM time if
  // every core did nothing else.
  state.counters["FLOP_per_cpu_s"] = step_flops / cpu_per_step;
  state.counters["cpu_floor_s"] =
      cpu_per_step * double(kStepsPerEpoch) / double(spmd::config::num_threads());
  // Seconds per epoch: the inverse of (1 / steps per epoch) × steps per second.
  state.counters["epoch_s"] = benchmark::Counter(
      1.0 / double(kStepsPerEpoch),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// One product of a step alone on this thread, under the thread's CPU clock (a busy machine
// stretches the wall time, not this): GFLOP per CPU-second of each shape. With `shared_b`, B is
// a buffer that two holders share (as a weight the devices of a process read), so the kernel
// packs it once and every later product reads the packed copy.
void BM_TrainGemmShape(benchmark::State& state) {
  const cpu::GemmShape s{.batch = 1,
                         .m = state.range(0),
                         .n = state.range(1),
                         .k = state.range(2),
                         .trans_a = state.range(3) != 0,
                         .trans_b = state.range(4) != 0};
  cpu::set_thread_limit(1);
  Device d({s});
  std::shared_ptr<spmd::Buffer> b;
  if (state.range(5)) {
    b = spmd::Buffer::allocate(d.b.size() * sizeof(float));
    std::memcpy(b->data(), d.b.data(), d.b.size() * sizeof(float));
  }
  const std::shared_ptr<spmd::Buffer> other_holder = b;
  for (auto _ : state) {
    if (b)
      cpu::gemm(spmd::DType::float32, spmd::DType::float32, s, d.a.data(), b->data(), d.c.data(),
                &b);
    else
      d.step();
  }
  state.counters["FLOP_per_cpu_s"] = benchmark::Counter(
      flops({s}), benchmark::Counter::kIsIterationInvariant | benchmark::Counter::kIsRate);
}

}  // namespace

BENCHMARK(BM_TrainGemmShape)
    ->ArgNames({"m", "n", "k", "ta", "tb", "shared_b"})
    ->Args({128, 1024, 1024, 0, 1, 0})
    ->Args({128, 1024, 1024, 0, 1, 1})
    ->Args({128, 1024, 1024, 0, 0, 0})
    ->Args({128, 1024, 1024, 0, 0, 1})
    ->Args({128, 1024, 1024, 1, 0, 0})
    ->Args({128, 1024, 784, 0, 1, 0})
    ->Args({128, 1024, 784, 0, 1, 1})
    ->Args({128, 784, 1024, 1, 0, 0})
    ->Args({1024, 1024, 128, 1, 0, 0})
    ->Args({1024, 1024, 1024, 0, 0, 0})
    ->Args({1024, 1024, 1024, 0, 0, 1})
    ->Args({1024, 1024, 1024, 0, 1, 0})
    ->Args({1024, 1024, 1024, 0, 1, 1})
    ->Args({1024, 1024, 1024, 1, 0, 0})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5);

BENCHMARK(BM_TrainGemm)
    ->ArgNames({"data", "model"})
    ->Args({1, 1})
    ->Args({8, 1})
    ->Args({4, 2})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);

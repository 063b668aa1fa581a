// Throughput of spmd's eager operations beside the machine's limits: f32 matmul against raw
// oneDNN sgemm, elementwise ops against memcpy bandwidth, reductions, and eager dispatch latency.
#include <spmd/spmd.h>

#include <benchmark/benchmark.h>
#include <dnnl.h>

#include <cstring>
#include <thread>
#include <vector>

namespace sp = spmd;

namespace {

sp::Array random_f32(const sp::Shape& shape) {
  return sp::random::uniform(sp::random::key(7), shape, sp::float32, -2.0, 2.0);
}

void BM_Matmul(benchmark::State& state) {
  const int64_t n = state.range(0);
  sp::Array a = random_f32({n, n}), b = random_f32({n, n});
  for (auto _ : state) benchmark::DoNotOptimize(sp::matmul(a, b).block_until_ready());
  state.counters["FLOPS"] =
      benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_RawSgemm(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<float> a(size_t(n * n), 1.0f), b(size_t(n * n), 0.5f), c(size_t(n * n));
  for (auto _ : state) {
    dnnl_sgemm('N', 'N', n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["FLOPS"] =
      benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
}

template <class F>
void elementwise(benchmark::State& state, F&& op, int streams) {
  const int64_t n = state.range(0);
  sp::Array x = random_f32({n}), y = random_f32({n});
  for (auto _ : state) benchmark::DoNotOptimize(op(x, y).block_until_ready());
  state.SetBytesProcessed(int64_t(state.iterations()) * n * 4 * streams);
}

void BM_Add(benchmark::State& s) {
  elementwise(
      s, [](auto& x, auto& y) { return x + y; }, 3);
}
void BM_Sin(benchmark::State& s) {
  elementwise(
      s, [](auto& x, auto&) { return sp::sin(x); }, 2);
}
void BM_Tanh(benchmark::State& s) {
  elementwise(
      s, [](auto& x, auto&) { return sp::tanh(x); }, 2);
}
void BM_Exp(benchmark::State& s) {
  elementwise(
      s, [](auto& x, auto&) { return sp::exp(x); }, 2);
}

// A jitted chain of six elementwise operations on two inputs: one fused pass over memory (three
// streams) where unfused kernels make six.
sp::Array chain(const sp::Array& x, const sp::Array& y) {
  return ((x * 2.0f + y) * 0.5f - x) * y + 1.0f;
}
void BM_JitChain(benchmark::State& s) {
  auto f = sp::jit(chain);
  elementwise(
      s, [&](auto& x, auto& y) { return f(x, y); }, 3);
}

// One Adam step on a parameter vector (moments in, moments and parameters out): the optimizer
// update a training loop runs on every weight, about a dozen elementwise operations.
void BM_JitAdam(benchmark::State& state) {
  const int64_t n = state.range(0);
  auto step =
      sp::jit([](const sp::Array& w, const sp::Array& g, const sp::Array& m, const sp::Array& v) {
        sp::Array m2 = m * 0.9f + g * 0.1f, v2 = v * 0.999f + sp::square(g) * 0.001f;
        sp::Array w2 = w - (m2 / 0.1f) * 1e-3f / (sp::sqrt(v2 / 0.001f) + 1e-8f);
        return std::vector<sp::Array>{w2, m2, v2};
      });
  sp::Array w = random_f32({n}), g = random_f32({n}), m = random_f32({n}) * 0.1f,
            v = sp::abs(random_f32({n}));
  for (auto _ : state) benchmark::DoNotOptimize(step(w, g, m, v)[0].block_until_ready());
  state.SetBytesProcessed(int64_t(state.iterations()) * n * 4 * 7);
}

// The bandwidth limit: copying n floats into a reused buffer, on one or two threads.
void BM_Memcpy(benchmark::State& state) {
  const size_t n = size_t(state.range(0)), threads = size_t(state.range(1));
  std::vector<float> src(n, 1.0f), dst(n);
  for (auto _ : state) {
    std::vector<std::thread> pool;
    size_t chunk = n / threads;
    for (size_t t = 1; t < threads; ++t)
      pool.emplace_back([&, t] { std::memcpy(&dst[t * chunk], &src[t * chunk], chunk * 4); });
    std::memcpy(dst.data(), src.data(), chunk * 4);
    for (auto& t : pool) t.join();
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(n) * 4 * 2);
}

void BM_SumAll(benchmark::State& state) {
  sp::Array x = random_f32({state.range(0)});
  for (auto _ : state) benchmark::DoNotOptimize(sp::sum(x).block_until_ready());
  state.SetBytesProcessed(int64_t(state.iterations()) * state.range(0) * 4);
}

void BM_SumAxis(benchmark::State& state) {
  sp::Array x = random_f32({4096, 4096});
  const int axis = int(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(sp::sum(x, {axis}).block_until_ready());
  state.SetBytesProcessed(int64_t(state.iterations()) * 4096 * 4096 * 4);
}

void BM_EagerTinyAdd(benchmark::State& state) {
  sp::Array x = sp::ones({4}), y = sp::ones({4});
  for (auto _ : state) benchmark::DoNotOptimize(sp::add(x, y));
}

}  // namespace

BENCHMARK(BM_Matmul)->Arg(256)->Arg(512)->Arg(1024)->Arg(2048)->Arg(4096)->UseRealTime();
BENCHMARK(BM_RawSgemm)
    ->Arg(256)
    ->Arg(512)
    ->Arg(1024)
    ->Arg(2048)
    ->Arg(4096)
    ->Arg(8192)  // the limit of BM_PartitionMatmul
    ->UseRealTime();
BENCHMARK(BM_Add)->Arg(1 << 20)->Arg(1 << 22)->Arg(1 << 24)->Arg(1 << 26)->UseRealTime();
BENCHMARK(BM_Sin)->Arg(1 << 20)->Arg(1 << 22)->Arg(1 << 24)->Arg(1 << 26)->UseRealTime();
BENCHMARK(BM_Tanh)->Arg(1 << 20)->Arg(1 << 22)->Arg(1 << 24)->Arg(1 << 26)->UseRealTime();
BENCHMARK(BM_Exp)->Arg(1 << 20)->Arg(1 << 22)->Arg(1 << 24)->Arg(1 << 26)->UseRealTime();
BENCHMARK(BM_JitChain)->Arg(1 << 20)->Arg(1 << 24)->UseRealTime();
BENCHMARK(BM_JitAdam)->Arg(1 << 20)->Arg(1 << 24)->UseRealTime();
BENCHMARK(BM_Memcpy)->Args({1 << 26, 1})->Args({1 << 26, 2})->UseRealTime();
BENCHMARK(BM_SumAll)->Arg(1 << 24)->UseRealTime();
BENCHMARK(BM_SumAxis)->Arg(0)->Arg(1)->UseRealTime();
BENCHMARK(BM_EagerTinyAdd);

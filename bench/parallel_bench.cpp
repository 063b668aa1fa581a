// pmap workloads of the Pmap Cookbook on 8 virtual devices: the parallel matmul of 8 random
// 5000 x 6000 matrices with their transposes, and sin over 8192 x 8192 elements split across
// the devices. bench/compare/run.py times the same in JAX with 8 host devices.
#include <spmd/spmd.h>

#include <benchmark/benchmark.h>

#include <cstdlib>

namespace sp = spmd;

namespace {

const bool kEightDevices = [] {
  if (!std::getenv("SPMD_CPU_DEVICES")) sp::config::set_cpu_device_count(8);
  return true;
}();

void BM_PmapCookbookMatmul(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = state.range(1);
  sp::Array keys = sp::random::split(sp::random::key(0), sp::device_count());
  sp::Array mats = sp::pmap([=](sp::Array key) {
    return sp::random::normal(key, {rows, cols});
  })(keys);
  auto step = sp::pmap([](sp::Array x) { return sp::dot(x, x.T()); });
  step(mats).block_until_ready();
  for (auto _ : state) step(mats).block_until_ready();
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * double(rows) * double(rows) * double(cols) * sp::device_count() * 1e-9,
      benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_PmapCookbookMatmul)
    ->Args({5000, 6000})
    ->Args({1000, 1200})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_PmapSin(benchmark::State& state) {
  const int64_t side = state.range(0);
  const int64_t n = sp::device_count();
  sp::Array x = sp::device_put(sp::random::uniform(sp::random::key(1), {n, side * side / n}),
                               sp::NamedSharding(sp::make_mesh({n}, {"i"}), sp::P("i")));
  auto f = sp::pmap([](sp::Array v) { return sp::sin(v); });
  f(x).block_until_ready();
  for (auto _ : state) f(x).block_until_ready();
  state.SetBytesProcessed(int64_t(state.iterations()) * side * side * 4 * 2);
}
BENCHMARK(BM_PmapSin)->Arg(8192)->Arg(1024)->UseRealTime()->Unit(benchmark::kMillisecond);

// The fixed cost of one pmap call of a tiny function on every device.
void BM_PmapDispatch(benchmark::State& state) {
  auto f = sp::pmap([](sp::Array v) { return v + 1; });
  sp::Array x = sp::arange(float(sp::device_count()));
  f(x).block_until_ready();
  for (auto _ : state) f(x).block_until_ready();
}
BENCHMARK(BM_PmapDispatch)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

// pmap workloads of the Pmap Cookbook on 8 virtual devices: the parallel matmul of 8 random
// 5000 x 6000 matrices with their transposes, and sin over 8192 x 8192 elements split across
// the devices. bench/compare/run.py times the same in JAX with 8 host devices.
//
// BM_PmapCollective times one collective as a user calls it, a pmap'd function over the first n
// devices, with nccl-tests' sizes as in collectives_bench.cpp: `bytes` is the per-member buffer
// for psum and all_to_all, the gathered output for all_gather and the summed input for
// psum_scatter; algbw = bytes / time, busbw = algbw · 2(n−1)/n for psum, · (n−1)/n otherwise.
#include <spmd/spmd.h>

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <vector>

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

// The fixed cost of one eager call of a partial-manual shard_map: vmap of a shard_map over
// 'b' whose batch dim is split over Explicit 'a' of a 4 x 2 mesh (manual over 'b' only).
void BM_PartialManualShardMapDispatch(benchmark::State& state) {
  const sp::Mesh mesh =
      sp::make_mesh({4, 2}, {"a", "b"}, {sp::AxisType::Explicit, sp::AxisType::Explicit});
  auto scope = sp::use_mesh(mesh);
  auto f = sp::vmap(
      sp::shard_map([](sp::Array t) { return t * 2.0f + 1.0f; }, mesh, sp::P("b"), sp::P("b")));
  sp::Array x =
      sp::device_put(sp::arange(64.0f).reshape({8, 8}), sp::NamedSharding(mesh, sp::P("a", "b")));
  f(x).block_until_ready();
  for (auto _ : state) f(x).block_until_ready();
}
BENCHMARK(BM_PartialManualShardMapDispatch)->UseRealTime()->Unit(benchmark::kMicrosecond);

enum class PmapCollective { psum, all_gather, psum_scatter, all_to_all };

sp::Array apply_collective(PmapCollective c, const sp::Array& v) {
  switch (c) {
    case PmapCollective::psum:
      return sp::psum(v, "i");
    case PmapCollective::all_gather:
      return sp::all_gather(v, "i", {.axis = 0, .tiled = true});
    case PmapCollective::psum_scatter:
      return sp::psum_scatter(v, "i", {.scatter_dimension = 0, .tiled = true});
    case PmapCollective::all_to_all:
      return sp::all_to_all(v, "i", 0, 0, {.tiled = true});
  }
  return v;
}

// The result on every device, computed on the host from the input blocks `in` (n rows of
// `count` floats). The inputs are small integers, so every sum is exact.
std::vector<float> expected_collective(PmapCollective c, const std::vector<float>& in, int n,
                                       int64_t count) {
  const int64_t chunk = count / n;
  std::vector<float> out;
  for (int d = 0; d < n; ++d) {
    switch (c) {
      case PmapCollective::psum:
        for (int64_t k = 0; k < count; ++k) {
          float sum = 0;
          for (int e = 0; e < n; ++e) sum += in[e * count + k];
          out.push_back(sum);
        }
        break;
      case PmapCollective::all_gather:
        out.insert(out.end(), in.begin(), in.end());
        break;
      case PmapCollective::psum_scatter:
        for (int64_t k = 0; k < chunk; ++k) {
          float sum = 0;
          for (int e = 0; e < n; ++e) sum += in[e * count + d * chunk + k];
          out.push_back(sum);
        }
        break;
      case PmapCollective::all_to_all:
        // Device d receives chunk d of every device e, in the order of e.
        for (int e = 0; e < n; ++e)
          for (int64_t k = 0; k < chunk; ++k) out.push_back(in[e * count + d * chunk + k]);
        break;
    }
  }
  return out;
}

// The input is placed on the first n devices before timing, so the loop measures the pmap
// dispatch and the collective, not a host-to-device copy.
void BM_PmapCollective(benchmark::State& state, PmapCollective c) {
  const int n = int(state.range(0));
  const int64_t bytes = state.range(1);
  const int64_t count = c == PmapCollective::all_gather ? bytes / 4 / n : bytes / 4;
  std::vector<float> host(static_cast<size_t>(n * count));
  for (size_t k = 0; k < host.size(); ++k) host[k] = float(k % 61);
  const std::vector<sp::Device> all = sp::devices();
  sp::Array x = sp::device_put(sp::array(host, {n, count}),
                               sp::NamedSharding(sp::make_mesh({n}, {"i"}), sp::P("i")));
  auto f = sp::pmap([c](sp::Array v) { return apply_collective(c, v); },
                    {.axis_name = "i", .devices = {all.begin(), all.begin() + n}});
  sp::Array out = f(x).block_until_ready();
  if (bytes <= 4096 && out.to_vector<float>() != expected_collective(c, host, n, count)) {
    state.SkipWithError("wrong result");
    return;
  }
  for (auto _ : state) f(x).block_until_ready();

  using benchmark::Counter;
  const double bus_factor = c == PmapCollective::psum ? 2.0 * (n - 1) / n : double(n - 1) / n;
  state.counters["algbw"] = Counter(double(bytes), Counter::kIsIterationInvariantRate);
  state.counters["busbw"] = Counter(double(bytes) * bus_factor, Counter::kIsIterationInvariantRate);
}

void pmap_collective_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"n", "bytes"})
      ->ArgsProduct({{2, 4, 8}, {4096, 4194304, 67108864}})
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(BM_PmapCollective, psum, PmapCollective::psum)->Apply(pmap_collective_args);
BENCHMARK_CAPTURE(BM_PmapCollective, all_gather, PmapCollective::all_gather)
    ->Apply(pmap_collective_args);
BENCHMARK_CAPTURE(BM_PmapCollective, psum_scatter, PmapCollective::psum_scatter)
    ->Apply(pmap_collective_args);
BENCHMARK_CAPTURE(BM_PmapCollective, all_to_all, PmapCollective::all_to_all)
    ->Apply(pmap_collective_args);

}  // namespace

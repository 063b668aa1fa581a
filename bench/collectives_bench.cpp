// Bandwidth and latency of the in-process collectives (one thread per participant), reported as
// algbw and busbw with nccl-tests' conventions, next to a single-thread memcpy of the same size.
//
// `bytes` is nccl-tests' size: the per-member buffer for all_reduce and all_to_all, the gathered
// output for all_gather and the summed input for reduce_scatter. algbw = bytes / time;
// busbw = algbw · 2(n−1)/n for all_reduce and algbw · (n−1)/n for the others.
#include "runtime/communicator.h"

#include <benchmark/benchmark.h>

#include <cstring>
#include <thread>
#include <vector>

namespace {

using spmd::Shape;
using spmd::runtime::Communicator;
using spmd::runtime::ReduceOp;

// The *_shared forms give the whole group one result buffer (what psum and all_gather use on
// the devices); each call allocates it, as a device program does.
enum class Collective {
  all_reduce,
  all_gather,
  reduce_scatter,
  all_to_all,
  all_reduce_shared,
  all_gather_shared
};

struct Buffers {
  std::vector<float> in, out;
};

// Input and output sizes (in floats) of one member for a collective of nccl-tests size `bytes`.
std::pair<int64_t, int64_t> member_sizes(Collective c, int64_t bytes, int n) {
  const int64_t total = bytes / 4;
  switch (c) {
    case Collective::all_reduce:
    case Collective::all_reduce_shared:
    case Collective::all_to_all:
      return {total, total};
    case Collective::all_gather:
    case Collective::all_gather_shared:
      return {total / n, total};
    case Collective::reduce_scatter:
      return {total, total / n};
  }
  return {total, total};
}

double bus_factor(Collective c, int n) {
  const bool reduce = c == Collective::all_reduce || c == Collective::all_reduce_shared;
  return reduce ? 2.0 * (n - 1) / n : double(n - 1) / n;
}

void run_once(Collective c, Communicator& comm, const std::vector<int>& group, int r, Buffers& b) {
  const int n = int(group.size());
  switch (c) {
    case Collective::all_reduce:
      comm.all_reduce("psum", group, r, ReduceOp::sum, spmd::float32, Shape{int64_t(b.in.size())},
                      b.in.data(), b.out.data());
      break;
    case Collective::all_gather:
      comm.all_gather("all_gather", group, r, spmd::float32, Shape{int64_t(b.in.size())}, 0, true,
                      b.in.data(), b.out.data());
      break;
    case Collective::reduce_scatter:
      comm.reduce_scatter("psum_scatter", group, r, ReduceOp::sum, spmd::float32,
                          Shape{int64_t(b.in.size())}, 0, b.in.data(), b.out.data());
      break;
    case Collective::all_to_all:
      comm.all_to_all("all_to_all", group, r, spmd::float32,
                      Shape{int64_t(n), int64_t(b.in.size()) / n}, 0, 0, b.in.data(), b.out.data());
      break;
    case Collective::all_reduce_shared:
      benchmark::DoNotOptimize(comm.all_reduce_shared(
          "psum", group, r, ReduceOp::sum, spmd::float32, Shape{int64_t(b.in.size())}, b.in.data()));
      break;
    case Collective::all_gather_shared:
      benchmark::DoNotOptimize(comm.all_gather_shared("all_gather", group, r, spmd::float32,
                                                      Shape{int64_t(b.in.size())}, 0, true,
                                                      b.in.data()));
      break;
  }
}

// The participants' threads are created once per benchmark run: each runs as many collectives
// as the timed loop of rank 0 (plus one warm-up), so they stay matched without extra signalling.
void BM_Collective(benchmark::State& state, Collective c) {
  const int n = int(state.range(0));
  const int64_t bytes = state.range(1);
  std::vector<int> group(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) group[r] = r;
  Communicator comm(group);
  const auto [in_count, out_count] = member_sizes(c, bytes, n);
  std::vector<Buffers> bufs(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    bufs[r].in.assign(static_cast<size_t>(in_count), 1.0f + float(r));
    bufs[r].out.assign(static_cast<size_t>(out_count), 0.0f);
  }
  const int64_t iterations = int64_t(state.max_iterations);
  std::vector<std::thread> peers;
  for (int r = 1; r < n; ++r)
    peers.emplace_back([&, r] {
      for (int64_t i = 0; i <= iterations; ++i) run_once(c, comm, group, r, bufs[r]);
    });
  run_once(c, comm, group, 0, bufs[0]);  // warm-up, also waits for the peers to start
  for (auto _ : state) run_once(c, comm, group, 0, bufs[0]);
  for (auto& t : peers) t.join();

  using benchmark::Counter;
  state.counters["algbw"] = Counter(double(bytes), Counter::kIsIterationInvariantRate);
  state.counters["busbw"] =
      Counter(double(bytes) * bus_factor(c, n), Counter::kIsIterationInvariantRate);
}

void BM_CollectiveMemcpy(benchmark::State& state) {
  const size_t bytes = size_t(state.range(0));
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.counters["bw"] =
      benchmark::Counter(double(bytes), benchmark::Counter::kIsIterationInvariantRate);
}

// 4 KiB … 256 MiB in powers of 4.
std::vector<int64_t> sizes() {
  std::vector<int64_t> s;
  for (int64_t b = 4 << 10; b <= (int64_t(256) << 20); b *= 4) s.push_back(b);
  return s;
}

void collective_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"n", "bytes"})->ArgsProduct({{2, 4, 8}, sizes()})->UseRealTime();
}

BENCHMARK_CAPTURE(BM_Collective, all_reduce, Collective::all_reduce)->Apply(collective_args);
BENCHMARK_CAPTURE(BM_Collective, all_gather, Collective::all_gather)->Apply(collective_args);
BENCHMARK_CAPTURE(BM_Collective, reduce_scatter, Collective::reduce_scatter)
    ->Apply(collective_args);
BENCHMARK_CAPTURE(BM_Collective, all_to_all, Collective::all_to_all)->Apply(collective_args);
BENCHMARK_CAPTURE(BM_Collective, all_reduce_shared, Collective::all_reduce_shared)
    ->Apply(collective_args);
BENCHMARK_CAPTURE(BM_Collective, all_gather_shared, Collective::all_gather_shared)
    ->Apply(collective_args);
BENCHMARK(BM_CollectiveMemcpy)->ArgNames({"bytes"})->ArgsProduct({sizes()})->UseRealTime();

}  // namespace

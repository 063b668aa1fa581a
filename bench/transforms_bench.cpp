// Transformations: jit dispatch overhead of a cached call, trace + compile time of an MLP
// training step, and the step time of jit(grad(mlp_loss)) on the seed's 784-1024-1024-1024-10 MLP.
#include <spmd/spmd.h>

#include <benchmark/benchmark.h>

#include <cmath>
#include <utility>
#include <vector>

namespace sp = spmd;

namespace {

using Layer = std::pair<sp::Array, sp::Array>;
using Params = std::vector<Layer>;

Params init_mlp(const std::vector<int64_t>& sizes) {
  Params params;
  sp::Array key = sp::random::key(0);
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    auto keys = sp::random::split(key);
    key = keys[0];
    sp::Array w =
        sp::random::normal(keys[1], {sizes[i], sizes[i + 1]}) * (1.0 / std::sqrt(double(sizes[i])));
    params.emplace_back(w, sp::zeros({sizes[i + 1]}));
  }
  return params;
}

sp::Array mlp_loss(const Params& params, const sp::Array& x, const sp::Array& y) {
  sp::Array h = x;
  for (size_t i = 0; i < params.size(); ++i) {
    h = sp::dot(h, params[i].first) + params[i].second;
    if (i + 1 < params.size()) h = sp::relu(h);
  }
  sp::Array log_probs = h - sp::logsumexp(h, {1}, true);
  return -sp::mean(sp::sum(log_probs * y, {1}));
}

Params sgd_step(const Params& params, const sp::Array& x, const sp::Array& y) {
  Params grads = sp::grad(mlp_loss)(params, x, y);
  Params out;
  for (size_t i = 0; i < params.size(); ++i)
    out.emplace_back(params[i].first - grads[i].first * 0.01,
                     params[i].second - grads[i].second * 0.01);
  return out;
}

const std::vector<int64_t> kSizes = {784, 1024, 1024, 1024, 10};

void BM_JitDispatch10Ops(benchmark::State& state) {
  auto f = sp::jit([](const sp::Array& x) {
    sp::Array y = x;
    for (int i = 0; i < 5; ++i) y = sp::sin(y) * 1.5;
    return y;
  });
  sp::Array x = sp::ones({8});
  f(x);
  for (auto _ : state) benchmark::DoNotOptimize(f(x));
}

// The same with one operation: the fixed cost of a cached call (flatten, signature lookup, run).
void BM_JitDispatch1Op(benchmark::State& state) {
  auto f = sp::jit([](const sp::Array& x) { return sp::sin(x); });
  sp::Array x = sp::ones({8});
  f(x);
  for (auto _ : state) benchmark::DoNotOptimize(f(x));
}

// Eager execution of the same ten operations, for the per-kernel cost.
void BM_Eager10Ops(benchmark::State& state) {
  sp::Array x = sp::ones({8});
  for (auto _ : state) {
    sp::Array y = x;
    for (int i = 0; i < 5; ++i) y = sp::sin(y) * 1.5;
    benchmark::DoNotOptimize(y);
  }
}

void BM_MlpTraceCompile(benchmark::State& state) {
  Params params = init_mlp(kSizes);
  sp::Array x = sp::zeros({128, 784}), y = sp::zeros({128, 10});
  for (auto _ : state) {
    auto step = sp::jit(sgd_step);  // a new function: nothing cached
    benchmark::DoNotOptimize(step.lower_optimized(params, x, y));
  }
}

void BM_MlpGradStep(benchmark::State& state) {
  int64_t batch = state.range(0);
  Params params = init_mlp(kSizes);
  sp::Array x = sp::random::normal(sp::random::key(1), {batch, 784});
  sp::Array y = sp::ones({batch, 10}) * 0.1;
  auto step = sp::jit(sp::grad(mlp_loss));
  // The warm-up call returns before its step has run: wait, or the first timed step waits too.
  step(params, x, y).back().second.block_until_ready();
  for (auto _ : state) {
    Params g = step(params, x, y);
    g.back().second.block_until_ready();
  }
}

}  // namespace

BENCHMARK(BM_JitDispatch10Ops);
BENCHMARK(BM_JitDispatch1Op);
BENCHMARK(BM_Eager10Ops);
BENCHMARK(BM_MlpTraceCompile)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MlpGradStep)
    ->Arg(1024)
    ->Arg(8192)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);

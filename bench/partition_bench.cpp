// Computation following sharding (seed 002) on 8 virtual devices: eager ops and jit on committed
// sharded arrays run on every device on its blocks. bench/compare/run.py times the same in JAX
// with 8 host devices and meshes of Auto axes.
//
// BM_PartitionSin: sin of 8192 x 8192 floats sharded P('a', 'b') on a 4 x 2 mesh, and the same
// committed to device 0; BM_PartitionEagerTinySin the same on 8 x 8 floats (dispatch cost).
// BM_PartitionMatmul: the 8192² product of P('a', None) and P(None, 'b') (BM_RawSgemm/8192 in
// ops_bench.cpp is the machine's limit). BM_PartitionMlpGradStep: jit(grad(loss)) of the seed's MLP
// on one device, 8-way data parallel, and 4-way data with 2-way tensor parallel.
// BM_PartitionMlpCompile: what the first call of a fresh jit does before running that step (trace,
// placement, partitioning, compilation), as JAX's lower(...).compile().
#include <spmd/spmd.h>

#include <benchmark/benchmark.h>

#include "compile/compiled.h"
#include "compile/partition.h"
#include "core/array_impl.h"
#include "transforms/staging.h"

#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sp = spmd;
using sp::P;

namespace {

const bool kEightDevices = [] {
  if (!std::getenv("SPMD_CPU_DEVICES")) sp::config::set_cpu_device_count(8);
  return true;
}();

// One 8192 x 8192 input for every repetition (256 MiB, slow to draw).
const sp::Array& big_input() {
  static const sp::Array x =
      sp::random::uniform(sp::random::key(1), {8192, 8192}, sp::float32, -2.0, 2.0);
  return x;
}

sp::Mesh mesh_ab() {
  return sp::make_mesh({4, 2}, {"a", "b"});
}

void BM_PartitionSin(benchmark::State& state, bool sharded) {
  sp::Array x = sharded ? sp::device_put(big_input(), sp::NamedSharding(mesh_ab(), P("a", "b")))
                        : sp::device_put(big_input(), sp::devices()[0]);
  sp::sin(x).block_until_ready();
  for (auto _ : state) sp::sin(x).block_until_ready();
  state.SetBytesProcessed(int64_t(state.iterations()) * 8192 * 8192 * 4 * 2);
}
BENCHMARK_CAPTURE(BM_PartitionSin, mesh_4x2, true)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PartitionSin, single, false)->UseRealTime()->Unit(benchmark::kMillisecond);

// The cost of one eager op on a small committed array: the launch on its devices and the
// lookups that find the cached partitioned op.
void BM_PartitionEagerTinySin(benchmark::State& state, bool sharded) {
  sp::Array x = sp::ones({8, 8});
  x = sharded ? sp::device_put(x, sp::NamedSharding(mesh_ab(), P("a", "b")))
              : sp::device_put(x, sp::devices()[0]);
  sp::sin(x).block_until_ready();
  for (auto _ : state) sp::sin(x).block_until_ready();
}
BENCHMARK_CAPTURE(BM_PartitionEagerTinySin, mesh_4x2, true)->UseRealTime();
BENCHMARK_CAPTURE(BM_PartitionEagerTinySin, single, false)->UseRealTime();

// One call takes seconds: Google Benchmark's first iteration is the measurement.
void BM_PartitionMatmul(benchmark::State& state) {
  const sp::Mesh mesh = mesh_ab();
  sp::Array lhs = sp::device_put(big_input(), sp::NamedSharding(mesh, P("a", sp::None)));
  sp::Array rhs = sp::device_put(big_input(), sp::NamedSharding(mesh, P(sp::None, "b")));
  for (auto _ : state) sp::matmul(lhs, rhs).block_until_ready();
  state.counters["FLOPS"] =
      benchmark::Counter(2.0 * 8192 * 8192 * 8192, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_PartitionMatmul)->Arg(8192)->UseRealTime()->Unit(benchmark::kMillisecond);

// The seed's network in JAX's functional form: (W, b) per layer, W [n_in, n_out], relu after
// every layer (the last included), loss = mean(sum((pred - targets)², -1)).
using Params = std::vector<std::pair<sp::Array, sp::Array>>;
using Batch = std::pair<sp::Array, sp::Array>;

const std::vector<int64_t> kLayerSizes = {784, 1024, 1024, 1024, 10};
constexpr int64_t kBatchSize = 8192;

sp::Array predict(const Params& params, sp::Array inputs) {
  sp::Array outputs;
  for (const auto& [W, b] : params) {
    outputs = sp::dot(inputs, W) + b;
    inputs = sp::maximum(outputs, 0);
  }
  return outputs;
}

sp::Array loss(const Params& params, const Batch& batch) {
  const auto& [inputs, targets] = batch;
  return sp::mean(sp::sum(sp::square(predict(params, inputs) - targets), {-1}));
}

std::pair<Params, Batch> init_model() {
  sp::Array keys = sp::random::split(sp::random::key(0), int64_t(kLayerSizes.size()) + 2);
  Params params;
  for (size_t i = 0; i + 1 < kLayerSizes.size(); ++i) {
    const int64_t n_in = kLayerSizes[i], n_out = kLayerSizes[i + 1];
    sp::Array k = sp::random::split(keys[int64_t(i)]);
    params.emplace_back(sp::random::normal(k[0], {n_in, n_out}) / std::sqrt(float(n_in)),
                        sp::random::normal(k[1], {n_out}));
  }
  const int64_t n = int64_t(kLayerSizes.size());
  Batch batch{sp::random::normal(keys[n - 1], {kBatchSize, kLayerSizes.front()}),
              sp::random::normal(keys[n], {kBatchSize, kLayerSizes.back()})};
  return {params, batch};
}

enum class MlpPlacement { single, data_8, data_4_model_2 };

// The seed's placements: everything on device 0; params replicated and the batch split over an
// (8,) mesh; on a (4, 2) ('batch', 'model') mesh, layer 2 column- and layer 3 row-parallel.
std::pair<Params, Batch> place_model(MlpPlacement where) {
  auto [params, batch] = init_model();
  if (where == MlpPlacement::single) {
    const sp::SingleDeviceSharding device0(sp::devices()[0]);
    return {sp::device_put(params, device0), sp::device_put(batch, device0)};
  }
  if (where == MlpPlacement::data_8) {
    const sp::Mesh mesh = sp::make_mesh({8}, {"batch"});
    return {sp::device_put(params, sp::NamedSharding(mesh, P())),
            sp::device_put(batch, sp::NamedSharding(mesh, P("batch")))};
  }
  const sp::Mesh mesh = sp::make_mesh({4, 2}, {"batch", "model"});
  const sp::NamedSharding rep(mesh, P());
  const sp::NamedSharding model_cols(mesh, P(sp::None, "model")), model(mesh, P("model")),
      model_rows(mesh, P("model", sp::None)), data(mesh, P("batch", sp::None));
  return {sp::device_put(params, {{rep, rep}, {model_cols, model}, {model_rows, rep}, {rep, rep}}),
          sp::device_put(batch, data)};
}

// Waits for every gradient, as JAX's block_until_ready on the result's tree does.
void wait_all(const Params& grads) {
  for (const auto& [w, b] : grads) {
    w.block_until_ready();
    b.block_until_ready();
  }
}

void BM_PartitionMlpGradStep(benchmark::State& state, MlpPlacement where) {
  auto [params, batch] = place_model(where);
  auto gradfun = sp::jit(sp::grad(loss));
  // The first call compiles and then runs on the devices after it returns: waited for here, or
  // the first timed iteration would include it.
  wait_all(gradfun(params, batch));
  for (auto _ : state) wait_all(gradfun(params, batch));
}

// jit's first call up to running: trace, hoist constants, place by the committed arguments,
// partition and compile (compile_partitioned's work without its cache, which would make every
// later fresh jit of the same program a lookup).
void BM_PartitionMlpCompile(benchmark::State& state, MlpPlacement where) {
  auto [params, batch] = place_model(where);
  auto [leaves, def] = sp::tree_flatten(std::make_tuple(params, batch));
  auto grad_loss = sp::grad(loss);
  for (auto _ : state) {
    auto fn = sp::transform_detail::flatten_fn<decltype(grad_loss), Params, Batch>(
        grad_loss, def, std::make_shared<sp::TreeDef>());
    std::vector<sp::Array> consts;
    auto program = std::make_shared<const sp::Program>(
        sp::hoist_consts(sp::trace_to_program(fn, sp::types_of(leaves), "jit"), &consts));
    std::vector<sp::Array> operands = consts;
    operands.insert(operands.end(), leaves.begin(), leaves.end());
    std::optional<sp::Placement> placement = sp::place(*program, operands, {}, {}, "jit", {});
    if (!placement) {
      state.SkipWithError("the arguments do not place the computation");
      return;
    }
    sp::PartitionedProgram parts =
        sp::partition_program(*program, placement->mesh, placement->in, placement->out);
    const std::vector<sp::AbstractValue> out_types = program->out_types();
    sp::Compiled compiled(parts.body, placement->mesh, parts.in_specs, parts.out_specs, out_types);
    benchmark::DoNotOptimize(compiled);
  }
}

void mlp_args(benchmark::internal::Benchmark* b) {
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}

BENCHMARK_CAPTURE(BM_PartitionMlpGradStep, single, MlpPlacement::single)
    ->Apply(mlp_args)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_PartitionMlpGradStep, data_8, MlpPlacement::data_8)
    ->Apply(mlp_args)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_PartitionMlpGradStep, data_4_model_2, MlpPlacement::data_4_model_2)
    ->Apply(mlp_args)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_PartitionMlpCompile, single, MlpPlacement::single)->Apply(mlp_args);
BENCHMARK_CAPTURE(BM_PartitionMlpCompile, data_8, MlpPlacement::data_8)->Apply(mlp_args);
BENCHMARK_CAPTURE(BM_PartitionMlpCompile, data_4_model_2, MlpPlacement::data_4_model_2)
    ->Apply(mlp_args);

}  // namespace

// psum between processes beside raw MPI, in one run: run under `mpirun -np 2` (see
// bench/compare/mpi_psum.sh), each process with SPMD_CPU_DEVICES devices.
//
// For each size (the bytes of one device's buffer, as nccl-tests counts them) it times
//   raw      MPI_Allreduce (float sum, out of place) on MPI_COMM_WORLD, one call per process;
//   local    (more than one device per process) psum over this process's devices alone, the
//            in-process half of the hierarchical reduction;
//   spmd     psum over every device of every process in a jitted shard_map: "call" launches one
//            psum per call, "chain" runs kChain psums one after another in one body (x = psum(x)),
//            so that the launch is paid once and the figure is the collective's own.
// Every figure is the median over `--reps` repetitions of the mean of a fixed number of calls
// (fixed per size, so every process makes the same collectives), each repetition starting at a
// barrier and taking the slowest process's time. busbw follows nccl-tests: algbw · 2(n−1)/n with
// n the devices reduced over.
//
// `--loop call|chain` instead runs that form alone at --min-bytes for --reps × 1000 calls, with no
// barrier and no raw MPI in between: a steady loop to profile (perf record on one rank).
//
// `--mlp` instead times the seed's data-parallel grad step (784-1024-1024-1024-10 MLP, MSE loss,
// jit(value_and_grad)) with the batch sharded over every device of every process and
// `--per-device-batch` rows per device: run it on 1 and on 2 processes for weak scaling.
#include <spmd/distributed.h>
#include <spmd/shard_map.h>
#include <spmd/spmd.h>

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace sp = spmd;
using sp::P;

namespace {

constexpr int kChain = 8;

struct Options {
  int64_t min_bytes = 8;
  int64_t max_bytes = int64_t(64) << 20;
  int factor = 2;
  int reps = 11;
  bool mlp = false;
  int64_t per_device_batch = 1024;
  int steps = 10;
  std::string loop;  // "call" or "chain": profile that form alone
};

int64_t parse_bytes(std::string_view s) {
  const char unit = s.empty() ? '\0' : s.back();
  const int shift = unit == 'K' ? 10 : unit == 'M' ? 20 : unit == 'G' ? 30 : 0;
  if (shift) s.remove_suffix(1);
  return std::stoll(std::string(s)) << shift;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> std::string_view {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "psum_bench: %s needs a value\n", argv[i]);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--min-bytes")
      o.min_bytes = parse_bytes(value());
    else if (a == "--max-bytes")
      o.max_bytes = parse_bytes(value());
    else if (a == "--factor")
      o.factor = std::stoi(std::string(value()));
    else if (a == "--reps")
      o.reps = std::stoi(std::string(value()));
    else if (a == "--mlp")
      o.mlp = true;
    else if (a == "--per-device-batch")
      o.per_device_batch = parse_bytes(value());
    else if (a == "--steps")
      o.steps = std::stoi(std::string(value()));
    else if (a == "--loop") {
      o.loop = std::string(value());
      if (o.loop != "call" && o.loop != "chain") {
        std::fprintf(stderr, "psum_bench: --loop takes call or chain, got %s\n", o.loop.c_str());
        std::exit(2);
      }
    }
    else {
      std::fprintf(stderr,
                   "usage: psum_bench [--min-bytes N] [--max-bytes N[K|M]] [--factor F] "
                   "[--reps R] [--loop call|chain] | --mlp [--per-device-batch B] [--steps S]\n");
      std::exit(2);
    }
  }
  return o;
}

bool rank0() {
  return sp::process_index() == 0;
}

bool mpi_running() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

// A function timed over `iters` calls; `per` calls of the collective in each.
struct Timed {
  int iters = 1;
  std::function<void()> fn;
  int per = 1;
};

// Seconds per collective of each function over `reps` repetitions of the slowest process's mean:
// the median, and the minimum (what a quiet machine gives; the cores here are shared). The
// functions take turns within each repetition, so that a change in the load of the machine
// touches all of them alike.
struct Times {
  std::vector<double> median, min;
};

Times time_calls(int reps, const std::vector<Timed>& fns) {
  std::vector<std::vector<double>> samples(fns.size());
  for (int r = 0; r < reps; ++r) {
    for (size_t f = 0; f < fns.size(); ++f) {
      if (mpi_running()) MPI_Barrier(MPI_COMM_WORLD);
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < fns[f].iters; ++i) fns[f].fn();
      double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (mpi_running()) MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      samples[f].push_back(t / (fns[f].iters * fns[f].per));
    }
  }
  Times times;
  for (std::vector<double>& s : samples) {
    std::sort(s.begin(), s.end());
    times.median.push_back(s[size_t(reps / 2)]);
    times.min.push_back(s.front());
  }
  return times;
}

// Calls per repetition: about 16 MiB moved per repetition, between 3 and 200 calls. A function
// of the size alone, so that every process runs the same number of collectives.
int iterations(int64_t bytes) {
  return int(std::clamp<int64_t>((int64_t(16) << 20) / bytes, 3, 200));
}

// ---- psum ------------------------------------------------------------------------------------

struct Row {
  int64_t bytes = 0;
  double raw = 0, local_call = 0, local_chain = 0, call = 0, chain = 0;
};

// The first and last element of this process's first block of y, which must be `want`.
void check(const sp::Array& y, float want, const char* what) {
  std::vector<float> v = y.addressable_shards()[0].data.to_vector<float>();
  if (v.front() == want && v.back() == want) return;
  std::fprintf(stderr, "psum_bench: %s gave %g ... %g, expected %g\n", what, double(v.front()),
               double(v.back()), double(want));
  std::exit(1);
}

// One psum over `axes` per launch, and kChain of them in one launch, on a {processes, local}
// mesh; x holds ones, so the results are known.
struct Psums {
  std::function<sp::Array(const sp::Array&)> once, chain;
};

Psums psums(const sp::Mesh& mesh, const sp::AxisNames& axes) {
  const P spec(sp::axes("p", "l"));
  return {sp::jit(sp::shard_map([axes](sp::Array b) { return sp::lax::psum(b, axes); }, mesh, spec,
                                spec)),
          sp::jit(sp::shard_map(
              [axes](sp::Array b) {
                for (int k = 0; k < kChain; ++k) b = sp::lax::psum(b, axes);
                return b;
              },
              mesh, spec, spec))};
}

void check_psums(const Psums& f, const sp::Array& x, int n) {
  check(f.once(x), float(n), "psum");
  float want = 1;
  for (int k = 0; k < kChain; ++k) want *= float(n);
  check(f.chain(x), want, "chained psum");
}

// The medians and the minimums.
std::pair<Row, Row> measure(const Options& o, const sp::Mesh& mesh, int64_t bytes) {
  const int64_t count = std::max<int64_t>(1, bytes / 4);
  const int local = sp::local_device_count(), n = sp::device_count();
  const int iters = iterations(count * 4), chain_iters = std::max(1, iters / kChain);
  std::vector<float> in(static_cast<size_t>(count), 1.f), out(static_cast<size_t>(count));
  sp::Array x = sp::device_put(sp::ones({int64_t(n), count}, sp::float32),
                               sp::NamedSharding(mesh, P(sp::axes("p", "l"))));
  const Psums all = psums(mesh, sp::axes("p", "l")), within = psums(mesh, "l");
  check_psums(all, x, n);
  std::vector<Timed> fns = {{iters,
                             [&] {
                               MPI_Allreduce(in.data(), out.data(), int(count), MPI_FLOAT, MPI_SUM,
                                             MPI_COMM_WORLD);
                             }},
                            {iters, [&] { all.once(x).block_until_ready(); }},
                            {chain_iters, [&] { all.chain(x).block_until_ready(); }, kChain}};
  if (local > 1) {
    check_psums(within, x, local);
    fns.push_back({iters, [&] { within.once(x).block_until_ready(); }});
    fns.push_back({chain_iters, [&] { within.chain(x).block_until_ready(); }, kChain});
  }
  const Times t = time_calls(o.reps, fns);
  auto row = [&](const std::vector<double>& v) {
    Row r{count * 4, v[0], 0, 0, v[1], v[2]};
    if (local > 1) r.local_call = v[3], r.local_chain = v[4];
    return r;
  };
  return {row(t.median), row(t.min)};
}

std::string size_str(int64_t bytes) {
  if (bytes >= (int64_t(1) << 20)) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (int64_t(1) << 10)) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

double busbw(int64_t bytes, double seconds, int n) {
  return double(bytes) / seconds * 2.0 * (n - 1) / n / 1e9;
}

void print_header(int local, const char* of) {
  std::printf("# psum across %d processes x %d device(s); times in us (%s of per-call means)\n",
              sp::process_count(), local, of);
  if (local == 1) {
    std::printf("%9s %10s %10s %6s %10s %6s %9s %9s\n", "size", "raw", "spmd call", "ratio",
                "spmd chain", "ratio", "raw busbw", "busbw");
    return;
  }
  std::printf("%9s %10s %10s %10s %10s %6s %10s %6s %9s\n", "size", "raw", "local call",
              "local chn", "spmd call", "ratio", "spmd chain", "ratio", "busbw");
}

// Ratios against raw MPI (one device per process) or against local + raw (several).
void print_row(const Row& r, int local, int n) {
  const double us = 1e6;
  if (local == 1) {
    std::printf("%9s %10.2f %10.2f %6.2f %10.2f %6.2f %9.3f %9.3f\n", size_str(r.bytes).c_str(),
                r.raw * us, r.call * us, r.call / r.raw, r.chain * us, r.chain / r.raw,
                busbw(r.bytes, r.raw, n), busbw(r.bytes, r.chain, n));
  } else {
    std::printf("%9s %10.1f %10.1f %10.1f %10.1f %6.2f %10.1f %6.2f %9.3f\n",
                size_str(r.bytes).c_str(), r.raw * us, r.local_call * us, r.local_chain * us,
                r.call * us, r.call / (r.local_call + r.raw), r.chain * us,
                r.chain / (r.local_chain + r.raw), busbw(r.bytes, r.chain, n));
  }
  std::fflush(stdout);
}

void psum_table(const Options& o) {
  const int local = sp::local_device_count();
  sp::Mesh mesh = sp::make_mesh({sp::process_count(), local}, {"p", "l"});
  if (rank0()) print_header(local, "median");
  std::vector<Row> mins;
  for (int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.factor) {
    auto [median, min] = measure(o, mesh, bytes);
    if (rank0()) print_row(median, local, sp::device_count());
    mins.push_back(min);
  }
  if (!rank0()) return;
  print_header(local, "minimum");
  for (const Row& r : mins) print_row(r, local, sp::device_count());
}

// One psum form alone in a loop (--loop): nothing else between its calls.
void psum_loop(const Options& o) {
  const int64_t count = std::max<int64_t>(1, o.min_bytes / 4);
  const int n = sp::device_count();
  sp::Mesh mesh = sp::make_mesh({sp::process_count(), sp::local_device_count()}, {"p", "l"});
  sp::Array x = sp::device_put(sp::ones({int64_t(n), count}, sp::float32),
                               sp::NamedSharding(mesh, P(sp::axes("p", "l"))));
  const Psums all = psums(mesh, sp::axes("p", "l"));
  check_psums(all, x, n);
  const auto& fn = o.loop == "chain" ? all.chain : all.once;
  const int calls = o.reps * 1000;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) fn(x).block_until_ready();
  const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (rank0())
    std::printf("%s of %s: %.2f us per launch over %d launches\n", o.loop.c_str(),
                size_str(count * 4).c_str(), t / calls * 1e6, calls);
}

// ---- the seed's MLP data-parallel step --------------------------------------------------------

const std::vector<int64_t> kLayers = {784, 1024, 1024, 1024, 10};

struct Model : sp::nn::Module {
  sp::nn::ModuleList layers;

  explicit Model(const sp::Array& key) {
    layers = register_module("layers", sp::nn::ModuleList());
    sp::Array keys = sp::random::split(key, int64_t(kLayers.size()) - 1);
    for (size_t i = 0; i + 1 < kLayers.size(); ++i)
      layers.push_back(sp::nn::Linear(kLayers[i], kLayers[i + 1], keys[int64_t(i)]));
  }

  sp::Array forward(sp::Array x) const override {
    for (const auto& layer : layers) x = sp::maximum(layer(x), 0);
    return x;
  }
};

void mlp_step(const Options& o) {
  using Batch = std::pair<sp::Array, sp::Array>;
  const int n = sp::device_count();
  const int64_t batch_size = o.per_device_batch * n;
  Model model(sp::random::key(0));
  auto loss_fun = [&](const sp::nn::StateDict& weights, const Batch& batch) {
    return sp::nn::MSELoss{}(sp::nn::functional_call(model, weights, batch.first), batch.second);
  };
  auto grad_fn_jit = sp::jit(sp::value_and_grad(loss_fun));
  sp::Mesh mesh = sp::make_mesh({n}, {"batch"});
  Batch batch = {sp::random::normal(sp::random::key(2), {batch_size, kLayers.front()}),
                 sp::random::normal(sp::random::key(3), {batch_size, kLayers.back()})};
  batch = sp::device_put(batch, sp::NamedSharding(mesh, P("batch")));
  sp::nn::StateDict params = sp::device_put(model.state_dict(), sp::NamedSharding(mesh, P()));
  auto step = [&] {
    auto [loss, grads] = grad_fn_jit(params, batch);
    loss.block_until_ready();
    for (const auto& [name, g] : grads) g.block_until_ready();
    return loss;
  };
  const float loss = step().item<float>();
  const double t = time_calls(o.steps, {{1, [&] { step(); }}}).median[0];
  if (rank0())
    std::printf(
        "mlp step: %d process(es) x %d device(s), batch %lld: %.2f ms (median of %d), "
        "loss %.6f\n",
        sp::process_count(), sp::local_device_count(), static_cast<long long>(batch_size), t * 1e3,
        o.steps, double(loss));
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  sp::distributed::initialize();
  if (o.mlp)
    mlp_step(o);
  else if (!o.loop.empty())
    psum_loop(o);
  else
    psum_table(o);
  sp::distributed::shutdown();
  return 0;
}

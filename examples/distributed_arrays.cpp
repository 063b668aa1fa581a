// JAX's "Distributed arrays and automatic parallelization" in C++: sharded arrays on a named mesh,
// their pictures, computation following sharding, errors for disagreeing devices, sharding
// constraints in jit, and a small torch-style network (sp::nn, sp::optim) trained data parallel,
// then data and tensor parallel. Every code cell in order, printing what the notebook prints
// (arrays as JAX prints them: torchax's Tensor(...) wrapper is not reproduced).
//
// `--small` divides every size by 16 (x 512 x 512, layers [49, 64, 64, 64, 10], batch 512; the
// pictures stay the same) and times each %timeit cell once instead of 5 x 5: the test runs that.
// Set SPMD_EXAMPLE_CELLS=1 to print a marker line before each cell's output.
#include <spmd/spmd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <streambuf>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace sp = spmd;
using sp::P;

namespace {

void cell(const char* id) {
  if (std::getenv("SPMD_EXAMPLE_CELLS")) std::cout << "## cell " << id << "\n";
}

struct Sizes {
  int64_t n = 8192;
  int64_t batch_size = 8192;
  std::vector<int64_t> layer_sizes = {784, 1024, 1024, 1024, 10};
  int loops = 5;  // %timeit -n loops -r loops
};

Sizes sizes_for(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "--small")
    return {.n = 512, .batch_size = 512, .layer_sizes = {49, 64, 64, 64, 10}, .loops = 1};
  return {};
}

// IPython's time format: 3 significant digits in s, ms, µs or ns.
std::string format_time(double seconds) {
  int order = seconds > 0 ? std::min(int(-std::floor(std::floor(std::log10(seconds)) / 3)), 3) : 3;
  static const double scaling[] = {1, 1e3, 1e6, 1e9};
  static const char* units[] = {"s", "ms", "µs", "ns"};
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g %s", seconds * scaling[order], units[order]);
  return buf;
}

// %timeit -n loops -r loops stmt: the mean and spread of the runs' per-loop times.
template <class F>
void timeit(int loops, F stmt) {
  std::vector<double> runs;
  for (int r = 0; r < loops; ++r) {
    auto start = std::chrono::steady_clock::now();
    for (int l = 0; l < loops; ++l) stmt();
    std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    runs.push_back(took.count() / loops);
  }
  double mean = 0, var = 0;
  for (double t : runs) mean += t / loops;
  for (double t : runs) var += (t - mean) * (t - mean) / loops;
  const char* plural = loops == 1 ? "" : "s";
  std::cout << format_time(mean) << " ± " << format_time(std::sqrt(var))
            << " per loop (mean ± std. dev. of " << loops << " run" << plural << ", " << loops
            << " loop" << plural << " each)\n";
}

// Python's textwrap.fill at its default width of 70.
std::string fill(const std::string& text, size_t width = 70) {
  std::istringstream words(text);
  std::string word, line, out;
  while (words >> word) {
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  return out + line;
}

// The seed's print_exception without colour. spmd's messages start with the API in brackets,
// which Python's str(e) does not have.
void print_exception(const char* name, const std::exception& e) {
  std::string message = e.what();
  if (message.rfind("[", 0) == 0 && message.find("] ") != std::string::npos)
    message = message.substr(message.find("] ") + 2);
  std::cout << fill(std::string(name) + ": " + message) << "\n";
}

// class Model(torch.nn.Module) of the seed. spmd has no global random state, so the layers are
// drawn from `key`, one key per layer.
struct Model : sp::nn::Module {
  sp::nn::ModuleList layers;

  Model(const std::vector<int64_t>& layer_sizes, const sp::Array& key) {
    layers = register_module("layers", sp::nn::ModuleList());
    sp::Array keys = sp::random::split(key, int64_t(layer_sizes.size()) - 1);
    for (size_t i = 0; i + 1 < layer_sizes.size(); ++i)
      layers.push_back(sp::nn::Linear(layer_sizes[i], layer_sizes[i + 1], keys[int64_t(i)]));
  }

  sp::Array forward(sp::Array x) const override {
    for (const auto& layer : layers) {
      x = layer(x);
      x = sp::maximum(x, 0);
    }
    return x;
  }
};

using Params = sp::nn::StateDict;
using Batch = std::pair<sp::Array, sp::Array>;

// Python's repr of an OrderedDict's keys().
std::string odict_keys(const Params& params) {
  std::string out = "odict_keys([";
  for (const std::string& name : params.keys())
    out += (out.back() == '[' ? "'" : ", '") + name + "'";
  return out + "])";
}

// Five optax.sgd steps, printing the loss before each, then the loss after the last.
template <class GradFn, class LossFn>
Params train(Params params, const Batch& batch, const GradFn& grad_fn_jit, const LossFn& loss_jit) {
  double step_size = 1e-3;

  sp::optim::Optimizer optimizer = sp::optim::sgd(step_size);

  sp::optim::State opt_state = optimizer.init(params);

  for (int i = 0; i < 5; ++i) {
    auto [loss, grads] = grad_fn_jit(params, batch);
    Params updates;
    std::tie(updates, opt_state) = optimizer.update(grads, opt_state, params);
    params = sp::optim::apply_updates(params, updates);
    std::cout << i << " loss is " << loss << "\n";
  }

  std::cout << loss_jit(params, batch) << "\n";
  return params;
}

}  // namespace

// What processes other than 0 print: formatted in full (reads of spread values are collectives
// every process must make), then dropped.
struct DiscardOutput : std::streambuf {
  int overflow(int c) override { return c; }
};

int main(int argc, char** argv) {
  const Sizes size = sizes_for(argc, argv);
  const int64_t N = size.n;

  // Eight devices in all: one process of eight, or several processes under mpirun that share
  // them. There, every process prints the same values (reading a value gathers the blocks of
  // the other processes, a collective) and process 0 shows them.
  if (!std::getenv("SPMD_CPU_DEVICES"))
    sp::config::set_cpu_device_count(8 / sp::distributed::launched_process_count());
  sp::distributed::initialize();
  sp::distributed::set_collective_reads(true);
  static DiscardOutput discard;
  if (sp::process_index() != 0) std::cout.rdbuf(&discard);

  cell("01");
  std::vector<sp::Device> devices = sp::devices();
  std::cout << "[";
  for (size_t i = 0; i < devices.size(); ++i) std::cout << (i ? ", " : "") << sp::repr(devices[i]);
  std::cout << "]\n";

  cell("03");
  // The seed counts jax.local_devices(); on several processes the devices of all of them count.
  if (sp::devices().size() < 8) throw std::runtime_error("Notebook requires 8 devices to run");

  // ---- Intro and a quick example
  cell("05");
  // Create a Sharding object to distribute a value across devices:
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"x", "y"});

  cell("06");
  // Create an array of random values:
  sp::Array x = sp::random::normal(sp::random::key(0), {N, N});
  // and use device_put to distribute it across devices:
  sp::Array y = sp::device_put(x, sp::NamedSharding(mesh, P("x", "y")));
  sp::visualize_array_sharding(y);

  cell("07");
  sp::Array z = sp::sin(y);
  sp::visualize_array_sharding(z);

  cell("08");
  // `x` is present on a single device
  timeit(size.loops, [&] { sp::sin(x).block_until_ready(); });

  cell("09");
  // `y` is sharded across 8 devices.
  timeit(size.loops, [&] { sp::sin(y).block_until_ready(); });

  // ---- Sharding basics, and the NamedSharding subclass
  cell("10");
  x = sp::random::normal(sp::random::key(0), {N, N});

  cell("11");
  sp::visualize_array_sharding(x);

  cell("12");
  mesh = sp::make_mesh({4, 2}, {"a", "b"});
  y = sp::device_put(x, sp::NamedSharding(mesh, P("a", "b")));
  sp::visualize_array_sharding(y);

  cell("13");
  const sp::Mesh default_mesh = sp::make_mesh({4, 2}, {"a", "b"});

  auto mesh_sharding = [&](const P& pspec, const sp::Mesh* mesh = nullptr) {
    if (mesh == nullptr) mesh = &default_mesh;
    return sp::NamedSharding(*mesh, pspec);
  };

  cell("14");
  y = sp::device_put(x, mesh_sharding(P("a", "b")));
  sp::visualize_array_sharding(y);

  cell("15");
  y = sp::device_put(x, mesh_sharding(P("b", "a")));
  sp::visualize_array_sharding(y);

  cell("16");
  // This `None` means that `x` is not sharded on its second dimension,
  // and since the Mesh axis name 'b' is not mentioned, shards are
  // replicated across it.
  y = sp::device_put(x, mesh_sharding(P("a", sp::None)));
  sp::visualize_array_sharding(y);

  cell("17");
  y = sp::device_put(x, mesh_sharding(P(sp::None, "b")));
  sp::visualize_array_sharding(y);

  cell("18");
  y = sp::device_put(x, mesh_sharding(P(sp::None, "a")));
  sp::visualize_array_sharding(y);

  cell("19");
  y = sp::device_put(x, mesh_sharding(P(sp::axes("a", "b"), sp::None)));
  sp::visualize_array_sharding(y);

  // ---- Computation follows data sharding and is automatically parallelized
  cell("20");
  mesh = sp::make_mesh({4, 2}, {"a", "b"});

  cell("21");
  x = sp::device_put(x, sp::NamedSharding(mesh, P("a", "b")));
  std::cout << "input sharding:\n";
  sp::visualize_array_sharding(x);

  y = sp::sin(x);
  std::cout << "output sharding:\n";
  sp::visualize_array_sharding(y);

  cell("22");
  y = sp::device_put(x, sp::NamedSharding(mesh, P("a", sp::None)));
  z = sp::device_put(x, sp::NamedSharding(mesh, P(sp::None, "b")));
  std::cout << "lhs sharding:\n";
  sp::visualize_array_sharding(y);
  std::cout << "rhs sharding:\n";
  sp::visualize_array_sharding(z);

  sp::Array w = sp::matmul(y, z);
  std::cout << "out sharding:\n";
  sp::visualize_array_sharding(w);

  cell("23");
  sp::Array x_single = sp::device_put(x, sp::devices()[0]);
  sp::visualize_array_sharding(x_single);

  cell("24");
  std::cout << (sp::allclose(sp::device_get(sp::matmul(x_single, x_single)),
                             sp::device_get(sp::matmul(y, z)))
                    ? "True"
                    : "False")
            << "\n";

  cell("25");
  timeit(size.loops, [&] { sp::matmul(x_single, x_single).block_until_ready(); });

  cell("26");
  timeit(size.loops, [&] { sp::matmul(y, z).block_until_ready(); });

  cell("27");
  sp::Array w_copy = sp::copy(w);
  sp::visualize_array_sharding(w_copy);

  // ---- When explicit shardings disagree, JAX errors
  cell("29");
  auto sharding1 =
      sp::NamedSharding(sp::Mesh({devices.begin(), devices.begin() + 4}, {4}, {"x"}), P("x"));
  auto sharding2 =
      sp::NamedSharding(sp::Mesh({devices.begin() + 4, devices.end()}, {4}, {"x"}), P("x"));

  y = sp::device_put(x, sharding1);
  z = sp::device_put(x, sharding2);
  try {
    y + z;
  } catch (const sp::ValueError& e) {
    print_exception("ValueError", e);
  }

  cell("30");
  std::vector<sp::Device> permuted_devices;
  for (int i : {0, 1, 2, 3, 6, 7, 4, 5}) permuted_devices.push_back(devices[size_t(i)]);

  sharding1 = sp::NamedSharding(sp::Mesh(devices, {8}, {"x"}), P("x"));
  sharding2 = sp::NamedSharding(sp::Mesh(permuted_devices, {8}, {"x"}), P("x"));

  y = sp::device_put(x, sharding1);
  z = sp::device_put(x, sharding2);
  try {
    y + z;
  } catch (const sp::ValueError& e) {
    print_exception("ValueError", e);
  }

  cell("31");
  y = sp::device_put(x, sharding1);
  y + sp::ones_like(y);
  y + sp::arange(int(y.size())).reshape(y.shape());
  std::cout << "no error!\n";

  // ---- Constraining shardings of intermediates in jitted code
  cell("32");
  mesh = sp::make_mesh({4, 2}, {"x", "y"});

  cell("33");
  x = sp::random::normal(sp::random::key(0), {N, N});

  cell("34");
  auto f = sp::jit([&](sp::Array x) {
    x = x + 1;
    sp::Array y = sp::with_sharding_constraint(x, sp::NamedSharding(mesh, P("y", "x")));
    return y;
  });

  cell("35");
  sp::visualize_array_sharding(x);
  y = f(x);
  sp::visualize_array_sharding(y);

  cell("36");
  auto g = sp::jit([&](sp::Array x) {
    x = x + 1;
    sp::Array y = sp::with_sharding_constraint(x, sp::NamedSharding(mesh, P()));
    return y;
  });

  cell("37");
  sp::visualize_array_sharding(x);
  y = g(x);
  sp::visualize_array_sharding(y);

  // ---- Examples: neural networks
  cell("41");
  const std::vector<int64_t>& layer_sizes = size.layer_sizes;
  const int64_t batch_size = size.batch_size;

  cell("42");
  Model model(layer_sizes, sp::random::key(0));
  sp::Array inputs = sp::random::normal(sp::random::key(1), {batch_size, layer_sizes[0]});

  cell("43");
  std::cout << sp::repr(model(inputs)) << "\n";

  cell("44");
  Params params = model.state_dict();

  // make a function that takes weight as input
  auto pure_model_fun = [&](const Params& weights, const sp::Array& inputs) {
    return sp::nn::functional_call(model, weights, inputs);
  };

  sp::nn::MSELoss torch_loss;

  auto loss_fun = [&](const Params& weight, const Batch& batch) {
    const auto& [inputs, label] = batch;
    sp::Array res = pure_model_fun(weight, inputs);
    return torch_loss(res, label);
  };

  auto grad_fn = sp::value_and_grad(loss_fun);
  auto grad_fn_jit = sp::jit(grad_fn);
  auto loss_jit = sp::jit(loss_fun);

  // ---- 8-way batch data parallelism
  cell("45");
  mesh = sp::make_mesh({8}, {"batch"});

  cell("46");
  sp::NamedSharding sharding(mesh, P("batch"));
  sp::NamedSharding replicated_sharding(mesh, P());

  cell("47");
  Batch batch = {sp::random::normal(sp::random::key(2), {batch_size, layer_sizes[0]}),
                 sp::random::normal(sp::random::key(3), {batch_size, layer_sizes.back()})};

  // device_put also works on trees
  batch = sp::device_put(batch, sharding);
  params = sp::device_put(params, replicated_sharding);

  cell("48");
  std::cout << sp::repr(loss_jit(params, batch)) << "\n";

  cell("49");
  params = train(params, batch, grad_fn_jit, loss_jit);

  cell("50");
  timeit(size.loops, [&] { grad_fn_jit(params, batch).first.block_until_ready(); });

  cell("51");
  Batch batch_single = sp::device_put(batch, sp::SingleDeviceSharding(sp::devices()[0]));
  Params params_single = sp::device_put(params, sp::SingleDeviceSharding(sp::devices()[0]));

  cell("52");
  timeit(size.loops, [&] { grad_fn_jit(params_single, batch_single).first.block_until_ready(); });

  // ---- 4-way batch data parallelism and 2-way model tensor parallelism
  cell("53");
  mesh = sp::make_mesh({4, 2}, {"batch", "model"});

  cell("54");
  batch = sp::device_put(batch, sp::NamedSharding(mesh, P("batch", sp::None)));
  sp::visualize_array_sharding(batch.first);
  sp::visualize_array_sharding(batch.second);

  cell("55");
  replicated_sharding = sp::NamedSharding(mesh, P());

  cell("56");
  std::cout << odict_keys(params) << "\n";

  cell("57");
  const std::map<std::string, sp::NamedSharding> name_to_sharding = {
      {"layers.0.weight", replicated_sharding},
      {"layers.0.bias", replicated_sharding},
      {"layers.1.weight", sp::NamedSharding(mesh, P("model"))},  // column parallel
      {"layers.1.bias", sp::NamedSharding(mesh, P("model"))},
      {"layers.2.weight", sp::NamedSharding(mesh, P(sp::None, "model"))},
      {"layers.2.bias", replicated_sharding},
      {"layers.3.weight", replicated_sharding},
      {"layers.3.bias", replicated_sharding},
  };

  for (auto& [name, tensor] : params) tensor = sp::device_put(tensor, name_to_sharding.at(name));

  cell("58");
  sp::visualize_array_sharding(params.at("layers.1.weight"));

  cell("59");
  sp::visualize_array_sharding(params.at("layers.2.weight"));

  cell("60");
  std::cout << loss_jit(params, batch) << "\n";

  cell("61");
  params = train(params, batch, grad_fn_jit, loss_jit);

  cell("62");
  std::cout << loss_jit(params, batch) << "\n";

  cell("63");
  sp::visualize_array_sharding(params.at("layers.1.weight"));
  sp::visualize_array_sharding(params.at("layers.2.weight"));

  cell("64");
  timeit(size.loops, [&] { grad_fn_jit(params, batch).first.block_until_ready(); });
  return 0;
}

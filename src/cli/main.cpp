// The spmd command-line program: `spmd tour` shows what the library does, `spmd train` trains
// the seed's MLP on Fashion-MNIST, data parallel or data and tensor parallel.
#include "cli/progress.h"
#include "cli/train.h"

#include <spmd/spmd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

namespace sp = spmd;

namespace {

void section(const char* title) {
  std::cout << "\n== " << title << " ==\n";
}

template <class F>
double median_seconds(F&& f, int reps) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto start = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// The Pmap Cookbook's main steps on the virtual devices (examples/pmap_cookbook.cpp has every
// cell).
void cookbook() {
  using sp::P;
  section("devices, pmap and collectives (the Pmap Cookbook)");
  std::cout << sp::device_count() << " devices: " << sp::devices().front() << " ... "
            << sp::devices().back() << "\n";
  sp::Array y = sp::pmap([](sp::Array x) { return x * x; })(sp::arange(8));
  std::cout << "pmap(x ** 2)(arange(8)) / 2   " << y / 2 << "\n";
  auto normalize = sp::pmap([](sp::Array x) { return x / sp::psum(x, "i"); }, {.axis_name = "i"});
  std::cout << "pmap(x / psum(x, 'i'))        " << normalize(sp::arange(4.0f)) << "\n";

  sp::Array keys = sp::random::split(sp::random::key(0), sp::device_count());
  sp::runtime::reset_transfer_stats();
  sp::Array means;
  double s = median_seconds(
      [&] {
        sp::Array mats = sp::pmap([](sp::Array key) {
          return sp::random::normal(key, {1000, 1200});
        })(keys);
        sp::Array prods = sp::pmap([](sp::Array x) { return sp::dot(x, x.T()); })(mats);
        means = sp::pmap([](sp::Array x) { return sp::mean(x); })(prods).block_until_ready();
      },
      3);
  std::printf(
      "%d random 1000 x 1200 matrices, each times its transpose on its own device: "
      "%.1f ms (median of 3)\n",
      sp::device_count(), s * 1e3);
  std::cout << "their means " << means << "\n";
  std::cout << "bytes copied between host and devices: "
            << sp::runtime::transfer_stats().total_bytes() << " (keys and means only)\n";

  section("shard_map: matmul_basic on a 4 x 2 mesh");
  if (sp::device_count() < 8) {
    std::cout << "(needs 8 devices; run with SPMD_CPU_DEVICES=8)\n";
    return;
  }
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"x", "y"});
  auto matmul_basic =
      sp::shard_map([](sp::Array a, sp::Array b) { return sp::psum(sp::dot(a, b), "y"); }, mesh,
                    {P("x", "y"), P("y", sp::None)}, P("x", sp::None));
  sp::Array c =
      matmul_basic(sp::arange(128.0f).reshape({8, 16}), sp::arange(64.0f).reshape({16, 4}));
  std::cout << "c[:2] = " << sp::lax::slice(c, {0, 0}, {2, 4}) << "\n";
  sp::visualize_array_sharding(c);
}

void tour(int matmul_size) {
  section("arrays");
  sp::Array x = sp::arange(8);
  std::cout << "x = arange(8)          " << x << "\n";
  std::cout << "x * x                  " << x * x << "\n";
  std::cout << "(x * x) / 2            " << (x * x) / 2 << "\n";
  std::cout << "linspace(0, 0.5, 4)    " << sp::linspace(0, 0.5, 4) << "\n";
  sp::Array m = sp::arange(12.0f).reshape({3, 4});
  std::cout << "m = arange(12.).reshape(3, 4)\n" << m << "\n";
  std::cout << "m.sum(0)               " << m.sum({0}) << "\n";
  std::cout << "repr(m.max())          " << sp::repr(m.max()) << "\n";
  std::cout << "sin(m[1])              " << sp::sin(m[1]) << "\n";

  section("random numbers (bit-exact with jax.random)");
  sp::Array key = sp::random::key(0);
  std::cout << "split(key(0))\n" << sp::random::split(key) << "\n";
  std::cout << "uniform(key(0), (4,))  " << sp::random::uniform(key, {4}) << "\n";
  std::cout << "normal(key(0), (4,))   " << sp::random::normal(key, {4}) << "\n";

  section("matrix multiplication");
  int n = matmul_size;
  sp::Array a = sp::random::normal(sp::random::key(1), {n, n});
  sp::Array b = sp::random::normal(sp::random::key(2), {n, n});
  sp::Array c = sp::matmul(a, b);
  double s = median_seconds([&] { c = sp::matmul(a, b).block_until_ready(); }, 5);
  std::printf("%d x %d float32 matmul: %.2f ms (median of 5), %.1f GFLOP/s\n", n, n, s * 1e3,
              2.0 * n * n * n / s * 1e-9);
  std::cout << "c[0, :4] = " << sp::lax::slice(c, {0, 0}, {1, 4}) << "\n";

  section("transformations: make_jaxpr, jit, grad, vmap");
  auto f = [](const sp::Array& x, const sp::Array& y) { return sp::tanh(sp::dot(x, y)); };
  std::cout << "make_jaxpr(tanh(dot(x, y)))(f32[2,3], f32[3,4])\n"
            << sp::make_jaxpr(f)(sp::zeros({2, 3}), sp::zeros({3, 4})) << "\n";
  auto loss = [](const sp::Array& w) { return sp::sum(sp::square(sp::sin(w))); };
  sp::Array w = sp::arange(4.0f) * 0.5;
  std::cout << "grad(sum(sin(w)^2))(w)  " << sp::jit(sp::grad(loss))(w) << "\n";
  std::cout << "vmap(dot)(f32[8,2,3], f32[8,3,4]).shape  "
            << sp::vmap(f)(sp::ones({8, 2, 3}), sp::ones({8, 3, 4})).shape().str() << "\n";

  cookbook();
}

// An option's allowed values, named in the error (CLI11's IsMember prints only the value it
// refused): "--optimizer: must be sgd, adam or adamw, got 'rmsprop'".
CLI::Validator one_of(std::vector<std::string> choices) {
  std::string listed;
  for (size_t i = 0; i < choices.size(); ++i)
    listed += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  return CLI::Validator(
      [choices, listed](std::string& value) -> std::string {
        if (std::find(choices.begin(), choices.end(), value) != choices.end()) return "";
        return "must be " + listed + ", got '" + value + "'";
      },
      "");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"spmd: JAX's SPMD array programming model in C++"};
  app.require_subcommand(1);
  int size = 1024;
  auto* t = app.add_subcommand("tour", "Show what spmd does: arrays, random numbers, matmul");
  t->add_option("--matmul-size", size, "Side of the square matmul to time")
      ->check(CLI::Range(1, 16384));
  sp::cli::TrainOptions train_options;
  std::string mesh = "8";
  auto* tr = app.add_subcommand(
      "train",
      "Train the MLP 784-1024-1024-1024-10 on Fashion-MNIST; the last line is the test "
      "accuracy");
  tr->add_option("--mesh", mesh,
                 "8: data parallel over 8 devices; 4x2: 4-way data and 2-way "
                 "tensor parallel")
      ->capture_default_str();
  // Ranges are checked by train(), whose messages name the option and the bound.
  tr->add_option("--epochs", train_options.epochs, "Epochs to train")->capture_default_str();
  tr->add_option("--batch", train_options.batch, "Examples per step")->capture_default_str();
  tr->add_option("--lr", train_options.lr, "Learning rate")->capture_default_str();
  tr->add_option("--optimizer", train_options.optimizer, "sgd, adam or adamw")
      ->capture_default_str()
      ->check(one_of({"sgd", "adam", "adamw"}));
  tr->add_option("--schedule", train_options.schedule,
                 "cosine: the learning rate falls from --lr to 0 over the run; constant")
      ->capture_default_str()
      ->check(one_of({"cosine", "constant"}));
  tr->add_option("--seed", train_options.seed, "Seed of the initialisation and the data order")
      ->capture_default_str();
  tr->add_option("--out", train_options.out, "Directory of the checkpoints, history and plot")
      ->capture_default_str();
  tr->add_flag("--resume", train_options.resume,
               "Continue from the last checkpoint in --out (same losses as an uninterrupted run)");
  tr->add_option("--data", train_options.data_dir, "Directory of the Fashion-MNIST IDX files")
      ->capture_default_str();
  tr->add_option("--steps", train_options.max_steps,
                 "Stop each epoch after this many steps (0: whole epochs)")
      ->capture_default_str();
  tr->add_flag("!--no-plot", train_options.plot, "Do not draw the curves at the end");
  CLI11_PARSE(app, argc, argv);
  try {
    int devices = 8;
    if (*tr) {
      train_options.mesh = sp::cli::parse_mesh(mesh);
      int64_t mesh_devices = 1;
      for (int64_t n : train_options.mesh) mesh_devices *= n;  // at most 4096 (parse_mesh)
      devices = std::max(devices, int(mesh_devices));
    }
    // Under mpirun the mesh's devices are shared among the processes.
    const int processes = sp::distributed::launched_process_count();
    if (!std::getenv("SPMD_CPU_DEVICES"))
      sp::config::set_cpu_device_count(std::max(1, devices / processes));
    sp::distributed::initialize();
    if (*t) tour(size);
    if (*tr) {
      train_options.interactive = sp::cli::is_terminal(1);
      sp::cli::train(train_options, std::cout);
    }
  } catch (const sp::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {  // from the system (files, memory): still a message
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

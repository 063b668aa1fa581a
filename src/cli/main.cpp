// The spmd command-line program. `spmd tour` shows what the library does today.
#include <spmd/spmd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
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
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"spmd: JAX's SPMD array programming model in C++"};
  app.require_subcommand(1);
  int size = 1024;
  auto* t = app.add_subcommand("tour", "Show what spmd does: arrays, random numbers, matmul");
  t->add_option("--matmul-size", size, "Side of the square matmul to time")
      ->check(CLI::Range(1, 16384));
  CLI11_PARSE(app, argc, argv);
  try {
    if (*t) tour(size);
  } catch (const sp::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

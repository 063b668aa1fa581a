// Exhaustive accuracy sweep of float32 sin, cos and tan as spmd computes them (unary_math, the
// best SIMD target of this machine) over every float32 x with lo <= |x| <= hi, both signs.
// Prints per function the largest error in ulps of the exact value (against glibc's double
// result) and the largest distance in steps from the correctly rounded float (checked with long
// double where it is not 0). The default range is the float32 kernel's, [0, 2^18]; about a minute
// on two cores. Not part of the library build; build it by hand from the repository root against
// a built library (here build):
//   g++ -O2 -std=c++20 -pthread tools/trig_f32_sweep.cpp -Isrc -Iinclude -Lbuild -lspmd \
//     -Wl,-rpath,$PWD/build -o /tmp/trig_f32_sweep
//   /tmp/trig_f32_sweep [lo hi]
#include "backends/cpu/unary_math.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using spmd::cpu::UnaryMathOp;

struct Worst {
  double err = 0;  // ulps of the exact value
  float err_x = 0;
  int64_t steps = 0;  // floats between the result and the correctly rounded one
  float steps_x = 0;
  void merge(const Worst& o) {
    if (o.err > err) err = o.err, err_x = o.err_x;
    if (o.steps > steps) steps = o.steps, steps_x = o.steps_x;
  }
};

double exact(UnaryMathOp op, double x) {
  return op == UnaryMathOp::sin ? std::sin(x) : op == UnaryMathOp::cos ? std::cos(x) : std::tan(x);
}
long double exact_long(UnaryMathOp op, long double x) {
  return op == UnaryMathOp::sin ? sinl(x) : op == UnaryMathOp::cos ? cosl(x) : tanl(x);
}

int64_t ordered(float v) {
  const int32_t i = std::bit_cast<int32_t>(v);
  return i < 0 ? -int64_t(i & 0x7fffffff) : int64_t(i);
}

void check(UnaryMathOp op, const float* xs, const float* ys, size_t n, Worst& w) {
  for (size_t i = 0; i < n; ++i) {
    const double ref = exact(op, xs[i]);
    int e = 0;
    std::frexp(ref, &e);
    const double err = std::fabs(double(ys[i]) - ref) / std::ldexp(1.0, std::max(e, -125) - 24);
    int64_t steps = std::llabs(ordered(ys[i]) - ordered(float(ref)));
    // float(ref) may round twice; the long double result settles those cases.
    if (steps != 0) steps = std::llabs(ordered(ys[i]) - ordered(float(exact_long(op, xs[i]))));
    if (err > w.err) w.err = err, w.err_x = xs[i];
    if (steps > w.steps) w.steps = steps, w.steps_x = xs[i];
  }
}

// Chunks stay below unary_math's thread split so each runs on the calling thread.
Worst sweep(UnaryMathOp op, float lo, float hi) {
  constexpr uint32_t kChunk = 1 << 15;
  const uint32_t last = std::bit_cast<uint32_t>(hi);
  std::atomic<uint64_t> next{std::bit_cast<uint32_t>(lo)};
  std::mutex mu;
  Worst total;
  const auto work = [&] {
    std::vector<float> xs, ys(kChunk);
    Worst w;
    for (uint64_t b; (b = next.fetch_add(kChunk)) <= last;) {
      xs.clear();
      for (uint64_t u = b; u < b + kChunk && u <= last; ++u) {
        xs.push_back(std::bit_cast<float>(uint32_t(u)));
        xs.push_back(-xs.back());
      }
      for (size_t i = 0; i < xs.size(); i += kChunk) {
        const size_t n = std::min<size_t>(kChunk, xs.size() - i);
        spmd::cpu::unary_math(op, spmd::DType::float32, xs.data() + i, ys.data(), int64_t(n));
        check(op, xs.data() + i, ys.data(), n, w);
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    total.merge(w);
  };
  std::vector<std::thread> threads;
  const unsigned n = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned t = 0; t < n; ++t) threads.emplace_back(work);
  for (auto& t : threads) t.join();
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  const float lo = argc > 2 ? std::strtof(argv[1], nullptr) : 0.0f;
  const float hi = argc > 2 ? std::strtof(argv[2], nullptr) : 262144.0f;
  for (UnaryMathOp op : {UnaryMathOp::sin, UnaryMathOp::cos, UnaryMathOp::tan}) {
    const Worst w = sweep(op, lo, hi);
    std::printf(
        "%s over |x| in [%g, %g]: max %.4f ulp (x = %.9g), max %lld step(s) from the "
        "correctly rounded result (x = %.9g)\n",
        std::string(spmd::cpu::unary_math_name(op)).c_str(), lo, hi, w.err, w.err_x,
        (long long)w.steps, w.steps_x);
  }
}

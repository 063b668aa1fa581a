// A program that reads the device and kernel thread counts and compiles one jitted function
// (which reads SPMD_FUSION), run as a child process by
// tests/runtime/device_validation_test.cpp with chosen SPMD_CPU_DEVICES / SPMD_NUM_THREADS: it
// prints the counts, or the ValueError reading them raises (exit status 1), which shows that a
// malformed variable gives an error the program can catch rather than a terminate or an
// allocation without bound.
#include <spmd/config.h>
#include <spmd/device.h>
#include <spmd/error.h>
#include <spmd/ops.h>
#include <spmd/transforms.h>

#include <iostream>

int main() {
  try {
    const int devices = spmd::device_count();
    const int threads = spmd::config::num_threads();
    spmd::jit([](const spmd::Array& x) { return spmd::sin(x) + 1; })(spmd::zeros({2}));
    std::cout << devices << " devices, " << threads << " threads\n";
  } catch (const spmd::ValueError& e) {
    std::cout << "ValueError: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

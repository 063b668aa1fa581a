// A program that ends while device work still runs, run as a child process by
// tests/runtime/exit_drain_test.cpp. Its argument says how it ends:
//   return  starts large eager operations on sharded arrays and returns from main at once;
//   thread  does the same on a thread that ends, then main calls exit;
//   device  calls exit(3) inside a launch, from a device thread that has launched more work on
//           itself (work the exit cannot wait for).
// The first two must exit with status 0 (the exit waited for the devices before the statics
// their kernels use, oneDNN's among them, were destroyed), the last with 3 (no deadlock).
#include "runtime/executor.h"

#include <spmd/spmd.h>

#include <cstdlib>
#include <string_view>
#include <thread>
#include <vector>

namespace sp = spmd;
using sp::P;

namespace {

// Starts work on all eight devices and returns without waiting for it. Two matrices per device:
// a batch runs on oneDNN's matmul primitive.
std::vector<sp::Array> start_work() {
  const sp::NamedSharding rows(sp::make_mesh({8}, {"x"}), P("x"));
  sp::Array a = sp::device_put(sp::ones({16, 384, 384}), rows);
  sp::Array h = sp::device_put(sp::ones({16, 384, 384}, sp::bfloat16), rows);
  std::vector<sp::Array> results;
  for (int i = 0; i < 3; ++i) {
    results.push_back(sp::matmul(a, a));
    results.push_back(sp::matmul(h, h));
    results.push_back(sp::sin(a));
  }
  return results;
}

void exit_inside_a_launch() {
  const int devices[] = {0, 1};
  spmd::runtime::launch(std::span<const int>(devices, 1), [&](int) {
    spmd::runtime::launch(devices, [](int) {});
    std::exit(3);
  }).wait();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string_view how = argc > 1 ? argv[1] : "";
  if (how == "return") {
    start_work();
    return 0;
  }
  if (how == "thread") {
    std::thread([] { start_work(); }).join();
    std::exit(0);
  }
  if (how == "device") exit_inside_a_launch();
  return 1;
}

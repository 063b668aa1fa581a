// A two-process program whose device 5 (in process 1) fails inside a shard_map body, at its psum
// (SPMD_FAULT='device=5,at=psum,action=throw', set by tests/mpi/failure_test.sh); or device 1,
// with one device per process, whose share runs on the launching thread. Each process
// prints the error it gets and exits with status 1; the test checks that both do, promptly.
// With the argument `large`, the psum is of 256 KiB per device, which reduces within each process
// first and then crosses processes in the same meeting. With the argument `device_put`, process 0
// instead moves a value onto its own devices while process 1, which holds half of it, stays
// away: process 0 gives up after the collective timeout.
#include <spmd/distributed.h>
#include <spmd/parallel.h>
#include <spmd/placement.h>
#include <spmd/shard_map.h>
#include <spmd/spmd.h>

#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

namespace sp = spmd;

int device_put_without_process_1(const sp::Array& x) {
  if (sp::process_index() == 1) {
    std::cout << "process 1: stays away" << std::endl;
    std::this_thread::sleep_for(std::chrono::seconds(5));
    return 1;
  }
  std::vector<sp::Device> all = sp::devices();
  sp::Mesh low(std::vector<sp::Device>(all.begin(), all.begin() + 4), {4}, {"i"});
  try {
    sp::device_put(x, sp::NamedSharding(low, sp::P())).block_until_ready();
    std::cout << "process 0: no error" << std::endl;
    return 0;
  } catch (const sp::Error& e) {
    std::cout << "process 0 caught: " << e.what() << std::endl;
    return 1;
  }
}

int main(int argc, char** argv) {
  sp::distributed::initialize();
  const int64_t n = sp::device_count();
  sp::Mesh mesh = sp::make_mesh({n}, {"i"});
  const int64_t width = argc > 1 && std::string(argv[1]) == "large" ? 1 << 16 : 2;
  sp::Array x = sp::device_put(sp::arange(int(n * width)).astype(sp::float32).reshape({n, width}),
                               sp::NamedSharding(mesh, sp::P("i")));
  if (argc > 1 && std::string(argv[1]) == "device_put") return device_put_without_process_1(x);
  try {
    sp::Array y = sp::shard_map([](sp::Array b) { return sp::lax::psum(b * 2, "i"); }, mesh,
                                sp::P("i"), sp::P("i"))(x);
    y.block_until_ready();
    std::cout << "process " << sp::process_index() << ": no error" << std::endl;
    return 0;
  } catch (const sp::Error& e) {
    std::cout << "process " << sp::process_index() << " caught: " << e.what() << std::endl;
    return 1;
  }
}

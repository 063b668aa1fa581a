// A two-process program whose device 5 (in process 1) fails inside a shard_map body, at its psum
// (SPMD_FAULT='device=5,at=psum,action=throw', set by tests/mpi/failure_test.sh). Each process
// prints the error it gets and exits with status 1; the test checks that both do, promptly.
#include <spmd/distributed.h>
#include <spmd/parallel.h>
#include <spmd/placement.h>
#include <spmd/shard_map.h>
#include <spmd/spmd.h>

#include <iostream>

namespace sp = spmd;

int main() {
  sp::distributed::initialize();
  sp::Mesh mesh = sp::make_mesh({8}, {"i"});
  sp::Array x = sp::device_put(sp::arange(16).astype(sp::float32).reshape({8, 2}),
                               sp::NamedSharding(mesh, sp::P("i")));
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

// The shard_map tutorial's basics in C++: matmul_basic on a 4 x 2 mesh, its sharding pictures,
// and the vmap / shard_map reference semantics, printing what the notebook prints.
//
// Set SPMD_EXAMPLE_CELLS=1 to print a marker line before each cell's output.
#include <spmd/spmd.h>

#include <cstdlib>
#include <iostream>
#include <streambuf>
#include <vector>

namespace sp = spmd;
using sp::P;

namespace {

void cell(const char* id) {
  if (std::getenv("SPMD_EXAMPLE_CELLS")) std::cout << "## cell " << id << "\n";
}

bool all_close(const sp::Array& a, const sp::Array& b) {
  return sp::allclose(a, b, /*rtol=*/1e-2, /*atol=*/1e-2);
}

const char* py_bool(bool v) {
  return v ? "True" : "False";
}

}  // namespace

// What processes other than 0 print: formatted in full (reads of spread values are collectives
// every process must make), then dropped.
struct DiscardOutput : std::streambuf {
  int overflow(int c) override { return c; }
};

int main() {
  // Eight devices in all: one process of eight, or several processes under mpirun that share
  // them. There, every process prints the same values (reading a value gathers the blocks of
  // the other processes, a collective) and process 0 shows them.
  if (!std::getenv("SPMD_CPU_DEVICES"))
    sp::config::set_cpu_device_count(8 / sp::distributed::launched_process_count());
  sp::distributed::initialize();
  sp::distributed::set_collective_reads(true);
  static DiscardOutput discard;
  if (sp::process_index() != 0) std::cout.rdbuf(&discard);

  cell("02");
  sp::DeviceMesh devices = sp::create_device_mesh({4, 2});
  sp::Mesh mesh(devices, {"x", "y"});

  cell("03");
  sp::Array a = sp::arange(8 * 16.0f).reshape({8, 16});
  sp::Array b = sp::arange(16 * 4.0f).reshape({16, 4});

  auto matmul_basic = sp::shard_map(
      [](sp::Array a_block, sp::Array b_block) {
        // a_block f32[2, 8]
        // b_block f32[8, 4]
        sp::Array c_partialsum = sp::dot(a_block, b_block);
        sp::Array c_block = sp::lax::psum(c_partialsum, "y");
        // c_block f32[2, 4]
        return c_block;
      },
      mesh, {P("x", "y"), P("y", sp::None)}, P("x", sp::None), {.name = "matmul_basic"});
  sp::Array c = matmul_basic(a, b);

  cell("04");
  sp::visualize_array_sharding(c);

  cell("05");
  std::cout << py_bool(all_close(sp::dot(a, b), c)) << "\n";

  cell("06");
  std::cout << mesh.repr() << "\n";

  cell("07");
  a = sp::device_put(a, sp::NamedSharding(mesh, P("x", "y")));
  b = sp::device_put(b, sp::NamedSharding(mesh, P("y", sp::None)));

  auto matmul_reference = sp::jit([&](const sp::Array& a, const sp::Array& b) {
    sp::Array c = sp::dot(a, b);
    return sp::with_sharding_constraint(c, sp::NamedSharding(mesh, P("x", sp::None)));
  });

  sp::Array c_ref = matmul_reference(a, b);
  std::cout << py_bool(all_close(c_ref, sp::dot(a, b))) << "\n";

  cell("08");
  std::cout << "a blocks:\n";
  sp::visualize_array_sharding(a);
  std::cout << "b blocks:\n";
  sp::visualize_array_sharding(b);
  std::cout << "c blocks:\n";
  sp::visualize_array_sharding(c);

  cell("09");
  auto check_vmap = [](auto f, const sp::Array& xs) {
    sp::Array ans = sp::vmap(f, {.in_axes = {0}, .out_axes = {0}})(xs);
    std::vector<sp::Array> rows;
    for (int64_t i = 0; i < xs.shape()[0]; ++i) rows.push_back(f(xs[i]));
    sp::Array expected = sp::stack(rows);  // vmap reference semantics
    std::cout << py_bool(all_close(ans, expected)) << "\n";
  };
  check_vmap([](sp::Array x) { return sp::matmul(x, x); }, sp::arange(12).reshape({4, 3}));

  cell("10");
  std::vector<sp::Device> all = sp::devices();
  mesh = sp::Mesh(std::vector<sp::Device>(all.begin(), all.begin() + 4), {4}, {"i"});

  cell("11");
  auto check_shmap = [&](auto f, const sp::Array& y) {
    sp::Array ans = sp::shard_map(f, mesh, P("i"), P("i"))(y);
    std::vector<sp::Array> blocks;
    for (const sp::Array& y_blk : sp::split(y, mesh.axis_size("i"))) blocks.push_back(f(y_blk));
    sp::Array expected = sp::concatenate(blocks);
    std::cout << py_bool(all_close(ans, expected)) << "\n";
  };
  check_shmap([](sp::Array x) { return sp::matmul(x.T(), x); }, sp::arange(32).reshape({8, 4}));
  return 0;
}

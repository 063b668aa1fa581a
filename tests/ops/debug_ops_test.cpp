// debug::print inside shard_map: every device prints its own block (lines compared sorted, as
// devices run concurrently), against the lines JAX printed.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "support/golden.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace sp = spmd;
using sp::P;

namespace {

std::vector<std::string> sorted_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::sort(lines.begin(), lines.end());
  return lines;
}

// The golden's lines of the devices of `mesh` in this process (under mpirun, a process prints
// for its own devices, as JAX's processes do), each line naming its device's mesh position by
// "i=<position>" or "x=<row> y=<col>".
std::vector<std::string> lines_here(const std::string& golden, const sp::Mesh& mesh) {
  std::vector<std::string> out;
  for (const std::string& line : sorted_lines(golden)) {
    int64_t position = 0, row = 0, col = 0;
    if (std::sscanf(line.c_str(), "x=%ld y=%ld", &row, &col) == 2)
      position = row * mesh.axis_size("y") + col;
    else if (std::sscanf(line.c_str(), "i=%ld", &position) != 1)
      ADD_FAILURE() << "no mesh position in '" << line << "'";
    if (sp::is_addressable(mesh.devices().at(size_t(position)))) out.push_back(line);
  }
  return out;
}

std::string golden_file(const std::string& name) {
  std::ifstream f(std::string(SPMD_GOLDEN_DIR) + "/seeds/" + name);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(DebugPrint, EachDevicePrintsItsBlock) {
  sp::Mesh mesh(sp::create_device_mesh({4, 2}), {"x", "y"});
  auto show = sp::shard_map(
      [](sp::Array blk) {
        sp::debug::print("i={} block={}", sp::lax::axis_index(sp::axes("x", "y")), blk);
        return blk;
      },
      mesh, P(sp::axes("x", "y")), P(sp::axes("x", "y")));
  testing::internal::CaptureStdout();
  show(sp::arange(16.0f)).block_until_ready();
  std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(sorted_lines(out), lines_here(golden_file("extra_debug_print_shard_map.txt"), mesh));
}

TEST(DebugPrint, UnderJitWithMeshCoordinates) {
  sp::Mesh mesh(sp::create_device_mesh({4, 2}), {"x", "y"});
  auto show_xy = sp::jit(sp::shard_map(
      [](sp::Array blk) {
        sp::debug::print("x={} y={} block={}", sp::lax::axis_index("x"), sp::lax::axis_index("y"),
                         blk);
        return blk;
      },
      mesh, P("x", "y"), P("x", "y")));
  testing::internal::CaptureStdout();
  show_xy(sp::arange(8.0f).reshape({4, 2})).block_until_ready();
  std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(sorted_lines(out),
            lines_here(golden_file("extra_debug_print_shard_map_jit.txt"), mesh));
}

TEST(DebugPrint, EagerPrintsAtOnceAndBadFormatsRaise) {
  testing::internal::CaptureStdout();
  sp::debug::print("x={} and {{braces}}", sp::arange(3));
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "x=[0 1 2] and {braces}\n");
  EXPECT_THROW(sp::debug::print("{} {}", sp::arange(3)), sp::ValueError);
}

}  // namespace

// A program may end while launches still run on the devices: the exit waits for them before
// the statics their kernels use are destroyed, without deadlocking when the exit comes from a
// device thread. Each case runs tests/runtime/exit_probe.cpp as a child process.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace {

// The probe's output (stdout and stderr) and how it ended: "exit N", "signal N", or "timeout"
// when it hung.
std::pair<std::string, std::string> run_probe(const std::string& how) {
  const std::string command =
      std::string("SPMD_CPU_DEVICES=8 timeout 120 ") + SPMD_EXIT_PROBE + " " + how + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return {"(popen failed)", ""};
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = pclose(pipe);
  if (!WIFEXITED(status)) return {out, "signal " + std::to_string(WTERMSIG(status))};
  // timeout's status when it stopped the child, and the shell's for a child killed by a signal.
  const int code = WEXITSTATUS(status);
  if (code == 124) return {out, "timeout"};
  if (code > 128) return {out, "signal " + std::to_string(code - 128)};
  return {out, "exit " + std::to_string(code)};
}

using Ending = std::pair<std::string, std::string>;

// The crash came only when the exit overtook a kernel, so each case runs a few times.
TEST(ExitDrain, ReturningFromMainWaitsForRunningLaunches) {
  for (int i = 0; i < 4; ++i) ASSERT_EQ(run_probe("return"), Ending("", "exit 0")) << "run " << i;
}

TEST(ExitDrain, AThreadEndingWaitsForItsLaunches) {
  for (int i = 0; i < 4; ++i) ASSERT_EQ(run_probe("thread"), Ending("", "exit 0")) << "run " << i;
}

TEST(ExitDrain, ExitInsideALaunchDoesNotWaitForItself) {
  EXPECT_EQ(run_probe("device"), Ending("", "exit 3"));
}

}  // namespace

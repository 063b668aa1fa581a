// Mesh launches one after another: a device's share of a launch reads its own blocks of the
// previous launch's results as soon as its own share of that launch has run, and an error of the
// previous launch still reaches whoever reads the next one's results.
#include "runtime/launchable.h"

#include "runtime/executor.h"

#include <spmd/error.h>
#include <spmd/placement.h>
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

namespace sp = spmd;
namespace rt = spmd::runtime;
using sp::P;

namespace {

// A launch over devices 0 and 1 of float32[2] split over "x" (one element per device), running
// `body` on each device's block.
rt::Launchable split_launch(rt::Launchable::Body body) {
  sp::Mesh mesh = sp::make_mesh({2}, {"x"});
  auto split = std::make_shared<const sp::NamedSharding>(mesh, P("x"));
  rt::Launchable l;
  l.body = std::move(body);
  l.device_ids = mesh.device_ids();
  l.axis_names = {"x"};
  l.axis_sizes = {2};
  l.in_shardings = {split};
  l.out_types = {sp::AbstractValue{sp::Shape{2}, sp::float32, false}};
  l.out_shardings = {split};
  return l;
}

TEST(Launchable, ADeviceStartsTheNextLaunchWithoutWaitingForTheOtherDevices) {
  // Device 0's share of the first launch waits for device 1's share of the second: it can end
  // only if device 1 starts the second launch while device 0 still runs the first.
  auto second_started = std::make_shared<std::atomic<bool>>(false);
  auto seen = std::make_shared<std::atomic<bool>>(false);
  rt::Launchable first = split_launch([=](std::span<const sp::Array> blocks) {
    if (rt::current_device_id() == 0) {
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!second_started->load() && std::chrono::steady_clock::now() < give_up)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      seen->store(second_started->load());
    }
    return std::vector<sp::Array>{blocks[0] * 2.0f};
  });
  rt::Launchable second = split_launch([=](std::span<const sp::Array> blocks) {
    if (rt::current_device_id() == 1) second_started->store(true);
    return std::vector<sp::Array>{blocks[0] + 1.0f};
  });
  const sp::Array x = sp::array<float>({1.0f, 2.0f});
  const std::vector<sp::Array> a = rt::run(first, std::span(&x, 1));
  const std::vector<sp::Array> b = rt::run(second, a);
  EXPECT_EQ(b[0].to_vector<float>(), (std::vector<float>{3.0f, 5.0f}));
  EXPECT_TRUE(seen->load());
}

TEST(Launchable, AnErrorReachesTheReaderOfTheNextLaunch) {
  // Device 1's block of the first launch's result is never made: its share of the second launch
  // raises the first launch's error, which the second launch's results then carry.
  rt::Launchable first = split_launch([](std::span<const sp::Array> blocks) {
    if (rt::current_device_id() == 1) throw sp::ValueError("[test] device 1 failed");
    return std::vector<sp::Array>{blocks[0] * 2.0f};
  });
  rt::Launchable second = split_launch(
      [](std::span<const sp::Array> blocks) { return std::vector<sp::Array>{blocks[0] + 1.0f}; });
  const sp::Array x = sp::array<float>({1.0f, 2.0f});
  const std::vector<sp::Array> a = rt::run(first, std::span(&x, 1));
  const std::vector<sp::Array> b = rt::run(second, a);
  try {
    (void)b[0].to_vector<float>();
    ADD_FAILURE() << "no error";
  } catch (const sp::ValueError& e) {
    EXPECT_STREQ(e.what(), "[test] device 1 failed");
  }
}

}  // namespace

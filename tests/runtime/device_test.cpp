// The device and process queries of a single process with 8 CPU devices (SPMD_CPU_DEVICES=8),
// set_cpu_device_count's errors, block_until_ready waiting for a launch, the sharding picture
// of a placed array and the shardings eager ops give.
#include <spmd/config.h>
#include <spmd/device.h>
#include <spmd/placement.h>
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "runtime/sharded.h"
#include "support/golden.h"

#include <chrono>
#include <future>
#include <memory>

namespace sp = spmd;
using sp::Array;
using sp::P;
using spmd_test::arrays_equal;
using spmd_test::error_message;

namespace {

TEST(Device, OneProcessHoldsAllEightDevices) {
  std::vector<sp::Device> local = sp::local_devices();
  EXPECT_EQ(local, sp::devices());
  ASSERT_EQ(local.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(local[size_t(i)].id, i);
    EXPECT_EQ(local[size_t(i)].platform, "cpu");
    EXPECT_EQ(local[size_t(i)].process_index, 0);
  }
  EXPECT_EQ(sp::local_device_count(), 8);
  EXPECT_EQ(sp::device_count(), 8);
  EXPECT_EQ(sp::process_index(), 0);
  EXPECT_EQ(sp::process_count(), 1);
  EXPECT_EQ(sp::repr(local[7]), "CpuDevice(id=7)");
}

TEST(Device, SetCpuDeviceCountRejectsANonPositiveCount) {
  for (int n : {0, -3})
    EXPECT_EQ(
        error_message<sp::ValueError>([n] { sp::config::set_cpu_device_count(n); }),
        "[set_cpu_device_count] expected a device count from 1 to 4096, got " + std::to_string(n));
  EXPECT_EQ(sp::config::cpu_device_count(), 8);
}

TEST(Device, SetCpuDeviceCountAfterTheDevicesAreInUse) {
  ASSERT_EQ(sp::devices().size(), 8u);  // the devices are in use from here on
  EXPECT_EQ(error_message<sp::ValueError>([] { sp::config::set_cpu_device_count(4); }),
            "[set_cpu_device_count] the CPU devices are already in use with 8 devices; set the "
            "count before the first use of any device");
  // Asking for the count already in use changes nothing.
  EXPECT_NO_THROW(sp::config::set_cpu_device_count(8));
  EXPECT_EQ(sp::config::cpu_device_count(), 8);
  EXPECT_EQ(sp::device_count(), 8);
}

// A pmap result is handed back before its launch finishes (its data's `ready` future is
// pending); block_until_ready must return only once every shard is written.
TEST(Device, BlockUntilReadyWaitsForTheLaunch) {
  const int64_t n = 192;
  Array x = sp::ones({8, n, n});
  x.block_until_ready();
  auto chain = sp::pmap([](const Array& m) {
    Array y = m;
    for (int k = 0; k < 4; ++k) y = sp::dot(y, m) / float(n);
    return y;
  });
  Array y = chain(x);
  ASSERT_TRUE(y.impl()->sharded);
  const std::shared_future<void>& ready = y.impl()->sharded->ready;
  ASSERT_TRUE(ready.valid()) << "the result was computed before pmap returned";
  y.block_until_ready();
  EXPECT_EQ(ready.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  EXPECT_TRUE(arrays_equal(y, sp::ones({8, n, n})));
}

TEST(Device, ShardingPictureOfAPlacedArray) {
  sp::Mesh mesh(sp::create_device_mesh({4, 2}), {"x", "y"});
  Array c = sp::device_put(sp::zeros({8, 4}), sp::NamedSharding(mesh, P("x", sp::None)));
  // seed 001's visualize_array_sharding(c) for the same layout.
  EXPECT_EQ(sp::sharding_to_string(c),
            spmd_test::golden_text("seeds/001_04_visualize_c.txt") + "\n");
  // goldens/sharding/visualize.txt, case "single _ 16", with the device that holds it.
  Array on_three = sp::device_put(sp::zeros({16}), sp::devices()[3]);
  EXPECT_EQ(sp::sharding_to_string(on_three),
            "┌───────┐\n"
            "│ CPU 3 │\n"
            "└───────┘\n");
}

// What an eager op on placed arrays gives: JAX keeps the operands' sharding (computation
// follows sharding); spmd may instead bring the values to the default device, uncommitted, as a
// freshly created array. Either way the values are right and the placement is a consistent one.
::testing::AssertionResult placed_sensibly(const Array& out, const sp::Sharding& operands) {
  std::shared_ptr<const sp::Sharding> s = out.sharding();
  if (s->equals(operands) && out.committed()) return ::testing::AssertionSuccess();
  auto single = std::dynamic_pointer_cast<const sp::SingleDeviceSharding>(s);
  if (single && single->device().id == 0 && !out.committed()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << s->repr() << (out.committed() ? " (committed)" : " (uncommitted)")
         << " is neither the operands' " << operands.repr() << " nor the default device";
}

TEST(Device, EagerOpsOnPlacedArraysGiveTheValuesWithASensibleSharding) {
  sp::Mesh mesh(sp::create_device_mesh({4, 2}), {"x", "y"});
  sp::NamedSharding rows(mesh, P("x"));
  Array host = sp::arange(16.0f).reshape({8, 2});
  Array a = sp::device_put(host, rows);
  Array b = a * 2 + a;
  EXPECT_TRUE(arrays_equal(b, host * 3));
  EXPECT_TRUE(placed_sensibly(b, rows));
  // With an uncommitted operand.
  Array c = a + sp::ones({8, 2});
  EXPECT_TRUE(arrays_equal(c, host + 1));
  EXPECT_TRUE(placed_sensibly(c, rows));

  sp::SingleDeviceSharding on_five(sp::devices()[5]);
  Array d = sp::sin(sp::device_put(host, on_five)) + 1;
  EXPECT_TRUE(arrays_equal(d, sp::sin(host) + 1));
  EXPECT_TRUE(placed_sensibly(d, on_five));
}

}  // namespace

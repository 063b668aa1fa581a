// Placing arrays on devices: device_put to one device or by a NamedSharding, the shards that
// result (device, index, replica id, data), what moving placed data copies, and that sharded
// arrays behave as values (eager ops, printing, repr, block_until_ready).
#include <spmd/placement.h>
#include <spmd/sharding.h>
#include <spmd/spmd.h>

#include "core/array_impl.h"
#include "support/processes.h"
#include "support/support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

namespace sp = spmd;
using sp::P;
using spmd_test::arrays_equal;
using spmd_test::first_ids_here;
using spmd_test::ids_here;
using spmd_test::shard_ids;
using spmd_test::shard_on;

namespace {

// The replica id of each shard, in shard order: `all` (one per device, by device id) for this
// process's devices.
void expect_replica_ids(const sp::Array& x, const std::vector<int>& all) {
  std::vector<int> ids, want;
  for (const sp::Shard& s : x.addressable_shards()) {
    ids.push_back(s.replica_id);
    want.push_back(all.at(size_t(s.device.id)));
  }
  EXPECT_EQ(shard_ids(x), first_ids_here(int(all.size())));
  EXPECT_EQ(ids, want);
}

// Under mpirun, on the process's first device (JAX's default device is local_devices()[0]).
// The bytes this process's devices received from other devices: of this process, and under
// mpirun of the others.
int64_t received_bytes(const sp::runtime::TransferStats& stats) {
  return stats.device_to_device_bytes + stats.between_processes_bytes;
}

// The share of `bytes` spread evenly over the devices `ids` that this process's devices get.
int64_t share_here(int64_t bytes, const std::vector<int>& ids) {
  return bytes / int64_t(ids.size()) * spmd_test::count_here(ids);
}

TEST(Placement, CreatedArraysAreUncommittedOnDeviceZero) {
  sp::Array x = sp::arange(6.0f);
  EXPECT_FALSE(x.committed());
  EXPECT_EQ(x.sharding()->repr(),
            spmd_test::on_default_device("SingleDeviceSharding(device="
                                         "CpuDevice(id=0), memory_kind=device)"));
  EXPECT_TRUE(x.is_fully_replicated());
  EXPECT_FALSE((x * 2).committed());
}

TEST(Placement, DevicePutOnOneDeviceCommitsThere) {
  sp::Array x = sp::arange(6.0f).reshape({2, 3});
  sp::Array y = sp::device_put(x, sp::devices()[5]);
  EXPECT_TRUE(y.committed());
  EXPECT_EQ(y.sharding()->repr(),
            "SingleDeviceSharding(device=CpuDevice(id=5), memory_kind=device)");
  EXPECT_EQ(shard_ids(y), ids_here({5}));
  if (std::optional<sp::Shard> s = shard_on(y, 5)) {
    EXPECT_EQ(s->index, (std::vector<sp::Slice>{{0, 2}, {0, 3}}));
    EXPECT_EQ(s->replica_id, 0);
    EXPECT_TRUE(arrays_equal(s->data, x));
  }
  EXPECT_TRUE(arrays_equal(y, x));
}

// JAX_FACTS test vectors: mesh 4×2 ('x', 'y'), shape (8, 2).
TEST(Placement, NamedShardingShardsFollowTheGeometry) {
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"x", "y"});
  sp::Array x = sp::arange(16).reshape({8, 2});
  struct Case {
    sp::PartitionSpec spec;
    sp::Shape shard_shape;
    std::vector<int> replica_ids;
  };
  std::vector<Case> cases = {
      {P("x"), {2, 2}, {0, 1, 0, 1, 0, 1, 0, 1}},
      {P("y"), {4, 2}, {0, 0, 1, 1, 2, 2, 3, 3}},
      {P(sp::None, "y"), {8, 1}, {0, 0, 1, 1, 2, 2, 3, 3}},
      {P(sp::axes("x", "y")), {1, 2}, {0, 0, 0, 0, 0, 0, 0, 0}},
      {P(), {8, 2}, {0, 1, 2, 3, 4, 5, 6, 7}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.spec.repr());
    sp::Array y = sp::device_put(x, sp::NamedSharding(mesh, c.spec));
    EXPECT_TRUE(y.committed());
    expect_replica_ids(y, c.replica_ids);
    EXPECT_EQ(y.is_fully_replicated(), c.spec == P());
    for (const sp::Shard& s : y.addressable_shards()) {
      const int k = s.device.id;
      EXPECT_EQ(s.data.shape(), c.shard_shape);
      // Each shard holds exactly the global slice its index names.
      sp::Array want = sp::lax::slice(x, {s.index[0].start, s.index[1].start},
                                      {s.index[0].stop, s.index[1].stop});
      EXPECT_TRUE(arrays_equal(s.data, want)) << "device " << k;
    }
    EXPECT_EQ(y.to_vector<int32_t>(), x.to_vector<int32_t>());
  }
  // P('y'): devices 0 and 4 hold rows 0:4, devices 1 and 5 rows 4:8.
  sp::Array y = sp::device_put(x, sp::NamedSharding(mesh, P("y")));
  for (int k : {0, 1, 4, 5}) {
    if (std::optional<sp::Shard> s = shard_on(y, k)) {
      EXPECT_EQ(s->index[0], (k % 2 ? sp::Slice{4, 8} : sp::Slice{0, 4})) << k;
    }
  }
}

// A mesh whose devices are not in id order: shards come in mesh order, block k on the k-th
// device of the mesh.
TEST(Placement, MeshDeviceOrderDecidesWhichDeviceHoldsWhichBlock) {
  std::vector<sp::Device> reversed = sp::devices();
  std::reverse(reversed.begin(), reversed.end());
  sp::Mesh mesh(reversed, {4, 2}, {"x", "y"});
  sp::Array x = sp::arange(16).reshape({8, 2});
  sp::Array y = sp::device_put(x, sp::NamedSharding(mesh, P(sp::axes("x", "y"))));
  EXPECT_EQ(shard_ids(y), ids_here({7, 6, 5, 4, 3, 2, 1, 0}));
  for (const sp::Shard& s : y.addressable_shards()) {
    const int k = 7 - s.device.id;
    EXPECT_EQ(s.index[0], (sp::Slice{k, k + 1}));
    EXPECT_EQ(s.data.to_vector<int32_t>(), (std::vector<int32_t>{2 * k, 2 * k + 1}));
  }
  EXPECT_TRUE(arrays_equal(y, x));
  // A shard_map over that mesh sees the same blocks: axis_index follows the mesh, not the ids.
  auto f = sp::shard_map([](sp::Array b) { return b * 0 + sp::axis_index(sp::axes("x", "y")); },
                         mesh, {P(sp::axes("x", "y"))}, P(sp::axes("x", "y")));
  EXPECT_EQ(f(y).to_vector<int32_t>(),
            (std::vector<int32_t>{0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7}));
}

TEST(Placement, DevicePutFromOneDeviceToASharding) {
  sp::Mesh mesh = sp::make_mesh({8}, {"i"});
  sp::Array host = sp::arange(16.0f);
  sp::Array on_two = sp::device_put(host, sp::devices()[2]);
  on_two.block_until_ready();
  sp::runtime::reset_transfer_stats();
  sp::Array y = sp::device_put(on_two, sp::NamedSharding(mesh, P("i")));
  y.block_until_ready();
  sp::runtime::TransferStats stats = sp::runtime::transfer_stats();
  EXPECT_EQ(stats.host_to_device_bytes, 0);
  EXPECT_GT(received_bytes(stats), 0);
  EXPECT_LE(received_bytes(stats), 16 * 4);
  EXPECT_TRUE(arrays_equal(y, host));
  if (std::optional<sp::Shard> five = shard_on(y, 5)) {
    EXPECT_TRUE(arrays_equal(five->data, sp::array<float>({10, 11})));
  }
}

TEST(Placement, DevicePutCopiesEachShardFromTheHostOnce) {
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"x", "y"});
  sp::Array x = sp::arange(64.0f).reshape({8, 8});
  x.block_until_ready();
  sp::runtime::reset_transfer_stats();
  sp::Array y = sp::device_put(x, sp::NamedSharding(mesh, P("x", "y")));
  y.block_until_ready();
  sp::runtime::TransferStats stats = sp::runtime::transfer_stats();
  // Under mpirun, each process copies its own devices' shards.
  EXPECT_EQ(stats.host_to_device_bytes, int64_t(first_ids_here(8).size()) * 8 * 4);
  EXPECT_EQ(stats.device_to_device_bytes, 0);
  EXPECT_EQ(stats.device_to_host_bytes, 0);
}

TEST(Placement, PuttingAPlacedArrayAgainCopiesNothing) {
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"x", "y"});
  sp::Array x = sp::device_put(sp::arange(32.0f).reshape({8, 4}), sp::NamedSharding(mesh, P("x")));
  x.block_until_ready();
  sp::runtime::reset_transfer_stats();
  sp::Array same = sp::device_put(x, sp::NamedSharding(mesh, P("x")));
  // A trailing None does not change the layout.
  sp::Array x_only = sp::device_put(x, sp::NamedSharding(mesh, P("x", sp::None)));
  same.block_until_ready();
  x_only.block_until_ready();
  EXPECT_EQ(sp::runtime::transfer_stats().total_bytes(), 0);
  EXPECT_EQ(sp::runtime::transfer_stats().transfers, 0);
  EXPECT_EQ(same.impl(), x.impl());
  EXPECT_TRUE(arrays_equal(x_only, x));

  sp::Array on_three = sp::device_put(sp::arange(4), sp::devices()[3]);
  sp::runtime::reset_transfer_stats();
  EXPECT_EQ(sp::device_put(on_three, sp::devices()[3]).impl(), on_three.impl());
  EXPECT_EQ(sp::runtime::transfer_stats().total_bytes(), 0);
}

TEST(Placement, ReplacingWithAnotherSpecMovesDataBetweenDevices) {
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"x", "y"});
  sp::Array host = sp::arange(16.0f).reshape({8, 2});
  sp::Array x = sp::device_put(host, sp::NamedSharding(mesh, P("x")));
  x.block_until_ready();
  sp::runtime::reset_transfer_stats();
  sp::Array y = sp::device_put(x, sp::NamedSharding(mesh, P("y")));
  y.block_until_ready();
  sp::runtime::TransferStats stats = sp::runtime::transfer_stats();
  EXPECT_GT(stats.device_to_device_bytes, 0);
  EXPECT_EQ(stats.host_to_device_bytes, 0);
  EXPECT_GT(stats.transfers, 0);
  expect_replica_ids(y, {0, 0, 1, 1, 2, 2, 3, 3});
  EXPECT_TRUE(arrays_equal(y, host));
  for (const sp::Shard& s : y.addressable_shards())
    EXPECT_TRUE(
        arrays_equal(s.data, sp::lax::slice_in_dim(host, s.index[0].start, s.index[0].stop)))
        << s.device;

  // From one device to another.
  sp::Array a = sp::device_put(host, sp::devices()[1]);
  a.block_until_ready();
  sp::runtime::reset_transfer_stats();
  sp::Array b = sp::device_put(a, sp::devices()[6]);
  b.block_until_ready();
  EXPECT_EQ(received_bytes(sp::runtime::transfer_stats()), share_here(16 * 4, {6}));
  EXPECT_EQ(shard_ids(b), ids_here({6}));
  EXPECT_TRUE(arrays_equal(b, host));
}

// Between two device sets, each new block is copied from the blocks it overlaps, once: no gather
// of the whole value through the host.
TEST(Placement, DevicePutBetweenDeviceSetsCopiesEachElementOnce) {
  const std::vector<sp::Device> all = sp::devices();
  sp::Mesh first({all.begin(), all.begin() + 4}, sp::Shape{4}, {"a"});
  sp::Mesh second({all.begin() + 4, all.end()}, sp::Shape{2, 2}, {"p", "q"});
  sp::Array host = sp::arange(64.0f).reshape({8, 8});
  sp::Array x = sp::device_put(host, sp::NamedSharding(first, P("a")));
  x.block_until_ready();
  sp::runtime::reset_transfer_stats();
  sp::Array y = sp::device_put(x, sp::NamedSharding(second, P("q", "p")));
  y.block_until_ready();
  sp::runtime::TransferStats stats = sp::runtime::transfer_stats();
  EXPECT_EQ(stats.device_to_host_bytes, 0);
  EXPECT_EQ(stats.host_to_device_bytes, 0);
  EXPECT_EQ(received_bytes(stats), share_here(64 * 4, {4, 5, 6, 7}));
  EXPECT_TRUE(arrays_equal(y, host));
  for (const sp::Shard& s : y.addressable_shards())
    EXPECT_TRUE(arrays_equal(s.data, sp::lax::slice(host, {s.index[0].start, s.index[1].start},
                                                    {s.index[0].stop, s.index[1].stop})))
        << s.device;

  // Within one device set, a block already on its device is copied there without a transfer.
  sp::runtime::reset_transfer_stats();
  sp::Array z = sp::device_put(x, sp::NamedSharding(first, P(sp::None, "a")));
  z.block_until_ready();
  // Each device keeps the quarter of its new block that it held: 3/4 of the value moves.
  EXPECT_EQ(received_bytes(sp::runtime::transfer_stats()), share_here(48 * 4, {0, 1, 2, 3}));
  EXPECT_EQ(sp::runtime::transfer_stats().device_to_host_bytes, 0);
  EXPECT_TRUE(arrays_equal(z, host));
}

const void* buffer_of(const sp::Shard& s) {
  return s.data.impl()->buffer.get();
}

// An all_gather's result is one buffer that the devices of a process share (past the 64 KiB per
// device below which a collective copies its inputs, as here: 128 KiB). It is never written
// in place: a donated elementwise update of one device's copy gets a buffer of its own, and every
// other device still reads the old value.
TEST(Placement, DonatingOneSharedReplicaLeavesTheOthers) {
  sp::Mesh mesh = sp::make_mesh({8}, {"i"});
  sp::Array host = sp::arange(256.0f * 1024).reshape({256, 1024});
  sp::Array split = sp::device_put(host, sp::NamedSharding(mesh, P("i")));
  sp::Array rep = sp::jit([&](const sp::Array& v) {
    return sp::with_sharding_constraint(v, sp::NamedSharding(mesh, P()));
  })(split);
  std::vector<sp::Shard> shards = rep.addressable_shards();
  for (const sp::Shard& s : shards) ASSERT_EQ(buffer_of(s), buffer_of(shards[0])) << s.device;
  sp::Array mine = shards.back().data;
  shards.clear();
  sp::Array bumped =
      sp::jit([](const sp::Array& v) { return v + 1.0f; }, {.donate_argnums = {0}})(mine);
  EXPECT_TRUE(arrays_equal(bumped, host + 1.0f));
  EXPECT_NE(bumped.impl()->buffer.get(), buffer_of(rep.addressable_shards()[0]));
  for (const sp::Shard& s : rep.addressable_shards())
    EXPECT_TRUE(arrays_equal(s.data, host)) << s.device;
}

// pmap takes its argument wherever it lives: blocks already on the right device stay, the
// others move, and the values are the same.
TEST(Placement, PmapOfArraysPlacedElsewhere) {
  sp::Array host = sp::arange(8.0f * 3).reshape({8, 3});
  auto square = sp::pmap([](sp::Array v) { return v * v; });
  sp::Array in_place = sp::device_put(host, sp::NamedSharding(sp::make_mesh({8}, {"i"}), P("i")));
  in_place.block_until_ready();
  sp::runtime::reset_transfer_stats();
  sp::Array a = square(in_place);
  a.block_until_ready();
  EXPECT_EQ(sp::runtime::transfer_stats().total_bytes(), 0);
  EXPECT_TRUE(arrays_equal(a, host * host));

  std::vector<sp::Device> reversed = sp::devices();
  std::reverse(reversed.begin(), reversed.end());
  sp::Array elsewhere =
      sp::device_put(host, sp::NamedSharding(sp::Mesh(reversed, {8}, {"i"}), P("i")));
  sp::Array b = square(elsewhere);
  EXPECT_TRUE(arrays_equal(b, host * host));
  EXPECT_EQ(shard_ids(b), first_ids_here(8));

  std::vector<sp::Device> all = sp::devices();
  sp::Array c = sp::pmap([](sp::Array v) { return v + 1; },
                         {.devices = std::vector<sp::Device>(all.begin() + 4, all.end())})(
      sp::lax::slice_in_dim(a, 0, 4));
  EXPECT_TRUE(arrays_equal(c, sp::lax::slice_in_dim(host * host, 0, 4) + 1));
  EXPECT_EQ(shard_ids(c), ids_here({4, 5, 6, 7}));
}

TEST(Placement, EagerOpsOnShardedArraysGiveTheValues) {
  sp::Mesh mesh = sp::make_mesh({2, 4}, {"x", "y"});
  sp::Array a = sp::arange(32.0f).reshape({4, 8}) / 8;
  sp::Array b = sp::arange(32.0f).reshape({4, 8}) - 5;
  sp::Array as = sp::device_put(a, sp::NamedSharding(mesh, P("x", "y")));
  sp::Array bs = sp::device_put(b, sp::NamedSharding(mesh, P(sp::None, sp::axes("x", "y"))));
  EXPECT_TRUE(arrays_equal(sp::sin(as), sp::sin(a)));
  EXPECT_TRUE(arrays_equal(as * bs + 1, a * b + 1));
  EXPECT_TRUE(arrays_equal(sp::sum(as, {1}), sp::sum(a, {1})));
  EXPECT_TRUE(arrays_equal(sp::dot(as, bs.T()), sp::dot(a, b.T())));
  EXPECT_TRUE(arrays_equal(as.reshape({8, 4})[3], a.reshape({8, 4})[3]));
}

TEST(Placement, BlockUntilReadyReturnsTheSameArray) {
  sp::Mesh mesh = sp::make_mesh({8}, {"i"});
  sp::Array x = sp::device_put(sp::arange(16), sp::NamedSharding(mesh, P("i")));
  const sp::Array& r = x.block_until_ready();
  EXPECT_EQ(&r, &x);
  auto f = sp::shard_map([](sp::Array v) { return v * v; }, mesh, {P("i")}, P("i"));
  sp::Array y = f(x);
  EXPECT_EQ(y.block_until_ready().impl(), y.impl());
  EXPECT_EQ(y.to_vector<int32_t>()[15], 225);
}

TEST(Placement, ShardedArraysPrintAsTheirValues) {
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"x", "y"});
  sp::Array x = sp::arange(8.0f).reshape({2, 4}) / 2;
  sp::Array xs = sp::device_put(x, sp::NamedSharding(mesh, P("y", "x")));
  std::ostringstream got, want;
  got << xs;
  want << x;
  EXPECT_EQ(got.str(), want.str());
  EXPECT_EQ(got.str(), "[[0.  0.5 1.  1.5]\n [2.  2.5 3.  3.5]]");
  EXPECT_EQ(sp::repr(xs), sp::repr(x));
  EXPECT_EQ(sp::repr(sp::device_put(sp::arange(3), sp::devices()[2])),
            "Array([0, 1, 2], dtype=int32)");
  EXPECT_EQ(xs.sharding()->repr(),
            "NamedSharding(mesh=Mesh('x': 4, 'y': 2, axis_types=(Auto, Auto)), spec=P('y', "
            "'x'), memory_kind=device)");
}

}  // namespace

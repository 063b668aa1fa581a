// NamedSharding and SingleDeviceSharding geometry: the vectors of JAX_FACTS.md, then every
// (mesh, spec, shape) recorded from JAX — shard shapes, devices_indices_map in JAX's order,
// replica ids of device_put shards, full replication, reprs — and the shape errors.
#include <spmd/error.h>
#include <spmd/sharding.h>

#include <gtest/gtest.h>

#include "sharding/geometry.h"
#include "sharding/golden_cases.h"

#include <map>

namespace {

namespace sp = spmd;
using sharding_test::sharding_error;
using sp::P;

std::vector<int> replica_ids(const sp::Sharding& s, const sp::Shape& shape) {
  std::vector<int> out;
  for (const sp::ShardSlot& slot : s.layout(shape)) out.push_back(slot.replica_id);
  return out;
}

const sp::Mesh& mesh42() {
  return sharding_test::golden_mesh("m42");
}

TEST(NamedShardingTest, JaxFactsVectorsOnA4x2Mesh) {
  sp::Shape shape{8, 2};
  sp::NamedSharding x(mesh42(), P("x"));
  EXPECT_EQ(x.shard_shape(shape), (sp::Shape{2, 2}));
  EXPECT_EQ(replica_ids(x, shape), (std::vector<int>{0, 1, 0, 1, 0, 1, 0, 1}));

  sp::NamedSharding y(mesh42(), P("y"));
  EXPECT_EQ(y.shard_shape(shape), (sp::Shape{4, 2}));
  EXPECT_EQ(replica_ids(y, shape), (std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3}));
  auto map = y.devices_indices_map(shape);
  EXPECT_EQ(map[0].second, (std::vector<sp::Slice>{{0, 4}, {0, 2}}));
  EXPECT_EQ(map[1].second, (std::vector<sp::Slice>{{4, 8}, {0, 2}}));

  EXPECT_EQ(sp::NamedSharding(mesh42(), P(sp::None, "y")).shard_shape(shape), (sp::Shape{8, 1}));
  sp::NamedSharding xy(mesh42(), P(sp::axes("x", "y")));
  EXPECT_EQ(xy.shard_shape(shape), (sp::Shape{1, 2}));
  EXPECT_EQ(replica_ids(xy, shape), (std::vector<int>(8, 0)));
  sp::NamedSharding rep(mesh42(), P());
  EXPECT_EQ(rep.shard_shape(shape), shape);
  EXPECT_EQ(replica_ids(rep, shape), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(NamedShardingTest, TileAssignmentPutsUsedAxesFirst) {
  // P('y') on (x=4, y=2): iota transposed to (y, x) → devices 0,2,4,6 hold block 0.
  sp::TileAssignment ta = sp::tile_assignment(mesh42(), P("y"), 2);
  EXPECT_EQ(ta.tiles, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(ta.replication, 4);
  EXPECT_EQ(ta.positions, (std::vector<int64_t>{0, 2, 4, 6, 1, 3, 5, 7}));
  sp::TileAssignment yx = sp::tile_assignment(mesh42(), P(sp::axes("y", "x")), 1);
  EXPECT_EQ(yx.tiles, (std::vector<int64_t>{8}));
  EXPECT_EQ(yx.replication, 1);
  EXPECT_EQ(yx.positions, (std::vector<int64_t>{0, 2, 4, 6, 1, 3, 5, 7}));
}

struct Recorded {
  std::string mesh, spec, shape, repr, shard_shape;
  bool fully_replicated = false;
  std::vector<std::pair<int, std::string>> index;    // devices_indices_map order
  std::map<int, std::pair<std::string, int>> shard;  // device → (index, replica id)
};

std::vector<Recorded> recorded_cases() {
  std::vector<Recorded> out;
  for (const std::string& line :
       sharding_test::lines_of(spmd_test::golden_text("sharding/layouts.txt"))) {
    std::vector<std::string> f = sharding_test::split(line, ' ');
    if (f[0] == "case") {
      Recorded r;
      r.mesh = f[1], r.spec = f[2], r.shape = f[3];
      out.push_back(r);
    } else if (out.empty()) {
      continue;
    } else if (f[0] == "repr") {
      out.back().repr = line.substr(5);
    } else if (f[0] == "shard_shape") {
      out.back().shard_shape = f[1];
    } else if (f[0] == "fully_replicated") {
      out.back().fully_replicated = f[1] == "1";
    } else if (f[0] == "index") {
      out.back().index.emplace_back(std::stoi(f[1]), f[2]);
    } else if (f[0] == "shard") {
      out.back().shard[std::stoi(f[1])] = {f[2], std::stoi(f[3])};
    }
  }
  return out;
}

std::string slices_code(const std::vector<sp::Slice>& index) {
  std::string out;
  for (const sp::Slice& s : index) {
    if (!out.empty()) out += ',';
    out += std::to_string(s.start) + ":" + std::to_string(s.stop);
  }
  return out.empty() ? "-" : out;
}

TEST(NamedShardingTest, GeometryMatchesJaxForEveryRecordedCase) {
  std::vector<Recorded> cases = recorded_cases();
  ASSERT_GT(cases.size(), 800u);
  for (const Recorded& c : cases) {
    SCOPED_TRACE(c.mesh + " " + c.spec + " " + c.shape);
    sp::NamedSharding s(sharding_test::golden_mesh(c.mesh), sharding_test::decode_spec(c.spec));
    sp::Shape shape = sharding_test::decode_shape(c.shape);
    EXPECT_EQ(s.repr(), c.repr);
    EXPECT_EQ(s.shard_shape(shape), sharding_test::decode_shape(c.shard_shape));
    EXPECT_EQ(s.is_fully_replicated(), c.fully_replicated);
    auto map = s.devices_indices_map(shape);
    ASSERT_EQ(map.size(), c.index.size());
    for (size_t i = 0; i < map.size(); ++i) {
      EXPECT_EQ(map[i].first.id, c.index[i].first) << "position " << i;
      EXPECT_EQ(slices_code(map[i].second), c.index[i].second) << "device " << c.index[i].first;
    }
    std::vector<sp::ShardSlot> layout = s.layout(shape);
    ASSERT_EQ(layout.size(), c.shard.size());
    for (const sp::ShardSlot& slot : layout) {
      const auto& [index, replica] = c.shard.at(slot.device.id);
      EXPECT_EQ(slices_code(slot.index), index) << "device " << slot.device.id;
      EXPECT_EQ(slot.replica_id, replica) << "device " << slot.device.id;
    }
  }
}

TEST(NamedShardingTest, RejectsSpecLongerThanRankWithJaxMessage) {
  for (const auto& e : sharding_test::golden_errors("rank")) {
    sp::NamedSharding s(sharding_test::golden_mesh(e.mesh), sharding_test::decode_spec(e.spec));
    sp::Shape shape = sharding_test::decode_shape(e.shape);
    // JAX's device_put wraps the sharding's own message; spmd reports that message.
    std::string inner = e.message.substr(e.message.find("Sharding NamedSharding", 1));
    EXPECT_EQ(sharding_error([&] { s.check_shape(shape, "device_put"); }), "[device_put] " + inner);
    EXPECT_EQ(sharding_error([&] { s.layout(shape); }), "[NamedSharding] " + inner);
    EXPECT_EQ(sharding_error([&] { s.shard_shape(shape); }), "[NamedSharding] " + inner);
  }
}

TEST(NamedShardingTest, RejectsIndivisibleDimsWithJaxMessage) {
  for (const auto& e : sharding_test::golden_errors("indivisible")) {
    sp::NamedSharding s(sharding_test::golden_mesh(e.mesh), sharding_test::decode_spec(e.spec));
    sp::Shape shape = sharding_test::decode_shape(e.shape);
    EXPECT_EQ(sharding_error([&] { s.check_shape(shape, "device_put"); }),
              "[device_put] " + e.message);
    EXPECT_EQ(sharding_error([&] { s.devices_indices_map(shape); }),
              "[NamedSharding] " + e.message);
  }
}

TEST(NamedShardingTest, AcceptsFittingShapes) {
  sp::NamedSharding s(mesh42(), P("x", "y"));
  EXPECT_EQ(sharding_error([&] { s.check_shape({8, 6, 5}, "device_put"); }), "");
}

TEST(NamedShardingTest, DeviceSetIsSortedAndDeviceListKeepsMeshOrder) {
  sp::NamedSharding s(sharding_test::golden_mesh("m42p"), P("x"));
  EXPECT_EQ(s.num_devices(), 8);
  std::vector<int> listed, set;
  for (const sp::Device& d : s.device_list()) listed.push_back(d.id);
  for (const sp::Device& d : s.device_set()) set.push_back(d.id);
  EXPECT_EQ(listed, (std::vector<int>{0, 1, 2, 3, 6, 7, 4, 5}));
  EXPECT_EQ(set, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(NamedShardingTest, FullyReplicatedOnlyWhenNoAxisSplits) {
  EXPECT_TRUE(sp::NamedSharding(mesh42(), P()).is_fully_replicated());
  EXPECT_TRUE(sp::NamedSharding(mesh42(), P(sp::None, sp::None)).is_fully_replicated());
  EXPECT_FALSE(sp::NamedSharding(mesh42(), P(sp::None, "y")).is_fully_replicated());
  // An axis of size 1 splits nothing.
  EXPECT_TRUE(sp::NamedSharding(sharding_test::golden_mesh("m81"), P("y")).is_fully_replicated());
}

TEST(NamedShardingTest, EqualityIgnoresTrailingNonesButNotMeshOrSpec) {
  sp::NamedSharding a(mesh42(), P("x"));
  EXPECT_EQ(a, sp::NamedSharding(mesh42(), P("x", sp::None)));
  EXPECT_FALSE(a == sp::NamedSharding(mesh42(), P("y")));
  EXPECT_FALSE(a == sp::NamedSharding(sharding_test::golden_mesh("m42p"), P("x")));
  EXPECT_FALSE(a == sp::SingleDeviceSharding(sp::Device{0, "cpu", 0}));
  const sp::Sharding& base = a;
  EXPECT_EQ(&static_cast<const sp::NamedSharding&>(base).mesh(), &a.mesh());
  EXPECT_EQ(a.spec(), P("x"));
}

TEST(NamedShardingTest, SingleDeviceShardingHoldsTheWholeArray) {
  sp::SingleDeviceSharding s(sp::Device{3, "cpu", 0});
  EXPECT_EQ(s.repr(), "SingleDeviceSharding(device=CpuDevice(id=3), memory_kind=device)");
  EXPECT_TRUE(s.is_fully_replicated());
  EXPECT_EQ(s.num_devices(), 1);
  EXPECT_EQ(s.shard_shape({5, 7}), (sp::Shape{5, 7}));
  std::vector<sp::ShardSlot> layout = s.layout({5, 7});
  ASSERT_EQ(layout.size(), 1u);
  EXPECT_EQ(layout[0].device.id, 3);
  EXPECT_EQ(layout[0].index, (std::vector<sp::Slice>{{0, 5}, {0, 7}}));
  EXPECT_EQ(layout[0].replica_id, 0);
  EXPECT_EQ(s, sp::SingleDeviceSharding(sp::Device{3, "cpu", 0}));
  EXPECT_FALSE(s == sp::SingleDeviceSharding(sp::Device{2, "cpu", 0}));
  std::ostringstream os;
  os << s;
  EXPECT_EQ(os.str(), s.repr());
}

}  // namespace

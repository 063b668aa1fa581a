// Mesh, make_mesh and create_device_mesh: axis sizes, device order, reprs and errors against
// JAX (tests/goldens/sharding, recorded by tools/goldens/gen_sharding.py).
#include <spmd/config.h>
#include <spmd/error.h>
#include <spmd/sharding.h>

#include <gtest/gtest.h>

#include "sharding/golden_cases.h"

namespace {

namespace sp = spmd;
using sharding_test::cpu_devices;
using sharding_test::sharding_error;

// make_mesh and create_device_mesh take the process's devices; the seeds run on 8.
bool have_eight_devices() {
  if (sp::config::cpu_device_count() != 8) {
    try {
      sp::config::set_cpu_device_count(8);
    } catch (const sp::Error&) {
      return false;
    }
  }
  return sp::device_count() == 8;
}

TEST(MeshTest, ShapeSizesAndDeviceIdsFollowTheAxes) {
  sp::Mesh mesh(cpu_devices({0, 1, 2, 3, 6, 7, 4, 5}), {4, 2}, {"x", "y"});
  using Entry = std::pair<std::string, int64_t>;
  EXPECT_EQ(mesh.shape(), (std::vector<Entry>{{"x", 4}, {"y", 2}}));
  EXPECT_EQ(mesh.axis_names(), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(mesh.axis_size("x"), 4);
  EXPECT_EQ(mesh.axis_size("y"), 2);
  EXPECT_EQ(mesh.axis_position("y"), 1);
  EXPECT_EQ(mesh.axis_position("z"), -1);
  EXPECT_EQ(mesh.size(), 8);
  EXPECT_EQ(mesh.devices_shape(), (sp::Shape{4, 2}));
  EXPECT_EQ(mesh.device_ids(), (std::vector<int>{0, 1, 2, 3, 6, 7, 4, 5}));
  EXPECT_EQ(mesh.devices()[4], (sp::Device{6, "cpu", 0}));
}

TEST(MeshTest, AxisSizeOfUnknownNameNamesTheAxes) {
  sp::Mesh mesh(cpu_devices({0, 1, 2, 3}), {2, 2}, {"a", "b"});
  EXPECT_EQ(sharding_error([&] { mesh.axis_size("c"); }),
            "[Mesh] axis name 'c' is not in the mesh: ('a', 'b')");
}

TEST(MeshTest, ReprAndStrMatchJax) {
  int count = 0;
  for (const auto& [name, golden] : sharding_test::golden_meshes()) {
    EXPECT_EQ(golden.mesh->repr(), golden.repr) << name;
    EXPECT_EQ(golden.mesh->str(), golden.str) << name;
    ++count;
  }
  EXPECT_EQ(count, 10);
  std::ostringstream os;
  os << sharding_test::golden_mesh("m42");
  EXPECT_EQ(os.str(), "Mesh(axis_sizes=(4, 2), axis_names=('x', 'y'), axis_types=(Auto, Auto))");
}

TEST(MeshTest, EqualityComparesDevicesShapeAndNames) {
  sp::Mesh a(cpu_devices({0, 1, 2, 3}), {2, 2}, {"x", "y"});
  EXPECT_EQ(a, sp::Mesh(cpu_devices({0, 1, 2, 3}), {2, 2}, {"x", "y"}));
  EXPECT_FALSE(a == sp::Mesh(cpu_devices({0, 1, 3, 2}), {2, 2}, {"x", "y"}));
  EXPECT_FALSE(a == sp::Mesh(cpu_devices({0, 1, 2, 3}), {4, 1}, {"x", "y"}));
  EXPECT_FALSE(a == sp::Mesh(cpu_devices({0, 1, 2, 3}), {2, 2}, {"y", "x"}));
}

TEST(MeshTest, RejectsNameCountOtherThanRankWithJaxMessage) {
  for (const auto& e : sharding_test::golden_errors("mesh_rank")) {
    std::string got = sharding_error([] {
      sp::Mesh(cpu_devices({0, 1, 2, 3, 4, 5, 6, 7}), {4, 2}, {"x"});
    });
    EXPECT_EQ(got, "[Mesh] " + e.message);
  }
}

TEST(MeshTest, RejectsAnAxisOfNoDevices) {
  // A mesh axis of size 0 would hold no device: make_mesh would build it from no devices and
  // later uses would fail far from the mistake (shard_map found its axes unbound).
  EXPECT_EQ(sharding_error([] { sp::make_mesh({0, 2}, {"a", "b"}); }),
            "[Mesh] every mesh axis needs at least one device, got axis 'a' of size 0 in mesh "
            "shape (0, 2)");
  EXPECT_EQ(sharding_error([] { sp::Mesh(cpu_devices({}), {2, 0}, {"x", "y"}); }),
            "[Mesh] every mesh axis needs at least one device, got axis 'y' of size 0 in mesh "
            "shape (2, 0)");
}

TEST(MeshTest, RejectsDuplicateNamesDevicesAndWrongDeviceCount) {
  EXPECT_EQ(sharding_error([] {
              sp::Mesh(cpu_devices({0, 1, 2, 3}), {2, 2}, {"x", "x"});
            }),
            "[Mesh] axis names must be unique, got ('x', 'x')");
  EXPECT_EQ(sharding_error([] {
              sp::Mesh(cpu_devices({0, 1, 1, 3}), {2, 2}, {"x", "y"});
            }),
            "[Mesh] a device may appear in a mesh only once, but CpuDevice(id=1) appears more "
            "than once");
  EXPECT_EQ(sharding_error([] {
              sp::Mesh(cpu_devices({0, 1, 2}), {2, 2}, {"x", "y"});
            }),
            "[Mesh] a mesh of shape (2, 2) needs 4 devices, got 3");
}

TEST(MeshTest, MakeMeshTakesTheFirstDevicesRowMajor) {
  if (!have_eight_devices()) GTEST_SKIP() << "needs 8 CPU devices";
  sp::Mesh mesh = sp::make_mesh({2, 2}, {"a", "b"});
  EXPECT_EQ(mesh.device_ids(), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(mesh.axis_size("b"), 2);
  EXPECT_EQ(sp::make_mesh({4, 2}, {"x", "y"}), sharding_test::golden_mesh("m42"));
}

TEST(MeshTest, CreateDeviceMeshIsRowMajorOverTheFirstDevices) {
  if (!have_eight_devices()) GTEST_SKIP() << "needs 8 CPU devices";
  sp::DeviceMesh dm = sp::create_device_mesh({2, 3});
  EXPECT_EQ(dm.shape, (sp::Shape{2, 3}));
  ASSERT_EQ(dm.devices.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(dm.devices[size_t(i)].id, i);
  sp::Mesh mesh(dm, {"r", "c"});
  EXPECT_EQ(mesh.repr(), "Mesh(axis_sizes=(2, 3), axis_names=('r', 'c'), axis_types=(Auto, Auto))");
}

TEST(MeshTest, MakeMeshRejectsMoreDevicesThanExistWithJaxMessage) {
  if (!have_eight_devices()) GTEST_SKIP() << "needs 8 CPU devices";
  for (const auto& e : sharding_test::golden_errors("make_mesh_devices")) {
    sp::Shape shape = sharding_test::decode_shape(e.shape);
    EXPECT_EQ(sharding_error([&] {
                sp::make_mesh(shape, {"x", "y"});
              }),
              "[make_mesh] " + e.message);
    EXPECT_EQ(sharding_error([&] { sp::create_device_mesh(shape); }),
              "[create_device_mesh] " + e.message);
  }
}

}  // namespace

// Explicit sharding mode ("sharding in types") against JAX 0.10.2: meshes with axis types, the
// shardings that types carry, each op's result sharding and errors, out_sharding arguments,
// reshard and auto_axes / explicit_axes (goldens in tests/goldens/explicit, recorded by
// tools/goldens/gen_explicit.py; the cases use its names and spellings).
#include <spmd/config.h>
#include <spmd/error.h>
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "support/golden.h"

namespace {

namespace sp = spmd;
using sp::P;
using spmd_test::error_message;
using spmd_test::golden_blocks;
using spmd_test::jax_error;

constexpr sp::AxisType kE = sp::AxisType::Explicit;
constexpr sp::AxisType kA = sp::AxisType::Auto;
constexpr sp::AxisType kM = sp::AxisType::Manual;

class ExplicitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sp::device_count() < 8) GTEST_SKIP() << "needs 8 devices (SPMD_CPU_DEVICES=8)";
  }
  static std::string text(const std::string& name) {
    static const auto blocks = golden_blocks("explicit/texts.txt");
    auto it = blocks.find(name);
    return it == blocks.end() ? "(missing golden " + name + ")" : it->second;
  }
  static std::string error(const std::string& name) {
    return jax_error("explicit/errors.txt", name);
  }

  sp::Mesh m = sp::make_mesh({4, 2}, {"a", "b"}, {kE, kE});
  sp::Mesh mixed = sp::make_mesh({4, 2}, {"a", "b"}, {kE, kA});
};

TEST_F(ExplicitTest, MeshReprsPrintTheAxisTypes) {
  EXPECT_EQ(m.repr(), text("mesh_explicit_repr"));
  EXPECT_EQ(m.str(), text("mesh_explicit_str"));
  sp::Mesh three = sp::make_mesh({2, 2, 2}, {"a", "b", "c"}, {kE, kA, kM});
  EXPECT_EQ(three.repr(), text("mesh_mixed_repr"));
  EXPECT_EQ(three.str(), text("mesh_mixed_str"));
  EXPECT_EQ(three.axis_types(), (std::vector<sp::AxisType>{kE, kA, kM}));
  EXPECT_EQ(three.axis_type("c"), kM);
  EXPECT_EQ(sp::NamedSharding(m, P("a", "b")).repr(), text("sharding_repr"));
}

TEST_F(ExplicitTest, MakeMeshDefaultsToAuto) {
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"a", "b"});
  EXPECT_EQ(mesh.axis_types(), (std::vector<sp::AxisType>{kA, kA}));
  EXPECT_FALSE(mesh.has_explicit_axes());
  EXPECT_TRUE(m.has_explicit_axes());
}

TEST_F(ExplicitTest, MeshesDifferingInAxisTypesDiffer) {
  EXPECT_EQ(text("mesh_types_equal"), "False");
  EXPECT_FALSE(m == mixed);
  EXPECT_TRUE(m == sp::make_mesh({4, 2}, {"a", "b"}, {kE, kE}));
  EXPECT_FALSE(sp::NamedSharding(m, P("a")) == sp::NamedSharding(mixed, P("a")));
}

TEST_F(ExplicitTest, AxisTypesMustMatchTheAxisNames) {
  EXPECT_EQ(error_message<sp::ValueError>([] {
              sp::make_mesh({4, 2}, {"a", "b"}, {kE});
            }),
            "[Mesh] " + error("make_mesh_types_count"));
}

TEST_F(ExplicitTest, ReshardNamesTheTypeOfAnAutoAxis) {
  sp::Array x = sp::arange(256.0f).reshape({16, 16});
  EXPECT_EQ(
      error_message<sp::ValueError>([&] { sp::reshard(x, sp::NamedSharding(mixed, P("b"))); }),
      "[reshard] " + error("reshard_auto_axis"));
}

}  // namespace

// visualize_sharding / sharding_to_string against the text jax.debug.visualize_sharding prints
// with colour off (tests/goldens/sharding/visualize.txt: every 1-D and 2-D recorded layout, the
// seeds' pictures, several scales and widths, tables narrower than their cells), plus the rank
// error, drawing two dims of a rank-3 array, and the colour mode
// (tests/goldens/sharding/colour.txt).
#include <spmd/error.h>
#include <spmd/sharding.h>

#include <gtest/gtest.h>

#include "sharding/golden_cases.h"

#include <memory>

namespace {

namespace sp = spmd;
using sharding_test::sharding_error;
using sp::P;

struct Picture {
  std::string header, mesh, spec, shape;
  sp::VisualizeOptions options;
  std::string text;
};

std::vector<Picture> recorded_pictures(const std::string& file, bool use_color) {
  std::vector<Picture> out;
  for (const std::string& line : sharding_test::lines_of(spmd_test::golden_text(file))) {
    if (line.rfind("=== ", 0) == 0) {
      std::vector<std::string> f = sharding_test::split(line, ' ');
      Picture p;
      p.header = line, p.mesh = f[1], p.spec = f[2], p.shape = f[3];
      p.options.scale = std::stod(f[4]);
      p.options.min_width = std::stoi(f[5]);
      p.options.max_width = std::stoi(f[6]);
      p.options.use_color = use_color;
      out.push_back(p);
    } else {
      out.back().text += line + "\n";
    }
  }
  return out;
}

std::unique_ptr<sp::Sharding> sharding_of(const Picture& p) {
  if (p.mesh == "single")
    return std::make_unique<sp::SingleDeviceSharding>(sp::Device{0, "cpu", 0});
  return std::make_unique<sp::NamedSharding>(sharding_test::golden_mesh(p.mesh),
                                             sharding_test::decode_spec(p.spec));
}

void expect_pictures_match(const std::vector<Picture>& pictures) {
  for (const Picture& p : pictures) {
    std::string got =
        sp::sharding_to_string(sharding_test::decode_shape(p.shape), *sharding_of(p), p.options);
    EXPECT_EQ(got, p.text) << p.header << "\ngot:\n" << got << "expected:\n" << p.text;
  }
}

TEST(VisualizeTest, TextMatchesJaxForEveryRecordedPicture) {
  std::vector<Picture> pictures = recorded_pictures("sharding/visualize.txt", false);
  ASSERT_GT(pictures.size(), 350u);
  expect_pictures_match(pictures);
}

TEST(VisualizeTest, ColourModeMatchesJaxOnATruecolourTerminal) {
  // Includes the distributed-arrays tutorial's pictures, which a notebook shows in colour.
  std::vector<Picture> pictures = recorded_pictures("sharding/colour.txt", true);
  ASSERT_EQ(pictures.size(), 15u);
  expect_pictures_match(pictures);
}

TEST(VisualizeTest, MatmulBasicOutputHasFourRowsOfTwoDevices) {
  // The shard_map tutorial's c = matmul_basic(a, b) with out_specs P('x', None) on a 4x2 mesh.
  sp::NamedSharding s(sharding_test::golden_mesh("m42"), P("x", sp::None));
  EXPECT_EQ(sp::sharding_to_string({8, 4}, s),
            "┌──────────┐\n"
            "│ CPU 0,1  │\n"
            "├──────────┤\n"
            "│ CPU 2,3  │\n"
            "├──────────┤\n"
            "│ CPU 4,5  │\n"
            "├──────────┤\n"
            "│ CPU 6,7  │\n"
            "└──────────┘\n");
}

TEST(VisualizeTest, RankOtherThanOneOrTwoRaisesJaxErrorUnlessDimsAreGiven) {
  for (const auto& e : sharding_test::golden_errors("visualize_rank")) {
    sp::NamedSharding s(sharding_test::golden_mesh(e.mesh), sharding_test::decode_spec(e.spec));
    sp::Shape shape = sharding_test::decode_shape(e.shape);
    std::string got = sharding_error([&] { sp::sharding_to_string(shape, s); });
    EXPECT_EQ(got.rfind("[visualize_sharding] " + e.message, 0), 0u) << got;
  }
  sp::NamedSharding s(sharding_test::golden_mesh("m42"), P("x"));
  EXPECT_EQ(sharding_error([&] {
              sp::sharding_to_string({8, 2, 2}, s, {.dims = {{1, 1}}});
            }),
            "[visualize_sharding] dims must name two different dims, got (1, 1)");
  EXPECT_THROW(sp::sharding_to_string({8, 2, 2}, s, {.dims = {{0, 3}}}), sp::AxisError);
}

TEST(VisualizeTest, ZeroSizedDimsCannotBeDrawn) {
  sp::NamedSharding s(sharding_test::golden_mesh("m42"), P());
  EXPECT_EQ(sharding_error([&] {
              sp::sharding_to_string({4, 0}, s);
            }),
            "[visualize_sharding] cannot draw dim 1 of shape (4, 0): it has size 0");
}

TEST(VisualizeTest, ToStringWithoutAColourChoiceIsPlainText) {
  sp::NamedSharding s(sharding_test::golden_mesh("m42"), P("x", "y"));
  std::string text = sp::sharding_to_string({8, 8}, s);
  EXPECT_EQ(text.find("\x1b["), std::string::npos);
  EXPECT_EQ(text, sp::sharding_to_string({8, 8}, s, {.use_color = false}));
}

TEST(VisualizeTest, DimsDrawTwoDimsOfAHigherRankArray) {
  const sp::Mesh& mesh = sharding_test::golden_mesh("m42");
  std::string expected = sp::sharding_to_string({8, 4}, sp::NamedSharding(mesh, P("x", "y")));
  EXPECT_EQ(
      sp::sharding_to_string({8, 4, 3}, sp::NamedSharding(mesh, P("x", "y")), {.dims = {{0, 1}}}),
      expected);
  EXPECT_EQ(sp::sharding_to_string({8, 3, 4}, sp::NamedSharding(mesh, P("x", sp::None, "y")),
                                   {.dims = {{0, -1}}}),
            expected);
  // Swapping the dims transposes the picture.
  EXPECT_EQ(
      sp::sharding_to_string({4, 8}, sp::NamedSharding(mesh, P("y", "x"))),
      sp::sharding_to_string({8, 4}, sp::NamedSharding(mesh, P("x", "y")), {.dims = {{1, 0}}}));
}

TEST(VisualizeTest, ColourModeUsesBackgroundsInsteadOfBorders) {
  sp::NamedSharding s(sharding_test::golden_mesh("m42"), P("x", "y"));
  std::string text = sp::sharding_to_string({8, 8}, s, {.use_color = true});
  EXPECT_EQ(text.find("│"), std::string::npos);
  EXPECT_EQ(text.find("┌"), std::string::npos);
  EXPECT_NE(text.find("CPU 7"), std::string::npos);
  // tab20b's first colour (#393b79) behind white text for the first cell.
  EXPECT_EQ(text.rfind("\x1b[38;2;255;255;255;48;2;57;59;121m", 0), 0u);
  EXPECT_NE(text.find("\x1b[0m"), std::string::npos);
}

TEST(VisualizeTest, VisualizeShardingPrintsTheTextToStdout) {
  sp::NamedSharding s(sharding_test::golden_mesh("m42"), P("x"));
  testing::internal::CaptureStdout();
  sp::visualize_sharding({8, 4}, s, {.use_color = false});
  EXPECT_EQ(testing::internal::GetCapturedStdout(), sp::sharding_to_string({8, 4}, s));
}

}  // namespace

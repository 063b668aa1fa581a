// Plots of training curves: axis ranges, the SVG picture and the text drawing.
#include "cli/plot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <regex>
#include <stdexcept>

namespace spmd::cli {
namespace {

// Whether every element of the XML text is closed in order (comments and the declaration aside).
bool tags_balance(const std::string& xml) {
  std::vector<std::string> open;
  size_t pos = 0;
  while ((pos = xml.find('<', pos)) != std::string::npos) {
    size_t end = xml.find('>', pos);
    if (end == std::string::npos) return false;
    std::string tag = xml.substr(pos + 1, end - pos - 1);
    pos = end + 1;
    if (tag.starts_with('?') || tag.starts_with('!') || tag.ends_with('/')) continue;
    bool closing = tag.starts_with('/');
    std::string name = tag.substr(closing ? 1 : 0);
    name = name.substr(0, name.find(' '));
    if (!closing) {
      open.push_back(name);
    } else if (open.empty() || open.back() != name) {
      return false;
    } else {
      open.pop_back();
    }
  }
  return open.empty();
}

std::vector<std::string> all_matches(const std::string& text, const std::string& pattern) {
  std::regex re(pattern);
  std::vector<std::string> found;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
       ++it) {
    found.push_back((*it)[1]);
  }
  return found;
}

Panel tiny_panel() {
  return {"tiny", "x", "", {{"s", {0, 1, 2, 3}, {0, 1, 0, 2}}}};
}

TEST(Plot, NiceRangesRoundOutToOneTwoOrFiveTimesAPowerOfTen) {
  AxisRange loss = nice_range(0.32, 2.3);
  EXPECT_DOUBLE_EQ(loss.lo, 0);
  EXPECT_DOUBLE_EQ(loss.hi, 2.5);
  EXPECT_DOUBLE_EQ(loss.step, 0.5);
  AxisRange unit = nice_range(0, 1);
  EXPECT_DOUBLE_EQ(unit.lo, 0);
  EXPECT_DOUBLE_EQ(unit.hi, 1);
  EXPECT_DOUBLE_EQ(unit.step, 0.2);
  EXPECT_EQ(unit.tick_values().size(), 6u);
  AxisRange steps = nice_range(1, 2340);
  EXPECT_DOUBLE_EQ(steps.lo, 0);
  EXPECT_DOUBLE_EQ(steps.hi, 2500);
  EXPECT_DOUBLE_EQ(steps.step, 500);
  AxisRange accuracy = nice_range(0.8, 0.88);
  EXPECT_NEAR(accuracy.lo, 0.8, 1e-12);
  EXPECT_NEAR(accuracy.hi, 0.88, 1e-12);
  EXPECT_NEAR(accuracy.step, 0.02, 1e-15);
}

TEST(Plot, ConstantAndSinglePointRangesAreWidened) {
  AxisRange constant = nice_range(0.5, 0.5);
  EXPECT_NEAR(constant.lo, 0.44, 1e-12);
  EXPECT_NEAR(constant.hi, 0.56, 1e-12);
  AxisRange zero = nice_range(0, 0);
  EXPECT_DOUBLE_EQ(zero.lo, -1);
  EXPECT_DOUBLE_EQ(zero.hi, 1);
  Panel empty{"none", "", "", {{"nan", {0, 1}, {NAN, INFINITY}}}};
  EXPECT_DOUBLE_EQ(y_range(empty).lo, 0);
  EXPECT_DOUBLE_EQ(y_range(empty).hi, 1);
  EXPECT_THROW(nice_range(1, 0), std::invalid_argument);
}

TEST(Plot, TickLabelsShowTheDecimalsTheStepNeeds) {
  EXPECT_EQ(format_tick(0.25, 0.05), "0.25");
  EXPECT_EQ(format_tick(1.5, 0.5), "1.5");
  EXPECT_EQ(format_tick(2000, 500), "2000");
  EXPECT_EQ(format_tick(-1e-17, 0.2), "0.0");
}

TEST(Plot, SvgPlacesPointsOnTheirPixels) {
  Panel line{"loss", "epoch", "loss", {{"train", {0, 5, 10}, {0, 0.5, 1}}}};
  Panel other{"accuracy", "epoch", "", {{"test", {0, 10}, {0, 1}}}};
  std::string svg = to_svg({line, other}, "run");
  PlotArea first = plot_area(0), second = plot_area(1);
  EXPECT_DOUBLE_EQ(first.left, 64);
  EXPECT_DOUBLE_EQ(first.top, 58);
  EXPECT_DOUBLE_EQ(first.width, 400);
  EXPECT_DOUBLE_EQ(first.height, 224);
  EXPECT_DOUBLE_EQ(second.left, 480 + 64);
  // x in [0, 10] spans 400 pixels from 64; y in [0, 1] spans 224 pixels up from 282.
  EXPECT_EQ(all_matches(svg, "<polyline [^>]*points=\"([^\"]*)\""),
            (std::vector<std::string>{"64.00,282.00 264.00,170.00 464.00,58.00",
                                      "544.00,282.00 944.00,58.00"}));
  EXPECT_NE(svg.find("width=\"960\" height=\"350\""), std::string::npos);
}

TEST(Plot, SvgIsABalancedStandaloneDocument) {
  Panel loss{"loss <train & test>", "epoch", "loss", {{"a\"b", {0, 1}, {1, 2}}}};
  std::string svg = to_svg({loss}, "title");
  EXPECT_TRUE(svg.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns="));
  EXPECT_TRUE(tags_balance(svg));
  EXPECT_NE(svg.find("loss &lt;train &amp; test&gt;"), std::string::npos);
  EXPECT_NE(svg.find("a&quot;b"), std::string::npos);
  EXPECT_FALSE(tags_balance("<svg><g></svg></g>"));  // the checker itself can fail
  // Axis ticks: 0, 0.2, ..., 1 on x and 1, 1.2, ..., 2 on y.
  EXPECT_EQ(all_matches(svg, "text-anchor=\"middle\">([0-9.]+)</text>"),
            (std::vector<std::string>{"0.0", "0.2", "0.4", "0.6", "0.8", "1.0"}));
  EXPECT_EQ(all_matches(svg, "text-anchor=\"end\">([0-9.]+)</text>"),
            (std::vector<std::string>{"1.0", "1.2", "1.4", "1.6", "1.8", "2.0"}));
}

TEST(Plot, SvgBreaksLinesAtNonFinitePointsAndSaysSo) {
  Panel panel{
      "loss", "", "", {{"test", {0, 1, 2, 3, 4}, {1, 2, NAN, 3, 4}}, {"gone", {0}, {INFINITY}}}};
  std::string svg = to_svg({panel}, "");
  EXPECT_EQ(all_matches(svg, "<(polyline) ").size(), 2u);
  EXPECT_NE(svg.find(">test (1 NaN/inf point skipped)</text>"), std::string::npos);
  EXPECT_NE(svg.find(">gone (no finite points)</text>"), std::string::npos);
  EXPECT_TRUE(tags_balance(svg));
}

TEST(Plot, SvgDrawsASinglePointAsADot) {
  Panel panel{"loss", "", "", {{"one", {3}, {0.5}}}};
  std::string svg = to_svg({panel}, "");
  EXPECT_EQ(svg.find("<polyline"), std::string::npos);
  // x in [2.7, 3.3] and y in [0.44, 0.56]: the point is in the middle of the area.
  EXPECT_EQ(all_matches(svg, "<circle cx=\"([0-9.]+)\""), std::vector<std::string>{"264.00"});
  EXPECT_EQ(all_matches(svg, "<circle [^>]*cy=\"([0-9.]+)\""), std::vector<std::string>{"170.00"});
}

TEST(Plot, BrailleDrawingOfASmallSeries) {
  std::string text = to_text(tiny_panel(), {.width = 4, .height = 2, .charset = Charset::unicode});
  EXPECT_EQ(text,
            "tiny\n"
            "2.0 ┤   ⡜\n"
            "0.0 ┤⡰⠑⢤⠃\n"
            "    └────\n"
            "     0 2  x\n"
            "── s\n");
}

TEST(Plot, AsciiDrawingOfASmallSeries) {
  std::string text = to_text(tiny_panel(), {.width = 8, .height = 5, .charset = Charset::ascii});
  EXPECT_EQ(text,
            "tiny\n"
            "2.0 +       *\n"
            "1.5 +       *\n"
            "1.0 +  *   *\n"
            "0.5 + * ** *\n"
            "0.0 +*    *\n"
            "    +--------\n"
            "     0 1  2 3  x\n"
            "* s\n");
}

TEST(Plot, TextMarksEpochPointsAndReportsSkippedOnes) {
  // The NaN breaks the test line: its two points stand alone as markers.
  Panel panel{"loss", "", "", {{"train", {0, 4}, {1, 1}}, {"test", {0, 2, 4}, {2, NAN, 0}, true}}};
  std::string text = to_text(panel, {.width = 5, .height = 3, .charset = Charset::unicode});
  EXPECT_EQ(text,
            "loss\n"
            "2.0 ┤●\n"
            "1.0 ┤⠤⠤⠤⠤⠤\n"
            "0.0 ┤    ●\n"
            "    └─────\n"
            "     0 2 4\n"
            "── train   ● test (1 NaN/inf point skipped)\n");
}

TEST(Plot, ColourIsOptInAndAsciiNeverUsesUnicode) {
  std::string plain = to_text(tiny_panel(), {.width = 8, .height = 5, .charset = Charset::ascii});
  for (unsigned char c : plain) EXPECT_LT(c, 0x80);
  EXPECT_EQ(plain.find('\x1b'), std::string::npos);
  std::string colored =
      to_text(tiny_panel(), {.width = 8, .height = 5, .charset = Charset::ascii, .color = true});
  EXPECT_NE(colored.find("\x1b[34m*\x1b[0m"), std::string::npos);
}

TEST(Plot, AutomaticCharsetFollowsTheLocale) {
  const char* saved = std::getenv("LC_ALL");
  std::string saved_value = saved ? saved : "";
  ::setenv("LC_ALL", "C", 1);
  EXPECT_FALSE(locale_is_utf8());
  EXPECT_EQ(to_text(tiny_panel(), {.width = 8, .height = 5}),
            to_text(tiny_panel(), {.width = 8, .height = 5, .charset = Charset::ascii}));
  ::setenv("LC_ALL", "en_US.UTF-8", 1);
  EXPECT_TRUE(locale_is_utf8());
  ::setenv("LC_ALL", "de_DE.utf8", 1);
  EXPECT_TRUE(locale_is_utf8());
  if (saved) {
    ::setenv("LC_ALL", saved_value.c_str(), 1);
  } else {
    ::unsetenv("LC_ALL");
  }
}

TEST(Plot, RejectsMismatchedSeriesAndTinyCanvases) {
  Panel bad{"loss", "", "", {{"train", {0, 1, 2}, {1, 2}}}};
  try {
    to_svg({bad}, "");
    FAIL() << "expected invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "[plot] series 'train' needs as many x as y values, got 3 and 2");
  }
  EXPECT_THROW(to_text(tiny_panel(), {.width = 1, .height = 5}), std::invalid_argument);
  EXPECT_THROW(to_svg({tiny_panel()}, "", {.panel_width = 50}), std::invalid_argument);
}

}  // namespace
}  // namespace spmd::cli

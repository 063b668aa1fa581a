// The progress bar of `spmd train`: plain lines, in-place redraws, throttling and width fitting.
#include "cli/progress.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace spmd::cli {
namespace {

// The text after the last '\r': what the terminal shows.
std::string shown(const std::string& text) {
  return text.substr(text.rfind('\r') + 1);
}

// A bar at step 250 of 1000 after 62.5 s (4,096 samples/s, 187.5 s to go) drawn `width` wide.
std::string quarter_line(int width) {
  double now = 0;
  std::ostringstream out;
  ProgressBar bar(out, {.epoch = 3,
                        .num_epochs = 5,
                        .steps = 1000,
                        .interactive = true,
                        .width = width,
                        .clock = [&] { return now; }});
  for (int i = 0; i < 250; ++i) {
    now += 0.25;
    bar.update(0.25, 1024);
  }
  return shown(out.str());
}

TEST(ProgressBar, PlainModeWritesATenthOfTheEpochPerLineAndASummary) {
  double now = 100;
  std::ostringstream out;
  ProgressBar bar(out, {.epoch = 2, .num_epochs = 10, .steps = 20, .clock = [&] { return now; }});
  for (int i = 1; i <= 20; ++i) {
    now += 0.5;
    bar.update(i <= 10 ? 2.0 : 1.0, 128);
  }
  bar.finish("test accuracy 0.8641");
  EXPECT_EQ(out.str(),
            "epoch  2/10   2/20  loss 2.0000  256 samples/s  ETA 0:09\n"
            "epoch  2/10   4/20  loss 2.0000  256 samples/s  ETA 0:08\n"
            "epoch  2/10   6/20  loss 2.0000  256 samples/s  ETA 0:07\n"
            "epoch  2/10   8/20  loss 2.0000  256 samples/s  ETA 0:06\n"
            "epoch  2/10  10/20  loss 2.0000  256 samples/s  ETA 0:05\n"
            "epoch  2/10  12/20  loss 1.8333  256 samples/s  ETA 0:04\n"
            "epoch  2/10  14/20  loss 1.7143  256 samples/s  ETA 0:03\n"
            "epoch  2/10  16/20  loss 1.6250  256 samples/s  ETA 0:02\n"
            "epoch  2/10  18/20  loss 1.5556  256 samples/s  ETA 0:01\n"
            "epoch  2/10  20/20  loss 1.5000  256 samples/s  time 0:10  test accuracy 0.8641\n");
}

TEST(ProgressBar, PlainModeHonoursLogEvery) {
  double now = 0;
  std::ostringstream out;
  ProgressBar bar(out, {.steps = 5, .log_every = 2, .clock = [&] { return now; }});
  for (int i = 0; i < 5; ++i) {
    now += 1;
    bar.update(1.0, 10);
  }
  bar.finish();
  EXPECT_EQ(out.str(),
            "epoch 1/1  2/5  loss 1.0000  10.0 samples/s  ETA 0:03\n"
            "epoch 1/1  4/5  loss 1.0000  10.0 samples/s  ETA 0:01\n"
            "epoch 1/1  5/5  loss 1.0000  10.0 samples/s  time 0:05\n");
}

TEST(ProgressBar, LossIsTheSampleWeightedMeanOfTheEpoch) {
  std::ostringstream out;
  ProgressBar bar(out, {.steps = 3, .clock = [] { return 0.0; }});
  bar.update(1.0, 100);
  bar.update(4.0, 50);
  EXPECT_DOUBLE_EQ(bar.mean_loss(), 2.0);
  EXPECT_EQ(bar.step(), 2);
}

TEST(ProgressBar, InteractiveModeRedrawsAtMostOncePerInterval) {
  // Binary fractions keep the clock exact: a step every 1/32 s, a redraw every 1/8 s at most.
  double now = 0;
  std::ostringstream out;
  ProgressBar bar(
      out, {.steps = 12, .interactive = true, .width = 80, .min_interval = 0.125, .clock = [&] {
              return now;
            }});
  for (int i = 0; i < 12; ++i) {
    now += 0.03125;
    bar.update(0.5, 1);
  }
  std::string text = out.str();
  // Steps 1, 5 and 9 draw; the others fall inside the interval.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\r'), 3);
  EXPECT_NE(text.find(" 1/12"), std::string::npos);
  EXPECT_NE(text.find(" 5/12"), std::string::npos);
  EXPECT_NE(text.find(" 9/12"), std::string::npos);
  EXPECT_EQ(text.find(" 2/12"), std::string::npos);
  EXPECT_EQ(text.find("\n"), std::string::npos);
}

TEST(ProgressBar, InteractiveLineHasTheBarWhenItFits) {
  EXPECT_EQ(quarter_line(80),
            "epoch 3/5 [====>            ]  250/1000  loss 0.2500  4,096 samples/s  ETA 3:08");
  EXPECT_EQ(quarter_line(120),
            "epoch 3/5 [=======>                      ]  250/1000  loss 0.2500  4,096 samples/s  "
            "ETA 3:08");
}

TEST(ProgressBar, NarrowTerminalsDropTheBarThenTheRateTheEtaAndTheLoss) {
  EXPECT_EQ(quarter_line(72), "epoch 3/5   250/1000  loss 0.2500  4,096 samples/s  ETA 3:08");
  EXPECT_EQ(quarter_line(60), "epoch 3/5   250/1000  loss 0.2500  ETA 3:08");
  EXPECT_EQ(quarter_line(40), "epoch 3/5   250/1000  loss 0.2500");
  EXPECT_EQ(quarter_line(30), "epoch 3/5   250/1000");
  EXPECT_EQ(quarter_line(8), "epoch 3");
  for (int width : {8, 30, 40, 60, 72, 80, 120}) {
    EXPECT_LT(quarter_line(width).size(), static_cast<size_t>(width)) << width;
  }
}

TEST(ProgressBar, FinishOverwritesTheBarAndEndsTheLine) {
  double now = 0;
  std::ostringstream out;
  ProgressBar bar(out,
                  {.steps = 4, .interactive = true, .width = 100, .clock = [&] { return now; }});
  for (int i = 0; i < 4; ++i) {
    now += 1;
    bar.update(0.5, 10);
  }
  bar.finish();
  std::string last = shown(out.str());
  std::string summary = "epoch 1/1  4/4  loss 0.5000  10.0 samples/s  time 0:04";
  EXPECT_EQ(last.substr(0, summary.size()), summary);
  // Spaces clear what is left of the longer bar line.
  EXPECT_EQ(last.find_first_not_of(' ', summary.size()), last.size() - 1);
  EXPECT_EQ(last.back(), '\n');
}

TEST(ProgressBar, PlainModeWritesNoCarriageReturnOrEscape) {
  double now = 0;
  std::ostringstream out;
  ProgressBar bar(out, {.steps = 50, .clock = [&] { return now; }});
  for (int i = 0; i < 50; ++i) {
    now += 0.01;
    bar.update(0.1, 8);
  }
  bar.finish();
  std::string text = out.str();
  EXPECT_EQ(text.find('\r'), std::string::npos);
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 10);
}

TEST(ProgressBar, FormatsDurationsLikeTqdm) {
  EXPECT_EQ(format_duration(0), "0:00");
  EXPECT_EQ(format_duration(7.4), "0:07");
  EXPECT_EQ(format_duration(59.5), "1:00");
  EXPECT_EQ(format_duration(754), "12:34");
  EXPECT_EQ(format_duration(3599.4), "59:59");
  EXPECT_EQ(format_duration(3723), "1:02:03");
  EXPECT_EQ(format_duration(36000), "10:00:00");
  EXPECT_EQ(format_duration(-1), "-:--");
  EXPECT_EQ(format_duration(std::nan("")), "-:--");
}

TEST(ProgressBar, FormatsRatesWithThousandsSeparators) {
  EXPECT_EQ(format_rate(12345.4), "12,345");
  EXPECT_EQ(format_rate(1234567), "1,234,567");
  EXPECT_EQ(format_rate(999.5), "1,000");
  EXPECT_EQ(format_rate(100), "100");
  EXPECT_EQ(format_rate(85.34), "85.3");
  EXPECT_EQ(format_rate(std::nan("")), "-");
}

TEST(ProgressBar, FirstStepWithoutElapsedTimeShowsNoRate) {
  std::ostringstream out;
  ProgressBar bar(out,
                  {.steps = 10, .interactive = true, .width = 80, .clock = [] { return 5.0; }});
  bar.update(1.0, 4);
  EXPECT_EQ(shown(out.str()),
            "epoch 1/1 [==>                      ]  1/10  loss 1.0000  - samples/s  ETA -:--");
}

TEST(ProgressBar, TerminalWidthComesFromColumnsThenDefaults) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  const char* saved = std::getenv("COLUMNS");
  std::string saved_value = saved ? saved : "";
  ::setenv("COLUMNS", "123", 1);
  EXPECT_EQ(terminal_width(fileno(file)), 123);
  ::setenv("COLUMNS", "wide", 1);
  EXPECT_EQ(terminal_width(fileno(file)), 80);  // a file is no terminal
  ::unsetenv("COLUMNS");
  EXPECT_EQ(terminal_width(fileno(file)), 80);
  EXPECT_FALSE(is_terminal(fileno(file)));
  if (saved) ::setenv("COLUMNS", saved_value.c_str(), 1);
  std::fclose(file);
}

TEST(ProgressBar, RejectsBadOptionsAndMisuse) {
  std::ostringstream out;
  try {
    ProgressBar(out, {.epoch = 0, .num_epochs = 5});
    FAIL() << "expected invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "[ProgressBar] epoch must be from 1 to 5, got 0");
  }
  EXPECT_THROW(ProgressBar(out, {.steps = 0}), std::invalid_argument);
  ProgressBar bar(out, {.steps = 1, .clock = [] { return 0.0; }});
  EXPECT_THROW(bar.update(1.0, 0), std::invalid_argument);
  bar.update(1.0, 1);
  try {
    bar.update(1.0, 1);
    FAIL() << "expected invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "[ProgressBar] step 2 is past the epoch's 1 steps");
  }
  bar.finish();
  EXPECT_THROW(bar.finish(), std::logic_error);
  EXPECT_THROW(bar.update(1.0, 1), std::logic_error);
}

}  // namespace
}  // namespace spmd::cli

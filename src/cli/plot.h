// Line plots of training curves (loss per step, test loss and accuracy per epoch), as a
// standalone SVG picture and as text for the terminal (Unicode braille dots, or ASCII).
#pragma once

#include <string>
#include <vector>

namespace spmd::cli {

// One curve. Points whose x or y is NaN or infinite are skipped (the line breaks there) and the
// legend says how many were.
struct Series {
  std::string name;
  std::vector<double> x, y;  // of equal length
  bool markers = false;      // mark each point (for a few points, such as one per epoch)
};

// One set of axes: several series over a shared x and y range.
struct Panel {
  std::string title;  // "loss"
  std::string x_label;
  std::string y_label;
  std::vector<Series> series;
};

// An axis from `lo` to `hi` with ticks every `step`, rounded outwards to multiples of the step
// (1, 2 or 5 times a power of ten) so that about `ticks` ticks cover [min, max]. A zero-width
// range is widened around its value.
struct AxisRange {
  double lo, hi, step;
  std::vector<double> tick_values() const;
};
AxisRange nice_range(double min, double max, int ticks = 5);

// The axis ranges of a panel over its finite points; [0, 1] when there are none.
AxisRange x_range(const Panel& panel);
AxisRange y_range(const Panel& panel);

// A tick value printed with as many decimals as the step needs: 0.25 for step 0.05, 500 for 100.
std::string format_tick(double value, double step);

struct SvgOptions {
  int panel_width = 480;  // pixels per panel; panels stand side by side
  int panel_height = 320;
};

// The layout of one panel's plotting area in the picture, in pixels: the point (x, y) lands at
// left + (x - x.lo) / (x.hi - x.lo) * width, top + (y.hi - y) / (y.hi - y.lo) * height.
struct PlotArea {
  double left, top, width, height;
};
PlotArea plot_area(int panel_index, const SvgOptions& options = {});

// A standalone SVG document with the panels side by side under `title`.
std::string to_svg(const std::vector<Panel>& panels, const std::string& title,
                   const SvgOptions& options = {});

// Writes to_svg() to `path`; throws std::runtime_error when the file cannot be written.
void write_svg(const std::string& path, const std::vector<Panel>& panels, const std::string& title,
               const SvgOptions& options = {});

enum class Charset { automatic, unicode, ascii };

// Whether the locale's character set is UTF-8 (LC_ALL, else LC_CTYPE, else LANG).
bool locale_is_utf8();

struct TextPlotOptions {
  int width = 60;   // columns of the plotting area (without the y labels)
  int height = 12;  // rows of the plotting area
  // unicode: braille dots (2 x 4 per character) and box-drawing axes; ascii: one point per
  // character, '|' and '-' axes; automatic: unicode when locale_is_utf8().
  Charset charset = Charset::automatic;
  bool color = false;  // ANSI colours per series (for a terminal)
};

// The panel drawn in text: its title, rows with y tick labels on the left, the x axis with its
// tick labels and a legend line. Lines carry no trailing spaces.
std::string to_text(const Panel& panel, const TextPlotOptions& options = {});

}  // namespace spmd::cli

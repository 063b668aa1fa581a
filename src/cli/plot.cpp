#include "cli/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string_view>
#include <utility>

namespace spmd::cli {

namespace {

using Point = std::pair<double, double>;
using Run = std::vector<Point>;

// tab10, matplotlib's default cycle, and the nearest ANSI colours for the terminal.
constexpr const char* kSvgColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
constexpr int kAnsiColors[] = {34, 33, 32, 31, 35, 36};
constexpr char kAsciiGlyphs[] = {'*', '+', 'o', '#', 'x', '@'};
constexpr const char* kMarkerGlyphs[] = {"●", "■", "▲", "◆"};

template <class T, size_t N>
const T& cycle(const T (&table)[N], size_t i) {
  return table[i % N];
}

std::string format(const char* fmt, auto... args) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, fmt, args...);
  return buffer;
}

void check_series(const Series& s) {
  if (s.x.size() != s.y.size()) {
    throw std::invalid_argument("[plot] series '" + s.name + "' needs as many x as y values, got " +
                                std::to_string(s.x.size()) + " and " + std::to_string(s.y.size()));
  }
}

// The series' finite points, split where a non-finite one was skipped.
std::vector<Run> finite_runs(const Series& s) {
  check_series(s);
  std::vector<Run> runs(1);
  for (size_t i = 0; i < s.x.size(); ++i) {
    if (std::isfinite(s.x[i]) && std::isfinite(s.y[i])) {
      runs.back().emplace_back(s.x[i], s.y[i]);
    } else if (!runs.back().empty()) {
      runs.emplace_back();
    }
  }
  if (runs.back().empty()) runs.pop_back();
  return runs;
}

std::string legend_label(const Series& s) {
  size_t finite = 0;
  for (const Run& run : finite_runs(s)) finite += run.size();
  if (finite == 0) return s.name + " (no finite points)";
  size_t skipped = s.x.size() - finite;
  if (skipped == 0) return s.name;
  return s.name + " (" + std::to_string(skipped) + " NaN/inf point" + (skipped > 1 ? "s" : "") +
         " skipped)";
}

AxisRange data_range(const Panel& panel, bool use_x) {
  double lo = INFINITY, hi = -INFINITY;
  for (const Series& s : panel.series) {
    for (const Run& run : finite_runs(s)) {
      for (const Point& p : run) {
        double v = use_x ? p.first : p.second;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    }
  }
  return lo <= hi ? nice_range(lo, hi) : nice_range(0, 1);
}

double nice_step(double raw) {
  int exponent = static_cast<int>(std::floor(std::log10(raw)));
  // Dividing by an exact power of ten keeps 0.2 as the double nearest 0.2.
  double scale = exponent < 0 ? 1 / std::pow(10.0, -exponent) : std::pow(10.0, exponent);
  double norm = raw / scale;
  // The slack keeps 2.0000000000000004 (0.1 / 5 / 0.01) a 2.
  double slack = 1 + 1e-9;
  double nice = norm <= slack ? 1 : norm <= 2 * slack ? 2 : norm <= 5 * slack ? 5 : 10;
  return exponent < 0 ? nice / std::pow(10.0, -exponent) : nice * scale;
}

}  // namespace

std::vector<double> AxisRange::tick_values() const {
  auto n = static_cast<int>(std::llround((hi - lo) / step));
  std::vector<double> ticks;
  for (int i = 0; i <= n; ++i) ticks.push_back(lo + i * step);
  return ticks;
}

AxisRange nice_range(double min, double max, int ticks) {
  if (!(std::isfinite(min) && std::isfinite(max) && min <= max && ticks >= 1)) {
    throw std::invalid_argument("[nice_range] expected finite min <= max and ticks >= 1, got " +
                                format("%g, %g, %d", min, max, ticks));
  }
  if (min == max) {
    double pad = min == 0 ? 1 : std::abs(min) * 0.1;
    min -= pad;
    max += pad;
  }
  double step = nice_step((max - min) / ticks);
  // The small slack keeps a value that is a multiple of the step up to rounding on the tick.
  double lo = std::floor(min / step + 1e-9) * step;
  double hi = std::ceil(max / step - 1e-9) * step;
  return {lo, hi, step};
}

AxisRange x_range(const Panel& panel) {
  return data_range(panel, true);
}

AxisRange y_range(const Panel& panel) {
  return data_range(panel, false);
}

std::string format_tick(double value, double step) {
  int decimals = std::max(0, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
  if (std::abs(value) < step * 1e-6) value = 0;  // no "-0.0"
  return format("%.*f", decimals, value);
}

// ---- SVG --------------------------------------------------------------------------------------

namespace {

constexpr double kTitleHeight = 30, kMarginLeft = 64, kMarginRight = 16, kMarginTop = 28,
                 kMarginBottom = 68;

std::string escape_xml(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string num(double v) {
  return format("%.2f", v);
}

struct Mapper {
  PlotArea area;
  AxisRange x, y;
  double px(double v) const { return area.left + (v - x.lo) / (x.hi - x.lo) * area.width; }
  double py(double v) const { return area.top + (y.hi - v) / (y.hi - y.lo) * area.height; }
};

std::string svg_text(double x, double y, const std::string& text, const char* extra = "") {
  return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\"" + extra + ">" + escape_xml(text) +
         "</text>\n";
}

std::string svg_line(double x1, double y1, double x2, double y2, const char* stroke) {
  return "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" +
         num(y2) + "\" stroke=\"" + stroke + "\"/>\n";
}

std::string svg_axes(const Panel& panel, const Mapper& m) {
  const PlotArea& a = m.area;
  double bottom = a.top + a.height, center_x = a.left + a.width / 2;
  std::string out;
  for (double t : m.x.tick_values()) {
    out += svg_line(m.px(t), a.top, m.px(t), bottom, "#eeeeee");
    out += svg_line(m.px(t), bottom, m.px(t), bottom + 5, "#555555");
    out += svg_text(m.px(t), bottom + 18, format_tick(t, m.x.step), " text-anchor=\"middle\"");
  }
  for (double t : m.y.tick_values()) {
    out += svg_line(a.left, m.py(t), a.left + a.width, m.py(t), "#eeeeee");
    out += svg_line(a.left - 5, m.py(t), a.left, m.py(t), "#555555");
    out += svg_text(a.left - 8, m.py(t) + 4, format_tick(t, m.y.step), " text-anchor=\"end\"");
  }
  out += "<rect x=\"" + num(a.left) + "\" y=\"" + num(a.top) + "\" width=\"" + num(a.width) +
         "\" height=\"" + num(a.height) + "\" fill=\"none\" stroke=\"#555555\"/>\n";
  out += svg_text(center_x, a.top - 10, panel.title,
                  " text-anchor=\"middle\" font-size=\"14\" font-weight=\"bold\"");
  out += svg_text(center_x, bottom + 38, panel.x_label, " text-anchor=\"middle\"");
  double label_x = a.left - kMarginLeft + 14, center_y = a.top + a.height / 2;
  std::string rotate = " text-anchor=\"middle\" transform=\"rotate(-90 " + num(label_x) + " " +
                       num(center_y) + ")\"";
  out += svg_text(label_x, center_y, panel.y_label, rotate.c_str());
  return out;
}

std::string svg_series(const Series& s, const char* color, const Mapper& m) {
  std::string out;
  for (const Run& run : finite_runs(s)) {
    if (run.size() > 1) {
      out += "<polyline fill=\"none\" stroke=\"" + std::string(color) +
             "\" stroke-width=\"1.5\" points=\"";
      for (size_t i = 0; i < run.size(); ++i) {
        if (i > 0) out += ' ';
        out += num(m.px(run[i].first)) + "," + num(m.py(run[i].second));
      }
      out += "\"/>\n";
    }
    if (run.size() > 1 && !s.markers) continue;
    for (const Point& p : run) {
      out += "<circle cx=\"" + num(m.px(p.first)) + "\" cy=\"" + num(m.py(p.second)) +
             "\" r=\"3\" fill=\"" + color + "\"/>\n";
    }
  }
  return out;
}

// The legend in one row under the x label: it never hides a curve.
std::string svg_legend(const Panel& panel, const PlotArea& a) {
  std::string out;
  double left = a.left, y = a.top + a.height + 58;
  for (size_t i = 0; i < panel.series.size(); ++i) {
    std::string color = cycle(kSvgColors, i), label = legend_label(panel.series[i]);
    out += "<line x1=\"" + num(left) + "\" y1=\"" + num(y - 4) + "\" x2=\"" + num(left + 20) +
           "\" y2=\"" + num(y - 4) + "\" stroke=\"" + color + "\" stroke-width=\"2\"/>\n";
    out += svg_text(left + 24, y, label);
    left += 40 + 7 * static_cast<double>(label.size());
  }
  return out;
}

std::string svg_panel(const Panel& panel, const PlotArea& area) {
  Mapper m{area, x_range(panel), y_range(panel)};
  std::string out = "<g>\n" + svg_axes(panel, m);
  for (size_t i = 0; i < panel.series.size(); ++i) {
    out += svg_series(panel.series[i], cycle(kSvgColors, i), m);
  }
  return out + svg_legend(panel, area) + "</g>\n";
}

}  // namespace

PlotArea plot_area(int panel_index, const SvgOptions& options) {
  return {panel_index * options.panel_width + kMarginLeft, kTitleHeight + kMarginTop,
          options.panel_width - kMarginLeft - kMarginRight,
          options.panel_height - kMarginTop - kMarginBottom};
}

std::string to_svg(const std::vector<Panel>& panels, const std::string& title,
                   const SvgOptions& options) {
  if (options.panel_width <= kMarginLeft + kMarginRight ||
      options.panel_height <= kMarginTop + kMarginBottom) {
    throw std::invalid_argument(
        "[to_svg] panels must be larger than their margins (80 x 96), got " +
        std::to_string(options.panel_width) + " x " + std::to_string(options.panel_height));
  }
  int width = options.panel_width * static_cast<int>(std::max<size_t>(1, panels.size()));
  int height = static_cast<int>(kTitleHeight) + options.panel_height;
  std::string size = "width=\"" + std::to_string(width) + "\" height=\"" + std::to_string(height) +
                     "\" viewBox=\"0 0 " + std::to_string(width) + " " + std::to_string(height);
  std::string out =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" " +
      size +
      "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  out += svg_text(width / 2.0, 20, title, " text-anchor=\"middle\" font-size=\"16\"");
  for (size_t i = 0; i < panels.size(); ++i) {
    out += svg_panel(panels[i], plot_area(static_cast<int>(i), options));
  }
  return out + "</svg>\n";
}

void write_svg(const std::string& path, const std::vector<Panel>& panels, const std::string& title,
               const SvgOptions& options) {
  std::string svg = to_svg(panels, title, options);
  std::ofstream file(path, std::ios::binary);
  file << svg;
  file.close();
  if (!file) throw std::runtime_error("[write_svg] could not write '" + path + "'");
}

// ---- text -------------------------------------------------------------------------------------

namespace {

// One character cell: braille dots (unicode) or a glyph, and the series that drew there last.
struct Cell {
  unsigned dots = 0;
  std::string glyph;
  int series = -1;
};

std::string utf8(unsigned code) {
  std::string out;
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xC0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
  return out;
}

// Draws on a grid of dots: 2 x 4 per cell in braille, 1 per cell in ASCII.
class Canvas {
 public:
  Canvas(int width, int height, bool unicode)
      : width_(width), height_(height), unicode_(unicode), cells_(width * height) {}

  int dots_wide() const { return width_ * (unicode_ ? 2 : 1); }
  int dots_high() const { return height_ * (unicode_ ? 4 : 1); }

  void dot(int x, int y, int series) {
    Cell& cell = at(x, y);
    if (unicode_) {
      // Braille numbers its dots down the left column (1, 2, 3), down the right (4, 5, 6), then
      // the bottom row (7, 8).
      static constexpr unsigned kBits[4][2] = {
          {0x01, 0x08}, {0x02, 0x10}, {0x04, 0x20}, {0x40, 0x80}};
      cell.dots |= kBits[y % 4][x % 2];
    } else {
      cell.glyph = std::string(1, cycle(kAsciiGlyphs, series));
    }
    cell.series = series;
  }

  void mark(int x, int y, const std::string& glyph, int series) {
    Cell& cell = at(x, y);
    cell.glyph = glyph;
    cell.series = series;
  }

  // Bresenham's line: every dot between the two ends, both included.
  void line(int x0, int y0, int x1, int y1, int series) {
    int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
    int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1, err = dx + dy;
    while (true) {
      dot(x0, y0, series);
      if (x0 == x1 && y0 == y1) return;
      int e2 = 2 * err;
      if (e2 >= dy) err += dy, x0 += sx;
      if (e2 <= dx) err += dx, y0 += sy;
    }
  }

  const Cell& cell(int column, int row) const { return cells_[row * width_ + column]; }

 private:
  Cell& at(int x, int y) {
    int per_x = unicode_ ? 2 : 1, per_y = unicode_ ? 4 : 1;
    return cells_[(y / per_y) * width_ + x / per_x];
  }

  int width_, height_;
  bool unicode_;
  std::vector<Cell> cells_;
};

std::string paint(const std::string& text, int series, bool color) {
  if (!color || series < 0) return text;
  return "\x1b[" + std::to_string(cycle(kAnsiColors, series)) + "m" + text + "\x1b[0m";
}

struct TextStyle {
  bool unicode, color;
  const char* tick() const { return unicode ? "┤" : "+"; }
  const char* rule() const { return unicode ? "│" : "|"; }
  const char* corner() const { return unicode ? "└" : "+"; }
  const char* dash() const { return unicode ? "─" : "-"; }
};

void draw_series(Canvas& canvas, const Series& s, int index, int marker_index, const AxisRange& x,
                 const AxisRange& y, bool unicode) {
  auto dot_x = [&](double v) {
    return static_cast<int>(std::lround((v - x.lo) / (x.hi - x.lo) * (canvas.dots_wide() - 1)));
  };
  auto dot_y = [&](double v) {
    return static_cast<int>(std::lround((y.hi - v) / (y.hi - y.lo) * (canvas.dots_high() - 1)));
  };
  for (const Run& run : finite_runs(s)) {
    for (size_t i = 0; i < run.size(); ++i) {
      const Point& from = run[i == 0 ? 0 : i - 1];
      canvas.line(dot_x(from.first), dot_y(from.second), dot_x(run[i].first), dot_y(run[i].second),
                  index);
    }
    if (!unicode || !s.markers) continue;
    for (const Point& p : run) {
      canvas.mark(dot_x(p.first), dot_y(p.second), cycle(kMarkerGlyphs, marker_index), index);
    }
  }
}

std::string cell_text(const Cell& cell) {
  if (!cell.glyph.empty()) return cell.glyph;
  return cell.dots ? utf8(0x2800 + cell.dots) : " ";
}

std::string trim_right(std::string line) {
  line.erase(line.find_last_not_of(' ') + 1);
  return line;
}

// The plot rows, each behind its y tick label (on the row nearest the tick) and the axis.
std::vector<std::string> body_lines(const Canvas& canvas, int width, int height, const AxisRange& y,
                                    int rows_per_dot_row, size_t label_width,
                                    const TextStyle& style) {
  std::vector<std::string> labels(height);
  // The ends of the axis first, so that the top and bottom rows show the range.
  std::vector<double> ticks = y.tick_values();
  std::rotate(ticks.begin() + 1, ticks.end() - 1, ticks.end());
  for (double t : ticks) {
    auto dot_row = std::lround((y.hi - t) / (y.hi - y.lo) * (height * rows_per_dot_row - 1));
    std::string& label = labels[dot_row / rows_per_dot_row];
    if (label.empty()) label = format_tick(t, y.step);
  }
  std::vector<std::string> lines;
  for (int row = 0; row < height; ++row) {
    std::string line = std::string(label_width - labels[row].size(), ' ') + labels[row] + " " +
                       (labels[row].empty() ? style.rule() : style.tick());
    int last = width - 1;
    while (last >= 0 && cell_text(canvas.cell(last, row)) == " ") --last;
    for (int col = 0; col <= last; ++col) {
      const Cell& cell = canvas.cell(col, row);
      line += paint(cell_text(cell), cell.series, style.color);
    }
    lines.push_back(line);
  }
  return lines;
}

// The x tick labels centred under their columns, skipping any that would touch the previous one.
std::string x_tick_line(const AxisRange& x, int width, int cols_per_dot, size_t indent) {
  std::string line;
  for (double t : x.tick_values()) {
    std::string label = format_tick(t, x.step);
    auto dot = std::lround((t - x.lo) / (x.hi - x.lo) * (width * cols_per_dot - 1));
    long center = static_cast<long>(indent) + dot / cols_per_dot;
    long start = std::max(0L, center - static_cast<long>(label.size() - 1) / 2);
    long needed = line.empty() ? 0 : static_cast<long>(line.size()) + 1;
    if (start < needed) continue;
    line += std::string(start - line.size(), ' ') + label;
  }
  return line;
}

std::string legend_line(const Panel& panel, const TextStyle& style) {
  std::string line;
  int markers = 0;
  for (size_t i = 0; i < panel.series.size(); ++i) {
    const Series& s = panel.series[i];
    std::string glyph = !style.unicode ? std::string(1, cycle(kAsciiGlyphs, i))
                        : s.markers    ? cycle(kMarkerGlyphs, markers++)
                                       : "──";
    line +=
        (i ? "   " : "") + paint(glyph, static_cast<int>(i), style.color) + " " + legend_label(s);
  }
  return line;
}

}  // namespace

bool locale_is_utf8() {
  for (const char* name : {"LC_ALL", "LC_CTYPE", "LANG"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    std::string lower;
    for (const char* c = value; *c; ++c) {
      if (*c != '-') lower += static_cast<char>(std::tolower(static_cast<unsigned char>(*c)));
    }
    return lower.find("utf8") != std::string::npos;
  }
  return false;
}

std::string to_text(const Panel& panel, const TextPlotOptions& options) {
  if (options.width < 2 || options.height < 2) {
    throw std::invalid_argument("[to_text] width and height must be at least 2, got " +
                                std::to_string(options.width) + " x " +
                                std::to_string(options.height));
  }
  TextStyle style{options.charset == Charset::automatic ? locale_is_utf8()
                                                        : options.charset == Charset::unicode,
                  options.color};
  AxisRange x = x_range(panel), y = y_range(panel);
  Canvas canvas(options.width, options.height, style.unicode);
  int markers = 0;
  for (size_t i = 0; i < panel.series.size(); ++i) {
    const Series& s = panel.series[i];
    draw_series(canvas, s, static_cast<int>(i), s.markers ? markers++ : 0, x, y, style.unicode);
  }
  size_t label_width = 0;
  for (double t : y.tick_values())
    label_width = std::max(label_width, format_tick(t, y.step).size());
  std::string out = panel.title.empty() ? "" : panel.title + "\n";
  if (!panel.y_label.empty() && panel.y_label != panel.title) out += panel.y_label + "\n";
  for (const std::string& line : body_lines(canvas, options.width, options.height, y,
                                            style.unicode ? 4 : 1, label_width, style)) {
    out += line + "\n";
  }
  out += std::string(label_width + 1, ' ') + style.corner();
  for (int i = 0; i < options.width; ++i) out += style.dash();
  int cols_per_dot = style.unicode ? 2 : 1;
  std::string ticks = x_tick_line(x, options.width, cols_per_dot, label_width + 2);
  if (!panel.x_label.empty()) ticks += "  " + panel.x_label;
  out += "\n" + trim_right(ticks) + "\n";
  return out + legend_line(panel, style) + "\n";
}

}  // namespace spmd::cli

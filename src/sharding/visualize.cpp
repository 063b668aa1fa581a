// visualize_sharding: JAX's picture of which devices hold which block of an array. JAX draws a
// `rich` table; this file reproduces the parts of rich's table layout that picture uses (column
// measuring, shrinking to the console width, padding, wrapping with an ellipsis) so the text
// mode matches byte for byte.
#include <spmd/error.h>
#include <spmd/sharding.h>

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <set>

namespace spmd {
namespace {

// Python's divmod for ints: the quotient rounds toward negative infinity.
std::pair<int64_t, int64_t> py_divmod(int64_t a, int64_t b) {
  int64_t q = a / b, r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) --q, r += b;
  return {q, r};
}

struct Cell {
  std::string label;  // ASCII: "CPU 0,1"
  int64_t top = 0, right = 0, bottom = 0, left = 0;
  uint32_t background = 0, foreground = 0;  // colour mode only
};

// One line of a cell. Widths are counted in terminal cells; the only non-ASCII character a cell
// holds is the ellipsis, so lines are kept as UTF-32 until the end.
using Line = std::u32string;

std::string utf8(const std::u32string& s) {
  std::string out;
  for (char32_t c : s) {
    if (c < 0x80) {
      out += char(c);
    } else if (c < 0x800) {
      out += char(0xC0 | (c >> 6));
      out += char(0x80 | (c & 0x3F));
    } else {
      out += char(0xE0 | (c >> 12));
      out += char(0x80 | ((c >> 6) & 0x3F));
      out += char(0x80 | (c & 0x3F));
    }
  }
  return out;
}

std::u32string widen(const std::string& ascii) {
  return std::u32string(ascii.begin(), ascii.end());
}

int64_t sum(const std::vector<int64_t>& values) {
  int64_t total = 0;
  for (int64_t v : values) total += v;
  return total;
}

// rich's Measurement.get(Padding(Align(Text(label)))).maximum under `max_width`.
int64_t measure(const Cell& c, int64_t max_width) {
  if (max_width < 1) return 0;
  int64_t pad = c.left + c.right;
  if (max_width - pad < 1) return max_width;
  int64_t text = std::min<int64_t>(int64_t(c.label.size()), max_width - pad);
  return std::min(text + pad, max_width);
}

// rich's ratio_reduce: takes `total` from `values` in proportion to `ratios`, at most
// `maximums[i]` from each. Python's round() rounds halves to even, as nearbyint does.
std::vector<int64_t> ratio_reduce(int64_t total, std::vector<int64_t> ratios,
                                  const std::vector<int64_t>& maximums,
                                  const std::vector<int64_t>& values) {
  for (size_t i = 0; i < ratios.size(); ++i)
    if (!maximums[i]) ratios[i] = 0;
  int64_t total_ratio = sum(ratios);
  if (!total_ratio) return values;
  int64_t remaining = total;
  std::vector<int64_t> out;
  for (size_t i = 0; i < values.size(); ++i) {
    if (ratios[i] && total_ratio > 0) {
      auto share =
          int64_t(std::nearbyint(double(ratios[i]) * double(remaining) / double(total_ratio)));
      int64_t distributed = std::min(maximums[i], share);
      out.push_back(values[i] - distributed);
      remaining -= distributed;
      total_ratio -= ratios[i];
    } else {
      out.push_back(values[i]);
    }
  }
  return out;
}

// rich's Table._collapse_widths with every column wrappable: shave the widest columns first.
std::vector<int64_t> collapse_widths(std::vector<int64_t> widths, int64_t max_width) {
  int64_t total = sum(widths);
  int64_t excess = total - max_width;
  while (total && excess > 0) {
    int64_t widest = *std::max_element(widths.begin(), widths.end());
    int64_t second = 0;
    for (int64_t w : widths)
      if (w != widest) second = std::max(second, w);
    int64_t difference = widest - second;
    if (!difference) break;
    std::vector<int64_t> ratios;
    for (int64_t w : widths) ratios.push_back(w == widest ? 1 : 0);
    widths = ratio_reduce(
        excess, ratios, std::vector<int64_t>(widths.size(), std::min(excess, difference)), widths);
    total = sum(widths);
    excess = total - max_width;
  }
  return widths;
}

// rich's Table._calculate_column_widths for a table that does not expand.
std::vector<int64_t> column_widths(const std::vector<std::vector<Cell>>& rows, int64_t available) {
  size_t ncols = rows[0].size();
  auto measure_column = [&](size_t j, int64_t max_width) {
    int64_t m = 0;
    for (const auto& row : rows) m = std::max(m, measure(row[j], max_width));
    return m;
  };
  std::vector<int64_t> widths;
  for (size_t j = 0; j < ncols; ++j)
    widths.push_back(std::max<int64_t>(measure_column(j, available), 1));
  if (sum(widths) <= available) return widths;
  widths = collapse_widths(widths, available);
  int64_t total = sum(widths);
  if (total > available)
    widths = ratio_reduce(total - available, std::vector<int64_t>(ncols, 1), widths, widths);
  for (size_t j = 0; j < ncols; ++j) widths[j] = measure_column(j, widths[j]);
  return widths;
}

// rich's Text.wrap of the label at `width` with the "ellipsis" overflow: break between words,
// drop the trailing space that does not fit, and end a word that is still too long with "…".
std::vector<Line> wrap_label(const std::string& label, int64_t width) {
  // Words with their trailing spaces (rich's \s*\S+\s*).
  std::vector<std::pair<size_t, std::string>> words;
  for (size_t i = 0; i < label.size();) {
    size_t start = i;
    while (i < label.size() && label[i] == ' ') ++i;
    while (i < label.size() && label[i] != ' ') ++i;
    while (i < label.size() && label[i] == ' ') ++i;
    words.emplace_back(start, label.substr(start, i - start));
  }
  std::vector<size_t> breaks;
  int64_t offset = 0;
  for (const auto& [start, word] : words) {
    auto length = int64_t(word.find_last_not_of(' ') + 1);
    if (width - offset >= length) {
      offset += int64_t(word.size());
    } else if (length > width || (offset && start)) {
      if (start) breaks.push_back(start);
      offset = int64_t(word.size());
    }
  }
  breaks.push_back(label.size());
  std::vector<Line> lines;
  size_t from = 0;
  for (size_t to : breaks) {
    Line line = widen(label.substr(from, to - from));
    from = to;
    if (int64_t(line.size()) > width) {
      size_t keep = line.find_last_not_of(U' ') + 1;
      size_t strip = std::min(line.size() - keep, line.size() - size_t(width));
      line.resize(line.size() - strip);
    }
    if (int64_t(line.size()) > width) line = line.substr(0, size_t(width - 1)) + U"…";
    lines.push_back(line);
  }
  return lines;
}

// A line of a cell as rich's segments (padding, text, padding). Colour mode styles each segment
// on its own, as rich does, so keeping them apart reproduces its escape codes.
using SegmentLine = std::vector<Line>;

std::u32string spaces(int64_t n) {
  return std::u32string(size_t(std::max<int64_t>(n, 0)), U' ');
}

// The lines of one cell at column width `width`: Padding(Align.center(Text(label))).
std::vector<SegmentLine> render_cell(const Cell& c, int64_t width) {
  std::vector<SegmentLine> lines(size_t(c.top), SegmentLine{spaces(width)});
  int64_t inner = width - c.left - c.right;
  if (inner >= 1) {
    std::vector<Line> text = wrap_label(c.label, std::min(int64_t(c.label.size()), inner));
    size_t text_width = 0;
    for (const Line& l : text) text_width = std::max(text_width, l.size());
    int64_t excess = inner - int64_t(text_width);
    int64_t pad_left = excess > 0 ? excess / 2 : 0, pad_right = excess > 0 ? excess - pad_left : 0;
    for (const Line& l : text) {
      // rich pads the shorter wrapped lines inside the text's own segment.
      Line padded = l + spaces(int64_t(text_width - l.size()));
      SegmentLine line{spaces(c.left), spaces(pad_left), padded, spaces(pad_right),
                       spaces(c.right)};
      lines.push_back(line);
    }
  }
  for (int64_t i = 0; i < c.bottom; ++i) lines.push_back(SegmentLine{spaces(width)});
  return lines;
}

std::string repeat(const std::string& s, int64_t n) {
  std::string out;
  for (int64_t i = 0; i < n; ++i) out += s;
  return out;
}

std::string rule(const std::vector<int64_t>& widths, const char* left, const char* mid,
                 const char* right) {
  std::string out = left;
  for (size_t j = 0; j < widths.size(); ++j) out += (j ? mid : "") + repeat("─", widths[j]);
  return out + right + "\n";
}

std::string ansi_colour(uint32_t fg, uint32_t bg) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "\x1b[38;2;%u;%u;%u;48;2;%u;%u;%um", fg >> 16, (fg >> 8) & 255,
                fg & 255, bg >> 16, (bg >> 8) & 255, bg & 255);
  return buf;
}

std::string render_line(const SegmentLine& line, const Cell& cell, bool use_color) {
  std::string out;
  for (const Line& segment : line) {
    if (segment.empty()) continue;
    if (use_color)
      out += ansi_colour(cell.foreground, cell.background) + utf8(segment) + "\x1b[0m";
    else
      out += utf8(segment);
  }
  return out;
}

// The table as rich prints it: box-drawn with a rule between rows, or (colour mode) borderless
// with each cell on its own background.
std::string render_table(const std::vector<std::vector<Cell>>& rows, int64_t console_width,
                         bool use_color) {
  size_t ncols = rows[0].size();
  int64_t borders = use_color ? 0 : int64_t(ncols) + 1;
  std::vector<int64_t> widths = column_widths(rows, console_width - borders);
  std::string out = use_color ? "" : rule(widths, "┌", "┬", "┐");
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i && !use_color) out += rule(widths, "├", "┼", "┤");
    std::vector<std::vector<SegmentLine>> cells;
    size_t height = 1;
    for (size_t j = 0; j < ncols; ++j) {
      cells.push_back(render_cell(rows[i][j], widths[j]));
      height = std::max(height, cells.back().size());
    }
    for (size_t k = 0; k < height; ++k) {
      if (!use_color) out += "│";
      for (size_t j = 0; j < ncols; ++j) {
        SegmentLine line = k < cells[j].size() ? cells[j][k] : SegmentLine{spaces(widths[j])};
        out += render_line(line, rows[i][j], use_color) + (use_color ? "" : "│");
      }
      out += "\n";
    }
  }
  if (!use_color) out += rule(widths, "└", "┴", "┘");
  return out;
}

// matplotlib's tab20b palette, the colour map JAX uses.
constexpr uint32_t kTab20b[20] = {0x393b79, 0x5254a3, 0x6b6ecf, 0x9c9ede, 0x637939,
                                  0x8ca252, 0xb5cf6b, 0xcedb9c, 0x8c6d31, 0xbd9e39,
                                  0xe7ba52, 0xe7cb94, 0x843c39, 0xad494a, 0xd6616b,
                                  0xe7969c, 0x7b4173, 0xa55194, 0xce6dbd, 0xde9ed6};

// JAX's colour order: evenly spaced samples of the palette, visited in strides of about half
// their number so that neighbouring cells contrast.
std::vector<uint32_t> cell_colours(int64_t n) {
  std::vector<uint32_t> out;
  int64_t idx = 0;
  for (int64_t k = 0; k < n; ++k) {
    // numpy.linspace(0, 1, n)[idx]: multiples of the step, with the last value exactly 1.
    double value = n == 1 ? 0.0 : idx == n - 1 ? 1.0 : double(idx) * (1.0 / double(n - 1));
    out.push_back(kTab20b[std::min(int(value * 20), 19)]);
    idx = (idx + n / 2 + (n % 2 == 0 ? 1 : 0)) % n;
  }
  return out;
}

uint32_t text_colour(uint32_t bg) {
  double luminance = (bg >> 16) * 0.299 + ((bg >> 8) & 255) * 0.587 + (bg & 255) * 0.114;
  return luminance > 186 ? 0x000000 : 0xffffff;
}

// Widths below one column draw nothing, and a base height of 10·scale lines must be a number
// of lines (JAX raises converting a NaN or an unbounded scale to an integer).
void check_options(const VisualizeOptions& options) {
  if (options.max_width < 1)
    throw ValueError("[visualize_sharding] expected max_width of at least 1, got " +
                     std::to_string(options.max_width));
  if (!(std::abs(options.scale) <= 1e17)) {
    char got[32];
    std::snprintf(got, sizeof got, "%g", options.scale);
    throw ValueError("[visualize_sharding] expected a finite scale of at most 1e17, got " +
                     std::string(got));
  }
}

// The two dims drawn: (0) or (0, 1), or the caller's choice for higher ranks.
std::vector<int> drawn_dims(const Shape& shape, const VisualizeOptions& options) {
  if (options.dims) {
    int ndim = shape.ndim();
    int a = normalize_axis(options.dims->first, ndim, "visualize_sharding");
    int b = normalize_axis(options.dims->second, ndim, "visualize_sharding");
    if (a == b)
      throw ShardingError("[visualize_sharding] dims must name two different dims, got (" +
                          std::to_string(a) + ", " + std::to_string(b) + ")");
    return {a, b};
  }
  if (shape.ndim() == 1) return {0};
  if (shape.ndim() == 2) return {0, 1};
  throw ShardingError(
      "[visualize_sharding] `visualize_sharding` only works for shapes with 1 and 2 dimensions. "
      "Got shape " +
      shape.str() + "; pass VisualizeOptions::dims to draw two of its dims.");
}

// The blocks drawn, keyed by (row, column) block index (1-D arrays are one row): who holds each
// and what fraction of the drawn dims it covers.
struct Blocks {
  std::map<std::pair<int64_t, int64_t>, std::set<int>> holders;
  std::map<std::pair<int64_t, int64_t>, std::pair<double, double>> fractions;  // height, width
  int64_t rows = 0, cols = 0;
};

Blocks collect_blocks(const Shape& shape, const Sharding& sharding, const std::vector<int>& dims) {
  Blocks blocks;
  for (const ShardSlot& slot : sharding.layout(shape)) {
    int64_t chunk[2] = {0, 0};
    double fraction[2] = {1.0, 1.0};
    for (size_t k = 0; k < dims.size(); ++k) {
      const Slice& s = slot.index[size_t(dims[k])];
      int64_t size = s.stop - s.start;
      size_t at = dims.size() == 1 ? 1 : k;
      chunk[at] = size > 0 ? s.start / size : 0;
      fraction[at] = double(size) / double(shape[dims[k]]);
    }
    blocks.holders[{chunk[0], chunk[1]}].insert(slot.device.id);
    blocks.fractions[{chunk[0], chunk[1]}] = {fraction[0], fraction[1]};
    blocks.rows = std::max(blocks.rows, chunk[0] + 1);
    blocks.cols = std::max(blocks.cols, chunk[1] + 1);
  }
  return blocks;
}

// JAX sizes a cell from its share of a base box (10·scale lines high, as wide as the array's
// aspect ratio says, characters counted 2.5 per line) and centres the label with padding.
Cell make_cell(std::string label, int64_t width, int64_t height, bool use_color) {
  Cell c;
  c.label = std::move(label);
  auto [left, lrem] = py_divmod(width - int64_t(c.label.size()) - 2, 2);
  auto [top, trem] = py_divmod(height - 2, 2);
  int64_t right = left + lrem, bottom = top + trem;
  // Without borders, colour mode pads one more on every side.
  if (use_color) ++left, ++right, ++top, ++bottom;
  c.top = std::max<int64_t>(top, 0);
  c.right = std::max<int64_t>(right, 0);
  c.bottom = std::max<int64_t>(bottom, 0);
  c.left = std::max<int64_t>(left, 0);
  return c;
}

}  // namespace

std::string sharding_to_string(const Shape& shape, const Sharding& sharding,
                               const VisualizeOptions& options) {
  check_options(options);
  const std::vector<int> dims = drawn_dims(shape, options);
  for (int d : dims)
    if (shape[d] == 0)
      throw ShardingError("[visualize_sharding] cannot draw dim " + std::to_string(d) +
                          " of shape " + shape.str() + ": it has size 0");
  const bool use_color = options.use_color.value_or(false);
  std::string kind = sharding.device_set().front().platform;
  for (char& ch : kind) ch = char(std::toupper(static_cast<unsigned char>(ch)));

  Blocks blocks = collect_blocks(shape, sharding, dims);
  const bool two_d = dims.size() == 2;
  const auto base_height = int64_t(10 * options.scale);
  const double aspect = double(two_d ? shape[dims[1]] : 1) / double(shape[dims[0]]);
  const auto base_width = int64_t(double(base_height) * aspect);
  std::vector<uint32_t> colours = cell_colours(blocks.rows * blocks.cols);
  std::vector<std::vector<Cell>> rows(static_cast<size_t>(blocks.rows));
  for (int64_t i = 0; i < blocks.rows; ++i) {
    for (int64_t j = 0; j < blocks.cols; ++j) {
      std::string label = kind + " ";
      for (int id : blocks.holders[{i, j}]) label += std::to_string(id) + ",";
      label.pop_back();
      auto [frac_h, frac_w] = blocks.fractions[{i, j}];
      auto width = int64_t(frac_w * double(base_width) * 2.5);
      width = std::min<int64_t>(std::max<int64_t>(width, options.min_width), options.max_width);
      int64_t height = two_d ? int64_t(frac_h * double(base_height)) : 1;
      Cell c = make_cell(label, width, height, use_color);
      c.background = colours[size_t(i * blocks.cols + j)];
      c.foreground = text_colour(c.background);
      rows[size_t(i)].push_back(c);
    }
  }
  return render_table(rows, options.max_width, use_color);
}

void visualize_sharding(const Shape& shape, const Sharding& sharding,
                        const VisualizeOptions& options) {
  VisualizeOptions resolved = options;
  // Colour on a terminal unless NO_COLOR is set (no-color.org), as rich decides for JAX.
  if (!resolved.use_color) {
    const char* no_color = std::getenv("NO_COLOR");
    resolved.use_color = isatty(STDOUT_FILENO) == 1 && !(no_color && *no_color);
  }
  std::cout << sharding_to_string(shape, sharding, resolved) << std::flush;
}

}  // namespace spmd

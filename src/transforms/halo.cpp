#include "transforms/halo.h"

#include <spmd/lax.h>
#include <spmd/ops.h>
#include <spmd/parallel.h>

#include <algorithm>
#include <array>
#include <functional>
#include <iterator>
#include <map>
#include <numeric>
#include <utility>

namespace spmd::halo {
namespace {

AxisNames names_of(const AxisList& axes) {
  return axes.size() == 1 ? AxisNames(axes[0]) : AxisNames(axes, true);
}

int64_t devices_of(const AxisList& axes) {
  return axes.empty() ? 1 : axis_size(names_of(axes));
}

int64_t floor_div(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

int64_t ceil_div(int64_t a, int64_t b) {
  return -floor_div(-a, b);
}

// The position element j of the result reads.
int64_t at(const DimPlan& p, int64_t j) {
  return p.scale * j + p.offset;
}

// The result rows that device i reads: [0, n) when its block holds n real rows (fewer than
// out_block, or none, at the end of an uneven split; whatever the others compute is padding).
int64_t real_rows(const DimPlan& p, int64_t i) {
  return std::clamp(p.result_extent - i * p.out_block, int64_t(0), p.out_block);
}

// The operand rows that device i's real result rows read, as [begin, end); empty when they
// read none (all outside the operand, or between its spread rows).
std::pair<int64_t, int64_t> rows_read(const DimPlan& p, int64_t i) {
  const int64_t rows = real_rows(p, i);
  if (rows == 0) return {0, 0};
  const int64_t a0 = at(p, i * p.out_block), a1 = at(p, i * p.out_block + rows - 1);
  const int64_t lo = std::max(a0, p.real_begin * p.spread);
  const int64_t hi = std::min(a1, (p.extent - 1) * p.spread);
  if (lo > hi) return {0, 0};
  if (p.scale == 1) return {ceil_div(lo, p.spread), floor_div(hi, p.spread) + 1};
  // A stride (spread is 1): the first and last positions on it inside the operand.
  return {a0 + ceil_div(lo - a0, p.scale) * p.scale,
          a0 + floor_div(hi - a0, p.scale) * p.scale + 1};
}

// The rows of its block that the device `distance` blocks after each device sends it, as
// [begin, end) of the sender's block: the union over receivers of the operand rows they read
// there. Empty (begin >= end) when no receiver reads a real row there.
std::pair<int64_t, int64_t> rows_sent(const DimPlan& p, int64_t distance) {
  int64_t begin = p.in_block, end = 0;
  for (int64_t i = 0; i < p.devices; ++i) {
    const int64_t src = i + distance;
    if (src < 0 || src >= p.devices) continue;
    const auto [read_begin, read_end] = rows_read(p, i);
    const int64_t lo = std::max(read_begin, src * p.in_block);
    const int64_t hi = std::min(read_end, (src + 1) * p.in_block);
    if (lo >= hi) continue;
    begin = std::min(begin, lo - src * p.in_block);
    end = std::max(end, hi - src * p.in_block);
  }
  return {begin, end};
}

// Where device i's window of operand rows starts, and the window's length: from the row at or
// before its first result row's position, enough rows to spread into its whole result block.
void place_windows(DimPlan& p) {
  for (int64_t i = 0; i < p.devices; ++i) {
    p.first.push_back(floor_div(at(p, i * p.out_block), p.spread));
    const int64_t phase = at(p, i * p.out_block) - p.first.back() * p.spread;
    p.window = std::max(p.window, ceil_div(phase + p.scale * (p.out_block - 1) + 1, p.spread));
  }
  // The buffer covers the windows of the devices that read real rows (the others' clamped
  // slices read nothing that counts), the device's own block, and one window at least.
  for (int64_t i = 0; i < p.devices; ++i) {
    const auto [begin, end] = rows_read(p, i);
    if (begin >= end) continue;
    p.left = std::min(p.left, p.first[size_t(i)] - i * p.in_block);
    p.right = std::max(p.right, p.first[size_t(i)] + p.window - i * p.in_block);
  }
  p.right = std::max(p.right, p.left + p.window);
}

std::optional<DimPlan> plan_dim(const ShardingRule::Shift& shift, const Shape& operand,
                                const Shape& result, const AxisList& axes) {
  const int64_t n = operand[shift.dim], m = result[shift.dim], k = devices_of(axes);
  if (n == 0 || m == 0 || (shift.spread > 1 && shift.scale != 1)) return std::nullopt;
  const int64_t b = ceil_div(n, k);
  DimPlan p{shift.dim,   shift.operand, axes,         k, n, m, b, ceil_div(m, k), false, 0,
            shift.scale, shift.offset,  shift.spread, 0, 0, b, {}};
  if (p.scale < 0) {
    // Reading backwards is reading the reversed operand forwards. Reversing a split dim trades
    // whole padded blocks, so the padding of an uneven split comes first.
    if (p.spread != 1) return std::nullopt;
    p.mirrored = true;
    p.extent = b * k;
    p.real_begin = b * k - n;
    p.scale = -p.scale;
    p.offset = b * k - 1 - p.offset;
  }
  place_windows(p);
  return p;
}

// The rows a device sends for the plan, against the (k - 1) blocks of an all_gather.
int64_t rows_moved(const DimPlan& p) {
  int64_t rows = p.mirrored && p.devices > 1 ? p.in_block : 0;
  for (int64_t s = floor_div(p.left, p.in_block); s * p.in_block < p.right; ++s) {
    const auto [begin, end] = rows_sent(p, s);
    if (s != 0 && begin < end) rows += end - begin;
  }
  return rows;
}

Array block_index(const DimPlan& p) {
  return p.axes.empty() ? Array(0) : axis_index(names_of(p.axes));
}

std::string ppermute_along(const DimPlan& p) {
  return "ppermute over " + names_of(p.axes).repr() + " along dim " + std::to_string(p.dim);
}

// The operand reversed along the dim: block i is block k - 1 - i reversed.
Array mirrored(const DimPlan& p, Array x, const CollectiveLog& log) {
  if (p.devices > 1) {
    std::vector<std::pair<int, int>> pairs;
    for (int64_t i = 0; i < p.devices; ++i) pairs.emplace_back(int(p.devices - 1 - i), int(i));
    log(ppermute_along(p) + ": each block to its mirror image, reversed", aval_of(x).nbytes());
    x = ppermute(x, names_of(p.axes), std::move(pairs));
  }
  return lax::rev(x, {p.dim});
}

// The rows [lo, hi) of the buffer (relative to the device's block) that the block `distance`
// blocks after it holds: received from there, zeros where no device reads a real row.
Array segment(const DimPlan& p, const Array& x, int64_t distance, int64_t lo, int64_t hi,
              const CollectiveLog& log) {
  const int64_t base = distance * p.in_block;
  const auto [begin, end] = rows_sent(p, distance);
  Shape shape = x.shape();
  if (begin >= end) {
    shape[p.dim] = hi - lo;
    return zeros(shape, x.dtype());
  }
  std::vector<std::pair<int, int>> pairs;
  for (int64_t i = 0; i < p.devices; ++i)
    if (i + distance >= 0 && i + distance < p.devices)
      pairs.emplace_back(int(i + distance), int(i));
  const Array rows = lax::slice_in_dim(x, begin, end, 1, p.dim);
  log(ppermute_along(p) + ": rows [" + std::to_string(begin) + ", " + std::to_string(end) +
          ") of the block " + std::to_string(std::abs(distance)) +
          (distance < 0 ? " before" : " after"),
      aval_of(rows).nbytes());
  const Array received = ppermute(rows, names_of(p.axes), std::move(pairs));
  std::vector<lax::PadConfig> config(size_t(x.ndim()));
  config[size_t(p.dim)] = {base + begin - lo, hi - (base + end), 0};
  return lax::pad(received, zeros(Shape{}, x.dtype()), config);
}

// A dim that is not split moves nothing: the static slice or pad of the equation itself.
std::optional<Array> unsplit_dim(const DimPlan& p, const Array& x, const Array& fill) {
  const Array y = p.mirrored ? lax::rev(x, {p.dim}) : x;
  const int64_t last = at(p, p.result_extent - 1);
  if (!fill.valid()) {
    if (p.spread != 1 || p.offset < 0 || last >= p.extent) return std::nullopt;
    return lax::slice_in_dim(y, p.offset, last + 1, p.scale, p.dim);
  }
  if (p.scale != 1) return std::nullopt;
  std::vector<lax::PadConfig> config(size_t(x.ndim()));
  config[size_t(p.dim)] = {-p.offset, last - (p.extent - 1) * p.spread, p.spread - 1};
  return lax::pad(y, fill, config);
}

// values[i] for device i: arithmetic on the axis index when the values are affine in it, else
// read from a table.
Array per_device(const std::vector<int64_t>& values, const Array& index) {
  const int64_t step = values.size() > 1 ? values[1] - values[0] : 0;
  bool affine = true;
  for (size_t i = 1; i < values.size(); ++i) affine = affine && values[i] - values[i - 1] == step;
  if (affine) return index * Array(int(step)) + Array(int(values[0]));
  const std::vector<int32_t> table(values.begin(), values.end());
  return lax::dynamic_index_in_dim(spmd::array(table), index, 0, false);
}

// Whether the elements of a result block (shape `shape`, block `index`) read a real operand row.
Array reads_operand(const DimPlan& p, const Shape& shape, const Array& index) {
  const Array pos = lax::broadcasted_iota(int32, shape, p.dim) * Array(int(p.scale)) +
                    index * Array(int(p.scale * p.out_block)) + Array(int(p.offset));
  Array inside = lax::bitwise_and(lax::ge(pos, Array(int(p.real_begin * p.spread))),
                                  lax::lt(pos, Array(int((p.extent - 1) * p.spread + 1))));
  if (p.spread > 1)
    inside = lax::bitwise_and(inside, lax::eq(lax::rem(pos, Array(int(p.spread))), Array(0)));
  return inside;
}

// The result block along one dim: the operand rows the device reads, from its block and its
// neighbours', sliced at its offset, spread, strided, and the fill where it reads no operand row.
Array run_dim(const DimPlan& p, Array x, const Array& fill, const CollectiveLog& log) {
  if (p.devices == 1)
    if (std::optional<Array> y = unsplit_dim(p, x, fill)) return *y;
  if (p.mirrored) x = mirrored(p, std::move(x), log);
  std::vector<Array> pieces;
  for (int64_t s = floor_div(p.left, p.in_block); s * p.in_block < p.right; ++s) {
    const int64_t lo = std::max(p.left, s * p.in_block);
    const int64_t hi = std::min(p.right, (s + 1) * p.in_block);
    pieces.push_back(s == 0 ? x : segment(p, x, s, lo, hi, log));
  }
  const Array buffer = pieces.size() == 1 ? x : lax::concatenate(pieces, p.dim);
  const Array index = block_index(p);
  std::vector<int64_t> starts, phases;
  for (int64_t i = 0; i < p.devices; ++i) {
    starts.push_back(p.first[size_t(i)] - i * p.in_block - p.left);
    phases.push_back(at(p, i * p.out_block) - p.first[size_t(i)] * p.spread);
  }
  Array y = lax::dynamic_slice_in_dim(buffer, per_device(starts, index), p.window, p.dim);
  const int64_t length = p.scale * (p.out_block - 1) + 1;
  if (p.spread > 1) {
    std::vector<lax::PadConfig> config(size_t(y.ndim()));
    config[size_t(p.dim)] = {0, p.spread - 1, p.spread - 1};
    y = lax::pad(y, zeros(Shape{}, y.dtype()), config);
    y = lax::dynamic_slice_in_dim(y, per_device(phases, index), length, p.dim);
  }
  if (p.scale > 1) y = lax::slice_in_dim(y, 0, length, p.scale, p.dim);
  if (!fill.valid()) return y;
  return spmd::where(reads_operand(p, y.shape(), index), y, fill);
}

// Rows a plan moves and rows gathering its operand's dim would, summed per dim.
bool cheaper_than_gathers(std::span<const DimPlan> plans) {
  std::map<int, std::pair<int64_t, int64_t>> rows;
  for (const DimPlan& p : plans) {
    rows[p.dim].first += rows_moved(p);
    rows[p.dim].second += (p.devices - 1) * p.in_block;
  }
  return std::all_of(rows.begin(), rows.end(),
                     [](const auto& r) { return r.second.first <= r.second.second; });
}

// A relayout's devices: the axes of both sides' layouts (the source's first), and for each
// device (its linear index over `axes`) its source and target block along each moved dim.
struct Devices {
  AxisList axes;
  int64_t count = 1;
  std::vector<std::vector<int64_t>> source, target;
};

Devices relayout_devices(std::span<const Layout> from, std::span<const Layout> to) {
  Devices d;
  for (std::span<const Layout> side : {from, to})
    for (const Layout& l : side)
      for (const std::string& a : l.axes)
        if (std::find(d.axes.begin(), d.axes.end(), a) == d.axes.end()) d.axes.push_back(a);
  for (const std::string& a : d.axes) d.count *= axis_size(AxisNames(a));
  for (int64_t u = 0; u < d.count; ++u) {
    std::map<std::string, int64_t> coords;
    for (int64_t rest = u, i = int64_t(d.axes.size()) - 1; i >= 0; --i) {
      const int64_t size = axis_size(AxisNames(d.axes[size_t(i)]));
      coords[d.axes[size_t(i)]] = rest % size;
      rest /= size;
    }
    auto blocks = [&](std::span<const Layout> side) {
      std::vector<int64_t> out;
      for (const Layout& l : side) {
        int64_t index = 0;
        for (const std::string& a : l.axes) index = index * axis_size(AxisNames(a)) + coords[a];
        out.push_back(l.index_of(index));
      }
      return out;
    };
    d.source.push_back(blocks(from));
    d.target.push_back(blocks(to));
  }
  return d;
}

// A box of rows [begin, begin + rows) along each moved dim of the source block of device
// `sender`, landing at row `at` of each dim of the target block of device `receiver`.
struct Move {
  int64_t sender, receiver;
  std::vector<int64_t> begin, rows, at;

  int64_t volume() const {
    return std::accumulate(rows.begin(), rows.end(), int64_t(1), std::multiplies<>());
  }
};

// The rows of target block `block` of a dim (`extent` rows, blocks of `out_block`) in each
// source block (of `in_block` rows) that holds some: (source block, first row, end row).
std::vector<std::array<int64_t, 3>> pieces_of(int64_t block, int64_t extent, int64_t in_block,
                                              int64_t out_block) {
  std::vector<std::array<int64_t, 3>> pieces;
  const int64_t begin = block * out_block, end = std::min(begin + out_block, extent);
  for (int64_t s = begin / in_block; s * in_block < end; ++s)
    pieces.push_back({s, std::max(begin, s * in_block), std::min(end, (s + 1) * in_block)});
  return pieces;
}

// The moves that fill every target block with its real rows: a box per source block it
// overlaps, from the device itself when it holds that block, else from the device holding it
// that sends the fewest moves so far, to spread them.
std::vector<Move> moves_of(const Devices& d, std::span<const Layout> from,
                           std::span<const Layout> to, std::span<const int64_t> extents) {
  std::map<std::vector<int64_t>, std::vector<int64_t>> holders;
  for (int64_t u = 0; u < d.count; ++u) holders[d.source[size_t(u)]].push_back(u);
  std::vector<int64_t> sends(size_t(d.count), 0);
  std::vector<Move> moves;
  const size_t rank = from.size();
  for (int64_t t = 0; t < d.count; ++t) {
    std::vector<std::vector<std::array<int64_t, 3>>> pieces;
    for (size_t i = 0; i < rank; ++i)
      pieces.push_back(
          pieces_of(d.target[size_t(t)][i], extents[i], from[i].block, to[i].block));
    // Every combination of one piece per dim is one box.
    std::vector<size_t> pick(rank, 0);
    const bool empty = std::any_of(pieces.begin(), pieces.end(),
                                   [](const auto& p) { return p.empty(); });
    for (bool more = !empty; more;) {
      Move m{t, t, {}, {}, {}};
      std::vector<int64_t> key;
      for (size_t i = 0; i < rank; ++i) {
        const auto [s, lo, hi] = pieces[i][pick[i]];
        key.push_back(s);
        m.begin.push_back(lo - s * from[i].block);
        m.rows.push_back(hi - lo);
        m.at.push_back(lo - d.target[size_t(t)][i] * to[i].block);
      }
      if (key != d.source[size_t(t)]) {
        const std::vector<int64_t>& held = holders.at(key);
        m.sender = held[size_t(t) % held.size()];
        for (int64_t u : held)
          if (sends[size_t(u)] < sends[size_t(m.sender)]) m.sender = u;
        ++sends[size_t(m.sender)];
      }
      moves.push_back(std::move(m));
      more = false;
      for (size_t i = rank; i-- > 0 && !more;) {
        more = ++pick[i] < pieces[i].size();
        if (!more) pick[i] = 0;
      }
    }
  }
  return moves;
}

// The box a round sends: along each dim, the most rows any of its moves sends.
std::vector<int64_t> bounds(const std::vector<Move>& round) {
  std::vector<int64_t> rows(round.empty() ? 0 : round.front().rows.size(), 0);
  for (const Move& m : round)
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = std::max(rows[i], m.rows[i]);
  return rows;
}

int64_t volume(const std::vector<Move>& round) {
  const std::vector<int64_t> rows = bounds(round);
  return std::accumulate(rows.begin(), rows.end(), int64_t(1), std::multiplies<>());
}

// The moves between devices grouped into rounds in which each device sends at most once and
// receives at most once, so each round is one ppermute. The moves go largest first, each into
// the first round both its devices are free in, so that a round sends boxes of similar sizes.
std::vector<std::vector<Move>> rounds_of(std::vector<Move> moves) {
  std::stable_sort(moves.begin(), moves.end(),
                   [](const Move& a, const Move& b) { return a.volume() > b.volume(); });
  std::vector<std::vector<Move>> rounds;
  for (const Move& m : moves) {
    if (m.sender == m.receiver) continue;
    auto fits = [&](const std::vector<Move>& round) {
      return std::none_of(round.begin(), round.end(), [&](const Move& o) {
        return o.sender == m.sender || o.receiver == m.receiver;
      });
    };
    auto round = std::find_if(rounds.begin(), rounds.end(), fits);
    if (round == rounds.end()) round = rounds.insert(rounds.end(), std::vector<Move>{});
    round->push_back(m);
  }
  return rounds;
}

// The moves between devices colored into as few rounds as any device has moves to send or to
// receive (König's edge colouring of the bipartite graph of senders and receivers), largest
// first: each move takes a round its sender has free; when its receiver already receives in
// that round, the two rounds trade places along the path of moves alternating between them
// from the receiver on, which frees it.
std::vector<std::vector<Move>> colored_rounds(std::vector<Move> moves) {
  std::erase_if(moves, [](const Move& m) { return m.sender == m.receiver; });
  std::stable_sort(moves.begin(), moves.end(),
                   [](const Move& a, const Move& b) { return a.volume() > b.volume(); });
  // sends[u][c], receives[v][c]: the move device u sends, v receives, in round c, or -1.
  std::map<int64_t, std::vector<int>> sends, receives;
  std::vector<int> color(moves.size(), -1);
  auto slot = [](std::vector<int>& v, int c) -> int& {
    if (v.size() <= size_t(c)) v.resize(size_t(c) + 1, -1);
    return v[size_t(c)];
  };
  auto free_round = [](const std::vector<int>& v) {
    int c = 0;
    while (size_t(c) < v.size() && v[size_t(c)] >= 0) ++c;
    return c;
  };
  auto assign = [&](int e, int c) {
    color[size_t(e)] = c;
    slot(sends[moves[size_t(e)].sender], c) = e;
    slot(receives[moves[size_t(e)].receiver], c) = e;
  };
  for (int i = 0; i < int(moves.size()); ++i) {
    const Move& m = moves[size_t(i)];
    const int a = free_round(sends[m.sender]), b = free_round(receives[m.receiver]);
    if (a != b && slot(receives[m.receiver], a) >= 0) {
      std::vector<int> path;
      int64_t node = m.receiver;
      for (bool receiver = true;; receiver = !receiver) {
        const int c = path.size() % 2 == 0 ? a : b;
        const int e = slot(receiver ? receives[node] : sends[node], c);
        if (e < 0) break;
        path.push_back(e);
        node = receiver ? moves[size_t(e)].sender : moves[size_t(e)].receiver;
      }
      for (int e : path) {
        slot(sends[moves[size_t(e)].sender], color[size_t(e)]) = -1;
        slot(receives[moves[size_t(e)].receiver], color[size_t(e)]) = -1;
      }
      for (int e : path) assign(e, color[size_t(e)] == a ? b : a);
    }
    assign(i, a);
  }
  std::vector<std::vector<Move>> rounds;
  for (size_t i = 0; i < moves.size(); ++i) {
    if (rounds.size() <= size_t(color[i])) rounds.resize(size_t(color[i]) + 1);
    rounds[size_t(color[i])].push_back(moves[i]);
  }
  return rounds;
}

int64_t total_volume(const std::vector<std::vector<Move>>& rounds) {
  int64_t n = 0;
  for (const auto& round : rounds) n += volume(round);
  return n;
}

// Per device, entry `i` of the `field` of the move it sends (`by_sender`) or receives in
// `round`; 0 if none.
std::vector<int64_t> table(const Devices& d, const std::vector<Move>& round,
                           std::vector<int64_t> Move::*field, size_t i, bool by_sender) {
  std::vector<int64_t> values(size_t(d.count), 0);
  for (const Move& m : round) values[size_t(by_sender ? m.sender : m.receiver)] = (m.*field)[i];
  return values;
}

// A relayout planned: the devices, the move a device makes to itself and the rounds between
// devices, and the bytes each device sends.
struct Relayout {
  Devices devices;
  std::vector<Move> local;
  std::vector<std::vector<Move>> rounds;
  // The bytes of one row of every moved dim (all of the other dims' block), and of all rounds.
  int64_t element_bytes = 0, bytes = 0;
};

Relayout plan_relayout(const AbstractValue& block, std::span<const int> dims,
                       std::span<const Layout> from, std::span<const Layout> to,
                       std::span<const int64_t> extents) {
  Relayout r{relayout_devices(from, to), {}, {}, 0, 0};
  std::vector<Move> moves = moves_of(r.devices, from, to, extents);
  std::copy_if(moves.begin(), moves.end(), std::back_inserter(r.local),
               [](const Move& m) { return m.sender == m.receiver; });
  // Whichever packing sends fewer bytes (then fewer rounds): the greedy one groups moves of
  // similar sizes, the colouring needs fewest rounds.
  r.rounds = rounds_of(moves);
  std::vector<std::vector<Move>> colored = colored_rounds(std::move(moves));
  const int64_t greedy = total_volume(r.rounds), fewest = total_volume(colored);
  if (fewest < greedy || (fewest == greedy && colored.size() < r.rounds.size()))
    r.rounds = std::move(colored);
  int64_t moved_rows = 1;
  for (int dim : dims) moved_rows *= block.shape[dim];
  r.element_bytes = moved_rows == 0 ? 0 : block.nbytes() / moved_rows;
  for (const auto& round : r.rounds) r.bytes += volume(round) * r.element_bytes;
  return r;
}

Array pad_dims(const Array& x, std::span<const int> dims, std::span<const int64_t> rows) {
  std::vector<lax::PadConfig> config(size_t(x.ndim()));
  for (size_t i = 0; i < dims.size(); ++i) config[size_t(dims[i])].high = rows[i];
  return lax::pad(x, zeros(Shape{}, x.dtype()), config);
}

// A target block being assembled from the moves' boxes.
struct Assembly {
  const Devices& d;
  std::span<const int> dims;
  Array source, target, index;

  // The box each device reads for `round` from its (padded) source block.
  Array chunk(const std::vector<Move>& round) const {
    std::vector<Array> starts(size_t(source.ndim()), Array(0));
    std::vector<int64_t> sizes = source.shape().dims();
    const std::vector<int64_t> rows = bounds(round);
    for (size_t i = 0; i < dims.size(); ++i) {
      starts[size_t(dims[i])] = per_device(table(d, round, &Move::begin, i, true), index);
      sizes[size_t(dims[i])] = rows[i];
    }
    return lax::dynamic_slice(source, starts, sizes);
  }

  Array send(const std::vector<Move>& round) const {
    std::vector<std::pair<int, int>> pairs;
    for (const Move& m : round) pairs.emplace_back(int(m.sender), int(m.receiver));
    return ppermute(chunk(round), names_of(d.axes), std::move(pairs));
  }

  // Writes the box each device receives in `round` (its `rows`, the chunk's first rows along
  // each dim, at the move's rows) into the target, leaving the others.
  void place(const std::vector<Move>& round, const Array& chunk) {
    std::vector<Array> starts(size_t(target.ndim()), Array(0));
    Array inside;
    for (size_t i = 0; i < dims.size(); ++i) {
      const Array at = per_device(table(d, round, &Move::at, i, false), index);
      const Array rows = per_device(table(d, round, &Move::rows, i, false), index);
      starts[size_t(dims[i])] = at;
      const Array row = lax::broadcasted_iota(int32, target.shape(), dims[i]);
      const Array here = lax::bitwise_and(lax::ge(row, at), lax::lt(row, at + rows));
      inside = inside.valid() ? lax::bitwise_and(inside, here) : here;
    }
    const Array placed =
        lax::dynamic_update_slice(zeros(target.shape(), target.dtype()), chunk, starts);
    target = spmd::where(inside, placed, target);
  }
};

std::string dims_str(std::span<const int> dims) {
  std::string s = dims.size() == 1 ? "dim " : "dims ";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s;
}

// "P('a', ('a', 'b'))": the axes of each moved dim's layout.
// The axes of a layout, a sub-axis in Shardy's form ('a':(2)2: the part of size 2 after a part
// of size 2).
std::string layout_str(const Layout& l) {
  const std::string name = names_of(l.axes).repr();
  if (l.div == 1 && l.mod == 0) return name;
  const int64_t n = axis_size(names_of(l.axes)), size = l.mod ? l.mod : n / l.div;
  return name + ":(" + std::to_string(n / (l.div * size)) + ")" + std::to_string(size);
}

// What a round moves ("6 rows", "a box of 3x2 rows") and between which blocks.
std::string round_str(const std::vector<Move>& round, std::span<const Layout> from,
                      std::span<const Layout> to) {
  const std::vector<int64_t> rows = bounds(round);
  std::string s;
  if (rows.size() == 1) {
    s = std::to_string(rows[0]) + (rows[0] == 1 ? " row" : " rows");
  } else {
    s = "a box of ";
    for (size_t i = 0; i < rows.size(); ++i) s += (i ? "x" : "") + std::to_string(rows[i]);
    s += " rows";
  }
  const bool same_axes = std::equal(from.begin(), from.end(), to.begin(), to.end(),
                                    [](const Layout& a, const Layout& b) {
                                      return a.axes == b.axes && a.div == b.div &&
                                             a.mod == b.mod;
                                    });
  if (!same_axes) {
    if (from.size() == 1)
      return s + " from the blocks split by " + layout_str(from[0]) +
             " to the blocks split by " + layout_str(to[0]);
    return s + " from the blocks split as " + layouts_str(from) + " to the blocks split as " +
           layouts_str(to);
  }
  std::string sizes_from, sizes_to;
  for (size_t i = 0; i < from.size(); ++i) {
    sizes_from += (i ? "x" : "") + std::to_string(from[i].block);
    sizes_to += (i ? "x" : "") + std::to_string(to[i].block);
  }
  return s + " from the blocks of " + sizes_from + " rows to the blocks of " + sizes_to +
         " rows";
}

}  // namespace

std::string layouts_str(std::span<const Layout> side) {
  std::string s = "P(";
  for (size_t i = 0; i < side.size(); ++i)
    s += (i ? ", " : "") + (side[i].axes.empty() ? "None" : layout_str(side[i]));
  return s + ")";
}

std::optional<std::vector<DimPlan>> plan(std::span<const ShardingRule::Shift> shifts,
                                         std::span<const Shape> operands, const Shape& result,
                                         const Split& split) {
  std::vector<DimPlan> plans;
  bool split_dim = false;
  for (const ShardingRule::Shift& shift : shifts) {
    std::optional<DimPlan> p =
        plan_dim(shift, operands[size_t(shift.operand)], result, split[size_t(shift.dim)]);
    if (!p) return std::nullopt;
    split_dim = split_dim || p->devices > 1;
    plans.push_back(std::move(*p));
  }
  if (!split_dim || !cheaper_than_gathers(plans)) return std::nullopt;
  return plans;
}

Array run(std::span<const DimPlan> plans, std::span<const Array> blocks, const Array& fill,
          const CollectiveLog& log) {
  // Operands shifted along one dim (concatenate) each give the rows they cover.
  Array result;
  for (size_t k = 0; k < blocks.size(); ++k) {
    Array block = blocks[k];
    const DimPlan* last = nullptr;
    for (const DimPlan& p : plans)
      if (p.operand == int(k)) block = run_dim(*(last = &p), std::move(block), fill, log);
    if (!last) continue;
    result = result.valid() ? spmd::where(reads_operand(*last, block.shape(), block_index(*last)),
                                          block, result)
                            : block;
  }
  return result;
}

std::optional<int64_t> relayout_bytes(const AbstractValue& block, std::span<const int> dims,
                                      std::span<const Layout> from, std::span<const Layout> to,
                                      std::span<const int64_t> extents) {
  if (dims.empty()) return 0;
  if (std::any_of(extents.begin(), extents.end(), [](int64_t n) { return n == 0; }))
    return std::nullopt;
  return plan_relayout(block, dims, from, to, extents).bytes;
}

Array relayout(const Array& x, std::span<const int> dims, std::span<const Layout> from,
               std::span<const Layout> to, std::span<const int64_t> extents,
               const CollectiveLog& log) {
  const Relayout r = plan_relayout(aval_of(x), dims, from, to, extents);
  // Each device reads a round's box from its block padded with as many zero rows as the
  // largest box has along each dim, so no read clamps, and writes it into a target with as
  // many rows of slack.
  std::vector<int64_t> slack = bounds(r.local);
  slack.resize(dims.size(), 0);
  for (const auto& round : r.rounds) {
    const std::vector<int64_t> rows = bounds(round);
    for (size_t i = 0; i < dims.size(); ++i) slack[i] = std::max(slack[i], rows[i]);
  }
  Assembly a{r.devices, dims, pad_dims(x, dims, slack), Array(), Array()};
  Shape shape = x.shape();
  for (size_t i = 0; i < dims.size(); ++i) shape[dims[i]] = to[i].block + slack[i];
  a.target = zeros(shape, x.dtype());
  a.index = r.devices.axes.empty() ? Array(0) : axis_index(names_of(r.devices.axes));
  if (!r.local.empty()) a.place(r.local, a.chunk(r.local));
  const std::string along =
      "ppermute over " + names_of(r.devices.axes).repr() + " along " + dims_str(dims) + ": round ";
  for (size_t k = 0; k < r.rounds.size(); ++k) {
    log(along + std::to_string(k + 1) + " of " + std::to_string(r.rounds.size()) + ", " +
            round_str(r.rounds[k], from, to),
        volume(r.rounds[k]) * r.element_bytes);
    a.place(r.rounds[k], a.send(r.rounds[k]));
  }
  std::vector<int64_t> starts(size_t(x.ndim()), 0), limits = shape.dims();
  for (size_t i = 0; i < dims.size(); ++i) limits[size_t(dims[i])] = to[i].block;
  return lax::slice(a.target, starts, limits);
}

}  // namespace spmd::halo

#include "transforms/halo.h"

#include <spmd/lax.h>
#include <spmd/ops.h>
#include <spmd/parallel.h>

#include <algorithm>
#include <map>
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

// A reshard's devices: the axes of both splits, the source's first, and the source and target
// block of each device (its linear index over `axes`).
struct Devices {
  AxisList axes;
  int64_t count = 1;
  std::vector<int64_t> source, target;
};

Devices reshard_devices(const AxisList& from, const AxisList& to) {
  Devices d{from, 1, {}, {}};
  for (const std::string& a : to)
    if (std::find(d.axes.begin(), d.axes.end(), a) == d.axes.end()) d.axes.push_back(a);
  for (const std::string& a : d.axes) d.count *= axis_size(AxisNames(a));
  for (int64_t u = 0; u < d.count; ++u) {
    std::map<std::string, int64_t> coords;
    for (int64_t rest = u, i = int64_t(d.axes.size()) - 1; i >= 0; --i) {
      const int64_t size = axis_size(AxisNames(d.axes[size_t(i)]));
      coords[d.axes[size_t(i)]] = rest % size;
      rest /= size;
    }
    auto block = [&](const AxisList& split) {
      int64_t index = 0;
      for (const std::string& a : split) index = index * axis_size(AxisNames(a)) + coords[a];
      return index;
    };
    d.source.push_back(block(from));
    d.target.push_back(block(to));
  }
  return d;
}

// Rows [begin, begin + rows) of the source block of device `sender` land at row `at` of the
// target block of device `receiver`.
struct Move {
  int64_t sender, receiver, begin, rows, at;
};

// The moves that fill every target block with its real rows: from the device itself when it
// holds the source block, else from the device holding it (one differing only in the source's
// axes, the leading ones: block * inner + r) that sends the fewest moves so far, to spread them.
std::vector<Move> moves_of(const Devices& d, int64_t sources, int64_t extent, int64_t in_block,
                           int64_t out_block) {
  const int64_t inner = d.count / sources;
  std::vector<int64_t> sends(size_t(d.count), 0);
  std::vector<Move> moves;
  for (int64_t t = 0; t < d.count; ++t) {
    const int64_t begin = d.target[size_t(t)] * out_block;
    const int64_t end = std::min(begin + out_block, extent);
    for (int64_t s = begin / in_block; s * in_block < end; ++s) {
      const int64_t lo = std::max(begin, s * in_block);
      const int64_t hi = std::min(end, (s + 1) * in_block);
      int64_t sender = t;
      if (d.source[size_t(t)] != s) {
        sender = s * inner + t % inner;
        for (int64_t r = 0; r < inner; ++r)
          if (sends[size_t(s * inner + r)] < sends[size_t(sender)]) sender = s * inner + r;
        ++sends[size_t(sender)];
      }
      moves.push_back({sender, t, lo - s * in_block, hi - lo, lo - begin});
    }
  }
  return moves;
}

// The moves between devices grouped into rounds in which each device sends at most once and
// receives at most once, so each round is one ppermute; the longest first, so that a round
// sends rows of similar counts.
std::vector<std::vector<Move>> rounds_of(std::vector<Move> moves) {
  std::stable_sort(moves.begin(), moves.end(),
                   [](const Move& a, const Move& b) { return a.rows > b.rows; });
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

int64_t longest(const std::vector<Move>& round) {
  int64_t rows = 0;
  for (const Move& m : round) rows = std::max(rows, m.rows);
  return rows;
}

// Per device, the `field` of the move it sends (`by_sender`) or receives in `round`; 0 if none.
std::vector<int64_t> table(const Devices& d, const std::vector<Move>& round, int64_t Move::*field,
                           bool by_sender) {
  std::vector<int64_t> values(size_t(d.count), 0);
  for (const Move& m : round) values[size_t(by_sender ? m.sender : m.receiver)] = m.*field;
  return values;
}

// Whether an axis of the reshard also splits another dim of the block: the devices a ppermute
// over them pairs would then hold different blocks of that dim.
bool crosses_other_dims(const Split& from, const AxisList& to, int dim) {
  const AxisList& axes = from[size_t(dim)];
  for (size_t e = 0; e < from.size(); ++e)
    for (const std::string& a : from[e])
      if (int(e) != dim &&
          (std::count(axes.begin(), axes.end(), a) || std::count(to.begin(), to.end(), a)))
        return true;
  return false;
}

Array pad_dim(const Array& x, int dim, int64_t rows) {
  std::vector<lax::PadConfig> config(size_t(x.ndim()));
  config[size_t(dim)].high = rows;
  return lax::pad(x, zeros(Shape{}, x.dtype()), config);
}

// A target block being assembled from the moves' rows.
struct Assembly {
  const Devices& d;
  int dim;
  Array source, target, index;

  // The rows each device reads for `round` from its (padded) source block.
  Array chunk(const std::vector<Move>& round) const {
    return lax::dynamic_slice_in_dim(source, per_device(table(d, round, &Move::begin, true), index),
                                     longest(round), dim);
  }

  Array send(const std::vector<Move>& round) const {
    std::vector<std::pair<int, int>> pairs;
    for (const Move& m : round) pairs.emplace_back(int(m.sender), int(m.receiver));
    return ppermute(chunk(round), names_of(d.axes), std::move(pairs));
  }

  // Writes the rows each device receives in `round` (`rows`, the chunk's first rows, at the
  // move's row) into the target, leaving the others.
  void place(const std::vector<Move>& round, const Array& chunk) {
    const Array at = per_device(table(d, round, &Move::at, false), index);
    const Array rows = per_device(table(d, round, &Move::rows, false), index);
    std::vector<Array> starts(size_t(target.ndim()), Array(0));
    starts[size_t(dim)] = at;
    const Array placed =
        lax::dynamic_update_slice(zeros(target.shape(), target.dtype()), chunk, starts);
    const Array row = lax::broadcasted_iota(int32, target.shape(), dim);
    target =
        spmd::where(lax::bitwise_and(lax::ge(row, at), lax::lt(row, at + rows)), placed, target);
  }
};

}  // namespace

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

std::optional<Array> reshard_dim(const Array& x, const Split& from, const AxisList& to, int dim,
                                 int64_t extent, const CollectiveLog& log) {
  const AxisList& axes = from[size_t(dim)];
  if (extent == 0 || axes.empty() || to.empty() || crosses_other_dims(from, to, dim))
    return std::nullopt;
  const int64_t sources = devices_of(axes), in_block = x.shape()[dim];
  const int64_t out_block = ceil_div(extent, devices_of(to));
  const Devices d = reshard_devices(axes, to);
  const std::vector<Move> moves = moves_of(d, sources, extent, in_block, out_block);
  const std::vector<std::vector<Move>> rounds = rounds_of(moves);
  int64_t rows = 0, slack = 0;
  for (const auto& round : rounds) {
    rows += longest(round);
    slack = std::max(slack, longest(round));
  }
  if (rows > (sources - 1) * in_block) return std::nullopt;
  std::vector<Move> local;
  std::copy_if(moves.begin(), moves.end(), std::back_inserter(local),
               [](const Move& m) { return m.sender == m.receiver; });
  // Each device reads `longest` rows a round from its block padded with that many zero rows, so
  // no read clamps, and writes them into a target with as many rows of slack.
  Assembly a{d, dim, pad_dim(x, dim, std::max(slack, longest(local))), Array(), Array()};
  Shape shape = x.shape();
  shape[dim] = out_block + std::max(slack, longest(local));
  a.target = zeros(shape, x.dtype());
  a.index = axis_index(names_of(d.axes));
  if (!local.empty()) a.place(local, a.chunk(local));
  const std::string along =
      "ppermute over " + names_of(d.axes).repr() + " along dim " + std::to_string(dim) + ": round ";
  const std::string what = " from the blocks split by " + names_of(axes).repr() +
                           " to the blocks split by " + names_of(to).repr();
  for (size_t r = 0; r < rounds.size(); ++r) {
    const int64_t n = longest(rounds[r]);
    log(along + std::to_string(r + 1) + " of " + std::to_string(rounds.size()) + ", " +
            std::to_string(n) + (n == 1 ? " row" : " rows") + what,
        n * (aval_of(x).nbytes() / in_block));
    a.place(rounds[r], a.send(rounds[r]));
  }
  return lax::slice_in_dim(a.target, 0, out_block, 1, dim);
}

}  // namespace spmd::halo

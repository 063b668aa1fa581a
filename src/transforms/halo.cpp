#include "transforms/halo.h"

#include <spmd/lax.h>
#include <spmd/ops.h>
#include <spmd/parallel.h>

#include <algorithm>
#include <utility>

namespace spmd::halo {
namespace {

AxisNames names_of(const AxisList& axes) {
  return axes.size() == 1 ? AxisNames(axes[0]) : AxisNames(axes, true);
}

int64_t devices_of(const AxisList& axes) {
  return axes.empty() ? 1 : axis_size(names_of(axes));
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

int64_t floor_div(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

// The operand rows block i's result reads: [first(p, i), first(p, i) + length(p)).
int64_t first(const DimPlan& p, int64_t i) {
  return p.scale * p.out_block * i + p.offset;
}

int64_t length(const DimPlan& p) {
  return p.scale * (p.out_block - 1) + 1;
}

// The devices whose result block holds real rows: the others' are all padding (an uneven
// split), whatever they compute.
int64_t holding_rows(const DimPlan& p) {
  return std::min(p.devices, ceil_div(p.result_extent, p.out_block));
}

// The operand rows that device i's real result rows read.
int64_t real_length(const DimPlan& p, int64_t i) {
  const int64_t rows = std::min(p.out_block, p.result_extent - i * p.out_block);
  return p.scale * (rows - 1) + 1;
}

// The rows of its block that the device `distance` blocks after each device sends it, as
// [begin, end) of the sender's block: the union over receivers of the real operand rows their
// real result rows read there. Empty (begin >= end) when no receiver reads a real row there.
std::pair<int64_t, int64_t> rows_sent(const DimPlan& p, int64_t distance) {
  int64_t begin = p.in_block, end = 0;
  for (int64_t i = 0; i < holding_rows(p); ++i) {
    const int64_t src = i + distance;
    if (src < 0 || src >= p.devices) continue;
    const int64_t lo = std::max({first(p, i), src * p.in_block, int64_t(0)});
    const int64_t hi =
        std::min({first(p, i) + real_length(p, i), (src + 1) * p.in_block, p.extent});
    if (lo >= hi) continue;
    begin = std::min(begin, lo - src * p.in_block);
    end = std::max(end, hi - src * p.in_block);
  }
  return {begin, end};
}

std::optional<DimPlan> plan_dim(const ShardingRule::Shift& shift, const Shape& operand,
                                const Shape& result, const AxisList& axes) {
  const int64_t n = operand[shift.dim], m = result[shift.dim], k = devices_of(axes);
  if (n == 0 || m == 0) return std::nullopt;
  DimPlan p{shift.dim,   axes,         k, n, m, ceil_div(n, k), ceil_div(m, k), false,
            shift.scale, shift.offset, 0, 0};
  if (p.scale < 0) {
    // Reading backwards is reading the reversed operand forwards; reversing a split dim moves
    // whole blocks, which only even blocks allow.
    if (n % k != 0) return std::nullopt;
    p.mirrored = true;
    p.scale = -p.scale;
    p.offset = n - 1 - p.offset;
  }
  // The interval's ends relative to the device's own block are affine in its index: their
  // extremes are at the first and last device holding real result rows (the slice of a device
  // whose rows are all padding may be clamped: it reads nothing that counts).
  for (int64_t i : {int64_t(0), holding_rows(p) - 1}) {
    p.left = std::min(p.left, first(p, i) - i * p.in_block);
    p.right = std::max(p.right, first(p, i) + length(p) - i * p.in_block);
  }
  p.right = std::max(p.right, p.in_block);
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
  if (!fill.valid()) return lax::slice_in_dim(y, p.offset, p.offset + length(p), p.scale, p.dim);
  if (p.scale != 1) return std::nullopt;
  std::vector<lax::PadConfig> config(size_t(x.ndim()));
  config[size_t(p.dim)] = {-p.offset, p.result_extent - p.extent + p.offset, 0};
  return lax::pad(y, fill, config);
}

// The result block along one dim: the operand rows the device reads, from its block and its
// neighbours', sliced at its offset, strided, and the fill where it reads outside the operand.
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
  const Array start =
      index * Array(int(p.scale * p.out_block - p.in_block)) + Array(int(p.offset - p.left));
  Array y = lax::dynamic_slice_in_dim(buffer, start, length(p), p.dim);
  if (p.scale > 1) y = lax::slice_in_dim(y, 0, length(p), p.scale, p.dim);
  if (!fill.valid()) return y;
  const Array at = lax::broadcasted_iota(int32, y.shape(), p.dim) * Array(int(p.scale)) +
                   index * Array(int(p.scale * p.out_block)) + Array(int(p.offset));
  const Array inside = lax::bitwise_and(lax::ge(at, Array(0)), lax::lt(at, Array(int(p.extent))));
  return spmd::where(inside, y, fill);
}

}  // namespace

std::optional<std::vector<DimPlan>> plan(std::span<const ShardingRule::Shift> shifts,
                                         const Shape& operand, const Shape& result,
                                         const Split& split) {
  std::vector<DimPlan> plans;
  bool split_dim = false;
  for (const ShardingRule::Shift& shift : shifts) {
    std::optional<DimPlan> p = plan_dim(shift, operand, result, split[size_t(shift.dim)]);
    if (!p || rows_moved(*p) > (p->devices - 1) * p->in_block) return std::nullopt;
    split_dim = split_dim || p->devices > 1;
    plans.push_back(std::move(*p));
  }
  if (!split_dim) return std::nullopt;
  return plans;
}

Array run(std::span<const DimPlan> plans, Array block, const Array& fill,
          const CollectiveLog& log) {
  for (const DimPlan& p : plans) block = run_dim(p, std::move(block), fill, log);
  return block;
}

}  // namespace spmd::halo

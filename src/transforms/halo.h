// Halo exchanges: the partitioner's form of an equation that moves data along a split dim at an
// affine index (ShardingRule::shifts: slice, pad, rev, concatenate, and the windows written
// with them). As XLA's SPMD partitioner does, the dim stays split: each device's result block
// needs an interval of the operand, so every device gets the edge rows it lacks from its
// neighbours at a static set of distances (ppermute), concatenates them with its own block and
// slices its result block at an offset computed from its axis index (through a table when the
// offsets are not affine in it, as when interior padding spreads the rows). This moves the rows
// the blocks need, not the whole dim an all_gather would.
#pragma once

#include <spmd/array.h>

#include "ir/sharding_rule.h"

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace spmd::halo {

using AxisList = std::vector<std::string>;
using Split = std::vector<AxisList>;

// Called for each ppermute the exchange inserts: what it is and the bytes each device sends.
using CollectiveLog = std::function<void(std::string collective, int64_t bytes_sent)>;

// How one shifted dim of one operand is computed on blocks. Along the dim (`extent` rows in the
// operand, `result_extent` in the result), block i of the operand covers rows [i * in_block,
// (i + 1) * in_block) and block i of the result [i * out_block, (i + 1) * out_block) (ceil-sized
// blocks, padded at the end when the split is uneven). Element j of the result reads position
// scale * j + offset, which is operand row (scale * j + offset) / spread when spread divides it,
// after reversing the operand when `mirrored`: the mirror images trade whole padded blocks, so
// the reversed operand holds real rows [real_begin, extent). Device i builds the operand rows
// [i * in_block + left, i * in_block + right) from its block and its neighbours' edges and reads
// its `window` rows from row first[i] on.
struct DimPlan {
  int dim, operand;
  AxisList axes;
  int64_t devices, extent, result_extent, in_block, out_block;
  bool mirrored;
  int64_t real_begin, scale, offset, spread, window, left, right;
  std::vector<int64_t> first;
};

// The plans of every shifted dim for operands of shapes `operands` and a result of shape
// `result`, all split as `split`; nothing when a halo would move more rows along a dim than
// gathering it, when reading the reversed dim spreads or the spread one strides, or when no
// shifted dim is split (the equation then runs as it is).
std::optional<std::vector<DimPlan>> plan(std::span<const ShardingRule::Shift> shifts,
                                         std::span<const Shape> operands, const Shape& result,
                                         const Split& split);

// The result block of the equation from this device's operand blocks (`blocks[k]` for operand
// k, split as the plans say), with `fill` (a scalar, or a null Array) where the result reads
// outside the operands or between the rows interior padding spreads apart.
Array run(std::span<const DimPlan> plans, std::span<const Array> blocks, const Array& fill,
          const CollectiveLog& log);

// How a block is laid out along one dim: split by `axes` into blocks of `block` rows, so that
// the device with index i along them holds rows [i * block, (i + 1) * block) of the dim, those
// past its extent padding. A split's blocks have the ceil size; a reshape's padded blocks of a
// compound dim hold whole rows of its major factor (halo::relayout moves between the two).
// With `div` or `mod`, a part of the axes splits the dim, a sub-axis: the block index is
// (i / div) % mod (no wrap when mod is 0), so that a 4-way axis 'a' may split a [2] major
// factor by its major half (div 2, Shardy's 'a':(1)2) and the minor factor by its minor half
// (mod 2, 'a':(2)2).
struct Layout {
  AxisList axes;
  int64_t block;
  int64_t div = 1, mod = 0;

  // The index of the block the device with index i along `axes` holds.
  int64_t index_of(int64_t i) const {
    i /= div;
    return mod ? i % mod : i;
  }
  bool operator==(const Layout&) const = default;
};

// The layouts of a block's dims as a spec, sub-axes in Shardy's form: "P('b':(1)2, 'b':(2)2, 'a')".
std::string layouts_str(std::span<const Layout> side);

// This device's block, laid out as `from` along `dims` (of `extents` rows), moved to the blocks
// laid out as `to` without gathering them (padded blocks of two layouts do not nest): each
// target block is a box of rows, copied from the source blocks that overlap it, the moves
// grouped by (source, target) device into ppermute rounds over the axes of both layouts, each
// round a permutation; rows no block holds stay zero. The axes of both layouts must split no
// other dim of the block. `log` names each round with its rows and bytes.
Array relayout(const Array& x, std::span<const int> dims, std::span<const Layout> from,
               std::span<const Layout> to, std::span<const int64_t> extents,
               const CollectiveLog& log);

// The bytes each device sends in relayout() of a block of type `block`; nothing when a dim is
// empty.
std::optional<int64_t> relayout_bytes(const AbstractValue& block, std::span<const int> dims,
                                      std::span<const Layout> from, std::span<const Layout> to,
                                      std::span<const int64_t> extents);

}  // namespace spmd::halo

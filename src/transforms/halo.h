// Halo exchanges: the partitioner's form of an equation that moves data along a split dim at an
// affine index (ShardingRule::shifts: slice, pad, rev, and the windows written with them). As
// XLA's SPMD partitioner does, the dim stays split: each device's result block needs an
// interval of the operand whose ends are affine in the device's block index, so every device
// gets the edge rows it lacks from its neighbours at a static set of distances (ppermute),
// concatenates them with its own block and slices its result block at an offset computed from
// its axis index. This moves the rows the blocks need, not the whole dim an all_gather would.
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

// How one shifted dim is computed on blocks. Along the dim (`extent` rows in the operand,
// `result_extent` in the result), block i of the operand covers rows [i * in_block, (i + 1) *
// in_block) and block i of the result [i * out_block, (i + 1) * out_block) (ceil-sized blocks,
// padded at the end when the split is uneven). Element j of the result reads element
// scale * j + offset of the operand, after reversing the operand when `mirrored`. A device
// builds the operand rows [i * in_block + left, i * in_block + right) from its block and its
// neighbours' edges.
struct DimPlan {
  int dim;
  AxisList axes;
  int64_t devices, extent, result_extent, in_block, out_block;
  bool mirrored;
  int64_t scale, offset, left, right;
};

// The plans of every shifted dim for an operand of shape `operand` and a result of shape
// `result`, both split as `split`; nothing when a halo would move no fewer bytes than
// gathering the dim, when a reversed dim is split unevenly (its padding would move to the
// front) or when no shifted dim is split (the equation then runs as it is).
std::optional<std::vector<DimPlan>> plan(std::span<const ShardingRule::Shift> shifts,
                                         const Shape& operand, const Shape& result,
                                         const Split& split);

// The result block of the equation from this device's operand block (split as the plans say),
// with `fill` (a scalar, or a null Array) where the result reads outside the operand.
Array run(std::span<const DimPlan> plans, Array block, const Array& fill, const CollectiveLog& log);

}  // namespace spmd::halo

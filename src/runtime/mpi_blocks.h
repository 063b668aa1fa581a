// Moving the blocks of a value between processes (device_put across a job, and the gathers of
// whole values: process_allgather and collective reads): from the two layouts
// alone, which every process knows, each process works out which pieces of which blocks its
// devices lack and which pieces of its own blocks the others lack, and exactly those pieces travel
// point to point, each from one process.
#pragma once

#include <spmd/sharding.h>

#include "core/buffer.h"
#include "runtime/sharded.h"

#include <memory>
#include <vector>

namespace spmd::runtime {

// A region of the value (one Slice per dim) and its elements, row-major.
struct Piece {
  std::vector<Slice> region;
  const void* data = nullptr;
};

struct ReceivedPieces {
  std::shared_ptr<Buffer> bytes;  // owns every piece's data
  std::vector<Piece> pieces;
};

// The pieces of `from`'s blocks that this process's blocks of `to` need (other than those reused
// on their device) and that no device of this process holds, each received from the lowest
// process holding a copy; meanwhile sends the pieces others need of the blocks this process is
// the lowest holder of. Every process of the job calls it at the same point; one with nothing to
// send or receive returns at once. Counts the bytes received as between_processes. `api` names
// the caller in errors.
ReceivedPieces exchange_blocks(const ShardedData& from, const std::vector<ShardSlot>& to,
                               int itemsize, const char* api);

}  // namespace spmd::runtime

// The data of a committed array: its sharding, the per-device layout and one buffer per device.
// Buffers produced by a launch become valid when the launch's future is ready.
#pragma once

#include <spmd/sharding.h>

#include "core/array_impl.h"
#include "core/buffer.h"

#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace spmd {

struct ShardedData {
  std::shared_ptr<const Sharding> sharding;
  std::vector<ShardSlot> layout;                // per device, in the sharding's device order
  std::vector<std::shared_ptr<Buffer>> shards;  // one per layout entry
  std::shared_future<void> ready;               // invalid when the shards were filled at once

  // Waits until the shards are filled; rethrows the error of the launch that filled them.
  void wait() const;
  // Waits until the block of `slot` can be read by the calling device thread. A launch fills
  // each block on the device that holds it, and a device runs its tasks in launch order, so on
  // that device the block is there once its task has run: only an empty block (the task
  // failed) waits for the whole launch, for its error. Elsewhere, as wait().
  void wait_for_block(int slot) const;
  // The whole value in one buffer (the single shard that holds it all, or a gathered copy).
  const std::shared_ptr<Buffer>& gathered(const AbstractValue& aval) const;
  // Whether this process holds a copy of every block, so that gathered() can read the value.
  bool readable() const;
  // Whether every process holds a copy of every block (decided from the layout alone).
  bool readable_everywhere() const;
  // The whole value from every process's blocks (a collective over all processes).
  std::shared_ptr<Buffer> gather_from_processes(const AbstractValue& aval) const;
  // The slot of `device_id`, or -1.
  int slot_of(int device_id) const;

 private:
  mutable std::once_flag gather_once_;
  mutable std::shared_ptr<Buffer> gathered_;
};

// Shape of a region of a value (one Slice per dim), and of a layout slot's block.
Shape region_shape(const std::vector<Slice>& region);
Shape slot_shape(const ShardSlot& slot);
// The region both `a` and `b` cover, or nothing when they do not overlap.
std::optional<std::vector<Slice>> overlap(const std::vector<Slice>& a, const std::vector<Slice>& b);
// Copies `part` (inside both regions) from the row-major block `src` of region `src_region` into
// the row-major block `dst` of region `dst_region`; returns the bytes copied.
int64_t copy_region(const std::vector<Slice>& part, const void* src,
                    const std::vector<Slice>& src_region, void* dst,
                    const std::vector<Slice>& dst_region, int itemsize);
// Whether `target` is the block `from` holds on the same device, which is then used as it is.
bool reuses_block(const ShardedData& from, const ShardSlot& target);
// Whether two shardings are equal (*a == *b): at once for one object, and for a pair found equal
// before on this thread while both are alive (each launch compares its arguments' shardings with
// the program's, and its results' with the arguments', mostly the same objects every launch).
bool equal_shardings(const std::shared_ptr<const Sharding>& a,
                     const std::shared_ptr<const Sharding>& b);
// Empty sharded data for `aval` laid out by `sharding` (buffers not yet allocated).
std::shared_ptr<ShardedData> make_layout(const AbstractValue& aval,
                                         std::shared_ptr<const Sharding> sharding);
// Copies the slot's slice of a row-major global value into a fresh buffer.
std::shared_ptr<Buffer> slice_for(const void* global, const AbstractValue& aval,
                                  const ShardSlot& slot);
Array make_sharded_array(AbstractValue aval, std::shared_ptr<ShardedData> data);
// Fills the blocks of `to` on this process's devices with the value `from` holds. A block already
// on its device is reused; the others are built from the blocks of `from` they overlap, each
// byte from one copy: the one on the target's device, else another of this process, else a piece
// received from the process that sends it (runtime/mpi_blocks.h). Every process of the job calls
// it at the same point. Counts the bytes that come from other devices and other processes.
void place_blocks(const ShardedData& from, const AbstractValue& aval, ShardedData& to);
// device_put of a concrete array (src/runtime/placement.cpp): its blocks placed as `sharding`
// lays them out, reusing those already on the right device.
Array place_concrete(const Array& x, std::shared_ptr<const Sharding> sharding);

}  // namespace spmd

#include "runtime/sharded.h"

#include "backends/cpu/copy.h"
#include "runtime/devices.h"
#include "runtime/mpi.h"
#include "runtime/transfer.h"
#include "sharding/type_sharding.h"

#include <spmd/distributed.h>
#include <spmd/error.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace spmd {
namespace {

// Row-major element strides of `shape`.
std::vector<int64_t> strides_of(const Shape& shape) {
  std::vector<int64_t> s(size_t(shape.ndim()), 1);
  for (int d = shape.ndim() - 2; d >= 0; --d) s[size_t(d)] = s[size_t(d) + 1] * shape[d + 1];
  return s;
}

int64_t offset_of(const ShardSlot& slot, const std::vector<int64_t>& strides) {
  int64_t off = 0;
  for (size_t d = 0; d < slot.index.size(); ++d) off += slot.index[d].start * strides[d];
  return off;
}

bool covers_all(const ShardSlot& slot, const Shape& shape) {
  for (int d = 0; d < shape.ndim(); ++d)
    if (slot.index[size_t(d)].start != 0 || slot.index[size_t(d)].stop != shape[d]) return false;
  return true;
}

}  // namespace

Shape slot_shape(const ShardSlot& slot) {
  std::vector<int64_t> dims;
  for (const Slice& s : slot.index) dims.push_back(s.stop - s.start);
  return Shape(dims);
}

void ShardedData::wait() const {
  if (ready.valid()) ready.get();
}

void wait_until_filled(const ShardedData& data) {
  data.wait();
}

const std::shared_ptr<Buffer>& gathered_buffer(const ShardedData& data, const AbstractValue& aval) {
  return data.gathered(aval);
}

int ShardedData::slot_of(int device_id) const {
  for (size_t i = 0; i < layout.size(); ++i)
    if (layout[i].device.id == device_id) return int(i);
  return -1;
}

namespace {

// JAX's text for reading an array whose blocks are partly in other processes.
[[noreturn]] void throw_not_addressable() {
  throw RuntimeError(
      "Fetching value for `jax.Array` that spans non-addressable (non process local) devices "
      "is not possible. You can use `jax.experimental.multihost_utils.process_allgather` to "
      "print the global array or use `.addressable_shards` method of jax.Array to inspect the "
      "addressable (process local) shards.");
}

}  // namespace

std::shared_ptr<Buffer> ShardedData::gather_from_processes(const AbstractValue& aval) const {
  // Process p sends the replica-0 blocks on its devices, in layout order; every process knows
  // who sends what from the layout.
  const int itemsize = int(spmd::itemsize(aval.dtype));
  const int procs = process_count(), me = process_index();
  std::vector<std::vector<size_t>> sent_by(static_cast<size_t>(procs));
  for (size_t i = 0; i < layout.size(); ++i)
    if (layout[i].replica_id == 0)
      sent_by[size_t(runtime::process_of_device(layout[i].device.id))].push_back(i);
  std::vector<int64_t> counts(static_cast<size_t>(procs), 0);
  for (int p = 0; p < procs; ++p)
    for (size_t i : sent_by[size_t(p)])
      counts[size_t(p)] += slot_shape(layout[i]).size() * itemsize;
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  auto send = Buffer::allocate(size_t(std::max<int64_t>(1, counts[size_t(me)])));
  int64_t at = 0;
  for (size_t i : sent_by[size_t(me)]) {
    const int64_t n = slot_shape(layout[i]).size() * itemsize;
    std::memcpy(static_cast<char*>(send->data()) + at, shards[i]->data(), size_t(n));
    at += n;
  }
  auto recv = Buffer::allocate(size_t(std::max<int64_t>(1, total)));
  auto keep =
      std::make_shared<std::pair<std::shared_ptr<Buffer>, std::shared_ptr<Buffer>>>(send, recv);
  runtime::mpi::world_allgatherv(send->data(), counts[size_t(me)], recv->data(), counts, keep);
  auto out = Buffer::allocate(size_t(aval.nbytes()));
  const std::vector<int64_t> strides = strides_of(aval.shape);
  at = 0;
  for (int p = 0; p < procs; ++p)
    for (size_t i : sent_by[size_t(p)]) {
      Shape block = slot_shape(layout[i]);
      char* dst = static_cast<char*>(out->data()) + offset_of(layout[i], strides) * itemsize;
      cpu::strided_copy(static_cast<const char*>(recv->data()) + at, strides_of(block), dst,
                        strides, block.dims(), itemsize);
      at += block.size() * itemsize;
    }
  runtime::record_transfer(runtime::TransferKind::device_to_host, total);
  return out;
}

bool ShardedData::readable_everywhere() const {
  const int procs = process_count();
  for (const ShardSlot& block : layout) {
    std::vector<bool> held(static_cast<size_t>(procs), false);
    for (const ShardSlot& copy : layout)
      if (copy.index == block.index)
        held[size_t(runtime::process_of_device(copy.device.id))] = true;
    for (bool h : held)
      if (!h) return false;
  }
  return true;
}

bool ShardedData::readable() const {
  wait();
  for (size_t i = 0; i < layout.size(); ++i) {
    if (shards[i]) continue;
    bool copy = false;
    for (size_t j = 0; j < layout.size() && !copy; ++j)
      copy = shards[j] && layout[j].index == layout[i].index;
    if (!copy) return false;
  }
  return true;
}

const std::shared_ptr<Buffer>& ShardedData::gathered(const AbstractValue& aval) const {
  wait();
  std::call_once(gather_once_, [&] {
    // With collective reads, every process gathers unless every one of them can read the value
    // where it is: the choice must be the same everywhere, and the layout is.
    if (process_count() > 1 && distributed::collective_reads() && !readable_everywhere()) {
      gathered_ = gather_from_processes(aval);
      return;
    }
    for (size_t i = 0; i < layout.size(); ++i)
      if (shards[i] && covers_all(layout[i], aval.shape)) {
        gathered_ = shards[i];
        return;
      }
    if (!readable()) throw_not_addressable();
    // Each block from a copy this process holds (replica 0 when it is here).
    std::vector<const Buffer*> blocks(layout.size(), nullptr);
    for (size_t i = 0; i < layout.size(); ++i) {
      if (layout[i].replica_id != 0) continue;
      for (size_t j = 0; j < layout.size() && !shards[i]; ++j)
        if (shards[j] && layout[j].index == layout[i].index) blocks[i] = shards[j].get();
      if (shards[i]) blocks[i] = shards[i].get();
      if (!blocks[i]) throw_not_addressable();
    }
    auto out = Buffer::allocate(size_t(aval.nbytes()));
    const int itemsize = int(spmd::itemsize(aval.dtype));
    const std::vector<int64_t> strides = strides_of(aval.shape);
    for (size_t i = 0; i < layout.size(); ++i) {
      if (layout[i].replica_id != 0) continue;
      Shape block = slot_shape(layout[i]);
      std::vector<int64_t> block_strides = strides_of(block);
      char* dst = static_cast<char*>(out->data()) + offset_of(layout[i], strides) * itemsize;
      cpu::strided_copy(blocks[i]->data(), block_strides, dst, strides, block.dims(), itemsize);
      runtime::record_transfer(runtime::TransferKind::device_to_host, block.size() * itemsize);
    }
    gathered_ = std::move(out);
  });
  return gathered_;
}

std::shared_ptr<ShardedData> make_layout(const AbstractValue& aval,
                                         std::shared_ptr<const Sharding> sharding) {
  auto data = std::make_shared<ShardedData>();
  data->layout = sharding->layout(aval.shape);
  data->sharding = std::move(sharding);
  data->shards.resize(data->layout.size());
  return data;
}

std::shared_ptr<Buffer> slice_for(const void* global, const AbstractValue& aval,
                                  const ShardSlot& slot) {
  const int itemsize = int(spmd::itemsize(aval.dtype));
  Shape block = slot_shape(slot);
  auto out = Buffer::allocate(size_t(block.size() * itemsize));
  const std::vector<int64_t> strides = strides_of(aval.shape);
  const char* src = static_cast<const char*>(global) + offset_of(slot, strides) * itemsize;
  cpu::strided_copy(src, strides, out->data(), strides_of(block), block.dims(), itemsize);
  return out;
}

std::shared_ptr<Buffer> assemble_block(const ShardedData& from, const AbstractValue& aval,
                                       const ShardSlot& target) {
  const int itemsize = int(spmd::itemsize(aval.dtype));
  const Shape block = slot_shape(target);
  const std::vector<int64_t> block_strides = strides_of(block);
  auto out = Buffer::allocate(size_t(block.size() * itemsize));
  std::vector<bool> done(from.layout.size(), false);  // per source block (by index)
  for (size_t i = 0; i < from.layout.size(); ++i) {
    if (done[i]) continue;
    // The copies of this block: the one on the target's device if there is one, else the first
    // this process holds.
    int holder = -1;
    for (size_t j = i; j < from.layout.size(); ++j) {
      if (from.layout[j].index != from.layout[i].index) continue;
      done[j] = true;
      if (!from.shards[j]) continue;
      if (holder < 0 || from.layout[j].device == target.device) holder = int(j);
    }
    if (holder < 0) throw std::logic_error("[device_put] a block this process needs is elsewhere");
    const ShardSlot& src = from.layout[size_t(holder)];
    std::vector<int64_t> extent, src_at, dst_at;
    for (size_t d = 0; d < target.index.size(); ++d) {
      const int64_t lo = std::max(src.index[d].start, target.index[d].start);
      const int64_t hi = std::min(src.index[d].stop, target.index[d].stop);
      if (hi <= lo) break;
      extent.push_back(hi - lo);
      src_at.push_back(lo - src.index[d].start);
      dst_at.push_back(lo - target.index[d].start);
    }
    if (extent.size() != target.index.size()) continue;  // no overlap
    const std::vector<int64_t> src_strides = strides_of(slot_shape(src));
    int64_t src_off = 0, dst_off = 0;
    for (size_t d = 0; d < extent.size(); ++d) {
      src_off += src_at[d] * src_strides[d];
      dst_off += dst_at[d] * block_strides[d];
    }
    cpu::strided_copy(
        static_cast<const char*>(from.shards[size_t(holder)]->data()) + src_off * itemsize,
        src_strides, static_cast<char*>(out->data()) + dst_off * itemsize, block_strides, extent,
        itemsize);
    int64_t bytes = itemsize;
    for (int64_t e : extent) bytes *= e;
    if (!(src.device == target.device))
      runtime::record_transfer(runtime::TransferKind::device_to_device, bytes);
  }
  return out;
}

Array make_sharded_array(AbstractValue aval, std::shared_ptr<ShardedData> data) {
  // The type's sharding is the data's, over the mesh's Explicit axes.
  aval.sharding = type_sharding_of(*data->sharding, aval.shape.ndim());
  auto impl = std::make_shared<ArrayImpl>();
  impl->aval = std::move(aval);
  impl->sharded = std::move(data);
  return Array(std::move(impl));
}

}  // namespace spmd

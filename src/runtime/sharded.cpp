#include "runtime/sharded.h"

#include "backends/cpu/copy.h"
#include "runtime/devices.h"
#include "runtime/executor.h"
#include "runtime/mpi_blocks.h"
#include "runtime/transfer.h"
#include "sharding/type_sharding.h"

#include <spmd/distributed.h>
#include <spmd/error.h>

#include <algorithm>
#include <array>

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

Shape region_shape(const std::vector<Slice>& region) {
  std::vector<int64_t> dims;
  for (const Slice& s : region) dims.push_back(s.stop - s.start);
  return Shape(dims);
}

Shape slot_shape(const ShardSlot& slot) {
  return region_shape(slot.index);
}

std::optional<std::vector<Slice>> overlap(const std::vector<Slice>& a,
                                          const std::vector<Slice>& b) {
  std::vector<Slice> both;
  for (size_t d = 0; d < a.size(); ++d) {
    const Slice s{std::max(a[d].start, b[d].start), std::min(a[d].stop, b[d].stop)};
    if (s.stop <= s.start) return std::nullopt;
    both.push_back(s);
  }
  return both;
}

int64_t copy_region(const std::vector<Slice>& part, const void* src,
                    const std::vector<Slice>& src_region, void* dst,
                    const std::vector<Slice>& dst_region, int itemsize) {
  const std::vector<int64_t> src_strides = strides_of(region_shape(src_region));
  const std::vector<int64_t> dst_strides = strides_of(region_shape(dst_region));
  std::vector<int64_t> extent;
  int64_t src_off = 0, dst_off = 0, bytes = itemsize;
  for (size_t d = 0; d < part.size(); ++d) {
    extent.push_back(part[d].stop - part[d].start);
    src_off += (part[d].start - src_region[d].start) * src_strides[d];
    dst_off += (part[d].start - dst_region[d].start) * dst_strides[d];
    bytes *= extent.back();
  }
  cpu::strided_copy(static_cast<const char*>(src) + src_off * itemsize, src_strides,
                    static_cast<char*>(dst) + dst_off * itemsize, dst_strides, extent, itemsize);
  return bytes;
}

bool reuses_block(const ShardedData& from, const ShardSlot& target) {
  const int j = from.slot_of(target.device.id);
  return j >= 0 && from.layout[size_t(j)].index == target.index;
}

void ShardedData::wait() const {
  if (ready.valid()) ready.get();
}

void ShardedData::wait_for_block(int slot) const {
  if (layout[size_t(slot)].device.id == runtime::current_device_id() && shards[size_t(slot)])
    return;
  wait();
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
  // Every process wants the whole value on one of its devices, so each receives only the blocks
  // none of its devices holds, each once, from the lowest process holding a copy.
  wait();
  const int itemsize = int(spmd::itemsize(aval.dtype));
  std::vector<Slice> whole;
  for (int64_t d : aval.shape.dims()) whole.push_back(Slice{0, d});
  std::vector<ShardSlot> everywhere;
  for (const Device& d : devices())
    if (everywhere.empty() || everywhere.back().device.process_index != d.process_index)
      everywhere.push_back(ShardSlot{d, whole, 0});
  const runtime::ReceivedPieces received =
      runtime::exchange_blocks(*this, everywhere, itemsize, "process_allgather");
  auto out = Buffer::allocate(size_t(aval.nbytes()));
  std::vector<bool> copied(layout.size(), false);
  for (size_t i = 0; i < layout.size(); ++i) {
    if (!shards[i] || copied[i]) continue;
    for (size_t j = i; j < layout.size(); ++j)
      copied[j] = copied[j] || layout[j].index == layout[i].index;
    copy_region(layout[i].index, shards[i]->data(), layout[i].index, out->data(), whole, itemsize);
  }
  for (const runtime::Piece& piece : received.pieces)
    copy_region(piece.region, piece.data, piece.region, out->data(), whole, itemsize);
  runtime::record_transfer(runtime::TransferKind::device_to_host, int64_t(aval.nbytes()));
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

namespace {

// Pairs of distinct shardings found equal on this thread, each held weakly: a pair whose
// shardings are both alive (not expired) names the same two objects as when it was compared, as
// no other object can have an address of a live one.
struct EqualPair {
  const Sharding* a = nullptr;
  const Sharding* b = nullptr;
  std::weak_ptr<const Sharding> a_alive, b_alive;
};
constexpr size_t kEqualPairs = 4;
thread_local std::array<EqualPair, kEqualPairs> t_equal_pairs;
thread_local size_t t_next_pair = 0;

}  // namespace

bool equal_shardings(const std::shared_ptr<const Sharding>& a,
                     const std::shared_ptr<const Sharding>& b) {
  if (a == b) return true;
  if (!a || !b) return false;
  for (const EqualPair& p : t_equal_pairs)
    if (((p.a == a.get() && p.b == b.get()) || (p.a == b.get() && p.b == a.get())) &&
        !p.a_alive.expired() && !p.b_alive.expired())
      return true;
  if (!(*a == *b)) return false;
  t_equal_pairs[t_next_pair] = EqualPair{a.get(), b.get(), a, b};
  t_next_pair = (t_next_pair + 1) % kEqualPairs;
  return true;
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

namespace {

// The copy of the block at `first` (its first slot) that this process holds, the one on `device`
// when there is one, or -1; marks every copy in `seen`.
int local_copy(const ShardedData& from, size_t first, const Device& device,
               std::vector<bool>& seen) {
  int holder = -1;
  for (size_t j = first; j < from.layout.size(); ++j) {
    if (from.layout[j].index != from.layout[first].index) continue;
    seen[j] = true;
    if (!from.shards[j]) continue;
    if (holder < 0 || from.layout[j].device == device) holder = int(j);
  }
  return holder;
}

std::shared_ptr<Buffer> assemble_block(const ShardedData& from, int itemsize,
                                       const ShardSlot& target,
                                       const std::vector<runtime::Piece>& received) {
  auto out = Buffer::allocate(size_t(slot_shape(target).size() * itemsize));
  std::vector<bool> seen(from.layout.size(), false);
  for (size_t i = 0; i < from.layout.size(); ++i) {
    if (seen[i]) continue;
    const int holder = local_copy(from, i, target.device, seen);
    if (holder < 0) continue;  // held by other processes only: among the received pieces
    const ShardSlot& src = from.layout[size_t(holder)];
    const std::optional<std::vector<Slice>> part = overlap(src.index, target.index);
    if (!part) continue;
    const int64_t bytes = copy_region(*part, from.shards[size_t(holder)]->data(), src.index,
                                      out->data(), target.index, itemsize);
    if (!(src.device == target.device))
      runtime::record_transfer(runtime::TransferKind::device_to_device, bytes);
  }
  for (const runtime::Piece& piece : received)
    if (const auto part = overlap(piece.region, target.index))
      copy_region(*part, piece.data, piece.region, out->data(), target.index, itemsize);
  return out;
}

}  // namespace

void place_blocks(const ShardedData& from, const AbstractValue& aval, ShardedData& to) {
  const int itemsize = int(spmd::itemsize(aval.dtype));
  const runtime::ReceivedPieces received =
      runtime::exchange_blocks(from, to.layout, itemsize, "device_put");
  for (size_t i = 0; i < to.layout.size(); ++i) {
    const ShardSlot& target = to.layout[i];
    if (!runtime::is_local_device(target.device.id)) continue;
    if (reuses_block(from, target))
      to.shards[i] = from.shards[size_t(from.slot_of(target.device.id))];
    else
      to.shards[i] = assemble_block(from, itemsize, target, received.pieces);
  }
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

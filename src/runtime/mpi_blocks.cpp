#include "runtime/mpi_blocks.h"

#include <spmd/device.h>
#include <spmd/error.h>

#include "runtime/communicator.h"
#include "runtime/devices.h"
#include "runtime/mpi.h"
#include "runtime/transfer.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace spmd::runtime {
namespace {

// A piece of the block whose first slot in `from`'s layout is `block`, and who sends it.
struct PlannedPiece {
  int sender = 0;
  size_t block = 0;
  std::vector<Slice> region;
};

// Bytes for one process to another, or from one process: `bytes` at `data`.
struct Message {
  int peer = 0;
  void* data = nullptr;
  int64_t bytes = 0;
};

bool first_copy(const ShardedData& from, size_t block) {
  for (size_t j = 0; j < block; ++j)
    if (from.layout[j].index == from.layout[block].index) return false;
  return true;
}

// The processes holding a copy of `from`'s block at `block`.
std::vector<bool> holders(const ShardedData& from, size_t block) {
  std::vector<bool> held(size_t(process_count()), false);
  for (const ShardSlot& copy : from.layout)
    if (copy.index == from.layout[block].index)
      held[size_t(process_of_device(copy.device.id))] = true;
  return held;
}

// The distinct regions of the blocks of `to` on process `p` that are not reused on their device.
std::vector<std::vector<Slice>> wanted_by(int p, const ShardedData& from,
                                          const std::vector<ShardSlot>& to) {
  std::vector<std::vector<Slice>> wanted;
  for (const ShardSlot& t : to)
    if (process_of_device(t.device.id) == p && !reuses_block(from, t) &&
        std::find(wanted.begin(), wanted.end(), t.index) == wanted.end())
      wanted.push_back(t.index);
  return wanted;
}

// The pieces process `p` lacks, in an order every process computes alike: by wanted region,
// then by source block. The lowest process holding a block sends it, so a replicated block
// travels once.
std::vector<PlannedPiece> pieces_lacked_by(int p, const ShardedData& from,
                                           const std::vector<ShardSlot>& to) {
  std::vector<size_t> blocks;  // the first slot of each block p holds no copy of
  std::vector<int> senders;
  for (size_t b = 0; b < from.layout.size(); ++b) {
    if (!first_copy(from, b)) continue;
    const std::vector<bool> held = holders(from, b);
    if (held[size_t(p)]) continue;
    blocks.push_back(b);
    senders.push_back(int(std::find(held.begin(), held.end(), true) - held.begin()));
  }
  std::vector<PlannedPiece> pieces;
  for (const std::vector<Slice>& region : wanted_by(p, from, to))
    for (size_t k = 0; k < blocks.size(); ++k)
      if (auto part = overlap(from.layout[blocks[k]].index, region))
        pieces.push_back(PlannedPiece{senders[k], blocks[k], std::move(*part)});
  return pieces;
}

// The slot of a copy of `from`'s block at `block` that this process holds.
size_t held_copy(const ShardedData& from, size_t block, const char* api) {
  for (size_t j = 0; j < from.layout.size(); ++j)
    if (from.shards[j] && from.layout[j].index == from.layout[block].index) return j;
  throw std::logic_error(std::string("[") + api +
                         "] internal error: a block this process sends is elsewhere");
}

int64_t piece_bytes(const PlannedPiece& piece, int itemsize) {
  return region_shape(piece.region).size() * itemsize;
}

// The pieces this process sends `p`, one after another in one buffer, or null.
std::shared_ptr<Buffer> pack_for(int p, const ShardedData& from, const std::vector<ShardSlot>& to,
                                 int itemsize, const char* api) {
  std::vector<PlannedPiece> pieces = pieces_lacked_by(p, from, to);
  std::erase_if(pieces, [](const PlannedPiece& x) { return x.sender != process_index(); });
  if (pieces.empty()) return nullptr;
  int64_t total = 0;
  for (const PlannedPiece& piece : pieces) total += piece_bytes(piece, itemsize);
  auto out = Buffer::allocate(size_t(total));
  char* at = static_cast<char*>(out->data());
  for (const PlannedPiece& piece : pieces) {
    const size_t j = held_copy(from, piece.block, api);
    at += copy_region(piece.region, from.shards[j]->data(), from.layout[j].index, at, piece.region,
                      itemsize);
  }
  return out;
}

#if SPMD_WITH_MPI

constexpr int kBlocksTag = 3;  // on mpi::world()
// Bytes per MPI message: its counts are ints.
constexpr int64_t kMaxMessage = int64_t(1) << 30;

void post(std::vector<MPI_Request>& requests, const Message& m, bool send, const char* api) {
  for (int64_t at = 0; at < m.bytes; at += kMaxMessage) {
    const int n = int(std::min(kMaxMessage, m.bytes - at));
    char* data = static_cast<char*>(m.data) + at;
    requests.emplace_back();
    const int rc =
        send ? MPI_Isend(data, n, MPI_BYTE, m.peer, kBlocksTag, mpi::world(), &requests.back())
             : MPI_Irecv(data, n, MPI_BYTE, m.peer, kBlocksTag, mpi::world(), &requests.back());
    if (rc != MPI_SUCCESS)
      throw RuntimeError(std::string("[") + api + "] " + (send ? "MPI_Isend" : "MPI_Irecv") +
                         " to move blocks between processes failed");
  }
}

void send_and_receive(const std::vector<Message>& sends, const std::vector<Message>& receives,
                      std::shared_ptr<void> keep_alive, const char* api) {
  std::vector<MPI_Request> requests;
  for (const Message& m : receives) post(requests, m, false, api);
  for (const Message& m : sends) post(requests, m, true, api);
  const std::string what = std::string("[") + api + "] moving blocks between processes";
  mpi::wait_for(requests, mpi::Wait{default_collective_timeout(), nullptr}, what.c_str(),
                std::move(keep_alive));
}

#else

void send_and_receive(const std::vector<Message>&, const std::vector<Message>&,
                      std::shared_ptr<void>, const char* api) {
  throw std::logic_error(std::string("[") + api + "] internal error: no MPI in this build");
}

#endif

}  // namespace

ReceivedPieces exchange_blocks(const ShardedData& from, const std::vector<ShardSlot>& to,
                               int itemsize, const char* api) {
  ReceivedPieces received;
  const int procs = process_count(), me = process_index();
  if (procs == 1) return received;
  auto keep = std::make_shared<std::vector<std::shared_ptr<Buffer>>>();
  std::vector<Message> sends, receives;
  for (int p = 0; p < procs; ++p)
    if (p != me)
      if (std::shared_ptr<Buffer> packed = pack_for(p, from, to, itemsize, api)) {
        sends.push_back(Message{p, packed->data(), int64_t(packed->nbytes())});
        keep->push_back(std::move(packed));
      }
  // What this process lacks, one message per sender, the senders in process order.
  std::vector<PlannedPiece> lacked = pieces_lacked_by(me, from, to);
  std::stable_sort(lacked.begin(), lacked.end(), [](const PlannedPiece& a, const PlannedPiece& b) {
    return a.sender < b.sender;
  });
  int64_t total = 0;
  for (const PlannedPiece& piece : lacked) total += piece_bytes(piece, itemsize);
  received.bytes = Buffer::allocate(size_t(total));
  keep->push_back(received.bytes);
  char* at = static_cast<char*>(received.bytes->data());
  for (const PlannedPiece& piece : lacked) {
    if (receives.empty() || receives.back().peer != piece.sender)
      receives.push_back(Message{piece.sender, at, 0});
    receives.back().bytes += piece_bytes(piece, itemsize);
    received.pieces.push_back(Piece{piece.region, at});
    at += piece_bytes(piece, itemsize);
  }
  if (sends.empty() && receives.empty()) return received;
  send_and_receive(sends, receives, keep, api);
  record_transfer(TransferKind::between_processes, total);
  return received;
}

}  // namespace spmd::runtime

#include "runtime/transfer.h"

#include <spmd/device.h>

#include <atomic>

namespace spmd::runtime {
namespace {
std::atomic<int64_t> g_h2d{0}, g_d2h{0}, g_d2d{0}, g_procs{0}, g_count{0};
}  // namespace

void record_transfer(TransferKind kind, int64_t bytes) {
  switch (kind) {
    case TransferKind::host_to_device:
      g_h2d += bytes;
      break;
    case TransferKind::device_to_host:
      g_d2h += bytes;
      break;
    case TransferKind::device_to_device:
      g_d2d += bytes;
      break;
    case TransferKind::between_processes:
      g_procs += bytes;
      break;
  }
  ++g_count;
}

TransferStats transfer_stats() {
  return TransferStats{g_h2d.load(), g_d2h.load(), g_d2d.load(), g_count.load(), g_procs.load()};
}

void reset_transfer_stats() {
  g_h2d = 0;
  g_d2h = 0;
  g_d2d = 0;
  g_procs = 0;
  g_count = 0;
}

}  // namespace spmd::runtime

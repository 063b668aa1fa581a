// Counting copies between the host and devices, and the bytes a process receives from others
// (spmd::runtime::transfer_stats).
#pragma once

#include <cstdint>

namespace spmd::runtime {

enum class TransferKind { host_to_device, device_to_host, device_to_device, between_processes };
void record_transfer(TransferKind kind, int64_t bytes);

}  // namespace spmd::runtime

// Checks that hold in one process and in each process of an mpirun job (ctest's
// spmd_mpi_suites): a process holds, and lists in addressable_shards(), only the shards of its
// own devices, so a test expecting something of every device expects it of this process's.
#pragma once

#include <spmd/device.h>
#include <spmd/placement.h>

#include <optional>
#include <string>
#include <vector>

namespace spmd_test {

// The ids among `ids` of this process's devices, in their order: all of them in one process.
inline std::vector<int> ids_here(const std::vector<int>& ids) {
  const std::vector<spmd::Device> all = spmd::devices();
  std::vector<int> out;
  for (int id : ids)
    if (spmd::is_addressable(all.at(size_t(id)))) out.push_back(id);
  return out;
}

// 0, 1, ..., n - 1 among this process's devices.
inline std::vector<int> first_ids_here(int n) {
  std::vector<int> ids;
  for (int k = 0; k < n; ++k) ids.push_back(k);
  return ids_here(ids);
}

// The devices of `x`'s addressable shards, in shard order.
inline std::vector<int> shard_ids(const spmd::Array& x) {
  std::vector<int> ids;
  for (const spmd::Shard& s : x.addressable_shards()) ids.push_back(s.device.id);
  return ids;
}

// The shard of `x` on device `id`; none when another process holds it.
inline std::optional<spmd::Shard> shard_on(const spmd::Array& x, int id) {
  for (const spmd::Shard& s : x.addressable_shards())
    if (s.device.id == id) return s;
  return std::nullopt;
}

// How many of `ids` are this process's devices.
inline int count_here(const std::vector<int>& ids) {
  return int(ids_here(ids).size());
}

// `text` (recorded in one process) with the default device, CpuDevice(id=0), read as this
// process's: an uncommitted value lives on its process's first device, as in JAX
// (pxla.get_default_device() is xb.local_devices()[0]).
inline std::string on_default_device(std::string text) {
  const std::string zero = "CpuDevice(id=0)";
  const std::string mine = "CpuDevice(id=" + std::to_string(spmd::local_devices()[0].id) + ")";
  for (size_t at = text.find(zero); at != std::string::npos; at = text.find(zero, at + mine.size()))
    text.replace(at, zero.size(), mine);
  return text;
}

}  // namespace spmd_test

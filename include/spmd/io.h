// Reading and writing arrays in NumPy's .npy and .npz formats and in the .safetensors format of
// checkpoints, so data moves to and from NumPy, JAX and torch. Every spmd dtype round-trips;
// bfloat16 is stored as NumPy's ml_dtypes does (.npy) or as safetensors' BF16.
#pragma once

#include <spmd/array.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace spmd {

void save_npy(const std::string& path, const Array& x);
Array load_npy(const std::string& path);
// .npz: a zip archive of .npy members, stored uncompressed (np.savez); load_npz also reads
// deflate-compressed archives (np.savez_compressed).
void save_npz(const std::string& path, const std::map<std::string, Array>& arrays);
std::map<std::string, Array> load_npz(const std::string& path);

// .safetensors: an 8-byte little-endian header length, a JSON header naming each tensor's dtype,
// shape and byte range, then the data. Files are written byte for byte as Python's
// safetensors.numpy.save_file writes them: tensors ordered by dtype alignment (largest first),
// then by name; metadata keys in sorted order (Python's order is a hash map's). Sharded arrays
// are saved whole. Names are arbitrary UTF-8 strings except "__metadata__"; an empty metadata
// map writes no "__metadata__" entry.
using NamedArrays = std::vector<std::pair<std::string, Array>>;
void save_safetensors(const std::string& path, const NamedArrays& tensors,
                      const std::map<std::string, std::string>& metadata = {});
// The tensors in the order of their data in the file (for files safetensors writes, also the
// order of the header). A malformed file raises ValueError saying what is wrong.
NamedArrays load_safetensors(const std::string& path);
// The header's "__metadata__" map (empty if it has none), checked as load_safetensors checks it.
std::map<std::string, std::string> load_safetensors_metadata(const std::string& path);

}  // namespace spmd

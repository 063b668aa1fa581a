// Reading and writing arrays in NumPy's .npy and .npz formats, so data moves to and from
// NumPy and JAX. Every spmd dtype round-trips; bfloat16 is stored as NumPy's ml_dtypes does.
#pragma once

#include <spmd/array.h>

#include <map>
#include <string>

namespace spmd {

void save_npy(const std::string& path, const Array& x);
Array load_npy(const std::string& path);
// .npz: a zip archive of .npy members, stored uncompressed (np.savez); load_npz also reads
// deflate-compressed archives (np.savez_compressed).
void save_npz(const std::string& path, const std::map<std::string, Array>& arrays);
std::map<std::string, Array> load_npz(const std::string& path);

}  // namespace spmd

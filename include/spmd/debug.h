// Printing from inside transformed functions (jax.debug.print): the values are formatted when
// the computation runs, so inside shard_map and pmap every device prints its own block.
#pragma once

#include <spmd/array.h>

#include <string>
#include <vector>

namespace spmd::debug {

// Prints `format` with each `{}` (or `{n}`, counting from 0) replaced by the value of the
// corresponding array as NumPy prints it, followed by a newline. Lines printed by devices
// running at the same time do not interleave.
void print(const std::string& format, const std::vector<Array>& values);
template <class... A>
void print(const std::string& format, const A&... values) {
  print(format, std::vector<Array>{Array(values)...});
}

}  // namespace spmd::debug

// Text goldens of numbers: the values of results JAX computed, one result per line.
#pragma once

#include <string_view>
#include <vector>

namespace spmd_test {

// A text golden of numbers separated by spaces, one vector per line (the values of one result).
std::vector<std::vector<float>> golden_float_lines(std::string_view relative);

}  // namespace spmd_test

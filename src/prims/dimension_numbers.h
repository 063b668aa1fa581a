// Checks shared by gather and scatter-add on their dimension numbers (XLA's rules): dimension
// lists that must be unique, in range and sometimes sorted, and the operand/indices batching
// dimensions. Errors are ShapeError with the primitive's name in brackets.
#pragma once

#include "core/array_impl.h"

#include <cstdint>
#include <string>
#include <vector>

namespace spmd::dimension_numbers {

// Python's tuple text: "(1, 2)", "(3,)".
std::string ints_str(const std::vector<int64_t>& v);
bool contains(const std::vector<int64_t>& v, int64_t x);

// `dims` unique, within [0, bound) and, when `sorted`, ascending.
void check_dim_list(const char* api, const char* what, const std::vector<int64_t>& dims,
                    int64_t bound, bool sorted);

// The names a primitive gives its dimension lists, for the batching-dims messages.
struct BatchingNames {
  const char* indices_batching;  // "start_indices_batching_dims"
  const char* dropped;           // "collapsed_slice_dims"
  const char* index_map;         // "start_index_map"
  const char* indices_word;      // "start indices"
};

// operand_batching_dims pair one-to-one with the indices' batching dims, stay out of the dropped
// dims and the index map, and have the same sizes as their partners.
void check_batching_dims(const char* api, const BatchingNames& names, const AbstractValue& operand,
                         const AbstractValue& indices,
                         const std::vector<int64_t>& operand_batching_dims,
                         const std::vector<int64_t>& indices_batching_dims,
                         const std::vector<int64_t>& dropped,
                         const std::vector<int64_t>& index_map);

}  // namespace spmd::dimension_numbers

#include "prims/dimension_numbers.h"

#include <spmd/error.h>

#include <algorithm>

namespace spmd::dimension_numbers {
namespace {

[[noreturn]] void fail(const char* api, const std::string& what) {
  throw ShapeError("[" + std::string(api) + "] " + what);
}

}  // namespace

std::string ints_str(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(v[i]);
  }
  return s + (v.size() == 1 ? ",)" : ")");
}

bool contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

void check_dim_list(const char* api, const char* what, const std::vector<int64_t>& dims,
                    int64_t bound, bool sorted) {
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] >= bound)
      fail(api, std::string(what) + " must be in [0, " + std::to_string(bound) + "), got " +
                    ints_str(dims));
    for (size_t j = 0; j < i; ++j)
      if (dims[j] == dims[i] || (sorted && dims[j] > dims[i]))
        fail(api, std::string(what) + " must be " + (sorted ? "sorted and " : "") + "unique, got " +
                      ints_str(dims));
  }
}

void check_batching_dims(const char* api, const BatchingNames& names, const AbstractValue& operand,
                         const AbstractValue& indices,
                         const std::vector<int64_t>& operand_batching_dims,
                         const std::vector<int64_t>& indices_batching_dims,
                         const std::vector<int64_t>& dropped,
                         const std::vector<int64_t>& index_map) {
  if (operand_batching_dims.size() != indices_batching_dims.size())
    fail(api, std::string("operand_batching_dims and ") + names.indices_batching +
                  " must have equal lengths");
  for (size_t j = 0; j < operand_batching_dims.size(); ++j) {
    const int64_t d = operand_batching_dims[j];
    if (contains(dropped, d) || contains(index_map, d))
      fail(api, std::string("operand_batching_dims must not appear in ") + names.dropped + " or " +
                    names.index_map);
    if (operand.shape[int(d)] != indices.shape[int(indices_batching_dims[j])])
      fail(api, "operand batching dimension " + std::to_string(d) + " and its " +
                    names.indices_word + " batching dimension must have equal sizes");
  }
}

}  // namespace spmd::dimension_numbers

// Primitive parameters: a small map from names to typed values (ints, shapes, dtypes, axis
// names, dimension numbers). Kept sorted by name so programs print and hash deterministically.
#pragma once

#include <spmd/dtype.h>
#include <spmd/lax_types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace spmd {

struct Program;

// A value only the rules of one primitive understand (custom differentiation rules): compared
// and hashed by identity, printed as `repr`.
struct OpaqueParam {
  std::shared_ptr<const void> value;
  std::string repr;
  bool operator==(const OpaqueParam& o) const { return value == o.value; }
};

// Python's None as a parameter value.
struct NoneParam {
  bool operator==(const NoneParam&) const = default;
};

using ParamValue =
    std::variant<NoneParam, bool, int64_t, double, std::string, DType, std::vector<int64_t>,
                 std::vector<std::string>, lax::DotDimensionNumbers, std::vector<lax::PadConfig>,
                 std::shared_ptr<const Program>, std::vector<std::shared_ptr<const Program>>,
                 OpaqueParam>;

class Params {
 public:
  Params() = default;
  Params(std::initializer_list<std::pair<std::string, ParamValue>> items);

  void set(std::string name, ParamValue value);
  bool has(std::string_view name) const;
  const ParamValue& at(std::string_view name) const;  // throws std::logic_error if missing
  template <class T>
  const T& get(std::string_view name) const {
    return std::get<T>(at(name));
  }
  int64_t get_int(std::string_view name) const { return get<int64_t>(name); }
  const std::vector<int64_t>& get_ints(std::string_view name) const {
    return get<std::vector<int64_t>>(name);
  }

  const std::vector<std::pair<std::string, ParamValue>>& items() const { return items_; }
  bool operator==(const Params& other) const;
  size_t hash() const;

 private:
  std::vector<std::pair<std::string, ParamValue>> items_;
};

}  // namespace spmd

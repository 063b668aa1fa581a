// Primitive parameters: a small map from names to typed values (ints, shapes, dtypes, axis
// names, dimension numbers, sub-programs, and objects of the layers above, see ParamObject).
// Kept sorted by name so programs print and hash deterministically; compared and hashed by
// content, so caches keyed on programs see equal programs as one.
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

// A parameter value of a type owned by a layer above ir (a mesh, partition specs, a fusion plan,
// a custom differentiation rule), so that every parameter prints, compares and hashes without ir
// knowing its type. `equals` is only called with an object of the same dynamic type.
class ParamObject {
 public:
  virtual ~ParamObject() = default;
  virtual std::string str() const = 0;  // as the jaxpr text shows the value
  virtual bool equals(const ParamObject& other) const = 0;
  virtual size_t hash() const = 0;
  virtual std::string_view type_name() const = 0;
};

// How TypedParam<T> names, prints and hashes a T; it compares with T's operator==, or with
// `static bool equal(const T&, const T&)` when the traits have one. The layer that owns T
// specializes it beside T:
//   template <> struct ParamTraits<Mesh> {
//     static constexpr std::string_view name = "Mesh";
//     static std::string str(const Mesh& mesh);
//     static size_t hash(const Mesh& mesh);
//   };
template <class T>
struct ParamTraits;

template <class T>
class TypedParam final : public ParamObject {
 public:
  explicit TypedParam(T value) : value_(std::move(value)) {}
  const T& value() const { return value_; }
  std::string str() const override { return ParamTraits<T>::str(value_); }
  bool equals(const ParamObject& other) const override {
    const T& theirs = static_cast<const TypedParam&>(other).value_;
    if constexpr (requires { ParamTraits<T>::equal(value_, theirs); })
      return ParamTraits<T>::equal(value_, theirs);
    else
      return value_ == theirs;
  }
  size_t hash() const override { return ParamTraits<T>::hash(value_); }
  std::string_view type_name() const override { return ParamTraits<T>::name; }

 private:
  T value_;
};

// ParamValue's alternative for typed objects: shared by the copies of an equation, compared and
// hashed by content.
struct ObjectParam {
  std::shared_ptr<const ParamObject> object;
  bool operator==(const ObjectParam& other) const;
};

template <class T>
ObjectParam object_param(T value) {
  return ObjectParam{std::make_shared<const TypedParam<T>>(std::move(value))};
}

// Mixes `value` into the hash `seed` (for ParamTraits<T>::hash).
void hash_combine(size_t& seed, size_t value);

// Python's None as a parameter value.
struct NoneParam {
  bool operator==(const NoneParam&) const = default;
};

using ParamValue =
    std::variant<NoneParam, bool, int64_t, double, std::string, DType, std::vector<int64_t>,
                 std::vector<std::string>, lax::DotDimensionNumbers, std::vector<lax::PadConfig>,
                 std::shared_ptr<const Program>, std::vector<std::shared_ptr<const Program>>,
                 ObjectParam>;

// Python's None, and an empty tuple of ints: the values JAX's printer leaves some params out for.
inline bool is_none(const ParamValue& v) {
  return std::holds_alternative<NoneParam>(v);
}
inline bool is_empty_ints(const ParamValue& v) {
  const auto* ints = std::get_if<std::vector<int64_t>>(&v);
  return ints && ints->empty();
}

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
  // The T a TypedParam<T> holds; throws std::logic_error naming both types when it holds another.
  template <class T>
  const T& get_object(std::string_view name) const {
    const ParamObject& object = object_at(name);
    if (auto* typed = dynamic_cast<const TypedParam<T>*>(&object)) return typed->value();
    throw_type_mismatch(name, object.type_name(), ParamTraits<T>::name);
  }

  const std::vector<std::pair<std::string, ParamValue>>& items() const { return items_; }
  // By content: sub-programs compare as Programs (Program::operator==), objects with `equals`.
  bool operator==(const Params& other) const;
  size_t hash() const;

 private:
  const ParamObject& object_at(std::string_view name) const;
  [[noreturn]] static void throw_type_mismatch(std::string_view name, std::string_view held,
                                               std::string_view wanted);

  std::vector<std::pair<std::string, ParamValue>> items_;
};

}  // namespace spmd

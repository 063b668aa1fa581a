// Element types of spmd arrays: the DType enum, its public constants (spmd::float32, …),
// the two 16-bit float storage types, and JAX's type-promotion rules.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

namespace spmd {

enum class DType : uint8_t {
  bool_,
  int8,
  int16,
  int32,
  int64,
  uint8,
  uint16,
  uint32,
  uint64,
  bfloat16,
  float16,
  float32,
  float64,
};
inline constexpr int kNumDTypes = 13;

inline constexpr DType bool_ = DType::bool_;
inline constexpr DType int8 = DType::int8;
inline constexpr DType int16 = DType::int16;
inline constexpr DType int32 = DType::int32;
inline constexpr DType int64 = DType::int64;
inline constexpr DType uint8 = DType::uint8;
inline constexpr DType uint16 = DType::uint16;
inline constexpr DType uint32 = DType::uint32;
inline constexpr DType uint64 = DType::uint64;
inline constexpr DType bfloat16 = DType::bfloat16;
inline constexpr DType float16 = DType::float16;
inline constexpr DType float32 = DType::float32;
inline constexpr DType float64 = DType::float64;

// bfloat16 storage: the top 16 bits of an IEEE float32. Conversion rounds to nearest even.
struct bfloat16_t {
  uint16_t bits = 0;
  bfloat16_t() = default;
  explicit bfloat16_t(float f) : bits(from_float(f)) {}
  explicit operator float() const {
    uint32_t u = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  static uint16_t from_float(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return uint16_t(u >> 16);
  }
  static bfloat16_t from_bits(uint16_t b) {
    bfloat16_t h;
    h.bits = b;
    return h;
  }
};

// IEEE binary16 storage. Conversion rounds to nearest even, with subnormals and inf/nan.
struct float16_t {
  uint16_t bits = 0;
  float16_t() = default;
  explicit float16_t(float f) : bits(from_float(f)) {}
  explicit operator float() const { return to_float(bits); }
  static uint16_t from_float(float f);
  static float to_float(uint16_t h);
  static float16_t from_bits(uint16_t b) {
    float16_t h;
    h.bits = b;
    return h;
  }
};

// Static facts about each dtype.
int itemsize(DType t);
std::string_view dtype_name(DType t);   // NumPy name: "float32", "bool", "bfloat16"
std::string_view dtype_short(DType t);  // jaxpr name: "f32", "bool", "bf16", "i32", "u8"
bool is_floating(DType t);
bool is_integer(DType t);  // signed or unsigned, not bool
bool is_signed_integer(DType t);
bool is_unsigned_integer(DType t);
bool is_bool(DType t);
DType dtype_from_name(std::string_view name);  // throws TypeError for unknown names

// JAX's type promotion (jnp.promote_types over the lattice, weak types included).
// The result is canonical: 64-bit types become 32-bit unless x64 is enabled.
DType promote_types(DType a, DType b);
// Promotion where either side may be weakly typed (a C++ scalar); returns the result dtype and
// whether the result is still weak.
struct PromotedType {
  DType dtype;
  bool weak;
};
PromotedType promote_weak(DType a, bool a_weak, DType b, bool b_weak);
// 64-bit types map to 32-bit ones unless config::x64_enabled().
DType canonicalize_dtype(DType t);
// JAX's default types (respect x64): int32/float32, or int64/float64 with x64.
DType default_int_dtype();
DType default_float_dtype();

// Maps a C++ element type to its DType (any integer type by size and signedness).
template <class T>
constexpr DType dtype_of_type() {
  if constexpr (std::is_same_v<T, bool>)
    return DType::bool_;
  else if constexpr (std::is_same_v<T, bfloat16_t>)
    return DType::bfloat16;
  else if constexpr (std::is_same_v<T, float16_t>)
    return DType::float16;
  else if constexpr (std::is_same_v<T, float>)
    return DType::float32;
  else if constexpr (std::is_same_v<T, double>)
    return DType::float64;
  else {
    static_assert(std::is_integral_v<T>, "no spmd dtype for this C++ type");
    constexpr bool s = std::is_signed_v<T>;
    if constexpr (sizeof(T) == 1)
      return s ? DType::int8 : DType::uint8;
    else if constexpr (sizeof(T) == 2)
      return s ? DType::int16 : DType::uint16;
    else if constexpr (sizeof(T) == 4)
      return s ? DType::int32 : DType::uint32;
    else
      return s ? DType::int64 : DType::uint64;
  }
}
template <class T>
struct dtype_of {
  static constexpr DType value = dtype_of_type<T>();
};
template <class T>
inline constexpr DType dtype_of_v = dtype_of_type<T>();

// Calls f(T{}) with T the C++ element type of `t` (bfloat16_t/float16_t for the 16-bit floats).
template <class F>
decltype(auto) dispatch_dtype(DType t, F&& f) {
  switch (t) {
    case DType::bool_:
      return f(bool{});
    case DType::int8:
      return f(int8_t{});
    case DType::int16:
      return f(int16_t{});
    case DType::int32:
      return f(int32_t{});
    case DType::int64:
      return f(int64_t{});
    case DType::uint8:
      return f(uint8_t{});
    case DType::uint16:
      return f(uint16_t{});
    case DType::uint32:
      return f(uint32_t{});
    case DType::uint64:
      return f(uint64_t{});
    case DType::bfloat16:
      return f(bfloat16_t{});
    case DType::float16:
      return f(float16_t{});
    case DType::float32:
      return f(float{});
    case DType::float64:
      return f(double{});
  }
  return f(float{});
}

}  // namespace spmd

// DType facts and JAX's type-promotion lattice.
#include <spmd/config.h>
#include <spmd/dtype.h>
#include <spmd/error.h>

#include <array>
#include <bit>
#include <string>

namespace spmd {
namespace {

struct DTypeInfo {
  std::string_view name;
  std::string_view short_name;
  int itemsize;
};

constexpr std::array<DTypeInfo, kNumDTypes> kInfo = {{
    {"bool", "bool", 1},
    {"int8", "i8", 1},
    {"int16", "i16", 2},
    {"int32", "i32", 4},
    {"int64", "i64", 8},
    {"uint8", "u8", 1},
    {"uint16", "u16", 2},
    {"uint32", "u32", 4},
    {"uint64", "u64", 8},
    {"bfloat16", "bf16", 2},
    {"float16", "f16", 2},
    {"float32", "f32", 4},
    {"float64", "f64", 8},
}};

const DTypeInfo& info(DType t) {
  return kInfo[size_t(t)];
}

// Lattice nodes: the 13 dtypes, then the weak (Python-scalar) int and float types.
constexpr int kWeakInt = kNumDTypes;
constexpr int kWeakFloat = kNumDTypes + 1;
constexpr int kNodes = kNumDTypes + 2;
using NodeSet = uint32_t;

int node(DType t) {
  return int(t);
}

// Direct successors in JAX's promotion lattice.
NodeSet successors(int n) {
  auto bit = [](auto... ts) { return ((NodeSet(1) << int(ts)) | ...); };
  switch (n) {
    case int(DType::bool_):
      return NodeSet(1) << kWeakInt;
    case kWeakInt:
      return bit(DType::uint8, DType::int8);
    case int(DType::uint8):
      return bit(DType::int16, DType::uint16);
    case int(DType::uint16):
      return bit(DType::int32, DType::uint32);
    case int(DType::uint32):
      return bit(DType::int64, DType::uint64);
    case int(DType::uint64):
      return NodeSet(1) << kWeakFloat;
    case int(DType::int8):
      return bit(DType::int16);
    case int(DType::int16):
      return bit(DType::int32);
    case int(DType::int32):
      return bit(DType::int64);
    case int(DType::int64):
      return NodeSet(1) << kWeakFloat;
    case kWeakFloat:
      return bit(DType::bfloat16, DType::float16);
    case int(DType::bfloat16):
      return bit(DType::float32);
    case int(DType::float16):
      return bit(DType::float32);
    case int(DType::float32):
      return bit(DType::float64);
    default:
      return 0;
  }
}

// Each node's upper set (itself and everything it promotes to).
std::array<NodeSet, kNodes> compute_upper_sets() {
  std::array<NodeSet, kNodes> up{};
  for (int n = 0; n < kNodes; ++n) {
    NodeSet set = NodeSet(1) << n, frontier = set;
    while (frontier) {
      NodeSet next = 0;
      for (int m = 0; m < kNodes; ++m)
        if (frontier & (NodeSet(1) << m)) next |= successors(m);
      frontier = next & ~set;
      set |= next;
    }
    up[size_t(n)] = set;
  }
  return up;
}

int least_upper_bound(int a, int b) {
  static const auto up = compute_upper_sets();
  NodeSet common = up[size_t(a)] & up[size_t(b)];
  for (int n = 0; n < kNodes; ++n)
    if ((common & (NodeSet(1) << n)) && up[size_t(n)] == common) return n;
  return int(DType::float64);
}

}  // namespace

int itemsize(DType t) {
  return info(t).itemsize;
}
std::string_view dtype_name(DType t) {
  return info(t).name;
}
std::string_view dtype_short(DType t) {
  return info(t).short_name;
}
bool is_bool(DType t) {
  return t == DType::bool_;
}
bool is_signed_integer(DType t) {
  return t >= DType::int8 && t <= DType::int64;
}
bool is_unsigned_integer(DType t) {
  return t >= DType::uint8 && t <= DType::uint64;
}
bool is_integer(DType t) {
  return is_signed_integer(t) || is_unsigned_integer(t);
}
bool is_floating(DType t) {
  return t >= DType::bfloat16;
}

DType dtype_from_name(std::string_view name) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (kInfo[size_t(i)].name == name || kInfo[size_t(i)].short_name == name) return DType(i);
  if (name == "bool_") return DType::bool_;
  throw TypeError("[dtype] unknown dtype name '" + std::string(name) + "'");
}

DType canonicalize_dtype(DType t) {
  if (config::x64_enabled()) return t;
  switch (t) {
    case DType::int64:
      return DType::int32;
    case DType::uint64:
      return DType::uint32;
    case DType::float64:
      return DType::float32;
    default:
      return t;
  }
}

DType default_int_dtype() {
  return config::x64_enabled() ? DType::int64 : DType::int32;
}
DType default_float_dtype() {
  return config::x64_enabled() ? DType::float64 : DType::float32;
}

PromotedType promote_weak(DType a, bool a_weak, DType b, bool b_weak) {
  auto to_node = [](DType t, bool weak) {
    if (!weak || is_bool(t)) return node(t);
    return is_floating(t) ? kWeakFloat : kWeakInt;
  };
  int n = least_upper_bound(to_node(a, a_weak), to_node(b, b_weak));
  if (n == kWeakInt) return {default_int_dtype(), true};
  if (n == kWeakFloat) return {default_float_dtype(), true};
  return {canonicalize_dtype(DType(n)), false};
}

DType promote_types(DType a, DType b) {
  return promote_weak(a, false, b, false).dtype;
}

uint16_t float16_t::from_float(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));  // NaN
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to inf (or is inf)
  if (abs < 0x38800000u) {
    // Subnormal or zero in float16: scale into the integer range and round to nearest even.
    float scaled = std::bit_cast<float>(abs) * 16777216.0f;  // 2^24: one unit = 2^-24
    uint32_t q = uint32_t(scaled);
    float rem = scaled - float(q);
    if (rem > 0.5f || (rem == 0.5f && (q & 1u))) ++q;
    return uint16_t(sign | q);
  }
  uint32_t mant_odd = (abs >> 13) & 1u;
  abs += 0x0fffu + mant_odd;  // round to nearest even at bit 13
  abs -= (127u - 15u) << 23;
  return uint16_t(sign | (abs >> 13));
}

float float16_t::to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    float v = float(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

}  // namespace spmd

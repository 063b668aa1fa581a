// Integer arithmetic that wraps modulo 2^bits, as XLA defines it for every integer type. The
// kernels' integer add, subtract, multiply and negate go through these; floating types pass
// through to the plain operators.
#pragma once

#include <type_traits>

namespace spmd::cpu {

// The unsigned type the arithmetic runs in: unsigned arithmetic wraps, and types narrower than
// unsigned int are widened to it, since they would otherwise promote to (signed) int, where
// 65535 * 65535 overflows.
template <class T>
using WrapWord =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <class T>
constexpr bool kWraps = std::is_integral_v<T> && !std::is_same_v<T, bool>;

template <class T>
T wrapping_add(T a, T b) {
  if constexpr (kWraps<T>)
    return T(WrapWord<T>(a) + WrapWord<T>(b));
  else
    return T(a + b);
}

template <class T>
T wrapping_sub(T a, T b) {
  if constexpr (kWraps<T>)
    return T(WrapWord<T>(a) - WrapWord<T>(b));
  else
    return T(a - b);
}

template <class T>
T wrapping_mul(T a, T b) {
  if constexpr (kWraps<T>)
    return T(WrapWord<T>(a) * WrapWord<T>(b));
  else
    return T(a * b);
}

// -INT_MIN is INT_MIN, as in XLA.
template <class T>
T wrapping_neg(T a) {
  if constexpr (kWraps<T>)
    return T(WrapWord<T>(0) - WrapWord<T>(a));
  else
    return T(-a);
}

}  // namespace spmd::cpu

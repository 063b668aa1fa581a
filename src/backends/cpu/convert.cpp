// Element type conversion kernels.
#include "backends/cpu/convert.h"

#include "backends/cpu/parallel.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace spmd::cpu {
namespace {

template <class T>
using Compute =
    std::conditional_t<std::is_same_v<T, bfloat16_t> || std::is_same_v<T, float16_t>, float, T>;

// v rounded to float with round-to-odd, so a second rounding to a 16-bit type is correct.
inline float round_to_odd_float(double v) {
  float f = float(v);
  double err = v - double(f);
  if (err != 0 && std::isfinite(v)) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    if ((bits & 1u) == 0) f = std::nextafter(f, err > 0 ? INFINITY : -INFINITY);
  }
  return f;
}

template <class To, class From>
To convert_one(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr ((std::is_same_v<From, bfloat16_t> ||
                        std::is_same_v<From, float16_t>)&&std::is_same_v<To, bool>) {
    return (v.bits & 0x7fffu) != 0;  // tested on the bits: subnormals are true, as in XLA
  } else if constexpr (std::is_same_v<From, bfloat16_t> || std::is_same_v<From, float16_t>) {
    return convert_one<To>(float(v));
  } else if constexpr (std::is_same_v<To, bfloat16_t> && std::is_floating_point_v<From>) {
    // bfloat16 shares float32's exponent range: its subnormals are float32 subnormals, which
    // XLA:CPU flushes to zero.
    float f = convert_one<float>(v);
    if (std::fpclassify(f) == FP_SUBNORMAL) return To(std::copysign(0.0f, f));
    if constexpr (std::is_same_v<From, double>) return To(round_to_odd_float(v));
    return To(f);
  } else if constexpr (std::is_same_v<To, bfloat16_t> || std::is_same_v<To, float16_t>) {
    if constexpr (std::is_same_v<From, double>) {
      return To(round_to_odd_float(v));  // one rounding from double, not two
    } else {
      return To(float(v));
    }
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if (std::isnan(v)) return To(0);
    if (v <= From(std::numeric_limits<To>::min())) return std::numeric_limits<To>::min();
    if (v >= From(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return To(v);
  } else {
    return To(v);
  }
}

template <class To, class From>
void convert_typed(const From* in, To* out, int64_t n) {
  parallel_for(n, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[i] = convert_one<To>(in[i]);
  });
}

}  // namespace

void convert(const void* in, DType from, void* out, DType to, int64_t n) {
  // An empty std::vector's data() may be null, and memcpy with a null pointer is undefined even
  // for zero bytes.
  if (n == 0) return;
  if (from == to) {
    if (out != in) std::memcpy(out, in, size_t(n) * size_t(itemsize(from)));
    return;
  }
  dispatch_dtype(from, [&](auto f) {
    using From = decltype(f);
    dispatch_dtype(to, [&](auto t) {
      using To = decltype(t);
      convert_typed(static_cast<const From*>(in), static_cast<To*>(out), n);
    });
  });
}

double load_as_double(const void* in, DType t, int64_t index) {
  return dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    return double(Compute<T>(static_cast<const T*>(in)[index]));
  });
}

}  // namespace spmd::cpu

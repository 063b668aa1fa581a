#include "backends/cpu/reduce_precision.h"

#include "backends/cpu/parallel.h"

#include <stdexcept>

namespace spmd::cpu {
namespace {

constexpr int64_t kGrain = 1 << 15;

// The layout of a float type: its bits as the unsigned integer U.
template <class U>
struct Format {
  int exponent_bits;
  int mantissa_bits;
};

template <class U>
U reduce_one(U x, Format<U> src, int exponent_bits, int mantissa_bits) {
  constexpr int kBits = int(sizeof(U)) * 8;
  const U exp_mask = U((U(1) << src.exponent_bits) - 1) << src.mantissa_bits;
  const U mant_mask = U((U(1) << src.mantissa_bits) - 1);
  const bool is_nan = (x & exp_mask) == exp_mask && (x & mant_mask) != 0;
  const U original = x;
  if (mantissa_bits < src.mantissa_bits) {
    // Round to nearest, ties to even: add 0111… plus the last kept bit, then truncate. A carry
    // into the exponent is right: the kept mantissa is then zero and the exponent one higher.
    const int dropped = src.mantissa_bits - mantissa_bits;
    const U last_kept = U(1) << dropped;
    const U bias = U((last_kept >> 1) - 1) + U((x & last_kept) >> dropped);
    x = U(U(x + bias) & U(~U(last_kept - 1)));
  }
  if (exponent_bits < src.exponent_bits) {
    const U sign = U(x & (U(1) << (kBits - 1)));
    const U bias = (U(1) << (src.exponent_bits - 1)) - 1;
    const U reduced_bias = (U(1) << (exponent_bits - 1)) - 1;
    const U max_exponent = U(bias + reduced_bias) << src.mantissa_bits;
    const U min_exponent = U(bias - reduced_bias) << src.mantissa_bits;
    const U exponent = x & exp_mask;
    if (exponent > max_exponent)
      x = sign | exp_mask;
    else if (exponent <= min_exponent)
      x = sign;
  }
  // The exponent rules would turn NaNs into infinities, and rounding could carry a NaN's
  // mantissa into a zero: NaNs pass unchanged, as on JAX's CPU backend.
  return is_nan ? original : x;
}

template <class U>
void run(const void* in, void* out, int64_t n, Format<U> src, int exponent_bits,
         int mantissa_bits) {
  const U* x = static_cast<const U*>(in);
  U* y = static_cast<U*>(out);
  parallel_for(n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      y[i] = reduce_one(x[i], src, exponent_bits, mantissa_bits);
  });
}

}  // namespace

void reduce_precision(DType t, const void* in, void* out, int64_t n, int exponent_bits,
                      int mantissa_bits) {
  switch (t) {
    case DType::float16:
      return run<uint16_t>(in, out, n, {5, 10}, exponent_bits, mantissa_bits);
    case DType::bfloat16:
      return run<uint16_t>(in, out, n, {8, 7}, exponent_bits, mantissa_bits);
    case DType::float32:
      return run<uint32_t>(in, out, n, {8, 23}, exponent_bits, mantissa_bits);
    case DType::float64:
      return run<uint64_t>(in, out, n, {11, 52}, exponent_bits, mantissa_bits);
    default:
      throw std::logic_error("reduce_precision of a non-float dtype");
  }
}

}  // namespace spmd::cpu

// Vectorised unary math on contiguous buffers: per-target loops over the ops of
// unary_math-inl.h, runtime SIMD dispatch (Highway), 16-bit floats converted in blocks, and the
// split of large buffers across threads.

// Multiplies and adds fuse only where the code says MulAdd: erf_inv reproduces XLA's rounding
// step by step, and GCC would otherwise contract a*b + c on FMA targets.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "backends/cpu/unary_math.h"

#include <spmd/error.h>

#include "backends/cpu/parallel.h"

// SSSE3-only CPUs fall back to the portable target; skipping it keeps the build short.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS HWY_SSSE3
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/unary_math.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "backends/cpu/unary_math-inl.h"

#include <algorithm>
#include <cstring>
#include <string>

HWY_BEFORE_NAMESPACE();
namespace spmd::cpu::HWY_NAMESPACE {

// Full vectors straight from memory; the tail through a zero-padded buffer.
template <class Op, class D>
HWY_INLINE void RunNative(D d, const TFromD<D>* in, TFromD<D>* out, size_t n) {
  using T = TFromD<D>;
  const auto apply = [d](Vec<D> x) {
    Vec<D> y = Op::Apply(d, x);
    if constexpr (Op::kKeepZero) y = hn::IfThenElse(hn::Eq(x, hn::Zero(d)), x, y);
    return hn::IfThenElse(hn::IsNaN(x), x, y);
  };
  const size_t lanes = hn::Lanes(d);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(apply(hn::LoadU(d, in + i)), d, out + i);
  if (i == n) return;
  HWY_ALIGN T buf[HWY_MAX_BYTES / sizeof(T)] = {};
  std::memcpy(buf, in + i, (n - i) * sizeof(T));
  hn::Store(apply(hn::Load(d, buf)), d, buf);
  std::memcpy(out + i, buf, (n - i) * sizeof(T));
}

template <class Op>
constexpr bool KeepsInf() {
  if constexpr (requires { Op::kKeepInf; })
    return Op::kKeepInf;
  else
    return false;
}

// float32 computed in double: half as many floats per step as doubles fit in a vector.
template <class Op>
HWY_INLINE void RunF32ViaF64(const float* in, float* out, size_t n) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const auto apply = [dd, df](hn::Vec<decltype(df)> xf) {
    const auto x = hn::PromoteTo(dd, xf);
    auto y = Op::ApplyToF32(dd, x);
    if constexpr (Op::kKeepZero) y = hn::IfThenElse(hn::Eq(x, hn::Zero(dd)), x, y);
    const auto r = hn::DemoteTo(df, hn::IfThenElse(hn::IsNaN(x), x, y));
    if constexpr (KeepsInf<Op>()) return hn::IfThenElse(hn::IsInf(xf), xf, r);
    return r;
  };
  const size_t lanes = hn::Lanes(dd);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(apply(hn::LoadU(df, in + i)), df, out + i);
  if (i == n) return;
  HWY_ALIGN float buf[HWY_MAX_BYTES / sizeof(float)] = {};
  std::memcpy(buf, in + i, (n - i) * sizeof(float));
  hn::StoreU(apply(hn::LoadU(df, buf)), df, buf);
  std::memcpy(out + i, buf, (n - i) * sizeof(float));
}

template <class Op>
constexpr bool HasFastF32() {
  if constexpr (requires { Op::kFastF32; })
    return Op::kFastF32;
  else
    return false;
}

// Lanes of y outside `fast` recomputed in double (out of line: nearly every vector skips it).
template <class Op, class D, class M>
HWY_NOINLINE Vec<D> RecomputeSlowLanes(D df, const float* src, Vec<D> y, M fast) {
  HWY_ALIGN float slow[HWY_MAX_BYTES / sizeof(float)];
  RunF32ViaF64<Op>(src, slow, hn::Lanes(df));
  return hn::IfThenElse(fast, y, hn::Load(df, slow));
}

// float32 by Op::FastF32 where Op::FastF32Lanes holds, the other lanes in double: lane by lane,
// so that a result does not depend on its neighbours in the vector.
template <class Op>
HWY_INLINE void RunF32Fast(const float* in, float* out, size_t n) {
  const hn::ScalableTag<float> df;
  const auto apply = [df](const float* src, float* dst) {
    const auto x = hn::LoadU(df, src);
    auto y = Op::FastF32(df, x);
    if constexpr (Op::kKeepZero) y = hn::IfThenElse(hn::Eq(x, hn::Zero(df)), x, y);
    const auto fast = Op::FastF32Lanes(df, x);
    if (HWY_UNLIKELY(!hn::AllTrue(df, fast))) y = RecomputeSlowLanes<Op>(df, src, y, fast);
    hn::StoreU(y, df, dst);
  };
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) apply(in + i, out + i);
  if (i == n) return;
  HWY_ALIGN float buf[HWY_MAX_BYTES / sizeof(float)] = {};
  std::memcpy(buf, in + i, (n - i) * sizeof(float));
  apply(buf, buf);
  std::memcpy(out + i, buf, (n - i) * sizeof(float));
}

template <class Op>
HWY_INLINE void RunF32(const float* in, float* out, size_t n) {
  if constexpr (HasFastF32<Op>())
    RunF32Fast<Op>(in, out, n);
  else if constexpr (Op::kViaF64)
    RunF32ViaF64<Op>(in, out, n);
  else
    RunNative<Op>(hn::ScalableTag<float>(), in, out, n);
}

template <class Op>
HWY_INLINE void RunF64(const double* in, double* out, size_t n) {
  RunNative<Op>(hn::ScalableTag<double>(), in, out, n);
}

// Calls run.template operator()<Op>() for the Op struct of `op`.
template <class Run>
HWY_INLINE void WithOp(UnaryMathOp op, Run&& run) {
  using O = UnaryMathOp;
  switch (op) {
    case O::exp:
      return run.template operator()<OpExp>();
    case O::exp2:
      return run.template operator()<OpExp2>();
    case O::expm1:
      return run.template operator()<OpExpm1>();
    case O::log:
      return run.template operator()<OpLog>();
    case O::log1p:
      return run.template operator()<OpLog1p>();
    case O::log2:
      return run.template operator()<OpLog2>();
    case O::log10:
      return run.template operator()<OpLog10>();
    case O::sin:
      return run.template operator()<OpSin>();
    case O::cos:
      return run.template operator()<OpCos>();
    case O::tan:
      return run.template operator()<OpTan>();
    case O::asin:
      return run.template operator()<OpAsin>();
    case O::acos:
      return run.template operator()<OpAcos>();
    case O::atan:
      return run.template operator()<OpAtan>();
    case O::sinh:
      return run.template operator()<OpSinh>();
    case O::cosh:
      return run.template operator()<OpCosh>();
    case O::tanh:
      return run.template operator()<OpTanh>();
    case O::asinh:
      return run.template operator()<OpAsinh>();
    case O::acosh:
      return run.template operator()<OpAcosh>();
    case O::atanh:
      return run.template operator()<OpAtanh>();
    case O::logistic:
      return run.template operator()<OpLogistic>();
    case O::erf:
      return run.template operator()<OpErf>();
    case O::erfc:
      return run.template operator()<OpErfc>();
    case O::erf_inv:
      return run.template operator()<OpErfInv>();
    case O::sqrt:
      return run.template operator()<OpSqrt>();
    case O::rsqrt:
      return run.template operator()<OpRsqrt>();
    case O::cbrt:
      return run.template operator()<OpCbrt>();
  }
}

void UnaryF32(UnaryMathOp op, const float* in, float* out, size_t n) {
  WithOp(op, [&]<class Op>() { RunF32<Op>(in, out, n); });
}

void UnaryF64(UnaryMathOp op, const double* in, double* out, size_t n) {
  WithOp(op, [&]<class Op>() { RunF64<Op>(in, out, n); });
}

// bfloat16 <-> float32 in vectors; narrowing rounds to nearest even and keeps NaNs quiet.
void Bf16ToF32(const uint16_t* in, float* out, size_t n) {
  const hn::ScalableTag<uint32_t> du32;
  const hn::Rebind<uint16_t, decltype(du32)> du16;
  const size_t lanes = hn::Lanes(du32);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto bits = hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, in + i)));
    hn::StoreU(hn::BitCast(hn::ScalableTag<float>(), bits), hn::ScalableTag<float>(), out + i);
  }
  for (; i < n; ++i) out[i] = float(bfloat16_t::from_bits(in[i]));
}

void F32ToBf16(const float* in, uint16_t* out, size_t n) {
  const hn::ScalableTag<uint32_t> du32;
  const hn::ScalableTag<int32_t> di32;
  const hn::Rebind<uint16_t, decltype(du32)> du16;
  const size_t lanes = hn::Lanes(du32);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto u = hn::LoadU(du32, reinterpret_cast<const uint32_t*>(in + i));
    const auto odd = hn::And(hn::ShiftRight<16>(u), hn::Set(du32, 1));
    const auto rounded = hn::Add(u, hn::Add(hn::Set(du32, 0x7fff), odd));
    const auto is_nan =
        hn::Gt(hn::BitCast(di32, hn::And(u, hn::Set(du32, 0x7fffffff))), hn::Set(di32, 0x7f800000));
    const auto quiet = hn::Or(u, hn::Set(du32, 0x400000));
    const auto top =
        hn::ShiftRight<16>(hn::IfThenElse(hn::RebindMask(du32, is_nan), quiet, rounded));
    hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di32, top)), du16, out + i);
  }
  for (; i < n; ++i) out[i] = bfloat16_t(in[i]).bits;
}

// float16: F16C on AVX2 and better; elsewhere the scalar conversions of dtype.h.
void F16ToF32(const uint16_t* in, float* out, size_t n) {
  size_t i = 0;
#if HWY_TARGET <= HWY_AVX2 && HWY_ARCH_X86
  const hn::ScalableTag<float> df;
  const hn::Rebind<hwy::float16_t, decltype(df)> dh;
  for (; i + hn::Lanes(df) <= n; i += hn::Lanes(df))
    hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(in + i))),
               df, out + i);
#endif
  for (; i < n; ++i) out[i] = float16_t::to_float(in[i]);
}

void F32ToF16(const float* in, uint16_t* out, size_t n) {
  size_t i = 0;
#if HWY_TARGET <= HWY_AVX2 && HWY_ARCH_X86
  const hn::ScalableTag<float> df;
  const hn::Rebind<hwy::float16_t, decltype(df)> dh;
  for (; i + hn::Lanes(df) <= n; i += hn::Lanes(df))
    hn::StoreU(hn::DemoteTo(dh, hn::LoadU(df, in + i)), dh,
               reinterpret_cast<hwy::float16_t*>(out + i));
#endif
  for (; i < n; ++i) out[i] = float16_t::from_float(in[i]);
}

}  // namespace spmd::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace spmd::cpu {

HWY_EXPORT(UnaryF32);
HWY_EXPORT(UnaryF64);
HWY_EXPORT(Bf16ToF32);
HWY_EXPORT(F32ToBf16);
HWY_EXPORT(F16ToF32);
HWY_EXPORT(F32ToF16);

namespace {

constexpr int64_t kGrain = 1 << 15;
// 16-bit floats go through float32 in blocks that stay in L1.
constexpr size_t kHalfBlock = 1024;

void unary_half(UnaryMathOp op, bool bf16, const uint16_t* in, uint16_t* out, size_t n) {
  alignas(64) float buf[kHalfBlock];
  for (size_t i = 0; i < n; i += kHalfBlock) {
    const size_t m = std::min(kHalfBlock, n - i);
    if (bf16)
      HWY_DYNAMIC_DISPATCH(Bf16ToF32)(in + i, buf, m);
    else
      HWY_DYNAMIC_DISPATCH(F16ToF32)(in + i, buf, m);
    HWY_DYNAMIC_DISPATCH(UnaryF32)(op, buf, buf, m);
    if (bf16)
      HWY_DYNAMIC_DISPATCH(F32ToBf16)(buf, out + i, m);
    else
      HWY_DYNAMIC_DISPATCH(F32ToF16)(buf, out + i, m);
  }
}

void unary_range(UnaryMathOp op, DType t, const void* in, void* out, int64_t begin, int64_t end) {
  const size_t n = size_t(end - begin);
  switch (t) {
    case DType::float32:
      return HWY_DYNAMIC_DISPATCH(UnaryF32)(op, static_cast<const float*>(in) + begin,
                                            static_cast<float*>(out) + begin, n);
    case DType::float64:
      return HWY_DYNAMIC_DISPATCH(UnaryF64)(op, static_cast<const double*>(in) + begin,
                                            static_cast<double*>(out) + begin, n);
    case DType::bfloat16:
    case DType::float16:
      return unary_half(op, t == DType::bfloat16, static_cast<const uint16_t*>(in) + begin,
                        static_cast<uint16_t*>(out) + begin, n);
    default:
      throw TypeError("[unary_math] expected a floating dtype, got " + std::string(dtype_name(t)));
  }
}

}  // namespace

void unary_math(UnaryMathOp op, DType t, const void* in, void* out, int64_t n) {
  if (!is_floating(t)) unary_range(op, t, in, out, 0, 0);  // throws
  if (n <= 0) return;
  if (n <= kGrain) return unary_range(op, t, in, out, 0, n);
  parallel_for(n, kGrain, [&](int64_t b, int64_t e) { unary_range(op, t, in, out, b, e); });
}

// Measured over every 97th float32 of each domain (erf_inv: every float in [0.5, 1)), rounded
// up where the sweep came close; float32 ops computed in double round once (1 covers a rare
// double rounding). sin, cos and tan compute |x| <= 2^18 in float32 for speed, checked on every
// such float by tools/trig_f32_sweep.cpp: below 1 ulp of the exact result (at most 0.82, 0.81
// and 0.95), so at most 1 step from the rounded one. erf_inv is XLA's algorithm, whose
// -log1p(-x*x) loses digits near |x| = 1.
int unary_math_ulp_bound_f32(UnaryMathOp op) {
  using O = UnaryMathOp;
  switch (op) {
    case O::exp:
      return 1;
    case O::exp2:
      return 1;
    case O::expm1:
      return 4;
    case O::log:
      return 1;
    case O::log1p:
      return 3;
    case O::log2:
      return 2;
    case O::log10:
      return 2;
    case O::sin:
      return 1;
    case O::cos:
      return 1;
    case O::tan:
      return 1;
    case O::asin:
      return 3;
    case O::acos:
      return 2;
    case O::atan:
      return 3;
    case O::sinh:
      return 4;
    case O::cosh:
      return 3;
    case O::tanh:
      return 2;  // 1 measured on every float32 with fused multiply-add, 2 without
    case O::asinh:
      return 4;
    case O::acosh:
      return 4;
    case O::atanh:
      return 4;
    case O::logistic:
      return 3;
    case O::erf:
      return 1;
    case O::erfc:
      return 1;
    case O::erf_inv:
      return 65;
    case O::sqrt:
      return 0;
    case O::rsqrt:
      return 1;
    case O::cbrt:
      return 1;
  }
  return 0;
}

std::string_view unary_math_name(UnaryMathOp op) {
  static constexpr std::string_view kNames[] = {
      "exp",   "exp2",     "expm1", "log",  "log1p",   "log2", "log10", "sin",   "cos",
      "tan",   "asin",     "acos",  "atan", "sinh",    "cosh", "tanh",  "asinh", "acosh",
      "atanh", "logistic", "erf",   "erfc", "erf_inv", "sqrt", "rsqrt", "cbrt"};
  const size_t i = size_t(op);
  return i < std::size(kNames) ? kNames[i] : std::string_view("unknown");
}

}  // namespace spmd::cpu
#endif  // HWY_ONCE

// Per-target vector math for unary_math.cpp (re-included once per SIMD target by Highway's
// foreach_target). Each op is a struct with Apply(d, x) on a vector of float or double, and
// ApplyToF32(d, x) for kViaF64 ops, which compute float32 inputs in double and round once; kFastF32
// ops add a float32 kernel FastF32(d, x) for the lanes where FastF32Lanes(d, x) holds.
#if defined(SPMD_UNARY_MATH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SPMD_UNARY_MATH_INL_H_
#undef SPMD_UNARY_MATH_INL_H_
#else
#define SPMD_UNARY_MATH_INL_H_
#endif

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

HWY_BEFORE_NAMESPACE();
namespace spmd::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using hn::TFromD;
using hn::Vec;

template <class D>
HWY_INLINE Vec<D> PosInf(D d) {
  return hn::Set(d, std::numeric_limits<TFromD<D>>::infinity());
}
template <class D>
HWY_INLINE Vec<D> QNaN(D d) {
  return hn::Set(d, std::numeric_limits<TFromD<D>>::quiet_NaN());
}
template <class D>
HWY_INLINE Vec<D> K(D d, double c) {
  return hn::Set(d, static_cast<TFromD<D>>(c));
}
template <class T>
constexpr bool kF32 = sizeof(T) == 4;

// Horner's scheme with the coefficients from the highest power down.
template <class D, size_t N>
HWY_INLINE Vec<D> Horner(D d, Vec<D> x, const double (&c)[N]) {
  Vec<D> p = K(d, c[0]);
  for (size_t i = 1; i < N; ++i) p = hn::MulAdd(p, x, K(d, c[i]));
  return p;
}

// Lanes selected by `m` are recomputed by the scalar `f` (rare inputs: huge trig arguments).
template <class D, class M, class F>
HWY_NOINLINE Vec<D> PatchLanes(D d, Vec<D> x, Vec<D> y, M m, F f) {
  using T = TFromD<D>;
  HWY_ALIGN T xs[HWY_MAX_BYTES / sizeof(T)];
  HWY_ALIGN T ys[HWY_MAX_BYTES / sizeof(T)];
  HWY_ALIGN T ms[HWY_MAX_BYTES / sizeof(T)];
  hn::Store(x, d, xs);
  hn::Store(y, d, ys);
  hn::Store(hn::VecFromMask(d, m), d, ms);
  for (size_t i = 0; i < hn::Lanes(d); ++i) {
    std::conditional_t<kF32<T>, uint32_t, uint64_t> bits;
    std::memcpy(&bits, &ms[i], sizeof(T));
    if (bits != 0) ys[i] = static_cast<T>(f(xs[i]));
  }
  return hn::Load(d, ys);
}

// ---- exp family --------------------------------------------------------------------------------

// Highway's Exp is valid below ~88.7 (f32) / ~709 (f64); above, the exponent field would wrap.
template <class D>
HWY_INLINE Vec<D> ExpChecked(D d, Vec<D> x) {
  const Vec<D> max_arg = K(d, kF32<TFromD<D>> ? 88.8 : 709.8);
  return hn::IfThenElse(hn::Gt(x, max_arg), PosInf(d), hn::Exp(d, x));
}

// 2^k for integral k in [-2*bias, 2*bias], split in two factors so the product rounds once
// (gradual underflow) or overflows to inf.
template <class D>
HWY_INLINE Vec<D> ScaleByPow2(D d, Vec<D> y, Vec<D> k) {
  using T = TFromD<D>;
  const hn::RebindToSigned<D> di;
  constexpr int kMant = kF32<T> ? 23 : 52;
  const auto bias = hn::Set(di, kF32<T> ? 127 : 1023);
  const auto ki = hn::ConvertTo(di, k);
  const auto k1 = hn::ShiftRight<1>(ki);
  const auto k2 = hn::Sub(ki, k1);
  const Vec<D> s1 = hn::BitCast(d, hn::ShiftLeft<kMant>(hn::Add(k1, bias)));
  const Vec<D> s2 = hn::BitCast(d, hn::ShiftLeft<kMant>(hn::Add(k2, bias)));
  return hn::Mul(hn::Mul(y, s1), s2);
}

// 2^x = 2^k * 2^r with k = round(x) and |r| <= 1/2 exact; 2^r from its Taylor series (the
// truncation error is below 0.1 ulp).
template <class D>
HWY_INLINE Vec<D> Exp2Split(D d, Vec<D> x) {
  using T = TFromD<D>;
  const Vec<D> xc =
      hn::Min(hn::Max(x, K(d, kF32<T> ? -160.0 : -1100.0)), K(d, kF32<T> ? 130.0 : 1030.0));
  const Vec<D> k = hn::Round(xc);
  const Vec<D> r = hn::Sub(xc, k);
  Vec<D> p;
  if constexpr (kF32<T>) {
    static constexpr double c[] = {1.5252733804059841e-05, 1.5403530393381606e-04,
                                   1.3333558146428441e-03, 9.6181291076284772e-03,
                                   5.5504108664821576e-02, 2.4022650695910069e-01,
                                   6.9314718055994529e-01, 1.0};
    p = Horner(d, r, c);
  } else {
    static constexpr double c[] = {
        6.778726354822545e-14,  1.3691488853904128e-12, 2.5678435993488206e-11,
        4.4455382718708116e-10, 7.054911620801123e-09,  1.01780860092397e-07,
        1.321548679014431e-06,  1.5252733804059841e-05, 0.0001540353039338161,
        0.0013333558146428443,  0.009618129107628477,   0.05550410866482158,
        0.24022650695910072,    0.6931471805599453,     1.0};
    p = Horner(d, r, c);
  }
  return ScaleByPow2(d, p, k);
}

// ---- log family --------------------------------------------------------------------------------

// x = 2^e * y with y in [sqrt(2)/2, sqrt(2)); returns e and log(y). Mirrors Highway's Log but
// keeps the two parts apart so log2/log10 can add the exponent exactly.
template <class D>
struct LogParts {
  Vec<D> e;
  Vec<D> log_y;
};
template <class D>
HWY_INLINE LogParts<D> SplitLog(D d, Vec<D> x) {
  using T = TFromD<D>;
  using TI = hwy::MakeSigned<T>;
  const hn::Rebind<TI, D> di;
  constexpr bool f32 = kF32<T>;
  const auto kMagic = hn::Set(di, f32 ? TI(0x3F3504F3L) : TI(0x3FE6A09E00000000LL));
  const auto kExpMask = hn::Set(di, f32 ? TI(0x3F800000L) : TI(0x3FF0000000000000LL));
  const auto kManMask = hn::Set(di, f32 ? TI(0x7FFFFFL) : TI(0xFFFFF00000000LL));
  const auto kLowerBits = hn::Set(di, f32 ? TI(0) : TI(0xFFFFFFFFLL));
  const auto kBias = hn::Set(di, f32 ? TI(0x7F) : TI(0x3FF));

  const auto subnormal = hn::Lt(x, K(d, f32 ? 1.17549435e-38 : 2.2250738585072014e-308));
  x = hn::IfThenElse(subnormal, hn::Mul(x, K(d, f32 ? 33554432.0 : 18014398509481984.0)), x);
  const auto exp_bits = hn::Add(hn::BitCast(di, x), hn::Sub(kExpMask, kMagic));
  const auto e_int = hn::Sub(
      hn::BitCast(
          di, hn::ShiftRight < f32 ? 23 : 52 > (hn::BitCast(hn::RebindToUnsigned<D>(), exp_bits))),
      kBias);
  Vec<D> e = hn::ConvertTo(d, e_int);
  e = hn::Sub(e, hn::IfThenElseZero(subnormal, K(d, f32 ? 25.0 : 54.0)));
  const Vec<D> y = hn::Or(hn::And(x, hn::BitCast(d, kLowerBits)),
                          hn::BitCast(d, hn::Add(hn::And(exp_bits, kManMask), kMagic)));
  const Vec<D> ym1 = hn::Sub(y, K(d, 1.0));
  const Vec<D> z = hn::Div(ym1, hn::Add(y, K(d, 1.0)));
  hn::impl::LogImpl<T> impl;
  const Vec<D> log_y = hn::NegMulAdd(z, hn::Sub(ym1, impl.LogPoly(d, z)), ym1);
  return {e, log_y};
}

// log(0) = -inf, log(x < 0) = nan, log(inf) = inf.
template <class D>
HWY_INLINE Vec<D> LogSpecial(D d, Vec<D> x, Vec<D> y) {
  y = hn::IfThenElse(hn::Eq(x, hn::Zero(d)), hn::Neg(PosInf(d)), y);
  y = hn::IfThenElse(hn::Lt(x, hn::Zero(d)), QNaN(d), y);
  return hn::IfThenElse(hn::Eq(x, PosInf(d)), x, y);
}

template <class D>
HWY_INLINE Vec<D> LogE(D d, Vec<D> x) {
  const LogParts<D> p = SplitLog(d, x);
  const Vec<D> ln2_hi = K(d, kF32<TFromD<D>> ? 0.693145751953125 : 0.693147180369123816490);
  const Vec<D> ln2_lo = K(d, kF32<TFromD<D>> ? 1.4286068203094173e-06 : 1.90821492927058770002e-10);
  const Vec<D> y = hn::MulAdd(p.e, ln2_hi, hn::MulAdd(p.e, ln2_lo, p.log_y));
  return LogSpecial(d, x, y);
}

template <class D>
HWY_INLINE Vec<D> Log2Exact(D d, Vec<D> x) {
  const LogParts<D> p = SplitLog(d, x);
  const Vec<D> y = hn::MulAdd(p.log_y, K(d, 1.4426950408889634074), p.e);
  return LogSpecial(d, x, y);
}

template <class D>
HWY_INLINE Vec<D> Log10Split(D d, Vec<D> x) {
  const LogParts<D> p = SplitLog(d, x);
  // log10(2) split so that e * hi is exact for every exponent e.
  const Vec<D> hi = K(d, kF32<TFromD<D>> ? 0.301025390625 : 0.3010299956640665);
  const Vec<D> lo = K(d, kF32<TFromD<D>> ? 4.605038981195214e-06 : -8.532344317057107e-14);
  const Vec<D> tail = hn::MulAdd(p.log_y, K(d, 0.43429448190325182765), hn::Mul(p.e, lo));
  return LogSpecial(d, x, hn::MulAdd(p.e, hi, tail));
}

template <class D>
HWY_INLINE Vec<D> Log1pChecked(D d, Vec<D> x) {
  Vec<D> y = hn::Log1p(d, x);
  const Vec<D> minus_one = K(d, -1.0);
  y = hn::IfThenElse(hn::Eq(x, minus_one), hn::Neg(PosInf(d)), y);
  y = hn::IfThenElse(hn::Lt(x, minus_one), QNaN(d), y);
  return hn::IfThenElse(hn::Eq(x, PosInf(d)), x, y);
}

// ---- trigonometric in double -------------------------------------------------------------------

// x = k * pi/2 + (r + r_lo), Cody-Waite with pi/2 in three 33-bit parts: k * part is exact for
// |k| < 2^20, so the reduction is accurate for |x| < kTrigMaxArg; larger |x| go to libm.
inline constexpr double kTrigMaxArg = 823549.0;
template <class D>
struct Reduced {
  Vec<D> r, r_lo;
  hn::Vec<hn::RebindToSigned<D>> q;
};
template <class D>
HWY_INLINE Reduced<D> ReducePiOver2(D d, Vec<D> x) {
  const hn::RebindToSigned<D> di;
  const Vec<D> magic = K(d, 6755399441055744.0);  // 1.5 * 2^52: the low bits hold round(x)
  const Vec<D> kd = hn::MulAdd(x, K(d, 0.63661977236758134308), magic);
  const Vec<D> k = hn::Sub(kd, magic);
  const Vec<D> r1 = hn::NegMulAdd(k, K(d, 1.57079632673412561417e+00), x);
  const Vec<D> w2 = hn::Mul(k, K(d, 6.07710050630396597660e-11));
  const Vec<D> r2 = hn::Sub(r1, w2);
  Vec<D> lo = hn::Sub(hn::Sub(r1, r2), w2);
  lo = hn::NegMulAdd(k, K(d, 2.02226624871116645580e-21), lo);
  const Vec<D> r = hn::Add(r2, lo);
  return {r, hn::Add(hn::Sub(r2, r), lo), hn::BitCast(di, kd)};
}

// sin and cos on |r| <= pi/4 (+ tail), fdlibm's kernel polynomials.
template <class D>
HWY_INLINE Vec<D> SinKernel(D d, Vec<D> r, Vec<D> r_lo) {
  static constexpr double s[] = {1.58969099521155010221e-10, -2.50507602534068634195e-08,
                                 2.75573137070700676789e-06, -1.98412698298579493134e-04,
                                 8.33333333332248946124e-03};
  const Vec<D> z = hn::Mul(r, r);
  const Vec<D> v = hn::Mul(z, r);
  const Vec<D> p = Horner(d, z, s);
  const Vec<D> t = hn::MulSub(z, hn::NegMulAdd(v, p, hn::Mul(K(d, 0.5), r_lo)), r_lo);
  return hn::Sub(r, hn::NegMulAdd(v, K(d, -1.66666666666666324348e-01), t));
}
template <class D>
HWY_INLINE Vec<D> CosKernel(D d, Vec<D> r, Vec<D> r_lo) {
  static constexpr double c[] = {-1.13596475577881948265e-11, 2.08757232129817482790e-09,
                                 -2.75573143513906633035e-07, 2.48015872894767294178e-05,
                                 -1.38888888888741095749e-03, 4.16666666666666019037e-02};
  const Vec<D> z = hn::Mul(r, r);
  const Vec<D> p = hn::Mul(z, Horner(d, z, c));
  const Vec<D> hz = hn::Mul(K(d, 0.5), z);
  const Vec<D> w = hn::Sub(K(d, 1.0), hz);
  const Vec<D> tail =
      hn::Add(hn::Sub(hn::Sub(K(d, 1.0), w), hz), hn::MulSub(z, p, hn::Mul(r, r_lo)));
  return hn::Add(w, tail);
}

enum class Trig { kSin, kCos, kTan };

// Lanes whose quadrant number q has `bit` set.
template <class D>
HWY_INLINE auto QuadrantBit(D d, hn::Vec<hn::RebindToSigned<D>> q, int bit) {
  const hn::RebindToSigned<D> di;
  return hn::RebindMask(d, hn::Ne(hn::And(q, hn::Set(di, bit)), hn::Zero(di)));
}

// f(x) for x = q * pi/2 + r from s = sin(r) and c = cos(r).
template <Trig kind, class D>
HWY_INLINE Vec<D> FromQuadrant(D d, hn::Vec<hn::RebindToSigned<D>> q, Vec<D> s, Vec<D> c) {
  const auto odd = QuadrantBit(d, q, 1);
  if constexpr (kind == Trig::kTan)
    return hn::Div(hn::IfThenElse(odd, hn::Neg(c), s), hn::IfThenElse(odd, s, c));
  const auto q2 = QuadrantBit(d, q, 2);
  Vec<D> y = kind == Trig::kSin ? hn::IfThenElse(odd, c, s) : hn::IfThenElse(odd, hn::Neg(s), c);
  return hn::IfThenElse(q2, hn::Neg(y), y);
}

template <Trig kind, class D>
HWY_INLINE Vec<D> TrigF64(D d, Vec<D> x) {
  const Reduced<D> red = ReducePiOver2(d, x);
  const Vec<D> s = SinKernel(d, red.r, red.r_lo);
  const Vec<D> c = CosKernel(d, red.r, red.r_lo);
  const Vec<D> y = FromQuadrant<kind>(d, red.q, s, c);
  const auto big = hn::Not(hn::Le(hn::Abs(x), K(d, kTrigMaxArg)));
  if (HWY_LIKELY(hn::AllFalse(d, big))) return y;
  return PatchLanes(d, x, y, big, [](double v) {
    if constexpr (kind == Trig::kSin) return std::sin(v);
    if constexpr (kind == Trig::kCos) return std::cos(v);
    return std::tan(v);
  });
}

// ---- trigonometric in float32 (needs fused multiply-adds) --------------------------------------

// Twice as many lanes per vector as TrigF64, for float32 inputs up to kTrigF32MaxArg; callers send
// larger ones, inf and nan to TrigF64. Every float up to 2^18 is within 0.95 ulp of the exact
// result. Beyond, round(x * float(2/pi)) lets |r| pass pi/4 by up to |x| * 2^-24 and the
// polynomials (fitted on [-pi/4, pi/4]) pass 1 ulp: 1.06 ulp for sin near 2^20, 1.08 for tan.
inline constexpr float kTrigF32MaxArg = 262144.0f;

// x = k * pi/2 + (r + r_lo) with pi/2 = P1 + P2 + P3 in floats: r1 = x - k * P1 is exact (a
// multiple of 2^-24 below 1 in magnitude), k * P2 is split exactly by a fused multiply-add and
// subtracted by Fast2Sum (exact as r1 is a multiple of ulp(k * P2)); k * P3 only shifts r_lo.
template <class D>
HWY_INLINE Reduced<D> ReducePiOver2F32(D d, Vec<D> x) {
  const hn::RebindToSigned<D> di;
  const Vec<D> p2 = K(d, -0x1.777a5cp-25);
  const Vec<D> magic = K(d, 12582912.0);  // 1.5 * 2^23: the low bits hold round(x * 2/pi)
  const Vec<D> kd = hn::MulAdd(x, K(d, 0x1.45f306p-1), magic);
  const Vec<D> k = hn::Sub(kd, magic);
  const Vec<D> r1 = hn::NegMulAdd(k, K(d, 0x1.921fb6p+0), x);
  const Vec<D> w = hn::Mul(k, p2);
  const Vec<D> w_lo = hn::MulSub(k, p2, w);
  const Vec<D> r2 = hn::Sub(r1, w);
  const Vec<D> lo =
      hn::Sub(hn::Sub(hn::Sub(r1, r2), w), hn::MulAdd(k, K(d, -0x1.ee59dap-50), w_lo));
  const Vec<D> r = hn::Add(r2, lo);
  return {r, hn::Add(hn::Sub(r2, r), lo), hn::BitCast(di, kd)};
}

// hi + lo, unrounded: tan divides the two sums and corrects for the rounding of each.
template <class D>
struct Sum2 {
  Vec<D> hi, lo;
};
template <class D>
HWY_INLINE Vec<D> Rounded(Sum2<D> v) {
  return hn::Add(v.hi, v.lo);
}

// sin(r + r_lo) on |r| <= pi/4 with the minimax coefficients of Cephes' sinf (S. L. Moshier,
// Cephes Math Library 2.2); r_lo enters through its first-order term r_lo * cos(r).
template <class D>
HWY_INLINE Sum2<D> SinKernelF32(D d, Vec<D> r, Vec<D> r_lo) {
  static constexpr double s[] = {-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1};
  const Vec<D> z = hn::Mul(r, r);
  const Vec<D> t = hn::NegMulAdd(hn::Mul(K(d, 0.5), z), r_lo, r_lo);
  return {r, hn::MulAdd(hn::Mul(z, r), Horner(d, z, s), t)};
}

// cos(r + r_lo) = 1 - r^2/2 + r^4 * Q(r^2) - r * r_lo, Q from Cephes' cosf. 1 - r^2/2 is kept as
// w + its rounding error, and r^2 as z + z_lo: the two errors reach 1/2 and 1/4 ulp of the result.
template <class D>
HWY_INLINE Sum2<D> CosKernelF32(D d, Vec<D> r, Vec<D> r_lo) {
  static constexpr double c[] = {2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2};
  const Vec<D> z = hn::Mul(r, r);
  const Vec<D> z_lo = hn::MulSub(r, r, z);
  const Vec<D> hz = hn::Mul(K(d, 0.5), z);
  const Vec<D> w = hn::Sub(K(d, 1.0), hz);
  const Vec<D> small = hn::MulAdd(r, r_lo, hn::Mul(K(d, 0.5), z_lo));
  const Vec<D> tail = hn::Add(hn::Sub(hn::Sub(K(d, 1.0), w), hz),
                              hn::MulSub(hn::Mul(z, z), Horner(d, z, c), small));
  return {w, tail};
}

// n / d for hi + lo sums with |lo| <= |hi|: q = n / d from the rounded sums and one correction
// step, whose residual n - q * d is exact by a fused multiply-add (the plain quotient of rounded
// sin and cos is up to 2.2 ulp off). One division: the correction only needs 1/d roughly.
template <class D>
HWY_INLINE Vec<D> DivideSums(D d, Sum2<D> num, Sum2<D> den) {
  const Vec<D> n = Rounded(num);
  const Vec<D> m = Rounded(den);
  const Vec<D> inv = hn::Div(K(d, 1.0), m);
  const Vec<D> q = hn::Mul(n, inv);
  const Vec<D> n_lo = hn::Add(hn::Sub(num.hi, n), num.lo);
  const Vec<D> m_lo = hn::Add(hn::Sub(den.hi, m), den.lo);
  const Vec<D> e = hn::NegMulAdd(q, m_lo, hn::Add(hn::NegMulAdd(q, m, n), n_lo));
  return hn::MulAdd(e, inv, q);
}

template <Trig kind, class D>
HWY_INLINE Vec<D> TrigF32(D d, Vec<D> x) {
  const Reduced<D> red = ReducePiOver2F32(d, x);
  const Sum2<D> s = SinKernelF32(d, red.r, red.r_lo);
  const Sum2<D> c = CosKernelF32(d, red.r, red.r_lo);
  if constexpr (kind != Trig::kTan) return FromQuadrant<kind>(d, red.q, Rounded(s), Rounded(c));
  const auto odd = QuadrantBit(d, red.q, 1);  // tan = -cos(r) / sin(r)
  const Sum2<D> num = {hn::IfThenElse(odd, hn::Neg(c.hi), s.hi),
                       hn::IfThenElse(odd, hn::Neg(c.lo), s.lo)};
  const Sum2<D> den = {hn::IfThenElse(odd, s.hi, c.hi), hn::IfThenElse(odd, s.lo, c.lo)};
  return DivideSums(d, num, den);
}

// ---- hyperbolic --------------------------------------------------------------------------------

// e^|x| / 2 without overflowing before the result does.
template <class D>
HWY_INLINE Vec<D> HalfExpLarge(D d, Vec<D> ax) {
  const Vec<D> h = ExpChecked(d, hn::Mul(ax, K(d, 0.5)));
  return hn::Mul(hn::Mul(K(d, 0.5), h), h);
}
template <class D>
HWY_INLINE Vec<D> LargeHyperbolicArg(D d) {
  return K(d, kF32<TFromD<D>> ? 88.0 : 709.0);
}

template <class D>
HWY_INLINE Vec<D> SinhWide(D d, Vec<D> x) {
  const Vec<D> ax = hn::Abs(x);
  const auto large = hn::Gt(ax, LargeHyperbolicArg(d));
  const Vec<D> y = hn::Sinh(d, hn::CopySignToAbs(hn::Min(ax, LargeHyperbolicArg(d)), x));
  if (HWY_LIKELY(hn::AllFalse(d, large))) return y;
  return hn::IfThenElse(large, hn::CopySignToAbs(HalfExpLarge(d, ax), x), y);
}

template <class D>
HWY_INLINE Vec<D> CoshWide(D d, Vec<D> x) {
  const Vec<D> ax = hn::Abs(x);
  const auto large = hn::Gt(ax, LargeHyperbolicArg(d));
  const Vec<D> t = ExpChecked(d, hn::Min(ax, LargeHyperbolicArg(d)));
  const Vec<D> y = hn::MulAdd(K(d, 0.5), t, hn::Div(K(d, 0.5), t));
  if (HWY_LIKELY(hn::AllFalse(d, large))) return y;
  return hn::IfThenElse(large, HalfExpLarge(d, ax), y);
}

template <class D>
HWY_INLINE Vec<D> AsinhChecked(D d, Vec<D> x) {
  return hn::IfThenElse(hn::IsInf(x), x, hn::Asinh(d, x));
}
template <class D>
HWY_INLINE Vec<D> AcoshChecked(D d, Vec<D> x) {
  const Vec<D> y = hn::IfThenElse(hn::Eq(x, PosInf(d)), x, hn::Acosh(d, x));
  return hn::IfThenElse(hn::Lt(x, K(d, 1.0)), QNaN(d), y);
}
template <class D>
HWY_INLINE Vec<D> AtanhChecked(D d, Vec<D> x) {
  const Vec<D> ax = hn::Abs(x);
  Vec<D> y = hn::Atanh(d, x);
  y = hn::IfThenElse(hn::Eq(ax, K(d, 1.0)), hn::CopySignToAbs(PosInf(d), x), y);
  return hn::IfThenElse(hn::Gt(ax, K(d, 1.0)), QNaN(d), y);
}
template <class D>
HWY_INLINE Vec<D> AsinChecked(D d, Vec<D> x) {
  return hn::IfThenElse(hn::Gt(hn::Abs(x), K(d, 1.0)), QNaN(d), hn::Asin(d, x));
}
template <class D>
HWY_INLINE Vec<D> AcosChecked(D d, Vec<D> x) {
  return hn::IfThenElse(hn::Gt(hn::Abs(x), K(d, 1.0)), QNaN(d), hn::Acos(d, x));
}

// 1 / (1 + e^-x), as e^x / (1 + e^x) for x < 0 so that tiny results keep their precision.
template <class D>
HWY_INLINE Vec<D> LogisticSplit(D d, Vec<D> x) {
  const Vec<D> t = ExpChecked(d, hn::Neg(hn::Abs(x)));
  const Vec<D> num = hn::IfThenElse(hn::Lt(x, hn::Zero(d)), t, K(d, 1.0));
  return hn::Div(num, hn::Add(K(d, 1.0), t));
}

// ---- error functions (double; float32 goes through double) -------------------------------------

// fdlibm's piecewise rational approximations (s_erf.c), one function per region of |x|:
// below 0.84375, below 1.25, and beyond (erfc(|x|) through exp).
template <bool complement, class D>
HWY_INLINE Vec<D> ErfNearZero(D d, Vec<D> x) {
  static constexpr double pp[] = {-2.37630166566501626084e-05, -5.77027029648944159157e-03,
                                  -2.84817495755985104766e-02, -3.25042107247001499370e-01,
                                  1.28379167095512558561e-01};
  static constexpr double qq[] = {-3.96022827877536812320e-06, 1.32494738004321644526e-04,
                                  5.08130628187576562776e-03,  6.50222499887672944485e-02,
                                  3.97917223959155352819e-01,  1.0};
  const Vec<D> z = hn::Mul(x, x);
  const Vec<D> q = hn::Div(Horner(d, z, pp), Horner(d, z, qq));
  if constexpr (!complement) return hn::MulAdd(x, q, x);
  // For x >= 1/4, 1/2 - ((x - 1/2) + x*q) keeps the digits 1 - erf(x) would lose.
  const Vec<D> far = hn::Sub(K(d, 0.5), hn::MulAdd(x, q, hn::Sub(x, K(d, 0.5))));
  return hn::IfThenElse(hn::Lt(x, K(d, 0.25)), hn::Sub(K(d, 1.0), hn::MulAdd(x, q, x)), far);
}

template <bool complement, class D>
HWY_INLINE Vec<D> ErfNearOne(D d, Vec<D> x) {
  static constexpr double pa[] = {-2.16637559486879084300e-03, 3.54783043256182359371e-02,
                                  -1.10894694282396677476e-01, 3.18346619901161753674e-01,
                                  -3.72207876035701323847e-01, 4.14856118683748331666e-01,
                                  -2.36211856075265944077e-03};
  static constexpr double qa[] = {1.19844998467991074170e-02,
                                  1.36370839120290507362e-02,
                                  1.26171219808761642112e-01,
                                  7.18286544141962662868e-02,
                                  5.40397917702171048937e-01,
                                  1.06420880400844228286e-01,
                                  1.0};
  const Vec<D> one = K(d, 1.0);
  const Vec<D> erx = K(d, 8.45062911510467529297e-01);  // erf(1) to float precision
  const Vec<D> s = hn::Sub(hn::Abs(x), one);
  const Vec<D> q = hn::Div(Horner(d, s, pa), Horner(d, s, qa));
  if constexpr (!complement) return hn::CopySignToAbs(hn::Add(erx, q), x);
  return hn::IfThenElse(hn::Lt(x, hn::Zero(d)), hn::Add(one, hn::Add(erx, q)),
                        hn::Sub(hn::Sub(one, erx), q));
}

// erfc(a) for a >= 1.25: e^(-a^2 - 0.5625 + R(1/a^2)/S(1/a^2)) / a.
template <class D>
HWY_INLINE Vec<D> ErfcTail(D d, Vec<D> a) {
  static constexpr double ra[] = {-9.81432934416914548592e+00, -8.12874355063065934246e+01,
                                  -1.84605092906711035994e+02, -1.62396669462573470355e+02,
                                  -6.23753324503260060396e+01, -1.05586262253232909814e+01,
                                  -6.93858572707181764372e-01, -9.86494403484714822705e-03};
  static constexpr double sa[] = {
      -6.04244152148580987438e-02, 6.57024977031928170135e+00, 1.08635005541779435134e+02,
      4.29008140027567833386e+02,  6.45387271733267880336e+02, 4.34565877475229228821e+02,
      1.37657754143519042600e+02,  1.96512716674392571292e+01, 1.0};
  static constexpr double rb[] = {-4.83519191608651397019e+02, -1.02509513161107724954e+03,
                                  -6.37566443368389627722e+02, -1.60636384855821916062e+02,
                                  -1.77579549177547519889e+01, -7.99283237680523006574e-01,
                                  -9.86494292470009928597e-03};
  static constexpr double sb[] = {-2.24409524465858183362e+01, 4.74528541206955367215e+02,
                                  2.55305040643316442583e+03,  3.19985821950859553908e+03,
                                  1.53672958608443695994e+03,  3.25792512996573918826e+02,
                                  3.03380607434824582924e+01,  1.0};
  // erfc(30) underflows to 0 in double; clamping keeps inf out of (z - a)(z + a).
  a = hn::Min(a, K(d, 30.0));
  const Vec<D> s = hn::Div(K(d, 1.0), hn::Mul(a, a));
  const auto near = hn::Lt(a, K(d, 1.0 / 0.35));
  Vec<D> rs = hn::Div(Horner(d, s, ra), Horner(d, s, sa));
  if (!hn::AllTrue(d, near))
    rs = hn::IfThenElse(near, rs, hn::Div(Horner(d, s, rb), Horner(d, s, sb)));
  // z = a with 32 low bits cleared, so z*z is exact and e^(-a*a) splits without loss.
  const hn::RebindToUnsigned<D> du;
  const Vec<D> z = hn::BitCast(d, hn::And(hn::BitCast(du, a), hn::Set(du, 0xFFFFFFFF00000000ull)));
  const Vec<D> e1 = ExpChecked(d, hn::Sub(hn::Neg(hn::Mul(z, z)), K(d, 0.5625)));
  const Vec<D> e2 = ExpChecked(d, hn::MulAdd(hn::Sub(z, a), hn::Add(z, a), rs));
  return hn::Div(hn::Mul(e1, e2), a);
}

// erf(x), or erfc(x) when `complement`, to float64 accuracy.
template <bool complement, class D>
HWY_INLINE Vec<D> ErfF64(D d, Vec<D> x) {
  const Vec<D> ax = hn::Abs(x);
  const auto in_a = hn::Lt(ax, K(d, 0.84375));
  const auto in_b = hn::And(hn::Not(in_a), hn::Lt(ax, K(d, 1.25)));
  const auto in_tail = hn::Ge(ax, K(d, 1.25));
  Vec<D> y = hn::Zero(d);
  if (!hn::AllFalse(d, in_a)) y = hn::IfThenElse(in_a, ErfNearZero<complement>(d, x), y);
  if (!hn::AllFalse(d, in_b)) y = hn::IfThenElse(in_b, ErfNearOne<complement>(d, x), y);
  if (!hn::AllFalse(d, in_tail)) {
    const Vec<D> q = ErfcTail(d, ax);
    Vec<D> yt;
    if constexpr (complement)
      yt = hn::IfThenElse(hn::Lt(x, hn::Zero(d)), hn::Sub(K(d, 2.0), q), q);
    else
      yt = hn::CopySignToAbs(hn::Sub(K(d, 1.0), q), x);
    y = hn::IfThenElse(in_tail, yt, y);
  }
  return y;
}

// erf or erfc of float32 inputs, in double: erf(x) = x P(x^2) for |x| < 1, and beyond
// erfc(|x|) = e^(-x^2) G(1/|x|) / |x| with G fitted on |x| in [1, 10.1] (erfc(10.1) rounds to 0
// in float32). Relative error below 2e-9, so the float32 result rounds correctly but rarely.
template <bool complement, class D>
HWY_INLINE Vec<D> ErfOfF32(D d, Vec<D> x) {
  static constexpr double a[] = {
      1.0595273586104326e-06, -1.3911700112243683e-05, 0.00011956946617992945,
      -0.0008542670545173651, 0.005223785005652662,    -0.02686613362497154,
      0.11283791313489658,    -0.3761263888986853,     1.128379167094695};
  static constexpr double g[] = {
      -1.0369766631528425e-05, 1.874970557002483e-05,  1.4137146927623016e-05,
      -7.387539806179493e-05,  0.00014544378332006518, -0.00022834561888817118,
      0.00010021303243264547,  0.0009240520691367156,  -0.004000830715439556,
      0.009010114812800212,    -0.004162440202013137,  -0.07659086761004884,
      0.5024375941370465};
  const Vec<D> one = K(d, 1.0);
  const Vec<D> ax = hn::Abs(x);
  const auto central = hn::Lt(ax, one);
  Vec<D> y = hn::Zero(d);
  if (!hn::AllFalse(d, central)) {
    const Vec<D> e = hn::Mul(x, Horner(d, hn::Mul(x, x), a));
    y = complement ? hn::Sub(one, e) : e;
  }
  if (!hn::AllTrue(d, central)) {
    const Vec<D> t = hn::Min(hn::Max(ax, one), K(d, 10.1));
    const Vec<D> u = hn::Div(one, t);
    const Vec<D> s = hn::Mul(hn::Sub(u, K(d, 0.5495049504950495)), K(d, 2.21978021978022));
    const Vec<D> q = hn::Mul(hn::Mul(ExpChecked(d, hn::Neg(hn::Mul(t, t))), Horner(d, s, g)), u);
    Vec<D> tail;
    if constexpr (complement) {
      tail = hn::IfThenElse(hn::Lt(x, hn::Zero(d)), hn::Sub(K(d, 2.0), q), q);
    } else {
      tail = hn::CopySignToAbs(hn::Sub(one, q), x);
    }
    y = hn::IfThenElse(central, y, tail);
  }
  return y;
}

// The Cephes rational XLA:CPU's log1p uses below |x| < sqrt(2) - 1 (both float types):
// log1p(x) = x - x²/2 + x³·num(x)/den(x).
constexpr double kXlaLog1pNum[] = {4.5270000862445199635215E-5, 4.9854102823193375972212E-1,
                                   6.5787325942061044846969E0,  2.9911919328553073277375E1,
                                   6.0949667980987787057556E1,  5.7112963590585538103336E1,
                                   2.0039553499201281259648E1};
constexpr double kXlaLog1pDen[] = {1.,
                                   1.5062909083469192043167E1,
                                   8.3047565967967209469434E1,
                                   2.2176239823732856465394E2,
                                   3.0909872225312059774938E2,
                                   2.1642788614495947685003E2,
                                   6.0118660497603843919306E1};

// XLA:CPU's float64 log1p: the Cephes rational below |x| < sqrt(2) - 1 (fused Horner steps,
// the rest as written), else libm's log of 1 + x (XLA has no float64 log approximation).
template <class D>
HWY_INLINE Vec<D> XlaLog1pF64(D d, Vec<D> x) {
  const auto is_small = hn::Lt(hn::Abs(x), K(d, 0.41421356237309504880));
  const Vec<D> x2 = hn::Mul(x, x);
  Vec<D> small = hn::Div(Horner(d, x, kXlaLog1pNum), Horner(d, x, kXlaLog1pDen));
  small = hn::Mul(hn::Mul(x, x2), small);
  small = hn::Add(hn::Mul(K(d, -0.5), x2), small);
  small = hn::Add(x, small);
  if (hn::AllTrue(d, is_small)) return small;
  HWY_ALIGN double lanes[HWY_MAX_BYTES / sizeof(double)];
  hn::Store(hn::Add(x, K(d, 1.0)), d, lanes);
  for (size_t i = 0; i < hn::Lanes(d); ++i) lanes[i] = std::log(lanes[i]);
  return hn::IfThenElse(is_small, small, hn::Load(d, lanes));
}

// Giles' double-precision erf^-1 as XLA:CPU evaluates it: w = -log1p(-x·x) with XLA's log1p.
template <class D>
HWY_INLINE Vec<D> ErfInvF64(D d, Vec<D> x) {
  static constexpr double c1[] = {
      -3.6444120640178196996e-21, -1.685059138182016589e-19,  1.2858480715256400167e-18,
      1.115787767802518096e-17,   -1.333171662854620906e-16,  2.0972767875968561637e-17,
      6.6376381343583238325e-15,  -4.0545662729752068639e-14, -8.1519341976054721522e-14,
      2.6335093153082322977e-12,  -1.2975133253453532498e-11, -5.4154120542946279317e-11,
      1.051212273321532285e-09,   -4.1126339803469836976e-09, -2.9070369957882005086e-08,
      4.2347877827932403518e-07,  -1.3654692000834678645e-06, -1.3882523362786468719e-05,
      0.0001867342080340571352,   -0.00074070253416626697512, -0.0060336708714301490533,
      0.24015818242558961693,     1.6536545626831027356};
  static constexpr double c2[] = {
      2.2137376921775787049e-09, 9.0756561938885390979e-08, -2.7517406297064545428e-07,
      1.8239629214389227755e-08, 1.5027403968909827627e-06, -4.013867526981545969e-06,
      2.9234449089955446044e-06, 1.2475304481671778723e-05, -4.7318229009055733981e-05,
      6.8284851459573175448e-05, 2.4031110387097893999e-05, -0.0003550375203628474796,
      0.00095328937973738049703, -0.0016882755560235047313, 0.0024914420961078508066,
      -0.0037512085075692412107, 0.005370914553590063617,   1.0052589676941592334,
      3.0838856104922207635};
  static constexpr double c3[] = {
      -2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
      -3.7894654401267369937e-09, 7.6157012080783393804e-09,  -1.4960026627149240478e-08,
      2.9147953450901080826e-08,  -6.7711997758452339498e-08, 2.2900482228026654717e-07,
      -9.9298272942317002539e-07, 4.5260625972231537039e-06,  -1.9681778105531670567e-05,
      7.5995277030017761139e-05,  -0.00021503011930044477347, -0.00013871931833623122026,
      1.0103004648645343977,      4.8499064014085844221};
  const Vec<D> one = K(d, 1.0);
  const Vec<D> ax = hn::Abs(x);
  const Vec<D> w = hn::Neg(XlaLog1pF64(d, hn::Neg(hn::Mul(x, x))));
  const auto central = hn::Lt(w, K(d, 6.25));
  Vec<D> p = Horner(d, hn::Sub(w, K(d, 3.125)), c1);
  if (!hn::AllTrue(d, central)) {
    const Vec<D> sw = hn::Sqrt(w);
    const Vec<D> tail =
        hn::IfThenElse(hn::Lt(w, K(d, 16.0)), Horner(d, hn::Sub(sw, K(d, 3.25)), c2),
                       Horner(d, hn::Sub(sw, K(d, 5.0)), c3));
    p = hn::IfThenElse(central, p, tail);
  }
  Vec<D> y = hn::Mul(p, x);
  y = hn::IfThenElse(hn::Eq(ax, one), hn::CopySignToAbs(PosInf(d), x), y);
  return hn::IfThenElse(hn::Gt(ax, one), QNaN(d), y);
}

// XLA:CPU's float32 erf^-1, operation for operation (so results match JAX bit for bit):
// w = -log1p(-x*x) with XLA's log1p (Cephes rational below |t| < sqrt(2) - 1, else the Cephes
// log of 1 + t with LLVM's fused multiply-adds), then Giles' single-precision polynomials.
// a * b + c rounded once, also on targets without FMA (there in double: the product is exact
// and only the sum rounds before narrowing), so erf_inv gives the same bits on every CPU.
template <class D>
HWY_INLINE Vec<D> FusedMulAddF32(D d, Vec<D> a, Vec<D> b, Vec<D> c) {
#if HWY_NATIVE_FMA
  (void)d;
  return hn::MulAdd(a, b, c);
#elif HWY_TARGET == HWY_SCALAR
  const hn::Rebind<double, D> dd;
  const auto p = hn::Mul(hn::PromoteTo(dd, a), hn::PromoteTo(dd, b));
  return hn::DemoteTo(d, hn::Add(p, hn::PromoteTo(dd, c)));
#else
  const hn::Half<D> dh;
  const hn::Rebind<double, decltype(dh)> dd;
  const auto half_fma = [dh, dd](Vec<decltype(dh)> ah, Vec<decltype(dh)> bh, Vec<decltype(dh)> ch) {
    const auto p = hn::Mul(hn::PromoteTo(dd, ah), hn::PromoteTo(dd, bh));
    return hn::DemoteTo(dh, hn::Add(p, hn::PromoteTo(dd, ch)));
  };
  const auto lo = half_fma(hn::LowerHalf(dh, a), hn::LowerHalf(dh, b), hn::LowerHalf(dh, c));
  const auto hi = half_fma(hn::UpperHalf(dh, a), hn::UpperHalf(dh, b), hn::UpperHalf(dh, c));
  return hn::Combine(d, hi, lo);
#endif
}

template <class D, size_t N>
HWY_INLINE Vec<D> HornerFusedF32(D d, Vec<D> x, const double (&c)[N]) {
  Vec<D> p = K(d, c[0]);
  for (size_t i = 1; i < N; ++i) p = FusedMulAddF32(d, p, x, K(d, c[i]));
  return p;
}

template <class D>
HWY_INLINE Vec<D> CephesLogF32(D d, Vec<D> x) {
  const hn::RebindToSigned<D> di;
  const hn::RebindToUnsigned<D> du;
  const Vec<D> one = K(d, 1.0);
  Vec<D> t = hn::Max(x, K(d, 1.17549435e-38));
  const auto emm0 =
      hn::Sub(hn::BitCast(di, hn::ShiftRight<23>(hn::BitCast(du, t))), hn::Set(di, 0x7f));
  t = hn::BitCast(
      d, hn::Or(hn::And(hn::BitCast(du, t), hn::Set(du, ~0x7f800000u)), hn::Set(du, 0x3f000000u)));
  Vec<D> e = hn::Add(one, hn::ConvertTo(d, emm0));
  const auto m = hn::Lt(t, K(d, 0.707106781186547524));
  const Vec<D> t1 = hn::IfThenElseZero(m, t);
  t = hn::Sub(t, one);
  e = hn::Sub(e, hn::IfThenElseZero(m, one));
  t = hn::Add(t, t1);
  const Vec<D> x2 = hn::Mul(t, t);
  const Vec<D> x3 = hn::Mul(x2, t);
  Vec<D> y = FusedMulAddF32(d, t, K(d, 7.0376836292E-2), K(d, -1.1514610310E-1));
  Vec<D> y1 = FusedMulAddF32(d, t, K(d, -1.2420140846E-1), K(d, 1.4249322787E-1));
  Vec<D> y2 = FusedMulAddF32(d, t, K(d, 2.0000714765E-1), K(d, -2.4999993993E-1));
  y = FusedMulAddF32(d, y, t, K(d, 1.1676998740E-1));
  y1 = FusedMulAddF32(d, y1, t, K(d, -1.6668057665E-1));
  y2 = FusedMulAddF32(d, y2, t, K(d, 3.3333331174E-1));
  y = FusedMulAddF32(d, y, x3, y1);
  y = FusedMulAddF32(d, y, x3, y2);
  y = FusedMulAddF32(d, y, x3, hn::Mul(K(d, -2.12194440e-4), e));
  t = FusedMulAddF32(d, K(d, -0.5), x2, t);
  t = hn::Add(t, y);
  t = FusedMulAddF32(d, K(d, 0.693359375), e, t);
  t = hn::IfThenElse(hn::Eq(x, hn::Zero(d)), hn::Neg(PosInf(d)), t);
  return hn::IfThenElse(hn::Lt(x, hn::Zero(d)), QNaN(d), t);
}

template <class D>
HWY_INLINE Vec<D> XlaLog1pF32(D d, Vec<D> x) {
  const Vec<D> large = CephesLogF32(d, hn::Add(x, K(d, 1.0)));
  const Vec<D> x2 = hn::Mul(x, x);
  Vec<D> small = hn::Div(HornerFusedF32(d, x, kXlaLog1pNum), HornerFusedF32(d, x, kXlaLog1pDen));
  small = hn::Mul(hn::Mul(x, x2), small);
  small = hn::Add(hn::Mul(K(d, -0.5), x2), small);
  small = hn::Add(x, small);
  return hn::IfThenElse(hn::Lt(hn::Abs(x), K(d, 0.41421356237309504880)), small, large);
}

template <class D>
HWY_INLINE Vec<D> ErfInvF32(D d, Vec<D> x) {
  static constexpr double lo[] = {2.81022636e-08f,  3.43273939e-07f, -3.5233877e-06f,
                                  -4.39150654e-06f, 0.00021858087f,  -0.00125372503f,
                                  -0.00417768164f,  0.246640727f,    1.50140941f};
  static constexpr double hi[] = {-0.000200214257f, 0.000100950558f, 0.00134934322f,
                                  -0.00367342844f,  0.00573950773f,  -0.0076224613f,
                                  0.00943887047f,   1.00167406f,     2.83297682f};
  Vec<D> w = hn::Neg(XlaLog1pF32(d, hn::Neg(hn::Mul(x, x))));
  const auto central = hn::Lt(w, K(d, 5.0));
  w = hn::IfThenElse(central, hn::Sub(w, K(d, 2.5)), hn::Sub(hn::Sqrt(w), K(d, 3.0)));
  Vec<D> p = hn::IfThenElse(central, K(d, lo[0]), K(d, hi[0]));
  for (size_t i = 1; i < 9; ++i)
    p = FusedMulAddF32(d, p, w, hn::IfThenElse(central, K(d, lo[i]), K(d, hi[i])));
  const Vec<D> y = hn::Mul(p, x);
  return hn::IfThenElse(hn::Eq(hn::Abs(x), K(d, 1.0)), hn::Mul(x, PosInf(d)), y);
}

// ---- roots -------------------------------------------------------------------------------------

// Cube root in double: a bit-level first guess (a few % off), Halley steps (each cubes the
// relative error: two reach 1e-13, enough for float32 results), and for float64 a third plus
// one Newton step whose residual y^3 - a is computed exactly with fused multiply-adds.
template <bool for_f32, class D>
HWY_INLINE Vec<D> CbrtF64(D d, Vec<D> x) {
  const hn::RebindToSigned<D> di;
  // Scale by 2^(+-162) into a range where y^3 + 2a neither overflows nor goes subnormal.
  const Vec<D> a0 = hn::Abs(x);
  const auto tiny = hn::Lt(a0, K(d, 0x1p-900));
  const auto huge = hn::Gt(a0, K(d, 0x1p+900));
  Vec<D> a = hn::IfThenElse(tiny, hn::Mul(a0, K(d, 0x1p+162)), a0);
  a = hn::IfThenElse(huge, hn::Mul(a, K(d, 0x1p-162)), a);
  const Vec<D> third_bits = hn::Mul(hn::ConvertTo(d, hn::BitCast(di, a)), K(d, 1.0 / 3.0));
  Vec<D> y =
      hn::BitCast(d, hn::Add(hn::ConvertTo(di, third_bits), hn::Set(di, 0x2A9F789300000000LL)));
  for (int i = 0; i < (for_f32 ? 2 : 3); ++i) {
    const Vec<D> y3 = hn::Mul(hn::Mul(y, y), y);
    y = hn::Mul(y, hn::Div(hn::MulAdd(K(d, 2.0), a, y3), hn::MulAdd(K(d, 2.0), y3, a)));
  }
  if constexpr (!for_f32) {
    const Vec<D> y2 = hn::Mul(y, y);
    const Vec<D> y2_lo = hn::MulSub(y, y, y2);
    const Vec<D> resid = hn::MulAdd(y2_lo, y, hn::MulSub(y2, y, a));
    y = hn::Sub(y, hn::Div(resid, hn::Mul(K(d, 3.0), y2)));
  }
  y = hn::IfThenElse(tiny, hn::Mul(y, K(d, 0x1p-54)), y);
  y = hn::IfThenElse(huge, hn::Mul(y, K(d, 0x1p+54)), y);
  const auto special = hn::Or(hn::Eq(a0, hn::Zero(d)), hn::Not(hn::IsFinite(x)));
  return hn::IfThenElse(special, x, hn::CopySignToAbs(y, x));
}

// ---- tanh --------------------------------------------------------------------------------------

// float32 tanh in the form of Eigen's accurate ptanh_float (Eigen/src/Core/arch/Default/
// GenericPacketMathFunctions.h), on a = |x| with the sign of x put back at the end (so ±0 keep
// theirs): for a <= 1.25, a + a^3 P(a^2)/Q(a^2) with Eigen's rminimax coefficients; above,
// 1 - 2/(e^(2a) + 1). The two share one division. e^(2a) = 2^t with t = 2a/ln 2 rounded once
// (no Cody–Waite split: t's relative error, at most 2^-23, reaches the result scaled by
// 2s/(s^2 - 1) <= 0.17) and k = round(t) by the 1.5 * 2^23 shift, whose low bits, biased, are
// the exponent of 2^k; 2^(t - k) by a degree-5 fit (relative error 1.1e-7). a >= 10 (and inf)
// gives exactly 1. Measured on every float32: at most 1 step from the correctly rounded result
// (1.48 ulp from the exact one) where MulAdd fuses, 2 steps (1.89 ulp) where it does not.
template <class D>
HWY_INLINE Vec<D> TanhF32(D d, Vec<D> x) {
  const hn::RebindToSigned<D> di;
  static constexpr double num[] = {-1.46725140511989593505859375e-02,
                                   -3.333333432674407958984375e-01};
  static constexpr double den[] = {1.570280082523822784423828125e-02, 4.4401752948760986328125e-01,
                                   1.0};
  static constexpr double exp2m1[] = {0.001326472731307149, 0.009671512991189957,
                                      0.05550733581185341,  0.24022242426872253,
                                      0.6931470036506653,   1.0};
  const Vec<D> a = hn::Abs(x);
  const Vec<D> a2 = hn::Mul(a, a);
  const Vec<D> t = hn::Mul(hn::Min(a, K(d, 10.0)), K(d, 2.8853900817779268));  // 2a / ln 2
  const Vec<D> shifter = K(d, 0x1.8p23 + 127);
  const Vec<D> k_biased = hn::Add(t, shifter);
  const Vec<D> f = hn::Sub(t, hn::Sub(k_biased, shifter));
  const Vec<D> s =
      hn::Mul(Horner(d, f, exp2m1), hn::BitCast(d, hn::ShiftLeft<23>(hn::BitCast(di, k_biased))));
  const auto large = hn::Gt(a, K(d, 1.25));
  const Vec<D> r = hn::Div(hn::IfThenElse(large, K(d, 2.0), Horner(d, a2, num)),
                           hn::IfThenElse(large, hn::Add(s, K(d, 1.0)), Horner(d, a2, den)));
  const Vec<D> y = hn::IfThenElse(large, hn::Sub(K(d, 1.0), r), hn::MulAdd(hn::Mul(a2, a), r, a));
  return hn::CopySignToAbs(y, x);
}

template <class D>
HWY_INLINE Vec<D> TanhAny(D d, Vec<D> x) {
  if constexpr (kF32<TFromD<D>>)
    return TanhF32(d, x);
  else
    return hn::Tanh(d, x);
}

// ---- the op table ------------------------------------------------------------------------------
// kViaF64: float32 inputs are computed in double, by ApplyToF32 (which may trade the float64
// accuracy for speed). kKeepZero: f(±0) = ±0 (odd at zero), so a zero input is returned as is,
// sign included.

#define SPMD_UNARY_OP(NAME, VIA_F64, KEEP_ZERO, ...)     \
  struct NAME {                                          \
    static constexpr bool kViaF64 = VIA_F64;             \
    static constexpr bool kKeepZero = KEEP_ZERO;         \
    template <class D>                                   \
    static HWY_INLINE Vec<D> Apply(D d, Vec<D> x) {      \
      (void)d;                                           \
      return __VA_ARGS__;                                \
    }                                                    \
    template <class D>                                   \
    static HWY_INLINE Vec<D> ApplyToF32(D d, Vec<D> x) { \
      return Apply(d, x);                                \
    }                                                    \
  };

SPMD_UNARY_OP(OpExp, false, false, ExpChecked(d, x))
SPMD_UNARY_OP(OpExp2, false, false, Exp2Split(d, x))
SPMD_UNARY_OP(OpExpm1, false, true,
              hn::IfThenElse(hn::Gt(x, K(d, kF32<TFromD<D>> ? 88.8 : 709.8)), PosInf(d),
                             hn::Expm1(d, x)))
SPMD_UNARY_OP(OpLog, false, false, LogE(d, x))
SPMD_UNARY_OP(OpLog1p, false, true, Log1pChecked(d, x))
SPMD_UNARY_OP(OpLog2, false, false, Log2Exact(d, x))
SPMD_UNARY_OP(OpLog10, false, false, Log10Split(d, x))
SPMD_UNARY_OP(OpAsin, false, true, AsinChecked(d, x))
SPMD_UNARY_OP(OpAcos, false, false, AcosChecked(d, x))
SPMD_UNARY_OP(OpAtan, false, true, hn::Atan(d, x))
SPMD_UNARY_OP(OpSinh, false, true, SinhWide(d, x))
SPMD_UNARY_OP(OpCosh, false, false, CoshWide(d, x))
SPMD_UNARY_OP(OpTanh, false, false, TanhAny(d, x))  // keeps ±0 itself
SPMD_UNARY_OP(OpAsinh, false, true, AsinhChecked(d, x))
SPMD_UNARY_OP(OpAcosh, false, false, AcoshChecked(d, x))
SPMD_UNARY_OP(OpAtanh, false, true, AtanhChecked(d, x))
SPMD_UNARY_OP(OpLogistic, false, false, LogisticSplit(d, x))
SPMD_UNARY_OP(OpSqrt, false, false, hn::Sqrt(x))
SPMD_UNARY_OP(OpRsqrt, false, false, hn::Div(K(d, 1.0), hn::Sqrt(x)))
#undef SPMD_UNARY_OP

// sin, cos, tan: float32 in float32 (TrigF32, twice the lanes) up to kTrigF32MaxArg where the
// target fuses multiply-adds, which its reduction needs exact; the rest in double as float64.
template <Trig kind>
struct OpTrig {
  static constexpr bool kViaF64 = true;
  static constexpr bool kKeepZero = kind != Trig::kCos;
  static constexpr bool kFastF32 = HWY_NATIVE_FMA;
  template <class D>
  static HWY_INLINE Vec<D> Apply(D d, Vec<D> x) {
    return TrigF64<kind>(d, x);
  }
  template <class D>
  static HWY_INLINE Vec<D> ApplyToF32(D d, Vec<D> x) {
    return Apply(d, x);
  }
  template <class D>
  static HWY_INLINE auto FastF32Lanes(D d, Vec<D> x) {
    return hn::Le(hn::Abs(x), K(d, kTrigF32MaxArg));  // false for inf and nan
  }
  template <class D>
  static HWY_INLINE Vec<D> FastF32(D d, Vec<D> x) {
    return TrigF32<kind>(d, x);
  }
};
using OpSin = OpTrig<Trig::kSin>;
using OpCos = OpTrig<Trig::kCos>;
using OpTan = OpTrig<Trig::kTan>;

// erf and erfc: float32 inputs (in double) use the shorter approximation of ErfOfF32.
template <bool complement>
struct OpErfFamily {
  static constexpr bool kViaF64 = true;
  static constexpr bool kKeepZero = !complement;
  template <class D>
  static HWY_INLINE Vec<D> Apply(D d, Vec<D> x) {
    return ErfF64<complement>(d, x);
  }
  template <class D>
  static HWY_INLINE Vec<D> ApplyToF32(D d, Vec<D> x) {
    return ErfOfF32<complement>(d, x);
  }
};
using OpErf = OpErfFamily<false>;
using OpErfc = OpErfFamily<true>;

struct OpCbrt {
  static constexpr bool kViaF64 = true;
  static constexpr bool kKeepZero = true;
  // f(±inf) = ±inf, restated after narrowing (the portable target saturates inf to FLT_MAX).
  static constexpr bool kKeepInf = true;
  template <class D>
  static HWY_INLINE Vec<D> Apply(D d, Vec<D> x) {
    return CbrtF64<false>(d, x);
  }
  template <class D>
  static HWY_INLINE Vec<D> ApplyToF32(D d, Vec<D> x) {
    return CbrtF64<true>(d, x);
  }
};

// erf^-1 differs by type: float32 follows XLA exactly, float64 uses Giles' double version.
struct OpErfInv {
  static constexpr bool kViaF64 = false;
  static constexpr bool kKeepZero = true;
  template <class D>
  static HWY_INLINE Vec<D> Apply(D d, Vec<D> x) {
    if constexpr (kF32<TFromD<D>>)
      return ErfInvF32(d, x);
    else
      return ErfInvF64(d, x);
  }
  template <class D>
  static HWY_INLINE Vec<D> ApplyToF32(D d, Vec<D> x) {
    return Apply(d, x);
  }
};

}  // namespace spmd::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SPMD_UNARY_MATH_INL_H_

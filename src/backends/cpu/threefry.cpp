// The random kernels, vectorised with Google Highway (runtime dispatch to AVX-512, AVX2, SSE4 or
// portable code) for whole vectors, scalar code for the remainder, and large ranges split across
// the worker threads.
#include "backends/cpu/threefry.h"

#include "backends/cpu/parallel.h"

// SSSE3-only CPUs fall back to the portable target; skipping it keeps the build short.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS HWY_SSSE3
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/threefry.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include <cmath>
#include <type_traits>

HWY_BEFORE_NAMESPACE();
namespace spmd::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Four Threefry rounds with rotation amounts R: x1 += x2; x2 = rotl(x2, r) ^ x1.
template <int... R, class V>
HWY_INLINE void Rounds(V& x1, V& x2) {
  ((x1 = hn::Add(x1, x2), x2 = hn::Xor(hn::RotateRight<32 - R>(x2), x1)), ...);
}

template <class D, class V = hn::Vec<D>>
HWY_INLINE void Hash(D d, V k1, V k2, V& x1, V& x2) {
  const V k3 = hn::Xor(hn::Xor(k1, k2), hn::Set(d, 0x1BD11BDAu));
  x1 = hn::Add(x1, k1);
  x2 = hn::Add(x2, k2);
  Rounds<13, 15, 26, 6>(x1, x2);
  x1 = hn::Add(x1, k2);
  x2 = hn::Add(x2, hn::Add(k3, hn::Set(d, 1u)));
  Rounds<17, 29, 16, 24>(x1, x2);
  x1 = hn::Add(x1, k3);
  x2 = hn::Add(x2, hn::Add(k1, hn::Set(d, 2u)));
  Rounds<13, 15, 26, 6>(x1, x2);
  x1 = hn::Add(x1, k1);
  x2 = hn::Add(x2, hn::Add(k2, hn::Set(d, 3u)));
  Rounds<17, 29, 16, 24>(x1, x2);
  x1 = hn::Add(x1, k2);
  x2 = hn::Add(x2, hn::Add(k3, hn::Set(d, 4u)));
  Rounds<13, 15, 26, 6>(x1, x2);
  x1 = hn::Add(x1, k3);
  x2 = hn::Add(x2, hn::Add(k1, hn::Set(d, 5u)));
}

// Hashes whole vectors from the start of the range; returns how many elements were done.
int64_t ThreefryVectors(BroadcastOperand k1, BroadcastOperand k2, BroadcastOperand x1,
                        BroadcastOperand x2, uint32_t* y1, uint32_t* y2, int64_t n) {
  const hn::ScalableTag<uint32_t> d;
  const int64_t lanes = int64_t(hn::Lanes(d));
  const auto* p1 = static_cast<const uint32_t*>(k1.data);
  const auto* p2 = static_cast<const uint32_t*>(k2.data);
  const auto* c1 = static_cast<const uint32_t*>(x1.data);
  const auto* c2 = static_cast<const uint32_t*>(x2.data);
  int64_t i = 0;
  if (k1.broadcast && k2.broadcast && !x1.broadcast && !x2.broadcast) {
    // The shape of every jax.random draw: one key, a counter per element.
    const auto kv1 = hn::Set(d, p1[0]), kv2 = hn::Set(d, p2[0]);
    for (; i + lanes <= n; i += lanes) {
      auto a = hn::LoadU(d, c1 + i), b = hn::LoadU(d, c2 + i);
      Hash(d, kv1, kv2, a, b);
      hn::StoreU(a, d, y1 + i);
      hn::StoreU(b, d, y2 + i);
    }
    return i;
  }
  const auto load = [d](const uint32_t* p, bool broadcast, int64_t at) {
    return broadcast ? hn::Set(d, p[0]) : hn::LoadU(d, p + at);
  };
  for (; i + lanes <= n; i += lanes) {
    auto a = load(c1, x1.broadcast, i), b = load(c2, x2.broadcast, i);
    Hash(d, load(p1, k1.broadcast, i), load(p2, k2.broadcast, i), a, b);
    hn::StoreU(a, d, y1 + i);
    hn::StoreU(b, d, y2 + i);
  }
  return i;
}

// out = x * y + z over whole vectors where the target fuses natively; returns elements done.
template <class T>
HWY_INLINE int64_t FmaVectors(BroadcastOperand x, BroadcastOperand y, BroadcastOperand z, T* out,
                              int64_t n) {
#if HWY_NATIVE_FMA
  const hn::ScalableTag<T> d;
  const int64_t lanes = int64_t(hn::Lanes(d));
  const auto load = [d](BroadcastOperand o, int64_t at) {
    const T* p = static_cast<const T*>(o.data);
    return o.broadcast ? hn::Set(d, p[0]) : hn::LoadU(d, p + at);
  };
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes)
    hn::StoreU(hn::MulAdd(load(x, i), load(y, i), load(z, i)), d, out + i);
  return i;
#else
  (void)x, (void)y, (void)z, (void)out, (void)n;
  return 0;
#endif
}
int64_t FmaF32(BroadcastOperand x, BroadcastOperand y, BroadcastOperand z, float* out, int64_t n) {
  return FmaVectors<float>(x, y, z, out, n);
}
int64_t FmaF64(BroadcastOperand x, BroadcastOperand y, BroadcastOperand z, double* out, int64_t n) {
  return FmaVectors<double>(x, y, z, out, n);
}

}  // namespace spmd::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace spmd::cpu {

HWY_EXPORT(ThreefryVectors);
HWY_EXPORT(FmaF32);
HWY_EXPORT(FmaF64);

namespace {

inline uint32_t rotl(uint32_t v, int r) {
  return (v << r) | (v >> (32 - r));
}

void hash(uint32_t k1, uint32_t k2, uint32_t& x1, uint32_t& x2) {
  static constexpr int kRotations[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  const uint32_t ks[3] = {k1, k2, k1 ^ k2 ^ 0x1BD11BDAu};
  x1 += ks[0];
  x2 += ks[1];
  for (uint32_t group = 0; group < 5; ++group) {
    for (int r : kRotations[group % 2]) {
      x1 += x2;
      x2 = rotl(x2, r) ^ x1;
    }
    x1 += ks[(group + 1) % 3];
    x2 += ks[(group + 2) % 3] + group + 1;
  }
}

BroadcastOperand offset(BroadcastOperand o, int64_t elements, int itemsize) {
  if (o.broadcast) return o;
  return {static_cast<const char*>(o.data) + elements * itemsize, false};
}

template <class T>
T at(BroadcastOperand o, int64_t i) {
  return static_cast<const T*>(o.data)[o.broadcast ? 0 : i];
}

template <class T>
void fma_range(BroadcastOperand x, BroadcastOperand y, BroadcastOperand z, T* out, int64_t n) {
  int64_t done = 0;
  if constexpr (std::is_same_v<T, float>) done = HWY_DYNAMIC_DISPATCH(FmaF32)(x, y, z, out, n);
  if constexpr (std::is_same_v<T, double>) done = HWY_DYNAMIC_DISPATCH(FmaF64)(x, y, z, out, n);
  for (int64_t i = done; i < n; ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      out[i] = std::fma(at<T>(x, i), at<T>(y, i), at<T>(z, i));
    } else {
      float r = std::fma(float(at<T>(x, i)), float(at<T>(y, i)), float(at<T>(z, i)));
      out[i] = T(r);
    }
  }
}

}  // namespace

void threefry2x32(BroadcastOperand k1, BroadcastOperand k2, BroadcastOperand x1,
                  BroadcastOperand x2, uint32_t* y1, uint32_t* y2, int64_t n) {
  parallel_for(n, 1 << 15, [&](int64_t b, int64_t e) {
    const auto shift = [b](BroadcastOperand o) { return offset(o, b, 4); };
    int64_t i = b + HWY_DYNAMIC_DISPATCH(ThreefryVectors)(shift(k1), shift(k2), shift(x1),
                                                          shift(x2), y1 + b, y2 + b, e - b);
    for (; i < e; ++i) {
      uint32_t a = at<uint32_t>(x1, i), c = at<uint32_t>(x2, i);
      hash(at<uint32_t>(k1, i), at<uint32_t>(k2, i), a, c);
      y1[i] = a;
      y2[i] = c;
    }
  });
}

void iota_2x32(uint32_t* hi, uint32_t* lo, int64_t n) {
  parallel_for(n, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      hi[i] = uint32_t(uint64_t(i) >> 32);
      lo[i] = uint32_t(i);
    }
  });
}

void fma(DType t, BroadcastOperand x, BroadcastOperand y, BroadcastOperand z, void* out,
         int64_t n) {
  dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, bfloat16_t> ||
                  std::is_same_v<T, float16_t>) {
      const int size = int(sizeof(T));
      parallel_for(n, 1 << 16, [&](int64_t b, int64_t e) {
        fma_range<T>(offset(x, b, size), offset(y, b, size), offset(z, b, size),
                     static_cast<T*>(out) + b, e - b);
      });
    }
  });
}

}  // namespace spmd::cpu
#endif  // HWY_ONCE

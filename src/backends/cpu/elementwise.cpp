// Elementwise kernels: one broadcasting row loop shared by every binary op, typed functors per
// op, and simple unary kernels. 16-bit floats compute in float32 and round once per result.
#include "backends/cpu/elementwise.h"

#include "backends/cpu/clones.h"
#include "backends/cpu/convert.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/wrapping.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace spmd::cpu {
namespace {

template <class T>
constexpr bool kIsHalf = std::is_same_v<T, bfloat16_t> || std::is_same_v<T, float16_t>;
template <class T>
using Compute = std::conditional_t<kIsHalf<T>, float, T>;

template <class T>
Compute<T> load(T v) {
  if constexpr (kIsHalf<T>)
    return float(v);
  else
    return v;
}
template <class T, class C>
T store(C v) {
  if constexpr (kIsHalf<T>)
    return T(float(v));
  else
    return T(v);
}

constexpr int64_t kGrain = 1 << 15;

// ---- broadcasting plan ------------------------------------------------------------------------
// Dims of the output with adjacent dims merged where every operand allows it, and each
// operand's element strides (0 on broadcast dims).
struct LoopPlan {
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> strides;
};

LoopPlan make_plan(const Shape& out, std::span<const Shape> ins) {
  const int r = out.ndim();
  LoopPlan plan;
  std::vector<std::vector<int64_t>> full(ins.size(), std::vector<int64_t>(size_t(r), 0));
  for (size_t k = 0; k < ins.size(); ++k) {
    if (ins[k].ndim() == 0) continue;
    int64_t acc = 1;
    for (int i = r - 1; i >= 0; --i) {
      full[k][size_t(i)] = (ins[k][i] == 1 && out[i] != 1) ? 0 : acc;
      acc *= ins[k][i];
    }
  }
  // Merge dim i into the previous kept dim when strides are contiguous across the boundary.
  for (int i = 0; i < r; ++i) {
    if (out[i] == 1 && r > 1) continue;
    if (!plan.dims.empty()) {
      bool mergeable = true;
      for (size_t k = 0; k < ins.size(); ++k)
        if (plan.strides[k].back() != full[k][size_t(i)] * out[i]) mergeable = false;
      if (mergeable) {
        plan.dims.back() *= out[i];
        for (size_t k = 0; k < ins.size(); ++k) plan.strides[k].back() = full[k][size_t(i)];
        continue;
      }
    }
    plan.dims.push_back(out[i]);
    if (plan.strides.empty()) plan.strides.resize(ins.size());
    for (size_t k = 0; k < ins.size(); ++k) plan.strides[k].push_back(full[k][size_t(i)]);
  }
  if (plan.dims.empty()) {
    plan.dims.push_back(1);
    plan.strides.assign(ins.size(), std::vector<int64_t>{0});
  }
  return plan;
}

// Calls row(offsets, out_offset, n) for every innermost row of the plan, splitting the work
// across threads. `offsets[k]` is operand k's element offset of the row's first element.
template <size_t N, class Row>
void for_each_row(const LoopPlan& plan, Row&& row) {
  if (plan.strides.size() > N) throw std::logic_error("elementwise kernel: too many operands");
  const int r = int(plan.dims.size());
  const int64_t inner = plan.dims.back();
  int64_t rows = 1;
  for (int i = 0; i < r - 1; ++i) rows *= plan.dims[size_t(i)];
  if (rows == 1) {
    parallel_for(inner, kGrain, [&](int64_t b, int64_t e) {
      std::array<int64_t, N> off{};
      for (size_t k = 0; k < plan.strides.size(); ++k) off[k] = b * plan.strides[k].back();
      row(off, b, e - b);
    });
    return;
  }
  parallel_for(rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, inner)),
               [&](int64_t b, int64_t e) {
                 std::vector<int64_t> idx(size_t(r - 1));
                 int64_t rem = b;
                 for (int i = r - 2; i >= 0; --i) {
                   idx[size_t(i)] = rem % plan.dims[size_t(i)];
                   rem /= plan.dims[size_t(i)];
                 }
                 for (int64_t row_i = b; row_i < e; ++row_i) {
                   std::array<int64_t, N> off{};
                   for (size_t k = 0; k < plan.strides.size(); ++k)
                     for (int i = 0; i < r - 1; ++i)
                       off[k] += idx[size_t(i)] * plan.strides[k][size_t(i)];
                   row(off, row_i * inner, inner);
                   for (int i = r - 2; i >= 0; --i) {
                     if (++idx[size_t(i)] < plan.dims[size_t(i)]) break;
                     idx[size_t(i)] = 0;
                   }
                 }
               });
}

// ---- binary functors ---------------------------------------------------------------------------
template <class T>
constexpr int kBits = int(sizeof(T) * 8);

template <class C>
C int_pow(C base, C exp) {
  if constexpr (std::is_signed_v<C>) {
    if (exp < 0) return base == 1 ? C(1) : base == C(-1) ? ((exp & 1) ? C(-1) : C(1)) : C(0);
  }
  C result = 1;
  for (auto e = std::make_unsigned_t<C>(exp); e; e >>= 1) {
    if (e & 1) result = wrapping_mul(result, base);
    base = wrapping_mul(base, base);
  }
  return result;
}

template <BinaryOp op, class T>
struct Binary {
  using C = Compute<T>;
  static constexpr bool kFloat = std::is_floating_point_v<C>;
  static constexpr bool kInt = std::is_integral_v<C> && !std::is_same_v<C, bool>;
  static constexpr bool supported() {
    switch (op) {
      case BinaryOp::add:
      case BinaryOp::sub:
      case BinaryOp::mul:
      case BinaryOp::div:
      case BinaryOp::rem:
      case BinaryOp::pow:
        return kFloat || kInt;
      case BinaryOp::atan2:
      case BinaryOp::nextafter:
        return kFloat;
      case BinaryOp::bit_and:
      case BinaryOp::bit_or:
      case BinaryOp::bit_xor:
        return !kFloat;
      case BinaryOp::shift_left:
      case BinaryOp::shift_right_logical:
      case BinaryOp::shift_right_arithmetic:
        return kInt;
      default:
        return true;
    }
  }
  static auto apply(C a, C b) {
    if constexpr (op == BinaryOp::add)
      return wrapping_add(a, b);
    else if constexpr (op == BinaryOp::sub)
      return wrapping_sub(a, b);
    else if constexpr (op == BinaryOp::mul)
      return wrapping_mul(a, b);
    else if constexpr (op == BinaryOp::div) {
      if constexpr (kInt) {
        if (b == 0) return C(-1);  // XLA: division by zero gives all bits set
        if constexpr (std::is_signed_v<C>)
          if (a == std::numeric_limits<C>::min() && b == C(-1)) return a;
        return C(a / b);
      } else {
        return C(a / b);
      }
    } else if constexpr (op == BinaryOp::rem) {
      if constexpr (kInt) {
        if (b == 0) return a;
        if constexpr (std::is_signed_v<C>)
          if (b == C(-1)) return C(0);
        return C(a % b);
      } else {
        return C(std::fmod(a, b));
      }
    } else if constexpr (op == BinaryOp::pow) {
      if constexpr (kInt)
        return int_pow(a, b);
      else
        return C(std::pow(a, b));
    } else if constexpr (op == BinaryOp::max) {
      if constexpr (kFloat) {
        if (a != a || b != b) return C(a + b);  // NaN propagates
        return (a == b && a == 0) ? (std::signbit(a) ? b : a) : (a > b ? a : b);
      } else {
        return a > b ? a : b;
      }
    } else if constexpr (op == BinaryOp::min) {
      if constexpr (kFloat) {
        if (a != a || b != b) return C(a + b);
        return (a == b && a == 0) ? (std::signbit(a) ? a : b) : (a < b ? a : b);
      } else {
        return a < b ? a : b;
      }
    } else if constexpr (op == BinaryOp::atan2)
      return C(std::atan2(a, b));
    else if constexpr (op == BinaryOp::nextafter)
      return C(std::nextafter(a, b));
    else if constexpr (op == BinaryOp::eq)
      return a == b;
    else if constexpr (op == BinaryOp::ne)
      return a != b;
    else if constexpr (op == BinaryOp::lt)
      return a < b;
    else if constexpr (op == BinaryOp::le)
      return a <= b;
    else if constexpr (op == BinaryOp::gt)
      return a > b;
    else if constexpr (op == BinaryOp::ge)
      return a >= b;
    else if constexpr (op == BinaryOp::bit_and)
      return C(a & b);
    else if constexpr (op == BinaryOp::bit_or)
      return C(a | b);
    else if constexpr (op == BinaryOp::bit_xor)
      return C(a ^ b);
    else if constexpr (op == BinaryOp::shift_left) {
      using U = std::make_unsigned_t<C>;
      return U(b) >= U(kBits<C>) ? C(0) : C(U(a) << U(b));
    } else if constexpr (op == BinaryOp::shift_right_logical) {
      using U = std::make_unsigned_t<C>;
      return U(b) >= U(kBits<C>) ? C(0) : C(U(a) >> U(b));
    } else {
      using U = std::make_unsigned_t<C>;
      if (U(b) >= U(kBits<C>)) return C(a < 0 ? -1 : 0);
      if constexpr (std::is_signed_v<C>)
        return C(a >> b);
      else
        return C(a >> b);
    }
  }
};

// nextafter on 16-bit floats steps their own representation.
template <class T>
T half_nextafter(T a, T b) {
  float fa = float(a), fb = float(b);
  if (fa != fa || fb != fb) return T(fa + fb);
  if (fa == fb) return b;
  if (fa == 0) return T::from_bits(uint16_t((std::signbit(fb) ? 0x8000 : 0) | 1));
  bool up = (fa < fb) == (fa > 0);
  return T::from_bits(uint16_t(a.bits + (up ? 1 : -1)));
}

// out[i] = f(a[i·sa], b[i·sb]) along one row, with the contiguous and broadcast cases spelled out
// so each vectorises; compiled for AVX2 too (clones.h).
template <class F, class T, class R>
SPMD_VECTOR_CLONES void binary_row(F f, const T* a, int64_t sa, const T* b, int64_t sb, R* out,
                                   int64_t n) {
  if (sa == 1 && sb == 1) {
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
  } else if (sa == 0 && sb == 1) {
    const T av = *a;
    for (int64_t i = 0; i < n; ++i) out[i] = f(av, b[i]);
  } else if (sa == 1 && sb == 0) {
    const T bv = *b;
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], bv);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i * sa], b[i * sb]);
  }
}

// Where a binary kernel runs: rows of a broadcasting plan, or (plan == nullptr) one contiguous
// range of n outputs whose operands are contiguous (stride 1) or a single value (stride 0).
struct BinaryLoop {
  const LoopPlan* plan;
  int64_t sa, sb, n;
};

template <BinaryOp op, class T>
void binary_typed(const T* a, const T* b, void* out_v, const BinaryLoop& loop) {
  using F = Binary<op, T>;
  using C = Compute<T>;
  constexpr bool kCmp = op >= BinaryOp::eq && op <= BinaryOp::ge;
  using R = std::conditional_t<kCmp, bool, T>;
  R* out = static_cast<R*>(out_v);
  auto f = [](T x, T y) -> R {
    if constexpr (kIsHalf<T> && op == BinaryOp::nextafter)
      return half_nextafter(x, y);
    else if constexpr (kCmp)
      return F::apply(load(x), load(y));
    else
      return store<T>(C(F::apply(load(x), load(y))));
  };
  if (!loop.plan) {
    const int64_t sa = loop.sa, sb = loop.sb;
    parallel_for(loop.n, kGrain, [&](int64_t i, int64_t e) {
      binary_row(f, a + i * sa, sa, b + i * sb, sb, out + i, e - i);
    });
    return;
  }
  const LoopPlan& plan = *loop.plan;
  const int64_t sa = plan.strides[0].back(), sb = plan.strides[1].back();
  for_each_row<2>(plan, [&](const std::array<int64_t, 2>& off, int64_t o, int64_t n) {
    binary_row(f, a + off[0], sa, b + off[1], sb, out + o, n);
  });
}

template <BinaryOp op>
void binary_dispatch(DType t, const void* a, const void* b, void* out, const BinaryLoop& loop) {
  dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (Binary<op, T>::supported())
      binary_typed<op, T>(static_cast<const T*>(a), static_cast<const T*>(b), out, loop);
  });
}

// ---- unary ------------------------------------------------------------------------------------
template <UnaryOp op, class T>
auto unary_apply(T v) {
  using C = Compute<T>;
  C x = load(v);
  constexpr bool kFloat = std::is_floating_point_v<C>;
  if constexpr (op == UnaryOp::neg) {
    if constexpr (std::is_same_v<C, bool>)
      return store<T>(x);
    else
      return store<T>(wrapping_neg(x));
  } else if constexpr (op == UnaryOp::abs) {
    if constexpr (kFloat)
      return store<T>(std::fabs(x));
    else if constexpr (std::is_signed_v<C>)
      return store<T>(x < 0 ? wrapping_neg(x) : x);  // abs(INT_MIN) is INT_MIN, as in XLA
    else
      return store<T>(x);
  } else if constexpr (op == UnaryOp::sign) {
    if constexpr (kFloat)
      return store<T>(x != x ? x : x > 0 ? C(1) : x < 0 ? C(-1) : x);
    else if constexpr (std::is_same_v<C, bool>)
      return store<T>(x);
    else
      return store<T>(C(x > 0 ? 1 : (std::is_signed_v<C> && x < 0) ? C(-1) : 0));
  } else if constexpr (op == UnaryOp::floor)
    return store<T>(std::floor(x));
  else if constexpr (op == UnaryOp::ceil)
    return store<T>(std::ceil(x));
  else if constexpr (op == UnaryOp::round_away)
    return store<T>(std::round(x));
  else if constexpr (op == UnaryOp::round_even)
    return store<T>(std::nearbyint(x));
  else if constexpr (op == UnaryOp::is_finite)
    return bool(std::isfinite(x));
  else if constexpr (op == UnaryOp::bit_not) {
    if constexpr (std::is_same_v<C, bool>)
      return store<T>(!x);
    else
      return store<T>(C(~x));
  } else if constexpr (op == UnaryOp::square) {
    return store<T>(wrapping_mul(x, x));
  } else if constexpr (op == UnaryOp::population_count) {
    return store<T>(C(std::popcount(std::make_unsigned_t<C>(x))));
  } else if constexpr (op == UnaryOp::clz) {
    return store<T>(C(std::countl_zero(std::make_unsigned_t<C>(x))));
  } else {
    return v;
  }
}

template <UnaryOp op, class T>
constexpr bool unary_supported() {
  using C = Compute<T>;
  constexpr bool kFloat = std::is_floating_point_v<C>;
  constexpr bool kBool = std::is_same_v<C, bool>;
  switch (op) {
    case UnaryOp::floor:
    case UnaryOp::ceil:
    case UnaryOp::round_away:
    case UnaryOp::round_even:
    case UnaryOp::is_finite:
      return kFloat;
    case UnaryOp::bit_not:
      return !kFloat;
    case UnaryOp::population_count:
    case UnaryOp::clz:
      return !kFloat && !kBool;
    default:
      return true;
  }
}

// y[i] = f(x[i]) along one row; compiled for AVX2 too (clones.h).
template <class F, class T, class R>
SPMD_VECTOR_CLONES void unary_row(F f, const T* x, R* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}

template <UnaryOp op>
void unary_dispatch(DType t, const void* in, void* out, int64_t n) {
  dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (unary_supported<op, T>()) {
      const T* x = static_cast<const T*>(in);
      using R = decltype(unary_apply<op, T>(T{}));
      R* y = static_cast<R*>(out);
      parallel_for(n, kGrain, [&](int64_t b, int64_t e) {
        unary_row([](T v) { return unary_apply<op, T>(v); }, x + b, y + b, e - b);
      });
    }
  });
}

}  // namespace

// XLA rewrites a division by a broadcast divisor into a multiplication by its reciprocal, and
// evaluates 16-bit floats in float32 with one rounding at the end; doing the same keeps results
// bit-identical with JAX.
void divide_by_broadcast(DType t, const void* a, const Shape& a_shape, const void* b,
                         const Shape& b_shape, void* out, const Shape& out_shape) {
  const bool half = t == DType::bfloat16 || t == DType::float16;
  const DType ct = half ? DType::float32 : t;
  std::vector<std::byte> recip(size_t(b_shape.size() * itemsize(ct)));
  dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    using C = Compute<T>;
    const T* bv = static_cast<const T*>(b);
    C* r = reinterpret_cast<C*>(recip.data());
    for (int64_t i = 0; i < b_shape.size(); ++i) r[i] = C(1) / load(bv[i]);
  });
  if (!half) return binary(BinaryOp::mul, t, a, a_shape, recip.data(), b_shape, out, out_shape);
  std::vector<std::byte> a32(size_t(a_shape.size() * 4)), out32(size_t(out_shape.size() * 4));
  convert(a, t, a32.data(), DType::float32, a_shape.size());
  binary(BinaryOp::mul, DType::float32, a32.data(), a_shape, recip.data(), b_shape, out32.data(),
         out_shape);
  convert(out32.data(), DType::float32, out, t, out_shape.size());
}

bool is_comparison(BinaryOp op) {
  return op >= BinaryOp::eq && op <= BinaryOp::ge;
}

void binary(BinaryOp op, DType t, const void* a, const Shape& a_shape, const void* b,
            const Shape& b_shape, void* out, const Shape& out_shape) {
  if (out_shape.size() == 0) return;
  if (op == BinaryOp::div && is_floating(t) && !(b_shape == out_shape))
    return divide_by_broadcast(t, a, a_shape, b, b_shape, out, out_shape);
  // Operands of the output's shape or 0-d need no plan (the common case, and fusion's tiles).
  const bool a_flat = a_shape.ndim() == 0 || a_shape == out_shape;
  const bool b_flat = b_shape.ndim() == 0 || b_shape == out_shape;
  LoopPlan plan;
  BinaryLoop loop{nullptr, a_shape.ndim() == 0 ? 0 : 1, b_shape.ndim() == 0 ? 0 : 1,
                  out_shape.size()};
  if (!a_flat || !b_flat) {
    const Shape ins[2] = {a_shape, b_shape};
    plan = make_plan(out_shape, ins);
    loop.plan = &plan;
  }
  switch (op) {
#define SPMD_BINARY_CASE(name) \
  case BinaryOp::name:         \
    return binary_dispatch<BinaryOp::name>(t, a, b, out, loop);
    // clang-format off
    SPMD_BINARY_CASE(add)
    SPMD_BINARY_CASE(sub)
    SPMD_BINARY_CASE(mul)
    SPMD_BINARY_CASE(div)
    SPMD_BINARY_CASE(rem)
    SPMD_BINARY_CASE(pow)
    SPMD_BINARY_CASE(max)
    SPMD_BINARY_CASE(min)
    SPMD_BINARY_CASE(atan2)
    SPMD_BINARY_CASE(nextafter)
    SPMD_BINARY_CASE(eq)
    SPMD_BINARY_CASE(ne)
    SPMD_BINARY_CASE(lt)
    SPMD_BINARY_CASE(le)
    SPMD_BINARY_CASE(gt)
    SPMD_BINARY_CASE(ge)
    SPMD_BINARY_CASE(bit_and)
    SPMD_BINARY_CASE(bit_or)
    SPMD_BINARY_CASE(bit_xor)
    SPMD_BINARY_CASE(shift_left)
    SPMD_BINARY_CASE(shift_right_logical)
    SPMD_BINARY_CASE(shift_right_arithmetic)
    // clang-format on
#undef SPMD_BINARY_CASE
  }
}

void unary(UnaryOp op, DType t, const void* in, void* out, int64_t n) {
  switch (op) {
#define SPMD_UNARY_CASE(name) \
  case UnaryOp::name:         \
    return unary_dispatch<UnaryOp::name>(t, in, out, n);
    // clang-format off
    SPMD_UNARY_CASE(neg)
    SPMD_UNARY_CASE(abs)
    SPMD_UNARY_CASE(sign)
    SPMD_UNARY_CASE(floor)
    SPMD_UNARY_CASE(ceil)
    SPMD_UNARY_CASE(round_away)
    SPMD_UNARY_CASE(round_even)
    SPMD_UNARY_CASE(is_finite)
    SPMD_UNARY_CASE(bit_not)
    SPMD_UNARY_CASE(square)
    SPMD_UNARY_CASE(population_count)
    SPMD_UNARY_CASE(clz)
    SPMD_UNARY_CASE(copy)
    // clang-format on
#undef SPMD_UNARY_CASE
  }
}

void integer_pow(DType t, const void* in, void* out, int64_t n, int64_t y) {
  dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    using C = Compute<T>;
    if constexpr (!std::is_same_v<C, bool>) {
      const T* x = static_cast<const T*>(in);
      T* o = static_cast<T*>(out);
      parallel_for(n, kGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          C v = load(x[i]);
          C acc = 1, base = v;
          for (int64_t k = y < 0 ? -y : y; k; k >>= 1) {
            if (k & 1) acc = wrapping_mul(acc, base);
            base = wrapping_mul(base, base);
          }
          if constexpr (std::is_floating_point_v<C>) {
            if (y < 0) acc = C(1) / acc;
          }
          o[i] = store<T>(acc);
        }
      });
    }
  });
}

namespace {

// out[i] = w[i·sw] ? c1[i·s1] : c0[i·s0] along one range, strides 0 or 1, with the common cases
// spelled out so each vectorises; compiled for AVX2 too (clones.h). The selector is read as bytes
// and both cases are loaded for every element: GCC vectorises neither a loop over `bool` loads nor
// one that loads a case only where it is chosen, and the branch per element such a loop keeps is
// mispredicted half the time for a ReLU's mask (about 30 times slower than the vector blend).
template <class T>
SPMD_VECTOR_CLONES void select_row(const uint8_t* w, int64_t sw, const T* c0, int64_t s0,
                                   const T* c1, int64_t s1, T* out, int64_t n) {
  if (sw == 1 && s0 == 1 && s1 == 1) {
    for (int64_t i = 0; i < n; ++i) {
      const T x0 = c0[i], x1 = c1[i];
      out[i] = w[i] ? x1 : x0;
    }
  } else if (sw == 1 && s0 == 0 && s1 == 1) {
    const T x0 = *c0;
    for (int64_t i = 0; i < n; ++i) {
      const T x1 = c1[i];
      out[i] = w[i] ? x1 : x0;
    }
  } else if (sw == 1 && s0 == 1 && s1 == 0) {
    const T x1 = *c1;
    for (int64_t i = 0; i < n; ++i) {
      const T x0 = c0[i];
      out[i] = w[i] ? x1 : x0;
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const T x0 = c0[i * s0], x1 = c1[i * s1];
      out[i] = w[i * sw] ? x1 : x0;
    }
  }
}

}  // namespace

void select_n(DType which_t, const void* which, const Shape& which_shape,
              std::span<const void* const> cases, std::span<const Shape> case_shapes, DType t,
              void* out, const Shape& out_shape) {
  if (out_shape.size() == 0) return;
  auto flat = [&](const Shape& s) { return s.ndim() == 0 || s == out_shape; };
  if (which_t == DType::bool_ && cases.size() == 2 && flat(which_shape) && flat(case_shapes[0]) &&
      flat(case_shapes[1])) {
    // A bool selector between two operands of the output's shape or 0-d: no plan.
    const int64_t sw = which_shape.ndim() ? 1 : 0, s0 = case_shapes[0].ndim() ? 1 : 0,
                  s1 = case_shapes[1].ndim() ? 1 : 0;
    // bool is one byte holding 0 or 1.
    const uint8_t* w = static_cast<const uint8_t*>(which);
    return dispatch_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      const T* c0 = static_cast<const T*>(cases[0]);
      const T* c1 = static_cast<const T*>(cases[1]);
      T* o = static_cast<T*>(out);
      parallel_for(out_shape.size(), kGrain, [&](int64_t i, int64_t e) {
        select_row(w + i * sw, sw, c0 + i * s0, s0, c1 + i * s1, s1, o + i, e - i);
      });
    });
  }
  std::vector<Shape> shapes{which_shape};
  shapes.insert(shapes.end(), case_shapes.begin(), case_shapes.end());
  LoopPlan plan = make_plan(out_shape, shapes);
  const size_t item = size_t(itemsize(t));
  auto pick = [&](const auto* w) {
    dispatch_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      T* o = static_cast<T*>(out);
      const int64_t sw = plan.strides[0].back();
      for_each_row<8>(plan, [&](const std::array<int64_t, 8>& off, int64_t ob, int64_t n) {
        for (int64_t i = 0; i < n; ++i) {
          int64_t c = int64_t(w[off[0] + i * sw]);
          if (c < 0) c = 0;
          if (c >= int64_t(cases.size())) c = int64_t(cases.size()) - 1;
          o[ob + i] = static_cast<const T*>(
              cases[size_t(c)])[off[size_t(c) + 1] + i * plan.strides[size_t(c) + 1].back()];
        }
      });
    });
  };
  (void)item;
  if (which_t == DType::bool_)
    pick(static_cast<const bool*>(which));
  else
    pick(static_cast<const int32_t*>(which));
}

void clamp(DType t, const void* lo, const Shape& lo_shape, const void* x, const Shape& x_shape,
           const void* hi, const Shape& hi_shape, void* out, const Shape& out_shape) {
  if (out_shape.size() == 0) return;
  const Shape shapes[3] = {lo_shape, x_shape, hi_shape};
  LoopPlan plan = make_plan(out_shape, shapes);
  dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    using C = Compute<T>;
    const T* l = static_cast<const T*>(lo);
    const T* v = static_cast<const T*>(x);
    const T* h = static_cast<const T*>(hi);
    T* o = static_cast<T*>(out);
    const int64_t s0 = plan.strides[0].back(), s1 = plan.strides[1].back(),
                  s2 = plan.strides[2].back();
    for_each_row<3>(plan, [&](const std::array<int64_t, 3>& off, int64_t ob, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        C lv = load(l[off[0] + i * s0]), xv = load(v[off[1] + i * s1]),
          hv = load(h[off[2] + i * s2]);
        C r = xv < lv ? lv : xv;  // NaN x stays NaN
        r = r > hv ? hv : r;
        o[ob + i] = store<T>(r);
      }
    });
  });
}

void iota(DType t, const Shape& shape, int dimension, void* out) {
  const auto strides = shape.strides();
  const int64_t n = shape.size(), dim = shape[dimension], stride = strides[size_t(dimension)];
  dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out);
    parallel_for(n, kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) o[i] = store<T>(Compute<T>((i / stride) % dim));
    });
  });
}

}  // namespace spmd::cpu

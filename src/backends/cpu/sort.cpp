// Stable sorting of rows: each key becomes an unsigned integer whose order is the comparator's,
// rows are ordered key by key from the last (LSD radix sort for long rows, insertion or merge
// sort for short ones), and every operand is then gathered through the permutation.
#include "backends/cpu/sort.h"

#include "backends/cpu/parallel.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>

namespace spmd::cpu {
namespace {

// ---- keys as ordered unsigned integers ----------------------------------------------------------

// A float's bit pattern made sortable: sign-magnitude to offset order, after the comparator's
// canonicalisation (zeros and values XLA reads as zero become +0, every NaN the positive NaN).
template <class U>
U ordered_float_bits(U bits, U min_nonzero, U infinity, U nan) {
  constexpr U sign = U(1) << (sizeof(U) * 8 - 1);
  const U magnitude = bits & ~sign;
  if (magnitude < min_nonzero) bits = 0;
  if (magnitude > infinity) bits = nan;
  return (bits & sign) ? U(~bits) : U(bits | sign);
}

template <class T>
using KeyBits = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;

template <class T>
KeyBits<T> ordered_key(T v) {
  if constexpr (std::is_same_v<T, float>) {
    return ordered_float_bits<uint32_t>(std::bit_cast<uint32_t>(v), 0x00800000u, 0x7f800000u,
                                        0x7fc00000u);
  } else if constexpr (std::is_same_v<T, double>) {
    return ordered_float_bits<uint64_t>(std::bit_cast<uint64_t>(v), uint64_t(1) << 52,
                                        uint64_t(0x7ff) << 52, uint64_t(0x7ff8) << 48);
  } else if constexpr (std::is_same_v<T, bfloat16_t>) {
    return ordered_float_bits<uint16_t>(v.bits, 0x0080, 0x7f80, 0x7fc0);
  } else if constexpr (std::is_same_v<T, float16_t>) {
    return ordered_float_bits<uint16_t>(v.bits, 0x0001, 0x7c00, 0x7e00);
  } else if constexpr (std::is_signed_v<T>) {
    using S = std::make_signed_t<KeyBits<T>>;
    using U = KeyBits<T>;
    return U(S(v)) ^ (U(1) << (sizeof(U) * 8 - 1));
  } else {
    return KeyBits<T>(v);
  }
}

// ---- sorting (key, index) entries ---------------------------------------------------------------

template <class U>
struct Entry {
  U key;
  uint32_t index;
};

template <class U>
void insertion_sort(Entry<U>* a, size_t n) {
  for (size_t i = 1; i < n; ++i) {
    Entry<U> e = a[i];
    size_t j = i;
    for (; j > 0 && e.key < a[j - 1].key; --j) a[j] = a[j - 1];
    a[j] = e;
  }
}

// LSD radix sort on bytes; passes over a byte that every key shares are skipped.
template <class U>
void radix_sort(std::vector<Entry<U>>& a, std::vector<Entry<U>>& tmp) {
  constexpr int kBytes = sizeof(U);
  const size_t n = a.size();
  std::array<std::array<uint32_t, 256>, kBytes> counts{};
  for (const Entry<U>& e : a)
    for (int b = 0; b < kBytes; ++b) ++counts[size_t(b)][(e.key >> (8 * b)) & 0xff];
  tmp.resize(n);
  Entry<U>* src = a.data();
  Entry<U>* dst = tmp.data();
  for (int b = 0; b < kBytes; ++b) {
    std::array<uint32_t, 256>& c = counts[size_t(b)];
    if (c[(src[0].key >> (8 * b)) & 0xff] == n) continue;
    uint32_t sum = 0;
    for (uint32_t& v : c) sum += std::exchange(v, sum);
    for (size_t i = 0; i < n; ++i) dst[c[(src[i].key >> (8 * b)) & 0xff]++] = src[i];
    std::swap(src, dst);
  }
  if (src != a.data()) a.swap(tmp);
}

template <class U>
void stable_sort_entries(std::vector<Entry<U>>& a, std::vector<Entry<U>>& tmp) {
  if (a.size() <= 32) return insertion_sort(a.data(), a.size());
  if (a.size() < 256) {
    std::stable_sort(a.begin(), a.end(),
                     [](const Entry<U>& x, const Entry<U>& y) { return x.key < y.key; });
    return;
  }
  radix_sort(a, tmp);
}

// ---- rows ---------------------------------------------------------------------------------------

// Row r's element k lives at base(r) + k * stride.
struct RowLayout {
  int64_t rows, len, stride;
  int64_t base(int64_t r) const { return (r / stride) * len * stride + r % stride; }
};

// Per-thread scratch: the permutation and the entries of both key widths.
struct Scratch {
  std::vector<uint32_t> perm;
  std::vector<Entry<uint32_t>> e32, t32;
  std::vector<Entry<uint64_t>> e64, t64;
};

template <class T, class U>
void sort_by_key(const T* key, int64_t base, const RowLayout& row, bool first, Scratch& s,
                 std::vector<Entry<U>>& entries, std::vector<Entry<U>>& tmp) {
  entries.resize(size_t(row.len));
  for (size_t i = 0; i < entries.size(); ++i) {
    const uint32_t from = first ? uint32_t(i) : s.perm[i];
    entries[i] = {ordered_key(key[base + int64_t(from) * row.stride]), from};
  }
  stable_sort_entries(entries, tmp);
  for (size_t i = 0; i < entries.size(); ++i) s.perm[i] = entries[i].index;
}

// Orders row `base` by the keys, last key first, leaving the permutation in s.perm.
void order_row(std::span<const SortOperand> keys, int64_t base, const RowLayout& row, Scratch& s) {
  s.perm.resize(size_t(row.len));
  for (size_t k = keys.size(); k-- > 0;) {
    const bool first = k + 1 == keys.size();
    dispatch_dtype(keys[k].dtype, [&](auto tag) {
      using T = decltype(tag);
      const T* key = static_cast<const T*>(keys[k].in);
      if constexpr (sizeof(T) == 8)
        sort_by_key<T>(key, base, row, first, s, s.e64, s.t64);
      else
        sort_by_key<T>(key, base, row, first, s, s.e32, s.t32);
    });
  }
}

template <class E>
void gather_row(const void* in, void* out, int64_t base, const RowLayout& row,
                const std::vector<uint32_t>& perm) {
  const E* src = static_cast<const E*>(in) + base;
  E* dst = static_cast<E*>(out) + base;
  for (int64_t i = 0; i < row.len; ++i)
    dst[i * row.stride] = src[int64_t(perm[size_t(i)]) * row.stride];
}

void gather_operand(const SortOperand& op, int64_t base, const RowLayout& row,
                    const std::vector<uint32_t>& perm) {
  switch (itemsize(op.dtype)) {
    case 1:
      return gather_row<uint8_t>(op.in, op.out, base, row, perm);
    case 2:
      return gather_row<uint16_t>(op.in, op.out, base, row, perm);
    case 4:
      return gather_row<uint32_t>(op.in, op.out, base, row, perm);
    default:
      return gather_row<uint64_t>(op.in, op.out, base, row, perm);
  }
}

}  // namespace

void sort(std::span<const SortOperand> operands, int num_keys, const Shape& shape, int dimension) {
  if (shape.size() == 0) return;
  const int64_t len = shape[dimension];
  const RowLayout row{shape.size() / len, len, shape.strides()[size_t(dimension)]};
  const auto keys = operands.first(size_t(num_keys));
  parallel_for(row.rows, std::max<int64_t>(1, (int64_t(1) << 15) / len), [&](int64_t b, int64_t e) {
    Scratch scratch;
    for (int64_t r = b; r < e; ++r) {
      const int64_t base = row.base(r);
      order_row(keys, base, row, scratch);
      for (const SortOperand& op : operands) gather_operand(op, base, row, scratch.perm);
    }
  });
}

}  // namespace spmd::cpu

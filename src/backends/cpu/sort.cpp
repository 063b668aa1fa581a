// Stable sort of index permutations per row, then a gather of every operand by the permutation.
#include "backends/cpu/sort.h"

#include "backends/cpu/parallel.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <type_traits>
#include <vector>

namespace spmd::cpu {
namespace {

// A key in a totally ordered integer form: floats map their bits so that integer order is
// JAX's total order (NaNs after +inf, -NaN before -inf); integers keep their value.
template <class T>
int64_t total_order_key(T v) {
  if constexpr (std::is_same_v<T, bfloat16_t> || std::is_same_v<T, float16_t>) {
    int16_t b = int16_t(v.bits);
    return b < 0 ? int64_t(int16_t(b ^ 0x7fff)) : int64_t(b);
  } else if constexpr (std::is_floating_point_v<T>) {
    using I = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
    I b = std::bit_cast<I>(v);
    constexpr I mask = std::numeric_limits<I>::max();
    return b < 0 ? int64_t(I(b ^ mask)) : int64_t(b);
  } else {
    return int64_t(v);
  }
}

// Row r's element k lives at base(r) + k * stride.
struct RowLayout {
  int64_t rows, len, stride;
  int64_t base(int64_t r) const { return (r / stride) * len * stride + r % stride; }
};

}  // namespace

void sort(std::span<const SortOperand> operands, int num_keys, const Shape& shape, int dimension) {
  const auto strides = shape.strides();
  RowLayout layout{shape.size() / std::max<int64_t>(1, shape[dimension]), shape[dimension],
                   strides[size_t(dimension)]};
  if (shape.size() == 0) return;
  parallel_for(
      layout.rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, layout.len)),
      [&](int64_t b, int64_t e) {
        std::vector<int64_t> perm(size_t(layout.len));
        std::vector<std::vector<int64_t>> keys(size_t(num_keys), std::vector<int64_t>(perm.size()));
        for (int64_t r = b; r < e; ++r) {
          const int64_t base = layout.base(r);
          for (int k = 0; k < num_keys; ++k)
            dispatch_dtype(operands[size_t(k)].dtype, [&](auto tag) {
              using T = decltype(tag);
              const T* in = static_cast<const T*>(operands[size_t(k)].in);
              for (int64_t i = 0; i < layout.len; ++i)
                keys[size_t(k)][size_t(i)] = total_order_key(in[base + i * layout.stride]);
            });
          std::iota(perm.begin(), perm.end(), 0);
          std::stable_sort(perm.begin(), perm.end(), [&](int64_t x, int64_t y) {
            for (const auto& key : keys) {
              if (key[size_t(x)] != key[size_t(y)]) return key[size_t(x)] < key[size_t(y)];
            }
            return false;
          });
          for (const SortOperand& op : operands) {
            const size_t item = size_t(itemsize(op.dtype));
            const auto* in = static_cast<const char*>(op.in);
            auto* out = static_cast<char*>(op.out);
            for (int64_t i = 0; i < layout.len; ++i)
              std::memcpy(out + (base + i * layout.stride) * int64_t(item),
                          in + (base + perm[size_t(i)] * layout.stride) * int64_t(item), item);
          }
        }
      });
}

}  // namespace spmd::cpu

// Reduction and scan kernels. A reduction is first simplified to groups of adjacent kept or
// reduced dims. If the innermost group is reduced, each output reduces contiguous runs; if it is
// kept, each output row accumulates whole input rows. Work is cut into blocks whose boundaries
// depend on the shape only, and block results combine in a fixed pairwise order, so the thread
// count never changes a result.
#include "backends/cpu/reduce.h"

#include "backends/cpu/clones.h"
#include "backends/cpu/convert.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/wrapping.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace spmd::cpu {
namespace {

constexpr int64_t kLanes = 64;        // independent accumulators over a contiguous run
constexpr int64_t kLeaf = 2048;       // elements per leaf of the pairwise tree
constexpr int64_t kBlockLeaves = 32;  // leaves per block, the unit of parallel work
constexpr int64_t kBlock = kLeaf * kBlockLeaves;
constexpr int64_t kGrain = 1 << 15;  // elements per thread below which work stays serial
constexpr int64_t kColumns = 4096;   // columns per unit of work when accumulating rows
constexpr int64_t kWide = 64;        // rows narrower than this are accumulated several at once
constexpr int64_t kScanBlock = 1 << 16;

// The innermost loops are compiled for AVX2 too (clones.h).

template <class T>
constexpr bool kHalf = std::is_same_v<T, bfloat16_t> || std::is_same_v<T, float16_t>;
// Accumulation type: 16-bit floats accumulate in float32 and round once at the end; bools are
// bytes (0 or 1) so they can live in vectors.
template <class T>
using Acc =
    std::conditional_t<kHalf<T>, float, std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>>;

// ---- operators --------------------------------------------------------------------------------
template <class A>
using Bits = std::conditional_t<sizeof(A) == 8, uint64_t, uint32_t>;

// XLA's max/min: NaN wins, and -0.0 orders below +0.0. Both operand orders of the plain
// select agree except on equal zeros, where their bitwise and (or) picks +0.0 (-0.0); written
// this way the loops vectorise to max/min instructions.
template <class A>
A max_of(A a, A b) {
  if constexpr (std::is_floating_point_v<A>) {
    const A ab = a > b ? a : b, ba = b > a ? b : a;
    const A r = std::bit_cast<A>(Bits<A>(std::bit_cast<Bits<A>>(ab) & std::bit_cast<Bits<A>>(ba)));
    const A r_or_a = a != a ? a : r;
    return b != b ? b : r_or_a;
  } else {
    return a > b ? a : b;
  }
}

template <class A>
A min_of(A a, A b) {
  if constexpr (std::is_floating_point_v<A>) {
    const A ab = a < b ? a : b, ba = b < a ? b : a;
    const A r = std::bit_cast<A>(Bits<A>(std::bit_cast<Bits<A>>(ab) | std::bit_cast<Bits<A>>(ba)));
    const A r_or_a = a != a ? a : r;
    return b != b ? b : r_or_a;
  } else {
    return a < b ? a : b;
  }
}

template <ReduceOp kOp, class A>
struct Reducer {
  static A identity() {
    if constexpr (kOp == ReduceOp::sum || kOp == ReduceOp::bit_or || kOp == ReduceOp::bit_xor)
      return A(0);
    else if constexpr (kOp == ReduceOp::prod)
      return A(1);
    else if constexpr (kOp == ReduceOp::bit_and)
      return A(~A(0));
    else if constexpr (kOp == ReduceOp::max)
      return std::is_floating_point_v<A> ? -std::numeric_limits<A>::infinity()
                                         : std::numeric_limits<A>::lowest();
    else
      return std::is_floating_point_v<A> ? std::numeric_limits<A>::infinity()
                                         : std::numeric_limits<A>::max();
  }
  static A combine(A a, A b) {
    if constexpr (kOp == ReduceOp::sum)
      return wrapping_add(a, b);
    else if constexpr (kOp == ReduceOp::prod)
      return wrapping_mul(a, b);
    else if constexpr (kOp == ReduceOp::max)
      return max_of(a, b);
    else if constexpr (kOp == ReduceOp::min)
      return min_of(a, b);
    else if constexpr (kOp == ReduceOp::bit_and)
      return A(a & b);
    else if constexpr (kOp == ReduceOp::bit_or)
      return A(a | b);
    else
      return A(a ^ b);
  }
};

// log(exp(a) + exp(b)) as lax.logaddexp computes it.
template <class A>
struct LogAddExp {
  static A identity() { return -std::numeric_limits<A>::infinity(); }
  static A combine(A a, A b) {
    A delta = a - b;
    if (delta != delta) return a + b;  // NaN, or two equal infinities
    return std::max(a, b) + std::log1p(std::exp(-std::abs(delta)));
  }
};

template <ReduceOp kOp, class T>
constexpr bool kReduceSupported = kOp == ReduceOp::max || kOp == ReduceOp::min
                                      ? true
                                      : (kOp == ReduceOp::sum || kOp == ReduceOp::prod
                                             ? !std::is_same_v<T, bool>
                                             : std::is_integral_v<T>);

// ---- pairwise combination -----------------------------------------------------------------------
// Combines a stream of equally wide partial results pairwise. The tree depends only on how many
// partials arrive: aligned power-of-two groups combine as they complete, and what remains folds
// from the right. kWidth > 0 fixes the width at compile time (1 for scalars).
template <class Op, class A, int64_t kWidth = 0>
class Cascade {
 public:
  explicit Cascade(int64_t width = kWidth) : width_(kWidth > 0 ? kWidth : width) {}

  // Adds the next partial; `partial` is used as scratch.
  void push(A* partial) {
    int level = 0;
    for (uint64_t c = count_; c & 1; c >>= 1, ++level) combine_into(at(level), partial);
    if constexpr (kWidth == 0) {
      if (store_.size() < size_t((level + 1) * width_)) store_.resize(size_t((level + 1) * width_));
    }
    std::copy_n(partial, width(), at(level));
    ++count_;
  }

  // out = every partial pushed, combined; the identity when there were none.
  void finish(A* out) const {
    if (count_ == 0) {
      std::fill_n(out, width(), Op::identity());
      return;
    }
    std::copy_n(at(std::countr_zero(count_)), width(), out);
    for (uint64_t c = count_ & (count_ - 1); c != 0; c &= c - 1)
      combine_into(at(std::countr_zero(c)), out);
  }

 private:
  int64_t width() const { return kWidth > 0 ? kWidth : width_; }
  A* at(int level) { return store_.data() + level * width(); }
  const A* at(int level) const { return store_.data() + level * width(); }
  void combine_into(const A* left, A* right) const {
    for (int64_t j = 0; j < width(); ++j) right[j] = Op::combine(left[j], right[j]);
  }

  int64_t width_;
  uint64_t count_ = 0;
  // One partial per level of the tree (only the levels set in count_ are meaningful);
  // fixed-width cascades need no heap.
  std::conditional_t<(kWidth > 0), std::array<A, size_t(64 * kWidth)>, std::vector<A>> store_;
};

// ---- reducing contiguous runs -------------------------------------------------------------------
// n <= kLeaf elements with kLanes independent accumulators, folded pairwise.
template <class Op, class T, class A = Acc<T>>
SPMD_VECTOR_CLONES A reduce_leaf(const T* x, int64_t n) {
  if (n < kLanes) {
    A acc = Op::identity();
    for (int64_t i = 0; i < n; ++i) acc = Op::combine(acc, A(x[i]));
    return acc;
  }
  A lanes[kLanes];
  for (A& l : lanes) l = Op::identity();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) lanes[j] = Op::combine(lanes[j], A(x[i + j]));
  for (int64_t j = 0; i + j < n; ++j) lanes[j] = Op::combine(lanes[j], A(x[i + j]));
  for (int64_t w = kLanes / 2; w > 0; w /= 2)
    for (int64_t j = 0; j < w; ++j) lanes[j] = Op::combine(lanes[j], lanes[j + w]);
  return lanes[0];
}

template <class Op, class T, class A = Acc<T>>
A reduce_block(const T* x, int64_t n) {
  if (n <= kLeaf) return reduce_leaf<Op>(x, n);
  Cascade<Op, A, 1> c;
  for (int64_t i = 0; i < n; i += kLeaf) {
    A leaf = reduce_leaf<Op>(x + i, std::min(kLeaf, n - i));
    c.push(&leaf);
  }
  A r;
  c.finish(&r);
  return r;
}

// One contiguous run of any length; `parallel` spreads its blocks over the threads.
template <class Op, class T, class A = Acc<T>>
A reduce_run(const T* x, int64_t n, bool parallel) {
  if (n <= kBlock) return reduce_block<Op>(x, n);
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<A> partial(static_cast<size_t>(blocks), Op::identity());
  auto run = [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      partial[size_t(b)] = reduce_block<Op>(x + b * kBlock, std::min(kBlock, n - b * kBlock));
  };
  if (parallel)
    parallel_for(blocks, 1, run);
  else
    run(0, blocks);
  Cascade<Op, A, 1> c;
  for (A& p : partial) c.push(&p);
  A r;
  c.finish(&r);
  return r;
}

// ---- accumulating rows --------------------------------------------------------------------------
// acc[j] = op over rows [r0, r1) of x[r * ld + j], for j < width. With k > 1 (narrow full rows)
// k consecutive rows are taken together as one row of k * width lanes.
template <class Op, class T, class A = Acc<T>>
SPMD_VECTOR_CLONES void reduce_row_leaf(const T* x, int64_t ld, int64_t width, int64_t k,
                                        int64_t r0, int64_t r1, A* acc) {
  if (k == 1) {
    std::fill_n(acc, width, Op::identity());
    for (int64_t r = r0; r < r1; ++r) {
      const T* row = x + r * ld;
      for (int64_t j = 0; j < width; ++j) acc[j] = Op::combine(acc[j], A(row[j]));
    }
    return;
  }
  A wide[kWide];
  const int64_t w = k * width, full = r0 + (r1 - r0) / k * k;
  std::fill_n(wide, w, Op::identity());
  for (int64_t r = r0; r < full; r += k) {
    const T* row = x + r * ld;
    for (int64_t j = 0; j < w; ++j) wide[j] = Op::combine(wide[j], A(row[j]));
  }
  for (int64_t r = full; r < r1; ++r)
    for (int64_t j = 0; j < width; ++j) wide[j] = Op::combine(wide[j], A(x[r * ld + j]));
  for (int64_t j = 0; j < width; ++j) {
    acc[j] = wide[j];
    for (int64_t q = 1; q < k; ++q) acc[j] = Op::combine(acc[j], wide[q * width + j]);
  }
}

// out[j] = op over r < rows of x[r * ld + j], for j < width.
template <class Op, class T, class A = Acc<T>>
void reduce_rows(const T* x, int64_t rows, int64_t ld, int64_t width, bool parallel, A* out) {
  // Narrow full rows are taken k at a time as one wide row of k * width lanes.
  const int64_t k = width == ld && ld < kWide ? kWide / ld : 1;
  const int64_t leaf_rows = (std::max<int64_t>(16, kLeaf / ld) + k - 1) / k * k;
  if (rows <= leaf_rows) {
    reduce_row_leaf<Op>(x, ld, width, k, 0, rows, out);
    return;
  }
  const int64_t block_rows = leaf_rows * kBlockLeaves;
  auto block = [&](int64_t b, A* result, A* scratch) {
    const int64_t r0 = b * block_rows, r1 = std::min(rows, r0 + block_rows);
    Cascade<Op, A> c(width);
    for (int64_t r = r0; r < r1; r += leaf_rows) {
      reduce_row_leaf<Op>(x, ld, width, k, r, std::min(r1, r + leaf_rows), scratch);
      c.push(scratch);
    }
    c.finish(result);
  };
  const int64_t blocks = (rows + block_rows - 1) / block_rows;
  Cascade<Op, A> top(width);
  if (parallel && blocks > 1) {
    std::vector<A> partial(static_cast<size_t>(blocks * width));
    parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
      std::vector<A> scratch(static_cast<size_t>(width));
      for (int64_t b = b0; b < b1; ++b) block(b, &partial[size_t(b * width)], scratch.data());
    });
    for (int64_t b = 0; b < blocks; ++b) top.push(&partial[size_t(b * width)]);
  } else {
    std::vector<A> result(static_cast<size_t>(width)), scratch(static_cast<size_t>(width));
    for (int64_t b = 0; b < blocks; ++b) {
      block(b, result.data(), scratch.data());
      top.push(result.data());
    }
  }
  top.finish(out);
}

// ---- layout -------------------------------------------------------------------------------------
struct Group {
  int64_t size, stride;
};

// Offsets of a multi-index over `groups`, stepped in row-major order.
class Odometer {
 public:
  explicit Odometer(const std::vector<Group>& groups) : groups_(groups), index_(groups.size(), 0) {}
  void seek(int64_t linear) {
    offset_ = 0;
    for (size_t i = groups_.size(); i-- > 0;) {
      index_[i] = linear % groups_[i].size;
      linear /= groups_[i].size;
      offset_ += index_[i] * groups_[i].stride;
    }
  }
  void next() {
    for (size_t i = groups_.size(); i-- > 0;) {
      offset_ += groups_[i].stride;
      if (++index_[i] < groups_[i].size) return;
      offset_ -= groups_[i].size * groups_[i].stride;
      index_[i] = 0;
    }
  }
  int64_t offset() const { return offset_; }

 private:
  const std::vector<Group>& groups_;
  std::vector<int64_t> index_;
  int64_t offset_ = 0;
};

int64_t count(const std::vector<Group>& groups) {
  int64_t n = 1;
  for (const Group& g : groups) n *= g.size;
  return n;
}

// The loops of one reduction. In the run case the innermost group (size n) is reduced; in the
// row case it is kept, and `rows` is the reduced group just outside it (stride n).
struct Plan {
  std::vector<Group> kept;     // kept groups, outermost first, without the row case's n
  std::vector<Group> reduced;  // reduced groups other than the run or the rows
  int64_t n = 1;
  int64_t rows = 1;
  bool row_case = false;
};

Plan make_plan(const Shape& shape, const std::vector<bool>& is_reduced) {
  struct Dim {
    int64_t size, stride;
    bool reduced;
  };
  std::vector<Dim> dims;
  std::vector<int64_t> strides = shape.strides();
  for (int d = 0; d < shape.ndim(); ++d) {
    if (shape[d] == 1) continue;
    if (!dims.empty() && dims.back().reduced == is_reduced[size_t(d)]) {
      dims.back().size *= shape[d];
      dims.back().stride = strides[size_t(d)];
    } else {
      dims.push_back({shape[d], strides[size_t(d)], is_reduced[size_t(d)]});
    }
  }
  Plan p;
  p.row_case = !dims.back().reduced;
  p.n = dims.back().size;
  if (p.row_case) p.rows = dims[dims.size() - 2].size;
  const size_t inner = p.row_case ? dims.size() - 2 : dims.size() - 1;
  for (size_t i = 0; i < inner; ++i)
    (dims[i].reduced ? p.reduced : p.kept).push_back({dims[i].size, dims[i].stride});
  return p;
}

template <class Op, class T>
void reduce_runs(const T* x, const Plan& p, T* out) {
  using A = Acc<T>;
  const int64_t outputs = count(p.kept), segments = count(p.reduced), n = p.n;
  auto one = [&](int64_t base, bool parallel) -> A {
    if (segments == 1) return reduce_run<Op>(x + base, n, parallel);
    Cascade<Op, A, 1> c;
    Odometer seg(p.reduced);
    for (int64_t m = 0; m < segments; ++m, seg.next()) {
      A r = reduce_run<Op>(x + base + seg.offset(), n, parallel);
      c.push(&r);
    }
    A r;
    c.finish(&r);
    return r;
  };
  if (segments == 1 && n < kLanes) {  // short runs: the leaf's serial loop, inlined
    parallel_for(outputs, std::max<int64_t>(1, kGrain / n), [&](int64_t o0, int64_t o1) {
      Odometer o(p.kept);
      o.seek(o0);
      for (int64_t i = o0; i < o1; ++i, o.next()) {
        const T* run = x + o.offset();
        A acc = Op::identity();
        for (int64_t j = 0; j < n; ++j) acc = Op::combine(acc, A(run[j]));
        out[i] = T(acc);
      }
    });
    return;
  }
  if (outputs >= max_threads() || segments > 1 || n < 2 * kBlock) {
    parallel_for(outputs, std::max<int64_t>(1, kGrain / (segments * n)),
                 [&](int64_t o0, int64_t o1) {
                   Odometer o(p.kept);
                   o.seek(o0);
                   for (int64_t i = o0; i < o1; ++i, o.next()) out[i] = T(one(o.offset(), false));
                 });
    return;
  }
  Odometer o(p.kept);
  for (int64_t i = 0; i < outputs; ++i, o.next()) out[i] = T(one(o.offset(), true));
}

template <class Op, class T>
void reduce_row_groups(const T* x, const Plan& p, T* out) {
  using A = Acc<T>;
  const int64_t groups = count(p.kept), segments = count(p.reduced), n = p.n;
  const int64_t chunks = (n + kColumns - 1) / kColumns, units = groups * chunks;
  // One output row piece: columns [c0, c0 + width) of output group g.
  auto unit = [&](int64_t u, bool parallel, std::vector<A>& acc, std::vector<A>& tmp) {
    const int64_t g = u / chunks, c0 = u % chunks * kColumns, width = std::min(kColumns, n - c0);
    Odometer o(p.kept);
    o.seek(g);
    const T* base = x + o.offset() + c0;
    if (segments == 1) {
      reduce_rows<Op>(base, p.rows, n, width, parallel, acc.data());
    } else {
      Cascade<Op, A> c(width);
      Odometer seg(p.reduced);
      for (int64_t m = 0; m < segments; ++m, seg.next()) {
        reduce_rows<Op>(base + seg.offset(), p.rows, n, width, parallel, tmp.data());
        c.push(tmp.data());
      }
      c.finish(acc.data());
    }
    T* dst = out + g * n + c0;
    for (int64_t j = 0; j < width; ++j) dst[j] = T(acc[size_t(j)]);
  };
  const int64_t per_unit = segments * p.rows * std::min(n, kColumns);
  if (units >= max_threads() || segments > 1 || p.rows * std::min(n, kColumns) < kGrain) {
    parallel_for(units, std::max<int64_t>(1, kGrain / per_unit), [&](int64_t u0, int64_t u1) {
      std::vector<A> acc(static_cast<size_t>(std::min(n, kColumns))), tmp(acc.size());
      for (int64_t u = u0; u < u1; ++u) unit(u, false, acc, tmp);
    });
    return;
  }
  std::vector<A> acc(static_cast<size_t>(std::min(n, kColumns))), tmp(acc.size());
  for (int64_t u = 0; u < units; ++u) unit(u, true, acc, tmp);
}

template <class Op, class T>
void reduce_typed(const T* x, const Shape& shape, std::span<const int64_t> axes, T* out) {
  std::vector<bool> is_reduced(size_t(shape.ndim()), false);
  for (int64_t a : axes) is_reduced[size_t(a)] = true;
  int64_t outputs = 1, reduced = 1;
  for (int d = 0; d < shape.ndim(); ++d) (is_reduced[size_t(d)] ? reduced : outputs) *= shape[d];
  if (outputs == 0) return;
  if (reduced == 0) {
    std::fill_n(out, outputs, T(Op::identity()));
    return;
  }
  if (reduced == 1) {  // only size-1 dims are reduced: the elements stay in order
    std::memcpy(static_cast<void*>(out), x, size_t(outputs) * sizeof(T));
    return;
  }
  Plan p = make_plan(shape, is_reduced);
  if (p.row_case)
    reduce_row_groups<Op>(x, p, out);
  else
    reduce_runs<Op>(x, p, out);
}

// ---- argmax / argmin ----------------------------------------------------------------------------
template <bool kMax, class T>
void arg_reduce_typed(const T* x, int64_t outer, int64_t n, int64_t inner, int64_t* out) {
  using A = Acc<T>;
  using Op = Reducer<kMax ? ReduceOp::max : ReduceOp::min, A>;
  // First index in [b, e) holding `best` (a NaN best matches the first NaN).
  auto find = [](const T* row, int64_t b, int64_t e, A best) {
    if (best != best) {
      for (int64_t i = b; i < e; ++i)
        if (A(row[i]) != A(row[i])) return i;
    } else {
      for (int64_t i = b; i < e; ++i)
        if (A(row[i]) == best) return i;
    }
    return e;
  };
  if (inner == 1 && outer == 1 && n >= 2 * kBlock) {
    const A best = reduce_run<Op>(x, n, true);
    const int64_t blocks = (n + kBlock - 1) / kBlock;
    std::vector<int64_t> found(static_cast<size_t>(blocks));
    parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t e = std::min(n, (b + 1) * kBlock), i = find(x, b * kBlock, e, best);
        found[size_t(b)] = i < e ? i : n;
      }
    });
    out[0] = *std::min_element(found.begin(), found.end());
    return;
  }
  if (inner == 1) {
    parallel_for(outer, std::max<int64_t>(1, kGrain / n), [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) {
        const T* row = x + o * n;
        out[o] = find(row, 0, n, reduce_run<Op>(row, n, false));
      }
    });
    return;
  }
  const int64_t chunks = (inner + kColumns - 1) / kColumns;
  parallel_for(outer * chunks, std::max<int64_t>(1, kGrain / (n * std::min(inner, kColumns))),
               [&](int64_t u0, int64_t u1) {
                 std::vector<A> best(static_cast<size_t>(std::min(inner, kColumns)));
                 for (int64_t u = u0; u < u1; ++u) {
                   const int64_t o = u / chunks, c0 = u % chunks * kColumns;
                   const int64_t width = std::min(kColumns, inner - c0);
                   const T* base = x + o * n * inner + c0;
                   int64_t* idx = out + o * inner + c0;
                   for (int64_t j = 0; j < width; ++j) best[size_t(j)] = A(base[j]), idx[j] = 0;
                   for (int64_t i = 1; i < n; ++i) {
                     const T* row = base + i * inner;
                     for (int64_t j = 0; j < width; ++j) {
                       const A v = A(row[j]), b = best[size_t(j)];
                       const bool take = (kMax ? v > b : v < b) || (v != v && b == b);
                       best[size_t(j)] = take ? v : b;
                       idx[j] = take ? i : idx[j];
                     }
                   }
                 }
               });
}

// ---- scans --------------------------------------------------------------------------------------
// Scans one row of n elements (stride 1). Rows longer than kScanBlock are scanned in blocks:
// block totals, their running prefix, then each block from its prefix.
template <class Op, class T>
void scan_row(const T* x, int64_t n, bool reverse, bool parallel, T* out) {
  using A = Acc<T>;
  auto pos = [&](int64_t p) { return reverse ? n - 1 - p : p; };
  auto scan = [&](int64_t p0, int64_t p1, A carry) {
    for (int64_t p = p0; p < p1; ++p) {
      carry = Op::combine(carry, A(x[pos(p)]));
      out[pos(p)] = T(carry);
    }
  };
  if (n <= kScanBlock) {
    scan(0, n, Op::identity());
    return;
  }
  const int64_t blocks = (n + kScanBlock - 1) / kScanBlock;
  std::vector<A> prefix(static_cast<size_t>(blocks), Op::identity());
  // Block totals reduce pairwise (vectorised) rather than serially like the scan itself.
  auto totals = [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t p0 = b * kScanBlock, p1 = std::min(n, p0 + kScanBlock);
      prefix[size_t(b)] = reduce_run<Op>(x + (reverse ? n - p1 : p0), p1 - p0, false);
    }
  };
  auto scans = [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      scan(b * kScanBlock, std::min(n, (b + 1) * kScanBlock), prefix[size_t(b)]);
  };
  if (parallel)
    parallel_for(blocks - 1, 1, totals);
  else
    totals(0, blocks - 1);
  A running = Op::identity();
  for (A& p : prefix) {
    const A total = p;
    p = running;
    running = Op::combine(running, total);
  }
  if (parallel)
    parallel_for(blocks, 1, scans);
  else
    scans(0, blocks);
}

template <class Op, class T>
void cumulative_typed(const T* x, int64_t outer, int64_t n, int64_t inner, bool reverse, T* out) {
  using A = Acc<T>;
  if (inner == 1) {
    if (outer < max_threads() && n > kScanBlock) {
      for (int64_t o = 0; o < outer; ++o) scan_row<Op>(x + o * n, n, reverse, true, out + o * n);
      return;
    }
    parallel_for(outer, std::max<int64_t>(1, kGrain / n), [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) scan_row<Op>(x + o * n, n, reverse, false, out + o * n);
    });
    return;
  }
  const int64_t chunks = (inner + kColumns - 1) / kColumns;
  parallel_for(outer * chunks, std::max<int64_t>(1, kGrain / (n * std::min(inner, kColumns))),
               [&](int64_t u0, int64_t u1) {
                 std::vector<A> acc(static_cast<size_t>(std::min(inner, kColumns)));
                 for (int64_t u = u0; u < u1; ++u) {
                   const int64_t o = u / chunks, c0 = u % chunks * kColumns;
                   const int64_t width = std::min(kColumns, inner - c0);
                   std::fill_n(acc.begin(), width, Op::identity());
                   for (int64_t p = 0; p < n; ++p) {
                     const int64_t off = o * n * inner + (reverse ? n - 1 - p : p) * inner + c0;
                     const T* src = x + off;
                     T* dst = out + off;
                     for (int64_t j = 0; j < width; ++j) {
                       acc[size_t(j)] = Op::combine(acc[size_t(j)], A(src[j]));
                       dst[j] = T(acc[size_t(j)]);
                     }
                   }
                 }
               });
}

// Sizes before, along and after `axis`.
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};
AxisSplit split_at(const Shape& shape, int axis) {
  AxisSplit s;
  for (int d = 0; d < shape.ndim(); ++d)
    (d < axis ? s.outer : d == axis ? s.n : s.inner) *= shape[d];
  return s;
}

template <class F>
void dispatch_reduce_op(ReduceOp op, F&& f) {
  switch (op) {
    case ReduceOp::sum:
      return f.template operator()<ReduceOp::sum>();
    case ReduceOp::prod:
      return f.template operator()<ReduceOp::prod>();
    case ReduceOp::max:
      return f.template operator()<ReduceOp::max>();
    case ReduceOp::min:
      return f.template operator()<ReduceOp::min>();
    case ReduceOp::bit_and:
      return f.template operator()<ReduceOp::bit_and>();
    case ReduceOp::bit_or:
      return f.template operator()<ReduceOp::bit_or>();
    case ReduceOp::bit_xor:
      return f.template operator()<ReduceOp::bit_xor>();
  }
}

}  // namespace

void reduce(ReduceOp op, DType t, const void* in, const Shape& shape, std::span<const int64_t> axes,
            void* out) {
  dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    dispatch_reduce_op(op, [&]<ReduceOp kOp>() {
      if constexpr (kReduceSupported<kOp, T>)
        reduce_typed<Reducer<kOp, Acc<T>>>(static_cast<const T*>(in), shape, axes,
                                           static_cast<T*>(out));
      else
        throw std::logic_error("reduce: unsupported dtype " + std::string(dtype_name(t)));
    });
  });
}

void arg_reduce(ArgReduceOp op, DType t, const void* in, const Shape& shape, int axis,
                DType index_t, void* out) {
  const AxisSplit s = split_at(shape, axis);
  if (s.outer * s.inner == 0) return;
  std::vector<int64_t> wide;
  int64_t* idx = static_cast<int64_t*>(out);
  if (index_t != DType::int64) {
    wide.resize(size_t(s.outer * s.inner));
    idx = wide.data();
  }
  dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(in);
    if (op == ArgReduceOp::argmax)
      arg_reduce_typed<true>(x, s.outer, s.n, s.inner, idx);
    else
      arg_reduce_typed<false>(x, s.outer, s.n, s.inner, idx);
  });
  if (index_t != DType::int64) convert(wide.data(), DType::int64, out, index_t, s.outer * s.inner);
}

void cumulative(ScanOp op, DType t, const void* in, const Shape& shape, int axis, bool reverse,
                void* out) {
  const AxisSplit s = split_at(shape, axis);
  if (s.outer * s.n * s.inner == 0) return;
  dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* x = static_cast<const T*>(in);
    T* y = static_cast<T*>(out);
    auto run = [&]<class Op>() { cumulative_typed<Op>(x, s.outer, s.n, s.inner, reverse, y); };
    if constexpr (std::is_same_v<T, bool>) {
      throw std::logic_error("cumulative: unsupported dtype bool");
    } else {
      switch (op) {
        case ScanOp::sum:
          return run.template operator()<Reducer<ReduceOp::sum, A>>();
        case ScanOp::prod:
          return run.template operator()<Reducer<ReduceOp::prod, A>>();
        case ScanOp::max:
          return run.template operator()<Reducer<ReduceOp::max, A>>();
        case ScanOp::min:
          return run.template operator()<Reducer<ReduceOp::min, A>>();
        case ScanOp::logsumexp:
          if constexpr (std::is_floating_point_v<A>)
            return run.template operator()<LogAddExp<A>>();
          else
            throw std::logic_error("cumulative: logsumexp needs a floating dtype");
      }
    }
  });
}

}  // namespace spmd::cpu

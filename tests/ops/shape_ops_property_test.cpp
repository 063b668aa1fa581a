// Properties of the shape functions over random shapes (fixed seed, so every run checks the same
// cases): ranks 0 to 6 with dims of 0, 1, small sizes and, in empty arrays, sizes up to 2^40.
// Reshapes to random factorisations keep the values in order and come back; -1 takes the one
// size that fits; invalid reshapes raise the documented error; broadcast_to, squeeze,
// expand_dims and transpose move every element where index arithmetic says.
#include <spmd/spmd.h>

#include "support/golden.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace sp = spmd;
using sp::Array;
using sp::Shape;
using spmd_test::error_message;

namespace {

constexpr uint64_t kSeed = 0x5eed5eed;
constexpr int kCases = 1000;  // per property
constexpr int kMaxRank = 6;
constexpr int64_t kMaxSize = 2048;  // elements of a non-empty array
// Sizes only empty arrays get, one per shape, so that the product of the other sizes stays far
// from int64 overflow (that is Shape's concern, tested with it).
constexpr int64_t kLargeDims[] = {int64_t(1) << 20, 1000003, int64_t(1) << 31, int64_t(1) << 40};

class Gen {
 public:
  Gen() : rng_(kSeed) {}
  int64_t below(int64_t n) { return int64_t(rng_() % uint64_t(n)); }
  bool chance(int percent) { return below(100) < percent; }

  // A shape of `rank` dims; empty shapes may hold large dims, others stay within kMaxSize.
  Shape shape(int rank) {
    std::vector<int64_t> d(static_cast<size_t>(rank));
    for (int64_t& v : d) v = chance(8) ? 0 : chance(30) ? 1 : 2 + below(6);
    if (std::find(d.begin(), d.end(), 0) != d.end()) return with_large_dims(d);
    while (product(d) > kMaxSize) *std::max_element(d.begin(), d.end()) = 1;
    return Shape(d);
  }
  Shape shape() { return shape(int(below(kMaxRank + 1))); }

  // A random shape of `rank` dims holding exactly `size` elements (rank >= 1 unless size == 1).
  Shape factorisation(int64_t size, int rank) {
    std::vector<int64_t> d(size_t(rank), 1);
    if (size == 0) {
      for (int64_t& v : d) v = chance(40) ? 1 : 2 + below(6);
      d[size_t(below(rank))] = 0;
      return with_large_dims(d);
    }
    for (int64_t p : prime_factors(size)) d[size_t(below(rank))] *= p;
    return Shape(d);
  }

  std::vector<int> permutation(int n) {
    std::vector<int> p(static_cast<size_t>(n));
    std::iota(p.begin(), p.end(), 0);
    for (int i = n - 1; i > 0; --i) std::swap(p[size_t(i)], p[size_t(below(i + 1))]);
    return p;
  }

  static int64_t product(const std::vector<int64_t>& d) {
    int64_t n = 1;
    for (int64_t v : d) n *= v;
    return n;
  }

 private:
  // One nonzero dim of an empty shape may become large.
  Shape with_large_dims(std::vector<int64_t> d) {
    const size_t i = size_t(below(int64_t(d.size())));
    if (d[i] != 0 && chance(40)) d[i] = kLargeDims[below(4)];
    return Shape(d);
  }
  static std::vector<int64_t> prime_factors(int64_t n) {
    std::vector<int64_t> f;
    for (int64_t p = 2; p * p <= n; ++p)
      for (; n % p == 0; n /= p) f.push_back(p);
    if (n > 1) f.push_back(n);
    return f;
  }
  std::mt19937_64 rng_;
};

Array iota_of(const Shape& s) {
  return sp::arange(0, int(s.size())).reshape(s);
}

std::vector<int32_t> values(const Array& x) {
  return x.to_vector<int32_t>();
}

std::vector<int32_t> iota_values(int64_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// The multi-index of flat position `flat` in `s`, row-major.
std::vector<int64_t> unravel(int64_t flat, const Shape& s) {
  std::vector<int64_t> idx(size_t(s.ndim()));
  for (int d = s.ndim() - 1; d >= 0; --d) {
    idx[size_t(d)] = flat % s[d];
    flat /= s[d];
  }
  return idx;
}

int64_t ravel(const std::vector<int64_t>& idx, const Shape& s) {
  int64_t flat = 0;
  for (int d = 0; d < s.ndim(); ++d) flat = flat * s[d] + idx[size_t(d)];
  return flat;
}

std::string cannot_reshape(const Shape& from, const Shape& to) {
  return "[reshape] cannot reshape array of shape " + from.str() + " into shape " + to.str();
}

}  // namespace

TEST(ShapeOpsProperty, ReshapeToAnyFactorisationKeepsValuesAndComesBack) {
  Gen g;
  for (int c = 0; c < kCases; ++c) {
    const Shape s = g.shape();
    const int64_t n = s.size();
    const int rank = n == 1 ? int(g.below(kMaxRank + 1)) : 1 + int(g.below(kMaxRank));
    const Shape t = g.factorisation(n, rank);
    SCOPED_TRACE(s.str() + " -> " + t.str());
    const Array x = iota_of(s), y = sp::reshape(x, t);
    ASSERT_EQ(y.shape(), t);
    EXPECT_EQ(values(y), iota_values(n));
    const Array back = y.reshape(s);
    ASSERT_EQ(back.shape(), s);
    EXPECT_EQ(values(back), iota_values(n));
    EXPECT_EQ(sp::ravel(y).shape(), Shape{n});
  }
}

TEST(ShapeOpsProperty, MinusOneTakesTheOnlySizeThatFits) {
  Gen g;
  int inferred = 0;
  for (int c = 0; c < kCases; ++c) {
    const Shape s = g.shape();
    const int64_t n = s.size();
    const Shape t = g.factorisation(n, 1 + int(g.below(kMaxRank)));
    const int at = int(g.below(t.ndim()));
    std::vector<int64_t> with_unknown = t.dims();
    with_unknown[size_t(at)] = -1;
    std::vector<int64_t> known = with_unknown;
    known.erase(known.begin() + at);
    const Shape request(with_unknown);
    SCOPED_TRACE(s.str() + " -> " + request.str());
    const Array x = iota_of(s);
    if (Gen::product(known) == 0) {
      // With a zero among the other sizes, any size would do: no unique answer.
      EXPECT_EQ(error_message<sp::ShapeError>([&] { sp::reshape(x, request); }),
                cannot_reshape(s, request) +
                    " because the product of the specified axis sizes (0) does not evenly divide " +
                    std::to_string(n));
      continue;
    }
    const Array y = sp::reshape(x, request);
    std::vector<int64_t> expected = with_unknown;
    expected[size_t(at)] = n / Gen::product(known);
    ASSERT_EQ(y.shape(), Shape(expected));
    EXPECT_EQ(values(y), iota_values(n));
    ++inferred;
  }
  EXPECT_GT(inferred, kCases / 2);
}

TEST(ShapeOpsProperty, InvalidReshapesRaiseWithBothShapes) {
  Gen g;
  for (int c = 0; c < kCases; ++c) {
    const Shape s = g.shape();
    const int64_t n = s.size();
    const Array x = iota_of(s);
    // A target of a different size: one more element, or a zero-size one for a non-empty array.
    const Shape other = g.factorisation(n == 0 ? 1 + g.below(6) : n + 1, 1 + int(g.below(5)));
    SCOPED_TRACE(s.str() + " -> " + other.str());
    EXPECT_EQ(error_message<sp::ShapeError>([&] { sp::reshape(x, other); }), cannot_reshape(s, other));
    EXPECT_EQ(error_message<sp::ShapeError>([&] { sp::lax::reshape(x, other); }),
              cannot_reshape(s, other));
    // -1 next to sizes whose product does not divide the array's size.
    if (n > 0) {
      std::vector<int64_t> d = {-1, n + 1};
      const Shape request(d);
      EXPECT_EQ(error_message<sp::ShapeError>([&] { sp::reshape(x, request); }),
                cannot_reshape(s, request) + " because the product of the specified axis sizes (" +
                    std::to_string(n + 1) + ") does not evenly divide " + std::to_string(n));
    }
    // Two unknown sizes, and a negative size other than -1.
    std::vector<int64_t> two = g.factorisation(n, 3).dims();
    two[0] = two[2] = -1;
    EXPECT_EQ(error_message<sp::ValueError>([&] { sp::reshape(x, Shape(two)); }),
              "[reshape] can only specify one unknown axis size with a `-1` value, got " +
                  Shape(two).str());
    std::vector<int64_t> negative = g.factorisation(n, 2).dims();
    negative[size_t(g.below(2))] = -2 - g.below(1000);
    EXPECT_EQ(error_message<sp::ValueError>([&] { sp::reshape(x, Shape(negative)); }),
              "[reshape] negative dimensions are not allowed, got shape " + Shape(negative).str());
  }
}

TEST(ShapeOpsProperty, BroadcastToRepeatsAlongNewAndUnitDims) {
  Gen g;
  for (int c = 0; c < kCases; ++c) {
    const Shape s = g.shape(int(g.below(4)));
    // Leading dims, and sizes for the unit dims; dims s does not fix go back to 1 while the
    // result is over kMaxSize.
    std::vector<int64_t> target;
    const int lead = int(g.below(3));
    for (int i = 0; i < lead; ++i) target.push_back(g.below(4));
    for (int64_t d : s) target.push_back(d == 1 && g.chance(50) ? g.below(4) : d);
    for (int i = 0; Gen::product(target) > kMaxSize; ++i)
      if (i < lead || s[i - lead] == 1) target[size_t(i)] = 1;
    const Shape t(target);
    SCOPED_TRACE(s.str() + " -> " + t.str());
    const std::vector<int32_t> got = values(sp::broadcast_to(iota_of(s), t));
    ASSERT_EQ(int64_t(got.size()), t.size());
    for (int64_t o = 0; o < t.size(); ++o) {
      std::vector<int64_t> idx = unravel(o, t);
      idx.erase(idx.begin(), idx.begin() + lead);
      for (int d = 0; d < s.ndim(); ++d)
        if (s[d] == 1) idx[size_t(d)] = 0;
      ASSERT_EQ(got[size_t(o)], ravel(idx, s)) << "at " << o;
    }
    // A dim of size other than 1 cannot change.
    for (int d = 0; d < s.ndim(); ++d) {
      if (s[d] == 1) continue;
      std::vector<int64_t> bad = target;
      bad[size_t(lead + d)] = s[d] + 1;
      EXPECT_EQ(error_message<sp::ShapeError>([&] { sp::broadcast_to(iota_of(s), Shape(bad)); }),
                "[broadcast_to] cannot broadcast an array of shape " + s.str() + " to shape " +
                    Shape(bad).str());
    }
  }
}

TEST(ShapeOpsProperty, SqueezeAndExpandDimsAreInverse) {
  Gen g;
  for (int c = 0; c < kCases; ++c) {
    const Shape s = g.shape();
    SCOPED_TRACE(s.str());
    const Array x = iota_of(s);
    std::vector<int64_t> kept;
    for (int64_t d : s)
      if (d != 1) kept.push_back(d);
    const Array squeezed = sp::squeeze(x);
    ASSERT_EQ(squeezed.shape(), Shape(kept));
    EXPECT_EQ(values(squeezed), iota_values(s.size()));
    // expand_dims at random distinct positions of the result, then squeeze them out again.
    const int added = int(g.below(kMaxRank - s.ndim() + 1));
    std::vector<int> order = g.permutation(s.ndim() + added);
    sp::Axes axes(order.begin(), order.begin() + added);
    const Array expanded = sp::expand_dims(x, axes);
    ASSERT_EQ(expanded.ndim(), s.ndim() + added);
    for (int a : axes) EXPECT_EQ(expanded.shape()[a], 1);
    EXPECT_EQ(values(expanded), iota_values(s.size()));
    if (added > 0) {  // squeeze without axes would drop every 1
      EXPECT_EQ(sp::squeeze(expanded, axes).shape(), s);
    }
    // Squeezing a dim whose size is not 1 raises.
    for (int d = 0; d < s.ndim(); ++d) {
      if (s[d] == 1) continue;
      EXPECT_EQ(error_message<sp::ShapeError>([&] { sp::squeeze(x, {d}); }),
                "[squeeze] cannot select an axis to squeeze out which has size not equal to one, "
                "got shape=" +
                    s.str() + " and axis " + std::to_string(d));
    }
  }
}

TEST(ShapeOpsProperty, TransposeMovesEveryElementAndInvertsBack) {
  Gen g;
  for (int c = 0; c < kCases; ++c) {
    const Shape s = g.shape();
    const std::vector<int> perm = g.permutation(s.ndim());
    std::vector<int64_t> dims, inverse(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) {
      dims.push_back(s[perm[i]]);
      inverse[size_t(perm[i])] = int64_t(i);
    }
    const Shape t(dims);
    SCOPED_TRACE(s.str() + " by " + Shape(perm.begin(), perm.end()).str());
    const Array x = iota_of(s), y = sp::transpose(x, sp::Axes(perm.begin(), perm.end()));
    ASSERT_EQ(y.shape(), t);
    const std::vector<int32_t> got = values(y);
    for (int64_t o = 0; o < t.size(); ++o) {
      const std::vector<int64_t> out_idx = unravel(o, t);
      std::vector<int64_t> in_idx(size_t(s.ndim()));
      for (size_t i = 0; i < perm.size(); ++i) in_idx[size_t(perm[i])] = out_idx[i];
      ASSERT_EQ(got[size_t(o)], ravel(in_idx, s)) << "at " << o;
    }
    const Array back = sp::transpose(y, sp::Axes(inverse.begin(), inverse.end()));
    ASSERT_EQ(back.shape(), s);
    EXPECT_EQ(values(back), iota_values(s.size()));
  }
}

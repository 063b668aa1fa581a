// The `more` run of the differential tester (differential_test.cpp): its programs draw from the
// first runs' op kinds and from these, on meshes over all the devices or a subset of them in a
// permuted order (1-D to 3-D): custom_jvp and custom_vjp functions, nested jit (with and without
// in_shardings and out_shardings, a constraint or a loop inside), vmap of a grad (of a function
// with a cond or a scan inside), take_along_axis, gathers and dynamic slices and updates at
// indices computed in the program, where/select_n with broadcast operands, clamp and clip, iota
// and arange offsets, tril/triu, squeeze/expand_dims, integer division, remainder, bitwise ops
// and shifts (compared exactly), round trips through bfloat16, float16, int8 and uint8 (floats
// compared at the narrow format's precision), reductions and cumulative ops the first runs lack
// (prod, var, logsumexp, all/any, bitwise reductions; cumprod, cumlogsumexp, reversed), argsort,
// and random numbers (uniform, normal, randint, bernoulli, raw bits and permutations of a key,
// drawn in shapes the mesh splits: an integer program compares them bit for bit).
//
// SPMD_DIFFERENTIAL_PROGRAMS=N runs seeds 0..N-1 (default 150), SPMD_DIFFERENTIAL_FIRST=F from
// seed F, SPMD_DIFFERENTIAL_SEED=S only seed S.
#include "sharding/differential.h"

#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

namespace differential {
namespace {

namespace sp = spmd;
using sp::Array;
using sp::P;
using sp::Shape;

using OpKind = std::optional<int> (*)(Builder&, int);

// v constrained to `spec` where the program runs on a mesh.
Array constrained_to(const Array& v, const std::optional<P>& spec, const Ctx& ctx) {
  if (!ctx.mesh || !spec) return v;
  return sp::with_sharding_constraint(v, sp::NamedSharding(*ctx.mesh, *spec));
}

sp::DType dtype_of(const Builder& b) {
  return b.integer() ? sp::int32 : sp::float32;
}

// x times a factor from Builder::scale: integer programs' factor is 1, and stays out of their
// values (an int32 times a float would be a float).
Array scaled(const Array& x, float factor) {
  return factor == 1.0f ? x : x * factor;
}

// s with its leading dim dropped or some dim made 1: a shape that broadcasts against s.
Shape broadcastable(Builder& b, const Shape& s) {
  if (s.ndim() == 0 || b.coin(0.4)) return s;
  std::vector<int64_t> d = s.dims();
  if (b.coin(0.5))
    d.erase(d.begin());
  else
    d[size_t(b.pick(int(d.size())))] = 1;
  return Shape(d);
}

// ---- differentiation ----

// f(a, w) = sin(a) * w with a jvp rule (the true derivative); w another value of a's shape.
std::optional<int> custom_jvp_op(Builder& b, int x) {
  if (b.integer()) return std::nullopt;
  const int w = b.operand_of_shape(b.shape(x));
  return b.add(b.shape(x), [=](const Env& e, const Ctx&) {
    using Args = std::tuple<Array, Array>;
    auto f = sp::custom_jvp([](const Array& a, const Array& c) { return sp::sin(a) * c; },
                            [](const Args& p, const Args& t) {
                              const auto& [a, c] = p;
                              const auto& [ta, tc] = t;
                              return std::make_pair(sp::sin(a) * c,
                                                    sp::cos(a) * c * ta + sp::sin(a) * tc);
                            });
    return f(e[size_t(x)], e[size_t(w)]);
  });
}

// f(a, w) = tanh(a) * w with a vjp rule whose residuals are tanh(a) and w.
std::optional<int> custom_vjp_op(Builder& b, int x) {
  if (b.integer()) return std::nullopt;
  const int w = b.operand_of_shape(b.shape(x));
  return b.add(b.shape(x), [=](const Env& e, const Ctx&) {
    using Res = std::tuple<Array, Array>;
    auto f = sp::custom_vjp([](const Array& a, const Array& c) { return sp::tanh(a) * c; },
                            [](const Array& a, const Array& c) {
                              const Array t = sp::tanh(a);
                              return std::make_pair(t * c, Res{t, c});
                            },
                            [](const Res& res, const Array& ct) {
                              const auto& [t, c] = res;
                              return std::make_tuple(ct * (1.0f - t * t) * c, ct * t);
                            });
    return f(e[size_t(x)], e[size_t(w)]);
  });
}

// vmap over a dim of x of the gradient of a scalar function of one example: a sum of
// sin(v) * v, through a cond on the example's sum, or through a scan over its leading dim.
std::optional<int> vmap_grad(Builder& b, int x) {
  const Shape s = b.shape(x);
  if (b.integer() || s.ndim() == 0) return std::nullopt;
  const int dim = b.pick(s.ndim());
  const int kind = b.pick(s.ndim() >= 2 ? 3 : 2);
  return b.add(s, [=](const Env& e, const Ctx&) {
    auto loss = [kind](const Array& v) {
      if (kind == 0) return sp::sum(sp::sin(v) * v);
      if (kind == 1) {
        auto up = [](const Array& a) { return sp::sin(a) * a; };
        auto down = [](const Array& a) { return sp::tanh(a) * 0.5f; };
        return sp::sum(sp::lax::cond(sum_above_zero(v), up, down, v));
      }
      auto body = [](const Array& c, const Array& row) {
        const Array next = sp::sin(c) * 0.5f + row * row;
        return std::pair<Array, Array>{next, next};
      };
      const Shape carry(std::vector<int64_t>(v.shape().dims().begin() + 1, v.shape().dims().end()));
      return sp::sum(sp::lax::scan(body, sp::zeros(carry), v).first);
    };
    return sp::vmap(sp::grad(loss), {.in_axes = {dim}, .out_axes = {dim}})(e[size_t(x)]);
  });
}

// ---- nested jit ----

// jit of a small function of x (computed first, so that no eager call meets in_shardings that
// its committed argument does not have, which raises as in JAX), with in_shardings and
// out_shardings on the mesh, each half of the time; the body sometimes constrains its value or
// loops. It adds row sums rather than subtracting them: values minus their mean sum to 0 up to
// rounding, where a later cond's predicate (the sign of a sum) flips between the unsharded and
// the partitioned run.
std::optional<int> nested_jit(Builder& b, int x) {
  const Shape s = b.shape(x);
  const bool integer = b.integer();
  const int y = b.add(s, [=](const Env& e, const Ctx&) {
    return integer ? e[size_t(x)] * 3 : sp::sin(e[size_t(x)]);
  });
  std::optional<P> in_spec, out_spec, inner_spec;
  if (b.coin(0.5)) in_spec = b.random_spec(s);
  if (b.coin(0.5)) out_spec = b.random_spec(s);
  if (b.coin(0.3)) inner_spec = b.random_spec(s);
  const int body = b.pick(3);
  const int last = s.ndim() - 1;
  const float factor = s.ndim() > 0 ? b.scale(s[last]) : 1.0f;
  return b.add(s, [=](const Env& e, const Ctx& ctx) {
    auto f = [=](const Array& v) {
      const Array u = constrained_to(v, inner_spec, ctx);
      if (body == 0 || last < 0) return integer ? u * 2 - 1 : sp::tanh(u) * 0.5f;
      if (body == 1) return u + scaled(sp::sum(u, {last}, true), factor);
      auto step = [integer](const Array&, const Array& c) {
        return integer ? c * 2 - sp::max(c) : sp::sin(c) + sp::mean(c) * 0.5f;
      };
      return sp::lax::fori_loop(0, 2, step, u);
    };
    sp::JitOptions options;
    if (ctx.mesh && in_spec)
      options.in_shardings = sp::ShardingTree({sp::NamedSharding(*ctx.mesh, *in_spec)});
    if (ctx.mesh && out_spec) options.out_shardings = sp::NamedSharding(*ctx.mesh, *out_spec);
    return sp::jit(f, options)(e[size_t(y)]);
  });
}

// ---- indexing ----

// take_along_axis with constant indices of x's shape but for the axis, of a random length.
std::optional<int> take_along(Builder& b, int x) {
  const Shape s = b.shape(x);
  if (s.ndim() == 0) return std::nullopt;
  const int axis = b.pick(s.ndim());
  Shape is = s;
  is[axis] = 1 + b.pick(6);
  if (!fits(is)) return std::nullopt;
  std::vector<int32_t> indices(size_t(is.size()));
  for (int32_t& i : indices) i = b.pick(int(s[axis]));
  return b.add(is, [=](const Env& e, const Ctx&) {
    return sp::take_along_axis(e[size_t(x)], sp::array(indices, is), axis);
  });
}

// Indices computed in the program from a fresh input (so that both runs see the same ones): a
// take of argsort's first entries, or a dynamic_slice or dynamic_update_slice at an argmax.
std::optional<int> computed_indices(Builder& b, int x) {
  const Shape s = b.shape(x);
  if (s.ndim() == 0) return std::nullopt;
  const int axis = b.pick(s.ndim());
  const int64_t n = s[axis];
  const int keys = b.fresh_input({n});
  switch (b.pick(3)) {
    case 0: {
      const int64_t m = 1 + b.pick(int(n));
      Shape out = s;
      out[axis] = m;
      return b.add(out, [=](const Env& e, const Ctx&) {
        const Array order = sp::lax::slice(sp::argsort(e[size_t(keys)]), {0}, {m});
        return sp::take(e[size_t(x)], order, axis);
      });
    }
    case 1: {
      std::vector<int64_t> sizes = s.dims();
      sizes[size_t(axis)] = 1 + b.pick(int(n));
      return b.add(Shape(sizes), [=](const Env& e, const Ctx&) {
        std::vector<Array> at(size_t(s.ndim()), Array(0));
        at[size_t(axis)] = sp::argmax(e[size_t(keys)]);
        return sp::lax::dynamic_slice(e[size_t(x)], at, sizes);
      });
    }
    default: {
      std::vector<int64_t> sizes = s.dims();
      sizes[size_t(axis)] = 1 + b.pick(int(n));
      const int u = b.operand_of_shape(Shape(sizes));
      return b.add(s, [=](const Env& e, const Ctx&) {
        std::vector<Array> at(size_t(s.ndim()), Array(0));
        at[size_t(axis)] = sp::argmax(e[size_t(keys)]);
        return sp::lax::dynamic_update_slice(e[size_t(x)], e[size_t(u)], at);
      });
    }
  }
}

// ---- selection and bounds ----

// where with a condition and a case of shapes that broadcast against x (or a scalar case), or
// select_n of three cases by constant indices.
std::optional<int> where_select(Builder& b, int x) {
  const Shape s = b.shape(x);
  if (b.coin(0.3)) {
    std::vector<int32_t> which(size_t(s.size()));
    for (int32_t& w : which) w = b.pick(3);
    const int y = b.operand_of_shape(s);
    return b.add(s, [=](const Env& e, const Ctx&) {
      const Array& v = e[size_t(x)];
      return sp::lax::select_n(sp::array(which, s), {v, e[size_t(y)], v * 2});
    });
  }
  const int c = b.operand_of_shape(broadcastable(b, s));
  const bool scalar = b.coin(0.3);
  const int y = b.operand_of_shape(broadcastable(b, s));
  const bool swap = b.coin(0.5);
  return b.add(s, [=](const Env& e, const Ctx&) {
    const Array other = scalar ? Array(2) : e[size_t(y)];
    const Array mask = e[size_t(c)] > 0;
    const Array& v = e[size_t(x)];
    return swap ? sp::where(mask, other, v) : sp::where(mask, v, other);
  });
}

// lax.clamp between scalars, or clip between a broadcast value and one more.
std::optional<int> clamp(Builder& b, int x) {
  const Shape s = b.shape(x);
  if (b.coin(0.5)) {
    return b.add(s, [=, integer = b.integer()](const Env& e, const Ctx&) {
      return integer ? sp::lax::clamp(Array(-2), e[size_t(x)], Array(2))
                     : sp::lax::clamp(Array(-0.5f), e[size_t(x)], Array(0.5f));
    });
  }
  const int lo = b.operand_of_shape(broadcastable(b, s));
  return b.add(s, [=](const Env& e, const Ctx&) {
    const Array& l = e[size_t(lo)];
    return sp::clip(e[size_t(x)], l, l + 1);
  });
}

// ---- values from positions ----

// x plus a broadcasted_iota along a dim, or times an arange over its last dim.
std::optional<int> iota(Builder& b, int x) {
  const Shape s = b.shape(x);
  if (s.ndim() == 0) return std::nullopt;
  const int dim = b.pick(s.ndim());
  const sp::DType t = dtype_of(b);
  const float factor = b.scale(s[dim]);
  if (b.coin(0.5)) {
    return b.add(s, [=](const Env& e, const Ctx&) {
      return e[size_t(x)] + scaled(sp::lax::broadcasted_iota(t, s, dim), factor);
    });
  }
  const int64_t n = s[s.ndim() - 1];
  return b.add(s, [=, factor = b.scale(n)](const Env& e, const Ctx&) {
    return scaled(e[size_t(x)] * sp::astype(sp::arange(int(n)), t), factor);
  });
}

// tril or triu of the last two dims, the diagonal moved by -2..2.
std::optional<int> triangle(Builder& b, int x) {
  const Shape s = b.shape(x);
  if (s.ndim() < 2) return std::nullopt;
  const int64_t k = b.pick(5) - 2;
  const bool lower = b.coin(0.5);
  return b.add(s, [=](const Env& e, const Ctx&) {
    return lower ? sp::tril(e[size_t(x)], k) : sp::triu(e[size_t(x)], k);
  });
}

// ---- shapes ----

// squeeze of some size-1 dims, or lax.expand_dims at two places.
std::optional<int> squeeze(Builder& b, int x) {
  const Shape s = b.shape(x);
  sp::Axes ones;
  for (int d = 0; d < s.ndim(); ++d)
    if (s[d] == 1 && b.coin(0.7)) ones.push_back(d);
  if (!ones.empty()) {
    std::vector<int64_t> out;
    for (int d = 0; d < s.ndim(); ++d)
      if (std::find(ones.begin(), ones.end(), d) == ones.end()) out.push_back(s[d]);
    return b.add(Shape(out),
                 [=](const Env& e, const Ctx&) { return sp::squeeze(e[size_t(x)], ones); });
  }
  if (s.ndim() + 2 > kMaxRank) return std::nullopt;
  // Positions in the result: two distinct ones, or one within x's rank + 1.
  const int64_t first = b.pick(s.ndim() + 2), second = b.pick(s.ndim() + 2);
  std::vector<int64_t> at{std::min(first, second), std::max(first, second)};
  if (first == second) at = {std::min<int64_t>(first, s.ndim())};
  std::vector<int64_t> out = s.dims();
  for (int64_t a : at) out.insert(out.begin() + a, 1);
  return b.add(Shape(out),
               [=](const Env& e, const Ctx&) { return sp::lax::expand_dims(e[size_t(x)], at); });
}

// ---- integers ----

// Integer division and remainder (by |y| + 1), bitwise ops and shifts (by y & 3) with another
// value of a broadcasting shape, population counts and bitwise not: exact.
std::optional<int> integer_op(Builder& b, int x) {
  if (!b.integer()) return std::nullopt;
  const Shape s = b.shape(x);
  const int y = b.operand_of_shape(broadcastable(b, s));
  const int kind = b.pick(11);
  return b.add(s, [=](const Env& e, const Ctx&) {
    const Array& v = e[size_t(x)];
    const Array& w = e[size_t(y)];
    const Array d = sp::broadcast_to(sp::abs(w) + 1, s);
    const Array by = sp::broadcast_to(w & 3, s);
    switch (kind) {
      case 0:
        return sp::floor_divide(v, d);
      case 1:
        return sp::remainder(v, d);
      case 2:
        return sp::lax::div(v, d);
      case 3:
        return sp::lax::rem(v, d);
      case 4:
        return v & w;
      case 5:
        return v | w;
      case 6:
        return v ^ w;
      case 7:
        return sp::lax::shift_left(v, by);
      case 8:
        return sp::lax::shift_right_arithmetic(v, by);
      case 9:
        return sp::lax::population_count(v);
      default:
        return ~v;
    }
  });
}

// A round trip through a narrower type: bfloat16 or float16 (sometimes through tanh computed
// in it) for floats, int8 or uint8 (wrapping) for integers.
std::optional<int> convert(Builder& b, int x) {
  const Shape s = b.shape(x);
  if (b.integer()) {
    const sp::DType narrow = b.coin(0.5) ? sp::int8 : sp::uint8;
    return b.add(s, [=](const Env& e, const Ctx&) {
      return sp::astype(sp::astype(e[size_t(x)] * 37, narrow), sp::int32);
    });
  }
  const sp::DType narrow = b.coin(0.5) ? sp::bfloat16 : sp::float16;
  b.round_trips_through(narrow);
  const bool through_tanh = b.coin(0.3);
  return b.add(s, [=](const Env& e, const Ctx&) {
    Array h = sp::astype(e[size_t(x)], narrow);
    if (through_tanh) h = sp::tanh(h);
    return sp::astype(h, sp::float32);
  });
}

// ---- reductions and scans ----

// prod, var, logsumexp, all/any (floats); all/any, bitwise reductions (integers); keepdims at
// random.
std::optional<int> reduce(Builder& b, int x) {
  const Shape s = b.shape(x);
  if (s.ndim() == 0) return std::nullopt;
  sp::Axes axes;
  for (int d = 0; d < s.ndim(); ++d)
    if (b.coin(0.5)) axes.push_back(d);
  if (axes.empty()) axes.push_back(b.pick(s.ndim()));
  const bool keepdims = b.coin(0.4);
  std::vector<int64_t> out;
  for (int d = 0; d < s.ndim(); ++d) {
    const bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (!reduced || keepdims) out.push_back(reduced ? 1 : s[d]);
  }
  const std::vector<int64_t> lax_axes(axes.begin(), axes.end());
  const bool integer = b.integer();
  const int kind = b.pick(4);
  const sp::DType t = dtype_of(b);
  return b.add(Shape(out), [=](const Env& e, const Ctx&) {
    const Array& v = e[size_t(x)];
    Array r;
    if (kind == 0) r = sp::astype(sp::any(v > 0, axes, keepdims), t);
    if (kind == 1) r = sp::astype(sp::all(v > -0.5f, axes, keepdims), t);
    if (kind == 2) r = integer ? sp::lax::reduce_xor(v, lax_axes) : sp::var(v, axes, keepdims);
    if (kind == 3)
      r = integer ? sp::lax::reduce_or(v & 7, lax_axes) : sp::logsumexp(v, axes, keepdims);
    // lax's reductions drop the axes.
    return integer && kind >= 2 && keepdims ? sp::reshape(r, Shape(out)) : r;
  });
}

// cumprod (of x clipped to [-1, 1]) or cumlogsumexp (floats), cumsum of the low bits
// (integers), sometimes reversed. Products of values past 1 grow past 2^24, where another
// order rounds them differently by whole units (the cos of such a product).
std::optional<int> cumulative(Builder& b, int x) {
  const Shape s = b.shape(x);
  if (s.ndim() == 0) return std::nullopt;
  const int axis = b.pick(s.ndim());
  const bool reverse = b.coin(0.5);
  const int kind = b.integer() ? 2 : b.pick(2);
  return b.add(s, [=](const Env& e, const Ctx&) {
    const Array& v = e[size_t(x)];
    if (kind == 0) return sp::lax::cumprod(sp::clip(v, -1, 1), axis, reverse);
    if (kind == 1) return sp::lax::cumlogsumexp(v, axis, reverse);
    return sp::lax::cumsum(v & 3, axis, reverse);
  });
}

// argsort along an axis, in the program's dtype (floats scaled to [0, 1)).
std::optional<int> argsort(Builder& b, int x) {
  const Shape s = b.shape(x);
  if (s.ndim() == 0) return std::nullopt;
  const int axis = b.pick(s.ndim());
  const sp::DType t = dtype_of(b);
  return b.add(s, [=, factor = b.scale(s[axis])](const Env& e, const Ctx&) {
    return scaled(sp::astype(sp::argsort(e[size_t(x)], axis), t), factor);
  });
}

// ---- random numbers ----

// A draw of x's shape from a key (random::key, split or fold_in), constrained half of the time
// to a random split of the mesh, combined with x: uniform or normal noise added, randint or raw
// bits added (integers), a bernoulli mask, a permutation of x along an axis, or noise drawn row by
// row from a vmapped batch of keys (split on the mesh).
std::optional<int> random_draw(Builder& b, int x) {
  const Shape s = b.shape(x);
  const uint64_t seed = uint64_t(b.pick(1000));
  const int derive = b.pick(3);
  std::optional<P> spec, key_spec;
  if (b.coin(0.5)) spec = b.random_spec(s);
  const bool integer = b.integer();
  const int kind = b.pick(s.ndim() > 0 ? 5 : 3);
  if (kind == 4 && b.coin(0.7)) key_spec = b.random_spec({s[0], 2});
  return b.add(s, [=](const Env& e, const Ctx& ctx) {
    Array key = sp::random::key(seed);
    if (derive == 1) key = sp::random::split(key, 3)[2];
    if (derive == 2) key = sp::random::fold_in(key, 7);
    const Array& v = e[size_t(x)];
    switch (kind) {
      case 0: {
        Array noise = integer ? sp::random::randint(key, s, Array(-4), Array(5))
                              : sp::random::uniform(key, s, sp::float32, Array(-0.5f), 0.5f);
        return v + constrained_to(noise, spec, ctx);
      }
      case 1: {
        Array noise = integer ? sp::astype(sp::random::bits(key, s, sp::uint8), sp::int32)
                              : sp::random::normal(key, s) * 0.25f;
        return v + constrained_to(noise, spec, ctx);
      }
      case 2: {
        const Array mask = constrained_to(sp::random::bernoulli(key, 0.5, s), spec, ctx);
        return sp::where(mask, v, v * 2);
      }
      case 3:
        return sp::random::permutation(key, constrained_to(v, spec, ctx), int(seed % s.ndim()));
      default: {
        // One key per row, the keys split on the mesh, each drawing its row.
        const Array keys = constrained_to(sp::random::split(key, s[0]), key_spec, ctx);
        const Shape row(std::vector<int64_t>(s.dims().begin() + 1, s.dims().end()));
        auto draw = [integer, row](const Array& k) {
          return integer ? sp::random::randint(k, row, Array(-4), Array(5))
                         : sp::random::uniform(k, row, sp::float32, Array(-0.5f), 0.5f);
        };
        return v + constrained_to(sp::vmap(draw)(keys), spec, ctx);
      }
    }
  });
}

// ---- meshes ----

// A permutation of 0..n-1 from the builder's draws.
std::vector<int> permuted(Builder& b, int n) {
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  for (int i = n - 1; i > 0; --i) std::swap(order[size_t(i)], order[size_t(b.pick(i + 1))]);
  return order;
}

}  // namespace

std::optional<int> more_op(Builder& b, int x) {
  // A third of the time, x is constrained to a random split first (half of those splitting
  // dims unevenly), so that the op meets it.
  if (b.coin(1.0 / 3)) {
    const P spec = b.coin(0.5) ? b.uneven_spec(b.shape(x)) : b.random_spec(b.shape(x));
    x = b.add(b.shape(x), [=](const Env& e, const Ctx& ctx) {
      return constrained_to(e[size_t(x)], spec, ctx);
    });
  }
  static const OpKind ops[] = {
      custom_jvp_op, custom_vjp_op, vmap_grad,  nested_jit, take_along,  computed_indices,
      where_select,  clamp,         iota,       triangle,   squeeze,     integer_op,
      convert,       reduce,        cumulative, argsort,    random_draw,
  };
  return ops[b.pick(int(std::size(ops)))](b, x);
}

sp::Mesh more_mesh(Builder& b) {
  static const std::vector<std::vector<int64_t>> shapes = {
      {8}, {4, 2}, {2, 2, 2}, {4}, {2, 2}, {2, 1, 2}, {2}, {1, 4}, {2, 2, 2}};
  static const std::vector<std::string> names = {"x", "y", "z"};
  const std::vector<int64_t> dims = b.pick_of(shapes);
  const int64_t size = std::accumulate(dims.begin(), dims.end(), int64_t(1), std::multiplies<>());
  const std::vector<sp::Device> all = sp::devices();
  const std::vector<int> order = permuted(b, int(all.size()));
  std::vector<sp::Device> devices;
  for (int64_t i = 0; i < size; ++i) devices.push_back(all[size_t(order[size_t(i)])]);
  return sp::Mesh(devices, Shape(dims),
                  std::vector<std::string>(names.begin(), names.begin() + long(dims.size())));
}

namespace {

TEST(Differential, MoreRandomProgramsAgreeWithUnshardedResults) {
  if (sp::devices().size() < 8) GTEST_SKIP() << "needs 8 devices (SPMD_CPU_DEVICES=8)";
  check_programs(Mode::more, 150);
}

}  // namespace
}  // namespace differential

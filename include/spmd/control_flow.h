// Structured control flow, as JAX's lax.cond, lax.switch, lax.while_loop, lax.fori_loop and
// lax.scan: the bodies are traced once into sub-programs held by a single primitive, so loops and
// branches stay loops and branches under jit, grad and vmap.
#pragma once

#include <spmd/array.h>
#include <spmd/error.h>
#include <spmd/ops.h>
#include <spmd/tree.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace spmd::lax {

namespace control_flow_detail {

using FlatFn = std::function<std::vector<Array>(std::span<const Array>)>;

// Binds `cond` on an int32 index (already clamped) with one traced program per branch; every
// branch's output tree goes to its out_defs entry, and they must agree.
std::vector<Array> cond(const char* api, const Array& index, std::span<const FlatFn> branches,
                        std::span<const std::shared_ptr<TreeDef>> out_defs,
                        std::span<const Array> operands);
// `pred` as cond's int32 index (JAX: convert_element_type of a boolean scalar).
Array cond_index(const Array& pred);
// `index` as switch's int32 index: clamp into [0, num_branches - 1]; raises for no branches.
Array switch_index(const Array& index, size_t num_branches);
// Binds `while`; body_out_def receives the body's output tree, which must equal init_def.
std::vector<Array> while_loop(const FlatFn& cond_fn, const FlatFn& body_fn,
                              const std::shared_ptr<TreeDef>& body_out_def, const TreeDef& init_def,
                              std::span<const Array> init);
// Binds `scan`. body maps (carry leaves, x-slice leaves) to (carry leaves, y leaves) and stores
// the carry and y trees; returns the final carry leaves followed by the stacked ys.
std::vector<Array> scan(const FlatFn& body, const TreeDef& init_def,
                        const std::shared_ptr<TreeDef>& carry_out_def, std::span<const Array> init,
                        std::span<const Array> xs, std::optional<int64_t> length, bool reverse,
                        const char* api);
// fori_loop with static bounds: a scan whose carry starts with an int32 counter.
std::vector<Array> fori_loop(int64_t lower, int64_t upper, const FlatFn& body,
                             const std::shared_ptr<TreeDef>& body_out_def, const TreeDef& init_def,
                             std::span<const Array> init);

template <class R, class F, class... Ops>
FlatFn branch_fn(F f, TreeDef in_def, std::shared_ptr<TreeDef> out_def) {
  return [f = std::move(f), in_def = std::move(in_def),
          out_def = std::move(out_def)](std::span<const Array> leaves) {
    auto args = tree_unflatten<std::tuple<Ops...>>(in_def, leaves);
    auto [out, def] = tree_flatten(std::apply(f, args));
    *out_def = def;
    return out;
  };
}

// f(carry) as a flat function of the carry's leaves.
template <class T, class F>
FlatFn carry_fn(F f, TreeDef in_def, std::shared_ptr<TreeDef> out_def) {
  return [f = std::move(f), in_def = std::move(in_def),
          out_def = std::move(out_def)](std::span<const Array> leaves) {
    auto [out, def] = tree_flatten(f(tree_unflatten<T>(in_def, leaves)));
    *out_def = def;
    return out;
  };
}

template <class R, class... Fs, class... Ops>
R run_cond(const char* api, const Array& index, std::tuple<Fs...> fs, const Ops&... operands) {
  auto [leaves, in_def] = tree_flatten(std::make_tuple(operands...));
  std::vector<FlatFn> branches;
  std::vector<std::shared_ptr<TreeDef>> out_defs;
  std::apply(
      [&](auto&... f) {
        ((out_defs.push_back(std::make_shared<TreeDef>()),
          branches.push_back(
              branch_fn<R, std::decay_t<decltype(f)>, Ops...>(f, in_def, out_defs.back()))),
         ...);
      },
      fs);
  std::vector<Array> out = cond(api, index, branches, out_defs, leaves);
  return tree_unflatten<R>(*out_defs[0], out);
}

}  // namespace control_flow_detail

// cond(pred, true_fn, false_fn, operands...): true_fn(operands...) if the boolean scalar pred is
// true, else false_fn(operands...). Both branches must return the same tree of the same types.
template <class TrueFn, class FalseFn, class... Ops>
auto cond(const Array& pred, TrueFn true_fn, FalseFn false_fn, const Ops&... operands) {
  using R = std::decay_t<std::invoke_result_t<TrueFn&, const Ops&...>>;
  constexpr const char* expected = "true_fun and false_fun arguments should be callable";
  if (!spmd::detail::is_callable(true_fn)) spmd::detail::raise_not_callable("cond", expected, "an empty true_fun");
  if (!spmd::detail::is_callable(false_fn))
    spmd::detail::raise_not_callable("cond", expected, "an empty false_fun");
  // The program's branches are ordered by index: false first.
  return control_flow_detail::run_cond<R>("cond", control_flow_detail::cond_index(pred),
                                          std::make_tuple(std::move(false_fn), std::move(true_fn)),
                                          operands...);
}

// switch_(index, branches, operands...): branches[clamp(index, 0, n - 1)](operands...).
template <class F, class... Ops>
auto switch_(const Array& index, const std::vector<F>& branches, const Ops&... operands) {
  using R = std::decay_t<std::invoke_result_t<const F&, const Ops&...>>;
  namespace d = control_flow_detail;
  for (size_t k = 0; k < branches.size(); ++k)
    if (!spmd::detail::is_callable(branches[k]))
      spmd::detail::raise_not_callable("switch", "branches argument should be a sequence of callables",
                                 "an empty function at index " + std::to_string(k));
  Array i = d::switch_index(index, branches.size());
  auto [leaves, in_def] = tree_flatten(std::make_tuple(operands...));
  std::vector<d::FlatFn> fns;
  std::vector<std::shared_ptr<TreeDef>> out_defs;
  for (const F& f : branches) {
    out_defs.push_back(std::make_shared<TreeDef>());
    fns.push_back(d::branch_fn<R, F, Ops...>(f, in_def, out_defs.back()));
  }
  std::vector<Array> out = d::cond("switch", i, fns, out_defs, leaves);
  return tree_unflatten<R>(*out_defs[0], out);
}

// while_loop(cond_fn, body_fn, init): carry = init; while cond_fn(carry): carry = body_fn(carry).
// body_fn must return a carry of the same tree and types; cond_fn a boolean scalar.
// Differentiable in forward mode only.
template <class CondFn, class BodyFn, class T>
T while_loop(CondFn cond_fn, BodyFn body_fn, const T& init) {
  namespace d = control_flow_detail;
  constexpr const char* expected = "body_fun and cond_fun arguments should be callable";
  if (!spmd::detail::is_callable(cond_fn))
    spmd::detail::raise_not_callable("while_loop", expected, "an empty cond_fun");
  if (!spmd::detail::is_callable(body_fn))
    spmd::detail::raise_not_callable("while_loop", expected, "an empty body_fun");
  auto [leaves, def] = tree_flatten(init);
  auto cond_def = std::make_shared<TreeDef>();
  auto body_def = std::make_shared<TreeDef>();
  d::FlatFn c = d::carry_fn<T>(std::move(cond_fn), def, cond_def);
  d::FlatFn b = d::carry_fn<T>(std::move(body_fn), def, body_def);
  return tree_unflatten<T>(def, d::while_loop(c, b, body_def, def, leaves));
}

// fori_loop(lower, upper, body, init): for i in [lower, upper): carry = body(i, carry), with i an
// int32 scalar. Static bounds make it a scan (reverse-mode differentiable), as in JAX.
template <class BodyFn, class T>
T fori_loop(int64_t lower, int64_t upper, BodyFn body, const T& init) {
  namespace d = control_flow_detail;
  check_callable(body, "fori_loop", "body_fun argument should be callable");
  auto [leaves, def] = tree_flatten(init);
  auto out_def = std::make_shared<TreeDef>();
  d::FlatFn fn = [body = std::move(body), def, out_def](std::span<const Array> in) {
    T carry = tree_unflatten<T>(def, in.subspan(1));
    auto [out, od] = tree_flatten(body(in[0], carry));
    *out_def = od;
    return out;
  };
  return tree_unflatten<T>(def, d::fori_loop(lower, upper, fn, out_def, def, leaves));
}

// fori_loop with bounds known only at run time: a while_loop over (i, upper, carry), as in JAX.
// Differentiable in forward mode only.
template <class BodyFn, class T>
T fori_loop(const Array& lower, const Array& upper, BodyFn body, const T& init) {
  check_callable(body, "fori_loop", "body_fun argument should be callable");
  using Carry = std::tuple<Array, Array, T>;
  Carry out = while_loop(
      [](const Carry& c) { return std::get<0>(c) < std::get<1>(c); },
      [body = std::move(body)](const Carry& c) {
        return Carry{std::get<0>(c) + 1, std::get<1>(c), body(std::get<0>(c), std::get<2>(c))};
      },
      Carry{lower, upper, init});
  return std::get<2>(out);
}

// scan(f, init, xs, length, reverse): JAX's lax.scan. f(carry, x) returns (carry, y); x is a
// slice of xs (a tree of arrays sharing their leading dimension) and the ys are stacked.
// Returns (final carry, stacked ys).
template <class F, class C, class X>
auto scan(F f, const C& init, const X& xs, std::optional<int64_t> length = std::nullopt,
          bool reverse = false) {
  using Out = std::decay_t<std::invoke_result_t<F&, const C&, const X&>>;
  using Y = std::decay_t<typename Out::second_type>;
  namespace d = control_flow_detail;
  check_callable(f, "scan", "f argument should be a callable");
  auto [init_leaves, init_def] = tree_flatten(init);
  auto [xs_leaves, xs_def] = tree_flatten(xs);
  auto carry_def = std::make_shared<TreeDef>();
  auto y_def = std::make_shared<TreeDef>();
  size_t num_carry = init_leaves.size();
  d::FlatFn body = [f = std::move(f), init_def, xs_def, carry_def, y_def,
                    num_carry](std::span<const Array> in) {
    C carry = tree_unflatten<C>(init_def, in.first(num_carry));
    X x = tree_unflatten<X>(xs_def, in.subspan(num_carry));
    Out out = f(carry, x);
    auto [c_leaves, c_def] = tree_flatten(out.first);
    auto [y_leaves, yd] = tree_flatten(out.second);
    *carry_def = c_def;
    *y_def = yd;
    c_leaves.insert(c_leaves.end(), y_leaves.begin(), y_leaves.end());
    return c_leaves;
  };
  std::vector<Array> out =
      d::scan(body, init_def, carry_def, init_leaves, xs_leaves, length, reverse, "scan");
  std::span<const Array> all(out);
  return std::pair<C, Y>{tree_unflatten<C>(init_def, all.first(num_carry)),
                         tree_unflatten<Y>(*y_def, all.subspan(num_carry))};
}

}  // namespace spmd::lax

// Function transformations, as in JAX: make_jaxpr, jit, grad/value_and_grad/vjp/jvp, vmap.
// Each takes a C++ callable on Arrays (or trees of Arrays, see tree.h) and returns a callable.
// Templates here only flatten and unflatten trees; the transformations themselves are
// type-erased (src/transforms).
#pragma once

#include <spmd/array.h>
#include <spmd/error.h>
#include <spmd/sharding_tree.h>
#include <spmd/tree.h>

#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace spmd {

struct Program;

// A traced function in JAX's jaxpr form; prints as JAX's make_jaxpr does.
class ClosedJaxpr {
 public:
  explicit ClosedJaxpr(std::shared_ptr<const Program> program) : program_(std::move(program)) {}
  std::string str() const;
  const Program& program() const { return *program_; }

 private:
  std::shared_ptr<const Program> program_;
};
std::ostream& operator<<(std::ostream& os, const ClosedJaxpr& jaxpr);

// Marks an argument or output that vmap does not map (Python's None in in_axes/out_axes).
struct NoneAxis {};
inline constexpr NoneAxis None{};
// An entry of in_axes/out_axes: a dimension or None.
struct Axis {
  Axis(int d) : dim(d) {}
  Axis(NoneAxis) {}
  std::optional<int> dim;
};

struct JitOptions {
  std::vector<int> static_argnums = {};  // non-Array arguments are always static; see jit()
  // Arguments whose buffers the call may reuse for its results, as in JAX: a donated Array that
  // an output of the same shape and dtype can take over is deleted for the caller (any later
  // use raises RuntimeError, Array::is_deleted() is true); elementwise results write over it.
  std::vector<int> donate_argnums = {};
  std::string name = {};  // shown in jaxprs as the call's name; defaults to "jit"
  // Shardings of the arguments (a prefix of the tuple of arguments) and of the results (a prefix
  // of the result), as jax.jit's in_shardings and out_shardings; unspecified leaves are left to
  // propagation. jit honours them: arguments are laid out so, results come out so.
  ShardingTree in_shardings = {};
  ShardingTree out_shardings = {};
};
struct GradOptions {
  std::vector<int> argnums = {0};
  bool has_aux = false;
};
struct VmapOptions {
  std::vector<Axis> in_axes = {0};   // one per argument, or a single entry for all
  std::vector<Axis> out_axes = {0};  // one per output leaf, or a single entry for all
  std::optional<int64_t> axis_size = {};
  std::string axis_name = {};
  // JAX's spmd_axis_name: the mesh axes (one name, or several as a tuple) that the batch dim is
  // split over where the function fixes shardings (with_sharding_constraint, jit's in_shardings
  // and out_shardings, shard_map's specs), which may then not name them. On an Explicit mesh it
  // must equal the axes splitting the mapped dim of the arguments, when any does.
  std::vector<std::string> spmd_axis_name = {};
};

namespace transform_detail {

using FlatFn = std::function<std::vector<Array>(std::span<const Array>)>;

// f as a function of the flat leaves of its arguments; stores the result's tree in *out_def.
template <class F, class... Args>
FlatFn flatten_fn(F f, TreeDef in_def, std::shared_ptr<TreeDef> out_def) {
  return [f = std::move(f), in_def = std::move(in_def),
          out_def = std::move(out_def)](std::span<const Array> leaves) {
    auto args = tree_unflatten<std::tuple<Args...>>(in_def, leaves);
    auto result = std::apply(f, args);
    auto [out_leaves, def] = tree_flatten(result);
    *out_def = def;
    return out_leaves;
  };
}

ClosedJaxpr make_jaxpr(const FlatFn& fn, std::span<const Array> args);

struct JitState;
std::shared_ptr<JitState> new_jit_state(JitOptions options);
// pmap's call: as jit's, except that arguments committed to other devices move to the map's
// devices instead of raising, as JAX's pmap moves them.
std::shared_ptr<JitState> new_pmap_state();
// Calls through the jit cache keyed by (in_def, leaf types); `make_fn` builds the flat function
// on a miss. Returns the output leaves and sets *out_def.
std::vector<Array> jit_call(JitState& state, const TreeDef& in_def, std::span<const Array> leaves,
                            const std::function<FlatFn(std::shared_ptr<TreeDef>)>& make_fn,
                            TreeDef* out_def);
ClosedJaxpr jit_lower(JitState& state, const FlatFn& fn, std::span<const Array> leaves,
                      bool optimized);
// `fn` fills *out_def when traced.
std::string jit_explain(JitState& state, const FlatFn& fn, const TreeDef& in_def,
                        std::span<const Array> leaves, const std::shared_ptr<TreeDef>& out_def);
int64_t jit_trace_count(const JitState& state);
size_t jit_cache_size(JitState& state);
size_t jit_compiled_count(JitState& state);

// grad: `fn` maps the differentiated leaves to (output leaves..., aux leaves...); the first
// `num_outputs` are differentiated. Returns (outputs, aux, gradients).
struct GradResult {
  std::vector<Array> outputs, aux, grads;
};
GradResult value_and_grad(const FlatFn& fn, std::span<const Array> primals, size_t num_outputs,
                          const char* api);
// jvp of fn at primals along tangents: (outputs, output tangents).
std::pair<std::vector<Array>, std::vector<Array>> jvp(const FlatFn& fn,
                                                      std::span<const Array> primals,
                                                      std::span<const Array> tangents);
// vjp: outputs and a pullback from output cotangents to input cotangents.
std::pair<std::vector<Array>, std::function<std::vector<Array>(std::span<const Array>)>> vjp(
    const FlatFn& fn, std::span<const Array> primals);
// vmap: in_dims per leaf (nullopt: not mapped); out_dims per output leaf.
std::vector<Array> vmap(const FlatFn& fn, std::span<const Array> leaves,
                        const std::vector<std::optional<int>>& in_dims,
                        const std::vector<Axis>& out_axes, std::optional<int64_t> axis_size,
                        const std::string& axis_name, const std::vector<std::string>& arg_names,
                        const std::vector<std::string>& spmd_axis_name = {});

// grad's argnums with negative ones counted from the end, as JAX's; raises JAX's TypeError for
// an index past the arguments, and ValueError unless exactly one argument is named.
std::vector<int> normalize_argnums(const std::vector<int>& argnums, size_t num_args,
                                   const std::string& api);
// Raises JAX's TypeError unless the differentiated output `out` is a single Array.
void check_single_output(const TreeDef& out, const std::string& api);

template <class T>
struct IsTuple : std::false_type {};
template <class... Ts>
struct IsTuple<std::tuple<Ts...>> : std::true_type {};

// A function's (out, aux) result for grad with has_aux: a std::pair or a two-element tuple.
template <class T>
struct IsOutAux : std::false_type {};
template <class A, class B>
struct IsOutAux<std::pair<A, B>> : std::true_type {};
template <class A, class B>
struct IsOutAux<std::tuple<A, B>> : std::true_type {};

}  // namespace transform_detail

// ---- make_jaxpr ----
template <class F>
auto make_jaxpr(F f) {
  check_callable(f, "make_jaxpr");
  return [f](const auto&... args) {
    auto [leaves, def] = tree_flatten(std::make_tuple(args...));
    auto out_def = std::make_shared<TreeDef>();
    auto fn = transform_detail::flatten_fn<F, std::decay_t<decltype(args)>...>(f, def, out_def);
    return transform_detail::make_jaxpr(fn, leaves);
  };
}

// ---- jit ----
// Traces f once per signature (tree structure, static values, shapes and dtypes), compiles the
// Program and runs it; later calls with the same signature reuse it. Arguments that are not
// Arrays (ints, strings, enums...) are static: they are part of the signature.
template <class F>
class Jitted {
 public:
  Jitted(F f, JitOptions options)
      : f_(std::move(f)), state_(transform_detail::new_jit_state(std::move(options))) {}

  template <class... Args>
  auto operator()(const Args&... args) const {
    using R = std::invoke_result_t<const F&, const Args&...>;
    auto [leaves, def] = tree_flatten(std::make_tuple(args...));
    TreeDef out_def;
    auto make_fn = [&](std::shared_ptr<TreeDef> out) {
      return transform_detail::flatten_fn<F, Args...>(f_, def, std::move(out));
    };
    std::vector<Array> outs = transform_detail::jit_call(*state_, def, leaves, make_fn, &out_def);
    return tree_unflatten<std::decay_t<R>>(out_def, outs);
  }
  // The Program jit runs for these arguments: as traced, or after the optimisation passes.
  template <class... Args>
  ClosedJaxpr lower(const Args&... args) const {
    return lower_impl(false, args...);
  }
  template <class... Args>
  ClosedJaxpr lower_optimized(const Args&... args) const {
    return lower_impl(true, args...);
  }
  // How a call on these arguments is partitioned, with no hidden communication: the mesh, how
  // inputs and outputs split, the program each device runs and every collective the partitioner
  // inserted, with the equation and rule or annotation that caused it and the bytes each device
  // sends. Nothing runs.
  template <class... Args>
  std::string explain(const Args&... args) const {
    auto [leaves, def] = tree_flatten(std::make_tuple(args...));
    auto out_def = std::make_shared<TreeDef>();
    auto fn = transform_detail::flatten_fn<F, Args...>(f_, def, out_def);
    return transform_detail::jit_explain(*state_, fn, def, leaves, out_def);
  }
  // How many times f has been traced (cache misses).
  int64_t trace_count() const { return transform_detail::jit_trace_count(*state_); }
  // How many signatures the cache holds now (JAX's `_cache_size()`): at most
  // config::compile_cache_size, the least recently used dropped past it.
  size_t cache_size() const { return transform_detail::jit_cache_size(*state_); }
  // How many compiled programs those signatures hold: one per placement of the operands met
  // (their committed shardings), at most config::compile_cache_size per signature, the least
  // recently used dropped past it.
  size_t compiled_count() const { return transform_detail::jit_compiled_count(*state_); }

 private:
  template <class... Args>
  ClosedJaxpr lower_impl(bool optimized, const Args&... args) const {
    auto [leaves, def] = tree_flatten(std::make_tuple(args...));
    auto fn = transform_detail::flatten_fn<F, Args...>(f_, def, std::make_shared<TreeDef>());
    return transform_detail::jit_lower(*state_, fn, leaves, optimized);
  }
  F f_;
  std::shared_ptr<transform_detail::JitState> state_;
};

template <class F>
Jitted<F> jit(F f, JitOptions options = {}) {
  check_callable(f, "jit");
  return Jitted<F>(std::move(f), std::move(options));
}

// jit(f).explain(args...): how f is partitioned on these arguments.
template <class F, class... Args>
std::string explain(F f, const Args&... args) {
  return jit(std::move(f)).explain(args...);
}

// ---- automatic differentiation ----
namespace transform_detail {

// Calls f with the arguments at `argnums` replaced by the leaves being differentiated. When f
// returns a pair (out, aux), the result carries aux too (has_aux).
template <bool WithValue, class F>
auto grad_impl(F f, GradOptions options) {
  check_callable(f, WithValue ? "value_and_grad" : "grad");
  return [f, options](const auto&... args) {
    using ArgsTuple = std::tuple<std::decay_t<decltype(args)>...>;
    using R = std::decay_t<decltype(std::apply(f, std::declval<ArgsTuple&>()))>;
    constexpr bool kAux = IsOutAux<R>::value;
    const std::string api = WithValue ? "value_and_grad" : "grad";
    if (kAux && !options.has_aux)
      throw TypeError("[" + api +
                      "] Gradient only defined for scalar-output functions. Output was a pair "
                      "(out, aux): pass .has_aux = true to differentiate out and return aux.");
    if (!kAux && options.has_aux)
      throw TypeError("[" + api +
                      "] expected function with aux output to return a two-element tuple, but "
                      "got a single output; with .has_aux = true return std::pair(out, aux).");
    ArgsTuple all(args...);
    constexpr size_t n = sizeof...(args);
    const std::vector<int> argnums = normalize_argnums(options.argnums, n, api);
    // Differentiated arguments as one tree: a tuple of the chosen ones.
    std::vector<Array> leaves;
    std::vector<TreeDef> defs(n);
    std::vector<std::vector<Array>> arg_leaves(n);
    [&]<size_t... I>(std::index_sequence<I...>) {
      ((std::tie(arg_leaves[I], defs[I]) = tree_flatten(std::get<I>(all))), ...);
    }
    (std::make_index_sequence<n>{});
    for (int a : argnums) {
      leaves.insert(leaves.end(), arg_leaves[size_t(a)].begin(), arg_leaves[size_t(a)].end());
    }
    auto out_def = std::make_shared<TreeDef>();
    auto aux_def = std::make_shared<TreeDef>();
    auto num_out = std::make_shared<size_t>(0);
    FlatFn fn = [&](std::span<const Array> xs) {
      ArgsTuple call = all;
      size_t offset = 0;
      [&]<size_t... I>(std::index_sequence<I...>) {
        (([&] {
           for (int a : argnums)
             if (size_t(a) == I) {
               size_t k = arg_leaves[I].size();
               std::get<I>(call) = tree_unflatten<std::tuple_element_t<I, ArgsTuple>>(
                   defs[I], xs.subspan(offset, k));
               offset += k;
             }
         }()),
         ...);
      }
      (std::make_index_sequence<n>{});
      auto result = std::apply(f, call);
      if constexpr (kAux) {
        auto [out_leaves, od] = tree_flatten(std::get<0>(result));
        auto [aux_leaves, ad] = tree_flatten(std::get<1>(result));
        check_single_output(od, api);
        *out_def = od;
        *aux_def = ad;
        *num_out = out_leaves.size();
        out_leaves.insert(out_leaves.end(), aux_leaves.begin(), aux_leaves.end());
        return out_leaves;
      } else {
        auto [out_leaves, od] = tree_flatten(result);
        check_single_output(od, api);
        *out_def = od;
        *num_out = out_leaves.size();
        return out_leaves;
      }
    };
    GradResult r = value_and_grad(fn, leaves, 0, api.c_str());
    // Gradients, shaped like the differentiated arguments.
    auto grads_of = [&]<size_t I>(std::integral_constant<size_t, I>, size_t& offset) {
      size_t k = arg_leaves[I].size();
      auto g = tree_unflatten<std::tuple_element_t<I, ArgsTuple>>(
          defs[I], std::span<const Array>(r.grads).subspan(offset, k));
      offset += k;
      return g;
    };
    auto make_grads = [&]() {
      if constexpr (n == 0) {
        return 0;
      } else {
        using First = std::tuple_element_t<0, ArgsTuple>;
        size_t offset = 0;
        First out{};
        [&]<size_t... I>(std::index_sequence<I...>) {
          (([&] {
             if (size_t(argnums[0]) == I) {
               if constexpr (std::is_same_v<std::tuple_element_t<I, ArgsTuple>, First>)
                 out = grads_of(std::integral_constant<size_t, I>{}, offset);
               else
                 throw ValueError(
                     "[grad] argnums other than 0 need an argument of the first "
                     "argument's type; pass the arguments as one tuple");
             }
           }()),
           ...);
        }
        (std::make_index_sequence<n>{});
        return out;
      }
    };
    auto grads = make_grads();
    std::span<const Array> outputs(r.outputs);
    if constexpr (kAux) {
      using Out = std::decay_t<std::tuple_element_t<0, R>>;
      using Aux = std::decay_t<std::tuple_element_t<1, R>>;
      Aux aux = tree_unflatten<Aux>(*aux_def, outputs.subspan(*num_out));
      if constexpr (WithValue)
        return std::make_pair(
            std::make_pair(tree_unflatten<Out>(*out_def, outputs.first(*num_out)), aux), grads);
      else
        return std::make_pair(grads, aux);
    } else if constexpr (WithValue) {
      return std::make_pair(tree_unflatten<R>(*out_def, outputs), grads);
    } else {
      return grads;
    }
  };
}

}  // namespace transform_detail

// grad(f): the gradient of a scalar-valued f with respect to argument argnums[0] (an Array or a
// tree of Arrays), shaped like that argument. With .has_aux = true, f returns a pair (out, aux)
// (aux any tree) and grad returns the pair (gradient, aux), as JAX's grad(f, has_aux=True);
// a pair result requires has_aux, since only a scalar can be differentiated.
template <class F>
auto grad(F f, GradOptions options = {}) {
  return transform_detail::grad_impl<false>(std::move(f), std::move(options));
}
// value_and_grad(f): the pair (f(args...), grad(f)(args...)); with has_aux,
// ((out, aux), gradient).
template <class F>
auto value_and_grad(F f, GradOptions options = {}) {
  return transform_detail::grad_impl<true>(std::move(f), std::move(options));
}

// jvp(f, primals, tangents): (f(*primals), the directional derivative along tangents), with
// primals and tangents tuples (or single Arrays) of the same structure.
template <class F, class P>
auto jvp(F f, const P& primals, const P& tangents) {
  check_callable(f, "jvp");
  auto [p_leaves, p_def] = tree_flatten(primals);
  auto [t_leaves, t_def] = tree_flatten(tangents);
  if (!(p_def == t_def))
    throw TypeError(
        "[jvp] primal and tangent arguments to jax.jvp must have the same tree "
        "structure; primals have tree structure " +
        p_def.str() + " whereas tangents have tree structure " + t_def.str() + ".");
  auto out_def = std::make_shared<TreeDef>();
  transform_detail::FlatFn fn = [&](std::span<const Array> xs) {
    P args = tree_unflatten<P>(p_def, xs);
    auto result = [&] {
      if constexpr (transform_detail::IsTuple<P>::value)
        return std::apply(f, args);
      else
        return f(args);
    }();
    auto [leaves, def] = tree_flatten(result);
    *out_def = def;
    return leaves;
  };
  auto [outs, touts] = transform_detail::jvp(fn, p_leaves, t_leaves);
  using R = std::decay_t<decltype([&] {
    if constexpr (transform_detail::IsTuple<P>::value)
      return std::apply(f, primals);
    else
      return f(primals);
  }())>;
  return std::make_pair(tree_unflatten<R>(*out_def, outs), tree_unflatten<R>(*out_def, touts));
}

// vjp(f, primals...): (f(primals...), pullback) where pullback(cotangent) returns a tuple of
// cotangents, one per primal.
template <class F, class... Args>
auto vjp(F f, const Args&... primals) {
  using R = std::decay_t<std::invoke_result_t<F, const Args&...>>;
  check_callable(f, "vjp");
  auto [leaves, def] = tree_flatten(std::make_tuple(primals...));
  auto out_def = std::make_shared<TreeDef>();
  auto fn = transform_detail::flatten_fn<F, Args...>(f, def, out_def);
  auto [outs, pullback] = transform_detail::vjp(fn, leaves);
  auto pb = [pullback, def, out_def](const R& cotangent) {
    auto [ct_leaves, ct_def] = tree_flatten(cotangent);
    if (!(ct_def == *out_def))
      throw TypeError("[vjp] the cotangent must have the structure of the output " +
                      out_def->str() + ", got " + ct_def.str());
    return tree_unflatten<std::tuple<Args...>>(def, pullback(ct_leaves));
  };
  return std::make_pair(tree_unflatten<R>(*out_def, outs), pb);
}

// ---- custom_jvp ----
struct CustomJvpOptions {
  std::string name = "<lambda>";      // the function's name in jaxprs (JAX: f.__name__)
  std::string jvp_name = "<lambda>";  // the jvp rule's name in jaxprs
};
namespace transform_detail {
std::vector<Array> custom_jvp_call(const FlatFn& primal, FlatFn jvp, std::span<const Array> args,
                                   const CustomJvpOptions& options);
}  // namespace transform_detail

// custom_jvp(f, jvp): f with a user-defined forward-mode derivative, as jax.custom_jvp with
// defjvp. jvp(primals, tangents) takes std::tuples of the arguments and of their tangents and
// returns the pair (f(primals...), the output's tangent), which must be linear in the tangents;
// reverse mode follows by linearizing and transposing it, as in JAX. Staged as
// `custom_jvp_call`, which evaluates f; under grad it stays in the forward computation when the
// rule computes its primal output by calling the function, as JAX's rules do.
template <class F, class Jvp>
auto custom_jvp(F f, Jvp jvp, CustomJvpOptions options = {}) {
  check_callable(f, "custom_jvp");
  check_callable(jvp, "custom_jvp");
  return [f, jvp, options](const auto&... args) {
    using ArgsTuple = std::tuple<std::decay_t<decltype(args)>...>;
    using R = std::decay_t<std::invoke_result_t<const F&, const decltype(args)&...>>;
    auto [leaves, def] = tree_flatten(ArgsTuple(args...));
    auto out_def = std::make_shared<TreeDef>();
    auto primal = transform_detail::flatten_fn<F, std::decay_t<decltype(args)>...>(f, def, out_def);
    const size_t n = leaves.size();
    transform_detail::FlatFn jvp_flat = [jvp, def, n](std::span<const Array> xs) {
      auto [out, tangent] = jvp(tree_unflatten<ArgsTuple>(def, xs.first(n)),
                                tree_unflatten<ArgsTuple>(def, xs.subspan(n)));
      std::vector<Array> flat = tree_leaves(out);
      std::vector<Array> tangent_leaves = tree_leaves(tangent);
      flat.insert(flat.end(), tangent_leaves.begin(), tangent_leaves.end());
      return flat;
    };
    std::vector<Array> outs =
        transform_detail::custom_jvp_call(primal, std::move(jvp_flat), leaves, options);
    return tree_unflatten<R>(*out_def, outs);
  };
}

// ---- custom_vjp ----
struct CustomVjpOptions {
  std::string name = "<lambda>";      // the function's name in jaxprs (JAX: f.__name__)
  std::string fwd_name = "<lambda>";  // the forward pass's name in jaxprs
  std::string bwd_name = "<lambda>";  // the backward pass's name in jaxprs
};
namespace transform_detail {
std::vector<Array> custom_vjp_call(const FlatFn& primal, FlatFn fwd, FlatFn bwd,
                                   std::span<const Array> args, const CustomVjpOptions& options);
// JAX's TypeError unless the fwd rule's primal output has the function's tree.
void check_fwd_tree(const TreeDef& fwd_out, const TreeDef& primal_out,
                    const CustomVjpOptions& options);
}  // namespace transform_detail

// custom_vjp(f, fwd, bwd): f with a user-defined reverse-mode derivative, as jax.custom_vjp.
// fwd(args...) returns the pair (f(args...), residuals) — residuals any tree of Arrays;
// bwd(residuals, cotangent) returns a std::tuple with one cotangent per argument. Forward mode
// (jvp) of such a function raises, as in JAX. Staged as `custom_vjp_call`, which evaluates f;
// under grad it stays in the forward computation when fwd calls the function, as in JAX.
template <class F, class Fwd, class Bwd>
auto custom_vjp(F f, Fwd fwd, Bwd bwd, CustomVjpOptions options = {}) {
  check_callable(f, "custom_vjp");
  check_callable(fwd, "custom_vjp");
  check_callable(bwd, "custom_vjp");
  return [f, fwd, bwd, options](const auto&... args) {
    using ArgsTuple = std::tuple<std::decay_t<decltype(args)>...>;
    using R = std::decay_t<std::invoke_result_t<const F&, const decltype(args)&...>>;
    using FwdOut = std::decay_t<std::invoke_result_t<const Fwd&, const decltype(args)&...>>;
    using Res = std::decay_t<decltype(std::declval<FwdOut>().second)>;
    auto [leaves, def] = tree_flatten(ArgsTuple(args...));
    auto out_def = std::make_shared<TreeDef>();
    auto res_def = std::make_shared<TreeDef>();
    auto primal = transform_detail::flatten_fn<F, std::decay_t<decltype(args)>...>(f, def, out_def);
    transform_detail::FlatFn fwd_flat = [fwd, def, res_def, out_def,
                                         options](std::span<const Array> xs) {
      auto [out, res] = std::apply(fwd, tree_unflatten<ArgsTuple>(def, xs));
      auto [flat, fwd_out_def] = tree_flatten(out);
      transform_detail::check_fwd_tree(fwd_out_def, *out_def, options);
      auto [res_leaves, rd] = tree_flatten(res);
      *res_def = rd;
      flat.insert(flat.end(), res_leaves.begin(), res_leaves.end());
      return flat;
    };
    transform_detail::FlatFn bwd_flat = [bwd, res_def, out_def](std::span<const Array> xs) {
      size_t n_res = size_t(res_def->num_leaves());
      Res res = tree_unflatten<Res>(*res_def, xs.first(n_res));
      R ct = tree_unflatten<R>(*out_def, xs.subspan(n_res));
      return tree_leaves(bwd(res, ct));
    };
    std::vector<Array> outs =
        transform_detail::custom_vjp_call(primal, std::move(fwd_flat), std::move(bwd_flat), leaves,
                                          options);
    return tree_unflatten<R>(*out_def, outs);
  };
}

// ---- Jacobians ----
// jacfwd(f)(x), jacrev(f)(x): the Jacobian of an Array -> Array function, shaped
// f(x).shape + x.shape, by forward mode over a basis of input directions or reverse mode over
// a basis of output cotangents (vmapped, as JAX does). hessian(f) = jacfwd(jacrev(f)).
namespace transform_detail {
Array jacobian(const FlatFn& fn, const Array& x, bool forward);
}  // namespace transform_detail

template <class F>
auto jacfwd(F f) {
  check_callable(f, "jacfwd");
  return [f](const Array& x) {
    return transform_detail::jacobian(
        [&](std::span<const Array> xs) { return std::vector<Array>{f(xs[0])}; }, x, true);
  };
}
template <class F>
auto jacrev(F f) {
  check_callable(f, "jacrev");
  return [f](const Array& x) {
    return transform_detail::jacobian(
        [&](std::span<const Array> xs) { return std::vector<Array>{f(xs[0])}; }, x, false);
  };
}
template <class F>
auto hessian(F f) {
  return jacfwd(jacrev(std::move(f)));
}

// ---- vmap ----
template <class F>
auto vmap(F f, VmapOptions options = {}) {
  check_callable(f, "vmap");
  return [f, options](const auto&... args) {
    using R = std::decay_t<std::invoke_result_t<const F&, const decltype(args)&...>>;
    constexpr size_t n = sizeof...(args);
    if (options.in_axes.size() != 1 && options.in_axes.size() != n)
      throw ValueError(
          "[vmap] in_axes specification must be a tree prefix of the corresponding "
          "value, got specification with " +
          std::to_string(options.in_axes.size()) + " entries for " + std::to_string(n) +
          " positional arguments");
    std::vector<Array> leaves;
    std::vector<std::optional<int>> dims;
    std::vector<std::string> names;
    size_t i = 0;
    auto add = [&](const auto& arg) {
      auto arg_leaves = tree_leaves(arg);
      const Axis& ax = options.in_axes[options.in_axes.size() == 1 ? 0 : i];
      for (const Array& x : arg_leaves) {
        leaves.push_back(x);
        dims.push_back(ax.dim);
        names.push_back("argument " + std::to_string(i));
      }
      ++i;
    };
    (add(args), ...);
    auto [all_leaves, def] = tree_flatten(std::make_tuple(args...));
    auto out_def = std::make_shared<TreeDef>();
    auto fn = transform_detail::flatten_fn<F, std::decay_t<decltype(args)>...>(f, def, out_def);
    std::vector<Array> outs =
        transform_detail::vmap(fn, all_leaves, dims, options.out_axes, options.axis_size,
                               options.axis_name, names, options.spmd_axis_name);
    return tree_unflatten<R>(*out_def, outs);
  };
}

}  // namespace spmd

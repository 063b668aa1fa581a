// Primitive family: XLA's scatter with JAX's five combiners, scatter (set), scatter-add,
// scatter-mul, scatter-min and scatter-max (JAX's scatter_p, scatter_add_p, ...). The shape rule
// checks the dimension numbers as XLA does; the output has the operand's type. The update_jaxpr
// param holds the combiner as JAX prints it (None for a plain scatter). The transformation rules
// follow JAX's (jax/_src/lax/slicing.py).
#include "prims/scatter.h"

#include <spmd/error.h>
#include <spmd/lax.h>
#include <spmd/ops.h>

#include "ir/program.h"
#include "prims/dimension_numbers.h"
#include "prims/families.h"
#include "prims/indexing.h"
#include "prims/primitive.h"
#include "prims/rule_util.h"

#include <algorithm>
#include <map>
#include <mutex>

namespace spmd {
namespace {

using namespace dimension_numbers;

// The primitive a shape rule or kernel belongs to: its name in messages and its combiner.
struct ScatterOp {
  const char* name;
  cpu::ScatterCombine combine;
};
constexpr ScatterOp kScatterOps[] = {{"scatter", cpu::ScatterCombine::set},
                                     {"scatter-add", cpu::ScatterCombine::add},
                                     {"scatter-mul", cpu::ScatterCombine::mul},
                                     {"scatter-min", cpu::ScatterCombine::min},
                                     {"scatter-max", cpu::ScatterCombine::max}};

[[noreturn]] void fail(const char* name, const std::string& what) {
  throw ShapeError("[" + std::string(name) + "] " + what);
}

cpu::ScatterDims scatter_dims(const Params& p) {
  return {p.get_ints("update_window_dims"), p.get_ints("inserted_window_dims"),
          p.get_ints("scatter_dims_to_operand_dims"), p.get_ints("operand_batching_dims"),
          p.get_ints("scatter_indices_batching_dims")};
}

void check_types(const ScatterOp& op, const AbstractValue& x, const AbstractValue& idx,
                 const AbstractValue& upd) {
  const std::string api = "[" + std::string(op.name) + "] ";
  if (!is_integer(idx.dtype))
    throw TypeError(api + "indices must have an integer type, got " +
                    std::string(dtype_name(idx.dtype)));
  if (is_bool(x.dtype) &&
      (op.combine == cpu::ScatterCombine::add || op.combine == cpu::ScatterCombine::mul))
    throw TypeError(api + "does not accept dtype bool: updates are combined by " +
                    (op.combine == cpu::ScatterCombine::add ? "add" : "mul"));
  if (upd.dtype != x.dtype)
    throw TypeError(api + "updates must have the operand's dtype " +
                    std::string(dtype_name(x.dtype)) + ", got " +
                    std::string(dtype_name(upd.dtype)));
  if (idx.shape.ndim() < 1)
    fail(op.name, "indices must have at least one dimension (the index vector)");
}

// The window: operand dims that are neither inserted nor batching take, in order, the sizes of
// the updates' window dims; the updates' other dims follow the indices' batch dims.
void check_window(const char* name, const AbstractValue& x, const AbstractValue& idx,
                  const AbstractValue& upd, const cpu::ScatterDims& g) {
  const int r = x.shape.ndim(), q = idx.shape.ndim();
  if (size_t(r) !=
      g.update_window_dims.size() + g.inserted_window_dims.size() + g.operand_batching_dims.size())
    fail(name,
         "the operand rank must equal the number of update window, inserted window and operand "
         "batching dims, got operand shape " +
             x.shape.str());
  if (size_t(upd.shape.ndim()) != g.update_window_dims.size() + size_t(q - 1))
    fail(name, "updates of shape " + upd.shape.str() + " do not match indices of shape " +
                   idx.shape.str() + " and update_window_dims " + ints_str(g.update_window_dims));
  size_t k = 0;
  for (int d = 0; d < r; ++d) {
    if (contains(g.inserted_window_dims, d) || contains(g.operand_batching_dims, d)) continue;
    if (upd.shape[int(g.update_window_dims[k++])] > x.shape[d])
      fail(name, "update window of shape " + upd.shape.str() + " does not fit operand shape " +
                     x.shape.str());
  }
  int b = 0;
  for (int u = 0; u < upd.shape.ndim(); ++u) {
    if (contains(g.update_window_dims, u)) continue;
    if (upd.shape[u] != idx.shape[b++])
      fail(name, "the scatter dims of updates " + upd.shape.str() +
                     " must match the batch dims of indices " + idx.shape.str());
  }
}

std::vector<AbstractValue> scatter_rule(const ScatterOp& op, std::span<const AbstractValue> in,
                                        const Params& p) {
  const char* name = op.name;
  const std::string api = "[" + std::string(name) + "] ";
  if (in.size() != 3) throw ValueError(api + "expected an operand, indices and updates");
  const AbstractValue &x = in[0], &idx = in[1], &upd = in[2];
  const cpu::ScatterDims g = scatter_dims(p);
  const std::string& mode = p.get<std::string>("mode");
  if (mode != "clip" && mode != "fill" && mode != "promise_in_bounds")
    throw ValueError(api + "mode must be 'clip', 'fill' or 'promise_in_bounds', got '" + mode +
                     "'");
  check_types(op, x, idx, upd);
  const int r = x.shape.ndim(), q = idx.shape.ndim();
  if (int64_t(g.scatter_dims_to_operand_dims.size()) != idx.shape[q - 1])
    fail(name, "scatter_dims_to_operand_dims has " +
                   std::to_string(g.scatter_dims_to_operand_dims.size()) +
                   " entries but the index vector has size " + std::to_string(idx.shape[q - 1]));
  check_dim_list(name, "update_window_dims", g.update_window_dims, upd.shape.ndim(), true);
  check_dim_list(name, "inserted_window_dims", g.inserted_window_dims, r, true);
  check_dim_list(name, "operand_batching_dims", g.operand_batching_dims, r, true);
  check_dim_list(name, "scatter_dims_to_operand_dims", g.scatter_dims_to_operand_dims, r, false);
  check_dim_list(name, "scatter_indices_batching_dims", g.scatter_indices_batching_dims, q - 1,
                 false);
  check_batching_dims(name,
                      {"scatter_indices_batching_dims", "inserted_window_dims",
                       "scatter_dims_to_operand_dims", "indices"},
                      x, idx, g.operand_batching_dims, g.scatter_indices_batching_dims,
                      g.inserted_window_dims, g.scatter_dims_to_operand_dims);
  check_window(name, x, idx, upd, g);
  return {x};
}

void scatter_kernel(const ScatterOp& op, const KernelArgs& a) {
  const Operand &x = a.in[0], &idx = a.in[1], &upd = a.in[2];
  cpu::scatter(op.combine, x.data, x.aval->shape, x.aval->dtype, idx.data, idx.aval->shape,
               idx.aval->dtype, upd.data, upd.aval->shape, scatter_dims(a.params),
               a.params.get<std::string>("mode") == "clip", a.out[0].data);
}

// JAX's update_jaxpr `{ lambda ; a:t[] b:t[]. let c:t[] = add a b in (c,) }` (add, mul, min or
// max), one per combiner and dtype and shared, so that equal scatters have equal params.
ProgramRef update_computation(const char* combiner, DType t) {
  static std::map<std::pair<std::string, DType>, ProgramRef> cache;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  ProgramRef& p = cache[{combiner, t}];
  if (p) return p;
  auto program = std::make_shared<Program>();
  const AbstractValue scalar{Shape{}, t, false};
  const int a = program->new_var(scalar), b = program->new_var(scalar);
  const int c = program->new_var(scalar);
  program->invars = {a, b};
  program->equations.push_back(
      Equation{&primitive(combiner), Params{}, {Atom::of_var(a), Atom::of_var(b)}, {c}});
  program->outputs = {Atom::of_var(c)};
  p = std::move(program);
  return p;
}

// ---- transformation rules -----------------------------------------------------------------------
using Ints = std::vector<int64_t>;

// The params of scatter primitive `name` with the update computation it prints.
Params with_combiner(const std::string& name, Params p, DType t) {
  if (name == "scatter")
    p.set("update_jaxpr", NoneParam{});
  else
    p.set("update_jaxpr", update_computation(name.c_str() + std::string("scatter-").size(), t));
  return p;
}

Array bind_scatter(const std::string& name, const Array& operand, const Array& indices,
                   const Array& updates, const Params& p) {
  return bind1(primitive(name), {operand, indices, updates},
               with_combiner(name, p, operand.dtype()));
}

// The gather that reads back, for every update element, the operand element it lands on (the
// inverse of the scatter with params `p`), filling dropped windows with `fill`.
Array gather_landing(const Array& from, const Array& indices, const Shape& updates_shape,
                     const Params& p, ParamValue fill) {
  const Ints& window_dims = p.get_ints("update_window_dims");
  const Ints& inserted = p.get_ints("inserted_window_dims");
  const Ints& batching = p.get_ints("operand_batching_dims");
  Ints slice_sizes;
  for (int i = 0, pos = 0; i < from.ndim(); ++i) {
    if (contains(inserted, i) || contains(batching, i))
      slice_sizes.push_back(1);
    else
      slice_sizes.push_back(updates_shape[int(window_dims[size_t(pos++)])]);
  }
  const cpu::GatherDims g{window_dims,
                          inserted,
                          p.get_ints("scatter_dims_to_operand_dims"),
                          batching,
                          p.get_ints("scatter_indices_batching_dims"),
                          slice_sizes};
  return gather(from, indices, g, p.get<std::string>("mode"), std::move(fill), false, false);
}

// JAX's _scatter_addsub_jvp: scatter-add is linear in the operand and the updates together.
JvpResult scatter_add_jvp(const Primitive& self, std::span<const Array> x, std::span<const Array> t,
                          const Params& p) {
  Array primal = bind1(self, x, p);
  if (is_zero(t[0]) && is_zero(t[2])) return JvpResult{{primal}, {Array()}};
  Array operand_t = instantiate_zero(t[0], aval_of(x[0]));
  Array updates_t = instantiate_zero(t[2], aval_of(x[2]));
  return JvpResult{{primal}, {bind1(self, {operand_t, x[1], updates_t}, p)}};
}

// JAX's _scatter_addsub_transpose_rule: the operand's cotangent passes through, the updates'
// is gathered from it window by window.
std::vector<Array> scatter_add_transpose(std::span<const Array> cts,
                                         std::span<const LinearInput> in, const Params& p) {
  const Array& t = cts[0];
  std::vector<Array> out(3);
  if (in[0].is_linear()) out[0] = t;
  if (in[2].is_linear())
    out[2] =
        gather_landing(t, in[1].value, in[2].aval.shape, p, zero_fill(p.get<std::string>("mode")));
  return out;
}

// JAX's _scatter_jvp. With unique indices a scatter is linear in the operand and the updates
// together. Otherwise each update gets an id; the ids are scattered and read back, so that only
// the operand elements no update reaches and the updates that win their element are kept, and
// the primal and tangent are scatter-adds of those.
JvpResult scatter_jvp(const Primitive& self, std::span<const Array> x, std::span<const Array> t,
                      const Params& p) {
  if (is_zero(t[0]) && is_zero(t[2])) return JvpResult{{bind1(self, x, p)}, {Array()}};
  Array operand_t = instantiate_zero(t[0], aval_of(x[0]));
  Array updates_t = instantiate_zero(t[2], aval_of(x[2]));
  if (p.get<bool>("unique_indices"))
    return JvpResult{{bind1(self, x, p)}, {bind1(self, {operand_t, x[1], updates_t}, p)}};
  const Array &operand = x[0], &indices = x[1], &updates = x[2];
  Shape ids_shape = updates.shape();
  for (int64_t d : p.get_ints("update_window_dims")) ids_shape[int(d)] = 1;
  Array ids = lax::add(lax::reshape(lax::iota(uint32, ids_shape.size()), ids_shape),
                       full(ids_shape, Array(1), uint32));
  ids = broadcast_to(ids, updates.shape());
  const Array scattered = bind1(self, {strong_zeros(operand.shape(), uint32), indices, ids}, p);
  const Array landed = gather_landing(scattered, indices, updates.shape(), p, NoneParam{});
  const Array keep_operand = equal(scattered, Array(0u));
  const Array keep_update = equal(ids, landed);
  auto masked = [](const Array& keep, const Array& v) {
    return lax::select(keep, v, strong_zeros(v.shape(), v.dtype()));
  };
  Array primal = bind_scatter("scatter-add", masked(keep_operand, operand), indices,
                              masked(keep_update, updates), p);
  Array tangent = bind_scatter("scatter-add", masked(keep_operand, operand_t), indices,
                               masked(keep_update, updates_t), p);
  return JvpResult{{primal}, {tangent}};
}

[[noreturn]] void require_unique(const char* what) {
  throw NotImplementedError(std::string(what) + " only implemented where unique_indices=True");
}

// JAX's _scatter_transpose_rule: the operand's cotangent without the elements the updates
// replaced, the updates' gathered from it.
std::vector<Array> scatter_transpose(std::span<const Array> cts, std::span<const LinearInput> in,
                                     const Params& p) {
  if (!p.get<bool>("unique_indices")) require_unique("[scatter] transpose is");
  const Array& t = cts[0];
  std::vector<Array> out(3);
  if (in[0].is_linear())
    out[0] = bind_scatter("scatter", t, in[1].value, strong_zeros(in[2].aval.shape, t.dtype()), p);
  if (in[2].is_linear()) out[2] = gather_landing(t, in[1].value, in[2].aval.shape, p, int64_t{0});
  return out;
}

// JAX's scatter-mul jvp: linear in the operand; in the updates, the operand times the updates'
// tangents scattered into zeros (unique indices only).
JvpRule scatter_mul_jvp(const Primitive& self) {
  TangentRule operand_rule = [&self](const Array& g, const Primal& pr) {
    return bind1(self, {g, pr.x[1], pr.x[2]}, pr.params);
  };
  TangentRule updates_rule = [](const Array& g, const Primal& pr) {
    if (!pr.params.get<bool>("unique_indices"))
      throw NotImplementedError(
          "[scatter-mul] gradients are only implemented if `unique_indices=True`");
    const Array zeros = strong_zeros(pr.x[0].shape(), pr.x[0].dtype());
    return lax::mul(pr.x[0], bind_scatter("scatter-add", zeros, pr.x[1], g, pr.params));
  };
  return standard_jvp(self, {operand_rule, nullptr, updates_rule});
}

// JAX's _scatter_mul_transpose_rule.
std::vector<Array> scatter_mul_transpose(std::span<const Array> cts,
                                         std::span<const LinearInput> in, const Params& p) {
  const Array& t = cts[0];
  std::vector<Array> out(3);
  if (in[0].is_linear()) out[0] = bind_scatter("scatter-mul", t, in[1].value, in[2].value, p);
  if (in[2].is_linear()) {
    if (!p.get<bool>("unique_indices"))
      throw NotImplementedError(
          "[scatter-mul] gradients are only implemented if `unique_indices=True`");
    out[2] = gather_landing(lax::mul(t, in[0].value), in[1].value, in[2].aval.shape, p, int64_t{0});
  }
  return out;
}

// JAX's _scatter_extremal_jvp: where several values tie for an element (updates equal to the
// result, and the operand if it kept its value) the tangent is their average.
JvpResult scatter_extremal_jvp(const Primitive& self, std::span<const Array> x,
                               std::span<const Array> t, const Params& p) {
  const Array &operand = x[0], &indices = x[1], &updates = x[2];
  Array primal = bind1(self, x, p);
  if (is_zero(t[0]) && is_zero(t[2])) return JvpResult{{primal}, {Array()}};
  const Array g_operand = instantiate_zero(t[0], aval_of(operand));
  const Array g_updates = instantiate_zero(t[2], aval_of(updates));
  const Shape& us = updates.shape();
  auto landing = [&](const Array& from) {
    return gather_landing(from, indices, us, p, NoneParam{});
  };
  const Array zeros_op = strong_zeros(operand.shape(), operand.dtype());
  const Array zeros_up = strong_zeros(us, updates.dtype());
  const Array ones_up = full(us, Array(1), updates.dtype());
  const Array target = landing(primal);
  const Array successful = equal(updates, target);
  const Array retained = equal(landing(operand), target);
  const Array num_updates = landing(bind_scatter("scatter-add", zeros_op, indices,
                                                 lax::select(successful, ones_up, zeros_up), p));
  const Array num_refs = landing(bind_scatter("scatter-add", zeros_op, indices, ones_up, p));
  const Array updates_normalizer =
      lax::select(retained, divide(1.0, add(num_updates, 1)), divide(1.0, num_updates));
  const Array updates_coef = lax::select(successful, updates_normalizer, zeros_up);
  const Array operand_normalizer =
      lax::select(retained, divide(1.0, add(num_updates, 1)), zeros_up);
  const Array operand_coef = divide(add(-1.0, operand_normalizer), num_refs);
  const Array tangent_updates =
      add(multiply(landing(g_operand), operand_coef), multiply(g_updates, updates_coef));
  return JvpResult{{primal}, {bind_scatter("scatter-add", g_operand, indices, tangent_updates, p)}};
}

// JAX's _scatter_batching_rule: the operand and updates get the batch dimension in front; with
// unbatched indices it is an extra update window dimension, with batched indices a scatter batch
// dimension pair (operand_batching_dims / scatter_indices_batching_dims), where JAX casts the
// three operands to vary over vmap's spmd_axis_name first.
BatchResult scatter_batch(const Primitive& self, std::span<const Array> args,
                          std::span<const int> dims, const Params& params,
                          const BatchContext& ctx) {
  const Array operand = bdim_at_front(args[0], dims[0], ctx);
  const Array updates = bdim_at_front(args[2], dims[2], ctx);
  const Array& indices = args[1];
  const Ints window = params.get_ints("update_window_dims");
  const Ints inserted = params.get_ints("inserted_window_dims");
  const Ints to_operand = params.get_ints("scatter_dims_to_operand_dims");
  const Ints operand_batching = params.get_ints("operand_batching_dims");
  const Ints indices_batching = params.get_ints("scatter_indices_batching_dims");
  Params p = params;
  p.set("inserted_window_dims", add_each(inserted, 1));
  p.set("scatter_dims_to_operand_dims", add_each(to_operand, 1));
  std::vector<Array> xs{operand, indices, updates};
  if (!is_batched(dims[1])) {
    p.set("update_window_dims", prepend(0, add_each(window, 1)));
    p.set("operand_batching_dims", add_each(operand_batching, 1));
    xs = spmd_names_insert_pvary(std::move(xs));
  } else {
    xs[1] = bdim_at_front(indices, dims[1], ctx);
    p.set("update_window_dims", add_each(window, 1));
    p.set("operand_batching_dims", prepend(0, add_each(operand_batching, 1)));
    p.set("scatter_indices_batching_dims", prepend(0, add_each(indices_batching, 1)));
  }
  return result_at(bind1(self, xs, p), 0);
}

}  // namespace

void register_scatter_primitives(PrimitiveRegistry& r) {
  for (const ScatterOp& op : kScatterOps) {
    Primitive& s = r.define(
        op.name,
        [&op](std::span<const AbstractValue> in, const Params& p) {
          return scatter_rule(op, in, p);
        },
        [&op](const KernelArgs& a) { scatter_kernel(op, a); });
    s.batch = binding(s, scatter_batch);
    // Updates land at runtime indices anywhere in the operand.
    s.sharding_rule = [](std::span<const AbstractValue> in, std::span<const AbstractValue> out,
                         const Params&) { return replicated_sharding_rule(in, out); };
  }
  Primitive& scatter = r.at("scatter");
  scatter.jvp = binding(scatter, scatter_jvp);
  scatter.transpose = scatter_transpose;
  Primitive& scatter_add = r.at("scatter-add");
  scatter_add.jvp = binding(scatter_add, scatter_add_jvp);
  scatter_add.transpose = scatter_add_transpose;
  Primitive& scatter_mul = r.at("scatter-mul");
  scatter_mul.jvp = scatter_mul_jvp(scatter_mul);
  scatter_mul.transpose = scatter_mul_transpose;
  for (const char* name : {"scatter-min", "scatter-max"}) {
    Primitive& p = r.at(name);
    p.jvp = binding(p, scatter_extremal_jvp);
  }
}

Array scatter(const std::string& name, const Array& operand, const Array& indices,
              const Array& updates, const cpu::ScatterDims& dims, bool indices_are_sorted,
              bool unique_indices, const std::string& mode) {
  const Params params{{"update_window_dims", dims.update_window_dims},
                      {"inserted_window_dims", dims.inserted_window_dims},
                      {"scatter_dims_to_operand_dims", dims.scatter_dims_to_operand_dims},
                      {"operand_batching_dims", dims.operand_batching_dims},
                      {"scatter_indices_batching_dims", dims.scatter_indices_batching_dims},
                      {"indices_are_sorted", indices_are_sorted},
                      {"unique_indices", unique_indices},
                      {"mode", mode},
                      {"update_consts", std::vector<int64_t>{}}};
  return bind_scatter(name, operand, indices, updates, params);
}

Array scatter_add(const Array& operand, const Array& indices, const Array& updates,
                  const cpu::ScatterDims& dims, bool indices_are_sorted, bool unique_indices,
                  const std::string& mode) {
  return scatter("scatter-add", operand, indices, updates, dims, indices_are_sorted, unique_indices,
                 mode);
}

}  // namespace spmd

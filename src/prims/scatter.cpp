// Primitive family: scatter-add, XLA's scatter with addition (JAX's scatter_add_p). The shape rule
// checks the dimension numbers as XLA does; the output has the operand's type. The
// update_jaxpr param holds the combiner `add` as JAX prints it. Its transformation rules follow
// JAX's (jax/_src/lax/slicing.py).
#include "prims/scatter.h"

#include <spmd/error.h>

#include "ir/program.h"
#include "prims/dimension_numbers.h"
#include "prims/families.h"
#include "prims/indexing.h"
#include "prims/primitive.h"
#include "prims/rule_util.h"

#include <algorithm>
#include <array>
#include <mutex>

namespace spmd {
namespace {

using namespace dimension_numbers;

[[noreturn]] void fail(const std::string& what) {
  throw ShapeError("[scatter-add] " + what);
}

cpu::ScatterDims scatter_dims(const Params& p) {
  return {p.get_ints("update_window_dims"), p.get_ints("inserted_window_dims"),
          p.get_ints("scatter_dims_to_operand_dims"), p.get_ints("operand_batching_dims"),
          p.get_ints("scatter_indices_batching_dims")};
}

void check_types(const AbstractValue& x, const AbstractValue& idx, const AbstractValue& upd) {
  if (!is_integer(idx.dtype))
    throw TypeError("[scatter-add] indices must have an integer type, got " +
                    std::string(dtype_name(idx.dtype)));
  if (is_bool(x.dtype))
    throw TypeError("[scatter-add] does not accept dtype bool: updates are combined by add");
  if (upd.dtype != x.dtype)
    throw TypeError("[scatter-add] updates must have the operand's dtype " +
                    std::string(dtype_name(x.dtype)) + ", got " +
                    std::string(dtype_name(upd.dtype)));
  if (idx.shape.ndim() < 1) fail("indices must have at least one dimension (the index vector)");
}

// The window: operand dims that are neither inserted nor batching take, in order, the sizes of
// the updates' window dims; the updates' other dims follow the indices' batch dims.
void check_window(const AbstractValue& x, const AbstractValue& idx, const AbstractValue& upd,
                  const cpu::ScatterDims& g) {
  const int r = x.shape.ndim(), q = idx.shape.ndim();
  if (size_t(r) !=
      g.update_window_dims.size() + g.inserted_window_dims.size() + g.operand_batching_dims.size())
    fail(
        "the operand rank must equal the number of update window, inserted window and operand "
        "batching dims, got operand shape " +
        x.shape.str());
  if (size_t(upd.shape.ndim()) != g.update_window_dims.size() + size_t(q - 1))
    fail("updates of shape " + upd.shape.str() + " do not match indices of shape " +
         idx.shape.str() + " and update_window_dims " + ints_str(g.update_window_dims));
  size_t k = 0;
  for (int d = 0; d < r; ++d) {
    if (contains(g.inserted_window_dims, d) || contains(g.operand_batching_dims, d)) continue;
    if (upd.shape[int(g.update_window_dims[k++])] > x.shape[d])
      fail("update window of shape " + upd.shape.str() + " does not fit operand shape " +
           x.shape.str());
  }
  int b = 0;
  for (int u = 0; u < upd.shape.ndim(); ++u) {
    if (contains(g.update_window_dims, u)) continue;
    if (upd.shape[u] != idx.shape[b++])
      fail("the scatter dims of updates " + upd.shape.str() +
           " must match the batch dims of indices " + idx.shape.str());
  }
}

std::vector<AbstractValue> scatter_add_rule(std::span<const AbstractValue> in, const Params& p) {
  if (in.size() != 3) throw ValueError("[scatter-add] expected an operand, indices and updates");
  const AbstractValue &x = in[0], &idx = in[1], &upd = in[2];
  const cpu::ScatterDims g = scatter_dims(p);
  const std::string& mode = p.get<std::string>("mode");
  if (mode != "clip" && mode != "fill" && mode != "promise_in_bounds")
    throw ValueError("[scatter-add] mode must be 'clip', 'fill' or 'promise_in_bounds', got '" +
                     mode + "'");
  check_types(x, idx, upd);
  const int r = x.shape.ndim(), q = idx.shape.ndim();
  if (int64_t(g.scatter_dims_to_operand_dims.size()) != idx.shape[q - 1])
    fail("scatter_dims_to_operand_dims has " +
         std::to_string(g.scatter_dims_to_operand_dims.size()) +
         " entries but the index vector has size " + std::to_string(idx.shape[q - 1]));
  check_dim_list("scatter-add", "update_window_dims", g.update_window_dims, upd.shape.ndim(), true);
  check_dim_list("scatter-add", "inserted_window_dims", g.inserted_window_dims, r, true);
  check_dim_list("scatter-add", "operand_batching_dims", g.operand_batching_dims, r, true);
  check_dim_list("scatter-add", "scatter_dims_to_operand_dims", g.scatter_dims_to_operand_dims, r,
                 false);
  check_dim_list("scatter-add", "scatter_indices_batching_dims", g.scatter_indices_batching_dims,
                 q - 1, false);
  check_batching_dims("scatter-add",
                      {"scatter_indices_batching_dims", "inserted_window_dims",
                       "scatter_dims_to_operand_dims", "indices"},
                      x, idx, g.operand_batching_dims, g.scatter_indices_batching_dims,
                      g.inserted_window_dims, g.scatter_dims_to_operand_dims);
  check_window(x, idx, upd, g);
  return {x};
}

void scatter_add_kernel(const KernelArgs& a) {
  const Operand &x = a.in[0], &idx = a.in[1], &upd = a.in[2];
  cpu::scatter_add(x.data, x.aval->shape, x.aval->dtype, idx.data, idx.aval->shape, idx.aval->dtype,
                   upd.data, upd.aval->shape, scatter_dims(a.params),
                   a.params.get<std::string>("mode") == "clip", a.out[0].data);
}

// JAX's update_jaxpr `{ lambda ; a:t[] b:t[]. let c:t[] = add a b in (c,) }`, one per dtype
// and shared, so that equal scatters have equal params.
ProgramRef add_computation(DType t) {
  static std::array<ProgramRef, kNumDTypes> cache;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  ProgramRef& p = cache[size_t(t)];
  if (p) return p;
  auto program = std::make_shared<Program>();
  const AbstractValue scalar{Shape{}, t, false};
  const int a = program->new_var(scalar), b = program->new_var(scalar);
  const int c = program->new_var(scalar);
  program->invars = {a, b};
  program->equations.push_back(
      Equation{&primitive("add"), Params{}, {Atom::of_var(a), Atom::of_var(b)}, {c}});
  program->outputs = {Atom::of_var(c)};
  p = std::move(program);
  return p;
}

// ---- transformation rules
// ------------------------------------------------------------------------
using Ints = std::vector<int64_t>;

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
  if (!in[2].is_linear()) return out;
  const Ints& window_dims = p.get_ints("update_window_dims");
  const Ints& inserted = p.get_ints("inserted_window_dims");
  const Ints& batching = p.get_ints("operand_batching_dims");
  Ints slice_sizes;
  for (int i = 0, pos = 0; i < t.ndim(); ++i) {
    if (contains(inserted, i) || contains(batching, i))
      slice_sizes.push_back(1);
    else
      slice_sizes.push_back(in[2].aval.shape[int(window_dims[size_t(pos++)])]);
  }
  const cpu::GatherDims g{window_dims,
                          inserted,
                          p.get_ints("scatter_dims_to_operand_dims"),
                          batching,
                          p.get_ints("scatter_indices_batching_dims"),
                          slice_sizes};
  const std::string& mode = p.get<std::string>("mode");
  out[2] = gather(t, in[1].value, g, mode, zero_fill(mode), false, false);
  return out;
}

// JAX's _scatter_batching_rule: the operand and updates get the batch dimension in front; with
// unbatched indices it is an extra update window dimension, with batched indices a scatter batch
// dimension pair (operand_batching_dims / scatter_indices_batching_dims), where JAX casts the
// three operands to vary over vmap's spmd_axis_name first.
BatchResult scatter_add_batch(const Primitive& self, std::span<const Array> args,
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
  Primitive& scatter_add = r.define("scatter-add", scatter_add_rule, scatter_add_kernel);
  scatter_add.jvp = binding(scatter_add, scatter_add_jvp);
  scatter_add.transpose = scatter_add_transpose;
  scatter_add.batch = binding(scatter_add, scatter_add_batch);
  // Updates land at runtime indices anywhere in the operand.
  scatter_add.sharding_rule = [](std::span<const AbstractValue> in,
                                 std::span<const AbstractValue> out,
                                 const Params&) { return replicated_sharding_rule(in, out); };
}

Array scatter_add(const Array& operand, const Array& indices, const Array& updates,
                  const cpu::ScatterDims& dims, bool indices_are_sorted, bool unique_indices,
                  const std::string& mode) {
  const Params params{{"update_window_dims", dims.update_window_dims},
                      {"inserted_window_dims", dims.inserted_window_dims},
                      {"scatter_dims_to_operand_dims", dims.scatter_dims_to_operand_dims},
                      {"operand_batching_dims", dims.operand_batching_dims},
                      {"scatter_indices_batching_dims", dims.scatter_indices_batching_dims},
                      {"indices_are_sorted", indices_are_sorted},
                      {"unique_indices", unique_indices},
                      {"mode", mode},
                      {"update_consts", std::vector<int64_t>{}},
                      {"update_jaxpr", add_computation(operand.dtype())}};
  return bind1(primitive("scatter-add"), {operand, indices, updates}, params);
}

}  // namespace spmd

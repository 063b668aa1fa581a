// Primitive family, continued (collectives.cpp has the rest): the collectives about the axes
// themselves. pbroadcast sends the source's value to every instance; axis_index is each
// instance's index. pvary and psum_invariant are the varying-manual-axes typing inside shard_map
// with check_vma (JAX's vma): pvary casts invariant to varying with no communication,
// psum_invariant is JAX's psum there, turning varying into invariant. Both type only the axes of
// a shard_map that checks vma; elsewhere they are an identity and a plain all-reduce.
#include <spmd/error.h>
#include <spmd/lax.h>
#include <spmd/ops.h>

#include "core/axis_env.h"
#include "ops/op_util.h"
#include "prims/collectives.h"
#include "prims/primitive.h"
#include "prims/rule_util.h"
#include "runtime/launch.h"

#include <cstring>
#include <functional>

namespace spmd::collectives {
namespace {

// JAX's str(jax.typeof(x)): the full dtype name, then the shape and vma as a jaxpr prints them.
std::string typeof_repr(const AbstractValue& t) {
  std::string s = t.str();
  return std::string(dtype_name(t.dtype)) + s.substr(s.find('['));
}

bool overlaps(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  for (const std::string& x : a)
    for (const std::string& y : b)
      if (x == y) return true;
  return false;
}

// psum's params for a sum over named axes.
Params psum_params(const std::vector<std::string>& names) {
  std::vector<ReduceAxis> axes(names.begin(), names.end());
  return Params{{"axes", axes_param(axes)}, {"axis_index_groups", NoneParam{}}};
}

// ---- pbroadcast: transposes to a sum sent back to the source --------------------------------
std::vector<AbstractValue> pbroadcast_shape(std::span<const AbstractValue> in, const Params& p) {
  std::vector<std::string> names = read_names(p);
  check_bound(names, "pbroadcast");
  int64_t n = axes_size(names, "pbroadcast");
  int64_t source = p.get_int("source");
  if (source < 0 || source >= n)
    throw ValueError(
        "[pbroadcast] collective broadcast doesn't fit in the axis size! The source must be in "
        "[0, " +
        std::to_string(n) + "), got " + std::to_string(source));
  return {in[0]};
}

// A gather of every member's block, of which the source's is kept.
void pbroadcast_kernel(const KernelArgs& a) {
  Participants p = participants("pbroadcast", read_names(a.params));
  const AbstractValue& in = *a.in[0].aval;
  std::shared_ptr<Buffer> all = p.ctx->comm->all_gather_shared(
      "pbroadcast", p.ranks, p.me, in.dtype, in.shape, 0, false, a.in[0].data);
  std::memcpy(
      a.out[0].data,
      static_cast<const std::byte*>(all->data()) + size_t(a.params.get_int("source") * in.nbytes()),
      size_t(in.nbytes()));
}

BatchResult pbroadcast_batch(const Primitive& pbroadcast, const Primitive& all_gather,
                             std::span<const Array> args, std::span<const int> dims,
                             const Params& p, const BatchContext& ctx) {
  const std::vector<std::string> names = read_names(p);
  Array x = args[0];
  int d = dims[0];
  if (!contains(names, ctx.axis_name)) return single(bind1(pbroadcast, {x}, p), d);
  if (names.size() > 1) {
    Array blocks = gather_over_tuple(all_gather, x, d, names, ctx);
    return single(lax::index_in_dim(blocks, p.get_int("source"), 0, false), kNotBatched);
  }
  if (d == kNotBatched) return single(x, kNotBatched);
  return single(lax::index_in_dim(x, p.get_int("source"), d, false), kNotBatched);
}

// JAX's _pbroadcast_transpose_rule: the summed cotangent goes back to the source only.
std::vector<Array> pbroadcast_transpose(std::span<const Array> cts, std::span<const LinearInput>,
                                        const Params& p) {
  std::vector<std::string> names = read_names(p);
  AxisNames axis(names,
                 names.size() != 1 || !std::holds_alternative<std::string>(p.at("axis_name")));
  const Array& t = cts[0];
  Array is_source = equal(axis_index(axis), ops::scalar(double(p.get_int("source")), int32, false));
  Array total = psum(t, axis);
  Array zeros = zeros_like_aval({t.shape(), t.dtype(), false});
  Array pred = t.ndim() ? lax::broadcast_in_dim(is_source, t.shape(), {}) : is_source;
  return {lax::select(pred, total, zeros)};
}

// JAX types pbroadcast as ppermute (collective_vma_rule) but casts nothing first: its operand
// must already vary over the axes, and the result varies as the operand does.
VmaTypes pbroadcast_vma(std::span<const AbstractValue> in, const Params& p) {
  std::vector<std::string> names = read_names(p);
  if (!vma_minus(typed(names), in[0].vma).empty())
    throw ValueError(
        "[pbroadcast] Collective pbroadcast must be applied to a device-varying "
        "type, but got " +
        frozenset_repr(in[0].vma) + " for collective acting over axis name " + tuple_repr(names) +
        ". To skip the check, pass `.check_vma = false` to `sp::shard_map`.");
  return {in[0].vma};
}

void define_pbroadcast(PrimitiveRegistry& r, const Primitive& all_gather) {
  Primitive& pbroadcast = define_collective(r, "pbroadcast", pbroadcast_shape, pbroadcast_kernel);
  pbroadcast.batch =
      std::bind_front(pbroadcast_batch, std::cref(pbroadcast), std::cref(all_gather));
  deflinear(r, "pbroadcast", pbroadcast_transpose);
  pbroadcast.vma_rule = pbroadcast_vma;
}

// ---- axis_index: not differentiable; under vmap over its axis, an iota ----------------------
std::vector<AbstractValue> axis_index_shape(std::span<const AbstractValue>, const Params& p) {
  check_bound(read_names(p), "axis_index");
  return {{Shape{}, int32, false}};
}

void axis_index_kernel(const KernelArgs& a) {
  Participants p = participants("axis_index", read_names(a.params));
  *a.out[0].as<int32_t>() = p.me;
}

BatchResult axis_index_batch(const Primitive& axis_index, std::span<const Array>,
                             std::span<const int>, const Params& p, const BatchContext& ctx) {
  if (!contains(read_names(p), ctx.axis_name))
    return single(bind1(axis_index, std::span<const Array>{}, p), kNotBatched);
  return single(lax::iota(int32, ctx.axis_size), 0);
}

// The index varies over the axes it names.
VmaTypes axis_index_vma(std::span<const AbstractValue>, const Params& p) {
  return {vma_union({}, typed(read_names(p)))};
}

void define_axis_index(PrimitiveRegistry& r) {
  Primitive& axis_index = define_collective(r, "axis_index", axis_index_shape, axis_index_kernel);
  axis_index.batch = std::bind_front(axis_index_batch, std::cref(axis_index));
  axis_index.non_differentiable = true;
  axis_index.vma_rule = axis_index_vma;
}

// ---- pvary: an identity typed invariant -> varying; transposes to psum ----------------------
std::vector<AbstractValue> pvary_shape(std::span<const AbstractValue> in, const Params& p) {
  check_bound(read_names(p, "axes"), "pvary");
  return {in[0]};
}

void pvary_kernel(const KernelArgs& a) {
  std::memcpy(a.out[0].data, a.in[0].data, size_t(a.in[0].aval->nbytes()));
}

// Under vmap every value already varies along the vmap axis: only the other names remain.
BatchResult pvary_batch(const Primitive& pvary, std::span<const Array> args,
                        std::span<const int> dims, const Params& p, const BatchContext& ctx) {
  std::vector<std::string> rest = without(read_names(p, "axes"), ctx.axis_name);
  if (rest.empty()) return single(args[0], dims[0]);
  return single(bind1(pvary, {args[0]}, with(p, "axes", tuple_param(rest))), dims[0]);
}

// JAX's: psum_invariant over the same axes (varying back to invariant) inside a checking
// shard_map; psum over axes vmap binds, which type no variance.
std::vector<Array> pvary_transpose(const Primitive& psum, std::span<const Array> cts,
                                   std::span<const LinearInput>, const Params& p) {
  std::vector<std::string> axes = read_names(p, "axes");
  if (typed(axes).size() == axes.size())
    return {bind1(primitive("psum_invariant"), {cts[0]}, Params{{"axes", std::move(axes)}})};
  return {bind1(psum, {cts[0]}, psum_params(axes))};
}

VmaTypes pvary_vma(std::span<const AbstractValue> in, const Params& p) {
  std::vector<std::string> axes = read_names(p, "axes");
  if (overlaps(typed(axes), in[0].vma))
    throw ValueError(
        "[pvary] pvary is a invariant->variant collective. This means that the axis names "
        "mentioned in `axes` passed to `pvary` must not be present in "
        "`jax.typeof(inp).mat.varying`. Got axes=" +
        tuple_repr(axes) + " and jax.typeof(inp)=" + typeof_repr(in[0]));
  return {vma_union(in[0].vma, typed(axes))};
}

const Primitive& define_pvary(PrimitiveRegistry& r, const Primitive& psum) {
  Primitive& pvary = define_collective(r, "pvary", pvary_shape, pvary_kernel);
  // The output is the operand's buffer, as reshape's: a psum chained after psum in a checking
  // shard_map (x = psum(x) types x invariant, the next psum wants it varying) copied its whole
  // operand here, a quarter of the psum's own time at 2 MiB between processes.
  pvary.output_aliases_input = true;
  pvary.batch = std::bind_front(pvary_batch, std::cref(pvary));
  deflinear(r, "pvary", std::bind_front(pvary_transpose, std::cref(psum)));
  pvary.vma_rule = pvary_vma;
  return pvary;
}

// ---- psum_invariant: psum typed varying -> invariant; transposes to pvary -------------------
std::vector<AbstractValue> psum_invariant_shape(std::span<const AbstractValue> in,
                                                const Params& p) {
  axes_size(read_names(p, "axes"), "psum");
  return {in[0]};
}

// The all-reduce of psum, over the same axes. A list of names is what psum's params hold too
// (with no groups), so they serve as they are, rather than new params made for every call.
void psum_invariant_kernel(const Primitive& psum, const KernelArgs& args) {
  if (std::holds_alternative<std::vector<std::string>>(args.params.at("axes")))
    return psum.cpu_kernel(args);
  psum.cpu_kernel(KernelArgs{args.in, args.out, psum_params(read_names(args.params, "axes"))});
}

BatchResult psum_invariant_batch(const Primitive& psum_invariant, std::span<const Array> args,
                                 std::span<const int> dims, const Params& p,
                                 const BatchContext& ctx) {
  for (const std::string& a : read_names(p, "axes"))
    if (a == ctx.axis_name)
      throw NotImplementedError("[vmap] psum over a vmap axis inside shard_map with check_vma");
  return single(bind1(psum_invariant, {args[0]}, Params{{"axes", read_names(p, "axes")}}), dims[0]);
}

std::vector<Array> psum_invariant_transpose(const Primitive& pvary, std::span<const Array> cts,
                                            std::span<const LinearInput>, const Params& p) {
  return {bind1(pvary, {cts[0]}, Params{{"axes", read_names(p, "axes")}})};
}

VmaTypes psum_invariant_vma(std::span<const AbstractValue> in, const Params& p) {
  std::vector<std::string> axes = read_names(p, "axes");
  std::vector<std::string> checked = typed(axes);
  if (!checked.empty() && !overlaps(checked, in[0].vma))
    throw ValueError(
        "[psum] psum is a variant->invariant collective. This means that the axis names "
        "mentioned in `axes` passed to `psum` must be present in "
        "`jax.typeof(inp).mat.varying`. Got axes=" +
        tuple_repr(axes) + " and jax.typeof(inp).mat.varying=" + frozenset_repr(in[0].vma));
  return {vma_minus(in[0].vma, axes)};
}

void define_psum_invariant(PrimitiveRegistry& r, const Primitive& psum, const Primitive& pvary) {
  Primitive& psum_invariant =
      define_collective(r, "psum_invariant", psum_invariant_shape,
                        std::bind_front(psum_invariant_kernel, std::cref(psum)));
  psum_invariant.batch = std::bind_front(psum_invariant_batch, std::cref(psum_invariant));
  deflinear(r, "psum_invariant", std::bind_front(psum_invariant_transpose, std::cref(pvary)));
  psum_invariant.vma_rule = psum_invariant_vma;
  psum_invariant.per_element_across_devices = true;
  // psum's kernel hands over its result buffer (one for the group, or the one a reduction
  // between processes made), where a buffer given to it would be a copy more.
  psum_invariant.allocates_outputs = true;
  // Only staged by the vma rules inside shard_map: vmap never batches it for its axis name.
  psum_invariant.axis_names = nullptr;
}

}  // namespace

void register_axis_primitives(PrimitiveRegistry& r, const Primitive& psum,
                              const Primitive& all_gather) {
  define_pbroadcast(r, all_gather);
  define_axis_index(r);
  const Primitive& pvary = define_pvary(r, psum);
  define_psum_invariant(r, psum, pvary);
}

const Primitive& axis_index_primitive() {
  static const Primitive& p = primitive("axis_index");
  return p;
}

Array pvary_cast(const Array& x, std::vector<std::string> axes) {
  return bind1(primitive("pvary"), {x}, Params{{"axes", std::move(axes)}});
}

}  // namespace spmd::collectives

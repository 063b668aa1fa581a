// Varying-manual-axes typing inside shard_map with check_vma (JAX's vma): which mesh axes each
// value may differ over. psum_invariant turns varying into invariant and transposes to pvary, a
// type cast with no communication; pvary transposes to psum_invariant. Both type only the axes
// of a shard_map that checks vma; elsewhere they are a plain all-reduce and identity. Collectives
// that move data (all_gather, ppermute, all_to_all, psum_scatter) keep values varying;
// axis_index varies.
#include <spmd/error.h>

#include "core/axis_env.h"
#include "prims/collectives.h"
#include "prims/primitive.h"
#include "prims/rule_util.h"

#include <optional>

namespace spmd {
namespace {

using collectives::read_names;

std::string tuple_repr(const std::vector<std::string>& names) {
  std::string s = "(";
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", '" : "'") + names[i] + "'";
  return s + (names.size() == 1 ? ",)" : ")");
}

std::string frozenset_repr(const std::vector<std::string>& names) {
  if (names.empty()) return "frozenset()";
  std::string s = "frozenset({";
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", '" : "'") + names[i] + "'";
  return s + "})";
}

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

Array bind_pvary(const Array& x, const std::vector<std::string>& axes) {
  return spmd::bind1(primitive("pvary"), {x}, Params{{"axes", axes}});
}

Array bind_psum_invariant(const Array& x, const std::vector<std::string>& axes) {
  return spmd::bind1(primitive("psum_invariant"), {x}, Params{{"axes", axes}});
}

// The names bound by a shard_map that checks vma (under vmap or pmap nothing is typed).
std::vector<std::string> typed(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const std::string& n : names) {
    std::optional<AxisFrame> f = find_axis(n);
    if (f && f->vma) out.push_back(n);
  }
  return out;
}

// Collectives whose result varies over the axes they name (and over what the operand varied).
std::vector<std::string> varying_over_names(std::span<const AbstractValue> in, const Params& p) {
  return vma_union(in.empty() ? std::vector<std::string>{} : in[0].vma, typed(read_names(p)));
}

}  // namespace

void register_vma_rules(PrimitiveRegistry& r) {
  // psum_invariant: JAX's psum inside shard_map with check_vma.
  Primitive& psum_inv = r.define(
      "psum_invariant",
      [](std::span<const AbstractValue> in, const Params& p) {
        for (const std::string& a : read_names(p, "axes")) collectives::axis_size_of(a, "psum");
        return std::vector<AbstractValue>{in[0]};
      },
      [](const KernelArgs& args) {
        // The all-reduce of psum, over the same axes.
        std::vector<collectives::ReduceAxis> axes;
        for (const std::string& a : read_names(args.params, "axes")) axes.push_back(a);
        Params psum_params{{"axes", collectives::axes_param(axes)},
                           {"axis_index_groups", NoneParam{}}};
        primitive("psum").cpu_kernel(KernelArgs{args.in, args.out, psum_params});
      });
  psum_inv.device_dependent = true;
  psum_inv.vma_rule = [](std::span<const AbstractValue> in, const Params& p) {
    std::vector<std::string> axes = read_names(p, "axes");
    std::vector<std::string> checked = typed(axes);
    if (!checked.empty() && !overlaps(checked, in[0].vma))
      throw ValueError(
          "[psum] psum is a variant->invariant collective. This means that the axis names "
          "mentioned in `axes` passed to `psum` must be present in "
          "`jax.typeof(inp).mat.varying`. Got axes=" +
          tuple_repr(axes) + " and jax.typeof(inp).mat.varying=" + frozenset_repr(in[0].vma));
    return vma_minus(in[0].vma, axes);
  };
  deflinear(r, "psum_invariant",
            [](std::span<const Array> cts, std::span<const LinearInput>, const Params& p) {
              return std::vector<Array>{bind_pvary(cts[0], read_names(p, "axes"))};
            });

  psum_inv.batch = [](std::span<const Array> args, std::span<const int> dims, const Params& p,
                      const BatchContext& ctx) {
    for (const std::string& a : read_names(p, "axes"))
      if (a == ctx.axis_name)
        throw NotImplementedError("[vmap] psum over a vmap axis inside shard_map with check_vma");
    return BatchResult{{bind_psum_invariant(args[0], read_names(p, "axes"))}, {dims[0]}};
  };

  Primitive& pvary = r.at("pvary");
  pvary.vma_rule = [](std::span<const AbstractValue> in, const Params& p) {
    std::vector<std::string> axes = read_names(p, "axes");
    if (overlaps(typed(axes), in[0].vma))
      throw ValueError(
          "[pvary] pvary is a invariant->variant collective. This means that the axis names "
          "mentioned in `axes` passed to `pvary` must not be present in "
          "`jax.typeof(inp).mat.varying`. Got axes=" +
          tuple_repr(axes) + " and jax.typeof(inp)=" + typeof_repr(in[0]));
    return vma_union(in[0].vma, typed(axes));
  };
  pvary.transpose = [](std::span<const Array> cts, std::span<const LinearInput>, const Params& p) {
    return std::vector<Array>{bind_psum_invariant(cts[0], read_names(p, "axes"))};
  };

  // Their results depend on the device computing them: never folded at compile time.
  for (const char* name : {"psum", "pmax", "pmin", "all_gather", "reduce_scatter", "all_to_all",
                           "ppermute", "pbroadcast", "axis_index"})
    r.at(name).device_dependent = true;
  for (const char* name : {"all_gather", "reduce_scatter", "all_to_all", "ppermute"})
    r.at(name).vma_rule = varying_over_names;
  // JAX types pbroadcast as ppermute (collective_vma_rule) but casts nothing first: its operand
  // must already vary over the axes, and the result varies as the operand does.
  r.at("pbroadcast").vma_rule = [](std::span<const AbstractValue> in, const Params& p) {
    std::vector<std::string> names = read_names(p);
    if (!vma_minus(typed(names), in[0].vma).empty())
      throw ValueError(
          "[pbroadcast] Collective pbroadcast must be applied to a device-varying "
          "type, but got " +
          frozenset_repr(in[0].vma) + " for collective acting over axis name " + tuple_repr(names) +
          ". To skip the check, pass `.check_vma = false` to `sp::shard_map`.");
    return in[0].vma;
  };
  r.at("axis_index").vma_rule = [](std::span<const AbstractValue>, const Params& p) {
    return vma_union({}, typed(read_names(p)));
  };
  for (const char* name : {"psum", "pmax", "pmin"})
    r.at(name).vma_rule = [](std::span<const AbstractValue> in, const Params& p) {
      return vma_minus(in[0].vma, collectives::named_axes(collectives::read_axes(p)));
    };
}

}  // namespace spmd

// vmap over Programs: the function is traced on one example's types, then its Program is
// evaluated with each primitive's batching rule, batch dimensions tracked per value.
#include <spmd/error.h>
#include <spmd/transforms.h>

#include "core/axis_env.h"
#include "prims/primitive.h"
#include "sharding/python_repr.h"
#include "transforms/interpreters.h"
#include "transforms/staging.h"

#include <algorithm>

namespace spmd {
namespace {

bool names_vmap_axis(const Equation& e, const std::string& axis);

bool program_names_axis(const Program& p, const std::string& axis) {
  return std::any_of(p.equations.begin(), p.equations.end(),
                     [&](const Equation& inner) { return names_vmap_axis(inner, axis); });
}

// Whether `e` communicates over the vmap axis `axis`, directly or inside a sub-program (a jit
// call, cond branches, loop bodies): such an equation is batched even when none of its operands
// is (psum of an unbatched value is x · n, axis_index is an iota).
bool names_vmap_axis(const Equation& e, const std::string& axis) {
  if (axis.empty()) return false;
  if (e.primitive->axis_names) {
    const std::vector<std::string> names = e.primitive->axis_names(e.params);
    if (std::find(names.begin(), names.end(), axis) != names.end()) return true;
  }
  for (const auto& [name, value] : e.params.items()) {
    if (const auto* p = std::get_if<ProgramRef>(&value))
      if (program_names_axis(**p, axis)) return true;
    if (const auto* ps = std::get_if<std::vector<ProgramRef>>(&value))
      for (const ProgramRef& p : *ps)
        if (program_names_axis(*p, axis)) return true;
  }
  return false;
}

}  // namespace

std::pair<std::vector<Array>, std::vector<int>> batch_program(const Program& program,
                                                              std::span<const Array> args,
                                                              std::span<const int> dims,
                                                              const BatchContext& ctx) {
  std::vector<Array> env(program.types.size());
  std::vector<int> bdim(program.types.size(), kNotBatched);
  for (size_t i = 0; i < program.constvars.size(); ++i)
    env[size_t(program.constvars[i])] = program.consts[i];
  for (size_t i = 0; i < args.size(); ++i) {
    env[size_t(program.invars[i])] = args[i];
    bdim[size_t(program.invars[i])] = dims[i];
  }
  for (const Equation& e : program.equations) {
    std::vector<Array> ins;
    std::vector<int> in_dims;
    bool batched = false;
    for (const Atom& a : e.inputs) {
      ins.push_back(a.is_literal() ? a.literal : env[size_t(a.var)]);
      in_dims.push_back(a.is_literal() ? kNotBatched : bdim[size_t(a.var)]);
      batched = batched || in_dims.back() != kNotBatched;
    }
    std::vector<Array> outs;
    std::vector<int> out_dims;
    const Primitive& prim = *e.primitive;
    if (!batched && !names_vmap_axis(e, ctx.axis_name)) {
      outs = spmd::bind(prim, ins, e.params);
      out_dims.assign(outs.size(), kNotBatched);
    } else if (prim.batch) {
      BatchResult r = prim.batch(ins, in_dims, e.params, ctx);
      outs = std::move(r.outputs);
      out_dims = std::move(r.dims);
    } else {
      throw NotImplementedError("[vmap] batching rule for '" + prim.name + "' not implemented");
    }
    for (size_t k = 0; k < outs.size(); ++k) {
      env[size_t(e.outputs[k])] = std::move(outs[k]);
      bdim[size_t(e.outputs[k])] = out_dims[k];
    }
  }
  std::vector<Array> outs;
  std::vector<int> out_dims;
  for (const Atom& a : program.outputs) {
    outs.push_back(a.is_literal() ? a.literal : env[size_t(a.var)]);
    out_dims.push_back(a.is_literal() ? kNotBatched : bdim[size_t(a.var)]);
  }
  return {outs, out_dims};
}

namespace {

std::string type_name(const Array& x) {
  return std::string(dtype_name(x.dtype())) + x.shape().str();
}

// The Explicit mesh axes splitting dim d of x's type (none when untyped).
std::vector<std::string> axes_of_dim(const Array& x, int d) {
  const std::optional<TypeSharding>& t = aval_of(x).sharding;
  return t ? t->dims[size_t(d)] : std::vector<std::string>{};
}

// A spec entry as Python's str() prints it: None, a, ('a', 'b').
std::string entry_str(const std::vector<std::string>& axes) {
  if (axes.empty()) return "None";
  if (axes.size() == 1) return axes[0];
  return python_repr::tuple_of_names(axes);
}

// JAX's _mapped_axis_spec: the Explicit mesh axes splitting the mapped dims, which every mapped
// argument must split alike (an untyped one leaves it unsplit).
std::vector<std::string> mapped_axis_spec(std::span<const Array> leaves,
                                          const std::vector<int>& dims) {
  std::optional<std::vector<std::string>> spec;
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (dims[i] == kNotBatched) continue;
    std::vector<std::string> axes = axes_of_dim(leaves[i], dims[i]);
    if (spec && *spec != axes)
      throw ValueError(
          "[vmap] Mapped away dimension of inputs passed to vmap should be sharded the same. Got "
          "inconsistent axis specs: " +
          entry_str(*spec) + " vs " + entry_str(axes));
    spec = std::move(axes);
  }
  return spec.value_or(std::vector<std::string>{});
}

// JAX's _check_ema_unmapped_args: an unmapped argument may not be split over the mapped axes.
void check_unmapped_args(std::span<const Array> leaves, const std::vector<int>& dims,
                         const std::vector<std::string>& mesh_axis) {
  for (size_t i = 0; i < leaves.size(); ++i) {
    const AbstractValue& t = aval_of(leaves[i]);
    if (dims[i] != kNotBatched || !t.sharding) continue;
    for (const std::vector<std::string>& axes : t.sharding->dims)
      for (const std::string& a : axes)
        if (std::count(mesh_axis.begin(), mesh_axis.end(), a))
          throw ValueError(
              "[vmap] Unmapped values passed to vmap cannot be sharded along the mesh axis you "
              "are vmapping over. Got type: " +
              t.str() +
              ", in_axes: None and vmapped mesh axis: " + python_repr::tuple_of_names(mesh_axis));
  }
}

// As JAX's vmap: spmd_axis_name with arguments split over Explicit axes along the mapped dim
// must name those axes, and is then dropped (the Explicit axes already split the batch dim).
std::vector<std::string> spmd_name_beside(const std::vector<std::string>& spmd_axis_name,
                                          const std::vector<std::string>& explicit_mesh_axis) {
  if (spmd_axis_name.empty() || explicit_mesh_axis.empty()) return spmd_axis_name;
  if (spmd_axis_name == explicit_mesh_axis) return {};
  throw ValueError(
      "[vmap] Only one of spmd_axis_name or arrays sharded on `Explicit` mesh axis type is "
      "allowed. Got spmd_axis_name=" +
      python_repr::tuple_of_names(spmd_axis_name) + " and arrays sharded on explicit_mesh_axis=" +
      python_repr::tuple_of_names(explicit_mesh_axis));
}

}  // namespace

namespace transform_detail {

std::vector<Array> vmap(const FlatFn& fn, std::span<const Array> leaves,
                        const std::vector<std::optional<int>>& in_dims,
                        const std::vector<Axis>& out_axes, std::optional<int64_t> axis_size,
                        const std::string& axis_name, const std::vector<std::string>& arg_names,
                        const std::vector<std::string>& spmd_axis_name) {
  if (axis_size && *axis_size < 0)
    throw ValueError("[vmap] axis_size must be non-negative, got " + std::to_string(*axis_size));
  std::vector<int> dims;
  std::vector<AbstractValue> example;
  int64_t size = axis_size.value_or(-1);
  bool inconsistent = false;
  for (size_t i = 0; i < leaves.size(); ++i) {
    AbstractValue t = aval_of(leaves[i]);
    if (!in_dims[i]) {
      dims.push_back(kNotBatched);
      example.push_back(t);
      continue;
    }
    int nd = t.shape.ndim();
    int d = *in_dims[i];
    if (d < -nd || d >= nd)
      throw ValueError("[vmap] vmap was requested to map its argument along axis " +
                       std::to_string(d) + ", which implies that its rank should be at least " +
                       std::to_string(d < 0 ? -d : d + 1) + ", but is only " + std::to_string(nd) +
                       " (its shape is " + t.shape.str() + ")");
    if (d < 0) d += nd;
    dims.push_back(d);
    if (size >= 0 && t.shape[d] != size) inconsistent = true;
    if (size < 0) size = t.shape[d];
    std::vector<int64_t> s(t.shape.begin(), t.shape.end());
    s.erase(s.begin() + d);
    t.shape = Shape(s);
    if (t.sharding) t.sharding->dims.erase(t.sharding->dims.begin() + d);
    // One example does not vary over the mesh axes the batch is split over (JAX's BatchTracer
    // under spmd_axis_name).
    t.vma = vma_minus(t.vma, spmd_axis_name);
    example.push_back(t);
  }
  if (inconsistent) {
    std::string msg = "[vmap] vmap got inconsistent sizes for array axes to be mapped:\n";
    if (axis_size) msg += "  * the `axis_size` argument was " + std::to_string(*axis_size) + ";\n";
    for (size_t i = 0; i < leaves.size(); ++i) {
      if (dims[i] == kNotBatched) continue;
      msg += "  * one axis had size " + std::to_string(leaves[i].shape()[dims[i]]) + ": axis " +
             std::to_string(dims[i]) + " of " + arg_names[i] + " of type " + type_name(leaves[i]) +
             ";\n";
    }
    msg.resize(msg.size() - 2);
    throw ValueError(msg);
  }
  if (size < 0)
    throw ValueError(
        "[vmap] vmap must have at least one non-None value in in_axes, or be given "
        "axis_size");
  BatchContext ctx{size, axis_name, mapped_axis_spec(leaves, dims)};
  check_unmapped_args(leaves, dims, ctx.explicit_mesh_axis);
  ctx.spmd_axis_name = spmd_name_beside(spmd_axis_name, ctx.explicit_mesh_axis);
  // The batching rules run with the spmd_axis_name in scope, as JAX's add_spmd_axis_names: this
  // vmap's, and those of vmaps the function calls while it is traced.
  AxisNamesScope spmd_names(AxisNameList::spmd, ctx.spmd_axis_name);
  Program program = [&] {
    // Collectives over axis_name look its size up while the function is traced, and shard_maps
    // traced there are not manual over the Explicit axes the batch is split over.
    std::vector<AxisFrame> frames;
    if (!axis_name.empty()) frames.push_back({axis_name, size, "vmap"});
    AxisEnvScope scope(std::move(frames));
    AxisNamesScope explicit_names(AxisNameList::explicit_mesh, ctx.explicit_mesh_axis);
    // An example stands for its operand: grad's seed reshards onto the mesh it is committed over.
    return trace_to_program(fn, example, "vmap", stand_ins(leaves));
  }();
  auto [outs, out_dims] = batch_program(program, leaves, dims, ctx);
  if (out_axes.size() != 1 && out_axes.size() != outs.size())
    throw ValueError(
        "[vmap] out_axes specification must be a tree prefix of the corresponding "
        "value, got " +
        std::to_string(out_axes.size()) + " entries for " + std::to_string(outs.size()) +
        " outputs");
  for (size_t i = 0; i < outs.size(); ++i) {
    const Axis& ax = out_axes[out_axes.size() == 1 ? 0 : i];
    if (!ax.dim) {
      if (out_dims[i] != kNotBatched)
        throw ValueError(
            "[vmap] at vmap out_axes, got axis spec None but output was batched on "
            "axis " +
            std::to_string(out_dims[i]));
      continue;
    }
    int nd = outs[i].ndim() + (out_dims[i] == kNotBatched ? 1 : 0);
    if (*ax.dim < -nd || *ax.dim >= nd)
      throw ValueError("[vmap] axis " + std::to_string(*ax.dim) +
                       " is out of bounds for array of dimension " + std::to_string(nd));
    int d = *ax.dim < 0 ? *ax.dim + nd : *ax.dim;
    outs[i] = move_batch_dim(outs[i], out_dims[i], d, ctx);
  }
  return outs;
}

}  // namespace transform_detail
}  // namespace spmd

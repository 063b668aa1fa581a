// The primitive registry and bind(), the one entry every operation goes through.
#include <spmd/placement.h>
#include <spmd/sharding.h>

#include "compile/compiled.h"
#include "compile/executable.h"
#include "core/trace.h"
#include "prims/families.h"
#include "prims/kinds.h"
#include "prims/primitive.h"
#include "sharding/type_sharding.h"

#include <algorithm>
#include <stdexcept>

namespace spmd {

Primitive& PrimitiveRegistry::define(std::string name, ShapeRule shape_rule, CpuKernel kernel) {
  if (find(name)) throw std::logic_error("primitive '" + name + "' defined twice");
  auto p = std::make_unique<Primitive>();
  p->name = std::move(name);
  p->shape_rule = std::move(shape_rule);
  p->cpu_kernel = std::move(kernel);
  prims_.push_back(std::move(p));
  by_name_.emplace(prims_.back()->name, prims_.back().get());
  return *prims_.back();
}

const Primitive* PrimitiveRegistry::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

Primitive& PrimitiveRegistry::at(std::string_view name) {
  auto it = by_name_.find(name);
  if (it == by_name_.end())
    throw std::logic_error("rule for unknown primitive '" + std::string(name) + "'");
  return *it->second;
}

std::vector<std::string> PrimitiveRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& p : prims_) out.push_back(p->name);
  return out;
}

// Every primitive of the library, family by family (families.h).
constexpr void (*kFamilies[])(PrimitiveRegistry&) = {
    register_elementwise_primitives, register_empty_primitive,
    register_unary_math_primitives,  register_reduce_primitives,
    register_shape_primitives,       register_indexing_primitives,
    register_linalg_primitives,      register_random_primitives,
    register_sort_primitives,        register_scatter_primitives,
    register_collective_primitives,  register_debug_primitives,
    register_call_primitives,        register_control_flow_primitives,
    register_custom_vjp_primitives,  register_custom_jvp_primitive,
    register_shard_map_primitive,    register_fusion_primitive,
    register_sharding_primitives,
};

// Never destroyed: device threads may still run programs while the process exits.
const PrimitiveRegistry& primitive_registry() {
  static const PrimitiveRegistry& registry = *new PrimitiveRegistry([] {
    PrimitiveRegistry r;
    for (auto define_family : kFamilies) define_family(r);
    for (const std::string& name : r.names()) complete_rules_from_kind(r.at(name));
    return r;
  }());
  return registry;
}

const Primitive& primitive(std::string_view name) {
  const Primitive* p = primitive_registry().find(name);
  if (!p) throw std::logic_error("unknown primitive '" + std::string(name) + "'");
  return *p;
}

std::vector<AbstractValue> abstract_eval(const Primitive& p, std::span<const AbstractValue> in,
                                         const Params& params) {
  std::vector<AbstractValue> out = p.shape_rule(in, params);
  for (const AbstractValue& t : out) t.checked_nbytes(p.name.c_str());
  // A given out_sharding types the result even when no operand is typed (a broadcast seed).
  if (std::any_of(in.begin(), in.end(), [](const AbstractValue& t) { return t.sharding; }) ||
      given_out_sharding(params)) {
    // Shape rules copy operand types; only a call's results keep what its body's trace gave.
    if (p.call_body.empty())
      for (AbstractValue& t : out) t.sharding.reset();
    infer_type_shardings(p, in, out, params);
  }
  return out;
}

std::vector<Array> bind(const Primitive& p, std::span<const Array> inputs, const Params& params) {
  if (Trace* trace = innermost_trace(inputs)) return trace->process_primitive(p, inputs, params);

  if (p.impl) return p.impl(inputs, params);
  return apply_primitive(p, inputs, params);
}

namespace {

// On uncommitted operands, a result typed by a given out_sharding (the batched program of an
// eager vmap, a full_like inside it) is laid out on the mesh in context when its type is on that
// mesh, as JAX's jit places it there; without that mesh it stays uncommitted. Inside a program
// (a device's body, constant folding) the result is one of the program's values and stays as
// computed: placing it there would launch on the mesh from within a launch or a compile.
std::vector<Array> placed_as_given(std::vector<Array> outs, const Params& params) {
  const TypeSharding* given = given_out_sharding(params);
  if (!given || outs.size() != 1 || inside_program()) return outs;
  const Mesh mesh = get_mesh();
  if (mesh.size() == 0 || !(unsplit_on(mesh, 0).mesh == given->mesh)) return outs;
  outs[0] = device_put(outs[0], NamedSharding(mesh, spec_of(*given, given->dims.size())));
  return outs;
}

}  // namespace

std::vector<Array> apply_primitive(const Primitive& p, std::span<const Array> inputs,
                                   const Params& params) {
  if (p.eager) return p.eager(inputs, params);
  if (any_committed(inputs)) return run_partitioned_primitive(p, params, inputs);
  // Eager evaluation is a cached one-primitive program, run as jit runs its programs.
  std::shared_ptr<const Compiled> compiled = compile_primitive(p, params, inputs);
  return placed_as_given(compiled->run(inputs), params);
}

Array bind1(const Primitive& p, std::span<const Array> inputs, const Params& params) {
  return std::move(spmd::bind(p, inputs, params).front());
}

}  // namespace spmd

// Staging traces and Program evaluation.
#include "transforms/staging.h"

#include <spmd/error.h>

#include <stdexcept>
#include <string>

#include "core/axis_env.h"
#include "prims/collectives.h"
#include "prims/primitive.h"
#include "runtime/sharded.h"

namespace spmd {

Array StagingTrace::tracer(int var) {
  auto impl = std::make_shared<ArrayImpl>();
  impl->aval = program_.types[size_t(var)];
  impl->trace = shared_from_this();
  impl->trace_slot = var;
  return Array(std::move(impl));
}

Array StagingTrace::new_input(const AbstractValue& type) {
  int v = program_.new_var(type);
  program_.invars.push_back(v);
  return tracer(v);
}

Array StagingTrace::new_input(const AbstractValue& type, const Array& argument) {
  Array x = new_input(type);
  arguments_.emplace(int(x.impl()->trace_slot), argument);
  return x;
}

const Array* StagingTrace::argument_of(const Array& x) const {
  if (!owns(x)) return nullptr;
  auto it = arguments_.find(int(x.impl()->trace_slot));
  return it == arguments_.end() ? nullptr : &it->second;
}

const Array* traced_argument(const Array& x) {
  if (!x.valid() || !x.impl()->trace) return nullptr;
  const auto* staging = dynamic_cast<const StagingTrace*>(x.impl()->trace.get());
  return staging ? staging->argument_of(x) : nullptr;
}

std::optional<Mesh> committed_mesh_of(const Array& x) {
  if (const Array* argument = traced_argument(x)) return committed_mesh_of(*argument);
  if (!x.valid() || !is_concrete(x) || !x.impl()->sharded) return std::nullopt;
  const auto* named = dynamic_cast<const NamedSharding*>(x.impl()->sharded->sharding.get());
  if (!named) return std::nullopt;
  return named->mesh();
}

std::span<const Array> stand_ins(std::span<const Array> operands) {
  for (const Array& x : operands)
    if (traced_argument(x)) return operands;
  return {};
}

Atom StagingTrace::lift(const Array& x) {
  if (!x.valid())
    throw ValueError("[" + std::string(transformation_) + "] use of an empty Array handle");
  if (owns(x)) return Atom::of_var(int(x.impl()->trace_slot));
  if (is_concrete(x) && x.ndim() == 0 && (!scalars_as_constants_ || x.impl()->scalar_literal))
    return Atom::of_literal(x);
  auto [it, inserted] = lifted_.try_emplace(x.impl().get(), -1);
  if (inserted) {
    it->second = program_.new_var(aval_of(x));
    program_.constvars.push_back(it->second);
    program_.consts.push_back(x);
  }
  return Atom::of_var(it->second);
}

namespace {
// The union of the operands' varying manual axes, with every operand that varies over fewer
// cast up to it by pvary first (in_types follow), as JAX does.
std::vector<std::string> cast_to_union(std::vector<Array>& operands,
                                       std::vector<AbstractValue>& in_types) {
  std::vector<std::string> vma;
  for (const AbstractValue& t : in_types) vma = vma_union(vma, t.vma);
  if (vma.empty()) return vma;
  for (size_t i = 0; i < operands.size(); ++i) {
    if (in_types[i].vma == vma) continue;
    operands[i] = collectives::pvary_cast(operands[i], vma_minus(vma, in_types[i].vma));
    in_types[i] = aval_of(operands[i]);
  }
  return vma;
}
}  // namespace

std::vector<Array> StagingTrace::process_primitive(const Primitive& p,
                                                   std::span<const Array> inputs,
                                                   const Params& params) {
  Equation eqn{&p, params, {}, {}};
  std::vector<AbstractValue> in_types;
  std::vector<Array> operands(inputs.begin(), inputs.end());
  for (const Array& x : operands) in_types.push_back(aval_of(x));
  // Varying manual axes: the rule's, one list per output, or the union for every output with
  // less varying operands cast up.
  VmaTypes out_vma;
  if (p.vma_rule) out_vma = p.vma_rule(in_types, params);
  else out_vma = {cast_to_union(operands, in_types)};
  eqn.inputs.reserve(operands.size());
  for (const Array& x : operands) eqn.inputs.push_back(lift(x));
  std::vector<AbstractValue> out_types = abstract_eval(p, in_types, params);
  if (!p.vma_rule) out_vma.assign(out_types.size(), std::vector<std::string>(out_vma[0]));
  if (out_vma.size() != out_types.size())
    throw std::logic_error("[" + p.name + "] vma rule gives " + std::to_string(out_vma.size()) +
                           " lists for " + std::to_string(out_types.size()) + " outputs");
  std::vector<Array> outs;
  for (size_t k = 0; k < out_types.size(); ++k) {
    out_types[k].vma = std::move(out_vma[k]);
    on_body_mesh(out_types[k]);
    int v = program_.new_var(std::move(out_types[k]));
    eqn.outputs.push_back(v);
    outs.push_back(tracer(v));
  }
  program_.equations.push_back(std::move(eqn));
  return outs;
}

bool StagingTrace::captured_traced_values() const {
  for (const Array& c : program_.consts)
    if (!is_concrete(c)) return true;
  return false;
}

Program StagingTrace::finish(std::span<const Array> outputs) {
  for (const Array& x : outputs) program_.outputs.push_back(lift(x));
  Trace::finish();
  lifted_.clear();
  arguments_.clear();
  return std::move(program_);
}

namespace {
// Finishes a trace on every exit path, so values leaked from a failed trace raise on use.
struct FinishOnExit {
  Trace* trace;
  ~FinishOnExit() { trace->finish(); }
};
}  // namespace

Program trace_to_program(const FlatFn& fn, std::span<const AbstractValue> in_types,
                         const char* transformation, std::span<const Array> arguments) {
  auto trace = std::make_shared<StagingTrace>(transformation);
  FinishOnExit guard{trace.get()};
  std::vector<Array> inputs;
  for (size_t i = 0; i < in_types.size(); ++i)
    inputs.push_back(i < arguments.size() ? trace->new_input(in_types[i], arguments[i])
                                          : trace->new_input(in_types[i]));
  std::vector<Array> outputs;
  {
    CurrentTraceScope scope(trace.get());
    outputs = fn(inputs);
  }
  Program program = trace->finish(outputs);
  // Every staged Program is checked: a shape rule per equation, cheap beside tracing itself.
  program.verify();
  return program;
}

Program hoist_consts(const Program& p, std::vector<Array>* consts) {
  Program out = p;
  out.invars.insert(out.invars.begin(), out.constvars.begin(), out.constvars.end());
  *consts = std::move(out.consts);
  out.constvars.clear();
  out.consts.clear();
  return out;
}

std::vector<Array> eval_program(const Program& program, std::span<const Array> args) {
  if (args.size() != program.invars.size())
    throw std::logic_error("[eval_program] expected " + std::to_string(program.invars.size()) +
                           " arguments, got " + std::to_string(args.size()));
  std::vector<Array> env(program.types.size());
  for (size_t i = 0; i < program.constvars.size(); ++i)
    env[size_t(program.constvars[i])] = program.consts[i];
  for (size_t i = 0; i < args.size(); ++i) env[size_t(program.invars[i])] = args[i];
  auto read = [&](const Atom& a) { return a.is_literal() ? a.literal : env[size_t(a.var)]; };
  std::vector<Array> ins;
  for (const Equation& e : program.equations) {
    ins.clear();
    for (const Atom& a : e.inputs) ins.push_back(read(a));
    std::vector<Array> outs = spmd::bind(*e.primitive, ins, e.params);
    for (size_t i = 0; i < outs.size(); ++i) env[size_t(e.outputs[i])] = std::move(outs[i]);
  }
  std::vector<Array> result;
  for (const Atom& a : program.outputs) result.push_back(read(a));
  return result;
}

bool all_concrete(std::span<const Array> xs) {
  if (current_trace()) return false;
  for (const Array& x : xs)
    if (!is_concrete(x)) return false;
  return true;
}

}  // namespace spmd

// make_jaxpr and jit: tracing to Programs, the signature cache, and the `jit` call primitive that
// records a jitted function called inside another trace.
#include <spmd/error.h>
#include <spmd/transforms.h>

#include "compile/executable.h"
#include "core/axis_env.h"
#include "prims/families.h"
#include "prims/primitive.h"
#include "transforms/signature.h"
#include "transforms/staging.h"

#include <mutex>
#include <ostream>
#include <unordered_map>

namespace spmd {

std::string ClosedJaxpr::str() const {
  return program_->str();
}
std::ostream& operator<<(std::ostream& os, const ClosedJaxpr& jaxpr) {
  return os << jaxpr.str();
}

namespace {

std::vector<AbstractValue> types_of(std::span<const Array> xs) {
  std::vector<AbstractValue> out;
  out.reserve(xs.size());
  for (const Array& x : xs) out.push_back(aval_of(x));
  return out;
}

}  // namespace

void register_call_primitives(PrimitiveRegistry& r) {
  Primitive& jit = r.define(
      "jit",
      [](std::span<const AbstractValue>, const Params& p) {
        return p.get<ProgramRef>("jaxpr")->out_types();
      },
      [](const KernelArgs&) { throw std::logic_error("[jit] runs through its eager rule"); });
  jit.eager = [](std::span<const Array> args, const Params& p) {
    const ProgramRef& program = p.get<ProgramRef>("jaxpr");
    if (all_concrete(args)) return executable_for(program).run(args);
    return eval_program(*program, args);
  };
}

namespace transform_detail {

ClosedJaxpr make_jaxpr(const FlatFn& fn, std::span<const Array> args) {
  std::vector<AbstractValue> types = types_of(args);
  return ClosedJaxpr(std::make_shared<const Program>(trace_to_program(fn, types, "make_jaxpr")));
}

struct CacheEntry {
  ProgramRef program;         // as traced, consts hoisted to leading inputs
  std::vector<Array> consts;  // concrete constants the function closed over
  TreeDef out_def;
  std::unique_ptr<Executable> executable;  // compiled on first concrete call
};

struct JitState {
  JitOptions options;
  std::mutex mu;
  std::unordered_map<SignatureKey, std::shared_ptr<CacheEntry>, SignatureHash> cache;
  int64_t traces = 0;
};

std::shared_ptr<JitState> new_jit_state(JitOptions options) {
  auto s = std::make_shared<JitState>();
  s->options = std::move(options);
  if (s->options.name.empty()) s->options.name = "jit";
  return s;
}

int64_t jit_trace_count(const JitState& state) {
  return state.traces;
}

std::vector<Array> jit_call(JitState& state, const TreeDef& in_def, std::span<const Array> leaves,
                            const std::function<FlatFn(std::shared_ptr<TreeDef>)>& make_fn,
                            TreeDef* out_def) {
  std::vector<std::string> axes;
  for (const AxisFrame& f : axis_env())
    axes.push_back(f.name + ":" + std::to_string(f.size) + ":" + f.binder + (f.vma ? ":v" : ""));
  SignatureKey key{in_def, types_of(leaves), std::move(axes)};
  std::shared_ptr<CacheEntry> entry;
  {
    std::lock_guard<std::mutex> lock(state.mu);
    auto it = state.cache.find(key);
    if (it != state.cache.end()) entry = it->second;
  }
  if (!entry) {
    auto def = std::make_shared<TreeDef>();
    Program traced = trace_to_program(make_fn(def), key.types, "jit");
    entry = std::make_shared<CacheEntry>();
    entry->program = std::make_shared<const Program>(hoist_consts(traced, &entry->consts));
    entry->out_def = *def;
    // A function that closed over values of an enclosing trace is traced anew on every call.
    bool cacheable = true;
    for (const Array& c : entry->consts) cacheable = cacheable && is_concrete(c);
    std::lock_guard<std::mutex> lock(state.mu);
    ++state.traces;
    if (cacheable) state.cache.emplace(key, entry);
  }
  *out_def = entry->out_def;
  std::vector<Array> operands = entry->consts;
  operands.insert(operands.end(), leaves.begin(), leaves.end());
  if (all_concrete(operands)) {
    std::lock_guard<std::mutex> lock(state.mu);
    if (!entry->executable) entry->executable = std::make_unique<Executable>(*entry->program);
  }
  if (entry->executable && all_concrete(operands)) return entry->executable->run(operands);
  Params params{{"name", state.options.name}, {"jaxpr", entry->program}};
  return spmd::bind(primitive("jit"), operands, params);
}

ClosedJaxpr jit_lower(JitState&, const FlatFn& fn, std::span<const Array> leaves, bool optimized) {
  Program traced = trace_to_program(fn, types_of(leaves), "jit");
  if (!optimized) return ClosedJaxpr(std::make_shared<const Program>(std::move(traced)));
  return ClosedJaxpr(std::make_shared<const Program>(Executable(traced).program()));
}

}  // namespace transform_detail
}  // namespace spmd

// make_jaxpr and jit: tracing to Programs, the signature cache, and the `jit` call primitive that
// records a jitted function called inside another trace.
#include <spmd/error.h>
#include <spmd/placement.h>
#include <spmd/transforms.h>

#include "compile/compiled.h"
#include "compile/donation.h"
#include "compile/partition.h"
#include "core/axis_env.h"
#include "core/lru_cache.h"
#include "prims/dimension_numbers.h"
#include "prims/families.h"
#include "prims/primitive.h"
#include "prims/rule_util.h"
#include "prims/sharding.h"
#include "sharding/type_sharding.h"
#include "transforms/interpreters.h"
#include "transforms/signature.h"
#include "transforms/staging.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
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

// jit's ctx_mesh param, as JAX's: the mesh in context when the call was staged (sp::use_mesh),
// else the abstract mesh of the shard_map body it was staged in.
struct ContextMesh {
  Mesh mesh;
  std::vector<TypeSharding::Axis> abstract;  // when `mesh` is empty
  bool operator==(const ContextMesh&) const = default;
};

template <>
struct ParamTraits<ContextMesh> {
  static constexpr std::string_view name = "ContextMesh";
  static std::string str(const ContextMesh& m) {
    return m.mesh.size() ? m.mesh.str() : abstract_mesh_str(TypeSharding{m.abstract, {}});
  }
  static size_t hash(const ContextMesh& m) {
    size_t h = hash_mesh(m.mesh);
    for (const TypeSharding::Axis& a : m.abstract)
      hash_combine(h, std::hash<std::string>()(a.name));
    return h;
  }
};

namespace {

// The ctx_mesh of a call staged here, as JAX's get_ctx_mesh picks it: the mesh in context, else
// the shard_map body's abstract mesh when it has an Explicit axis; none otherwise (none printed).
std::optional<ContextMesh> context_mesh() {
  if (Mesh mesh = get_mesh(); mesh.size()) return ContextMesh{std::move(mesh), {}};
  const TypeSharding* body = body_mesh();
  if (body && std::ranges::any_of(body->mesh, [](const TypeSharding::Axis& a) {
        return a.is_explicit;
      }))
    return ContextMesh{Mesh(), body->mesh};
  return std::nullopt;
}

// The params of a call named `name` of `body` staged here.
Params staged_call_params(const std::string& name, ProgramRef body) {
  Params params{{"name", name}, {"jaxpr", std::move(body)}};
  if (std::optional<ContextMesh> m = context_mesh()) params.set("ctx_mesh", object_param(*m));
  return params;
}

// The params of a call of `body` derived from the call `p` (its forward, tangent, joint jvp or
// transposed call, or the plain call inside its constraints): p's name and ctx_mesh.
Params derived_call_params(const Params& p, ProgramRef body) {
  Params params{{"name", p.at("name")}, {"jaxpr", std::move(body)}};
  if (p.has("ctx_mesh")) params.set("ctx_mesh", p.at("ctx_mesh"));
  return params;
}

bool contains(const std::vector<int>& xs, int x) {
  return std::find(xs.begin(), xs.end(), x) != xs.end();
}

// JAX's check that each of `option`'s indices names one of `n` positional arguments (a negative
// one counting from the end).
void check_argnums_range(const std::vector<int>& argnums, int n, const char* option) {
  for (int a : argnums)
    if (a >= n || -a > n)
      throw ValueError(
          std::string("[jit] Jitted function has ") + option + "=" +
          dimension_numbers::ints_str(std::vector<int64_t>(argnums.begin(), argnums.end())) +
          ", but only accepts " + std::to_string(n) + " positional arguments.");
}

// JAX's check of static_argnums: every index names a positional argument, and none names an
// Array (spmd traces Arrays and keeps every other argument static, so static_argnums can only
// restate that).
void check_static_argnums(const JitOptions& options, const TreeDef& in_def,
                          std::span<const Array> leaves) {
  const std::vector<int>& statics = options.static_argnums;
  if (statics.empty()) return;
  std::vector<TreeDef> args = in_def.children();
  const int n = int(args.size());
  check_argnums_range(statics, n, "static_argnums");
  size_t first_leaf = 0;
  for (int i = 0; i < n; ++i) {
    const size_t num = size_t(args[size_t(i)].num_leaves());
    if (num > 0 && (contains(statics, i) || contains(statics, i - n)))
      throw ValueError("[jit] Non-hashable static arguments are not supported: static_argnums "
                       "names argument " +
                       std::to_string(i) + ", which holds an Array of type " +
                       aval_of(leaves[first_leaf]).str() +
                       ". Arrays are traced; arguments that are not Arrays are always static.");
    first_leaf += num;
  }
}

// Per leaf of the arguments, whether its argument is in donate_argnums (JAX's donation_vector),
// after JAX's checks: every index names a positional argument (a negative one is accepted and
// donates nothing, as in JAX) and no donated argument is static.
std::vector<bool> donation_vector(const JitOptions& options, const TreeDef& in_def) {
  const std::vector<int>& donate = options.donate_argnums;
  std::vector<bool> donated;
  if (donate.empty()) return std::vector<bool>(size_t(in_def.num_leaves()), false);
  std::vector<TreeDef> args = in_def.children();
  int n = int(args.size());
  check_argnums_range(donate, n, "donate_argnums");
  for (int i = 0; i < n; ++i) {
    bool d = contains(donate, i);
    if (d && (contains(options.static_argnums, i) ||
              args[size_t(i)].kind() == TreeDef::Kind::static_leaf))
      throw ValueError("[jit] static_argnums and donate_argnums cannot intersect: argument " +
                       std::to_string(i) +
                       " is static (arguments that are not Arrays always are) and cannot be "
                       "donated.");
    donated.insert(donated.end(), size_t(args[size_t(i)].num_leaves()), d);
  }
  return donated;
}

// The donated leaves a result takes over, as JAX pairs them (donation_aliases over the types
// of `program`, the compiled one: one device's blocks on a mesh, whose first `num_consts`
// inputs are constants). Only these are deleted; the others are left alone, and `warning` gets
// JAX's warning about them.
std::vector<bool> usable_donations(std::vector<bool> donated, const Program& program,
                                   size_t num_consts, std::string* warning) {
  std::vector<AbstractValue> in_types = program.in_types();
  in_types.erase(in_types.begin(), in_types.begin() + std::ptrdiff_t(num_consts));
  // An argument nothing reads is no input of JAX's program (keep_unused=False): neither used
  // nor warned about.
  const std::vector<bool> read = program.read_vars();
  for (size_t k = 0; k < donated.size(); ++k)
    donated[k] = donated[k] && read[size_t(program.invars[num_consts + k])];
  const std::vector<int> aliases = donation_aliases(in_types, donated, program.out_types());
  *warning = unusable_donations_warning(in_types, donated, aliases);
  std::vector<bool> usable(donated.size(), false);
  for (size_t k = 0; k < usable.size(); ++k) usable[k] = aliases[k] >= 0;
  return usable;
}

// A donated array must not be used by another argument of the same call; raises XLA's error.
void check_donated_once(std::span<const Array> leaves, const std::vector<bool>& usable) {
  std::unordered_map<const ArrayImpl*, size_t> first_use;
  for (size_t k = 0; k < leaves.size(); ++k) {
    auto [it, inserted] = first_use.try_emplace(leaves[k].impl().get(), k);
    if (inserted || !(usable[k] || usable[it->second])) continue;
    std::string where = " (flattened argument " + std::to_string(k) +
                        ", first use: " + std::to_string(it->second) +
                        "). Toy example for this bug: ";
    if (usable[it->second])
      throw RuntimeError(
          "[jit] Attempt to use a buffer that was previously donated in the same call" + where +
          "`f(donate(a), a)`.");
    throw RuntimeError("[jit] Attempt to donate a buffer which is also used by the same call" +
                       where + "`f(a, donate(a))`.");
  }
}

// A call's in_shardings or out_shardings (jit's, staged into another trace); none when unset.
const ShardingList* call_shardings(const Params& p, std::string_view key) {
  return p.has(key) ? &p.get_object<ShardingList>(key) : nullptr;
}

// The entries `picks` names of a call's sharding list (-1: unspecified), as the params of a call
// derived from it (its forward, tangent or transposed call) carry them.
std::optional<ShardingList> picked(const ShardingList* list, std::span<const int> picks) {
  if (!list) return std::nullopt;
  ShardingList out{{}, list->absent, {}};
  for (int k : picks) {
    const bool have = k >= 0 && size_t(k) < list->items.size();
    out.items.push_back(have ? list->items[size_t(k)] : nullptr);
    if (!list->as_device.empty()) out.as_device.push_back(have && list->as_device[size_t(k)]);
  }
  if (!out.any()) return std::nullopt;
  return out;
}

// Sets `key` of a derived call's params to the entries `picks` names of the call's list `from`.
void set_picked(Params& params, std::string_view key, const Params& call, std::string_view from,
                std::span<const int> picks) {
  if (std::optional<ShardingList> list = picked(call_shardings(call, from), picks))
    params.set(std::string(key), object_param(std::move(*list)));
}

// `count` unspecified entries (-1) followed by `rest`.
std::vector<int> after_unspecified(size_t count, std::vector<int> rest) {
  rest.insert(rest.begin(), count, -1);
  return rest;
}

// xs constrained to the call's shardings (placed, when concrete), as JAX's pjit honours them
// around its body; zero tangents stay symbolic.
std::vector<Array> constrained(std::vector<Array> xs, const ShardingList* shardings) {
  for (size_t i = 0; shardings && i < xs.size() && i < shardings->items.size(); ++i)
    if (shardings->items[i] && xs[i].valid() && !is_zero(xs[i]))
      xs[i] = sharding_constraint(xs[i], shardings->items[i]);
  return xs;
}

std::vector<Array> constrained(std::span<const Array> xs, const ShardingList* shardings) {
  return constrained(std::vector<Array>(xs.begin(), xs.end()), shardings);
}

// The call's body with its shardings as constraints around it: what the passes inline and
// the partitioner honours.
ProgramRef body_with_shardings(const Params& p) {
  const ProgramRef body = p.get<ProgramRef>("jaxpr");
  const ShardingList* in = call_shardings(p, "in_shardings");
  const ShardingList* out = call_shardings(p, "out_shardings");
  if (!in && !out) return body;
  Params plain = derived_call_params(p, body);
  transform_detail::FlatFn fn = [&](std::span<const Array> xs) {
    return constrained(spmd::bind(primitive("jit"), constrained(xs, in), plain), out);
  };
  return std::make_shared<const Program>(trace_to_program(fn, body->in_types(), "jit"));
}

// The highest-level trace among the values (nullptr when all are concrete).
Trace* highest_trace(std::span<const Array> xs) {
  Trace* top = nullptr;
  for (const Array& x : xs)
    if (x.valid() && x.impl()->trace && (!top || x.impl()->trace->level() > top->level()))
      top = x.impl()->trace.get();
  return top;
}

// A call's body linearized as JAX's linearize_jaxpr does it: the forward program (its constants,
// then the primal inputs, to the primal outputs that are not inputs, then the extra residuals)
// and the tangent program (the residuals, then the nonzero tangents, to the nonzero output
// tangents).
struct LinearizedCall {
  ProgramRef forward;
  std::vector<Array> forward_consts;
  ProgramRef tangent;
  std::vector<int> out_input;  // per primal output: the input it is, or -1 (a forward output)
  size_t num_forward_outs = 0;  // the forward program's outputs before the extra residuals
  std::vector<ResidualSource> residuals;
  std::vector<bool> nonzero_out;
};

// The tangent program with its constants (the residuals) as leading inputs.
ProgramRef residuals_first(Program tangent) {
  tangent.invars.insert(tangent.invars.begin(), tangent.constvars.begin(),
                        tangent.constvars.end());
  tangent.constvars.clear();
  tangent.consts.clear();
  return std::make_shared<const Program>(std::move(tangent));
}

// Linearizes `body` for the inputs whose tangents are nonzero (`nonzero[i]`).
LinearizedCall linearize_call(const Program& body, const std::vector<bool>& nonzero) {
  LinearizedCall lc;
  transform_detail::FlatFn fn = [&](std::span<const Array> xs) {
    LinearizedBody lb = linearize_body(body, xs, nonzero);
    std::vector<Array> results;
    for (const Array& out : lb.outs) {
      int input = -1;
      for (size_t k = 0; k < xs.size() && input < 0; ++k)
        if (xs[k].impl() == out.impl()) input = int(k);
      lc.out_input.push_back(input);
      if (input < 0) results.push_back(out);
    }
    lc.num_forward_outs = results.size();
    results.insert(results.end(), lb.extras.begin(), lb.extras.end());
    lc.nonzero_out = std::move(lb.nonzero_out);
    lc.residuals = std::move(lb.residuals);
    lc.tangent = residuals_first(std::move(lb.tangent));
    return results;
  };
  lc.forward = std::make_shared<const Program>(
      hoist_consts(trace_to_program(fn, body.in_types(), "jvp"), &lc.forward_consts));
  return lc;
}

// Whether a key of a cache by call body belongs to a body that no longer lives.
template <class Key>
bool body_gone(const Key& k) {
  return k.body.expired();
}

// Linearizations by body and nonzero tangents, kept while the body lives (and the cache's bound,
// least recently used dropped: JAX's weakref_lru_cache): calls of one body share their forward
// program, as JAX's cached linearize_jaxpr makes them (the jaxpr prints it once,
// `let name = ...`). Linearizations holding traced values are not kept.
std::shared_ptr<const LinearizedCall> cached_linearization(const ProgramRef& body,
                                                           const std::vector<bool>& nonzero) {
  struct Key {
    std::weak_ptr<const Program> body;
    std::vector<bool> nonzero;
  };
  static auto& cache = *new SharedLruCache<Key, std::shared_ptr<const LinearizedCall>>(
      "linearized calls");
  const size_t h = std::hash<const void*>()(body.get());
  auto same = [&](const Key& k) { return k.body.lock() == body && k.nonzero == nonzero; };
  if (auto hit = cache.find(h, same, body_gone<Key>)) return *hit;
  auto linearized = std::make_shared<const LinearizedCall>(linearize_call(*body, nonzero));
  bool traced = !std::all_of(linearized->forward_consts.begin(),
                             linearized->forward_consts.end(), is_concrete);
  for (const ResidualSource& s : linearized->residuals)
    traced = traced || (s.value.valid() && !is_concrete(s.value));
  if (!traced) cache.insert(Key{body, nonzero}, h, linearized);
  return linearized;
}

// The indices 0 … n-1.
std::vector<int> iota(size_t n) {
  std::vector<int> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = int(i);
  return out;
}

// The indices where `mask` is true.
std::vector<int> where(const std::vector<bool>& mask) {
  std::vector<int> out;
  for (size_t i = 0; i < mask.size(); ++i)
    if (mask[i]) out.push_back(int(i));
  return out;
}

// The forward call's params: the call's in_shardings after its constants; the out_shardings of
// the primal outputs it returns, then unspecified for the residuals (as JAX's pjit
// linearization).
Params forward_call_params(const Params& p, const LinearizedCall& lc) {
  Params params = derived_call_params(p, lc.forward);
  const size_t num_consts = lc.forward_consts.size();
  set_picked(params, "in_shardings", p, "in_shardings",
             after_unspecified(num_consts, iota(lc.forward->invars.size() - num_consts)));
  std::vector<int> outs;
  for (size_t i = 0; i < lc.out_input.size(); ++i)
    if (lc.out_input[i] < 0) outs.push_back(int(i));
  outs.resize(lc.forward->outputs.size(), -1);
  set_picked(params, "out_shardings", p, "out_shardings", outs);
  return params;
}

// The tangent call's params: unspecified for the residuals, then the in_shardings of the
// nonzero tangents; the out_shardings of the nonzero output tangents.
Params tangent_call_params(const Params& p, const LinearizedCall& lc,
                           const std::vector<bool>& nonzero) {
  Params params = derived_call_params(p, lc.tangent);
  set_picked(params, "in_shardings", p, "in_shardings",
             after_unspecified(lc.residuals.size(), where(nonzero)));
  set_picked(params, "out_shardings", p, "out_shardings", where(lc.nonzero_out));
  return params;
}

// jvp while linearizing, as JAX's pjit linearization: a forward call of the primals computing
// the primal outputs and the residuals, and a tangent call of the residuals and the tangents,
// both named as the call.
JvpResult linearize_jit(std::span<const Array> primals, std::span<const Array> tangents,
                        const Params& p) {
  std::vector<bool> nonzero;
  for (const Array& t : tangents) nonzero.push_back(!is_zero(t));
  const std::shared_ptr<const LinearizedCall> lc =
      cached_linearization(p.get<ProgramRef>("jaxpr"), nonzero);
  std::vector<Array> operands = lc->forward_consts;
  operands.insert(operands.end(), primals.begin(), primals.end());
  const std::vector<Array> forward_outs =
      spmd::bind(primitive("jit"), operands, forward_call_params(p, *lc));
  JvpResult r;
  size_t next = 0;
  for (int input : lc->out_input)
    r.primals_out.push_back(input >= 0 ? primals[size_t(input)] : forward_outs[next++]);
  std::vector<Array> tangent_operands;
  for (const ResidualSource& s : lc->residuals) {
    switch (s.kind) {
      case ResidualSource::Kind::input: tangent_operands.push_back(primals[s.index]); break;
      case ResidualSource::Kind::output: tangent_operands.push_back(r.primals_out[s.index]); break;
      case ResidualSource::Kind::extra:
        tangent_operands.push_back(forward_outs[lc->num_forward_outs + s.index]);
        break;
      case ResidualSource::Kind::outside: tangent_operands.push_back(s.value); break;
    }
  }
  for (const Array& t : tangents)
    if (!is_zero(t)) tangent_operands.push_back(t);
  const std::vector<Array> touts =
      spmd::bind(primitive("jit"), tangent_operands, tangent_call_params(p, *lc, nonzero));
  next = 0;
  for (bool nz : lc->nonzero_out) r.tangents_out.push_back(nz ? touts[next++] : Array());
  return r;
}

// The call's rules act on its body and keep the call, as JAX's pjit rules do: jvp is one call
// of the primals and the nonzero tangents to the primal outputs and the nonzero output
// tangents, the tangents sharded as their primals; while linearizing, a forward and a tangent
// call; transposition a call (below); batching a call of the batched body.
JvpResult jit_jvp(std::span<const Array> primals, std::span<const Array> tangents,
                  const Params& p) {
  if (linearizing(primals, tangents)) return linearize_jit(primals, tangents, p);
  const Program& body = *p.get<ProgramRef>("jaxpr");
  const size_t n = primals.size();
  std::vector<AbstractValue> types = body.in_types();
  std::vector<Array> operands(primals.begin(), primals.end());
  std::vector<bool> nonzero;
  for (size_t i = 0; i < n; ++i) {
    nonzero.push_back(!is_zero(tangents[i]));
    if (!nonzero.back()) continue;
    types.push_back(types[i]);
    types.back().weak_type = false;
    operands.push_back(tangents[i]);
  }
  std::vector<bool> nonzero_out;
  transform_detail::FlatFn fn = [&](std::span<const Array> xs) {
    std::vector<Array> ts;
    size_t j = n;
    for (bool nz : nonzero) ts.push_back(nz ? xs[j++] : Array());
    auto [outs, touts] = jvp_program(body, xs.first(n), ts);
    for (const Array& t : touts) {
      nonzero_out.push_back(!is_zero(t));
      if (!is_zero(t)) outs.push_back(t);
    }
    return outs;
  };
  std::vector<Array> consts;
  auto joint =
      std::make_shared<const Program>(hoist_consts(trace_to_program(fn, types, "jvp"), &consts));
  operands.insert(operands.begin(), consts.begin(), consts.end());
  Params params = derived_call_params(p, joint);
  std::vector<int> ins = iota(n), outs = iota(nonzero_out.size());
  for (int i : where(nonzero)) ins.push_back(i);
  for (int k : where(nonzero_out)) outs.push_back(k);
  set_picked(params, "in_shardings", p, "in_shardings", after_unspecified(consts.size(), ins));
  set_picked(params, "out_shardings", p, "out_shardings", outs);
  std::vector<Array> results = spmd::bind(primitive("jit"), operands, params);
  JvpResult r;
  r.primals_out.assign(results.begin(), results.begin() + long(nonzero_out.size()));
  size_t next = nonzero_out.size();
  for (bool nz : nonzero_out) r.tangents_out.push_back(nz ? results[next++] : Array());
  return r;
}

// The call's body with its known inputs as constants (`known[k]` for each non-linear input k):
// the linear program transpose_program takes.
Program with_known_inputs(const Program& body, std::span<const LinearInput> ins,
                          std::span<const Array> known) {
  Program sub = body;
  std::vector<int> linear_invars;
  size_t j = 0;
  for (size_t k = 0; k < ins.size(); ++k) {
    if (ins[k].is_linear()) {
      linear_invars.push_back(body.invars[k]);
    } else {
      sub.constvars.push_back(body.invars[k]);
      sub.consts.push_back(known[j++]);
    }
  }
  sub.invars = linear_invars;
  return sub;
}

// Drops the first `count` inputs of `program` that nothing in it reads: the residuals the part
// of a call that gets nonzero cotangents does not need (JAX removes them from the call by
// dead-code elimination of the linear program before transposing it). Returns, per input,
// whether it stays.
std::vector<bool> drop_unread_inputs(Program* program, size_t count) {
  const std::vector<bool> read = program->read_vars();
  std::vector<int> invars;
  std::vector<bool> kept;
  for (size_t k = 0; k < program->invars.size(); ++k) {
    kept.push_back(k >= count || read[size_t(program->invars[k])]);
    if (kept.back()) invars.push_back(program->invars[k]);
  }
  program->invars = std::move(invars);
  return kept;
}

// A call transposed, as JAX's pjit transpose makes it: a call of the same name from the known
// inputs it reads and the nonzero cotangents to the nonzero cotangents of the linear inputs.
struct TransposedCall {
  Params params;                 // name, body (constants hoisted) and shardings
  std::vector<Array> consts;     // the body's constants, its leading operands
  std::vector<bool> kept;        // per known input: whether the body reads it
  std::vector<bool> nonzero_in;  // per linear input: whether its cotangent is nonzero
};

std::atomic<int64_t> transposed_call_traces{0};

// Traces the transposition of the call `p` for these linear inputs and nonzero cotangents,
// on operands of `types` (the known inputs, then the nonzero cotangents).
TransposedCall trace_transposed_call(const Params& p, std::span<const LinearInput> ins,
                                     const std::vector<bool>& nonzero_ct,
                                     std::span<const AbstractValue> types, size_t num_known) {
  ++transposed_call_traces;
  const Program& body = *p.get<ProgramRef>("jaxpr");
  TransposedCall tc;
  transform_detail::FlatFn fn = [&](std::span<const Array> xs) {
    std::vector<Array> sub_cts;
    size_t j = num_known;
    for (bool nz : nonzero_ct) sub_cts.push_back(nz ? xs[j++] : Array());
    std::vector<Array> out =
        transpose_program(with_known_inputs(body, ins, xs.first(num_known)), sub_cts);
    std::vector<Array> nonzero;
    for (const Array& ct : out) {
      tc.nonzero_in.push_back(!is_zero(ct));
      if (!is_zero(ct)) nonzero.push_back(ct);
    }
    return nonzero;
  };
  Program transposed = trace_to_program(fn, types, "vjp");
  tc.kept = drop_unread_inputs(&transposed, num_known);
  tc.kept.resize(num_known);
  auto program = std::make_shared<const Program>(hoist_consts(transposed, &tc.consts));
  tc.params = derived_call_params(p, program);
  const size_t leading =
      tc.consts.size() + size_t(std::count(tc.kept.begin(), tc.kept.end(), true));
  set_picked(tc.params, "in_shardings", p, "out_shardings",
             after_unspecified(leading, where(nonzero_ct)));
  std::vector<int> linear_in;
  for (size_t k = 0, l = 0; k < ins.size(); ++k)
    if (ins[k].is_linear() && tc.nonzero_in[l++]) linear_in.push_back(int(k));
  set_picked(tc.params, "out_shardings", p, "in_shardings", linear_in);
  return tc;
}

bool same_list(const ShardingList* a, const ShardingList* b) {
  if (!a || !b) return !a && !b;
  return ParamTraits<ShardingList>::equal(*a, *b);
}

// Transposed calls by body, linear inputs, nonzero cotangents, operand types and the call's
// shardings, kept while the body lives: an eager grad or pullback through a call traces its
// transposition once. Those closing over traced values are not kept.
std::shared_ptr<const TransposedCall> cached_transposed_call(
    const Params& p, std::span<const LinearInput> ins, const std::vector<bool>& nonzero_ct,
    const std::vector<AbstractValue>& types, size_t num_known) {
  struct Key {
    std::weak_ptr<const Program> body;
    std::vector<bool> linear, nonzero_ct;
    std::vector<AbstractValue> types;
    std::optional<ShardingList> in, out;  // the call's
  };
  static auto& cache = *new SharedLruCache<Key, std::shared_ptr<const TransposedCall>>(
      "transposed calls");
  const ProgramRef& body = p.get<ProgramRef>("jaxpr");
  std::vector<bool> linear;
  for (const LinearInput& in : ins) linear.push_back(in.is_linear());
  const ShardingList* in = call_shardings(p, "in_shardings");
  const ShardingList* out = call_shardings(p, "out_shardings");
  auto same = [&](const Key& e) {
    return e.body.lock() == body && e.linear == linear && e.nonzero_ct == nonzero_ct &&
           e.types == types && same_list(e.in ? &*e.in : nullptr, in) &&
           same_list(e.out ? &*e.out : nullptr, out);
  };
  const size_t h = std::hash<const void*>()(body.get());
  if (auto hit = cache.find(h, same, body_gone<Key>)) return *hit;
  auto transposed = std::make_shared<const TransposedCall>(
      trace_transposed_call(p, ins, nonzero_ct, types, num_known));
  if (std::all_of(transposed->consts.begin(), transposed->consts.end(), is_concrete))
    cache.insert(Key{body, linear, nonzero_ct, types, in ? std::optional(*in) : std::nullopt,
                     out ? std::optional(*out) : std::nullopt},
                 h, transposed);
  return transposed;
}

// Transposition kept as a call, as JAX's pjit transpose, traced or eager.
std::vector<Array> jit_transpose(std::span<const Array> cts, std::span<const LinearInput> ins,
                                 const Params& p) {
  std::vector<Array> known, nonzero;
  for (const LinearInput& in : ins)
    if (!in.is_linear()) known.push_back(in.value);
  std::vector<bool> nonzero_ct;
  for (const Array& ct : cts) {
    nonzero_ct.push_back(!is_zero(ct));
    if (!is_zero(ct)) nonzero.push_back(ct);
  }
  std::vector<AbstractValue> types = types_of(known);
  for (const Array& ct : nonzero) types.push_back(aval_of(ct));
  const std::shared_ptr<const TransposedCall> tc =
      cached_transposed_call(p, ins, nonzero_ct, types, known.size());
  std::vector<Array> operands = tc->consts;
  for (size_t k = 0; k < known.size(); ++k)
    if (tc->kept[k]) operands.push_back(known[k]);
  operands.insert(operands.end(), nonzero.begin(), nonzero.end());
  const std::vector<Array> results = spmd::bind(primitive("jit"), operands, tc->params);
  std::vector<Array> cts_in;
  size_t next = 0, linear = 0;
  for (const LinearInput& in : ins)
    cts_in.push_back(in.is_linear() && tc->nonzero_in[linear++] ? results[next++] : Array());
  return cts_in;
}

// A call's shardings under vmap, as JAX's pjit batching rule lays them out: vmap's
// spmd_axis_name (None without one) inserted at each batched value's batch dim; `leading`
// unspecified entries first (the batched body's constants).
std::optional<ShardingList> batched(const ShardingList* list, std::span<const int> dims,
                                    std::span<const AbstractValue> types, size_t leading,
                                    const BatchContext& ctx) {
  if (!list) return std::nullopt;
  ShardingList out{std::vector<std::shared_ptr<const Sharding>>(leading), list->absent, {}};
  for (size_t i = 0; i < list->items.size(); ++i) {
    const auto* named = dynamic_cast<const NamedSharding*>(list->items[i].get());
    if (!named || dims[i] == kNotBatched) {
      out.items.push_back(list->items[i]);
      continue;
    }
    // Without spmd_axis_name the spec is padded to the value's rank; with it, JAX reads the spec
    // back from the HLO sharding, which has no trailing Nones.
    std::vector<PartitionSpec::Entry> entries = named->spec().entries();
    if (ctx.spmd_axis_name.empty()) entries.resize(size_t(types[i].shape.ndim() - 1));
    while (!ctx.spmd_axis_name.empty() && !entries.empty() && !entries.back()) entries.pop_back();
    out.items.push_back(std::make_shared<NamedSharding>(
        named->mesh(), batch_spec(PartitionSpec(std::move(entries)), dims[i], ctx)));
  }
  return out;
}

BatchResult jit_batch(const Primitive& jit, std::span<const Array> ins,
                      std::span<const int> in_dims, const Params& p, const BatchContext& ctx) {
  const ProgramRef body = p.get<ProgramRef>("jaxpr");
  const std::vector<AbstractValue> in_types = types_of(ins);
  std::optional<ShardingList> in =
      batched(call_shardings(p, "in_shardings"), in_dims, in_types, 0, ctx);
  const ShardingList* out = call_shardings(p, "out_shardings");
  if (all_concrete(ins)) {
    auto [outs, dims] = batch_program(*body, constrained(ins, in ? &*in : nullptr), in_dims, ctx);
    std::optional<ShardingList> batched_out = batched(out, dims, types_of(outs), 0, ctx);
    return {constrained(std::move(outs), batched_out ? &*batched_out : nullptr), std::move(dims)};
  }
  std::vector<int> out_dims;
  transform_detail::FlatFn batched_fn = [&](std::span<const Array> xs) {
    auto [outs, dims] = batch_program(*body, xs, in_dims, ctx);
    out_dims = std::move(dims);
    return outs;
  };
  // As JAX's batch_jaxpr2: the body's batched operands vary over vmap's spmd_axis_name.
  std::vector<AbstractValue> body_types = in_types;
  for (size_t i = 0; i < body_types.size(); ++i)
    if (is_batched(in_dims[i]))
      body_types[i].vma = vma_union(body_types[i].vma, varying_spmd_axis_names());
  std::vector<Array> operands;
  auto program = std::make_shared<const Program>(
      hoist_consts(trace_to_program(batched_fn, body_types, "vmap"), &operands));
  const size_t consts = operands.size();
  operands.insert(operands.end(), ins.begin(), ins.end());
  Params params = p;
  params.set("jaxpr", ProgramRef(program));
  if (in) {
    std::optional<ShardingList> with_consts =
        batched(call_shardings(p, "in_shardings"), in_dims, in_types, consts, ctx);
    params.set("in_shardings", object_param(std::move(*with_consts)));
  }
  if (out)
    params.set("out_shardings",
               object_param(*batched(out, out_dims, program->out_types(), 0, ctx)));
  return {spmd::bind(jit, operands, params), std::move(out_dims)};
}

}  // namespace

bool linearizing(std::span<const Array> primals, std::span<const Array> tangents) {
  std::vector<Array> nonzero;
  for (const Array& t : tangents)
    if (!is_zero(t)) nonzero.push_back(t);
  Trace* tangent_trace = highest_trace(nonzero);
  if (!dynamic_cast<StagingTrace*>(tangent_trace)) return false;
  Trace* primal_trace = highest_trace(primals);
  Trace* current = current_trace();
  if (!primal_trace || (current && current->level() > primal_trace->level()))
    primal_trace = current;
  return !primal_trace || tangent_trace->level() > primal_trace->level();
}

int64_t transposed_call_trace_count() {
  return transposed_call_traces.load();
}

void register_call_primitives(PrimitiveRegistry& r) {
  Primitive& jit = r.define(
      "jit",
      [](std::span<const AbstractValue>, const Params& p) {
        return p.get<ProgramRef>("jaxpr")->out_types();
      },
      [](const KernelArgs&) { throw std::logic_error("[jit] runs through its eager rule"); });
  jit.call_body = "jaxpr";
  jit.body_named_after_caller = true;
  jit.vma_rule = vma_as_traced(jit);
  jit.inlined_body = body_with_shardings;
  jit.eager = [](std::span<const Array> args, const Params& p) {
    const ProgramRef& program = p.get<ProgramRef>("jaxpr");
    if (!all_concrete(args)) return eval_program(*program, args);
    const ShardingList* in = call_shardings(p, "in_shardings");
    const ShardingList* out = call_shardings(p, "out_shardings");
    if (!in && !out) return compile_program(program)->run(args);
    return constrained(compile_program(program)->run(constrained(args, in)), out);
  };
  jit.jvp = jit_jvp;
  jit.transpose = jit_transpose;
  jit.batch = [&jit](std::span<const Array> args, std::span<const int> dims, const Params& p,
                     const BatchContext& ctx) { return jit_batch(jit, args, dims, p, ctx); };
  // Replicated for now: the partitioner inlines call bodies and partitions what they hold.
  jit.sharding_rule = [](std::span<const AbstractValue> in, std::span<const AbstractValue> out,
                         const Params&) { return replicated_sharding_rule(in, out); };
}

namespace transform_detail {

ClosedJaxpr make_jaxpr(const FlatFn& fn, std::span<const Array> args) {
  std::vector<AbstractValue> types = types_of(args);
  // The inputs stand for the arguments: grad's seed takes a committed argument's mesh from them.
  return ClosedJaxpr(
      std::make_shared<const Program>(trace_to_program(fn, types, "make_jaxpr", args)));
}

// The shardings of committed operands (null for uncommitted ones): what a call's placement
// depends on besides the program.
using OperandShardings = std::vector<std::shared_ptr<const Sharding>>;

// A Compiled of a CacheEntry and what a call of it takes besides its arguments.
struct CompiledCall {
  OperandShardings shardings;  // the operands' placement it was built for
  std::shared_ptr<const Compiled> compiled;
  // On a mesh, the constants the partitioned program takes (one copy per use of each array the
  // function closed over), each laid out once as its use wants, so a call moves none of their
  // bytes; off a mesh, the constants as they are.
  std::vector<Array> placed_consts;
  bool warned = false;  // about unusable donations (once per compilation, as JAX does)
};

// What partitioning reads of a CacheEntry: the traced program prepared as for partitioning
// (calls inlined, unused values dropped) with each use of an array the function closed over
// reading a copy of its own, hoisted to leading inputs (split_constant_uses: JAX's lowering
// embeds such arrays as constants, which Shardy's splitter copies per use), and the arrays
// those inputs take.
struct SplitConstants {
  ProgramRef program;
  std::vector<Array> consts;
};

struct CacheEntry {
  ProgramRef program;         // as traced, consts hoisted to leading inputs
  std::vector<Array> consts;  // concrete constants the function closed over
  std::optional<SplitConstants> split;  // built on the first call placed on a mesh
  TreeDef out_def;
  // The Compiled for each placement of the operands met so far, built on the first concrete
  // call with that placement; bounded as the compile caches are, the least recently used
  // dropped (a call holds its own reference while it runs).
  LruCache<std::shared_ptr<CompiledCall>> compiled;
};

// The last concrete call that found its entry in the cache, for the next call to compare its
// arguments with in place, without building a SignatureKey or looking it up (a repeated call is
// the common one): its tree, the leaves' types, the context mesh, the entry and its Compiled for
// the leaves' placement.
struct LastCall {
  TreeDef def;
  std::vector<AbstractValue> types;
  OperandShardings placed;  // the leaves' committed shardings (null: uncommitted)
  Mesh context;
  std::shared_ptr<CacheEntry> entry;
  std::shared_ptr<CompiledCall> call;
  uint64_t generation = 0;  // cache_generation() when it was remembered
};

struct JitState {
  JitOptions options;
  std::mutex mu;
  SignatureCache<std::shared_ptr<CacheEntry>> cache;  // under mu
  LastCall last;                                      // under mu
  int64_t traces = 0;
  // pmap's: committed arguments are placed as if uncommitted.
  bool moves_committed = false;
};

std::shared_ptr<JitState> new_jit_state(JitOptions options) {
  auto s = std::make_shared<JitState>();
  s->options = std::move(options);
  if (s->options.name.empty()) s->options.name = "jit";
  refuse_unconstrained(s->options.in_shardings, s->options.name, "in_shardings");
  refuse_unconstrained(s->options.out_shardings, s->options.name, "out_shardings");
  return s;
}

std::shared_ptr<JitState> new_pmap_state() {
  auto s = new_jit_state(JitOptions{.name = "_fun"});
  s->moves_committed = true;
  return s;
}

int64_t jit_trace_count(const JitState& state) {
  return state.traces;
}

size_t jit_cache_size(JitState& state) {
  std::lock_guard<std::mutex> lock(state.mu);
  return state.cache.size();
}

size_t jit_compiled_count(JitState& state) {
  std::lock_guard<std::mutex> lock(state.mu);
  size_t count = 0;
  state.cache.for_each(
      [&](const std::shared_ptr<CacheEntry>& entry) { count += entry->compiled.size(); });
  return count;
}

namespace {

// Where a call of `program` on `operands` (its `num_consts` constants first) runs: jit's
// in_shardings and out_shardings, the committed arguments and the program's own constraints
// decide; the constants, as JAX's embedded ones, place nothing.
std::optional<Placement> placement_of(const JitState& state, const Program& program,
                                      const TreeDef& out_def, size_t num_consts,
                                      const TreeDef& in_def, std::span<const Array> operands) {
  const JitOptions& o = state.options;
  OperandShardings in(num_consts);
  if (!o.in_shardings.is_unspecified()) {
    OperandShardings leaves = broadcast_shardings(o.in_shardings, in_def, "jit", "in_shardings");
    in.insert(in.end(), leaves.begin(), leaves.end());
  }
  OperandShardings out;
  if (!o.out_shardings.is_unspecified())
    out = broadcast_shardings(o.out_shardings, out_def, "jit", "out_shardings");
  return place(program, operands, in, out, o.name, {}, !state.moves_committed, num_consts);
}

// `p`, whose first consts.size() inputs take `consts`, with those inputs as its constants again.
Program with_constants(const Program& p, const std::vector<Array>& consts) {
  Program out = p;
  const auto end = out.invars.begin() + std::ptrdiff_t(consts.size());
  out.constvars.assign(out.invars.begin(), end);
  out.consts = consts;
  out.invars.erase(out.invars.begin(), end);
  return out;
}

// The program and constants partitioning reads for `entry` (SplitConstants), built once.
const SplitConstants& split_constants(CacheEntry& entry) {
  if (!entry.split) {
    const Program prepared = prepared_for_partitioning(with_constants(*entry.program, entry.consts));
    SplitConstants split;
    split.program = std::make_shared<const Program>(hoist_consts(prepared, &split.consts));
    entry.split = std::move(split);
  }
  return *entry.split;
}

// The operands of a call of `program`: `consts`, then `leaves`.
std::vector<Array> with_leaves(const std::vector<Array>& consts, std::span<const Array> leaves) {
  std::vector<Array> operands = consts;
  operands.insert(operands.end(), leaves.begin(), leaves.end());
  return operands;
}

// jit's in_shardings and out_shardings on a call staged into another trace, as JAX's pjit params
// (unspecified for the constants the function closed over), when any is given.
void add_call_shardings(const JitOptions& o, const CacheEntry& entry, const TreeDef& in_def,
                        Params& params) {
  if (!o.in_shardings.is_unspecified()) {
    ShardingList in{OperandShardings(entry.consts.size()), "UnspecifiedValue", {}};
    OperandShardings leaves = broadcast_shardings(o.in_shardings, in_def, "jit", "in_shardings");
    in.items.insert(in.items.end(), leaves.begin(), leaves.end());
    if (in.any()) params.set("in_shardings", object_param(std::move(in)));
  }
  if (!o.out_shardings.is_unspecified()) {
    ShardingList out{broadcast_shardings(o.out_shardings, entry.out_def, "jit", "out_shardings"),
                     "UnspecifiedValue",
                     {}};
    if (out.any()) params.set("out_shardings", object_param(std::move(out)));
  }
}

bool same_sharding(const std::shared_ptr<const Sharding>& a,
                   const std::shared_ptr<const Sharding>& b) {
  return a == b || (a && b && *a == *b);
}

// A hash of operands' placement that equal placements share: which operands are committed and
// over how many devices.
size_t placement_hash(const OperandShardings& shardings) {
  size_t h = shardings.size();
  for (const std::shared_ptr<const Sharding>& s : shardings)
    h = h * 31 + (s ? s->device_list().size() + 1 : 0);
  return h;
}

bool same_shardings(const OperandShardings& a, const OperandShardings& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!same_sharding(a[i], b[i])) return false;
  return true;
}

// The sharding compiled_for places a concrete operand by: its own when committed (and jit, not
// pmap, keeps it), else none.
std::shared_ptr<const Sharding> placed_sharding(const JitState& state, const Array& x) {
  return x.committed() && !state.moves_committed ? x.sharding() : nullptr;
}

// The Compiled of `entry` for operands placed as these are: partitioned over the devices that
// committed operands, in_shardings, out_shardings or constraints name, else on the default
// device. Built once per placement.
std::shared_ptr<CompiledCall> compiled_for(JitState& state, CacheEntry& entry,
                                           const TreeDef& in_def,
                                           std::span<const Array> operands) {
  OperandShardings placed;
  for (const Array& x : operands) placed.push_back(placed_sharding(state, x));
  const size_t h = placement_hash(placed);
  std::lock_guard<std::mutex> lock(state.mu);
  if (std::shared_ptr<CompiledCall>* hit =
          entry.compiled.find(h, [&](const std::shared_ptr<CompiledCall>& call) {
            return same_shardings(call->shardings, placed);
          }))
    return *hit;
  const size_t num_consts = entry.consts.size();
  std::optional<Placement> placement =
      placement_of(state, *entry.program, entry.out_def, num_consts, in_def, operands);
  if (!placement) {
    auto call = std::make_shared<CompiledCall>(
        CompiledCall{std::move(placed), compile_program(entry.program), entry.consts});
    return entry.compiled.insert(h, std::move(call));
  }
  const SplitConstants& split = split_constants(entry);
  const std::span<const Array> leaves = operands.subspan(num_consts);
  placement = placement_of(state, *split.program, entry.out_def, split.consts.size(), in_def,
                           with_leaves(split.consts, leaves));
  std::shared_ptr<const Compiled> compiled = compile_partitioned(split.program, *placement);
  auto call = std::make_shared<CompiledCall>(CompiledCall{std::move(placed), compiled, {}});
  for (size_t i = 0; i < split.consts.size(); ++i) {
    const std::shared_ptr<const Sharding>& s = compiled->in_sharding(i);
    call->placed_consts.push_back(
        compiled->on_mesh() && !inside_program() && dynamic_cast<const NamedSharding*>(s.get())
            ? device_put(split.consts[i], s)
            : split.consts[i]);
  }
  return entry.compiled.insert(h, std::move(call));
}

// Prints JAX's warning about donations no result can take, once per compilation, when JAX
// gives it: on one device, or on a mesh with out_shardings (else XLA pairs them, silently).
void warn_unusable(JitState& state, CompiledCall& call, const std::string& warning) {
  if (warning.empty() ||
      (call.compiled->on_mesh() && state.options.out_shardings.is_unspecified()))
    return;
  std::lock_guard<std::mutex> lock(state.mu);
  if (call.warned) return;
  call.warned = true;
  std::fprintf(stderr, "spmd: UserWarning: %s\n", warning.c_str());
}

// Runs a compiled call of `call` whose arguments include donated leaves: those an output can
// take over are deleted for the caller and their buffers handed to the Executable.
std::vector<Array> run_donating(JitState& state, CacheEntry& entry, CompiledCall& call,
                                std::span<const Array> leaves, const std::vector<bool>& donated) {
  const Compiled& compiled = *call.compiled;
  std::string warning;
  std::vector<bool> usable =
      usable_donations(donated, compiled.program(), call.placed_consts.size(), &warning);
  warn_unusable(state, call, warning);
  check_donated_once(leaves, usable);
  std::vector<Array> operands;
  std::vector<bool> closed_over(leaves.size(), false);
  {
    std::lock_guard<std::mutex> lock(state.mu);
    // A constant the function closed over keeps its value when the same array is donated (its
    // copy shares the blocks of a sharded one, which the run then must not consume).
    auto keep = [&](std::vector<Array>& consts) {
      for (Array& c : consts)
        for (size_t k = 0; k < leaves.size(); ++k)
          if (usable[k] && c.impl() == leaves[k].impl()) {
            c = Array(std::make_shared<ArrayImpl>(*c.impl()));
            closed_over[k] = true;
          }
    };
    keep(entry.consts);
    if (entry.split) keep(entry.split->consts);
    keep(call.placed_consts);
    operands = call.placed_consts;
  }
  std::vector<bool> consumable(operands.size(), false);
  for (size_t k = 0; k < leaves.size(); ++k) {
    operands.push_back(usable[k] ? take_and_delete(leaves[k]) : leaves[k]);
    consumable.push_back(usable[k] && !(closed_over[k] && compiled.on_mesh()));
  }
  return compiled.run(std::move(operands), consumable);
}

// Runs a compiled call on its constants, then `leaves`.
std::vector<Array> run_call(JitState& state, CacheEntry& entry, CompiledCall& call,
                            std::span<const Array> leaves, const std::vector<bool>& donated) {
  if (std::find(donated.begin(), donated.end(), true) == donated.end()) {
    // Without constants the leaves are the operands as they are. The count of constants never
    // changes (run_donating replaces some under the lock), so it is read without the lock.
    if (call.placed_consts.empty()) return call.compiled->run(leaves);
    std::vector<Array> operands;
    {
      std::lock_guard<std::mutex> lock(state.mu);
      operands = with_leaves(call.placed_consts, leaves);
    }
    return call.compiled->run(operands);
  }
  return run_donating(state, entry, call, leaves, donated);
}

// As run_call, on a mesh: the results get the shardings JAX gives jit's results.
std::vector<Array> run_call_on_mesh(JitState& state, CacheEntry& entry, const TreeDef& in_def,
                                    CompiledCall& call, std::span<const Array> leaves,
                                    const std::vector<bool>& donated) {
  const JitOptions& o = state.options;
  OperandShardings in, out;
  if (!o.in_shardings.is_unspecified())
    in = broadcast_shardings(o.in_shardings, in_def, "jit", "in_shardings");
  if (!o.out_shardings.is_unspecified())
    out = broadcast_shardings(o.out_shardings, entry.out_def, "jit", "out_shardings");
  std::shared_ptr<const Sharding> model = result_model(leaves, in);
  std::vector<Array> results = run_call(state, entry, call, leaves, donated);
  recover_user_shardings(results, model, leaves.empty() ? 0 : leaves[0].ndim(), out);
  return results;
}

// Runs a concrete call of `entry`'s `call` on `leaves` (the constants go first).
std::vector<Array> run_compiled(JitState& state, CacheEntry& entry, CompiledCall& call,
                                const TreeDef& in_def, std::span<const Array> leaves,
                                const std::vector<bool>& donated) {
  if (!call.compiled->on_mesh()) return run_call(state, entry, call, leaves, donated);
  return run_call_on_mesh(state, entry, in_def, call, leaves, donated);
}

// The last call's entry and Compiled when this call (no donation, outside any named axes, every
// leaf concrete) has the same signature and the same placement of its leaves; else null.
std::shared_ptr<CacheEntry> repeated_call(JitState& state, const TreeDef& in_def,
                                          std::span<const Array> leaves,
                                          std::shared_ptr<CompiledCall>* call) {
  if (!state.options.donate_argnums.empty() || !axis_env().empty()) return nullptr;
  for (const Array& x : leaves)
    if (!x.valid() || x.impl()->deleted || !is_concrete(x)) return nullptr;
  std::lock_guard<std::mutex> lock(state.mu);
  const LastCall& last = state.last;
  if (!last.entry || last.generation != cache_generation() || leaves.size() != last.types.size() ||
      !(in_def == last.def))
    return nullptr;
  for (size_t i = 0; i < leaves.size(); ++i)
    if (!(aval_of(leaves[i]) == last.types[i]) ||
        !same_sharding(placed_sharding(state, leaves[i]), last.placed[i]))
      return nullptr;
  if (!(get_mesh() == last.context)) return nullptr;
  *call = last.call;
  return last.entry;
}

// Remembers a concrete call of a cached entry as the last one.
void remember_call(JitState& state, SignatureKey key, std::shared_ptr<CacheEntry> entry,
                   std::shared_ptr<CompiledCall> call, std::span<const Array> leaves) {
  if (!state.options.donate_argnums.empty() || !key.axes.empty()) return;
  LastCall last{std::move(key.def), std::move(key.types), {}, std::move(key.context),
                std::move(entry), std::move(call), cache_generation()};
  for (const Array& x : leaves) last.placed.push_back(placed_sharding(state, x));
  std::lock_guard<std::mutex> lock(state.mu);
  state.last = std::move(last);
}

// The abstract meshes of the arrays `stand_for` stand for (SignatureKey::meshes): empty when
// none is committed over a mesh.
std::vector<std::optional<TypeSharding>> argument_meshes(std::span<const Array> stand_for) {
  std::vector<std::optional<TypeSharding>> meshes;
  bool any = false;
  for (const Array& x : stand_for) {
    std::optional<Mesh> mesh = committed_mesh_of(x);
    meshes.push_back(mesh ? std::optional(unsplit_on(*mesh, 0)) : std::nullopt);
    any = any || mesh;
  }
  if (!any) meshes.clear();
  return meshes;
}

}  // namespace

namespace {

// The calls this thread is tracing: a function that calls itself with the signature it is being
// traced for would trace itself forever (JAX's RecursionError "Recursively calling ...").
struct TracingGuard {
  static std::vector<std::pair<const JitState*, const SignatureKey*>>& active() {
    thread_local std::vector<std::pair<const JitState*, const SignatureKey*>> calls;
    return calls;
  }
  TracingGuard(const JitState& state, const SignatureKey& key) {
    for (const auto& [s, k] : active())
      if (s == &state && *k == key)
        throw RuntimeError("[" + state.options.name + "] Recursively calling " +
                           state.options.name +
                           ": the function calls itself with the signature it is being traced "
                           "for, so its trace would never end. Make the value that ends the "
                           "recursion a static argument.");
    active().emplace_back(&state, &key);
  }
  ~TracingGuard() { active().pop_back(); }
  TracingGuard(const TracingGuard&) = delete;
  TracingGuard& operator=(const TracingGuard&) = delete;
};

}  // namespace

std::vector<Array> jit_call(JitState& state, const TreeDef& in_def, std::span<const Array> leaves,
                            const std::function<FlatFn(std::shared_ptr<TreeDef>)>& make_fn,
                            TreeDef* out_def) {
  std::shared_ptr<CompiledCall> repeated;
  if (std::shared_ptr<CacheEntry> entry = repeated_call(state, in_def, leaves, &repeated)) {
    *out_def = entry->out_def;
    static const std::vector<bool> kNoDonation;
    return run_compiled(state, *entry, *repeated, in_def, leaves, kNoDonation);
  }
  for (const Array& x : leaves)
    if (x.valid() && x.impl()->deleted) concrete_buffer(x, "jit");  // raises JAX's error
  check_static_argnums(state.options, in_def, leaves);
  std::vector<bool> donated = donation_vector(state.options, in_def);
  std::vector<std::string> axes;
  for (const AxisFrame& f : axis_env())
    axes.push_back(f.name + ":" + std::to_string(f.size) + ":" + f.binder + (f.vma ? ":v" : ""));
  SignatureKey key{in_def, types_of(leaves), std::move(axes)};
  const std::span<const Array> stand_for = stand_ins(leaves);
  key.meshes = argument_meshes(stand_for);
  std::shared_ptr<CacheEntry> entry;
  {
    std::lock_guard<std::mutex> lock(state.mu);
    if (std::shared_ptr<CacheEntry>* hit = state.cache.find(key)) entry = *hit;
  }
  bool cached = entry != nullptr;
  if (!entry) {
    auto def = std::make_shared<TreeDef>();
    const TracingGuard guard(state, key);
    Program traced = trace_to_program(make_fn(def), key.types, "jit", stand_for);
    entry = std::make_shared<CacheEntry>();
    entry->program = std::make_shared<const Program>(hoist_consts(traced, &entry->consts));
    entry->out_def = *def;
    // A function that closed over values of an enclosing trace is traced anew on every call.
    bool cacheable = true;
    for (const Array& c : entry->consts) cacheable = cacheable && is_concrete(c);
    std::lock_guard<std::mutex> lock(state.mu);
    ++state.traces;
    if (cacheable) cached = state.cache.insert(key, entry);
  }
  *out_def = entry->out_def;
  std::vector<Array> operands = entry->consts;
  operands.insert(operands.end(), leaves.begin(), leaves.end());
  if (all_concrete(operands)) {
    std::shared_ptr<CompiledCall> call = compiled_for(state, *entry, in_def, operands);
    if (cached) remember_call(state, std::move(key), entry, call, leaves);
    return run_compiled(state, *entry, *call, in_def, leaves, donated);
  }
  Params params = staged_call_params(state.options.name, entry->program);
  add_call_shardings(state.options, *entry, in_def, params);
  return spmd::bind(primitive("jit"), operands, params);
}

std::string jit_explain(JitState& state, const FlatFn& fn, const TreeDef& in_def,
                        std::span<const Array> leaves, const std::shared_ptr<TreeDef>& out_def) {
  CacheEntry entry;
  Program traced = trace_to_program(fn, types_of(leaves), "jit");
  entry.program = std::make_shared<const Program>(hoist_consts(traced, &entry.consts));
  entry.out_def = *out_def;
  std::optional<Placement> placement =
      placement_of(state, *entry.program, entry.out_def, entry.consts.size(), in_def,
                   with_leaves(entry.consts, leaves));
  if (!placement)
    return "no argument is committed and no sharding is given: the program runs whole on the "
           "default device\n" +
           entry.program->str() + "\n";
  const SplitConstants& split = split_constants(entry);
  placement = placement_of(state, *split.program, entry.out_def, split.consts.size(), in_def,
                           with_leaves(split.consts, leaves));
  return explain(partition_program(*split.program, *placement), placement->mesh);
}

ClosedJaxpr jit_lower(JitState&, const FlatFn& fn, std::span<const Array> leaves, bool optimized) {
  Program traced = trace_to_program(fn, types_of(leaves), "jit");
  if (!optimized) return ClosedJaxpr(std::make_shared<const Program>(std::move(traced)));
  return ClosedJaxpr(std::make_shared<const Program>(Compiled(traced).program()));
}

}  // namespace transform_detail
}  // namespace spmd

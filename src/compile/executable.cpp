// Running optimised Programs on the host.
#include "compile/executable.h"

#include "backends/cpu/buffer_view.h"
#include "backends/cpu/parallel.h"
#include "compile/donation.h"
#include "compile/fusion.h"
#include "compile/passes.h"
#include "core/env.h"
#include "prims/primitive.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace spmd {

namespace {

struct ProfileTable {
  std::atomic<bool> on{false};
  std::mutex mu;
  std::map<std::string, EquationProfileEntry> entries;
};

void print_equation_profile() {
  const std::vector<EquationProfileEntry> entries = equation_profile();
  double cpu = 0, wall = 0;
  for (const EquationProfileEntry& e : entries) {
    cpu += e.cpu_seconds;
    wall += e.wall_seconds;
  }
  std::fprintf(stderr, "equation profile: %.3f s CPU, %.3f s wall\n", cpu, wall);
  for (const EquationProfileEntry& e : entries)
    std::fprintf(stderr, "%9lld  %8.3f s CPU %5.1f %%  %8.3f s wall  %s\n",
                 static_cast<long long>(e.count), e.cpu_seconds,
                 cpu > 0 ? 100 * e.cpu_seconds / cpu : 0.0, e.wall_seconds, e.equation.c_str());
}

// Never destroyed: the table is printed at exit, when the device threads may still record.
ProfileTable& profile_table() {
  static ProfileTable* table = [] {
    auto* made = new ProfileTable();
    if (env_int("SPMD_PROFILE_EQUATIONS", 0, 1).value_or(0) == 1) {
      made->on = true;
      std::atexit(print_equation_profile);
    }
    return made;
  }();
  return *table;
}

// The calling thread's CPU time and the wall time, when an equation starts.
struct ProfileStart {
  double cpu, wall;
  static ProfileStart now() {
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    const auto wall = std::chrono::steady_clock::now().time_since_epoch();
    return {double(t.tv_sec) + 1e-9 * double(t.tv_nsec),
            std::chrono::duration<double>(wall).count()};
  }
};

void record_equation(const Program& p, const Equation& e, const ProfileStart& start) {
  const ProfileStart end = ProfileStart::now();
  std::string key = e.primitive->name;
  for (int v : e.outputs) {
    key += ' ';
    key += p.types[size_t(v)].str();
  }
  ProfileTable& table = profile_table();
  std::lock_guard lock(table.mu);
  EquationProfileEntry& entry = table.entries[key];
  entry.equation = key;
  ++entry.count;
  entry.cpu_seconds += end.cpu - start.cpu;
  entry.wall_seconds += end.wall - start.wall;
}

}  // namespace

void set_equation_profiling(bool on) {
  profile_table().on.store(on, std::memory_order_relaxed);
}

std::vector<EquationProfileEntry> equation_profile() {
  ProfileTable& table = profile_table();
  std::vector<EquationProfileEntry> out;
  {
    std::lock_guard lock(table.mu);
    for (const auto& [key, entry] : table.entries) out.push_back(entry);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.cpu_seconds > b.cpu_seconds; });
  return out;
}

void clear_equation_profile() {
  ProfileTable& table = profile_table();
  std::lock_guard lock(table.mu);
  table.entries.clear();
}

namespace {

thread_local int t_program_depth = 0;

}  // namespace

bool inside_program() {
  return t_program_depth > 0;
}

ProgramScope::ProgramScope() {
  ++t_program_depth;
}

ProgramScope::~ProgramScope() {
  --t_program_depth;
}

namespace {

// Whether `e` only retypes its operand: one operand, one result of the operand's shape, dtype
// and weak type that shares the operand's buffer (output_aliases_input and not eager: pvary, a
// reshape to the same shape). The types may differ in what no kernel reads (vma, sharding).
bool only_retypes(const Program& p, const Equation& e) {
  const Primitive& prim = *e.primitive;
  if (!prim.output_aliases_input || prim.eager || e.inputs.size() != 1 || e.outputs.size() != 1)
    return false;
  const AbstractValue& in = p.type_of(e.inputs[0]);
  const AbstractValue& out = p.types[size_t(e.outputs[0])];
  return in.shape == out.shape && in.dtype == out.dtype && in.weak_type == out.weak_type;
}

// `p` without the equations that only retype their operand, whose readers read the operand
// (a variable or a literal) instead: an Array less per run, and an equation less to dispatch (the
// pvary in front of every psum chained in a checking shard_map). One is kept where its own type
// is seen: a program output, or an operand of an eager equation (an eager rule is given its
// operands' Arrays). Nothing when no equation goes.
std::optional<Program> without_retypes(const Program& p) {
  std::vector<bool> seen(p.types.size(), false);
  for (const Atom& a : p.outputs)
    if (!a.is_literal()) seen[size_t(a.var)] = true;
  for (const Equation& e : p.equations)
    if (e.primitive->eager)
      for (const Atom& a : e.inputs)
        if (!a.is_literal()) seen[size_t(a.var)] = true;
  std::vector<Atom> source(p.types.size());
  for (size_t v = 0; v < source.size(); ++v) source[v] = Atom::of_var(int(v));
  auto read = [&](const Atom& a) { return a.is_literal() ? a : source[size_t(a.var)]; };
  std::vector<Equation> kept;
  for (const Equation& e : p.equations) {
    if (only_retypes(p, e) && !seen[size_t(e.outputs[0])]) {
      source[size_t(e.outputs[0])] = read(e.inputs[0]);
      continue;
    }
    kept.push_back(e);
    for (Atom& a : kept.back().inputs) a = read(a);
  }
  if (kept.size() == p.equations.size()) return std::nullopt;
  Program q;
  q.types = p.types;
  q.constvars = p.constvars;
  q.consts = p.consts;
  q.invars = p.invars;
  q.equations = std::move(kept);
  q.outputs = p.outputs;
  return q;
}

}  // namespace

Executable::Executable(const Program& program, bool optimized,
                       const std::vector<std::pair<std::string, int64_t>>& axes)
    : program_(optimized ? optimize(program, axes) : program), retyped_(without_retypes(program_)) {
  const Program& p = runs();
  std::vector<int> last_use(p.types.size(), -1);
  for (size_t i = 0; i < p.equations.size(); ++i)
    for (const Atom& a : p.equations[i].inputs)
      if (!a.is_literal()) last_use[size_t(a.var)] = int(i);
  for (const Atom& a : p.outputs)
    if (!a.is_literal()) last_use[size_t(a.var)] = int(p.equations.size());
  release_after_.resize(p.equations.size());
  for (size_t v = 0; v < last_use.size(); ++v)
    if (last_use[v] >= 0 && last_use[v] < int(p.equations.size()))
      release_after_[size_t(last_use[v])].push_back(int(v));
}

namespace {

// The operand whose buffer an output of elementwise equation `e` can take over, or -1: a value
// whose buffer this run owns (a donated argument, or a result the run allocated or already
// wrote over one) that dies at `e`, has the output's shape and element size, that no other
// Array shares and that no earlier output of `e` (listed in `taken`) took.
int buffer_donor(const Equation& e, const AbstractValue& out, std::span<const Array> env,
                 const std::vector<bool>& owned, const std::vector<int>& dying,
                 std::span<const int> taken) {
  for (const Atom& a : e.inputs) {
    if (a.is_literal() || !owned[size_t(a.var)]) continue;
    if (std::find(taken.begin(), taken.end(), a.var) != taken.end()) continue;
    if (e.primitive->name == "fusion" &&
        !fusion_may_write_over(e.params, size_t(&a - e.inputs.data())))
      continue;
    if (std::find(dying.begin(), dying.end(), a.var) == dying.end()) continue;
    const std::shared_ptr<ArrayImpl>& x = env[size_t(a.var)].impl();
    if (!(x->aval.shape == out.shape) || itemsize(x->aval.dtype) != itemsize(out.dtype)) continue;
    if (x.use_count() == 1 && x->buffer && x->buffer.use_count() == 1) return a.var;
  }
  return -1;
}

}  // namespace

// The per-run working vectors, kept per thread between runs so a cached call allocates only its
// results. Runs nest on one thread (an eager rule runs another Executable), hence a stack.
struct RunScratch {
  std::vector<Array> env;
  std::vector<bool> owned;
  std::vector<Array> ins;
  std::vector<Operand> operands;
  std::vector<Result> results;
  std::vector<int> donors;  // per output of the equation running
  // A run with donated arguments: per variable, the donated argument (its variable) whose buffer
  // it is to take (the result donation_aliases pairs with that argument), else -1; the donated
  // buffers, each with its argument; and those whose last holder has died, free for their result.
  std::vector<int> backs;
  std::vector<std::pair<const Buffer*, int>> donated_buffers;
  std::vector<std::pair<int, std::shared_ptr<Buffer>>> spare;
  // ArrayImpls of values that died in a run with nothing else holding them, emptied, for the
  // next equations' results: assigning a type to one reuses its shape's and vma's storage, where
  // a new one allocates both and itself (three allocations per result of a small collective).
  std::vector<std::shared_ptr<ArrayImpl>> free_impls;
};

namespace {

class ScratchLease {
 public:
  explicit ScratchLease(size_t num_vars) {
    if (depth_ == stack_.size()) stack_.push_back(std::make_unique<RunScratch>());
    scratch_ = stack_[depth_++].get();
    scratch_->env.resize(num_vars);
    scratch_->owned.assign(num_vars, false);
    scratch_->backs.clear();
    scratch_->donated_buffers.clear();
  }
  ~ScratchLease() {
    // Drop every reference the run still holds, so buffers go back at once.
    for (Array& x : scratch_->env) x = Array();
    scratch_->ins.clear();
    scratch_->spare.clear();
    --depth_;
  }
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;
  RunScratch& operator*() const { return *scratch_; }

 private:
  static thread_local std::vector<std::unique_ptr<RunScratch>> stack_;
  static thread_local size_t depth_;
  RunScratch* scratch_;
};

thread_local std::vector<std::unique_ptr<RunScratch>> ScratchLease::stack_;
thread_local size_t ScratchLease::depth_ = 0;

// At most this many emptied ArrayImpls are kept per scratch.
constexpr size_t kFreeImpls = 16;

// A concrete array of `type` over `buffer`, as make_array makes it, in a kept ArrayImpl if any.
Array fresh_array(RunScratch& s, const AbstractValue& type, std::shared_ptr<Buffer> buffer) {
  if (s.free_impls.empty()) return make_array(type, std::move(buffer));
  std::shared_ptr<ArrayImpl> impl = std::move(s.free_impls.back());
  s.free_impls.pop_back();
  impl->aval = type;
  impl->aval.sharding.reset();
  impl->buffer = std::move(buffer);
  return Array(std::move(impl));
}

// Lets go of the run's reference to `x`; an ArrayImpl nothing else holds is emptied (its data
// freed) and kept for fresh_array.
void release_value(RunScratch& s, Array& x) {
  std::shared_ptr<ArrayImpl> impl = x.impl();
  x = Array();
  if (!impl || impl.use_count() != 1 || s.free_impls.size() >= kFreeImpls) return;
  impl->buffer.reset();
  impl->sharded.reset();
  impl->trace.reset();
  impl->trace_slot = -1;
  impl->deleted = false;
  s.free_impls.push_back(std::move(impl));
}

// Pairs the donated arguments with results (donation_aliases) and notes their buffers. A result
// that is itself an argument keeps that argument's buffer.
void plan_aliases(const Program& p, RunScratch& s, const std::vector<bool>& donated) {
  const std::vector<int> aliases = donation_aliases(p.in_types(), donated, p.out_types());
  for (size_t i = 0; i < aliases.size(); ++i) {
    if (aliases[i] < 0) continue;
    const int arg = p.invars[i];
    const Atom& out = p.outputs[size_t(aliases[i])];
    const std::shared_ptr<ArrayImpl>& x = s.env[size_t(arg)].impl();
    if (out.is_literal() || !s.owned[size_t(arg)] || !x || !x->buffer) continue;
    if (s.backs.empty()) s.backs.assign(s.env.size(), -1);
    s.backs[size_t(out.var)] = arg;
    s.donated_buffers.emplace_back(x->buffer.get(), arg);
  }
}

// Keeps the buffer of `v`, dying now, for the result paired with its argument, when it is a
// donated argument's buffer that nothing else holds.
void keep_spare(RunScratch& s, int v) {
  const std::shared_ptr<ArrayImpl>& x = s.env[size_t(v)].impl();
  if (!s.owned[size_t(v)] || !x || x.use_count() != 1 || !x->buffer || x->buffer.use_count() != 1)
    return;
  for (const auto& [buffer, arg] : s.donated_buffers)
    if (buffer == x->buffer.get()) {
      s.spare.emplace_back(arg, std::move(x->buffer));
      return;
    }
}

// `x`, or a copy of it when its buffer is a view of another's (backends/cpu/buffer_view.h): a
// view would keep the whole of its parent alive, and a caller donating it could write over the
// parent, so views do not leave a run.
Array without_view(const Array& x) {
  const std::shared_ptr<ArrayImpl>& impl = x.impl();
  if (!impl || !impl->buffer || !cpu::view_source(impl->buffer)) return x;
  auto copy = Buffer::allocate(impl->buffer->nbytes());
  std::memcpy(copy->data(), impl->buffer->data(), impl->buffer->nbytes());
  return make_array(impl->aval, std::move(copy));
}

// The free buffer of the donated argument paired with result `v`, if it has the result's size.
std::shared_ptr<Buffer> take_spare(RunScratch& s, int v, const AbstractValue& type) {
  if (s.backs.empty() || s.backs[size_t(v)] < 0) return nullptr;
  for (auto it = s.spare.begin(); it != s.spare.end(); ++it)
    if (it->first == s.backs[size_t(v)] && it->second->nbytes() == size_t(type.nbytes())) {
      std::shared_ptr<Buffer> buffer = std::move(it->second);
      s.spare.erase(it);
      return buffer;
    }
  return nullptr;
}

}  // namespace

std::vector<Array> Executable::run(std::span<const Array> args) const {
  ScratchLease lease(program_.types.size());
  RunScratch& s = *lease;
  for (size_t i = 0; i < args.size(); ++i) s.env[size_t(program_.invars[i])] = args[i];
  return execute(s);
}

std::vector<Array> Executable::run(std::vector<Array> args,
                                   const std::vector<bool>& donated) const {
  ScratchLease lease(program_.types.size());
  RunScratch& s = *lease;
  for (size_t i = 0; i < args.size(); ++i) {
    s.env[size_t(program_.invars[i])] = std::move(args[i]);
    s.owned[size_t(program_.invars[i])] = i < donated.size() && donated[i];
  }
  plan_aliases(runs(), s, donated);
  return execute(s);
}

std::vector<Array> Executable::execute(RunScratch& s) const {
  ProgramScope scope;
  const Program& p = runs();
  std::vector<Array>& env = s.env;
  std::vector<bool>& owned = s.owned;
  std::vector<Array>& ins = s.ins;
  std::vector<Operand>& operands = s.operands;
  std::vector<Result>& results = s.results;
  std::vector<int>& donors = s.donors;
  for (size_t i = 0; i < p.constvars.size(); ++i) env[size_t(p.constvars[i])] = p.consts[i];
  cpu::DenormalsAreZero ftz;
  static const Primitive* const fusion = &primitive("fusion");
  const bool profiling = profile_table().on.load(std::memory_order_relaxed);
  for (size_t i = 0; i < p.equations.size(); ++i) {
    const Equation& e = p.equations[i];
    const Primitive& prim = *e.primitive;
    const ProfileStart start = profiling ? ProfileStart::now() : ProfileStart{};
    // Decided before `ins` takes its own references to the operands.
    ins.clear();
    donors.clear();
    if (prim.elementwise || &prim == fusion)
      for (int v : e.outputs)
        donors.push_back(
            buffer_donor(e, p.types[size_t(v)], env, owned, release_after_[i], donors));
    donors.resize(e.outputs.size(), -1);
    for (const Atom& a : e.inputs) ins.push_back(a.is_literal() ? a.literal : env[size_t(a.var)]);
    if (prim.eager) {
      std::vector<Array> outs = prim.eager(ins, e.params);
      for (size_t k = 0; k < outs.size(); ++k) env[size_t(e.outputs[k])] = std::move(outs[k]);
    } else if (prim.output_aliases_input) {
      env[size_t(e.outputs[0])] =
          fresh_array(s, p.types[size_t(e.outputs[0])], concrete_buffer(ins[0], prim.name.c_str()));
    } else {
      operands.clear();
      results.clear();
      for (const Array& x : ins) {
        const std::shared_ptr<Buffer>& buffer = concrete_buffer(x, prim.name.c_str());
        operands.push_back({buffer->data(), &x.impl()->aval, &buffer});
      }
      for (size_t k = 0; k < e.outputs.size(); ++k) {
        const int v = e.outputs[k], donor = donors[k];
        const AbstractValue& type = p.types[size_t(v)];
        if (prim.allocates_outputs) {
          // The donated argument's buffer paired with the result is offered as storage too;
          // a kernel that hands over a buffer of its own replaces it.
          std::shared_ptr<Buffer> spare = take_spare(s, v, type);
          void* storage = spare ? spare->data() : nullptr;
          Array out = fresh_array(s, type, std::move(spare));
          owned[size_t(v)] = false;
          results.push_back({storage, &out.impl()->aval, &out.impl()->buffer});
          env[size_t(v)] = std::move(out);
          continue;
        }
        // The buffer of the donated argument paired with this result comes first, so the
        // result lands where JAX puts it.
        std::shared_ptr<Buffer> buffer = take_spare(s, v, type);
        if (!buffer && donor >= 0) buffer = env[size_t(donor)].impl()->buffer;
        Array out = buffer ? fresh_array(s, type, std::move(buffer))
                           : make_uninitialized(type, prim.name.c_str());
        // Allocated here or written over an owned buffer: later elementwise equations may write
        // over it once it dies, so a chain of them holds one buffer instead of several.
        owned[size_t(v)] = true;
        results.push_back({out.impl()->buffer->data(), &out.impl()->aval});
        env[size_t(v)] = std::move(out);
      }
      prim.cpu_kernel(KernelArgs{operands, results, e.params});
    }
    ins.clear();  // a value dying here is then held by `env` alone
    for (int v : release_after_[i]) {
      if (!s.donated_buffers.empty()) keep_spare(s, v);
      release_value(s, env[size_t(v)]);
    }
    if (profiling) record_equation(p, e, start);
  }
  std::vector<Array> outputs;
  outputs.reserve(p.outputs.size());
  for (const Atom& a : p.outputs)
    outputs.push_back(a.is_literal() ? a.literal : without_view(env[size_t(a.var)]));
  return outputs;
}

}  // namespace spmd

#include "compile/partition.h"

#include <spmd/config.h>
#include <spmd/error.h>

#include "compile/passes.h"
#include "core/lru_cache.h"
#include "ir/primitive.h"
#include "runtime/devices.h"
#include "sharding/param_traits.h"

#include <algorithm>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

namespace spmd {
namespace {

// One thing that asks for devices: a committed argument, an in/out sharding or a constraint.
struct Request {
  std::shared_ptr<const Sharding> sharding;
  // How JAX's message names it before its device ids: "argument x of add with shape
  // float32[16,16] and", "explicit output sharding", "sharding_constraint inside jit"; empty for
  // an in_sharding, which JAX names by the first argument on its devices.
  std::string what;
  bool in_program = false;  // a sharding_constraint or shard_map of the program
};

std::string ids_text(const std::vector<Device>& devices) {
  std::string s = "[";
  for (size_t i = 0; i < devices.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(devices[i].id);
  }
  return s + "]";
}

std::string typed_shape(const AbstractValue& t) {
  std::string s(dtype_name(t.dtype));
  s += "[";
  for (int d = 0; d < t.shape.ndim(); ++d) {
    if (d) s += ",";
    s += std::to_string(t.shape[d]);
  }
  return s + "]";
}

// JAX's DeviceAssignmentMismatch text of a request: `what` and its devices. JAX counts an
// in_sharding as an argument's sharding and names the first argument on the same devices, else
// the kind itself (ARG_SHARDING).
std::string mismatch_text(const Request& r, const std::function<std::string(size_t)>& arg_text,
                          std::span<const Array> args) {
  std::string what = r.what;
  for (size_t i = 0; what.empty() && i < args.size(); ++i)
    if (args[i].sharding()->device_list() == r.sharding->device_list()) what = arg_text(i) + " and";
  if (what.empty()) what = "ARG_SHARDING";
  return what + " with device ids " + ids_text(r.sharding->device_list()) + " on platform CPU";
}

// Whether a and b split a `shape` array into the same blocks in the same device positions, as
// JAX compares a jit sharding with an argument's (devices aside).
bool same_tiling(const Sharding& a, const Sharding& b, const Shape& shape) {
  if (a.num_devices() != b.num_devices()) return false;
  const std::vector<ShardSlot> la = a.layout(shape), lb = b.layout(shape);
  for (size_t i = 0; i < la.size(); ++i)
    if (la[i].index != lb[i].index) return false;
  return true;
}

void check_in_sharding(const Sharding& given, const Array& arg) {
  const AbstractValue& t = aval_of(arg);
  if (same_tiling(given, *arg.sharding(), t.shape)) return;
  throw ShardingError(
      "[jit] Sharding passed to jit does not match the sharding on the respective arg. Got jit "
      "sharding: " +
      given.repr() + ",\narg sharding: " + arg.sharding()->repr() +
      " for arg type: " + typed_shape(t));
}

std::optional<ValueSplit> split_on(const Sharding& sharding, const Mesh& mesh, int rank) {
  if (auto* named = dynamic_cast<const NamedSharding*>(&sharding))
    if (named->mesh() == mesh) return ValueSplit::of(named->spec(), rank, true);
  if (mesh.axis_names().empty() && sharding.device_list() == mesh.devices())
    return ValueSplit::replicated(rank);
  return std::nullopt;
}

// The mesh of the first request: its own for a NamedSharding, one device without axes for a
// sharding on one device.
Mesh mesh_of(const Sharding& sharding) {
  if (auto* named = dynamic_cast<const NamedSharding*>(&sharding)) return named->mesh();
  return Mesh(sharding.device_list(), Shape{}, {});
}

void add_constraints(const Program& given, std::vector<Request>& requests) {
  // Calls inlined and control-flow bodies looked into: a constraint inside a nested jit or a
  // loop body, or a nested jit's in/out shardings, ask for devices too.
  const Program program = inline_calls(given);
  for (const Equation& e : program.equations) {
    const ShardingRule rule = sharding_rule_of(program, e);
    if (std::optional<Mesh> mesh = fixed_mesh(rule))
      requests.push_back({std::make_shared<NamedSharding>(*mesh, PartitionSpec()),
                          e.primitive->name + " inside jit", true});
    for (const ShardingRule::Body& body : rule.bodies) add_constraints(*body.program, requests);
  }
}

// Only values inside a computation may be split unevenly (the partitioner pads them): JAX
// raises its IndivisibleError for in_shardings and out_shardings that do not divide, which jit
// reports as its own.
void check_even(const Sharding& sharding, const Shape& shape) {
  try {
    sharding.check_shape(shape, "in_shardings or out_shardings");
  } catch (const ShardingError& e) {
    const std::string message = e.what();
    throw ShardingError("[jit] " + message.substr(message.find("] ") + 2));
  }
}

void check_even(const Program& program,
                std::span<const std::shared_ptr<const Sharding>> in_shardings,
                std::span<const std::shared_ptr<const Sharding>> out_shardings) {
  const std::vector<AbstractValue> in_types = program.in_types(), out_types = program.out_types();
  for (size_t i = 0; i < in_shardings.size() && i < in_types.size(); ++i)
    if (in_shardings[i]) check_even(*in_shardings[i], in_types[i].shape);
  for (size_t i = 0; i < out_shardings.size() && i < out_types.size(); ++i)
    if (out_shardings[i]) check_even(*out_shardings[i], out_types[i].shape);
}

using Split = std::vector<std::vector<std::string>>;

bool same_device_set(std::vector<Device> a, std::vector<Device> b) {
  auto by_id = [](const Device& x, const Device& y) { return x.id < y.id; };
  std::sort(a.begin(), a.end(), by_id);
  std::sort(b.begin(), b.end(), by_id);
  return a == b;
}

// The index of each device's block under `sharding`, by device id.
std::map<int, std::vector<Slice>> blocks_by_device(const Sharding& sharding, const Shape& shape) {
  std::map<int, std::vector<Slice>> out;
  for (const ShardSlot& slot : sharding.layout(shape)) out[slot.device.id] = slot.index;
  return out;
}

// For each position of the mesh's devices, a position whose device holds (under `from`) the
// block that `split` puts there, each position the source of one: the positions that hold
// their block first. Nullopt when `from` does not hold every block `split` asks for as often.
std::optional<std::vector<int>> sources(const Sharding& from, const Mesh& mesh, const Split& split,
                                        const Shape& shape) {
  const std::map<int, std::vector<Slice>> have = blocks_by_device(from, shape);
  const std::vector<ShardSlot> want =
      NamedSharding(mesh, ValueSplit{split, {}}.spec()).layout(shape);
  const std::vector<Device>& devices = mesh.devices();
  std::vector<int> source(devices.size(), -1);
  std::vector<bool> used(devices.size(), false);
  auto holds = [&](size_t q, size_t p) {
    auto it = have.find(devices[q].id);
    return it != have.end() && it->second == want[p].index;
  };
  for (size_t p = 0; p < devices.size(); ++p)
    if (holds(p, p)) source[p] = int(p), used[p] = true;
  for (size_t p = 0; p < devices.size(); ++p) {
    if (source[p] >= 0) continue;
    size_t q = 0;
    while (q < devices.size() && (used[q] || !holds(q, p))) ++q;
    if (q == devices.size()) return std::nullopt;
    source[p] = int(q);
    used[q] = true;
  }
  return source;
}

// Every split of a `shape` value over the axes of `mesh` from `axis` on: each axis on one dim
// (in any order among the dim's axes) or on none, the axes of a dim dividing it.
void splits_over(const Mesh& mesh, const Shape& shape, size_t axis, Split& split,
                 std::vector<Split>& out) {
  if (axis == mesh.axis_names().size()) {
    out.push_back(split);
    return;
  }
  splits_over(mesh, shape, axis + 1, split, out);
  const std::string& name = mesh.axis_names()[axis];
  for (size_t d = 0; d < split.size(); ++d)
    for (size_t at = 0; at <= split[d].size(); ++at) {
      split[d].insert(split[d].begin() + std::ptrdiff_t(at), name);
      int64_t n = 1;
      for (const std::string& a : split[d]) n *= mesh.axis_size(a);
      if (shape[int(d)] % n == 0) splits_over(mesh, shape, axis + 1, split, out);
      split[d].erase(split[d].begin() + std::ptrdiff_t(at));
    }
}

size_t moves(const std::vector<int>& source) {
  size_t n = 0;
  for (size_t p = 0; p < source.size(); ++p) n += source[p] != int(p);
  return n;
}

// The split of an argument on the mesh when its sharding (or its in_sharding, `given`) is over
// the mesh's devices in another order or arrangement: the split that lays the blocks out as
// the in_sharding does, else the one that moves the fewest of the argument's blocks. Arguments
// whose blocks are not all where the split puts them are held where they are and moved by the
// program's first ppermute, which explain lists and implicit_resharding governs.
void arrange(Placement& p, size_t i, const Array& arg, const Sharding* given) {
  const Sharding& from = *arg.sharding();
  const Shape& shape = arg.shape();
  if (!same_device_set(from.device_list(), p.mesh.devices())) return;
  std::vector<Split> candidates;
  Split none(size_t(shape.ndim()));
  if (p.in[i])
    candidates.push_back(p.in[i]->dims);
  else
    splits_over(p.mesh, shape, 0, none, candidates);
  std::optional<Split> best;
  std::vector<int> best_source;
  for (const Split& split : candidates) {
    if (given && !p.in[i]) {
      const std::optional<std::vector<int>> as_given = sources(*given, p.mesh, split, shape);
      if (!as_given || moves(*as_given) != 0) continue;
    }
    std::optional<std::vector<int>> source = sources(from, p.mesh, split, shape);
    if (source && (!best || moves(*source) < moves(best_source))) {
      best = split;
      best_source = std::move(*source);
    }
  }
  if (!best) return;
  p.in[i] = ValueSplit{*best, std::vector<bool>(best->size(), true)};
  if (moves(best_source) != 0) p.held[i] = HeldArgument{arg.sharding(), best_source, !given};
}

// The elements of `a` that `b` holds too.
int64_t overlap(const std::vector<Slice>& a, const std::vector<Slice>& b) {
  int64_t n = 1;
  for (size_t d = 0; d < a.size(); ++d)
    n *= std::max<int64_t>(0, std::min(a[d].stop, b[d].stop) - std::max(a[d].start, b[d].start));
  return n;
}

// The most bytes a device receives when the blocks of a `t` value laid out by `from` are copied
// to those of `to`: the part of its new block that it does not hold already.
int64_t copied_bytes(const Sharding& from, const Sharding& to, const AbstractValue& t) {
  const std::map<int, std::vector<Slice>> have = blocks_by_device(from, t.shape);
  int64_t most = 0;
  for (const ShardSlot& slot : to.layout(t.shape)) {
    auto it = have.find(slot.device.id);
    const int64_t held = it == have.end() ? 0 : overlap(slot.index, it->second);
    most = std::max(most, overlap(slot.index, slot.index) - held);
  }
  return most * int64_t(itemsize(t.dtype));
}

}  // namespace

// The first `num_constants` inputs of `program` (arrays it closed over) that an equation
// moving data along a dim (slice, pad, rev, concatenate: its rule's shifts) reads through
// constant expressions: they arrive whole, as JAX's embedded constants, and the partitioner
// computes such an equation's block in place instead of moving halos.
namespace {
std::vector<size_t> constants_read_whole(const Program& program, size_t num_constants) {
  std::vector<bool> seeds(program.types.size(), false);
  for (size_t i = 0; i < num_constants && i < program.invars.size(); ++i)
    seeds[size_t(program.invars[i])] = true;
  const std::vector<bool> constant = constant_expressions(program, seeds);
  std::vector<bool> read(program.types.size(), false);
  for (size_t i = program.equations.size(); i-- > 0;) {
    const Equation& e = program.equations[i];
    if (e.outputs.size() != 1 || !constant[size_t(e.outputs[0])]) continue;
    if (!read[size_t(e.outputs[0])] && sharding_rule_of(program, e).shifts.empty()) continue;
    for (const Atom& a : e.inputs)
      if (!a.is_literal()) read[size_t(a.var)] = true;
  }
  std::vector<size_t> whole;
  for (size_t i = 0; i < num_constants && i < program.invars.size(); ++i)
    if (read[size_t(program.invars[i])]) whole.push_back(i);
  return whole;
}
}  // namespace

std::optional<Placement> place(const Program& program, std::span<const Array> args,
                               std::span<const std::shared_ptr<const Sharding>> in_shardings,
                               std::span<const std::shared_ptr<const Sharding>> out_shardings,
                               const std::string& api, std::span<const std::string> arg_names,
                               bool committed_binds, size_t num_constants) {
  std::vector<Request> requests;
  const std::function<std::string(size_t)> arg_text = [&](size_t i) {
    std::string name = i < arg_names.size() ? arg_names[i] : "args[" + std::to_string(i) + "]";
    return "argument " + name + " of " + api + " with shape " + typed_shape(aval_of(args[i]));
  };
  auto binds = [&](size_t i) {
    return committed_binds && i >= num_constants && args[i].committed();
  };
  check_even(program, in_shardings, out_shardings);
  for (size_t i = 0; i < args.size(); ++i) {
    if (!binds(i)) continue;
    // An argument with an in_sharding moves to its devices once its blocks agree with it.
    if (i < in_shardings.size() && in_shardings[i])
      check_in_sharding(*in_shardings[i], args[i]);
    else
      requests.push_back({args[i].sharding(), arg_text(i) + " and"});
  }
  for (size_t i = 0; i < in_shardings.size(); ++i)
    if (in_shardings[i]) requests.push_back({in_shardings[i], ""});
  for (size_t i = 0; i < out_shardings.size(); ++i)
    if (out_shardings[i]) requests.push_back({out_shardings[i], "explicit output sharding"});
  add_constraints(program, requests);
  if (requests.empty()) return std::nullopt;
  const std::span<const Array> named_args = args.subspan(std::min(num_constants, args.size()));
  auto named_arg_text = [&](size_t i) { return arg_text(i + args.size() - named_args.size()); };
  for (size_t i = 1; i < requests.size(); ++i)
    if (requests[i].sharding->device_list() != requests[0].sharding->device_list())
      throw ShardingError("[" + api + "] Received incompatible devices for jitted computation. Got " +
                          mismatch_text(requests[0], named_arg_text, named_args) + " and " +
                          mismatch_text(requests[i], named_arg_text, named_args));

  // The program's own meshes name the axes its constraints and shard_maps use; arguments on
  // the same devices under other axis names are resharded to it.
  const Request* first = &requests[0];
  for (const Request& r : requests)
    if (r.in_program) {
      first = &r;
      break;
    }
  Placement p{mesh_of(*first->sharding), false, {}, {}, {}, {}};
  p.single_device = p.mesh.axis_names().empty();
  const std::vector<AbstractValue> in_types = program.in_types();
  p.in.resize(in_types.size());
  p.held.resize(in_types.size());
  p.arrives.resize(in_types.size());
  for (size_t i = 0; i < args.size() && i < in_types.size(); ++i) {
    const Sharding* given = i < in_shardings.size() ? in_shardings[i].get() : nullptr;
    const Sharding* s = given ? given : binds(i) ? args[i].sharding().get() : nullptr;
    if (s) p.in[i] = split_on(*s, p.mesh, in_types[i].shape.ndim());
    if (!binds(i)) continue;
    if (!p.single_device && !(given ? *given == *args[i].sharding() : bool(p.in[i])))
      arrange(p, i, args[i], given);
    if (!p.held[i]) p.arrives[i] = args[i].sharding();
  }
  for (size_t i : constants_read_whole(program, num_constants))
    if (!p.single_device) p.in[i] = ValueSplit{Split(size_t(in_types[i].shape.ndim())), {}};
  const std::vector<AbstractValue> out_types = program.out_types();
  p.out.resize(out_types.size());
  for (size_t i = 0; i < out_shardings.size() && i < out_types.size(); ++i)
    if (out_shardings[i]) p.out[i] = split_on(*out_shardings[i], p.mesh, out_types[i].shape.ndim());
  return p;
}

namespace {

struct PartitionKey {
  ProgramRef program;
  Placement placement;
};

bool same_splits(const std::vector<std::optional<ValueSplit>>& a,
                 const std::vector<std::optional<ValueSplit>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].has_value() != b[i].has_value() || (a[i] && !(*a[i] == *b[i]))) return false;
  return true;
}

bool same_held(const std::vector<std::optional<HeldArgument>>& a,
               const std::vector<std::optional<HeldArgument>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].has_value() != b[i].has_value() ||
        (a[i] && (!(*a[i]->held == *b[i]->held) || a[i]->source != b[i]->source ||
                  a[i]->implicit != b[i]->implicit)))
      return false;
  return true;
}

bool same_arrivals(const std::vector<std::shared_ptr<const Sharding>>& a,
                   const std::vector<std::shared_ptr<const Sharding>>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const auto& x, const auto& y) { return x == y || (x && y && *x == *y); });
}

struct PartitionKeyEqual {
  bool operator()(const PartitionKey& a, const PartitionKey& b) const {
    return (a.program == b.program || *a.program == *b.program) &&
           a.placement.mesh == b.placement.mesh &&
           a.placement.single_device == b.placement.single_device &&
           same_splits(a.placement.in, b.placement.in) &&
           same_splits(a.placement.out, b.placement.out) &&
           same_held(a.placement.held, b.placement.held) &&
           same_arrivals(a.placement.arrives, b.placement.arrives);
  }
};

// The blocks of an argument held where they are (HeldArgument), for the launch: each device of
// the mesh, in the mesh's order, with the block it holds under the argument's own sharding.
class HeldSharding : public Sharding {
 public:
  HeldSharding(std::vector<Device> devices, std::shared_ptr<const Sharding> held)
      : devices_(std::move(devices)), held_(std::move(held)) {}

  const std::vector<Device>& device_list() const override { return devices_; }
  std::vector<ShardSlot> layout(const Shape& global) const override {
    std::map<int, ShardSlot> by_id;
    for (ShardSlot& slot : held_->layout(global)) by_id[slot.device.id] = std::move(slot);
    std::vector<ShardSlot> out;
    for (const Device& d : devices_) out.push_back(by_id.at(d.id));
    return out;
  }
  bool is_fully_replicated() const override { return held_->is_fully_replicated(); }
  std::string repr() const override { return held_->repr(); }
  bool equals(const Sharding& other) const override {
    const auto* o = dynamic_cast<const HeldSharding*>(&other);
    return o && o->devices_ == devices_ && *o->held_ == *held_;
  }

 protected:
  std::optional<std::string> shape_error(const Shape&) const override { return std::nullopt; }

 private:
  std::vector<Device> devices_;
  std::shared_ptr<const Sharding> held_;
};

struct PartitionKeyHash {
  size_t operator()(const PartitionKey& k) const {
    size_t h = k.program->hash();
    hash_combine(h, hash_mesh(k.placement.mesh));
    for (const auto* splits : {&k.placement.in, &k.placement.out})
      for (const std::optional<ValueSplit>& s : *splits)
        hash_combine(h, s ? hash_spec(s->spec()) + 1 : 0);
    for (const std::optional<HeldArgument>& held : k.placement.held)
      hash_combine(h, held ? held->source.size() + 1 : 0);
    return h;
  }
};

}  // namespace

std::string explain(const PartitionedProgram& p, const Mesh& mesh) {
  std::string s = "mesh: " + mesh.str() + "\ninputs:";
  for (const PartitionSpec& spec : p.in_specs) {
    s += ' ';
    s += spec.repr();
  }
  s += "\noutputs:";
  for (const PartitionSpec& spec : p.out_specs) {
    s += ' ';
    s += spec.repr();
  }
  s += "\nper-device program:\n" + p.body.str() + "\ncollectives:";
  if (p.collectives.empty()) s += " none";
  for (size_t i = 0; i < p.collectives.size(); ++i) {
    const InsertedCollective& c = p.collectives[i];
    s += "\n  " + std::to_string(i + 1) + ". " + c.collective + ": " + c.cause +
         "; each device sends " + std::to_string(c.bytes_sent) + " bytes" +
         (c.implicit ? " (implicit resharding)" : "");
  }
  return s + "\n";
}

namespace {

// The account of a program's implicit resharding for config::implicit_resharding, or empty
// when the program has none.
std::string resharding_account(const PartitionedProgram& p, const Mesh& mesh) {
  for (const InsertedCollective& c : p.collectives)
    if (c.implicit) return explain(p, mesh);
  return "";
}

}  // namespace

PartitionedProgram partition_program(const Program& global, const Placement& placement) {
  PartitionedProgram p =
      partition_program(global, placement.mesh, placement.in, placement.out, placement.held);
  const std::vector<AbstractValue> in_types = global.in_types();
  std::vector<InsertedCollective> copies;
  for (size_t i = 0; i < placement.arrives.size(); ++i) {
    const std::shared_ptr<const Sharding>& from = placement.arrives[i];
    if (!from) continue;
    const std::shared_ptr<const Sharding> to =
        placement.single_device
            ? std::shared_ptr<const Sharding>(
                  std::make_shared<SingleDeviceSharding>(placement.mesh.devices().front()))
            : std::make_shared<NamedSharding>(placement.mesh, p.in_specs[i]);
    if (*from == *to) continue;
    const int64_t bytes = copied_bytes(*from, *to, in_types[i]);
    if (bytes == 0) continue;
    copies.push_back({"device_put block copies",
                      "argument " + std::to_string(i) + " moves from the devices " +
                          ids_text(from->device_list()) + " to its blocks of " +
                          p.in_specs[i].repr() + " on the devices " +
                          ids_text(placement.mesh.devices()) + ", before the program runs",
                      bytes, false});
  }
  p.collectives.insert(p.collectives.begin(), copies.begin(), copies.end());
  return p;
}

namespace {

// Marks the thread as compiling a partitioned program while it lives. A compile that reaches
// compile_partitioned again on the same thread (an eager op on committed operands bound while
// the program compiles) raises, where it would wait for its own lock.
class CompileGuard {
 public:
  CompileGuard() {
    if (compiling_)
      throw std::logic_error(
          "[jit] internal error: compiling a partitioned program ran an eager op on committed "
          "operands, which needs a partitioned compile of its own");
    compiling_ = true;
  }
  ~CompileGuard() { compiling_ = false; }
  CompileGuard(const CompileGuard&) = delete;
  CompileGuard& operator=(const CompileGuard&) = delete;

 private:
  static thread_local bool compiling_;
};

thread_local bool CompileGuard::compiling_ = false;

}  // namespace

std::shared_ptr<const Compiled> compile_partitioned(const ProgramRef& program,
                                                    const Placement& placement) {
  static auto& cache = *new SharedLruCache<PartitionKey, std::shared_ptr<const Compiled>>(
      "compile_partitioned");
  const CompileGuard guard;
  PartitionKey key{program, placement};
  return cache.get_or_make(key, PartitionKeyHash()(key), PartitionKeyEqual(), [&] {
    PartitionedProgram parts = partition_program(*program, placement);
    const std::vector<AbstractValue> out_types = program->out_types();
    auto compiled = std::make_shared<Compiled>(parts.body, placement.mesh, parts.in_specs,
                                               parts.out_specs, out_types);
    for (size_t i = 0; i < placement.held.size(); ++i)
      if (placement.held[i])
        compiled->hold_argument(
            i, std::make_shared<HeldSharding>(placement.mesh.devices(), placement.held[i]->held));
    compiled->set_implicit_resharding(resharding_account(parts, placement.mesh));
    return std::shared_ptr<const Compiled>(std::move(compiled));
  });
}

namespace {

ProgramRef identity_program(const AbstractValue& t) {
  Program p;
  const int v = p.new_var(t);
  p.invars = {v};
  p.outputs = {Atom::of_var(v)};
  return std::make_shared<const Program>(std::move(p));
}

// The placement of the identity program that moves committed `x` to `target` over the same
// devices of this process in another order, tiled alike (put_in_other_order): x held where it
// is, permuted into the target's split by the ppermute the device_put asks for.
std::optional<Placement> reorder_placement(const Array& x, const Sharding& target,
                                           const char* api) {
  const auto* named = dynamic_cast<const NamedSharding*>(&target);
  if (!named || !x.committed() || named->mesh().axis_names().empty()) return std::nullopt;
  const Sharding& from = *x.sharding();
  const std::vector<Device>& devices = target.device_list();
  if (from.device_list() == devices || !same_device_set(from.device_list(), devices) ||
      !std::all_of(devices.begin(), devices.end(),
                   [](const Device& d) { return runtime::is_local_device(d.id); }))
    return std::nullopt;
  target.check_shape(x.shape(), api);
  if (!same_tiling(target, from, x.shape())) return std::nullopt;
  const std::optional<ValueSplit> split = split_on(target, named->mesh(), x.ndim());
  Placement p{named->mesh(), false, {split}, {split}, {std::nullopt}, {nullptr}};
  arrange(p, 0, x, &target);
  if (!p.held[0]) return std::nullopt;
  p.held[0]->implicit = false;
  return p;
}

}  // namespace

std::optional<Array> put_in_other_order(const Array& x,
                                        const std::shared_ptr<const Sharding>& target,
                                        const char* api) {
  std::optional<Placement> p = reorder_placement(x, *target, api);
  if (!p) return std::nullopt;
  return compile_partitioned(identity_program(aval_of(x)), *p)->run({&x, 1}).front();
}

std::optional<std::string> explain_put_in_other_order(const Array& x, const Sharding& target,
                                                      const char* api) {
  std::optional<Placement> p = reorder_placement(x, target, api);
  if (!p) return std::nullopt;
  return explain(partition_program(*identity_program(aval_of(x)), *p), p->mesh);
}

}  // namespace spmd

#include "sharding/type_sharding.h"

#include <spmd/error.h>

#include "ir/primitive.h"
#include "ir/program.h"
#include "ir/sharding_rule.h"
#include "sharding/param_traits.h"
#include "sharding/propagation.h"
#include "sharding/python_repr.h"

#include <algorithm>
#include <set>

namespace spmd {
namespace {

using Axes = std::vector<std::string>;

// One spec entry as Python prints it: None, 'a' or ('a', 'b').
std::string entry_str(const Axes& axes) {
  if (axes.empty()) return "None";
  if (axes.size() == 1) return python_repr::quoted(axes[0]);
  return python_repr::tuple_of_names(axes);
}

// tuple(spec) of a value: one entry per dim.
std::string spec_tuple(const AbstractValue& t) {
  std::vector<std::string> entries;
  for (int d = 0; d < t.shape.ndim(); ++d)
    entries.push_back(t.sharding ? entry_str(t.sharding->dims[size_t(d)]) : "None");
  return python_repr::tuple(entries);
}

std::string types_str(std::span<const AbstractValue> ts) {
  std::string out;
  for (const AbstractValue& t : ts) out += (out.empty() ? "" : ", ") + t.str();
  return out;
}

[[noreturn]] void fail(const Primitive& p, const std::string& message) {
  throw ShardingError("[" + p.name + "] " + message);
}

// The mesh every sharded operand is on; JAX's error for operands on different meshes.
const TypeSharding* common_mesh(const Primitive& p, std::span<const AbstractValue> in) {
  const TypeSharding* first = nullptr;
  for (const AbstractValue& t : in) {
    if (!t.sharding) continue;
    if (first && first->mesh != t.sharding->mesh)
      fail(p, "Mesh for all inputs should be equal. Got one mesh: " + abstract_mesh_str(*first) +
                  " and another mesh: " + abstract_mesh_str(*t.sharding));
    if (!first) first = &*t.sharding;
  }
  return first;
}

struct Inference {
  const Primitive& p;
  std::span<const AbstractValue> in;
  std::span<AbstractValue> out;
  const Params& params;
  const TypeSharding& mesh;
  ShardingRule rule;
  std::vector<std::optional<Axes>> factor_axes;
  std::vector<int> splitters;  // per factor: how many operands split it

  // The dims of operand i holding factor f, as tuple(spec entries).
  std::string factor_entries(size_t i, const std::vector<int>& factors) const {
    std::vector<std::string> entries;
    for (int f : factors)
      for (size_t d = 0; d < rule.operands[i].size(); ++d)
        if (rule.operands[i][d] == ShardingRule::Dim{f})
          entries.push_back(in[i].sharding ? entry_str(in[i].sharding->dims[d]) : "None");
    return python_repr::tuple(entries);
  }

  std::vector<int> factors_of_kind(FactorKind kind, bool shared) const {
    std::vector<int> out;
    for (int f = 0; f < rule.num_factors(); ++f) {
      if (rule.factor_kinds[size_t(f)] != kind) continue;
      bool both = in.size() == 2;
      for (size_t i = 0; both && i < 2; ++i)
        both = std::any_of(rule.operands[i].begin(), rule.operands[i].end(),
                           [&](const ShardingRule::Dim& d) { return d == ShardingRule::Dim{f}; });
      if (both == shared) out.push_back(f);
    }
    return out;
  }

  [[noreturn]] void conflict(int f) const {
    const FactorKind kind = rule.factor_kinds[size_t(f)];
    if (kind == FactorKind::reduction) {
      std::vector<int> fs = factors_of_kind(FactorKind::reduction, true);
      fail(p, p.name + " requires contracting dimensions to have consistent sharding, got " +
                  factor_entries(0, fs) + " and " + factor_entries(1, fs) + ".");
    }
    if (rule.combiner && in.size() == 2) {
      std::vector<int> fs = factors_of_kind(FactorKind::pass_through, true);
      fail(p, p.name +
                  " requires lhs batch dimensions and rhs batch dimensions to have the consistent "
                  "sharding, got " +
                  factor_entries(0, fs) + " and " + factor_entries(1, fs) + ".");
    }
    std::string specs;
    for (const AbstractValue& t : in)
      if (t.shape.ndim()) specs += (specs.empty() ? "" : ", ") + spec_tuple(t);
    fail(p, p.name + " got incompatible shardings for broadcasting: " + specs + ".");
  }

  // Each operand's split dims give their factors the axes (a compound dim's axes go to its
  // factors major first, as far as they divide them).
  void collect() {
    factor_axes.assign(size_t(rule.num_factors()), std::nullopt);
    splitters.assign(size_t(rule.num_factors()), 0);
    for (size_t i = 0; i < in.size() && i < rule.operands.size(); ++i) {
      if (!in[i].sharding || in[i].sharding->dims.size() != rule.operands[i].size()) continue;
      for (size_t d = 0; d < rule.operands[i].size(); ++d) {
        const Axes& axes = in[i].sharding->dims[d];
        const ShardingRule::Dim& factors = rule.operands[i][d];
        if (axes.empty() || factors.empty()) continue;
        for (auto [f, a] : split_among(factors, axes)) take(f, a);
      }
    }
  }

  std::vector<std::pair<int, Axes>> split_among(const ShardingRule::Dim& factors,
                                                const Axes& axes) const {
    std::vector<std::pair<int, Axes>> out;
    size_t next = 0;
    for (size_t k = 0; k < factors.size() && next < axes.size(); ++k) {
      const int f = factors[k];
      Axes taken;
      int64_t n = 1;
      const bool last = k + 1 == factors.size();
      while (next < axes.size() &&
             (last || rule.factor_sizes[size_t(f)] % (n * mesh.size_of({axes[next]})) == 0)) {
        n *= mesh.size_of({axes[next]});
        taken.push_back(axes[next++]);
        if (!last && n == rule.factor_sizes[size_t(f)]) break;
      }
      out.emplace_back(f, std::move(taken));
    }
    return out;
  }

  void take(int f, const Axes& axes) {
    if (axes.empty()) return;
    std::optional<Axes>& have = factor_axes[size_t(f)];
    if (have && *have != axes) conflict(f);
    have = axes;
    ++splitters[size_t(f)];
  }

  void check_factors() const {
    for (int f = 0; f < rule.num_factors(); ++f) {
      if (!factor_axes[size_t(f)]) continue;
      const FactorKind kind = rule.factor_kinds[size_t(f)];
      if (kind == FactorKind::reduction && splitters[size_t(f)] > 1) {
        std::vector<int> fs = factors_of_kind(FactorKind::reduction, true);
        fail(p,
             "Contracting dimensions are sharded and it is ambiguous how the output should be "
             "sharded. Please specify the output sharding via the `out_sharding` parameter. Got "
             "lhs_contracting_spec=" +
                 factor_entries(0, fs) + " and rhs_contracting_spec=" + factor_entries(1, fs));
      }
      if (kind == FactorKind::need_replication) unsharded_needed(f);
    }
  }

  [[noreturn]] void unsharded_needed(int f) const {
    for (size_t i = 0; i < in.size(); ++i)
      for (size_t d = 0; d < rule.operands[i].size(); ++d)
        if (in[i].sharding && !in[i].sharding->dims[d].empty() &&
            std::count(rule.operands[i][d].begin(), rule.operands[i][d].end(), f)) {
          if (p.kind == PrimitiveKind::cumulative)
            fail(p, "Input should be unsharded over the axis being reduced. Got input type=" +
                        in[i].typeof_str() + " and axis=" + std::to_string(d));
          fail(p, "Arguments to " + p.name + " must be unsharded over dimension " +
                      std::to_string(d) + ". Got input type=" + in[i].typeof_str());
        }
    fail(p, "a dimension that " + p.name + " needs whole is sharded");
  }

  TypeSharding result(size_t r) const {
    TypeSharding t{mesh.mesh, {}};
    for (const ShardingRule::Dim& factors : rule.results[r]) {
      Axes axes;
      for (int f : factors) {
        const FactorKind kind = rule.factor_kinds[size_t(f)];
        if (factor_axes[size_t(f)] && kind != FactorKind::reduction)
          axes.insert(axes.end(), factor_axes[size_t(f)]->begin(), factor_axes[size_t(f)]->end());
      }
      t.dims.push_back(std::move(axes));
    }
    return t;
  }

  void check_result(const AbstractValue& t) const {
    std::set<std::string> seen;
    for (const Axes& axes : t.sharding->dims)
      for (const std::string& a : axes)
        if (!seen.insert(a).second)
          fail(p, p.name + " operation with inputs: " + types_str(in) +
                      " produces an illegally sharded result: " + t.str());
  }

  bool replicated_rule() const {
    return std::all_of(rule.factor_kinds.begin(), rule.factor_kinds.end(),
                       [](FactorKind k) { return k == FactorKind::need_replication; });
  }

  void run() {
    rule = p.sharding_rule(in, out, params);
    if (!rule.fixed_results.empty()) return fixed();
    collect();
    // Collectives, control flow and calls have the replicated rule: their results are unsplit.
    if (!replicated_rule()) check_factors();
    for (size_t r = 0; r < out.size(); ++r) {
      out[r].sharding =
          replicated_rule()
              ? TypeSharding{mesh.mesh, std::vector<Axes>(size_t(out[r].shape.ndim()))}
              : result(r);
      check_result(out[r]);
    }
  }

  // A sharding constraint or reshard: the result has the fixed split's Explicit axes, those of
  // the constraint's own mesh when it names one (auto_axes and explicit_axes move values onto
  // the same devices with other axis types).
  void fixed() {
    using ShardingParam = TypedParam<std::shared_ptr<const Sharding>>;
    const auto* param = dynamic_cast<const ShardingParam*>(rule.fixed_on.object.get());
    const auto* named = param ? dynamic_cast<const NamedSharding*>(param->value().get()) : nullptr;
    for (size_t r = 0; r < out.size(); ++r) {
      if (named) {
        out[r].sharding = type_sharding_of(*named, out[r].shape.ndim());
        continue;
      }
      TypeSharding t{mesh.mesh, {}};
      for (const Axes& axes : rule.fixed_results[r]) {
        Axes kept;
        for (const std::string& a : axes)
          for (const TypeSharding::Axis& m : mesh.mesh)
            if (m.name == a && m.is_explicit) kept.push_back(a);
        t.dims.push_back(std::move(kept));
      }
      t.dims.resize(size_t(out[r].shape.ndim()));
      out[r].sharding = std::move(t);
    }
  }
};

}  // namespace

std::string abstract_mesh_str(const TypeSharding& t) {
  std::string out = "AbstractMesh(";
  std::vector<std::string> types;
  for (const TypeSharding::Axis& a : t.mesh) {
    out += python_repr::quoted(a.name) + ": " + std::to_string(a.size) + ", ";
    types.emplace_back(axis_type_name(axis_type_of(a)));
  }
  return out + "axis_types=" + python_repr::tuple(types) +
         ", device_kind=cpu, num_cores=None, platform=cpu)";
}

const TypeSharding* out_sharding_param(const Params& params, std::string_view key) {
  if (!params.has(key)) return nullptr;
  const auto* object = std::get_if<ObjectParam>(&params.at(key));
  if (!object) return nullptr;
  if (auto* typed = dynamic_cast<const TypedParam<TypeSharding>*>(object->object.get()))
    return &typed->value();
  auto* given = dynamic_cast<const TypedParam<GivenOutSharding>*>(object->object.get());
  return given ? &given->value().sharding : nullptr;
}

PartitionSpec spec_of(const TypeSharding& t, size_t length) {
  std::vector<PartitionSpec::Entry> entries;
  for (size_t d = 0; d < length && d < t.dims.size(); ++d) {
    const std::vector<std::string>& axes = t.dims[d];
    entries.push_back(axes.empty()       ? std::nullopt
                      : axes.size() == 1 ? PartitionSpec::Entry(AxisNames(axes[0]))
                                         : PartitionSpec::Entry(AxisNames(axes, true)));
  }
  return PartitionSpec(std::move(entries));
}

Mesh mesh_of_type(const Mesh& devices, const TypeSharding& t) {
  std::vector<std::string> names;
  std::vector<AxisType> types;
  for (const TypeSharding::Axis& a : t.mesh) {
    names.push_back(a.name);
    types.push_back(axis_type_of(a));
  }
  return Mesh(devices.devices(), devices.devices_shape(), names, types);
}

ParamValue batched_out_sharding(const Params& params, std::string_view key, int d,
                                const std::vector<std::string>& axes) {
  const auto* object = std::get_if<ObjectParam>(&params.at(key));
  // A body splitting another dim over the mapped axes raises JAX's DuplicateSpecError.
  auto insert_batch = [d, &axes](TypeSharding t, size_t length) {
    t.dims.insert(t.dims.begin() + d, axes);
    spec_of(t, length).check_unique("vmap");
    return t;
  };
  if (!object) return params.at(key);
  if (auto* given = dynamic_cast<const TypedParam<GivenOutSharding>*>(object->object.get())) {
    const size_t length = std::max(given->value().spec_length, size_t(d)) + 1;
    return object_param(GivenOutSharding{insert_batch(given->value().sharding, length), length});
  }
  if (auto* typed = dynamic_cast<const TypedParam<TypeSharding>*>(object->object.get()))
    return object_param(insert_batch(typed->value(), typed->value().dims.size() + 1));
  return params.at(key);
}

const TypeSharding* given_out_sharding(const Params& params) {
  const TypeSharding* given = out_sharding_param(params, "out_sharding");
  return given ? given : out_sharding_param(params, "sharding");
}

Params without_out_sharding(Params params) {
  for (const char* key : {"out_sharding", "sharding"})
    if (out_sharding_param(params, key)) params.set(key, NoneParam{});
  return params;
}

namespace {

// JAX's repr of NamedSharding(t's abstract mesh, spec) for the spec of t's first `length` dims.
std::string named_sharding_str(const TypeSharding& t, size_t length) {
  return "NamedSharding(mesh=" + abstract_mesh_str(t) + ", spec=" + spec_of(t, length).repr() +
         ")";
}

}  // namespace

std::string ParamTraits<TypeSharding>::str(const TypeSharding& t) {
  return named_sharding_str(t, t.dims.size());
}

size_t ParamTraits<TypeSharding>::hash(const TypeSharding& t) {
  return std::hash<std::string>{}(str(t));
}

std::string ParamTraits<GivenOutSharding>::str(const GivenOutSharding& given) {
  return named_sharding_str(given.sharding, given.spec_length);
}

size_t ParamTraits<GivenOutSharding>::hash(const GivenOutSharding& given) {
  return std::hash<std::string>{}(str(given));
}

AxisType axis_type_of(const TypeSharding::Axis& axis) {
  if (axis.is_manual) return AxisType::Manual;
  return axis.is_explicit ? AxisType::Explicit : AxisType::Auto;
}

TypeSharding unsplit_on(const Mesh& mesh, int rank) {
  TypeSharding t;
  for (const auto& [name, size] : mesh.shape()) {
    const AxisType type = mesh.axis_type(name);
    t.mesh.push_back({name, size, type == AxisType::Explicit, type == AxisType::Manual});
  }
  t.dims.resize(size_t(rank));
  return t;
}

TypeSharding manual_block_sharding(const Mesh& mesh, const std::vector<std::string>& manual,
                                   const std::optional<TypeSharding>& outer, int rank) {
  TypeSharding t = unsplit_on(mesh, rank);
  for (TypeSharding::Axis& a : t.mesh)
    if (std::ranges::count(manual, a.name)) a = {a.name, a.size, false, true};
  if (!outer) return t;
  for (size_t d = 0; d < t.dims.size() && d < outer->dims.size(); ++d)
    for (const std::string& a : outer->dims[d])
      if (!std::ranges::count(manual, a)) t.dims[d].push_back(a);
  return t;
}

std::optional<TypeSharding> manual_result_sharding(const Mesh& mesh, const PartitionSpec& spec,
                                                   const std::optional<TypeSharding>& block,
                                                   int rank) {
  std::optional<TypeSharding> t = type_sharding_of(NamedSharding(mesh, spec), rank);
  if (!t || !block) return t;
  for (size_t d = 0; d < t->dims.size() && d < block->dims.size(); ++d)
    for (const std::string& a : block->dims[d])
      if (!std::ranges::count(t->dims[d], a)) t->dims[d].push_back(a);
  return t;
}

namespace {

bool splits_nothing(const std::optional<TypeSharding>& t) {
  return t && std::ranges::all_of(t->dims, [](const Axes& axes) { return axes.empty(); });
}

// `body` without its unsplit shardings; whether it had any.
bool drop_unsplit_types(ProgramRef& body) {
  ProgramRef stripped = without_unsplit_types(body);
  const bool changed = stripped != body;
  body = std::move(stripped);
  return changed;
}

// The same for the programs a param holds.
bool drop_unsplit_types(ParamValue& value) {
  if (auto* body = std::get_if<ProgramRef>(&value)) return drop_unsplit_types(*body);
  bool changed = false;
  if (auto* bodies = std::get_if<std::vector<ProgramRef>>(&value))
    for (ProgramRef& b : *bodies) changed = drop_unsplit_types(b) || changed;
  return changed;
}

}  // namespace

ProgramRef without_unsplit_types(const ProgramRef& body) {
  Program out = *body;
  bool changed = false;
  for (AbstractValue& t : out.types)
    if (splits_nothing(t.sharding)) {
      t.sharding.reset();
      changed = true;
    }
  for (Equation& e : out.equations) {
    Params params = e.params;
    bool params_changed = false;
    for (const auto& [key, value] : e.params.items()) {
      ParamValue v = value;
      if (!drop_unsplit_types(v)) continue;
      params.set(key, std::move(v));
      params_changed = true;
    }
    if (params_changed) e.params = std::move(params);
    changed = changed || params_changed;
  }
  return changed ? std::make_shared<const Program>(std::move(out)) : body;
}

bool has_explicit_axis(const std::optional<TypeSharding>& t) {
  return t && std::ranges::any_of(t->mesh, [](const TypeSharding::Axis& a) { return a.is_explicit; });
}

bool shardings_match(const std::optional<TypeSharding>& a, const std::optional<TypeSharding>& b) {
  return a == b || (!has_explicit_axis(a) && !has_explicit_axis(b));
}

std::optional<TypeSharding> type_sharding_of(const Sharding& sharding, int rank) {
  const auto* named = dynamic_cast<const NamedSharding*>(&sharding);
  if (!named || !named->mesh().has_explicit_axes()) return std::nullopt;
  TypeSharding t = unsplit_on(named->mesh(), rank);
  for (int d = 0; d < rank; ++d)
    for (const std::string& a : named->spec().axes_of(d))
      if (named->mesh().axis_type(a) == AxisType::Explicit) t.dims[size_t(d)].push_back(a);
  return t;
}

std::function<void(std::span<const AbstractValue>, std::span<AbstractValue>, const Params&)>
keep_operand_sharding(std::string prim, std::string what) {
  return [prim = std::move(prim), what = std::move(what)](
             std::span<const AbstractValue> in, std::span<AbstractValue> out, const Params&) {
    if (!in[0].sharding) return;
    const TypeSharding& t = *in[0].sharding;
    for (int d = 0; d < in[0].shape.ndim(); ++d) {
      const std::vector<std::string>& axes = t.dims[size_t(d)];
      const int64_t n = out[0].shape[d];
      if (n == in[0].shape[d] || axes.empty() || n % t.size_of(axes) == 0) continue;
      // Python's str() of the spec entry: a, or ('a', 'b').
      const std::string entry = axes.size() == 1 ? axes[0] : entry_str(axes);
      throw ShardingError("[" + prim + "] " + what + " on sharded dims where out dim (" +
                          std::to_string(n) + ") is not divisible by mesh axes (" +
                          std::to_string(t.size_of(axes)) + ") with spec (" + entry +
                          ") is not implemented. Got input type=" + in[0].str() +
                          " and output shape=" + python_repr::tuple_of_ints(out[0].shape.dims()));
    }
    out[0].sharding = t;
  };
}

void infer_type_shardings(const Primitive& p, std::span<const AbstractValue> in,
                          std::span<AbstractValue> out, const Params& params) {
  const TypeSharding* mesh = common_mesh(p, in);
  for (const AbstractValue& t : out)
    if (t.sharding) return;
  // JAX takes a given out_sharding as the result's sharding without looking at the operands',
  // which may have none (a broadcast scalar in a transpose).
  if (const TypeSharding* given = given_out_sharding(params)) {
    out[0].sharding = *given;
    return;
  }
  if (!mesh || !p.sharding_rule) return;
  if (p.type_sharding_rule) return p.type_sharding_rule(in, out, params);
  Inference{p, in, out, params, *mesh, {}, {}, {}}.run();
}

void factor_type_shardings(const Primitive& p, std::span<const AbstractValue> in,
                           std::span<AbstractValue> out, const Params& params) {
  if (const TypeSharding* mesh = common_mesh(p, in))
    Inference{p, in, out, params, *mesh, {}, {}, {}}.run();
}

}  // namespace spmd

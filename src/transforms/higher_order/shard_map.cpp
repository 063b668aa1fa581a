// shard_map and pmap. The body is traced once on the block types of one device, with the mesh
// axes in the axis environment, into a `shard_map` equation whose sub-program is the per-device
// Program. Running the equation places every operand by its spec, then runs the sub-program on
// each device's worker thread at once; collectives inside meet through the launch's
// Communicator. Results are sharded Arrays that become ready when every device has finished.
#include <spmd/error.h>
#include <spmd/lax.h>
#include <spmd/ops.h>
#include <spmd/parallel.h>
#include <spmd/placement.h>
#include <spmd/shard_map.h>

#include "compile/compiled.h"
#include "core/axis_env.h"
#include "prims/families.h"
#include "prims/primitive.h"
#include "prims/rule_util.h"
#include "runtime/communicator.h"
#include "runtime/executor.h"
#include "runtime/launch.h"
#include "runtime/sharded.h"
#include "sharding/param_traits.h"
#include "sharding/python_repr.h"
#include "sharding/type_sharding.h"
#include "transforms/higher_order/nested_pmap.h"
#include "transforms/interpreters.h"
#include "transforms/signature.h"
#include "transforms/staging.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>

namespace spmd {
namespace {

struct PreparedShardMap;
std::vector<Array> bind_prepared(const PreparedShardMap& prepared, std::span<const Array> args);

// What a shard_map equation carries besides its sub-program, each in a typed param of its own.
struct ShardMapInfo {
  Mesh mesh;
  std::vector<PartitionSpec> in_specs;   // per operand (closed-over constants first)
  std::vector<PartitionSpec> out_specs;  // per result
  bool check_vma = true;
  // The mesh axes the body is manual over, in mesh order: all of them but the Explicit axes an
  // enclosing vmap maps over, which the body's types split as the batch dim is.
  std::vector<std::string> manual;
};

// The same, read from an equation's params.
struct ShardMapParams {
  const Mesh& mesh;
  const std::vector<PartitionSpec>& in_specs;
  const std::vector<PartitionSpec>& out_specs;
  bool check_vma;
  const std::vector<std::string>& manual;
};

// The mesh axes the body is manual over, printed as JAX's frozenset.
struct ManualAxes {
  std::vector<std::string> names;
  bool operator==(const ManualAxes&) const = default;
};

ShardMapParams info_of(const Params& p) {
  return {p.get_object<Mesh>("mesh"), p.get_object<std::vector<PartitionSpec>>("in_specs"),
          p.get_object<std::vector<PartitionSpec>>("out_specs"), p.get<bool>("check_vma"),
          p.get_object<ManualAxes>("newly_manual_axes").names};
}

// A pmap with pmaps nested in it: the same computation with one device per instance, which
// running the equation uses instead of the body (the body stays what is printed and
// differentiated). It replaces the body's leading `skip` operands, its constants.
struct SpreadBody {
  std::shared_ptr<const PreparedShardMap> prepared;
  size_t skip = 0;
  bool operator==(const SpreadBody& other) const;
};

}  // namespace

template <>
struct ParamTraits<ManualAxes> {
  static constexpr std::string_view name = "newly_manual_axes";
  static std::string str(const ManualAxes& axes) {
    std::string s = "frozenset({";
    for (size_t a = 0; a < axes.names.size(); ++a) s += (a ? ", '" : "'") + axes.names[a] + "'";
    return s + "})";
  }
  static size_t hash(const ManualAxes& axes) {
    size_t h = 0;
    for (const std::string& a : axes.names) hash_combine(h, std::hash<std::string>{}(a));
    return h;
  }
};

template <>
struct ParamTraits<SpreadBody> {
  static constexpr std::string_view name = "nested pmap spread";
  static std::string str(const SpreadBody&) { return ""; }  // hidden in the jaxpr text
  static size_t hash(const SpreadBody& plan);
};

namespace {

int64_t split_factor(const Mesh& mesh, const PartitionSpec& spec, int dim) {
  int64_t f = 1;
  for (const std::string& a : spec.axes_of(dim)) f *= mesh.axis_size(a);
  return f;
}

// The block one device sees of an operand of type `global`, after JAX's checks.
// The mesh axes a spec splits the value over, in mesh order (the block's vma).
std::vector<std::string> spec_axes(const Mesh& mesh, const PartitionSpec& spec) {
  std::vector<std::string> out;
  for (const std::string& a : mesh.axis_names())
    for (int d = 0; d < spec.size(); ++d)
      for (const std::string& b : spec.axes_of(d))
        if (a == b) out.push_back(a);
  return out;
}

// The block one device sees of an operand of type `global` (specs already checked), typed on
// the mesh with the axes `manual` Manual.
AbstractValue block_type(const AbstractValue& global, const PartitionSpec& spec, const Mesh& mesh,
                         const std::vector<std::string>& manual) {
  AbstractValue block = global;
  std::vector<int64_t> dims = global.shape.dims();
  for (int d = 0; d < global.shape.ndim(); ++d) dims[size_t(d)] /= split_factor(mesh, spec, d);
  block.shape = Shape(dims);
  block.sharding = manual_block_sharding(mesh, manual, global.sharding, global.shape.ndim());
  return block;
}

std::string join(const std::vector<std::string>& xs, const char* sep) {
  std::string out;
  for (size_t i = 0; i < xs.size(); ++i) out += (i ? sep : "") + xs[i];
  return out;
}

// "float32[8,16]", as JAX's aval.str_short() names types in shard_map errors.
std::string type_short(const AbstractValue& t) {
  std::string s = std::string(dtype_name(t.dtype)) + "[";
  for (int d = 0; d < t.shape.ndim(); ++d) {
    if (d) s += ",";
    s += std::to_string(t.shape[d]);
  }
  return s + "]";
}

std::string bullets(std::vector<std::string> msgs) {
  if (msgs.size() == 1) return msgs[0].substr(2);
  std::string out;
  for (size_t i = 0; i < msgs.size(); ++i) out += (i ? "\n\n" : "") + msgs[i];
  return out;
}

// The spec of one Array leaf, with the key paths JAX's errors name: the spec's place in the spec
// tree and the leaf's place in the value ("[1]['w']", "" for the root).
struct LeafSpec {
  PartitionSpec spec;
  std::string spec_key;
  std::string leaf_key;
};

std::string node_kind(const TreeDef& t) {
  switch (t.kind()) {
    case TreeDef::Kind::leaf:
      return "Array";
    case TreeDef::Kind::static_leaf:
      return "static value";
    case TreeDef::Kind::none:
      return "None";
    case TreeDef::Kind::list:
      return "list";
    case TreeDef::Kind::tuple:
      return "tuple";
    case TreeDef::Kind::dict:
      return "dict";
    case TreeDef::Kind::ordered_dict:
      return "OrderedDict";
    case TreeDef::Kind::record:
      return t.name();
  }
  return "";
}

// Gives every Array leaf of `value` the spec above it in `specs`, which must be a prefix of
// `value` (JAX's broadcast_prefix, with its structure errors); `what` is "in_specs" or
// "out_specs".
void broadcast_specs(const SpecTree& specs, const TreeDef& value, const std::string& what,
                     const std::string& spec_key, const std::string& leaf_key,
                     std::vector<LeafSpec>& out) {
  if (specs.is_spec()) {
    std::vector<TreeDef> stack{value};
    std::vector<std::string> keys{leaf_key};
    // Depth first, children in order: the leaves' flattening order.
    while (!stack.empty()) {
      TreeDef t = stack.back();
      std::string key = keys.back();
      stack.pop_back();
      keys.pop_back();
      if (t.kind() == TreeDef::Kind::leaf) out.push_back({specs.spec(), spec_key, key});
      std::vector<TreeDef> children = t.children();
      for (size_t i = children.size(); i-- > 0;) {
        stack.push_back(children[i]);
        keys.push_back(key + t.child_key(i));
      }
    }
    return;
  }
  const std::string where = "pytree structure error: different ";
  const std::string path = "\n    shard_map " + what + spec_key +
                           "\nAt that key path, the prefix "
                           "pytree shard_map " +
                           what + " has a subtree of type";
  std::vector<TreeDef> children = value.children();
  if (!value.is_container())
    throw ValueError("[shard_map] " + where + "types at key path" + path +
                     "\n    tuple\nbut at the same key path the full pytree has a subtree of "
                     "different type\n    " +
                     node_kind(value) + ".");
  if (children.size() != specs.children().size())
    throw ValueError("[shard_map] " + where + "lengths of " + node_kind(value) + " at key path" +
                     path + " " + node_kind(value) + " of length " +
                     std::to_string(specs.children().size()) +
                     ", but the full pytree has a subtree of the same type but of length " +
                     std::to_string(children.size()) + ".");
  for (size_t i = 0; i < children.size(); ++i)
    broadcast_specs(specs.children()[i], children[i], what, spec_key + value.child_key(i),
                    leaf_key + value.child_key(i), out);
}

// The leaves' specs: against the value's tree when it is known, else one spec for all `n`
// leaves or one per leaf.
std::vector<LeafSpec> leaf_specs(const SpecTree& specs, const TreeDef* value, size_t n,
                                 const std::string& what) {
  std::vector<LeafSpec> out;
  if (value) {
    broadcast_specs(specs, *value, what, "", "", out);
    return out;
  }
  if (specs.is_spec()) {
    for (size_t i = 0; i < n; ++i) out.push_back({specs.spec(), "", "[" + std::to_string(i) + "]"});
    return out;
  }
  if (specs.children().size() != n)
    throw ValueError("[shard_map] " + what + " has " + std::to_string(specs.children().size()) +
                     " entries for " + std::to_string(n) + " values");
  for (size_t i = 0; i < n; ++i) {
    const SpecTree& c = specs.children()[i];
    if (!c.is_spec())
      throw ValueError("[shard_map] " + what + "[" + std::to_string(i) +
                       "] is a list, but the value there is one Array");
    out.push_back({c.spec(), "[" + std::to_string(i) + "]", "[" + std::to_string(i) + "]"});
  }
  return out;
}

std::vector<PartitionSpec> specs_of(const std::vector<LeafSpec>& leaves) {
  std::vector<PartitionSpec> out;
  for (const LeafSpec& l : leaves) out.push_back(l.spec);
  return out;
}

// JAX's error for specs longer than their value's rank; `prefix` is "in" or "out".
void check_spec_ranks(std::span<const AbstractValue> types, std::span<const LeafSpec> specs,
                      const std::string& fn, const std::string& prefix) {
  std::vector<std::string> msgs;
  bool scalar = false;
  for (size_t i = 0; i < types.size(); ++i) {
    const PartitionSpec& spec = specs[i].spec;
    int rank = types[i].shape.ndim(), len = spec.size();
    if (len <= rank) continue;
    scalar = scalar || rank == 0;
    std::string base = (prefix == "in" ? "the passed args" : fn + "(*args)") + specs[i].leaf_key;
    msgs.push_back("* " + prefix + "_specs" + specs[i].spec_key + " is " + spec.repr() +
                   " which has length " + std::to_string(len) + ", but " + base + " has shape " +
                   type_short(types[i]) + ", which has rank " + std::to_string(rank) + " (and " +
                   std::to_string(rank) + " < " + std::to_string(len) + ")");
  }
  if (msgs.empty()) return;
  std::string msg =
      "[shard_map] shard_map applied to the function '" + fn + "' was given an " + prefix +
      "_specs entry which is too long to be compatible with the "
      "corresponding " +
      prefix + "put value from the function:\n\n" + bullets(msgs) + "\n\nEntries in " + prefix +
      "_specs must be of length no greater than the number of axes in the "
      "corresponding " +
      prefix +
      "put value.\n\nEither revise the spec to be "
      "shorter, or modify '" +
      fn + "' so that its " + prefix + "puts have sufficient rank.";
  if (scalar)
    msg += "\n\nFor scalar values (rank 0), consider using an " + prefix +
           "_specs entry of `P()`, where `P = jax.sharding.PartitionSpec`.";
  throw ShardingError(msg);
}

// JAX's error for operand dims that the mesh axes of their spec do not divide.
void check_divisible(std::span<const AbstractValue> types, std::span<const LeafSpec> specs,
                     const Mesh& mesh, const std::string& fn) {
  std::vector<std::string> msgs;
  for (size_t i = 0; i < types.size(); ++i) {
    const PartitionSpec& spec = specs[i].spec;
    for (int d = 0; d < types[i].shape.ndim(); ++d) {
      std::vector<std::string> names = spec.axes_of(d);
      int64_t size = split_factor(mesh, spec, d), dim = types[i].shape[d];
      if (names.empty() || dim % size == 0) continue;
      std::string axis;
      if (names.size() > 1) {
        std::vector<std::string> quoted;
        for (const std::string& n : names) quoted.push_back("'" + n + "'");
        axis = "axes (" + join(quoted, ", ") + ")";
      } else {
        axis = "axis '" + names[0] + "'";
      }
      msgs.push_back("* the passed args" + specs[i].leaf_key + " of shape " + type_short(types[i]) +
                     " corresponds to in_specs" + specs[i].spec_key + " of value " + spec.repr() +
                     ", which maps array axis " + std::to_string(d) + " (of size " +
                     std::to_string(dim) + ") to mesh " + axis + " (of " +
                     (names.size() > 1 ? "total " : "") + "size " + std::to_string(size) +
                     "), but " + std::to_string(size) + " does not evenly divide " +
                     std::to_string(dim));
    }
  }
  if (msgs.empty()) return;
  std::vector<std::string> sizes, names;
  for (const auto& [a, n] : mesh.shape()) {
    sizes.push_back(std::to_string(n));
    names.push_back("'" + a + "'");
  }
  auto tuple = [](const std::vector<std::string>& xs) {
    return "(" + join(xs, ", ") + (xs.size() == 1 ? ",)" : ")");
  };
  throw ShardingError(
      "[shard_map] shard_map applied to the function '" + fn +
      "' was given argument arrays with axis sizes that are not evenly divisible by the "
      "corresponding mesh axis sizes:\n\nThe mesh given has shape " +
      tuple(sizes) + " with corresponding axis names " + tuple(names) + ".\n\n" + bullets(msgs) +
      "\n\nArray arguments' axis sizes must be evenly divisible by the mesh axis or axes "
      "indicated by the corresponding elements of the argument's in_specs entry. Consider "
      "checking that in_specs are correct, and if so consider changing the mesh axis sizes or "
      "else padding the input and adapting '" +
      fn + "' appropriately.");
}

// One entry of JAX's out_specs replication error.
std::string replication_failure(const Mesh& mesh, const PartitionSpec& spec, const std::string& key,
                                const std::vector<std::string>& vma) {
  std::vector<std::string> missing;
  std::vector<std::string> need = spec_axes(mesh, spec);
  for (const std::string& a : mesh.axis_names()) {
    bool mentioned = false;
    for (const std::string& b : need) mentioned = mentioned || a == b;
    if (!mentioned) missing.push_back(a);
  }
  if (missing.size() > 1) {
    std::vector<std::string> diff;
    for (const std::string& a : missing)
      for (const std::string& v : vma)
        if (a == v) diff.push_back(a);
    std::vector<std::string> got;
    for (const std::string& a : mesh.axis_names())
      for (const std::string& v : vma)
        if (a == v) got.push_back(a);
    return "* out_specs" + key + " is " + spec.repr() +
           " which implies that the corresponding output value is only varying across mesh "
           "axes {" +
           join(need, ",") + "} and not {" + join(diff, ",") +
           "}, but it was inferred to be possibly varying over {" + join(got, ",") + "}";
  }
  return "* out_specs" + key + " is " + spec.repr() +
         " which implies that the corresponding output value is replicated across mesh axis '" +
         missing[0] + "', but could not infer replication over any axes";
}

std::string replication_error(const Mesh& mesh, const std::string& fn,
                              std::vector<std::string> failures) {
  if (failures.size() == 1) failures[0] = failures[0].substr(2);
  std::vector<std::string> sizes, names;
  for (const auto& [a, n] : mesh.shape()) {
    sizes.push_back(std::to_string(n));
    names.push_back("'" + a + "'");
  }
  auto tuple = [&](const std::vector<std::string>& xs) {
    return "(" + join(xs, ", ") + (xs.size() == 1 ? ",)" : ")");
  };
  return "[shard_map] shard_map applied to the function '" + fn +
         "' was given out_specs which require replication which can't be statically inferred "
         "given the mesh:\n\nThe mesh given has shape " +
         tuple(sizes) + " with corresponding axis names " + tuple(names) + ".\n\n" +
         join(failures, "\n\n") +
         "\n\nCheck if these output values are meant to be replicated over those mesh axes. If "
         "not, consider revising the corresponding out_specs entries. If so, consider disabling "
         "the check by passing the check_vma=False argument to `jax.shard_map`.";
}

AbstractValue global_type(const AbstractValue& block, const PartitionSpec& spec, const Mesh& mesh) {
  AbstractValue global = block;
  std::vector<int64_t> dims = block.shape.dims();
  for (int d = 0; d < block.shape.ndim(); ++d) dims[size_t(d)] *= split_factor(mesh, spec, d);
  global.shape = Shape(dims);
  global.vma.clear();
  global.sharding = manual_result_sharding(mesh, spec, block.sharding, block.shape.ndim());
  return global;
}

std::vector<AbstractValue> shard_map_shape_rule(std::span<const AbstractValue>, const Params& p) {
  const ShardMapParams info = info_of(p);
  std::vector<AbstractValue> block = p.get<ProgramRef>("jaxpr")->out_types();
  std::vector<AbstractValue> out;
  for (size_t k = 0; k < block.size(); ++k)
    out.push_back(global_type(block[k], info.out_specs[k], info.mesh));
  return out;
}

// The frames of the axes a body is manual over.
std::vector<AxisFrame> frames_of(const Mesh& mesh, const std::vector<std::string>& manual,
                                 bool check_vma) {
  std::vector<AxisFrame> frames;
  for (const std::string& axis : manual)
    frames.push_back({axis, mesh.axis_size(axis), "shard_map", check_vma});
  return frames;
}

// Whether a type splits a dim over axes the body is not manual over (a shard_map's body types
// name no manual axis in their dims).
bool splits_in_type(const AbstractValue& t) {
  return t.sharding &&
         std::ranges::any_of(t.sharding->dims, [](const auto& axes) { return !axes.empty(); });
}

bool splits_in_types(const Program& body) {
  return std::ranges::any_of(body.types, [](const AbstractValue& t) { return splits_in_type(t); });
}

// The block of a value of type t a device holds: its dims split over the non-manual axes of its
// type divided by them, untyped.
AbstractValue local_type(AbstractValue t) {
  if (t.sharding) {
    std::vector<int64_t> dims = t.shape.dims();
    for (size_t d = 0; d < dims.size(); ++d) dims[d] /= t.sharding->size_of(t.sharding->dims[d]);
    t.shape = Shape(dims);
  }
  t.sharding.reset();
  t.vma.clear();
  return t;
}

ProgramRef localized(const ProgramRef& body, const Mesh& mesh);

std::atomic<int64_t> localized_traces{0};

// Params with the programs they hold localized.
Params localized_params(const Params& params, const Mesh& mesh) {
  Params out = params;
  for (auto [key, value] : params.items()) {
    if (auto* body = std::get_if<ProgramRef>(&value)) {
      *body = localized(*body, mesh);
    } else if (auto* bodies = std::get_if<std::vector<ProgramRef>>(&value)) {
      for (ProgramRef& b : *bodies) b = localized(b, mesh);
    } else {
      continue;
    }
    out.set(key, std::move(value));
  }
  return out;
}

// The program a device runs for a body manual over some axes of `mesh` only, whose types split
// dims over the others (a vmapped shard_map's batch dim split over an Explicit axis): the same
// equations on the blocks, with every mesh axis in scope. Each equation keeps to its blocks, as
// a vmapped body's do along the batch dim; params that spell global sizes get the blocks'.
ProgramRef localized(const ProgramRef& body, const Mesh& mesh) {
  if (!splits_in_types(*body)) return body;
  std::vector<AbstractValue> in;
  for (int v : body->invars) in.push_back(local_type(body->types[size_t(v)]));
  auto fn = [&](std::span<const Array> xs) {
    std::vector<Array> env(body->types.size());
    for (size_t i = 0; i < body->constvars.size(); ++i)
      env[size_t(body->constvars[i])] = body->consts[i];
    for (size_t i = 0; i < xs.size(); ++i) env[size_t(body->invars[i])] = xs[i];
    auto read = [&](const Atom& a) { return a.is_literal() ? a.literal : env[size_t(a.var)]; };
    for (const Equation& e : body->equations) {
      std::vector<Array> ins;
      std::vector<AbstractValue> in_types, out_types;
      for (const Atom& a : e.inputs) {
        ins.push_back(read(a));
        in_types.push_back(aval_of(ins.back()));
      }
      for (int v : e.outputs) out_types.push_back(local_type(body->types[size_t(v)]));
      LocalEquation local{e.primitive, localized_params(e.params, mesh)};
      if (e.primitive->localize) local = e.primitive->localize(local.params, in_types, out_types);
      std::vector<Array> outs =
          local.primitive ? spmd::bind(*local.primitive, ins, local.params) : ins;
      for (size_t r = 0; r < outs.size(); ++r) env[size_t(e.outputs[r])] = std::move(outs[r]);
    }
    std::vector<Array> result;
    for (const Atom& a : body->outputs) result.push_back(read(a));
    return result;
  };
  AxisEnvScope axes(frames_of(mesh, mesh.axis_names(), false));
  ++localized_traces;
  return std::make_shared<const Program>(trace_to_program(fn, in, "shard_map"));
}

// `spec` with each dim also split over the non-manual axes that split it in the body's type t.
PartitionSpec with_type_splits(const PartitionSpec& spec, const AbstractValue& t) {
  if (!splits_in_type(t)) return spec;
  std::vector<PartitionSpec::Entry> entries;
  for (int d = 0; d < t.shape.ndim(); ++d) {
    std::vector<std::string> axes = spec.axes_of(d);
    for (const std::string& a : t.sharding->dims[size_t(d)]) axes.push_back(a);
    entries.push_back(axes.empty() ? PartitionSpec::Entry{}
                                   : PartitionSpec::Entry(AxisNames(axes, axes.size() > 1)));
  }
  return PartitionSpec(entries);
}

// A shard_map as the devices run it: manual over every mesh axis, the splits of its body's types
// over the others moved into its specs and its body localized (the equation itself when it is
// manual over every axis already).
struct RunForm {
  ProgramRef body;
  std::vector<PartitionSpec> in_specs, out_specs;
};

RunForm make_run_form(const Params& p) {
  const ShardMapParams info = info_of(p);
  const ProgramRef& body = p.get<ProgramRef>("jaxpr");
  RunForm out{body, info.in_specs, info.out_specs};
  if (info.manual.size() == info.mesh.axis_names().size()) return out;
  for (size_t i = 0; i < out.in_specs.size(); ++i)
    out.in_specs[i] = with_type_splits(out.in_specs[i], body->types[size_t(body->invars[i])]);
  for (size_t k = 0; k < out.out_specs.size(); ++k)
    out.out_specs[k] = with_type_splits(out.out_specs[k], body->type_of(body->outputs[k]));
  out.body = localized(body, info.mesh);
  return out;
}

// The run form of a shard_map equation, made once per params when its body is localized (a
// trace).
std::shared_ptr<const RunForm> run_form(const Params& p) {
  const ShardMapParams info = info_of(p);
  if (info.manual.size() == info.mesh.axis_names().size())
    return std::make_shared<const RunForm>(make_run_form(p));
  static auto& cache =
      *new SharedLruCache<Params, std::shared_ptr<const RunForm>>("shard_map_run_form");
  const size_t h = p.hash();
  auto same = [&](const Params& key) { return key == p; };
  if (auto hit = cache.find(h, same, [](const Params&) { return false; })) return *hit;
  // Made outside the cache's lock: localizing a body localizes the shard_maps it holds.
  auto made = std::make_shared<const RunForm>(make_run_form(p));
  cache.insert(p, h, made);
  return made;
}

// Runs the body on every device of the mesh; returns at once with results that become ready.
std::vector<Array> shard_map_eager(std::span<const Array> args, const Params& p) {
  if (!all_concrete(args)) return spmd::bind(primitive("shard_map"), args, p);
  if (p.has("spread")) {
    const SpreadBody& spread = p.get_object<SpreadBody>("spread");
    return bind_prepared(*spread.prepared, args.subspan(spread.skip));
  }
  const std::shared_ptr<const RunForm> run = run_form(p);
  const std::shared_ptr<const Compiled> compiled = compile_manual(
      run->body, info_of(p).mesh, run->in_specs, run->out_specs, shard_map_shape_rule({}, p));
  return compiled->run(args);
}

Params shard_map_params(ShardMapInfo info, ProgramRef body) {
  ManualAxes manual{std::move(info.manual)};
  return Params{{"jaxpr", std::move(body)},
                {"mesh", object_param(std::move(info.mesh))},
                {"in_specs", object_param(std::move(info.in_specs))},
                {"out_specs", object_param(std::move(info.out_specs))},
                {"check_vma", info.check_vma},
                {"newly_manual_axes", object_param(std::move(manual))}};
}

// Traces fn on per-device block types with the manual axes of `info` in scope, and its mesh
// with those axes Manual as the abstract mesh in context.
template <class Info>
Program trace_body(const FlatFn& fn, std::span<const AbstractValue> types, const Info& info) {
  AxisEnvScope axes(frames_of(info.mesh, info.manual, info.check_vma));
  BodyMeshScope mesh(manual_block_sharding(info.mesh, info.manual, std::nullopt, 0));
  return trace_to_program(fn, types, "shard_map");
}

// A shard_map equation ready to bind: its params and the constants it closed over, which become
// replicated leading operands.
struct PreparedShardMap {
  Params params;
  std::vector<Array> consts;
};

bool SpreadBody::operator==(const SpreadBody& other) const {
  return skip == other.skip && prepared->params == other.prepared->params &&
         std::equal(prepared->consts.begin(), prepared->consts.end(),
                    other.prepared->consts.begin(), other.prepared->consts.end(), same_array);
}

}  // namespace

size_t ParamTraits<SpreadBody>::hash(const SpreadBody& plan) {
  size_t h = plan.prepared->params.hash();
  hash_combine(h, plan.skip);
  return h;
}

namespace {

PreparedShardMap prepare_shard_map(const Program& traced, ShardMapInfo info) {
  PreparedShardMap out;
  auto body = std::make_shared<const Program>(hoist_consts(traced, &out.consts));
  info.in_specs.insert(info.in_specs.begin(), out.consts.size(), PartitionSpec());
  out.params = shard_map_params(std::move(info), body);
  return out;
}

std::vector<Array> bind_prepared(const PreparedShardMap& prepared, std::span<const Array> args) {
  std::vector<Array> operands = prepared.consts;
  operands.insert(operands.end(), args.begin(), args.end());
  return spmd::bind(primitive("shard_map"), operands, prepared.params);
}

std::vector<Array> bind_shard_map(const Program& traced, ShardMapInfo info,
                                  std::span<const Array> args) {
  return bind_prepared(prepare_shard_map(traced, std::move(info)), args);
}

// A shard_map over the same mesh, its specs still to fill in.
ShardMapInfo derived_info(const ShardMapParams& from) {
  return ShardMapInfo{from.mesh, {}, {}, from.check_vma, from.manual};
}

// Manual axes a spec does not mention (the value is replicated over them).
std::vector<std::string> unmentioned(const std::vector<std::string>& manual,
                                     const PartitionSpec& spec) {
  std::vector<std::string> out;
  for (const std::string& a : manual) {
    bool used = false;
    for (int d = 0; d < spec.size() && !used; ++d)
      for (const std::string& b : spec.axes_of(d)) used = used || a == b;
    if (!used) out.push_back(a);
  }
  return out;
}

// How a residual leaves the forward shard_map (JAX's nospec): along its existing leading dim,
// split over the manual axes it varies over (with check_vma) or over every manual axis (without).
PartitionSpec residual_spec(const std::vector<std::string>& manual, const AbstractValue& type,
                            bool check_vma) {
  std::vector<std::string> axes;
  for (const std::string& a : manual)
    if (!check_vma || std::find(type.vma.begin(), type.vma.end(), a) != type.vma.end())
      axes.push_back(a);
  if (axes.empty()) return PartitionSpec();
  return PartitionSpec({PartitionSpec::Entry(AxisNames(axes, true))});
}

// Forward-mode jvp, as JAX's shard_map jvp: one shard_map of the primals and the nonzero
// tangents to the primal outputs and the nonzero output tangents, each tangent with its primal's
// spec.
JvpResult shard_map_joint_jvp(std::span<const Array> primals, std::span<const Array> tangents,
                              const Params& p) {
  const ShardMapParams info = info_of(p);
  const ProgramRef& body = p.get<ProgramRef>("jaxpr");
  auto jinfo = derived_info(info);
  jinfo.in_specs = info.in_specs;
  std::vector<AbstractValue> types = body->in_types();
  std::vector<Array> args(primals.begin(), primals.end());
  for (size_t i = 0; i < tangents.size(); ++i) {
    if (is_zero(tangents[i])) continue;
    AbstractValue t = types[i];
    t.weak_type = false;
    types.push_back(t);
    jinfo.in_specs.push_back(info.in_specs[i]);
    args.push_back(tangents[i]);
  }
  const size_t n = primals.size();
  std::vector<bool> nonzero_out;
  auto fn = [&](std::span<const Array> xs) {
    std::vector<Array> ts;
    size_t j = n;
    for (const Array& t : tangents) ts.push_back(is_zero(t) ? Array() : xs[j++]);
    auto [outs, touts] = jvp_program(*body, xs.first(n), ts);
    for (const Array& t : touts) {
      nonzero_out.push_back(!is_zero(t));
      if (!is_zero(t)) outs.push_back(t);
    }
    return outs;
  };
  Program joint = trace_body(fn, types, info);
  jinfo.out_specs = info.out_specs;
  for (size_t k = 0; k < nonzero_out.size(); ++k)
    if (nonzero_out[k]) jinfo.out_specs.push_back(info.out_specs[k]);
  std::vector<Array> outs = bind_shard_map(joint, jinfo, args);
  std::vector<Array> touts;
  size_t next = info.out_specs.size();
  for (bool nz : nonzero_out) touts.push_back(nz ? outs[next++] : Array());
  outs.resize(info.out_specs.size());
  return {outs, touts};
}

// Makes the residuals that are inputs `constant` marks extras (returned by the forward
// shard_map), keeping the extras in residual order.
void returned_as_residuals(LinearizedBody& lb, std::span<const Array> xs,
                           const std::vector<bool>& constant) {
  std::vector<Array> extras;
  for (ResidualSource& s : lb.residuals) {
    if (s.kind == ResidualSource::Kind::extra) {
      extras.push_back(lb.extras[s.index]);
    } else if (s.kind == ResidualSource::Kind::input && constant[s.index]) {
      extras.push_back(xs[s.index]);
      s.kind = ResidualSource::Kind::extra;
    } else {
      continue;
    }
    s.index = extras.size() - 1;
  }
  lb.extras = std::move(extras);
}

// jvp while linearizing, as JAX's shard_map linearization: one shard_map computes the residuals the
// tangents need, then the primal results; a second, linear in the nonzero tangents, computes the
// nonzero output tangents from the residuals, then the tangents. Residuals that are the body's
// inputs or outputs are not returned again; the others leave along their leading dim (a 0-d one as
// [1], squeezed in the tangent body).
JvpResult shard_map_jvp(std::span<const Array> primals, std::span<const Array> tangents,
                        const Params& p) {
  if (!linearizing(primals, tangents)) return shard_map_joint_jvp(primals, tangents, p);
  const ShardMapParams info = info_of(p);
  const ProgramRef& body = p.get<ProgramRef>("jaxpr");
  std::vector<bool> nonzero;
  for (const Array& t : tangents) nonzero.push_back(!is_zero(t));

  // Operands that are concrete constants of a traced computation (what the body closed over):
  // JAX's partial evaluation forwards only traced inputs, so a residual that is one of these
  // leaves the forward shard_map among the others.
  std::vector<bool> constant(primals.size(), false);
  if (current_trace() || !all_concrete(primals))
    for (size_t i = 0; i < primals.size(); ++i) constant[i] = is_concrete(primals[i]);
  LinearizedBody lb;
  auto primal_fn = [&](std::span<const Array> xs) {
    lb = linearize_body(*body, xs, nonzero, /*scalars_as_residuals=*/true);
    returned_as_residuals(lb, xs, constant);
    std::vector<Array> result;
    for (const Array& r : lb.extras)
      result.push_back(r.ndim() == 0 ? lax::broadcast_in_dim(r, Shape({1}), {}) : r);
    result.insert(result.end(), lb.outs.begin(), lb.outs.end());
    return result;
  };
  Program primal_body = trace_body(primal_fn, body->in_types(), info);
  auto pinfo = derived_info(info);
  pinfo.in_specs = info.in_specs;
  for (const Array& r : lb.extras)
    pinfo.out_specs.push_back(residual_spec(info.manual, aval_of(r), info.check_vma));
  pinfo.out_specs.insert(pinfo.out_specs.end(), info.out_specs.begin(), info.out_specs.end());
  std::vector<Array> outs = bind_shard_map(primal_body, pinfo, primals);
  const std::vector<Array> extras(outs.begin(), outs.begin() + long(lb.extras.size()));
  outs.erase(outs.begin(), outs.begin() + long(lb.extras.size()));

  // The tangent shard_map's operands: the residuals (not those from outside the body, which
  // stay constants of its body), then the nonzero tangents.
  auto tinfo = derived_info(info);
  std::vector<Array> targs;
  std::vector<AbstractValue> ttypes;
  std::vector<int> residual_vars;
  std::vector<bool> squeezed;
  Program linear = lb.tangent;
  linear.constvars.clear();
  linear.consts.clear();
  for (size_t j = 0; j < lb.residuals.size(); ++j) {
    const ResidualSource& s = lb.residuals[j];
    if (s.kind == ResidualSource::Kind::outside) {
      linear.constvars.push_back(lb.tangent.constvars[j]);
      linear.consts.push_back(s.value);
      continue;
    }
    AbstractValue t = lb.tangent.types[size_t(lb.tangent.constvars[j])];
    const bool scalar = s.kind == ResidualSource::Kind::extra && t.shape.ndim() == 0;
    if (scalar) {
      t.shape = Shape({1});
      if (t.sharding) t.sharding->dims.resize(1);
    }
    residual_vars.push_back(lb.tangent.constvars[j]);
    squeezed.push_back(scalar);
    ttypes.push_back(t);
    switch (s.kind) {
      case ResidualSource::Kind::input:
        targs.push_back(primals[s.index]);
        tinfo.in_specs.push_back(info.in_specs[s.index]);
        break;
      case ResidualSource::Kind::output:
        targs.push_back(outs[s.index]);
        tinfo.in_specs.push_back(info.out_specs[s.index]);
        break;
      default:
        targs.push_back(extras[s.index]);
        tinfo.in_specs.push_back(pinfo.out_specs[s.index]);
        break;
    }
  }
  const size_t n_res = residual_vars.size();
  linear.invars.insert(linear.invars.begin(), residual_vars.begin(), residual_vars.end());
  for (size_t i = 0; i < tangents.size(); ++i) {
    if (!nonzero[i]) continue;
    AbstractValue t = body->types[size_t(body->invars[i])];
    t.weak_type = false;
    ttypes.push_back(t);
    tinfo.in_specs.push_back(info.in_specs[i]);
    targs.push_back(tangents[i]);
  }
  for (size_t k = 0; k < lb.nonzero_out.size(); ++k)
    if (lb.nonzero_out[k]) tinfo.out_specs.push_back(info.out_specs[k]);
  if (tinfo.out_specs.empty()) return {outs, std::vector<Array>(outs.size())};
  auto tangent_fn = [&](std::span<const Array> xs) {
    std::vector<Array> args(xs.begin(), xs.end());
    for (size_t r = 0; r < n_res; ++r)
      if (squeezed[r]) args[r] = lax::squeeze(xs[r], {0});
    return eval_program(linear, args);
  };
  Program tangent_body = trace_body(tangent_fn, ttypes, info);
  const std::vector<Array> nonzero_touts = bind_shard_map(tangent_body, tinfo, targs);
  std::vector<Array> touts;
  size_t next = 0;
  for (bool nz : lb.nonzero_out) touts.push_back(nz ? nonzero_touts[next++] : Array());
  return {outs, touts};
}

// Transpose of a shard_map linear in some operands, as JAX's: a shard_map of the transposed body
// from the nonzero output cotangents, then the known operands, to the nonzero cotangents of the
// linear operands. As JAX does without vma checking, cotangents of outputs replicated over mesh
// axes are divided among the replicas and cotangents of replicated operands are summed over
// their replicas.
std::vector<Array> shard_map_transpose(std::span<const Array> cts, std::span<const LinearInput> ins,
                                       const Params& p) {
  const ShardMapParams info = info_of(p);
  const ProgramRef& body = p.get<ProgramRef>("jaxpr");
  std::vector<size_t> known, lin, nonzero_cts;
  for (size_t i = 0; i < ins.size(); ++i) (ins[i].is_linear() ? lin : known).push_back(i);

  auto tinfo = derived_info(info);
  std::vector<Array> args;
  std::vector<AbstractValue> types;
  for (size_t k = 0; k < cts.size(); ++k) {
    if (is_zero(cts[k])) continue;
    nonzero_cts.push_back(k);
    Array c = cts[k];
    int64_t replicas = 1;
    for (const std::string& a : unmentioned(info.manual, info.out_specs[k]))
      replicas *= info.mesh.axis_size(a);
    if (replicas != 1 && !info.check_vma) c = c / Array(double(replicas)).astype(c.dtype());
    args.push_back(c);
    AbstractValue t = body->outputs[k].is_literal() ? aval_of(body->outputs[k].literal)
                                                    : body->types[size_t(body->outputs[k].var)];
    t.weak_type = false;
    types.push_back(t);
    tinfo.in_specs.push_back(info.out_specs[k]);
  }
  for (size_t i : known) {
    args.push_back(ins[i].value);
    types.push_back(body->types[size_t(body->invars[i])]);
    tinfo.in_specs.push_back(info.in_specs[i]);
  }

  std::vector<bool> nonzero_out;
  auto fn = [&](std::span<const Array> xs) {
    Program sub = *body;
    std::vector<int> lin_vars;
    for (size_t j = 0; j < known.size(); ++j) {
      sub.constvars.push_back(body->invars[known[j]]);
      sub.consts.push_back(xs[nonzero_cts.size() + j]);
    }
    for (size_t i : lin) lin_vars.push_back(body->invars[i]);
    sub.invars = lin_vars;
    std::vector<Array> sub_cts(cts.size());
    for (size_t j = 0; j < nonzero_cts.size(); ++j) sub_cts[nonzero_cts[j]] = xs[j];
    sub_cts = transpose_program(sub, sub_cts);
    std::vector<Array> outs;
    for (size_t j = 0; j < lin.size(); ++j) {
      nonzero_out.push_back(!is_zero(sub_cts[j]));
      if (is_zero(sub_cts[j])) continue;
      Array c = sub_cts[j];
      std::vector<std::string> axes = unmentioned(info.manual, info.in_specs[lin[j]]);
      if (!axes.empty() && !info.check_vma) c = psum(c, AxisNames(axes, true));
      outs.push_back(c);
    }
    return outs;
  };
  Program tbody = trace_body(fn, types, info);
  std::vector<Array> out(ins.size());
  for (size_t j = 0; j < lin.size(); ++j)
    if (nonzero_out[j]) tinfo.out_specs.push_back(info.in_specs[lin[j]]);
  if (tinfo.out_specs.empty()) return out;
  std::vector<Array> res = bind_shard_map(tbody, tinfo, args);
  size_t next = 0;
  for (size_t j = 0; j < lin.size(); ++j)
    if (nonzero_out[j]) out[lin[j]] = res[next++];
  return out;
}

// JAX's refusal of specs naming vmap's spmd_axis_name axes.
void check_specs_free_of_spmd_axis(const std::vector<PartitionSpec>& specs, const char* which,
                                   const BatchContext& ctx) {
  for (const PartitionSpec& spec : specs)
    if (names_spmd_axis(spec, ctx))
      throw ValueError(std::string("[shard_map] vmap spmd_axis_name cannot appear in shard_map ") +
                       which);
}

// The batch context of a batched shard_map's body: with spmd_axis_name its blocks hold the
// batch dim split over those axes (JAX's new_size).
BatchContext body_batch_context(const Mesh& mesh, const BatchContext& ctx) {
  BatchContext body = ctx;
  for (const std::string& a : ctx.spmd_axis_name) body.axis_size /= mesh.axis_size(a);
  return body;
}

// Whether the mapped dim is split over Explicit axes of the shard_map's mesh that its body is
// not manual over (the shard_map was traced inside the vmap, as JAX's always is): the body is
// batched with the batch dim whole and typed split over those axes, as JAX's.
bool batch_split_in_types(const ShardMapParams& info, const BatchContext& ctx) {
  if (ctx.explicit_mesh_axis.empty()) return false;
  for (const std::string& a : ctx.explicit_mesh_axis)
    if (std::ranges::count(info.mesh.axis_names(), a) == 0 ||
        info.mesh.axis_type(a) != AxisType::Explicit || std::ranges::count(info.manual, a))
      return false;
  return true;
}

// The batch context a shard_map batches its body with. A batch dim split over Explicit axes its
// body is manual over (a shard_map traced outside the vmap, then batched) is batched as vmap's
// spmd_axis_name would be: split over those axes in the specs, each device computing its share
// of the batch.
BatchContext explicit_axes_as_spmd_axis(const ShardMapParams& info, const BatchContext& ctx) {
  if (ctx.explicit_mesh_axis.empty()) return ctx;
  for (const std::string& a : ctx.explicit_mesh_axis)
    if (std::ranges::count(info.manual, a) == 0 || info.mesh.axis_type(a) != AxisType::Explicit)
      return ctx;
  BatchContext out = ctx;
  out.spmd_axis_name = std::move(out.explicit_mesh_axis);
  out.explicit_mesh_axis.clear();
  return out;
}

// vmap of a shard_map, as JAX's _shard_map_batch: each batched operand keeps its batch dim where
// it is, and its spec gets the dim inserted there, unsplit or split over vmap's spmd_axis_name
// (the specs may not name those axes); the body is batched with its own rules, and each result
// keeps the dim the body gives it (unbatched results keep their spec). A batch dim split over
// Explicit axes the body is not manual over stays whole in the body, its type split over them.
BatchResult shard_map_batch(std::span<const Array> args, std::span<const int> dims, const Params& p,
                            const BatchContext& vmapped) {
  const ShardMapParams info = info_of(p);
  const bool typed_batch = batch_split_in_types(info, vmapped);
  const BatchContext outer = typed_batch ? vmapped : explicit_axes_as_spmd_axis(info, vmapped);
  // Axes that become manual here: the body's types have them Manual, and its batching rules
  // cast what they batch to vary over them.
  std::vector<std::string> newly_manual;
  if (outer.spmd_axis_name != vmapped.spmd_axis_name) newly_manual = outer.spmd_axis_name;
  check_specs_free_of_spmd_axis(info.in_specs, "in_specs", outer);
  check_specs_free_of_spmd_axis(info.out_specs, "out_specs", outer);
  const BatchContext ctx = body_batch_context(info.mesh, outer);
  const ProgramRef& body = p.get<ProgramRef>("jaxpr");
  auto binfo = derived_info(info);
  std::vector<AbstractValue> types;
  for (size_t i = 0; i < args.size(); ++i) {
    AbstractValue t = body->types[size_t(body->invars[i])];
    if (dims[i] == kNotBatched) {
      binfo.in_specs.push_back(info.in_specs[i]);
    } else {
      binfo.in_specs.push_back(batch_spec(info.in_specs[i], dims[i], ctx));
      if (info.check_vma) t.vma = spec_axes(info.mesh, binfo.in_specs.back());
      std::vector<int64_t> d(t.shape.dims().begin(), t.shape.dims().end());
      d.insert(d.begin() + dims[i], ctx.axis_size);
      t.shape = Shape(d);
      // The batch dim is split over the vmapped-away Explicit axes in the body's type, or whole
      // (axes the body is manual over split it in the specs only).
      if (t.sharding)
        t.sharding->dims.insert(
            t.sharding->dims.begin() + dims[i],
            typed_batch ? vmapped.explicit_mesh_axis : std::vector<std::string>{});
    }
    if (!newly_manual.empty())
      t.sharding = manual_block_sharding(info.mesh, info.manual, t.sharding, t.shape.ndim());
    types.push_back(t);
  }
  std::vector<int> out_dims;
  auto fn = [&](std::span<const Array> xs) {
    AxisNamesScope names(AxisNameList::spmd, newly_manual);
    auto [outs, odims] = batch_program(*body, xs, dims, ctx);
    out_dims = std::move(odims);
    return outs;
  };
  Program bbody = trace_body(fn, types, info);
  for (size_t k = 0; k < info.out_specs.size(); ++k)
    binfo.out_specs.push_back(out_dims[k] == kNotBatched
                                  ? info.out_specs[k]
                                  : batch_spec(info.out_specs[k], out_dims[k], ctx));
  std::vector<Array> outs = bind_shard_map(bbody, binfo, args);
  return {outs, out_dims};
}

// A boundary for the partitioner: the specs fix how operands and results split over the mesh,
// and each device runs the body on its blocks. The nested-pmap form runs meshes of its own and
// stays whole.
ShardingRule shard_map_sharding(std::span<const AbstractValue> in,
                                std::span<const AbstractValue> out, const Params& p) {
  if (p.has("spread")) return replicated_sharding_rule(in, out);
  const std::shared_ptr<const RunForm> form = run_form(p);
  const RunForm& run = *form;
  ShardingRule rule;
  auto fixed = [](const PartitionSpec& spec, int rank) {
    ShardingRule::Split split;
    for (int d = 0; d < rank; ++d) split.push_back(spec.axes_of(d));
    return split;
  };
  for (size_t k = 0; k < in.size(); ++k) {
    rule.operands.emplace_back(size_t(in[k].shape.ndim()));
    rule.fixed_operands.push_back(fixed(run.in_specs[k], in[k].shape.ndim()));
  }
  for (size_t k = 0; k < out.size(); ++k) {
    rule.results.emplace_back(size_t(out[k].shape.ndim()));
    rule.fixed_results.push_back(fixed(run.out_specs[k], out[k].shape.ndim()));
    rule.fixed_results_written.push_back(size_t(run.out_specs[k].size()));
  }
  rule.fixed_on = std::get<ObjectParam>(p.at("mesh"));
  return rule;
}

// On its blocks, a shard_map is a call of its body (untyped, as the blocks are).
LocalEquation shard_map_localize(const Params& p, std::span<const AbstractValue>,
                                 std::span<const AbstractValue>) {
  static const Primitive& call = primitive("jit");
  return {&call, Params{{"name", std::string("shard_map")},
                        {"jaxpr", without_unsplit_types(run_form(p)->body)}}};
}

}  // namespace

void register_shard_map_primitive(PrimitiveRegistry& r) {
  Primitive& sm = r.define("shard_map", shard_map_shape_rule, [](const KernelArgs&) {
    throw std::logic_error("[shard_map] runs through its eager rule");
  });
  sm.eager = shard_map_eager;
  // The nested-pmap form it runs instead of its body is not part of what it computes.
  sm.hides_param = [](std::string_view key, const ParamValue&) { return key == "spread"; };
  sm.jvp = shard_map_jvp;
  sm.transpose = shard_map_transpose;
  sm.batch = shard_map_batch;
  sm.sharding_rule = shard_map_sharding;
  sm.localize = shard_map_localize;
}

namespace transform_detail {

struct ShardMapCache {
  using Key = SignatureKey;
  struct Entry {
    PreparedShardMap prepared;
    TreeDef out_def;
  };
  std::mutex mu;
  SignatureCache<std::shared_ptr<const Entry>> entries;  // under mu
};

std::shared_ptr<ShardMapCache> new_shard_map_cache() {
  return std::make_shared<ShardMapCache>();
}

namespace {
PreparedShardMap trace_shard_map(const FlatFn& fn, std::span<const Array> leaves,
                                 const ShardMapCall& call, const std::shared_ptr<TreeDef>& out_def);
}  // namespace

std::vector<Array> shard_map(const FlatFn& fn, std::span<const Array> leaves,
                             const ShardMapCall& call, const std::shared_ptr<TreeDef>& out_def) {
  if (call.mesh.devices().empty())
    throw ValueError("[shard_map] shard_map requires a non-empty mesh. Got " + call.mesh.str());
  // A traced body is reused for the same argument structure and types, unless this call is
  // traced inside another map (its body may then depend on the enclosing axes).
  std::optional<ShardMapCache::Key> key;
  if (call.cache && call.in_def && axis_env().empty()) {
    key = ShardMapCache::Key{*call.in_def, types_of(leaves), {}};
    std::shared_ptr<const ShardMapCache::Entry> hit;
    {
      std::lock_guard lock(call.cache->mu);
      if (std::shared_ptr<const ShardMapCache::Entry>* found = call.cache->entries.find(*key))
        hit = *found;
    }
    if (hit) {
      if (out_def) *out_def = hit->out_def;
      return bind_prepared(hit->prepared, leaves);
    }
  }
  PreparedShardMap prepared = trace_shard_map(fn, leaves, call, out_def);
  bool cacheable = key.has_value();
  for (const Array& c : prepared.consts) cacheable = cacheable && is_concrete(c);
  if (cacheable) {
    auto entry = std::make_shared<ShardMapCache::Entry>(
        ShardMapCache::Entry{prepared, out_def ? *out_def : TreeDef()});
    std::lock_guard lock(call.cache->mu);
    call.cache->entries.insert(*key, std::move(entry));
  }
  return bind_prepared(prepared, leaves);
}

namespace {

// The axes a shard_map traced here is manual over: its mesh's, but for the Explicit axes that
// enclosing vmaps map over (JAX's mesh_axis_names_wo_vmap), in mesh order.
std::vector<std::string> manual_axes(const Mesh& mesh) {
  std::vector<std::string> out;
  for (const std::string& a : mesh.axis_names())
    if (std::ranges::count(explicit_mesh_axis_names(), a) == 0) out.push_back(a);
  return out;
}

// The specs of a spec tree with their key paths in it ("", "[0]", "[1][0]"), depth first.
void spec_tree_leaves(const SpecTree& specs, const std::string& key, std::vector<LeafSpec>& out) {
  if (specs.is_spec()) {
    out.push_back({specs.spec(), key, key});
    return;
  }
  for (size_t i = 0; i < specs.children().size(); ++i)
    spec_tree_leaves(specs.children()[i], key + "[" + std::to_string(i) + "]", out);
}

// JAX's checks of shard_map's specs before tracing: they name axes of the mesh (check's
// ShardingError), and of those the manual ones only (not P::UNCONSTRAINED, not an Explicit axis
// an enclosing vmap maps over: JAX's _check_specs). `which` is "in" or "out".
void check_specs_name_manual_axes(const SpecTree& tree, const Mesh& mesh,
                                  const std::string& which) {
  const std::vector<std::string> manual = manual_axes(mesh);
  std::vector<LeafSpec> specs;
  spec_tree_leaves(tree, "", specs);
  for (const LeafSpec& l : specs) l.spec.check(mesh, "shard_map");
  std::string msgs;
  const std::string refers = "  " + which + "_specs";
  for (const LeafSpec& l : specs)
    for (int d = 0; d < l.spec.size(); ++d) {
      if (l.spec.is_unconstrained(d)) msgs += refers + l.spec_key + " refers to UNCONSTRAINED\n\n";
      for (const std::string& a : l.spec.axes_of(d))
        if (std::ranges::count(manual, a) == 0)
          msgs += refers + l.spec_key + " refers to " + python_repr::quoted(a) + "\n\n";
    }
  if (msgs.empty()) return;
  throw ValueError("[shard_map] shard_map " + which +
                   "_specs argument must refer to an axis marked as manual (" +
                   ParamTraits<ManualAxes>::str(ManualAxes{manual}) + "), but:\n\n" + msgs +
                   "Check the " + which + "_specs values passed to shard_map.");
}

// JAX's check on a mesh whose axes are all Explicit (the axes a vmap maps over aside): each
// argument's type has its in_spec (padded with None to the argument's rank) as its own spec.
void check_specs_match_explicit_types(std::span<const AbstractValue> types,
                                      const std::vector<LeafSpec>& specs, const Mesh& mesh) {
  for (const std::string& a : manual_axes(mesh))
    if (mesh.axis_type(a) != AxisType::Explicit) return;
  for (size_t i = 0; i < types.size(); ++i) {
    const AbstractValue& t = types[i];
    std::vector<PartitionSpec::Entry> want, have;
    bool same = true;
    for (int d = 0; d < t.shape.ndim(); ++d) {
      const std::vector<std::string> axes = specs[i].spec.axes_of(d);
      const std::vector<std::string> typed =
          t.sharding ? t.sharding->dims[size_t(d)] : std::vector<std::string>{};
      want.push_back(axes.empty() ? PartitionSpec::Entry{} : AxisNames(axes, axes.size() > 1));
      have.push_back(typed.empty() ? PartitionSpec::Entry{} : AxisNames(typed, typed.size() > 1));
      same = same && axes == typed;
    }
    if (same) continue;
    throw ValueError(
        "[shard_map] in_specs passed to shard_map: " + PartitionSpec(want).repr() +
        " does not match the specs of the input: " + PartitionSpec(have).repr() +
        " for arg: " + t.typeof_str() +
        ". `in_specs` is an optional argument so you can omit specifying it and shard_map will "
        "infer the in_specs from the arguments. If you want to reshard your inputs, you can use "
        "`jax.reshard` on the arguments and then pass those args to shard_map.");
  }
}

// Checks the call, traces fn on the block types and prepares the equation.
PreparedShardMap trace_shard_map(const FlatFn& fn, std::span<const Array> leaves,
                                 const ShardMapCall& call,
                                 const std::shared_ptr<TreeDef>& out_def) {
  const Mesh& mesh = call.mesh;
  const std::string& name = call.options.name;
  std::vector<AbstractValue> types = types_of(leaves);
  std::vector<LeafSpec> in = leaf_specs(call.in_specs, call.in_def, leaves.size(), "in_specs");
  for (const LeafSpec& l : in) l.spec.check(mesh, "shard_map");
  check_specs_name_manual_axes(call.in_specs, mesh, "in");
  check_specs_name_manual_axes(call.out_specs, mesh, "out");
  check_spec_ranks(types, in, name, "in");
  check_specs_match_explicit_types(types, in, mesh);
  check_divisible(types, in, mesh, name);
  const std::vector<std::string> manual = manual_axes(mesh);
  std::vector<AbstractValue> block_types;
  for (size_t i = 0; i < leaves.size(); ++i) {
    block_types.push_back(block_type(types[i], in[i].spec, mesh, manual));
    if (call.options.check_vma) block_types.back().vma = spec_axes(mesh, in[i].spec);
  }

  ShardMapInfo info{mesh, specs_of(in), {}, call.options.check_vma, manual};
  // The results' specs are known once the function has returned (its result structure is in
  // *out_def then).
  std::vector<LeafSpec> out;
  auto assign_out_specs = [&](size_t n_out) {
    out = leaf_specs(call.out_specs, out_def ? out_def.get() : nullptr, n_out, "out_specs");
    info.out_specs = specs_of(out);
  };
  // With check_vma, a result that does not vary over an axis its out_spec splits is cast to
  // varying there (JAX's pvary at the body's end), so its cotangent is summed over that axis.
  auto body = [&](std::span<const Array> xs) {
    std::vector<Array> outs = fn(xs);
    assign_out_specs(outs.size());
    if (!call.options.check_vma) return outs;
    for (size_t k = 0; k < outs.size(); ++k) {
      std::vector<std::string> missing =
          vma_minus(spec_axes(mesh, out[k].spec), aval_of(outs[k]).vma);
      if (!missing.empty()) outs[k] = pvary(outs[k], AxisNames(missing, true));
    }
    return outs;
  };
  Program traced = trace_body(body, block_types, info);
  const size_t n_out = traced.outputs.size();
  std::vector<AbstractValue> out_types;
  for (const Atom& a : traced.outputs)
    out_types.push_back(a.is_literal() ? aval_of(a.literal) : traced.types[size_t(a.var)]);
  for (const LeafSpec& l : out) l.spec.check(mesh, "shard_map");
  check_spec_ranks(out_types, out, name, "out");
  std::vector<std::string> failures;
  for (size_t k = 0; k < n_out; ++k) {
    const AbstractValue& t = out_types[k];
    if (!info.check_vma) continue;
    std::vector<std::string> allowed = spec_axes(mesh, out[k].spec);
    if (vma_minus(t.vma, allowed).empty()) continue;
    failures.push_back(replication_failure(mesh, out[k].spec, out[k].spec_key, t.vma));
  }
  if (!failures.empty()) throw ShardingError(replication_error(mesh, name, failures));
  return prepare_shard_map(traced, std::move(info));
}

// The product of the sizes of the pmaps whose bodies the calling thread is tracing.
thread_local int64_t t_enclosing_pmap_size = 1;

class EnclosingPmap {
 public:
  explicit EnclosingPmap(int64_t size) : saved_(t_enclosing_pmap_size) {
    t_enclosing_pmap_size *= size;
  }
  ~EnclosingPmap() { t_enclosing_pmap_size = saved_; }
  EnclosingPmap(const EnclosingPmap&) = delete;
  EnclosingPmap& operator=(const EnclosingPmap&) = delete;

 private:
  int64_t saved_;
};

bool inside_another_map() {
  return t_enclosing_pmap_size > 1 || !axis_env().empty();
}

// Traces the outer pmap's body again over one device per instance of every nesting level and
// lets running the equation use that (nested_pmap.h). Left alone when the levels cannot be
// spread or the body closed over traced values.
void spread_nested_pmaps(PreparedShardMap& prepared, const NestingProbe& probe,
                         const std::string& axis, const std::vector<std::optional<int>>& dims,
                         const std::vector<Axis>& out_axes, const FlatFn& fn,
                         const std::string& name, std::span<const Array> operands) {
  OuterPmap outer{axis, prepared.params.get_object<Mesh>("mesh").size(), {}, {}, {}, {}};
  for (size_t i = 0; i < operands.size(); ++i) {
    outer.in_mapped.push_back(dims[i].has_value());
    outer.in_ranks.push_back(operands[i].ndim());
  }
  for (const AbstractValue& t : prepared.params.get<ProgramRef>("jaxpr")->out_types()) {
    outer.out_ranks.push_back(t.shape.ndim());
    outer.out_mapped.push_back(
        out_axes[out_axes.size() == 1 ? 0 : outer.out_mapped.size()].dim.has_value());
  }
  std::optional<SpreadLayout> layout = spread_layout(probe, outer, fn);
  if (!layout) return;
  ShardMapCall call{layout->mesh, layout->in_specs, layout->out_specs,
                    ShardMapOptions{.check_vma = false, .name = name}};
  PreparedShardMap spread = trace_shard_map(layout->body, operands, call, nullptr);
  for (const Array& c : spread.consts)
    if (!is_concrete(c)) return;
  prepared.params.set(
      "spread", object_param(SpreadBody{std::make_shared<const PreparedShardMap>(std::move(spread)),
                                        prepared.consts.size()}));
}

}  // namespace

namespace {

// The `devices` option names real devices, each once. Checked on every call, before tracing, so
// the message names pmap rather than the mesh it builds.
void check_pmap_devices(const std::vector<Device>& devices) {
  runtime::check_devices(devices, "pmap");
  std::set<int> seen;
  for (const Device& d : devices)
    if (!seen.insert(d.id).second)
      throw ValueError("[pmap] a device may appear in `devices` only once, but " + repr(d) +
                       " appears more than once");
}

std::vector<Array> pmap_whole(const FlatFn& fn, std::span<const Array> leaves,
                              const PmapCall& call) {
  const PmapOptions& o = call.options;
  const std::string axis = o.axis_name.empty() ? kInternalAxisName : o.axis_name;
  const bool nested = inside_another_map();
  if (nested)
    if (std::optional<std::vector<Array>> outs = run_direct_pmap(axis, fn, leaves)) return *outs;
  std::vector<std::optional<int>> dims = call.in_dims;
  int64_t n = -1;
  std::string sizes;
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (!dims[i]) continue;
    int nd = leaves[i].ndim();
    int d = *dims[i] < 0 ? *dims[i] + nd : *dims[i];
    if (d < 0 || d >= nd)
      throw ValueError("[pmap] pmap was requested to map its argument along axis " +
                       std::to_string(*dims[i]) +
                       ", which implies that its rank should be at "
                       "least " +
                       std::to_string(*dims[i] < 0 ? -*dims[i] : *dims[i] + 1) + ", but is only " +
                       std::to_string(nd) + " (its shape is " + leaves[i].shape().str() + ")");
    dims[i] = d;
    int64_t size = leaves[i].shape()[d];
    sizes += (sizes.empty() ? "" : ", ") + std::to_string(size);
    if (n >= 0 && size != n)
      throw ValueError("[pmap] pmap got inconsistent sizes for array axes to be mapped: " + sizes);
    n = size;
  }
  if (n < 0) throw ValueError("[pmap] pmap requires at least one argument with a mapped axis.");
  const int64_t required = t_enclosing_pmap_size * n;
  const int64_t available = o.devices.empty() ? device_count() : int64_t(o.devices.size());
  if (required > available)
    throw ValueError("[pmap] compiling computation that requires " + std::to_string(required) +
                     " logical devices, but only " + std::to_string(available) +
                     " devices are available (num_replicas=" + std::to_string(required) + ")");

  if (nested) {
    NestedPmapCall nested_call{axis, n, dims, o.out_axes, !o.devices.empty()};
    if (std::optional<std::vector<Array>> outs = run_gathered_pmap(nested_call, fn, leaves))
      return *outs;
    // Otherwise this pmap's instances become a batch dimension of the enclosing instance (the
    // values are those of separate devices).
    EnclosingPmap enclosing(n);
    NoSpread batched_here;
    std::vector<std::string> names;
    for (size_t i = 0; i < leaves.size(); ++i) names.push_back("argument " + std::to_string(i));
    return probe_nested_pmap(nested_call, fn, leaves, [&](const FlatFn& f) {
      return vmap(f, leaves, dims, o.out_axes, n, axis, names);
    });
  }

  std::vector<Device> devs = o.devices;
  if (devs.empty()) {
    std::vector<Device> all = devices();
    devs.assign(all.begin(), all.begin() + n);
  } else if (int64_t(devs.size()) != n) {
    throw ValueError("[pmap] the mapped axis has size " + std::to_string(n) +
                     " but `devices` lists " + std::to_string(devs.size()) +
                     " devices; give one device per instance");
  }
  Mesh mesh(devs, Shape{n}, {axis});

  const std::vector<Axis>& out_axes = o.out_axes;
  // The whole map: mapped axes to the front, the body on each device's slice, results back to
  // out_axes. Staged (make_jaxpr, jit) it is a call named _fun, as JAX's pmap is.
  auto whole = [&](std::span<const Array> xs) {
    std::vector<Array> moved;
    std::vector<PartitionSpec> in_specs;
    for (size_t i = 0; i < xs.size(); ++i) {
      if (dims[i]) {
        moved.push_back(*dims[i] == 0 ? xs[i] : moveaxis(xs[i], *dims[i], 0));
        in_specs.push_back(P(axis));
      } else {
        moved.push_back(xs[i]);
        in_specs.push_back(P());
      }
    }
    auto body = [&](std::span<const Array> blocks) {
      std::vector<Array> args;
      for (size_t i = 0; i < blocks.size(); ++i)
        args.push_back(dims[i] ? squeeze(blocks[i], {0}) : blocks[i]);
      std::vector<Array> outs = run_pmap_body(fn, args);
      // out_axes are matched against the flat outputs.
      if (out_axes.size() != 1 && out_axes.size() != outs.size())
        throw ValueError("[pmap] " + tuple_prefix_length_error("pmap out_axes", "pmap out_axes",
                                                               out_axes.size(), outs.size()));
      for (size_t k = 0; k < outs.size(); ++k)
        if (out_axes[out_axes.size() == 1 ? 0 : k].dim) outs[k] = expand_dims(outs[k], {0});
      return outs;
    };
    std::vector<PartitionSpec> out_specs;
    for (const Axis& a : out_axes) out_specs.push_back(a.dim ? P(axis) : P());
    ShardMapCall sm{mesh, in_specs,
                    out_axes.size() == 1 ? SpecTree(out_specs[0]) : SpecTree(out_specs),
                    ShardMapOptions{.check_vma = false, .name = o.name}};
    PreparedShardMap prepared;
    {
      EnclosingPmap scope(n);
      NestingProbe probe;
      prepared = trace_shard_map(body, moved, sm, nullptr);
      probe.stop();
      if (o.devices.empty() && !probe.levels.empty())
        spread_nested_pmaps(prepared, probe, axis, dims, out_axes, fn, o.name, moved);
    }
    std::vector<Array> outs = bind_prepared(prepared, moved);
    for (size_t k = 0; k < outs.size(); ++k) {
      const Axis& a = out_axes[out_axes.size() == 1 ? 0 : k];
      if (a.dim && *a.dim != 0) outs[k] = moveaxis(outs[k], 0, *a.dim);
    }
    return outs;
  };
  return whole(leaves);
}

}  // namespace

std::vector<Array> pmap(JitState& state, const TreeDef& in_def, std::span<const Array> leaves,
                        const std::function<FlatFn(std::shared_ptr<TreeDef>)>& make_fn,
                        const PmapCall& call, TreeDef* out_def) {
  check_pmap_devices(call.options.devices);
  if (inside_another_map()) {
    // Nested in another map: no call of its own (pmap_whole maps it over a batch dimension or
    // over the mesh axes of the outermost pmap).
    auto def = std::make_shared<TreeDef>();
    std::vector<Array> outs = pmap_whole(make_fn(def), leaves, call);
    *out_def = *def;
    return outs;
  }
  return jit_call(
      state, in_def, leaves,
      [&](std::shared_ptr<TreeDef> def) {
        FlatFn user = make_fn(std::move(def));
        return FlatFn(
            [user, call](std::span<const Array> xs) { return pmap_whole(user, xs, call); });
      },
      out_def);
}

}  // namespace transform_detail

int64_t localized_body_trace_count() {
  return localized_traces.load();
}

}  // namespace spmd

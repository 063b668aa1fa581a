// DCE, CSE and constant folding over Programs.
#include "compile/passes.h"

#include "compile/executable.h"
#include "compile/fusion.h"
#include "core/env.h"
#include "core/trace.h"
#include "prims/collectives.h"
#include "prims/indexing.h"
#include "prims/primitive.h"

#include <spmd/ops.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace spmd {
namespace {

constexpr int64_t kMaxFoldedElements = 4096;

// Primitives whose result is not a pure function of inputs and params; never removed or merged.
bool has_effects(const Equation& e) {
  return e.primitive->effectful;
}

// Rebuilds the Program keeping only used variables, renumbered densely in definition order.
Program compact(const Program& p, const std::vector<bool>& keep_eqn) {
  Program out;
  std::vector<int> remap(p.types.size(), -1);
  auto def = [&](int v) { return remap[size_t(v)] = out.new_var(p.types[size_t(v)]); };
  auto map_atom = [&](const Atom& a) {
    return a.is_literal() ? a : Atom::of_var(remap[size_t(a.var)]);
  };
  std::vector<bool> used(p.types.size(), false);
  for (size_t i = 0; i < p.equations.size(); ++i)
    if (keep_eqn[i])
      for (const Atom& a : p.equations[i].inputs)
        if (!a.is_literal()) used[size_t(a.var)] = true;
  for (const Atom& a : p.outputs)
    if (!a.is_literal()) used[size_t(a.var)] = true;
  for (size_t i = 0; i < p.constvars.size(); ++i) {
    if (!used[size_t(p.constvars[i])]) continue;
    out.constvars.push_back(def(p.constvars[i]));
    out.consts.push_back(p.consts[i]);
  }
  for (int v : p.invars) out.invars.push_back(def(v));
  for (size_t i = 0; i < p.equations.size(); ++i) {
    if (!keep_eqn[i]) continue;
    const Equation& e = p.equations[i];
    Equation ne{e.primitive, e.params, {}, {}};
    for (const Atom& a : e.inputs) ne.inputs.push_back(map_atom(a));
    for (int v : e.outputs) ne.outputs.push_back(def(v));
    out.equations.push_back(std::move(ne));
  }
  for (const Atom& a : p.outputs) out.outputs.push_back(map_atom(a));
  return out;
}

bool same_literal(const Array& a, const Array& b) {
  if (!(aval_of(a) == aval_of(b))) return false;
  return std::memcmp(host_data(a, "cse"), host_data(b, "cse"), size_t(a.nbytes())) == 0;
}

}  // namespace

Program dead_code_elimination(const Program& p) {
  std::vector<bool> live(p.types.size(), false), keep(p.equations.size(), false);
  for (const Atom& a : p.outputs)
    if (!a.is_literal()) live[size_t(a.var)] = true;
  for (size_t i = p.equations.size(); i-- > 0;) {
    const Equation& e = p.equations[i];
    bool needed = has_effects(e);
    for (int v : e.outputs) needed = needed || live[size_t(v)];
    if (!needed) continue;
    keep[i] = true;
    for (const Atom& a : e.inputs)
      if (!a.is_literal()) live[size_t(a.var)] = true;
  }
  return compact(p, keep);
}

Program common_subexpression_elimination(const Program& p) {
  Program out = p;
  std::vector<int> replace(p.types.size());
  for (size_t v = 0; v < replace.size(); ++v) replace[v] = int(v);
  auto canonical = [&](Atom a) {
    if (!a.is_literal()) a.var = replace[size_t(a.var)];
    return a;
  };
  std::unordered_multimap<size_t, size_t> seen;  // hash -> equation index in `out`
  std::vector<bool> keep(out.equations.size(), true);
  for (size_t i = 0; i < out.equations.size(); ++i) {
    Equation& e = out.equations[i];
    for (Atom& a : e.inputs) a = canonical(a);
    if (has_effects(e)) continue;
    size_t h = std::hash<const void*>{}(e.primitive) ^ (e.params.hash() * 31);
    for (const Atom& a : e.inputs) h = h * 1000003 ^ (a.is_literal() ? 7 : size_t(a.var) + 11);
    bool merged = false;
    auto [lo, hi] = seen.equal_range(h);
    for (auto it = lo; it != hi && !merged; ++it) {
      const Equation& prior = out.equations[it->second];
      if (prior.primitive != e.primitive || !(prior.params == e.params) ||
          prior.inputs.size() != e.inputs.size())
        continue;
      bool same = true;
      for (size_t k = 0; k < e.inputs.size() && same; ++k) {
        const Atom &a = prior.inputs[k], &b = e.inputs[k];
        same = a.is_literal() == b.is_literal() &&
               (a.is_literal() ? same_literal(a.literal, b.literal) : a.var == b.var);
      }
      if (!same) continue;
      for (size_t k = 0; k < e.outputs.size(); ++k)
        replace[size_t(e.outputs[k])] = prior.outputs[k];
      keep[i] = false;
      merged = true;
    }
    if (!merged) seen.emplace(h, i);
  }
  for (Atom& a : out.outputs) a = canonical(a);
  return compact(out, keep);
}

Program constant_folding(const Program& p) {
  ProgramScope scope;
  Program out = p;
  std::vector<Array> known(p.types.size());
  for (size_t i = 0; i < p.constvars.size(); ++i)
    if (is_concrete(p.consts[i])) known[size_t(p.constvars[i])] = p.consts[i];
  std::vector<bool> keep(p.equations.size(), true);
  std::vector<Atom> substitute(p.types.size());
  auto resolve = [&](const Atom& a) {
    if (!a.is_literal() && substitute[size_t(a.var)].literal.valid())
      return substitute[size_t(a.var)];
    return a;
  };
  for (size_t i = 0; i < out.equations.size(); ++i) {
    Equation& e = out.equations[i];
    for (Atom& a : e.inputs) a = resolve(a);
    bool foldable = !e.primitive->eager && !e.primitive->device_dependent && !has_effects(e);
    std::vector<Array> ins;
    for (const Atom& a : e.inputs) {
      Array v = a.is_literal() ? a.literal : known[size_t(a.var)];
      if (!v.valid()) foldable = false;
      ins.push_back(v);
    }
    if (!foldable) continue;
    for (int v : e.outputs) foldable = foldable && p.types[size_t(v)].size() <= kMaxFoldedElements;
    if (!foldable) continue;
    std::vector<Array> outs = spmd::bind(*e.primitive, ins, e.params);
    for (size_t k = 0; k < outs.size(); ++k) {
      int v = e.outputs[k];
      known[size_t(v)] = outs[k];
      if (outs[k].ndim() == 0) {
        substitute[size_t(v)] = Atom::of_literal(outs[k]);
      } else {
        out.constvars.push_back(v);
        out.consts.push_back(outs[k]);
      }
    }
    keep[i] = false;
  }
  for (Atom& a : out.outputs) a = resolve(a);
  // Folded constants were appended after later definitions; compact() renumbers in order.
  return compact(out, keep);
}

namespace {

// Per variable of `p`: how many equation operands and program outputs read it, and the index of
// the equation that defines it (-1 for inputs and constants).
std::pair<std::vector<int>, std::vector<int>> readers_and_producers(const Program& p) {
  std::vector<int> readers(p.types.size(), 0), producer(p.types.size(), -1);
  for (size_t i = 0; i < p.equations.size(); ++i) {
    for (const Atom& a : p.equations[i].inputs)
      if (!a.is_literal()) ++readers[size_t(a.var)];
    for (int v : p.equations[i].outputs) producer[size_t(v)] = int(i);
  }
  for (const Atom& a : p.outputs)
    if (!a.is_literal()) ++readers[size_t(a.var)];
  return {std::move(readers), std::move(producer)};
}

}  // namespace

Program fold_transposed_products(const Program& p) {
  Program out = p;
  out.equations.clear();
  const auto [uses, producer] = readers_and_producers(p);
  // The equation defining `v` when `v` is its only output and only `v`'s reader reads it.
  auto sole_producer = [&](const Atom& a) -> const Equation* {
    if (a.is_literal() || uses[size_t(a.var)] != 1 || producer[size_t(a.var)] < 0) return nullptr;
    const Equation& e = p.equations[size_t(producer[size_t(a.var)])];
    return e.outputs.size() == 1 ? &e : nullptr;
  };
  for (const Equation& t : p.equations) {
    const Equation* dot = nullptr;
    const Equation* between = nullptr;
    if (t.primitive->name == "transpose" &&
        t.params.get_ints("permutation") == std::vector<int64_t>{1, 0})
      dot = sole_producer(t.inputs[0]);
    // A collective acting element by element (the psum of a data-parallel weight gradient)
    // commutes with the transpose: it runs on the transposed product instead.
    if (dot && dot->primitive->per_element_across_devices && dot->inputs.size() == 1 &&
        !p.type_of(dot->inputs[0]).sharding && !p.type_of(t.inputs[0]).sharding) {
      between = dot;
      dot = sole_producer(between->inputs[0]);
    }
    if (!dot || dot->primitive->name != "dot_general") {
      out.equations.push_back(t);
      continue;
    }
    const auto& dn = dot->params.get<lax::DotDimensionNumbers>("dimension_numbers");
    if (!dn.lhs_batch.empty() || p.type_of(dot->inputs[0]).shape.ndim() != 2 ||
        p.type_of(dot->inputs[1]).shape.ndim() != 2) {
      out.equations.push_back(t);
      continue;
    }
    // (A·B)ᵀ = Bᵀ·Aᵀ: the product with its operands swapped gives the transposed result.
    Params params = dot->params;
    params.set("dimension_numbers",
               lax::DotDimensionNumbers{dn.rhs_contracting, dn.lhs_contracting, {}, {}});
    std::vector<int> product_out = t.outputs;
    if (between) {
      AbstractValue type = p.type_of(between->inputs[0]);
      type.shape = p.types[size_t(t.outputs[0])].shape;
      product_out = {out.new_var(type)};
    }
    out.equations.push_back(
        Equation{dot->primitive, std::move(params), {dot->inputs[1], dot->inputs[0]}, product_out});
    if (between)
      out.equations.push_back(
          Equation{between->primitive, between->params, {Atom::of_var(product_out[0])}, t.outputs});
  }
  return out;
}

Program inline_calls(const Program& p) {
  Program out;
  out.types = p.types;
  out.constvars = p.constvars;
  out.consts = p.consts;
  out.invars = p.invars;
  // What each variable of `p` now is: itself, or the atom a call's body produced for it.
  std::vector<Atom> now(p.types.size());
  for (size_t v = 0; v < now.size(); ++v) now[v] = Atom::of_var(int(v));
  auto resolve = [&](const Atom& a) { return a.is_literal() ? a : now[size_t(a.var)]; };
  for (const Equation& e : p.equations) {
    const std::string& key = e.primitive->call_body;
    if (key.empty()) {
      Equation copy = e;
      for (Atom& a : copy.inputs) a = resolve(a);
      out.equations.push_back(std::move(copy));
      continue;
    }
    const Program body =
        inline_calls(e.primitive->inlined_body ? *e.primitive->inlined_body(e.params)
                                               : *e.params.get<ProgramRef>(key));
    std::vector<Atom> local(body.types.size());
    for (size_t i = 0; i < body.constvars.size(); ++i) {
      int v = out.new_var(body.types[size_t(body.constvars[i])]);
      out.constvars.push_back(v);
      out.consts.push_back(body.consts[i]);
      local[size_t(body.constvars[i])] = Atom::of_var(v);
    }
    for (size_t i = 0; i < body.invars.size(); ++i)
      local[size_t(body.invars[i])] = resolve(e.inputs[i]);
    auto map_atom = [&](const Atom& a) { return a.is_literal() ? a : local[size_t(a.var)]; };
    for (const Equation& be : body.equations) {
      Equation copy{be.primitive, be.params, {}, {}};
      for (const Atom& a : be.inputs) copy.inputs.push_back(map_atom(a));
      for (int v : be.outputs) {
        int nv = out.new_var(body.types[size_t(v)]);
        local[size_t(v)] = Atom::of_var(nv);
        copy.outputs.push_back(nv);
      }
      out.equations.push_back(std::move(copy));
    }
    for (size_t k = 0; k < e.outputs.size(); ++k)
      now[size_t(e.outputs[k])] = map_atom(body.outputs[k]);
  }
  for (const Atom& a : p.outputs) out.outputs.push_back(resolve(a));
  return out;
}

std::optional<Atom> scalar_broadcast_source(const Program& p, std::span<const int> producer,
                                            int v) {
  for (;;) {
    int i = producer[size_t(v)];
    if (i < 0 || p.equations[size_t(i)].primitive->name != "broadcast_in_dim") return {};
    const Atom& a = p.equations[size_t(i)].inputs[0];
    if (p.type_of(a).shape.ndim() == 0) return a;
    if (a.is_literal()) return {};
    v = a.var;
  }
}

Program forward_scalar_broadcasts(const Program& p) {
  Program out = p;
  std::vector<int> producer(p.types.size(), -1);
  for (size_t i = 0; i < p.equations.size(); ++i)
    for (int v : p.equations[i].outputs) producer[size_t(v)] = int(i);
  for (Equation& e : out.equations) {
    if (!e.primitive->elementwise) continue;
    std::vector<AbstractValue> expected;
    for (int v : e.outputs) expected.push_back(p.types[size_t(v)]);
    for (Atom& a : e.inputs) {
      if (a.is_literal()) continue;
      std::optional<Atom> scalar = scalar_broadcast_source(p, producer, a.var);
      if (!scalar) continue;
      Atom original = std::exchange(a, *scalar);
      std::vector<AbstractValue> in;
      for (const Atom& b : e.inputs) in.push_back(out.type_of(b));
      bool same = false;
      try {
        std::vector<AbstractValue> got = e.primitive->shape_rule(in, e.params);
        same = got.size() == expected.size();
        for (size_t k = 0; same && k < got.size(); ++k)
          same = got[k].shape == expected[k].shape && got[k].dtype == expected[k].dtype;
      } catch (const std::exception&) {
      }
      if (!same) a = std::move(original);
    }
  }
  return out;
}

Program unit_broadcasts_to_reshapes(const Program& p) {
  Program out = p;
  static const Primitive* const reshape = &primitive("reshape");
  for (Equation& e : out.equations) {
    if (e.primitive->name != "broadcast_in_dim") continue;
    const Shape& to = p.types[size_t(e.outputs[0])].shape;
    // broadcast_dimensions are strictly increasing, so with equal sizes the operand's dims keep
    // their order and every inserted dim has size 1.
    if (p.type_of(e.inputs[0]).shape.size() != to.size()) continue;
    e = Equation{
        reshape,
        Params{{"new_sizes", to.dims()}, {"dimensions", NoneParam{}}, {"sharding", NoneParam{}}},
        {e.inputs[0]},
        e.outputs};
  }
  return out;
}

std::vector<bool> constant_expressions(const Program& p, std::vector<bool> seeds) {
  std::vector<bool> constant = std::move(seeds);
  constant.resize(p.types.size(), false);
  for (int v : p.constvars) constant[size_t(v)] = true;
  for (const Equation& e : p.equations) {
    const Primitive& prim = *e.primitive;
    if (e.outputs.size() != 1 || prim.effectful || prim.device_dependent) continue;
    constant[size_t(e.outputs[0])] =
        (prim.keeps_constants || prim.elementwise) &&
        std::all_of(e.inputs.begin(), e.inputs.end(),
                    [&](const Atom& a) { return a.is_literal() || constant[size_t(a.var)]; });
  }
  return constant;
}

namespace {

// One rewrite of slice_before_elementwise: the dynamic_slice `slice` of the output of `op`, an
// elementwise equation nothing else reads, becomes `op` over slices of its operands. Each
// operand takes the slice's window, except along a dim where it has size 1 (it broadcasts
// there): start 0 and size 1. Operands that are 0-d, or whose window is the whole operand, are
// read as they are. Appends the equations to `out`.
void slice_operands_first(const Program& p, const Equation& op, const Equation& slice,
                          Program& out) {
  const std::vector<int64_t>& sizes = slice.params.get_ints("slice_sizes");
  const Atom& first_start = slice.inputs[1];
  const DType index_dtype = first_start.is_literal() ? first_start.literal.dtype()
                                                     : p.types[size_t(first_start.var)].dtype;
  Equation computed{op.primitive, op.params, {}, slice.outputs};
  for (const Atom& a : op.inputs) {
    const AbstractValue& type = p.type_of(a);
    if (type.shape.ndim() == 0) {
      computed.inputs.push_back(a);
      continue;
    }
    std::vector<int64_t> window(sizes.size());
    std::vector<Atom> operands{a};
    for (size_t d = 0; d < sizes.size(); ++d) {
      const bool broadcasts = type.shape[d] == 1;
      window[d] = broadcasts ? 1 : sizes[d];
      operands.push_back(broadcasts ? Atom::of_literal(zeros({}, index_dtype))
                                    : slice.inputs[d + 1]);
    }
    if (window == type.shape.dims()) {
      computed.inputs.push_back(a);
      continue;
    }
    AbstractValue sliced = type;
    sliced.shape = Shape(window);
    const int v = out.new_var(std::move(sliced));
    out.equations.push_back(Equation{
        &dynamic_slice_primitive(), Params{{"slice_sizes", window}}, std::move(operands), {v}});
    computed.inputs.push_back(Atom::of_var(v));
  }
  out.equations.push_back(std::move(computed));
}

// Whether `e` is an elementwise equation whose operands a slice of its result can be taken from:
// one output, and every operand 0-d or of the output's rank with each dim the output's or 1.
bool sliceable_elementwise(const Program& p, const Equation& e) {
  const Primitive& prim = *e.primitive;
  if (!prim.elementwise || prim.effectful || prim.device_dependent || e.outputs.size() != 1)
    return false;
  const Shape& shape = p.types[size_t(e.outputs[0])].shape;
  return std::all_of(e.inputs.begin(), e.inputs.end(), [&](const Atom& a) {
    const Shape& s = p.type_of(a).shape;
    if (s.ndim() == 0) return true;
    if (s.ndim() != shape.ndim()) return false;
    for (int d = 0; d < s.ndim(); ++d)
      if (s[d] != shape[d] && s[d] != 1) return false;
    return true;
  });
}

// One pass of slice_before_elementwise over `p`; `changed` tells whether it rewrote anything.
Program slice_before_elementwise_once(const Program& p, bool& changed) {
  const auto [readers, producer] = readers_and_producers(p);
  // The elementwise equations to move to their slice, by the slice's index.
  std::unordered_map<size_t, size_t> moved;
  std::vector<bool> skipped(p.equations.size(), false);
  for (size_t i = 0; i < p.equations.size(); ++i) {
    const Equation& e = p.equations[i];
    if (e.primitive != &dynamic_slice_primitive() || e.inputs[0].is_literal()) continue;
    const int v = e.inputs[0].var;
    if (producer[size_t(v)] < 0 || readers[size_t(v)] != 1) continue;
    const size_t op = size_t(producer[size_t(v)]);
    if (!sliceable_elementwise(p, p.equations[op])) continue;
    moved[i] = op;
    skipped[op] = true;
  }
  changed = !moved.empty();
  if (!changed) return p;
  Program out = p;
  out.equations.clear();
  for (size_t i = 0; i < p.equations.size(); ++i) {
    if (skipped[i]) continue;
    auto it = moved.find(i);
    if (it == moved.end())
      out.equations.push_back(p.equations[i]);
    else
      slice_operands_first(p, p.equations[it->second], p.equations[i], out);
  }
  return out;
}

}  // namespace

Program slice_before_elementwise(const Program& p) {
  Program q = p;
  for (bool changed = true; changed;) q = slice_before_elementwise_once(q, changed);
  return q;
}

namespace {

// The collectives' axes as a list of names with their sizes from `axes`; nullopt when a name is
// not there.
std::optional<std::vector<int64_t>> sizes_of(const std::vector<std::string>& names,
                                             const AxisSizes& axes) {
  std::vector<int64_t> out;
  for (const std::string& n : names) {
    auto it = std::find_if(axes.begin(), axes.end(), [&](const auto& a) { return a.first == n; });
    if (it == axes.end()) return std::nullopt;
    out.push_back(it->second);
  }
  return out;
}

// Evaluates 0-d atoms of a program on one device: axis_index over some of `names` (of sizes
// `sizes`) gives that device's index along them, `index` holding its index along each name; other
// equations on 0-d values compute as their primitive does. Anything else
// (an input, a device-dependent or effectful equation, a non-scalar) has no value here.
class DeviceScalars {
 public:
  DeviceScalars(const Program& p, std::span<const int> producer,
                const std::vector<std::string>& names, std::span<const int64_t> sizes,
                std::span<const int64_t> index)
      : p_(p), producer_(producer), names_(names), sizes_(sizes), index_(index) {}

  std::optional<int64_t> integer(const Atom& a) {
    std::optional<Array> v = value(a);
    if (!v || v->ndim() != 0) return std::nullopt;
    if (v->dtype() == DType::int32) return v->item<int32_t>();
    if (v->dtype() == DType::int64) return v->item<int64_t>();
    return std::nullopt;
  }

 private:
  std::optional<Array> value(const Atom& a) {
    if (a.is_literal()) return a.literal;
    auto known = memo_.find(a.var);
    if (known != memo_.end()) return known->second;
    const int i = producer_[size_t(a.var)];
    if (i < 0 || p_.types[size_t(a.var)].shape.ndim() != 0) return std::nullopt;
    std::optional<Array> v = evaluate(p_.equations[size_t(i)], a.var);
    if (v) memo_[a.var] = *v;
    return v;
  }

  std::optional<Array> evaluate(const Equation& e, int var) {
    if (e.primitive == &collectives::axis_index_primitive()) {
      // Over several axes: the index along them, the first major.
      int64_t linear = 0;
      for (const std::string& axis : collectives::read_names(e.params)) {
        auto it = std::find(names_.begin(), names_.end(), axis);
        if (it == names_.end()) return std::nullopt;
        const size_t k = size_t(it - names_.begin());
        linear = linear * sizes_[k] + index_[k];
      }
      return full(Shape(), Array(double(linear)), p_.types[size_t(var)].dtype);
    }
    if (e.primitive->effectful || e.primitive->device_dependent || e.primitive->eager)
      return std::nullopt;
    std::vector<Array> ins;
    for (const Atom& a : e.inputs) {
      std::optional<Array> v = value(a);
      if (!v) return std::nullopt;
      ins.push_back(*v);
    }
    std::vector<Array> outs = spmd::bind(*e.primitive, ins, e.params);
    for (size_t k = 0; k < outs.size(); ++k) memo_[e.outputs[k]] = outs[k];
    return memo_[var];
  }

  const Program& p_;
  std::span<const int> producer_;
  const std::vector<std::string>& names_;
  std::span<const int64_t> sizes_;
  std::span<const int64_t> index_;
  std::unordered_map<int, Array> memo_;
};

// The dim along which dynamic_slice `slice` keeps, of its operand, the block that each device's
// index over `names` (of sizes `sizes`, the first name major) selects: the operand split into
// as many equal blocks as the axes have devices along that dim, whole along the others, and the
// start on every device (evaluated device by device) block index × block size there and 0
// elsewhere. nullopt when the slice is anything else.
std::optional<int> own_block_dim(const Program& p, std::span<const int> producer,
                                 const Equation& slice, const std::vector<std::string>& names,
                                 const std::vector<int64_t>& sizes) {
  const Shape& whole = p.type_of(slice.inputs[0]).shape;
  const std::vector<int64_t>& window = slice.params.get_ints("slice_sizes");
  int64_t devices = 1;
  for (int64_t s : sizes) devices *= s;
  std::optional<int> dim;
  for (int d = 0; d < whole.ndim(); ++d) {
    if (window[size_t(d)] == whole[d]) continue;
    if (dim || window[size_t(d)] * devices != whole[d]) return std::nullopt;
    dim = d;
  }
  if (!dim || devices < 2) return std::nullopt;
  std::vector<int64_t> index(sizes.size(), 0);
  for (int64_t block = 0; block < devices; ++block) {
    for (int64_t rest = block, k = int64_t(sizes.size()) - 1; k >= 0; --k) {
      index[size_t(k)] = rest % sizes[size_t(k)];
      rest /= sizes[size_t(k)];
    }
    DeviceScalars scalars(p, producer, names, sizes, index);
    for (int d = 0; d < whole.ndim(); ++d) {
      const int64_t expected = d == *dim ? block * window[size_t(d)] : 0;
      if (scalars.integer(slice.inputs[size_t(d) + 1]) != expected) return std::nullopt;
    }
  }
  return dim;
}

// Whether collective `e` runs over named axes only, without axis_index_groups, on one operand.
bool plain_collective(const Equation& e) {
  return e.inputs.size() == 1 && e.outputs.size() == 1 && !e.inputs[0].is_literal() &&
         !collectives::read_groups(e.params);
}

// The psum_scatter that gives each device the block `slice` takes of psum `sum`'s result.
Equation scatter_of(const Equation& sum, const Equation& slice,
                    const std::vector<std::string>& names, int64_t devices, int dim) {
  Params params{{"axis_index_groups", collectives::groups_param(std::nullopt)},
                {"axis_name", collectives::tuple_param(names)},
                {"axis_size", devices},
                {"scatter_dimension", int64_t(dim)},
                {"tiled", true}};
  return Equation{&collectives::reduce_scatter_primitive(), std::move(params), sum.inputs,
                  slice.outputs};
}

}  // namespace

Program own_blocks_of_collectives(const Program& p, const AxisSizes& axes) {
  if (axes.empty()) return p;
  const auto [readers, producer] = readers_and_producers(p);
  Program out = p;
  std::vector<bool> keep(p.equations.size(), true);
  std::vector<Atom> substitute(p.types.size());
  // Substitutes are recorded resolved, so that a gather of a block that is itself substituted
  // (all_gather, slice, all_gather, slice) points at a value that stays.
  auto resolve = [&](const Atom& a) {
    return !a.is_literal() && substitute[size_t(a.var)].var >= 0 ? substitute[size_t(a.var)] : a;
  };
  bool changed = false;
  for (size_t i = 0; i < p.equations.size(); ++i) {
    const Equation& slice = p.equations[i];
    if (slice.primitive != &dynamic_slice_primitive() || slice.inputs[0].is_literal()) continue;
    const int from = producer[size_t(slice.inputs[0].var)];
    if (from < 0 || !plain_collective(p.equations[size_t(from)])) continue;
    const Equation& c = p.equations[size_t(from)];
    const bool sum =
        c.primitive == &collectives::psum_primitive() && readers[size_t(slice.inputs[0].var)] == 1;
    const bool gather =
        c.primitive == &collectives::all_gather_primitive() && c.params.get<bool>("tiled");
    if (!sum && !gather) continue;
    const std::vector<std::string> names =
        sum ? collectives::named_axes(collectives::read_axes(c.params))
            : collectives::read_names(c.params);
    if (sum && names.size() != collectives::read_axes(c.params).size()) continue;
    const std::optional<std::vector<int64_t>> sizes = sizes_of(names, axes);
    if (!sizes) continue;
    const std::optional<int> dim = own_block_dim(p, producer, slice, names, *sizes);
    if (!dim) continue;
    changed = true;
    if (sum) {
      int64_t devices = 1;
      for (int64_t s : *sizes) devices *= s;
      out.equations[i] = scatter_of(c, slice, names, devices, *dim);
      keep[size_t(from)] = false;
    } else if (c.params.get_int("all_gather_dimension") == *dim) {
      substitute[size_t(slice.outputs[0])] = resolve(c.inputs[0]);
      keep[i] = false;
    }
  }
  if (!changed) return p;
  for (Equation& e : out.equations)
    for (Atom& a : e.inputs) a = resolve(a);
  for (Atom& a : out.outputs) a = resolve(a);
  return compact(out, keep);
}

namespace {

// The index of an all_to_all in `p` that sends `x` over the axes `names` (no groups), splitting
// dim `split` and concatenating dim 0, tiled; nullopt when there is none.
std::optional<size_t> all_to_all_of(const Program& p, int x, const std::vector<std::string>& names,
                                    int64_t split) {
  for (size_t i = 0; i < p.equations.size(); ++i) {
    const Equation& t = p.equations[i];
    if (t.primitive != &collectives::all_to_all_primitive() || !plain_collective(t) ||
        t.inputs[0].var != x)
      continue;
    if (t.params.get<bool>("tiled") && t.params.get_int("split_axis") == split &&
        t.params.get_int("concat_axis") == 0 && collectives::read_names(t.params) == names)
      return i;
  }
  return std::nullopt;
}

// For sums_from_all_to_alls: the index of the all_to_all whose result, summed over dim 0, is
// psum_scatter `r`'s result (see there), or nullopt.
std::optional<size_t> all_to_all_for(const Program& p, std::span<const int> producer,
                                     const Equation& r) {
  if (r.primitive != &collectives::reduce_scatter_primitive() || !plain_collective(r) ||
      !r.params.get<bool>("tiled"))
    return std::nullopt;
  const int from = producer[size_t(r.inputs[0].var)];
  if (from < 0) return std::nullopt;
  const Equation& sum = p.equations[size_t(from)];
  if (sum.primitive->name != "reduce_sum" || sum.inputs[0].is_literal() ||
      sum.params.get_ints("axes") != std::vector<int64_t>{0})
    return std::nullopt;
  const std::optional<size_t> t =
      all_to_all_of(p, sum.inputs[0].var, collectives::read_names(r.params),
                    r.params.get_int("scatter_dimension") + 1);
  if (!t) return std::nullopt;
  std::vector<int64_t> summed = p.types[size_t(p.equations[*t].outputs[0])].shape.dims();
  summed.erase(summed.begin());
  if (summed != p.types[size_t(r.outputs[0])].shape.dims()) return std::nullopt;
  return t;
}

}  // namespace

Program sums_from_all_to_alls(const Program& p) {
  const auto [readers, producer] = readers_and_producers(p);
  // Per equation, what runs in its place: a psum_scatter's sum, preceded by its all_to_all when
  // that came later (its operand is ready, since the sum's is the same); a moved all_to_all,
  // nothing.
  std::vector<std::optional<std::vector<Equation>>> replaced(p.equations.size());
  for (size_t i = 0; i < p.equations.size(); ++i) {
    const Equation& r = p.equations[i];
    const std::optional<size_t> t = all_to_all_for(p, producer, r);
    if (!t || (*t > i && replaced[*t])) continue;
    const Equation& sum = p.equations[size_t(producer[size_t(r.inputs[0].var)])];
    std::vector<Equation> here;
    if (*t > i) {
      here.push_back(p.equations[*t]);
      replaced[*t].emplace();
    }
    here.push_back(
        Equation{sum.primitive, sum.params, {Atom::of_var(p.equations[*t].outputs[0])}, r.outputs});
    replaced[i] = std::move(here);
  }
  Program out = p;
  out.equations.clear();
  for (size_t i = 0; i < p.equations.size(); ++i) {
    if (!replaced[i])
      out.equations.push_back(p.equations[i]);
    else
      out.equations.insert(out.equations.end(), replaced[i]->begin(), replaced[i]->end());
  }
  return out;
}

namespace {

// Builds split_constant_uses' result: the equations of `p` in order, each use of a splittable
// value (a constant expression or a scalar's broadcast, not 0-d) reading a copy of its own.
class ConstantSplitter {
 public:
  explicit ConstantSplitter(const Program& p) : p_(p), producer_(p.types.size(), -1) {
    for (size_t i = 0; i < p.constvars.size(); ++i) const_index_[p.constvars[i]] = i;
    const std::vector<bool> constant = constant_expressions(p);
    splittable_.assign(p.types.size(), false);
    for (size_t i = 0; i < p.equations.size(); ++i) {
      const Equation& e = p.equations[i];
      for (int v : e.outputs) producer_[size_t(v)] = int(i);
      const Primitive& prim = *e.primitive;
      if (e.outputs.size() != 1 || prim.effectful || prim.device_dependent) continue;
      const bool spread = prim.spreads_scalar && e.inputs.size() == 1 &&
                          p.type_of(e.inputs[0]).shape.ndim() == 0;
      const int out = e.outputs[0];
      splittable_[size_t(out)] =
          (constant[size_t(out)] || spread) && p.types[size_t(out)].shape.ndim() > 0;
    }
    for (int v : p.constvars) splittable_[size_t(v)] = p.types[size_t(v)].shape.ndim() > 0;
  }

  Program run() {
    out_.types = p_.types;
    out_.invars = p_.invars;
    out_.constvars = p_.constvars;
    out_.consts = p_.consts;
    for (const Equation& e : p_.equations) {
      if (e.outputs.size() == 1 && splittable_[size_t(e.outputs[0])]) {
        originals_.push_back(out_.equations.size());
        out_.equations.push_back(e);
        continue;
      }
      Equation use = e;
      for (Atom& a : use.inputs) a = copy_for_use(a);
      out_.equations.push_back(std::move(use));
    }
    for (const Atom& a : p_.outputs) out_.outputs.push_back(copy_for_use(a));
    drop_unused_originals();
    return std::move(out_);
  }

 private:
  Atom copy_for_use(const Atom& a) {
    if (a.is_literal() || !splittable_[size_t(a.var)]) return a;
    std::unordered_map<int, int> copies;
    return Atom::of_var(copy(a.var, copies));
  }

  // A copy of the sub-computation that defines `v`, sharing the values copied for this use.
  int copy(int v, std::unordered_map<int, int>& copies) {
    if (!splittable_[size_t(v)]) return v;
    if (auto it = copies.find(v); it != copies.end()) return it->second;
    int fresh;
    if (producer_[size_t(v)] < 0) {
      fresh = out_.new_var(p_.types[size_t(v)]);
      out_.constvars.push_back(fresh);
      out_.consts.push_back(p_.consts[const_index_.at(v)]);
    } else {
      const Equation& e = p_.equations[size_t(producer_[size_t(v)])];
      Equation c{e.primitive, e.params, {}, {}};
      for (const Atom& a : e.inputs)
        c.inputs.push_back(a.is_literal() ? a : Atom::of_var(copy(a.var, copies)));
      fresh = out_.new_var(p_.types[size_t(v)]);
      c.outputs = {fresh};
      out_.equations.push_back(std::move(c));
    }
    return copies[v] = fresh;
  }

  // The original constant expressions that only other unused originals read, and the
  // constants nothing reads any more.
  void drop_unused_originals() {
    std::vector<bool> used(out_.types.size(), false), original(out_.equations.size(), false),
        keep(out_.equations.size(), true);
    for (size_t i : originals_) original[i] = true;
    for (const Atom& a : out_.outputs)
      if (!a.is_literal()) used[size_t(a.var)] = true;
    for (size_t i = out_.equations.size(); i-- > 0;) {
      const Equation& e = out_.equations[i];
      keep[i] = !original[i] || used[size_t(e.outputs[0])];
      if (!keep[i]) continue;
      for (const Atom& a : e.inputs)
        if (!a.is_literal()) used[size_t(a.var)] = true;
    }
    std::vector<Equation> kept;
    for (size_t i = 0; i < out_.equations.size(); ++i)
      if (keep[i]) kept.push_back(std::move(out_.equations[i]));
    out_.equations = std::move(kept);
    std::vector<int> constvars;
    std::vector<Array> consts;
    for (size_t i = 0; i < out_.constvars.size(); ++i) {
      const int v = out_.constvars[i];
      if (i < p_.constvars.size() && splittable_[size_t(v)] && !used[size_t(v)]) continue;
      constvars.push_back(v);
      consts.push_back(out_.consts[i]);
    }
    out_.constvars = std::move(constvars);
    out_.consts = std::move(consts);
  }

  const Program& p_;
  std::vector<int> producer_;
  std::vector<bool> splittable_;
  std::unordered_map<int, size_t> const_index_;
  std::vector<size_t> originals_;
  Program out_;
};

}  // namespace

Program split_constant_uses(const Program& p) {
  return ConstantSplitter(p).run();
}

namespace {

// Whether the equation meets other devices: a collective (the axes it communicates over), a
// reduction across devices that vmap never batches for its axis name (psum_invariant), or an
// equation whose sub-programs (control flow, calls) hold one.
bool meets_peers(const Equation& e) {
  if (e.primitive->axis_names != nullptr || e.primitive->per_element_across_devices) return true;
  auto any_in = [](const Program& body) {
    return std::any_of(body.equations.begin(), body.equations.end(), meets_peers);
  };
  for (const auto& [name, value] : e.params.items()) {
    if (const auto* body = std::get_if<ProgramRef>(&value); body && any_in(**body)) return true;
    if (const auto* bodies = std::get_if<std::vector<ProgramRef>>(&value))
      for (const ProgramRef& b : *bodies)
        if (any_in(*b)) return true;
  }
  return false;
}

}  // namespace

namespace {

// A value's level: how many meetings lie on the way to it (at least, for a collective, that of
// the collective before it, so that the collectives keep their sequence). An equation runs in
// its level: the collectives of a level first, then the work that reads them.
std::vector<int> meeting_levels(const Program& p, const std::vector<bool>& meets) {
  std::vector<int> level(p.types.size(), 0);
  std::vector<int> at(p.equations.size());
  int last_meeting = 0;
  for (size_t i = 0; i < p.equations.size(); ++i) {
    const Equation& e = p.equations[i];
    int in = 0;
    for (const Atom& a : e.inputs)
      if (!a.is_literal()) in = std::max(in, level[size_t(a.var)]);
    const int here = meets[i] ? (last_meeting = std::max(in + 1, last_meeting)) : in;
    for (int v : e.outputs) level[size_t(v)] = here;
    at[i] = here;
  }
  return at;
}

// The equations of `p` ordered by level (each equation's level in `at`): a level's meetings
// first, then its local work, each in program order.
Program ordered_by_level(const Program& p, const std::vector<bool>& meets,
                         const std::vector<int>& at) {
  std::vector<size_t> order(p.equations.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto key = [&](size_t i) { return 2 * at[i] + (meets[i] ? 0 : 1); };
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return key(a) < key(b); });
  Program out = p;
  out.equations.clear();
  for (size_t i : order) out.equations.push_back(p.equations[i]);
  return out;
}

std::vector<bool> meetings_of(const Program& p) {
  std::vector<bool> meets(p.equations.size());
  for (size_t i = 0; i < meets.size(); ++i) meets[i] = meets_peers(p.equations[i]);
  return meets;
}

}  // namespace

Program local_work_before_collectives(const Program& p) {
  for (const Equation& e : p.equations)
    if (has_effects(e)) return p;
  const std::vector<bool> meets = meetings_of(p);
  return ordered_by_level(p, meets, meeting_levels(p, meets));
}

namespace {

// For combine_collectives: the equations of run [begin, end) of `p`, each of whose equations
// meets its peers, into `out`, an equation of a combinable primitive joining the first earlier
// one of its run with the same primitive and params whose position none of its operands is
// computed at or after (it then meets with that one, earlier than it would alone).
void combine_run(const Program& p, size_t begin, size_t end, std::vector<Equation>& out) {
  struct Open {
    size_t placed;  // its index in `out`
    size_t first;   // the position in `p` of its first equation
  };
  std::vector<Open> open;
  std::unordered_map<int, size_t> defined_at;  // variables computed within the run, by position
  for (size_t i = begin; i < end; ++i) {
    const Equation& e = p.equations[i];
    bool joined = false;
    if (e.primitive->combinable && e.inputs.size() == 1 && e.outputs.size() == 1) {
      for (const Open& o : open) {
        Equation& c = out[o.placed];
        if (c.primitive != e.primitive || !(c.params == e.params)) continue;
        const bool ready = std::all_of(e.inputs.begin(), e.inputs.end(), [&](const Atom& a) {
          if (a.is_literal()) return true;
          auto at = defined_at.find(a.var);
          return at == defined_at.end() || at->second < o.first;
        });
        if (!ready) continue;
        c.inputs.push_back(e.inputs[0]);
        c.outputs.push_back(e.outputs[0]);
        joined = true;
        break;
      }
      if (!joined) open.push_back(Open{out.size(), i});
    }
    if (!joined) out.push_back(e);
    for (int v : e.outputs) defined_at[v] = i;
  }
}

}  // namespace

namespace {

// For combine_collectives: a combinable collective whose results nothing needs before a later
// level holding a collective of the same primitive and params (a later one in program order)
// moves to that level, the work that reads it with it, so that the two can meet once (a bias's
// gradient psum_scatter'd in the level before its weight's). The latest level a collective can
// wait for: the level before the first meeting that reads it (directly or through local work),
// the last level for results only the program's outputs read. The meetings keep their levels
// otherwise; the program is unchanged when nothing can wait.
Program collectives_wait_for_alike(const Program& p) {
  const size_t n = p.equations.size();
  const std::vector<bool> meets = meetings_of(p);
  std::vector<int> at = meeting_levels(p, meets);
  const int last = n == 0 ? 0 : *std::max_element(at.begin(), at.end());
  // need[v]: the latest level at which variable v can be computed (for a collective's result:
  // the latest level of that collective).
  std::vector<int> need(p.types.size(), last);
  bool moved = false;
  for (size_t i = n; i-- > 0;) {
    const Equation& e = p.equations[i];
    int latest = last;
    for (int v : e.outputs) latest = std::min(latest, need[size_t(v)]);
    if (meets[i] && e.primitive->combinable) {
      int target = at[i];
      for (size_t j = i + 1; j < n; ++j) {
        const Equation& d = p.equations[j];
        if (at[j] > target && at[j] <= latest && d.primitive == e.primitive && d.params == e.params)
          target = at[j];
      }
      if (target != at[i]) {
        at[i] = target;
        moved = true;
      }
    }
    // What this equation reads is needed a level earlier when it meets, else at its level.
    const int by = meets[i] ? at[i] - 1 : latest;
    for (const Atom& a : e.inputs)
      if (!a.is_literal()) need[size_t(a.var)] = std::min(need[size_t(a.var)], by);
  }
  if (!moved) return p;
  // Local work runs in the level of its latest operand, the meetings where they were placed.
  std::vector<int> level(p.types.size(), 0);
  for (size_t i = 0; i < n; ++i) {
    const Equation& e = p.equations[i];
    if (!meets[i]) {
      at[i] = 0;
      for (const Atom& a : e.inputs)
        if (!a.is_literal()) at[i] = std::max(at[i], level[size_t(a.var)]);
    }
    for (int v : e.outputs) level[size_t(v)] = at[i];
  }
  return ordered_by_level(p, meets, at);
}

}  // namespace

Program combine_collectives(const Program& leveled) {
  for (const Equation& e : leveled.equations)
    if (has_effects(e)) return leveled;
  const Program p = collectives_wait_for_alike(leveled);
  Program out = p;
  out.equations.clear();
  for (size_t i = 0; i < p.equations.size();) {
    size_t end = i;
    while (end < p.equations.size() && meets_peers(p.equations[end])) ++end;
    if (end == i) {
      out.equations.push_back(p.equations[i++]);
      continue;
    }
    combine_run(p, i, end, out.equations);
    i = end;
  }
  return out;
}

Program optimize(const Program& p, const AxisSizes& axes) {
  CurrentTraceScope eager(nullptr);  // folding computes now, even when called inside a trace
  Program q = common_subexpression_elimination(constant_folding(inline_calls(p)));
  q = dead_code_elimination(fold_transposed_products(forward_scalar_broadcasts(q)));
  q = slice_before_elementwise(unit_broadcasts_to_reshapes(q));
  q = dead_code_elimination(sums_from_all_to_alls(own_blocks_of_collectives(q, axes)));
  // SPMD_FUSION=0 turns fusion off (for comparisons and for isolating a kernel).
  static const bool fuse = env_int("SPMD_FUSION", 0, 1).value_or(1) == 1;
  q = local_work_before_collectives(fuse ? fuse_elementwise(q) : q);
  // SPMD_COMBINE_COLLECTIVES=0 leaves every collective its own meeting (read at each compile, so
  // that a comparison can compile both forms in one process).
  const bool combine = env_int("SPMD_COMBINE_COLLECTIVES", 0, 1).value_or(1) == 1;
  return combine ? combine_collectives(q) : q;
}

}  // namespace spmd

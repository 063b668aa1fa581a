#include "sharding/propagation.h"

#include "ir/primitive.h"
#include "sharding/param_traits.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>

namespace spmd {
namespace {

using AxisList = std::vector<std::string>;

bool is_prefix(const AxisList& a, const AxisList& b) {
  return a.size() <= b.size() && std::equal(a.begin(), a.end(), b.begin());
}

int64_t product(const AxisList& axes, const Mesh& mesh) {
  int64_t n = 1;
  for (const std::string& a : axes) n *= mesh.axis_size(a);
  return n;
}

// Splits the axes of a dim among its factors, major first: a factor takes axes while their
// product divides its size; the next factor takes axes only once the previous one is fully
// split. AxisList past the first that does not fit are left out. A whole-dim factor takes them
// all: the partitioner pads its blocks.
std::vector<AxisList> project_dim(const ShardingRule::Dim& factors, const AxisList& axes,
                                  const ShardingRule& rule, const Mesh& mesh) {
  std::vector<AxisList> out(factors.size());
  if (factors.size() == 1 && rule.whole_dim(factors[0])) {
    out[0] = axes;
    return out;
  }
  size_t next = 0;
  for (size_t i = 0; i < factors.size() && next < axes.size(); ++i) {
    const int64_t size = rule.factor_sizes[size_t(factors[i])];
    int64_t n = 1;
    while (next < axes.size() && size % (n * mesh.axis_size(axes[next])) == 0) {
      n *= mesh.axis_size(axes[next]);
      out[i].push_back(axes[next++]);
      if (n == size) break;
    }
    if (n != size) break;
  }
  return out;
}

// The axes a dim gets from the splits of its factors (the inverse of project_dim).
AxisList join_dim(const ShardingRule::Dim& factors, const std::vector<AxisList>& split,
                  const ShardingRule& rule, const Mesh& mesh) {
  AxisList out;
  for (int f : factors) {
    const AxisList& axes = split[size_t(f)];
    out.insert(out.end(), axes.begin(), axes.end());
    if (product(axes, mesh) != rule.factor_sizes[size_t(f)]) break;
  }
  return out;
}

// The order propagation visits the equations of `p` in: the equations each output depends on,
// producers first, output by output (a depth-first walk back from the outputs in order), then
// the others in program order. Where two uses of a value want it split alike (a tie), the use
// that feeds the earlier output is visited first and wins, as in JAX 0.10.2 (Shardy).
std::vector<size_t> output_order(const Program& p) {
  std::vector<int> producer(p.types.size(), -1);
  for (size_t i = 0; i < p.equations.size(); ++i)
    for (int v : p.equations[i].outputs) producer[size_t(v)] = int(i);
  std::vector<size_t> order;
  std::vector<char> state(p.equations.size(), 0);  // 0 unvisited, 1 entered, 2 placed
  auto visit = [&](int root) {
    std::vector<std::pair<size_t, size_t>> stack;  // (equation, next input to look at)
    if (root < 0 || state[size_t(root)]) return;
    stack.push_back({size_t(root), 0});
    state[size_t(root)] = 1;
    while (!stack.empty()) {
      auto& [i, k] = stack.back();
      const std::vector<Atom>& inputs = p.equations[i].inputs;
      if (k < inputs.size()) {
        const Atom& a = inputs[k++];
        const int q = a.is_literal() ? -1 : producer[size_t(a.var)];
        if (q >= 0 && !state[size_t(q)]) {
          state[size_t(q)] = 1;
          stack.push_back({size_t(q), 0});
        }
        continue;
      }
      state[i] = 2;
      order.push_back(i);
      stack.pop_back();
    }
  };
  for (const Atom& a : p.outputs)
    if (!a.is_literal()) visit(producer[size_t(a.var)]);
  for (size_t i = 0; i < p.equations.size(); ++i) visit(int(i));
  return order;
}

class Propagation {
 public:
  Propagation(const Program& program, const Mesh& mesh) : program_(program), mesh_(mesh) {
    splits_.reserve(program.types.size());
    for (const AbstractValue& t : program.types)
      splits_.push_back(ValueSplit::replicated(t.shape.ndim()));
    rules_.resize(program.equations.size());
    values_.resize(program.equations.size());
    children_.resize(program.equations.size());
    order_ = output_order(program);
    for (size_t i = 0; i < program.equations.size(); ++i) {
      rules_[i] = std::make_unique<ShardingRule>(sharding_rule_of(program, program.equations[i]));
      values_[i] = rules_[i]->body_values();
      for (const ShardingRule::Body& body : rules_[i]->bodies) {
        children_[i].push_back(std::make_unique<Propagation>(*body.program, mesh));
        children_[i].back()->fix_types();
        children_[i].back()->fix_constraints();
      }
    }
  }

  // Given splits of inputs and outputs are even (the jit boundary checks them); a constraint's
  // may split a dim unevenly, which the partitioner pads. The dims in `open` (a constraint's
  // unconstrained dims) start from the given axes and stay open.
  void fix(int var, const ValueSplit& split, const std::vector<bool>& open = {}) {
    ValueSplit& s = splits_[size_t(var)];
    s.dims = split.dims;
    s.dims.resize(s.closed.size());
    for (size_t d = 0; d < s.closed.size(); ++d) s.closed[d] = !(d < open.size() && open[d]);
  }

  // Explicit mode: a type's sharding says where the value lives, as a constraint would. A dim
  // without Explicit axes stays unsplit unless the mesh has Auto axes to give it.
  void fix_types() {
    for (size_t v = 0; v < program_.types.size(); ++v) {
      const std::optional<TypeSharding>& t = program_.types[v].sharding;
      if (!t || !on_mesh(*t)) continue;
      const bool all_explicit =
          std::all_of(t->mesh.begin(), t->mesh.end(),
                      [](const TypeSharding::Axis& a) { return a.is_explicit; });
      ValueSplit& s = splits_[v];
      s.dims = t->dims;
      for (size_t d = 0; d < s.closed.size(); ++d)
        s.closed[d] = all_explicit || !t->dims[d].empty();
    }
  }

  bool on_mesh(const TypeSharding& t) const {
    return std::all_of(t.mesh.begin(), t.mesh.end(), [&](const TypeSharding::Axis& a) {
      return mesh_.axis_position(a.name) >= 0 && mesh_.axis_size(a.name) == a.size;
    });
  }

  void fix_constraints() {
    for (size_t i = 0; i < program_.equations.size(); ++i) {
      const ShardingRule& rule = *rules_[i];
      const Equation& e = program_.equations[i];
      for (size_t r = 0; r < rule.fixed_results.size() && r < e.outputs.size(); ++r)
        fix(e.outputs[r], ValueSplit{rule.fixed_results[r], {}},
            r < rule.open_dims.size() ? rule.open_dims[r] : std::vector<bool>{});
    }
  }

  // Propagates to a fixed point; whether any split changed.
  bool run() {
    bool any = false;
    for (bool elementwise_only : {true, false}) {
      for (int round = 0; round < 64; ++round) {
        bool changed = false;
        for (size_t i : order_) changed |= step(i, elementwise_only);
        for (auto i = order_.rbegin(); i != order_.rend(); ++i) changed |= step(*i, elementwise_only);
        any |= changed;
        if (!changed) break;
      }
    }
    return any;
  }

  std::vector<ValueSplit> take() { return std::move(splits_); }

 private:
  struct Member {
    int var;
    const ShardingRule::Tensor* dims;
    bool operand;
  };

  std::vector<Member> members(size_t i) const {
    const Equation& e = program_.equations[i];
    const ShardingRule& rule = *rules_[i];
    std::vector<Member> out;
    for (size_t k = 0; k < e.inputs.size() && k < rule.operands.size(); ++k)
      if (!e.inputs[k].is_literal()) out.push_back({e.inputs[k].var, &rule.operands[k], true});
    for (size_t k = 0; k < e.outputs.size() && k < rule.results.size(); ++k)
      out.push_back({e.outputs[k], &rule.results[k], false});
    return out;
  }

  // A tensor's split projected onto the rule's factors, and which factors sit in closed dims.
  struct Projected {
    std::vector<AxisList> factors;
    std::vector<bool> holds, closed;
    int64_t size = 1;  // the product of its factors' sizes
  };

  Projected project(const Member& m, const ShardingRule& rule) const {
    const ValueSplit& s = splits_[size_t(m.var)];
    Projected t{std::vector<AxisList>(size_t(rule.num_factors())),
                std::vector<bool>(size_t(rule.num_factors())),
                std::vector<bool>(size_t(rule.num_factors())), 1};
    for (size_t d = 0; d < m.dims->size(); ++d) {
      const ShardingRule::Dim& factors = (*m.dims)[d];
      std::vector<AxisList> parts = project_dim(factors, s.dims[d], rule, mesh_);
      for (size_t j = 0; j < factors.size(); ++j) {
        const size_t f = size_t(factors[j]);
        t.factors[f] = parts[j];
        t.holds[f] = true;
        t.closed[f] = s.closed[d];
        t.size *= rule.factor_sizes[f];
      }
    }
    return t;
  }

  // Shardy's compatible major axes of one factor over every tensor holding it: their common
  // prefix, extended by longer splits until two disagree.
  static AxisList compatible_axes(const std::vector<Projected>& ts, size_t f) {
    std::vector<const AxisList*> held;
    for (const Projected& t : ts)
      if (t.holds[f]) held.push_back(&t.factors[f]);
    return compatible_axes(held);
  }

  static AxisList compatible_axes(const std::vector<const AxisList*>& splits) {
    AxisList result;
    bool can_expand = true;
    for (const AxisList* split : splits) {
      const AxisList& axes = *split;
      size_t k = 0;
      while (k < result.size() && k < axes.size() && result[k] == axes[k]) ++k;
      if (k < result.size() && k < axes.size()) {
        result.resize(k);
        can_expand = false;
      } else if (can_expand && axes.size() > result.size()) {
        result = axes;
      }
    }
    return result;
  }

  // Shardy's aggressive factor propagation: every factor gets its compatible major axes; where
  // factors want the same axis of a tensor, the factor whose source tensor is larger wins (then
  // the more split factor for elementwise ops, the earlier source, the earlier factor). Results
  // are expanded first, then operands; an elementwise operand takes no more than the result.
  void propagate_factors(const ShardingRule& rule, std::vector<Projected>& ts, size_t n_operands,
                         bool elementwise) const {
    const size_t n = size_t(rule.num_factors());
    std::vector<AxisList> want(n);
    for (size_t f = 0; f < n; ++f) want[f] = compatible_axes(ts, f);
    std::vector<int64_t> source_size(n, -1), source_index(n, -1);
    for (size_t t = 0; t < ts.size(); ++t)
      for (size_t f = 0; f < n; ++f)
        if (ts[t].holds[f] && !want[f].empty() && is_prefix(want[f], ts[t].factors[f]) &&
            ts[t].size > source_size[f]) {
          source_size[f] = ts[t].size;
          source_index[f] = int64_t(t);
        }
    std::vector<size_t> order(n);
    for (size_t f = 0; f < n; ++f) order[f] = f;
    std::sort(order.begin(), order.end(), [&](size_t i, size_t j) {
      const int64_t si = elementwise ? product(want[i], mesh_) : 0;
      const int64_t sj = elementwise ? product(want[j], mesh_) : 0;
      return std::tuple(-source_size[i], -si, source_index[i], i) <
             std::tuple(-source_size[j], -sj, source_index[j], j);
    });
    auto expand = [&](Projected& t, bool operand) {
      for (size_t f : order) {
        if (!t.holds[f] || t.closed[f] || want[f].empty()) continue;
        AxisList axes =
            rule.whole_dim(int(f)) ? want[f] : fit_factor(want[f], rule.factor_sizes[f]);
        if (!(t.factors[f].size() < axes.size() && is_prefix(t.factors[f], axes))) continue;
        for (size_t k = t.factors[f].size(); k < axes.size(); ++k)
          for (size_t g = 0; g < n; ++g)
            if (g != f && std::find(t.factors[g].begin(), t.factors[g].end(), axes[k]) !=
                              t.factors[g].end()) {
              axes.resize(k);
              break;
            }
        if (operand && elementwise)
          for (size_t r = n_operands; r < ts.size(); ++r)
            if (ts[r].holds[f] && ts[r].factors[f].size() < axes.size() &&
                is_prefix(ts[r].factors[f], axes))
              axes = ts[r].factors[f];
        if (axes.size() > t.factors[f].size()) t.factors[f] = axes;
      }
    };
    for (size_t t = n_operands; t < ts.size(); ++t) expand(ts[t], false);
    for (size_t t = 0; t < n_operands; ++t) expand(ts[t], true);
  }

  // The leading axes whose product divides the factor's size.
  AxisList fit_factor(const AxisList& axes, int64_t size) const {
    AxisList out;
    int64_t n = 1;
    for (const std::string& a : axes) {
      if (size % (n * mesh_.axis_size(a)) != 0) break;
      n *= mesh_.axis_size(a);
      out.push_back(a);
    }
    return out;
  }

  // Refines the open dims of `var` towards `want` where the current split is a prefix of it
  // and the added axes are free in the value. A dim split unevenly is padded by the
  // partitioner; only the dims in `padded` (whole-dim factors) may be.
  bool refine(int var, const std::vector<AxisList>& want, const std::vector<bool>& padded) {
    ValueSplit& s = splits_[size_t(var)];
    const Shape& shape = program_.types[size_t(var)].shape;
    bool changed = false;
    for (size_t d = 0; d < s.dims.size() && d < want.size(); ++d) {
      if (s.closed[d] || want[d].size() <= s.dims[d].size() || !is_prefix(s.dims[d], want[d]))
        continue;
      AxisList used = s.axes();
      bool free = true;
      for (size_t k = s.dims[d].size(); k < want[d].size(); ++k)
        free = free && std::find(used.begin(), used.end(), want[d][k]) == used.end();
      if (!free || (!padded[d] && shape[int(d)] % product(want[d], mesh_) != 0)) continue;
      s.dims[d] = want[d];
      changed = true;
    }
    return changed;
  }

  // An equation with bodies: each value it shares with its bodies (a carry, an operand a body
  // reads, a result it gives) takes the splits its places agree on, then the bodies propagate
  // inside, and what they found comes back out. A conflict leaves the places apart; the
  // partitioner then reshards at the body's boundary. Uneven splits go through too: the
  // partitioner pads them inside the bodies or gathers them at the boundary.
  bool step_bodies(size_t i) {
    bool changed = false;
    for (const auto& value : values_[i]) changed |= unify(i, value);
    for (const auto& child : children_[i]) changed |= child->run();
    for (const auto& value : values_[i]) changed |= unify(i, value);
    return changed;
  }

  // Where one shared value lives: a variable of this program or of a body, and how many leading
  // dims it has that the body's value has not.
  struct Place {
    Propagation* owner;
    int var;
    int lead;
  };

  std::optional<Place> place_of(size_t i, const ShardingRule::Member& m) {
    const Equation& e = program_.equations[i];
    if (m.body < 0) {
      if (m.output) return Place{this, e.outputs[size_t(m.index)], m.lead};
      const Atom& a = e.inputs[size_t(m.index)];
      return a.is_literal() ? std::nullopt : std::optional<Place>(Place{this, a.var, m.lead});
    }
    Propagation* child = children_[i][size_t(m.body)].get();
    if (!m.output) return Place{child, child->program_.invars[size_t(m.index)], 0};
    const Atom& a = child->program_.outputs[size_t(m.index)];
    return a.is_literal() ? std::nullopt : std::optional<Place>(Place{child, a.var, 0});
  }

  bool unify(size_t i, const std::vector<ShardingRule::Member>& value) {
    std::vector<Place> places;
    for (const ShardingRule::Member& m : value)
      if (std::optional<Place> p = place_of(i, m)) places.push_back(*p);
    if (places.size() < 2) return false;
    const size_t rank =
        places[0].owner->splits_[size_t(places[0].var)].dims.size() - size_t(places[0].lead);
    std::vector<AxisList> want(rank);
    AxisList used;
    for (size_t d = 0; d < rank; ++d) {
      std::vector<const AxisList*> dims;
      for (const Place& p : places)
        dims.push_back(&p.owner->splits_[size_t(p.var)].dims[size_t(p.lead) + d]);
      for (const std::string& a : compatible_axes(dims)) {
        if (std::find(used.begin(), used.end(), a) != used.end()) break;
        want[d].push_back(a);
        used.push_back(a);
      }
    }
    bool changed = false;
    for (const Place& p : places) {
      std::vector<AxisList> full(size_t(p.lead));
      full.insert(full.end(), want.begin(), want.end());
      changed |= p.owner->refine(p.var, full, std::vector<bool>(full.size(), true));
    }
    return changed;
  }

  bool step(size_t i, bool elementwise_only) {
    const Equation& e = program_.equations[i];
    const PrimitiveKind kind = e.primitive->kind;
    if (!rules_[i]->bodies.empty()) return !elementwise_only && step_bodies(i);
    if (elementwise_only && kind != PrimitiveKind::unary && kind != PrimitiveKind::broadcasting)
      return false;
    const ShardingRule& rule = *rules_[i];
    bool changed = false;
    // A constraint's operand may take its split, even or not, as the constraint itself does.
    for (size_t k = 0; k < rule.fixed_operands.size() && k < e.inputs.size(); ++k)
      if (!e.inputs[k].is_literal())
        changed |= refine(e.inputs[k].var, rule.fixed_operands[k],
                          std::vector<bool>(rule.fixed_operands[k].size(), true));
    // Open dims of fixed splits pass splits between operand and result through the factors.
    if ((!rule.fixed_operands.empty() || !rule.fixed_results.empty()) && rule.open_dims.empty())
      return changed;
    std::vector<Member> ms = members(i);
    std::vector<Projected> ts;
    size_t n_operands = 0;
    for (const Member& m : ms) {
      ts.push_back(project(m, rule));
      n_operands += m.operand ? 1 : 0;
    }
    const bool elementwise = kind == PrimitiveKind::unary || kind == PrimitiveKind::broadcasting;
    propagate_factors(rule, ts, n_operands, elementwise);
    for (size_t t = 0; t < ms.size(); ++t) {
      std::vector<AxisList> want;
      std::vector<bool> padded;
      for (const ShardingRule::Dim& dim : *ms[t].dims) {
        want.push_back(join_dim(dim, ts[t].factors, rule, mesh_));
        padded.push_back(dim.size() == 1 && rule.whole_dim(dim[0]));
      }
      changed |= refine(ms[t].var, want, padded);
    }
    return changed;
  }

  const Program& program_;
  const Mesh& mesh_;
  std::vector<ValueSplit> splits_;
  std::vector<std::unique_ptr<ShardingRule>> rules_;
  std::vector<size_t> order_;  // output_order of the program
  // Per equation with bodies: the values it shares with them, and the bodies' propagations.
  std::vector<std::vector<std::vector<ShardingRule::Member>>> values_;
  std::vector<std::vector<std::unique_ptr<Propagation>>> children_;
};

}  // namespace

ValueSplit ValueSplit::of(const PartitionSpec& spec, int rank, bool closed) {
  ValueSplit s = replicated(rank);
  for (int d = 0; d < rank; ++d) s.dims[size_t(d)] = spec.axes_of(d);
  std::fill(s.closed.begin(), s.closed.end(), closed);
  return s;
}

PartitionSpec ValueSplit::spec() const {
  std::vector<PartitionSpec::Entry> entries;
  for (const AxisList& axes : dims) {
    if (axes.empty())
      entries.push_back(std::nullopt);
    else
      entries.push_back(axes.size() == 1 ? AxisNames(axes[0]) : AxisNames(axes, true));
  }
  while (!entries.empty() && !entries.back()) entries.pop_back();
  return PartitionSpec(std::move(entries));
}

std::vector<std::string> ValueSplit::axes() const {
  AxisList out;
  for (const AxisList& d : dims) out.insert(out.end(), d.begin(), d.end());
  return out;
}

Shape block_shape(const Shape& global, const std::vector<std::vector<std::string>>& split,
                  const Mesh& mesh) {
  std::vector<int64_t> dims = global.dims();
  for (size_t d = 0; d < dims.size() && d < split.size(); ++d) {
    const int64_t n = product(split[d], mesh);
    dims[d] = (dims[d] + n - 1) / n;
  }
  return Shape(dims);
}

std::vector<std::vector<std::string>> even_split(std::vector<std::vector<std::string>> split,
                                                 const Shape& shape, const Mesh& mesh) {
  split.resize(size_t(shape.ndim()));
  for (size_t d = 0; d < split.size(); ++d) {
    int64_t n = 1;
    size_t k = 0;
    while (k < split[d].size() && shape[int(d)] % (n * mesh.axis_size(split[d][k])) == 0)
      n *= mesh.axis_size(split[d][k++]);
    split[d].resize(k);
  }
  return split;
}

std::vector<ValueSplit> propagate_shardings(const Program& program, const Mesh& mesh,
                                            const std::vector<std::optional<ValueSplit>>& in,
                                            const std::vector<std::optional<ValueSplit>>& out) {
  Propagation p(program, mesh);
  p.fix_types();
  // A variable given twice (an input returned as it is, an output returned twice) keeps its
  // first split; the partitioner reshards it where it leaves.
  std::vector<char> given(program.types.size(), 0);
  auto fix_once = [&](int var, const ValueSplit& split) {
    if (!std::exchange(given[size_t(var)], 1)) p.fix(var, split);
  };
  for (size_t i = 0; i < in.size() && i < program.invars.size(); ++i)
    if (in[i]) fix_once(program.invars[i], *in[i]);
  for (size_t i = 0; i < out.size() && i < program.outputs.size(); ++i)
    if (out[i] && !program.outputs[i].is_literal()) fix_once(program.outputs[i].var, *out[i]);
  p.fix_constraints();
  p.run();
  return p.take();
}

std::vector<std::vector<std::string>> with_open_dims(std::vector<std::vector<std::string>> split,
                                                     const ShardingRule& rule, const Equation& e,
                                                     size_t k,
                                                     const std::vector<ValueSplit>& splits) {
  if (k >= rule.open_dims.size() || k >= e.outputs.size()) return split;
  const ValueSplit& result = splits[size_t(e.outputs[k])];
  for (size_t d = 0; d < split.size() && d < result.dims.size(); ++d)
    if (rule.is_open(k, d)) split[d] = result.dims[d];
  return split;
}

std::optional<Mesh> fixed_mesh(const ShardingRule& rule) {
  const ParamObject* object = rule.fixed_on.object.get();
  if (!object) return std::nullopt;
  if (auto* mesh = dynamic_cast<const TypedParam<Mesh>*>(object)) return mesh->value();
  using ShardingPtr = std::shared_ptr<const Sharding>;
  if (auto* param = dynamic_cast<const TypedParam<ShardingPtr>*>(object)) {
    const Sharding& sharding = *param->value();
    if (auto* named = dynamic_cast<const NamedSharding*>(&sharding)) return named->mesh();
    return Mesh(sharding.device_list(), Shape{}, {});
  }
  return std::nullopt;
}

}  // namespace spmd

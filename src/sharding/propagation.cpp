#include "sharding/propagation.h"

#include "ir/primitive.h"
#include "sharding/param_traits.h"

#include <algorithm>
#include <memory>

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
// split. AxisList past the first that does not fit are left out.
std::vector<AxisList> project_dim(const ShardingRule::Dim& factors, const AxisList& axes,
                              const ShardingRule& rule, const Mesh& mesh) {
  std::vector<AxisList> out(factors.size());
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

int64_t numel(const AbstractValue& t) {
  return t.shape.size();
}

class Propagation {
 public:
  Propagation(const Program& program, const Mesh& mesh) : program_(program), mesh_(mesh) {
    splits_.reserve(program.types.size());
    for (const AbstractValue& t : program.types)
      splits_.push_back(ValueSplit::replicated(t.shape.ndim()));
    rules_.resize(program.equations.size());
    for (size_t i = 0; i < program.equations.size(); ++i) {
      rules_[i] = std::make_unique<ShardingRule>(sharding_rule_of(program, program.equations[i]));
    }
  }

  void fix(int var, const ValueSplit& split) {
    ValueSplit& s = splits_[size_t(var)];
    s.dims = split.dims;
    s.dims.resize(s.closed.size());
    std::fill(s.closed.begin(), s.closed.end(), true);
  }

  void fix_constraints() {
    for (size_t i = 0; i < program_.equations.size(); ++i) {
      const ShardingRule& rule = *rules_[i];
      const Equation& e = program_.equations[i];
      for (size_t r = 0; r < rule.fixed_results.size() && r < e.outputs.size(); ++r)
        fix(e.outputs[r], ValueSplit{rule.fixed_results[r], {}});
    }
  }

  void run() {
    for (bool elementwise_only : {true, false}) {
      for (int round = 0; round < 64; ++round) {
        bool changed = false;
        for (size_t i = 0; i < program_.equations.size(); ++i)
          changed |= step(i, elementwise_only);
        for (size_t i = program_.equations.size(); i-- > 0;) changed |= step(i, elementwise_only);
        if (!changed) break;
      }
    }
  }

  std::vector<ValueSplit> take() { return std::move(splits_); }

 private:
  struct Member {
    int var;
    const ShardingRule::Tensor* dims;
    int64_t numel;
  };

  std::vector<Member> members(size_t i) const {
    const Equation& e = program_.equations[i];
    const ShardingRule& rule = *rules_[i];
    std::vector<Member> out;
    for (size_t k = 0; k < e.inputs.size() && k < rule.operands.size(); ++k)
      if (!e.inputs[k].is_literal())
        out.push_back({e.inputs[k].var, &rule.operands[k], numel(program_.type_of(e.inputs[k]))});
    for (size_t k = 0; k < e.outputs.size() && k < rule.results.size(); ++k)
      out.push_back(
          {e.outputs[k], &rule.results[k], numel(program_.types[size_t(e.outputs[k])])});
    return out;
  }

  // Each factor's split, from the splits of the tensors that hold it, in operand order: the
  // longest of compatible ones; between incompatible ones, the larger tensor's, and none when
  // they are the same size. An axis that an earlier tensor gave another factor is not taken.
  std::vector<AxisList> factor_splits(const ShardingRule& rule,
                                      const std::vector<Member>& ms) const {
    std::vector<AxisList> best(size_t(rule.num_factors()));
    std::vector<int64_t> best_numel(best.size(), -1);
    auto claimed_elsewhere = [&](const std::string& axis, size_t f) {
      for (size_t g = 0; g < best.size(); ++g)
        if (g != f && std::find(best[g].begin(), best[g].end(), axis) != best[g].end()) return true;
      return false;
    };
    for (const Member& m : ms) {
      const ValueSplit& s = splits_[size_t(m.var)];
      for (size_t d = 0; d < m.dims->size(); ++d) {
        const ShardingRule::Dim& factors = (*m.dims)[d];
        std::vector<AxisList> parts = project_dim(factors, s.dims[d], rule, mesh_);
        for (size_t j = 0; j < factors.size(); ++j) {
          const size_t f = size_t(factors[j]);
          AxisList c = parts[j];
          auto taken = std::find_if(c.begin(), c.end(),
                                    [&](const std::string& a) { return claimed_elsewhere(a, f); });
          c.erase(taken, c.end());
          if (c.empty()) continue;
          if (is_prefix(best[f], c) && best_numel[f] != -2) {
            best[f] = c;
          } else if (is_prefix(c, best[f])) {
            continue;
          } else if (m.numel > best_numel[f]) {
            best[f] = c;
          } else if (m.numel == best_numel[f]) {
            best[f].clear();
            best_numel[f] = -2;  // a tie between conflicting splits: the factor stays unsplit
            continue;
          }
          best_numel[f] = std::max(best_numel[f], m.numel);
        }
      }
    }
    return best;
  }

  // Refines the open dims of `var` towards `want` where the current split is a prefix of it
  // and the added axes are free in the value.
  bool refine(int var, const std::vector<AxisList>& want) {
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
      if (!free || shape[int(d)] % product(want[d], mesh_) != 0) continue;
      s.dims[d] = want[d];
      changed = true;
    }
    return changed;
  }

  bool step(size_t i, bool elementwise_only) {
    const Equation& e = program_.equations[i];
    const PrimitiveKind kind = e.primitive->kind;
    if (elementwise_only && kind != PrimitiveKind::unary && kind != PrimitiveKind::broadcasting)
      return false;
    const ShardingRule& rule = *rules_[i];
    bool changed = false;
    for (size_t k = 0; k < rule.fixed_operands.size() && k < e.inputs.size(); ++k)
      if (!e.inputs[k].is_literal()) changed |= refine(e.inputs[k].var, rule.fixed_operands[k]);
    if (!rule.fixed_operands.empty() || !rule.fixed_results.empty()) return changed;
    std::vector<Member> ms = members(i);
    std::vector<AxisList> factors = factor_splits(rule, ms);
    for (const Member& m : ms) {
      std::vector<AxisList> want;
      for (const ShardingRule::Dim& dim : *m.dims)
        want.push_back(join_dim(dim, factors, rule, mesh_));
      changed |= refine(m.var, want);
    }
    return changed;
  }

  const Program& program_;
  const Mesh& mesh_;
  std::vector<ValueSplit> splits_;
  std::vector<std::unique_ptr<ShardingRule>> rules_;
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
  for (size_t d = 0; d < dims.size() && d < split.size(); ++d) dims[d] /= product(split[d], mesh);
  return Shape(dims);
}

std::vector<ValueSplit> propagate_shardings(const Program& program, const Mesh& mesh,
                                            const std::vector<std::optional<ValueSplit>>& in,
                                            const std::vector<std::optional<ValueSplit>>& out) {
  Propagation p(program, mesh);
  for (size_t i = 0; i < in.size() && i < program.invars.size(); ++i)
    if (in[i]) p.fix(program.invars[i], *in[i]);
  for (size_t i = 0; i < out.size() && i < program.outputs.size(); ++i)
    if (out[i] && !program.outputs[i].is_literal()) p.fix(program.outputs[i].var, *out[i]);
  p.fix_constraints();
  p.run();
  return p.take();
}

std::optional<Mesh> fixed_mesh(const ShardingRule& rule) {
  const ParamObject* object = rule.fixed_on.object.get();
  if (!object) return std::nullopt;
  if (auto* mesh = dynamic_cast<const TypedParam<Mesh>*>(object)) return mesh->value();
  return std::nullopt;
}

}  // namespace spmd

#include "ir/sharding_rule.h"

#include "ir/primitive.h"
#include "ir/program.h"

#include <algorithm>

namespace spmd {
namespace {

// Shardy names factors i, j, k, ... and continues with z1, z2, ... past z.
std::string factor_name(int f) {
  if (f < 18) return std::string(1, char('i' + f));
  std::string name = "z";
  name += std::to_string(f - 17);
  return name;
}

std::string tensors_str(const std::vector<ShardingRule::Tensor>& tensors) {
  std::string s = "(";
  for (size_t t = 0; t < tensors.size(); ++t) {
    s += t ? ", [" : "[";
    for (size_t d = 0; d < tensors[t].size(); ++d) {
      if (d) s += ", ";
      if (tensors[t][d].empty()) s += "1";
      for (int f : tensors[t][d]) s += factor_name(f);
    }
    s += "]";
  }
  return s + ")";
}

std::string factors_of_kind(const ShardingRule& rule, FactorKind kind, const char* label) {
  std::string s;
  for (int f = 0; f < rule.num_factors(); ++f)
    if (rule.factor_kinds[size_t(f)] == kind) s += (s.empty() ? "" : ", ") + factor_name(f);
  return s.empty() ? "" : std::string(" ") + label + "={" + s + "}";
}

}  // namespace

int ShardingRule::add_factor(int64_t size, FactorKind kind) {
  factor_sizes.push_back(size);
  factor_kinds.push_back(kind);
  factor_pads.push_back(false);
  return num_factors() - 1;
}

void ShardingRule::pad_all() {
  factor_pads.assign(factor_sizes.size(), true);
}

bool ShardingRule::whole_dim(int f) const {
  for (const auto* tensors : {&operands, &results})
    for (const Tensor& t : *tensors)
      for (const Dim& dim : t)
        if (dim.size() > 1 && std::find(dim.begin(), dim.end(), f) != dim.end()) return false;
  return true;
}

std::vector<std::vector<ShardingRule::Member>> ShardingRule::body_values() const {
  // Union-find over slots: operands, results, then each body's inputs and outputs.
  std::vector<Member> slots;
  for (size_t k = 0; k < operands.size(); ++k) slots.push_back({-1, int(k), false, 0});
  for (size_t r = 0; r < results.size(); ++r) slots.push_back({-1, int(r), true, 0});
  std::vector<int> parent(slots.size());
  auto find = [&parent](int s) {
    while (parent[size_t(s)] != s) s = parent[size_t(s)] = parent[size_t(parent[size_t(s)])];
    return s;
  };
  auto join = [&](int a, int b) { parent[size_t(find(a))] = find(b); };
  for (size_t s = 0; s < parent.size(); ++s) parent[s] = int(s);
  const int n_operands = int(operands.size());
  auto add = [&](int body, size_t i, bool output, const Link& link) {
    slots.push_back({body, int(i), output, 0});
    parent.push_back(int(parent.size()));
    if (link.index < 0) return;
    const int outer = output ? n_operands + link.index : link.index;
    slots[size_t(outer)].lead = link.lead;
    join(int(slots.size()) - 1, outer);
  };
  for (size_t b = 0; b < bodies.size(); ++b) {
    for (size_t i = 0; i < bodies[b].inputs.size(); ++i) add(int(b), i, false, bodies[b].inputs[i]);
    for (size_t i = 0; i < bodies[b].outputs.size(); ++i)
      add(int(b), i, true, bodies[b].outputs[i]);
  }
  for (auto [operand, result] : carries) join(operand, n_operands + result);
  std::vector<std::vector<Member>> values;
  std::vector<int> value_of(slots.size(), -1);
  for (size_t s = 0; s < slots.size(); ++s) {
    int& v = value_of[size_t(find(int(s)))];
    if (v < 0) {
      v = int(values.size());
      values.emplace_back();
    }
    values[size_t(v)].push_back(slots[s]);
  }
  return values;
}

std::string ShardingRule::str() const {
  std::string s = tensors_str(operands) + "->" + tensors_str(results) + " {";
  for (int f = 0; f < num_factors(); ++f)
    s += (f ? ", " : "") + factor_name(f) + "=" + std::to_string(factor_sizes[size_t(f)]);
  s += "}";
  s += factors_of_kind(*this, FactorKind::reduction, "reduction");
  s += factors_of_kind(*this, FactorKind::need_replication, "need_replication");
  s += factors_of_kind(*this, FactorKind::permutation, "permutation");
  return s;
}

ShardingRule elementwise_sharding_rule(std::span<const AbstractValue> in,
                                       std::span<const AbstractValue> out) {
  ShardingRule rule;
  const Shape& shape = out.front().shape;
  ShardingRule::Tensor dims;
  for (int d = 0; d < shape.ndim(); ++d) dims.push_back({rule.add_factor(shape[d])});
  for (const AbstractValue& t : in) {
    // Size-1 dims that broadcast, like every dim of a scalar, have no factor.
    ShardingRule::Tensor operand(size_t(t.shape.ndim()));
    if (t.shape.ndim() == shape.ndim())
      for (int d = 0; d < shape.ndim(); ++d)
        if (t.shape[d] == shape[d]) operand[size_t(d)] = dims[size_t(d)];
    rule.operands.push_back(std::move(operand));
  }
  rule.results.assign(out.size(), dims);
  rule.pad_all();
  return rule;
}

ShardingRule replicated_sharding_rule(std::span<const AbstractValue> in,
                                      std::span<const AbstractValue> out) {
  ShardingRule rule;
  auto add = [&rule](const AbstractValue& t) {
    ShardingRule::Tensor dims;
    for (int d = 0; d < t.shape.ndim(); ++d)
      dims.push_back({rule.add_factor(t.shape[d], FactorKind::need_replication)});
    return dims;
  };
  for (const AbstractValue& t : in) rule.operands.push_back(add(t));
  for (const AbstractValue& t : out) rule.results.push_back(add(t));
  return rule;
}

ShardingRule sharding_rule_of(const Program& program, const Equation& e) {
  std::vector<AbstractValue> in, out;
  for (const Atom& a : e.inputs) in.push_back(program.type_of(a));
  for (int v : e.outputs) out.push_back(program.types[size_t(v)]);
  if (!e.primitive->sharding_rule) return replicated_sharding_rule(in, out);
  return e.primitive->sharding_rule(in, out, e.params);
}

}  // namespace spmd

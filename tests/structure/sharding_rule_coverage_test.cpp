// Every primitive has a sharding rule (ir/sharding_rule.h), and a rule describes the equation it
// is asked about: one tensor per operand and result, one dim per tensor dim, factors whose sizes
// multiply to the dim's size, reduction factors only in operands.
#include "ir/program.h"
#include "prims/primitive.h"

#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

namespace sp = spmd;

namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

std::vector<std::string> primitives_without_rule() {
  std::vector<std::string> missing;
  for (const std::string& name : sp::primitive_registry().names())
    if (!sp::primitive(name).sharding_rule) missing.push_back(name);
  return missing;
}

TEST(ShardingRuleCoverage, EveryPrimitiveHasARule) {
  const std::vector<std::string> missing = primitives_without_rule();
  EXPECT_TRUE(missing.empty()) << "primitives without a sharding rule: " << joined(missing);
}

// What is wrong with `rule` as the rule of an equation of these types; empty when nothing is.
std::string rule_faults(const sp::ShardingRule& rule, std::span<const sp::AbstractValue> in,
                        std::span<const sp::AbstractValue> out) {
  const int n = rule.num_factors();
  if (rule.factor_kinds.size() != rule.factor_sizes.size()) return "factor kinds and sizes differ";
  std::vector<int> in_results(size_t(n), 0), uses(size_t(n), 0);
  auto check = [&](const std::vector<sp::ShardingRule::Tensor>& tensors,
                   std::span<const sp::AbstractValue> types, const char* what,
                   bool result) -> std::string {
    if (tensors.size() != types.size())
      return std::to_string(tensors.size()) + " " + what + " tensors for " +
             std::to_string(types.size()) + " " + what;
    for (size_t t = 0; t < types.size(); ++t) {
      const sp::Shape& shape = types[t].shape;
      const std::string where = std::string(what) + " " + std::to_string(t);
      if (int(tensors[t].size()) != shape.ndim()) return where + ": wrong number of dims";
      std::set<int> seen;
      for (int d = 0; d < shape.ndim(); ++d) {
        int64_t size = 1;
        bool permuted = false;  // a permutation factor has the result's extent in every tensor
        for (int f : tensors[t][size_t(d)]) {
          if (f < 0 || f >= n) return where + ": unknown factor " + std::to_string(f);
          if (!seen.insert(f).second) return where + ": factor used twice";
          size *= rule.factor_sizes[size_t(f)];
          permuted = permuted || rule.factor_kinds[size_t(f)] == sp::FactorKind::permutation;
          ++uses[size_t(f)];
          in_results[size_t(f)] += result ? 1 : 0;
        }
        if (size != shape[d] && !permuted)
          return where + " dim " + std::to_string(d) + ": factors of size " + std::to_string(size) +
                 " for a dim of size " + std::to_string(shape[d]);
      }
    }
    return "";
  };
  if (std::string f = check(rule.operands, in, "operand", false); !f.empty()) return f;
  if (std::string f = check(rule.results, out, "result", true); !f.empty()) return f;
  for (int f = 0; f < n; ++f) {
    const sp::FactorKind kind = rule.factor_kinds[size_t(f)];
    if (!uses[size_t(f)]) return "factor " + std::to_string(f) + " is used nowhere";
    if (kind == sp::FactorKind::reduction && in_results[size_t(f)])
      return "reduction factor " + std::to_string(f) + " appears in a result";
    if (kind == sp::FactorKind::pass_through && !in_results[size_t(f)])
      return "pass-through factor " + std::to_string(f) + " appears in no result";
  }
  return "";
}

std::string types_str(std::span<const sp::AbstractValue> types) {
  std::string s;
  for (const sp::AbstractValue& t : types) s += (s.empty() ? "" : ", ") + t.str();
  return s;
}

// Checks the rule of `p` on these operand types and params; false when the primitive rejects
// them (abstract_eval throws).
bool check_rule_on(const sp::Primitive& p, const std::vector<sp::AbstractValue>& in,
                   const sp::Params& params) {
  std::vector<sp::AbstractValue> out;
  try {
    out = sp::abstract_eval(p, in, params);
  } catch (const std::exception&) {
    return false;
  }
  const sp::ShardingRule rule = p.sharding_rule(in, out, params);
  EXPECT_EQ(rule_faults(rule, in, out), "")
      << p.name << " on (" << types_str(in) << "): " << rule.str();
  return true;
}

// Operands for the kinds' defaults: a full operand, one broadcasting along a size-1 dim, a
// scalar, and one broadcasting along another dim.
std::vector<std::vector<sp::AbstractValue>> kind_candidates(const sp::Primitive& p) {
  std::vector<std::vector<sp::AbstractValue>> out;
  const sp::Shape shapes[] = {sp::Shape{2, 3, 4}, sp::Shape{1, 3, 4}, sp::Shape{},
                              sp::Shape{2, 1, 4}};
  for (sp::DType t : {sp::float32, sp::int32, sp::uint32, sp::bool_}) {
    for (size_t arity = 1; arity <= 4; ++arity) {
      if (p.kind != sp::PrimitiveKind::broadcasting && arity > 1) break;
      std::vector<sp::AbstractValue> in;
      for (size_t i = 0; i < arity; ++i) in.push_back({shapes[i], t, false});
      out.push_back(in);
    }
  }
  return out;
}

// Params the kinds' primitives read: the reduced or scanned axes, and the few that elementwise
// primitives take.
sp::Params kind_params() {
  return {{"axes", std::vector<int64_t>{1}},
          {"axis", int64_t{1}},
          {"reverse", false},
          {"y", int64_t{2}},
          {"new_dtype", sp::float32},
          {"weak_type", false},
          {"sharding", sp::NoneParam{}},
          {"exponent_bits", int64_t{5}},
          {"mantissa_bits", int64_t{10}},
          {"accuracy", sp::NoneParam{}},
          {"out_sharding", sp::NoneParam{}},
          {"index_dtype", sp::int32}};
}

TEST(ShardingRuleCoverage, KindRulesDescribeTheirEquations) {
  std::vector<std::string> unchecked;
  for (const std::string& name : sp::primitive_registry().names()) {
    const sp::Primitive& p = sp::primitive(name);
    if (p.kind == sp::PrimitiveKind::other || !p.sharding_rule) continue;
    bool checked = false;
    for (const auto& in : kind_candidates(p))
      checked = check_rule_on(p, in, kind_params()) || checked;
    if (!checked) unchecked.push_back(name);
  }
  EXPECT_TRUE(unchecked.empty()) << "no operand types found for: " << joined(unchecked);
}

// Every equation of `program` and of the programs its params hold.
void for_each_equation(const sp::Program& program,
                       const std::function<void(const sp::Program&, const sp::Equation&)>& visit) {
  for (const sp::Equation& e : program.equations) {
    visit(program, e);
    for (const auto& [key, value] : e.params.items()) {
      if (const auto* sub = std::get_if<sp::ProgramRef>(&value)) for_each_equation(**sub, visit);
      if (const auto* subs = std::get_if<std::vector<sp::ProgramRef>>(&value))
        for (const sp::ProgramRef& sub : *subs) for_each_equation(*sub, visit);
    }
  }
}

sp::Array traced_ops(const sp::Array& x, const sp::Array& i) {
  sp::Array y = sp::take(x, i, 0);                          // gather
  y = y + sp::sort(y, 1);                                   // sort
  y = y + sp::lax::dynamic_slice(x, {i[0], i[1]}, {3, 6});  // dynamic_slice
  y = sp::lax::dynamic_update_slice(y, sp::lax::expand_dims(x[0], {0}), {i[2], i[0]});
  y = y * sp::random::uniform(sp::random::key(0), {3, 6});  // threefry2x32, iota_2x32_shape
  y = sp::jit([](const sp::Array& a) { return sp::cumsum(a, 1); })(y);
  y = sp::lax::cond(
      sp::sum(y) > 0.0f, [](const sp::Array& a) { return a * 2.0f; },
      [](const sp::Array& a) { return a; }, y);
  return sp::lax::fori_loop(
      0, 3, [](const sp::Array&, const sp::Array& a) { return a + 1.0f; }, y);
}

// The rules of equations as programs hold them, with their params, including scatter-add from
// the gradient of take.
TEST(ShardingRuleCoverage, RulesDescribeTracedEquations) {
  const sp::Array x = sp::zeros({4, 6}), i = sp::array({2, 0, 3});
  auto loss = [](const sp::Array& a, const sp::Array& idx) { return sp::sum(traced_ops(a, idx)); };
  std::set<std::string> seen;
  // while is not reverse-differentiable.
  auto looped = [](const sp::Array& a, const sp::Array& idx) {
    return sp::lax::while_loop([](const sp::Array& y) { return sp::sum(y) < 10.0f; },
                               [](const sp::Array& y) { return y + 1.0f; }, traced_ops(a, idx));
  };
  for (const auto& jaxpr : {sp::make_jaxpr(looped)(x, i), sp::make_jaxpr(sp::grad(loss))(x, i)})
    for_each_equation(jaxpr.program(), [&](const sp::Program& program, const sp::Equation& e) {
      const sp::Primitive& p = *e.primitive;
      if (!p.sharding_rule) return;
      std::vector<sp::AbstractValue> in, out;
      for (const sp::Atom& a : e.inputs) in.push_back(program.type_of(a));
      for (int v : e.outputs) out.push_back(program.types[size_t(v)]);
      const sp::ShardingRule rule = p.sharding_rule(in, out, e.params);
      EXPECT_EQ(rule_faults(rule, in, out), "")
          << p.name << " on (" << types_str(in) << "): " << rule.str();
      seen.insert(p.name);
    });
  for (const char* name :
       {"gather", "scatter-add", "sort", "dynamic_slice", "dynamic_update_slice", "threefry2x32",
        "iota_2x32_shape", "jit", "cond", "scan", "while", "cumsum", "reduce_sum"})
    EXPECT_TRUE(seen.count(name)) << name << " not traced";
}

}  // namespace

// custom_jvp: a function with a user-supplied jvp rule. It is staged as `custom_jvp_call`, which
// evaluates the function; its jvp rule calls the user's rule, whose tangent operations are
// ordinary (linear) primitives, so reverse mode transposes them as usual. Batching keeps the
// custom rule: the function's Program and the rule are both vmapped.
#include <spmd/error.h>
#include <spmd/transforms.h>

#include "prims/families.h"
#include "prims/primitive.h"
#include "prims/rule_util.h"
#include "transforms/interpreters.h"
#include "transforms/staging.h"

namespace spmd {
namespace {

struct CustomJvpRule {
  // primals..., tangents... -> outputs..., output tangents... (explicit arguments only)
  transform_detail::FlatFn jvp;
  std::string name;  // as the jaxpr prints it
};
using JvpRuleRef = std::shared_ptr<const CustomJvpRule>;

}  // namespace

// A rule holds a user function, which cannot be compared by content: rules are equal when they
// are the same rule object, as JAX compares the custom_jvp callables it stages.
template <>
struct ParamTraits<JvpRuleRef> {
  static constexpr std::string_view name = "custom_jvp rule";
  static std::string str(const JvpRuleRef& rule) { return rule->name; }
  static size_t hash(const JvpRuleRef& rule) { return std::hash<JvpRuleRef>{}(rule); }
};

namespace {

const CustomJvpRule& rule_of(const Params& p) {
  return *p.get_object<JvpRuleRef>("jvp");
}

std::vector<AbstractValue> call_out_types(std::span<const AbstractValue>, const Params& p) {
  return p.get<ProgramRef>("call_jaxpr")->out_types();
}

Params call_params(const std::string& name, ProgramRef program, int64_t num_consts,
                   JvpRuleRef jvp) {
  return Params{{"name", name},
                {"call_jaxpr", std::move(program)},
                {"jvp", object_param(std::move(jvp))},
                {"num_consts", num_consts},
                {"symbolic_zeros", false}};
}

JvpResult custom_jvp_rule(std::span<const Array> primals, std::span<const Array> tangents,
                          const Params& p) {
  const size_t num_consts = size_t(p.get_int("num_consts"));
  for (size_t i = 0; i < num_consts; ++i)
    if (!is_zero(tangents[i]))
      throw TypeError(
          "[custom_jvp] Detected differentiation of a custom_jvp function with respect to a "
          "closed-over value. That isn't supported because the custom JVP rule only specifies "
          "how to differentiate the custom_jvp function with respect to explicit input "
          "parameters.");
  std::vector<Array> in(primals.begin() + long(num_consts), primals.end());
  for (size_t i = num_consts; i < primals.size(); ++i)
    in.push_back(instantiate_zero(tangents[i], aval_of(primals[i])));
  std::vector<Array> out = rule_of(p).jvp(in);
  const std::vector<AbstractValue> want = p.get<ProgramRef>("call_jaxpr")->out_types();
  if (out.size() != 2 * want.size())
    throw TypeError("[custom_jvp] the jvp rule must return (primal_out, tangent_out) with " +
                    std::to_string(want.size()) + " leaves each, got " +
                    std::to_string(out.size()) + " leaves in all");
  JvpResult result;
  for (size_t k = 0; k < want.size(); ++k) {
    const AbstractValue primal = aval_of(out[k]), tangent = aval_of(out[want.size() + k]);
    if (!(primal.shape == want[k].shape) || primal.dtype != want[k].dtype ||
        !(tangent.shape == primal.shape) || tangent.dtype != primal.dtype)
      throw TypeError(
          "[custom_jvp] Custom JVP rule must produce primal and tangent outputs with "
          "corresponding shapes and dtypes, but got " +
          primal.str() + " and " + tangent.str() + " for an output of the function of type " +
          want[k].str());
    result.primals_out.push_back(out[k]);
    result.tangents_out.push_back(out[want.size() + k]);
  }
  return result;
}

// Batches the function's Program and the rule with every batched operand's batch dim moved to
// the front and every output batched at 0, and binds custom_jvp_call again, so a later jvp still
// uses the custom rule. (Closed-over values that are batched fall back to batching the body.)
BatchResult custom_jvp_batch(std::span<const Array> args, std::span<const int> dims,
                             const Params& p, const BatchContext& ctx) {
  const ProgramRef body = p.get<ProgramRef>("call_jaxpr");
  const size_t num_consts = size_t(p.get_int("num_consts"));
  if (std::any_of(dims.begin(), dims.begin() + long(num_consts),
                  [](int d) { return d != kNotBatched; })) {
    auto [outs, out_dims] = batch_program(*body, args, dims, ctx);
    return BatchResult{outs, out_dims};
  }
  std::vector<Array> ins;
  std::vector<int> in_dims;
  std::vector<AbstractValue> types;
  for (size_t i = 0; i < args.size(); ++i) {
    ins.push_back(dims[i] == kNotBatched ? args[i]
                                         : move_batch_dim(args[i], dims[i], 0, ctx));
    in_dims.push_back(dims[i] == kNotBatched ? kNotBatched : 0);
    types.push_back(aval_of(ins.back()));
  }
  transform_detail::FlatFn batched_body = [body, in_dims, ctx](std::span<const Array> xs) {
    auto [outs, out_dims] = batch_program(*body, xs, in_dims, ctx);
    for (size_t k = 0; k < outs.size(); ++k)
      outs[k] = move_batch_dim(outs[k], out_dims[k], 0, ctx);
    return outs;
  };
  std::vector<Array> consts;
  auto program = std::make_shared<const Program>(
      hoist_consts(trace_to_program(batched_body, types, "vmap"), &consts));

  std::vector<std::optional<int>> rule_dims;
  for (int pass = 0; pass < 2; ++pass)  // the primals, then their tangents (of the same shapes)
    for (size_t i = num_consts; i < args.size(); ++i)
      rule_dims.push_back(in_dims[i] == kNotBatched ? std::nullopt : std::optional<int>(0));
  const CustomJvpRule& unbatched = rule_of(p);
  auto rule = std::make_shared<const CustomJvpRule>(CustomJvpRule{
      [jvp = unbatched.jvp, rule_dims, ctx](std::span<const Array> xs) {
        return transform_detail::vmap(jvp, xs, rule_dims, {Axis(0)}, ctx.axis_size, ctx.axis_name,
                                      std::vector<std::string>(xs.size(), "arg"),
                                      ctx.spmd_axis_name);
      },
      unbatched.name});
  std::vector<Array> operands = consts;
  operands.insert(operands.end(), ins.begin(), ins.end());
  std::vector<Array> outs = spmd::bind(
      primitive("custom_jvp_call"), operands,
      call_params(p.get<std::string>("name"), program, int64_t(consts.size() + num_consts), rule));
  return BatchResult{outs, std::vector<int>(outs.size(), 0)};
}

}  // namespace

void register_custom_jvp_primitive(PrimitiveRegistry& r) {
  Primitive& call = r.define("custom_jvp_call", call_out_types, [](const KernelArgs&) {
    throw std::logic_error("[custom_jvp_call] runs through its eager rule");
  });
  call.eager = [](std::span<const Array> args, const Params& p) {
    return eval_program(*p.get<ProgramRef>("call_jaxpr"), args);
  };
  call.jvp = custom_jvp_rule;
  call.call_body = "call_jaxpr";
  call.inlined_when_partly_known = true;
  // JAX prints num_consts only when the function closes over values.
  call.hides_param = [](std::string_view key, const ParamValue& v) {
    return key == "num_consts" && std::get<int64_t>(v) == 0;
  };
  call.batch = custom_jvp_batch;
  call.vma_rule = vma_as_traced(call);
  // Replicated for now: the partitioner inlines call bodies and partitions what they hold.
  call.sharding_rule = [](std::span<const AbstractValue> in, std::span<const AbstractValue> out,
                          const Params&) { return replicated_sharding_rule(in, out); };
}

namespace transform_detail {

std::vector<Array> custom_jvp_call(const FlatFn& primal, FlatFn jvp, std::span<const Array> args,
                                   const CustomJvpOptions& options) {
  std::vector<AbstractValue> types = types_of(args);
  std::vector<Array> consts;
  auto program = std::make_shared<const Program>(
      hoist_consts(trace_to_program(primal, types, "custom_jvp"), &consts));
  auto rule =
      std::make_shared<const CustomJvpRule>(CustomJvpRule{std::move(jvp), options.jvp_name});
  std::vector<Array> operands = consts;
  operands.insert(operands.end(), args.begin(), args.end());
  return spmd::bind(primitive("custom_jvp_call"), operands,
                    call_params(options.name, program, int64_t(consts.size()), rule));
}

}  // namespace transform_detail
}  // namespace spmd

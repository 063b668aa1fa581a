// custom_vjp: a function with a user-supplied forward pass (outputs and residuals) and backward
// pass (residuals and output cotangents to argument cotangents). It is staged as
// `custom_vjp_call` (evaluates the function); its jvp rule runs the user's forward pass and emits
// `custom_lin`, a linear primitive whose transpose is the user's backward pass.
#include <spmd/error.h>
#include <spmd/transforms.h>

#include "compile/executable.h"
#include "prims/families.h"
#include "prims/primitive.h"
#include "prims/rule_util.h"
#include "transforms/interpreters.h"
#include "transforms/staging.h"

namespace spmd {
namespace {

struct CustomVjpRule {
  transform_detail::FlatFn fwd;  // args -> outputs..., residuals...
  transform_detail::FlatFn bwd;  // residuals..., output cotangents... -> argument cotangents
  size_t num_consts = 0;         // leading operands of custom_vjp_call closed over by the function
  std::string fwd_name;          // as the jaxpr prints it (the `bwd` param prints the other)
};

using VjpRuleRef = std::shared_ptr<const CustomVjpRule>;

}  // namespace

// A rule holds user functions, which cannot be compared by content: rules are equal when they are
// the same rule object, as JAX compares the custom_vjp callables it stages.
template <>
struct ParamTraits<VjpRuleRef> {
  static constexpr std::string_view name = "custom_vjp rule";
  static std::string str(const VjpRuleRef& rule) { return rule->fwd_name; }
  static size_t hash(const VjpRuleRef& rule) { return std::hash<VjpRuleRef>{}(rule); }
};

namespace {

// custom_vjp_call holds its rule as `fwd`, custom_lin as `rule`.
const CustomVjpRule& rule_of(const Params& p, const char* key) {
  return *p.get_object<VjpRuleRef>(key);
}

// The head of JAX's TypeErrors for a fwd rule whose first element is not the function's output.
std::string fwd_rule_error(const std::string& fwd_name, const std::string& name) {
  return "[custom_vjp] Custom VJP fwd rule " + fwd_name + " for function " + name +
         " must produce a pair (list or tuple of length two) where the first element represents "
         "the primal output (equal to the output of the custom_vjp-decorated function " +
         name +
         ") and the second element represents residuals (i.e. values stored from the forward "
         "pass for use on the backward pass), but instead the fwd rule output's first element "
         "had ";
}

// "f32[3]" for one type, "(f32[3], i32[])" for several, as JAX prints a tree of short types.
std::string short_types(std::span<const AbstractValue> types) {
  if (types.size() == 1) return types[0].str();
  std::string out;
  for (const AbstractValue& t : types) out += (out.empty() ? "" : ", ") + t.str();
  return "(" + out + ")";
}

// JAX's check of the fwd rule's primal outputs against the function's (same shapes and dtypes).
void check_fwd_outputs(std::span<const Array> outs, std::span<const AbstractValue> want,
                       const CustomVjpRule& rule, const Params& p) {
  std::vector<AbstractValue> got;
  for (const Array& x : outs) got.push_back(aval_of(x));
  bool same = got.size() == want.size();
  for (size_t i = 0; same && i < got.size(); ++i)
    same = got[i].shape == want[i].shape && got[i].dtype == want[i].dtype;
  if (!same)
    throw TypeError(fwd_rule_error(rule.fwd_name, p.get<std::string>("name")) +
                    "shapes/dtypes of:\n    " + short_types(got) +
                    "\nwhile the custom_vjp-decorated function " + p.get<std::string>("name") +
                    " had output shapes/dtypes of:\n    " + short_types(want));
}

std::vector<AbstractValue> call_out_types(std::span<const AbstractValue>, const Params& p) {
  return p.get<ProgramRef>("call_jaxpr")->out_types();
}

void define_custom_vjp_call(PrimitiveRegistry& r) {
  Primitive& call = r.define("custom_vjp_call", call_out_types, [](const KernelArgs&) {
    throw std::logic_error("[custom_vjp_call] runs through its eager rule");
  });
  call.call_body = "call_jaxpr";
  call.known_part_when_partly_known = [](const Params& p) {
    Params known = p;
    known.set("call_jaxpr", ProgramRef(std::make_shared<const Program>()));
    known.set("num_consts", int64_t(0));
    return known;
  };
  // JAX prints num_consts only when the function closes over values.
  call.hides_param = [](std::string_view key, const ParamValue& v) {
    return key == "num_consts" && std::get<int64_t>(v) == 0;
  };
  call.eager = [](std::span<const Array> args, const Params& p) {
    return eval_program(*p.get<ProgramRef>("call_jaxpr"), args);
  };
  call.jvp = [](std::span<const Array> primals, std::span<const Array> tangents, const Params& p) {
    const CustomVjpRule& rule = rule_of(p, "fwd");
    size_t n_out = p.get<ProgramRef>("call_jaxpr")->outputs.size();
    std::span<const Array> args = primals.subspan(rule.num_consts);
    std::vector<Array> fwd_out = rule.fwd(args);
    check_fwd_outputs(std::span<const Array>(fwd_out).first(std::min(n_out, fwd_out.size())),
                      p.get<ProgramRef>("call_jaxpr")->out_types(), rule, p);
    JvpResult result;
    result.primals_out.assign(fwd_out.begin(), fwd_out.begin() + long(n_out));
    std::vector<Array> lin_in(fwd_out.begin() + long(n_out), fwd_out.end());
    int64_t num_res = int64_t(lin_in.size());
    for (size_t i = rule.num_consts; i < primals.size(); ++i)
      lin_in.push_back(instantiate_zero(tangents[i], aval_of(primals[i])));
    Params lin{{"call_jaxpr", p.at("call_jaxpr")}, {"rule", p.at("fwd")}, {"num_res", num_res}};
    result.tangents_out = spmd::bind(primitive("custom_lin"), lin_in, lin);
    return result;
  };
  call.batch = [](std::span<const Array> args, std::span<const int> dims, const Params& p,
                  const BatchContext& ctx) {
    auto [outs, out_dims] = batch_program(*p.get<ProgramRef>("call_jaxpr"), args, dims, ctx);
    return BatchResult{outs, out_dims};
  };
}

void define_custom_lin(PrimitiveRegistry& r) {
  Primitive& lin = r.define("custom_lin", call_out_types, [](const KernelArgs&) {
    throw std::logic_error("[custom_lin] runs through its eager rule");
  });
  lin.eager = [](std::span<const Array>, const Params&) -> std::vector<Array> {
    throw TypeError("[jvp] can't apply forward-mode autodiff (jvp) to a custom_vjp function.");
  };
  lin.transpose = [](std::span<const Array> cts, std::span<const LinearInput> inputs,
                     const Params& p) {
    const CustomVjpRule& rule = rule_of(p, "rule");
    size_t num_res = size_t(p.get_int("num_res"));
    std::vector<AbstractValue> out_types = p.get<ProgramRef>("call_jaxpr")->out_types();
    std::vector<Array> bwd_in;
    for (size_t i = 0; i < num_res; ++i) bwd_in.push_back(inputs[i].value);
    for (size_t i = 0; i < cts.size(); ++i)
      bwd_in.push_back(instantiate_zero(cts[i], out_types[i]));
    std::vector<Array> arg_cts = rule.bwd(bwd_in);
    if (arg_cts.size() != inputs.size() - num_res)
      throw ValueError(
          "[custom_vjp] the backward function must return one cotangent per primal "
          "argument: expected " +
          std::to_string(inputs.size() - num_res) + " cotangent leaves, got " +
          std::to_string(arg_cts.size()));
    for (size_t i = 0; i < arg_cts.size(); ++i) {
      const AbstractValue& want = inputs[num_res + i].aval;
      if (!(aval_of(arg_cts[i]).shape == want.shape) || arg_cts[i].dtype() != want.dtype)
        throw ValueError("[custom_vjp] the backward function returned a cotangent of type " +
                         aval_of(arg_cts[i]).str() + " for a primal input of type " + want.str());
    }
    std::vector<Array> out(num_res);
    out.insert(out.end(), arg_cts.begin(), arg_cts.end());
    return out;
  };
}

}  // namespace

void register_custom_vjp_primitives(PrimitiveRegistry& r) {
  define_custom_vjp_call(r);
  define_custom_lin(r);
  // Replicated for now: the partitioner inlines call bodies and partitions what they hold.
  // Each result varies as the function's result does.
  for (const char* name : {"custom_vjp_call", "custom_lin"}) {
    Primitive& p = r.at(name);
    p.sharding_rule = [](std::span<const AbstractValue> in, std::span<const AbstractValue> out,
                         const Params&) { return replicated_sharding_rule(in, out); };
    p.vma_rule = vma_as_traced(p);
  }
}

namespace transform_detail {

void check_fwd_tree(const TreeDef& fwd_out, const TreeDef& primal_out,
                    const CustomVjpOptions& options) {
  if (fwd_out == primal_out) return;
  throw TypeError(fwd_rule_error(options.fwd_name, options.name) +
                  "container/pytree structure:\n    " + fwd_out.str() +
                  "\nwhile the custom_vjp-decorated function " + options.name +
                  " had output container/pytree structure:\n    " + primal_out.str() + ".");
}

std::vector<Array> custom_vjp_call(const FlatFn& primal, FlatFn fwd, FlatFn bwd,
                                   std::span<const Array> args, const CustomVjpOptions& options) {
  std::vector<AbstractValue> types = types_of(args);
  std::vector<Array> consts;
  auto program = std::make_shared<const Program>(
      hoist_consts(trace_to_program(primal, types, "custom_vjp"), &consts));
  auto rule = std::make_shared<const CustomVjpRule>(
      CustomVjpRule{std::move(fwd), std::move(bwd), consts.size(), options.fwd_name});
  std::vector<Array> operands = consts;
  operands.insert(operands.end(), args.begin(), args.end());
  Params params{{"name", options.name},
                {"bwd", options.bwd_name},
                {"call_jaxpr", ProgramRef(program)},
                {"fwd", object_param(VjpRuleRef(rule))},
                {"num_consts", int64_t(consts.size())},
                {"symbolic_zeros", false}};
  return spmd::bind(primitive("custom_vjp_call"), operands, params);
}

}  // namespace transform_detail
}  // namespace spmd

// Automatic differentiation over Programs, as JAX does it: jvp interprets a Program with each
// primitive's jvp rule; reverse mode linearizes (primal equations run in the current context,
// tangent equations are staged into a linear Program) and transposes the linear Program with the
// primitives' transpose rules, in reverse order.
#include <spmd/error.h>
#include <spmd/lax.h>
#include <spmd/ops.h>
#include <spmd/transforms.h>

#include "compile/compiled.h"
#include "compile/op_by_op.h"
#include "compile/partition.h"
#include "ops/op_util.h"
#include "prims/primitive.h"
#include "prims/sharding.h"
#include "runtime/sharded.h"
#include "sharding/propagation.h"
#include "sharding/type_sharding.h"
#include "transforms/interpreters.h"
#include "transforms/staging.h"

namespace spmd {

// Evaluates `program` on primals and tangents (invalid = zero) with the jvp rules.
std::pair<std::vector<Array>, std::vector<Array>> jvp_program(const Program& program,
                                                              std::span<const Array> primals,
                                                              std::span<const Array> tangents) {
  std::vector<Array> p_env(program.types.size()), t_env(program.types.size());
  for (size_t i = 0; i < program.constvars.size(); ++i)
    p_env[size_t(program.constvars[i])] = program.consts[i];
  for (size_t i = 0; i < primals.size(); ++i) {
    p_env[size_t(program.invars[i])] = primals[i];
    t_env[size_t(program.invars[i])] = tangents[i];
  }
  auto primal = [&](const Atom& a) { return a.is_literal() ? a.literal : p_env[size_t(a.var)]; };
  auto tangent = [&](const Atom& a) { return a.is_literal() ? Array() : t_env[size_t(a.var)]; };
  for (const Equation& e : program.equations) {
    std::vector<Array> ps, ts;
    bool any_tangent = false;
    for (const Atom& a : e.inputs) {
      ps.push_back(primal(a));
      ts.push_back(tangent(a));
      any_tangent = any_tangent || !is_zero(ts.back());
    }
    std::vector<Array> outs, touts;
    const Primitive& prim = *e.primitive;
    if (!any_tangent || prim.non_differentiable) {
      outs = spmd::bind(prim, ps, e.params);
      touts.resize(outs.size());
    } else if (prim.jvp) {
      JvpResult r = prim.jvp(ps, ts, e.params);
      outs = std::move(r.primals_out);
      touts = std::move(r.tangents_out);
      touts.resize(outs.size());
    } else {
      throw NotImplementedError("[jvp] differentiation rule for '" + prim.name +
                                "' not implemented");
    }
    for (size_t k = 0; k < outs.size(); ++k) {
      p_env[size_t(e.outputs[k])] = std::move(outs[k]);
      t_env[size_t(e.outputs[k])] = std::move(touts[k]);
    }
  }
  std::vector<Array> outs, touts;
  for (const Atom& a : program.outputs) {
    outs.push_back(primal(a));
    touts.push_back(tangent(a));
  }
  return {outs, touts};
}

// Transposes a linear Program: cotangents of its outputs to cotangents of its inputs (zero
// cotangents are invalid Arrays). Its constants are the residuals.
std::vector<Array> transpose_program(const Program& linear, std::span<const Array> cotangents,
                                     std::span<const Array> seeds) {
  std::vector<Array> known(linear.types.size()), ct(linear.types.size());
  for (size_t i = 0; i < seeds.size(); ++i) ct[size_t(linear.invars[i])] = seeds[i];
  std::vector<bool> is_known(linear.types.size(), false);
  for (size_t i = 0; i < linear.constvars.size(); ++i) {
    known[size_t(linear.constvars[i])] = linear.consts[i];
    is_known[size_t(linear.constvars[i])] = true;
  }
  // Equations that only read known values (residual computations such as the squeeze of a
  // stacked residual) are evaluated forward; the rest are linear and transposed below.
  std::vector<bool> evaluated(linear.equations.size(), false);
  for (size_t i = 0; i < linear.equations.size(); ++i) {
    const Equation& e = linear.equations[i];
    std::vector<Array> ins;
    bool all_known = true;
    for (const Atom& a : e.inputs) {
      all_known = all_known && (a.is_literal() || is_known[size_t(a.var)]);
      if (all_known) ins.push_back(a.is_literal() ? a.literal : known[size_t(a.var)]);
    }
    if (!all_known) continue;
    std::vector<Array> outs = spmd::bind(*e.primitive, ins, e.params);
    for (size_t k = 0; k < outs.size(); ++k) {
      known[size_t(e.outputs[k])] = outs[k];
      is_known[size_t(e.outputs[k])] = true;
    }
    evaluated[i] = true;
  }
  for (size_t i = 0; i < linear.outputs.size(); ++i) {
    const Atom& a = linear.outputs[i];
    if (a.is_literal() || is_known[size_t(a.var)] || is_zero(cotangents[i])) continue;
    ct[size_t(a.var)] = add_cotangents(ct[size_t(a.var)], cotangents[i]);
  }
  for (auto e = linear.equations.rbegin(); e != linear.equations.rend(); ++e) {
    if (evaluated[size_t(linear.equations.rend() - e - 1)]) continue;
    std::vector<Array> cts_out;
    bool any = false;
    for (int v : e->outputs) {
      cts_out.push_back(std::move(ct[size_t(v)]));
      ct[size_t(v)] = Array();
      any = any || !is_zero(cts_out.back());
    }
    if (!any) continue;
    std::vector<LinearInput> ins;
    for (const Atom& a : e->inputs) {
      if (a.is_literal())
        ins.push_back({a.literal, aval_of(a.literal)});
      else if (is_known[size_t(a.var)])
        ins.push_back({known[size_t(a.var)], linear.types[size_t(a.var)]});
      else
        ins.push_back({Array(), linear.types[size_t(a.var)]});
    }
    const Primitive& prim = *e->primitive;
    if (!prim.transpose)
      throw NotImplementedError("[vjp] transpose rule for '" + prim.name + "' not implemented");
    std::vector<Array> cts_in = prim.transpose(cts_out, ins, e->params);
    for (size_t k = 0; k < ins.size(); ++k) {
      if (!ins[k].is_linear() || k >= cts_in.size() || is_zero(cts_in[k])) continue;
      int v = e->inputs[k].var;
      ct[size_t(v)] = add_cotangents(ct[size_t(v)], cts_in[k]);
    }
  }
  std::vector<Array> out;
  for (int v : linear.invars) out.push_back(ct[size_t(v)]);
  return out;
}

namespace {

// The index of the value in xs that x is (the same traced value), or -1.
int find_value(std::span<const Array> xs, const Array& x) {
  for (size_t k = 0; k < xs.size(); ++k)
    if (xs[k].impl() == x.impl()) return int(k);
  return -1;
}

}  // namespace

LinearizedBody linearize_body(const Program& body, std::span<const Array> xs,
                              const std::vector<bool>& nonzero, bool scalars_as_residuals) {
  auto* primal_trace = dynamic_cast<StagingTrace*>(current_trace());
  auto trace = std::make_shared<StagingTrace>("jvp");
  if (scalars_as_residuals) trace->keep_scalars_as_constants();
  std::vector<Array> tangents(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!nonzero[i]) continue;
    AbstractValue t = body.types[size_t(body.invars[i])];
    t.weak_type = false;
    tangents[i] = trace->new_input(t);
  }
  LinearizedBody lb;
  std::vector<Array> touts;
  std::tie(lb.outs, touts) = jvp_program(body, xs, tangents);
  std::vector<Array> nonzero_touts;
  for (const Array& t : touts) {
    lb.nonzero_out.push_back(!is_zero(t));
    if (!is_zero(t)) nonzero_touts.push_back(t);
  }
  lb.tangent = trace->finish(nonzero_touts);
  for (const Array& c : lb.tangent.consts) {
    ResidualSource source{ResidualSource::Kind::outside, 0, c};
    if (scalars_as_residuals && is_concrete(c) && c.ndim() == 0) {
      source = {ResidualSource::Kind::extra, lb.extras.size(), {}};
      lb.extras.push_back(c);
    } else if (primal_trace && primal_trace->owns(c)) {
      if (int k = find_value(xs, c); k >= 0) {
        source = {ResidualSource::Kind::input, size_t(k), {}};
      } else if (int j = find_value(lb.outs, c); j >= 0) {
        source = {ResidualSource::Kind::output, size_t(j), {}};
      } else {
        source = {ResidualSource::Kind::extra, lb.extras.size(), {}};
        lb.extras.push_back(c);
      }
    }
    lb.residuals.push_back(std::move(source));
  }
  return lb;
}

namespace {

using transform_detail::FlatFn;

struct Linearized {
  std::vector<Array> outputs;
  std::shared_ptr<Program> linear;  // tangents of the inputs → tangents of the outputs
  Program primal;                   // fn as traced on the primals' types
};

std::optional<Mesh> fixed_mesh_of(const Program& program, const Equation& eq);

// The first mesh an equation of `body` fixes splits on.
std::optional<Mesh> fixed_mesh_in(const Program& body) {
  for (const Equation& inner : body.equations)
    if (std::optional<Mesh> mesh = fixed_mesh_of(body, inner)) return mesh;
  return std::nullopt;
}

// The mesh an equation's rule fixes splits on (a shard_map's mesh, a constraint's sharding), in
// it or in the programs it holds (control-flow bodies, a call's sub-program).
std::optional<Mesh> fixed_mesh_of(const Program& program, const Equation& eq) {
  const ShardingRule rule = sharding_rule_of(program, eq);
  if (std::optional<Mesh> mesh = fixed_mesh(rule)) return mesh;
  for (const ShardingRule::Body& body : rule.bodies)
    if (std::optional<Mesh> mesh = fixed_mesh_in(*body.program)) return mesh;
  if (!eq.primitive->call_body.empty())
    return fixed_mesh_in(*eq.params.get<ProgramRef>(eq.primitive->call_body));
  return std::nullopt;
}

// The mesh JAX's type of `program`'s first output carries, run on `args`: a value computed from
// a shard_map's result, a sharding constraint, or an argument or constant committed over a mesh
// has that abstract mesh in its type (with every dim unsplit on Auto axes). None otherwise.
std::optional<Mesh> carried_mesh(const Program& program, std::span<const Array> args) {
  std::vector<std::optional<Mesh>> mesh(program.types.size());
  for (size_t i = 0; i < program.invars.size() && i < args.size(); ++i)
    mesh[size_t(program.invars[i])] = committed_mesh_of(args[i]);
  for (size_t j = 0; j < program.constvars.size(); ++j)
    mesh[size_t(program.constvars[j])] = committed_mesh_of(program.consts[j]);
  for (const Equation& eq : program.equations) {
    std::optional<Mesh> m = fixed_mesh_of(program, eq);
    for (const Atom& a : eq.inputs)
      if (!m && !a.is_literal()) m = mesh[size_t(a.var)];
    for (int v : eq.outputs) mesh[size_t(v)] = m;
  }
  if (program.outputs.empty() || program.outputs[0].is_literal()) return std::nullopt;
  const std::optional<Mesh>& m = mesh[size_t(program.outputs[0].var)];
  if (!m || m->axis_names().empty()) return std::nullopt;
  return m;
}

// Runs fn's primal computation in the current context and stages its tangent computation.
Linearized linearize(const FlatFn& fn, std::span<const Array> primals, const char* api) {
  Program program = trace_to_program(fn, types_of(primals), api);
  auto trace = std::make_shared<StagingTrace>(api);
  std::vector<Array> tangents;
  for (const Array& x : primals) {
    AbstractValue t = aval_of(x);
    t.weak_type = false;
    tangents.push_back(trace->new_input(t));
  }
  auto [outs, touts] = jvp_program(program, primals, tangents);
  std::vector<Array> linear_outs;
  for (size_t i = 0; i < touts.size(); ++i) {
    if (is_zero(touts[i])) {
      CurrentTraceScope in_linear(trace.get());
      linear_outs.push_back(zeros_like_aval(aval_of(outs[i])));
    } else {
      linear_outs.push_back(touts[i]);
    }
  }
  auto linear = std::make_shared<Program>(trace->finish(linear_outs));
  return {outs, linear, std::move(program)};
}

// Runs fn now as one compiled Program when everything is concrete, else inline. Committed
// arguments (or constants) place it as they place jit: partitioned over their devices, the
// results printing the shardings JAX's op-by-op run gives them.
std::vector<Array> run_as_unit(const FlatFn& fn, std::span<const Array> args, const char* api) {
  if (!all_concrete(args)) return fn(args);
  Program p = trace_to_program(fn, types_of(args), api);
  if (!all_concrete(p.consts)) return eval_program(p, args);
  std::vector<Array> operands;
  auto program = std::make_shared<const Program>(hoist_consts(p, &operands));
  operands.insert(operands.end(), args.begin(), args.end());
  std::optional<Placement> placement = place(*program, operands, {}, {}, api, {});
  if (!placement) return Compiled(p).run(args);
  std::vector<Array> results = compile_partitioned(program, *placement)->run(operands);
  recover_op_by_op_shardings(results, *program, operands, *placement);
  return results;
}

// JAX's _vjp_check_ct_avals: a cotangent has its output's shape and, where both are typed with
// a sharding (Explicit axes), its output's sharding; an uncommitted cotangent fits any.
void check_cotangent_types(std::span<const Array> cts, std::span<const AbstractValue> outs) {
  for (size_t i = 0; i < cts.size() && i < outs.size(); ++i) {
    if (is_zero(cts[i])) continue;
    const AbstractValue &got = aval_of(cts[i]), &expected = outs[i];
    const bool typed = got.sharding && expected.sharding;
    if (got.shape == expected.shape && (!typed || *got.sharding == *expected.sharding)) continue;
    throw ValueError(
        "[vjp] unexpected JAX type (e.g. shape/dtype) for argument to VJP function: got " +
        got.typeof_str() + ", but expected " + expected.typeof_str() +
        " because the corresponding output of the differentiated function had JAX type " +
        expected.typeof_str());
  }
}

}  // namespace

namespace transform_detail {

std::pair<std::vector<Array>, std::vector<Array>> jvp(const FlatFn& fn,
                                                      std::span<const Array> primals,
                                                      std::span<const Array> tangents) {
  if (primals.size() != tangents.size())
    throw ValueError("[jvp] expected as many tangents as primals, got " +
                     std::to_string(tangents.size()) + " and " + std::to_string(primals.size()));
  for (size_t i = 0; i < primals.size(); ++i)
    if (!(aval_of(primals[i]).shape == aval_of(tangents[i]).shape) ||
        primals[i].dtype() != tangents[i].dtype())
      throw TypeError(
          "[jvp] primal and tangent arguments to jax.jvp do not match; dtypes must "
          "be equal, or in case of int/bool primal dtype the tangent dtype must be "
          "float0. Got primal dtype " +
          std::string(dtype_name(primals[i].dtype())) + " and so expected tangent dtype " +
          std::string(dtype_name(primals[i].dtype())) + ", but got tangent dtype " +
          std::string(dtype_name(tangents[i].dtype())) + " instead.");
  size_t n = primals.size();
  FlatFn both = [&](std::span<const Array> xs) {
    Program program = trace_to_program(fn, types_of(xs.first(n)), "jvp");
    auto [outs, touts] = jvp_program(program, xs.first(n), xs.subspan(n));
    for (size_t i = 0; i < touts.size(); ++i)
      if (is_zero(touts[i])) touts[i] = zeros_like_aval(aval_of(outs[i]));
    outs.insert(outs.end(), touts.begin(), touts.end());
    return outs;
  };
  std::vector<Array> args(primals.begin(), primals.end());
  args.insert(args.end(), tangents.begin(), tangents.end());
  std::vector<Array> all = run_as_unit(both, args, "jvp");
  size_t m = all.size() / 2;
  return {std::vector<Array>(all.begin(), all.begin() + long(m)),
          std::vector<Array>(all.begin() + long(m), all.end())};
}

std::pair<std::vector<Array>, std::function<std::vector<Array>(std::span<const Array>)>> vjp(
    const FlatFn& fn, std::span<const Array> primals) {
  Linearized lin = linearize(fn, primals, "vjp");
  auto linear = lin.linear;
  std::vector<AbstractValue> out_types;
  for (const Array& out : lin.outputs) out_types.push_back(aval_of(out));
  auto pullback = [linear, out_types](std::span<const Array> cts) {
    check_cotangent_types(cts, out_types);
    std::vector<Array> out = transpose_program(*linear, cts);
    for (size_t i = 0; i < out.size(); ++i)
      if (is_zero(out[i])) out[i] = zeros_like_aval(linear->types[size_t(linear->invars[i])]);
    return out;
  };
  return {lin.outputs, pullback};
}

namespace {

// JAX's grad seeds its pullback with full_like(out, 1.0) on the output's abstract mesh: where
// the output's type carries a mesh (Explicit axes, or `carried`, see carried_mesh), a reshard of
// the literal onto it.
Array cotangent_seed(const Array& out, const std::optional<Mesh>& carried) {
  Array one = ops::scalar(1.0, out.dtype());
  if (!innermost_trace({&out, 1})) return one;
  if (const std::optional<TypeSharding>& typed = aval_of(out).sharding)
    return reshard_to(one, TypeSharding{typed->mesh, {}}, NoneParam{});
  if (!carried) return one;
  return reshard_to(one, unsplit_on(*carried, 0), NoneParam{});
}

}  // namespace

std::vector<int> normalize_argnums(const std::vector<int>& argnums, size_t num_args,
                                   const std::string& api) {
  const int n = int(num_args);
  std::vector<int> out;
  for (int a : argnums) {
    if (a >= n || -a > n)
      throw TypeError("[" + api + "] differentiating with respect to argnums=" +
                      std::to_string(a) + " requires at least " +
                      std::to_string(a < 0 ? -a : a + 1) +
                      " positional arguments to be passed by the caller, but got only " +
                      std::to_string(n) + " positional arguments.");
    out.push_back(a < 0 ? a + n : a);
  }
  if (out.empty())
    throw ValueError("[" + api + "] argnums is empty: name the argument to differentiate");
  if (out.size() > 1)
    throw ValueError("[" + api +
                     "] several argnums: use grad_all or pass the arguments as one tuple");
  return out;
}

void check_single_output(const TreeDef& out, const std::string& api) {
  if (out.kind() != TreeDef::Kind::leaf)
    throw TypeError("[" + api +
                    "] Gradient only defined for scalar-output functions. Output was " +
                    out.str() + ", not a single Array.");
}

GradResult value_and_grad(const FlatFn& fn, std::span<const Array> primals, size_t,
                          const char* api) {
  for (const Array& x : primals)
    if (!is_floating(x.dtype()))
      throw TypeError("[" + std::string(api) +
                      "] grad requires real- or complex-valued inputs (input dtype that is a "
                      "sub-dtype of np.inexact), but got " +
                      std::string(dtype_name(x.dtype())) +
                      ". If you want to use Boolean- or integer-valued inputs, use vjp or set "
                      "allow_int to True.");
  // The user function reports how many leaves are outputs (the rest are aux).
  auto num_out = std::make_shared<size_t>(0);
  size_t n = primals.size();
  FlatFn whole = [&](std::span<const Array> xs) {
    Linearized lin = linearize(fn, xs, api);
    // fn's outputs: [outputs..., aux...]; only a single scalar output is differentiated.
    const Array& out = lin.outputs.at(0);
    if (out.ndim() != 0)
      throw TypeError("[" + std::string(api) +
                      "] Gradient only defined for scalar-output functions. Output had shape: " +
                      out.shape().str() + ".");
    if (!is_floating(out.dtype()))
      throw TypeError("[" + std::string(api) +
                      "] grad requires real-valued outputs (output dtype that is a sub-dtype of "
                      "np.floating), but got " +
                      std::string(dtype_name(out.dtype())) +
                      ". For differentiation of functions with integer outputs, use jax.vjp "
                      "directly.");
    std::vector<Array> cts(lin.linear->outputs.size());
    cts[0] = cotangent_seed(out, carried_mesh(lin.primal, primals));
    std::vector<Array> grads = transpose_program(*lin.linear, cts);
    for (size_t i = 0; i < grads.size(); ++i)
      if (is_zero(grads[i])) grads[i] = zeros_like_aval(aval_of(xs[i]));
    std::vector<Array> result = lin.outputs;
    *num_out = result.size();
    result.insert(result.end(), grads.begin(), grads.end());
    return result;
  };
  std::vector<Array> all = run_as_unit(whole, primals, api);
  GradResult r;
  size_t m = all.size() - n;
  r.outputs.assign(all.begin(), all.begin() + long(m));
  r.grads.assign(all.begin() + long(m), all.end());
  return r;
}

Array jacobian(const FlatFn& fn, const Array& x, bool forward) {
  if (!is_floating(x.dtype()))
    throw TypeError(std::string(forward ? "[jacfwd]" : "[jacrev]") +
                    " requires real-valued inputs (input dtype that is a sub-dtype of "
                    "np.floating), but got " +
                    std::string(dtype_name(x.dtype())) + ".");
  Array out = fn(std::span<const Array>(&x, 1)).at(0);
  int64_t n = forward ? x.size() : out.size();
  const Shape& basis_shape = forward ? x.shape() : out.shape();
  std::vector<int64_t> dims{n};
  dims.insert(dims.end(), basis_shape.begin(), basis_shape.end());
  Array basis = eye(n, std::nullopt, 0, forward ? x.dtype() : out.dtype()).reshape(Shape(dims));
  FlatFn column = [&](std::span<const Array> v) {
    if (forward) return std::vector<Array>{jvp(fn, std::span<const Array>(&x, 1), v).second.at(0)};
    return vjp(fn, std::span<const Array>(&x, 1)).second(v);
  };
  std::vector<Array> rows = vmap(column, std::span<const Array>(&basis, 1), {0}, {Axis(0)},
                                 std::nullopt, "", {"argument 0"});
  // rows: [n, *(forward ? out : x)] → out.shape + x.shape
  Array r = rows.at(0);
  if (forward) {
    std::vector<int64_t> perm;
    for (int i = 1; i < r.ndim(); ++i) perm.push_back(i);
    perm.push_back(0);
    r = lax::transpose(r, perm);
  }
  std::vector<int64_t> shape(out.shape().begin(), out.shape().end());
  shape.insert(shape.end(), x.shape().begin(), x.shape().end());
  return r.reshape(Shape(shape));
}

}  // namespace transform_detail
}  // namespace spmd

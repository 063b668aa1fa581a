// Control flow primitives (see include/spmd/control_flow.h): `cond`, `while` and `scan`, each
// holding traced sub-programs whose closed-over values are passed as leading operands, as JAX's
// are. Eager evaluation runs the sub-programs; the jvp, transpose and batching rules transform
// them.
#include <spmd/config.h>
#include <spmd/control_flow.h>
#include <spmd/error.h>
#include <spmd/lax.h>
#include <spmd/ops.h>

#include "core/axis_env.h"
#include "core/trace.h"
#include "ops/op_util.h"
#include "prims/families.h"
#include "prims/primitive.h"
#include "prims/rule_util.h"
#include "sharding/type_sharding.h"
#include "transforms/interpreters.h"
#include "transforms/staging.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <iterator>
#include <new>
#include <sstream>
#include <string>
#include <unordered_map>

namespace spmd {

namespace {

std::string types_str(std::span<const AbstractValue> ts) {
  std::string s = "(";
  for (size_t i = 0; i < ts.size(); ++i) s += (i ? ", " : "") + ts[i].str();
  return s + (ts.size() == 1 ? ",)" : ")");
}

// Types agree up to weak typing (JAX's core.typematch).
bool typematch(std::span<const AbstractValue> a, std::span<const AbstractValue> b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].shape != b[i].shape || a[i].dtype != b[i].dtype) return false;
  return true;
}

// Types equal up to shapes and dtypes differ in what JAX's core.typematch also compares: the
// sharding (Explicit mode) or the varying manual axes (inside a check_vma shard_map body).
bool types_differ(const AbstractValue& a, const AbstractValue& b) {
  return !shardings_match(a.sharding, b.sharding) || a.vma != b.vma;
}

// JAX's aval_mismatch_extra for types equal up to shardings and varying manual axes (it says
// nothing of shardings).
std::string mismatch_extra(const AbstractValue& a, const AbstractValue& b) {
  return a.vma == b.vma ? "" : ", so the manual axis types do not match";
}

// A Python tuple of axis names, as JAX's messages print one: ('a',), ('a', 'b') or ().
std::string axes_tuple(const std::vector<std::string>& axes) {
  std::string s = "(";
  for (size_t i = 0; i < axes.size(); ++i) s += (i ? ", '" : "'") + axes[i] + "'";
  return s + (axes.size() == 1 ? ",)" : ")");
}

// JAX's keystr of each Array leaf's path in `def`, in flattening order ("" for a bare leaf).
std::vector<std::string> leaf_paths(const TreeDef& def) {
  std::vector<std::string> paths;
  std::vector<std::pair<TreeDef, std::string>> stack{{def, ""}};
  while (!stack.empty()) {
    auto [t, key] = stack.back();
    stack.pop_back();
    if (t.kind() == TreeDef::Kind::leaf) paths.push_back(key);
    const std::vector<TreeDef> children = t.children();
    for (size_t i = children.size(); i-- > 0;) stack.push_back({children[i], key + t.child_key(i)});
  }
  return paths;
}

// JAX's list of differences (and of suggested casts) in its control flow type errors: one
// sentence alone, capitalized and ended with a period; several as bullets, each but the last
// ended with `;`, one per line (cond's) or, in loops' messages, with a blank line between those
// before the last.
std::string jax_list(const std::vector<std::string>& items, bool loop) {
  if (items.size() == 1) return char(std::toupper(items[0][0])) + items[0].substr(1) + ".\n";
  std::string s;
  for (size_t i = 0; i + 1 < items.size(); ++i)
    s += (i ? "\n" : "") + ("  * " + items[i] + ";") + (loop ? "\n" : "");
  return s + (loop ? "" : "\n") + "  * " + items.back() + ".\n";
}

// JAX's advice to cast with pcast (`casts` as jax_list takes them), or "" without any.
std::string pcast_advice(const std::vector<std::string>& casts, bool loop) {
  if (casts.empty()) return "";
  return (casts.size() == 1 ? "This might be fixed by " + casts[0] + ".\n"
                            : "This might be fixed by:\n" + jax_list(casts, loop)) +
         "See https://docs.jax.dev/en/latest/notebooks/shard_map.html#scan-vma for more "
         "information.\n\n";
}

// JAX's TypeError for branches whose outputs differ only in sharding or varying manual axes.
// JAX also names each branch function and where it is defined, which spmd cannot know.
// `paths` are the key paths of the outputs' leaves.
void check_branch_types(const char* api, size_t b, std::span<const AbstractValue> first,
                        std::span<const AbstractValue> out, const std::vector<std::string>& paths) {
  const bool is_cond = std::string(api) == "cond";
  // JAX compares cond's true_fun with its false_fun (spmd's cond lists the false branch first,
  // so for cond `out` is true_fun's), and switch's branch 0 with `branch{b}`, spelled so.
  const std::string name1 = is_cond ? "true_fun" : "branch 0";
  const std::string name2 = is_cond ? "false_fun" : "branch" + std::to_string(b);
  const std::span<const AbstractValue> types1 = is_cond ? out : first;
  const std::span<const AbstractValue> types2 = is_cond ? first : out;
  std::vector<std::string> diffs, casts;
  for (size_t i = 0; i < types1.size(); ++i) {
    const AbstractValue &t1 = types1[i], &t2 = types2[i];
    if (!types_differ(t1, t2)) continue;
    const std::string at = paths[i].empty() ? "" : " at path " + paths[i];
    diffs.push_back("the output of " + name1 + at + " has type " + t1.typeof_str() +
                    " but the corresponding output of " + name2 + " has type " + t2.typeof_str() +
                    mismatch_extra(t1, t2));
    // JAX suggests, for the branch whose output varies over fewer axes, casting it by what the
    // other's lacks (an empty tuple when one varies over a subset of the other's axes).
    for (auto [n, a1, a2] : {std::tuple{&name1, &t2, &t1}, std::tuple{&name2, &t1, &t2}})
      if (a1->vma != a2->vma && !vma_minus(a2->vma, a1->vma).empty())
        casts.push_back("applying `jax.lax.pcast(..., " + axes_tuple(vma_minus(a1->vma, a2->vma)) +
                        ", to='varying')` to the output of " + *n + at);
  }
  if (diffs.empty()) return;
  throw TypeError(std::string("[") + api + "] " + api +
                  " branches must have equal output types but they differ.\n\n" +
                  jax_list(diffs, false) + "\n" + pcast_advice(casts, false) + "Revise " + name1 +
                  " and/or " + name2 + " so that all output types match.");
}

// JAX's TypeError for a loop body whose carry out differs from its carry in only in sharding or
// varying manual axes. `paths` are the key paths of the carry's leaves. A user's body names its
// carry argument, which C++ cannot see: spmd calls it `carry`. fori_loop's body is JAX's own,
// whose carry `loop_carry` is the counter and the user's carry.
void check_carry_types(const char* api, const char* kind, std::span<const AbstractValue> in,
                       std::span<const AbstractValue> out, const std::vector<std::string>& paths) {
  const std::string name = std::string(api) == "fori_loop" ? "loop_carry" : "carry";
  std::vector<std::string> diffs, casts;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!types_differ(in[i], out[i])) continue;
    const std::string component = paths[i].empty() ? "the input carry " + name
                                                    : "the input carry component " + name +
                                                          paths[i];
    diffs.push_back(component + " has type " + in[i].typeof_str() +
                    " but the corresponding output carry component has type " +
                    out[i].typeof_str() + mismatch_extra(in[i], out[i]));
    const std::vector<std::string> missing = vma_minus(out[i].vma, in[i].vma);
    if (!missing.empty())
      casts.push_back("applying `jax.lax.pcast(..., " + axes_tuple(missing) +
                      ", to='varying')`, to the initial carry value corresponding to " + component);
  }
  if (diffs.empty()) return;
  throw TypeError(std::string("[") + api + "] " + kind +
                  " body function carry input and carry output must have equal types, but they "
                  "differ:\n\n" +
                  jax_list(diffs, true) + "\n" + pcast_advice(casts, true) +
                  "Revise the function so that all output types match the corresponding input "
                  "types.");
}

// JAX's TypeError for a loop body whose carry out is another tree than its carry in (JAX also
// spells out the first node where they differ).
void check_carry_tree(const char* api, const char* kind, const TreeDef& in, const TreeDef& out) {
  if (in == out) return;
  throw TypeError(std::string("[") + api + "] " + kind +
                  " body function carry input and carry output must have the same pytree "
                  "structure, but they differ: the input carry is " +
                  in.str() + " but the output carry is " + out.str() +
                  ".\n\nRevise the function so that the carry output has the same pytree "
                  "structure as the carry input.");
}

// The type of one slice of xs along its leading dim, which JAX's Explicit mode needs unsplit.
AbstractValue scanned_slice(const AbstractValue& x) {
  AbstractValue t = x;
  t.shape = Shape(t.shape.begin() + 1, t.shape.end());
  if (!t.sharding) return t;
  if (!t.sharding->dims[0].empty()) {
    std::vector<PartitionSpec::Entry> entries;
    for (const std::vector<std::string>& axes : t.sharding->dims)
      entries.push_back(axes.empty() ? PartitionSpec::Entry()
                                     : PartitionSpec::Entry(AxisNames(axes, axes.size() > 1)));
    throw ValueError("[scan] 0th dimension of all xs should be replicated. Got " +
                     PartitionSpec(std::move(entries)).repr());
  }
  t.sharding->dims.erase(t.sharding->dims.begin());
  return t;
}

std::string tree_str(const TreeDef& def) {
  std::ostringstream os;
  os << def;
  return os.str();
}

ProgramRef share(Program p) {
  return std::make_shared<const Program>(std::move(p));
}

// Traces fn and hoists its constants: (program, constants).
std::pair<ProgramRef, std::vector<Array>> trace_hoisted(const lax::control_flow_detail::FlatFn& fn,
                                                        std::span<const AbstractValue> types,
                                                        const char* name) {
  std::vector<Array> consts;
  Program p = hoist_consts(trace_to_program(fn, types, name), &consts);
  return {share(std::move(p)), std::move(consts)};
}

// Traces a body that a rule derives from another body. It reads only its own inputs, so its
// constants can only be concrete arrays the rules created; they stay in the Program.
Program trace_body(const lax::control_flow_detail::FlatFn& fn, std::span<const AbstractValue> types,
                   const char* name) {
  Program p = trace_to_program(fn, types, name);
  for (const Array& c : p.consts)
    if (!is_concrete(c))
      throw std::logic_error(std::string("[") + name + "] a derived body closed over a tracer");
  return p;
}

std::vector<Array> concat(std::span<const Array> a, std::span<const Array> b) {
  std::vector<Array> out(a.begin(), a.end());
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

Shape with_leading(const Shape& s, int64_t n) {
  std::vector<int64_t> dims{n};
  dims.insert(dims.end(), s.begin(), s.end());
  return Shape(std::move(dims));
}

// The slice of every xs leaf at step i (leading axis removed).
std::vector<Array> slices_at(std::span<const Array> xs, int64_t i) {
  std::vector<Array> out;
  for (const Array& x : xs) out.push_back(lax::index_in_dim(x, i, 0, /*keepdims=*/false));
  return out;
}

// pred broadcast to x's shape along x's leading axes (JAX's _bcast_select's broadcast).
Array broadcast_pred(const Array& pred, const Array& x) {
  if (pred.ndim() == x.ndim()) return pred;
  std::vector<int64_t> dims;
  for (int d = 0; d < pred.ndim(); ++d) dims.push_back(d);
  return lax::broadcast_in_dim(pred, x.shape(), dims);
}

// ---- eager evaluation ---------------------------------------------------------------------------

std::vector<Array> cond_eager(std::span<const Array> args, const Params& p) {
  const auto& branches = p.get<std::vector<ProgramRef>>("branches");
  int64_t i = std::clamp<int64_t>(args[0].item<int32_t>(), 0, int64_t(branches.size()) - 1);
  return eval_program(*branches[size_t(i)], args.subspan(1));
}

std::vector<Array> while_eager(std::span<const Array> args, const Params& p) {
  const Program& cond = *p.get<ProgramRef>("cond_jaxpr");
  const Program& body = *p.get<ProgramRef>("body_jaxpr");
  size_t cn = size_t(p.get_int("cond_nconsts")), bn = size_t(p.get_int("body_nconsts"));
  std::span<const Array> cond_consts = args.first(cn), body_consts = args.subspan(cn, bn);
  std::vector<Array> carry(args.begin() + long(cn + bn), args.end());
  for (;;) {
    Array pred = eval_program(cond, concat(cond_consts, carry))[0];
    if (pred.ndim() == 0) {
      if (!pred.item<bool>()) return carry;
      carry = eval_program(body, concat(body_consts, carry));
      continue;
    }
    // A batched predicate (from vmap): advance the lanes whose predicate holds.
    std::vector<int64_t> all_axes;
    for (int d = 0; d < pred.ndim(); ++d) all_axes.push_back(d);
    if (!lax::reduce_or(pred, all_axes).item<bool>()) return carry;
    std::vector<Array> next = eval_program(body, concat(body_consts, carry));
    for (size_t c = 0; c < carry.size(); ++c)
      carry[c] = lax::select_n(broadcast_pred(pred, next[c]), {carry[c], next[c]});
  }
}

std::vector<Array> scan_eager(std::span<const Array> args, const Params& p) {
  const Program& body = *p.get<ProgramRef>("jaxpr");
  int64_t length = p.get_int("length");
  size_t nc = size_t(p.get_int("num_consts")), ncarry = size_t(p.get_int("num_carry"));
  bool reverse = p.get<bool>("reverse");
  std::span<const Array> consts = args.first(nc), xs = args.subspan(nc + ncarry);
  std::vector<Array> carry(args.begin() + long(nc), args.begin() + long(nc + ncarry));
  std::vector<AbstractValue> out_types = body.out_types();
  size_t ny = out_types.size() - ncarry;
  std::vector<std::vector<Array>> ys;
  const auto exhausted = [&] {
    return ResourceExhaustedError(
        "[scan] RESOURCE_EXHAUSTED: Out of memory keeping the outputs of " +
        std::to_string(length) + " steps.");
  };
  if (ny > 0 && length > 0) {
    // Asked for without throwing first: under AddressSanitizer a throwing operator new that
    // cannot allocate ends the process instead of raising bad_alloc.
    if (uint64_t(length) > std::vector<Array>().max_size() / ny) throw exhausted();
    void* probe = ::operator new(size_t(length) * ny * sizeof(Array), std::nothrow);
    if (probe == nullptr) throw exhausted();
    ::operator delete(probe);
  }
  try {
    ys.assign(ny, std::vector<Array>(size_t(length)));
  } catch (const std::exception&) {  // bad_alloc, or length_error past the vector's max_size
    throw exhausted();
  }
  for (int64_t step = 0; step < length; ++step) {
    int64_t i = reverse ? length - 1 - step : step;
    std::vector<Array> in = concat(consts, carry);
    std::vector<Array> x = slices_at(xs, i);
    in.insert(in.end(), x.begin(), x.end());
    std::vector<Array> out = eval_program(body, in);
    carry.assign(out.begin(), out.begin() + long(ncarry));
    for (size_t k = 0; k < ny; ++k) ys[k][size_t(i)] = out[ncarry + k];
  }
  for (size_t k = 0; k < ny; ++k) {
    const AbstractValue& t = out_types[ncarry + k];
    carry.push_back(length == 0 ? zeros(with_leading(t.shape, length), t.dtype) : stack(ys[k], 0));
  }
  return carry;
}

// ---- vma rules ----------------------------------------------------------------------------------

// The operand indices [from, to).
std::vector<size_t> operand_range(size_t from, size_t to) {
  std::vector<size_t> r;
  for (size_t i = from; i < to; ++i) r.push_back(i);
  return r;
}

// Raises std::logic_error when a body input varies over a mesh axis the operand feeding it (of
// those `operands` lists, in the body's input order) does not: the rules that build these bodies
// trace them from their operands' types, so this is an internal error, never a user's. An
// operand varying over more axes than its body input is not checked: a per-device program that
// runs a shard_map's body inline feeds the body's varying results to loops traced outside it.
void check_body_inputs(const char* name, std::span<const AbstractValue> in, const Program& body,
                       const std::vector<size_t>& operands) {
  const std::vector<AbstractValue> want = body.in_types();
  auto varies_over = [](const AbstractValue& t, const std::string& axis) {
    return std::find(t.vma.begin(), t.vma.end(), axis) != t.vma.end();
  };
  for (size_t k = 0; k < want.size() && k < operands.size(); ++k)
    if (std::any_of(want[k].vma.begin(), want[k].vma.end(), [&](const std::string& axis) {
          return !varies_over(in[operands[k]], axis);
        }))
      throw std::logic_error(std::string("[") + name + "] operand " +
                             std::to_string(operands[k]) + " of type " + in[operands[k]].str() +
                             " feeds a body input of type " + want[k].str());
}

// vma_as_traced(p) after `check` has looked at the operands.
VmaRule checked_vma(const Primitive& p,
                    std::function<void(std::span<const AbstractValue>, const Params&)> check) {
  return [rule = vma_as_traced(p), check = std::move(check)](std::span<const AbstractValue> in,
                                                             const Params& params) {
    check(in, params);
    return rule(in, params);
  };
}

// ---- shape rules --------------------------------------------------------------------------------

// The types a body's trace gave, as a result's. Their shardings hold only where the operands'
// types have them: operands without (the partitioner's blocks) give results without.
std::vector<AbstractValue> body_types(std::span<const AbstractValue> in,
                                      std::vector<AbstractValue> out) {
  if (std::none_of(in.begin(), in.end(), [](const AbstractValue& t) { return t.sharding; }))
    for (AbstractValue& t : out) t.sharding.reset();
  return out;
}

std::vector<AbstractValue> scan_shape(std::span<const AbstractValue> in, const Params& p) {
  std::vector<AbstractValue> out = body_types(in, p.get<ProgramRef>("jaxpr")->out_types());
  for (size_t k = size_t(p.get_int("num_carry")); k < out.size(); ++k) {
    out[k].shape = with_leading(out[k].shape, p.get_int("length"));
    // The stacked dim is unsplit, as JAX's.
    if (out[k].sharding)
      out[k].sharding->dims.insert(out[k].sharding->dims.begin(), std::vector<std::string>{});
  }
  return out;
}

// Whether the non-zero tangents live in the primals' trace (forward mode) rather than in a
// linearization's own trace (reverse mode, where the rule must split known from unknown work).
bool tangents_with_primals(std::span<const Array> primals, std::span<const Array> tangents) {
  std::vector<Array> nonzero;
  for (const Array& t : tangents)
    if (!is_zero(t)) nonzero.push_back(t);
  return innermost_trace(nonzero) == innermost_trace(primals);
}

// ---- scan: jvp ----------------------------------------------------------------------------------

struct ScanSizes {
  size_t consts, carry, xs, ys;
  explicit ScanSizes(const Params& p, size_t num_args)
      : consts(size_t(p.get_int("num_consts"))), carry(size_t(p.get_int("num_carry"))) {
    xs = num_args - consts - carry;
    ys = p.get<ProgramRef>("jaxpr")->outputs.size() - carry;
  }
};

Params scan_params(ProgramRef jaxpr, int64_t length, size_t num_carry, size_t num_consts,
                   bool reverse) {
  return Params{
      {"jaxpr", std::move(jaxpr)},         {"length", length},   {"num_carry", int64_t(num_carry)},
      {"num_consts", int64_t(num_consts)}, {"reverse", reverse}, {"unroll", int64_t(1)}};
}

// The body's jvp as one Program: inputs (primals, non-zero tangents), outputs (primal outputs,
// tangents of the carries in carry_nz, non-zero tangents of the ys). Sets ys_nz and the carry
// outputs' non-zero pattern.
Program scan_jvp_body(const Program& body, const ScanSizes& n, const std::vector<bool>& nz,
                      std::vector<bool>* carry_out_nz, std::vector<bool>* ys_nz) {
  std::vector<AbstractValue> types = body.in_types();
  for (size_t i = 0; i < nz.size(); ++i)
    if (nz[i]) {
      AbstractValue t = body.in_types()[i];
      t.weak_type = false;
      types.push_back(t);
    }
  size_t np = nz.size();
  lax::control_flow_detail::FlatFn fn = [&](std::span<const Array> in) {
    std::vector<Array> ts(np);
    size_t j = np;
    for (size_t i = 0; i < np; ++i)
      if (nz[i]) ts[i] = in[j++];
    auto [outs, touts] = jvp_program(body, in.first(np), ts);
    carry_out_nz->assign(n.carry, false);
    ys_nz->assign(n.ys, false);
    for (size_t k = 0; k < n.carry; ++k) {
      (*carry_out_nz)[k] = !is_zero(touts[k]);
      if (nz[n.consts + k]) {
        AbstractValue t = aval_of(outs[k]);
        t.weak_type = false;
        outs.push_back(instantiate_zero(touts[k], t));
      }
    }
    for (size_t k = 0; k < n.ys; ++k)
      if (!is_zero(touts[n.carry + k])) {
        (*ys_nz)[k] = true;
        outs.push_back(touts[n.carry + k]);
      }
    return outs;
  };
  Program p = trace_body(fn, types, "scan");
  return p;
}

// Forward mode: JAX's single scan over (consts, const tangents, carry, carry tangents, xs, xs
// tangents) returning (carry, carry tangents, ys, ys tangents).
JvpResult scan_jvp_joint(Program jb, std::span<const Array> primals,
                         std::span<const Array> tangents, const std::vector<bool>& nz,
                         const std::vector<bool>& ys_nz, const ScanSizes& n, const Params& params) {
  size_t np = primals.size();
  std::vector<int> inv = jb.invars;
  std::vector<Atom> outs = jb.outputs;
  std::vector<Array> args;
  jb.invars.clear();
  size_t t = np;  // position of the next tangent invar
  size_t counts[3] = {0, 0, 0};
  size_t bounds[4] = {0, n.consts, n.consts + n.carry, np};
  for (int sec = 0; sec < 3; ++sec) {
    for (size_t i = bounds[sec]; i < bounds[sec + 1]; ++i) {
      jb.invars.push_back(inv[i]);
      args.push_back(primals[i]);
    }
    for (size_t i = bounds[sec]; i < bounds[sec + 1]; ++i) {
      if (!nz[i]) continue;
      jb.invars.push_back(inv[t++]);
      AbstractValue ty = aval_of(primals[i]);
      ty.weak_type = false;
      args.push_back(instantiate_zero(tangents[i], ty));
      ++counts[sec];
    }
  }
  size_t nct = counts[1], nyt = 0;
  for (bool b : ys_nz) nyt += b;
  jb.outputs.clear();
  auto take = [&](size_t from, size_t count) {
    jb.outputs.insert(jb.outputs.end(), outs.begin() + long(from),
                      outs.begin() + long(from + count));
  };
  take(0, n.carry);
  take(n.carry + n.ys, nct);
  take(n.carry, n.ys);
  take(n.carry + n.ys + nct, nyt);
  std::vector<Array> out =
      spmd::bind(primitive("scan"), args,
                 scan_params(share(std::move(jb)), params.get_int("length"), n.carry + nct,
                             n.consts + counts[0], params.get<bool>("reverse")));
  JvpResult r;
  r.tangents_out.resize(n.carry + n.ys);
  r.primals_out.assign(out.begin(), out.begin() + long(n.carry));
  r.primals_out.insert(r.primals_out.end(), out.begin() + long(n.carry + nct),
                       out.begin() + long(n.carry + nct + n.ys));
  size_t k = n.carry;
  for (size_t c = 0; c < n.carry; ++c)
    if (nz[n.consts + c]) r.tangents_out[c] = out[k++];
  k = n.carry + nct + n.ys;
  for (size_t y = 0; y < n.ys; ++y)
    if (ys_nz[y]) r.tangents_out[n.carry + y] = out[k++];
  return r;
}

// Reverse mode splits a body's jvp as linearize does: the primal computation is traced into
// `known`, the tangent computation into `linear` in a trace of its own, so that its equations
// (and nested control flow, through these same rules) read primal values only as residuals:
// `linear`'s constants. `known` outputs the primal outputs, then the residuals that are not
// forwardable inputs. Tangent outputs: instantiated where instantiate[k] is 1, dropped where 0,
// kept if non-zero where -1.
struct SplitJvp {
  Program known, linear;
  std::vector<int> residual_source;  // per residual: the body input it is, or -1
};

SplitJvp split_jvp(const Program& body, const std::vector<bool>& nz,
                   const std::vector<int>& instantiate, const char* name,
                   const std::function<bool(size_t)>& forwardable) {
  SplitJvp out;
  std::vector<AbstractValue> types = body.in_types();
  lax::control_flow_detail::FlatFn fn = [&](std::span<const Array> in) {
    auto lt = std::make_shared<StagingTrace>(name);
    std::vector<Array> ts(in.size());
    for (size_t i = 0; i < in.size(); ++i)
      if (nz[i]) {
        AbstractValue t = types[i];
        t.weak_type = false;
        ts[i] = lt->new_input(t);
      }
    auto [outs, touts] = jvp_program(body, in, ts);
    std::vector<Array> lin_outs;
    for (size_t k = 0; k < touts.size(); ++k) {
      if (instantiate[k] == 1) {
        AbstractValue t = aval_of(outs[k]);
        t.weak_type = false;
        CurrentTraceScope in_linear(lt.get());
        lin_outs.push_back(instantiate_zero(touts[k], t));
      } else if (instantiate[k] == -1 && !is_zero(touts[k])) {
        lin_outs.push_back(touts[k]);
      }
    }
    out.linear = lt->finish(lin_outs);
    out.residual_source.clear();
    for (const Array& c : out.linear.consts) {
      int src = -1;
      for (size_t i = 0; i < in.size() && src < 0; ++i)
        if (c.impl() == in[i].impl() && forwardable(i)) src = int(i);
      out.residual_source.push_back(src);
      if (src < 0) outs.push_back(c);
    }
    return outs;
  };
  out.known = trace_body(fn, types, name);
  return out;
}

// The forward scan of a linearization with what its body computes from its consts alone
// evaluated once outside it, as JAX's _scan_known_hoisting does.
struct HoistedScan {
  Program body;               // new consts (the hoisted values it reads), carries, xs
  std::vector<Array> consts;  // those values
  // Per residual the body output after its `num_outs` results: the value when hoisted (it
  // no longer is an output), else empty.
  std::vector<Array> hoisted_res;
};

// The equations of `callee`, a call's sub-program, with its inputs bound to the call's operands
// and fresh variables of `into` for its own; `results` gets the atoms its outputs are.
std::vector<Equation> inlined(const Program& callee, std::span<const Atom> operands, Program& into,
                              std::vector<Atom>* results) {
  std::unordered_map<int, Atom> var;
  for (size_t i = 0; i < callee.invars.size(); ++i) var.emplace(callee.invars[i], operands[i]);
  auto atom = [&](const Atom& a) { return a.is_literal() ? a : var.at(a.var); };
  std::vector<Equation> out;
  for (Equation e : callee.equations) {
    std::ranges::transform(e.inputs, e.inputs.begin(), atom);
    for (int& v : e.outputs) {
      const int fresh = into.new_var(callee.types[size_t(v)]);
      var.emplace(v, Atom::of_var(fresh));
      v = fresh;
    }
    out.push_back(std::move(e));
  }
  results->clear();
  std::ranges::transform(callee.outputs, std::back_inserter(*results), atom);
  return out;
}

HoistedScan hoist_invariant(const Program& known, std::span<const Array> consts, size_t num_outs) {
  std::unordered_map<int, Array> outside;  // variables with a value computed outside the loop
  for (size_t i = 0; i < consts.size(); ++i) outside[known.invars[i]] = consts[i];
  auto is_outside = [&](const Atom& a) { return a.is_literal() || outside.count(a.var); };
  HoistedScan h{known, {}, {}};
  h.body.equations.clear();
  // Variables standing for another atom: the results of inlined calls.
  std::unordered_map<int, Atom> alias;
  auto resolve = [&](const Atom& a) {
    auto it = a.is_literal() ? alias.end() : alias.find(a.var);
    return it == alias.end() ? a : it->second;
  };
  std::function<void(Equation)> visit = [&](Equation e) {
    std::ranges::transform(e.inputs, e.inputs.begin(), resolve);
    const Primitive& prim = *e.primitive;
    if (prim.effectful || !std::ranges::all_of(e.inputs, is_outside)) {
      if (prim.inlined_when_partly_known) {
        std::vector<Atom> results;
        for (Equation& inner : inlined(*e.params.get<ProgramRef>(prim.call_body), e.inputs,
                                       h.body, &results))
          visit(std::move(inner));
        for (size_t k = 0; k < results.size(); ++k)
          alias.emplace(e.outputs[k], resolve(results[k]));
        return;
      }
      if (prim.known_part_when_partly_known)
        spmd::bind(prim, {}, prim.known_part_when_partly_known(e.params));
      h.body.equations.push_back(std::move(e));
      return;
    }
    std::vector<Array> ins;
    for (const Atom& a : e.inputs) ins.push_back(a.is_literal() ? a.literal : outside.at(a.var));
    std::vector<Array> outs = spmd::bind(prim, ins, e.params);
    for (size_t k = 0; k < outs.size(); ++k) outside[e.outputs[k]] = outs[k];
  };
  for (const Equation& e : known.equations) visit(e);
  // The body reads the values it needs from outside as leading inputs, in the order it first
  // reads them (JAX's new known consts).
  std::vector<int> invars;
  auto read = [&](const Atom& a) {
    if (a.is_literal() || !outside.count(a.var) || std::ranges::count(invars, a.var)) return;
    invars.push_back(a.var);
    h.consts.push_back(outside.at(a.var));
  };
  for (const Equation& e : h.body.equations) std::ranges::for_each(e.inputs, read);
  h.body.outputs.clear();
  for (size_t k = 0; k < known.outputs.size(); ++k) {
    const Atom o = resolve(known.outputs[k]);
    const bool hoisted = k >= num_outs && !o.is_literal() && outside.count(o.var);
    if (k >= num_outs) h.hoisted_res.push_back(hoisted ? outside.at(o.var) : Array());
    if (hoisted) continue;
    read(o);
    h.body.outputs.push_back(o);
  }
  invars.insert(invars.end(), known.invars.begin() + long(consts.size()), known.invars.end());
  h.body.invars = std::move(invars);
  return h;
}

std::vector<int> scan_instantiate(const ScanSizes& n, const std::vector<bool>& nz,
                                  const std::vector<bool>& ys_nz) {
  std::vector<int> inst;
  for (size_t c = 0; c < n.carry; ++c) inst.push_back(nz[n.consts + c] ? 1 : 0);
  for (size_t y = 0; y < n.ys; ++y) inst.push_back(ys_nz[y] ? 1 : 0);
  return inst;
}

// JAX's scan jvp followed by its partial evaluation: a scan of the primal computation that also
// stacks the residuals, then a scan of the tangent computation reading them.
JvpResult scan_jvp(std::span<const Array> primals, std::span<const Array> tangents,
                   const Params& params) {
  const Program& body = *params.get<ProgramRef>("jaxpr");
  ScanSizes n(params, primals.size());
  int64_t length = params.get_int("length");
  bool reverse = params.get<bool>("reverse");
  std::vector<bool> nz(primals.size()), carry_out_nz, ys_nz;
  for (size_t i = 0; i < nz.size(); ++i) nz[i] = !is_zero(tangents[i]);
  Program jb;
  for (;;) {  // widen the non-zero carries to a fixed point
    jb = scan_jvp_body(body, n, nz, &carry_out_nz, &ys_nz);
    bool grew = false;
    for (size_t k = 0; k < n.carry; ++k)
      if (carry_out_nz[k] && !nz[n.consts + k]) nz[n.consts + k] = grew = true;
    if (!grew) break;
  }
  size_t np = primals.size();
  if (tangents_with_primals(primals, tangents))
    return scan_jvp_joint(std::move(jb), primals, tangents, nz, ys_nz, n, params);
  SplitJvp sp = split_jvp(body, nz, scan_instantiate(n, nz, ys_nz), "scan", [&](size_t i) {
    return i < n.consts || i >= n.consts + n.carry;  // consts and xs are passed as they are
  });
  HoistedScan known = hoist_invariant(sp.known, primals.first(n.consts), n.carry + n.ys);
  std::vector<Array> known_in = known.consts;
  known_in.insert(known_in.end(), primals.begin() + long(n.consts), primals.end());
  std::vector<Array> known_out =
      spmd::bind(primitive("scan"), known_in,
                 scan_params(share(std::move(known.body)), length, n.carry, known.consts.size(),
                             reverse));

  // The tangent scan: consts (residual consts, const tangents), carry tangents, xs (residuals
  // over the iterations, stacked or xs as they are, in the order the tangent computation reads
  // them, as JAX's; then xs tangents).
  Program& lin = sp.linear;
  std::vector<int> res_consts, res_xs, t_consts, t_carry, t_xs;
  std::vector<Array> res_const_vals, res_xs_vals, a_consts, a_carry, a_xs;
  auto stacked = known_out.begin() + long(n.carry + n.ys);
  auto hoisted = known.hoisted_res.begin();
  for (size_t r = 0; r < lin.constvars.size(); ++r) {
    int src = sp.residual_source[r];
    const Array invariant = src < 0 ? *hoisted++ : Array();
    if (src >= 0 && size_t(src) < n.consts) {
      res_consts.push_back(lin.constvars[r]);
      res_const_vals.push_back(primals[size_t(src)]);
    } else if (invariant.valid()) {
      res_consts.push_back(lin.constvars[r]);
      res_const_vals.push_back(invariant);
    } else {
      res_xs.push_back(lin.constvars[r]);
      res_xs_vals.push_back(src >= 0 ? primals[size_t(src)] : *stacked++);
    }
  }
  size_t j = 0;
  for (size_t i = 0; i < np; ++i) {
    if (!nz[i]) continue;
    int v = lin.invars[j++];
    if (i < n.consts) {
      t_consts.push_back(v), a_consts.push_back(tangents[i]);
    } else if (i < n.consts + n.carry) {
      t_carry.push_back(v);
      AbstractValue t = aval_of(primals[i]);
      t.weak_type = false;
      a_carry.push_back(instantiate_zero(tangents[i], t));
    } else {
      t_xs.push_back(v), a_xs.push_back(tangents[i]);
    }
  }
  auto append = [](std::vector<int>& to, const std::vector<int>& from) {
    to.insert(to.end(), from.begin(), from.end());
  };
  lin.invars.clear();
  lin.constvars.clear();
  lin.consts.clear();
  append(lin.invars, res_consts);
  append(lin.invars, t_consts);
  append(lin.invars, t_carry);
  append(lin.invars, res_xs);
  append(lin.invars, t_xs);
  std::vector<Array> args = res_const_vals;
  args.insert(args.end(), a_consts.begin(), a_consts.end());
  args.insert(args.end(), a_carry.begin(), a_carry.end());
  args.insert(args.end(), res_xs_vals.begin(), res_xs_vals.end());
  args.insert(args.end(), a_xs.begin(), a_xs.end());
  std::vector<Array> t_out = spmd::bind(primitive("scan"), args,
                                        scan_params(share(std::move(lin)), length, t_carry.size(),
                                                    res_consts.size() + t_consts.size(), reverse));

  JvpResult r;
  r.primals_out.assign(known_out.begin(), known_out.begin() + long(n.carry + n.ys));
  r.tangents_out.resize(n.carry + n.ys);
  size_t k = 0;
  for (size_t c = 0; c < n.carry; ++c)
    if (nz[n.consts + c]) r.tangents_out[c] = t_out[k++];
  for (size_t y = 0; y < n.ys; ++y)
    if (ys_nz[y]) r.tangents_out[n.carry + y] = t_out[k++];
  return r;
}

// ---- scan: transpose ----------------------------------------------------------------------------
// JAX's _scan_transpose: a scan in the opposite direction whose carry holds the cotangents of the
// linear consts (accumulated) and of the carry, and whose xs are the known xs and the ys'
// cotangents; it stacks the cotangents of the linear xs.
std::vector<Array> scan_transpose(std::span<const Array> cts, std::span<const LinearInput> ins,
                                  const Params& params) {
  const Program& body = *params.get<ProgramRef>("jaxpr");
  ScanSizes n(params, ins.size());
  std::vector<size_t> known_consts, lin_consts, known_xs, lin_xs;
  for (size_t i = 0; i < n.consts; ++i)
    (ins[i].is_linear() ? lin_consts : known_consts).push_back(i);
  for (size_t i = n.consts + n.carry; i < ins.size(); ++i)
    (ins[i].is_linear() ? lin_xs : known_xs).push_back(i);
  // A known carry (an instantiated zero tangent) is transposed like a linear one and its
  // cotangent dropped, as JAX does.
  std::vector<AbstractValue> in_types = body.in_types();
  auto zero = [](AbstractValue t) {
    t.weak_type = false;
    return zeros_like_aval(t);
  };

  std::vector<Array> args;
  std::vector<AbstractValue> types;
  auto add = [&](const Array& x, AbstractValue t) {
    args.push_back(x);
    types.push_back(std::move(t));
  };
  for (size_t i : known_consts) add(ins[i].value, in_types[i]);
  for (size_t i : lin_consts) add(zero(in_types[i]), in_types[i]);
  for (size_t c = 0; c < n.carry; ++c)
    add(is_zero(cts[c]) ? zero(in_types[n.consts + c]) : cts[c], in_types[n.consts + c]);
  // The ys' cotangents come before the known xs, as JAX's transposed scan takes them.
  std::vector<AbstractValue> out_types = body.out_types();
  for (size_t y = 0; y < n.ys; ++y) {
    const AbstractValue& yt = out_types[n.carry + y];
    AbstractValue stacked = yt;
    stacked.shape = with_leading(yt.shape, params.get_int("length"));
    if (stacked.sharding) stacked.sharding->dims.emplace(stacked.sharding->dims.begin());
    add(is_zero(cts[n.carry + y]) ? zero(stacked) : cts[n.carry + y], yt);
  }
  for (size_t i : known_xs) add(ins[i].value, in_types[i]);
  size_t nk = known_consts.size(), nl = lin_consts.size(), nkx = known_xs.size();
  lax::control_flow_detail::FlatFn fn = [&](std::span<const Array> in) {
    Program sub = body;
    std::vector<int> linear_invars;
    for (size_t k = 0; k < nk; ++k) {
      sub.constvars.push_back(body.invars[known_consts[k]]);
      sub.consts.push_back(in[k]);
    }
    for (size_t k = 0; k < nkx; ++k) {
      sub.constvars.push_back(body.invars[known_xs[k]]);
      sub.consts.push_back(in[nk + nl + n.carry + n.ys + k]);
    }
    for (size_t i : lin_consts) linear_invars.push_back(body.invars[i]);
    for (size_t c = 0; c < n.carry; ++c) linear_invars.push_back(body.invars[n.consts + c]);
    for (size_t i : lin_xs) linear_invars.push_back(body.invars[i]);
    sub.invars = linear_invars;
    std::vector<Array> body_cts(in.begin() + long(nk + nl), in.begin() + long(nk + nl + n.carry));
    for (size_t y = 0; y < n.ys; ++y) body_cts.push_back(in[nk + nl + n.carry + y]);
    // The linear consts' cotangents start from those carried in, as JAX's accumulators do.
    std::vector<Array> got = transpose_program(sub, body_cts, in.subspan(nk, nl));
    std::vector<Array> out(got.begin(), got.begin() + long(nl));
    for (size_t k = nl; k < got.size(); ++k)
      out.push_back(is_zero(got[k]) ? zero(sub.types[size_t(sub.invars[k])]) : got[k]);
    return out;
  };
  Program tb = trace_body(fn, types, "scan");
  std::vector<Array> out = spmd::bind(primitive("scan"), args,
                                      scan_params(share(std::move(tb)), params.get_int("length"),
                                                  nl + n.carry, nk, !params.get<bool>("reverse")));
  std::vector<Array> result(ins.size());
  for (size_t k = 0; k < nl; ++k) result[lin_consts[k]] = out[k];
  for (size_t c = 0; c < n.carry; ++c)
    if (ins[n.consts + c].is_linear()) result[n.consts + c] = out[nl + c];
  for (size_t k = 0; k < lin_xs.size(); ++k) result[lin_xs[k]] = out[nl + n.carry + k];
  return result;
}

// ---- cond: jvp and transpose --------------------------------------------------------------------

// A branch's jvp as one Program: inputs (operands, non-zero tangents), outputs (primal outputs,
// tangents of the outputs in out_nz, instantiated). *got_nz receives which tangents were non-zero.
Program branch_jvp(const Program& branch, const std::vector<bool>& nz,
                   const std::vector<bool>& out_nz, std::vector<bool>* got_nz) {
  std::vector<AbstractValue> types = branch.in_types();
  size_t np = nz.size();
  for (size_t i = 0; i < np; ++i)
    if (nz[i]) {
      AbstractValue t = types[i];
      t.weak_type = false;
      types.push_back(t);
    }
  lax::control_flow_detail::FlatFn fn = [&](std::span<const Array> in) {
    std::vector<Array> ts(np);
    size_t j = np;
    for (size_t i = 0; i < np; ++i)
      if (nz[i]) ts[i] = in[j++];
    auto [outs, touts] = jvp_program(branch, in.first(np), ts);
    got_nz->assign(outs.size(), false);
    size_t nout = outs.size();
    for (size_t k = 0; k < nout; ++k) {
      (*got_nz)[k] = !is_zero(touts[k]);
      if (!out_nz[k]) continue;
      AbstractValue t = aval_of(outs[k]);
      t.weak_type = false;
      outs.push_back(instantiate_zero(touts[k], t));
    }
    return outs;
  };
  Program p = trace_body(fn, types, "cond");
  return p;
}

// Drops from the tangent branches and from their operands `args` (the index, then theirs) the
// inputs no branch reads, as JAX's dead-code elimination of the linearized program prunes the
// cond's (an operand every branch passes straight through leaves its tangent unread). Returns
// the operands kept.
std::vector<Array> without_unread_inputs(std::vector<Program>& branches,
                                         const std::vector<Array>& args) {
  const size_t n = args.size() - 1;
  std::vector<bool> read(n, false);
  for (const Program& b : branches) {
    const std::vector<bool> vars = b.read_vars();
    for (size_t i = 0; i < n; ++i) read[i] = read[i] || vars[size_t(b.invars[i])];
  }
  for (Program& b : branches) {
    std::vector<int> invars;
    for (size_t i = 0; i < n; ++i)
      if (read[i]) invars.push_back(b.invars[i]);
    b.invars = std::move(invars);
  }
  std::vector<Array> kept{args[0]};
  for (size_t i = 0; i < n; ++i)
    if (read[i]) kept.push_back(args[i + 1]);
  return kept;
}

// The programs, shared.
std::vector<ProgramRef> shared(std::vector<Program> programs) {
  std::vector<ProgramRef> refs;
  for (Program& p : programs) refs.push_back(share(std::move(p)));
  return refs;
}

// JAX's cond jvp followed by its partial evaluation: a cond computing the primal outputs and
// every branch's residuals (placeholders for the other branches'), then a cond of the tangents.
JvpResult cond_jvp(std::span<const Array> primals, std::span<const Array> tangents,
                   const Params& params) {
  const auto& branches = params.get<std::vector<ProgramRef>>("branches");
  size_t nops = primals.size() - 1, nout = branches[0]->outputs.size();
  std::vector<bool> nz(nops), out_nz(nout, false), got;
  for (size_t i = 0; i < nops; ++i) nz[i] = !is_zero(tangents[i + 1]);
  for (const ProgramRef& b : branches) {
    branch_jvp(*b, nz, out_nz, &got);
    for (size_t k = 0; k < nout; ++k) out_nz[k] = out_nz[k] || got[k];
  }
  if (tangents_with_primals(primals, tangents)) {
    // Forward mode: JAX's single cond over (index, operands, non-zero tangents).
    std::vector<ProgramRef> jvp_branches;
    for (const ProgramRef& b : branches)
      jvp_branches.push_back(share(branch_jvp(*b, nz, out_nz, &got)));
    std::vector<Array> args(primals.begin(), primals.end());
    for (size_t i = 0; i < nops; ++i)
      if (nz[i]) args.push_back(tangents[i + 1]);
    std::vector<Array> out =
        spmd::bind(primitive("cond"), args, Params{{"branches", jvp_branches}});
    JvpResult r;
    r.primals_out.assign(out.begin(), out.begin() + long(nout));
    r.tangents_out.resize(nout);
    size_t k = nout;
    for (size_t o = 0; o < nout; ++o)
      if (out_nz[o]) r.tangents_out[o] = out[k++];
    return r;
  }
  std::vector<SplitJvp> splits;
  std::vector<int> inst;
  for (bool b : out_nz) inst.push_back(b ? 1 : 0);
  // Residuals of equal type share a slot across branches (JAX's _merge_branch_residuals):
  // own[b][slot] is the index of branch b's residual in that slot, or -1.
  std::vector<AbstractValue> res_types;
  std::vector<std::pair<AbstractValue, int>> slot_keys;
  std::vector<std::vector<int>> own;
  for (const ProgramRef& b : branches) {
    splits.push_back(split_jvp(*b, nz, inst, "cond", [](size_t) { return false; }));
    const Program& lin = splits.back().linear;
    std::vector<std::pair<AbstractValue, int>> tagged;
    std::vector<size_t> slots;
    for (int v : lin.constvars) {
      const AbstractValue& t = lin.types[size_t(v)];
      int count = 0;
      for (const auto& [u, k] : tagged) count += u == t;
      tagged.push_back({t, count});
      auto it = std::find(slot_keys.begin(), slot_keys.end(), tagged.back());
      if (it == slot_keys.end()) {
        slot_keys.push_back(tagged.back());
        res_types.push_back(t);
        it = slot_keys.end() - 1;
      }
      slots.push_back(size_t(it - slot_keys.begin()));
    }
    own.emplace_back();
    for (size_t r = 0; r < slots.size(); ++r) {
      if (own.back().size() <= slots[r]) own.back().resize(slots[r] + 1, -1);
      own.back()[slots[r]] = int(r);
    }
  }
  std::vector<ProgramRef> known;
  std::vector<Program> unknown;
  for (size_t b = 0; b < branches.size(); ++b) {
    const Program& core = splits[b].known;
    // JAX's _join_cond_outputs: a placeholder for every slot, then the branch's own residuals in
    // theirs (the placeholders they replace stay in the branch, unused, as in JAX's text).
    lax::control_flow_detail::FlatFn fn = [&](std::span<const Array> in) {
      std::vector<Array> outs = eval_program(core, in);
      std::vector<Array> full(outs.begin(), outs.begin() + long(nout));
      for (const AbstractValue& t : res_types) full.push_back(empty_like_aval(t));
      for (size_t r = 0; r < own[b].size(); ++r)
        if (own[b][r] >= 0) full[nout + r] = outs[nout + size_t(own[b][r])];
      return full;
    };
    known.push_back(share(trace_body(fn, branches[b]->in_types(), "cond")));
    Program lin = std::move(splits[b].linear);
    std::vector<int> tangent_invars = lin.invars;
    lin.invars.clear();
    for (size_t r = 0; r < res_types.size(); ++r) {
      int mine = r < own[b].size() ? own[b][r] : -1;
      lin.invars.push_back(mine >= 0 ? lin.constvars[size_t(mine)] : lin.new_var(res_types[r]));
    }
    lin.invars.insert(lin.invars.end(), tangent_invars.begin(), tangent_invars.end());
    lin.constvars.clear();
    lin.consts.clear();
    unknown.push_back(std::move(lin));
  }
  std::vector<Array> known_out =
      spmd::bind(primitive("cond"), primals, Params{{"branches", known}});
  std::vector<Array> args{primals[0]};
  args.insert(args.end(), known_out.begin() + long(nout), known_out.end());
  for (size_t i = 0; i < nops; ++i)
    if (nz[i]) args.push_back(tangents[i + 1]);
  args = without_unread_inputs(unknown, args);
  std::vector<Array> t_out =
      spmd::bind(primitive("cond"), args, Params{{"branches", shared(std::move(unknown))}});
  JvpResult r;
  r.primals_out.assign(known_out.begin(), known_out.begin() + long(nout));
  r.tangents_out.resize(nout);
  size_t k = 0;
  for (size_t o = 0; o < nout; ++o)
    if (out_nz[o]) r.tangents_out[o] = t_out[k++];
  return r;
}

// JAX's _cond_transpose: a cond of the transposed branches on (index, known operands, cts).
std::vector<Array> cond_transpose(std::span<const Array> cts, std::span<const LinearInput> ins,
                                  const Params& params) {
  const auto& branches = params.get<std::vector<ProgramRef>>("branches");
  std::vector<size_t> known_ops, lin_ops;
  for (size_t i = 1; i < ins.size(); ++i) (ins[i].is_linear() ? lin_ops : known_ops).push_back(i);
  std::vector<AbstractValue> out_types = branches[0]->out_types();
  std::vector<Array> args{ins[0].value};
  std::vector<AbstractValue> types;
  for (size_t i : known_ops) {
    args.push_back(ins[i].value);
    types.push_back(ins[i].aval);
  }
  for (size_t k = 0; k < cts.size(); ++k) {
    AbstractValue t = out_types[k];
    t.weak_type = false;
    args.push_back(is_zero(cts[k]) ? zeros_like_aval(t) : cts[k]);
    types.push_back(t);
  }
  std::vector<ProgramRef> transposed;
  for (const ProgramRef& b : branches) {
    lax::control_flow_detail::FlatFn fn = [&](std::span<const Array> in) {
      Program sub = *b;
      sub.invars.clear();
      for (size_t k = 0; k < known_ops.size(); ++k) {
        sub.constvars.push_back(b->invars[known_ops[k] - 1]);
        sub.consts.push_back(in[k]);
      }
      for (size_t i : lin_ops) sub.invars.push_back(b->invars[i - 1]);
      std::vector<Array> got = transpose_program(sub, in.subspan(known_ops.size()));
      for (size_t k = 0; k < got.size(); ++k) {
        AbstractValue t = ins[lin_ops[k]].aval;
        t.weak_type = false;
        got[k] = instantiate_zero(got[k], t);
      }
      return got;
    };
    transposed.push_back(share(trace_body(fn, types, "cond")));
  }
  std::vector<Array> out = spmd::bind(primitive("cond"), args, Params{{"branches", transposed}});
  std::vector<Array> result(ins.size());
  for (size_t k = 0; k < lin_ops.size(); ++k) result[lin_ops[k]] = out[k];
  return result;
}

// ---- while: jvp ---------------------------------------------------------------------------------

// JAX's _while_loop_jvp: one loop whose carry is (primals, non-zero tangents) and whose body is
// the body's jvp; the condition reads the primals only.
JvpResult while_jvp(std::span<const Array> primals, std::span<const Array> tangents,
                    const Params& params) {
  const Program& cond = *params.get<ProgramRef>("cond_jaxpr");
  const Program& body = *params.get<ProgramRef>("body_jaxpr");
  size_t cn = size_t(params.get_int("cond_nconsts")), bn = size_t(params.get_int("body_nconsts"));
  size_t ncarry = primals.size() - cn - bn;
  std::vector<bool> nz(bn + ncarry), got;
  for (size_t i = 0; i < nz.size(); ++i) nz[i] = !is_zero(tangents[cn + i]);
  std::vector<bool> out_nz(ncarry);
  Program jb;
  for (;;) {
    for (size_t c = 0; c < ncarry; ++c) out_nz[c] = nz[bn + c];
    jb = branch_jvp(body, nz, out_nz, &got);
    bool grew = false;
    for (size_t c = 0; c < ncarry; ++c)
      if (got[c] && !nz[bn + c]) nz[bn + c] = grew = true;
    if (!grew) break;
  }
  // branch_jvp orders inputs (consts, carry, const tangents, carry tangents); the loop wants
  // (consts, const tangents, carry, carry tangents).
  size_t nbt = 0, nct = 0;
  for (size_t i = 0; i < bn; ++i) nbt += nz[i];
  for (size_t c = 0; c < ncarry; ++c) nct += nz[bn + c];
  std::vector<int> inv = jb.invars;
  jb.invars.clear();
  auto take = [&](size_t from, size_t count) {
    jb.invars.insert(jb.invars.end(), inv.begin() + long(from), inv.begin() + long(from + count));
  };
  take(0, bn);
  take(bn + ncarry, nbt);
  take(bn, ncarry);
  take(bn + ncarry + nbt, nct);
  Program c = cond;
  for (size_t i = 0; i < ncarry; ++i)
    if (nz[bn + i]) c.invars.push_back(c.new_var(c.types[size_t(cond.invars[cn + i])]));
  std::vector<Array> args(primals.begin(), primals.begin() + long(cn + bn));
  for (size_t i = 0; i < bn; ++i)
    if (nz[i]) args.push_back(tangents[cn + i]);
  args.insert(args.end(), primals.begin() + long(cn + bn), primals.end());
  for (size_t i = 0; i < ncarry; ++i)
    if (nz[bn + i]) {
      AbstractValue t = aval_of(primals[cn + bn + i]);
      t.weak_type = false;
      args.push_back(instantiate_zero(tangents[cn + bn + i], t));
    }
  Params p{{"body_jaxpr", share(std::move(jb))},
           {"body_nconsts", int64_t(bn + nbt)},
           {"cond_jaxpr", share(std::move(c))},
           {"cond_nconsts", int64_t(cn)}};
  std::vector<Array> out = spmd::bind(primitive("while"), args, p);
  JvpResult r;
  r.primals_out.assign(out.begin(), out.begin() + long(ncarry));
  // Under reverse mode the tangents live in the linear trace, which then holds the whole loop;
  // the primal outputs are computed again outside it by the loop itself.
  if (!tangents_with_primals(primals, tangents))
    r.primals_out = spmd::bind(primitive("while"), primals, params);
  r.tangents_out.resize(ncarry);
  size_t k = ncarry;
  for (size_t i = 0; i < ncarry; ++i)
    if (nz[bn + i]) r.tangents_out[i] = out[k++];
  return r;
}

std::vector<Array> while_transpose(std::span<const Array>, std::span<const LinearInput>,
                                   const Params&) {
  throw ValueError(
      "[while_loop] Reverse-mode differentiation does not work for lax.while_loop or "
      "lax.fori_loop with dynamic start/stop values. Try using lax.scan, or using fori_loop with "
      "static start/stop.");
}

// ---- batching -----------------------------------------------------------------------------------

// JAX's core.unmapped_aval: t with the batch dim inserted at `dim`, split over the vmap's
// explicit mesh axes when t has a sharding.
AbstractValue batched_type(AbstractValue t, int dim, const BatchContext& ctx) {
  if (dim == kNotBatched) return t;
  std::vector<int64_t> dims(t.shape.begin(), t.shape.end());
  dims.insert(dims.begin() + dim, ctx.axis_size);
  t.shape = Shape(std::move(dims));
  if (t.sharding) t.sharding->dims.insert(t.sharding->dims.begin() + dim, ctx.explicit_mesh_axis);
  return t;
}

// `program` batched with input i mapped at in_dims[i]; output k moved to out_dims[k] unless that
// is kNotBatched (then left as it comes). *got_out_bat receives which outputs came out batched.
Program batch_body_at(const Program& program, const std::vector<int>& in_dims,
                      const std::vector<int>& out_dims, const BatchContext& ctx,
                      std::vector<bool>* got_out_bat) {
  std::vector<AbstractValue> types = program.in_types();
  for (size_t i = 0; i < types.size(); ++i)
    types[i] = batched_type(types[i], in_dims[i], ctx);
  lax::control_flow_detail::FlatFn fn = [&](std::span<const Array> in) {
    auto [outs, dims] = batch_program(program, in, in_dims, ctx);
    got_out_bat->assign(outs.size(), false);
    for (size_t k = 0; k < outs.size(); ++k) {
      (*got_out_bat)[k] = dims[k] != kNotBatched;
      if (out_dims[k] != kNotBatched)
        outs[k] = move_batch_dim(outs[k], dims[k], out_dims[k], ctx);
    }
    return outs;
  };
  Program p = trace_body(fn, types, "vmap");
  return p;
}

std::vector<int> dims_at(const std::vector<bool>& bat, int dim) {
  std::vector<int> out;
  for (bool b : bat) out.push_back(b ? dim : kNotBatched);
  return out;
}

// batch_body_at with every batched input and forced output at axis 0.
Program batch_body(const Program& program, const std::vector<bool>& in_bat,
                   const std::vector<bool>& out_bat, const BatchContext& ctx,
                   std::vector<bool>* got_out_bat) {
  return batch_body_at(program, dims_at(in_bat, 0), dims_at(out_bat, 0), ctx, got_out_bat);
}

// JAX's _cond_batching_rule. A batched index runs every branch on all operands and selects the
// results; otherwise the branches are batched in place.
BatchResult cond_batch(std::span<const Array> args, std::span<const int> dims, const Params& params,
                       const BatchContext& ctx) {
  const auto& branches = params.get<std::vector<ProgramRef>>("branches");
  size_t nops = args.size() - 1;
  if (dims[0] != kNotBatched) {
    Array index = move_batch_dim(args[0], dims[0], 0, ctx);
    std::vector<Array> ops_in;
    for (size_t i = 1; i < args.size(); ++i)
      ops_in.push_back(move_batch_dim(args[i], dims[i], 0, ctx));
    std::vector<std::vector<Array>> branch_outs;
    std::vector<int> zeros_dims(nops, 0);
    for (size_t b = 0; b < branches.size(); ++b) {
      Array pred = lax::eq(index, ops::constant_like(index, double(b)));
      std::vector<Array> guarded;
      // Each branch sees its operands only where it is selected, so reverse mode through the
      // other lanes contributes nothing (JAX issue 1052).
      for (const Array& x : ops_in) {
        Array stopped = lax::stop_gradient(x);
        guarded.push_back(lax::select_n(broadcast_pred(pred, x), {stopped, x}));
      }
      auto [outs, out_dims] = batch_program(*branches[b], guarded, zeros_dims, ctx);
      for (size_t k = 0; k < outs.size(); ++k)
        outs[k] = move_batch_dim(outs[k], out_dims[k], 0, ctx);
      branch_outs.push_back(std::move(outs));
    }
    BatchResult r;
    for (size_t k = 0; k < branch_outs[0].size(); ++k) {
      std::vector<Array> cases;
      for (auto& outs : branch_outs) cases.push_back(outs[k]);
      r.outputs.push_back(lax::select_n(broadcast_pred(index, cases[0]), cases));
      r.dims.push_back(0);
    }
    return r;
  }
  std::vector<bool> in_bat(nops);
  std::vector<Array> ops_in{args[0]};
  for (size_t i = 0; i < nops; ++i) {
    in_bat[i] = dims[i + 1] != kNotBatched;
    ops_in.push_back(in_bat[i] ? move_batch_dim(args[i + 1], dims[i + 1], 0, ctx)
                               : args[i + 1]);
  }
  size_t nout = branches[0]->outputs.size();
  std::vector<bool> out_bat(nout, false), got;
  for (const ProgramRef& b : branches) {
    batch_body(*b, in_bat, std::vector<bool>(nout, false), ctx, &got);
    for (size_t k = 0; k < nout; ++k) out_bat[k] = out_bat[k] || got[k];
  }
  std::vector<ProgramRef> batched;
  for (const ProgramRef& b : branches)
    batched.push_back(share(batch_body(*b, in_bat, out_bat, ctx, &got)));
  BatchResult r;
  r.outputs = spmd::bind(primitive("cond"), ops_in, Params{{"branches", batched}});
  for (size_t k = 0; k < nout; ++k) r.dims.push_back(out_bat[k] ? 0 : kNotBatched);
  return r;
}

// JAX's _scan_batching_rule: carries batched to a fixed point, xs and ys batched at axis 1 of the
// stacked arrays (axis 0 of each slice).
BatchResult scan_batch(std::span<const Array> args, std::span<const int> dims, const Params& params,
                       const BatchContext& ctx) {
  const Program& body = *params.get<ProgramRef>("jaxpr");
  ScanSizes n(params, args.size());
  std::vector<bool> in_bat(args.size());
  for (size_t i = 0; i < args.size(); ++i) in_bat[i] = dims[i] != kNotBatched;
  std::vector<bool> out_bat(n.carry + n.ys, false), got;
  for (;;) {
    batch_body(body, in_bat, out_bat, ctx, &got);
    bool grew = false;
    for (size_t c = 0; c < n.carry; ++c)
      if (got[c] && !in_bat[n.consts + c]) in_bat[n.consts + c] = grew = true;
    if (!grew) break;
  }
  for (size_t c = 0; c < n.carry; ++c) out_bat[c] = in_bat[n.consts + c];
  for (size_t y = 0; y < n.ys; ++y) out_bat[n.carry + y] = got[n.carry + y];
  Program batched = batch_body(body, in_bat, out_bat, ctx, &got);
  std::vector<Array> ins;
  for (size_t i = 0; i < args.size(); ++i) {
    bool is_xs = i >= n.consts + n.carry;
    int to = is_xs ? 1 : 0;
    ins.push_back(in_bat[i] ? move_batch_dim(args[i], dims[i], to, ctx) : args[i]);
  }
  BatchResult r;
  r.outputs = spmd::bind(primitive("scan"), ins,
                         scan_params(share(std::move(batched)), params.get_int("length"), n.carry,
                                     n.consts, params.get<bool>("reverse")));
  for (size_t k = 0; k < r.outputs.size(); ++k)
    r.dims.push_back(!out_bat[k] ? kNotBatched : k < n.carry ? 0 : 1);
  return r;
}

// JAX's _while_loop_batching_rule: carries batched to a fixed point. A batched predicate batches
// every carry at axis 0 and stays batched in the loop, which then runs while any lane's
// predicate holds and advances only those lanes (see while_eager).
BatchResult while_batch(std::span<const Array> args, std::span<const int> dims,
                        const Params& params, const BatchContext& ctx) {
  const Program& cond = *params.get<ProgramRef>("cond_jaxpr");
  const Program& body = *params.get<ProgramRef>("body_jaxpr");
  size_t cn = size_t(params.get_int("cond_nconsts")), bn = size_t(params.get_int("body_nconsts"));
  size_t ncarry = args.size() - cn - bn;
  std::vector<bool> bat(args.size());
  for (size_t i = 0; i < args.size(); ++i) bat[i] = dims[i] != kNotBatched;
  std::vector<bool> got;
  for (;;) {
    batch_body(body, std::vector<bool>(bat.begin() + long(cn), bat.end()),
               std::vector<bool>(ncarry, false), ctx, &got);
    bool grew = false;
    for (size_t c = 0; c < ncarry; ++c)
      if (got[c] && !bat[cn + bn + c]) bat[cn + bn + c] = grew = true;
    if (!grew) break;
  }
  std::vector<bool> cond_bat(bat.begin(), bat.begin() + long(cn));
  cond_bat.insert(cond_bat.end(), bat.begin() + long(cn + bn), bat.end());
  batch_body(cond, cond_bat, {false}, ctx, &got);
  bool pred_bat = got[0];
  // The predicate's shape must prefix every batched carry's: carries go after its dims.
  int carry_dim = pred_bat ? 0 : int(cond.out_types()[0].shape.ndim());
  if (pred_bat)
    for (size_t c = 0; c < ncarry; ++c) bat[cn + bn + c] = true;
  std::vector<int> arg_dims;
  std::vector<Array> ins;
  for (size_t i = 0; i < args.size(); ++i) {
    int to = !bat[i] ? kNotBatched : i >= cn + bn ? carry_dim : 0;
    arg_dims.push_back(to);
    ins.push_back(bat[i] ? move_batch_dim(args[i], dims[i], to, ctx) : args[i]);
  }
  std::vector<int> cond_dims(arg_dims.begin(), arg_dims.begin() + long(cn));
  cond_dims.insert(cond_dims.end(), arg_dims.begin() + long(cn + bn), arg_dims.end());
  std::vector<int> body_dims(arg_dims.begin() + long(cn), arg_dims.end());
  std::vector<int> carry_dims(arg_dims.begin() + long(cn + bn), arg_dims.end());
  Params p{{"body_jaxpr", share(batch_body_at(body, body_dims, carry_dims, ctx, &got))},
           {"body_nconsts", int64_t(bn)},
           {"cond_jaxpr",
            share(batch_body_at(cond, cond_dims, {pred_bat ? 0 : kNotBatched}, ctx, &got))},
           {"cond_nconsts", int64_t(cn)}};
  return {spmd::bind(primitive("while"), ins, p), carry_dims};
}

// ---- sharding rules -----------------------------------------------------------------------------
// The bodies run on blocks: each operand, carry and result is one value with the body inputs
// and outputs that hold it (ShardingRule::bodies), so the partitioner splits them alike.

ShardingRule::Body body_of(std::string name, ProgramRef program) {
  return {std::move(name), std::move(program), {}, {}};
}

// Links body inputs [from, from + n) to operands [to, to + n).
void link_inputs(ShardingRule::Body& body, size_t from, size_t n, int to, int lead = 0) {
  body.inputs.resize(std::max(body.inputs.size(), from + n));
  for (size_t i = 0; i < n; ++i) body.inputs[from + i] = {to + int(i), lead};
}

// A cond's branches take every operand but the index, which stays whole.
ShardingRule cond_sharding(std::span<const AbstractValue> in, std::span<const AbstractValue> out,
                           const Params& p) {
  ShardingRule rule = replicated_sharding_rule(in, out);
  const auto& branches = p.get<std::vector<ProgramRef>>("branches");
  for (size_t b = 0; b < branches.size(); ++b) {
    ShardingRule::Body body = body_of("branches[" + std::to_string(b) + "]", branches[b]);
    link_inputs(body, 0, in.size() - 1, 1);
    for (size_t r = 0; r < out.size(); ++r) body.outputs.push_back({int(r), 0});
    rule.bodies.push_back(std::move(body));
  }
  rule.with_bodies = [](const Params& p, std::vector<ProgramRef> bodies) {
    Params q = p;
    q.set("branches", std::move(bodies));
    return q;
  };
  return rule;
}

// A while's carries are one value in cond_fun, body_fun and the results; its predicate stays
// whole, or, with dims (a batched loop selecting lanes), has the lanes of the carries.
ShardingRule while_sharding(std::span<const AbstractValue> in, std::span<const AbstractValue> out,
                            const Params& p) {
  ShardingRule rule = replicated_sharding_rule(in, out);
  const ProgramRef& cond = p.get<ProgramRef>("cond_jaxpr");
  const size_t cn = size_t(p.get_int("cond_nconsts")), bn = size_t(p.get_int("body_nconsts"));
  const size_t nc = out.size();
  ShardingRule::Body c = body_of("cond_jaxpr", cond);
  link_inputs(c, 0, cn, 0);
  link_inputs(c, cn, nc, int(cn + bn));
  c.outputs.push_back({-1, cond->out_types()[0].shape.ndim()});
  ShardingRule::Body b = body_of("body_jaxpr", p.get<ProgramRef>("body_jaxpr"));
  link_inputs(b, 0, bn, int(cn));
  link_inputs(b, bn, nc, int(cn + bn));
  for (size_t r = 0; r < nc; ++r) {
    b.outputs.push_back({int(r), 0});
    rule.carries.push_back({int(cn + bn + r), int(r)});
  }
  rule.bodies = {std::move(c), std::move(b)};
  rule.with_bodies = [](const Params& p, std::vector<ProgramRef> bodies) {
    Params q = p;
    q.set("cond_jaxpr", bodies[0]);
    q.set("body_jaxpr", bodies[1]);
    return q;
  };
  return rule;
}

// A scan's body sees one slice of each xs and gives one slice of each ys: their leading
// (iteration) dim is never split.
ShardingRule scan_sharding(std::span<const AbstractValue> in, std::span<const AbstractValue> out,
                           const Params& p) {
  ShardingRule rule = replicated_sharding_rule(in, out);
  const ScanSizes n(p, in.size());
  ShardingRule::Body body = body_of("jaxpr", p.get<ProgramRef>("jaxpr"));
  link_inputs(body, 0, n.consts + n.carry, 0);
  link_inputs(body, n.consts + n.carry, n.xs, int(n.consts + n.carry), 1);
  for (size_t r = 0; r < n.carry + n.ys; ++r) body.outputs.push_back({int(r), r < n.carry ? 0 : 1});
  for (size_t c = 0; c < n.carry; ++c) rule.carries.push_back({int(n.consts + c), int(c)});
  rule.bodies.push_back(std::move(body));
  rule.with_bodies = [](const Params& p, std::vector<ProgramRef> bodies) {
    Params q = p;
    q.set("jaxpr", bodies[0]);
    return q;
  };
  return rule;
}

[[noreturn]] void no_kernel(const KernelArgs&) {
  throw std::logic_error("control flow primitives run through their eager rule");
}

}  // namespace

namespace lax::control_flow_detail {

Array cond_index(const Array& pred) {
  if (pred.ndim() != 0)
    throw TypeError("[cond] Pred must be a scalar, got an array of shape " + aval_of(pred).str() +
                    ".");
  Array p = pred;
  if (pred.dtype() != DType::bool_) {
    if (!is_integer(pred.dtype()) && !is_floating(pred.dtype()))
      throw TypeError("[cond] Pred type must be either boolean or number, got " +
                      aval_of(pred).str() + ".");
    p = lax::ne(pred, ops::constant_like(pred, 0));
  }
  return lax::convert_element_type(p, DType::int32);
}

Array switch_index(const Array& index, size_t num_branches) {
  if (num_branches == 0) throw ValueError("[switch] Empty branch sequence");
  if (index.ndim() != 0)
    throw TypeError("[switch] Branch index must be scalar, got " + aval_of(index).str() + ".");
  if (!is_integer(index.dtype()))
    throw TypeError("[switch] Index type must be an integer, got " + aval_of(index).str() + ".");
  Array i = ops::convert(index, DType::int32);
  return lax::clamp(ops::scalar(0, DType::int32, true), i,
                    ops::scalar(double(num_branches - 1), DType::int32, true));
}

namespace {

// Per output of the branches, the input every branch returns as it (JAX's _jaxpr_forwarding
// agreeing over the branches), or -1.
std::vector<int> forwarded_inputs(const std::vector<Program>& branches) {
  std::vector<int> from;
  for (size_t k = 0; k < branches[0].outputs.size(); ++k) {
    int common = -1;
    for (size_t b = 0; b < branches.size(); ++b) {
      const Program& p = branches[b];
      const Atom& out = p.outputs[k];
      const auto it = out.is_literal() ? p.invars.end() : std::ranges::find(p.invars, out.var);
      const int in = it == p.invars.end() ? -1 : int(it - p.invars.begin());
      if (in < 0 || (b > 0 && in != common)) {
        common = -1;
        break;
      }
      common = in;
    }
    from.push_back(common);
  }
  return from;
}

// Binds `cond` (args: the index, then the branches' inputs) on branches without the outputs
// every branch passes straight through, as JAX's cond and switch prune them; those results are
// the inputs themselves.
std::vector<Array> bind_cond_without_forwarded(std::vector<Program> branches,
                                               std::span<const Array> args) {
  const std::vector<int> from = forwarded_inputs(branches);
  std::vector<ProgramRef> refs;
  for (Program& p : branches) {
    std::vector<Atom> kept;
    for (size_t k = 0; k < from.size(); ++k)
      if (from[k] < 0) kept.push_back(p.outputs[k]);
    p.outputs = std::move(kept);
    refs.push_back(share(std::move(p)));
  }
  const std::vector<Array> outs = spmd::bind(primitive("cond"), args, Params{{"branches", refs}});
  std::vector<Array> result;
  auto next = outs.begin();
  for (int k : from) result.push_back(k < 0 ? *next++ : args[size_t(k) + 1]);
  return result;
}

}  // namespace

std::vector<Array> cond(const char* api, const Array& index, std::span<const FlatFn> branches,
                        std::span<const std::shared_ptr<TreeDef>> out_defs,
                        std::span<const Array> operands) {
  std::vector<AbstractValue> types = types_of(operands);
  std::vector<Program> programs;
  std::vector<Array> consts;  // merged over branches, each distinct value once
  std::unordered_map<const ArrayImpl*, size_t> const_slot;
  std::vector<std::vector<std::pair<size_t, int>>> branch_consts;  // (slot, constvar)
  for (size_t b = 0; b < branches.size(); ++b) {
    programs.push_back(trace_to_program(branches[b], types, api));
    Program& p = programs.back();
    branch_consts.emplace_back();
    for (size_t k = 0; k < p.consts.size(); ++k) {
      auto [it, added] = const_slot.emplace(p.consts[k].impl().get(), consts.size());
      if (added) consts.push_back(p.consts[k]);
      branch_consts.back().push_back({it->second, p.constvars[k]});
    }
    std::vector<AbstractValue> out = p.out_types(), first = programs[0].out_types();
    if (!(*out_defs[b] == *out_defs[0]))
      throw TypeError(std::string("[") + api + "] " +
                      (b == 1 && std::string(api) == "cond"
                           ? "true_fun and false_fun output must have same type structure"
                           : "branch 0 and branch " + std::to_string(b) +
                                 " outputs must have same type structure") +
                      ", got " + tree_str(*out_defs[0]) + " and " + tree_str(*out_defs[b]) + ".");
    if (!typematch(out, first))
      throw TypeError(std::string("[") + api + "] " +
                      (b == 1 && std::string(api) == "cond"
                           ? "true_fun and false_fun output"
                           : "branch 0 and branch " + std::to_string(b) + " outputs") +
                      " must have identical types, got\n" + types_str(first) + " and " +
                      types_str(out) + ".");
    check_branch_types(api, b, first, out, leaf_paths(*out_defs[0]));
  }
  // Every branch takes all the merged constants, using its own.
  for (size_t b = 0; b < programs.size(); ++b) {
    Program& p = programs[b];
    std::vector<int> lead(consts.size(), -1);
    for (auto [slot, var] : branch_consts[b]) lead[slot] = var;
    for (size_t k = 0; k < lead.size(); ++k)
      if (lead[k] < 0) lead[k] = p.new_var(aval_of(consts[k]));
    p.invars.insert(p.invars.begin(), lead.begin(), lead.end());
    p.constvars.clear();
    p.consts.clear();
  }
  std::vector<Array> args{index};
  args.insert(args.end(), consts.begin(), consts.end());
  args.insert(args.end(), operands.begin(), operands.end());
  return bind_cond_without_forwarded(std::move(programs), args);
}

std::vector<Array> while_loop(const FlatFn& cond_fn, const FlatFn& body_fn,
                              const std::shared_ptr<TreeDef>& body_out_def, const TreeDef& init_def,
                              std::span<const Array> init) {
  std::vector<AbstractValue> types = types_of(init);
  auto [cond_prog, cond_consts] = trace_hoisted(cond_fn, types, "while_loop");
  std::vector<AbstractValue> pred = cond_prog->out_types();
  if (pred.size() != 1 || pred[0].dtype != DType::bool_ || !pred[0].shape.empty())
    throw TypeError("[while_loop] cond_fun must return a boolean scalar, but got output type(s) " +
                    types_str(pred) + ".");
  auto [body_prog, body_consts] = trace_hoisted(body_fn, types, "while_loop");
  std::vector<AbstractValue> out = body_prog->out_types();
  check_carry_tree("while_loop", "while_loop", init_def, *body_out_def);
  if (!typematch(out, types))
    throw TypeError(
        "[while_loop] body_fun output and input must have identical types: the input carry is " +
        types_str(types) + " but the output carry is " + types_str(out) + ".");
  check_carry_types("while_loop", "while_loop", types, out, leaf_paths(init_def));
  std::vector<Array> args = concat(cond_consts, body_consts);
  args.insert(args.end(), init.begin(), init.end());
  Params params{{"body_jaxpr", body_prog},
                {"body_nconsts", int64_t(body_consts.size())},
                {"cond_jaxpr", cond_prog},
                {"cond_nconsts", int64_t(cond_consts.size())}};
  return spmd::bind(primitive("while"), args, params);
}

namespace {
// What JAX's lax.scan takes out of a body (consts, carries, xs in; carries, ys out) that passes
// inputs through unchanged (_jaxpr_forwarding): a carry whose output is its input is read only,
// and moves in front of the consts, its final value the initial one; a ys output that is an xs
// input is dropped, and the scan returns that xs itself.
struct ScanForwarding {
  std::vector<bool> moved;   // per carry
  std::vector<int> ys_from;  // per ys: the xs it is, or -1
};

ScanForwarding scan_forwarding(const Program& body, size_t num_consts, size_t num_carry) {
  auto input_of = [&](const Atom& a) -> int {
    if (a.is_literal()) return -1;
    auto it = std::find(body.invars.begin(), body.invars.end(), a.var);
    return it == body.invars.end() ? -1 : int(it - body.invars.begin());
  };
  ScanForwarding f;
  const int first_xs = int(num_consts + num_carry);
  for (size_t i = 0; i < body.outputs.size(); ++i) {
    const int in = input_of(body.outputs[i]);
    if (i < num_carry) f.moved.push_back(in == int(num_consts + i));
    else f.ys_from.push_back(in >= first_xs ? in - first_xs : -1);
  }
  return f;
}

// The body without what `f` takes out.
Program without_forwarded(const Program& body, const ScanForwarding& f, size_t num_consts) {
  Program out = body;
  out.invars.clear();
  out.outputs.clear();
  const auto consts_end = body.invars.begin() + std::ptrdiff_t(num_consts);
  const size_t num_carry = f.moved.size();
  for (size_t i = 0; i < num_carry; ++i)
    if (f.moved[i]) out.invars.push_back(body.invars[num_consts + i]);
  out.invars.insert(out.invars.end(), body.invars.begin(), consts_end);
  for (size_t i = 0; i < num_carry; ++i)
    if (!f.moved[i]) out.invars.push_back(body.invars[num_consts + i]);
  out.invars.insert(out.invars.end(), consts_end + std::ptrdiff_t(num_carry), body.invars.end());
  for (size_t i = 0; i < body.outputs.size(); ++i)
    if (i < num_carry ? !f.moved[i] : f.ys_from[i - num_carry] < 0)
      out.outputs.push_back(body.outputs[i]);
  return out;
}

// Binds `scan` on a traced body (hoisted consts first) without what the body forwards: the
// results are the carries' and the stacked outputs', as the body gives them.
std::vector<Array> bind_scan(ProgramRef body, std::span<const Array> consts,
                             std::span<const Array> init, std::span<const Array> xs,
                             int64_t length, bool reverse) {
  const ScanForwarding fwd = scan_forwarding(*body, consts.size(), init.size());
  std::vector<Array> args, kept;
  for (size_t i = 0; i < init.size(); ++i) (fwd.moved[i] ? args : kept).push_back(init[i]);
  const size_t num_moved = args.size();
  if (num_moved || std::ranges::any_of(fwd.ys_from, [](int k) { return k >= 0; }))
    body = share(without_forwarded(*body, fwd, consts.size()));
  args.insert(args.end(), consts.begin(), consts.end());
  args.insert(args.end(), kept.begin(), kept.end());
  args.insert(args.end(), xs.begin(), xs.end());
  Params params{{"jaxpr", body},
                {"length", length},
                {"num_carry", int64_t(kept.size())},
                {"num_consts", int64_t(num_moved + consts.size())},
                {"reverse", reverse},
                {"unroll", int64_t(1)}};
  const std::vector<Array> outs = spmd::bind(primitive("scan"), args, params);
  std::vector<Array> result;
  auto next = outs.begin();
  for (size_t i = 0; i < init.size(); ++i) result.push_back(fwd.moved[i] ? init[i] : *next++);
  for (int k : fwd.ys_from) result.push_back(k >= 0 ? xs[size_t(k)] : *next++);
  return result;
}
}  // namespace

namespace {
// "5, 4", as JAX joins the leading sizes of xs in scan's errors.
std::string joined(const std::vector<int64_t>& sizes) {
  std::string out;
  for (int64_t n : sizes) out += (out.empty() ? "" : ", ") + std::to_string(n);
  return out;
}

// The key paths of a scan's carry leaves; fori_loop's carry is its counter and then the user's
// (JAX's `loop_carry` pair).
std::vector<std::string> carry_paths(const char* api, const TreeDef& init_def) {
  std::vector<std::string> paths = leaf_paths(init_def);
  if (std::string(api) != "fori_loop") return paths;
  for (std::string& p : paths) p = "[1]" + p;
  paths.insert(paths.begin(), "[0]");
  return paths;
}
}  // namespace

std::vector<Array> scan(const FlatFn& body, const TreeDef& init_def,
                        const std::shared_ptr<TreeDef>& carry_out_def, std::span<const Array> init,
                        std::span<const Array> xs, std::optional<int64_t> length, bool reverse,
                        const char* api) {
  std::string pre = std::string("[") + api + "] ";
  std::vector<int64_t> sizes;
  for (const Array& x : xs) {
    if (x.ndim() == 0)
      throw ValueError(
          pre + "scan got value with no leading axis to scan over: " + aval_of(x).str() + ".");
    sizes.push_back(x.shape()[0]);
  }
  const bool same_sizes = std::ranges::all_of(sizes, [&](int64_t n) { return n == sizes[0]; });
  if (length && !std::ranges::all_of(sizes, [&](int64_t n) { return n == *length; }))
    throw ValueError(pre + "scan got `length` argument of " + std::to_string(*length) +
                     " which disagrees with leading axis sizes " +
                     "[" + joined(sizes) + "]" + ".");
  if (!same_sizes)
    throw ValueError(pre + "scan got values with different leading axis sizes: " +
                     joined(sizes) + ".");
  if (!length && sizes.empty())
    throw ValueError(pre + "scan got no values to scan over and `length` not provided.");
  if (!length) length = sizes[0];
  if (*length < 0)
    throw ValueError(pre + "scan got a negative `length` argument: " + std::to_string(*length) +
                     ".");
  std::vector<AbstractValue> types = types_of(init);
  size_t num_carry = types.size();
  for (const Array& x : xs) types.push_back(scanned_slice(aval_of(x)));
  auto [prog, consts] = trace_hoisted(body, types, api);
  std::vector<AbstractValue> out = prog->out_types();
  std::span<const AbstractValue> in_carry(types.data(), num_carry);
  check_carry_tree(api, "scan", init_def, *carry_out_def);
  if (out.size() < num_carry ||
      !typematch(std::span<const AbstractValue>(out.data(), num_carry), in_carry))
    throw TypeError(
        pre +
        "scan body function carry input and carry output must have identical "
        "types: the input carry is " +
        types_str(in_carry) + " but the output carry is " +
        types_str(std::span<const AbstractValue>(out.data(), std::min(out.size(), num_carry))) +
        ".");
  check_carry_types(api, "scan", in_carry, std::span<const AbstractValue>(out).first(num_carry),
                    carry_paths(api, init_def));
  return bind_scan(prog, consts, init, xs, *length, reverse);
}

std::vector<Array> fori_loop(int64_t lower, int64_t upper, const FlatFn& body,
                             const std::shared_ptr<TreeDef>& body_out_def, const TreeDef& init_def,
                             std::span<const Array> init) {
  // The counter is the carry's first leaf and is incremented before the body runs, as JAX's
  // _fori_scan_body_fun does.
  FlatFn step = [&body](std::span<const Array> in) {
    std::vector<Array> out{lax::add(in[0], ops::constant_like(in[0], 1))};
    std::vector<Array> carry = body(in);
    out.insert(out.end(), carry.begin(), carry.end());
    return out;
  };
  auto carry_def = std::make_shared<TreeDef>();
  FlatFn checked = [&](std::span<const Array> in) {
    std::vector<Array> out = step(in);
    *carry_def = *body_out_def;
    return out;
  };
  // JAX's counter is an int32 unless x64 is on; bounds past it would wrap around.
  const bool fits = lower >= INT32_MIN && lower <= INT32_MAX && upper >= INT32_MIN &&
                    upper <= INT32_MAX;
  if (!fits && !config::x64_enabled())
    throw ValueError("[fori_loop] the C++ integer " +
                     std::to_string(lower < INT32_MIN || lower > INT32_MAX ? lower : upper) +
                     " is too large to convert to int32 (enable x64 for 64-bit integers)");
  std::vector<Array> carry{ops::scalar(double(lower), fits ? DType::int32 : DType::int64)};
  carry.insert(carry.end(), init.begin(), init.end());
  // The scan's carry tree is the counter plus the user's; compare the user's part only.
  std::vector<Array> out = scan(checked, init_def, carry_def, carry, {},
                                std::max<int64_t>(upper - lower, 0), false, "fori_loop");
  out.erase(out.begin());
  return out;
}

}  // namespace lax::control_flow_detail

void register_control_flow_primitives(PrimitiveRegistry& r) {
  Primitive& cond = r.define(
      "cond",
      [](std::span<const AbstractValue> in, const Params& p) {
        return body_types(in, p.get<std::vector<ProgramRef>>("branches")[0]->out_types());
      },
      no_kernel);
  cond.eager = cond_eager;
  cond.batch = cond_batch;
  cond.jvp = cond_jvp;
  cond.transpose = cond_transpose;
  Primitive& w = r.define(
      "while",
      [](std::span<const AbstractValue> in, const Params& p) {
        return body_types(in, p.get<ProgramRef>("body_jaxpr")->out_types());
      },
      no_kernel);
  w.eager = while_eager;
  w.jvp = while_jvp;
  w.transpose = while_transpose;
  w.batch = while_batch;
  Primitive& s = r.define("scan", scan_shape, no_kernel);
  s.eager = scan_eager;
  s.jvp = scan_jvp;
  s.transpose = scan_transpose;
  s.batch = scan_batch;
  cond.sharding_rule = cond_sharding;
  w.sharding_rule = while_sharding;
  s.sharding_rule = scan_sharding;
  // Each result varies as the body's result does; operands are not cast (a carry's type is
  // checked against the body's at trace time, the operands against the bodies' inputs here).
  cond.vma_rule = checked_vma(cond, [](std::span<const AbstractValue> in, const Params& p) {
    for (const ProgramRef& b : p.get<std::vector<ProgramRef>>("branches"))
      check_body_inputs("cond", in, *b, operand_range(1, in.size()));
  });
  w.vma_rule = checked_vma(w, [](std::span<const AbstractValue> in, const Params& p) {
    const size_t nc = size_t(p.get_int("cond_nconsts")), nb = size_t(p.get_int("body_nconsts"));
    std::vector<size_t> cond_in = operand_range(0, nc);
    for (size_t i = nc + nb; i < in.size(); ++i) cond_in.push_back(i);
    check_body_inputs("while", in, *p.get<ProgramRef>("cond_jaxpr"), cond_in);
    check_body_inputs("while", in, *p.get<ProgramRef>("body_jaxpr"), operand_range(nc, in.size()));
  });
  s.vma_rule = checked_vma(s, [](std::span<const AbstractValue> in, const Params& p) {
    check_body_inputs("scan", in, *p.get<ProgramRef>("jaxpr"), operand_range(0, in.size()));
  });
  // In Explicit mode the results have the types the shape rules read off the bodies (carries
  // keep theirs).
  for (Primitive* p : {&cond, &w, &s}) {
    p->type_sharding_rule = [p](std::span<const AbstractValue> in, std::span<AbstractValue> out,
                                const Params& params) {
      std::vector<AbstractValue> traced = p->shape_rule(in, params);
      for (size_t i = 0; i < out.size(); ++i) out[i].sharding = traced[i].sharding;
    };
  }
}

}  // namespace spmd

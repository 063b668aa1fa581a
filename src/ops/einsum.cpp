// jnp.einsum. The subscripts are read as opt_einsum reads them (jnp.einsum calls its
// contract_path): spaces dropped, `...` replaced by unused labels, the implicit output made of
// the labels seen once, sorted. The operands are then contracted in the order of the path
// `optimize` picks (einsum_path.cpp), one or two at a time, and each step lowers as JAX's
// _einsum does: labels summed out of one operand by reduce_sum, repeated labels by a select
// against a Kronecker delta, the pair by one dot_general (with the precision given), then a
// transpose into the step's label order. Only existing primitives are bound, so jaxprs,
// gradients, vmap and sharding follow theirs.
#include <spmd/lax.h>
#include <spmd/ops.h>
#include <spmd/placement.h>

#include "ops/einsum_path.h"
#include "ops/einsum_precision.h"
#include "ops/op_util.h"
#include "prims/rule_util.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>

namespace spmd {
namespace {

// Labels are code points: the subscripts' own characters and, past the 52 letters, the symbols
// opt_einsum makes up for an ellipsis.
using Labels = std::u32string;
using Dims = std::vector<int64_t>;

[[noreturn]] void fail(const std::string& message) {
  throw ValueError("[einsum] " + message);
}

std::string utf8(const Labels& labels) {
  std::string s;
  for (char32_t c : labels) {
    if (c < 0x80) {
      s += char(c);
    } else if (c < 0x800) {
      s += char(0xC0 | (c >> 6));
      s += char(0x80 | (c & 0x3F));
    } else {
      s += char(0xE0 | (c >> 12));
      s += char(0x80 | ((c >> 6) & 0x3F));
      s += char(0x80 | (c & 0x3F));
    }
  }
  return s;
}

std::string quoted(char32_t label) {
  std::string s(1, '\'');
  s += utf8(Labels(1, label));
  s += '\'';
  return s;
}

bool has(const Labels& labels, char32_t c) {
  return labels.find(c) != Labels::npos;
}

Labels without(const Labels& labels, const Labels& removed) {
  Labels out;
  for (char32_t c : labels)
    if (!has(removed, c)) out += c;
  return out;
}

// ---- parsing (opt_einsum's parse_einsum_input and contract_path checks) -------------------------
struct Parsed {
  std::vector<Labels> inputs;
  Labels output;
};

// opt_einsum's get_symbol: the letters, then code points from 192 on.
char32_t symbol(int i) {
  static const char* letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  return i < 52 ? char32_t(letters[i]) : char32_t(i + 140);
}

// The first n symbols not in `used`.
Labels unused_symbols(const Labels& used, int64_t n) {
  Labels out;
  for (int i = 0; int64_t(out.size()) < n; ++i)
    if (!has(used, symbol(i))) out += symbol(i);
  return out;
}

// The labels seen exactly once, sorted (the implicit output).
Labels labels_seen_once(const std::vector<Labels>& inputs) {
  Labels all;
  for (const Labels& in : inputs) all += in;
  std::set<char32_t> once;
  for (char32_t c : all)
    if (std::count(all.begin(), all.end(), c) == 1) once.insert(c);
  return Labels(once.begin(), once.end());
}

std::vector<Labels> split_terms(const Labels& s) {
  std::vector<Labels> terms(1);
  for (char32_t c : s) {
    if (c == U',')
      terms.emplace_back();
    else
      terms.back() += c;
  }
  return terms;
}

void replace_all(Labels& s, const Labels& from, const Labels& to) {
  for (size_t at = s.find(from); at != Labels::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

void check_operand_count(size_t terms, size_t operands) {
  if (terms != operands)
    fail("Number of einsum subscripts, " + std::to_string(terms) +
         ", must be equal to the number of operands, " + std::to_string(operands) + ".");
}

// Replaces each input's `...` by labels for the dims it covers (the last ones of `symbols`)
// and returns the labels of the longest.
Labels expand_ellipses(std::vector<Labels>& inputs, const std::vector<Array>& operands,
                       const Labels& symbols) {
  int64_t longest = 0;
  const Labels dots = U"...";
  for (size_t i = 0; i < inputs.size(); ++i) {
    Labels& sub = inputs[i];
    if (!has(sub, U'.')) continue;
    if (std::count(sub.begin(), sub.end(), U'.') != 3 || sub.find(dots) == Labels::npos)
      fail("Invalid Ellipses.");
    if (i >= operands.size()) check_operand_count(inputs.size(), operands.size());
    const int ndim = operands[i].ndim();
    const int64_t count = ndim == 0 ? 0 : int64_t(ndim) - int64_t(sub.size() - 3);
    longest = std::max(longest, count);
    if (count < 0) fail("Ellipses lengths do not match.");
    sub.replace(sub.find(dots), 3, symbols.substr(symbols.size() - size_t(count)));
  }
  return symbols.substr(symbols.size() - size_t(longest));
}

Parsed parse_with_ellipses(const Labels& subscripts, bool explicit_output,
                           const std::vector<Array>& operands) {
  Labels used;
  for (char32_t c : subscripts)
    if (c != U'.' && c != U',' && c != U'-' && c != U'>') used += c;
  int max_ndim = 0;
  for (const Array& x : operands) max_ndim = std::max(max_ndim, x.ndim());
  const size_t arrow = subscripts.find(U"->");
  Parsed p{split_terms(subscripts.substr(0, arrow)), {}};
  const Labels out_ellipsis = expand_ellipses(p.inputs, operands, unused_symbols(used, max_ndim));
  if (explicit_output) {
    p.output = subscripts.substr(arrow + 2);
    replace_all(p.output, U"...", out_ellipsis);
  } else {
    p.output = out_ellipsis + without(labels_seen_once(p.inputs), out_ellipsis);
  }
  return p;
}

void check_output(const Parsed& p) {
  Labels all;
  for (const Labels& in : p.inputs) all += in;
  for (char32_t c : p.output) {
    if (std::count(p.output.begin(), p.output.end(), c) != 1)
      fail("Output character " + quoted(c) + " appeared more than once in the output.");
    if (!has(all, c)) fail("Output character " + quoted(c) + " did not appear in the input");
  }
}

// Every operand has one label per dim, and a label's sizes agree (or are 1, which broadcasts).
void check_sizes(const Parsed& p, const std::vector<Array>& operands) {
  std::vector<std::pair<char32_t, int64_t>> sizes;
  for (size_t t = 0; t < p.inputs.size(); ++t) {
    const Labels& term = p.inputs[t];
    if (int(term.size()) != operands[t].ndim())
      fail("Einstein sum subscript '" + utf8(term) +
           "' does not contain the correct number of indices for operand " + std::to_string(t) +
           ".");
    for (size_t d = 0; d < term.size(); ++d) {
      const int64_t dim = operands[t].shape()[int(d)];
      auto it = std::find_if(sizes.begin(), sizes.end(),
                             [&](const auto& s) { return s.first == term[d]; });
      if (it == sizes.end()) {
        sizes.emplace_back(term[d], dim);
      } else if (it->second == 1) {
        it->second = dim;
      } else if (dim != 1 && dim != it->second) {
        fail("Size of label " + quoted(term[d]) + " for operand " + std::to_string(t) + " (" +
             std::to_string(it->second) + ") does not match previous terms (" +
             std::to_string(dim) + ").");
      }
    }
  }
}

Labels decode_ascii(std::string_view subscripts) {
  Labels s;
  for (char c : subscripts) {
    if (static_cast<unsigned char>(c) >= 0x80)
      fail("subscripts must be ASCII characters, got '" + std::string(subscripts) + "'");
    if (c != ' ') s += char32_t(c);
  }
  return s;
}

Parsed parse(std::string_view text, const std::vector<Array>& operands) {
  const Labels s = decode_ascii(text);
  const auto count = [&](char32_t c) { return std::count(s.begin(), s.end(), c); };
  const size_t arrow = s.find(U"->");
  if (count(U'-') > 0 || count(U'>') > 0)
    if (count(U'-') > 1 || count(U'>') > 1 || arrow == Labels::npos)
      fail("Subscripts can only contain one '->'.");
  Parsed p;
  if (operands.empty()) check_operand_count(split_terms(s.substr(0, arrow)).size(), 0);
  if (has(s, U'.')) {
    p = parse_with_ellipses(s, arrow != Labels::npos, operands);
  } else {
    p.inputs = split_terms(s.substr(0, arrow));
    p.output = arrow != Labels::npos ? s.substr(arrow + 2) : labels_seen_once(p.inputs);
  }
  check_output(p);
  check_operand_count(p.inputs.size(), operands.size());
  check_sizes(p, operands);
  return p;
}

// ---- lowering (JAX's _einsum) -----------------------------------------------------------------
// One operand with a label per dim.
struct Term {
  Array x;
  Labels names;
};

// How every step computes: the result type, the out_sharding of the last step, the precision
// of the dot_generals.
struct Plan {
  DType preferred;
  std::optional<NamedSharding> out_sharding;
  EinsumPrecision precision;
};

int64_t index_of(const Labels& names, char32_t c) {
  return int64_t(names.find(c));
}

// JAX's sum: at the result type if the operand's is narrower; `or` for bools.
Array sum_axes(Array x, const Dims& axes, const Plan& plan, bool use_out_sharding) {
  if (promote_weak(x.dtype(), x.weak_type(), plan.preferred, false).dtype != x.dtype())
    x = ops::convert(x, plan.preferred);
  Array r = is_bool(x.dtype()) ? lax::reduce_or(x, axes) : lax::reduce_sum(x, axes);
  return use_out_sharding && plan.out_sharding ? reshard(r, *plan.out_sharding) : r;
}

// Sums out `labels`, each held once by t.
void sum_uniques(Term& t, const Labels& labels, const Plan& plan, bool use_out_sharding) {
  if (labels.empty()) return;
  Dims axes;
  for (char32_t c : labels) axes.push_back(index_of(t.names, c));
  t.x = sum_axes(t.x, axes, plan, use_out_sharding);
  t.names = without(t.names, labels);
}

// lax._delta: true where the indices of `axes` are all equal, broadcast to `shape`.
Array delta(const Shape& shape, const Dims& axes) {
  std::vector<int64_t> base;
  for (int64_t a : axes) base.push_back(shape[int(a)]);
  std::vector<Array> iotas;
  for (size_t i = 0; i < axes.size(); ++i)
    iotas.push_back(lax::broadcasted_iota(DType::uint32, Shape(base), int(i)));
  std::vector<Array> eyes;
  for (size_t i = 0; i + 1 < iotas.size(); ++i) eyes.push_back(lax::eq(iotas[i], iotas[i + 1]));
  Array eye = eyes[0];
  for (size_t i = 1; i < eyes.size(); ++i) eye = lax::bitwise_and(eye, eyes[i]);
  if (int64_t(axes.size()) == shape.ndim()) return eye;
  return lax::broadcast_in_dim(eye, shape, axes);
}

// Keeps the diagonal of each label t holds more than once: summed out when `keep` lacks it,
// else one of its dims stays.
void sum_repeats(Term& t, const Labels& keep, const Plan& plan, bool use_out_sharding) {
  const Labels original = t.names;
  std::set<char32_t> done;
  for (char32_t c : original) {
    const auto count = std::count(original.begin(), original.end(), c);
    if (count < 2 || !done.insert(c).second) continue;
    Dims axes;
    for (size_t i = 0; i < t.names.size(); ++i)
      if (t.names[i] == c) axes.push_back(int64_t(i));
    const Array eye = delta(t.x.shape(), axes);
    t.x = lax::select(eye, t.x, zeros_like_aval(t.x.impl()->aval));
    if (!has(keep, c)) {
      t.x = sum_axes(t.x, axes, plan, use_out_sharding);
      t.names = without(t.names, Labels(1, c));
    } else {
      axes.pop_back();
      t.x = sum_axes(t.x, axes, plan, use_out_sharding);
      Labels kept;
      for (size_t i = 0, seen = 0; i < t.names.size(); ++i)
        if (t.names[i] != c || ++seen == size_t(count)) kept += t.names[i];
      t.names = kept;
    }
  }
}

// Drops t's size-1 dims whose label `other` holds with a size other than 1: they broadcast.
void filter_singleton_dims(Term& t, const Term& other) {
  Dims squeezed;
  Labels kept;
  for (size_t i = 0; i < t.names.size(); ++i) {
    const int64_t j = index_of(other.names, t.names[i]);
    if (t.x.shape()[int(i)] == 1 && j >= 0 && other.x.shape()[int(j)] != 1)
      squeezed.push_back(int64_t(i));
    else
      kept += t.names[i];
  }
  if (squeezed.empty()) return;
  t.x = lax::squeeze(t.x, squeezed);
  t.names = kept;
}

Array transpose_to(const Array& x, const Labels& names, const Labels& result) {
  if (names == result) return x;
  Dims perm;
  for (char32_t c : result) perm.push_back(index_of(names, c));
  return lax::transpose(x, perm);
}

// The labels of `labels` that t holds exactly `times` times.
Labels held(const Labels& labels, const Term& t, int times) {
  Labels out;
  for (char32_t c : labels)
    if (std::count(t.names.begin(), t.names.end(), c) == times) out += c;
  return out;
}

// One operand: sum out `removed`, keep the diagonals, transpose into `result`.
Array contract_one(Term t, const Labels& removed, const Labels& result, const Plan& plan) {
  sum_uniques(t, held(removed, t, 1), plan, true);
  sum_repeats(t, result, plan, true);
  return transpose_to(t.x, t.names, result);
}

// out_sharding written for `result`'s dims, reordered for `names`'.
NamedSharding inverse_sharding(const NamedSharding& s, const Labels& names, const Labels& result) {
  std::vector<PartitionSpec::Entry> entries = s.spec().entries();
  entries.resize(result.size());
  std::vector<PartitionSpec::Entry> inverse;
  for (char32_t c : names) inverse.push_back(entries[size_t(index_of(result, c))]);
  return NamedSharding(s.mesh(), PartitionSpec(inverse));
}

// Two operands: labels held by one side only are summed out first, diagonals kept, then one
// dot_general, ordered (rhs, lhs) when that gives `result`'s order, else (lhs, rhs) and a
// transpose.
Array contract_two(Term lhs, Term rhs, const Labels& removed, const Labels& result,
                   const Plan& plan) {
  filter_singleton_dims(lhs, rhs);
  filter_singleton_dims(rhs, lhs);
  const Term lhs0 = lhs, rhs0 = rhs;
  sum_uniques(lhs, held(held(removed, lhs0, 1), rhs0, 0), plan, false);
  sum_uniques(rhs, held(held(removed, rhs0, 1), lhs0, 0), plan, false);
  sum_repeats(lhs, result + rhs.names, plan, false);
  sum_repeats(rhs, result + lhs.names, plan, false);

  Labels contracted, batch;
  for (char32_t c : removed)
    if (has(lhs.names, c) || has(rhs.names, c)) contracted += c;
  for (char32_t c : result)
    if (has(lhs.names, c) && has(rhs.names, c)) batch += c;
  lax::DotDimensionNumbers lr;
  for (char32_t c : contracted) {
    lr.lhs_contracting.push_back(index_of(lhs.names, c));
    lr.rhs_contracting.push_back(index_of(rhs.names, c));
  }
  for (char32_t c : batch) {
    lr.lhs_batch.push_back(index_of(lhs.names, c));
    lr.rhs_batch.push_back(index_of(rhs.names, c));
  }
  const lax::DotDimensionNumbers rl{lr.rhs_contracting, lr.lhs_contracting, lr.rhs_batch,
                                    lr.lhs_batch};
  const Labels deleted = batch + contracted;
  const Labels rest_lhs = without(lhs.names, deleted), rest_rhs = without(rhs.names, deleted);
  if (batch + rest_rhs + rest_lhs == result)
    return lax::dot_general(rhs.x, lhs.x, rl, plan.preferred, plan.out_sharding,
                            ops::canonicalize_precision(plan.precision, "einsum"));
  const Labels names = batch + rest_lhs + rest_rhs;
  std::optional<NamedSharding> out = plan.out_sharding;
  if (out && names != result) out = inverse_sharding(*out, names, result);
  const Array dot = lax::dot_general(lhs.x, rhs.x, lr, plan.preferred, out,
                                     ops::canonicalize_precision(plan.precision, "einsum"));
  return transpose_to(dot, names, result);
}

// ---- the path (opt_einsum's contract_path, einsum_call=True) ----------------------------------
// One contraction: the positions popped from the operand list (largest first, so the first is
// the lhs), the labels summed out (sorted), each operand's labels and the result's.
struct Step {
  std::vector<int64_t> positions;
  Labels removed;
  std::vector<Labels> inputs;
  Labels result;
};

std::set<char32_t> label_set(const Labels& labels) {
  return {labels.begin(), labels.end()};
}

// opt_einsum's order for an intermediate result: each label where it first appears in the
// step's inputs, which spares transposes.
Labels intermediate_labels(const std::vector<Labels>& inputs, const std::set<char32_t>& keep) {
  Labels out;
  for (const Labels& in : inputs)
    for (char32_t c : in)
      if (keep.count(c) && !has(out, c)) out += c;
  return out;
}

einsum_path::Problem problem_of(const Parsed& p, const std::vector<Array>& operands) {
  std::vector<std::vector<int64_t>> shapes;
  for (const Array& x : operands) shapes.push_back(x.shape().dims());
  return einsum_path::make_problem(p.inputs, p.output, shapes);
}

// Python's list.pop(i) on the operands' labels, with its error.
Labels pop(std::vector<Labels>& list, int64_t i) {
  if (i < 0 || i >= int64_t(list.size())) throw IndexError("[einsum] pop index out of range");
  Labels out = list[size_t(i)];
  list.erase(list.begin() + i);
  return out;
}

Step make_step(std::vector<int64_t> positions, std::vector<Labels>& list, const Labels& output,
               bool last) {
  if (positions.empty()) fail("a step of the path names no operand");
  std::sort(positions.rbegin(), positions.rend());
  Step step{positions, {}, {}, {}};
  for (int64_t i : positions) step.inputs.push_back(pop(list, i));
  std::set<char32_t> remain = label_set(output), contract;
  for (const Labels& in : list) remain.merge(label_set(in));
  for (const Labels& in : step.inputs) contract.merge(label_set(in));
  std::set<char32_t> kept;
  for (char32_t c : contract) {
    if (remain.count(c))
      kept.insert(c);
    else
      step.removed += c;
  }
  if (last) {
    // find_output_shape finds no size for an output label the last step lacks.
    for (char32_t c : output)
      if (!kept.count(c)) throw ValueError("[einsum] max() arg is an empty sequence");
  }
  step.result = last ? output : intermediate_labels(step.inputs, kept);
  list.push_back(step.result);
  return step;
}

std::vector<Step> contractions(const Parsed& p, const std::vector<Array>& operands,
                               const EinsumOptimize& optimize) {
  const einsum_path::Path path = einsum_path::choose(problem_of(p, operands), optimize);
  std::vector<Labels> list = p.inputs;
  std::vector<Step> steps;
  for (size_t i = 0; i < path.size(); ++i)
    steps.push_back(make_step(path[i], list, p.output, i + 1 == path.size()));
  if (list.size() != 1)
    fail("the path leaves " + std::to_string(list.size()) +
         " operands uncontracted; each step contracts one or two operands and appends the "
         "result");
  return steps;
}

// The steps in turn, as JAX's _einsum: each pops its operands and appends its result.
Array contract_all(const std::vector<Step>& steps, std::vector<Array> operands, const Plan& plan) {
  for (const Step& step : steps) {
    if (step.positions.size() > 2)
      throw NotImplementedError(
          "[einsum] jax.numpy.einsum does not support simultaneous contraction of 3 or more "
          "operands. Typically this means you've passed an unsupported path to the einsum "
          "optimize parameter.");
    std::vector<Term> terms;
    for (size_t i = 0; i < step.positions.size(); ++i) {
      terms.push_back({operands[size_t(step.positions[i])], step.inputs[i]});
      operands.erase(operands.begin() + step.positions[i]);
    }
    operands.push_back(terms.size() == 1
                           ? contract_one(terms[0], step.removed, step.result, plan)
                           : contract_two(terms[0], terms[1], step.removed, step.result, plan));
  }
  return operands[0];
}

std::vector<std::string> explicit_axes_of(const Mesh& mesh) {
  std::vector<std::string> axes;
  for (size_t i = 0; i < mesh.axis_names().size(); ++i)
    if (mesh.axis_types()[i] == AxisType::Explicit) axes.push_back(mesh.axis_names()[i]);
  return axes;
}

}  // namespace

Array einsum(std::string_view subscripts, const std::vector<Array>& operands,
             const EinsumOptions& options) {
  const Parsed p = parse(subscripts, operands);
  const std::optional<NamedSharding> out_sharding = options.out_sharding.resolve("einsum");
  if (out_sharding) ops::require_explicit_axes("einsum", *out_sharding);
  PromotedType t{DType::float32, false};
  if (options.preferred_element_type) {
    t.dtype = canonicalize_dtype(*options.preferred_element_type);
  } else {
    t = {operands[0].dtype(), operands[0].weak_type()};
    for (size_t i = 1; i < operands.size(); ++i)
      t = promote_weak(t.dtype, t.weak, operands[i].dtype(), operands[i].weak_type());
  }
  const std::vector<Step> steps = contractions(p, operands, options.optimize);
  // As JAX: with several contractions the out_sharding applies to the result only, the steps
  // running with the mesh's Explicit axes made Auto.
  if (steps.size() > 1 && out_sharding) {
    auto run = [&](const std::vector<Array>& xs) {
      const Plan plan{t.dtype, std::nullopt, options.precision};
      return ops::convert(contract_all(steps, xs, plan), t.dtype, t.weak);
    };
    return auto_axes(run, explicit_axes_of(out_sharding->mesh()), *out_sharding)(operands);
  }
  const Plan plan{t.dtype, out_sharding, options.precision};
  return ops::convert(contract_all(steps, operands, plan), t.dtype, t.weak);
}

}  // namespace spmd

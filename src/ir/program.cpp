// Program: types, verification, and JAX's jaxpr text.
#include "ir/program.h"

#include "core/format.h"
#include "ir/pretty.h"
#include "ir/primitive.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

namespace spmd {

const AbstractValue& Program::type_of(const Atom& a) const {
  return a.is_literal() ? aval_of(a.literal) : types[size_t(a.var)];
}

std::vector<AbstractValue> Program::in_types() const {
  std::vector<AbstractValue> out;
  for (int v : invars) out.push_back(types[size_t(v)]);
  return out;
}

std::vector<AbstractValue> Program::out_types() const {
  std::vector<AbstractValue> out;
  for (const Atom& a : outputs) out.push_back(type_of(a));
  return out;
}

std::vector<bool> Program::read_vars() const {
  std::vector<bool> read(types.size(), false);
  for (const Equation& e : equations)
    for (const Atom& a : e.inputs)
      if (!a.is_literal()) read[size_t(a.var)] = true;
  for (const Atom& a : outputs)
    if (!a.is_literal()) read[size_t(a.var)] = true;
  return read;
}

void Program::verify() const {
  std::vector<bool> defined(types.size(), false);
  auto define = [&](int v, const char* what) {
    if (v < 0 || size_t(v) >= types.size() || defined[size_t(v)])
      throw std::logic_error(std::string("[verify] ") + what + " variable " + std::to_string(v) +
                             " is out of range or defined twice");
    defined[size_t(v)] = true;
  };
  auto use = [&](const Atom& a, const std::string& where) {
    if (a.is_literal()) {
      if (!a.literal.valid()) throw std::logic_error("[verify] empty literal in " + where);
      return;
    }
    if (a.var < 0 || size_t(a.var) >= types.size() || !defined[size_t(a.var)])
      throw std::logic_error("[verify] variable " + std::to_string(a.var) +
                             " used before it is defined, in " + where);
  };
  if (constvars.size() != consts.size())
    throw std::logic_error("[verify] constvars and consts differ in number");
  for (size_t i = 0; i < constvars.size(); ++i) {
    define(constvars[i], "constant");
    if (!(aval_of(consts[i]) == types[size_t(constvars[i])]))
      throw std::logic_error("[verify] constant " + std::to_string(i) + " has type " +
                             aval_of(consts[i]).str() + ", its variable " +
                             types[size_t(constvars[i])].str());
  }
  for (int v : invars) define(v, "input");
  for (const Equation& e : equations) {
    std::vector<AbstractValue> in;
    for (const Atom& a : e.inputs) {
      use(a, e.primitive->name);
      in.push_back(type_of(a));
    }
    std::vector<AbstractValue> expected = e.primitive->shape_rule(in, e.params);
    if (expected.size() != e.outputs.size())
      throw std::logic_error("[verify] " + e.primitive->name + " has " +
                             std::to_string(e.outputs.size()) + " outputs, its rule gives " +
                             std::to_string(expected.size()));
    for (size_t i = 0; i < expected.size(); ++i) {
      define(e.outputs[i], "output");
      const AbstractValue& got = types[size_t(e.outputs[i])];
      if (got.shape != expected[i].shape || got.dtype != expected[i].dtype)
        throw std::logic_error("[verify] " + e.primitive->name + " output " + std::to_string(i) +
                               " has type " + got.str() + ", its rule gives " + expected[i].str());
    }
  }
  for (const Atom& a : outputs) use(a, "the outputs");
}

// ---- equality and hash
// ------------------------------------------------------------------------------------------
bool same_array(const Array& a, const Array& b) {
  if (a.impl() == b.impl()) return true;
  if (!(aval_of(a) == aval_of(b)) || !is_concrete(a) || !is_concrete(b)) return false;
  return std::memcmp(host_data(a, "program"), host_data(b, "program"), size_t(a.nbytes())) == 0;
}

namespace {

bool same_atom(const Atom& a, const Atom& b) {
  if (a.is_literal() != b.is_literal()) return false;
  return a.is_literal() ? same_array(a.literal, b.literal) : a.var == b.var;
}

bool same_atoms(const std::vector<Atom>& a, const std::vector<Atom>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), same_atom);
}

bool same_equation(const Equation& a, const Equation& b) {
  return a.primitive == b.primitive && a.outputs == b.outputs && same_atoms(a.inputs, b.inputs) &&
         a.params == b.params;
}

void hash_type(size_t& h, const AbstractValue& t) {
  hash_combine(h, size_t(t.dtype) * 2 + size_t(t.weak_type));
  for (int64_t d : t.shape.dims()) hash_combine(h, std::hash<int64_t>{}(d));
  for (const std::string& a : t.vma) hash_combine(h, std::hash<std::string>{}(a));
}

// A literal by its value (0-d, cheap); an operand variable by its id.
void hash_atom(size_t& h, const Atom& a) {
  if (!a.is_literal()) {
    hash_combine(h, size_t(a.var));
    return;
  }
  hash_type(h, aval_of(a.literal));
  const auto* bytes = static_cast<const char*>(host_data(a.literal, "program"));
  hash_combine(h,
               std::hash<std::string_view>{}(std::string_view(bytes, size_t(a.literal.nbytes()))));
}

size_t structural_hash(const Program& p) {
  size_t h = p.types.size();
  for (const AbstractValue& t : p.types) hash_type(h, t);
  for (int v : p.constvars) hash_combine(h, size_t(v));
  for (int v : p.invars) hash_combine(h, size_t(v));
  for (const Equation& e : p.equations) {
    hash_combine(h, std::hash<std::string>{}(e.primitive->name));
    hash_combine(h, e.params.hash());
    for (const Atom& a : e.inputs) hash_atom(h, a);
    for (int v : e.outputs) hash_combine(h, size_t(v));
  }
  for (const Atom& a : p.outputs) hash_atom(h, a);
  return h;
}

}  // namespace

bool Program::operator==(const Program& other) const {
  if (this == &other) return true;
  size_t h = hash_memo.get(), g = other.hash_memo.get();
  if (h && g && h != g) return false;
  return types == other.types && constvars == other.constvars && invars == other.invars &&
         std::equal(consts.begin(), consts.end(), other.consts.begin(), other.consts.end(),
                    same_array) &&
         same_atoms(outputs, other.outputs) &&
         std::equal(equations.begin(), equations.end(), other.equations.begin(),
                    other.equations.end(), same_equation);
}

// Constants count by type only (hashing their bytes would read every constant); equality
// compares their values.
size_t Program::hash() const {
  if (size_t h = hash_memo.get()) return h;
  size_t h = structural_hash(*this);
  if (h == 0) h = 1;
  hash_memo.set(h);
  return h;
}

// ---- text
// -----------------------------------------------------------------------------------------
namespace {

// Parameters JAX's printer leaves out: those the primitive hides, and an accuracy of None.
bool hidden_param(const Primitive& prim, const std::string& key, const ParamValue& v) {
  if (prim.hides_param && prim.hides_param(key, v)) return true;
  return key == "accuracy" && is_none(v);
}

// Python's repr of a float: shortest round-trip digits, fixed notation for exponents in
// [-4, 16), scientific otherwise, integral values with ".0".
std::string python_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  size_t e = sci.find('e');
  int exponent = std::stoi(sci.substr(e + 1));
  std::string mantissa = sci.substr(0, e);
  bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  std::string out;
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out = "0." + std::string(size_t(-exponent - 1), '0') + digits;
    } else if (int(digits.size()) <= exponent + 1) {
      out = digits + std::string(size_t(exponent + 1 - int(digits.size())), '0') + ".0";
    } else {
      out = digits.substr(0, size_t(exponent + 1)) + "." + digits.substr(size_t(exponent + 1));
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp[16];
    std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += exp;
  }
  return negative ? "-" + out : out;
}

std::string literal_value(const Array& x) {
  DType t = x.dtype();
  if (is_bool(t)) return x.item<bool>() ? "True" : "False";
  if (is_floating(t)) return python_float(x.item<double>());
  if (is_unsigned_integer(t)) return std::to_string(x.item<uint64_t>());
  return std::to_string(x.item<int64_t>());
}

std::string int_tuple(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}

std::string int_list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

class Printer {
 public:
  explicit Printer(const Program& top) {
    // Outputs of the top-level program's equations that nothing reads print as `_`.
    std::vector<bool> used(top.types.size(), false);
    for (const Atom& a : top.outputs)
      if (!a.is_literal()) used[size_t(a.var)] = true;
    for (auto e = top.equations.rbegin(); e != top.equations.rend(); ++e) {
      for (int v : e->outputs)
        if (!used[size_t(v)]) names_[key(&top, v)].assign(1, '_');
      for (const Atom& a : e->inputs)
        if (!a.is_literal()) used[size_t(a.var)] = true;
    }
  }

  pp::Doc program(const Program& p) {
    pp::Doc constvars = binders(p, p.constvars);
    pp::Doc invars = binders(p, p.invars);
    std::vector<pp::Doc> eqns;
    for (const Equation& e : p.equations) eqns.push_back(equation(p, e));
    std::vector<pp::Doc> outs;
    for (const Atom& a : p.outputs) outs.push_back(atom(p, a));
    pp::Doc outvars =
        pp::concat({pp::text("("), vars(outs, ","), pp::text(p.outputs.size() == 1 ? ",)" : ")")});
    return pp::group(
        pp::nest(2, pp::concat({pp::text("{ "), pp::text("lambda "), constvars, pp::text("; "),
                                invars, pp::text(". "), pp::text("let"),
                                pp::nest(2, pp::brk() + pp::join(pp::brk("; "), eqns)), pp::brk(),
                                pp::text("in "), outvars})) +
        pp::text(" }"));
  }

 private:
  static std::pair<const Program*, int> key(const Program* p, int v) { return {p, v}; }
  struct KeyHash {
    size_t operator()(const std::pair<const Program*, int>& k) const {
      return std::hash<const Program*>{}(k.first) * 31 + size_t(k.second);
    }
  };

  std::string name(const Program& p, int v) {
    auto [it, inserted] = names_.try_emplace(key(&p, v));
    if (inserted) {
      do it->second = encode(counter_++);
      while (shared_names_.count(it->second));
    }
    return it->second;
  }
  static std::string encode(int n) {
    std::string s;
    do {
      s.insert(s.begin(), char('a' + n % 26));
      n /= 26;
    } while (n);
    return s;
  }
  pp::Doc atom(const Program& p, const Atom& a) {
    if (a.is_literal()) return pp::text(literal_value(a.literal) + ":" + aval_of(a.literal).str());
    return pp::text(name(p, a.var));
  }
  static pp::Doc vars(const std::vector<pp::Doc>& docs, const std::string& separator = "") {
    return pp::nest(2, pp::group(pp::join(pp::text(separator) + pp::group(pp::brk()), docs)));
  }
  pp::Doc binders(const Program& p, const std::vector<int>& vs) {
    std::vector<pp::Doc> docs;
    for (int v : vs) docs.push_back(pp::text(name(p, v) + ":" + p.types[size_t(v)].str()));
    return vars(docs);
  }
  void suggest_same_names(const Program& sub, const std::vector<int>& for_vars,
                          const Program& outer, const std::vector<Atom>& like) {
    if (for_vars.size() != like.size()) return;
    std::vector<int> used;
    for (size_t k = 0; k < for_vars.size(); ++k) {
      if (like[k].is_literal()) continue;
      if (std::find(used.begin(), used.end(), like[k].var) != used.end()) continue;
      if (names_.count(key(&sub, for_vars[k]))) continue;
      used.push_back(like[k].var);
      names_[key(&sub, for_vars[k])] = name(outer, like[k].var);
    }
  }
  pp::Doc param_value(const ParamValue& v) {
    return std::visit(
        [&](const auto& x) -> pp::Doc {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, NoneParam>) {
            return pp::text("None");
          } else if constexpr (std::is_same_v<T, bool>) {
            return pp::text(x ? "True" : "False");
          } else if constexpr (std::is_same_v<T, int64_t>) {
            return pp::text(std::to_string(x));
          } else if constexpr (std::is_same_v<T, double>) {
            return pp::text(python_float(x));
          } else if constexpr (std::is_same_v<T, std::string>) {
            return pp::text(x);
          } else if constexpr (std::is_same_v<T, DType>) {
            return pp::text(std::string(dtype_name(x)));
          } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
            return pp::text(int_tuple(x));
          } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
            std::string s = "(";
            for (size_t i = 0; i < x.size(); ++i) s += (i ? ", '" : "'") + x[i] + "'";
            return pp::text(s + (x.size() == 1 ? ",)" : ")"));
          } else if constexpr (std::is_same_v<T, lax::DotDimensionNumbers>) {
            return pp::text("((" + int_list(x.lhs_contracting) + ", " +
                            int_list(x.rhs_contracting) + "), (" + int_list(x.lhs_batch) + ", " +
                            int_list(x.rhs_batch) + "))");
          } else if constexpr (std::is_same_v<T, std::vector<lax::PadConfig>>) {
            std::string s = "(";
            for (size_t i = 0; i < x.size(); ++i)
              s += (i ? ", " : "") + int_tuple({x[i].low, x[i].high, x[i].interior});
            return pp::text(s + (x.size() == 1 ? ",)" : ")"));
          } else if constexpr (std::is_same_v<T, ObjectParam>) {
            return pp::text(x.object->str());
          } else if constexpr (std::is_same_v<T, ProgramRef>) {
            return sub_program(*x);
          } else {
            std::vector<pp::Doc> docs;
            for (const ProgramRef& p : x) docs.push_back(sub_program(*p));
            return pp::group(pp::concat(
                {pp::nest(2, pp::concat({pp::text("("), pp::brk(""), pp::join(pp::brk(), docs)})),
                 pp::brk(""), pp::text(")")}));
          }
        },
        v);
  }
  pp::Doc equation(const Program& p, const Equation& e) {
    if (e.primitive->body_named_after_caller && e.params.has(e.primitive->call_body)) {
      // JAX names a call's parameters and results after the caller's operands and results,
      // before its own results (a result named here is named when its body result is).
      const Program& sub = *e.params.get<ProgramRef>(e.primitive->call_body);
      std::vector<Atom> results;
      for (int v : e.outputs) results.push_back(Atom::of_var(v));
      suggest_same_names(sub, sub.invars, p, e.inputs);
      std::vector<int> sub_outs;
      std::vector<Atom> like;
      for (size_t k = 0; k < sub.outputs.size() && k < results.size(); ++k)
        if (!sub.outputs[k].is_literal()) {
          sub_outs.push_back(sub.outputs[k].var);
          like.push_back(results[k]);
        }
      suggest_same_names(sub, sub_outs, p, like);
    }
    std::vector<pp::Doc> outs;
    for (int v : e.outputs) outs.push_back(pp::text(name(p, v) + ":" + p.types[size_t(v)].str()));
    pp::Doc lhs = vars(outs);
    pp::Doc params = pp::nil();
    if (!e.params.items().empty()) {
      std::vector<pp::Doc> kvs;
      // A call's name comes first, as JAX prints it.
      const bool name_first =
          e.params.has("name") && (e.params.has("jaxpr") || e.params.has("call_jaxpr"));
      if (name_first) kvs.push_back(pp::text("name=") + param_value(e.params.at("name")));
      for (const auto& [k, v] : e.params.items()) {
        if (hidden_param(*e.primitive, k, v)) continue;
        if (k == "name" && name_first) continue;
        kvs.push_back(pp::text(k + "=") + param_value(v));
      }
      if (!kvs.empty())
        params = pp::group(pp::concat(
            {pp::nest(2, pp::concat({pp::text("["), pp::brk(""), pp::join(pp::brk(), kvs)})),
             pp::brk(""), pp::text("]")}));
    }
    std::vector<pp::Doc> ins;
    for (const Atom& a : e.inputs) ins.push_back(atom(p, a));
    pp::Doc rhs = pp::concat({pp::text(e.primitive->name), params, pp::text(" ") + vars(ins)});
    if (e.outputs.empty()) return rhs;
    return pp::concat({lhs, pp::text(" = "), rhs});
  }

  std::unordered_map<std::pair<const Program*, int>, std::string, KeyHash> names_;
  int counter_ = 0;

 public:
  // JAX prints a sub-program used more than once, or longer than ten equations, once at the top
  // as `let NAME = { ... } in`, and refers to it by NAME.
  pp::Doc top_level(const Program& top) {
    std::vector<const Program*> order;
    std::unordered_map<const Program*, int> count;
    std::unordered_map<const Program*, std::string> suggested;
    std::vector<const Program*> queue{&top};
    for (size_t q = 0; q < queue.size(); ++q) {
      const Program* p = queue[q];
      if (!count.count(p)) order.push_back(p);
      int& c = count[p];
      c += (p != &top && p->equations.size() > 10) ? 2 : 1;
      for (const Equation& e : p->equations) {
        std::string name =
            e.params.has("name") && std::holds_alternative<std::string>(e.params.at("name"))
                ? e.params.get<std::string>("name")
                : std::string();
        for (const auto& [k, v] : e.params.items()) {
          std::vector<const Program*> subs;
          if (auto* one = std::get_if<ProgramRef>(&v)) subs.push_back(one->get());
          if (auto* many = std::get_if<std::vector<ProgramRef>>(&v))
            for (const ProgramRef& r : *many) subs.push_back(r.get());
          for (const Program* sub : subs) {
            queue.push_back(sub);
            if (!name.empty()) suggested.try_emplace(sub, name);
          }
        }
      }
    }
    std::unordered_map<std::string, int> name_counts;
    std::vector<std::pair<std::string, const Program*>> hoisted;
    for (const Program* p : order) {
      if (count[p] == 1) continue;
      std::string name = suggested.count(p) ? suggested[p] : "jaxpr";
      if (!name.empty() && name.front() == '<' && name.back() == '>')
        name = name.substr(1, name.size() - 2);
      if (int n = name_counts[name]; n > 0) {
        name_counts[name] += 1;
        name += std::to_string(n);
      }
      name_counts[name] += 1;
      shared_names_.insert(name);
      shared_[p] = name;
      hoisted.emplace_back(name, p);
    }
    std::vector<pp::Doc> docs;
    for (const auto& [name, p] : hoisted)
      docs.push_back(
          pp::concat({pp::text("let " + name + " = "), program(*p), pp::text(" in"), pp::brk()}));
    docs.push_back(program(top));
    return pp::concat(docs);
  }

 private:
  pp::Doc sub_program(const Program& p) {
    auto it = shared_.find(&p);
    return it != shared_.end() ? pp::text(it->second) : program(p);
  }
  std::unordered_map<const Program*, std::string> shared_;
  std::unordered_set<std::string> shared_names_;
};

}  // namespace

std::string Program::str() const {
  Printer printer(*this);
  return pp::format(printer.top_level(*this));
}

}  // namespace spmd

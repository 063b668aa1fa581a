// TreeDef: the type-erased tree structure behind tree_flatten/tree_unflatten (equality, hashing,
// printing in JAX's PyTreeDef form), the builder and reader the templates in tree.h drive, and
// broadcast_prefix.
#include <spmd/error.h>
#include <spmd/tree.h>

#include <cxxabi.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <ostream>
#include <string_view>

namespace spmd {

namespace tree_detail {

struct Node {
  TreeDef::Kind kind = TreeDef::Kind::none;
  int num_children = 0;
  int num_leaves = 0;             // Array leaves in the subtree
  int num_nodes = 1;              // nodes in the subtree, this one included
  std::string name;               // record type name
  std::vector<std::string> keys;  // dict keys or record field names
  StaticValue value;              // static leaves only
};

// Depth first: a node is followed by its children's subtrees.
struct Nodes {
  std::vector<Node> nodes;
  size_t hash = 0;
};

}  // namespace tree_detail

namespace {

using tree_detail::Node;
using tree_detail::Nodes;
using tree_detail::StaticCategory;
using Kind = TreeDef::Kind;

// Joins message parts (piecewise appends also keep GCC 12 from warning falsely, -Wrestrict, on
// "literal" + std::string).
std::string cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view part : parts) out += part;
  return out;
}

size_t hash_combine(size_t seed, size_t v) {
  return seed ^ (v + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
}

std::string demangle(const std::type_info& type) {
  int status = 0;
  char* name = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string out = status == 0 && name ? name : type.name();
  std::free(name);
  return out;
}

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  out += '\'';
  return out;
}

// Python's repr of a float: shortest round-trip digits, always with a '.' or exponent.
std::string float_str(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, end);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

bool same_node(const Node& a, const Node& b) {
  return a.kind == b.kind && a.num_children == b.num_children && a.name == b.name &&
         a.keys == b.keys && (a.kind != Kind::static_leaf || static_equal(a.value, b.value));
}

size_t node_hash(const Node& n) {
  size_t h = hash_combine(size_t(n.kind), size_t(n.num_children));
  h = hash_combine(h, std::hash<std::string>{}(n.name));
  for (const std::string& k : n.keys) h = hash_combine(h, std::hash<std::string>{}(k));
  if (n.kind == Kind::static_leaf) h = hash_combine(h, static_hash(n.value));
  return h;
}

size_t nodes_hash(const std::vector<Node>& nodes) {
  size_t h = nodes.size();
  for (const Node& n : nodes) h = hash_combine(h, node_hash(n));
  return h;
}

std::shared_ptr<const Nodes> make_nodes(std::vector<Node> nodes) {
  auto out = std::make_shared<Nodes>();
  out->hash = nodes_hash(nodes);
  out->nodes = std::move(nodes);
  return out;
}

// Python's repr of a tuple of strings: ('a',), ('a', 'b'), ().
std::string tuple_str(const std::vector<std::string>& items) {
  std::string out = "(";
  for (size_t i = 0; i < items.size(); ++i) out += cat({i ? ", " : "", quoted(items[i])});
  return out + (items.size() == 1 ? ",)" : ")");
}

// Appends the subtree at nodes[i] to out; returns the index after it.
size_t print_subtree(const std::vector<Node>& nodes, size_t i, std::string& out) {
  const Node& n = nodes[i++];
  const char* open = "(";
  const char* close = ")";
  switch (n.kind) {
    case Kind::leaf:
      out += '*';
      return i;
    case Kind::static_leaf:
      out += static_str(n.value);
      return i;
    case Kind::none:
      out += "None";
      return i;
    case Kind::list:
      open = "[";
      close = "]";
      break;
    case Kind::dict:
      open = "{";
      close = "}";
      break;
    case Kind::ordered_dict:
      out += "CustomNode(OrderedDict[" + tuple_str(n.keys) + "], ";
      open = "[";
      close = "])";
      break;
    case Kind::record:
      out += n.name;
      break;
    case Kind::tuple:
      break;
  }
  out += open;
  for (int c = 0; c < n.num_children; ++c) {
    if (c) out += ", ";
    if (n.kind == Kind::dict) out += cat({quoted(n.keys[size_t(c)]), ": "});
    if (n.kind == Kind::record) out += cat({n.keys[size_t(c)], "="});
    i = print_subtree(nodes, i, out);
  }
  if (n.kind == Kind::tuple && n.num_children == 1) out += ',';
  out += close;
  return i;
}

std::string subtree_str(const std::vector<Node>& nodes, size_t i) {
  std::string out;
  print_subtree(nodes, i, out);
  return out;
}

std::string describe(StaticCategory category, const std::type_info& type) {
  switch (category) {
    case StaticCategory::boolean:
      return "a static bool";
    case StaticCategory::integer:
      return "a static integer";
    case StaticCategory::floating:
      return "a static floating-point number";
    case StaticCategory::string:
      return "a static std::string";
    case StaticCategory::opaque:
      break;
  }
  return cat({"a static ", demangle(type)});
}

const std::shared_ptr<const Nodes>& none_nodes() {
  static const std::shared_ptr<const Nodes> none = make_nodes({Node{}});
  return none;
}

}  // namespace

bool static_equal(const StaticValue& a, const StaticValue& b) {
  if (a.index() != b.index()) return false;
  if (const double* x = std::get_if<double>(&a)) {
    double y = std::get<double>(b);
    return *x == y || (std::isnan(*x) && std::isnan(y));
  }
  if (const auto* x = std::get_if<std::shared_ptr<const OpaqueStatic>>(&a)) {
    const auto& y = std::get<std::shared_ptr<const OpaqueStatic>>(b);
    return (*x)->type() == y->type() && (*x)->equals(*y);
  }
  return a == b;
}

size_t static_hash(const StaticValue& v) {
  size_t h = v.index();
  if (const double* x = std::get_if<double>(&v)) {
    // Values that compare equal hash equal: -0.0 as 0.0, every NaN alike.
    double d = *x == 0 ? 0.0 : std::isnan(*x) ? std::nan("") : *x;
    return hash_combine(h, std::hash<double>{}(d));
  }
  if (const auto* x = std::get_if<std::shared_ptr<const OpaqueStatic>>(&v))
    return hash_combine(hash_combine(h, (*x)->type().hash_code()), (*x)->hash());
  return hash_combine(h, std::visit(
                             [](const auto& x) -> size_t {
                               using T = std::decay_t<decltype(x)>;
                               if constexpr (std::is_same_v<T, std::shared_ptr<const OpaqueStatic>>)
                                 return 0;
                               else
                                 return std::hash<T>{}(x);
                             },
                             v));
}

std::string static_str(const StaticValue& v) {
  if (const bool* b = std::get_if<bool>(&v)) return *b ? "True" : "False";
  if (const int64_t* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const uint64_t* u = std::get_if<uint64_t>(&v)) return std::to_string(*u);
  if (const double* d = std::get_if<double>(&v)) return float_str(*d);
  if (const std::string* s = std::get_if<std::string>(&v)) return quoted(*s);
  return cat({"<", demangle(std::get<std::shared_ptr<const OpaqueStatic>>(v)->type()), ">"});
}

TreeDef::TreeDef() : nodes_(none_nodes()) {}

int TreeDef::num_leaves() const {
  return nodes_->nodes[0].num_leaves;
}

int TreeDef::num_nodes() const {
  return nodes_->nodes[0].num_nodes;
}

TreeDef::Kind TreeDef::kind() const {
  return nodes_->nodes[0].kind;
}

std::vector<TreeDef> TreeDef::children() const {
  const std::vector<Node>& nodes = nodes_->nodes;
  std::vector<TreeDef> out;
  size_t i = 1;
  for (int c = 0; c < nodes[0].num_children; ++c) {
    size_t end = i + size_t(nodes[i].num_nodes);
    out.push_back(TreeDef(make_nodes({nodes.begin() + long(i), nodes.begin() + long(end)})));
    i = end;
  }
  return out;
}

const std::vector<std::string>& TreeDef::keys() const {
  return nodes_->nodes[0].keys;
}

const std::string& TreeDef::name() const {
  return nodes_->nodes[0].name;
}

const StaticValue& TreeDef::static_value() const {
  if (kind() != Kind::static_leaf)
    throw ValueError(cat({"[TreeDef::static_value] ", str(), " is not a static leaf"}));
  return nodes_->nodes[0].value;
}

bool TreeDef::operator==(const TreeDef& other) const {
  const std::vector<Node>& a = nodes_->nodes;
  const std::vector<Node>& b = other.nodes_->nodes;
  if (nodes_ == other.nodes_) return true;
  if (a.size() != b.size() || nodes_->hash != other.nodes_->hash) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!same_node(a[i], b[i])) return false;
  return true;
}

size_t TreeDef::hash() const {
  return nodes_->hash;
}

bool TreeDef::is_container() const {
  Kind k = kind();
  return k == Kind::list || k == Kind::tuple || k == Kind::dict || k == Kind::ordered_dict ||
         k == Kind::record;
}

std::string TreeDef::child_key(size_t i) const {
  Kind k = kind();
  if (k == Kind::dict || k == Kind::ordered_dict) return cat({"['", keys()[i], "']"});
  if (k == Kind::record) return cat({".", keys()[i]});
  return cat({"[", std::to_string(i), "]"});
}

std::string TreeDef::str() const {
  return cat({"PyTreeDef(", subtree_str(nodes_->nodes, 0), ")"});
}

std::ostream& operator<<(std::ostream& os, const TreeDef& def) {
  return os << def.str();
}

namespace tree_detail {

Builder::Builder() : nodes_(std::make_shared<Nodes>()) {}

void Builder::push(Kind kind) {
  if (!open_.empty()) ++nodes_->nodes[size_t(open_.back().first)].num_children;
  nodes_->nodes.emplace_back().kind = kind;
}

void Builder::leaf(const Array& x) {
  push(Kind::leaf);
  nodes_->nodes.back().num_leaves = 1;
  leaves_.push_back(x);
}

void Builder::static_leaf(StaticValue v) {
  push(Kind::static_leaf);
  nodes_->nodes.back().value = std::move(v);
}

void Builder::none() {
  push(Kind::none);
}

void Builder::open(Kind kind) {
  push(kind);
  open_.emplace_back(int(nodes_->nodes.size()) - 1, int(leaves_.size()));
}

void Builder::open_dict(Kind kind) {
  open(kind);
}

void Builder::key(const std::string& k) {
  nodes_->nodes[size_t(open_.back().first)].keys.push_back(k);
}

void Builder::open_record(const char* name) {
  open(Kind::record);
  nodes_->nodes.back().name = name;
}

void Builder::field(const char* name) {
  nodes_->nodes[size_t(open_.back().first)].keys.emplace_back(name);
}

void Builder::close() {
  auto [index, leaves_before] = open_.back();
  open_.pop_back();
  Node& n = nodes_->nodes[size_t(index)];
  n.num_nodes = int(nodes_->nodes.size()) - index;
  n.num_leaves = int(leaves_.size()) - leaves_before;
}

std::pair<std::vector<Array>, TreeDef> Builder::finish() {
  nodes_->hash = nodes_hash(nodes_->nodes);
  return {std::move(leaves_), TreeDef(std::move(nodes_))};
}

Reader::Reader(const TreeDef& def, std::span<const Array> leaves) : def_(def), leaves_(leaves) {
  if (leaves.size() != size_t(def.num_leaves()))
    throw ValueError(cat({"[tree_unflatten] expected ", std::to_string(def.num_leaves()),
                          " leaves for ", def.str(), ", got ", std::to_string(leaves.size())}));
}

void Reader::mismatch(size_t node, const std::string& expected) const {
  const std::vector<Node>& nodes = def_.nodes_->nodes;
  throw ValueError(cat({"[tree_unflatten] the target type expects ", expected, " where ",
                        def_.str(), " has ", subtree_str(nodes, node)}));
}

size_t Reader::take(Kind kind, const std::string& expected) {
  const std::vector<Node>& nodes = def_.nodes_->nodes;
  if (nodes[node_].kind != kind) mismatch(node_, expected);
  return node_++;
}

const Array& Reader::leaf() {
  take(Kind::leaf, "an Array");
  return leaves_[leaf_++];
}

const StaticValue& Reader::static_leaf() {
  return def_.nodes_->nodes[take(Kind::static_leaf, "a static value")].value;
}

bool Reader::at_none() const {
  return def_.nodes_->nodes[node_].kind == Kind::none;
}

void Reader::none() {
  take(Kind::none, "None");
}

size_t Reader::open_list() {
  return size_t(def_.nodes_->nodes[take(Kind::list, "a std::vector")].num_children);
}

void Reader::open_list(size_t size) {
  std::string expected = cat({"a std::array of ", std::to_string(size), " elements"});
  size_t i = take(Kind::list, expected);
  if (size_t(def_.nodes_->nodes[i].num_children) != size) mismatch(i, expected);
}

void Reader::open_tuple(size_t size) {
  std::string expected = cat({"a tuple of ", std::to_string(size), " elements"});
  size_t i = take(Kind::tuple, expected);
  if (size_t(def_.nodes_->nodes[i].num_children) != size) mismatch(i, expected);
}

const std::vector<std::string>& Reader::open_dict(Kind kind) {
  const char* expected = kind == Kind::dict ? "a std::map<std::string, T>" : "an OrderedDict<T>";
  return def_.nodes_->nodes[take(kind, expected)].keys;
}

void Reader::open_record(const char* name, size_t num_fields) {
  std::string expected = cat({"a ", name, " with ", std::to_string(num_fields), " fields"});
  size_t i = take(Kind::record, expected);
  const Node& n = def_.nodes_->nodes[i];
  if (n.name != name || size_t(n.num_children) != num_fields) mismatch(i, expected);
}

void Reader::static_mismatch(StaticCategory expected, const std::type_info& type) const {
  mismatch(node_ - 1, describe(expected, type));
}

void Reader::finish() const {
  if (node_ != def_.nodes_->nodes.size() || leaf_ != leaves_.size())
    throw ValueError(cat({"[tree_unflatten] the target type does not use all of ", def_.str()}));
}

}  // namespace tree_detail

namespace ordered_dict_detail {

void throw_missing_key(std::string_view key, const std::vector<std::string>& keys) {
  std::string known;
  for (const std::string& k : keys) known += cat({known.empty() ? "" : ", ", quoted(k)});
  throw KeyError(cat({"[OrderedDict] no key ", quoted(std::string(key)), "; the keys are ",
                      keys.empty() ? "none" : known}));
}

}  // namespace ordered_dict_detail

namespace tree_detail {

void throw_static_mismatch(const char* api, const StaticValue& got, StaticCategory expected,
                           const std::type_info& type) {
  throw ValueError(
      cat({"[", api, "] expected ", describe(expected, type), ", got ", static_str(got)}));
}

void check_same_structure(const char* api, const TreeDef& first, const TreeDef& other,
                          size_t arg_index) {
  if (first == other) return;
  throw ValueError(cat({"[", api, "] tree structure mismatch: argument 1 has ", first.str(),
                        " but argument ", std::to_string(arg_index), " has ", other.str(),
                        "; every tree must have the structure of the first"}));
}

}  // namespace tree_detail

namespace {

struct PrefixWalk {
  const std::vector<Node>& prefix;
  const std::vector<Node>& full;
  const TreeDef& prefix_def;
  const TreeDef& full_def;
  std::vector<std::optional<StaticValue>> out;

  [[noreturn]] void fail(const std::string& why) const {
    throw ValueError(cat({"[broadcast_prefix] ", prefix_def.str(), " is not a tree prefix of ",
                          full_def.str(), ": ", why}));
  }

  // Walks the subtrees at prefix[p] and full[f]; returns the indices after them.
  std::pair<size_t, size_t> walk(size_t p, size_t f) {
    const Node& pn = prefix[p];
    const Node& fn = full[f];
    if (pn.kind == Kind::leaf) fail("its leaves must be static values or None, not Arrays");
    if (pn.kind == Kind::static_leaf || pn.kind == Kind::none) {
      std::optional<StaticValue> v;
      if (pn.kind == Kind::static_leaf) v = pn.value;
      out.insert(out.end(), size_t(fn.num_leaves), v);
      return {p + 1, f + size_t(fn.num_nodes)};
    }
    if (!same_node(pn, fn))
      fail(cat(
          {"it has ", subtree_str(prefix, p), " where the full tree has ", subtree_str(full, f)}));
    std::pair<size_t, size_t> next{p + 1, f + 1};
    for (int c = 0; c < pn.num_children; ++c) next = walk(next.first, next.second);
    return next;
  }
};

}  // namespace

std::vector<std::optional<StaticValue>> broadcast_prefix(const TreeDef& prefix,
                                                         const TreeDef& full) {
  PrefixWalk w{prefix.nodes_->nodes, full.nodes_->nodes, prefix, full, {}};
  w.out.reserve(size_t(full.num_leaves()));
  w.walk(0, 0);
  return std::move(w.out);
}

std::string tuple_prefix_length_error(std::string_view prefix, std::string_view key_path,
                                      size_t prefix_length, size_t full_length) {
  return cat({"pytree structure error: different lengths of tuple at key path\n    ", key_path,
              "\nAt that key path, the prefix pytree ", prefix,
              " has a subtree of type tuple of length ", std::to_string(prefix_length),
              ", but the full pytree has a subtree of the same type but of length ",
              std::to_string(full_length), "."});
}

}  // namespace spmd

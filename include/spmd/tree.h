// C++ pytrees (JAX's jax.tree_util): a value built from Arrays inside std::vector, std::array,
// std::tuple, std::pair, std::map<std::string, T>, OrderedDict<T>, std::optional and structs
// registered with SPMD_TREE flattens into its Array leaves plus a TreeDef (structure and static
// leaves), and back.
#pragma once

#include <spmd/array.h>
#include <spmd/error.h>
#include <spmd/ordered_dict.h>

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <variant>  // also declares std::hash
#include <vector>

namespace spmd {

// A static leaf of a user type: compared with the type's operator== and hashed with std::hash.
class OpaqueStatic {
 public:
  virtual ~OpaqueStatic() = default;
  virtual const std::type_info& type() const = 0;
  // Only called when other.type() == type().
  virtual bool equals(const OpaqueStatic& other) const = 0;
  virtual size_t hash() const = 0;
};

// The value of a static (non-Array) leaf. Signed integers and enums with a signed underlying type
// are held as int64_t, other integers as uint64_t, float and double as double.
using StaticValue =
    std::variant<bool, int64_t, uint64_t, double, std::string, std::shared_ptr<const OpaqueStatic>>;

// NaN equals NaN here so that a static NaN does not make every cache lookup miss.
bool static_equal(const StaticValue& a, const StaticValue& b);
size_t static_hash(const StaticValue& v);
// Python-like: 3, 2.5, True, 'name'; user types as <TypeName>.
std::string static_str(const StaticValue& v);

namespace tree_detail {
struct Nodes;
class Builder;
class Reader;
}  // namespace tree_detail

// The structure of a tree: its nodes in depth-first order, with dict keys, struct names and the
// values of static leaves. Cheap to copy (shared, immutable); usable as a cache key.
class TreeDef {
 public:
  enum class Kind : uint8_t {
    leaf,          // an Array
    static_leaf,   // a non-Array value, kept in the TreeDef
    none,          // an empty std::optional (a present one is just its value, as in Python)
    list,          // std::vector, std::array
    tuple,         // std::tuple, std::pair
    dict,          // std::map<std::string, T>; keys in sorted order
    ordered_dict,  // OrderedDict<T>; keys in insertion order
    record,        // a struct registered with SPMD_TREE
  };

  // The tree of an empty std::optional: PyTreeDef(None).
  TreeDef();

  // The number of Array leaves (static leaves are not counted, as they are not flattened).
  int num_leaves() const;
  int num_nodes() const;

  // The root node and its subtrees (JAX's node_data and children).
  Kind kind() const;
  std::vector<TreeDef> children() const;
  // Dict keys (sorted or in insertion order), or the field names of a record.
  const std::vector<std::string>& keys() const;
  // The type name of a record, as written in SPMD_TREE.
  const std::string& name() const;
  // The value of a static leaf; raises ValueError for other kinds.
  const StaticValue& static_value() const;

  bool operator==(const TreeDef& other) const;
  size_t hash() const;
  // JAX's str(treedef): PyTreeDef((*, [*, *], {'a': *}, Params(w=*, b=3), None)); an
  // OrderedDict prints as CustomNode(OrderedDict[('b', 'a')], [*, *]).
  std::string str() const;
  // Whether the root has children by position or name (list, tuple, dicts, record).
  bool is_container() const;
  // JAX's keystr of the root's child i: ['key'] for dicts, .field for records, [i] otherwise.
  std::string child_key(size_t i) const;

 private:
  friend class tree_detail::Builder;
  friend class tree_detail::Reader;
  friend std::vector<std::optional<StaticValue>> broadcast_prefix(const TreeDef&, const TreeDef&);
  explicit TreeDef(std::shared_ptr<const tree_detail::Nodes> nodes) : nodes_(std::move(nodes)) {}
  std::shared_ptr<const tree_detail::Nodes> nodes_;
};

std::ostream& operator<<(std::ostream& os, const TreeDef& def);

// JAX's broadcast_prefix, as vmap uses it for in_axes: for each Array leaf of `full`, in order,
// the leaf of `prefix` whose subtree holds it. `prefix` must match `full` node for node down to
// its own leaves, each of which (a static value, or None from an empty std::optional) stands for
// a whole subtree of `full`; None gives std::nullopt. Raises ValueError "[broadcast_prefix] ..."
// naming both trees when `prefix` is not a prefix of `full` or has Array leaves.
std::vector<std::optional<StaticValue>> broadcast_prefix(const TreeDef& prefix,
                                                         const TreeDef& full);

// JAX's text for a prefix tuple (in_axes, in_specs, out_specs, ...) named `prefix` whose length
// differs from that of the tuple it must be a prefix of, found at `key_path`:
// "pytree structure error: different lengths of tuple at key path\n    <key_path>\nAt that key
// path, the prefix pytree <prefix> has a subtree of type tuple of length 3, but ...".
std::string tuple_prefix_length_error(std::string_view prefix, std::string_view key_path,
                                      size_t prefix_length, size_t full_length);

namespace tree_detail {

template <class T>
struct Tag {};

template <class T>
inline constexpr bool kAlwaysFalse = false;

enum class StaticCategory : uint8_t { boolean, integer, floating, string, opaque };

// Builds a TreeDef in depth-first order while flattening.
class Builder {
 public:
  Builder();
  void leaf(const Array& x);
  void static_leaf(StaticValue v);
  void none();
  // list or tuple; the children follow, then close().
  void open(TreeDef::Kind kind);
  // dicts or record: key() or field() names each child before it is added.
  void open_dict(TreeDef::Kind kind = TreeDef::Kind::dict);
  void key(const std::string& k);
  void open_record(const char* name);
  void field(const char* name);
  void close();
  std::pair<std::vector<Array>, TreeDef> finish();

 private:
  void push(TreeDef::Kind kind);
  std::shared_ptr<Nodes> nodes_;
  std::vector<Array> leaves_;
  // Open nodes: (node index, leaves before it).
  std::vector<std::pair<int, int>> open_;
};

// Walks a TreeDef in depth-first order while unflattening; every method checks the node against
// what the target type expects and raises ValueError "[tree_unflatten] ..." on a mismatch.
class Reader {
 public:
  Reader(const TreeDef& def, std::span<const Array> leaves);
  const Array& leaf();
  const StaticValue& static_leaf();
  bool at_none() const;
  void none();
  // std::vector: returns the length; std::array: checks it.
  size_t open_list();
  void open_list(size_t size);
  void open_tuple(size_t size);
  const std::vector<std::string>& open_dict(TreeDef::Kind kind = TreeDef::Kind::dict);
  void open_record(const char* name, size_t num_fields);
  [[noreturn]] void static_mismatch(StaticCategory expected, const std::type_info& type) const;
  void finish() const;

 private:
  size_t take(TreeDef::Kind kind, const std::string& expected);
  [[noreturn]] void mismatch(size_t node, const std::string& expected) const;
  const TreeDef& def_;
  std::span<const Array> leaves_;
  size_t node_ = 0;
  size_t leaf_ = 0;
};

[[noreturn]] void throw_static_mismatch(const char* api, const StaticValue& got,
                                        StaticCategory expected, const std::type_info& type);
void check_same_structure(const char* api, const TreeDef& first, const TreeDef& other,
                          size_t arg_index);

template <class T>
class OpaqueStaticOf final : public OpaqueStatic {
 public:
  explicit OpaqueStaticOf(T value) : value_(std::move(value)) {}
  const std::type_info& type() const override { return typeid(T); }
  bool equals(const OpaqueStatic& other) const override {
    return value_ == static_cast<const OpaqueStaticOf&>(other).value_;
  }
  size_t hash() const override { return std::hash<T>{}(value_); }
  const T& value() const { return value_; }

 private:
  T value_;
};

template <class T>
struct IsVector : std::false_type {};
template <class T, class A>
struct IsVector<std::vector<T, A>> : std::true_type {};

template <class T>
struct IsStdArray : std::false_type {};
template <class T, size_t N>
struct IsStdArray<std::array<T, N>> : std::true_type {};

template <class T>
struct IsTupleLike : std::false_type {};
template <class... Ts>
struct IsTupleLike<std::tuple<Ts...>> : std::true_type {};
template <class A, class B>
struct IsTupleLike<std::pair<A, B>> : std::true_type {};

template <class T>
struct IsStringMap : std::false_type {};
template <class V>
struct IsStringMap<std::map<std::string, V>> : std::true_type {};

template <class T>
struct IsOrderedDict : std::false_type {};
template <class V>
struct IsOrderedDict<OrderedDict<V>> : std::true_type {};

template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};

// Registered with SPMD_TREE: found by argument-dependent lookup in the struct's namespace.
template <class T>
concept Record = requires {
  spmd_tree_name(Tag<T>{});
};

template <class T>
concept BasicStatic =
    std::is_arithmetic_v<T> || std::is_enum_v<T> || std::is_same_v<T, std::string>;

template <class T>
concept OpaqueStaticType = !std::is_pointer_v<T> && std::copy_constructible<T> &&
                           std::equality_comparable<T> && requires(const T& v) {
  { std::hash<T>{}(v) } -> std::convertible_to<size_t>;
};

template <class T>
concept Static = BasicStatic<T> || OpaqueStaticType<T>;

template <class T>
void unsupported() {
  static_assert(
      kAlwaysFalse<T>,
      "spmd trees: this type is neither a tree node (Array, std::vector, std::array, "
      "std::tuple, std::pair, std::map<std::string, T>, OrderedDict<T>, std::optional, "
      "a struct registered with SPMD_TREE) nor a static leaf (arithmetic, enum, std::string, "
      "or a non-pointer type with operator== and a std::hash specialization)");
}

template <class T>
constexpr StaticCategory static_category() {
  if constexpr (std::is_same_v<T, bool>)
    return StaticCategory::boolean;
  else if constexpr (std::is_integral_v<T> || std::is_enum_v<T>)
    return StaticCategory::integer;
  else if constexpr (std::is_floating_point_v<T>)
    return StaticCategory::floating;
  else if constexpr (std::is_same_v<T, std::string>)
    return StaticCategory::string;
  else
    return StaticCategory::opaque;
}

template <class T>
StaticValue to_static(const T& v) {
  if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::string>) {
    return v;
  } else if constexpr (std::is_enum_v<T>) {
    return to_static(static_cast<std::underlying_type_t<T>>(v));
  } else if constexpr (std::is_integral_v<T>) {
    if constexpr (std::is_signed_v<T>)
      return int64_t(v);
    else
      return uint64_t(v);
  } else if constexpr (std::is_floating_point_v<T>) {
    return double(v);
  } else {
    return std::shared_ptr<const OpaqueStatic>(std::make_shared<const OpaqueStaticOf<T>>(v));
  }
}

// The value as T, or nullopt when it holds another kind of value.
template <class T>
std::optional<T> from_static(const StaticValue& v) {
  if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::string>) {
    if (const T* p = std::get_if<T>(&v)) return *p;
  } else if constexpr (std::is_integral_v<T> || std::is_enum_v<T>) {
    if (const int64_t* p = std::get_if<int64_t>(&v)) return static_cast<T>(*p);
    if (const uint64_t* p = std::get_if<uint64_t>(&v)) return static_cast<T>(*p);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (const double* p = std::get_if<double>(&v)) return static_cast<T>(*p);
  } else {
    using Holder = std::shared_ptr<const OpaqueStatic>;
    if (const Holder* p = std::get_if<Holder>(&v); p && (*p)->type() == typeid(T))
      return static_cast<const OpaqueStaticOf<T>&>(**p).value();
  }
  return std::nullopt;
}

template <class T>
void flatten(Builder& b, const T& x) {
  if constexpr (std::is_same_v<T, Array>) {
    b.leaf(x);
  } else if constexpr (IsVector<T>::value || IsStdArray<T>::value) {
    b.open(TreeDef::Kind::list);
    for (const auto& e : x) flatten<typename T::value_type>(b, e);
    b.close();
  } else if constexpr (IsTupleLike<T>::value) {
    b.open(TreeDef::Kind::tuple);
    std::apply([&](const auto&... e) { (flatten(b, e), ...); }, x);
    b.close();
  } else if constexpr (IsStringMap<T>::value || IsOrderedDict<T>::value) {
    b.open_dict(IsStringMap<T>::value ? TreeDef::Kind::dict : TreeDef::Kind::ordered_dict);
    for (const auto& [k, v] : x) {
      b.key(k);
      flatten(b, v);
    }
    b.close();
  } else if constexpr (IsOptional<T>::value) {
    static_assert(!IsOptional<typename T::value_type>::value,
                  "spmd trees: std::optional<std::optional<T>> is ambiguous (both empty states "
                  "flatten to None)");
    if (x)
      flatten(b, *x);
    else
      b.none();
  } else if constexpr (Record<T>) {
    b.open_record(spmd_tree_name(Tag<T>{}));
    spmd_tree_fields(Tag<T>{}, x, [&](const char* name, const auto& field) {
      b.field(name);
      flatten(b, field);
    });
    b.close();
  } else if constexpr (Static<T>) {
    b.static_leaf(to_static(x));
  } else {
    unsupported<T>();
  }
}

template <class T>
T unflatten(Reader& r);

template <class T, size_t... I>
T unflatten_array(Reader& r, std::index_sequence<I...>) {
  r.open_list(sizeof...(I));
  // Braced initialisers are evaluated left to right, which is the leaf order.
  return T{((void)I, unflatten<typename T::value_type>(r))...};
}

template <class T, class... Ts>
T unflatten_tuple(Reader& r, std::type_identity<std::tuple<Ts...>>) {
  r.open_tuple(sizeof...(Ts));
  return T{unflatten<Ts>(r)...};
}

template <class T, class A, class B>
T unflatten_tuple(Reader& r, std::type_identity<std::pair<A, B>>) {
  r.open_tuple(2);
  return T{unflatten<A>(r), unflatten<B>(r)};
}

template <class T>
T unflatten_record(Reader& r) {
  static_assert(std::is_default_constructible_v<T>,
                "spmd trees: a struct registered with SPMD_TREE must be default constructible "
                "to be unflattened");
  T out{};
  size_t num_fields = 0;
  spmd_tree_fields(Tag<T>{}, out, [&](const char*, auto&) { ++num_fields; });
  r.open_record(spmd_tree_name(Tag<T>{}), num_fields);
  spmd_tree_fields(Tag<T>{}, out, [&](const char*, auto& field) {
    field = unflatten<std::remove_cvref_t<decltype(field)>>(r);
  });
  return out;
}

template <class T>
T unflatten(Reader& r) {
  if constexpr (std::is_same_v<T, Array>) {
    return r.leaf();
  } else if constexpr (IsVector<T>::value) {
    size_t n = r.open_list();
    T out;
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) out.push_back(unflatten<typename T::value_type>(r));
    return out;
  } else if constexpr (IsStdArray<T>::value) {
    return unflatten_array<T>(r, std::make_index_sequence<std::tuple_size_v<T>>{});
  } else if constexpr (IsTupleLike<T>::value) {
    return unflatten_tuple<T>(r, std::type_identity<T>{});
  } else if constexpr (IsStringMap<T>::value) {
    T out;
    for (const std::string& k : r.open_dict())
      out.emplace(k, unflatten<typename T::mapped_type>(r));
    return out;
  } else if constexpr (IsOrderedDict<T>::value) {
    T out;
    for (const std::string& k : r.open_dict(TreeDef::Kind::ordered_dict))
      out.insert(k, unflatten<typename T::mapped_type>(r));
    return out;
  } else if constexpr (IsOptional<T>::value) {
    if (!r.at_none()) return unflatten<typename T::value_type>(r);
    r.none();
    return std::nullopt;
  } else if constexpr (Record<T>) {
    return unflatten_record<T>(r);
  } else if constexpr (Static<T>) {
    std::optional<T> v = from_static<T>(r.static_leaf());
    if (!v) r.static_mismatch(static_category<T>(), typeid(T));
    return std::move(*v);
  } else {
    unsupported<T>();
  }
}

}  // namespace tree_detail

// JAX's tree_flatten: the Array leaves (depth first; map keys sorted, OrderedDict keys in
// insertion order; struct fields in the order given to SPMD_TREE) and the structure.
template <class T>
std::pair<std::vector<Array>, TreeDef> tree_flatten(const T& tree) {
  tree_detail::Builder b;
  tree_detail::flatten(b, tree);
  return b.finish();
}

// JAX's tree_unflatten: a T built from `def` and `leaves`. Container sizes, map keys and static
// leaves come from `def`; raises ValueError "[tree_unflatten] ..." when the number of leaves or
// the structure does not fit T.
template <class T>
T tree_unflatten(const TreeDef& def, std::span<const Array> leaves) {
  tree_detail::Reader r(def, leaves);
  T out = tree_detail::unflatten<T>(r);
  r.finish();
  return out;
}

template <class T>
std::vector<Array> tree_leaves(const T& tree) {
  return tree_flatten(tree).first;
}

template <class T>
TreeDef tree_structure(const T& tree) {
  return tree_flatten(tree).second;
}

// JAX's tree_map: f applied to the Array leaves of `tree` (and the matching leaves of `rest`,
// which must have the same structure, static leaves included), rebuilt as a T.
template <class F, class T, class... Rest>
T tree_map(F&& f, const T& tree, const Rest&... rest) {
  check_callable(f, "tree_map");
  auto [leaves, def] = tree_flatten(tree);
  auto leaves_of = [&def](const auto& other, size_t arg_index) {
    auto [other_leaves, other_def] = tree_flatten(other);
    tree_detail::check_same_structure("tree_map", def, other_def, arg_index);
    return std::move(other_leaves);
  };
  std::vector<Array> out;
  out.reserve(leaves.size());
  [&]<size_t... K>(std::index_sequence<K...>) {
    std::array<std::vector<Array>, sizeof...(Rest)> rest_leaves{leaves_of(rest, K + 2)...};
    for (size_t i = 0; i < leaves.size(); ++i) out.push_back(f(leaves[i], rest_leaves[K][i]...));
  }
  (std::index_sequence_for<Rest...>{});
  return tree_unflatten<T>(def, out);
}

// broadcast_prefix with the prefix leaves converted to T (e.g. int for vmap's in_axes); raises
// ValueError when a prefix leaf is not a T.
template <class T>
std::vector<std::optional<T>> broadcast_prefix(const TreeDef& prefix, const TreeDef& full) {
  std::vector<std::optional<T>> out;
  for (const std::optional<StaticValue>& v : broadcast_prefix(prefix, full)) {
    if (!v) {
      out.emplace_back();
      continue;
    }
    std::optional<T> t = tree_detail::from_static<T>(*v);
    if (!t)
      tree_detail::throw_static_mismatch("broadcast_prefix", *v, tree_detail::static_category<T>(),
                                         typeid(T));
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace spmd

template <>
struct std::hash<spmd::TreeDef> {
  size_t operator()(const spmd::TreeDef& def) const { return def.hash(); }
};

// Registers a struct as a tree node whose children are the named fields, in the order given:
//   struct Params { sp::Array w, b; int layers; };
//   SPMD_TREE(Params, w, b, layers);
// Use it at namespace scope in the struct's own namespace, after the struct's definition.
// Unflattening default-constructs the struct, then assigns the fields.
#define SPMD_TREE(Type, ...)                                                         \
  inline const char* spmd_tree_name(::spmd::tree_detail::Tag<Type>) {                \
    return #Type;                                                                    \
  }                                                                                  \
  template <class Self, class Visit>                                                 \
  void spmd_tree_fields(::spmd::tree_detail::Tag<Type>, Self& self, Visit&& visit) { \
    SPMD_TREE_FOR_EACH_(SPMD_TREE_FIELD_, __VA_ARGS__)                               \
  }                                                                                  \
  static_assert(true, "SPMD_TREE is followed by a semicolon")

#define SPMD_TREE_FIELD_(field) visit(#field, self.field);

// Applies macro to each argument; the nested expansions allow up to 64 arguments.
#define SPMD_TREE_FOR_EACH_(macro, ...) \
  __VA_OPT__(SPMD_TREE_EXPAND_(SPMD_TREE_FOR_EACH_STEP_(macro, __VA_ARGS__)))
#define SPMD_TREE_FOR_EACH_STEP_(macro, first, ...) \
  macro(first) __VA_OPT__(SPMD_TREE_FOR_EACH_AGAIN_ SPMD_TREE_PARENS_(macro, __VA_ARGS__))
#define SPMD_TREE_FOR_EACH_AGAIN_() SPMD_TREE_FOR_EACH_STEP_
#define SPMD_TREE_PARENS_ ()
#define SPMD_TREE_EXPAND_(...) \
  SPMD_TREE_EXPAND3_(SPMD_TREE_EXPAND3_(SPMD_TREE_EXPAND3_(SPMD_TREE_EXPAND3_(__VA_ARGS__))))
#define SPMD_TREE_EXPAND3_(...) \
  SPMD_TREE_EXPAND2_(SPMD_TREE_EXPAND2_(SPMD_TREE_EXPAND2_(SPMD_TREE_EXPAND2_(__VA_ARGS__))))
#define SPMD_TREE_EXPAND2_(...) \
  SPMD_TREE_EXPAND1_(SPMD_TREE_EXPAND1_(SPMD_TREE_EXPAND1_(SPMD_TREE_EXPAND1_(__VA_ARGS__))))
#define SPMD_TREE_EXPAND1_(...) __VA_ARGS__

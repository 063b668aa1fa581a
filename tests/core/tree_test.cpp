// Trees (C++ pytrees): round trips for every node kind and nesting, JAX's leaf order, TreeDef
// equality, hashing and printing (checked against jax.tree.structure), error messages, tree_map
// and broadcast_prefix.
#include <spmd/error.h>
#include <spmd/ops.h>
#include <spmd/tree.h>

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <unordered_set>
#include <utility>
#include <vector>

namespace sp = spmd;
using sp::Array;
using sp::TreeDef;

namespace tree_test {

// Fields registered in a different order from their declaration: the registration order wins.
struct Layer {
  Array bias;
  Array weight;
};
SPMD_TREE(Layer, weight, bias);

// Same fields as Layer under another name.
struct Other {
  Array bias;
  Array weight;
};
SPMD_TREE(Other, weight, bias);

enum class Mode { train, eval };

struct Model {
  std::vector<Layer> layers;
  std::map<std::string, Array> buffers;
  std::optional<Array> scale;
  int depth = 0;
  Mode mode = Mode::train;
  std::string name;
};
SPMD_TREE(Model, layers, buffers, scale, depth, mode, name);

struct Thirteen {
  Array f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11;
  int f12 = 0;
};
SPMD_TREE(Thirteen, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12);

// A user type used as a static leaf through its operator== and std::hash.
struct Key {
  int id = 0;
  bool operator==(const Key&) const = default;
};

}  // namespace tree_test

template <>
struct std::hash<tree_test::Key> {
  size_t operator()(const tree_test::Key& k) const { return std::hash<int>{}(k.id); }
};

namespace {

using tree_test::Key;
using tree_test::Layer;
using tree_test::Mode;
using tree_test::Model;
using tree_test::Other;
using tree_test::Thirteen;

Array vec(std::initializer_list<float> values) {
  return sp::array(values);
}

std::vector<float> values(const Array& x) {
  return x.to_vector<float>();
}

::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

// Flattening keeps the caller's handles: leaves are the same arrays, not copies.
void expect_same_arrays(const std::vector<Array>& got, const std::vector<Array>& expected) {
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(got[i].impl(), expected[i].impl()) << "leaf " << i;
}

template <class T>
T round_trip(const T& tree) {
  auto [leaves, def] = sp::tree_flatten(tree);
  return sp::tree_unflatten<T>(def, leaves);
}

template <class T>
std::string structure(const T& tree) {
  return sp::tree_structure(tree).str();
}

// ---- flatten and unflatten --------------------------------------------------------------------

TEST(TreeFlatten, ArrayIsOneLeaf) {
  Array x = vec({1, 2});
  auto [leaves, def] = sp::tree_flatten(x);
  expect_same_arrays(leaves, {x});
  EXPECT_EQ(def.num_leaves(), 1);
  EXPECT_EQ(def.kind(), TreeDef::Kind::leaf);
  EXPECT_EQ(values(sp::tree_unflatten<Array>(def, leaves)), (std::vector<float>{1, 2}));
}

TEST(TreeFlatten, LeafOrderIsDepthFirstWithSortedKeys) {
  // jax.tree.leaves((a, [b, c], {'z': d, 'y': e})) is [a, b, c, e, d].
  Array a = vec({1}), b = vec({2}), c = vec({3}), d = vec({4}), e = vec({5});
  std::tuple<Array, std::vector<Array>, std::map<std::string, Array>> tree{
      a, {b, c}, {{"z", d}, {"y", e}}};
  expect_same_arrays(sp::tree_leaves(tree), {a, b, c, e, d});
}

TEST(TreeFlatten, StructFieldsInRegisteredOrder) {
  Array w = vec({1}), b = vec({2});
  expect_same_arrays(sp::tree_leaves(Layer{.bias = b, .weight = w}), {w, b});
  EXPECT_EQ(structure(Layer{b, w}), "PyTreeDef(Layer(weight=*, bias=*))");
}

TEST(TreeFlatten, StaticLeavesAreNotLeaves) {
  Array x = vec({1});
  auto [leaves, def] = sp::tree_flatten(std::make_tuple(x, 3, 2.5, std::string("relu")));
  expect_same_arrays(leaves, {x});
  EXPECT_EQ(def.num_leaves(), 1);
  EXPECT_EQ(def.num_nodes(), 5);
}

TEST(TreeRoundTrip, Vector) {
  std::vector<Array> tree{vec({1}), vec({2, 3}), vec({4})};
  auto out = round_trip(tree);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(values(out[0]), (std::vector<float>{1}));
  EXPECT_EQ(values(out[1]), (std::vector<float>{2, 3}));
  EXPECT_EQ(values(out[2]), (std::vector<float>{4}));
}

TEST(TreeRoundTrip, EmptyContainers) {
  EXPECT_TRUE(round_trip(std::vector<Array>{}).empty());
  EXPECT_TRUE(round_trip(std::map<std::string, Array>{}).empty());
  EXPECT_EQ(sp::tree_structure(std::tuple<>{}).num_leaves(), 0);
}

TEST(TreeRoundTrip, StdArrayTupleAndPair) {
  std::array<Array, 2> arr{vec({1}), vec({2})};
  auto arr_out = round_trip(arr);
  EXPECT_EQ(values(arr_out[0]), (std::vector<float>{1}));
  EXPECT_EQ(values(arr_out[1]), (std::vector<float>{2}));

  auto [t0, t1, t2] = round_trip(std::make_tuple(vec({3}), 7, std::string("relu")));
  EXPECT_EQ(values(t0), (std::vector<float>{3}));
  EXPECT_EQ(t1, 7);
  EXPECT_EQ(t2, "relu");

  auto [p0, p1] = round_trip(std::make_pair(2.5f, vec({4})));
  EXPECT_EQ(p0, 2.5f);
  EXPECT_EQ(values(p1), (std::vector<float>{4}));
}

TEST(TreeRoundTrip, MapKeepsKeys) {
  std::map<std::string, Array> tree{{"w", vec({1})}, {"b", vec({2})}};
  auto out = round_trip(tree);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(values(out.at("w")), (std::vector<float>{1}));
  EXPECT_EQ(values(out.at("b")), (std::vector<float>{2}));
}

TEST(TreeRoundTrip, OptionalPresentAndAbsent) {
  std::vector<std::optional<Array>> tree{vec({1}), std::nullopt, vec({2})};
  auto [leaves, def] = sp::tree_flatten(tree);
  EXPECT_EQ(def.str(), "PyTreeDef([*, None, *])");
  auto out = sp::tree_unflatten<std::vector<std::optional<Array>>>(def, leaves);
  ASSERT_EQ(out.size(), 3u);
  ASSERT_TRUE(out[0].has_value());
  EXPECT_FALSE(out[1].has_value());
  ASSERT_TRUE(out[2].has_value());
  EXPECT_EQ(values(*out[2]), (std::vector<float>{2}));
}

TEST(TreeRoundTrip, NestedStructWithStatics) {
  Model m{.layers = {Layer{vec({1}), vec({2})}, Layer{vec({3}), vec({4})}},
          .buffers = {{"mean", vec({5})}},
          .scale = std::nullopt,
          .depth = 2,
          .mode = Mode::eval,
          .name = "mlp"};
  auto [leaves, def] = sp::tree_flatten(m);
  EXPECT_EQ(def.str(),
            "PyTreeDef(Model(layers=[Layer(weight=*, bias=*), Layer(weight=*, bias=*)], "
            "buffers={'mean': *}, scale=None, depth=2, mode=1, name='mlp'))");
  // Leaves: layer 0 weight, bias; layer 1 weight, bias; the buffer.
  std::vector<float> flat;
  for (const Array& x : leaves) flat.push_back(x.item<float>());
  EXPECT_EQ(flat, (std::vector<float>{2, 1, 4, 3, 5}));

  Model out = sp::tree_unflatten<Model>(def, leaves);
  ASSERT_EQ(out.layers.size(), 2u);
  EXPECT_EQ(out.layers[1].weight.item<float>(), 4);
  EXPECT_EQ(out.layers[1].bias.item<float>(), 3);
  EXPECT_EQ(out.buffers.at("mean").item<float>(), 5);
  EXPECT_FALSE(out.scale.has_value());
  EXPECT_EQ(out.depth, 2);
  EXPECT_EQ(out.mode, Mode::eval);
  EXPECT_EQ(out.name, "mlp");
  EXPECT_EQ(sp::tree_structure(out), def);
}

TEST(TreeRoundTrip, StructWithThirteenFields) {
  Thirteen t;
  Array* fields[] = {&t.f0, &t.f1, &t.f2, &t.f3, &t.f4,  &t.f5,
                     &t.f6, &t.f7, &t.f8, &t.f9, &t.f10, &t.f11};
  for (int i = 0; i < 12; ++i) *fields[i] = vec({float(i)});
  t.f12 = 42;
  auto [leaves, def] = sp::tree_flatten(t);
  ASSERT_EQ(leaves.size(), 12u);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(leaves[size_t(i)].item<float>(), float(i));
  EXPECT_TRUE(contains(def.str(), "f11=*, f12=42)"));
  Thirteen out = sp::tree_unflatten<Thirteen>(def, leaves);
  EXPECT_EQ(out.f11.item<float>(), 11);
  EXPECT_EQ(out.f12, 42);
}

TEST(TreeRoundTrip, StaticLeavesComeFromTheTreeDef) {
  auto def = sp::tree_structure(std::make_tuple(vec({1}), 7, Mode::eval, Key{9}));
  Array replacement = vec({5});
  auto [x, n, mode, key] =
      sp::tree_unflatten<std::tuple<Array, int, Mode, Key>>(def, std::vector<Array>{replacement});
  EXPECT_EQ(x.impl(), replacement.impl());
  EXPECT_EQ(n, 7);
  EXPECT_EQ(mode, Mode::eval);
  EXPECT_EQ(key.id, 9);
}

TEST(TreeRoundTrip, VectorLengthComesFromTheTreeDef) {
  auto def = sp::tree_structure(std::vector<Array>{vec({1}), vec({2})});
  std::vector<Array> fresh{vec({8}), vec({9})};
  auto out = sp::tree_unflatten<std::vector<Array>>(def, fresh);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].item<float>(), 9);
}

TEST(TreeRoundTrip, ExtremeIntegerStatics) {
  auto tree = std::make_tuple(std::numeric_limits<uint64_t>::max(),
                              std::numeric_limits<int64_t>::min(), '\x07');
  auto [u, i, c] = round_trip(tree);
  EXPECT_EQ(u, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(i, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(c, '\x07');
  EXPECT_EQ(structure(tree), "PyTreeDef((18446744073709551615, -9223372036854775808, 7))");
}

// ---- equality, hashing --------------------------------------------------------------------------

TEST(TreeDefEquality, SameStructureEqualWhateverTheArrays) {
  auto a = sp::tree_structure(std::make_tuple(vec({1}), std::vector<Array>{vec({2})}, 3));
  auto b = sp::tree_structure(std::make_tuple(vec({7, 8}), std::vector<Array>{vec({9})}, 3));
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_EQ(std::hash<TreeDef>{}(a), a.hash());
}

TEST(TreeDefEquality, DifferentStaticValueUnequal) {
  auto a = sp::tree_structure(std::make_tuple(vec({1}), 3));
  auto b = sp::tree_structure(std::make_tuple(vec({1}), 4));
  auto c = sp::tree_structure(std::make_tuple(vec({1}), std::string("3")));
  EXPECT_NE(a, b);
  EXPECT_NE(a.hash(), b.hash());
  EXPECT_NE(a, c);
  EXPECT_NE(sp::tree_structure(Key{1}), sp::tree_structure(Key{2}));
  EXPECT_EQ(sp::tree_structure(Key{1}), sp::tree_structure(Key{1}));
}

TEST(TreeDefEquality, DifferentVectorLengthUnequal) {
  auto a = sp::tree_structure(std::vector<Array>{vec({1}), vec({2})});
  auto b = sp::tree_structure(std::vector<Array>{vec({1}), vec({2}), vec({3})});
  EXPECT_NE(a, b);
  EXPECT_NE(a.hash(), b.hash());
}

TEST(TreeDefEquality, DifferentKindsKeysAndNamesUnequal) {
  Array x = vec({1});
  auto list = sp::tree_structure(std::vector<Array>{x, x});
  auto tuple = sp::tree_structure(std::make_tuple(x, x));
  EXPECT_NE(list, tuple);
  using Dict = std::map<std::string, Array>;
  EXPECT_NE(sp::tree_structure(Dict{{"a", x}}), sp::tree_structure(Dict{{"b", x}}));
  EXPECT_NE(sp::tree_structure(Layer{x, x}), sp::tree_structure(Other{x, x}));
  EXPECT_NE(sp::tree_structure(std::optional<Array>(x)),
            sp::tree_structure(std::optional<Array>()));
  // A leaf and a static leaf are different nodes.
  EXPECT_NE(sp::tree_structure(x), sp::tree_structure(1));
}

TEST(TreeDefEquality, SameKindContainersAreInterchangeable) {
  // std::vector and std::array are both lists, std::pair and std::tuple both tuples (as JAX
  // has one list and one tuple node), so a TreeDef from one unflattens into the other.
  Array x = vec({1}), y = vec({2});
  auto def = sp::tree_structure(std::vector<Array>{x, y});
  EXPECT_EQ(def, sp::tree_structure(std::array<Array, 2>{x, y}));
  EXPECT_EQ(sp::tree_structure(std::make_pair(x, 1)), sp::tree_structure(std::make_tuple(x, 1)));
  auto arr = sp::tree_unflatten<std::array<Array, 2>>(def, std::vector<Array>{x, y});
  EXPECT_EQ(arr[1].impl(), y.impl());
}

TEST(TreeDefEquality, FloatingStatics) {
  auto s = [](double v) { return sp::tree_structure(v); };
  EXPECT_EQ(s(2.5), sp::tree_structure(2.5f));
  EXPECT_EQ(s(0.0), s(-0.0));
  EXPECT_EQ(s(0.0).hash(), s(-0.0).hash());
  double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(s(nan), s(-nan));
  EXPECT_EQ(s(nan).hash(), s(-nan).hash());
  EXPECT_NE(s(1.0), s(1.0 + 1e-15));
}

TEST(TreeDefEquality, UsableAsUnorderedKey) {
  std::unordered_set<TreeDef> seen;
  seen.insert(sp::tree_structure(std::make_tuple(vec({1}), 1)));
  seen.insert(sp::tree_structure(std::make_tuple(vec({2}), 1)));
  seen.insert(sp::tree_structure(std::make_tuple(vec({1}), 2)));
  EXPECT_EQ(seen.size(), 2u);
}

TEST(TreeDefEquality, DefaultIsNone) {
  TreeDef def;
  EXPECT_EQ(def.kind(), TreeDef::Kind::none);
  EXPECT_EQ(def.num_leaves(), 0);
  EXPECT_EQ(def, sp::tree_structure(std::optional<Array>()));
  EXPECT_EQ(def.str(), "PyTreeDef(None)");
}

TEST(TreeDefEquality, ChildrenAndNodeData) {
  Array x = vec({1});
  auto def = sp::tree_structure(std::make_tuple(x, std::vector<Array>{x, x}, Layer{x, x}, 5));
  EXPECT_EQ(def.kind(), TreeDef::Kind::tuple);
  std::vector<TreeDef> children = def.children();
  ASSERT_EQ(children.size(), 4u);
  EXPECT_EQ(children[0], sp::tree_structure(x));
  EXPECT_EQ(children[1], sp::tree_structure(std::vector<Array>{x, x}));
  EXPECT_EQ(children[1].num_leaves(), 2);
  EXPECT_EQ(children[2].name(), "Layer");
  EXPECT_EQ(children[2].keys(), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(std::get<int64_t>(children[3].static_value()), 5);
  EXPECT_THROW(children[0].static_value(), sp::ValueError);
}

// ---- printing
// ------------------------------------------------------------------------------------

TEST(TreeStr, MatchesJaxPyTreeDef) {
  Array x = vec({1});
  // The expected strings are jax.tree.structure of the same Python values.
  EXPECT_EQ(structure(std::make_tuple(x, std::vector<Array>{x, x},
                                      std::map<std::string, Array>{{"a", x}})),
            "PyTreeDef((*, [*, *], {'a': *}))");
  EXPECT_EQ(structure(std::make_tuple(x)), "PyTreeDef((*,))");
  EXPECT_EQ(structure(std::tuple<>{}), "PyTreeDef(())");
  EXPECT_EQ(structure(std::vector<Array>{}), "PyTreeDef([])");
  EXPECT_EQ(structure(std::map<std::string, Array>{}), "PyTreeDef({})");
  EXPECT_EQ(structure(std::optional<Array>()), "PyTreeDef(None)");
  EXPECT_EQ(structure(x), "PyTreeDef(*)");
  EXPECT_EQ(structure(std::map<std::string, std::optional<Array>>{{"b", x}, {"a", std::nullopt}}),
            "PyTreeDef({'a': None, 'b': *})");
}

TEST(TreeStr, StaticLeavesByValue) {
  EXPECT_EQ(structure(std::make_tuple(3, 2.5, true, std::string("it's"), 1.0f, 1e-8, -7L)),
            "PyTreeDef((3, 2.5, True, 'it\\'s', 1.0, 1e-08, -7))");
  EXPECT_EQ(structure(Key{1}), "PyTreeDef(<tree_test::Key>)");
  std::ostringstream os;
  os << sp::tree_structure(Layer{vec({1}), vec({2})});
  EXPECT_EQ(os.str(), "PyTreeDef(Layer(weight=*, bias=*))");
}

// ---- errors
// --------------------------------------------------------------------------------------

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const sp::ValueError& e) {
    return e.what();
  }
  return "no ValueError";
}

TEST(TreeErrors, UnflattenWrongLeafCount) {
  Array x = vec({1});
  auto def = sp::tree_structure(std::make_tuple(x, x));
  EXPECT_EQ(error_of([&] { sp::tree_unflatten<std::tuple<Array, Array>>(def, std::vector{x}); }),
            "[tree_unflatten] expected 2 leaves for PyTreeDef((*, *)), got 1");
  EXPECT_EQ(error_of([&] {
              sp::tree_unflatten<std::tuple<Array, Array>>(def, std::vector{x, x, x});
            }),
            "[tree_unflatten] expected 2 leaves for PyTreeDef((*, *)), got 3");
}

TEST(TreeErrors, UnflattenWrongStructure) {
  Array x = vec({1});
  auto list = sp::tree_structure(std::vector<Array>{x, x});
  std::vector<Array> two{x, x};
  EXPECT_EQ(error_of([&] { sp::tree_unflatten<std::tuple<Array, Array>>(list, two); }),
            "[tree_unflatten] the target type expects a tuple of 2 elements where "
            "PyTreeDef([*, *]) has [*, *]");
  EXPECT_EQ(error_of([&] { sp::tree_unflatten<std::array<Array, 3>>(list, two); }),
            "[tree_unflatten] the target type expects a std::array of 3 elements where "
            "PyTreeDef([*, *]) has [*, *]");
  EXPECT_EQ(error_of([&] {
              sp::tree_unflatten<Other>(sp::tree_structure(Layer{x, x}), two);
            }),
            "[tree_unflatten] the target type expects a Other with 2 fields where "
            "PyTreeDef(Layer(weight=*, bias=*)) has Layer(weight=*, bias=*)");
  auto nested = sp::tree_structure(std::make_tuple(x, std::optional<Array>()));
  EXPECT_EQ(error_of([&] { sp::tree_unflatten<std::tuple<Array, Array>>(nested, std::vector{x}); }),
            "[tree_unflatten] the target type expects an Array where PyTreeDef((*, None)) has "
            "None");
  EXPECT_EQ(error_of([&] {
              sp::tree_unflatten<std::tuple<Array, std::vector<Array>>>(nested, std::vector{x});
            }),
            "[tree_unflatten] the target type expects a std::vector where PyTreeDef((*, None)) "
            "has None");
}

TEST(TreeErrors, UnflattenWrongStaticType) {
  Array x = vec({1});
  auto def = sp::tree_structure(std::make_tuple(x, std::string("relu")));
  EXPECT_EQ(error_of([&] { sp::tree_unflatten<std::tuple<Array, int>>(def, std::vector{x}); }),
            "[tree_unflatten] the target type expects a static integer where "
            "PyTreeDef((*, 'relu')) has 'relu'");
  EXPECT_EQ(
      error_of([&] { sp::tree_unflatten<std::tuple<Array, Array>>(def, std::vector{x}); }),
      "[tree_unflatten] the target type expects an Array where PyTreeDef((*, 'relu')) has 'relu'");
  auto key = sp::tree_structure(Key{1});
  EXPECT_EQ(error_of([&] { sp::tree_unflatten<Mode>(key, {}); }),
            "[tree_unflatten] the target type expects a static integer where "
            "PyTreeDef(<tree_test::Key>) has <tree_test::Key>");
  EXPECT_EQ(error_of([&] { sp::tree_unflatten<Key>(sp::tree_structure(3), {}); }),
            "[tree_unflatten] the target type expects a static tree_test::Key where "
            "PyTreeDef(3) has 3");
}

// ---- tree_map
// ------------------------------------------------------------------------------------

TEST(TreeMap, OneTree) {
  Model m{.layers = {Layer{vec({1}), vec({2})}},
          .buffers = {},
          .scale = vec({5}),
          .depth = 3,
          .mode = Mode::train,
          .name = "m"};
  Model out = sp::tree_map([](const Array& x) { return x * 10.0f; }, m);
  EXPECT_EQ(out.layers[0].bias.item<float>(), 10);
  EXPECT_EQ(out.layers[0].weight.item<float>(), 20);
  EXPECT_EQ(out.scale->item<float>(), 50);
  EXPECT_EQ(out.depth, 3);
  EXPECT_EQ(out.name, "m");
}

TEST(TreeMap, TwoTreesSgdStep) {
  std::map<std::string, Array> params{{"w", vec({1, 2})}, {"b", vec({3})}};
  std::map<std::string, Array> grads{{"w", vec({10, 20})}, {"b", vec({30})}};
  auto out =
      sp::tree_map([](const Array& p, const Array& g) { return p - 0.1f * g; }, params, grads);
  EXPECT_EQ(values(out.at("w")), (std::vector<float>{0, 0}));
  EXPECT_EQ(values(out.at("b")), (std::vector<float>{0}));
}

TEST(TreeMap, ThreeTreesPairLeavesByPosition) {
  auto a = std::make_tuple(vec({1}), std::vector<Array>{vec({2})});
  auto b = std::make_tuple(vec({10}), std::vector<Array>{vec({20})});
  auto c = std::make_pair(vec({100}), std::array<Array, 1>{vec({200})});
  auto out = sp::tree_map([](const Array& x, const Array& y, const Array& z) { return x + y + z; },
                          a, b, c);
  EXPECT_EQ(std::get<0>(out).item<float>(), 111);
  EXPECT_EQ(std::get<1>(out)[0].item<float>(), 222);
}

TEST(TreeMap, StructureMismatchNamesBothTrees) {
  Array x = vec({1});
  auto first = std::make_tuple(x, x);
  EXPECT_EQ(error_of([&] {
              sp::tree_map([](const Array& p, const Array&) { return p; }, first,
                           std::make_tuple(x, x, x));
            }),
            "[tree_map] tree structure mismatch: argument 1 has PyTreeDef((*, *)) but argument 2 "
            "has PyTreeDef((*, *, *)); every tree must have the structure of the first");
  EXPECT_TRUE(contains(error_of([&] {
                         sp::tree_map([](const Array& p, const Array&, const Array&) { return p; },
                                      first, first, std::make_tuple(x, 1));
                       }),
                       "argument 3 has PyTreeDef((*, 1))"));
}

// ---- broadcast_prefix
// ----------------------------------------------------------------------------

TEST(TreeBroadcastPrefix, StaticAndNoneCoverSubtrees) {
  Array x = vec({1});
  auto full = sp::tree_structure(
      std::make_tuple(x, std::vector<Array>{x, x}, std::map<std::string, Array>{{"a", x}}));
  auto prefix = sp::tree_structure(
      std::make_tuple(0, std::optional<int>(), std::map<std::string, int>{{"a", 1}}));
  std::vector<std::optional<int>> axes = sp::broadcast_prefix<int>(prefix, full);
  EXPECT_EQ(axes, (std::vector<std::optional<int>>{0, std::nullopt, std::nullopt, 1}));
  // A full tree is a prefix of itself once its leaves are static.
  auto same = sp::tree_structure(std::make_tuple(2, std::vector<int>{3, 4}));
  auto full2 = sp::tree_structure(std::make_tuple(x, std::vector<Array>{x, x}));
  EXPECT_EQ(sp::broadcast_prefix<int>(same, full2), (std::vector<std::optional<int>>{2, 3, 4}));
  // One static leaf covers everything; static leaves of the full tree get nothing.
  auto mixed = sp::tree_structure(std::make_tuple(x, 5, x));
  auto raw = sp::broadcast_prefix(sp::tree_structure(7), mixed);
  ASSERT_EQ(raw.size(), 2u);
  EXPECT_EQ(std::get<int64_t>(*raw[1]), 7);
}

TEST(TreeBroadcastPrefix, Errors) {
  Array x = vec({1});
  auto full = sp::tree_structure(std::make_tuple(x, x));
  EXPECT_EQ(error_of([&] {
              sp::broadcast_prefix(sp::tree_structure(std::vector<int>{0, 0}), full);
            }),
            "[broadcast_prefix] PyTreeDef([0, 0]) is not a tree prefix of PyTreeDef((*, *)): it "
            "has [0, 0] where the full tree has (*, *)");
  EXPECT_TRUE(contains(
      error_of([&] { sp::broadcast_prefix(sp::tree_structure(std::make_tuple(0, x)), full); }),
      "its leaves must be static values or None, not Arrays"));
  EXPECT_EQ(
      error_of([&] { sp::broadcast_prefix<int>(sp::tree_structure(std::string("batch")), full); }),
      "[broadcast_prefix] expected a static integer, got 'batch'");
}

}  // namespace

// OrderedDict: insertion order as a container and as a tree node (leaf order, JAX's PyTreeDef
// text for collections.OrderedDict, key paths), and its lookup errors.
#include <spmd/error.h>
#include <spmd/ops.h>
#include <spmd/placement.h>
#include <spmd/sharding_tree.h>
#include <spmd/transforms.h>
#include <spmd/tree.h>

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace sp = spmd;
using sp::Array;
using sp::OrderedDict;

namespace {

std::vector<float> values(const Array& x) {
  return sp::astype(x, sp::float32).to_vector<float>();
}

TEST(OrderedDict, KeepsInsertionOrderAndReplacesInPlace) {
  OrderedDict<int> d{{"b", 1}, {"a", 2}};
  d["c"] = 3;
  d.insert("b", 10);  // replaced where it is, as Python's d['b'] = 10
  EXPECT_EQ(d.keys(), (std::vector<std::string>{"b", "a", "c"}));
  EXPECT_EQ(d.at("b"), 10);
  EXPECT_EQ(d.size(), 3u);
  EXPECT_TRUE(d.contains("a"));
  EXPECT_FALSE(d.contains("z"));
  std::vector<int> seen;
  for (const auto& [k, v] : d) seen.push_back(v);
  EXPECT_EQ(seen, (std::vector<int>{10, 2, 3}));
  EXPECT_NE(d, (OrderedDict<int>{{"a", 2}, {"b", 10}, {"c", 3}}));
}

TEST(OrderedDict, MissingKeyNamesTheKeys) {
  OrderedDict<int> d{{"layers.0.weight", 1}, {"layers.0.bias", 2}};
  try {
    d.at("layers.1.weight");
    FAIL() << "expected KeyError";
  } catch (const sp::KeyError& e) {
    EXPECT_STREQ(e.what(),
                 "[OrderedDict] no key 'layers.1.weight'; the keys are 'layers.0.weight', "
                 "'layers.0.bias'");
  }
  EXPECT_THROW(OrderedDict<int>().at("a"), sp::KeyError);
}

TEST(OrderedDict, FlattensInInsertionOrder) {
  OrderedDict<Array> d{{"w", sp::full({2}, 1.0f)}, {"b", sp::full({1}, 2.0f)}};
  auto [leaves, def] = sp::tree_flatten(d);
  ASSERT_EQ(leaves.size(), 2u);
  EXPECT_EQ(values(leaves[0]), (std::vector<float>{1, 1}));
  EXPECT_EQ(values(leaves[1]), (std::vector<float>{2}));
  EXPECT_EQ(def.kind(), sp::TreeDef::Kind::ordered_dict);
  EXPECT_EQ(def.keys(), (std::vector<std::string>{"w", "b"}));
  auto back = sp::tree_unflatten<OrderedDict<Array>>(def, leaves);
  EXPECT_EQ(back.keys(), d.keys());
  EXPECT_EQ(back.at("b").impl(), d.at("b").impl());
}

TEST(OrderedDict, PrintsAsJaxOrderedDictNode) {
  Array x = sp::zeros({1});
  // jax.tree.structure of the same collections.OrderedDict values.
  EXPECT_EQ(sp::tree_structure(OrderedDict<Array>{{"b", x}, {"a", x}}).str(),
            "PyTreeDef(CustomNode(OrderedDict[('b', 'a')], [*, *]))");
  EXPECT_EQ(sp::tree_structure(OrderedDict<Array>{{"a", x}}).str(),
            "PyTreeDef(CustomNode(OrderedDict[('a',)], [*]))");
  EXPECT_EQ(sp::tree_structure(OrderedDict<Array>{}).str(),
            "PyTreeDef(CustomNode(OrderedDict[()], []))");
  using Entry = std::optional<std::tuple<Array, Array>>;
  EXPECT_EQ(
      sp::tree_structure(OrderedDict<Entry>{{"a", std::tuple{x, x}}, {"b", std::nullopt}}).str(),
      "PyTreeDef(CustomNode(OrderedDict[('a', 'b')], [(*, *), None]))");
}

TEST(OrderedDict, DiffersFromADictAndFromAnotherOrder) {
  Array x = sp::zeros({1});
  auto ordered = sp::tree_structure(OrderedDict<Array>{{"a", x}, {"b", x}});
  EXPECT_NE(ordered, sp::tree_structure(std::map<std::string, Array>{{"a", x}, {"b", x}}));
  EXPECT_NE(ordered, sp::tree_structure(OrderedDict<Array>{{"b", x}, {"a", x}}));
  auto [leaves, def] = sp::tree_flatten(OrderedDict<Array>{{"a", x}});
  EXPECT_THROW((sp::tree_unflatten<std::map<std::string, Array>>(def, leaves)), sp::ValueError);
  EXPECT_EQ(def.child_key(0), "['a']");
}

TEST(OrderedDict, JitGradAndTreeMapTakeIt) {
  OrderedDict<Array> params{{"w", sp::full({3}, 2.0f)}, {"b", sp::full({3}, 1.0f)}};
  auto loss = [](const OrderedDict<Array>& p) {
    return sp::sum(p.at("w") * p.at("w") + p.at("b"));
  };
  OrderedDict<Array> g = sp::jit(sp::grad(loss))(params);
  EXPECT_EQ(g.keys(), params.keys());
  EXPECT_EQ(values(g.at("w")), (std::vector<float>{4, 4, 4}));
  EXPECT_EQ(values(g.at("b")), (std::vector<float>{1, 1, 1}));
  OrderedDict<Array> stepped =
      sp::tree_map([](const Array& p, const Array& d) { return p - 0.5f * d; }, params, g);
  EXPECT_EQ(values(stepped.at("w")), (std::vector<float>{0, 0, 0}));
}

TEST(OrderedDict, DevicePutWithOneSharding) {
  sp::Mesh mesh = sp::make_mesh({8}, {"batch"});
  OrderedDict<Array> params{{"w", sp::zeros({8, 4})}, {"b", sp::zeros({4})}};
  auto placed = sp::device_put(params, sp::NamedSharding(mesh, sp::P()));
  EXPECT_TRUE(placed.at("w").is_fully_replicated());
  EXPECT_EQ(placed.at("w").sharding()->device_set().size(), 8u);
  EXPECT_EQ(placed.keys(), params.keys());
}

}  // namespace

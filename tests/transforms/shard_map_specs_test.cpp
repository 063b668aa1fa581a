// in_specs and out_specs written as trees: a spec applies to every leaf below it, a braced list
// has one entry per element, nested as deep as the value. Values, the jaxpr and the structure
// errors are compared with JAX's (tests/goldens/spec_trees, tools/goldens/gen_spec_trees.py).
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <tuple>
#include <utility>
#include <vector>

namespace sp = spmd;
using sp::P;

namespace {

std::string read_golden(const std::string& name) {
  std::ifstream f(std::string(SPMD_GOLDEN_DIR) + "/spec_trees/" + name);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// JAX's message for `name`, with Python's class names written as spmd names them: a spec
// tuple is a braced list here and every value leaf is an Array.
std::string jax_error(const std::string& name) {
  std::istringstream in(read_golden("errors.txt"));
  std::string line, text;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line.rfind("=== ", 0) == 0) {
      if (inside) break;
      inside = line == "=== " + name;
      continue;
    }
    if (inside) text += (text.empty() ? "" : "\n") + line;
  }
  text = text.substr(text.find(": ") + 2);
  for (auto [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"<class 'tuple'>", "tuple"},
           {"<class 'jax._src.shard_map.ShardMapTracer'>", "Array"},
           {"<class 'jaxlib._jax.ArrayImpl'>", "Array"}})
    for (size_t i; (i = text.find(from)) != std::string::npos;) text.replace(i, from.size(), to);
  return "[shard_map] " + text;
}

template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const sp::ValueError& e) {
    return e.what();
  }
  return "(no ValueError)";
}

sp::Mesh mesh() {
  return sp::Mesh(sp::create_device_mesh({4, 2}), {"x", "y"});
}

sp::Array a() {
  return sp::arange(64.0f).reshape({8, 8});
}

using Nested = std::tuple<sp::Array, std::tuple<sp::Array, std::map<std::string, sp::Array>>>;

Nested nested(sp::Array x) {
  return {x,
          {sp::lax::psum(x, "y"), {{"k", sp::lax::psum(x, sp::axes("x", "y"))}, {"j", x * 2.0f}}}};
}

// The map's entries are its keys in sorted order: j, then k.
auto nested_map() {
  return sp::shard_map(nested, mesh(), P("x", "y"), {P("x", "y"), {P("x"), {P("x", "y"), P()}}},
                       {.name = "nested"});
}

TEST(ShardMapSpecTrees, NestedOutSpecsGiveEachLeafItsSpec) {
  auto [x, rest] = nested_map()(a());
  auto [psum_y, by_key] = rest;
  EXPECT_TRUE(sp::array_equal(x, a()));
  // Each device row block summed over its two column blocks; the x blocks stacked.
  std::vector<sp::Array> halves = sp::split(a(), 2, 1);
  EXPECT_TRUE(sp::array_equal(psum_y, halves[0] + halves[1]));
  EXPECT_TRUE(sp::array_equal(by_key.at("j"), a() * 2.0f));
  // The sum of all eight 2x4 blocks, one copy.
  sp::Array blocks = a().reshape({4, 2, 2, 4}).transpose({0, 2, 1, 3});
  EXPECT_TRUE(sp::array_equal(by_key.at("k"), blocks.sum({0, 1})));
  EXPECT_EQ(psum_y.shape(), sp::Shape({8, 4}));
  EXPECT_EQ(by_key.at("k").shape(), sp::Shape({2, 4}));
}

TEST(ShardMapSpecTrees, NestedOutSpecsJaxprAsJax) {
  EXPECT_EQ(sp::make_jaxpr(nested_map())(a()).str() + "\n",
            read_golden("jaxpr_nested_out_specs.txt"));
}

TEST(ShardMapSpecTrees, NestedInSpecsSplitEachLeafByItsSpec) {
  // y is split over x like x; z is replicated, so every device sums all 8 of its rows.
  auto f = sp::shard_map(
      [](sp::Array x, std::pair<sp::Array, sp::Array> yz) {
        return x + yz.first + yz.second.sum({0});
      },
      mesh(), {P("x"), {P("x"), P()}}, P("x"));
  sp::Array z = sp::ones({8, 8}) * 100.0f;
  sp::Array got = f(a(), std::make_pair(a(), z));
  EXPECT_TRUE(sp::array_equal(got, a() * 2.0f + 800.0f));
}

TEST(ShardMapSpecTrees, ReplicationErrorNamesTheNestedSpec) {
  // The first result is varying over y but P('x') claims it is replicated there.
  auto f = sp::shard_map(
      [](sp::Array x) { return std::make_pair(x, std::make_pair(x, sp::lax::psum(x, "y"))); },
      mesh(), P("x", "y"), {P("x", "y"), {P("x"), P("x")}}, {.name = "f"});
  std::string msg;
  try {
    f(a());
  } catch (const sp::ShardingError& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("out_specs[1][0] is P('x',) which implies that the corresponding output "
                     "value is replicated across mesh axis 'y'"),
            std::string::npos)
      << msg;
}

TEST(ShardMapSpecTrees, OutSpecsListTooShortAsJax) {
  auto f = sp::shard_map(nested, mesh(), P("x", "y"), {P("x", "y"), {P("x")}});
  EXPECT_EQ(message_of([&] { f(a()); }), jax_error("out_specs_inner_tuple_too_short"));
}

TEST(ShardMapSpecTrees, OutSpecsListTooLongAsJax) {
  auto f = sp::shard_map(nested, mesh(), P("x", "y"), {P("x", "y"), {P("x"), P(), P()}});
  EXPECT_EQ(message_of([&] { f(a()); }), jax_error("out_specs_inner_tuple_too_long"));
}

TEST(ShardMapSpecTrees, OutSpecsListForOneArrayAsJax) {
  auto f = sp::shard_map([](sp::Array x) { return x; }, mesh(), P("x"), {P("x")});
  EXPECT_EQ(message_of([&] { f(a()); }), jax_error("out_specs_tuple_for_one_array"));
}

TEST(ShardMapSpecTrees, OutSpecsListForAnInnerArrayAsJax) {
  auto f = sp::shard_map([](sp::Array x) { return std::make_pair(x, x); }, mesh(), P("x"),
                         {P("x"), {P(), P()}});
  EXPECT_EQ(message_of([&] { f(a()); }), jax_error("out_specs_tuple_for_inner_array"));
}

auto add3 = [](sp::Array x, std::pair<sp::Array, sp::Array> yz) {
  return x + yz.first + yz.second;
};

TEST(ShardMapSpecTrees, InSpecsListForOneArrayAsJax) {
  auto f = sp::shard_map([](sp::Array x) { return x; }, mesh(), {{P("x")}}, P("x"));
  EXPECT_EQ(message_of([&] { f(a()); }), jax_error("in_specs_tuple_for_one_array"));
}

TEST(ShardMapSpecTrees, MoreInSpecsThanArgumentsAsJax) {
  auto f = sp::shard_map(add3, mesh(), {P("x"), P(), P()}, P("x"));
  EXPECT_EQ(message_of([&] { f(a(), std::make_pair(a(), a())); }), jax_error("in_specs_too_many"));
}

TEST(ShardMapSpecTrees, InnerInSpecsListTooShortAsJax) {
  auto f = sp::shard_map(add3, mesh(), {P("x"), {P()}}, P("x"));
  EXPECT_EQ(message_of([&] { f(a(), std::make_pair(a(), a())); }),
            jax_error("in_specs_inner_tuple_too_short"));
}

}  // namespace

// vmap's spmd_axis_name against JAX 0.10.2 (tools/goldens/gen_spmd_axis_name.py): the batching
// rules of sharding constraints, jit's in/out shardings and shard_map split the batch dim over the
// named mesh axes (one name, a tuple, nested vmaps each with a name), psum over the vmapped
// axis_name still sums the batch, and on an Explicit mesh spmd_axis_name must name the axes
// splitting the mapped dim. Result specs of jit and of the eager run, jaxprs where spmd prints
// the same program, values and JAX's error texts.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "support/golden.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace {

namespace sp = spmd;
using sp::Array;
using sp::None;
using sp::P;

const std::string kGolden = "sharding/spmd_axis_name.txt";

const std::map<std::string, std::string>& blocks() {
  static const auto* b = new std::map<std::string, std::string>(spmd_test::golden_blocks(kGolden));
  return *b;
}

// The lines of a case that start with `word` ("spec", "eager", "type").
std::string golden_lines(const std::string& name, const std::string& word) {
  std::string out;
  for (const std::string& line : spmd_test::split_fields(blocks().at(name), '\n'))
    if (line.rfind(word + " ", 0) == 0) out += line + "\n";
  return out;
}

std::string golden_jaxpr(const std::string& name) {
  const std::string& text = blocks().at(name);
  const size_t at = text.find("{ lambda");
  return at == std::string::npos ? "" : spmd_test::without_numpy_ints(text.substr(at));
}

// Per leaf, "<word> <spec>" as the generator prints a result's sharding.
std::string specs_of(const std::string& word, const std::vector<Array>& leaves) {
  std::string out;
  for (const Array& x : leaves) {
    const auto* named = dynamic_cast<const sp::NamedSharding*>(x.sharding().get());
    out += word + " " +
           (named           ? named->spec().repr()
            : x.committed() ? std::string("committed single")
                            : std::string("uncommitted single")) +
           "\n";
  }
  return out;
}

void expect_values(const std::string& name, const std::vector<Array>& leaves) {
  const auto& values = spmd_test::load_golden("sharding/spmd_axis_name_values.npz");
  for (size_t i = 0; i < leaves.size(); ++i)
    EXPECT_TRUE(
        spmd_test::arrays_close(leaves[i], values.at(name + "/" + std::to_string(i)), 1e-5, 1e-5))
        << name << " leaf " << i;
}

class SpmdAxisName : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sp::device_count() < 8) GTEST_SKIP() << "needs 8 devices";
  }

  sp::Mesh mesh = sp::make_mesh({4, 2}, {"a", "b"});
  sp::Mesh mesh8 = sp::make_mesh({8}, {"x"});
  sp::Mesh emesh =
      sp::make_mesh({4, 2}, {"a", "b"}, {sp::AxisType::Explicit, sp::AxisType::Explicit});
  Array x88 = sp::arange(64.0f).reshape({8, 8});
  Array x848 = sp::arange(256.0f).reshape({8, 4, 8});
  Array x1616 = sp::arange(256.0f).reshape({16, 16});

  static Array put(const sp::Mesh& m, const Array& v, sp::PartitionSpec spec) {
    return sp::device_put(v, sp::NamedSharding(m, std::move(spec)));
  }
  // The constraint of `spec` on `m`, as a function.
  static std::function<Array(const Array&)> c(const sp::Mesh& m, sp::PartitionSpec spec) {
    sp::NamedSharding s(m, std::move(spec));
    return [s](const Array& v) { return sp::with_sharding_constraint(v, s); };
  }
  static sp::VmapOptions named(std::vector<std::string> names) {
    return sp::VmapOptions{.spmd_axis_name = std::move(names)};
  }

  // jit(f)(arg) and f(arg) have JAX's result specs and values; with `jaxpr`, make_jaxpr(f)(arg)
  // prints JAX's text.
  template <class F>
  static void expect_case(const std::string& name, F f, const Array& arg, bool jaxpr = true) {
    ASSERT_TRUE(blocks().count(name)) << "no golden case " << name;
    if (jaxpr) {
      EXPECT_EQ(sp::make_jaxpr(f)(arg).str(), golden_jaxpr(name)) << name;
    }
    std::vector<Array> leaves = sp::tree_flatten(sp::jit(f)(arg)).first;
    EXPECT_EQ(specs_of("spec", leaves), golden_lines(name, "spec")) << name;
    expect_values(name, leaves);
    std::vector<Array> eager = sp::tree_flatten(f(arg)).first;
    EXPECT_EQ(specs_of("eager", eager), golden_lines(name, "eager")) << name;
    expect_values(name, eager);
  }
  static std::string error(const std::string& name) { return spmd_test::jax_error(kGolden, name); }
};

TEST_F(SpmdAxisName, ConstraintSplitsTheBatchDimOverTheName) {
  expect_case("wsc_mesh8", sp::vmap(c(mesh8, P(None)), named({"x"})), x88);
  expect_case("wsc_2d", sp::vmap(c(mesh, P("b")), named({"a"})), x88);
  expect_case("wsc_in_axes_1", sp::vmap(c(mesh, P("b")), {.in_axes = {1}, .spmd_axis_name = {"a"}}),
              x88);
  expect_case("wsc_out_axes_1",
              sp::vmap(c(mesh, P("b")), {.out_axes = {1}, .spmd_axis_name = {"a"}}), x88);
  expect_case("wsc_trailing_none", sp::vmap(c(mesh, P("b", None)), named({"a"})), x848);
  expect_case("wsc_in_axes_2",
              sp::vmap(c(mesh, P(None, "b")), {.in_axes = {2}, .spmd_axis_name = {"a"}}), x848);
  expect_case("wsc_committed_elsewhere", sp::vmap(c(mesh, P(None)), named({"a"})),
              put(mesh, x88, P(None, "a")));
}

TEST_F(SpmdAxisName, TupleAndNestedNames) {
  expect_case("wsc_tuple_name", sp::vmap(c(mesh, P(None)), named({"a", "b"})), x88);
  expect_case("wsc_nested", sp::vmap(sp::vmap(c(mesh, P(None)), named({"b"})), named({"a"})), x848);
  expect_case("wsc_nested_inner_unnamed", sp::vmap(sp::vmap(c(mesh, P(None))), named({"a"})), x848);
}

TEST_F(SpmdAxisName, JitShardingsSplitTheBatchDimOverTheName) {
  auto twice_jit = [&](sp::PartitionSpec spec) {
    sp::NamedSharding s(mesh, std::move(spec));
    return sp::jit([](const Array& v) { return v * 2.0f; },
                   {.name = "<lambda>", .in_shardings = s, .out_shardings = s});
  };
  expect_case("jit_in_out_shardings", sp::vmap(twice_jit(P("b")), named({"a"})), x88);
  expect_case("jit_replicated_shardings", sp::vmap(twice_jit(P()), named({"a"})), x88);
  expect_case("jit_trailing_none", sp::vmap(twice_jit(P("b", None)), named({"a"})), x848);
  expect_case("jit_no_shardings",
              sp::vmap(sp::jit([](const Array& v) { return sp::sin(v); }), named({"a"})), x88,
              false);
}

TEST_F(SpmdAxisName, ShardMapSplitsTheBatchDimOverTheName) {
  expect_case(
      "shard_map",
      sp::vmap(sp::shard_map([](const Array& v) { return v * 2.0f + 1.0f; }, mesh, P("b"), P("b")),
               named({"a"})),
      x88);
  expect_case("shard_map_psum",
              sp::vmap(sp::shard_map([](const Array& v) { return sp::lax::psum(v, "b"); }, mesh,
                                     P("b"), P()),
                       named({"a"})),
              x88);
  // The body sees one row of the batch per device (8 / 8): its shape-dependent sum is per row.
  expect_case(
      "shard_map_in_axes_1",
      sp::vmap(sp::shard_map([](const Array& v) { return v - sp::sum(v); }, mesh8, P(), P()),
               {.in_axes = {1}, .spmd_axis_name = {"x"}}),
      x88);
}

TEST_F(SpmdAxisName, PsumOverTheVmappedAxisNameStillSumsTheBatch) {
  sp::NamedSharding b(mesh, P("b"));
  expect_case("psum_over_axis_name",
              sp::vmap(
                  [b](const Array& v) {
                    return sp::with_sharding_constraint(v - sp::lax::pmean(v, "i"), b);
                  },
                  {.axis_name = "i", .spmd_axis_name = {"a"}}),
              x88, false);
}

TEST_F(SpmdAxisName, SpecsMayNotNameIt) {
  EXPECT_EQ(spmd_test::error_message<sp::ValueError>(
                [&] { sp::vmap(c(mesh, P("a")), named({"a"}))(x88); }),
            "[with_sharding_constraint] " + error("wsc_spec_names_it"));
  EXPECT_EQ(spmd_test::error_message<sp::ValueError>([&] {
              sp::jit(sp::vmap(c(mesh, P(sp::axes("b"))), named({"a", "b"})))(x88);
            }),
            "[with_sharding_constraint] " + error("wsc_spec_names_one_of_tuple"));
  auto id = [](const Array& v) { return v; };
  EXPECT_EQ(spmd_test::error_message<sp::ValueError>(
                [&] { sp::vmap(sp::shard_map(id, mesh, P("a"), P("a")), named({"a"}))(x88); }),
            "[shard_map] " + error("shard_map_in_specs_name_it"));
  EXPECT_EQ(spmd_test::error_message<sp::ValueError>([&] {
              sp::vmap(sp::shard_map(id, mesh, P("b"), P("a"), {.check_vma = false}),
                       named({"a"}))(x88);
            }),
            "[shard_map] " + error("shard_map_out_specs_name_it"));
}

TEST_F(SpmdAxisName, ExplicitMeshAllowsOnlyTheMappedDimsAxes) {
  struct Case {
    std::string name;
    std::function<Array(const Array&)> f;
    std::vector<std::string> spmd;
    Array arg;
  };
  const std::vector<Case> cases = {
      {"explicit_same_axes",
       [](const Array& v) { return sp::sin(v) * 2.0f; },
       {"a"},
       put(emesh, x1616, P("a", "b"))},
      {"explicit_same_tuple",
       [](const Array& v) { return v + 1.0f; },
       {"a", "b"},
       put(emesh, x1616, P(sp::axes("a", "b"), None))},
      {"explicit_unsplit_mapped_dim",
       [](const Array& v) { return v * 3.0f; },
       {"a"},
       put(emesh, x1616, P(None, "b"))},
  };
  for (const Case& k : cases) {
    Array y = sp::vmap(k.f, named(k.spmd))(k.arg);
    EXPECT_EQ("type " + sp::type_of(y).str() + "\n", golden_lines(k.name, "type")) << k.name;
    EXPECT_EQ(specs_of("eager", {y}), golden_lines(k.name, "eager")) << k.name;
    expect_values(k.name, {y});
  }
  auto twice = [](const Array& v) { return v * 2.0f; };
  EXPECT_EQ(spmd_test::error_message<sp::ValueError>(
                [&] { sp::vmap(twice, named({"b"}))(put(emesh, x1616, P("a", None))); }),
            "[vmap] " + error("explicit_other_axes"));
  EXPECT_EQ(spmd_test::error_message<sp::ValueError>([&] {
              sp::vmap(twice, named({"a", "b"}))(put(emesh, x1616, P("a", None)));
            }),
            "[vmap] " + error("explicit_tuple_vs_one"));
}

}  // namespace

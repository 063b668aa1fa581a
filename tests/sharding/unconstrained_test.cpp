// Open dims of sharding constraints (P::UNCONSTRAINED, JAX's PartitionSpec.UNCONSTRAINED) against
// JAX 0.10.2 (tools/goldens/gen_unconstrained.py): jit's result specs, the jaxprs and the values
// of constraints open in several positions on 1-D and 2-D meshes, vmap of a constraint (the
// batch dim is UNCONSTRAINED) with in_axes 0 and 1, under grad and eagerly, and JAX's errors for
// such specs in in_shardings, out_shardings and device_put.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "support/golden.h"

#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace {

namespace sp = spmd;
using sp::Array;
using sp::None;
using sp::P;
constexpr auto U = P::UNCONSTRAINED;

const std::map<std::string, std::string>& blocks() {
  static const auto* b = new std::map<std::string, std::string>(
      spmd_test::golden_blocks("sharding/unconstrained.txt"));
  return *b;
}

// The "spec ..." lines of a case, one per result leaf.
std::string golden_specs(const std::string& name) {
  std::string out;
  for (const std::string& line : spmd_test::split_fields(blocks().at(name), '\n'))
    if (line.rfind("spec ", 0) == 0) out += line + "\n";
  return out;
}

// The jaxpr of a case: the lines after its specs.
std::string golden_jaxpr(const std::string& name) {
  const std::string& text = blocks().at(name);
  const size_t at = text.find("{ lambda");
  return at == std::string::npos ? "" : text.substr(at);
}

std::string specs_of(const std::vector<Array>& leaves) {
  std::string out;
  for (const Array& x : leaves) {
    const auto* named = dynamic_cast<const sp::NamedSharding*>(x.sharding().get());
    out += "spec " + (named ? named->spec().repr() : std::string("(not named)")) + "\n";
  }
  return out;
}

void expect_values(const std::string& name, const std::vector<Array>& leaves) {
  const auto& values = spmd_test::load_golden("sharding/unconstrained_values.npz");
  for (size_t i = 0; i < leaves.size(); ++i)
    EXPECT_TRUE(
        spmd_test::arrays_close(leaves[i], values.at(name + "/" + std::to_string(i)), 1e-6, 1e-6))
        << name << " leaf " << i;
}

class Unconstrained : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sp::device_count() < 8) GTEST_SKIP() << "needs 8 devices";
  }

  sp::Mesh mesh = sp::make_mesh({4, 2}, {"a", "b"});
  sp::Mesh mesh8 = sp::make_mesh({8}, {"x"});
  Array x88 = sp::arange(64.0f).reshape({8, 8});
  Array x164 = sp::arange(64.0f).reshape({16, 4});
  Array x848 = sp::arange(256.0f).reshape({8, 4, 8});
  Array x488 = sp::arange(256.0f).reshape({4, 8, 8});

  static Array put(const sp::Mesh& m, const Array& v, sp::PartitionSpec spec) {
    return sp::device_put(v, sp::NamedSharding(m, std::move(spec)));
  }

  // The constraint of `spec` on `m`, as a function.
  static std::function<Array(const Array&)> c(const sp::Mesh& m, sp::PartitionSpec spec) {
    sp::NamedSharding s(m, std::move(spec));
    return [s](const Array& v) { return sp::with_sharding_constraint(v, s); };
  }

  // jit(f)(arg) has JAX's result spec and values, and make_jaxpr(f)(arg) JAX's text.
  template <class F>
  static void expect_case(const std::string& name, F f, const Array& arg) {
    ASSERT_TRUE(blocks().count(name)) << "no golden case " << name;
    EXPECT_EQ(sp::make_jaxpr(f)(arg).str(), golden_jaxpr(name)) << name;
    std::vector<Array> leaves = sp::tree_flatten(sp::jit(f)(arg)).first;
    EXPECT_EQ(specs_of(leaves), golden_specs(name)) << name;
    expect_values(name, leaves);
  }
};

TEST_F(Unconstrained, SpecPrintsAsJaxPrintsIt) {
  EXPECT_EQ(P(U, "b").repr(), "P(UNCONSTRAINED, 'b')");
  EXPECT_TRUE(P(U, "b").is_unconstrained(0));
  EXPECT_FALSE(P(U, "b").is_unconstrained(1));
  EXPECT_NE(P(U, "b"), P(None, "b"));
  EXPECT_EQ(P(None, "b").axes_of(0), P(U, "b").axes_of(0));
}

TEST_F(Unconstrained, OpenDimsTakeTheSplitPropagationGives) {
  expect_case("first_open", c(mesh, P(U, "b")), put(mesh, x88, P("a", None)));
  expect_case("second_open", c(mesh, P("a", U)), put(mesh, x88, P(None, "b")));
  expect_case("both_open", c(mesh, P(U, U)), put(mesh, x88, P("a", "b")));
  expect_case("open_uncommitted", c(mesh, P(U, "b")), x88);
  expect_case("open_takes_other_axis", c(mesh, P(U, "a")), put(mesh, x88, P("b", None)));
  expect_case("open_axis_used_by_closed_dim", c(mesh, P(U, "a")), put(mesh, x88, P("a", None)));
}

TEST_F(Unconstrained, OpenDimsOnAOneDimensionalMesh) {
  expect_case("mesh8_open_first", c(mesh8, P(U, None)), put(mesh8, x164, P("x")));
  expect_case("mesh8_closed_first_open_second", c(mesh8, P(None, U)),
              put(mesh8, x88, P("x", None)));
  expect_case("mesh8_open_second", c(mesh8, P(None, U)), put(mesh8, x88, P(None, "x")));
}

TEST_F(Unconstrained, OpenDimsBetweenOtherEquations) {
  sp::NamedSharding ub(mesh, P(U, "b"));
  expect_case(
      "open_after_elementwise",
      [ub](const Array& v) { return sp::with_sharding_constraint(sp::sin(v) * 2.0f, ub); },
      put(mesh, x88, P("a")));
  sp::NamedSharding open(mesh, P(U, None)), rows(mesh, P("a", None));
  expect_case(
      "open_from_consumer",
      [open, rows](const Array& v) {
        Array y = sp::with_sharding_constraint(v, open);
        return std::make_tuple(y, sp::with_sharding_constraint(y * 2.0f, rows));
      },
      x88);
  expect_case(
      "open_in_loop",
      [ub](const Array& v) {
        return sp::lax::fori_loop(
            0, 3,
            [ub](const Array&, const Array& carry) {
              return sp::with_sharding_constraint(carry * 2.0f, ub);
            },
            v);
      },
      put(mesh, x88, P("a")));
  expect_case("open_3d_ends", c(mesh, P(U, None, U)), put(mesh, x848, P("a", None, "b")));
  expect_case("open_3d_middle", c(mesh, P(None, U, "b")), put(mesh, x488, P(None, "a", None)));
}

TEST_F(Unconstrained, VmapLeavesTheBatchDimOpen) {
  expect_case("vmap_example", sp::vmap(c(mesh, P("b"))), put(mesh, x88, P("a", None)));
  expect_case("vmap_in_axes_1", sp::vmap(c(mesh, P("b")), {.in_axes = {1}}),
              put(mesh, x88, P(None, "a")));
  expect_case("vmap_replicated_spec", sp::vmap(c(mesh, P())), put(mesh, x88, P("a", "b")));
  expect_case("vmap_of_open", sp::vmap(c(mesh, P(U, "b"))), put(mesh, x488, P("a", None, None)));
  expect_case("vmap_mesh8", sp::vmap(c(mesh8, P(None))), put(mesh8, x88, P("x")));
  expect_case("vmap_in_axes_1_3d", sp::vmap(c(mesh, P("b", None)), {.in_axes = {1}}),
              put(mesh, x848, P(None, None, "a")));
}

TEST_F(Unconstrained, TheVmapExampleMovesNoBytes) {
  const std::string text = sp::jit(sp::vmap(c(mesh, P("b")))).explain(put(mesh, x88, P("a", None)));
  EXPECT_NE(text.find("outputs: P('a', 'b')"), std::string::npos) << text;
  EXPECT_NE(text.find("collectives: none"), std::string::npos) << text;
}

TEST_F(Unconstrained, UnderGrad) {
  sp::NamedSharding ub(mesh, P(U, "b")), b(mesh, P("b"));
  expect_case("grad_open", sp::grad([ub](const Array& v) {
                return sp::sum(sp::sin(sp::with_sharding_constraint(v, ub)));
              }),
              put(mesh, x88, P("a")));
  expect_case("grad_vmap", sp::grad([b](const Array& v) {
                return sp::sum(sp::vmap(
                    [b](const Array& r) { return sp::with_sharding_constraint(r * r, b); })(v));
              }),
              put(mesh, x88, P("a")));
}

TEST_F(Unconstrained, EagerConstraintsKeepTheOperandsSplitInOpenDims) {
  for (const auto& [name, arg] :
       {std::pair<std::string, Array>{"eager_committed", put(mesh, x88, P("a", None))},
        std::pair<std::string, Array>{"eager_uncommitted", x88}}) {
    Array y = sp::with_sharding_constraint(arg, sp::NamedSharding(mesh, P(U, "b")));
    EXPECT_EQ(specs_of({y}) + "committed " + (y.committed() ? "1" : "0"), blocks().at(name))
        << name;
    expect_values(name, {y});
  }
}

TEST_F(Unconstrained, RefusedWhereJaxRefusesThem) {
  sp::NamedSharding ub(mesh, P(U, "b"));
  auto twice = [](const Array& v) { return v * 2.0f; };
  EXPECT_EQ(
      spmd_test::error_message<sp::ValueError>([&] { sp::jit(twice, {.in_shardings = ub})(x88); }),
      "[jit] " + spmd_test::jax_error("sharding/unconstrained.txt", "in_shardings"));
  EXPECT_EQ(
      spmd_test::error_message<sp::ValueError>([&] { sp::jit(twice, {.out_shardings = ub})(x88); }),
      "[jit] " + spmd_test::jax_error("sharding/unconstrained.txt", "out_shardings"));
  const std::string put_error =
      spmd_test::error_message<sp::KeyError>([&] { sp::device_put(x88, ub); });
  EXPECT_EQ(
      put_error.rfind(
          "[device_put] " + spmd_test::jax_error("sharding/unconstrained.txt", "device_put"), 0),
      0u)
      << put_error;
}

TEST_F(Unconstrained, RefusedInShardMapSpecsAndOutShardings) {
  const std::string file = "sharding/unconstrained.txt";
  auto id = [](const Array& v) { return v; };
  EXPECT_EQ(spmd_test::error_message<sp::ValueError>(
                [&] { sp::shard_map(id, mesh, P(U, "b"), P(None, "b"))(x88); }),
            "[shard_map] " + spmd_test::jax_error(file, "shard_map_in_specs"));
  EXPECT_EQ(spmd_test::error_message<sp::ValueError>(
                [&] { sp::shard_map(id, mesh, P("a", "b"), P(U, "b"))(x88); }),
            "[shard_map] " + spmd_test::jax_error(file, "shard_map_out_specs"));
  EXPECT_EQ(spmd_test::error_message<sp::ValueError>([&] {
              sp::shard_map([](const Array& v, const Array&) { return v; }, mesh,
                            sp::SpecTree{P("a"), P(U)}, P("a"))(x88, x88);
            }),
            "[shard_map] " + spmd_test::jax_error(file, "shard_map_tuple_in_specs"));
  const sp::Mesh emesh =
      sp::make_mesh({4, 2}, {"a", "b"}, {sp::AxisType::Explicit, sp::AxisType::Explicit});
  const Array x1616 = sp::arange(256.0f).reshape({16, 16});
  EXPECT_EQ(spmd_test::error_message<sp::ValueError>([&] {
              sp::reshape(put(emesh, x1616, P("a")), {16, 4, 4},
                          sp::NamedSharding(emesh, P("a", U, None)));
            }),
            "[NamedSharding] " + spmd_test::jax_error(file, "explicit_reshape_out_sharding"));
  EXPECT_EQ(spmd_test::error_message<sp::ValueError>([&] {
              auto scope = sp::use_mesh(emesh);
              sp::matmul(put(emesh, x1616, P("a")), put(emesh, x1616, P(None, "b")), P(U, None));
            }),
            "[matmul] " + spmd_test::jax_error(file, "explicit_matmul_out_spec"));
  // JAX fails with a bare KeyError naming it; spmd says why.
  const sp::Mesh xmesh =
      sp::make_mesh({4, 2}, {"a", "b"}, {sp::AxisType::Explicit, sp::AxisType::Auto});
  const std::string mixed = spmd_test::error_message<sp::KeyError>([&] {
    sp::reshape(put(xmesh, x1616, P("a")), {16, 4, 4}, sp::NamedSharding(xmesh, P("a", U, None)));
  });
  EXPECT_EQ(mixed.rfind("[reshape] " + spmd_test::jax_error(file, "mixed_reshape_out_sharding"), 0),
            0u)
      << mixed;
}

}  // namespace

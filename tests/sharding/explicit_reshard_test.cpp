// Explicit mode's reshard primitive against JAX 0.10.2 (goldens tests/goldens/explicit/reshard_*,
// recorded by tools/goldens/gen_explicit_reshard.py; the cases use its names): sp::reshard
// traced is a `reshard` equation, with JAX's jvp, transpose and batching, grad reshards its
// cotangent seed, and a traced *_like of a 0-d value reshards the literal.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "support/golden.h"

namespace {

namespace sp = spmd;
using sp::None;
using sp::P;

constexpr sp::AxisType kE = sp::AxisType::Explicit;

class ExplicitReshardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sp::device_count() < 8) GTEST_SKIP() << "needs 8 devices (SPMD_CPU_DEVICES=8)";
  }
  static std::string block(const std::string& file, const std::string& name) {
    const auto blocks = spmd_test::golden_blocks("explicit/" + file);
    auto it = blocks.find(name);
    return it == blocks.end() ? "(missing golden " + name + ")" : it->second;
  }
  static std::string text(const std::string& name) { return block("reshard_texts.txt", name); }
  // The result's type, spec and values against case `name`.
  static void check(const std::string& name, const sp::Array& v) {
    EXPECT_EQ(sp::type_of(v).str(), block("reshard_types.txt", name)) << name;
    const auto* named = dynamic_cast<const sp::NamedSharding*>(v.sharding().get());
    EXPECT_EQ(named ? named->spec().repr() : v.sharding()->repr(), block("reshard_specs.txt", name))
        << name;
    EXPECT_TRUE(spmd_test::arrays_close(
        sp::device_get(v), spmd_test::load_golden("explicit/reshard_values.npz").at(name)))
        << name;
  }
  sp::Array put(const sp::Array& v, const sp::PartitionSpec& spec) const {
    return sp::device_put(v, sp::NamedSharding(m, spec));
  }

  sp::Mesh m = sp::make_mesh({4, 2}, {"a", "b"}, {kE, kE});
  sp::Array X = sp::arange(256.0f).reshape({16, 16});
};

sp::Array swapped(const sp::Array& v) {
  return sp::reshard(v * 2.0f, P("b", "a"));
}

sp::Array summed_swapped(const sp::Array& v) {
  return sp::sum(sp::sin(sp::reshard(v, P("b", "a"))));
}

TEST_F(ExplicitReshardTest, TracedReshardIsAReshardEquation) {
  // Without a mesh in context (texts.txt, gen_explicit.py).
  auto columns = [&](const sp::Array& v) {
    return sp::reshard(v, sp::NamedSharding(m, P(None, "a")));
  };
  EXPECT_EQ(sp::make_jaxpr(columns)(put(X, P("a"))).str(), block("texts.txt", "jaxpr_reshard"));
  auto scope = sp::use_mesh(m);
  EXPECT_EQ(sp::make_jaxpr(swapped)(put(X, P("a", "b"))).str(), text("reshard_traced"));
  check("jit_reshard", sp::jit(swapped)(put(X, P("a", "b"))));
}

TEST_F(ExplicitReshardTest, JvpTransposeAndBatchingAreJaxs) {
  auto scope = sp::use_mesh(m);
  const sp::Array x = put(X, P("a", "b"));
  EXPECT_EQ(sp::make_jaxpr(sp::grad(summed_swapped))(x).str(), text("grad_through_reshard"));
  check("grad_through_reshard", sp::grad(summed_swapped)(x));
  check("jit_grad_through_reshard", sp::jit(sp::grad(summed_swapped))(x));
  auto jvp_columns = [](const sp::Array& v, const sp::Array& t) {
    auto [out, tangent] =
        sp::jvp([](const sp::Array& u) { return sp::reshard(u, P(None, "a")); }, v, t);
    return std::vector<sp::Array>{out, tangent};
  };
  EXPECT_EQ(sp::make_jaxpr(jvp_columns)(x, x).str(), text("jvp_reshard"));
  auto rows = sp::vmap([](const sp::Array& v) { return sp::reshard(v, P("b")); });
  EXPECT_EQ(sp::make_jaxpr(rows)(put(X, P(None, "a"))).str(), text("vmap_reshard"));
  check("vmap_reshard", sp::jit(rows)(put(X, P(None, "a"))));
}

TEST_F(ExplicitReshardTest, TracedLikesOfScalarsReshardTheLiteral) {
  auto scope = sp::use_mesh(m);
  auto zeros = [](const sp::Array& v) { return sp::zeros_like(sp::sum(v)); };
  auto threes = [](const sp::Array& v) { return sp::full_like(sp::sum(v), sp::Array(3.0f)); };
  EXPECT_EQ(sp::make_jaxpr(zeros)(put(X, P("a", "b"))).str(), text("zeros_like_scalar"));
  EXPECT_EQ(sp::make_jaxpr(threes)(put(X, P("a", None))).str(), text("full_like_scalar"));
  check("jit_zeros_like_scalar", sp::jit(zeros)(put(X, P("a", "b"))));
}

// fori_loop's body is JAX's own, so its message names the carry as JAX's does, with the counter
// first: loop_carry[1][1] is the second leaf of the user's carry.
TEST_F(ExplicitReshardTest, ForiLoopNamesItsCarryAsJax) {
  using Carry = std::tuple<sp::Array, sp::Array>;
  const sp::Array x = put(X, P("a", "b"));
  const std::string what = spmd_test::error_message([&] {
    sp::lax::fori_loop(
        0, 3,
        [&](const sp::Array&, const Carry& c) {
          return Carry{std::get<0>(c) * 2.0f,
                       sp::reshard(std::get<1>(c), sp::NamedSharding(m, P(None, "a")))};
        },
        Carry{x, x});
  });
  EXPECT_EQ(what, "[fori_loop] " +
                      spmd_test::jax_error("explicit/reshard_errors.txt", "fori_tuple_mismatch"));
}

}  // namespace

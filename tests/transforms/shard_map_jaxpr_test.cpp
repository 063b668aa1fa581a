// make_jaxpr of shard_map against JAX 0.10.2's text: the per-device body with its varying
// manual axes ({V:...}), the pvary JAX inserts when operands vary over different axes, and
// psum_invariant (check_vma) or psum (without).
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "support/golden.h"

#include <fstream>
#include <functional>
#include <sstream>

namespace sp = spmd;
using sp::P;

namespace {

std::string seed_golden(const std::string& name) {
  std::ifstream f(std::string(SPMD_GOLDEN_DIR) + "/seeds/" + name);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

sp::Array a() {
  return sp::arange(8 * 16.0f).reshape({8, 16});
}
sp::Array b() {
  return sp::arange(16 * 4.0f).reshape({16, 4});
}

auto matmul_basic(bool check_vma) {
  sp::Mesh mesh(sp::create_device_mesh({4, 2}), {"x", "y"});
  return sp::shard_map(
      [](sp::Array a_block, sp::Array b_block) {
        sp::Array c_partialsum = sp::dot(a_block, b_block);
        return sp::lax::psum(c_partialsum, "y");
      },
      mesh, {P("x", "y"), P("y", sp::None)}, P("x", sp::None),
      {.check_vma = check_vma, .name = "matmul_basic"});
}

TEST(ShardMapJaxpr, MatmulBasicWithVmaTypes) {
  EXPECT_EQ(sp::make_jaxpr(matmul_basic(true))(a(), b()).str(),
            seed_golden("extra_jaxpr_shard_map_matmul_basic.txt"));
}

TEST(ShardMapJaxpr, MatmulBasicWithoutVmaCheck) {
  EXPECT_EQ(sp::make_jaxpr(matmul_basic(false))(a(), b()).str(),
            seed_golden("extra_jaxpr_shard_map_matmul_basic_check_vma_false.txt"));
}

TEST(ShardMapJaxpr, BothGiveTheSameValues) {
  sp::Array want = sp::dot(a(), b());
  EXPECT_TRUE(sp::array_equal(matmul_basic(true)(a(), b()), want));
  EXPECT_TRUE(sp::array_equal(matmul_basic(false)(a(), b()), want));
}

// pmin and pbroadcast bodies on a (2, 2) mesh (tools/goldens/gen_collectives.py): with check_vma
// JAX casts pmin's operand to varying over the reduced axes first and types pmin's result as
// invariant over them; pbroadcast keeps its operand's type.
TEST(ShardMapJaxpr, PminAndPbroadcastMatchJaxWithAndWithoutVmaCheck) {
  struct Case {
    const char* name;
    std::function<sp::Array(const sp::Array&)> body;
    sp::PartitionSpec in_spec, out_spec;
  };
  const std::vector<Case> cases = {
      {"shard_map_pmin_y", [](const sp::Array& v) { return sp::lax::pmin(v, "y"); }, P("x"),
       P("x")},
      {"shard_map_pmin_xy",
       [](const sp::Array& v) { return sp::lax::pmin(v * 2.0f, sp::axes("x", "y")); }, P("x", "y"),
       P()},
      {"shard_map_pbroadcast_x", [](const sp::Array& v) { return sp::lax::pbroadcast(v, "x", 1); },
       P("x", "y"), P("x", "y")},
      {"shard_map_pbroadcast_xy",
       [](const sp::Array& v) { return sp::lax::pbroadcast(v, sp::axes("x", "y"), 3); },
       P("x", "y"), P("x", "y")},
  };
  sp::Mesh mesh(sp::create_device_mesh({2, 2}), {"x", "y"});
  for (const Case& c : cases) {
    for (bool check_vma : {true, false}) {
      std::string file = std::string("jaxpr_") + c.name + (check_vma ? "" : "_check_vma_false");
      SCOPED_TRACE(file);
      auto f = sp::shard_map(c.body, mesh, {c.in_spec}, c.out_spec, {.check_vma = check_vma});
      EXPECT_EQ(sp::make_jaxpr(f)(sp::zeros({4, 2})).str(),
                spmd_test::golden_text("collectives/" + file + ".txt"));
    }
  }
}

TEST(ShardMapJaxpr, ReplicationErrorAsJax) {
  sp::Mesh mesh(sp::create_device_mesh({4, 2}), {"x", "y"});
  auto f = sp::shard_map([](sp::Array blk) { return sp::lax::all_gather(blk, "x"); }, mesh,
                         P("x", "y"), P(sp::None, "y"), {.name = "f"});
  try {
    f(sp::ones({8, 8}));
    FAIL() << "expected the replication error";
  } catch (const sp::ShardingError& e) {
    EXPECT_EQ(std::string(e.what()),
              "[shard_map] shard_map applied to the function 'f' was given out_specs which "
              "require replication which can't be statically inferred given the mesh:\n\n"
              "The mesh given has shape (4, 2) with corresponding axis names ('x', 'y').\n\n"
              "out_specs is P(None, 'y') which implies that the corresponding output value is "
              "replicated across mesh axis 'x', but could not infer replication over any axes\n\n"
              "Check if these output values are meant to be replicated over those mesh axes. "
              "If not, consider revising the corresponding out_specs entries. If so, consider "
              "disabling the check by passing the check_vma=False argument to "
              "`jax.shard_map`.");
  }
  // Without the check the same function runs.
  auto g =
      sp::shard_map([](sp::Array blk) { return sp::lax::all_gather(blk, "x", {.tiled = true}); },
                    mesh, P("x", "y"), P(sp::None, "y"), {.check_vma = false});
  sp::Array x = sp::arange(64.0f).reshape({8, 8});
  EXPECT_TRUE(sp::array_equal(g(x), x));
}

TEST(ShardMapJaxpr, GradThroughPsumWithVmaIsExact) {
  // d/dx sum(psum(x_blk, 'y')) with out_specs P('x', None): each element counts once.
  sp::Mesh mesh(sp::create_device_mesh({4, 2}), {"x", "y"});
  auto loss = [&](sp::Array x) {
    return sp::sum(sp::shard_map([](sp::Array blk) { return sp::lax::psum(blk, "y"); }, mesh,
                                 P("x", "y"), P("x", sp::None))(x));
  };
  sp::Array g = sp::grad(loss)(sp::arange(128.0f).reshape({8, 16}));
  EXPECT_TRUE(sp::array_equal(g, sp::ones({8, 16})));
}

// grad through a shard_map or a sharding constraint on an Auto mesh
// (tools/goldens/gen_shard_map_grad_jaxprs.py): the loss's type carries the mesh, so JAX seeds
// the pullback with `reshard 1.0:f32[]`; with no mesh in the loss's type the seed stays the
// literal.
TEST(ShardMapJaxpr, GradSeedsTheCotangentOnTheLossesMesh) {
  sp::Mesh mesh = sp::make_mesh({8}, {"a"});
  auto negated = sp::shard_map([](const sp::Array& v) { return -v; }, mesh, P("a", sp::None),
                               P("a", sp::None));
  auto summed = sp::shard_map([](const sp::Array& v) { return sp::lax::psum(v, "a"); }, mesh,
                              P("a", sp::None), P());
  const sp::Array x = sp::zeros({8, 8});
  auto golden = [](const std::string& name) {
    return spmd_test::golden_text("shard_map_grad_jaxprs/" + name + ".txt");
  };
  EXPECT_EQ(sp::make_jaxpr(sp::grad([&](const sp::Array& w) { return sp::sum(negated(w)); }))(x)
                .str(),
            golden("grad_neg"));
  EXPECT_EQ(sp::make_jaxpr(sp::grad([&](const sp::Array& w) { return sp::sum(summed(w)); }))(x)
                .str(),
            golden("grad_psum"));
  auto twice = [&](const sp::Array& w) { return sp::sum(negated(w) * 2.0f); };
  EXPECT_EQ(sp::make_jaxpr(sp::value_and_grad(twice))(x).str(),
            golden("value_and_grad_neg_times_two"));
  auto constrained = [&](const sp::Array& w) {
    return sp::sum(sp::with_sharding_constraint(w, sp::NamedSharding(mesh, P("a"))));
  };
  EXPECT_EQ(sp::make_jaxpr(sp::grad(constrained))(x).str(), golden("grad_constraint"));
  // Through a jit call holding the shard_map, JAX keeps the call and its transpose as `jit`
  // equations (named <lambda> there) around the same seed.
  auto jitted = sp::jit(negated, {.name = "<lambda>"});
  EXPECT_EQ(sp::make_jaxpr(sp::grad([&](const sp::Array& w) { return sp::sum(jitted(w)); }))(x)
                .str(),
            golden("grad_jit_neg"));
  // The values, as JAX's: d/dw sum(-w) is -1 everywhere; with check_vma psum transposes to
  // pvary, so d/dw sum(psum(w)) is 1, as is d/dw of the constraint's sum.
  const sp::Array w = sp::arange(64.0f).reshape({8, 8});
  auto neg_loss = [&](const sp::Array& v) { return sp::sum(negated(v)); };
  EXPECT_TRUE(sp::array_equal(sp::grad(neg_loss)(w), -sp::ones({8, 8})));
  auto sum_loss = [&](const sp::Array& v) { return sp::sum(summed(v)); };
  EXPECT_TRUE(sp::array_equal(sp::grad(sum_loss)(w), sp::ones({8, 8})));
  EXPECT_TRUE(sp::array_equal(sp::grad(constrained)(w), sp::ones({8, 8})));
}

// The seed notebook's extra jaxprs of grad through psum and all_gather bodies on a 4 × 2 mesh,
// with and without check_vma (tests/goldens/seeds/MANIFEST.md).
TEST(ShardMapJaxpr, GradThroughPsumAndAllGatherAsTheSeedsExtraJaxprs) {
  sp::Mesh mesh(sp::create_device_mesh({4, 2}), {"x", "y"});
  const sp::Array a = sp::zeros({8, 16});
  for (bool check_vma : {true, false}) {
    const std::string suffix = check_vma ? "" : "_check_vma_false";
    auto psum_loss = [&](const sp::Array& x) {
      return sp::sum(sp::shard_map([](const sp::Array& blk) { return sp::lax::psum(blk, "y"); },
                                   mesh, P("x", "y"), P("x", sp::None),
                                   {.check_vma = check_vma})(x));
    };
    EXPECT_EQ(sp::make_jaxpr(sp::grad(psum_loss))(a).str(),
              seed_golden("extra_jaxpr_grad_shard_map_psum" + suffix + ".txt"));
    auto gather_loss = [&](const sp::Array& x) {
      return sp::sum(sp::shard_map(
          [](const sp::Array& blk) {
            return sp::lax::all_gather(blk, "y", {.axis = 1, .tiled = true});
          },
          mesh, P("x", "y"), check_vma ? P("x", "y") : P("x", sp::None),
          {.check_vma = check_vma})(x));
    };
    EXPECT_EQ(sp::make_jaxpr(sp::grad(gather_loss))(a).str(),
              seed_golden("extra_jaxpr_grad_shard_map_all_gather" + suffix + ".txt"));
  }
}

}  // namespace

namespace {

// JAX's message for `name` in tests/goldens/seeds/extra_errors.txt (its first line is the type).
std::string jax_error(const std::string& name) {
  std::ifstream f(std::string(SPMD_GOLDEN_DIR) + "/seeds/extra_errors.txt");
  std::string line, text;
  bool in = false;
  while (std::getline(f, line)) {
    if (line.rfind("=== ", 0) == 0) {
      if (in) break;
      in = line == "=== " + name;
      continue;
    }
    if (in) text += (text.empty() ? "" : "\n") + line;
  }
  return text.substr(text.find(": ") + 2);
}

template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const sp::Error& e) {
    return e.what();
  }
  return "(no error)";
}

// C++ has no parameter names: JAX's ", where args[0] is bound to f's parameter 'x'," is left out.
std::string without_parameter_clause(std::string s) {
  const std::string clause = ", where args[0] is bound to f's parameter 'x',";
  if (size_t i = s.find(clause); i != std::string::npos) s.erase(i, clause.size());
  return s;
}

TEST(ShardMapErrors, InSpecTooLongAsJax) {
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"x", "y"});
  auto f = sp::shard_map([](sp::Array x) { return x; }, mesh, P("x", "y", sp::None), P("x", "y"),
                         {.name = "f"});
  EXPECT_EQ(message_of([&] {
              f(sp::ones({8, 16}));
            }),
            "[shard_map] " + without_parameter_clause(jax_error("shard_map_in_spec_too_long")));
}

TEST(ShardMapErrors, IndivisibleAsJax) {
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"x", "y"});
  auto f =
      sp::shard_map([](sp::Array x) { return x; }, mesh, P("x", "y"), P("x", "y"), {.name = "f"});
  EXPECT_EQ(message_of([&] {
              f(sp::ones({6, 16}));
            }),
            "[shard_map] " + without_parameter_clause(jax_error("shard_map_indivisible")));
}

TEST(ShardMapErrors, OutSpecsReplicationAsJaxUnderJit) {
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"x", "y"});
  auto f = sp::jit(sp::shard_map([](sp::Array x) { return x; }, mesh, P("x", "y"), P("x", sp::None),
                                 {.name = "f"}));
  EXPECT_EQ(message_of([&] {
              f(sp::ones({8, 16}));
            }),
            "[shard_map] " + jax_error("shard_map_out_specs_replication_jit"));
}

TEST(ShardMapErrors, PpermuteDuplicateDestinationsAsJax) {
  sp::Mesh mesh = sp::make_mesh({4}, {"x"});
  auto f = sp::shard_map(
      [](sp::Array x) {
        return sp::lax::ppermute(x, "x", {{0, 1}, {1, 1}, {2, 3}, {3, 0}});
      },
      mesh, P("x"), P("x"));
  EXPECT_EQ(message_of([&] { f(sp::ones({8})); }),
            "[ppermute] " + jax_error("ppermute_duplicate_destinations"));
}

// JAX types pbroadcast like ppermute but inserts no pvary, so with check_vma its operand must
// already vary over the axes (JAX 0.10.2 names the check's primitive 'ppermute' and asks for an
// issue report; spmd names pbroadcast). Without the check the same body runs.
TEST(ShardMapErrors, PbroadcastOfAnInvariantValueIsRefusedWithCheckVma) {
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"x", "y"});
  auto body = [](sp::Array x) { return sp::lax::pbroadcast(x, "x", 2); };
  auto f = sp::shard_map(body, mesh, P(sp::None, "y"), P(sp::None, "y"));
  EXPECT_EQ(message_of([&] {
              f(sp::ones({8, 4}));
            }),
            "[pbroadcast] Collective pbroadcast must be applied to a device-varying type, but got "
            "frozenset({'y'}) for collective acting over axis name ('x',). To skip the check, "
            "pass `.check_vma = false` to `sp::shard_map`.");
  auto g = sp::shard_map(body, mesh, P(sp::None, "y"), P(sp::None, "y"), {.check_vma = false});
  sp::Array x = sp::arange(32.0f).reshape({8, 4});
  EXPECT_TRUE(sp::array_equal(g(x), x));
}

TEST(ShardMapErrors, UnknownMeshAxisInSpec) {
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"x", "y"});
  auto f = sp::shard_map([](sp::Array x) { return x; }, mesh, P("z"), P("z"));
  EXPECT_THROW(f(sp::ones({8})), sp::ShardingError);
}

TEST(ShardMapErrors, CollectiveOverUnboundAxisIsNameError) {
  sp::Mesh mesh = sp::make_mesh({4}, {"x"});
  auto f = sp::shard_map([](sp::Array x) { return sp::lax::psum(x, "z"); }, mesh, P("x"), P("x"),
                         {.check_vma = false});
  EXPECT_THROW(f(sp::ones({8})), sp::NameError);
}

}  // namespace

// The sharding API around the partitioner against JAX 0.10.2 (goldens from
// tools/goldens/gen_sharding_api.py): with_sharding_constraint's jaxprs under jit, grad, jvp and
// vmap, the shardings eager calls commit to, device_put on trees, copy, reshard, and every error.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "support/golden.h"
#include "support/processes.h"

#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace {

namespace sp = spmd;
using sp::P;

std::string jaxpr_golden(const std::string& name) {
  return spmd_test::golden_blocks("sharding/api_jaxprs.txt").at(name);
}

// One line per leaf: repr(sharding) and committed, as the golden writes them.
std::string shardings_of(const std::vector<sp::Array>& leaves) {
  std::string out;
  for (const sp::Array& x : leaves) {
    if (!out.empty()) out += '\n';
    out += x.sharding()->repr();
    out += x.committed() ? " 1" : " 0";
  }
  return out;
}

class ShardingApiTest : public ::testing::Test {
 protected:
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"x", "y"});
  sp::NamedSharding sx{mesh, P("x")};
  sp::NamedSharding sy{mesh, P(sp::None, "y")};
  sp::NamedSharding rep{mesh, P()};
  sp::SingleDeviceSharding dev1{sp::devices()[1]};
  sp::Array a = sp::arange(16.0f).reshape({8, 2});
  sp::Array v = sp::arange(4.0f);

  sp::Array scaled(const sp::Array& x) const { return sp::with_sharding_constraint(x * 2.0, sx); }
};

TEST_F(ShardingApiTest, JitJaxprMatchesJax) {
  auto f = sp::jit([&](const sp::Array& x) { return scaled(x); }, {.name = "scaled"});
  EXPECT_EQ(sp::make_jaxpr(f)(a).str(), jaxpr_golden("jit"));
}

TEST_F(ShardingApiTest, SingleDeviceShardingJaxprMatchesJax) {
  auto f = [&](const sp::Array& x) { return sp::with_sharding_constraint(x, dev1); };
  EXPECT_EQ(sp::make_jaxpr(f)(a).str(), jaxpr_golden("single"));
}

TEST_F(ShardingApiTest, JvpConstrainsTheTangentAsJax) {
  auto f = [&](const sp::Array& x) {
    return sp::jvp([&](const sp::Array& y) { return scaled(y); }, std::make_tuple(x),
                   std::make_tuple(x));
  };
  EXPECT_EQ(sp::make_jaxpr(f)(a).str(), jaxpr_golden("jvp"));
}

TEST_F(ShardingApiTest, GradConstrainsTheCotangentAsJax) {
  auto loss = [&](const sp::Array& x) { return scaled(x).sum(); };
  // The constraint puts its mesh in the loss's type, so the seed goes through `reshard`.
  const std::string expected = jaxpr_golden("grad");
  EXPECT_EQ(sp::make_jaxpr(sp::grad(loss))(a).str(), expected);
  EXPECT_TRUE(spmd_test::arrays_equal(sp::grad(loss)(a), sp::full({8, 2}, 2.0f)));
}

TEST_F(ShardingApiTest, VmapLeavesTheBatchDimUnconstrainedAsJax) {
  auto f0 = sp::vmap([&](const sp::Array& x) { return scaled(x); });
  EXPECT_EQ(sp::make_jaxpr(f0)(sp::ones({3, 8, 2})).str(), jaxpr_golden("vmap0"));
  auto f1 = sp::vmap([&](const sp::Array& x) { return sp::with_sharding_constraint(x, sy); },
                     {.in_axes = {1}});
  EXPECT_EQ(sp::make_jaxpr(f1)(sp::ones({8, 3, 2})).str(), jaxpr_golden("vmap1"));
  sp::Array batch = sp::arange(48.0f).reshape({3, 8, 2});
  EXPECT_TRUE(spmd_test::arrays_equal(f0(batch), batch * 2.0));
}

TEST_F(ShardingApiTest, CopyJaxprMatchesJax) {
  EXPECT_EQ(sp::make_jaxpr([](const sp::Array& x) { return sp::copy(x); })(a).str(),
            jaxpr_golden("copy"));
}

TEST_F(ShardingApiTest, EagerCallsCommitToJaxsShardings) {
  auto results = spmd_test::golden_blocks("sharding/api_results.txt");
  sp::Array x = sp::with_sharding_constraint(a, sx);
  EXPECT_EQ(shardings_of({x}), results.at("wsc_eager"));
  EXPECT_TRUE(spmd_test::arrays_equal(x, a));
  EXPECT_EQ(shardings_of({sp::with_sharding_constraint(a, dev1)}), results.at("wsc_eager_single"));

  auto tree = std::make_tuple(a, std::make_tuple(a, v));  // {'a': a, 'b': (a, v)} in key order
  auto constrained = sp::with_sharding_constraint(tree, {sy, {sx, rep}});
  EXPECT_EQ(shardings_of(sp::tree_leaves(constrained)), results.at("wsc_tree"));
  EXPECT_TRUE(spmd_test::arrays_equal(std::get<1>(std::get<1>(constrained)), v));

  auto jitted = sp::jit([&](const sp::Array& y) { return scaled(y); })(a);
  EXPECT_TRUE(spmd_test::arrays_equal(jitted, a * 2.0));

  auto put = sp::device_put(tree, {sx, rep});
  EXPECT_EQ(shardings_of(sp::tree_leaves(put)), results.at("device_put_tree"));
  EXPECT_TRUE(spmd_test::arrays_equal(std::get<0>(put), a));

  sp::Array sharded = sp::device_put(a, sx);
  sp::Array same = sp::reshard(sharded, rep);
  EXPECT_EQ(shardings_of({same}), results.at("reshard_no_axes_committed"));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::copy(a), a));
}

// A jit with in_shardings or out_shardings called inside another trace keeps them, as JAX's pjit
// params, and the partitioner honours them as constraints around the call.
TEST_F(ShardingApiTest, NestedJitKeepsItsShardingsAsJax) {
  sp::NamedSharding sxy{mesh, P("x", "y")};
  sp::Array m = sp::arange(64.0f).reshape({8, 8});
  auto inner_in = sp::jit([](const sp::Array& x) { return sp::sin(x) * 2.0; },
                          {.name = "<lambda>", .in_shardings = sxy, .out_shardings = sy});
  auto outer = [&](const sp::Array& x) { return inner_in(x) + 1.0; };
  EXPECT_EQ(sp::make_jaxpr(outer)(m).str(), jaxpr_golden("nested_jit"));
  auto inner_pair =
      sp::jit([](const sp::Array& x, const sp::Array& w) { return std::make_tuple(x * 2.0, w); },
              {.name = "<lambda>", .in_shardings = {sxy, {}}});
  auto pair = [&](const sp::Array& x, const sp::Array& w) { return inner_pair(x, w); };
  EXPECT_EQ(sp::make_jaxpr(pair)(m, v).str(), jaxpr_golden("nested_jit_pair"));
  auto inner_out = sp::jit([](const sp::Array& x) { return x * 2.0; },
                           {.name = "<lambda>", .out_shardings = sxy});
  EXPECT_EQ(sp::make_jaxpr(sp::vmap(inner_out))(sp::ones({3, 8, 8})).str(),
            jaxpr_golden("nested_jit_vmap"));

  auto results = spmd_test::golden_blocks("sharding/api_results.txt");
  sp::Array y = sp::jit(outer)(m);
  EXPECT_EQ(shardings_of({y}), results.at("nested_jit_out_shardings"));
  EXPECT_TRUE(spmd_test::arrays_close(y, sp::sin(m) * 2.0 + 1.0));
  auto in_only = sp::jit([](const sp::Array& x) { return x * 2.0; }, {.in_shardings = sxy});
  sp::Array z = sp::jit([&](const sp::Array& x) { return in_only(x); })(m);
  EXPECT_EQ(shardings_of({z}), results.at("nested_jit_in_shardings_only"));
  EXPECT_TRUE(spmd_test::arrays_equal(z, m * 2.0));
  auto constrained =
      sp::jit([&](const sp::Array& x) { return sp::with_sharding_constraint(x * 2.0, sxy); });
  sp::Array c = sp::jit([&](const sp::Array& x) { return constrained(x); })(m);
  EXPECT_EQ(shardings_of({c}), results.at("nested_jit_constraint"));
  sp::Array g = sp::jit(sp::grad([&](const sp::Array& x) { return inner_in(x).sum(); }))(m);
  EXPECT_EQ(shardings_of({g}), results.at("grad_nested_jit"));
  EXPECT_TRUE(spmd_test::arrays_close(g, sp::cos(m) * 2.0));
  sp::Array batched = sp::vmap(inner_out)(sp::arange(192.0f).reshape({3, 8, 8}));
  EXPECT_TRUE(spmd_test::arrays_equal(batched, sp::arange(192.0f).reshape({3, 8, 8}) * 2.0));
}

// device_put inside jit is staged as JAX stages it (one equation for a tree); on Auto axes it asks
// for the sharding's devices and leaves the layout to propagation, as JAX 0.10.2 does.
TEST_F(ShardingApiTest, DevicePutInsideJitAsJax) {
  sp::NamedSharding sxy{mesh, P("x", "y")};
  sp::Array m = sp::arange(64.0f).reshape({8, 8});
  auto put = [&](const sp::Array& x) { return sp::device_put(x, sxy) * 2.0; };
  EXPECT_EQ(sp::make_jaxpr(put)(m).str(), jaxpr_golden("device_put_in_jit"));
  auto put_tree = [&](const sp::Array& x, const sp::Array& w) {
    return sp::device_put(std::make_tuple(x, w), {sxy, {}});
  };
  EXPECT_EQ(sp::make_jaxpr(put_tree)(m, v).str(), jaxpr_golden("device_put_tree_in_jit"));
  auto put_device = [&](const sp::Array& x) { return sp::device_put(x, sp::devices()[1]); };
  EXPECT_EQ(sp::make_jaxpr(put_device)(m).str(), jaxpr_golden("device_put_device_in_jit"));

  auto results = spmd_test::golden_blocks("sharding/api_results.txt");
  sp::Array y = sp::jit(put)(m);
  EXPECT_EQ(shardings_of({y}), results.at("device_put_in_jit"));
  EXPECT_TRUE(spmd_test::arrays_equal(y, m * 2.0));
  sp::Array d = sp::jit(put_device)(m);
  // Uncommitted: under mpirun, on this process's first device.
  EXPECT_EQ(shardings_of({d}),
            spmd_test::on_default_device(results.at("device_put_device_in_jit")));
  EXPECT_TRUE(spmd_test::arrays_equal(d, m));
  sp::Array g = sp::grad([&](const sp::Array& x) { return put(x).sum(); })(m);
  EXPECT_TRUE(spmd_test::arrays_equal(g, sp::full({8, 8}, 2.0f)));
  sp::Array b = sp::vmap(put_device)(sp::ones({3, 8, 8}));
  EXPECT_TRUE(spmd_test::arrays_equal(b, sp::ones({3, 8, 8})));
  EXPECT_EQ(sp::make_jaxpr(sp::vmap(put_device))(sp::ones({3, 8, 8})).str(),
            jaxpr_golden("device_put_vmap"));

  // On Explicit axes it types its result, and the value is laid out so.
  sp::Mesh explicit_mesh =
      sp::make_mesh({4, 2}, {"x", "y"}, {sp::AxisType::Explicit, sp::AxisType::Explicit});
  sp::NamedSharding exy{explicit_mesh, P("x", "y")};
  auto put_explicit = [&](const sp::Array& x) { return sp::device_put(x, exy) * 2.0; };
  EXPECT_EQ(sp::make_jaxpr(put_explicit)(m).str(), jaxpr_golden("device_put_explicit"));
  sp::Array e = sp::jit(put_explicit)(m);
  EXPECT_EQ(shardings_of({e}), results.at("device_put_explicit"));
  EXPECT_TRUE(spmd_test::arrays_equal(e, m * 2.0));

  // The transpose moves the cotangent back; the seed goes through `reshard` onto the mesh the
  // device_put puts in the loss's type.
  auto loss = [&](const sp::Array& x) { return sp::device_put(x, sxy).sum(); };
  const std::string expected = jaxpr_golden("device_put_grad");
  EXPECT_EQ(sp::make_jaxpr(sp::grad(loss))(m).str(), expected);
}

TEST_F(ShardingApiTest, ConstraintUnderJitMayBeUneven) {
  auto f = sp::jit([&](const sp::Array& x) { return sp::with_sharding_constraint(x, sx); });
  sp::Array u = sp::ones({6, 2});
  EXPECT_TRUE(spmd_test::arrays_equal(f(u), u));
}

std::string jax_error(const std::string& api, const std::string& name) {
  return "[" + api + "] " + spmd_test::jax_error("sharding/api_errors.txt", name);
}

template <class F>
std::string error_of(F&& f) {
  return spmd_test::error_message(std::forward<F>(f));
}

TEST_F(ShardingApiTest, WithShardingConstraintErrorsAreJaxs) {
  const std::string api = "with_sharding_constraint";
  EXPECT_EQ(
      error_of([&] { sp::with_sharding_constraint(v, sp::NamedSharding(mesh, P("x", "y"))); }),
      jax_error(api, "wsc_rank"));
  EXPECT_EQ(error_of([&] { sp::with_sharding_constraint(sp::Array(1.0f), sx); }),
            jax_error(api, "wsc_rank_scalar"));
  EXPECT_EQ(error_of([&] {
              sp::with_sharding_constraint(sp::ones({6, 2}), sx);
            }),
            jax_error(api, "wsc_indivisible_eager"));
  EXPECT_EQ(error_of([&] { sp::with_sharding_constraint(v, P("x")); }),
            jax_error(api, "wsc_spec_without_mesh"));
  auto jitted = sp::jit([](const sp::Array& x) { return sp::with_sharding_constraint(x, P("x")); });
  EXPECT_EQ(error_of([&] { jitted(v); }), jax_error(api, "wsc_spec_without_mesh_jit"));
  EXPECT_EQ(error_of([&] { sp::with_sharding_constraint(v, sp::ShardingTree{}); }),
            jax_error(api, "wsc_none"));
  EXPECT_EQ(error_of([&] {
              sp::with_sharding_constraint(std::make_tuple(v, v), {sx, sx, sx});
            }),
            jax_error(api, "wsc_prefix_too_long"));
  EXPECT_EQ(error_of([&] { sp::with_sharding_constraint(v, {sx}); }),
            jax_error(api, "wsc_prefix_tuple_for_leaf"));
  std::map<std::string, std::tuple<sp::Array, sp::Array>> nested{{"a", {v, v}}, {"b", {v, v}}};
  EXPECT_EQ(error_of([&] {
              sp::with_sharding_constraint(nested, {sx, {rep}});
            }),
            jax_error(api, "wsc_prefix_nested"));
}

TEST_F(ShardingApiTest, DevicePutAndReshardErrorsAreJaxs) {
  EXPECT_EQ(error_of([&] {
              sp::device_put(std::make_tuple(v, v), {sx, sx, sx});
            }),
            jax_error("device_put", "device_put_prefix_too_long"));
  EXPECT_EQ(error_of([&] { sp::device_put(v, sp::ShardingTree{sx}); }),
            jax_error("device_put", "device_put_prefix_tuple_for_leaf"));
  EXPECT_EQ(error_of([&] { sp::device_put(v, P("x")); }),
            jax_error("device_put", "device_put_spec_without_mesh"));
  EXPECT_EQ(error_of([&] { sp::reshard(v, P("x")); }),
            jax_error("reshard", "reshard_spec_without_mesh"));
  EXPECT_EQ(error_of([&] { sp::reshard(v, sx); }), jax_error("reshard", "reshard_auto_axes"));
  EXPECT_EQ(error_of([&] { sp::reshard(v, dev1); }), jax_error("reshard", "reshard_single_device"));
}

}  // namespace

// shard_map and pmap on 8 virtual devices: values against split-apply-concatenate and the JAX
// reference values, placement of the results, and the errors.
#include <spmd/parallel.h>
#include <spmd/placement.h>
#include <spmd/shard_map.h>
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "core/array_impl.h"
#include "support/processes.h"

namespace sp = spmd;
using sp::P;

namespace {

TEST(ShardMap, EightDevicesAreAvailable) {
  EXPECT_EQ(sp::device_count(), 8);
  EXPECT_EQ(sp::repr(sp::devices()[3]), "CpuDevice(id=3)");
}

TEST(ShardMap, ElementwiseBodyMatchesWholeArray) {
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"x", "y"});
  auto f = sp::shard_map([](sp::Array a) { return a * 2 + 1; }, mesh, {P("x", "y")}, P("x", "y"));
  sp::Array x = sp::arange(32.0f).reshape({8, 4});
  sp::Array y = f(x);
  EXPECT_EQ(y.shape(), (sp::Shape{8, 4}));
  EXPECT_TRUE(sp::array_equal(y, x * 2 + 1));
  EXPECT_EQ(spmd_test::shard_ids(y), spmd_test::first_ids_here(8));
  // device 3 is mesh (1, 1): rows 2:4, cols 2:4; device 6 mesh (3, 0): rows 6:8, cols 0:2
  if (auto three = spmd_test::shard_on(y, 3)) {
    EXPECT_EQ(three->data.shape(), (sp::Shape{2, 2}));
    EXPECT_EQ(three->data.to_vector<float>(), (std::vector<float>{21, 23, 29, 31}));
  }
  if (auto six = spmd_test::shard_on(y, 6)) {
    EXPECT_EQ(six->data.to_vector<float>(), (std::vector<float>{49, 51, 57, 59}));
  }
}

TEST(ShardMap, BlockShapesSeenByTheBody) {
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"x", "y"});
  sp::Shape seen;
  auto f = sp::shard_map(
      [&](sp::Array a, sp::Array b) {
        seen = a.shape();
        return sp::dot(a, b);
      },
      mesh, {P("x", "y"), P("y", sp::None)}, P("x", sp::None), {.check_vma = false});
  sp::Array c = f(sp::arange(128.0f).reshape({8, 16}), sp::arange(64.0f).reshape({16, 4}));
  EXPECT_EQ(seen, (sp::Shape{2, 8}));
  EXPECT_EQ(c.shape(), (sp::Shape{8, 4}));
}

TEST(Pmap, SquaresOnSevenDevices) {
  sp::Array y = sp::pmap([](sp::Array x) { return x * x; })(sp::arange(7));
  EXPECT_EQ(y.to_vector<int>(), (std::vector<int>{0, 1, 4, 9, 16, 25, 36}));
  EXPECT_EQ(y.sharding()->num_devices(), 7);
}

TEST(Pmap, MoreInstancesThanDevicesRaises) {
  auto f = sp::pmap([](sp::Array x) { return x; });
  EXPECT_THROW(f(sp::arange(9)), sp::ValueError);
}

TEST(Pmap, ResultsAreUsableArrays) {
  sp::Array y = sp::pmap([](sp::Array x) { return x * x; })(sp::arange(8));
  std::ostringstream os;
  os << y / 2;
  EXPECT_EQ(os.str(), "[ 0.   0.5  2.   4.5  8.  12.5 18.  24.5]");
}

TEST(Pmap, NoDataCrossesDevicesInsideTheBody) {
  sp::Array x = sp::device_put(sp::arange(8.0f * 1024).reshape({8, 1024}),
                               sp::NamedSharding(sp::make_mesh({8}, {"i"}), P("i")));
  sp::runtime::reset_transfer_stats();
  auto f = sp::pmap([](sp::Array b) { return sp::sin(b) * 2; }, {.axis_name = "i"});
  sp::Array y = f(x);
  y.block_until_ready();
  EXPECT_EQ(sp::runtime::transfer_stats().total_bytes(), 0);
}

}  // namespace

namespace {

TEST(Pmap, GradThroughPmapIsElementwiseDerivative) {
  sp::Array x = sp::arange(8.0f) / 4;
  sp::Array g = sp::grad([](sp::Array v) {
    return sp::sum(sp::pmap([](sp::Array e) { return sp::sin(e) * e; })(v));
  })(x);
  sp::Array expected = sp::cos(x) * x + sp::sin(x);
  EXPECT_TRUE(sp::allclose(g, expected, 1e-6, 1e-6)) << g << " vs " << expected;
}

TEST(ShardMap, GradWithReplicatedOperand) {
  // d/dw sum(x · w) over row blocks: the replicated w's cotangent sums over the devices.
  sp::Mesh mesh = sp::make_mesh({4}, {"x"});
  sp::Array x = sp::arange(32.0f).reshape({8, 4});
  sp::Array w = sp::arange(4.0f) + 1;
  auto loss = [&](std::pair<sp::Array, sp::Array> xw) {
    auto f =
        sp::shard_map([](sp::Array a, sp::Array b) { return a * b; }, mesh, {P("x"), P()}, P("x"));
    return sp::sum(f(xw.first, xw.second));
  };
  auto [gx, gw] = sp::grad(loss)(std::make_pair(x, w));
  EXPECT_TRUE(sp::array_equal(gx, sp::broadcast_to(w, {8, 4})));
  EXPECT_TRUE(sp::array_equal(gw, sp::sum(x, {0}))) << gw;
}

TEST(ShardMap, VmapOfShardMapMatchesLoop) {
  sp::Mesh mesh = sp::make_mesh({2}, {"x"});
  auto f = sp::shard_map([](sp::Array a) { return sp::exp(a) * 2; }, mesh, {P("x")}, P("x"));
  sp::Array xs = sp::arange(12.0f).reshape({3, 4}) / 8;
  sp::Array ys = sp::vmap(f)(xs);
  EXPECT_TRUE(sp::allclose(ys, sp::exp(xs) * 2));
}

TEST(ShardMap, JitOfShardMapRunsOnDevices) {
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"x", "y"});
  auto f = sp::jit([&](sp::Array a) {
    return sp::shard_map([](sp::Array b) { return b + 1; }, mesh, {P("x", "y")}, P("x", "y"))(a) *
           3;
  });
  sp::Array x = sp::arange(16.0f).reshape({4, 4});
  EXPECT_TRUE(sp::array_equal(f(x), (x + 1) * 3));
}

}  // namespace

namespace {

TEST(Pmap, CookbookMatricesStayOnTheirDevices) {
  // The Cookbook's random matrices, smaller: only the keys (8 x 2 uint32) go to the devices and
  // only the means (8 float32) come back.
  sp::runtime::reset_transfer_stats();
  sp::Array keys = sp::random::split(sp::random::key(0), 8);
  sp::Array mats = sp::pmap([](sp::Array key) {
    return sp::random::normal(key, {500, 600});
  })(keys);
  sp::Array result = sp::pmap([](sp::Array x) { return sp::dot(x, x.T()); })(mats);
  sp::Array means = sp::pmap([](sp::Array x) { return sp::mean(x); })(result);
  std::vector<float> values = means.to_vector<float>();
  sp::runtime::TransferStats stats = sp::runtime::transfer_stats();
  // Under mpirun, each process sends its own devices' keys and receives the other means.
  const int64_t here = int64_t(spmd_test::first_ids_here(8).size());
  EXPECT_EQ(stats.host_to_device_bytes, here * 2 * 4);
  EXPECT_EQ(stats.between_processes_bytes, (8 - here) * 4);
  EXPECT_EQ(stats.device_to_host_bytes, 8 * 4);
  EXPECT_EQ(stats.device_to_device_bytes, 0);
  // Device k's matrix equals the one made on the host from the same key (under mpirun, for the
  // devices of this process).
  for (int k : {3, 6}) {
    std::optional<sp::Shard> on_k = spmd_test::shard_on(mats, k);
    if (!on_k) continue;
    sp::Array m = sp::random::normal(keys[k], {500, 600});
    EXPECT_TRUE(sp::array_equal(on_k->data[0], m)) << k;
    EXPECT_NEAR(values[size_t(k)], sp::mean(sp::dot(m, m.T())).item<float>(), 1e-4) << k;
  }
}

}  // namespace

namespace {

// A collective only some devices reach (a psum in one branch of a device-dependent cond) must
// raise on every device after the timeout, never hang. The mesh spans every process: under
// mpirun, devices 1 to 3 time out waiting for device 0, and process 1's devices, waiting for
// process 0, learn of that failure or time out themselves.
TEST(ShardMap, MismatchedCollectiveRaisesInsteadOfHanging) {
  setenv("SPMD_COLLECTIVE_TIMEOUT_MS", "300", 1);
  sp::Mesh mesh = sp::make_mesh({8}, {"x"});
  auto f = sp::shard_map(
      [](sp::Array x) {
        return sp::lax::cond(
            sp::lax::axis_index("x") == 0, [](sp::Array v) { return v * 2; },
            [](sp::Array v) { return sp::lax::psum(v, "x"); }, x);
      },
      mesh, P("x"), P("x"), {.check_vma = false});
  sp::Array y = f(sp::arange(16.0f));
  try {
    y.block_until_ready();
    ADD_FAILURE() << "expected a CollectiveError";
  } catch (const sp::CollectiveError& e) {
    std::string what = e.what();
    const std::string want = sp::process_index() == 0
                                 ? "] timed out after 300 ms waiting for devices [0]"
                                 : "timed out after 300 ms";
    EXPECT_NE(what.find(want), std::string::npos) << what;
  }
  unsetenv("SPMD_COLLECTIVE_TIMEOUT_MS");
  // A failure between processes ends the job's collectives; in one process the devices are
  // usable again afterwards.
  if (sp::process_count() > 1) return;
  auto g = sp::shard_map([](sp::Array x) { return sp::lax::psum(x, "x"); }, mesh, P("x"), P("x"),
                         {.check_vma = false});
  EXPECT_EQ(g(sp::arange(8.0f)).to_vector<float>(), std::vector<float>(8, 28));
}

TEST(ShardMap, MismatchedAllGatherRaisesOnEveryWaitingDevice) {
  sp::Mesh mesh = sp::make_mesh({8}, {"x"});
  setenv("SPMD_COLLECTIVE_TIMEOUT_MS", "200", 1);
  auto f = sp::shard_map(
      [](sp::Array x) {
        return sp::lax::cond(
            sp::lax::axis_index("x") == 1,
            [](sp::Array v) { return sp::concatenate(std::vector<sp::Array>(8, v)); },
            [](sp::Array v) { return sp::lax::all_gather(v, "x", {.tiled = true}); }, x);
      },
      mesh, P("x"), P("x"), {.check_vma = false});
  EXPECT_THROW(f(sp::arange(16.0f)).block_until_ready(), sp::CollectiveError);
  unsetenv("SPMD_COLLECTIVE_TIMEOUT_MS");
}

}  // namespace

namespace {

// A large psum or all_gather result is one buffer that every device's shard refers to; later
// work on the devices reads it and never writes over it in place.
TEST(ShardMap, ReplicatedCollectiveResultsShareOneBufferAndStayIntact) {
  sp::Mesh mesh = sp::make_mesh({8}, {"i"});
  const int64_t cols = 20000;  // 80 KB per device: above the size copied on arrival
  sp::Array x = sp::arange(float(8 * cols)).reshape({8, cols}) / 1024.0f;
  auto body = [](sp::Array a) {
    sp::Array s = sp::psum(a, "i");
    sp::Array g = sp::all_gather(a, "i", {.axis = 0, .tiled = true});
    // Elementwise work on the shared results, which could otherwise be written over in place.
    sp::Array t = s * 2.0f + sp::axis_index("i").astype(sp::float32);
    sp::Array u = sp::exp(g) - g;
    return std::make_tuple(s, t, g, u);
  };
  for (bool jitted : {false, true}) {
    auto f = sp::shard_map(body, mesh, {P("i")}, {P(), P("i"), P(), P()}, {.check_vma = false});
    auto [s, t, g, u] = jitted ? sp::jit(f)(x) : f(x);
    sp::Array want_s = sp::sum(x, {0}, /*keepdims=*/true);
    EXPECT_TRUE(sp::array_equal(s, want_s)) << jitted;
    EXPECT_TRUE(sp::array_equal(g, x)) << jitted;
    EXPECT_TRUE(sp::array_equal(u, sp::exp(x) - x)) << jitted;
    EXPECT_TRUE(sp::array_equal(t, sp::concatenate(std::vector<sp::Array>(8, want_s * 2.0f), 0) +
                                       sp::arange(8.0f).reshape({8, 1})))
        << jitted;
    auto s_shards = s.addressable_shards();
    auto g_shards = g.addressable_shards();
    // The devices of a process share one buffer (under mpirun, each process its own).
    ASSERT_EQ(spmd_test::shard_ids(s), spmd_test::first_ids_here(8));
    for (size_t d = 0; d < s_shards.size(); ++d) {
      EXPECT_EQ(s_shards[d].data.impl()->buffer, s_shards[0].data.impl()->buffer) << d;
      EXPECT_EQ(g_shards[d].data.impl()->buffer, g_shards[0].data.impl()->buffer) << d;
    }
  }
}

TEST(JitInAxisEnv, TraceIsNotReusedUnderAnotherAxisSize) {
  auto gather = sp::jit([](sp::Array x) { return sp::lax::all_gather(x, "i"); });
  auto run = [&](int n) {
    return sp::vmap([&](sp::Array x) { return gather(x); },
                    {.axis_name = "i"})(sp::arange(float(n)));
  };
  EXPECT_EQ(run(2).shape(), (sp::Shape{2, 2}));
  EXPECT_EQ(run(4).shape(), (sp::Shape{4, 4}));
  EXPECT_EQ(run(4).to_vector<float>()[5], 1.0f);
}

}  // namespace

namespace {

TEST(ShardMap, NestedShardMapRaisesInsteadOfDeadlocking) {
  // The first and last devices: under mpirun, one in each process, which both raise.
  std::vector<sp::Device> all = sp::devices();
  sp::Mesh outer({all.front(), all.back()}, {2}, {"a"});
  sp::Mesh inner({all[1], all[all.size() - 2]}, {2}, {"b"});
  auto f = sp::shard_map(
      [&](sp::Array x) {
        return sp::shard_map([](sp::Array y) { return y + 1; }, inner, P("b"), P("b"))(x);
      },
      outer, P("a"), P("a"));
  EXPECT_THROW(f(sp::arange(8.0f)).block_until_ready(), sp::NotImplementedError);
}

}  // namespace

namespace {

sp::Array matmul_basic(const sp::Array& a, const sp::Array& b) {
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"x", "y"});
  return sp::shard_map([](sp::Array x, sp::Array y) { return sp::psum(sp::dot(x, y), "y"); }, mesh,
                       {P("x", "y"), P("y", sp::None)}, P("x", sp::None))(a, b);
}

TEST(ShardMapComposition, VmapOfMatmulBasicMatchesLoop) {
  sp::Array as = sp::random::normal(sp::random::key(3), {3, 8, 16});
  sp::Array b = sp::random::normal(sp::random::key(4), {16, 4});
  sp::Array got = sp::vmap([&](sp::Array a) { return matmul_basic(a, b); })(as);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(sp::allclose(got[i], sp::dot(as[i], b), 1e-5, 1e-5)) << i;
}

TEST(ShardMapComposition, JitGradAndGradGradOfMatmulBasic) {
  sp::Array a = sp::random::normal(sp::random::key(5), {8, 16});
  sp::Array b = sp::random::normal(sp::random::key(6), {16, 4});
  auto loss = [&](sp::Array x) { return sp::sum(sp::sin(matmul_basic(x, b))); };
  sp::Array want = sp::dot(sp::cos(sp::dot(a, b)), b.T());
  EXPECT_TRUE(sp::allclose(sp::grad(loss)(a), want, 1e-4, 1e-5));
  EXPECT_TRUE(sp::allclose(sp::jit(sp::grad(loss))(a), want, 1e-4, 1e-5));
  // Second order along a direction: d/dt grad(loss)(a + t v) at 0, against finite differences.
  sp::Array v = sp::random::normal(sp::random::key(7), {8, 16});
  auto [g0, dg] = sp::jvp([&](sp::Array x) { return sp::grad(loss)(x); }, a, v);
  float eps = 1e-2f;
  sp::Array fd = (sp::grad(loss)(a + v * eps) - sp::grad(loss)(a - v * eps)) / (2 * eps);
  EXPECT_TRUE(sp::allclose(dg, fd, 2e-2, 2e-2));
}

}  // namespace

// Computation follows sharding, against JAX 0.10.2: eager ops and jit on committed arrays run on
// the arrays' devices and return committed results with the sharding JAX gives them (goldens from
// tools/goldens/gen_partitioning.py), with the values of the same computation on uncommitted
// arrays; ops whose operands are already laid out as the result needs move no byte; committed
// arrays on different devices, and in_shardings that contradict a committed argument, raise
// JAX's errors (goldens in partitioning/errors.txt and propagation/errors.txt).
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "support/golden.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace {

namespace sp = spmd;
namespace lax = sp::lax;
using sp::Array;
using sp::P;
using spmd_test::arrays_close;
using spmd_test::arrays_close_ulp;
using spmd_test::arrays_equal;

// JAX's result lines for a case: "<repr(sharding)> <committed> <device ids>" per leaf.
std::string jax_placed(const std::string& name) {
  static const auto* blocks =
      new std::map<std::string, std::string>(spmd_test::golden_blocks("partitioning/results.txt"));
  auto it = blocks->find(name);
  if (it == blocks->end()) ADD_FAILURE() << "no golden case " << name;
  return it == blocks->end() ? "" : it->second;
}

std::string ids_text(const std::vector<sp::Device>& devices) {
  std::string s = "[";
  for (size_t i = 0; i < devices.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(devices[i].id);
  }
  return s + "]";
}

// The same lines for spmd's result leaves.
template <class T>
std::string placed(const T& tree) {
  std::string out;
  for (const Array& x : sp::tree_flatten(tree).first) {
    if (!out.empty()) out += '\n';
    out += x.sharding()->repr() + (x.committed() ? " 1 " : " 0 ") +
           ids_text(x.sharding()->device_list());
  }
  return out;
}

// JAX's line for an uncommitted value, which lives on the process's first device (device 0 when
// there is one process).
std::string on_first_local_device(const std::string& line) {
  const std::string id = std::to_string(sp::local_devices().front().id);
  std::string out = line;
  out.replace(out.find("id=0)"), 5, "id=" + id + ")");
  out.replace(out.rfind("[0]"), 3, "[" + id + "]");
  return out;
}

// The error `f` raises as a ValueError. spmd starts its own messages with the API in brackets;
// a JAX text it reuses may come with one, so `api`'s prefix is taken off before comparing.
template <class F>
std::string value_error(F&& f, const std::string& api) {
  std::string message = spmd_test::error_message<sp::ValueError>(f);
  const std::string prefix = "[" + api + "] ";
  return message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message;
}

std::string jax_error(const std::string& file, const std::string& name) {
  return spmd_test::jax_error(file, name);
}

// What `f` returns, and the bytes the runtime copied while computing it.
struct Counted {
  Array result;
  int64_t bytes = 0;
};

Counted counted(const std::function<Array()>& f) {
  sp::runtime::reset_transfer_stats();
  Array r = f();
  r.block_until_ready();
  int64_t bytes = sp::runtime::transfer_stats().total_bytes();
  return {r, bytes};
}

class PartitioningTest : public ::testing::Test {
 protected:
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"a", "b"});
  Array x = sp::arange(64.0f).reshape({8, 8});
  Array xab = put(x, P("a", "b"));
  Array x_a = put(x, P("a", sp::None));
  Array x_b = put(x, P(sp::None, "b"));
  Array on3 = sp::device_put(x, sp::devices()[3]);

  void SetUp() override {
    for (const Array& a : {xab, x_a, x_b, on3}) a.block_until_ready();
  }

  sp::NamedSharding S(sp::PartitionSpec spec) const { return sp::NamedSharding(mesh, spec); }
  Array put(const Array& v, sp::PartitionSpec spec) const { return sp::device_put(v, S(spec)); }
};

// ---- eager ops -------------------------------------------------------------------------------

TEST_F(PartitioningTest, SinFollowsTheShardingAndMovesNoByte) {
  Counted r = counted([&] { return sp::sin(xab); });
  EXPECT_EQ(r.bytes, 0);
  EXPECT_EQ(placed(r.result), jax_placed("eager_sin"));
  EXPECT_TRUE(arrays_close_ulp(r.result, sp::sin(x), 1));
}

TEST_F(PartitioningTest, ElementwiseOpsFollowTheShardingAndMoveNoByte) {
  Array neg = -xab;
  neg.block_until_ready();
  struct Case {
    std::string name;
    std::function<Array()> partitioned;
    Array expected;
  };
  const std::vector<Case> cases = {
      {"eager_exp", [&] { return sp::exp(neg); }, sp::exp(-x)},
      {"eager_negative", [&] { return -xab; }, -x},
      {"eager_multiply", [&] { return xab * xab; }, x * x},
      {"eager_maximum", [&] { return sp::maximum(xab, neg); }, sp::maximum(x, -x)},
      {"eager_subtract", [&] { return xab - neg; }, x - (-x)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Counted r = counted(c.partitioned);
    EXPECT_EQ(r.bytes, 0);
    EXPECT_EQ(placed(r.result), jax_placed(c.name));
    EXPECT_TRUE(arrays_close_ulp(r.result, c.expected, 1));
  }
}

TEST_F(PartitioningTest, TransposeSwapsTheSpecAndMovesNoByte) {
  Counted r = counted([&] { return xab.T(); });
  EXPECT_EQ(r.bytes, 0);
  EXPECT_EQ(placed(r.result), jax_placed("eager_transpose"));
  EXPECT_TRUE(arrays_equal(r.result, x.T()));
}

// Summing over the dim split on 'a' needs every 'a' block: the devices combine partial sums.
TEST_F(PartitioningTest, SumOverASplitDimKeepsTheOtherSplit) {
  Array s0 = xab.sum({0});
  EXPECT_EQ(placed(s0), jax_placed("eager_sum0"));
  EXPECT_TRUE(arrays_equal(s0, x.sum({0})));
  Array s1 = xab.sum({1});
  EXPECT_EQ(placed(s1), jax_placed("eager_sum1"));
  EXPECT_TRUE(arrays_equal(s1, x.sum({1})));
}

TEST_F(PartitioningTest, MatmulOfRowAndColumnSplitsIsSplitBothWaysAndMovesNoByte) {
  Counted r = counted([&] { return sp::matmul(x_a, x_b); });
  EXPECT_EQ(r.bytes, 0);
  EXPECT_EQ(placed(r.result), jax_placed("eager_matmul"));
  EXPECT_TRUE(arrays_equal(r.result, sp::matmul(x, x)));
}

TEST_F(PartitioningTest, MatmulOverASplitContractingDimIsReplicated) {
  Array r = sp::matmul(put(x, P(sp::None, "a")), put(x, P("a", sp::None)));
  EXPECT_EQ(placed(r), jax_placed("eager_matmul_contracting"));
  EXPECT_TRUE(arrays_equal(r, sp::matmul(x, x)));
}

TEST_F(PartitioningTest, ConflictingSplitsOfOneFactorLeaveItUnsplit) {
  Array r = sp::maximum(xab, xab.T());
  EXPECT_EQ(placed(r), jax_placed("eager_maximum_transposed"));
  EXPECT_TRUE(arrays_equal(r, sp::maximum(x, x.T())));
}

// x lives on the default device only, so its blocks have to move: the counters that show the
// other ops moving nothing do count.
TEST_F(PartitioningTest, UncommittedOperandsTakeTheCommittedSharding) {
  Counted sum = counted([&] { return xab + x; });
  EXPECT_GT(sum.bytes, 0);
  EXPECT_EQ(placed(sum.result), jax_placed("eager_committed_plus_uncommitted"));
  EXPECT_TRUE(arrays_equal(sum.result, x + x));
  Array product = x * xab;
  EXPECT_EQ(placed(product), jax_placed("eager_uncommitted_times_committed"));
  EXPECT_TRUE(arrays_equal(product, x * x));
}

TEST_F(PartitioningTest, UncommittedOperandsMoveToTheCommittedDevices) {
  std::vector<sp::Device> devices = sp::devices();
  sp::Mesh upper({devices[4], devices[5], devices[6], devices[7]}, {4}, {"x"});
  Array r = sp::device_put(x, sp::NamedSharding(upper, P("x"))) + x;
  EXPECT_EQ(placed(r), jax_placed("eager_uncommitted_moves_to_devices_4_7"));
  EXPECT_TRUE(arrays_equal(r, x + x));
}

TEST_F(PartitioningTest, AClosedOverArrayIsLaidOutOnceAndNotMovedAgain) {
  const Array scale = sp::arange(64.0f).reshape({8, 8}) + 1.0f;  // uncommitted
  auto scaled = sp::jit([&scale](const Array& v) { return v * scale; });
  Counted first = counted([&] { return scaled(xab); });
  // Its blocks, to the devices of this process that hold them.
  EXPECT_EQ(first.bytes, scale.nbytes() * sp::local_device_count() / sp::device_count());
  EXPECT_TRUE(arrays_equal(first.result, x * (x + 1.0f)));
  for (int call = 0; call < 2; ++call) {
    Counted again = counted([&] { return scaled(xab); });
    EXPECT_EQ(again.bytes, 0) << "call " << call + 2;
    EXPECT_TRUE(arrays_equal(again.result, x * (x + 1.0f)));
  }
  // Arguments placed otherwise compile again, with the constant laid out for that program.
  Counted other = counted([&] { return scaled(x_a); });
  EXPECT_TRUE(arrays_equal(other.result, x * (x + 1.0f)));
  EXPECT_EQ(counted([&] { return scaled(x_a); }).bytes, 0);
  EXPECT_EQ(counted([&] { return scaled(xab); }).bytes, 0);
}

TEST_F(PartitioningTest, UncommittedOperandsGiveAnUncommittedResult) {
  EXPECT_EQ(placed(sp::sin(x)), on_first_local_device(jax_placed("eager_uncommitted")));
}

TEST_F(PartitioningTest, AnArrayCommittedToOneDeviceIsComputedThere) {
  Counted r = counted([&] { return sp::sin(on3); });
  EXPECT_EQ(r.bytes, 0);
  EXPECT_EQ(placed(r.result), jax_placed("eager_single_device"));
  // On several processes, the others hold no block of it.
  if (sp::is_addressable(sp::devices()[3])) {
    EXPECT_EQ(r.result.addressable_shards().at(0).device.id, 3);
  }
  EXPECT_TRUE(arrays_close_ulp(r.result, sp::sin(x), 1));
  Array sum = on3 + x;
  EXPECT_EQ(placed(sum), jax_placed("eager_single_device_plus_uncommitted"));
  EXPECT_TRUE(arrays_equal(sum, x + x));
}

// ---- committed arrays on different devices ---------------------------------------------------

class DeviceMismatchTest : public ::testing::Test {
 protected:
  // JAX's X: float32[16,16].
  Array X = sp::arange(256.0f).reshape({16, 16});
  std::vector<sp::Device> devices = sp::devices();

  // X split along dim 0 over a one-axis mesh of these devices.
  Array put_on(const std::vector<int>& ids) const {
    std::vector<sp::Device> ds;
    for (int i : ids) ds.push_back(devices[size_t(i)]);
    sp::Mesh m(ds, {int64_t(ds.size())}, {"x"});
    return sp::device_put(X, sp::NamedSharding(m, P("x")));
  }
};

TEST_F(DeviceMismatchTest, DisjointDeviceSetsRaiseJaxError) {
  Array y = put_on({0, 1, 2, 3}), z = put_on({4, 5, 6, 7});
  EXPECT_EQ(value_error([&] { return y + z; }, "add"),
            jax_error("propagation/errors.txt", "add_disjoint_device_sets"));
}

TEST_F(DeviceMismatchTest, APermutedDeviceOrderRaisesJaxError) {
  Array y = put_on({0, 1, 2, 3, 4, 5, 6, 7}), z = put_on({0, 1, 2, 3, 6, 7, 4, 5});
  EXPECT_EQ(value_error([&] { return y + z; }, "add"),
            jax_error("propagation/errors.txt", "add_permuted_device_order"));
}

TEST_F(DeviceMismatchTest, OneDeviceAndAMeshRaiseJaxError) {
  Array y = sp::device_put(X, devices[3]), z = put_on({0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_EQ(value_error([&] { return y + z; }, "add"),
            jax_error("propagation/errors.txt", "add_single_device_and_sharded"));
}

TEST_F(DeviceMismatchTest, AnEagerResultKeepsItsOperandsDevices) {
  Array y = sp::sin(put_on({0, 1, 2, 3})), z = sp::device_put(X, devices[5]);
  EXPECT_EQ(value_error([&] { return y + z; }, "add"),
            jax_error("partitioning/errors.txt", "sin_then_add_single_device"));
}

TEST_F(DeviceMismatchTest, JitArgumentsOnDifferentDevicesRaiseJaxError) {
  auto f = sp::jit([](const Array& a, const Array& b) { return a + b; }, {.name = "f"});
  Array y = put_on({0, 1, 2, 3}), z = put_on({4, 5, 6, 7});
  EXPECT_EQ(value_error([&] { return f(y, z); }, "f"),
            jax_error("partitioning/errors.txt", "jit_args_disjoint_device_sets"));
  Array all = put_on({0, 1, 2, 3, 4, 5, 6, 7}), permuted = put_on({0, 1, 2, 3, 6, 7, 4, 5});
  EXPECT_EQ(value_error([&] { return f(all, permuted); }, "f"),
            jax_error("partitioning/errors.txt", "jit_args_permuted_device_order"));
}

TEST_F(DeviceMismatchTest, UncommittedArraysMoveFreely) {
  Array y = put_on({0, 1, 2, 3}), z = sp::device_get(put_on({4, 5, 6, 7}));
  EXPECT_FALSE(z.committed());
  Array r = y + z;
  EXPECT_EQ(ids_text(r.sharding()->device_list()), "[0, 1, 2, 3]");
  EXPECT_TRUE(arrays_equal(r, X + X));
}

// jit(jnp.sin, in_shardings=P('x') over some devices)(X committed elsewhere), as
// propagation/errors.txt runs it. JAX compares the two shardings without their devices.
class InShardingsConflictTest : public DeviceMismatchTest {
 protected:
  const std::vector<int> all = {0, 1, 2, 3, 4, 5, 6, 7}, lower = {0, 1, 2, 3}, upper = {4, 5, 6, 7};

  sp::Mesh mesh_of(const std::vector<int>& ids) const {
    std::vector<sp::Device> ds;
    for (int i : ids) ds.push_back(devices[size_t(i)]);
    return sp::Mesh(ds, {int64_t(ds.size())}, {"x"});
  }
  Array put(const std::vector<int>& ids, sp::PartitionSpec spec) const {
    return sp::device_put(X, sp::NamedSharding(mesh_of(ids), spec));
  }
  // The error of jit_sin(in_shardings on `jit_ids`)(arg).
  std::string error(const std::vector<int>& jit_ids, const Array& arg) const {
    auto f = sp::jit([](const Array& a) { return sp::sin(a); },
                     {.in_shardings = sp::NamedSharding(mesh_of(jit_ids), P("x"))});
    return value_error([&] { return f(arg); }, "jit");
  }
  static std::string jax(const std::string& name) {
    return jax_error("propagation/errors.txt", name);
  }
};

TEST_F(InShardingsConflictTest, OtherSpecOnTheSameMeshRaisesJaxError) {
  EXPECT_EQ(error(all, put(all, P(sp::None, "x"))), jax("jit_in_shardings_conflict"));
}

TEST_F(InShardingsConflictTest, OtherSpecOnOtherDevicesRaisesJaxError) {
  EXPECT_EQ(error(upper, put(lower, P(sp::None, "x"))), jax("jit_in_shardings_other_devices"));
}

TEST_F(InShardingsConflictTest, OtherDeviceCountRaisesJaxError) {
  EXPECT_EQ(error(all, put(lower, P("x"))), jax("jit_in_shardings_other_device_count"));
}

// The same spec over as many other devices is no conflict for JAX: the argument moves to
// in_shardings' devices.
TEST_F(InShardingsConflictTest, SameSpecOnOtherDevicesMovesTheArgument) {
  auto f = sp::jit([](const Array& a) { return sp::sin(a); },
                   {.in_shardings = sp::NamedSharding(mesh_of(upper), P("x"))});
  Array r = f(put(lower, P("x")));
  EXPECT_EQ(ids_text(r.sharding()->device_list()), "[4, 5, 6, 7]");
  EXPECT_EQ(r.sharding()->repr(),
            "NamedSharding(mesh=Mesh('x': 4, axis_types=(Auto,)), spec=P('x',), "
            "memory_kind=device)");
  EXPECT_TRUE(arrays_close_ulp(r, sp::sin(X), 1));
}

// ---- jit -------------------------------------------------------------------------------------

TEST_F(PartitioningTest, JitOfCommittedArgumentsIsPartitioned) {
  auto f = sp::jit(
      [](const Array& u, const Array& v) { return std::make_pair(sp::sin(u) * v, u.sum({0})); });
  auto [prod, sum] = f(xab, xab);
  EXPECT_EQ(placed(std::make_pair(prod, sum)), jax_placed("jit_committed"));
  EXPECT_TRUE(arrays_close_ulp(prod, sp::sin(x) * x, 1));
  EXPECT_TRUE(arrays_equal(sum, x.sum({0})));
}

TEST_F(PartitioningTest, JitOfUncommittedArgumentsIsUncommitted) {
  Array r = sp::jit([](const Array& u) { return u * 2; })(x);
  EXPECT_EQ(placed(r), on_first_local_device(jax_placed("jit_uncommitted")));
  EXPECT_TRUE(arrays_equal(r, x * 2));
}

TEST_F(PartitioningTest, JitOfAnArrayOnOneDeviceRunsThere) {
  Array r = sp::jit([](const Array& u, const Array& v) { return u * v; })(on3, x);
  EXPECT_EQ(placed(r), jax_placed("jit_single_device"));
  EXPECT_TRUE(arrays_equal(r, x * x));
}

TEST_F(PartitioningTest, InShardingsPlaceUncommittedArguments) {
  Array r = sp::jit([](const Array& u) { return u * 2; }, {.in_shardings = S(P("a"))})(x);
  EXPECT_EQ(placed(r), jax_placed("jit_in_shardings"));
  EXPECT_TRUE(arrays_equal(r, x * 2));
  // A prefix with an unspecified entry: that argument is left to propagation.
  auto g = sp::jit([](const Array& u, const Array& v) { return std::make_pair(u * 2, v + 1); },
                   {.in_shardings = {S(P("a")), {}}});
  auto [doubled, incremented] = g(x, x);
  EXPECT_EQ(placed(std::make_pair(doubled, incremented)), jax_placed("jit_in_shardings_prefix"));
  EXPECT_TRUE(arrays_equal(doubled, x * 2));
  EXPECT_TRUE(arrays_equal(incremented, x + 1));
}

TEST_F(PartitioningTest, OneOutShardingCoversEveryOutput) {
  auto f = sp::jit([](const Array& u) { return std::make_pair(u * 2, u.sum({0})); },
                   {.out_shardings = S(P())});
  auto [doubled, sum] = f(xab);
  EXPECT_EQ(placed(std::make_pair(doubled, sum)), jax_placed("jit_out_shardings_one"));
  EXPECT_TRUE(arrays_equal(doubled, x * 2));
  EXPECT_TRUE(arrays_equal(sum, x.sum({0})));
}

TEST_F(PartitioningTest, OutShardingsAsATreePrefix) {
  auto f = sp::jit(
      [](const Array& u) { return std::make_pair(u * 2, std::make_pair(u + 1, u.sum({0}))); },
      {.out_shardings = {S(P("b", "a")), S(P())}});
  auto r = f(xab);
  EXPECT_EQ(placed(r), jax_placed("jit_out_shardings_prefix"));
  EXPECT_TRUE(arrays_equal(r.first, x * 2));
  EXPECT_TRUE(arrays_equal(r.second.first, x + 1));
  EXPECT_TRUE(arrays_equal(r.second.second, x.sum({0})));
}

TEST_F(PartitioningTest, OutShardingsPlaceTheResultOfUncommittedArguments) {
  Array r = sp::jit([](const Array& u) { return u * 2; }, {.out_shardings = S(P("a", "b"))})(x);
  EXPECT_EQ(placed(r), jax_placed("jit_out_shardings_uncommitted"));
  EXPECT_TRUE(arrays_equal(r, x * 2));
}

// The seed's cells: f(x) = x + 1 constrained to P('y', 'x') or P() on a 4 x 2 mesh ('x', 'y').
TEST_F(PartitioningTest, WithShardingConstraintInsideJitSetsTheSharding) {
  sp::Mesh mesh_xy = sp::make_mesh({4, 2}, {"x", "y"});
  auto constrained = [&](sp::PartitionSpec spec) {
    return sp::jit([mesh_xy, spec](const Array& u) {
      return sp::with_sharding_constraint(u + 1, sp::NamedSharding(mesh_xy, spec));
    });
  };
  Array yx = constrained(P("y", "x"))(x);
  EXPECT_EQ(placed(yx), jax_placed("wsc_seed_yx"));
  EXPECT_TRUE(arrays_equal(yx, x + 1));
  Array replicated = constrained(P())(x);
  EXPECT_EQ(placed(replicated), jax_placed("wsc_seed_replicated"));
  EXPECT_TRUE(replicated.is_fully_replicated());
  EXPECT_TRUE(arrays_equal(replicated, x + 1));
  Array from_committed =
      constrained(P("y", "x"))(sp::device_put(x, sp::NamedSharding(mesh_xy, P("x", "y"))));
  EXPECT_EQ(placed(from_committed), jax_placed("wsc_committed_yx"));
  EXPECT_TRUE(arrays_equal(from_committed, x + 1));
}

// shard_map's specs are boundaries: its inputs are laid out by in_specs, its result by out_specs.
TEST_F(PartitioningTest, ShardMapInsideJitOnCommittedArguments) {
  auto block_sum = sp::shard_map([](const Array& blk) { return sp::psum(blk.sum({0}, true), "a"); },
                                 mesh, {P("a", "b")}, P(sp::None, "b"));
  Array column_sums = x.sum({0}, true);
  Array r = sp::jit(block_sum)(xab);
  EXPECT_EQ(placed(r), jax_placed("shard_map_in_jit"));
  EXPECT_TRUE(arrays_equal(r, column_sums));
  Array scaled = sp::jit([&](const Array& u) { return block_sum(u) * 2; })(x_a);
  EXPECT_EQ(placed(scaled), jax_placed("shard_map_in_jit_then_scale"));
  EXPECT_TRUE(arrays_equal(scaled, column_sums * 2));
}

// Batch split over 'batch', parameters replicated: the weight gradient sums every device's
// contribution and comes out replicated.
TEST_F(PartitioningTest, GradOfADataParallelLossIsReplicated) {
  sp::Mesh batch_mesh(sp::devices(), {8}, {"batch"});
  Array w = sp::arange(32.0f).reshape({8, 4}) / 64;
  auto loss = [](const Array& w, const Array& xb) {
    return sp::sum(sp::square(sp::tanh(sp::matmul(xb, w))));
  };
  Array expected = sp::grad(loss)(w, x);
  Array w_rep = sp::device_put(w, sp::NamedSharding(batch_mesh, P()));
  Array x_batch = sp::device_put(x, sp::NamedSharding(batch_mesh, P("batch")));
  Array g = sp::jit(sp::grad(loss))(w_rep, x_batch);
  EXPECT_EQ(placed(g), jax_placed("grad_data_parallel"));
  EXPECT_TRUE(arrays_close(g, expected, 1e-5, 1e-6));
  Array eager = sp::grad(loss)(w_rep, x_batch);
  EXPECT_EQ(placed(eager), jax_placed("grad_data_parallel_eager"));
  EXPECT_TRUE(arrays_close(eager, expected, 1e-5, 1e-6));
}

TEST_F(PartitioningTest, VmapOfCommittedArraysFollowsTheirSharding) {
  auto rows = [](const Array& r) { return sp::sin(r) * 2; };
  Array mapped = sp::vmap(rows)(xab);
  EXPECT_EQ(placed(mapped), jax_placed("vmap_rows"));
  EXPECT_TRUE(arrays_close_ulp(mapped, sp::sin(x) * 2, 1));
  Array sums = sp::vmap([](const Array& r) { return r.sum(); })(xab);
  EXPECT_EQ(placed(sums), jax_placed("vmap_row_sums"));
  EXPECT_TRUE(arrays_equal(sums, x.sum({1})));
  Array jitted = sp::jit(sp::vmap(rows))(xab);
  EXPECT_EQ(placed(jitted), jax_placed("jit_vmap_rows"));
  EXPECT_TRUE(arrays_close_ulp(jitted, sp::sin(x) * 2, 1));
}

// Control flow runs its bodies on blocks: results keep the splits JAX gives them.
TEST_F(PartitioningTest, CondInsideJitOnCommittedArguments) {
  auto f = sp::jit([](const Array& p, const Array& u) {
    return lax::cond(
        p, [](const Array& v) { return sp::sin(v); }, [](const Array& v) { return sp::cos(v); }, u);
  });
  Array r = f(Array(true), xab);
  EXPECT_EQ(placed(r), jax_placed("jit_cond"));
  EXPECT_TRUE(arrays_close_ulp(r, sp::sin(x), 1));
  EXPECT_TRUE(arrays_close_ulp(f(Array(false), xab), sp::cos(x), 1));
}

TEST_F(PartitioningTest, ForiLoopInsideJitOnCommittedArguments) {
  auto f = sp::jit([](const Array& u) {
    return lax::fori_loop(
        0, 3, [](const Array&, const Array& c) { return c * 0.5 + 1; }, u);
  });
  Array r = f(xab);
  EXPECT_EQ(placed(r), jax_placed("jit_fori_loop"));
  EXPECT_TRUE(arrays_equal(r, ((x * 0.5 + 1) * 0.5 + 1) * 0.5 + 1));
}

TEST_F(PartitioningTest, ScanInsideJitOnCommittedArguments) {
  auto body = [](const Array& c, const Array& row) { return std::make_pair(c + row, c * row); };
  auto f = sp::jit([&](const Array& u) { return lax::scan(body, sp::zeros({8}), u); });
  auto [carry, ys] = f(xab);
  auto [carry_ref, ys_ref] = lax::scan(body, sp::zeros({8}), x);
  EXPECT_EQ(placed(std::make_pair(carry, ys)), jax_placed("jit_scan"));
  EXPECT_TRUE(arrays_equal(carry, carry_ref));
  EXPECT_TRUE(arrays_equal(ys, ys_ref));
}

}  // namespace

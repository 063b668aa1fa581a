// Against JAX 0.10.2 (tools/goldens/gen_reduce_scatter_donation.py): a max or min wanted split
// over its reduced axes is completed by an all_to_all of the partial results and a local max or
// min (a reduce-scatter's bytes, half an all-reduce's), with JAX's splits and exactly its values;
// donated committed sharded arguments of a partitioned jit are deleted with JAX's error and their
// blocks become the outputs' blocks; device_put to the same devices in another order is the one
// ppermute a jit runs for such an argument.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "compile/partition.h"
#include "core/array_impl.h"
#include "sharding/golden_cases.h"
#include "support/config_scope.h"
#include "support/golden.h"

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace {

namespace sp = spmd;
using sp::Array;
using sp::None;
using sp::P;

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

// The buffers of x's blocks, by device id.
std::map<int, const void*> buffers(const Array& x) {
  std::map<int, const void*> out;
  for (const sp::Shard& s : x.addressable_shards()) out[s.device.id] = s.data.impl()->buffer.get();
  return out;
}

// Signed values scattered over the array, as the generator makes them.
Array scrambled(int64_t n) {
  return (sp::arange(int(n)) * 37) % int(n) - int(n / 2);
}

class ReduceScatterDonation : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sp::device_count() < 8) GTEST_SKIP() << "needs 8 devices";
  }

  sp::Mesh mesh = sp::make_mesh({4, 2}, {"a", "b"});
  sp::Mesh mesh3 = sp::make_mesh({2, 2, 2}, {"a", "b", "c"});
  Array x16 = (scrambled(256).reshape({16, 16}) / 4).astype(sp::DType::float32);
  Array x3 = (scrambled(1024).reshape({8, 8, 16}) / 8).astype(sp::DType::float32);
  Array i16 = scrambled(256).reshape({16, 16});

  static Array put(const sp::Mesh& m, const Array& v, sp::PartitionSpec spec) {
    Array r = sp::device_put(v, sp::NamedSharding(m, spec));
    r.block_until_ready();
    return r;
  }

  // The golden lines of a case: where its leaves are, then any other lines recorded.
  static std::string golden(const std::string& name) {
    static const auto* blocks = new std::map<std::string, std::string>(
        spmd_test::golden_blocks("partitioning/rsd_results.txt"));
    EXPECT_TRUE(blocks->count(name)) << "no golden case " << name;
    return blocks->count(name) ? blocks->at(name) : "";
  }

  // Compares the leaves of a case with JAX's: where they are and their values, exactly.
  static void expect_jax(const std::string& name, const std::vector<Array>& leaves) {
    const std::vector<std::string> lines = sharding_test::lines_of(golden(name));
    std::vector<std::string> where(
        lines.begin(), lines.begin() + std::ptrdiff_t(std::min(lines.size(), leaves.size())));
    std::string expected;
    for (const std::string& line : where) expected += (expected.empty() ? "" : "\n") + line;
    EXPECT_EQ(sharding_test::placed_on_devices(leaves), expected) << name;
    const auto& values = spmd_test::load_golden("partitioning/rsd_values.npz");
    for (size_t i = 0; i < leaves.size(); ++i)
      EXPECT_TRUE(
          spmd_test::arrays_close(leaves[i], values.at(name + "/" + std::to_string(i)), 0, 0))
          << name << " leaf " << i;
  }
};

Array max0(const Array& u) {
  return u.max({0});
}

Array min0(const Array& u) {
  return u.min({0});
}

// Checks the account of a case: its first collective, and no all-reduce of the whole result.
void expect_account(const std::string& text, const std::string& first) {
  EXPECT_NE(text.find("1. " + first + "\n"), std::string::npos) << text;
  EXPECT_EQ(count(text, "pmax over"), 0u) << text;
  EXPECT_EQ(count(text, "pmin over"), 0u) << text;
}

// A max all-reduced whole would send 2 · 64 · 3/4 = 96 bytes; the scatter sends the f32[16]
// partial maximum's three quarters that other devices keep.
TEST_F(ReduceScatterDonation, AMaxScattersOverOneDim) {
  auto f = sp::jit(max0, {.out_shardings = sp::NamedSharding(mesh, P("a"))});
  const Array u = put(mesh, x16, P("a", None));
  expect_account(f.explain(u),
                 "all_to_all over 'a': all_to_all and a local max complete the partial results "
                 "of reduce_max (equation 0) where its result is split over them; each device "
                 "sends 48 bytes");
  expect_jax("max_scatter_one_dim", {f(u)});
}

TEST_F(ReduceScatterDonation, AMinScattersOverATupleOfAxes) {
  auto f = sp::jit(min0, {.out_shardings = sp::NamedSharding(mesh, P(sp::axes("a", "b")))});
  const Array u = put(mesh, x16, P(sp::axes("a", "b"), None));
  expect_account(f.explain(u),
                 "all_to_all over ('a', 'b'): all_to_all and a local min complete the partial "
                 "results of reduce_min (equation 0) where its result is split over them; each "
                 "device sends 56 bytes");
  expect_jax("min_scatter_one_dim", {f(u)});
}

TEST_F(ReduceScatterDonation, AMaxScattersInTheWantedAxisOrder) {
  auto f = sp::jit(max0, {.out_shardings = sp::NamedSharding(mesh, P(sp::axes("b", "a")))});
  const Array u = put(mesh, x16, P(sp::axes("a", "b"), None));
  expect_account(f.explain(u),
                 "all_to_all over ('b', 'a'): all_to_all and a local max complete the partial "
                 "results of reduce_max (equation 0) where its result is split over them; each "
                 "device sends 56 bytes");
  expect_jax("max_scatter_other_order", {f(u)});
}

// The f32[8,16] partial minimum (512 bytes) is ordered by a local transpose into the blocks the
// two axes scatter, then exchanged: 512 · 7/8 bytes.
TEST_F(ReduceScatterDonation, AMinScattersOverTwoDims) {
  auto f = sp::jit(min0, {.out_shardings = sp::NamedSharding(mesh, P("a", "b"))});
  const Array u = put(mesh, x3, P(sp::axes("a", "b"), None, None));
  const std::string text = f.explain(u);
  expect_account(text,
                 "all_to_all over ('a', 'b'): all_to_all and a local min complete the partial "
                 "results of reduce_min (equation 0) where its result is split over them; each "
                 "device sends 448 bytes");
  EXPECT_EQ(count(text, "transpose"), 1u) << text;
  expect_jax("min_scatter_two_dims", {f(u)});
}

// The f32[4,16] partial maximum is sliced over 'c' first (free), then its f32[2,16] half
// (128 bytes) exchanged over 'a'.
TEST_F(ReduceScatterDonation, AMaxScattersBesideAnAxisItSlices) {
  auto f = sp::jit(max0, {.out_shardings = sp::NamedSharding(mesh3, P(sp::axes("b", "c"), "a"))});
  const Array u = put(mesh3, x3, P("a", "b", None));
  expect_account(f.explain(u),
                 "all_to_all over 'a': all_to_all and a local max complete the partial results "
                 "of reduce_max (equation 0) where its result is split over them; each device "
                 "sends 64 bytes");
  expect_jax("max_scatter_beside_a_slice", {f(u)});
}

// f32[4,16] partial maxima (256 bytes): exchanged over 'a' (128 bytes), then the f32[4,8] half
// all-reduced over 'c' (2 · 128 · 1/2); a pmax over both would send 384.
TEST_F(ReduceScatterDonation, AMaxScattersThenReducesTheAxesItIsNotSplitOver) {
  auto f = sp::jit(max0, {.out_shardings = sp::NamedSharding(mesh3, P("b", "a"))});
  const Array u = put(mesh3, x3, P(sp::axes("a", "c"), "b", None));
  EXPECT_NE(f.explain(u).find(
                "1. all_to_all over 'a': all_to_all and a local max complete the partial results "
                "of reduce_max (equation 0) where its result is split over them; each device "
                "sends 128 bytes\n"
                "  2. pmax over 'c': pmax completes the partial results of reduce_max (equation "
                "0) over its reduced dims; each device sends 128 bytes\n"),
            std::string::npos)
      << f.explain(u);
  expect_jax("max_scatter_then_pmax", {f(u)});
}

TEST_F(ReduceScatterDonation, AnIntegerMaxScatters) {
  auto f = sp::jit(max0, {.out_shardings = sp::NamedSharding(mesh, P("a"))});
  const Array u = put(mesh, i16, P("a", None));
  expect_account(f.explain(u),
                 "all_to_all over 'a': all_to_all and a local max complete the partial results "
                 "of reduce_max (equation 0) where its result is split over them; each device "
                 "sends 48 bytes");
  expect_jax("max_scatter_int32", {f(u)});
}

Array scaled_sum(const Array& u, const Array& v) {
  return u * 2.0f + v;
}

std::vector<Array> difference_and_sum(const Array& u, const Array& v) {
  return {u - v, u + v};
}

// The lines of a donation case after its leaves: whether each donated argument is deleted, and
// the error reading it raises.
std::vector<std::string> donation_lines(const std::string& block, size_t leaves) {
  std::vector<std::string> lines = sharding_test::lines_of(block);
  return {lines.begin() + std::ptrdiff_t(std::min(leaves, lines.size())), lines.end()};
}

// Each device's result is written over its block of the donated argument: the launch hands the
// block to the program, nothing copies it, and reading the argument afterwards raises JAX's error.
TEST_F(ReduceScatterDonation, ADonatedShardedArgumentBecomesTheResult) {
  auto f = sp::jit(scaled_sum, {.donate_argnums = {0}});
  Array u = put(mesh, x16, P("a", "b"));
  const Array v = put(mesh, x16, P("a", "b"));
  const std::map<int, const void*> blocks = buffers(u);
  sp::runtime::reset_transfer_stats();
  const Array y = f(u, v);
  y.block_until_ready();
  EXPECT_EQ(sp::runtime::transfer_stats().total_bytes(), 0);
  EXPECT_EQ(buffers(y), blocks);
  expect_jax("donated_elementwise", {y});
  EXPECT_EQ(donation_lines(golden("donated_elementwise"), 1),
            (std::vector<std::string>{"deleted 0 True",
                                      "error Array has been deleted with shape=float32[16,16]."}));
  EXPECT_TRUE(u.is_deleted());
  EXPECT_FALSE(v.is_deleted());
  EXPECT_EQ(error_of([&] { (void)u.to_vector<float>(); }),
            "[to_vector] Array has been deleted with shape=float32[16,16].");
  EXPECT_EQ(error_of([&] { (void)f(u, v); }),
            "[jit] Array has been deleted with shape=float32[16,16].");
}

TEST_F(ReduceScatterDonation, EveryDonatedArgumentIsDeleted) {
  auto f = sp::jit(difference_and_sum, {.donate_argnums = {0, 1}});
  Array u = put(mesh, x16, P("a", "b"));
  Array v = put(mesh, x16, P("a", "b"));
  const std::vector<Array> out = f(u, v);
  expect_jax("donated_both", out);
  EXPECT_EQ(donation_lines(golden("donated_both"), 2),
            (std::vector<std::string>{
                "deleted 0 True", "error Array has been deleted with shape=float32[16,16].",
                "deleted 1 True", "error Array has been deleted with shape=float32[16,16]."}));
  EXPECT_TRUE(u.is_deleted());
  EXPECT_TRUE(v.is_deleted());
}

// No output has the donated argument's type: JAX leaves it alone (with a warning).
TEST_F(ReduceScatterDonation, AnUnusableDonationLeavesTheArgument) {
  auto f = sp::jit([](const Array& u) { return u.sum({0}); }, {.donate_argnums = {0}});
  const Array u = put(mesh, x16, P("a", "b"));
  expect_jax("donated_unusable", {f(u)});
  EXPECT_EQ(donation_lines(golden("donated_unusable"), 1),
            (std::vector<std::string>{"deleted 0 False", "error none"}));
  EXPECT_FALSE(u.is_deleted());
  EXPECT_TRUE(spmd_test::arrays_close(u, x16, 0, 0));
}

// The function closes over the array it is given donated: the constant keeps its blocks.
TEST_F(ReduceScatterDonation, ADonatedArgumentTheFunctionClosesOverKeepsItsValueThere) {
  Array w = put(mesh, x16, P("a", "b"));
  auto f = sp::jit([w](const Array& u) { return u * 2.0f + w; }, {.donate_argnums = {0}});
  const Array y = f(w);
  EXPECT_TRUE(w.is_deleted());
  EXPECT_TRUE(spmd_test::arrays_close(y, x16 * 3.0f, 0, 0));
  const Array z = f(put(mesh, x16 + 1.0f, P("a", "b")));
  EXPECT_TRUE(spmd_test::arrays_close(z, (x16 + 1.0f) * 2.0f + x16, 0, 0));
}

// A replicated result past the size below which collectives copy their inputs is one buffer
// that every device's block shares: each device's update of the donated value still reads the
// old values, whichever device runs first.
TEST_F(ReduceScatterDonation, DonatedBlocksSharingOneBufferAreNotWrittenOverWhileShared) {
  const Array host = sp::arange(256.0f * 1024).reshape({256, 1024});
  const sp::Mesh line = sp::make_mesh({8}, {"i"});
  Array rep = sp::jit([&](const Array& v) {
    return sp::with_sharding_constraint(v, sp::NamedSharding(line, P()));
  })(put(line, host, P("i")));
  const std::map<int, const void*> shared = buffers(rep);
  for (const auto& [device, buffer] : shared) ASSERT_EQ(buffer, shared.begin()->second) << device;
  auto bump = sp::jit([](const Array& v) { return v + 1.0f; }, {.donate_argnums = {0}});
  const Array out = bump(rep);
  EXPECT_TRUE(rep.is_deleted());
  for (const sp::Shard& s : out.addressable_shards())
    EXPECT_TRUE(spmd_test::arrays_close(s.data, host + 1.0f, 0, 0)) << s.device;
}

sp::Mesh mesh_on(const std::vector<int>& ids, sp::Shape shape, std::vector<std::string> names) {
  std::vector<sp::Device> devices;
  for (int id : ids) devices.push_back(sp::devices()[size_t(id)]);
  return sp::Mesh(devices, std::move(shape), std::move(names));
}

const std::vector<int> kForward{0, 1, 2, 3, 4, 5, 6, 7};
const std::vector<int> kReversed{7, 6, 5, 4, 3, 2, 1, 0};

// device_put's account of a move to `target`, which the device_put asked for (no implicit
// resharding), and the move itself, which copies no block outside the program.
std::string expect_ppermute(const Array& x, const sp::NamedSharding& target, Array& moved) {
  const std::optional<std::string> text = sp::explain_put_in_other_order(x, target, "device_put");
  EXPECT_TRUE(text.has_value());
  spmd_test::ImplicitReshardingScope refuse(sp::config::ImplicitResharding::error);
  sp::runtime::reset_transfer_stats();
  moved = sp::device_put(x, target);
  moved.block_until_ready();
  EXPECT_EQ(sp::runtime::transfer_stats().device_to_device_bytes, 0);
  return text.value_or("");
}

// Each device's f32[4,8] block (128 bytes) goes to its mirror device.
TEST_F(ReduceScatterDonation, ADevicePutToReversedDevicesIsOnePpermute) {
  const sp::Mesh fwd = mesh_on(kForward, sp::Shape{4, 2}, {"a", "b"});
  const sp::NamedSharding rev(mesh_on(kReversed, sp::Shape{4, 2}, {"a", "b"}), P("a", "b"));
  const Array x = put(fwd, x16, P("a", "b"));
  Array y;
  const std::string text = expect_ppermute(x, rev, y);
  EXPECT_NE(text.find("collectives:\n  1. ppermute over ('a', 'b'): argument 0 is on the mesh's "
                      "devices in another order or arrangement"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("each device sends 128 bytes\n"), std::string::npos) << text;
  EXPECT_EQ(count(text, "\n  2."), 0u) << text;
  EXPECT_FALSE(x.is_deleted());
  expect_jax("device_put_reversed", {y});
}

TEST_F(ReduceScatterDonation, ADevicePutToRotatedDevicesIsOnePpermute) {
  const sp::Mesh line = mesh_on(kForward, sp::Shape{8}, {"x"});
  const sp::NamedSharding rotated(mesh_on({3, 4, 5, 6, 7, 0, 1, 2}, sp::Shape{8}, {"x"}),
                                  P("x", None));
  Array y;
  const std::string text = expect_ppermute(put(line, x16, P("x", None)), rotated, y);
  EXPECT_NE(text.find("1. ppermute over 'x': argument 0 is on the mesh's devices in another "
                      "order or arrangement"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("each device sends 128 bytes\n"), std::string::npos) << text;
  expect_jax("device_put_rotated", {y});
}

// Blocks that do not tile as the target's are copied where a process lacks them, as before.
TEST_F(ReduceScatterDonation, ADevicePutToReversedDevicesAndAnotherSplitCopiesBlocks) {
  const sp::Mesh fwd = mesh_on(kForward, sp::Shape{4, 2}, {"a", "b"});
  const sp::NamedSharding rev(mesh_on(kReversed, sp::Shape{4, 2}, {"a", "b"}), P("b", "a"));
  const Array x = put(fwd, x16, P("a", "b"));
  EXPECT_FALSE(sp::explain_put_in_other_order(x, rev, "device_put").has_value());
  expect_jax("device_put_reversed_retiled", {sp::device_put(x, rev)});
}

// JAX's reshard is a jit on the target's mesh and refuses another device order.
TEST_F(ReduceScatterDonation, AReshardToReversedDevicesRaisesJaxsError) {
  const std::vector<sp::AxisType> types{sp::AxisType::Explicit, sp::AxisType::Explicit};
  const sp::Mesh fwd = sp::Mesh(mesh_on(kForward, sp::Shape{4, 2}, {"a", "b"}).devices(),
                                sp::Shape{4, 2}, {"a", "b"}, types);
  const sp::Mesh rev = sp::Mesh(mesh_on(kReversed, sp::Shape{4, 2}, {"a", "b"}).devices(),
                                sp::Shape{4, 2}, {"a", "b"}, types);
  const Array x = put(fwd, x16, P("a", None));
  EXPECT_EQ("error " + error_of([&] {
                         (void)sp::reshard(x, sp::NamedSharding(rev, P("a", None)));
                       }).substr(std::string("[reshard] ").size()),
            golden("reshard_reversed"));
}

}  // namespace

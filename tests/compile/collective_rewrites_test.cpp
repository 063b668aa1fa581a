// Passes that rewrite collectives of per-device programs: own_blocks_of_collectives (a device's
// own block of a psum becomes a psum_scatter, of an all_gather the gathered operand, with the same
// values bit for bit), sums_from_all_to_alls, local_work_before_collectives and
// combine_collectives.
#include <gtest/gtest.h>
#include <spmd/spmd.h>

#include "compile/passes.h"
#include "ir/program.h"
#include "prims/primitive.h"
#include "support/config_scope.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

namespace sp = spmd;
using sp::Array;
using sp::P;

namespace {

const sp::AxisSizes kAxes = {{"b", 4}, {"m", 2}};

sp::Mesh mesh_4x2() {
  return sp::make_mesh({4, 2}, {"b", "m"});
}

int count_of(const sp::Program& p, const std::string& name) {
  int n = 0;
  for (const sp::Equation& e : p.equations) n += e.primitive->name == name;
  return n;
}

// The per-device program of shard_map `f` traced on `args`.
template <class F, class... Args>
sp::Program per_device(const F& f, const Args&... args) {
  const sp::ClosedJaxpr traced = sp::make_jaxpr(f)(args...);
  return *traced.program().equations.at(0).params.get<sp::ProgramRef>("jaxpr");
}

// Rows of distinct values with fractions, so that sums in another order would round otherwise.
Array rows(int64_t n, int64_t cols) {
  return sp::sin(sp::arange(float(n * cols)).reshape({n, cols}) * 0.731f) * 1000.0f;
}

// Each device's column of the sum over all 8 devices, its column index over ("b", "m")
// computed as b·2 + m (b major, as psum_scatter over ("b", "m") numbers the devices), or as
// m·4 + b (m major: another block, which psum_scatter cannot give).
Array own_column_of_sum(const Array& x, bool b_major) {
  Array s = sp::psum(x, sp::axes("b", "m"));
  Array b = sp::axis_index("b"), m = sp::axis_index("m");
  Array k = b_major ? b * 2 + m : m * 4 + b;
  return sp::lax::dynamic_slice(s, {Array(0), k}, {3, 1});
}

auto column_shard_map(bool b_major, bool return_sum) {
  sp::ShardMapOptions unchecked;
  unchecked.check_vma = false;
  auto body = [=](const Array& x) {
    Array own = own_column_of_sum(x, b_major);
    return std::make_tuple(own, return_sum ? sp::psum(x, sp::axes("b", "m")) : own);
  };
  return sp::shard_map(body, mesh_4x2(), {P(sp::axes("b", "m"))},
                       {P(sp::None, sp::axes("b", "m")), P()}, unchecked);
}

TEST(OwnBlocksOfCollectives, ADevicesOwnBlockOfAPsumBecomesAPsumScatter) {
  const Array x = rows(24, 8);
  const sp::Program before = per_device(column_shard_map(true, false), x);
  ASSERT_EQ(count_of(before, "psum"), 1) << before.str();
  const sp::Program after = sp::own_blocks_of_collectives(before, kAxes);
  EXPECT_EQ(count_of(after, "psum"), 0) << after.str();
  EXPECT_EQ(count_of(after, "reduce_scatter"), 1) << after.str();
  EXPECT_EQ(count_of(after, "dynamic_slice"), 0) << after.str();
  EXPECT_NE(after.str().find("axis_name=('b', 'm')"), std::string::npos) << after.str();
  // Without the mesh's sizes, nothing changes.
  EXPECT_EQ(count_of(sp::own_blocks_of_collectives(before, {}), "psum"), 1);

  // The values: each device's column of the sum, bit for bit those of the psum the reference
  // keeps (its whole result is read too), and the column sums of x.
  auto [got, unused] = sp::jit(column_shard_map(true, false))(x);
  auto [want, sum] = sp::jit(column_shard_map(true, true))(x);
  EXPECT_EQ(count_of(per_device(column_shard_map(true, true), x), "psum"), 2);
  ASSERT_EQ(got.shape(), (sp::Shape{3, 8}));
  EXPECT_EQ(got.to_vector<float>(), want.to_vector<float>());
  EXPECT_EQ(got.to_vector<float>(), sum.to_vector<float>());
  Array host = x.reshape({8, 3, 8}).sum({0});
  EXPECT_TRUE(sp::allclose(got, host, 1e-5, 1e-3)) << got << "\n" << host;
}

TEST(OwnBlocksOfCollectives, AnotherDevicesBlockKeepsThePsum) {
  // m major: device (b, m) takes column m·4 + b, not its block in psum_scatter's order.
  const Array x = rows(24, 8);
  const sp::Program after =
      sp::own_blocks_of_collectives(per_device(column_shard_map(false, false), x), kAxes);
  EXPECT_EQ(count_of(after, "psum"), 1) << after.str();
  EXPECT_EQ(count_of(after, "reduce_scatter"), 0) << after.str();
  auto [got, unused] = sp::jit(column_shard_map(false, false))(x);
  Array host = x.reshape({8, 3, 8}).sum({0});
  // Device (b, m) holds global column b·2 + m and computed column m·4 + b of the sum.
  std::vector<float> h = host.to_vector<float>(), g = got.to_vector<float>();
  for (int b = 0; b < 4; ++b)
    for (int m = 0; m < 2; ++m)
      for (int r = 0; r < 3; ++r)
        EXPECT_NEAR(g[size_t(r * 8 + b * 2 + m)], h[size_t(r * 8 + m * 4 + b)], 1e-3);
}

auto gather_shard_map() {
  sp::ShardMapOptions unchecked;
  unchecked.check_vma = false;
  auto body = [](const Array& x) {
    Array all = sp::all_gather(x, "m", sp::AllGatherOptions{.axis = 1, .tiled = true});
    Array own = sp::lax::dynamic_slice(all, {Array(0), sp::axis_index("m") * 4}, {3, 4});
    return std::make_tuple(own * 2.0f, all);
  };
  return sp::shard_map(body, mesh_4x2(), {P("b", "m")}, {P("b", "m"), P("b")}, unchecked);
}

TEST(OwnBlocksOfCollectives, ADevicesOwnBlockOfAnAllGatherIsItsOperand) {
  const Array x = rows(12, 8);
  const sp::Program before = per_device(gather_shard_map(), x);
  ASSERT_EQ(count_of(before, "dynamic_slice"), 1) << before.str();
  const sp::Program after = sp::own_blocks_of_collectives(before, kAxes);
  EXPECT_EQ(count_of(after, "dynamic_slice"), 0) << after.str();
  EXPECT_EQ(count_of(after, "all_gather"), 1) << after.str();  // its result is read too
  auto [own, all] = sp::jit(gather_shard_map())(x);
  EXPECT_EQ(own.to_vector<float>(), (x * 2.0f).to_vector<float>());
  EXPECT_EQ(all.to_vector<float>(), x.to_vector<float>());
}

// A bias's gradient beside its weight's at data parallel: the column sums of each device's rows,
// psum_scattered, where the all_to_all of the same rows already gives each device all rows of its
// columns.
auto bias_and_weight_shard_map() {
  sp::ShardMapOptions unchecked;
  unchecked.check_vma = false;
  auto body = [](const Array& x) {
    Array bias = sp::psum_scatter(x.sum({0}), "d", {.scatter_dimension = 0, .tiled = true});
    Array columns = sp::all_to_all(x, "d", 1, 0, {.tiled = true});
    return std::make_tuple(bias, columns * 2.0f);
  };
  return sp::shard_map(body, sp::make_mesh({8}, {"d"}), {P("d")}, {P("d"), P(sp::None, "d")},
                       unchecked);
}

TEST(SumsFromAllToAlls, APsumScatterOfColumnSumsSumsTheAllToAllsRows) {
  const Array x = rows(64, 16);
  const sp::Program before = per_device(bias_and_weight_shard_map(), x);
  ASSERT_EQ(count_of(before, "reduce_scatter"), 1) << before.str();
  const sp::Program after = sp::dead_code_elimination(sp::sums_from_all_to_alls(before));
  EXPECT_EQ(count_of(after, "reduce_scatter"), 0) << after.str();
  EXPECT_EQ(count_of(after, "all_to_all"), 1) << after.str();
  ASSERT_EQ(count_of(after, "reduce_sum"), 1) << after.str();
  for (const sp::Equation& e : after.equations) {
    if (e.primitive->name != "reduce_sum") continue;
    EXPECT_EQ(after.types[size_t(e.inputs[0].var)].shape, (sp::Shape{64, 2})) << after.str();
  }
  auto [bias, columns] = sp::jit(bias_and_weight_shard_map())(x);
  EXPECT_TRUE(sp::allclose(bias, x.sum({0}), 1e-5, 1e-3)) << bias << "\n" << x.sum({0});
  EXPECT_EQ(columns.to_vector<float>(), (x * 2.0f).to_vector<float>());
}

// A body whose psum's result feeds only one output, with local work after it in the traced
// order, and an all_gather after that: psum, add, sin, mul, all_gather as traced.
auto mixed_order_shard_map(bool print) {
  sp::ShardMapOptions unchecked;
  unchecked.check_vma = false;
  auto body = [=](const Array& x) {
    Array total = sp::psum(x.sum(), sp::axes("b", "m")) + 1.0f;
    Array local = sp::sin(x) * 2.0f;
    if (print) sp::debug::print("{}", local);
    return std::make_tuple(total, sp::all_gather(local, "m", {.axis = 0, .tiled = true}));
  };
  return sp::shard_map(body, mesh_4x2(), {P(sp::axes("b", "m"))}, {P(), P(sp::axes("b"))},
                       unchecked);
}

// Positions of the equations of `p` by primitive name, in program order.
std::vector<std::string> order_of(const sp::Program& p) {
  std::vector<std::string> names;
  for (const sp::Equation& e : p.equations) names.push_back(e.primitive->name);
  return names;
}

TEST(LocalWorkBeforeCollectives, WorkThatReadsNoCollectiveRunsFirstAndCollectivesKeepTheirOrder) {
  const Array x = rows(16, 3);
  const sp::Program before = per_device(mixed_order_shard_map(false), x);
  const std::vector<std::string> traced = order_of(before);
  auto at = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) - names.begin();
  };
  ASSERT_LT(at(traced, "psum"), at(traced, "sin")) << before.str();
  const sp::Program after = sp::local_work_before_collectives(before);
  const std::vector<std::string> moved = order_of(after);
  ASSERT_EQ(moved.size(), traced.size()) << after.str();
  // sin and its mul run before the psum; the psum still meets before the all_gather, and the
  // add that reads the psum's result comes after it.
  EXPECT_LT(at(moved, "sin"), at(moved, "psum")) << after.str();
  EXPECT_LT(at(moved, "psum"), at(moved, "all_gather")) << after.str();
  EXPECT_LT(at(moved, "psum"), at(moved, "add")) << after.str();
  // The compiled body (the pass runs in optimize) gives the host's values.
  auto [total, gathered] = sp::jit(mixed_order_shard_map(false))(x);
  EXPECT_TRUE(sp::allclose(total, x.sum() + 1.0f, 1e-5, 1e-3)) << total;
  EXPECT_EQ(gathered.to_vector<float>(), (sp::sin(x) * 2.0f).to_vector<float>());
}

// Meetings whose operands are ready run one after the other, before the work that reads the
// first of them: the all_gather of cos(x), traced after the multiplication that reads the psum,
// runs before it.
TEST(LocalWorkBeforeCollectives, MeetingsOfOneLevelRunTogether) {
  sp::ShardMapOptions unchecked;
  unchecked.check_vma = false;
  auto body = [](const Array& x) {
    Array scaled = sp::sin(x) * sp::psum(x.sum(), sp::axes("b", "m"));
    return std::make_tuple(scaled, sp::all_gather(sp::cos(x), "m", {.axis = 0, .tiled = true}));
  };
  auto f = sp::shard_map(body, mesh_4x2(), {P(sp::axes("b", "m"))},
                         {P(sp::axes("b", "m")), P(sp::axes("b"))}, unchecked);
  const Array x = rows(16, 3);
  const sp::Program before = per_device(f, x);
  const std::vector<std::string> traced = order_of(before);
  const std::vector<std::string> moved = order_of(sp::local_work_before_collectives(before));
  auto at = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) - names.begin();
  };
  ASSERT_LT(at(traced, "mul"), at(traced, "all_gather")) << before.str();
  EXPECT_LT(at(moved, "psum"), at(moved, "all_gather")) << before.str();
  EXPECT_LT(at(moved, "all_gather"), at(moved, "mul")) << before.str();
  EXPECT_LT(at(moved, "cos"), at(moved, "psum")) << before.str();
  auto [scaled, gathered] = sp::jit(f)(x);
  EXPECT_TRUE(sp::allclose(scaled, sp::sin(x) * x.sum(), 1e-5, 1e-2)) << scaled;
  EXPECT_EQ(gathered.to_vector<float>(), sp::cos(x).to_vector<float>());
}

// A loop whose body holds a psum meets its peers as a collective does: it stays after the psum
// traced before it, though it reads nothing of that psum's result.
TEST(LocalWorkBeforeCollectives, ALoopHoldingACollectiveKeepsItsPlace) {
  sp::ShardMapOptions unchecked;
  unchecked.check_vma = false;
  auto body = [](const Array& x) {
    Array total = sp::psum(x.sum(), sp::axes("b", "m"));
    Array counted = sp::lax::fori_loop(
        0, 3, [](const Array&, const Array& c) { return sp::psum(c, sp::axes("b", "m")) * 0.125f; },
        x.max());
    return std::make_tuple(total, counted);
  };
  auto f = sp::shard_map(body, mesh_4x2(), {P(sp::axes("b", "m"))}, {P(), P()}, unchecked);
  const Array x = rows(16, 3);
  const sp::Program before = per_device(f, x);
  const std::vector<std::string> moved = order_of(sp::local_work_before_collectives(before));
  auto at = [&](const std::string& name) {
    return std::find(moved.begin(), moved.end(), name) - moved.begin();
  };
  ASSERT_LT(at("psum"), int64_t(moved.size())) << before.str();
  ASSERT_LT(at("scan"), int64_t(moved.size())) << before.str();
  EXPECT_LT(at("psum"), at("scan")) << before.str();
  EXPECT_LT(at("reduce_max"), at("psum")) << before.str();
  // Three rounds of the mean over the 8 devices of each device's maximum: their mean.
  auto [total, counted] = sp::jit(f)(x);
  float mean = 0;
  const std::vector<float> v = x.to_vector<float>();
  for (int d = 0; d < 8; ++d) mean += *std::max_element(v.begin() + 6 * d, v.begin() + 6 * d + 6);
  EXPECT_NEAR(counted.item<float>(), mean / 8, 1e-3f * std::abs(mean));
}

TEST(LocalWorkBeforeCollectives, AProgramWithAnEffectKeepsItsOrder) {
  const sp::Program before = per_device(mixed_order_shard_map(true), rows(16, 3));
  EXPECT_EQ(order_of(sp::local_work_before_collectives(before)), order_of(before)) << before.str();
}

// ---- combine_collectives ----------------------------------------------------------------------

// Operand and result counts of the equations of `p` of primitive `name`, in program order.
std::vector<size_t> operand_counts(const sp::Program& p, const std::string& name) {
  std::vector<size_t> counts;
  for (const sp::Equation& e : p.equations) {
    if (e.primitive->name != name) continue;
    EXPECT_EQ(e.inputs.size(), e.outputs.size()) << p.str();
    counts.push_back(e.inputs.size());
  }
  return counts;
}

const sp::Mesh& mesh_8() {
  static const sp::Mesh mesh = sp::make_mesh({8}, {"d"});
  return mesh;
}

// Collectives of every combinable kind over "d", each on operands that are ready at once (the
// block x: f32[8, 6], k: i32[8] per device), of different shapes and dtypes: three psums, three
// all_gathers, two psum_scatters and three all_to_alls.
auto every_kind_shard_map() {
  sp::ShardMapOptions unchecked;
  unchecked.check_vma = false;
  auto body = [](const Array& x, const Array& k) {
    const sp::AllGatherOptions rows{.axis = 0, .tiled = true};
    return std::make_tuple(
        sp::psum(x, "d"), sp::psum(k, "d"), sp::psum(sp::sin(x).sum({0}), "d"),
        sp::all_gather(x, "d", rows), sp::all_gather(k, "d", rows),
        sp::all_gather(x.reshape({4, 12}) * 2.0f, "d", rows),
        sp::psum_scatter(x.reshape({48}), "d", {.scatter_dimension = 0, .tiled = true}),
        sp::psum_scatter(x * 3.0f, "d", {.scatter_dimension = 0, .tiled = true}),
        sp::all_to_all(x, "d", 0, 0, {.tiled = true}),
        sp::all_to_all(x.reshape({16, 3}), "d", 0, 0, {.tiled = true}),
        sp::all_to_all(k, "d", 0, 0, {.tiled = true}));
  };
  return sp::shard_map(body, mesh_8(), {P("d"), P("d")},
                       {P(), P(), P(), P(), P(), P(), P("d"), P("d"), P("d"), P("d"), P("d")},
                       unchecked);
}

// Device j's rows i of a device-major global [8·r, c] taken in the order all_to_all gives device
// i: its block's row i from every device, as global rows i·8 + j.
Array exchanged_rows(const Array& global, int64_t rows_per_device) {
  const int64_t cols = global.size() / (8 * rows_per_device);
  return sp::transpose(global.reshape({8, 8, rows_per_device / 8, cols}), {1, 0, 2, 3})
      .reshape({8 * rows_per_device, cols});
}

TEST(CombineCollectives, EveryKindMeetsOnceForAllItsOperandsWithTheHostsValues) {
  const Array x = rows(64, 6);
  const Array k = sp::arange(64).astype(sp::int32) * 7 - 100;
  const sp::Program before = per_device(every_kind_shard_map(), x, k);
  const sp::Program after = sp::combine_collectives(sp::local_work_before_collectives(before));
  EXPECT_EQ(operand_counts(after, "psum"), (std::vector<size_t>{3})) << after.str();
  EXPECT_EQ(operand_counts(after, "all_gather"), (std::vector<size_t>{3})) << after.str();
  EXPECT_EQ(operand_counts(after, "reduce_scatter"), (std::vector<size_t>{2})) << after.str();
  EXPECT_EQ(operand_counts(after, "all_to_all"), (std::vector<size_t>{3})) << after.str();

  auto got = sp::jit(every_kind_shard_map())(x, k);
  std::tuple<Array, Array, Array, Array, Array, Array, Array, Array, Array, Array, Array> alone;
  {
    spmd_test::CompileEnvScope alone_each("SPMD_COMBINE_COLLECTIVES", "0");
    alone = sp::jit(every_kind_shard_map())(x, k);
  }
  // The same bits as every collective meeting alone.
  const std::vector<Array> g = sp::tree_leaves(got), a = sp::tree_leaves(alone);
  ASSERT_EQ(g.size(), a.size());
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_EQ(g[i].shape(), a[i].shape()) << "result " << i;
    ASSERT_EQ(g[i].dtype(), a[i].dtype()) << "result " << i;
    if (g[i].dtype() == sp::int32)
      EXPECT_EQ(g[i].to_vector<int32_t>(), a[i].to_vector<int32_t>()) << "result " << i;
    else
      EXPECT_EQ(g[i].to_vector<float>(), a[i].to_vector<float>()) << "result " << i;
  }
  // And the host's values.
  const Array blocks = x.reshape({8, 8, 6});
  EXPECT_TRUE(sp::allclose(g[0], blocks.sum({0}), 1e-5, 1e-3)) << g[0];
  EXPECT_EQ(g[1].to_vector<int32_t>(), k.reshape({8, 8}).sum({0}).to_vector<int32_t>());
  EXPECT_TRUE(sp::allclose(g[2], sp::sin(x).sum({0}), 1e-5, 1e-3)) << g[2];
  EXPECT_EQ(g[3].to_vector<float>(), x.to_vector<float>());
  EXPECT_EQ(g[4].to_vector<int32_t>(), k.to_vector<int32_t>());
  EXPECT_EQ(g[5].to_vector<float>(), (x * 2.0f).to_vector<float>());
  EXPECT_TRUE(sp::allclose(g[6], x.reshape({8, 48}).sum({0}), 1e-5, 1e-3)) << g[6];
  EXPECT_TRUE(sp::allclose(g[7], (blocks * 3.0f).sum({0}), 1e-5, 1e-3)) << g[7];
  EXPECT_EQ(g[8].to_vector<float>(), exchanged_rows(x, 8).to_vector<float>());
  EXPECT_EQ(g[9].to_vector<float>(), exchanged_rows(x.reshape({128, 3}), 16).to_vector<float>());
  EXPECT_EQ(g[10].to_vector<int32_t>(), exchanged_rows(k.reshape({64, 1}), 8).reshape({64})
                                            .to_vector<int32_t>());
}

TEST(CombineCollectives, ACollectiveOfAnotherCollectivesResultMeetsAfterIt) {
  sp::ShardMapOptions unchecked;
  unchecked.check_vma = false;
  const sp::AllGatherOptions rows_of{.axis = 0, .tiled = true};
  auto body = [=](const Array& x) {
    Array once = sp::all_gather(x, "d", rows_of);
    return std::make_tuple(sp::all_gather(once, "d", rows_of), sp::all_gather(x * 2.0f, "d", rows_of));
  };
  auto f = sp::shard_map(body, mesh_8(), {P("d")}, {P(), P()}, unchecked);
  const Array x = rows(16, 3);
  const sp::Program after =
      sp::combine_collectives(sp::local_work_before_collectives(per_device(f, x)));
  // The gather of x · 2 joins the first gather; the gather of that gather's result cannot.
  EXPECT_EQ(operand_counts(after, "all_gather"), (std::vector<size_t>{2, 1})) << after.str();
  auto [twice, doubled] = sp::jit(f)(x);
  EXPECT_EQ(twice.to_vector<float>(), sp::tile(x, {8, 1}).to_vector<float>());
  EXPECT_EQ(doubled.to_vector<float>(), (x * 2.0f).to_vector<float>());
}

// A psum_scatter whose result only local work reads waits for the psum_scatter like it a level
// later (the one of a gathered value), and they meet once; the work that reads it moves with it.
auto waiting_scatter_shard_map(bool gather_the_early_one) {
  sp::ShardMapOptions unchecked;
  unchecked.check_vma = false;
  const sp::AllGatherOptions rows_of{.axis = 0, .tiled = true};
  const sp::PsumScatterOptions scatter_rows{.scatter_dimension = 0, .tiled = true};
  auto body = [=](const Array& x) {
    Array early = sp::psum_scatter(x * 3.0f, "d", scatter_rows);
    Array late = sp::psum_scatter(sp::sin(sp::all_gather(x, "d", rows_of)), "d", scatter_rows);
    Array read = gather_the_early_one ? sp::all_gather(early, "d", rows_of) : early + 1.0f;
    return std::make_tuple(read, late);
  };
  return sp::shard_map(body, mesh_8(), {P("d")}, {gather_the_early_one ? P() : P("d"), P("d")},
                       unchecked);
}

TEST(CombineCollectives, AScatterThatNothingNeedsEarlyMeetsWithTheNextLikeIt) {
  const Array x = rows(64, 6);
  const sp::Program before = per_device(waiting_scatter_shard_map(false), x);
  const sp::Program leveled = sp::local_work_before_collectives(before);
  ASSERT_EQ(operand_counts(leveled, "reduce_scatter"), (std::vector<size_t>{1, 1})) << leveled.str();
  const sp::Program after = sp::combine_collectives(leveled);
  EXPECT_EQ(operand_counts(after, "reduce_scatter"), (std::vector<size_t>{2})) << after.str();
  // The add that reads the early scatter's result comes after the meeting.
  const std::vector<std::string> order = order_of(after);
  EXPECT_LT(std::find(order.begin(), order.end(), "reduce_scatter"),
            std::find(order.begin(), order.end(), "add"))
      << after.str();

  auto [read, late] = sp::jit(waiting_scatter_shard_map(false))(x);
  Array read_alone, late_alone;
  {
    spmd_test::CompileEnvScope alone_each("SPMD_COMBINE_COLLECTIVES", "0");
    std::tie(read_alone, late_alone) = sp::jit(waiting_scatter_shard_map(false))(x);
  }
  EXPECT_EQ(read.to_vector<float>(), read_alone.to_vector<float>());
  EXPECT_EQ(late.to_vector<float>(), late_alone.to_vector<float>());
  EXPECT_TRUE(sp::allclose(read, (x.reshape({8, 8, 6}) * 3.0f).sum({0}) + 1.0f, 1e-5, 1e-2))
      << read;
  EXPECT_TRUE(sp::allclose(late, sp::sin(x) * 8.0f, 1e-5, 1e-4)) << late;
}

// The same early psum_scatter read by a meeting of the level before the late one's stays where
// it was: waiting would hold that meeting back.
TEST(CombineCollectives, AScatterAMeetingReadsMeetsBeforeThatMeeting) {
  const Array x = rows(64, 6);
  const sp::Program after = sp::combine_collectives(
      sp::local_work_before_collectives(per_device(waiting_scatter_shard_map(true), x)));
  EXPECT_EQ(operand_counts(after, "reduce_scatter"), (std::vector<size_t>{1, 1})) << after.str();
  auto [gathered, late] = sp::jit(waiting_scatter_shard_map(true))(x);
  EXPECT_TRUE(sp::allclose(gathered, (x.reshape({8, 8, 6}) * 3.0f).sum({0}), 1e-5, 1e-2))
      << gathered;
  EXPECT_TRUE(sp::allclose(late, sp::sin(x) * 8.0f, 1e-5, 1e-4)) << late;
}

TEST(CombineCollectives, CollectivesOverDifferentGroupsOrParamsMeetApart) {
  sp::ShardMapOptions unchecked;
  unchecked.check_vma = false;
  auto body = [](const Array& x) {
    return std::make_tuple(sp::psum(x, "b"), sp::psum(x * 2.0f, "m"),
                           sp::psum(x * 3.0f, sp::axes("b", "m")),
                           sp::all_gather(x, "m", {.axis = 0, .tiled = true}),
                           sp::all_gather(x, "m", {.axis = 1, .tiled = true}));
  };
  auto f = sp::shard_map(body, mesh_4x2(), {P("b", "m")},
                         {P(sp::None, "m"), P("b"), P(), P("b"), P("b")}, unchecked);
  const Array x = rows(8, 4);
  const sp::Program after =
      sp::combine_collectives(sp::local_work_before_collectives(per_device(f, x)));
  EXPECT_EQ(operand_counts(after, "psum"), (std::vector<size_t>{1, 1, 1})) << after.str();
  EXPECT_EQ(operand_counts(after, "all_gather"), (std::vector<size_t>{1, 1})) << after.str();
  auto [over_b, over_m, over_all, rows_m, cols_m] = sp::jit(f)(x);
  const Array blocks = x.reshape({4, 2, 2, 2}).transpose({0, 2, 1, 3});  // [b, m, 2, 2]
  EXPECT_TRUE(sp::allclose(over_all, (blocks * 3.0f).sum({0, 1}), 1e-5, 1e-3)) << over_all;
  EXPECT_EQ(cols_m.to_vector<float>(), x.to_vector<float>());
  EXPECT_EQ(rows_m.to_vector<float>(), blocks.reshape({16, 2}).to_vector<float>());
  EXPECT_TRUE(sp::allclose(over_b, blocks.sum({0}).transpose({1, 0, 2}).reshape({2, 4}), 1e-5,
                           1e-3))
      << over_b;
}

}  // namespace

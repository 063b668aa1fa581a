// Uneven splits inside jit, against JAX 0.10.2 (tools/goldens/gen_uneven.py): a constraint that
// splits a dim not divisible by its mesh axes is computed on padded blocks of the ceil size, the
// padding kept out of sums, maxima, minima and dots, and results leave jit split as JAX splits
// them (uneven dims gathered). Shape ops that keep the padded layout run on the padded blocks
// too, with no gather, and so do loop and cond bodies whose carries are split unevenly; vmap of a
// while_loop keeps its rows split, its predicate an or over the devices. Uneven in_shardings and
// out_shardings raise JAX's error.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "sharding/golden_cases.h"
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

using sharding_test::placed;
using sharding_test::placed_here;

class UnevenTest : public ::testing::Test {
 public:
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"a", "b"});
  sp::Mesh mesh8 = sp::make_mesh({8}, {"x"});
  Array x = sp::arange(60.0f).reshape({10, 6});
  Array v = sp::arange(18.0f).reshape({6, 3}) / 8;
  Array y = sp::arange(30.0f).reshape({10, 3}) - 12;
  Array z = sp::arange(12.0f).reshape({12, 1}) * sp::ones({1, 4});
  Array r10 = sp::arange(10.0f);
  Array i10 = sp::arange(40).reshape({10, 4}) - 100;
  Array x3 = sp::arange(60.0f).reshape({10, 1, 6}) - 40;
  Array xs = sp::arange(120.0f).reshape({4, 10, 3}) / 10 - 5;

  sp::NamedSharding S(sp::PartitionSpec spec) const { return sp::NamedSharding(mesh, spec); }
  Array wsc(const Array& u, sp::PartitionSpec spec) const {
    return sp::with_sharding_constraint(u, S(spec));
  }
  Array wsc8(const Array& u) const {
    return sp::with_sharding_constraint(u, sp::NamedSharding(mesh8, P("x")));
  }

  // Compares the leaves of a case with JAX's: where they are and their values. `group` is the
  // prefix of the golden files ("shape_" for uneven/shape_results.txt and shape_values.npz).
  static void expect_jax(const std::string& name, const std::vector<Array>& leaves,
                         const std::string& group = "") {
    static auto* groups = new std::map<std::string, std::map<std::string, std::string>>();
    if (!groups->count(group))
      (*groups)[group] = spmd_test::golden_blocks("uneven/" + group + "results.txt");
    const auto& blocks = groups->at(group);
    ASSERT_TRUE(blocks.count(name)) << "no golden case " << name;
    EXPECT_EQ(placed(leaves), placed_here(blocks.at(name), leaves)) << name;
    const auto& values = spmd_test::load_golden("uneven/" + group + "values.npz");
    for (size_t i = 0; i < leaves.size(); ++i)
      EXPECT_TRUE(
          spmd_test::arrays_close(leaves[i], values.at(name + "/" + std::to_string(i)), 2e-6, 1e-5))
          << name << " leaf " << i;
  }
};

struct Case {
  std::string name;
  std::function<std::vector<Array>()> run;
};

// Runs each case and compares it with JAX's. The padded blocks stay on the devices: nothing is
// gathered to the host.
void run_cases(const std::vector<Case>& cases, const std::string& group) {
  for (const Case& c : cases) {
    sp::runtime::reset_transfer_stats();
    std::vector<Array> leaves = c.run();
    for (const Array& leaf : leaves) leaf.block_until_ready();
    EXPECT_EQ(sp::runtime::transfer_stats().device_to_host_bytes, 0) << c.name;
    UnevenTest::expect_jax(c.name, leaves, group);
  }
}

TEST_F(UnevenTest, ResultsAndSplitsAreJaxs) {
  auto jit1 = [](auto f, const Array& a) { return std::vector<Array>{sp::jit(f)(a)}; };
  auto jit2 = [](auto f, const Array& a, const Array& b) {
    return std::vector<Array>{sp::jit(f)(a, b)};
  };
  const std::vector<Case> cases = {
      {"elementwise",
       [&] { return jit1([&](const Array& u) { return sp::sin(wsc(u * 2, P("a"))) + 1; }, x); }},
      {"constraint_output",
       [&] { return jit1([&](const Array& u) { return wsc(u * 2, P("a", "b")); }, x); }},
      {"constraint_output_tuple",
       [&] { return jit1([&](const Array& u) { return wsc(u + 1, P(sp::axes("a", "b"))); }, z); }},
      {"sum_padded_dim",
       [&] { return jit1([&](const Array& u) { return (wsc(u, P("a", "b")) + 1).sum({0}); }, x); }},
      {"sum_other_dim",
       [&] { return jit1([&](const Array& u) { return (wsc(u, P("a", "b")) + 1).sum({1}); }, x); }},
      {"sum_all",
       [&] { return jit1([&](const Array& u) { return (wsc(u, P("a")) + 1).sum(); }, x); }},
      {"max_padded_dim",
       [&] { return jit1([&](const Array& u) { return wsc(-u - 1, P("a")).max({0}); }, x); }},
      {"min_padded_dim",
       [&] { return jit1([&](const Array& u) { return wsc(u + 1, P("a")).min({0}); }, x); }},
      {"max_int",
       [&] { return jit1([&](const Array& u) { return wsc(u * 2, P("a")).max({0}); }, i10); }},
      {"min_int",
       [&] { return jit1([&](const Array& u) { return wsc(-u, P("a")).min({0}); }, i10); }},
      {"dot_padded_contracting",
       [&] {
         return jit2(
             [&](const Array& u, const Array& w) {
               return sp::matmul(wsc(u, P(None, "a")) + 1, wsc(w, P("a")) + 1);
             },
             x.T(), y);
       }},
      {"dot_padded_rows",
       [&] {
         return jit2(
             [&](const Array& u, const Array& w) { return sp::matmul(wsc(u, P("a")) + 1, w); }, x,
             v);
       }},
      {"dot_padded_rows_summed",
       [&] {
         return jit2([&](const Array& u,
                         const Array& w) { return sp::matmul(wsc(u, P("a")) + 1, w).sum({0}); },
                     x, v);
       }},
      {"committed_then_uneven",
       [&] {
         return jit1([&](const Array& u) { return (wsc(u, P("a", "b")) + 1).sum({0}); },
                     sp::device_put(x, S(P(None, "b"))));
       }},
      {"empty_blocks_sum",
       [&] { return jit1([&](const Array& u) { return (wsc8(u + 1) * 3).sum(); }, r10); }},
      {"empty_blocks_max",
       [&] { return jit1([&](const Array& u) { return wsc8(-u - 1).max(); }, r10); }},
      {"empty_blocks_output",
       [&] { return jit1([&](const Array& u) { return wsc8(u + 1) * 2; }, r10); }},
  };
  run_cases(cases, "");
}

TEST_F(UnevenTest, AChainInOneJitIsJaxs) {
  auto chain = sp::jit([&](const Array& u, const Array& w) {
    Array h = sp::exp(wsc(u * 0.05f, P("a", "b")));
    h = sp::matmul(wsc(h, P("a")), w);
    Array t = wsc(h.T() + 1, P(None, "a"));
    return std::make_tuple(h.sum({0}), (t - 3).max({1}), sp::tanh(t).min({0}), t);
  });
  sp::runtime::reset_transfer_stats();
  auto [s, m, n, t] = chain(x, v);
  t.block_until_ready();
  EXPECT_EQ(sp::runtime::transfer_stats().device_to_host_bytes, 0);
  expect_jax("chain", {s, m, n, t});
}

// The per-device program works on blocks of the ceil size: 10 rows over 'a' are blocks of 3,
// and nothing runs on gathered whole operands.
TEST_F(UnevenTest, DevicesComputeOnPaddedBlocks) {
  auto f = sp::jit([&](const Array& u) { return (wsc(u, P("a", "b")) + 1).sum({0}); });
  const std::string text = f.explain(x);
  EXPECT_NE(text.find("f32[3,3]"), std::string::npos) << text;
  EXPECT_EQ(text.find("whole operands"), std::string::npos) << text;
  EXPECT_NE(text.find("psum over 'a'"), std::string::npos) << text;
}

std::vector<Array> padded_chain(const UnevenTest& t, const Array& u) {
  const Array b = sp::broadcast_to(sp::expand_dims(t.wsc(-u - 1, P("a")).T(), {0}), {2, 6, 10}) * 2;
  return {b.max({0, 2}), sp::squeeze(sp::lax::slice_in_dim(b, 0, 1), {0}).min({1})};
}

// Reductions over the padded dim after each shape op see negative values: padding that reached
// them unmasked would win a max.
TEST_F(UnevenTest, ShapeOpsKeepPaddedBlocks) {
  auto jit1 = [](auto f, const Array& a) { return std::vector<Array>{sp::jit(f)(a)}; };
  const std::vector<Case> cases = {
      {"transpose_max_padded",
       [&] { return jit1([&](const Array& u) { return wsc(-u - 1, P("a")).T().max({1}); }, x); }},
      {"transpose_min_other",
       [&] {
         return jit1([&](const Array& u) { return (wsc(u + 1, P("a", "b")).T() * 2).min({0}); }, x);
       }},
      {"transpose_output",
       [&] { return jit1([&](const Array& u) { return wsc(u * 2, P("a", "b")).T() + 1; }, x); }},
      {"broadcast_expand",
       [&] {
         return jit1(
             [&](const Array& u) {
               return sp::broadcast_to(sp::expand_dims(wsc(u - 30, P("a")), {1}), {10, 4, 6})
                   .max({1, 2});
             },
             x);
       }},
      {"broadcast_padded_max",
       [&] {
         return jit1(
             [&](const Array& u) {
               return sp::broadcast_to(wsc(-u - 1, P("a")), {3, 10, 6}).max({0, 1});
             },
             x);
       }},
      {"squeeze",
       [&] {
         return jit1([&](const Array& u) { return sp::squeeze(wsc(u, P("a")), {1}).max({0}); }, x3);
       }},
      {"reshape_whole_dim",
       [&] {
         return jit1(
             [&](const Array& u) {
               return wsc(-u, P("a")).reshape({10, 2, 3}).max({0, 2});
             },
             x);
       }},
      {"convert_max",
       [&] {
         return jit1(
             [&](const Array& u) { return sp::astype(wsc(-u - 1, P("a")), sp::int32).max({0}); },
             x);
       }},
      {"concatenate_other",
       [&] {
         return jit1(
             [&](const Array& u) {
               return sp::concatenate({wsc(-u - 1, P("a")), u - 70}, 1).max({0});
             },
             x);
       }},
      {"pad_other",
       [&] {
         return jit1(
             [&](const Array& u) {
               return sp::pad(wsc(-u - 1, P("a")), {{0, 0}, {1, 2}}, Array(-100.0f)).max({0});
             },
             x);
       }},
      {"slice_other",
       [&] {
         return jit1(
             [&](const Array& u) {
               return sp::lax::slice_in_dim(wsc(-u - 1, P("a")), 1, 4, 1, 1).max({0});
             },
             x);
       }},
      {"cumsum_other",
       [&] {
         return jit1([&](const Array& u) { return sp::cumsum(wsc(-u, P("a")), 1).max({0}); }, x);
       }},
      {"dynamic_slice_whole",
       [&] {
         return std::vector<Array>{sp::jit([&](const Array& u, const Array& i) {
           return sp::lax::dynamic_slice(wsc(-u - 1, P("a")), {i, i}, {10, 3}).max({0});
         })(x, Array(2))};
       }},
      {"device_put_inside",
       [&] {
         return jit1(
             [&](const Array& u) {
               return sp::device_put(wsc(-u - 1, P("a")), sp::devices()[0]).max({0});
             },
             x);
       }},
      {"empty_blocks_transpose",
       [&] { return jit1([&](const Array& u) { return wsc8(-u - 1).T().max({1}); }, x); }},
      {"padded_chain",
       [&] { return sp::jit([&](const Array& u) { return padded_chain(*this, u); })(x); }},
  };
  run_cases(cases, "shape_");
}

// The padded dim moves through the transpose, the broadcast, the slice and the squeeze: each
// device keeps its block of 3 rows (now the minor dim) and nothing is gathered.
TEST_F(UnevenTest, ShapeOpsDoNotGatherThePaddedDim) {
  auto f = sp::jit([&](const Array& u) { return padded_chain(*this, u); });
  const std::string text = f.explain(x);
  EXPECT_NE(text.find("f32[2,6,3]"), std::string::npos) << text;
  EXPECT_EQ(text.find("all_gather"), std::string::npos) << text;
  EXPECT_EQ(text.find("whole operands"), std::string::npos) << text;
}

Array fori_body(const Array& i, const Array& c) {
  return sp::sin(c) + c.max({0}) * 0.5f - i;
}

// Moves data along the padded dim: each step would gather it.
Array rolled_body(const Array&, const Array& c) {
  return sp::roll(c, 1, 0) * 0.5f + c.max({0});
}

// Each device runs the loops on its padded block of the carry: the maxima inside the bodies and
// the while's predicate mask the padding (the values are negative, so padding would win).
TEST_F(UnevenTest, LoopCarriesKeepPaddedBlocks) {
  auto jit1 = [](auto f, const Array& a) { return std::vector<Array>{sp::jit(f)(a)}; };
  auto fori = [&](const Array& u, sp::PartitionSpec spec, int64_t steps, const sp::Mesh& on) {
    return sp::lax::fori_loop(0, steps, fori_body,
                              sp::with_sharding_constraint(-u - 1, sp::NamedSharding(on, spec)));
  };
  auto cond = [&](const Array& u, const Array& p) {
    return sp::lax::cond(
        p, [](const Array& c) { return (-c).max({0}); },
        [](const Array& c) { return (c.T() * 2).T().min({0}); }, wsc(u + 1, P("a")));
  };
  const std::vector<Case> cases = {
      {"fori_padded_carry",
       [&] { return jit1([&](const Array& u) { return fori(u, P("a"), 3, mesh); }, x); }},
      {"fori_padded_carry_max",
       [&] { return jit1([&](const Array& u) { return fori(u, P("a"), 3, mesh).max({0}); }, x); }},
      {"while_padded_predicate",
       [&] {
         return jit1(
             [&](const Array& u) {
               return sp::lax::while_loop([](const Array& c) { return c.max() > -50; },
                                          [](const Array& c) { return c * 2 - 1; },
                                          wsc(-u - 1, P("a")));
             },
             x);
       }},
      {"scan_padded_xs",
       [&] {
         auto [c, ys] = sp::jit([&](const Array& u) {
           return sp::lax::scan(
               [](const Array& c, const Array& r) {
                 const Array next = c + r;
                 return std::make_pair(next, next - next.max({0}));
               },
               wsc(u[0] * 0 - 1, P("a")), wsc(u, P(None, "a")));
         })(xs);
         return std::vector<Array>{c, ys};
       }},
      {"cond_padded_true", [&] { return std::vector<Array>{sp::jit(cond)(x, Array(true))}; }},
      {"cond_padded_false", [&] { return std::vector<Array>{sp::jit(cond)(x, Array(false))}; }},
      {"fori_rolled_carry",
       [&] {
         return jit1(
             [&](const Array& u) {
               return sp::lax::fori_loop(0, 3, rolled_body, wsc(-u - 1, P("a"))).max({0});
             },
             x);
       }},
      {"fori_empty_blocks",
       [&] { return jit1([&](const Array& u) { return fori(u, P("x"), 2, mesh8).max({0}); }, x); }},
  };
  run_cases(cases, "loop_");
}

// The carry enters the loop as the padded blocks of 3 rows it already is and leaves it so:
// no all_gather before, in or after the loop; the max in the body is completed by a pmax in
// each step, and the one after it by a pmax too.
TEST_F(UnevenTest, LoopsDoNotGatherAPaddedCarry) {
  auto f = sp::jit([&](const Array& u) {
    return sp::lax::fori_loop(0, 3, fori_body, wsc(-u - 1, P("a"))).max({0});
  });
  const std::string text = f.explain(x);
  EXPECT_EQ(text.find("all_gather"), std::string::npos) << text;
  EXPECT_NE(text.find("b:f32[3,6]. let"), std::string::npos) << text;
  EXPECT_NE(text.find("each step: pmax completes"), std::string::npos) << text;
}

// A body that moves data along the padded dim gets the carry gathered once, before the loop,
// rather than in every step.
TEST_F(UnevenTest, ALoopThatMovesThePaddedDimGathersItOnce) {
  auto f = sp::jit([&](const Array& u) {
    return sp::lax::fori_loop(0, 3, rolled_body, wsc(-u - 1, P("a"))).max({0});
  });
  const std::string text = f.explain(x);
  EXPECT_NE(text.find("all_gather over 'a' along dim 0: operand 1 of scan"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("each step: all_gather"), std::string::npos) << text;
}

Array rows_until(const Array& c) {
  return sp::lax::while_loop([](const Array& r) { return r.sum() < 100; },
                             [](const Array& r) { return r * 2 + 1; }, c);
}

// vmap of a while_loop with a per-row predicate keeps its rows split: every device runs until
// the last row anywhere is done, finished rows kept, and padding rows do not keep it running.
// A predicate reading per-row limits the body does not see runs with every row on every device.
TEST_F(UnevenTest, BatchedWhileKeepsItsRowsSplit) {
  const Array x8 = sp::lax::slice_in_dim(x, 0, 8) / 10;
  const std::vector<Case> cases = {
      {"batched_while_even",
       [&] {
         return std::vector<Array>{sp::jit(sp::vmap(rows_until))(sp::device_put(x8, S(P("a"))))};
       }},
      {"batched_while_tuple_axes",
       [&] {
         return std::vector<Array>{
             sp::jit(sp::vmap(rows_until))(sp::device_put(x8, S(P(sp::axes("a", "b")))))};
       }},
      {"batched_while_row_limits",
       [&] {
         auto f = [](const Array& r, const Array& t) {
           return sp::lax::while_loop([&t](const Array& c) { return c.sum() < t; },
                                      [](const Array& c) { return c * 2 + 1; }, r);
         };
         return std::vector<Array>{
             sp::jit(sp::vmap(f))(sp::device_put(x8, S(P("a"))), sp::arange(8.0f) * 40)};
       }},
      {"batched_while_padded",
       [&] {
         return std::vector<Array>{sp::jit([&](const Array& u) {
           return sp::vmap(rows_until)(wsc(u / 10, P("a"))).sum({1});
         })(x)};
       }},
  };
  run_cases(cases, "lane_");
}

// Each device loops on its 2 rows; the predicate is an or over the devices in each step (a
// pmax), nothing is gathered.
TEST_F(UnevenTest, BatchedWhileReducesItsPredicateOverDevices) {
  const Array x8 = sp::device_put(sp::lax::slice_in_dim(x, 0, 8) / 10, S(P("a")));
  const std::string text = sp::jit(sp::vmap(rows_until)).explain(x8);
  EXPECT_EQ(text.find("all_gather"), std::string::npos) << text;
  EXPECT_NE(text.find("f32[2,6]"), std::string::npos) << text;
  EXPECT_NE(text.find("pmax[axes=('a',)"), std::string::npos) << text;
  EXPECT_NE(text.find("pmax over 'a': in cond_jaxpr of while"), std::string::npos) << text;
  // Per-row limits read by the predicate only: every device holds every row in the loop.
  auto limited = [](const Array& r, const Array& t) {
    return sp::lax::while_loop([&t](const Array& c) { return c.sum() < t; },
                               [](const Array& c) { return c * 2 + 1; }, r);
  };
  const std::string whole = sp::jit(sp::vmap(limited)).explain(x8, sp::arange(8.0f) * 40);
  EXPECT_EQ(whole.find("pmax"), std::string::npos) << whole;
  EXPECT_NE(whole.find("f32[8,6]"), std::string::npos) << whole;
}

TEST_F(UnevenTest, UnevenJitShardingsRaiseJaxsError) {
  auto expect_error = [](const std::function<void()>& f, const std::string& name) {
    EXPECT_EQ(spmd_test::error_message<sp::ShardingError>(f),
              "[jit] " + spmd_test::jax_error("uneven/errors.txt", name));
  };
  expect_error(
      [&] { sp::jit([](const Array& u) { return u * 2; }, {.out_shardings = S(P("a"))})(x); },
      "out_shardings_uneven");
  expect_error(
      [&] { sp::jit([](const Array& u) { return u * 2; }, {.in_shardings = S(P("a"))})(x); },
      "in_shardings_uneven");
}

}  // namespace

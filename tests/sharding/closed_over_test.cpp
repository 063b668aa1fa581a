// Arrays a jitted function closes over, against JAX 0.10.2 (goldens from
// tools/goldens/gen_closed_over.py; the cases use its names). JAX's lowering embeds them as
// constants, committed or not, and Shardy's splitter gives each use its own copy, so each use
// takes the split of its other operand and nothing moves. spmd copies the array per use too,
// lays each copy out once per compiled placement, and passes those blocks on later calls. Each
// case checks the printed shardings, the values, and the collectives of `explain` against those
// of XLA's compiled program; the slices of constants split along the sliced dim compute the
// constant's block in place.
#include <gtest/gtest.h>
#include <spmd/spmd.h>

#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "support/golden.h"

namespace {

namespace sp = spmd;
using sp::Array;
using sp::None;
using sp::P;

// The golden block of `name`: the result shardings, then "collectives: ..." (XLA's, sorted).
struct Golden {
  std::string shardings;
  std::string collectives;
};

Golden golden(const std::string& name) {
  const auto blocks = spmd_test::golden_blocks("sharding/closed_over.txt");
  auto it = blocks.find(name);
  if (it == blocks.end()) return {"(missing golden " + name + ")", ""};
  std::string text = it->second;
  // JAX prints the spec of a [16, 16] result whose trailing dim it never split without it
  // (P('a',)); spmd prints every dim, and the two specs are the same.
  for (size_t at; (at = text.find("P('a',)")) != std::string::npos;)
    text.replace(at, 7, "P('a', None)");
  const size_t at = text.find("collectives: ");
  return {text.substr(0, at == 0 ? 0 : at - 1), text.substr(at + 13)};
}

template <class T>
std::string reprs(const T& tree) {
  return spmd_test::sharding_reprs(sp::tree_flatten(tree).first);
}

// The bytes the runtime moves while f runs.
int64_t moved_bytes(const std::function<void()>& f) {
  sp::runtime::reset_transfer_stats();
  f();
  return sp::runtime::transfer_stats().total_bytes();
}

template <class T>
void wait(const T& tree) {
  for (const Array& a : sp::tree_flatten(tree).first) a.block_until_ready();
}

// XLA's name of a collective spelt as spmd's ("all-to-all" as "all_to_all").
std::string spmd_name(std::string kind) {
  for (char& ch : kind)
    if (ch == '-') ch = '_';
  return kind;
}

class ClosedOverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sp::device_count() < 8) GTEST_SKIP() << "needs 8 devices (SPMD_CPU_DEVICES=8)";
  }

  // jit(f) on `args`: the shardings against the golden, the values against f on unsplit
  // arrays, the collectives of `explain` against XLA's (none, or XLA's one kind), and, when
  // nothing moves, no byte moved by the calls after the first.
  template <class F, class... A>
  void expect_case(const std::string& name, F f, const A&... args) {
    auto jitted = sp::jit(f);
    const auto r = jitted(args...);
    const Golden g = golden(name);
    EXPECT_EQ(reprs(r), g.shardings) << name;
    const auto got = sp::tree_flatten(r).first;
    const auto want = sp::tree_flatten(f(sp::device_get(args)...)).first;
    ASSERT_EQ(got.size(), want.size()) << name;
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(spmd_test::arrays_close_ulp(sp::device_get(got[i]), sp::device_get(want[i]), 2))
          << name << " result " << i;
    const std::string account = jitted.explain(args...);
    if (g.collectives == "-") {
      EXPECT_NE(account.find("collectives: none"), std::string::npos) << name << ":\n" << account;
      EXPECT_EQ(moved_bytes([&] { wait(jitted(args...)); }), 0) << name;
    } else {
      EXPECT_NE(account.find(spmd_name(g.collectives)), std::string::npos)
          << name << ":\n" << account;
    }
  }

  sp::Mesh m = sp::make_mesh({8}, {"a"});
  Array x = sp::arange(256.0f).reshape({16, 16});
  Array u = sp::device_put(x, sp::NamedSharding(m, P("a", None)));
  Array v = sp::device_put(x, sp::NamedSharding(m, P(None, "a")));
  Array c = sp::arange(256.0f).reshape({16, 16}) + 1.0f;
};

TEST_F(ClosedOverTest, EachUseTakesItsOwnSplitAndNothingMoves) {
  const Array c = this->c;
  expect_case("closed_over", [c](const Array& a, const Array& b) {
    return std::make_tuple(c * a, c * b);
  }, u, v);
  expect_case("closed_over_derived", [c](const Array& a, const Array& b) {
    const Array d = sp::sin(c) + 1.0f;
    return std::make_tuple(d * a, d * b);
  }, u, v);
}

// A committed array closed over is a constant too: its split and devices ask for nothing.
TEST_F(ClosedOverTest, ACommittedArrayIsAConstantToo) {
  const Array split = sp::device_put(c, sp::NamedSharding(m, P("a", None)));
  expect_case("closed_over_committed", [split](const Array& a, const Array& b) {
    return std::make_tuple(split * a, split * b);
  }, u, v);
  const std::vector<sp::Device> all = sp::devices();
  const sp::Mesh upper({all[4], all[5], all[6], all[7]}, {4}, {"b"});
  const Array elsewhere = sp::device_put(c, sp::NamedSharding(upper, P("b")));
  expect_case("closed_over_elsewhere", [elsewhere](const Array& a, const Array& b) {
    return std::make_tuple(elsewhere * a, elsewhere * b);
  }, u, v);
}

TEST_F(ClosedOverTest, UsesUnderGradTakeTheirOwnSplits) {
  const Array c = this->c;
  auto loss = [c](const std::tuple<Array, Array>& ab) {
    const auto& [a, b] = ab;
    return sp::sum(c * a * a) + sp::sum(c * b * b);
  };
  expect_case("closed_over_grad", [loss](const Array& a, const Array& b) {
    return sp::grad(loss)(std::make_tuple(a, b));
  }, u, v);
}

TEST_F(ClosedOverTest, AReturnedArrayLeavesReplicated) {
  const Array c = this->c;
  expect_case("closed_over_returned", [c](const Array& a, const Array& b) {
    return std::make_tuple(c, c * a, c * b);
  }, u, v);
}

// A constraint is one value with one split; the uses that do not read it keep their own.
TEST_F(ClosedOverTest, AConstrainedArrayIsOneValue) {
  const Array c = this->c;
  const sp::NamedSharding rows(m, P("a"));
  expect_case("closed_over_constrained", [c, rows](const Array& a, const Array& b) {
    const Array d = sp::with_sharding_constraint(c, rows);
    return std::make_tuple(d * a, d * b);
  }, u, v);
  expect_case("closed_over_constrained_once", [c, rows](const Array& a, const Array& b) {
    return std::make_tuple(sp::with_sharding_constraint(c, rows) * a, c * b);
  }, u, v);
}

// Each copy is laid out once per compiled placement: the first call moves the blocks of both
// copies to the devices of this process that hold them, later calls nothing.
TEST_F(ClosedOverTest, EachCopyIsLaidOutOnce) {
  const Array c = this->c;
  auto jitted = sp::jit([c](const Array& a, const Array& b) {
    return std::make_tuple(c * a, c * b);
  });
  const int64_t first = moved_bytes([&] { wait(jitted(u, v)); });
  EXPECT_EQ(first, 2 * c.nbytes() * sp::local_device_count() / sp::device_count());
  for (int call = 0; call < 2; ++call)
    EXPECT_EQ(moved_bytes([&] { wait(jitted(u, v)); }), 0) << "call " << call + 2;
}

// A slice of a constant split along the sliced dim: each device computes its block of the
// constant (XLA moves a halo of the iota, and nothing for the others).
TEST_F(ClosedOverTest, ASliceOfAConstantIsComputedInPlace) {
  const Array c = this->c;
  auto in_place = [](const std::string& name, const std::function<Array(const Array&)>& f,
                     const Array& arg) {
    auto jitted = sp::jit(f);
    const Array r = jitted(arg);
    EXPECT_EQ(r.sharding()->repr(), golden(name).shardings) << name;
    EXPECT_TRUE(spmd_test::arrays_equal(sp::device_get(r), f(sp::device_get(arg)))) << name;
    const std::string account = jitted.explain(arg);
    EXPECT_NE(account.find("collectives: none"), std::string::npos) << name << ":\n" << account;
  };
  in_place("sliced_iota", [](const Array& a) {
    return sp::lax::slice(sp::lax::broadcasted_iota(sp::float32, {16, 32}, 1), {0, 8},
                          {16, 24}) * a;
  }, v);
  in_place("sliced_ones", [](const Array& a) {
    return sp::lax::slice(sp::ones({512}).reshape({16, 32}), {0, 8}, {16, 24}) * a;
  }, v);
  in_place("sliced_closed_over", [c](const Array& a) {
    return sp::lax::slice(sp::concatenate({c, c}, 1), {0, 4}, {16, 20}) * a;
  }, v);
}

}  // namespace

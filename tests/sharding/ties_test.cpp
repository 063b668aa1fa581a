// A value read by two uses that want it split alike in size but along different dims (a tie),
// against JAX 0.10.2 (goldens from tools/goldens/gen_ties.py; the cases use its names): the use
// that feeds the earlier output wins, whatever the program order, as in Shardy. Each case checks
// the result specs, the split of the value itself and the values.
#include <gtest/gtest.h>
#include <spmd/spmd.h>

#include <functional>
#include <string>
#include <tuple>

#include "support/golden.h"

namespace {

namespace sp = spmd;
using sp::Array;
using sp::None;
using sp::P;

using Results = std::tuple<Array, Array, Array>;
using Case = std::function<Results(const Array&, const Array&, const Array&)>;

// The value both uses read: not a constant expression, so it is one value with one split.
Array o_of(const Array& w) {
  return sp::cumsum(sp::sin(w), 1);
}

class TiesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sp::device_count() < 8) GTEST_SKIP() << "needs 8 devices (SPMD_CPU_DEVICES=8)";
  }

  // The specs of jit(f)'s results, one a line, the last (o itself) as "o: <spec>".
  void expect_case(const std::string& name, const Case& f) {
    const Results r = sp::jit(f)(u, v, w);
    const Array* leaves[] = {&std::get<0>(r), &std::get<1>(r), &std::get<2>(r)};
    std::string text;
    for (int i = 0; i < 3; ++i) {
      const auto* s = dynamic_cast<const sp::NamedSharding*>(leaves[i]->sharding().get());
      ASSERT_NE(s, nullptr) << name;
      text += (i == 2 ? "o: " : "") + s->spec().repr() + "\n";
    }
    EXPECT_EQ(canonical(text),
              canonical(spmd_test::golden_blocks("sharding/ties.txt").at(name) + "\n"))
        << name;
    const Results want = f(x, x, w);
    EXPECT_TRUE(spmd_test::arrays_close_ulp(sp::device_get(std::get<0>(r)), std::get<0>(want), 2));
    EXPECT_TRUE(spmd_test::arrays_close_ulp(sp::device_get(std::get<1>(r)), std::get<1>(want), 2));
    EXPECT_TRUE(spmd_test::arrays_close_ulp(sp::device_get(std::get<2>(r)), std::get<2>(want), 2));
  }

  // Specs without their trailing unsplit dims: JAX prints some without them (P('a',)), spmd
  // every dim (P('a', None)), and the two are the same split.
  static std::string canonical(std::string text) {
    for (std::string shorter; ; text = shorter) {
      shorter.clear();
      for (size_t i = 0; i < text.size();) {
        const size_t tail = text.compare(i, 7, ", None)") == 0 ? 7
                            : text.compare(i, 2, ",)") == 0   ? 2
                                                              : 0;
        shorter += tail ? ')' : text[i];
        i += tail ? tail : 1;
      }
      if (shorter == text) return text;
    }
  }

  sp::Mesh m = sp::make_mesh({8}, {"a"});
  Array x = sp::arange(256.0f).reshape({16, 16});
  Array u = sp::device_put(x, sp::NamedSharding(m, P("a", None)));
  Array v = sp::device_put(x, sp::NamedSharding(m, P(None, "a")));
  Array w = x / 256.0f;  // uncommitted: its split is open
};

TEST_F(TiesTest, TheUseFeedingTheEarlierOutputWins) {
  expect_case("u_first", [](const Array& a, const Array& b, const Array& c) {
    const Array o = o_of(c);
    const Array ou = o * a, ov = o * b;
    return Results{ou, ov, o};
  });
  expect_case("v_first", [](const Array& a, const Array& b, const Array& c) {
    const Array o = o_of(c);
    const Array ov = o * b, ou = o * a;
    return Results{ou, ov, o};
  });
  expect_case("v_first_returned_second", [](const Array& a, const Array& b, const Array& c) {
    const Array o = o_of(c);
    const Array ov = o * b, ou = o * a;
    return Results{ov, ou, o};
  });
  expect_case("operand_order", [](const Array& a, const Array& b, const Array& c) {
    const Array o = o_of(c);
    return Results{a * o, o * b, o};
  });
}

TEST_F(TiesTest, AnOutputReducedFromOneUseStillLeads) {
  expect_case("summed", [](const Array& a, const Array& b, const Array& c) {
    const Array o = o_of(c);
    return Results{sp::sum(o * b, {0}), sp::sum(o * a, {1}), o};
  });
  expect_case("cumsum_of_ones", [](const Array& a, const Array& b, const Array&) {
    const Array o = sp::cumsum(sp::ones({16, 16})).reshape({16, 16});
    return Results{o * a, o * b, o};
  });
}

}  // namespace

// Params: sorted by name, typed access, equality and hashing for caches.
#include "ir/params.h"

#include <gtest/gtest.h>

namespace sp = spmd;

TEST(Params, KeepsEntriesSortedByName) {
  sp::Params p{{"shape", std::vector<int64_t>{2, 3}}, {"dimension", int64_t(1)},
               {"dtype", sp::float32}};
  ASSERT_EQ(p.items().size(), 3u);
  EXPECT_EQ(p.items()[0].first, "dimension");
  EXPECT_EQ(p.items()[1].first, "dtype");
  EXPECT_EQ(p.items()[2].first, "shape");
  EXPECT_EQ(p.get_int("dimension"), 1);
  EXPECT_EQ(p.get_ints("shape"), (std::vector<int64_t>{2, 3}));
  p.set("dimension", int64_t(0));
  EXPECT_EQ(p.get_int("dimension"), 0);
  EXPECT_EQ(p.items().size(), 3u);
}

TEST(Params, EqualParamsHashEqualAndDifferentOnesDiffer) {
  sp::Params a{{"y", int64_t(2)}, {"axes", std::vector<int64_t>{0, 1}}};
  sp::Params b{{"axes", std::vector<int64_t>{0, 1}}, {"y", int64_t(2)}};
  sp::Params c{{"axes", std::vector<int64_t>{1, 0}}, {"y", int64_t(2)}};
  EXPECT_TRUE(a == b);
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_FALSE(a == c);
  EXPECT_NE(a.hash(), c.hash());
  EXPECT_THROW((void)a.at("missing"), std::logic_error);
}

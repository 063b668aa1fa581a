// Reshards inside jit between two splits of a dim its mesh axes do not divide: the padded blocks
// of the two splits do not nest, so each device gets the rows its new block lacks from the
// devices that hold them (ppermute rounds, as XLA's collective-permutes), rather than the whole
// dim. Values are exact (a reshard only moves them), compared with the unsplit array.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

namespace sp = spmd;
using sp::Array;
using sp::P;

class UnevenReshardTest : public ::testing::Test {
 public:
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"a", "b"});
  sp::Mesh mesh24 = sp::make_mesh({2, 4}, {"a", "b"});

  // The split `to` of x split as `from` inside jit, with both constraints on values jit computes.
  static auto moved(const sp::Mesh& m, sp::PartitionSpec from, sp::PartitionSpec to) {
    return sp::jit([=](const Array& u) {
      const Array v = sp::with_sharding_constraint(u * 2, sp::NamedSharding(m, from));
      return sp::with_sharding_constraint(v + 1, sp::NamedSharding(m, to));
    });
  }

  // As `moved`, then the sum of the rows (exact: small integers), so nothing leaves gathered and
  // the account holds the reshard's collectives and the sum's psum only.
  static auto summed(const sp::Mesh& m, sp::PartitionSpec from, sp::PartitionSpec to) {
    return sp::jit([=](const Array& u) {
      const Array v = sp::with_sharding_constraint(u * 2, sp::NamedSharding(m, from));
      return sp::with_sharding_constraint(v + 1, sp::NamedSharding(m, to)).sum({0});
    });
  }
};

struct Case {
  std::string name;
  const sp::Mesh UnevenReshardTest::*mesh;
  int64_t rows;
  sp::PartitionSpec from, to;
};

std::vector<Case> cases() {
  using T = UnevenReshardTest;
  const auto ab = sp::axes("a", "b");
  return {
      {"a_to_ab_14", &T::mesh, 14, P("a"), P(ab)},
      {"ab_to_a_14", &T::mesh, 14, P(ab), P("a")},
      {"a_to_ab_10", &T::mesh, 10, P("a"), P(ab)},
      {"ab_to_a_10", &T::mesh, 10, P(ab), P("a")},
      {"a_to_b_14", &T::mesh, 14, P("a"), P("b")},
      {"b_to_a_14", &T::mesh, 14, P("b"), P("a")},
      {"a_to_b_2x4", &T::mesh24, 10, P("a"), P("b")},
      {"b_to_a_2x4", &T::mesh24, 10, P("b"), P("a")},
      {"ab_to_ba_2x4", &T::mesh24, 13, P(ab), P(sp::axes("b", "a"))},
      {"ab_rows_to_a_b_cols", &T::mesh, 14, P(ab), P("a", "b")},
      {"a_rows_to_b_rows_a_cols", &T::mesh24, 14, P("a"), P("b", "a")},
      {"a_b_to_b_a", &T::mesh, 14, P("a", "b"), P("b", "a")},
  };
}

Array input(int64_t rows) {
  return sp::arange(float(rows * 6)).reshape({rows, 6}) - 20;
}

TEST_F(UnevenReshardTest, ValuesMatchTheUnsplitArray) {
  for (const Case& c : cases()) {
    const Array x = input(c.rows);
    const Array want = x * 2 + 1;
    const Array got = moved(this->*c.mesh, c.from, c.to)(x);
    EXPECT_TRUE(sp::array_equal(got, want)) << c.name << "\n" << got;
    const Array sum = summed(this->*c.mesh, c.from, c.to)(x);
    EXPECT_TRUE(sp::array_equal(sum, want.sum({0}))) << c.name << "\n" << sum;
  }
}

// The split dims move by ppermutes only, or, where an axis moves whole between dims whose
// padded blocks nest (ab_rows_to_a_b_cols: 'b' leaves the 14 rows, blocks of 2 in blocks of 4,
// for the 6 columns), by one all_to_all of the padded blocks: no all_gather in the account but
// the one of a sum that leaves jit split unevenly (a_b_to_b_a's columns, 6 over 'a'). 14 rows
// over 'a' (blocks of 4) nest in 14 rows over ('a', 'b') (blocks of 2): that reshard moves
// nothing.
TEST_F(UnevenReshardTest, ExplainShowsPpermutesAndNoAllGather) {
  for (const Case& c : cases()) {
    const std::string text = summed(this->*c.mesh, c.from, c.to).explain(input(c.rows));
    const bool all_to_all = c.name == "ab_rows_to_a_b_cols";
    EXPECT_EQ(text.find("ppermute over") == std::string::npos,
              c.name == "a_to_ab_14" || all_to_all)
        << c.name << "\n"
        << text;
    EXPECT_EQ(text.find("all_to_all over 'b' from dim 0 to dim 1 of the padded blocks") !=
                  std::string::npos,
              all_to_all)
        << c.name << "\n"
        << text;
    const std::string account = text.substr(text.find("collectives:"));
    for (size_t at = account.find("all_gather"); at != std::string::npos;
         at = account.find("all_gather", at + 1)) {
      const std::string line = account.substr(at, account.find('\n', at) - at);
      EXPECT_NE(line.find("output 0 leaves"), std::string::npos) << c.name << "\n" << text;
    }
  }
}

std::string ppermute_line(const std::string& text, const std::string& round) {
  const size_t at = text.find(round);
  return at == std::string::npos ? "" : text.substr(at, text.find('\n', at) - at);
}

// 14 rows over ('a', 'b') are blocks of 2 (the last device's empty); over 'a', blocks of 4.
// Device (i, 0) holds rows [4i, 4i + 2) and lacks [4i + 2, 4i + 4), which device (i, 1) holds,
// and the other way round: one round in which each device sends 2 rows of 6 float32s (48
// bytes), where an all_gather over ('a', 'b') would send 7 * 48 = 336.
TEST_F(UnevenReshardTest, ExplainGivesTheBytesOfEachRound) {
  const std::string text = summed(mesh, P(sp::axes("a", "b")), P("a")).explain(input(14));
  EXPECT_NE(ppermute_line(text, "round 1 of 1, 2 rows").find("each device sends 48 bytes"),
            std::string::npos)
      << text;
  // 10 rows over 'a' are blocks of 3 (rows [0, 3), [3, 6), [6, 9), [9, 10)), over ('a', 'b')
  // blocks of 2: device 1 lacks row 3 (device 3 holds it, in block 1), device 3 rows [6, 8)
  // (device 5, block 2) and device 4 row 9 (device 6, block 3); the rest is local. One round,
  // each device sending the longest move's 2 rows: 48 bytes, against 3 * 3 * 24 = 216.
  const std::string ten = summed(mesh, P("a"), P(sp::axes("a", "b"))).explain(input(10));
  EXPECT_NE(ppermute_line(ten, "round 1 of 1, 2 rows").find("each device sends 48 bytes"),
            std::string::npos)
      << ten;
}

}  // namespace

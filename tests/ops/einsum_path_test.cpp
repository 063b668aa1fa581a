// The contraction paths of jnp.einsum (src/ops/einsum_path.cpp) against opt_einsum's
// contract_path (tools/goldens/gen_einsum_path.py): named chains, stars, outer products, batch
// and repeated labels and ties, then random contractions of 3 to 8 operands, for each strategy.
#include <spmd/error.h>

#include "ops/einsum_path.h"
#include "support/golden.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace {

namespace path = spmd::einsum_path;

std::u32string labels(const std::string& s) {
  return std::u32string(s.begin(), s.end());
}

// One golden line: the case's problem, strategy and opt_einsum's path.
struct Line {
  std::string name, strategy, expected;
  path::Problem problem;
};

Line parse(const std::string& text) {
  const std::vector<std::string> f = spmd_test::split_fields(text, ';');
  const size_t arrow = f[1].find("->");
  std::vector<std::u32string> inputs;
  for (const std::string& term : spmd_test::split_fields(f[1].substr(0, arrow), ','))
    inputs.push_back(labels(term));
  std::vector<std::vector<int64_t>> shapes;
  for (const std::string& shape : spmd_test::split_fields(f[2], '|')) {
    shapes.emplace_back();
    if (!shape.empty())
      for (const std::string& d : spmd_test::split_fields(shape, 'x'))
        shapes.back().push_back(std::stoll(d));
  }
  return {f[0], f[3], f[4], path::make_problem(inputs, labels(f[1].substr(arrow + 2)), shapes)};
}

std::vector<Line> golden_lines() {
  std::istringstream in(spmd_test::golden_text("einsum/paths.txt"));
  std::vector<Line> out;
  for (std::string text; std::getline(in, text);)
    if (!text.empty() && text[0] != '#') out.push_back(parse(text));
  return out;
}

std::string text(const path::Path& p) {
  std::string s;
  for (const auto& step : p) {
    if (!s.empty()) s += ' ';
    for (size_t i = 0; i < step.size(); ++i) {
      if (i) s += ',';
      s += std::to_string(step[i]);
    }
  }
  return s;
}

TEST(EinsumPath, EveryStrategyPicksOptEinsumsPath) {
  const std::vector<Line> lines = golden_lines();
  ASSERT_EQ(lines.size(), 1612u);
  for (const Line& l : lines)
    EXPECT_EQ(text(path::choose(l.problem, l.strategy)), l.expected) << l.name << " " << l.strategy;
}

TEST(EinsumPath, FewOperandsAreContractedAtOnceWhateverTheStrategy) {
  const path::Problem two = path::make_problem({U"ij", U"jk"}, U"ik", {{2, 3}, {3, 4}});
  EXPECT_EQ(text(path::choose(two, "greedy")), "0,1");
  EXPECT_EQ(text(path::choose(two, "not-a-strategy")), "0,1");
  EXPECT_EQ(text(path::choose(two, false)), "0,1");
  const path::Problem one = path::make_problem({U"ii"}, U"", {{3, 3}});
  EXPECT_EQ(text(path::choose(one, "auto")), "0");
}

TEST(EinsumPath, UnoptimizedTakesTheFirstTwoEachTime) {
  const path::Problem four =
      path::make_problem({U"ab", U"bc", U"cd", U"de"}, U"ae", {{2, 3}, {3, 4}, {4, 5}, {5, 2}});
  EXPECT_EQ(text(path::choose(four, false)), "0,1 0,1 0,1");
  EXPECT_EQ(text(path::choose(four, true)), text(path::optimal(four)));
  EXPECT_EQ(text(path::choose(four, {{2, 3}, {0, 2}, {0, 1}})), "2,3 0,2 0,1");
  EXPECT_EQ(text(path::choose(four, "OPTIMAL")), text(path::optimal(four)));
}

TEST(EinsumPath, UnknownStrategiesRaiseOptEinsumsError) {
  const path::Problem three =
      path::make_problem({U"ij", U"jk", U"kl"}, U"il", {{2, 3}, {3, 4}, {4, 5}});
  EXPECT_EQ(spmd_test::error_message<spmd::ValueError>([&] { path::choose(three, "none"); }),
            "[einsum] Path optimizer 'none' not found, valid options are {'auto', 'auto-hq', "
            "'optimal', 'branch-all', 'branch-2', 'branch-1', 'greedy', 'eager', "
            "'opportunistic', 'dp', 'dynamic-programming', 'random-greedy', "
            "'random-greedy-128'}.");
  EXPECT_THROW(path::choose(three, "dp"), spmd::NotImplementedError);
}

}  // namespace

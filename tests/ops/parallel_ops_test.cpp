// Collectives with axis_index_groups under pmap against JAX 0.10.2
// (tools/goldens/gen_collective_groups.py, tests/goldens/collectives/groups.npz): pmean, pmax,
// pmin, psum_scatter and all_to_all within subgroups of an axis of 4 and of 8, a device's place in
// its group being its position in the group's list. Inputs are small integers, so every value
// is exact.
#include <spmd/parallel.h>
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "support/golden.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace sp = spmd;
using sp::Array;
using sp::AxisIndexGroups;

namespace {

using GroupsFn = std::function<Array(const Array&, const AxisIndexGroups&)>;

// The groups of gen_collective_groups.py, by name.
const std::map<std::string, AxisIndexGroups>& groups_by_name() {
  static const std::map<std::string, AxisIndexGroups> groups = {
      {"pairs", {{0, 1}, {2, 3}}},
      {"strided", {{0, 2}, {1, 3}}},
      {"halves", {{0, 1, 2, 3}, {4, 5, 6, 7}}},
      {"strided8", {{0, 2, 4, 6}, {1, 3, 5, 7}}},
      {"unordered8", {{7, 0}, {1, 6}, {5, 2}, {3, 4}}},
      {"uneven", {{0}, {1, 2, 3}}},
  };
  return groups;
}

const Array& golden(const std::string& key) {
  return spmd_test::load_golden("collectives/groups.npz").at(key);
}

// pmap over the leading dim of JAX's input (4 or 8 devices) of f with each named groups, for
// each dtype, against JAX's result.
void expect_pmap_matches_jax(const std::string& op, const GroupsFn& f,
                             const std::vector<std::string>& group_names,
                             const std::vector<std::string>& dtypes) {
  for (const std::string& name : group_names) {
    const AxisIndexGroups& groups = groups_by_name().at(name);
    for (const std::string& dtype : dtypes) {
      std::string key = op + "_" + name + "_" + dtype;
      SCOPED_TRACE(key);
      auto mapped = sp::pmap([&](const Array& v) { return f(v, groups); }, {.axis_name = "i"});
      EXPECT_TRUE(spmd_test::arrays_equal(mapped(golden(key + ".x")), golden(key + ".y")));
    }
  }
}

const std::vector<std::string> kEqualGroups = {"pairs", "strided", "halves", "strided8",
                                               "unordered8"};

TEST(PmapCollectiveGroups, PmeanAveragesWithinEachGroupAsJax) {
  expect_pmap_matches_jax("pmean",
                          [](const Array& v, const AxisIndexGroups& g) {
                            return sp::pmean(v, "i", {.axis_index_groups = g});
                          },
                          kEqualGroups, {"float32"});
}

TEST(PmapCollectiveGroups, PmaxAndPminReduceWithinEachGroupAsJax) {
  expect_pmap_matches_jax("pmax",
                          [](const Array& v, const AxisIndexGroups& g) {
                            return sp::pmax(v, "i", {.axis_index_groups = g});
                          },
                          kEqualGroups, {"float32", "int32"});
  expect_pmap_matches_jax("pmin",
                          [](const Array& v, const AxisIndexGroups& g) {
                            return sp::pmin(v, "i", {.axis_index_groups = g});
                          },
                          kEqualGroups, {"float32", "int32"});
}

// Groups of different sizes: JAX reduces within each; pmean divides by the first group's size
// (its psum(1) with groups), so the three-member group's "mean" here is its sum.
TEST(PmapCollectiveGroups, UnevenGroupsReduceAsJax) {
  expect_pmap_matches_jax("pmean",
                          [](const Array& v, const AxisIndexGroups& g) {
                            return sp::pmean(v, "i", {.axis_index_groups = g});
                          },
                          {"uneven"}, {"float32"});
  expect_pmap_matches_jax("pmax",
                          [](const Array& v, const AxisIndexGroups& g) {
                            return sp::pmax(v, "i", {.axis_index_groups = g});
                          },
                          {"uneven"}, {"float32", "int32"});
  expect_pmap_matches_jax("pmin",
                          [](const Array& v, const AxisIndexGroups& g) {
                            return sp::pmin(v, "i", {.axis_index_groups = g});
                          },
                          {"uneven"}, {"float32", "int32"});
}

TEST(PmapCollectiveGroups, PsumScatterGivesEachMemberItsPieceOfTheGroupSumAsJax) {
  expect_pmap_matches_jax("psum_scatter",
                          [](const Array& v, const AxisIndexGroups& g) {
                            return sp::psum_scatter(v, "i", {.axis_index_groups = g});
                          },
                          kEqualGroups, {"float32", "int32"});
  expect_pmap_matches_jax("psum_scatter_tiled_dim1",
                          [](const Array& v, const AxisIndexGroups& g) {
                            return sp::psum_scatter(
                                v, "i",
                                {.scatter_dimension = 1, .tiled = true, .axis_index_groups = g});
                          },
                          kEqualGroups, {"float32"});
}

TEST(PmapCollectiveGroups, AllToAllExchangesWithinEachGroupAsJax) {
  expect_pmap_matches_jax("all_to_all",
                          [](const Array& v, const AxisIndexGroups& g) {
                            return sp::all_to_all(v, "i", 0, 1, {.axis_index_groups = g});
                          },
                          kEqualGroups, {"float32", "int32"});
  expect_pmap_matches_jax("all_to_all_tiled",
                          [](const Array& v, const AxisIndexGroups& g) {
                            return sp::all_to_all(v, "i", 1, 0,
                                                  {.tiled = true, .axis_index_groups = g});
                          },
                          kEqualGroups, {"float32"});
}

// With groups of different sizes JAX's all_gather and psum_scatter fail in lowering ("Invalid
// replica id -1") and its all_to_all splits by the first group's size; JAX documents that "all
// groups must be the same size" for them. spmd raises that when the collective is traced.
TEST(PmapCollectiveGroups, UnequalGroupSizesRaiseForGatherScatterAndAllToAll) {
  const AxisIndexGroups uneven{{0}, {1, 2, 3}};
  Array x = sp::ones({4, 6, 2});
  auto expect_raises = [&](const std::string& api, const std::function<Array(const Array&)>& f) {
    SCOPED_TRACE(api);
    try {
      sp::pmap(f, {.axis_name = "i"})(x).block_until_ready();
      ADD_FAILURE() << "expected ValueError";
    } catch (const sp::ValueError& e) {
      EXPECT_EQ(std::string(e.what()), "[" + api +
                                           "] axis_index_groups must all be the same size, got "
                                           "((0,), (1, 2, 3))");
    }
  };
  expect_raises("all_gather", [&](const Array& v) {
    return sp::all_gather(v, "i", {.axis_index_groups = uneven});
  });
  expect_raises("psum_scatter", [&](const Array& v) {
    return sp::psum_scatter(v, "i", {.tiled = true, .axis_index_groups = uneven});
  });
  expect_raises("all_to_all", [&](const Array& v) {
    return sp::all_to_all(v, "i", 0, 0, {.tiled = true, .axis_index_groups = uneven});
  });
}

}  // namespace

// The collective primitives' shape rules and device kernels: each test runs one thread per device
// of a small mesh, each inside its own launch context sharing a Communicator, and compares what
// every device gets with the reference semantics (lists of per-instance values).
#include <spmd/parallel.h>
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "core/axis_env.h"
#include "prims/primitive.h"
#include "runtime/communicator.h"
#include "runtime/launch.h"

#include <exception>
#include <functional>
#include <numeric>
#include <thread>
#include <vector>

namespace sp = spmd;
using sp::Array;

namespace {

// Runs body(rank) on every device of a mesh (row-major ranks) in parallel, inside a launch.
std::vector<Array> run_on_mesh(const std::vector<int64_t>& sizes,
                               const std::vector<std::string>& names,
                               const std::function<Array(int)>& body) {
  int n = int(std::accumulate(sizes.begin(), sizes.end(), int64_t{1}, std::multiplies<>()));
  std::vector<int> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  sp::runtime::Communicator comm(ids, std::chrono::milliseconds(20000));
  std::vector<Array> out(static_cast<size_t>(n));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      sp::runtime::LaunchContext ctx{names, sizes, &comm, r, r, {}};
      sp::runtime::LaunchScope scope(&ctx);
      try {
        out[size_t(r)] = body(r);
      } catch (...) {
        errors[size_t(r)] = std::current_exception();
        comm.abort(r, "failed");
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

std::vector<float> floats(const Array& x) {
  return x.to_vector<float>();
}

// Device r's block of 1-D `values` split into n equal pieces.
Array block(const std::vector<float>& values, int n, int r) {
  size_t k = values.size() / size_t(n);
  return sp::array(
      std::vector<float>(values.begin() + long(r * k), values.begin() + long((r + 1) * k)));
}

const std::vector<float> kWorked = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 1, 2};

TEST(CollectivePrims, PsumGivesEveryDeviceTheSum) {
  auto out = run_on_mesh({4}, {"i"}, [](int r) { return sp::psum(block(kWorked, 4, r), "i"); });
  for (const Array& y : out) EXPECT_EQ(floats(y), (std::vector<float>{22, 20, 12, 17}));
}

TEST(CollectivePrims, PsumOfBoolCountsAsInt32) {
  auto out = run_on_mesh({4}, {"i"}, [](int r) { return sp::psum(Array(r % 2 == 0), "i"); });
  for (const Array& y : out) {
    EXPECT_EQ(y.dtype(), sp::int32);
    EXPECT_EQ(y.item<int>(), 2);
  }
}

TEST(CollectivePrims, PmeanPmaxPminOverOneAxis) {
  auto mean = run_on_mesh({4}, {"i"}, [](int r) { return sp::pmean(block(kWorked, 4, r), "i"); });
  auto max = run_on_mesh({4}, {"i"}, [](int r) { return sp::pmax(block(kWorked, 4, r), "i"); });
  auto min = run_on_mesh({4}, {"i"}, [](int r) { return sp::pmin(block(kWorked, 4, r), "i"); });
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(floats(mean[size_t(r)]), (std::vector<float>{5.5f, 5.0f, 3.0f, 4.25f}));
    EXPECT_EQ(floats(max[size_t(r)]), (std::vector<float>{9, 9, 5, 8}));
    EXPECT_EQ(floats(min[size_t(r)]), (std::vector<float>{3, 1, 1, 1}));
  }
}

// Mesh (x=2, y=4): device r has value r. Over y the groups are rows, over x columns.
TEST(CollectivePrims, PsumOverMeshAxesAndTuples) {
  auto value = [](int r) { return Array(float(r)); };
  auto over_y = run_on_mesh({2, 4}, {"x", "y"}, [&](int r) { return sp::psum(value(r), "y"); });
  auto over_x = run_on_mesh({2, 4}, {"x", "y"}, [&](int r) { return sp::psum(value(r), "x"); });
  auto over_xy = run_on_mesh({2, 4}, {"x", "y"},
                             [&](int r) { return sp::psum(value(r), sp::axes("x", "y")); });
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(over_y[size_t(r)].item<float>(), r < 4 ? 6.0f : 22.0f);
    EXPECT_EQ(over_x[size_t(r)].item<float>(), float(2 * (r % 4) + 4));
    EXPECT_EQ(over_xy[size_t(r)].item<float>(), 28.0f);
  }
}

TEST(CollectivePrims, PsumWithAxisIndexGroupsSumsWithinEachGroup) {
  sp::AxisIndexGroups groups{{0, 1}, {2, 3}};
  auto out = run_on_mesh({4}, {"i"}, [&](int r) {
    return sp::psum(Array(float(r)), "i", {.axis_index_groups = groups});
  });
  EXPECT_EQ(out[0].item<float>(), 1.0f);
  EXPECT_EQ(out[1].item<float>(), 1.0f);
  EXPECT_EQ(out[2].item<float>(), 5.0f);
  EXPECT_EQ(out[3].item<float>(), 5.0f);
}

TEST(CollectivePrims, AllGatherStacksOrConcatenates) {
  auto stacked =
      run_on_mesh({4}, {"i"}, [](int r) { return sp::all_gather(block(kWorked, 4, r), "i"); });
  auto tiled = run_on_mesh(
      {4}, {"i"}, [](int r) { return sp::all_gather(block(kWorked, 4, r), "i", {.tiled = true}); });
  auto axis1 = run_on_mesh(
      {4}, {"i"}, [](int r) { return sp::all_gather(block(kWorked, 4, r), "i", {.axis = 1}); });
  Array all = sp::array(kWorked).reshape({4, 4});
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(stacked[size_t(r)].shape(), (sp::Shape{4, 4}));
    EXPECT_EQ(floats(stacked[size_t(r)]), kWorked);
    EXPECT_EQ(floats(tiled[size_t(r)]), kWorked);
    EXPECT_EQ(floats(axis1[size_t(r)]), floats(sp::transpose(all, {1, 0})));
  }
}

TEST(CollectivePrims, PsumScatterGivesEachDeviceItsPieceOfTheSum) {
  auto untiled =
      run_on_mesh({4}, {"i"}, [](int r) { return sp::psum_scatter(block(kWorked, 4, r), "i"); });
  auto tiled = run_on_mesh({2}, {"i"}, [](int r) {
    return sp::psum_scatter(block(kWorked, 2, r), "i", {.tiled = true});
  });
  const std::vector<float> sum4 = {22, 20, 12, 17};
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(untiled[size_t(r)].ndim(), 0);
    EXPECT_EQ(untiled[size_t(r)].item<float>(), sum4[size_t(r)]);
  }
  // Halves [3 1 4 1 5 9 2 6] + [5 3 5 8 9 7 1 2] = [8 4 9 9 14 16 3 8].
  EXPECT_EQ(floats(tiled[0]), (std::vector<float>{8, 4, 9, 9}));
  EXPECT_EQ(floats(tiled[1]), (std::vector<float>{14, 16, 3, 8}));
}

TEST(CollectivePrims, AllToAllTiledIsABlockTranspose) {
  auto out = run_on_mesh({4}, {"i"}, [](int r) {
    return sp::all_to_all(block(kWorked, 4, r), "i", 0, 0, {.tiled = true});
  });
  std::vector<float> joined;
  for (const Array& y : out) {
    auto v = floats(y);
    joined.insert(joined.end(), v.begin(), v.end());
  }
  EXPECT_EQ(joined, (std::vector<float>{3, 5, 5, 9, 1, 9, 3, 7, 4, 2, 5, 1, 1, 6, 8, 2}));
}

TEST(CollectivePrims, AllToAllUntiledMovesTheSplitDimension) {
  // Device r holds x_r[j, k] = 10 r + 2 j + k (shape 2 x 2); split 0, concat 1.
  auto out = run_on_mesh({2}, {"i"}, [](int r) {
    Array x = sp::array({10.0f * r, 10.0f * r + 1, 10.0f * r + 2, 10.0f * r + 3}).reshape({2, 2});
    return sp::all_to_all(x, "i", 0, 1);
  });
  // Device i gets y[k, j] = x_j[i, k].
  EXPECT_EQ(out[0].shape(), (sp::Shape{2, 2}));
  EXPECT_EQ(floats(out[0]), (std::vector<float>{0, 10, 1, 11}));
  EXPECT_EQ(floats(out[1]), (std::vector<float>{2, 12, 3, 13}));
}

TEST(CollectivePrims, PpermuteSendsAlongPairsAndZeroFillsTheRest) {
  auto shifted = run_on_mesh({8}, {"i"}, [](int r) {
    std::vector<std::pair<int, int>> perm;
    for (int j = 0; j < 8; ++j) perm.emplace_back(j, (j + 2) % 8);
    return sp::ppermute(Array(float(r)), "i", perm);
  });
  auto partial = run_on_mesh({4}, {"i"}, [](int r) {
    return sp::ppermute(Array(float(r + 1)), "i", {{0, 1}, {1, 2}});
  });
  for (int r = 0; r < 8; ++r) EXPECT_EQ(shifted[size_t(r)].item<float>(), float((r + 6) % 8));
  EXPECT_EQ(partial[0].item<float>(), 0.0f);
  EXPECT_EQ(partial[1].item<float>(), 1.0f);
  EXPECT_EQ(partial[2].item<float>(), 2.0f);
  EXPECT_EQ(partial[3].item<float>(), 0.0f);
}

TEST(CollectivePrims, PshuffleAndPbroadcast) {
  auto shuffled = run_on_mesh({4}, {"i"}, [](int r) {
    return sp::pshuffle(Array(float(r)), "i", {2, 0, 3, 1});
  });
  auto broadcast =
      run_on_mesh({4}, {"i"}, [](int r) { return sp::pbroadcast(Array(float(r * r)), "i", 3); });
  const std::vector<float> want = {2, 0, 3, 1};
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(shuffled[size_t(r)].item<float>(), want[size_t(r)]);
    EXPECT_EQ(broadcast[size_t(r)].item<float>(), 9.0f);
  }
}

TEST(CollectivePrims, AxisIndexAndSizeOnAMesh) {
  auto idx = run_on_mesh({2, 4}, {"x", "y"}, [](int) {
    Array xy = sp::axis_index(sp::axes("x", "y"));
    Array yx = sp::axis_index(sp::axes("y", "x"));
    Array y = sp::axis_index("y");
    return sp::stack({xy, yx, y, Array(int(sp::axis_size(sp::axes("x", "y"))))});
  });
  for (int r = 0; r < 8; ++r) {
    int x = r / 4, y = r % 4;
    EXPECT_EQ(idx[size_t(r)].to_vector<int>(), (std::vector<int>{r, y * 2 + x, y, 8}));
  }
}

TEST(CollectivePrims, OutsideAnyMappedAxisNamesAreUnbound) {
  try {
    sp::psum(sp::ones({2}), "i");
    ADD_FAILURE() << "no error";
  } catch (const sp::NameError& e) {
    EXPECT_STREQ(e.what(), "[psum] unbound axis name: i");
  }
  EXPECT_THROW(sp::all_gather(sp::ones({2}), "i"), sp::NameError);
  EXPECT_THROW(sp::axis_index("i"), sp::NameError);
}

TEST(CollectivePrims, ShapeRulesFollowJax) {
  sp::AxisEnvScope env({{"i", 4, "pmap"}});
  sp::AbstractValue x{sp::Shape{4, 3}, sp::float32, false};
  auto eval = [&](const char* prim, const sp::Params& p) {
    return sp::abstract_eval(sp::primitive(prim), {&x, 1}, p)[0].shape;
  };
  EXPECT_EQ(
      eval("psum", {{"axes", std::vector<int64_t>{0}}, {"axis_index_groups", sp::NoneParam{}}}),
      (sp::Shape{3}));
  EXPECT_EQ(eval("all_gather", {{"all_gather_dimension", int64_t{1}},
                                {"axis_index_groups", sp::NoneParam{}},
                                {"axis_name", std::vector<std::string>{"i"}},
                                {"axis_size", int64_t{4}},
                                {"tiled", false}}),
            (sp::Shape{4, 4, 3}));
  EXPECT_EQ(eval("reduce_scatter", {{"axis_index_groups", sp::NoneParam{}},
                                    {"axis_name", std::vector<std::string>{"i"}},
                                    {"axis_size", int64_t{4}},
                                    {"scatter_dimension", int64_t{0}},
                                    {"tiled", false}}),
            (sp::Shape{3}));
  EXPECT_EQ(eval("all_to_all", {{"axis_index_groups", sp::NoneParam{}},
                                {"axis_name", std::string("i")},
                                {"concat_axis", int64_t{1}},
                                {"split_axis", int64_t{0}},
                                {"tiled", true}}),
            (sp::Shape{1, 12}));
  EXPECT_THROW(eval("reduce_scatter", {{"axis_index_groups", sp::NoneParam{}},
                                       {"axis_name", std::vector<std::string>{"i"}},
                                       {"axis_size", int64_t{4}},
                                       {"scatter_dimension", int64_t{1}},
                                       {"tiled", false}}),
               sp::ValueError);
}

TEST(CollectivePrims, PpermuteRejectsIndicesOutsideTheAxis) {
  sp::AxisEnvScope env({{"i", 4, "pmap"}});
  auto f = [](std::vector<std::pair<int, int>> perm) {
    return [perm](const Array& v) { return sp::ppermute(v, "i", perm); };
  };
  EXPECT_THROW(sp::make_jaxpr(f({{0, 4}}))(sp::ones({2})), sp::ValueError);
  EXPECT_THROW(sp::make_jaxpr(f({{-5, 0}}))(sp::ones({2})), sp::ValueError);
  // Negative indices count from the end, so (-1, 0) and (3, 0) name the same pair.
  EXPECT_THROW(sp::make_jaxpr(f({{-1, 0}, {3, 1}}))(sp::ones({2})), sp::ValueError);
  EXPECT_NO_THROW(sp::make_jaxpr(f({{-1, 0}, {0, 1}}))(sp::ones({2})));
}

TEST(CollectivePrims, MismatchedCollectiveRaisesInsteadOfHanging) {
  EXPECT_THROW(run_on_mesh({2}, {"i"},
                           [](int r) {
                             if (r == 0) throw sp::ValueError("device 0 fails");
                             return sp::psum(Array(1.0f), "i");
                           }),
               sp::Error);
}

}  // namespace

// lax slicing (static and dynamic), x[i], take, take_along_axis and one_hot against values
// recorded from JAX (tools/goldens/gen_shape_ops.py), XLA gather semantics at the primitive
// level (clip and fill modes), out-of-range indices and every error path.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "ops/op_util.h"
#include "support/config_scope.h"
#include "support/golden.h"

#include <cmath>
#include <functional>
#include <map>
#include <string>

namespace sp = spmd;
using sp::Array;

namespace {

using spmd_test::ThreadsScope;
using spmd_test::X64Scope;

using Args = std::vector<Array>;
using Fn = std::function<Array(const Args&)>;

Array i32(int32_t v) {
  return sp::array<int32_t>({v}, {});
}

// The golden cases of the indexing functions, named as in gen_shape_ops.py.
const std::map<std::string, Fn>& indexing_cases() {
  static const std::map<std::string, Fn> t = {
      {"lax_slice",
       [](const Args& a) {
         return sp::lax::slice(a[0], {1, 0}, {3, 4});
       }},
      {"lax_slice_strided",
       [](const Args& a) {
         return sp::lax::slice(a[0], {0, 1}, {4, 5}, {2, 3});
       }},
      {"lax_slice_in_dim", [](const Args& a) { return sp::lax::slice_in_dim(a[0], -3, 6, 2, 1); }},
      {"lax_index_in_dim", [](const Args& a) { return sp::lax::index_in_dim(a[0], -1, 1, false); }},
      {"lax_index_in_dim_keep",
       [](const Args& a) { return sp::lax::index_in_dim(a[0], 1, 0, true); }},
      {"lax_dynamic_slice",
       [](const Args& a) {
         return sp::lax::dynamic_slice(a[0], {1, i32(2)}, {2, 3});
       }},
      {"lax_dynamic_slice_clamped",
       [](const Args& a) {
         return sp::lax::dynamic_slice(a[0], {i32(5), -1}, {2, 3});
       }},
      {"lax_dynamic_slice_negative",
       [](const Args& a) { return sp::lax::dynamic_slice(a[0], {-3}, {2}); }},
      {"lax_dynamic_update_slice",
       [](const Args& a) {
         return sp::lax::dynamic_update_slice(a[0], a[1], {1, 1});
       }},
      {"lax_dynamic_update_slice_clamped",
       [](const Args& a) {
         return sp::lax::dynamic_update_slice(a[0], a[1], {-1, 7});
       }},
      {"lax_dynamic_slice_in_dim",
       [](const Args& a) { return sp::lax::dynamic_slice_in_dim(a[0], 2, 2, 1); }},
      {"lax_dynamic_index_in_dim",
       [](const Args& a) { return sp::lax::dynamic_index_in_dim(a[0], -1, 0, false); }},
      {"getitem", [](const Args& a) { return a[0][-2]; }},
      {"take_flat", [](const Args& a) { return sp::take(a[0], a[1]); }},
      {"take_axis0", [](const Args& a) { return sp::take(a[0], a[1], 0); }},
      {"take_axis1", [](const Args& a) { return sp::take(a[0], a[1], 1); }},
      {"take_last_2d_idx", [](const Args& a) { return sp::take(a[0], a[1], -1); }},
      {"take_middle", [](const Args& a) { return sp::take(a[0], a[1], 1); }},
      {"take_scalar_index", [](const Args& a) { return sp::take(a[0], a[1], 0); }},
      {"take_int8_index", [](const Args& a) { return sp::take(a[0], a[1]); }},
      {"take_empty", [](const Args& a) { return sp::take(a[0], a[1], 0); }},
      {"take_large", [](const Args& a) { return sp::take(a[0], a[1], 0); }},
      {"take_along_axis1", [](const Args& a) { return sp::take_along_axis(a[0], a[1], 1); }},
      {"take_along_axis0", [](const Args& a) { return sp::take_along_axis(a[0], a[1], 0); }},
      {"take_along_bcast_idx", [](const Args& a) { return sp::take_along_axis(a[0], a[1], 1); }},
      {"take_along_bcast_arr", [](const Args& a) { return sp::take_along_axis(a[0], a[1], 1); }},
      {"take_along_3d_last", [](const Args& a) { return sp::take_along_axis(a[0], a[1], -1); }},
      {"take_along_argsort",
       [](const Args& a) { return sp::take_along_axis(a[0], sp::argsort(a[0], 0), 0); }},
      {"one_hot", [](const Args& a) { return sp::one_hot(a[0], 4); }},
      {"one_hot_2d_int8", [](const Args& a) { return sp::one_hot(a[0], 3, sp::int8); }},
      {"one_hot_float", [](const Args& a) { return sp::one_hot(a[0], 3, sp::bfloat16); }},
      {"one_hot_0d", [](const Args& a) { return sp::one_hot(a[0], 2); }},
      // x64 cases (shape_ops_x64.npz)
      {"take_i64_index", [](const Args& a) { return sp::take(a[0], a[1], 0); }},
      {"take_along_i64", [](const Args& a) { return sp::take_along_axis(a[0], a[1], 0); }},
      {"lax_dynamic_slice_i64",
       [](const Args& a) {
         return sp::lax::dynamic_slice(a[0], {sp::array<int64_t>({2}, {})}, {3});
       }},
      {"one_hot_i64", [](const Args& a) { return sp::one_hot(a[0], 3, sp::float64); }},
  };
  return t;
}

bool is_indexing_case(const std::string& name) {
  for (const char* p : {"take", "one_hot", "lax_slice", "lax_index", "lax_dynamic", "getitem"})
    if (name.starts_with(p)) return true;
  return false;
}

void check_file(const char* file) {
  std::map<std::string, Args> inputs;
  std::map<std::string, Array> outputs;
  for (const auto& [key, value] : spmd_test::load_golden(file)) {
    const size_t bar = key.find('|');
    const std::string name = key.substr(0, bar), part = key.substr(bar + 1);
    if (!is_indexing_case(name)) continue;
    if (part == "out") {
      outputs[name] = value;
      continue;
    }
    Args& in = inputs[name];
    const size_t i = size_t(std::stoul(part.substr(2)));
    if (in.size() <= i) in.resize(i + 1);
    in[i] = value;
  }
  for (const auto& [name, expected] : outputs) {
    auto fn = indexing_cases().find(name);
    ASSERT_NE(fn, indexing_cases().end()) << "no C++ call for golden case " << name;
    EXPECT_TRUE(spmd_test::arrays_equal(fn->second(inputs[name]), expected)) << name;
  }
  EXPECT_GT(outputs.size(), 3u);
}

template <class E, class F>
void expect_error(F&& f, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "expected an error containing: " << text;
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("[", 0), 0u) << e.what();
  }
}

Array iota_f32(const sp::Shape& shape) {
  return sp::reshape(sp::arange(0.0f, float(shape.size())), shape);
}

// gather as the primitive, for modes jnp.take does not reach.
Array gather(const Array& x, const Array& idx, std::vector<int64_t> offset_dims,
             std::vector<int64_t> collapsed, std::vector<int64_t> start_index_map,
             std::vector<int64_t> slice_sizes, const std::string& mode,
             sp::ParamValue fill_value = sp::NoneParam{}) {
  return sp::ops::apply("gather", {x, idx},
                        sp::Params{{"offset_dims", offset_dims},
                                   {"collapsed_slice_dims", collapsed},
                                   {"start_index_map", start_index_map},
                                   {"operand_batching_dims", std::vector<int64_t>{}},
                                   {"start_indices_batching_dims", std::vector<int64_t>{}},
                                   {"slice_sizes", slice_sizes},
                                   {"mode", mode},
                                   {"fill_value", fill_value},
                                   {"indices_are_sorted", false},
                                   {"unique_indices", false}});
}

}  // namespace

TEST(IndexingOpsGolden, MatchJaxForEveryCase) {
  check_file("shape_ops.npz");
}

TEST(IndexingOpsGolden, MatchJaxWith64BitTypes) {
  X64Scope x64(true);
  check_file("shape_ops_x64.npz");
}

// ---- x[i] and static slices ---------------------------------------------------------------------
TEST(IndexingOps, SubscriptSelectsRowsAndCountsFromTheEnd) {
  Array x = iota_f32({3, 2});
  EXPECT_EQ(x[0].to_vector<float>(), (std::vector<float>{0, 1}));
  EXPECT_EQ(x[-1].to_vector<float>(), (std::vector<float>{4, 5}));
  EXPECT_EQ(x[1][1].item<float>(), 3.0f);
  EXPECT_EQ(x[1][1].shape(), sp::Shape{});
  EXPECT_THROW(x[3], sp::IndexError);
  EXPECT_THROW(x[-4], sp::IndexError);
  EXPECT_THROW(x[0][0][0], sp::IndexError);
}

TEST(IndexingOps, SlicesOfZeroSizeAndScalars) {
  Array x = iota_f32({4});
  EXPECT_EQ(sp::lax::slice(x, {2}, {2}).shape(), (sp::Shape{0}));
  EXPECT_EQ(sp::lax::slice(x, {0}, {4}, {3}).to_vector<float>(), (std::vector<float>{0, 3}));
  EXPECT_EQ(sp::lax::slice(Array(5.0f), {}, {}).item<float>(), 5.0f);
  EXPECT_EQ(sp::lax::dynamic_slice(x, {1}, {0}).shape(), (sp::Shape{0}));
  Array z = sp::zeros({0, 2});
  EXPECT_EQ(sp::lax::dynamic_update_slice(z, sp::zeros({0, 1}), {0, 1}).shape(), z.shape());
}

TEST(IndexingOps, DynamicUpdateSliceLeavesTheOperandUnchanged) {
  Array x = iota_f32({4});
  Array y = sp::lax::dynamic_update_slice(x, sp::ones({2}), {3});
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0, 1, 1, 1}));
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{0, 1, 2, 3}));
}

TEST(IndexingOps, DynamicSliceAcceptsEveryIntegerIndexType) {
  Array x = iota_f32({6});
  for (sp::DType t : {sp::int8, sp::uint8, sp::int16, sp::uint32, sp::int32}) {
    Array start = sp::astype(sp::array<int32_t>({4}, {}), t);
    EXPECT_EQ(sp::lax::dynamic_slice(x, {start}, {2}).to_vector<float>(),
              (std::vector<float>{4, 5}))
        << sp::dtype_name(t);
  }
}

// ---- take ---------------------------------------------------------------------------------------
TEST(IndexingOps, TakeWrapsNarrowNegativeIndicesWithoutOverflow) {
  Array x = sp::arange(200);
  Array idx = sp::astype(sp::array<int32_t>({-1, -128, 127}), sp::int8);
  EXPECT_EQ(sp::take(x, idx).to_vector<int32_t>(), (std::vector<int32_t>{199, 72, 127}));
  EXPECT_EQ(sp::take_along_axis(x, idx, 0).to_vector<int32_t>(),
            (std::vector<int32_t>{199, 72, 127}));
}

TEST(IndexingOps, TakeKeepsDtypeAndWeakType) {
  Array w = sp::lax::broadcast_in_dim(Array(2), {3}, {});
  Array t = sp::take(w, sp::array<int32_t>({0, 2}));
  EXPECT_TRUE(t.weak_type());
  EXPECT_EQ(t.dtype(), sp::int32);
  Array b = sp::take(sp::array(std::vector<bool>{true, false}, {2}), sp::array<int32_t>({1, 0}));
  EXPECT_EQ(b.to_vector<bool>(), (std::vector<bool>{false, true}));
}

TEST(IndexingOps, TakeFromEmptyAxisWithNoIndicesIsEmpty) {
  Array x = sp::zeros({0, 3});
  EXPECT_EQ(sp::take(x, sp::zeros({2, 0}, sp::int32), 0).shape(), (sp::Shape{2, 0, 3}));
  EXPECT_EQ(sp::take_along_axis(x, sp::zeros({0, 3}, sp::int32), 0).shape(), (sp::Shape{0, 3}));
}

TEST(IndexingOps, LargeTakeSplitsAcrossThreads) {
  Array x = sp::arange(0.0f, 100000.0f).reshape({1000, 100});
  Array idx = sp::subtract(999, sp::arange(1000));
  Array y = sp::take(x, idx, 0);
  std::vector<float> v = y.to_vector<float>();
  for (int64_t r = 0; r < 1000; r += 111)
    EXPECT_EQ(v[size_t(r * 100 + 7)], float((999 - r) * 100 + 7));
  Array cols = sp::take(x, sp::array<int32_t>({99, 0}), 1);
  EXPECT_EQ(cols.to_vector<float>()[size_t(2 * 500)], 500.0f * 100.0f + 99.0f);
}

// ---- gather modes -------------------------------------------------------------------------------
TEST(IndexingOps, GatherClipModeClampsWholeWindows) {
  Array x = iota_f32({5});
  Array idx = sp::array<int32_t>({-3, 4, 1}, {3, 1});
  Array y = gather(x, idx, {1}, {}, {0}, {2}, "clip");
  EXPECT_EQ(y.shape(), (sp::Shape{3, 2}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0, 1, 3, 4, 1, 2}));
}

TEST(IndexingOps, GatherFillModeFillsOutOfRangeWindows) {
  Array x = iota_f32({5});
  Array idx = sp::array<int32_t>({-1, 4, 3}, {3, 1});
  Array y = gather(x, idx, {1}, {}, {0}, {2}, "fill");
  std::vector<float> v = y.to_vector<float>();
  EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1]) && std::isnan(v[2]) && std::isnan(v[3]));
  EXPECT_EQ(v[4], 3.0f);
  EXPECT_EQ(v[5], 4.0f);
  Array xi = sp::arange(5);
  EXPECT_EQ(gather(xi, idx, {1}, {}, {0}, {1}, "fill").to_vector<int32_t>(),
            (std::vector<int32_t>{INT32_MIN, 4, 3}));
  EXPECT_EQ(gather(xi, idx, {1}, {}, {0}, {1}, "fill", 7.0).to_vector<int32_t>(),
            (std::vector<int32_t>{7, 4, 3}));
  Array xu = sp::astype(xi, sp::uint8);
  EXPECT_EQ(gather(xu, idx, {1}, {}, {0}, {1}, "fill").to_vector<int32_t>(),
            (std::vector<int32_t>{255, 4, 3}));
}

TEST(IndexingOps, GatherOfTwoDimensionalWindowsAndIndexVectors) {
  // x[i, j:j+2] for (i, j) pairs: a 2-long index vector, one collapsed dim.
  Array x = iota_f32({3, 4});
  Array idx = sp::array<int32_t>({2, 1, 0, 3}, {2, 2});
  Array y = gather(x, idx, {1}, {0}, {0, 1}, {1, 2}, "clip");
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{9, 10, 2, 3}));
}

// ---- one_hot ------------------------------------------------------------------------------------
TEST(IndexingOps, OneHotOfOutOfRangeClassesIsAllZero) {
  Array y = sp::one_hot(sp::array<int32_t>({5, -1, 1}), 3, sp::int32);
  EXPECT_EQ(y.to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 0, 0, 0, 0, 0, 1, 0}));
  EXPECT_EQ(sp::one_hot(sp::array<int32_t>({1}), 0).shape(), (sp::Shape{1, 0}));
}

// ---- errors -------------------------------------------------------------------------------------
TEST(IndexingOpsErrors, TakeOutOfBoundsNamesTheIndexAndAxis) {
  Array x = iota_f32({5, 2});
  expect_error<sp::IndexError>(
      [&] {
        sp::take(x, sp::array<int32_t>({0, 7}), 0);
      },
      "[take] index 7 is out of bounds for axis 0 with size 5");
  expect_error<sp::IndexError>([&] { sp::take(x, sp::array<int32_t>({-6}), 0); },
                               "index -6 is out of bounds for axis 0 with size 5");
  expect_error<sp::IndexError>([&] { sp::take(x, sp::array<int32_t>({10})); },
                               "index 10 is out of bounds for axis 0 with size 10");
  expect_error<sp::IndexError>(
      [&] { sp::take(x, sp::astype(sp::array<int32_t>({2}), sp::uint8), 1); },
      "index 2 is out of bounds for axis 1 with size 2");
  expect_error<sp::IndexError>([&] { sp::take(sp::zeros({0}), sp::array<int32_t>({0})); },
                               "out of bounds for axis 0 with size 0");
  expect_error<sp::TypeError>([&] { sp::take(x, sp::ones({1})); }, "integer type");
  expect_error<sp::AxisError>([&] { sp::take(x, sp::array<int32_t>({0}), 2); }, "[take] axis 2");
}

TEST(IndexingOpsErrors, TakeAlongAxisChecksRankShapesAndBounds) {
  Array x = iota_f32({2, 3});
  expect_error<sp::ShapeError>(
      [&] {
        sp::take_along_axis(x, sp::array<int32_t>({0, 1}), 0);
      },
      "same number of dimensions; 1 vs. 2");
  expect_error<sp::TypeError>([&] { sp::take_along_axis(x, sp::ones({1, 1}), 0); }, "integer type");
  expect_error<sp::ShapeError>(
      [&] {
        sp::take_along_axis(x, sp::zeros({3, 1}, sp::int32), 1);
      },
      "[take_along_axis]");
  expect_error<sp::IndexError>(
      [&] {
        sp::take_along_axis(x, sp::array<int32_t>({3}, {1, 1}), 1);
      },
      "[take_along_axis] index 3 is out of bounds for axis 1 with size 3");
  expect_error<sp::AxisError>(
      [&] {
        sp::take_along_axis(x, sp::zeros({1, 1}, sp::int32), -3);
      },
      "out of bounds");
}

TEST(IndexingOpsErrors, OneHotRejectsBoolAndNegativeClassCounts) {
  expect_error<sp::TypeError>([&] { sp::one_hot(sp::array(std::vector<bool>{true}, {1}), 2); },
                              "[one_hot]");
  expect_error<sp::ValueError>([&] { sp::one_hot(sp::arange(2), -1); }, "nonnegative");
}

TEST(IndexingOpsErrors, StaticSliceBounds) {
  Array x = iota_f32({2, 3});
  expect_error<sp::IndexError>([&] { sp::lax::slice(x, {0, 0}, {3, 1}); }, "[slice]");
  expect_error<sp::IndexError>([&] { sp::lax::slice(x, {1, 0}, {0, 1}); }, "start <= limit");
  expect_error<sp::ValueError>(
      [&] {
        sp::lax::slice(x, {0, 0}, {1, 1}, {0, 1});
      },
      "strides must be positive");
  expect_error<sp::ValueError>([&] { sp::lax::slice(x, {0}, {1}); }, "one entry per");
  expect_error<sp::IndexError>([&] { sp::lax::index_in_dim(x, 5); },
                               "index 5 is out of bounds for axis 0 with size 2");
  expect_error<sp::AxisError>([&] { sp::lax::slice_in_dim(x, 0, 1, 1, 2); }, "axis 2");
}

TEST(IndexingOpsErrors, DynamicSliceArguments) {
  Array x = iota_f32({2, 3});
  expect_error<sp::ShapeError>(
      [&] {
        sp::lax::dynamic_slice(x, {0, 0}, {3, 1});
      },
      "slice_sizes must be nonnegative and at most the operand shape");
  expect_error<sp::ValueError>(
      [&] {
        sp::lax::dynamic_slice(x, {0}, {1, 1});
      },
      "length of slice indices");
  expect_error<sp::TypeError>(
      [&] {
        sp::lax::dynamic_slice(x, {0, 0.5f}, {1, 1});
      },
      "integer type");
  expect_error<sp::ShapeError>(
      [&] {
        sp::lax::dynamic_slice(x, {0, sp::array<int32_t>({0, 1})}, {1, 1});
      },
      "scalars");
  expect_error<sp::ShapeError>(
      [&] {
        sp::lax::dynamic_update_slice(x, sp::ones({3, 1}), {0, 0});
      },
      "no larger than the operand");
  expect_error<sp::TypeError>(
      [&] {
        sp::lax::dynamic_update_slice(x, sp::zeros({1, 1}, sp::int32), {0, 0});
      },
      "same dtypes");
  expect_error<sp::AxisError>([&] { sp::lax::dynamic_slice_in_dim(x, 0, 1, 2); }, "axis 2");
}

TEST(IndexingOpsErrors, GatherRejectsInconsistentDimensionNumbers) {
  Array x = iota_f32({3, 4});
  Array idx = sp::array<int32_t>({0, 1}, {2, 1});
  expect_error<sp::ShapeError>(
      [&] {
        gather(x, idx, {1}, {0}, {0, 1}, {1, 4}, "clip");
      },
      "start_index_map");
  expect_error<sp::ShapeError>(
      [&] {
        gather(x, idx, {1}, {0}, {0}, {1, 5}, "clip");
      },
      "slice_sizes");
  expect_error<sp::ShapeError>(
      [&] {
        gather(x, idx, {1}, {0}, {0}, {2, 4}, "clip");
      },
      "slice size at most 1");
  expect_error<sp::ShapeError>(
      [&] {
        gather(x, idx, {}, {0}, {0}, {1, 4}, "clip");
      },
      "offset_dims");
  expect_error<sp::ValueError>([&] { gather(x, idx, {1}, {0}, {0}, {1, 4}, "wrap"); }, "mode");
  expect_error<sp::TypeError>(
      [&] {
        gather(x, sp::ones({2, 1}), {1}, {0}, {0}, {1, 4}, "clip");
      },
      "integer type");
}

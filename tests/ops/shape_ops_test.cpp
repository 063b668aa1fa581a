// jnp and lax shape functions against values recorded from JAX (tools/goldens/gen_shape_ops.py),
// plus weak types, zero-size and 0-d edge cases, the tiled transpose at sizes beyond the goldens
// and every error path.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "core/array_impl.h"
#include "support/config_scope.h"
#include "support/golden.h"

#include <cstring>
#include <functional>
#include <map>
#include <string>

namespace sp = spmd;
using sp::Array;

namespace {

using spmd_test::ThreadsScope;
using spmd_test::X64Scope;

using Args = std::vector<Array>;
using Fn = std::function<Args(const Args&)>;

Fn one(std::function<Array(const Args&)> f) {
  return [f](const Args& a) { return Args{f(a)}; };
}

// The golden cases of the shape functions, named as in gen_shape_ops.py.
const std::map<std::string, Fn>& shape_cases() {
  static const std::map<std::string, Fn> t = {
      {"reshape_2x3_to_3x2", one([](const Args& a) {
         return sp::reshape(a[0], {3, 2});
       })},
      {"reshape_infer", one([](const Args& a) {
         return sp::reshape(a[0], {4, -1});
       })},
      {"reshape_0d", one([](const Args& a) {
         return sp::reshape(a[0], {1, 1});
       })},
      {"reshape_zero_size", one([](const Args& a) {
         return sp::reshape(a[0], {3, 0});
       })},
      {"ravel_bf16", one([](const Args& a) { return sp::ravel(a[0]); })},
      {"transpose_default", one([](const Args& a) { return sp::transpose(a[0]); })},
      {"transpose_axes", one([](const Args& a) {
         return sp::transpose(a[0], {1, -1, 0});
       })},
      {"transpose_large_f32", one([](const Args& a) { return a[0].T(); })},
      {"transpose_large_bf16", one([](const Args& a) { return sp::transpose(a[0]); })},
      {"transpose_large_bool", one([](const Args& a) { return sp::transpose(a[0]); })},
      {"transpose_3d_perm", one([](const Args& a) {
         return sp::transpose(a[0], {2, 0, 1});
       })},
      {"transpose_batched", one([](const Args& a) {
         return sp::transpose(a[0], {0, 2, 1});
       })},
      {"swapaxes", one([](const Args& a) { return sp::swapaxes(a[0], 0, -1); })},
      {"moveaxis_one", one([](const Args& a) { return sp::moveaxis(a[0], 0, -1); })},
      {"moveaxis_many", one([](const Args& a) {
         return sp::moveaxis(a[0], {0, 1}, {-1, 0});
       })},
      {"expand_dims", one([](const Args& a) {
         return sp::expand_dims(a[0], {0, -1});
       })},
      {"expand_dims_0d", one([](const Args& a) { return sp::expand_dims(a[0], {0}); })},
      {"squeeze_all", one([](const Args& a) { return sp::squeeze(a[0]); })},
      {"squeeze_axis", one([](const Args& a) { return sp::squeeze(a[0], {-2}); })},
      {"broadcast_to", one([](const Args& a) {
         return sp::broadcast_to(a[0], {2, 3, 4});
       })},
      {"broadcast_to_0d", one([](const Args& a) {
         return sp::broadcast_to(a[0], {2, 2});
       })},
      {"broadcast_to_zero", one([](const Args& a) {
         return sp::broadcast_to(a[0], {0, 3});
       })},
      {"broadcast_arrays", [](const Args& a) { return sp::broadcast_arrays(a); }},
      {"concatenate_axis0", one([](const Args& a) { return sp::concatenate(a); })},
      {"concatenate_last", one([](const Args& a) { return sp::concatenate(a, -1); })},
      {"concatenate_promote", one([](const Args& a) { return sp::concatenate(a, 1); })},
      {"concatenate_uint_int", one([](const Args& a) { return sp::concatenate(a); })},
      {"concatenate_17", one([](const Args& a) { return sp::concatenate(a); })},
      {"stack_axis0", one([](const Args& a) { return sp::stack(a); })},
      {"stack_last_promote", one([](const Args& a) { return sp::stack(a, -1); })},
      {"stack_0d", one([](const Args& a) { return sp::stack(a); })},
      {"hstack_1d", one([](const Args& a) { return sp::hstack(a); })},
      {"hstack_2d", one([](const Args& a) { return sp::hstack(a); })},
      {"hstack_0d", one([](const Args& a) { return sp::hstack(a); })},
      {"vstack_1d", one([](const Args& a) { return sp::vstack(a); })},
      {"vstack_2d", one([](const Args& a) { return sp::vstack(a); })},
      {"split_equal", [](const Args& a) { return sp::split(a[0], 3); }},
      {"split_indices",
       [](const Args& a) {
         return sp::split(a[0], {1, 3}, 1);
       }},
      {"split_empty_piece",
       [](const Args& a) {
         return sp::split(a[0], {2, 2}, -1);
       }},
      {"flip_all", one([](const Args& a) { return sp::flip(a[0]); })},
      {"flip_axes", one([](const Args& a) {
         return sp::flip(a[0], {0, 2});
       })},
      {"flip_0d", one([](const Args& a) { return sp::flip(a[0]); })},
      {"roll_flat", one([](const Args& a) { return sp::roll(a[0], 2); })},
      {"roll_axis", one([](const Args& a) { return sp::roll(a[0], -1, -1); })},
      {"roll_big_shift", one([](const Args& a) { return sp::roll(a[0], 11, 0); })},
      {"roll_zero_size", one([](const Args& a) { return sp::roll(a[0], 1, 0); })},
      {"pad_int", one([](const Args& a) {
         return sp::pad(a[0], {{1, 2}, {0, 1}}, 3);
       })},
      {"pad_bf16", one([](const Args& a) {
         return sp::pad(a[0], {{2, 0}, {1, 1}}, 0.5);
       })},
      {"pad_one_pair", one([](const Args& a) {
         return sp::pad(a[0], {{1, 1}});
       })},
      {"pad_zero_size", one([](const Args& a) {
         return sp::pad(a[0], {{1, 1}, {2, 0}});
       })},
      {"tile_2d", one([](const Args& a) {
         return sp::tile(a[0], {2, 2});
       })},
      {"tile_more_reps", one([](const Args& a) {
         return sp::tile(a[0], {2, 1, 2});
       })},
      {"tile_fewer_reps", one([](const Args& a) { return sp::tile(a[0], {3}); })},
      {"tile_0d", one([](const Args& a) { return sp::tile(a[0], {3}); })},
      {"tile_zero", one([](const Args& a) {
         return sp::tile(a[0], {0, 2});
       })},
      {"repeat_flat", one([](const Args& a) { return sp::repeat(a[0], 2); })},
      {"repeat_axis", one([](const Args& a) { return sp::repeat(a[0], 3, -1); })},
      {"repeat_zero", one([](const Args& a) { return sp::repeat(a[0], 0, 0); })},
      {"tril", one([](const Args& a) { return sp::tril(a[0]); })},
      {"tril_k1", one([](const Args& a) { return sp::tril(a[0], 1); })},
      {"tril_batched", one([](const Args& a) { return sp::tril(a[0], -1); })},
      {"triu", one([](const Args& a) { return sp::triu(a[0]); })},
      {"triu_k2", one([](const Args& a) { return sp::triu(a[0], 2); })},
      {"triu_neg", one([](const Args& a) { return sp::triu(a[0], -1); })},
      {"lax_broadcast_in_dim", one([](const Args& a) {
         return sp::lax::broadcast_in_dim(a[0], {2, 3, 4}, {1, 2});
       })},
      {"lax_squeeze", one([](const Args& a) {
         return sp::lax::squeeze(a[0], {0, 2});
       })},
      {"lax_expand_dims", one([](const Args& a) {
         return sp::lax::expand_dims(a[0], {1, 3});
       })},
      {"lax_rev", one([](const Args& a) { return sp::lax::rev(a[0], {1}); })},
      {"lax_concatenate", one([](const Args& a) { return sp::lax::concatenate(a, 1); })},
      {"lax_pad_interior", one([](const Args& a) {
         return sp::lax::pad(a[0], sp::array<float>({-1.0f}, {}), {{1, -1, 2}, {-2, 3, 1}});
       })},
      {"lax_pad_crop", one([](const Args& a) {
         return sp::lax::pad(a[0], sp::array<int8_t>({9}, {}), {{-3, -2, 1}});
       })},
      {"lax_pad_0d",
       one([](const Args& a) { return sp::lax::pad(a[0], sp::array<float>({2.0f}, {}), {}); })},
      // x64 cases (shape_ops_x64.npz)
      {"transpose_f64", one([](const Args& a) { return sp::transpose(a[0]); })},
      {"transpose_3d_u64", one([](const Args& a) {
         return sp::transpose(a[0], {2, 0, 1});
       })},
      {"concatenate_promote_f64", one([](const Args& a) { return sp::concatenate(a); })},
      {"pad_f64", one([](const Args& a) {
         return sp::pad(a[0], {{1, 0}, {0, 2}}, -2.5);
       })},
      {"repeat_f64", one([](const Args& a) { return sp::repeat(a[0], 2, 0); })},
      {"tril_i64", one([](const Args& a) { return sp::tril(a[0]); })},
  };
  return t;
}

// Cases recorded in the goldens but checked by indexing_ops_test.cpp.
bool is_indexing_case(const std::string& name) {
  for (const char* p : {"take", "one_hot", "lax_slice", "lax_index", "lax_dynamic", "getitem"})
    if (name.starts_with(p)) return true;
  return false;
}

struct GoldenCase {
  Args inputs;
  Args outputs;
};

std::map<std::string, GoldenCase> golden_cases(const char* file) {
  std::map<std::string, GoldenCase> cases;
  for (const auto& [key, value] : spmd_test::load_golden(file)) {
    const size_t bar = key.find('|');
    const std::string name = key.substr(0, bar), part = key.substr(bar + 1);
    GoldenCase& c = cases[name];
    Args& list = part.starts_with("in") ? c.inputs : c.outputs;
    const size_t index =
        part == "out" ? 0 : size_t(std::stoul(part.substr(part[0] == 'i' ? 2 : 3)));
    if (list.size() <= index) list.resize(index + 1);
    list[index] = value;
  }
  return cases;
}

void check_file(const char* file) {
  int checked = 0;
  for (const auto& [name, c] : golden_cases(file)) {
    if (is_indexing_case(name)) continue;
    auto fn = shape_cases().find(name);
    ASSERT_NE(fn, shape_cases().end()) << "no C++ call for golden case " << name;
    Args got = fn->second(c.inputs);
    ASSERT_EQ(got.size(), c.outputs.size()) << name;
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(spmd_test::arrays_equal(got[i], c.outputs[i])) << name << " output " << i;
    ++checked;
  }
  EXPECT_GT(checked, 5);
}

Array iota_f32(const sp::Shape& shape) {
  return sp::reshape(sp::arange(0.0, double(shape.size())), shape);
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

}  // namespace

TEST(ShapeOpsGolden, MatchJaxForEveryCase) {
  check_file("shape_ops.npz");
}

TEST(ShapeOpsGolden, MatchJaxWith64BitTypes) {
  X64Scope x64(true);
  check_file("shape_ops_x64.npz");
}

TEST(ShapeOpsGolden, EveryCaseHasAGoldenRecording) {
  auto a = golden_cases("shape_ops.npz");
  auto b = golden_cases("shape_ops_x64.npz");
  for (const auto& [name, fn] : shape_cases())
    EXPECT_TRUE(a.count(name) || b.count(name)) << name << " is not in the goldens";
}

// ---- transposes beyond the golden sizes ---------------------------------------------------------
// Each element of the transpose equals the input read at swapped indices, for every element size
// and sizes that leave partial tiles; large enough to run on several threads.
TEST(ShapeOps, TransposeMatchesIndexMathForEveryItemSize) {
  for (sp::DType t : {sp::int8, sp::bfloat16, sp::int32, sp::float32}) {
    const int64_t m = 523, n = 389;
    Array x = sp::arange(int64_t(0), m * n, 1, sp::int32).reshape({m, n}).astype(t);
    Array y = sp::transpose(x).astype(sp::int32);
    ASSERT_EQ(y.shape(), (sp::Shape{n, m}));
    std::vector<int32_t> xv = x.astype(sp::int32).to_vector<int32_t>();
    std::vector<int32_t> yv = y.to_vector<int32_t>();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j)
        ASSERT_EQ(yv[size_t(i * m + j)], xv[size_t(j * n + i)]) << sp::dtype_name(t);
  }
}

// The transpose kernels move bits: NaN payloads and denormals of 4-byte and 8-byte elements
// survive (kernels run with denormals flushed for arithmetic).
TEST(ShapeOps, TransposePreservesEveryBitPattern) {
  std::vector<uint32_t> bits;
  for (uint32_t k = 0; k < 64; ++k) bits.push_back(k % 3 ? 0x7fc00000u + k : k + 1);
  for (sp::DType t : {sp::float32, sp::float64}) {
    // The 256 bytes of `bits` as 8 rows of float32 or float64.
    const int64_t columns = int64_t(bits.size() * 4) / sp::itemsize(t) / 8;
    Array x = sp::array_from_bytes(bits.data(), t, {8, columns});
    ASSERT_EQ(x.nbytes(), int64_t(bits.size() * 4));
    Array y = sp::transpose(sp::transpose(x));
    ASSERT_EQ(y.shape(), x.shape());
    std::vector<uint32_t> back(bits.size());
    std::memcpy(back.data(), spmd::host_data(y, "test"), back.size() * 4);
    EXPECT_EQ(back, bits) << sp::dtype_name(t);
  }
}

// Outputs beyond 8 MiB take the streaming-store path; odd row lengths leave rows unaligned.
TEST(ShapeOps, LargeTransposesMatchIndexMath) {
  for (int64_t n : {1600, 1601}) {
    const int64_t m = 1537;
    Array x = sp::arange(int64_t(0), m * n, 1, sp::int32).reshape({m, n});
    std::vector<int32_t> yv = sp::transpose(x).to_vector<int32_t>();
    for (int64_t i = 0; i < n; i += 7)
      for (int64_t j = 0; j < m; j += 3) ASSERT_EQ(yv[size_t(i * m + j)], int32_t(j * n + i)) << n;
    ASSERT_EQ(yv.back(), int32_t(m * n - 1));
  }
}

TEST(ShapeOps, TransposeOfFourDimsMatchesIndexMath) {
  X64Scope x64(true);
  const sp::Shape s{3, 70, 2, 45};
  Array x = sp::arange(int64_t(0), s.size(), 1, sp::float64).reshape(s);
  Array y = sp::transpose(x, {3, 1, 0, 2});
  std::vector<double> xv = x.to_vector<double>(), yv = y.to_vector<double>();
  size_t k = 0;
  for (int64_t d = 0; d < 45; ++d)
    for (int64_t b = 0; b < 70; ++b)
      for (int64_t a = 0; a < 3; ++a)
        for (int64_t c = 0; c < 2; ++c)
          ASSERT_EQ(yv[k++], xv[size_t(((a * 70 + b) * 2 + c) * 45 + d)]);
}

TEST(ShapeOps, LargeBroadcastAndConcatenateSplitAcrossThreads) {
  Array col = sp::arange(0.0f, 1000.0f).reshape({1000, 1});
  Array b = sp::broadcast_to(col, {1000, 300});
  std::vector<float> bv = b.to_vector<float>();
  for (int64_t i = 0; i < 1000; i += 97) EXPECT_EQ(bv[size_t(i * 300 + 299)], float(i));
  Array c = sp::concatenate({b, b}, 0);
  EXPECT_EQ(c.shape(), (sp::Shape{2000, 300}));
  EXPECT_EQ(c.to_vector<float>()[size_t(1999 * 300)], 999.0f);
}

// ---- weak types and identity shortcuts
// ------------------------------------------------------------
TEST(ShapeOps, ShapeFunctionsKeepWeakTypeOfAllWeakInputs) {
  Array w = sp::lax::broadcast_in_dim(Array(2.0f), {3}, {});
  ASSERT_TRUE(w.weak_type());
  EXPECT_TRUE(sp::reshape(w, {3, 1}).weak_type());
  EXPECT_TRUE(sp::flip(w).weak_type());
  EXPECT_TRUE(sp::concatenate({w, w}).weak_type());
  EXPECT_FALSE(sp::concatenate({w, sp::ones({2})}).weak_type());
  EXPECT_EQ(sp::concatenate({w, sp::ones({2}, sp::bfloat16)}).dtype(), sp::bfloat16);
  EXPECT_TRUE(sp::stack({w, w}).weak_type());
  EXPECT_TRUE(sp::pad(w, {{1, 1}}).weak_type());
  EXPECT_FALSE(sp::lax::pad(w, sp::array<float>({0.0f}, {}), {{1, 1, 0}}).weak_type());
}

TEST(ShapeOps, NoOpReshapesAndTransposesReturnTheSameArray) {
  Array x = iota_f32({2, 3});
  EXPECT_EQ(sp::reshape(x, {2, 3}).impl(), x.impl());
  EXPECT_EQ(sp::transpose(x, {0, 1}).impl(), x.impl());
  EXPECT_EQ(sp::squeeze(x).impl(), x.impl());
  EXPECT_EQ(sp::concatenate({x}).impl(), x.impl());
}

// ---- zero-size and 0-d --------------------------------------------------------------------------
TEST(ShapeOps, ZeroSizeArraysKeepTheirShapes) {
  Array z = sp::zeros({0, 3});
  EXPECT_EQ(sp::transpose(z).shape(), (sp::Shape{3, 0}));
  EXPECT_EQ(sp::reshape(z, {3, -1, 2}).shape(), (sp::Shape{3, 0, 2}));
  EXPECT_EQ(sp::concatenate({z, iota_f32({2, 3})}).shape(), (sp::Shape{2, 3}));
  EXPECT_EQ(sp::tile(z, {2, 2}).shape(), (sp::Shape{0, 6}));
  EXPECT_EQ(sp::flip(z).shape(), (sp::Shape{0, 3}));
  EXPECT_EQ(sp::stack({z, z}, 1).shape(), (sp::Shape{0, 2, 3}));
  auto parts = sp::split(z, 3, 1);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[2].shape(), (sp::Shape{0, 1}));
  EXPECT_EQ(sp::tril(sp::zeros({0, 4})).shape(), (sp::Shape{0, 4}));
  EXPECT_EQ(sp::repeat(z, 2, 1).shape(), (sp::Shape{0, 6}));
}

TEST(ShapeOps, ScalarsReshapeAndBroadcast) {
  Array s = sp::array<int32_t>({7}, {});
  EXPECT_EQ(sp::ravel(s).shape(), (sp::Shape{1}));
  EXPECT_EQ(sp::transpose(s).shape(), sp::Shape{});
  EXPECT_EQ(sp::reshape(sp::reshape(s, {1, 1, 1}), {}).item<int32_t>(), 7);
  EXPECT_EQ(sp::squeeze(sp::reshape(s, {1, 1})).shape(), sp::Shape{});
  EXPECT_EQ(sp::broadcast_to(s, {2, 0}).shape(), (sp::Shape{2, 0}));
  EXPECT_EQ(sp::repeat(s, 3).to_vector<int32_t>(), (std::vector<int32_t>{7, 7, 7}));
}

TEST(ShapeOps, BroadcastShapesFollowsNumpy) {
  EXPECT_EQ(sp::broadcast_shapes({2, 1, 3}, {4, 1}), (sp::Shape{2, 4, 3}));
  EXPECT_EQ(sp::broadcast_shapes({}, {0, 2}), (sp::Shape{0, 2}));
  EXPECT_EQ(sp::broadcast_shapes({1}, {0}), (sp::Shape{0}));
}

TEST(ShapeOps, LaxPadCanCropEverything) {
  Array x = iota_f32({4});
  Array y = sp::lax::pad(x, sp::array<float>({5.0f}, {}), {{-4, 1, 0}});
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{5.0f}));
  Array e = sp::lax::pad(sp::zeros({0}), sp::array<float>({1.0f}, {}), {{1, 1, 3}});
  EXPECT_EQ(e.to_vector<float>(), (std::vector<float>{1.0f, 1.0f}));
}

// ---- errors -------------------------------------------------------------------------------------
TEST(ShapeOpsErrors, ReshapeReportsBothShapes) {
  Array x = iota_f32({2, 3});
  expect_error<sp::ShapeError>([&] { sp::reshape(x, {4}); },
                               "[reshape] cannot reshape array of shape (2, 3) into shape (4,)");
  expect_error<sp::ShapeError>([&] { sp::reshape(x, {-1, 4}); }, "does not evenly divide 6");
  expect_error<sp::ShapeError>([&] { sp::reshape(x, {-1, 0}); }, "cannot reshape");
  expect_error<sp::ValueError>([&] { sp::reshape(x, {-1, -1}); }, "one unknown axis");
  expect_error<sp::ValueError>([&] { sp::reshape(x, {-2, -3}); }, "negative dimensions");
  expect_error<sp::ShapeError>([&] { sp::lax::reshape(x, {5}); }, "cannot reshape");
}

TEST(ShapeOpsErrors, BadAxesAndPermutations) {
  Array x = iota_f32({2, 3});
  expect_error<sp::AxisError>([&] { sp::transpose(x, {0, 2}); }, "axis 2 is out of bounds");
  expect_error<sp::ValueError>([&] { sp::transpose(x, {0}); }, "axes don't match array");
  expect_error<sp::ValueError>([&] { sp::transpose(x, {1, 1}); }, "isn't a permutation");
  expect_error<sp::AxisError>([&] { sp::swapaxes(x, 0, 2); }, "[swapaxes] axis 2");
  expect_error<sp::ValueError>([&] { sp::moveaxis(x, {0, 1}, {0}); }, "same number");
  expect_error<sp::ValueError>([&] { sp::moveaxis(x, {0, 0}, {0, 1}); }, "repeated axis");
  expect_error<sp::AxisError>([&] { sp::moveaxis(x, 0, -3); }, "out of bounds");
  expect_error<sp::AxisError>([&] { sp::expand_dims(x, {3}); }, "axis 3 is out of bounds");
  expect_error<sp::ValueError>([&] { sp::expand_dims(x, {1, -3}); }, "repeated axis");
  expect_error<sp::AxisError>([&] { sp::flip(x, {2}); }, "[flip] axis 2");
  expect_error<sp::AxisError>([&] { sp::roll(x, 1, 2); }, "[roll] axis 2");
  expect_error<sp::AxisError>([&] { sp::repeat(x, 1, -3); }, "[repeat]");
  expect_error<sp::AxisError>([&] { sp::lax::rev(x, {2}); }, "[rev]");
  expect_error<sp::ValueError>([&] { sp::lax::rev(x, {0, 0}); }, "unique");
}

TEST(ShapeOpsErrors, SqueezeOfNonUnitDimension) {
  Array x = iota_f32({1, 3});
  expect_error<sp::ShapeError>([&] { sp::squeeze(x, {1}); },
                               "cannot select an axis to squeeze out which has size not equal "
                               "to one");
  expect_error<sp::ShapeError>([&] { sp::lax::squeeze(x, {1}); }, "[squeeze]");
  expect_error<sp::AxisError>([&] { sp::squeeze(x, {2}); }, "out of bounds");
}

TEST(ShapeOpsErrors, BroadcastingMismatches) {
  Array x = iota_f32({2, 3});
  expect_error<sp::ShapeError>([&] { sp::broadcast_to(x, {3, 3}); }, "[broadcast_to]");
  expect_error<sp::ShapeError>([&] { sp::broadcast_to(x, {3}); }, "fewer dimensions");
  expect_error<sp::ValueError>([&] { sp::broadcast_to(x, {2, -3}); }, "nonnegative");
  expect_error<sp::ShapeError>([&] { sp::broadcast_shapes({2, 3}, {4}); }, "[broadcast_shapes]");
  expect_error<sp::ShapeError>(
      [&] {
        sp::broadcast_arrays({x, iota_f32({2})});
      },
      "[broadcast_arrays]");
  expect_error<sp::ShapeError>(
      [&] {
        sp::lax::broadcast_in_dim(x, {2, 4}, {0, 1});
      },
      "must either be 1, or be equal");
  expect_error<sp::ShapeError>(
      [&] {
        sp::lax::broadcast_in_dim(x, {3, 2}, {1, 0});
      },
      "strictly increasing");
  expect_error<sp::ShapeError>(
      [&] {
        sp::lax::broadcast_in_dim(x, {2, 3}, {0});
      },
      "one entry per operand dimension");
  expect_error<sp::ShapeError>(
      [&] {
        sp::lax::broadcast_in_dim(x, {2, 3, -1}, {0, 1});
      },
      "nonnegative");
}

TEST(ShapeOpsErrors, ConcatenateAndStackMismatches) {
  Array x = iota_f32({2, 3});
  expect_error<sp::ValueError>([&] { sp::concatenate({}); }, "need at least one array");
  expect_error<sp::ValueError>([&] { sp::concatenate({Array(1.0f)}); }, "zero-dimensional");
  expect_error<sp::ShapeError>(
      [&] {
        sp::concatenate({x, iota_f32({3})});
      },
      "different numbers of dimensions: got (2, 3), (3,)");
  expect_error<sp::ShapeError>(
      [&] {
        sp::concatenate({x, iota_f32({2, 2})}, 0);
      },
      "concatenating along dimension 0 for shapes (2, 3), (2, 2)");
  expect_error<sp::AxisError>([&] { sp::concatenate({x, x}, 2); }, "[concatenate] axis 2");
  expect_error<sp::TypeError>(
      [&] {
        sp::lax::concatenate({x, x.astype(sp::int32)}, 0);
      },
      "same dtypes");
  expect_error<sp::ShapeError>(
      [&] {
        sp::lax::concatenate({x, iota_f32({2, 2})}, 0);
      },
      "[concatenate]");
  expect_error<sp::ValueError>([&] { sp::lax::concatenate({}, 0); }, "non-empty");
  expect_error<sp::ValueError>([&] { sp::stack({}); }, "need at least one array to stack");
  expect_error<sp::ShapeError>([&] { sp::stack({x, iota_f32({3, 2})}); }, "same shape");
  expect_error<sp::AxisError>([&] { sp::stack({x, x}, 3); }, "[stack] axis 3");
  expect_error<sp::ValueError>([&] { sp::hstack({}); }, "[hstack]");
  expect_error<sp::ValueError>([&] { sp::vstack({}); }, "[vstack]");
}

TEST(ShapeOpsErrors, SplitThatIsNotEqualOrOrdered) {
  Array x = iota_f32({2, 3});
  expect_error<sp::ShapeError>([&] { sp::split(x, 4, 1); },
                               "array split does not result in an equal division");
  expect_error<sp::ValueError>([&] { sp::split(x, 0, 1); }, "larger than 0");
  expect_error<sp::ValueError>([&] { sp::split(x, {2, 1}, 1); }, "nondecreasing");
  expect_error<sp::ValueError>([&] { sp::split(x, std::vector<int64_t>{4}, 1); }, "within [0, 3]");
  expect_error<sp::ValueError>([&] { sp::split(Array(1.0f), 1, 0); }, "zero-dimensional");
  expect_error<sp::AxisError>([&] { sp::split(x, 1, 2); }, "[split] axis 2");
}

TEST(ShapeOpsErrors, PadTileRepeatAndTriangles) {
  Array x = iota_f32({2, 3});
  expect_error<sp::ValueError>([&] { sp::pad(x, {{1, 1}, {1, 1}, {1, 1}}); }, "pad_width");
  expect_error<sp::ValueError>([&] { sp::pad(x, {{-1, 1}}); }, "negative values");
  expect_error<sp::ShapeError>([&] { sp::pad(x, {{1, 1}}, iota_f32({2})); }, "scalar");
  expect_error<sp::ValueError>([&] { sp::tile(x, {-1}); }, "[tile] reps must be nonnegative");
  expect_error<sp::ValueError>([&] { sp::repeat(x, -1); }, "[repeat] repeats");
  expect_error<sp::ValueError>([&] { sp::tril(iota_f32({3})); }, "[tril]");
  expect_error<sp::ValueError>([&] { sp::triu(Array(1.0f)); }, "[triu]");
  auto cfg = std::vector<sp::lax::PadConfig>{{0, 0, -1}, {0, 0, 0}};
  expect_error<sp::ValueError>([&] { sp::lax::pad(x, sp::array<float>({0.0f}, {}), cfg); },
                               "interior padding must be nonnegative");
  cfg = {{-3, 0, 0}, {0, 0, 0}};
  expect_error<sp::ShapeError>([&] { sp::lax::pad(x, sp::array<float>({0.0f}, {}), cfg); },
                               "not at least 0");
  cfg = {{0, 0, 0}, {0, 0, 0}};
  expect_error<sp::TypeError>([&] { sp::lax::pad(x, sp::array<int32_t>({0}, {}), cfg); },
                              "same dtype");
  expect_error<sp::ValueError>(
      [&] {
        sp::lax::pad(x, sp::array<float>({0.0f}, {}), {{0, 0, 0}});
      },
      "one entry per");
}

// Shape sizes are checked: a shape whose element count or bytes do not fit in int64 is refused
// with NumPy's "array is too big" error before any buffer is sized from it, and memory the
// system cannot give raises ResourceExhaustedError with JAX's text instead of std::bad_alloc.
#include <spmd/error.h>
#include <spmd/io.h>
#include <spmd/lax.h>
#include <spmd/ops.h>
#include <spmd/random.h>
#include <spmd/transforms.h>

#include "support/golden.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace sp = spmd;
using spmd_test::error_message;

namespace {

constexpr int64_t k2_31 = int64_t(1) << 31;
constexpr int64_t k2_32 = int64_t(1) << 32;
constexpr int64_t k2_56 = int64_t(1) << 56;
constexpr int64_t k2_62 = int64_t(1) << 62;

const std::string kTooBig =
    "array is too big; `arr.size * arr.dtype.itemsize` is larger than the maximum possible size, "
    "got shape ";

TEST(ShapeSize, ProductsThatOverflowRaise) {
  EXPECT_EQ(error_message<sp::ValueError>([] {
              (void)sp::Shape{k2_32, k2_32}.size();
            }),
            "[shape] " + kTooBig + "(4294967296, 4294967296)");
  EXPECT_EQ(error_message<sp::ValueError>([] {
              (void)sp::Shape{0, k2_62, k2_62}.strides();
            }),
            "[shape] " + kTooBig + "(0, 4611686018427387904, 4611686018427387904)");
  // A zero dim makes the count 0 whatever the other dims are.
  EXPECT_EQ((sp::Shape{0, k2_62, k2_62}.size()), 0);
  EXPECT_EQ((sp::Shape{k2_62 - 1, 2}.size()), INT64_MAX - 1);
  EXPECT_THROW((void)sp::Shape({k2_62, 2}).size(), sp::ValueError);  // 2^63 does not fit
}

TEST(ShapeSize, NumpysLimitCountsBytesAndNonzeroDims) {
  // 2^61 float32 elements are 2^63 bytes: one past the limit. 2^61 - 1 of them fit.
  EXPECT_EQ(sp::check_shape_size(sp::Shape{(int64_t(1) << 61) - 1}, 4, "float32", "t"),
            ((int64_t(1) << 61) - 1) * 4);
  EXPECT_EQ(error_message<sp::ValueError>(
                [] { sp::check_shape_size(sp::Shape{int64_t(1) << 61}, 4, "float32", "t"); }),
            "[t] " + kTooBig + "(2305843009213693952,) of float32");
  // NumPy refuses (0, 2**56, 2**56) too: the dims other than 0 still multiply past the limit.
  EXPECT_EQ(error_message<sp::ValueError>([] {
              sp::check_shape_size(sp::Shape{0, k2_56, k2_56}, 1, "int8", "t");
            }),
            "[t] " + kTooBig + "(0, 72057594037927936, 72057594037927936) of int8");
  EXPECT_EQ(sp::check_shape_size(sp::Shape{0, k2_31, k2_31}, 1, "int8", "t"), 0);
  EXPECT_EQ(error_message<sp::ValueError>([] {
              sp::check_shape_size(sp::Shape{2, -1}, 4, "float32", "t");
            }),
            "[t] negative dimensions are not allowed, got shape (2, -1)");
}

TEST(ShapeSize, CreationRefusesShapesNoArrayCanHave) {
  EXPECT_EQ(error_message<sp::ValueError>([] { (void)sp::ones({k2_62}); }),
            "[ones] " + kTooBig + "(4611686018427387904,) of float32");
  EXPECT_EQ(error_message<sp::ValueError>([] {
              (void)sp::zeros({k2_32, k2_32});
            }),
            "[zeros] " + kTooBig + "(4294967296, 4294967296) of float32");
  EXPECT_EQ(error_message<sp::ValueError>([] {
              (void)sp::full({k2_32, k2_32}, 1);
            }),
            "[full] " + kTooBig + "(4294967296, 4294967296) of int32");
  EXPECT_EQ(error_message<sp::ValueError>([] {
              (void)sp::broadcast_to(sp::ones({1}), {k2_31, k2_31});
            }),
            "[broadcast_to] " + kTooBig + "(2147483648, 2147483648) of float32");
  EXPECT_EQ(error_message<sp::ValueError>(
                [] { (void)sp::arange(int64_t(0), k2_62, int64_t(1), sp::int32); }),
            "[arange] " + kTooBig + "(4611686018427387904,) of int32");
  EXPECT_EQ(error_message<sp::ValueError>([] { (void)sp::arange(0.0, 1e300, 1.0); }),
            "[arange] " + kTooBig + "(9223372036854775807,) of float32");
  // stop − start does not fit in int64: the length is computed without overflow.
  EXPECT_EQ(error_message<sp::ValueError>(
                [] { (void)sp::arange(INT64_MIN, INT64_MAX, int64_t(1), sp::int32); }),
            "[arange] " + kTooBig + "(9223372036854775807,) of int32");
  EXPECT_EQ(sp::arange(INT64_MAX - 2, INT64_MAX, int64_t(1), sp::int32).size(), 2);
  EXPECT_EQ(error_message<sp::ValueError>([] { (void)sp::lax::iota(sp::float32, k2_62); }),
            "[iota] " + kTooBig + "(4611686018427387904,) of float32");
  EXPECT_EQ(error_message<sp::ValueError>([] {
              (void)sp::random::uniform(sp::random::key(0), {k2_32, k2_32});
            }),
            "[random.uniform] " + kTooBig + "(4294967296, 4294967296)");
}

TEST(ShapeSize, ZerosOfOverflowingShapeNoLongerSumToZero) {
  // Before sizes were checked, this shape had size() == 0 and (z + 1).sum() printed 0.
  EXPECT_THROW((void)(sp::zeros({k2_32, k2_32}) + 1.0f).sum(), sp::ValueError);
}

TEST(ShapeSize, ReshapeToAnOverflowingShapeIsAMismatch) {
  sp::Array x = sp::arange(4);
  EXPECT_EQ(error_message<sp::ShapeError>([&] {
              (void)x.reshape({k2_32, k2_32});
            }),
            "[reshape] cannot reshape array of shape (4,) into shape (4294967296, 4294967296)");
  EXPECT_EQ(error_message<sp::ShapeError>([&] {
              (void)x.reshape({k2_32, k2_32, -1});
            }),
            "[reshape] cannot reshape array of shape (4,) into shape (4294967296, 4294967296, -1)");
  EXPECT_EQ(error_message<sp::ValueError>([&] { (void)sp::lax::reshape(x, {k2_32, k2_32}); }),
            "[reshape] " + kTooBig + "(4294967296, 4294967296) of int32");
  // Empty arrays follow NumPy's limit too: the nonzero dims count.
  EXPECT_EQ(error_message<sp::ValueError>([] {
              (void)sp::zeros({0}).reshape({k2_32, k2_32, 0});
            }),
            "[reshape] " + kTooBig + "(4294967296, 4294967296, 0) of float32");
  const int64_t k2_30 = int64_t(1) << 30;
  EXPECT_EQ(sp::zeros({0}).reshape({k2_30, k2_30, 0}).shape(), (sp::Shape{k2_30, k2_30, 0}));
}

TEST(ShapeSize, TracedShapesAreCheckedToo) {
  auto f = sp::jit([](const sp::Array& x) { return sp::broadcast_to(x, {k2_31, k2_31}); });
  EXPECT_EQ(error_message<sp::ValueError>([&] { (void)f(sp::ones({1})); }),
            "[broadcast_to] " + kTooBig + "(2147483648, 2147483648) of float32");
  // A primitive bound directly is checked by its shape rule's caller.
  EXPECT_EQ(error_message<sp::ValueError>([] {
              (void)sp::lax::broadcast_in_dim(sp::ones({1}), {k2_31, k2_31}, {1});
            }),
            "[broadcast_in_dim] " + kTooBig + "(2147483648, 2147483648) of float32");
}

// 2^48 float32 elements are 1 PiB, beyond any machine's address space: the allocation fails
// whatever the system's overcommit policy.
constexpr int64_t kHuge = int64_t(1) << 48;
const std::string kExhausted =
    "RESOURCE_EXHAUSTED: Out of memory allocating 1125899906842624 bytes.";

TEST(ShapeSize, AllocationFailureRaisesResourceExhausted) {
  EXPECT_EQ(error_message<sp::ResourceExhaustedError>([] { (void)sp::ones({kHuge}); }),
            "[broadcast_in_dim] " + kExhausted +
                " The array has shape (281474976710656,) and dtype float32.");
  // Also a RuntimeError, as JAX's JaxRuntimeError is.
  EXPECT_THROW((void)sp::lax::iota(sp::float32, kHuge), sp::RuntimeError);
  auto f = sp::jit([](const sp::Array& x) { return sp::broadcast_to(x, {kHuge}) * 2.0f; });
  EXPECT_EQ(error_message<sp::ResourceExhaustedError>([&] { (void)f(sp::ones({1})); }),
            "[broadcast_in_dim] " + kExhausted +
                " The array has shape (281474976710656,) and dtype float32.");
  // Host-side values of a non-iota arange.
  EXPECT_EQ(error_message<sp::ResourceExhaustedError>(
                [] { (void)sp::arange(int64_t(1), kHuge * 4, int64_t(1), sp::int8); }),
            "[arange] RESOURCE_EXHAUSTED: Out of memory allocating 9007199254740984 bytes.");
  // Nothing is left half-made: ordinary work goes on.
  EXPECT_EQ(sp::ones({3}).sum().item<float>(), 3.0f);
}

TEST(ShapeSize, NpyHeaderWithAShapeNoArrayCanHaveIsRefused) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / "spmd_shape_size_test.npy";
  std::string dict =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 72057594037927936, "
      "72057594037927936), }";
  dict.append(64 - (10 + dict.size() + 1) % 64, ' ');
  dict += '\n';
  std::string file = std::string("\x93NUMPY\x01\x00", 8);
  file += char(dict.size() & 0xff);
  file += char(dict.size() >> 8);
  file += dict;
  std::ofstream(path, std::ios::binary) << file;
  std::string message = error_message<sp::IOError>([&] { (void)sp::load_npy(path.string()); });
  EXPECT_NE(message.find("shape (0, 72057594037927936, 72057594037927936) is too large"),
            std::string::npos)
      << message;
  std::filesystem::remove(path);
}

}  // namespace

// .npy/.npz reading and writing: files NumPy wrote (tools/goldens/gen_io.py) load with the exact
// values listed here, spmd's files round-trip and match np.save byte for byte, and corrupt,
// truncated or unsupported files raise spmd errors without crashing.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "core/array_impl.h"
#include "io/zip.h"
#include "support/golden.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

namespace sp = spmd;
namespace fs = std::filesystem;
using sp::Array;
using sp::DType;
using sp::Shape;

namespace {

std::string io_golden(const std::string& name) {
  return spmd_test::golden_path("io/" + name);
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Replaces the file rather than truncating it: ext4 flushes truncated-and-rewritten files to
// disk on close, which makes thousands of rewrites (the fuzz tests) take minutes.
void write_file(const std::string& path, const std::string& bytes) {
  fs::remove(path);
  std::ofstream(path, std::ios::binary) << bytes;
}

// A fresh directory under the test temp dir, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = fs::path(::testing::TempDir()) /
            ("spmd_io_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

// An array of dtype t holding exactly `values` (no promotion or x64 canonicalisation); 1-d
// unless a shape is given.
template <class T>
Array raw(DType t, const std::vector<T>& values, const Shape& shape) {
  return sp::array_from_bytes(values.data(), t, shape);
}
template <class T>
Array raw(DType t, const std::vector<T>& values) {
  return raw(t, values, Shape{int64_t(values.size())});
}

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The values gen_io.py writes for each dtype (16-bit floats as bit patterns, NaNs included).
std::map<std::string, Array> dtype_goldens() {
  using std::numeric_limits;
  auto f32 = [](float v) { return v; };
  return {
      {"bool", raw<uint8_t>(sp::bool_, {1, 0, 1, 1, 0})},
      {"int8", raw<int8_t>(sp::int8, {-128, -1, 0, 1, 42, 127})},
      {"int16", raw<int16_t>(sp::int16, {-32768, -1, 0, 1, 1000, 32767})},
      {"int32", raw<int32_t>(sp::int32, {numeric_limits<int32_t>::min(), -1, 0, 1, 123456789,
                                         numeric_limits<int32_t>::max()})},
      {"int64", raw<int64_t>(sp::int64, {numeric_limits<int64_t>::min(), -1, 0, 1,
                                         1234567890123456789, numeric_limits<int64_t>::max()})},
      {"uint8", raw<uint8_t>(sp::uint8, {0, 1, 127, 128, 255})},
      {"uint16", raw<uint16_t>(sp::uint16, {0, 1, 32768, 65535})},
      {"uint32", raw<uint32_t>(sp::uint32, {0, 1, 2147483648u, 4294967295u})},
      {"uint64", raw<uint64_t>(sp::uint64, {0, 1, uint64_t(1) << 63, ~uint64_t(0)})},
      {"float16", raw<uint16_t>(sp::float16, {0x0000, 0x8000, 0x3e00, 0xc080, 0x7bff, 0x0001,
                                              0x7c00, 0xfc00, 0x7e00, 0x2e66})},
      {"bfloat16", raw<uint16_t>(sp::bfloat16, {0x0000, 0x8000, 0x3fc0, 0xc010, 0x7f7f, 0x0001,
                                                0x7f80, 0xff80, 0x7fc0, 0x3dcd})},
      {"float32", raw<float>(sp::float32, {0.0f, -0.0f, 1.5f, -2.25f, numeric_limits<float>::max(),
                                           numeric_limits<float>::denorm_min(), f32(kInf),
                                           f32(-kInf), f32(kNaN), 0.1f})},
      {"float64",
       raw<double>(sp::float64, {0.0, -0.0, 1.5, -2.25, numeric_limits<double>::max(),
                                 numeric_limits<double>::denorm_min(), kInf, -kInf, kNaN, 0.1})},
  };
}

std::vector<double> iota(int n, double scale = 1.0) {
  std::vector<double> v(size_t(n), 0.0);
  for (int i = 0; i < n; ++i) v[size_t(i)] = i * scale;
  return v;
}

// Identical bytes, so NaN payloads and the sign of zero count.
::testing::AssertionResult same_bytes(const Array& a, const Array& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape() || a.nbytes() != b.nbytes())
    return ::testing::AssertionFailure() << "different dtype or shape";
  if (std::memcmp(sp::host_data(a, "test"), sp::host_data(b, "test"), size_t(a.nbytes())) != 0)
    return ::testing::AssertionFailure() << "bytes differ";
  return ::testing::AssertionSuccess();
}

// Calls f and checks that it throws E whose message contains every one of `parts`.
template <class E, class F>
::testing::AssertionResult throws_with(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
  } catch (const E& e) {
    std::string what = e.what();
    for (const std::string& part : parts)
      if (what.find(part) == std::string::npos)
        return ::testing::AssertionFailure()
               << "message \"" << what << "\" lacks \"" << part << "\"";
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw another exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

// A .npy file with a hand-written header dict (version 1.0, no alignment) and data.
std::string npy_with_header(const std::string& dict, const std::string& data = "", int major = 1) {
  std::string out = "\x93NUMPY";
  out.push_back(char(major));
  out.push_back(0);
  size_t len = dict.size() + 1;
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i) out.push_back(char(len >> (8 * i)));
  return out + dict + "\n" + data;
}

}  // namespace

// ---- Files written by NumPy ----

TEST(NpyGolden, EveryDtypeLoadsWithExactValuesAndNaNPayloads) {
  for (const auto& [name, expected] : dtype_goldens()) {
    SCOPED_TRACE(name);
    Array got = sp::load_npy(io_golden(name + ".npy"));
    EXPECT_TRUE(spmd_test::arrays_equal(got, expected));
    EXPECT_TRUE(same_bytes(got, expected));
  }
}

TEST(NpyGolden, BFloat16FromMlDtypesVoidDescrLoadsAsBFloat16) {
  Array x = sp::load_npy(io_golden("bfloat16.npy"));
  EXPECT_EQ(x.dtype(), sp::bfloat16);
  EXPECT_EQ(x.to_vector<float>()[2], 1.5f);
  EXPECT_EQ(x.to_vector<float>()[3], -2.25f);
}

TEST(NpyGolden, ThreeDimensionalArrayKeepsRowMajorOrder) {
  std::vector<int32_t> v(24);
  for (int i = 0; i < 24; ++i) v[size_t(i)] = i;
  EXPECT_TRUE(spmd_test::arrays_equal(sp::load_npy(io_golden("int32_2x3x4.npy")),
                                      raw(sp::int32, v, {2, 3, 4})));
}

TEST(NpyGolden, ZeroDimensionalAndEmptyArraysKeepTheirShapes) {
  EXPECT_TRUE(spmd_test::arrays_equal(sp::load_npy(io_golden("float64_scalar.npy")),
                                      raw<double>(sp::float64, {3.25}, Shape{})));
  Array scalar = sp::load_npy(io_golden("float64_scalar.npy"));
  EXPECT_EQ(scalar.shape(), Shape{});
  Array empty = sp::load_npy(io_golden("float32_empty_0x3.npy"));
  EXPECT_EQ(empty.shape(), (Shape{0, 3}));
  EXPECT_EQ(empty.dtype(), sp::float32);
}

TEST(NpyGolden, BigEndianDataIsByteSwapped) {
  EXPECT_TRUE(spmd_test::arrays_equal(sp::load_npy(io_golden("int16_big_endian.npy")),
                                      raw<int16_t>(sp::int16, {-300, 1, 258, 32767})));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::load_npy(io_golden("float64_big_endian.npy")),
                                      raw<double>(sp::float64, {1.5, -0.1, kInf})));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::load_npy(io_golden("uint32_big_endian_2x2.npy")),
                                      raw<uint32_t>(sp::uint32, {1, 2, 3, 4000000000u}, {2, 2})));
}

TEST(NpyGolden, FortranOrderDataIsTransposedToRowMajor) {
  std::vector<int32_t> ramp12(12);
  for (int i = 0; i < 12; ++i) ramp12[size_t(i)] = i;
  EXPECT_TRUE(spmd_test::arrays_equal(sp::load_npy(io_golden("int32_fortran_3x4.npy")),
                                      raw(sp::int32, ramp12, {3, 4})));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::load_npy(io_golden("float64_fortran_2x3x4.npy")),
                                      raw(sp::float64, iota(24, 0.125), {2, 3, 4})));
  EXPECT_TRUE(
      spmd_test::arrays_equal(sp::load_npy(io_golden("uint16_fortran_big_endian_2x3.npy")),
                              raw<uint16_t>(sp::uint16, {0, 257, 514, 771, 1028, 1285}, {2, 3})));
  EXPECT_TRUE(spmd_test::arrays_equal(sp::load_npy(io_golden("bool_fortran_2x2.npy")),
                                      raw<uint8_t>(sp::bool_, {1, 0, 0, 0}, {2, 2})));
}

TEST(NpyGolden, ReadsFormatVersions2And3) {
  Array expected = raw<float>(sp::float32, {1.0f, -2.0f, 0.5f, 8.0f}, {2, 2});
  for (const char* name : {"float32_version_2_0.npy", "float32_version_3_0.npy"}) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(spmd_test::arrays_equal(sp::load_npy(io_golden(name)), expected));
  }
}

TEST(NpzGolden, SavezArchiveWithZip64LocalHeadersLoadsEveryMember) {
  auto arrays = sp::load_npz(io_golden("savez.npz"));
  ASSERT_EQ(arrays.size(), 6u);
  EXPECT_TRUE(spmd_test::arrays_equal(arrays.at("ints"),
                                      raw<int64_t>(sp::int64, {0, 1, 2, 3, 4, 5}, {2, 3})));
  EXPECT_TRUE(spmd_test::arrays_equal(arrays.at("flags"), raw<uint8_t>(sp::bool_, {1, 0})));
  EXPECT_TRUE(
      spmd_test::arrays_equal(arrays.at("half"), raw<uint16_t>(sp::float16, {0x3800, 0xbc00})));
  EXPECT_TRUE(spmd_test::arrays_equal(arrays.at("bf16"),
                                      raw<uint16_t>(sp::bfloat16, {0x3fc0, 0xc010, 0x3dcd})));
  EXPECT_TRUE(spmd_test::arrays_equal(arrays.at("scalar"), raw<uint8_t>(sp::uint8, {7}, Shape{})));
  EXPECT_TRUE(
      spmd_test::arrays_equal(arrays.at("empty"), raw<double>(sp::float64, {}, Shape{3, 0})));
}

TEST(NpzGolden, CompressedArchiveInflatesEveryMember) {
  auto arrays = sp::load_npz(io_golden("savez_compressed.npz"));
  ASSERT_EQ(arrays.size(), 3u);
  std::vector<float> ramp(1000);
  for (int i = 0; i < 1000; ++i) ramp[size_t(i)] = float(i) / 4;
  std::vector<int8_t> codes(300);
  for (int i = 0; i < 300; ++i) codes[size_t(i)] = int8_t(i % 7);
  EXPECT_TRUE(spmd_test::arrays_equal(arrays.at("ramp"), raw(sp::float32, ramp)));
  EXPECT_TRUE(spmd_test::arrays_equal(arrays.at("codes"), raw(sp::int8, codes)));
  EXPECT_TRUE(spmd_test::arrays_equal(arrays.at("bf16"),
                                      raw<uint16_t>(sp::bfloat16, {0x3fc0, 0xc010, 0x3dcd})));
}

TEST(NpzGolden, EmptyArchiveLoadsAsEmptyMap) {
  EXPECT_TRUE(sp::load_npz(io_golden("savez_empty.npz")).empty());
}

// ---- Round trips ----

TEST(NpyRoundTrip, EveryDtypeRoundTripsBitExactly) {
  TempDir dir;
  for (const auto& [name, x] : dtype_goldens()) {
    SCOPED_TRACE(name);
    sp::save_npy(dir.file(name + ".npy"), x);
    EXPECT_TRUE(same_bytes(sp::load_npy(dir.file(name + ".npy")), x));
  }
}

TEST(NpyRoundTrip, SavedFilesAreByteIdenticalToNumpySave) {
  TempDir dir;
  std::vector<std::string> names;
  for (const auto& [name, x] : dtype_goldens()) names.push_back(name);
  for (const char* extra :
       {"int32_2x3x4", "float64_scalar", "float32_empty_0x3", "float32_version_2_0"})
    names.push_back(extra);
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    sp::save_npy(dir.file("x.npy"), sp::load_npy(io_golden(name + ".npy")));
    std::string want = read_file(io_golden(name + ".npy"));
    // np.save chose version 1.0 for this array; only the version-2.0 file differs in its prefix.
    if (name.ends_with("version_2_0")) continue;
    EXPECT_EQ(read_file(dir.file("x.npy")), want);
  }
}

TEST(NpyRoundTrip, UnusualShapesRoundTrip) {
  TempDir dir;
  std::vector<Shape> shapes = {{}, {0}, {2, 0, 3}, {1, 1, 1, 1, 1, 1, 1, 1}, {3, 1, 2}};
  for (const Shape& shape : shapes) {
    SCOPED_TRACE(shape.str());
    Array x = raw(sp::float64, iota(int(shape.size()), 0.5), shape);
    sp::save_npy(dir.file("s.npy"), x);
    Array y = sp::load_npy(dir.file("s.npy"));
    EXPECT_EQ(y.shape(), shape);
    EXPECT_TRUE(spmd_test::arrays_equal(y, x));
  }
}

TEST(NpyRoundTrip, MillionElementArrayRoundTrips) {
  TempDir dir;
  std::vector<float> v(1 << 20);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i) * 0.25f - 7.0f;
  Array x = raw(sp::float32, v, {1024, 1024});
  sp::save_npy(dir.file("big.npy"), x);
  EXPECT_TRUE(spmd_test::arrays_equal(sp::load_npy(dir.file("big.npy")), x));
  sp::save_npz(dir.file("big.npz"), {{"x", x}});
  EXPECT_TRUE(spmd_test::arrays_equal(sp::load_npz(dir.file("big.npz")).at("x"), x));
}

TEST(NpyRoundTrip, NonCanonicalBoolBytesLoadAsTrue) {
  TempDir dir;
  write_file(dir.file("b.npy"), npy_with_header("{'descr': '|b1', 'fortran_order': False, "
                                                "'shape': (3,), }",
                                                std::string("\x00\x02\xff", 3)));
  EXPECT_TRUE(
      spmd_test::arrays_equal(sp::load_npy(dir.file("b.npy")), raw<uint8_t>(sp::bool_, {0, 1, 1})));
}

TEST(NpyRoundTrip, HandWrittenHeadersInPythonSyntaxVariantsLoad) {
  TempDir dir;
  std::string four_bytes("\x01\x00\x02\x00", 4);
  for (const char* dict : {"{\"descr\": \"<i2\", \"fortran_order\": False, \"shape\": (2,)}",
                           "{'shape': (2L,), 'fortran_order': False, 'descr': '=i2'}",
                           "{'descr':'<i2','fortran_order':True,'shape':(1,2,),}"}) {
    SCOPED_TRACE(dict);
    write_file(dir.file("h.npy"), npy_with_header(dict, four_bytes));
    Array x = sp::load_npy(dir.file("h.npy"));
    EXPECT_EQ(x.to_vector<int>(), (std::vector<int>{1, 2}));
  }
}

TEST(NpzRoundTrip, MixedArraysRoundTripUnderTheirNames) {
  TempDir dir;
  std::map<std::string, Array> arrays = dtype_goldens();
  arrays["dotted.name"] = raw<int32_t>(sp::int32, {5}, Shape{});
  arrays["sub/dir"] = raw<double>(sp::float64, {}, Shape{0, 2});
  arrays["\xc3\xa9t\xc3\xa9"] = raw<int8_t>(sp::int8, {1, 2});  // non-ASCII: UTF-8 flag set
  sp::save_npz(dir.file("a.npz"), arrays);
  auto loaded = sp::load_npz(dir.file("a.npz"));
  ASSERT_EQ(loaded.size(), arrays.size());
  for (const auto& [name, x] : arrays) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(loaded.count(name));
    EXPECT_TRUE(same_bytes(loaded.at(name), x));
  }
}

TEST(NpzRoundTrip, EmptyMapRoundTrips) {
  TempDir dir;
  sp::save_npz(dir.file("e.npz"), {});
  EXPECT_EQ(read_file(dir.file("e.npz")), read_file(io_golden("savez_empty.npz")));
  EXPECT_TRUE(sp::load_npz(dir.file("e.npz")).empty());
}

TEST(NpzRoundTrip, ForcedZip64ArchiveLoads) {
  TempDir dir;
  sp::io::ZipWriter zip(dir.file("z.npz"), "save_npz", /*force_zip64=*/true);
  for (const char* name : {"a", "b"}) {
    sp::save_npy(dir.file("m.npy"), raw<int16_t>(sp::int16, {int16_t(name[0]), 7}));
    std::string bytes = read_file(dir.file("m.npy"));
    zip.add(std::string(name) + ".npy",
            {{reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}});
  }
  zip.finish();
  auto loaded = sp::load_npz(dir.file("z.npz"));
  ASSERT_EQ(loaded.size(), 2u);
  EXPECT_EQ(loaded.at("a").to_vector<int>(), (std::vector<int>{'a', 7}));
  EXPECT_EQ(loaded.at("b").to_vector<int>(), (std::vector<int>{'b', 7}));
}

// ---- Errors ----

TEST(NpyErrors, MissingFileRaisesIOError) {
  EXPECT_TRUE(throws_with<sp::IOError>([] { sp::load_npy("/nonexistent/x.npy"); },
                                       {"[load_npy]", "/nonexistent/x.npy", "cannot open"}));
  EXPECT_TRUE(throws_with<sp::IOError>([] { sp::load_npz("/nonexistent/x.npz"); },
                                       {"[load_npz]", "cannot open"}));
}

TEST(NpyErrors, DirectoryRaisesIOError) {
  TempDir dir;
  EXPECT_TRUE(throws_with<sp::IOError>([&] { sp::load_npy(dir.file("")); },
                                       {"[load_npy]", "is a directory"}));
  EXPECT_TRUE(throws_with<sp::IOError>([&] { sp::save_npy(dir.file(""), Array(1.0f)); },
                                       {"[save_npy]", "is a directory"}));
}

TEST(NpyErrors, UnwritablePathRaisesIOError) {
  Array x = raw<float>(sp::float32, {1.0f});
  EXPECT_TRUE(throws_with<sp::IOError>([&] { sp::save_npy("/nonexistent/dir/x.npy", x); },
                                       {"[save_npy]", "cannot open for writing"}));
  EXPECT_TRUE(throws_with<sp::IOError>(
      [&] {
        sp::save_npz("/nonexistent/dir/x.npz", {{"x", x}});
      },
      {"[save_npz]", "cannot open for writing"}));
}

TEST(NpyErrors, EmptyHandleOrTooManyDimensionsRaiseValueError) {
  TempDir dir;
  EXPECT_TRUE(throws_with<sp::ValueError>([&] { sp::save_npy(dir.file("x.npy"), Array()); },
                                          {"[save_npy]", "empty Array"}));
  EXPECT_TRUE(throws_with<sp::ValueError>(
      [&] {
        sp::save_npz(dir.file("x.npz"), {{"bad", Array()}});
      },
      {"[save_npz]", "'bad'"}));
  EXPECT_FALSE(fs::exists(dir.file("x.npz")));
  Array deep = raw<float>(sp::float32, {1.0f}, Shape(std::vector<int64_t>(65, 1)));
  EXPECT_TRUE(throws_with<sp::ValueError>([&] { sp::save_npy(dir.file("d.npy"), deep); },
                                          {"at most 64 dimensions", "has 65"}));
}

TEST(NpyErrors, WrongMagicOrVersionRaisesIOError) {
  TempDir dir;
  write_file(dir.file("a.npy"), "hello, this is not numpy data at all");
  EXPECT_TRUE(throws_with<sp::IOError>([&] { sp::load_npy(dir.file("a.npy")); },
                                       {"[load_npy]", "not a .npy file"}));
  write_file(dir.file("b.npy"), "\x93NUM");
  EXPECT_TRUE(throws_with<sp::IOError>([&] { sp::load_npy(dir.file("b.npy")); }, {"too short"}));
  std::string v4 = read_file(io_golden("int8.npy"));
  v4[6] = 4;
  write_file(dir.file("c.npy"), v4);
  EXPECT_TRUE(throws_with<sp::IOError>([&] { sp::load_npy(dir.file("c.npy")); },
                                       {"unsupported .npy format version 4.0"}));
  EXPECT_TRUE(throws_with<sp::IOError>([&] { sp::load_npy(io_golden("savez.npz")); },
                                       {"it is a zip archive; use load_npz"}));
}

TEST(NpyErrors, MalformedHeaderDictsRaiseIOError) {
  TempDir dir;
  const char* bad[] = {
      "",
      "{}",
      "{'descr': '<f4', 'fortran_order': False}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}",
      "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}",
      "{'descr': '<f4', 'fortran_order': maybe, 'shape': (1,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1,}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': [1]}",
      "{'descr: '<f4', 'fortran_order': False, 'shape': (1,)}",
      "{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} trailing",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}",
  };
  for (const char* dict : bad) {
    SCOPED_TRACE(dict);
    write_file(dir.file("h.npy"), npy_with_header(dict, "\0\0\0\0"));
    EXPECT_TRUE(throws_with<sp::IOError>([&] { sp::load_npy(dir.file("h.npy")); },
                                         {"[load_npy]", "bad .npy header"}));
  }
}

TEST(NpyErrors, UnsupportedDescrRaisesTypeError) {
  TempDir dir;
  for (std::string descr : {"'<c8'", "'|O'", "'<f16'", "'<V4'", "'|b2'", "'<u3'", "'x'",
                            "[('a', '<f4')]", "'<M8[s]'"}) {
    SCOPED_TRACE(descr);
    write_file(dir.file("d.npy"),
               npy_with_header("{'descr': " + descr + ", 'fortran_order': False, 'shape': ()}",
                               std::string(16, '\0')));
    EXPECT_TRUE(throws_with<sp::TypeError>([&] { sp::load_npy(dir.file("d.npy")); },
                                           {"[load_npy]", "is not supported"}));
  }
}

TEST(NpyErrors, DataSizeMismatchRaisesIOError) {
  TempDir dir;
  std::string dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3)}";
  write_file(dir.file("short.npy"), npy_with_header(dict, std::string(20, '\0')));
  EXPECT_TRUE(throws_with<sp::IOError>(
      [&] { sp::load_npy(dir.file("short.npy")); },
      {"data size mismatch", "shape (2, 3) of int32 needs 24 bytes, the file has 20"}));
  write_file(dir.file("long.npy"), npy_with_header(dict, std::string(28, '\0')));
  EXPECT_TRUE(
      throws_with<sp::IOError>([&] { sp::load_npy(dir.file("long.npy")); }, {"the file has 28"}));
  std::string huge = "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296)}";
  write_file(dir.file("huge.npy"), npy_with_header(huge));
  EXPECT_TRUE(
      throws_with<sp::IOError>([&] { sp::load_npy(dir.file("huge.npy")); }, {"is too large"}));
  std::string header_len = read_file(io_golden("int8.npy"));
  header_len[8] = '\xff', header_len[9] = '\x7f';
  write_file(dir.file("len.npy"), header_len);
  EXPECT_TRUE(throws_with<sp::IOError>([&] { sp::load_npy(dir.file("len.npy")); },
                                       {"header length 32767 exceeds the file"}));
}

TEST(NpzErrors, NonArchivesRaiseIOError) {
  TempDir dir;
  EXPECT_TRUE(throws_with<sp::IOError>([&] { sp::load_npz(io_golden("int64.npy")); },
                                       {"[load_npz]", "it is a .npy file; use load_npy"}));
  write_file(dir.file("tiny.npz"), "PK");
  EXPECT_TRUE(
      throws_with<sp::IOError>([&] { sp::load_npz(dir.file("tiny.npz")); }, {"not a zip archive"}));
  write_file(dir.file("junk.npz"), std::string(1000, 'x'));
  EXPECT_TRUE(throws_with<sp::IOError>([&] { sp::load_npz(dir.file("junk.npz")); },
                                       {"no end of central directory"}));
}

TEST(NpzErrors, CorruptMemberDataFailsTheCrcCheck) {
  TempDir dir;
  sp::save_npz(dir.file("a.npz"), {{"x", raw<int32_t>(sp::int32, {0x11223344, 5})}});
  std::string bytes = read_file(dir.file("a.npz"));
  size_t at = bytes.find("\x44\x33\x22\x11");
  ASSERT_NE(at, std::string::npos);
  bytes[at] = 0x45;
  write_file(dir.file("a.npz"), bytes);
  EXPECT_TRUE(throws_with<sp::IOError>([&] { sp::load_npz(dir.file("a.npz")); },
                                       {"[load_npz]", "member 'x.npy'", "CRC-32 mismatch"}));
}

// A damaged byte in a member's header can spell an unsupported dtype; the member's CRC-32 shows
// it is damage, which is what the error reports.
TEST(NpzErrors, CorruptDescrInAMemberFailsTheCrcCheck) {
  TempDir dir;
  sp::save_npz(dir.file("a.npz"), {{"x", raw<int32_t>(sp::int32, {1, 2})}});
  std::string bytes = read_file(dir.file("a.npz"));
  size_t at = bytes.find("'<i4'");
  ASSERT_NE(at, std::string::npos);
  bytes[at + 3] = '3';
  write_file(dir.file("a.npz"), bytes);
  EXPECT_TRUE(throws_with<sp::IOError>([&] { sp::load_npz(dir.file("a.npz")); },
                                       {"[load_npz]", "member 'x.npy'", "CRC-32 mismatch"}));
}

TEST(NpzErrors, UnsupportedMembersRaiseIOError) {
  TempDir dir;
  sp::save_npz(dir.file("a.npz"), {{"x", raw<int8_t>(sp::int8, {1})}});
  std::string good = read_file(dir.file("a.npz"));
  size_t central = good.find("PK\x01\x02");
  ASSERT_NE(central, std::string::npos);
  std::string bzip2 = good;
  bzip2[central + 10] = 12;  // compression method
  write_file(dir.file("m.npz"), bzip2);
  EXPECT_TRUE(throws_with<sp::IOError>([&] { sp::load_npz(dir.file("m.npz")); },
                                       {"compression method 12 is not supported"}));
  std::string encrypted = good;
  encrypted[central + 8] = 1;  // flags
  write_file(dir.file("e.npz"), encrypted);
  EXPECT_TRUE(throws_with<sp::IOError>([&] { sp::load_npz(dir.file("e.npz")); },
                                       {"encrypted members are not supported"}));
  std::string not_npy = good;
  not_npy.replace(good.find("\x93NUMPY"), 6, "NOTNPY");
  write_file(dir.file("n.npz"), not_npy);
  EXPECT_TRUE(throws_with<sp::IOError>([&] { sp::load_npz(dir.file("n.npz")); },
                                       {"member 'x.npy'", "not a .npy file"}));
}

// ---- Damaged files: every truncation raises, every flipped byte loads or raises ----

namespace {

// Loads path with `load`; fails the test if anything other than an spmd::Error escapes.
// Returns whether the load succeeded.
template <class Load>
bool loads_or_raises_spmd_error(Load load, const std::string& what) {
  try {
    load();
    return true;
  } catch (const sp::Error&) {
    return false;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": non-spmd exception " << e.what();
  } catch (...) {
    ADD_FAILURE() << what << ": unknown exception";
  }
  return false;
}

std::vector<std::pair<std::string, bool>> fuzz_seeds(const TempDir& dir) {
  sp::save_npz(dir.file("spmd.npz"), {{"a", raw<int16_t>(sp::int16, {1, -2, 3}, {3, 1})},
                                      {"b", raw<uint8_t>(sp::bool_, {1, 0})}});
  sp::io::ZipWriter zip(dir.file("zip64.npz"), "save_npz", true);
  std::string member = read_file(io_golden("int8.npy"));
  zip.add("m.npy", {{reinterpret_cast<const uint8_t*>(member.data()), member.size()}});
  zip.finish();
  // (path, is_npz)
  return {{io_golden("float32.npy"), false},
          {io_golden("uint16_fortran_big_endian_2x3.npy"), false},
          {io_golden("float32_version_3_0.npy"), false},
          {io_golden("savez.npz"), true},
          {io_golden("savez_compressed.npz"), true},
          {dir.file("spmd.npz"), true},
          {dir.file("zip64.npz"), true}};
}

void load_any(const std::string& path, bool npz) {
  if (npz)
    sp::load_npz(path);
  else
    sp::load_npy(path);
}

}  // namespace

TEST(NpyFuzz, EveryTruncationOfAValidFileRaises) {
  TempDir dir;
  for (const auto& [seed, npz] : fuzz_seeds(dir)) {
    std::string bytes = read_file(seed);
    ASSERT_FALSE(bytes.empty());
    for (size_t len = 0; len < bytes.size(); ++len) {
      write_file(dir.file("t"), bytes.substr(0, len));
      std::string what = seed + " cut to " + std::to_string(len);
      EXPECT_FALSE(loads_or_raises_spmd_error([&] { load_any(dir.file("t"), npz); }, what))
          << what << " loaded";
    }
  }
}

TEST(NpyFuzz, FlippedBytesLoadOrRaiseSpmdErrors) {
  TempDir dir;
  int loaded = 0, raised = 0;
  for (const auto& [seed, npz] : fuzz_seeds(dir)) {
    std::string bytes = read_file(seed);
    for (size_t pos = 0; pos < bytes.size(); ++pos) {
      for (uint8_t value : {uint8_t(bytes[pos] ^ 0xff), uint8_t(bytes[pos] ^ 0x01), uint8_t(0)}) {
        std::string damaged = bytes;
        damaged[pos] = char(value);
        write_file(dir.file("f"), damaged);
        std::string what = seed + " byte " + std::to_string(pos) + " = " + std::to_string(value);
        (loads_or_raises_spmd_error([&] { load_any(dir.file("f"), npz); }, what) ? loaded
                                                                                 : raised)++;
      }
    }
  }
  // Both outcomes occur: data bytes of .npy files change values, header bytes break the file.
  EXPECT_GT(loaded, 0);
  EXPECT_GT(raised, 0);
}

// ---- Random header mutations: every generated file loads as described or raises IOError ----

namespace {

class FuzzRng {
 public:
  explicit FuzzRng(uint64_t seed) : rng_(seed) {}
  uint64_t below(uint64_t n) { return rng_() % n; }
  bool chance(int percent) { return below(100) < uint64_t(percent); }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[size_t(below(v.size()))];
  }
  uint64_t bits() { return rng_(); }

 private:
  std::mt19937_64 rng_;
};

// One generated .npy header: its dict text and, when every part is well-formed, what it
// describes.
struct FuzzHeader {
  std::string dict;
  bool valid = true;
  DType dtype = sp::float32;
  bool big_endian = false, fortran = false;
  Shape shape;
  bool huge = false;  // a valid shape too large to hold
  // Zero elements next to dims of 2^31 and more: the reader may refuse those as too large (it
  // bounds each dim), so they need not load.
  bool empty_but_huge_dims = false;
  // The nonzero dims times the itemsize exceed 2^63 - 1 bytes, empty or not: no array has such a
  // shape (NumPy's limit), so the file must be refused.
  bool too_big = false;
};

std::string descr_text(FuzzRng& r, FuzzHeader& h) {
  struct Descr {
    const char* text;
    DType dtype;
    bool big_endian;
  };
  static const std::vector<Descr> good = {
      {"<f4", sp::float32, false}, {">f8", sp::float64, true},   {"|b1", sp::bool_, false},
      {"<i2", sp::int16, false},   {">u4", sp::uint32, true},    {"|u1", sp::uint8, false},
      {"=i8", sp::int64, false},   {"<V2", sp::bfloat16, false}, {"<f2", sp::float16, false}};
  // Malformed or unsupported: each raises IOError (bad syntax) or TypeError (not supported).
  static const std::vector<std::string> bad = {
      "'<f3'",          "'<c8'", "''",     "'<'",          "'f4'",  "'<f4 '",
      "'<f4",           "<f4",   "'>b1x'", "'<V4'",        "'|O'",  "'<M8[ns]'",
      "[('a', '<f4')]", "None",  "1",      "'\\x00\\x01'", "'<i16'"};
  if (r.chance(85)) {
    const Descr& d = r.pick(good);
    h.dtype = d.dtype;
    h.big_endian = d.big_endian;
    return r.chance(50) ? std::string("'") + d.text + "'" : std::string("\"") + d.text + "\"";
  }
  h.valid = false;
  return r.pick(bad);
}

std::string fortran_text(FuzzRng& r, FuzzHeader& h) {
  static const std::vector<std::string> bad = {"maybe", "1",         "0", "None", "'False'",
                                               "Fals",  "TrueFalse", "",  "true", "(False,)"};
  if (r.chance(85)) {
    h.fortran = r.chance(40);
    return h.fortran ? "True" : "False";
  }
  h.valid = false;
  return r.pick(bad);
}

// A dim: small, zero or huge (products past 2^62 bytes are refused), or malformed.
std::string dim_text(FuzzRng& r, FuzzHeader& h, int64_t& value) {
  static const std::vector<int64_t> small = {0, 1, 1, 2, 3, 4, 5, 7};
  static const std::vector<int64_t> huge = {int64_t(1) << 31, int64_t(1) << 40, int64_t(1) << 56,
                                            1000000000000000000};
  static const std::vector<std::string> bad = {
      "-1", "2.0", "0x10", "1e3", "'2'", "None", "(2,)", "+3", "99999999999999999999", "2 3", ""};
  if (r.chance(90)) {
    value = r.chance(8) ? r.pick(huge) : r.pick(small);
    return std::to_string(value) + (r.chance(5) ? "L" : "");
  }
  h.valid = false;
  return r.pick(bad);
}

std::string shape_text(FuzzRng& r, FuzzHeader& h) {
  // Mostly ranks 0 to 5; sometimes around NumPy's limit of 64, with dims of 1 and 2.
  const bool deep = r.chance(3);
  const int rank = deep ? 62 + int(r.below(6)) : int(r.below(6));
  if (rank > 64) h.valid = false;
  std::vector<int64_t> dims;
  std::string text;  // the dims, without brackets
  __int128 nonzero = 1, bytes = sp::itemsize(h.dtype);
  for (int i = 0; i < rank; ++i) {
    int64_t v = 1;
    std::string d = deep ? std::to_string(v = int64_t(1 + r.below(2))) : dim_text(r, h, v);
    // Both saturate past 2^64: beyond that only "too big" matters.
    const __int128 kCap = __int128(1) << 64;
    if (v && nonzero <= kCap) nonzero *= v;
    bytes = v == 0 ? 0 : bytes > kCap ? bytes : bytes * v;
    if (i) text += ",";
    text.append(r.below(3), ' ').append(d);
    dims.push_back(v);
  }
  if (rank == 1 || (rank > 1 && r.chance(20))) text += ",";
  h.shape = Shape(dims);
  h.huge = bytes > (__int128(1) << 62);
  h.empty_but_huge_dims = bytes == 0 && nonzero >= (__int128(1) << 31);
  h.too_big = nonzero > INT64_MAX / sp::itemsize(h.dtype);
  // Sometimes unbalanced or the wrong brackets.
  const bool unclosed = r.chance(2), square = r.chance(2);
  if (unclosed || square) h.valid = false;
  std::string out(1, square ? '[' : '(');
  out += text;
  if (!unclosed) out += square ? ']' : ')';
  return out;
}

// Keys in random order with random spacing; sometimes a key missing, repeated or unknown.
FuzzHeader random_header(FuzzRng& r) {
  FuzzHeader h;
  std::vector<std::pair<std::string, std::string>> items = {{"descr", descr_text(r, h)},
                                                            {"fortran_order", fortran_text(r, h)},
                                                            {"shape", shape_text(r, h)}};
  for (size_t i = items.size() - 1; i > 0; --i) std::swap(items[i], items[size_t(r.below(i + 1))]);
  if (r.chance(5)) items.erase(items.begin() + long(r.below(3))), h.valid = false;
  if (r.chance(4)) items.push_back(items[0]), h.valid = false;
  if (r.chance(4)) items.push_back({"extra", "0"}), h.valid = false;
  std::string dict = "{";
  for (size_t i = 0; i < items.size(); ++i) {
    const char* q = r.chance(80) ? "'" : "\"";
    dict += (i ? ", " : "") + std::string(q) + items[i].first + q + ":" +
            std::string(r.below(2), ' ') + items[i].second;
  }
  if (r.chance(50)) dict += ", ";
  h.dict = dict + "}" + std::string(r.below(20), ' ');
  return h;
}

// A .npy file around `dict`: magic, version and a header length field that is usually right.
std::string npy_file(FuzzRng& r, const std::string& dict, const std::string& data,
                     bool& length_ok) {
  const int major = r.chance(70) ? 1 : 2 + int(r.below(2));
  const std::string text = dict + "\n";
  uint64_t len = text.size();
  if (r.chance(10)) {
    static const std::vector<uint64_t> lengths = {0, 1, 9, 0xffff, 0xffffffff, 1u << 20};
    len = r.chance(50) ? r.pick(lengths) : len + r.below(5) - 2;
  }
  length_ok = len == text.size() && (major > 1 || len <= 0xffff);
  std::string out = "\x93NUMPY";
  out.push_back(char(major));
  out.push_back(0);
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i) out.push_back(char(len >> (8 * i)));
  return out + text + data;
}

// Exactly the bytes the header asks for, or (always, past 64 KiB) a few bytes more or fewer.
std::string data_for(FuzzRng& r, const FuzzHeader& h, bool& exact) {
  int64_t n = h.huge ? int64_t(1) << 62 : h.shape.size() * sp::itemsize(h.dtype);
  exact = n <= (int64_t(1) << 16) && r.chance(85);
  if (!exact) n = std::max<int64_t>(0, std::min<int64_t>(n, 4096) + int64_t(r.below(9)) - 4);
  std::string data(size_t(n), '\0');
  for (char& c : data) c = char(r.bits());
  return data;
}

// Loads `load()`; IOError, or TypeError for a dtype spmd does not read, are the only failures
// allowed. Returns whether it loaded.
template <class Load>
bool loads_or_raises_io_error(Load load, const std::string& what) {
  try {
    load();
    return true;
  } catch (const sp::IOError&) {
  } catch (const sp::TypeError& e) {
    if (std::string(e.what()).find("is not supported") == std::string::npos)
      ADD_FAILURE() << what << ": " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": " << e.what();
  }
  return false;
}

}  // namespace

// Random header dicts (descr, fortran_order and shape each well-formed or not, huge dims, extra
// or missing keys), header length fields and data sizes, as .npy files and as members of .npz
// archives: well-formed files load with the described shape and dtype, the rest raise IOError.
TEST(NpyFuzz, RandomHeadersLoadAsDescribedOrRaiseIOError) {
  TempDir dir;
  FuzzRng r(0x6e7079);
  int loaded = 0, raised = 0, too_big = 0;
  for (int c = 0; c < 1500; ++c) {
    const FuzzHeader h = random_header(r);
    bool exact = false, length_ok = false;
    const std::string data = data_for(r, h, exact);
    const std::string bytes = npy_file(r, h.dict, data, length_ok);
    const bool npz = r.chance(30);
    const std::string path = dir.file(npz ? "f.npz" : "f.npy");
    if (npz) {
      sp::io::ZipWriter zip(path, "save_npz", r.chance(30));
      zip.add("m.npy", {{reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}});
      zip.finish();
    } else {
      write_file(path, bytes);
    }
    Array got;
    const std::string what = std::to_string(c) + ": " + h.dict;
    const bool ok = loads_or_raises_io_error(
        [&] { got = npz ? sp::load_npz(path).at("m") : sp::load_npy(path); }, what);
    (ok ? loaded : raised)++;
    if (h.too_big) {
      EXPECT_FALSE(ok) << what;
      ++too_big;
      continue;
    }
    if (!(h.valid && exact && length_ok) || h.empty_but_huge_dims) continue;
    // A well-formed file: it must load as described.
    ASSERT_TRUE(ok) << what;
    EXPECT_EQ(got.shape(), h.shape) << what;
    EXPECT_EQ(got.dtype(), h.dtype) << what;
    if (!h.big_endian && !h.fortran && h.dtype != sp::bool_) {
      EXPECT_EQ(std::memcmp(sp::host_data(got, "test"), data.data(), data.size()), 0) << what;
    }
  }
  EXPECT_GT(loaded, 300);
  EXPECT_GT(raised, 300);
  EXPECT_GT(too_big, 20);
}

namespace {

// A little-endian integer field of a zip record: its offset in the file and width in bytes.
struct ZipField {
  size_t at;
  int width;
  const char* name;
};

uint64_t get_field(const std::string& s, const ZipField& f) {
  uint64_t v = 0;
  for (int i = f.width - 1; i >= 0; --i) v = v << 8 | uint8_t(s[f.at + size_t(i)]);
  return v;
}

// The fields of every local header, central directory entry, end record, ZIP64 record and
// locator, and ZIP64 extra field found in `zip`.
std::vector<ZipField> zip_fields(const std::string& zip) {
  struct Record {
    const char* signature;
    std::vector<ZipField> fields;  // offsets within the record
  };
  static const std::vector<Record> records = {
      {"PK\x03\x04",
       {{4, 2, "local version"},
        {6, 2, "local flags"},
        {8, 2, "local method"},
        {14, 4, "local crc"},
        {18, 4, "local compressed size"},
        {22, 4, "local size"},
        {26, 2, "local name length"},
        {28, 2, "local extra length"}}},
      {"PK\x01\x02",
       {{8, 2, "central flags"},
        {10, 2, "central method"},
        {16, 4, "central crc"},
        {20, 4, "central compressed size"},
        {24, 4, "central size"},
        {28, 2, "central name length"},
        {30, 2, "central extra length"},
        {32, 2, "central comment length"},
        {34, 2, "central disk"},
        {42, 4, "central local header offset"}}},
      {"PK\x05\x06",
       {{4, 2, "end disk"},
        {6, 2, "end cd disk"},
        {8, 2, "end disk entries"},
        {10, 2, "end entries"},
        {12, 4, "end cd size"},
        {16, 4, "end cd offset"},
        {20, 2, "end comment length"}}},
      {"PK\x06\x06",
       {{4, 8, "zip64 end size"},
        {16, 4, "zip64 end disk"},
        {20, 4, "zip64 end cd disk"},
        {32, 8, "zip64 end entries"},
        {40, 8, "zip64 end cd size"},
        {48, 8, "zip64 end cd offset"}}},
      {"PK\x06\x07",
       {{4, 4, "zip64 locator disk"},
        {8, 8, "zip64 locator offset"},
        {16, 4, "zip64 locator disks"}}},
  };
  std::vector<ZipField> out;
  for (const Record& rec : records)
    for (size_t at = zip.find(rec.signature, 0, 4); at != std::string::npos;
         at = zip.find(rec.signature, at + 1, 4))
      for (const ZipField& f : rec.fields)
        if (at + f.at + size_t(f.width) <= zip.size()) out.push_back({at + f.at, f.width, f.name});
  // The ZIP64 extra fields of local and central headers: length and the 8-byte values.
  for (const char* sig : {"PK\x03\x04", "PK\x01\x02"}) {
    const size_t fixed = sig[2] == 3 ? 30 : 46, name_at = sig[2] == 3 ? 26 : 28;
    for (size_t at = zip.find(sig, 0, 4); at != std::string::npos; at = zip.find(sig, at + 1, 4)) {
      if (at + fixed > zip.size()) continue;
      const size_t extra = at + fixed + get_field(zip, {at + name_at, 2, ""});
      if (extra + 4 > zip.size() || zip.compare(extra, 2, "\x01\x00", 2) != 0) continue;
      out.push_back({extra + 2, 2, "zip64 extra length"});
      for (size_t v = extra + 4; v + 8 <= zip.size() && v < extra + 28; v += 8)
        out.push_back({v, 8, "zip64 extra value"});
    }
  }
  return out;
}

void set_field(std::string& s, const ZipField& f, uint64_t v) {
  for (int i = 0; i < f.width; ++i) s[f.at + size_t(i)] = char(v >> (8 * i));
}

// A new value for a field: near the old one, all ones (the ZIP64 marker), zero, near the file
// size, or random.
uint64_t mutated(FuzzRng& r, uint64_t old, size_t file_size) {
  switch (r.below(7)) {
    case 0:
      return old + 1;
    case 1:
      return old - 1;
    case 2:
      return ~uint64_t(0);
    case 3:
      return 0;
    case 4:
      return file_size - r.below(64);
    case 5:
      return old ^ (uint64_t(1) << r.below(64));
    default:
      return r.bits();
  }
}

}  // namespace

// One to three random fields of the zip records (sizes, offsets, counts, compression method,
// name and extra lengths, ZIP64 values) changed: the archive loads or raises IOError.
TEST(NpzFuzz, RandomZipFieldsLoadOrRaiseIOError) {
  TempDir dir;
  sp::save_npz(dir.file("two.npz"), {{"a", raw<int16_t>(sp::int16, {1, -2, 3}, {3, 1})},
                                     {"b", raw<uint8_t>(sp::bool_, {1, 0})}});
  sp::io::ZipWriter zip(dir.file("zip64.npz"), "save_npz", true);
  for (const char* name : {"m.npy", "n.npy"}) {
    const std::string member = read_file(io_golden("int8.npy"));
    zip.add(name, {{reinterpret_cast<const uint8_t*>(member.data()), member.size()}});
  }
  zip.finish();
  FuzzRng r(0x7a6970);
  int loaded = 0, raised = 0;
  for (const std::string& seed : {dir.file("two.npz"), dir.file("zip64.npz"),
                                  io_golden("savez.npz"), io_golden("savez_compressed.npz")}) {
    const std::string bytes = read_file(seed);
    const std::vector<ZipField> fields = zip_fields(bytes);
    ASSERT_GT(fields.size(), 20u) << seed;
    for (int c = 0; c < 400; ++c) {
      std::string damaged = bytes;
      std::string what = seed;
      for (int k = 0, n = 1 + int(r.below(3)); k < n; ++k) {
        const ZipField& f = r.pick(fields);
        const uint64_t v = mutated(r, get_field(damaged, f), bytes.size());
        set_field(damaged, f, v);
        what += std::string(", ") + f.name + " = " + std::to_string(v);
      }
      write_file(dir.file("z.npz"), damaged);
      bool ok = false;
      try {
        sp::load_npz(dir.file("z.npz"));
        ok = true;
      } catch (const sp::IOError&) {
      } catch (const std::exception& e) {
        ADD_FAILURE() << what << ": " << e.what();
      }
      (ok ? loaded : raised)++;
    }
  }
  // Fields such as flags and versions may change without harm; sizes and offsets may not.
  EXPECT_GT(loaded, 50);
  EXPECT_GT(raised, 800);
}

// ---- Files for NumPy to check (tools/goldens/gen_io.py --check-with) ----

// Loads every golden and saves it again: into $SPMD_IO_EXPORT_DIR when set, for gen_io.py to
// check with NumPy, or into a temporary directory, checking the reload here.
TEST(NpyExport, ResavesEveryGoldenFile) {
  TempDir tmp;
  const char* env = std::getenv("SPMD_IO_EXPORT_DIR");
  auto out = [&](const std::string& name) {
    return env ? (fs::path(env) / name).string() : tmp.file(name);
  };
  int count = 0;
  for (const auto& entry : fs::directory_iterator(spmd_test::golden_path("io"))) {
    std::string name = entry.path().filename().string();
    SCOPED_TRACE(name);
    if (name.ends_with(".npy")) {
      Array x = sp::load_npy(entry.path().string());
      sp::save_npy(out(name), x);
      EXPECT_TRUE(same_bytes(sp::load_npy(out(name)), x));
    } else if (name.ends_with(".npz")) {
      auto arrays = sp::load_npz(entry.path().string());
      sp::save_npz(out(name), arrays);
      sp::io::ZipWriter zip(out("zip64_" + name), "save_npz", /*force_zip64=*/true);
      for (const auto& [key, x] : arrays) {
        sp::save_npy(tmp.file("member.npy"), x);
        std::string bytes = read_file(tmp.file("member.npy"));
        zip.add(key + ".npy", {{reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}});
      }
      zip.finish();
      for (const std::string& saved : {name, "zip64_" + name}) {
        auto back = sp::load_npz(out(saved));
        ASSERT_EQ(back.size(), arrays.size());
        for (const auto& [key, x] : arrays) EXPECT_TRUE(same_bytes(back.at(key), x)) << key;
      }
    }
    ++count;
  }
  EXPECT_GE(count, 28);
}

// read_idx: every IDX element type round-trips from files the test writes, raw and gzip'd, with
// its big-endian bytes in host order; damaged files raise ValueError naming the file and saying
// what was expected and what was found.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "core/array_impl.h"
#include "data/idx_files.h"
#include "support/golden.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace sp = spmd;
using sp::Array;
using spmd_test::big_endian;
using spmd_test::error_message;
using spmd_test::gzip_stored;
using spmd_test::idx_header;
using spmd_test::TempDir;
using spmd_test::write_file;

namespace {

// Reads `values` of shape `dims` back from a raw and a gzip'd file, bit for bit.
template <class T>
void expect_round_trip(uint8_t type_code, sp::DType dtype, const std::vector<uint32_t>& dims,
                       const std::vector<T>& values) {
  TempDir dir;
  std::string bytes = idx_header(type_code, dims);
  bytes += big_endian(values);
  write_file(dir.file("raw.idx"), bytes);
  write_file(dir.file("gz.idx.gz"), gzip_stored(bytes));
  for (const std::string name : {"raw.idx", "gz.idx.gz"}) {
    SCOPED_TRACE(name);
    Array x = sp::read_idx(dir.file(name));
    EXPECT_EQ(x.dtype(), dtype);
    EXPECT_EQ(x.shape(), sp::Shape(std::vector<int64_t>(dims.begin(), dims.end())));
    std::vector<T> got(values.size());
    // memcpy/memcmp take no null pointers, which an empty vector's data() may be.
    if (values.empty()) continue;
    std::memcpy(got.data(), sp::host_data(x, "test"), got.size() * sizeof(T));
    EXPECT_EQ(std::memcmp(got.data(), values.data(), values.size() * sizeof(T)), 0);
  }
}

TEST(ReadIdx, Uint8RoundTrips) {
  expect_round_trip<uint8_t>(0x08, sp::uint8, {2, 3}, {0, 1, 127, 128, 254, 255});
}

TEST(ReadIdx, Int8RoundTrips) {
  expect_round_trip<int8_t>(0x09, sp::int8, {5}, {-128, -1, 0, 1, 127});
}

TEST(ReadIdx, Int16RoundTripsFromBigEndian) {
  expect_round_trip<int16_t>(0x0B, sp::int16, {2, 2}, {-32768, -2, 258, 32767});
}

TEST(ReadIdx, Int32RoundTripsFromBigEndian) {
  expect_round_trip<int32_t>(0x0C, sp::int32, {1, 2, 2},
                             {std::numeric_limits<int32_t>::min(), -1, 16909060, 2147483647});
}

TEST(ReadIdx, Float32RoundTripsFromBigEndian) {
  const float inf = std::numeric_limits<float>::infinity();
  expect_round_trip<float>(0x0D, sp::float32, {6}, {0.0f, -0.0f, 1.5f, -2.25e-39f, inf, 0.1f});
}

TEST(ReadIdx, Float64RoundTripsFromBigEndian) {
  const double inf = std::numeric_limits<double>::infinity();
  expect_round_trip<double>(0x0E, sp::float64, {3, 1}, {-0.0, 5e-324, -inf});
}

TEST(ReadIdx, EmptyArrayRoundTrips) {
  expect_round_trip<int16_t>(0x0B, sp::int16, {0, 4}, {});
}

TEST(ReadIdx, LargeGzipStreamSpanningManyBlocks) {
  std::vector<uint8_t> values(200000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = uint8_t(i * 7 % 251);
  expect_round_trip<uint8_t>(0x08, sp::uint8, {400, 500}, values);
}

// The message read_idx gives for a file holding `bytes`.
std::string idx_error(const std::string& bytes, bool gzipped = false) {
  TempDir dir;
  const std::string path = dir.file("f.idx");
  write_file(path, gzipped ? gzip_stored(bytes) : bytes);
  std::string message = error_message<sp::ValueError>([&] { sp::read_idx(path); });
  // Name the file generically so the expected messages do not depend on the temp dir.
  const size_t at = message.find(path);
  if (at != std::string::npos) message.replace(at, path.size(), "f.idx");
  return message;
}

TEST(ReadIdxErrors, MissingFile) {
  TempDir dir;
  const std::string path = dir.file("absent.idx");
  EXPECT_EQ(error_message<sp::ValueError>([&] { sp::read_idx(path); }),
            "[read_idx] '" + path + "': no such file");
}

TEST(ReadIdxErrors, Directory) {
  TempDir dir;
  EXPECT_EQ(error_message<sp::ValueError>([&] { sp::read_idx(dir.path()); }),
            "[read_idx] '" + dir.path() + "': not a regular file");
}

TEST(ReadIdxErrors, WrongMagic) {
  const std::string zip = std::string("PK\x03\x04", 4) + std::string(20, '\0');
  EXPECT_EQ(idx_error(zip),
            "[read_idx] 'f.idx': not an IDX file: expected a magic number 0x0000TTNN (two zero "
            "bytes, the type code TT, the number of dimensions NN), got 0x504b0304");
  EXPECT_EQ(idx_error(zip, true),
            "[read_idx] 'f.idx': not an IDX file: expected a magic number 0x0000TTNN (two zero "
            "bytes, the type code TT, the number of dimensions NN), got 0x504b0304");
}

TEST(ReadIdxErrors, UnknownTypeCode) {
  EXPECT_EQ(idx_error(idx_header(0x0A, {1}) + "x"),
            "[read_idx] 'f.idx': unknown element type code 0x0a; expected one of 0x08 (uint8), "
            "0x09 (int8), 0x0b (int16), 0x0c (int32), 0x0d (float32), 0x0e (float64)");
}

TEST(ReadIdxErrors, NoDimensions) {
  EXPECT_EQ(idx_error(idx_header(0x08, {}) + "x"),
            "[read_idx] 'f.idx': expected at least 1 dimension in the magic number, got 0");
}

TEST(ReadIdxErrors, TruncatedMagic) {
  EXPECT_EQ(idx_error(std::string("\0\0", 2)),
            "[read_idx] 'f.idx': truncated: expected a 4-byte magic number, the data has 2 bytes");
  EXPECT_EQ(idx_error("", true),
            "[read_idx] 'f.idx': truncated: expected a 4-byte magic number, the data has 0 bytes");
}

TEST(ReadIdxErrors, TruncatedDims) {
  const std::string header = idx_header(0x08, {3, 4, 5});
  EXPECT_EQ(idx_error(header.substr(0, 10)),
            "[read_idx] 'f.idx': truncated: expected 3 dimensions (12 bytes) after the magic "
            "number, the data has 6 bytes");
}

TEST(ReadIdxErrors, TruncatedData) {
  const std::string file = idx_header(0x0B, {2, 3}) + big_endian<int16_t>({1, 2, 3, 4, 5});
  const std::string expected =
      "[read_idx] 'f.idx': truncated: the header's shape (2, 3) of int16 needs 12 bytes of data, "
      "the file has 10";
  EXPECT_EQ(idx_error(file), expected);
  EXPECT_EQ(idx_error(file, true), expected);
}

TEST(ReadIdxErrors, GzipStreamCutShort) {
  const std::string gz =
      gzip_stored(idx_header(0x08, {1000}) + std::string(1000, '\x07')).substr(0, 500);
  EXPECT_EQ(idx_error(gz),
            "[read_idx] 'f.idx': truncated: the header's shape (1000,) of uint8 needs 1000 bytes "
            "of data, the file has 477");
}

TEST(ReadIdxErrors, TrailingData) {
  const std::string file = idx_header(0x08, {2}) + "abc";
  const std::string expected =
      "[read_idx] 'f.idx': trailing data: the header's shape (2,) of uint8 needs 2 bytes of data, "
      "the file has more";
  EXPECT_EQ(idx_error(file), expected);
  EXPECT_EQ(idx_error(file, true), expected);
}

TEST(ReadIdxErrors, ShapeTooLargeForAnArray) {
  EXPECT_EQ(idx_error(idx_header(0x0E, {0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF})),
            "[read_idx] 'f.idx': the header's shape (4294967295, 4294967295, 4294967295) of "
            "float64 is too large for an array");
}

// A header claiming far more data than the file can hold is refused before allocating it.
TEST(ReadIdxErrors, ShapeLargerThanTheFileCanHold) {
  const std::string file = idx_header(0x0C, {100000, 100000}) + "data";
  EXPECT_EQ(idx_error(file),
            "[read_idx] 'f.idx': truncated: the header's shape (100000, 100000) of int32 needs "
            "40000000000 bytes of data, more than the file can hold");
  EXPECT_EQ(idx_error(file, true),
            "[read_idx] 'f.idx': truncated: the header's shape (100000, 100000) of int32 needs "
            "40000000000 bytes of data, more than the gzip file can hold");
}

TEST(ReadIdxErrors, GzipChecksumMismatch) {
  std::string gz = gzip_stored(idx_header(0x08, {3}) + "abc");
  gz[gz.size() - 8] ^= 1;  // the CRC-32
  TempDir dir;
  write_file(dir.file("f.idx"), gz);
  EXPECT_EQ(
      error_message<sp::ValueError>([&] { sp::read_idx(dir.file("f.idx")); }),
      "[read_idx] '" + dir.file("f.idx") + "': damaged gzip data (zlib: incorrect data check)");
}

}  // namespace

// IDX files written by the tests themselves: big-endian headers and data, raw or wrapped in a
// gzip stream of stored deflate blocks (valid gzip that zlib inflates, without linking zlib into
// the tests), in a temporary directory removed at the end of the test.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace spmd_test {

// A fresh directory under the test temp dir, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = std::filesystem::path(::testing::TempDir()) /
            ("spmd_data_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

inline void put_be32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(char(v >> shift));
}

// The magic number 0x0000TTNN and the dims.
inline std::string idx_header(uint8_t type_code, const std::vector<uint32_t>& dims) {
  std::string out{'\0', '\0', char(type_code), char(dims.size())};
  for (uint32_t d : dims) put_be32(out, d);
  return out;
}

// The elements in big-endian byte order.
template <class T>
std::string big_endian(const std::vector<T>& values) {
  std::string out;
  for (const T& v : values) {
    std::array<char, sizeof(T)> bytes;
    std::memcpy(bytes.data(), &v, sizeof(T));
    for (size_t b = sizeof(T); b-- > 0;) out.push_back(bytes[b]);
  }
  return out;
}

inline uint32_t crc32(const std::string& bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char b : bytes) {
    crc ^= b;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

inline void put_le32(std::string& out, uint32_t v) {
  for (int shift = 0; shift <= 24; shift += 8) out.push_back(char(v >> shift));
}

// RFC 1952 gzip of `bytes`: a header, stored deflate blocks (RFC 1951 BTYPE 00, at most 65535
// bytes each), then CRC-32 and size.
inline std::string gzip_stored(const std::string& bytes) {
  std::string out{'\x1f', '\x8b', '\x08', '\0', '\0', '\0', '\0', '\0', '\0', '\xff'};
  size_t pos = 0;
  do {
    const size_t n = std::min<size_t>(bytes.size() - pos, 65535);
    const bool final = pos + n == bytes.size();
    out.push_back(final ? '\x01' : '\0');
    out.push_back(char(n & 0xFF));
    out.push_back(char(n >> 8));
    out.push_back(char(~n & 0xFF));
    out.push_back(char((~n >> 8) & 0xFF));
    out.append(bytes, pos, n);
    pos += n;
  } while (pos < bytes.size());
  put_le32(out, crc32(bytes));
  put_le32(out, uint32_t(bytes.size()));
  return out;
}

}  // namespace spmd_test

// Byte streams for the .npy/.npz readers and the zip container of .npz files: bounded,
// checksummed readers over plain files and zip members (stored or raw deflate, ZIP64 included)
// and a writer of stored members. Every read is checked against the bytes that exist, so corrupt
// input raises IOError instead of reading out of bounds.
#pragma once

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace spmd::io {

// Where a reader or writer is, for messages: "[api] <where>: <message>".
struct Origin {
  const char* api;
  std::string where;  // "'data.npz'" or "'data.npz' member 'x.npy'"
  [[noreturn]] void fail(const std::string& message) const;  // throws IOError
};

// An open file that closes itself. Opening a missing file, a directory or an unwritable path
// raises IOError naming the API and the path.
class File {
 public:
  File(const std::string& path, const char* mode, const char* api);
  ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  uint64_t size() const { return size_; }  // of a file opened for reading
  // Exactly n bytes at `offset`, or IOError saying the file ends early.
  void read_at(uint64_t offset, void* dst, size_t n) const;
  void write(const void* src, size_t n) const;
  // Flushes and closes, raising IOError if a buffered write failed.
  void close();
  const Origin& origin() const { return origin_; }

 private:
  std::FILE* file_ = nullptr;
  uint64_t size_ = 0;
  Origin origin_;
};

// A sequential stream of a known number of bytes. read() raises IOError rather than return
// fewer bytes than asked; finish() checks that the stream ended where it should and, for zip
// members, its CRC-32.
class ByteReader {
 public:
  virtual ~ByteReader() = default;
  virtual void read(void* dst, size_t n) = 0;
  virtual uint64_t remaining() const = 0;
  virtual void finish() = 0;
  virtual const Origin& origin() const = 0;
};

// The whole of a plain file, read in order.
std::unique_ptr<ByteReader> file_reader(const File& file);

struct ZipMember {
  std::string name;
  uint16_t method = 0;  // 0 stored, 8 deflate
  uint16_t flags = 0;
  uint32_t crc32 = 0;
  uint64_t compressed_size = 0;
  uint64_t uncompressed_size = 0;
  uint64_t local_header_offset = 0;
};

// The members listed in the archive's central directory, in order.
std::vector<ZipMember> list_zip_members(const File& file);
// A reader of one member's uncompressed bytes; finish() verifies its size and CRC-32.
std::unique_ptr<ByteReader> open_zip_member(const File& file, const ZipMember& member);
// Reads the whole member, raising IOError if it is damaged (size or CRC-32 mismatch).
void verify_zip_member(const File& file, const ZipMember& member);

// Writes a zip archive of stored (uncompressed) members, as Python's zipfile does with
// ZIP_STORED. ZIP64 records are written where sizes, offsets or the member count need them,
// and everywhere with `force_zip64` (which exists to exercise readers on small files).
class ZipWriter {
 public:
  ZipWriter(const std::string& path, const char* api, bool force_zip64 = false);
  // A member whose contents are the concatenation of `parts`.
  void add(const std::string& name, std::initializer_list<std::span<const uint8_t>> parts);
  // Writes the central directory and closes the file.
  void finish();

 private:
  void put(const std::vector<uint8_t>& bytes);
  File file_;
  bool force_zip64_;
  uint64_t offset_ = 0;
  std::vector<ZipMember> members_;
};

}  // namespace spmd::io

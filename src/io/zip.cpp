// Byte streams over files and zip members, and the zip writer (PKWARE APPNOTE 6.3, the subset
// Python's zipfile reads and writes: stored and deflate members, ZIP64, one disk).
#include "io/zip.h"

#include <spmd/error.h>

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace spmd::io {
namespace {

constexpr uint32_t kLocalHeaderSig = 0x04034b50;
constexpr uint32_t kCentralHeaderSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint32_t kMax32 = 0xffffffffu;
constexpr uint16_t kMax16 = 0xffff;
constexpr size_t kEndRecordSize = 22;
constexpr size_t kCentralHeaderSize = 46;
constexpr size_t kLocalHeaderSize = 30;
// Deflate cannot expand data by more than about 1032:1; a larger declared size is corrupt and
// must not drive an allocation.
constexpr uint64_t kMaxDeflateRatio = 1032;

uint64_t get_le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint16_t get16(const uint8_t* p) {
  return uint16_t(get_le(p, 2));
}
uint32_t get32(const uint8_t* p) {
  return uint32_t(get_le(p, 4));
}
uint64_t get64(const uint8_t* p) {
  return get_le(p, 8);
}

void put_le(std::vector<uint8_t>& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(uint8_t(v >> (8 * i)));
}

uint32_t crc_update(uint32_t crc, const void* data, size_t n) {
  // zlib returns the initial value for a null buffer, which would drop the running CRC.
  if (n == 0) return crc;
  return uint32_t(crc32_z(crc, static_cast<const Bytef*>(data), n));
}

std::string hex32(uint32_t v) {
  char s[16];
  std::snprintf(s, sizeof s, "0x%08x", v);
  return s;
}

// Bytes [offset, offset + length) of a file, optionally checked against a CRC-32 at the end.
class RangeReader final : public ByteReader {
 public:
  RangeReader(const File& file, uint64_t offset, uint64_t length, Origin origin,
              const uint32_t* expected_crc)
      : file_(file), pos_(offset), end_(offset + length), origin_(std::move(origin)) {
    if (expected_crc) check_crc_ = true, expected_crc_ = *expected_crc;
  }
  void read(void* dst, size_t n) override {
    if (n > remaining()) origin_.fail("unexpected end of data");
    file_.read_at(pos_, dst, n);
    pos_ += n;
    if (check_crc_) crc_ = crc_update(crc_, dst, n);
  }
  uint64_t remaining() const override { return end_ - pos_; }
  void finish() override {
    if (remaining()) origin_.fail(std::to_string(remaining()) + " unread bytes at the end");
    if (check_crc_ && crc_ != expected_crc_)
      origin_.fail("CRC-32 mismatch: the archive says " + hex32(expected_crc_) + ", the data has " +
                   hex32(crc_));
  }
  const Origin& origin() const override { return origin_; }

 private:
  const File& file_;
  uint64_t pos_, end_;
  Origin origin_;
  bool check_crc_ = false;
  uint32_t expected_crc_ = 0, crc_ = 0;
};

// A raw-deflate member (zip method 8), inflated as it is read.
class InflateReader final : public ByteReader {
 public:
  InflateReader(const File& file, uint64_t offset, const ZipMember& member, Origin origin)
      : file_(file),
        in_pos_(offset),
        in_end_(offset + member.compressed_size),
        out_left_(member.uncompressed_size),
        expected_crc_(member.crc32),
        origin_(std::move(origin)) {
    if (inflateInit2(&stream_, -15) != Z_OK) origin_.fail("cannot initialise zlib");
  }
  ~InflateReader() override { inflateEnd(&stream_); }

  void read(void* dst, size_t n) override {
    if (n > out_left_) origin_.fail("unexpected end of data");
    auto* out = static_cast<uint8_t*>(dst);
    for (size_t done = 0; done < n;) {
      size_t chunk = std::min<size_t>(n - done, size_t(1) << 30);
      if (inflate_into(out + done, chunk) != chunk)
        origin_.fail("compressed data ends before the declared size");
      done += chunk;
    }
    crc_ = crc_update(crc_, dst, n);
    out_left_ -= n;
  }
  uint64_t remaining() const override { return out_left_; }
  void finish() override {
    if (out_left_) origin_.fail(std::to_string(out_left_) + " unread bytes at the end");
    uint8_t extra;
    if (inflate_into(&extra, 1) != 0 || !ended_)
      origin_.fail("compressed data is longer than the declared size");
    if (crc_ != expected_crc_)
      origin_.fail("CRC-32 mismatch: the archive says " + hex32(expected_crc_) + ", the data has " +
                   hex32(crc_));
  }
  const Origin& origin() const override { return origin_; }

 private:
  // Inflates up to n bytes into out; returns how many came out before the stream ended.
  size_t inflate_into(uint8_t* out, size_t n) {
    stream_.next_out = out;
    stream_.avail_out = uInt(n);
    while (stream_.avail_out > 0 && !ended_) {
      if (stream_.avail_in == 0) refill();
      int rc = inflate(&stream_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        ended_ = true;
      } else if (rc == Z_BUF_ERROR && stream_.avail_in == 0 && in_pos_ == in_end_) {
        origin_.fail("compressed data is truncated");
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        origin_.fail(std::string("corrupt compressed data (zlib: ") +
                     (stream_.msg ? stream_.msg : "error " + std::to_string(rc)) + ")");
      }
    }
    return n - stream_.avail_out;
  }
  void refill() {
    size_t n = size_t(std::min<uint64_t>(in_end_ - in_pos_, in_.size()));
    file_.read_at(in_pos_, in_.data(), n);
    in_pos_ += n;
    stream_.next_in = in_.data();
    stream_.avail_in = uInt(n);
  }

  const File& file_;
  uint64_t in_pos_, in_end_, out_left_;
  uint32_t expected_crc_, crc_ = 0;
  bool ended_ = false;
  z_stream stream_{};
  std::vector<uint8_t> in_ = std::vector<uint8_t>(size_t(1) << 16);
  Origin origin_;
};

struct EndRecord {
  uint64_t entries = 0, cd_size = 0, cd_offset = 0;
};

// Finds the end-of-central-directory record (it may be followed by a comment of up to 64 KiB).
uint64_t find_end_record(const File& file) {
  const Origin& o = file.origin();
  if (file.size() < kEndRecordSize) o.fail("not a zip archive (file too short)");
  uint64_t tail_size = std::min<uint64_t>(file.size(), kEndRecordSize + kMax16);
  std::vector<uint8_t> tail(static_cast<size_t>(tail_size));
  file.read_at(file.size() - tail_size, tail.data(), tail.size());
  for (size_t p = tail.size() - kEndRecordSize + 1; p-- > 0;)
    if (get32(&tail[p]) == kEndSig) return file.size() - tail_size + p;
  char magic[6];
  file.read_at(0, magic, sizeof magic);
  if (std::memcmp(magic, "\x93NUMPY", 6) == 0)
    o.fail("not a zip archive (it is a .npy file; use load_npy)");
  o.fail("not a zip archive (no end of central directory record)");
}

void read_zip64_end(const File& file, uint64_t end_pos, EndRecord& r) {
  const Origin& o = file.origin();
  uint8_t loc[20], rec[56];
  file.read_at(end_pos - 20, loc, 20);
  if (get32(loc) != kZip64LocatorSig) o.fail("ZIP64 end of central directory locator missing");
  if (get32(loc + 4) != 0 || get32(loc + 16) > 1)  // disk of the record, number of disks
    o.fail("multi-disk zip archives are not supported");
  uint64_t rec_pos = get64(loc + 8);
  if (rec_pos > end_pos - 20 || end_pos - 20 - rec_pos < sizeof rec)
    o.fail("ZIP64 end of central directory record out of range");
  file.read_at(rec_pos, rec, sizeof rec);
  if (get32(rec) != kZip64EndSig) o.fail("bad ZIP64 end of central directory record");
  if (get32(rec + 16) != 0 || get32(rec + 20) != 0)
    o.fail("multi-disk zip archives are not supported");
  r = {get64(rec + 32), get64(rec + 40), get64(rec + 48)};
}

EndRecord read_end_record(const File& file, uint64_t end_pos) {
  const Origin& o = file.origin();
  uint8_t e[kEndRecordSize];
  file.read_at(end_pos, e, sizeof e);
  if (get16(e + 4) != 0 || get16(e + 6) != 0) o.fail("multi-disk zip archives are not supported");
  EndRecord r{get16(e + 10), get32(e + 12), get32(e + 16)};
  // Like zipfile, trust a ZIP64 locator whenever one precedes the record.
  uint8_t sig[4] = {};
  if (end_pos >= 20) file.read_at(end_pos - 20, sig, 4);
  if (get32(sig) == kZip64LocatorSig) read_zip64_end(file, end_pos, r);
  if (r.cd_offset > end_pos || r.cd_size > end_pos - r.cd_offset)
    o.fail("central directory out of range");
  if (r.entries > r.cd_size / kCentralHeaderSize) o.fail("central directory is truncated");
  return r;
}

// Replaces 0xffffffff sizes and offset with their ZIP64 extra-field values.
void apply_zip64_extra(const uint8_t* extra, size_t size, ZipMember& m, const Origin& o) {
  for (size_t p = 0; p + 4 <= size;) {
    uint16_t id = get16(extra + p), len = get16(extra + p + 2);
    if (p + 4 + len > size) o.fail("bad extra field in central directory");
    if (id == kZip64ExtraId) {
      size_t q = p + 4, end = q + len;
      for (uint64_t* field : {&m.uncompressed_size, &m.compressed_size, &m.local_header_offset}) {
        if (*field != kMax32) continue;
        if (q + 8 > end) o.fail("ZIP64 extra field is too short");
        *field = get64(extra + q);
        q += 8;
      }
    }
    p += 4 + size_t(len);
  }
}

// Parses the central-directory entry at cd[pos]; returns the position of the next one.
size_t parse_central_entry(const std::vector<uint8_t>& cd, size_t pos, ZipMember& m,
                           const Origin& o) {
  if (cd.size() - pos < kCentralHeaderSize || get32(&cd[pos]) != kCentralHeaderSig)
    o.fail("bad central directory entry");
  const uint8_t* h = &cd[pos];
  size_t name_len = get16(h + 28), extra_len = get16(h + 30), comment_len = get16(h + 32);
  if (cd.size() - pos - kCentralHeaderSize < name_len + extra_len + comment_len)
    o.fail("central directory entry is truncated");
  m.flags = get16(h + 8);
  m.method = get16(h + 10);
  m.crc32 = get32(h + 16);
  m.compressed_size = get32(h + 20);
  m.uncompressed_size = get32(h + 24);
  m.local_header_offset = get32(h + 42);
  m.name.assign(reinterpret_cast<const char*>(h + kCentralHeaderSize), name_len);
  apply_zip64_extra(h + kCentralHeaderSize + name_len, extra_len, m, o);
  return pos + kCentralHeaderSize + name_len + extra_len + comment_len;
}

}  // namespace

void Origin::fail(const std::string& message) const {
  throw IOError(std::string("[").append(api).append("] ") + where + ": " + message);
}

File::File(const std::string& path, const char* mode, const char* api)
    : origin_{api, "'" + path + "'"} {
  // The C library would stop the name at the first NUL and open another file (Python raises).
  if (path.find('\0') != std::string::npos) {
    std::string shown;
    for (char c : path) shown += c ? std::string(1, c) : std::string("\\0");
    throw ValueError(std::string("[") + api + "] '" + shown + "': embedded null byte");
  }
  bool reading = mode[0] == 'r';
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) origin_.fail("is a directory");
  file_ = std::fopen(path.c_str(), mode);
  if (!file_)
    origin_.fail(std::string("cannot open for ") + (reading ? "reading" : "writing") + ": " +
                 std::strerror(errno));
  if (!reading) return;
  off_t end = fseeko(file_, 0, SEEK_END) == 0 ? ftello(file_) : -1;
  if (end < 0) {
    std::string reason = std::strerror(errno);
    std::fclose(file_);  // the destructor does not run when the constructor throws
    origin_.fail("cannot find the file size: " + reason);
  }
  size_ = uint64_t(end);
}

File::~File() {
  if (file_) std::fclose(file_);
}

void File::read_at(uint64_t offset, void* dst, size_t n) const {
  if (offset > size_ || n > size_ - offset) origin_.fail("unexpected end of file");
  if (n == 0) return;
  if (fseeko(file_, off_t(offset), SEEK_SET) != 0 || std::fread(dst, 1, n, file_) != n)
    origin_.fail("read failed: " +
                 std::string(std::ferror(file_) ? strerror(errno) : "unexpected end of file"));
}

void File::write(const void* src, size_t n) const {
  if (n && std::fwrite(src, 1, n, file_) != n)
    origin_.fail("write failed: " + std::string(strerror(errno)));
}

void File::close() {
  std::FILE* f = file_;
  file_ = nullptr;
  if (f && std::fclose(f) != 0) origin_.fail("write failed: " + std::string(strerror(errno)));
}

std::unique_ptr<ByteReader> file_reader(const File& file) {
  return std::make_unique<RangeReader>(file, 0, file.size(), file.origin(), nullptr);
}

std::vector<ZipMember> list_zip_members(const File& file) {
  uint64_t end_pos = find_end_record(file);
  EndRecord r = read_end_record(file, end_pos);
  std::vector<uint8_t> cd(static_cast<size_t>(r.cd_size));
  file.read_at(r.cd_offset, cd.data(), cd.size());
  std::vector<ZipMember> members(static_cast<size_t>(r.entries));
  size_t pos = 0;
  for (ZipMember& m : members) pos = parse_central_entry(cd, pos, m, file.origin());
  return members;
}

std::unique_ptr<ByteReader> open_zip_member(const File& file, const ZipMember& m) {
  Origin o{file.origin().api, file.origin().where + " member '" + m.name + "'"};
  if (m.flags & 1) o.fail("encrypted members are not supported");
  uint8_t h[kLocalHeaderSize];
  file.read_at(m.local_header_offset, h, sizeof h);
  if (get32(h) != kLocalHeaderSig) o.fail("bad local file header");
  uint64_t data = m.local_header_offset + kLocalHeaderSize + get16(h + 26) + get16(h + 28);
  if (data > file.size() || m.compressed_size > file.size() - data)
    o.fail("member data extends past the end of the file");
  if (m.method == 0) {
    if (m.compressed_size != m.uncompressed_size)
      o.fail("stored member has different compressed and uncompressed sizes");
    return std::make_unique<RangeReader>(file, data, m.compressed_size, std::move(o), &m.crc32);
  }
  if (m.method == 8) {
    if (m.uncompressed_size > m.compressed_size * kMaxDeflateRatio + 1024)
      o.fail("declared uncompressed size " + std::to_string(m.uncompressed_size) +
             " is impossible for " + std::to_string(m.compressed_size) + " compressed bytes");
    return std::make_unique<InflateReader>(file, data, m, std::move(o));
  }
  o.fail("compression method " + std::to_string(m.method) +
         " is not supported (only stored and deflate)");
}

void verify_zip_member(const File& file, const ZipMember& member) {
  std::unique_ptr<ByteReader> in = open_zip_member(file, member);
  std::vector<uint8_t> chunk(size_t(1) << 16);
  while (in->remaining() > 0)
    in->read(chunk.data(), size_t(std::min<uint64_t>(in->remaining(), chunk.size())));
  in->finish();
}

ZipWriter::ZipWriter(const std::string& path, const char* api, bool force_zip64)
    : file_(path, "wb", api), force_zip64_(force_zip64) {}

void ZipWriter::put(const std::vector<uint8_t>& bytes) {
  file_.write(bytes.data(), bytes.size());
  offset_ += bytes.size();
}

void ZipWriter::add(const std::string& name,
                    std::initializer_list<std::span<const uint8_t>> parts) {
  if (name.size() > kMax16) file_.origin().fail("member name is too long");
  ZipMember m{name, 0, 0, 0, 0, 0, offset_};
  // Bit 11: the name is UTF-8 (set only when it is not plain ASCII, as zipfile does).
  if (std::any_of(name.begin(), name.end(), [](char c) { return c & 0x80; })) m.flags = 0x800;
  for (auto part : parts) {
    m.crc32 = crc_update(m.crc32, part.data(), part.size());
    m.uncompressed_size += part.size();
  }
  m.compressed_size = m.uncompressed_size;
  bool zip64 = force_zip64_ || m.uncompressed_size >= kMax32;
  std::vector<uint8_t> h;
  put_le(h, kLocalHeaderSig, 4);
  put_le(h, zip64 ? 45 : 20, 2);  // version needed
  put_le(h, m.flags, 2);
  put_le(h, 0, 2);       // stored
  put_le(h, 0, 2);       // time 00:00:00
  put_le(h, 0x0021, 2);  // date 1980-01-01
  put_le(h, m.crc32, 4);
  put_le(h, zip64 ? kMax32 : m.compressed_size, 4);
  put_le(h, zip64 ? kMax32 : m.uncompressed_size, 4);
  put_le(h, name.size(), 2);
  put_le(h, zip64 ? 20 : 0, 2);
  h.insert(h.end(), name.begin(), name.end());
  if (zip64) {
    put_le(h, kZip64ExtraId, 2), put_le(h, 16, 2);
    put_le(h, m.uncompressed_size, 8), put_le(h, m.compressed_size, 8);
  }
  put(h);
  for (auto part : parts) file_.write(part.data(), part.size());
  offset_ += m.uncompressed_size;
  members_.push_back(std::move(m));
}

void ZipWriter::finish() {
  uint64_t cd_offset = offset_;
  for (const ZipMember& m : members_) {
    bool big_size = force_zip64_ || m.uncompressed_size >= kMax32;
    bool big_offset = force_zip64_ || m.local_header_offset >= kMax32;
    std::vector<uint8_t> extra;
    if (big_size) put_le(extra, m.uncompressed_size, 8), put_le(extra, m.compressed_size, 8);
    if (big_offset) put_le(extra, m.local_header_offset, 8);
    std::vector<uint8_t> h;
    put_le(h, kCentralHeaderSig, 4);
    put_le(h, extra.empty() ? 20 : 45, 2);  // version made by (MS-DOS)
    put_le(h, extra.empty() ? 20 : 45, 2);  // version needed
    put_le(h, m.flags, 2);
    put_le(h, 0, 2), put_le(h, 0, 2), put_le(h, 0x0021, 2);
    put_le(h, m.crc32, 4);
    put_le(h, big_size ? kMax32 : m.compressed_size, 4);
    put_le(h, big_size ? kMax32 : m.uncompressed_size, 4);
    put_le(h, m.name.size(), 2);
    put_le(h, extra.empty() ? 0 : extra.size() + 4, 2);
    put_le(h, 0, 2), put_le(h, 0, 2), put_le(h, 0, 2);  // comment, disk, internal attributes
    put_le(h, 0, 4);                                    // external attributes
    put_le(h, big_offset ? kMax32 : m.local_header_offset, 4);
    h.insert(h.end(), m.name.begin(), m.name.end());
    if (!extra.empty()) {
      put_le(h, kZip64ExtraId, 2), put_le(h, extra.size(), 2);
      h.insert(h.end(), extra.begin(), extra.end());
    }
    put(h);
  }
  uint64_t cd_size = offset_ - cd_offset, n = members_.size();
  bool zip64 = force_zip64_ || n >= kMax16 || cd_size >= kMax32 || cd_offset >= kMax32;
  std::vector<uint8_t> e;
  if (zip64) {
    uint64_t record = offset_;
    put_le(e, kZip64EndSig, 4), put_le(e, 44, 8), put_le(e, 45, 2), put_le(e, 45, 2);
    put_le(e, 0, 4), put_le(e, 0, 4), put_le(e, n, 8), put_le(e, n, 8);
    put_le(e, cd_size, 8), put_le(e, cd_offset, 8);
    put_le(e, kZip64LocatorSig, 4), put_le(e, 0, 4), put_le(e, record, 8), put_le(e, 1, 4);
  }
  put_le(e, kEndSig, 4), put_le(e, 0, 2), put_le(e, 0, 2);
  put_le(e, zip64 ? kMax16 : n, 2), put_le(e, zip64 ? kMax16 : n, 2);
  put_le(e, zip64 ? kMax32 : cd_size, 4), put_le(e, zip64 ? kMax32 : cd_offset, 4);
  put_le(e, 0, 2);  // comment length
  put(e);
  file_.close();
}

}  // namespace spmd::io

// IDX files (the MNIST family's format), read through zlib's gz* functions, which read gzip'd
// and raw files alike. Every size is checked against the bytes the file can hold before anything
// is allocated, so a damaged header raises ValueError instead of allocating or reading garbage.
#include <spmd/data.h>
#include <spmd/error.h>

#include "core/array_impl.h"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <optional>

namespace spmd {
namespace {

static_assert(std::endian::native == std::endian::little, "spmd assumes a little-endian host");

// Deflate expands at most 1032-fold, so a gzip file of k bytes holds at most 1032 * k.
constexpr uint64_t kMaxDeflateRatio = 1032;
constexpr unsigned kReadChunk = 1u << 30;  // gzread takes an unsigned count

struct IdxType {
  uint8_t code;
  DType dtype;
};
constexpr IdxType kIdxTypes[] = {{0x08, DType::uint8},   {0x09, DType::int8},
                                 {0x0B, DType::int16},   {0x0C, DType::int32},
                                 {0x0D, DType::float32}, {0x0E, DType::float64}};

std::string hex(uint64_t v, int digits) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%0*llx", digits, static_cast<unsigned long long>(v));
  return buf;
}

std::optional<DType> dtype_of_code(uint8_t code) {
  for (const IdxType& t : kIdxTypes)
    if (t.code == code) return t.dtype;
  return std::nullopt;
}

std::string known_codes() {
  std::string s;
  for (const IdxType& t : kIdxTypes)
    s += (s.empty() ? "" : ", ") + hex(t.code, 2) + " (" + std::string(dtype_name(t.dtype)) + ")";
  return s;
}

// An open IDX file: reads that say what went wrong, naming the file.
class IdxReader {
 public:
  explicit IdxReader(const std::string& path) : path_(path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::exists(path, ec)) fail("no such file");
    if (!fs::is_regular_file(path, ec)) fail("not a regular file");
    file_size_ = fs::file_size(path, ec);
    file_ = gzopen(path.c_str(), "rb");
    if (!file_) fail("cannot open the file");
    gzbuffer(file_, 1 << 20);
  }
  ~IdxReader() { gzclose(file_); }
  IdxReader(const IdxReader&) = delete;
  IdxReader& operator=(const IdxReader&) = delete;

  [[noreturn]] void fail(const std::string& message) const {
    throw ValueError("[read_idx] '" + path_ + "': " + message);
  }

  // Up to n bytes; fewer only at the end of the data. Damaged gzip data raises.
  uint64_t read(void* dst, uint64_t n) {
    uint64_t done = 0;
    while (done < n) {
      auto chunk = static_cast<unsigned>(std::min<uint64_t>(n - done, kReadChunk));
      int got = gzread(file_, static_cast<char*>(dst) + done, chunk);
      check_stream();
      if (got <= 0) break;
      done += uint64_t(got);
    }
    return done;
  }

  // The most data bytes the file can hold, for checking a header before allocating.
  uint64_t capacity() const {
    if (gzdirect(file_)) return file_size_;
    return file_size_ > UINT64_MAX / kMaxDeflateRatio ? UINT64_MAX : file_size_ * kMaxDeflateRatio;
  }
  bool gzipped() const { return !gzdirect(file_); }

 private:
  // A gzip stream cut short reads as the end of the data (the caller reports it as truncated);
  // anything else zlib reports is damage.
  void check_stream() const {
    int errnum = Z_OK;
    std::string message = gzerror(file_, &errnum);
    if (errnum == Z_OK || errnum == Z_BUF_ERROR) return;
    // zlib's message starts with the path, which ours already names.
    if (message.starts_with(path_ + ": ")) message.erase(0, path_.size() + 2);
    fail("damaged gzip data (zlib: " + message + ")");
  }

  std::string path_;
  uint64_t file_size_ = 0;
  gzFile file_ = nullptr;
};

struct IdxHeader {
  DType dtype;
  Shape shape;
};

uint32_t big_endian_u32(const uint8_t* b) {
  return uint32_t(b[0]) << 24 | uint32_t(b[1]) << 16 | uint32_t(b[2]) << 8 | uint32_t(b[3]);
}

IdxHeader read_header(IdxReader& in) {
  uint8_t magic[4];
  uint64_t got = in.read(magic, 4);
  if (got < 4)
    in.fail("truncated: expected a 4-byte magic number, the data has " + std::to_string(got) +
            " bytes");
  if (magic[0] != 0 || magic[1] != 0)
    in.fail(
        "not an IDX file: expected a magic number 0x0000TTNN (two zero bytes, the type code "
        "TT, the number of dimensions NN), got " +
        hex(big_endian_u32(magic), 8));
  std::optional<DType> dtype = dtype_of_code(magic[2]);
  if (!dtype)
    in.fail("unknown element type code " + hex(magic[2], 2) + "; expected one of " + known_codes());
  const int ndim = magic[3];
  if (ndim == 0) in.fail("expected at least 1 dimension in the magic number, got 0");
  std::vector<uint8_t> dims(size_t(ndim) * 4);
  got = in.read(dims.data(), dims.size());
  if (got < dims.size())
    in.fail("truncated: expected " + std::to_string(ndim) + " dimensions (" +
            std::to_string(dims.size()) + " bytes) after the magic number, the data has " +
            std::to_string(got) + " bytes");
  Shape shape;
  for (int d = 0; d < ndim; ++d) shape.push_back(big_endian_u32(&dims[size_t(d) * 4]));
  return {*dtype, shape};
}

// Bytes of the header's data, or ValueError for a shape no array can have.
uint64_t data_size(const IdxHeader& h, IdxReader& in) {
  std::optional<int64_t> n;
  try {
    n = check_shape_size(h.shape, itemsize(h.dtype), nullptr, "read_idx");
  } catch (const ValueError&) {
  }
  if (!n)
    in.fail("the header's shape " + h.shape.str() + " of " + std::string(dtype_name(h.dtype)) +
            " is too large for an array");
  return uint64_t(*n);
}

std::string needs(const IdxHeader& h, uint64_t nbytes) {
  return "the header's shape " + h.shape.str() + " of " + std::string(dtype_name(h.dtype)) +
         " needs " + std::to_string(nbytes) + " bytes of data";
}

void byteswap(void* data, int size, int64_t count) {
  auto* p = static_cast<uint8_t*>(data);
  for (int64_t i = 0; i < count; ++i, p += size) std::reverse(p, p + size);
}

}  // namespace

Array read_idx(const std::string& path) {
  IdxReader in(path);
  IdxHeader h = read_header(in);
  const uint64_t nbytes = data_size(h, in);
  if (nbytes > in.capacity())
    in.fail("truncated: " + needs(h, nbytes) + ", more than the " +
            (in.gzipped() ? "gzip file" : "file") + " can hold");
  Array out = make_uninitialized(AbstractValue{h.shape, h.dtype, false}, "read_idx");
  void* data = out.impl()->buffer->data();
  const uint64_t got = in.read(data, nbytes);
  if (got < nbytes)
    in.fail("truncated: " + needs(h, nbytes) + ", the file has " + std::to_string(got));
  uint8_t extra;
  if (in.read(&extra, 1) != 0)
    in.fail("trailing data: " + needs(h, nbytes) + ", the file has more");
  if (itemsize(h.dtype) > 1) byteswap(data, int(itemsize(h.dtype)), h.shape.size());
  return out;
}

}  // namespace spmd

// NumPy's .npy format (numpy.lib.format, versions 1.0–3.0) and .npz archives of .npy members.
// Files are written byte-for-byte as np.save writes them; reading also accepts big-endian and
// Fortran-order data, converting it to spmd's little-endian row-major layout.
#include <spmd/error.h>
#include <spmd/io.h>

#include "core/array_impl.h"
#include "io/zip.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <string_view>

namespace spmd {
namespace {

static_assert(std::endian::native == std::endian::little, "spmd assumes a little-endian host");

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr size_t kMaxHeaderSize = size_t(1) << 20;
constexpr int kMaxDims = 64;  // NumPy's NPY_MAXDIMS
// np.save leaves room for the growth axis to reach 21 digits, and aligns data to 64 bytes.
constexpr size_t kGrowthAxisMaxDigits = 21;
constexpr size_t kArrayAlign = 64;

struct NpyHeader {
  DType dtype = DType::float32;
  bool big_endian = false;
  bool fortran_order = false;
  Shape shape;
};

// The descr np.save writes for each dtype. bfloat16 is what NumPy writes for ml_dtypes.bfloat16:
// a 2-byte void, which np.load returns as '|V2' for .view(ml_dtypes.bfloat16).
std::string descr_of(DType t) {
  switch (t) {
    case DType::bool_:
      return "|b1";
    case DType::int8:
      return "|i1";
    case DType::uint8:
      return "|u1";
    case DType::bfloat16:
      return "<V2";
    default:
      break;
  }
  char kind = is_floating(t) ? 'f' : is_signed_integer(t) ? 'i' : 'u';
  return std::string("<") + kind + std::to_string(itemsize(t));
}

std::string shape_repr(const Shape& shape) {
  std::string s = "(";
  for (int i = 0; i < shape.ndim(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.ndim() == 1 ? ",)" : ")");
}

void put_le(std::string& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(char(v >> (8 * i)));
}

// Magic, version, header length and the padded header dict, exactly as np.save writes them.
std::string npy_header(DType t, const Shape& shape) {
  std::string dict = "{'descr': '" + descr_of(t) +
                     "', 'fortran_order': False, 'shape': " + shape_repr(shape) + ", }";
  if (shape.ndim() > 0) dict.append(kGrowthAxisMaxDigits - std::to_string(shape[0]).size(), ' ');
  // With at most 64 dimensions the header always fits version 1.0's 2-byte length.
  size_t text = dict.size() + 1;  // with the final newline
  size_t pad = kArrayAlign - (10 + text) % kArrayAlign;
  std::string out(kMagic);
  out.push_back(1);  // version 1.0
  out.push_back(0);
  put_le(out, text + pad, 2);
  return out + dict + std::string(pad, ' ') + "\n";
}

// A parser for the Python dict literal of a .npy header.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const io::Origin& origin) : s_(text), origin_(origin) {}

  NpyHeader parse() {
    NpyHeader h;
    bool seen[3] = {false, false, false};
    expect('{');
    while (!peek('}')) {
      std::string key = string_value();
      expect(':');
      int k = key == "descr" ? 0 : key == "fortran_order" ? 1 : key == "shape" ? 2 : -1;
      if (k < 0 || seen[k]) fail("unexpected key '" + key + "' in the header");
      seen[k] = true;
      if (k == 0) parse_descr(h);
      if (k == 1) h.fortran_order = bool_value();
      if (k == 2) h.shape = shape_value();
      if (!peek('}')) expect(',');
    }
    expect('}');
    skip_space();
    if (pos_ != s_.size()) fail("unexpected text after the header dict");
    if (!seen[0] || !seen[1] || !seen[2])
      fail("the header must have the keys 'descr', 'fortran_order' and 'shape'");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    origin_.fail("bad .npy header: " + what + " in " + std::string(s_.substr(0, 200)));
  }
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t')) ++pos_;
  }
  bool peek(char c) {
    skip_space();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  void expect(char c) {
    if (!peek(c)) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string string_value() {
    skip_space();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) fail("expected a string");
    char quote = s_[pos_++];
    size_t end = s_.find(quote, pos_);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string v(s_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return v;
  }
  bool bool_value() {
    skip_space();
    for (std::string_view word : {"True", "False"})
      if (s_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return word == "True";
      }
    fail("expected True or False for 'fortran_order'");
  }
  int64_t int_value() {
    skip_space();
    int64_t v = 0;
    size_t start = pos_;
    for (; pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9'; ++pos_) {
      if (v > (int64_t(1) << 56)) fail("dimension too large");
      v = v * 10 + (s_[pos_] - '0');
    }
    if (pos_ == start) fail("expected a non-negative integer dimension");
    if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;  // Python 2 long literal
    return v;
  }
  Shape shape_value() {
    expect('(');
    Shape shape;
    while (!peek(')')) {
      if (shape.ndim() == kMaxDims) fail("more than 64 dimensions");
      shape.push_back(int_value());
      if (!peek(')')) expect(',');
    }
    expect(')');
    return shape;
  }
  // Any byte-order character, then the kind and size np.save writes ("f4", "V2" for bfloat16).
  void parse_descr(NpyHeader& h) {
    if (peek('[')) unsupported("structured dtypes");
    std::string d = string_value();
    bool order_ok = d.size() == 3 && std::string_view("<>|=").find(d[0]) != std::string_view::npos;
    for (int i = 0; i < kNumDTypes && order_ok; ++i) {
      if (d.substr(1) != descr_of(DType(i)).substr(1)) continue;
      h.dtype = DType(i);
      h.big_endian = d[0] == '>';
      return;
    }
    unsupported("dtype descr '" + d + "'");
  }
  [[noreturn]] void unsupported(const std::string& what) const {
    throw TypeError(std::string("[").append(origin_.api).append("] ") + origin_.where + ": " +
                    what +
                    " is not supported; spmd reads bool, int8-int64, uint8-uint64, float16, "
                    "float32, float64 and bfloat16 ('<V2', as ml_dtypes writes it)");
  }

  std::string_view s_;
  size_t pos_ = 0;
  const io::Origin& origin_;
};

NpyHeader read_header(io::ByteReader& in) {
  const io::Origin& o = in.origin();
  if (in.remaining() < 10) o.fail("not a .npy file (too short)");
  char prefix[8];
  in.read(prefix, 8);
  if (std::string_view(prefix, 6) != kMagic) {
    if (prefix[0] == 'P' && prefix[1] == 'K')
      o.fail("not a .npy file (it is a zip archive; use load_npz)");
    o.fail("not a .npy file (bad magic string)");
  }
  int major = uint8_t(prefix[6]), minor = uint8_t(prefix[7]);
  if (major < 1 || major > 3 || minor != 0)
    o.fail("unsupported .npy format version " + std::to_string(major) + "." +
           std::to_string(minor));
  uint8_t len_bytes[4] = {};
  in.read(len_bytes, major == 1 ? 2 : 4);
  size_t len = size_t(len_bytes[0]) | size_t(len_bytes[1]) << 8 | size_t(len_bytes[2]) << 16 |
               size_t(len_bytes[3]) << 24;
  if (len > kMaxHeaderSize || len > in.remaining())
    o.fail("header length " + std::to_string(len) + " exceeds the file");
  std::string text(len, '\0');
  in.read(text.data(), len);
  return HeaderParser(text, o).parse();
}

// Bytes of `shape` elements of `t`, or IOError for a shape no array can have (NumPy's limit,
// which np.load applies too: the nonzero dims times the itemsize must fit in int64).
uint64_t data_size(const NpyHeader& h, const io::Origin& o) {
  const int64_t size = itemsize(h.dtype);
  std::optional<int64_t> n;
  try {
    n = check_shape_size(h.shape, size, std::string(dtype_name(h.dtype)).c_str(), "load_npy");
  } catch (const ValueError&) {
  }
  if (!n) o.fail("shape " + h.shape.str() + " is too large");
  return uint64_t(*n);
}

template <int N>
void byteswap_each(uint8_t* p, int64_t count) {
  for (int64_t i = 0; i < count; ++i, p += N) std::reverse(p, p + N);
}

void byteswap(void* data, int size, int64_t count) {
  auto* p = static_cast<uint8_t*>(data);
  if (size == 2) byteswap_each<2>(p, count);
  if (size == 4) byteswap_each<4>(p, count);
  if (size == 8) byteswap_each<8>(p, count);
}

// Column-major `src` of `shape` into row-major `dst`: dst[i0..ik] = src at sum(i_j * cstride_j).
template <int N>
void fortran_to_c(const uint8_t* src, uint8_t* dst, const Shape& shape) {
  int nd = shape.ndim();
  std::vector<int64_t> stride(static_cast<size_t>(nd)), index(static_cast<size_t>(nd), 0);
  int64_t s = 1;
  for (int d = 0; d < nd; ++d) stride[size_t(d)] = s, s *= shape[d];
  int64_t last = shape[nd - 1], last_stride = stride[size_t(nd - 1)], offset = 0;
  for (int64_t done = 0; done < shape.size(); done += last) {
    for (int64_t j = 0; j < last; ++j, dst += N)
      std::memcpy(dst, src + (offset + j * last_stride) * N, N);
    for (int d = nd - 2; d >= 0; --d) {
      offset += stride[size_t(d)];
      if (++index[size_t(d)] < shape[d]) break;
      offset -= stride[size_t(d)] * shape[d];
      index[size_t(d)] = 0;
    }
  }
}

void fortran_to_c(const void* src, void* dst, int size, const Shape& shape) {
  auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  if (size == 1) fortran_to_c<1>(s, d, shape);
  if (size == 2) fortran_to_c<2>(s, d, shape);
  if (size == 4) fortran_to_c<4>(s, d, shape);
  if (size == 8) fortran_to_c<8>(s, d, shape);
}

// One .npy stream: header, then exactly the data the header describes.
Array read_npy(io::ByteReader& in) {
  const io::Origin& o = in.origin();
  NpyHeader h = read_header(in);
  uint64_t nbytes = data_size(h, o);
  if (in.remaining() != nbytes)
    o.fail("data size mismatch: shape " + h.shape.str() + " of " +
           std::string(dtype_name(h.dtype)) + " needs " + std::to_string(nbytes) +
           " bytes, the file has " + std::to_string(in.remaining()));
  Array out = make_uninitialized(AbstractValue{h.shape, h.dtype, false}, "load_npy");
  void* data = out.impl()->buffer->data();
  bool transpose = h.fortran_order && h.shape.ndim() > 1 && h.shape.size() > 0;
  if (transpose) {
    std::vector<uint8_t> column_major(static_cast<size_t>(nbytes));
    in.read(column_major.data(), column_major.size());
    fortran_to_c(column_major.data(), data, itemsize(h.dtype), h.shape);
  } else {
    in.read(data, size_t(nbytes));
  }
  in.finish();
  if (h.big_endian) byteswap(data, itemsize(h.dtype), h.shape.size());
  // Any nonzero byte is True in NumPy; spmd's bool kernels rely on 0/1.
  if (h.dtype == DType::bool_) {
    auto* b = static_cast<uint8_t*>(data);
    for (int64_t i = 0; i < h.shape.size(); ++i) b[i] = b[i] != 0;
  }
  return out;
}

const void* checked_data(const Array& x, const char* api, const std::string& name) {
  std::string prefix = std::string("[").append(api).append("] ");
  if (!x.valid()) throw ValueError(prefix + name + " is an empty Array handle");
  if (x.ndim() > kMaxDims)
    throw ValueError(prefix + "NumPy arrays have at most " + std::to_string(kMaxDims) +
                     " dimensions, " + name + " has " + std::to_string(x.ndim()));
  return host_data(x, api);
}

std::span<const uint8_t> as_bytes(const void* p, size_t n) {
  return {static_cast<const uint8_t*>(p), n};
}

// A damaged member can look like a .npy file of an unsupported dtype; its checksum tells the
// two apart, so that damage is reported as damage.
Array read_member(const io::File& file, const io::ZipMember& m) {
  try {
    return read_npy(*io::open_zip_member(file, m));
  } catch (const TypeError&) {
    io::verify_zip_member(file, m);
    throw;
  }
}

}  // namespace

void save_npy(const std::string& path, const Array& x) {
  const void* data = checked_data(x, "save_npy", "the array");
  std::string header = npy_header(x.dtype(), x.shape());
  io::File file(path, "wb", "save_npy");
  file.write(header.data(), header.size());
  file.write(data, size_t(x.nbytes()));
  file.close();
}

Array load_npy(const std::string& path) {
  io::File file(path, "rb", "load_npy");
  return read_npy(*io::file_reader(file));
}

void save_npz(const std::string& path, const std::map<std::string, Array>& arrays) {
  for (const auto& [name, x] : arrays) checked_data(x, "save_npz", "array '" + name + "'");
  io::ZipWriter zip(path, "save_npz");
  for (const auto& [name, x] : arrays) {
    std::string header = npy_header(x.dtype(), x.shape());
    zip.add(name + ".npy", {as_bytes(header.data(), header.size()),
                            as_bytes(host_data(x, "save_npz"), size_t(x.nbytes()))});
  }
  zip.finish();
}

std::map<std::string, Array> load_npz(const std::string& path) {
  io::File file(path, "rb", "load_npz");
  std::map<std::string, Array> out;
  for (const io::ZipMember& m : io::list_zip_members(file)) {
    if (m.name.ends_with('/') && m.uncompressed_size == 0) continue;  // a directory entry
    std::string key = m.name.ends_with(".npy") ? m.name.substr(0, m.name.size() - 4) : m.name;
    out[key] = read_member(file, m);
  }
  return out;
}

}  // namespace spmd

// The .safetensors checkpoint format (huggingface/safetensors): written byte for byte as
// safetensors 0.8's serializer writes it, read with every size and offset checked against the
// file, so that a corrupt or truncated file raises ValueError instead of reading out of bounds.
// The header is a flat JSON object; a small parser here reads exactly the JSON it can hold.
#include <spmd/error.h>
#include <spmd/io.h>

#include "core/array_impl.h"
#include "io/zip.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <optional>
#include <set>
#include <string_view>

namespace spmd {
namespace {

static_assert(std::endian::native == std::endian::little, "spmd assumes a little-endian host");

constexpr uint64_t kMaxHeaderSize = 100'000'000;  // safetensors' own limit
constexpr size_t kLengthBytes = 8;
constexpr size_t kHeaderAlign = 8;
constexpr std::string_view kMetadataKey = "__metadata__";

struct DTypeTag {
  std::string_view tag;
  DType dtype;
};
// safetensors' names of spmd's dtypes, in the order of its Dtype enum. Its writer sorts tensors
// by that order, descending (then by name), so larger elements come first and stay aligned.
constexpr DTypeTag kDTypeTags[] = {
    {"BOOL", DType::bool_},    {"U8", DType::uint8},    {"I8", DType::int8},
    {"I16", DType::int16},     {"U16", DType::uint16},  {"F16", DType::float16},
    {"BF16", DType::bfloat16}, {"I32", DType::int32},   {"U32", DType::uint32},
    {"F32", DType::float32},   {"F64", DType::float64}, {"I64", DType::int64},
    {"U64", DType::uint64},
};

int sort_rank(DType t) {
  for (int i = 0; i < int(std::size(kDTypeTags)); ++i)
    if (kDTypeTags[i].dtype == t) return i;
  return 0;
}

std::string_view dtype_tag(DType t) {
  return kDTypeTags[sort_rank(t)].tag;
}

std::string known_tags() {
  std::string s;
  for (const DTypeTag& d : kDTypeTags) {
    if (!s.empty()) s += ", ";
    s += d.tag;
  }
  return s;
}

std::string quoted(std::string_view s) {
  std::string out = "'";
  out += s;
  return out += '\'';
}

// Whether s is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF),
// as the JSON strings of a safetensors header must be.
bool valid_utf8(std::string_view s) {
  constexpr uint32_t kMinOfLength[] = {0, 0x80, 0x800, 0x10000};
  for (size_t i = 0; i < s.size();) {
    auto c = uint8_t(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int n = (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : 0;
    if (n == 0 || s.size() - i <= size_t(n)) return false;
    uint32_t cp = c & (0x3fu >> n);
    for (int k = 1; k <= n; ++k) {
      auto d = uint8_t(s[i + size_t(k)]);
      if ((d & 0xc0) != 0x80) return false;
      cp = cp << 6 | (d & 0x3f);
    }
    if (cp < kMinOfLength[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += size_t(n) + 1;
  }
  return true;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xc0 | cp >> 6);
    out += char(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += char(0xe0 | cp >> 12);
    out += char(0x80 | (cp >> 6 & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  } else {
    out += char(0xf0 | cp >> 18);
    out += char(0x80 | (cp >> 12 & 0x3f));
    out += char(0x80 | (cp >> 6 & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  }
}

// ---- Writing -----------------------------------------------------------------------------------

// A JSON string as serde_json (safetensors' serializer) writes it: short escapes where JSON has
// them, \u00xx for the other control characters, everything else (UTF-8 included) as is.
void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char ch : s) {
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (uint8_t(ch) < 0x20) {
          char escape[7];
          std::snprintf(escape, sizeof escape, "\\u%04x", unsigned(uint8_t(ch)));
          out += escape;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

void append_metadata(std::string& out, const std::map<std::string, std::string>& metadata) {
  append_json_string(out, kMetadataKey);
  out += ":{";
  for (const auto& [key, value] : metadata) {
    if (out.back() != '{') out += ',';
    append_json_string(out, key);
    out += ':';
    append_json_string(out, value);
  }
  out += '}';
}

void append_tensor(std::string& out, const std::string& name, const Array& x, uint64_t begin) {
  append_json_string(out, name);
  out += ":{\"dtype\":\"" + std::string(dtype_tag(x.dtype())) + "\",\"shape\":[";
  for (int i = 0; i < x.ndim(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(x.shape()[i]);
  }
  out += "],\"data_offsets\":[" + std::to_string(begin) + "," +
         std::to_string(begin + uint64_t(x.nbytes())) + "]}";
}

using NamedArray = std::pair<std::string, Array>;

// The length field and the JSON header, padded with spaces so that the data starts at a multiple
// of 8 bytes.
std::string header_bytes(const std::vector<const NamedArray*>& order,
                         const std::map<std::string, std::string>& metadata) {
  std::string json = "{";
  if (!metadata.empty()) append_metadata(json, metadata);
  uint64_t offset = 0;
  for (const NamedArray* t : order) {
    if (json.back() != '{') json += ',';
    append_tensor(json, t->first, t->second, offset);
    offset += uint64_t(t->second.nbytes());
  }
  json += '}';
  json.append((kHeaderAlign - json.size() % kHeaderAlign) % kHeaderAlign, ' ');
  std::string out;
  for (size_t i = 0; i < kLengthBytes; ++i) out += char(uint64_t(json.size()) >> (8 * i));
  return out + json;
}

void check_for_saving(const NamedArrays& tensors, const std::map<std::string, std::string>& meta) {
  auto fail = [](const std::string& what) { throw ValueError("[save_safetensors] " + what); };
  std::set<std::string_view> names;
  for (const auto& [name, x] : tensors) {
    if (!x.valid()) fail("tensor " + quoted(name) + " is an empty Array handle");
    if (name == kMetadataKey) fail("the name '__metadata__' is reserved for the metadata");
    if (!names.insert(name).second) fail("the name " + quoted(name) + " is used twice");
    if (!valid_utf8(name)) fail("tensor names must be UTF-8, got " + quoted(name));
  }
  for (const auto& [key, value] : meta)
    if (!valid_utf8(key) || !valid_utf8(value))
      fail("metadata must be UTF-8, got key " + quoted(key) + " with value " + quoted(value));
}

// ---- Reading -----------------------------------------------------------------------------------

// Raises ValueError "[load_safetensors] '<path>': <what>".
struct LoadError {
  std::string where;
  [[noreturn]] void fail(const std::string& what) const {
    throw ValueError("[load_safetensors] " + where + ": " + what);
  }
};

struct TensorEntry {
  std::string name;
  DType dtype = DType::float32;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

struct Header {
  std::vector<TensorEntry> tensors;
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;
  uint64_t data_size = 0;
};

// A reader of the JSON a header may hold: an object of tensor entries {"dtype": "F32",
// "shape": [..], "data_offsets": [b, e]} and an optional "__metadata__" object of strings.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const LoadError& error) : s_(text), error_(error) {}

  Header parse() {
    Header h;
    bool seen_metadata = false;
    std::set<std::string> names;
    expect('{');
    if (!peek('}')) do {
        std::string key = string_value();
        expect(':');
        if (key == kMetadataKey) {
          if (seen_metadata) error_.fail("the header has '__metadata__' twice");
          seen_metadata = true;
          h.metadata = metadata_value();
        } else {
          if (!names.insert(key).second) error_.fail("tensor " + quoted(key) + " appears twice");
          h.tensors.push_back(tensor_value(key));
        }
      } while (accept(','));
    expect('}');
    skip_space();
    if (pos_ != s_.size()) syntax("text after the header object");
    return h;
  }

 private:
  [[noreturn]] void syntax(const std::string& what) const {
    error_.fail("invalid JSON header at byte " + std::to_string(pos_) + ": " + what);
  }
  void skip_space() {
    while (pos_ < s_.size() && std::string_view(" \t\n\r").find(s_[pos_]) != std::string_view::npos)
      ++pos_;
  }
  bool peek(char c) {
    skip_space();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  bool accept(char c) {
    if (!peek(c)) return false;
    ++pos_;
    return true;
  }
  void expect(char c) {
    if (!accept(c)) syntax(std::string("expected '") + c + "'");
  }

  uint32_t hex4() {
    if (s_.size() - pos_ < 4) syntax("incomplete \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i, ++pos_) {
      char c = s_[pos_];
      int d = c >= '0' && c <= '9'   ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                     : -1;
      if (d < 0) syntax("invalid \\u escape");
      v = v << 4 | uint32_t(d);
    }
    return v;
  }
  // A \u escape (the "\u" already read), joining a UTF-16 surrogate pair into one code point.
  uint32_t unicode_escape() {
    uint32_t cp = hex4();
    if (cp >= 0xdc00 && cp <= 0xdfff) syntax("unpaired UTF-16 surrogate in a \\u escape");
    if (cp < 0xd800 || cp > 0xdbff) return cp;
    if (s_.substr(pos_, 2) != "\\u") syntax("unpaired UTF-16 surrogate in a \\u escape");
    pos_ += 2;
    uint32_t low = hex4();
    if (low < 0xdc00 || low > 0xdfff) syntax("unpaired UTF-16 surrogate in a \\u escape");
    return 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
  }
  char simple_escape(char e) {
    switch (e) {
      case '"':
      case '\\':
      case '/':
        return e;
      case 'b':
        return '\b';
      case 'f':
        return '\f';
      case 'n':
        return '\n';
      case 'r':
        return '\r';
      case 't':
        return '\t';
      default:
        syntax("invalid escape '\\" + std::string(1, e) + "'");
    }
  }
  std::string string_value() {
    if (!peek('"')) syntax("expected a string");
    ++pos_;
    std::string out;
    while (pos_ < s_.size()) {
      char c = s_[pos_++];
      if (c == '"') return out;
      if (uint8_t(c) < 0x20) syntax("control character in a string");
      if (c != '\\') {
        out += c;
      } else if (pos_ < s_.size() && s_[pos_] == 'u') {
        ++pos_;
        append_utf8(out, unicode_escape());
      } else if (pos_ < s_.size()) {
        out += simple_escape(s_[pos_++]);
      }
    }
    syntax("unterminated string");
  }
  uint64_t uint_value() {
    skip_space();
    size_t start = pos_;
    uint64_t v = 0;
    for (; pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9'; ++pos_) {
      auto d = uint64_t(s_[pos_] - '0');
      if (v > (UINT64_MAX - d) / 10) syntax("integer does not fit in 64 bits");
      v = v * 10 + d;
    }
    if (pos_ == start) syntax("expected a non-negative integer");
    if (s_[start] == '0' && pos_ - start > 1) syntax("integer with a leading zero");
    if (pos_ < s_.size() && std::string_view(".eE").find(s_[pos_]) != std::string_view::npos)
      syntax("expected an integer, got a fraction or exponent");
    return v;
  }
  std::vector<uint64_t> uint_array() {
    std::vector<uint64_t> out;
    expect('[');
    if (!peek(']')) do
        out.push_back(uint_value());
      while (accept(','));
    expect(']');
    return out;
  }

  std::map<std::string, std::string> metadata_value() {
    std::map<std::string, std::string> out;
    if (!peek('{')) error_.fail("'__metadata__' must be an object of strings");
    expect('{');
    if (!peek('}')) do {
        std::string key = string_value();
        expect(':');
        if (!peek('"'))
          error_.fail("'__metadata__' values must be strings, the value of " + quoted(key) +
                      " is not");
        if (!out.emplace(key, string_value()).second)
          error_.fail("'__metadata__' has the key " + quoted(key) + " twice");
      } while (accept(','));
    expect('}');
    return out;
  }

  DType dtype_value(const std::string& name) {
    std::string tag = string_value();
    for (const DTypeTag& d : kDTypeTags)
      if (d.tag == tag) return d.dtype;
    error_.fail("tensor " + quoted(name) + " has the unknown dtype " + quoted(tag) +
                "; expected one of " + known_tags());
  }
  Shape shape_value(const std::string& name) {
    Shape shape;
    for (uint64_t d : uint_array()) {
      if (d > uint64_t(INT64_MAX))
        error_.fail("tensor " + quoted(name) + " has a dimension of " + std::to_string(d));
      shape.push_back(int64_t(d));
    }
    return shape;
  }
  void offsets_value(TensorEntry& e) {
    std::vector<uint64_t> offsets = uint_array();
    if (offsets.size() != 2)
      error_.fail("tensor " + quoted(e.name) + " must have data_offsets [begin, end], got " +
                  std::to_string(offsets.size()) + " numbers");
    e.begin = offsets[0];
    e.end = offsets[1];
  }
  TensorEntry tensor_value(const std::string& name) {
    constexpr std::string_view kFields[] = {"dtype", "shape", "data_offsets"};
    TensorEntry e;
    e.name = name;
    bool seen[3] = {false, false, false};
    if (!peek('{')) error_.fail("tensor " + quoted(name) + " must be a JSON object");
    expect('{');
    if (!peek('}')) do {
        std::string key = string_value();
        expect(':');
        auto k = size_t(std::find(kFields, kFields + 3, key) - kFields);
        if (k == 3 || seen[k])
          error_.fail("tensor " + quoted(name) + " has " + (k == 3 ? "the unknown" : "a repeated") +
                      " field " + quoted(key) + "; expected dtype, shape and data_offsets");
        seen[k] = true;
        if (k == 0) e.dtype = dtype_value(name);
        if (k == 1) e.shape = shape_value(name);
        if (k == 2) offsets_value(e);
      } while (accept(','));
    expect('}');
    for (size_t k = 0; k < 3; ++k)
      if (!seen[k])
        error_.fail("tensor " + quoted(name) + " has no " + quoted(kFields[k]) +
                    "; expected dtype, shape and data_offsets");
    return e;
  }

  std::string_view s_;
  size_t pos_ = 0;
  const LoadError& error_;
};

std::string offsets_str(const TensorEntry& e) {
  std::string out = "[";
  out += std::to_string(e.begin) + ", " + std::to_string(e.end);
  return out += ']';
}

// The tensor's byte range holds exactly its shape and dtype, inside the data.
void check_extent(const TensorEntry& e, uint64_t data_size, const LoadError& error) {
  std::string tensor = "tensor " + quoted(e.name);
  if (e.end < e.begin) error.fail(tensor + " has data_offsets " + offsets_str(e) + ", end < begin");
  std::optional<int64_t> nbytes;
  try {
    nbytes = check_shape_size(e.shape, itemsize(e.dtype), nullptr, "load_safetensors");
  } catch (const ValueError&) {
  }
  if (!nbytes) error.fail(tensor + " has shape " + e.shape.str() + ", too large for any array");
  if (e.end - e.begin != uint64_t(*nbytes))
    error.fail(tensor + " of shape " + e.shape.str() + " and dtype " +
               std::string(dtype_tag(e.dtype)) + " needs " + std::to_string(*nbytes) +
               " bytes, its data_offsets " + offsets_str(e) + " hold " +
               std::to_string(e.end - e.begin));
  if (e.end > data_size)
    error.fail(tensor + " has data_offsets " + offsets_str(e) + " beyond the " +
               std::to_string(data_size) + " bytes of data after the header");
}

// As safetensors requires: the tensors, in offset order, tile the data exactly (no gap, no
// overlap, nothing left over). Sorts `tensors` into that order.
void check_layout(std::vector<TensorEntry>& tensors, uint64_t data_size, const LoadError& error) {
  for (const TensorEntry& e : tensors) check_extent(e, data_size, error);
  std::stable_sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) {
    return std::pair(a.begin, a.end) < std::pair(b.begin, b.end);
  });
  uint64_t covered = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorEntry& e = tensors[i];
    if (e.begin < covered)
      error.fail("tensors " + quoted(tensors[i - 1].name) + " " + offsets_str(tensors[i - 1]) +
                 " and " + quoted(e.name) + " " + offsets_str(e) + " overlap");
    if (e.begin > covered)
      error.fail("no tensor holds bytes [" + std::to_string(covered) + ", " +
                 std::to_string(e.begin) + ") of the data");
    covered = e.end;
  }
  if (covered != data_size)
    error.fail("the tensors hold " + std::to_string(covered) + " bytes of data, but " +
               std::to_string(data_size) + " bytes follow the header");
}

Header read_header(const io::File& file) {
  LoadError error{file.origin().where};
  uint64_t size = file.size();
  if (size < kLengthBytes)
    error.fail("the file has " + std::to_string(size) +
               " bytes, too few for the 8-byte header length");
  uint8_t length[kLengthBytes];
  file.read_at(0, length, kLengthBytes);
  uint64_t n = 0;
  for (size_t i = 0; i < kLengthBytes; ++i) n |= uint64_t(length[i]) << (8 * i);
  if (n > size - kLengthBytes)
    error.fail("the header length is " + std::to_string(n) + " bytes, but only " +
               std::to_string(size - kLengthBytes) + " bytes follow it");
  if (n > kMaxHeaderSize)
    error.fail("the header length is " + std::to_string(n) + " bytes, more than safetensors' " +
               "limit of " + std::to_string(kMaxHeaderSize));
  std::string text(size_t(n), '\0');
  file.read_at(kLengthBytes, text.data(), text.size());
  if (!valid_utf8(text)) error.fail("the header is not valid UTF-8");
  Header h = HeaderParser(text, error).parse();
  h.data_start = kLengthBytes + n;
  h.data_size = size - h.data_start;
  check_layout(h.tensors, h.data_size, error);
  return h;
}

Array read_tensor(const io::File& file, const Header& h, const TensorEntry& e) {
  Array out = make_uninitialized(AbstractValue{e.shape, e.dtype, false}, "load_safetensors");
  if (e.end == e.begin) return out;
  auto* data = static_cast<uint8_t*>(out.impl()->buffer->data());
  file.read_at(h.data_start + e.begin, data, size_t(e.end - e.begin));
  // spmd's bool kernels rely on 0/1; any nonzero byte is True, as in NumPy and torch.
  if (e.dtype == DType::bool_)
    for (uint64_t i = 0; i < e.end - e.begin; ++i) data[i] = data[i] != 0;
  return out;
}

}  // namespace

void save_safetensors(const std::string& path, const NamedArrays& tensors,
                      const std::map<std::string, std::string>& metadata) {
  check_for_saving(tensors, metadata);
  std::vector<const NamedArray*> order;
  for (const NamedArray& t : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const NamedArray* a, const NamedArray* b) {
    int ra = sort_rank(a->second.dtype()), rb = sort_rank(b->second.dtype());
    return ra != rb ? ra > rb : a->first < b->first;
  });
  // Gathers sharded values before the file exists, so a failure leaves no partial file.
  std::vector<const void*> data;
  for (const NamedArray* t : order) data.push_back(host_data(t->second, "save_safetensors"));
  std::string header = header_bytes(order, metadata);
  io::File file(path, "wb", "save_safetensors");
  file.write(header.data(), header.size());
  for (size_t i = 0; i < order.size(); ++i) file.write(data[i], size_t(order[i]->second.nbytes()));
  file.close();
}

NamedArrays load_safetensors(const std::string& path) {
  io::File file(path, "rb", "load_safetensors");
  Header h = read_header(file);
  NamedArrays out;
  out.reserve(h.tensors.size());
  for (const TensorEntry& e : h.tensors) out.emplace_back(e.name, read_tensor(file, h, e));
  return out;
}

std::map<std::string, std::string> load_safetensors_metadata(const std::string& path) {
  io::File file(path, "rb", "load_safetensors");
  return read_header(file).metadata;
}

}  // namespace spmd

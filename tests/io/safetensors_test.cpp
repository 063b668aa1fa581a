// .safetensors checkpoints: files Python's safetensors wrote (tools/goldens/gen_safetensors.py)
// load with the values of their .npz twins and in their data order, spmd writes the same bytes
// for the same tensors and metadata, every dtype and sharded arrays round-trip, and every kind of
// corrupt file raises ValueError saying what is wrong.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "core/array_impl.h"
#include "support/golden.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

namespace sp = spmd;
namespace fs = std::filesystem;
using sp::Array;
using sp::DType;
using sp::NamedArrays;
using sp::P;
using sp::Shape;
using spmd_test::error_message;

namespace {

using Metadata = std::map<std::string, std::string>;

std::string golden(const std::string& name) {
  return spmd_test::golden_path("safetensors/" + name);
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// A fresh directory under the test temp dir, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = fs::path(::testing::TempDir()) /
            ("spmd_safetensors_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string write(const std::string& name, const std::string& bytes) const {
    std::ofstream(file(name), std::ios::binary) << bytes;
    return file(name);
  }

 private:
  fs::path path_;
};

// Identical dtype, shape and bytes, so NaN payloads and the sign of zero count.
::testing::AssertionResult same_bytes(const Array& a, const Array& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape())
    return ::testing::AssertionFailure() << "got " << sp::dtype_name(a.dtype()) << a.shape()
                                         << ", want " << sp::dtype_name(b.dtype()) << b.shape();
  if (std::memcmp(sp::host_data(a, "test"), sp::host_data(b, "test"), size_t(a.nbytes())) != 0)
    return ::testing::AssertionFailure() << "bytes differ";
  return ::testing::AssertionSuccess();
}

std::vector<std::string> names_of(const NamedArrays& tensors) {
  std::vector<std::string> names;
  for (const auto& [name, x] : tensors) names.push_back(name);
  return names;
}

const std::string kEscapedName = "odd name: \"q\" \\ / \t\xc3\xa9\xe2\x80\xa8\xf0\x9f\x98\x80";

// The metadata gen_safetensors.py passes for each golden file.
const std::map<std::string, Metadata>& golden_metadata() {
  static const std::map<std::string, Metadata> m = {
      {"dtypes", {{"format", "np"}}},
      {"model", {{"note \"q\"", "line1\nline2\t\xc3\xa9 \x01\x1f\x7f \xf0\x9f\x98\x80"}}},
      {"unpadded", {}},
      {"empty", {}},
      {"many_metadata",
       {{"format", "pt"}, {"step", "1200"}, {"optimizer", "adam"}, {"lr", "0.001"}}},
  };
  return m;
}

TEST(SafetensorsGolden, LoadsPythonFilesWithTheValuesOfTheirNpzTwins) {
  for (const auto& [file, metadata] : golden_metadata()) {
    SCOPED_TRACE(file);
    NamedArrays got = sp::load_safetensors(golden(file + ".safetensors"));
    std::map<std::string, Array> want = sp::load_npz(golden(file + ".npz"));
    ASSERT_EQ(got.size(), want.size());
    for (const auto& [name, x] : got) {
      ASSERT_TRUE(want.count(name)) << name;
      EXPECT_TRUE(same_bytes(x, want.at(name))) << name;
    }
    EXPECT_EQ(sp::load_safetensors_metadata(golden(file + ".safetensors")), metadata);
  }
}

TEST(SafetensorsGolden, LoadsInTheOrderOfTheData) {
  // safetensors orders by dtype, largest alignment first, then by name.
  EXPECT_EQ(names_of(sp::load_safetensors(golden("dtypes.safetensors"))),
            (std::vector<std::string>{"uint64", "int64", "float64", "float32", "uint32", "int32",
                                      "bfloat16", "float16", "uint16", "int16", "int8", "uint8",
                                      "bool"}));
  EXPECT_EQ(names_of(sp::load_safetensors(golden("model.safetensors"))),
            (std::vector<std::string>{"step", "scale", "layers.0.bias", "layers.0.weight",
                                      "layers.1.weight", "empty", kEscapedName, "mask"}));
}

TEST(SafetensorsGolden, ValuesOfATorchStyleFile) {
  NamedArrays got = sp::load_safetensors(golden("model.safetensors"));
  std::map<std::string, Array> by_name(got.begin(), got.end());
  EXPECT_TRUE(same_bytes(by_name.at("layers.0.bias"),
                         sp::array(std::vector<float>{0.5f, -1.0f, 2.0f}, {3})));
  EXPECT_TRUE(same_bytes(by_name.at("step"), sp::array_from_bytes(std::vector<int64_t>{1200}.data(),
                                                                  sp::int64, Shape{})));
  std::vector<uint8_t> odd = {7, 200};
  EXPECT_TRUE(
      same_bytes(by_name.at(kEscapedName), sp::array_from_bytes(odd.data(), sp::uint8, {2})));
  EXPECT_EQ(by_name.at("empty").shape(), (Shape{0, 3}));
  EXPECT_EQ(by_name.at("empty").dtype(), sp::float16);
}

TEST(SafetensorsGolden, SavesTheBytesPythonWrites) {
  TempDir dir;
  for (const auto& [file, metadata] : golden_metadata()) {
    if (metadata.size() > 1) continue;  // Python's key order is a hash map's, not reproducible
    SCOPED_TRACE(file);
    std::map<std::string, Array> arrays = sp::load_npz(golden(file + ".npz"));
    std::string out = dir.file(file + ".safetensors");
    sp::save_safetensors(out, NamedArrays(arrays.begin(), arrays.end()), metadata);
    EXPECT_EQ(read_file(out), read_file(golden(file + ".safetensors")));
  }
}

TEST(SafetensorsGolden, SeveralMetadataKeysAreWrittenSorted) {
  TempDir dir;
  std::string path = dir.file("m.safetensors");
  sp::save_safetensors(path, {}, golden_metadata().at("many_metadata"));
  std::string bytes = read_file(path);
  EXPECT_EQ(bytes.substr(8),
            "{\"__metadata__\":{\"format\":\"pt\",\"lr\":\"0.001\",\"optimizer\":\"adam\",\"step\":"
            "\"1200\"}}  ");
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x50\0\0\0\0\0\0\0", 8));
}

// An array of dtype t whose bytes are a fixed pseudo-random pattern (0/1 for bool).
Array pattern(DType t, const Shape& shape, int seed) {
  std::vector<uint8_t> bytes(size_t(shape.size() * sp::itemsize(t)));
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t((i * 131 + size_t(seed) * 17) >> 1);
  if (t == sp::bool_)
    for (uint8_t& b : bytes) b &= 1;
  return sp::array_from_bytes(bytes.data(), t, shape);
}

TEST(SafetensorsRoundTrip, EveryDtypeAndShape) {
  TempDir dir;
  NamedArrays tensors;
  for (int i = 0; i < sp::kNumDTypes; ++i) {
    auto t = DType(i);
    std::string name(sp::dtype_name(t));
    tensors.emplace_back("model." + name + ".matrix", pattern(t, {3, 5}, i));
    tensors.emplace_back("model." + name + ".scalar", pattern(t, {}, i + 1));
    tensors.emplace_back("model." + name + ".empty", pattern(t, {2, 0}, i));
  }
  std::string path = dir.file("all.safetensors");
  sp::save_safetensors(path, tensors, {{"epoch", "3"}});
  NamedArrays got = sp::load_safetensors(path);
  ASSERT_EQ(got.size(), tensors.size());
  std::map<std::string, Array> by_name(got.begin(), got.end());
  for (const auto& [name, x] : tensors) EXPECT_TRUE(same_bytes(by_name.at(name), x)) << name;
  EXPECT_EQ(sp::load_safetensors_metadata(path), (Metadata{{"epoch", "3"}}));
}

TEST(SafetensorsRoundTrip, ShardedArraysAreSavedWhole) {
  ASSERT_EQ(sp::device_count(), 8);
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"x", "y"});
  Array w = sp::device_put(pattern(sp::float32, {8, 6}, 1), sp::NamedSharding(mesh, P("x", "y")));
  Array b = sp::device_put(pattern(sp::int32, {8}, 2), sp::NamedSharding(mesh, P("x")));
  Array r = sp::device_put(pattern(sp::bfloat16, {3, 2}, 3), sp::NamedSharding(mesh, P()));
  Array c = sp::device_put(pattern(sp::float64, {4}, 4), sp::devices()[5]);
  ASSERT_FALSE(w.is_fully_replicated());
  TempDir dir;
  std::string path = dir.file("sharded.safetensors");
  sp::save_safetensors(path, {{"w", w}, {"b", b}, {"r", r}, {"c", c}});
  NamedArrays got = sp::load_safetensors(path);
  EXPECT_EQ(names_of(got), (std::vector<std::string>{"c", "w", "b", "r"}));
  std::map<std::string, Array> by_name(got.begin(), got.end());
  EXPECT_TRUE(same_bytes(by_name.at("w"), pattern(sp::float32, {8, 6}, 1)));
  EXPECT_TRUE(same_bytes(by_name.at("b"), pattern(sp::int32, {8}, 2)));
  EXPECT_TRUE(same_bytes(by_name.at("r"), pattern(sp::bfloat16, {3, 2}, 3)));
  EXPECT_TRUE(same_bytes(by_name.at("c"), pattern(sp::float64, {4}, 4)));
}

TEST(SafetensorsRoundTrip, NonzeroBoolBytesLoadAsTrue) {
  std::string json = R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})";
  std::string file = std::string(1, char(json.size())) + std::string(7, '\0') + json;
  file += std::string("\x00\x02\xff", 3);
  TempDir dir;
  NamedArrays got = sp::load_safetensors(dir.write("b.safetensors", file));
  std::vector<uint8_t> want = {0, 1, 1};
  EXPECT_TRUE(same_bytes(got.at(0).second, sp::array_from_bytes(want.data(), sp::bool_, {3})));
}

// A file of the given header text and data; the length field says `length` (the header's own
// length by default).
std::string safetensors_bytes(const std::string& header, const std::string& data,
                              uint64_t length = UINT64_MAX) {
  if (length == UINT64_MAX) length = header.size();
  std::string out;
  for (int i = 0; i < 8; ++i) out += char(length >> (8 * i));
  return out + header + data;
}

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
         ",\"data_offsets\":" + offsets + "}";
}

std::string load_error(const std::string& bytes) {
  TempDir dir;
  std::string path = dir.write("bad.safetensors", bytes);
  std::string message = error_message<sp::ValueError>([&] { sp::load_safetensors(path); });
  std::string prefix = "[load_safetensors] '" + path + "': ";
  if (message.rfind(prefix, 0) != 0) return "unexpected message: " + message;
  return message.substr(prefix.size());
}

TEST(SafetensorsErrors, ShortFileAndHeaderLength) {
  EXPECT_EQ(load_error("abc"), "the file has 3 bytes, too few for the 8-byte header length");
  EXPECT_EQ(load_error(safetensors_bytes("{}", "", 100)),
            "the header length is 100 bytes, but only 2 bytes follow it");
  EXPECT_EQ(load_error(safetensors_bytes("{}", "", UINT64_MAX - 1)),
            "the header length is 18446744073709551614 bytes, but only 2 bytes follow it");
}

TEST(SafetensorsErrors, InvalidJson) {
  EXPECT_EQ(load_error(safetensors_bytes(R"({"a":{"dtype")", "")),
            "invalid JSON header at byte 13: expected ':'");
  EXPECT_EQ(load_error(safetensors_bytes(R"({"a":)", "")), "tensor 'a' must be a JSON object");
  EXPECT_EQ(load_error(safetensors_bytes("[]", "")), "invalid JSON header at byte 0: expected '{'");
  EXPECT_EQ(load_error(safetensors_bytes("{} x", "")),
            "invalid JSON header at byte 3: text after the header object");
  EXPECT_EQ(load_error(safetensors_bytes(R"({"a\q":{}})", "")),
            "invalid JSON header at byte 5: invalid escape '\\q'");
  EXPECT_EQ(load_error(safetensors_bytes("{\"a\xff\":{}}", "")), "the header is not valid UTF-8");
  EXPECT_EQ(load_error(safetensors_bytes("{" + entry("a", "U8", "[-1]", "[0,1]") + "}", "x")),
            "invalid JSON header at byte 28: expected a non-negative integer");
  EXPECT_EQ(load_error(safetensors_bytes("{" + entry("a", "U8", "[1.0]", "[0,1]") + "}", "x")),
            "invalid JSON header at byte 29: expected an integer, got a fraction or exponent");
}

TEST(SafetensorsErrors, BadEntries) {
  EXPECT_EQ(load_error(safetensors_bytes("{" + entry("a", "Q8", "[1]", "[0,1]") + "}", "x")),
            "tensor 'a' has the unknown dtype 'Q8'; expected one of BOOL, U8, I8, I16, U16, F16, "
            "BF16, I32, U32, F32, F64, I64, U64");
  EXPECT_EQ(load_error(safetensors_bytes(R"({"a":{"dtype":"U8","shape":[1]}})", "x")),
            "tensor 'a' has no 'data_offsets'; expected dtype, shape and data_offsets");
  EXPECT_EQ(load_error(safetensors_bytes(
                R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"foo":1}})", "x")),
            "tensor 'a' has the unknown field 'foo'; expected dtype, shape and data_offsets");
  EXPECT_EQ(load_error(safetensors_bytes("{" + entry("a", "U8", "[1]", "[0,1,2]") + "}", "x")),
            "tensor 'a' must have data_offsets [begin, end], got 3 numbers");
  std::string a = entry("a", "U8", "[1]", "[0,1]");
  EXPECT_EQ(load_error(safetensors_bytes("{" + a + "," + a + "}", "x")),
            "tensor 'a' appears twice");
  EXPECT_EQ(load_error(safetensors_bytes(R"({"__metadata__":{"a":1}})", "")),
            "'__metadata__' values must be strings, the value of 'a' is not");
  EXPECT_EQ(load_error(safetensors_bytes(R"({"a":[]})", "")), "tensor 'a' must be a JSON object");
}

TEST(SafetensorsErrors, ShapeAndOffsetsDisagree) {
  EXPECT_EQ(load_error(safetensors_bytes("{" + entry("w", "F32", "[2,3]", "[0,20]") + "}",
                                         std::string(20, 'x'))),
            "tensor 'w' of shape (2, 3) and dtype F32 needs 24 bytes, its data_offsets [0, 20] "
            "hold 20");
  EXPECT_EQ(load_error(safetensors_bytes("{" + entry("w", "U8", "[0]", "[2,1]") + "}", "xx")),
            "tensor 'w' has data_offsets [2, 1], end < begin");
  EXPECT_EQ(load_error(safetensors_bytes(
                "{" + entry("w", "U64", "[4294967296,4294967296]", "[0,0]") + "}", "")),
            "tensor 'w' has shape (4294967296, 4294967296), too large for any array");
}

TEST(SafetensorsErrors, OffsetsMustTileTheData) {
  EXPECT_EQ(load_error(safetensors_bytes("{" + entry("a", "U8", "[4]", "[0,4]") + "}", "xx")),
            "tensor 'a' has data_offsets [0, 4] beyond the 2 bytes of data after the header");
  EXPECT_EQ(load_error(safetensors_bytes("{" + entry("a", "U8", "[2]", "[0,2]") + "," +
                                             entry("b", "U8", "[2]", "[1,3]") + "}",
                                         "xxx")),
            "tensors 'a' [0, 2] and 'b' [1, 3] overlap");
  EXPECT_EQ(load_error(safetensors_bytes("{" + entry("a", "U8", "[1]", "[1,2]") + "}", "xx")),
            "no tensor holds bytes [0, 1) of the data");
  EXPECT_EQ(load_error(safetensors_bytes("{" + entry("a", "U8", "[1]", "[0,1]") + "}", "xx")),
            "the tensors hold 1 bytes of data, but 2 bytes follow the header");
}

TEST(SafetensorsErrors, OffsetsMayListTheDataInAnyOrder) {
  TempDir dir;
  std::string path = dir.write("ok.safetensors",
                               safetensors_bytes("  {" + entry("a", "U8", "[1]", "[1,2]") + ",\n" +
                                                     entry("e", "F32", "[0]", "[0,0]") + "," +
                                                     entry("b", "U8", "[1]", "[0,1]") + "} ",
                                                 "yz"));
  NamedArrays got = sp::load_safetensors(path);
  EXPECT_EQ(names_of(got), (std::vector<std::string>{"e", "b", "a"}));
  EXPECT_EQ(*static_cast<const char*>(sp::host_data(got[1].second, "test")), 'y');
  EXPECT_EQ(*static_cast<const char*>(sp::host_data(got[2].second, "test")), 'z');
}

TEST(SafetensorsErrors, SavingChecksNames) {
  TempDir dir;
  std::string path = dir.file("x.safetensors");
  Array one = sp::ones({2});
  EXPECT_EQ(error_message<sp::ValueError>([&] {
              sp::save_safetensors(path, {{"a", one}, {"a", one}});
            }),
            "[save_safetensors] the name 'a' is used twice");
  EXPECT_EQ(error_message<sp::ValueError>([&] {
              sp::save_safetensors(path, {{"__metadata__", one}});
            }),
            "[save_safetensors] the name '__metadata__' is reserved for the metadata");
  EXPECT_EQ(error_message<sp::ValueError>([&] {
              sp::save_safetensors(path, {{"h", Array()}});
            }),
            "[save_safetensors] tensor 'h' is an empty Array handle");
  EXPECT_EQ(error_message<sp::ValueError>([&] {
              sp::save_safetensors(path, {{"\xff", one}});
            }),
            "[save_safetensors] tensor names must be UTF-8, got '\xff'");
  EXPECT_FALSE(fs::exists(path));
  EXPECT_THROW(sp::load_safetensors(dir.file("missing.safetensors")), sp::IOError);
}

}  // namespace

// load_fashion_mnist: the Debian package's files load with the counts, labels and pixels NumPy
// reads from them (tools/goldens/gen_fashion_mnist.py), scaled as jnp's x / 255 scales them;
// a missing or damaged file names the package that provides it.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "data/golden_lines.h"
#include "data/idx_files.h"
#include "support/golden.h"

#include <cmath>
#include <filesystem>

namespace sp = spmd;
using sp::Array;
using spmd_test::error_message;
using spmd_test::golden_line;
using spmd_test::gzip_stored;
using spmd_test::idx_header;
using spmd_test::TempDir;
using spmd_test::write_file;

namespace {

constexpr const char* kDebianDir = "/usr/share/datasets/fashion-mnist";
constexpr const char* kGolden = "data/fashion_mnist.txt";

void expect_matches_numpy(const std::string& split) {
  SCOPED_TRACE(split);
  if (!std::filesystem::exists(kDebianDir))
    GTEST_SKIP() << kDebianDir << " is missing (make deps installs dataset-fashion-mnist)";
  sp::data::Dataset d = sp::data::load_fashion_mnist(split);
  const int64_t n = golden_line<int64_t>(kGolden, split + ".size").at(0);
  EXPECT_EQ(d.size(), n);
  EXPECT_EQ(d.images.shape(), sp::Shape({n, 784}));
  EXPECT_EQ(d.images.dtype(), sp::float32);
  EXPECT_EQ(d.labels.shape(), sp::Shape({n}));
  EXPECT_EQ(d.labels.dtype(), sp::int32);

  const std::vector<int32_t> labels = d.labels.to_vector<int32_t>();
  const std::vector<int32_t> first(labels.begin(), labels.begin() + 10);
  EXPECT_EQ(first, golden_line<int32_t>(kGolden, split + ".first_labels"));
  std::vector<int64_t> histogram(10, 0);
  for (int32_t label : labels) {
    ASSERT_TRUE(label >= 0 && label < 10) << label;
    ++histogram[size_t(label)];
  }
  EXPECT_EQ(histogram, golden_line<int64_t>(kGolden, split + ".label_histogram"));

  const std::vector<int64_t> sums = golden_line<int64_t>(kGolden, split + ".pixel_sums");
  for (int i = 0; i < 3; ++i) {
    int64_t sum = 0;
    for (float v : d.images[i].to_vector<float>()) sum += std::lround(v * 255.0f);
    EXPECT_EQ(sum, sums.at(size_t(i))) << "image " << i;
  }
  const std::vector<float> image0 = d.images[0].to_vector<float>();
  const std::vector<int> index = golden_line<int>(kGolden, split + ".image0_pixel_index");
  const std::vector<double> value = golden_line<double>(kGolden, split + ".image0_pixel_value");
  ASSERT_EQ(index.size(), value.size());
  for (size_t k = 0; k < index.size(); ++k)
    EXPECT_EQ(image0.at(size_t(index[k])), float(value[k])) << "pixel " << index[k];
}

TEST(FashionMnist, TrainSplitMatchesNumpy) {
  expect_matches_numpy("train");
}

TEST(FashionMnist, TestSplitMatchesNumpy) {
  expect_matches_numpy("test");
}

// A dataset directory of gzip'd IDX files holding `images` (uint8 of shape `image_dims`) and
// `labels`, under the file names of `split`.
void write_split(const TempDir& dir, const std::string& prefix,
                 const std::vector<uint32_t>& image_dims, const std::string& images,
                 const std::string& labels) {
  write_file(dir.file(prefix + "-images-idx3-ubyte.gz"),
             gzip_stored(idx_header(0x08, image_dims) + images));
  write_file(dir.file(prefix + "-labels-idx1-ubyte.gz"),
             gzip_stored(idx_header(0x08, {uint32_t(labels.size())}) + labels));
}

TEST(FashionMnist, ScalesPixelsByOneOver255) {
  TempDir dir;
  std::string images(2 * 784, '\0');
  images[0] = '\x01';
  images[1] = '\xff';
  images[784 + 783] = '\x80';
  write_split(dir, "t10k", {2, 28, 28}, images, std::string("\x09\x00", 2));
  sp::data::Dataset d = sp::data::load_fashion_mnist("test", dir.path());
  const std::vector<float> pixels = d.images.to_vector<float>();
  EXPECT_EQ(pixels[0], 1.0f / 255.0f);
  EXPECT_EQ(pixels[1], 1.0f);
  EXPECT_EQ(pixels[2], 0.0f);
  EXPECT_EQ(pixels[784 + 783], 128.0f / 255.0f);
  EXPECT_EQ(d.labels.to_vector<int32_t>(), (std::vector<int32_t>{9, 0}));
}

std::string load_error(const std::string& split, const std::string& dir) {
  std::string message =
      error_message<sp::ValueError>([&] { sp::data::load_fashion_mnist(split, dir); });
  const size_t at = message.find(dir);
  if (at != std::string::npos) message.replace(at, dir.size(), "DIR");
  return message;
}

const std::string kReinstall =
    "; reinstall Debian's dataset-fashion-mnist package (apt-get install --reinstall "
    "dataset-fashion-mnist)";

TEST(FashionMnistErrors, MissingDirectoryNamesThePackage) {
  TempDir dir;
  EXPECT_EQ(load_error("train", dir.path()),
            "[load_fashion_mnist] 'DIR/train-images-idx3-ubyte.gz' not found: install Debian's "
            "dataset-fashion-mnist package (`make deps` does)");
}

TEST(FashionMnistErrors, BadSplitName) {
  EXPECT_EQ(load_error("validation", "/nonexistent"),
            "[load_fashion_mnist] split must be \"train\" or \"test\", got \"validation\"");
}

TEST(FashionMnistErrors, TruncatedFileIsCorrupt) {
  TempDir dir;
  write_split(dir, "train", {2, 28, 28}, std::string(784, '\0'), "\x01\x02");
  EXPECT_EQ(load_error("train", dir.path()),
            "[load_fashion_mnist] 'DIR/train-images-idx3-ubyte.gz' is corrupt: truncated: the "
            "header's shape (2, 28, 28) of uint8 needs 1568 bytes of data, the file has 784" +
                kReinstall);
}

TEST(FashionMnistErrors, WrongMagicIsCorrupt) {
  TempDir dir;
  write_split(dir, "t10k", {1, 28, 28}, std::string(784, '\0'), "\x01");
  write_file(dir.file("t10k-labels-idx1-ubyte.gz"), gzip_stored("\x1f\x8b\x08\x01 not idx"));
  EXPECT_EQ(load_error("test", dir.path()),
            "[load_fashion_mnist] 'DIR/t10k-labels-idx1-ubyte.gz' is corrupt: not an IDX file: "
            "expected a magic number 0x0000TTNN (two zero bytes, the type code TT, the number of "
            "dimensions NN), got 0x1f8b0801" +
                kReinstall);
}

TEST(FashionMnistErrors, WrongImageShapeIsCorrupt) {
  TempDir dir;
  write_split(dir, "train", {1, 27, 28}, std::string(27 * 28, '\0'), "\x01");
  EXPECT_EQ(load_error("train", dir.path()),
            "[load_fashion_mnist] 'DIR/train-images-idx3-ubyte.gz' is corrupt: expected uint8 of "
            "shape (n, 28, 28), got uint8 of shape (1, 27, 28)" +
                kReinstall);
}

TEST(FashionMnistErrors, ImageAndLabelCountsMustAgree) {
  TempDir dir;
  write_split(dir, "train", {2, 28, 28}, std::string(2 * 784, '\0'), "\x01");
  EXPECT_EQ(load_error("train", dir.path()),
            "[load_fashion_mnist] the train split has 2 images but 1 labels" + kReinstall);
}

TEST(FashionMnistErrors, LabelsOutOfRange) {
  TempDir dir;
  write_split(dir, "train", {2, 28, 28}, std::string(2 * 784, '\0'), "\x01\x0a");
  EXPECT_EQ(load_error("train", dir.path()),
            "[load_fashion_mnist] the train labels must be in [0, 10), got 10" + kReinstall);
}

}  // namespace

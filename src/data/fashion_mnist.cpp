// Fashion-MNIST from the gzip'd IDX files of Debian's dataset-fashion-mnist package. A missing or
// damaged file is reported with the package that provides it, since that is the fix.
#include <spmd/data.h>
#include <spmd/error.h>
#include <spmd/ops.h>

#include <filesystem>

namespace spmd::data {
namespace {

constexpr int64_t kImageSide = 28;
constexpr int64_t kNumClasses = 10;
constexpr const char* kReinstall =
    "reinstall Debian's dataset-fashion-mnist package (apt-get install --reinstall "
    "dataset-fashion-mnist)";

[[noreturn]] void fail(const std::string& message) {
  throw ValueError("[load_fashion_mnist] " + message);
}

std::string file_prefix(std::string_view split) {
  if (split == "train") return "train";
  if (split == "test") return "t10k";
  fail("split must be \"train\" or \"test\", got \"" + std::string(split) + "\"");
}

// The IDX file at `path`, uint8 with `ndim` dims of which the trailing ones are `trailing`.
Array read_file(const std::string& path, int ndim, const Shape& trailing) {
  if (!std::filesystem::exists(path))
    fail("'" + path +
         "' not found: install Debian's dataset-fashion-mnist package (`make deps` does)");
  Array x;
  try {
    x = read_idx(path);
  } catch (const ValueError& e) {
    // read_idx's message without its own "[read_idx] '<path>': ", which this one repeats.
    std::string what = e.what();
    const std::string own_prefix = "[read_idx] '" + path + "': ";
    if (what.starts_with(own_prefix)) what.erase(0, own_prefix.size());
    fail("'" + path + "' is corrupt: " + what + "; " + kReinstall);
  }
  bool trailing_ok = x.ndim() == ndim;
  for (int d = 1; trailing_ok && d < ndim; ++d) trailing_ok = x.shape()[d] == trailing[d - 1];
  if (x.dtype() != DType::uint8 || !trailing_ok)
    fail("'" + path + "' is corrupt: expected uint8 of shape (n" +
         (ndim == 1 ? std::string(",)") : ", " + trailing.str().substr(1)) + ", got " +
         std::string(dtype_name(x.dtype())) + " of shape " + x.shape().str() + "; " + kReinstall);
  return x;
}

}  // namespace

Dataset load_fashion_mnist(std::string_view split, const std::string& dir) {
  const std::string prefix = dir + "/" + file_prefix(split);
  Array images = read_file(prefix + "-images-idx3-ubyte.gz", 3, Shape{kImageSide, kImageSide});
  Array labels = read_file(prefix + "-labels-idx1-ubyte.gz", 1, Shape{});
  if (images.shape()[0] != labels.shape()[0])
    fail("the " + std::string(split) + " split has " + std::to_string(images.shape()[0]) +
         " images but " + std::to_string(labels.shape()[0]) + " labels; " + kReinstall);
  if (labels.size() > 0 && labels.max().item<int>() >= kNumClasses)
    fail("the " + std::string(split) + " labels must be in [0, 10), got " +
         std::to_string(labels.max().item<int>()) + "; " + kReinstall);
  const int64_t n = images.shape()[0];
  return {images.reshape({n, kImageSide * kImageSide}).astype(float32) / 255.0f,
          labels.astype(int32)};
}

}  // namespace spmd::data

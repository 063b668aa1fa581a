// Training data on the host: read_idx reads IDX files (the format of MNIST and Fashion-MNIST),
// sp::data loads Fashion-MNIST and walks an epoch in shuffled batches, in the order a JAX loop
// gets from jax.random.permutation with the same key.
#pragma once

#include <spmd/array.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace spmd {

// An IDX file, gzip-compressed or raw: a big-endian magic number 0x0000TTNN (element type TT,
// NN dims), NN big-endian uint32 dims, then the elements big-endian in row-major order. Returns
// an array of the element type (0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32,
// 0x0E float64) and the header's shape. A missing file, a bad magic number or type code, a shape
// no array can have, data shorter or longer than the shape and damaged gzip data raise
// ValueError "[read_idx] '<path>': ...". Bytes after a complete gzip stream are ignored, as
// zlib's gzread does.
Array read_idx(const std::string& path);

namespace data {

// Examples stacked along axis 0: images [n, ...] and labels [n].
struct Dataset {
  Array images;
  Array labels;
  int64_t size() const { return images.shape()[0]; }
};

// A split of Fashion-MNIST, "train" (60000 examples) or "test" (10000), read from the gzip'd IDX
// files Debian's dataset-fashion-mnist package installs in `dir`: images float32 [n, 784] scaled
// to [0, 1] as jnp.asarray(x, jnp.float32) / 255 computes it (within 1 ulp of NumPy's x / 255),
// labels int32 [n] in [0, 10). A missing or damaged file raises ValueError naming the package.
Dataset load_fashion_mnist(std::string_view split,
                           const std::string& dir = "/usr/share/datasets/fashion-mnist");

// One epoch of a Dataset in batches of `batch_size`: a range of (images, labels) pairs, each
// gathered with one take per array. Batches are uncommitted host arrays; device_put them where
// the step runs.
//
// Shuffled (training): epoch e visits the examples in the order
//   jax.random.permutation(jax.random.fold_in(key, e), n)
// so a JAX loop with the same key sees the same batches, and every epoch differs. drop_last
// (the default here) skips the final partial batch, so every step has the same shapes and a
// jit'd step compiles once.
//
//   for (uint32_t epoch = 0; epoch < epochs; ++epoch)
//     for (auto [x, y] : sp::data::Batches(train, 1024, key, epoch))
//       loss = step(sp::device_put(x, batch_sharding), sp::device_put(y, label_sharding));
//
// In order (evaluation): Batches(test, 1000) visits examples 0..n-1 and keeps the final partial
// batch unless drop_last is set, so every example counts.
class Batches {
 public:
  Batches(Dataset data, int64_t batch_size, const Array& key, uint32_t epoch,
          bool drop_last = true);
  Batches(Dataset data, int64_t batch_size, bool drop_last = false);

  int64_t num_batches() const;
  // Batch i (0 <= i < num_batches()); raises IndexError otherwise.
  std::pair<Array, Array> operator[](int64_t i) const;

  class iterator {
   public:
    using value_type = std::pair<Array, Array>;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    iterator(const Batches* batches, int64_t index) : batches_(batches), index_(index) {}
    value_type operator*() const { return (*batches_)[index_]; }
    iterator& operator++() {
      ++index_;
      return *this;
    }
    iterator operator++(int) {
      iterator before = *this;
      ++index_;
      return before;
    }
    bool operator==(const iterator& other) const { return index_ == other.index_; }

   private:
    const Batches* batches_ = nullptr;
    int64_t index_ = 0;
  };
  iterator begin() const { return {this, 0}; }
  iterator end() const { return {this, num_batches()}; }

 private:
  Batches(Dataset data, int64_t batch_size, std::vector<int32_t> order, bool drop_last);
  Dataset data_;
  int64_t batch_size_;
  std::vector<int32_t> order_;  // the epoch's example indices, in visiting order
  bool drop_last_;
};

}  // namespace data
}  // namespace spmd

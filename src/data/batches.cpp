// Batches: one epoch of a Dataset, shuffled as a JAX training loop shuffles it. The epoch's order
// is computed once on the host; each batch is one take of its slice of the order per array.
#include <spmd/data.h>
#include <spmd/error.h>
#include <spmd/ops.h>
#include <spmd/random.h>

#include <algorithm>
#include <climits>
#include <numeric>

namespace spmd::data {
namespace {

// The number of examples, after checking that images and labels agree on it.
int64_t checked_size(const Dataset& data, int64_t batch_size) {
  if (!data.images.valid() || !data.labels.valid())
    throw ValueError("[Batches] the dataset's images and labels must both be arrays");
  if (data.images.ndim() == 0 || data.labels.ndim() == 0)
    throw ValueError("[Batches] images and labels must have an example axis, got shapes " +
                     data.images.shape().str() + " and " + data.labels.shape().str());
  if (data.images.shape()[0] != data.labels.shape()[0])
    throw ValueError("[Batches] images and labels must have the same number of examples, got " +
                     std::to_string(data.images.shape()[0]) + " and " +
                     std::to_string(data.labels.shape()[0]));
  if (batch_size <= 0)
    throw ValueError("[Batches] batch_size must be positive, got " + std::to_string(batch_size));
  if (data.size() > INT32_MAX)
    throw ValueError("[Batches] at most 2^31 - 1 examples, got " + std::to_string(data.size()));
  return data.size();
}

std::vector<int32_t> shuffled_order(const Dataset& data, int64_t batch_size, const Array& key,
                                    uint32_t epoch) {
  const int64_t n = checked_size(data, batch_size);
  return random::permutation(random::fold_in(key, epoch), n).to_vector<int32_t>();
}

std::vector<int32_t> in_order(const Dataset& data, int64_t batch_size) {
  std::vector<int32_t> order(size_t(checked_size(data, batch_size)));
  std::iota(order.begin(), order.end(), 0);
  return order;
}

}  // namespace

Batches::Batches(Dataset data, int64_t batch_size, const Array& key, uint32_t epoch, bool drop_last)
    : Batches(data, batch_size, shuffled_order(data, batch_size, key, epoch), drop_last) {}

Batches::Batches(Dataset data, int64_t batch_size, bool drop_last)
    : Batches(data, batch_size, in_order(data, batch_size), drop_last) {}

Batches::Batches(Dataset data, int64_t batch_size, std::vector<int32_t> order, bool drop_last)
    : data_(std::move(data)),
      batch_size_(batch_size),
      order_(std::move(order)),
      drop_last_(drop_last) {}

int64_t Batches::num_batches() const {
  const auto n = int64_t(order_.size());
  // Not (n + batch_size - 1) / batch_size, which overflows for a batch_size near INT64_MAX.
  return n / batch_size_ + (!drop_last_ && n % batch_size_ != 0);
}

std::pair<Array, Array> Batches::operator[](int64_t i) const {
  if (i < 0 || i >= num_batches())
    throw IndexError("[Batches] batch index " + std::to_string(i) + " is out of range for " +
                     std::to_string(num_batches()) + " batches");
  const auto first = order_.begin() + i * batch_size_;
  const auto last = order_.begin() + std::min(int64_t(order_.size()), (i + 1) * batch_size_);
  Array indices = array(std::vector<int32_t>(first, last));
  return {take(data_.images, indices, 0), take(data_.labels, indices, 0)};
}

}  // namespace spmd::data

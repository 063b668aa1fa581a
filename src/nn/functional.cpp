// torch.nn.functional's activations and losses, computed as jax.nn and optax compute them.
#include <spmd/error.h>
#include <spmd/nn.h>

#include <algorithm>
#include <string>

namespace spmd::nn::functional {

namespace {

Array reduce(const Array& losses, Reduction reduction) {
  switch (reduction) {
    case Reduction::mean:
      return mean(losses);
    case Reduction::sum:
      return sum(losses);
    case Reduction::none:
      break;
  }
  return losses;
}

void check_axis(const char* api, const Array& x, int axis) {
  if (axis < -x.ndim() || axis >= x.ndim())
    throw AxisError(std::string("[") + api + "] axis " + std::to_string(axis) +
                    " is out of bounds for array of dimension " + std::to_string(x.ndim()));
}

// Logits [..., classes] and labels [...].
void check_labels(const char* api, const Array& logits, const Array& labels) {
  bool fits = logits.ndim() > 0 && labels.ndim() == logits.ndim() - 1 &&
              std::equal(labels.shape().begin(), labels.shape().end(), logits.shape().begin());
  if (!fits)
    throw ShapeError(std::string("[") + api +
                     "] logits of shape (..., classes) need labels of shape (...), got logits " +
                     logits.shape().str() + " and labels " + labels.shape().str());
}

// x minus its (stop-gradient) max along `axis`; an empty axis has no max and nothing to shift,
// so x stays as it is (JAX's max there starts from -inf and gives an empty result too).
Array shifted_by_max(const Array& x, int axis) {
  if (x.shape()[axis < 0 ? axis + x.ndim() : axis] == 0) return x;
  return x - stop_gradient(max(x, {axis}, true));
}

}  // namespace

Array log_softmax(const Array& x, int axis) {
  check_axis("log_softmax", x, axis);
  Array shifted = shifted_by_max(x, axis);
  return shifted - log(sum(exp(shifted), {axis}, true));
}

Array softmax(const Array& x, int axis) {
  check_axis("softmax", x, axis);
  Array unnormalized = exp(shifted_by_max(x, axis));
  return unnormalized / sum(unnormalized, {axis}, true);
}

Array mse_loss(const Array& input, const Array& target, Reduction reduction) {
  if (input.shape() != target.shape())
    throw ShapeError("[mse_loss] input and target must have the same shape, got " +
                     input.shape().str() + " and " + target.shape().str());
  return reduce(square(input - target), reduction);
}

// The label's logit is picked by a one-hot select rather than a gather: elementwise work that
// shards along the batch like the logits do. A select, not a product with the one-hot, so that
// a -inf logit of another class (a masked class) adds nothing instead of -inf * 0 = NaN.
Array cross_entropy(const Array& logits, const Array& labels, Reduction reduction) {
  if (!is_integer(labels.dtype()))
    throw TypeError("[cross_entropy] labels must be class indices of an integer dtype, got " +
                    std::string(dtype_name(labels.dtype())));
  check_labels("cross_entropy", logits, labels);
  int64_t classes = logits.shape()[logits.ndim() - 1];
  Array is_label = one_hot(labels, classes, bool_);
  Array label_logits = sum(where(is_label, logits, zeros_like(logits)), {-1});
  return reduce(logsumexp(logits, {-1}) - label_logits, reduction);
}

Array accuracy(const Array& logits, const Array& labels) {
  check_labels("accuracy", logits, labels);
  return mean(astype(argmax(logits, -1) == labels, float32));
}

}  // namespace spmd::nn::functional

// The losses and activations against JAX: jax.nn.log_softmax / softmax, torch's mse_loss,
// optax's integer-label cross entropy (also at logits near 1e4) and its gradient, accuracy.
#include <spmd/spmd.h>

#include "nn/seed_model.h"
#include "support/support.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace sp = spmd;
namespace nn = spmd::nn;
namespace F = spmd::nn::functional;
using sp::Array;
using spmd_test::arrays_close;
using spmd_test::error_message;
using spmd_test::nn_golden;

namespace {
constexpr double kRtol = 1e-6, kAtol = 1e-6;
}

TEST(NnFunctional, LogSoftmaxAndSoftmaxMatchJax) {
  Array logits = nn_golden("cls.logits");
  EXPECT_TRUE(arrays_close(F::log_softmax(logits), nn_golden("cls.log_softmax"), kRtol, kAtol));
  EXPECT_TRUE(
      arrays_close(nn::log_softmax(logits, 0), nn_golden("cls.log_softmax_axis0"), kRtol, kAtol));
  EXPECT_TRUE(arrays_close(nn::softmax(logits), nn_golden("cls.softmax"), kRtol, kAtol));
  EXPECT_EQ(error_message<sp::AxisError>([&] { nn::softmax(logits, 2); }),
            "[softmax] axis 2 is out of bounds for array of dimension 2");
}

TEST(NnFunctional, CrossEntropyMatchesOptaxAndItsGradient) {
  Array logits = nn_golden("cls.logits"), labels = nn_golden("cls.labels");
  EXPECT_TRUE(arrays_close(nn::cross_entropy(logits, labels), nn_golden("cls.cross_entropy"), kRtol,
                           kAtol));
  EXPECT_TRUE(arrays_close(nn::CrossEntropyLoss{nn::Reduction::none}(logits, labels),
                           nn_golden("cls.cross_entropy_none"), kRtol, kAtol));
  Array grad = sp::grad([&](const Array& l) { return nn::cross_entropy(l, labels); })(logits);
  EXPECT_TRUE(arrays_close(grad, nn_golden("cls.cross_entropy_grad"), kRtol, kAtol));
  EXPECT_TRUE(arrays_close(nn::accuracy(logits, labels), nn_golden("cls.accuracy"), 0, 0));
}

// exp(1e4) overflows float32: only the shifted forms stay finite.
TEST(NnFunctional, LargeLogitsStayFinite) {
  Array big = nn_golden("cls.big_logits"), labels = nn_golden("cls.labels");
  EXPECT_TRUE(arrays_close(nn::log_softmax(big), nn_golden("cls.big_log_softmax"), kRtol, kAtol));
  EXPECT_TRUE(arrays_close(nn::cross_entropy(big, labels), nn_golden("cls.big_cross_entropy"),
                           kRtol, kAtol));
}

// A -inf logit masks its class: optax's and torch's losses ignore it unless it is the label's
// (then +inf). A one-hot product would compute -inf * 0 = NaN. Exact values: row 0 is
// log(e^0) - 0 = 0, row 1 log(e^1 + e^2) - 2 = log1p(e^-1).
TEST(NnFunctional, CrossEntropyIgnoresMaskedClasses) {
  const float inf = std::numeric_limits<float>::infinity();
  Array logits = sp::array({{0.0f, -inf}, {1.0f, 2.0f}});
  Array labels = sp::array<int32_t>({0, 1});
  const float row1 = float(std::log1p(std::exp(-1.0)));
  EXPECT_TRUE(arrays_close(nn::cross_entropy(logits, labels, nn::Reduction::none),
                           sp::array({0.0f, row1}), kRtol, kAtol));
  EXPECT_TRUE(arrays_close(nn::cross_entropy(logits, labels), sp::array(row1 / 2), kRtol, kAtol));
  Array grad = sp::grad([&](const Array& l) { return nn::cross_entropy(l, labels); })(logits);
  const float p = float(1 / (1 + std::exp(1.0)));  // softmax of the 1 in row 1
  EXPECT_TRUE(arrays_close(grad, sp::array({{0.0f, 0.0f}, {p / 2, -p / 2}}), kRtol, kAtol));
  EXPECT_EQ(nn::cross_entropy(logits, sp::array<int32_t>({1, 1}), nn::Reduction::none)
                .to_vector<float>()[0],
            inf);
}

// An empty class axis: JAX's log_softmax and softmax give an empty result (its max starts from
// -inf), where a max over the axis would be an error.
TEST(NnFunctional, SoftmaxOverAnEmptyAxisIsEmpty) {
  for (Array y : {nn::log_softmax(sp::zeros({2, 0})), nn::softmax(sp::zeros({2, 0})),
                  nn::log_softmax(sp::zeros({0, 3}), 0)}) {
    EXPECT_EQ(y.dtype(), sp::float32);
    EXPECT_EQ(y.size(), 0);
  }
  EXPECT_EQ(nn::softmax(sp::zeros({2, 0})).shape(), sp::Shape({2, 0}));
}

TEST(NnFunctional, MseLossIsTorchsMeanOverEveryElement) {
  Array input = sp::array<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Array target = sp::array<float>({1, 0, 3, 1, 5, 2}, {2, 3});
  // Squared errors 0 4 0 9 0 16.
  EXPECT_EQ(nn::mse_loss(input, target).item<float>(), 29.0f / 6.0f);
  EXPECT_EQ(nn::MSELoss{}(input, target).item<float>(), 29.0f / 6.0f);
  EXPECT_EQ(nn::mse_loss(input, target, nn::Reduction::sum).item<float>(), 29.0f);
  EXPECT_EQ(nn::mse_loss(input, target, nn::Reduction::none).shape(), (sp::Shape{2, 3}));
  EXPECT_EQ(error_message<sp::ShapeError>([&] { nn::mse_loss(input, target[0]); }),
            "[mse_loss] input and target must have the same shape, got (2, 3) and (3,)");
}

TEST(NnFunctional, ClassificationChecksLabels) {
  Array logits = sp::zeros({4, 3});
  EXPECT_EQ(error_message<sp::TypeError>([&] { nn::cross_entropy(logits, sp::zeros({4})); }),
            "[cross_entropy] labels must be class indices of an integer dtype, got float32");
  EXPECT_EQ(error_message<sp::ShapeError>([&] { nn::accuracy(logits, sp::arange(3)); }),
            "[accuracy] logits of shape (..., classes) need labels of shape (...), got logits "
            "(4, 3) and labels (3,)");
  Array labels = sp::array<int32_t>({0, 2, 1, 2});
  Array onehot = nn::one_hot(labels, 3);
  EXPECT_EQ(nn::accuracy(onehot, labels).item<float>(), 1.0f);
  EXPECT_EQ(nn::accuracy(onehot, sp::array<int32_t>({0, 0, 0, 2})).item<float>(), 0.5f);
}

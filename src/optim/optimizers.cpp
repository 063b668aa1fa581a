// sgd, adam and adamw: optax's chains (trace or scale_by_adam, add_decayed_weights,
// scale_by_learning_rate) with each float32 operation in optax's order, so results agree to the
// last bits. Hyperparameters are doubles, as Python floats are; each enters the arithmetic as a
// weakly typed scalar, rounded once to the params' float type.
#include <spmd/error.h>
#include <spmd/ops.h>
#include <spmd/optim.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <sstream>
#include <string>

namespace spmd::optim {

namespace {

using optim_detail::Core;

void require(bool ok, const char* api, const std::string& what, double got) {
  if (ok) return;
  std::ostringstream text;
  text << "[" << api << "] " << what << ", got " << got;
  throw ValueError(text.str());
}

void require_learning_rate(const char* api, double lr) {
  require(std::isfinite(lr) && lr >= 0, api, "learning_rate must be finite and >= 0", lr);
}

void require_decay_rate(const char* api, const char* name, double b) {
  require(b >= 0 && b < 1, api, std::string(name) + " must be in [0, 1)", b);
}

// Slots "0.<moment>.<param>" for each moment, after "0.count" when counted.
std::vector<Core::Slot> moment_slots(bool counted, std::initializer_list<const char*> moments,
                                     const std::vector<std::string>& names) {
  std::vector<Core::Slot> out;
  if (counted) out.push_back({"0.count", -1});
  for (const char* m : moments)
    for (size_t i = 0; i < names.size(); ++i) {
      std::string prefix = std::string("0.") + m;
      out.push_back({names[i].empty() ? prefix : prefix + "." + names[i], int(i)});
    }
  return out;
}

// optax.sgd: an optional trace (momentum), then scale_by_learning_rate.
class Sgd final : public Core {
 public:
  Sgd(double lr, double momentum, bool nesterov)
      : lr_(lr), momentum_(momentum), nesterov_(nesterov) {}

 protected:
  std::vector<Slot> layout(const std::vector<std::string>& names) const override {
    if (momentum_ == 0) return {};
    return moment_slots(false, {"trace"}, names);
  }

  std::pair<std::vector<Array>, std::vector<Array>> step(std::span<const Array> grads,
                                                         std::span<const Array> state,
                                                         std::span<const Array>) const override {
    std::vector<Array> updates, next;
    for (size_t i = 0; i < grads.size(); ++i) {
      Array u = grads[i];
      if (momentum_ != 0) {
        Array trace = grads[i] + Array(momentum_) * state[i];
        u = nesterov_ ? grads[i] + Array(momentum_) * trace : trace;
        next.push_back(trace);
      }
      updates.push_back(Array(-lr_) * u);
    }
    return {std::move(updates), std::move(next)};
  }

 private:
  double lr_, momentum_;
  bool nesterov_;
};

// A moment divided by its bias correction elementwise. optax divides inside a jit over the whole
// tree, where XLA keeps a true division when the correction is shared by several leaves (the
// usual case) rather than multiplying by its reciprocal as it does for a single divisor.
Array bias_corrected(const Array& moment, const Array& correction) {
  return moment / broadcast_to(correction, moment.shape());
}

// optax.adam and optax.adamw: scale_by_adam, add_decayed_weights when weight_decay != 0, then
// scale_by_learning_rate.
class Adam final : public Core {
 public:
  Adam(double lr, double b1, double b2, double eps, double weight_decay)
      : lr_(lr), b1_(b1), b2_(b2), eps_(eps), weight_decay_(weight_decay) {}

 protected:
  std::vector<Slot> layout(const std::vector<std::string>& names) const override {
    return moment_slots(true, {"mu", "nu"}, names);
  }

  std::pair<std::vector<Array>, std::vector<Array>> step(
      std::span<const Array> grads, std::span<const Array> state,
      std::span<const Array> params) const override {
    const size_t n = grads.size();
    // optax's safe_increment: the count stops at int32's maximum instead of wrapping.
    const Array count = state[0];
    const Array max_count = full(Shape{}, std::numeric_limits<int32_t>::max(), int32);
    Array next_count = where(less(count, max_count), count + Array(1), max_count);
    Array correction1 = Array(1) - power(Array(b1_), next_count);
    Array correction2 = Array(1) - power(Array(b2_), next_count);
    std::vector<Array> updates, next_mu, next_nu;
    for (size_t i = 0; i < n; ++i) {
      const Array& g = grads[i];
      Array mu = Array(1 - b1_) * g + Array(b1_) * state[1 + i];
      Array nu = Array(1 - b2_) * (g * g) + Array(b2_) * state[1 + n + i];
      Array u =
          bias_corrected(mu, correction1) / (sqrt(bias_corrected(nu, correction2)) + Array(eps_));
      if (weight_decay_ != 0) u = u + Array(weight_decay_) * params[i];
      updates.push_back(Array(-lr_) * u);
      next_mu.push_back(mu);
      next_nu.push_back(nu);
    }
    std::vector<Array> next{next_count};
    next.insert(next.end(), next_mu.begin(), next_mu.end());
    next.insert(next.end(), next_nu.begin(), next_nu.end());
    return {std::move(updates), std::move(next)};
  }

 private:
  double lr_, b1_, b2_, eps_, weight_decay_;
};

void require_adam(const char* api, double lr, double b1, double b2, double eps) {
  require_learning_rate(api, lr);
  require_decay_rate(api, "b1", b1);
  require_decay_rate(api, "b2", b2);
  require(std::isfinite(eps) && eps >= 0, api, "eps must be finite and >= 0", eps);
}

}  // namespace

Optimizer sgd(double learning_rate, double momentum, bool nesterov) {
  require_learning_rate("optim.sgd", learning_rate);
  require(std::isfinite(momentum) && momentum >= 0, "optim.sgd", "momentum must be finite and >= 0",
          momentum);
  if (nesterov && momentum == 0)
    throw ValueError("[optim.sgd] nesterov needs a momentum, got momentum 0");
  return Optimizer(std::make_shared<Sgd>(learning_rate, momentum, nesterov));
}

Optimizer adam(double learning_rate, double b1, double b2, double eps) {
  require_adam("optim.adam", learning_rate, b1, b2, eps);
  return Optimizer(std::make_shared<Adam>(learning_rate, b1, b2, eps, 0.0));
}

Optimizer adamw(double learning_rate, double b1, double b2, double eps, double weight_decay) {
  require_adam("optim.adamw", learning_rate, b1, b2, eps);
  require(std::isfinite(weight_decay) && weight_decay >= 0, "optim.adamw",
          "weight_decay must be finite and >= 0", weight_decay);
  return Optimizer(std::make_shared<Adam>(learning_rate, b1, b2, eps, weight_decay));
}

}  // namespace spmd::optim

// sgd, adam and adamw: optax's chains (trace or scale_by_adam, add_decayed_weights,
// scale_by_learning_rate) with each float32 operation in optax's order, so results agree to the
// last bits. Hyperparameters are doubles, as Python floats are; each enters the arithmetic as a
// weakly typed scalar, rounded once to the params' float type.
#include <spmd/error.h>
#include <spmd/lax.h>
#include <spmd/ops.h>
#include <spmd/optim.h>

#include "ops/op_util.h"

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

void require_learning_rate(const char* api, const LearningRate& lr) {
  if (lr.scheduled()) return;
  require(std::isfinite(lr.value()) && lr.value() >= 0, api,
          "learning_rate must be finite and >= 0", lr.value());
}

// optax's numerics.safe_increment: the count stops at int32's maximum instead of wrapping.
Array safe_increment(const Array& count) {
  const Array max_count = full(Shape{}, std::numeric_limits<int32_t>::max(), int32);
  return where(less(count, max_count), count + Array(1), max_count);
}

// optax's scale_by_learning_rate, the last link of every chain here: a constant rate scales by
// -lr (a weakly typed scalar); a schedule is scale_by_schedule, which keeps its own count (the
// state's last leaf) and scales by -schedule(count) in the updates' dtype.
class LearningRateScale {
 public:
  // `position`: the link's index in optax's chain, which names its state.
  LearningRateScale(LearningRate lr, int position) : lr_(std::move(lr)), position_(position) {}

  void add_slot(std::vector<Core::Slot>& slots) const {
    if (lr_.scheduled()) slots.push_back({std::to_string(position_) + ".count", -1});
  }

  // Scales `updates` in place; appends the schedule's next count to `next`.
  void apply(std::vector<Array>& updates, std::span<const Array> state,
             std::vector<Array>& next) const {
    if (!lr_.scheduled()) {
      for (Array& u : updates) u = Array(-lr_.value()) * u;
      return;
    }
    const Array& count = state.back();
    Array step_size = Array(-1) * lr_.schedule()(count);
    for (Array& u : updates) u = step_size.astype(u.dtype()) * u;
    next.push_back(safe_increment(count));
  }

 private:
  LearningRate lr_;
  int position_;
};

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
  Sgd(LearningRate lr, double momentum, bool nesterov)
      : scale_(std::move(lr), 1), momentum_(momentum), nesterov_(nesterov) {}

 protected:
  std::vector<Slot> layout(const std::vector<std::string>& names) const override {
    std::vector<Slot> slots;
    if (momentum_ != 0) slots = moment_slots(false, {"trace"}, names);
    scale_.add_slot(slots);
    return slots;
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
      updates.push_back(u);
    }
    scale_.apply(updates, state, next);
    return {std::move(updates), std::move(next)};
  }

 private:
  LearningRateScale scale_;
  double momentum_;
  bool nesterov_;
};

// 1 - decay^count, as optax's tree_bias_correction: an inline jit, so the count is traced even
// when the update runs eagerly, and the power is pow of the float decay and the count made a
// (weak) float, never jnp.power's integer_pow of a concrete count.
Array bias_correction(double decay, const Array& count) {
  const std::vector<Array> operands = ops::promote_dtypes({Array(decay), count});
  return Array(1) - lax::pow(operands[0], operands[1]);
}

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
  // `adamw`: optax's adamw chain, whose add_decayed_weights link comes before the rate's.
  Adam(LearningRate lr, double b1, double b2, double eps, double weight_decay, bool adamw)
      : scale_(std::move(lr), adamw ? 2 : 1),
        b1_(b1),
        b2_(b2),
        eps_(eps),
        weight_decay_(weight_decay) {}

 protected:
  std::vector<Slot> layout(const std::vector<std::string>& names) const override {
    std::vector<Slot> slots = moment_slots(true, {"mu", "nu"}, names);
    scale_.add_slot(slots);
    return slots;
  }

  std::pair<std::vector<Array>, std::vector<Array>> step(
      std::span<const Array> grads, std::span<const Array> state,
      std::span<const Array> params) const override {
    const size_t n = grads.size();
    Array next_count = safe_increment(state[0]);
    Array correction1 = bias_correction(b1_, next_count);
    Array correction2 = bias_correction(b2_, next_count);
    std::vector<Array> updates, next_mu, next_nu;
    for (size_t i = 0; i < n; ++i) {
      const Array& g = grads[i];
      Array mu = Array(1 - b1_) * g + Array(b1_) * state[1 + i];
      Array nu = Array(1 - b2_) * (g * g) + Array(b2_) * state[1 + n + i];
      Array u =
          bias_corrected(mu, correction1) / (sqrt(bias_corrected(nu, correction2)) + Array(eps_));
      if (weight_decay_ != 0) u = u + Array(weight_decay_) * params[i];
      updates.push_back(u);
      next_mu.push_back(mu);
      next_nu.push_back(nu);
    }
    std::vector<Array> next{next_count};
    next.insert(next.end(), next_mu.begin(), next_mu.end());
    next.insert(next.end(), next_nu.begin(), next_nu.end());
    scale_.apply(updates, state, next);
    return {std::move(updates), std::move(next)};
  }

 private:
  LearningRateScale scale_;
  double b1_, b2_, eps_, weight_decay_;
};

void require_adam(const char* api, const LearningRate& lr, double b1, double b2, double eps) {
  require_learning_rate(api, lr);
  require_decay_rate(api, "b1", b1);
  require_decay_rate(api, "b2", b2);
  require(std::isfinite(eps) && eps >= 0, api, "eps must be finite and >= 0", eps);
}

}  // namespace

Schedule cosine_decay_schedule(double init_value, int64_t decay_steps, double alpha,
                               double exponent) {
  if (decay_steps < 1)
    throw ValueError("[optim.cosine_decay_schedule] requires positive decay_steps, got " +
                     std::to_string(decay_steps));
  require(std::isfinite(init_value) && init_value >= 0, "optim.cosine_decay_schedule",
          "init_value must be finite and >= 0, as a learning rate", init_value);
  require(std::isfinite(alpha), "optim.cosine_decay_schedule", "alpha must be finite", alpha);
  require(std::isfinite(exponent), "optim.cosine_decay_schedule", "exponent must be finite",
          exponent);
  return [=](const Array& count) {
    Array c = minimum(count.astype(float32), Array(double(decay_steps)));
    Array cosine = Array(0.5) * (Array(1) + cos(Array(M_PI) * c / Array(double(decay_steps))));
    Array decayed = Array(1 - alpha) * power(cosine, Array(exponent)) + Array(alpha);
    return Array(init_value) * decayed;
  };
}

Optimizer sgd(LearningRate learning_rate, double momentum, bool nesterov) {
  require_learning_rate("optim.sgd", learning_rate);
  require(std::isfinite(momentum) && momentum >= 0, "optim.sgd", "momentum must be finite and >= 0",
          momentum);
  if (nesterov && momentum == 0)
    throw ValueError("[optim.sgd] nesterov needs a momentum, got momentum 0");
  return Optimizer(std::make_shared<Sgd>(std::move(learning_rate), momentum, nesterov));
}

Optimizer adam(LearningRate learning_rate, double b1, double b2, double eps) {
  require_adam("optim.adam", learning_rate, b1, b2, eps);
  return Optimizer(std::make_shared<Adam>(std::move(learning_rate), b1, b2, eps, 0.0, false));
}

Optimizer adamw(LearningRate learning_rate, double b1, double b2, double eps, double weight_decay) {
  require_adam("optim.adamw", learning_rate, b1, b2, eps);
  require(std::isfinite(weight_decay) && weight_decay >= 0, "optim.adamw",
          "weight_decay must be finite and >= 0", weight_decay);
  return Optimizer(
      std::make_shared<Adam>(std::move(learning_rate), b1, b2, eps, weight_decay, true));
}

}  // namespace spmd::optim

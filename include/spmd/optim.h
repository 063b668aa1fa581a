// Optimizers in the style of optax: sgd (with momentum or Nesterov momentum), adam and adamw, as
// values with init(params) and update(grads, state, params), plus apply_updates. They work on
// any tree of parameters (typically a torch-style OrderedDict<Array>) and under jit:
//   sp::optim::Optimizer opt = sp::optim::adam(1e-3);
//   sp::optim::State state = opt.init(params);
//   auto step = sp::jit([&](const Params& params, const sp::optim::State& state, ...) {
//     auto [updates, next] = opt.update(grad_fn(params, ...), state, params);
//     return std::tuple{sp::optim::apply_updates(params, updates), next};
//   });
// Values follow optax's formulas in its float32 operation order.
#pragma once

#include <spmd/array.h>
#include <spmd/ops.h>
#include <spmd/ordered_dict.h>
#include <spmd/tree.h>

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace spmd::optim {

// An optimizer's state: its Array leaves in optax's order, each named by optax's key path joined
// with dots, the params' own leaf path last: "0.count", "0.mu.layers.0.weight",
// "0.trace.layers.0.weight". Being an OrderedDict it is a tree (jit takes and returns it) and it
// already is the named tensors of a checkpoint. Moments are placed like their params (a weight
// sharded P("model") has moments sharded P("model")); the step count is an uncommitted int32
// scalar.
using State = OrderedDict<Array>;

// The name of each leaf of a params tree: its key path joined with dots (dict keys and struct
// fields as they are, list and tuple positions as numbers); "" for a tree that is one Array.
std::vector<std::string> leaf_names(const TreeDef& def);

namespace optim_detail {

// The type-erased core of an optimizer, on flattened leaves and their names.
class Core {
 public:
  // One leaf of the state: its name and the param it is shaped and placed like (-1 for the
  // int32 step count).
  struct Slot {
    std::string name;
    int param;
  };

  virtual ~Core() = default;
  State init(std::span<const Array> params, const std::vector<std::string>& names) const;
  std::pair<std::vector<Array>, State> update(std::span<const Array> grads, const State& state,
                                              std::span<const Array> params,
                                              const std::vector<std::string>& names) const;
  State from_named(std::span<const std::pair<std::string, Array>> named,
                   std::span<const Array> params, const std::vector<std::string>& names) const;

 protected:
  virtual std::vector<Slot> layout(const std::vector<std::string>& names) const = 0;
  // The updates and the next state leaves (in layout order) from the current ones.
  virtual std::pair<std::vector<Array>, std::vector<Array>> step(
      std::span<const Array> grads, std::span<const Array> state,
      std::span<const Array> params) const = 0;

 private:
  // The layout, after checking that the param names are unique.
  std::vector<Slot> slots(const std::vector<std::string>& names) const;
};

// ValueError "[optim.update] grads must have the structure of params; expected ..., got ...".
void check_same_structure(const TreeDef& params, const TreeDef& grads);

}  // namespace optim_detail

// An optimizer: a cheap-to-copy value sharing its immutable core.
class Optimizer {
 public:
  explicit Optimizer(std::shared_ptr<const optim_detail::Core> core) : core_(std::move(core)) {}

  // optax's opt.init(params): zero moments shaped, typed and placed like the params, count 0.
  // Params must be floating-point (TypeError "[optim.init] ..." otherwise; optax takes integer
  // params, and its first update turns their integer moments into floats).
  template <class Tree>
  State init(const Tree& params) const {
    auto [leaves, def] = tree_flatten(params);
    return core_->init(leaves, leaf_names(def));
  }

  // optax's opt.update(grads, state, params): the updates (to add to params) and the next
  // state. Raises ValueError "[optim.update] ..." when grads do not have the structure and
  // shapes of params or the state is not this optimizer's state for these params.
  template <class Tree>
  std::pair<Tree, State> update(const Tree& grads, const State& state, const Tree& params) const {
    auto [param_leaves, def] = tree_flatten(params);
    auto [grad_leaves, grad_def] = tree_flatten(grads);
    optim_detail::check_same_structure(def, grad_def);
    auto [updates, next] = core_->update(grad_leaves, state, param_leaves, leaf_names(def));
    return {tree_unflatten<Tree>(def, updates), std::move(next)};
  }

  // The state for `params` rebuilt from named tensors (named_state's output, e.g. read from a
  // checkpoint, in any order): each leaf init(params) would make must be present once with its
  // shape and dtype, and is placed as init places it. Raises ValueError
  // "[optim.state_from_named] ..." naming a missing, unexpected or mis-shaped tensor.
  template <class Tree>
  State state_from_named(std::span<const std::pair<std::string, Array>> named,
                         const Tree& params) const {
    auto [leaves, def] = tree_flatten(params);
    return core_->from_named(named, leaves, leaf_names(def));
  }

 private:
  std::shared_ptr<const optim_detail::Core> core_;
};

// A learning rate that changes with the step (an optax schedule): the int32 0-d step count,
// counted from 0, to a 0-d float value.
using Schedule = std::function<Array(const Array& count)>;

// optax.cosine_decay_schedule: init_value * ((1 - alpha) * c^exponent + alpha) with
// c = (1 + cos(pi * min(count, decay_steps) / decay_steps)) / 2, so the rate falls from
// init_value to alpha * init_value over decay_steps steps and stays there. Raises ValueError
// for decay_steps < 1, an init_value that is negative or not finite, or alpha or exponent not
// finite.
Schedule cosine_decay_schedule(double init_value, int64_t decay_steps, double alpha = 0,
                               double exponent = 1);

// An optimizer's learning rate: a constant or a Schedule. With a schedule the state gains the
// count optax's scale_by_schedule keeps, named "<k>.count" after the chain's other k parts
// (adam: "1.count", adamw: "2.count", sgd: "1.count").
class LearningRate {
 public:
  LearningRate(double value) : value_(value) {}
  LearningRate(Schedule schedule) : schedule_(std::move(schedule)) {}
  template <class F>
  requires(std::is_invocable_r_v<Array, F, const Array&> && !std::is_arithmetic_v<F>)
      LearningRate(F schedule)
      : schedule_(std::move(schedule)) {}

  bool scheduled() const { return bool(schedule_); }
  double value() const { return value_; }  // the constant; 0 when scheduled
  const Schedule& schedule() const { return schedule_; }

 private:
  double value_ = 0;
  Schedule schedule_;
};

// optax.sgd: updates = -learning_rate * g, or with momentum (optax's trace, state
// "0.trace.<param>") t = g + momentum * t and updates = -learning_rate * t, or with nesterov
// -learning_rate * (g + momentum * t). momentum 0 keeps no state (optax's momentum=None).
// Raises ValueError for a negative or non-finite learning rate or momentum, and for nesterov
// without momentum.
Optimizer sgd(LearningRate learning_rate, double momentum = 0, bool nesterov = false);
// optax.adam: bias-corrected first and second moments ("0.count", "0.mu.<param>",
// "0.nu.<param>"); updates = -learning_rate * mu_hat / (sqrt(nu_hat) + eps). Raises ValueError
// for a negative learning rate or eps, or b1 or b2 outside [0, 1).
Optimizer adam(LearningRate learning_rate, double b1 = 0.9, double b2 = 0.999, double eps = 1e-8);
// optax.adamw: adam's direction plus weight_decay * params, all scaled by -learning_rate (the
// decay is multiplied by the learning rate, as in optax and PyTorch). Same state as adam.
Optimizer adamw(LearningRate learning_rate, double b1 = 0.9, double b2 = 0.999, double eps = 1e-8,
                double weight_decay = 1e-4);

// optax.apply_updates: params + updates leaf by leaf, each result cast to its param's dtype.
template <class Tree>
Tree apply_updates(const Tree& params, const Tree& updates) {
  return tree_map([](const Array& p, const Array& u) { return (p + u).astype(p.dtype()); }, params,
                  updates);
}

// The state as (name, tensor) pairs, in order: what a checkpoint stores.
std::vector<std::pair<std::string, Array>> named_state(const State& state);

}  // namespace spmd::optim

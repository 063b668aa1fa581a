// spmd::nn: torch-style modules (torch.nn / libtorch's C++ frontend), torch.func.functional_call
// and the usual losses. A Module owns named Parameters and submodules in registration order;
// parameters are immutable Arrays, so updating one replaces its Array. state_dict() is an
// OrderedDict tree that jit, grad and device_put take as it is.
#pragma once

#include <spmd/array.h>
#include <spmd/ops.h>
#include <spmd/ordered_dict.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace spmd::nn {

// A model's parameters by dotted name (torch's state_dict), in registration order.
using StateDict = OrderedDict<Array>;

class Module;

namespace nn_detail {
struct ParameterSlot {
  Array value;
};
}  // namespace nn_detail

// A module's handle on one of its parameters. Copies share the parameter. Reading it gives the
// Array that a functional_call on this thread substitutes, or else the module's own.
class Parameter {
 public:
  Parameter() = default;
  Array value() const;
  operator Array() const { return value(); }
  const Shape& shape() const { return value().shape(); }
  DType dtype() const { return value().dtype(); }
  bool defined() const { return slot_ != nullptr; }

 private:
  friend class Module;
  explicit Parameter(std::shared_ptr<nn_detail::ParameterSlot> slot) : slot_(std::move(slot)) {}
  std::shared_ptr<nn_detail::ParameterSlot> slot_;
};

// A Parameter reads as its Array in expressions and when printed, as a libtorch parameter does
// (`model->weight * 2`, `std::cout << model->bias`): argument-dependent lookup finds the Array
// operators here.
using spmd::operator+;
using spmd::operator-;
using spmd::operator*;
using spmd::operator/;
using spmd::operator%;
using spmd::operator==;
using spmd::operator!=;
using spmd::operator<;
using spmd::operator<=;
using spmd::operator>;
using spmd::operator>=;
using spmd::operator&;
using spmd::operator|;
using spmd::operator^;
using spmd::operator!;
using spmd::operator<<;
using spmd::operator>>;

// libtorch's ModuleHolder: a shared handle on a module (`Linear` holds a `LinearImpl`), so that a
// model can keep its submodules as members and register the same objects by name. Copies share
// the module. Calling the holder calls the module's forward.
template <class Impl>
class ModuleHolder {
 public:
  // An empty holder (libtorch's `Linear fc{nullptr}`), to be assigned later.
  ModuleHolder(std::nullptr_t) {}
  // Constructs the module from `args` (a default-constructible module when there are none).
  template <class... Args>
  requires std::constructible_from<Impl, Args...> &&
      (sizeof...(Args) != 1 || !(std::is_base_of_v<ModuleHolder, std::decay_t<Args>> ||
                                 ...)) explicit(sizeof...(Args) == 1) ModuleHolder(Args&&... args)
      : impl_(std::make_shared<Impl>(std::forward<Args>(args)...)) {}
  ModuleHolder(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  // A holder of a derived module converts to one of its base (ModuleList holds AnyModule).
  template <class Other>
  requires(std::is_convertible_v<Other*, Impl*> && !std::is_same_v<Other, Impl>)
      ModuleHolder(const ModuleHolder<Other>& other)
      : impl_(other.ptr()) {}

  Impl* operator->() const { return get(); }
  Impl& operator*() const { return *get(); }
  Impl* get() const;
  const std::shared_ptr<Impl>& ptr() const { return impl_; }
  bool is_empty() const { return impl_ == nullptr; }

  template <class... Args>
  auto operator()(Args&&... args) const {
    return get()->forward(std::forward<Args>(args)...);
  }

 private:
  std::shared_ptr<Impl> impl_;
};

namespace nn_detail {
[[noreturn]] void throw_empty_holder();
struct Substitution;
}  // namespace nn_detail

template <class Impl>
Impl* ModuleHolder<Impl>::get() const {
  if (!impl_) nn_detail::throw_empty_holder();
  return impl_.get();
}

// A module whose forward maps one Array to one Array, whatever its type.
using AnyModule = ModuleHolder<Module>;

// The base of every module (torch.nn.Module). A subclass registers its parameters and
// submodules in its constructor and overrides forward. Copying a module is shallow, as in
// libtorch: the copy shares parameters and submodules with the original.
class Module {
 public:
  virtual ~Module() = default;

  // The computation; the base raises NotImplementedError naming the module. A module may also
  // define forward overloads of other signatures (called through the holder or functional_call).
  virtual Array forward(Array x) const;
  Array operator()(Array x) const { return forward(std::move(x)); }

  // The type's name without namespaces or an "Impl" suffix ("Linear", "Model").
  virtual std::string name() const;

  // Parameters with dotted names: this module's own in registration order, then each
  // submodule's under its name ("layers.0.weight"), as torch orders them. named_parameters
  // lists a parameter shared by several modules once; state_dict lists every name.
  StateDict named_parameters() const;
  std::vector<Array> parameters() const;
  StateDict state_dict() const;
  // Replaces the parameters by those of `state_dict` (cast to each parameter's dtype). Raises
  // RuntimeError "[load_state_dict] Error(s) in loading state_dict for Model: ..." listing, as
  // torch does, the missing and unexpected keys (only when `strict`) and every shape mismatch.
  void load_state_dict(const StateDict& state_dict, bool strict = true);

  // Direct submodules in registration order, and every module below with its dotted name
  // (this one first, named "").
  std::vector<std::pair<std::string, AnyModule>> named_children() const;
  std::vector<std::pair<std::string, const Module*>> named_modules() const;

  // This module as M (libtorch's as<M>()), or null when it is not one.
  template <class M>
  const M* as() const {
    return dynamic_cast<const M*>(this);
  }
  template <class M>
  M* as() {
    return dynamic_cast<M*>(this);
  }

 protected:
  // Names may not be empty, contain '.', or repeat a parameter or submodule name (torch's rules);
  // a submodule may not be or hold this module (a cycle; torch does not check and recurses).
  Parameter register_parameter(const std::string& name, Array value);
  template <class Holder>
  requires requires(const Holder& h) {
    { h.ptr() } -> std::convertible_to<std::shared_ptr<Module>>;
  }
  Holder register_module(const std::string& name, Holder module) {
    add_child(name, module.ptr());
    return module;
  }
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

 private:
  friend class FunctionalCallScope;
  using Slots = std::vector<std::pair<std::string, std::shared_ptr<nn_detail::ParameterSlot>>>;
  void add_child(const std::string& name, std::shared_ptr<Module> child);
  void check_new_name(const char* api, const std::string& name) const;
  void collect_slots(const std::string& prefix, Slots& out) const;
  Slots slots() const;

  Slots params_;
  std::vector<std::pair<std::string, AnyModule>> children_;
};

// While alive, parameters of `module` (and its submodules) read as the Arrays of `params` on
// this thread only, so that calls on several threads, each with its own params, do not
// interfere; scopes nest. `params` must have exactly the keys of module.state_dict() with the
// same shapes (RuntimeError "[functional_call] ..." naming the missing or unexpected keys).
class FunctionalCallScope {
 public:
  FunctionalCallScope(const Module& module, const StateDict& params);
  ~FunctionalCallScope();
  FunctionalCallScope(const FunctionalCallScope&) = delete;
  FunctionalCallScope& operator=(const FunctionalCallScope&) = delete;

 private:
  std::unique_ptr<nn_detail::Substitution> substitution_;
};

namespace nn_detail {
inline const Module& module_of(const Module& m) {
  return m;
}
template <class M>
const Module& module_of(const ModuleHolder<M>& m) {
  return *m;
}
// The module's own forward (with any overloads it declares), through a holder or not.
template <class M, class... Args>
auto call_forward(const M& model, Args&&... args) {
  if constexpr (std::is_base_of_v<Module, M>)
    return model.forward(std::forward<Args>(args)...);
  else
    return model->forward(std::forward<Args>(args)...);
}
}  // namespace nn_detail

// torch.func.functional_call: model(args...) computed with `params` in place of the model's own
// parameters (see FunctionalCallScope), so jit and grad can take the params as an argument:
//   auto loss = [&](const StateDict& p, const Array& x, const Array& y) {
//     return MSELoss{}(functional_call(model, p, x), y);
//   };
//   auto [value, grads] = jit(value_and_grad(loss))(model.state_dict(), x, y);
// Works while tracing (params may be tracers) and on several threads at once.
template <class M, class... Args>
auto functional_call(const M& model, const StateDict& params, Args&&... args) {
  FunctionalCallScope scope(nn_detail::module_of(model), params);
  return nn_detail::call_forward(model, std::forward<Args>(args)...);
}

// ---- modules ------------------------------------------------------------------------------------

// y = x Wᵀ + b with weight [out, in] and bias [out], initialised as torch does, uniform in
// ±1/√in, drawn from `key` as: auto [kw, kb] = split(key);
//   weight = random::uniform(kw, {out, in}, float32, -bound, bound);
//   bias = random::uniform(kb, {out}, float32, -bound, bound).
class LinearImpl : public Module {
 public:
  LinearImpl(int64_t in_features, int64_t out_features, const Array& key, bool bias = true);
  Array forward(Array x) const override;

  int64_t in_features, out_features;
  Parameter weight, bias;  // bias is undefined when constructed with bias = false
};
using Linear = ModuleHolder<LinearImpl>;

class ReLUImpl : public Module {
 public:
  Array forward(Array x) const override;
};
using ReLU = ModuleHolder<ReLUImpl>;

// Modules in a row, named "0", "1", ...; forward feeds each one's output to the next.
class SequentialImpl : public Module {
 public:
  SequentialImpl() = default;
  explicit SequentialImpl(std::vector<AnyModule> modules);
  Array forward(Array x) const override;
  void push_back(AnyModule module);
  // Negative indices count from the end; out of range raises IndexError.
  const AnyModule& operator[](int64_t index) const;
  size_t size() const { return modules_.size(); }
  std::vector<AnyModule>::const_iterator begin() const { return modules_.begin(); }
  std::vector<AnyModule>::const_iterator end() const { return modules_.end(); }

 private:
  std::vector<AnyModule> modules_;
};

// A list of submodules named "0", "1", ... (torch.nn.ModuleList); it has no forward.
class ModuleListImpl : public SequentialImpl {
 public:
  using SequentialImpl::SequentialImpl;
  Array forward(Array x) const override;
};

// Holders of the two containers that also index and iterate, so that a model writes
// `for (auto& layer : layers) x = layer(x);` on its member.
template <class Impl>
class ContainerHolder : public ModuleHolder<Impl> {
 public:
  // An empty container (not an empty holder).
  ContainerHolder() : ModuleHolder<Impl>(std::make_shared<Impl>()) {}
  ContainerHolder(std::nullptr_t) : ModuleHolder<Impl>(nullptr) {}
  ContainerHolder(std::shared_ptr<Impl> impl) : ModuleHolder<Impl>(std::move(impl)) {}
  // Sequential(Linear(2, 3, k1), ReLU(), Linear(3, 1, k2)).
  template <class... Ms>
  requires(sizeof...(Ms) > 0 && (std::is_convertible_v<Ms, AnyModule> && ...) &&
           (sizeof...(Ms) != 1 || !(std::is_same_v<std::decay_t<Ms>, ContainerHolder> ||
                                    ...))) explicit ContainerHolder(Ms&&... modules)
      : ModuleHolder<Impl>(std::make_shared<Impl>(std::vector<AnyModule>{AnyModule(modules)...})) {}

  void push_back(AnyModule module) const { this->get()->push_back(std::move(module)); }
  const AnyModule& operator[](int64_t index) const { return (*this->get())[index]; }
  size_t size() const { return this->get()->size(); }
  auto begin() const { return this->get()->begin(); }
  auto end() const { return this->get()->end(); }
};
using Sequential = ContainerHolder<SequentialImpl>;
using ModuleList = ContainerHolder<ModuleListImpl>;

// ---- functions and losses (torch.nn.functional; also in spmd::nn) -------------------------------
namespace functional {

enum class Reduction { none, mean, sum };

// jax.nn.log_softmax / softmax: x minus its (stop-gradient) max along `axis`, then normalised.
Array log_softmax(const Array& x, int axis = -1);
Array softmax(const Array& x, int axis = -1);
using spmd::one_hot;
// torch's mse_loss: (input - target)², averaged over every element by default. input and target
// must have the same shape.
Array mse_loss(const Array& input, const Array& target, Reduction reduction = Reduction::mean);
// torch's cross_entropy with class indices: logits [..., C], integer labels [...];
// logsumexp(logits) - logits[label] per example (optax's
// softmax_cross_entropy_with_integer_labels), averaged by default. Stable for large logits. A label
// outside [0, C) contributes logsumexp(logits) (it selects no logit), as the check cannot be made
// on traced labels. A -inf logit (a masked class) is fine unless it is the label's (then +inf).
Array cross_entropy(const Array& logits, const Array& labels,
                    Reduction reduction = Reduction::mean);
// The fraction of examples whose argmax over the last axis equals the label (float32 scalar).
Array accuracy(const Array& logits, const Array& labels);

}  // namespace functional

using functional::accuracy;
using functional::cross_entropy;
using functional::log_softmax;
using functional::mse_loss;
using functional::Reduction;
using functional::softmax;
using spmd::one_hot;

// torch.nn.MSELoss() and torch.nn.CrossEntropyLoss(): the loss functions as callable objects.
struct MSELoss {
  Reduction reduction = Reduction::mean;
  Array operator()(const Array& input, const Array& target) const {
    return mse_loss(input, target, reduction);
  }
};
struct CrossEntropyLoss {
  Reduction reduction = Reduction::mean;
  Array operator()(const Array& logits, const Array& labels) const {
    return cross_entropy(logits, labels, reduction);
  }
};

}  // namespace spmd::nn

// Module: the registry of named parameters and submodules, state_dict and load_state_dict, and
// the thread-local parameter substitution behind functional_call.
#include <spmd/error.h>
#include <spmd/nn.h>

#include <cxxabi.h>

#include <cstdlib>
#include <string>
#include <string_view>
#include <typeinfo>
#include <unordered_map>
#include <unordered_set>

namespace spmd::nn {

namespace nn_detail {

void throw_empty_holder() {
  throw ValueError(
      "[ModuleHolder] the holder is empty (constructed from nullptr); assign a module "
      "to it before use");
}

// The parameters a functional_call substitutes on this thread, innermost scope first.
struct Substitution {
  std::unordered_map<const ParameterSlot*, Array> values;
  const Substitution* outer = nullptr;
};

}  // namespace nn_detail

namespace {

thread_local const nn_detail::Substitution* current_substitution = nullptr;

std::string demangled_name(const std::type_info& type) {
  int status = 0;
  char* raw = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string name = status == 0 && raw ? raw : type.name();
  std::free(raw);
  return name;
}

// '"a", "b"', as torch lists keys.
std::string quoted_list(const std::vector<std::string>& keys) {
  std::string out;
  for (const std::string& key : keys) out += (out.empty() ? "\"" : ", \"") + key + "\"";
  return out;
}

// Keys of `expected` absent from `given`, and keys of `given` absent from `expected`.
template <class Given>
std::pair<std::vector<std::string>, std::vector<std::string>> key_differences(
    const std::vector<std::string>& expected, const Given& given) {
  std::vector<std::string> missing, unexpected;
  std::unordered_set<std::string> known(expected.begin(), expected.end());
  for (const std::string& key : expected)
    if (!given.contains(key)) missing.push_back(key);
  for (const auto& [key, value] : given)
    if (!known.contains(key)) unexpected.push_back(key);
  return {missing, unexpected};
}

}  // namespace

Array Parameter::value() const {
  if (!slot_) throw ValueError("[Parameter] the parameter is undefined (default-constructed)");
  for (const nn_detail::Substitution* s = current_substitution; s; s = s->outer) {
    auto it = s->values.find(slot_.get());
    if (it != s->values.end()) return it->second;
  }
  return slot_->value;
}

Array Module::forward(Array) const {
  throw NotImplementedError("[Module] " + name() + " is missing the required \"forward\" function");
}

std::string Module::name() const {
  std::string full = demangled_name(typeid(*this));
  std::string_view name = full;
  if (size_t colon = name.rfind("::"); colon != std::string_view::npos)
    name.remove_prefix(colon + 2);
  if (name.size() > 4 && name.ends_with("Impl")) name.remove_suffix(4);
  return std::string(name);
}

void Module::check_new_name(const char* api, const std::string& name) const {
  if (name.empty()) throw KeyError(std::string("[") + api + "] the name can't be empty");
  if (name.find('.') != std::string::npos)
    throw KeyError(std::string("[") + api + "] the name can't contain \".\", got \"" + name + "\"");
  auto taken = [&](const auto& entries) {
    for (const auto& entry : entries)
      if (entry.first == name) return true;
    return false;
  };
  if (taken(params_) || taken(children_))
    throw KeyError(std::string("[") + api + "] \"" + name + "\" is already registered in " +
                   this->name());
}

Parameter Module::register_parameter(const std::string& name, Array value) {
  check_new_name("register_parameter", name);
  if (!value.valid())
    throw ValueError("[register_parameter] the value of \"" + name + "\" is an empty Array");
  auto slot =
      std::make_shared<nn_detail::ParameterSlot>(nn_detail::ParameterSlot{std::move(value)});
  params_.emplace_back(name, slot);
  return Parameter(slot);
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> child) {
  check_new_name("register_module", name);
  if (!child) throw ValueError("[register_module] the module \"" + name + "\" is empty (nullptr)");
  for (const auto& [path, module] : child->named_modules())
    if (module == this)
      throw ValueError("[register_module] the module \"" + name + "\" " +
                       (path.empty() ? "is " + this->name() + " itself"
                                     : "holds " + this->name() + " as \"" + path + "\"") +
                       "; a module cannot be its own submodule");
  children_.emplace_back(name, AnyModule(std::move(child)));
}

void Module::collect_slots(const std::string& prefix, Slots& out) const {
  for (const auto& [name, slot] : params_) out.emplace_back(prefix + name, slot);
  for (const auto& [name, child] : children_) child->collect_slots(prefix + name + ".", out);
}

Module::Slots Module::slots() const {
  Slots out;
  collect_slots("", out);
  return out;
}

StateDict Module::state_dict() const {
  StateDict out;
  for (const auto& [name, slot] : slots()) out.insert(name, Parameter(slot).value());
  return out;
}

StateDict Module::named_parameters() const {
  StateDict out;
  std::unordered_set<const nn_detail::ParameterSlot*> seen;
  for (const auto& [name, slot] : slots())
    if (seen.insert(slot.get()).second) out.insert(name, Parameter(slot).value());
  return out;
}

std::vector<Array> Module::parameters() const {
  std::vector<Array> out;
  for (const auto& [name, value] : named_parameters()) out.push_back(value);
  return out;
}

std::vector<std::pair<std::string, AnyModule>> Module::named_children() const {
  return children_;
}

std::vector<std::pair<std::string, const Module*>> Module::named_modules() const {
  std::vector<std::pair<std::string, const Module*>> out = {{"", this}};
  for (const auto& [name, child] : children_)
    for (const auto& [sub, module] : child->named_modules())
      out.emplace_back(sub.empty() ? name : name + "." + sub, module);
  return out;
}

// Checks everything before replacing anything, so that a failed load leaves the module as it
// was (torch loads the matching keys before raising).
void Module::load_state_dict(const StateDict& state_dict, bool strict) {
  Slots all = slots();
  std::vector<std::string> names, errors;
  for (const auto& [name, slot] : all) names.push_back(name);
  auto [missing, unexpected] = key_differences(names, state_dict);
  if (strict && !unexpected.empty())
    errors.push_back("Unexpected key(s) in state_dict: " + quoted_list(unexpected) + ".");
  if (strict && !missing.empty())
    errors.push_back("Missing key(s) in state_dict: " + quoted_list(missing) + ".");
  for (const auto& [name, slot] : all) {
    if (!state_dict.contains(name)) continue;
    if (!state_dict.at(name).valid()) {
      errors.push_back("the value of " + name + " is an empty Array handle.");
      continue;
    }
    const Shape& given = state_dict.at(name).shape();
    if (given != slot->value.shape())
      errors.push_back("size mismatch for " + name + ": copying a param with shape " + given.str() +
                       " from checkpoint, the shape in current model is " +
                       slot->value.shape().str() + ".");
  }
  if (!errors.empty()) {
    std::string message = "[load_state_dict] Error(s) in loading state_dict for " + name() + ":";
    for (const std::string& error : errors) message += "\n\t" + error;
    throw RuntimeError(message);
  }
  for (const auto& [name, slot] : all) {
    if (!state_dict.contains(name)) continue;
    const Array& given = state_dict.at(name);
    slot->value = given.dtype() == slot->value.dtype() ? given : given.astype(slot->value.dtype());
  }
}

FunctionalCallScope::FunctionalCallScope(const Module& module, const StateDict& params)
    : substitution_(std::make_unique<nn_detail::Substitution>()) {
  Module::Slots all = module.slots();
  std::vector<std::string> names;
  for (const auto& [name, slot] : all) names.push_back(name);
  auto [missing, unexpected] = key_differences(names, params);
  std::string problems;
  if (!missing.empty()) problems += "; missing key(s) " + quoted_list(missing);
  if (!unexpected.empty()) problems += "; unexpected key(s) " + quoted_list(unexpected);
  if (!problems.empty())
    throw RuntimeError("[functional_call] the parameters must have the keys of " + module.name() +
                       "'s state_dict" + problems);
  for (const auto& [name, slot] : all) {
    const Array& given = params.at(name);
    if (!given.valid())
      throw RuntimeError("[functional_call] parameter \"" + name + "\" is an empty Array handle");
    if (given.shape() != slot->value.shape())
      throw RuntimeError("[functional_call] parameter \"" + name + "\" must have shape " +
                         slot->value.shape().str() + ", got " + given.shape().str());
    substitution_->values.emplace(slot.get(), given);
  }
  substitution_->outer = current_substitution;
  current_substitution = substitution_.get();
}

FunctionalCallScope::~FunctionalCallScope() {
  current_substitution = substitution_->outer;
}

}  // namespace spmd::nn

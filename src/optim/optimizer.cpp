// What every optimizer shares: naming the leaves of params and state, checking that grads and
// state fit the params, making the initial state and rebuilding it from named tensors.
#include <spmd/error.h>
#include <spmd/ops.h>
#include <spmd/optim.h>
#include <spmd/placement.h>

#include "core/array_impl.h"

#include <set>
#include <string>
#include <unordered_map>

namespace spmd::optim {

namespace {

void name_leaves(const TreeDef& def, const std::string& path, std::vector<std::string>& out) {
  if (def.kind() == TreeDef::Kind::leaf) {
    out.push_back(path);
    return;
  }
  std::vector<TreeDef> children = def.children();
  const bool named = def.kind() == TreeDef::Kind::dict ||
                     def.kind() == TreeDef::Kind::ordered_dict ||
                     def.kind() == TreeDef::Kind::record;
  for (size_t i = 0; i < children.size(); ++i) {
    std::string key = named ? def.keys()[i] : std::to_string(i);
    name_leaves(children[i], path.empty() ? key : path + "." + key, out);
  }
}

std::string quoted_list(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "'" : ", '") + n + "'";
  return out.empty() ? "none" : out;
}

std::string describe(const Array& x) {
  return std::string(dtype_name(x.dtype())) + x.shape().str();
}

// `value` with the sharding of `like` when `like` was placed: JAX's zeros_like of a committed
// array keeps its sharding, and so do the moments optax makes with it.
Array placed_like(const Array& value, const Array& like) {
  if (is_concrete(like) && like.committed()) return device_put(value, like.sharding());
  return value;
}

// What the slot's leaf must look like: its param's shape and dtype, or an int32 scalar.
bool fits(const Array& leaf, int param, std::span<const Array> params) {
  if (param < 0) return leaf.shape() == Shape{} && leaf.dtype() == int32;
  return leaf.shape() == params[param].shape() && leaf.dtype() == params[param].dtype();
}

std::string expected(int param, std::span<const Array> params) {
  return param < 0 ? "int32()" : describe(params[param]);
}

// optax makes integer moments for integer params, which its first update turns into floats (a
// state that no longer fits its params); the params of a gradient step are floating-point.
void check_floating(const char* api, std::span<const Array> params,
                    const std::vector<std::string>& names) {
  for (size_t i = 0; i < params.size(); ++i)
    if (!is_floating(params[i].dtype()))
      throw TypeError(std::string("[") + api + "] params must have a floating-point dtype, got " +
                      describe(params[i]) + " for '" + names[i] + "'");
}

}  // namespace

std::vector<std::string> leaf_names(const TreeDef& def) {
  std::vector<std::string> out;
  name_leaves(def, "", out);
  return out;
}

std::vector<std::pair<std::string, Array>> named_state(const State& state) {
  return {state.begin(), state.end()};
}

namespace optim_detail {

void check_same_structure(const TreeDef& params, const TreeDef& grads) {
  if (params == grads) return;
  throw ValueError("[optim.update] grads must have the tree structure of params; expected " +
                   params.str() + ", got " + grads.str());
}

std::vector<Core::Slot> Core::slots(const std::vector<std::string>& names) const {
  std::set<std::string> seen;
  for (const std::string& n : names)
    if (!seen.insert(n).second)
      throw ValueError("[optim] two params are both named '" + n +
                       "'; state names need each param's name to be unique");
  return layout(names);
}

State Core::init(std::span<const Array> params, const std::vector<std::string>& names) const {
  check_floating("optim.init", params, names);
  State state;
  for (const Slot& s : slots(names))
    state.insert(s.name, s.param < 0 ? zeros(Shape{}, int32)
                                     : placed_like(zeros_like(params[s.param]), params[s.param]));
  return state;
}

std::pair<std::vector<Array>, State> Core::update(std::span<const Array> grads, const State& state,
                                                  std::span<const Array> params,
                                                  const std::vector<std::string>& names) const {
  check_floating("optim.update", params, names);
  for (size_t i = 0; i < params.size(); ++i)
    if (grads[i].shape() != params[i].shape())
      throw ValueError("[optim.update] the grad of '" + names[i] + "' has shape " +
                       grads[i].shape().str() + " but its param has shape " +
                       params[i].shape().str());
  std::vector<Slot> layout = slots(names);
  std::vector<std::string> want;
  for (const Slot& s : layout) want.push_back(s.name);
  if (want != state.keys())
    throw ValueError("[optim.update] the state does not fit these params: expected leaves " +
                     quoted_list(want) + ", got " + quoted_list(state.keys()));
  std::vector<Array> leaves;
  for (const auto& [name, leaf] : state) leaves.push_back(leaf);
  for (size_t i = 0; i < layout.size(); ++i)
    if (!fits(leaves[i], layout[i].param, params))
      throw ValueError("[optim.update] state leaf '" + layout[i].name + "' should be " +
                       expected(layout[i].param, params) + ", got " + describe(leaves[i]));
  auto [updates, next] = step(grads, leaves, params);
  State out;
  for (size_t i = 0; i < layout.size(); ++i) out.insert(layout[i].name, next[i]);
  return {std::move(updates), std::move(out)};
}

State Core::from_named(std::span<const std::pair<std::string, Array>> named,
                       std::span<const Array> params, const std::vector<std::string>& names) const {
  check_floating("optim.state_from_named", params, names);
  std::unordered_map<std::string, const Array*> by_name;
  for (const auto& [name, value] : named)
    if (!by_name.emplace(name, &value).second)
      throw ValueError("[optim.state_from_named] the tensor '" + name + "' is given twice");
  State state;
  for (const Slot& s : slots(names)) {
    auto it = by_name.find(s.name);
    if (it == by_name.end())
      throw ValueError("[optim.state_from_named] missing the state tensor '" + s.name + "'");
    const Array& value = *it->second;
    if (!fits(value, s.param, params))
      throw ValueError("[optim.state_from_named] the state tensor '" + s.name + "' should be " +
                       expected(s.param, params) + ", got " + describe(value));
    state.insert(s.name, s.param < 0 ? value : placed_like(value, params[s.param]));
  }
  for (const auto& [name, value] : named)
    if (!state.contains(name))
      throw ValueError("[optim.state_from_named] unexpected state tensor '" + name +
                       "'; this optimizer's state for these params has " +
                       quoted_list(state.keys()));
  return state;
}

}  // namespace optim_detail
}  // namespace spmd::optim

// The standard modules: Linear, ReLU and the containers Sequential and ModuleList.
#include <spmd/error.h>
#include <spmd/lax.h>
#include <spmd/nn.h>
#include <spmd/random.h>

#include <cmath>
#include <string>

namespace spmd::nn {

LinearImpl::LinearImpl(int64_t in, int64_t out, const Array& key, bool with_bias)
    : in_features(in), out_features(out) {
  if (in <= 0 || out <= 0)
    throw ValueError("[Linear] in_features and out_features must be positive, got " +
                     std::to_string(in) + " and " + std::to_string(out));
  // torch's kaiming_uniform_(a=√5) on the weight and its bias rule both come to ±1/√in.
  double bound = 1.0 / std::sqrt(double(in));
  Array keys = random::split(key);
  weight =
      register_parameter("weight", random::uniform(keys[0], {out, in}, float32, -bound, bound));
  if (with_bias)
    bias = register_parameter("bias", random::uniform(keys[1], {out}, float32, -bound, bound));
}

// x Wᵀ as one dot_general contracting both last axes, so no transposed copy of W is made.
Array LinearImpl::forward(Array x) const {
  if (x.ndim() == 0 || x.shape()[x.ndim() - 1] != in_features)
    throw ShapeError("[Linear] input must have " + std::to_string(in_features) +
                     " features in its last axis, got shape " + x.shape().str());
  Array y = lax::dot_general(x, weight, {{x.ndim() - 1}, {1}, {}, {}});
  return bias.defined() ? y + bias : y;
}

Array ReLUImpl::forward(Array x) const {
  return relu(x);
}

SequentialImpl::SequentialImpl(std::vector<AnyModule> modules) {
  for (AnyModule& module : modules) push_back(std::move(module));
}

Array SequentialImpl::forward(Array x) const {
  for (const AnyModule& module : modules_) x = module(std::move(x));
  return x;
}

void SequentialImpl::push_back(AnyModule module) {
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

const AnyModule& SequentialImpl::operator[](int64_t index) const {
  int64_t size = int64_t(modules_.size());
  if (index < -size || index >= size)
    throw IndexError("[" + name() + "] index " + std::to_string(index) + " is out of range for " +
                     std::to_string(size) + " modules");
  return modules_[size_t(index < 0 ? index + size : index)];
}

Array ModuleListImpl::forward(Array) const {
  throw NotImplementedError("[ModuleList] a ModuleList has no forward; call its modules in turn");
}

}  // namespace spmd::nn

// The primitive registry and bind(), the one entry every operation goes through. What a
// primitive holds is in ir/primitive.h; the families that define them are listed in
// registry.cpp.
#pragma once

#include "ir/primitive.h"

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace spmd {

// The registry: families register their primitives in register_*_primitives (registry.cpp
// lists the families). Lookup of an unknown name is an internal error.
class PrimitiveRegistry {
 public:
  Primitive& define(std::string name, ShapeRule shape_rule, CpuKernel kernel);
  const Primitive* find(std::string_view name) const;
  // For rule registration while the registry is built.
  Primitive& at(std::string_view name);
  std::vector<std::string> names() const;

 private:
  std::vector<std::unique_ptr<Primitive>> prims_;
  std::unordered_map<std::string_view, Primitive*> by_name_;
};
const PrimitiveRegistry& primitive_registry();
const Primitive& primitive(std::string_view name);

// Applies a primitive: inside an active trace it is recorded there, otherwise it runs now.
std::vector<Array> bind(const Primitive& p, std::span<const Array> inputs,
                        const Params& params = {});
Array bind1(const Primitive& p, std::span<const Array> inputs, const Params& params = {});
inline Array bind1(const Primitive& p, std::initializer_list<Array> inputs,
                   const Params& params = {}) {
  return bind1(p, std::span<const Array>(inputs.begin(), inputs.size()), params);
}

// Runs a primitive now as a one-primitive program, whatever its impl (JAX's apply_primitive):
// what an impl calls to run the primitive it stands in for.
std::vector<Array> apply_primitive(const Primitive& p, std::span<const Array> inputs,
                                   const Params& params);

// Runs a primitive's shape rule, as the tracer and bind do (exposed for tests).
std::vector<AbstractValue> abstract_eval(const Primitive& p, std::span<const AbstractValue> in,
                                         const Params& params);

}  // namespace spmd

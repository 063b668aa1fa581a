// The primitive registry. A primitive is the unit of extension: a name, a shape rule (output
// types from input types and params) and a CPU kernel. Transformation rules (jvp, transpose,
// batching, sharding) join these fields as the transformations arrive. Every operation reaches
// the machine through bind().
#pragma once

#include "core/array_impl.h"
#include "ir/params.h"
#include "transforms/rules.h"

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace spmd {

// A kernel's view of one input or output: host data plus its type.
struct Operand {
  const void* data;
  const AbstractValue* aval;
  template <class T>
  const T* as() const {
    return static_cast<const T*>(data);
  }
};
struct Result {
  void* data;
  const AbstractValue* aval;
  // For a primitive that allocates_outputs: the output Array's buffer, which the kernel sets
  // (`data` is then null). Null for other primitives and for callers that give storage.
  std::shared_ptr<Buffer>* buffer = nullptr;
  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
};
struct KernelArgs {
  std::span<const Operand> in;
  std::span<const Result> out;
  const Params& params;
};

using ShapeRule =
    std::function<std::vector<AbstractValue>(std::span<const AbstractValue>, const Params&)>;
using CpuKernel = std::function<void(const KernelArgs&)>;

struct Primitive {
  std::string name;
  ShapeRule shape_rule;
  CpuKernel cpu_kernel;
  // The single output has the same bytes as the first input (reshape, squeeze): eager evaluation
  // shares the input's buffer instead of copying. Arrays are immutable, so sharing is safe.
  bool output_aliases_input = false;
  // Each output element depends only on the operands' elements at the same index (operands of
  // the output's shape) and on broadcast operands: the kernel may write its output over an
  // operand of the output's shape and element size (donated buffers, compile/executable.cpp).
  bool elementwise = false;
  // The kernel provides its outputs' buffers through Result::buffer when the caller passes it
  // (collectives whose result one buffer can hold for every device); a caller that passes only
  // `data` gets the result written there.
  bool allocates_outputs = false;
  // Transformation rules (transforms/rules.h); empty when the primitive has none: jvp of a
  // primitive without a rule raises, transpose exists only for linear primitives.
  JvpRule jvp;
  TransposeRule transpose;
  BatchRule batch;
  // The primitive's outputs do not depend differentiably on its inputs (comparisons, integer
  // ops, argmax, iota, random bits): jvp gives symbolic zero tangents without a rule.
  bool non_differentiable = false;
  // The result depends on the device that computes it (collectives, axis_index): never
  // computed at compile time by constant folding.
  bool device_dependent = false;
  // The mesh axes the outputs vary over, inside shard_map with check_vma (collectives change
  // them). Without a rule, outputs vary over the union of the operands' axes and operands that
  // vary over fewer are cast up with pvary first, as JAX does.
  std::function<std::vector<std::string>(std::span<const AbstractValue>, const Params&)> vma_rule;
  // Has an effect beyond its outputs (debug printing): never removed or merged by the passes.
  bool effectful = false;
  // An Array-level implementation used instead of cpu_kernel when set: primitives that run
  // sub-programs (jit calls, control flow) evaluate them as Programs.
  std::function<std::vector<Array>(std::span<const Array>, const Params&)> eager;
};

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

// Runs a primitive's shape rule, as the tracer and bind do (exposed for tests).
std::vector<AbstractValue> abstract_eval(const Primitive& p, std::span<const AbstractValue> in,
                                         const Params& params);

}  // namespace spmd

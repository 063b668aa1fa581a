// Primitive family: random. threefry2x32 hashes key words and counter words; iota_2x32_shape
// gives the 64-bit flat index of every element as two uint32 words (JAX's primitives of the same
// names), and fma is the multiply-add that XLA fuses in uniform sampling.
#include "prims/families.h"
#include "prims/primitive.h"
#include "prims/rule_util.h"

#include <spmd/error.h>
#include <spmd/lax.h>

#include "backends/cpu/copy.h"
#include "backends/cpu/threefry.h"

#include <cstddef>
#include <string>
#include <vector>

namespace spmd {
namespace {

std::string prefix(const std::string& name) {
  return "[" + name + "] ";
}

std::string shapes_of(std::span<const AbstractValue> in) {
  std::string s;
  for (const AbstractValue& a : in) s += (s.empty() ? "" : ", ") + a.shape.str();
  return s;
}

// The broadcast result shape of operands that are 0-d or share a rank, each dim equal or 1
// (JAX's broadcasting_shape_rule).
Shape broadcast_shape(const std::string& name, std::span<const AbstractValue> in) {
  Shape out;
  for (const AbstractValue& a : in) {
    if (a.shape.ndim() == 0) continue;
    if (out.ndim() == 0) {
      out = a.shape;
      continue;
    }
    if (a.shape.ndim() != out.ndim())
      throw ShapeError(prefix(name) + "operands must be scalars or have equal ranks, got shapes " +
                       shapes_of(in));
    for (int i = 0; i < out.ndim(); ++i) {
      if (a.shape[i] == out[i] || a.shape[i] == 1) continue;
      if (out[i] != 1)
        throw ShapeError(prefix(name) + "incompatible shapes for broadcasting: " + shapes_of(in));
      out[i] = a.shape[i];
    }
  }
  return out;
}

// An operand as the kernels read it: contiguous at the result shape, or one value for all.
// Operands broadcast along only some dims are expanded into `scratch`.
cpu::BroadcastOperand stage(const Operand& in, const Shape& out, std::vector<std::byte>& scratch) {
  const Shape& s = in.aval->shape;
  if (s == out) return {in.data, false};
  if (s.size() == 1) return {in.data, true};
  std::vector<int64_t> strides = s.strides();
  for (int i = 0; i < s.ndim(); ++i)
    if (s[i] == 1) strides[size_t(i)] = 0;
  const int item = itemsize(in.aval->dtype);
  scratch.resize(size_t(out.size() * item));
  cpu::strided_copy(in.data, strides, scratch.data(), out, item);
  return {scratch.data(), false};
}

std::vector<AbstractValue> threefry_shape_rule(std::span<const AbstractValue> in, const Params&) {
  if (in.size() != 4)
    throw ValueError("[threefry2x32] expected 4 operands, got " + std::to_string(in.size()));
  for (const AbstractValue& a : in)
    if (a.dtype != DType::uint32)
      throw TypeError("[threefry2x32] operands must be uint32, got " +
                      std::string(dtype_name(a.dtype)));
  AbstractValue out{broadcast_shape("threefry2x32", in), DType::uint32, false};
  return {out, out};
}

void threefry_kernel(const KernelArgs& a) {
  const Shape& shape = a.out[0].aval->shape;
  if (shape.size() == 0) return;
  std::vector<std::byte> scratch[4];
  cpu::BroadcastOperand ops[4];
  for (size_t i = 0; i < 4; ++i) ops[i] = stage(a.in[i], shape, scratch[i]);
  cpu::threefry2x32(ops[0], ops[1], ops[2], ops[3], a.out[0].as<uint32_t>(),
                    a.out[1].as<uint32_t>(), shape.size());
}

std::vector<AbstractValue> iota_2x32_shape_rule(std::span<const AbstractValue> in,
                                                const Params& p) {
  if (!in.empty()) throw ValueError("[iota_2x32_shape] takes no operands");
  const std::vector<int64_t>& dims = p.get_ints("shape");
  for (int64_t d : dims)
    if (d < 0)
      throw ValueError("[iota_2x32_shape] dimensions must be non-negative, got " +
                       Shape(dims).str());
  AbstractValue out{Shape(dims), DType::uint32, false};
  return {out, out};
}

std::vector<AbstractValue> fma_shape_rule(std::span<const AbstractValue> in, const Params&) {
  if (in.size() != 3)
    throw ValueError("[fma] expected 3 operands, got " + std::to_string(in.size()));
  for (const AbstractValue& a : in) {
    if (a.dtype != in[0].dtype)
      throw TypeError("[fma] operands must have the same dtype, got " +
                      std::string(dtype_name(in[0].dtype)) + " and " +
                      std::string(dtype_name(a.dtype)));
  }
  if (!is_floating(in[0].dtype))
    throw TypeError("[fma] expected a floating-point dtype, got " +
                    std::string(dtype_name(in[0].dtype)));
  bool weak = in[0].weak_type && in[1].weak_type && in[2].weak_type;
  return {AbstractValue{broadcast_shape("fma", in), in[0].dtype, weak}};
}

void fma_kernel(const KernelArgs& a) {
  const Shape& shape = a.out[0].aval->shape;
  if (shape.size() == 0) return;
  std::vector<std::byte> scratch[3];
  cpu::BroadcastOperand ops[3];
  for (size_t i = 0; i < 3; ++i) ops[i] = stage(a.in[i], shape, scratch[i]);
  cpu::fma(a.out[0].aval->dtype, ops[0], ops[1], ops[2], a.out[0].data, shape.size());
}

// fma (spmd's fused x*y + z) differentiates as the multiply and add it fuses.
JvpRule fma_jvp(const Primitive& fma) {
  return standard_jvp(
      fma, {[](const Array& g, const Primal& p) { return lax::mul(g, p.x[1]); },
            [](const Array& g, const Primal& p) { return lax::mul(p.x[0], g); },
            [](const Array& g, const Primal& p) { return maybe_broadcast(p.ans.shape(), g); }});
}

}  // namespace

void register_random_primitives(PrimitiveRegistry& r) {
  // Random bits have no derivative.
  Primitive& threefry = r.define("threefry2x32", threefry_shape_rule, threefry_kernel);
  threefry.kind = PrimitiveKind::broadcasting;
  // Writing the hashes over the dead counter words keeps two buffers of the shape live, not four.
  threefry.elementwise = true;
  threefry.non_differentiable = true;
  Primitive& iota_2x32 = r.define("iota_2x32_shape", iota_2x32_shape_rule, [](const KernelArgs& a) {
    cpu::iota_2x32(a.out[0].as<uint32_t>(), a.out[1].as<uint32_t>(), a.out[0].aval->size());
  });
  iota_2x32.non_differentiable = true;
  // Each element's value is its global flat index, which a block cannot know.
  iota_2x32.sharding_rule = [](std::span<const AbstractValue> in,
                               std::span<const AbstractValue> out,
                               const Params&) { return replicated_sharding_rule(in, out); };
  Primitive& fma = r.define("fma", fma_shape_rule, fma_kernel);
  fma.kind = PrimitiveKind::broadcasting;
  fma.jvp = fma_jvp(fma);
}

}  // namespace spmd

// The primitives the transformations introduce: add_any, empty2, the call primitive jit,
// control flow, custom differentiation and shard_map.
#include <spmd/error.h>

#include "backends/cpu/elementwise.h"
#include "prims/families.h"
#include "prims/primitive.h"

#include <cstring>

namespace spmd {

void register_call_primitives(PrimitiveRegistry& r);
void register_control_flow_primitives(PrimitiveRegistry& r);
void register_custom_vjp_primitives(PrimitiveRegistry& r);
void register_custom_jvp_primitive(PrimitiveRegistry& r);
void register_shard_map_primitive(PrimitiveRegistry& r);

void register_transform_primitives(PrimitiveRegistry& r) {
  register_call_primitives(r);
  register_control_flow_primitives(r);
  register_custom_vjp_primitives(r);
  register_custom_jvp_primitive(r);
  register_shard_map_primitive(r);
  // add_any: the sum of two cotangent contributions of the same type.
  Primitive& add_any = r.define(
      "add_any",
      [](std::span<const AbstractValue> in, const Params&) {
        if (in.size() != 2 || !(in[0].shape == in[1].shape) || in[0].dtype != in[1].dtype)
          throw TypeError("[add_any] expected two operands of the same type, got " + in[0].str() +
                          " and " + in[1].str());
        return std::vector<AbstractValue>{in[0]};
      },
      [](const KernelArgs& a) {
        cpu::binary(cpu::BinaryOp::add, a.in[0].aval->dtype, a.in[0].data, a.in[0].aval->shape,
                    a.in[1].data, a.in[1].aval->shape, a.out[0].data, a.out[0].aval->shape);
      });
  add_any.elementwise = true;
  // empty2: an uninitialised scalar in JAX, used to fill slots no computation reads; zeros here,
  // so that every run computes the same bytes.
  r.define(
      "empty2",
      [](std::span<const AbstractValue> in, const Params& p) {
        if (!in.empty())
          throw TypeError("[empty2] takes no operands, got " + std::to_string(in.size()));
        return std::vector<AbstractValue>{{Shape{}, p.get<DType>("dtype"), false}};
      },
      [](const KernelArgs& a) { std::memset(a.out[0].data, 0, size_t(a.out[0].aval->nbytes())); });
}

}  // namespace spmd

// The primitives the transformations introduce: the call primitive jit, control flow, custom
// differentiation and shard_map.
#include "prims/families.h"
#include "prims/primitive.h"

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
}

}  // namespace spmd

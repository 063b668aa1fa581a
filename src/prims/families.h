// Every family of primitives and the function that defines its primitives with all their rules.
// registry.cpp calls them from one table, in this order.
#pragma once

namespace spmd {

class PrimitiveRegistry;

// src/prims: one file per family.
void register_elementwise_primitives(PrimitiveRegistry& r);  // elementwise.cpp
// empty2, the placeholder autodiff stages for values no computation reads (elementwise.cpp).
void register_empty_primitive(PrimitiveRegistry& r);
void register_unary_math_primitives(PrimitiveRegistry& r);  // unary_math.cpp
void register_reduce_primitives(PrimitiveRegistry& r);      // reduce.cpp
void register_shape_primitives(PrimitiveRegistry& r);       // shape.cpp
void register_indexing_primitives(PrimitiveRegistry& r);    // indexing.cpp
void register_linalg_primitives(PrimitiveRegistry& r);      // linalg.cpp
void register_random_primitives(PrimitiveRegistry& r);      // random.cpp
void register_sort_primitives(PrimitiveRegistry& r);        // sort.cpp
void register_scatter_primitives(PrimitiveRegistry& r);     // scatter.cpp
// collectives.cpp and axis_ops.cpp.
void register_collective_primitives(PrimitiveRegistry& r);
void register_debug_primitives(PrimitiveRegistry& r);  // debug.cpp
// sharding.cpp: sharding_constraint.
void register_sharding_primitives(PrimitiveRegistry& r);

// src/transforms/higher_order: primitives that hold sub-programs, above the interpreters.
void register_call_primitives(PrimitiveRegistry& r);          // jit.cpp: jit
void register_control_flow_primitives(PrimitiveRegistry& r);  // control_flow.cpp
void register_custom_jvp_primitive(PrimitiveRegistry& r);     // custom_jvp.cpp
void register_custom_vjp_primitives(PrimitiveRegistry& r);    // custom_vjp.cpp
void register_shard_map_primitive(PrimitiveRegistry& r);      // shard_map.cpp

// src/compile/fusion.cpp: fusion, which the passes introduce.
void register_fusion_primitive(PrimitiveRegistry& r);

}  // namespace spmd

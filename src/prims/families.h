// Each primitive family registers its primitives here; registry.cpp calls them all once.
#pragma once

namespace spmd {
class PrimitiveRegistry;
void register_elementwise_primitives(PrimitiveRegistry& r);
// empty2, the placeholder autodiff stages for values no computation reads (prims/elementwise.cpp).
void register_empty_primitive(PrimitiveRegistry& r);
void register_unary_math_primitives(PrimitiveRegistry& r);
void register_reduce_primitives(PrimitiveRegistry& r);
void register_shape_primitives(PrimitiveRegistry& r);
void register_indexing_primitives(PrimitiveRegistry& r);
void register_linalg_primitives(PrimitiveRegistry& r);
void register_random_primitives(PrimitiveRegistry& r);
void register_sort_primitives(PrimitiveRegistry& r);
void register_scatter_primitives(PrimitiveRegistry& r);
void register_collective_primitives(PrimitiveRegistry& r);
// Primitives the transformations introduce: the call primitive jit, control flow.
void register_transform_primitives(PrimitiveRegistry& r);
}  // namespace spmd

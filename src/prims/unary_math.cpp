// Primitive family: unary_math (being written).
#include "prims/families.h"
#include "prims/primitive.h"

namespace spmd {
void register_unary_math_primitives(PrimitiveRegistry&) {}
}  // namespace spmd

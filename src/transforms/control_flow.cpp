// Control flow primitives (see include/spmd/control_flow.h).
#include "prims/primitive.h"

namespace spmd {

void register_control_flow_primitives(PrimitiveRegistry& r) {
  (void)r;
}

}  // namespace spmd

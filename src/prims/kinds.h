// The rules a primitive gets from its kind (ir/primitive.h) when its family writes none.
#pragma once

#include "ir/primitive.h"

namespace spmd {

// Fills in the rules `p.kind` implies and `p` does not have yet.
void complete_rules_from_kind(Primitive& p);

// The sharding rule of a reducer (param `axes`): its reduced dims are reduction factors, without
// a combiner; families whose reduction a collective completes set one.
ShardingRule reducer_sharding(std::span<const AbstractValue> in, std::span<const AbstractValue>,
                              const Params& params);

}  // namespace spmd

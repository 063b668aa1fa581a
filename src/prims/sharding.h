// The sharding family's entries for ops and rules (src/prims/sharding.cpp): sharding_constraint
// and device_put staged into a trace.
#pragma once

#include <spmd/array.h>
#include <spmd/sharding.h>

#include "core/array_impl.h"
#include "ir/params.h"
#include "sharding/param_traits.h"

#include <memory>
#include <set>
#include <span>
#include <vector>

namespace spmd {

// x constrained to `sharding` (JAX's sharding_constraint_p.bind): staged under a trace; with no
// trace x is placed as device_put places it (a committed result). The spec's UNCONSTRAINED dims
// (the param unconstrained_dims) are left to propagation; with no trace they keep a committed
// x's split where its axes are free, as JAX's apply_primitive of the constraint does.
Array sharding_constraint(const Array& x, std::shared_ptr<const Sharding> sharding);

// JAX's reshard_p.bind: x moved to `dst`, its result's type sharding; `concrete_mesh` is the
// Mesh (an ObjectParam) `dst` was given on, or None for a sharding read off a type.
Array reshard_to(const Array& x, TypeSharding dst, ParamValue concrete_mesh);

// JAX's device_put_p.bind inside a trace: one equation for all of `xs`, each to its target (none:
// left where it is).
std::vector<Array> staged_device_put(std::span<const Array> xs, ShardingList targets);

}  // namespace spmd

// The sharding_constraint primitive's one entry for ops and rules (src/prims/sharding.cpp).
#pragma once

#include <spmd/array.h>
#include <spmd/sharding.h>

#include <memory>
#include <set>

namespace spmd {

// x constrained to `sharding` (JAX's sharding_constraint_p.bind): staged under a trace; with no
// trace x is placed as device_put places it (a committed result). `unconstrained_dims` are dims
// the constraint leaves to propagation (vmap's batch dims).
Array sharding_constraint(const Array& x, std::shared_ptr<const Sharding> sharding,
                          std::set<int64_t> unconstrained_dims = {});

}  // namespace spmd

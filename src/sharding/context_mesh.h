// PartitionSpecs read over the mesh in context (sp::set_mesh / sp::use_mesh).
#pragma once

#include <spmd/sharding.h>

#include <string>

namespace spmd {

// NamedSharding(get_mesh(), spec), its axes checked for `api`; with no mesh in context, the
// error JAX's `api` raises for a PartitionSpec given as `what` (jit's "in_shardings", an op's
// "out_sharding", ...).
NamedSharding over_context_mesh(const PartitionSpec& spec, const std::string& api,
                                const std::string& what);

}  // namespace spmd

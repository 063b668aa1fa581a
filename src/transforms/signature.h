// The key of a trace cache (jit, shard_map): argument structure, argument types, the named axes
// in scope and the mesh in context when the function is traced.
#pragma once

#include <spmd/sharding.h>
#include <spmd/tree.h>

#include "core/array_impl.h"

#include <string>
#include <vector>

namespace spmd {

struct SignatureKey {
  TreeDef def;
  std::vector<AbstractValue> types;
  // The named axes in scope ("name:size:binder:vma" each): collectives traced under one axis
  // size must not be reused under another.
  std::vector<std::string> axes;
  // PartitionSpecs the function gives (and jit's) are read over it (sp::use_mesh).
  Mesh context = get_mesh();
  bool operator==(const SignatureKey& o) const {
    return def == o.def && types == o.types && axes == o.axes && context == o.context;
  }
};

struct SignatureHash {
  size_t operator()(const SignatureKey& k) const {
    size_t h = k.def.hash();
    for (const AbstractValue& t : k.types) {
      h = h * 1000003 ^ size_t(t.dtype) * 7 ^ size_t(t.weak_type);
      for (int64_t d : t.shape) h = h * 31 + size_t(d);
    }
    return h;
  }
};

}  // namespace spmd

// The key of a trace cache (jit, shard_map): argument structure, argument types, the named axes
// in scope, the mesh in context when the function is traced and the abstract meshes of the
// arguments traced inputs stand for; and the cache itself.
#pragma once

#include <spmd/sharding.h>
#include <spmd/tree.h>

#include "core/array_impl.h"
#include "core/lru_cache.h"

#include <optional>
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
  // Per argument standing for an array committed over an Auto mesh (a make_jaxpr input), that
  // mesh abstracted (every dim unsplit): JAX's type of such an argument carries it, so its trace
  // differs (grad's seed is resharded onto it). Empty when no argument stands for one, so calls
  // of concrete arrays, whose traces do not see their meshes, share one entry.
  std::vector<std::optional<TypeSharding>> meshes = {};
  bool operator==(const SignatureKey& o) const {
    return def == o.def && types == o.types && axes == o.axes && context == o.context &&
           meshes == o.meshes;
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

// The traces of one jitted function or shard_map by signature, bounded as the compile caches
// (config::compile_cache_size, least recently used dropped) and dying with its owner, as JAX's
// caches keyed by the function's weak reference. Emptied by clear_caches(). Not synchronised:
// the owner locks.
template <class V>
class SignatureCache {
 public:
  // The value cached for `key`, made the most recently used; null if none.
  V* find(const SignatureKey& key) {
    Entry* hit =
        live().find(SignatureHash()(key), [&](const Entry& e) { return e.key == key; });
    return hit ? &hit->value : nullptr;
  }
  // Caches `value` for `key` unless one is cached already; whether it was added.
  bool insert(const SignatureKey& key, V value) {
    if (find(key)) return false;
    live().insert(SignatureHash()(key), Entry{key, std::move(value)});
    return true;
  }
  size_t size() { return live().size(); }
  // Calls `visit` on each cached value.
  template <class Visit>
  void for_each(Visit&& visit) {
    live().for_each([&](const Entry& e) { visit(e.value); });
  }

 private:
  struct Entry {
    SignatureKey key;
    V value;
  };
  LruCache<Entry>& live() { return cache_.get(); }
  LocalLruCache<Entry> cache_;
};

}  // namespace spmd

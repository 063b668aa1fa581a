// Finding the trace an operation belongs to.
#include "core/trace.h"

#include "core/array_impl.h"

namespace spmd {

Trace* innermost_trace(std::span<const Array> inputs) {
  Trace* best = nullptr;
  for (const Array& x : inputs) {
    Trace* t = x.impl() ? x.impl()->trace : nullptr;
    if (t && (!best || t->level() > best->level())) best = t;
  }
  return best;
}

}  // namespace spmd

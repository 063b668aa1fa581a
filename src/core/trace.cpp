// Finding the trace an operation belongs to, and the thread's current trace.
#include "core/trace.h"

#include <spmd/error.h>

#include "core/array_impl.h"

#include <atomic>

namespace spmd {
namespace {
std::atomic<int64_t> next_level{1};
thread_local Trace* g_current = nullptr;
}  // namespace

Trace::Trace() : level_(next_level.fetch_add(1, std::memory_order_relaxed)) {}

Trace* current_trace() {
  return g_current;
}

CurrentTraceScope::CurrentTraceScope(Trace* trace) : previous_(g_current) {
  g_current = trace;
}
CurrentTraceScope::~CurrentTraceScope() {
  g_current = previous_;
}

Trace* innermost_trace(std::span<const Array> inputs) {
  Trace* best = g_current;
  for (const Array& x : inputs) {
    Trace* t = x.impl() ? x.impl()->trace.get() : nullptr;
    if (!t) continue;
    if (!t->alive())
      throw UnexpectedTracerError(
          "[" + std::string(t->transformation_name()) + "] encountered a value traced by " +
          t->transformation_name() +
          " after its transformation finished: a traced value leaked out of the function being "
          "transformed (stored in a variable outside it, or returned through a side channel). "
          "Return it from the function instead.");
    if (!best || t->level() > best->level()) best = t;
  }
  return best;
}

}  // namespace spmd

// The hook through which transformations see operations. A Trace receives every primitive bound
// while it is the innermost trace in play: the highest-level trace among the operation's inputs
// and the current trace of the thread (set while a transformation runs the user's function, so
// operations on constants are staged too, as JAX's omnistaging does). With no trace in play, bind
// evaluates eagerly.
#pragma once

#include <memory>
#include <span>
#include <vector>

namespace spmd {

class Array;
class Params;
struct Primitive;

class Trace : public std::enable_shared_from_this<Trace> {
 public:
  Trace();
  virtual ~Trace() = default;
  // Nesting order: a trace created later is inner to every trace alive when it was created.
  int64_t level() const { return level_; }
  // A finished trace records nothing more; its values have escaped if they are used again.
  bool alive() const { return alive_; }
  void finish() { alive_ = false; }

  virtual std::vector<Array> process_primitive(const Primitive& p, std::span<const Array> inputs,
                                               const Params& params) = 0;
  // Names the transformation in errors about reading traced values (jit, grad).
  virtual const char* transformation_name() const = 0;

 private:
  int64_t level_;
  bool alive_ = true;
};

// The trace an operation on `inputs` belongs to: the highest-level trace among the inputs and
// the thread's current trace; nullptr when everything is concrete and no trace is current.
// Raises UnexpectedTracerError when an input belongs to a finished trace.
Trace* innermost_trace(std::span<const Array> inputs);

// The thread's current trace (nullptr outside transformations).
Trace* current_trace();

// Makes `trace` current for its lifetime (nullptr: evaluate eagerly), restoring the previous one.
class CurrentTraceScope {
 public:
  explicit CurrentTraceScope(Trace* trace);
  ~CurrentTraceScope();
  CurrentTraceScope(const CurrentTraceScope&) = delete;
  CurrentTraceScope& operator=(const CurrentTraceScope&) = delete;

 private:
  Trace* previous_;
};

}  // namespace spmd

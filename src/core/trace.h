// The hook through which transformations see operations. A Trace receives every primitive
// applied to one of its values; with no trace among the inputs, bind evaluates eagerly.
#pragma once

#include <span>
#include <vector>

namespace spmd {

class Array;
class Params;
struct Primitive;

class Trace {
 public:
  virtual ~Trace() = default;
  // Nesting depth: the innermost trace among an operation's inputs handles it.
  virtual int level() const = 0;
  virtual std::vector<Array> process_primitive(const Primitive& p, std::span<const Array> inputs,
                                               const Params& params) = 0;
  // Names the transformation in errors about reading traced values ("jit", "grad").
  virtual const char* transformation_name() const = 0;
};

// The innermost trace owning one of `inputs`, or nullptr when all are concrete.
Trace* innermost_trace(std::span<const Array> inputs);

}  // namespace spmd

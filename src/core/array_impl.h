// What an Array handle points to: its abstract value (shape, dtype, weak type) and either a
// concrete buffer or, while a transformation traces it, the trace that owns it.
#pragma once

#include <spmd/array.h>

#include "runtime/buffer.h"

#include <memory>
#include <string>

namespace spmd {

class Trace;

// JAX's ShapedArray: the type of a value.
struct AbstractValue {
  Shape shape;
  DType dtype = DType::float32;
  bool weak_type = false;
  bool operator==(const AbstractValue&) const = default;
  int64_t size() const { return shape.size(); }
  int64_t nbytes() const { return shape.size() * itemsize(dtype); }
  std::string str() const;  // jaxpr form: "f32[2,3]"
};

struct ArrayImpl {
  AbstractValue aval;
  std::shared_ptr<Buffer> buffer;  // concrete data; null while traced
  std::shared_ptr<Trace> trace;    // the trace this value belongs to, if any
  int64_t trace_slot = -1;         // the trace's own identifier for the value
};

// A concrete array over an existing buffer.
Array make_array(AbstractValue aval, std::shared_ptr<Buffer> buffer);
// A concrete array with fresh, uninitialised storage.
Array make_uninitialized(AbstractValue aval);
// Host pointer to a concrete array's elements; throws ConcretizationError for traced values.
const void* host_data(const Array& x, const char* api);
const AbstractValue& aval_of(const Array& x);

}  // namespace spmd

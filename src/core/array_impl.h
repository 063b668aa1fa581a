// What an Array handle points to: its abstract value (shape, dtype, weak type) and either a
// concrete buffer (core/buffer.h), the shards of a committed array (runtime/sharded.h) or, while
// a transformation traces it, the trace that owns it.
#pragma once

#include <spmd/array.h>

#include "core/buffer.h"

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace spmd {

class Trace;
struct ShardedData;

// Explicit mode ("sharding in types"): how a value is split over the Explicit axes of its mesh.
// Plain data, because the Mesh lives above core and a type needs only what JAX's AbstractMesh
// holds: the axes' names, sizes and types. Which devices hold the blocks is the data's business
// (ShardedData), not the type's. Inside a shard_map body a value's type is on the shard_map's mesh
// with the axes the body is manual over typed Manual (as JAX's are): no dim is split over those.
struct TypeSharding {
  struct Axis {
    std::string name;
    int64_t size = 1;
    bool is_explicit = false;
    bool is_manual = false;  // manual in the shard_map body the value lives in
    bool operator==(const Axis&) const = default;
  };
  std::vector<Axis> mesh;  // every axis of the mesh, in mesh order
  // Per dim, the Explicit axes splitting it, major first.
  std::vector<std::vector<std::string>> dims;
  bool operator==(const TypeSharding&) const = default;
  // The product of the sizes of `axes`.
  int64_t size_of(const std::vector<std::string>& axes) const;
  // "16@a", "16@(a,b)" or "16" for dim `d` of extent `n`.
  std::string dim_str(int d, int64_t n) const;
};

// JAX's ShapedArray: the type of a value.
struct AbstractValue {
  Shape shape;
  DType dtype = DType::float32;
  bool weak_type = false;
  // Inside shard_map with check_vma: the mesh axes the value varies over (in mesh order);
  // empty elsewhere. Printed as {V:x} or {V:(x,y)}.
  std::vector<std::string> vma = {};
  // On a mesh with Explicit axes: the value's sharding over them, part of its type as in JAX.
  // Unset elsewhere (Auto meshes, uncommitted values, blocks of a partitioned program).
  std::optional<TypeSharding> sharding = {};
  bool operator==(const AbstractValue&) const = default;
  int64_t size() const { return shape.size(); }
  int64_t nbytes() const { return checked_nbytes("shape"); }
  // The bytes, after NumPy's limit on shapes (check_shape_size) with `api` naming the caller.
  int64_t checked_nbytes(const char* api) const;
  std::string str() const;  // jaxpr form: "f32[2,3]", "f32[16@a,16]"
  // jax.typeof's form: "float32[16@a,16@(a,b)]".
  std::string typeof_str() const;
};

struct ArrayImpl {
  AbstractValue aval;
  // Concrete data of an array on the default device; null while traced or when sharded.
  std::shared_ptr<Buffer> buffer;
  // Concrete data of a committed array: its sharding and one buffer per device (runtime/sharded.h).
  std::shared_ptr<ShardedData> sharded;
  std::shared_ptr<Trace> trace;  // the trace this value belongs to, if any
  int64_t trace_slot = -1;       // the trace's own identifier for the value
  // Donated to a jit call: the data went to the call, the type stays readable.
  bool deleted = false;
  // A C++ number made an Array (Array(2.0f)), as JAX's Python scalar given to a lax function (a
  // NumPy scalar to it): a literal wherever a trace reads it, in a shard_map body's
  // linearization too. jnp's promotion (ops::promote_dtypes) makes it an ordinary array, whose
  // 0-d values that linearization passes to the backward shard_map as residuals.
  bool scalar_literal = false;
};

// Sharded data is defined by the runtime, which lays it out over devices (runtime/sharded.h);
// core only holds it and asks two things of it, which the runtime implements in sharded.cpp.
// Waits until the launch that fills the shards is done; rethrows its error.
void wait_until_filled(const ShardedData& data);
// The whole value in one buffer: the single shard that holds it all, or a copy gathered once.
const std::shared_ptr<Buffer>& gathered_buffer(const ShardedData& data, const AbstractValue& aval);

// Whether x holds data (on the default device or sharded) rather than being traced.
bool is_concrete(const Array& x);
// The whole value of a concrete array in one buffer: the array's own buffer, or its shards
// brought together (once, counted as a device-to-host transfer). Waits for pending results.
// Raises RuntimeError for a deleted (donated) array, ConcretizationError for a traced one.
const std::shared_ptr<Buffer>& concrete_buffer(const Array& x, const char* api);

// A concrete array over an existing buffer: an uncommitted value, whose type carries no sharding.
Array make_array(AbstractValue aval, std::shared_ptr<Buffer> buffer);
// A concrete array with fresh, uninitialised storage.
Array make_uninitialized(AbstractValue aval, const char* api = "allocate");
// Host pointer to a concrete array's elements; throws ConcretizationError for traced values.
const void* host_data(const Array& x, const char* api);
const AbstractValue& aval_of(const Array& x);
// The abstract values of xs, in order.
std::vector<AbstractValue> types_of(std::span<const Array> xs);
// Hands x's data to a new Array and marks x deleted, as donating x to a jit call does; every
// handle of x then raises JAX's "Array has been deleted" on use.
Array take_and_delete(const Array& x);

}  // namespace spmd

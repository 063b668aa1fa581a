// Explicit mode ("sharding in types", JAX's AxisType.Explicit): on a mesh with Explicit axes a
// value's type carries its sharding over them (AbstractValue::sharding), and each primitive
// decides its results' shardings from its operands' when it is traced or run, raising JAX's
// errors where the shardings conflict. The partitioner then takes these shardings as given.
#pragma once

#include <spmd/sharding.h>

#include "core/array_impl.h"
#include "ir/params.h"

#include <optional>
#include <span>

namespace spmd {

struct Primitive;

// The sharding a value of rank `rank` laid out by `sharding` has in its type: its split over the
// mesh's Explicit axes; nullopt off a mesh with Explicit axes.
std::optional<TypeSharding> type_sharding_of(const Sharding& sharding, int rank);

// The abstract mesh of `mesh` with an unsplit value of rank `rank` on it.
TypeSharding unsplit_on(const Mesh& mesh, int rank);

// Sets the shardings of `out` (the types p's shape rule gave for `in`) as JAX's Explicit mode
// does, from p's sharding rule in factor form: a factor takes the axes of the operands that
// split it, operands that split it differently conflict, split reduction factors leave the
// result unsplit over them unless two operands split them (ambiguous without out_sharding), and
// an axis may split one result dim only. Raises ShardingError with JAX's message; does nothing
// when no operand's type carries a sharding, or when the shape rule already set them (calls,
// whose bodies are traced with sharded types).
void infer_type_shardings(const Primitive& p, std::span<const AbstractValue> in,
                          std::span<AbstractValue> out, const Params& params);

}  // namespace spmd

// Explicit mode ("sharding in types", JAX's AxisType.Explicit): on a mesh with Explicit axes a
// value's type carries its sharding over them (AbstractValue::sharding), and each primitive
// decides its results' shardings from its operands' when it is traced or run, raising JAX's
// errors where the shardings conflict. The partitioner then takes these shardings as given.
#pragma once

#include <spmd/sharding.h>

#include "core/array_impl.h"
#include "ir/params.h"

#include <functional>
#include <optional>
#include <span>
#include <string>

namespace spmd {

struct Primitive;

// The sharding a value of rank `rank` laid out by `sharding` has in its type: its split over the
// mesh's Explicit axes; nullopt off a mesh with Explicit axes.
std::optional<TypeSharding> type_sharding_of(const Sharding& sharding, int rank);

// The abstract mesh of `mesh` with an unsplit value of rank `rank` on it.
TypeSharding unsplit_on(const Mesh& mesh, int rank);

// The type of axis `axis` of a type's abstract mesh.
AxisType axis_type_of(const TypeSharding::Axis& axis);

// The sharding of a block of rank `rank` in the body of a shard_map over `mesh` that is manual
// over `manual` (JAX's _shard_aval): on the mesh with those axes Manual, split as `outer` (the
// operand's type) is over the other axes.
TypeSharding manual_block_sharding(const Mesh& mesh, const std::vector<std::string>& manual,
                                   const std::optional<TypeSharding>& outer, int rank);

// The sharding a shard_map result of rank `rank` has outside the body (JAX's _unshard_aval):
// split over the mesh's Explicit axes as its out spec `spec` says, and over the axes the body is
// not manual over as the body's result `block` is; nullopt on a mesh without Explicit axes.
std::optional<TypeSharding> manual_result_sharding(const Mesh& mesh, const PartitionSpec& spec,
                                                   const std::optional<TypeSharding>& block,
                                                   int rank);

// `body` with the shardings of its types, and its sub-programs', dropped where they split no dim
// (the same Program when none has one): a device running a shard_map body on its blocks learns
// nothing from a Manual mesh, and the compiler treats such values as untyped.
std::shared_ptr<const Program> without_unsplit_types(const std::shared_ptr<const Program>& body);

// Whether a type's abstract mesh has an Explicit axis.
bool has_explicit_axis(const std::optional<TypeSharding>& t);

// Whether two types' shardings agree as JAX's core.typematch compares them: they are equal, or
// neither is on a mesh with an Explicit axis (untyped values and values whose meshes have Manual
// and Auto axes only agree with each other).
bool shardings_match(const std::optional<TypeSharding>& a, const std::optional<TypeSharding>& b);

// The spec of t's first `length` dims (a type's sharding in full for t.dims.size()).
PartitionSpec spec_of(const TypeSharding& t, size_t length);

// The mesh of t's axis names and types over the devices of `devices` (a mesh of the same shape).
Mesh mesh_of_type(const Mesh& devices, const TypeSharding& t);

// JAX's repr of the abstract mesh t is on: "AbstractMesh('a': 4, 'b': 2, axis_types=(...), ...)".
std::string abstract_mesh_str(const TypeSharding& t);

// An out_sharding argument as an op's param: the result's sharding and the length of the spec
// it was given with. JAX's jaxprs print a given spec as it was written (P('a',) for a [16, 16]
// result) and a type's sharding, which the transposes pass, in full (P('a', None)).
struct GivenOutSharding {
  TypeSharding sharding;
  size_t spec_length = 0;
  bool operator==(const GivenOutSharding&) const = default;
};

// The sharding an out_sharding param (dot_general's out_sharding, reshape's sharding; a
// TypeSharding or a GivenOutSharding) fixes for the result, or null when the param is None or
// of another kind (a sharding constraint's).
const TypeSharding* out_sharding_param(const Params& params, std::string_view key);
// The out_sharding param `key` with a dim split over `axes` (vmap's explicit mesh axes; unsplit
// when empty) inserted at `d`, as JAX's get_sharding_for_vmap gives a batched equation (a given
// spec keeps its written entries, and one more); None stays None.
ParamValue batched_out_sharding(const Params& params, std::string_view key, int d,
                                const std::vector<std::string>& axes);
// The out_sharding param of an equation with these params, whichever its name; null if none.
const TypeSharding* given_out_sharding(const Params& params);
// `params` with their out_sharding params (out_sharding, sharding: a type's sharding) None: the
// params of an equation run on blocks, whose types carry no sharding.
Params without_out_sharding(Params params);

// An out_sharding param's value prints as JAX prints the param in a jaxpr: a NamedSharding on
// the abstract mesh, NamedSharding(mesh=AbstractMesh(...), spec=P('a',)).
template <>
struct ParamTraits<TypeSharding> {
  static constexpr std::string_view name = "TypeSharding";
  static std::string str(const TypeSharding& t);
  static size_t hash(const TypeSharding& t);
};
template <>
struct ParamTraits<GivenOutSharding> {
  static constexpr std::string_view name = "GivenOutSharding";
  static std::string str(const GivenOutSharding& given);
  static size_t hash(const GivenOutSharding& given);
};

// JAX's _get_sharding_for_varying_out_shape, the type_sharding_rule of slice and
// dynamic_slice (`what` names the op in its error, after the primitive `prim`): the result keeps
// its operand's sharding, and a split dim whose extent changes must stay divisible by its axes.
std::function<void(std::span<const AbstractValue>, std::span<AbstractValue>, const Params&)>
keep_operand_sharding(std::string prim, std::string what);

// Sets the shardings of `out` (the types p's shape rule gave for `in`) as JAX's Explicit mode
// does, from p's sharding rule in factor form: a factor takes the axes of the operands that
// split it, operands that split it differently conflict, split reduction factors leave the
// result unsplit over them unless two operands split them (ambiguous without out_sharding), and
// an axis may split one result dim only. Raises ShardingError with JAX's message; does nothing
// when the shape rule already set them (calls, whose bodies are traced with sharded types) or
// when no operand's type carries a sharding and no out_sharding param is given. A given
// out_sharding param is the result's sharding as it is; a primitive with its own
// type_sharding_rule (reshape) decides alone.
void infer_type_shardings(const Primitive& p, std::span<const AbstractValue> in,
                          std::span<AbstractValue> out, const Params& params);

// The shardings p's factor rule gives `out`, as infer_type_shardings without p's own
// type_sharding_rule: for a rule that checks what JAX's checks and then shards as the factors say.
void factor_type_shardings(const Primitive& p, std::span<const AbstractValue> in,
                           std::span<AbstractValue> out, const Params& params);

}  // namespace spmd

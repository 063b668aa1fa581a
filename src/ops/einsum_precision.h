// The precision of a product: JAX's canonicalize_precision for the `precision` of jnp.einsum,
// jnp.dot and jnp.matmul (the value given, checked and made into dot_general's precision
// param), and that param's traits.
#pragma once

#include <spmd/lax_types.h>
#include <spmd/ops.h>

#include "ir/params.h"

#include <optional>
#include <string>
#include <string_view>

namespace spmd::ops {

// None stays none; a name or a Precision applies to both operands; a preset's name becomes the
// preset. Throws JAX's ValueError (or its TypeError for a pair of preset names), prefixed with
// `api`, for anything else.
std::optional<lax::DotPrecision> canonicalize_precision(const EinsumPrecision& precision,
                                                        std::string_view api);

// As the jaxpr prints dot_general's precision: "(Precision.HIGH, Precision.HIGH)", a preset's
// name, or the algorithm's repr.
std::string precision_str(const lax::DotPrecision& precision);

}  // namespace spmd::ops

namespace spmd {
template <>
struct ParamTraits<lax::DotPrecision> {
  static constexpr std::string_view name = "Precision";
  static std::string str(const lax::DotPrecision& p) { return ops::precision_str(p); }
  static size_t hash(const lax::DotPrecision& p);
};
}  // namespace spmd

// Which result a donated argument's buffer backs (jit's donate_argnums), as JAX 0.10.2 pairs
// them before handing the program to XLA (mlir._set_up_aliases): each result in order takes the
// first donated argument left with its shape and dtype; then each donated argument left, in
// order, takes the first result left with as many elements (and, here, bytes: a buffer holds
// the result whole). On a mesh the types are one device's blocks, as JAX pairs sharded types.
#pragma once

#include "core/array_impl.h"

#include <span>
#include <string>
#include <vector>

namespace spmd {

// Per argument: the index of the result its buffer backs, or -1 (not donated, or no result
// left for it).
std::vector<int> donation_aliases(std::span<const AbstractValue> in_types,
                                  const std::vector<bool>& donated,
                                  std::span<const AbstractValue> out_types);

// JAX's warning for donated arguments no result can take ("Some donated buffers were not
// usable: float32[4,4].\nSee an explanation at ..."), or "" when every one is paired.
std::string unusable_donations_warning(std::span<const AbstractValue> in_types,
                                       const std::vector<bool>& donated,
                                       const std::vector<int>& aliases);

}  // namespace spmd

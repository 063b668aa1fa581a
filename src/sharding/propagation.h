// Sharding propagation: given the splits of a Program's inputs and outputs that are known
// (committed arguments, in_shardings, out_shardings) and the constraints inside it, decides a
// split for every value, as Shardy's propagation does in JAX. Splits move between the values of
// an equation through the factors of the primitive's sharding rule (ir/sharding_rule.h), to a
// fixed point: elementwise equations first, then all; forwards and backwards; a conflict is
// resolved towards the larger tensor.
#pragma once

#include <spmd/sharding.h>

#include "ir/program.h"
#include "ir/sharding_rule.h"

#include <optional>
#include <string>
#include <vector>

namespace spmd {

// How one value is split: per dim, the mesh axes splitting it, major first. A closed dim keeps
// its split (a committed argument, a constraint); an open one may be refined by propagation.
struct ValueSplit {
  std::vector<std::vector<std::string>> dims;
  std::vector<bool> closed;

  static ValueSplit replicated(int rank) {
    return {std::vector<std::vector<std::string>>(size_t(rank)), std::vector<bool>(size_t(rank))};
  }
  static ValueSplit of(const PartitionSpec& spec, int rank, bool closed);
  PartitionSpec spec() const;
  // The mesh axes used by any dim.
  std::vector<std::string> axes() const;
  bool operator==(const ValueSplit& o) const { return dims == o.dims; }
};

// The block of a value of shape `global` split by `split` over `mesh`: of the ceil size where a
// dim is split unevenly (the last blocks padded, as JAX lays out uneven dims).
Shape block_shape(const Shape& global, const std::vector<std::vector<std::string>>& split,
                  const Mesh& mesh);

// `split` with each dim's axes cut to the longest prefix whose product divides the dim: how JAX
// splits a result of jit whose value was split unevenly inside (arrays hold even blocks only).
std::vector<std::vector<std::string>> even_split(std::vector<std::vector<std::string>> split,
                                                 const Shape& shape, const Mesh& mesh);

// One split per variable of `program` (indexed by variable id). `in` and `out` hold a split
// for the inputs and outputs that have one (nullopt: free to choose); given splits are closed.
std::vector<ValueSplit> propagate_shardings(const Program& program, const Mesh& mesh,
                                            const std::vector<std::optional<ValueSplit>>& in,
                                            const std::vector<std::optional<ValueSplit>>& out);

// `split`, the fixed split of operand or result k of `e` (its rule's fixed_operands[k] or
// fixed_results[k]), with the rule's open dims of pair k taken from the split propagation gave
// result k: what the equation runs with, operand and result alike.
std::vector<std::vector<std::string>> with_open_dims(std::vector<std::vector<std::string>> split,
                                                     const ShardingRule& rule, const Equation& e,
                                                     size_t k,
                                                     const std::vector<ValueSplit>& splits);

// The splits fixed by an equation's rule refer to this mesh (a sharding_constraint's sharding or
// shard_map's mesh), if the rule fixes any.
std::optional<Mesh> fixed_mesh(const ShardingRule& rule);

}  // namespace spmd

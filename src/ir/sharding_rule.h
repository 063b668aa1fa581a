// A primitive's sharding rule as data, in Shardy's factor form (OpShardingRule): every dim of
// every operand and result is a list of factors, and each factor is split over mesh axes as a
// whole. `matmul` is ([i, k], [k, j])->([i, j]) with k a reduction factor: sharding k leaves
// each device a partial sum. Propagation moves shardings between tensors through shared factors;
// the partitioner picks one split per factor and reshards operands to it (src/sharding).
#pragma once

#include "core/array_impl.h"
#include "ir/params.h"
#include "ir/program.h"

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace spmd {

struct Primitive;

enum class FactorKind : uint8_t {
  // Appears in operands and results: each device computes its block of the result from its
  // blocks of the operands.
  pass_through,
  // Appears in operands only (contracting dims, reduced dims): a device holding part of it
  // computes a partial result that the rule's combiner completes across the factor's axes.
  reduction,
  // Must not be split: every device needs the whole extent (a sort or scan dim, a dim that a
  // slice moves data along, iota's dims). Propagation still moves splits through it, as Shardy
  // does: the result takes its operand's split and the partitioner gathers and slices around
  // the equation.
  need_replication,
  // Shared by dims whose extents differ and whose data moves between blocks (the dim a
  // concatenate joins along, a padded dim): split and propagated as one factor of the result's
  // size, computed on whole extents like need_replication.
  permutation,
};

struct ShardingRule {
  // One dim: its factors, major to minor. Empty for a size-1 dim that broadcasts. More than one
  // for a dim that reshape splits or merges (a compound factor).
  using Dim = std::vector<int>;
  using Tensor = std::vector<Dim>;

  std::vector<Tensor> operands;
  std::vector<Tensor> results;
  std::vector<int64_t> factor_sizes;
  std::vector<FactorKind> factor_kinds;
  // Per factor: whether the primitive computes each block along it from the same blocks of its
  // operands (an element from the elements at its own index along the factor, or a partial
  // reduction the combiner completes), so that padding at the end of a block stays in the
  // padding of the results. Such a factor may run on padded blocks when it is split unevenly;
  // others are gathered whole around the equation. Rules set it (pad_all); add_factor does not.
  std::vector<bool> factor_pads;
  // The reduction collective (psum for sums and dots, pmax, pmin) that completes the partial
  // results of reduction factors over their axes; null makes reduction factors need
  // replication.
  const Primitive* combiner = nullptr;
  // Splits the primitive fixes itself (sharding_constraint's sharding, shard_map's specs): per
  // operand and result, the mesh axes of each dim, major first. Empty when it fixes none;
  // `fixed_on` is then the param object (a Mesh or a Sharding) they refer to.
  using Split = std::vector<std::vector<std::string>>;
  std::vector<Split> fixed_operands;
  std::vector<Split> fixed_results;
  ObjectParam fixed_on;
  // Per pair of operand k and result k, the dims of their fixed splits the primitive leaves open
  // (a constraint's UNCONSTRAINED dims; empty when none): propagation may split them further,
  // and the pair then runs with the split propagation gave result k there.
  std::vector<std::vector<bool>> open_dims;
  // Whether dim d of operand or result k is open.
  bool is_open(size_t k, size_t d) const {
    return k < open_dims.size() && d < open_dims[k].size() && open_dims[k][d];
  }
  // Per fixed result, how many dims its spec was written with (JAX prints a fixed result's spec
  // as written: P('a',) for a rank-2 result split on dim 0 given so); empty: one per dim.
  std::vector<size_t> fixed_results_written;

  // Dims along which data moves at an affine index (slice, pad, rev, concatenate): element j of
  // result dim `dim` is element `(scale * j + offset) / spread` of the same dim of operand
  // `operand` when `spread` divides `scale * j + offset` (pad's interior padding spreads the
  // operand out), or operand `fill` (a scalar; -1 for none) where it does not or where that
  // index is outside the operand. Several operands shifted along one dim (concatenate) each give
  // the result rows they cover. Set only when every dim that moves data has one and the other
  // dims pass through: the partitioner then keeps those dims split and moves only the halo rows
  // between neighbours (transforms/halo.h).
  struct Shift {
    int dim;
    int64_t scale, offset;
    int64_t spread = 1;
    int operand = 0;
  };
  std::vector<Shift> shifts;
  int fill = -1;

  // An equation holding sub-programs (control flow) runs them on blocks: each input and output
  // of a body is one value with an operand or result of the equation, which it sees less `lead`
  // leading dims (a scan's iteration dim, never split). Index -1 ties a body output to nothing:
  // a predicate, which must be the same on every device; with `lead` > 0, a batched predicate
  // (vmap of a while) whose dims are the leading `lead` dims of every carry: each device holds
  // its lanes, and the loop runs while any lane on any device is active. When `bodies` is set,
  // propagation and the partitioner use them and ignore the factors above (the replicated rule, for
  // whatever reads factors only).
  struct Link {
    int index = -1;
    int lead = 0;
  };
  struct Body {
    std::string name;  // "body_jaxpr", "branches[1]": how the partitioner's account names it
    ProgramRef program;
    std::vector<Link> inputs, outputs;
  };
  std::vector<Body> bodies;
  // (operand, result) pairs that are one value: a loop's carry in and carry out.
  std::vector<std::pair<int, int>> carries;
  // The equation's params with its bodies replaced by these, in the order of `bodies`.
  std::function<Params(const Params&, std::vector<ProgramRef>)> with_bodies;

  // The values an equation with bodies shares between its operands, results and the bodies'
  // inputs and outputs, each to be split one way (in the body's rank). A member with body -1 is
  // an operand (output false) or a result of the equation.
  struct Member {
    int body;
    int index;
    bool output;
    int lead;
  };
  std::vector<std::vector<Member>> body_values() const;

  // Adds a factor and returns its index.
  int add_factor(int64_t size, FactorKind kind = FactorKind::pass_through);
  int num_factors() const { return int(factor_sizes.size()); }
  // Marks every factor as running on padded blocks: the rule of a primitive whose every block
  // maps to blocks (factors that need replication are never split, so marking them is moot).
  void pad_all();
  // Whether factor f is the only factor of every dim holding it. Such a factor may be split
  // unevenly: its blocks are padded to the ceil size at the end of the dim, where no other
  // factor's elements live (a reshape's compound dim would interleave them).
  bool whole_dim(int f) const;
  // Whether an uneven split of factor f runs on padded blocks: a whole-dim factor the rule
  // marks as keeping padding in place.
  bool pads(int f) const { return factor_pads[size_t(f)] && whole_dim(f); }
  // Shardy's text: "([i, k], [k, j])->([i, j]) {i=8, j=16, k=4} reduction={k}", with
  // need_replication={...} when there are such factors and "[]" for a dim without factors.
  std::string str() const;
};

// The rule of one application of a primitive to operands and results of these global types.
using ShardingRuleFn = std::function<ShardingRule(
    std::span<const AbstractValue> in, std::span<const AbstractValue> out, const Params& params)>;

// What a device runs for its blocks, when that is not the global equation as it is: params that
// spell global sizes (reshape's new_sizes, broadcast_in_dim's shape) get the block's sizes, and
// a boundary (shard_map) runs its per-device body. A null primitive passes the operands on as
// the results (a sharding constraint, once its operand has the fixed split).
struct LocalEquation {
  const Primitive* primitive;
  Params params;
};
using LocalizeFn =
    std::function<LocalEquation(const Params& params, std::span<const AbstractValue> local_in,
                                std::span<const AbstractValue> local_out)>;

// Rules for the common shapes of primitives.
// Every operand of the result's rank shares the result's factors dim by dim, except its size-1
// dims that broadcast; operands of lower rank (scalars) have none.
ShardingRule elementwise_sharding_rule(std::span<const AbstractValue> in,
                                       std::span<const AbstractValue> out);
// Every dim of every operand and result needs replication: correct for any primitive, and the
// rule of those whose blocks cannot be computed apart.
ShardingRule replicated_sharding_rule(std::span<const AbstractValue> in,
                                      std::span<const AbstractValue> out);

struct Program;
struct Equation;
// The rule of equation `e` of `program`, for the types of its operands and results.
ShardingRule sharding_rule_of(const Program& program, const Equation& e);

}  // namespace spmd

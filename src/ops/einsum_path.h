// The contraction order of jnp.einsum: opt_einsum 3.4's path search (paths.py), which
// jnp.einsum calls through contract_path. A pure function of the labels and their sizes; it
// reproduces opt_einsum's choice exactly, ties included, down to the iteration order of the
// Python sets it walks (see PySet in einsum_path.cpp), but for random-greedy, whose draws JAX
// does not make reproducible (see random_greedy).
#pragma once

#include <spmd/ops.h>

#include <cstdint>
#include <string>
#include <vector>

namespace spmd::einsum_path {

// A set of labels as bits: bit i is the contraction's i-th distinct label.
using LabelSet = uint64_t;
using Path = std::vector<std::vector<int64_t>>;

// One contraction: each operand's labels, the output's, and each label's size.
struct Problem {
  std::vector<LabelSet> inputs;
  LabelSet output = 0;
  std::vector<int64_t> sizes;
};

// The problem of `inputs` -> `output` (labels as code points) with the operands' `shapes`; the
// size of a label is its largest (a size 1 broadcasts). Throws ValueError past 64 labels.
Problem make_problem(const std::vector<std::u32string>& inputs, const std::u32string& output,
                     const std::vector<std::vector<int64_t>>& shapes);

// opt_einsum's strategies, each with its path of positions (the result appended at the end).
Path optimal(const Problem& p);
Path branch(const Problem& p, int nbranch);  // nbranch 0: every branch ("branch-all")
Path greedy(const Problem& p);
Path auto_path(const Problem& p);
Path dynamic_programming(const Problem& p);
Path auto_hq(const Problem& p);
// random-greedy with `repeats` trials. opt_einsum's trials draw from Python's `random` in an
// order that follows the hash of the label strings, which changes with every Python process
// (PYTHONHASHSEED), so JAX's path is not reproducible. This one is: trial 0 is greedy's path,
// the others greedy runs with opt_einsum's jittered costs and Boltzmann choice among the 8 best
// candidates, drawn from a 64-bit Mersenne Twister seeded with the trial number; the path of
// fewest flops (then smallest largest intermediate, then earliest) wins. So its flops never
// exceed greedy's.
Path random_greedy(const Problem& p, int repeats);

// The flops opt_einsum counts for a path (contract_path's opt_cost).
int64_t flops(const Problem& p, const Path& path);

// The path contract_path takes for jnp.einsum's `optimize`: a strategy by name (any case),
// true ("optimal"), false (JAX's Unoptimized: positions 0 and 1 each time) or the path given.
// Fewer than three operands are contracted at once, whatever the strategy. Throws as
// opt_einsum for an unknown name.
Path choose(const Problem& p, const EinsumOptimize& optimize);

}  // namespace spmd::einsum_path

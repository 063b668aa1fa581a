// opt_einsum 3.4's path search (paths.py), step for step. Where opt_einsum walks a Python set
// of tensor ids (itertools.combinations over `remaining` in optimal and branch), the order
// decides ties and the branch search's pruning, so PySet keeps CPython 3.11's table layout.
// Flop counts are int64 (Python's are unbounded): contractions past 2^63 flops are out of reach
// anyway.
#include "ops/einsum_path.h"

#include <spmd/error.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

namespace spmd::einsum_path {
namespace {

constexpr int64_t kInf = std::numeric_limits<int64_t>::max();

// ---- CPython's set of small ints (Objects/setobject.c: hash(i) == i, linear probes of 9 slots,
// then perturbation; a resize when 3/5 full; set_merge, set_difference and copies as there) ----
class PySet {
 public:
  static PySet of(std::initializer_list<int64_t> keys) {
    PySet s;
    for (int64_t k : keys) s.add(k);
    return s;
  }
  static PySet range(int64_t n) {
    PySet s;
    for (int64_t k = 0; k < n; ++k) s.add(k);
    return s;
  }
  // The keys in iteration order.
  std::vector<int64_t> keys() const {
    std::vector<int64_t> out;
    for (int64_t k : table_)
      if (k >= 0) out.push_back(k);
    return out;
  }
  int64_t size() const { return used_; }
  bool contains(int64_t k) const {
    return std::find(table_.begin(), table_.end(), k) != table_.end();
  }

  // (*this - other) | {added}, as Python builds it.
  PySet minus_plus(const PySet& other, int64_t added) const {
    PySet r = difference(other).copy();
    r.merge(of({added}));
    return r;
  }

 private:
  static constexpr int64_t kEmpty = -1, kDummy = -2;
  static constexpr size_t kLinearProbes = 9, kPerturbShift = 5;

  size_t mask() const { return table_.size() - 1; }

  static void insert_clean(std::vector<int64_t>& table, int64_t k) {
    const size_t mask = table.size() - 1;
    size_t perturb = size_t(k), i = size_t(k) & mask;
    while (true) {
      if (table[i] == kEmpty) {
        table[i] = k;
        return;
      }
      if (i + kLinearProbes <= mask)
        for (size_t j = 1; j <= kLinearProbes; ++j)
          if (table[i + j] == kEmpty) {
            table[i + j] = k;
            return;
          }
      perturb >>= kPerturbShift;
      i = (i * 5 + 1 + perturb) & mask;
    }
  }

  void resize(int64_t minused) {
    size_t n = 8;
    while (n <= size_t(minused)) n <<= 1;
    std::vector<int64_t> old = std::exchange(table_, std::vector<int64_t>(n, kEmpty));
    for (int64_t k : old)
      if (k >= 0) insert_clean(table_, k);
    fill_ = used_;
  }

  void add(int64_t k) {
    const size_t mask = this->mask();
    size_t perturb = size_t(k), i = size_t(k) & mask;
    std::optional<size_t> free;
    while (true) {
      const size_t probes = i + kLinearProbes <= mask ? kLinearProbes : 0;
      for (size_t e = i; e <= i + probes; ++e) {
        if (table_[e] == kEmpty) {
          ++used_;
          if (free) {
            table_[*free] = k;
            return;
          }
          table_[e] = k;
          if (++fill_ * 5 >= int64_t(mask) * 3) resize(used_ * 4);
          return;
        }
        if (table_[e] == k) return;
        if (table_[e] == kDummy && !free) free = e;
      }
      perturb >>= kPerturbShift;
      i = (i * 5 + 1 + perturb) & mask;
    }
  }

  void discard(int64_t k) {
    auto it = std::find(table_.begin(), table_.end(), k);
    if (it == table_.end()) return;
    *it = kDummy;
    --used_;
  }

  void merge(const PySet& other) {
    if (other.used_ == 0) return;
    if ((fill_ + other.used_) * 5 >= int64_t(mask()) * 3) resize((used_ + other.used_) * 2);
    if (fill_ == 0 && mask() == other.mask() && other.fill_ == other.used_) {
      table_ = other.table_;
      fill_ = other.fill_;
      used_ = other.used_;
    } else if (fill_ == 0) {
      fill_ = used_ = other.used_;
      for (int64_t k : other.table_)
        if (k >= 0) insert_clean(table_, k);
    } else {
      for (int64_t k : other.table_)
        if (k >= 0) add(k);
    }
  }

  PySet copy() const {
    PySet r;
    r.merge(*this);
    return r;
  }

  PySet difference(const PySet& other) const {
    if ((used_ >> 2) > other.used_) {
      PySet r = copy();
      for (int64_t k : other.keys()) r.discard(k);
      return r;
    }
    PySet r;
    for (int64_t k : keys())
      if (!other.contains(k)) r.add(k);
    return r;
  }

  std::vector<int64_t> table_ = std::vector<int64_t>(8, kEmpty);
  int64_t fill_ = 0, used_ = 0;
};

// ---- helpers.py ---------------------------------------------------------------------------------
int64_t size_of(LabelSet s, const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (; s; s &= s - 1) n *= sizes[size_t(std::countr_zero(s))];
  return n;
}

int64_t flop_count(LabelSet labels, bool inner, int64_t terms, const std::vector<int64_t>& sizes) {
  return size_of(labels, sizes) * (std::max<int64_t>(1, terms - 1) + (inner ? 1 : 0));
}

// ssa_to_linear: static single assignment ids to positions in the shrinking list.
Path ssa_to_linear(const Path& ssa_path) {
  int64_t n = 1;
  for (const auto& step : ssa_path) n += int64_t(step.size()) - 1;
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(i);
  Path path;
  for (const auto& step : ssa_path) {
    std::vector<int64_t> positions;
    for (int64_t s : step)
      positions.push_back(std::lower_bound(ids.begin(), ids.end(), s) - ids.begin());
    std::sort(positions.begin(), positions.end());
    for (auto it = positions.rbegin(); it != positions.rend(); ++it) ids.erase(ids.begin() + *it);
    ids.push_back(n++);
    path.push_back(positions);
  }
  return path;
}

// calc_k12_flops: the labels of i and j's result (those the output or another remaining tensor
// holds) and the flops of making it.
std::pair<LabelSet, int64_t> k12_flops(const std::vector<LabelSet>& inputs, const Problem& p,
                                       const PySet& remaining, int64_t i, int64_t j) {
  const LabelSet either = inputs[size_t(i)] | inputs[size_t(j)];
  const LabelSet shared = inputs[size_t(i)] & inputs[size_t(j)];
  LabelSet keep = p.output;
  for (int64_t r : remaining.keys())
    if (r != i && r != j) keep |= inputs[size_t(r)];
  return {either & keep, flop_count(either, (shared & ~keep) != 0, 2, p.sizes)};
}

// The pairs itertools.combinations(remaining, 2) gives, each as (smaller, larger).
std::vector<std::pair<int64_t, int64_t>> pairs(const PySet& remaining) {
  const std::vector<int64_t> keys = remaining.keys();
  std::vector<std::pair<int64_t, int64_t>> out;
  for (size_t a = 0; a < keys.size(); ++a)
    for (size_t b = a + 1; b < keys.size(); ++b)
      out.emplace_back(std::min(keys[a], keys[b]), std::max(keys[a], keys[b]));
  return out;
}

using K12Cache = std::map<std::pair<LabelSet, LabelSet>, std::pair<LabelSet, int64_t>>;

// opt_einsum caches a pair's result by the two label sets, whatever else remains.
std::pair<LabelSet, int64_t> cached_k12(K12Cache& cache, const std::vector<LabelSet>& inputs,
                                        const Problem& p, const PySet& remaining, int64_t i,
                                        int64_t j) {
  const auto key = std::make_pair(inputs[size_t(i)], inputs[size_t(j)]);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, k12_flops(inputs, p, remaining, i, j)).first;
  return it->second;
}

// ---- optimal ------------------------------------------------------------------------------------
struct Optimal {
  const Problem& p;
  K12Cache cache;
  int64_t best_flops = kInf;
  Path best_ssa;

  void iterate(const Path& path, const PySet& remaining, const std::vector<LabelSet>& inputs,
               int64_t flops) {
    if (remaining.size() == 1) {
      best_flops = flops;
      best_ssa = path;
      return;
    }
    for (auto [i, j] : pairs(remaining)) {
      const auto [k12, flops12] = cached_k12(cache, inputs, p, remaining, i, j);
      const int64_t new_flops = flops + flops12;
      if (new_flops >= best_flops) continue;
      Path next_path = path;
      next_path.push_back({i, j});
      std::vector<LabelSet> next_inputs = inputs;
      next_inputs.push_back(k12);
      iterate(next_path, remaining.minus_plus(PySet::of({i, j}), int64_t(inputs.size())),
              next_inputs, new_flops);
    }
  }
};

// ---- branch -------------------------------------------------------------------------------------
// BranchBound with minimize="flops", cost_fn="memory-removed", cutoff_flops_factor=4.
struct Branch {
  const Problem& p;
  int nbranch;
  K12Cache cache;
  int64_t best_flops = kInf, best_size = kInf;
  Path best_ssa;
  std::map<size_t, int64_t> best_progress;

  // (cost, flops12, new_flops, new_size, i, j, k12): Python's tuple, compared in that order.
  using Candidate = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, LabelSet>;

  std::optional<Candidate> assess(const std::vector<LabelSet>& inputs, const PySet& remaining,
                                  int64_t flops, int64_t size, int64_t i, int64_t j) {
    const auto [k12, flops12] = cached_k12(cache, inputs, p, remaining, i, j);
    const int64_t size12 = size_of(k12, p.sizes);
    const int64_t new_flops = flops + flops12, new_size = std::max(size, size12);
    if (!(std::pair(new_flops, new_size) < std::pair(best_flops, best_size))) return std::nullopt;
    auto progress = best_progress.try_emplace(inputs.size(), kInf).first;
    if (new_flops < progress->second)
      progress->second = new_flops;
    else if (progress->second != kInf && new_flops > 4 * progress->second)
      return std::nullopt;
    const int64_t cost =
        size12 - size_of(inputs[size_t(i)], p.sizes) - size_of(inputs[size_t(j)], p.sizes);
    return Candidate{cost, flops12, new_flops, new_size, i, j, k12};
  }

  // Outer products only when nothing else is left.
  std::vector<Candidate> candidates(const std::vector<LabelSet>& inputs, const PySet& remaining,
                                    int64_t flops, int64_t size) {
    std::vector<Candidate> out;
    for (bool outer : {false, true}) {
      for (auto [i, j] : pairs(remaining)) {
        if (!outer && (inputs[size_t(i)] & inputs[size_t(j)]) == 0) continue;
        if (auto c = assess(inputs, remaining, flops, size, i, j)) out.push_back(*c);
      }
      if (!out.empty()) break;
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  void iterate(const Path& path, const std::vector<LabelSet>& inputs, const PySet& remaining,
               int64_t flops, int64_t size) {
    if (remaining.size() == 1) {
      best_size = size;
      best_flops = flops;
      best_ssa = path;
      return;
    }
    const std::vector<Candidate> found = candidates(inputs, remaining, flops, size);
    for (size_t b = 0; b < found.size() && (nbranch == 0 || int(b) < nbranch); ++b) {
      const auto& [cost, flops12, new_flops, new_size, i, j, k12] = found[b];
      Path next_path = path;
      next_path.push_back({i, j});
      std::vector<LabelSet> next_inputs = inputs;
      next_inputs.push_back(k12);
      iterate(next_path, next_inputs,
              remaining.minus_plus(PySet::of({i, j}), int64_t(inputs.size())), new_flops, new_size);
    }
  }
};

// ---- greedy (ssa_greedy_optimize with the default chooser and cost)
// ------------------------------
struct Greedy {
  const Problem& p;
  LabelSet output;
  std::map<LabelSet, int64_t> remaining;  // key -> ssa id
  std::map<int, std::set<LabelSet>> dim_to_keys;
  LabelSet ref2 = 0, ref3 = 0;  // labels held by at least 2 (3) remaining tensors
  std::map<LabelSet, int64_t> footprints;
  int64_t next_id;
  Path ssa_path;

  // ((cost, id2, id1), k1, k2, k12), compared as Python's tuple.
  using Candidate = std::tuple<int64_t, int64_t, int64_t, LabelSet, LabelSet, LabelSet>;
  std::multiset<Candidate> queue;  // a heap

  explicit Greedy(const Problem& problem)
      : p(problem), output(problem.output), next_id(int64_t(problem.inputs.size())) {}

  Candidate candidate(LabelSet k1, LabelSet k2) const {
    const LabelSet either = k1 | k2, two = k1 & k2, one = either & ~two;
    const LabelSet k12 = (either & output) | (two & ref3) | (one & ref2);
    const int64_t cost = size_of(k12, p.sizes) - footprints.at(k1) - footprints.at(k2);
    int64_t id1 = remaining.at(k1), id2 = remaining.at(k2);
    if (id1 > id2) {
      std::swap(k1, k2);
      std::swap(id1, id2);
    }
    return {cost, id2, id1, k1, k2, k12};
  }

  void push_best(LabelSet k1, const std::vector<LabelSet>& k2s) {
    std::optional<Candidate> best;
    for (LabelSet k2 : k2s) {
      const Candidate c = candidate(k1, k2);
      if (!best || c < *best) best = c;
    }
    queue.insert(*best);
  }

  void update_ref_counts(LabelSet dims) {
    for (; dims; dims &= dims - 1) {
      const int dim = std::countr_zero(dims);
      const size_t count = dim_to_keys[dim].size();
      const LabelSet bit = LabelSet(1) << dim;
      ref2 = count >= 2 ? ref2 | bit : ref2 & ~bit;
      ref3 = count >= 3 ? ref3 | bit : ref3 & ~bit;
    }
  }

  void add_key_dims(LabelSet key) {
    for (LabelSet d = key & ~output; d; d &= d - 1) dim_to_keys[std::countr_zero(d)].insert(key);
  }

  // Hadamard products of equal label sets first, then the first candidates.
  void start() {
    LabelSet common = ~LabelSet(0);
    for (LabelSet in : p.inputs) common &= in;
    output |= common;
    for (size_t id = 0; id < p.inputs.size(); ++id) {
      const LabelSet key = p.inputs[id];
      if (auto it = remaining.find(key); it != remaining.end()) {
        ssa_path.push_back({it->second, int64_t(id)});
        it->second = next_id++;
      } else {
        remaining[key] = int64_t(id);
      }
    }
    for (const auto& [key, id] : remaining) add_key_dims(key);
    for (const auto& [dim, keys] : dim_to_keys) update_ref_counts(LabelSet(1) << dim);
    for (const auto& [key, id] : remaining) footprints[key] = size_of(key, p.sizes);
    for (const auto& [dim, keys] : dim_to_keys) {
      std::vector<LabelSet> sorted(keys.begin(), keys.end());
      std::sort(sorted.begin(), sorted.end(),
                [&](LabelSet a, LabelSet b) { return remaining.at(a) < remaining.at(b); });
      for (size_t i = 0; i + 1 < sorted.size(); ++i)
        push_best(sorted[i], std::vector<LabelSet>(sorted.begin() + long(i) + 1, sorted.end()));
    }
  }

  void contract(LabelSet k1, LabelSet k2, LabelSet k12) {
    const int64_t id1 = remaining.at(k1), id2 = remaining.at(k2);
    remaining.erase(k1);
    remaining.erase(k2);
    for (LabelSet d = k1 & ~output; d; d &= d - 1) dim_to_keys[std::countr_zero(d)].erase(k1);
    for (LabelSet d = k2 & ~output; d; d &= d - 1) dim_to_keys[std::countr_zero(d)].erase(k2);
    ssa_path.push_back({id1, id2});
    if (auto it = remaining.find(k12); it != remaining.end())
      ssa_path.push_back({it->second, next_id++});
    else
      add_key_dims(k12);
    remaining[k12] = next_id++;
    update_ref_counts(k1 | (k2 & ~output));
    footprints[k12] = size_of(k12, p.sizes);
    std::set<LabelSet> k2s;
    for (LabelSet d = k12; d; d &= d - 1) {
      const auto& keys = dim_to_keys[std::countr_zero(d)];
      k2s.insert(keys.begin(), keys.end());
    }
    k2s.erase(k12);
    if (!k2s.empty()) push_best(k12, std::vector<LabelSet>(k2s.begin(), k2s.end()));
  }

  // Outer products of what is left, smallest first.
  void outer_products() {
    std::set<std::tuple<int64_t, int64_t, LabelSet>> final_queue;
    for (const auto& [key, id] : remaining)
      final_queue.insert({size_of(key & output, p.sizes), id, key});
    auto [size1, id1, k1] = *final_queue.begin();
    final_queue.erase(final_queue.begin());
    while (!final_queue.empty()) {
      const auto [size2, id2, k2] = *final_queue.begin();
      final_queue.erase(final_queue.begin());
      ssa_path.push_back({std::min(id1, id2), std::max(id1, id2)});
      const LabelSet k12 = (k1 | k2) & output;
      final_queue.insert({size_of(k12, p.sizes), next_id++, k12});
      std::tie(size1, id1, k1) = *final_queue.begin();
      final_queue.erase(final_queue.begin());
    }
  }

  Path run() {
    if (p.inputs.size() == 1) return {{0}};
    start();
    while (!queue.empty()) {
      const auto [cost, id2, id1, k1, k2, k12] = *queue.begin();
      queue.erase(queue.begin());
      if (remaining.count(k1) && remaining.count(k2)) contract(k1, k2, k12);
    }
    outer_products();
    return ssa_to_linear(ssa_path);
  }
};

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Path named(const std::string& name, const Problem& p) {
  if (name == "auto") return auto_path(p);
  if (name == "optimal") return optimal(p);
  if (name == "branch-all") return branch(p, 0);
  if (name == "branch-2") return branch(p, 2);
  if (name == "branch-1") return branch(p, 1);
  if (name == "greedy" || name == "eager" || name == "opportunistic") return greedy(p);
  if (name == "auto-hq" || name == "dp" || name == "dynamic-programming" ||
      name == "random-greedy" || name == "random-greedy-128")
    throw NotImplementedError("[einsum] the path optimizer '" + name +
                              "' is not implemented; use 'auto', 'optimal', 'greedy', "
                              "'branch-all', 'branch-2', 'branch-1' or an explicit path");
  throw ValueError("[einsum] Path optimizer '" + name +
                   "' not found, valid options are {'auto', 'auto-hq', 'optimal', "
                   "'branch-all', 'branch-2', 'branch-1', 'greedy', 'eager', 'opportunistic', "
                   "'dp', 'dynamic-programming', 'random-greedy', 'random-greedy-128'}.");
}

}  // namespace

Problem make_problem(const std::vector<std::u32string>& inputs, const std::u32string& output,
                     const std::vector<std::vector<int64_t>>& shapes) {
  std::u32string labels;
  Problem p;
  auto bit = [&](char32_t c) {
    size_t at = labels.find(c);
    if (at == std::u32string::npos) {
      if (labels.size() == 64)
        throw ValueError("[einsum] at most 64 distinct labels are supported, got more");
      at = labels.size();
      labels += c;
      p.sizes.push_back(1);
    }
    return at;
  };
  for (size_t t = 0; t < inputs.size(); ++t) {
    LabelSet set = 0;
    for (size_t d = 0; d < inputs[t].size(); ++d) {
      const size_t at = bit(inputs[t][d]);
      set |= LabelSet(1) << at;
      if (p.sizes[at] == 1) p.sizes[at] = shapes[t][d];
    }
    p.inputs.push_back(set);
  }
  for (char32_t c : output) p.output |= LabelSet(1) << bit(c);
  return p;
}

Path optimal(const Problem& p) {
  Optimal search{p, {}, kInf, {}};
  std::vector<int64_t> all;
  for (size_t i = 0; i < p.inputs.size(); ++i) all.push_back(int64_t(i));
  search.best_ssa = {all};
  search.iterate({}, PySet::range(int64_t(p.inputs.size())), p.inputs, 0);
  return ssa_to_linear(search.best_ssa);
}

Path branch(const Problem& p, int nbranch) {
  Branch search{p, nbranch, {}, kInf, kInf, {}, {}};
  search.iterate({}, p.inputs, PySet::range(int64_t(p.inputs.size())), 0, 0);
  return ssa_to_linear(search.best_ssa);
}

Path greedy(const Problem& p) {
  return Greedy(p).run();
}

// paths.auto: optimal up to 4 operands, then branch-all, branch-2, branch-1, greedy past 14.
Path auto_path(const Problem& p) {
  const size_t n = p.inputs.size();
  if (n <= 4) return optimal(p);
  if (n <= 6) return branch(p, 0);
  if (n <= 8) return branch(p, 2);
  if (n <= 14) return branch(p, 1);
  return greedy(p);
}

Path choose(const Problem& p, const EinsumOptimize& optimize) {
  const int64_t n = int64_t(p.inputs.size());
  if (const auto* path = std::get_if<EinsumOptimize::Path>(&optimize.value)) return *path;
  Path all(1);
  for (int64_t i = 0; i < n; ++i) all[0].push_back(i);
  if (const bool* on = std::get_if<bool>(&optimize.value); on && !*on)
    return n <= 2 ? all : Path(size_t(n - 1), {0, 1});
  if (n <= 2) return all;
  const auto* name = std::get_if<std::string>(&optimize.value);
  return named(name ? lower(*name) : "optimal", p);
}

}  // namespace spmd::einsum_path

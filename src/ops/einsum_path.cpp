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
#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <numbers>
#include <numeric>
#include <optional>
#include <random>
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

  void add(int64_t k);
  PySet copy() const {
    PySet r;
    r.merge(*this);
    return r;
  }
  // set.pop(): the first key from the search finger on.
  int64_t pop() {
    size_t i = finger_ & mask();
    while (table_[i] < 0) i = (i + 1) & mask();
    const int64_t k = table_[i];
    table_[i] = kDummy;
    --used_;
    finger_ = i + 1;
    return k;
  }
  // set.difference_update(other).
  void discard_all(const PySet& other) {
    for (int64_t k : other.keys()) discard(k);
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
  size_t finger_ = 0;
};

void PySet::add(int64_t k) {
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

// ---- greedy (ssa_greedy_optimize with the default chooser and cost, or random-greedy's) -----
// Python's random.gauss and random.choices over a 64-bit Mersenne Twister.
class Random {
 public:
  explicit Random(uint64_t seed) : engine_(seed) {}
  double uniform() { return double(engine_() >> 11) * 0x1.0p-53; }
  double gauss(double mu, double sigma) {
    double z;
    if (next_) {
      z = *next_;
      next_.reset();
    } else {
      const double angle = uniform() * 2 * std::numbers::pi;
      const double radius = std::sqrt(-2.0 * std::log(1.0 - uniform()));
      z = std::cos(angle) * radius;
      next_ = std::sin(angle) * radius;
    }
    return mu + z * sigma;
  }
  size_t choice(const std::vector<double>& weights) {
    std::vector<double> cumulative;
    std::partial_sum(weights.begin(), weights.end(), std::back_inserter(cumulative));
    const double at = uniform() * cumulative.back();
    const auto it = std::upper_bound(cumulative.begin(), cumulative.end() - 1, at);
    return size_t(it - cumulative.begin());
  }

 private:
  std::mt19937_64 engine_;
  std::optional<double> next_;
};

struct Greedy {
  const Problem& p;
  LabelSet output;
  std::map<LabelSet, int64_t> remaining;  // key -> ssa id
  std::map<int, std::set<LabelSet>> dim_to_keys;
  LabelSet ref2 = 0, ref3 = 0;  // labels held by at least 2 (3) remaining tensors
  std::map<LabelSet, int64_t> footprints;
  int64_t next_id;
  Path ssa_path;

  // ((cost, id2, id1), k1, k2, k12), compared as Python's tuple; random trials put their
  // jittered cost first.
  using Candidate = std::tuple<double, int64_t, int64_t, int64_t, LabelSet, LabelSet, LabelSet>;
  std::multiset<Candidate> queue;  // a heap
  Random* random;                  // random-greedy's trials: jittered costs, every candidate queued

  explicit Greedy(const Problem& problem, Random* trial = nullptr)
      : p(problem),
        output(problem.output),
        next_id(int64_t(problem.inputs.size())),
        random(trial) {}

  Candidate candidate(LabelSet k1, LabelSet k2) const {
    const LabelSet either = k1 | k2, two = k1 & k2, one = either & ~two;
    const LabelSet k12 = (either & output) | (two & ref3) | (one & ref2);
    const int64_t cost = size_of(k12, p.sizes) - footprints.at(k1) - footprints.at(k2);
    int64_t id1 = remaining.at(k1), id2 = remaining.at(k2);
    if (id1 > id2) {
      std::swap(k1, k2);
      std::swap(id1, id2);
    }
    const double jittered = random ? random->gauss(1.0, 0.01) * double(cost) : 0.0;
    return {jittered, cost, id2, id1, k1, k2, k12};
  }

  void push_best(LabelSet k1, const std::vector<LabelSet>& k2s) {
    std::optional<Candidate> best;
    for (LabelSet k2 : k2s) {
      const Candidate c = candidate(k1, k2);
      if (random) queue.insert(c);
      if (!best || c < *best) best = c;
    }
    if (!random) queue.insert(*best);
  }

  bool live(const Candidate& c) const {
    return remaining.count(std::get<4>(c)) && remaining.count(std::get<5>(c));
  }

  // thermal_chooser (nbranch 8, temperature 1, relative): one of the 8 best live candidates,
  // weighted by exp(-(cost - best) / max(1, |best|)); the others go back.
  std::optional<Candidate> choose_thermal() {
    std::vector<Candidate> choices;
    while (!queue.empty() && choices.size() < 8) {
      const Candidate c = *queue.begin();
      queue.erase(queue.begin());
      if (live(c)) choices.push_back(c);
    }
    if (choices.size() <= 1)
      return choices.empty() ? std::nullopt : std::optional<Candidate>(choices[0]);
    const double cmin = std::get<0>(choices[0]);
    const double temperature = std::max(1.0, std::abs(cmin));
    std::vector<double> energies;
    for (const Candidate& c : choices)
      energies.push_back(std::exp(-(std::get<0>(c) - cmin) / temperature));
    const size_t chosen = random->choice(energies);
    for (size_t i = 0; i < choices.size(); ++i)
      if (i != chosen) queue.insert(choices[i]);
    return choices[chosen];
  }

  std::optional<Candidate> next() {
    if (random) return choose_thermal();
    const Candidate c = *queue.begin();
    queue.erase(queue.begin());
    return live(c) ? std::optional<Candidate>(c) : std::nullopt;
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

  // The path in ssa ids.
  Path run() {
    if (p.inputs.size() == 1) return {{0}};
    start();
    while (!queue.empty())
      if (const std::optional<Candidate> c = next())
        contract(std::get<4>(*c), std::get<5>(*c), std::get<6>(*c));
    outer_products();
    return ssa_path;
  }
};

// ---- dynamic programming (DynamicProgramming: minimize="flops", cost_cap=True,
// search_outer=False) --------------------------------------------------------------------------
// A contraction tree: a leaf names an operand; a node contracts its children (one child: the
// labels only that operand holds are summed out first).
struct Tree {
  int64_t leaf = -1;
  std::vector<Tree> kids;
};

Tree leaf(int64_t j) {
  return Tree{j, {}};
}

// simple_tree_tuple: ((a, b), c), ...
Tree left_deep(const std::vector<Tree>& items) {
  Tree tree = items[0];
  for (size_t i = 1; i < items.size(); ++i) tree = Tree{-1, {tree, items[i]}};
  return tree;
}

// _tree_to_sequence: the steps from the last (the root) back to the first.
Path tree_to_sequence(const Tree& root) {
  if (root.leaf >= 0) return {};
  std::vector<const Tree*> pending = {&root};
  std::vector<int64_t> taken;
  Path steps;
  while (!pending.empty()) {
    const Tree* node = pending.back();
    pending.pop_back();
    std::vector<int64_t> step, leaves;
    for (const Tree& kid : node->kids)
      if (kid.leaf >= 0) leaves.push_back(kid.leaf);
    std::sort(leaves.begin(), leaves.end());
    for (int64_t i : leaves) {
      const int64_t at =
          std::count_if(taken.begin(), taken.end(), [&](int64_t q) { return q < i; });
      step.push_back(at);
      taken.insert(taken.begin() + at, i);
    }
    for (const Tree& kid : node->kids)
      if (kid.leaf < 0) {
        step.push_back(int64_t(taken.size() + pending.size()));
        pending.push_back(&kid);
      }
    steps.insert(steps.begin(), step);
  }
  return steps;
}

// _find_disconnected_subgraphs: operands joined by a summed label, each group a Python set.
std::vector<PySet> subgraphs(const std::vector<LabelSet>& inputs, LabelSet output) {
  LabelSet summed = 0;
  for (LabelSet in : inputs) summed |= in;
  summed &= ~output;
  std::vector<PySet> out;
  PySet unused = PySet::range(int64_t(inputs.size()));
  while (unused.size() > 0) {
    PySet g;
    std::vector<int64_t> queue = {unused.pop()};
    while (!queue.empty()) {
      const int64_t j = queue.back();
      queue.pop_back();
      g.add(j);
      const LabelSet shared = summed & inputs[size_t(j)];
      PySet linked;
      for (int64_t k : unused.keys())
        if (shared & inputs[size_t(k)]) linked.add(k);
      for (int64_t k : linked.keys()) queue.push_back(k);
      unused.discard_all(linked);
    }
    out.push_back(g.copy());  // frozenset(g)
  }
  return out;
}

int64_t saturating_mul(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? kInf : r;
}

struct Dp {
  // One x[n] entry: the outer labels and cost of contracting a set of operands, and how.
  struct Entry {
    uint64_t tensors;
    LabelSet legs;
    int64_t cost;
    Tree tree;
  };
  // A Python dict keyed by the operand bitmap: entries in insertion order.
  struct Level {
    std::vector<Entry> entries;
    std::map<uint64_t, size_t> index;
  };

  const Problem& p;
  std::vector<LabelSet> inputs;  // each operand's labels but those only it holds
  std::vector<Tree> contractions;
  std::vector<Tree> done;  // operands summed to scalars on their own

  // _dp_parse_out_single_term_ops.
  explicit Dp(const Problem& problem) : p(problem) {
    LabelSet seen = 0, twice = p.output;
    for (LabelSet in : p.inputs) {
      twice |= seen & in;
      seen |= in;
    }
    const LabelSet single = seen & ~twice;
    for (size_t j = 0; j < p.inputs.size(); ++j) {
      const LabelSet reduced = p.inputs[j] & ~single;
      if (reduced == 0 && p.inputs[j] != 0) {
        done.push_back(Tree{-1, {leaf(int64_t(j))}});
        continue;
      }
      inputs.push_back(reduced);
      contractions.push_back(reduced != p.inputs[j] ? Tree{-1, {leaf(int64_t(j))}}
                                                    : leaf(int64_t(j)));
    }
  }

  LabelSet legs_of(uint64_t tensors) const {
    LabelSet legs = 0;
    for (; tensors; tensors &= tensors - 1) legs |= inputs[size_t(std::countr_zero(tensors))];
    return legs;
  }

  // _dp_compare_flops with _dp_calc_legs.
  void compare(const Entry& a, const Entry& b, uint64_t g, int64_t cost_cap, Level& xn) const {
    const LabelSet contracted = a.legs & b.legs & ~p.output;
    if (!contracted) return;
    const LabelSet either = a.legs | b.legs;
    const int64_t cost = a.cost + b.cost + size_of(either, p.sizes);
    if (cost > cost_cap) return;
    const uint64_t s = a.tensors | b.tensors;
    auto it = xn.index.find(s);
    if (it != xn.index.end() && cost >= xn.entries[it->second].cost) return;
    const LabelSet legs = either & ~(contracted & ~legs_of(g & ~s));
    Entry e{s, legs, cost, Tree{-1, {a.tree, b.tree}}};
    if (it == xn.index.end())
      xn.index.emplace(s, xn.entries.size()), xn.entries.push_back(std::move(e));
    else
      xn.entries[it->second] = std::move(e);
  }

  // The cheapest tree of one subgraph, under a cost cap raised until it finds one.
  Entry solve(const PySet& g) const {
    const std::vector<int64_t> members = g.keys();
    std::vector<Level> x(members.size() + 1);
    uint64_t bitmap_g = 0;
    for (int64_t j : members) {
      const uint64_t bit = uint64_t(1) << j;
      bitmap_g |= bit;
      x[1].index.emplace(bit, x[1].entries.size());
      x[1].entries.push_back(Entry{bit, inputs[size_t(j)], 0, contractions[size_t(j)]});
    }
    const LabelSet inds = legs_of(bitmap_g);
    int64_t cost_cap = size_of(inds & p.output, p.sizes), increment = 2;
    if (inds) {
      int64_t smallest = kInf;
      for (LabelSet s = inds; s; s &= s - 1)
        smallest = std::min(smallest, p.sizes[size_t(std::countr_zero(s))]);
      increment = std::max<int64_t>(smallest, 2);
    }
    const size_t n_all = members.size();
    while (x[n_all].entries.empty()) {
      for (size_t n = 2; n <= n_all; ++n)
        for (size_t m = 1; m <= n / 2; ++m)
          for (size_t a = 0; a < x[m].entries.size(); ++a)
            for (size_t b = 0; b < x[n - m].entries.size(); ++b) {
              const Entry &e1 = x[m].entries[a], &e2 = x[n - m].entries[b];
              if (!(e1.tensors & e2.tensors) && (m != n - m || e1.tensors < e2.tensors))
                compare(e1, e2, bitmap_g, cost_cap, x[n]);
            }
      cost_cap = saturating_mul(cost_cap, increment);
    }
    return x[n_all].entries[0];
  }

  Path run() const {
    if (inputs.size() > 64)
      throw ValueError("[einsum] the 'dp' path optimizer supports at most 64 operands, got " +
                       std::to_string(inputs.size()));
    if (inputs.empty()) return tree_to_sequence(left_deep(done));
    std::vector<Tree> trees = done;
    std::vector<int64_t> sizes(done.size(), 1);
    for (const PySet& g : subgraphs(inputs, p.output)) {
      Entry best = solve(g);
      trees.push_back(std::move(best.tree));
      sizes.push_back(size_of(best.legs, p.sizes));
    }
    std::vector<size_t> order(trees.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return sizes[a] < sizes[b]; });
    std::vector<Tree> sorted;
    for (size_t i : order) sorted.push_back(trees[i]);
    return tree_to_sequence(left_deep(sorted));
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
  if (name == "auto-hq") return auto_hq(p);
  if (name == "dp" || name == "dynamic-programming") return dynamic_programming(p);
  if (name == "random-greedy") return random_greedy(p, 32);
  if (name == "random-greedy-128") return random_greedy(p, 128);
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
  return ssa_to_linear(Greedy(p).run());
}

// ssa_path_compute_cost: the flops and the largest intermediate of a path in ssa ids.
std::pair<int64_t, int64_t> ssa_cost(const Problem& p, const Path& ssa_path) {
  std::vector<LabelSet> inputs = p.inputs;
  std::vector<bool> remaining(inputs.size(), true);
  int64_t total = 0, largest = 0;
  for (const auto& step : ssa_path) {
    const size_t i = size_t(step[0]), j = size_t(step[1]);
    LabelSet keep = p.output;
    for (size_t r = 0; r < inputs.size(); ++r)
      if (remaining[r] && r != i && r != j) keep |= inputs[r];
    const LabelSet either = inputs[i] | inputs[j], shared = inputs[i] & inputs[j];
    remaining[i] = remaining[j] = false;
    remaining.push_back(true);
    inputs.push_back(either & keep);
    total += flop_count(either, (shared & ~keep) != 0, 2, p.sizes);
    largest = std::max(largest, size_of(inputs.back(), p.sizes));
  }
  return {total, largest};
}

Path random_greedy(const Problem& p, int repeats) {
  Path best = Greedy(p).run();
  std::pair<int64_t, int64_t> best_cost = ssa_cost(p, best);
  for (int r = 1; r < repeats; ++r) {
    Random random{uint64_t(r)};
    Path trial = Greedy(p, &random).run();
    const std::pair<int64_t, int64_t> cost = ssa_cost(p, trial);
    if (cost < best_cost) best = std::move(trial), best_cost = cost;
  }
  return ssa_to_linear(best);
}

int64_t flops(const Problem& p, const Path& path) {
  std::vector<LabelSet> list = p.inputs;
  int64_t total = 0;
  for (std::vector<int64_t> step : path) {
    std::sort(step.rbegin(), step.rend());
    LabelSet contracted = 0;
    for (int64_t at : step) {
      contracted |= list[size_t(at)];
      list.erase(list.begin() + at);
    }
    LabelSet keep = p.output;
    for (LabelSet in : list) keep |= in;
    total += flop_count(contracted, (contracted & ~keep) != 0, int64_t(step.size()), p.sizes);
    list.push_back(contracted & keep);
  }
  return total;
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

Path dynamic_programming(const Problem& p) {
  return Dp(p).run();
}

// paths.auto_hq: optimal up to 5 operands, dp up to 16, then random-greedy-128.
Path auto_hq(const Problem& p) {
  const size_t n = p.inputs.size();
  if (n <= 5) return optimal(p);
  if (n <= 16) return dynamic_programming(p);
  return random_greedy(p, 128);
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

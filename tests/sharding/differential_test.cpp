// Differential testing of automatic partitioning: seeded random programs built from spmd's public
// ops run once on plain uncommitted inputs (the reference, on the default device) and once
// jit'ed on inputs committed to random shardings of a random mesh (single-op programs eagerly
// too). Both must agree up to float reassociation, and the partitioned results must be committed
// to the mesh. A third of the random constraints leave some unsplit dims open
// (P::UNCONSTRAINED).
//
// A second run starts each program with a sharding constraint that splits dims their mesh axes
// do not divide (padded blocks inside the partitioner), and lets later constraints do so too;
// a quarter of its ops move such splits: reshapes, dynamic_slices and reshards between two
// uneven constraints.
//
// A third run ("wide") adds meshes with size-1 axes and up to 4 axes, Explicit and mixed
// Explicit/Auto meshes (ops that would raise JAX's sharding-type errors reshard their operands
// first, and each result's sp::type_of must show the sharding it comes out with), vmapped
// programs (in_axes on random dims, with and without spmd_axis_name; the reference runs example
// by example), shard_map inside the program (a psum, all_gather or ppermute in the body, whose
// global meaning the reference computes without a mesh), einsum, reshard and donated arguments.
// Its draws never touch the first two runs' programs.
//
// A fourth run ("more", differential_more_test.cpp) uses meshes over all the devices or some of
// them in a permuted order, 1-D to 3-D, and adds custom_jvp/custom_vjp functions, nested jit with
// in_shardings/out_shardings, vmap of grad, indices computed in the program, integer division and
// bitwise ops, round trips through narrow types, more reductions, argsort and random draws; its
// draws never touch the first three runs' programs either. A generated cond branches on whether
// the sum of its operand exceeds 0.01 (floats): a sum of values minus their mean sits at 0 up to
// rounding, which decided the branch of plain seed 68177.
//
// SPMD_DIFFERENTIAL_PROGRAMS=N runs seeds 0..N-1 (default 300, 100 with uneven splits, 300 wide,
// 150 more), from seed F instead of 0 with SPMD_DIFFERENTIAL_FIRST=F; SPMD_DIFFERENTIAL_SEED=S
// runs only seed S. A failure prints the seed, the mesh, the input shardings and the jaxpr.
#include "sharding/differential.h"

#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace sp = spmd;
using sp::Array;
using sp::P;
using sp::Shape;

namespace differential {
namespace {

// One value of a program: an input (the index of the argument) or an op on earlier values.
struct Node {
  int input = -1;
  Kernel kernel;
  Shape shape;
};

struct Input {
  Shape shape;                   // the argument's shape (with the batch dim of a vmapped program)
  std::optional<int> batch_dim;  // vmapped programs: where the batch dim is (nullopt: not mapped)
  std::optional<P> spec;         // nullopt: uncommitted and unconstrained
  bool by_in_shardings = false;  // spec given as jit's in_shardings, the argument uncommitted
};

struct Program {
  bool integer = false;  // int32 values and exact comparison, else float32
  sp::Mesh mesh;
  std::vector<Input> inputs;
  std::vector<Node> nodes;
  std::vector<int> outputs;
  bool grad = false;          // outputs are (loss, gradients) of the sum of the values above
  std::optional<P> out_spec;  // out_shardings for the first output
  bool donate = false;        // jit donates the arguments
  double rtol = 1e-5;         // of float values, relative to the reference's scale
  // A vmapped program: the ops are per example, the batch of `batch` examples is mapped (out_axes
  // 0), its dim split over `spmd_axis_name` where the program fixes shardings.
  int64_t batch = 0;
  std::vector<std::string> spmd_axis_name;

  int num_ops() const { return int(nodes.size() - inputs.size()); }

  std::vector<Array> values(const std::vector<Array>& args, const Ctx& ctx) const {
    Env env;
    for (const Node& n : nodes) env.push_back(n.input >= 0 ? args[n.input] : n.kernel(env, ctx));
    std::vector<Array> out;
    for (int i : outputs) out.push_back(env[i]);
    return out;
  }

  std::vector<Array> run(const std::vector<Array>& args, const Ctx& ctx) const {
    if (batch > 0) return mapped(args, ctx);
    if (!grad) return values(args, ctx);
    auto loss = [&](const std::vector<Array>& xs) {
      Array total = sp::zeros({});
      for (const Array& v : values(xs, ctx)) total = total + sp::sum(v);
      return total;
    };
    auto [value, grads] = sp::value_and_grad(loss)(args);
    grads.insert(grads.begin(), value);
    return grads;
  }

  // The arguments of example b of a vmapped program.
  std::vector<Array> example(const std::vector<Array>& args, int64_t b) const {
    std::vector<Array> out;
    for (size_t i = 0; i < args.size(); ++i) {
      const auto& d = inputs[i].batch_dim;
      out.push_back(d ? sp::lax::index_in_dim(args[i], b, *d, false) : args[i]);
    }
    return out;
  }

  // A vmapped program: on a mesh through sp::vmap, else example by example, stacked.
  std::vector<Array> mapped(const std::vector<Array>& args, const Ctx& ctx) const {
    if (ctx.mesh) {  // per-leaf in_axes: the flat form of sp::vmap
      std::vector<std::optional<int>> dims;
      std::vector<std::string> names;
      for (const Input& in : inputs) {
        dims.push_back(in.batch_dim);
        names.push_back("argument " + std::to_string(names.size()));
      }
      auto fn = [this, ctx](std::span<const Array> xs) {
        return values(std::vector<Array>(xs.begin(), xs.end()), ctx);
      };
      return sp::transform_detail::vmap(fn, args, dims, {0}, batch, "", names, spmd_axis_name);
    }
    std::vector<std::vector<Array>> per_output(outputs.size());
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<Array> outs = values(example(args, b), ctx);
      for (size_t o = 0; o < outs.size(); ++o) per_output[o].push_back(outs[o]);
    }
    std::vector<Array> out;
    for (const auto& xs : per_output) out.push_back(sp::stack(xs));
    return out;
  }
};

// ---- operands made to type-check on Explicit axes (no-ops elsewhere) ---------------------------

// x's sharding type as one entry per dim.
std::vector<P::Entry> type_entries(const Array& x) {
  std::vector<P::Entry> entries = sp::type_of(x).spec().entries();
  entries.resize(size_t(x.ndim()));
  return entries;
}

Array resharded(const Array& x, const std::vector<P::Entry>& entries, const Ctx& ctx) {
  return sp::reshard(x, sp::NamedSharding(*ctx.mesh, P(entries)));
}

// On Explicit axes, x resharded so that `dims` are not split.
Array unsplit(const Array& x, const std::vector<int>& dims, const Ctx& ctx) {
  if (!ctx.explicit_axes) return x;
  std::vector<P::Entry> entries = type_entries(x);
  for (int d : dims) entries[size_t(d)] = std::nullopt;
  return resharded(x, entries, ctx);
}

// On Explicit axes, w resharded so that each dim `first` of `pairs` is split as x's dim
// `second`, and no other dim is split.
Array split_like(const Array& w, const Array& x, const std::vector<std::pair<int, int>>& pairs,
                 const Ctx& ctx) {
  if (!ctx.explicit_axes) return w;
  const std::vector<P::Entry> from = type_entries(x);
  std::vector<P::Entry> entries(size_t(w.ndim()));
  for (auto [wd, xd] : pairs) entries[size_t(wd)] = from[size_t(xd)];
  return resharded(w, entries, ctx);
}

// On Explicit axes, x resharded to the Explicit axes of `spec` (a shard_map's in_specs).
Array laid_out(const Array& x, const P& spec, const Ctx& ctx) {
  if (!ctx.explicit_axes) return x;
  std::vector<P::Entry> entries = spec.entries();
  entries.resize(size_t(x.ndim()));
  for (P::Entry& e : entries) {
    std::vector<std::string> names;
    for (const std::string& a : e ? e->names() : std::vector<std::string>{})
      if (ctx.mesh->axis_type(a) == sp::AxisType::Explicit) names.push_back(a);
    e = names.empty() ? P::Entry() : P::Entry(sp::AxisNames(names, names.size() > 1));
  }
  return resharded(x, entries, ctx);
}

// On Explicit axes, b (a's shape with leading dims dropped or dims of size 1) resharded to
// split as a does, for broadcasting.
Array aligned(const Array& b, const Array& a, const Ctx& ctx) {
  std::vector<std::pair<int, int>> pairs;
  const int offset = a.ndim() - b.ndim();
  for (int d = 0; d < b.ndim(); ++d)
    if (b.shape()[d] == a.shape()[d + offset]) pairs.push_back({d, d + offset});
  return split_like(b, a, pairs, ctx);
}

// ---- the generator: a program is a few ops on fresh inputs, each op kind one function ----------

class Generator : public Builder {
 public:
  // uneven: constraints may split dims unevenly, and the first op is such a constraint.
  Generator(uint64_t seed, Mode mode)
      : rng_(seed),
        open_rng_(seed),
        uneven_(mode == Mode::uneven),
        wide_(mode == Mode::wide),
        more_(mode == Mode::more) {}

  Program program() {
    p_.mesh = wide_ ? wide_mesh() : more_ ? more_mesh(*this) : random_mesh();
    if (wide_) start_wide();
    p_.integer = coin(0.15);
    int steps = coin(0.15) ? 1 : 2 + pick(5);
    int x = fresh_input(random_shape());
    if (uneven_) x = constrained(x, uneven_spec(shape(x)));
    for (int done = 0, tries = 0; done < steps && tries < 100; ++tries) {
      std::optional<int> y = apply_random_op(coin(0.7) ? x : pick_value());
      if (!y) continue;
      x = *y;
      ++done;
    }
    p_.outputs = {x};
    int ops = p_.num_ops();
    if (ops > 1 && coin(0.3)) add_output_other_than(x);
    p_.grad = !p_.integer && !has_while_ && ops > 0 && p_.batch == 0 && coin(more_ ? 0.4 : 0.25);
    if (!p_.grad && p_.batch == 0 && !explicit_ && coin(0.2))
      p_.out_spec = random_spec(p_.nodes[size_t(x)].shape);
    p_.inputs[0].spec = random_spec(p_.inputs[0].shape);  // at least one committed input
    p_.inputs[0].by_in_shardings = false;
    p_.donate = (wide_ || more_) && coin(0.2);
    return std::move(p_);
  }

 private:
  using Op = std::optional<int> (Generator::*)(int);

  std::optional<int> apply_random_op(int x) {
    if (uneven_ && coin(0.25)) return uneven_move(x);
    if (explicit_) return explicit_op(x);
    if (wide_ && coin(0.3)) return pick(2) == 0 ? einsum(x) : shard_map_op(x);
    if (more_ && coin(0.4)) return more_op(*this, x);
    static const Op ops[] = {
        &Generator::unary,        &Generator::binary,        &Generator::dot,
        &Generator::self_dot,     &Generator::reduce,        &Generator::argmax,
        &Generator::reshape,      &Generator::transpose,     &Generator::broadcast,
        &Generator::slice,        &Generator::dynamic_slice, &Generator::update_slice,
        &Generator::take,         &Generator::flip,          &Generator::concat,
        &Generator::pad,          &Generator::cumulative,    &Generator::sort,
        &Generator::cond,         &Generator::fori_loop,     &Generator::scan,
        &Generator::constraint,   &Generator::while_loop,    &Generator::scan_matmul,
        &Generator::split_concat, &Generator::split_pad,
    };
    return (this->*ops[pick(int(std::size(ops)))])(x);
  }

  // ---- randomness ----
 public:
  int pick(int n) override { return int(std::uniform_int_distribution<int>(0, n - 1)(rng_)); }
  bool coin(double p) override { return std::bernoulli_distribution(p)(rng_); }
  int64_t random_dim() override { return pick_of<int64_t>({1, 2, 2, 3, 4, 4, 4, 6, 8, 8, 8, 16}); }
  bool integer() const override { return p_.integer; }
  const sp::Mesh& mesh() const override { return p_.mesh; }
  void round_trips_through(sp::DType narrow) override {
    // Two units in the last place of the narrow format: one value that reassociation moved
    // across a rounding boundary rounds one unit apart.
    p_.rtol = std::max(p_.rtol, narrow == sp::bfloat16 ? 0x1p-6 : 0x1p-9);
  }

 private:
  Shape random_shape() {
    Shape s;
    for (int r = 1 + pick(3); r > 0; --r) s.push_back(random_dim());
    return s;
  }

  sp::Mesh random_mesh() {
    switch (pick(6)) {
      case 0:
        return sp::make_mesh({8}, {"x"});
      case 1:
        return sp::make_mesh({4}, {"x"});
      case 2:
        return sp::make_mesh({2}, {"x"});
      case 3:
        return sp::make_mesh({4, 2}, {"x", "y"});
      case 4:
        return sp::make_mesh({2, 4}, {"x", "y"});
      default:
        return sp::make_mesh({2, 2, 2}, {"x", "y", "z"});
    }
  }

  // A valid spec for `shape`: each mesh axis (in random order) splits a dim it divides, or none;
  // several axes on one dim make a tuple, major first.
  P random_spec(const Shape& shape) override {
    if (shape.ndim() == 0 || coin(0.1)) return P();
    std::vector<std::vector<std::string>> dims(size_t(shape.ndim()));
    std::vector<int64_t> left = shape.dims();
    std::vector<std::pair<std::string, int64_t>> axes = p_.mesh.shape();
    std::shuffle(axes.begin(), axes.end(), rng_);
    for (const auto& [name, size] : axes) {
      if (excluded(name)) continue;
      std::vector<int> fits;
      for (int d = 0; d < shape.ndim(); ++d)
        if (left[size_t(d)] % size == 0) fits.push_back(d);
      if (fits.empty() || coin(0.25)) continue;
      int d = pick_of(fits);
      dims[size_t(d)].push_back(name);
      left[size_t(d)] /= size;
    }
    return spec_of(dims);
  }

  // A spec whose mesh axes (in random order) split dims of size > 1, preferring dims they do
  // not divide, whose blocks are then padded (ceil-sized, the last ones short or empty).
  P uneven_spec(const Shape& shape) override {
    std::vector<std::vector<std::string>> dims(size_t(shape.ndim()));
    std::vector<int64_t> left = shape.dims();
    std::vector<std::pair<std::string, int64_t>> axes = p_.mesh.shape();
    std::shuffle(axes.begin(), axes.end(), rng_);
    for (const auto& [name, size] : axes) {
      std::vector<int> any, uneven;
      for (int d = 0; d < shape.ndim(); ++d) {
        if (left[size_t(d)] < 2) continue;
        any.push_back(d);
        if (left[size_t(d)] % size != 0) uneven.push_back(d);
      }
      if (any.empty() || coin(0.2)) continue;
      int d = uneven.empty() ? pick_of(any) : pick_of(uneven);
      dims[size_t(d)].push_back(name);
      left[size_t(d)] = (left[size_t(d)] + size - 1) / size;
    }
    return spec_of(dims);
  }

  P spec_of(const std::vector<std::vector<std::string>>& dims) {
    std::vector<P::Entry> entries;
    for (const auto& names : dims) {
      if (names.empty())
        entries.push_back(std::nullopt);
      else if (names.size() == 1)
        entries.push_back(sp::AxisNames(names[0]));
      else
        entries.push_back(sp::AxisNames(names));
    }
    while (!entries.empty() && !entries.back() && coin(0.5)) entries.pop_back();
    return P(entries);
  }

  // ---- program building ----
  // A copy: adding a node may move the others.
  Shape shape(int v) const override { return p_.nodes[size_t(v)].shape; }
  int pick_value() { return pick(int(p_.nodes.size())); }

  int fresh_input(const Shape& s) override {
    int k = int(p_.inputs.size());
    Input in{s, std::nullopt, std::nullopt, false};
    if (p_.batch > 0 && coin(0.85)) {  // vmapped programs: most inputs mapped, on a random dim
      in.batch_dim = pick(s.ndim() + 1);
      std::vector<int64_t> d = s.dims();
      d.insert(d.begin() + *in.batch_dim, p_.batch);
      in.shape = Shape(d);
    }
    if (!coin(0.25)) in.spec = random_spec(in.shape);
    in.by_in_shardings = in.spec && coin(0.2);
    p_.inputs.push_back(in);
    p_.nodes.push_back({k, {}, s});
    return int(p_.nodes.size()) - 1;
  }
  int add(Shape s, Kernel k) override {
    p_.nodes.push_back({-1, std::move(k), std::move(s)});
    return int(p_.nodes.size()) - 1;
  }
  // An existing value of shape s, or a fresh input.
  int operand_of_shape(const Shape& s) override {
    std::vector<int> same;
    for (int v = 0; v < int(p_.nodes.size()); ++v)
      if (shape(v) == s) same.push_back(v);
    return !same.empty() && coin(0.5) ? pick_of(same) : fresh_input(s);
  }
  void add_output_other_than(int x) {
    std::vector<int> ops;
    for (int v = 0; v < int(p_.nodes.size()); ++v)
      if (v != x && p_.nodes[size_t(v)].input < 0) ops.push_back(v);
    if (!ops.empty()) p_.outputs.push_back(pick_of(ops));
  }
  // Float values stay of order 1 so that reassociation stays within tolerance: sums are scaled.
  // Kernels run after the generator is gone: they capture the factor, not the generator.
  float scale(int64_t n) const override { return p_.integer ? 1.0f : 1.0f / float(n); }
  static Array scaled(const Array& x, float factor) { return factor == 1.0f ? x : x * factor; }

  // ---- op kinds ----
  std::optional<int> unary(int x) {
    using F = Array (*)(const Array&);
    static const std::vector<F> floats = {sp::sin,     sp::cos,      sp::tanh,
                                          sp::sigmoid, sp::negative, sp::abs};
    static const std::vector<F> ints = {sp::negative, sp::abs};
    F f = pick_of(p_.integer ? ints : floats);
    return add(shape(x), [=](const Env& e, const Ctx&) { return f(e[size_t(x)]); });
  }

  // Same shape, or y's shape with leading dims dropped or some dims 1 (broadcasting).
  std::optional<int> binary(int x) {
    Shape s = shape(x);
    if (coin(0.3) && s.ndim() > 0) {
      std::vector<int64_t> d = s.dims();
      if (coin(0.5))
        d.erase(d.begin());
      else
        d[size_t(pick(int(d.size())))] = 1;
      s = Shape(d);
    }
    int y = operand_of_shape(s);
    bool swap = coin(0.5);
    Shape out = sp::broadcast_shapes(shape(x), s);
    switch (pick(6)) {
      case 0:
        return add(out, binary_kernel(x, y, swap, [](auto a, auto b) { return a + b; }));
      case 1:
        return add(out, binary_kernel(x, y, swap, [](auto a, auto b) { return a - b; }));
      case 2:
        return add(out, binary_kernel(x, y, swap, [](auto a, auto b) { return a * b; }));
      case 3:
        return add(out, binary_kernel(x, y, swap, sp::maximum));
      case 4:
        return add(out, binary_kernel(x, y, swap, sp::minimum));
      default:
        return add(out, binary_kernel(x, y, swap, [](const Array& a, const Array& b) {
                     return sp::where(a > b, a, b * 2);
                   }));
    }
  }
  template <class F>
  static Kernel binary_kernel(int x, int y, bool swap, F f) {
    return [=](const Env& e, const Ctx& ctx) {
      const Array& a = e[size_t(x)];
      const Array b = aligned(e[size_t(y)], a, ctx);
      return swap ? Array(f(b, a)) : Array(f(a, b));
    };
  }

  // x (..., k) @ w (k, n); x (b, m, k) · w (b, k, n) with a batch dim; or x contracted on dim 0.
  std::optional<int> dot(int x) {
    const Shape s = shape(x);
    if (s.ndim() == 0) return std::nullopt;
    int64_t n = random_dim();
    int64_t k = s[s.ndim() - 1];
    if (s.ndim() == 3 && coin(0.4)) {
      int w = fresh_input({s[0], k, n});
      Shape out{s[0], s[1], n};
      sp::lax::DotDimensionNumbers dims{{2}, {1}, {0}, {0}};
      return add(out, [=, factor = scale(k)](const Env& e, const Ctx& ctx) {
        const Array a = unsplit(e[size_t(x)], {2}, ctx);
        const Array b = split_like(e[size_t(w)], a, {{0, 0}}, ctx);
        return scaled(sp::lax::dot_general(a, b, dims), factor);
      });
    }
    if (s.ndim() >= 2 && coin(0.3)) {
      int64_t k0 = s[0];
      int w = fresh_input({k0, n});
      std::vector<int64_t> out(s.dims().begin() + 1, s.dims().end());
      out.push_back(n);
      sp::lax::DotDimensionNumbers dims{{0}, {0}, {}, {}};
      return add(Shape(out), [=, factor = scale(k0)](const Env& e, const Ctx& ctx) {
        const Array a = unsplit(e[size_t(x)], {0}, ctx);
        const Array b = split_like(e[size_t(w)], a, {}, ctx);
        return scaled(sp::lax::dot_general(a, b, dims), factor);
      });
    }
    int w = fresh_input({k, n});
    std::vector<int64_t> out(s.dims().begin(), s.dims().end() - 1);
    out.push_back(n);
    return add(Shape(out), [=, factor = scale(k)](const Env& e, const Ctx& ctx) {
      const Array a = unsplit(e[size_t(x)], {int(out.size()) - 1}, ctx);
      return scaled(sp::matmul(a, split_like(e[size_t(w)], a, {}, ctx)), factor);
    });
  }

  // sum (scaled), max, min or mean over a random non-empty set of axes.
  std::optional<int> reduce(int x) {
    const Shape s = shape(x);
    if (s.ndim() == 0) return std::nullopt;
    sp::Axes axes;
    for (int d = 0; d < s.ndim(); ++d)
      if (coin(0.5)) axes.push_back(d);
    if (axes.empty()) axes.push_back(pick(s.ndim()));
    bool keepdims = coin(0.3);
    int64_t n = 1;
    Shape result = keepdims ? s : reduced_shape(s, axes);
    for (int d : axes) {
      n *= s[d];
      if (keepdims) result[d] = 1;
    }
    switch (pick(p_.integer ? 3 : 4)) {
      case 0:
        return add(result, [=, factor = scale(n)](const Env& e, const Ctx&) {
          return scaled(sp::sum(e[size_t(x)], axes, keepdims), factor);
        });
      case 1:
        return add(result,
                   [=](const Env& e, const Ctx&) { return sp::max(e[size_t(x)], axes, keepdims); });
      case 2:
        return add(result,
                   [=](const Env& e, const Ctx&) { return sp::min(e[size_t(x)], axes, keepdims); });
      default:
        return add(result, [=](const Env& e, const Ctx&) {
          return sp::mean(e[size_t(x)], axes, keepdims);
        });
    }
  }
  static Shape reduced_shape(const Shape& s, const sp::Axes& axes) {
    std::vector<int64_t> out;
    for (int d = 0; d < s.ndim(); ++d)
      if (std::find(axes.begin(), axes.end(), d) == axes.end()) out.push_back(s[d]);
    return Shape(out);
  }

  // x contracted with itself on its last dim: x x^T over the other dims.
  std::optional<int> self_dot(int x) {
    const Shape s = shape(x);
    if (s.ndim() < 1 || s.ndim() > 2) return std::nullopt;
    int64_t k = s[s.ndim() - 1];
    int last = s.ndim() - 1;
    sp::lax::DotDimensionNumbers dims{{last}, {last}, {}, {}};
    Shape out;
    for (int i = 0; i < 2 * last; ++i) out.push_back(s[0]);
    return add(out, [=, factor = scale(k)](const Env& e, const Ctx&) {
      return scaled(sp::lax::dot_general(e[size_t(x)], e[size_t(x)], dims), factor);
    });
  }

  // argmax or argmin along an axis, back in the program's dtype.
  std::optional<int> argmax(int x) {
    const Shape s = shape(x);
    if (s.ndim() == 0) return std::nullopt;
    int axis = pick(s.ndim());
    bool max = coin(0.5);
    sp::DType t = p_.integer ? sp::int32 : sp::float32;
    return add(reduced_shape(s, {axis}), [=](const Env& e, const Ctx& ctx) {
      const Array v = unsplit(e[size_t(x)], {axis}, ctx);
      return sp::astype(max ? sp::argmax(v, axis) : sp::argmin(v, axis), t);
    });
  }

  // Splits a dim into two factors, merges two adjacent dims, or flattens.
  std::optional<int> reshape(int x) {
    const Shape s = shape(x);
    if (s.ndim() == 0) return std::nullopt;
    std::vector<int64_t> d = s.dims();
    int choice = pick(3);
    if (choice == 0 && s.ndim() < kMaxRank) {
      int i = pick(s.ndim());
      std::vector<int64_t> factors;
      for (int64_t f = 2; f < d[size_t(i)]; ++f)
        if (d[size_t(i)] % f == 0) factors.push_back(f);
      if (factors.empty()) return std::nullopt;
      int64_t f = pick_of(factors);
      d[size_t(i)] /= f;
      d.insert(d.begin() + i, f);
    } else if (choice == 1 && s.ndim() >= 2) {
      int i = pick(s.ndim() - 1);
      d[size_t(i)] *= d[size_t(i) + 1];
      d.erase(d.begin() + i + 1);
    } else {
      d = {s.size()};
    }
    Shape out(d);
    return add(out, [=](const Env& e, const Ctx&) { return sp::reshape(e[size_t(x)], out); });
  }

  std::optional<int> transpose(int x) {
    const Shape s = shape(x);
    if (s.ndim() < 2) return std::nullopt;
    sp::Axes perm(size_t(s.ndim()));
    for (int i = 0; i < s.ndim(); ++i) perm[size_t(i)] = i;
    std::shuffle(perm.begin(), perm.end(), rng_);
    Shape out;
    for (int i : perm) out.push_back(s[i]);
    return add(out, [=](const Env& e, const Ctx&) { return sp::transpose(e[size_t(x)], perm); });
  }

  // expand_dims at a random position, or broadcast_to a new leading dim (or over size-1 dims).
  std::optional<int> broadcast(int x) {
    const Shape s = shape(x);
    if (s.ndim() >= kMaxRank) return std::nullopt;
    if (coin(0.4)) {
      int at = pick(s.ndim() + 1);
      std::vector<int64_t> d = s.dims();
      d.insert(d.begin() + at, 1);
      return add(Shape(d),
                 [=](const Env& e, const Ctx&) { return sp::expand_dims(e[size_t(x)], {at}); });
    }
    std::vector<int64_t> d = s.dims();
    for (int64_t& v : d)
      if (v == 1) v = random_dim();
    d.insert(d.begin(), random_dim());
    Shape out(d);
    if (!fits(out)) return std::nullopt;
    return add(out, [=](const Env& e, const Ctx&) { return sp::broadcast_to(e[size_t(x)], out); });
  }

  // lax.slice with random bounds per dim, sometimes strided.
  std::optional<int> slice(int x) {
    const Shape s = shape(x);
    if (s.ndim() == 0) return std::nullopt;
    std::vector<int64_t> start, limit, strides;
    Shape out;
    for (int d = 0; d < s.ndim(); ++d) {
      int64_t lo = coin(0.5) ? 0 : pick(int(s[d]));
      int64_t hi = coin(0.5) ? s[d] : lo + 1 + pick(int(s[d] - lo));
      int64_t stride = coin(0.2) ? 2 + pick(2) : 1;
      start.push_back(lo);
      limit.push_back(hi);
      strides.push_back(stride);
      out.push_back((hi - lo + stride - 1) / stride);
    }
    return add(out, [=](const Env& e, const Ctx&) {
      return sp::lax::slice(e[size_t(x)], start, limit, strides);
    });
  }

  // lax.dynamic_slice at constant starts (some past the end, which XLA clamps).
  std::optional<int> dynamic_slice(int x) {
    const Shape s = shape(x);
    if (s.ndim() == 0) return std::nullopt;
    std::vector<int> starts;
    std::vector<int64_t> sizes;
    for (int d = 0; d < s.ndim(); ++d) {
      sizes.push_back(1 + pick(int(s[d])));
      starts.push_back(pick(int(s[d]) + 1));
    }
    return add(Shape(sizes), [=](const Env& e, const Ctx&) {
      std::vector<Array> at(starts.begin(), starts.end());
      return sp::lax::dynamic_slice(e[size_t(x)], at, sizes);
    });
  }

  // lax.dynamic_update_slice of a smaller value into x.
  std::optional<int> update_slice(int x) {
    const Shape s = shape(x);
    if (s.ndim() == 0) return std::nullopt;
    std::vector<int> starts;
    Shape update;
    for (int d = 0; d < s.ndim(); ++d) {
      update.push_back(1 + pick(int(s[d])));
      starts.push_back(pick(int(s[d])));
    }
    int u = operand_of_shape(update);
    return add(s, [=](const Env& e, const Ctx&) {
      std::vector<Array> at(starts.begin(), starts.end());
      return sp::lax::dynamic_update_slice(e[size_t(x)], e[size_t(u)], at);
    });
  }

  // take (a gather) of constant indices along an axis.
  std::optional<int> take(int x) {
    const Shape s = shape(x);
    if (s.ndim() == 0) return std::nullopt;
    int axis = pick(s.ndim());
    std::vector<int32_t> indices(size_t(1 + pick(6)));
    for (int32_t& i : indices) i = pick(int(s[axis]));
    Shape out = s;
    out[axis] = int64_t(indices.size());
    return add(out, [=](const Env& e, const Ctx&) {
      return sp::take(e[size_t(x)], sp::array(indices), axis);
    });
  }

  std::optional<int> flip(int x) {
    const Shape s = shape(x);
    if (s.ndim() == 0) return std::nullopt;
    sp::Axes axes{pick(s.ndim())};
    return add(s, [=](const Env& e, const Ctx&) { return sp::flip(e[size_t(x)], axes); });
  }

  // x with itself or with another value along an axis.
  std::optional<int> concat(int x) {
    const Shape s = shape(x);
    if (s.ndim() == 0) return std::nullopt;
    int axis = pick(s.ndim());
    Shape other = s;
    if (coin(0.5)) other[axis] = random_dim();
    int y = other == s && coin(0.5) ? x : operand_of_shape(other);
    Shape out = s;
    out[axis] += other[axis];
    if (!fits(out)) return std::nullopt;
    return add(out, [=](const Env& e, const Ctx&) {
      return sp::concatenate({e[size_t(x)], e[size_t(y)]}, axis);
    });
  }

  // x constrained to split a dim of size > 1 over one mesh axis (unevenly when the axis does not
  // divide it): the dim along which the partitioner then moves halos.
  struct SplitDim {
    int value, dim;
    P spec;
  };
  std::optional<SplitDim> split_dim(int x) {
    const Shape s = shape(x);
    std::vector<int> dims;
    for (int d = 0; d < s.ndim(); ++d)
      if (s[d] > 1) dims.push_back(d);
    if (dims.empty()) return std::nullopt;
    const int d = pick_of(dims);
    std::vector<std::pair<std::string, int64_t>> axes;
    for (const auto& axis : p_.mesh.shape())
      if (!excluded(axis.first)) axes.push_back(axis);
    if (axes.empty()) return std::nullopt;
    std::vector<P::Entry> entries(size_t(d + 1), std::nullopt);
    entries[size_t(d)] = sp::AxisNames(axes[size_t(pick(int(axes.size())))].first);
    const P spec(entries);
    return SplitDim{constrained(x, spec), d, spec};
  }

  // x and another value, in either order, concatenated along a dim both are split along.
  std::optional<int> split_concat(int x) {
    const std::optional<SplitDim> split = split_dim(x);
    if (!split) return std::nullopt;
    const int u = split->value, axis = split->dim;
    Shape other = shape(u);
    other[axis] = random_dim();
    const int y = constrained(operand_of_shape(other), split->spec);
    Shape out = shape(u);
    out[axis] += other[axis];
    if (!fits(out)) return std::nullopt;
    const bool first = coin(0.5);
    return add(out, [=](const Env& e, const Ctx&) {
      return first ? sp::concatenate({e[size_t(u)], e[size_t(y)]}, axis)
                   : sp::concatenate({e[size_t(y)], e[size_t(u)]}, axis);
    });
  }

  // lax.pad with interior padding (and edges, negative ones crop) along a split dim.
  std::optional<int> split_pad(int x) {
    const std::optional<SplitDim> split = split_dim(x);
    if (!split) return std::nullopt;
    const int u = split->value, axis = split->dim;
    const Shape s = shape(u);
    std::vector<sp::lax::PadConfig> config(size_t(s.ndim()));
    config[size_t(axis)] = {pick(5) - 2, pick(5) - 2, 1 + pick(2)};
    Shape out = s;
    out[axis] = config[size_t(axis)].low + config[size_t(axis)].high + s[axis] +
                (s[axis] - 1) * config[size_t(axis)].interior;
    if (out[axis] <= 0 || !fits(out)) return std::nullopt;
    const bool integer = p_.integer;
    const int value = pick(5) - 2;
    return add(out, [=](const Env& e, const Ctx&) {
      Array fill = sp::full({}, Array(value), integer ? sp::int32 : sp::float32);
      return sp::lax::pad(e[size_t(u)], fill, config);
    });
  }

  // lax.pad with low/high edges (negative crops) and interior padding, by a value that is not
  // zero (what a device receives from no neighbour).
  std::optional<int> pad(int x) {
    const Shape s = shape(x);
    if (s.ndim() == 0) return std::nullopt;
    std::vector<sp::lax::PadConfig> config;
    Shape out;
    for (int d = 0; d < s.ndim(); ++d) {
      sp::lax::PadConfig c{pick(4) - 1, pick(4) - 1, coin(0.2) ? 1 : 0};
      int64_t size = c.low + c.high + s[d] + std::max<int64_t>(s[d] - 1, 0) * c.interior;
      if (size <= 0) c = {};
      config.push_back(c);
      out.push_back(size <= 0 ? s[d] : size);
    }
    if (!fits(out)) return std::nullopt;
    bool integer = p_.integer;
    const int value = pick(5) - 2;
    return add(out, [=](const Env& e, const Ctx&) {
      Array fill = sp::full({}, Array(value), integer ? sp::int32 : sp::float32);
      return sp::lax::pad(e[size_t(x)], fill, config);
    });
  }

  // cumsum (scaled), cummax or cummin along an axis, sometimes reversed.
  std::optional<int> cumulative(int x) {
    const Shape s = shape(x);
    if (s.ndim() == 0) return std::nullopt;
    int axis = pick(s.ndim());
    bool reverse = coin(0.3);
    int64_t n = s[axis];
    switch (pick(3)) {
      case 0:
        return add(s, [=, factor = scale(n)](const Env& e, const Ctx& ctx) {
          return scaled(sp::lax::cumsum(unsplit(e[size_t(x)], {axis}, ctx), axis, reverse), factor);
        });
      case 1:
        return add(s, [=](const Env& e, const Ctx& ctx) {
          return sp::lax::cummax(unsplit(e[size_t(x)], {axis}, ctx), axis, reverse);
        });
      default:
        return add(s, [=](const Env& e, const Ctx& ctx) {
          return sp::lax::cummin(unsplit(e[size_t(x)], {axis}, ctx), axis, reverse);
        });
    }
  }

  std::optional<int> sort(int x) {
    const Shape s = shape(x);
    if (s.ndim() == 0) return std::nullopt;
    int axis = pick(s.ndim());
    return add(s, [=](const Env& e, const Ctx& ctx) {
      return sp::sort(unsplit(e[size_t(x)], {axis}, ctx), axis);
    });
  }

  // lax.cond on the sum of x (sum_above_zero), with small branches; the false one sometimes
  // constrains its result's sharding.
  std::optional<int> cond(int x) {
    bool integer = p_.integer;
    std::optional<P> spec;
    if (coin(0.3)) spec = random_spec(shape(x));
    return add(shape(x), [=](const Env& e, const Ctx& ctx) {
      const Array& v = e[size_t(x)];
      auto on_true = [integer](const Array& a) {
        return integer ? a * 2 : sp::sin(a - sp::mean(a));
      };
      auto on_false = [integer, spec, ctx](const Array& a) {
        Array r = integer ? -a : sp::cos(a);
        if (!spec || !ctx.mesh) return r;
        return sp::with_sharding_constraint(r, sp::NamedSharding(*ctx.mesh, *spec));
      };
      return sp::lax::cond(sum_above_zero(v), on_true, on_false, v);
    });
  }

  // A static fori_loop (a scan) whose body uses the counter.
  std::optional<int> fori_loop(int x) {
    bool integer = p_.integer;
    int trips = 1 + pick(3);
    return add(shape(x), [=](const Env& e, const Ctx&) {
      auto body = [integer](const Array& i, const Array& c) {
        return integer ? c + i : sp::sin(c) * 0.5f + sp::astype(i, sp::float32) * 0.25f;
      };
      return sp::lax::fori_loop(0, trips, body, e[size_t(x)]);
    });
  }

  // lax.scan over the leading dim of x; the result is the stacked ys or the final carry.
  std::optional<int> scan(int x) {
    const Shape s = shape(x);
    if (s.ndim() == 0) return std::nullopt;
    Shape carry(s.dims().begin() + 1, s.dims().end());
    bool integer = p_.integer, want_carry = coin(0.3);
    return add(want_carry ? carry : s, [=](const Env& e, const Ctx&) {
      auto body = [integer](const Array& c, const Array& v) {
        Array next = integer ? c + v : c * 0.5f + v - sp::max(v) * 0.5f;
        return std::pair<Array, Array>{next, integer ? next : sp::tanh(next)};
      };
      Array init = sp::zeros(carry, integer ? sp::int32 : sp::float32);
      auto [final_carry, ys] = sp::lax::scan(body, init, e[size_t(x)]);
      return want_carry ? final_carry : ys;
    });
  }

  // A while_loop whose trip count depends on a sum of its carry (on every device the same, so
  // a split carry's sum must be completed before the predicate), and whose body reduces over
  // dim 0 of the carry. Not differentiable in reverse mode, as JAX's. Float carries compare the
  // mean of their magnitudes: a signed sum of values that cancel (a branch that subtracts the
  // mean) sits at 1e-9 either side of 0, where reassociation alone changes the trip count.
  std::optional<int> while_loop(int x) {
    const Shape s = shape(x);
    if (s.ndim() == 0) return std::nullopt;
    has_while_ = true;
    const bool integer = p_.integer;
    const int trips = 1 + pick(3);
    return add(s, [=](const Env& e, const Ctx&) {
      using Carry = std::pair<Array, Array>;
      auto more = [trips, integer](const Carry& c) {
        Array big = integer ? sp::sum(c.second) > 0 : sp::mean(sp::abs(c.second)) > 0.25f;
        return c.first < sp::astype(big, sp::int32) + trips;
      };
      auto step = [integer](const Carry& c) {
        const Array& v = c.second;
        Array next = integer ? v - sp::max(v, {0}, true)
                             : sp::sin(v) * 0.5f + sp::mean(v, {0}, true) * 0.25f;
        return Carry{c.first + 1, next};
      };
      return sp::lax::while_loop(more, step, Carry{Array(0), e[size_t(x)]}).second;
    });
  }

  // lax.scan over the leading dim of x, each step a matmul of the carry with a weight it closes
  // over (a fresh input, split at random): the result is the stacked ys or the final carry.
  std::optional<int> scan_matmul(int x) {
    const Shape s = shape(x);
    if (p_.integer || s.ndim() < 2) return std::nullopt;
    const int64_t k = s[s.ndim() - 1];
    const int w = fresh_input({k, k});
    Shape carry(s.dims().begin() + 1, s.dims().end());
    const bool want_carry = coin(0.3);
    return add(want_carry ? carry : s, [=, factor = scale(k)](const Env& e, const Ctx&) {
      const Array& wm = e[size_t(w)];
      auto body = [&](const Array& c, const Array& v) {
        Array next = sp::tanh(sp::matmul(c, wm) * factor + v);
        return std::pair<Array, Array>{next, next * 0.5f};
      };
      auto [final_carry, ys] = sp::lax::scan(body, sp::zeros(carry), e[size_t(x)]);
      return want_carry ? final_carry : ys;
    });
  }

  // A reshape (merging or splitting the dims of a compound factor), a dynamic_slice or a
  // reshard (the axes of two dims swapped) between two constraints that split dims unevenly.
  std::optional<int> uneven_move(int x) {
    if (shape(x).ndim() == 0) return std::nullopt;
    const int from = constrained(x, uneven_spec(shape(x)));
    std::optional<int> y;
    switch (pick(3)) {
      case 0:
        y = reshape(from);
        break;
      case 1:
        y = dynamic_slice(from);
        break;
      default:
        return constrained(from, swapped_axes(shape(from)));
    }
    if (!y) return std::nullopt;
    return constrained(*y, uneven_spec(shape(*y)));
  }

  // An uneven spec whose first two dims then trade their axes (P('a', 'b') to P('b', 'a')).
  P swapped_axes(const Shape& shape) {
    const P spec = uneven_spec(shape);
    if (shape.ndim() < 2) return spec;
    std::vector<P::Entry> entries = spec.entries();
    entries.resize(size_t(shape.ndim()));
    const int a = pick(shape.ndim()), b = (a + 1 + pick(shape.ndim() - 1)) % shape.ndim();
    std::swap(entries[size_t(a)], entries[size_t(b)]);
    return P(entries);
  }

  // with_sharding_constraint to a random spec (only where the program runs on a mesh).
  std::optional<int> constraint(int x) {
    if (explicit_) return resharded_to(x, explicit_spec(shape(x)));
    const P spec = uneven_ && coin(0.5) ? uneven_spec(shape(x)) : random_spec(shape(x));
    return constrained(x, with_open_dims(spec, shape(x).ndim()));
  }

  // A third of the constraints leave some of their unsplit dims open (P::UNCONSTRAINED), for
  // propagation to split. The draws come from a stream of their own, so that each seed still
  // generates the program it did before.
  P with_open_dims(const P& spec, int ndim) {
    if (!std::bernoulli_distribution(1.0 / 3)(open_rng_)) return spec;
    std::vector<P::Entry> entries = spec.entries();
    entries.resize(size_t(ndim));
    std::vector<bool> open(static_cast<size_t>(ndim));
    for (size_t d = 0; d < open.size(); ++d)
      open[d] = !entries[d] && std::bernoulli_distribution(0.5)(open_rng_);
    return P(std::move(entries), std::move(open));
  }

  int constrained(int x, const P& spec) {
    return add(shape(x), [=](const Env& e, const Ctx& ctx) {
      const Array& v = e[size_t(x)];
      return ctx.mesh ? sp::with_sharding_constraint(v, sp::NamedSharding(*ctx.mesh, spec)) : v;
    });
  }

  // ---- wide mode ----
  // 1-D to 4-D meshes of 8 devices, some with size-1 axes; half of them with Explicit axes (all,
  // or some of them).
  sp::Mesh wide_mesh() {
    static const std::vector<std::vector<int64_t>> shapes = {
        {8}, {4, 2}, {2, 4}, {2, 2, 2}, {8, 1}, {1, 4}, {2, 1, 4}, {2, 2, 1, 2}};
    static const std::vector<std::string> names = {"x", "y", "z", "w"};
    const std::vector<int64_t> dims = pick_of(shapes);
    std::vector<sp::AxisType> types(dims.size(), sp::AxisType::Auto);
    if (coin(0.5)) {
      const bool all = coin(0.5);
      for (auto& t : types)
        if (all || coin(0.5)) t = sp::AxisType::Explicit;
    }
    return sp::make_mesh(Shape(dims),
                         std::vector<std::string>(names.begin(), names.begin() + long(dims.size())),
                         types);
  }

  // Explicit meshes get their own op set; a third of the others a vmapped program, half of
  // those with spmd_axis_name (an axis dividing the batch, kept out of the program's specs).
  void start_wide() {
    for (const auto& t : p_.mesh.axis_types()) explicit_ = explicit_ || t == sp::AxisType::Explicit;
    if (explicit_ || !coin(0.3)) return;
    p_.batch = pick_of<int64_t>({2, 3, 4, 8});
    std::vector<std::string> fit;
    for (const auto& [name, size] : p_.mesh.shape())
      if (p_.batch % size == 0) fit.push_back(name);
    if (fit.empty() || coin(0.5)) return;
    p_.spmd_axis_name = {pick_of(fit)};
    excluded_ = p_.spmd_axis_name;
  }

  // The ops whose sharding types spmd and JAX agree on without an out_sharding: elementwise
  // (operands resharded alike), reductions, transposes, reshards, contractions over unsplit
  // dims, and reshapes of replicated values.
  std::optional<int> explicit_op(int x) {
    static const Op ops[] = {
        &Generator::unary,      &Generator::binary,
        &Generator::reduce,     &Generator::transpose,
        &Generator::constraint, &Generator::dot,
        &Generator::einsum,     &Generator::replicated_reshape,
        &Generator::argmax,     &Generator::cumulative,
        &Generator::sort,       &Generator::shard_map_op,
    };
    return (this->*ops[pick(int(std::size(ops)))])(x);
  }

  std::optional<int> replicated_reshape(int x) {
    return shape(x).ndim() == 0 ? std::nullopt : reshape(resharded_to(x, P()));
  }

  bool excluded(const std::string& axis) const {
    return std::find(excluded_.begin(), excluded_.end(), axis) != excluded_.end();
  }

  // A random spec over the mesh's Explicit axes only.
  P explicit_spec(const Shape& s) {
    excluded_.clear();
    for (const auto& [name, size] : p_.mesh.shape())
      if (p_.mesh.axis_type(name) != sp::AxisType::Explicit) excluded_.push_back(name);
    P spec = random_spec(s);
    excluded_.clear();
    return spec;
  }

  // sp::reshard (only where the program runs on a mesh).
  int resharded_to(int x, const P& spec) {
    return add(shape(x), [=](const Env& e, const Ctx& ctx) {
      const Array& v = e[size_t(x)];
      return ctx.mesh ? sp::reshard(v, sp::NamedSharding(*ctx.mesh, spec)) : v;
    });
  }

  // jnp.einsum contracting x's last dim with a fresh operand, with batch dims and the output's
  // dims permuted: "a,an->n", "ab,bn->na", "abc,acn->ban", "abcd,abdn->abcn".
  std::optional<int> einsum(int x) {
    const Shape s = shape(x);
    if (s.ndim() == 0) return std::nullopt;
    static const char* subscripts[] = {"a,an->n", "ab,bn->na", "abc,acn->ban", "abcd,abdn->abcn"};
    const int r = s.ndim(), last = r - 1;
    const int64_t n = random_dim(), k = s[last];
    std::vector<int64_t> w_dims(s.dims().begin(), s.dims().begin() + std::max(0, r - 2));
    std::vector<std::pair<int, int>> batch;  // w's dims split as x's
    for (int d = 0; d < int(w_dims.size()); ++d) batch.push_back({d, d});
    w_dims.push_back(k);
    w_dims.push_back(n);
    Shape out;
    if (r == 1) out = {n};
    if (r == 2) out = {n, s[0]};
    if (r == 3) out = {s[1], s[0], n};
    if (r == 4) out = {s[0], s[1], s[2], n};
    const int w = fresh_input(Shape(w_dims));
    const std::string sub = subscripts[r - 1];
    return add(out, [=, factor = scale(k)](const Env& e, const Ctx& ctx) {
      const Array a = unsplit(e[size_t(x)], {last}, ctx);
      return scaled(sp::einsum(sub, a, split_like(e[size_t(w)], a, batch, ctx)), factor);
    });
  }

  // shard_map over the whole mesh inside the program: f (sin, or doubling for integers) of each
  // block, then a collective whose global meaning the unsharded run computes directly: a psum
  // over every splitting axis (out_specs P(): the sum of the blocks), a tiled all_gather of a
  // split dim (whose result still varies over the gathered axes, as JAX types it: out_specs as
  // in_specs give copies of f(x) side by side), or a ppermute by one along the major axis of a
  // split dim (a roll of f(x)).
  std::optional<int> shard_map_op(int x) {
    const Shape s = shape(x);
    if (p_.batch > 0 || s.ndim() == 0) return std::nullopt;
    const P spec = random_spec(s);
    std::vector<P::Entry> entries = spec.entries();
    entries.resize(size_t(s.ndim()));
    std::vector<int> split;
    std::vector<std::string> axes;
    for (int d = 0; d < s.ndim(); ++d) {
      if (!entries[size_t(d)]) continue;
      split.push_back(d);
      for (const auto& a : entries[size_t(d)]->names()) axes.push_back(a);
    }
    if (split.empty()) return std::nullopt;
    const bool integer = p_.integer;
    const int d = pick_of(split);
    const std::vector<std::string> on_d = entries[size_t(d)]->names();
    const int64_t major = p_.mesh.axis_size(on_d[0]);
    switch (pick(3)) {
      case 0: {
        std::vector<int64_t> block = s.dims(), parts, split_dims;
        int64_t blocks = 1;
        for (int sd : split) {
          int64_t f = 1;
          for (const auto& a : entries[size_t(sd)]->names()) f *= p_.mesh.axis_size(a);
          block[size_t(sd)] /= f;
          blocks *= f;
        }
        for (int i = 0; i < s.ndim(); ++i) {
          if (std::find(split.begin(), split.end(), i) != split.end()) {
            split_dims.push_back(int64_t(parts.size()));
            parts.push_back(s[i] / block[size_t(i)]);
          }
          parts.push_back(block[size_t(i)]);
        }
        const float factor = scale(blocks);
        auto body = [=](const Array& b) {
          return sp::psum(scaled(integer ? b * 2 : sp::sin(b), factor), sp::AxisNames(axes));
        };
        return add(Shape(block), [=](const Env& e, const Ctx& ctx) {
          const Array& v = e[size_t(x)];
          if (ctx.mesh) return sp::shard_map(body, *ctx.mesh, spec, P())(laid_out(v, spec, ctx));
          const Array f = scaled(integer ? v * 2 : sp::sin(v), factor);
          sp::Axes sum_over(split_dims.begin(), split_dims.end());
          return sp::sum(sp::reshape(f, Shape(parts)), sum_over);
        });
      }
      case 1: {
        int64_t copies = 1;
        for (const auto& a : on_d) copies *= p_.mesh.axis_size(a);
        std::vector<int64_t> out_dims = s.dims();
        out_dims[size_t(d)] *= copies;
        auto body = [=](const Array& b) {
          return sp::all_gather(integer ? b * 2 : sp::sin(b), sp::AxisNames(on_d),
                                {.axis = d, .tiled = true});
        };
        return add(Shape(out_dims), [=](const Env& e, const Ctx& ctx) {
          const Array& v = e[size_t(x)];
          if (ctx.mesh) return sp::shard_map(body, *ctx.mesh, spec, spec)(laid_out(v, spec, ctx));
          const Array f = integer ? v * 2 : sp::sin(v);
          return sp::concatenate(std::vector<Array>(size_t(copies), f), d);
        });
      }
      default: {
        std::vector<std::pair<int, int>> perm;
        for (int i = 0; i < major; ++i) perm.push_back({i, int((i + 1) % major)});
        const std::string axis = on_d[0];
        auto body = [=](const Array& b) {
          return sp::ppermute(integer ? b * 2 : sp::sin(b), sp::AxisNames(axis), perm);
        };
        const int64_t shift = s[d] / major;
        return add(s, [=](const Env& e, const Ctx& ctx) {
          const Array& v = e[size_t(x)];
          if (ctx.mesh) return sp::shard_map(body, *ctx.mesh, spec, spec)(laid_out(v, spec, ctx));
          return sp::roll(integer ? v * 2 : sp::sin(v), shift, d);
        });
      }
    }
  }

  std::mt19937_64 rng_, open_rng_;
  bool uneven_, wide_, more_;
  bool explicit_ = false;              // the mesh has Explicit axes
  std::vector<std::string> excluded_;  // mesh axes random_spec leaves out
  Program p_;
  bool has_while_ = false;
};

// ---- running and comparing ----

std::vector<Array> random_arguments(const Program& p, uint64_t seed) {
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ULL);
  std::vector<Array> args;
  for (const Input& in : p.inputs) {
    auto n = size_t(in.shape.size());
    if (p.integer) {
      std::vector<int32_t> v(n);
      for (auto& x : v) x = std::uniform_int_distribution<int32_t>(-4, 4)(rng);
      args.push_back(sp::array(v, in.shape));
    } else {
      std::vector<float> v(n);
      for (auto& x : v) x = std::uniform_real_distribution<float>(-1, 1)(rng);
      args.push_back(sp::array(v, in.shape));
    }
  }
  return args;
}

std::vector<Array> committed_arguments(const Program& p, const std::vector<Array>& args) {
  std::vector<Array> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const Input& in = p.inputs[i];
    bool place = in.spec && !in.by_in_shardings;
    out.push_back(place ? sp::device_put(args[i], sp::NamedSharding(p.mesh, *in.spec)) : args[i]);
  }
  return out;
}

std::vector<double> host_values(const Array& x) {
  Array v = sp::device_get(x);
  if (v.dtype() == sp::float32) {
    std::vector<float> f = v.to_vector<float>();
    return {f.begin(), f.end()};
  }
  std::vector<int32_t> i = sp::astype(v, sp::int32).to_vector<int32_t>();
  return {i.begin(), i.end()};
}

// Empty when `got` matches `want`: same shape and dtype, values within `rtol` of the reference's
// scale (at least `min_scale`) for floats (reassociation), exact for integers.
std::string value_mismatch(const Array& want, const Array& got, double rtol, double min_scale) {
  std::ostringstream os;
  if (want.shape() != got.shape() || want.dtype() != got.dtype()) {
    os << "shape/dtype " << got.shape() << " " << sp::dtype_name(got.dtype()) << ", want "
       << want.shape() << " " << sp::dtype_name(want.dtype());
    return os.str();
  }
  std::vector<double> a = host_values(want), b = host_values(got);
  double scale = min_scale;
  for (double v : a)
    if (std::isfinite(v)) scale = std::max(scale, std::abs(v));
  double tol = want.dtype() == sp::float32 ? rtol * scale : 0;
  for (size_t i = 0; i < a.size(); ++i) {
    // Infinities match only themselves (a product of values over 2 overflows in both runs).
    bool same = a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i]));
    if (!same && !(std::abs(a[i] - b[i]) <= tol)) {
      os << "value at flat index " << i << ": " << b[i] << ", want " << a[i] << " (tolerance "
         << tol << ")";
      return os.str();
    }
  }
  return "";
}

// Per dim, the names of the mesh's Explicit axes splitting it ("x,y" or "-"), trailing unsplit dims
// dropped: what sp::type_of must show of a sharding.
std::string explicit_split(const P& spec, const sp::Mesh& mesh) {
  std::vector<std::string> dims;
  for (const P::Entry& e : spec.entries()) {
    std::string names;
    for (const std::string& a : e ? e->names() : std::vector<std::string>{})
      if (mesh.axis_type(a) == sp::AxisType::Explicit) names += (names.empty() ? "" : ",") + a;
    dims.push_back(names.empty() ? "-" : names);
  }
  while (!dims.empty() && dims.back() == "-") dims.pop_back();
  std::string out;
  for (const std::string& d : dims) out += "[" + d + "]";
  return out;
}

// Empty when sp::type_of(got) shows the Explicit axes of the sharding it has.
std::string type_mismatch(const Array& got, const sp::NamedSharding& sharding) {
  const std::string want = explicit_split(sharding.spec(), sharding.mesh());
  const std::string typed = explicit_split(sp::type_of(got).spec(), sharding.mesh());
  if (typed == want) return "";
  return "type " + sp::type_of(got).str() + " does not match its sharding " + sharding.repr();
}

// Empty when `got` is committed to the mesh (with `out_spec`, to exactly that sharding).
std::string placement_mismatch(const Array& got, const sp::Mesh& mesh,
                               const std::optional<P>& out_spec) {
  auto named = std::dynamic_pointer_cast<const sp::NamedSharding>(got.sharding());
  if (!got.committed() || !named || !(named->mesh() == mesh))
    return "not committed to the mesh: " + got.sharding()->repr();
  if (out_spec && !(*named == sp::NamedSharding(mesh, *out_spec)))
    return "out_shardings not honoured: " + named->repr();
  return type_mismatch(got, *named);
}

// Where the partitioned runs happen: the program's mesh.
Ctx context(const Program& p) {
  bool explicit_axes = false;
  for (const auto& t : p.mesh.axis_types())
    explicit_axes = explicit_axes || t == sp::AxisType::Explicit;
  return Ctx{&p.mesh, explicit_axes};
}

std::string describe(const Program& p, uint64_t seed, const std::vector<Array>& committed) {
  std::ostringstream os;
  os << "seed " << seed << " (rerun: SPMD_DIFFERENTIAL_SEED=" << seed << ")\n"
     << "mesh " << p.mesh.repr() << "\n";
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    os << "  input " << i << " " << p.inputs[i].shape << ": "
       << (p.inputs[i].spec ? p.inputs[i].spec->repr() : "uncommitted")
       << (p.inputs[i].by_in_shardings ? " by in_shardings" : "") << "\n";
  }
  if (p.out_spec) os << "  out_shardings[0]: " << p.out_spec->repr() << "\n";
  if (p.grad) os << "  value_and_grad of the sum of the outputs\n";
  if (p.donate) os << "  arguments donated\n";
  if (p.rtol != 1e-5) os << "  float values compared at rtol " << p.rtol << "\n";
  if (p.batch > 0) {
    os << "  vmapped over a batch of " << p.batch;
    if (!p.spmd_axis_name.empty()) os << ", spmd_axis_name " << p.spmd_axis_name[0];
    os << "; in_axes";
    for (const Input& in : p.inputs)
      os << " " << (in.batch_dim ? std::to_string(*in.batch_dim) : "None");
    os << " (the jaxpr below is of one example)\n";
  }
  try {
    Ctx ctx = context(p);
    if (p.batch > 0) {
      auto fn = [&](const std::vector<Array>& xs) { return p.values(xs, ctx); };
      os << sp::make_jaxpr(fn)(p.example(committed, 0));
    } else {
      auto fn = [&](const std::vector<Array>& xs) { return p.run(xs, ctx); };
      os << sp::make_jaxpr(fn)(committed);
    }
  } catch (const std::exception& e) {
    os << "(make_jaxpr failed: " << e.what() << ")\n";
  }
  return os.str();
}

// The scale output 0 of a grad program (the sum of every output element) is compared at: the sum
// of its terms' magnitudes, and at least a tenth of their number, so that it may differ by 1e-5
// of the first and 1e-6 per term (16 units in the last place of a value of order 1). Summing in
// another order moves a sum whose terms cancel by 1e-7 of it (1024 terms of order 1 that come to
// 0.018 moved by 5.5e-5 between the unsharded and the partitioned order: plain seed 51409), and
// terms that subtract a mean move together by the mean's rounding: 192 terms sin(c - mean(c)),
// c about 0.84 and the terms about 0.12, moved by 3.4e-5 (1.5e-6 of their magnitudes), and 1024
// terms sin(t - mean(t)), t about 0.7 and the terms about 0.0085, by 1.2e-4, two units in the
// last place of the mean each (1.4e-5 of their magnitudes). 1 for other programs.
double loss_scale(const Program& p, const std::vector<Array>& args) {
  if (!p.grad || p.batch > 0) return 1;
  double magnitude = 0, terms = 0;
  for (const Array& v : p.values(args, Ctx{})) {
    for (double x : host_values(v)) magnitude += std::abs(x);
    terms += double(v.size());
  }
  return std::max({1.0, magnitude, terms / 10});
}

// Compares each output, and where `placed` checks where it lives; empty when all agree. Output 0
// is compared at a scale of at least `scale0`.
std::string compare(const std::vector<Array>& want, const std::vector<Array>& got, const Program& p,
                    const char* how, bool placed, double scale0 = 1) {
  if (want.size() != got.size()) return std::string(how) + ": wrong number of outputs";
  for (size_t i = 0; i < want.size(); ++i) {
    std::string m = value_mismatch(want[i], got[i], p.rtol, i == 0 ? scale0 : 1);
    if (m.empty() && placed)
      m = placement_mismatch(got[i], p.mesh, i == 0 ? p.out_spec : std::nullopt);
    if (!m.empty()) return std::string(how) + " output " + std::to_string(i) + ": " + m;
  }
  return "";
}

// Runs one program: the reference, the jit'ed partitioned run and, for one-op programs, the eager
// run. Returns a description of the failure, or an empty string.
std::string check_program(uint64_t seed, Mode mode) {
  Program p = Generator(seed, mode).program();
  std::vector<Array> args = random_arguments(p, seed);
  std::vector<Array> committed = committed_arguments(p, args);
  std::vector<Array> want;
  try {
    want = p.run(args, Ctx{});
  } catch (const std::exception& e) {
    return "reference run threw (a generator bug): " + std::string(e.what()) + "\n" +
           describe(p, seed, committed);
  }
  std::string failure;
  try {
    sp::JitOptions options;
    std::vector<sp::ShardingTree> ins(p.inputs.size());
    for (size_t i = 0; i < ins.size(); ++i)
      if (p.inputs[i].by_in_shardings) ins[i] = sp::NamedSharding(p.mesh, *p.inputs[i].spec);
    options.in_shardings = sp::ShardingTree({sp::ShardingTree(ins)});
    if (p.out_spec) {
      std::vector<sp::ShardingTree> outs(p.outputs.size());
      outs[0] = sp::NamedSharding(p.mesh, *p.out_spec);
      options.out_shardings = sp::ShardingTree(outs);
    }
    if (p.donate) options.donate_argnums = {0};
    const Ctx ctx = context(p);
    auto fn = [&p, ctx](const std::vector<Array>& xs) { return p.run(xs, ctx); };
    // Donated arguments are deleted: the call gets copies.
    const std::vector<Array> jit_args =
        p.donate ? committed_arguments(p, random_arguments(p, seed)) : committed;
    const double scale0 = loss_scale(p, args);
    failure = compare(want, sp::jit(fn, options)(jit_args), p, "jit", true, scale0);
    // Eager gradients that do not depend on the inputs are uncommitted in JAX.
    if (failure.empty() && p.num_ops() == 1 && !p.out_spec)
      failure = compare(want, p.run(committed, ctx), p, "eager", !p.grad, scale0);
  } catch (const std::exception& e) {
    failure = std::string("threw: ") + e.what();
  }
  return failure.empty() ? "" : failure + "\n" + describe(p, seed, committed);
}

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoll(v) : fallback;
}

}  // namespace

void check_programs(Mode mode, int64_t programs) {
  std::vector<uint64_t> seeds;
  if (int64_t s = env_int("SPMD_DIFFERENTIAL_SEED", -1); s >= 0) {
    seeds.push_back(uint64_t(s));
  } else {
    const int64_t first = env_int("SPMD_DIFFERENTIAL_FIRST", 0);
    for (int64_t i = 0; i < env_int("SPMD_DIFFERENTIAL_PROGRAMS", programs); ++i)
      seeds.push_back(uint64_t(first + i));
  }
  // The first failures in full, the rest as one line each (seed and what differed).
  int failures = 0;
  std::string rest;
  for (uint64_t seed : seeds) {
    std::string failure = check_program(seed, mode);
    if (failure.empty()) continue;
    if (++failures <= 20)
      ADD_FAILURE() << failure;
    else
      rest += "seed " + std::to_string(seed) + ": " + failure.substr(0, failure.find('\n')) + "\n";
  }
  EXPECT_EQ(failures, 0) << "of " << seeds.size() << " programs\n" << rest;
}

namespace {

TEST(Differential, RandomProgramsAgreeWithUnshardedResults) {
  if (sp::devices().size() < 8) GTEST_SKIP() << "needs 8 devices (SPMD_CPU_DEVICES=8)";
  check_programs(Mode::plain, 300);
}

TEST(Differential, RandomProgramsWithUnevenSplitsAgreeWithUnshardedResults) {
  if (sp::devices().size() < 8) GTEST_SKIP() << "needs 8 devices (SPMD_CPU_DEVICES=8)";
  check_programs(Mode::uneven, 100);
}

TEST(Differential, WideRandomProgramsAgreeWithUnshardedResults) {
  if (sp::devices().size() < 8) GTEST_SKIP() << "needs 8 devices (SPMD_CPU_DEVICES=8)";
  check_programs(Mode::wide, 300);
}

}  // namespace
}  // namespace differential

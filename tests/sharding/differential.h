// What the differential tester's runs share (differential_test.cpp): how an op of a random program
// is written (a kernel over the values before it, told where it runs), the generator's interface
// the `more` run's op kinds build on (differential_more_test.cpp), and the check of a run.
#pragma once

#include <spmd/spmd.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace differential {

constexpr int64_t kMaxElements = 2048;
constexpr int kMaxRank = 4;

// Where a program runs: the reference has no mesh, so its sharding constraints are no-ops. On a
// mesh with Explicit axes, ops whose sharding types would clash reshard their operands first.
struct Ctx {
  const spmd::Mesh* mesh = nullptr;
  bool explicit_axes = false;
};

using Env = std::vector<spmd::Array>;
using Kernel = std::function<spmd::Array(const Env&, const Ctx&)>;

// plain and uneven: the programs of the first two runs, kept seed for seed. wide: more meshes
// (size-1 axes, Explicit and mixed axis types), vmapped programs (with and without
// spmd_axis_name), shard_map with a collective inside the program, einsum, reshard, donation.
// more: meshes over some of the devices in a permuted order, and the op kinds of
// differential_more_test.cpp.
enum class Mode { plain, uneven, wide, more };

inline bool fits(const spmd::Shape& s) {
  return s.ndim() <= kMaxRank && s.size() <= kMaxElements;
}

// The predicate of a generated cond: whether v sums to more than 0 (integers) or 0.01 (floats).
// Values minus their mean, or copies of one value minus their mean, sum to 0 up to rounding, a
// few 1e-8 either side in both runs (plain seed 68177: a broadcast scalar's copies minus their
// mean, summed); the threshold keeps such ties out of the branch taken.
inline spmd::Array sum_above_zero(const spmd::Array& v) {
  return v.dtype() == spmd::float32 ? spmd::sum(v) > 0.01f : spmd::sum(v) > 0;
}

// The generator as the `more` run's op kinds see it: randomness, the values so far, and adding
// values. Values are node indices; kernels capture them, never the generator.
class Builder {
 public:
  virtual ~Builder() = default;
  virtual int pick(int n) = 0;  // uniform in 0..n-1
  virtual bool coin(double p) = 0;
  template <class T>
  T pick_of(const std::vector<T>& xs) {
    return xs[size_t(pick(int(xs.size())))];
  }
  virtual int64_t random_dim() = 0;
  virtual spmd::Shape shape(int v) const = 0;
  virtual bool integer() const = 0;  // int32 values, else float32
  virtual const spmd::Mesh& mesh() const = 0;
  // A valid random spec of the mesh for `shape`.
  virtual spmd::P random_spec(const spmd::Shape& shape) = 0;
  // A spec splitting dims of `shape` whose mesh axes need not divide them (padded blocks).
  virtual spmd::P uneven_spec(const spmd::Shape& shape) = 0;
  virtual int fresh_input(const spmd::Shape& s) = 0;
  // An existing value of shape s, or a fresh input.
  virtual int operand_of_shape(const spmd::Shape& s) = 0;
  virtual int add(spmd::Shape s, Kernel k) = 0;
  // 1/n for float programs (sums stay of order 1), 1 for integer ones.
  virtual float scale(int64_t n) const = 0;
  // The program rounds through a narrower float format: compare at that format's precision.
  virtual void round_trips_through(spmd::DType narrow) = 0;
};

// One op of the `more` run on x (nullopt when none fits x).
std::optional<int> more_op(Builder& b, int x);
// The `more` run's meshes: over all the devices or a subset of them, in a permuted order.
spmd::Mesh more_mesh(Builder& b);

// Checks the programs of the seeds the environment asks for (`programs` of them by default).
void check_programs(Mode mode, int64_t programs);

}  // namespace differential

// pmap, shard_map and the collectives against their reference semantics: pmap equals vmap with
// the same axis_name, shard_map equals split-apply-concatenate, and every collective on 1-, 2- and
// 3-D meshes equals the per-instance values of JAX's definition (reference/JAX_FACTS.md,
// "Collectives"), computed here on the host from the blocks each device holds.
#include <spmd/parallel.h>
#include <spmd/placement.h>
#include <spmd/shard_map.h>
#include <spmd/spmd.h>

#include "support/config_scope.h"
#include "support/support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace sp = spmd;
using sp::P;
using spmd_test::arrays_close;
using spmd_test::arrays_equal;

namespace {

// Deterministic data: halves of small integers, so sums over up to eight devices are exact in
// every float dtype (bfloat16 included) and the order of the reduction cannot matter. Unsigned
// types get 0…8 (eight of them sum to at most 64, within int8 and uint8), bool a random mix.
sp::Array test_data(const sp::Shape& shape, sp::DType dtype, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(sp::is_unsigned_integer(dtype) ? 0 : -8, 8);
  std::vector<float> values(size_t(shape.size()));
  bool is_float = sp::is_floating(dtype);
  for (float& v : values) v = float(dist(gen)) * (is_float ? 0.5f : 1.0f);
  if (sp::is_bool(dtype))
    for (float& v : values) v = v > 0 ? 1.0f : 0.0f;
  return sp::array(values, shape).astype(dtype);
}

// Exact for integer dtypes; floats within a tight tolerance (a different summation order may
// move the last bit).
::testing::AssertionResult same_values(const sp::Array& got, const sp::Array& want) {
  bool is_float = want.dtype() == sp::float32 || want.dtype() == sp::bfloat16 ||
                  want.dtype() == sp::float16 || want.dtype() == sp::float64;
  return is_float ? arrays_close(got, want, 1e-6, 1e-6) : arrays_equal(got, want);
}

// ---- the shard geometry, written out independently of the library ------------------------------

// Coordinates of the device at flat (row-major) position k of the mesh.
std::vector<int64_t> mesh_coords(const sp::Mesh& mesh, int64_t k) {
  const sp::Shape& shape = mesh.devices_shape();
  std::vector<int64_t> coords(size_t(shape.ndim()));
  for (int a = shape.ndim() - 1; a >= 0; --a) {
    coords[size_t(a)] = k % shape[a];
    k /= shape[a];
  }
  return coords;
}

// A device's index along the named axes, major first (idx_a · size_b + idx_b for (a, b)).
int64_t instance_index(const sp::Mesh& mesh, const std::vector<std::string>& names, int64_t k) {
  std::vector<int64_t> coords = mesh_coords(mesh, k);
  int64_t index = 0;
  for (const std::string& name : names) {
    int pos = mesh.axis_position(name);
    index = index * mesh.devices_shape()[pos] + coords[size_t(pos)];
  }
  return index;
}

// The flat positions of the devices that share device k's coordinates on every axis not in
// `names`, ordered by their index along `names`: the instances a collective over `names` joins.
std::vector<int64_t> group_of(const sp::Mesh& mesh, const std::vector<std::string>& names,
                              int64_t k) {
  std::vector<int64_t> coords = mesh_coords(mesh, k);
  int64_t n = 1;
  for (const std::string& name : names) n *= mesh.axis_size(name);
  std::vector<int64_t> group(size_t(n), -1);
  for (int64_t j = 0; j < mesh.size(); ++j) {
    std::vector<int64_t> other = mesh_coords(mesh, j);
    bool same = true;
    for (int a = 0; a < int(coords.size()); ++a) {
      bool named = false;
      for (const std::string& name : names) named |= mesh.axis_position(name) == a;
      if (!named && other[size_t(a)] != coords[size_t(a)]) same = false;
    }
    if (same) group[size_t(instance_index(mesh, names, j))] = j;
  }
  return group;
}

// The block of a `global`-shaped array that the device at flat position k holds under `spec`:
// each dim is cut into as many blocks as its axes have devices, the block number mixing the
// device's coordinates on those axes major first.
std::pair<std::vector<int64_t>, std::vector<int64_t>> block_bounds(const sp::Mesh& mesh,
                                                                   const sp::PartitionSpec& spec,
                                                                   const sp::Shape& global,
                                                                   int64_t k) {
  std::vector<int64_t> start(size_t(global.ndim())), limit(size_t(global.ndim()));
  for (int d = 0; d < global.ndim(); ++d) {
    std::vector<std::string> names = spec.axes_of(d);
    int64_t blocks = 1;
    for (const std::string& name : names) blocks *= mesh.axis_size(name);
    int64_t size = global[d] / blocks;
    start[size_t(d)] = instance_index(mesh, names, k) * size;
    limit[size_t(d)] = start[size_t(d)] + size;
  }
  return {start, limit};
}

sp::Array block_of(const sp::Array& x, const sp::Mesh& mesh, const sp::PartitionSpec& spec,
                   int64_t k) {
  auto [start, limit] = block_bounds(mesh, spec, x.shape(), k);
  return sp::lax::slice(x, start, limit);
}

// A collective that never completes raises after this long instead of hanging the suite; the
// previous setting comes back on exit.
class CollectiveTimeout {
 public:
  CollectiveTimeout() {
    const char* was = std::getenv("SPMD_COLLECTIVE_TIMEOUT_MS");
    if (was) was_ = was;
    setenv("SPMD_COLLECTIVE_TIMEOUT_MS", "10000", 1);
  }
  ~CollectiveTimeout() {
    if (was_.empty())
      unsetenv("SPMD_COLLECTIVE_TIMEOUT_MS");
    else
      setenv("SPMD_COLLECTIVE_TIMEOUT_MS", was_.c_str(), 1);
  }
  CollectiveTimeout(const CollectiveTimeout&) = delete;
  CollectiveTimeout& operator=(const CollectiveTimeout&) = delete;

 private:
  std::string was_;
};

struct MeshCase {
  sp::Shape shape;
  std::vector<std::string> names;
};

const std::vector<MeshCase>& meshes() {
  static const std::vector<MeshCase> cases = {{{8}, {"i"}},
                                              {{4, 2}, {"x", "y"}},
                                              {{2, 4}, {"x", "y"}},
                                              {{2, 2, 2}, {"a", "b", "c"}},
                                              {{4, 1, 2}, {"a", "b", "c"}}};
  return cases;
}

}  // namespace

// ---- shard_map == split-apply-concatenate ------------------------------------------------------

namespace {

struct SpecCase {
  sp::PartitionSpec in;
  int rank;
};

// Specs that split one or several dims over one axis or an axis tuple, for each mesh.
std::vector<SpecCase> spec_cases(const MeshCase& m) {
  using sp::axes;
  using sp::None;
  if (m.names.size() == 1)
    return {{P("i"), 1}, {P("i", None), 2}, {P(None, "i"), 2}, {P(), 2}, {P(None, None, "i"), 3}};
  if (m.names.size() == 2)
    return {{P("x"), 2},
            {P("x", "y"), 2},
            {P("y", "x"), 2},
            {P(axes("x", "y")), 2},
            {P(None, axes("y", "x")), 2},
            {P("y"), 1},
            {P(None, "x", "y"), 3},
            {P(), 2}};
  return {{P("a", "b", "c"), 3},
          {P(axes("a", "b", "c")), 1},
          {P(axes("c", "a"), "b"), 2},
          {P(None, axes("b", "c")), 2},
          {P("b"), 2},
          {P(axes("c", "b"), None, "a"), 3}};
}

// A random global shape whose dims divide by the spec's block counts.
sp::Shape random_shape(const sp::Mesh& mesh, const sp::PartitionSpec& spec, int rank,
                       std::mt19937& gen) {
  std::uniform_int_distribution<int> mult(1, 3);
  std::vector<int64_t> dims;
  for (int d = 0; d < rank; ++d) {
    int64_t blocks = 1;
    for (const std::string& name : spec.axes_of(d)) blocks *= mesh.axis_size(name);
    dims.push_back(blocks * mult(gen));
  }
  return sp::Shape(dims);
}

// The mesh positions of this process's devices: all of them in one process; under mpirun
// (ctest's spmd_mpi_suites), this process's own.
std::vector<int64_t> own_positions(const sp::Mesh& mesh) {
  std::vector<int64_t> mine;
  for (int64_t k = 0; k < mesh.size(); ++k)
    if (mesh.devices()[size_t(k)].process_index == sp::process_index()) mine.push_back(k);
  return mine;
}

// Runs `body` through shard_map and checks every device's block of the result, and the global
// result, against the body applied to that device's block on the host.
void expect_split_apply_concatenate(const std::function<sp::Array(sp::Array)>& body,
                                    const sp::Mesh& mesh, const sp::PartitionSpec& in_spec,
                                    const sp::PartitionSpec& out_spec, const sp::Array& x) {
  sp::Array y = sp::shard_map(body, mesh, {in_spec}, out_spec)(x);
  std::vector<sp::Shard> shards = y.addressable_shards();
  const std::vector<int64_t> mine = own_positions(mesh);
  ASSERT_EQ(shards.size(), mine.size());
  // The blocks of the global value, from a replicated copy (a slice keeps a split dim split, as
  // in JAX's jit, and this process reads its blocks whole). Slicing is a launch on the devices of
  // every process, which must all run the same program: every process slices every block.
  const sp::Array whole = sp::device_put(y, sp::NamedSharding(mesh, P()));
  std::vector<sp::Array> global_blocks;
  for (int64_t k = 0; k < mesh.size(); ++k)
    global_blocks.push_back(block_of(whole, mesh, out_spec, k));
  for (size_t s = 0; s < mine.size(); ++s) {
    const int64_t k = mine[s];
    sp::Array want = body(block_of(x, mesh, in_spec, k));
    EXPECT_EQ(shards[s].device, mesh.devices()[size_t(k)]);
    EXPECT_TRUE(same_values(shards[s].data, want))
        << "device " << k << ", " << in_spec << " -> " << out_spec << " on " << mesh.str();
    // The global value holds that block where out_spec puts it.
    EXPECT_TRUE(same_values(global_blocks[size_t(k)], want))
        << "global block of device " << k << ", " << out_spec << " on " << mesh.str();
  }
}

TEST(ShardMapEqualsSplitApply, ElementwiseBodiesOnEveryMeshAndDtype) {
  std::mt19937 gen(7);
  unsigned seed = 0;
  for (const MeshCase& m : meshes()) {
    sp::Mesh mesh = sp::make_mesh(m.shape, m.names);
    for (const SpecCase& c : spec_cases(m)) {
      for (sp::DType dtype : {sp::float32, sp::int32, sp::bfloat16}) {
        sp::Array x = test_data(random_shape(mesh, c.in, c.rank, gen), dtype, ++seed);
        expect_split_apply_concatenate([](sp::Array b) { return b * 3 - 1; }, mesh, c.in, c.in, x);
      }
      sp::Array f = test_data(random_shape(mesh, c.in, c.rank, gen), sp::float32, ++seed);
      expect_split_apply_concatenate([](sp::Array b) { return sp::sin(b) + sp::abs(b); }, mesh,
                                     c.in, c.in, f);
    }
  }
}

// A reduction within the block leaves one value per block along the reduced dim: the
// concatenation has as many entries as that dim has blocks.
TEST(ShardMapEqualsSplitApply, BlockwiseReductionKeepsOneValuePerBlock) {
  std::mt19937 gen(11);
  unsigned seed = 100;
  for (const MeshCase& m : meshes()) {
    sp::Mesh mesh = sp::make_mesh(m.shape, m.names);
    for (const SpecCase& c : spec_cases(m)) {
      for (sp::DType dtype : {sp::float32, sp::int32}) {
        sp::Array x = test_data(random_shape(mesh, c.in, c.rank, gen), dtype, ++seed);
        int last = c.rank - 1;
        expect_split_apply_concatenate(
            [last](sp::Array b) { return sp::sum(b, {last}, /*keepdims=*/true); }, mesh, c.in, c.in,
            x);
        expect_split_apply_concatenate(
            [](sp::Array b) { return sp::max(b, {0}, /*keepdims=*/true); }, mesh, c.in, c.in, x);
      }
    }
  }
}

TEST(ShardMapEqualsSplitApply, TransposedBodyWithSwappedSpec) {
  std::mt19937 gen(13);
  unsigned seed = 200;
  for (const MeshCase& m : meshes()) {
    sp::Mesh mesh = sp::make_mesh(m.shape, m.names);
    for (const SpecCase& c : spec_cases(m)) {
      if (c.rank != 2) continue;
      sp::PartitionSpec swapped(std::vector<sp::PartitionSpec::Entry>{c.in[1], c.in[0]});
      sp::Array x = test_data(random_shape(mesh, c.in, 2, gen), sp::int32, ++seed);
      expect_split_apply_concatenate([](sp::Array b) { return b.T(); }, mesh, c.in, swapped, x);
    }
  }
}

// Two operands: a row block of a times a column block of b is the (row, column) block of a·b.
TEST(ShardMapEqualsSplitApply, BlockDotOfTwoOperands) {
  for (const MeshCase& m : meshes()) {
    if (m.names.size() != 2) continue;
    sp::Mesh mesh = sp::make_mesh(m.shape, m.names);
    sp::Array a = test_data({8, 6}, sp::float32, 1);
    sp::Array b = test_data({6, 4}, sp::float32, 2);
    auto f = sp::shard_map([](sp::Array u, sp::Array v) { return sp::dot(u, v); }, mesh,
                           {P("x", sp::None), P(sp::None, "y")}, P("x", "y"));
    sp::Array c = f(a, b);
    EXPECT_TRUE(same_values(c, sp::dot(a, b))) << mesh.str();
    const std::vector<int64_t> mine = own_positions(mesh);
    for (size_t s = 0; s < mine.size(); ++s) {
      const int64_t k = mine[s];
      sp::Array want =
          sp::dot(block_of(a, mesh, P("x", sp::None), k), block_of(b, mesh, P(sp::None, "y"), k));
      EXPECT_TRUE(same_values(c.addressable_shards()[s].data, want)) << k;
    }
  }
}

// bfloat16 blocks stay bfloat16 and round exactly as the whole array does.
TEST(ShardMapEqualsSplitApply, Bfloat16BlocksKeepTheirDtype) {
  sp::Mesh mesh = sp::make_mesh({2, 2, 2}, {"a", "b", "c"});
  sp::Array x = test_data({4, 4, 6}, sp::bfloat16, 3);
  auto f = sp::shard_map([](sp::Array b) { return sp::exp(b * 0.25f) + b; }, mesh,
                         {P("a", "b", "c")}, P("a", "b", "c"));
  sp::Array y = f(x);
  EXPECT_EQ(y.dtype(), sp::bfloat16);
  EXPECT_TRUE(arrays_equal(y, sp::exp(x * 0.25f) + x));
}

}  // namespace

// ---- collectives against the reference semantics ----------------------------------------------

namespace {

// The expected result of instance i given every group member's block, in instance order.
using Reference = std::function<sp::Array(const std::vector<sp::Array>& blocks, int64_t i)>;
using Body = std::function<sp::Array(sp::Array, const sp::AxisNames&)>;
// The free sizes of a block shape; a case decides which dims are multiples of the group size.
using Sizes = std::array<int64_t, 3>;

struct CollectiveCase {
  std::string name;
  // The block shape each device starts from, given the group size n and free sizes.
  std::function<sp::Shape(int64_t n, const Sizes& s)> block_shape;
  Body body;
  Reference reference;
  bool integers = true;  // also run on int32 data in the fixed sweep (pmean of integers is a float)
  bool booleans = true;  // accepts bool (JAX's reduce_scatter does not)
  Sizes sizes = {2, 3, 2};  // the fixed sweep's free sizes
};

// psum sums bools as int32, as JAX does.
sp::Array sum_of(const std::vector<sp::Array>& blocks) {
  auto summable = [](const sp::Array& b) {
    return sp::is_bool(b.dtype()) ? b.astype(sp::int32) : b;
  };
  sp::Array s = summable(blocks[0]);
  for (size_t j = 1; j < blocks.size(); ++j) s = s + summable(blocks[j]);
  return s;
}

sp::Array chunk(const sp::Array& x, int axis, int64_t i, int64_t n) {
  int64_t size = x.shape()[axis] / n;
  return sp::lax::slice_in_dim(x, i * size, (i + 1) * size, 1, axis);
}

std::vector<CollectiveCase> collective_cases() {
  // (s0, s1), and (s0 · n, s1) or (n, s1) for the collectives that split dim 0 among the group.
  auto rows = [](int64_t, const Sizes& s) { return sp::Shape{s[0], s[1]}; };
  auto n_rows = [](int64_t n, const Sizes& s) { return sp::Shape{s[0] * n, s[1]}; };
  auto n_by = [](int64_t n, const Sizes& s) { return sp::Shape{n, s[1]}; };
  std::vector<CollectiveCase> cases;
  cases.push_back({"psum", rows, [](sp::Array x, const sp::AxisNames& a) { return sp::psum(x, a); },
                   [](const auto& b, int64_t) { return sum_of(b); }});
  cases.push_back({"pmean", rows,
                   [](sp::Array x, const sp::AxisNames& a) { return sp::pmean(x, a); },
                   [](const auto& b, int64_t) { return sum_of(b) / float(b.size()); }, false});
  cases.push_back({"pmax", rows, [](sp::Array x, const sp::AxisNames& a) { return sp::pmax(x, a); },
                   [](const auto& b, int64_t) {
                     sp::Array m = b[0];
                     for (const sp::Array& v : b) m = sp::maximum(m, v);
                     return m;
                   }});
  cases.push_back({"pmin", rows, [](sp::Array x, const sp::AxisNames& a) { return sp::pmin(x, a); },
                   [](const auto& b, int64_t) {
                     sp::Array m = b[0];
                     for (const sp::Array& v : b) m = sp::minimum(m, v);
                     return m;
                   }});
  for (int axis : {0, 1}) {
    for (bool tiled : {false, true}) {
      cases.push_back({"all_gather axis=" + std::to_string(axis) + (tiled ? " tiled" : ""), rows,
                       [axis, tiled](sp::Array x, const sp::AxisNames& a) {
                         sp::Array g = sp::all_gather(x, a, {.axis = axis, .tiled = tiled});
                         // A leading gathered dim would put the instances on dim 0, which the
                         // out_spec splits; keep the device's own rows first.
                         return axis == 0 && !tiled ? sp::moveaxis(g, 0, 1) : g;
                       },
                       [axis, tiled](const auto& b, int64_t) {
                         sp::Array g = tiled ? sp::concatenate(b, axis) : sp::stack(b, axis);
                         return axis == 0 && !tiled ? sp::moveaxis(g, 0, 1) : g;
                       }});
    }
  }
  cases.push_back(
      {"psum_scatter tiled", n_rows,
       [](sp::Array x, const sp::AxisNames& a) {
         return sp::psum_scatter(x, a, {.scatter_dimension = 0, .tiled = true});
       },
       [](const auto& b, int64_t i) { return chunk(sum_of(b), 0, i, int64_t(b.size())); }, true,
       false});
  cases.push_back({"psum_scatter untiled", n_by,
                   [](sp::Array x, const sp::AxisNames& a) {
                     return sp::lax::expand_dims(sp::psum_scatter(x, a), {0});
                   },
                   [](const auto& b, int64_t i) { return sp::lax::index_in_dim(sum_of(b), i, 0); },
                   true, false});
  cases.push_back(
      {"psum_scatter tiled dim 1",
       [](int64_t n, const Sizes& s) {
         return sp::Shape{s[0], s[1] * n};
       },
       [](sp::Array x, const sp::AxisNames& a) {
         return sp::psum_scatter(x, a, {.scatter_dimension = 1, .tiled = true});
       },
       [](const auto& b, int64_t i) { return chunk(sum_of(b), 1, i, int64_t(b.size())); },
       true,
       false,
       {2, 2, 2}});
  cases.push_back({"all_gather axis=2 tiled",
                   [](int64_t, const Sizes& s) {
                     return sp::Shape{s[0], s[1], s[2]};
                   },
                   [](sp::Array x, const sp::AxisNames& a) {
                     return sp::all_gather(x, a, {.axis = 2, .tiled = true});
                   },
                   [](const auto& b, int64_t) { return sp::concatenate(b, 2); },
                   true,
                   true,
                   {1, 2, 2}});
  cases.push_back({"psum_scatter untiled dim 1",
                   [](int64_t n, const Sizes& s) {
                     return sp::Shape{s[0], n, s[2]};
                   },
                   [](sp::Array x, const sp::AxisNames& a) {
                     return sp::psum_scatter(x, a, {.scatter_dimension = 1});
                   },
                   [](const auto& b, int64_t i) {
                     return sp::lax::index_in_dim(sum_of(b), i, 1, /*keepdims=*/false);
                   },
                   true,
                   false,
                   {2, 2, 2}});
  cases.push_back({"all_to_all tiled 2 1",
                   [](int64_t n, const Sizes& s) {
                     return sp::Shape{s[0], s[1], s[2] * n};
                   },
                   [](sp::Array x, const sp::AxisNames& a) {
                     return sp::all_to_all(x, a, 2, 1, {.tiled = true});
                   },
                   [](const auto& b, int64_t i) {
                     std::vector<sp::Array> parts;
                     for (const sp::Array& v : b)
                       parts.push_back(chunk(v, 2, i, int64_t(b.size())));
                     return sp::concatenate(parts, 1);
                   },
                   true,
                   true,
                   {1, 2, 2}});
  cases.push_back({"ppermute shift +1", rows,
                   [](sp::Array x, const sp::AxisNames& a) {
                     int64_t n = sp::axis_size(a);
                     std::vector<std::pair<int, int>> perm;
                     for (int j = 0; j < n; ++j) perm.push_back({j, int((j + 1) % n)});
                     return sp::ppermute(x, a, perm);
                   },
                   [](const auto& b, int64_t i) {
                     int64_t n = int64_t(b.size());
                     return b[size_t((i + n - 1) % n)];
                   }});
  cases.push_back({"ppermute partial", rows,
                   [](sp::Array x, const sp::AxisNames& a) {
                     int n = int(sp::axis_size(a));
                     return sp::ppermute(x, a, {{0, n - 1}, {n - 1, 0}});
                   },
                   [](const auto& b, int64_t i) {
                     int64_t n = int64_t(b.size());
                     if (i == n - 1) return b[0];
                     if (i == 0) return b[size_t(n - 1)];
                     return sp::zeros_like(b[0]);
                   }});
  cases.push_back({"pshuffle reverse", rows,
                   [](sp::Array x, const sp::AxisNames& a) {
                     int n = int(sp::axis_size(a));
                     std::vector<int> perm;
                     for (int j = 0; j < n; ++j) perm.push_back(n - 1 - j);
                     return sp::pshuffle(x, a, perm);
                   },
                   [](const auto& b, int64_t i) { return b[b.size() - 1 - size_t(i)]; }});
  cases.push_back({"all_to_all tiled 0 0", n_rows,
                   [](sp::Array x, const sp::AxisNames& a) {
                     return sp::all_to_all(x, a, 0, 0, {.tiled = true});
                   },
                   [](const auto& b, int64_t i) {
                     std::vector<sp::Array> parts;
                     for (const sp::Array& v : b)
                       parts.push_back(chunk(v, 0, i, int64_t(b.size())));
                     return sp::concatenate(parts, 0);
                   }});
  cases.push_back({"all_to_all tiled 1 0",
                   [](int64_t n, const Sizes& s) {
                     return sp::Shape{s[0], s[1] * n};
                   },
                   [](sp::Array x, const sp::AxisNames& a) {
                     return sp::all_to_all(x, a, 1, 0, {.tiled = true});
                   },
                   [](const auto& b, int64_t i) {
                     std::vector<sp::Array> parts;
                     for (const sp::Array& v : b)
                       parts.push_back(chunk(v, 1, i, int64_t(b.size())));
                     return sp::concatenate(parts, 0);
                   }});
  // Untiled: split_axis has the group's size and is removed; the instances' pieces are stacked
  // along a new dim at concat_axis (JAX 0.10.2: pmap of all_to_all(v, 0, 1) on (4, 4, 3) gives
  // (4, 3, 4)).
  for (int concat : {0, 1}) {
    cases.push_back(
        {"all_to_all untiled 0 " + std::to_string(concat), n_by,
         [concat](sp::Array x, const sp::AxisNames& a) { return sp::all_to_all(x, a, 0, concat); },
         [concat](const auto& b, int64_t i) {
           std::vector<sp::Array> parts;
           for (const sp::Array& v : b)
             parts.push_back(sp::lax::index_in_dim(v, i, 0, /*keepdims=*/false));
           return sp::stack(parts, concat);
         }});
  }
  cases.push_back({"axis_index",
                   rows,
                   [](sp::Array x, const sp::AxisNames& a) {
                     return x * 0 + sp::axis_index(a).astype(x.dtype());
                   },
                   [](const auto& b, int64_t i) {
                     return sp::zeros_like(b[0]) + sp::full({}, int(i), b[0].dtype());
                   },
                   true,
                   false,
                   {1, 3, 2}});
  cases.push_back({"pbroadcast from the last", rows,
                   [](sp::Array x, const sp::AxisNames& a) {
                     return sp::pbroadcast(x, a, int(sp::axis_size(a)) - 1);
                   },
                   [](const auto& b, int64_t) { return b.back(); }});
  // Blocks vary over every axis, and pvary needs an invariant operand: the sum's.
  cases.push_back({"pvary of psum", rows,
                   [](sp::Array x, const sp::AxisNames& a) { return sp::pvary(sp::psum(x, a), a); },
                   [](const auto& b, int64_t) { return sum_of(b); }});
  return cases;
}

// The axis names (one or a tuple) each collective is tried over on a mesh.
std::vector<sp::AxisNames> axis_choices(const MeshCase& m) {
  using sp::axes;
  if (m.names.size() == 1) return {"i", axes("i")};
  if (m.names.size() == 2) return {"x", "y", axes("x", "y"), axes("y", "x")};
  return {"a",
          "c",
          axes("a", "b"),
          axes("c", "a"),
          axes("b", "c"),
          axes("a", "b", "c"),
          axes("c", "b", "a")};
}

// Each device starts from its own rows of x (dim 0 split over every mesh axis) and returns its
// result as its own rows, so addressable_shards() shows every device's value.
void expect_collective_matches_reference(const CollectiveCase& c, const sp::Mesh& mesh,
                                         const sp::AxisNames& names, sp::DType dtype, unsigned seed,
                                         const Sizes& sizes) {
  sp::PartitionSpec every_axis(
      std::vector<sp::PartitionSpec::Entry>{sp::AxisNames(mesh.axis_names(), /*is_tuple=*/true)});
  int64_t n = 1;
  for (const std::string& name : names.names()) n *= mesh.axis_size(name);
  sp::Shape block = c.block_shape(n, sizes);
  SCOPED_TRACE(c.name + " over " + names.repr() + " on " + mesh.str() + " " +
               std::string(sp::dtype_name(dtype)) + " block " + block.str());
  std::vector<int64_t> global = block.dims();
  global[0] *= mesh.size();
  sp::Array x = test_data(sp::Shape(global), dtype, seed);
  ASSERT_EQ(x.dtype(), dtype);  // 64-bit types need x64
  Body body = c.body;
  sp::Array y =
      sp::shard_map([&](sp::Array b) { return body(b, names); }, mesh, {every_axis}, every_axis)(x);
  std::vector<sp::Shard> shards = y.addressable_shards();
  const std::vector<int64_t> mine = own_positions(mesh);
  ASSERT_EQ(shards.size(), mine.size());
  for (size_t s = 0; s < mine.size(); ++s) {
    const int64_t k = mine[s];
    std::vector<sp::Array> blocks;
    for (int64_t j : group_of(mesh, names.names(), k))
      blocks.push_back(block_of(x, mesh, every_axis, j));
    sp::Array want = c.reference(blocks, instance_index(mesh, names.names(), k));
    const sp::Shard& shard = shards[s];
    EXPECT_EQ(shard.device, mesh.devices()[size_t(k)]);
    ASSERT_EQ(shard.index.size(), size_t(want.ndim()));
    EXPECT_EQ(shard.index[0], (sp::Slice{k * want.shape()[0], (k + 1) * want.shape()[0]}));
    EXPECT_TRUE(same_values(shard.data, want)) << "device " << k;
  }
}

TEST(CollectiveReference, EveryCollectiveOnEveryMeshAndAxisTuple) {
  CollectiveTimeout timeout;
  unsigned seed = 1000;
  for (const MeshCase& m : meshes()) {
    sp::Mesh mesh = sp::make_mesh(m.shape, m.names);
    for (const CollectiveCase& c : collective_cases())
      for (const sp::AxisNames& names : axis_choices(m)) {
        expect_collective_matches_reference(c, mesh, names, sp::float32, ++seed, c.sizes);
        if (c.integers)
          expect_collective_matches_reference(c, mesh, names, sp::int32, ++seed, c.sizes);
        expect_collective_matches_reference(c, mesh, names, sp::bfloat16, ++seed, c.sizes);
      }
  }
}

// Every collective on each further element type, once per (case, dtype), each time on a mesh,
// axis choice and block shape drawn from a seeded generator: free sizes 1…5, the first draw of
// each case with a size-1 dim. bool skips the collectives JAX refuses it for (psum_scatter:
// "reduce_sum does not accept dtype bool") and psum sums it as int32; pmean of integers is a
// float. float64 and int64 run with x64 on.
TEST(CollectiveReference, RandomBlockShapesOnMoreDtypes) {
  CollectiveTimeout timeout;
  std::mt19937 gen(2026);
  std::uniform_int_distribution<int64_t> size(1, 5);
  unsigned seed = 5000;
  auto run = [&](const std::vector<sp::DType>& dtypes) {
    for (const CollectiveCase& c : collective_cases()) {
      bool first = true;
      for (sp::DType dtype : dtypes) {
        if (sp::is_bool(dtype) && !c.booleans) continue;
        const MeshCase& m = meshes()[gen() % meshes().size()];
        std::vector<sp::AxisNames> choices = axis_choices(m);
        sp::AxisNames names = choices[gen() % choices.size()];
        Sizes sizes = {size(gen), size(gen), size(gen)};
        if (first) sizes[gen() % sizes.size()] = 1;
        first = false;
        expect_collective_matches_reference(c, sp::make_mesh(m.shape, m.names), names, dtype,
                                            ++seed, sizes);
      }
    }
  };
  run({sp::float16, sp::int8, sp::uint8, sp::uint32, sp::bool_, sp::float32, sp::int32,
       sp::bfloat16});
  spmd_test::X64Scope x64;
  run({sp::float64, sp::int64});
}

// The worked values of JAX_FACTS: 4 devices, x = [3,1,4,1,5,9,2,6,5,3,5,8,9,7,1,2], P("i").
TEST(CollectiveReference, WorkedValuesFromJax) {
  CollectiveTimeout timeout;
  sp::Mesh mesh = sp::make_mesh({4}, {"i"});
  sp::Array x = sp::array<int32_t>({3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 1, 2});
  auto sum = sp::shard_map([](sp::Array b) { return sp::psum(b, "i"); }, mesh, {P("i")}, P());
  EXPECT_EQ(sum(x).to_vector<int32_t>(), (std::vector<int32_t>{22, 20, 12, 17}));
  auto sum_tiles = sp::shard_map([](sp::Array b) { return sp::psum(b, "i"); }, mesh, {P("i")},
                                 P("i"), {.check_vma = false});
  sp::Array tiles = sum_tiles(x);
  for (const sp::Shard& s : tiles.addressable_shards())
    EXPECT_EQ(s.data.to_vector<int32_t>(), (std::vector<int32_t>{22, 20, 12, 17})) << s.device;
  auto a2a =
      sp::shard_map([](sp::Array b) { return sp::all_to_all(b, "i", 0, 0, {.tiled = true}); }, mesh,
                    {P("i")}, P("i"));
  EXPECT_EQ(a2a(x).to_vector<int32_t>(),
            (std::vector<int32_t>{3, 5, 5, 9, 1, 9, 3, 7, 4, 2, 5, 1, 1, 6, 8, 2}));

  sp::Mesh eight = sp::make_mesh({8}, {"i"});
  auto shift = sp::shard_map(
      [](sp::Array b) {
        std::vector<std::pair<int, int>> perm;
        for (int j = 0; j < 8; ++j) perm.push_back({j, (j + 2) % 8});
        return sp::ppermute(b, "i", perm);
      },
      eight, {P("i")}, P("i"));
  // Shifting every block by two places of eight rotates arange(8) by two.
  EXPECT_EQ(shift(sp::arange(8)).to_vector<int32_t>(),
            (std::vector<int32_t>{6, 7, 0, 1, 2, 3, 4, 5}));
}

// axis_index over a tuple is idx_a · size_b + idx_b, whatever order the tuple names the axes in.
TEST(CollectiveReference, AxisIndexOfTuplesMixesCoordinatesMajorFirst) {
  CollectiveTimeout timeout;
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"x", "y"});
  auto index = [&](sp::AxisNames names) {
    return sp::shard_map([names](sp::Array b) { return b + sp::axis_index(names); }, mesh,
                         {P(sp::axes("x", "y"))}, P(sp::axes("x", "y")))(sp::zeros({8}, sp::int32))
        .to_vector<int32_t>();
  };
  EXPECT_EQ(index("x"), (std::vector<int32_t>{0, 0, 1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(index("y"), (std::vector<int32_t>{0, 1, 0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(index(sp::axes("x", "y")), (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(index(sp::axes("y", "x")), (std::vector<int32_t>{0, 4, 1, 5, 2, 6, 3, 7}));
}

// Collectives of a replicated operand (the same block on every device, invariant under
// check_vma): psum multiplies by the group size, pmax and pmean keep it, all_gather tiles it.
TEST(CollectiveReference, CollectivesOfAReplicatedOperand) {
  CollectiveTimeout timeout;
  sp::Mesh mesh = sp::make_mesh({2, 4}, {"x", "y"});
  sp::Array w = test_data({2, 3}, sp::int32, 88);
  auto f = sp::shard_map(
      [](sp::Array b) {
        return std::make_tuple(sp::psum(b, "y"), sp::pmax(b, sp::axes("x", "y")),
                               sp::all_gather(b, "x", {.tiled = true}));
      },
      // all_gather's result varies over its axis (all_gather_invariant would not), so its
      // out_spec must name "x", as in JAX.
      mesh, {P()}, {P(), P(), P("x")});
  auto [sum, max, gathered] = f(w);
  EXPECT_TRUE(arrays_equal(sum, w * 4));
  EXPECT_TRUE(arrays_equal(max, w));
  EXPECT_TRUE(arrays_equal(gathered, sp::concatenate({w, w, w, w}, 0)));
  for (const sp::Shard& shard : gathered.addressable_shards())
    EXPECT_TRUE(arrays_equal(shard.data, sp::concatenate({w, w}, 0))) << shard.device;
}

// The same shard_map staged under jit and vmap gives the eager values.
TEST(CollectiveReference, JitAndVmapOfShardMapKeepTheCollectives) {
  CollectiveTimeout timeout;
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"x", "y"});
  auto f = sp::shard_map(
      [](sp::Array b) {
        return sp::psum(b, "y") + sp::all_to_all(b, "x", 0, 0, {.tiled = true}) +
               sp::ppermute(b, "x", {{0, 1}, {1, 2}, {2, 3}, {3, 0}});
      },
      mesh, {P("x", "y")}, P("x", "y"));
  sp::Array x = test_data({16, 4}, sp::int32, 99);
  sp::Array eager = f(x);
  EXPECT_TRUE(arrays_equal(sp::jit(f)(x), eager));
  sp::Array xs = sp::stack({x, x * 2, x - 1}, 0);
  sp::Array batched = sp::vmap(f)(xs);
  EXPECT_TRUE(arrays_equal(batched[1], f(x * 2)));
  EXPECT_TRUE(arrays_equal(batched[2], f(x - 1)));
}

// axis_index_groups: the reduction runs within each subgroup of axis indices.
TEST(CollectiveReference, AxisIndexGroupsReduceWithinEachGroup) {
  CollectiveTimeout timeout;
  sp::Mesh mesh = sp::make_mesh({8}, {"i"});
  sp::Array x = test_data({8, 3}, sp::int32, 77);
  for (const sp::AxisIndexGroups& groups : {sp::AxisIndexGroups{{0, 1, 2, 3}, {4, 5, 6, 7}},
                                            sp::AxisIndexGroups{{0, 2, 4, 6}, {1, 3, 5, 7}},
                                            sp::AxisIndexGroups{{7, 0}, {1, 6}, {5, 2}, {3, 4}}}) {
    auto f = sp::shard_map(
        [groups](sp::Array b) {
          return std::make_pair(
              sp::psum(b, "i", {.axis_index_groups = groups}),
              sp::all_gather(b, "i", {.tiled = true, .axis_index_groups = groups}));
        },
        mesh, {P("i")}, P("i"), {.check_vma = false});
    auto [sums, gathered] = f(x);
    // Each process checks the devices it holds (several processes hold a share each).
    const std::vector<sp::Shard> sum_shards = sums.addressable_shards();
    const std::vector<sp::Shard> gathered_shards = gathered.addressable_shards();
    const std::vector<int> ids = mesh.device_ids();
    for (size_t k = 0; k < sum_shards.size(); ++k) {
      const int j = int(std::find(ids.begin(), ids.end(), sum_shards[k].device.id) - ids.begin());
      ASSERT_EQ(gathered_shards[k].device.id, sum_shards[k].device.id);
      for (const std::vector<int>& group : groups) {
        if (std::find(group.begin(), group.end(), j) == group.end()) continue;
        std::vector<sp::Array> members;
        for (int m : group) members.push_back(sp::lax::index_in_dim(x, m, 0));
        EXPECT_TRUE(arrays_equal(sum_shards[k].data, sum_of(members))) << "device " << j;
        EXPECT_TRUE(arrays_equal(gathered_shards[k].data, sp::concatenate(members, 0)))
            << "device " << j;
      }
    }
  }
}

// Unmapped operands (the same value on every device) psum to value · group size.
TEST(CollectiveReference, PsumOfAnInvariantValueScalesByTheGroupSize) {
  CollectiveTimeout timeout;
  sp::Mesh mesh = sp::make_mesh({2, 4}, {"x", "y"});
  auto f = sp::shard_map(
      [](sp::Array b) { return b + sp::psum(1, "y") * 10 + sp::psum(1, sp::axes("x", "y")); }, mesh,
      {P(sp::axes("x", "y"))}, P(sp::axes("x", "y")));
  EXPECT_EQ(f(sp::zeros({8}, sp::int32)).to_vector<int32_t>(), std::vector<int32_t>(8, 48));
}

}  // namespace

// ---- pmap == vmap with the same axis_name -----------------------------------------------------

namespace {

template <class T>
void expect_same_tree(const T& got, const T& want, const std::string& what) {
  std::vector<sp::Array> g = sp::tree_leaves(got), w = sp::tree_leaves(want);
  ASSERT_EQ(g.size(), w.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_EQ(g[i].shape(), w[i].shape()) << what << " leaf " << i;
    EXPECT_TRUE(same_values(g[i], w[i])) << what << " leaf " << i;
  }
}

// pmap(f, p)(args...) against vmap(f) with the same axis_name, in_axes and out_axes.
template <class F, class... Args>
void expect_pmap_equals_vmap(const std::string& what, F f, const sp::PmapOptions& p,
                             const Args&... args) {
  auto got = sp::pmap(f, p)(args...);
  auto want = sp::vmap(
      f, {.in_axes = p.in_axes, .out_axes = p.out_axes, .axis_name = p.axis_name})(args...);
  expect_same_tree(got, want, what);
}

TEST(PmapEqualsVmap, ReductionsOverTheMappedAxisForEverySize) {
  CollectiveTimeout timeout;
  for (int n = 1; n <= 8; ++n) {
    for (sp::DType dtype : {sp::float32, sp::int32}) {
      sp::Array x = test_data({n, 3}, dtype, unsigned(n));
      std::string at = "n=" + std::to_string(n);
      sp::PmapOptions p{.axis_name = "i"};
      expect_pmap_equals_vmap(
          "psum " + at, [](sp::Array v) { return sp::psum(v, "i"); }, p, x);
      expect_pmap_equals_vmap(
          "pmax " + at, [](sp::Array v) { return sp::pmax(v, "i"); }, p, x);
      expect_pmap_equals_vmap(
          "pmin " + at, [](sp::Array v) { return sp::pmin(v, "i"); }, p, x);
      expect_pmap_equals_vmap(
          "axis_index " + at, [](sp::Array v) { return v * sp::axis_index("i"); }, p, x);
      if (dtype == sp::float32) {
        expect_pmap_equals_vmap(
            "pmean " + at, [](sp::Array v) { return sp::pmean(v, "i"); }, p, x);
        expect_pmap_equals_vmap(
            "normalize " + at, [](sp::Array v) { return v / (sp::psum(sp::abs(v), "i") + 1); }, p,
            x);
      }
    }
  }
}

TEST(PmapEqualsVmap, DataMovementCollectivesForEverySize) {
  CollectiveTimeout timeout;
  for (int n = 1; n <= 8; ++n) {
    std::string at = "n=" + std::to_string(n);
    sp::PmapOptions p{.axis_name = "i"};
    sp::Array x = test_data({n, 2, 3}, sp::int32, unsigned(20 + n));
    expect_pmap_equals_vmap(
        "all_gather " + at, [](sp::Array v) { return sp::all_gather(v, "i"); }, p, x);
    expect_pmap_equals_vmap(
        "all_gather axis=1 " + at, [](sp::Array v) { return sp::all_gather(v, "i", {.axis = 1}); },
        p, x);
    expect_pmap_equals_vmap(
        "all_gather tiled axis=1 " + at,
        [](sp::Array v) { return sp::all_gather(v, "i", {.axis = 1, .tiled = true}); }, p, x);
    expect_pmap_equals_vmap(
        "ppermute " + at,
        [n](sp::Array v) {
          std::vector<std::pair<int, int>> perm;
          for (int j = 0; j < n; ++j) perm.push_back({j, (j + 1) % n});
          return sp::ppermute(v, "i", perm);
        },
        p, x);
    expect_pmap_equals_vmap(
        "pshuffle " + at,
        [n](sp::Array v) {
          std::vector<int> perm;
          for (int j = 0; j < n; ++j) perm.push_back((j + 2) % n);
          return sp::pshuffle(v, "i", perm);
        },
        p, x);
    sp::Array s = test_data({n, 2 * n, 3}, sp::int32, unsigned(40 + n));
    expect_pmap_equals_vmap(
        "psum_scatter tiled " + at,
        [](sp::Array v) { return sp::psum_scatter(v, "i", {.tiled = true}); }, p, s);
    expect_pmap_equals_vmap(
        "all_to_all tiled " + at,
        [](sp::Array v) { return sp::all_to_all(v, "i", 0, 1, {.tiled = true}); }, p, s);
    sp::Array u = test_data({n, n, 3}, sp::int32, unsigned(60 + n));
    expect_pmap_equals_vmap(
        "psum_scatter " + at, [](sp::Array v) { return sp::psum_scatter(v, "i"); }, p, u);
    expect_pmap_equals_vmap(
        "all_to_all " + at, [](sp::Array v) { return sp::all_to_all(v, "i", 0, 1); }, p, u);
  }
}

// Both sides of the comparison come from the library, so pin a few results to values on the host
// and to JAX's.
TEST(PmapEqualsVmap, ResultsMatchTheHostAndJax) {
  CollectiveTimeout timeout;
  sp::Array x = test_data({6, 4}, sp::int32, 31);
  sp::Array sums = sp::pmap([](sp::Array v) { return sp::psum(v, "i"); }, {.axis_name = "i"})(x);
  EXPECT_TRUE(arrays_equal(sums, sp::broadcast_to(sp::sum(x, {0}), {6, 4})));
  // JAX 0.10.2: pmap(lambda v: all_to_all(v, 'p', 0, 1), axis_name='p')(arange(48).reshape(4, 4,
  // 3)) has shape (4, 3, 4) and instance 1 holds [[3 15 27 39] [4 16 28 40] [5 17 29 41]].
  sp::Array a2a = sp::pmap([](sp::Array v) { return sp::all_to_all(v, "p", 0, 1); },
                           {.axis_name = "p"})(sp::arange(48).reshape({4, 4, 3}));
  EXPECT_EQ(a2a.shape(), (sp::Shape{4, 3, 4}));
  EXPECT_EQ(a2a[1].to_vector<int32_t>(),
            (std::vector<int32_t>{3, 15, 27, 39, 4, 16, 28, 40, 5, 17, 29, 41}));
}

TEST(PmapEqualsVmap, ScalarInstancesAndOtherDtypes) {
  CollectiveTimeout timeout;
  sp::PmapOptions p{.axis_name = "i"};
  for (sp::DType dtype : {sp::int8, sp::uint8, sp::float16, sp::bfloat16, sp::int32}) {
    std::string at(sp::dtype_name(dtype));
    sp::Array x = test_data({6}, dtype, 17);
    sp::Array y = test_data({6, 2}, dtype, 18);
    expect_pmap_equals_vmap(
        "scalar psum " + at, [](sp::Array v) { return sp::psum(v, "i"); }, p, x);
    expect_pmap_equals_vmap(
        "scalar all_gather " + at, [](sp::Array v) { return sp::all_gather(v, "i"); }, p, x);
    expect_pmap_equals_vmap(
        "scalar ppermute " + at,
        [](sp::Array v) {
          return sp::ppermute(v, "i", {{0, 5}, {5, 0}, {2, 3}});
        },
        p, x);
    expect_pmap_equals_vmap(
        "pmax " + at, [](sp::Array v) { return sp::pmax(v, "i"); }, p, y);
    expect_pmap_equals_vmap(
        "pmin " + at, [](sp::Array v) { return sp::pmin(v, "i"); }, p, y);
    expect_pmap_equals_vmap(
        "psum_scatter " + at,
        [](sp::Array v) {
          return sp::psum_scatter(sp::broadcast_to(v, {6, 2}), "i");
        },
        p, y);
  }
  sp::Array flags = sp::array(std::vector<bool>{true, false, false, true, true, false}, {6});
  expect_pmap_equals_vmap(
      "bool all_gather", [](sp::Array v) { return sp::all_gather(v, "i"); }, p, flags);
  expect_pmap_equals_vmap(
      "bool psum", [](sp::Array v) { return sp::psum(v, "i"); }, p, flags);
}

TEST(PmapEqualsVmap, PlainBodies) {
  CollectiveTimeout timeout;
  sp::Array x = test_data({8, 4, 3}, sp::float32, 5);
  sp::Array w = test_data({8, 3, 2}, sp::float32, 6);
  sp::PmapOptions p{.axis_name = "i"};
  expect_pmap_equals_vmap(
      "elementwise", [](sp::Array v) { return sp::sin(v) * 2 + v; }, p, x);
  expect_pmap_equals_vmap(
      "reduction", [](sp::Array v) { return sp::sum(v, {1}); }, p, x);
  expect_pmap_equals_vmap(
      "dot", [](sp::Array a, sp::Array b) { return sp::dot(a, b); }, p, x, w);
  sp::Array i = test_data({5, 6}, sp::int32, 7);
  expect_pmap_equals_vmap(
      "int cumsum", [](sp::Array v) { return sp::cumsum(v, 0) * 3; }, p, i);
}

TEST(PmapEqualsVmap, InAxesAndOutAxes) {
  CollectiveTimeout timeout;
  sp::Array x = test_data({3, 6}, sp::float32, 8);  // mapped along dim 1
  sp::Array w = test_data({3}, sp::float32, 9);     // broadcast
  expect_pmap_equals_vmap(
      "in_axes (1, None)", [](sp::Array v, sp::Array b) { return v * b + sp::psum(v, "i"); },
      {.axis_name = "i", .in_axes = {1, sp::None}}, x, w);
  expect_pmap_equals_vmap(
      "out_axes 1", [](sp::Array v) { return sp::all_gather(v, "i"); },
      {.axis_name = "i", .in_axes = {1}, .out_axes = {1}}, x);
  expect_pmap_equals_vmap(
      "out_axes -1", [](sp::Array v) { return sp::outer(v, v) - sp::pmax(v, "i"); },
      {.axis_name = "i", .in_axes = {1}, .out_axes = {-1}}, x);
  expect_pmap_equals_vmap(
      "out_axes None", [](sp::Array v) { return sp::psum(v, "i"); },
      {.axis_name = "i", .in_axes = {1}, .out_axes = {sp::None}}, x);
}

TEST(PmapEqualsVmap, SeveralArgumentsAndTupleOutputs) {
  CollectiveTimeout timeout;
  sp::Array a = test_data({4, 5}, sp::int32, 10);
  sp::Array b = test_data({4, 5}, sp::int32, 11);
  auto f = [](sp::Array u, sp::Array v) {
    return std::make_tuple(sp::psum(u * v, "i"), u - v, sp::all_gather(v, "i", {.tiled = true}));
  };
  expect_pmap_equals_vmap("tuple", f, {.axis_name = "i"}, a, b);
  auto pair = [](std::pair<sp::Array, sp::Array> uv) {
    return std::vector<sp::Array>{uv.first + sp::axis_index("i"), sp::pmin(uv.second, "i")};
  };
  expect_pmap_equals_vmap("pair in, vector out", pair, {.axis_name = "i"}, std::make_pair(a, b));
}

TEST(PmapEqualsVmap, PerOutputOutAxesAndNegativeInAxes) {
  CollectiveTimeout timeout;
  sp::Array x = test_data({2, 3, 5}, sp::float32, 15);  // mapped along the last dim
  auto f = [](sp::Array v) {
    return std::make_tuple(v * 2, sp::psum(v, "i"), sp::sum(v) + sp::axis_index("i"));
  };
  expect_pmap_equals_vmap("per-output out_axes", f,
                          {.axis_name = "i", .in_axes = {-1}, .out_axes = {1, sp::None, 0}}, x);
}

TEST(PmapEqualsVmap, BoolAndConstantOperands) {
  CollectiveTimeout timeout;
  sp::Array x = test_data({5, 4}, sp::int32, 16);
  auto f = [](sp::Array v) {
    return std::make_pair(sp::psum(v > 0, "i"), v * sp::psum(1, "i") + sp::psum(2, "i"));
  };
  expect_pmap_equals_vmap("bool and constants", f, {.axis_name = "i"}, x);
  auto [count, scaled] = sp::pmap(f, {.axis_name = "i"})(x);
  EXPECT_EQ(count.dtype(), sp::int32);
  EXPECT_TRUE(
      arrays_equal(count, sp::broadcast_to(sp::sum((x > 0).astype(sp::int32), {0}), {5, 4})));
  EXPECT_TRUE(arrays_equal(scaled, x * 5 + 10));
}

TEST(PmapEqualsVmap, StaticBroadcastedArgnums) {
  CollectiveTimeout timeout;
  sp::Array x = test_data({6, 3}, sp::float32, 12);
  sp::Array w = test_data({3}, sp::float32, 13);
  auto f = [](sp::Array v, sp::Array b) { return sp::psum(v * b, "i") + b; };
  auto got = sp::pmap(f, {.axis_name = "i", .static_broadcasted_argnums = {1}})(x, w);
  auto want = sp::vmap(f, {.in_axes = {0, sp::None}, .axis_name = "i"})(x, w);
  EXPECT_TRUE(same_values(got, want));
  // A non-Array static argument reaches every instance as the C++ value; each value traces anew.
  auto shift = [](sp::Array v, int k) {
    return sp::pshuffle(v, "i", {k, (k + 1) % 3, (k + 2) % 3});
  };
  auto pshift = sp::pmap(shift, {.axis_name = "i", .static_broadcasted_argnums = {1}});
  sp::Array y = sp::arange(3) * 10;
  EXPECT_EQ(pshift(y, 1).to_vector<int32_t>(), (std::vector<int32_t>{10, 20, 0}));
  EXPECT_EQ(pshift(y, 2).to_vector<int32_t>(), (std::vector<int32_t>{20, 0, 10}));
}

TEST(PmapEqualsVmap, ChosenDevicesThreeToSix) {
  CollectiveTimeout timeout;
  std::vector<sp::Device> all = sp::devices();
  std::vector<sp::Device> devs(all.begin() + 3, all.begin() + 7);
  sp::Array x = test_data({4, 5}, sp::int32, 14);
  auto f = [](sp::Array v) {
    return sp::ppermute(v, "i", {{0, 1}, {1, 2}, {2, 3}, {3, 0}}) + sp::psum(v, "i");
  };
  sp::Array got = sp::pmap(f, {.axis_name = "i", .devices = devs})(x);
  EXPECT_TRUE(same_values(got, sp::vmap(f, {.axis_name = "i"})(x)));
  // Device 3 + j holds row j; on several processes each holds the rows of its own devices.
  std::vector<sp::Device> here;
  for (const sp::Device& d : devs)
    if (sp::is_addressable(d)) here.push_back(d);
  std::vector<sp::Shard> shards = got.addressable_shards();
  ASSERT_EQ(shards.size(), here.size());
  for (size_t k = 0; k < here.size(); ++k) {
    const int64_t j = here[k].id - 3;
    EXPECT_EQ(shards[k].device.id, here[k].id);
    EXPECT_EQ(shards[k].index[0], (sp::Slice{j, j + 1}));
  }
}

// An inner pmap inside an outer one against the same nesting of vmaps, with collectives over
// either name and over both.
std::vector<std::pair<int, int>> shift_by_three() {
  std::vector<std::pair<int, int>> perm;
  for (int j = 0; j < 8; ++j) perm.push_back({j, (j + 3) % 8});
  return perm;
}

TEST(PmapEqualsVmap, NestedPmapDataMovementOverEachName) {
  CollectiveTimeout timeout;
  auto body = [](sp::Array v) {
    return std::make_tuple(sp::psum_scatter(v, "cols", {.tiled = true}),
                           sp::all_to_all(v, "rows", 0, 0, {.tiled = true}),
                           sp::ppermute(v, "rows", {{0, 1}, {1, 0}}),
                           sp::all_gather(v, "cols", {.axis = 1}),
                           sp::psum_scatter(v, sp::axes("rows", "cols"), {.tiled = true}),
                           sp::all_to_all(v, sp::axes("cols", "rows"), 0, 1, {.tiled = true}),
                           sp::ppermute(v, sp::axes("rows", "cols"), shift_by_three()));
  };
  sp::Array x = test_data({2, 4, 8, 2}, sp::float32, 123);
  auto got = sp::pmap(sp::pmap(body, {.axis_name = "cols"}), {.axis_name = "rows"})(x);
  auto want = sp::vmap(sp::vmap(body, {.axis_name = "cols"}), {.axis_name = "rows"})(x);
  expect_same_tree(got, want, "nested data movement");
  // Instance (r, c) has index 4r + c along ("rows", "cols") and receives from index - 3.
  EXPECT_TRUE(
      arrays_equal(std::get<6>(got).reshape({8, 8, 2}), sp::roll(x.reshape({8, 8, 2}), 3, 0)));
}

TEST(PmapEqualsVmap, NestedPmapWithInnerAxesAndMaps) {
  CollectiveTimeout timeout;
  auto body = [](std::map<std::string, sp::Array> d) {
    return std::make_pair(sp::psum(d.at("a"), "rows") * d.at("b"),
                          sp::all_gather(d.at("a"), "cols") + sp::axis_index("rows"));
  };
  std::map<std::string, sp::Array> d = {{"a", test_data({2, 3, 4}, sp::int32, 140)},
                                        {"b", test_data({2, 3, 4}, sp::int32, 141)}};
  // rows along dim 0, cols along what is dim 1 of each row's block.
  sp::PmapOptions inner{.axis_name = "cols", .in_axes = {1}, .out_axes = {1}};
  auto got = sp::pmap(sp::pmap(body, inner), {.axis_name = "rows"})(d);
  auto want = sp::vmap(sp::vmap(body, {.in_axes = {1}, .out_axes = {1}, .axis_name = "cols"}),
                       {.axis_name = "rows"})(d);
  expect_same_tree(got, want, "nested with in_axes/out_axes");
}

TEST(PmapEqualsVmap, NestedPmapEqualsNestedVmap) {
  CollectiveTimeout timeout;
  auto body = [](sp::Array v) {
    sp::Array over_both = sp::psum(v, sp::axes("rows", "cols"));
    sp::Array over_rows = sp::pmax(v, "rows");
    sp::Array over_cols = sp::psum(v, "cols");
    sp::Array index = sp::axis_index(sp::axes("rows", "cols")).astype(v.dtype());
    return std::make_tuple(over_both + over_rows * 100, over_cols - index,
                           sp::all_gather(v, "rows"), sp::axis_index(sp::axes("cols", "rows")),
                           sp::all_gather(v, sp::axes("rows", "cols"), {.tiled = true}),
                           sp::pmin(v, sp::axes("cols", "rows")));
  };
  for (auto [r, c] : {std::pair{2, 4}, std::pair{4, 2}, std::pair{1, 8}, std::pair{3, 2}}) {
    sp::Array x = test_data({r, c, 3}, sp::int32, unsigned(r * 10 + c));
    auto got = sp::pmap(sp::pmap(body, {.axis_name = "cols"}), {.axis_name = "rows"})(x);
    auto want = sp::vmap(sp::vmap(body, {.axis_name = "cols"}), {.axis_name = "rows"})(x);
    expect_same_tree(got, want, "rows=" + std::to_string(r) + " cols=" + std::to_string(c));
    sp::Array over_both = sp::sum(x, {0, 1}, /*keepdims=*/true);
    sp::Array over_rows = sp::max(x, {0}, /*keepdims=*/true);
    EXPECT_TRUE(
        arrays_equal(std::get<0>(got), sp::broadcast_to(over_both + over_rows * 100, {r, c, 3})));
  }
}

}  // namespace

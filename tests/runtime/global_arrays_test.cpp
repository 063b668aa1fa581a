// Global arrays: make_array_from_callback, make_array_from_process_local_data and
// process_allgather against JAX's results on 8 devices in one process (the callback's indices,
// every shard's device, index, replica id and values, the errors), the Array accessors for
// addressability, and the mapping of process-local data for layouts spanning several processes
// (devices given fake process indices), checked against the examples in JAX's docstrings.
#include <spmd/spmd.h>

#include "ops/global_arrays.h"
#include "runtime/sharded.h"
#include "support/processes.h"
#include "support/support.h"

#include <gtest/gtest.h>

#include <charconv>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace spmd {
// Slices in failure messages as "start:stop".
void PrintTo(const Slice& s, std::ostream* os) {
  *os << s.start << ":" << s.stop;
}
}  // namespace spmd

namespace sp = spmd;
using sp::P;
using spmd_test::error_message;

namespace {

constexpr const char* kCases = "global_arrays/cases.txt";
constexpr const char* kErrors = "global_arrays/errors.txt";

sp::Mesh mesh() {
  return sp::Mesh(sp::create_device_mesh({4, 2}), {"x", "y"});
}
template <class... E>
sp::NamedSharding S(const E&... spec) {
  return sp::NamedSharding(mesh(), P(spec...));
}
sp::NamedSharding S() {
  return sp::NamedSharding(mesh(), P());
}

sp::Array G() {
  return sp::arange(32).reshape({8, 4});
}
sp::Array V() {
  return sp::arange(8.0f);
}

// "start:stop,start:stop", as the golden writes an index.
std::string index_text(const sp::Index& index) {
  std::string out;
  for (const sp::Slice& s : index) {
    if (!out.empty()) out += ',';
    out += std::to_string(s.start) + ":" + std::to_string(s.stop);
  }
  return out;
}

// Python's str of each value, as NumPy's tolist() gives them.
std::string values_text(const sp::Array& x) {
  std::string out;
  const bool floating = sp::is_floating(x.dtype());
  for (double v : x.to_vector<double>()) {
    std::string item;
    if (floating) {
      char buf[32];
      item.assign(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
      if (item.find_first_of(".e") == std::string::npos) item += ".0";
    } else {
      item = std::to_string(int64_t(v));
    }
    if (!out.empty()) out += ' ';
    out += item;
  }
  return out;
}

// The block of `x` at `index`.
sp::Array block(const sp::Array& x, const sp::Index& index) {
  std::vector<int64_t> start, stop;
  for (const sp::Slice& s : index) {
    start.push_back(s.start);
    stop.push_back(s.stop);
  }
  return sp::lax::slice(x, start, stop);
}

// The golden's description of an array (see tools/goldens/gen_global_arrays.py).
std::string describe(const sp::Array& x, const std::vector<std::string>* calls = nullptr,
                     const std::vector<int>& data = {}) {
  std::string out = "sharding " + x.sharding()->repr() + "\n";
  if (calls) {
    out += "calls";
    for (const std::string& c : *calls) out += " " + c;
    out += "\n";
  }
  std::string shape;
  for (int64_t d : x.shape().dims()) {
    if (!shape.empty()) shape += 'x';
    shape += std::to_string(d);
  }
  out += "array " + std::string(sp::dtype_name(x.dtype())) + " " + shape +
         " fully_replicated=" + std::to_string(x.is_fully_replicated()) +
         " fully_addressable=" + std::to_string(x.is_fully_addressable()) +
         " committed=" + std::to_string(x.committed());
  for (const sp::Shard& s : x.addressable_shards())
    out += "\nshard " + std::to_string(s.device.id) + " " + index_text(s.index) + " " +
           std::to_string(s.replica_id) + " " + values_text(s.data);
  const int n = int(x.addressable_shards().size());
  for (int i : data)
    if (-n <= i && i < n)
      out += "\ndata " + std::to_string(i) + " " + values_text(x.addressable_data(i));
  return out;
}

std::string from_callback(const sp::Shape& shape, const sp::Sharding& sharding,
                          const sp::Array& source, const std::vector<int>& data = {},
                          std::optional<sp::DType> dtype = std::nullopt) {
  std::vector<std::string> calls;
  sp::Array x = sp::make_array_from_callback(
      shape, sharding,
      [&](const sp::Index& index) {
        calls.push_back(index_text(index));
        return block(source, index);
      },
      dtype);
  return describe(x, &calls, data);
}

// The values of a "shard <id> <index> <replica id> <values>" line.
std::string shard_values(const std::string& line) {
  const std::vector<std::string> fields = spmd_test::split_fields(line, ' ');
  std::string out;
  for (size_t k = 4; k < fields.size(); ++k) out += (k > 4 ? " " : "") + fields[k];
  return out;
}

// `text`, a description recorded in one process of 8 devices, as this process sees the array
// under mpirun (ctest's spmd_mpi_suites): the callback's calls and the shards for its own
// devices only, not fully addressable when another process holds a shard, addressable_data(i)
// indexing its own shards (describe() asks only for those in range), and an uncommitted array
// on its first device. In one process, `text` itself.
std::string here(std::string text) {
  if (sp::process_count() == 1) return text;
  const int first = sp::local_devices()[0].id;
  if (text.find("committed=0") != std::string::npos) {
    text = spmd_test::on_default_device(text);
    const size_t at = text.find("\nshard 0 ");
    if (at != std::string::npos) text.replace(at, 9, "\nshard " + std::to_string(first) + " ");
  }
  const std::vector<std::string> lines = spmd_test::split_fields(text, '\n');
  std::vector<bool> mine;  // per shard line
  std::vector<std::string> shards;
  for (const std::string& line : lines) {
    if (!line.starts_with("shard ")) continue;
    const int id = std::stoi(spmd_test::split_fields(line, ' ')[1]);
    mine.push_back(sp::is_addressable(sp::devices().at(size_t(id))));
    if (mine.back()) shards.push_back(line);
  }
  const bool all_here = shards.size() == mine.size();
  const int n = int(shards.size());
  std::string out;
  size_t shard = 0;
  for (std::string line : lines) {
    if (line.starts_with("calls") && spmd_test::split_fields(line, ' ').size() == mine.size() + 1) {
      const std::vector<std::string> calls = spmd_test::split_fields(line, ' ');
      line = "calls";
      for (size_t i = 1; i < calls.size(); ++i)
        if (i - 1 >= mine.size() || mine[i - 1]) line += " " + calls[i];
    } else if (line.starts_with("array") && !all_here) {
      line.replace(line.find("fully_addressable=1"), 19, "fully_addressable=0");
    } else if (line.starts_with("shard ") && !mine[shard++]) {
      continue;
    } else if (line.starts_with("data ")) {
      const std::string i = spmd_test::split_fields(line, ' ')[1];
      const int p = std::stoi(i) < 0 ? std::stoi(i) + n : std::stoi(i);
      if (p < 0 || p >= n) continue;
      line = "data " + i + " " + shard_values(shards[size_t(p)]);
    }
    out += (out.empty() ? "" : "\n") + line;
  }
  return out;
}

std::string golden(const std::string& name) {
  static const auto blocks = spmd_test::golden_blocks(kCases);
  auto it = blocks.find(name);
  return it == blocks.end() ? "(no golden " + name + ")" : here(it->second);
}

TEST(GlobalArrays, CallbackShardsMatchJax) {
  EXPECT_EQ(from_callback({8, 4}, S("x"), G(), {0, 3, -1}), golden("callback_x"));
  EXPECT_EQ(from_callback({8, 4}, S("x", "y"), G(), {5}), golden("callback_x_y"));
  EXPECT_EQ(from_callback({8, 4}, S(sp::None, "y"), G()), golden("callback_none_y"));
  EXPECT_EQ(from_callback({8, 4}, S("y"), G(), {1}), golden("callback_y"));
  EXPECT_EQ(from_callback({8, 4}, S(sp::axes("x", "y")), G()), golden("callback_xy"));
  EXPECT_EQ(from_callback({8, 4}, S(sp::axes("y", "x")), G()), golden("callback_yx"));
  EXPECT_EQ(from_callback({8, 4}, S(), G(), {0, 6}), golden("callback_replicated"));
  // The dtype given: under mpirun, process 1 holds no shard of it (as JAX, it must be given then).
  EXPECT_EQ(
      from_callback({8, 4}, sp::SingleDeviceSharding(sp::devices()[3]), G(), {}, sp::DType::int32),
      golden("callback_single_device"));
  EXPECT_EQ(from_callback({8}, S("x"), V()), golden("callback_1d"));
  EXPECT_EQ(from_callback({8}, S("y"), V(), {}, sp::DType::float32), golden("callback_dtype"));
}

TEST(GlobalArrays, CallbackScalarsBecomeStronglyTypedArrays) {
  std::vector<std::string> calls;
  sp::Array x = sp::make_array_from_callback({}, S(), [&](const sp::Index& index) {
    calls.push_back(index_text(index));
    return 2.5f;
  });
  EXPECT_EQ(describe(x, &calls), golden("callback_0d"));
  EXPECT_FALSE(x.weak_type());
  sp::Array i = sp::make_array_from_callback({}, S(), [](const sp::Index&) { return 7; });
  EXPECT_EQ(describe(i), golden("callback_scalar_int"));
  EXPECT_FALSE(i.weak_type());
}

TEST(GlobalArrays, ReplicatedCommittedBlockIsReturnedAsItIs) {
  sp::Array whole = sp::device_put(G(), S());
  sp::Array x = sp::make_array_from_callback({8, 4}, S(), [&](const sp::Index&) { return whole; });
  // As in JAX, only when the sharding's devices are this process's (under mpirun the block is
  // copied: JAX compares the device assignment with the addressable devices).
  EXPECT_EQ(x.impl() == whole.impl(), whole.is_fully_addressable());
  // On other devices (here: one), the block is copied onto the sharding's devices.
  sp::Array one = sp::device_put(G(), sp::devices()[2]);
  sp::Array y = sp::make_array_from_callback({8, 4}, S(), [&](const sp::Index&) { return one; });
  EXPECT_NE(y.impl(), one.impl());
  EXPECT_EQ(y.sharding()->repr(), S().repr());
}

TEST(GlobalArrays, CallbackCopiesEachBlockOntoItsDevice) {
  sp::Array g = G();
  g.block_until_ready();
  sp::runtime::reset_transfer_stats();
  sp::Array x = sp::make_array_from_callback(
      {8, 4}, S("x"), [&](const sp::Index& index) { return block(g, index); });
  // Eight shards of 2x4 int32 values (under mpirun, those of this process's devices).
  EXPECT_EQ(sp::runtime::transfer_stats().host_to_device_bytes,
            int64_t(spmd_test::first_ids_here(8).size()) * 8 * 4);
  EXPECT_TRUE(spmd_test::arrays_equal(x, g));
}

std::string jax_message(const char* api, const char* name) {
  return "[" + std::string(api) + "] " + spmd_test::jax_error(kErrors, name);
}

TEST(GlobalArrays, CallbackErrorsAreJaxs) {
  const char* api = "make_array_from_callback";
  auto whole = [](const sp::Array& v) { return [v](const sp::Index&) { return v; }; };
  EXPECT_EQ(error_message<sp::ValueError>([&] {
              sp::make_array_from_callback({8, 4}, S("x"), whole(G()));
            }),
            jax_message(api, "callback_shape"));
  EXPECT_EQ(error_message<sp::ValueError>([&] {
              sp::make_array_from_callback({8}, S("x"), whole(block(V(), {{0, 3}})));
            }),
            jax_message(api, "callback_shape_1d"));
  // The second of every four rows' blocks is float32, with the values of rows 2:4, so that
  // under mpirun each process (calling only for its own blocks) names the same buffer.
  auto mixed = [](const sp::Index& index) {
    const int64_t row = index[0].start % 4;
    sp::Array b = block(G(), {{row, row + 2}, index[1]});
    return row ? b.astype(sp::DType::float32) : b;
  };
  EXPECT_EQ(error_message<sp::ValueError>([&] {
              sp::make_array_from_callback({8, 4}, S("x"), mixed);
            }),
            jax_message(api, "callback_mixed_dtypes"));
  EXPECT_EQ(error_message<sp::ValueError>([&] {
              sp::make_array_from_callback(
                  {8, 4}, S("x"), [](const sp::Index& index) { return block(G(), index); },
                  sp::DType::float32);
            }),
            jax_message(api, "callback_dtype_mismatch"));
  EXPECT_EQ(error_message<sp::ShardingError>([&] {
              sp::make_array_from_callback({6, 4}, S("x"), whole(G()));
            }),
            jax_message(api, "callback_indivisible"));
}

TEST(GlobalArrays, CallbackRejectsRanksEmptyHandlesAndTracedValues) {
  EXPECT_EQ(error_message<sp::ShardingError>([] {
              sp::make_array_from_callback({8}, S("x", "y"), [](const sp::Index&) { return V(); });
            }).rfind("[make_array_from_callback] Sharding NamedSharding(", 0),
            0u);
  EXPECT_EQ(error_message<sp::ValueError>([] {
              sp::make_array_from_callback({8}, S("x"),
                                           [](const sp::Index&) { return sp::Array(); });
            }),
            "[make_array_from_callback] expected the callback to return an array, got an empty "
            "Array handle");
  auto traced = sp::jit([](const sp::Array& a) {
    return sp::make_array_from_callback({8}, S(), [&](const sp::Index&) { return a; });
  });
  EXPECT_EQ(error_message<sp::UnexpectedTracerError>([&] { traced(V()); }),
            "[make_array_from_callback] jax.make_array_from_callback cannot be called within a "
            "traced context.");
}

// A null sharding pointer, an empty callback and a negative shape are refused before any use
// (they crashed: a null dereference, std::bad_function_call).
TEST(GlobalArrays, NullShardingsEmptyCallbacksAndNegativeShapesAreErrors) {
  const std::shared_ptr<const sp::Sharding> none;
  auto block = [](const sp::Index&) { return sp::zeros({1}); };
  EXPECT_EQ(error_message<sp::ValueError>([&] { sp::make_array_from_callback({8}, none, block); }),
            "[make_array_from_callback] expected a sharding, got a null pointer");
  EXPECT_EQ(error_message<sp::ValueError>(
                [&] { sp::make_array_from_process_local_data(none, sp::zeros({8})); }),
            "[make_array_from_process_local_data] expected a sharding, got a null pointer");
  EXPECT_EQ(error_message<sp::ValueError>([&] { sp::device_put(sp::zeros({8}), none); }),
            "[device_put] expected a sharding, got a null pointer");
  EXPECT_EQ(error_message<sp::ValueError>(
                [&] { sp::make_array_from_callback({8}, S("x"), sp::DataCallback()); }),
            "[make_array_from_callback] the callback is empty");
  EXPECT_EQ(error_message<sp::ValueError>([&] { sp::make_array_from_callback({-8}, S(), block); }),
            "[make_array_from_callback] negative dimensions are not allowed, got shape (-8,)");
  EXPECT_EQ(error_message<sp::ValueError>([&] {
              sp::make_array_from_process_local_data(S(), sp::zeros({8}), sp::Shape{-8});
            }),
            "[make_array_from_process_local_data] negative dimensions are not allowed, got shape "
            "(-8,)");
}

TEST(GlobalArrays, ProcessAllgatherNeedsAConcreteArray) {
  EXPECT_EQ(error_message<sp::ValueError>([] { sp::process_allgather(sp::Array()); }),
            "[process_allgather] expected an array, got an empty Array handle");
  auto traced = sp::jit([](const sp::Array& a) { return sp::process_allgather(a); });
  EXPECT_EQ(error_message<sp::ConcretizationError>([&] { traced(sp::zeros({8})); }),
            "[process_allgather] expected a concrete array, got one traced by jit (f32[8]); "
            "gather its value outside the traced function");
}

TEST(GlobalArrays, ProcessLocalDataInOneProcessIsTheWholeArray) {
  EXPECT_EQ(describe(sp::make_array_from_process_local_data(S("x"), G())), golden("local_data_x"));
  EXPECT_EQ(
      describe(sp::make_array_from_process_local_data(S(sp::axes("x", "y")), G(), sp::Shape{8, 4})),
      golden("local_data_xy_shape"));
  EXPECT_EQ(describe(sp::make_array_from_process_local_data(S(), V())),
            golden("local_data_replicated"));
  EXPECT_EQ(error_message<sp::ValueError>([] {
              sp::make_array_from_process_local_data(S("x"), G(), sp::Shape{16, 4});
            }),
            jax_message("make_array_from_process_local_data", "local_data_global_shape"));
}

TEST(GlobalArrays, ProcessAllgatherInOneProcess) {
  EXPECT_EQ(describe(sp::process_allgather(sp::device_put(G(), S("x")))), golden("allgather_x"));
  EXPECT_EQ(describe(sp::process_allgather(sp::device_put(G(), S("x")), /*tiled=*/true)),
            golden("allgather_x_tiled"));
  EXPECT_EQ(describe(sp::process_allgather(sp::Array(3.5f).astype(sp::DType::float32), true)),
            golden("allgather_scalar_tiled"));
  EXPECT_EQ(describe(sp::process_allgather(V())), golden("allgather_uncommitted"));
}

TEST(GlobalArrays, AddressableDataIndexesTheShards) {
  sp::Array x = sp::device_put(G(), S("x"));
  // Under mpirun, this process's shards.
  const int n = int(spmd_test::first_ids_here(8).size());
  const std::string count = std::to_string(n);
  EXPECT_EQ(error_message<sp::IndexError>([&] { x.addressable_data(n); }),
            "[addressable_data] " + spmd_test::jax_error(kErrors, "addressable_data_range") +
                ": index " + count + " with " + count + " addressable shards");
  EXPECT_NO_THROW(x.addressable_data(-n));
  EXPECT_THROW(x.addressable_data(-n - 1), sp::IndexError);
  // An uncommitted array has one shard, on the default device.
  EXPECT_TRUE(spmd_test::arrays_equal(V().addressable_data(0), V()));
}

TEST(GlobalArrays, AddressabilityIsTheDevicesProcess) {
  for (const sp::Device& d : sp::devices())
    EXPECT_EQ(sp::is_addressable(d), d.process_index == sp::process_index()) << d.id;
  EXPECT_FALSE(sp::is_addressable(sp::Device{0, "cpu", sp::process_index() + 1}));
  EXPECT_TRUE(V().is_fully_addressable());
  // Under mpirun, the mesh spans the processes.
  EXPECT_EQ(sp::device_put(G(), S("x")).is_fully_addressable(), sp::process_count() == 1);
}

// A committed array whose slots on devices 4 to 7 belong to process 1: this process holds
// buffers for the others only, and lists only those.
TEST(GlobalArrays, AddressableShardsSkipOtherProcessesSlots) {
  sp::Array g = G();
  auto data = sp::make_layout(sp::aval_of(g), std::make_shared<sp::NamedSharding>(S("x")));
  for (size_t i = 0; i < data->layout.size(); ++i) {
    if (data->layout[i].device.id >= 4) {
      data->layout[i].device.process_index = 1;
      continue;
    }
    data->shards[i] = sp::slice_for(sp::host_data(g, "test"), sp::aval_of(g), data->layout[i]);
  }
  sp::Array x = sp::make_sharded_array(sp::aval_of(g), data);
  std::vector<int> ids;
  for (const sp::Shard& s : x.addressable_shards()) ids.push_back(s.device.id);
  EXPECT_EQ(ids, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(values_text(x.addressable_data(3)), "8 9 10 11 12 13 14 15");
}

// The layout of `sharding` for `shape` with device d on process d / per_process.
std::vector<sp::ShardSlot> on_processes(const sp::Sharding& sharding, const sp::Shape& shape,
                                        int per_process) {
  std::vector<sp::ShardSlot> layout = sharding.layout(shape);
  for (sp::ShardSlot& slot : layout) slot.device.process_index = slot.device.id / per_process;
  return layout;
}

using Dims = std::vector<std::optional<int64_t>>;

Dims global_shape(const sp::Sharding& sharding, const sp::Shape& local, int per_process,
                  int process = 0) {
  sp::Shape universal(std::vector<int64_t>(size_t(local.ndim()), sharding.num_devices()));
  return sp::global_arrays::local_to_global_shape(on_processes(sharding, universal, per_process),
                                                  local, process);
}

// local_to_global_shape's docstring: mesh {'a': 2, 'b': 2, 'c': 2}, 2 devices per host.
TEST(GlobalArrays, GlobalShapeFromProcessLocalShape) {
  const sp::Mesh abc(sp::create_device_mesh({2, 2, 2}), {"a", "b", "c"});
  auto s = [&](sp::PartitionSpec spec) { return sp::NamedSharding(abc, spec); };
  const sp::Shape local{3, 5};
  EXPECT_EQ(global_shape(s(P()), local, 2), (Dims{3, 5}));
  EXPECT_EQ(global_shape(s(P(sp::axes("a", "b", "c"), sp::None)), local, 2), (Dims{12, 5}));
  EXPECT_EQ(global_shape(s(P(sp::axes("a", "b"), sp::None)), local, 2), (Dims{12, 5}));
  EXPECT_EQ(global_shape(s(P(sp::None, sp::axes("a", "c"))), local, 2), (Dims{3, 10}));
  EXPECT_EQ(global_shape(s(P(sp::axes("a", "c"), "b")), local, 2, 3), (Dims{6, 10}));
  // Devices permuted so that hosts hold different numbers of blocks on both dims.
  std::vector<sp::Device> d = sp::devices();
  const sp::Mesh permuted({d[0], d[2], d[3], d[4], d[1], d[5], d[6], d[7]}, {2, 2, 2},
                          {"a", "b", "c"});
  EXPECT_EQ(global_shape(sp::NamedSharding(permuted, P("a", sp::axes("b", "c"))), local, 2),
            (Dims{std::nullopt, std::nullopt}));
  // In one process every layout is its own: the local shape is the global one.
  EXPECT_EQ(global_shape(s(P(sp::axes("a", "b", "c"))), local, 8), (Dims{3, 5}));
}

// get_process_index_and_count's docstring: 4 hosts, layouts "1234 / 2143" and "1212 / 3434".
TEST(GlobalArrays, ProcessCountsPerDim) {
  std::vector<sp::Device> d = sp::devices();
  auto count = [&](std::vector<sp::Device> devices, int dim) {
    const sp::NamedSharding s(sp::Mesh(std::move(devices), {2, 4}, {"r", "c"}), P("r", "c"));
    return sp::global_arrays::process_count_on_dim(on_processes(s, {8, 8}, 2), dim, 0);
  };
  const std::vector<sp::Device> interleaved = {d[0], d[2], d[4], d[6], d[3], d[1], d[7], d[5]};
  EXPECT_EQ(count(interleaved, 0), 1);
  EXPECT_EQ(count(interleaved, 1), 2);
  const std::vector<sp::Device> grid = {d[0], d[2], d[1], d[3], d[4], d[6], d[5], d[7]};
  EXPECT_EQ(count(grid, 0), 2);
  EXPECT_EQ(count(grid, 1), 2);
}

// Two processes of four devices on the 4x2 mesh, P('x'): process 1 holds rows 4 to 8 of an (8, 4)
// array, at rows 0 to 4 of its local data.
TEST(GlobalArrays, ProcessLocalDataMapsOntoTheProcessBlocks) {
  const sp::NamedSharding s = S("x");
  const std::vector<sp::ShardSlot> layout = on_processes(s, {8, 4}, 4);
  const sp::global_arrays::LocalBlocks blocks =
      sp::global_arrays::local_blocks(layout, {2, 4}, {4, 4}, {8, 4}, 1);
  EXPECT_EQ(blocks.local_index({{4, 6}, {0, 4}}), (sp::Index{{0, 2}, {0, 4}}));
  EXPECT_EQ(blocks.local_index({{6, 8}, {0, 4}}), (sp::Index{{2, 4}, {0, 4}}));
  EXPECT_EQ(sp::global_arrays::num_addressable_indices(layout, 0, 1), 4);
  EXPECT_EQ(error_message<sp::ValueError>([&] {
              sp::global_arrays::local_blocks(layout, {2, 4}, {3, 4}, {8, 4}, 1);
            }),
            "[make_array_from_process_local_data] Invalid host data, each dimension should match "
            "either global or process shape. In dimension 0, the process data has 3 elements. "
            "Process addresses 4 elements and global_shape=(8, 4).");
  // P('y'): every process holds both row blocks, so its local data is every row.
  const std::vector<sp::ShardSlot> by_y = on_processes(S("y"), {8, 4}, 4);
  const sp::global_arrays::LocalBlocks all_rows =
      sp::global_arrays::local_blocks(by_y, {4, 4}, {8, 4}, {8, 4}, 1);
  EXPECT_EQ(all_rows.local_index({{4, 8}, {0, 4}}), (sp::Index{{4, 8}, {0, 4}}));
}

}  // namespace

// Global arrays (include/spmd/global_arrays.h): built from each process's addressable shards,
// read back whole; the Array accessors for addressability; and the process-local data mapping
// (src/ops/global_arrays.h).
#include "ops/global_arrays.h"

#include <spmd/error.h>
#include <spmd/ops.h>
#include <spmd/placement.h>
#include <spmd/transforms.h>

#include "core/array_impl.h"
#include "ops/op_util.h"
#include "runtime/sharded.h"
#include "runtime/transfer.h"
#include "sharding/python_repr.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <utility>

namespace spmd {

bool is_addressable(const Device& device) {
  return device.process_index == process_index();
}

bool Array::is_fully_addressable() const {
  const std::vector<Device>& list = sharding()->device_list();
  return std::all_of(list.begin(), list.end(), is_addressable);
}

Array Array::addressable_data(int64_t i) const {
  std::vector<Shard> shards = addressable_shards();
  // Every shard of a fully replicated array holds the whole value: JAX returns the first.
  if (is_fully_replicated()) i = 0;
  const auto n = int64_t(shards.size());
  if (i < -n || i >= n)
    throw IndexError("[addressable_data] list index out of range: index " + std::to_string(i) +
                     " with " + std::to_string(n) + " addressable shards");
  return shards[size_t(i < 0 ? i + n : i)].data;
}

namespace global_arrays {
namespace {

using Range = std::pair<int64_t, int64_t>;

Range range_of(const ShardSlot& slot, int dim) {
  return {slot.index[size_t(dim)].start, slot.index[size_t(dim)].stop};
}

bool all_held_by(const std::vector<ShardSlot>& layout, int process) {
  return std::all_of(layout.begin(), layout.end(),
                     [&](const ShardSlot& s) { return s.device.process_index == process; });
}

bool every_slot_whole(const std::vector<ShardSlot>& layout) {
  return std::all_of(layout.begin(), layout.end(),
                     [&](const ShardSlot& s) { return s.index == layout.front().index; });
}

std::set<Range> process_ranges(const std::vector<ShardSlot>& layout, int dim, int process) {
  std::set<Range> out;
  for (const ShardSlot& slot : layout)
    if (slot.device.process_index == process) out.insert(range_of(slot, dim));
  return out;
}

}  // namespace

std::optional<int64_t> process_count_on_dim(const std::vector<ShardSlot>& universal, int dim,
                                            int process) {
  if (all_held_by(universal, process) || every_slot_whole(universal)) return 1;
  std::map<int, std::set<Range>> per_process;
  std::set<Range> all;
  for (const ShardSlot& slot : universal) {
    per_process[slot.device.process_index].insert(range_of(slot, dim));
    all.insert(range_of(slot, dim));
  }
  const size_t mine = per_process[process].size();
  std::set<std::set<Range>> distinct;
  for (const auto& [p, ranges] : per_process) {
    if (ranges.size() != mine) return std::nullopt;
    distinct.insert(ranges);
  }
  // Distinct sets that overlap would count some block twice.
  size_t covered = 0;
  for (const auto& ranges : distinct) covered += ranges.size();
  if (covered != all.size()) return std::nullopt;
  return int64_t(distinct.size());
}

int64_t num_addressable_indices(const std::vector<ShardSlot>& layout, int dim, int process) {
  const Range first = range_of(layout.front(), dim);
  return (first.second - first.first) * int64_t(process_ranges(layout, dim, process).size());
}

Index LocalBlocks::local_index(const Index& index) const {
  Index out = index;
  for (size_t d = 0; d < out.size(); ++d) {
    if (whole[d]) continue;
    const auto at = std::lower_bound(starts[d].begin(), starts[d].end(), index[d].start);
    const int64_t start = int64_t(at - starts[d].begin()) * block[int(d)];
    out[d] = Slice{start, start + block[int(d)]};
  }
  return out;
}

LocalBlocks local_blocks(const std::vector<ShardSlot>& layout, const Shape& block,
                         const Shape& local, const Shape& global, int process) {
  LocalBlocks out{{}, std::vector<std::vector<int64_t>>(size_t(global.ndim())), block};
  for (int d = 0; d < global.ndim(); ++d) {
    out.whole.push_back(local[d] == global[d]);
    for (const Range& r : process_ranges(layout, d, process))
      out.starts[size_t(d)].push_back(r.first);
    if (out.whole.back()) continue;
    const int64_t held = num_addressable_indices(layout, d, process);
    if (held != local[d])
      throw ValueError(
          "[make_array_from_process_local_data] Invalid host data, each dimension should match "
          "either global or process shape. In dimension " +
          std::to_string(d) + ", the process data has " + std::to_string(local[d]) +
          " elements. Process addresses " + std::to_string(held) +
          " elements and global_shape=" + python_repr::tuple_of_ints(global.dims()) + ".");
  }
  return out;
}

std::vector<std::optional<int64_t>> local_to_global_shape(const std::vector<ShardSlot>& universal,
                                                          const Shape& local, int process) {
  std::vector<std::optional<int64_t>> out;
  for (int d = 0; d < local.ndim(); ++d) {
    std::optional<int64_t> count = process_count_on_dim(universal, d, process);
    out.push_back(count ? std::optional(local[d] * *count) : std::nullopt);
  }
  return out;
}

}  // namespace global_arrays

namespace {

constexpr const char* kCallback = "make_array_from_callback";
constexpr const char* kLocalData = "make_array_from_process_local_data";

std::string optional_dims(const std::vector<std::optional<int64_t>>& dims) {
  std::vector<std::string> items;
  for (const auto& d : dims) items.push_back(d ? std::to_string(*d) : "None");
  return python_repr::tuple(items);
}

std::string dims_str(const Shape& shape) {
  return python_repr::tuple_of_ints(shape.dims());
}

Index whole_index(const Shape& shape) {
  Index out;
  for (int64_t n : shape.dims()) out.push_back(Slice{0, n});
  return out;
}

// The callback's block at `index`; it must be a value, not a traced one.
Array block_at(const DataCallback& callback, const Index& index) {
  Array block = callback(index);
  if (!block.valid())
    throw ValueError(
        "[make_array_from_callback] expected the callback to return an array, got "
        "an empty Array handle");
  if (!is_concrete(block))
    throw UnexpectedTracerError(
        "[make_array_from_callback] jax.make_array_from_callback cannot be called within a "
        "traced context.");
  return block;
}

// The blocks for the addressable slots of `layout`, in order: one call when every slot holds
// the whole array, else one per slot.
std::vector<Array> addressable_blocks(const std::vector<ShardSlot>& layout, bool replicated,
                                      const Shape& shape, const DataCallback& callback) {
  std::vector<Array> out;
  std::optional<Array> whole;
  for (const ShardSlot& slot : layout) {
    if (!is_addressable(slot.device)) continue;
    if (!replicated) {
      out.push_back(block_at(callback, slot.index));
      continue;
    }
    if (!whole) whole = block_at(callback, whole_index(shape));
    out.push_back(*whole);
  }
  return out;
}

// JAX's _get_and_check_dtype.
DType result_dtype(const std::vector<Array>& blocks, std::optional<DType> dtype) {
  if (!dtype) {
    if (blocks.empty())
      throw ValueError(
          "[make_array_from_callback] If the Array has no addressable shards, `dtype` must be "
          "provided via the `dtype` argument to `jax.make_array_from_callback`.");
    return blocks.front().dtype();
  }
  if (!blocks.empty() && blocks.front().dtype() != *dtype)
    throw ValueError(
        "[make_array_from_callback] If `dtype` is provided to `jax.make_array_from_callback`, it "
        "must match the dtype of the addressable shards. Got dtype=" +
        std::string(dtype_name(*dtype)) +
        " and shard dtype=" + std::string(dtype_name(blocks.front().dtype())) + "`.");
  return *dtype;
}

// JAX's _validate_shape_and_dtype_for_per_device_arrays.
void check_blocks(const std::vector<Array>& blocks, const Shape& block_shape,
                  const AbstractValue& aval, const Sharding& sharding) {
  for (const Array& b : blocks) {
    if (b.dtype() != aval.dtype)
      throw ValueError(
          "[make_array_from_callback] Input buffers to `Array` must have matching dtypes. Got " +
          std::string(dtype_name(b.dtype())) + ", expected " + std::string(dtype_name(aval.dtype)) +
          " for buffer: " + str(b));
    if (b.shape() != block_shape)
      throw ValueError("[make_array_from_callback] Expected shard shape " + dims_str(block_shape) +
                       " doesn't match the single device array shape " + dims_str(b.shape()) +
                       ". Shape of Array is " + aval.typeof_str() + " with sharding " +
                       sharding.repr());
  }
}

// A device's own copy of a block's values.
std::shared_ptr<Buffer> device_copy(const Array& block) {
  const std::shared_ptr<Buffer>& from = concrete_buffer(block, kCallback);
  auto out = Buffer::allocate(from->nbytes());
  if (from->nbytes() > 0) std::memcpy(out->data(), from->data(), from->nbytes());
  runtime::record_transfer(runtime::TransferKind::host_to_device, int64_t(from->nbytes()));
  return out;
}

std::vector<Device> addressable_devices(const Sharding& sharding) {
  std::vector<Device> out;
  for (const Device& d : sharding.device_list())
    if (is_addressable(d)) out.push_back(d);
  return out;
}

// JAX returns a committed, fully replicated block on the same devices as it is.
bool reusable_as_is(const Array& first, const Sharding& sharding) {
  return sharding.is_fully_replicated() && first.committed() && first.is_fully_replicated() &&
         first.sharding()->device_list() == addressable_devices(sharding);
}

std::shared_ptr<const Sharding> copy_of(const Sharding& sharding, const char* api) {
  if (auto* named = dynamic_cast<const NamedSharding*>(&sharding))
    return std::make_shared<NamedSharding>(*named);
  if (auto* single = dynamic_cast<const SingleDeviceSharding*>(&sharding))
    return std::make_shared<SingleDeviceSharding>(*single);
  throw ShardingError("[" + std::string(api) + "] unsupported sharding " + sharding.repr());
}

// The layout of an array of `rank` dims with as many elements per dim as there are devices: one
// that fits every sharding, for the per-process questions that do not depend on the shape.
std::vector<ShardSlot> universal_layout(const Sharding& sharding, int rank) {
  return sharding.layout(Shape(std::vector<int64_t>(size_t(rank), sharding.num_devices())));
}

Shape global_shape_of(const Sharding& sharding, const Shape& local,
                      const std::optional<Shape>& given) {
  if (given) {
    if (given->ndim() != local.ndim())
      throw ValueError("[make_array_from_process_local_data] expected a global_shape of rank " +
                       std::to_string(local.ndim()) +
                       " (local_data's), got global_shape=" + dims_str(*given));
    return *given;
  }
  std::vector<std::optional<int64_t>> dims = global_arrays::local_to_global_shape(
      universal_layout(sharding, local.ndim()), local, process_index());
  std::vector<int64_t> out;
  for (const auto& d : dims) {
    if (!d)
      throw ValueError(
          "[make_array_from_process_local_data] Unable to compute global_shape due to "
          "non-uniform sharding. Specify global shape directly. Partially computed "
          "global_shape=" +
          optional_dims(dims) + ".");
    out.push_back(*d);
  }
  return Shape(out);
}

}  // namespace

Array make_array_from_callback(const Shape& shape, std::shared_ptr<const Sharding> sharding,
                               const DataCallback& callback, std::optional<DType> dtype) {
  ops::require_sharding(kCallback, sharding.get());
  if (!callback) throw ValueError(std::string("[") + kCallback + "] the callback is empty");
  check_shape_size(shape, 1, nullptr, kCallback);
  runtime::check_devices(sharding->device_list(), kCallback);
  sharding->check_shape(shape, kCallback);
  const std::vector<ShardSlot> layout = sharding->layout(shape);
  std::vector<Array> blocks =
      addressable_blocks(layout, sharding->is_fully_replicated(), shape, callback);
  const AbstractValue aval{shape, result_dtype(blocks, dtype), false};
  check_blocks(blocks, sharding->shard_shape(shape), aval, *sharding);
  if (!blocks.empty() && reusable_as_is(blocks.front(), *sharding)) return blocks.front();
  auto data = make_layout(aval, std::move(sharding));
  auto next = blocks.begin();
  for (size_t i = 0; i < data->layout.size(); ++i)
    if (is_addressable(data->layout[i].device)) data->shards[i] = device_copy(*next++);
  return make_sharded_array(aval, std::move(data));
}

Array make_array_from_callback(const Shape& shape, const Sharding& sharding,
                               const DataCallback& callback, std::optional<DType> dtype) {
  return make_array_from_callback(shape, copy_of(sharding, kCallback), callback, dtype);
}

Array make_array_from_process_local_data(std::shared_ptr<const Sharding> sharding,
                                         const Array& local_data,
                                         std::optional<Shape> global_shape) {
  ops::require_sharding(kLocalData, sharding.get());
  if (global_shape) check_shape_size(*global_shape, 1, nullptr, kLocalData);
  const AbstractValue local = aval_of(local_data);
  if (process_count() == 1 && global_shape && *global_shape != local.shape)
    throw ValueError(
        "[make_array_from_process_local_data] When calling `make_array_from_process_local_data` "
        "on a single process, global_shape should be None or equal to local_data.shape.Got "
        "global_shape=" +
        dims_str(*global_shape) + " and local_data.shape=" + dims_str(local.shape) + ".");
  const Shape global = global_shape_of(*sharding, local.shape, global_shape);
  sharding->check_shape(global, kLocalData);
  const global_arrays::LocalBlocks blocks =
      global_arrays::local_blocks(sharding->layout(global), sharding->shard_shape(global),
                                  local.shape, global, process_index());
  const std::shared_ptr<Buffer>& values = concrete_buffer(local_data, kLocalData);
  auto slice = [&](const Index& index) {
    ShardSlot slot{Device{}, blocks.local_index(index), 0};
    return make_array(AbstractValue{slot_shape(slot), local.dtype, false},
                      slice_for(values->data(), local, slot));
  };
  return make_array_from_callback(global, std::move(sharding), slice, local.dtype);
}

Array make_array_from_process_local_data(const Sharding& sharding, const Array& local_data,
                                         std::optional<Shape> global_shape) {
  return make_array_from_process_local_data(copy_of(sharding, kLocalData), local_data,
                                            std::move(global_shape));
}

namespace {

// The whole value of a global array, from the blocks of every process (a collective over all
// processes), as an uncommitted array.
Array whole_value(const Array& x) {
  const ArrayImpl& impl = *x.impl();
  if (!impl.sharded || impl.sharded->readable_everywhere()) return device_get(x);
  AbstractValue aval = impl.aval;
  aval.sharding.reset();
  return make_array(aval, impl.sharded->gather_from_processes(impl.aval));
}

// Each process's `local` (stacked along a new axis, or with `tiled` concatenated along axis
// 0), as one global array over a (processes, local devices) mesh.
Array across_processes(const Array& local, bool tiled) {
  const Array part = local.ndim() == 0 || !tiled ? expand_dims(local, {0}) : local;
  const Mesh mesh(devices(), Shape{process_count(), local_device_count()},
                  {"processes", "local_devices"});
  std::vector<int64_t> global = part.shape().dims();
  global[0] *= process_count();
  return make_array_from_process_local_data(NamedSharding(mesh, P("processes")), part,
                                            Shape(global));
}

}  // namespace

Array process_allgather(const Array& x, bool tiled) {
  if (!x.valid())
    throw ValueError("[process_allgather] expected an array, got an empty Array handle");
  if (!is_concrete(x))
    throw ConcretizationError("[process_allgather] expected a concrete array, got one traced by " +
                              std::string("jit (") + aval_of(x).str() +
                              "); gather its value outside the traced function");
  if (!x.is_fully_addressable()) {
    if (!tiled)
      throw ValueError(
          "[process_allgather] Gathering global non-fully-addressable arrays only supports "
          "tiled=True");
    return whole_value(x);
  }
  const Array local = device_get(x);
  if (process_count() == 1) return tiled ? local : expand_dims(local, {0});
  return whole_value(across_processes(local, tiled));
}

}  // namespace spmd

// device_put and the Array accessors for placement (include/spmd/placement.h).
#include <spmd/placement.h>

#include <spmd/error.h>

#include "core/array_impl.h"
#include "runtime/sharded.h"
#include "runtime/transfer.h"

#include <iostream>

namespace spmd {
namespace {

std::shared_ptr<const Sharding> default_sharding() {
  static const std::shared_ptr<const Sharding> s =
      std::make_shared<SingleDeviceSharding>(devices().front());
  return s;
}

const ArrayImpl& concrete_impl(const Array& x, const char* api) {
  if (!is_concrete(x)) concrete_buffer(x, api);  // raises the errors for empty or traced arrays
  return *x.impl();
}

}  // namespace

std::shared_ptr<const Sharding> Array::sharding() const {
  const ArrayImpl& impl = concrete_impl(*this, "sharding");
  return impl.sharded ? impl.sharded->sharding : default_sharding();
}

bool Array::committed() const {
  return concrete_impl(*this, "committed").sharded != nullptr;
}

bool Array::is_fully_replicated() const {
  return sharding()->is_fully_replicated();
}

std::vector<Shard> Array::addressable_shards() const {
  const ArrayImpl& impl = concrete_impl(*this, "addressable_shards");
  std::vector<Shard> out;
  if (!impl.sharded) {
    std::vector<Slice> all;
    for (int64_t d : impl.aval.shape.dims()) all.push_back(Slice{0, d});
    out.push_back(Shard{devices().front(), all, 0, *this});
    return out;
  }
  const ShardedData& data = *impl.sharded;
  data.wait();
  for (size_t i = 0; i < data.layout.size(); ++i) {
    if (!is_addressable(data.layout[i].device)) continue;
    AbstractValue aval{slot_shape(data.layout[i]), impl.aval.dtype, impl.aval.weak_type};
    out.push_back(Shard{data.layout[i].device, data.layout[i].index, data.layout[i].replica_id,
                        make_array(aval, data.shards[i])});
  }
  return out;
}

Array device_put(const Array& x, std::shared_ptr<const Sharding> sharding) {
  // The library's shardings check their devices when made; this covers any other Sharding.
  runtime::check_devices(sharding->device_list(), "device_put");
  const ArrayImpl& impl = concrete_impl(x, "device_put");
  sharding->check_shape(impl.aval.shape, "device_put");
  if (impl.sharded && *impl.sharded->sharding == *sharding) return x;
  auto data = make_layout(impl.aval, sharding);
  if (impl.sharded) {
    // Shards already on the right device are reused; the rest come from the whole value.
    const ShardedData& from = *impl.sharded;
    from.wait();
    for (size_t i = 0; i < data->layout.size(); ++i) {
      int j = from.slot_of(data->layout[i].device.id);
      if (j >= 0 && from.layout[size_t(j)].index == data->layout[i].index) {
        data->shards[i] = from.shards[size_t(j)];
        continue;
      }
      const auto& whole = from.gathered(impl.aval);
      data->shards[i] = slice_for(whole->data(), impl.aval, data->layout[i]);
      runtime::record_transfer(runtime::TransferKind::device_to_device,
                               int64_t(data->shards[i]->nbytes()));
    }
  } else {
    for (size_t i = 0; i < data->layout.size(); ++i) {
      data->shards[i] = slice_for(impl.buffer->data(), impl.aval, data->layout[i]);
      runtime::record_transfer(runtime::TransferKind::host_to_device,
                               int64_t(data->shards[i]->nbytes()));
    }
  }
  return make_sharded_array(impl.aval, std::move(data));
}

Array device_put(const Array& x, const Sharding& sharding) {
  if (auto* named = dynamic_cast<const NamedSharding*>(&sharding))
    return device_put(x, std::make_shared<NamedSharding>(*named));
  if (auto* single = dynamic_cast<const SingleDeviceSharding*>(&sharding))
    return device_put(x, std::make_shared<SingleDeviceSharding>(*single));
  throw ShardingError("[device_put] unsupported sharding " + sharding.repr());
}

Array device_put(const Array& x, const Device& device) {
  runtime::check_devices({&device, 1}, "device_put");
  return device_put(x, std::make_shared<SingleDeviceSharding>(device));
}

Array device_get(const Array& x) {
  return make_array(aval_of(x), concrete_buffer(x, "device_get"));
}

std::string sharding_to_string(const Array& x, const VisualizeOptions& opts) {
  return sharding_to_string(x.shape(), *x.sharding(), opts);
}

void visualize_array_sharding(const Array& x, const VisualizeOptions& opts) {
  visualize_sharding(x.shape(), *x.sharding(), opts);
}

}  // namespace spmd

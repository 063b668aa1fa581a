// device_put and the Array accessors for placement (include/spmd/placement.h).
#include <spmd/placement.h>

#include <spmd/error.h>

#include "core/array_impl.h"
#include "runtime/devices.h"
#include "runtime/sharded.h"
#include "runtime/transfer.h"

#include <iostream>

namespace spmd {
namespace {

std::shared_ptr<const Sharding> default_sharding() {
  static const std::shared_ptr<const Sharding> s =
      std::make_shared<SingleDeviceSharding>(local_devices().front());
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
    out.push_back(Shard{local_devices().front(), all, 0, *this});
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

Array place_concrete(const Array& x, std::shared_ptr<const Sharding> sharding) {
  const ArrayImpl& impl = concrete_impl(x, "device_put");
  // Already laid out so (every launch's arguments, mostly): its devices and shape were checked
  // against this sharding when it was placed.
  if (impl.sharded && equal_shardings(impl.sharded->sharding, sharding)) return x;
  // The library's shardings check their devices when made; this covers any other Sharding.
  runtime::check_devices(sharding->device_list(), "device_put");
  sharding->check_shape(impl.aval.shape, "device_put");
  auto data = make_layout(impl.aval, sharding);
  if (impl.sharded) {
    impl.sharded->wait();
    place_blocks(*impl.sharded, impl.aval, *data);
  } else {
    // Each process places its own shards, from its own copy of the value.
    for (size_t i = 0; i < data->layout.size(); ++i) {
      if (!runtime::is_local_device(data->layout[i].device.id)) continue;
      data->shards[i] = slice_for(impl.buffer->data(), impl.aval, data->layout[i]);
      runtime::record_transfer(runtime::TransferKind::host_to_device,
                               int64_t(data->shards[i]->nbytes()));
    }
  }
  return make_sharded_array(impl.aval, std::move(data));
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

#include "runtime/launchable.h"

#include <spmd/error.h>
#include <spmd/placement.h>

#include "runtime/communicator.h"
#include "runtime/executor.h"
#include "runtime/launch.h"
#include "runtime/sharded.h"

namespace spmd::runtime {
namespace {

std::vector<Array> run_on_mesh(const Launchable& l, std::span<const Array> args) {
  // A device thread cannot wait for a launch queued behind its own current task.
  if (current_device_id() >= 0)
    throw NotImplementedError(
        "[shard_map] a shard_map or pmap run inside another shard_map or pmap body is not "
        "supported (nest the mesh axes in one shard_map instead)");
  std::vector<std::shared_ptr<ShardedData>> ins;
  std::vector<AbstractValue> in_types;
  for (size_t i = 0; i < args.size(); ++i) {
    ins.push_back(device_put(args[i], l.in_shardings[i]).impl()->sharded);
    in_types.push_back(aval_of(args[i]));
  }
  std::vector<std::shared_ptr<ShardedData>> outs;
  std::vector<Array> results;
  for (size_t k = 0; k < l.out_types.size(); ++k) {
    outs.push_back(make_layout(l.out_types[k], l.out_shardings[k]));
    results.push_back(make_sharded_array(l.out_types[k], outs.back()));
  }
  LaunchContext base;
  base.axis_names = l.axis_names;
  base.axis_sizes = l.axis_sizes;
  auto comm = std::make_shared<Communicator>(l.device_ids);
  auto task = [base, comm, ids = l.device_ids, ins, in_types, outs, body = l.body](int rank) {
    LaunchContext ctx = base;
    ctx.comm = comm.get();
    ctx.rank = rank;
    ctx.device_id = ids[size_t(rank)];
    LaunchScope scope(&ctx);
    std::vector<Array> blocks;
    for (size_t i = 0; i < ins.size(); ++i) {
      ins[i]->wait();
      AbstractValue t = in_types[i];
      t.shape = slot_shape(ins[i]->layout[size_t(rank)]);
      blocks.push_back(make_array(t, ins[i]->shards[size_t(rank)]));
    }
    std::vector<Array> values = body(blocks);
    for (size_t k = 0; k < outs.size(); ++k)
      outs[k]->shards[size_t(rank)] = concrete_buffer(values[k], "shard_map");
  };
  // A rank that throws aborts the Communicator, so its peers stop waiting for it.
  std::shared_future<void> done = launch(l.device_ids, std::move(task), comm);
  for (auto& o : outs) o->ready = done;
  return results;
}

}  // namespace

std::vector<Array> run(const Launchable& l, std::span<const Array> args) {
  if (!l.on_mesh()) return l.body(args);
  return run_on_mesh(l, args);
}

}  // namespace spmd::runtime

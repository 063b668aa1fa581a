#include "runtime/launchable.h"

#include <spmd/error.h>
#include <spmd/placement.h>

#include <algorithm>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>

#include "runtime/communicator.h"
#include "runtime/devices.h"
#include "runtime/executor.h"
#include "runtime/launch.h"
#include "runtime/mpi.h"
#include "runtime/sharded.h"

namespace spmd::runtime {

// The per-rank state of a Launchable's launches. A rank's context is used only by the share
// running on that rank's device, and a device runs one share at a time, in launch order (on its
// worker thread, or on a calling thread that claimed it): so each context has one user at a
// time, and the groups its collectives met stay valid from one launch to the next (they depend
// on the mesh alone). Its Communicator is set by each launch.
// A rank's block of one argument, kept from one launch to the next: the next launch with an
// argument of the same type in the same slot gives it its block's buffer instead of making the
// block's type (a copy of the argument's, with the slot's shape) and Array again.
struct KeptBlock {
  AbstractValue global;      // the argument's type it was made for
  std::vector<Slice> index;  // and its slot
  std::shared_ptr<ArrayImpl> impl;
};

struct RankPlan {
  std::once_flag made;
  std::vector<LaunchContext> contexts;
  Launchable::Body body;
  Launchable::OwningBody owning;
  std::vector<int> local_ranks;  // the ranks whose devices are this process's (local_ranks_of)
  std::vector<std::vector<KeptBlock>> kept;  // per rank, per argument (launches without donation)
};

std::shared_ptr<RankPlan> new_rank_plan() {
  return std::make_shared<RankPlan>();
}

namespace {

// The ordered subsets of the mesh axes a collective can name (every order up to four axes; the
// mesh's own order beyond).
std::vector<std::vector<std::string>> axis_subsets(const std::vector<std::string>& names) {
  std::vector<std::vector<std::string>> out;
  const int k = int(names.size());
  for (int mask = 1; mask < (1 << k); ++mask) {
    std::vector<std::string> subset;
    for (int a = 0; a < k; ++a)
      if (mask & (1 << a)) subset.push_back(names[size_t(a)]);
    if (subset.size() > 4) {
      out.push_back(subset);
      continue;
    }
    std::vector<int> order(subset.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = int(i);
    do {
      std::vector<std::string> ordered;
      for (int i : order) ordered.push_back(subset[size_t(i)]);
      out.push_back(ordered);
    } while (std::next_permutation(order.begin(), order.end()));
  }
  return out;
}

// The device ids of every group a collective over the mesh axes can run over.
std::vector<std::vector<int>> mesh_axis_groups(const Launchable& l) {
  LaunchContext ctx;
  ctx.axis_names = l.axis_names;
  ctx.axis_sizes = l.axis_sizes;
  std::vector<std::vector<int>> groups;
  std::set<std::vector<int>> seen;
  for (const auto& names : axis_subsets(l.axis_names))
    for (int r = 0; r < int(l.device_ids.size()); ++r) {
      ctx.rank = r;
      std::vector<int> ids;
      for (int g : group_over(ctx, names).ranks) ids.push_back(l.device_ids[size_t(g)]);
      if (seen.insert(ids).second) groups.push_back(std::move(ids));
    }
  return groups;
}

// The device ids of the groups of `index`: each subgroup of indices along its axes (checked when
// the collective was traced), in every group of the mesh over those axes, in the order of the
// subgroup (a member's position).
std::vector<std::vector<int>> subgroup_ids(const Launchable& l,
                                           const Launchable::IndexGroups& index) {
  LaunchContext ctx;
  ctx.axis_names = l.axis_names;
  ctx.axis_sizes = l.axis_sizes;
  for (const std::string& name : index.axes)
    if (ctx.axis_of(name) < 0) return {};  // an axis of vmap, not of the mesh
  std::vector<std::vector<int>> groups;
  std::set<std::vector<int>> seen;
  for (int r = 0; r < int(l.device_ids.size()); ++r) {
    ctx.rank = r;
    const std::vector<int> ranks = group_over(ctx, index.axes).ranks;
    for (const std::vector<int>& sub : index.groups) {
      std::vector<int> ids;
      for (int k : sub) ids.push_back(l.device_ids[size_t(ranks[size_t(k)])]);
      if (seen.insert(ids).second) groups.push_back(std::move(ids));
    }
  }
  return groups;
}

// Between processes, each group a collective of this launch can run over needs its MPI
// communicator, which every process makes at the same point of the program: here, before each
// launch, on the launching thread (with `kept`, l.spare, locked). The set that `l`'s first launch
// made serves the next ones while none of its communicators has been freed (mpi::use_groups,
// which marks them used); else it is made again, and the kept Communicator, whose plans between
// processes may hold a freed one, is dropped. A communicator is freed once this thread's
// launches made so far have finished: one of them may still be to start a collective on it.
void prepare_groups(const Launchable& l, Launchable::Spare& kept) {
  if (kept.groups && mpi::use_groups(*kept.groups)) return;
  std::vector<std::vector<int>> groups = mesh_axis_groups(l);
  for (const Launchable::IndexGroups& index : l.index_groups)
    for (std::vector<int>& ids : subgroup_ids(l, index)) groups.push_back(std::move(ids));
  kept.groups = mpi::make_groups(groups, process_of_device, [] { wait_for_launches(); });
  kept.comm.reset();
}

// Runs `owning` on one device's blocks, handing it the blocks of the donated arguments: the
// launch's copy lets go of them, so the block is the only holder of its buffer (unless another
// array shares it, which the program then sees and leaves alone).
std::vector<Array> run_owning(const Launchable::OwningBody& owning, std::vector<Array> blocks,
                              const std::vector<std::shared_ptr<ShardedData>>& ins,
                              const std::vector<bool>& donated, int rank) {
  for (size_t i = 0; i < ins.size(); ++i)
    if (donated[i]) ins[i]->shards[size_t(rank)].reset();
  return owning(std::move(blocks), donated);
}

// A rank's block of an argument of type `global` in `slot`, over `shard`.
Array new_block(const AbstractValue& global, const ShardSlot& slot, std::shared_ptr<Buffer> shard) {
  AbstractValue t = global;
  t.shape = slot_shape(slot);
  return make_array(std::move(t), std::move(shard));
}

// The rank's block of argument `i` over `shard`: the impl kept from its last launch when nothing
// else holds it and it was made for the same type and slot (only its buffer changes), else a new
// one, then kept.
Array block_array(std::vector<KeptBlock>& kept, size_t i, const AbstractValue& global,
                  const ShardSlot& slot, std::shared_ptr<Buffer> shard) {
  if (kept.size() <= i) kept.resize(i + 1);
  KeptBlock& k = kept[i];
  if (k.impl && k.impl.use_count() == 1 && k.global == global && k.index == slot.index) {
    k.impl->buffer = std::move(shard);
    return Array(k.impl);
  }
  Array block = new_block(global, slot, std::move(shard));
  k = {global, slot.index, block.impl()};
  return block;
}

// After a launch's share: a kept block nothing else holds lets go of its buffer (the argument's
// data is not held past the launch); one that something still holds (a result that is the block
// itself) is forgotten.
void release_blocks(std::vector<KeptBlock>& kept) {
  for (KeptBlock& k : kept) {
    if (!k.impl) continue;
    if (k.impl.use_count() == 1)
      k.impl->buffer.reset();
    else
      k.impl.reset();
  }
}

// Rank r fills block r of every result, and a later launch on the same device reads that block
// without waiting for the other devices (ShardedData::wait_for_block): so block r must be the
// one placed on rank r's device, as every sharding over the launch's mesh lays it out.
void check_blocks_on_ranks(const ShardedData& out, const std::vector<int>& device_ids) {
  for (size_t r = 0; r < device_ids.size(); ++r)
    if (out.layout.size() != device_ids.size() || out.layout[r].device.id != device_ids[r])
      throw std::logic_error("[launch] internal error: a result's block " + std::to_string(r) +
                             " is not on the launch's device " + std::to_string(device_ids[r]));
}

// The launch's Communicator: the one `l` kept from its last launch when it is unused and waits
// as long as a new one would (the timeout comes from the environment), else a new one. Between
// processes, the MPI communicators of the launch's groups are made ready first.
std::shared_ptr<Communicator> communicator_for(const Launchable& l) {
  std::shared_ptr<Communicator> comm;
  {
    std::lock_guard lock(l.spare->mu);
    if (mpi::active()) prepare_groups(l, *l.spare);
    comm = std::move(l.spare->comm);
  }
  if (comm && comm->timeout() == default_collective_timeout()) return comm;
  return std::make_shared<Communicator>(l.device_ids);
}

// Keeps `comm` for `l`'s next launch when the launch ran on the calling thread (so no other
// thread holds anything of it) and succeeded: a Communicator that a failure aborted is dropped.
void keep_communicator(const Launchable& l, std::shared_ptr<Communicator> comm, bool ran_here,
                       const std::shared_future<void>& done) {
  if (!ran_here || comm.use_count() != 1) return;
  try {
    done.get();
  } catch (...) {
    return;
  }
  std::lock_guard lock(l.spare->mu);
  l.spare->comm = std::move(comm);
}

// The plan of `l`'s launches, made by the first.
RankPlan& rank_plan(const Launchable& l) {
  RankPlan& plan = *l.rank_plan;
  std::call_once(plan.made, [&] {
    plan.contexts.resize(l.device_ids.size());
    for (size_t r = 0; r < l.device_ids.size(); ++r) {
      LaunchContext& ctx = plan.contexts[r];
      ctx.axis_names = l.axis_names;
      ctx.axis_sizes = l.axis_sizes;
      ctx.rank = int(r);
      ctx.device_id = l.device_ids[r];
    }
    plan.body = l.body;
    plan.owning = l.owning_body;
    plan.local_ranks = local_ranks_of(l.device_ids);
    plan.kept.resize(l.device_ids.size());
  });
  return plan;
}

std::vector<Array> run_on_mesh(const Launchable& l, std::span<const Array> args,
                               std::vector<bool> donated = {}) {
  // A device thread cannot wait for a launch queued behind its own current task.
  if (current_device_id() >= 0)
    throw NotImplementedError(
        "[shard_map] a shard_map or pmap run inside another shard_map or pmap body is not "
        "supported (nest the mesh axes in one shard_map instead)");
  std::vector<std::shared_ptr<ShardedData>> ins;
  std::vector<AbstractValue> in_types;
  ins.reserve(args.size());
  in_types.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    ins.push_back(place_concrete(args[i], l.in_shardings[i]).impl()->sharded);
    in_types.push_back(aval_of(args[i]));
  }
  std::vector<std::shared_ptr<ShardedData>> outs;
  std::vector<Array> results;
  outs.reserve(l.out_types.size());
  results.reserve(l.out_types.size());
  for (size_t k = 0; k < l.out_types.size(); ++k) {
    outs.push_back(make_layout(l.out_types[k], l.out_shardings[k]));
    check_blocks_on_ranks(*outs.back(), l.device_ids);
    results.push_back(make_sharded_array(l.out_types[k], outs.back()));
  }
  const RankPlan& made = rank_plan(l);
  std::shared_ptr<Communicator> comm = communicator_for(l);
  // The task owns what only it uses; the results reach `outs` through their arrays.
  auto task = [plan = l.rank_plan, comm, ins = std::move(ins), in_types = std::move(in_types),
               outs = std::move(outs), donated = std::move(donated)](int rank) {
    LaunchContext& ctx = plan->contexts[size_t(rank)];
    ctx.comm = comm.get();
    LaunchScope scope(&ctx);
    // Without donation the blocks' impls are kept for the next launch (with donation the
    // program must be their only holder).
    std::vector<KeptBlock>* kept = donated.empty() ? &plan->kept[size_t(rank)] : nullptr;
    std::vector<Array> blocks;
    blocks.reserve(ins.size());
    for (size_t i = 0; i < ins.size(); ++i) {
      ins[i]->wait_for_block(rank);
      const ShardSlot& slot = ins[i]->layout[size_t(rank)];
      const std::shared_ptr<Buffer>& shard = ins[i]->shards[size_t(rank)];
      blocks.push_back(kept ? block_array(*kept, i, in_types[i], slot, shard)
                            : new_block(in_types[i], slot, shard));
    }
    std::vector<Array> values =
        kept ? plan->body(blocks) : run_owning(plan->owning, std::move(blocks), ins, donated, rank);
    blocks.clear();
    for (size_t k = 0; k < outs.size(); ++k)
      outs[k]->shards[size_t(rank)] = concrete_buffer(values[k], "shard_map");
    values.clear();
    if (kept) release_blocks(*kept);
  };
  // A rank that throws aborts the Communicator, so its peers stop waiting for it.
  bool ran_here = false;
  std::shared_future<void> done =
      launch(l.device_ids, made.local_ranks, std::move(task), comm, &ran_here);
  for (const Array& r : results) r.impl()->sharded->ready = done;
  keep_communicator(l, std::move(comm), ran_here, done);
  return results;
}

}  // namespace

std::vector<Array> run(const Launchable& l, std::span<const Array> args) {
  if (!l.on_mesh()) return l.body(args);
  return run_on_mesh(l, args);
}

std::vector<Array> run_donated(const Launchable& l, std::span<const Array> args,
                               std::vector<bool> donated) {
  if (!l.on_mesh() || !l.owning_body) return run(l, args);
  donated.resize(args.size(), false);
  return run_on_mesh(l, args, std::move(donated));
}

}  // namespace spmd::runtime

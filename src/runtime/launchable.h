// What the runtime runs: one program, the devices it runs on and how its arguments and results
// are laid out over them. compile builds these (compile/compiled.h); every execution of a
// Program (eager ops, jit, shard_map, pmap) ends in run().
#pragma once

#include <spmd/sharding.h>

#include "core/array_impl.h"

#include <compare>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace spmd::runtime {

class Communicator;
struct RankPlan;
namespace mpi {
struct GroupSet;
}

// A new, empty RankPlan (made by the first launch of the Launchable that holds it).
std::shared_ptr<RankPlan> new_rank_plan();

struct Launchable {
  // One device's share: its blocks of the arguments in, its blocks of the results out.
  using Body = std::function<std::vector<Array>(std::span<const Array>)>;
  Body body;
  // As `body`, over blocks it owns: those `donated` marks (a donated argument's, held by no one
  // else) it may write its results over. Unset: donation is ignored.
  using OwningBody =
      std::function<std::vector<Array>(std::vector<Array>, const std::vector<bool>&)>;
  OwningBody owning_body;
  // Empty: the program runs once, at once, on the calling thread, over whole values on the
  // default device. Otherwise the devices of a mesh, major to minor, each running `body` on its
  // own thread, with collectives over `axis_names`.
  std::vector<int> device_ids;
  std::vector<std::string> axis_names;
  std::vector<int64_t> axis_sizes;
  // For a mesh launch: how each argument is split over the devices (arguments are moved there
  // first), and the global types and shardings of the results.
  std::vector<std::shared_ptr<const Sharding>> in_shardings;
  std::vector<AbstractValue> out_types;
  std::vector<std::shared_ptr<const Sharding>> out_shardings;
  // The axis_index_groups of the program's collectives, each with the mesh axes it splits: a
  // group that spans processes needs an MPI communicator, which every process makes before the
  // launch.
  struct IndexGroups {
    std::vector<std::string> axes;
    std::vector<std::vector<int>> groups;
    auto operator<=>(const IndexGroups&) const = default;
  };
  std::vector<IndexGroups> index_groups;

  // What a launch keeps for the next, shared by copies (which launch the same program on the
  // same mesh): the Communicator of the last launch between processes that ran to its end on the
  // calling thread without an error, with its plans of the groups between processes made (see
  // runtime::launch); and the MPI communicators of the groups its collectives may name, made
  // before the first launch between processes (on every process alike) and again before a
  // launch that finds one of them freed (config::mpi_communicator_limit), which then drops the
  // kept Communicator, whose plans may hold it.
  struct Spare {
    std::mutex mu;
    std::shared_ptr<Communicator> comm;
    std::shared_ptr<mpi::GroupSet> groups;
  };
  std::shared_ptr<Spare> spare = std::make_shared<Spare>();

  // What every launch on the mesh shares, made at the first (runtime/launchable.cpp): each rank's
  // launch context, kept from one launch to the next with the collectives' groups it met, and
  // the bodies the launches' tasks run. Shared by copies.
  std::shared_ptr<RankPlan> rank_plan = new_rank_plan();

  bool on_mesh() const { return !device_ids.empty(); }
};

// Runs `l` on `args`. A mesh launch returns at once with committed results that become ready
// when every device has finished; an error on any device is raised by whoever reads them.
std::vector<Array> run(const Launchable& l, std::span<const Array> args);
// As run(l, args), consuming the arguments `donated` marks (the caller has deleted them): on a
// mesh each device's block of them goes to owning_body with nothing else holding it, so the
// program can write an output over it instead of allocating one.
std::vector<Array> run_donated(const Launchable& l, std::span<const Array> args,
                               std::vector<bool> donated);

}  // namespace spmd::runtime

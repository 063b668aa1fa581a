// Automatic partitioning ("computation follows sharding"): a global Program whose arguments or
// annotations carry shardings runs on every device of their mesh, each device on its blocks,
// with the collectives the shardings imply. Propagation (sharding/propagation.h) decides a split
// for every value; the partitioner (transforms/partition.cpp) rewrites the Program into the
// program each device runs; compile_partitioned caches the result as a Compiled.
#pragma once

#include <spmd/sharding.h>

#include "compile/compiled.h"
#include "sharding/propagation.h"

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace spmd {

// A collective the partitioner inserted, and why: no communication is hidden.
struct InsertedCollective {
  std::string collective;  // "all_gather over 'b' along dim 1"
  std::string cause;       // the equation and rule or annotation that needs it
  int64_t bytes_sent = 0;  // by each device
  // Moves data no annotation asked for (not a constraint, out_sharding or shard_map spec, and not
  // the reduction that completes a sum): what config::implicit_resharding governs.
  bool implicit = true;
};

// What each device runs and how the global inputs and outputs are split over the mesh.
struct PartitionedProgram {
  Program body;
  std::vector<PartitionSpec> in_specs;
  std::vector<PartitionSpec> out_specs;
  std::vector<InsertedCollective> collectives;
};

// sp::explain's account of a partitioned program: the mesh, the splits of its inputs and
// outputs, the program each device runs and every inserted collective with its cause and bytes.
std::string explain(const PartitionedProgram& p, const Mesh& mesh);

// An argument whose blocks are on the devices of the mesh in another order or arrangement: it
// arrives as it is (`held`, each device's block where it already is) and the program moves the
// blocks to its split with one ppermute over the whole mesh.
struct HeldArgument {
  std::shared_ptr<const Sharding> held;
  // For each position of the mesh's devices, the position whose block it takes.
  std::vector<int> source;
  bool implicit = true;  // no in_sharding asked for the move
};

// What propagation and the partitioner read: `p` with its calls inlined, what nothing reads
// left out (it would only add collectives that never run), and each use of a constant with a
// copy of its own (split_constant_uses). Defined by the partitioner.
Program prepared_for_partitioning(const Program& p);

// The program each device of `mesh` runs for `global`, with the given splits of its inputs and
// outputs closed (nullopt: chosen by propagation); the inputs in `held` (by index, when given)
// arrive as they are and are moved to their split first. Defined by the partitioner, which
// emits collectives through the ops above this layer.
PartitionedProgram partition_program(const Program& global, const Mesh& mesh,
                                     const std::vector<std::optional<ValueSplit>>& in,
                                     const std::vector<std::optional<ValueSplit>>& out,
                                     const std::vector<std::optional<HeldArgument>>& held = {});

// Where a computation runs and how its arguments and results are split, as decided from the
// committed arguments, in_shardings, out_shardings and the constraints in the program. `mesh`
// is a one-device mesh without axes for a computation committed to one device.
struct Placement {
  Mesh mesh;
  bool single_device = false;
  std::vector<std::optional<ValueSplit>> in, out;
  // Per argument: held where it is and moved inside the program (same devices, other order).
  std::vector<std::optional<HeldArgument>> held;
  // Per argument: the sharding of a committed argument that is not held, whose blocks the launch
  // copies to its split before the program runs where they differ (an in_sharding on other
  // devices, an arrangement no split or ppermute reaches).
  std::vector<std::shared_ptr<const Sharding>> arrives;
};

// The partitioned program of a placement, with the block copies of its arguments first in its
// account.
PartitionedProgram partition_program(const Program& global, const Placement& placement);

// The placement of `program` applied to `args`, or nullopt when nothing places it (no committed
// argument, no sharding given or in the program): it then runs on the default device. Raises
// JAX's "Received incompatible devices for jitted computation" for committed arguments or
// shardings on different devices; `api` names the computation and `arg_names` its arguments in
// that message ("argument x of add"). Without `committed_binds`, committed arguments move like
// uncommitted ones (pmap). The first `num_constants` arguments are arrays the computation
// closed over: like the constants JAX's lowering embeds, committed or not, they ask for no
// devices and no split.
std::optional<Placement> place(const Program& program, std::span<const Array> args,
                               std::span<const std::shared_ptr<const Sharding>> in_shardings,
                               std::span<const std::shared_ptr<const Sharding>> out_shardings,
                               const std::string& api, std::span<const std::string> arg_names,
                               bool committed_binds = true, size_t num_constants = 0);

// The Compiled of `program` partitioned by `placement`, built once per program content and
// placement.
std::shared_ptr<const Compiled> compile_partitioned(const ProgramRef& program,
                                                    const Placement& placement);

// device_put (`api`) of committed `x` to `target`, a NamedSharding over the devices x is on,
// all of this process, in another order and tiling x alike: moved as a jit moves such an
// argument, by an identity program on the target's mesh with x held where it is, whose one
// step is a ppermute over the whole mesh. Nullopt for any other target (device_put then copies
// blocks, which between processes moves only the bytes a process lacks). Raises the target's
// shape errors.
std::optional<Array> put_in_other_order(const Array& x,
                                        const std::shared_ptr<const Sharding>& target,
                                        const char* api);
// The account of that program, as sp::explain prints a jit's; nullopt as above.
std::optional<std::string> explain_put_in_other_order(const Array& x, const Sharding& target,
                                                      const char* api);

}  // namespace spmd

// The one path from a Program to devices. compile decides how a Program runs (which program
// each device runs, on which devices, with which layouts) and builds a Compiled; running it
// hands that to the runtime (runtime/launchable.h). Eager ops (compile_primitive), jit
// (compile_program) and shard_map and pmap (compile_manual) all take it.
#pragma once

#include <spmd/sharding.h>

#include "compile/executable.h"
#include "ir/primitive.h"
#include "runtime/launchable.h"

#include <atomic>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace spmd {

class Compiled {
 public:
  // A whole-value program that runs on the default device, on the calling thread.
  explicit Compiled(const Program& program, bool optimize = true);
  // A per-device program run on every device of `mesh`, operands and results split by specs.
  Compiled(const Program& body, const Mesh& mesh, std::span<const PartitionSpec> in_specs,
           std::span<const PartitionSpec> out_specs, std::span<const AbstractValue> out_types);

  std::vector<Array> run(std::span<const Array> args) const;
  // As run(args), with donated arguments (Executable::run with `donated`, on each device's
  // blocks on a mesh).
  std::vector<Array> run(std::vector<Array> args, const std::vector<bool>& donated) const;
  // The program each device runs, after the passes.
  const Program& program() const { return executable_->program(); }
  // Runs on the devices of a mesh rather than on the calling thread.
  bool on_mesh() const { return launchable_.on_mesh(); }
  // sp::explain's account of the collectives the partitioner inserted without an annotation
  // asking for them; run() applies config::implicit_resharding to it when it is not empty.
  void set_implicit_resharding(std::string account) { implicit_resharding_ = std::move(account); }
  // How operand i arrives on a mesh: its spec's sharding, or the layout it is held in.
  const std::shared_ptr<const Sharding>& in_sharding(size_t i) const {
    return launchable_.in_shardings.at(i);
  }
  // Operand i arrives laid out by `sharding` over the mesh's devices (its blocks where they are)
  // rather than by its spec.
  void hold_argument(size_t i, std::shared_ptr<const Sharding> sharding) {
    launchable_.in_shardings.at(i) = std::move(sharding);
  }

 private:
  // Raises or warns (once) as config::implicit_resharding says, if the program reshards.
  void check_resharding() const;

  std::shared_ptr<const Executable> executable_;
  runtime::Launchable launchable_;
  std::string implicit_resharding_;
  mutable std::atomic<bool> warned_{false};
};

// The Compiled of `program` on the default device, built once per program content: equal
// programs built separately share one. Cached (LRU, config::compile_cache_size entries): hold
// the pointer while running it, as the cache may drop it meanwhile.
std::shared_ptr<const Compiled> compile_program(const ProgramRef& program);
// The Compiled of a per-device program over a mesh (a shard_map or pmap body), built once per
// body content, mesh and specs; cached as compile_program's.
std::shared_ptr<const Compiled> compile_manual(const ProgramRef& body, const Mesh& mesh,
                                               const std::vector<PartitionSpec>& in_specs,
                                               const std::vector<PartitionSpec>& out_specs,
                                               std::span<const AbstractValue> out_types);
// The Compiled of one application of `p` to operands of the types of `inputs` (an eager op),
// built once per primitive, params and types. Raises the shape rule's errors for bad operands.
std::shared_ptr<const Compiled> compile_primitive(const Primitive& p, const Params& params,
                                                  std::span<const Array> inputs);

// The results of a call on a mesh get the shardings JAX gives them (pxla's
// maybe_recover_user_shardings), which decide the spec they print. result_model is the sharding
// of a call's results laid out like its first argument: the argument's `in_shardings` entry, else
// its own sharding when committed, when the results' types carry a mesh (a committed argument or
// a mesh in context); null otherwise. Read it before the call: donation deletes arguments.
std::shared_ptr<const Sharding> result_model(
    std::span<const Array> args, std::span<const std::shared_ptr<const Sharding>> in_shardings);
// A result `out_shardings` names keeps that sharding as given ("P('a', None)"), its blocks
// copied to it when the program's mesh could not lay them out so (an out_sharding on another
// mesh over the same devices); one laid out as
// `model` with `model_ndim` dims takes `model`; the others keep the spec read back from the
// program, without trailing Nones ("P('a',)").
void recover_user_shardings(std::vector<Array>& results,
                            const std::shared_ptr<const Sharding>& model, int model_ndim,
                            std::span<const std::shared_ptr<const Sharding>> out_shardings);

// Whether any of the arrays is committed (placed on devices by device_put or a computation).
bool any_committed(std::span<const Array> inputs);
// One application of `p` to operands of which some are committed: partitioned over their devices
// (compile/partition.h), the result committed with the sharding propagation chose.
std::vector<Array> run_partitioned_primitive(const Primitive& p, const Params& params,
                                             std::span<const Array> inputs);

}  // namespace spmd

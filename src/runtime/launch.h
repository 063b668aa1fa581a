// The context of one device's share of a launch: while a per-device program (a shard_map or
// pmap body) runs on a device thread, collectives find here the mesh axes, this device's place
// on them and the launch's Communicator.
#pragma once

#include "runtime/communicator.h"

#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <vector>

namespace spmd::runtime {

// A collective's group over the named axes (major to minor): the ranks whose coordinates on
// every other mesh axis equal this device's, ordered by their linear index over `names`
// (for (a, b): idx_a · size_b + idx_b), and this device's position in it.
struct Group {
  std::vector<int> ranks;
  int me = 0;
};

struct LaunchContext {
  std::vector<std::string> axis_names;  // mesh axes, major to minor
  std::vector<int64_t> axis_sizes;
  Communicator* comm = nullptr;
  int rank = 0;  // this device's row-major position in the mesh (its Communicator rank)
  int device_id = 0;

  // The coordinate of this device along mesh axis `axis` (an index into axis_names).
  int64_t coord(int axis) const;
  // The mesh axis index of `name`, or -1.
  int axis_of(const std::string& name) const;

  // A group this rank's collectives met before: the axis names, the axis_index_groups (when
  // given), and the group they gave. A chain of collectives in one program finds its group here
  // instead of computing it again (see collectives' participants()). Only the rank's own thread
  // uses them; a list, so that a group found stays where it is when another is added (and an
  // empty one allocates nothing: every launch makes a context per rank).
  struct KnownGroup {
    std::vector<std::string> names;
    std::optional<std::vector<std::vector<int>>> subgroups;
    Group group;
  };
  mutable std::list<KnownGroup> known_groups;
};

Group group_over(const LaunchContext& ctx, const std::vector<std::string>& names);

// The launch the calling thread runs in, or null on a thread outside any launch.
const LaunchContext* current_launch();

// Installs `ctx` as the calling thread's launch for the scope's lifetime.
class LaunchScope {
 public:
  explicit LaunchScope(const LaunchContext* ctx);
  ~LaunchScope();
  LaunchScope(const LaunchScope&) = delete;
  LaunchScope& operator=(const LaunchScope&) = delete;

 private:
  const LaunchContext* saved_;
};

}  // namespace spmd::runtime

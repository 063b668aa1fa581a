// Test-only fault injection: makes device k throw, or stall, at the start of its share of a
// launch or on entry to a collective, so tests can show that a device's failure reaches the
// caller, that nothing hangs and that the devices work afterwards. Faults are armed by inject()
// or by the environment variable SPMD_FAULT (read at the first check); while none is armed, a
// check costs one relaxed atomic load.
#pragma once

#include <spmd/error.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace spmd::runtime::fault {

enum class Where { launch, collective };
enum class Action { throw_, stall };

struct Fault {
  int device = 0;  // device id
  Where where = Where::launch;
  // For Where::collective: the collective's name as its errors give it ("psum", "all_gather",
  // "psum_scatter", "ppermute", ...); empty for any collective.
  std::string collective = {};
  Action action = Action::throw_;
  // The longest a stall lasts. It ends earlier when the others have given up on the device
  // (a collective it delays has failed, or another device of its launch failed) or at clear().
  std::chrono::milliseconds stall{30000};
  int count = 1;  // times the fault fires before it disarms itself
};

// What a thrown fault raises: "[fault] injected failure on device 3 in psum".
class InjectedFault : public RuntimeError {
  using RuntimeError::RuntimeError;
};

void inject(Fault fault);
// Disarms every fault and ends the stalls in progress.
void clear();

// SPMD_FAULT's syntax: faults separated by ';', each a comma-separated list of key=value with
// device=<id> (required), at=launch|collective|<collective name> (default launch; collective
// means any), action=throw|stall (default throw), stall_ms=<n> and count=<n> (positive).
// Throws ValueError naming the first part it does not accept.
std::vector<Fault> parse(std::string_view spec);
// Arms the faults SPMD_FAULT lists. The first check does this once; tests that set the
// variable later call it themselves.
void inject_from_environment();

// ---- hooks (the executor and the Communicator) ------------------------------------------------

namespace detail {
extern std::atomic<bool> g_armed;  // true until the first check has read SPMD_FAULT
}  // namespace detail

// Whether a check may fire; false makes a hook cost nothing more.
inline bool armed() {
  return detail::g_armed.load(std::memory_order_relaxed);
}
// Fires the first armed fault for `device` at `where` (`api`: the collective's name): a throw
// fault throws InjectedFault here; a stall fault returns how long the stall may last, for the
// caller to pass to stall() once it has set up what ends it early.
std::optional<std::chrono::milliseconds> check(Where where, int device, std::string_view api);
// Sleeps on a condition variable until `bound` has passed, clear() is called, or `given_up()`
// holds (checked at the start and at every wake_stalls(); it must only read atomics).
void stall(std::chrono::milliseconds bound, const std::function<bool()>& given_up);
// Re-checks the given_up() of the stalls in progress: called when a collective or a device fails.
void wake_stalls();

}  // namespace spmd::runtime::fault

// Device worker threads. Every device has one thread that runs the device's share of each
// launch in launch order; a launch runs a function on several devices in parallel and reports
// completion through a shared future (a device's error is rethrown to whoever waits).
#pragma once

#include <functional>
#include <future>
#include <memory>
#include <span>
#include <vector>

namespace spmd::runtime {

class Communicator;

// Runs fn(rank) on the thread of device `device_ids[rank]` for every rank. Returns at once,
// except when this process holds exactly one of several devices and that device is idle: then
// its rank runs on the calling thread (as that device, current_device_id() included) and the
// launch returns when it has finished, its error in the future as for any launch; `ran_here`,
// when given, is set to whether that happened (nothing of the launch, `comm` included, is then
// held by any other thread).
// Launches run on every device in the order launch() is called, so a launch that reads an
// earlier launch's results on the same device sees them. When fn throws on a rank, `comm`
// (the launch's Communicator, if any) is aborted for that rank, so the ranks waiting for it in a
// collective fail at once instead of at the timeout. The future rethrows the first error by rank
// that is a device's own: a PeerFailure (a collective left waiting by that failure) only when
// every error is one.
std::shared_future<void> launch(std::span<const int> device_ids, std::function<void(int)> fn,
                                std::shared_ptr<Communicator> comm = nullptr,
                                bool* ran_here = nullptr);

// The ranks of `device_ids` whose devices are this process's, in rank order, after checking that
// every id is a device's.
std::vector<int> local_ranks_of(std::span<const int> device_ids);

// As launch() above, with local_ranks_of(device_ids) given: a caller that launches on the same
// devices again works them out once.
std::shared_future<void> launch(std::span<const int> device_ids, std::span<const int> local_ranks,
                                std::function<void(int)> fn, std::shared_ptr<Communicator> comm,
                                bool* ran_here);

// Waits until every launch the calling thread has made has finished on this process's devices
// and let go of what it held (its function and Communicator). Not from a device thread.
void wait_for_launches();

// The id of the device whose worker thread is calling, or -1 on any other thread.
int current_device_id();

}  // namespace spmd::runtime

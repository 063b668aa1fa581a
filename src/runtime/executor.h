// Device worker threads. Every device has one thread that runs the device's share of each
// launch in launch order; a launch runs a function on several devices in parallel and reports
// completion through a shared future (the first exception, by rank, is rethrown to whoever waits).
#pragma once

#include <functional>
#include <future>
#include <span>

namespace spmd::runtime {

// Runs fn(rank) on the thread of device `device_ids[rank]` for every rank. Returns at once.
// Launches are queued on every device in the order launch() is called, so a launch that reads
// an earlier launch's results on the same device sees them.
std::shared_future<void> launch(std::span<const int> device_ids, std::function<void(int)> fn);

// The id of the device whose worker thread is calling, or -1 on any other thread.
int current_device_id();

}  // namespace spmd::runtime

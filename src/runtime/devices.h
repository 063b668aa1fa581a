// The device table's job-wide side, for the runtime and sp::distributed: which process owns a
// device, and how distributed::initialize fixes the table for a job of several processes.
#pragma once

#include <vector>

namespace spmd::runtime {

// Whether the devices have been used (the table is fixed).
bool devices_in_use();
// The number of devices this process will have (set_cpu_device_count or SPMD_CPU_DEVICES).
int requested_local_devices();
// Fixes the table for a job: this process's index and every process's device count; device ids
// run process by process (process p's first id is the sum of the counts before it).
void set_job(int process, const std::vector<int>& counts);
// The process that owns device `id`, and whether it is this one.
int process_of_device(int id);
bool is_local_device(int id);

}  // namespace spmd::runtime

// Scoped changes of process-wide settings for tests: the previous value comes back on exit, so
// a failing assertion cannot leak x64 mode or a thread count into later tests.
#pragma once

#include <spmd/config.h>

namespace spmd_test {

struct X64Scope {
  explicit X64Scope(bool on = true) : was(spmd::config::x64_enabled()) {
    spmd::config::enable_x64(on);
  }
  ~X64Scope() { spmd::config::enable_x64(was); }
  X64Scope(const X64Scope&) = delete;
  X64Scope& operator=(const X64Scope&) = delete;
  bool was;
};

struct ThreadsScope {
  explicit ThreadsScope(int n) : was(spmd::config::num_threads()) {
    spmd::config::set_num_threads(n);
  }
  ~ThreadsScope() { spmd::config::set_num_threads(was); }
  ThreadsScope(const ThreadsScope&) = delete;
  ThreadsScope& operator=(const ThreadsScope&) = delete;
  int was;
};

}  // namespace spmd_test

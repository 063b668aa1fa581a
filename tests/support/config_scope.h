// Scoped changes of process-wide settings for tests: the previous value comes back on exit, so
// a failing assertion cannot leak x64 mode or a thread count into later tests.
#pragma once

#include <spmd/config.h>

#include <cstdlib>
#include <optional>
#include <string>

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

struct ImplicitReshardingScope {
  explicit ImplicitReshardingScope(spmd::config::ImplicitResharding mode)
      : was(spmd::config::implicit_resharding()) {
    spmd::config::set_implicit_resharding(mode);
  }
  ~ImplicitReshardingScope() { spmd::config::set_implicit_resharding(was); }
  ImplicitReshardingScope(const ImplicitReshardingScope&) = delete;
  ImplicitReshardingScope& operator=(const ImplicitReshardingScope&) = delete;
  spmd::config::ImplicitResharding was;
};

// An environment variable the compile reads (SPMD_COMBINE_COLLECTIVES) set for the scope, from
// empty compile caches, so that programs compiled inside see it; on exit it is put back as it was
// and the caches are emptied again.
struct CompileEnvScope {
  CompileEnvScope(const char* name, const char* value) : name(name) {
    if (const char* old = std::getenv(name)) was = old;
    setenv(name, value, 1);
    spmd::clear_caches();
  }
  ~CompileEnvScope() {
    if (was)
      setenv(name, was->c_str(), 1);
    else
      unsetenv(name);
    spmd::clear_caches();
  }
  CompileEnvScope(const CompileEnvScope&) = delete;
  CompileEnvScope& operator=(const CompileEnvScope&) = delete;
  const char* name;
  std::optional<std::string> was;
};

}  // namespace spmd_test

// Integer settings read from the environment (SPMD_CPU_DEVICES, SPMD_NUM_THREADS, the collective
// timeouts). Parsed strictly, so a typo raises instead of quietly becoming the default or a
// huge number.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

namespace spmd {

// `text` as an integer from `lo` to `hi`: the whole text one decimal integer (an optional sign
// and digits), with whitespace around it at most. Anything else throws ValueError
// "[NAME] expected an integer from lo to hi, got 'text'".
int64_t parse_env_int(std::string_view name, std::string_view text, int64_t lo, int64_t hi);

// The environment variable `name` read with parse_env_int; nullopt when it is not set.
std::optional<int64_t> env_int(const char* name, int64_t lo, int64_t hi);

// env_int for a setting read on every launch (getenv scans the whole environment, a hundred-odd
// variables under mpirun): the value read last, while the environment has not changed since,
// else read again. The environment counts as unchanged while its array, its length, its last
// entry and the variable's own entry are the same pointers: setenv, unsetenv and putenv of a new
// string each change one of them (setenv stores a new string for a new value). A string given to
// putenv and then changed in place is not seen. A malformed value is not kept: every get()
// raises. What it read is kept until it is destroyed (a reader may still look at an older
// reading), one reading per change of the environment seen.
class CachedEnvInt {
 public:
  CachedEnvInt(const char* name, int64_t lo, int64_t hi);
  ~CachedEnvInt();
  CachedEnvInt(const CachedEnvInt&) = delete;
  CachedEnvInt& operator=(const CachedEnvInt&) = delete;
  std::optional<int64_t> get() const;

 private:
  struct Reading;
  const char* name_;
  int64_t lo_, hi_;
  mutable std::atomic<const Reading*> last_{nullptr};
  mutable std::mutex mu_;  // guards readings_
  mutable std::vector<std::unique_ptr<const Reading>> readings_;
};

}  // namespace spmd

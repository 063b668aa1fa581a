// Strict parsing of integer environment variables (env.h).
#include "core/env.h"

#include <spmd/error.h>

#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string>

namespace spmd {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// The integer that is the whole of `s`, or nullopt (empty, other characters, out of int64).
std::optional<int64_t> whole_integer(std::string_view s) {
  // from_chars takes a minus sign but not a plus sign.
  if (s.size() > 1 && s.front() == '+' && s[1] != '-') s.remove_prefix(1);
  int64_t value = 0;
  auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || error != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return value;
}

}  // namespace

int64_t parse_env_int(std::string_view name, std::string_view text, int64_t lo, int64_t hi) {
  std::optional<int64_t> value = whole_integer(trimmed(text));
  if (!value || *value < lo || *value > hi)
    throw ValueError("[" + std::string(name) + "] expected an integer from " + std::to_string(lo) +
                     " to " + std::to_string(hi) + ", got '" + std::string(text) + "'");
  return *value;
}

std::optional<int64_t> env_int(const char* name, int64_t lo, int64_t hi) {
  const char* text = std::getenv(name);
  if (!text) return std::nullopt;
  return parse_env_int(name, text, lo, hi);
}

// What the environment was when a CachedEnvInt read it.
struct CachedEnvInt::Reading {
  char** array = nullptr;       // `environ`
  size_t count = 0;             // its entries
  const char* last = nullptr;   // its last entry
  const char* entry = nullptr;  // the variable's "NAME=value", or null when unset
  size_t index = 0;             // where `entry` is
  std::optional<int64_t> value;

  bool unchanged() const {
    char** env = environ;
    return env != nullptr && env == array && env[count] == nullptr &&
           (count == 0 || env[count - 1] == last) && (!entry || env[index] == entry);
  }
};

CachedEnvInt::CachedEnvInt(const char* name, int64_t lo, int64_t hi)
    : name_(name), lo_(lo), hi_(hi) {}

CachedEnvInt::~CachedEnvInt() = default;

std::optional<int64_t> CachedEnvInt::get() const {
  if (const Reading* r = last_.load(std::memory_order_acquire); r && r->unchanged())
    return r->value;
  auto made = std::make_unique<Reading>();
  made->array = environ;
  const size_t len = std::strlen(name_);
  for (char** e = made->array; e && *e; ++e, ++made->count) {
    made->last = *e;
    if (!made->entry && std::strncmp(*e, name_, len) == 0 && (*e)[len] == '=') {
      made->entry = *e;
      made->index = made->count;
    }
  }
  if (made->entry) made->value = parse_env_int(name_, made->entry + len + 1, lo_, hi_);
  const std::optional<int64_t> value = made->value;
  std::lock_guard lock(mu_);
  last_.store(made.get(), std::memory_order_release);
  readings_.push_back(std::move(made));
  return value;
}

}  // namespace spmd

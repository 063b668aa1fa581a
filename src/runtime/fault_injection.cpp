// The armed faults, one lock and one condition variable for the stalls. Never destroyed: a
// device thread may still check or stall while the process exits.
#include "runtime/fault_injection.h"

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <mutex>

namespace spmd::runtime::fault {

std::atomic<bool> detail::g_armed{true};

namespace {

// The names the collectives give the Communicator (their errors start with them), which
// SPMD_FAULT's `at` accepts; a misspelt name would otherwise never fire.
constexpr std::string_view kCollectives[] = {
    "psum", "pmax", "pmin", "all_gather", "psum_scatter", "all_to_all", "ppermute", "pbroadcast"};

struct Registry {
  std::mutex mu;
  std::condition_variable cv;  // stalls sleep on it
  std::vector<Fault> faults;
  uint64_t clears = 0;  // a stall ends when clear() changes this
  bool environment_read = false;
  std::string environment_error;  // a malformed SPMD_FAULT fails every check

  void update_armed() {
    detail::g_armed.store(!faults.empty() || !environment_error.empty(), std::memory_order_relaxed);
  }
  // Under mu.
  void read_environment_once() {
    if (environment_read) return;
    environment_read = true;
    if (const char* spec = std::getenv("SPMD_FAULT")) arm(spec);
    update_armed();  // false from here on unless a fault is armed
  }
  void arm(std::string_view spec) {
    try {
      for (Fault& f : parse(spec)) faults.push_back(std::move(f));
    } catch (const ValueError& e) {
      environment_error = e.what();
    }
  }
};

Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

bool matches(const Fault& f, Where where, int device, std::string_view api) {
  if (f.device != device || f.where != where) return false;
  return where == Where::launch || f.collective.empty() || f.collective == api;
}

std::string failure_message(Where where, int device, std::string_view api) {
  std::string place =
      where == Where::launch ? "at the start of a launch" : std::string("in ").append(api);
  return "[fault] injected failure on device " + std::to_string(device) + " " + place;
}

// 'text' (built by appending: GCC 12 warns falsely on "'" + std::string).
std::string quoted(std::string_view text) {
  return std::string("'").append(text).append("'");
}

[[noreturn]] void reject(std::string_view spec, const std::string& what) {
  throw ValueError("[SPMD_FAULT] " + what + " in '" + std::string(spec) +
                   "'; expected faults separated by ';', each as "
                   "device=<id>[,at=launch|collective|<collective>][,action=throw|stall]"
                   "[,stall_ms=<n>][,count=<n>]");
}

int parse_int(std::string_view spec, std::string_view key, std::string_view value, int min) {
  int v = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size() || v < min)
    reject(spec, std::string(key) + "=" + std::string(value) + " is not an integer of at least " +
                     std::to_string(min));
  return v;
}

void parse_at(std::string_view spec, std::string_view value, Fault& f) {
  if (value == "launch") {
    f.where = Where::launch;
    return;
  }
  f.where = Where::collective;
  if (value == "collective") return;
  if (std::find(std::begin(kCollectives), std::end(kCollectives), value) == std::end(kCollectives))
    reject(spec, std::string("at=").append(value) + " names no collective");
  f.collective = value;
}

void parse_field(std::string_view spec, std::string_view key, std::string_view value, Fault& f) {
  if (key == "device")
    f.device = parse_int(spec, key, value, 0);
  else if (key == "at")
    parse_at(spec, value, f);
  else if (key == "action" && (value == "throw" || value == "stall"))
    f.action = value == "throw" ? Action::throw_ : Action::stall;
  else if (key == "action")
    reject(spec, std::string("action=").append(value) + " is neither throw nor stall");
  else if (key == "stall_ms")
    f.stall = std::chrono::milliseconds(parse_int(spec, key, value, 1));
  else if (key == "count")
    f.count = parse_int(spec, key, value, 1);
  else
    reject(spec, "unknown key " + quoted(key));
}

// One fault: comma-separated key=value, each key at most once, device required.
Fault parse_fault(std::string_view spec, std::string_view text) {
  Fault f;
  std::vector<std::string_view> seen;
  for (size_t begin = 0; begin <= text.size();) {
    size_t end = std::min(text.find(',', begin), text.size());
    std::string_view field = text.substr(begin, end - begin);
    size_t eq = field.find('=');
    if (eq == std::string_view::npos) reject(spec, quoted(field) + " is no key=value");
    std::string_view key = field.substr(0, eq);
    if (std::find(seen.begin(), seen.end(), key) != seen.end())
      reject(spec, quoted(key) + " is given twice");
    seen.push_back(key);
    parse_field(spec, key, field.substr(eq + 1), f);
    begin = end + 1;
  }
  if (std::find(seen.begin(), seen.end(), "device") == seen.end()) reject(spec, "no device");
  return f;
}

}  // namespace

void inject(Fault fault) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  r.read_environment_once();
  r.faults.push_back(std::move(fault));
  r.update_armed();
}

void clear() {
  Registry& r = registry();
  {
    std::lock_guard lock(r.mu);
    r.read_environment_once();
    r.faults.clear();
    ++r.clears;
    r.update_armed();
  }
  r.cv.notify_all();
}

std::vector<Fault> parse(std::string_view spec) {
  std::vector<Fault> faults;
  for (size_t begin = 0; begin <= spec.size();) {
    size_t end = std::min(spec.find(';', begin), spec.size());
    faults.push_back(parse_fault(spec, spec.substr(begin, end - begin)));
    begin = end + 1;
  }
  return faults;
}

void inject_from_environment() {
  const char* spec = std::getenv("SPMD_FAULT");
  if (!spec) return;
  for (Fault& f : parse(spec)) inject(std::move(f));
}

std::optional<std::chrono::milliseconds> check(Where where, int device, std::string_view api) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  r.read_environment_once();
  if (!r.environment_error.empty()) throw ValueError(r.environment_error);
  auto it = std::find_if(r.faults.begin(), r.faults.end(),
                         [&](const Fault& f) { return matches(f, where, device, api); });
  if (it == r.faults.end()) return std::nullopt;
  const Fault fired = *it;
  if (--it->count == 0) r.faults.erase(it);
  r.update_armed();
  if (fired.action == Action::stall) return fired.stall;
  throw InjectedFault(failure_message(where, device, api));
}

void stall(std::chrono::milliseconds bound, const std::function<bool()>& given_up) {
  Registry& r = registry();
  std::unique_lock lock(r.mu);
  const uint64_t clears = r.clears;
  r.cv.wait_for(lock, bound, [&] { return r.clears != clears || given_up(); });
}

void wake_stalls() {
  Registry& r = registry();
  // Taking the lock orders this after any given_up() check in progress, so that stall is
  // already waiting and gets the notification.
  { std::lock_guard lock(r.mu); }
  r.cv.notify_all();
}

}  // namespace spmd::runtime::fault

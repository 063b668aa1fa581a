// Faults injected on one device of 8 (runtime/fault_injection.h): a device that throws at the
// start of a shard_map, pmap or jit launch or inside a collective gives the caller its own error
// at once; a device that stalls in front of a collective makes every other member raise a
// CollectiveError naming it after the timeout; nothing hangs, and the next launch on the same
// devices gives the right values.
#include "runtime/fault_injection.h"
#include "runtime/communicator.h"
#include "runtime/executor.h"

#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "support/golden.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

namespace sp = spmd;
namespace rt = spmd::runtime;
namespace fault = spmd::runtime::fault;
using sp::Array;
using sp::P;
using spmd_test::error_message;
using namespace std::chrono_literals;

namespace {

constexpr int kDevices = 8;
constexpr int kFaulty = 3;  // the device the faults are injected on

std::vector<int> all_devices() {
  std::vector<int> ids(kDevices);
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

std::string injected(const std::string& where) {
  return "[fault] injected failure on device " + std::to_string(kFaulty) + " " + where;
}

// The device ids a collective's error says it was waiting for ("... waiting for devices [3, 5];").
std::vector<int> waited_for(const std::string& message) {
  const std::string head = "waiting for devices [";
  const size_t at = message.find(head);
  if (at == std::string::npos) return {};
  const size_t begin = at + head.size();
  std::istringstream list(message.substr(begin, message.find(']', begin) - begin));
  std::vector<int> ids;
  for (std::string id; std::getline(list, id, ',');) ids.push_back(std::stoi(id));
  return ids;
}

bool contains(const std::vector<int>& ids, int id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// A collective's timeout naming `missing` among the devices it waited for. Which others are
// listed depends on whether every other member had arrived by then (they normally have).
void expect_timed_out_waiting_for(const std::string& message, const std::string& api,
                                  const std::vector<int>& missing) {
  EXPECT_EQ(message.rfind("[" + api + "] timed out after 200 ms waiting for devices [", 0), 0u)
      << message;
  for (int id : missing) EXPECT_TRUE(contains(waited_for(message), id)) << message;
}

// The collective timeout of a launch that no stalled device holds up: long enough that a
// loaded machine (ThreadSanitizer, other jobs) never reaches it, so such a launch fails only by
// the fault it is given.
constexpr const char* kUnstalledTimeoutMs = "60000";

// Every test leaves no fault armed, and collectives of shard_map give up after 60 s, or after
// 200 ms where stalled_error() runs them.
class FaultInjection : public ::testing::Test {
 protected:
  void SetUp() override {
    fault::clear();
    if (const char* t = std::getenv("SPMD_COLLECTIVE_TIMEOUT_MS")) saved_timeout_ = t;
    setenv("SPMD_COLLECTIVE_TIMEOUT_MS", kUnstalledTimeoutMs, 1);
  }
  void TearDown() override {
    fault::clear();
    if (saved_timeout_.empty())
      unsetenv("SPMD_COLLECTIVE_TIMEOUT_MS");
    else
      setenv("SPMD_COLLECTIVE_TIMEOUT_MS", saved_timeout_.c_str(), 1);
  }

 private:
  std::string saved_timeout_;
};

// The CollectiveError of `launch`, whose collective waits for a stalled device, with collectives
// giving up after 200 ms: the stall, not the load, decides that they time out.
std::string stalled_error(const std::function<void()>& launch) {
  setenv("SPMD_COLLECTIVE_TIMEOUT_MS", "200", 1);
  std::string message = error_message<sp::CollectiveError>(launch);
  setenv("SPMD_COLLECTIVE_TIMEOUT_MS", kUnstalledTimeoutMs, 1);
  return message;
}

fault::Fault collective_fault(const std::string& api, fault::Action action) {
  return {
      .device = kFaulty, .where = fault::Where::collective, .collective = api, .action = action};
}

// ---- the runtime: every member's error --------------------------------------------------------

// What each rank of one launch raised ("" if nothing, or if it failed before `body` ran) and the
// error the launch reported to its caller.
struct Outcome {
  std::vector<std::string> ranks = std::vector<std::string>(kDevices);
  std::string reported;
};

Outcome run_launch(std::chrono::milliseconds timeout,
                   const std::function<void(rt::Communicator&, int)>& body) {
  auto comm = std::make_shared<rt::Communicator>(all_devices(), timeout);
  Outcome out;
  auto done = rt::launch(
      all_devices(),
      [&out, &body, comm](int rank) {
        try {
          body(*comm, rank);
        } catch (const std::exception& e) {
          out.ranks[size_t(rank)] = e.what();
          throw;
        }
      },
      comm);
  try {
    done.get();
  } catch (const std::exception& e) {
    out.reported = e.what();
  }
  return out;
}

// Every entry point of the Communicator, over all 8 devices, under the name the collectives give
// it (and a fault names).
struct EntryPoint {
  std::string api;
  std::function<void(rt::Communicator&, int)> call;
};

std::vector<EntryPoint> entry_points() {
  using sp::DType;
  using sp::Shape;
  static const std::vector<int> all = all_devices();
  auto io = [](auto call) {
    return [call](rt::Communicator& comm, int rank) {
      std::vector<float> in(kDevices, float(rank)), out(kDevices * kDevices);
      call(comm, rank, in.data(), out.data());
    };
  };
  return {
      {"psum", io([](rt::Communicator& c, int r, float* in, float* out) {
         c.all_reduce("psum", all, r, rt::ReduceOp::sum, DType::float32, Shape{8}, in, out);
       })},
      {"pmax", io([](rt::Communicator& c, int r, float* in, float*) {
         c.all_reduce_shared("pmax", all, r, rt::ReduceOp::max, DType::float32, Shape{8}, in);
       })},
      {"all_gather", io([](rt::Communicator& c, int r, float* in, float* out) {
         c.all_gather("all_gather", all, r, DType::float32, Shape{8}, 0, false, in, out);
       })},
      {"pbroadcast", io([](rt::Communicator& c, int r, float* in, float*) {
         c.all_gather_shared("pbroadcast", all, r, DType::float32, Shape{8}, 0, false, in);
       })},
      {"psum_scatter", io([](rt::Communicator& c, int r, float* in, float* out) {
         c.reduce_scatter("psum_scatter", all, r, rt::ReduceOp::sum, DType::float32, Shape{8}, 0,
                          in, out);
       })},
      {"all_to_all", io([](rt::Communicator& c, int r, float* in, float* out) {
         c.all_to_all("all_to_all", all, r, DType::float32, Shape{8}, 0, 0, in, out);
       })},
      {"ppermute", io([](rt::Communicator& c, int r, float* in, float* out) {
         std::vector<std::pair<int, int>> shift;
         for (int i = 0; i < kDevices; ++i) shift.emplace_back(i, (i + 1) % kDevices);
         c.permute("ppermute", all, r, shift, DType::float32, Shape{8}, in, out);
       })},
      {"barrier", [](rt::Communicator& c, int r) { c.barrier("barrier", all, r); }},
  };
}

TEST_F(FaultInjection, AStallInAnyCollectiveFailsEveryMemberNamingTheMissingDevice) {
  for (const EntryPoint& entry : entry_points()) {
    SCOPED_TRACE(entry.api);
    fault::inject(collective_fault(entry.api, fault::Action::stall));
    Outcome out = run_launch(200ms, entry.call);
    // The stalled device arrives once the others have given up, and raises their error too.
    for (int r = 0; r < kDevices; ++r) expect_timed_out_waiting_for(out.ranks[r], entry.api, {3});
    expect_timed_out_waiting_for(out.reported, entry.api, {3});
  }
}

TEST_F(FaultInjection, AThrowInAnyCollectiveReleasesTheOthersAtOnceAndReachesTheCaller) {
  for (const EntryPoint& entry : entry_points()) {
    SCOPED_TRACE(entry.api);
    fault::inject(collective_fault(entry.api, fault::Action::throw_));
    // With a 60 s timeout the others can only have been released by the failure itself.
    Outcome out = run_launch(60s, entry.call);
    const std::string error = injected("in " + entry.api);
    for (int r = 0; r < kDevices; ++r) {
      if (r == kFaulty) continue;
      const std::string& got = out.ranks[size_t(r)];
      EXPECT_EQ(got.rfind("[" + entry.api + "] device 3 failed (" + error + ") while waiting", 0),
                0u)
          << got;
      EXPECT_TRUE(contains(waited_for(got), kFaulty)) << got;
    }
    EXPECT_EQ(out.ranks[kFaulty], error);
    // Rank 0 failed too, but the caller gets the failure that caused it.
    EXPECT_EQ(out.reported, error);
  }
}

TEST_F(FaultInjection, AThrowAtTheStartOfALaunchReleasesTheOthersAtOnce) {
  fault::inject({.device = kFaulty, .where = fault::Where::launch});
  Outcome out = run_launch(60s, entry_points()[0].call);
  const std::string error = injected("at the start of a launch");
  for (int r = 0; r < kDevices; ++r) {
    if (r == kFaulty) continue;
    EXPECT_EQ(out.ranks[size_t(r)].rfind("[psum] device 3 failed (" + error + ")", 0), 0u)
        << out.ranks[size_t(r)];
  }
  EXPECT_EQ(out.reported, error);
}

TEST_F(FaultInjection, AStallAtTheStartOfALaunchTimesOutItsFirstCollective) {
  fault::inject({.device = kFaulty, .where = fault::Where::launch, .action = fault::Action::stall});
  Outcome out = run_launch(200ms, entry_points()[0].call);
  for (int r = 0; r < kDevices; ++r) expect_timed_out_waiting_for(out.ranks[r], "psum", {3});
  expect_timed_out_waiting_for(out.reported, "psum", {3});
}

TEST_F(FaultInjection, TheDevicesWorkAfterAFault) {
  fault::inject(collective_fault("psum", fault::Action::stall));
  EXPECT_FALSE(run_launch(200ms, entry_points()[0].call).reported.empty());
  std::vector<std::vector<float>> sums(kDevices, std::vector<float>(2));
  Outcome out = run_launch(60s, [&](rt::Communicator& comm, int rank) {
    std::vector<float> in = {float(rank), 1};
    comm.all_reduce("psum", all_devices(), rank, rt::ReduceOp::sum, sp::DType::float32,
                    sp::Shape{2}, in.data(), sums[size_t(rank)].data());
  });
  EXPECT_EQ(out.reported, "");
  for (const auto& s : sums) EXPECT_EQ(s, (std::vector<float>{28, 8}));
}

// ---- shard_map, pmap and jit: the caller's error, then the right values ------------------------

// x = arange(64) split over the 8 devices of mesh axis "x".
Array input() {
  return sp::arange(64.0f);
}

sp::Mesh mesh8() {
  return sp::make_mesh({kDevices}, {"x"});
}

// The global result of a body whose every block of 8 is `block(device, i)`.
std::vector<float> blocks_of(const std::function<float(int, int)>& block, int per_device = 8) {
  std::vector<float> out;
  for (int d = 0; d < kDevices; ++d)
    for (int i = 0; i < per_device; ++i) out.push_back(block(d, i));
  return out;
}

const std::vector<float> kSums = blocks_of([](int, int i) { return float(224 + 8 * i); });

TEST_F(FaultInjection, ADeviceThrowingInAShardMapGivesTheCallerItsError) {
  auto f = sp::shard_map([](const Array& b) { return sp::lax::psum(b, "x"); }, mesh8(), P("x"),
                         P("x"), {.check_vma = false});
  fault::inject({.device = kFaulty, .where = fault::Where::launch});
  EXPECT_EQ(error_message<fault::InjectedFault>([&] { f(input()).block_until_ready(); }),
            injected("at the start of a launch"));
  EXPECT_EQ(f(input()).to_vector<float>(), kSums);
}

TEST_F(FaultInjection, ADeviceThrowingInAPmapGivesTheCallerItsError) {
  auto f = sp::pmap([](const Array& row) { return sp::lax::psum(row, "i"); }, {.axis_name = "i"});
  Array rows = input().reshape({kDevices, 8});
  fault::inject({.device = kFaulty, .where = fault::Where::launch});
  EXPECT_EQ(error_message<fault::InjectedFault>([&] { f(rows).block_until_ready(); }),
            injected("at the start of a launch"));
  EXPECT_EQ(f(rows).reshape({64}).to_vector<float>(), kSums);
}

TEST_F(FaultInjection, ADeviceThrowingInAJitOfAShardMapGivesTheCallerItsError) {
  auto body = sp::shard_map([](const Array& b) { return sp::lax::psum(b, "x") * 2.0f; }, mesh8(),
                            P("x"), P("x"), {.check_vma = false});
  auto f = sp::jit([&](const Array& x) { return body(x + 1.0f); });
  const std::vector<float> want =
      blocks_of([](int, int i) { return float(2 * (224 + 8 * i + 8)); });
  EXPECT_EQ(f(input()).to_vector<float>(), want);  // traced and compiled before the fault
  fault::inject({.device = kFaulty, .where = fault::Where::launch});
  EXPECT_EQ(error_message<fault::InjectedFault>([&] { f(input()).block_until_ready(); }),
            injected("at the start of a launch"));
  EXPECT_EQ(f(input()).to_vector<float>(), want);
}

TEST_F(FaultInjection, AStallAtTheStartOfAShardMapTimesOutItsCollective) {
  auto f = sp::shard_map([](const Array& b) { return sp::lax::psum(b, "x"); }, mesh8(), P("x"),
                         P("x"), {.check_vma = false});
  fault::inject({.device = kFaulty, .where = fault::Where::launch, .action = fault::Action::stall});
  expect_timed_out_waiting_for(stalled_error([&] { f(input()).block_until_ready(); }), "psum",
                               {3});
  EXPECT_EQ(f(input()).to_vector<float>(), kSums);
}

TEST_F(FaultInjection, AStallWithNothingToEndItLastsItsBound) {
  // No collective: nobody gives up on the stalled device, which resumes after 50 ms.
  auto f = sp::shard_map([](const Array& b) { return b * 2.0f; }, mesh8(), P("x"), P("x"));
  fault::inject({.device = kFaulty,
                 .where = fault::Where::launch,
                 .action = fault::Action::stall,
                 .stall = 50ms});
  EXPECT_EQ(f(input()).to_vector<float>(),
            blocks_of([](int d, int i) { return 2.f * (8 * d + i); }));
}

// One collective in a shard_map over the 8 devices, on blocks of arange(64).
struct CollectiveCase {
  std::string name;
  std::string api;  // what the collective calls itself in the Communicator (pmean is a psum)
  std::function<Array(const Array&)> body;
  std::vector<float> want;
};

std::vector<CollectiveCase> collective_cases() {
  namespace lax = sp::lax;
  return {
      {"psum", "psum", [](const Array& b) { return lax::psum(b, "x"); }, kSums},
      {"pmean", "psum", [](const Array& b) { return lax::pmean(b, "x"); },
       blocks_of([](int, int i) { return float(28 + i); })},
      {"pmax", "pmax", [](const Array& b) { return lax::pmax(b, "x"); },
       blocks_of([](int, int i) { return float(56 + i); })},
      {"pmin", "pmin", [](const Array& b) { return lax::pmin(b, "x"); },
       blocks_of([](int, int i) { return float(i); })},
      {"all_gather", "all_gather",
       [](const Array& b) { return lax::all_gather(b, "x", {.tiled = true}); },
       blocks_of([](int, int i) { return float(i); }, 64)},
      {"psum_scatter", "psum_scatter",
       [](const Array& b) { return lax::psum_scatter(b, "x", {.tiled = true}); },
       blocks_of([](int d, int) { return float(224 + 8 * d); }, 1)},
      {"all_to_all", "all_to_all",
       [](const Array& b) { return lax::all_to_all(b, "x", 0, 0, {.tiled = true}); },
       blocks_of([](int d, int j) { return float(8 * j + d); })},
      {"ppermute", "ppermute",
       [](const Array& b) {
         std::vector<std::pair<int, int>> shift;
         for (int i = 0; i < kDevices; ++i) shift.emplace_back(i, (i + 1) % kDevices);
         return lax::ppermute(b, "x", shift);
       },
       blocks_of([](int d, int i) { return float(8 * ((d + kDevices - 1) % kDevices) + i); })},
      {"pshuffle", "ppermute",
       [](const Array& b) {
         return lax::pshuffle(b, "x", {7, 0, 1, 2, 3, 4, 5, 6});
       },
       blocks_of([](int d, int i) { return float(8 * ((d + kDevices - 1) % kDevices) + i); })},
      {"pbroadcast", "pbroadcast", [](const Array& b) { return lax::pbroadcast(b, "x", 2); },
       blocks_of([](int, int i) { return float(16 + i); })},
      {"psum over axis_index_groups", "psum",
       [](const Array& b) {
         return lax::psum(b, "x",
                          {.axis_index_groups = sp::AxisIndexGroups{{0, 1, 2, 3}, {4, 5, 6, 7}}});
       },
       blocks_of([](int d, int i) { return float(d < 4 ? 48 + 4 * i : 176 + 4 * i); })},
  };
}

TEST_F(FaultInjection, EveryCollectiveInAShardMapSurvivesAStallAndAThrow) {
  for (const CollectiveCase& c : collective_cases()) {
    SCOPED_TRACE(c.name);
    auto f = sp::shard_map(c.body, mesh8(), P("x"), P("x"), {.check_vma = false});
    fault::inject(collective_fault(c.api, fault::Action::stall));
    expect_timed_out_waiting_for(stalled_error([&] { f(input()).block_until_ready(); }), c.api,
                                 {3});
    fault::inject(collective_fault(c.api, fault::Action::throw_));
    EXPECT_EQ(error_message<fault::InjectedFault>([&] { f(input()).block_until_ready(); }),
              injected("in " + c.api));
    EXPECT_EQ(f(input()).to_vector<float>(), c.want);
  }
}

TEST_F(FaultInjection, TwoStalledDevicesAreBothNamed) {
  auto f = sp::shard_map([](const Array& b) { return sp::lax::psum(b, "x"); }, mesh8(), P("x"),
                         P("x"), {.check_vma = false});
  for (int device : {3, 5})
    fault::inject({.device = device,
                   .where = fault::Where::collective,
                   .action = fault::Action::stall});  // any collective
  expect_timed_out_waiting_for(stalled_error([&] { f(input()).block_until_ready(); }), "psum",
                               {3, 5});
  EXPECT_EQ(f(input()).to_vector<float>(), kSums);
}

TEST_F(FaultInjection, AFaultFiresCountTimes) {
  auto f = sp::shard_map([](const Array& b) { return sp::lax::psum(b, "x"); }, mesh8(), P("x"),
                         P("x"), {.check_vma = false});
  fault::Fault twice = collective_fault("psum", fault::Action::throw_);
  twice.count = 2;
  EXPECT_FALSE(fault::armed());  // a check costs one load
  fault::inject(twice);
  EXPECT_TRUE(fault::armed());
  for (int k = 0; k < 2; ++k)
    EXPECT_EQ(error_message<fault::InjectedFault>([&] { f(input()).block_until_ready(); }),
              injected("in psum"));
  EXPECT_FALSE(fault::armed());
  EXPECT_EQ(f(input()).to_vector<float>(), kSums);
}

TEST_F(FaultInjection, ArmsTheFaultsOfSpmdFault) {
  setenv("SPMD_FAULT", "device=2,at=all_gather,action=throw", 1);
  fault::inject_from_environment();
  unsetenv("SPMD_FAULT");
  auto f = sp::shard_map([](const Array& b) { return sp::lax::all_gather(b, "x"); }, mesh8(),
                         P("x"), P("x"), {.check_vma = false});
  EXPECT_EQ(error_message<fault::InjectedFault>([&] { f(input()).block_until_ready(); }),
            "[fault] injected failure on device 2 in all_gather");
}

// ---- SPMD_FAULT's syntax ----------------------------------------------------------------------

TEST(FaultInjectionSpec, ParsesEveryKey) {
  std::vector<fault::Fault> faults = fault::parse(
      "device=3,at=psum,action=stall,stall_ms=500,count=2;device=0;device=7,at=collective");
  ASSERT_EQ(faults.size(), 3u);
  EXPECT_EQ(faults[0].device, 3);
  EXPECT_EQ(faults[0].where, fault::Where::collective);
  EXPECT_EQ(faults[0].collective, "psum");
  EXPECT_EQ(faults[0].action, fault::Action::stall);
  EXPECT_EQ(faults[0].stall, 500ms);
  EXPECT_EQ(faults[0].count, 2);
  // The defaults: a throw at the start of a launch, once.
  EXPECT_EQ(faults[1].device, 0);
  EXPECT_EQ(faults[1].where, fault::Where::launch);
  EXPECT_EQ(faults[1].action, fault::Action::throw_);
  EXPECT_EQ(faults[1].count, 1);
  // at=collective: any collective.
  EXPECT_EQ(faults[2].where, fault::Where::collective);
  EXPECT_EQ(faults[2].collective, "");
}

TEST(FaultInjectionSpec, RejectsWhatItDoesNotKnow) {
  const std::string usage =
      "; expected faults separated by ';', each as "
      "device=<id>[,at=launch|collective|<collective>][,action=throw|stall][,stall_ms=<n>][,count="
      "<n>]";
  auto error = [](const std::string& spec) {
    return error_message<sp::ValueError>([&] { fault::parse(spec); });
  };
  EXPECT_EQ(error("device=3,at=psun"),
            "[SPMD_FAULT] at=psun names no collective in 'device=3,at=psun'" + usage);
  EXPECT_EQ(error("at=psum"), "[SPMD_FAULT] no device in 'at=psum'" + usage);
  EXPECT_EQ(error("device=three"),
            "[SPMD_FAULT] device=three is not an integer of at least 0 in 'device=three'" + usage);
  EXPECT_EQ(error("device=3, at=psum"),
            "[SPMD_FAULT] unknown key ' at' in 'device=3, at=psum'" + usage);
  EXPECT_EQ(error("device=3;"), "[SPMD_FAULT] '' is no key=value in 'device=3;'" + usage);
  EXPECT_EQ(error("device=3,device=4"),
            "[SPMD_FAULT] 'device' is given twice in 'device=3,device=4'" + usage);
  EXPECT_EQ(
      error("device=3,action=hang"),
      "[SPMD_FAULT] action=hang is neither throw nor stall in 'device=3,action=hang'" + usage);
  for (const char* spec :
       {"device=-1", "device=3,count=0", "device=3,stall_ms=0", "device=3,stall_ms=5s", ""})
    EXPECT_NE(error(spec), "(no error)") << spec;
}

}  // namespace

// The same programs on several processes: run under `mpirun -np 2` with 4 devices per process
// (ctest does), each process checks the blocks it holds against values computed on the host,
// which are what one process with 8 devices computes. Every process runs the same tests in the
// same order, as a multi-process program must.
#include <spmd/device.h>
#include <spmd/distributed.h>
#include <spmd/parallel.h>
#include <spmd/placement.h>
#include <spmd/shard_map.h>
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace sp = spmd;
using sp::P;

namespace {

// The values of x's blocks this process holds, checked against the same slices of `want` (a NaN
// there wants a NaN).
void expect_local_blocks(const sp::Array& x, const std::vector<float>& want,
                         const sp::Shape& shape) {
  ASSERT_EQ(x.shape(), shape);
  int checked = 0;
  for (const sp::Shard& s : x.addressable_shards()) {
    EXPECT_EQ(s.device.process_index, sp::process_index());
    std::vector<float> got = s.data.astype(sp::float32).to_vector<float>();
    // Row-major walk over the block.
    std::vector<int64_t> idx(s.index.size(), 0);
    for (size_t k = 0; k < got.size(); ++k) {
      int64_t flat = 0;
      for (size_t d = 0; d < idx.size(); ++d)
        flat = flat * shape[int(d)] + s.index[d].start + idx[d];
      const float w = want[size_t(flat)];
      if (std::isnan(w))
        ASSERT_TRUE(std::isnan(got[k])) << "device " << s.device.id << " element " << k;
      else
        ASSERT_EQ(got[k], w) << "device " << s.device.id << " element " << k;
      for (int d = int(idx.size()) - 1; d >= 0; --d) {
        if (++idx[size_t(d)] < s.index[size_t(d)].stop - s.index[size_t(d)].start) break;
        idx[size_t(d)] = 0;
      }
    }
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

std::vector<float> iota(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(i);
  return v;
}

TEST(Processes, DevicesOfEveryProcessWithGlobalIds) {
  ASSERT_EQ(sp::process_count(), 2);
  ASSERT_EQ(sp::device_count(), 8);
  ASSERT_EQ(sp::local_device_count(), 4);
  std::vector<sp::Device> all = sp::devices();
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(all[size_t(i)].id, i);
    EXPECT_EQ(all[size_t(i)].process_index, i / 4);
  }
  for (const sp::Device& d : sp::local_devices()) EXPECT_EQ(d.process_index, sp::process_index());
}

TEST(Processes, PsumOverAMeshThatSpansProcesses) {
  sp::Mesh mesh = sp::make_mesh({8}, {"i"});
  sp::Array x = sp::device_put(sp::arange(16).astype(sp::float32).reshape({8, 2}),
                               sp::NamedSharding(mesh, P("i")));
  sp::Array y =
      sp::shard_map([](sp::Array b) { return sp::lax::psum(b, "i"); }, mesh, P("i"), P("i"))(x);
  // Every block is the sum of the 8 blocks: [56, 64].
  std::vector<float> want;
  for (int i = 0; i < 8; ++i) want.insert(want.end(), {56.f, 64.f});
  expect_local_blocks(y, want, sp::Shape({8, 2}));
}

TEST(Processes, LaunchesOnOneDevicePerProcessKeepEachDevicesOrder) {
  // A launch over one device per process runs that device's share on the launching thread when
  // the device is idle, else behind the work queued on it. Launches over all 8 devices (left
  // running on devices 0 and 4) alternate with launches over devices 0 and 4 alone, whose psum
  // has the same pair of devices and so the same MPI communicator, with blocks of the same size:
  // a launch that ran beside the queued one instead of after it would exchange with the wrong
  // psum. Each result feeds the next launch of its mesh; small integers keep every sum exact.
  const std::vector<sp::Device> all = sp::devices();
  sp::Mesh wide = sp::make_mesh({2, 4}, {"a", "b"});
  sp::Mesh pair(std::vector<sp::Device>{all[0], all[4]}, {2}, {"a"});
  const int64_t n = 16;
  auto psum_a = [](sp::Array b) { return sp::lax::psum(b, "a"); };
  auto wide_step = sp::jit(sp::shard_map(psum_a, wide, P("a", "b"), P("a", "b")));
  auto pair_step = sp::jit(sp::shard_map(psum_a, pair, P("a"), P("a")));
  std::vector<float> xs(size_t(8 * n)), ws(size_t(2 * n));
  for (size_t k = 0; k < xs.size(); ++k) xs[k] = float(k % 7) - 3.f;
  for (size_t k = 0; k < ws.size(); ++k) ws[k] = float(k % 5) + 1.f;
  sp::Array x = sp::device_put(sp::array(xs, {2, 4, n}), sp::NamedSharding(wide, P("a", "b")));
  sp::Array w = sp::device_put(sp::array(ws, {2, n}), sp::NamedSharding(pair, P("a")));
  for (int round = 0; round < 10; ++round) {
    x = wide_step(x);
    w = pair_step(w);
    // Both rows become the sum of the two.
    for (int64_t j = 0; j < 4 * n; ++j) xs[size_t(j)] = xs[size_t(4 * n + j)] += xs[size_t(j)];
    for (int64_t j = 0; j < n; ++j) ws[size_t(j)] = ws[size_t(n + j)] += ws[size_t(j)];
  }
  expect_local_blocks(x, xs, sp::Shape({2, 4, n}));
  expect_local_blocks(w, ws, sp::Shape({2, n}));
}

TEST(Processes, LaunchesOnTheCallingThreadKeepEveryResultOnItsDevice) {
  // A launch of which this process holds one device runs on the calling thread as that device,
  // and keeps its Communicator (with the buffer its small reductions gather into) for its next
  // launch. Programs over two pairs of devices, {0, 4} and {1, 5}, in three dtypes and three
  // sizes (gathered whole, gathered in pieces of 2 KiB with a shorter last one, and halved above
  // 64 KiB) take turns, with a launch over all 8 devices between
  // them, each feeding its next launch. Row r of a result is the psum plus row r itself, so a
  // row computed on the other device of its pair differs; every result is kept to the end, so
  // one that a later launch wrote over fails too, as does one placed on another pair's device.
  const std::vector<sp::Device> all = sp::devices();
  const std::vector<sp::Mesh> pairs = {sp::Mesh({all[0], all[4]}, {2}, {"a"}),
                                       sp::Mesh({all[1], all[5]}, {2}, {"a"})};
  sp::Mesh wide = sp::make_mesh({2, 4}, {"a", "b"});
  auto step = [](sp::Array b) { return sp::lax::psum(b, "a") + b; };
  auto wide_step = sp::jit(sp::shard_map(step, wide, P("a", "b"), P("a", "b")));
  sp::Array filler = sp::device_put(sp::zeros({2, 4, 8}, sp::float32),
                                    sp::NamedSharding(wide, P("a", "b")));
  struct Run {
    sp::Mesh mesh;
    std::function<sp::Array(const sp::Array&)> fn;
    sp::Array x;
    std::vector<float> values;  // of x, row-major [2, n]
  };
  std::vector<Run> runs;
  for (sp::DType dtype : {sp::float32, sp::int32, sp::bfloat16})
    for (int64_t n : {int64_t(16), int64_t(1500), int64_t(20000)})
      for (const sp::Mesh& mesh : pairs) {
        std::vector<float> v(size_t(2 * n));
        for (size_t k = 0; k < v.size(); ++k) v[k] = float(int(k % 3) - 1);
        sp::Array x = sp::device_put(sp::array(v, {2, n}).astype(dtype),
                                     sp::NamedSharding(mesh, P("a")));
        runs.push_back({mesh, sp::jit(sp::shard_map(step, mesh, P("a"), P("a"))), x, v});
      }
  // Values stay within 3^4 of the inputs' magnitude 1: exact in bfloat16.
  std::vector<std::pair<sp::Array, std::vector<float>>> kept;
  for (int round = 0; round < 4; ++round)
    for (Run& r : runs) {
      filler = wide_step(filler);
      r.x = r.fn(r.x);
      const size_t n = r.values.size() / 2;
      for (size_t j = 0; j < n; ++j) {
        const float sum = r.values[j] + r.values[n + j];
        r.values[j] += sum;
        r.values[n + j] += sum;
      }
      kept.emplace_back(r.x, r.values);
    }
  for (size_t k = 0; k < kept.size(); ++k) {
    const Run& r = runs[k % runs.size()];
    const int64_t n = int64_t(kept[k].second.size() / 2);
    for (const sp::Shard& s : kept[k].first.addressable_shards())
      EXPECT_EQ(s.device.id, r.mesh.devices()[size_t(sp::process_index())].id) << "result " << k;
    expect_local_blocks(kept[k].first, kept[k].second, sp::Shape({2, n}));
  }
}

TEST(Processes, LargePsumReducesWithinEachProcessFirst) {
  sp::Mesh mesh = sp::make_mesh({8}, {"i"});
  const int64_t n = 1 << 16;  // 256 KiB per device: above the size that gathers every block
  sp::Array x = sp::device_put(sp::arange(int(8 * n)).astype(sp::float32).reshape({8, n}),
                               sp::NamedSharding(mesh, P("i")));
  sp::Array y =
      sp::shard_map([](sp::Array b) { return sp::lax::psum(b, "i"); }, mesh, P("i"), P("i"))(x);
  std::vector<float> col(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    double s = 0;
    for (int r = 0; r < 8; ++r) s += double(r * n + j);
    col[size_t(j)] = float(s);
  }
  std::vector<float> want;
  for (int r = 0; r < 8; ++r) want.insert(want.end(), col.begin(), col.end());
  expect_local_blocks(y, want, sp::Shape({8, n}));
}

TEST(Processes, LargePmaxAndIntegerPsumAcrossProcesses) {
  // Above the gathering size, so the processes' partial results meet in halves (each process
  // combines one half, then the halves are swapped back): every element of both halves must be
  // the reduction of all eight devices, and a NaN on one device wins pmax everywhere.
  sp::Mesh mesh = sp::make_mesh({8}, {"i"});
  const int64_t n = 1 << 16;
  std::vector<float> values(size_t(8 * n));
  for (int r = 0; r < 8; ++r)
    for (int64_t j = 0; j < n; ++j) values[size_t(r * n + j)] = float((j * 7 + r * 3) % 17);
  values[size_t(6 * n + 5)] = std::nanf("");
  std::vector<int32_t> ints(values.size());
  for (size_t k = 0; k < values.size(); ++k)
    ints[k] = std::isnan(values[k]) ? 100 : int32_t(values[k]);
  sp::Array x = sp::device_put(sp::array(values, {8, n}), sp::NamedSharding(mesh, P("i")));
  sp::Array xi = sp::device_put(sp::array(ints, {8, n}), sp::NamedSharding(mesh, P("i")));
  sp::Array m =
      sp::shard_map([](sp::Array b) { return sp::lax::pmax(b, "i"); }, mesh, P("i"), P("i"))(x);
  sp::Array s =
      sp::shard_map([](sp::Array b) { return sp::lax::psum(b, "i"); }, mesh, P("i"), P("i"))(xi);
  for (const sp::Shard& shard : m.addressable_shards()) {
    std::vector<float> got = shard.data.to_vector<float>();
    ASSERT_TRUE(std::isnan(got[5])) << "device " << shard.device.id;
    for (int64_t j = 0; j < n; ++j) {
      if (j == 5) continue;
      float want = 0;
      for (int r = 0; r < 8; ++r) want = std::max(want, values[size_t(r * n + j)]);
      ASSERT_EQ(got[size_t(j)], want) << "device " << shard.device.id << " element " << j;
    }
  }
  for (const sp::Shard& shard : s.addressable_shards()) {
    std::vector<int32_t> got = shard.data.to_vector<int32_t>();
    for (int64_t j = 0; j < n; ++j) {
      int32_t want = 0;
      for (int r = 0; r < 8; ++r) want += ints[size_t(r * n + j)];
      ASSERT_EQ(got[size_t(j)], want) << "device " << shard.device.id << " element " << j;
    }
  }
}

TEST(Processes, CollectivesOverEachAxisOfATwoByFourMesh) {
  // Axis "a" crosses processes (devices 0-3 are a=0), axis "b" stays within one.
  sp::Mesh mesh = sp::make_mesh({2, 4}, {"a", "b"});
  sp::Array x = sp::device_put(sp::arange(8).astype(sp::float32).reshape({2, 4}),
                               sp::NamedSharding(mesh, P("a", "b")));
  auto run = [&](auto body) { return sp::shard_map(body, mesh, P("a", "b"), P("a", "b"))(x); };
  // x[a, b] = 4a + b.
  expect_local_blocks(run([](sp::Array v) { return sp::lax::psum(v, "a"); }),
                      {4, 6, 8, 10, 4, 6, 8, 10}, sp::Shape({2, 4}));
  expect_local_blocks(run([](sp::Array v) { return sp::lax::psum(v, "b"); }),
                      {6, 6, 6, 6, 22, 22, 22, 22}, sp::Shape({2, 4}));
  expect_local_blocks(run([](sp::Array v) { return sp::lax::pmax(v, sp::axes("a", "b")); }),
                      {7, 7, 7, 7, 7, 7, 7, 7}, sp::Shape({2, 4}));
  // Shift along "a": a=1 receives a=0's value, a=0 receives zeros... a full cycle of two.
  expect_local_blocks(run([](sp::Array v) {
                        return sp::lax::ppermute(v, "a", {{0, 1}, {1, 0}});
                      }),
                      {4, 5, 6, 7, 0, 1, 2, 3}, sp::Shape({2, 4}));
}

TEST(Processes, ReductionsOverTheProcessAxisAroundTheGatheringSize) {
  // One device per process in each group of axis "a": at 64 KiB the blocks are gathered straight
  // into the result; one element more (an odd count, so the halves differ) reduces in halves, the
  // first half read from the input. A NaN on one device wins pmax.
  sp::Mesh mesh = sp::make_mesh({2, 4}, {"a", "b"});
  for (int64_t n : {int64_t(16384), int64_t(16385)}) {
    std::vector<float> values(size_t(8 * n));
    for (int64_t d = 0; d < 8; ++d)
      for (int64_t j = 0; j < n; ++j)
        values[size_t(d * n + j)] = float((j * 7 + d * 5) % 23) - 11.f;
    values[size_t(6 * n + n - 1)] = std::nanf("");
    sp::Array x =
        sp::device_put(sp::array(values, {2, 4, n}), sp::NamedSharding(mesh, P("a", "b")));
    auto run = [&](auto body) { return sp::shard_map(body, mesh, P("a", "b"), P("a", "b"))(x); };
    sp::Array s = run([](sp::Array v) { return sp::lax::psum(v, "a"); });
    sp::Array m = run([](sp::Array v) { return sp::lax::pmax(v, "a"); });
    std::vector<float> sums(values.size()), maxes(values.size());
    for (int64_t b = 0; b < 4; ++b)
      for (int64_t j = 0; j < n; ++j) {
        const float v0 = values[size_t(b * n + j)], v1 = values[size_t((4 + b) * n + j)];
        for (int64_t a = 0; a < 2; ++a) {
          sums[size_t((4 * a + b) * n + j)] = v0 + v1;
          maxes[size_t((4 * a + b) * n + j)] = std::isnan(v1) ? v1 : std::max(v0, v1);
        }
      }
    expect_local_blocks(s, sums, sp::Shape({2, 4, n}));
    expect_local_blocks(m, maxes, sp::Shape({2, 4, n}));
  }
}

TEST(Processes, SmallReductionsWithOneDevicePerProcessChainedInOneProgram) {
  // Over axis "a" each process has one member of every group, so small reductions gather into a
  // buffer kept from one to the next: here it grows (16 KiB after 64 B) and is used again for
  // smaller ones, while an all_gather along the leading axis hands its gathered buffer over as
  // its result, which the reductions after it must not write. Every result is used after the
  // next collective. Small integers keep every sum exact.
  sp::Mesh mesh = sp::make_mesh({2, 4}, {"a", "b"});
  const int64_t n = 16, m = 4096;
  std::vector<float> xs(size_t(8 * n)), ys(size_t(8 * m));
  for (int64_t d = 0; d < 8; ++d) {
    for (int64_t j = 0; j < n; ++j) xs[size_t(d * n + j)] = float((j * 3 + d * 5) % 11) - 5.f;
    for (int64_t j = 0; j < m; ++j) ys[size_t(d * m + j)] = float((j * 7 + d * 3) % 13) - 6.f;
  }
  const sp::NamedSharding split(mesh, P("a", "b"));
  sp::Array x = sp::device_put(sp::array(xs, {2, 4, n}), split);
  sp::Array y = sp::device_put(sp::array(ys, {2, 4, m}), split);
  auto body = [](sp::Array v, sp::Array w) {
    sp::Array big = sp::lax::psum(w, "a");
    sp::Array gathered = sp::lax::all_gather(v, "a", {.tiled = true});
    sp::Array small = sp::lax::psum(v, "a");
    sp::Array max = sp::lax::pmax(w, "a");
    sp::Array again = sp::lax::psum(small + v, "a");
    return std::vector<sp::Array>{big, gathered, small, max, again};
  };
  std::vector<sp::Array> got =
      sp::jit(sp::shard_map(body, mesh, {P("a", "b"), P("a", "b")}, P("a", "b")))(x, y);
  std::vector<float> big(ys.size()), max(ys.size()), gathered(size_t(16 * n)), small(xs.size()),
      again(xs.size());
  for (int64_t d = 0; d < 8; ++d) {
    const int64_t b = d % 4;
    for (int64_t j = 0; j < m; ++j) {
      const float w0 = ys[size_t(b * m + j)], w1 = ys[size_t((4 + b) * m + j)];
      big[size_t(d * m + j)] = w0 + w1;
      max[size_t(d * m + j)] = std::max(w0, w1);
    }
    for (int64_t j = 0; j < n; ++j) {
      const float v0 = xs[size_t(b * n + j)], v1 = xs[size_t((4 + b) * n + j)];
      small[size_t(d * n + j)] = v0 + v1;
      again[size_t(d * n + j)] = 3 * (v0 + v1);
      // Device (a, b) holds rows 2a and 2a + 1 of the gathered [4, 4, n]: v of (0, b), (1, b).
      for (int64_t k = 0; k < 2; ++k)
        gathered[size_t(((2 * (d / 4) + k) * 4 + b) * n + j)] = xs[size_t((4 * k + b) * n + j)];
    }
  }
  expect_local_blocks(got[0], big, sp::Shape({2, 4, m}));
  expect_local_blocks(got[1], gathered, sp::Shape({4, 4, n}));
  expect_local_blocks(got[2], small, sp::Shape({2, 4, n}));
  expect_local_blocks(got[3], max, sp::Shape({2, 4, m}));
  expect_local_blocks(got[4], again, sp::Shape({2, 4, n}));
}

TEST(Processes, SmallReductionsOverEveryDeviceGiveOneProcesssBits) {
  // A psum over the 8 devices of two processes up to the gathering size has the bits of one
  // process: each element summed left to right in device order, in float. The values mix
  // magnitudes, so any other order rounds differently. Below 1 KiB every process reduces every
  // block; from there each reduces its part of the elements (an odd count splits unevenly),
  // then the parts are gathered. A NaN on one device wins pmax.
  sp::Mesh mesh = sp::make_mesh({2, 4}, {"a", "b"});
  for (int64_t n : {int64_t(100), int64_t(256), int64_t(5001), int64_t(16384)}) {
    std::vector<float> values(size_t(8 * n));
    for (int64_t d = 0; d < 8; ++d)
      for (int64_t j = 0; j < n; ++j)
        values[size_t(d * n + j)] =
            float(std::sin(double(j) * 0.37 + double(d) * 1.3)) * (d % 3 == 1 ? 3e4f : 0.7f);
    values[size_t(2 * n + n / 2)] = std::nanf("");
    sp::Array x =
        sp::device_put(sp::array(values, {2, 4, n}), sp::NamedSharding(mesh, P("a", "b")));
    auto run = [&](auto body) { return sp::shard_map(body, mesh, P("a", "b"), P("a", "b"))(x); };
    sp::Array s = run([](sp::Array v) { return sp::lax::psum(v, sp::axes("a", "b")); });
    sp::Array m = run([](sp::Array v) { return sp::lax::pmax(v, sp::axes("a", "b")); });
    std::vector<float> sums(values.size()), maxes(values.size());
    for (int64_t j = 0; j < n; ++j) {
      float sum = values[size_t(j)], max = values[size_t(j)];
      for (int64_t d = 1; d < 8; ++d) {
        const float v = values[size_t(d * n + j)];
        sum += v;
        max = std::isnan(max) || std::isnan(v) ? std::nanf("") : std::max(max, v);
      }
      for (int64_t d = 0; d < 8; ++d) sums[size_t(d * n + j)] = sum, maxes[size_t(d * n + j)] = max;
    }
    expect_local_blocks(s, sums, sp::Shape({2, 4, n}));
    expect_local_blocks(m, maxes, sp::Shape({2, 4, n}));
  }
}

TEST(Processes, AChainOfReductionsOverDifferentAxesInOneProgram) {
  // One jitted body alternates the groups it reduces over (each device meets a different group in
  // every step, and the first again at the end), above and at the gathering size, and uses each
  // result after the next reduction: every step has its own group's values, and no result is
  // written over by a later step. Small integers keep every sum exact in any order.
  sp::Mesh mesh = sp::make_mesh({2, 4}, {"a", "b"});
  for (int64_t n : {int64_t(16384), int64_t(16385)}) {
    std::vector<float> values(size_t(8 * n));
    for (int64_t d = 0; d < 8; ++d)
      for (int64_t j = 0; j < n; ++j) values[size_t(d * n + j)] = float((j * 3 + d * 5) % 7);
    sp::Array x =
        sp::device_put(sp::array(values, {2, 4, n}), sp::NamedSharding(mesh, P("a", "b")));
    auto body = [](sp::Array v) {
      sp::Array over_a = sp::lax::psum(v, "a");
      sp::Array over_b = sp::lax::psum(over_a + v, "b");
      sp::Array over_all = sp::lax::psum(over_b, sp::axes("a", "b"));
      sp::Array again = sp::lax::psum(over_all - over_a, "a");
      return std::vector<sp::Array>{over_a, over_b, again};
    };
    std::vector<sp::Array> got = sp::jit(sp::shard_map(body, mesh, P("a", "b"), P("a", "b")))(x);
    // Host values, device d = 4a + b, element j.
    auto at = [&](const std::vector<double>& v, int64_t d, int64_t j) {
      return v[size_t(d * n + j)];
    };
    std::vector<double> a(values.size()), b(values.size()), all(values.size()),
        again(values.size());
    for (int64_t d = 0; d < 8; ++d)
      for (int64_t j = 0; j < n; ++j)
        a[size_t(d * n + j)] =
            double(values[size_t((d % 4) * n + j)]) + values[size_t((4 + d % 4) * n + j)];
    for (int64_t d = 0; d < 8; ++d)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t k = d / 4 * 4; k < d / 4 * 4 + 4; ++k)
          s += at(a, k, j) + values[size_t(k * n + j)];
        b[size_t(d * n + j)] = s;
      }
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t k = 0; k < 8; ++k) s += at(b, k, j);
      for (int64_t d = 0; d < 8; ++d) all[size_t(d * n + j)] = s;
    }
    for (int64_t d = 0; d < 8; ++d)
      for (int64_t j = 0; j < n; ++j)
        again[size_t(d * n + j)] =
            at(all, d % 4, j) - at(a, d % 4, j) + at(all, 4 + d % 4, j) - at(a, 4 + d % 4, j);
    auto as_float = [](const std::vector<double>& v) {
      return std::vector<float>(v.begin(), v.end());
    };
    expect_local_blocks(got[0], as_float(a), sp::Shape({2, 4, n}));
    expect_local_blocks(got[1], as_float(b), sp::Shape({2, 4, n}));
    expect_local_blocks(got[2], as_float(again), sp::Shape({2, 4, n}));
  }
}

TEST(Processes, AllGatherAllToAllAndPsumScatterAcrossProcesses) {
  sp::Mesh mesh = sp::make_mesh({8}, {"i"});
  sp::Array x = sp::device_put(sp::arange(64).astype(sp::float32).reshape({8, 8}),
                               sp::NamedSharding(mesh, P("i")));
  // all_gather (tiled): every device holds the whole [8, 8], so the result is 8 copies.
  sp::Array g =
      sp::shard_map([](sp::Array b) { return sp::lax::all_gather(b, "i", {.tiled = true}); }, mesh,
                    P("i"), P("i"))(x);
  std::vector<float> want_g;
  const std::vector<float> whole = iota(64);
  for (int r = 0; r < 8; ++r) want_g.insert(want_g.end(), whole.begin(), whole.end());
  expect_local_blocks(g, want_g, sp::Shape({64, 8}));
  // all_to_all splitting columns and concatenating rows: the transpose of the 8x8 blocks.
  sp::Array t =
      sp::shard_map([](sp::Array b) { return sp::lax::all_to_all(b, "i", 1, 0, {.tiled = true}); },
                    mesh, P("i"), P("i"))(x);
  std::vector<float> want_t(64);
  for (int r = 0; r < 8; ++r)
    for (int j = 0; j < 8; ++j) want_t[size_t(r * 8 + j)] = float(j * 8 + r);
  expect_local_blocks(t, want_t, sp::Shape({64, 1}));
  // psum_scatter of each device's row: device r gets element r of the column sums.
  sp::Array s = sp::shard_map(
      [](sp::Array b) { return sp::lax::psum_scatter(b.reshape({8}), "i", {.tiled = true}); }, mesh,
      P("i"), P("i"))(x);
  std::vector<float> want_s(8);
  for (int j = 0; j < 8; ++j)
    for (int r = 0; r < 8; ++r) want_s[size_t(j)] += float(r * 8 + j);
  expect_local_blocks(s, want_s, sp::Shape({8}));
}

// Collectives of one kind and group whose operands are ready together meet once for all of them
// (compile's combine_collectives): over "a", whose groups cross the processes, and over "b",
// whose groups stay within one. Every result against the host's value of each device's block.
TEST(Processes, CombinedCollectivesWithinAndAcrossProcesses) {
  sp::Mesh mesh = sp::make_mesh({2, 4}, {"a", "b"});
  const sp::PartitionSpec each = P(sp::axes("a", "b"));
  sp::Array x = sp::device_put(sp::arange(48).astype(sp::float32).reshape({8, 6}),
                               sp::NamedSharding(mesh, each));
  sp::Array k = sp::device_put(sp::arange(16).astype(sp::int32), sp::NamedSharding(mesh, each));
  sp::ShardMapOptions unchecked;
  unchecked.check_vma = false;
  auto body = [](sp::Array v, sp::Array i) {
    const sp::AllGatherOptions rows{.axis = 0, .tiled = true};
    const sp::PsumScatterOptions first{.scatter_dimension = 0, .tiled = true};
    return std::vector<sp::Array>{
        sp::lax::psum(v, "a"),
        sp::lax::psum(i, "a"),
        sp::lax::all_gather(v, "b", rows),
        sp::lax::all_gather(i, "b", rows),
        sp::lax::all_to_all(v.reshape({2, 3}), "a", 0, 0, {.tiled = true}),
        sp::lax::all_to_all(i, "a", 0, 0, {.tiled = true}),
        sp::lax::psum_scatter(v.reshape({6}), "a", first),
        sp::lax::psum_scatter(i * 2, "a", first)};
  };
  const std::vector<sp::Array> got = sp::shard_map(
      body, mesh, {each, each}, std::vector<sp::PartitionSpec>(8, each), unchecked)(x, k);
  // Device d = 4a + b holds row d of x (6d ... 6d + 5) and k's elements 2d, 2d + 1.
  auto xv = [](int d, int j) { return float(6 * d + j); };
  auto kv = [](int d, int j) { return float(2 * d + j); };
  std::vector<std::vector<float>> want(8);
  for (int d = 0; d < 8; ++d) {
    const int a = d / 4, b = d % 4, lo = b, hi = 4 + b;  // the devices of d's group over "a"
    for (int j = 0; j < 6; ++j) want[0].push_back(xv(lo, j) + xv(hi, j));
    for (int j = 0; j < 2; ++j) want[1].push_back(kv(lo, j) + kv(hi, j));
    for (int m = 0; m < 4; ++m)
      for (int j = 0; j < 6; ++j) want[2].push_back(xv(4 * a + m, j));
    for (int m = 0; m < 4; ++m)
      for (int j = 0; j < 2; ++j) want[3].push_back(kv(4 * a + m, j));
    for (int from : {lo, hi})
      for (int j = 0; j < 3; ++j) want[4].push_back(xv(from, 3 * a + j));
    for (int from : {lo, hi}) want[5].push_back(kv(from, a));
    for (int j = 0; j < 3; ++j) want[6].push_back(xv(lo, 3 * a + j) + xv(hi, 3 * a + j));
    want[7].push_back(2 * (kv(lo, a) + kv(hi, a)));
  }
  const sp::Shape shapes[] = {{8, 6}, {16}, {32, 6}, {64}, {16, 3}, {16}, {24}, {8}};
  ASSERT_EQ(got.size(), 8u);
  for (size_t r = 0; r < 8; ++r) {
    SCOPED_TRACE("result " + std::to_string(r));
    expect_local_blocks(got[r], want[r], shapes[r]);
  }
}

TEST(Processes, JitPartitionsAMatmulOverProcesses) {
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"a", "b"});
  sp::Array a = sp::device_put(sp::arange(64).astype(sp::float32).reshape({8, 8}),
                               sp::NamedSharding(mesh, P("a", "b")));
  sp::Array b = sp::device_put(sp::ones({8, 4}), sp::NamedSharding(mesh, P("b", sp::None)));
  sp::Array c = sp::jit([](sp::Array u, sp::Array v) { return sp::matmul(u, v); })(a, b);
  std::vector<float> want(32);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 8; ++k) want[size_t(i * 4 + j)] += float(i * 8 + k);
  expect_local_blocks(c, want, sp::Shape({8, 4}));
}

TEST(Processes, ReadingAValueSpreadOverProcessesRaisesJaxsError) {
  sp::Mesh mesh = sp::make_mesh({8}, {"i"});
  sp::Array x = sp::device_put(sp::arange(8).astype(sp::float32), sp::NamedSharding(mesh, P("i")));
  try {
    x.to_vector<float>();
    FAIL() << "expected an error";
  } catch (const sp::RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("spans non-addressable (non process local) devices"),
              std::string::npos)
        << e.what();
  }
  // A replicated value is read where it is.
  sp::Array r = sp::device_put(sp::arange(8).astype(sp::float32), sp::NamedSharding(mesh, P()));
  EXPECT_EQ(r.to_vector<float>(), iota(8));
}

TEST(Processes, InitializeTwiceRaisesJaxsError) {
  try {
    sp::distributed::initialize();
    FAIL() << "expected an error";
  } catch (const sp::RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("distributed.initialize should only be called once."),
              std::string::npos)
        << e.what();
  }
}

TEST(Processes, DevicePutMovesBlocksBetweenProcesses) {
  sp::Mesh mesh = sp::make_mesh({8}, {"i"});
  sp::Array x = sp::device_put(sp::arange(16).astype(sp::float32), sp::NamedSharding(mesh, P("i")));
  // Replicated: every process needs the blocks of the other.
  sp::Array r = sp::device_put(x, sp::NamedSharding(mesh, P()));
  EXPECT_EQ(r.to_vector<float>(), iota(16));
  // Onto a mesh in the other order: device k now holds block 7 - k.
  std::vector<sp::Device> all = sp::devices();
  sp::Mesh reversed(std::vector<sp::Device>(all.rbegin(), all.rend()), {8}, {"i"});
  expect_local_blocks(sp::device_put(x, sp::NamedSharding(reversed, P("i"))), iota(16),
                      sp::Shape({16}));
  // The program route gives the same.
  sp::NamedSharding replicated(mesh, P());
  sp::Array c =
      sp::jit([&](sp::Array v) { return sp::with_sharding_constraint(v, replicated); })(x);
  EXPECT_EQ(c.to_vector<float>(), iota(16));
}

// ---- device_put between processes: only the pieces a process lacks travel ---------------------

// Whether this process's blocks of `x` hold element `at` (one coordinate per dim).
bool held_here(const sp::Array& x, const std::vector<int64_t>& at) {
  for (const sp::Shard& s : x.addressable_shards()) {
    bool inside = true;
    for (size_t d = 0; d < at.size(); ++d)
      inside = inside && s.index[d].start <= at[d] && at[d] < s.index[d].stop;
    if (inside) return true;
  }
  return false;
}

// The bytes of the distinct blocks of `y` on this process that no block of `x` here holds:
// what this process must receive, once however many of its devices need it.
int64_t bytes_lacking(const sp::Array& x, const sp::Array& y) {
  std::vector<std::vector<sp::Slice>> seen;
  int64_t elements = 0;
  for (const sp::Shard& s : y.addressable_shards()) {
    if (std::find(seen.begin(), seen.end(), s.index) != seen.end()) continue;
    seen.push_back(s.index);
    std::vector<int64_t> at;
    for (const sp::Slice& d : s.index) at.push_back(d.start);
    while (true) {
      elements += held_here(x, at) ? 0 : 1;
      int d = int(at.size()) - 1;
      for (; d >= 0; --d) {
        if (++at[size_t(d)] < s.index[size_t(d)].stop) break;
        at[size_t(d)] = s.index[size_t(d)].start;
      }
      if (d < 0) break;
    }
  }
  return elements * int64_t(sp::itemsize(x.dtype()));
}

// `move(x)` puts x elsewhere: every block this process holds has the value's elements (x is an
// iota, so a misplaced piece shows), and this process received exactly the bytes it lacked.
// Returns those bytes.
template <class Move>
int64_t expect_moved(const sp::Array& x, Move move) {
  sp::runtime::reset_transfer_stats();
  sp::Array y = move(x);
  const int64_t received = sp::runtime::transfer_stats().between_processes_bytes;
  EXPECT_EQ(received, bytes_lacking(x, y));
  if (!y.addressable_shards().empty()) expect_local_blocks(y, iota(x.shape().size()), x.shape());
  return received;
}

int64_t expect_put(const sp::Array& x, const sp::Sharding& to) {
  return expect_moved(x, [&](const sp::Array& v) { return sp::device_put(v, to); });
}

sp::Mesh mesh_of(const std::vector<int>& ids, const sp::Shape& shape,
                 const std::vector<std::string>& names) {
  std::vector<sp::Device> devices;
  for (int id : ids) devices.push_back(sp::devices()[size_t(id)]);
  return sp::Mesh(devices, shape, names);
}

TEST(DevicePutBetweenProcesses, RowsToColumnsReceivesTheOtherProcesssRowsOfItsColumns) {
  sp::Mesh mesh = sp::make_mesh({8}, {"i"});
  for (sp::DType dtype : {sp::float32, sp::int8}) {
    sp::Array rows = sp::device_put(sp::arange(64).astype(dtype).reshape({8, 8}),
                                    sp::NamedSharding(mesh, P("i")));
    // Each process's 4 columns lack the other process's 4 rows: 16 elements.
    EXPECT_EQ(expect_put(rows, sp::NamedSharding(mesh, P(sp::None, "i"))),
              16 * int64_t(sp::itemsize(dtype)));
  }
}

TEST(DevicePutBetweenProcesses, FromTheDevicesOfOneProcessToTheOther) {
  sp::Mesh low = mesh_of({0, 1, 2, 3}, {4}, {"i"}), high = mesh_of({4, 5, 6, 7}, {4}, {"i"});
  sp::Array x = sp::arange(32).astype(sp::float32).reshape({8, 4});
  // Process 0 sends its four blocks (128 B), process 1 receives them and sends nothing back.
  sp::Array on_low = sp::device_put(x, sp::NamedSharding(low, P("i")));
  EXPECT_EQ(expect_put(on_low, sp::NamedSharding(high, P("i"))),
            sp::process_index() == 1 ? 128 : 0);
  sp::Array on_high = sp::device_put(x, sp::NamedSharding(high, P(sp::None, "i")));
  EXPECT_EQ(expect_put(on_high, sp::NamedSharding(low, P("i"))),
            sp::process_index() == 0 ? 128 : 0);
  // To one device of the other process.
  EXPECT_EQ(
      expect_moved(on_low, [](const sp::Array& v) { return sp::device_put(v, sp::devices()[6]); }),
      sp::process_index() == 1 ? 128 : 0);
}

TEST(DevicePutBetweenProcesses, ReplicatedToSplitMovesNothing) {
  sp::Mesh mesh = sp::make_mesh({2, 4}, {"a", "b"});
  sp::Array x = sp::device_put(sp::arange(64).astype(sp::float32).reshape({8, 8}),
                               sp::NamedSharding(mesh, P()));
  EXPECT_EQ(expect_put(x, sp::NamedSharding(mesh, P("a", "b"))), 0);
  EXPECT_EQ(expect_put(x, sp::NamedSharding(mesh, P(sp::axes("a", "b")))), 0);
}

TEST(DevicePutBetweenProcesses, SplitToReplicatedReceivesTheOtherHalfOnce) {
  sp::Mesh mesh = sp::make_mesh({8}, {"i"});
  sp::Array x = sp::device_put(sp::arange(16).astype(sp::float32), sp::NamedSharding(mesh, P("i")));
  // Four devices here need the other process's 8 elements: they come once.
  EXPECT_EQ(expect_put(x, sp::NamedSharding(mesh, P())), 32);
}

TEST(DevicePutBetweenProcesses, TwoDimensionalMeshesWithTheProcessesOnEitherAxis) {
  // make_mesh puts the processes on the first axis; the second mesh has them on the second.
  sp::Mesh first = sp::make_mesh({2, 4}, {"a", "b"});
  sp::Mesh second = mesh_of({0, 4, 1, 5, 2, 6, 3, 7}, {4, 2}, {"a", "b"});
  sp::Array x = sp::arange(64).astype(sp::float32).reshape({8, 8});
  for (const sp::Mesh& from : {first, second})
    for (const sp::Mesh& to : {first, second}) {
      SCOPED_TRACE(from.str() + " -> " + to.str());
      sp::Array ab = sp::device_put(x, sp::NamedSharding(from, P("a", "b")));
      expect_put(ab, sp::NamedSharding(to, P("b", "a")));
      expect_put(ab, sp::NamedSharding(to, P(sp::None, "a")));
      expect_put(ab, sp::NamedSharding(to, P("b")));
      sp::Array a = sp::device_put(x, sp::NamedSharding(from, P("a")));
      expect_put(a, sp::NamedSharding(to, P("a", "b")));
      expect_put(a, sp::NamedSharding(to, P(sp::axes("b", "a"))));
    }
  // Columns over the processes to rows over them: each process lacks half of its half.
  sp::Array cols = sp::device_put(x, sp::NamedSharding(second, P(sp::None, "b")));
  EXPECT_EQ(expect_put(cols, sp::NamedSharding(first, P("a"))), 16 * 4);
}

TEST(DevicePutBetweenProcesses, BlocksThatDoNotNest) {
  // 12 rows in blocks of 2 on devices 2-7, then in blocks of 3 on devices 1-4; 5 columns.
  sp::Array x = sp::arange(60).astype(sp::float32).reshape({12, 5});
  sp::Array six =
      sp::device_put(x, sp::NamedSharding(mesh_of({2, 3, 4, 5, 6, 7}, {6}, {"i"}), P("i")));
  expect_put(six, sp::NamedSharding(mesh_of({1, 2, 3, 4}, {4}, {"i"}), P("i")));
  expect_put(six, sp::NamedSharding(mesh_of({7, 0}, {2}, {"i"}), P(sp::None)));
  // An odd shape from one device to one of the other process, and back replicated.
  sp::Array odd =
      sp::device_put(sp::arange(21).astype(sp::float32).reshape({7, 3}), sp::devices()[1]);
  sp::Array moved = sp::device_put(odd, sp::devices()[5]);
  expect_put(odd, *moved.sharding());
  expect_put(moved, sp::NamedSharding(sp::make_mesh({8}, {"i"}), P()));
}

TEST(DevicePutBetweenProcesses, ReshardAndConstraintOutsideJitTakeTheSamePath) {
  sp::Mesh mesh =
      sp::make_mesh({2, 4}, {"a", "b"}, {sp::AxisType::Explicit, sp::AxisType::Explicit});
  sp::Array x = sp::device_put(sp::arange(64).astype(sp::float32).reshape({8, 8}),
                               sp::NamedSharding(mesh, P("a", "b")));
  EXPECT_EQ(expect_moved(x,
                         [&](const sp::Array& v) {
                           return sp::reshard(v, sp::NamedSharding(mesh, P("b", "a")));
                         }),
            bytes_lacking(x, sp::device_put(x, sp::NamedSharding(mesh, P("b", "a")))));
  EXPECT_EQ(expect_moved(x,
                         [&](const sp::Array& v) {
                           return sp::with_sharding_constraint(v, sp::NamedSharding(mesh, P()));
                         }),
            32 * 4);
}

TEST(Processes, GlobalArraysFromEachProcesssPart) {
  sp::Mesh mesh = sp::make_mesh({8}, {"i"});
  sp::NamedSharding rows(mesh, P("i"));
  // Each process's callback makes only its own devices' blocks.
  int calls = 0;
  sp::Array a = sp::make_array_from_callback(sp::Shape({8, 2}), rows, [&](const sp::Index& index) {
    ++calls;
    const int64_t r = index[0].start;
    return sp::array({float(2 * r), float(2 * r + 1)}, {1, 2});
  });
  EXPECT_EQ(calls, 4);
  expect_local_blocks(a, iota(16), sp::Shape({8, 2}));
  // Each process gives its half of the rows.
  const int p = sp::process_index();
  sp::Array half = (sp::arange(8).astype(sp::float32) + float(8 * p)).reshape({4, 2});
  sp::Array b = sp::make_array_from_process_local_data(rows, half, sp::Shape({8, 2}));
  expect_local_blocks(b, iota(16), sp::Shape({8, 2}));
  // process_allgather: the whole value on every process.
  EXPECT_EQ(sp::process_allgather(b, true).to_vector<float>(), iota(16));
  // Of a process-local value: the processes' values stacked.
  sp::Array stacked = sp::process_allgather(sp::array({float(p)}), false);
  EXPECT_EQ(stacked.shape(), sp::Shape({2, 1}));
  EXPECT_EQ(stacked.to_vector<float>(), (std::vector<float>{0.f, 1.f}));
}

TEST(Processes, PmapOverEveryDeviceOfTheJob) {
  sp::Array x = sp::arange(8).astype(sp::float32);
  sp::Array y =
      sp::pmap([](sp::Array v) { return sp::lax::psum(v, "i") + v; }, {.axis_name = "i"})(x);
  std::vector<float> want;
  for (int i = 0; i < 8; ++i) want.push_back(28.f + float(i));
  expect_local_blocks(y, want, sp::Shape({8}));
}

TEST(Processes, DataParallelGradientStepEqualsOneProcess) {
  // The seed's data-parallel step in miniature: a batch split over 8 devices, replicated
  // weights; the weight gradient is an all-reduce across processes.
  sp::Mesh mesh = sp::make_mesh({8}, {"batch"});
  sp::Array w = sp::device_put(sp::arange(12).astype(sp::float32).reshape({4, 3}) / 10.0f,
                               sp::NamedSharding(mesh, P()));
  sp::Array xb = sp::device_put(sp::arange(64).astype(sp::float32).reshape({16, 4}) / 64.0f,
                                sp::NamedSharding(mesh, P("batch")));
  auto loss = [](sp::Array w, sp::Array x) {
    return sp::mean(sp::square(sp::tanh(sp::matmul(x, w))));
  };
  sp::Array g = sp::jit(sp::grad(loss))(w, xb);
  // The same on the host, in one process (these values are replicated, so readable here).
  sp::Array g_host = sp::grad(loss)(sp::arange(12).astype(sp::float32).reshape({4, 3}) / 10.0f,
                                    sp::arange(64).astype(sp::float32).reshape({16, 4}) / 64.0f);
  std::vector<float> got = g.to_vector<float>(), want = g_host.to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k)
    EXPECT_NEAR(got[k], want[k], 1e-6f * (1 + std::abs(want[k])));
}

// ---- axis_index_groups whose groups cross processes ----------------------------------------
//
// These tests also run in one process of 8 devices (ctest's spmd_mpi_tests_one_process), which
// checks that the host values below are what one process computes.

// x[d, j] = small integers, different on every device d and column j.
std::vector<float> device_rows(int64_t cols) {
  std::vector<float> v(size_t(8 * cols));
  for (int64_t d = 0; d < 8; ++d)
    for (int64_t j = 0; j < cols; ++j) v[size_t(d * cols + j)] = float((d * 5 + j * 3) % 11 - 4);
  return v;
}

// The group holding mesh position d, and d's place in it.
std::pair<std::vector<int>, int> group_of(const sp::AxisIndexGroups& groups, int d) {
  for (const std::vector<int>& g : groups)
    for (size_t k = 0; k < g.size(); ++k)
      if (g[k] == d) return {g, int(k)};
  return {{}, -1};
}

// Per device d of a mesh {8}, `per_device(d)` one after another.
template <class F>
std::vector<float> over_devices(F per_device) {
  std::vector<float> out;
  for (int d = 0; d < 8; ++d) {
    std::vector<float> block = per_device(d);
    out.insert(out.end(), block.begin(), block.end());
  }
  return out;
}

const std::vector<sp::AxisIndexGroups> kCrossingGroups = {
    {{0, 5}, {1, 4}, {2, 7}, {3, 6}},  // every pair crosses, in a different order of devices
    {{0, 1, 2, 5}, {3, 4, 6, 7}},      // three members in one process and one in the other
    {{7, 0}, {1, 6}, {5, 2}, {3, 4}},  // members listed from the second process first
};

TEST(CrossingGroups, ReductionsWithinGroupsThatCrossProcesses) {
  sp::Mesh mesh = sp::make_mesh({8}, {"i"});
  // 8 columns gathers every member's block; 32768 (128 KiB) reduces within each process first.
  for (int64_t cols : {int64_t(8), int64_t(32768)}) {
    const std::vector<float> x = device_rows(cols);
    sp::Array xa =
        sp::device_put(sp::array(x, {8, cols}).astype(sp::int32), sp::NamedSharding(mesh, P("i")));
    for (const sp::AxisIndexGroups& groups : kCrossingGroups) {
      auto f = sp::shard_map(
          [groups](sp::Array b) {
            return std::vector<sp::Array>{sp::psum(b, "i", {.axis_index_groups = groups}),
                                          sp::pmax(b, "i", {.axis_index_groups = groups}),
                                          sp::pmin(b, "i", {.axis_index_groups = groups})};
          },
          mesh, P("i"), P("i"), {.check_vma = false});
      std::vector<sp::Array> got = f(xa);
      auto reduce = [&](auto op) {
        return over_devices([&](int d) {
          std::vector<int> g = group_of(groups, d).first;
          std::vector<float> r(x.begin() + g[0] * cols, x.begin() + (g[0] + 1) * cols);
          for (size_t k = 1; k < g.size(); ++k)
            for (int64_t j = 0; j < cols; ++j)
              r[size_t(j)] = op(r[size_t(j)], x[size_t(g[k] * cols + j)]);
          return r;
        });
      };
      const sp::Shape shape({8, cols});
      expect_local_blocks(got[0], reduce([](float a, float b) { return a + b; }), shape);
      expect_local_blocks(got[1], reduce([](float a, float b) { return std::max(a, b); }), shape);
      expect_local_blocks(got[2], reduce([](float a, float b) { return std::min(a, b); }), shape);
    }
  }
}

TEST(CrossingGroups, SmallReductionsOfEveryWidthBetweenOneDeviceOfEachProcess) {
  // Pairs with one device in each process of 2 × 4 (a member's block straight into the gathered
  // buffer, kept from one reduction to the next), listed either way round: reductions of 1, 2
  // and 4-byte elements one after another in one program, so a buffer sized or indexed by
  // elements instead of bytes, or reduced with another dtype's arithmetic, shows. Small
  // integers keep every result exact in every dtype (and the same as JAX's: psum of bool counts
  // in int32, pmax and pmin of bool are `or` and `and`).
  sp::Mesh mesh = sp::make_mesh({8}, {"i"});
  const int64_t cols = 37;
  const std::vector<float> x = device_rows(cols);
  sp::Array xa = sp::device_put(sp::array(x, {8, cols}), sp::NamedSharding(mesh, P("i")));
  for (const sp::AxisIndexGroups& groups :
       {sp::AxisIndexGroups{{0, 4}, {1, 5}, {2, 6}, {3, 7}},
        sp::AxisIndexGroups{{5, 1}, {4, 0}, {7, 3}, {6, 2}}}) {
    const sp::ReduceOptions in_groups{.axis_index_groups = groups};
    auto body = [&](sp::Array b) {
      sp::Array positive = b > 0;
      return std::vector<sp::Array>{
          sp::psum(b, "i", in_groups),
          sp::psum(b.astype(sp::int32), "i", in_groups),
          sp::psum(b.astype(sp::bfloat16), "i", in_groups),
          sp::psum(b.astype(sp::float16), "i", in_groups),
          sp::pmax(b.astype(sp::int8), "i", in_groups),
          sp::pmin(b.astype(sp::int16), "i", in_groups),
          sp::psum(positive, "i", in_groups),
          sp::pmax(positive, "i", in_groups),
          sp::pmin(positive, "i", in_groups)};
    };
    std::vector<sp::Array> got =
        sp::jit(sp::shard_map(body, mesh, P("i"), P("i"), {.check_vma = false}))(xa);
    ASSERT_EQ(got.size(), 9u);
    const sp::DType want_dtypes[] = {sp::float32, sp::int32, sp::bfloat16, sp::float16, sp::int8,
                                     sp::int16,   sp::int32, sp::bool_,    sp::bool_};
    for (size_t k = 0; k < got.size(); ++k) EXPECT_EQ(got[k].dtype(), want_dtypes[k]) << k;
    auto reduce = [&](auto op) {
      return over_devices([&](int d) {
        const std::vector<int> g = group_of(groups, d).first;
        std::vector<float> r;
        for (int64_t j = 0; j < cols; ++j)
          r.push_back(op(x[size_t(g[0] * cols + j)], x[size_t(g[1] * cols + j)]));
        return r;
      });
    };
    const std::vector<float> sum = reduce([](float a, float b) { return a + b; });
    const sp::Shape shape({8, cols});
    for (size_t k = 0; k < 4; ++k) expect_local_blocks(got[k], sum, shape);
    expect_local_blocks(got[4], reduce([](float a, float b) { return std::max(a, b); }), shape);
    expect_local_blocks(got[5], reduce([](float a, float b) { return std::min(a, b); }), shape);
    expect_local_blocks(got[6], reduce([](float a, float b) { return float(a > 0) + float(b > 0); }),
                        shape);
    expect_local_blocks(got[7], reduce([](float a, float b) { return float(a > 0 || b > 0); }),
                        shape);
    expect_local_blocks(got[8], reduce([](float a, float b) { return float(a > 0 && b > 0); }),
                        shape);
  }
}

TEST(CrossingGroups, GatherScatterAndAllToAllWithinGroupsThatCrossProcesses) {
  sp::Mesh mesh = sp::make_mesh({8}, {"i"});
  const int64_t cols = 8;
  const std::vector<float> x = device_rows(cols);
  sp::Array xa = sp::device_put(sp::array(x, {8, cols}), sp::NamedSharding(mesh, P("i")));
  auto row = [&](int d) {
    return std::vector<float>(x.begin() + d * cols, x.begin() + (d + 1) * cols);
  };
  for (const sp::AxisIndexGroups& groups : kCrossingGroups) {
    const int64_t n = int64_t(groups[0].size()), chunk = cols / n;
    auto f = sp::shard_map(
        [groups](sp::Array b) {
          return std::vector<sp::Array>{
              sp::all_gather(b, "i", {.tiled = true, .axis_index_groups = groups}),
              sp::psum_scatter(
                  b, "i", {.scatter_dimension = 1, .tiled = true, .axis_index_groups = groups}),
              sp::all_to_all(b, "i", 1, 0, {.tiled = true, .axis_index_groups = groups})};
        },
        mesh, P("i"), P("i"), {.check_vma = false});
    std::vector<sp::Array> got = f(xa);
    // all_gather: the group's rows in group order.
    expect_local_blocks(got[0], over_devices([&](int d) {
                          std::vector<float> out;
                          for (int m : group_of(groups, d).first) {
                            std::vector<float> r = row(m);
                            out.insert(out.end(), r.begin(), r.end());
                          }
                          return out;
                        }),
                        sp::Shape({8 * n, cols}));
    // psum_scatter: the member's chunk of the group's sum.
    expect_local_blocks(got[1], over_devices([&](int d) {
                          auto [g, me] = group_of(groups, d);
                          std::vector<float> out(size_t(chunk), 0.f);
                          for (int m : g)
                            for (int64_t j = 0; j < chunk; ++j)
                              out[size_t(j)] += x[size_t(m * cols + me * chunk + j)];
                          return out;
                        }),
                        sp::Shape({8, chunk}));
    // all_to_all: the member's chunk of every member's row, stacked in group order.
    expect_local_blocks(got[2], over_devices([&](int d) {
                          auto [g, me] = group_of(groups, d);
                          std::vector<float> out;
                          for (int m : g)
                            for (int64_t j = 0; j < chunk; ++j)
                              out.push_back(x[size_t(m * cols + me * chunk + j)]);
                          return out;
                        }),
                        sp::Shape({8 * n, chunk}));
  }
}

TEST(CrossingGroups, GroupsOfACollectiveInsideACondBranch) {
  // The groups are found in the branch's sub-program before the launch.
  sp::Mesh mesh = sp::make_mesh({8}, {"i"});
  const std::vector<float> x = device_rows(4);
  sp::Array xa = sp::device_put(sp::array(x, {8, 4}), sp::NamedSharding(mesh, P("i")));
  const sp::AxisIndexGroups groups = {{1, 6}, {0, 7}, {3, 4}, {2, 5}};
  auto f = sp::shard_map(
      [groups](sp::Array b) {
        return sp::lax::cond(
            sp::sum(b) > -1000.f,
            [groups](sp::Array v) { return sp::psum(v, "i", {.axis_index_groups = groups}); },
            [](sp::Array v) { return v; }, b);
      },
      mesh, P("i"), P("i"), {.check_vma = false});
  expect_local_blocks(f(xa), over_devices([&](int d) {
                        std::vector<int> g = group_of(groups, d).first;
                        std::vector<float> r(4);
                        for (int64_t j = 0; j < 4; ++j)
                          r[size_t(j)] = x[size_t(g[0] * 4 + j)] + x[size_t(g[1] * 4 + j)];
                        return r;
                      }),
                      sp::Shape({8, 4}));
}

// ---- ppermute and all_to_all send only what crosses processes --------------------------------

// The bytes this process received from others while `run` ran (and its results were read).
template <class F>
int64_t bytes_received_by(F run) {
  sp::runtime::reset_transfer_stats();
  run();
  return sp::runtime::transfer_stats().between_processes_bytes;
}

TEST(CrossingGroups, PpermuteSendsOnlyTheBlocksThatCrossProcesses) {
  sp::Mesh mesh = sp::make_mesh({8}, {"i"});
  const int64_t cols = 16, block_bytes = cols * 4;
  const std::vector<float> x = device_rows(cols);
  sp::Array xa = sp::device_put(sp::array(x, {8, cols}), sp::NamedSharding(mesh, P("i")));
  const std::vector<std::vector<std::pair<int, int>>> perms = {
      {{0, 1}, {1, 2}, {2, 3}, {3, 0}, {4, 6}, {6, 4}, {5, 7}},  // within processes; 5 gets zeros
      {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 6}, {6, 7}, {7, 0}},  // a cycle: 3→4, 7→0 cross
      {{0, 5}, {6, 1}, {2, 2}, {4, 3}},  // partial: three cross, one stays, four get zeros
  };
  for (const auto& perm : perms) {
    auto f = sp::shard_map([perm](sp::Array b) { return sp::ppermute(b, "i", perm); }, mesh, P("i"),
                           P("i"));
    std::vector<float> want(x.size(), 0.f);
    for (auto [src, dst] : perm)
      std::copy(x.begin() + src * cols, x.begin() + (src + 1) * cols, want.begin() + dst * cols);
    const int64_t received = bytes_received_by([&] {
      expect_local_blocks(f(xa), want, sp::Shape({8, cols}));
    });
    // Each pair from the other process's devices to this one's (0-3 or 4-7) moves one block.
    int64_t crossing = 0;
    for (auto [src, dst] : perm)
      if (dst / 4 == sp::process_index() && dst / 4 != src / 4) ++crossing;
    EXPECT_EQ(received, sp::process_count() == 1 ? 0 : crossing * block_bytes);
  }
}

TEST(CrossingGroups, AllToAllOnEverySplitAndConcatAxisSendsOnlyTheChunksThatCross) {
  sp::Mesh mesh = sp::make_mesh({8}, {"i"});
  const std::vector<int64_t> dims = {8, 8, 8};  // each device's block
  const int64_t per_device = 512;
  std::vector<float> x(size_t(8 * per_device));
  for (size_t k = 0; k < x.size(); ++k) x[k] = float((k * 7 + k / per_device * 3) % 13);
  sp::Array xa = sp::device_put(sp::array(x, {64, 8, 8}), sp::NamedSharding(mesh, P("i")));
  for (int split = 0; split < 3; ++split)
    for (int concat = 0; concat < 3; ++concat) {
      SCOPED_TRACE("split_axis " + std::to_string(split) + ", concat_axis " +
                   std::to_string(concat));
      auto f = sp::shard_map(
          [split, concat](sp::Array b) {
            return sp::all_to_all(b, "i", split, concat, {.tiled = true});
          },
          mesh, P("i"), P("i"));
      std::vector<int64_t> chunk = dims;
      chunk[size_t(split)] /= 8;
      std::vector<int64_t> out = chunk;
      out[size_t(concat)] *= 8;
      // Device i's output: chunk i (along split) of device j's block at place j (along concat).
      std::vector<float> want;
      for (int i = 0; i < 8; ++i)
        for (int64_t u0 = 0; u0 < out[0]; ++u0)
          for (int64_t u1 = 0; u1 < out[1]; ++u1)
            for (int64_t u2 = 0; u2 < out[2]; ++u2) {
              std::vector<int64_t> w = {u0, u1, u2};
              const int64_t j = w[size_t(concat)] / chunk[size_t(concat)];
              w[size_t(concat)] %= chunk[size_t(concat)];
              w[size_t(split)] += i * chunk[size_t(split)];
              want.push_back(x[size_t(j * per_device + (w[0] * 8 + w[1]) * 8 + w[2])]);
            }
      const int64_t received = bytes_received_by([&] {
        expect_local_blocks(f(xa), want, sp::Shape({8 * out[0], out[1], out[2]}));
      });
      // Each of this process's 4 devices sends one chunk (64 floats) to each of the other's 4.
      EXPECT_EQ(received, sp::process_count() == 1 ? 0 : 4 * 4 * 64 * 4);
    }
}

// ---- psum_scatter and whole-value gathers, on any job ------------------------------------------
//
// These tests take the job as it comes: ctest runs them on 2 processes of 4 devices, on 3 of 2,
// on 3 of 1, 2 and 2 devices, and in one process of 8, where they check that the host values are
// what one process computes.

// Device d's block of `per_device` values of many magnitudes, so that sums over the devices in
// another order than theirs differ in the last bits.
std::vector<float> ragged(int64_t devices, int64_t per_device) {
  std::vector<float> v(size_t(devices * per_device));
  for (int64_t d = 0; d < devices; ++d)
    for (int64_t k = 0; k < per_device; ++k)
      v[size_t(d * per_device + k)] = float((d * 7919 + k * 104729) % 2003 - 1001) *
                                      std::ldexp(1.f, int((d * 5 + k) % 23) - 11);
  return v;
}

TEST(Processes, SmallReductionsInPartsSendTheLeadingBlocksReducedToOne) {
  // A psum of 32 KiB per device over 2 processes of 4, with one process's bits. Process 0 holds
  // the group's first 4 blocks and sends process 1 their sum, where each element's left-to-right
  // sum starts, instead of the blocks; the parts are sized so that both receive about as much:
  // process 0 reduces a fifth of the elements over the 4 blocks it receives, process 1 the rest
  // over that sum and its own; then each receives the other's reduced part. With halves and
  // every block sent, each process received 2.5 blocks' bytes.
  sp::Mesh mesh = sp::make_mesh({8}, {"i"});
  const int64_t count = 8192;
  const std::vector<float> x = ragged(8, count);
  sp::Array xa = sp::device_put(sp::array(x, {8, count}), sp::NamedSharding(mesh, P("i")));
  std::vector<float> want(x.size());
  for (int64_t j = 0; j < count; ++j) {
    float sum = x[size_t(j)];
    for (int64_t d = 1; d < 8; ++d) sum += x[size_t(d * count + j)];
    for (int64_t d = 0; d < 8; ++d) want[size_t(d * count + j)] = sum;
  }
  auto f = sp::shard_map([](sp::Array b) { return sp::lax::psum(b, "i"); }, mesh, P("i"), P("i"));
  const int64_t received = bytes_received_by([&] {
    expect_local_blocks(f(xa), want, sp::Shape({8, count}));
  });
  const int64_t first = count / 5, rest = count - first;
  EXPECT_EQ(received, (sp::process_index() == 0 ? 4 * first + rest : rest + first) * 4);
}

// ---- The bound on the communicators of device groups ---------------------------------------

// Sets config::mpi_communicator_limit for one test, on every process alike.
class CommunicatorLimit {
 public:
  explicit CommunicatorLimit(size_t n) { sp::config::set_mpi_communicator_limit(n); }
  ~CommunicatorLimit() { sp::config::set_mpi_communicator_limit(saved_); }
  CommunicatorLimit(const CommunicatorLimit&) = delete;
  CommunicatorLimit& operator=(const CommunicatorLimit&) = delete;

 private:
  size_t saved_ = sp::config::mpi_communicator_limit();
};

size_t live_communicators() {
  return size_t(sp::detail::live_mpi_communicators());
}

// A mesh {8} over the devices in the order of `order` (device ids).
sp::Mesh mesh_over(const std::vector<int>& order) {
  const std::vector<sp::Device> all = sp::devices();
  std::vector<sp::Device> devices;
  for (int id : order) devices.push_back(all[size_t(id)]);
  return sp::Mesh(devices, {8}, {"i"});
}

// A psum and a tiled all_gather over a mesh {8} with the devices in the order of `order`: the
// group of the whole mesh is new for each order. Each device's row is device_rows(cols)'s row of
// its mesh position, so every block of the psum is the column sums and every block of the
// gather is the whole value, which needs each block in its mesh position.
void expect_psum_and_gather(const std::vector<int>& order, int64_t cols) {
  sp::Mesh mesh = mesh_over(order);
  const std::vector<float> x = device_rows(cols);
  sp::Array xa = sp::device_put(sp::array(x, {8, cols}), sp::NamedSharding(mesh, P("i")));
  auto f = sp::shard_map(
      [](sp::Array b) {
        return std::vector<sp::Array>{sp::lax::psum(b, "i"),
                                      sp::lax::all_gather(b, "i", {.tiled = true})};
      },
      mesh, P("i"), P("i"));
  std::vector<sp::Array> got = f(xa);
  std::vector<float> sums(static_cast<size_t>(cols), 0.f), want_sum, want_gather;
  for (int64_t d = 0; d < 8; ++d)
    for (int64_t j = 0; j < cols; ++j) sums[size_t(j)] += x[size_t(d * cols + j)];
  for (int d = 0; d < 8; ++d) {
    want_sum.insert(want_sum.end(), sums.begin(), sums.end());
    want_gather.insert(want_gather.end(), x.begin(), x.end());
  }
  expect_local_blocks(got[0], want_sum, sp::Shape({8, cols}));
  expect_local_blocks(got[1], want_gather, sp::Shape({64, cols}));
}

// A psum over `groups` of a mesh {8} in device order, against the sums on the host.
void expect_grouped_psum(const sp::AxisIndexGroups& groups, int64_t cols) {
  sp::Mesh mesh = sp::make_mesh({8}, {"i"});
  const std::vector<float> x = device_rows(cols);
  sp::Array xa = sp::device_put(sp::array(x, {8, cols}), sp::NamedSharding(mesh, P("i")));
  auto f = sp::shard_map(
      [groups](sp::Array b) { return sp::psum(b, "i", {.axis_index_groups = groups}); }, mesh,
      P("i"), P("i"), {.check_vma = false});
  const std::vector<float> want = over_devices([&](int d) {
    std::vector<float> r(size_t(cols), 0.f);
    for (int g : group_of(groups, d).first)
      for (int64_t j = 0; j < cols; ++j) r[size_t(j)] += x[size_t(g * cols + j)];
    return r;
  });
  expect_local_blocks(f(xa), want, sp::Shape({8, cols}));
}

// Pairs of mesh positions {8}: order[0] with order[1], order[2] with order[3], and so on.
sp::AxisIndexGroups pairs_of(const std::vector<int>& order) {
  sp::AxisIndexGroups groups;
  for (size_t k = 0; k < order.size(); k += 2) groups.push_back({order[k], order[k + 1]});
  return groups;
}

TEST(GroupCommunicators, ManyDistinctGroupsKeepAtMostTheBound) {
  // Meshes over 40 orders of the devices, and psums over 40 pairings of the mesh positions, each
  // naming groups no earlier launch named (with members in both processes), many more than the
  // bound of 6 communicators: the least recently used are freed before new ones are made, and
  // every launch gets its values.
  CommunicatorLimit limit(6);
  std::vector<int> order = {0, 1, 2, 3, 4, 5, 6, 7};
  for (int m = 0; m < 40; ++m) {
    for (int step = 0; step < 997; ++step) std::next_permutation(order.begin(), order.end());
    expect_psum_and_gather(order, 3);
    EXPECT_LE(live_communicators(), 6u) << "mesh " << m;
    expect_grouped_psum(pairs_of(order), 5);
    EXPECT_LE(live_communicators(), 6u) << "pairing " << m;
  }
  EXPECT_EQ(live_communicators(), 6u);
}

TEST(GroupCommunicators, AProgramCompiledEarlyRunsAgainAfterItsCommunicatorsWereFreed) {
  // Programs compiled and run first: a psum over the devices {0, 4} (one per process, so each
  // process runs its launch on the calling thread and keeps the launch's Communicator, with its
  // plan of the group between processes, for the next launch), and a psum over axis_index_groups
  // that cross processes: 1 and 5 communicators, the bound of 6. Launches over 6 meshes of other
  // device orders then free them all, least recently used first; run again, each makes its own
  // anew (and drops the kept Communicator) and gets its values.
  CommunicatorLimit limit(6);
  const std::vector<sp::Device> all = sp::devices();
  sp::Mesh pair({all[0], all[4]}, {2}, {"a"});
  auto pair_step = sp::jit(
      sp::shard_map([](sp::Array b) { return sp::lax::psum(b, "a") + b; }, pair, P("a"), P("a")));
  std::vector<float> v = {1, 2, 3, -1, 0, 5};
  sp::Array w = sp::device_put(sp::array(v, {2, 3}), sp::NamedSharding(pair, P("a")));
  const sp::AxisIndexGroups groups = kCrossingGroups[0];
  std::vector<int> order = {0, 1, 2, 3, 4, 5, 6, 7};
  for (int round = 0; round < 3; ++round) {
    for (int again = 0; again < 2; ++again) {  // the second with the kept Communicator
      w = pair_step(w);
      for (size_t j = 0; j < 3; ++j) {
        const float sum = v[j] + v[3 + j];
        v[j] += sum;
        v[3 + j] += sum;
      }
      expect_local_blocks(w, v, sp::Shape({2, 3}));
      expect_grouped_psum(groups, 4);
    }
    EXPECT_EQ(live_communicators(), 6u) << "round " << round;
    for (int m = 0; m < 6; ++m) {
      std::next_permutation(order.begin(), order.end());
      expect_psum_and_gather(order, 2);
      EXPECT_LE(live_communicators(), 6u) << "round " << round << ", mesh " << m;
    }
  }
}

TEST(AnyJob, PsumScatterGivesOneProcesssBitsAndReceivesOnlyTheChunksOfItsDevices) {
  const int64_t n = sp::device_count(), local = sp::local_device_count();
  sp::Mesh mesh = sp::make_mesh({n}, {"i"});
  // Blocks of [n, n·m]: one small, one of 64 KiB or just under (which one process reduces from
  // copies of its inputs) and one just above (reduced in place).
  const int64_t m64 = 16384 / (n * n);
  for (int64_t m : {int64_t(1), m64, m64 + 1})
    for (int dim : {0, 1}) {
      SCOPED_TRACE("m " + std::to_string(m) + ", scatter_dimension " + std::to_string(dim));
      const int64_t rows = n, cols = n * m, per = rows * cols;
      const std::vector<float> x = ragged(n, per);
      sp::Array xa =
          sp::device_put(sp::array(x, {n * rows, cols}), sp::NamedSharding(mesh, P("i")));
      auto f = sp::shard_map(
          [dim](sp::Array b) {
            return sp::psum_scatter(b, "i", {.scatter_dimension = dim, .tiled = true});
          },
          mesh, P("i"), P("i"));
      // Device i: chunk i along `dim` of the sum of the blocks, in device order (and, to show
      // that the order shows, in the reverse order).
      const int64_t out_rows = dim == 0 ? 1 : rows, out_cols = dim == 0 ? cols : m;
      std::vector<float> want, reversed;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t r = 0; r < out_rows; ++r)
          for (int64_t k = 0; k < out_cols; ++k) {
            const int64_t at = dim == 0 ? (i + r) * cols + k : r * cols + i * m + k;
            float sum = x[size_t(at)], back = x[size_t((n - 1) * per + at)];
            for (int64_t d = 1; d < n; ++d) {
              sum += x[size_t(d * per + at)];
              back += x[size_t((n - 1 - d) * per + at)];
            }
            want.push_back(sum);
            reversed.push_back(back);
          }
      EXPECT_TRUE(n <= 2 || want != reversed);
      const int64_t received = bytes_received_by([&] {
        expect_local_blocks(f(xa), want, sp::Shape({n * out_rows, out_cols}));
      });
      // This process's devices' chunks of the other devices' blocks.
      EXPECT_EQ(received, local * (n - local) * (per / n) * 4);
    }
}

// The bytes of the elements of `x` that no block on this process holds.
int64_t bytes_not_held(const sp::Array& x) {
  int64_t elements = 0;
  std::vector<int64_t> at(size_t(x.ndim()), 0);
  for (int64_t k = 0; k < x.shape().size(); ++k) {
    elements += held_here(x, at) ? 0 : 1;
    for (int d = x.ndim() - 1; d >= 0 && ++at[size_t(d)] == x.shape()[d]; --d) at[size_t(d)] = 0;
  }
  return elements * int64_t(sp::itemsize(x.dtype()));
}

TEST(AnyJob, ProcessAllgatherReceivesOnlyTheBlocksThisProcessLacksOnce) {
  const int64_t h = sp::device_count() / 2;
  if (h == 0) GTEST_SKIP() << "needs two devices";
  // A 2 × h mesh whose rows are the first h devices and the next h, with devices h-1 and h
  // swapped: a column is then held by one process or by two, and a process lacks the columns
  // that none of its devices holds (one process reads the value where it is).
  std::vector<int> ids;
  for (int64_t k = 0; k < 2 * h; ++k) ids.push_back(int(k == h - 1 ? h : k == h ? h - 1 : k));
  sp::Mesh mesh = mesh_of(ids, {2, h}, {"x", "y"});
  sp::Array value = sp::arange(int(8 * h)).astype(sp::float32).reshape({4, 2 * h});
  for (const P& spec : {P(sp::None, "y"), P("x", "y"), P("x")}) {
    SCOPED_TRACE(spec.repr());
    sp::Array x = sp::device_put(value, sp::NamedSharding(mesh, spec));
    const int64_t lacked = bytes_not_held(x);
    std::vector<float> got;
    const int64_t received =
        bytes_received_by([&] { got = sp::process_allgather(x, true).to_vector<float>(); });
    EXPECT_EQ(received, lacked);
    EXPECT_EQ(got, iota(8 * h));
    // A read of the whole value with collective reads is the same gather.
    sp::distributed::set_collective_reads(true);
    sp::Array y = sp::device_put(value, sp::NamedSharding(mesh, spec));
    const int64_t read = bytes_received_by([&] { got = y.to_vector<float>(); });
    EXPECT_EQ(read, lacked);
    EXPECT_EQ(got, iota(8 * h));
    sp::distributed::set_collective_reads(false);
  }
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  sp::distributed::initialize();
  return RUN_ALL_TESTS();
}

// Products that read the same B buffer again share one packed copy of B (gemm's b_buffer):
// their results must be dnnl_sgemm's bit for bit, and a packed copy must never outlive the
// values it was packed from.
#include <gtest/gtest.h>

#include "backends/cpu/buffer_view.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/parallel.h"
#include "core/buffer.h"

#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

namespace sp = spmd;
namespace cpu = spmd::cpu;

namespace {

// Runs the calling thread's kernels on one thread (as device threads sharing the cores do),
// which is where packed products apply.
struct OneThread {
  OneThread() { cpu::set_thread_limit(1); }
  ~OneThread() { cpu::set_thread_limit(0); }
};

std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist;
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// A buffer holding `v` and a second reference to it, as the arrays of several devices (or a
// caller's array and a run's) share one buffer: buffers one array alone holds are not packed.
struct SharedB {
  std::shared_ptr<sp::Buffer> buffer, other_holder;
  const float* data() const { return static_cast<const float*>(buffer->data()); }
};
SharedB buffer_of(const std::vector<float>& v) {
  auto b = sp::Buffer::allocate(v.size() * sizeof(float));
  std::memcpy(b->data(), v.data(), v.size() * sizeof(float));
  return {b, b};
}

std::vector<float> product(const cpu::GemmShape& s, const std::vector<float>& a, const float* b,
                           const std::shared_ptr<sp::Buffer>* b_buffer = nullptr) {
  std::vector<float> c(size_t(s.m * s.n));
  cpu::gemm(sp::DType::float32, sp::DType::float32, s, a.data(), b, c.data(), b_buffer);
  return c;
}

bool bitwise_equal(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

cpu::GemmShape shape(bool trans_a, bool trans_b) {
  return {.batch = 1, .m = 96, .n = 320, .k = 288, .trans_a = trans_a, .trans_b = trans_b};
}

TEST(PackedGemm, RepeatedProductsEqualUnpackedBitForBit) {
  OneThread one;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const cpu::GemmShape s = shape(ta, tb);
      const auto a = random_floats(size_t(s.m * s.k), 1);
      const SharedB b = buffer_of(random_floats(size_t(s.k * s.n), 2));
      const std::vector<float> want = product(s, a, b.data());
      // The first call runs unpacked, the second packs B, the third reuses the packed copy.
      for (int call = 0; call < 3; ++call)
        EXPECT_TRUE(bitwise_equal(product(s, a, b.data(), &b.buffer), want))
            << "ta " << ta << " tb " << tb << " call " << call;
    }
}

TEST(PackedGemm, NewValuesInAFreedBuffersPlaceArePackedAfresh) {
  OneThread one;
  const cpu::GemmShape s = shape(false, true);
  const auto a = random_floats(size_t(s.m * s.k), 3);
  // Each B is dropped before the next is allocated, so the allocator hands their memory out
  // again (freed blocks are kept for reuse) while each holds other values.
  for (unsigned seed = 10; seed < 16; ++seed) {
    const SharedB b = buffer_of(random_floats(size_t(s.k * s.n), seed));
    const std::vector<float> want = product(s, a, b.data());
    for (int call = 0; call < 2; ++call)
      EXPECT_TRUE(bitwise_equal(product(s, a, b.data(), &b.buffer), want))
          << "seed " << seed << " call " << call;
  }
}

TEST(PackedGemm, DevicesSharingBGetTheUnpackedResult) {
  const cpu::GemmShape s = shape(false, true);
  const SharedB b = buffer_of(random_floats(size_t(s.k * s.n), 4));
  std::vector<std::vector<float>> a, got(8), want(8);
  for (unsigned d = 0; d < 8; ++d) a.push_back(random_floats(size_t(s.m * s.k), 20 + d));
  {
    OneThread one;
    for (size_t d = 0; d < 8; ++d) want[d] = product(s, a[d], b.data());
  }
  std::vector<std::thread> devices;
  for (size_t d = 0; d < 8; ++d)
    devices.emplace_back([&, d] {
      OneThread one;
      for (int step = 0; step < 3; ++step) got[d] = product(s, a[d], b.data(), &b.buffer);
    });
  for (auto& t : devices) t.join();
  for (size_t d = 0; d < 8; ++d) EXPECT_TRUE(bitwise_equal(got[d], want[d])) << "device " << d;
}

// B as the devices of a process share it: one buffer that each device's array holds.
struct WidelySharedB {
  std::shared_ptr<sp::Buffer> buffer;
  std::vector<std::shared_ptr<sp::Buffer>> holders;
  const float* data() const { return static_cast<const float*>(buffer->data()); }
};
WidelySharedB widely_shared(const std::vector<float>& v, int holders) {
  auto b = sp::Buffer::allocate(v.size() * sizeof(float));
  std::memcpy(b->data(), v.data(), v.size() * sizeof(float));
  return {b, std::vector<std::shared_ptr<sp::Buffer>>(size_t(holders), b)};
}

// Four devices meeting a B that all of them hold: none runs unpacked (the first sighting packs,
// where before the first product ran on dnnl_sgemm), B is packed once (in two halves of its
// columns at 128 rows, whole at 256), and every result equals dnnl_sgemm's bit for bit, at the row
// counts and widths of the training step's products (128 and 256 rows, K 784 and 1024), every
// transpose.
TEST(PackedGemm, DevicesSharingBPackItOnceInHalvesAtFirstSighting) {
  constexpr unsigned kDevices = 4;
  for (int64_t m : {128, 256})
    for (int64_t k : {784, 1024})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          SCOPED_TRACE("m " + std::to_string(m) + " k " + std::to_string(k) + " ta " +
                       std::to_string(ta) + " tb " + std::to_string(tb));
          const cpu::GemmShape s{
              .batch = 1, .m = m, .n = 1024, .k = k, .trans_a = ta, .trans_b = tb};
          const WidelySharedB b = widely_shared(random_floats(size_t(s.k * s.n), 5), kDevices);
          std::vector<std::vector<float>> a, got(kDevices), want(kDevices);
          for (unsigned d = 0; d < kDevices; ++d)
            a.push_back(random_floats(size_t(s.m * s.k), 40 + d));
          {
            OneThread one;
            for (size_t d = 0; d < kDevices; ++d) want[d] = product(s, a[d], b.data());
          }
          const cpu::PackedGemmCounts before = cpu::packed_gemm_counts();
          std::vector<std::thread> devices;
          for (size_t d = 0; d < kDevices; ++d)
            devices.emplace_back([&, d] {
              OneThread one;
              got[d] = product(s, a[d], b.data(), &b.buffer);
            });
          for (auto& t : devices) t.join();
          const cpu::PackedGemmCounts after = cpu::packed_gemm_counts();
          EXPECT_EQ(after.unpacked_sightings - before.unpacked_sightings, 0);
          EXPECT_EQ(after.parts_packed - before.parts_packed, m == 128 ? 2 : 1);
          EXPECT_EQ(after.packed_products - before.packed_products, int64_t(kDevices));
          for (size_t d = 0; d < kDevices; ++d)
            EXPECT_TRUE(bitwise_equal(got[d], want[d])) << "device " << d;
        }
}

// At 1024 rows B is packed whole (the halves' products would sum in another order there, and
// from 256 rows they cost more than one product).
TEST(PackedGemm, ProductsOfManyRowsPackBWhole) {
  OneThread one;
  const cpu::GemmShape s{
      .batch = 1, .m = 1024, .n = 1024, .k = 784, .trans_a = false, .trans_b = true};
  const WidelySharedB b = widely_shared(random_floats(size_t(s.k * s.n), 6), 4);
  const auto a = random_floats(size_t(s.m * s.k), 7);
  const std::vector<float> want = product(s, a, b.data());
  const cpu::PackedGemmCounts before = cpu::packed_gemm_counts();
  EXPECT_TRUE(bitwise_equal(product(s, a, b.data(), &b.buffer), want));
  const cpu::PackedGemmCounts after = cpu::packed_gemm_counts();
  EXPECT_EQ(after.parts_packed - before.parts_packed, 1);
  EXPECT_EQ(after.packed_products - before.packed_products, 1);
}

// Devices reading blocks of rows of one weight through views of their own (a dynamic_slice of
// a replicated weight, as layer 0 at 4x2 is): the devices of one block share one packed copy of
// it, packed at the first sighting since the weight is widely held, and every result is
// dnnl_sgemm's on the same rows. Without views looked up as their parent's part, every product
// ran unpacked (each view is held once).
TEST(PackedGemm, ViewsOfOneBlockShareItsPackedCopy) {
  constexpr int64_t kRows = 1024, kK = 784, kBlock = 512;
  const cpu::GemmShape s{
      .batch = 1, .m = 256, .n = kBlock, .k = kK, .trans_a = false, .trans_b = true};
  const WidelySharedB w = widely_shared(random_floats(size_t(kRows * kK), 8), 8);
  constexpr size_t kDevices = 4;  // devices 0, 1 read rows [0, 512), devices 2, 3 the rest
  const auto offset = [&](size_t d) { return size_t(d / 2) * size_t(kBlock * kK); };
  std::vector<std::vector<float>> a, got(kDevices), want(kDevices);
  for (unsigned d = 0; d < kDevices; ++d) a.push_back(random_floats(size_t(s.m * s.k), 60 + d));
  {
    OneThread one;
    for (size_t d = 0; d < kDevices; ++d) want[d] = product(s, a[d], w.data() + offset(d));
  }
  const cpu::PackedGemmCounts before = cpu::packed_gemm_counts();
  std::vector<std::thread> devices;
  for (size_t d = 0; d < kDevices; ++d)
    devices.emplace_back([&, d] {
      OneThread one;
      const std::shared_ptr<sp::Buffer> view = cpu::make_buffer_view(
          w.buffer, offset(d) * sizeof(float), size_t(kBlock * kK) * sizeof(float));
      got[d] = product(s, a[d], static_cast<const float*>(view->data()), &view);
    });
  for (auto& t : devices) t.join();
  const cpu::PackedGemmCounts after = cpu::packed_gemm_counts();
  EXPECT_EQ(after.unpacked_sightings - before.unpacked_sightings, 0);
  EXPECT_EQ(after.parts_packed - before.parts_packed, 2);  // one per block
  EXPECT_EQ(after.packed_products - before.packed_products, int64_t(kDevices));
  for (size_t d = 0; d < kDevices; ++d)
    EXPECT_TRUE(bitwise_equal(got[d], want[d])) << "device " << d;
}

}  // namespace

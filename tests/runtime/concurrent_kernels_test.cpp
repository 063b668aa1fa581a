// Kernels run on every device thread at once: a batched product (oneDNN's matmul primitive,
// shared by all threads through its cache) must give each device its own result.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

namespace sp = spmd;
using sp::P;

namespace {

TEST(ConcurrentKernels, BatchedProductsOnEveryDeviceAtOnceAreExact) {
  if (sp::device_count() < 8) GTEST_SKIP() << "needs 8 devices";
  sp::Mesh mesh = sp::make_mesh({8}, {"x"});
  sp::Array a = sp::sin(sp::arange(32 * 8 * 16).astype(sp::float32).reshape({32, 8, 16}));
  sp::Array b = sp::cos(sp::arange(32 * 16 * 8).astype(sp::float32).reshape({32, 16, 8}));
  sp::Array c = sp::sin(sp::arange(32 * 8 * 8).astype(sp::float32).reshape({32, 8, 8}));
  auto f = [](const sp::Array& a, const sp::Array& b, const sp::Array& c) {
    return sp::matmul(sp::transpose(sp::matmul(a, b), {0, 2, 1}), c);
  };
  const std::vector<float> want = f(a, b, c).to_vector<float>();
  auto per_device = sp::jit(sp::shard_map(f, mesh, {P("x"), P("x"), P("x")}, P("x")));
  int wrong = 0;
  for (int i = 0; i < 1500; ++i) wrong += per_device(a, b, c).to_vector<float>() != want ? 1 : 0;
  EXPECT_EQ(wrong, 0) << "of 1500 runs";
}

}  // namespace

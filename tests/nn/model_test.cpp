// The seed's Model end to end against JAX: Linear's initialisation, forward, MSELoss and its
// gradients through jit(value_and_grad(functional_call)), and one step on the seed's 4x2
// data + tensor parallel shardings, which must give the unsharded values and keep the shardings.
#include <spmd/spmd.h>

#include "nn/seed_model.h"
#include "support/support.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace sp = spmd;
namespace nn = spmd::nn;
using sp::Array;
using sp::P;
using spmd_test::arrays_close;
using spmd_test::arrays_equal;
using spmd_test::kGoldenSizes;
using spmd_test::Model;
using spmd_test::nn_golden;

namespace {

constexpr double kRtol = 1e-6, kAtol = 1e-6;
using Batch = std::pair<Array, Array>;

// The seed's loss_fun: MSELoss of the model run with `params`.
auto loss_fn(const Model& model) {
  return [&model](const nn::StateDict& params, const Batch& batch) {
    return nn::MSELoss{}(nn::functional_call(model, params, batch.first), batch.second);
  };
}

Batch golden_batch() {
  return {nn_golden("model.x"), nn_golden("model.y")};
}

}  // namespace

TEST(NnModel, LinearDrawsTorchsInitFromTheKey) {
  nn::Linear linear(3, 5, sp::random::key(0));
  EXPECT_TRUE(arrays_equal(linear->weight, nn_golden("linear.weight")));
  EXPECT_TRUE(arrays_equal(linear->bias, nn_golden("linear.bias")));
}

TEST(NnModel, ForwardMatchesJax) {
  Model model(kGoldenSizes, sp::random::key(42));
  for (const auto& [name, value] : model.state_dict())
    EXPECT_TRUE(arrays_equal(value, nn_golden("model." + name))) << name;
  EXPECT_TRUE(arrays_close(model(nn_golden("model.x")), nn_golden("model.out"), kRtol, kAtol));
}

TEST(NnModel, JitValueAndGradOfFunctionalCallMatchesJax) {
  Model model(kGoldenSizes, sp::random::key(42));
  auto step = sp::jit(sp::value_and_grad(loss_fn(model)));
  auto [loss, grads] = step(model.state_dict(), golden_batch());
  EXPECT_TRUE(arrays_close(loss, nn_golden("model.loss"), kRtol, kAtol));
  ASSERT_EQ(grads.keys(), model.state_dict().keys());
  for (const auto& [name, grad] : grads)
    EXPECT_TRUE(arrays_close(grad, nn_golden("model.grad." + name), kRtol, kAtol)) << name;
  // The traced function took the params as an argument: other params give other values.
  nn::StateDict halved = sp::tree_map([](const Array& p) { return p * 0.5f; }, model.state_dict());
  EXPECT_FALSE(arrays_close(step(halved, golden_batch()).first, loss, kRtol, kAtol));
  EXPECT_TRUE(arrays_close(step(halved, golden_batch()).first,
                           loss_fn(model)(halved, golden_batch()), kRtol, kAtol));
}

// The seed's name_to_sharding on a ("batch", "model") 4x2 mesh.
TEST(NnModel, TensorParallelStepMatchesUnshardedAndKeepsShardings) {
  Model model(kGoldenSizes, sp::random::key(42));
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"batch", "model"});
  sp::NamedSharding replicated(mesh, P());
  std::vector<std::pair<std::string, P>> name_to_spec = {{"layers.0.weight", P()},
                                                         {"layers.0.bias", P()},
                                                         {"layers.1.weight", P("model")},
                                                         {"layers.1.bias", P("model")},
                                                         {"layers.2.weight", P(sp::None, "model")},
                                                         {"layers.2.bias", P()},
                                                         {"layers.3.weight", P()},
                                                         {"layers.3.bias", P()}};
  std::vector<sp::ShardingTree> shardings;
  for (const auto& [name, spec] : name_to_spec)
    shardings.emplace_back(sp::NamedSharding(mesh, spec));
  nn::StateDict params = sp::device_put(model.state_dict(), shardings);
  Batch batch = sp::device_put(golden_batch(), sp::NamedSharding(mesh, P("batch")));

  auto step = sp::jit(sp::value_and_grad(loss_fn(model)));
  auto [loss, grads] = step(params, batch);
  auto [loss_single, grads_single] = step(model.state_dict(), golden_batch());
  EXPECT_TRUE(arrays_close(loss, loss_single, 1e-5, 1e-6));
  for (const auto& [name, spec] : name_to_spec) {
    EXPECT_TRUE(arrays_close(grads.at(name), grads_single.at(name), 1e-5, 1e-6)) << name;
    auto sharding = std::dynamic_pointer_cast<const sp::NamedSharding>(grads.at(name).sharding());
    ASSERT_TRUE(sharding) << name;
    EXPECT_EQ(sharding->spec(), spec) << name << " has " << sharding->spec().repr();
    EXPECT_EQ(sharding->mesh(), mesh) << name;
  }
}

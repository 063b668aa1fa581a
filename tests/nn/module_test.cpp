// Module: registration order and torch's dotted names, state_dict / load_state_dict and their
// errors, the containers, and functional_call's substitution (errors, nesting, threads).
#include <spmd/spmd.h>

#include "nn/seed_model.h"
#include "support/support.h"

#include <gtest/gtest.h>

#include <barrier>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace sp = spmd;
namespace nn = spmd::nn;
using sp::Array;
using spmd_test::arrays_equal;
using spmd_test::error_message;
using spmd_test::Model;

namespace {

std::vector<std::string> shape_strings(const nn::StateDict& sd) {
  std::vector<std::string> out;
  for (const auto& [name, value] : sd) out.push_back(name + " " + value.shape().str());
  return out;
}

// A module with its own parameter registered between two submodules: torch lists a module's own
// parameters before its children's, whatever the order of registration.
struct Mixed : nn::Module {
  nn::Linear second{nullptr}, first{nullptr};
  nn::Parameter scale;
  Mixed() {
    second = register_module("second", nn::Linear(2, 3, sp::random::key(1)));
    scale = register_parameter("scale", sp::ones({3}));
    first = register_module("first", nn::Linear(3, 1, sp::random::key(2), /*bias=*/false));
  }
  Array forward(Array x) const override { return first(second(x) * scale); }
};

}  // namespace

TEST(Module, SeedModelStateDictHasTorchNamesInOrder) {
  Model model({784, 1024, 1024, 1024, 10}, sp::random::key(0));
  EXPECT_EQ(shape_strings(model.state_dict()),
            (std::vector<std::string>{"layers.0.weight (1024, 784)", "layers.0.bias (1024,)",
                                      "layers.1.weight (1024, 1024)", "layers.1.bias (1024,)",
                                      "layers.2.weight (1024, 1024)", "layers.2.bias (1024,)",
                                      "layers.3.weight (10, 1024)", "layers.3.bias (10,)"}));
  EXPECT_EQ(model.named_parameters().keys(), model.state_dict().keys());
  EXPECT_EQ(model.parameters().size(), 8u);
  EXPECT_EQ(model.layers.size(), 4u);
  EXPECT_EQ(model.name(), "Model");
  EXPECT_EQ(model.layers->name(), "ModuleList");
  EXPECT_EQ(model.layers[0]->name(), "Linear");
}

TEST(Module, OwnParametersComeBeforeSubmodules) {
  Mixed m;
  EXPECT_EQ(shape_strings(m.state_dict()),
            (std::vector<std::string>{"scale (3,)", "second.weight (3, 2)", "second.bias (3,)",
                                      "first.weight (1, 3)"}));
  std::vector<std::string> modules;
  for (const auto& [name, module] : m.named_modules())
    modules.push_back(name + ":" + module->name());
  EXPECT_EQ(modules, (std::vector<std::string>{":Mixed", "second:Linear", "first:Linear"}));
  EXPECT_FALSE(m.first->bias.defined());
  EXPECT_EQ(m(sp::ones({4, 2})).shape(), (sp::Shape{4, 1}));
}

TEST(Module, SharedSubmoduleIsListedOnceByNamedParameters) {
  nn::Linear shared(2, 2, sp::random::key(0));
  nn::Sequential seq(shared, nn::ReLU(), shared);
  EXPECT_EQ(seq->state_dict().keys(),
            (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  EXPECT_EQ(seq->named_parameters().keys(), (std::vector<std::string>{"0.weight", "0.bias"}));
}

TEST(Module, RegistrationRejectsBadNames) {
  struct Bad : nn::Module {
    void add(const std::string& name) { register_parameter(name, sp::zeros({1})); }
  } bad;
  bad.add("w");
  EXPECT_EQ(error_message<sp::KeyError>([&] { bad.add("w"); }),
            "[register_parameter] \"w\" is already registered in Bad");
  EXPECT_EQ(error_message<sp::KeyError>([&] { bad.add("a.b"); }),
            "[register_parameter] the name can't contain \".\", got \"a.b\"");
  EXPECT_EQ(error_message<sp::KeyError>([&] { bad.add(""); }),
            "[register_parameter] the name can't be empty");
}

// A module inside itself would make state_dict, named_modules and forward recurse without end
// (a stack overflow; torch's Python recursion limit): registering one is refused.
TEST(Module, RegistrationRejectsCycles) {
  nn::Sequential outer{nn::ReLU()}, inner;
  EXPECT_EQ(error_message<sp::ValueError>([&] { outer.push_back(outer); }),
            "[register_module] the module \"1\" is Sequential itself; a module cannot be its own "
            "submodule");
  outer.push_back(inner);
  EXPECT_EQ(error_message<sp::ValueError>([&] { inner.push_back(outer); }),
            "[register_module] the module \"0\" holds Sequential as \"1\"; a module cannot be "
            "its own submodule");
  EXPECT_EQ(outer.size(), 2u);
  EXPECT_EQ(inner.size(), 0u);
  EXPECT_EQ(outer->named_modules().size(), 3u);
  // The same module twice, side by side, is no cycle (torch shares it too).
  nn::Sequential twice{nn::ReLU()};
  twice.push_back(twice[0]);
  EXPECT_TRUE(arrays_equal(twice(sp::array({-1.0f, 2.0f})), sp::array({0.0f, 2.0f})));
}

TEST(Module, LoadStateDictReplacesParameters) {
  Model model({3, 4, 2}, sp::random::key(0));
  Model other({3, 4, 2}, sp::random::key(1));
  model.load_state_dict(other.state_dict());
  for (const auto& [name, value] : other.state_dict())
    EXPECT_TRUE(arrays_equal(model.state_dict().at(name), value)) << name;
  Array x = sp::random::normal(sp::random::key(5), {2, 3});
  EXPECT_TRUE(arrays_equal(model(x), other(x)));
}

TEST(Module, LoadStateDictErrorsListEveryProblemAsTorchDoes) {
  Model model({3, 4, 2}, sp::random::key(0));
  nn::StateDict sd = model.state_dict();
  Array before = sd.at("layers.0.weight");
  nn::StateDict bad;
  bad.insert("layers.0.weight", sp::zeros({3, 4}));
  bad.insert("layers.1.weight", sd.at("layers.1.weight"));
  bad.insert("extra", sp::zeros({1}));
  EXPECT_EQ(error_message<sp::RuntimeError>([&] { model.load_state_dict(bad); }),
            "[load_state_dict] Error(s) in loading state_dict for Model:\n"
            "\tUnexpected key(s) in state_dict: \"extra\".\n"
            "\tMissing key(s) in state_dict: \"layers.0.bias\", \"layers.1.bias\".\n"
            "\tsize mismatch for layers.0.weight: copying a param with shape (3, 4) from "
            "checkpoint, the shape in current model is (4, 3).");
  // Nothing was loaded, not even the matching key.
  EXPECT_TRUE(arrays_equal(model.state_dict().at("layers.0.weight"), before));
  nn::StateDict empty = sd;
  empty.insert("layers.1.bias", Array());
  EXPECT_EQ(error_message<sp::RuntimeError>([&] { model.load_state_dict(empty); }),
            "[load_state_dict] Error(s) in loading state_dict for Model:\n"
            "\tthe value of layers.1.bias is an empty Array handle.");
  EXPECT_TRUE(arrays_equal(model.state_dict().at("layers.0.weight"), before));
  // Non-strict loading skips missing and unexpected keys but not shape mismatches.
  bad.insert("layers.0.weight", sp::zeros({4, 3}));
  model.load_state_dict(bad, /*strict=*/false);
  EXPECT_TRUE(arrays_equal(model.state_dict().at("layers.0.weight"), sp::zeros({4, 3})));
  EXPECT_TRUE(arrays_equal(model.state_dict().at("layers.0.bias"), sd.at("layers.0.bias")));
}

TEST(Module, LoadStateDictCastsToTheParameterDtype) {
  nn::Linear linear(2, 1, sp::random::key(0));
  linear->load_state_dict({{"weight", sp::array<int32_t>({1, 2}, {1, 2})}}, false);
  EXPECT_TRUE(arrays_equal(linear->weight, sp::array<float>({1, 2}, {1, 2})));
  EXPECT_EQ(error_message<sp::RuntimeError>([&] {
              linear->load_state_dict({{"bias", sp::zeros({2})}}, false);
            }),
            "[load_state_dict] Error(s) in loading state_dict for Linear:\n\tsize mismatch for "
            "bias: copying a param with shape (2,) from checkpoint, the shape in current model "
            "is (1,).");
}

TEST(Module, ContainersIndexIterateAndChain) {
  nn::Sequential seq(nn::Linear(2, 3, sp::random::key(0)), nn::ReLU(),
                     nn::Linear(3, 1, sp::random::key(1)));
  Array x = sp::random::normal(sp::random::key(2), {5, 2});
  Array expected = seq[2](sp::relu(seq[0](x)));
  EXPECT_TRUE(arrays_equal(seq(x), expected));
  EXPECT_EQ(seq[-1]->as<nn::LinearImpl>()->in_features, 3);
  EXPECT_EQ(seq[1]->as<nn::LinearImpl>(), nullptr);
  EXPECT_EQ(error_message<sp::IndexError>([&] { seq[3]; }),
            "[Sequential] index 3 is out of range for 3 modules");
  nn::ModuleList list;
  list.push_back(nn::ReLU());
  EXPECT_EQ(list->state_dict().size(), 0u);
  EXPECT_EQ(error_message<sp::NotImplementedError>([&] { list(x); }),
            "[ModuleList] a ModuleList has no forward; call its modules in turn");
  EXPECT_EQ(error_message<sp::NotImplementedError>([&] { nn::Module()(x); }),
            "[Module] Module is missing the required \"forward\" function");
  nn::Linear empty(nullptr);
  EXPECT_EQ(error_message<sp::ValueError>([&] { empty(x); }),
            "[ModuleHolder] the holder is empty (constructed from nullptr); assign a module to "
            "it before use");
}

TEST(Module, LinearChecksItsInput) {
  nn::Linear linear(3, 2, sp::random::key(0));
  EXPECT_EQ(error_message<sp::ShapeError>([&] {
              linear(sp::zeros({4, 2}));
            }),
            "[Linear] input must have 3 features in its last axis, got shape (4, 2)");
}

TEST(Module, ParametersReadAsArraysInExpressions) {
  // As a libtorch parameter is a Tensor: operators and printing take a Parameter as its Array.
  nn::Linear linear(3, 2, sp::random::key(0));
  const Array w = linear->weight.value(), b = linear->bias.value();
  EXPECT_TRUE(arrays_equal(linear->weight * 2.f, w * 2.f));
  EXPECT_TRUE(arrays_equal(1.f - linear->bias, 1.f - b));
  EXPECT_TRUE(arrays_equal(linear->bias + linear->bias, b + b));
  EXPECT_TRUE(arrays_equal(-linear->bias, -b));
  EXPECT_TRUE(arrays_equal(linear->bias > 0.f, b > 0.f));
  std::ostringstream printed, expected;
  printed << linear->weight;
  expected << w;
  EXPECT_EQ(printed.str(), expected.str());
  // Inside functional_call the operators read the substituted value.
  struct Doubled : nn::Module {
    nn::Linear inner{nullptr};
    explicit Doubled(nn::Linear l) { inner = register_module("inner", l); }
    Array forward(Array x) const override { return x * 0.f + inner->weight * 2.f; }
  };
  Doubled doubled(linear);
  nn::StateDict prefixed = {{"inner.weight", sp::ones({2, 3})}, {"inner.bias", sp::zeros({2})}};
  EXPECT_TRUE(arrays_equal(nn::functional_call(doubled, prefixed, sp::zeros({2, 3})),
                           sp::full({2, 3}, 2.f)));
}

TEST(FunctionalCall, UsesTheGivenParamsAndLeavesTheModelAlone) {
  Model model({3, 4, 2}, sp::random::key(0));
  Model other({3, 4, 2}, sp::random::key(1));
  Array x = sp::random::normal(sp::random::key(5), {2, 3});
  Array own = model(x);
  EXPECT_TRUE(arrays_equal(nn::functional_call(model, other.state_dict(), x), other(x)));
  EXPECT_TRUE(arrays_equal(model(x), own));
  // Through a holder, and nested: the inner call substitutes only its module's parameters.
  nn::Sequential seq(nn::Linear(3, 3, sp::random::key(2)), nn::Linear(3, 3, sp::random::key(3)));
  nn::StateDict inner = {{"weight", sp::eye(3)}, {"bias", sp::zeros({3})}};
  nn::StateDict outer = seq->state_dict();
  outer.insert("0.bias", sp::ones({3}));
  Array nested = nn::functional_call(seq, outer, x);
  Array expected = seq[1](seq[0](x) + (sp::ones({3}) - seq[0]->as<nn::LinearImpl>()->bias));
  EXPECT_TRUE(spmd_test::arrays_close(nested, expected));
  Array identity_inner = nn::functional_call(seq[1], inner, x);
  EXPECT_TRUE(arrays_equal(identity_inner, x));
}

TEST(FunctionalCall, MissingExtraAndMisshapedParamsAreErrors) {
  Model model({3, 4, 2}, sp::random::key(0));
  Array x = sp::zeros({2, 3});
  nn::StateDict params = model.state_dict();
  nn::StateDict wrong = params;
  wrong.insert("layers.9.weight", sp::zeros({1}));
  EXPECT_EQ(error_message<sp::RuntimeError>([&] { nn::functional_call(model, wrong, x); }),
            "[functional_call] the parameters must have the keys of Model's state_dict; "
            "unexpected key(s) \"layers.9.weight\"");
  nn::StateDict partial = {{"layers.0.weight", params.at("layers.0.weight")}};
  EXPECT_EQ(error_message<sp::RuntimeError>([&] { nn::functional_call(model, partial, x); }),
            "[functional_call] the parameters must have the keys of Model's state_dict; missing "
            "key(s) \"layers.0.bias\", \"layers.1.weight\", \"layers.1.bias\"");
  params.insert("layers.1.bias", sp::zeros({3}));
  EXPECT_EQ(error_message<sp::RuntimeError>([&] { nn::functional_call(model, params, x); }),
            "[functional_call] parameter \"layers.1.bias\" must have shape (2,), got (3,)");
  params.insert("layers.1.bias", Array());
  EXPECT_EQ(error_message<sp::RuntimeError>([&] { nn::functional_call(model, params, x); }),
            "[functional_call] parameter \"layers.1.bias\" is an empty Array handle");
  // A failed call leaves no substitution behind.
  EXPECT_TRUE(arrays_equal(model(x), nn::functional_call(model, model.state_dict(), x)));
}

// Every thread enters its functional_call before any reads its parameter, so a substitution
// visible to other threads would be read by them.
TEST(FunctionalCall, ThreadsSubstituteIndependently) {
  constexpr int kThreads = 4;
  struct Scale : nn::Module {
    std::barrier<>* all_inside;
    nn::Parameter factor;
    explicit Scale(std::barrier<>* b) : all_inside(b) {
      factor = register_parameter("factor", Array(1.0f));
    }
    Array forward(Array x) const override {
      all_inside->arrive_and_wait();
      return x * factor;
    }
  };
  std::barrier all_inside(kThreads);
  Scale model(&all_inside);
  std::vector<Array> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      nn::StateDict params = {{"factor", Array(float(t + 2))}};
      got[size_t(t)] = nn::functional_call(model, params, Array(10.0f));
    });
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(got[size_t(t)].item<float>(), 10.0f * float(t + 2));
  EXPECT_EQ(model.state_dict().at("factor").item<float>(), 1.0f);
}

// sp::optim against optax: every configuration recorded by tools/goldens/gen_optim.py runs its
// five steps from the recorded grads, eagerly, under jit and on params sharded over a 4x2 mesh,
// and the params and state after each step must equal optax's bit for bit. Also: state names and
// their round trip through named tensors, moments placed like their params, and the errors.
#include <spmd/optim.h>
#include <spmd/spmd.h>

#include "support/support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace sp = spmd;
namespace optim = spmd::optim;
using sp::P;
using spmd_test::error_message;

namespace {

using Params = sp::OrderedDict<sp::Array>;

// One block of a golden file: the trees its lines hold, by kind ("params", "grads", "state").
using Block = std::map<std::string, Params>;

sp::Array parse_array(std::istringstream& line, const std::string& dtype) {
  std::string dims;
  line >> dims;
  sp::Shape shape{};
  if (dims != "-") {
    std::vector<int64_t> sizes;
    std::istringstream in(dims);
    for (std::string d; std::getline(in, d, ',');) sizes.push_back(std::stoll(d));
    shape = sp::Shape(sizes);
  }
  if (dtype == "int32") {
    std::vector<int32_t> values;
    for (int32_t v; line >> v;) values.push_back(v);
    return sp::array(values, shape);
  }
  std::vector<float> values;
  for (std::string v; line >> v;) values.push_back(std::strtof(v.c_str(), nullptr));
  return sp::array(values, shape);
}

Block parse_block(const std::string& text) {
  Block block;
  std::istringstream lines(text);
  for (std::string text_line; std::getline(lines, text_line);) {
    std::istringstream line(text_line);
    std::string kind, name, dtype;
    line >> kind >> name >> dtype;
    block[kind].insert(name, parse_array(line, dtype));
  }
  return block;
}

// "init", then the steps in order.
std::vector<Block> load_case(const std::string& name) {
  std::map<std::string, std::string> blocks = spmd_test::golden_blocks("optim/" + name + ".txt");
  std::vector<Block> out{parse_block(blocks.at("init"))};
  for (int step = 1; blocks.contains("step " + std::to_string(step)); ++step)
    out.push_back(parse_block(blocks.at("step " + std::to_string(step))));
  return out;
}

struct Case {
  std::string name;
  optim::Optimizer opt;
};

std::vector<Case> cases() {
  return {{"sgd", optim::sgd(0.1)},
          {"sgd_momentum", optim::sgd(0.1, 0.9)},
          {"sgd_nesterov", optim::sgd(0.1, 0.9, true)},
          {"adam", optim::adam(0.01)},
          {"adam_betas", optim::adam(0.05, 0.8, 0.99, 1e-6)},
          {"adamw", optim::adamw(0.01)},
          {"adamw_decay", optim::adamw(0.05, 0.9, 0.999, 1e-8, 0.5)},
          {"adam_cosine", optim::adam(optim::cosine_decay_schedule(0.01, 4))},
          {"sgd_cosine", optim::sgd(optim::cosine_decay_schedule(0.1, 3, 0.1), 0.9)},
          {"adamw_cosine", optim::adamw(optim::cosine_decay_schedule(0.05, 8, 0, 2.0))}};
}

// Same names in the same order and bit-identical leaves: the arithmetic follows optax's (and
// XLA's) float32 operations one for one.
void expect_tree_equal(const Params& actual, const Params& expected, const std::string& what) {
  ASSERT_EQ(actual.keys(), expected.keys()) << what;
  for (const auto& [name, x] : expected)
    EXPECT_TRUE(spmd_test::arrays_equal(actual.at(name), x)) << what << " " << name;
}

using Step = std::function<std::pair<Params, optim::State>(
    const Params& params, const optim::State& state, const Params& grads)>;

Step eager_step(const optim::Optimizer& opt) {
  return [opt](const Params& params, const optim::State& state, const Params& grads) {
    auto [updates, next] = opt.update(grads, state, params);
    return std::pair{optim::apply_updates(params, updates), next};
  };
}

Step jit_step(const optim::Optimizer& opt) {
  auto step = sp::jit([opt](const Params& params, const optim::State& state, const Params& grads) {
    auto [updates, next] = opt.update(grads, state, params);
    return std::tuple{optim::apply_updates(params, updates), next};
  });
  return [step](const Params& params, const optim::State& state, const Params& grads) mutable {
    auto [p, s] = step(params, state, grads);
    return std::pair{p, s};
  };
}

// Runs a recorded case from its initial params, `place` putting params and grads on devices.
void run_case(const Case& c, const Step& step, const std::function<Params(Params)>& place) {
  std::vector<Block> blocks = load_case(c.name);
  ASSERT_EQ(blocks.size(), 6u) << c.name;
  Params params = place(blocks[0].at("params"));
  optim::State state = c.opt.init(params);
  expect_tree_equal(state, blocks[0]["state"], c.name + " init");
  for (size_t k = 1; k < blocks.size(); ++k) {
    std::tie(params, state) = step(params, state, place(blocks[k].at("grads")));
    const std::string what = c.name + " step " + std::to_string(k);
    expect_tree_equal(params, blocks[k].at("params"), what + " params");
    expect_tree_equal(state, blocks[k]["state"], what + " state");
  }
}

Params unplaced(Params p) {
  return p;
}

sp::Mesh mesh_4x2() {
  return sp::make_mesh({4, 2}, {"data", "model"});
}

// The golden params laid out as a model-parallel network would be.
std::map<std::string, P> specs() {
  return {{"layers.0.weight", P("data", "model")},
          {"layers.0.bias", P("model")},
          {"layers.1.weight", P("model")},
          {"layers.1.bias", P()}};
}

Params sharded(Params p) {
  sp::Mesh mesh = mesh_4x2();
  for (auto& [name, x] : p) x = sp::device_put(x, sp::NamedSharding(mesh, specs().at(name)));
  return p;
}

TEST(Optim, MatchesOptaxEagerly) {
  for (const Case& c : cases()) run_case(c, eager_step(c.opt), unplaced);
}

TEST(Optim, MatchesOptaxUnderJit) {
  for (const Case& c : cases()) run_case(c, jit_step(c.opt), unplaced);
}

TEST(Optim, MatchesOptaxOnShardedParams) {
  if (sp::devices().size() < 8) GTEST_SKIP() << "needs 8 devices (SPMD_CPU_DEVICES=8)";
  for (const Case& c : cases()) {
    run_case(c, eager_step(c.opt), sharded);
    run_case(c, jit_step(c.opt), sharded);
  }
}

// optax names its state leaves by their key paths; ours are those paths joined with dots.
TEST(Optim, StateNamesAreOptaxKeyPaths) {
  Params params = load_case("adam")[0].at("params");
  EXPECT_EQ(optim::adam(0.1).init(params).keys(), load_case("adam")[0]["state"].keys());
  EXPECT_EQ(optim::sgd(0.1, 0.5).init(params).keys(), load_case("sgd_momentum")[0]["state"].keys());
  EXPECT_TRUE(optim::sgd(0.1).init(params).empty());
  EXPECT_EQ(optim::adam(0.1).init(sp::zeros({3})).keys(),
            (std::vector<std::string>{"0.count", "0.mu", "0.nu"}));
}

struct Layer {
  sp::Array w, b;
};
SPMD_TREE(Layer, w, b);

TEST(Optim, LeafNamesFollowKeyPaths) {
  std::tuple<std::vector<Layer>, std::map<std::string, sp::Array>> tree{
      {Layer{sp::zeros({2}), sp::zeros({1})}, Layer{sp::zeros({2}), sp::zeros({1})}},
      {{"scale", sp::zeros({1})}}};
  EXPECT_EQ(optim::leaf_names(sp::tree_structure(tree)),
            (std::vector<std::string>{"0.0.w", "0.0.b", "0.1.w", "0.1.b", "1.scale"}));
  EXPECT_EQ(optim::sgd(0.1, 0.9).init(tree).keys(),
            (std::vector<std::string>{"0.trace.0.0.w", "0.trace.0.0.b", "0.trace.0.1.w",
                                      "0.trace.0.1.b", "0.trace.1.scale"}));
}

TEST(Optim, UpdatesKeepTheParamsTreeType) {
  Layer params{sp::ones({2}), sp::ones({1})};
  optim::Optimizer opt = optim::sgd(0.5);
  auto [updates, state] = opt.update(Layer{sp::ones({2}), sp::ones({1})}, opt.init(params), params);
  EXPECT_TRUE(
      spmd_test::arrays_equal(optim::apply_updates(params, updates).w, sp::full({2}, 0.5f)));
}

TEST(Optim, ApplyUpdatesKeepsTheParamsDtype) {
  Params params{{"w", sp::ones({2}, sp::bfloat16)}};
  Params updates{{"w", sp::full({2}, 0.25f)}};
  sp::Array w = optim::apply_updates(params, updates).at("w");
  EXPECT_EQ(w.dtype(), sp::bfloat16);
  EXPECT_TRUE(spmd_test::arrays_equal(w, sp::full({2}, 1.25f).astype(sp::bfloat16)));
}

TEST(Optim, MomentsTakeTheirParamsSharding) {
  if (sp::devices().size() < 8) GTEST_SKIP() << "needs 8 devices (SPMD_CPU_DEVICES=8)";
  Params params = sharded(load_case("adam")[0].at("params"));
  optim::Optimizer opt = optim::adam(0.01);
  optim::State state = opt.init(params);
  auto check = [&](const optim::State& s, const std::string& when) {
    for (const auto& [name, p] : params) {
      EXPECT_EQ(s.at("0.mu." + name).sharding()->repr(), p.sharding()->repr()) << when << name;
      EXPECT_EQ(s.at("0.nu." + name).sharding()->repr(), p.sharding()->repr()) << when << name;
    }
    EXPECT_EQ(s.at("0.count").dtype(), sp::int32);
  };
  check(state, "init ");
  EXPECT_FALSE(state.at("0.count").committed());
  check(opt.update(params, state, params).second, "update ");
}

TEST(Optim, NamedStateRoundTrips) {
  if (sp::devices().size() < 8) GTEST_SKIP() << "needs 8 devices (SPMD_CPU_DEVICES=8)";
  std::vector<Block> blocks = load_case("adamw");
  Params params = sharded(blocks[0].at("params"));
  optim::Optimizer opt = optim::adamw(0.01);
  optim::State state = opt.init(params);
  state = opt.update(sharded(blocks[1].at("grads")), state, params).second;
  // A checkpoint comes back unplaced and in its own order (safetensors sorts names).
  std::vector<std::pair<std::string, sp::Array>> named = optim::named_state(state);
  ASSERT_EQ(named.size(), 9u);
  EXPECT_EQ(named[0].first, "0.count");
  for (auto& [name, x] : named) x = sp::device_get(x);
  std::sort(named.begin(), named.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  optim::State back = opt.state_from_named(named, params);
  EXPECT_EQ(back.keys(), state.keys());
  for (const auto& [name, x] : state) {
    EXPECT_TRUE(spmd_test::arrays_equal(back.at(name), x)) << name;
    EXPECT_EQ(back.at(name).sharding()->repr(), x.sharding()->repr()) << name;
  }
}

TEST(Optim, StateFromNamedNamesWhatIsWrong) {
  Params params{{"w", sp::zeros({2, 3})}};
  optim::Optimizer opt = optim::sgd(0.1, 0.9);
  using Named = std::vector<std::pair<std::string, sp::Array>>;
  auto load = [&](const Named& named) {
    return [&, named] { opt.state_from_named(named, params); };
  };
  EXPECT_EQ(error_message<sp::ValueError>(load({})),
            "[optim.state_from_named] missing the state tensor '0.trace.w'");
  EXPECT_EQ(error_message<sp::ValueError>(load({{"0.trace.w", sp::zeros({3, 2})}})),
            "[optim.state_from_named] the state tensor '0.trace.w' should be float32(2, 3), got "
            "float32(3, 2)");
  EXPECT_EQ(error_message<sp::ValueError>(
                load({{"0.trace.w", sp::zeros({2, 3})}, {"0.mu.w", sp::zeros({2, 3})}})),
            "[optim.state_from_named] unexpected state tensor '0.mu.w'; this optimizer's state "
            "for these params has '0.trace.w'");
  EXPECT_EQ(error_message<sp::ValueError>(
                load({{"0.trace.w", sp::zeros({2, 3})}, {"0.trace.w", sp::zeros({2, 3})}})),
            "[optim.state_from_named] the tensor '0.trace.w' is given twice");
}

TEST(Optim, UpdateRejectsMismatchedTrees) {
  Params params{{"w", sp::zeros({2})}, {"b", sp::zeros({1})}};
  optim::Optimizer opt = optim::adam(0.1);
  optim::State state = opt.init(params);
  EXPECT_EQ(error_message<sp::ValueError>([&] {
              opt.update(Params{{"w", sp::zeros({2})}}, state, params);
            }),
            "[optim.update] grads must have the tree structure of params; expected "
            "PyTreeDef(CustomNode(OrderedDict[('w', 'b')], [*, *])), got "
            "PyTreeDef(CustomNode(OrderedDict[('w',)], [*]))");
  Params bad_grads{{"w", sp::zeros({3})}, {"b", sp::zeros({1})}};
  EXPECT_EQ(error_message<sp::ValueError>([&] { opt.update(bad_grads, state, params); }),
            "[optim.update] the grad of 'w' has shape (3,) but its param has shape (2,)");
  optim::State sgd_state = optim::sgd(0.1, 0.9).init(params);
  EXPECT_EQ(error_message<sp::ValueError>([&] { opt.update(params, sgd_state, params); }),
            "[optim.update] the state does not fit these params: expected leaves '0.count', "
            "'0.mu.w', '0.mu.b', '0.nu.w', '0.nu.b', got '0.trace.w', '0.trace.b'");
  optim::State wrong = state;
  wrong.at("0.mu.b") = sp::zeros({4});
  EXPECT_EQ(error_message<sp::ValueError>([&] { opt.update(params, wrong, params); }),
            "[optim.update] state leaf '0.mu.b' should be float32(1,), got float32(4,)");
}

TEST(Optim, ParamsNeedDistinctNames) {
  std::map<std::string, Params> tree{{"a", Params{{"b.c", sp::zeros({1})}}},
                                     {"a.b", Params{{"c", sp::zeros({1})}}}};
  EXPECT_EQ(error_message<sp::ValueError>([&] { optim::adam(0.1).init(tree); }),
            "[optim] two params are both named 'a.b.c'; state names need each param's name to be "
            "unique");
}

TEST(Optim, RejectsBadHyperparameters) {
  auto message = [](auto make) { return error_message<sp::ValueError>(make); };
  EXPECT_EQ(message([] { optim::sgd(-0.1); }),
            "[optim.sgd] learning_rate must be finite and >= 0, got -0.1");
  EXPECT_EQ(message([] { optim::sgd(0.1, -0.5); }),
            "[optim.sgd] momentum must be finite and >= 0, got -0.5");
  EXPECT_EQ(message([] { optim::sgd(0.1, 0, true); }),
            "[optim.sgd] nesterov needs a momentum, got momentum 0");
  EXPECT_EQ(message([] { optim::adam(0.1, 1.0); }), "[optim.adam] b1 must be in [0, 1), got 1");
  EXPECT_EQ(message([] { optim::adam(0.1, 0.9, -0.1); }),
            "[optim.adam] b2 must be in [0, 1), got -0.1");
  EXPECT_EQ(message([] { optim::adam(0.1, 0.9, 0.999, -1e-8); }),
            "[optim.adam] eps must be finite and >= 0, got -1e-08");
  EXPECT_EQ(message([] { optim::adamw(std::nan("")); }),
            "[optim.adamw] learning_rate must be finite and >= 0, got nan");
  EXPECT_EQ(message([] { optim::adamw(0.1, 0.9, 0.999, 1e-8, -1); }),
            "[optim.adamw] weight_decay must be finite and >= 0, got -1");
  EXPECT_EQ(message([] { optim::sgd(0); }), "(no error)");
  EXPECT_EQ(message([] { optim::cosine_decay_schedule(std::nan(""), 10); }),
            "[optim.cosine_decay_schedule] init_value must be finite and >= 0, as a learning "
            "rate, got nan");
}

// optax gives integer params integer moments that its first update turns into floats, so the
// next step meets a state that does not fit; spmd refuses integer params at once.
TEST(Optim, RejectsIntegerParams) {
  Params params{{"w", sp::ones({2})}, {"steps", sp::array<int32_t>({1, 2})}};
  const std::string expected = "params must have a floating-point dtype, got int32(2,) for 'steps'";
  optim::Optimizer opt = optim::adam(0.1);
  EXPECT_EQ(error_message<sp::TypeError>([&] { opt.init(params); }), "[optim.init] " + expected);
  Params floats{{"w", sp::ones({2})}, {"steps", sp::ones({2})}};
  optim::State state = opt.init(floats);
  EXPECT_EQ(error_message<sp::TypeError>([&] { opt.update(params, state, params); }),
            "[optim.update] " + expected);
  EXPECT_EQ(error_message<sp::TypeError>(
                [&] { opt.state_from_named(optim::named_state(state), params); }),
            "[optim.state_from_named] " + expected);
}

}  // namespace

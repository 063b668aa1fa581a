// DotAlgorithmPreset and DotAlgorithm as `precision` (lax::dot_general, dot, matmul, einsum)
// against JAX 0.10.2 on CPU (tools/goldens/gen_dot_algorithm.py): the values each preset JAX's
// CPU backend compiles computes, the jaxprs, and the errors for the rest.
#include <spmd/spmd.h>

#include "support/golden.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace {

namespace sp = spmd;
using sp::Array;
using Preset = sp::lax::DotAlgorithmPreset;

const std::map<std::string, Array>& golden() {
  return spmd_test::load_golden("einsum/dot_algorithm_values.npz");
}

std::string block(const std::string& name) {
  static const std::map<std::string, std::string> blocks =
      spmd_test::golden_blocks("einsum/dot_algorithm_jaxprs.txt");
  auto it = blocks.find(name);
  return it == blocks.end() ? "(missing golden " + name + ")" : it->second;
}

// The presets JAX's CPU backend compiles, by name.
Preset preset(const std::string& name) {
  static const std::map<std::string, Preset> presets = {
      {"DEFAULT", Preset::DEFAULT},
      {"F16_F16_F16", Preset::F16_F16_F16},
      {"F32_F32_F32", Preset::F32_F32_F32},
      {"F64_F64_F64", Preset::F64_F64_F64},
      {"BF16_BF16_F32", Preset::BF16_BF16_F32},
      {"BF16_BF16_F32_X3", Preset::BF16_BF16_F32_X3},
      {"BF16_BF16_F32_X6", Preset::BF16_BF16_F32_X6}};
  return presets.at(name);
}

// One recorded product: the api, the preset's name, the options and the operands.
struct Case {
  std::string name;
  std::map<std::string, std::string> options;
  std::vector<Array> operands;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  const auto& g = golden();
  for (const auto& [key, value] : g) {
    const size_t bar = key.find("|options");
    if (bar == std::string::npos) continue;
    Case c{key.substr(0, bar), {}, {}};
    std::string text;
    for (uint8_t ch : value.to_vector<uint8_t>()) text += char(ch);
    for (const std::string& item : spmd_test::split_fields(text, ';'))
      c.options[item.substr(0, item.find('='))] = item.substr(item.find('=') + 1);
    for (int i = 0; g.count(c.name + "|" + std::to_string(i)); ++i)
      c.operands.push_back(g.at(c.name + "|" + std::to_string(i)));
    out.push_back(c);
  }
  return out;
}

Array run(const Case& c) {
  const std::string& api = c.options.at("api");
  const std::string& name = c.options.at("precision");
  const std::vector<Array>& x = c.operands;
  if (api == "dot_general") {
    std::optional<sp::DType> pref;
    if (c.options.count("pref")) pref = sp::dtype_from_name(c.options.at("pref"));
    return sp::lax::dot_general(x[0], x[1], {{1}, {0}, {}, {}}, pref, {}, preset(name));
  }
  if (api == "dot") return sp::dot(x[0], x[1], {}, name);
  if (api == "matmul") return sp::matmul(x[0], x[1], {}, preset(name));
  return sp::einsum(c.options.at("subscripts"), x, {.precision = name});
}

TEST(DotAlgorithm, PresetsComputeAsJaxOnCpu) {
  const std::vector<Case> all = cases();
  ASSERT_EQ(all.size(), 40u);
  for (const Case& c : all) {
    const Array& expected = golden().at(c.name + "|out");
    const Array got = run(c);
    // Float32 accumulation may round in another order than XLA's: a few ulps. A conversion
    // missed or added moves float results by thousands.
    if (sp::is_floating(expected.dtype()))
      EXPECT_TRUE(spmd_test::arrays_close_ulp(got, expected, 4)) << c.name;
    else
      EXPECT_TRUE(spmd_test::arrays_equal(got, expected)) << c.name;
  }
}

TEST(DotAlgorithm, Float64AccumulationKeepsWhatFloat32Loses) {
  const Case c = [] {
    for (const Case& c : cases())
      if (c.name == "cancellation_F64_F64_F64") return c;
    return Case{};
  }();
  ASSERT_EQ(c.operands.size(), 2u);
  EXPECT_TRUE(spmd_test::arrays_equal(run(c), golden().at(c.name + "|out")));
  auto under_jit = sp::jit([](const std::vector<Array>& x) {
    return sp::lax::dot_general(x[0], x[1], {{1}, {0}, {}, {}}, std::nullopt, {},
                                Preset::F64_F64_F64);
  });
  EXPECT_TRUE(spmd_test::arrays_equal(under_jit(c.operands), golden().at(c.name + "|out")));
}

TEST(DotAlgorithm, JaxprsPrintThePrecisionAsJax) {
  const Array a = sp::ones({2, 3}), b = sp::ones({3, 4}), c = sp::ones({4, 2});
  using Fn = std::function<Array(const std::vector<Array>&)>;
  const sp::lax::DotAlgorithm bf16{sp::DType::bfloat16, sp::DType::bfloat16, sp::DType::float32};
  const sp::lax::DotAlgorithm counts{
      sp::DType::float16, sp::DType::float32, sp::DType::float64, 2, 3, 6, true};
  auto dot_general = [](const sp::lax::DotAlgorithm& algorithm) -> Fn {
    return [algorithm](const std::vector<Array>& x) {
      return sp::lax::dot_general(x[0], x[1], {{1}, {0}, {}, {}}, std::nullopt, {}, algorithm);
    };
  };
  const std::map<std::string, std::pair<Fn, std::vector<Array>>> jaxprs = {
      {"einsum_preset_name",
       {[](const std::vector<Array>& x) {
          return sp::einsum("ij,jk,kl->il", x, {.precision = "BF16_BF16_F32"});
        },
        {a, b, c}}},
      {"einsum_preset",
       {[](const std::vector<Array>& x) {
          return sp::einsum("ij,jk->ik", x, {.precision = Preset::F64_F64_F64});
        },
        {a, b}}},
      {"dot_general_algorithm", {dot_general(bf16), {a, b}}},
      {"dot_general_algorithm_counts", {dot_general(counts), {a, b}}},
      {"matmul_preset",
       {[](const std::vector<Array>& x) { return sp::matmul(x[0], x[1], {}, "F16_F16_F16"); },
        {a, b}}},
      {"dot_preset",
       {[](const std::vector<Array>& x) { return sp::dot(x[0], x[1], {}, "TF32_TF32_F32"); },
        {a, b}}},
  };
  for (const auto& [name, fn_args] : jaxprs)
    EXPECT_EQ(sp::make_jaxpr(fn_args.first)(fn_args.second).str(), block(name)) << name;
  auto loss = [](const std::vector<Array>& x) {
    return sp::sum(sp::einsum("ij,jk->ik", x, {.precision = "F64_F64_F64"}));
  };
  EXPECT_EQ(sp::make_jaxpr(sp::grad(loss))(std::vector<Array>{a, b}).str(),
            block("grad_einsum_preset"));
}

// "<what JAX calls the error>: <message without the [api] prefix>".
std::string jax_style_error(const std::function<void()>& call) {
  auto message = [](const char* what) {
    return std::string(what).substr(std::string(what).find("] ") + 2);
  };
  try {
    call();
  } catch (const sp::TypeError& e) {
    return "TypeError: " + message(e.what());
  } catch (const sp::ValueError& e) {
    return "ValueError: " + message(e.what());
  }
  return "(no error)";
}

TEST(DotAlgorithm, UnsupportedAndMalformedPrecisionsRaiseJaxsErrors) {
  const Array a = sp::ones({2, 3}), b = sp::ones({3, 4});
  auto einsum = [&](sp::EinsumPrecision precision) -> std::function<void()> {
    return [&, precision] { sp::einsum("ij,jk->ik", {a, b}, {.precision = precision}); };
  };
  std::map<std::string, std::function<void()>> calls = {
      {"cpu_rejects_algorithm",
       [&] {
         sp::lax::dot_general(a, b, {{1}, {0}, {}, {}}, std::nullopt, {}, sp::lax::DotAlgorithm{});
       }},
      {"pair_of_preset_names", einsum({"BF16_BF16_F32", "BF16_BF16_F32"})},
      {"pair_of_name_and_preset_name", einsum({"high", "F32_F32_F32"})},
      {"pair_of_presets", einsum({Preset::F32_F32_F32, Preset::F32_F32_F32})},
      {"pair_of_algorithm_and_preset", einsum({sp::lax::DotAlgorithm{}, Preset::DEFAULT})},
      {"preset_name_lowercase", einsum("bf16_bf16_f32")},
      {"matmul_bad_name", [&] { sp::matmul(a, b, {}, "F32"); }},
      {"dot_bad_name", [&] { sp::dot(a, b, {}, "F32"); }},
  };
  for (const char* name : {"ANY_F8_ANY_F8_F32", "ANY_F8_ANY_F8_F32_FAST_ACCUM", "ANY_F8_ANY_F8_ANY",
                           "ANY_F8_ANY_F8_ANY_FAST_ACCUM", "F16_F16_F32", "BF16_BF16_BF16",
                           "BF16_BF16_F32_X9", "TF32_TF32_F32", "TF32_TF32_F32_X3"})
    calls["cpu_rejects_" + std::string(name)] = einsum(name);
  const std::map<std::string, std::string> blocks =
      spmd_test::golden_blocks("einsum/dot_algorithm_errors.txt");
  ASSERT_EQ(blocks.size(), calls.size());
  for (const auto& [name, call] : calls) EXPECT_EQ(jax_style_error(call), blocks.at(name)) << name;
}

}  // namespace

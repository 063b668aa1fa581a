// sp::einsum against jnp.einsum of JAX 0.10.2 (tools/goldens/gen_einsum.py): values eager and
// under jit, the jaxprs of the one- and two-operand forms, of a gradient and of a vmap, the
// errors, and what sharded operands give on an Auto mesh (no byte moved) and in Explicit mode
// (result types, out_sharding).
#include <spmd/spmd.h>

#include "support/golden.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace {

namespace sp = spmd;
using sp::Array;
using sp::None;
using sp::P;
using spmd_test::arrays_equal;
using spmd_test::error_message;
using spmd_test::golden_blocks;

const std::map<std::string, Array>& golden() {
  return spmd_test::load_golden("einsum/values.npz");
}

std::string block(const char* file, const std::string& name) {
  static std::map<std::string, std::map<std::string, std::string>> files;
  auto& blocks = files[file];
  if (blocks.empty()) blocks = golden_blocks(std::string("einsum/") + file);
  auto it = blocks.find(name);
  return it == blocks.end() ? "(missing golden " + name + ")" : it->second;
}

// One recorded case: its subscripts, operands (a Python scalar as a weakly typed C++ scalar)
// and options.
struct Case {
  std::string name, subscripts;
  std::vector<Array> operands;
  sp::EinsumOptions options;
  // The operands given as traced arguments (not weak scalars, which stay constants as in JAX).
  std::vector<bool> traced;
};

Array weak_scalar(const Array& x) {
  return sp::is_floating(x.dtype()) ? Array(double(x.item<float>())) : Array(x.item<int32_t>());
}

std::vector<Case> cases() {
  std::vector<Case> out;
  const auto& g = golden();
  for (const auto& [key, value] : g) {
    const size_t bar = key.find("|subscripts");
    if (bar == std::string::npos) continue;
    Case c;
    c.name = key.substr(0, bar);
    for (uint8_t ch : value.to_vector<uint8_t>()) c.subscripts += char(ch);
    for (int i = 0; g.count(c.name + "|" + std::to_string(i)); ++i) {
      const Array& x = g.at(c.name + "|" + std::to_string(i));
      const bool weak = g.count(c.name + "|w" + std::to_string(i)) > 0;
      c.operands.push_back(weak ? weak_scalar(x) : x);
      c.traced.push_back(!weak);
    }
    if (g.count(c.name + "|pref"))
      c.options.preferred_element_type = g.at(c.name + "|pref").dtype();
    out.push_back(c);
  }
  return out;
}

// The case as a function of its traced operands.
auto as_function(const Case& c) {
  return [c](const std::vector<Array>& traced) {
    std::vector<Array> operands = c.operands;
    for (size_t i = 0, j = 0; i < operands.size(); ++i)
      if (c.traced[i]) operands[i] = traced[j++];
    return sp::einsum(c.subscripts, operands, c.options);
  };
}

std::vector<Array> traced_operands(const Case& c) {
  std::vector<Array> out;
  for (size_t i = 0; i < c.operands.size(); ++i)
    if (c.traced[i]) out.push_back(c.operands[i]);
  return out;
}

TEST(Einsum, ValuesMatchJaxEagerAndUnderJit) {
  const std::vector<Case> all = cases();
  EXPECT_EQ(all.size(), 62u);
  for (const Case& c : all) {
    const Array& expected = golden().at(c.name + "|out");
    EXPECT_TRUE(arrays_equal(sp::einsum(c.subscripts, c.operands, c.options), expected)) << c.name;
    EXPECT_TRUE(arrays_equal(sp::jit(as_function(c))(traced_operands(c)), expected)) << c.name;
  }
}

TEST(Einsum, JaxprsOfOneAndTwoOperandsMatchJax) {
  int compared = 0;
  for (const Case& c : cases()) {
    if (c.operands.size() > 2) continue;
    EXPECT_EQ(sp::make_jaxpr(as_function(c))(traced_operands(c)).str(), block("jaxprs.txt", c.name))
        << c.subscripts;
    ++compared;
  }
  EXPECT_EQ(compared, 54);
}

TEST(Einsum, VariadicFormTakesArraysAndScalars) {
  const auto& g = golden();
  EXPECT_TRUE(arrays_equal(sp::einsum("ij,jk->ik", g.at("matmul|0"), g.at("matmul|1")),
                           g.at("matmul|out")));
  EXPECT_TRUE(
      arrays_equal(sp::einsum("ij,->ij", g.at("weak_scalar|0"), 2.0), g.at("weak_scalar|out")));
  EXPECT_TRUE(arrays_equal(
      sp::einsum("ab,bc,cd,de->ae", g.at("four|0"), g.at("four|1"), g.at("four|2"), g.at("four|3")),
      g.at("four|out")));
}

TEST(Einsum, GradientMatchesJax) {
  const auto& g = golden();
  const Array a = g.at("grad|0"), b = g.at("grad|1");
  auto loss = [](const Array& u, const Array& v) {
    return sp::sum(sp::sin(sp::einsum("ij,jk->ik", u, v)));
  };
  EXPECT_TRUE(spmd_test::arrays_close(sp::grad(loss)(a, b), g.at("grad|out")));
  auto plain = [](const Array& u, const Array& v) {
    return sp::sum(sp::einsum("ij,jk->ik", u, v));
  };
  EXPECT_EQ(sp::make_jaxpr(sp::grad(plain))(a, b).str(), block("jaxprs.txt", "grad"));

  const Array m = g.at("grad_trace|0");
  auto trace = [](const Array& u) { return sp::einsum("ii", u); };
  EXPECT_TRUE(arrays_equal(sp::grad(trace)(m), g.at("grad_trace|out")));
  EXPECT_EQ(sp::make_jaxpr(sp::grad(trace))(m).str(), block("jaxprs.txt", "grad_trace"));
}

TEST(Einsum, VmapMatchesJax) {
  const auto& g = golden();
  const Array a = g.at("vmap|0"), vs = g.at("vmap|1");
  auto batched = [](const Array& m, const Array& v) {
    return sp::vmap([&](const Array& row) { return sp::einsum("ij,j->i", m, row); })(v);
  };
  EXPECT_TRUE(arrays_equal(batched(a, vs), g.at("vmap|out")));
  EXPECT_EQ(sp::make_jaxpr(batched)(a, vs).str(), block("jaxprs.txt", "vmap"));
}

TEST(Einsum, BadSubscriptsRaiseJaxsErrors) {
  const Array a = sp::ones({2, 3}), b = sp::ones({4, 5});
  const std::map<std::string, std::function<void()>> calls = {
      {"too_few_operands", [&] { sp::einsum("ij,jk->ik", a); }},
      {"too_many_operands", [&] { sp::einsum("ij,jk->ik", a, b, a); }},
      {"output_not_in_inputs", [&] { sp::einsum("ij->ik", a); }},
      {"repeated_output", [&] { sp::einsum("ij->ii", a); }},
      {"size_mismatch", [&] { sp::einsum("ij,jk->ik", a, b); }},
      {"size_mismatch_in_one_operand", [&] { sp::einsum("ii->i", a); }},
      {"size_mismatch_third", [&] { sp::einsum("ij,jk,kl->il", a, a.T(), b); }},
      {"wrong_rank", [&] { sp::einsum("ijk->i", a); }},
      {"wrong_rank_empty", [&] { sp::einsum("", a); }},
      {"two_arrows", [&] { sp::einsum("ij->i->j", a); }},
      {"dash_without_arrow", [&] { sp::einsum("ij-i", a); }},
      {"invalid_ellipsis", [&] { sp::einsum("i..j->i", a); }},
      {"ellipsis_too_long", [&] { sp::einsum("...ijk->i", a); }},
  };
  for (const auto& [name, call] : calls)
    EXPECT_EQ(error_message<sp::ValueError>(call),
              "[einsum] " + spmd_test::jax_error("einsum/errors.txt", name))
        << name;
  EXPECT_EQ(error_message<sp::ValueError>([] { sp::einsum("->", {}); }),
            "[einsum] Number of einsum subscripts, 1, must be equal to the number of operands, 0.");
  EXPECT_EQ(error_message<sp::ValueError>([&] { sp::einsum("i\xc3\xa9", a); }),
            "[einsum] subscripts must be ASCII characters, got 'i\xc3\xa9'");
}

// ---- three and more operands, optimize, precision, mixed dtypes ------------------------------
const std::map<std::string, Array>& multi_golden() {
  return spmd_test::load_golden("einsum/multi_values.npz");
}

sp::lax::Precision precision_enum(const std::string& name) {
  return name == "HIGHEST" ? sp::lax::Precision::HIGHEST
         : name == "HIGH"  ? sp::lax::Precision::HIGH
                           : sp::lax::Precision::DEFAULT;
}

// The options as gen_einsum_multi.py writes them ("optimize=path:2,3 0,1;precision=high").
void read_options(const std::string& text, sp::EinsumOptions& options) {
  for (const std::string& item : spmd_test::split_fields(text, ';')) {
    if (item.empty()) continue;
    const std::string key = item.substr(0, item.find('=')), value = item.substr(key.size() + 1);
    if (key == "optimize" && value.rfind("path:", 0) == 0) {
      sp::EinsumOptimize::Path path;
      for (const std::string& step : spmd_test::split_fields(value.substr(5), ' ')) {
        path.emplace_back();
        for (const std::string& i : spmd_test::split_fields(step, ','))
          path.back().push_back(std::stoll(i));
      }
      options.optimize = path;
    } else if (key == "optimize") {
      options.optimize = value == "false" || value == "true" ? sp::EinsumOptimize(value == "true")
                                                             : sp::EinsumOptimize(value);
    } else if (value.rfind("enum:", 0) == 0) {
      options.precision = precision_enum(value.substr(5));
    } else if (value.rfind("names:", 0) == 0) {
      const std::vector<std::string> names = spmd_test::split_fields(value.substr(6), ',');
      options.precision = {names[0], names[1]};
    } else if (value.rfind("enums:", 0) == 0) {
      const std::vector<std::string> names = spmd_test::split_fields(value.substr(6), ',');
      options.precision = {precision_enum(names[0]), precision_enum(names[1])};
    } else {
      options.precision = value;
    }
  }
}

std::vector<Case> multi_cases() {
  std::vector<Case> out;
  const auto& g = multi_golden();
  auto text = [&](const std::string& key) {
    std::string s;
    for (uint8_t ch : g.at(key).to_vector<uint8_t>()) s += char(ch);
    return s;
  };
  for (const auto& [key, value] : g) {
    const size_t bar = key.find("|subscripts");
    if (bar == std::string::npos) continue;
    Case c;
    c.name = key.substr(0, bar);
    c.subscripts = text(key);
    for (int i = 0; g.count(c.name + "|" + std::to_string(i)); ++i) {
      c.operands.push_back(g.at(c.name + "|" + std::to_string(i)));
      c.traced.push_back(true);
    }
    if (g.count(c.name + "|pref"))
      c.options.preferred_element_type = g.at(c.name + "|pref").dtype();
    read_options(text(c.name + "|options"), c.options);
    out.push_back(c);
  }
  return out;
}

TEST(Einsum, ManyOperandsOptimizePrecisionAndMixedTypesMatchJax) {
  const std::vector<Case> all = multi_cases();
  EXPECT_EQ(all.size(), 40u);
  for (const Case& c : all) {
    const Array& expected = multi_golden().at(c.name + "|out");
    EXPECT_TRUE(arrays_equal(sp::einsum(c.subscripts, c.operands, c.options), expected)) << c.name;
    EXPECT_TRUE(arrays_equal(sp::jit(as_function(c))(c.operands), expected)) << c.name;
    EXPECT_EQ(sp::make_jaxpr(as_function(c))(c.operands).str(), block("multi_jaxprs.txt", c.name))
        << c.name;
  }
}

TEST(Einsum, GradientKeepsThePrecisionAsJax) {
  const auto& g = multi_golden();
  const std::vector<Array> abc = {g.at("grad_precision|0"), g.at("grad_precision|1"),
                                  g.at("grad_precision|2")};
  auto loss = [](const std::vector<Array>& xs) {
    const sp::EinsumPrecision precision = {sp::lax::Precision::DEFAULT,
                                           sp::lax::Precision::HIGHEST};
    return sp::sum(sp::einsum("ij,jk,kl->il", xs, {.precision = precision}));
  };
  EXPECT_EQ(sp::make_jaxpr(sp::grad(loss))(abc).str(), block("multi_jaxprs.txt", "grad_precision"));
}

// Runs `call` and returns "<what JAX calls the error>: <message without the [einsum] prefix>".
std::string jax_style_error(const std::function<void()>& call) {
  try {
    call();
  } catch (const sp::NotImplementedError& e) {
    return std::string("NotImplementedError: ") + (e.what() + 9);
  } catch (const sp::IndexError& e) {
    return std::string("IndexError: ") + (e.what() + 9);
  } catch (const sp::ValueError& e) {
    return std::string("ValueError: ") + (e.what() + 9);
  }
  return "(no error)";
}

TEST(Einsum, BadPathsOptimizersAndPrecisionsRaiseJaxsErrors) {
  const Array a = sp::ones({2, 3}), b = sp::ones({3, 4}), c = sp::ones({4, 5});
  using sp::lax::Precision;
  auto three = [&](sp::EinsumOptimize optimize) {
    return [&, optimize] { sp::einsum("ij,jk,kl->il", {a, b, c}, {.optimize = optimize}); };
  };
  auto two = [&](sp::EinsumOptions options) {
    return [&, options] { sp::einsum("ij,jk->ik", {a, b}, options); };
  };
  const std::map<std::string, std::function<void()>> calls = {
      {"path_index_out_of_range", three({{0, 3}, {0, 1}})},
      {"path_too_long", two({.optimize = {{0, 1}, {0, 1}}})},
      {"path_three_at_once", three({{0, 1, 2}})},
      {"path_incomplete", three({{0, 1}})},
      {"precision_bad_name", two({.precision = "hihgest"})},
      {"precision_mixed_tuple", two({.precision = {Precision::HIGH, "high"}})},
      {"precision_three_names", two({.precision = {"high", "high", "high"}})},
      {"precision_one_name", two({.precision = {"high"}})},
      {"precision_bad_name_in_tuple", two({.precision = {"high", "hi"}})},
  };
  for (const auto& [name, call] : calls) {
    const std::string want = block("multi_errors.txt", name);
    EXPECT_EQ(jax_style_error(call), want) << name;
  }
  // opt_einsum's KeyError (a ValueError here) lists the strategies as a Python set, in an order
  // that changes from run to run: compared as sets.
  for (const std::string name : {"bogus", "none"}) {
    const std::string got = jax_style_error(three(name));
    const std::string want =
        block("multi_errors.txt", name == "bogus" ? "unknown_optimize" : "none_optimize");
    const size_t brace = want.find('{');
    ASSERT_NE(brace, std::string::npos);
    EXPECT_EQ(got.substr(0, got.find('{')), "ValueError" + want.substr(8, brace - 8));
    auto names = [](const std::string& s) {
      std::vector<std::string> out =
          spmd_test::split_fields(s.substr(s.find('{') + 1, s.find('}') - s.find('{') - 1), ',');
      for (std::string& n : out) n.erase(0, n.find('\''));
      std::sort(out.begin(), out.end());
      return out;
    };
    EXPECT_EQ(names(got), names(want));
  }
}

// optimize="dp" and "auto-hq" (tools/goldens/gen_einsum_hq.py): dp's single-operand steps and
// its disconnected groups lower as JAX's.
TEST(Einsum, DynamicProgrammingPathsLowerAsJax) {
  struct HqCase {
    const char* name;
    const char* subscripts;
    std::vector<sp::Shape> shapes;
    const char* optimize;
  };
  const std::vector<HqCase> hq = {
      {"dp_single_labels", "ijx,jk,ky->i", {{2, 3, 4}, {3, 5}, {5, 6}}, "dp"},
      {"dp_disconnected", "ab,bc,de,ef->acdf", {{2, 3}, {3, 4}, {5, 6}, {6, 2}}, "dp"},
      {"auto_hq_chain_6",
       "ab,bc,cd,de,ef,fg->ag",
       {{2, 8}, {8, 3}, {3, 9}, {9, 2}, {2, 7}, {7, 5}},
       "auto-hq"},
  };
  for (const HqCase& c : hq) {
    std::vector<Array> operands;
    for (const sp::Shape& shape : c.shapes) operands.push_back(sp::ones(shape));
    auto f = [&c](const std::vector<Array>& xs) {
      return sp::einsum(c.subscripts, xs, {.optimize = c.optimize});
    };
    EXPECT_EQ(sp::make_jaxpr(f)(operands).str(), block("hq_jaxprs.txt", c.name)) << c.name;
  }
}

TEST(Einsum, OptimizeOnlyReordersTheContractions) {
  const auto& g = multi_golden();
  const std::vector<Array> ops = {g.at("chain_4|0"), g.at("chain_4|1"), g.at("chain_4|2"),
                                  g.at("chain_4|3")};
  for (sp::EinsumOptimize optimize :
       {sp::EinsumOptimize("optimal"), sp::EinsumOptimize("greedy"), sp::EinsumOptimize(false),
        sp::EinsumOptimize("branch-1"), sp::EinsumOptimize({{1, 2}, {1, 2}, {0, 1}})})
    EXPECT_TRUE(arrays_equal(sp::einsum("ab,bc,cd,de->ae", ops, {.optimize = optimize}),
                             g.at("chain_4|out")));
}

// ---- sharding -----------------------------------------------------------------------------------
class EinsumShardingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sp::device_count() < 8) GTEST_SKIP() << "needs 8 devices (SPMD_CPU_DEVICES=8)";
  }
  static std::string text(const std::string& name) { return block("sharding.txt", name); }
  sp::NamedSharding S(sp::PartitionSpec spec) const { return sp::NamedSharding(m, spec); }
  Array put(const Array& v, sp::PartitionSpec spec) const { return sp::device_put(v, S(spec)); }

  sp::Mesh m = sp::make_mesh({4, 2}, {"a", "b"}, {sp::AxisType::Explicit, sp::AxisType::Explicit});
  Array X = sp::arange(256.0f).reshape({16, 16});
};

TEST_F(EinsumShardingTest, AutoMeshContractionFollowsTheShardingAndMovesNoByte) {
  sp::Mesh mesh = sp::make_mesh({4, 2}, {"a", "b"});
  const Array small = sp::arange(64.0f).reshape({8, 8});
  const Array xa = sp::device_put(small, sp::NamedSharding(mesh, P("a", None)));
  const Array xb = sp::device_put(small, sp::NamedSharding(mesh, P(None, "b")));
  xa.block_until_ready();
  xb.block_until_ready();
  sp::runtime::reset_transfer_stats();
  const Array r = sp::einsum("ij,jk->ik", xa, xb).block_until_ready();
  EXPECT_EQ(sp::runtime::transfer_stats().total_bytes(), 0);
  EXPECT_EQ(r.sharding()->repr(), text("auto_matmul"));
  EXPECT_TRUE(arrays_equal(sp::device_get(r), sp::matmul(small, small)));
}

TEST_F(EinsumShardingTest, ExplicitTypesMatchJax) {
  const std::vector<std::pair<std::string, std::function<Array()>>> runs = {
      {"explicit_matmul",
       [&] { return sp::einsum("ij,jk->ik", put(X, P("a", None)), put(X, P(None, "b"))); }},
      {"explicit_transposed",
       [&] { return sp::einsum("ij,jk->ki", put(X, P("a", None)), put(X, P(None, "b"))); }},
      {"explicit_batch",
       [&] {
         return sp::einsum("bij,bjk->bik", put(sp::ones({4, 8, 16}), P("a", None, None)),
                           put(sp::ones({4, 16, 8}), P("a", None, "b")));
       }},
      {"explicit_out_sharding",
       [&] {
         return sp::einsum("ij,jk->ik", {put(X, P(None, "a")), put(X, P("a", None))},
                           {.out_sharding = S(P(None, "a"))});
       }},
      {"explicit_out_sharding_transposed",
       [&] {
         return sp::einsum("ij,jk->ki", {put(X, P(None, "a")), put(X, P("a", None))},
                           {.out_sharding = S(P(None, "a"))});
       }},
      {"explicit_sum_out_sharding",
       [&] { return sp::einsum("ij->i", {put(X, P("a", "b"))}, {.out_sharding = S(P("b"))}); }},
      {"explicit_transpose_ignores_out_sharding",
       [&] {
         return sp::einsum("ij->ji", {put(X, P("a", "b"))}, {.out_sharding = S(P("b", None))});
       }},
      {"explicit_three",
       [&] { return sp::einsum("ij,jk,kl->il", put(X, P("a", None)), put(X, P(None, "b")), X); }},
      {"explicit_three_out_sharding",
       [&] {
         return sp::einsum("ij,jk,kl->il", {put(X, P(None, "a")), put(X, P("a", None)), X},
                           {.out_sharding = S(P("a", None))});
       }},
  };
  for (const auto& [name, run] : runs) {
    const Array r = run().block_until_ready();
    EXPECT_EQ(sp::typeof(r).str(), text(name)) << name;
  }
}

TEST_F(EinsumShardingTest, OutShardingResolvesShardedContractingDims) {
  const Array u = put(X, P(None, "a")), v = put(X, P("a", None));
  const std::string message = error_message<sp::Error>([&] { sp::einsum("ij,jk->ik", u, v); });
  EXPECT_EQ(message.substr(message.find("] ") + 2), text("explicit_contract_both_error"));
  const Array r =
      sp::einsum("ij,jk->ki", {u, v}, {.out_sharding = S(P(None, "a"))}).block_until_ready();
  EXPECT_EQ(*r.sharding(), S(P(None, "a")));
  EXPECT_TRUE(arrays_equal(sp::device_get(r), sp::matmul(X, X).T()));
  auto f = [&](const Array& a, const Array& b) {
    return sp::einsum("ij,jk->ki", {a, b}, {.out_sharding = S(P(None, "a"))});
  };
  EXPECT_EQ(sp::make_jaxpr(f)(u, v).str(), text("jaxpr_out_sharding_transposed"));
  const Array three = sp::einsum("ij,jk,kl->il", {u, v, X}, {.out_sharding = S(P("a", None))});
  EXPECT_TRUE(spmd_test::arrays_close(sp::device_get(three), sp::matmul(sp::matmul(X, X), X)));
}

}  // namespace

// sp::einsum against jnp.einsum of JAX 0.10.2 (tools/goldens/gen_einsum.py): values eager and
// under jit, the jaxprs of the one- and two-operand forms, of a gradient and of a vmap, the
// errors, and what sharded operands give on an Auto mesh (no byte moved) and in Explicit mode
// (result types, out_sharding).
#include <spmd/spmd.h>

#include "support/golden.h"

#include <gtest/gtest.h>

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

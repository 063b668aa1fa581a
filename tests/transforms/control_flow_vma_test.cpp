// scan, while_loop, fori_loop, cond/switch and the custom_jvp/custom_vjp calls inside a shard_map
// body with check_vma type each result as their body's result, as JAX does: an invariant carry
// beside xs varying over 'a' stays invariant, operands are not cast up front, and what follows
// (psums, the pvary casts before an operation joining values of different types) is typed from
// there. A loop body that makes a carry vary over more axes, and branches whose outputs vary over
// different ones, raise JAX's TypeErrors. make_jaxpr's text, the values and the errors against
// JAX 0.10.2 (tests/goldens/control_flow_vma, recorded by tools/goldens/gen_control_flow_vma.py;
// the cases use its names), under grad and vmap too. Outside a shard_map, grad and vjp of the
// custom functions (whose rules call the function itself, as JAX's do) keep the call in the
// forward computation with JAX's params, plain and under jit.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "support/golden.h"

namespace {

namespace sp = spmd;
using sp::Array;
using sp::P;
namespace lax = sp::lax;

using Pair = std::tuple<Array, Array>;

sp::Mesh mesh8() {
  return sp::Mesh(sp::create_device_mesh({8}), {"a"});
}
sp::Mesh mesh42() {
  return sp::Mesh(sp::create_device_mesh({4, 2}), {"a", "b"});
}

// Element i of a 1-d value: x[i], staged as jnp's (a slice without strides, then a squeeze).
Array at(const Array& x, int64_t i) {
  return x[i];
}

const Array x16 = sp::arange(16.0f) / 8.0f, x8 = sp::arange(8.0f) / 4.0f;
const Array y2 = sp::arange(2.0f) + 1.0f, y4 = sp::arange(4.0f) + 1.0f;

// ---- scan and fori_loop ----
Pair scan_invariant_carry(const Array& x, const Array& y) {
  auto [c, ys] = lax::scan(
      [](const Array& carry, const Array& xi) {
        return std::pair{carry * 2.0f, carry * xi};
      },
      y, x);
  return {c, lax::psum(ys, "a")};
}

Pair scan_carry_over_a_xs_over_b(const Array& x, const Array& y) {
  auto [c, ys] = lax::scan(
      [](const Array& carry, const Array& yi) {
        return std::pair{carry + 1.0f, carry * yi};
      },
      x, y);
  return {c, ys};
}

Pair scan_closes_over_varying(const Array& x, const Array& y) {
  auto [c, ys] = lax::scan(
      [x](const Array& carry, const Array& yi) {
        return std::pair{carry + yi, carry * x};
      },
      0.0f * at(y, 0), y);
  return {c, lax::psum(ys, "a")};
}

Pair scan_makes_carry_vary(const Array& x, const Array& y) {
  auto [c, ys] = lax::scan(
      [](const Array& carry, const Array& xi) {
        return std::pair{carry + xi, carry};
      },
      at(y, 0), x);
  return {c, ys};
}

std::tuple<Pair, Array> scan_makes_two_carries_vary(const Array& x, const Array& y) {
  auto [c, ys] = lax::scan(
      [](const Pair& carry, const Array& xi) {
        auto [u, v] = carry;
        return std::pair{Pair{u * at(xi, 0), v + at(xi, 1)}, u};
      },
      Pair{at(y, 0), at(y, 1)}, sp::stack({x, x}));
  return {c, ys};
}

Pair fori_mixed(const Array& x, const Array& y) {
  return lax::fori_loop(
      0, 3,
      [](const Array&, const Pair& carry) {
        return Pair{std::get<0>(carry) * 2.0f, std::get<1>(carry) + 1.0f};
      },
      Pair{x, y});
}

Array fori_makes_carry_vary(const Array& x, const Array& y) {
  return lax::fori_loop(
      0, 3, [x](const Array&, const Array& carry) { return carry + x; }, y);
}

// ---- while_loop ----
using Counted = std::tuple<Array, Array, Array>;

Counted while_mixed(const Array& x, const Array& y) {
  return lax::while_loop([](const Counted& carry) { return std::get<0>(carry) < 3; },
                         [](const Counted& carry) {
                           auto [i, u, v] = carry;
                           return Counted{i + 1, u * 2.0f, v + 1.0f};
                         },
                         Counted{Array(0), x, y});
}

Pair while_varying_predicate(const Array& x, const Array& y) {
  return lax::while_loop([](const Pair& carry) { return at(std::get<0>(carry), 0) < 4.0f; },
                         [](const Pair& carry) {
                           return Pair{std::get<0>(carry) + 1.0f, std::get<1>(carry) * 2.0f};
                         },
                         Pair{x, y});
}

Pair while_makes_carry_vary(const Array& x, const Array& y) {
  return lax::while_loop([](const Pair& carry) { return std::get<0>(carry) < 3; },
                         [x](const Pair& carry) {
                           return Pair{std::get<0>(carry) + 1, std::get<1>(carry) + x};
                         },
                         Pair{Array(0), y});
}

// ---- cond and switch ----
Pair twice_and_next(const Array& u, const Array& v) {
  return {u * 2.0f, v + 1.0f};
}
Pair thrice_both(const Array& u, const Array& v) {
  return {u * 3.0f, v * 3.0f};
}

Pair cond_invariant_predicate(const Array& x, const Array& y) {
  return lax::cond(at(y, 0) > 1.0f, twice_and_next, thrice_both, x, y);
}

Pair cond_varying_predicate(const Array& x, const Array& y) {
  return lax::cond(at(x, 0) > 1.0f, twice_and_next, thrice_both, x, y);
}

using Branch = std::function<Pair(const Array&, const Array&)>;

std::tuple<Array, Array, Array> switch_over_a_and_b(const Array& x, const Array& y) {
  const std::vector<Branch> branches{[](const Array& u, const Array& v) {
                                       return Pair{u + 1.0f, v * 2.0f};
                                     },
                                     [](const Array& u, const Array& v) {
                                       return Pair{sp::sin(u), v + 2.0f};
                                     },
                                     [](const Array& u, const Array& v) {
                                       return Pair{u * u, sp::cos(v)};
                                     }};
  auto [r, s] = lax::switch_(Array(2), branches, x, y);
  return {r, s, at(r, 0) * s};
}

Pair cond_outputs_differ(const Array& x, const Array& y) {
  return lax::cond(
      at(y, 0) > 1.0f, twice_and_next,
      [](const Array& u, const Array&) {
        return Pair{u * 3.0f, u};
      },
      x, y);
}

Array cond_one_output_differs(const Array& x, const Array& y) {
  return lax::cond(
      at(y, 0) > 1.0f, [](const Array&, const Array& v) { return v + 1.0f; },
      [](const Array& u, const Array&) { return u * 3.0f; }, x, y);
}

Pair switch_outputs_differ(const Array& x, const Array& y) {
  const std::vector<Branch> branches{[](const Array& u, const Array& v) {
                                       return Pair{u + 1.0f, v * 2.0f};
                                     },
                                     [](const Array& u, const Array& v) {
                                       return Pair{u * 2.0f, v + 1.0f};
                                     },
                                     [](const Array& u, const Array& v) {
                                       return Pair{v * 3.0f, u * 3.0f};
                                     }};
  return lax::switch_(Array(1), branches, x, y);
}

// ---- custom_jvp and custom_vjp ----
Pair sin_twice(const Array& u, const Array& v) {
  return {sp::sin(u), v * 2.0f};
}

// The rules call the functions themselves, as JAX's do.
Pair sin_twice_jvp(const Array& u, const Array& v) {
  static const auto f =
      sp::custom_jvp(sin_twice,
                     [](const Pair& primals, const Pair& tangents) {
                       auto [u, v] = primals;
                       auto [du, dv] = tangents;
                       return std::pair{sin_twice_jvp(u, v), Pair{du * sp::cos(u), dv * 2.0f}};
                     },
                     {.name = "sin_twice_jvp", .jvp_name = "_sin_twice_jvp_rule"});
  return f(u, v);
}

Pair sin_twice_vjp(const Array& u, const Array& v) {
  static const auto f = sp::custom_vjp(
      sin_twice,
      [](const Array& u, const Array& v) {
        return std::pair{sin_twice_vjp(u, v), sp::cos(u)};
      },
      [](const Array& cos_u, const Pair& cts) {
        return Pair{std::get<0>(cts) * cos_u, std::get<1>(cts) * 2.0f};
      },
      {.name = "sin_twice_vjp", .fwd_name = "_sin_twice_fwd", .bwd_name = "_sin_twice_bwd"});
  return f(u, v);
}

Pair custom_jvp_results(const Array& x, const Array& y) {
  auto [r, s] = sin_twice_jvp(x, y);
  return {lax::psum(r, "a"), s};
}

Pair custom_vjp_results(const Array& x, const Array& y) {
  auto [r, s] = sin_twice_vjp(x, y);
  return {lax::psum(r, "a"), s};
}

Pair divided_by_literal(const Array& x, const Array& y) {
  return {x * x, y / 4.0f};
}

// C++ scalars given straight to lax functions (JAX's Python scalars given to lax's, NumPy
// scalars to it) stay literals of the backward shard_map under grad.
std::tuple<Array, Array, Array> scalars_to_lax(const Array& x, const Array& y) {
  return {lax::mul(x, x), lax::mul(y, 2.0f), lax::div(y, 4.0f)};
}

// Scalars the operators and jnp-named functions convert (jnp's promotion makes them arrays) are
// residuals of the forward shard_map.
std::tuple<Array, Array, Array, Array> scalars_to_jnp(const Array& x, const Array& y) {
  return {x * x, sp::multiply(y, 2.0f), sp::divide(y, 4.0f), y * 3.0f};
}

// ---- vmap inside the body ----
Pair vmapped_scan(const Array& x, const Array& y) {
  const Array rows = sp::stack({y, y * 2.0f});
  auto [c, ys] = sp::vmap([x](const Array& r) {
    auto [c, ys] = lax::scan(
        [](const Array& carry, const Array& xi) {
          return std::pair{carry * 2.0f, carry * xi};
        },
        r, x);
    return Pair{c, ys};
  })(rows);
  return {c, lax::psum(ys, "a")};
}

Pair vmapped_cond(const Array& x, const Array& y) {
  const Array rows = sp::stack({y, y * 2.0f});
  return sp::vmap([x](const Array& r) {
    return lax::cond(at(r, 0) > 1.0f, twice_and_next, thrice_both, x, r);
  })(rows);
}

// ---- grad of the custom functions outside a shard_map ----
const Array x3 = sp::arange(3.0f) / 4.0f, y3 = sp::arange(3.0f) + 1.0f;
const Array xs23 = sp::arange(6.0f).reshape({2, 3}) / 8.0f;

using Custom = Pair (*)(const Array&, const Array&);

// The sum of f's results.
auto loss_of(Custom f) {
  return [f](const Array& x, const Array& y) {
    auto [r, s] = f(x, y);
    const Array sum_r = sp::sum(r);  // staged before sum(s), as Python evaluates left to right
    return sum_r + sp::sum(s);
  };
}

// f scanned: the carry through its second argument, the xs through its first.
auto scanned(Custom f) {
  return [f](const Array& x, const Array& y) {
    auto [c, ys] = lax::scan(
        [f](const Array& carry, const Array& xi) {
          auto [r, s] = f(xi, carry);
          return std::pair{s, r};
        },
        y, x);
    const Array sum_c = sp::sum(c);
    return sum_c + sp::sum(ys);
  };
}

// JAX's grad with argnums (0, 1): the arguments as one tuple.
template <class F>
auto grad2(F f) {
  return sp::grad([f](const Pair& xy) { return std::apply(f, xy); });
}

// The pullback of f at (x, y) applied to (ct_r, ct_s).
auto pullback(Custom f) {
  return [f](const Array& x, const Array& y, const Array& ct_r, const Array& ct_s) {
    auto [out, pb] = sp::vjp(f, x, y);
    return pb(Pair{ct_r, ct_s});
  };
}

const P A("a"), INV;

// The shard_map of `body` on `mesh`.
template <class F>
auto smap(F body, const sp::Mesh& mesh, sp::SpecTree in_specs, sp::SpecTree out_specs,
          const std::string& name) {
  return sp::shard_map(body, mesh, std::move(in_specs), std::move(out_specs), {.name = name});
}

auto scan_invariant_carry_map() {
  return smap(scan_invariant_carry, mesh8(), {A, INV}, {INV, INV}, "scan_invariant_carry");
}
auto scan_over_a_and_b_map() {
  return smap(scan_carry_over_a_xs_over_b, mesh42(), {A, P("b")}, {A, P("b", "a")},
              "scan_carry_over_a_xs_over_b");
}
auto scan_closes_map() {
  return smap(scan_closes_over_varying, mesh8(), {A, INV}, {INV, INV}, "scan_closes_over_varying");
}
auto fori_mixed_map() {
  return smap(fori_mixed, mesh8(), {A, INV}, {A, INV}, "fori_mixed");
}
auto cond_invariant_map() {
  return smap(cond_invariant_predicate, mesh8(), {A, INV}, {A, INV}, "cond_invariant_predicate");
}
auto cond_varying_map() {
  return smap(cond_varying_predicate, mesh8(), {A, INV}, {A, INV}, "cond_varying_predicate");
}
auto switch_map() {
  return smap(switch_over_a_and_b, mesh42(), {A, P("b")}, {A, P("b"), P(sp::axes("a", "b"))},
              "switch_over_a_and_b");
}
auto custom_jvp_map() {
  return smap(custom_jvp_results, mesh8(), {A, INV}, {INV, INV}, "custom_jvp_results");
}
auto custom_vjp_map() {
  return smap(custom_vjp_results, mesh8(), {A, INV}, {INV, INV}, "custom_vjp_results");
}

// JAX's grad with argnums (0, 1) of the sum of f's results: the arguments as one tuple.
template <class F>
auto summed(F f) {
  return sp::grad([f](const Pair& xy) {
    Array total(0.0f);
    for (const Array& o : sp::tree_flatten(std::apply(f, xy)).first) total = total + sp::sum(o);
    return total;
  });
}

// f's results (their leaves) against the values JAX gave for case `name`.
template <class R>
void expect_values(const std::string& name, const R& result) {
  const auto& values = spmd_test::load_golden("control_flow_vma/values.npz");
  const std::vector<Array> leaves = sp::tree_flatten(result).first;
  for (size_t i = 0; i < leaves.size(); ++i) {
    const std::string key = name + "/" + std::to_string(i);
    ASSERT_TRUE(values.count(key)) << key;
    EXPECT_TRUE(spmd_test::arrays_close(leaves[i], values.at(key), 1e-6, 1e-6)) << key;
  }
  EXPECT_FALSE(values.count(name + "/" + std::to_string(leaves.size()))) << name;
}

// make_jaxpr of f on args equals JAX's text of case `name`, and f's results its values.
template <class F, class... Args>
void expect_case(const std::string& name, F f, const Args&... args) {
  const auto blocks = spmd_test::golden_blocks("control_flow_vma/jaxprs.txt");
  ASSERT_TRUE(blocks.count(name)) << name;
  EXPECT_EQ(sp::make_jaxpr(f)(args...).str(), spmd_test::without_numpy_ints(blocks.at(name)))
      << name;
  expect_values(name, f(args...));
}

// JAX's message for case `name` without the lines naming the branch functions and their source
// ("true_fun is <lambda> at <file>:<line>" and the blank line after them), which C++ cannot know.
std::string jax_message(const std::string& name) {
  std::string text = spmd_test::jax_error("control_flow_vma/errors.txt", name);
  const size_t from = text.find(" is <lambda> at ");
  if (from == std::string::npos) return text;
  const size_t start = text.rfind("\n\n", from) + 2;
  return text.erase(start, text.find("\n\n", from) + 2 - start);
}

// f(args...) raises a TypeError with JAX's message for case `name`, after spmd's "[api] ".
template <class F, class... Args>
void expect_error(const std::string& name, F f, const Args&... args) {
  const std::string what = spmd_test::error_message<sp::TypeError>([&] { f(args...); });
  ASSERT_NE(what.find("] "), std::string::npos) << what;
  EXPECT_EQ(what.substr(what.find("] ") + 2), jax_message(name)) << name;
}

TEST(ControlFlowVma, ScanKeepsAnInvariantCarryBesideVaryingXs) {
  expect_case("scan_invariant_carry", scan_invariant_carry_map(), x16, y2);
  expect_case("scan_carry_over_a_xs_over_b", scan_over_a_and_b_map(), x8, y4);
  expect_case("scan_closes_over_varying", scan_closes_map(), x16, y2);
}

TEST(ControlFlowVma, ScanBodyThatMakesItsCarryVaryRaisesJaxError) {
  expect_error("scan_makes_carry_vary",
               smap(scan_makes_carry_vary, mesh8(), {A, INV}, {INV, A}, "scan_makes_carry_vary"),
               x16, y2);
  expect_error("scan_makes_two_carries_vary",
               smap(scan_makes_two_carries_vary, mesh42(), {A, P("b")}, {sp::SpecTree{INV, INV}, A},
                    "scan_makes_two_carries_vary"),
               x8, y4);
}

TEST(ControlFlowVma, ForiLoopTypesEachCarryAsItsBody) {
  expect_case("fori_mixed", fori_mixed_map(), x16, y2);
  expect_error("fori_makes_carry_vary",
               smap(fori_makes_carry_vary, mesh8(), {A, INV}, A, "fori_makes_carry_vary"), x16, y2);
}

TEST(ControlFlowVma, WhileLoopTypesEachCarryAsItsBody) {
  expect_case("while_mixed", smap(while_mixed, mesh8(), {A, INV}, {INV, A, INV}, "while_mixed"),
              x16, y2);
  expect_case("while_varying_predicate",
              smap(while_varying_predicate, mesh8(), {A, INV}, {A, INV}, "while_varying_predicate"),
              x16, y2);
  expect_error("while_makes_carry_vary",
               smap(while_makes_carry_vary, mesh8(), {A, INV}, {INV, A}, "while_makes_carry_vary"),
               x16, y2);
}

TEST(ControlFlowVma, CondAndSwitchTypeEachOutputAsTheBranches) {
  expect_case("cond_invariant_predicate", cond_invariant_map(), x16, y2);
  expect_case("cond_varying_predicate", cond_varying_map(), x16, y2);
  expect_case("switch_over_a_and_b", switch_map(), x8, y4);
}

TEST(ControlFlowVma, BranchesWhoseOutputsVaryDifferentlyRaiseJaxError) {
  expect_error("cond_outputs_differ",
               smap(cond_outputs_differ, mesh8(), {A, INV}, {A, A}, "cond_outputs_differ"), x16,
               y2);
  expect_error("cond_one_output_differs",
               smap(cond_one_output_differs, mesh8(), {A, INV}, A, "cond_one_output_differs"), x16,
               y2);
  expect_error("switch_outputs_differ",
               smap(switch_outputs_differ, mesh42(), {A, P("b")},
                    {P(sp::axes("a", "b")), P(sp::axes("a", "b"))}, "switch_outputs_differ"),
               x8, y4);
}

TEST(ControlFlowVma, CustomJvpAndVjpCallsTypeEachResultAsTheFunction) {
  expect_case("custom_jvp_results", custom_jvp_map(), x16, y2);
  expect_case("custom_vjp_results", custom_vjp_map(), x16, y2);
}

TEST(ControlFlowVma, VmapInsideTheBody) {
  expect_case("vmapped_scan", smap(vmapped_scan, mesh8(), {A, INV}, {INV, INV}, "vmapped_scan"),
              x16, y2);
  expect_case("vmapped_cond",
              smap(vmapped_cond, mesh8(), {A, INV}, {P(sp::None, "a"), INV}, "vmapped_cond"), x16,
              y2);
}

TEST(ControlFlowVma, GradThroughLoopsAndBranches) {
  expect_case("grad_scan_invariant_carry", summed(scan_invariant_carry_map()), Pair{x16, y2});
  // The forward scan leaves the pvary of a literal, which reads no iteration's values, outside.
  expect_case("grad_scan_over_a_and_b", summed(scan_over_a_and_b_map()), Pair{x8, y4});
  expect_case("grad_fori_mixed", summed(fori_mixed_map()), Pair{x16, y2});
  expect_case("grad_cond_invariant_predicate", summed(cond_invariant_map()), Pair{x16, y2});
  expect_case("grad_cond_varying_predicate", summed(cond_varying_map()), Pair{x16, y2});
  expect_case("grad_switch_over_a_and_b", summed(switch_map()), Pair{x8, y4});
}

// The custom calls stay in the forward computation (their rules call them), a literal a linear
// equation reads (`0.0 * y[0]`, the rule's `dv * 2.0`, `y / 4.0`) is a residual of the forward
// shard_map, and the transposed scan body adds each cotangent of a closed-over value as it is
// computed.
TEST(ControlFlowVma, GradThroughClosuresAndCustomCalls) {
  expect_case("grad_scan_closes_over_varying", summed(scan_closes_map()), Pair{x16, y2});
  expect_case("grad_custom_jvp_results", summed(custom_jvp_map()), Pair{x16, y2});
  expect_case("grad_custom_vjp_results", summed(custom_vjp_map()), Pair{x16, y2});
  expect_case("grad_divided_by_literal",
              summed(smap(divided_by_literal, mesh8(), {A, INV}, {A, INV}, "divided_by_literal")),
              Pair{x16, y2});
}

TEST(ControlFlowVma, GradKeepsLaxScalarsLiteralAndJnpScalarsResiduals) {
  expect_case("grad_scalars_to_lax",
              summed(smap(scalars_to_lax, mesh8(), {A, INV}, {A, INV, INV}, "scalars_to_lax")),
              Pair{x16, y2});
  expect_case(
      "grad_scalars_to_jnp",
      summed(smap(scalars_to_jnp, mesh8(), {A, INV}, {A, INV, INV, INV}, "scalars_to_jnp")),
      Pair{x16, y2});
}

TEST(ControlFlowVma, GradOfCustomCallsKeepsThemInTheForwardComputation) {
  expect_case("grad_custom_jvp", grad2(loss_of(sin_twice_jvp)), Pair{x3, y3});
  expect_case("vjp_custom_jvp", pullback(sin_twice_jvp), x3, y3, y3, x3);
  expect_case("grad_custom_vjp", grad2(loss_of(sin_twice_vjp)), Pair{x3, y3});
  expect_case("vjp_custom_vjp", pullback(sin_twice_vjp), x3, y3, y3, x3);
  expect_case("grad_jit_custom_jvp", grad2(sp::jit(loss_of(sin_twice_jvp), {.name = "loss"})),
              Pair{x3, y3});
  expect_case("grad_jit_custom_vjp", grad2(sp::jit(loss_of(sin_twice_vjp), {.name = "loss"})),
              Pair{x3, y3});
}

// Inside a scan, partial evaluation of the body inlines a custom_jvp_call whose operands are
// known, and for a custom_vjp_call leaves an empty custom_vjp_call equation, of no operands, in
// the enclosing jaxpr, as JAX's does.
TEST(ControlFlowVma, GradOfCustomCallsInsideScan) {
  expect_case("grad_scan_custom_jvp", grad2(scanned(sin_twice_jvp)), Pair{xs23, y3});
  expect_case("grad_scan_custom_vjp", grad2(scanned(sin_twice_vjp)), Pair{xs23, y3});
}

}  // namespace

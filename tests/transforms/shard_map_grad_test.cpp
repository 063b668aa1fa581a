// Values and gradients through every collective inside shard_map, against JAX
// (tools/goldens/gen_shard_map_grads.py, tests/goldens/shard_map_grads/): on the meshes (8,) 'i',
// (4, 2) ('x', 'y') and (2, 2, 2) ('a', 'b', 'c'), with check_vma on and off, eagerly and under
// jit. Each case is the Python case of the same name (MANIFEST.md lists their sources); its
// inputs and loss weight come from the golden file. pbroadcast, which JAX 0.10.2 cannot run on
// CPU, is checked against its definition.
#include <spmd/parallel.h>
#include <spmd/shard_map.h>
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "support/golden.h"

#include <functional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace sp = spmd;
using sp::Array;
using sp::P;

namespace {

using Args = std::vector<Array>;
using Fn = std::function<Array(const Args&)>;

struct GradCase {
  std::string name;
  std::string mesh;  // "i", "xy" or "abc"
  std::vector<sp::PartitionSpec> in_specs;
  sp::PartitionSpec out_spec;
  Fn body;
  std::string file = "grads.npz";  // its golden file in shard_map_grads/
};

// gtest names each instance, and prints its parameter, by the case name.
std::string case_name(const ::testing::TestParamInfo<GradCase>& info) {
  return info.param.name;
}
void PrintTo(const GradCase& c, std::ostream* os) {
  *os << c.name;
}

sp::Mesh make_mesh(const std::string& name) {
  if (name == "i") return sp::make_mesh({8}, {"i"});
  if (name == "xy") return sp::make_mesh({4, 2}, {"x", "y"});
  return sp::make_mesh({2, 2, 2}, {"a", "b", "c"});
}

// The case's record `field` (x0, y, w, grad_vma0, ...).
const Array& golden(const GradCase& c, const std::string& field) {
  return spmd_test::load_golden("shard_map_grads/" + c.file).at(c.name + "." + field);
}

Args inputs(const GradCase& c) {
  Args xs;
  for (size_t k = 0; k < c.in_specs.size(); ++k)
    xs.push_back(golden(c, std::string("x").append(std::to_string(k))));
  return xs;
}

// The case's body as sp::shard_map, called with the inputs as positional arguments.
Fn build(const GradCase& c, bool check_vma) {
  sp::Mesh mesh = make_mesh(c.mesh);
  sp::ShardMapOptions options{.check_vma = check_vma, .name = c.name};
  Fn body = c.body;
  if (c.in_specs.size() == 1) {
    auto f = sp::shard_map([body](const Array& a) { return body({a}); }, mesh, {c.in_specs[0]},
                           c.out_spec, options);
    return [f](const Args& xs) { return f(xs[0]); };
  }
  auto f = sp::shard_map(
      [body](const Array& a, const Array& b) {
        return body({a, b});
      },
      mesh, {c.in_specs[0], c.in_specs[1]}, c.out_spec, options);
  return [f](const Args& xs) { return f(xs[0], xs[1]); };
}

// sum(f(x...) * w) with JAX's fixed random w.
std::function<Array(const Args&)> loss_of(const GradCase& c, bool check_vma) {
  Fn f = build(c, check_vma);
  Array w = golden(c, "w");
  return [f, w](const Args& xs) { return sp::sum(f(xs) * w); };
}

// float32: the collectives sum in another order than XLA's and sin/cos/exp are other polynomial
// approximations, each a few ulps apart; 1e-5 relative, and 1e-6 absolute for the elements that
// cancel to near zero. Every case passes at these tolerances.
void expect_close(const Array& got, const Array& want) {
  EXPECT_TRUE(spmd_test::arrays_close(got, want, 1e-5, 1e-6));
}

void expect_grads(const Args& got, const GradCase& c, const std::string& tag) {
  ASSERT_EQ(got.size(), c.in_specs.size());
  for (size_t k = 0; k < got.size(); ++k) {
    SCOPED_TRACE(tag + std::to_string(k));
    expect_close(got[k], golden(c, tag + std::to_string(k)));
  }
}

// ppermute's perm for the shift by one: (j, j + 1 mod n).
std::vector<std::pair<int, int>> cyclic_shift(int n) {
  std::vector<std::pair<int, int>> perm;
  for (int j = 0; j < n; ++j) perm.emplace_back(j, (j + 1) % n);
  return perm;
}

Array as_f32(const Array& index) {
  return index.astype(sp::float32);
}

// e = exp(v - pmax(stop_gradient(v))); e / psum(e): the stable softmax across devices.
Array softmax_over(const Array& v, const sp::AxisNames& axes) {
  Array e = sp::exp(v - sp::pmax(sp::stop_gradient(v), axes));
  return e / sp::psum(e, axes);
}

// ---- the cases, as in gen_shard_map_grads.py ---------------------------------------------------
GradCase grad_case(std::string name, std::string mesh, std::vector<sp::PartitionSpec> in_specs,
                   sp::PartitionSpec out_spec, Fn body) {
  return {std::move(name), std::move(mesh), std::move(in_specs), std::move(out_spec),
          std::move(body)};
}

const std::vector<GradCase>& mesh_i_cases() {
  static const std::vector<GradCase> cases = {
      grad_case("i_psum", "i", {P("i")}, P(), [](const Args& v) { return sp::psum(v[0], "i"); }),
      grad_case("i_psum_sin", "i", {P("i")}, P("i"),
                [](const Args& v) { return sp::sin(v[0]) * sp::psum(v[0] * v[0], "i"); }),
      grad_case("i_pmean", "i", {P("i")}, P(),
                [](const Args& v) { return sp::pmean(sp::exp(v[0]), "i"); }),
      grad_case("i_all_gather", "i", {P("i")}, P("i"),
                [](const Args& v) { return sp::all_gather(v[0], "i"); }),
      grad_case("i_all_gather_tiled_axis1", "i", {P("i")}, P("i"),
                [](const Args& v) {
                  return sp::all_gather(sp::sin(v[0]), "i", {.axis = 1, .tiled = true});
                }),
      grad_case("i_psum_scatter", "i", {P(sp::None, "i")}, P("i"),
                [](const Args& v) { return sp::psum_scatter(v[0], "i"); }),
      grad_case("i_psum_scatter_tiled", "i", {P("i")}, P("i"),
                [](const Args& v) {
                  return sp::psum_scatter(v[0] * v[0], "i",
                                          {.scatter_dimension = 1, .tiled = true});
                }),
      grad_case("i_ppermute", "i", {P("i")}, P("i"),
                [](const Args& v) { return v[0] * sp::ppermute(v[0], "i", cyclic_shift(8)); }),
      grad_case("i_all_to_all_tiled", "i", {P("i")}, P("i"),
                [](const Args& v) { return sp::all_to_all(v[0], "i", 1, 0, {.tiled = true}); }),
      grad_case("i_all_to_all", "i", {P("i")}, P("i"),
                [](const Args& v) { return sp::all_to_all(sp::cos(v[0]), "i", 1, 1); }),
      grad_case("i_axis_index", "i", {P("i")}, P("i"),
                [](const Args& v) {
                  return v[0] * as_f32(sp::axis_index("i") + 1) + sp::axis_index("i");
                }),
      grad_case("i_pmax_softmax", "i", {P("i")}, P("i"),
                [](const Args& v) { return softmax_over(v[0], "i"); }),
      grad_case("i_psum_replicated", "i", {P()}, P(),
                [](const Args& v) { return v[0] * sp::psum(v[0], "i"); }),
  };
  return cases;
}

const std::vector<GradCase>& mesh_xy_cases() {
  static const std::vector<GradCase> cases = {
      grad_case("xy_matmul_psum_y", "xy", {P("x", "y"), P("y", sp::None)}, P("x", sp::None),
                [](const Args& v) { return sp::psum(sp::dot(v[0], v[1]), "y"); }),
      grad_case("xy_psum_xy", "xy", {P("x", "y")}, P(),
                [](const Args& v) { return sp::psum(v[0], sp::axes("x", "y")); }),
      grad_case("xy_psum_x_sin", "xy", {P("x", "y")}, P("x", "y"),
                [](const Args& v) { return sp::sin(sp::psum(v[0], "x")) * v[0]; }),
      grad_case("xy_pmean_x", "xy", {P("x", "y")}, P(sp::None, "y"),
                [](const Args& v) { return sp::pmean(v[0] * v[0], "x"); }),
      grad_case("xy_all_gather_x_tiled", "xy", {P("x", "y")}, P("x", "y"),
                [](const Args& v) { return sp::all_gather(v[0], "x", {.tiled = true}); }),
      grad_case("xy_all_gather_xy", "xy", {P("x", "y")}, P("x", sp::None, "y"),
                [](const Args& v) {
                  return sp::all_gather(sp::sin(v[0]), sp::axes("x", "y"), {.axis = 1});
                }),
      grad_case("xy_all_gather_y_axis1_tiled", "xy", {P("x", "y")}, P("x", "y"),
                [](const Args& v) {
                  return sp::all_gather(v[0], "y", {.axis = 1, .tiled = true}) * 2.0f;
                }),
      grad_case("xy_psum_scatter_y_tiled", "xy", {P("x", "y")}, P("x", "y"),
                [](const Args& v) {
                  return sp::psum_scatter(v[0], "y", {.scatter_dimension = 1, .tiled = true});
                }),
      grad_case("xy_psum_scatter_xy", "xy", {P(sp::None, sp::axes("x", "y"))},
                P(sp::axes("x", "y")),
                [](const Args& v) { return sp::psum_scatter(sp::exp(v[0]), sp::axes("x", "y")); }),
      grad_case(
          "xy_ppermute_x", "xy", {P("x", "y")}, P("x", "y"),
          [](const Args& v) { return v[0] * sp::ppermute(sp::sin(v[0]), "x", cyclic_shift(4)); }),
      grad_case("xy_all_to_all_y", "xy", {P("x", "y")}, P("x", "y"),
                [](const Args& v) { return sp::all_to_all(v[0], "y", 1, 0, {.tiled = true}); }),
      grad_case("xy_axis_index_xy", "xy", {P("x", "y")}, P("x", "y"),
                [](const Args& v) {
                  return v[0] + as_f32(sp::axis_index(sp::axes("x", "y"))) * v[0] * v[0];
                }),
      grad_case("xy_pmax_softmax_y", "xy", {P("x", "y")}, P("x", "y"),
                [](const Args& v) { return softmax_over(v[0], "y"); }),
      grad_case("xy_replicated_operand", "xy", {P("x", "y"), P(sp::None, "y")}, P("x", "y"),
                [](const Args& v) { return v[0] * sp::sin(v[1]); }),
      grad_case("xy_psum_y_of_invariant", "xy", {P("x")}, P("x"),
                [](const Args& v) { return sp::psum(v[0] * v[0], "y"); }),
  };
  return cases;
}

const std::vector<GradCase>& mesh_abc_cases() {
  static const std::vector<GradCase> cases = {
      grad_case("abc_psum_ac", "abc", {P(sp::axes("a", "b"), "c")}, P("b"),
                [](const Args& v) { return sp::psum(v[0], sp::axes("a", "c")); }),
      grad_case("abc_psum_abc", "abc", {P("a", "b", "c")}, P(),
                [](const Args& v) { return sp::psum(v[0] * v[0], sp::axes("a", "b", "c")); }),
      grad_case("abc_pmean_b", "abc", {P("a", "b", "c")}, P("a", sp::None, "c"),
                [](const Args& v) { return sp::pmean(sp::sin(v[0]) * v[0], "b"); }),
      grad_case(
          "abc_all_gather_bc", "abc", {P("a", sp::axes("b", "c"))}, P("a", "b", "c"),
          [](const Args& v) { return sp::all_gather(v[0], sp::axes("b", "c"), {.axis = 1}); }),
      grad_case("abc_all_gather_c_tiled", "abc", {P("c", "a")}, P("c", "a"),
                [](const Args& v) { return sp::all_gather(v[0], "c", {.tiled = true}); }),
      grad_case("abc_psum_scatter_a", "abc", {P(sp::None, sp::axes("b", "c"), "a")},
                P(sp::axes("b", "c"), "a"),
                [](const Args& v) { return sp::psum_scatter(v[0], "a"); }),
      grad_case("abc_psum_scatter_bc_tiled", "abc", {P("a", sp::axes("b", "c"))},
                P(sp::axes("a", "b", "c")),
                [](const Args& v) {
                  return sp::psum_scatter(v[0], sp::axes("b", "c"), {.tiled = true});
                }),
      grad_case("abc_ppermute_ab", "abc", {P(sp::axes("a", "b"), "c")}, P(sp::axes("a", "b"), "c"),
                [](const Args& v) {
                  return v[0] * sp::ppermute(v[0], sp::axes("a", "b"), cyclic_shift(4));
                }),
      grad_case("abc_ppermute_c", "abc", {P("a", "b", "c")}, P("a", "b", "c"),
                [](const Args& v) { return sp::exp(sp::ppermute(v[0], "c", cyclic_shift(2))); }),
      grad_case("abc_all_to_all_ab", "abc", {P("c", sp::axes("a", "b"))},
                P("c", sp::axes("a", "b")),
                [](const Args& v) {
                  return sp::all_to_all(v[0], sp::axes("a", "b"), 0, 1, {.tiled = true});
                }),
      grad_case("abc_axis_index", "abc", {P("a", "b", "c")}, P("a", "b", "c"),
                [](const Args& v) {
                  return v[0] * as_f32(sp::axis_index(sp::axes("b", "a")) + 1) -
                         sp::axis_index("c");
                }),
      grad_case("abc_pmax_softmax", "abc", {P(sp::axes("a", "b", "c"))}, P(sp::axes("a", "b", "c")),
                [](const Args& v) { return softmax_over(v[0], sp::axes("a", "b", "c")); }),
  };
  return cases;
}

// Results invariant over a mesh axis that their out_spec splits over: every block along that
// axis is the same value, so its cotangent is the sum of the blocks' cotangents. Values and the
// gradients without check_vma match JAX; with check_vma see the disabled tests below.
const std::vector<GradCase>& invariant_split_output_cases() {
  static const std::vector<GradCase> cases = {
      grad_case("i_psum_out_split", "i", {P("i")}, P("i"),
                [](const Args& v) { return sp::psum(sp::sin(v[0]), "i"); }),
      grad_case("xy_invariant_out_split_y", "xy", {P("x")}, P("x", "y"),
                [](const Args& v) { return sp::sin(v[0]); }),
  };
  return cases;
}

// Cases JAX cannot differentiate: values only.
const std::vector<GradCase>& forward_only_cases() {
  static const std::vector<GradCase> cases = {
      grad_case("i_pmax", "i", {P("i")}, P(), [](const Args& v) { return sp::pmax(v[0], "i"); }),
      grad_case("i_all_to_all_split1_concat0", "i", {P("i")}, P("i"),
                [](const Args& v) { return sp::all_to_all(v[0], "i", 1, 0); }),
      grad_case("xy_pmax_x", "xy", {P("x", "y")}, P(sp::None, "y"),
                [](const Args& v) { return sp::pmax(v[0], "x"); }),
      grad_case("abc_pmax_ab", "abc", {P("a", "b", "c")}, P(sp::None, sp::None, "c"),
                [](const Args& v) { return sp::pmax(v[0], sp::axes("a", "b")); }),
  };
  return cases;
}

// Cases recorded in grads_more_collectives.npz: pshuffle, pcast to varying (JAX 0.10's pvary)
// and pmin, on the (4, 2) mesh.
GradCase more_case(std::string name, std::vector<sp::PartitionSpec> in_specs,
                   sp::PartitionSpec out_spec, Fn body) {
  GradCase c =
      grad_case(std::move(name), "xy", std::move(in_specs), std::move(out_spec), std::move(body));
  c.file = "grads_more_collectives.npz";
  return c;
}

const std::vector<GradCase>& more_collective_cases() {
  static const std::vector<GradCase> cases = {
      more_case("xy_pshuffle_x", {P("x", "y")}, P("x", "y"),
                [](const Args& v) {
                  return v[0] * sp::pshuffle(sp::sin(v[0]), "x", {2, 0, 3, 1});
                }),
      more_case("xy_pshuffle_xy", {P("x", "y")}, P(sp::axes("x", "y")),
                [](const Args& v) {
                  return sp::pshuffle(v[0], sp::axes("x", "y"), {3, 1, 4, 0, 5, 7, 6, 2});
                }),
      more_case(
          "xy_pmin_stop_gradient_y", {P("x", "y")}, P("x", "y"),
          [](const Args& v) { return sp::exp(sp::pmin(sp::stop_gradient(v[0]), "y") - v[0]); }),
  };
  return cases;
}

// pvary of values invariant over the cast axes (JAX 0.10's pcast(to='varying')): their
// cotangents are summed over those axes. With check_vma off see the disabled test below.
const std::vector<GradCase>& pvary_cases() {
  static const std::vector<GradCase> cases = {
      more_case("xy_pcast_varying_y", {P("x")}, P("x", "y"),
                [](const Args& v) {
                  return sp::pvary(sp::sin(v[0]), "y") * as_f32(sp::axis_index("y") + 1);
                }),
      more_case("xy_pcast_varying_xy", {P()}, P("x", "y"),
                [](const Args& v) {
                  return sp::pvary(v[0] * v[0], sp::axes("x", "y")) +
                         as_f32(sp::axis_index(sp::axes("x", "y")));
                }),
  };
  return cases;
}

// pmin, like pmax, has no derivative in JAX: values only.
const std::vector<GradCase>& more_forward_only_cases() {
  static const std::vector<GradCase> cases = {
      more_case("xy_pmin_x", {P("x", "y")}, P(sp::None, "y"),
                [](const Args& v) { return sp::pmin(v[0], "x"); }),
      more_case("xy_pmin_xy", {P("x", "y")}, P(),
                [](const Args& v) { return sp::pmin(v[0], sp::axes("x", "y")); }),
  };
  return cases;
}

std::vector<GradCase> differentiable_cases() {
  std::vector<GradCase> all = mesh_i_cases();
  for (const auto* group : {&mesh_xy_cases(), &mesh_abc_cases(), &more_collective_cases()})
    all.insert(all.end(), group->begin(), group->end());
  return all;
}

std::vector<GradCase> all_cases() {
  std::vector<GradCase> all = differentiable_cases();
  for (const auto* group : {&invariant_split_output_cases(), &pvary_cases(), &forward_only_cases(),
                            &more_forward_only_cases()})
    all.insert(all.end(), group->begin(), group->end());
  return all;
}

// ---- the checks --------------------------------------------------------------------------------
class ShardMapGradValues : public ::testing::TestWithParam<GradCase> {};

TEST_P(ShardMapGradValues, MatchJaxWithAndWithoutCheckVma) {
  const GradCase& c = GetParam();
  for (bool check_vma : {true, false}) {
    SCOPED_TRACE(check_vma ? "check_vma" : "no check_vma");
    expect_close(build(c, check_vma)(inputs(c)), golden(c, "y"));
  }
}

class ShardMapGrad : public ::testing::TestWithParam<GradCase> {};

TEST_P(ShardMapGrad, CheckVmaMatchesJax) {
  const GradCase& c = GetParam();
  expect_grads(sp::grad(loss_of(c, true))(inputs(c)), c, "grad_vma");
}

TEST_P(ShardMapGrad, NoCheckVmaMatchesJax) {
  const GradCase& c = GetParam();
  expect_grads(sp::grad(loss_of(c, false))(inputs(c)), c, "grad_novma");
}

TEST_P(ShardMapGrad, JitOfGradCheckVmaMatchesJax) {
  const GradCase& c = GetParam();
  expect_grads(sp::jit(sp::grad(loss_of(c, true)))(inputs(c)), c, "jit_grad_vma");
}

TEST_P(ShardMapGrad, JitOfGradNoCheckVmaMatchesJax) {
  const GradCase& c = GetParam();
  expect_grads(sp::jit(sp::grad(loss_of(c, false)))(inputs(c)), c, "jit_grad_novma");
}

INSTANTIATE_TEST_SUITE_P(Mesh8, ShardMapGradValues, ::testing::ValuesIn(all_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Mesh8, ShardMapGrad, ::testing::ValuesIn(differentiable_cases()),
                         case_name);

TEST(ShardMapGradInvariantSplitOutput, NoCheckVmaMatchesJax) {
  for (const GradCase& c : invariant_split_output_cases()) {
    SCOPED_TRACE(c.name);
    expect_grads(sp::grad(loss_of(c, false))(inputs(c)), c, "grad_novma");
    expect_grads(sp::jit(sp::grad(loss_of(c, false)))(inputs(c)), c, "jit_grad_novma");
  }
}

// With check_vma an output invariant over an axis its out_spec splits is cast to varying there
// (pvary) before it leaves the body, and pvary transposes to a psum over that axis: block j's
// cotangent is the sum of every block's (for i_psum_out_split, psum(sin(v), 'i') with out_specs
// P('i'), the gradient is cos(v_j) * sum_i w_i, not cos(v_j) * w_j). Eager and jit alike.
TEST(ShardMapGradInvariantSplitOutput, CheckVmaMatchesJax) {
  for (const GradCase& c : invariant_split_output_cases()) {
    SCOPED_TRACE(c.name);
    expect_grads(sp::grad(loss_of(c, true))(inputs(c)), c, "grad_vma");
    expect_grads(sp::jit(sp::grad(loss_of(c, true)))(inputs(c)), c, "jit_grad_vma");
  }
}

TEST(ShardMapGradPvary, CheckVmaMatchesJax) {
  for (const GradCase& c : pvary_cases()) {
    SCOPED_TRACE(c.name);
    expect_grads(sp::grad(loss_of(c, true))(inputs(c)), c, "grad_vma");
    expect_grads(sp::jit(sp::grad(loss_of(c, true)))(inputs(c)), c, "jit_grad_vma");
  }
}

// Without check_vma JAX's pcast to varying binds nothing, and neither does sp::pvary: a pvary
// there would transpose to a psum on top of shard_map's psum of the cotangent of an operand
// replicated over those axes, multiplying the gradient by the cast axes' size.
TEST(ShardMapGradPvary, NoCheckVmaMatchesJax) {
  for (const GradCase& c : pvary_cases()) {
    SCOPED_TRACE(c.name);
    expect_grads(sp::grad(loss_of(c, false))(inputs(c)), c, "grad_novma");
    expect_grads(sp::jit(sp::grad(loss_of(c, false)))(inputs(c)), c, "jit_grad_novma");
  }
}

// JAX 0.10.2 cannot transpose an untiled all_to_all whose split and concat axes differ, so this
// case has no JAX gradient. all_to_all only moves elements, so its transpose is its inverse:
// applying f to the gradient of sum(f(x) * w) must give back w (f's values are JAX's).
TEST(ShardMapGradTranspose, UntiledAllToAllSplitNotConcatIsInverted) {
  const GradCase& c = forward_only_cases()[1];
  ASSERT_EQ(c.name, "i_all_to_all_split1_concat0");
  Array w = golden(c, "y") * 0.5f + 1.0f;
  for (bool check_vma : {true, false}) {
    SCOPED_TRACE(check_vma ? "check_vma" : "no check_vma");
    Fn f = build(c, check_vma);
    auto loss = [f, w](const Args& xs) { return sp::sum(f(xs) * w); };
    Args g = sp::grad(loss)(inputs(c));
    ASSERT_EQ(g.size(), 1u);
    EXPECT_TRUE(spmd_test::arrays_equal(f(g), w));
    Args jit_g = sp::jit(sp::grad(loss))(inputs(c));
    EXPECT_TRUE(spmd_test::arrays_equal(f(jit_g), w));
  }
}

// grad of sum(f(x) * y) must raise JAX's "Differentiation rule for '<prim>' not implemented",
// with check_vma on and off.
void expect_no_differentiation_rule(const GradCase& c, const std::string& prim) {
  for (bool check_vma : {true, false}) {
    SCOPED_TRACE(check_vma ? "check_vma" : "no check_vma");
    Fn f = build(c, check_vma);
    Array w = golden(c, "y");
    auto loss = [f, w](const Args& xs) { return sp::sum(f(xs) * w); };
    try {
      Args g = sp::grad(loss)(inputs(c));
      g[0].block_until_ready();
      ADD_FAILURE() << "expected NotImplementedError";
    } catch (const sp::NotImplementedError& e) {
      EXPECT_NE(
          std::string(e.what()).find("differentiation rule for '" + prim + "' not implemented"),
          std::string::npos)
          << e.what();
    }
  }
}

// pmax and pmin have no derivative in JAX ("Differentiation rule for 'pmax' not implemented");
// spmd says the same instead of returning a gradient JAX would not give.
TEST(ShardMapGradErrors, PmaxHasNoDifferentiationRule) {
  const GradCase& c = forward_only_cases()[0];
  ASSERT_EQ(c.name, "i_pmax");
  expect_no_differentiation_rule(c, "pmax");
}

TEST(ShardMapGradErrors, PminHasNoDifferentiationRule) {
  for (const GradCase& c : more_forward_only_cases()) {
    SCOPED_TRACE(c.name);
    expect_no_differentiation_rule(c, "pmin");
  }
}

// JAX 0.10.2 cannot record pbroadcast on CPU: XLA:CPU has no collective-broadcast, and JAX's
// transpose rule fails for non-scalar operands ("full must be called with scalar fill_value").
// So the expected values follow the definition, in integers exact in float32: every block along
// 'x' is the source block's value, and the gradient of sum(f(v) * w) is, on the source's blocks,
// the sum over 'x' of w's blocks and zero elsewhere (JAX's _pbroadcast_transpose_rule).
TEST(ShardMapGradPbroadcast, SourceBlocksGetTheCotangentSummedOverTheAxis) {
  sp::Mesh mesh = make_mesh("xy");
  Array v = sp::arange(32.0f).reshape({8, 4});
  Array w = (sp::arange(32.0f) * 7.0f - 100.0f).reshape({8, 4});
  // Source 2 along 'x' holds rows 4:6 of the (8, 4) input.
  Array source_rows = (sp::arange(8.0f) + 16.0f).reshape({2, 4});
  Array want_y = sp::concatenate({source_rows, source_rows, source_rows, source_rows}, 0);
  Array w_summed = sp::sum(w.reshape({4, 2, 4}), {0});
  Array want_grad = sp::concatenate({sp::zeros({4, 4}), w_summed, sp::zeros({2, 4})}, 0);
  for (bool check_vma : {true, false}) {
    SCOPED_TRACE(check_vma ? "check_vma" : "no check_vma");
    auto f = sp::shard_map([](const Array& b) { return sp::pbroadcast(b, "x", 2); }, mesh,
                           {P("x", "y")}, P("x", "y"), {.check_vma = check_vma});
    EXPECT_TRUE(spmd_test::arrays_equal(f(v), want_y));
    auto loss = [f, w](const Array& x) { return sp::sum(f(x) * w); };
    EXPECT_TRUE(spmd_test::arrays_equal(sp::grad(loss)(v), want_grad));
    EXPECT_TRUE(spmd_test::arrays_equal(sp::jit(sp::grad(loss))(v), want_grad));
  }
}

}  // namespace

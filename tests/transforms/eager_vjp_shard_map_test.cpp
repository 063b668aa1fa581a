// Eager vjp of functions calling shard_map against JAX 0.10.2's eager partial evaluation
// (tools/goldens/gen_eager_vjp_shard_map.py): the forward shard_map runs at once, and the
// pullback is the transposed shard_map of the cotangents and the residuals, in JAX's order; a
// residual that is the shard_map's operand is the argument itself (uncommitted, as passed), one
// that is its result the vjp's result itself, the others blocks the forward shard_map returned.
// The pullback's jaxpr text, its residuals (shape, sharding, identity, values) and its values.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include "ir/program.h"
#include "support/golden.h"

#include <map>
#include <string>
#include <vector>

namespace {

namespace sp = spmd;
using sp::Array;
using sp::None;
using sp::P;

const std::string kGolden = "eager_vjp_shard_map/cases.txt";

// A case's golden: the residual lines, then the jaxpr.
struct Golden {
  std::string residuals;
  std::string jaxpr;
};

Golden golden(const std::string& name) {
  static const auto* b = new std::map<std::string, std::string>(spmd_test::golden_blocks(kGolden));
  const std::string& text = b->at(name);
  const size_t at = text.find("{ lambda");
  return {text.substr(0, at), text.substr(at)};
}

// A residual as the generator prints it: Python's shape tuple, the sharding's repr, and whether
// it is one of the arguments or the result itself.
std::string residual_line(const Array& r, const std::vector<Array>& args, const Array& out) {
  std::string shape = "(";
  for (int d = 0; d < r.ndim(); ++d)
    shape += std::to_string(r.shape()[d]) + (r.ndim() == 1 ? "," : d + 1 < r.ndim() ? ", " : "");
  std::string which = "computed";
  if (r.impl() == out.impl()) which = "result";
  for (size_t i = 0; i < args.size(); ++i)
    if (r.impl() == args[i].impl()) which = "argument " + std::to_string(i);
  return shape + ") " + r.sharding()->repr() + " " + which + "\n";
}

const sp::Mesh& mesh_a() {
  static const sp::Mesh mesh(sp::create_device_mesh({8}), {"a"});
  return mesh;
}

// grid() of the generator: 0.03125·i over 8×8.
Array grid() {
  return sp::arange(64.0f).reshape({8, 8}) * 0.03125f;
}

// The eager vjp of f at args: the pullback's jaxpr, its residuals, their values and the
// pullback's values for a cotangent of ones are JAX's.
template <class F, class... Args>
void check(const std::string& name, F f, const Args&... args) {
  SCOPED_TRACE(name);
  const Golden want = golden(name);
  auto [out, pullback] = sp::vjp(f, args...);
  const Array ct = sp::ones_like(out);
  const sp::ClosedJaxpr closed = sp::make_jaxpr([&](const Array& c) { return pullback(c); })(ct);
  EXPECT_EQ(closed.str(), want.jaxpr);
  const std::vector<Array> argv{args...};
  std::string residuals;
  for (const Array& r : closed.program().consts) residuals += residual_line(r, argv, out);
  EXPECT_EQ(residuals, want.residuals);
  const auto& values = spmd_test::load_golden("eager_vjp_shard_map/values.npz");
  const std::vector<Array>& consts = closed.program().consts;
  for (size_t k = 0; k < consts.size(); ++k)
    EXPECT_TRUE(spmd_test::arrays_close(consts[k], values.at(name + "/res" + std::to_string(k)),
                                        1e-6, 1e-6))
        << "residual " << k;
  const std::vector<Array> cts = sp::tree_flatten(pullback(ct)).first;
  for (size_t i = 0; i < cts.size(); ++i)
    EXPECT_TRUE(
        spmd_test::arrays_close(cts[i], values.at(name + "/ct" + std::to_string(i)), 1e-6, 1e-6))
        << "cotangent " << i;
}

class EagerVjpShardMap : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sp::device_count() < 8) GTEST_SKIP() << "needs 8 devices";
  }
  static auto sin_mul() {
    return sp::shard_map([](const Array& v) { return sp::sin(v) * v; }, mesh_a(), P("a"), P("a"));
  }
};

TEST_F(EagerVjpShardMap, AnOperandResidualIsTheArgumentItself) {
  check("operand_residual", sin_mul(), grid());
  auto sm = sin_mul();
  check(
      "between_other_operations", [sm](const Array& x) { return sp::cos(sm(x)); }, grid());
  check("no_check_vma",
        sp::shard_map([](const Array& v) { return sp::sin(v) * v; }, mesh_a(), P("a"), P("a"),
                      {.check_vma = false}),
        grid());
}

TEST_F(EagerVjpShardMap, AResultResidualIsTheResultItself) {
  check("result_residual",
        sp::shard_map([](const Array& v) { return sp::exp(v); }, mesh_a(), P("a"), P("a")), grid());
}

TEST_F(EagerVjpShardMap, ComputedResidualsLeaveTheForwardShardMap) {
  const Array c = sp::arange(8.0f) * 0.5f;
  check("closed_over_constant",
        sp::shard_map([c](const Array& v) { return sp::sin(v) * c; }, mesh_a(), P("a"), P("a")),
        grid());
  check("psum_to_replicated",
        sp::shard_map([](const Array& v) { return sp::lax::psum(sp::sin(v), "a"); }, mesh_a(),
                      P("a", None), P()),
        grid());
  check("replicated_operand",
        sp::shard_map([](const Array& u, const Array& v) { return u * v; }, mesh_a(), {P("a"), P()},
                      P("a")),
        grid(), grid()[0]);
}

}  // namespace

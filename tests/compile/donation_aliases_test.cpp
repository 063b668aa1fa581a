// Against JAX 0.10.2 (tools/goldens/gen_donation_aliases.py): which donated arguments a jit uses
// and deletes, which result each one's buffer holds, and JAX's warning about the others, on one
// device and on a mesh of 8. A donated buffer backs the result it is paired with whatever
// equation computes that result (a reduction then a broadcast, a cumsum over the split dim, a
// product of other values), once nothing reads the argument any more.
#include <gtest/gtest.h>
#include <spmd/spmd.h>

#include "core/array_impl.h"
#include "support/golden.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace sp = spmd;
using sp::Array;
using sp::P;
using Results = std::vector<Array>;

// One case of the golden: "deleted i B", "alias k i", "value k v,...", "warning text".
struct JaxDonation {
  std::vector<bool> deleted;
  std::vector<int> alias;
  std::vector<std::vector<float>> values;
  std::string warning;
};

JaxDonation jax_donation(const std::string& name) {
  static const std::map<std::string, std::string> blocks =
      spmd_test::golden_blocks("donation/aliases.txt");
  JaxDonation out;
  std::istringstream lines(blocks.at(name));
  for (std::string line; std::getline(lines, line);) {
    std::istringstream in(line);
    std::string key, rest;
    int index = 0;
    in >> key;
    if (key == "warning") {
      std::getline(in >> std::ws, rest);
      for (size_t at; (at = rest.find("\\n")) != std::string::npos;) rest.replace(at, 2, 1, '\n');
      out.warning = rest == "none" ? "" : rest;
      continue;
    }
    in >> index >> rest;
    if (key == "deleted") out.deleted.push_back(rest == "True");
    if (key == "alias") out.alias.push_back(std::stoi(rest));
    if (key == "value") {
      out.values.emplace_back();
      for (const std::string& v : spmd_test::split_fields(rest, ','))
        out.values.back().push_back(std::stof(v));
    }
  }
  return out;
}

struct Case {
  std::string name;
  std::vector<std::function<Array()>> args;
  std::vector<int> donate;
  std::function<Results(const std::vector<Array>&)> fn;
  std::optional<P> out_spec = {};  // out_shardings on the mesh
  // Whether the paired results are written in place as in JAX. Not when the equation computing
  // the result reads the argument itself (a product or transpose of it: XLA computes aside and
  // copies into the donated buffer; spmd keeps the result where it was computed and hands the
  // argument's buffer back to the buffer cache), or when an elementwise result written over the
  // argument at its last use is another result than the one JAX pairs with it.
  bool in_place_as_jax = true;
};

sp::Mesh line_mesh() {
  return sp::make_mesh({8}, {"a"});
}

Array a44() {
  return sp::arange(16.0f).reshape({4, 4});
}
Array ones44() {
  return sp::ones({4, 4});
}
Array a164() {
  return sp::device_put(sp::arange(64.0f).reshape({16, 4}), sp::NamedSharding(line_mesh(), P("a")));
}
Array b164() {
  return sp::device_put(sp::arange(64.0f).reshape({16, 4}) - 32.0f,
                        sp::NamedSharding(line_mesh(), P("a")));
}

std::vector<Case> cases() {
  using V = const std::vector<Array>&;
  const sp::NamedSharding whole(line_mesh(), P());
  return {
      {"product", {a44}, {0}, [](V a) { return Results{sp::matmul(a[0], a[0])}; }, {}, false},
      {"product_with_another", {a44, ones44}, {0},
       [](V a) { return Results{sp::matmul(a[0], a[1])}; }, {}, false},
      {"returned_as_is", {a44}, {0}, [](V a) { return Results{a[0]}; }},
      {"several_results", {a44, ones44}, {0, 1},
       [](V a) { return Results{sp::sum(a[0], {0}), sp::matmul(a[1], a[1]), a[0] + 1.0f}; }, {},
       false},
      {"transpose", {a44}, {0}, [](V a) { return Results{sp::transpose(a[0])}; }, {}, false},
      {"reduced_then_broadcast", {a44}, {0},
       [](V a) { return Results{sp::broadcast_to(sp::sum(a[0], {0}), {4, 4})}; }},
      {"other_shape_as_many_elements", {a44}, {0},
       [](V a) { return Results{sp::arange(16.0f) * sp::sum(a[0])}; }},
      {"int_result_as_many_elements", {a44}, {0},
       [](V a) {
         return Results{sp::arange(16).reshape({4, 4}) * sp::sum(a[0]).astype(sp::int32)};
       }},
      {"no_result_fits", {a44, [] { return sp::ones({32}); }}, {0, 1},
       [](V a) { return Results{sp::sum(a[0]), a[1] * 2.0f}; }},
      {"two_results_of_one_argument", {a44}, {0},
       [](V a) { return Results{a[0] * 2.0f, a[0] * 3.0f}; }, {}, false},
      {"unused_argument", {a44, ones44}, {0, 1}, [](V a) { return Results{a[1] * 2.0f}; }},
      {"mesh_product", {a164, ones44}, {0}, [](V a) { return Results{sp::matmul(a[0], a[1])}; },
       {}, false},
      {"mesh_cumsum", {a164}, {0}, [](V a) { return Results{sp::cumsum(a[0], 0)}; }},
      {"mesh_several_results", {a164, b164}, {0, 1},
       [](V a) { return Results{sp::matmul(sp::transpose(a[0]), a[1]), a[1] * 2.0f}; }},
      {"mesh_replicated_result", {a164}, {0},
       [whole](V a) { return Results{sp::with_sharding_constraint(a[0] * 2.0f, whole)}; }},
      {"mesh_out_shardings_replicated", {a164}, {0}, [](V a) { return Results{a[0] * 2.0f}; },
       P()},
      {"mesh_out_shardings_split", {a164}, {0}, [](V a) { return Results{a[0] * 2.0f}; },
       P("a")},
      {"mesh_no_result_fits_with_out_shardings", {a164}, {0},
       [](V a) { return Results{sp::sum(a[0])}; }, P()},
      {"mesh_other_shape_as_many_elements", {a164}, {0},
       [](V a) { return Results{sp::arange(8.0f) * sp::sum(a[0])}; }},
  };
}

// Calls the case's function jitted over its arguments, as many as it takes.
Results call(const Case& c, const std::vector<Array>& args) {
  sp::JitOptions options{.donate_argnums = c.donate};
  if (c.out_spec) options.out_shardings = sp::NamedSharding(line_mesh(), *c.out_spec);
  if (args.size() == 1)
    return sp::jit([&](const Array& a) { return c.fn({a}); }, options)(args[0]);
  return sp::jit([&](const Array& a, const Array& b) { return c.fn({a, b}); }, options)(args[0],
                                                                                       args[1]);
}

// The buffers of x's blocks, one per device. Held weakly: a buffer freed during the call
// expires, even when a later one is allocated at the same address.
std::vector<std::weak_ptr<sp::Buffer>> blocks_of(const Array& x) {
  std::vector<std::weak_ptr<sp::Buffer>> out;
  for (const sp::Shard& s : x.addressable_shards()) out.push_back(s.data.impl()->buffer);
  return out;
}

// Whether every block of `result` is one of the buffers `held` (still alive).
bool held_in(const Array& result, const std::vector<std::weak_ptr<sp::Buffer>>& held) {
  for (const sp::Shard& s : result.addressable_shards()) {
    bool found = false;
    for (const auto& h : held) found = found || h.lock() == s.data.impl()->buffer;
    if (!found) return false;
  }
  return true;
}

TEST(DonationAliases, JaxUsesTheSameDonationsAndWarnsAboutTheSameOthers) {
  if (sp::devices().size() < 8) GTEST_SKIP() << "needs 8 devices";
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const JaxDonation want = jax_donation(c.name);
    std::vector<Array> args;
    std::vector<std::vector<std::weak_ptr<sp::Buffer>>> before;
    for (const auto& make : c.args) {
      args.push_back(make());
      before.push_back(blocks_of(args.back()));
    }
    ::testing::internal::CaptureStderr();
    const Results out = call(c, args);
    const std::string printed = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(printed, want.warning.empty() ? "" : "spmd: UserWarning: " + want.warning + "\n");
    for (size_t i = 0; i < args.size(); ++i)
      EXPECT_EQ(args[i].is_deleted(), bool(want.deleted[i])) << "argument " << i;
    ASSERT_EQ(out.size(), want.values.size());
    for (size_t k = 0; k < out.size(); ++k) {
      EXPECT_EQ(out[k].to_vector<float>(), want.values[k]) << "result " << k;
      if (!c.in_place_as_jax) continue;
      const int arg = want.alias[k];
      if (arg >= 0)
        EXPECT_TRUE(held_in(out[k], before[size_t(arg)])) << "result " << k;
      else
        for (const auto& b : before) EXPECT_FALSE(held_in(out[k], b)) << "result " << k;
    }
  }
}

// A donated argument read after the call raises JAX's error, also when a product took it.
TEST(DonationAliases, ADonatedArgumentReadAfterTheCallRaisesJaxError) {
  Array a = a44();
  auto f = sp::jit([](const Array& x) { return sp::broadcast_to(sp::sum(x, {0}), {4, 4}); },
                   {.donate_argnums = {0}});
  const std::weak_ptr<sp::Buffer> held = a.impl()->buffer;
  Array y = f(a);
  EXPECT_EQ(y.impl()->buffer, held.lock());
  EXPECT_EQ(spmd_test::error_message<sp::RuntimeError>([&] { (void)a.to_vector<float>(); }),
            "[to_vector] Array has been deleted with shape=float32[4,4].");
  EXPECT_EQ(spmd_test::error_message<sp::RuntimeError>([&] { (void)f(a); }),
            "[jit] Array has been deleted with shape=float32[4,4].");
  // The result, donated in turn, backs the next one.
  Array z = f(y);
  EXPECT_EQ(z.impl()->buffer, held.lock());
  std::vector<float> rows;
  for (int r = 0; r < 4; ++r) rows.insert(rows.end(), {96, 112, 128, 144});
  EXPECT_EQ(z.to_vector<float>(), rows);
}

// Each donated argument warns once per compilation, as JAX warns when it lowers.
TEST(DonationAliases, TheWarningComesOncePerCompilation) {
  auto f = sp::jit([](const Array& x) { return sp::sum(x); }, {.donate_argnums = {0}});
  ::testing::internal::CaptureStderr();
  f(a44());
  f(a44());
  const std::string printed = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(printed,
            "spmd: UserWarning: Some donated buffers were not usable: float32[4,4].\nSee an "
            "explanation at https://docs.jax.dev/en/latest/faq.html#buffer-donation.\n");
}

}  // namespace

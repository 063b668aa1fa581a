// Eager slices of committed arrays against JAX 0.10.2 (goldens in tests/goldens/eager_slice/,
// recorded by tools/goldens/gen_eager_slice.py; the cases use its names): a slice without
// strides runs as a dynamic_slice and leaves the sliced dims unsplit, a strided one and every
// slice under jit keep the operand's split, and x[i] of an array on several devices is a
// dynamic_slice. Values, specs, committedness and types (Explicit axes) are JAX's.
#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <regex>
#include <string>

#include "support/golden.h"

namespace {

namespace sp = spmd;
using sp::None;
using sp::P;

class EagerSliceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sp::device_count() < 8) GTEST_SKIP() << "needs 8 devices (SPMD_CPU_DEVICES=8)";
  }
  static std::string block(const std::string& file, const std::string& name) {
    const auto blocks = spmd_test::golden_blocks("eager_slice/" + file);
    auto it = blocks.find(name);
    return it == blocks.end() ? "(missing golden " + name + ")" : it->second;
  }
  static std::string spec_of(const sp::Array& v) {
    if (!v.committed()) return "uncommitted";
    const auto* named = dynamic_cast<const sp::NamedSharding*>(v.sharding().get());
    return named ? named->spec().repr() : "single device";
  }
  // The result's type, spec and values against case `name`.
  static void check(const std::string& name, const sp::Array& v) {
    EXPECT_EQ(sp::type_of(v).str(), block("types.txt", name)) << name;
    EXPECT_EQ(spec_of(v), block("specs.txt", name)) << name;
    EXPECT_TRUE(spmd_test::arrays_close(sp::device_get(v),
                                        spmd_test::load_golden("eager_slice/values.npz").at(name)))
        << name;
  }
  sp::Array put(const sp::Mesh& mesh, const sp::PartitionSpec& spec) const {
    return sp::device_put(X, sp::NamedSharding(mesh, spec));
  }
  static sp::Array rows(const sp::Array& x) { return sp::lax::slice(x, {2, 0}, {6, 16}); }

  sp::Mesh m = sp::make_mesh({4, 2}, {"a", "b"});
  sp::Mesh e = sp::make_mesh({4, 2}, {"a", "b"}, {sp::AxisType::Explicit, sp::AxisType::Explicit});
  sp::Array X = sp::arange(256.0f).reshape({16, 16});
};

using Case = std::function<sp::Array()>;

void check_all(const std::map<std::string, Case>& cases,
               const std::function<void(const std::string&, const sp::Array&)>& check) {
  for (const auto& [name, f] : cases) check(name, f());
}

TEST_F(EagerSliceTest, SliceWithoutStridesLeavesTheSlicedDimsUnsplit) {
  const std::map<std::string, Case> cases = {
      {"rows_of_row_split", [&] { return rows(put(m, P("a"))); }},
      {"rows_of_column_split", [&] { return rows(put(m, P(None, "a"))); }},
      {"rows_of_both_split", [&] { return rows(put(m, P("a", "b"))); }},
      {"block_of_both_split",
       [&] {
         return sp::lax::slice(put(m, P("a", "b")), {0, 8}, {8, 16});
       }},
      {"uneven_rows",
       [&] {
         return sp::lax::slice(put(m, P("a")), {1, 0}, {15, 16});
       }},
      {"whole",
       [&] {
         return sp::lax::slice(put(m, P("a", "b")), {0, 0}, {16, 16});
       }},
      {"columns_of_tuple_split",
       [&] {
         return sp::lax::slice(put(m, P(None, sp::axes("a", "b"))), {0, 3}, {16, 11});
       }},
      {"rows_replicated", [&] { return rows(put(m, P())); }},
      {"rows_single_device",
       [&] { return rows(sp::device_put(X, sp::SingleDeviceSharding(sp::devices()[3]))); }},
      {"rows_uncommitted", [&] { return rows(X); }},
  };
  check_all(cases, check);
}

TEST_F(EagerSliceTest, StridedSlicesAndJitKeepTheSplit) {
  const std::map<std::string, Case> cases = {
      {"rows_unit_strides",
       [&] {
         return sp::lax::slice(put(m, P("a")), {4, 0}, {12, 16}, {1, 1});
       }},
      {"rows_strided",
       [&] {
         return sp::lax::slice(put(m, P("a")), {0, 0}, {16, 16}, {2, 1});
       }},
      {"slice_in_dim", [&] { return sp::lax::slice_in_dim(put(m, P("a")), 4, 12); }},
      {"index_in_dim",
       [&] { return sp::lax::index_in_dim(put(m, P(None, "a")), 5, 0, /*keepdims=*/false); }},
      {"jit_rows_of_row_split", [&] { return sp::jit(rows)(put(m, P("a"))); }},
  };
  check_all(cases, check);
}

TEST_F(EagerSliceTest, IndexingAnArrayOnSeveralDevicesIsADynamicSlice) {
  const std::map<std::string, Case> cases = {
      {"getitem_row_split", [&] { return put(m, P("a"))[3]; }},
      {"getitem_column_split", [&] { return put(m, P(None, "a"))[3]; }},
      {"getitem_negative", [&] { return put(m, P("b", "a"))[-2]; }},
      {"getitem_single_device", [&] { return sp::device_put(X, sp::devices()[2])[3]; }},
  };
  check_all(cases, check);
}

TEST_F(EagerSliceTest, ExplicitAxesTypeTheResultAsDynamicSlice) {
  const std::map<std::string, Case> cases = {
      {"explicit_rows_of_column_split", [&] { return rows(put(e, P(None, "a"))); }},
      {"explicit_rows_of_row_split", [&] { return rows(put(e, P("a"))); }},
      {"explicit_whole",
       [&] {
         return sp::lax::slice(put(e, P("a", "b")), {0, 0}, {16, 16});
       }},
      {"explicit_uneven_tuple",
       [&] {
         return sp::lax::slice(put(e, P(None, sp::axes("a", "b"))), {0, 3}, {16, 11});
       }},
  };
  check_all(cases, check);
}

// A split dim the slice leaves indivisible by its axes raises JAX's ShardingTypeError, naming
// dynamic_slice when no strides are given. JAX's message spells that shape with NumPy integers
// (np.int64(14)), which C++ has no reason to imitate.
TEST_F(EagerSliceTest, ExplicitAxesRaiseForIndivisibleSplitDims) {
  auto error = [](const std::string& name) {
    const std::string jax = spmd_test::jax_error("eager_slice/errors.txt", name);
    return std::regex_replace(jax, std::regex(R"(np\.int64\((\d+)\))"), "$1");
  };
  const sp::Array x = put(e, P("a"));
  EXPECT_EQ(spmd_test::error_message([&] {
              sp::lax::slice(x, {1, 0}, {15, 16});
            }),
            "[dynamic_slice] " + error("explicit_uneven_rows"));
  EXPECT_EQ(spmd_test::error_message([&] {
              sp::lax::slice(x, {1, 0}, {15, 16}, {1, 1});
            }),
            "[slice] " + error("explicit_uneven_rows_strided"));
}

}  // namespace

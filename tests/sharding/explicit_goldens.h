// The fixture of the Explicit-mode golden tests numbered N (explicit3_test.cpp,
// explicit4_test.cpp): the 4 x 2 all-Explicit mesh and the 16 x 16 array of
// tools/goldens/gen_explicit<N>.py, and each case's leaves checked against the types, specs and
// values it recorded in tests/goldens/explicit/{types,specs,values}<N>.*.
#pragma once

#include <spmd/spmd.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/golden.h"

namespace spmd_test {

template <int N>
class ExplicitGoldenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (spmd::device_count() < 8) GTEST_SKIP() << "needs 8 devices (SPMD_CPU_DEVICES=8)";
  }
  // Golden `name` of tests/goldens/explicit/`file`.
  static std::string block(const std::string& file, const std::string& name) {
    const auto blocks = golden_blocks("explicit/" + file);
    auto it = blocks.find(name);
    return it == blocks.end() ? "(missing golden " + name + ")" : it->second;
  }
  static std::string error(const std::string& name) {
    return jax_error("explicit/errors" + std::to_string(N) + ".txt", name);
  }
  static const spmd::Array& value(const std::string& name) {
    return load_golden("explicit/values" + std::to_string(N) + ".npz").at(name);
  }
  // Per leaf, its sharding's spec without trailing Nones or "uncommitted", one per line.
  static std::string specs_of(const std::vector<spmd::Array>& leaves) {
    std::string out;
    for (const spmd::Array& v : leaves) {
      if (!out.empty()) out += '\n';
      const auto* named = dynamic_cast<const spmd::NamedSharding*>(v.sharding().get());
      out += !v.committed() ? "uncommitted"
             : named        ? trimmed(named->spec()).repr()
                            : v.sharding()->repr();
    }
    return out;
  }
  static spmd::PartitionSpec trimmed(const spmd::PartitionSpec& spec) {
    std::vector<spmd::PartitionSpec::Entry> entries = spec.entries();
    while (!entries.empty() && !entries.back()) entries.pop_back();
    return spmd::PartitionSpec(entries);
  }
  // The leaves' types, specs and values against case `name`.
  static void check(const std::string& name, const std::vector<spmd::Array>& leaves) {
    std::string types;
    for (const spmd::Array& v : leaves) {
      if (!types.empty()) types += ' ';
      types += spmd::type_of(v).str();
    }
    const std::string n = std::to_string(N);
    EXPECT_EQ(types, block("types" + n + ".txt", name)) << name;
    EXPECT_EQ(specs_of(leaves), block("specs" + n + ".txt", name)) << name;
    for (size_t i = 0; i < leaves.size(); ++i) {
      const std::string key = leaves.size() == 1 ? name : name + "." + std::to_string(i);
      EXPECT_TRUE(arrays_close(spmd::device_get(leaves[i]), value(key))) << key;
    }
  }
  spmd::NamedSharding S(const spmd::PartitionSpec& spec) const {
    return spmd::NamedSharding(m, spec);
  }
  spmd::Array put(const spmd::Array& v, const spmd::PartitionSpec& spec) const {
    return spmd::device_put(v, S(spec));
  }

  spmd::Mesh m = spmd::make_mesh({4, 2}, {"a", "b"},
                                 {spmd::AxisType::Explicit, spmd::AxisType::Explicit});
  spmd::Array X = spmd::arange(256.0f).reshape({16, 16});
};

}  // namespace spmd_test

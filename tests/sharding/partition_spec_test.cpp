// PartitionSpec: construction from names, sp::None and sp::axes, canonical entries, JAX's reprs
// and the checks against a mesh (duplicate and unknown axes) with JAX's messages.
#include <spmd/error.h>
#include <spmd/sharding.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <type_traits>

#include "sharding/golden_cases.h"

namespace {

namespace sp = spmd;
using sharding_test::sharding_error;
using sp::P;

TEST(PartitionSpecTest, ReprMatchesJaxForHandWrittenSpecs) {
  EXPECT_EQ(P().repr(), "P()");
  EXPECT_EQ(P(sp::None).repr(), "P(None,)");
  EXPECT_EQ(P("x").repr(), "P('x',)");
  EXPECT_EQ(P("x", sp::None).repr(), "P('x', None)");
  EXPECT_EQ(P(sp::None, std::string("y")).repr(), "P(None, 'y')");
  EXPECT_EQ(P(sp::axes("x", "y")).repr(), "P(('x', 'y'),)");
  EXPECT_EQ(P(sp::axes("x", "y"), "z").repr(), "P(('x', 'y'), 'z')");
  // JAX canonicalises a tuple of one name to the name and an empty tuple to None.
  EXPECT_EQ(P(sp::axes("x"), sp::None).repr(), "P('x', None)");
  EXPECT_EQ(P(sp::axes()).repr(), "P(None,)");
  std::ostringstream os;
  os << P("a", "b");
  EXPECT_EQ(os.str(), "P('a', 'b')");
}

TEST(PartitionSpecTest, ReprMatchesJaxForEveryRecordedSpec) {
  int count = 0;
  std::string spec_code;
  for (const std::string& line :
       sharding_test::lines_of(spmd_test::golden_text("sharding/layouts.txt"))) {
    if (line.rfind("case ", 0) == 0) spec_code = sharding_test::split(line, ' ')[2];
    if (line.rfind("spec_repr ", 0) != 0) continue;
    EXPECT_EQ(sharding_test::decode_spec(spec_code).repr(), line.substr(10)) << spec_code;
    ++count;
  }
  EXPECT_GT(count, 800);
}

TEST(PartitionSpecTest, EntriesAndAxesPerDim) {
  P spec("x", sp::None, sp::axes("a", "b"));
  ASSERT_EQ(spec.size(), 3);
  EXPECT_EQ(spec[0], sp::AxisNames("x"));
  EXPECT_FALSE(spec[1].has_value());
  EXPECT_EQ(spec[2]->names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(spec[3].has_value());  // missing trailing entries are None
  EXPECT_EQ(spec.axes_of(0), (std::vector<std::string>{"x"}));
  EXPECT_TRUE(spec.axes_of(1).empty());
  EXPECT_EQ(spec.axes_of(2), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(spec.axes_of(7).empty());
  EXPECT_EQ(P().size(), 0);
}

TEST(PartitionSpecTest, EqualityUsesCanonicalEntries) {
  EXPECT_EQ(P(sp::axes("x")), P("x"));
  EXPECT_EQ(P(sp::axes(), "y"), P(sp::None, "y"));
  EXPECT_FALSE(P("x", "y") == P("y", "x"));
  EXPECT_FALSE(P(sp::axes("x", "y")) == P(sp::axes("y", "x")));
  P copy = P("x");
  EXPECT_EQ(copy, P("x"));
}

TEST(PartitionSpecTest, AxisNamesReprIsPythons) {
  EXPECT_EQ(sp::AxisNames("i").repr(), "'i'");
  EXPECT_EQ(sp::axes("rows", "cols").repr(), "('rows', 'cols')");
  EXPECT_EQ(sp::axes("i").repr(), "('i',)");
  EXPECT_EQ(sp::AxisNames("it's").repr(), "\"it's\"");
}

// nullptr is not an axis name: P("b", nullptr) does not compile (sp::None is the spelling), and a
// null const char* at run time is a ValueError, not a crash in std::string.
static_assert(!std::is_constructible_v<P, const char*, std::nullptr_t>);
static_assert(!std::is_convertible_v<std::nullptr_t, sp::AxisNames>);

TEST(PartitionSpecTest, NullAxisNameIsAValueError) {
  const char* missing = nullptr;
  try {
    P spec("b", missing);
    FAIL() << "expected ValueError";
  } catch (const sp::ValueError& e) {
    EXPECT_EQ(std::string(e.what()),
              "[AxisNames] expected an axis name, got a null pointer (write sp::None for a dim "
              "that is not split)");
  }
}

TEST(PartitionSpecTest, CheckRejectsDuplicateAxesWithJaxMessage) {
  for (const auto& e : sharding_test::golden_errors("duplicate")) {
    const sp::Mesh& mesh = sharding_test::golden_mesh(e.mesh);
    P spec = sharding_test::decode_spec(e.spec);
    EXPECT_EQ(sharding_error([&] { spec.check(mesh); }), "[NamedSharding] " + e.message);
    EXPECT_EQ(sharding_error([&] { sp::NamedSharding(mesh, spec); }),
              "[NamedSharding] " + e.message);
    EXPECT_EQ(sharding_error([&] { spec.check(mesh, "shard_map"); }), "[shard_map] " + e.message);
  }
}

TEST(PartitionSpecTest, CheckRejectsUnknownAxesWithJaxMessage) {
  for (const auto& e : sharding_test::golden_errors("unknown")) {
    const sp::Mesh& mesh = sharding_test::golden_mesh(e.mesh);
    P spec = sharding_test::decode_spec(e.spec);
    EXPECT_EQ(sharding_error([&] { sp::NamedSharding(mesh, spec); }),
              "[NamedSharding] " + e.message);
  }
}

TEST(PartitionSpecTest, CheckAcceptsValidSpecs) {
  const sp::Mesh& mesh = sharding_test::golden_mesh("m222");
  EXPECT_EQ(sharding_error([&] { P(sp::axes("z", "x"), sp::None, "y").check(mesh); }), "");
  EXPECT_EQ(sharding_error([&] { P().check(mesh); }), "");
}

}  // namespace

// Params: sorted by name, typed access, equality and hashing by content for caches.
#include "ir/params.h"

#include <gtest/gtest.h>

namespace sp = spmd;

TEST(Params, KeepsEntriesSortedByName) {
  sp::Params p{
      {"shape", std::vector<int64_t>{2, 3}}, {"dimension", int64_t(1)}, {"dtype", sp::float32}};
  ASSERT_EQ(p.items().size(), 3u);
  EXPECT_EQ(p.items()[0].first, "dimension");
  EXPECT_EQ(p.items()[1].first, "dtype");
  EXPECT_EQ(p.items()[2].first, "shape");
  EXPECT_EQ(p.get_int("dimension"), 1);
  EXPECT_EQ(p.get_ints("shape"), (std::vector<int64_t>{2, 3}));
  p.set("dimension", int64_t(0));
  EXPECT_EQ(p.get_int("dimension"), 0);
  EXPECT_EQ(p.items().size(), 3u);
}

TEST(Params, EqualParamsHashEqualAndDifferentOnesDiffer) {
  sp::Params a{{"y", int64_t(2)}, {"axes", std::vector<int64_t>{0, 1}}};
  sp::Params b{{"axes", std::vector<int64_t>{0, 1}}, {"y", int64_t(2)}};
  sp::Params c{{"axes", std::vector<int64_t>{1, 0}}, {"y", int64_t(2)}};
  EXPECT_TRUE(a == b);
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_FALSE(a == c);
  EXPECT_NE(a.hash(), c.hash());
  EXPECT_THROW((void)a.at("missing"), std::logic_error);
}

namespace {
struct Color {
  int value = 0;
  bool operator==(const Color&) const = default;
};
struct Size {
  int value = 0;
  bool operator==(const Size&) const = default;
};
}  // namespace

template <>
struct sp::ParamTraits<Color> {
  static constexpr std::string_view name = "Color";
  static std::string str(const Color& c) { return "color" + std::to_string(c.value); }
  static size_t hash(const Color& c) { return size_t(c.value); }
};

template <>
struct sp::ParamTraits<Size> {
  static constexpr std::string_view name = "Size";
  static std::string str(const Size& s) { return std::to_string(s.value); }
  static size_t hash(const Size& s) { return size_t(s.value); }
};

TEST(Params, TypedObjectsPrintCompareAndHashByContent) {
  sp::Params a{{"c", sp::object_param(Color{3})}};
  sp::Params b{{"c", sp::object_param(Color{3})}};
  sp::Params c{{"c", sp::object_param(Color{4})}};
  EXPECT_EQ(a.get_object<Color>("c").value, 3);
  EXPECT_EQ(std::get<sp::ObjectParam>(a.at("c")).object->str(), "color3");
  EXPECT_TRUE(a == b);
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_FALSE(a == c);
  EXPECT_NE(a.hash(), c.hash());
}

TEST(Params, ReadingAnObjectAsAnotherTypeIsAnInternalError) {
  sp::Params p{{"c", sp::object_param(Color{3})}, {"n", int64_t(1)}};
  try {
    (void)p.get_object<Size>("c");
    FAIL() << "no error";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("'c' holds a Color, read as a Size"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW((void)p.get_object<Color>("n"), std::logic_error);
}

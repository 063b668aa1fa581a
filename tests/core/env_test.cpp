// Strict parsing of the integer environment variables (src/core/env.h): the whole text one
// integer within the bounds, whitespace around it at most; anything else is a ValueError naming
// the variable, the range and the text.
#include <spmd/error.h>

#include <gtest/gtest.h>

#include "core/env.h"
#include "support/golden.h"

#include <cstdlib>
#include <optional>
#include <string>

namespace {

using spmd::CachedEnvInt;
using spmd::parse_env_int;
using spmd_test::error_message;

TEST(ParseEnvInt, TakesAWholeIntegerWithinTheBounds) {
  EXPECT_EQ(parse_env_int("N", "8", 1, 4096), 8);
  EXPECT_EQ(parse_env_int("N", " \t8\n", 1, 4096), 8);
  EXPECT_EQ(parse_env_int("N", "+8", 1, 4096), 8);
  EXPECT_EQ(parse_env_int("N", "0008", 1, 4096), 8);
  EXPECT_EQ(parse_env_int("N", "1", 1, 4096), 1);
  EXPECT_EQ(parse_env_int("N", "4096", 1, 4096), 4096);
  EXPECT_EQ(parse_env_int("N", "-3", -5, 5), -3);
  EXPECT_EQ(parse_env_int("N", "0", 0, 5), 0);
}

TEST(ParseEnvInt, RefusesAnythingElseNamingTheVariable) {
  for (const std::string text :
       {"", " ", "abc", "8x", "x8", "8 8", "0x10", "1e3", "8.0", "+", "-", "+-1", "--1", "0", "-3",
        "4097", "99999999999", "99999999999999999999999999"})
    EXPECT_EQ(
        error_message<spmd::ValueError>([&] { parse_env_int("SPMD_CPU_DEVICES", text, 1, 4096); }),
        "[SPMD_CPU_DEVICES] expected an integer from 1 to 4096, got '" + text + "'")
        << text;
}

// The cached read sees every change made through setenv, unsetenv and putenv, each at the next
// call, whatever else changed in between (entries before it removed, others added after it).
TEST(CachedEnvInt, SeesEveryChangeOfTheEnvironment) {
  const char* kName = "SPMD_TEST_CACHED_INT";
  const char* kOther = "SPMD_TEST_CACHED_OTHER";
  unsetenv(kName);
  unsetenv(kOther);
  const CachedEnvInt setting(kName, 1, 100);
  EXPECT_EQ(setting.get(), std::nullopt);
  EXPECT_EQ(setting.get(), std::nullopt);
  setenv(kName, "5", 1);
  EXPECT_EQ(setting.get(), 5);
  EXPECT_EQ(setting.get(), 5);
  setenv(kName, "7", 1);
  EXPECT_EQ(setting.get(), 7);
  setenv(kName, "5", 1);  // glibc hands back the string it made for "5" before
  EXPECT_EQ(setting.get(), 5);
  setenv(kOther, "1", 1);  // another variable after it
  EXPECT_EQ(setting.get(), 5);
  unsetenv(kName);
  EXPECT_EQ(setting.get(), std::nullopt);
  setenv(kName, "9", 1);  // now after kOther
  EXPECT_EQ(setting.get(), 9);
  unsetenv(kOther);  // the entries after kOther move down
  EXPECT_EQ(setting.get(), 9);
  setenv(kName, "11", 1);
  EXPECT_EQ(setting.get(), 11);
  static char put[] = "SPMD_TEST_CACHED_INT=13";
  putenv(put);
  EXPECT_EQ(setting.get(), 13);
  unsetenv(kName);
  EXPECT_EQ(setting.get(), std::nullopt);
}

// Each setting is read on its own, and a malformed value raises at every call until it is fixed.
TEST(CachedEnvInt, RaisesForAMalformedValueEveryTime) {
  const char* kName = "SPMD_TEST_CACHED_BAD";
  setenv(kName, "50", 1);
  const CachedEnvInt wide(kName, 1, 100), narrow(kName, 1, 10);
  EXPECT_EQ(wide.get(), 50);
  EXPECT_EQ(error_message<spmd::ValueError>([&] { narrow.get(); }),
            "[SPMD_TEST_CACHED_BAD] expected an integer from 1 to 10, got '50'");
  setenv(kName, "5x", 1);
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(error_message<spmd::ValueError>([&] { wide.get(); }),
              "[SPMD_TEST_CACHED_BAD] expected an integer from 1 to 100, got '5x'");
  setenv(kName, "6", 1);
  EXPECT_EQ(wide.get(), 6);
  EXPECT_EQ(narrow.get(), 6);
  unsetenv(kName);
}

}  // namespace

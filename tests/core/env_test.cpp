// Strict parsing of the integer environment variables (src/core/env.h): the whole text one
// integer within the bounds, whitespace around it at most; anything else is a ValueError naming
// the variable, the range and the text.
#include <spmd/error.h>

#include <gtest/gtest.h>

#include "core/env.h"
#include "support/golden.h"

#include <string>

namespace {

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

}  // namespace

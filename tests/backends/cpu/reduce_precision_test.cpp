// cpu::reduce_precision against lax.reduce_precision on JAX's CPU backend: edge values and
// random bit patterns (subnormals, NaN payloads) of every float dtype, for reduced formats
// narrower and wider than the source.
#include "backends/cpu/reduce_precision.h"

#include "core/array_impl.h"
#include "support/golden.h"

#include <gtest/gtest.h>

#include <string>

namespace spmd {
namespace {

using spmd_test::arrays_equal;
using spmd_test::load_golden;

TEST(ReducePrecisionKernel, MatchesJaxBitForBit) {
  const auto& golden = load_golden("reduce_precision/values.npz");
  int cases = 0;
  for (const auto& [name, x] : golden) {
    if (!name.ends_with("|x")) continue;
    const std::string key = name.substr(0, name.size() - 2);
    const size_t a = key.find('|'), b = key.rfind('|');
    const int exponent_bits = std::stoi(key.substr(a + 1, b - a - 1));
    const int mantissa_bits = std::stoi(key.substr(b + 1));
    Array y = make_uninitialized(aval_of(x));
    cpu::reduce_precision(x.dtype(), host_data(x, "test"), y.impl()->buffer->data(), x.size(),
                          exponent_bits, mantissa_bits);
    EXPECT_TRUE(arrays_equal(y, golden.at(key + "|y"))) << key;
    ++cases;
  }
  EXPECT_EQ(cases, 27);
}

}  // namespace
}  // namespace spmd

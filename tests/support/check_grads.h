// A generic gradient checker, as jax.test_util.check_grads: forward mode (jvp) against central
// finite differences, and reverse mode (vjp) against forward mode through <u, J v> = <Jᵀu, v>,
// on random directions, in float64. Use inside an X64Scope.
#pragma once

#include <spmd/array.h>

#include <functional>
#include <span>
#include <string>
#include <vector>

namespace spmd_test {

using FlatFunction = std::function<std::vector<spmd::Array>(std::span<const spmd::Array>)>;

struct GradCheckOptions {
  double eps = 1e-6;   // finite-difference step
  double rtol = 1e-5;  // relative tolerance on each comparison
  double atol = 1e-7;
  int order = 1;  // 2 also checks the jvp of the gradient function
  unsigned seed = 0;
};

// Returns an empty string when both modes agree, else a description of the first mismatch.
std::string check_grads(const FlatFunction& f, const std::vector<spmd::Array>& args,
                        const GradCheckOptions& options = {});

}  // namespace spmd_test

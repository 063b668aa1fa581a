// The line goldens of tests/goldens/data/ (tools/goldens/gen_fashion_mnist.py): one
// "<name> <values...>" per line, read by name.
#pragma once

#include <gtest/gtest.h>

#include "support/golden.h"

#include <sstream>
#include <string>
#include <vector>

namespace spmd_test {

// The values on the line of `relative` named `name`, parsed as T; fails the test when absent.
template <class T>
std::vector<T> golden_line(std::string_view relative, const std::string& name) {
  std::istringstream lines(golden_text(relative));
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string first;
    fields >> first;
    if (first != name) continue;
    std::vector<T> values;
    for (T v; fields >> v;) values.push_back(v);
    return values;
  }
  ADD_FAILURE() << "no line '" << name << "' in tests/goldens/" << relative;
  return {};
}

}  // namespace spmd_test

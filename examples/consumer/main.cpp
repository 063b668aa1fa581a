// Uses the installed spmd package: squares, a random matrix product and a saved file.
#include <spmd/spmd.h>

#include <cstdio>
#include <iostream>

namespace sp = spmd;

int main() {
  sp::Array x = sp::arange(8);
  std::cout << x * x << "\n";
  sp::Array a = sp::random::normal(sp::random::key(0), {64, 32});
  sp::Array c = sp::matmul(a, a.T());
  // A Gram matrix is symmetric with a non-negative diagonal.
  bool ok = sp::allclose(c, c.T()) && sp::all(sp::greater_equal(c[0][0], 0)).item<bool>();
  std::cout << "gram " << c.shape() << (ok ? " ok" : " WRONG") << "\n";
  return ok ? 0 : 1;
}

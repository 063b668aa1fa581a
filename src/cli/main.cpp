// The spmd command-line program.
#include <spmd/spmd.h>

#include <iostream>

int main() {
  namespace sp = spmd;
  std::cout << sp::arange(8) * sp::arange(8) << "\n";
  return 0;
}

// debug::print: checks its format string, then stages or runs the debug_print primitive
// (prims/debug.cpp).
#include <spmd/debug.h>
#include <spmd/error.h>

#include "prims/debug.h"
#include "prims/primitive.h"

namespace spmd {
namespace debug {

void print(const std::string& format, const std::vector<Array>& values) {
  for (const Array& v : values)
    if (!v.valid()) throw ValueError("[debug.print] use of an empty Array handle");
  format_debug_values(format, std::vector<std::string>(values.size()));  // bad formats raise here
  spmd::bind(primitive("debug_print"), values, Params{{"fmt", format}});
}

}  // namespace debug
}  // namespace spmd

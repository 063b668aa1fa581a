// The out-of-line parts of the user-facing errors.
#include <spmd/error.h>

namespace spmd::detail {

void raise_not_callable(const char* api, const char* expected, const std::string& got) {
  throw TypeError("[" + std::string(api) + "] " + expected + ", got " + got);
}

}  // namespace spmd::detail

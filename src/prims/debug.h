// The debug family's formatting, shared with debug::print (ops/debug_ops.cpp), which checks a
// format string before it stages the primitive.
#pragma once

#include <span>
#include <string>

namespace spmd {

// Python's str.format with `{}` / `{n}` fields over already printed values; raises ValueError
// "[debug.print] ..." for an unmatched brace or a field beyond the values.
std::string format_debug_values(const std::string& format, std::span<const std::string> values);

}  // namespace spmd

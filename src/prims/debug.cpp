// Primitive family: debug_print, an effectful primitive: staged into traces (never removed by
// DCE or folded), run by its kernel on whichever device executes it.
#include "prims/debug.h"

#include <spmd/array.h>
#include <spmd/error.h>

#include "prims/families.h"
#include "prims/primitive.h"

#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>

namespace spmd {

std::string format_debug_values(const std::string& format, std::span<const std::string> values) {
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    char c = format[i];
    if (c == '{' && i + 1 < format.size() && format[i + 1] == '{') {
      out += '{';
      ++i;
    } else if (c == '}' && i + 1 < format.size() && format[i + 1] == '}') {
      out += '}';
      ++i;
    } else if (c == '{') {
      size_t close = format.find('}', i);
      if (close == std::string::npos)
        throw ValueError("[debug.print] unmatched '{' in format string: " + format);
      std::string field = format.substr(i + 1, close - i - 1);
      size_t index = field.empty() ? next++ : size_t(std::stoul(field));
      if (index >= values.size())
        throw ValueError("[debug.print] format string " + format + " refers to value " +
                         std::to_string(index) + " but " + std::to_string(values.size()) +
                         " were given");
      out += values[index];
      i = close;
    } else {
      out += c;
    }
  }
  return out;
}

namespace {

std::mutex& print_mutex() {
  static std::mutex mu;
  return mu;
}

}  // namespace

void register_debug_primitives(PrimitiveRegistry& r) {
  Primitive& p = r.define(
      "debug_print",
      [](std::span<const AbstractValue>, const Params&) { return std::vector<AbstractValue>{}; },
      [](const KernelArgs& args) {
        std::vector<std::string> texts;
        for (const Operand& x : args.in) {
          auto buffer = Buffer::allocate(size_t(x.aval->nbytes()));
          std::memcpy(buffer->data(), x.data, size_t(x.aval->nbytes()));
          texts.push_back(str(make_array(*x.aval, buffer)));
        }
        std::string line = format_debug_values(args.params.get<std::string>("fmt"), texts) + "\n";
        std::lock_guard lock(print_mutex());
        std::cout << line << std::flush;
      });
  p.effectful = true;
  // Prints whole values.
  p.sharding_rule = [](std::span<const AbstractValue> in, std::span<const AbstractValue> out,
                       const Params&) { return replicated_sharding_rule(in, out); };
  p.device_dependent = true;
  p.non_differentiable = true;
  p.vma_rule = [](std::span<const AbstractValue>, const Params&) { return VmaTypes{}; };
  p.batch = [](std::span<const Array> args, std::span<const int> dims, const Params& params,
               const BatchContext&) {
    // Prints the whole batch at once (JAX prints one line per example; values are the same).
    std::vector<Array> moved(args.begin(), args.end());
    (void)dims;
    spmd::bind(primitive("debug_print"), moved, params);
    return BatchResult{{}, {}};
  };
}

}  // namespace spmd

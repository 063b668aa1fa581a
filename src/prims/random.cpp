// Primitive family: random. threefry2x32 hashes four uint32 arrays (key words and counter words)
// into two; every jax.random function is composed from it and ordinary primitives.
#include "prims/families.h"
#include "prims/primitive.h"

#include <spmd/error.h>

#include "backends/cpu/threefry.h"

namespace spmd {

void register_random_primitives(PrimitiveRegistry& r) {
  r.define(
      "threefry2x32",
      [](std::span<const AbstractValue> in, const Params&) {
        if (in.size() != 4)
          throw ValueError("[threefry2x32] expected 4 operands, got " + std::to_string(in.size()));
        for (const AbstractValue& a : in)
          if (a.dtype != DType::uint32)
            throw TypeError("[threefry2x32] operands must be uint32, got " +
                            std::string(dtype_name(a.dtype)));
        if (!(in[0].shape == in[1].shape) || !(in[2].shape == in[3].shape) ||
            (!(in[0].shape == in[2].shape) && in[0].shape.ndim() != 0))
          throw ShapeError("[threefry2x32] key words must be scalars or have the counters' shape " +
                           in[2].shape.str() + ", got " + in[0].shape.str());
        AbstractValue out{in[2].shape, DType::uint32, false};
        return std::vector<AbstractValue>{out, out};
      },
      [](const KernelArgs& a) {
        cpu::threefry2x32(a.in[0].as<uint32_t>(), a.in[1].as<uint32_t>(),
                          a.in[0].aval->shape.ndim() == 0 && a.in[2].aval->shape.ndim() != 0,
                          a.in[2].as<uint32_t>(), a.in[3].as<uint32_t>(), a.out[0].as<uint32_t>(),
                          a.out[1].as<uint32_t>(), a.out[0].aval->size());
      });
}

}  // namespace spmd

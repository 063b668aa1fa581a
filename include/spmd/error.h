// The exceptions spmd throws for user mistakes. Messages start with the API in brackets and say
// what was expected and what was got: "[reshape] cannot reshape array of shape (2, 3) into shape
// (4,)".
#pragma once

#include <stdexcept>
#include <string>
#include <type_traits>

namespace spmd {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// Shapes that do not fit together (broadcasting, reshape, matmul dims).
class ShapeError : public Error {
  using Error::Error;
};
// A dtype the operation does not accept.
class TypeError : public Error {
  using Error::Error;
};
// A value that is out of its allowed range or otherwise invalid.
class ValueError : public Error {
  using Error::Error;
};
// An index or axis out of range.
class IndexError : public Error {
  using Error::Error;
};
class AxisError : public IndexError {
  using IndexError::IndexError;
};
// Reading or writing files.
class IOError : public Error {
  using Error::Error;
};
// Reading a traced (abstract) value as if it were concrete.
class ConcretizationError : public Error {
  using Error::Error;
};
// A transformation rule a primitive does not have.
class NotImplementedError : public Error {
  using Error::Error;
};
// A traced value used after the transformation that traced it has finished.
class UnexpectedTracerError : public Error {
  using Error::Error;
};
// JAX's RuntimeError: an Array used after it was deleted (donated to a jit call), or a buffer
// donated to a call that also uses it in another argument.
class RuntimeError : public Error {
  using Error::Error;
};
// JAX's RESOURCE_EXHAUSTED runtime error: memory for a result could not be allocated. The
// message names the bytes requested and, where known, the shape and dtype.
class ResourceExhaustedError : public RuntimeError {
  using RuntimeError::RuntimeError;
};

// Shardings, meshes and partition specs that do not fit (unknown axis, indivisible dims, devices
// that differ between committed arguments).
class ShardingError : public ValueError {
  using ValueError::ValueError;
};
// A collective that cannot complete: members missing after the timeout, or disagreeing on the
// operation, dtype or shape.
class CollectiveError : public Error {
  using Error::Error;
};
// An axis name that no enclosing pmap, shard_map or vmap binds (JAX's NameError).
class NameError : public Error {
  using Error::Error;
};

// A missing key in a mapping (Python's KeyError).
class KeyError : public Error {
  using Error::Error;
};

namespace detail {
// False for an empty std::function or a null function pointer, true for any other callable.
template <class F>
bool is_callable(const F& f) {
  if constexpr (std::is_constructible_v<bool, const F&>) return static_cast<bool>(f);
  return true;
}
// Throws TypeError "[api] <expected>, got <got>".
[[noreturn]] void raise_not_callable(const char* api, const char* expected, const std::string& got);
}  // namespace detail

// JAX's TypeError for a function argument that cannot be called: "[jit] Expected a callable
// value, got an empty function".
template <class F>
void check_callable(const F& f, const char* api,
                    const char* expected = "Expected a callable value") {
  if (!detail::is_callable(f)) detail::raise_not_callable(api, expected, "an empty function");
}

}  // namespace spmd

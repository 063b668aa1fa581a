// Shared by the jaxpr text tests: the recorded JAX text and zero arguments of given types (only
// types matter to make_jaxpr).
#pragma once

#include <spmd/spmd.h>

#include "support/golden.h"

#include <string>

namespace jaxpr_text {

// tests/goldens/jaxpr/<name>.txt without the newline the generator appends.
inline std::string golden(const std::string& name) {
  return spmd_test::golden_text("jaxpr/" + name + ".txt");
}
inline spmd::Array f32(const spmd::Shape& shape) {
  return spmd::zeros(shape, spmd::float32);
}
inline spmd::Array i32(const spmd::Shape& shape) {
  return spmd::zeros(shape, spmd::int32);
}
inline spmd::Array boolean(const spmd::Shape& shape) {
  return spmd::zeros(shape, spmd::bool_);
}

}  // namespace jaxpr_text

// AxisNames' Python-style repr: 'i' for one name, ('rows', 'cols') for a tuple.
#include <spmd/axis_names.h>
#include <spmd/error.h>

#include "sharding/python_repr.h"

namespace spmd {

AxisNames::AxisNames(const char* name) {
  if (name == nullptr)
    throw ValueError(
        "[AxisNames] expected an axis name, got a null pointer (write sp::None for a "
        "dim that is not split)");
  names_.emplace_back(name);
}

std::string AxisNames::repr() const {
  if (!tuple_ && names_.size() == 1) return python_repr::quoted(names_[0]);
  return python_repr::tuple_of_names(names_);
}

}  // namespace spmd

// AxisNames' Python-style repr: 'i' for one name, ('rows', 'cols') for a tuple.
#include <spmd/axis_names.h>

#include "sharding/python_repr.h"

namespace spmd {

std::string AxisNames::repr() const {
  if (!tuple_ && names_.size() == 1) return python_repr::quoted(names_[0]);
  return python_repr::tuple_of_names(names_);
}

}  // namespace spmd

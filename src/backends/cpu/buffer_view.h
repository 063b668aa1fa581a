// Buffers that are a contiguous part of another buffer's memory. A kernel whose result is such a
// part of an operand (a dynamic_slice of whole rows) can hand out a view instead of a copy; the
// view holds its parent, so the parent's memory is neither freed nor written over in place (a
// run writes over a buffer only when nothing else holds it) while the view lives. Views live
// within one run of a program: compile/executable.cpp copies a result that is one.
#pragma once

#include "core/buffer.h"

#include <cstddef>
#include <memory>

namespace spmd::cpu {

// Views start at the alignment allocations have, which kernels may rely on.
constexpr size_t kViewAlignment = 64;

// A view of `nbytes` of `parent` from byte `offset` (a view of a view is one of its root).
std::shared_ptr<Buffer> make_buffer_view(const std::shared_ptr<Buffer>& parent, size_t offset,
                                         size_t nbytes);

// The buffer a view is part of and where in it the view starts.
struct ViewSource {
  std::shared_ptr<Buffer> parent;
  size_t offset = 0;
};
// Null when `buffer` is not a view.
const ViewSource* view_source(const std::shared_ptr<Buffer>& buffer);

}  // namespace spmd::cpu

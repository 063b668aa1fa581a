// Aligned host allocations for CPU device buffers.
#include "runtime/buffer.h"

#include <cstdlib>
#include <new>

namespace spmd {

std::shared_ptr<Buffer> Buffer::allocate(size_t nbytes) {
  constexpr size_t kAlign = 64;
  size_t rounded = (nbytes + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded ? rounded : kAlign);
  if (!p) throw std::bad_alloc();
  return std::shared_ptr<Buffer>(new Buffer(p, nbytes));
}

Buffer::~Buffer() { std::free(data_); }

}  // namespace spmd

// Device memory. A Buffer is one allocation on one device; CPU buffers are 64-byte aligned host
// memory. Buffers are shared (shared_ptr) between arrays that alias them. Core declares the type
// because arrays hold it; the runtime, which owns the memory policy, implements it
// (runtime/buffer.cpp).
#pragma once

#include <cstddef>
#include <memory>

namespace spmd {

class Buffer {
 public:
  // Uninitialised storage of `nbytes` (zero-size allowed). When the system has no memory left,
  // the cached blocks are released and the allocation tried again; then it throws
  // ResourceExhaustedError with JAX's text ("RESOURCE_EXHAUSTED: Out of memory allocating N
  // bytes.").
  static std::shared_ptr<Buffer> allocate(size_t nbytes);
  // Bytes of freed blocks kept for reuse (blocks of 1 MiB or more, at most 2 GiB in all: when
  // a freed block would exceed that, the blocks freed longest ago are released instead).
  static size_t cached_bytes();
  static constexpr size_t kCacheLimit = size_t(2) << 30;
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }

 protected:  // allocate() makes them, with the shared_ptr's count in the same allocation
  Buffer(void* data, size_t nbytes, size_t capacity)
      : data_(data), nbytes_(nbytes), capacity_(capacity) {}

 private:
  void* data_;
  size_t nbytes_;
  size_t capacity_;  // allocated size (≥ nbytes_), the key for reuse
};

}  // namespace spmd

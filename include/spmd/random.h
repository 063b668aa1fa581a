// spmd::random: counter-based random numbers bit-exact with jax.random (threefry2x32).
// Keys are uint32[2] arrays, JAX's "raw PRNGKey" form; every function is pure.
#pragma once

#include <spmd/array.h>

#include <optional>

namespace spmd::random {

Array key(uint64_t seed);
Array PRNGKey(uint64_t seed);  // the same as key(seed)
// n new keys, shape (n, 2); split(key) gives 2.
Array split(const Array& key, int64_t num = 2);
Array fold_in(const Array& key, uint32_t data);
// Raw random bits; dtype uint8/16/32/64.
Array bits(const Array& key, const Shape& shape = {}, DType dtype = uint32);
Array uniform(const Array& key, const Shape& shape = {}, DType dtype = float32,
              const Array& minval = 0.0, const Array& maxval = 1.0);
Array normal(const Array& key, const Shape& shape = {}, DType dtype = float32);
Array truncated_normal(const Array& key, const Array& lower, const Array& upper,
                       const Shape& shape = {}, DType dtype = float32);
Array bernoulli(const Array& key, const Array& p = 0.5, std::optional<Shape> shape = std::nullopt);
Array randint(const Array& key, const Shape& shape, const Array& minval, const Array& maxval,
              DType dtype = int32);
// A random permutation of arange(n), or of x along `axis`.
Array permutation(const Array& key, int64_t n);
Array permutation(const Array& key, const Array& x, int axis = 0);
Array categorical(const Array& key, const Array& logits, int axis = -1,
                  std::optional<Shape> shape = std::nullopt);

// The threefry2x32 block cipher on uint32 arrays of equal shape (JAX's threefry2x32 primitive).
std::pair<Array, Array> threefry2x32(const Array& key1, const Array& key2, const Array& x1,
                                     const Array& x2);

}  // namespace spmd::random

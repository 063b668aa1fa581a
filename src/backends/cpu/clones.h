// Loop kernels compiled for wider vector units as well as for the baseline x86-64 the library
// targets, and chosen at load time (GCC's target_clones). Not under ThreadSanitizer: it
// instruments the clones' load-time resolvers, which then run before its runtime has started
// and crash the program.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define SPMD_VECTOR_CLONES
#define SPMD_WIDE_VECTOR_CLONES
#else
// AVX2 and the baseline: elementwise and reduction loops, bound by memory or by simple arithmetic.
#define SPMD_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
// AVX-512 too: the product loops, bound by arithmetic.
#define SPMD_WIDE_VECTOR_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif

// The plain parameter types of spmd::lax operations (dimension numbers, padding). They sit apart
// from lax.h so that the IR and the kernels can hold them without the operations.
#pragma once

#include <spmd/dtype.h>

#include <cstdint>
#include <variant>
#include <vector>

namespace spmd::lax {

// Contracting and batch dimensions of dot_general, as ((lhs_contract, rhs_contract),
// (lhs_batch, rhs_batch)).
struct DotDimensionNumbers {
  std::vector<int64_t> lhs_contracting;
  std::vector<int64_t> rhs_contracting;
  std::vector<int64_t> lhs_batch;
  std::vector<int64_t> rhs_batch;
  bool operator==(const DotDimensionNumbers&) const = default;
};

// jax.lax.Precision: how precisely an accelerator computes a dot_general (the CPU kernels
// compute every one alike, so it only travels in the params).
enum class Precision { DEFAULT, HIGH, HIGHEST };

// jax.lax.DotAlgorithmPreset, in JAX's order. On CPU, JAX compiles only DEFAULT, F16_F16_F16,
// BF16_BF16_F32, BF16_BF16_F32_X3, BF16_BF16_F32_X6, F32_F32_F32 and F64_F64_F64: they convert
// the operands to their storage types, accumulate in their accumulation type and convert the
// result to dot_general's type.
enum class DotAlgorithmPreset {
  DEFAULT,
  ANY_F8_ANY_F8_F32,
  ANY_F8_ANY_F8_F32_FAST_ACCUM,
  ANY_F8_ANY_F8_ANY,
  ANY_F8_ANY_F8_ANY_FAST_ACCUM,
  F16_F16_F16,
  F16_F16_F32,
  BF16_BF16_BF16,
  BF16_BF16_F32,
  BF16_BF16_F32_X3,
  BF16_BF16_F32_X6,
  BF16_BF16_F32_X9,
  TF32_TF32_F32,
  TF32_TF32_F32_X3,
  F32_F32_F32,
  F64_F64_F64,
};

// jax.lax.DotAlgorithm: the types the operands are rounded to and the accumulation type, with
// the decomposition counts of emulated precisions. JAX's CPU backend compiles none of them.
struct DotAlgorithm {
  DType lhs_precision_type = DType::float32;
  DType rhs_precision_type = DType::float32;
  DType accumulation_type = DType::float32;
  int64_t lhs_component_count = 1;
  int64_t rhs_component_count = 1;
  int64_t num_primitive_operations = 1;
  bool allow_imprecise_accumulation = false;
  bool operator==(const DotAlgorithm&) const = default;
};

// dot_general's precision param, as JAX's canonicalize_precision makes it: one Precision per
// operand, or (when `algorithm` holds one) a preset or an algorithm instead.
struct DotPrecision {
  Precision lhs = Precision::DEFAULT;
  Precision rhs = Precision::DEFAULT;
  std::variant<std::monostate, DotAlgorithmPreset, DotAlgorithm> algorithm = {};
  DotPrecision() = default;
  DotPrecision(Precision lhs_precision, Precision rhs_precision)
      : lhs(lhs_precision), rhs(rhs_precision) {}
  DotPrecision(DotAlgorithmPreset preset) : algorithm(preset) {}
  DotPrecision(const DotAlgorithm& dot_algorithm) : algorithm(dot_algorithm) {}
  bool operator==(const DotPrecision&) const = default;
};

// Padding config per dim: (low, high, interior). Negative low/high crop.
struct PadConfig {
  int64_t low = 0, high = 0, interior = 0;
  bool operator==(const PadConfig&) const = default;
};

}  // namespace spmd::lax

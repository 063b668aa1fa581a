// Elementwise kernels that are not transcendental math: arithmetic, comparisons, bitwise ops,
// rounding, select and clamp. Binary operands may be 0-d or have size-1 dims; they are
// broadcast by stride, never materialised.
#pragma once

#include <spmd/dtype.h>
#include <spmd/shape.h>

#include <cstdint>
#include <span>

namespace spmd::cpu {

enum class BinaryOp : uint8_t {
  add,
  sub,
  mul,
  div,
  rem,
  pow,
  max,
  min,
  atan2,
  nextafter,
  eq,
  ne,
  lt,
  le,
  gt,
  ge,
  bit_and,
  bit_or,
  bit_xor,
  shift_left,
  shift_right_logical,
  shift_right_arithmetic,
};
bool is_comparison(BinaryOp op);

// out (shape `out_shape`, dtype bool for comparisons, else `t`) = op(a, b) elementwise.
void binary(BinaryOp op, DType t, const void* a, const Shape& a_shape, const void* b,
            const Shape& b_shape, void* out, const Shape& out_shape);

// a / b where b is broadcast (XLA's reciprocal-multiply form); used by binary() for div.
void divide_by_broadcast(DType t, const void* a, const Shape& a_shape, const void* b,
                         const Shape& b_shape, void* out, const Shape& out_shape);

enum class UnaryOp : uint8_t {
  neg,
  abs,
  sign,
  floor,
  ceil,
  round_away,
  round_even,
  is_finite,
  bit_not,
  square,
  population_count,
  clz,
  copy,
};
void unary(UnaryOp op, DType t, const void* in, void* out, int64_t n);
void integer_pow(DType t, const void* in, void* out, int64_t n, int64_t y);

// out[i] = cases[which[i]][i]; `which` is bool or int32 with 0-d or full shape; cases have the
// output's shape or are 0-d.
void select_n(DType which_t, const void* which, const Shape& which_shape,
              std::span<const void* const> cases, std::span<const Shape> case_shapes, DType t,
              void* out, const Shape& out_shape);
// out = min(max(x, lo), hi) with 0-d or full-shape lo/hi.
void clamp(DType t, const void* lo, const Shape& lo_shape, const void* x, const Shape& x_shape,
           const void* hi, const Shape& hi_shape, void* out, const Shape& out_shape);

// Fills `out` with iota along `dimension` of `shape`.
void iota(DType t, const Shape& shape, int dimension, void* out);

}  // namespace spmd::cpu

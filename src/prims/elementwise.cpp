// Primitive family: elementwise arithmetic, comparisons, bitwise ops, rounding, select, clamp,
// type conversion and iota. Binary primitives accept 0-d operands and size-1 dims (as JAX's
// jaxprs show: `add a 1.0:f32[]`), broadcast by the kernel.
#include "prims/families.h"
#include "prims/primitive.h"

#include <spmd/error.h>

#include "backends/cpu/convert.h"
#include "backends/cpu/elementwise.h"

#include <cstddef>
#include <cstring>
#include <vector>

namespace spmd {
namespace {

using cpu::BinaryOp;
using cpu::UnaryOp;

std::string prefix(const std::string& name) {
  return "[" + name + "] ";
}

// ---- shape rules ------------------------------------------------------------------------------
// Result of an n-ary elementwise primitive: equal dtypes, ranks equal or 0-d, dims equal or 1.
AbstractValue broadcast_operands(const std::string& name, std::span<const AbstractValue> in) {
  AbstractValue out{Shape{}, in[0].dtype, true};
  for (const AbstractValue& a : in) {
    if (a.dtype != in[0].dtype)
      throw TypeError(prefix(name) + "operands must have the same dtype, got " +
                      std::string(dtype_name(in[0].dtype)) + " and " +
                      std::string(dtype_name(a.dtype)));
    out.weak_type = out.weak_type && a.weak_type;
    if (a.shape.ndim() == 0) continue;
    if (out.shape.ndim() == 0) {
      out.shape = a.shape;
      continue;
    }
    if (a.shape.ndim() != out.shape.ndim())
      throw ShapeError(prefix(name) + "operands must have equal ranks or be scalars, got shapes " +
                       out.shape.str() + " and " + a.shape.str());
    for (int i = 0; i < a.shape.ndim(); ++i) {
      int64_t& o = out.shape[i];
      if (a.shape[i] == o || a.shape[i] == 1) continue;
      if (o != 1)
        throw ShapeError(prefix(name) + "incompatible shapes for broadcasting: " + out.shape.str() +
                         " and " + a.shape.str());
      o = a.shape[i];
    }
  }
  return out;
}

enum class Kinds { any, numeric, floating, integer, int_or_bool };

void check_kind(const std::string& name, DType t, Kinds kinds) {
  bool ok = kinds == Kinds::any || (kinds == Kinds::numeric && !is_bool(t)) ||
            (kinds == Kinds::floating && is_floating(t)) ||
            (kinds == Kinds::integer && is_integer(t)) ||
            (kinds == Kinds::int_or_bool && !is_floating(t));
  if (ok) return;
  const char* want = kinds == Kinds::numeric    ? "a numeric"
                     : kinds == Kinds::floating ? "a floating-point"
                     : kinds == Kinds::integer  ? "an integer"
                                                : "an integer or boolean";
  throw TypeError(prefix(name) + "expected " + want + " dtype, got " + std::string(dtype_name(t)));
}

void define_binary(PrimitiveRegistry& r, const char* name, BinaryOp op, Kinds kinds) {
  std::string n = name;
  Primitive& p = r.define(
      n,
      [n, op, kinds](std::span<const AbstractValue> in, const Params&) {
        AbstractValue out = broadcast_operands(n, in);
        check_kind(n, out.dtype, kinds);
        if (cpu::is_comparison(op)) out = AbstractValue{out.shape, DType::bool_, false};
        return std::vector<AbstractValue>{out};
      },
      [op](const KernelArgs& a) {
        cpu::binary(op, a.in[0].aval->dtype, a.in[0].data, a.in[0].aval->shape, a.in[1].data,
                    a.in[1].aval->shape, a.out[0].data, a.out[0].aval->shape);
      });
  p.elementwise = true;
  p.kind = PrimitiveKind::broadcasting;
}

void define_unary(PrimitiveRegistry& r, const char* name, UnaryOp op, Kinds kinds,
                  bool to_bool = false) {
  std::string n = name;
  Primitive& p = r.define(
      n,
      [n, kinds, to_bool](std::span<const AbstractValue> in, const Params&) {
        check_kind(n, in[0].dtype, kinds);
        AbstractValue out = in[0];
        if (to_bool) out = AbstractValue{out.shape, DType::bool_, false};
        return std::vector<AbstractValue>{out};
      },
      [op](const KernelArgs& a) {
        cpu::unary(op, a.in[0].aval->dtype, a.in[0].data, a.out[0].data, a.in[0].aval->size());
      });
  p.elementwise = true;
  p.kind = PrimitiveKind::unary;
}

// pow: as a binary op, and, as JAX's pow, a floating base with an integer exponent, which the
// kernel converts to the base's dtype first (XLA's lowering).
void define_pow(PrimitiveRegistry& r) {
  Primitive& p = r.define(
      "pow",
      [](std::span<const AbstractValue> in, const Params&) {
        if (in[0].dtype != in[1].dtype) {
          if (!is_floating(in[0].dtype) || !is_integer(in[1].dtype))
            throw TypeError(
                "[pow] the first argument to pow must have an inexact dtype (float or complex), "
                "and the second argument must have an inexact or integer dtype, and two inexact "
                "dtypes must match, but got " +
                std::string(dtype_name(in[0].dtype)) + " and " +
                std::string(dtype_name(in[1].dtype)) + " respectively.");
          AbstractValue y = in[1];
          y.dtype = in[0].dtype;
          const AbstractValue both[2] = {in[0], y};
          return std::vector<AbstractValue>{broadcast_operands("pow", both)};
        }
        AbstractValue out = broadcast_operands("pow", in);
        check_kind("pow", out.dtype, Kinds::numeric);
        return std::vector<AbstractValue>{out};
      },
      [](const KernelArgs& a) {
        const DType t = a.in[0].aval->dtype;
        const void* y = a.in[1].data;
        std::vector<std::byte> converted;
        if (a.in[1].aval->dtype != t) {
          converted.resize(size_t(a.in[1].aval->size() * int64_t(itemsize(t))));
          cpu::convert(y, a.in[1].aval->dtype, converted.data(), t, a.in[1].aval->size());
          y = converted.data();
        }
        cpu::binary(BinaryOp::pow, t, a.in[0].data, a.in[0].aval->shape, y, a.in[1].aval->shape,
                    a.out[0].data, a.out[0].aval->shape);
      });
  p.elementwise = true;
  p.kind = PrimitiveKind::broadcasting;
}

std::vector<AbstractValue> one(AbstractValue a) {
  return {std::move(a)};
}

// ---- conversions ------------------------------------------------------------------------------
void define_conversions(PrimitiveRegistry& r) {
  r.define(
      "convert_element_type",
      [](std::span<const AbstractValue> in, const Params& p) {
        return one({in[0].shape, p.get<DType>("new_dtype"), p.get<bool>("weak_type")});
      },
      [](const KernelArgs& a) {
        cpu::convert(a.in[0].data, a.in[0].aval->dtype, a.out[0].data, a.out[0].aval->dtype,
                     a.in[0].aval->size());
      });
  r.define(
      "bitcast_convert_type",
      [](std::span<const AbstractValue> in, const Params& p) {
        DType to = p.get<DType>("new_dtype");
        int from_size = itemsize(in[0].dtype), to_size = itemsize(to);
        Shape s = in[0].shape;
        if (is_bool(in[0].dtype) != is_bool(to) && from_size == to_size && is_bool(to))
          throw TypeError("[bitcast_convert_type] cannot bitcast to or from bool");
        if (to_size < from_size) {
          s.push_back(from_size / to_size);
        } else if (to_size > from_size) {
          if (s.ndim() == 0 || s[s.ndim() - 1] != to_size / from_size)
            throw ShapeError(
                "[bitcast_convert_type] converting " + std::string(dtype_name(in[0].dtype)) +
                " to " + std::string(dtype_name(to)) + " needs a last dimension of size " +
                std::to_string(to_size / from_size) + ", got shape " + in[0].shape.str());
          std::vector<int64_t> d(s.begin(), s.end() - 1);
          s = Shape(d);
        }
        return one({s, to, false});
      },
      [](const KernelArgs& a) {
        std::memcpy(a.out[0].data, a.in[0].data, size_t(a.in[0].aval->nbytes()));
      });
  r.define(
      "iota",
      [](std::span<const AbstractValue>, const Params& p) {
        Shape s(p.get_ints("shape"));
        int64_t d = p.get_int("dimension");
        if (d < 0 || d >= s.ndim())
          throw AxisError("[iota] dimension " + std::to_string(d) + " is out of range for shape " +
                          s.str());
        return one({s, p.get<DType>("dtype"), false});
      },
      [](const KernelArgs& a) {
        cpu::iota(a.out[0].aval->dtype, a.out[0].aval->shape, int(a.params.get_int("dimension")),
                  a.out[0].data);
      });
}

// ---- select and clamp -------------------------------------------------------------------------
void define_select_clamp(PrimitiveRegistry& r) {
  r.define(
      "select_n",
      [](std::span<const AbstractValue> in, const Params&) {
        if (in.size() < 2 || in.size() > 8)
          throw ValueError("[select_n] expected between 1 and 7 cases, got " +
                           std::to_string(in.size() - 1));
        const AbstractValue& which = in[0];
        if (which.dtype != DType::bool_ && which.dtype != DType::int32)
          throw TypeError("[select_n] the selector must be bool or int32, got " +
                          std::string(dtype_name(which.dtype)));
        if (which.dtype == DType::bool_ && in.size() > 3)
          throw ValueError("[select_n] a bool selector takes at most two cases");
        AbstractValue out = broadcast_operands("select_n", in.subspan(1));
        if (which.shape.ndim() != 0 && !(which.shape == out.shape))
          throw ShapeError("[select_n] the selector must be a scalar or have the cases' shape " +
                           out.shape.str() + ", got " + which.shape.str());
        if (out.shape.ndim() == 0) out.shape = which.shape;
        return one(out);
      },
      [](const KernelArgs& a) {
        std::vector<const void*> cases;
        std::vector<Shape> shapes;
        for (size_t i = 1; i < a.in.size(); ++i) {
          cases.push_back(a.in[i].data);
          shapes.push_back(a.in[i].aval->shape);
        }
        cpu::select_n(a.in[0].aval->dtype, a.in[0].data, a.in[0].aval->shape, cases, shapes,
                      a.out[0].aval->dtype, a.out[0].data, a.out[0].aval->shape);
      });
  r.define(
      "clamp",
      [](std::span<const AbstractValue> in, const Params&) {
        AbstractValue out = broadcast_operands("clamp", in);
        if (!(in[1].shape == out.shape))
          throw ShapeError("[clamp] min and max must be scalars or have the operand's shape " +
                           in[1].shape.str());
        out.weak_type = in[1].weak_type;
        return one(out);
      },
      [](const KernelArgs& a) {
        cpu::clamp(a.out[0].aval->dtype, a.in[0].data, a.in[0].aval->shape, a.in[1].data,
                   a.in[1].aval->shape, a.in[2].data, a.in[2].aval->shape, a.out[0].data,
                   a.out[0].aval->shape);
      });
}

}  // namespace

void register_elementwise_primitives(PrimitiveRegistry& r) {
  define_binary(r, "add", BinaryOp::add, Kinds::numeric);
  define_binary(r, "sub", BinaryOp::sub, Kinds::numeric);
  define_binary(r, "mul", BinaryOp::mul, Kinds::numeric);
  define_binary(r, "div", BinaryOp::div, Kinds::numeric);
  define_binary(r, "rem", BinaryOp::rem, Kinds::numeric);
  define_pow(r);
  define_binary(r, "max", BinaryOp::max, Kinds::any);
  define_binary(r, "min", BinaryOp::min, Kinds::any);
  define_binary(r, "atan2", BinaryOp::atan2, Kinds::floating);
  define_binary(r, "nextafter", BinaryOp::nextafter, Kinds::floating);
  define_binary(r, "eq", BinaryOp::eq, Kinds::any);
  define_binary(r, "ne", BinaryOp::ne, Kinds::any);
  define_binary(r, "lt", BinaryOp::lt, Kinds::any);
  define_binary(r, "le", BinaryOp::le, Kinds::any);
  define_binary(r, "gt", BinaryOp::gt, Kinds::any);
  define_binary(r, "ge", BinaryOp::ge, Kinds::any);
  define_binary(r, "and", BinaryOp::bit_and, Kinds::int_or_bool);
  define_binary(r, "or", BinaryOp::bit_or, Kinds::int_or_bool);
  define_binary(r, "xor", BinaryOp::bit_xor, Kinds::int_or_bool);
  define_binary(r, "shift_left", BinaryOp::shift_left, Kinds::integer);
  define_binary(r, "shift_right_logical", BinaryOp::shift_right_logical, Kinds::integer);
  define_binary(r, "shift_right_arithmetic", BinaryOp::shift_right_arithmetic, Kinds::integer);

  define_unary(r, "neg", UnaryOp::neg, Kinds::numeric);
  define_unary(r, "abs", UnaryOp::abs, Kinds::numeric);
  define_unary(r, "sign", UnaryOp::sign, Kinds::numeric);
  define_unary(r, "floor", UnaryOp::floor, Kinds::floating);
  define_unary(r, "ceil", UnaryOp::ceil, Kinds::floating);
  define_unary(r, "is_finite", UnaryOp::is_finite, Kinds::floating, /*to_bool=*/true);
  define_unary(r, "not", UnaryOp::bit_not, Kinds::int_or_bool);
  define_unary(r, "square", UnaryOp::square, Kinds::numeric);
  define_unary(r, "population_count", UnaryOp::population_count, Kinds::integer);
  define_unary(r, "clz", UnaryOp::clz, Kinds::integer);
  define_unary(r, "copy", UnaryOp::copy, Kinds::any);
  define_unary(r, "stop_gradient", UnaryOp::copy, Kinds::any);
  r.define(
      "round",
      [](std::span<const AbstractValue> in, const Params&) {
        check_kind("round", in[0].dtype, Kinds::floating);
        return one(in[0]);
      },
      [](const KernelArgs& a) {
        UnaryOp op =
            a.params.get_int("rounding_method") == 0 ? UnaryOp::round_away : UnaryOp::round_even;
        cpu::unary(op, a.in[0].aval->dtype, a.in[0].data, a.out[0].data, a.in[0].aval->size());
      });
  r.define(
      "integer_pow",
      [](std::span<const AbstractValue> in, const Params& p) {
        check_kind("integer_pow", in[0].dtype, Kinds::numeric);
        if (is_integer(in[0].dtype) && p.get_int("y") < 0)
          throw ValueError("[integer_pow] integers cannot be raised to negative powers, got y=" +
                           std::to_string(p.get_int("y")));
        return one(in[0]);
      },
      [](const KernelArgs& a) {
        cpu::integer_pow(a.in[0].aval->dtype, a.in[0].data, a.out[0].data, a.in[0].aval->size(),
                         a.params.get_int("y"));
      });
  define_conversions(r);
  define_select_clamp(r);
  for (const char* name : {"round", "integer_pow", "convert_element_type"}) {
    r.at(name).elementwise = true;
    r.at(name).kind = PrimitiveKind::unary;
  }
  for (const char* name : {"select_n", "clamp"}) r.at(name).elementwise = true;
}

}  // namespace spmd

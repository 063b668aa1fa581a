// Primitive family: linalg. dot_general with JAX's params (dimension_numbers, precision,
// preferred_element_type, out_sharding); output dims are batch, lhs free, rhs free, as in XLA.
// The shape rule checks the dimension numbers and applies XLA's operand-type rules; the jvp,
// transpose and batching rules emit what JAX's do (jax/_src/lax/lax.py).
#include "prims/collectives.h"
#include "prims/families.h"
#include "prims/primitive.h"
#include "prims/rule_util.h"
#include "sharding/type_sharding.h"

#include <spmd/error.h>
#include <spmd/lax.h>

#include "backends/cpu/convert.h"
#include "backends/cpu/gemm.h"
#include "ops/einsum_precision.h"
#include "ops/op_util.h"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

namespace spmd {
namespace {

using lax::DotDimensionNumbers;

std::string tuple_str(const std::vector<int64_t>& v) {
  return Shape(v).str();
}
std::string name(DType t) {
  return std::string(dtype_name(t));
}

bool in_range(const std::vector<int64_t>& dims, int rank) {
  return std::all_of(dims.begin(), dims.end(), [&](int64_t d) { return d >= 0 && d < rank; });
}
bool distinct(const std::vector<int64_t>& dims) {
  return std::set<int64_t>(dims.begin(), dims.end()).size() == dims.size();
}
bool disjoint(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  return std::none_of(a.begin(), a.end(),
                      [&](int64_t d) { return std::find(b.begin(), b.end(), d) != b.end(); });
}
std::vector<int64_t> sizes(const Shape& s, const std::vector<int64_t>& dims) {
  std::vector<int64_t> out;
  for (int64_t d : dims) out.push_back(s[int(d)]);
  return out;
}

void check_side(const char* side, const std::vector<int64_t>& contracting,
                const std::vector<int64_t>& batch, int rank) {
  const std::string s = side;
  if (!in_range(contracting, rank) || !in_range(batch, rank))
    throw AxisError("[dot_general] requires " + s + " dimension numbers to be nonnegative and " +
                    "less than the number of axes of the " + s + " value, got " + s + "_batch of " +
                    tuple_str(batch) + " and " + s + "_contracting of " + tuple_str(contracting) +
                    " for " + s + " of rank " + std::to_string(rank));
  if (!distinct(batch))
    throw ValueError("[dot_general] requires " + s + " batch dimensions to be distinct, got " + s +
                     "_batch " + tuple_str(batch));
  if (!distinct(contracting))
    throw ValueError("[dot_general] requires " + s +
                     " contracting dimensions to be distinct, got " + s + "_contracting " +
                     tuple_str(contracting));
  if (!disjoint(batch, contracting))
    throw ValueError("[dot_general] requires " + s +
                     " batch dimensions to be disjoint from contracting dimensions, got " + s +
                     "_batch " + tuple_str(batch) + " and " + s + "_contracting " +
                     tuple_str(contracting));
}

void check_dimension_numbers(const AbstractValue& lhs, const AbstractValue& rhs,
                             const DotDimensionNumbers& d) {
  check_side("lhs", d.lhs_contracting, d.lhs_batch, lhs.shape.ndim());
  check_side("rhs", d.rhs_contracting, d.rhs_batch, rhs.shape.ndim());
  if (d.lhs_batch.size() != d.rhs_batch.size())
    throw ValueError("[dot_general] requires equal numbers of lhs_batch and rhs_batch " +
                     std::string("dimensions, got lhs_batch ") + tuple_str(d.lhs_batch) +
                     " and rhs_batch " + tuple_str(d.rhs_batch));
  if (d.lhs_contracting.size() != d.rhs_contracting.size())
    throw ValueError("[dot_general] requires equal numbers of lhs_contracting and " +
                     std::string("rhs_contracting dimensions, got lhs_contracting ") +
                     tuple_str(d.lhs_contracting) + " and rhs_contracting " +
                     tuple_str(d.rhs_contracting));
  auto lb = sizes(lhs.shape, d.lhs_batch), rb = sizes(rhs.shape, d.rhs_batch);
  if (lb != rb)
    throw ShapeError("[dot_general] requires lhs batch dimensions and rhs batch dimensions to " +
                     std::string("have the same shape, got ") + tuple_str(lb) + " and " +
                     tuple_str(rb));
  auto lc = sizes(lhs.shape, d.lhs_contracting), rc = sizes(rhs.shape, d.rhs_contracting);
  if (lc != rc)
    throw ShapeError("[dot_general] requires contracting dimensions to have the same shape, " +
                     std::string("got ") + tuple_str(lc) + " and " + tuple_str(rc));
}

// XLA's ordering of element types (shape_inference.cc, HigherPrecisionType): floats above
// integers, then by exponent range, mantissa, bit width, and signed above unsigned.
auto type_rank(DType t) {
  int maxexp = -1, nmant = -1;
  switch (t) {
    case DType::float16:
      maxexp = 16, nmant = 10;
      break;
    case DType::bfloat16:
      maxexp = 128, nmant = 7;
      break;
    case DType::float32:
      maxexp = 128, nmant = 23;
      break;
    case DType::float64:
      maxexp = 1024, nmant = 52;
      break;
    default:
      break;
  }
  int bits = is_bool(t) ? 1 : 8 * itemsize(t);
  return std::make_tuple(maxexp, nmant, bits, !is_unsigned_integer(t));
}

int bit_width(DType t) {
  return is_bool(t) ? 1 : 8 * itemsize(t);
}

const lax::DotPrecision* dot_precision(const Params& p) {
  if (!p.has("precision") || is_none(p.at("precision"))) return nullptr;
  return &p.get_object<lax::DotPrecision>("precision");
}

bool has_algorithm(const Params& p) {
  const lax::DotPrecision* precision = dot_precision(p);
  return precision && precision->algorithm.index() != 0;
}

DType result_dtype(DType lhs, DType rhs, const Params& p) {
  auto lr = type_rank(lhs), rr = type_rank(rhs);
  if (lr == rr && lhs != rhs)
    throw TypeError("[dot_general] argument type error: " + name(lhs) + ", " + name(rhs));
  const DType natural = lr >= rr ? lhs : rhs;
  if (!p.has("preferred_element_type")) return natural;
  const auto* preferred = std::get_if<DType>(&p.at("preferred_element_type"));
  if (!preferred || *preferred == natural) return natural;
  // As JAX's _maybe_upcast: an algorithm may narrow an integer product.
  if (!is_floating(natural) && !has_algorithm(p) && bit_width(*preferred) < bit_width(natural))
    throw TypeError("[dot_general] `preferred_element_type` must not be narrower than the " +
                    std::string("original type, got preferred_element_type of ") +
                    name(*preferred) + " for result type of " + name(natural));
  return *preferred;
}

std::vector<AbstractValue> dot_general_rule(std::span<const AbstractValue> in, const Params& p) {
  if (in.size() != 2)
    throw ValueError("[dot_general] expected 2 operands, got " + std::to_string(in.size()));
  const AbstractValue &lhs = in[0], &rhs = in[1];
  const auto& d = p.get<DotDimensionNumbers>("dimension_numbers");
  check_dimension_numbers(lhs, rhs, d);
  std::vector<int64_t> dims = sizes(lhs.shape, d.lhs_batch);
  for (int i = 0; i < lhs.shape.ndim(); ++i)
    if (disjoint({i}, d.lhs_batch) && disjoint({i}, d.lhs_contracting))
      dims.push_back(lhs.shape[i]);
  for (int i = 0; i < rhs.shape.ndim(); ++i)
    if (disjoint({i}, d.rhs_batch) && disjoint({i}, d.rhs_contracting))
      dims.push_back(rhs.shape[i]);
  return {AbstractValue{Shape(dims), result_dtype(lhs.dtype, rhs.dtype, p),
                        lhs.weak_type && rhs.weak_type}};
}

// ---- kernel -------------------------------------------------------------------------------------
using Preset = lax::DotAlgorithmPreset;

// The types a product computes in: operands converted to lhs and rhs, accumulated in
// `accumulation`, then converted to the result's type.
struct ComputeTypes {
  DType lhs, rhs, accumulation;
};

// DotAlgorithmPreset's supported_lhs_types (none: any).
std::vector<DType> storage_types(Preset preset) {
  switch (preset) {
    case Preset::DEFAULT:
      return {};
    case Preset::F16_F16_F16:
      return {DType::float16};
    case Preset::BF16_BF16_F32:
      return {DType::bfloat16, DType::float32};
    case Preset::F64_F64_F64:
      return {DType::float64};
    default:
      return {DType::float32};
  }
}

// DotAlgorithmPreset's supported_output_types for the (converted) operand types.
std::vector<DType> output_types(Preset preset, DType lhs, DType rhs) {
  switch (preset) {
    case Preset::DEFAULT:
      return {};
    case Preset::F16_F16_F16:
      return {DType::float16};
    case Preset::F64_F64_F64:
      return {DType::float64};
    case Preset::BF16_BF16_F32:
      if (lhs == DType::bfloat16 && rhs == DType::bfloat16)
        return {DType::float32, DType::bfloat16};
      return {DType::float32};
    default:
      return {DType::float32};
  }
}

// get_algorithm_compute_types: a type the preset supports stays, any other becomes its first.
DType supported(DType t, const std::vector<DType>& types) {
  if (types.empty() || std::find(types.begin(), types.end(), t) != types.end()) return t;
  return types[0];
}

// JAX's _handle_dot_precision on CPU: which presets compile there (XLA:CPU otherwise ignores the
// algorithm, so JAX refuses the rest), and the conversions around the product.
ComputeTypes compute_types(const Params& p, DType lhs, DType rhs, DType out) {
  const lax::DotPrecision* precision = dot_precision(p);
  if (!precision || precision->algorithm.index() == 0) return {lhs, rhs, out};
  const auto* preset = std::get_if<Preset>(&precision->algorithm);
  static const std::set<Preset> on_cpu = {
      Preset::DEFAULT,       Preset::F16_F16_F16,      Preset::F32_F32_F32,     Preset::F64_F64_F64,
      Preset::BF16_BF16_F32, Preset::BF16_BF16_F32_X3, Preset::BF16_BF16_F32_X6};
  if (!preset || !on_cpu.count(*preset))
    throw ValueError("[dot_general] The precision '" + ops::precision_str(*precision) +
                     "' is not supported by dot_general on CPU");
  const DType l = supported(lhs, storage_types(*preset));
  const DType r = supported(rhs, storage_types(*preset));
  return {l, r, supported(out, output_types(*preset, l, r))};
}

// `data` as `to` (itself when it already is).
const void* converted(const Operand& x, DType to, std::vector<std::byte>& storage) {
  if (x.aval->dtype == to) return x.data;
  const int64_t n = x.aval->shape.size();
  storage.resize(size_t(n) * itemsize(to));
  cpu::convert(x.data, x.aval->dtype, storage.data(), to, n);
  return storage.data();
}

void dot_general_kernel(const KernelArgs& a) {
  const Operand &lhs = a.in[0], &rhs = a.in[1];
  const DType out = a.out[0].aval->dtype;
  const ComputeTypes t = compute_types(a.params, lhs.aval->dtype, rhs.aval->dtype, out);
  std::vector<std::byte> lhs_storage, rhs_storage, accumulated;
  const void* l = converted(lhs, t.lhs, lhs_storage);
  const void* r = converted(rhs, t.rhs, rhs_storage);
  const int64_t n = a.out[0].aval->shape.size();
  if (t.accumulation != out) accumulated.resize(size_t(n) * itemsize(t.accumulation));
  void* result = t.accumulation == out ? a.out[0].data : accumulated.data();
  cpu::dot_general(l, t.lhs, lhs.aval->shape, r, t.rhs, rhs.aval->shape,
                   a.params.get<DotDimensionNumbers>("dimension_numbers"), result, t.accumulation,
                   r == rhs.data ? rhs.buffer : nullptr);
  if (t.accumulation != out) cpu::convert(result, t.accumulation, a.out[0].data, out, n);
}

// ---- transformation rules ----------------------------------------------------------------------
using Ints = std::vector<int64_t>;

// Shardy's rule: batch dims, then the lhs's and the rhs's free dims, pass through in the result's
// order; contracting dims are reductions whose partial sums psum completes. A bool product is
// an `or` of `and`s, which psum does not compute: its contracting dims need replication.
ShardingRule dot_general_sharding(std::span<const AbstractValue> in,
                                  std::span<const AbstractValue> out, const Params& p) {
  const Shape &lhs = in[0].shape, &rhs = in[1].shape;
  const auto& d = p.get<DotDimensionNumbers>("dimension_numbers");
  ShardingRule rule;
  ShardingRule::Tensor l(size_t(lhs.ndim())), r(size_t(rhs.ndim())), result;
  for (size_t k = 0; k < d.lhs_batch.size(); ++k) {
    const int f = rule.add_factor(lhs[int(d.lhs_batch[k])]);
    l[size_t(d.lhs_batch[k])] = r[size_t(d.rhs_batch[k])] = {f};
    result.push_back({f});
  }
  for (int64_t i : remaining(lhs.ndim(), d.lhs_contracting, d.lhs_batch)) {
    l[size_t(i)] = {rule.add_factor(lhs[int(i)])};
    result.push_back(l[size_t(i)]);
  }
  for (int64_t i : remaining(rhs.ndim(), d.rhs_contracting, d.rhs_batch)) {
    r[size_t(i)] = {rule.add_factor(rhs[int(i)])};
    result.push_back(r[size_t(i)]);
  }
  const bool summed = !is_bool(out[0].dtype);
  for (size_t k = 0; k < d.lhs_contracting.size(); ++k) {
    const int f = rule.add_factor(lhs[int(d.lhs_contracting[k])],
                                  summed ? FactorKind::reduction : FactorKind::need_replication);
    l[size_t(d.lhs_contracting[k])] = r[size_t(d.rhs_contracting[k])] = {f};
  }
  rule.operands = {std::move(l), std::move(r)};
  rule.results = {std::move(result)};
  if (summed) rule.combiner = &collectives::psum_primitive();
  rule.pad_all();
  return rule;
}

// JAX's bilinear jvp: dot_general of each tangent with the other primal, summed.
JvpResult dot_general_jvp(const Primitive& self, std::span<const Array> x, std::span<const Array> t,
                          const Params& p) {
  Array ans = bind1(self, {x[0], x[1]}, p);
  Array lhs_part = is_zero(t[0]) ? Array() : bind1(self, {t[0], x[1]}, p);
  Array rhs_part = is_zero(t[1]) ? Array() : bind1(self, {x[0], t[1]}, p);
  return JvpResult{{ans}, {add_cotangents(lhs_part, rhs_part)}};
}

// JAX's _dot_general_transpose_lhs: contract the cotangent with y over y's free dims, then
// permute the result into x's dimension order. `swap_ans` when x was the rhs (its free dims
// come last in the output).
Array dot_transpose_lhs(const Primitive& self, const Array& g, const AbstractValue& x,
                        const Array& y, const DotDimensionNumbers& d, const Params& p,
                        bool swap_ans) {
  const Ints x_kept = remaining(x.shape.ndim(), d.lhs_contracting, d.lhs_batch);
  const Ints y_kept = remaining(y.ndim(), d.rhs_contracting, d.rhs_batch);
  const int64_t nb = int64_t(d.lhs_batch.size());
  const int64_t y_begin = swap_ans ? nb : nb + int64_t(x_kept.size());
  DotDimensionNumbers dims{range(y_begin, y_begin + int64_t(y_kept.size())), y_kept, range(0, nb),
                           d.rhs_batch};
  Ints x_contract_sorted_by_y;
  for (int64_t i : argsort(d.rhs_contracting))
    x_contract_sorted_by_y.push_back(d.lhs_contracting[size_t(i)]);
  const Ints unsorted_axes = concat(concat(d.lhs_batch, x_kept), x_contract_sorted_by_y);
  Params params = p;
  params.set("dimension_numbers", dims);
  // As JAX: in Explicit mode this product gives x's sharding, its dims in contracted's order.
  params.set("out_sharding", NoneParam{});
  if (x.sharding) {
    TypeSharding contracted_sharding{x.sharding->mesh, {}};
    for (int64_t d : unsorted_axes) contracted_sharding.dims.push_back(x.sharding->dims[size_t(d)]);
    params.set("out_sharding", object_param(std::move(contracted_sharding)));
  }
  Array contracted = bind1(self, {g, y}, params);
  Array x_bar = lax::transpose(contracted, argsort(unsorted_axes));
  if (x_bar.dtype() != x.dtype) x_bar = ops::convert(x_bar, x.dtype, x.weak_type);
  return x_bar;
}

std::vector<Array> dot_general_transpose(const Primitive& self, std::span<const Array> ct,
                                         std::span<const LinearInput> in, const Params& p) {
  const auto& d = p.get<DotDimensionNumbers>("dimension_numbers");
  if (in[0].is_linear())
    return {dot_transpose_lhs(self, ct[0], in[0].aval, in[1].value, d, p, false), Array()};
  const DotDimensionNumbers swapped{d.rhs_contracting, d.lhs_contracting, d.rhs_batch, d.lhs_batch};
  return {Array(), dot_transpose_lhs(self, ct[0], in[1].aval, in[0].value, swapped, p, true)};
}

// How many of an operand's free dims (neither batch nor contracting, in the unbatched
// numbering) precede its batch dimension `bdim`.
int free_dims_before(int ndim, const Ints& batch, const Ints& contracting, int bdim) {
  int before = 0;
  for (int64_t i : remaining(ndim, batch, contracting))
    if (i < bdim) ++before;
  return before;
}

// JAX's _dot_general_batch_dim_nums: two batched operands gain a leading dot batch dimension;
// one batched operand's batch dimension becomes one of its free dimensions.
BatchResult dot_general_batch(const Primitive& self, std::span<const Array> args,
                              std::span<const int> dims, const Params& params,
                              const BatchContext& ctx) {
  const int lbd = dims[0], rbd = dims[1];
  const int lhs_ndim = args[0].ndim(), rhs_ndim = args[1].ndim();
  DotDimensionNumbers d = params.get<DotDimensionNumbers>("dimension_numbers");
  int result_dim = 0;
  if (is_batched(lbd) && is_batched(rbd)) {
    d.lhs_batch = prepend(lbd, bump(d.lhs_batch, lbd));
    d.rhs_batch = prepend(rbd, bump(d.rhs_batch, rbd));
    d.lhs_contracting = bump(d.lhs_contracting, lbd);
    d.rhs_contracting = bump(d.rhs_contracting, rbd);
  } else if (is_batched(lbd)) {
    result_dim =
        int(d.lhs_batch.size()) + free_dims_before(lhs_ndim, d.lhs_batch, d.lhs_contracting, lbd);
    d.lhs_batch = bump(d.lhs_batch, lbd);
    d.lhs_contracting = bump(d.lhs_contracting, lbd);
  } else {
    result_dim = lhs_ndim - int(d.lhs_contracting.size()) +
                 free_dims_before(rhs_ndim, d.rhs_batch, d.rhs_contracting, rbd);
    d.rhs_batch = bump(d.rhs_batch, rbd);
    d.rhs_contracting = bump(d.rhs_contracting, rbd);
  }
  Params p = params;
  p.set("dimension_numbers", d);
  // JAX's get_sharding_for_vmap: the batch dim is split over vmap's explicit mesh axes.
  p.set("out_sharding",
        batched_out_sharding(params, "out_sharding", result_dim, ctx.explicit_mesh_axis));
  return result_at(bind1(self, {args[0], args[1]}, p), result_dim);
}

}  // namespace

void register_linalg_primitives(PrimitiveRegistry& r) {
  Primitive& dot_general = r.define("dot_general", dot_general_rule, dot_general_kernel);
  dot_general.jvp = binding(dot_general, dot_general_jvp);
  dot_general.transpose = binding(dot_general, dot_general_transpose);
  dot_general.batch = binding(dot_general, dot_general_batch);
  dot_general.sharding_rule = dot_general_sharding;
  // JAX's jaxpr leaves out_sharding out even when it is set, precision and
  // preferred_element_type when None.
  dot_general.hides_param = [](std::string_view key, const ParamValue& v) {
    return key == "out_sharding" ||
           ((key == "precision" || key == "preferred_element_type") && is_none(v));
  };
}

}  // namespace spmd

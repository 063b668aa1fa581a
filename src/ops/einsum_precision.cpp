// lax.canonicalize_precision of JAX 0.10.2, with its errors word for word, and the text the
// jaxpr prints for the result (Precision's, DotAlgorithmPreset's and DotAlgorithm's str).
#include "ops/einsum_precision.h"

#include <spmd/error.h>

#include <array>
#include <utility>
#include <vector>

namespace spmd::ops {
namespace {

using Item = EinsumPrecision::Item;

// lax._precision_strings, in its order (the error lists them so).
const std::vector<std::pair<std::string, lax::Precision>>& precision_names() {
  using P = lax::Precision;
  static const std::vector<std::pair<std::string, P>> names = {
      {"highest", P::HIGHEST},  {"float32", P::HIGHEST},    {"high", P::HIGH},
      {"bfloat16_3x", P::HIGH}, {"tensorfloat32", P::HIGH}, {"default", P::DEFAULT},
      {"bfloat16", P::DEFAULT}, {"fastest", P::DEFAULT}};
  return names;
}

constexpr std::array<const char*, 16> kPresetNames = {"DEFAULT",
                                                      "ANY_F8_ANY_F8_F32",
                                                      "ANY_F8_ANY_F8_F32_FAST_ACCUM",
                                                      "ANY_F8_ANY_F8_ANY",
                                                      "ANY_F8_ANY_F8_ANY_FAST_ACCUM",
                                                      "F16_F16_F16",
                                                      "F16_F16_F32",
                                                      "BF16_BF16_BF16",
                                                      "BF16_BF16_F32",
                                                      "BF16_BF16_F32_X3",
                                                      "BF16_BF16_F32_X6",
                                                      "BF16_BF16_F32_X9",
                                                      "TF32_TF32_F32",
                                                      "TF32_TF32_F32_X3",
                                                      "F32_F32_F32",
                                                      "F64_F64_F64"};

const char* precision_name(lax::Precision p) {
  static const char* names[] = {"Precision.DEFAULT", "Precision.HIGH", "Precision.HIGHEST"};
  return names[int(p)];
}

std::string dtype_class(DType t) {
  return "<class 'jax.numpy." + std::string(dtype_name(t)) + "'>";
}

std::string algorithm_str(const lax::DotAlgorithm& a) {
  auto count = [](int64_t n) { return std::to_string(n); };
  return "DotAlgorithm(lhs_precision_type=" + dtype_class(a.lhs_precision_type) +
         ", rhs_precision_type=" + dtype_class(a.rhs_precision_type) +
         ", accumulation_type=" + dtype_class(a.accumulation_type) +
         ", lhs_component_count=" + count(a.lhs_component_count) +
         ", rhs_component_count=" + count(a.rhs_component_count) +
         ", num_primitive_operations=" + count(a.num_primitive_operations) +
         ", allow_imprecise_accumulation=" + (a.allow_imprecise_accumulation ? "True" : "False") +
         ")";
}

// Python's repr of one item (inside a tuple) or its str (alone).
std::string item_str(const Item& item, bool repr) {
  if (const auto* p = std::get_if<lax::Precision>(&item)) return precision_name(*p);
  if (const auto* preset = std::get_if<lax::DotAlgorithmPreset>(&item))
    return (repr ? "DotAlgorithmPreset." : "") + std::string(kPresetNames[size_t(*preset)]);
  if (const auto* algorithm = std::get_if<lax::DotAlgorithm>(&item))
    return algorithm_str(*algorithm);
  const std::string& s = std::get<std::string>(item);
  return repr ? "'" + s + "'" : s;
}

std::string value_str(const EinsumPrecision& p) {
  if (!p.is_tuple) return item_str(p.items[0], false);
  std::string s = "(";
  for (size_t i = 0; i < p.items.size(); ++i) s += (i ? ", " : "") + item_str(p.items[i], true);
  return s + (p.items.size() == 1 ? ",)" : ")");
}

[[noreturn]] void bad_precision(std::string_view api, const std::string& got) {
  std::string names;
  for (const auto& [name, value] : precision_names()) names += "'" + name + "', ";
  throw ValueError(
      "[" + std::string(api) + "] Precision argument must be one of:\n- None,\n- a string in [" +
      names +
      "None],\n- a lax.Precision value,\n- a tuple of two lax.Precision values or strings,\n- a "
      "lax.DotAlgorithmPreset or the name of one of these presets, or\n- a lax.DotAlgorithm "
      "value;\nbut got " +
      got + ".");
}

std::optional<lax::DotAlgorithmPreset> preset_named(const std::string& name) {
  for (size_t i = 0; i < kPresetNames.size(); ++i)
    if (name == kPresetNames[i]) return lax::DotAlgorithmPreset(i);
  return std::nullopt;
}

lax::DotPrecision named(const std::string& name, std::string_view api) {
  for (const auto& [n, value] : precision_names())
    if (n == name) return {value, value};
  if (auto preset = preset_named(name)) return *preset;
  bad_precision(api, name);
}

// A name in a pair: JAX takes the first of what the name canonicalizes to, which a preset
// does not have.
lax::Precision named_in_pair(const std::string& name, std::string_view api) {
  const lax::DotPrecision p = named(name, api);
  if (p.algorithm.index() != 0)
    throw TypeError("[" + std::string(api) + "] 'DotAlgorithmPreset' object is not subscriptable");
  return p.lhs;
}

lax::DotPrecision single(const Item& item, std::string_view api) {
  if (const auto* p = std::get_if<lax::Precision>(&item)) return {*p, *p};
  if (const auto* preset = std::get_if<lax::DotAlgorithmPreset>(&item)) return *preset;
  if (const auto* algorithm = std::get_if<lax::DotAlgorithm>(&item)) return *algorithm;
  return named(std::get<std::string>(item), api);
}

}  // namespace

std::optional<lax::DotPrecision> canonicalize_precision(const EinsumPrecision& p,
                                                        std::string_view api) {
  if (p.items.empty() && !p.is_tuple) return std::nullopt;
  if (!p.is_tuple) return single(p.items[0], api);
  if (p.items.size() == 2 && p.items[0].index() == p.items[1].index()) {
    if (const auto* l = std::get_if<lax::Precision>(&p.items[0]))
      return lax::DotPrecision{*l, std::get<lax::Precision>(p.items[1])};
    if (const auto* l = std::get_if<std::string>(&p.items[0])) {
      const lax::Precision lhs = named_in_pair(*l, api);
      return lax::DotPrecision{lhs, named_in_pair(std::get<std::string>(p.items[1]), api)};
    }
  }
  bad_precision(api, value_str(p));
}

std::string precision_str(const lax::DotPrecision& p) {
  if (const auto* preset = std::get_if<lax::DotAlgorithmPreset>(&p.algorithm))
    return kPresetNames[size_t(*preset)];
  if (const auto* algorithm = std::get_if<lax::DotAlgorithm>(&p.algorithm))
    return algorithm_str(*algorithm);
  return std::string("(") + precision_name(p.lhs) + ", " + precision_name(p.rhs) + ")";
}

}  // namespace spmd::ops

namespace spmd {

size_t ParamTraits<lax::DotPrecision>::hash(const lax::DotPrecision& p) {
  size_t h = size_t(p.lhs) * 3 + size_t(p.rhs);
  hash_combine(h, p.algorithm.index());
  if (const auto* preset = std::get_if<lax::DotAlgorithmPreset>(&p.algorithm))
    hash_combine(h, size_t(*preset));
  if (const auto* a = std::get_if<lax::DotAlgorithm>(&p.algorithm)) {
    for (DType t : {a->lhs_precision_type, a->rhs_precision_type, a->accumulation_type})
      hash_combine(h, size_t(t));
    for (int64_t n : {a->lhs_component_count, a->rhs_component_count, a->num_primitive_operations})
      hash_combine(h, size_t(n));
    hash_combine(h, a->allow_imprecise_accumulation);
  }
  return h;
}

}  // namespace spmd

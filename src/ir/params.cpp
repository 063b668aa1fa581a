// Params: a sorted name → value map.
#include "ir/params.h"

#include "ir/program.h"

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <typeinfo>

namespace spmd {

Params::Params(std::initializer_list<std::pair<std::string, ParamValue>> items) {
  for (const auto& [name, value] : items) set(name, value);
}

void Params::set(std::string name, ParamValue value) {
  auto it = std::lower_bound(items_.begin(), items_.end(), name,
                             [](const auto& item, const std::string& n) { return item.first < n; });
  if (it != items_.end() && it->first == name)
    it->second = std::move(value);
  else
    items_.insert(it, {std::move(name), std::move(value)});
}

bool Params::has(std::string_view name) const {
  for (const auto& item : items_)
    if (item.first == name) return true;
  return false;
}

const ParamValue& Params::at(std::string_view name) const {
  for (const auto& item : items_)
    if (item.first == name) return item.second;
  throw std::logic_error("missing primitive parameter '" + std::string(name) + "'");
}

const ParamObject& Params::object_at(std::string_view name) const {
  const ParamValue& v = at(name);
  if (auto* o = std::get_if<ObjectParam>(&v)) return *o->object;
  throw std::logic_error("primitive parameter '" + std::string(name) + "' is not a typed object");
}

void Params::throw_type_mismatch(std::string_view name, std::string_view held,
                                 std::string_view wanted) {
  throw std::logic_error("primitive parameter '" + std::string(name) + "' holds a " +
                         std::string(held) + ", read as a " + std::string(wanted));
}

bool ObjectParam::operator==(const ObjectParam& other) const {
  if (object == other.object) return true;
  const ParamObject &a = *object, &b = *other.object;
  return typeid(a) == typeid(b) && a.equals(b);
}

void hash_combine(size_t& seed, size_t value) {
  seed ^= value + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2);
}

namespace {

bool same_program(const ProgramRef& a, const ProgramRef& b) {
  return a == b || (a && b && *a == *b);
}

bool same_value(const ParamValue& a, const ParamValue& b) {
  if (a.index() != b.index()) return false;
  if (auto* p = std::get_if<ProgramRef>(&a)) return same_program(*p, std::get<ProgramRef>(b));
  if (auto* ps = std::get_if<std::vector<ProgramRef>>(&a)) {
    const auto& qs = std::get<std::vector<ProgramRef>>(b);
    return std::equal(ps->begin(), ps->end(), qs.begin(), qs.end(), same_program);
  }
  return a == b;
}

}  // namespace

bool Params::operator==(const Params& other) const {
  return std::equal(items_.begin(), items_.end(), other.items_.begin(), other.items_.end(),
                    [](const auto& x, const auto& y) {
                      return x.first == y.first && same_value(x.second, y.second);
                    });
}

namespace {

size_t hash_value(const ParamValue& v) {
  size_t h = v.index();
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, NoneParam>) {
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          for (int64_t i : x) hash_combine(h, std::hash<int64_t>{}(i));
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          for (const auto& s : x) hash_combine(h, std::hash<std::string>{}(s));
        } else if constexpr (std::is_same_v<T, lax::DotDimensionNumbers>) {
          for (const auto* list :
               {&x.lhs_contracting, &x.rhs_contracting, &x.lhs_batch, &x.rhs_batch})
            for (int64_t i : *list) hash_combine(h, std::hash<int64_t>{}(i));
        } else if constexpr (std::is_same_v<T, std::vector<lax::PadConfig>>) {
          for (const auto& p : x)
            for (int64_t i : {p.low, p.high, p.interior}) hash_combine(h, std::hash<int64_t>{}(i));
        } else if constexpr (std::is_same_v<T, ProgramRef>) {
          hash_combine(h, x ? x->hash() : 0);
        } else if constexpr (std::is_same_v<T, std::vector<ProgramRef>>) {
          for (const auto& p : x) hash_combine(h, p ? p->hash() : 0);
        } else if constexpr (std::is_same_v<T, ObjectParam>) {
          hash_combine(h, x.object->hash());
        } else if constexpr (std::is_same_v<T, DType>) {
          hash_combine(h, size_t(x));
        } else {
          hash_combine(h, std::hash<T>{}(x));
        }
      },
      v);
  return h;
}
}  // namespace

size_t Params::hash() const {
  size_t h = 0;
  for (const auto& [name, value] : items_) {
    hash_combine(h, std::hash<std::string>{}(name));
    hash_combine(h, hash_value(value));
  }
  return h;
}

}  // namespace spmd

// Params: a sorted name → value map.
#include "ir/params.h"

#include <algorithm>
#include <functional>
#include <stdexcept>

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

bool Params::operator==(const Params& other) const {
  return items_ == other.items_;
}

namespace {
void mix(size_t& seed, size_t v) {
  seed ^= v + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2);
}

size_t hash_value(const ParamValue& v) {
  size_t h = v.index();
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, NoneParam>) {
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          for (int64_t i : x) mix(h, std::hash<int64_t>{}(i));
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          for (const auto& s : x) mix(h, std::hash<std::string>{}(s));
        } else if constexpr (std::is_same_v<T, lax::DotDimensionNumbers>) {
          for (const auto* list :
               {&x.lhs_contracting, &x.rhs_contracting, &x.lhs_batch, &x.rhs_batch})
            for (int64_t i : *list) mix(h, std::hash<int64_t>{}(i));
        } else if constexpr (std::is_same_v<T, std::vector<lax::PadConfig>>) {
          for (const auto& p : x)
            mix(h, std::hash<int64_t>{}(p.low * 31 + p.high * 7 + p.interior));
        } else if constexpr (std::is_same_v<T, std::shared_ptr<const Program>>) {
          mix(h, std::hash<const void*>{}(x.get()));
        } else if constexpr (std::is_same_v<T, std::vector<std::shared_ptr<const Program>>>) {
          for (const auto& p : x) mix(h, std::hash<const void*>{}(p.get()));
        } else if constexpr (std::is_same_v<T, OpaqueParam>) {
          mix(h, std::hash<const void*>{}(x.value.get()));
        } else if constexpr (std::is_same_v<T, DType>) {
          mix(h, size_t(x));
        } else {
          mix(h, std::hash<T>{}(x));
        }
      },
      v);
  return h;
}
}  // namespace

size_t Params::hash() const {
  size_t h = 0;
  for (const auto& [name, value] : items_) {
    mix(h, std::hash<std::string>{}(name));
    mix(h, hash_value(value));
  }
  return h;
}

}  // namespace spmd

// Pairing donated arguments with results, as JAX does.
#include "compile/donation.h"

namespace spmd {

namespace {

bool same_array_type(const AbstractValue& a, const AbstractValue& b) {
  return a.shape == b.shape && a.dtype == b.dtype;
}

bool same_size(const AbstractValue& a, const AbstractValue& b) {
  return a.size() == b.size() && itemsize(a.dtype) == itemsize(b.dtype);
}

// Pairs each result not yet taken, in order, with the first donated argument left that `fits`
// (results first when `results_first`, else arguments first).
template <class Fits>
void pair_up(std::vector<int>& aliases, std::vector<bool>& taken, const std::vector<bool>& donated,
             size_t num_outputs, bool results_first, Fits fits) {
  const size_t n = aliases.size();
  auto free_arg = [&](size_t i) { return i < donated.size() && donated[i] && aliases[i] < 0; };
  if (results_first) {
    for (size_t k = 0; k < num_outputs; ++k)
      for (size_t i = 0; i < n && !taken[k]; ++i)
        if (free_arg(i) && fits(i, k)) aliases[i] = int(k), taken[k] = true;
    return;
  }
  for (size_t i = 0; i < n; ++i)
    for (size_t k = 0; k < num_outputs && free_arg(i); ++k)
      if (!taken[k] && fits(i, k)) aliases[i] = int(k), taken[k] = true;
}

}  // namespace

std::vector<int> donation_aliases(std::span<const AbstractValue> in_types,
                                  const std::vector<bool>& donated,
                                  std::span<const AbstractValue> out_types) {
  std::vector<int> aliases(in_types.size(), -1);
  std::vector<bool> taken(out_types.size(), false);
  pair_up(aliases, taken, donated, out_types.size(), true,
          [&](size_t i, size_t k) { return same_array_type(in_types[i], out_types[k]); });
  pair_up(aliases, taken, donated, out_types.size(), false,
          [&](size_t i, size_t k) { return same_size(in_types[i], out_types[k]); });
  return aliases;
}

std::string unusable_donations_warning(std::span<const AbstractValue> in_types,
                                       const std::vector<bool>& donated,
                                       const std::vector<int>& aliases) {
  std::string unused;
  for (size_t i = 0; i < in_types.size(); ++i) {
    if (i >= donated.size() || !donated[i] || aliases[i] >= 0) continue;
    if (!unused.empty()) unused += ", ";
    unused += AbstractValue{in_types[i].shape, in_types[i].dtype}.typeof_str();
  }
  if (unused.empty()) return "";
  return "Some donated buffers were not usable: " + unused +
         ".\nSee an explanation at https://docs.jax.dev/en/latest/faq.html#buffer-donation.";
}

}  // namespace spmd

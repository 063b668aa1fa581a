#include "runtime/launch.h"

#include <algorithm>
#include <stdexcept>

namespace spmd::runtime {
namespace {
thread_local const LaunchContext* t_launch = nullptr;
}  // namespace

int LaunchContext::axis_of(const std::string& name) const {
  auto it = std::find(axis_names.begin(), axis_names.end(), name);
  return it == axis_names.end() ? -1 : int(it - axis_names.begin());
}

int64_t LaunchContext::coord(int axis) const {
  int64_t stride = 1;
  for (int a = int(axis_sizes.size()) - 1; a > axis; --a) stride *= axis_sizes[a];
  return (rank / stride) % axis_sizes[axis];
}

Group group_over(const LaunchContext& ctx, const std::vector<std::string>& names) {
  const int n_axes = int(ctx.axis_sizes.size());
  std::vector<int64_t> strides(n_axes, 1);
  for (int a = n_axes - 2; a >= 0; --a) strides[a] = strides[a + 1] * ctx.axis_sizes[a + 1];
  std::vector<int> axes_idx;
  for (const auto& n : names) {
    int a = ctx.axis_of(n);
    if (a < 0) throw std::logic_error("group_over: unknown mesh axis " + n);
    axes_idx.push_back(a);
  }
  // The base rank: this device with its coordinates on the named axes set to zero.
  int64_t base = ctx.rank;
  for (int a : axes_idx) base -= ctx.coord(a) * strides[a];
  int64_t count = 1;
  for (int a : axes_idx) count *= ctx.axis_sizes[a];
  Group g;
  g.ranks.reserve(size_t(count));
  for (int64_t linear = 0; linear < count; ++linear) {
    int64_t rest = linear, r = base;
    for (int k = int(axes_idx.size()) - 1; k >= 0; --k) {
      int a = axes_idx[k];
      r += (rest % ctx.axis_sizes[a]) * strides[a];
      rest /= ctx.axis_sizes[a];
    }
    if (r == ctx.rank) g.me = int(g.ranks.size());
    g.ranks.push_back(int(r));
  }
  return g;
}

const LaunchContext* current_launch() {
  return t_launch;
}

LaunchScope::LaunchScope(const LaunchContext* ctx) : saved_(t_launch) {
  t_launch = ctx;
}
LaunchScope::~LaunchScope() {
  t_launch = saved_;
}

}  // namespace spmd::runtime

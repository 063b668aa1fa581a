#include "core/axis_env.h"

namespace spmd {
namespace {
thread_local std::vector<AxisFrame> t_frames;
}  // namespace

const std::vector<AxisFrame>& axis_env() {
  return t_frames;
}

std::optional<AxisFrame> find_axis(const std::string& name) {
  for (auto it = t_frames.rbegin(); it != t_frames.rend(); ++it)
    if (it->name == name) return *it;
  return std::nullopt;
}

AxisEnvScope::AxisEnvScope(std::vector<AxisFrame> frames) : pushed_(frames.size()) {
  for (auto& f : frames) t_frames.push_back(std::move(f));
}
AxisEnvScope::~AxisEnvScope() {
  t_frames.resize(t_frames.size() - pushed_);
}

}  // namespace spmd

#include "core/axis_env.h"

#include <utility>

namespace spmd {
namespace {
thread_local std::vector<AxisFrame> t_frames;
thread_local std::vector<std::string> t_spmd_axis_names;
thread_local std::vector<std::string> t_explicit_mesh_axis_names;
thread_local std::optional<TypeSharding> t_body_mesh;

std::vector<std::string>& names_list(AxisNameList list) {
  return list == AxisNameList::spmd ? t_spmd_axis_names : t_explicit_mesh_axis_names;
}
}  // namespace

const std::vector<AxisFrame>& axis_env() {
  return t_frames;
}

std::optional<AxisFrame> find_axis(const std::string& name) {
  for (auto it = t_frames.rbegin(); it != t_frames.rend(); ++it)
    if (it->name == name) return *it;
  return std::nullopt;
}

namespace {

bool contains(const std::vector<std::string>& v, const std::string& x) {
  for (const std::string& s : v)
    if (s == x) return true;
  return false;
}

// `names` ordered as the frames in scope, unknown names last in their given order.
std::vector<std::string> in_scope_order(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const AxisFrame& f : t_frames)
    if (contains(names, f.name) && !contains(out, f.name)) out.push_back(f.name);
  for (const std::string& n : names)
    if (!contains(out, n)) out.push_back(n);
  return out;
}

}  // namespace

std::vector<std::string> vma_union(const std::vector<std::string>& a,
                                   const std::vector<std::string>& b) {
  std::vector<std::string> all = a;
  all.insert(all.end(), b.begin(), b.end());
  return in_scope_order(all);
}

std::vector<std::string> vma_minus(const std::vector<std::string>& a,
                                   const std::vector<std::string>& b) {
  std::vector<std::string> out;
  for (const std::string& x : a)
    if (!contains(b, x)) out.push_back(x);
  return in_scope_order(out);
}

const std::vector<std::string>& spmd_axis_names() {
  return t_spmd_axis_names;
}

const std::vector<std::string>& explicit_mesh_axis_names() {
  return t_explicit_mesh_axis_names;
}

AxisNamesScope::AxisNamesScope(AxisNameList list, const std::vector<std::string>& names)
    : list_(names_list(list)), size_before_(list_.size()) {
  list_.insert(list_.end(), names.begin(), names.end());
}
AxisNamesScope::~AxisNamesScope() {
  list_.resize(size_before_);
}

AxisEnvScope::AxisEnvScope(std::vector<AxisFrame> frames) : pushed_(frames.size()) {
  for (auto& f : frames) t_frames.push_back(std::move(f));
}
AxisEnvScope::~AxisEnvScope() {
  t_frames.resize(t_frames.size() - pushed_);
}

const TypeSharding* body_mesh() {
  return t_body_mesh ? &*t_body_mesh : nullptr;
}

BodyMeshScope::BodyMeshScope(TypeSharding mesh) : previous_(std::move(t_body_mesh)) {
  mesh.dims.clear();
  t_body_mesh = std::move(mesh);
}
BodyMeshScope::~BodyMeshScope() {
  t_body_mesh = std::move(previous_);
}

void on_body_mesh(AbstractValue& t) {
  if (!t_body_mesh || t.sharding) return;
  t.sharding = TypeSharding{t_body_mesh->mesh, std::vector<std::vector<std::string>>(
                                                   size_t(t.shape.ndim()))};
}

}  // namespace spmd

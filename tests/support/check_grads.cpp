// The gradient checker (check_grads.h).
#include "check_grads.h"

#include <spmd/spmd.h>

#include <cmath>
#include <random>
#include <sstream>

namespace spmd_test {
namespace {

using spmd::Array;

std::vector<Array> random_like(const std::vector<Array>& xs, std::mt19937& rng) {
  std::normal_distribution<double> normal;
  std::vector<Array> out;
  for (const Array& x : xs) {
    std::vector<double> v(static_cast<size_t>(x.size()));
    for (double& d : v) d = normal(rng);
    out.push_back(spmd::array(v, x.shape()).astype(x.dtype()));
  }
  return out;
}

double vdot(const std::vector<Array>& a, const std::vector<Array>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    std::vector<double> x = a[i].to_vector<double>(), y = b[i].to_vector<double>();
    for (size_t k = 0; k < x.size(); ++k) s += x[k] * y[k];
  }
  return s;
}

std::string compare(const char* what, const std::vector<Array>& got, const std::vector<Array>& want,
                    const GradCheckOptions& o) {
  for (size_t i = 0; i < got.size(); ++i) {
    std::vector<double> g = got[i].to_vector<double>(), w = want[i].to_vector<double>();
    if (g.size() != w.size()) return std::string(what) + ": output sizes differ";
    for (size_t k = 0; k < g.size(); ++k)
      if (!(std::abs(g[k] - w[k]) <= o.atol + o.rtol * std::abs(w[k]))) {
        std::ostringstream os;
        os.precision(17);
        os << what << ": output " << i << " element " << k << " is " << g[k] << ", expected "
           << w[k];
        return os.str();
      }
  }
  return {};
}

std::vector<Array> axpy(const std::vector<Array>& x, double a, const std::vector<Array>& v) {
  std::vector<Array> out;
  for (size_t i = 0; i < x.size(); ++i) out.push_back(x[i] + v[i] * a);
  return out;
}

std::string check_first_order(const FlatFunction& f, const std::vector<Array>& args,
                              const GradCheckOptions& o, std::mt19937& rng) {
  std::vector<Array> v = random_like(args, rng);
  auto [outs, tangents] = spmd::transform_detail::jvp(f, args, v);
  // Central differences, with the step scaled to each direction.
  std::vector<Array> plus = f(axpy(args, o.eps, v)), minus = f(axpy(args, -o.eps, v));
  std::vector<Array> fd;
  for (size_t i = 0; i < plus.size(); ++i) fd.push_back((plus[i] - minus[i]) / (2 * o.eps));
  // Finite differences carry O(eps²) truncation and O(1/eps) rounding error.
  GradCheckOptions loose = o;
  loose.rtol = std::max(o.rtol, 1e-5);
  loose.atol = std::max(o.atol, 1e-6);
  if (std::string e = compare("jvp vs finite differences", tangents, fd, loose); !e.empty())
    return e;
  auto [outs2, pullback] = spmd::transform_detail::vjp(f, args);
  std::vector<Array> u = random_like(outs2, rng);
  std::vector<Array> cts = pullback(u);
  double lhs = vdot(u, tangents), rhs = vdot(cts, v);
  if (!(std::abs(lhs - rhs) <= o.atol + o.rtol * std::max(std::abs(lhs), std::abs(rhs)))) {
    std::ostringstream os;
    os.precision(17);
    os << "vjp vs jvp: <u, J v> = " << lhs << " but <J^T u, v> = " << rhs;
    return os.str();
  }
  return {};
}

}  // namespace

std::string check_grads(const FlatFunction& f, const std::vector<Array>& args,
                        const GradCheckOptions& options) {
  std::mt19937 rng(options.seed);
  if (std::string e = check_first_order(f, args, options, rng); !e.empty()) return e;
  if (options.order < 2) return {};
  // Second order: the jvp of x ↦ vjp(f, x)(u) for a fixed u.
  auto [outs, unused] = spmd::transform_detail::vjp(f, args);
  std::vector<Array> u = random_like(outs, rng);
  FlatFunction pulled = [f, u](std::span<const Array> xs) {
    auto [o, pb] = spmd::transform_detail::vjp(f, xs);
    return pb(u);
  };
  std::string e = check_first_order(pulled, args, options, rng);
  return e.empty() ? e : "second order: " + e;
}

}  // namespace spmd_test

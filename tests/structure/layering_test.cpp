// The ground floors of the layering (docs/ARCHITECTURE.md): src/core and src/ir include nothing
// above them, the CPU kernels nothing but core value types and their own headers. Every project
// header those files include must be one their layer may use.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// What the files of one layer may include: project paths starting with one of `prefixes`, and
// exactly the listed `headers`.
struct Rule {
  std::vector<std::string> prefixes;
  std::vector<std::string> headers;
};

// The public headers that hold plain values and include nothing above core.
const std::vector<std::string> kValueHeaders = {
    "spmd/array.h",  "spmd/dtype.h",      "spmd/shape.h",     "spmd/tree.h",        "spmd/error.h",
    "spmd/config.h", "spmd/axis_names.h", "spmd/lax_types.h", "spmd/ordered_dict.h"};

const Rule kCore = {{"core/"}, kValueHeaders};
const Rule kIr = {{"core/", "ir/"}, kValueHeaders};
// Kernels see raw buffers: no Array, only what describes memory, the core-owned Buffer for
// scratch space, and the plain LRU container for their caches.
const Rule kKernels = {{"backends/"},
                       {"spmd/dtype.h", "spmd/shape.h", "spmd/error.h", "spmd/config.h",
                        "spmd/lax_types.h", "core/buffer.h", "core/lru.h"}};
const Rule kValues = {{}, kValueHeaders};

bool allowed(const std::string& path, const Rule& rule) {
  for (const std::string& p : rule.prefixes)
    if (path.starts_with(p)) return true;
  return std::find(rule.headers.begin(), rule.headers.end(), path) != rule.headers.end();
}

// "file: #include path" for each project header `file` includes that `rule` does not allow.
// Project headers are the quoted ones and <spmd/...>; the rest are system or third-party.
void check(const fs::path& file, const Rule& rule, std::vector<std::string>& found) {
  static const std::regex include_line(R"(^\s*#\s*include\s*(["<])([^">]+)[">])");
  std::ifstream in(file);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (!std::regex_search(line, m, include_line)) continue;
    const std::string path = m[2];
    const bool project = m[1] == "\"" || path.starts_with("spmd/");
    if (project && !allowed(path, rule))
      found.push_back(fs::relative(file, SPMD_SOURCE_DIR).string() + ": #include " + path);
  }
}

std::string report(const std::vector<std::string>& found) {
  std::string text;
  for (const std::string& f : found) text += "\n  " + f;
  return text;
}

TEST(Layering, CoreIrAndKernelsIncludeNothingFromTheLayersAbove) {
  const fs::path src = fs::path(SPMD_SOURCE_DIR) / "src";
  std::vector<std::string> found;
  int scanned = 0;
  for (const auto& [dir, rule] : {std::pair{"core", kCore}, {"ir", kIr}, {"backends", kKernels}})
    for (const auto& entry : fs::recursive_directory_iterator(src / dir)) {
      if (!entry.is_regular_file()) continue;
      check(entry.path(), rule, found);
      ++scanned;
    }
  EXPECT_GT(scanned, 40) << "no sources under " << src;
  EXPECT_TRUE(found.empty()) << "includes from a layer above:" << report(found);
}

// The interpreters (jit staging, autodiff, vmap) sit below the higher-order primitives that use
// them: they look rules up on the primitive and never reach up to cond, scan or shard_map.
TEST(Layering, InterpretersIncludeNoHigherOrderPrimitive) {
  const fs::path transforms = fs::path(SPMD_SOURCE_DIR) / "src" / "transforms";
  static const std::regex upward(R"(^\s*#\s*include\s*"transforms/higher_order/)");
  std::vector<std::string> found;
  int scanned = 0;
  for (const auto& entry : fs::directory_iterator(transforms)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path());
    std::string line;
    while (std::getline(in, line))
      if (std::regex_search(line, upward))
        found.push_back(fs::relative(entry.path(), SPMD_SOURCE_DIR).string() + ": " + line);
    ++scanned;
  }
  EXPECT_GE(scanned, 5);
  EXPECT_TRUE(found.empty()) << "interpreters including a higher-order primitive:" << report(found);
}

TEST(Layering, ValueHeadersIncludeOnlyValueHeaders) {
  const fs::path include = fs::path(SPMD_SOURCE_DIR) / "include";
  std::vector<std::string> found;
  for (const std::string& header : kValueHeaders) {
    EXPECT_TRUE(fs::exists(include / header)) << header;
    check(include / header, kValues, found);
  }
  EXPECT_TRUE(found.empty()) << "value headers including a layer above:" << report(found);
}

}  // namespace

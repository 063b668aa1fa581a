// Each primitive has one home: its family file names it, holds its rules, and at most one other
// file outside the op layer and the kernels names it (typically the interpreter or pass that
// introduces it). The interpreters name no primitive at all.
#include "prims/primitive.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace spmd {
namespace {

namespace fs = std::filesystem;

struct SourceFile {
  std::string path;  // relative to the source root, e.g. "src/prims/shape.cpp"
  std::string text;
};

// The sources outside src/ops (op bodies bind primitives by name), src/backends (kernels) and
// src/runtime (the communicator names the collective operations it performs in its errors and
// fault points: the collectives' kernel layer).
std::vector<SourceFile> layer_sources() {
  const fs::path root = SPMD_SOURCE_DIR;
  std::vector<SourceFile> files;
  for (const auto& entry : fs::recursive_directory_iterator(root / "src")) {
    const fs::path& p = entry.path();
    if (!entry.is_regular_file() || (p.extension() != ".cpp" && p.extension() != ".h")) continue;
    std::string rel = fs::relative(p, root).generic_string();
    if (rel.starts_with("src/ops/") || rel.starts_with("src/backends/") ||
        rel.starts_with("src/runtime/"))
      continue;
    std::ifstream in(p);
    std::stringstream text;
    text << in.rdbuf();
    files.push_back({rel, text.str()});
  }
  return files;
}

std::map<std::string, std::vector<std::string>> files_naming_each_primitive() {
  std::vector<SourceFile> files = layer_sources();
  std::map<std::string, std::vector<std::string>> naming;
  for (const std::string& name : primitive_registry().names()) {
    const std::string literal = "\"" + name + "\"";
    for (const SourceFile& f : files)
      if (f.text.find(literal) != std::string::npos) naming[name].push_back(f.path);
  }
  return naming;
}

std::string joined(const std::vector<std::string>& xs) {
  std::string out;
  for (const std::string& x : xs) out += (out.empty() ? "" : ", ") + x;
  return out;
}

TEST(PrimitiveHome, NamedInItsFamilyFileAndAtMostOneOtherFile) {
  for (const auto& [name, files] : files_naming_each_primitive())
    EXPECT_LE(files.size(), 2u) << name << " is named in " << joined(files);
}

TEST(PrimitiveHome, InterpretersNameNoPrimitive) {
  const std::vector<std::string> interpreters = {
      "src/transforms/autodiff.cpp", "src/transforms/vmap.cpp", "src/transforms/staging.cpp"};
  for (const auto& [name, files] : files_naming_each_primitive())
    for (const std::string& f : files)
      EXPECT_TRUE(std::find(interpreters.begin(), interpreters.end(), f) == interpreters.end())
          << f << " names the primitive " << name;
}

}  // namespace
}  // namespace spmd

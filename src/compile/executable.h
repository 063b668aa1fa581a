// An Executable: a Program prepared to run repeatedly on concrete arrays. Equations run in
// order; each value is released right after its last use, so its buffer is reused by later
// equations (the buffer cache hands freed blocks back out). A donated argument's buffer is
// written over in place by an elementwise result once the argument is dead.
#pragma once

#include "ir/program.h"

#include <memory>
#include <span>
#include <vector>

namespace spmd {

struct RunScratch;

class Executable {
 public:
  // Optimises `program` (passes.h), unless told not to, and plans its execution.
  explicit Executable(const Program& program, bool optimize = true);
  std::vector<Array> run(std::span<const Array> args) const;
  // As run(args), where `donated[i]` says argument i's buffer may take the result of an
  // elementwise equation of its size after the argument's last use, when no other Array holds
  // that buffer. The caller gives up the donated arrays (jit's donate_argnums).
  std::vector<Array> run(std::vector<Array> args, const std::vector<bool>& donated) const;
  const Program& program() const { return program_; }

 private:
  std::vector<Array> execute(RunScratch& scratch) const;

  Program program_;
  std::vector<std::vector<int>> release_after_;  // per equation: variables last used there
};

}  // namespace spmd

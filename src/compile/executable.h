// An Executable: a Program prepared to run repeatedly on concrete arrays. Equations run in
// order; each value is released right after its last use, so its buffer is reused by later
// equations (the buffer cache hands freed blocks back out). The buffer of a donated argument or
// of a result the run allocated is written over in place by an elementwise result once its
// value is dead, and a donated argument's buffer backs the result it is paired with
// (compile/donation.h) when that result is computed after the buffer's last use. Equations that
// only give their operand another type (pvary) are not run: their readers read the operand.
#pragma once

#include "ir/program.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace spmd {

struct RunScratch;

// Whether this thread is running a program's equations (Executable::run, a device's body) or
// folding a program's constants (constant_folding): an op bound there computes one of the
// program's values, which an eager op's placement on the mesh in context leaves where it is.
bool inside_program();

// Marks the thread as inside a program while it lives.
class ProgramScope {
 public:
  ProgramScope();
  ~ProgramScope();
  ProgramScope(const ProgramScope&) = delete;
  ProgramScope& operator=(const ProgramScope&) = delete;
};

class Executable {
 public:
  // Optimises `program` (passes.h), unless told not to, and plans its execution. `axes`: the
  // sizes of the mesh axes a per-device program runs over, by name (none off a mesh).
  explicit Executable(const Program& program, bool optimize = true,
                      const std::vector<std::pair<std::string, int64_t>>& axes = {});
  std::vector<Array> run(std::span<const Array> args) const;
  // As run(args), where `donated[i]` says argument i's buffer may take the result of an
  // elementwise equation of its size after the argument's last use, when no other Array holds
  // that buffer; the result donation_aliases pairs with the argument takes the buffer when its
  // equation (any but a collective that gives one buffer to every device) runs after that last
  // use, or is the argument itself. The caller gives up the donated arrays (jit's
  // donate_argnums).
  std::vector<Array> run(std::vector<Array> args, const std::vector<bool>& donated) const;
  const Program& program() const { return program_; }

 private:
  std::vector<Array> execute(RunScratch& scratch) const;
  // The program the runs execute: program_, or retyped_ when equations that only retype their
  // operand were left out of it (executable.cpp, without_retypes).
  const Program& runs() const { return retyped_ ? *retyped_ : program_; }

  Program program_;
  std::optional<Program> retyped_;
  std::vector<std::vector<int>> release_after_;  // per equation: variables last used there
};

// The equation profile: for every Executable run in the process while it is on, per primitive and
// result types, how many equations ran and the CPU and wall time they took on the thread that
// ran them (a kernel's helper threads are not counted). It finds where a step's time goes: the
// difference between wall and CPU is time spent waiting, for a peer in a collective or for a
// core. Off unless set_equation_profiling(true) or the environment variable
// SPMD_PROFILE_EQUATIONS=1, which also prints the table to stderr at exit.
struct EquationProfileEntry {
  std::string equation;  // the primitive and its result types: "dot_general f32[128,1024]"
  int64_t count = 0;
  double cpu_seconds = 0;
  double wall_seconds = 0;
};
void set_equation_profiling(bool on);
// The entries recorded so far, the most CPU first.
std::vector<EquationProfileEntry> equation_profile();
void clear_equation_profile();

}  // namespace spmd

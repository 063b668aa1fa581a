// Staging: running a function on traced values to record a Program, and evaluating a Program
// in the current context (eagerly, or recorded into the current trace: inlining).
#pragma once

#include <spmd/array.h>
#include <spmd/sharding.h>

#include "core/trace.h"
#include "ir/program.h"

#include <functional>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace spmd {

// The type-erased function every transformation works on: flat leaves in, flat leaves out.
using FlatFn = std::function<std::vector<Array>(std::span<const Array>)>;

// Records every primitive bound while it is the innermost trace into a Program. Values of other
// traces and concrete arrays used by recorded equations are lifted: concrete 0-d values become
// literals, everything else a constant of the Program (closure conversion).
class StagingTrace : public Trace {
 public:
  explicit StagingTrace(const char* transformation) : transformation_(transformation) {}

  Array new_input(const AbstractValue& type);
  // An input standing for `argument`, whose type alone is traced: a concrete array (make_jaxpr's
  // arguments) or a value of an enclosing trace that stands for one (the operands of a jit or
  // vmap traced inside make_jaxpr); argument_of gives it back while the trace lives.
  Array new_input(const AbstractValue& type, const Array& argument);
  // The array the input x of this trace stands for; null for other values.
  const Array* argument_of(const Array& x) const;
  std::vector<Array> process_primitive(const Primitive& p, std::span<const Array> inputs,
                                       const Params& params) override;
  const char* transformation_name() const override { return transformation_; }
  // Completes the Program with `outputs` and finishes the trace.
  Program finish(std::span<const Array> outputs);
  // Whether x is a value of this trace.
  bool owns(const Array& x) const { return x.impl() && x.impl()->trace.get() == this; }
  // How many equations are recorded so far.
  size_t num_equations() const { return program_.equations.size(); }
  // Whether a recorded equation used a value of another trace (a closure over traced values).
  bool captured_traced_values() const;
  // Lifts concrete 0-d values as constants too, not as literals, except scalars made from C++
  // numbers (ArrayImpl::scalar_literal).
  void keep_scalars_as_constants() { scalars_as_constants_ = true; }

 private:
  Atom lift(const Array& x);
  Array tracer(int var);

  const char* transformation_;
  bool scalars_as_constants_ = false;
  Program program_;
  std::unordered_map<const ArrayImpl*, int> lifted_;
  std::unordered_map<int, Array> arguments_;  // by input variable
};

// The array a traced input stands for (a value of a staging trace made by
// new_input(type, argument)); null for every other value.
const Array* traced_argument(const Array& x);

// The mesh of a concrete array committed over one, or of the array a traced input stands for,
// through every trace between (JAX's abstract mesh of its type, which on Auto axes only the
// array's placement gives). None for other values.
std::optional<Mesh> committed_mesh_of(const Array& x);

// What the inputs of a trace of a call on `operands` (a jit's, vmap's one example) stand for:
// the operands when one of them stands for an argument of make_jaxpr (the inputs then carry
// its mesh), none otherwise.
std::span<const Array> stand_ins(std::span<const Array> operands);

// Traces fn on inputs of the given types with a new trace made current; the Program's consts
// hold the concrete arrays and outer-trace values fn closed over. Given `arguments` (one per
// input), the inputs stand for them (traced_argument).
Program trace_to_program(const FlatFn& fn, std::span<const AbstractValue> in_types,
                         const char* transformation, std::span<const Array> arguments = {});

// The Program with its constants turned into leading inputs, as the sub-program of a call or a
// control-flow primitive takes them; the constants go to *consts.
Program hoist_consts(const Program& p, std::vector<Array>* consts);

// Binds the Program's equations in order on `args` (its consts come from the Program): eager
// when everything is concrete, otherwise recorded into the innermost trace.
std::vector<Array> eval_program(const Program& program, std::span<const Array> args);

// Whether the arrays can be computed now: all concrete and no trace current (inside a trace
// even operations on constants are staged).
bool all_concrete(std::span<const Array> xs);

}  // namespace spmd

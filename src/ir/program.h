// Program: spmd's IR, JAX's (closed) jaxpr. Typed variables, constants, equations
// `outs = primitive[params] ins` in order, and outputs. Sub-programs (jit calls, control flow)
// are Programs held in params. Programs are values: transformations build new ones.
#pragma once

#include <spmd/array.h>

#include "core/array_impl.h"
#include "ir/params.h"

#include <memory>
#include <string>
#include <vector>

namespace spmd {

struct Primitive;

// An equation operand: a variable or a literal (a concrete 0-d value printed inline).
struct Atom {
  int var = -1;   // variable id, or -1 for a literal
  Array literal;  // the value when var < 0
  bool is_literal() const { return var < 0; }
  static Atom of_var(int v) { return Atom{v, {}}; }
  static Atom of_literal(Array value) { return Atom{-1, std::move(value)}; }
};

struct Equation {
  const Primitive* primitive = nullptr;
  Params params;
  std::vector<Atom> inputs;
  std::vector<int> outputs;  // variable ids
};

struct Program {
  std::vector<AbstractValue> types;  // indexed by variable id
  std::vector<int> constvars;        // bound to `consts`, in order
  std::vector<Array> consts;         // concrete arrays, or values of an enclosing trace
  std::vector<int> invars;
  std::vector<Equation> equations;
  std::vector<Atom> outputs;

  int new_var(AbstractValue type) {
    types.push_back(std::move(type));
    return int(types.size()) - 1;
  }
  const AbstractValue& type_of(const Atom& a) const;
  std::vector<AbstractValue> in_types() const;
  std::vector<AbstractValue> out_types() const;

  // JAX's jaxpr text: `{ lambda a:f32[3]; b:f32[2,3]. let ... in (c,) }`.
  std::string str() const;
  // Checks types against the primitives' shape rules and that every variable is defined once
  // before use; throws std::logic_error describing the first fault.
  void verify() const;
};

using ProgramRef = std::shared_ptr<const Program>;

}  // namespace spmd

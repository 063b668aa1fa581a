// Program: spmd's IR, JAX's (closed) jaxpr. Typed variables, constants, equations
// `outs = primitive[params] ins` in order, and outputs. Sub-programs (jit calls, control flow)
// are Programs held in params. Programs are values: transformations build new ones.
#pragma once

#include <spmd/array.h>

#include "core/array_impl.h"
#include "ir/params.h"

#include <atomic>
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

// A hash computed once. A copy starts without it: copies are made to be changed.
class HashMemo {
 public:
  HashMemo() = default;
  HashMemo(const HashMemo&) {}
  HashMemo& operator=(const HashMemo&) {
    value_.store(0, std::memory_order_relaxed);
    return *this;
  }
  size_t get() const { return value_.load(std::memory_order_relaxed); }  // 0: not yet
  void set(size_t h) const { value_.store(h, std::memory_order_relaxed); }

 private:
  mutable std::atomic<size_t> value_{0};
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
  // Per variable, whether an equation or the outputs read it.
  std::vector<bool> read_vars() const;

  // JAX's jaxpr text: `{ lambda a:f32[3]; b:f32[2,3]. let ... in (c,) }`.
  std::string str() const;
  // Checks types against the primitives' shape rules and that every variable is defined once
  // before use; throws std::logic_error describing the first fault.
  void verify() const;

  // Structural equality and hash, as caches of compiled programs key on them: the same types,
  // equations (primitive, params by content, operands) and outputs, with constants of the same
  // type and value and literals of the same value. The hash is computed once per Program, so a
  // Program must not change after it is first hashed (ProgramRefs are const).
  bool operator==(const Program& other) const;
  size_t hash() const;

  HashMemo hash_memo;
};

using ProgramRef = std::shared_ptr<const Program>;

// How Programs compare constants and literals: the same array, or concrete arrays of the same type
// and bytes (a traced value is equal only to itself).
bool same_array(const Array& a, const Array& b);

}  // namespace spmd

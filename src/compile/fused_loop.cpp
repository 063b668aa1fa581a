// The generator of fused float32 loops (fused_loop.h), with xbyak. One pass of the loop handles
// eight elements in AVX registers: full-shape inputs are loaded when first read, each equation is
// one instruction (or a short sequence for max and min), outputs are stored when computed. 0-d
// inputs and literals are broadcast into registers before the loop. The last n % 8 elements run
// the same code with masked loads and stores.
#include "compile/fused_loop.h"

#include "prims/primitive.h"

#include <xbyak/xbyak.h>
#include <xbyak/xbyak_util.h>

#include <array>
#include <cstring>
#include <optional>
#include <variant>
#include <vector>

namespace spmd {
namespace {

enum class Op : uint8_t { add, sub, mul, div, mul_by_reciprocal, max, min, neg, abs };

std::optional<Op> op_of(const std::string& name) {
  if (name == "add" || name == "add_any") return Op::add;
  if (name == "sub") return Op::sub;
  if (name == "mul") return Op::mul;
  if (name == "div") return Op::div;
  if (name == "max") return Op::max;
  if (name == "min") return Op::min;
  if (name == "neg") return Op::neg;
  if (name == "abs") return Op::abs;
  return std::nullopt;
}

// Registers: ymm0–ymm11 hold values, ymm12–ymm14 are scratch, ymm15 is the tail's lane mask.
constexpr int kValueRegisters = 12;

// Lane masks for the last n % 8 elements: row k enables the first k lanes.
alignas(32) constexpr int32_t kTailMasks[8][8] = {
    {0, 0, 0, 0, 0, 0, 0, 0},       {-1, 0, 0, 0, 0, 0, 0, 0},      {-1, -1, 0, 0, 0, 0, 0, 0},
    {-1, -1, -1, 0, 0, 0, 0, 0},    {-1, -1, -1, -1, 0, 0, 0, 0},   {-1, -1, -1, -1, -1, 0, 0, 0},
    {-1, -1, -1, -1, -1, -1, 0, 0}, {-1, -1, -1, -1, -1, -1, -1, 0}};
constexpr uint32_t kSignBit = 0x80000000u, kMagnitude = 0x7fffffffu;
constexpr float kOne = 1.0f;

// What one pass of the loop does, with registers assigned.
struct Load {
  int input;  // body input index
  int reg;
};
struct Instr {
  Op op;
  int dst, a, b;  // registers (b < 0: unary)
};
struct Store {
  int output;
  int reg;
};
using Action = std::variant<Load, Instr, Store>;

struct Schedule {
  // Before the loop: 0-d inputs and literals broadcast into registers, reciprocals of 0-d
  // divisors computed.
  std::vector<std::pair<int, int>> scalar_inputs;      // (input, reg)
  std::vector<std::pair<const float*, int>> literals;  // (address, reg)
  std::vector<std::pair<int, int>> reciprocals;        // (divisor reg, reg)
  std::vector<Action> pass;
};

// Assigns registers for one pass over `body`; nullopt when something is not supported.
std::optional<Schedule> schedule(const Program& body, const Shape& shape,
                                 std::vector<float>& literal_values) {
  const size_t n = body.equations.size();
  std::vector<int> input_of(body.types.size(), -1), output_of(body.types.size(), -1);
  for (size_t i = 0; i < body.invars.size(); ++i) input_of[size_t(body.invars[i])] = int(i);
  for (size_t k = 0; k < body.outputs.size(); ++k) {
    if (body.outputs[k].is_literal() || output_of[size_t(body.outputs[k].var)] >= 0)
      return std::nullopt;
    output_of[size_t(body.outputs[k].var)] = int(k);
  }
  for (const AbstractValue& t : body.types)
    if (t.dtype != DType::float32 || !(t.shape.ndim() == 0 || t.shape == shape))
      return std::nullopt;
  std::vector<int> last_use(body.types.size(), -1);
  size_t literal_count = 0;
  for (size_t s = 0; s < n; ++s) {
    const Equation& e = body.equations[s];
    std::optional<Op> op = op_of(e.primitive->name);
    const bool unary = op == Op::neg || op == Op::abs;
    if (!op || e.outputs.size() != 1 || e.inputs.size() != (unary ? 1u : 2u)) return std::nullopt;
    for (const Atom& a : e.inputs) {
      if (a.is_literal()) {
        if (a.literal.dtype() != DType::float32 || a.literal.ndim() != 0) return std::nullopt;
        ++literal_count;
      } else {
        last_use[size_t(a.var)] = int(s);
      }
    }
  }
  literal_values.reserve(literal_count);  // addresses stay put from here on

  Schedule out;
  std::array<bool, kValueRegisters> busy{};
  auto take = [&]() -> int {
    for (int r = 0; r < kValueRegisters; ++r)
      if (!busy[size_t(r)]) {
        busy[size_t(r)] = true;
        return r;
      }
    return -1;
  };
  std::vector<int> reg_of(body.types.size(), -1);
  // Scalars live in registers for the whole loop.
  for (size_t i = 0; i < body.invars.size(); ++i) {
    const int v = body.invars[i];
    if (body.types[size_t(v)].shape.ndim() != 0 || last_use[size_t(v)] < 0) continue;
    if ((reg_of[size_t(v)] = take()) < 0) return std::nullopt;
    out.scalar_inputs.push_back({int(i), reg_of[size_t(v)]});
  }
  // Per equation: the register of each operand (literals too), and of a 0-d divisor's
  // reciprocal.
  std::vector<std::array<int, 2>> operand_regs(n, {-1, -1});
  for (size_t s = 0; s < n; ++s) {
    const Equation& e = body.equations[s];
    for (size_t k = 0; k < e.inputs.size(); ++k) {
      const Atom& a = e.inputs[k];
      if (!a.is_literal()) continue;
      literal_values.push_back(a.literal.item<float>());
      const int r = take();
      if (r < 0) return std::nullopt;
      out.literals.push_back({&literal_values.back(), r});
      operand_regs[s][k] = r;
    }
  }
  for (size_t s = 0; s < n; ++s) {
    const Equation& e = body.equations[s];
    if (e.primitive->name != "div" || body.type_of(e.inputs[1]).shape.ndim() != 0) continue;
    const int divisor =
        e.inputs[1].is_literal() ? operand_regs[s][1] : reg_of[size_t(e.inputs[1].var)];
    const int r = take();
    if (r < 0) return std::nullopt;
    out.reciprocals.push_back({divisor, r});
    operand_regs[s][1] = r;
  }

  for (size_t s = 0; s < n; ++s) {
    const Equation& e = body.equations[s];
    Op op = *op_of(e.primitive->name);
    if (op == Op::div && body.type_of(e.inputs[1]).shape.ndim() == 0) op = Op::mul_by_reciprocal;
    std::array<int, 2> regs = operand_regs[s];
    for (size_t k = 0; k < e.inputs.size(); ++k) {
      if (regs[k] >= 0) continue;  // a literal or a reciprocal
      const int v = e.inputs[k].var;
      if (reg_of[size_t(v)] < 0) {  // a full-shape input, first read in this pass
        if ((reg_of[size_t(v)] = take()) < 0) return std::nullopt;
        out.pass.push_back(Load{input_of[size_t(v)], reg_of[size_t(v)]});
      }
      regs[k] = reg_of[size_t(v)];
    }
    // Operands read for the last time free their registers; the result may take one (an
    // instruction reads its operands before it writes).
    for (const Atom& a : e.inputs)
      if (!a.is_literal() && last_use[size_t(a.var)] == int(s) &&
          body.types[size_t(a.var)].shape.ndim() != 0)
        busy[size_t(reg_of[size_t(a.var)])] = false;
    const int v = e.outputs[0];
    if ((reg_of[size_t(v)] = take()) < 0) return std::nullopt;
    out.pass.push_back(Instr{op, reg_of[size_t(v)], regs[0], e.inputs.size() > 1 ? regs[1] : -1});
    if (output_of[size_t(v)] >= 0)
      out.pass.push_back(Store{output_of[size_t(v)], reg_of[size_t(v)]});
    if (last_use[size_t(v)] < 0) busy[size_t(reg_of[size_t(v)])] = false;
  }
  return out;
}

using Fn = void (*)(int64_t n, const float* const* ins, float* const* outs);

class Generator : public Xbyak::CodeGenerator {
 public:
  explicit Generator(const Schedule& s) : Xbyak::CodeGenerator(32 * 1024) {
    using namespace Xbyak;
    // rdi = n, rsi = ins, rdx = outs; rcx = element index, r9 = n rounded down to 8.
    for (auto [input, reg] : s.scalar_inputs) {
      mov(rax, ptr[rsi + 8 * input]);
      vbroadcastss(Ymm(reg), ptr[rax]);
    }
    for (auto [address, reg] : s.literals) {
      mov(rax, reinterpret_cast<uint64_t>(address));
      vbroadcastss(Ymm(reg), ptr[rax]);
    }
    for (auto [divisor, reg] : s.reciprocals) {
      mov(rax, reinterpret_cast<uint64_t>(&kOne));
      vbroadcastss(ymm12, ptr[rax]);
      vdivps(Ymm(reg), ymm12, Ymm(divisor));
    }
    mov(r9, rdi);
    and_(r9, -8);
    xor_(rcx, rcx);
    Label loop, tail, done;
    L(loop);
    cmp(rcx, r9);
    jge(tail, T_NEAR);
    pass(s, false);
    add(rcx, 8);
    jmp(loop, T_NEAR);
    L(tail);
    cmp(rcx, rdi);
    jge(done, T_NEAR);
    mov(r8, rdi);
    sub(r8, rcx);
    shl(r8, 5);
    mov(rax, reinterpret_cast<uint64_t>(&kTailMasks[0][0]));
    vmovdqu(ymm15, ptr[rax + r8]);
    pass(s, true);
    L(done);
    vzeroupper();
    ret();
  }

 private:
  void pass(const Schedule& s, bool masked) {
    using namespace Xbyak;
    for (const Action& action : s.pass) {
      if (const Load* load = std::get_if<Load>(&action)) {
        mov(rax, ptr[rsi + 8 * load->input]);
        if (masked)
          vmaskmovps(Ymm(load->reg), ymm15, ptr[rax + rcx * 4]);
        else
          vmovups(Ymm(load->reg), ptr[rax + rcx * 4]);
      } else if (const Store* store = std::get_if<Store>(&action)) {
        mov(rax, ptr[rdx + 8 * store->output]);
        if (masked)
          vmaskmovps(ptr[rax + rcx * 4], ymm15, Ymm(store->reg));
        else
          vmovups(ptr[rax + rcx * 4], Ymm(store->reg));
      } else {
        instruction(std::get<Instr>(action));
      }
    }
  }

  void instruction(const Instr& in) {
    using namespace Xbyak;
    const Ymm d(in.dst), a(in.a);
    switch (in.op) {
      case Op::add:
        return vaddps(d, a, Ymm(in.b));
      case Op::sub:
        return vsubps(d, a, Ymm(in.b));
      case Op::mul:
      case Op::mul_by_reciprocal:
        return vmulps(d, a, Ymm(in.b));
      case Op::div:
        return vdivps(d, a, Ymm(in.b));
      case Op::neg:
      case Op::abs:
        mov(rax, reinterpret_cast<uint64_t>(in.op == Op::neg ? &kSignBit : &kMagnitude));
        vbroadcastss(ymm12, ptr[rax]);
        return in.op == Op::neg ? vxorps(d, a, ymm12) : vandps(d, a, ymm12);
      case Op::max:
      case Op::min: {
        // As the scalar kernel: NaN in either gives a + b; equal values (±0 and, with
        // denormals read as zero, denormals among them) give b for max and a for min where a's
        // sign bit is set, else a for max and b for min; otherwise the larger / smaller.
        const Ymm b(in.b);
        if (in.op == Op::max) {
          vmaxps(ymm12, a, b);
          vblendvps(ymm14, a, b, a);  // sign of a ? b : a
        } else {
          vminps(ymm12, a, b);
          vblendvps(ymm14, b, a, a);  // sign of a ? a : b
        }
        vcmpps(ymm13, a, b, 0);  // equal, ordered
        vblendvps(ymm12, ymm12, ymm14, ymm13);
        vcmpps(ymm13, a, b, 3);  // unordered
        vaddps(ymm14, a, b);
        return vblendvps(d, ymm12, ymm14, ymm13);
      }
    }
  }
};

bool has_avx() {
  static const bool avx = Xbyak::util::Cpu().has(Xbyak::util::Cpu::tAVX);
  return avx;
}

}  // namespace

struct FusedLoop::Code {
  std::vector<float> literals;
  std::unique_ptr<Generator> generator;
  Fn fn = nullptr;
};

FusedLoop::FusedLoop(std::unique_ptr<Code> code) : code_(std::move(code)) {}
FusedLoop::~FusedLoop() = default;

std::unique_ptr<FusedLoop> FusedLoop::compile(const Program& body, const Shape& shape) {
  if (!has_avx()) return nullptr;
  auto code = std::make_unique<Code>();
  std::optional<Schedule> s = schedule(body, shape, code->literals);
  if (!s) return nullptr;
  try {
    code->generator = std::make_unique<Generator>(*s);
  } catch (const Xbyak::Error&) {
    return nullptr;  // a chain too long for the code buffer keeps the tiles
  }
  code->fn = code->generator->getCode<Fn>();
  return std::unique_ptr<FusedLoop>(new FusedLoop(std::move(code)));
}

void FusedLoop::run(int64_t n, const float* const* ins, float* const* outs) const {
  code_->fn(n, ins, outs);
}

}  // namespace spmd

// The generator of fused float32 loops (fused_loop.h), with xbyak. One pass of the loop handles
// eight elements in AVX registers: full-shape inputs are loaded when first read, each equation is
// one instruction (or a short sequence for max and min), outputs are stored when computed. 0-d
// inputs and literals are broadcast into registers before the loop. The last n % 8 elements run
// the same code with masked loads and stores.
#include "compile/fused_loop.h"

#include "prims/primitive.h"

#include <xbyak/xbyak.h>
#include <xbyak/xbyak_util.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <variant>
#include <vector>

namespace spmd {
namespace {

// The operations of a generated loop. Comparisons take float32 operands and give a bool; select
// takes a bool selector and float32 cases; the rest are float32 throughout.
enum class Op : uint8_t {
  // clang-format off
  add, sub, mul, div, mul_by_reciprocal, max, min, neg, abs,
  sqrt, rsqrt, square, integer_pow, copy,
  eq, ne, lt, le, gt, ge,
  select,
  // clang-format on
};

std::optional<Op> op_of(ScalarOp op) {
  switch (op) {
    case ScalarOp::none:
      return std::nullopt;
    case ScalarOp::add:
      return Op::add;
    case ScalarOp::sub:
      return Op::sub;
    case ScalarOp::mul:
      return Op::mul;
    case ScalarOp::div:
      return Op::div;
    case ScalarOp::max:
      return Op::max;
    case ScalarOp::min:
      return Op::min;
    case ScalarOp::neg:
      return Op::neg;
    case ScalarOp::abs:
      return Op::abs;
    case ScalarOp::sqrt:
      return Op::sqrt;
    case ScalarOp::rsqrt:
      return Op::rsqrt;
    case ScalarOp::square:
      return Op::square;
    case ScalarOp::integer_pow:
      return Op::integer_pow;
    case ScalarOp::copy:
      return Op::copy;
    case ScalarOp::eq:
      return Op::eq;
    case ScalarOp::ne:
      return Op::ne;
    case ScalarOp::lt:
      return Op::lt;
    case ScalarOp::le:
      return Op::le;
    case ScalarOp::gt:
      return Op::gt;
    case ScalarOp::ge:
      return Op::ge;
    case ScalarOp::select:
      return Op::select;
  }
  return std::nullopt;
}

bool is_comparison(Op op) {
  return op >= Op::eq && op <= Op::ge;
}
int arity(Op op) {
  switch (op) {
    case Op::neg:
    case Op::abs:
    case Op::sqrt:
    case Op::rsqrt:
    case Op::square:
    case Op::integer_pow:
    case Op::copy:
      return 1;
    case Op::select:
      return 3;
    default:
      return 2;
  }
}

// Registers: ymm0–ymm12 hold values (a bool value as a lane mask: all ones or zero), ymm13–ymm15
// are scratch.
constexpr int kValueRegisters = 13;
constexpr size_t kMaxOperands = 16;  // inputs, and outputs, the loop takes

constexpr uint32_t kSignBit = 0x80000000u, kMagnitude = 0x7fffffffu;
constexpr float kOne = 1.0f;

// What one pass of the loop does, with registers assigned.
struct Load {
  int input;  // body input index
  int reg;
  bool boolean;
};
struct Instr {
  Op op;
  int dst;
  std::array<int, 3> src;  // registers, arity(op) of them
  int64_t exponent = 0;    // integer_pow's y
};
struct Store {
  int output;
  int reg;
  bool boolean;
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

// Whether equation `e` of `body` has the types the generator takes for its op.
bool types_fit(const Program& body, const Equation& e, Op op) {
  auto type = [&](const Atom& a) -> const AbstractValue& { return body.type_of(a); };
  const AbstractValue& out = body.types[size_t(e.outputs[0])];
  const DType f32 = DType::float32, b8 = DType::bool_;
  if (op == Op::select) {
    return type(e.inputs[0]).dtype == b8 && type(e.inputs[0]).shape.ndim() != 0 &&
           type(e.inputs[1]).dtype == f32 && type(e.inputs[2]).dtype == f32 && out.dtype == f32;
  }
  for (const Atom& a : e.inputs)
    if (type(a).dtype != f32) return false;
  return out.dtype == (is_comparison(op) ? b8 : f32);
}

// Assigns registers for one pass over `body`; nullopt when something is not supported.
std::optional<Schedule> schedule(const Program& body, const Shape& shape,
                                 std::vector<float>& literal_values) {
  const size_t n = body.equations.size();
  if (body.invars.size() > kMaxOperands || body.outputs.size() > kMaxOperands) return std::nullopt;
  std::vector<int> input_of(body.types.size(), -1), output_of(body.types.size(), -1);
  for (size_t i = 0; i < body.invars.size(); ++i) input_of[size_t(body.invars[i])] = int(i);
  for (size_t k = 0; k < body.outputs.size(); ++k) {
    if (body.outputs[k].is_literal() || output_of[size_t(body.outputs[k].var)] >= 0)
      return std::nullopt;
    output_of[size_t(body.outputs[k].var)] = int(k);
  }
  // float32 of the shape or 0-d; bool of the shape.
  for (const AbstractValue& t : body.types)
    if (!(t.dtype == DType::float32 && (t.shape.ndim() == 0 || t.shape == shape)) &&
        !(t.dtype == DType::bool_ && t.shape == shape))
      return std::nullopt;
  std::vector<int> last_use(body.types.size(), -1);
  size_t literal_count = 0;
  for (size_t s = 0; s < n; ++s) {
    const Equation& e = body.equations[s];
    std::optional<Op> op = op_of(e.primitive->scalar_op);
    if (!op || e.outputs.size() != 1 || e.inputs.size() != size_t(arity(*op)) ||
        !types_fit(body, e, *op))
      return std::nullopt;
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
  // Per equation: the register of each literal operand, and of a 0-d divisor's reciprocal. A
  // value (the same bits) or a divisor met again reuses its register: chains fused side by side
  // (the optimizer's update of several parameters) repeat the same constants.
  std::vector<std::array<int, 3>> operand_regs(n, {-1, -1, -1});
  for (size_t s = 0; s < n; ++s) {
    const Equation& e = body.equations[s];
    for (size_t k = 0; k < e.inputs.size(); ++k) {
      const Atom& a = e.inputs[k];
      if (!a.is_literal()) continue;
      const float value = a.literal.item<float>();
      auto same = std::find_if(out.literals.begin(), out.literals.end(), [&](const auto& l) {
        return std::memcmp(l.first, &value, sizeof value) == 0;
      });
      if (same != out.literals.end()) {
        operand_regs[s][k] = same->second;
        continue;
      }
      literal_values.push_back(value);
      const int r = take();
      if (r < 0) return std::nullopt;
      out.literals.push_back({&literal_values.back(), r});
      operand_regs[s][k] = r;
    }
  }
  for (size_t s = 0; s < n; ++s) {
    const Equation& e = body.equations[s];
    if (e.primitive->scalar_op != ScalarOp::div || body.type_of(e.inputs[1]).shape.ndim() != 0)
      continue;
    const int divisor =
        e.inputs[1].is_literal() ? operand_regs[s][1] : reg_of[size_t(e.inputs[1].var)];
    auto same = std::find_if(out.reciprocals.begin(), out.reciprocals.end(),
                             [&](const auto& r) { return r.first == divisor; });
    if (same != out.reciprocals.end()) {
      operand_regs[s][1] = same->second;
      continue;
    }
    const int r = take();
    if (r < 0) return std::nullopt;
    out.reciprocals.push_back({divisor, r});
    operand_regs[s][1] = r;
  }

  // Values that hold one number for the whole loop: 0-d inputs, and copies of them (a broadcast
  // scalar's conversion) share their register instead of taking one per pass.
  std::vector<bool> invariant(body.types.size(), false);
  for (const auto& [input, reg] : out.scalar_inputs)
    invariant[size_t(body.invars[size_t(input)])] = true;
  for (size_t s = 0; s < n; ++s) {
    const Equation& e = body.equations[s];
    Op op = *op_of(e.primitive->scalar_op);
    const int v = e.outputs[0];
    if (op == Op::copy && !e.inputs[0].is_literal() && invariant[size_t(e.inputs[0].var)]) {
      invariant[size_t(v)] = true;
      reg_of[size_t(v)] = reg_of[size_t(e.inputs[0].var)];
      if (output_of[size_t(v)] >= 0)
        out.pass.push_back(Store{output_of[size_t(v)], reg_of[size_t(v)], false});
      continue;
    }
    if (op == Op::div && body.type_of(e.inputs[1]).shape.ndim() == 0) op = Op::mul_by_reciprocal;
    std::array<int, 3> regs = operand_regs[s];
    for (size_t k = 0; k < e.inputs.size(); ++k) {
      if (regs[k] >= 0) continue;  // a literal or a reciprocal
      const int v = e.inputs[k].var;
      if (reg_of[size_t(v)] < 0) {  // a full-shape input, first read in this pass
        if ((reg_of[size_t(v)] = take()) < 0) return std::nullopt;
        out.pass.push_back(Load{input_of[size_t(v)], reg_of[size_t(v)],
                                body.types[size_t(v)].dtype == DType::bool_});
      }
      regs[k] = reg_of[size_t(v)];
    }
    // Operands read for the last time free their registers; the result may take one (an
    // instruction reads its operands before it writes).
    for (const Atom& a : e.inputs)
      if (!a.is_literal() && last_use[size_t(a.var)] == int(s) && !invariant[size_t(a.var)])
        busy[size_t(reg_of[size_t(a.var)])] = false;
    if ((reg_of[size_t(v)] = take()) < 0) return std::nullopt;
    out.pass.push_back(
        Instr{op, reg_of[size_t(v)], regs, op == Op::integer_pow ? e.params.get_int("y") : 0});
    if (output_of[size_t(v)] >= 0)
      out.pass.push_back(Store{output_of[size_t(v)], reg_of[size_t(v)],
                               body.types[size_t(v)].dtype == DType::bool_});
    if (last_use[size_t(v)] < 0) busy[size_t(reg_of[size_t(v)])] = false;
  }
  return out;
}

using Fn = void (*)(int64_t n, const void* const* ins, void* const* outs);

// Predicates of vcmpps: ordered and quiet, except "not equal", which is true for NaN as the
// scalar a != b is.
uint8_t predicate(Op op) {
  switch (op) {
    case Op::eq:
      return 0x00;  // EQ_OQ
    case Op::ne:
      return 0x04;  // NEQ_UQ
    case Op::lt:
      return 0x11;  // LT_OQ
    case Op::le:
      return 0x12;  // LE_OQ
    case Op::gt:
      return 0x1e;  // GT_OQ
    default:
      return 0x1d;  // GE_OQ
  }
}

class Generator : public Xbyak::CodeGenerator {
 public:
  explicit Generator(const Schedule& s) : Xbyak::CodeGenerator(32 * 1024) {
    using namespace Xbyak;
    // rdi = n (a multiple of 8), rsi = ins, rdx = outs; rcx = element index.
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
      vbroadcastss(ymm13, ptr[rax]);
      vdivps(Ymm(reg), ymm13, Ymm(divisor));
    }
    xor_(rcx, rcx);
    Label loop, done;
    L(loop);
    cmp(rcx, rdi);
    jge(done, T_NEAR);
    for (const Action& action : s.pass) {
      if (const Load* load = std::get_if<Load>(&action)) {
        mov(rax, ptr[rsi + 8 * load->input]);
        const Ymm r(load->reg);
        if (load->boolean) {  // 8 bytes of 0 / 1 to lane masks
          vpmovzxbd(r, ptr[rax + rcx]);
          vpslld(r, r, 31);
          vpsrad(r, r, 31);
        } else {
          vmovups(r, ptr[rax + rcx * 4]);
        }
      } else if (const Store* store = std::get_if<Store>(&action)) {
        mov(rax, ptr[rdx + 8 * store->output]);
        if (store->boolean) {  // lane masks to 8 bytes of 0 / 1
          vextracti128(xmm13, Ymm(store->reg), 1);
          vpackssdw(xmm13, Xmm(store->reg), xmm13);
          vpacksswb(xmm13, xmm13, xmm13);
          vpabsb(xmm13, xmm13);
          vmovq(ptr[rax + rcx], xmm13);
        } else {
          vmovups(ptr[rax + rcx * 4], Ymm(store->reg));
        }
      } else {
        instruction(std::get<Instr>(action));
      }
    }
    add(rcx, 8);
    jmp(loop, T_NEAR);
    L(done);
    vzeroupper();
    ret();
  }

 private:
  void instruction(const Instr& in) {
    using namespace Xbyak;
    const Ymm d(in.dst), a(in.src[0]), b(in.src[1] >= 0 ? in.src[1] : 0);
    switch (in.op) {
      case Op::add:
        return vaddps(d, a, b);
      case Op::sub:
        return vsubps(d, a, b);
      case Op::mul:
      case Op::mul_by_reciprocal:
        return vmulps(d, a, b);
      case Op::div:
        return vdivps(d, a, b);
      case Op::neg:
      case Op::abs:
        mov(rax, reinterpret_cast<uint64_t>(in.op == Op::neg ? &kSignBit : &kMagnitude));
        vbroadcastss(ymm13, ptr[rax]);
        return in.op == Op::neg ? vxorps(d, a, ymm13) : vandps(d, a, ymm13);
      case Op::max:
      case Op::min:
        // As the scalar kernel: NaN in either gives a + b; equal values (±0 and, with
        // denormals read as zero, denormals among them) give b for max and a for min where a's
        // sign bit is set, else a for max and b for min; otherwise the larger / smaller.
        if (in.op == Op::max) {
          vmaxps(ymm13, a, b);
          vblendvps(ymm15, a, b, a);  // sign of a ? b : a
        } else {
          vminps(ymm13, a, b);
          vblendvps(ymm15, b, a, a);  // sign of a ? a : b
        }
        vcmpps(ymm14, a, b, 0);  // equal, ordered
        vblendvps(ymm13, ymm13, ymm15, ymm14);
        vcmpps(ymm14, a, b, 3);  // unordered
        vaddps(ymm15, a, b);
        return vblendvps(d, ymm13, ymm15, ymm14);
      case Op::select:  // select_n(which, case0, case1): which ? case1 : case0
        return vblendvps(d, b, Ymm(in.src[2]), a);
      case Op::sqrt:  // correctly rounded, as the kernel's
        return vsqrtps(d, a);
      case Op::rsqrt:  // 1 / sqrt(x), two roundings, as the kernel's
        vsqrtps(ymm13, a);
        mov(rax, reinterpret_cast<uint64_t>(&kOne));
        vbroadcastss(ymm14, ptr[rax]);
        return vdivps(d, ymm14, ymm13);
      case Op::square:
        return vmulps(d, a, a);
      case Op::copy:
        return vmovaps(d, a);
      case Op::integer_pow: {
        // The kernel's sequence: acc = 1, then for each bit of |y| from the lowest, acc *= base
        // where the bit is set and base *= base; 1 / acc for a negative y.
        mov(rax, reinterpret_cast<uint64_t>(&kOne));
        vbroadcastss(ymm15, ptr[rax]);
        vmovaps(ymm14, ymm15);
        vmovaps(ymm13, a);
        for (int64_t k = in.exponent < 0 ? -in.exponent : in.exponent; k; k >>= 1) {
          if (k & 1) vmulps(ymm14, ymm14, ymm13);
          vmulps(ymm13, ymm13, ymm13);
        }
        if (in.exponent < 0) return vdivps(d, ymm15, ymm14);
        return vmovaps(d, ymm14);
      }
      default:
        return vcmpps(d, a, b, predicate(in.op));
    }
  }
};

bool has_avx2() {
  static const bool avx2 = Xbyak::util::Cpu().has(Xbyak::util::Cpu::tAVX2);
  return avx2;
}

}  // namespace

struct FusedLoop::Code {
  std::vector<float> literals;
  std::unique_ptr<Generator> generator;
  Fn fn = nullptr;
  // Per input: bytes per element, or 0 for a 0-d input (the same address for every element);
  // per output: bytes per element.
  std::vector<int> in_bytes, out_bytes;
};

FusedLoop::FusedLoop(std::unique_ptr<Code> code) : code_(std::move(code)) {}
FusedLoop::~FusedLoop() = default;

std::unique_ptr<FusedLoop> FusedLoop::compile(const Program& body, const Shape& shape) {
  if (!has_avx2()) return nullptr;
  auto code = std::make_unique<Code>();
  std::optional<Schedule> s = schedule(body, shape, code->literals);
  if (!s) return nullptr;
  try {
    code->generator = std::make_unique<Generator>(*s);
  } catch (const Xbyak::Error&) {
    return nullptr;  // a chain too long for the code buffer keeps the tiles
  }
  code->fn = code->generator->getCode<Fn>();
  for (int v : body.invars) {
    const AbstractValue& t = body.types[size_t(v)];
    code->in_bytes.push_back(t.shape.ndim() == 0 ? 0 : int(itemsize(t.dtype)));
  }
  for (const Atom& a : body.outputs)
    code->out_bytes.push_back(int(itemsize(body.type_of(a).dtype)));
  return std::unique_ptr<FusedLoop>(new FusedLoop(std::move(code)));
}

void FusedLoop::run(int64_t n, const void* const* ins, void* const* outs) const {
  const Code& c = *code_;
  const int64_t whole = n / 8 * 8;
  if (whole > 0) c.fn(whole, ins, outs);
  const int64_t rest = n - whole;
  if (rest == 0) return;
  // The last n % 8 elements: one pass over copies padded with zeros.
  alignas(32) std::byte in_tail[kMaxOperands][32] = {}, out_tail[kMaxOperands][32];
  const void* tail_ins[kMaxOperands];
  void* tail_outs[kMaxOperands];
  for (size_t i = 0; i < c.in_bytes.size(); ++i) {
    const int bytes = c.in_bytes[i];
    if (bytes == 0) {
      tail_ins[i] = ins[i];
      continue;
    }
    std::memcpy(in_tail[i], static_cast<const std::byte*>(ins[i]) + whole * bytes,
                size_t(rest * bytes));
    tail_ins[i] = in_tail[i];
  }
  for (size_t k = 0; k < c.out_bytes.size(); ++k) tail_outs[k] = out_tail[k];
  c.fn(8, tail_ins, tail_outs);
  for (size_t k = 0; k < c.out_bytes.size(); ++k)
    std::memcpy(static_cast<std::byte*>(outs[k]) + whole * c.out_bytes[k], out_tail[k],
                size_t(rest * c.out_bytes[k]));
}

}  // namespace spmd

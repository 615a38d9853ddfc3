// Strength reduction of POW by a constant exponent: the powers real models raise to (x² in a
// variance, x³ in GELU's tanh form, √x, 1/x) become instructions with generated kernels, where
// POW itself runs the reference loop (ops/elementwise/binary.cpp says why). POW %x, @c with @c
// one value — a CONST all of whose values are c, or a FILL of c — and %x of the result's type
// (the exponent stretches nothing) becomes, keeping its output:
//   c = 2    SQUARE %x                  bitwise equal: glibc's powf(x, 2) is x·x (checked on every
//                                       7th float bit pattern)
//   c = −1   RECIPROCAL %x              bitwise equal: powf(x, −1) is 1/x (likewise)
//   c = 3    CALC "mul(square(%0),%0)"  two roundings where powf has one: within 1 ulp of it
//   c = 0.5  SQRT %x                    sqrt is correctly rounded and powf(x, 0.5) is not (1 ulp
//                                       apart on about 0.03% of floats); sqrt(−0) = −0 and
//                                       sqrt(−inf) = NaN where powf gives +0 and +inf. This is
//                                       PyTorch's own torch.pow(x, 0.5), which computes sqrt.
// Other exponents, and exponents that are not constants, stay POW.
#include <fmt/format.h>

#include "engine/passes/pass.h"
#include "engine/passes/uses.h"

namespace nnasm {

namespace {

// The one value of `id`, if it is a constant: a CONST whose values are all equal, or a FILL.
bool constant_value(const Program& p, const Uses& u, TensorId id, double* value) {
  const TensorDesc& d = p.desc(id);
  if (d.role == Role::CONST && !d.values.empty() && d.type.dtype == DType::F32) {
    for (double v : d.values)
      if (v != d.values[0]) return false;
    *value = d.values[0];
    return true;
  }
  const size_t k = u.producer(id);
  if (k == Uses::NONE || p.code()[k].op != Opcode::FILL) return false;
  *value = p.code()[k].f(NNASM_IMM(FILL, value));
  return true;
}

// The instruction computing POW(x, c) as `pow` does, writing pow's output; INVALID op when c is
// not one of the reduced exponents.
Instruction reduced(const Instruction& pow, double c) {
  const TensorId x = pow.in[0];
  Instruction r;
  if (c == 2) r = make_instruction(Opcode::SQUARE, {x}, pow.out);
  else if (c == 0.5) r = make_instruction(Opcode::SQRT, {x}, pow.out);
  else if (c == -1) r = make_instruction(Opcode::RECIPROCAL, {x}, pow.out);
  else if (c == 3) {
    r = make_instruction(Opcode::CALC, {x}, pow.out);
    (void)set_imm(r, "expr", imm_str("mul(square(%0),%0)"));
  }
  r.section = pow.section;
  r.loc = pow.loc;
  return r;
}

}  // namespace

Result<int> pass_pow_reduce(Program& p) {
  const Uses u(p);
  std::vector<Instruction> code = p.code();
  int n = 0;
  for (Instruction& ins : code) {
    double c;
    if (ins.op != Opcode::POW || !(p.desc(ins.in[0]).type == p.desc(ins.out[0]).type) ||
        !constant_value(p, u, ins.in[1], &c))
      continue;
    Instruction r = reduced(ins, c);
    if (r.op == Opcode::INVALID) continue;
    add_note(r, fmt::format("was {} by {}", describe(p, ins), float_to_string(c)));
    ins = std::move(r);
    ++n;
  }
  const std::vector<bool> keep_all(code.size(), false);
  return commit(p, std::move(code), keep_all, n);
}

}  // namespace nnasm

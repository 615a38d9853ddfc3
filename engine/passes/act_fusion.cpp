// Activation fusion: an activation whose input is made by an op with a fused-activation epilogue
// (an `act` immediate in its schema: MATMUL, LINEAR, CONV2D) that has none yet (act=none), and read by
// nobody else, becomes that instruction's act= epilogue, applied in the GEMM's store.
#include <fmt/format.h>

#include "engine/passes/pass.h"
#include "engine/passes/uses.h"
#include "isa/activation.h"

namespace nnasm {

namespace {

// The LINEAR act= and act_alpha equal to an activation instruction; false for other ops.
bool as_activation(const Instruction& ins, Activation* f, double* alpha) {
  *alpha = 0;
  switch (ins.op) {
    case Opcode::RELU: *f = Activation::RELU; return true;
    case Opcode::LEAKYRELU: *f = Activation::LEAKYRELU, *alpha = ins.f(0); return true;
    case Opcode::ELU: *f = Activation::ELU, *alpha = ins.f(0); return true;
    case Opcode::CLIPPED_RELU: *f = Activation::CLIPPED_RELU, *alpha = ins.f(0); return true;
    case Opcode::SIGMOID: *f = Activation::SIGMOID; return true;
    case Opcode::TANH: *f = Activation::TANH; return true;
    case Opcode::GELU: *f = ins.i(0) == 1 ? Activation::GELU_TANH : Activation::GELU; return true;
    case Opcode::SWISH: *f = Activation::SWISH, *alpha = ins.f(0); return true;
    default: return false;
  }
}

}  // namespace

Result<int> pass_act_fusion(Program& p) {
  const Uses u(p);
  std::vector<Instruction> code = p.code();
  std::vector<bool> drop(code.size(), false);
  int n = 0;
  for (size_t i = 0; i < code.size(); ++i) {
    Activation f;
    double alpha;
    if (!as_activation(code[i], &f, &alpha)) continue;
    const size_t k = u.producer(code[i].in[0]);
    if (k == Uses::NONE || drop[k]) continue;
    const int act = imm_index(code[k].info(), "act"), act_alpha = imm_index(code[k].info(), "act_alpha");
    if (act < 0 || act_alpha < 0 || code[k].i(act) != 0 || !u.private_to(code[i].in[0], i)) continue;
    Instruction lin = code[k];
    lin.imm[act].i = static_cast<int64_t>(f);
    lin.imm[act].ident = activation_name(f);
    lin.imm[act_alpha] = imm_f(alpha);
    lin.out = code[i].out;
    lin.section = code[i].section;
    add_note(lin, fmt::format("fused {} into the epilogue", describe(p, code[i])));
    // The fused instruction takes the activation's place: its output is defined there.
    code[i] = std::move(lin);
    drop[k] = true;
    ++n;
  }
  return commit(p, std::move(code), drop, n);
}

}  // namespace nnasm

// Activation fusion: an activation whose input is made by an op with a fused-activation epilogue
// (an `act` immediate in its schema: MATMUL, LINEAR, CONV2D) that has none yet (act=none), and read by
// nobody else, becomes that instruction's act= epilogue, applied in the GEMM's store.
#include <fmt/format.h>

#include "engine/passes/pass.h"
#include "engine/passes/uses.h"
#include "isa/activation.h"

namespace nnasm {

Result<int> pass_act_fusion(Program& p) {
  const Uses u(p);
  std::vector<Instruction> code = p.code();
  std::vector<bool> drop(code.size(), false);
  int n = 0;
  for (size_t i = 0; i < code.size(); ++i) {
    const Activation f = activation_of(code[i]);
    if (f == Activation::NONE) continue;
    const size_t k = u.producer(code[i].in[0]);
    if (k == Uses::NONE || drop[k]) continue;
    const FusedActImms at = fused_act_imms(code[k].op);
    if (at.act < 0 || fused_act(code[k]) != Activation::NONE || !u.private_to(code[i].in[0], i)) continue;
    Instruction lin = code[k];
    lin.imm[at.act].i = static_cast<int64_t>(f);
    lin.imm[at.act].ident = activation_name(f);
    lin.imm[at.alpha] = imm_f(activation_alpha(code[i], f));
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

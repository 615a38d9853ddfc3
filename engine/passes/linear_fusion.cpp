// MATMUL + ADD of a bias becomes LINEAR: y = ADD(MATMUL(x, W), b) with x of rank ≥ 2, W [in, out]
// (no transposes), b [out], both ADD coefficients 1, and the product read by nobody else, is
// LINEAR x, W, b -> y (whose GEMM adds the bias in its store).
#include <fmt/format.h>

#include "engine/passes/pass.h"
#include "engine/passes/uses.h"
#include "isa/activation.h"

namespace nnasm {

Result<int> pass_linear_fusion(Program& p) {
  const Uses u(p);
  std::vector<Instruction> code = p.code();
  std::vector<bool> drop(code.size(), false);
  int n = 0;
  for (size_t i = 0; i < code.size(); ++i) {
    Instruction& add = code[i];
    if (add.op != Opcode::ADD || add.f(NNASM_IMM(ADD, alpha)) != 1.0 || add.f(NNASM_IMM(ADD, beta)) != 1.0 || add.in[0] == add.in[1]) continue;
    for (int k = 0; k < 2; ++k) {
      const size_t m = u.producer(add.in[k]);
      if (m == Uses::NONE || drop[m] || code[m].op != Opcode::MATMUL || !u.private_to(add.in[k], i)) continue;
      const Instruction& mm = code[m];
      const Shape& x = p.desc(mm.in[0]).type.shape;
      const Shape& w = p.desc(mm.in[1]).type.shape;
      const Shape& b = p.desc(add.in[1 - k]).type.shape;
      // Untransposed, and no activation yet (it would apply before the bias).
      if (mm.i(NNASM_IMM(MATMUL, transA)) || mm.i(NNASM_IMM(MATMUL, transB)) || fused_act(mm) != Activation::NONE || x.rank < 2 || w.rank != 2 || b.rank != 1 || b[0] != w[1]) continue;
      Instruction lin = make_instruction(Opcode::LINEAR, {mm.in[0], mm.in[1], add.in[1 - k]}, add.out);
      lin.section = add.section;
      lin.loc = mm.loc;
      lin.note = mm.note;
      add_note(lin, fmt::format("fused {} and {}", describe(p, mm), describe(p, add)));
      add = std::move(lin);
      drop[m] = true;
      ++n;
      break;
    }
  }
  return commit(p, std::move(code), drop, n);
}

}  // namespace nnasm

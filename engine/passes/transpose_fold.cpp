// Transposes into MATMUL's flags: a TRANSPOSE that swaps the last two dimensions (and keeps the
// others) whose result only a MATMUL reads becomes that operand's transA / transB flag flipped.
#include <fmt/format.h>

#include "engine/passes/pass.h"
#include "engine/passes/uses.h"

namespace nnasm {

namespace {

bool swaps_last_two(const Instruction& t) {
  std::vector<int64_t> perm = t.ints(NNASM_IMM(TRANSPOSE, perm));
  const int64_t r = static_cast<int64_t>(perm.size());
  if (r < 2) return false;
  for (int64_t& d : perm)
    if (d < 0) d += r;
  for (int64_t d = 0; d < r - 2; ++d)
    if (perm[d] != d) return false;
  return perm[r - 2] == r - 1 && perm[r - 1] == r - 2;
}

}  // namespace

Result<int> pass_transpose_fold(Program& p) {
  const Uses u(p);
  std::vector<Instruction> code = p.code();
  std::vector<bool> drop(code.size(), false);
  int n = 0;
  for (size_t i = 0; i < code.size(); ++i) {
    Instruction& mm = code[i];
    if (mm.op != Opcode::MATMUL || mm.in[0] == mm.in[1]) continue;
    for (int k = 0; k < 2; ++k) {
      const size_t t = u.producer(mm.in[k]);
      if (t == Uses::NONE || drop[t] || code[t].op != Opcode::TRANSPOSE || !swaps_last_two(code[t]) ||
          !u.private_to(mm.in[k], i))
        continue;
      add_note(mm, fmt::format("folded {} into trans{}", describe(p, code[t]), k == 0 ? 'A' : 'B'));
      mm.in[k] = code[t].in[0];
      const int trans = k == 0 ? NNASM_IMM(MATMUL, transA) : NNASM_IMM(MATMUL, transB);
      mm.imm[trans] = imm_i(mm.i(trans) ? 0 : 1);
      mm.imm[trans].type = ImmType::BOOL;
      drop[t] = true;
      ++n;
    }
  }
  return commit(p, std::move(code), drop, n);
}

}  // namespace nnasm

// Conversions between an instruction's immediates and the compact form building blocks read.
#include "ops/elementwise/elementwise_op.h"

namespace nnasm {

EwImms ew_imms(const std::vector<Imm>& imm) {
  EwImms m;
  for (size_t k = 0; k < imm.size() && k < EwImms::MAX; ++k) {
    m.f[k] = static_cast<float>(imm[k].f);
    m.i[k] = imm[k].i;
  }
  return m;
}

std::vector<std::pair<const char*, Imm>> ew_imm_args(Opcode op, const EwImms& imm) {
  std::vector<std::pair<const char*, Imm>> args;
  const std::vector<ImmSpec>& specs = op_info(op).imms;
  for (size_t k = 0; k < specs.size() && k < EwImms::MAX; ++k)
    args.emplace_back(specs[k].key.c_str(), specs[k].type == ImmType::F32 ? imm_f(imm.f[k]) : imm_i(imm.i[k]));
  return args;
}

}  // namespace nnasm

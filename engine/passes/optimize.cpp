// The pass table and the driver.
#include <algorithm>

#include <fmt/format.h>

#include "engine/passes/pass.h"

namespace nnasm {

const std::vector<PassInfo>& all_passes() {
  static const std::vector<PassInfo> passes = {
      {"const-fold", 1, pass_const_fold, "instructions whose inputs are all constants run once, at optimization"},
      {"pow-reduce", 1, pass_pow_reduce, "POW by a constant 2, 3, 0.5 or -1 becomes SQUARE, a CALC, SQRT or RECIPROCAL"},
      {"identities", 1, pass_identities, "x·1, x+0, SCALE by 1, reshape of reshape, transpose of transpose"},
      {"scale-fold", 1, pass_scale_fold, "SCALE into ADD/SUB's alpha and beta; scales of scales multiply"},
      {"transpose-fold", 1, pass_transpose_fold, "a transpose of the last two dimensions into MATMUL's flags"},
      {"linear-fusion", 1, pass_linear_fusion, "MATMUL then ADD of a bias row becomes LINEAR"},
      {"bn-fold", 1, pass_bn_fold, "an inference BATCHNORM2D after a CONV2D becomes weights and a bias computed from its params"},
      {"act-fusion", 1, pass_act_fusion, "an activation that is the only reader of a MATMUL, LINEAR or CONV2D becomes its act= epilogue"},
      {"chain-fusion", 1, pass_chain_fusion,
       "a tree of elementwise ops whose intermediates nobody else reads becomes one CALC"},
      {"cse", 1, pass_cse, "an instruction equal to an earlier one reuses its result"},
      {"winograd", 1, pass_winograd,
       "with a JIT, an inference CONV2D that runs by Winograd's F(2x2, 3x3) gets its weights transformed apart"},
      {"nchwc", 1, pass_nchwc_layout,
       "with a JIT, inference convolutions on small maps and what follows them run in blocks of a vector's channels"},
      {"dce", 1, pass_dce, "instructions whose results nobody reads disappear"},
      {"derive", 1, pass_derive, "instructions that read only params and constants move to the derive section, run when params change"},
  };
  return passes;
}

const PassInfo* find_pass(const std::string& name) {
  for (const PassInfo& p : all_passes())
    if (name == p.name) return &p;
  return nullptr;
}

Status optimize(Program& p, int level, OptimizeReport* report, const std::vector<std::string>& only) {
  OptimizeReport local;
  OptimizeReport& r = report ? *report : local;
  r.instructions_before = p.code().size();
  for (const std::string& name : only)
    if (!find_pass(name)) return Status::errorf("unknown pass '{}'", name);
  auto selected = [&](const PassInfo& pass) {
    return only.empty() ? pass.level <= level : std::find(only.begin(), only.end(), pass.name) != only.end();
  };
  for (r.rounds = 0; r.rounds < MAX_ROUNDS;) {
    int changed = 0;
    for (const PassInfo& pass : all_passes()) {
      if (!selected(pass)) continue;
      Result<int> n = pass.run(p);
      if (!n) return n.status().with_prefix(fmt::format("pass {}: ", pass.name));
      if (n.value() == 0) continue;
      changed += n.value();
      auto it = std::find_if(r.rewrites.begin(), r.rewrites.end(), [&](const auto& e) { return e.first == pass.name; });
      if (it == r.rewrites.end()) r.rewrites.emplace_back(pass.name, n.value());
      else it->second += n.value();
    }
    ++r.rounds;
    if (!changed) break;
  }
  p.drop_unused_tensors();
  r.instructions_after = p.code().size();
  return Status::ok();
}

Result<TensorId> declare_temporary(Program& p, const std::string& base, const TensorType& type) {
  TensorDesc d;
  d.name = p.fresh_name(base);
  d.type = type;
  d.role = Role::TEMPORARY;
  return p.declare(std::move(d));
}

Instruction placed_like(Instruction ins, const Instruction& like) {
  ins.section = like.section;
  ins.loc = like.loc;
  return ins;
}

void replace_reads(std::vector<Instruction>& code, size_t begin, TensorId from, TensorId to, const std::string& why) {
  for (size_t i = begin; i < code.size(); ++i) {
    bool changed = false;
    for (TensorId& id : code[i].in)
      if (id == from) id = to, changed = true;
    if (changed && !why.empty()) add_note(code[i], why);
  }
}

std::string describe(const Program& p, const Instruction& ins) {
  return fmt::format("{} -> {}{}", ins.info().mnemonic, p.desc(ins.out[0]).sigil(), p.desc(ins.out[0]).name);
}

Result<int> commit(Program& p, std::vector<Instruction> code, const std::vector<bool>& drop, int n) {
  if (!n) return 0;
  std::vector<Instruction> kept;
  for (size_t i = 0; i < code.size(); ++i)
    if (!drop[i]) kept.push_back(std::move(code[i]));
  NNASM_TRY(p.set_code(std::move(kept)));
  return n;
}

void add_note(Instruction& ins, const std::string& why) { ins.note = ins.note.empty() ? why : ins.note + "; " + why; }

}  // namespace nnasm

// The peephole optimizer's framework. A pass is a function that rewrites a program's instruction
// stream in one scan (Program::set_code validates the result) and returns how many rewrites it
// made; each instruction it makes or changes carries a note saying why. `optimize` runs the
// level's passes in table order until a round changes nothing.
//
// Every pass is autodiff-safe by construction: it asks Uses before consuming an intermediate, and
// a tensor the backward section reads has a backward reader, so it is never fused away or
// overwritten.
#pragma once
#include <string>
#include <vector>

#include "isa/program.h"
#include "isa/status.h"

namespace nnasm {

using PassFn = Result<int> (*)(Program& p);

struct PassInfo {
  const char* name;  // as `nnasm opt --passes` and the golden tests name it
  int level;         // the lowest -O level that runs it
  PassFn run;
  const char* what;  // one line for `nnasm opt --list`
};

// Every pass, in the order optimize runs them.
const std::vector<PassInfo>& all_passes();
const PassInfo* find_pass(const std::string& name);  // nullptr if unknown

struct OptimizeReport {
  int rounds = 0;
  std::vector<std::pair<std::string, int>> rewrites;  // per pass name, summed over rounds
  size_t instructions_before = 0, instructions_after = 0;
};

// Runs the passes of `level` (0: none) — or exactly `only`, when not empty — until a round makes
// no rewrite (at most MAX_ROUNDS), then forgets the temporaries nothing uses. Errors: a pass
// produced an invalid program (a bug; the program is then unchanged since that pass's start).
constexpr int MAX_ROUNDS = 8;
Status optimize(Program& p, int level, OptimizeReport* report = nullptr, const std::vector<std::string>& only = {});

// Helpers for passes.
// Replaces every read of `from` by `to` in code[begin…]; each instruction changed gets `why` as
// a note (when not empty).
void replace_reads(std::vector<Instruction>& code, size_t begin, TensorId from, TensorId to,
                   const std::string& why = "");
// "MNEMONIC -> %out" of an instruction, for notes.
std::string describe(const Program& p, const Instruction& ins);
// Sets p's code to `code` without the instructions marked in `drop`; returns `n` (the pass's
// rewrite count) or set_code's error.
Result<int> commit(Program& p, std::vector<Instruction> code, const std::vector<bool>& drop, int n);
// Appends `why` to the instruction's note ("; "-separated).
void add_note(Instruction& ins, const std::string& why);
// A new temporary of `type`, named `base` with a fresh suffix, for a rewrite's results.
Result<TensorId> declare_temporary(Program& p, const std::string& base, const TensorType& type);
// `ins` placed where `like` is: its section and source location.
Instruction placed_like(Instruction ins, const Instruction& like);

// The passes (engine/passes/*.cpp).
Result<int> pass_dce(Program& p);
Result<int> pass_derive(Program& p);
Result<int> pass_winograd(Program& p);
Result<int> pass_nchwc_layout(Program& p);
Result<int> pass_identities(Program& p);
Result<int> pass_pow_reduce(Program& p);
Result<int> pass_scale_fold(Program& p);
Result<int> pass_transpose_fold(Program& p);
Result<int> pass_linear_fusion(Program& p);
Result<int> pass_bn_fold(Program& p);
Result<int> pass_act_fusion(Program& p);
Result<int> pass_chain_fusion(Program& p);
Result<int> pass_cse(Program& p);
Result<int> pass_const_fold(Program& p);

}  // namespace nnasm

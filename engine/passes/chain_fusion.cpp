// Elementwise chain fusion (Myelin's Calculate): a tree of elementwise instructions whose
// intermediates nobody else reads becomes one CALC at the root's place, its expression the tree's,
// run in one pass over memory instead of one per instruction:
//   SUB %x, %m -> %t;  EXP %t -> %y     →     CALC %x, %m -> %y  expr="exp(sub(%0,%1))"
// The tree grows from its root (the last instruction) through inputs that are
//   - made by an elementwise instruction (an op CALC can call, or a CALC, whose expression is
//     inlined) of the root's section, none of whose inputs is updated in place (its reads move
//     to the root's place);
//   - private to the instruction reading them (Uses::private_to), and named once in it;
//   - shaped exactly like the root's output (a broadcast intermediate would be computed once per
//     output element instead of once per its own).
// Everything else is a leaf: an input of the CALC, the same tensor once however often it is read.
// Growth stops where the CALC would take more than CALC_MAX_INPUTS inputs or its JIT kernel would
// not fit AVX2's registers (ops/elementwise/calc.h). One CALC replaces the tree's instructions
// (counted as one rewrite each but the root). act-fusion runs before this pass, so an activation
// LINEAR can take stays LINEAR's.
#include <algorithm>
#include <deque>
#include <set>

#include <fmt/format.h>

#include "engine/passes/pass.h"
#include "engine/passes/uses.h"
#include "ops/elementwise/calc.h"

namespace nnasm {

namespace {

bool fusable(const Instruction& ins) { return ins.op == Opcode::CALC || elementwise_op(ins.op); }

// One tree under construction: which instructions it has taken, and its expression.
class Tree {
 public:
  Tree(const Program& p, const Uses& u, const std::vector<Instruction>& code, const std::vector<bool>& drop, size_t root)
      : p_(p), u_(u), code_(code), drop_(drop), root_(root) {}

  // Takes every instruction it may, nearest the root first.
  void grow() {
    std::deque<std::pair<TensorId, size_t>> frontier;  // (tensor, the instruction reading it)
    for (TensorId t : code_[root_].in) frontier.emplace_back(t, root_);
    while (!frontier.empty()) {
      const auto [t, reader] = frontier.front();
      frontier.pop_front();
      if (!may_take(t, reader)) continue;
      const size_t k = u_.producer(t);
      taken_.insert(k);
      build();
      if (static_cast<int>(leaves_.size()) > CALC_MAX_INPUTS ||
          !calc_jit_fits(nodes_, static_cast<int>(leaves_.size()))) {
        taken_.erase(k);
        continue;
      }
      for (TensorId in : code_[k].in) frontier.emplace_back(in, k);
    }
    build();
  }

  const std::set<size_t>& taken() const { return taken_; }
  const std::vector<TensorId>& leaves() const { return leaves_; }
  std::string expr() const { return expr_print(nodes_); }

 private:
  bool may_take(TensorId t, size_t reader) const {
    const size_t k = u_.producer(t);
    if (k == Uses::NONE || drop_[k] || taken_.count(k) || !fusable(code_[k])) return false;
    if (code_[k].section != code_[root_].section || !u_.private_to(t, reader)) return false;
    if (p_.desc(t).type.shape != p_.desc(code_[root_].out[0]).type.shape) return false;
    for (TensorId in : code_[k].in)
      if (u_.updated_in_place(in)) return false;
    if (code_[reader].op != Opcode::CALC) return true;
    // A CALC may name its input several times: taking the producer would compute it as often.
    const size_t j = std::find(code_[reader].in.begin(), code_[reader].in.end(), t) - code_[reader].in.begin();
    const Result<std::vector<ExprNode>> nodes = expr_parse(code_[reader].imm[NNASM_IMM(CALC, expr)].ident);
    if (!nodes) return false;
    return std::count_if(nodes.value().begin(), nodes.value().end(), [&](const ExprNode& e) {
             return e.kind == ExprKind::INPUT && e.input == static_cast<int>(j);
           }) == 1;
  }

  void build() {
    nodes_.clear();
    leaves_.clear();
    instruction(root_);
  }

  int add(ExprNode e) {
    nodes_.push_back(e);
    return static_cast<int>(nodes_.size()) - 1;
  }

  // The node of tensor t as instruction `reader` reads it: the expression of its producer when
  // taken, else a leaf.
  int tensor(TensorId t) {
    const size_t k = u_.producer(t);
    if (k != Uses::NONE && taken_.count(k)) return instruction(k);
    ExprNode e;
    e.kind = ExprKind::INPUT;
    e.input = static_cast<int>(std::find(leaves_.begin(), leaves_.end(), t) - leaves_.begin());
    if (e.input == static_cast<int>(leaves_.size())) leaves_.push_back(t);
    return add(e);
  }

  int instruction(size_t k) {
    const Instruction& ins = code_[k];
    if (ins.op != Opcode::CALC) {
      ExprNode e;
      e.kind = ExprKind::CALL;
      e.op = ins.op;
      e.imm = ew_imms(ins.imm);
      for (size_t a = 0; a < ins.in.size(); ++a) e.arg[a] = tensor(ins.in[a]);
      return add(e);
    }
    // A CALC's own nodes, its inputs replaced by what stands for them here.
    const Result<std::vector<ExprNode>> inner = expr_parse(ins.imm[NNASM_IMM(CALC, expr)].ident);
    std::vector<int> index(inner.value().size());
    for (size_t i = 0; i < index.size(); ++i) {
      ExprNode e = inner.value()[i];
      if (e.kind == ExprKind::INPUT) {
        index[i] = tensor(ins.in[e.input]);
        continue;
      }
      for (int& a : e.arg)
        if (a >= 0) a = index[a];
      index[i] = add(e);
    }
    return index.back();
  }

  const Program& p_;
  const Uses& u_;
  const std::vector<Instruction>& code_;
  const std::vector<bool>& drop_;
  size_t root_;
  std::set<size_t> taken_;
  std::vector<ExprNode> nodes_;
  std::vector<TensorId> leaves_;
};

}  // namespace

Result<int> pass_chain_fusion(Program& p) {
  const Uses u(p);
  std::vector<Instruction> code = p.code();
  std::vector<bool> drop(code.size(), false);
  int n = 0;
  // From the end, so that each tree is found from its root, whole.
  for (size_t i = code.size(); i-- > 0;) {
    if (drop[i] || !fusable(code[i])) continue;
    Tree t(p, u, code, drop, i);
    t.grow();
    if (t.taken().empty()) continue;
    Instruction calc = make_instruction(Opcode::CALC, t.leaves(), code[i].out);
    calc.imm[NNASM_IMM(CALC, expr)] = imm_str(t.expr());
    calc.section = code[i].section;
    calc.loc = code[i].loc;
    calc.note = code[i].note;
    std::string from;
    for (size_t k : t.taken()) from += describe(p, code[k]) + ", ";
    add_note(calc, fmt::format("fused {}{}", from, describe(p, code[i])));
    for (size_t k : t.taken()) drop[k] = true;
    n += static_cast<int>(t.taken().size());
    code[i] = std::move(calc);
  }
  return commit(p, std::move(code), drop, n);
}

}  // namespace nnasm

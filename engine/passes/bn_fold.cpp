// Batch-norm folding: in an inference program, BATCHNORM2D reading a CONV2D's output (and nothing
// else reading it) becomes part of the convolution, so the normalization costs no pass over the
// activations:
//   CONV2D %x, @w, @b -> %c;  BATCHNORM2D %c, @g, @be, @m, @v -> %y    becomes
//   CALC   @g, @v -> %s   expr="div(%0,sqrt(add(%1,eps)))"              s = γ/√(σ² + eps)
//   RESHAPE %s -> %s4  shape=[O,1,1,1]
//   MUL    @w, %s4 -> %w'                                                 w' = w·s per output channel
//   CALC   @b, @m, %s, @be -> %b'  expr="add(mul(sub(%0,%1),%2),%3)"      b' = (b − μ)·s + β
//   CONV2D %x, %w', %b' -> %y
// The folded weights are computed by instructions from the params as they are then — never
// baked in at prepare, so weights loaded after prepare still count (const-fold bakes them when
// they are constants) — which the derive pass moves to the derive section, so they are
// recomputed only when the params change. The conv must have no
// activation yet (act-fusion runs after this pass and fuses a following ReLU into the folded
// conv). Training programs (`mode training`) keep their BATCHNORM2D: its batch statistics and
// running-statistic updates cannot fold. Results agree with the unfolded program up to float
// reassociation.
#include <fmt/format.h>

#include "engine/passes/pass.h"
#include "engine/passes/uses.h"
#include "isa/activation.h"
#include "isa/opcode.h"

namespace nnasm {

namespace {

Instruction calc(std::vector<TensorId> in, TensorId out, const std::string& expr, const Instruction& like) {
  Instruction c = make_instruction(Opcode::CALC, std::move(in), {out});
  c.imm[NNASM_IMM(CALC, expr)] = imm_str(expr);
  return placed_like(std::move(c), like);
}

}  // namespace

Result<int> pass_bn_fold(Program& p) {
  if (p.training()) return 0;
  const Uses u(p);
  const std::vector<Instruction>& code = p.code();
  std::vector<std::vector<Instruction>> before(code.size());  // instructions to insert before i
  std::vector<Instruction> out = code;
  std::vector<bool> drop(code.size(), false);
  int n = 0;
  for (size_t i = 0; i < code.size(); ++i) {
    const Instruction& bn = code[i];
    if (bn.op != Opcode::BATCHNORM2D) continue;
    const size_t k = u.producer(bn.in[0]);
    if (k == Uses::NONE || drop[k] || code[k].op != Opcode::CONV2D || code[k].section != bn.section ||
        !u.private_to(bn.in[0], i))
      continue;
    const Instruction& conv = code[k];
    if (fused_act(conv) != Activation::NONE) continue;
    const TensorType& w = p.desc(conv.in[1]).type;
    // Every BN operand is read before the conv's place: declared up front, or made earlier.
    bool ready = true;
    for (size_t a = 1; a < bn.in.size(); ++a) {
      const size_t def = u.producer(bn.in[a]);
      ready = ready && (def == Uses::NONE || def < k);
    }
    if (!ready) continue;

    const int64_t channels = w.shape[0];
    const TensorId gamma = bn.in[1], beta = bn.in[2], mean = bn.in[3], var = bn.in[4];
    const std::string base = p.desc(bn.out[0]).name;
    const TensorType vec{DType::F32, Shape{channels}};
    Result<TensorId> s = declare_temporary(p, base + ".bn_scale", vec);
    Result<TensorId> s4 = declare_temporary(p, base + ".bn_scale4", TensorType{DType::F32, Shape{channels, 1, 1, 1}});
    Result<TensorId> wf = declare_temporary(p, base + ".bn_w", w);
    Result<TensorId> bf = declare_temporary(p, base + ".bn_b", vec);
    for (const auto* r : {&s, &s4, &wf, &bf})
      if (!*r) return r->status();

    std::vector<Instruction>& ins = before[k];
    ins.push_back(calc({gamma, var}, *s, fmt::format("div(%0,sqrt(add(%1,{})))", float_to_string(bn.f(NNASM_IMM(BATCHNORM2D, eps)))), conv));
    Instruction reshape = placed_like(make_instruction(Opcode::RESHAPE, {*s}, {*s4}), conv);
    reshape.imm[NNASM_IMM(RESHAPE, shape)] = imm_ints({channels, 1, 1, 1});
    ins.push_back(std::move(reshape));
    ins.push_back(placed_like(make_instruction(Opcode::MUL, {conv.in[1], *s4}, {*wf}), conv));
    if (conv.in.size() == 3) ins.push_back(calc({conv.in[2], mean, *s, beta}, *bf, "add(mul(sub(%0,%1),%2),%3)", conv));
    else ins.push_back(calc({mean, *s, beta}, *bf, "add(mul(neg(%0),%1),%2)", conv));
    for (Instruction& e : ins) add_note(e, fmt::format("folds {} into {}", describe(p, bn), describe(p, conv)));

    Instruction folded = conv;
    folded.in = {conv.in[0], *wf, *bf};
    folded.out = bn.out;
    add_note(folded, fmt::format("folded {} in", describe(p, bn)));
    out[k] = std::move(folded);
    drop[i] = true;
    ++n;
  }
  if (n == 0) return 0;
  // Splice the weight instructions in before their convolutions.
  std::vector<Instruction> spliced;
  std::vector<bool> spliced_drop;
  for (size_t i = 0; i < out.size(); ++i) {
    for (Instruction& e : before[i]) {
      spliced.push_back(std::move(e));
      spliced_drop.push_back(false);
    }
    spliced.push_back(std::move(out[i]));
    spliced_drop.push_back(drop[i]);
  }
  return commit(p, std::move(spliced), spliced_drop, n);
}

}  // namespace nnasm

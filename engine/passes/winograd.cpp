// Winograd with its weights apart: in an inference program run by a JIT level, a CONV2D that
// CONV2D's kernel would run by F(2×2, 3×3) (winograd_applies) becomes CONV_WEIGHTS_WINOGRAD of its
// weights and CONV2D_WINOGRAD over the result, which the derive pass moves to the derive section:
// the transform of the weights (16·O·C floats written, as many read back) then runs when the
// params change instead of in every run.
//
//   CONV2D %x, @w, @b -> %y  pad=[1,1] act=relu                    becomes
//   CONV_WEIGHTS_WINOGRAD @w -> %w.winograd
//   CONV2D_WINOGRAD %x, %w.winograd, @b -> %y  pad=[1,1] act=relu
//
// Without a JIT the pass does nothing (CONV2D's reference kernel sums directly, and so must the
// program), nor in a program that trains (CONV2D_WINOGRAD has no gradient).
#include <unordered_map>

#include "engine/context.h"
#include "engine/passes/pass.h"
#include "ops/conv/conv_geom.h"
#include "ops/conv/conv_winograd.h"

namespace nnasm {

Result<int> pass_winograd(Program& p) {
  if (p.training() || p.has_section(Section::BACKWARD) || p.has_section(Section::UPDATE)) return 0;
  const Context* ctx = Context::of(p);
  if (!ctx || ctx->jit().isa() == Isa::REF) return 0;
  std::vector<Instruction> code;
  std::unordered_map<TensorId, TensorId> transformed;  // weights → their transform
  int n = 0;
  for (const Instruction& ins : p.code()) {
    const TensorType& x = p.desc(ins.in[0]).type;
    if (ins.op != Opcode::CONV2D || ins.section != Section::FORWARD || x.shape.rank != 4) {
      code.push_back(ins);
      continue;
    }
    const TensorType& w = p.desc(ins.in[1]).type;
    if (!winograd_applies(conv_geom_unchecked(ins, x.shape, w.shape))) {
      code.push_back(ins);
      continue;
    }
    auto it = transformed.find(ins.in[1]);
    if (it == transformed.end()) {
      Result<TensorId> u = declare_temporary(p, p.desc(ins.in[1]).name + ".winograd",
                                             TensorType{DType::F32, Shape{16, w.shape[0], w.shape[1]}});
      if (!u) return u.status();
      Instruction t = placed_like(make_instruction(Opcode::CONV_WEIGHTS_WINOGRAD, {ins.in[1]}, {u.value()}), ins);
      add_note(t, "transforms the weights of a Winograd convolution");
      code.push_back(std::move(t));
      it = transformed.emplace(ins.in[1], u.value()).first;
    }
    Instruction c = ins;
    c.op = Opcode::CONV2D_WINOGRAD;
    c.in[1] = it->second;
    add_note(c, "Winograd F(2×2, 3×3) over weights transformed apart");
    code.push_back(std::move(c));
    ++n;
  }
  if (!n) return 0;
  NNASM_TRY(p.set_code(std::move(code)));
  return n;
}

}  // namespace nnasm

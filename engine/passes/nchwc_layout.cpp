// The blocked channel layout (ops/layout/nchwc.h), as ONNX Runtime's NCHWc transformer does it:
// in an inference program run by a JIT level, convolutions that the blocked kernels run faster
// (nchwc_pays below) become CONV2D_NCHWC / DWCONV2D_NCHWC over activations in blocks of one
// vector's channels, and the ops between them follow while their inputs are blocked:
// elementwise ops that keep finite values finite, pooling, and channel CONCAT of whole blocks.
// A TO_NCHWC enters the layout where a blocked op reads a plain tensor; a TO_NCHW leaves it
// where anything else reads a blocked result, or where the result is an output — so the
// program's edges, what users and importers see, stay NCHW. A residual sum (ADD, or CALC
// relu(add)) of a dense blocked convolution's private output folds into that convolution
// (CONV2D_NCHWC residual=1). Weights are packed by
// CONV_WEIGHTS_NCHWC instructions, which the derive pass moves to the derive section: they run
// when the params change, not per run.
//
//   CONV2D %x, @w, @b -> %y  stride=[2,2] pad=[1,1] act=relu     becomes
//   TO_NCHWC %x -> %x.nchwc  block=16
//   CONV_WEIGHTS_NCHWC @w -> %w.nchwc  block=16
//   CONV2D_NCHWC %x.nchwc, %w.nchwc, @b -> %y.nchwc  stride=[2,2] pad=[1,1] act=relu
//   TO_NCHW %y.nchwc -> %y  channels=O                          (where a plain reader needs %y)
//
// The block is the vector width of the context's JIT level (16 on AVX-512, 8 on AVX2); without
// a JIT (NNASM_JIT=0, the reference level) or outside a Context the pass does nothing, as it does
// on programs that train (their backward passes have no blocked kernels). Padding lanes (channels
// past C in the last block) hold act(0) and what finite ops make of it: the zero weights of the
// next convolution multiply them, so a value that could become NaN or infinite there (a DIV,
// a LOG) would leak into real channels — such ops end the region instead.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "engine/context.h"
#include "engine/passes/pass.h"
#include "engine/passes/uses.h"
#include "isa/activation.h"
#include "isa/opcode.h"
#include "ops/conv/conv_geom.h"
#include "ops/elementwise/expr.h"
#include "ops/layout/nchwc.h"

namespace nnasm {

namespace {

// Elementwise ops that map finite values to finite values (and what a padding lane holds to
// what a padding lane may hold): the ones a blocked region may run.
bool keeps_finite(Opcode op) {
  switch (op) {
    case Opcode::ADD: case Opcode::SUB: case Opcode::MUL: case Opcode::MAXIMUM: case Opcode::MINIMUM:
    case Opcode::SCALE: case Opcode::NEG: case Opcode::ABS: case Opcode::RELU: case Opcode::LEAKYRELU:
    case Opcode::ELU: case Opcode::CLIPPED_RELU: case Opcode::SIGMOID: case Opcode::TANH: case Opcode::GELU:
    case Opcode::SWISH: case Opcode::CLAMP: case Opcode::HARDSIGMOID: case Opcode::HARDSWISH:
      return true;
    default:
      return false;
  }
}

bool calc_keeps_finite(const Instruction& ins) {
  Result<std::vector<ExprNode>> nodes = expr_parse(ins.imm[NNASM_IMM(CALC, expr)].ident);
  if (!nodes) return false;
  for (const ExprNode& e : nodes.value())
    if (e.kind == ExprKind::CALL && !keeps_finite(e.op)) return false;
  return true;
}

bool is_plain_map(const TensorType& t) { return t.dtype == DType::F32 && t.shape.rank == 4; }

// Whether the blocked kernels beat the NCHW ones on this convolution, where its input is not
// blocked already (a blocked input takes any convolution the blocked ops run: leaving the layout
// costs two reorders). What runs by Winograd stays NCHW: the winograd pass, before this one,
// has made it CONV2D_WINOGRAD, 2.25 times fewer multiplications than any direct kernel.
// A depthwise convolution's blocked kernel fills its vectors on any map, but alone it does not
// win back the two reorders around it (a 32-channel 32×32 one took 16 µs so against 9 in NCHW):
// it pays where a convolution reads its result and so keeps the layout (MobileNetV2's pointwise
// after each depthwise).
bool nchwc_pays(const ConvGeom& g, bool feeds_conv) {
  if (g.groups != 1) return feeds_conv;
  return g.c >= 16 && (g.ho * g.wo <= 28 * 28 || g.sh > 1 || g.sw > 1);
}

class Rewriter {
 public:
  Rewriter(Program& p, int64_t block) : p_(p), u_(p), b_(block) {}

  Result<int> run() {
    for (i_ = 0; i_ < p_.code().size(); ++i_) {
      const Instruction& ins = p_.code()[i_];
      if (ins.section != Section::FORWARD) {
        out_.push_back(ins);
        continue;
      }
      NNASM_TRY(rewrite(ins));
    }
    if (!n_) return 0;
    std::vector<Instruction> code;
    for (Instruction& ins : out_)
      if (ins.op != Opcode::INVALID) code.push_back(std::move(ins));  // convolutions moved by residual()
    NNASM_TRY(p_.set_code(std::move(code)));
    return n_;
  }

 private:
  Status rewrite(const Instruction& ins) {
    const Opcode op = ins.op;
    if (op == Opcode::CONV2D) return conv(ins);
    const OpCategory c = ins.info().category;
    const bool elementwise = (c == OpCategory::ELEMENTWISE_UNARY || c == OpCategory::ELEMENTWISE_BINARY) &&
                             (op == Opcode::CALC ? calc_keeps_finite(ins) : keeps_finite(op));
    if (elementwise && same_maps(ins) && any_blocked(ins)) {
      Result<bool> fused = residual(ins);
      if (!fused) return fused.status();
      return fused.value() ? Status::ok() : follow(ins, op, ins.imm);
    }
    if ((op == Opcode::MAXPOOL2D || op == Opcode::AVGPOOL2D || op == Opcode::GLOBAL_AVGPOOL) && blocked_.count(ins.in[0]) &&
        is_plain_map(type(ins.in[0])))
      return follow(ins, op == Opcode::MAXPOOL2D   ? Opcode::MAXPOOL2D_NCHWC
                         : op == Opcode::AVGPOOL2D ? Opcode::AVGPOOL2D_NCHWC
                                                   : Opcode::GLOBAL_AVGPOOL_NCHWC,
                    ins.imm);
    if (op == Opcode::CONCAT && whole_blocks(ins) && any_blocked(ins)) {
      std::vector<Imm> imm = ins.imm;
      imm[NNASM_IMM(CONCAT, axis)] = imm_i(1);
      return follow(ins, op, imm);
    }
    return keep(ins);
  }

  // CONV2D: dense or depthwise, with its weights' shape known.
  Status conv(const Instruction& ins) {
    const TensorType& x = type(ins.in[0]);
    const TensorType& w = type(ins.in[1]);
    if (!is_plain_map(x) || !is_plain_map(w)) return keep(ins);
    const ConvGeom g = conv_geom_unchecked(ins, x.shape, w.shape);
    const bool depthwise = g.groups > 1 && g.groups == g.c && g.groups == g.o;
    if ((g.groups != 1 && !depthwise) || (!blocked_.count(ins.in[0]) && !nchwc_pays(g, feeds_conv(ins.out[0]))))
      return keep(ins);
    std::vector<Imm> imm = ins.imm;
    if (depthwise) imm.erase(imm.begin() + CONV_GROUPS);
    Instruction k = make_instruction(depthwise ? Opcode::DWCONV2D_NCHWC : Opcode::CONV2D_NCHWC, {}, {});
    std::copy(imm.begin(), imm.end(), k.imm.begin());  // CONV2D's, then the blocked op's own defaults
    Result<TensorId> xb = to_blocked(ins.in[0], ins);
    if (!xb) return xb.status();
    Result<TensorId> wb = packed(ins.in[1], depthwise, ins);
    if (!wb) return wb.status();
    k.in = {xb.value(), wb.value()};
    if (ins.in.size() == 3) k.in.push_back(ins.in[2]);
    NNASM_TRY(emit_blocked(ins, std::move(k)));
    if (!depthwise && plain_missing_.count(ins.out[0])) conv_at_[ins.out[0]] = out_.size() - 1;
    return Status::ok();
  }

  // A residual sum — ADD (alpha = beta = 1) or CALC relu(add(%0,%1)) — of a dense blocked
  // convolution's output that nothing else reads, the convolution without an activation yet:
  // the convolution moves here (its own inputs are all defined earlier) and adds the other
  // operand in its epilogue (residual=1), the ReLU becoming its activation, as oneDNN's sum
  // post-op: the sum's pass over both maps disappears. False when `ins` is no such sum.
  Result<bool> residual(const Instruction& ins) {
    Activation act = Activation::NONE;
    if (!sum_of_two(ins, &act)) return false;
    for (int k = 0; k < 2; ++k) {
      const TensorId y = ins.in[k], r = ins.in[1 - k];
      auto it = conv_at_.find(y);
      if (it == conv_at_.end() || y == r || !u_.private_to(y, i_)) continue;
      Instruction conv = out_[it->second];
      if (fused_act(conv) != Activation::NONE) continue;
      out_[it->second].op = Opcode::INVALID;
      conv_at_.erase(it);
      plain_missing_.erase(y);  // only the sum read it
      Result<TensorId> rb = to_blocked(r, ins);
      if (!rb) return rb.status();
      conv.in.push_back(rb.value());
      conv.imm[NNASM_IMM(CONV2D_NCHWC, residual)].i = 1;
      const FusedActImms at = fused_act_imms(Opcode::CONV2D_NCHWC);
      conv.imm[at.act].i = static_cast<int64_t>(act);
      conv.imm[at.act].ident = activation_name(act);
      const std::string why = fmt::format("in blocks of {} channels: {} with the residual {} fused", b_,
                                          describe(p_, p_.code()[u_.producer(y)]), describe(p_, ins));
      NNASM_TRY(emit_blocked(ins, std::move(conv), why));
      --n_;  // one rewrite: the sum's, the convolution's already counted
      return true;
    }
    return false;
  }

  // ADD with alpha = beta = 1, or a CALC of add(%0,%1) or relu(add(%0,%1)): its activation.
  static bool sum_of_two(const Instruction& ins, Activation* act) {
    if (ins.in.size() != 2) return false;
    if (ins.op == Opcode::ADD)
      return ins.f(NNASM_IMM(ADD, alpha)) == 1 && ins.f(NNASM_IMM(ADD, beta)) == 1;
    if (ins.op != Opcode::CALC) return false;
    Result<std::vector<ExprNode>> parsed = expr_parse(ins.imm[NNASM_IMM(CALC, expr)].ident);
    if (!parsed) return false;
    const std::vector<ExprNode>& e = parsed.value();
    int root = static_cast<int>(e.size()) - 1;
    if (root >= 0 && e[root].kind == ExprKind::CALL && e[root].op == Opcode::RELU) {
      *act = Activation::RELU;
      root = e[root].arg[0];
    }
    if (root < 0 || e[root].kind != ExprKind::CALL || e[root].op != Opcode::ADD || e[root].imm.f[0] != 1 ||
        e[root].imm.f[1] != 1)
      return false;
    const ExprNode &a = e[e[root].arg[0]], &b = e[e[root].arg[1]];
    return a.kind == ExprKind::INPUT && b.kind == ExprKind::INPUT && a.input + b.input == 1;
  }

  // `ins` as `op` with `imm` over the blocked twins of its inputs.
  Status follow(const Instruction& ins, Opcode op, std::vector<Imm> imm) {
    Instruction k = make_instruction(op, {}, {});
    k.imm = std::move(imm);
    for (TensorId id : ins.in) {
      Result<TensorId> xb = to_blocked(id, ins);
      if (!xb) return xb.status();
      k.in.push_back(xb.value());
    }
    return emit_blocked(ins, std::move(k));
  }

  // `ins` unchanged, its blocked-only inputs brought back to NCHW first.
  Status keep(const Instruction& ins) {
    for (TensorId id : ins.in) NNASM_TRY(materialize(id, ins));
    out_.push_back(ins);
    return Status::ok();
  }

  // Appends k (inputs and immediates set) with a fresh blocked output standing for ins's.
  // `why`: the note, when not that k is ins in blocks.
  Status emit_blocked(const Instruction& ins, Instruction k, const std::string& why = "") {
    const TensorId y = ins.out[0];
    Result<TensorId> yb = temporary(y, blocked_type(type(y)));
    if (!yb) return yb.status();
    k.out = {yb.value()};
    k.section = ins.section;
    k.loc = ins.loc;
    k.note = ins.note;
    add_note(k, why.empty() ? fmt::format("in blocks of {} channels: {}", b_, describe(p_, ins)) : why);
    out_.push_back(std::move(k));
    blocked_[y] = yb.value();
    plain_missing_.insert(y);
    ++n_;
    if (u_.observable(y)) return materialize(y, ins);
    return Status::ok();
  }

  // Defines plain `id` from its blocked twin where only the twin exists yet.
  Status materialize(TensorId id, const Instruction& at) {
    if (!plain_missing_.erase(id)) return Status::ok();
    Instruction r = make_instruction(Opcode::TO_NCHW, {blocked_.at(id)}, {id});
    r.imm[NNASM_IMM(TO_NCHW, channels)] = imm_i(type(id).shape[1]);
    add_note(r, "leaves the blocked layout");
    out_.push_back(placed_like(std::move(r), at));
    return Status::ok();
  }

  Result<TensorId> to_blocked(TensorId id, const Instruction& at) {
    auto it = blocked_.find(id);
    if (it != blocked_.end()) return it->second;
    Result<TensorId> xb = temporary(id, blocked_type(type(id)));
    if (!xb) return xb.status();
    Instruction r = make_instruction(Opcode::TO_NCHWC, {id}, {xb.value()});
    r.imm[NNASM_IMM(TO_NCHWC, block)].i = b_;
    add_note(r, "enters the blocked layout");
    out_.push_back(placed_like(std::move(r), at));
    blocked_[id] = xb.value();
    return xb.value();
  }

  Result<TensorId> packed(TensorId w, bool depthwise, const Instruction& at) {
    auto it = packed_.find(w);
    if (it != packed_.end()) return it->second;
    const Shape& s = type(w).shape;
    const Shape shape = depthwise ? Shape{nchwc_blocks(s[0], b_), s[2], s[3], b_}
                                  : Shape{nchwc_blocks(s[0], b_), nchwc_blocks(s[1], b_), s[2], s[3], b_, b_};
    Result<TensorId> wb = temporary(w, TensorType{DType::F32, shape});
    if (!wb) return wb.status();
    Instruction r = make_instruction(Opcode::CONV_WEIGHTS_NCHWC, {w}, {wb.value()});
    r.imm[NNASM_IMM(CONV_WEIGHTS_NCHWC, block)].i = b_;
    r.imm[NNASM_IMM(CONV_WEIGHTS_NCHWC, depthwise)].i = depthwise;
    add_note(r, "packs the weights of a blocked convolution");
    out_.push_back(placed_like(std::move(r), at));
    packed_[w] = wb.value();
    return wb.value();
  }

  bool feeds_conv(TensorId id) const {
    for (size_t r : u_.readers(id))
      if (p_.code()[r].op == Opcode::CONV2D) return true;
    return false;
  }
  bool any_blocked(const Instruction& ins) const {
    for (TensorId id : ins.in)
      if (blocked_.count(id)) return true;
    return false;
  }
  // Every input and the output a map of one shape (no broadcasting).
  bool same_maps(const Instruction& ins) const {
    const TensorType& y = type(ins.out[0]);
    if (ins.out.size() != 1 || !is_plain_map(y)) return false;
    for (TensorId id : ins.in)
      if (!(type(id) == y)) return false;
    return true;
  }
  // A CONCAT of maps along channels where every input but the last fills whole blocks.
  bool whole_blocks(const Instruction& ins) const {
    const int64_t axis = ins.imm[NNASM_IMM(CONCAT, axis)].i;
    if ((axis != 1 && axis != -3) || !is_plain_map(type(ins.out[0]))) return false;
    for (size_t k = 0; k < ins.in.size(); ++k) {
      const TensorType& t = type(ins.in[k]);
      if (!is_plain_map(t) || (k + 1 < ins.in.size() && t.shape[1] % b_ != 0)) return false;
    }
    return true;
  }

  const TensorType& type(TensorId id) const { return p_.desc(id).type; }
  TensorType blocked_type(const TensorType& t) const {
    const Shape& s = t.shape;
    return TensorType{DType::F32, Shape{s[0], nchwc_blocks(s[1], b_), s[2], s[3], b_}};
  }
  Result<TensorId> temporary(TensorId like, const TensorType& t) {
    return declare_temporary(p_, p_.desc(like).name + ".nchwc", t);
  }

  Program& p_;
  const Uses u_;
  const int64_t b_;
  std::vector<Instruction> out_;
  std::unordered_map<TensorId, TensorId> blocked_;  // a tensor → its blocked twin
  std::unordered_set<TensorId> plain_missing_;      // tensors only the blocked twin holds so far
  std::unordered_map<TensorId, TensorId> packed_;   // weights → packed
  std::unordered_map<TensorId, size_t> conv_at_;    // a dense conv's output → its place in out_
  size_t i_ = 0;                                    // the instruction rewrite() is at
  int n_ = 0;
};

}  // namespace

Result<int> pass_nchwc_layout(Program& p) {
  if (p.training() || p.has_section(Section::BACKWARD) || p.has_section(Section::UPDATE)) return 0;
  const Context* ctx = Context::of(p);
  if (!ctx) return 0;
  const Isa isa = ctx->jit().isa();
  if (isa == Isa::REF) return 0;
  return Rewriter(p, isa == Isa::AVX512 ? 16 : 8).run();
}

}  // namespace nnasm

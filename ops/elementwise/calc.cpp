// CALC: an elementwise expression, a tree of elementwise ops run in one pass over memory
// (Myelin's Calculate). It exists for the optimizer, whose chain-fusion pass writes one for each
// chain of elementwise ops whose intermediates nobody else reads, and for hand edits of a
// listing: the expression is plain text.
//
// Computes   y = expr(%0, %1, …) elementwise, in the language of expr.h: calls of the
//            elementwise ops by lowercase mnemonic, inputs %k, f32 constants. e.g.
//              CALC %x, %m -> %y  expr="exp(sub(%0,%1))"
//              CALC %a, %b -> %y  expr="add(scale(%0,alpha=2),leakyrelu(%1,slope=0.1))"
// Inputs     one or more f32 tensors, shapes broadcast numpy-style to the output (an input the
//            expression does not name still takes part in the broadcast).
// Outputs    y: f32, the broadcast shape of the inputs.
// Immediates expr: str, required. Errors (shape inference) name the column in the text: a bad
//            expression, an input %k out of range, a call with the wrong number of arguments.
// Gradient   the expression's ops' own rules: its intermediate values are computed again as
//            ordinary instructions in the backward section (y itself is the root's output) and
//            each op's rule runs on them, from the root down; gradients of an input named
//            several times add up. Through act_bwd there is none (as for ACT_BWD).
// Kernels    reference: evaluates the expression on blocks of 256 elements with each op's
//            reference arithmetic (ElementwiseOp::block), so it is bitwise equal to the chain of
//            the ops run one by one. The text is parsed at each run into scratch memory (no
//            allocation). JIT: one pass through the shared elementwise generator, each op's own
//            register snippet (ElementwiseOp::snippet) called in turn on values held in
//            registers: f32_calc__avx2 / __avx512, bitwise equal to the chain of the ops' JIT
//            kernels, and within their documented bounds of the reference. Inputs may be
//            streamed, one element, a row or a column as the generator reads them (every ROW
//            and COL input on one [rows, inner] split); other broadcasts run the reference.
// Notes      NaN and ±inf go through as in the chain of ops.
#include "ops/elementwise/calc.h"

#include <algorithm>

#include <fmt/format.h>

#include "ops/elementwise/elementwise_op.h"

namespace nnasm {
namespace {

constexpr int64_t BLOCK = 256;  // elements the reference evaluates at once, per node

const std::string& text_of(const Instruction& ins) { return ins.imm[NNASM_IMM(CALC, expr)].ident; }

Result<std::vector<ExprNode>> parse_checked(const Instruction& ins) {
  const std::string& text = text_of(ins);
  Result<std::vector<ExprNode>> nodes = expr_parse(text);
  if (!nodes) return nodes.status().with_prefix(fmt::format("CALC: bad expr \"{}\": ", text));
  const int n_in = static_cast<int>(ins.in.size());
  for (const ExprNode& n : nodes.value())
    if (n.kind == ExprKind::INPUT && n.input >= n_in)
      return Status::errorf("CALC: bad expr \"{}\": column {}: %{} is out of range ({} input{})", text, n.col,
                            n.input, n_in, n_in == 1 ? "" : "s");
  return nodes;
}

Status calc_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(require_f32(ins, in));
  NNASM_TRY(parse_checked(ins).status());
  Shape s = in[0].shape;
  for (size_t k = 1; k < in.size(); ++k)
    if (!broadcast_shapes(s, in[k].shape, &s))
      return Status::errorf("CALC: {} does not broadcast with the inputs before it ({})",
                            operand_str(ins, static_cast<int>(k), in[k]), s.str());
  (*out)[0] = TensorType{DType::F32, s};
  return Status::ok();
}

// ---- reference: scratch holds the parsed nodes, a value pointer per node, a block per node ----
size_t round64(size_t b) { return (b + 63) / 64 * 64; }
size_t nodes_bytes(const std::string& text) { return round64((text.size() + 1) * sizeof(ExprNode)); }
size_t pointers_bytes(int n) { return round64(static_cast<size_t>(n) * sizeof(const float*)); }

size_t calc_scratch(const Instruction& ins, const TensorType*, const TensorType*) {
  const Result<std::vector<ExprNode>> nodes = expr_parse(text_of(ins));
  const int n = nodes ? static_cast<int>(nodes.value().size()) : 0;
  return nodes_bytes(text_of(ins)) + pointers_bytes(n) + static_cast<size_t>(n) * BLOCK * sizeof(float);
}

// x (shape s) broadcast to `out` (rank ≥ 1): buf[j] = its value at out's flat index o + j.
void gather(const float* x, const Shape& s, const Shape& out, int64_t o, int64_t len, float* buf) {
  const int r = out.rank;
  int64_t stride[MAX_RANK], idx[MAX_RANK];
  int64_t step = 1;
  for (int d = r - 1; d >= 0; --d) {
    const int ds = d - (r - s.rank);
    const int64_t dim = ds >= 0 ? s.dims[ds] : 1;
    stride[d] = dim == 1 ? 0 : step;
    step *= dim;
  }
  int64_t off = 0, rest = o;
  for (int d = r - 1; d >= 0; --d) {
    idx[d] = rest % out.dims[d];
    rest /= out.dims[d];
    off += idx[d] * stride[d];
  }
  for (int64_t j = 0; j < len; ++j) {
    buf[j] = x[off];
    for (int d = r - 1; d >= 0; --d) {
      off += stride[d];
      if (++idx[d] < out.dims[d]) break;
      off -= stride[d] * out.dims[d];
      idx[d] = 0;
    }
  }
}

void calc_ref(const KernelArgs* a) {
  const std::string& text = text_of(*a->ins);
  char* base = static_cast<char*>(a->scratch);
  ExprNode* nodes = reinterpret_cast<ExprNode*>(base);
  int n = 0;
  if (!expr_parse(text, nodes, static_cast<int>(text.size()) + 1, &n)) return;  // shape inference parsed it
  const float** val = reinterpret_cast<const float**>(base + nodes_bytes(text));
  float* blocks = reinterpret_cast<float*>(base + nodes_bytes(text) + pointers_bytes(n));
  const Shape& out = a->out_type[0].shape;
  const int64_t total = out.numel();
  float* y = static_cast<float*>(a->out[0]);
  // Constants and one-element inputs are the same in every block: filled once.
  for (int i = 0; i < n; ++i) {
    float* b = blocks + i * BLOCK;
    const ExprNode& e = nodes[i];
    const bool single = e.kind == ExprKind::INPUT && a->in_type[e.input].shape.numel() == 1;
    if (e.kind == ExprKind::CONST || (single && total != 1)) {
      std::fill(b, b + BLOCK, e.kind == ExprKind::CONST ? e.value : *static_cast<const float*>(a->in[e.input]));
      val[i] = b;
    }
  }
  for (int64_t o = 0; o < total; o += BLOCK) {
    const int64_t len = std::min(BLOCK, total - o);
    for (int i = 0; i < n; ++i) {
      const ExprNode& e = nodes[i];
      float* b = blocks + i * BLOCK;
      if (e.kind == ExprKind::INPUT) {
        const float* x = static_cast<const float*>(a->in[e.input]);
        const Shape& s = a->in_type[e.input].shape;
        if (s.numel() == total) {
          val[i] = x + o;
        } else if (s.numel() != 1) {
          gather(x, s, out, o, len, b);
          val[i] = b;
        }
      } else if (e.kind == ExprKind::CALL) {
        const float* x[2] = {val[e.arg[0]], e.arg[1] >= 0 ? val[e.arg[1]] : nullptr};
        float* dst = i == n - 1 ? y + o : b;  // the root writes the output directly
        elementwise_op(e.op)->block(x, dst, len, e.imm);
        val[i] = dst;
      }
    }
    if (nodes[n - 1].kind != ExprKind::CALL) std::copy(val[n - 1], val[n - 1] + len, y + o);
  }
}

// ---- JIT ----
// Where a value lives while the body runs: input k's register, scratch register `index` (a
// slot), or the output register.
struct Where {
  enum Kind : uint8_t { INPUT, SLOT, OUT } kind = SLOT;
  int index = 0;
};
// One node's code: a CONST loaded from the pool, or a CALL's snippet.
struct Step {
  int node;
  Where dst;
  Where arg[2];
  std::vector<int> tmp;  // slots
};
struct Plan {
  std::vector<Step> steps;
  Where result;  // where the root's value ends up (moved to the output if not there)
  int n_slots = 0;
};

// Registers for every node in evaluation order. A snippet's scratch registers are taken while its
// arguments are still held, and its result register after them, so the three never meet (the
// snippet contract); a result may reuse its first argument's slot, which the contract allows.
// The output register may be input 0's (the generator aliases them), so the root writes it only
// when it reads input 0, if at all, as its first argument.
Plan plan_registers(const std::vector<ExprNode>& nodes, const std::vector<int>& n_tmp) {
  Plan p;
  std::vector<int> free;
  auto take = [&] {
    if (free.empty()) return p.n_slots++;
    const int s = free.back();
    free.pop_back();
    return s;
  };
  std::vector<Where> at(nodes.size());
  const int root = static_cast<int>(nodes.size()) - 1;
  for (int i = 0; i <= root; ++i) {
    const ExprNode& e = nodes[i];
    if (e.kind == ExprKind::INPUT) {
      at[i] = {Where::INPUT, e.input};
      continue;
    }
    Step s{i, {}, {}, {}};
    if (e.kind == ExprKind::CALL) {
      const int arity = elementwise_op(e.op)->arity;
      for (int k = 0; k < arity; ++k) s.arg[k] = at[e.arg[k]];
      for (int t = 0; t < n_tmp[i]; ++t) s.tmp.push_back(take());
      bool reads_input0_late = false;
      for (int k = 1; k < arity; ++k) reads_input0_late |= s.arg[k].kind == Where::INPUT && s.arg[k].index == 0;
      if (i == root && !reads_input0_late) s.dst = {Where::OUT, 0};
      else if (s.arg[0].kind == Where::SLOT) s.dst = s.arg[0];
      else s.dst = {Where::SLOT, take()};
      for (int t : s.tmp) free.push_back(t);
      for (int k = 0; k < arity; ++k)
        if (s.arg[k].kind == Where::SLOT && !(s.dst.kind == Where::SLOT && s.dst.index == s.arg[k].index))
          free.push_back(s.arg[k].index);
    } else {
      s.dst = i == root ? Where{Where::OUT, 0} : Where{Where::SLOT, take()};
    }
    at[i] = s.dst;
    p.steps.push_back(std::move(s));
  }
  p.result = at[root];
  return p;
}

std::vector<int> tmps_of(const std::vector<ExprNode>& nodes, std::vector<OpSnippet>* snippets) {
  std::vector<int> n_tmp(nodes.size(), 0);
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].kind != ExprKind::CALL) continue;
    OpSnippet s = elementwise_op(nodes[i].op)->snippet(nodes[i].imm);
    n_tmp[i] = s.n_tmp;
    if (snippets) (*snippets)[i] = std::move(s);
  }
  return n_tmp;
}

Snippet calc_body(std::vector<ExprNode> nodes, Plan plan, std::vector<OpSnippet> snippets) {
  using Xbyak::Xmm;
  return [nodes = std::move(nodes), plan = std::move(plan), snippets = std::move(snippets)](
             VecGen& v, const Xmm& out, const std::vector<Xmm>& src, const std::vector<Xmm>& tmp) {
    auto reg = [&](const Where& w) { return w.kind == Where::INPUT ? src[w.index] : w.kind == Where::SLOT ? tmp[w.index] : out; };
    for (const Step& s : plan.steps) {
      const ExprNode& e = nodes[s.node];
      if (e.kind == ExprKind::CONST) {
        v.g.vmovups(reg(s.dst), v.cst(e.value));
        continue;
      }
      std::vector<Xmm> args, scratch;
      for (int k = 0; k < elementwise_op(e.op)->arity; ++k) args.push_back(reg(s.arg[k]));
      for (int t : s.tmp) scratch.push_back(tmp[t]);
      snippets[s.node].body(v, reg(s.dst), args, scratch);
    }
    if (reg(plan.result).getIdx() != out.getIdx()) v.g.vmovaps(out, reg(plan.result));
  };
}

// The generator's view of the request: the iteration space and feeds, inputs the expression
// never names left unread. False where the broadcast is not one the generator covers.
bool calc_layout(const JitRequest& r, const std::vector<ExprNode>& nodes, EwSpec* s) {
  std::vector<Shape> shapes;
  for (size_t k = 0; k < r.ins.in.size(); ++k) shapes.push_back(r.in[k].shape);
  if (!broadcast_layout(shapes, r.out[0].shape, s)) return false;
  std::vector<bool> named(shapes.size(), false);
  for (const ExprNode& e : nodes)
    if (e.kind == ExprKind::INPUT) named[e.input] = true;
  for (size_t k = 0; k < shapes.size(); ++k)
    if (!named[k]) s->in[k] = Feed::NONE;
  return true;
}

Result<KernelRef> calc_jit(const JitRequest& r, KernelCache& cache) {
  Result<std::vector<ExprNode>> nodes = parse_checked(r.ins);
  if (!nodes) return nodes.status();
  EwSpec s;
  if (!calc_layout(r, nodes.value(), &s)) return KernelRef();
  std::vector<OpSnippet> snippets(nodes->size());
  Plan plan = plan_registers(nodes.value(), tmps_of(nodes.value(), &snippets));
  s.op = "calc";
  s.imms = "expr=" + text_of(r.ins);
  s.isa = r.isa;
  s.n_tmp = plan.n_slots;
  Snippet body = calc_body(std::move(nodes.value()), std::move(plan), std::move(snippets));
  s.body = [body = std::move(body)](VecGen& v, const std::vector<Xbyak::Xmm>& dst, const std::vector<Xbyak::Xmm>& src,
                                    const std::vector<Xbyak::Xmm>& tmp) { body(v, dst[0], src, tmp); };
  elementwise_part(&s, r.part, r.n_parts);
  return elementwise_kernel(s, cache);
}

int calc_parts(const JitRequest& r, int threads) {
  Result<std::vector<ExprNode>> nodes = parse_checked(r.ins);
  EwSpec s;
  if (!nodes || !calc_layout(r, nodes.value(), &s)) return 1;
  return elementwise_max_parts(s, threads);
}

// ---- gradient ----
using Dy = const std::vector<TensorId>&;
using Need = const std::vector<bool>&;
using Dx = std::vector<TensorId>*;

Status calc_grad(GradBuilder& b, const Instruction& ins, Dy dy, Need need, Dx dx) {
  Result<std::vector<ExprNode>> parsed = parse_checked(ins);
  if (!parsed) return parsed.status();
  const std::vector<ExprNode>& nodes = parsed.value();
  const int root = static_cast<int>(nodes.size()) - 1;
  // Which nodes lead to a wanted input.
  std::vector<bool> wanted(nodes.size(), false);
  for (int i = 0; i <= root; ++i) {
    const ExprNode& e = nodes[i];
    if (e.kind == ExprKind::INPUT) wanted[i] = need[e.input];
    if (e.kind != ExprKind::CALL) continue;
    for (int k = 0; k < elementwise_op(e.op)->arity; ++k) wanted[i] = wanted[i] || wanted[e.arg[k]];
    if (wanted[i] && !op_hooks(e.op).grad)
      return Status::errorf("CALC: no gradient through {} (expr \"{}\", column {})", op_info(e.op).mnemonic,
                            text_of(ins), e.col);
  }
  if (dy[0] == NO_TENSOR || !wanted[root]) return Status::ok();
  // The values again, as instructions; the root's is y.
  std::vector<TensorId> value(nodes.size(), NO_TENSOR);
  for (int i = 0; i <= root; ++i) {
    const ExprNode& e = nodes[i];
    if (e.kind == ExprKind::INPUT) value[i] = ins.in[e.input];
    if (e.kind == ExprKind::CONST) value[i] = b.constant(e.value);
    if (e.kind != ExprKind::CALL) continue;
    if (i == root) {
      value[i] = ins.out[0];
      continue;
    }
    std::vector<TensorId> args;
    for (int k = 0; k < elementwise_op(e.op)->arity; ++k) args.push_back(value[e.arg[k]]);
    value[i] = b.emit(e.op, args, ew_imm_args(e.op, e.imm));
  }
  // From the root down: each call's rule on those values; an input's gradients add up.
  std::vector<TensorId> g(nodes.size(), NO_TENSOR);
  g[root] = dy[0];
  for (int i = root; i >= 0; --i) {
    const ExprNode& e = nodes[i];
    if (g[i] == NO_TENSOR || !wanted[i]) continue;
    if (e.kind == ExprKind::INPUT) {
      const TensorId gi = b.sum_to(g[i], b.type(ins.in[e.input]).shape);
      (*dx)[e.input] = (*dx)[e.input] == NO_TENSOR ? gi : b.emit(Opcode::ADD, {(*dx)[e.input], gi});
      continue;
    }
    if (e.kind != ExprKind::CALL) continue;
    const int arity = elementwise_op(e.op)->arity;
    Instruction call = make_instruction(e.op, {}, {value[i]});
    for (int k = 0; k < arity; ++k) call.in.push_back(value[e.arg[k]]);
    for (const auto& [key, v] : ew_imm_args(e.op, e.imm)) NNASM_TRY(set_imm(call, key, v));
    std::vector<bool> need_args(arity);
    for (int k = 0; k < arity; ++k) need_args[k] = wanted[e.arg[k]];
    std::vector<TensorId> d(arity, NO_TENSOR);
    NNASM_TRY(op_hooks(e.op).grad(b, call, {g[i]}, need_args, &d));
    for (int k = 0; k < arity; ++k) g[e.arg[k]] = d[k];
  }
  return b.status();
}

}  // namespace

bool calc_jit_fits(const std::vector<ExprNode>& nodes, int n_inputs) {
  // Every input in a register of its own, the output's, the AVX2 tail mask: 16 in all.
  return n_inputs + plan_registers(nodes, tmps_of(nodes, nullptr)).n_slots + 2 <= 16;
}

OpHooks op_hooks_CALC() { return {calc_shape, calc_ref, calc_scratch, calc_grad, calc_jit, calc_parts}; }

}  // namespace nnasm

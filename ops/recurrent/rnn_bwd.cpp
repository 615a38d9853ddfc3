// LSTM_BWD, GRU_BWD and RNN_BWD: the recurrent layers' backpropagation through time, one
// instruction each, emitted by the gradient rule of LSTM, GRU and RNN (rnn_grad, below).
//
// Computes   the gradients of a loss L with respect to the forward instruction's inputs
//            (ops/recurrent/lstm.cpp, gru.cpp, rnn.cpp), given dL/dy, dL/d(last h) (and
//            dL/d(last c)). For each direction and sequence b, over the steps t of its length in
//            the reverse of the direction's order, from dh = d(last h)[b] (and dc = d(last c)[b]):
//              dh += dy[t]; the cell's derivative gives the gates' pre-activation gradients da_t
//              (G·H), dc_{t−1}, and dh_{t−1} = (the direct term: GRU's z⊙dh) + da_t·R;
//            then dx_t = da_t·W, dW = Σ da_tᵀ·x_t, dR = Σ da_tᵀ·h_{t−1}, dWb = dRb = Σ da_t and
//            dP = Σ the peepholes' terms, summed over the directions' own weights (x's over both).
//            GRU's candidate row h of R and Rb sees r⊙h_{t−1} (linear_before_reset=0) or
//            takes da_h⊙r (=1). dh0 and dc0 are dh and dc before the sequence's first step
//            (d(last h), d(last c) for a length of 0). Steps past a sequence's length contribute
//            nothing, and dy there is not read.
// Inputs     the forward's inputs in its order: x, W, R, B, [h0 (, c0)], [lens], [P]; then y, the
//            forward's output; dy f32 shaped as y; d(last h) f32[D,N,H] ([N,D,H] with
//            batch_first); LSTM: d(last c) likewise.
// Outputs    dx, dW, dR, dB shaped as x, W, R, B; dh0 f32[D,N,H] ([N,D,H] with batch_first),
//            even without an initial state; LSTM also dc0 likewise and dP f32[D,3H] (zeros
//            without peepholes). No gradient with respect to lens (integers).
// Immediates the forward op's: direction, batch_first, initial, lens; peephole (LSTM_BWD),
//            linear_before_reset (GRU_BWD), activation (RNN_BWD).
// Gradient   none (as the other *_BWD ops).
// Kernels    reference: the gates' pre-activations recomputed for the whole sequence with one
//            product (LSTM: [x | h_{t−1}]·[W | R]ᵀ, h_{t−1} gathered from y; GRU: two for its z
//            and r, two for its candidate; RNN: none, its derivative is read from y), LSTM's c by
//            its recurrence; then per step only the cell's derivative and one product
//            da_t·[W | R], which gives dx_t and dh_{t−1} at once (GRU: da_t·R and its
//            candidate's); then [dW | dR] = Σ da_tᵀ·[x_t | h_{t−1}] as one whole-sequence product
//            (GRU: dW, dR and dx apart), dB as column sums. The products are ops/linalg/gemm.h's
//            gemm_accumulate, the cells Eigen's vector logistic and tanh, all on scratch. JIT
//            (`f32_lstm_bwd__avx512_gemm`, `f32_gru_bwd__avx2_gemm`, …): the same driver with each
//            product a generated GEMM of jit/gemm.h for its exact shape (the gates' with their
//            bias row), and LSTM's cell four generated elementwise kernels per row
//            (jit/elementwise.h, jit/vmath.h's sigmoid and tanh; Eigen's where AVX2 lacks the
//            registers); GRU's and RNN's cells stay Eigen's.
// Notes      The forward keeps nothing: h_{t−1} is read from y (the previous step in the
//            direction's order, else h0 or zeros) and LSTM's c recomputed, so the listing keeps
//            its form; y must be what the forward made of these inputs. x past a sequence's
//            length is not read (a NaN there stays out of dW). One part: the steps are
//            sequential, and each product is whole.
#include <algorithm>
#include <cstring>

#include <Eigen/Core>
#include <fmt/format.h>

#include "jit/elementwise.h"
#include "jit/gemm.h"
#include "jit/vmath.h"
#include "ops/grad.h"
#include "ops/linalg/gemm.h"
#include "ops/recurrent/recurrent.h"

namespace nnasm {
namespace {

using Vec = Eigen::Map<Eigen::ArrayXf>;
using CVec = Eigen::Map<const Eigen::ArrayXf>;

// Where the backward's own inputs follow the forward's.
struct BwdInputs {
  int y, dy, dh, dc;  // dc −1 but for LSTM
  int n_in;
};

BwdInputs bwd_inputs(const RnnGeom& g) {
  const int k = g.n_in;
  const bool lstm = g.kind == RnnKind::LSTM;
  return {k, k + 1, k + 2, lstm ? k + 3 : -1, k + (lstm ? 4 : 3)};
}

Opcode forward_op(RnnKind k) { return k == RnnKind::LSTM ? Opcode::LSTM : k == RnnKind::GRU ? Opcode::GRU : Opcode::RNN; }
Opcode backward_op(RnnKind k) {
  return k == RnnKind::LSTM ? Opcode::LSTM_BWD : k == RnnKind::GRU ? Opcode::GRU_BWD : Opcode::RNN_BWD;
}

Status bwd_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  RnnGeom g = rnn_immediates(ins);
  const BwdInputs b = bwd_inputs(g);
  const char* mn = ins.info().mnemonic;
  const bool lstm = g.kind == RnnKind::LSTM;
  if (static_cast<int>(in.size()) != b.n_in)
    return Status::errorf("{} takes {} inputs ({}, y, dy, dh{}), as its immediates say, got {}", mn, b.n_in,
                          rnn_operand_names(g), lstm ? ", dc" : "", in.size());
  NNASM_TRY(rnn_geom(ins, std::vector<TensorType>(in.begin(), in.begin() + g.n_in), &g));
  const auto expect = [&](int k, const char* what, const Shape& want, const char* why) {
    const TensorType& t = in[static_cast<size_t>(k)];
    if (t.dtype == DType::F32 && t.shape == want) return Status::ok();
    return Status::errorf("{}: {} {} must be f32{}, {} {} makes", mn, what, operand_str(ins, k, t), want.str(), why,
                          op_info(forward_op(g.kind)).mnemonic);
  };
  NNASM_TRY(expect(b.y, "y", g.y_shape(), "the y"));
  NNASM_TRY(expect(b.dy, "dy", g.y_shape(), "shaped as the y"));
  NNASM_TRY(expect(b.dh, "dh", g.state_shape(), "shaped as the last h"));
  if (lstm) NNASM_TRY(expect(b.dc, "dc", g.state_shape(), "shaped as the last c"));
  for (int k = 0; k < 4; ++k) (*out)[static_cast<size_t>(k)] = in[static_cast<size_t>(k)];
  (*out)[4] = TensorType{DType::F32, g.state_shape()};
  if (lstm) {
    (*out)[5] = TensorType{DType::F32, g.state_shape()};
    (*out)[6] = TensorType{DType::F32, Shape{g.d, 3 * g.h}};
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// The plan: the products, and the scratch they and the driver run on

// The products, C += op(A)·op(B). Rows are time-major (row t·N + b for step t of sequence b)
// whatever the layout, so that one step's rows are contiguous. LSTM and RNN keep x and h_{t−1}
// side by side in one matrix XH [rows, I+H], and W and R in one WR [G·H, I+H] (row j: W's row j,
// then R's), so that each product is one GEMM with the longer K or N:
//   GATES    A = XH·WRᵀ + b the pre-activations (LSTM; RNN's derivative needs only y)
//   STEP_WR  S = da_t·WR    [N, I+H] per step: dx_t, then dh_{t−1}
//   DWR      daᵀ·XH         [G·H, I+H]: dW, then dR
// GRU's candidate sees r⊙h_{t−1} or r⊙(h_{t−1}·Rhᵀ + Rbh), so its z and r block ("main", 2H) and
// its h block (*_H) have products of their own, on x (XS) and h_{t−1} (HP) apart.
enum Prod : int { GATES, STEP_WR, DWR, XW, XW_H, HR, HR_H, STEP, STEP_H, DW, DW_H, DR, DR_H, DX, DX_H, N_PROD };

constexpr int64_t align16(int64_t n) { return (n + 15) / 16 * 16; }

struct BwdPlan {
  RnnGeom g;
  int64_t rows = 0, gw = 0, xh = 0;  // T·N; the main block's width (G·H, GRU's 2H); I + H
  bool gru = false, lstm = false, lbr = false;
  bool x_copy = false;   // GRU: x gathered time-major (batch_first or lens)
  bool dx_copy = false;  // dx gathered time-major, scattered at the end (batch_first)
  GemmShape shape[N_PROD] = {};
  bool used[N_PROD] = {};
  // Scratch offsets in floats. a: the gates' pre-activations, then activations, then gradients
  // (main block); c, tc: LSTM's c and tanh(c); xhm, wr, dwr, s: LSTM's and RNN's XH, WR, DWR, S;
  // ah, qh: GRU's candidate, its x part then h̃ then da_h, and its recurrent part (then da_h⊙r,
  // linear_before_reset=1); hp: h_{t−1}; rhp: r⊙h_{t−1} (linear_before_reset=0); xs: x; step,
  // step2: a step's products; dxs: dx time-major; carry_h, carry_c: each sequence's dh, dc between
  // steps; tmp: a row's temporaries; zero: H zeros (the state before the first step); then the
  // GEMMs' own.
  int64_t a = 0, c = 0, tc = 0, xhm = 0, wr = 0, dwr = 0, s = 0, ah = 0, qh = 0, hp = 0, rhp = 0, xs = 0, step = 0,
          step2 = 0, dxs = 0, carry_h = 0, carry_c = 0, tmp = 0, zero = 0, gemm = 0;
};

BwdPlan bwd_plan(const RnnGeom& g) {
  BwdPlan p;
  p.g = g;
  p.lstm = g.kind == RnnKind::LSTM;
  p.gru = g.kind == RnnKind::GRU;
  p.lbr = g.linear_before_reset;
  const int64_t H = g.h, I = g.i, N = g.n;
  p.rows = g.t * g.n;
  p.gw = p.gru ? 2 * H : g.gh();
  p.xh = I + H;
  p.x_copy = p.gru && (g.batch_first || g.in_lens >= 0);
  p.dx_copy = g.batch_first;
  const auto use = [&](Prod k, GemmShape s) {
    p.shape[k] = s;
    p.used[k] = true;
  };
  if (!p.gru) {
    if (p.lstm) use(GATES, {p.rows, p.gw, p.xh, false, true});
    use(STEP_WR, {N, p.xh, p.gw, false, false});
    use(DWR, {p.gw, p.xh, p.rows, true, false});
  } else {
    use(XW, {p.rows, p.gw, I, false, true});
    use(HR, {p.rows, p.gw, H, false, true});
    use(STEP, {N, H, p.gw, false, false});
    use(DW, {p.gw, I, p.rows, true, false});
    use(DR, {p.gw, H, p.rows, true, false});
    use(DX, {p.rows, I, p.gw, false, false});
    use(XW_H, {p.rows, H, I, false, true});
    use(HR_H, {p.rows, H, H, false, true});
    use(STEP_H, {N, H, H, false, false});
    use(DW_H, {H, I, p.rows, true, false});
    use(DR_H, {H, H, p.rows, true, false});
    use(DX_H, {p.rows, I, H, false, false});
  }
  int64_t at = 0;
  const auto take = [&](int64_t n) {
    const int64_t o = at;
    at += align16(n);
    return o;
  };
  p.a = take(p.rows * p.gw);
  if (p.lstm) {
    p.c = take(p.rows * H);
    p.tc = take(p.rows * H);
  }
  if (!p.gru) {
    p.xhm = take(p.rows * p.xh);
    p.wr = take(p.gw * p.xh);
    p.dwr = take(p.gw * p.xh);
    p.s = take(N * p.xh);
  } else {
    p.ah = take(p.rows * H);
    p.qh = take(p.rows * H);
    p.hp = take(p.rows * H);
    if (!p.lbr) p.rhp = take(p.rows * H);
    if (p.x_copy) p.xs = take(p.rows * I);
    p.step = take(N * H);
    p.step2 = take(N * H);
  }
  if (p.dx_copy) p.dxs = take(p.rows * I);
  p.carry_h = take(N * H);
  if (p.lstm) p.carry_c = take(N * H);
  p.tmp = take(4 * H);
  p.zero = take(H);
  p.gemm = at;
  return p;
}

GemmJitDesc jit_desc(const BwdPlan& p, Prod k) {
  GemmJitDesc d;
  d.op = "matmul";
  d.m = p.shape[k].m;
  d.n = p.shape[k].n;
  d.k = p.shape[k].k;
  d.trans_a = p.shape[k].trans_a;
  d.trans_b = p.shape[k].trans_b;
  // GATES writes its bias row with the product (no pass filling the gates first); the others add.
  d.bias = k == GATES;
  d.accumulate = k != GATES;
  return d;
}

BwdPlan plan_of(const Instruction& ins, const TensorType* in) {
  RnnGeom g = rnn_immediates(ins);
  const Shape& x = in[0].shape;
  g.t = x[g.batch_first ? 1 : 0];
  g.n = x[g.batch_first ? 0 : 1];
  g.i = x[2];
  g.h = in[2].shape[2];
  return bwd_plan(g);
}

size_t bwd_scratch(const Instruction& ins, const TensorType* in, const TensorType*) {
  const BwdPlan p = plan_of(ins, in);
  size_t gemm = 0;
  for (int k = 0; k < N_PROD; ++k)
    if (p.used[k])
      gemm = std::max({gemm, gemm_scratch_floats(p.shape[k]) * sizeof(float), jit_gemm_scratch_bytes(jit_desc(p, Prod(k)))});
  return static_cast<size_t>(p.gemm) * sizeof(float) + gemm;
}

// ---------------------------------------------------------------------------------------------
// LSTM's cell, one row of H at a time: Eigen's packets, or four generated elementwise kernels
// (jit/elementwise.h) when the JIT kernel runs. Gates in a row of A: i, o, f, c̃ (ONNX's order).

// The generated kernels: the recomputation (gates: i, f, c̃ and c; out: o and tanh c) and the
// derivative (out: da_o and dc_t; gates: da_i, da_f, da_c̃ and dc_{t−1}). Null: Eigen's.
struct CellKernels {
  KernelFn gates = nullptr, out = nullptr, dout = nullptr, dgates = nullptr;
};

void call_cell(KernelFn fn, std::initializer_list<const void*> in, std::initializer_list<void*> out) {
  const KernelArgs a{in.begin(), out.begin(), nullptr, nullptr, nullptr, static_cast<int>(in.size()),
                     static_cast<int>(out.size()), nullptr, nullptr, nullptr};
  fn(&a);
}

// a: the row's pre-activations, activated in place; cp: c_{t−1}; p: the peepholes (Pi, Po, Pf)
// or null; writes c and tanh(c).
void lstm_forward_row(const CellKernels* k, int64_t H, float* a, const float* cp, const float* p, float* c, float* tc) {
  float *ai = a, *ao = a + H, *af = a + 2 * H, *ac = a + 3 * H;
  if (k && k->gates) {
    if (p) {
      call_cell(k->gates, {ai, af, ac, cp, p, p + 2 * H}, {ai, af, ac, c});
      call_cell(k->out, {ao, c, p + H}, {ao, tc});
    } else {
      call_cell(k->gates, {ai, af, ac, cp}, {ai, af, ac, c});
      call_cell(k->out, {ao, c}, {ao, tc});
    }
    return;
  }
  Vec gi(ai, H), go(ao, H), gf(af, H), gc(ac, H), cv(c, H);
  CVec cpv(cp, H);
  if (p) {
    gi += CVec(p, H) * cpv;
    gf += CVec(p + 2 * H, H) * cpv;
  }
  gi = gi.logistic();
  gf = gf.logistic();
  gc = gc.tanh();
  cv = gf * cpv + gi * gc;
  if (p) go += CVec(p + H, H) * cv;
  go = go.logistic();
  Vec(tc, H) = cv.tanh();
}

// a: the row's activated gates, replaced by their pre-activations' gradients; dh (the carried
// gradient) + dy is h's gradient; dc: c's carried gradient in, c_{t−1}'s out; dp: the
// peepholes' gradients, added to (with p).
void lstm_backward_row(const CellKernels* k, int64_t H, float* a, const float* c, const float* tc, const float* cp,
                       const float* p, const float* dh, const float* dy, float* dc, float* dp, float* tmp) {
  float *ai = a, *ao = a + H, *af = a + 2 * H, *ac = a + 3 * H;
  if (k && k->dout) {
    if (p) {
      call_cell(k->dout, {ao, tc, dh, dy, dc, p + H}, {ao, dc});
      call_cell(k->dgates, {ai, af, ac, cp, dc, p, p + 2 * H}, {ai, af, ac, dc});
    } else {
      call_cell(k->dout, {ao, tc, dh, dy, dc}, {ao, dc});
      call_cell(k->dgates, {ai, af, ac, cp, dc}, {ai, af, ac, dc});
    }
  } else {
    Vec gi(ai, H), go(ao, H), gf(af, H), gc(ac, H), dcv(dc, H), dht(tmp, H), dac(tmp + H, H);
    CVec tcv(tc, H), cpv(cp, H);
    dht = CVec(dh, H) + CVec(dy, H);
    dcv += dht * go * (1.0f - tcv.square());
    go = dht * tcv * go * (1.0f - go);  // da_o
    if (p) dcv += go * CVec(p + H, H);
    dac = dcv * gi * (1.0f - gc.square());
    gi = dcv * gc * gi * (1.0f - gi);  // da_i
    gc = dac;
    dht = dcv * gf;                       // dc_{t−1}, before f is replaced
    gf = dcv * cpv * gf * (1.0f - gf);  // da_f
    dcv = dht;
    if (p) dcv += gi * CVec(p, H) + gf * CVec(p + 2 * H, H);
  }
  if (p) {
    CVec cpv(cp, H);
    Vec(dp, H) += CVec(ai, H) * cpv;
    Vec(dp + H, H) += CVec(ao, H) * CVec(c, H);
    Vec(dp + 2 * H, H) += CVec(af, H) * cpv;
  }
}

// ---------------------------------------------------------------------------------------------
// The driver, shared by the reference and the JIT kernel: they differ only in who runs the
// products and LSTM's cell

void fill_rows(float* dst, int64_t rows, const float* row, int64_t width) {
  for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * width, row, static_cast<size_t>(width) * sizeof(float));
}

struct Products {
  const BwdPlan* p;
  const KernelFn* jit;  // per product; nullptr (or a null entry): gemm_accumulate
  float* scratch;
  // C += op(A)·op(B); GATES: C = op(A)·op(B) + bias in every row.
  void operator()(Prod k, const float* a, const float* b, float* c, const float* bias = nullptr) const {
    if (jit && jit[k]) {
      call_kernel(jit[k], {a, b, bias}, c, scratch);
      return;
    }
    if (k == GATES) fill_rows(c, p->shape[k].m, bias, p->shape[k].n);
    gemm_accumulate(p->shape[k], a, b, c, scratch);
  }
};

// db[j] += Σ_r m[r, j] over the rows of a [rows, width] matrix, row after row.
void add_column_sums(const float* m, int64_t rows, int64_t width, float* db) {
  Vec s(db, width);
  for (int64_t r = 0; r < rows; ++r) s += CVec(m + r * width, width);
}

void bwd_run(const KernelArgs* args, const BwdPlan& p, const KernelFn* jit, const CellKernels* cell) {
  const RnnGeom& g = p.g;
  const BwdInputs bi = bwd_inputs(g);
  const int64_t T = g.t, N = g.n, I = g.i, H = g.h, GH = g.gh(), gw = p.gw, rows = p.rows, XH = p.xh;
  const auto in = [&](int k) { return k < 0 ? nullptr : static_cast<const float*>(args->in[k]); };
  const RnnInputs fwd = rnn_inputs(g, args);
  const float *x = fwd.x, *w = fwd.w, *r = fwd.r, *bias = fwd.b, *h0 = fwd.h0, *c0 = fwd.c0, *peep = fwd.p;
  const float *y = in(bi.y), *dy = in(bi.dy), *dlast_h = in(bi.dh), *dlast_c = in(bi.dc);
  const auto out = [&](int k) { return static_cast<float*>(args->out[k]); };
  float *dx = out(0), *dw = out(1), *dr = out(2), *db = out(3), *dh0 = out(4);
  float* dc0 = p.lstm ? out(5) : nullptr;
  float* dp = p.lstm ? out(6) : nullptr;
  float* sc = static_cast<float*>(args->scratch);
  float *A = sc + p.a, *C = sc + p.c, *TC = sc + p.tc, *XHm = sc + p.xhm, *WR = sc + p.wr, *Dwr = sc + p.dwr;
  float *S = sc + p.s, *AH = sc + p.ah, *QH = sc + p.qh, *HP = sc + p.hp, *RHP = sc + p.rhp;
  float *step = sc + p.step, *step2 = sc + p.step2, *carry_h = sc + p.carry_h, *carry_c = sc + p.carry_c;
  float *tmp = sc + p.tmp, *zero = sc + p.zero;
  const Products prod{&p, jit, sc + p.gemm};
  const auto len = [&](int64_t b) { return rnn_length(g, args, b); };
  const auto active = [&](int64_t t, int64_t b) { return t < len(b); };
  const auto bytes = [](int64_t n) { return static_cast<size_t>(n) * sizeof(float); };
  std::memset(zero, 0, bytes(H));

  // x time-major, with zeros past each sequence's length (XH's first I columns, or XS).
  const float* X = x;
  float* xdst = p.gru ? (p.x_copy ? sc + p.xs : nullptr) : XHm;
  const int64_t ldx = p.gru ? I : XH;
  if (xdst) {
    for (int64_t t = 0; t < T; ++t)
      for (int64_t b = 0; b < N; ++b) {
        float* row = xdst + (t * N + b) * ldx;
        if (active(t, b))
          std::memcpy(row, x + g.x_at(t, b), bytes(I));
        else
          std::memset(row, 0, bytes(I));
      }
    X = xdst;
  }
  float* dx_rows = p.dx_copy ? sc + p.dxs : dx;
  std::memset(dx_rows, 0, bytes(rows * I));
  if (dp) std::memset(dp, 0, bytes(g.d * 3 * H));

  for (int dir = 0; dir < g.d; ++dir) {
    const bool back = g.backwards(dir);
    const float* wd = w + dir * GH * I;
    const float* rd = r + dir * GH * H;
    const float* bd = bias + dir * 2 * GH;
    const float* pd = peep ? peep + dir * 3 * H : nullptr;
    // The step before t in the direction's order, −1 for the first (whose state is h0, c0).
    const auto prev = [&](int64_t t, int64_t b) { return back ? (t + 1 < len(b) ? t + 1 : -1) : t - 1; };
    const auto c_prev = [&](int64_t t, int64_t b) {
      const int64_t q = prev(t, b);
      return q >= 0 ? C + (q * N + b) * H : c0 ? c0 + g.s_at(dir, b) : zero;
    };
    // h_{t−1}: XH's last H columns (LSTM, RNN) or HP (GRU); zeros past the length.
    float* hdst = p.gru ? HP : XHm + I;
    const int64_t ldh = p.gru ? H : XH;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t b = 0; b < N; ++b) {
        const int64_t q = prev(t, b);
        const float* src = !active(t, b) ? zero : q >= 0 ? y + g.y_at(q, dir, b) : h0 ? h0 + g.s_at(dir, b) : zero;
        std::memcpy(hdst + (t * N + b) * ldh, src, bytes(H));
      }
    if (!p.gru)
      for (int64_t j = 0; j < gw; ++j) {
        std::memcpy(WR + j * XH, wd + j * I, bytes(I));
        std::memcpy(WR + j * XH + I, rd + j * H, bytes(H));
      }

    // The gates again: pre-activations of the whole sequence, then the activations in place.
    if (p.lstm) {
      for (int64_t j = 0; j < gw; ++j) tmp[j] = bd[j] + bd[GH + j];  // tmp holds 4H floats
      prod(GATES, XHm, WR, A, tmp);
      for (int64_t s_ = 0; s_ < T; ++s_) {
        const int64_t t = back ? T - 1 - s_ : s_;  // c's recurrence: the direction's order
        for (int64_t b = 0; b < N; ++b) {
          if (!active(t, b)) continue;
          const int64_t row = t * N + b;
          lstm_forward_row(cell, H, A + row * gw, c_prev(t, b), pd, C + row * H, TC + row * H);
        }
      }
    } else if (p.gru) {
      for (int64_t j = 0; j < gw; ++j) tmp[j] = bd[j] + bd[GH + j];
      fill_rows(A, rows, tmp, gw);
      fill_rows(AH, rows, bd + 2 * H, H);
      fill_rows(QH, rows, bd + GH + 2 * H, H);
      prod(XW, X, wd, A);
      prod(HR, HP, rd, A);
      prod(XW_H, X, wd + 2 * H * I, AH);
      for (int64_t row = 0; row < rows; ++row) {
        Vec zr(A + row * gw, gw);
        zr = zr.logistic();
        if (!p.lbr) Vec(RHP + row * H, H) = CVec(A + row * gw + H, H) * CVec(HP + row * H, H);
      }
      prod(HR_H, p.lbr ? HP : RHP, rd + 2 * H * H, QH);
      for (int64_t row = 0; row < rows; ++row) {
        Vec cand(AH + row * H, H);
        CVec q(QH + row * H, H);
        if (p.lbr)
          cand = (cand + CVec(A + row * gw + H, H) * q).tanh();
        else
          cand = (cand + q).tanh();
      }
    }

    // Back through time: the steps in the reverse of the direction's order; a sequence's dh and
    // dc wait in carry_h, carry_c through the steps past its length.
    for (int64_t b = 0; b < N; ++b) {
      std::memcpy(carry_h + b * H, dlast_h + g.s_at(dir, b), bytes(H));
      if (p.lstm) std::memcpy(carry_c + b * H, dlast_c + g.s_at(dir, b), bytes(H));
    }
    for (int64_t s_ = 0; s_ < T; ++s_) {
      const int64_t t = back ? s_ : T - 1 - s_;
      for (int64_t b = 0; b < N; ++b) {
        const int64_t row = t * N + b;
        float* a = A + row * gw;
        if (!active(t, b)) {
          std::memset(a, 0, bytes(gw));
          if (p.gru) {
            std::memset(AH + row * H, 0, bytes(H));
            if (p.lbr) std::memset(QH + row * H, 0, bytes(H));
          }
          continue;
        }
        const float* dyt = dy + g.y_at(t, dir, b);
        float* ch = carry_h + b * H;
        if (p.lstm) {
          lstm_backward_row(cell, H, a, C + row * H, TC + row * H, c_prev(t, b), pd, ch, dyt, carry_c + b * H,
                            dp ? dp + dir * 3 * H : nullptr, tmp);
        } else if (!p.gru) {
          CVec h(y + g.y_at(t, dir, b), H);
          Vec da(a, H);
          if (g.relu)
            da = (h > 0.0f).select(CVec(ch, H) + CVec(dyt, H), 0.0f);
          else
            da = (CVec(ch, H) + CVec(dyt, H)) * (1.0f - h.square());
        } else {  // GRU: carry_h becomes the direct term dh⊙z
          Vec z(a, H), rg(a + H, H), cand(AH + row * H, H), chv(ch, H);
          CVec hp(HP + row * H, H);
          Vec dh(tmp, H), dah(tmp + H, H);
          dh = chv + CVec(dyt, H);
          dah = dh * (1.0f - z) * (1.0f - cand.square());
          chv = dh * z;
          z = dh * (hp - cand) * z * (1.0f - z);  // da_z
          cand = dah;
          if (p.lbr) {
            Vec dq(tmp + 2 * H, H), q(QH + row * H, H);
            dq = dah * rg;              // the gradient of h·Rhᵀ + Rbh
            rg = dq * q * (1.0f - rg);  // da_r
            q = dq;
          }
        }
      }
      if (!p.gru) {
        // dx_t and dh_{t−1} in one product.
        std::memset(S, 0, bytes(N * XH));
        prod(STEP_WR, A + t * N * gw, WR, S);
        for (int64_t b = 0; b < N; ++b) {
          Vec(dx_rows + (t * N + b) * I, I) += CVec(S + b * XH, I);
          if (active(t, b)) std::memcpy(carry_h + b * H, S + b * XH + I, bytes(H));
        }
        continue;
      }
      if (!p.lbr) {
        // d(r⊙h_{t−1}) = da_h·Rh first: r's gradient needs it.
        std::memset(step2, 0, bytes(N * H));
        prod(STEP_H, AH + t * N * H, rd + 2 * H * H, step2);
        for (int64_t b = 0; b < N; ++b) {
          if (!active(t, b)) continue;
          const int64_t row = t * N + b;
          Vec rg(A + row * gw + H, H);
          CVec drh(step2 + b * H, H);
          Vec(carry_h + b * H, H) += drh * rg;
          rg = drh * CVec(HP + row * H, H) * rg * (1.0f - rg);  // da_r
        }
      }
      std::memset(step, 0, bytes(N * H));
      prod(STEP, A + t * N * gw, rd, step);
      if (p.lbr) prod(STEP_H, QH + t * N * H, rd + 2 * H * H, step);
      for (int64_t b = 0; b < N; ++b)
        if (active(t, b)) Vec(carry_h + b * H, H) += CVec(step + b * H, H);
    }
    for (int64_t b = 0; b < N; ++b) {
      std::memcpy(dh0 + g.s_at(dir, b), carry_h + b * H, bytes(H));
      if (p.lstm) std::memcpy(dc0 + g.s_at(dir, b), carry_c + b * H, bytes(H));
    }

    // The whole sequence's products and sums.
    float* dwd = dw + dir * GH * I;
    float* drd = dr + dir * GH * H;
    float* dbd = db + dir * 2 * GH;
    std::memset(dbd, 0, bytes(2 * GH));
    add_column_sums(A, rows, gw, dbd);
    if (!p.gru) {
      std::memset(Dwr, 0, bytes(gw * XH));
      prod(DWR, A, XHm, Dwr);
      for (int64_t j = 0; j < gw; ++j) {
        std::memcpy(dwd + j * I, Dwr + j * XH, bytes(I));
        std::memcpy(drd + j * H, Dwr + j * XH + I, bytes(H));
      }
    } else {
      std::memset(dwd, 0, bytes(GH * I));
      std::memset(drd, 0, bytes(GH * H));
      prod(DW, A, X, dwd);
      prod(DR, A, HP, drd);
      prod(DX, A, wd, dx_rows);
      prod(DW_H, AH, X, dwd + 2 * H * I);
      prod(DR_H, p.lbr ? QH : AH, p.lbr ? HP : RHP, drd + 2 * H * H);
      prod(DX_H, AH, wd + 2 * H * I, dx_rows);
      add_column_sums(AH, rows, H, dbd + 2 * H);
      add_column_sums(p.lbr ? QH : AH, rows, H, dbd + GH + 2 * H);
    }
    std::memcpy(dbd + GH, dbd, bytes(gw));
  }
  if (p.dx_copy)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t b = 0; b < N; ++b) std::memcpy(dx + g.x_at(t, b), dx_rows + (t * N + b) * I, bytes(I));
}

void bwd_ref(const KernelArgs* a) { bwd_run(a, plan_of(*a->ins, a->in_type), nullptr, nullptr); }

// ---------------------------------------------------------------------------------------------
// The JIT kernel: the driver above, bound to a generated GEMM per product and, for LSTM, four
// generated elementwise kernels for the cell

using Xbyak::CodeGenerator;
using Xbyak::Xmm;
using Regs = std::vector<Xmm>;

// x: a_i, a_f, a_c̃, c_{t−1} [, Pi, Pf] → i, f, c̃, c.   t0: a pre-activation; t1–t4: vmath's
void cell_gates(VecGen& v, const Regs& d, const Regs& x, const Regs& t, bool peephole) {
  CodeGenerator& g = v.g;
  const Regs vt{t[1], t[2], t[3], t[4]};
  if (peephole) {
    g.vmovaps(t[0], x[0]);
    g.vfmadd231ps(t[0], x[4], x[3]);
    vmath::sigmoid(v, d[0], t[0], vt);
    g.vmovaps(t[0], x[1]);
    g.vfmadd231ps(t[0], x[5], x[3]);
    vmath::sigmoid(v, d[1], t[0], vt);
  } else {
    vmath::sigmoid(v, d[0], x[0], vt);
    vmath::sigmoid(v, d[1], x[1], vt);
  }
  vmath::tanh(v, d[2], x[2], vt);
  g.vmulps(d[3], d[1], x[3]);
  g.vfmadd231ps(d[3], d[0], d[2]);  // c = f⊙c_{t−1} + i⊙c̃
}

// x: a_o, c [, Po] → o, tanh c.
void cell_out(VecGen& v, const Regs& d, const Regs& x, const Regs& t, bool peephole) {
  CodeGenerator& g = v.g;
  const Regs vt{t[1], t[2], t[3], t[4]};
  if (peephole) {
    g.vmovaps(t[0], x[0]);
    g.vfmadd231ps(t[0], x[2], x[1]);
    vmath::sigmoid(v, d[0], t[0], vt);
  } else {
    vmath::sigmoid(v, d[0], x[0], vt);
  }
  vmath::tanh(v, d[1], x[1], vt);
}

// x: o, tanh c, dh, dy, dc [, Po] → da_o, dc_t = dc + (dh + dy)⊙o⊙(1 − tanh²c) [+ da_o⊙Po].
void cell_dout(VecGen& v, const Regs& d, const Regs& x, const Regs& t, bool peephole) {
  CodeGenerator& g = v.g;
  g.vaddps(t[0], x[2], x[3]);  // dh + dy
  g.vmovups(t[1], v.cst(1.f));
  g.vsubps(t[1], t[1], x[0]);  // 1 − o
  g.vmulps(t[2], t[0], x[1]);
  g.vmulps(t[2], t[2], x[0]);
  g.vmulps(t[2], t[2], t[1]);  // da_o
  g.vmovups(t[3], v.cst(1.f));
  g.vfnmadd231ps(t[3], x[1], x[1]);  // 1 − tanh²c
  g.vmulps(t[0], t[0], x[0]);
  g.vmovaps(d[1], x[4]);
  g.vfmadd231ps(d[1], t[0], t[3]);
  if (peephole) g.vfmadd231ps(d[1], t[2], x[5]);
  g.vmovaps(d[0], t[2]);
}

// x: i, f, c̃, c_{t−1}, dc_t [, Pi, Pf] → da_i, da_f, da_c̃, dc_{t−1} = dc_t⊙f [+ da_i⊙Pi + da_f⊙Pf].
void cell_dgates(VecGen& v, const Regs& d, const Regs& x, const Regs& t, bool peephole) {
  CodeGenerator& g = v.g;
  g.vmovups(t[0], v.cst(1.f));
  g.vsubps(t[0], t[0], x[0]);  // 1 − i
  g.vmulps(t[1], x[4], x[2]);
  g.vmulps(t[1], t[1], x[0]);
  g.vmulps(t[1], t[1], t[0]);  // da_i
  g.vmovups(t[2], v.cst(1.f));
  g.vsubps(t[2], t[2], x[1]);  // 1 − f
  g.vmulps(t[3], x[4], x[3]);
  g.vmulps(t[3], t[3], x[1]);
  g.vmulps(t[3], t[3], t[2]);  // da_f
  g.vmovups(t[4], v.cst(1.f));
  g.vfnmadd231ps(t[4], x[2], x[2]);  // 1 − c̃²
  g.vmulps(d[2], x[4], x[0]);
  g.vmulps(d[2], d[2], t[4]);  // da_c̃
  g.vmulps(d[3], x[4], x[1]);
  if (peephole) {
    g.vfmadd231ps(d[3], t[1], x[5]);
    g.vfmadd231ps(d[3], t[3], x[6]);
  }
  g.vmovaps(d[1], t[3]);
  g.vmovaps(d[0], t[1]);
}

Result<KernelRef> cell_kernel(const char* op, int n_in, int n_out, bool peephole, int64_t h, Isa isa,
                              void (*body)(VecGen&, const Regs&, const Regs&, const Regs&, bool), KernelCache& cache) {
  EwSpec s;
  s.op = op;
  s.imms = peephole ? "peephole" : "";
  s.isa = isa;
  s.inner = h;
  s.in.assign(static_cast<size_t>(n_in + (peephole ? (n_out == 2 ? 1 : 2) : 0)), Feed::STREAM);
  s.n_out = n_out;
  s.n_tmp = 5;
  s.body = [body, peephole](VecGen& v, const Regs& d, const Regs& x, const Regs& t) { body(v, d, x, t, peephole); };
  return elementwise_kernel(s, cache);
}

struct BwdKernel {
  BwdPlan plan;
  KernelFn fn[N_PROD] = {};
  CellKernels cell;
  std::vector<std::shared_ptr<const JitKernel>> keep;
};

void bwd_jit_run(const KernelArgs* a, const void* data) {
  const BwdKernel* k = static_cast<const BwdKernel*>(data);
  bwd_run(a, k->plan, k->fn, &k->cell);
}

Result<std::shared_ptr<const JitKernel>> bwd_jit(const JitRequest& r, KernelCache& cache) {
  auto k = std::make_shared<BwdKernel>();
  k->plan = plan_of(r.ins, r.in);
  const RnnGeom& g = k->plan.g;
  for (int p = 0; p < N_PROD; ++p) {
    if (!k->plan.used[p]) continue;
    Result<std::shared_ptr<const JitKernel>> gemm = jit_gemm(jit_desc(k->plan, Prod(p)), r.isa, cache);
    if (!gemm || !gemm.value()) return gemm;
    k->fn[p] = gemm.value()->fn();
    k->keep.push_back(gemm.value());
  }
  if (k->plan.lstm) {
    // Where a cell kernel cannot be had (AVX2 runs out of registers for some), Eigen's cell runs.
    const bool ph = g.peephole;
    Result<KernelRef> cells[] = {cell_kernel("lstm_bwd_gates", 4, 4, ph, g.h, r.isa, cell_gates, cache),
                                 cell_kernel("lstm_bwd_out", 2, 2, ph, g.h, r.isa, cell_out, cache),
                                 cell_kernel("lstm_bwd_dout", 5, 2, ph, g.h, r.isa, cell_dout, cache),
                                 cell_kernel("lstm_bwd_dgates", 5, 4, ph, g.h, r.isa, cell_dgates, cache)};
    bool all = true;
    for (const Result<KernelRef>& c : cells) all = all && c && c.value();
    if (all) {
      k->cell = {cells[0].value()->fn(), cells[1].value()->fn(), cells[2].value()->fn(), cells[3].value()->fn()};
      for (const Result<KernelRef>& c : cells) k->keep.push_back(c.value());
    }
  }
  const char* kind = g.kind == RnnKind::LSTM ? "lstm" : g.kind == RnnKind::GRU ? "gru" : "rnn";
  const std::string name = fmt::format("f32_{}_bwd__{}_gemm", kind, isa_name(r.isa));
  const std::string key = fmt::format("rnn_bwd:{}:{}:t{}n{}i{}h{}d{}:rev{}bf{}:h0{}c0{}lens{}p{}:lbr{}relu{}", kind,
                                      isa_name(r.isa), g.t, g.n, g.i, g.h, g.d, int(g.reverse), int(g.batch_first),
                                      g.in_h0, g.in_c0, g.in_lens, g.in_p, int(g.linear_before_reset), int(g.relu));
  return cache.get(key, [&] { return build_bound_kernel(name, bwd_jit_run, std::shared_ptr<const void>(k)); });
}

}  // namespace

Status rnn_grad(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy, const std::vector<bool>& need,
                std::vector<TensorId>* dx) {
  const RnnGeom g = rnn_immediates(ins);
  // Where each output of the *_BWD goes among the forward's inputs (−1: an input it lacks).
  const int to[] = {0, 1, 2, 3, g.in_h0, g.in_c0, g.in_p};
  const Opcode op = backward_op(g.kind);
  const int n_out = op_info(op).n_out;
  bool any = false;
  for (int k = 0; k < n_out; ++k) any |= to[k] >= 0 && need[static_cast<size_t>(to[k])];
  if (!any) return Status::ok();  // lens alone: integers, a zero gradient
  std::vector<TensorId> in = ins.in;
  in.push_back(ins.out[0]);
  for (size_t k = 0; k < ins.out.size(); ++k)
    in.push_back(dy[k] != NO_TENSOR ? dy[k] : b.emit(Opcode::FILL, {ins.out[k]}, {{"value", imm_f(0)}}));
  std::vector<std::pair<const char*, Imm>> imms;
  for (const ImmSpec& s : op_info(op).imms) imms.emplace_back(s.key.c_str(), ins.imm[imm_index(ins.info(), s.key)]);
  const std::vector<TensorId> d = b.emit_all(op, std::move(in), imms);
  for (size_t k = 0; k < d.size(); ++k)
    if (to[k] >= 0 && need[static_cast<size_t>(to[k])]) (*dx)[static_cast<size_t>(to[k])] = d[k];
  return b.status();
}

OpHooks op_hooks_LSTM_BWD() { return {bwd_shape, bwd_ref, bwd_scratch, nullptr, bwd_jit}; }
OpHooks op_hooks_GRU_BWD() { return {bwd_shape, bwd_ref, bwd_scratch, nullptr, bwd_jit}; }
OpHooks op_hooks_RNN_BWD() { return {bwd_shape, bwd_ref, bwd_scratch, nullptr, bwd_jit}; }

}  // namespace nnasm

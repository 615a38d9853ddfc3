// The recurrent ops' shared geometry, shape check and reference driver (ops/recurrent/recurrent.h).
// The reference runs each sequence of the batch on its own, step by step in its own direction,
// with plain float dot products: the oracle the generated kernels are compared with.
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "ops/recurrent/recurrent.h"

namespace nnasm {

namespace {

// The *_BWD ops take their forward op's immediates, at the same places.
#define NNASM_RNN_OPS Opcode::LSTM, Opcode::GRU, Opcode::RNN, Opcode::LSTM_BWD, Opcode::GRU_BWD, Opcode::RNN_BWD
constexpr int DIRECTION = NNASM_IMM_SHARED(direction, NNASM_RNN_OPS);
constexpr int BATCH_FIRST = NNASM_IMM_SHARED(batch_first, NNASM_RNN_OPS);
constexpr int INITIAL = NNASM_IMM_SHARED(initial, NNASM_RNN_OPS);
constexpr int LENS = NNASM_IMM_SHARED(lens, NNASM_RNN_OPS);
#undef NNASM_RNN_OPS
constexpr int PEEPHOLE = NNASM_IMM_SHARED(peephole, Opcode::LSTM, Opcode::LSTM_BWD);
constexpr int LINEAR_BEFORE_RESET = NNASM_IMM_SHARED(linear_before_reset, Opcode::GRU, Opcode::GRU_BWD);
constexpr int ACTIVATION = NNASM_IMM_SHARED(activation, Opcode::RNN, Opcode::RNN_BWD);
static_assert(NNASM_CHOICE(RNN, activation, relu) == NNASM_CHOICE(RNN_BWD, activation, relu),
              "RNN_BWD spells its activations as RNN");  // the directions are NNASM_RNN_IMMS in all six
static_assert(NNASM_CHOICE(LSTM, direction, reverse) == NNASM_CHOICE(GRU, direction, reverse) &&
                  NNASM_CHOICE(LSTM, direction, reverse) == NNASM_CHOICE(RNN, direction, reverse) &&
                  NNASM_CHOICE(LSTM, direction, bidirectional) == NNASM_CHOICE(RNN, direction, bidirectional) &&
                  NNASM_CHOICE(LSTM, direction, bidirectional) == NNASM_CHOICE(GRU, direction, bidirectional),
              "the recurrent ops list their directions alike");

}  // namespace

RnnGeom rnn_immediates(const Instruction& ins) {
  RnnGeom g;
  g.kind = rnn_kind(ins.op);
  g.gates = g.kind == RnnKind::LSTM ? 4 : g.kind == RnnKind::GRU ? 3 : 1;
  const int64_t dir = ins.i(DIRECTION);
  g.d = dir == NNASM_CHOICE(LSTM, direction, bidirectional) ? 2 : 1;
  g.reverse = dir == NNASM_CHOICE(LSTM, direction, reverse);
  g.batch_first = ins.i(BATCH_FIRST) != 0;
  if (g.kind == RnnKind::LSTM) g.peephole = (ins.i(PEEPHOLE) != 0);
  if (g.kind == RnnKind::GRU) g.linear_before_reset = (ins.i(LINEAR_BEFORE_RESET) != 0);
  if (g.kind == RnnKind::RNN) g.relu = ins.i(ACTIVATION) == NNASM_CHOICE(RNN, activation, relu);
  int k = 4;
  if ((ins.i(INITIAL)) != 0) {
    g.in_h0 = k++;
    if (g.kind == RnnKind::LSTM) g.in_c0 = k++;
  }
  if ((ins.i(LENS)) != 0) g.in_lens = k++;
  if (g.peephole) g.in_p = k++;
  g.n_in = k;
  return g;
}

std::string rnn_operand_names(const RnnGeom& g) {
  std::string s = "x, W, R, B";
  if (g.in_h0 >= 0) s += g.in_c0 >= 0 ? ", h0, c0" : ", h0";
  if (g.in_lens >= 0) s += ", lens";
  if (g.in_p >= 0) s += ", P";
  return s;
}

namespace {

Status expect(const Instruction& ins, const std::vector<TensorType>& in, int k, const char* what, const Shape& want) {
  if (in[static_cast<size_t>(k)].dtype != DType::F32 || in[static_cast<size_t>(k)].shape != want)
    return Status::errorf("{}: {} {} must be f32{}", ins.info().mnemonic, what, operand_str(ins, k, in[static_cast<size_t>(k)]),
                          want.str());
  return Status::ok();
}

}  // namespace

RnnKind rnn_kind(Opcode op) {
  if (op == Opcode::LSTM || op == Opcode::LSTM_BWD) return RnnKind::LSTM;
  return op == Opcode::GRU || op == Opcode::GRU_BWD ? RnnKind::GRU : RnnKind::RNN;
}

Status rnn_geom(const Instruction& ins, const std::vector<TensorType>& in, RnnGeom* out) {
  RnnGeom g = rnn_immediates(ins);
  const char* mn = ins.info().mnemonic;
  if (static_cast<int>(in.size()) != g.n_in)
    return Status::errorf("{} takes {} inputs ({}), as its immediates say, got {}", mn, g.n_in, rnn_operand_names(g),
                          in.size());
  const TensorType& x = in[0];
  if (x.dtype != DType::F32 || x.shape.rank != 3)
    return Status::errorf("{}: x {} must be f32 [{}]", mn, operand_str(ins, 0, x), g.batch_first ? "N,T,I" : "T,N,I");
  g.t = x.shape[g.batch_first ? 1 : 0];
  g.n = x.shape[g.batch_first ? 0 : 1];
  g.i = x.shape[2];
  if (g.t < 1 || g.n < 1 || g.i < 1)
    return Status::errorf("{}: x {} has an empty sequence, batch or input", mn, operand_str(ins, 0, x));
  const TensorType& r = in[2];
  if (r.dtype != DType::F32 || r.shape.rank != 3 || r.shape[0] != g.d || r.shape[1] % g.gates != 0 || r.shape[1] < 1 ||
      r.shape[2] * g.gates != r.shape[1])
    return Status::errorf("{}: R {} must be f32[{},{}·H,H] ({} direction{}, {} gate{})", mn, operand_str(ins, 2, r), g.d,
                          g.gates, g.d, g.d == 1 ? "" : "s", g.gates, g.gates == 1 ? "" : "s");
  g.h = r.shape[2];
  NNASM_TRY(expect(ins, in, 1, "W", Shape{g.d, g.gh(), g.i}));
  NNASM_TRY(expect(ins, in, 3, "B", Shape{g.d, 2 * g.gh()}));
  if (g.in_h0 >= 0) NNASM_TRY(expect(ins, in, g.in_h0, "h0", g.state_shape()));
  if (g.in_c0 >= 0) NNASM_TRY(expect(ins, in, g.in_c0, "c0", g.state_shape()));
  if (g.in_p >= 0) NNASM_TRY(expect(ins, in, g.in_p, "P", Shape{g.d, 3 * g.h}));
  if (g.in_lens >= 0) {
    const TensorType& l = in[static_cast<size_t>(g.in_lens)];
    if (l.dtype != DType::I32 || l.shape != Shape{g.n})
      return Status::errorf("{}: lens {} must be i32[{}], one length per sequence of x {}", mn,
                            operand_str(ins, g.in_lens, l), g.n, x.str());
  }
  // y is the largest operand; x, W and R already passed the tensor limits.
  if (g.t * g.d * g.n > MAX_TENSOR_ELEMENTS / g.h)
    return Status::errorf("{}: y [{}·{}·{}·{}] exceeds {} elements", mn, g.t, g.d, g.n, g.h, MAX_TENSOR_ELEMENTS);
  *out = g;
  return Status::ok();
}

RnnGeom rnn_geom(const KernelArgs* a) {
  RnnGeom g = rnn_immediates(*a->ins);
  const Shape& x = a->in_type[0].shape;
  g.t = x[g.batch_first ? 1 : 0];
  g.n = x[g.batch_first ? 0 : 1];
  g.i = x[2];
  g.h = a->in_type[2].shape[2];
  return g;
}

Status rnn_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  RnnGeom g;
  NNASM_TRY(rnn_geom(ins, in, &g));
  (*out)[0] = TensorType{DType::F32, g.y_shape()};
  for (size_t k = 1; k < out->size(); ++k) (*out)[k] = TensorType{DType::F32, g.state_shape()};
  return Status::ok();
}

RnnInputs rnn_inputs(const RnnGeom& g, const KernelArgs* a) {
  const auto in = [&](int k) { return k < 0 ? nullptr : static_cast<const float*>(a->in[k]); };
  return {in(0), in(1), in(2), in(3), in(g.in_h0), in(g.in_c0), in(g.in_p)};
}

RnnOutputs rnn_outputs(const RnnGeom& g, const KernelArgs* a) {
  return {static_cast<float*>(a->out[0]), static_cast<float*>(a->out[1]),
          g.kind == RnnKind::LSTM ? static_cast<float*>(a->out[2]) : nullptr};
}

int64_t rnn_length(const RnnGeom& g, const KernelArgs* a, int64_t b) {
  if (g.in_lens < 0) return g.t;
  const int32_t len = static_cast<const int32_t*>(a->in[g.in_lens])[b];
  return std::clamp<int64_t>(len, 0, g.t);
}

size_t rnn_ref_scratch(const Instruction& ins, const TensorType* in, const TensorType*) {
  const int64_t h = in[2].shape[2], gh = in[2].shape[1];
  (void)ins;
  return static_cast<size_t>(4 * h + 2 * gh) * sizeof(float);
}

namespace {

// out[j] = bias[j] + Σ_k v[k]·m[j][k] for j < rows: a row-major [rows, cols] matrix times v.
void affine(const float* m, const float* v, const float* bias, int64_t rows, int64_t cols, float* out) {
  for (int64_t j = 0; j < rows; ++j) {
    const float* mj = m + j * cols;
    float s = 0;
    for (int64_t k = 0; k < cols; ++k) s += v[k] * mj[k];
    out[j] = s + bias[j];
  }
}

// One step of sequence b in direction dir: reads x_t and the state (h, c), writes the new state.
// xw holds x_t·Wᵀ + Wb, hr h·Rᵀ + Rb (G·H each); tmp H floats.
void cell(const RnnGeom& g, const float* wt, const float* rt, const float* wb, const float* rb, const float* p,
          const float* xt, float* h, float* c, float* xw, float* hr, float* tmp) {
  const int64_t H = g.h;
  affine(wt, xt, wb, g.gh(), g.i, xw);
  switch (g.kind) {
    case RnnKind::RNN:
      affine(rt, h, rb, H, H, hr);
      for (int64_t j = 0; j < H; ++j) {
        const float a = xw[j] + hr[j];
        h[j] = g.relu ? std::max(a, 0.0f) : std::tanh(a);
      }
      break;
    case RnnKind::GRU: {
      // z and r from h; the candidate's recurrent product from r⊙h, or r⊙(h·Rhᵀ + Rbh).
      affine(rt, h, rb, 2 * H, H, hr);
      float* z = tmp;
      for (int64_t j = 0; j < H; ++j) z[j] = rnn_sigmoid(xw[j] + hr[j]);
      float* r = hr;  // r overwrites its own pre-activation
      for (int64_t j = 0; j < H; ++j) r[j] = rnn_sigmoid(xw[H + j] + hr[H + j]);
      float* cand = hr + 2 * H;
      if (g.linear_before_reset) {
        affine(rt + 2 * H * H, h, rb + 2 * H, H, H, cand);
        for (int64_t j = 0; j < H; ++j) cand[j] = std::tanh(xw[2 * H + j] + r[j] * cand[j]);
      } else {
        float* rh = r + H;  // r⊙h, over r's second half (z is in tmp)
        for (int64_t j = 0; j < H; ++j) rh[j] = r[j] * h[j];
        affine(rt + 2 * H * H, rh, rb + 2 * H, H, H, cand);
        for (int64_t j = 0; j < H; ++j) cand[j] = std::tanh(xw[2 * H + j] + cand[j]);
      }
      for (int64_t j = 0; j < H; ++j) h[j] = (1 - z[j]) * cand[j] + z[j] * h[j];
      break;
    }
    case RnnKind::LSTM: {
      affine(rt, h, rb, 4 * H, H, hr);
      for (int64_t j = 0; j < H; ++j) {
        const float pi = p ? p[j] : 0, po = p ? p[H + j] : 0, pf = p ? p[2 * H + j] : 0;
        const float i = rnn_sigmoid(xw[j] + hr[j] + pi * c[j]);
        const float f = rnn_sigmoid(xw[2 * H + j] + hr[2 * H + j] + pf * c[j]);
        const float cc = std::tanh(xw[3 * H + j] + hr[3 * H + j]);
        c[j] = f * c[j] + i * cc;
        const float o = rnn_sigmoid(xw[H + j] + hr[H + j] + po * c[j]);
        h[j] = o * std::tanh(c[j]);
      }
      break;
    }
  }
}

}  // namespace

void rnn_ref(const KernelArgs* a) {
  const RnnGeom g = rnn_geom(a);
  const int64_t H = g.h, GH = g.gh();
  const RnnInputs in = rnn_inputs(g, a);
  const float *x = in.x, *w = in.w, *r = in.r, *bias = in.b, *h0 = in.h0, *c0 = in.c0, *p = in.p;
  const RnnOutputs out = rnn_outputs(g, a);
  float *y = out.y, *yh = out.yh, *yc = out.yc;
  float* h = static_cast<float*>(a->scratch);
  float* c = h + H;
  float* tmp = c + H;
  float* xw = tmp + 2 * H;
  float* hr = xw + GH;
  for (int dir = 0; dir < g.d; ++dir) {
    const float* wd = w + dir * GH * g.i;
    const float* rd = r + dir * GH * H;
    const float* wb = bias + dir * 2 * GH;
    const float* pd = p ? p + dir * 3 * H : nullptr;
    for (int64_t b = 0; b < g.n; ++b) {
      const int64_t len = rnn_length(g, a, b);
      const int64_t s0 = g.s_at(dir, b);
      for (int64_t j = 0; j < H; ++j) {
        h[j] = h0 ? h0[s0 + j] : 0.0f;
        c[j] = c0 ? c0[s0 + j] : 0.0f;
      }
      for (int64_t s = 0; s < len; ++s) {
        const int64_t t = g.backwards(dir) ? len - 1 - s : s;
        cell(g, wd, rd, wb, wb + GH, pd, x + g.x_at(t, b), h, c, xw, hr, tmp);
        std::memcpy(y + g.y_at(t, dir, b), h, static_cast<size_t>(H) * sizeof(float));
      }
      for (int64_t t = len; t < g.t; ++t) std::memset(y + g.y_at(t, dir, b), 0, static_cast<size_t>(H) * sizeof(float));
      std::memcpy(yh + s0, h, static_cast<size_t>(H) * sizeof(float));
      if (yc) std::memcpy(yc + s0, c, static_cast<size_t>(H) * sizeof(float));
    }
  }
}

}  // namespace nnasm

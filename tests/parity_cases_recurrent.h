// Parity cases of the recurrent layers LSTM, GRU and RNN. A fragment of tests/ops_parity_test.cpp,
// included inside its namespace after its helpers (ParityRun, EXACT) and before parity_table(),
// which names the cases_* functions below. The expectation is ONNX's equations written out in
// double, one sequence at a time, with indices computed here for either layout.
#pragma once

struct RecurrentCase {
  int64_t t, n, i, h;
  const char* direction;  // forward, reverse or bidirectional
  bool batch_first, initial, lens;
  bool variant;  // LSTM: peepholes; GRU: linear_before_reset; RNN: relu
};

std::vector<RecurrentCase> recurrent_cases() {
  return {
      {1, 1, 1, 1, "forward", false, false, false, false},
      {3, 2, 7, 7, "reverse", false, true, false, true},
      {5, 3, 15, 16, "bidirectional", true, true, true, false},
      {4, 1, 17, 17, "forward", true, false, true, true},
      {2, 2, 33, 15, "bidirectional", false, false, false, true},  // W is large
      {7, 3, 5, 33, "reverse", true, true, true, false},
      {6, 4, 3, 5, "bidirectional", false, true, true, true},
  };
}

// The forward op's operands of one case, in its order (x, W, R, B, [h0 (, c0)], [lens], [P]) for
// `g` gates (4 with `lstm`), and each sequence's length clamped to T (also for the *_BWD cases).
std::vector<HostTensor> recurrent_operands(ParityRun& r, const RecurrentCase& c, int g, bool lstm,
                                           std::vector<int64_t>* len) {
  const int d = std::string(c.direction) == "bidirectional" ? 2 : 1;
  const int64_t T = c.t, N = c.n, I = c.i, H = c.h;
  const double scale = 1 / std::sqrt(static_cast<double>(H));
  std::vector<HostTensor> in;
  in.push_back(random_f32(c.batch_first ? Shape{N, T, I} : Shape{T, N, I}, r.rng(), -2, 2));
  in.push_back(random_f32(Shape{d, g * H, I}, r.rng(), -scale, scale));
  in.push_back(random_f32(Shape{d, g * H, H}, r.rng(), -scale, scale));
  in.push_back(random_f32(Shape{d, 2 * g * H}, r.rng(), -scale, scale));
  const Shape state = c.batch_first ? Shape{N, d, H} : Shape{d, N, H};
  if (c.initial) {
    in.push_back(random_f32(state, r.rng(), -1, 1));
    if (lstm) in.push_back(random_f32(state, r.rng(), -1, 1));
  }
  len->assign(static_cast<size_t>(N), T);
  if (c.lens) {
    // Every length from 0 to T among the batch, and one out of range, which counts as T.
    HostTensor l{TensorType{DType::I32, Shape{N}}, {}};
    for (int64_t b = 0; b < N; ++b) {
      int64_t v = (b * 3 + T) % (T + 1);
      if (b == 2) v = T + 4;
      l.v.push_back(static_cast<double>(v));
      (*len)[static_cast<size_t>(b)] = std::min(v, T);
    }
    in.push_back(l);
  }
  if (lstm && c.variant) in.push_back(random_f32(Shape{d, 3 * H}, r.rng(), -1, 1));
  return in;
}

// The operands and expected outputs of one case.
void recurrent_case(ParityRun& r, Opcode op, const RecurrentCase& c) {
  const int g = op == Opcode::LSTM ? 4 : op == Opcode::GRU ? 3 : 1;
  const int d = std::string(c.direction) == "bidirectional" ? 2 : 1;
  const int64_t T = c.t, N = c.n, I = c.i, H = c.h;
  const Shape state = c.batch_first ? Shape{N, d, H} : Shape{d, N, H};
  const bool lstm = op == Opcode::LSTM;
  std::vector<int64_t> len;
  std::vector<HostTensor> in = recurrent_operands(r, c, g, lstm, &len);
  const bool peephole = lstm && c.variant;

  const auto at = [&](const HostTensor& t, int64_t off) { return t.v[static_cast<size_t>(off)]; };
  const auto x_at = [&](int64_t t, int64_t b) { return (c.batch_first ? b * T + t : t * N + b) * I; };
  const auto y_at = [&](int64_t t, int dir, int64_t b) {
    return (c.batch_first ? (b * T + t) * d + dir : (t * d + dir) * N + b) * H;
  };
  const auto s_at = [&](int dir, int64_t b) { return (c.batch_first ? b * d + dir : dir * N + b) * H; };
  const auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  const Shape y_shape = c.batch_first ? Shape{N, T, d, H} : Shape{T, d, N, H};
  Expected y{HostTensor{TensorType{DType::F32, y_shape}, std::vector<double>(static_cast<size_t>(count_of(y_shape)))}, {},
             {2e-5, 2e-4}};
  const size_t ns = static_cast<size_t>(count_of(state));
  Expected yh{HostTensor{TensorType{DType::F32, state}, std::vector<double>(ns)}, {}, y.tol};
  Expected yc = yh;
  const HostTensor &x = in[0], &w = in[1], &rw = in[2], &bias = in[3];
  const HostTensor* h0 = c.initial ? &in[4] : nullptr;
  const HostTensor* c0 = c.initial && lstm ? &in[5] : nullptr;
  const HostTensor* p = peephole ? &in.back() : nullptr;
  for (int dir = 0; dir < d; ++dir) {
    const bool backwards = dir == 1 || std::string(c.direction) == "reverse";
    // Gate k's row j of W, R and the biases, for this direction.
    const auto xw = [&](int k, int64_t j, int64_t t, int64_t b) {
      double s = at(bias, (dir * 2 * g + k) * H + j);
      for (int64_t q = 0; q < I; ++q) s += at(x, x_at(t, b) + q) * at(w, ((dir * g + k) * H + j) * I + q);
      return s;
    };
    const auto hr = [&](int k, int64_t j, const std::vector<double>& hv) {
      double s = at(bias, (dir * 2 * g + g + k) * H + j);
      for (int64_t q = 0; q < H; ++q) s += hv[static_cast<size_t>(q)] * at(rw, ((dir * g + k) * H + j) * H + q);
      return s;
    };
    for (int64_t b = 0; b < N; ++b) {
      std::vector<double> hv(static_cast<size_t>(H)), cv(static_cast<size_t>(H));
      for (int64_t j = 0; j < H; ++j) {
        hv[static_cast<size_t>(j)] = h0 ? at(*h0, s_at(dir, b) + j) : 0;
        cv[static_cast<size_t>(j)] = c0 ? at(*c0, s_at(dir, b) + j) : 0;
      }
      const int64_t L = len[static_cast<size_t>(b)];
      for (int64_t s = 0; s < L; ++s) {
        const int64_t t = backwards ? L - 1 - s : s;
        std::vector<double> nh(static_cast<size_t>(H)), nc = cv;
        for (int64_t j = 0; j < H; ++j) {
          const size_t u = static_cast<size_t>(j);
          if (op == Opcode::RNN) {
            const double a = xw(0, j, t, b) + hr(0, j, hv);
            nh[u] = c.variant ? std::max(a, 0.0) : std::tanh(a);
          } else if (op == Opcode::GRU) {
            const double z = sig(xw(0, j, t, b) + hr(0, j, hv));
            double cand;
            if (c.variant) {
              cand = std::tanh(xw(2, j, t, b) + sig(xw(1, j, t, b) + hr(1, j, hv)) * hr(2, j, hv));
            } else {
              std::vector<double> rh(static_cast<size_t>(H));
              for (int64_t q = 0; q < H; ++q)
                rh[static_cast<size_t>(q)] = sig(xw(1, q, t, b) + hr(1, q, hv)) * hv[static_cast<size_t>(q)];
              cand = std::tanh(xw(2, j, t, b) + hr(2, j, rh));
            }
            nh[u] = (1 - z) * cand + z * hv[u];
          } else {
            const auto pp = [&](int k) { return p ? at(*p, (dir * 3 + k) * H + j) : 0.0; };
            const double ig = sig(xw(0, j, t, b) + hr(0, j, hv) + pp(0) * cv[u]);
            const double fg = sig(xw(2, j, t, b) + hr(2, j, hv) + pp(2) * cv[u]);
            const double cc = std::tanh(xw(3, j, t, b) + hr(3, j, hv));
            nc[u] = fg * cv[u] + ig * cc;
            const double og = sig(xw(1, j, t, b) + hr(1, j, hv) + pp(1) * nc[u]);
            nh[u] = og * std::tanh(nc[u]);
          }
        }
        hv = nh;
        cv = nc;
        for (int64_t j = 0; j < H; ++j) y.t.v[static_cast<size_t>(y_at(t, dir, b) + j)] = hv[static_cast<size_t>(j)];
      }
      for (int64_t j = 0; j < H; ++j) {
        yh.t.v[static_cast<size_t>(s_at(dir, b) + j)] = hv[static_cast<size_t>(j)];
        yc.t.v[static_cast<size_t>(s_at(dir, b) + j)] = cv[static_cast<size_t>(j)];
      }
    }
  }
  std::vector<ImmArg> imms{imm_enum("direction", c.direction), imm_b("batch_first", c.batch_first),
                           imm_b("initial", c.initial), imm_b("lens", c.lens)};
  if (op == Opcode::LSTM) imms.push_back(imm_b("peephole", c.variant));
  if (op == Opcode::GRU) imms.push_back(imm_b("linear_before_reset", c.variant));
  if (op == Opcode::RNN) imms.push_back(imm_enum("activation", c.variant ? "relu" : "tanh"));
  std::vector<Expected> want{y, yh};
  if (lstm) want.push_back(yc);
  r.check_all(in, imms, want);
}

void cases_recurrent(ParityRun& r, Opcode op) {
  for (const RecurrentCase& c : recurrent_cases()) recurrent_case(r, op, c);
}
void cases_lstm(ParityRun& r) { cases_recurrent(r, Opcode::LSTM); }
void cases_gru(ParityRun& r) { cases_recurrent(r, Opcode::GRU); }
void cases_rnn(ParityRun& r) { cases_recurrent(r, Opcode::RNN); }

// Parity cases of LSTM_BWD, GRU_BWD and RNN_BWD. A fragment of tests/ops_parity_test.cpp,
// included inside its namespace after tests/parity_cases_recurrent.h (whose RecurrentCase list it
// sweeps) and before parity_table(). The expectation is backpropagation through time written out
// in double, one sequence at a time: the forward of ONNX's equations keeping every step's state,
// then the chain rule step by step, back from the last step, with indices computed here.
#pragma once

// One direction of one sequence: the states the forward passed through, step s (in the
// direction's order) at time t[s].
struct RecurrentTrace {
  std::vector<int64_t> t;
  std::vector<std::vector<double>> h_prev, c_prev, c, gate;  // gate: the activated gates, G·H
  std::vector<std::vector<double>> q;                         // GRU: h_prev·Rhᵀ + Rbh, or r⊙h_prev
  std::vector<double> h_last, c_last;
};

inline void recurrent_bwd_case(ParityRun& r, Opcode op, const RecurrentCase& c) {
  const bool lstm = op == Opcode::LSTM_BWD, gru = op == Opcode::GRU_BWD, rnn = op == Opcode::RNN_BWD;
  const int g = lstm ? 4 : gru ? 3 : 1;
  const int d = std::string(c.direction) == "bidirectional" ? 2 : 1;
  const int64_t T = c.t, N = c.n, I = c.i, H = c.h;
  const Shape state = c.batch_first ? Shape{N, d, H} : Shape{d, N, H};
  std::vector<int64_t> len;
  std::vector<HostTensor> in = recurrent_operands(r, c, g, lstm, &len);
  const bool peephole = lstm && c.variant;
  const HostTensor x = in[0], w = in[1], rw = in[2], bias = in[3];
  const HostTensor* h0 = c.initial ? &in[4] : nullptr;
  const HostTensor* c0 = c.initial && lstm ? &in[5] : nullptr;
  const HostTensor* p = peephole ? &in.back() : nullptr;

  const auto x_at = [&](int64_t t, int64_t b) { return (c.batch_first ? b * T + t : t * N + b) * I; };
  const auto y_at = [&](int64_t t, int dir, int64_t b) {
    return (c.batch_first ? (b * T + t) * d + dir : (t * d + dir) * N + b) * H;
  };
  const auto s_at = [&](int dir, int64_t b) { return (c.batch_first ? b * d + dir : dir * N + b) * H; };
  const auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  const auto W = [&](int dir, int k, int64_t j, int64_t q) { return w.v[static_cast<size_t>(((dir * g + k) * H + j) * I + q)]; };
  const auto R = [&](int dir, int k, int64_t j, int64_t q) { return rw.v[static_cast<size_t>(((dir * g + k) * H + j) * H + q)]; };
  const auto Wb = [&](int dir, int k, int64_t j) { return bias.v[static_cast<size_t>((dir * 2 * g + k) * H + j)]; };
  const auto Rb = [&](int dir, int k, int64_t j) { return bias.v[static_cast<size_t>((dir * 2 * g + g + k) * H + j)]; };
  const auto P = [&](int dir, int k, int64_t j) { return p ? p->v[static_cast<size_t>((dir * 3 + k) * H + j)] : 0.0; };
  const auto xv = [&](int64_t t, int64_t b, int64_t q) { return x.v[static_cast<size_t>(x_at(t, b) + q)]; };
  const size_t uH = static_cast<size_t>(H);

  // The forward, in double: every step's state, and y (rounded to float: an input of the op).
  const Shape y_shape = c.batch_first ? Shape{N, T, d, H} : Shape{T, d, N, H};
  HostTensor y{TensorType{DType::F32, y_shape}, std::vector<double>(static_cast<size_t>(count_of(y_shape)), 0.0)};
  std::vector<RecurrentTrace> trace(static_cast<size_t>(d * N));
  for (int dir = 0; dir < d; ++dir) {
    const bool backwards = dir == 1 || std::string(c.direction) == "reverse";
    for (int64_t b = 0; b < N; ++b) {
      RecurrentTrace& tr = trace[static_cast<size_t>(dir * N + b)];
      std::vector<double> hv(uH), cv(uH);
      for (int64_t j = 0; j < H; ++j) {
        hv[static_cast<size_t>(j)] = h0 ? h0->v[static_cast<size_t>(s_at(dir, b) + j)] : 0;
        cv[static_cast<size_t>(j)] = c0 ? c0->v[static_cast<size_t>(s_at(dir, b) + j)] : 0;
      }
      const int64_t L = len[static_cast<size_t>(b)];
      for (int64_t s = 0; s < L; ++s) {
        const int64_t t = backwards ? L - 1 - s : s;
        // The pre-activation of gate k, row j: its x part and its h part.
        const auto ax = [&](int k, int64_t j) {
          double v = Wb(dir, k, j);
          for (int64_t q = 0; q < I; ++q) v += xv(t, b, q) * W(dir, k, j, q);
          return v;
        };
        const auto ah = [&](int k, int64_t j, const std::vector<double>& hh) {
          double v = Rb(dir, k, j);
          for (int64_t q = 0; q < H; ++q) v += hh[static_cast<size_t>(q)] * R(dir, k, j, q);
          return v;
        };
        std::vector<double> gate(static_cast<size_t>(g * H)), q(uH), nh(uH), nc = cv;
        if (rnn) {
          for (int64_t j = 0; j < H; ++j) {
            const double a = ax(0, j) + ah(0, j, hv);
            gate[static_cast<size_t>(j)] = nh[static_cast<size_t>(j)] = c.variant ? std::max(a, 0.0) : std::tanh(a);
          }
        } else if (gru) {
          for (int64_t j = 0; j < H; ++j) {
            gate[static_cast<size_t>(j)] = sig(ax(0, j) + ah(0, j, hv));
            gate[static_cast<size_t>(H + j)] = sig(ax(1, j) + ah(1, j, hv));
          }
          if (!c.variant)
            for (int64_t j = 0; j < H; ++j) q[static_cast<size_t>(j)] = gate[static_cast<size_t>(H + j)] * hv[static_cast<size_t>(j)];
          for (int64_t j = 0; j < H; ++j) {
            const size_t u = static_cast<size_t>(j);
            double cand;
            if (c.variant) {
              q[u] = ah(2, j, hv);
              cand = std::tanh(ax(2, j) + gate[H + u] * q[u]);
            } else {
              cand = std::tanh(ax(2, j) + ah(2, j, q));
            }
            gate[2 * uH + u] = cand;
            nh[u] = (1 - gate[u]) * cand + gate[u] * hv[u];
          }
        } else {
          for (int64_t j = 0; j < H; ++j) {
            const size_t u = static_cast<size_t>(j);
            const double ig = sig(ax(0, j) + ah(0, j, hv) + P(dir, 0, j) * cv[u]);
            const double fg = sig(ax(2, j) + ah(2, j, hv) + P(dir, 2, j) * cv[u]);
            const double cc = std::tanh(ax(3, j) + ah(3, j, hv));
            nc[u] = fg * cv[u] + ig * cc;
            const double og = sig(ax(1, j) + ah(1, j, hv) + P(dir, 1, j) * nc[u]);
            nh[u] = og * std::tanh(nc[u]);
            gate[u] = ig;
            gate[uH + u] = og;
            gate[2 * uH + u] = fg;
            gate[3 * uH + u] = cc;
          }
        }
        tr.t.push_back(t);
        tr.h_prev.push_back(hv);
        tr.c_prev.push_back(cv);
        tr.c.push_back(nc);
        tr.gate.push_back(gate);
        tr.q.push_back(q);
        hv = nh;
        cv = nc;
        for (int64_t j = 0; j < H; ++j) y.v[static_cast<size_t>(y_at(t, dir, b) + j)] = static_cast<float>(hv[static_cast<size_t>(j)]);
      }
      tr.h_last = hv;
      tr.c_last = cv;
    }
  }
  const HostTensor dy = random_f32(y_shape, r.rng(), -1, 1);
  const HostTensor dh_last = random_f32(state, r.rng(), -1, 1), dc_last = random_f32(state, r.rng(), -1, 1);
  in.push_back(y);
  in.push_back(dy);
  in.push_back(dh_last);
  if (lstm) in.push_back(dc_last);

  // Back through time, in double.
  const auto zeros_like = [](const HostTensor& t) {
    return HostTensor{t.type, std::vector<double>(static_cast<size_t>(count_of(t.type.shape)), 0.0)};
  };
  HostTensor dx = zeros_like(x), dw = zeros_like(w), dr = zeros_like(rw), db = zeros_like(bias);
  HostTensor dh0{TensorType{DType::F32, state}, std::vector<double>(static_cast<size_t>(count_of(state)), 0.0)};
  HostTensor dc0 = dh0;
  HostTensor dp{TensorType{DType::F32, Shape{d, 3 * H}}, std::vector<double>(static_cast<size_t>(d * 3 * H), 0.0)};
  const auto add = [](HostTensor& t, int64_t at, double v) { t.v[static_cast<size_t>(at)] += v; };
  for (int dir = 0; dir < d; ++dir) {
    for (int64_t b = 0; b < N; ++b) {
      const RecurrentTrace& tr = trace[static_cast<size_t>(dir * N + b)];
      std::vector<double> dh(uH), dc(uH);
      for (int64_t j = 0; j < H; ++j) {
        dh[static_cast<size_t>(j)] = dh_last.v[static_cast<size_t>(s_at(dir, b) + j)];
        dc[static_cast<size_t>(j)] = lstm ? dc_last.v[static_cast<size_t>(s_at(dir, b) + j)] : 0;
      }
      for (int64_t s = static_cast<int64_t>(tr.t.size()) - 1; s >= 0; --s) {
        const size_t us = static_cast<size_t>(s);
        const int64_t t = tr.t[us];
        const std::vector<double>&hp = tr.h_prev[us], &gt = tr.gate[us];
        for (int64_t j = 0; j < H; ++j) dh[static_cast<size_t>(j)] += dy.v[static_cast<size_t>(y_at(t, dir, b) + j)];
        // da: the gradient of each gate's pre-activation (x part); dar: of its h part (R, Rb, h).
        std::vector<double> da(static_cast<size_t>(g * H)), dar, dhp(uH, 0.0), dcp(uH, 0.0);
        if (rnn) {
          for (size_t u = 0; u < uH; ++u)
            da[u] = dh[u] * (c.variant ? (gt[u] > 0 ? 1.0 : 0.0) : 1 - gt[u] * gt[u]);
          dar = da;
        } else if (lstm) {
          const std::vector<double>&cp = tr.c_prev[us], &cn = tr.c[us];
          for (int64_t j = 0; j < H; ++j) {
            const size_t u = static_cast<size_t>(j);
            const double ig = gt[u], og = gt[uH + u], fg = gt[2 * uH + u], cc = gt[3 * uH + u];
            const double tc = std::tanh(cn[u]);
            const double dao = dh[u] * tc * og * (1 - og);
            const double dct = dc[u] + dh[u] * og * (1 - tc * tc) + dao * P(dir, 1, j);
            const double dai = dct * cc * ig * (1 - ig), daf = dct * cp[u] * fg * (1 - fg);
            da[u] = dai;
            da[uH + u] = dao;
            da[2 * uH + u] = daf;
            da[3 * uH + u] = dct * ig * (1 - cc * cc);
            dcp[u] = dct * fg + dai * P(dir, 0, j) + daf * P(dir, 2, j);
            if (!p) continue;
            dp.v[static_cast<size_t>((dir * 3 + 0) * H + j)] += dai * cp[u];
            dp.v[static_cast<size_t>((dir * 3 + 1) * H + j)] += dao * cn[u];
            dp.v[static_cast<size_t>((dir * 3 + 2) * H + j)] += daf * cp[u];
          }
          dar = da;
        } else {
          const std::vector<double>& q = tr.q[us];
          dar.assign(static_cast<size_t>(g * H), 0.0);
          std::vector<double> dr_gate(uH);
          for (size_t u = 0; u < uH; ++u) {
            const double z = gt[u], cand = gt[2 * uH + u];
            da[u] = dh[u] * (hp[u] - cand) * z * (1 - z);
            da[2 * uH + u] = dh[u] * (1 - z) * (1 - cand * cand);
            dhp[u] += dh[u] * z;
          }
          if (c.variant) {
            // h̃ = tanh(ax + r⊙q), q = h·Rhᵀ + Rbh.
            for (size_t u = 0; u < uH; ++u) {
              dr_gate[u] = da[2 * uH + u] * q[u];
              dar[2 * uH + u] = da[2 * uH + u] * gt[uH + u];
            }
          } else {
            // h̃ = tanh(ax + (r⊙h)·Rhᵀ + Rbh): the gradient of r⊙h is da_h·Rh.
            for (int64_t qq = 0; qq < H; ++qq) {
              double drh = 0;
              for (int64_t j = 0; j < H; ++j) drh += da[2 * uH + static_cast<size_t>(j)] * R(dir, 2, j, qq);
              const size_t u = static_cast<size_t>(qq);
              dr_gate[u] = drh * hp[u];
              dhp[u] += drh * gt[uH + u];
            }
            for (size_t u = 0; u < uH; ++u) dar[2 * uH + u] = da[2 * uH + u];
          }
          for (size_t u = 0; u < uH; ++u) {
            const double rg = gt[uH + u];
            da[uH + u] = dr_gate[u] * rg * (1 - rg);
            dar[u] = da[u];
            dar[uH + u] = da[uH + u];
          }
        }
        for (int k = 0; k < g; ++k)
          for (int64_t j = 0; j < H; ++j) {
            const size_t gj = static_cast<size_t>(k * H + j);
            add(db, (dir * 2 * g + k) * H + j, da[gj]);
            add(db, (dir * 2 * g + g + k) * H + j, dar[gj]);
            for (int64_t q = 0; q < I; ++q) {
              add(dw, ((dir * g + k) * H + j) * I + q, da[gj] * xv(t, b, q));
              add(dx, x_at(t, b) + q, da[gj] * W(dir, k, j, q));
            }
            // GRU's candidate with linear_before_reset=0 sees r⊙h_prev (tr.q), not h_prev.
            const std::vector<double>& hin = gru && !c.variant && k == 2 ? tr.q[us] : hp;
            for (int64_t q = 0; q < H; ++q) {
              add(dr, ((dir * g + k) * H + j) * H + q, dar[gj] * hin[static_cast<size_t>(q)]);
              if (!(gru && !c.variant && k == 2)) dhp[static_cast<size_t>(q)] += dar[gj] * R(dir, k, j, q);
            }
          }
        dh = dhp;
        if (lstm) dc = dcp;
      }
      for (int64_t j = 0; j < H; ++j) {
        dh0.v[static_cast<size_t>(s_at(dir, b) + j)] = dh[static_cast<size_t>(j)];
        dc0.v[static_cast<size_t>(s_at(dir, b) + j)] = dc[static_cast<size_t>(j)];
      }
    }
  }

  // Each output within a small fraction of its own scale: BPTT's terms cancel, so an element's
  // error scales with the output's magnitude rather than its own.
  const auto expect = [](const HostTensor& t) {
    double m = 0;
    for (double v : t.v) m = std::max(m, std::fabs(v));
    return Expected{t, std::vector<double>(t.v.size(), m), {1e-6, 2e-4}};
  };
  std::vector<ImmArg> imms{imm_enum("direction", c.direction), imm_b("batch_first", c.batch_first),
                           imm_b("initial", c.initial), imm_b("lens", c.lens)};
  if (lstm) imms.push_back(imm_b("peephole", c.variant));
  if (gru) imms.push_back(imm_b("linear_before_reset", c.variant));
  if (rnn) imms.push_back(imm_enum("activation", c.variant ? "relu" : "tanh"));
  std::vector<Expected> want{expect(dx), expect(dw), expect(dr), expect(db), expect(dh0)};
  if (lstm) {
    want.push_back(expect(dc0));
    want.push_back(expect(dp));
  }
  r.check_all(in, imms, want);
}

inline void cases_recurrent_bwd(ParityRun& r, Opcode op) {
  std::vector<RecurrentCase> cases = recurrent_cases();
  // Products the size of a small layer's: the generated GEMMs' blocking and tails.
  cases.push_back({9, 5, 28, 33, "bidirectional", true, true, true, true});
  cases.push_back({6, 17, 16, 40, "forward", false, false, false, false});
  for (const RecurrentCase& c : cases) recurrent_bwd_case(r, op, c);
}
inline void cases_lstm_bwd(ParityRun& r) { cases_recurrent_bwd(r, Opcode::LSTM_BWD); }
inline void cases_gru_bwd(ParityRun& r) { cases_recurrent_bwd(r, Opcode::GRU_BWD); }
inline void cases_rnn_bwd(ParityRun& r) { cases_recurrent_bwd(r, Opcode::RNN_BWD); }

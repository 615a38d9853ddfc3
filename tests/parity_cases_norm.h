// Parity cases and shape errors of BATCHNORM2D, BATCHNORM2D_BWD and DROPOUT, in both modes.
// Included by tests/ops_parity_test.cpp inside its namespace, after ParityRun and the sweep
// constants; the expectations are naive double loops written here from the ops' contracts.
#pragma once

// ---------------------------------------------------------------------------------------------
// Batch normalization

struct BnCase {
  std::vector<int64_t> x;  // [N, C, ...]
  double lo, hi;           // range of x: an offset exercises the mean
};

inline std::vector<BnCase> bn_cases() {
  return {{{2, 3, 4, 5}, -2, 2},  {{1, 7, 15}, 1, 3},    {{16, 17}, -1, 1},      {{3, 33, 2, 2}, -2, 2},
          {{1, 1, 1, 1}, -2, 2},  {{2, 16, 1, 1}, 0, 4}, {{4, 8, 10, 13}, -3, 1}, {{2, 3, 7, 9}, -1, 3}};
}

// Per channel of x (rank ≥ 2, channels on axis 1): values M, mean and biased variance, in double.
struct BnStats {
  std::vector<double> mean, var;
  int64_t count = 0;
};

inline int64_t bn_channel_of(int64_t flat, const Shape& s) { return unravel(flat, s)[1]; }

inline BnStats bn_stats(const HostTensor& x) {
  const Shape& s = x.type.shape;
  const int64_t c = s.dims[1];
  BnStats st;
  st.mean.assign(static_cast<size_t>(c), 0);
  st.var.assign(static_cast<size_t>(c), 0);
  st.count = count_of(s) / c;
  for (size_t i = 0; i < x.v.size(); ++i) st.mean[bn_channel_of(static_cast<int64_t>(i), s)] += x.v[i];
  for (double& m : st.mean) m /= static_cast<double>(st.count);
  for (size_t i = 0; i < x.v.size(); ++i) {
    const int64_t ch = bn_channel_of(static_cast<int64_t>(i), s);
    st.var[ch] += (x.v[i] - st.mean[ch]) * (x.v[i] - st.mean[ch]);
  }
  for (double& v : st.var) v /= static_cast<double>(st.count);
  return st;
}

inline void cases_batchnorm2d(ParityRun& r) {
  for (bool training : {false, true}) {
    r.set_training(training);
    for (const BnCase& bc : bn_cases()) {
      for (const auto& [eps, mom] : {std::pair<double, double>{1e-5, 0.1}, {1e-3, 0.25}, {0.5, 1.0}}) {
        const Shape s = shape_of(bc.x);
        const Shape cs{s.dims[1]};
        const HostTensor x = random_f32(s, r.rng(), bc.lo, bc.hi);
        const HostTensor gamma = random_f32(cs, r.rng(), -1.5, 1.5), beta = random_f32(cs, r.rng());
        const HostTensor rm = random_f32(cs, r.rng(), -1, 1), rv = random_f32(cs, r.rng(), 0.2, 2);
        const BnStats st = bn_stats(x);
        Expected y = expect_like(x, {1e-6, 1e-5}), m_out = expect_like(rm, EXACT), v_out = expect_like(rv, EXACT);
        for (size_t i = 0; i < x.v.size(); ++i) {
          const int64_t c = bn_channel_of(static_cast<int64_t>(i), s);
          const double mean = training ? st.mean[c] : rm.v[c], var = training ? st.var[c] : rv.v[c];
          const double sc = gamma.v[c] / std::sqrt(var + static_cast<float>(eps));
          y.t.v.push_back(sc * (x.v[i] - mean) + beta.v[c]);
          y.mag.push_back(std::fabs(sc) * (std::fabs(x.v[i]) + std::fabs(mean)) + std::fabs(beta.v[c]));
        }
        const double m = static_cast<float>(mom);
        for (int64_t c = 0; c < cs.dims[0]; ++c) {
          if (!training) {
            m_out.t.v.push_back(rm.v[c]);
            v_out.t.v.push_back(rv.v[c]);
            continue;
          }
          const double unbiased = st.count > 1 ? st.var[c] * st.count / (st.count - 1) : st.var[c];
          m_out.t.v.push_back((1 - m) * rm.v[c] + m * st.mean[c]);
          v_out.t.v.push_back((1 - m) * rv.v[c] + m * unbiased);
          m_out.mag.push_back(std::fabs(rm.v[c]) + std::fabs(st.mean[c]));
          v_out.mag.push_back(std::fabs(rv.v[c]) + unbiased);
        }
        if (training) m_out.tol = v_out.tol = {1e-7, 1e-6};
        r.check_all({x, gamma, beta, rm, rv}, {imm_f("eps", eps), imm_f("momentum", mom)}, {y, m_out, v_out});
      }
    }
  }
}

inline void cases_batchnorm2d_bwd(ParityRun& r) {
  for (bool training : {false, true}) {
    r.set_training(training);
    for (const BnCase& bc : bn_cases()) {
      for (double eps : {1e-5, 1e-2}) {
        const Shape s = shape_of(bc.x);
        const Shape cs{s.dims[1]};
        const HostTensor x = random_f32(s, r.rng(), bc.lo, bc.hi), dy = random_f32(s, r.rng());
        const HostTensor gamma = random_f32(cs, r.rng(), -1.5, 1.5);
        const HostTensor rm = random_f32(cs, r.rng(), -1, 1), rv = random_f32(cs, r.rng(), 0.2, 2);
        const BnStats st = bn_stats(x);
        const int64_t C = cs.dims[0];
        const double feps = static_cast<float>(eps);
        std::vector<double> mean(C), rstd(C), sdy(C, 0), sdyx(C, 0), adyx(C, 0), ady(C, 0);
        for (int64_t c = 0; c < C; ++c) {
          mean[c] = training ? st.mean[c] : rm.v[c];
          rstd[c] = 1 / std::sqrt((training ? st.var[c] : rv.v[c]) + feps);
        }
        auto xhat = [&](size_t i, int64_t c) { return (x.v[i] - mean[c]) * rstd[c]; };
        for (size_t i = 0; i < x.v.size(); ++i) {
          const int64_t c = bn_channel_of(static_cast<int64_t>(i), s);
          sdy[c] += dy.v[i];
          ady[c] += std::fabs(dy.v[i]);
          sdyx[c] += dy.v[i] * xhat(i, c);
          adyx[c] += std::fabs(dy.v[i] * xhat(i, c));
        }
        const double M = static_cast<double>(st.count);
        Expected dx = expect_like(x, {1e-6, 1e-5});
        for (size_t i = 0; i < x.v.size(); ++i) {
          const int64_t c = bn_channel_of(static_cast<int64_t>(i), s);
          const double k = gamma.v[c] * rstd[c];
          if (training) {
            dx.t.v.push_back(k * (dy.v[i] - sdy[c] / M - xhat(i, c) * sdyx[c] / M));
            dx.mag.push_back(std::fabs(k) * (std::fabs(dy.v[i]) + ady[c] / M +
                                             (std::fabs(x.v[i]) + std::fabs(mean[c])) * rstd[c] * adyx[c] / M));
          } else {
            dx.t.v.push_back(k * dy.v[i]);
            dx.mag.push_back(std::fabs(k * dy.v[i]));
          }
        }
        Expected dg = expect_like(gamma, {1e-6, 1e-5}), db = expect_like(gamma, {1e-6, 1e-5});
        for (int64_t c = 0; c < C; ++c) {
          dg.t.v.push_back(sdyx[c]);
          dg.mag.push_back(adyx[c] + ady[c] * std::fabs(mean[c]) * rstd[c]);
          db.t.v.push_back(sdy[c]);
          db.mag.push_back(ady[c]);
        }
        r.check_all({x, gamma, rm, rv, dy}, {imm_f("eps", eps)}, {dx, dg, db});
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Dropout

// The mask of DROPOUT's contract, written out: splitmix64's output function over a counter.
inline uint64_t dropout_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
inline bool dropout_keeps(uint64_t seed, uint64_t key, uint64_t run, double rate, int64_t i) {
  const uint64_t G = 0x9e3779b97f4a7c15ULL;
  const uint64_t stream = dropout_mix(dropout_mix(dropout_mix(seed) + key * G) + run * G);
  const uint64_t u = dropout_mix(stream + static_cast<uint64_t>(i + 1) * G) >> 32;
  return static_cast<double>(u) >= std::floor(rate * 4294967296.0);
}

// The harness's context seed (Context's default) and the first forward run.
constexpr uint64_t HARNESS_SEED = 0x6e6e61736dULL;

inline void cases_dropout(ParityRun& r) {
  std::vector<Shape> shapes = elementwise_shapes();
  shapes.push_back(Shape{4, 8, 10, 13});
  for (bool training : {false, true}) {
    r.set_training(training);
    for (const Shape& s : shapes)
      for (const auto& [rate, key] : {std::pair<double, int64_t>{0.5, 0}, {0.25, 3}, {0.0, 1}, {0.9, -7}, {0.999, 5}}) {
        const HostTensor x = random_f32(s, r.rng());
        Expected y = expect_like(x, EXACT);
        const double fr = static_cast<float>(rate);
        const float scale = static_cast<float>(1.0 / (1.0 - fr));
        for (size_t i = 0; i < x.v.size(); ++i) {
          if (!training) y.t.v.push_back(x.v[i]);
          else if (dropout_keeps(HARNESS_SEED, static_cast<uint64_t>(key), 0, fr, static_cast<int64_t>(i)))
            y.t.v.push_back(static_cast<float>(x.v[i] * scale));
          else y.t.v.push_back(0);
        }
        r.check({x}, {imm_f("rate", rate), imm_i("key", key)}, y);
      }
  }
}

inline TensorType nf32(std::initializer_list<int64_t> d) { return TensorType{DType::F32, Shape(d)}; }

TEST(OpShapeErrors, BatchNormAndDropout) {
  const TensorType x = nf32({2, 3, 4, 4}), c = nf32({3});
  EXPECT_TRUE(append_fails(Opcode::BATCHNORM2D, {nf32({5}), nf32({5}), nf32({5}), nf32({5}), nf32({5})}, {},
                           {"BATCHNORM2D", "x operand 1 (f32[5])", "rank"}));
  EXPECT_TRUE(append_fails(Opcode::BATCHNORM2D, {x, c, nf32({4}), c, c}, {},
                           {"BATCHNORM2D", "beta operand 3 (f32[4])", "f32[3]"}));
  EXPECT_TRUE(append_fails(Opcode::BATCHNORM2D, {x, c, c, nf32({1, 3}), c}, {}, {"running_mean operand 4 (f32[1,3])"}));
  EXPECT_TRUE(append_fails(Opcode::BATCHNORM2D, {x, c, c, c, c}, {imm_f("momentum", 1.5)}, {"BATCHNORM2D", "momentum"}));
  EXPECT_TRUE(append_fails(Opcode::BATCHNORM2D, {x, c, c, c, c}, {imm_f("eps", -1)}, {"BATCHNORM2D", "eps"}));
  EXPECT_TRUE(append_fails(Opcode::BATCHNORM2D_BWD, {x, c, c, c, nf32({2, 3, 4, 5})}, {},
                           {"BATCHNORM2D_BWD", "dy operand 5 (f32[2,3,4,5])", "x operand 1"}));
  EXPECT_TRUE(append_fails(Opcode::BATCHNORM2D_BWD, {x, c, c, nf32({2}), x}, {}, {"running_var operand 4 (f32[2])"}));
  EXPECT_TRUE(append_fails(Opcode::DROPOUT, {nf32({3})}, {imm_f("rate", 1)}, {"DROPOUT", "rate=1", "[0, 1)"}));
  EXPECT_TRUE(append_fails(Opcode::DROPOUT, {nf32({3})}, {imm_f("rate", -0.1)}, {"DROPOUT", "rate"}));
}

// Inference reads BATCHNORM2D's running statistics only, so any tensor will do; training writes
// them in place, so a training program needs them persistent, writable and operands of their own.
TEST(OpShapeErrors, BatchNormStateOperands) {
  enum Stats { CONST_MEAN, COMPUTED_VAR, MEAN_IS_BETA, SHARED_WITH_ANOTHER_BN };
  auto check = [](Stats which, const std::string& needle) {
    Context ctx;
    Program p(ctx);
    std::vector<TensorId> ids;
    if (!declare_inputs(p, {nf32({2, 3, 4}), nf32({3}), nf32({3}), nf32({3}), nf32({3})}, &ids))
      return ::testing::AssertionFailure() << "declare";
    TensorDesc k;
    k.name = "k";
    k.type = nf32({3});
    k.role = Role::CONST;
    k.values = {0, 0, 0};
    const TensorId kid = p.declare(k).value();
    const TensorId t = p.append_new(make_instruction(Opcode::COPY, {ids[1]}, {})).value()[0];
    std::vector<TensorId> in = {ids[0], ids[1], ids[2], ids[3], ids[4]};
    if (which == CONST_MEAN) in[3] = kid;
    if (which == COMPUTED_VAR) in[4] = t;
    if (which == MEAN_IS_BETA) in[3] = ids[2];
    const Result<std::vector<TensorId>> r = p.append_new(make_instruction(Opcode::BATCHNORM2D, in, {}));
    if (!r) return ::testing::AssertionFailure() << "inference refused: " << r.status().message();
    if (which == SHARED_WITH_ANOTHER_BN && !p.append_new(make_instruction(Opcode::BATCHNORM2D, in, {})))
      return ::testing::AssertionFailure() << "second BATCHNORM2D refused";
    if (!p.finish()) return ::testing::AssertionFailure() << "inference finish: " << p.finish().message();
    p.set_training(true);
    const Status s = p.finish();
    if (s) return ::testing::AssertionFailure() << "training accepted";
    if (s.message().find(needle) == std::string::npos) return ::testing::AssertionFailure() << s.message();
    return ::testing::AssertionSuccess();
  };
  EXPECT_TRUE(check(CONST_MEAN, "updates input 4 (@k) in place when training: declare @k as state to train; consts are read-only"));
  EXPECT_TRUE(check(COMPUTED_VAR, "not a computed value"));
  EXPECT_TRUE(check(MEAN_IS_BETA, "but it is also input 3: give it a state tensor of its own to train"));
  EXPECT_TRUE(check(SHARED_WITH_ANOTHER_BN, "as instruction 2 does"));
  EXPECT_EQ(op_hooks(Opcode::BATCHNORM2D).state_inputs, 1u << 3 | 1u << 4);
  for (const OpInfo& info : all_ops())
    EXPECT_EQ((info.flags & OPF_UPDATES_STATE) != 0, op_hooks(info.op).state_inputs != 0) << info.mnemonic;
}

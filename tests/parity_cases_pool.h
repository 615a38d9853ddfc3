// Parity cases and shape errors of the pooling ops (MAXPOOL2D, AVGPOOL2D and their _BWD ops),
// included by tests/ops_parity_test.cpp inside its namespace, after ParityRun and its helpers.
// The naive reference lists each output's window as the indices of the image elements it covers,
// in row-major window order, from the PyTorch definition; every op is then a fold over those
// lists in double. ceil_mode is written here as which windows exist (a window while the one
// before it has not reached the end of the padded input, starting before the right padding),
// not as the kernels' output-size formula.
#pragma once

namespace pool_parity {

struct PoolCase {
  std::vector<int64_t> x;  // [N, C, H, W]
  std::vector<int64_t> kernel, stride, pad;  // stride {}: left to the default (the kernel)
  bool ceil = false;                         // ceil_mode
};

const std::vector<PoolCase>& pool_cases() {
  static const std::vector<PoolCase> cases = {
      {{1, 1, 7, 7}, {2, 2}, {}, {}},               // a tail row and column left out
      {{2, 3, 15, 16}, {3, 3}, {2, 2}, {1, 1}},     // overlapping, padded
      {{1, 2, 17, 33}, {2, 3}, {1, 2}, {1, 1}},     // stride ≠ kernel, both directions
      {{1, 1, 1, 1}, {1, 1}, {}, {}},
      {{1, 3, 5, 9}, {5, 3}, {1, 3}, {2, 1}},       // the largest pad half a kernel allows
      {{1, 1, 33, 7}, {4, 4}, {3, 3}, {2, 0}},
      {{2, 2, 4, 6}, {4, 6}, {}, {}},               // one window: the whole image
      {{1, 2, 6, 6}, {3, 3}, {1, 1}, {}},           // dense overlap
      {{2, 1, 5, 4}, {2, 2}, {2, 1}, {1, 0}},       // pad along one axis only
      {{4, 6, 28, 28}, {2, 2}, {}, {}},             // LeNet's first pooling
      {{3, 16, 10, 10}, {2, 2}, {2, 2}, {}},        // LeNet's second
      {{1, 2, 5, 21}, {2, 3}, {1, 1}, {}},          // the JIT at stride 1: three vectors, a tail of 3
      {{1, 1, 6, 40}, {3, 3}, {2, 2}, {}},          // the JIT at stride 2 with an odd kernel
      {{2, 3, 6, 14}, {2, 2}, {}, {}},              // the 2×2 backward JIT: a vector and a tail of 6
      {{1, 2, 4, 6}, {2, 2}, {}, {}},               // and a row that is only a tail
      // ceil_mode: partial last windows on odd sizes.
      {{1, 1, 7, 7}, {2, 2}, {}, {}, true},          // a last row and column of one element
      {{2, 3, 15, 16}, {3, 3}, {2, 2}, {1, 1}, true},  // exact rows, a partial last column
      {{1, 2, 5, 9}, {2, 2}, {2, 2}, {1, 1}, true},  // the window that would start in the padding is dropped
      {{2, 2, 6, 7}, {3, 3}, {2, 2}, {1, 1}, true},  // a last window reaching past the padding
      {{1, 1, 6, 40}, {3, 3}, {2, 2}, {}, true},     // the JIT's stride-2 compaction, a partial last column
      {{2, 3, 6, 14}, {2, 2}, {}, {}, true},         // even sizes: no partial window, the JIT runs
      {{2, 1, 5, 7}, {2, 2}, {}, {}, true},          // the 2×2 backward's fast path declines
      {{1, 3, 11, 5}, {4, 3}, {3, 1}, {2, 1}, true},
      // The generated kernel's edges: padded columns and rows, strides 1 to 3, tails.
      {{1, 2, 17, 23}, {3, 3}, {2, 2}, {1, 1}},      // ResNet's stem on odd sizes
      {{1, 2, 9, 35}, {3, 3}, {1, 1}, {1, 1}},       // stride 1, padded: a row of 35
      {{1, 2, 20, 50}, {3, 3}, {3, 3}, {1, 1}},      // stride 3, padded
      {{1, 2, 13, 37}, {3, 2}, {2, 3}, {1, 1}, true},  // 3×2 at strides 2 and 3, a partial window
      {{1, 1, 5, 300}, {3, 3}, {1, 1}, {1, 1}},      // a long row: its inner vectors in a loop
      {{1, 2, 14, 29}, {3, 3}, {2, 2}, {}, true},    // unpadded, partial last row and column
      {{1, 1, 11, 40}, {2, 2}, {3, 3}, {1, 1}, true},  // stride 3 past the right padding
  };
  return cases;
}

int64_t pool_stride(const PoolCase& c, int d) { return c.stride.empty() ? c.kernel[d] : c.stride[d]; }
int64_t pool_pad(const PoolCase& c, int d) { return c.pad.empty() ? 0 : c.pad[d]; }
// Whether output o exists along axis d: its window lies in the padded input or, with ceil_mode,
// the window before it stops short of the padded input's end and this one starts before the
// right padding.
bool pool_window_exists(const PoolCase& c, int d, int64_t o) {
  const int64_t in = c.x[2 + d], k = c.kernel[d], s = pool_stride(c, d), p = pool_pad(c, d);
  const int64_t start = o * s - p;
  if (start + k <= in + p) return true;
  return c.ceil && o > 0 && start - s + k < in + p && start < in;
}
int64_t pool_out(const PoolCase& c, int d) {
  int64_t n = 0;
  while (pool_window_exists(c, d, n)) ++n;
  return n;
}
Shape pool_y_shape(const PoolCase& c) { return Shape{c.x[0], c.x[1], pool_out(c, 0), pool_out(c, 1)}; }

std::vector<ImmArg> pool_imms(const PoolCase& c) {
  std::vector<ImmArg> imms = {imm_ints("kernel", c.kernel)};
  if (!c.stride.empty()) imms.push_back(imm_ints("stride", c.stride));
  if (!c.pad.empty()) imms.push_back(imm_ints("pad", c.pad));
  if (c.ceil) imms.push_back(imm_b("ceil_mode", true));
  return imms;
}

// For every output, in order: the flat x indices of the image elements in its window.
std::vector<std::vector<int64_t>> pool_windows(const PoolCase& c) {
  const int64_t n = c.x[0], ch = c.x[1], h = c.x[2], w = c.x[3], ho = pool_out(c, 0), wo = pool_out(c, 1);
  std::vector<std::vector<int64_t>> win;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t k = 0; k < ch; ++k)
      for (int64_t oy = 0; oy < ho; ++oy)
        for (int64_t ox = 0; ox < wo; ++ox) {
          std::vector<int64_t> list;
          for (int64_t i = 0; i < c.kernel[0]; ++i)
            for (int64_t j = 0; j < c.kernel[1]; ++j) {
              const int64_t iy = oy * pool_stride(c, 0) - pool_pad(c, 0) + i;
              const int64_t ix = ox * pool_stride(c, 1) - pool_pad(c, 1) + j;
              if (iy >= 0 && iy < h && ix >= 0 && ix < w) list.push_back(((b * ch + k) * h + iy) * w + ix);
            }
          win.push_back(list);
        }
  return win;
}

// Counting padding, the divisor is the taps of output o's window that fall inside the padded
// input (PyTorch's; fewer than kh·kw only for a ceil_mode window past the right padding).
double pool_divisor(const PoolCase& c, int64_t o, const std::vector<int64_t>& window, bool include_pad) {
  if (!include_pad) return static_cast<double>(window.size());
  const int64_t wo = pool_out(c, 1), oy = o / wo % pool_out(c, 0), ox = o % wo;
  int64_t taps = 0;
  for (int64_t i = 0; i < c.kernel[0]; ++i)
    for (int64_t j = 0; j < c.kernel[1]; ++j) {
      const int64_t iy = oy * pool_stride(c, 0) - pool_pad(c, 0) + i, ix = ox * pool_stride(c, 1) - pool_pad(c, 1) + j;
      taps += iy < c.x[2] + pool_pad(c, 0) && ix < c.x[3] + pool_pad(c, 1);
    }
  return static_cast<double>(taps);
}

// The element of `window` a max selects: the first NaN, else the first maximum.
int64_t pool_argmax(const std::vector<double>& x, const std::vector<int64_t>& window) {
  for (int64_t i : window)
    if (std::isnan(x[i])) return i;
  int64_t best = window[0];
  for (int64_t i : window)
    if (x[i] > x[best]) best = i;
  return best;
}

// x for a max case: random, or (ties) small whole numbers so that windows hold equal maxima, with
// NaN and −inf sprinkled in when asked.
HostTensor pool_input(const PoolCase& c, std::mt19937& rng, bool ties, bool specials) {
  HostTensor x = random_f32(shape_of(c.x), rng);
  std::uniform_int_distribution<int> small(0, 3), pick(0, 40);
  for (double& v : x.v) {
    if (ties) v = small(rng);
    if (specials) {
      const int p = pick(rng);
      if (p == 0) v = NaN;
      if (p == 1) v = -INF;
    }
  }
  return x;
}

}  // namespace pool_parity

void cases_maxpool2d(ParityRun& r) {
  using namespace pool_parity;
  for (const PoolCase& c : pool_cases())
    for (int variant = 0; variant < 3; ++variant) {  // random; ties; NaN and −inf
      const HostTensor x = pool_input(c, r.rng(), variant == 1, variant == 2);
      Expected e{HostTensor{TensorType{DType::F32, pool_y_shape(c)}, {}}, {}, EXACT};
      for (const std::vector<int64_t>& win : pool_windows(c)) e.t.v.push_back(x.v[pool_argmax(x.v, win)]);
      r.check({x}, pool_imms(c), e);
    }
}

void cases_avgpool2d(ParityRun& r) {
  using namespace pool_parity;
  for (const PoolCase& c : pool_cases())
    for (bool include_pad : {true, false}) {
      const HostTensor x = random_f32(shape_of(c.x), r.rng());
      Expected e{HostTensor{TensorType{DType::F32, pool_y_shape(c)}, {}}, {}, sum_tol(c.kernel[0] * c.kernel[1] + 1)};
      const std::vector<std::vector<int64_t>> wins = pool_windows(c);
      for (size_t o = 0; o < wins.size(); ++o) {
        const std::vector<int64_t>& win = wins[o];
        double s = 0, m = 0;
        for (int64_t i : win) s += x.v[i], m += std::fabs(x.v[i]);
        const double d = pool_divisor(c, static_cast<int64_t>(o), win, include_pad);
        e.t.v.push_back(s / d);
        e.mag.push_back(m / d);
      }
      std::vector<ImmArg> imms = pool_imms(c);
      if (!include_pad) imms.push_back(imm_b("count_include_pad", false));
      r.check({x}, imms, e);
    }
  // NaN anywhere in a window makes its mean NaN; +inf and −inf together too.
  const PoolCase c{{1, 1, 2, 4}, {2, 2}, {}, {}};
  const HostTensor x = host(DType::F32, shape_of(c.x), {1, NaN, INF, 1, 2, 3, -INF, 1});
  r.check({x}, pool_imms(c), Expected{host(DType::F32, pool_y_shape(c), {NaN, NaN}), {}, EXACT});
}

// Windows overlap when the stride is less than the kernel: an x element gathers from several.
int64_t pool_max_overlap(const pool_parity::PoolCase& c) {
  using namespace pool_parity;
  const auto per_axis = [&](int d) { return (c.kernel[d] + pool_stride(c, d) - 1) / pool_stride(c, d); };
  return per_axis(0) * per_axis(1);
}

void cases_maxpool2d_bwd(ParityRun& r) {
  using namespace pool_parity;
  for (const PoolCase& c : pool_cases())
    for (int variant = 0; variant < 3; ++variant) {
      const HostTensor x = pool_input(c, r.rng(), variant == 1, variant == 2);
      const HostTensor dy = random_f32(pool_y_shape(c), r.rng());
      std::vector<double> dx(x.v.size()), mag(x.v.size());
      const std::vector<std::vector<int64_t>> wins = pool_windows(c);
      for (size_t o = 0; o < wins.size(); ++o) {
        const int64_t i = pool_argmax(x.v, wins[o]);
        dx[i] += dy.v[o];
        mag[i] += std::fabs(dy.v[o]);
      }
      r.check({dy, x}, pool_imms(c), Expected{HostTensor{x.type, dx}, mag, sum_tol(pool_max_overlap(c))});
    }
}

void cases_avgpool2d_bwd(ParityRun& r) {
  using namespace pool_parity;
  for (const PoolCase& c : pool_cases())
    for (bool include_pad : {true, false}) {
      const HostTensor x = random_f32(shape_of(c.x), r.rng());  // only its shape counts
      const HostTensor dy = random_f32(pool_y_shape(c), r.rng());
      std::vector<double> dx(x.v.size()), mag(x.v.size());
      const std::vector<std::vector<int64_t>> wins = pool_windows(c);
      for (size_t o = 0; o < wins.size(); ++o) {
        const double d = dy.v[o] / pool_divisor(c, static_cast<int64_t>(o), wins[o], include_pad);
        for (int64_t i : wins[o]) dx[i] += d, mag[i] += std::fabs(d);
      }
      std::vector<ImmArg> imms = pool_imms(c);
      if (!include_pad) imms.push_back(imm_b("count_include_pad", false));
      r.check({dy, x}, imms, Expected{HostTensor{x.type, dx}, mag, sum_tol(pool_max_overlap(c) + 1)});
    }
}

TEST(OpShapeErrors, Pooling) {
  const auto f32 = [](std::initializer_list<int64_t> d) { return TensorType{DType::F32, Shape(d)}; };
  const auto k = [](std::vector<int64_t> kernel, std::vector<int64_t> stride = {0, 0}, std::vector<int64_t> pad = {0, 0}) {
    return std::vector<ImmArg>{imm_ints("kernel", kernel), imm_ints("stride", stride), imm_ints("pad", pad)};
  };
  for (Opcode op : {Opcode::MAXPOOL2D, Opcode::AVGPOOL2D}) {
    const std::string mn = op_info(op).mnemonic;
    EXPECT_TRUE(append_fails(op, {f32({3, 8, 8})}, k({2, 2}), {mn, "input operand 1 (f32[3,8,8]) must be NCHW (rank 4)"}));
    EXPECT_TRUE(append_fails(op, {f32({1, 1, 4, 4})}, k({2}), {mn, "kernel must have 2 entries [h, w], got [2]"}));
    EXPECT_TRUE(append_fails(op, {f32({1, 1, 4, 4})}, k({2, 0}), {mn, "kernel must be at least 1, got [2,0]"}));
    EXPECT_TRUE(append_fails(op, {f32({1, 1, 4, 4})}, k({-1, 2}), {mn, "kernel must be at least 1, got [-1,2]"}));
    EXPECT_TRUE(append_fails(op, {f32({1, 1, 4, 4})}, k({2, 2}, {0, 1}),
                             {mn, "stride must be at least 1 (or [0,0], the kernel), got [0,1]"}));
    EXPECT_TRUE(append_fails(op, {f32({1, 1, 4, 4})}, k({2, 2}, {-2, -2}), {mn, "stride", "[-2,-2]"}));
    EXPECT_TRUE(append_fails(op, {f32({1, 1, 4, 4})}, k({2, 2}, {1, 1, 1}), {mn, "stride must have 2 entries"}));
    EXPECT_TRUE(append_fails(op, {f32({1, 1, 4, 4})}, k({2, 2}, {0, 0}, {-1, 0}), {mn, "pad must be at least 0, got [-1,0]"}));
    EXPECT_TRUE(append_fails(op, {f32({1, 1, 8, 8})}, k({3, 2}, {1, 1}, {2, 1}),
                             {mn, "pad [2,1] must be at most half the kernel [3,2]"}));
    EXPECT_TRUE(append_fails(op, {f32({1, 1, 3, 8})}, k({5, 2}),
                             {mn, "a 5x2 kernel does not fit input operand 1 (f32[1,1,3,8]) padded by [0,0]"}));
    EXPECT_TRUE(append_fails(op, {f32({1, 1, 8, 3})}, k({2, 6}, {0, 0}, {0, 1}), {mn, "f32[1,1,8,3]", "padded by [0,1]"}));
    EXPECT_TRUE(append_fails(op, {f32({1, 1, 8, 8})}, k({int64_t{1} << 62, 2}), {mn, "kernel", "too large"}));
    EXPECT_TRUE(append_fails(op, {f32({1, 1, 4, 4})}, {}, {mn, "kernel"}));  // required
  }
  // The kernel that just fits (padding included) is accepted: one output per plane.
  for (Opcode op : {Opcode::MAXPOOL2D, Opcode::AVGPOOL2D}) {
    Context ctx;
    Program p(ctx);
    std::vector<TensorId> ids;
    TensorId out = NO_TENSOR;
    ASSERT_TRUE(build_op(p, op, {f32({2, 3, 3, 4})}, k({5, 4}, {0, 0}, {1, 0}), &ids, &out));
    EXPECT_EQ(p.desc(out).type, f32({2, 3, 1, 1}));
  }
  for (Opcode op : {Opcode::MAXPOOL2D_BWD, Opcode::AVGPOOL2D_BWD}) {
    const std::string mn = op_info(op).mnemonic;
    Context ctx;
    Program p(ctx);
    std::vector<TensorId> ids;
    TensorId out = NO_TENSOR;
    ASSERT_TRUE(build_op(p, op, {f32({1, 2, 3, 3}), f32({1, 2, 7, 7})}, k({2, 2}), &ids, &out));
    EXPECT_EQ(p.desc(out).type, f32({1, 2, 7, 7}));
    EXPECT_TRUE(append_fails(op, {f32({1, 2, 4, 4}), f32({1, 2, 7, 7})}, k({2, 2}),
                             {mn, "gradient operand 1 (f32[1,2,4,4]) must be f32[1,2,3,3], the shape the forward op "
                                  "makes of input operand 2 (f32[1,2,7,7])"}));
    EXPECT_TRUE(append_fails(op, {f32({1, 2, 3, 3}), f32({2, 7, 7})}, k({2, 2}), {mn, "input operand 2 (f32[2,7,7])", "rank 4"}));
    EXPECT_TRUE(append_fails(op, {f32({1, 2, 3, 3}), f32({1, 2, 7, 7})}, k({2, 2}, {0, 0}, {2, 2}), {mn, "pad [2,2]"}));
  }
}

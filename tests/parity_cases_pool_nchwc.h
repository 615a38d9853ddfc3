// Parity cases and shape errors of the blocked pooling ops (MAXPOOL2D_NCHWC, AVGPOOL2D_NCHWC,
// GLOBAL_AVGPOOL_NCHWC), included by tests/ops_parity_test.cpp inside its namespace, after
// parity_cases_pool.h and parity_cases_shape4d.h, whose naive NCHW expectations these reuse: each
// NCHW case runs with C in {1, 7, 8, 9, 17} channels (one block, a block less one, a whole block,
// one more, two blocks and one), its input and expectation put in blocks of 8 and of 16
// (tests/nchwc_blocking.h, which ops_parity_test.cpp includes). The lanes past C are zero in x,
// so their pooled values are zero too.
#pragma once

namespace pool_nchwc_parity {

constexpr int64_t CHANNELS[] = {1, 7, 8, 9, 17};
constexpr int64_t BLOCKS[] = {8, 16};

// t, of NCHW shape [N, C, H, W], in blocks of b: [N, ⌈C/b⌉, H, W, b], zero past C.
HostTensor blocked(const HostTensor& t, int64_t b) {
  const Shape& s = t.type.shape;
  const int64_t n = s.dims[0], c = s.dims[1], h = s.dims[2], w = s.dims[3];
  return HostTensor{TensorType{t.type.dtype, shape_of({n, (c + b - 1) / b, h, w, b})},
                    nchw_to_blocked(t.v, n, c, h * w, b)};
}

Expected blocked(const Expected& e, int64_t b) {
  const Shape& s = e.t.type.shape;
  Expected out{blocked(e.t, b), {}, e.tol};
  if (!e.mag.empty()) out.mag = nchw_to_blocked(e.mag, s.dims[0], s.dims[1], s.dims[2] * s.dims[3], b);
  return out;
}

// The pooling case c with C channels.
pool_parity::PoolCase with_channels(pool_parity::PoolCase c, int64_t channels) {
  c.x[1] = channels;
  return c;
}

}  // namespace pool_nchwc_parity

void cases_maxpool2d_nchwc(ParityRun& r) {
  using namespace pool_parity;
  using namespace pool_nchwc_parity;
  for (const PoolCase& base : pool_cases())
    for (int64_t channels : CHANNELS) {
      const PoolCase c = with_channels(base, channels);
      for (int variant = 0; variant < 3; ++variant) {  // random; ties; NaN and −inf
        const HostTensor x = pool_input(c, r.rng(), variant == 1, variant == 2);
        Expected e{HostTensor{TensorType{DType::F32, pool_y_shape(c)}, {}}, {}, EXACT};
        for (const std::vector<int64_t>& win : pool_windows(c)) e.t.v.push_back(x.v[pool_argmax(x.v, win)]);
        for (int64_t b : BLOCKS) r.check({blocked(x, b)}, pool_imms(c), blocked(e, b));
      }
    }
}

void cases_avgpool2d_nchwc(ParityRun& r) {
  using namespace pool_parity;
  using namespace pool_nchwc_parity;
  for (const PoolCase& base : pool_cases())
    for (int64_t channels : CHANNELS)
      for (bool include_pad : {true, false}) {
        const PoolCase c = with_channels(base, channels);
        const HostTensor x = random_f32(shape_of(c.x), r.rng());
        Expected e{HostTensor{TensorType{DType::F32, pool_y_shape(c)}, {}}, {}, sum_tol(c.kernel[0] * c.kernel[1] + 1)};
        const std::vector<std::vector<int64_t>> wins = pool_windows(c);
        for (size_t o = 0; o < wins.size(); ++o) {
          double s = 0, m = 0;
          for (int64_t i : wins[o]) s += x.v[i], m += std::fabs(x.v[i]);
          const double d = pool_divisor(c, static_cast<int64_t>(o), wins[o], include_pad);
          e.t.v.push_back(s / d);
          e.mag.push_back(m / d);
        }
        std::vector<ImmArg> imms = pool_imms(c);
        if (!include_pad) imms.push_back(imm_b("count_include_pad", false));
        for (int64_t b : BLOCKS) r.check({blocked(x, b)}, imms, blocked(e, b));
      }
  // NaN anywhere in a window makes its mean NaN; +inf and −inf together too.
  const PoolCase c{{1, 1, 2, 4}, {2, 2}, {}, {}};
  const HostTensor x = host(DType::F32, shape_of(c.x), {1, NaN, INF, 1, 2, 3, -INF, 1});
  for (int64_t b : BLOCKS)
    r.check({blocked(x, b)}, pool_imms(c),
            blocked(Expected{host(DType::F32, pool_y_shape(c), {NaN, NaN}), {}, EXACT}, b));
}

void cases_global_avgpool_nchwc(ParityRun& r) {
  using namespace pool_nchwc_parity;
  for (const Shape& base : global_avgpool_shapes())
    for (int64_t channels : CHANNELS) {
      Shape s = base;
      s.dims[1] = channels;
      const HostTensor x = random_f32(s, r.rng());
      for (int64_t b : BLOCKS) r.check({blocked(x, b)}, {}, blocked(global_avgpool_expected(x), b));
    }
  // NaN and ±inf propagate through the sum.
  const HostTensor x = host(DType::F32, shape_of({1, 3, 1, 2}), {1, NaN, INF, -INF, INF, 2});
  for (int64_t b : BLOCKS)
    r.check({blocked(x, b)}, {},
            blocked(Expected{host(DType::F32, shape_of({1, 3, 1, 1}), {NaN, NaN, INF}), {}, EXACT}, b));
}

TEST(OpShapeErrors, PoolingNchwc) {
  const auto f32 = [](std::initializer_list<int64_t> d) { return TensorType{DType::F32, Shape(d)}; };
  const auto k = [](std::vector<int64_t> kernel, std::vector<int64_t> stride = {0, 0},
                    std::vector<int64_t> pad = {0, 0}) {
    return std::vector<ImmArg>{imm_ints("kernel", kernel), imm_ints("stride", stride), imm_ints("pad", pad)};
  };
  for (Opcode op : {Opcode::MAXPOOL2D_NCHWC, Opcode::AVGPOOL2D_NCHWC}) {
    const std::string mn = op_info(op).mnemonic;
    EXPECT_TRUE(append_fails(op, {f32({1, 16, 8, 8})}, k({2, 2}),
                             {mn + ": input operand 1 (f32[1,16,8,8]) must be NCHWc [N, Cb, H, W, b] (rank 5)"}));
    EXPECT_TRUE(append_fails(
        op, {f32({1, 1, 8, 8, 12})}, k({2, 2}),
        {mn + ": input operand 1 (f32[1,1,8,8,12]) has blocks of 12 channels; a block must be 8 or 16"}));
    EXPECT_TRUE(append_fails(op, {f32({1, 1, 8, 8, 32})}, k({2, 2}), {mn, "blocks of 32 channels"}));
    // The immediates are checked as MAXPOOL2D's and AVGPOOL2D's.
    EXPECT_TRUE(append_fails(op, {f32({1, 1, 4, 4, 8})}, k({2, 0}), {mn, "kernel must be at least 1, got [2,0]"}));
    EXPECT_TRUE(append_fails(op, {f32({1, 1, 8, 8, 8})}, k({3, 2}, {1, 1}, {2, 1}),
                             {mn, "pad [2,1] must be at most half the kernel [3,2]"}));
    EXPECT_TRUE(append_fails(op, {f32({1, 1, 3, 8, 16})}, k({5, 2}),
                             {mn, "a 5x2 kernel does not fit input operand 1 (f32[1,1,3,8,16]) padded by [0,0]"}));
    EXPECT_TRUE(append_fails(op, {TensorType{DType::I32, Shape{1, 1, 4, 4, 8}}}, k({2, 2}), {mn, "must be f32"}));
    EXPECT_TRUE(append_fails(op, {f32({1, 1, 4, 4, 8})}, {}, {mn, "kernel"}));  // required
    // Sizes as MAXPOOL2D's and AVGPOOL2D's, the block kept.
    Context ctx;
    Program p(ctx);
    std::vector<TensorId> ids;
    TensorId out = NO_TENSOR;
    std::vector<ImmArg> imms = k({3, 3}, {2, 2}, {1, 1});
    imms.push_back(imm_b("ceil_mode", true));
    ASSERT_TRUE(build_op(p, op, {f32({2, 3, 15, 16, 8})}, imms, &ids, &out));
    EXPECT_EQ(p.desc(out).type, f32({2, 3, 8, 9, 8}));
  }
  const std::string mn = "GLOBAL_AVGPOOL_NCHWC";
  EXPECT_TRUE(append_fails(Opcode::GLOBAL_AVGPOOL_NCHWC, {f32({1, 2, 3, 4})}, {},
                           {mn + ": input operand 1 (f32[1,2,3,4]) must be NCHWc [N, Cb, H, W, b] (rank 5)"}));
  EXPECT_TRUE(append_fails(Opcode::GLOBAL_AVGPOOL_NCHWC, {f32({1, 2, 3, 4, 4})}, {},
                           {mn, "has blocks of 4 channels; a block must be 8 or 16"}));
  EXPECT_TRUE(append_fails(Opcode::GLOBAL_AVGPOOL_NCHWC, {TensorType{DType::I32, Shape{1, 2, 3, 4, 8}}}, {},
                           {mn, "must be f32"}));
  Context ctx;
  Program p(ctx);
  std::vector<TensorId> ids;
  TensorId out = NO_TENSOR;
  ASSERT_TRUE(build_op(p, Opcode::GLOBAL_AVGPOOL_NCHWC, {f32({2, 3, 7, 5, 16})}, {}, &ids, &out));
  EXPECT_EQ(p.desc(out).type, f32({2, 3, 1, 1, 16}));
}

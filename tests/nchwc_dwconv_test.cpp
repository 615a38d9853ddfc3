// DWCONV2D_NCHWC beyond the parity table: against the naive NCHW loop of
// tests/nchwc_dwconv_naive.h (the data packed by the test) at every JIT level with the block size
// of that level and without the JIT at both block sizes, asserting which kernel ran; with a guard
// band after the output and the padding lanes checked; two threads bitwise one thread; the shape
// errors by operand; no gradient, by name; and a fused activation after it.
#include <cstring>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engine/autodiff.h"
#include "engine/executor.h"
#include "shell/shell.h"
#include "tests/jit_levels.h"
#include "tests/nchwc_dwconv_naive.h"
#include "tests/op_harness.h"

namespace nnasm::test {
namespace {

// The sizes the brief of the op asks for: C across the block sizes' tails, maps from 1×1 to
// 14×14 (and wider ones, whose clean column blocks run in a loop), kernels 1×1, 3×3 and 5×5,
// strides 1 and 2, pads 0 to 3 (3: rows and columns that only the bias reaches), dilation 2,
// relu and ReLU6, batch 1 and 2.
const std::vector<DwCase>& dw_cases() {
  static const std::vector<DwCase> c = {
      {1, 1, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, true, "none"},           // every tap but the centre in the padding
      {2, 7, 3, 5, 3, 3, 1, 1, 1, 1, 1, 1, true, "relu"},
      {1, 8, 7, 7, 3, 3, 2, 2, 1, 1, 1, 1, false, "none"},
      {1, 9, 13, 11, 5, 5, 1, 1, 2, 2, 1, 1, true, "clipped_relu"},
      {2, 16, 14, 14, 3, 3, 2, 2, 1, 1, 1, 1, true, "clipped_relu"},
      {1, 17, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1, true, "relu"},
      {1, 33, 13, 11, 3, 3, 1, 1, 2, 2, 2, 2, true, "none"},        // dilation 2
      {2, 17, 7, 7, 1, 1, 1, 1, 0, 0, 1, 1, true, "none"},          // 1×1
      {1, 7, 13, 11, 5, 5, 2, 2, 2, 2, 1, 1, false, "relu"},
      {1, 33, 3, 5, 5, 5, 1, 1, 2, 2, 1, 1, true, "clipped_relu"},  // a kernel larger than the map
      {1, 9, 7, 7, 3, 3, 1, 1, 0, 0, 1, 1, true, "none"},           // unpadded
      {1, 8, 13, 11, 3, 3, 2, 2, 2, 2, 1, 1, true, "relu"},
      {2, 9, 7, 7, 3, 3, 1, 1, 3, 3, 1, 1, true, "clipped_relu"},   // padding past the taps' reach
      {1, 16, 14, 14, 3, 3, 2, 1, 0, 1, 1, 1, false, "none"},       // row and column strides differ
      {1, 17, 9, 40, 3, 3, 1, 1, 1, 1, 1, 1, true, "relu"},         // clean column blocks in a loop
      {1, 7, 12, 113, 3, 3, 2, 2, 1, 1, 1, 1, true, "none"},
      {2, 33, 5, 14, 3, 5, 1, 2, 1, 2, 2, 1, true, "relu"},
  };
  return c;
}

// A case's operands, plain (for the naive loop) and packed for blocks of b.
struct DwOperands {
  std::vector<double> x, w, bias;  // NCHW, [C, 1, kh, kw], [C] (empty: none)
};

DwOperands dw_operands(const DwCase& k, std::mt19937& rng) {
  DwOperands o;
  o.x = random_f32(Shape{k.n, k.c, k.h, k.w}, rng).v;
  o.w = random_f32(Shape{k.c, 1, k.kh, k.kw}, rng).v;
  if (k.bias) o.bias = random_f32(Shape{k.c}, rng).v;
  return o;
}

std::vector<ImmArg> dw_imms(const DwCase& k) {
  std::vector<ImmArg> imms = {imm_ints("stride", {k.sh, k.sw}), imm_ints("pad", {k.ph, k.pw}),
                              imm_ints("dilation", {k.dh, k.dw})};
  if (k.act != "none") imms.insert(imms.end(), {imm_enum("act", k.act), imm_f("act_alpha", DW_RELU6)});
  return imms;
}

struct DwRun {
  std::vector<float> y;  // packed [N, Cb, Ho, Wo, b]
  std::string kernel;
  int parts = 0;
  std::vector<std::string> problems;  // guard band, or a failure
};

// Runs the case on blocks of b at `jit` on `threads` threads, the output and its padding filled
// with GUARD_WORD first.
DwRun run_dw(const DwCase& k, const DwOperands& o, int64_t b, const JitConfig& jit, int threads) {
  DwRun r;
  Context ctx;
  ctx.set_jit(jit);
  ctx.set_threads(threads);
  ctx.set_flush_denormals(false);
  Program p(ctx);
  const int64_t cb = dw_blocks(k.c, b);
  std::vector<HostTensor> in = {
      host(DType::F32, Shape{k.n, cb, k.h, k.w, b}, dw_pack_activations(o.x, k.n, k.c, k.h, k.w, b)),
      host(DType::F32, Shape{cb, k.kh, k.kw, b}, dw_pack_weights(o.w, k.c, k.kh, k.kw, b))};
  if (k.bias) in.push_back(host_f32(o.bias));
  std::vector<TensorType> types;
  for (const HostTensor& t : in) types.push_back(t.type);
  std::vector<TensorId> ids;
  TensorId out = NO_TENSOR;
  if (Status s = build_op(p, Opcode::DWCONV2D_NCHWC, types, dw_imms(k), &ids, &out); !s) {
    r.problems.push_back(s.message());
    return r;
  }
  p.mark_output(out);
  auto ex = Executor::prepare(p);
  if (!ex) {
    r.problems.push_back(ex.status().message());
    return r;
  }
  for (size_t t = 0; t < in.size(); ++t) {
    float* v = ctx.at(ids[t]).f32();
    for (size_t i = 0; i < in[t].v.size(); ++i) v[i] = static_cast<float>(in[t].v[i]);
  }
  Tensor& y = ctx.at(out);
  uint32_t* words = static_cast<uint32_t*>(y.data.data());
  const size_t n_words = padded_bytes(y.numel()) / 4;
  std::fill(words, words + n_words, GUARD_WORD);
  ex.value()->run();
  r.y.assign(y.f32(), y.f32() + y.numel());
  for (size_t i = static_cast<size_t>(y.numel()); i < n_words; ++i)
    if (words[i] != GUARD_WORD) {
      r.problems.push_back(fmt::format("guard band overwritten {} words past the end", i - y.numel()));
      break;
    }
  const Program& run = ex.value()->program();
  for (size_t i = 0; i < run.code().size(); ++i)
    if (run.code()[i].op == Opcode::DWCONV2D_NCHWC) r.kernel = ex.value()->kernel_name(i), r.parts = ex.value()->parts(i);
  return r;
}

// The run against the naive loop: every real lane within the summation tolerance, every padding
// lane act(0) = 0 (x, w and the bias are zero there).
::testing::AssertionResult matches_naive(const DwCase& k, const DwOperands& o, int64_t b, const DwRun& r) {
  if (!r.problems.empty()) return ::testing::AssertionFailure() << r.problems[0];
  std::vector<double> want, mag;
  dw_naive(k, o.x, o.w, o.bias, &want, &mag);
  const int64_t cb = dw_blocks(k.c, b), ho = k.ho(), wo = k.wo();
  if (r.y.size() != static_cast<size_t>(k.n * cb * ho * wo * b))
    return ::testing::AssertionFailure() << "output of " << r.y.size() << " elements";
  int bad = 0;
  std::string msg;
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t c = 0; c < cb * b; ++c)
      for (int64_t oy = 0; oy < ho; ++oy)
        for (int64_t ox = 0; ox < wo; ++ox) {
          const double got = r.y[static_cast<size_t>((((n * cb + c / b) * ho + oy) * wo + ox) * b + c % b)];
          bool ok;
          double expect = 0;
          if (c < k.c) {
            const size_t i = static_cast<size_t>(((n * k.c + c) * ho + oy) * wo + ox);
            expect = want[i];
            ok = std::fabs(got - expect) <= dw_allowed_error(k.kh * k.kw + 1, mag[i]);
          } else {
            ok = got == 0;
          }
          if (!ok && bad++ < 5) msg += fmt::format("  n {} c {} ({}, {}): got {}, expected {}\n", n, c, oy, ox, got, expect);
        }
  if (bad) return ::testing::AssertionFailure() << bad << " elements differ\n" << msg;
  return ::testing::AssertionSuccess();
}

std::string case_str(const DwCase& k) {
  return fmt::format("N {} C {} {}x{} kernel {}x{} stride [{},{}] pad [{},{}] dilation [{},{}] bias {} act {}", k.n, k.c,
                     k.h, k.w, k.kh, k.kw, k.sh, k.sw, k.ph, k.pw, k.dh, k.dw, k.bias, k.act);
}

// A run of a case: the block size, the JIT setting, and the kernel expected to run ("ref", or the
// level whose code runs: b = 8 takes AVX2 code on an AVX-512 machine too; b = 16 below AVX-512
// has no generated kernel).
struct DwLevel {
  int64_t b;
  JitConfig jit;
  std::string code;
};

std::vector<DwLevel> dw_levels() {
  std::vector<DwLevel> v = {{8, JitConfig{false, Isa::AVX512}, "ref"}, {16, JitConfig{false, Isa::AVX512}, "ref"}};
  for (Isa isa : jit_levels()) {
    v.push_back({vector_floats(isa), JitConfig{true, isa}, isa_name(isa)});
    if (isa == Isa::AVX512) v.push_back({8, JitConfig{true, isa}, "avx2"});
    if (isa == Isa::AVX2) v.push_back({16, JitConfig{true, isa}, "ref"});
  }
  return v;
}

TEST(DwConv2dNchwc, MatchesTheNaiveLoopAtEveryLevel) {
  std::mt19937 rng(144);
  for (const DwCase& k : dw_cases()) {
    SCOPED_TRACE(case_str(k));
    const DwOperands o = dw_operands(k, rng);
    for (const DwLevel& l : dw_levels()) {
      SCOPED_TRACE(fmt::format("b = {}, JIT {} at {}", l.b, l.jit.enabled ? "on" : "off", isa_name(l.jit.cap)));
      const DwRun r = run_dw(k, o, l.b, l.jit, 1);
      EXPECT_TRUE(matches_naive(k, o, l.b, r));
      if (l.code == "ref") {
        EXPECT_EQ(r.kernel, "ref");
      } else {
        EXPECT_NE(r.kernel.find("f32_dwconv2d_nchwc"), std::string::npos) << r.kernel;
        EXPECT_NE(r.kernel.find("__" + l.code + "_"), std::string::npos) << r.kernel;
      }
    }
  }
}

// Two threads split the N·Cb·Ho rows, also inside a channel block's plane (Cb odd at batch 1),
// and give the bits one thread gives.
TEST(DwConv2dNchwc, TwoThreadsAreBitwiseOneThread) {
  const DwCase cases[] = {
      {1, 33, 56, 56, 3, 3, 1, 1, 1, 1, 1, 1, true, "clipped_relu"},  // 3 blocks of 16, 5 of 8
      {1, 40, 112, 112, 3, 3, 2, 2, 1, 1, 1, 1, true, "relu"},
      {2, 17, 56, 56, 3, 3, 1, 1, 1, 1, 1, 1, false, "none"},
      {1, 96, 28, 30, 5, 5, 1, 1, 2, 2, 1, 1, true, "none"},
  };
  std::mt19937 rng(7);
  for (const DwCase& k : cases) {
    SCOPED_TRACE(case_str(k));
    const DwOperands o = dw_operands(k, rng);
    for (Isa isa : jit_levels()) {
      SCOPED_TRACE(isa_name(isa));
      const int64_t b = vector_floats(isa);
      const DwRun one = run_dw(k, o, b, JitConfig{true, isa}, 1), two = run_dw(k, o, b, JitConfig{true, isa}, 2);
      EXPECT_TRUE(matches_naive(k, o, b, two));
      EXPECT_EQ(one.parts, 1);
      EXPECT_EQ(two.parts, 2);
      EXPECT_NE(two.kernel.find(std::string("__") + isa_name(isa) + "_"), std::string::npos) << two.kernel;
      ASSERT_EQ(one.y.size(), two.y.size());
      EXPECT_EQ(std::memcmp(one.y.data(), two.y.data(), one.y.size() * sizeof(float)), 0);
    }
  }
}

TensorType f32(std::vector<int64_t> dims) { return TensorType{DType::F32, shape_of(dims)}; }

TEST(DwConv2dNchwc, ShapeErrorsNameTheOperand) {
  const Opcode op = Opcode::DWCONV2D_NCHWC;
  EXPECT_TRUE(append_fails(op, {f32({1, 2, 5, 5, 16})}, {}, {"DWCONV2D_NCHWC takes 2 or 3 inputs", "got 1"}));
  EXPECT_TRUE(append_fails(op, {f32({1, 32, 5, 5}), f32({2, 3, 3, 16})}, {},
                           {"DWCONV2D_NCHWC: input operand 1 (f32[1,32,5,5]) must be blocked NCHWc", "rank 5"}));
  EXPECT_TRUE(append_fails(op, {f32({1, 2, 5, 5, 4}), f32({2, 3, 3, 4})}, {},
                           {"input operand 1 (f32[1,2,5,5,4]) has blocks of 4 channels; b must be 8 or 16"}));
  EXPECT_TRUE(append_fails(op, {f32({1, 2, 5, 5, 16}), f32({3, 3, 3, 16})}, {},
                           {"weight operand 2 (f32[3,3,3,16]) must be packed depthwise weights", "[2, kh, kw, 16]"}));
  EXPECT_TRUE(append_fails(op, {f32({1, 2, 5, 5, 16}), f32({2, 3, 3, 8})}, {}, {"weight operand 2 (f32[2,3,3,8])"}));
  EXPECT_TRUE(append_fails(op, {f32({1, 2, 5, 5, 16}), f32({32, 1, 3, 3})}, {}, {"weight operand 2 (f32[32,1,3,3])"}));
  EXPECT_TRUE(append_fails(op, {f32({1, 2, 5, 5, 16}), f32({2, 3, 3, 16}), f32({33})}, {},
                           {"bias operand 3 (f32[33]) must be f32[C]", "⌈C/16⌉ = 2 blocks"}));
  EXPECT_TRUE(append_fails(op, {f32({1, 2, 5, 5, 16}), f32({2, 3, 3, 16}), f32({2, 16})}, {}, {"bias operand 3"}));
  EXPECT_TRUE(append_fails(op, {f32({1, 2, 5, 5, 16}), f32({2, 7, 7, 16})}, {}, {"a 7x7 kernel", "does not fit input"}));
  EXPECT_TRUE(append_fails(op, {f32({1, 2, 5, 5, 16}), f32({2, 3, 3, 16})}, {imm_ints("stride", {0, 1})},
                           {"DWCONV2D_NCHWC: stride must be at least 1"}));
  EXPECT_TRUE(append_fails(op, {f32({1, 2, 5, 5, 16}), f32({2, 3, 3, 16})}, {imm_ints("pad", {1})},
                           {"DWCONV2D_NCHWC: pad must have 2 entries"}));
  EXPECT_TRUE(append_fails(op, {TensorType{DType::I32, Shape{1, 2, 5, 5, 16}}, f32({2, 3, 3, 16})}, {},
                           {"DWCONV2D_NCHWC: operand 1 (i32[1,2,5,5,16]) must be f32"}));
}

// The layout pass leaves training programs in NCHW, so the op has no backward rule: autodiff
// says so by name instead of differentiating it wrongly.
TEST(DwConv2dNchwc, HasNoGradient) {
  EXPECT_EQ(op_hooks(Opcode::DWCONV2D_NCHWC).grad, nullptr);
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {1, 2, 5, 5, 16}), w = g.input("w", {2, 3, 3, 16});
  Var y = g.record(Opcode::DWCONV2D_NCHWC, {x, w}, {}, Loc::here());
  Var s = reduce_sum(reduce_sum(reduce_sum(reduce_sum(reduce_sum(y)))));
  ASSERT_TRUE(g.status()) << g.status().message();
  const Result<std::vector<TensorId>> gr = grad(p, s.id(), {x.id()});
  ASSERT_FALSE(gr.is_ok());
  EXPECT_NE(gr.status().message().find("DWCONV2D_NCHWC"), std::string::npos) << gr.status().message();
  EXPECT_NE(gr.status().message().find("no backward rule"), std::string::npos) << gr.status().message();
}

// An activation after it becomes its epilogue (the act fusion pass reads isa/activation.h's
// fused_act_imms), and the listing says so.
TEST(DwConv2dNchwc, AFollowingReluSixFusesIntoIt) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {1, 2, 7, 7, 16}), w = g.param("w", {2, 3, 3, 16}), b = g.param("b", {20});
  Var y = g.record(Opcode::DWCONV2D_NCHWC, {x, w, b}, {{"pad", imm_ints("pad", {1, 1}).value}}, Loc::here());
  g.output(clipped_relu(y, 6), "y");
  ASSERT_TRUE(g.status()) << g.status().message();
  auto ex = Executor::prepare(p);
  ASSERT_TRUE(ex) << ex.status().message();
  const Program& run = ex.value()->program();
  ASSERT_EQ(run.code().size(), 1u);
  EXPECT_EQ(run.code()[0].op, Opcode::DWCONV2D_NCHWC);
  EXPECT_EQ(fused_act(run.code()[0]), Activation::CLIPPED_RELU);
  EXPECT_EQ(fused_act_alpha(run.code()[0]), 6);
}

}  // namespace
}  // namespace nnasm::test

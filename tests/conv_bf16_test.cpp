// CONV_WEIGHTS_BF16 and CONV2D_BF16 beyond the parity sweep: odd sizes (C 1, 3, 17; O 1, 5, 33;
// maps 1, 7, 13), kernels 1×1 to 7×7, strides 1 and 2, pads 0 … 3, dilation 2, batches 1 and 3,
// with and without bias, each activation, at every JIT level and with the JIT off, against the
// naive loop of tests/conv_bf16_naive.h, with the kernel that ran asserted; the same bits on
// several threads; x's rounding to bf16 and NaN; each shape error; no gradient; the derive pass
// hoisting the weight's transpose; the listing round trip; the shell function.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "engine/autodiff.h"
#include "engine/executor.h"
#include "engine/passes/pass.h"
#include "isa/activation.h"
#include "ops/elementwise/activation.h"
#include "ops/op.h"
#include "serialize/listing.h"
#include "shell/shell.h"
#include "tests/conv_bf16_naive.h"
#include "tests/op_harness.h"
#include "tests/reduced_op_checks.h"
#include "tests/run_levels.h"

namespace nnasm::test {
namespace {

struct Case {
  int64_t n, c, h, w, o, kh, kw;
  ConvBf16Geom g;
  bool bias;
};

std::vector<ImmArg> geom_imms(const ConvBf16Geom& g) {
  return {imm_ints("stride", {g.sh, g.sw}), imm_ints("pad", {g.ph, g.pw}), imm_ints("dilation", {g.dh, g.dw})};
}

// Every C × O × map size with each of the four kernels; strides, pads, dilation, batch and bias
// cycled over them (a pad raised where the kernel would not fit the map). C 17 with a 7×7 kernel
// on the 13×13 map makes several pixel tiles and a shorter last one; 1×1 at stride 1 unpadded is
// a pure transpose of x.
std::vector<Case> sweep() {
  std::vector<Case> v;
  int i = 0;
  for (int64_t c : {1, 3, 17})
    for (int64_t o : {1, 5, 33})
      for (int64_t hw : {1, 7, 13})
        for (int64_t k : {1, 3, 5, 7}) {
          Case t{i % 3 == 0 ? 3 : 1, c, hw, hw, o, k, k, {}, i % 2 == 0};
          t.g.sh = t.g.sw = 1 + (i / 2) % 2;
          t.g.ph = t.g.pw = i % 4;
          t.g.dh = t.g.dw = i % 5 == 4 ? 2 : 1;
          const int64_t need = (t.g.dh * (k - 1) + 1 - hw + 1) / 2;  // pad so that the kernel fits
          if (t.g.ph < need) t.g.ph = t.g.pw = need;
          v.push_back(t);
          ++i;
        }
  // Unlike height and width: a 1×3 and a 3×1 kernel, strides [2, 1], pads [0, 2], dilation [1, 2].
  v.push_back(Case{2, 3, 9, 11, 5, 1, 3, {2, 1, 0, 2, 1, 2}, true});
  v.push_back(Case{1, 4, 11, 6, 7, 3, 1, {1, 2, 1, 0, 2, 1}, false});
  return v;
}

struct Operands {
  HostTensor x, w, wt, b;
  std::vector<HostTensor> in() const {
    std::vector<HostTensor> v{x, wt};
    if (!b.v.empty()) v.push_back(b);
    return v;
  }
};

Operands operands(const Case& t, std::mt19937& rng) {
  Operands r;
  r.x = random_f32(Shape{t.n, t.c, t.h, t.w}, rng, -2, 2);
  r.w = random_bf16(Shape{t.o, t.c, t.kh, t.kw}, rng, -0.5, 0.5);
  r.wt = transpose_conv_weight(r.w);
  r.b = t.bias ? random_f32(Shape{t.o}, rng, -1, 1) : HostTensor{TensorType{DType::F32, Shape{t.o}}, {}};
  return r;
}

std::string level_name(const Level& lv) { return lv.isa.empty() ? "ref" : lv.isa; }

// The bound kernel's name says the conv and its level; at AVX-512 vdpbf16ps exactly where the CPU
// has AVX512_BF16.
void expect_conv_kernel(const OpOutput& y, const Level& lv) {
  expect_kernel(y, lv, "bf16_conv2d");
  if (lv.isa == "avx512") {
    EXPECT_EQ(y.kernel.find("dpbf16") != std::string::npos, cpu_info().avx512_bf16) << y.kernel;
  }
}

TEST(ConvBf16, MatchesNaiveLoopAtEveryLevelAndWithJitOff) {
  std::mt19937 rng(53);
  const double alphas[] = {0, 0, 0.1, 1, 6, 0, 0, 0, 0, 0.75};  // per activation, as LINEAR_BF16's test
  const std::vector<Case> cases = sweep();
  for (const Level& lv : levels()) {
    int a = 0;
    for (const Case& t : cases) {
      const Activation act = static_cast<Activation>(a++ % ACTIVATION_COUNT);
      const double alpha = alphas[static_cast<int>(act)];
      const Operands op = operands(t, rng);
      std::vector<ImmArg> imms = geom_imms(t.g);
      imms.push_back(imm_enum("act", activation_name(act)));
      imms.push_back(imm_f("act_alpha", alpha));
      SCOPED_TRACE(describe(Opcode::CONV2D_BF16, op.in(), imms) + " " + level_name(lv));
      const OpOutput y = run_op(Opcode::CONV2D_BF16, op.in(), imms, false, lv.cfg);
      ASSERT_TRUE(y.status) << y.status.message();
      const auto f = [&](double z) { return act::apply(act, static_cast<float>(z), static_cast<float>(alpha)); };
      EXPECT_TRUE(matches(naive_conv2d_bf16(op.x, op.w, op.b, t.g, f), y));
      expect_conv_kernel(y, lv);
    }
  }
}

// On 2 and 3 threads the (image, pixel tile) units split into parts, each tile computed as on
// one thread: every output bit is the one-thread run's.
TEST(ConvBf16, ThreadsGiveTheBitsOfOneThread) {
  // 437 pixels of 153 taps: 4 tiles; 3 images of 4 tiles; 784 pixels of 64: 4 tiles; a 7×7
  // output (1×1 stride 2 on 14×14, batch 1): 4 tiles of 16, 16, 16 and 1 pixels.
  const Case cases[] = {{1, 17, 23, 19, 33, 3, 3, {1, 1, 1, 1, 1, 1}, true},
                        {3, 16, 13, 13, 40, 5, 5, {2, 2, 2, 2, 1, 1}, false},
                        {1, 64, 28, 28, 40, 1, 1, {}, true},
                        {1, 128, 14, 14, 256, 1, 1, {2, 2, 0, 0, 1, 1}, true}};
  std::mt19937 rng(59);
  for (const Level& lv : levels())
    for (const Case& t : cases) {
      const Operands op = operands(t, rng);
      std::vector<ImmArg> imms = geom_imms(t.g);
      imms.push_back(imm_enum("act", "relu"));
      SCOPED_TRACE(describe(Opcode::CONV2D_BF16, op.in(), imms) + " " + level_name(lv));
      RunConfig cfg = lv.cfg;
      const OpOutput one = run_op(Opcode::CONV2D_BF16, op.in(), imms, false, cfg);
      ASSERT_TRUE(one.status) << one.status.message();
      EXPECT_TRUE(matches(naive_conv2d_bf16(op.x, op.w, op.b, t.g, [](double z) { return z > 0 ? z : 0; }), one));
      for (int threads : {2, 3}) {
        cfg.threads = threads;
        const OpOutput y = run_op(Opcode::CONV2D_BF16, op.in(), imms, false, cfg);
        ASSERT_TRUE(y.status) << y.status.message();
        expect_conv_kernel(y, lv);
        if (!lv.isa.empty()) {
          EXPECT_GE(y.parts, 2) << threads << " threads, " << y.kernel;
        }
        ASSERT_EQ(one.v.size(), y.v.size());
        for (size_t i = 0; i < y.v.size(); ++i) {
          const float e = static_cast<float>(one.v[i]), g = static_cast<float>(y.v[i]);
          ASSERT_EQ(std::memcmp(&e, &g, 4), 0) << threads << " threads, element " << i << ": " << g << " vs " << e;
        }
      }
    }
}

// x = 1 + 2⁻⁸ lies halfway between the bf16 values 1 and 1 + 2⁻⁷ and rounds to the even one, 1;
// 1 + 3·2⁻⁸ rounds up to 1 + 2⁻⁶. A 1×1 convolution with w = 1 and −1 gives those values
// exactly; a NaN pixel makes its outputs NaN and leaves the others.
TEST(ConvBf16, RoundsXToNearestEvenAndPropagatesNaN) {
  const double u = std::ldexp(1.0, -8);
  const double NaN = std::numeric_limits<double>::quiet_NaN();
  for (const Level& lv : levels()) {
    SCOPED_TRACE(level_name(lv));
    const HostTensor x = host(DType::F32, Shape{1, 1, 1, 3}, {1 + u, 1 + 3 * u, NaN});
    const HostTensor wt = host(DType::BF16, Shape{1, 1, 1, 2}, {1, -1});
    const OpOutput y = run_op(Opcode::CONV2D_BF16, {x, wt}, {}, false, lv.cfg);
    ASSERT_TRUE(y.status) << y.status.message();
    ASSERT_EQ(y.type.str(), "f32[1,2,1,3]");
    EXPECT_EQ(y.v[0], 1);
    EXPECT_EQ(y.v[1], 1 + 4 * u);
    EXPECT_TRUE(std::isnan(y.v[2]));
    EXPECT_EQ(y.v[3], -1);
    EXPECT_EQ(y.v[4], -1 - 4 * u);
    EXPECT_TRUE(std::isnan(y.v[5]));
    expect_conv_kernel(y, lv);
  }
}

// CONV_WEIGHTS_BF16 is exactly the transpose, on every level (it has the reference kernel only).
TEST(ConvBf16, WeightsTransposeExactly) {
  std::mt19937 rng(61);
  const HostTensor w = random_bf16(Shape{5, 3, 2, 7}, rng, -4, 4);
  const OpOutput y = run_op(Opcode::CONV_WEIGHTS_BF16, {w}, {}, false, RunConfig{});
  ASSERT_TRUE(y.status) << y.status.message();
  EXPECT_EQ(y.type.str(), "bf16[3,2,7,5]");
  EXPECT_EQ(y.kernel, "ref");
  EXPECT_EQ(y.v, transpose_conv_weight(w).v);
}

TEST(ConvBf16, ShapeErrorsNameTheOperand) {
  const TensorType x{DType::F32, Shape{1, 3, 8, 8}}, wt{DType::BF16, Shape{3, 3, 3, 4}}, b{DType::F32, Shape{4}};
  auto fails = [](std::vector<TensorType> in, std::vector<ImmArg> imms, std::vector<std::string> needles) {
    EXPECT_TRUE(append_fails(Opcode::CONV2D_BF16, in, imms, needles));
  };
  fails({x}, {}, {"CONV2D_BF16 takes 2 or 3 inputs", "got 1"});
  fails({x, wt, b, b}, {}, {"CONV2D_BF16 takes 2 or 3 inputs", "got 4"});
  fails({TensorType{DType::I32, Shape{1, 3, 8, 8}}, wt}, {}, {"CONV2D_BF16", "x", "i32[1,3,8,8]", "must be f32"});
  fails({TensorType{DType::BF16, Shape{1, 3, 8, 8}}, wt}, {}, {"x", "bf16[1,3,8,8]", "must be f32"});
  fails({TensorType{DType::F32, Shape{3, 8, 8}}, wt}, {}, {"x", "f32[3,8,8]", "NCHW (rank 4)"});
  fails({x, TensorType{DType::F32, Shape{3, 3, 3, 4}}}, {}, {"weight", "f32[3,3,3,4]", "must be bf16", "CONV2D"});
  fails({x, TensorType{DType::BF16, Shape{27, 4}}}, {}, {"weight", "bf16[27,4]", "[in, kh, kw, out] (rank 4)"});
  fails({x, TensorType{DType::BF16, Shape{2, 3, 3, 4}}}, {}, {"weight", "bf16[2,3,3,4]", "takes 2 input channels", "has 3"});
  fails({x, wt}, {imm_i("groups", 3)}, {"groups must be 1, got 3", "stay f32"});
  fails({x, wt}, {imm_i("groups", 0)}, {"groups must be at least 1, got 0"});
  fails({x, wt}, {imm_ints("stride", {0, 1})}, {"CONV2D_BF16", "stride must be at least 1"});
  fails({x, wt}, {imm_ints("stride", {1})}, {"stride must have 2 entries"});
  fails({x, wt}, {imm_ints("pad", {-1, 0})}, {"pad must be at least 0"});
  fails({x, wt}, {imm_ints("dilation", {1, 0})}, {"dilation must be at least 1"});
  fails({x, wt}, {imm_ints("dilation", {4, 4})}, {"3x3 kernel (dilation [4,4]) does not fit", "f32[1,3,8,8]"});
  fails({x, wt, TensorType{DType::F32, Shape{5}}}, {}, {"bias", "f32[5]", "must be f32[4]"});
  fails({x, wt, TensorType{DType::BF16, Shape{4}}}, {}, {"bias", "bf16[4]", "must be f32[4]"});
  fails({x, wt, TensorType{DType::F32, Shape{1, 4}}}, {}, {"bias", "f32[1,4]", "must be f32[4]"});
  EXPECT_TRUE(append_fails(Opcode::CONV_WEIGHTS_BF16, {TensorType{DType::F32, Shape{4, 3, 3, 3}}}, {},
                           {"CONV_WEIGHTS_BF16", "f32[4,3,3,3]", "must be bf16"}));
  EXPECT_TRUE(append_fails(Opcode::CONV_WEIGHTS_BF16, {TensorType{DType::BF16, Shape{4, 27}}}, {},
                           {"CONV_WEIGHTS_BF16", "bf16[4,27]", "rank 4"}));
}

TEST(ConvBf16, HasNoGradient) {
  EXPECT_EQ(op_hooks(Opcode::CONV2D_BF16).grad, nullptr);
  EXPECT_EQ(op_hooks(Opcode::CONV_WEIGHTS_BF16).grad, nullptr);
  expect_no_gradient(Opcode::CONV2D_BF16,
                     {TensorType{DType::F32, Shape{1, 2, 5, 5}},
                      TensorType{DType::BF16, Shape{2, 3, 3, 4}},
                      TensorType{DType::F32, Shape{4}}},
                     {0, 2});
}

const char* PROGRAM =
    "input %x : f32[1,3,6,6]\nparam @w : bf16[4,3,3,3]\nparam @b : f32[4]\noutput %y\n\nforward:\n"
    "  CONV_WEIGHTS_BF16 @w -> %wt\n  CONV2D_BF16 %x, %wt, @b -> %h stride=[2,1] pad=[1,1]\n"
    "  LEAKYRELU %h -> %y slope=0.2\n";

// The derive pass moves the transpose to the derive section (its input is a param), and act
// fusion takes the activation into CONV2D_BF16's epilogue.
TEST(ConvBf16, DeriveHoistsTheTransposeAndActFusionTakesTheActivation) {
  expect_derive_and_act_fusion(PROGRAM, Opcode::CONV_WEIGHTS_BF16, Opcode::CONV2D_BF16, Activation::LEAKYRELU, 0.2f);
}

TEST(ConvBf16, ListingRoundTrips) {
  Context ctx;
  Program p(ctx);
  ASSERT_TRUE(program_parse(PROGRAM, "t.nnasm", &p));
  const std::string once = program_print(p);
  EXPECT_NE(once.find("CONV_WEIGHTS_BF16 @w -> %wt"), std::string::npos) << once;
  EXPECT_NE(once.find("%x, %wt, @b -> %h"), std::string::npos) << once;
  EXPECT_NE(once.find("stride=[2,1]"), std::string::npos) << once;
  EXPECT_NE(once.find("bf16[3,3,3,4]"), std::string::npos) << once;  // wt's inferred type
  Context ctx2;
  Program q(ctx2);
  ASSERT_TRUE(program_parse(once, "t2.nnasm", &q)) << once;
  EXPECT_EQ(program_print(q), once);
}

// A whole program, its weight a param and then a constant, at -O0 and -O1 (derive, constant
// folding, act fusion), run by the executor at each level: the naive loop's values.
TEST(ConvBf16, ProgramRunsTheSameAtEachOptLevel) {
  std::mt19937 rng(67);
  const Case t{1, 3, 6, 6, 4, 3, 3, {2, 1, 1, 1, 1, 1}, true};
  const Operands op = operands(t, rng);
  const Expected e = naive_conv2d_bf16(op.x, op.w, op.b, t.g, [](double z) { return z > 0 ? z : 0.2 * z; });
  auto list = [](const HostTensor& h) {
    std::string v;
    for (double d : h.v) v += (v.empty() ? "" : ", ") + fmt::format("{}", static_cast<float>(d));
    return "[" + v + "]";
  };
  for (const char* kind : {"param", "const"})
    for (int opt : {0, 1}) {
      SCOPED_TRACE(std::string(kind) + " -O" + std::to_string(opt));
      std::string text = PROGRAM;
      text.replace(text.find("param @w : bf16[4,3,3,3]"), 24, fmt::format("{} @w : bf16[4,3,3,3] = {}", kind, list(op.w)));
      text.replace(text.find("param @b : f32[4]"), 17, fmt::format("{} @b : f32[4] = {}", kind, list(op.b)));
      Context ctx;
      ctx.set_opt_level(opt);
      Program p(ctx);
      ASSERT_TRUE(program_parse(text, "t.nnasm", &p)) << text;
      auto made = Executor::prepare(p);
      ASSERT_TRUE(made) << made.status().message();
      Executor& ex = *made.value();
      std::copy(op.x.v.begin(), op.x.v.end(), ex.tensor("x")->f32());
      ex.run();
      const Tensor* y = ex.tensor("y");
      ASSERT_EQ(y->numel(), static_cast<int64_t>(e.t.v.size()));
      OpOutput got;
      got.type = e.t.type;
      got.v.assign(y->f32(), y->f32() + y->numel());
      got.outs.push_back(HostTensor{got.type, got.v});
      EXPECT_TRUE(matches(e, got));
    }
}

// The shell function records the transpose and the convolution, with its immediates.
TEST(ConvBf16, ShellFunctionRecordsTransposeThenConvolution) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {2, 3, 9, 9});
  Var w = g.constant("w", {6, 3, 3, 3}, std::vector<double>(162, 0.5), DType::BF16);
  Var b = g.constant("b", {6}, std::vector<double>(6, 1));
  Conv2dOptions o;
  o.stride = {2, 2};
  o.pad = {1, 1};
  o.act = Activation::RELU;
  Var y = conv2d_bf16(x, w, b, o);
  ASSERT_TRUE(g.status()) << g.status().message();
  EXPECT_EQ(y.type().str(), "f32[2,6,5,5]");
  ASSERT_EQ(p.code().size(), 2u);
  EXPECT_EQ(p.code()[0].op, Opcode::CONV_WEIGHTS_BF16);
  EXPECT_EQ(p.code()[1].op, Opcode::CONV2D_BF16);
  EXPECT_EQ(p.code()[1].in.size(), 3u);
  EXPECT_EQ(fused_act(p.code()[1]), Activation::RELU);
  EXPECT_EQ(p.code()[1].ints(NNASM_IMM(CONV2D_BF16, stride)), (std::vector<int64_t>{2, 2}));
  // No bias: two inputs.
  Var y2 = conv2d_bf16(x, w, Var(), o);
  ASSERT_TRUE(g.status()) << g.status().message();
  EXPECT_EQ(p.code().back().in.size(), 2u);
  EXPECT_EQ(y2.type().str(), "f32[2,6,5,5]");
  // Groups other than 1 are refused with CONV2D_BF16's message kept.
  o.groups = 3;
  EXPECT_FALSE(conv2d_bf16(x, w, b, o).valid());
  EXPECT_NE(g.status().message().find("groups must be 1"), std::string::npos) << g.status().message();
}

}  // namespace
}  // namespace nnasm::test

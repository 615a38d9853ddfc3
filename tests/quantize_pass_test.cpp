// quantize_program (engine/quantize.h): the rewrite of dense layers to bf16, the per-layer error
// criterion, --keep, the refusals, and the int8 weight conversion.
#include <algorithm>
#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "engine/executor.h"
#include "engine/optimizer.h"
#include "engine/quantize.h"
#include "isa/bf16.h"
#include "serialize/listing.h"
#include "serialize/model_file.h"
#include "shell/shell.h"

namespace nnasm {
namespace {

constexpr int64_t kBatch = 4, kIn = 24, kHidden = 32, kOut = 6;

// x [4,24] -> fc1 (relu fused) -> fc2 -> probs; inference.
void record_mlp(Program& p) {
  Graph g(p);
  Var x = g.input("x", {kBatch, kIn});
  LinearOptions fc1{"fc1"};
  fc1.act = Activation::RELU;
  Var h = linear(x, kHidden, fc1);
  g.output(softmax(linear(h, kOut, {"fc2"})), "probs");
  ASSERT_TRUE(g.status()) << g.status().message();
}

std::vector<float> pattern(size_t n, float phase) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(0.37f * static_cast<float>(i) + phase);
  return v;
}

CalibrationInput calib(const std::string& name, Shape shape, float phase = 0) {
  CalibrationInput c{name, {DType::F32, shape}, pattern(static_cast<size_t>(shape.numel()), phase), {}};
  return c;
}

// Runs `p` on `x` and returns output `name`.
std::vector<float> run(const Program& p, const std::vector<float>& x, const std::string& name) {
  auto ex = Executor::prepare(p);
  EXPECT_TRUE(ex) << ex.status().message();
  if (!ex) return {};
  std::memcpy(ex.value()->tensor("x")->f32(), x.data(), x.size() * sizeof(float));
  ex.value()->run();
  const Tensor* t = ex.value()->tensor(name);
  return std::vector<float>(t->f32(), t->f32() + t->numel());
}

// ||got − want||₂ / ||want||₂ (sizes asserted equal); 0 where both are zero.
double relative_error(const std::vector<float>& want, const std::vector<float>& got) {
  EXPECT_EQ(want.size(), got.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    num += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    den += static_cast<double>(want[i]) * want[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// `q` (quantized from `p`) on `x`: output `out` within `bound` of f32's yet not equal to it, and
// the same again after a model file round trip.
void expect_close_through_a_file(const Program& p, const Program& q, const std::vector<float>& x,
                                 const std::string& out, double bound) {
  const std::vector<float> f32 = run(p, x, out), got = run(q, x, out);
  const double e = relative_error(f32, got);
  EXPECT_LT(e, bound);
  EXPECT_GT(e, 0) << "the reduced program computed exactly the f32 result: was it rewritten?";
  Context lctx;
  Program loaded(lctx);
  ASSERT_TRUE(model_decode(model_encode(q), "q.nnm", &loaded));
  EXPECT_EQ(run(loaded, x, out), got);
}

TEST(QuantizePass, Bf16RewritesEachLinearAndDropsItsF32Weight) {
  Context ctx(3);
  Program p(ctx);
  record_mlp(p);
  Context qctx;
  Program q(qctx);
  QuantizeOptions o;
  o.calibration.push_back(calib("x", {16, kIn}));
  Result<QuantizeReport> r = quantize_program(p, o, &q);
  ASSERT_TRUE(r) << r.status().message();

  EXPECT_EQ(q.find("fc1.w"), NO_TENSOR);
  EXPECT_EQ(q.find("fc2.w"), NO_TENSOR);
  ASSERT_NE(q.find("fc1.w.bf16"), NO_TENSOR);
  EXPECT_EQ(q.desc(q.find("fc1.w.bf16")).type, (TensorType{DType::BF16, Shape{kIn, kHidden}}));
  EXPECT_EQ(q.desc(q.find("fc2.w.bf16")).type, (TensorType{DType::BF16, Shape{kHidden, kOut}}));
  EXPECT_EQ(q.desc(q.find("fc1.w.bf16")).role, Role::PARAM);
  // The weights are the f32 ones rounded to bf16, bit for bit.
  const float* w = ctx.at(p.find("fc1.w")).f32();
  const uint16_t* wb = static_cast<const uint16_t*>(qctx.at(q.find("fc1.w.bf16")).storage());
  for (int64_t i = 0; i < kIn * kHidden; ++i) ASSERT_EQ(wb[i], bf16_from_f32(w[i])) << i;
  int bf16_ops = 0;
  for (const Instruction& ins : q.code()) {
    EXPECT_NE(ins.op, Opcode::LINEAR);
    if (ins.op != Opcode::LINEAR_BF16) continue;
    ++bf16_ops;
    if (q.desc(ins.out[0]).type.shape[1] == kHidden) {  // fc1 keeps its fused relu
      EXPECT_EQ(ins.imm, p.code()[0].imm);
    }
  }
  EXPECT_EQ(bf16_ops, 2);
  ASSERT_NE(q.find("fc1.b"), NO_TENSOR);
  EXPECT_EQ(q.desc(q.find("fc1.b")).type.dtype, DType::F32);

  const QuantizeReport& rep = r.value();
  ASSERT_EQ(rep.layers.size(), 2u);
  for (const QuantizedLayer& l : rep.layers) {
    EXPECT_EQ(l.chosen, "bf16") << l.reason;
    EXPECT_EQ(l.op, "LINEAR");
    EXPECT_GE(l.error, 0);
    EXPECT_LE(l.error, default_max_error(QuantType::BF16));
  }
  EXPECT_EQ(rep.layers[0].weight, "fc1.w");
  EXPECT_EQ(rep.layers[0].shape, (Shape{kIn, kHidden}));
  EXPECT_EQ(rep.calibration_rows, 16);
  EXPECT_FALSE(rep.synthetic);
  const uint64_t f32_w = 4 * (kIn * kHidden + kHidden * kOut), b = 4 * (kHidden + kOut);
  EXPECT_EQ(rep.weight_bytes_before, f32_w + b);
  EXPECT_EQ(rep.weight_bytes_after, f32_w / 2 + b);
  EXPECT_NE(rep.str().find("LINEAR %"), std::string::npos) << rep.str();
  EXPECT_LT(model_encode(q).size(), model_encode(p).size());
}

TEST(QuantizePass, Bf16OutputsStayWithinTheRoundingBound) {
  Context ctx(5);
  Program p(ctx);
  record_mlp(p);
  Context qctx;
  Program q(qctx);
  const size_t tensors = ctx.size();
  Result<QuantizeReport> r = quantize_program(p, {}, &q);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(ctx.size(), tensors) << "the calibration run left tensors in the model's context";
  EXPECT_TRUE(r->synthetic);
  EXPECT_EQ(r->calibration_rows, SYNTHETIC_ROWS);
  // bf16 keeps 8 significant bits: x and W each off by at most 2^-9 relative, so each product by
  // about 2^-8; two layers and a softmax stay well inside 2% of the probabilities' size.
  const std::vector<float> x = pattern(kBatch * kIn, 1.3f);
  const std::vector<float> want = run(p, x, "probs"), got = run(q, x, "probs");
  const double e = relative_error(want, got);
  EXPECT_LT(e, 0.02);
  EXPECT_GT(e, 0) << "the bf16 program computed exactly the f32 result: was it rewritten?";

  // The model file round trip keeps the rewrite and its values.
  Context lctx;
  Program loaded(lctx);
  ASSERT_TRUE(model_decode(model_encode(q), "q.nnm", &loaded));
  EXPECT_EQ(run(loaded, x, "probs"), got);
  EXPECT_NE(program_print(loaded).find("LINEAR_BF16"), std::string::npos);
}

TEST(QuantizePass, Int8RewritesEachLinearToThePackedProduct) {
  Context ctx(7);
  Program p(ctx);
  record_mlp(p);
  Context qctx;
  Program q(qctx);
  QuantizeOptions o;
  o.to = QuantType::INT8;
  o.calibration.push_back(calib("x", {16, kIn}));
  Result<QuantizeReport> r = quantize_program(p, o, &q);
  ASSERT_TRUE(r) << r.status().message();

  EXPECT_EQ(q.find("fc1.w"), NO_TENSOR);
  ASSERT_NE(q.find("fc1.w.i8"), NO_TENSOR);
  ASSERT_NE(q.find("fc1.w.scale"), NO_TENSOR);
  EXPECT_EQ(q.desc(q.find("fc1.w.i8")).type, (TensorType{DType::I8, Shape{kIn, kHidden}}));
  EXPECT_EQ(q.desc(q.find("fc1.w.scale")).type, (TensorType{DType::F32, Shape{kHidden}}));
  // The stored i8 weights and scales are quantize_weights_i8's, bit for bit.
  const WeightsI8 want = quantize_weights_i8(ctx.at(p.find("fc1.w")).f32(), kIn, kHidden);
  EXPECT_EQ(std::memcmp(qctx.at(q.find("fc1.w.i8")).storage(), want.w.data(), want.w.size()), 0);
  EXPECT_EQ(std::memcmp(qctx.at(q.find("fc1.w.scale")).storage(), want.scale.data(), want.scale.size() * 4), 0);
  int packs = 0, products = 0;
  for (const Instruction& ins : q.code()) {
    EXPECT_NE(ins.op, Opcode::LINEAR);
    if (ins.op == Opcode::LINEAR_WEIGHTS_I8) {
      ++packs;
      EXPECT_EQ(ins.section, Section::DERIVE);
    }
    if (ins.op != Opcode::LINEAR_I8) continue;
    ++products;
    if (q.desc(ins.out[0]).type.shape[1] == kHidden)  // fc1 keeps its fused relu
      EXPECT_EQ(ins.i(NNASM_IMM(LINEAR_I8, act)), static_cast<int64_t>(Activation::RELU));
    EXPECT_EQ(ins.i(NNASM_IMM(LINEAR_I8, x_scale)), NNASM_CHOICE(LINEAR_I8, x_scale, row));
  }
  EXPECT_EQ(packs, 2);
  EXPECT_EQ(products, 2);
  for (const QuantizedLayer& l : r->layers) {
    EXPECT_EQ(l.chosen, "int8") << l.reason;
    EXPECT_GT(l.error, 0);
    EXPECT_LE(l.error, default_max_error(QuantType::INT8));
  }
  const uint64_t f32_w = 4 * (kIn * kHidden + kHidden * kOut), b = 4 * (kHidden + kOut);
  EXPECT_EQ(r->weight_bytes_before, f32_w + b);
  EXPECT_EQ(r->weight_bytes_after, f32_w / 4 + b + 4 * (kHidden + kOut));  // i8 weights, scales, biases

  // Close to f32 (8-bit weights and activations: about 1% each), and the file round trip keeps it.
  expect_close_through_a_file(p, q, pattern(kBatch * kIn, 0.4f), "probs", 0.05);
  EXPECT_NE(program_print(q).find("LINEAR_I8"), std::string::npos);
}

// y = x0·1.001 − x1: on x = (1, 1) the f32 result is 0.001, but 1.001 rounds to bf16 1.0 and the
// bf16 result is 0, an error of 100%.
void record_cancelling(Program& p, int64_t rows) {
  Graph g(p);
  Var x = g.input("x", {rows, 2});
  Var w = g.constant("w", {2, 1}, {1.001, -1});
  Var b = g.constant("b", {1}, {0});
  Var y = linear(x, w, b);
  g.output(linear(y, 3, {"fc2"}), "out");
  ASSERT_TRUE(g.status()) << g.status().message();
}

TEST(QuantizePass, ALayerWhoseErrorIsLargeStaysF32) {
  Context ctx;
  Program p(ctx);
  record_cancelling(p, 2);
  QuantizeOptions o;
  o.calibration.push_back(CalibrationInput{"x", {DType::F32, Shape{3, 2}}, {1, 1, 2, 2, -1, -1}, {}});
  Context qctx;
  Program q(qctx);
  Result<QuantizeReport> r = quantize_program(p, o, &q);
  ASSERT_TRUE(r) << r.status().message();
  ASSERT_EQ(r->layers.size(), 2u);
  EXPECT_EQ(r->layers[0].weight, "w");
  EXPECT_EQ(r->layers[0].chosen, "f32");
  EXPECT_NEAR(r->layers[0].error, 1.0, 1e-6);
  EXPECT_EQ(r->layers[0].reason, "above the bound 0.01");
  EXPECT_EQ(r->layers[1].chosen, "bf16");
  ASSERT_NE(q.find("w"), NO_TENSOR);
  EXPECT_EQ(q.desc(q.find("w")).type.dtype, DType::F32);
  EXPECT_EQ(q.find("w.bf16"), NO_TENSOR);
  EXPECT_NE(r->str().find("-> f32"), std::string::npos) << r->str();

  // A bound above the error lets it through.
  o.max_error = 2;
  Context q2ctx;
  Program q2(q2ctx);
  r = quantize_program(p, o, &q2);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->layers[0].chosen, "bf16");
  EXPECT_EQ(q2.find("w"), NO_TENSOR);
}

TEST(QuantizePass, ConstantWeightsKeepTheirValuesInTheRewrite) {
  // Values exact in bf16, so the rewritten layer computes exactly the f32 result; a constant is
  // filled from its declaration at every prepare, so the values must be there, not only stored.
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {1, 2});
  g.output(linear(x, g.constant("w", {2, 2}, {0.5, 0.25, -1, 2}), g.constant("b", {2}, {1, -1})), "y");
  ASSERT_TRUE(g.status());
  Context qctx;
  Program q(qctx);
  Result<QuantizeReport> r = quantize_program(p, {}, &q);
  ASSERT_TRUE(r) << r.status().message();
  ASSERT_EQ(r->layers[0].chosen, "bf16");
  EXPECT_EQ(q.desc(q.find("w.bf16")).role, Role::CONST);
  EXPECT_EQ(run(q, {2, 4}, "y"), (std::vector<float>{1 + 1 - 4, -1 + 0.5f + 8}));
  Context lctx;
  Program loaded(lctx);
  ASSERT_TRUE(model_decode(model_encode(q), "q.nnm", &loaded));
  EXPECT_EQ(run(loaded, {2, 4}, "y"), (std::vector<float>{-2, 7.5f}));
}

TEST(QuantizePass, KeepLeavesALayerF32ByWeightOrOutputName) {
  Context ctx;
  Program p(ctx);
  record_mlp(p);
  const std::string fc2_out = p.desc(p.code()[1].out[0]).name;
  for (const std::vector<std::string>& keep : {std::vector<std::string>{"@fc1.w"}, {"fc1.w", "%" + fc2_out}}) {
    QuantizeOptions o;
    o.keep = keep;
    Context qctx;
    Program q(qctx);
    Result<QuantizeReport> r = quantize_program(p, o, &q);
    ASSERT_TRUE(r) << r.status().message();
    EXPECT_EQ(r->layers[0].chosen, "f32");
    EXPECT_EQ(r->layers[0].reason, "kept by --keep");
    EXPECT_NE(q.find("fc1.w"), NO_TENSOR);
    EXPECT_EQ(q.find("fc1.w.bf16"), NO_TENSOR);
    EXPECT_EQ(r->layers[1].chosen, keep.size() == 1 ? "bf16" : "f32");
  }
  QuantizeOptions o;
  o.keep = {"fc9.w"};
  Context qctx;
  Program q(qctx);
  Result<QuantizeReport> r = quantize_program(p, o, &q);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("--keep fc9.w: no layer"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("@fc1.w, @fc2.w"), std::string::npos) << r.status().message();
}

// x [2,4,7,7] -> conv 3×3 s2 p1 (relu fused) -> depthwise conv -> flatten -> fc; inference.
void record_cnn(Program& p) {
  Graph g(p);
  Var x = g.input("x", {2, 4, 7, 7});
  Conv2dOptions c1{"conv"};
  c1.stride = {2, 2};
  c1.pad = {1, 1};
  c1.act = Activation::RELU;
  Var c = conv2d(x, 6, {3, 3}, c1);
  Conv2dOptions dw{"dw"};
  dw.groups = 6;
  Var d = conv2d(c, 6, {3, 3}, dw);
  g.output(linear(reshape(d, {2, 24}), 5, {"fc"}), "y");
  ASSERT_TRUE(g.status()) << g.status().message();
}

TEST(QuantizePass, Int8RewritesConvolutionsWithTheirGeometry) {
  Context ctx(11);
  Program p(ctx);
  record_cnn(p);
  Context qctx;
  Program q(qctx);
  QuantizeOptions o;
  o.to = QuantType::INT8;
  Result<QuantizeReport> r = quantize_program(p, o, &q);
  ASSERT_TRUE(r) << r.status().message();
  ASSERT_EQ(r->layers.size(), 3u);
  EXPECT_EQ(r->layers[0].op, "CONV2D");
  EXPECT_EQ(r->layers[0].chosen, "int8") << r->layers[0].reason;
  EXPECT_GT(r->layers[0].error, 0);
  EXPECT_EQ(r->layers[1].chosen, "f32");
  EXPECT_EQ(r->layers[1].reason, "a grouped or depthwise convolution (the reduced ones take groups=1)");
  EXPECT_EQ(r->layers[2].chosen, "int8") << r->layers[2].reason;

  ASSERT_NE(q.find("conv.w.i8"), NO_TENSOR);
  EXPECT_EQ(q.desc(q.find("conv.w.i8")).type, (TensorType{DType::I8, Shape{6, 4, 3, 3}}));
  EXPECT_EQ(q.desc(q.find("conv.w.scale")).type, (TensorType{DType::F32, Shape{6}}));
  EXPECT_EQ(q.find("conv.w"), NO_TENSOR);
  EXPECT_EQ(q.desc(q.find("dw.w")).type.dtype, DType::F32);
  // Per output channel: the scale is the channel's largest magnitude over 127.
  const float* w = ctx.at(p.find("conv.w")).f32();
  const float* s = qctx.at(q.find("conv.w.scale")).f32();
  for (int oc = 0; oc < 6; ++oc) {
    float m = 0;
    for (int k = 0; k < 36; ++k) m = std::max(m, std::fabs(w[oc * 36 + k]));
    EXPECT_FLOAT_EQ(s[oc], m / 127) << oc;
  }
  const Instruction* conv = nullptr;
  for (const Instruction& ins : q.code())
    if (ins.op == Opcode::CONV2D_I8) conv = &ins;
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->ints(NNASM_IMM(CONV2D_I8, stride)), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(conv->ints(NNASM_IMM(CONV2D_I8, pad)), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(conv->i(NNASM_IMM(CONV2D_I8, act)), static_cast<int64_t>(Activation::RELU));
  EXPECT_EQ(conv->in.size(), 5u);  // x, packed, colsum, scale, b

  // Outputs close to f32's (8-bit weights and activations), through a model file too.
  expect_close_through_a_file(p, q, pattern(2 * 4 * 7 * 7, 0.7f), "y", 0.05);
}

// What ONNX's Gemm imports as: x·Wᵀ by a stored [out, in] weight, then the bias added.
TEST(QuantizePass, AMatmulByAStoredWeightBecomesTheDenseLayersReducedForm) {
  for (QuantType to : {QuantType::BF16, QuantType::INT8}) {
    for (bool trans : {false, true}) {
      Context ctx(13);
      Program p(ctx);
      Graph g(p);
      Var x = g.input("x", {kBatch, kIn});
      Var w = g.param("fc.weight", trans ? Shape{kOut, kIn} : Shape{kIn, kOut}, {InitKind::HE_NORMAL, 0, 0});
      Var b = g.param("fc.bias", {kOut}, {InitKind::UNIFORM, -1, 1});
      g.output(matmul(x, w, false, trans) + b, "y");
      ASSERT_TRUE(g.status()) << g.status().message();
      Context qctx;
      Program q(qctx);
      QuantizeOptions o;
      o.to = to;
      Result<QuantizeReport> r = quantize_program(p, o, &q);
      ASSERT_TRUE(r) << r.status().message();
      ASSERT_EQ(r->layers.size(), 1u);
      EXPECT_EQ(r->layers[0].op, "MATMUL");
      EXPECT_EQ(r->layers[0].chosen, quant_type_name(to)) << r->layers[0].reason;
      const TensorId wq = q.find(to == QuantType::BF16 ? "fc.weight.bf16" : "fc.weight.i8");
      ASSERT_NE(wq, NO_TENSOR);
      EXPECT_EQ(q.desc(wq).type.shape, (Shape{kIn, kOut})) << "stored [in, out] as the dense layer reads it";
      ASSERT_NE(q.find("fc.weight.bias"), NO_TENSOR);
      for (const Instruction& ins : q.code()) EXPECT_NE(ins.op, Opcode::MATMUL);
      const std::vector<float> xv = pattern(kBatch * kIn, 0.2f);
      const std::vector<float> f32 = run(p, xv, "y"), got = run(q, xv, "y");
      const double e = relative_error(f32, got);
      EXPECT_LT(e, to == QuantType::BF16 ? 0.01 : 0.05) << trans;
    }
  }
}

TEST(QuantizePass, Bf16RewritesConvolutionsButNotDepthwiseOnes) {
  Context ctx(17);
  Program p(ctx);
  record_cnn(p);
  Context qctx;
  Program q(qctx);
  Result<QuantizeReport> r = quantize_program(p, {}, &q);
  ASSERT_TRUE(r) << r.status().message();
  ASSERT_EQ(r->layers.size(), 3u);
  EXPECT_EQ(r->layers[0].op, "CONV2D");
  EXPECT_EQ(r->layers[0].chosen, "bf16") << r->layers[0].reason;
  EXPECT_EQ(r->layers[1].chosen, "f32");
  EXPECT_EQ(r->layers[2].chosen, "bf16");
  ASSERT_NE(q.find("conv.w.bf16"), NO_TENSOR);
  EXPECT_EQ(q.desc(q.find("conv.w.bf16")).type, (TensorType{DType::BF16, Shape{6, 4, 3, 3}}));
  EXPECT_EQ(q.find("conv.w"), NO_TENSOR);
  const float* w = ctx.at(p.find("conv.w")).f32();
  const uint16_t* wb = static_cast<const uint16_t*>(qctx.at(q.find("conv.w.bf16")).storage());
  for (int i = 0; i < 6 * 4 * 9; ++i) ASSERT_EQ(wb[i], bf16_from_f32(w[i])) << i;
  const Instruction* conv = nullptr;
  int packs = 0;
  for (const Instruction& ins : q.code()) {
    if (ins.op == Opcode::CONV2D_BF16) conv = &ins;
    packs += ins.op == Opcode::CONV_WEIGHTS_BF16 && ins.section == Section::DERIVE;
  }
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(packs, 1);
  EXPECT_EQ(conv->ints(NNASM_IMM(CONV2D_BF16, stride)), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(conv->i(NNASM_IMM(CONV2D_BF16, act)), static_cast<int64_t>(Activation::RELU));
  expect_close_through_a_file(p, q, pattern(2 * 4 * 7 * 7, 0.3f), "y", 0.01);
}

TEST(QuantizePass, RefusesATrainingProgram) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {2, 3});
  Var labels = g.input("labels", {2}, DType::I32);
  g.output(softmax_ce(linear(x, 4), labels), "loss");
  ASSERT_TRUE(g.status());
  ASSERT_TRUE(make_trainable(p, p.find("loss"), sgd(0.1)));
  Context qctx;
  Program q(qctx);
  Result<QuantizeReport> r = quantize_program(p, {}, &q);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("a training program"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("nnasm export --inference"), std::string::npos) << r.status().message();
}

TEST(QuantizePass, RefusesBadCalibration) {
  Context ctx;
  Program p(ctx);
  record_mlp(p);
  struct Case {
    std::vector<CalibrationInput> calibration;
    const char* message;
  };
  CalibrationInput i32{"x", {DType::I32, Shape{2, kIn}}, {}, std::vector<int32_t>(2 * kIn, 0)};
  const Case cases[] = {
      {{calib("y", {2, kIn})}, "--calibrate y: the model has no input named 'y' (its inputs: %x)"},
      {{calib("probs", {2, kIn})}, "no input named 'probs'"},
      {{calib("x", {2, kIn + 1})}, "the values are f32[2,25], but %x is f32[4,24]"},
      {{calib("x", {2, kIn, 1})}, "but %x is f32[4,24]"},
      {{i32}, "the values are i32[2,24]"},
      {{calib("x", {2, kIn}), calib("%x", {2, kIn})}, "input %x is given twice"},
      {{CalibrationInput{"x", {DType::F32, Shape{2, kIn}}, {1, 2}, {}}}, "2 values for f32[2,24]"},
  };
  for (const Case& c : cases) {
    QuantizeOptions o;
    o.calibration = c.calibration;
    Context qctx;
    Program q(qctx);
    Result<QuantizeReport> r = quantize_program(p, o, &q);
    ASSERT_FALSE(r) << c.message;
    EXPECT_NE(r.status().message().find(c.message), std::string::npos) << r.status().message();
  }
}

TEST(QuantizePass, CalibrationCoversEveryInputWithOneRowCount) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var a = g.input("a", {2, 4});
  Var b = g.input("b", {2, 4});
  g.output(linear(add(a, b), 3), "y");
  ASSERT_TRUE(g.status());
  for (const auto& [calibration, message] :
       {std::pair<std::vector<CalibrationInput>, const char*>{{calib("a", {5, 4})}, "input %b is not given"},
        {{calib("a", {5, 4}), calib("b", {6, 4})}, "--calibrate b: 6 rows, but the other calibration inputs have 5"}}) {
    QuantizeOptions o;
    o.calibration = calibration;
    Context qctx;
    Program q(qctx);
    Result<QuantizeReport> r = quantize_program(p, o, &q);
    ASSERT_FALSE(r) << message;
    EXPECT_NE(r.status().message().find(message), std::string::npos) << r.status().message();
  }
  QuantizeOptions o;
  o.calibration = {calib("a", {5, 4}), calib("b", {5, 4}, 2)};
  Context qctx;
  Program q(qctx);
  Result<QuantizeReport> r = quantize_program(p, o, &q);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->calibration_rows, 5);
  EXPECT_EQ(r->layers[0].chosen, "bf16");
}

TEST(QuantizePass, RefusesAnUnknownTypeAndANanBound) {
  QuantType t = QuantType::BF16;
  EXPECT_FALSE(quant_type_from_name("fp8", &t));
  EXPECT_FALSE(quant_type_from_name("", &t));
  ASSERT_TRUE(quant_type_from_name("int8", &t));
  EXPECT_EQ(t, QuantType::INT8);
  ASSERT_TRUE(quant_type_from_name("bf16", &t));
  EXPECT_EQ(t, QuantType::BF16);
  Context ctx;
  Program p(ctx);
  record_mlp(p);
  QuantizeOptions o;
  o.max_error = NAN;
  Context qctx;
  Program q(qctx);
  Result<QuantizeReport> r = quantize_program(p, o, &q);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("--max-error"), std::string::npos) << r.status().message();
  Program nonempty(ctx);
  TensorDesc z;
  z.name = "z";
  z.type = {DType::F32, Shape{1}};
  z.role = Role::INPUT;
  ASSERT_TRUE(nonempty.declare(z));
  EXPECT_FALSE(quantize_program(p, {}, &nonempty));
}

TEST(QuantizePass, Int8WeightsHavePerColumnScalesRoundedHalfToEven) {
  // Column 0: max 127 → scale 1 (ties 2.5 → 2, 3.5 → 4, −1.5 → −2); column 1: max 254 → scale 2
  // (5 → 2.5 → 2, 7 → 3.5 → 4); column 2 all zeros → scale 1.
  const float w[4 * 3] = {2.5f, 5, 0, 3.5f, 7, 0, -1.5f, -254, 0, 127, 1, 0};
  const WeightsI8 q = quantize_weights_i8(w, 4, 3);
  ASSERT_EQ(q.scale, (std::vector<float>{1, 2, 1}));
  EXPECT_EQ(q.w, (std::vector<int8_t>{2, 2, 0, 4, 4, 0, -2, -127, 0, 127, 0, 0}));
}

TEST(QuantizePass, Int8WeightsStayInsideSymmetricRange) {
  // Column maxima of every magnitude map to ±127 and nothing to −128; the round trip is within
  // half a step.
  const int64_t k = 37, o = 11;
  std::vector<float> w(k * o);
  for (int64_t i = 0; i < k * o; ++i) w[i] = std::sin(1.7f * static_cast<float>(i)) * std::pow(10.0f, float(i % o) - 5);
  const WeightsI8 q = quantize_weights_i8(w.data(), k, o);
  for (int64_t j = 0; j < o; ++j) {
    int top = 0;
    for (int64_t i = 0; i < k; ++i) {
      const int v = q.w[i * o + j];
      ASSERT_GE(v, -127);
      ASSERT_LE(v, 127);
      top = std::max(top, std::abs(v));
      EXPECT_LE(std::fabs(v * q.scale[j] - w[i * o + j]), 0.5001f * q.scale[j]) << i << "," << j;
    }
    EXPECT_EQ(top, 127) << j;
  }
}

}  // namespace
}  // namespace nnasm

// The ONNX quantization operators' import (serialize/onnx/onnx_ops_quant.cpp) beyond the backend
// node tests (tests/onnx/passing_node_tests.txt): a QDQ model against loops, 8-bit graph inputs
// and outputs, DynamicQuantizeLinear's all-zero case, MatMulInteger's exactness bound, and every
// misuse a model can hold (scales of the wrong length, zero or NaN scales, zero points out of
// range or of the wrong type) as an import error naming the node.
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/executor.h"
#include "serialize/onnx/onnx_import.h"
#include "tests/onnx/imported.h"
#include "tests/onnx/model_builder.h"

namespace nnasm {
namespace {

using B = OnnxModelBuilder;
using F = std::vector<float>;

std::unique_ptr<Imported> import(const std::string& bytes) {
  auto r = std::make_unique<Imported>();
  r->status = onnx_import(bytes, "m.onnx", {}, &r->p, &r->report);
  return r;
}

// The first problem the importer listed, or the status message.
std::string problem(const Imported& m) { return m.report.problems.empty() ? m.status.message() : m.report.problems[0]; }

float round_half_even(float q) { return std::nearbyint(q); }  // the default rounding mode: halves to even

// x [2,4] f32 → MatMul(DequantizeLinear(W1 i8 [4,3], per-column scales)) + b1 → Relu →
// QuantizeLinear/DequantizeLinear (u8 activations) → MatMul(DequantizeLinear(W2 i8 [3,2], one
// scale)) → y: the QDQ form ONNX Runtime's quantizer writes.
TEST(OnnxQuantImport, QdqMlpMatchesLoops) {
  const std::vector<int32_t> w1 = {-128, -50, 3, 7, 127, -1, 0, 64, -64, 100, -100, 12};
  const F s1 = {0.01f, 0.02f, 0.005f};
  const std::vector<int32_t> z1 = {0, 3, -2};
  const F b1 = {0.1f, -0.2f, 0.05f};
  const std::vector<int32_t> w2 = {5, -6, 127, -128, 33, 0};
  const float s2 = 0.03f, sa = 0.02f;
  const int32_t za = 10;
  B m(13);
  m.input("x", {2, 4}).output("y");
  m.initializer_int("w1q", {4, 3}, onnx::TensorProto::INT8, w1).initializer("s1", {3}, s1);
  m.initializer_int("z1", {3}, onnx::TensorProto::INT8, z1).initializer("b1", {3}, b1);
  m.initializer_int("w2q", {3, 2}, onnx::TensorProto::INT8, w2).initializer("s2", {}, {s2});
  m.initializer("sa", {}, {sa}).initializer_int("za", {}, onnx::TensorProto::UINT8, {za});
  B::attr(m.node("DequantizeLinear", {"w1q", "s1", "z1"}, {"w1"}, "dq_w1"), "axis", int64_t(1));
  m.node("MatMul", {"x", "w1"}, {"h0"});
  m.node("Add", {"h0", "b1"}, {"h1"});
  m.node("Relu", {"h1"}, {"h"});
  m.node("QuantizeLinear", {"h", "sa", "za"}, {"hq"}, "q_h");
  m.node("DequantizeLinear", {"hq", "sa", "za"}, {"hd"}, "dq_h");
  m.node("DequantizeLinear", {"w2q", "s2"}, {"w2"}, "dq_w2");
  m.node("MatMul", {"hd", "w2"}, {"y"});
  auto im = import(m.bytes());
  ASSERT_TRUE(im->status.is_ok()) << problem(*im);

  const F x = {0.5f, -1.25f, 2.f, 0.75f, -0.3f, 1.1f, 0.f, -2.5f};
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(im->p);
  ASSERT_TRUE(ex.is_ok()) << ex.status().message();
  std::memcpy(im->ctx.at(im->p.find("x")).f32(), x.data(), x.size() * 4);
  (*ex)->run();
  const Tensor& y = im->ctx.at(im->p.find("y"));

  for (int i = 0; i < 2; ++i) {
    float hd[3];
    for (int o = 0; o < 3; ++o) {
      float acc = 0;
      for (int k = 0; k < 4; ++k) acc += x[i * 4 + k] * (static_cast<float>(w1[k * 3 + o] - z1[o]) * s1[o]);
      const float h = std::max(acc + b1[o], 0.f);
      const float q = std::min(std::max(round_half_even(h / sa) + static_cast<float>(za), 0.f), 255.f);
      hd[o] = (q - static_cast<float>(za)) * sa;
    }
    for (int o = 0; o < 2; ++o) {
      float want = 0;
      for (int k = 0; k < 3; ++k) want += hd[k] * (static_cast<float>(w2[k * 2 + o]) * s2);
      EXPECT_NEAR(y.f32()[i * 2 + o], want, 1e-5f * (1 + std::fabs(want))) << i << "," << o;
    }
  }
}

// A u8 graph input dequantized, and i8 and u8 graph outputs, held as they are at the edges.
TEST(OnnxQuantImport, EightBitGraphInputsAndOutputs) {
  B m(13);
  m.input("xq", {4}, onnx::TensorProto::UINT8).output("yi", onnx::TensorProto::INT8).output("yu", onnx::TensorProto::UINT8);
  m.initializer("s", {}, {0.5f}).initializer_int("z", {}, onnx::TensorProto::UINT8, {128});
  m.initializer("s2", {}, {0.25f}).initializer_int("zi", {}, onnx::TensorProto::INT8, {-3});
  m.node("DequantizeLinear", {"xq", "s", "z"}, {"f"});
  m.node("QuantizeLinear", {"f", "s2", "zi"}, {"yi"});
  m.node("QuantizeLinear", {"f", "s"}, {"yu"});
  auto im = import(m.bytes());
  ASSERT_TRUE(im->status.is_ok()) << problem(*im);
  EXPECT_EQ(im->p.desc(im->p.find("xq")).type.dtype, DType::U8);
  EXPECT_EQ(im->p.desc(im->p.find("yi")).type.dtype, DType::I8);
  EXPECT_EQ(im->p.desc(im->p.find("yu")).type.dtype, DType::U8);
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(im->p);
  ASSERT_TRUE(ex.is_ok()) << ex.status().message();
  const uint8_t xq[4] = {0, 127, 128, 255};
  std::memcpy(im->ctx.at(im->p.find("xq")).storage(), xq, 4);
  (*ex)->run();
  const int8_t* yi = static_cast<const int8_t*>(im->ctx.at(im->p.find("yi")).storage());
  const uint8_t* yu = static_cast<const uint8_t*>(im->ctx.at(im->p.find("yu")).storage());
  // f = (xq − 128)·0.5 = −64, −0.5, 0, 63.5; yi = sat(rne(f / 0.25) − 3); yu = sat(rne(f / 0.5)).
  const int want_i[4] = {-128, -5, -3, 127}, want_u[4] = {0, 0, 0, 127};
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(yi[k], want_i[k]) << k;
    EXPECT_EQ(yu[k], want_u[k]) << k;
  }
}

// Opset variants: a negative axis counts from the end; without a zero point QuantizeLinear
// gives u8 (zero point 0); before opset 13 there is no axis attribute and one scale only.
TEST(OnnxQuantImport, AxisAndDefaultZeroPoint) {
  B m(13);
  m.input("x", {2, 3}).output("y", onnx::TensorProto::UINT8);
  m.initializer("s", {3}, {1, 2, 4});
  B::attr(m.node("QuantizeLinear", {"x", "s"}, {"y"}), "axis", int64_t(-1));
  auto im = import(m.bytes());
  ASSERT_TRUE(im->status.is_ok()) << problem(*im);
  EXPECT_EQ(im->p.desc(im->p.find("y")).type.dtype, DType::U8);
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(im->p);
  ASSERT_TRUE(ex.is_ok()) << ex.status().message();
  const F x = {5, 5, 5, -1, 2.5f, 300};
  std::memcpy(im->ctx.at(im->p.find("x")).f32(), x.data(), 24);
  (*ex)->run();
  const uint8_t* y = static_cast<const uint8_t*>(im->ctx.at(im->p.find("y")).storage());
  // 5/1, 5/2 = 2.5 → 2 (half to even), 5/4 = 1.25 → 1; −1 → 0 (saturated), 2.5/2 = 1.25 → 1, 300/4 = 75.
  EXPECT_EQ(std::vector<int>(y, y + 6), (std::vector<int>{5, 2, 1, 0, 1, 75}));

  B old(10);
  old.input("x", {2, 3}).output("y", onnx::TensorProto::UINT8);
  old.initializer("s", {}, {1});
  B::attr(old.node("QuantizeLinear", {"x", "s"}, {"y"}, "q10"), "axis", int64_t(1));
  auto o = import(old.bytes());
  ASSERT_FALSE(o->status.is_ok());
  EXPECT_EQ(problem(*o), "node 'q10' (op QuantizeLinear, opset 10): attribute 'axis' is not supported");
}

// QLinearConv with per-output-channel w scales and zero points and an INT32 bias (dequantized with
// x_scale·w_scale[o]) against loops; scales are powers of two, so every value is exact in f32 and
// the two sides round the same ties the same way.
TEST(OnnxQuantImport, QLinearConvWithBiasMatchesLoops) {
  const int C = 2, O = 2, H = 3, W = 3;
  const float xs = 0.5f, ys = 4.f, ws[O] = {0.25f, 0.125f};
  const int32_t xz = 10, yz = 100, wz[O] = {1, -2}, bias[O] = {7, -40};
  const std::vector<int32_t> w = {3, -5, 8, 0};  // [O, C, 1, 1]
  B m(10);
  m.input("x", {1, C, H, W}, onnx::TensorProto::UINT8).output("y", onnx::TensorProto::UINT8);
  m.initializer("xs", {}, {xs}).initializer_int("xz", {}, onnx::TensorProto::UINT8, {xz});
  m.initializer_int("w", {O, C, 1, 1}, onnx::TensorProto::INT8, w);
  m.initializer("ws", {O}, {ws[0], ws[1]}).initializer_int("wz", {O}, onnx::TensorProto::INT8, {wz[0], wz[1]});
  m.initializer("ys", {}, {ys}).initializer_int("yz", {}, onnx::TensorProto::UINT8, {yz});
  m.initializer_int("b", {O}, onnx::TensorProto::INT32, {bias[0], bias[1]});
  m.node("QLinearConv", {"x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"}, {"y"});
  auto im = import(m.bytes());
  ASSERT_TRUE(im->status.is_ok()) << problem(*im);
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(im->p);
  ASSERT_TRUE(ex.is_ok()) << ex.status().message();
  uint8_t x[C * H * W];
  for (int k = 0; k < C * H * W; ++k) x[k] = static_cast<uint8_t>((k * 37) % 256);
  std::memcpy(im->ctx.at(im->p.find("x")).storage(), x, sizeof x);
  (*ex)->run();
  const uint8_t* y = static_cast<const uint8_t*>(im->ctx.at(im->p.find("y")).storage());
  for (int o = 0; o < O; ++o)
    for (int p = 0; p < H * W; ++p) {
      float acc = static_cast<float>(bias[o]) * (xs * ws[o]);
      for (int c = 0; c < C; ++c)
        acc += static_cast<float>(x[c * H * W + p] - xz) * xs * (static_cast<float>(w[o * C + c] - wz[o]) * ws[o]);
      const float q = std::min(std::max(round_half_even(acc / ys) + static_cast<float>(yz), 0.f), 255.f);
      EXPECT_EQ(y[o * H * W + p], static_cast<uint8_t>(q)) << o << "," << p;
    }
}

// An all-zero x has no range: ONNX takes the scale 1/255 and zero point 0.
TEST(OnnxQuantImport, DynamicQuantizeLinearOfZeros) {
  B m(11);
  m.input("x", {3}).output("y", onnx::TensorProto::UINT8).output("s").output("z", onnx::TensorProto::UINT8);
  m.node("DynamicQuantizeLinear", {"x"}, {"y", "s", "z"});
  auto im = import(m.bytes());
  ASSERT_TRUE(im->status.is_ok()) << problem(*im);
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(im->p);
  ASSERT_TRUE(ex.is_ok()) << ex.status().message();
  std::memset(im->ctx.at(im->p.find("x")).storage(), 0, 12);
  (*ex)->run();
  EXPECT_EQ(im->ctx.at(im->p.find("s")).f32()[0], 1.f / 255.f);
  EXPECT_EQ(static_cast<const uint8_t*>(im->ctx.at(im->p.find("z")).storage())[0], 0);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(static_cast<const uint8_t*>(im->ctx.at(im->p.find("y")).storage())[k], 0);
}

// MatMulInteger runs in f32: a K and operand ranges whose partial sums may pass 2^24 are refused,
// naming the bound; constant weights count with their real values.
TEST(OnnxQuantImport, MatMulIntegerRefusesWhatF32CannotHoldExactly) {
  auto model = [](int64_t k, bool const_b) {
    B m(10);
    m.input("a", {2, k}, onnx::TensorProto::UINT8).output("y", onnx::TensorProto::INT32);
    if (const_b) m.initializer_int("b", {k, 2}, onnx::TensorProto::INT8, std::vector<int32_t>(size_t(2 * k), 1));
    else m.input("b", {k, 2}, onnx::TensorProto::INT8);
    m.node("MatMulInteger", {"a", "b"}, {"y"}, "mmi");
    return m.bytes();
  };
  // 600 · 255 · 128 > 2^24: refused for a B computed at run time.
  auto big = import(model(600, false));
  ASSERT_FALSE(big->status.is_ok());
  EXPECT_NE(problem(*big).find("node 'mmi' (op MatMulInteger, opset 10): not supported: the product runs in f32"),
            std::string::npos)
      << problem(*big);
  EXPECT_NE(problem(*big).find("K 600 × max|a−a_zero_point| 255 × max|b−b_zero_point| 128"), std::string::npos)
      << problem(*big);
  // The same K with constant weights of 1: 600 · 255 · 1 fits.
  auto fits = import(model(600, true));
  ASSERT_TRUE(fits->status.is_ok()) << problem(*fits);
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(fits->p);
  ASSERT_TRUE(ex.is_ok()) << ex.status().message();
  std::memset(fits->ctx.at(fits->p.find("a")).storage(), 255, 1200);
  (*ex)->run();
  EXPECT_EQ(fits->ctx.at(fits->p.find("y")).i32()[0], 600 * 255);
}

struct Misuse {
  const char* what;
  B model;
  const char* message;
};

// QuantizeLinear x [2,3] with scale s and zero point z (of `zp_type`).
B quantize(const F& s, const std::vector<int64_t>& sdims, int32_t zp_type, const std::vector<int32_t>& z,
           const std::vector<int64_t>& zdims) {
  B m(13);
  m.input("x", {2, 3}).output("y", zp_type);
  m.initializer("s", sdims, s).initializer_int("z", zdims, zp_type, z);
  B::attr(m.node("QuantizeLinear", {"x", "s", "z"}, {"y"}, "q"), "axis", int64_t(1));
  return m;
}

// DequantizeLinear of x (x_type) with scale 1 and zero point z (z_type).
B dequantize(int32_t x_type, int32_t z_type) {
  B m(13);
  m.input("x", {4}).output("y");
  m.initializer_int("xq", {4}, x_type, {1, 2, 3, 4}).initializer("s", {}, {1.f}).initializer_int("z", {}, z_type, {0});
  m.node("DequantizeLinear", {"xq", "s", "z"}, {"y"}, "dq");
  return m;
}

TEST(OnnxQuantImport, MisuseIsAnErrorNamingTheNode) {
  std::vector<Misuse> cases;
  cases.push_back({"per-axis scale of the wrong length", quantize({1, 2}, {2}, onnx::TensorProto::UINT8, {0, 0}, {2}),
                   "node 'q' (op QuantizeLinear, opset 13): y_scale has 2 elements; per-axis quantization along axis 1 "
                   "needs 3 (x is [2,3])"});
  cases.push_back({"zero scale", quantize({0}, {}, onnx::TensorProto::UINT8, {0}, {}),
                   "node 'q' (op QuantizeLinear, opset 13): y_scale holds 0 at index 0; a scale must be finite and "
                   "non-zero"});
  cases.push_back({"NaN scale", quantize({NAN}, {}, onnx::TensorProto::INT8, {0}, {}),
                   "node 'q' (op QuantizeLinear, opset 13): y_scale holds nan at index 0"});
  cases.push_back({"zero point of another length", quantize({1, 2, 3}, {3}, onnx::TensorProto::UINT8, {0}, {}),
                   "node 'q' (op QuantizeLinear, opset 13): y_zero_point has shape [], the scale [3]: they must have "
                   "the same number of elements"});
  cases.push_back({"INT32 zero point for QuantizeLinear", quantize({1}, {}, onnx::TensorProto::INT32, {0}, {}),
                   "node 'q' (op QuantizeLinear, opset 13): y_zero_point is INT32, expected UINT8 or INT8"});
  cases.push_back({"zero point out of UINT8's range", quantize({1}, {}, onnx::TensorProto::UINT8, {300}, {}),
                   "value 300 at index 0 is out of range for UINT8"});
  cases.push_back({"mismatched zero-point type", dequantize(onnx::TensorProto::UINT8, onnx::TensorProto::INT8),
                   "node 'dq' (op DequantizeLinear, opset 13): x_zero_point is INT8, expected UINT8 (the quantized "
                   "operand's type)"});
  cases.push_back({"INT16 x for DequantizeLinear", dequantize(onnx::TensorProto::INT16, onnx::TensorProto::INT16),
                   "node 'dq' (op DequantizeLinear, opset 13): x is INT16, expected UINT8, INT8 or INT32"});
  {
    B m(10);
    m.input("x", {1, 2, 3, 3}).output("y", onnx::TensorProto::UINT8);
    m.initializer_int("xq", {1, 2, 3, 3}, onnx::TensorProto::UINT8, std::vector<int32_t>(18, 1));
    m.initializer("xs", {2}, {1, 1}).initializer_int("xz", {2}, onnx::TensorProto::UINT8, {0, 0});
    m.initializer_int("w", {1, 2, 1, 1}, onnx::TensorProto::UINT8, {1, 1});
    m.initializer("ws", {}, {1}).initializer_int("wz", {}, onnx::TensorProto::UINT8, {0});
    m.initializer("ys", {}, {1}).initializer_int("yz", {}, onnx::TensorProto::UINT8, {0});
    m.node("QLinearConv", {"xq", "xs", "xz", "w", "ws", "wz", "ys", "yz"}, {"y"}, "qc");
    cases.push_back({"per-channel x in QLinearConv", m,
                     "node 'qc' (op QLinearConv, opset 10): x_scale must be a scalar"});
  }
  {
    B m(10);
    m.input("a", {2, 3}, onnx::TensorProto::UINT8).output("y", onnx::TensorProto::INT32);
    m.initializer_int("b", {3, 2}, onnx::TensorProto::UINT8, {1, 2, 3, 4, 5, 6});
    m.initializer_int("az", {}, onnx::TensorProto::INT8, {0});
    m.initializer_int("bz", {3}, onnx::TensorProto::UINT8, {0, 0, 0});
    m.node("MatMulInteger", {"a", "b", "az"}, {"y"}, "mm");
    cases.push_back({"a zero point of another type than A", m,
                     "node 'mm' (op MatMulInteger, opset 10): the zero point of A is INT8, expected UINT8 (the "
                     "operand's type)"});
    B m2 = m;
    m2.graph().mutable_node(0)->add_input("bz");
    m2.graph().mutable_node(0)->set_input(2, "");
    cases.push_back({"a per-column zero point of the wrong length", m2,
                     "node 'mm' (op MatMulInteger, opset 10): the zero point of B has 3 elements; B is [3,2], which "
                     "has 2 along axis -1"});
  }
  for (const Misuse& c : cases) {
    auto im = import(c.model.bytes());
    EXPECT_FALSE(im->status.is_ok()) << c.what;
    EXPECT_NE(problem(*im).find(c.message), std::string::npos) << c.what << ": " << problem(*im);
  }
}

}  // namespace
}  // namespace nnasm

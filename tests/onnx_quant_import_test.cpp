// The ONNX quantization operators' import (serialize/onnx/onnx_ops_quant.cpp) beyond the backend
// node tests (tests/onnx/passing_node_tests.txt): a QDQ model against loops, 8-bit graph inputs
// and outputs, DynamicQuantizeLinear's all-zero case, MatMulInteger's exactness bound, every
// misuse a model can hold (scales of the wrong length, zero or NaN scales, zero points out of
// range or of the wrong type) as an import error naming the node, and quantize_dynamic's MatMul
// chains as LINEAR_I8 (onnx_fuse_quant.cpp) against ONNX's formula, with the chains that must
// not match; quantize_static's QDQ MatMul / Gemm chains as LINEAR_I8 x_scale=given against a
// naive evaluation of the graph, and those that must not match; the same for Conv (CONV2D_I8).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>
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


// ---- quantize_dynamic's MatMul chains as LINEAR_I8 (serialize/onnx/onnx_fuse_quant.cpp)

// A layer as ONNX Runtime's quantize_dynamic writes it: B (i8, or u8 with zero point 128) [K,O],
// B's zero point, its scale per tensor ([]) or per column ([O]), the bias (empty: none).
struct DynLayer {
  int64_t k, o;
  std::vector<int32_t> w;  // as stored: i8, or u8 when u8
  bool u8 = false;
  int32_t zp = 0;
  F scale;                 // 1 or o elements
  F bias;                  // o elements, or none
};

uint32_t lcg(uint32_t* s) { return *s = *s * 1664525u + 1013904223u; }

DynLayer dyn_layer(int64_t k, int64_t o, bool per_column, bool bias, bool u8, uint32_t seed) {
  DynLayer l;
  l.k = k, l.o = o, l.u8 = u8, l.zp = u8 ? 128 : 0;
  for (int64_t e = 0; e < k * o; ++e) l.w.push_back(static_cast<int32_t>(lcg(&seed) >> 24) - 128 + l.zp);
  for (int64_t c = 0; c < (per_column ? o : 1); ++c) l.scale.push_back(0.001f + 0.0005f * static_cast<float>(lcg(&seed) >> 28));
  if (bias)
    for (int64_t c = 0; c < o; ++c) l.bias.push_back(static_cast<float>(static_cast<int32_t>(lcg(&seed) >> 20) - 2048) / 4096.f);
  return l;
}

// Adds the layer reading `x` and writing `y` (node names prefixed `p`): DynamicQuantizeLinear,
// MatMulInteger, Mul of the scales, Cast, Mul, Add.
void add_dyn_layer(B& m, const DynLayer& l, const std::string& x, const std::string& y, const std::string& p) {
  const int32_t t = l.u8 ? onnx::TensorProto::UINT8 : onnx::TensorProto::INT8;
  m.initializer_int(p + "W", {l.k, l.o}, t, l.w).initializer_int(p + "Wz", {}, t, {l.zp});
  m.initializer(p + "Ws", l.scale.size() == 1 ? std::vector<int64_t>{} : std::vector<int64_t>{l.o}, l.scale);
  m.node("DynamicQuantizeLinear", {x}, {p + "xq", p + "xs", p + "xz"}, p + "dql");
  m.node("MatMulInteger", {p + "xq", p + "W", p + "xz", p + "Wz"}, {p + "acc"}, p + "mmi");
  m.node("Mul", {p + "xs", p + "Ws"}, {p + "s"}, p + "scales");
  B::attr(m.node("Cast", {p + "acc"}, {p + "accf"}, p + "cast"), "to", int64_t(onnx::TensorProto::FLOAT));
  const std::string mul_out = l.bias.empty() ? y : p + "mm";
  m.node("Mul", {p + "accf", p + "s"}, {mul_out}, p + "mul");
  if (!l.bias.empty()) {
    m.initializer(p + "b", {l.o}, l.bias);
    m.node("Add", {mul_out, p + "b"}, {y}, p + "add");
  }
}

// ONNX's formula for the layer, naively: DynamicQuantizeLinear in f32, the integer product exact,
// then f32(acc)·f32(xs·Bs) rounded and the bias added. `slack` gets, per output, the size of the
// terms an fma may round differently (|product| + |bias|).
std::vector<float> onnx_dyn_layer(const DynLayer& l, const F& x, std::vector<float>* slack) {
  float lo = 0, hi = 0;
  for (float v : x) lo = std::min(lo, v), hi = std::max(hi, v);
  float range = hi - lo;
  if (range == 0) range = 1;
  const float xs = range / 255.f;
  const int32_t zp = static_cast<int32_t>(std::min(std::max(round_half_even(0.f - lo / xs), 0.f), 255.f));
  const int64_t rows = static_cast<int64_t>(x.size()) / l.k;
  std::vector<float> y(static_cast<size_t>(rows * l.o));
  slack->assign(y.size(), 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < l.o; ++o) {
      int64_t acc = 0;
      for (int64_t k = 0; k < l.k; ++k) {
        const int32_t q = static_cast<int32_t>(std::min(std::max(round_half_even(x[r * l.k + k] / xs) + static_cast<float>(zp), 0.f), 255.f));
        acc += static_cast<int64_t>(q - zp) * (l.w[k * l.o + o] - l.zp);
      }
      const float m = xs * l.scale[l.scale.size() == 1 ? 0 : o];
      const float prod = static_cast<float>(acc) * m;
      const float b = l.bias.empty() ? 0.f : l.bias[o];
      y[r * l.o + o] = l.bias.empty() ? prod : prod + b;
      (*slack)[r * l.o + o] = std::fabs(prod) + std::fabs(b);
    }
  return y;
}

int count_op(const Program& p, Opcode op) {
  int n = 0;
  for (const Instruction& ins : p.code()) n += ins.op == op;
  return n;
}

// Every node imported, as two LINEAR_I8 of x_scale `mode` with their packings, no MATMUL and no
// QUANTIZE left.
void expect_two_linear_i8(const Imported& im, int64_t mode) {
  EXPECT_EQ(im.report.imported, im.report.nodes);
  EXPECT_EQ(count_op(im.p, Opcode::LINEAR_I8), 2);
  EXPECT_EQ(count_op(im.p, Opcode::LINEAR_WEIGHTS_I8), 2);
  EXPECT_EQ(count_op(im.p, Opcode::MATMUL), 0);
  EXPECT_EQ(count_op(im.p, Opcode::QUANTIZE), 0);
  for (const Instruction& ins : im.p.code())
    if (ins.op == Opcode::LINEAR_I8) {
      EXPECT_EQ(ins.i(NNASM_IMM(LINEAR_I8, x_scale)), mode);
    }
}

F random_input(size_t n, uint32_t seed) {
  F x(n);
  for (float& v : x) v = static_cast<float>(static_cast<int32_t>(lcg(&seed) >> 16) - 24000) / 8192.f;
  return x;
}

// Runs `im` on x and returns output "y" (n values).
F run_y(Imported& im, const F& x, size_t n) {
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(im.p);
  EXPECT_TRUE(ex.is_ok()) << ex.status().message();
  if (!ex) return {};
  std::memcpy(im.ctx.at(im.p.find("x")).f32(), x.data(), x.size() * 4);
  (*ex)->run();
  const float* y = im.ctx.at(im.p.find("y")).f32();
  return F(y, y + n);
}

// x [3,784] → layer 1 (784→256) → Relu → layer 2 (256→10) → y, K past MatMulInteger's f32 bound:
// each layer one LINEAR_I8, its outputs ONNX's formula's to the epilogue's one rounding (none
// without a bias).
TEST(OnnxQuantImport, DynamicQuantizedMlpIsLinearI8) {
  struct Case {
    bool per_column, bias, u8;
  };
  for (const Case c : {Case{false, false, false}, Case{true, false, false}, Case{false, true, true}, Case{true, true, false}}) {
    SCOPED_TRACE(::testing::Message() << "per_column " << c.per_column << " bias " << c.bias << " u8 " << c.u8);
    const DynLayer l1 = dyn_layer(784, 256, c.per_column, c.bias, c.u8, 7);
    const DynLayer l2 = dyn_layer(256, 10, c.per_column, c.bias, false, 8);
    B m(13);
    m.input("x", {3, 784}).output("y");
    add_dyn_layer(m, l1, "x", "h0", "l1.");
    m.node("Relu", {"h0"}, {"h"});
    add_dyn_layer(m, l2, "h", "y", "l2.");
    auto im = import(m.bytes());
    ASSERT_TRUE(im->status.is_ok()) << problem(*im);
    expect_two_linear_i8(*im, NNASM_CHOICE(LINEAR_I8, x_scale, tensor));  // DynamicQuantizeLinear left out too

    const F x = random_input(3 * 784, 11);
    std::vector<float> slack1, slack2;
    F h = onnx_dyn_layer(l1, x, &slack1);
    for (float& v : h) v = std::max(v, 0.f);
    const F want = onnx_dyn_layer(l2, h, &slack2);
    const F got = run_y(*im, x, want.size());
    ASSERT_EQ(got.size(), want.size());
    for (size_t e = 0; e < want.size(); ++e) {
      if (!c.bias) {
        EXPECT_EQ(got[e], want[e]) << e;
      } else {
        // One rounding of layer 2's sum, and layer 1's passed on through the quantization.
        EXPECT_NEAR(got[e], want[e], 1e-6f * slack2[e]) << e;
      }
    }
  }
}

// One layer: x [2,5,40] (rank 3), an i8 weight with a per-column zero point that B less it still
// fits (converted), and DynamicQuantizeLinear's scale also a graph output: it stays, for that
// reader, and the chain is still one LINEAR_I8.
TEST(OnnxQuantImport, DynamicQuantizedLinearRankThreeAndSharedScale) {
  DynLayer l = dyn_layer(40, 6, true, true, false, 3);
  for (int32_t& v : l.w) v = v / 2;  // within [−64, 63]: less a zero point of ±5 still an i8
  const std::vector<int32_t> zp = {5, -5, 0, 3, -2, 1};
  B m(13);
  m.input("x", {2, 5, 40}).output("y").output("l.xs");
  l.zp = 0;
  add_dyn_layer(m, l, "x", "y", "l.");
  m.graph().mutable_initializer(1)->clear_dims();
  m.graph().mutable_initializer(1)->add_dims(6);
  m.graph().mutable_initializer(1)->clear_int32_data();
  for (int32_t z : zp) m.graph().mutable_initializer(1)->add_int32_data(z);
  auto im = import(m.bytes());
  ASSERT_TRUE(im->status.is_ok()) << problem(*im);
  EXPECT_EQ(count_op(im->p, Opcode::LINEAR_I8), 1);
  EXPECT_EQ(count_op(im->p, Opcode::MATMUL), 0);
  EXPECT_EQ(count_op(im->p, Opcode::QUANTIZE), 2);  // DynamicQuantizeLinear's zero point and values

  const F x = random_input(2 * 5 * 40, 5);
  DynLayer ref = l;
  for (size_t e = 0; e < ref.w.size(); ++e) ref.w[e] -= zp[e % 6];
  std::vector<float> slack;
  const F want = onnx_dyn_layer(ref, x, &slack);
  const F got = run_y(*im, x, want.size());
  for (size_t e = 0; e < want.size(); ++e) EXPECT_NEAR(got[e], want[e], 1e-6f * slack[e]) << e;
  float lo = 0, hi = 0;
  for (float v : x) lo = std::min(lo, v), hi = std::max(hi, v);
  EXPECT_EQ(im->ctx.at(im->p.find("l.xs")).f32()[0], (hi - lo) / 255.f);
}

// Chains that must not become LINEAR_I8 are imported node by node as before: small K imports
// through MATMUL (and equals ONNX's formula), K = 784 is refused by MatMulInteger's f32 bound.
TEST(OnnxQuantImport, DynamicQuantizedChainsThatDoNotMatch) {
  enum Kind { B_INPUT, B_ZP_OUT_OF_RANGE, CAST_READ_ELSEWHERE };
  auto model = [](Kind kind, int64_t k) {
    DynLayer l = dyn_layer(k, 4, false, false, false, 9);
    B m(13);
    m.input("x", {2, k}).output("y");
    if (kind == CAST_READ_ELSEWHERE) m.output("l.accf");
    add_dyn_layer(m, l, "x", "y", "l.");
    if (kind == B_ZP_OUT_OF_RANGE) {
      // −128 − 5 is no i8: B less its zero point must stay an integer of its own.
      m.graph().mutable_initializer(0)->set_int32_data(0, -128);
      m.graph().mutable_initializer(1)->set_int32_data(0, 5);
      l.w[0] = -128;
      l.zp = 5;
    }
    if (kind == B_INPUT) {
      m.graph().mutable_initializer(0)->set_name("unused");
      m.input("l.W", {k, 4}, onnx::TensorProto::INT8);
    }
    return std::make_pair(m, l);
  };
  for (Kind kind : {B_INPUT, B_ZP_OUT_OF_RANGE, CAST_READ_ELSEWHERE}) {
    SCOPED_TRACE(kind);
    auto [m, l] = model(kind, 16);
    auto im = import(m.bytes());
    ASSERT_TRUE(im->status.is_ok()) << problem(*im);
    EXPECT_EQ(count_op(im->p, Opcode::LINEAR_I8), 0);
    EXPECT_EQ(count_op(im->p, Opcode::MATMUL), 1);
    if (kind == B_INPUT) continue;  // B is a run-time input here: the values are not checked
    const F x = random_input(2 * 16, 4);
    std::vector<float> slack;
    const F want = onnx_dyn_layer(l, x, &slack);
    const F got = run_y(*im, x, want.size());
    for (size_t e = 0; e < want.size(); ++e) EXPECT_EQ(got[e], want[e]) << e;
  }
  for (Kind kind : {B_INPUT, B_ZP_OUT_OF_RANGE, CAST_READ_ELSEWHERE}) {
    SCOPED_TRACE(kind);
    auto im = import(model(kind, 784).first.bytes());
    ASSERT_FALSE(im->status.is_ok());
    EXPECT_NE(problem(*im).find("node 'l.mmi' (op MatMulInteger, opset 13): not supported: the product runs in f32"),
              std::string::npos)
        << problem(*im);
  }
}

// ---- static QDQ MatMul / Gemm chains as LINEAR_I8 x_scale=given (onnx_fuse_quant.cpp)

// A layer as ONNX Runtime's quantize_static (QDQ) writes it: x's QuantizeLinear/DequantizeLinear
// (sx, zx u8), W i8 [K,O] (Gemm transB: [O,K]) through DequantizeLinear with its scale per tensor
// or per output, a bias (an Add after the MatMul, or Gemm's C), or none.
struct QdqLayer {
  int64_t k, o;
  bool gemm = false;       // Gemm transB=1 (W stored [O,K]), else MatMul
  std::vector<int32_t> w;  // [K,O] values (stored transposed for Gemm)
  F scale, bias;
  float sx;
  int32_t zx;
};

QdqLayer qdq_layer(int64_t k, int64_t o, bool per_column, bool bias, bool gemm, float sx, int32_t zx, uint32_t seed) {
  QdqLayer l;
  l.k = k, l.o = o, l.gemm = gemm, l.sx = sx, l.zx = zx;
  for (int64_t e = 0; e < k * o; ++e) l.w.push_back(static_cast<int32_t>(lcg(&seed) >> 24) - 128);
  for (int64_t c = 0; c < (per_column ? o : 1); ++c) l.scale.push_back(0.001f + 0.0005f * static_cast<float>(lcg(&seed) >> 28));
  if (bias)
    for (int64_t c = 0; c < o; ++c) l.bias.push_back(static_cast<float>(static_cast<int32_t>(lcg(&seed) >> 20) - 2048) / 4096.f);
  return l;
}

void add_qdq_layer(B& m, const QdqLayer& l, const std::string& x, const std::string& y, const std::string& p) {
  std::vector<int32_t> stored = l.w;
  if (l.gemm)
    for (int64_t kk = 0; kk < l.k; ++kk)
      for (int64_t c = 0; c < l.o; ++c) stored[c * l.k + kk] = l.w[kk * l.o + c];
  m.initializer_int(p + "W", l.gemm ? std::vector<int64_t>{l.o, l.k} : std::vector<int64_t>{l.k, l.o},
                    onnx::TensorProto::INT8, stored);
  m.initializer(p + "Ws", l.scale.size() == 1 ? std::vector<int64_t>{} : std::vector<int64_t>{l.o}, l.scale);
  m.initializer_int(p + "Wz", l.scale.size() == 1 ? std::vector<int64_t>{} : std::vector<int64_t>{l.o},
                    onnx::TensorProto::INT8, std::vector<int32_t>(l.scale.size(), 0));
  m.initializer(p + "sx", {}, {l.sx}).initializer_int(p + "zx", {}, onnx::TensorProto::UINT8, {l.zx});
  m.node("QuantizeLinear", {x, p + "sx", p + "zx"}, {p + "xq"}, p + "q");
  m.node("DequantizeLinear", {p + "xq", p + "sx", p + "zx"}, {p + "xd"}, p + "dq");
  B::attr(m.node("DequantizeLinear", {p + "W", p + "Ws", p + "Wz"}, {p + "Wd"}, p + "dqw"), "axis",
          int64_t(l.gemm ? 0 : 1));
  if (l.gemm) {
    std::vector<std::string> in = {p + "xd", p + "Wd"};
    if (!l.bias.empty()) {
      m.initializer(p + "b", {l.o}, l.bias);
      in.push_back(p + "b");
    }
    B::attr(m.node("Gemm", in, {y}, p + "gemm"), "transB", int64_t(1));
    return;
  }
  const std::string mm_out = l.bias.empty() ? y : p + "mm";
  m.node("MatMul", {p + "xd", p + "Wd"}, {mm_out}, p + "matmul");
  if (!l.bias.empty()) {
    m.initializer(p + "b", {l.o}, l.bias);
    m.node("Add", {mm_out, p + "b"}, {y}, p + "add");
  }
}

// The ONNX graph evaluated naively: xd = (sat(rne(x/sx) + zx) − zx)·sx and wd = w·sw in f32, as
// DequantizeLinear rounds them, then Σ xd·wd + b in double. `slack` gets Σ |xd·wd| + |b|.
F onnx_qdq_layer(const QdqLayer& l, const F& x, F* slack) {
  const int64_t rows = static_cast<int64_t>(x.size()) / l.k;
  F y(static_cast<size_t>(rows * l.o));
  slack->assign(y.size(), 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < l.o; ++o) {
      double acc = l.bias.empty() ? 0 : l.bias[o], mag = l.bias.empty() ? 0 : std::fabs(l.bias[o]);
      for (int64_t k = 0; k < l.k; ++k) {
        const float q = std::min(std::max(round_half_even(x[r * l.k + k] / l.sx) + static_cast<float>(l.zx), 0.f), 255.f);
        const float xd = (q - static_cast<float>(l.zx)) * l.sx;
        const float wd = static_cast<float>(l.w[k * l.o + o]) * l.scale[l.scale.size() == 1 ? 0 : o];
        acc += static_cast<double>(xd) * wd;
        mag += std::fabs(static_cast<double>(xd) * wd);
      }
      y[r * l.o + o] = static_cast<float>(acc);
      (*slack)[r * l.o + o] = static_cast<float>(mag);
    }
  return y;
}

// x [3,784] → layer 1 (784→256) → Relu → h (also a graph output) → layer 2 (256→10) → y: each
// layer one LINEAR_I8 x_scale=given, no MATMUL, QUANTIZE or DEQUANTIZE left; each layer's
// outputs the naive evaluation's to the f32 summation's rounding (layer 2 fed our h, so that a
// quantum flipped at a rounding tie of h does not count).
TEST(OnnxQuantImport, StaticQdqMlpIsLinearI8Given) {
  struct Case {
    bool per_column, bias, gemm;
  };
  for (const Case c : {Case{false, false, false}, Case{true, true, false}, Case{true, true, true}, Case{false, false, true},
                       Case{true, false, false}}) {
    SCOPED_TRACE(::testing::Message() << "per_column " << c.per_column << " bias " << c.bias << " gemm " << c.gemm);
    const QdqLayer l1 = qdq_layer(784, 256, c.per_column, c.bias, c.gemm, 6.f / 255.f, 128, 7);
    const QdqLayer l2 = qdq_layer(256, 10, c.per_column, c.bias, c.gemm, 0.05f, 0, 8);
    B m(13);
    m.input("x", {3, 784}).output("y").output("h");
    add_qdq_layer(m, l1, "x", "h0", "l1.");
    m.node("Relu", {"h0"}, {"h"});
    add_qdq_layer(m, l2, "h", "y", "l2.");
    auto im = import(m.bytes());
    ASSERT_TRUE(im->status.is_ok()) << problem(*im);
    expect_two_linear_i8(*im, NNASM_CHOICE(LINEAR_I8, x_scale, given));
    EXPECT_EQ(count_op(im->p, Opcode::DEQUANTIZE), 0);

    const F x = random_input(3 * 784, 11);
    F slack1, slack2;
    const F want_h0 = onnx_qdq_layer(l1, x, &slack1);
    const F y = run_y(*im, x, 30);
    const float* hp = im->ctx.at(im->p.find("h")).f32();
    const F h(hp, hp + 3 * 256);
    for (size_t e = 0; e < h.size(); ++e) EXPECT_NEAR(h[e], std::max(want_h0[e], 0.f), 1e-6f * slack1[e]) << e;
    const F want_y = onnx_qdq_layer(l2, h, &slack2);
    for (size_t e = 0; e < want_y.size(); ++e) EXPECT_NEAR(y[e], want_y[e], 1e-6f * slack2[e]) << e;
  }
}

// Chains that must not become LINEAR_I8 x_scale=given import node by node (MATMUL in f32): x's
// DequantizeLinear with another scale than its QuantizeLinear, W's scale along the wrong axis,
// Gemm with alpha 2, W a graph input, a zero x scale (refused as node by node). x's DequantizeLinear also a graph output still gives the
// LINEAR_I8 (which quantizes x itself), and the QuantizeLinear/DequantizeLinear stay for that
// output.
TEST(OnnxQuantImport, StaticQdqChainsThatDoNotMatch) {
  enum Kind { OTHER_SCALE, XD_OUTPUT, WRONG_AXIS, ALPHA, W_INPUT, ZERO_SCALE };
  for (Kind kind : {OTHER_SCALE, XD_OUTPUT, WRONG_AXIS, ALPHA, W_INPUT, ZERO_SCALE}) {
    SCOPED_TRACE(kind);
    QdqLayer l = qdq_layer(16, 4, true, true, kind == ALPHA, kind == ZERO_SCALE ? 0.f : 0.02f, 100, 9);
    B m(13);
    m.input("x", {2, 16}).output("y");
    add_qdq_layer(m, l, "x", "y", "l.");
    onnx::GraphProto& g = m.graph();
    if (kind == OTHER_SCALE) {
      m.initializer("l.sx2", {}, {0.04f});
      g.mutable_node(1)->set_input(1, "l.sx2");
    }
    if (kind == XD_OUTPUT) m.output("l.xd");
    if (kind == WRONG_AXIS) g.mutable_node(2)->mutable_attribute(0)->set_i(0);
    if (kind == ALPHA) B::attr(*g.mutable_node(3), "alpha", 2.f);
    if (kind == W_INPUT) {
      g.mutable_initializer(0)->set_name("unused");
      m.input("l.W", {16, 4}, onnx::TensorProto::INT8);
    }
    auto im = import(m.bytes());
    if (kind == WRONG_AXIS) {  // DequantizeLinear itself refuses 4 scales along W's 16
      EXPECT_FALSE(im->status.is_ok());
      continue;
    }
    if (kind == ZERO_SCALE) {  // not fused: QuantizeLinear's own mapping refuses it, naming the node
      EXPECT_FALSE(im->status.is_ok());
      EXPECT_NE(problem(*im).find("'l.q'"), std::string::npos) << problem(*im);
      continue;
    }
    ASSERT_TRUE(im->status.is_ok()) << problem(*im);
    EXPECT_EQ(count_op(im->p, Opcode::LINEAR_I8), kind == XD_OUTPUT ? 1 : 0);
    EXPECT_EQ(count_op(im->p, Opcode::MATMUL), kind == XD_OUTPUT ? 0 : 1);
    EXPECT_GE(count_op(im->p, Opcode::QUANTIZE), 1);
    if (kind != XD_OUTPUT) continue;
    EXPECT_EQ(count_op(im->p, Opcode::DEQUANTIZE), 1);
    const F x = random_input(2 * 16, 4);
    F slack;
    const F want = onnx_qdq_layer(l, x, &slack);
    const F got = run_y(*im, x, want.size());
    for (size_t e = 0; e < want.size(); ++e) EXPECT_NEAR(got[e], want[e], 1e-6f * slack[e]) << e;
  }
}

// x [2,5,9,8] → QuantizeLinear/DequantizeLinear → Conv(DequantizeLinear(W i8 [7,5,kh,kw], scale
// per tensor or per output channel, axis 0), B) → y: one CONV2D_I8 x_scale=given, against the
// graph evaluated naively (f32 dequantization, zero padding, a double sum) to the f32 summation's
// rounding; a grouped Conv and asymmetric pads import node by node.
TEST(OnnxQuantImport, StaticQdqConvIsConv2dI8Given) {
  struct Case {
    int64_t k, stride, pad;
    bool per_channel, bias, bias_i32 = false;  // bias_i32: B = DequantizeLinear(i32, sx·sw), as ONNX Runtime writes it
  };
  const int64_t n = 2, c = 5, h = 9, wd = 8, o = 7;
  const float sx = 0.03f;
  const int32_t zx = 77;
  for (const Case cs : {Case{3, 1, 1, true, true}, Case{1, 2, 0, false, false}, Case{3, 2, 0, true, false},
                        Case{5, 1, 2, false, true}, Case{3, 1, 1, true, true, true}}) {
    SCOPED_TRACE(::testing::Message() << "k " << cs.k << " stride " << cs.stride << " pad " << cs.pad);
    uint32_t seed = 17;
    std::vector<int32_t> w;
    for (int64_t e = 0; e < o * c * cs.k * cs.k; ++e) w.push_back(static_cast<int32_t>(lcg(&seed) >> 24) - 128);
    F scale, bias;
    for (int64_t i = 0; i < (cs.per_channel ? o : 1); ++i) scale.push_back(0.001f + 0.0005f * static_cast<float>(lcg(&seed) >> 28));
    for (int64_t i = 0; i < o; ++i) bias.push_back(static_cast<float>(static_cast<int32_t>(lcg(&seed) >> 20) - 2048) / 4096.f);
    B m(13);
    m.input("x", {n, c, h, wd}).output("y");
    m.initializer_int("W", {o, c, cs.k, cs.k}, onnx::TensorProto::INT8, w);
    m.initializer("Ws", cs.per_channel ? std::vector<int64_t>{o} : std::vector<int64_t>{}, scale);
    m.initializer("sx", {}, {sx}).initializer_int("zx", {}, onnx::TensorProto::UINT8, {zx});
    m.node("QuantizeLinear", {"x", "sx", "zx"}, {"xq"}, "q");
    m.node("DequantizeLinear", {"xq", "sx", "zx"}, {"xd"}, "dq");
    B::attr(m.node("DequantizeLinear", {"W", "Ws"}, {"Wd"}, "dqw"), "axis", int64_t(0));
    std::vector<std::string> in = {"xd", "Wd"};
    if (cs.bias && !cs.bias_i32) {
      m.initializer("b", {o}, bias);
      in.push_back("b");
    }
    if (cs.bias_i32) {
      std::vector<int32_t> bq;
      F bs;
      for (int64_t i = 0; i < o; ++i) {
        bs.push_back(sx * scale[cs.per_channel ? i : 0]);
        bq.push_back(static_cast<int32_t>(std::lrint(bias[i] / bs.back())));
        bias[i] = static_cast<float>(bq.back()) * bs.back();  // what DequantizeLinear gives
      }
      m.initializer_int("bq", {o}, onnx::TensorProto::INT32, bq).initializer("bs", {o}, bs);
      m.node("DequantizeLinear", {"bq", "bs"}, {"bd"}, "dqb");
      in.push_back("bd");
    }
    auto& conv = m.node("Conv", in, {"y"}, "conv");
    B::attr(conv, "strides", std::vector<int64_t>{cs.stride, cs.stride});
    B::attr(conv, "pads", std::vector<int64_t>{cs.pad, cs.pad, cs.pad, cs.pad});
    auto im = import(m.bytes());
    ASSERT_TRUE(im->status.is_ok()) << problem(*im);
    EXPECT_EQ(im->report.imported, im->report.nodes);
    EXPECT_EQ(count_op(im->p, Opcode::CONV2D_I8), 1);
    EXPECT_EQ(count_op(im->p, Opcode::CONV2D), 0);
    EXPECT_EQ(count_op(im->p, Opcode::QUANTIZE), 0);
    EXPECT_EQ(count_op(im->p, Opcode::DEQUANTIZE), 0);

    const int64_t ho = (h + 2 * cs.pad - cs.k) / cs.stride + 1, wo = (wd + 2 * cs.pad - cs.k) / cs.stride + 1;
    const F x = random_input(static_cast<size_t>(n * c * h * wd), 21);
    const F got = run_y(*im, x, static_cast<size_t>(n * o * ho * wo));
    for (int64_t nn = 0; nn < n; ++nn)
      for (int64_t oo = 0; oo < o; ++oo)
        for (int64_t oy = 0; oy < ho; ++oy)
          for (int64_t ox = 0; ox < wo; ++ox) {
            double acc = cs.bias ? bias[oo] : 0, mag = std::fabs(acc);
            for (int64_t cc = 0; cc < c; ++cc)
              for (int64_t i = 0; i < cs.k; ++i)
                for (int64_t j = 0; j < cs.k; ++j) {
                  const int64_t iy = oy * cs.stride - cs.pad + i, ix = ox * cs.stride - cs.pad + j;
                  if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                  const float v = x[((nn * c + cc) * h + iy) * wd + ix];
                  const float q = std::min(std::max(round_half_even(v / sx) + static_cast<float>(zx), 0.f), 255.f);
                  const float xd = (q - static_cast<float>(zx)) * sx;
                  const float wv = static_cast<float>(w[((oo * c + cc) * cs.k + i) * cs.k + j]) * scale[cs.per_channel ? oo : 0];
                  acc += static_cast<double>(xd) * wv;
                  mag += std::fabs(static_cast<double>(xd) * wv);
                }
            const size_t e = static_cast<size_t>(((nn * o + oo) * ho + oy) * wo + ox);
            EXPECT_NEAR(got[e], acc, 1e-6 * mag) << e;
          }
  }
  // Not matched: group 5 (depthwise) and asymmetric pads stay node by node.
  for (int kind = 0; kind < 2; ++kind) {
    B m(13);
    const int64_t wc = kind == 0 ? 1 : c;
    m.input("x", {n, c, h, wd}).output("y");
    m.initializer_int("W", {5, wc, 3, 3}, onnx::TensorProto::INT8, std::vector<int32_t>(static_cast<size_t>(5 * wc * 9), 3));
    m.initializer("Ws", {}, {0.01f}).initializer("sx", {}, {sx}).initializer_int("zx", {}, onnx::TensorProto::UINT8, {zx});
    m.node("QuantizeLinear", {"x", "sx", "zx"}, {"xq"}, "q");
    m.node("DequantizeLinear", {"xq", "sx", "zx"}, {"xd"}, "dq");
    m.node("DequantizeLinear", {"W", "Ws"}, {"Wd"}, "dqw");
    auto& conv = m.node("Conv", {"xd", "Wd"}, {"y"}, "conv");
    if (kind == 0) B::attr(conv, "group", int64_t(5));
    else B::attr(conv, "pads", std::vector<int64_t>{0, 1, 1, 0});
    auto im = import(m.bytes());
    ASSERT_TRUE(im->status.is_ok()) << kind << ": " << problem(*im);
    EXPECT_EQ(count_op(im->p, Opcode::CONV2D_I8), 0) << kind;
    EXPECT_GE(count_op(im->p, Opcode::QUANTIZE), 1) << kind;
  }
}

}  // namespace
}  // namespace nnasm

// `nnasm import` as a user meets it (tests/cli_fixture.h): an ONNX model built in code is
// imported to a model file and a listing, run on .npy inputs, and gives what the importer's
// program computes in this process; problems are one line each on stderr and exit status 1.
#include <algorithm>
#include <cmath>

#include "serialize/npy.h"
#include "tests/cli_fixture.h"
#include "tests/flow_writer.h"
#include "tests/npy_bytes.h"
#include "tests/onnx/model_builder.h"

namespace nnasm {
namespace {

// input.1 [2,3] → Gemm(weight [2,3], transB) → Tanh: PyTorch's names, one of them renamed.
std::string small_model(const std::vector<int64_t>& input_dims = {2, 3}) {
  OnnxModelBuilder m(13);
  m.input("input.1", input_dims).output("/out/Tanh_output_0");
  m.initializer("fc.weight", {2, 3}, {0.5f, -1, 0.25f, 2, 0.125f, -0.75f}).initializer("fc.bias", {2}, {0.1f, -0.3f});
  OnnxModelBuilder::attr(m.node("Gemm", {"input.1", "fc.weight", "fc.bias"}, {"h"}, "fc"), "transB", int64_t(1));
  m.node("Tanh", {"h"}, {"/out/Tanh_output_0"}, "act");
  return m.bytes();
}

const float kX[6] = {1, -2, 0.5f, 3, 0.25f, -1};

// What the model computes, by hand.
std::vector<float> expected() {
  const float w[2][3] = {{0.5f, -1, 0.25f}, {2, 0.125f, -0.75f}}, b[2] = {0.1f, -0.3f};
  std::vector<float> y;
  for (int i = 0; i < 2; ++i)
    for (int o = 0; o < 2; ++o) {
      float s = b[o];
      for (int k = 0; k < 3; ++k) s += kX[i * 3 + k] * w[o][k];
      y.push_back(std::tanh(s));
    }
  return y;
}

void expect_output(const std::string& path) {
  NpyArray y;
  Status s = npy_read(path, &y);
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(y.type.str(), "f32[2,2]");
  const std::vector<float> want = expected();
  ASSERT_EQ(y.f32.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(y.f32[i], want[i], 1e-6f) << i;
}

// A quantized model's u8 input and its i8 and u8 outputs go through `nnasm run` as |u1 and |i1
// .npy files, byte for byte, and --expect compares them.
TEST_F(CliTest, ImportedQuantizedModelRunsOnByteNpy) {
  OnnxModelBuilder m(13);
  m.input("xq", {4}, onnx::TensorProto::UINT8).output("yi", onnx::TensorProto::INT8).output("yu", onnx::TensorProto::UINT8);
  m.initializer("s", {}, {0.5f}).initializer_int("z", {}, onnx::TensorProto::UINT8, {128});
  m.initializer_int("zi", {}, onnx::TensorProto::INT8, {-3});
  m.node("DequantizeLinear", {"xq", "s", "z"}, {"f"});
  m.node("QuantizeLinear", {"f", "s", "zi"}, {"yi"});
  m.node("QuantizeLinear", {"f", "s", "z"}, {"yu"});
  const std::string model = put("q.onnx", m.bytes());
  ToolResult r = tool({"import", model, "-o", path("q.nnm")});
  ASSERT_EQ(r.code, 0) << r.err;
  const uint8_t x[4] = {0, 100, 128, 255};
  const int8_t want_i[4] = {-128, -31, -3, 124};
  const std::string in = put_npy("x.npy", TensorType{DType::U8, Shape{4}}, x);
  const std::string ei = put_npy("ei.npy", TensorType{DType::I8, Shape{4}}, want_i);
  r = tool({"run", path("q.nnm"), "--in", "xq=" + in, "--out", "yi=" + path("yi.npy"), "--out", "yu=" + path("yu.npy"),
            "--expect", "yi=" + ei, "--expect", "yu=" + in});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("%yi: matches"), std::string::npos) << r.out;
  NpyArray yi, yu;
  ASSERT_TRUE(npy_read(path("yi.npy"), &yi).is_ok());
  ASSERT_TRUE(npy_read(path("yu.npy"), &yu).is_ok());
  EXPECT_EQ(yi.type.str(), "i8[4]");
  EXPECT_EQ(yi.bytes, (std::vector<uint8_t>{0x80, 0xe1, 0xfd, 124}));
  EXPECT_EQ(yu.bytes, std::vector<uint8_t>(x, x + 4));
  // An f32 file for the u8 input is refused, naming both types.
  const float xf[4] = {0, 1, 2, 3};
  r = tool({"run", path("q.nnm"), "--in", "xq=" + put_npy("xf.npy", TensorType{DType::F32, Shape{4}}, xf)});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("holds f32[4], but %xq is u8[4]"), std::string::npos) << r.err;
}

TEST_F(CliTest, ImportThenRunOnNpy) {
  const std::string model = put("model.onnx", small_model());
  ToolResult r = tool({"import", model, "-o", path("model.nnm")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, model + ": imported 2 of 2 nodes as 3 instructions; inputs %input.1; outputs %_out_Tanh_output_0; 2 params\n");
  EXPECT_NE(r.err.find("nnasm: note: graph output '/out/Tanh_output_0' is %_out_Tanh_output_0"), std::string::npos) << r.err;
  const std::string x = put_npy("x.npy", TensorType{DType::F32, Shape{2, 3}}, kX);
  r = tool({"run", path("model.nnm"), "--in", "input.1=" + x, "--out", "_out_Tanh_output_0=" + path("y.npy")});
  ASSERT_EQ(r.code, 0) << r.err;
  expect_output(path("y.npy"));
}

// --batch writes the model at another batch: a batch-1 model runs the first row alone.
TEST_F(CliTest, ImportWritesTheModelAtAnotherBatch) {
  const std::string model = put("model.onnx", small_model());
  ToolResult r = tool({"import", model, "--batch", "1", "-o", path("one.nnm"), "--listing", path("one.nnasm")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(slurp(path("one.nnasm")).find(": f32[1,3]"), std::string::npos) << slurp(path("one.nnasm"));
  const std::string x = put_npy("x1.npy", TensorType{DType::F32, Shape{1, 3}}, kX);
  r = tool({"run", path("one.nnm"), "--in", "input.1=" + x, "--out", "_out_Tanh_output_0=" + path("y1.npy")});
  ASSERT_EQ(r.code, 0) << r.err;
  NpyArray y;
  ASSERT_TRUE(npy_read(path("y1.npy"), &y).is_ok());
  EXPECT_EQ(y.type.str(), "f32[1,2]");
  const std::vector<float> want = expected();
  for (size_t i = 0; i < 2; ++i) EXPECT_NEAR(y.f32[i], want[i], 1e-6f) << i;
  EXPECT_EQ(tool({"import", model, "--batch", "0", "-o", path("zero.nnm")}).code, 1);
}

// PyTorch users save token ids as int64 and masks as bool: `nnasm run` reads both for an imported
// model's INT64 input (i32, each id checked) and BOOL input (f32 0 and 1).
TEST_F(CliTest, RunReadsInt64AndBoolNpyInputs) {
  OnnxModelBuilder m(13);
  const std::vector<float> table = {0.5f, -1, 2, 0.25f, 3, -0.5f, 1.5f, -2};  // 4 rows of 2
  m.input("ids", {3}, onnx::TensorProto::INT64).input("mask", {3, 2}, onnx::TensorProto::BOOL).output("y");
  m.initializer("emb.weight", {4, 2}, table).initializer("fill", {1}, {-9});
  m.node("Gather", {"emb.weight", "ids"}, {"e"}, "embedding");
  m.node("Where", {"mask", "e", "fill"}, {"y"}, "masked_fill");
  const std::string model = put("masked.onnx", m.bytes());
  ToolResult r = tool({"import", model, "-o", path("masked.nnm")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("graph input 'mask' is BOOL; the program reads it as f32 0 and 1"), std::string::npos) << r.err;
  const std::string ids = put("ids.npy", make_npy(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", i64_bytes({3, 0, -1})));
  const std::string mask = put("mask.npy", make_npy(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3, 2), }", std::string("\x01\x00\x01\x01\x00\x01", 6)));
  r = tool({"run", path("masked.nnm"), "--in", "ids=" + ids, "--in", "mask=" + mask, "--out", "y=" + path("y.npy")});
  ASSERT_EQ(r.code, 0) << r.err;
  NpyArray y;
  ASSERT_TRUE(npy_read(path("y.npy"), &y).is_ok());
  const int rows[3] = {3, 0, 3};  // -1 is the last row, as ONNX counts
  const bool keep[6] = {true, false, true, true, false, true};
  std::vector<float> want;
  for (int k = 0; k < 6; ++k) want.push_back(keep[k] ? table[rows[k / 2] * 2 + k % 2] : -9);
  EXPECT_EQ(y.f32, want);

  // An id no i32 holds is an error naming the file and the element.
  const std::string big = put("big.npy", make_npy(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", i64_bytes({1, int64_t(1) << 33, 2})));
  r = tool({"run", path("masked.nnm"), "--in", "ids=" + big, "--in", "mask=" + mask});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "nnasm: error: input %ids: " + big +
                       ": element 1 [1] is 8589934592, outside the range of i32, which nnasm narrows int64 to\n");
  // int64 read for a float input says what it was read as.
  r = tool({"run", path("masked.nnm"), "--in", "ids=" + ids, "--in", "mask=" + ids});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find(ids + " holds i32[3] (int64, narrowed), but %mask is f32[3,2]"), std::string::npos) << r.err;
}

// A listing alone carries the weights; with a model file it names them, and `nnasm build` puts
// an edited listing back together with them.
TEST_F(CliTest, ImportWritesAListingWithOrWithoutTheWeights) {
  const std::string model = put("model.onnx", small_model());
  const std::string x = put_npy("x.npy", TensorType{DType::F32, Shape{2, 3}}, kX);
  ToolResult r = tool({"import", model, "--listing", path("alone.nnasm")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(get("alone.nnasm").find("param  @fc.weight : f32[2,3] = ["), std::string::npos) << get("alone.nnasm");
  r = tool({"run", path("alone.nnasm"), "--in", "input.1=" + x, "--out", "_out_Tanh_output_0=" + path("y.npy")});
  ASSERT_EQ(r.code, 0) << r.err;
  expect_output(path("y.npy"));

  r = tool({"import", model, "-o", path("m.nnm"), "--listing", path("named.nnasm")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(get("named.nnasm").find(" = ["), std::string::npos) << get("named.nnasm");
  r = tool({"build", path("named.nnasm"), "--weights", path("m.nnm"), "-o", path("rebuilt.nnm")});
  ASSERT_EQ(r.code, 0) << r.err;
  r = tool({"run", path("rebuilt.nnm"), "--in", "input.1=" + x, "--out", "_out_Tanh_output_0=" + path("y2.npy")});
  ASSERT_EQ(r.code, 0) << r.err;
  expect_output(path("y2.npy"));
}

TEST_F(CliTest, ImportFillsSymbolicDimensionsFromShape) {
  const std::string model = put("model.onnx", small_model({-1, 3}));
  ToolResult r = tool({"import", model, "-o", path("m.nnm")});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, model + ": error: graph input 'input.1': dimension 0 is symbolic ('N'); give the shape with --shape "
                           "input.1=D0,D1,...\n" + model + ": error: 1 problem; 0 of 2 nodes imported\n");
  EXPECT_EQ(::access(path("m.nnm").c_str(), F_OK), -1) << "nothing is written after a problem";
  r = tool({"import", model, "-o", path("m.nnm"), "--shape", "input.1=2,3"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = tool({"import", model, "--shape", "input.1=2,x"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "nnasm: error: --shape 'input.1=2,x': expected NAME=D0,D1,... with positive dimensions\n");
}

TEST_F(CliTest, ImportListsEveryProblem) {
  OnnxModelBuilder m(13);
  m.input("x", {1, 2, 4, 4}).output("a").output("b");
  m.node("GridSample", {"x", "x"}, {"a"}, "GridSample_12");
  m.node("Det", {"x"}, {"b"}, "Det_3");
  const std::string model = put("bad.onnx", m.bytes());
  ToolResult r = tool({"import", model, "-o", path("m.nnm")});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, model + ": error: node 'GridSample_12' (op GridSample, opset 13): not supported\n" + model +
                       ": error: node 'Det_3' (op Det, opset 13): not supported\n" + model +
                       ": error: 2 problems; 0 of 2 nodes imported\n");
  // Told by content: "flow" makes it a (here truncated) Myelin file, whatever its name.
  r = tool({"import", put("junk.onnx", "flow\x01\x02")});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err.rfind(path("junk.onnx") + ": byte ", 0), 0u) << r.err;
}

// A Myelin .flow file (tests/flow_writer.h's MLP, batch dimension -1) through the same command:
// --batch sets the batch, the model file runs on .npy input and gives the MLP's softmax.
TEST_F(CliTest, ImportFlowThenRun) {
  const std::vector<float> w0(20, 0.25f), b0(5, -0.5f), w1 = {1, 0, -1, 0.5f, 2, 0, 0, 0, 1, -1, 1, 1, 0.25f, 0, 0},
                           b1 = {0.1f, 0.2f, 0.3f};
  const std::string model = put("mlp.flow", flow_bytes(flow_mlp_spec(6, w0, b0, w1, b1)));
  ToolResult r = tool({"import", model, "--batch", "2", "-o", path("mlp.nnm")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind(model + ": imported 6 of 6 operations as ", 0), 0u) << r.out;
  EXPECT_NE(r.err.find("input %input: batch dimensions (-1) of [-1,4] set to 2"), std::string::npos) << r.err;
  const float x[8] = {1, 2, 3, 4, -1, 0.5f, 2, -3};
  r = tool({"run", path("mlp.nnm"), "--in", "input=" + put_npy("x.npy", TensorType{DType::F32, Shape{2, 4}}, x), "--out",
            "output=" + path("y.npy")});
  ASSERT_EQ(r.code, 0) << r.err;
  NpyArray y;
  ASSERT_TRUE(npy_read(path("y.npy"), &y).is_ok());
  ASSERT_EQ(y.type.str(), "f32[2,3]");
  for (int i = 0; i < 2; ++i) {
    double h[5], z[3], sum = 0;
    for (int j = 0; j < 5; ++j) {
      h[j] = b0[j];
      for (int k = 0; k < 4; ++k) h[j] += x[i * 4 + k] * w0[k * 5 + j];
      h[j] = std::max(h[j], 0.0);
    }
    for (int o = 0; o < 3; ++o) {
      z[o] = b1[o];
      for (int j = 0; j < 5; ++j) z[o] += h[j] * w1[j * 3 + o];
      sum += std::exp(z[o]);
    }
    for (int o = 0; o < 3; ++o) EXPECT_NEAR(y.f32[i * 3 + o], std::exp(z[o]) / sum, 1e-6) << i << "," << o;
  }
  // ONNX's option is refused for a .flow file, and the .flow options for an ONNX model.
  EXPECT_EQ(tool({"import", model, "--shape", "input=2,4"}).code, 1);
  EXPECT_EQ(tool({"import", put("model.onnx", small_model()), "--function", "f"}).code, 1);
}

}  // namespace
}  // namespace nnasm

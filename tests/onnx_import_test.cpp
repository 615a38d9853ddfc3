// The ONNX importer on small models built in code (tests/onnx/model_builder.h): the program it
// records (instructions, params, names) and what that program computes, against plain loops
// written here; shape-subgraph folding; renamings; symbolic dimensions; every unsupported node in
// one report; malformed files (truncated bytes, short raw_data, negative dimensions, attributes of
// the wrong type) as errors naming the part.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/executor.h"
#include "engine/optimizer.h"
#include "serialize/listing.h"
#include "serialize/model_file.h"
#include "serialize/onnx/onnx_import.h"
#include "shell/shell.h"
#include "tests/onnx/imported.h"
#include "tests/onnx/model_builder.h"

namespace nnasm {
namespace {

using F = std::vector<float>;

std::unique_ptr<Imported> import(const std::string& bytes, const OnnxImportOptions& o = {}) {
  auto r = std::make_unique<Imported>();
  r->status = onnx_import(bytes, "m.onnx", o, &r->p, &r->report);
  // The problems ride along in the message, so that a failed expectation shows them.
  if (!r->status && !r->report.problems.empty()) r->status = Status::error(fmt::format("{}\n  {}", r->status.message(), fmt::join(r->report.problems, "\n  ")));
  return r;
}

// Runs `p` on `inputs` (by name) and returns output `name`'s values.
F run(Program& p, const std::map<std::string, F>& inputs, const std::string& name) {
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(p);
  EXPECT_TRUE(ex.is_ok()) << ex.status().message();
  if (!ex) return {};
  for (const auto& [n, v] : inputs) {
    const Tensor& t = Context::of(p)->at(p.find(n));
    EXPECT_EQ(t.numel(), static_cast<int64_t>(v.size())) << n;
    std::copy(v.begin(), v.end(), t.f32());
  }
  (*ex)->run();
  const Tensor& y = Context::of(p)->at(p.find(name));
  return F(y.f32(), y.f32() + y.numel());
}

// The mnemonics of the program's instructions, in order.
std::vector<std::string> mnemonics(const Program& p) {
  std::vector<std::string> v;
  for (const Instruction& ins : p.code()) v.push_back(ins.info().mnemonic);
  return v;
}

F ramp(size_t n, float scale = 0.1f, float offset = -0.3f) {
  F v(n);
  for (size_t i = 0; i < n; ++i) v[i] = offset + scale * static_cast<float>((i * 7) % 11) - 0.01f * static_cast<float>(i);
  return v;
}

void expect_near(const F& got, const F& want, float tol = 1e-5f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << "element " << i;
}

// x [2,4] → Gemm(W1 [3,4], transB, as PyTorch's Linear exports) → Relu → Gemm(W2 [3,2]) →
// Softmax(axis 1).
OnnxModelBuilder mlp(const F& w1, const F& b1, const F& w2, const F& b2) {
  OnnxModelBuilder m(13);
  m.input("x", {2, 4}).output("y");
  m.initializer("fc1.weight", {3, 4}, w1).initializer("fc1.bias", {3}, b1);
  m.initializer("fc2.weight", {3, 2}, w2).initializer("fc2.bias", {2}, b2);
  OnnxModelBuilder::attr(m.node("Gemm", {"x", "fc1.weight", "fc1.bias"}, {"h"}, "fc1"), "transB", int64_t(1));
  m.node("Relu", {"h"}, {"r"}, "relu");
  m.node("Gemm", {"r", "fc2.weight", "fc2.bias"}, {"z"}, "fc2");
  OnnxModelBuilder::attr(m.node("Softmax", {"z"}, {"y"}, "softmax"), "axis", int64_t(1));
  return m;
}

TEST(OnnxImport, MlpGemmReluSoftmaxMatchesLoops) {
  const F w1 = ramp(12), b1 = ramp(3, 0.2f), w2 = ramp(6, 0.3f, -0.5f), b2 = {0.1f, -0.2f}, x = ramp(8, 0.5f, -1);
  auto m = import(mlp(w1, b1, w2, b2).bytes());
  ASSERT_TRUE(m->status.is_ok()) << m->status.message();
  EXPECT_EQ(m->report.nodes, 4u);
  EXPECT_EQ(m->report.imported, 4u);
  EXPECT_TRUE(m->report.complete());
  EXPECT_EQ(mnemonics(m->p), (std::vector<std::string>{"MATMUL", "ADD", "RELU", "MATMUL", "ADD", "SOFTMAX"}));
  // Weights are trainable params under their ONNX names; graph tensors keep theirs.
  for (const char* w : {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}) {
    ASSERT_NE(m->p.find(w), NO_TENSOR) << w;
    EXPECT_EQ(m->p.desc(m->p.find(w)).role, Role::PARAM) << w;
  }
  EXPECT_EQ(m->p.desc(m->p.find("x")).role, Role::INPUT);
  EXPECT_TRUE(m->p.desc(m->p.find("y")).is_output);

  F want(4);
  for (int i = 0; i < 2; ++i) {
    float h[3], z[2];
    for (int o = 0; o < 3; ++o) {
      h[o] = b1[o];
      for (int k = 0; k < 4; ++k) h[o] += x[i * 4 + k] * w1[o * 4 + k];
      h[o] = std::max(h[o], 0.f);
    }
    for (int o = 0; o < 2; ++o) {
      z[o] = b2[o];
      for (int k = 0; k < 3; ++k) z[o] += h[k] * w2[k * 2 + o];
    }
    const float mx = std::max(z[0], z[1]);
    const float s = std::exp(z[0] - mx) + std::exp(z[1] - mx);
    for (int o = 0; o < 2; ++o) want[i * 2 + o] = std::exp(z[o] - mx) / s;
  }
  expect_near(run(m->p, {{"x", x}}, "y"), want);
}

TEST(OnnxImport, ConvBatchNormMaxPoolMatchesLoops) {
  const int C = 2, O = 3, H = 6, W = 6;
  const F x = ramp(C * H * W, 0.25f, -1), w = ramp(O * C * 9, 0.05f, -0.2f), b = {0.1f, -0.1f, 0.05f};
  const F gamma = {1.5f, 0.5f, -1}, beta = {0.1f, 0.2f, 0.3f}, mean = {0.05f, -0.1f, 0.2f}, var = {0.5f, 1, 2};
  OnnxModelBuilder m(13);
  m.input("x", {1, C, H, W}).output("y");
  m.initializer("w", {O, C, 3, 3}, w).initializer("b", {O}, b);
  m.initializer("gamma", {O}, gamma).initializer("beta", {O}, beta).initializer("mean", {O}, mean).initializer("var", {O}, var);
  onnx::NodeProto& conv = m.node("Conv", {"x", "w", "b"}, {"c"}, "conv");
  OnnxModelBuilder::attr(conv, "pads", std::vector<int64_t>{1, 1, 1, 1});
  OnnxModelBuilder::attr(conv, "kernel_shape", std::vector<int64_t>{3, 3});
  OnnxModelBuilder::attr(m.node("BatchNormalization", {"c", "gamma", "beta", "mean", "var"}, {"n"}, "bn"), "epsilon", 1e-3f);
  onnx::NodeProto& pool = m.node("MaxPool", {"n"}, {"y"}, "pool");
  OnnxModelBuilder::attr(pool, "kernel_shape", std::vector<int64_t>{2, 2});
  OnnxModelBuilder::attr(pool, "strides", std::vector<int64_t>{2, 2});
  auto r = import(m.bytes());
  ASSERT_TRUE(r->status.is_ok()) << r->status.message();
  EXPECT_EQ(mnemonics(r->p), (std::vector<std::string>{"CONV2D", "BATCHNORM2D", "MAXPOOL2D"}));
  // Running statistics are state (updated when fine-tuning in training mode), γ and β params.
  EXPECT_EQ(r->p.desc(r->p.find("mean")).role, Role::STATE);
  EXPECT_EQ(r->p.desc(r->p.find("var")).role, Role::STATE);
  EXPECT_EQ(r->p.desc(r->p.find("gamma")).role, Role::PARAM);
  // ONNX's momentum 0.9 keeps 90% of the running statistics: nnasm's (PyTorch's) 0.1.
  EXPECT_FLOAT_EQ(r->p.code()[1].f(1), 0.1f);

  F n(O * H * W);
  for (int o = 0; o < O; ++o)
    for (int i = 0; i < H; ++i)
      for (int j = 0; j < W; ++j) {
        float s = b[o];
        for (int c = 0; c < C; ++c)
          for (int u = 0; u < 3; ++u)
            for (int v = 0; v < 3; ++v) {
              const int yi = i + u - 1, xj = j + v - 1;
              if (yi >= 0 && yi < H && xj >= 0 && xj < W) s += w[((o * C + c) * 3 + u) * 3 + v] * x[(c * H + yi) * W + xj];
            }
        n[(o * H + i) * W + j] = gamma[o] * (s - mean[o]) / std::sqrt(var[o] + 1e-3f) + beta[o];
      }
  F want(O * 3 * 3);
  for (int o = 0; o < O; ++o)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        float mx = -INFINITY;
        for (int u = 0; u < 2; ++u)
          for (int v = 0; v < 2; ++v) mx = std::max(mx, n[(o * H + 2 * i + u) * W + 2 * j + v]);
        want[(o * 3 + i) * 3 + j] = mx;
      }
  expect_near(run(r->p, {{"x", x}}, "y"), want, 1e-4f);
}

// Statistics that are constants: inference reads them as any statistics; training, which would
// write them, is refused by name.
TEST(OnnxImport, BatchNormWithConstantStatisticsRunsInInference) {
  const F x = ramp(8, 0.5f, -1), gamma = {2, 0.5f}, beta = {0.1f, -0.2f}, mean = {0.3f, -0.4f}, var = {0.5f, 2};
  OnnxModelBuilder m(13);
  m.input("x", {1, 2, 2, 2}).output("y").initializer("gamma", {2}, gamma).initializer("beta", {2}, beta);
  OnnxModelBuilder::attr_tensor(m.node("Constant", {}, {"mean"}), "value", {2}, mean);
  OnnxModelBuilder::attr_tensor(m.node("Constant", {}, {"var"}), "value", {2}, var);
  m.node("BatchNormalization", {"x", "gamma", "beta", "mean", "var"}, {"y"});
  auto r = import(m.bytes());
  ASSERT_TRUE(r->status.is_ok()) << r->status.message();
  EXPECT_EQ(r->p.code().back().info().mnemonic, std::string("BATCHNORM2D"));
  F want(8);
  for (int c = 0; c < 2; ++c)
    for (int k = 0; k < 4; ++k)
      want[c * 4 + k] = gamma[c] * (x[c * 4 + k] - mean[c]) / std::sqrt(var[c] + 1e-5f) + beta[c];
  expect_near(run(r->p, {{"x", x}}, "y"), want);
  const Status s = r->p.check_state_writable();
  EXPECT_NE(s.message().find("consts are read-only"), std::string::npos) << s.message();
}

// PyTorch's exporter merges equal initializers: a fresh BatchNorm2d's zero bias and zero running
// mean arrive as one initializer, both β and the running mean. It imports and runs; training
// asks for statistics of their own (and never writes the shared tensor).
TEST(OnnxImport, BatchNormSharingAnInitializerRunsInInference) {
  const F x = ramp(12, 0.5f, -1), gamma = {2, 0.5f, 1}, zeros = {0, 0, 0}, var = {0.5f, 2, 1};
  OnnxModelBuilder m(17);
  m.input("x", {2, 3, 2}).output("y").initializer("gamma", {3}, gamma).initializer("zeros", {3}, zeros);
  m.initializer("var", {3}, var);
  m.node("BatchNormalization", {"x", "gamma", "zeros", "zeros", "var"}, {"y"});
  auto r = import(m.bytes());
  ASSERT_TRUE(r->status.is_ok()) << r->status.message();
  EXPECT_EQ(mnemonics(r->p), std::vector<std::string>{"BATCHNORM2D"});
  F want(12);
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c)
      for (int k = 0; k < 2; ++k) {
        const int i = (n * 3 + c) * 2 + k;
        want[i] = gamma[c] * x[i] / std::sqrt(var[c] + 1e-5f);
      }
  expect_near(run(r->p, {{"x", x}}, "y"), want);
  const Status s = r->p.check_state_writable();
  EXPECT_NE(s.message().find("(@zeros) in place when training, but it is also input 3"), std::string::npos) << s.message();
}

// x.view(x.size(0), -1) as torch.onnx.export writes it (tests/onnx/model_builder.h): everything
// but the Reshape is known at import time and leaves no instruction.
TEST(OnnxImport, FoldsPyTorchsShapeSubgraph) {
  auto r = import(pytorch_view_model().bytes());
  ASSERT_TRUE(r->status.is_ok()) << r->status.message();
  EXPECT_EQ(r->report.imported, 8u);
  EXPECT_EQ(mnemonics(r->p), std::vector<std::string>{"RESHAPE"});
  EXPECT_EQ(r->p.desc(r->p.find("y")).type.str(), "f32[2,12]");
  const F x = ramp(24);
  EXPECT_EQ(run(r->p, {{"x", x}}, "y"), x);
}

// ONNX names that are not listing names are renamed deterministically, each renaming a note;
// legal names (input.1, fc1.weight) stay, and a name a renaming would take gets the next suffix.
TEST(OnnxImport, RenamesIllegalNamesAndSaysSo) {
  OnnxModelBuilder m(13);
  m.input("input.1", {2, 3}).input("input:1", {2, 3}).output("/out/Add_output_0");
  m.initializer("onnx::Add_5", {3}, {1, 2, 3});
  m.node("Add", {"input.1", "onnx::Add_5"}, {"/layer1/Add_output_0"});
  m.node("Add", {"/layer1/Add_output_0", "input:1"}, {"input_1"});
  m.node("Relu", {"input_1"}, {"/out/Add_output_0"});
  OnnxGraphInfo info;
  Context ctx;
  Program p(ctx);
  ImportReport report;
  Status s = onnx_import(m.bytes(), "m.onnx", {}, &p, &report, &info);
  ASSERT_TRUE(s.is_ok()) << s.message();
  for (const char* name : {"input.1", "input_1", "input_1_2", "onnx__Add_5", "_layer1_Add_output_0", "_out_Add_output_0"})
    EXPECT_NE(p.find(name), NO_TENSOR) << name << "\n" << program_print(p);
  EXPECT_EQ(report.notes, (std::vector<std::string>{
                              "graph input 'input:1' is %input_1",
                              "tensor 'onnx::Add_5' is @onnx__Add_5",
                              "tensor '/layer1/Add_output_0' is %_layer1_Add_output_0",
                              "tensor 'input_1' is %input_1_2",
                              "graph output '/out/Add_output_0' is %_out_Add_output_0",
                          }));
  using Pairs = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(info.inputs, (Pairs{{"input.1", "input.1"}, {"input:1", "input_1"}}));
  EXPECT_EQ(info.outputs, (Pairs{{"/out/Add_output_0", "_out_Add_output_0"}}));
  // The listing parses back: every name is a listing name.
  Context ctx2;
  Program q(ctx2);
  Status parsed = program_parse(program_print(p), "m.nnasm", &q);
  EXPECT_TRUE(parsed.is_ok()) << parsed.message();
}

TEST(OnnxImport, SymbolicDimensionsNeedAShape) {
  OnnxModelBuilder m(13);
  m.input("x", {-1, 4}, onnx::TensorProto::FLOAT, "batch").output("y");
  m.node("Relu", {"x"}, {"y"});
  auto r = import(m.bytes());
  ASSERT_FALSE(r->status.is_ok());
  ASSERT_EQ(r->report.problems.size(), 1u);
  EXPECT_EQ(r->report.problems[0],
            "graph input 'x': dimension 0 is symbolic ('batch'); give the shape with --shape x=D0,D1,...");
  // The node is not imported, and not reported again: its input is the problem.
  EXPECT_EQ(r->report.imported, 0u);

  OnnxImportOptions o;
  o.shapes["x"] = {5, 4};
  r = import(m.bytes(), o);
  ASSERT_TRUE(r->status.is_ok()) << r->status.message();
  EXPECT_EQ(r->p.desc(r->p.find("y")).type.str(), "f32[5,4]");

  o.shapes["x"] = {5, 3};  // the model's known dimension disagrees
  r = import(m.bytes(), o);
  ASSERT_EQ(r->report.problems.size(), 1u);
  EXPECT_EQ(r->report.problems[0], "graph input 'x': --shape gives dimension 1 as 3, the model says 4");
  o.shapes = {{"z", {1}}};
  r = import(m.bytes(), o);
  EXPECT_EQ(r->status.message().rfind("m.onnx: error: --shape z: the model has no graph input of that name", 0), 0u)
      << r->status.message();
}

// An Expand of 86 bytes to [65536,65536] is a 16 GiB tensor: the model-file loader would refuse
// the program, so the import does, naming the tensor.
TEST(OnnxImport, AProgramOverTheLoadersLimitIsRefused) {
  OnnxModelBuilder m(13);
  m.input("x", {1}).initializer_i64("shape", {2}, {65536, 65536}).output("y");
  m.node("Expand", {"x", "shape"}, {"y"});
  auto r = import(m.bytes());
  ASSERT_FALSE(r->status.is_ok());
  const std::string& msg = r->status.message();
  EXPECT_EQ(msg.rfind("m.onnx: error: the program's tensors need", 0), 0u) << msg;
  EXPECT_NE(msg.find(fmt::format("over the limit of {}", MAX_PROGRAM_BYTES)), std::string::npos) << msg;
  EXPECT_NE(msg.find("%y f32[65536,65536], needs 17179869184"), std::string::npos) << msg;

  OnnxModelBuilder small(13);  // the same at [256,256] imports
  small.input("x", {1}).initializer_i64("shape", {2}, {256, 256}).output("y");
  small.node("Expand", {"x", "shape"}, {"y"});
  r = import(small.bytes());
  EXPECT_TRUE(r->status.is_ok()) << r->status.message();
}

// A Relu of a [2,10] input whose graph output declares `dims` (-1: the symbol "N").
std::string relu_declaring(const std::vector<int64_t>& dims) {
  OnnxModelBuilder m(13);
  m.input("x", {2, 10}).output("y");
  m.node("Relu", {"x"}, {"y"});
  onnx::TensorShapeProto* shape = m.graph().mutable_output(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  for (int64_t d : dims) {
    if (d < 0) shape->add_dim()->set_dim_param("N");
    else shape->add_dim()->set_dim_value(d);
  }
  return m.bytes();
}

// As ONNX Runtime decides by default: a declared static dimension (or rank) that disagrees with
// the computed one is a note naming the output and both shapes (`nnasm import` always prints
// notes on graph outputs), and the computed shape is kept; symbolic dimensions accept any size.
TEST(OnnxImport, AGraphOutputsDeclaredShapeThatDisagreesIsANote) {
  for (const std::vector<int64_t>& ok : std::vector<std::vector<int64_t>>{{2, 10}, {-1, 10}, {-1, -1}}) {
    auto r = import(relu_declaring(ok));
    EXPECT_TRUE(r->status.is_ok()) << r->status.message();
    EXPECT_TRUE(r->report.notes.empty()) << r->report.notes[0];
  }
  const std::vector<std::pair<std::vector<int64_t>, std::string>> bad = {
      {{3, 7}, "[3,7]"}, {{2147483648, 10}, "[2147483648,10]"}, {{-1, 11}, "[N,11]"}, {{20}, "[20]"}};
  for (const auto& [dims, shown] : bad) {
    auto r = import(relu_declaring(dims));
    ASSERT_TRUE(r->status.is_ok()) << r->status.message();
    EXPECT_EQ(r->p.desc(r->p.find("y")).type.str(), "f32[2,10]");
    const std::string want =
        fmt::format("graph output 'y': the model declares shape {}, the import computes [2,10] and keeps it", shown);
    EXPECT_EQ(std::count(r->report.notes.begin(), r->report.notes.end(), want), 1) << shown;
  }
}

// Every node that cannot be mapped is one line, in one report; a node that only reads one of
// their results is counted as not imported without a line of its own.
// An embedding: Gather whose indices are a graph input (INT64 token ids, narrowed to an i32
// input) becomes one GATHER; indices known at import time stay slices.
TEST(OnnxImport, GatherWithRunTimeIndicesIsAnEmbeddingLookup) {
  OnnxModelBuilder m(13);
  const F table = ramp(5 * 3);
  m.input("ids", {2, 2}, onnx::TensorProto::INT64).output("y").initializer("emb.weight", {5, 3}, table);
  m.node("Gather", {"emb.weight", "ids"}, {"y"}, "embedding");
  auto r = import(m.bytes());
  ASSERT_TRUE(r->status.is_ok()) << r->status.message();
  EXPECT_EQ(mnemonics(r->p), (std::vector<std::string>{"GATHER"}));
  ASSERT_EQ(r->p.desc(r->p.find("ids")).type.dtype, DType::I32);
  auto ex = Executor::prepare(r->p);
  ASSERT_TRUE(ex.is_ok()) << ex.status().message();
  const int32_t ids[4] = {4, 0, -1, 2};  // -1: the last row, as ONNX counts
  std::copy(ids, ids + 4, r->ctx.at(r->p.find("ids")).i32());
  (*ex)->run();
  const Tensor& y = r->ctx.at(r->p.find("y"));
  ASSERT_EQ(y.desc.type.str(), "f32[2,2,3]");
  for (int k = 0; k < 4; ++k)
    for (int c = 0; c < 3; ++c) EXPECT_EQ(y.f32()[k * 3 + c], table[((ids[k] + 5) % 5) * 3 + c]) << k << "," << c;
}

TEST(OnnxImport, ListsEveryUnsupportedNodeAtOnce) {
  OnnxModelBuilder m(13);
  m.input("x", {1, 2, 4, 4}).initializer("grid", {1, 4, 4, 2}, F(32, 0.1f)).output("a").output("b").output("c");
  m.node("GridSample", {"x", "grid"}, {"up"}, "GridSample_12");
  m.node("Relu", {"up"}, {"a"}, "after_up");
  m.node("Det", {"x"}, {"b"});
  m.node("Relu", {"x"}, {"c"}, "fine");
  onnx::NodeProto& custom = m.node("Gelu", {"x"}, {"d"}, "custom");
  custom.set_domain("com.microsoft");
  auto r = import(m.bytes());
  ASSERT_FALSE(r->status.is_ok());
  EXPECT_EQ(r->report.problems, (std::vector<std::string>{
                                    "node 'GridSample_12' (op GridSample, opset 13): not supported",
                                    "node #2 (op Det, opset 13): not supported",
                                    "node 'custom' (op Gelu, opset 13): domain 'com.microsoft' is not supported",
                                }));
  EXPECT_EQ(r->report.nodes, 5u);
  EXPECT_EQ(r->report.imported, 1u);
  EXPECT_EQ(r->status.message().substr(0, r->status.message().find('\n')), "m.onnx: error: 3 problems; 1 of 5 nodes imported");
}

TEST(OnnxImport, MalformedFilesAreErrorsNamingThePart) {
  const std::string good = mlp(ramp(12), ramp(3), ramp(6), {0, 0}).bytes();
  // Cut anywhere: an error or (cut between fields) a smaller model; never a crash.
  size_t errors = 0;
  for (size_t n = 0; n < good.size(); ++n) errors += !import(good.substr(0, n))->status.is_ok();
  EXPECT_GT(errors, good.size() / 2);
  EXPECT_EQ(import(good.substr(0, good.size() - 3))->status.message(),
            "m.onnx: error: not an ONNX model (the protobuf message does not parse)");

  OnnxModelBuilder short_raw = mlp(ramp(12), ramp(3), ramp(6), {0, 0});
  short_raw.graph().mutable_initializer(0)->mutable_raw_data()->resize(40);
  EXPECT_EQ(import(short_raw.bytes())->status.message(),
            "m.onnx: error: initializer 'fc1.weight': raw_data holds 40 bytes, FLOAT[3,4] needs 48");

  OnnxModelBuilder negative = mlp(ramp(12), ramp(3), ramp(6), {0, 0});
  negative.graph().mutable_initializer(1)->set_dims(0, -3);
  EXPECT_EQ(import(negative.bytes())->status.message(),
            "m.onnx: error: initializer 'fc1.bias': dimension 0 is -3, must be ≥ 0");
  OnnxModelBuilder negative_input = mlp(ramp(12), ramp(3), ramp(6), {0, 0});
  negative_input.graph().mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_value(-4);
  EXPECT_EQ(import(negative_input.bytes())->status.message(),
            "m.onnx: error: graph input 'x': dimension 1 is -4, must be ≥ 0");

  OnnxModelBuilder huge = mlp(ramp(12), ramp(3), ramp(6), {0, 0});
  huge.graph().mutable_initializer(1)->set_dims(0, int64_t(1) << 40);
  EXPECT_EQ(import(huge.bytes())->status.message(), "m.onnx: error: initializer 'fc1.bias': more than 4294967296 elements");

  OnnxModelBuilder wrong_type = mlp(ramp(12), ramp(3), ramp(6), {0, 0});
  onnx::AttributeProto* axis = wrong_type.graph().mutable_node(3)->mutable_attribute(0);
  axis->set_type(onnx::AttributeProto::FLOAT);
  axis->set_f(1);
  auto r = import(wrong_type.bytes());
  EXPECT_EQ(r->report.problems,
            std::vector<std::string>{"node 'softmax' (op Softmax, opset 13): attribute 'axis' is FLOAT, expected INT"});

  OnnxModelBuilder old(6);
  old.input("x", {2}).output("y");
  old.node("Relu", {"x"}, {"y"});
  EXPECT_EQ(import(old.bytes())->report.problems,
            std::vector<std::string>{"the model's opset is 6; the importer reads opsets 7 to 17, and below that models "
                                     "of Elu, HardSigmoid, InstanceNormalization, Selu (since 6), GlobalAveragePool, "
                                     "GlobalMaxPool, Not, ReduceLogSum, Softplus and Softsign (since 1) alone"});
  // Those defined then as now import at their old opsets; Elu only from 6 (before, it had
  // consumed_inputs).
  OnnxModelBuilder old_elu(6);
  old_elu.input("x", {2}).output("y");
  old_elu.node("Elu", {"x"}, {"y"});
  EXPECT_TRUE(import(old_elu.bytes())->status.is_ok());
  OnnxModelBuilder older_elu(5);
  older_elu.input("x", {2}).output("y");
  older_elu.node("Elu", {"x"}, {"y"});
  EXPECT_FALSE(import(older_elu.bytes())->status.is_ok());
}

// An attribute the mapping never reads is reported, not silently ignored.
TEST(OnnxImport, AnUnknownAttributeIsAProblem) {
  OnnxModelBuilder m(13);
  m.input("x", {2, 3}).output("y");
  OnnxModelBuilder::attr(m.node("Relu", {"x"}, {"y"}, "r"), "fancy", int64_t(1));
  EXPECT_EQ(import(m.bytes())->report.problems,
            std::vector<std::string>{"node 'r' (op Relu, opset 13): attribute 'fancy' is not supported"});
}

// Integer graph inputs become i32 inputs (noted); integer constants reach the program narrowed.
TEST(OnnxImport, Int64InputsAreReadAsI32) {
  OnnxModelBuilder m(13);
  m.input("ids", {4}, onnx::TensorProto::INT64).output("y", onnx::TensorProto::INT64);
  OnnxModelBuilder::attr_tensor_i64(m.node("Constant", {}, {"shape"}), "value", {2}, {2, 2});
  m.node("Reshape", {"ids", "shape"}, {"y"});
  auto r = import(m.bytes());
  ASSERT_TRUE(r->status.is_ok()) << r->status.message();
  EXPECT_EQ(r->p.desc(r->p.find("ids")).type.str(), "i32[4]");
  EXPECT_EQ(r->p.desc(r->p.find("y")).type.str(), "i32[2,2]");
  EXPECT_EQ(r->report.notes, std::vector<std::string>{"graph input 'ids' is INT64; the program reads it as i32"});

  OnnxModelBuilder big(13);
  big.input("x", {2}, onnx::TensorProto::INT64).initializer_i64("k", {2}, {1, int64_t(1) << 40}).output("y", onnx::TensorProto::INT64);
  big.node("Concat", {"x", "k"}, {"y"}, "cat");
  OnnxModelBuilder::attr(big.graph().mutable_node(0)[0], "axis", int64_t(0));
  EXPECT_EQ(import(big.bytes())->report.problems,
            std::vector<std::string>{"node 'cat' (op Concat, opset 13): input 2: 'k' holds 1099511627776 at index 1, which i32 cannot hold"});
}

// Runs `p` on `inputs` (by name; f32 inputs, BOOL ones as 0 and 1 included); its tensors hold the
// results. False (with a failed expectation) when it does not prepare.
bool run_all(Program& p, const std::map<std::string, F>& inputs) {
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(p);
  EXPECT_TRUE(ex.is_ok()) << ex.status().message();
  if (!ex) return false;
  for (const auto& [n, v] : inputs) std::copy(v.begin(), v.end(), Context::of(p)->at(p.find(n)).f32());
  (*ex)->run();
  return true;
}

F values_f32(const Program& p, const std::string& name) {
  const Tensor& t = Context::of(p)->at(p.find(name));
  return F(t.f32(), t.f32() + t.numel());
}

std::vector<int32_t> values_i32(const Program& p, const std::string& name) {
  const Tensor& t = Context::of(p)->at(p.find(name));
  return std::vector<int32_t>(t.i32(), t.i32() + t.numel());
}

// BOOL values are f32 masks of 0 and 1: a BOOL graph input is an f32 input (noted), a BOOL
// initializer an f32 const, comparisons EQUAL, LESS, ...; Not, And, Or, Xor and the casts to and
// from BOOL give exactly 0 and 1, and Where selects by the mask. Checked against C++'s own
// comparisons and logic (NaN compares false, and is true as a bool).
TEST(OnnxImport, BoolTensorsAreF32ZerosAndOnes) {
  using B = OnnxModelBuilder;
  constexpr int32_t BOOL = onnx::TensorProto::BOOL, INT64 = onnx::TensorProto::INT64;
  B m(13);
  m.input("x", {2, 5}).input("y", {5}).input("m", {2, 5}, BOOL);
  m.initializer_bool("keep", {5}, {true, false, true, true, false});
  m.output("w").output("o", BOOL).output("nz", BOOL).output("ci", INT64).output("cf").output("eq", BOOL);
  m.node("Less", {"x", "y"}, {"lt"});
  m.node("GreaterOrEqual", {"x", "y"}, {"ge"});
  m.node("Equal", {"x", "y"}, {"eq"});
  m.node("And", {"lt", "m"}, {"a"});
  m.node("Not", {"m"}, {"nm"});
  m.node("Xor", {"ge", "keep"}, {"xo"});
  m.node("Or", {"a", "xo"}, {"o"});
  m.node("Where", {"o", "x", "y"}, {"w"});
  B::attr(m.node("Cast", {"x"}, {"nz"}), "to", int64_t(BOOL));
  B::attr(m.node("Cast", {"nm"}, {"ci"}), "to", int64_t(INT64));
  B::attr(m.node("Cast", {"a"}, {"cf"}), "to", int64_t(onnx::TensorProto::FLOAT));
  auto r = import(m.bytes());
  ASSERT_TRUE(r->status.is_ok()) << r->status.message();
  EXPECT_EQ(r->p.desc(r->p.find("m")).type.str(), "f32[2,5]");
  EXPECT_EQ(r->report.notes, std::vector<std::string>{"graph input 'm' is BOOL; the program reads it as f32 0 and 1"});
  const F x = {0.5f, -1, 0, NAN, 2, 0.25f, 3, -0.5f, 1, 0}, y = {0.5f, 0, 1, -1, 1}, mask = {1, 0, 1, 1, 0, 0, 1, 1, 0, 1};
  const bool keep[5] = {true, false, true, true, false};
  ASSERT_TRUE(run_all(r->p, {{"x", x}, {"y", y}, {"m", mask}}));
  F w, o, nz, cf, eq;
  std::vector<int32_t> ci;
  for (int i = 0; i < 10; ++i) {
    const float xv = x[i], yv = y[i % 5];
    const bool mv = mask[i] != 0, a = xv < yv && mv, xo = (xv >= yv) != keep[i % 5], or_ = a || xo;
    w.push_back(or_ ? xv : yv);
    o.push_back(or_);
    nz.push_back(static_cast<bool>(xv));
    ci.push_back(!mv);
    cf.push_back(a);
    eq.push_back(xv == yv);
  }
  const F got_w = values_f32(r->p, "w");
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(got_w[i] == w[i] || (std::isnan(got_w[i]) && std::isnan(w[i]))) << i;
  EXPECT_EQ(values_f32(r->p, "o"), o);
  EXPECT_EQ(values_f32(r->p, "nz"), nz);
  EXPECT_EQ(values_i32(r->p, "ci"), ci);
  EXPECT_EQ(values_f32(r->p, "cf"), cf);
  EXPECT_EQ(values_f32(r->p, "eq"), eq);
}

// BOOL-valued ops on values known at import time are computed then (integers compared in int64);
// integers compared at run time are CAST to f32 first.
TEST(OnnxImport, BoolOpsOnKnownValuesAreFolded) {
  constexpr int32_t BOOL = onnx::TensorProto::BOOL, INT64 = onnx::TensorProto::INT64;
  OnnxModelBuilder m(13);
  m.initializer_i64("a", {3}, {1, int64_t(1) << 40, 7}).initializer_i64("b", {1}, {int64_t(1) << 40});
  m.initializer_i64("c", {1}, {-1}).output("e", BOOL).output("y", INT64);
  m.node("Equal", {"a", "b"}, {"e"});
  m.node("Not", {"e"}, {"ne"});
  m.node("Where", {"ne", "a", "c"}, {"y"});  // 1 << 40 is compared at import time, never narrowed
  auto r = import(m.bytes());
  ASSERT_TRUE(r->status.is_ok()) << r->status.message();
  EXPECT_EQ(mnemonics(r->p), (std::vector<std::string>{"COPY", "COPY"}));
  ASSERT_TRUE(run_all(r->p, {}));
  EXPECT_EQ(values_f32(r->p, "e"), (F{0, 1, 0}));
  EXPECT_EQ(values_i32(r->p, "y"), (std::vector<int32_t>{1, -1, 7}));

  OnnxModelBuilder run_time(13);
  run_time.input("ids", {3}, INT64).initializer_i64("k", {3}, {1, 2, 3}).output("lt", BOOL);
  run_time.node("Less", {"ids", "k"}, {"lt"}, "lt");
  auto rt = import(run_time.bytes());
  ASSERT_TRUE(rt->status.is_ok()) << rt->status.message();
  EXPECT_EQ(mnemonics(rt->p), (std::vector<std::string>{"CAST", "CAST", "LESS"}));
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(rt->p);
  ASSERT_TRUE(ex.is_ok()) << ex.status().message();
  const int32_t ids[3] = {0, 2, 5};
  std::copy(ids, ids + 3, Context::of(rt->p)->at(rt->p.find("ids")).i32());
  (*ex)->run();
  EXPECT_EQ(values_f32(rt->p, "lt"), (F{1, 0, 0}));
}

// Cast between FLOAT and the integers at run time is CAST: toward zero, saturating what i32 does
// not hold (NaN gives 0), and back to FLOAT rounding to nearest; UINT8 and INT8 saturate; the
// other narrow integers refuse.
TEST(OnnxImport, CastBetweenFloatAndIntegersAtRunTime) {
  using B = OnnxModelBuilder;
  constexpr int32_t INT64 = onnx::TensorProto::INT64, INT32 = onnx::TensorProto::INT32;
  B m(13);
  m.input("x", {6}).output("ci", INT64).output("c32", INT32).output("cf");
  B::attr(m.node("Cast", {"x"}, {"ci"}), "to", int64_t(INT64));
  B::attr(m.node("Cast", {"x"}, {"c32"}), "to", int64_t(INT32));
  B::attr(m.node("Cast", {"ci"}, {"cf"}), "to", int64_t(onnx::TensorProto::FLOAT));
  auto r = import(m.bytes());
  ASSERT_TRUE(r->status.is_ok()) << r->status.message();
  EXPECT_EQ(mnemonics(r->p), (std::vector<std::string>{"CAST", "CAST", "CAST"}));
  ASSERT_TRUE(run_all(r->p, {{"x", F{2.7f, -2.7f, NAN, 3e9f, -0.5f, -3e9f}}}));
  const std::vector<int32_t> want = {2, -2, 0, INT32_MAX, 0, INT32_MIN};
  EXPECT_EQ(values_i32(r->p, "ci"), want);
  EXPECT_EQ(values_i32(r->p, "c32"), want);
  EXPECT_EQ(values_f32(r->p, "cf"), (F{2, -2, 0, 2147483648.f, 0, -2147483648.f}));

  // FLOAT to UINT8 and INT8: truncated, then saturated into an 8-bit tensor.
  B bytes(13);
  bytes.input("x", {4}).output("u", onnx::TensorProto::UINT8).output("i", onnx::TensorProto::INT8);
  B::attr(bytes.node("Cast", {"x"}, {"u"}), "to", int64_t(onnx::TensorProto::UINT8));
  B::attr(bytes.node("Cast", {"x"}, {"i"}), "to", int64_t(onnx::TensorProto::INT8));
  auto b8 = import(bytes.bytes());
  ASSERT_TRUE(b8->status.is_ok()) << b8->status.message();
  ASSERT_TRUE(run_all(b8->p, {{"x", F{300.7f, -2.7f, 7.9f, -200.f}}}));
  const uint8_t* u = static_cast<const uint8_t*>(Context::of(b8->p)->at(b8->p.find("u")).storage());
  const int8_t* i8 = static_cast<const int8_t*>(Context::of(b8->p)->at(b8->p.find("i")).storage());
  EXPECT_EQ(std::vector<int>(u, u + 4), (std::vector<int>{255, 0, 7, 0}));
  EXPECT_EQ(std::vector<int>(i8, i8 + 4), (std::vector<int>{127, -2, 7, -128}));

  B narrow(13);
  narrow.input("x", {2}).output("u", onnx::TensorProto::INT16);
  B::attr(narrow.node("Cast", {"x"}, {"u"}, "c"), "to", int64_t(onnx::TensorProto::INT16));
  EXPECT_EQ(import(narrow.bytes())->report.problems,
            std::vector<std::string>{"node 'c' (op Cast, opset 13): a cast from FLOAT to INT16 at run time: CAST converts "
                                     "FLOAT to INT32, INT64, UINT8 and INT8 and the integers to FLOAT only"});
}

// ArgMax and ArgMin are ARGMAX and ARGMIN with ONNX's defaults (axis 0, keepdims 1) written out;
// select_last_index=1 reverses the axis with GATHER and maps j back to n − 1 − j. Positions are
// i32 (ONNX's INT64), checked against a loop, on rows with ties.
TEST(OnnxImport, ArgMaxAndArgMinAreI32Positions) {
  using B = OnnxModelBuilder;
  B m(13);
  m.input("x", {3, 4}).output("a").output("b").output("c").output("d");
  B::attr(m.node("ArgMax", {"x"}, {"a"}), "axis", int64_t(1));
  onnx::NodeProto& last = m.node("ArgMax", {"x"}, {"b"});
  B::attr(last, "axis", int64_t(-1));
  B::attr(last, "keepdims", int64_t(0));
  B::attr(last, "select_last_index", int64_t(1));
  m.node("ArgMin", {"x"}, {"c"});
  onnx::NodeProto& min_last = m.node("ArgMin", {"x"}, {"d"});
  B::attr(min_last, "keepdims", int64_t(0));
  B::attr(min_last, "select_last_index", int64_t(1));
  auto r = import(m.bytes());
  ASSERT_TRUE(r->status.is_ok()) << r->status.message();
  const F x = {1, 3, 3, 0, -2, -2, 5, 5, 0.5f, -1, 0.5f, -1};
  ASSERT_TRUE(run_all(r->p, {{"x", x}}));
  // The position of the first (or last) maximum (or minimum) along axis 1 (row) or 0 (column).
  auto arg = [&](int axis, bool max, bool last) {
    std::vector<int32_t> v;
    const int outer = axis == 1 ? 3 : 4, len = axis == 1 ? 4 : 3;
    for (int o = 0; o < outer; ++o) {
      int best = 0;
      for (int j = 1; j < len; ++j) {
        const float a = axis == 1 ? x[o * 4 + j] : x[j * 4 + o], b = axis == 1 ? x[o * 4 + best] : x[best * 4 + o];
        if (max ? (a > b || (last && a == b)) : (a < b || (last && a == b))) best = j;
      }
      v.push_back(best);
    }
    return v;
  };
  EXPECT_EQ(r->p.desc(r->p.find("a")).type.str(), "i32[3,1]");
  EXPECT_EQ(r->p.desc(r->p.find("b")).type.str(), "i32[3]");
  EXPECT_EQ(r->p.desc(r->p.find("c")).type.str(), "i32[1,4]");
  EXPECT_EQ(r->p.desc(r->p.find("d")).type.str(), "i32[4]");
  EXPECT_EQ(values_i32(r->p, "a"), arg(1, true, false));
  EXPECT_EQ(values_i32(r->p, "b"), arg(1, true, true));
  EXPECT_EQ(values_i32(r->p, "c"), arg(0, false, false));
  EXPECT_EQ(values_i32(r->p, "d"), arg(0, false, true));
}

// A graph output that is a graph input, or an initializer, is a copy under its own name.
TEST(OnnxImport, InputsAndInitializersAsOutputsAreCopies) {
  OnnxModelBuilder m(13);
  m.input("x", {2}).initializer("w", {3}, {1, 2, 3}).output("x").output("w");
  auto r = import(m.bytes());
  ASSERT_TRUE(r->status.is_ok()) << r->status.message();
  EXPECT_EQ(mnemonics(r->p), (std::vector<std::string>{"COPY", "COPY"}));
  EXPECT_EQ(r->report.notes, std::vector<std::string>{"graph output 'x' is %x.out0 (an input has its name)"});
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(r->p);
  ASSERT_TRUE(ex.is_ok()) << ex.status().message();
  float* x = r->ctx.at(r->p.find("x")).f32();
  x[0] = 5;
  x[1] = -6;
  (*ex)->run();
  const float* xo = r->ctx.at(r->p.find("x.out0")).f32();
  const float* w = r->ctx.at(r->p.find("w")).f32();
  EXPECT_EQ(F(xo, xo + 2), (F{5, -6}));
  EXPECT_EQ(F(w, w + 3), (F{1, 2, 3}));
}

// The imported program saves as a model file whose weights load back and compute the same.
TEST(OnnxImport, SavesAndLoadsAsAModelFile) {
  const F x = ramp(8, 0.5f, -1);
  auto m = import(mlp(ramp(12), ramp(3, 0.2f), ramp(6, 0.3f, -0.5f), {0.1f, -0.2f}).bytes());
  ASSERT_TRUE(m->status.is_ok()) << m->status.message();
  const F want = run(m->p, {{"x", x}}, "y");
  const std::string image = model_encode(m->p);
  Context ctx;
  Program q(ctx);
  Status s = model_decode(image, "m.nnm", &q);
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(run(q, {{"x", x}}, "y"), want);
}

// An imported model fine-tunes like a recorded one: a loss on its logits (the second Gemm's
// output), make_trainable, and training steps lower the loss by changing the imported weights.
TEST(OnnxImport, AnImportedModelFineTunes) {
  auto m = import(mlp(ramp(12), ramp(3, 0.2f), ramp(6, 0.3f, -0.5f), {0.1f, -0.2f}).bytes());
  ASSERT_TRUE(m->status.is_ok()) << m->status.message();
  Program& p = m->p;
  Graph g(p);
  g.output(mse(Var(&g, p.find("z")), g.constant("target", {2, 2}, {1, -1, -1, 1})), "loss");
  ASSERT_TRUE(g.status().is_ok()) << g.status().message();
  Status s = make_trainable(p, p.find("loss"), sgd(0.5));
  ASSERT_TRUE(s.is_ok()) << s.message();
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(p);
  ASSERT_TRUE(ex.is_ok()) << ex.status().message();
  const F x = ramp(8, 0.5f, -1);
  std::copy(x.begin(), x.end(), m->ctx.at(p.find("x")).f32());
  const Tensor& w = m->ctx.at(p.find("fc1.weight"));
  const F before(w.f32(), w.f32() + w.numel());
  (*ex)->run();
  const float first = m->ctx.at(p.find("loss")).f32()[0];
  for (int k = 0; k < 20; ++k) (*ex)->train_step();
  (*ex)->run();
  EXPECT_LT(m->ctx.at(p.find("loss")).f32()[0], 0.5f * first);
  EXPECT_NE(F(w.f32(), w.f32() + w.numel()), before);
}

TEST(OnnxImport, TheOpTableIsSortedAndLookupsFindEveryEntry) {
  const std::vector<std::string> ops = onnx_supported_ops();
  EXPECT_TRUE(std::is_sorted(ops.begin(), ops.end()));
  EXPECT_EQ(std::adjacent_find(ops.begin(), ops.end()), ops.end());
  for (const char* op : {"Conv", "Gemm", "Relu", "Reshape", "Shape"})
    EXPECT_NE(std::find(ops.begin(), ops.end(), op), ops.end()) << op;
}

}  // namespace
}  // namespace nnasm

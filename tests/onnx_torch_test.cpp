// Models exported by PyTorch (torch.onnx.export; tests/onnx/torch_exports.py wrote them into
// tests/golden/onnx/ with an input and PyTorch's output for it): each imports completely and its
// program computes what PyTorch computed. The exports bring what hand-built models do not: the
// exporter's names (input.1, onnx::Gemm_5, /layer/Op_output_0), its shape subgraphs, folded batch
// norms, attention's reshapes, a symbolic batch dimension.
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "engine/executor.h"
#include "engine/gradcheck.h"
#include "engine/optimizer.h"
#include "serialize/model_file.h"
#include "serialize/npy.h"
#include "serialize/onnx/onnx_import.h"
#include "shell/shell.h"

namespace nnasm {
namespace {

class OnnxTorchExport : public ::testing::TestWithParam<const char*> {};

TEST_P(OnnxTorchExport, ImportsAndComputesWhatPyTorchDid) {
  const std::string base = std::string("tests/golden/onnx/") + GetParam();
  std::string bytes;
  NpyArray x, want;
  Status s = read_file_limited(base + ".onnx", 1 << 20, &bytes);
  if (s) s = npy_read(base + "_x.npy", &x);
  if (s) s = npy_read(base + "_y.npy", &want);
  ASSERT_TRUE(s.is_ok()) << s.message() << " (run from the repository root)";
  OnnxImportOptions o;
  const Shape& xs = x.type.shape;
  o.shapes["input.1"] = std::vector<int64_t>(xs.dims.begin(), xs.dims.begin() + xs.rank);  // a symbolic batch for some
  Context ctx;
  Program p(ctx);
  ImportReport report;
  OnnxGraphInfo info;
  s = onnx_import(bytes, base + ".onnx", o, &p, &report, &info);
  ASSERT_TRUE(s.is_ok()) << s.message() << "\n" << (report.problems.empty() ? "" : report.problems[0]);
  EXPECT_EQ(report.imported, report.nodes);
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(p);
  ASSERT_TRUE(ex.is_ok()) << ex.status().message();
  const Tensor& in = ctx.at(p.find(info.inputs.at(0).second));
  ASSERT_EQ(in.numel(), static_cast<int64_t>(x.f32.size()));
  std::copy(x.f32.begin(), x.f32.end(), in.f32());
  (*ex)->run();
  const Tensor& y = ctx.at(p.find(info.outputs.at(0).second));
  ASSERT_EQ(y.desc.type, want.type);
  for (int64_t i = 0; i < y.numel(); ++i)
    EXPECT_NEAR(y.f32()[i], want.f32[i], 1e-5 + 1e-4 * std::fabs(want.f32[i])) << "element " << i;
}

INSTANTIATE_TEST_SUITE_P(Onnx, OnnxTorchExport,
                         ::testing::Values("mlp", "lenet5", "resblock", "small_cnn", "encoder", "res_up", "ceil_pool",
                                           "recurrent"));

// ceil_pool (tests/onnx/torch_exports.py): its pools keep ceil_mode's partial windows as the
// instructions' own ceil_mode, and its fresh batch norm, whose zero running mean is its zero β
// (the exporter merged the equal initializers), is a BATCHNORM2D reading one tensor twice, which
// inference runs (the test above) and training refuses by name.
TEST(OnnxTorchExport, CeilModePoolsAndASharedInitializerImport) {
  const std::string path = "tests/golden/onnx/ceil_pool";
  std::string bytes;
  Status s = read_file_limited(path + ".onnx", 1 << 20, &bytes);
  ASSERT_TRUE(s.is_ok()) << s.message() << " (run from the repository root)";
  Context ctx;
  Program p(ctx);
  ImportReport report;
  s = onnx_import(bytes, path + ".onnx", {}, &p, &report);
  ASSERT_TRUE(s.is_ok()) << s.message() << "\n" << (report.problems.empty() ? "" : report.problems[0]);
  int ceil_pools = 0, batchnorms = 0;
  for (const Instruction& ins : p.code()) {
    if (ins.op == Opcode::MAXPOOL2D) ceil_pools += ins.i(NNASM_IMM(MAXPOOL2D, ceil_mode)) != 0;
    if (ins.op == Opcode::AVGPOOL2D) ceil_pools += ins.i(NNASM_IMM(AVGPOOL2D, ceil_mode)) != 0;
    if (ins.op != Opcode::BATCHNORM2D) continue;
    ++batchnorms;
    EXPECT_EQ(ins.in[2], ins.in[3]) << "β and the running mean: one initializer";
  }
  EXPECT_EQ(ceil_pools, 5);
  EXPECT_EQ(batchnorms, 1);
  p.set_training(true);
  s = p.finish();
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("but it is also input"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("give it a state tensor of its own to train"), std::string::npos) << s.message();
}

// res_up ends in a ConvTranspose (CONV2D_BWD_DATA): its weight and, through its data input, the
// convolutions before it get gradients that match finite differences, and SGD lowers a loss.
TEST(OnnxTorchExport, AnImportedTransposedConvolutionFineTunes) {
  const std::string path = "tests/golden/onnx/res_up";
  std::string bytes;
  NpyArray x;
  Status s = read_file_limited(path + ".onnx", 1 << 20, &bytes);
  if (s) s = npy_read(path + "_x.npy", &x);
  ASSERT_TRUE(s.is_ok()) << s.message() << " (run from the repository root)";
  OnnxImportOptions o;
  o.shapes["input.1"] = {1, 4, 6, 6};
  Context ctx;
  Program p(ctx);
  ImportReport report;
  OnnxGraphInfo info;
  s = onnx_import(bytes, path + ".onnx", o, &p, &report, &info);
  ASSERT_TRUE(s.is_ok()) << s.message();
  const TensorId in = p.find(info.inputs.at(0).second), out = p.find(info.outputs.at(0).second);
  const TensorId up = p.find("up.weight");
  ASSERT_NE(up, NO_TENSOR);
  TensorId first_conv = NO_TENSOR;  // the weight of the first CONV2D, upstream of the ConvTranspose
  for (const Instruction& ins : p.code())
    if (ins.op == Opcode::CONV2D && first_conv == NO_TENSOR) first_conv = ins.in[1];
  ASSERT_NE(first_conv, NO_TENSOR);

  GradCheckOptions g;
  g.fill = [&](Executor& ex) { std::copy(x.f32.begin(), x.f32.end(), ex.tensor(p.desc(in).name)->f32()); };
  Result<GradCheckReport> r = check_gradients(p, out, {up, first_conv}, g);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_TRUE(r->ok) << r->worst;
  EXPECT_GT(r->checked, 0);

  Graph graph(p);
  graph.output(mse(Var(&graph, out), graph.constant("target", {1, 2}, {0.9, 0.1})), "loss");
  ASSERT_TRUE(graph.status().is_ok()) << graph.status().message();
  s = make_trainable(p, p.find("loss"), sgd(2.0));
  ASSERT_TRUE(s.is_ok()) << s.message();
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(p);
  ASSERT_TRUE(ex.is_ok()) << ex.status().message();
  std::copy(x.f32.begin(), x.f32.end(), ctx.at(in).f32());
  const Tensor& w = ctx.at(up);
  const std::vector<float> before(w.f32(), w.f32() + w.numel());
  (*ex)->run();
  const float first = ctx.at(p.find("loss")).f32()[0];
  for (int k = 0; k < 20; ++k) (*ex)->train_step();
  (*ex)->run();
  EXPECT_LT(ctx.at(p.find("loss")).f32()[0], 0.5f * first);
  EXPECT_NE(std::vector<float>(w.f32(), w.f32() + w.numel()), before);
}

}  // namespace
}  // namespace nnasm

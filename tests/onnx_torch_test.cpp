// Models exported by PyTorch (torch.onnx.export; tests/onnx/torch_exports.py wrote them into
// tests/golden/onnx/ with an input and PyTorch's output for it): each imports completely and its
// program computes what PyTorch computed. The exports bring what hand-built models do not: the
// exporter's names (input.1, onnx::Gemm_5, /layer/Op_output_0), its shape subgraphs, folded batch
// norms, attention's reshapes, a symbolic batch dimension.
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "engine/executor.h"
#include "serialize/model_file.h"
#include "serialize/npy.h"
#include "serialize/onnx/onnx_import.h"

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

INSTANTIATE_TEST_SUITE_P(Onnx, OnnxTorchExport, ::testing::Values("mlp", "lenet5", "resblock", "small_cnn", "encoder", "res_up"));

}  // namespace
}  // namespace nnasm

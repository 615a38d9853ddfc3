// The path from training to shipping through the `nnasm` tool: `export --inference` of a trained
// model, `run --expect` against a reference array, `bench --json` and `--isa`; and the tool's
// answers to their misuse.
#include <cstring>

#include "engine/executor.h"
#include "engine/optimizer.h"
#include "jit/cpu.h"
#include "serialize/model_file.h"
#include "shell/shell.h"
#include "tests/cli_fixture.h"

namespace nnasm {
namespace {

constexpr int64_t kBatch = 2, kIn = 3, kClasses = 4;

class CliExportTest : public CliTest {
 protected:
  // A softmax classifier trained by a few Adam steps, saved as trained.nnm; x.npy holds an input.
  void SetUp() override {
    CliTest::SetUp();
    Context ctx(7);
    Program p(ctx);
    Graph g(p);
    Var x = g.input("x", {kBatch, kIn});
    Var labels = g.input("labels", {kBatch}, DType::I32);
    Var logits = linear(relu(linear(x, 5)), kClasses);
    g.output(softmax(logits), "probs");
    g.output(softmax_ce(logits, labels), "loss");
    ASSERT_TRUE(g.status()) << g.status().message();
    ASSERT_TRUE(make_trainable(p, p.find("loss"), adam(0.05)));
    auto ex = std::move(Executor::prepare(p).value());
    for (int s = 0; s < 3; ++s) {
      for (int i = 0; i < kBatch * kIn; ++i) ex->tensor("x")->f32()[i] = 0.3f * i - 0.5f * s;
      for (int i = 0; i < kBatch; ++i) ex->tensor("labels")->i32()[i] = (i + s) % kClasses;
      ex->train_step();
    }
    ASSERT_TRUE(model_save(p, path("trained.nnm")));
    for (int i = 0; i < kBatch * kIn; ++i) x_[i] = 0.25f * i - 0.6f;
    put_npy("x.npy", {DType::F32, Shape{kBatch, kIn}}, x_);
  }
  float x_[kBatch * kIn];
};

TEST_F(CliExportTest, ExportedModelRunsOnTheRealInputsAlone) {
  ToolResult r = tool({"export", "--inference", path("trained.nnm"), "-o", path("infer.nnm")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("with output %probs, input %x"), std::string::npos) << r.err;
  r = tool({"dump", path("infer.nnm")});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* gone : {"labels", "loss", "backward:", "update:", "state", "mode training"})
    EXPECT_EQ(r.out.find(gone), std::string::npos) << gone << " in\n" << r.out;

  // The trained model's own forward outputs (labels given, ignored by probs) are the reference.
  const int32_t labels[kBatch] = {0, 1};
  put_npy("labels.npy", {DType::I32, Shape{kBatch}}, labels);
  r = tool({"run", path("trained.nnm"), "--in", "x=" + path("x.npy"), "--in", "labels=" + path("labels.npy"), "--out",
            "probs=" + path("ref.npy")});
  ASSERT_EQ(r.code, 0) << r.err;
  r = tool({"run", path("infer.nnm"), "--in", "x=" + path("x.npy"), "--expect", "probs=" + path("ref.npy"), "--atol", "0",
            "--rtol", "0"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("%probs: matches " + path("ref.npy") + " (8 elements, largest difference 0)", 0), 0u) << r.out;
}

// --batch 1: the shipped model runs one row, the trained model's first row of probabilities.
TEST_F(CliExportTest, ExportAtBatchOneRunsTheFirstRow) {
  ToolResult r = tool({"export", "--inference", "--batch", "1", path("trained.nnm"), "-o", path("one.nnm")});
  ASSERT_EQ(r.code, 0) << r.err;
  r = tool({"run", path("trained.nnm"), "--in", "x=" + path("x.npy"), "--out", "probs=" + path("ref.npy"), "--in",
            "labels=" + put_npy("labels.npy", {DType::I32, Shape{kBatch}}, std::vector<int32_t>(kBatch, 0).data())});
  ASSERT_EQ(r.code, 0) << r.err;
  NpyArray ref;
  ASSERT_TRUE(npy_read(path("ref.npy"), &ref).is_ok());
  put_npy("ref1.npy", {DType::F32, Shape{1, kClasses}}, ref.f32.data());
  put_npy("x1.npy", {DType::F32, Shape{1, kIn}}, x_);
  // Generated GEMMs may round a row differently at another number of rows (docs/design.md).
  r = tool({"run", path("one.nnm"), "--in", "x=" + path("x1.npy"), "--expect", "probs=" + path("ref1.npy"), "--atol",
            "1e-6", "--rtol", "1e-5"});
  EXPECT_EQ(r.code, 0) << r.err << r.out;
}

TEST_F(CliExportTest, ExportMisuseSaysWhatIsWrong) {
  ToolResult r = tool({"export", "--inference", "--output", "nope", path("trained.nnm"), "-o", path("i.nnm")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--output nope: no tensor named 'nope' (the outputs: %probs, %loss)"), std::string::npos) << r.err;
  r = tool({"export", path("trained.nnm"), "-o", path("i.nnm")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--inference"), std::string::npos) << r.err;
  r = tool({"export", "--inference", "--batch", "0", path("trained.nnm"), "-o", path("i.nnm")});
  EXPECT_EQ(r.code, 1);
  ASSERT_EQ(tool({"export", "--inference", path("trained.nnm"), "-o", path("i.nnm")}).code, 0);
  r = tool({"export", "--inference", path("i.nnm"), "-o", path("j.nnm")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("already an inference model"), std::string::npos) << r.err;
}

TEST_F(CliExportTest, ExpectReportsTheWorstElement) {
  ASSERT_EQ(tool({"export", "--inference", path("trained.nnm"), "-o", path("i.nnm")}).code, 0);
  ToolResult r = tool({"run", path("i.nnm"), "--in", "x=" + path("x.npy"), "--out", "probs=" + path("ref.npy")});
  ASSERT_EQ(r.code, 0) << r.err;
  NpyArray ref;
  ASSERT_TRUE(npy_read(path("ref.npy"), &ref));
  ref.f32[1 * kClasses + 2] += 0.01f;  // element [1,2]
  ref.f32[0] += 1e-6f;                 // within the default tolerance
  put_npy("off.npy", ref.type, ref.f32.data());
  r = tool({"run", path("i.nnm"), "--in", "x=" + path("x.npy"), "--expect", "probs=" + path("off.npy")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--expect probs: 1 of 8 elements differ"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("worst at [1,2]: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(difference 0.01)"), std::string::npos) << r.err;
  // A looser tolerance accepts it.
  r = tool({"run", path("i.nnm"), "--in", "x=" + path("x.npy"), "--expect", "probs=" + path("off.npy"), "--atol", "0.02"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("matches"), std::string::npos) << r.out;

  put_npy("short.npy", {DType::F32, Shape{kClasses}}, ref.f32.data());
  r = tool({"run", path("i.nnm"), "--in", "x=" + path("x.npy"), "--expect", "probs=" + path("short.npy")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("holds f32[4], the output %probs is f32[2,4]"), std::string::npos) << r.err;
  r = tool({"run", path("i.nnm"), "--in", "x=" + path("x.npy"), "--expect", "nope=" + path("ref.npy")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--expect nope: "), std::string::npos) << r.err;
  r = tool({"run", path("i.nnm"), "--in", "x=" + path("x.npy"), "--expect", "probs=" + path("ref.npy"), "--atol", "-1"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("tolerances must be >= 0"), std::string::npos) << r.err;
}

TEST_F(CliExportTest, BenchJsonAndIsa) {
  ToolResult r = tool({"bench", path("trained.nnm"), "--runs", "20", "--json", "--isa", "ref"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("{\"model\": \"" + path("trained.nnm") + "\", \"mode\": \"forward\", \"isa\": \"ref\", ", 0), 0u)
      << r.out;
  for (const char* key : {"\"threads\": ", "\"batch\": 2, ", "\"runs\": 20, ", "\"median_us\": ", "\"min_us\": ",
                          "\"mean_us\": "})
    EXPECT_NE(r.out.find(key), std::string::npos) << key << " in " << r.out;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "one line: " << r.out;

  r = tool({"bench", path("trained.nnm"), "--json", "--profile"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--json and --profile"), std::string::npos) << r.err;
  r = tool({"run", path("trained.nnm"), "--isa", "avx3"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--isa avx3: expected avx512, avx2 or ref"), std::string::npos) << r.err;
  if (cpu_info().best < Isa::AVX512) {
    r = tool({"bench", path("trained.nnm"), "--isa", "avx512"});
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("this CPU's best level is"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace nnasm

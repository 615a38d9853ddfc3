// `nnasm quantize`: the report and sizes it prints, the model it writes (which `nnasm run` takes),
// and its answers to misuse.
#include <sys/stat.h>

#include <cmath>

#include "engine/executor.h"
#include "engine/optimizer.h"
#include "serialize/model_file.h"
#include "shell/shell.h"
#include "tests/cli_fixture.h"

namespace nnasm {
namespace {

constexpr int64_t kBatch = 3, kIn = 40, kHidden = 64, kClasses = 5;

long file_size(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 ? static_cast<long>(st.st_size) : -1;
}

class CliQuantizeTest : public CliTest {
 protected:
  // model.nnm: an inference MLP (fc1 relu, fc2, softmax); x.npy an input, calib.npy 10 rows.
  void SetUp() override {
    CliTest::SetUp();
    Context ctx(11);
    Program p(ctx);
    Graph g(p);
    Var x = g.input("x", {kBatch, kIn});
    g.output(softmax(linear(relu(linear(x, kHidden, {"fc1"})), kClasses, {"fc2"})), "probs");
    ASSERT_TRUE(g.status()) << g.status().message();
    ASSERT_TRUE(model_save(p, path("model.nnm")));
    std::vector<float> v(10 * kIn);
    for (size_t i = 0; i < v.size(); ++i) v[i] = std::cos(0.21f * static_cast<float>(i));
    put_npy("x.npy", {DType::F32, Shape{kBatch, kIn}}, v.data());
    put_npy("calib.npy", {DType::F32, Shape{10, kIn}}, v.data());
  }
};

TEST_F(CliQuantizeTest, Bf16ModelIsSmallerAndRunsCloseToF32) {
  ToolResult r = tool({"quantize", path("model.nnm"), "--to", "bf16", "--calibrate", "x=" + path("calib.npy"), "-o",
                       path("q.nnm")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("LINEAR %"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("@fc1.w f32[40,64]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-> bf16  error "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("errors measured on 10 calibration rows"), std::string::npos) << r.out;
  const long before = file_size(path("model.nnm")), after = file_size(path("q.nnm"));
  EXPECT_NE(r.out.find(fmt::format("model file: {} bytes -> {} bytes", before, after)), std::string::npos) << r.out;
  EXPECT_LT(after, before - (kIn * kHidden + kHidden * kClasses) * 2 + 64);

  r = tool({"dump", path("q.nnm")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("param  @fc1.w.bf16 : bf16[40,64]"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("@fc1.w :"), std::string::npos) << r.out;

  r = tool({"run", path("model.nnm"), "--in", "x=" + path("x.npy"), "--out", "probs=" + path("ref.npy")});
  ASSERT_EQ(r.code, 0) << r.err;
  r = tool({"run", path("q.nnm"), "--in", "x=" + path("x.npy"), "--expect", "probs=" + path("ref.npy"), "--atol",
            "0.01", "--rtol", "0.02"});
  EXPECT_EQ(r.code, 0) << r.err << r.out;
  r = tool({"run", path("q.nnm"), "--in", "x=" + path("x.npy"), "--expect", "probs=" + path("ref.npy"), "--atol", "0",
            "--rtol", "0"});
  EXPECT_EQ(r.code, 1) << "bf16 computed exactly the f32 probabilities: " << r.out;
}

TEST_F(CliQuantizeTest, KeepAndMaxErrorLeaveLayersF32) {
  ToolResult r = tool({"quantize", path("model.nnm"), "--to", "bf16", "--keep", "fc2.w", "-o", path("q.nnm")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("-> f32   (kept by --keep)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("synthetic rows"), std::string::npos) << r.out;
  r = tool({"dump", path("q.nnm")});
  EXPECT_NE(r.out.find("@fc2.w "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("@fc1.w.bf16 "), std::string::npos) << r.out;

  r = tool({"quantize", path("model.nnm"), "--to", "bf16", "--max-error", "0", "-o", path("q0.nnm")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("-> bf16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(above the bound 0)"), std::string::npos) << r.out;
}

TEST_F(CliQuantizeTest, MisuseSaysWhatIsWrongAndWritesNothing) {
  put_npy("i.npy", {DType::I32, Shape{2, kIn}}, std::vector<int32_t>(2 * kIn, 1).data());
  put_npy("wide.npy", {DType::F32, Shape{2, kIn + 1}}, std::vector<float>(2 * (kIn + 1), 1).data());
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::string out = path("never.nnm");
  const Case cases[] = {
      {{"--to", "fp8"}, "--to fp8: expected bf16 or int8"},
      {{"--to", "bf16", "--calibrate", "y=" + path("calib.npy")}, "--calibrate y: the model has no input named 'y'"},
      {{"--to", "bf16", "--calibrate", "x=" + path("i.npy")}, "the values are i32[2,40], but %x is f32[3,40]"},
      {{"--to", "bf16", "--calibrate", "x=" + path("wide.npy")}, "the values are f32[2,41]"},
      {{"--to", "bf16", "--calibrate", "x=" + path("missing.npy")}, "--calibrate x: "},
      {{"--to", "bf16", "--calibrate", "x"}, "--calibrate 'x': expected NAME=PATH.npy"},
      {{"--to", "bf16", "--keep", "nope"}, "--keep nope: no layer has a weight or output named 'nope'"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"quantize", path("model.nnm")};
    args.insert(args.end(), c.args.begin(), c.args.end());
    args.insert(args.end(), {"-o", out});
    ToolResult r = tool(args);
    EXPECT_EQ(r.code, 1) << c.message;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
    EXPECT_EQ(file_size(out), -1) << c.message;
  }
  ToolResult r = tool({"quantize", path("model.nnm"), "-o", out});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--to"), std::string::npos) << r.err;
}

TEST_F(CliQuantizeTest, RefusesATrainedModelUntilExported) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {kBatch, kIn});
  Var labels = g.input("labels", {kBatch}, DType::I32);
  Var logits = linear(x, kClasses);
  g.output(softmax(logits), "probs");
  g.output(softmax_ce(logits, labels), "loss");
  ASSERT_TRUE(g.status());
  ASSERT_TRUE(make_trainable(p, p.find("loss"), sgd(0.1)));
  ASSERT_TRUE(model_save(p, path("trained.nnm")));
  ToolResult r = tool({"quantize", path("trained.nnm"), "--to", "bf16", "-o", path("q.nnm")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("nnasm: error: " + path("trained.nnm") + ": a training program"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("nnasm export --inference"), std::string::npos) << r.err;
  ASSERT_EQ(tool({"export", "--inference", path("trained.nnm"), "-o", path("i.nnm")}).code, 0);
  r = tool({"quantize", path("i.nnm"), "--to", "bf16", "-o", path("q.nnm")});
  EXPECT_EQ(r.code, 0) << r.err;
}

}  // namespace
}  // namespace nnasm

// The model-file workflow through the `nnasm` tool, as the user of issue 7 runs it: dump a trained
// model to a listing, edit it (swap an activation), build it back with the weights, run, bench and
// describe it; and the tool's answers to mistakes (a changed weight shape, a corrupt file).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/executor.h"
#include "serialize/listing.h"
#include "serialize/model_file.h"
#include "shell/shell.h"
#include "tests/cli_fixture.h"

namespace nnasm {
namespace {

constexpr int kIn = 3, kOut = 2;

float w_value(int i, int j) { return 0.5f * (i + 1) - 0.75f * j; }
float b_value(int j) { return 0.25f - 0.5f * j; }

class CliModelTest : public CliTest {
 protected:
  // A 3→2 layer with a ReLU, its weights set to known values, saved as model.nnm.
  std::string save_model() {
    Context ctx;
    Program p(ctx);
    Graph g(p);
    Var x = g.input("x", {1, kIn});
    Var w = g.param("w", {kIn, kOut});
    Var b = g.param("b", {kOut});
    g.output(relu(linear(x, w, b)), "y");
    EXPECT_TRUE(g.status()) << g.status().message();
    auto ex = std::move(Executor::prepare(p).value());
    for (int i = 0; i < kIn; ++i)
      for (int j = 0; j < kOut; ++j) ex->tensor("w")->f32()[i * kOut + j] = w_value(i, j);
    for (int j = 0; j < kOut; ++j) ex->tensor("b")->f32()[j] = b_value(j);
    listing_ = program_print(p);
    const std::string f = path("model.nnm");
    EXPECT_TRUE(model_save(p, f));
    return f;
  }
  std::string listing_;
};

TEST_F(CliModelTest, DumpEditBuildRunKeepsTheWeights) {
  const std::string model = save_model();
  ToolResult r = tool({"dump", model});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, listing_);

  // The hand edit: the ReLU becomes a tanh.
  std::string text = r.out;
  const size_t at = text.find("RELU ");
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, 5, "TANH ");
  const std::string edited = put("edited.nnasm", text);
  r = tool({"build", edited, "--weights", model, "-o", path("edited.nnm")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");  // every tensor found its weights: nothing to note

  const float x[kIn] = {0.5f, -1.25f, 2};
  put_npy("x.npy", TensorType{DType::F32, Shape{1, kIn}}, x);
  r = tool({"run", path("edited.nnm"), "--in", "x=" + path("x.npy"), "--out", "y=" + path("y.npy")});
  ASSERT_EQ(r.code, 0) << r.err;
  NpyArray y;
  ASSERT_TRUE(npy_read(path("y.npy"), &y));
  ASSERT_EQ(y.f32.size(), size_t(kOut));
  for (int j = 0; j < kOut; ++j) {
    float acc = b_value(j);
    for (int i = 0; i < kIn; ++i) acc += x[i] * w_value(i, j);
    EXPECT_NEAR(y.f32[j], std::tanh(acc), 1e-6) << j;
  }

  // dump → build → dump is text-identical.
  r = tool({"dump", path("edited.nnm"), "-o", path("d1.nnasm")});
  ASSERT_EQ(r.code, 0) << r.err;
  r = tool({"build", path("d1.nnasm"), "--weights", path("edited.nnm"), "-o", path("rebuilt.nnm")});
  ASSERT_EQ(r.code, 0) << r.err;
  r = tool({"dump", path("rebuilt.nnm")});
  EXPECT_EQ(r.out, get("d1.nnasm"));
  EXPECT_EQ(get("rebuilt.nnm"), get("edited.nnm"));  // and the files themselves agree
}

TEST_F(CliModelTest, BuildExplainsWeightsThatDoNotFit) {
  const std::string model = save_model();
  std::string text = listing_;
  const size_t at = text.find("f32[3,2]");
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, 8, "f32[3,5]");
  // The shape change must propagate: the bias and the output follow the weight.
  for (size_t p; (p = text.find("f32[2]")) != std::string::npos;) text.replace(p, 6, "f32[5]");
  for (size_t p; (p = text.find("f32[1,2]")) != std::string::npos;) text.replace(p, 8, "f32[1,5]");
  ToolResult r = tool({"build", put("wider.nnasm", text), "--weights", model, "-o", path("out.nnm")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("@w: the listing declares f32[3,5], the weights have f32[3,2]"), std::string::npos) << r.err;
  EXPECT_FALSE(std::ifstream(path("out.nnm")).good());

  // A new param starts from its initializer, with a note (silenced by --quiet).
  text = listing_;
  text.insert(0, "param  @extra : f32[4]  init=zeros\n");
  const std::string grown = put("grown.nnasm", text);
  r = tool({"build", grown, "--weights", model, "-o", path("grown.nnm")});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("note: 1 tensor without values in"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("@extra"), std::string::npos) << r.err;
  r = tool({"--quiet", "build", grown, "--weights", model, "-o", path("grown.nnm")});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

TEST_F(CliModelTest, InfoAndBenchDescribeAModelFile) {
  const std::string model = save_model();
  ToolResult r = tool({"info", model});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* want : {"(model file, inference mode)", "format:   1.0, written by nnasm ", "sections PROG (",
                           "(this build's)", "values:   2 tensors stored", "inputs:   %x f32[1,3]",
                           "params:   2 tensors, 8 values", "arena:    "})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;

  r = tool({"bench", model, "--seconds", "0.05", "--threads", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* want : {"forward runs), 1 thread, isa ", "batch 1 (%x f32[1,3])", "latency:    p50 ", " p99 ",
                           "throughput: "})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  // --profile: the listing again, each instruction with its time, share and kernel; it parses back.
  r = tool({"bench", model, "--seconds", "0.05", "--threads", "1", "--profile"});
  ASSERT_EQ(r.code, 0) << r.err;
  const size_t listing = r.out.find("\n\n", r.out.find("profile:    "));
  ASSERT_NE(listing, std::string::npos) << r.out;
  const std::string text = r.out.substr(listing + 2);
  const size_t line = text.find("  LINEAR ");
  ASSERT_NE(line, std::string::npos) << text;
  const std::string linear = text.substr(line, text.find('\n', line) - line);
  for (const char* want : {" us ", "%  kernel: "})
    EXPECT_NE(linear.find(want), std::string::npos) << want << "\n" << linear;
  Context back_ctx;
  Program back(back_ctx);
  const Status parsed = program_parse(text, "profile", &back);
  EXPECT_TRUE(parsed.is_ok()) << parsed.message() << "\n" << text;
  r = tool({"bench", model, "--train"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no update section"), std::string::npos) << r.err;

  // On 2 threads a step split into parts shows each part's start and running time (the batch-1
  // MLP's first layer splits wherever a JIT level runs; the reference kernels do not split).
  r = tool({"bench", "samples/listing/mlp_b1_infer.nnasm", "--seconds", "0.05", "--threads", "2", "--profile"});
  ASSERT_EQ(r.code, 0) << r.err;
  const size_t first = r.out.find("  LINEAR ", r.out.find("profile:    "));
  ASSERT_NE(first, std::string::npos) << r.out;
  const std::string split = r.out.substr(first, r.out.find('\n', first) - first);
  if (split.find("kernel: ref") == std::string::npos) {
    const size_t at = split.find("(2 parts, start + run: ");
    ASSERT_NE(at, std::string::npos) << split;
    // Each part: its start and its running time, each with its unit.
    const std::string parts = split.substr(at);
    EXPECT_EQ(std::count(parts.begin(), parts.end(), '+'), 3) << split;
    EXPECT_EQ(std::count(parts.begin(), parts.end(), ','), 2) << split;
    const size_t first_part = parts.find(" us + "), second_part = parts.find(" us + ", first_part + 1);
    EXPECT_NE(first_part, std::string::npos) << split;
    EXPECT_NE(second_part, std::string::npos) << split;
  }
}

TEST_F(CliModelTest, ACorruptModelFileIsAUserErrorNamingTheByte) {
  std::string bytes = get(save_model().substr(dir_.size() + 1));
  bytes[bytes.size() / 2] ^= 0x10;
  const std::string bad = put("bad.nnm", bytes);
  for (const char* cmd : {"run", "dump", "info", "check"}) {
    ToolResult r = tool({cmd, bad});
    EXPECT_EQ(r.code, 1) << cmd;
    EXPECT_EQ(r.err.rfind(bad + ": byte ", 0), 0u) << cmd << ": " << r.err;
  }
}

// Every command that reads a FILE refuses a device up front (it read 4 GiB of /dev/zero first).
TEST_F(CliModelTest, ADeviceIsRefusedBeforeItIsRead) {
  for (const char* cmd : {"run", "check", "import", "dump", "info"}) {
    ToolResult r = tool({cmd, "/dev/zero"});
    EXPECT_EQ(r.code, 1) << cmd << ": " << r.err;
    EXPECT_NE(r.err.find("/dev/zero: error: cannot read: not a regular file"), std::string::npos) << cmd << ": " << r.err;
  }
}

// A .npy where a model is expected is named for what it is (it was a listing error at 1:1).
TEST_F(CliModelTest, ANpyFileIsNotAModel) {
  const float v[3] = {1, 2, 3};
  const std::string f = put_npy("x.npy", TensorType{DType::F32, {3}}, v);
  ToolResult r = tool({"run", f});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err.rfind(f + ": error: " + f + " is a .npy array, not a model (a listing or an nnasm model file)", 0), 0u)
      << r.err;
}

TEST_F(CliModelTest, EveryCommandHasHelpAndTheToolHasAVersion) {
  for (const char* cmd : {"check", "run", "opt", "info", "dump", "build", "bench", "export"}) {
    ToolResult r = tool({cmd, "--help"});
    EXPECT_EQ(r.code, 0) << cmd << r.err;
    EXPECT_NE(r.out.find("Usage:"), std::string::npos) << cmd;
    EXPECT_NE(r.out.find("--quiet"), std::string::npos) << cmd << ": global options are listed";
  }
  ToolResult r = tool({"--version"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out.rfind("nnasm ", 0), 0u) << r.out;
  r = tool({"--help"});
  EXPECT_NE(r.out.find("Exit status: 0 success, 1 user error"), std::string::npos) << r.out;
  r = tool({"dump"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("FILE is required"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace nnasm

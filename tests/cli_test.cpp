// Tests of the `nnasm` tool as a user meets it: a subprocess with arguments, stdout, stderr and an
// exit status (tests/cli_fixture.h). Expected numbers are computed here by hand from small listings.
#include <dirent.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "engine/context.h"
#include "jit/cpu.h"
#include "serialize/listing.h"
#include "serialize/npy.h"
#include "tests/cli_fixture.h"

namespace nnasm {
namespace {

const char* const kRelu =
    "; RELU of one input\n"
    "input  %x : f32[2,3]\n"
    "output %y\n"
    "forward:\n"
    "  RELU %x -> %y\n";

const char* const kAdd =
    "input  %a : f32[3]\n"
    "input  %b : f32[3]\n"
    "output %y\n"
    "forward:\n"
    "  ADD %a, %b -> %y  alpha=2 beta=1\n";


TEST_F(CliTest, CheckOk) {
  const std::string f = put("relu.nnasm", kRelu);
  ToolResult r = tool({"check", f});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, f + ": ok (1 instruction, 2 tensors)\n");
  EXPECT_EQ(r.err, "");
}

TEST_F(CliTest, CheckPrintIsTheNormalizedListing) {
  for (const char* text : {kRelu, kAdd}) {
    const std::string f = put("p.nnasm", text);
    Context ctx;
    Program p(ctx);
    Status s = program_parse_file(f, &p);
    ASSERT_TRUE(s.is_ok()) << s.message();
    ToolResult r = tool({"check", f, "--print"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, program_print(p));
    EXPECT_EQ(r.err, "");
  }
}

TEST_F(CliTest, CheckReportsTheParserError) {
  const std::string f = put("broken.nnasm",
                            "input  %x : f32[2,3]\n"
                            "output %y\n"
                            "forward:\n"
                            "  RELU %x, %x -> %y\n");
  ToolResult r = tool({"check", f});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(has_location(r.err, f + ":4:")) << r.err;

  r = tool({"check", path("absent.nnasm")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find(path("absent.nnasm") + ": error: cannot read"), std::string::npos) << r.err;
}

// An empty or comment-only file is not an empty program that "runs": every command that loads a
// model says what is wrong, at 1:1 for a listing, "empty file" for 0 bytes (a truncated .nnm).
TEST_F(CliTest, AnEmptyFileOrListingIsAnError) {
  const std::string empty = put("empty.nnm", "");
  const std::string blank = put("blank.nnasm", "\n  \n; only a comment\n\n");
  for (const char* cmd : {"run", "check", "info", "dump"}) {
    ToolResult r = tool({cmd, empty});
    EXPECT_EQ(r.code, 1) << cmd;
    EXPECT_EQ(r.err.rfind(empty + ": error: empty file", 0), 0u) << cmd << ": " << r.err;
    r = tool({cmd, blank});
    EXPECT_EQ(r.code, 1) << cmd;
    EXPECT_EQ(r.err.rfind(blank + ":1:1: error: the listing has no instructions and no outputs", 0), 0u)
        << cmd << ": " << r.err;
  }
}

TEST_F(CliTest, RunWritesOutputsToNpy) {
  const std::string f = put("relu.nnasm", kRelu);
  const float x[6] = {-1, 2, -3, 4, 0.5f, -0.25f};
  const std::string xin = put_npy("x.npy", TensorType{DType::F32, Shape{2, 3}}, x);
  ToolResult r = tool({"run", f, "--in", "x=" + xin, "--out", "y=" + path("y.npy")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  NpyArray y;
  Status s = npy_read(path("y.npy"), &y);
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(y.type.str(), "f32[2,3]");
  EXPECT_EQ(y.f32, (std::vector<float>{0, 2, 0, 4, 0.5f, 0}));

  // Two inputs, an immediate, the %-sigil and --opt=value spellings: y = 2a + b.
  const std::string g = put("add.nnasm", kAdd);
  const float a[3] = {1, -2, 0.25f}, b[3] = {10, 20, 30};
  put_npy("a.npy", TensorType{DType::F32, Shape{3}}, a);
  put_npy("b.npy", TensorType{DType::F32, Shape{3}}, b);
  r = tool({"run", g, "--in=%a=" + path("a.npy"), "--in", "b=" + path("b.npy"), "--out", "%y=" + path("y2.npy")});
  ASSERT_EQ(r.code, 0) << r.err;
  s = npy_read(path("y2.npy"), &y);
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(y.f32, (std::vector<float>{12, 16, 30.5f}));
}

TEST_F(CliTest, RunPrintsOutputsWithoutOut) {
  const std::string f = put("relu.nnasm", kRelu);
  const float x[6] = {-1, 2, -3, 4, 0.5f, -0.25f};
  put_npy("x.npy", TensorType{DType::F32, Shape{2, 3}}, x);
  ToolResult r = tool({"run", f, "--in", "x=" + path("x.npy")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "%y: f32[2,3]\n"
            "[[  0,   2,   0],\n"
            " [  4, 0.5,   0]]\n");
  EXPECT_EQ(r.err, "");
}

TEST_F(CliTest, RunSummarizesLargeOutputs) {
  const std::string f = put("big.nnasm",
                            "input %x : f32[40,50]\n"
                            "output %y\n"
                            "forward:\n"
                            "  SCALE %x -> %y  alpha=1\n");
  std::vector<float> x(2000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  put_npy("x.npy", TensorType{DType::F32, Shape{40, 50}}, x.data());
  ToolResult r = tool({"run", f, "--in", "x=" + path("x.npy")});
  ASSERT_EQ(r.code, 0) << r.err;
  // 3 rows, "...", 3 rows: numpy's edgeitems=3.
  EXPECT_EQ(r.out,
            "%y: f32[40,50]\n"
            "[[   0,    1,    2, ...,   47,   48,   49],\n"
            " [  50,   51,   52, ...,   97,   98,   99],\n"
            " [ 100,  101,  102, ...,  147,  148,  149],\n"
            " ...,\n"
            " [1850, 1851, 1852, ..., 1897, 1898, 1899],\n"
            " [1900, 1901, 1902, ..., 1947, 1948, 1949],\n"
            " [1950, 1951, 1952, ..., 1997, 1998, 1999]]\n");
}

TEST_F(CliTest, RunWithoutInputsNeedsNoIn) {
  const std::string f = put("const.nnasm",
                            "const @k : f32[3] = [1, -2, 3]\n"
                            "output %y\n"
                            "forward:\n"
                            "  NEG @k -> %y\n");
  ToolResult r = tool({"run", f});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "%y: f32[3]\n[-1,  2, -3]\n");
}

TEST_F(CliTest, SeedIsHonoured) {
  const std::string f = put("param.nnasm",
                            "param @w : f32[4] init=normal mean=0 std=1\n"
                            "output %y\n"
                            "forward:\n"
                            "  COPY @w -> %y\n");
  ToolResult a = tool({"run", f, "--seed", "1"}), b = tool({"run", f, "--seed", "1"}), c = tool({"run", f, "--seed", "2"});
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
}

// Params that hold only their initializers run as random weights: the run goes ahead, with a
// warning on stderr naming them, even under --quiet; a param with values gets none.
TEST_F(CliTest, RunWarnsOfParamsWithoutValues) {
  const std::string f = put("init.nnasm",
                            "param @w : f32[4] init=normal mean=0 std=1\n"
                            "param @b : f32[4] = [1, 2, 3, 4]\n"
                            "output %y\n"
                            "forward:\n"
                            "  ADD @w, @b -> %y\n");
  const std::string want = "nnasm: warning: " + f +
                           ": 1 param holds only its initializer (random weights, not trained values): @w\n";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", f}, {"run", f, "-v"}, {"-q", "run", f}}) {
    ToolResult r = tool(args);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.err, want) << args.back();
  }
  const std::string g = put("const.nnasm",
                            "param @b : f32[2] = [1, 2]\n"
                            "output %y\n"
                            "forward:\n"
                            "  NEG @b -> %y\n");
  ToolResult r = tool({"run", g});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

TEST_F(CliTest, MissingInputIsNamed) {
  const std::string g = put("add.nnasm", kAdd);
  const float a[3] = {1, 2, 3};
  put_npy("a.npy", TensorType{DType::F32, Shape{3}}, a);
  ToolResult r = tool({"run", g, "--in", "a=" + path("a.npy")});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("input %b is not given"), std::string::npos) << r.err;
  r = tool({"run", g});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("inputs %a, %b are not given"), std::string::npos) << r.err;
}

TEST_F(CliTest, UnknownInputNameIsRefused) {
  const std::string f = put("relu.nnasm", kRelu);
  const float x[6] = {};
  put_npy("x.npy", TensorType{DType::F32, Shape{2, 3}}, x);
  ToolResult r = tool({"run", f, "--in", "x=" + path("x.npy"), "--in", "z=" + path("x.npy")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("has no tensor named 'z' (its inputs: %x)"), std::string::npos) << r.err;
  r = tool({"run", f, "--in", "x=" + path("x.npy"), "--in", "y=" + path("x.npy")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("%y is a temporary, not an input"), std::string::npos) << r.err;
  r = tool({"run", f, "--in", "x=" + path("x.npy"), "--in", "x=" + path("x.npy")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("given twice"), std::string::npos) << r.err;
  r = tool({"run", f, "--in", "x=" + path("x.npy"), "--out", "q=" + path("q.npy")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("has no tensor named 'q'"), std::string::npos) << r.err;
}

TEST_F(CliTest, WrongShapeOrDtypeNamesBothTypes) {
  const std::string f = put("relu.nnasm", kRelu);
  const float x[6] = {};
  put_npy("t.npy", TensorType{DType::F32, Shape{3, 2}}, x);
  ToolResult r = tool({"run", f, "--in", "x=" + path("t.npy")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("t.npy holds f32[3,2], but %x is f32[2,3]"), std::string::npos) << r.err;
  put_npy("i.npy", TensorType{DType::I32, Shape{2, 3}}, x);
  r = tool({"run", f, "--in", "x=" + path("i.npy")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("holds i32[2,3], but %x is f32[2,3]"), std::string::npos) << r.err;
}

TEST_F(CliTest, MalformedNpyIsAnErrorNotACrash) {
  const std::string f = put("relu.nnasm", kRelu);
  put("junk.npy", "this is not an array");
  ToolResult r = tool({"run", f, "--in", "x=" + path("junk.npy")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("input %x: " + path("junk.npy") + ": not a .npy file (bad magic"), std::string::npos) << r.err;

  const float x[6] = {1, 2, 3, 4, 5, 6};
  put_npy("x.npy", TensorType{DType::F32, Shape{2, 3}}, x);
  const std::string good = slurp(path("x.npy"));
  put("short.npy", good.substr(0, good.size() - 5));
  r = tool({"run", f, "--in", "x=" + path("short.npy")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("shorter than the 24 bytes"), std::string::npos) << r.err;

  r = tool({"run", f, "--in", "x=" + path("nowhere.npy")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("nowhere.npy: cannot open"), std::string::npos) << r.err;
}

// a is read by the SOFTMAX and the TANH, which then writes over it; the ADD writes over b.
const char* const kFanOut =
    "input  %x : f32[2,8]\n"
    "output %y\n"
    "forward:\n"
    "  EXP     %x -> %a\n"
    "  SOFTMAX %a -> %b\n"
    "  TANH    %a -> %c\n"
    "  ADD     %b, %c -> %d\n"
    "  SOFTMAX %d -> %y\n";

// Without a file: the CPU's vendor and features, one thread's share of L2 where CPUID gives it
// (the GEMV split follows it), and the ISA level in use, the best and the cap.
TEST_F(CliTest, InfoPrintsTheMachine) {
  ToolResult r = tool({"info"});
  ASSERT_EQ(r.code, 0) << r.err;
  const CpuInfo& cpu = cpu_info();
  EXPECT_EQ(r.out.rfind("cpu:      " + cpu.vendor + " (", 0), 0u) << r.out;
  if (cpu.l2_bytes > 0) {
    const std::string l2 = fmt::format("\nl2:       {} KiB per core\n", cpu.l2_bytes / 1024);
    EXPECT_NE(r.out.find(l2), std::string::npos) << r.out;
  } else {
    EXPECT_EQ(r.out.find("l2:"), std::string::npos) << r.out;
  }
  EXPECT_NE(r.out.find("\nisa:      "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(fmt::format("best {}", isa_name(cpu.best))), std::string::npos) << r.out;
  // The tool inherits this process's environment, NNASM_THREADS included.
  EXPECT_NE(r.out.find(fmt::format("\nthreads:  {} (", Context().threads())), std::string::npos) << r.out;
}

// As written, the four [2,8] temporaries (one 64-byte line each) fit two slots: {a, c} and {b, d}.
// As run, chain fusion makes TANH and ADD one CALC: three temporaries, d written over b.
TEST_F(CliTest, InfoMemoryShowsThePlan) {
  const std::string f = put("fan.nnasm", kFanOut);
  ToolResult r = tool({"info", f, "--memory"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* want : {
           "memory:   as run (optimized): 3 temporaries, 192 bytes (0.2 KiB) unplanned -> arena 128 bytes (0.1 KiB): "
           "66.7%\n",
           "          peak live 128 bytes (0.1 KiB), 1 written in place\n",
           "          as written, planned without optimizing: 4 temporaries, 256 bytes (0.2 KiB) unplanned -> arena "
           "128 bytes (0.1 KiB): 50.0%\n",
           "  EXP          %x -> %a                               ; f32[2,8]  arena +0\n",
           "  SOFTMAX      %a -> %b  axis=-1                      ; f32[2,8]  arena +64, shares %d\n",
           "  CALC         %b, %a -> %d  expr=\"add(%0,tanh(%1))\"  ; f32[2,8]  arena +64, in place of %b, shares %b\n",
           "  SOFTMAX      %d -> %y  axis=-1                      ; f32[2,8]  own storage\n",
       })
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\nin:\n" << r.out;
  r = tool({"info", "--memory"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "nnasm: error: info --memory needs a listing FILE\n");
}

// --out may name a temporary: it is kept out of the arena, where the second SOFTMAX would reuse a's
// slot.
TEST_F(CliTest, RunOutWritesATemporaryThePlannerWouldReuse) {
  const std::string f = put("fan.nnasm", kFanOut);
  float x[16];
  for (int i = 0; i < 16; ++i) x[i] = 0.25f * static_cast<float>(i - 8);
  put_npy("x.npy", TensorType{DType::F32, Shape{2, 8}}, x);
  ToolResult r = tool({"run", f, "--in", "x=" + path("x.npy"), "--out", "a=" + path("a.npy")});
  ASSERT_EQ(r.code, 0) << r.err;
  NpyArray a;
  Status s = npy_read(path("a.npy"), &a);
  ASSERT_TRUE(s.is_ok()) << s.message();
  ASSERT_EQ(a.f32.size(), 16u);
  for (int i = 0; i < 16; ++i) EXPECT_NEAR(a.f32[i], std::exp(x[i]), 1e-6f * std::exp(x[i])) << i;
}

// `nnasm run` is inference unless --train, whatever the listing's `mode` line says. The mode shows
// in the --kernels listing (the program as run), which starts with `mode training` only in
// training mode.
TEST_F(CliTest, RunIsInferenceUnlessTrain) {
  const std::string trained = put("trained.nnasm", std::string("mode training\n") + kRelu);
  const std::string plain = put("relu.nnasm", kRelu);
  const float x[6] = {-1, 2, -3, 4, 0.5f, -0.25f};
  const std::string in = "x=" + put_npy("x.npy", TensorType{DType::F32, Shape{2, 3}}, x);
  const std::string values = "%y: f32[2,3]\n[[  0,   2,   0],\n [  4, 0.5,   0]]\n";
  for (const std::string& f : {trained, plain}) {
    ToolResult r = tool({"run", f, "--in", in, "--kernels"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out.find("mode training"), std::string::npos) << f << "\n" << r.out;
    EXPECT_NE(r.out.find("forward:"), std::string::npos) << r.out;
    ToolResult t = tool({"run", f, "--in", in, "--kernels", "--train"});
    ASSERT_EQ(t.code, 0) << t.err;
    EXPECT_EQ(t.out.rfind("mode training\n", 0), 0u) << f << "\n" << t.out;
    // RELU does not depend on the mode: the same values either way.
    EXPECT_EQ(r.out.substr(r.out.size() - values.size()), values);
    EXPECT_EQ(t.out.substr(t.out.size() - values.size()), values);
    EXPECT_EQ(tool({"run", f, "--in", in, "--train"}).out, values);
  }
  ToolResult h = tool({"run", "--help"});
  EXPECT_EQ(h.code, 0);
  EXPECT_NE(h.out.find("--train"), std::string::npos) << h.out;
  EXPECT_NE(h.out.find("inference"), std::string::npos) << h.out;
}

// A bench ends when its time (or --runs) is up, never at a sample buffer's size: --runs above the
// 2^20 samples kept for the percentiles runs and reports exactly that many; --seconds alone ends
// by time, after at least 10 runs.
TEST_F(CliTest, BenchRunsUntilItsLimitNotABuffer) {
  const std::string f = put("neg.nnasm",
                            "input  %x : f32[1]\n"
                            "output %y\n"
                            "forward:\n"
                            "  NEG %x -> %y\n");
  const int64_t n = (int64_t(1) << 20) + 50001;
  ToolResult r = tool({"bench", f, "--runs", std::to_string(n), "--threads", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(fmt::format("({} runs in ", n)), std::string::npos) << r.out;
  r = tool({"bench", f, "--seconds", "0.05", "--threads", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  const size_t at = r.out.find(" runs in ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const size_t open = r.out.rfind('(', at);
  ASSERT_NE(open, std::string::npos) << r.out;
  EXPECT_GE(std::stoll(r.out.substr(open + 1, at - open - 1)), 10) << r.out;
  EXPECT_EQ(tool({"bench", f, "--runs", "0"}).code, 1);
}

TEST_F(CliTest, BadUsageExits1) {
  const std::string f = put("relu.nnasm", kRelu);
  EXPECT_EQ(tool({}).code, 1);
  EXPECT_EQ(tool({"frobnicate"}).code, 1);
  EXPECT_EQ(tool({"run"}).code, 1);
  for (const char* bad_seed : {"many", "-1", "1.5", "18446744073709551616"}) {
    ToolResult r = tool({"run", f, "--seed", bad_seed});
    EXPECT_EQ(r.code, 1) << bad_seed;
    EXPECT_EQ(r.err.rfind("nnasm: error: --seed: expected an integer", 0), 0u) << r.err;
  }
  ToolResult r = tool({"run", f, "--in", "x"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--in 'x': expected NAME=PATH.npy"), std::string::npos) << r.err;
  r = tool({"--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("check"), std::string::npos) << r.out;
}

TEST_F(CliTest, RunAndBenchAtAnotherBatch) {
  const std::string f = put("relu.nnasm", kRelu);
  const float x[9] = {-1, 2, -3, 4, 0.5f, -0.25f, 7, -8, 9};
  put_npy("x.npy", TensorType{DType::F32, Shape{3, 3}}, x);
  ToolResult r = tool({"run", f, "--batch", "3", "--in", "x=" + path("x.npy"), "--out", "y=" + path("y.npy")});
  ASSERT_EQ(r.code, 0) << r.err;
  NpyArray y;
  ASSERT_TRUE(npy_read(path("y.npy"), &y).is_ok());
  EXPECT_EQ(y.type.str(), "f32[3,3]");
  EXPECT_EQ(y.f32, (std::vector<float>{0, 2, 0, 4, 0.5f, 0, 7, 0, 9}));
  // The inputs are checked against the program at the new batch.
  r = tool({"run", f, "--in", "x=" + path("x.npy")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("f32[2,3]"), std::string::npos) << r.err;

  r = tool({"bench", f, "--batch", "5", "--runs", "10", "--threads", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("batch 5 (%x f32[5,3])"), std::string::npos) << r.out;
  EXPECT_EQ(tool({"bench", f, "--batch", "0", "--runs", "10"}).code, 1);
  EXPECT_EQ(tool({"run", f, "--batch", "-2"}).code, 1);
}

TEST_F(CliTest, BatchThatCannotChangeSaysWhereAndWhy) {
  const std::string f = put("mix.nnasm",
                            "input  %x : f32[4,6]\n"
                            "output %y\n"
                            "forward:\n"
                            "  RESHAPE %x -> %y  shape=[2,12]\n");
  ToolResult r = tool({"run", f, "--batch", "3"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--batch 3: " + f + ": "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(f + ":4:3: RESHAPE %y to [2,12]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("mixes the batch"), std::string::npos) << r.err;
  EXPECT_EQ(tool({"bench", f, "--batch", "3", "--runs", "10"}).code, 1);
}

}  // namespace
}  // namespace nnasm

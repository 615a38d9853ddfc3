// The text listing: golden round trips (print(parse(file)) == file), normalization of hand-written
// text, one test per error kind with its exact line and column, running parsed programs, and a
// bounded random-mutation test that the parser is total.
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include <gtest/gtest.h>

#include "engine/executor.h"
#include "serialize/listing.h"
#include "serialize/listing_lexer.h"
#include "tests/test_programs.h"
#include "tests/read_text.h"

namespace nnasm {
namespace {

// Parses `text` into a fresh program of `ctx` and prints it; empty and a failure if it does not parse.
std::string reprint(const std::string& text, const std::string& file = "t.nnasm") {
  Context ctx;
  Program p(ctx);
  Status s = program_parse(text, file, &p);
  EXPECT_TRUE(s) << s.message();
  return s ? program_print(p) : "";
}

// The error message of parsing `text` as t.nnasm; empty if it parsed.
std::string parse_error(const std::string& text) {
  Context ctx;
  Program p(ctx);
  Status s = program_parse(text, "t.nnasm", &p);
  return s ? "" : s.message();
}

#define ASSERT_OK(expr)                          \
  do {                                           \
    const ::nnasm::Status st_ = (expr);          \
    ASSERT_TRUE(st_) << st_.message();           \
  } while (0)

#define EXPECT_ERROR(text, prefix)                                     \
  do {                                                                 \
    const std::string msg_ = parse_error(text);                        \
    EXPECT_EQ(msg_.rfind(prefix, 0), 0u) << "got: " << msg_;           \
  } while (0)

// ---- round trips ----

class Golden : public ::testing::TestWithParam<const char*> {};

TEST_P(Golden, PrintsBackExactly) {
  const std::string path = std::string("tests/golden/") + GetParam();
  const std::string text = read_text(path);
  ASSERT_FALSE(text.empty()) << "cannot read " << path << " (tests run from the repository root)";
  Context ctx;
  Program p(ctx);
  Status s = program_parse_file(path, &p);
  ASSERT_TRUE(s) << s.message();
  EXPECT_TRUE(p.finish()) << p.finish().message();
  const std::string once = program_print(p);
  EXPECT_EQ(once, text);
  EXPECT_EQ(reprint(once), once);
}

INSTANTIATE_TEST_SUITE_P(Listing, Golden, ::testing::Values("mlp.nnasm", "immediates.nnasm", "integers.nnasm"));

TEST(Listing, NormalizesHandWrittenText) {
  const std::string in =
      "  ; a comment line, then a blank one\r\n"
      "\n"
      "input\t%x :f32[ 2 , 3 ]   ; trailing comment\n"
      "const @k:f32[3]=[ 1,\n"
      "   2.50 , ; a comment inside the list\n"
      "   -3e0 ]\n"
      "param @w : f32[3,3] init=uniform high=+1 low=-.5\n"
      "forward:\n"
      "output %y:f32[2,3]\n"
      "\tADD %x,@k->%s beta=2  ; alpha left at its default\n"
      "  MATMUL %s , @w -> %m transB=true\n"
      "  GELU %m -> %y approx=tanh\n";
  const std::string want =
      "input  %x : f32[2,3]\n"
      "const  @k : f32[3] = [1, 2.5, -3]\n"
      "param  @w : f32[3,3]  init=uniform low=-0.5 high=1\n"
      "output %y\n"
      "\n"
      "forward:\n"
      "  ADD          %x, @k -> %s  alpha=1 beta=2           ; f32[2,3]\n"
      "  MATMUL       %s, @w -> %m  transA=0 transB=1 act=none act_alpha=0  ; f32[2,3]\n"
      "  GELU         %m -> %y  approx=tanh                  ; f32[2,3]\n";
  EXPECT_EQ(reprint(in), want);
  EXPECT_EQ(reprint(want), want);
}

// A listing of a few bytes must not make prepare allocate gigabytes: the parser holds it to the
// limit the model-file loader and the importers apply (isa/program.h).
TEST(Listing, AProgramOverTheSizeLimitIsRefused) {
  const std::string err =
      parse_error("param @w : f32[65536,65536]\ninput %x : f32[1,65536]\noutput %y\n\nforward:\n  MATMUL %x, @w -> %y\n");
  EXPECT_EQ(err.rfind("t.nnasm: error: the program's tensors need", 0), 0u) << err;
  EXPECT_NE(err.find("(the largest, @w f32[65536,65536], needs 17179869184)"), std::string::npos) << err;
  EXPECT_EQ(parse_error("param @w : f32[256,256]\ninput %x : f32[1,256]\noutput %y\n\nforward:\n  MATMUL %x, @w -> %y\n"), "");
}

TEST(Listing, EmptyProgramsAndNoInstructions) {
  EXPECT_EQ(reprint(""), "forward:\n");
  EXPECT_EQ(reprint("; nothing\n\n"), "forward:\n");
  EXPECT_EQ(reprint("input %x : f32[]\noutput %x"), "input  %x : f32[]\noutput %x\n\nforward:\n");
}

TEST(Listing, FillsTheInstructionFromTheSchema) {
  Context ctx;
  Program p(ctx);
  ASSERT_OK(program_parse("input %x : f32[2,4]\n"
                            "forward:\n"
                            "  GELU %x -> %g approx=tanh\n"
                            "  ADD %g, %x -> %a beta=0.1\n"
                            "  RESHAPE %a -> %r shape=[4,-1]\n"
                            "  MATMUL %r, %r -> %m transA=true\n"
                            "  SLICE %m -> %s end=1 start=0 axis=-1\n",
                            "f.nnasm", &p));
  ASSERT_EQ(p.code().size(), 5u);
  const Instruction& gelu = p.code()[0];
  EXPECT_EQ(gelu.op, Opcode::GELU);
  EXPECT_EQ(gelu.imm[0].type, ImmType::ENUM);
  EXPECT_EQ(gelu.imm[0].i, 1);
  EXPECT_EQ(gelu.imm[0].ident, "tanh");
  EXPECT_EQ(gelu.loc.str(), "f.nnasm:3:3");
  EXPECT_EQ(gelu.section, Section::FORWARD);
  const Instruction& add = p.code()[1];
  EXPECT_EQ(add.imm[0].type, ImmType::F32);
  EXPECT_EQ(add.f(0), 1.0);
  EXPECT_EQ(add.f(1), static_cast<double>(0.1f));  // rounded to float, as the op will use it
  EXPECT_EQ(p.code()[2].ints(0), (std::vector<int64_t>{4, -1}));
  EXPECT_EQ(p.code()[3].imm[0].type, ImmType::BOOL);
  EXPECT_EQ(p.code()[3].i(0), 1);
  EXPECT_EQ(p.code()[3].i(1), 0);
  EXPECT_EQ(p.code()[4].i(0), -1);
  EXPECT_EQ(p.code()[4].i(2), 1);
  const TensorDesc& s = p.desc(p.find("s"));
  EXPECT_EQ(s.role, Role::TEMPORARY);
  EXPECT_EQ(s.type.str(), "f32[2,1]");
}

// A str immediate is a quoted string: a ';' inside is no comment, '"' and '\\' are escaped.
TEST(Listing, ReadsAndWritesStrings) {
  Lexed lx;
  lex_listing("k=\"a \\\"b\\\" \\\\c; d\" e ; comment", &lx);
  ASSERT_EQ(lx.tokens.size(), 6u) << lx.message;
  EXPECT_EQ(lx.tokens[2].kind, Tok::STRING);
  EXPECT_EQ(lx.tokens[2].col, 3);
  EXPECT_EQ(unescape_string(lx.tokens[2].text), "a \"b\" \\c; d");
  EXPECT_EQ(imm_to_string(imm_str(unescape_string(lx.tokens[2].text))), "\"a \\\"b\\\" \\\\c; d\"");
  EXPECT_EQ(lx.tokens[3].text, "e");
  EXPECT_EQ(lx.tokens[4].kind, Tok::NEWLINE);
  Context ctx;
  Program p(ctx);
  ASSERT_OK(program_parse("input %x : f32[2]\nforward:\n  CALC %x -> %y expr=\"exp( %0 )\"\n", "s.nnasm", &p));
  EXPECT_EQ(p.code()[0].imm[0].type, ImmType::STR);
  EXPECT_EQ(p.code()[0].imm[0].ident, "exp( %0 )");  // kept as written
}

TEST(Listing, ReadsInitKindsAndValues) {
  Context ctx;
  Program p(ctx);
  ASSERT_OK(program_parse("param @c : f32[2] init=constant value=0.1\n"
                            "param @n : f32[2] init=normal std=2 mean=-1\n"
                            "param @h : f32[2,2] init=he_normal\n"
                            "const @v : i32[3] = [1, -2, +3]\n"
                            "const @f : f32[4] = [nan, inf, -inf, -0]\n",
                            "t.nnasm", &p));
  EXPECT_EQ(p.desc(p.find("c")).init, (InitSpec{InitKind::CONSTANT, static_cast<double>(0.1f), 0}));
  EXPECT_EQ(p.desc(p.find("n")).init, (InitSpec{InitKind::NORMAL, -1, 2}));
  EXPECT_EQ(p.desc(p.find("h")).init.kind, InitKind::HE_NORMAL);
  EXPECT_EQ(p.desc(p.find("v")).values, (std::vector<double>{1, -2, 3}));
  EXPECT_EQ(p.desc(p.find("v")).type.dtype, DType::I32);
  const std::vector<double>& f = p.desc(p.find("f")).values;
  ASSERT_EQ(f.size(), 4u);
  EXPECT_TRUE(std::isnan(f[0]));
  EXPECT_EQ(f[1], HUGE_VAL);
  EXPECT_EQ(f[2], -HUGE_VAL);
  EXPECT_TRUE(std::signbit(f[3]));
}

// CLAMP's bounds default to ±inf; explicit infinite immediates read and print back as written.
TEST(Listing, InfiniteImmediatesRoundTrip) {
  Context ctx;
  Program p(ctx);
  ASSERT_OK(program_parse("input %x : f32[2]\nforward:\n  CLAMP %x -> %a\n  CLAMP %x -> %b min=-inf max=6\n"
                          "  CLAMP %x -> %c min=0 max=inf\n",
                          "c.nnasm", &p));
  EXPECT_EQ(p.code()[0].f(0), -HUGE_VAL);
  EXPECT_EQ(p.code()[0].f(1), HUGE_VAL);
  EXPECT_EQ(p.code()[1].f(0), -HUGE_VAL);
  EXPECT_EQ(p.code()[1].f(1), 6);
  EXPECT_EQ(p.code()[2].f(1), HUGE_VAL);
  const std::string once = program_print(p);
  EXPECT_NE(once.find("min=-inf max=6"), std::string::npos) << once;
  EXPECT_NE(once.find("min=0 max=inf"), std::string::npos) << once;
  Context ctx2;
  Program q(ctx2);
  ASSERT_OK(program_parse(once, "c2.nnasm", &q));
  EXPECT_EQ(program_print(q), once);
}

TEST(Listing, WrapsLongValueLists) {
  std::string in = "const @k : f32[3,4] = [";
  for (int i = 0; i < 12; ++i) in += std::to_string(i) + (i < 11 ? "," : "]\n");
  const std::string want =
      "const  @k : f32[3,4] = [\n"
      "    0, 1, 2, 3,\n"
      "    4, 5, 6, 7,\n"
      "    8, 9, 10, 11\n"
      "]\n"
      "\n"
      "forward:\n";
  EXPECT_EQ(reprint(in), want);
  // Rows longer than eight values, and vectors, wrap at eight.
  std::string in2 = "const @k : f32[10] = [";
  for (int i = 0; i < 10; ++i) in2 += std::to_string(i) + (i < 9 ? "," : "]\n");
  EXPECT_EQ(reprint(in2),
            "const  @k : f32[10] = [\n"
            "    0, 1, 2, 3, 4, 5, 6, 7,\n"
            "    8, 9\n"
            "]\n"
            "\n"
            "forward:\n");
}

// A program built through the API may declare outputs in any order relative to inputs; the
// listing keeps declaration order so that Program::outputs() survives a round trip.
TEST(Listing, ApiProgramsRoundTrip) {
  Context ctx;
  Program p(ctx);
  TensorDesc x;
  x.name = "x";
  x.role = Role::INPUT;
  x.type = TensorType{DType::F32, Shape{2, 2}};
  TensorId xid = p.declare(x).value();
  auto t = p.append_new(make_instruction(Opcode::RELU, {xid}, {}));
  ASSERT_TRUE(t) << t.status().message();
  TensorDesc z = x;
  z.name = "z";
  TensorId zid = p.declare(z).value();
  TensorDesc k;
  k.name = "k";
  k.role = Role::CONST;  // neither values nor an init kind: zeros, printed as init=zeros
  k.type = TensorType{DType::F32, Shape{2}};
  ASSERT_TRUE(p.declare(k));
  p.mark_output(t.value()[0]);
  p.mark_output(zid);
  const std::string once = program_print(p);
  EXPECT_EQ(once,
            "input  %x : f32[2,2]\n"
            "output %t0\n"
            "input  %z : f32[2,2]\n"
            "output %z\n"
            "const  @k : f32[2]  init=zeros\n"
            "\n"
            "forward:\n"
            "  RELU         %x -> %t0                              ; f32[2,2]\n");
  EXPECT_EQ(reprint(once), once);

  // Every op of the first op set, recorded by the shell.
  Context ctx2;
  Program q(ctx2);
  Graph g(q);
  record_every_op(g);
  ASSERT_TRUE(g.status()) << g.status().message();
  const std::string all = program_print(q);
  EXPECT_EQ(reprint(all), all);
  Context ctx3;
  Program r(ctx3);
  ASSERT_OK(program_parse(all, "all.nnasm", &r));
  EXPECT_EQ(r.code().size(), q.code().size());
  for (size_t i = 0; i < r.code().size(); ++i)
    for (size_t k2 = 0; k2 < r.code()[i].imm.size(); ++k2)
      EXPECT_EQ(r.code()[i].imm[k2], q.code()[i].imm[k2]) << "instruction " << i << " immediate " << k2;
}

// An importer's undo: after rollback the program is what it was at the checkpoint, its listing
// included, the names taken since are free again and their tensors gone from the context.
TEST(Listing, RollbackForgetsWhatCameAfterTheCheckpoint) {
  Context ctx;
  Program p(ctx);
  ASSERT_OK(program_parse("input %x : f32[2]\nforward:\n  RELU %x -> %y\n", "p.nnasm", &p));
  const std::string before = program_print(p);
  const Program::Checkpoint mark = p.checkpoint();
  TensorDesc w;
  w.name = "w";
  w.role = Role::CONST;
  w.type = TensorType{DType::F32, Shape{2}};
  const TensorId wid = p.declare(w).value();
  auto z = p.append_new(make_instruction(Opcode::ADD, {p.find("y"), wid}, {}));
  ASSERT_TRUE(z) << z.status().message();
  ASSERT_OK(p.rename(z.value()[0], "z"));
  p.mark_output(z.value()[0]);
  p.rollback(mark);
  EXPECT_EQ(program_print(p), before);
  EXPECT_EQ(p.find("w"), NO_TENSOR);
  EXPECT_EQ(p.find("z"), NO_TENSOR);
  EXPECT_EQ(ctx.find(wid), nullptr);
  EXPECT_TRUE(p.declare(w));  // the name is free again
  EXPECT_TRUE(p.finish());
}

// ---- running parsed programs ----

TEST(Listing, RunsAParsedProgram) {
  Context ctx;
  Program p(ctx);
  ASSERT_OK(program_parse("const @k : f32[2,3] = [-1, 2, -3, 4, 0.5, -0.25]\n"
                            "const @w : f32[3,2] = [1, 0, 0, 1, 1, 1]\n"
                            "const @b : f32[2] = [10, 20]\n"
                            "input %x : f32[2,2]\n"
                            "output %y\n"
                            "output %r\n"
                            "forward:\n"
                            "  RELU @k -> %r\n"
                            "  MATMUL %r, @w -> %m\n"
                            "  ADD %m, @b -> %s beta=2\n"
                            "  ADD %s, %x -> %y2\n"
                            "  REDUCE_SUM %y2 -> %y axis=-1\n",
                            "run.nnasm", &p));
  ASSERT_TRUE(p.finish());
  auto ex = Executor::prepare(p);
  ASSERT_TRUE(ex) << ex.status().message();
  float* x = ex.value()->tensor("x")->f32();
  for (int i = 0; i < 4; ++i) x[i] = static_cast<float>(i + 1);
  ex.value()->run();
  const float* r = ex.value()->tensor("r")->f32();
  const float want_r[] = {0, 2, 0, 4, 0.5f, 0};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(r[i], want_r[i]);
  // m = r·w = [[0, 2], [4, 0.5]]; s = m + 2b = [[20, 42], [24, 40.5]]; y = row sums of s + x.
  const float* y = ex.value()->tensor("y")->f32();
  EXPECT_FLOAT_EQ(y[0], 65);
  EXPECT_FLOAT_EQ(y[1], 71.5);
}

TEST(Listing, RunsIntegerConstsThroughConcatAndSlice) {
  Context ctx;
  ctx.set_opt_level(0);  // reads temporaries (%flat, %sevens), which -O1 removes as dead
  Program p(ctx);
  ASSERT_OK(program_parse_file("tests/golden/integers.nnasm", &p));
  auto ex = Executor::prepare(p);
  ASSERT_TRUE(ex) << ex.status().message();
  Tensor* ids = ex.value()->tensor("ids");
  for (int i = 0; i < 6; ++i) ids->i32()[i] = 10 * i;
  ex.value()->run();
  // joined = [[0,10,20,-1,-1,7], [30,40,50,2147483647,-2147483648,8]]; mid = joined[:, 1:5].
  const int32_t want[] = {10, 20, -1, -1, 40, 50, 2147483647, -2147483648};
  const int32_t* flat = ex.value()->tensor("flat")->i32();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(flat[i], want[i]);
  EXPECT_EQ(ex.value()->tensor("sevens")->i32()[5], 7);
}

// ---- errors: one per kind, with exact positions ----

const char* const HEAD = "input %x : f32[2,3]\nparam @w : f32[3,4] init=zeros\nforward:\n";  // 3 lines

TEST(ListingErrors, UnknownMnemonic) {
  EXPECT_ERROR(std::string(HEAD) + "  RELUU %x -> %y\n", "t.nnasm:4:3: error: unknown mnemonic 'RELUU'");
  EXPECT_ERROR(std::string(HEAD) + "  relu %x -> %y\n", "t.nnasm:4:3: error: unknown mnemonic 'relu'");
}

TEST(ListingErrors, OperandCount) {
  EXPECT_ERROR(std::string(HEAD) + "  RELU %x, %x -> %y\n", "t.nnasm:4:3: error: RELU takes 1 input, got 2");
  EXPECT_ERROR(std::string(HEAD) + "   ADD %x -> %y\n", "t.nnasm:4:4: error: ADD takes 2 inputs, got 1");
  EXPECT_ERROR(std::string(HEAD) + "  RELU -> %y\n", "t.nnasm:4:3: error: RELU takes 1 input, got 0");
  EXPECT_ERROR(std::string(HEAD) + "  RELU %x -> %y, %z\n", "t.nnasm:4:3: error: RELU takes 1 output, got 2");
}

TEST(ListingErrors, UndefinedTensor) {
  EXPECT_ERROR(std::string(HEAD) + "  RELU %x -> %a\n  ADD %a, %q -> %b\n", "t.nnasm:5:11: error: undefined tensor %q");
  // Defined only further down.
  EXPECT_ERROR(std::string(HEAD) + "  RELU %b -> %a\n  RELU %x -> %b\n", "t.nnasm:4:8: error: undefined tensor %b");
  // An output line declares a name but does not define it.
  EXPECT_ERROR("input %x : f32[2]\noutput %y\nforward:\n  NEG %y -> %z\n  NEG %x -> %y\n",
               "t.nnasm:4:7: error: undefined tensor %y");
}

TEST(ListingErrors, Redefinition) {
  EXPECT_ERROR("input %x : f32[2]\ninput %x : f32[3]\n", "t.nnasm:2:7: error: redefinition of %x (declared at line 1)");
  EXPECT_ERROR("input %x : f32[2]\nparam @x : f32[3]\n", "t.nnasm:2:7: error: redefinition of @x");
  EXPECT_ERROR(std::string(HEAD) + "  RELU %x -> %a\n  NEG %x -> %a\n", "t.nnasm:5:13: error: redefinition of %a");
  EXPECT_ERROR(std::string(HEAD) + "  RELU %x -> %x\n", "t.nnasm:4:14: error: redefinition of %x");
  EXPECT_ERROR("input %x : f32[2]\noutput %x\noutput %x\n", "t.nnasm:3:8: error: duplicate output %x");
}

TEST(ListingErrors, ShapeMismatch) {
  EXPECT_ERROR(std::string(HEAD) + "  ADD %x, @w -> %y\n", "t.nnasm:4:3: error: ADD");
  EXPECT_ERROR(std::string(HEAD) + "  MATMUL @w, %x -> %y\n", "t.nnasm:4:3: error: MATMUL: inner dimensions differ");
  // A declared output type must be what the instruction makes.
  EXPECT_ERROR(std::string(HEAD) + "output %y : f32[2,3]\n  MATMUL %x, @w -> %y\n",
               "t.nnasm:5:3: error: MATMUL: output %y is declared f32[2,3] but the instruction makes f32[2,4]");
  EXPECT_ERROR("input %x : f32[2]\noutput %x : f32[3]\n",
               "t.nnasm:2:13: error: output %x is declared f32[3] but it is f32[2]");
}

TEST(ListingErrors, BadImmediate) {
  const std::string h = HEAD;
  EXPECT_ERROR(h + "  ADD %x, %x -> %y gamma=1\n",
               "t.nnasm:4:20: error: ADD has no immediate 'gamma' (it takes alpha, beta)");
  EXPECT_ERROR(h + "  RELU %x -> %y alpha=1\n", "t.nnasm:4:17: error: RELU takes no immediates");
  EXPECT_ERROR(h + "  ADD %x, %x -> %y alpha=x\n",
               "t.nnasm:4:20: error: immediate 'alpha' of ADD takes a number, got 'x'");
  EXPECT_ERROR(h + "  SOFTMAX %x -> %y axis=1.5\n",
               "t.nnasm:4:20: error: immediate 'axis' of SOFTMAX takes an integer");
  EXPECT_ERROR(h + "  MATMUL %x, @w -> %y transA=2\n",
               "t.nnasm:4:23: error: immediate 'transA' of MATMUL takes 0 or 1");
  EXPECT_ERROR(h + "  RESHAPE %x -> %y shape=6\n", "t.nnasm:4:20: error: immediate 'shape' of RESHAPE takes a list");
  EXPECT_ERROR(h + "  RESHAPE %x -> %y shape=[2,3.5]\n",
               "t.nnasm:4:20: error: immediate 'shape' of RESHAPE takes a list of integers");
  EXPECT_ERROR(h + "  GELU %x -> %y approx=fast\n",
               "t.nnasm:4:17: error: immediate 'approx' of GELU must be one of none|tanh, got 'fast'");
  EXPECT_ERROR(h + "  ADD %x, %x -> %y beta=1 beta=2\n", "t.nnasm:4:27: error: immediate 'beta' given twice");
  EXPECT_ERROR(h + "  SLICE %x -> %y axis=0 end=1\n", "t.nnasm:4:3: error: SLICE needs immediate 'start'");
  EXPECT_ERROR(h + "  ADD %x, %x -> %y alpha 1\n", "t.nnasm:4:26: error: expected '=' after 'alpha'");
}

TEST(ListingErrors, MissingArrow) {
  EXPECT_ERROR(std::string(HEAD) + "  RELU %x %y\n",
               "t.nnasm:4:11: error: expected ',' or '->' after an input, got '%y'");
  EXPECT_ERROR(std::string(HEAD) + "  RELU %x  ; no arrow\n",
               "t.nnasm:4:12: error: expected ',' or '->' after an input, got end of line");
  EXPECT_ERROR(std::string(HEAD) + "  RELU %x ->\n",
               "t.nnasm:4:13: error: expected an output operand like %y, got end of line");
}

TEST(ListingErrors, BadNumber) {
  EXPECT_ERROR("const @k : f32[3] = [1, 1.2.3, 3]\n", "t.nnasm:1:25: error: bad number '1.2.3'");
  EXPECT_ERROR("const @k : f32[3] = [1, --1, 3]\n", "t.nnasm:1:25: error: bad number '--1'");
  EXPECT_ERROR("const @k : f32[3] = [1, 2,\n 1e]\n", "t.nnasm:2:2: error: bad number '1e'");
  EXPECT_ERROR("const @k : f32[1] = [1e39]\n", "t.nnasm:1:22: error: number '1e39' is out of f32 range");
  EXPECT_ERROR("const @k : f32[1] = [-nan]\n", "t.nnasm:1:22: error: bad number '-nan'");
  EXPECT_ERROR("const @k : i32[2] = [1, 2.5]\n", "t.nnasm:1:25: error: an i32 value must be an integer");
  EXPECT_ERROR("const @k : i32[1] = [2147483648]\n", "t.nnasm:1:22: error: an i32 value must be an integer");
  EXPECT_ERROR(std::string(HEAD) + "  SCALE %x -> %y alpha=0x10\n", "t.nnasm:4:24: error: bad number '0x10'");
  EXPECT_ERROR(std::string(HEAD) + "  SOFTMAX %x -> %y axis=1-\n", "t.nnasm:4:25: error: bad number '1-'");
}

TEST(ListingErrors, BadTypeOrShape) {
  EXPECT_ERROR("input %x : f64[2]\n", "t.nnasm:1:12: error: unknown element type 'f64'");
  EXPECT_ERROR("input %x : [2]\n", "t.nnasm:1:12: error: expected a type like f32[2,3], got '['");
  EXPECT_ERROR("input %x : f32 2\n", "t.nnasm:1:16: error: expected '[' after 'f32'");
  EXPECT_ERROR("input %x : f32[2,]\n", "t.nnasm:1:18: error: expected a dimension");
  EXPECT_ERROR("input %x : f32[2;3]\n", "t.nnasm:1:17: error: expected ',' or ']' in the shape, got end of line");
  EXPECT_ERROR("input %x : f32[2,0]\n", "t.nnasm:1:12: error: %x: dimension 1 is 0, must be positive");
  EXPECT_ERROR("input %x : f32[1,1,1,1,1,1,1]\n", "t.nnasm:1:28: error: a shape has at most 6 dimensions");
  EXPECT_ERROR("input %x : f32[65536,65536,2]\n", "t.nnasm:1:12: error: %x: shape [65536,65536,2] has more than");
  EXPECT_ERROR("input %x : f32[99999999999999999999]\n", "t.nnasm:1:16: error: expected a dimension");
  EXPECT_ERROR("input %x f32[2]\n", "t.nnasm:1:10: error: expected ':' and a type after '%x'");
}

TEST(ListingErrors, InitKinds) {
  EXPECT_ERROR("param @w : f32[2] init=gaussian\n", "t.nnasm:1:24: error: unknown init kind 'gaussian'");
  EXPECT_ERROR("param @w : f32[2] init=none\n", "t.nnasm:1:24: error: unknown init kind 'none'");
  EXPECT_ERROR("param @w : f32[2] init=uniform low=0\n", "t.nnasm:1:24: error: init=uniform needs high=");
  EXPECT_ERROR("param @w : f32[2] init=normal mean=0 sd=1\n",
               "t.nnasm:1:38: error: init=normal takes mean and std, not 'sd'");
  EXPECT_ERROR("param @w : f32[2] init=ones value=1\n", "t.nnasm:1:29: error: init=ones takes no arguments");
  EXPECT_ERROR("const @k : f32[2]\n", "t.nnasm:1:1: error: const @k needs values");
}

TEST(ListingErrors, ValueCount) {
  EXPECT_ERROR("const @k : f32[2,2] = [1, 2, 3]\n", "t.nnasm:1:23: error: @k has 3 values but f32[2,2] holds 4");
  EXPECT_ERROR("const @k : f32[2] = [1, 2, 3]\n", "t.nnasm:1:28: error: too many values: @k is f32[2], which holds 2");
  EXPECT_ERROR("const @k : f32[2] = [1, 2\n", "t.nnasm:2:1: error: expected ',' or ']' in the values, got end of file");
}

TEST(ListingErrors, WrongSigil) {
  EXPECT_ERROR("input @x : f32[2]\n", "t.nnasm:1:7: error: wrong sigil: input @x is written %x");
  EXPECT_ERROR("param %w : f32[2]\n", "t.nnasm:1:7: error: wrong sigil: param %w is written @w");
  EXPECT_ERROR(std::string(HEAD) + "  MATMUL %x, %w -> %y\n", "t.nnasm:4:14: error: wrong sigil: %w is declared as @w");
  EXPECT_ERROR(std::string(HEAD) + "  RELU @x -> %y\n", "t.nnasm:4:8: error: wrong sigil: @x is declared as %x");
  EXPECT_ERROR(std::string(HEAD) + "  RELU %x -> @y\n", "t.nnasm:4:14: error: wrong sigil: @y is not declared");
  EXPECT_ERROR("output @y\n", "t.nnasm:1:8: error: wrong sigil: @y is not declared");
  EXPECT_ERROR("param @w : f32[2] init=ones\noutput %w\n", "t.nnasm:2:8: error: wrong sigil: %w is declared as @w");
}

TEST(ListingErrors, UnexpectedText) {
  EXPECT_ERROR("input %x : f32[2] init=zeros\n", "t.nnasm:1:19: error: unexpected 'init'");
  EXPECT_ERROR(std::string(HEAD) + "  RELU %x -> %y 3\n", "t.nnasm:4:17: error: unexpected '3'");
  EXPECT_ERROR("input %x : f32[2] $\n", "t.nnasm:1:19: error: unexpected character '$'");
  EXPECT_ERROR("input %x : f32[2]\n\x01", "t.nnasm:2:1: error: unexpected byte 0x01");
  EXPECT_ERROR("input % x : f32[2]\n", "t.nnasm:1:7: error: expected a name after '%'");
  EXPECT_ERROR("tensor %x : f32[2]\n", "t.nnasm:1:1: error: expected a declaration");
  EXPECT_ERROR(std::string(HEAD) + "  SCALE %x -> %y alpha=&\n", "t.nnasm:4:24: error: unexpected character '&'");
}

TEST(ListingErrors, Sections) {
  EXPECT_ERROR("input %x : f32[2]\nRELU %x -> %y\n", "t.nnasm:2:1: error: instruction before 'forward:'");
  EXPECT_ERROR("forward:\ninput %x : f32[2]\n", "t.nnasm:2:1: error: declarations must come before 'forward:'");
  EXPECT_ERROR("forward:\n forward:\n", "t.nnasm:2:2: error: duplicate section 'forward:'");
  EXPECT_ERROR("backwards:\n", "t.nnasm:1:1: error: unknown section 'backwards'");
  EXPECT_ERROR("forward: RELU\n", "t.nnasm:1:10: error: unexpected 'RELU'");
  EXPECT_ERROR("forward:\n  3 %x\n", "t.nnasm:2:3: error: expected an instruction, got '3'");
}

TEST(ListingErrors, OutputNeverDefined) {
  EXPECT_ERROR("input %x : f32[2]\noutput  %y\nforward:\n  RELU %x -> %z\n",
               "t.nnasm:2:9: error: output %y is never defined");
}

TEST(ListingErrors, FilesAndPreconditions) {
  Context ctx;
  Program p(ctx);
  Status s = program_parse_file("tests/golden/no-such-file.nnasm", &p);
  EXPECT_EQ(s.message(), "tests/golden/no-such-file.nnasm: error: cannot read: No such file or directory");
  s = program_parse_file("tests/golden", &p);
  EXPECT_EQ(s.message().rfind("tests/golden: error: cannot read: ", 0), 0u) << s.message();
  ASSERT_OK(program_parse("input %x : f32[2]\n", "a.nnasm", &p));
  s = program_parse("input %y : f32[2]\n", "b.nnasm", &p);
  EXPECT_EQ(s.message(), "b.nnasm: error: the program to parse into is not empty");
}

TEST(ListingNumbers, StrictSyntax) {
  double d;
  int64_t i;
  for (const char* ok : {"0", "-1", "+2", "1.5", ".5", "5.", "1e5", "1E-5", "-2.5e+3", "inf", "-inf", "nan"})
    EXPECT_TRUE(parse_f64(ok, &d)) << ok;
  for (const char* bad : {"", "-", "+", ".", "1.2.3", "--1", "+-1", "1e", "1e+", "e5", "0x10", "infinity", "-nan",
                          "1e999", "1,5", " 1", "1 "})
    EXPECT_FALSE(parse_f64(bad, &d)) << bad;
  ASSERT_TRUE(parse_f64("-2.5e+3", &d));
  EXPECT_EQ(d, -2500.0);
  for (const char* ok : {"0", "-1", "+2", "9223372036854775807", "-9223372036854775808"})
    EXPECT_TRUE(parse_i64(ok, &i)) << ok;
  for (const char* bad : {"", "-", "+", "+-1", "--1", "1.0", "1e3", "9223372036854775808", "0x1"})
    EXPECT_FALSE(parse_i64(bad, &i)) << bad;
}

// ---- robustness ----

// Whatever the bytes, the parser returns: a program whose listing round-trips, or an error that
// names the file. Deterministic (fixed seed), a few thousand cases.
TEST(ListingFuzz, RandomBytesAndMutationsOfGoldenFiles) {
  std::mt19937 rng(12345);
  std::vector<std::string> seeds;
  for (const char* f : {"mlp.nnasm", "immediates.nnasm", "integers.nnasm"})
    seeds.push_back(read_text(std::string("tests/golden/") + f));
  ASSERT_FALSE(seeds[0].empty());
  const std::string alphabet = "%@:,[]=->; \n\t0123456789.eE+-_abcxyzfi32RELUADDforwardinputparamconstoutput";
  const char* const pieces[] = {"->", "[", "]", ",", "=", "%t0", "@w1", "f32[", "i32[2]", "nan", "-inf", "1e",
                                "output %q\n", "forward:\n", "\n", ";", "init=", "axis=", "99999999999", "-1", "0"};
  int parsed = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string text;
    if (iter % 4 == 0) {
      const size_t n = rng() % 200;
      for (size_t k = 0; k < n; ++k)
        text += iter % 8 == 0 ? static_cast<char>(rng() & 0xff) : alphabet[rng() % alphabet.size()];
    } else {
      text = seeds[rng() % seeds.size()];
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits && !text.empty(); ++e) {
        const size_t at = rng() % text.size();
        switch (rng() % 4) {
          case 0: text.erase(at, 1 + rng() % 8); break;
          case 1: text.insert(at, pieces[rng() % (sizeof pieces / sizeof *pieces)]); break;
          case 2: text[at] = alphabet[rng() % alphabet.size()]; break;
          case 3: text.insert(at, text.substr(rng() % text.size(), rng() % 40)); break;
        }
      }
    }
    Context ctx;
    Program p(ctx);
    Status s = program_parse(text, "fuzz.nnasm", &p);
    if (s) {
      ++parsed;
      const std::string once = program_print(p);
      ASSERT_EQ(reprint(once), once) << "input:\n" << text;
    } else {
      ASSERT_EQ(s.message().rfind("fuzz.nnasm:", 0), 0u) << s.message();
      ASSERT_NE(s.message().find(": error: "), std::string::npos) << s.message();
    }
  }
  EXPECT_GT(parsed, 50);  // the mutations must also reach past the first line
}

}  // namespace
}  // namespace nnasm

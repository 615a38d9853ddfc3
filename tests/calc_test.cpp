// CALC and its expression language: texts parse and print back in one canonical form, every
// kind of mistake is reported at its column, shape inference refuses what cannot be computed,
// and a CALC made by the chain-fusion pass computes bit for bit what the chain of ops it replaces
// computes, on the reference kernels and at every JIT level the machine has.
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/executor.h"
#include "engine/passes/pass.h"
#include "ops/elementwise/expr.h"
#include "serialize/listing.h"
#include "shell/shell.h"
#include "tests/jit_levels.h"

namespace nnasm {
namespace {

std::string reprinted(const std::string& text) {
  Result<std::vector<ExprNode>> nodes = expr_parse(text);
  return nodes ? expr_print(nodes.value()) : "error: " + nodes.status().message();
}

std::string parse_error(const std::string& text) {
  Result<std::vector<ExprNode>> nodes = expr_parse(text);
  return nodes ? "parsed" : nodes.status().message();
}

TEST(CalcExpr, PrintsBackInCanonicalForm) {
  const std::pair<const char*, const char*> cases[] = {
      {"exp(sub(%0,%1))", "exp(sub(%0,%1))"},
      {" exp ( sub( %0 , %1 ) ) ", "exp(sub(%0,%1))"},
      {"add(%0,%1,alpha=1,beta=2)", "add(%0,%1,beta=2)"},
      {"gelu(%0,approx=none)", "gelu(%0)"},
      {"gelu(%12,approx=tanh)", "gelu(%12,approx=tanh)"},
      {"scale(%0,alpha=.5)", "scale(%0,alpha=0.5)"},
      {"mul(%0,-1.5e2)", "mul(%0,-150)"},
      {"maximum(+2,-inf)", "maximum(2,-inf)"},
      {"mul(nan,inf)", "mul(nan,inf)"},
      {"act_bwd(%0,%1,fn=swish,alpha=1.5)", "act_bwd(%0,%1,fn=swish,alpha=1.5)"},
      {"leakyrelu(clipped_relu(elu(%0,alpha=0.7),threshold=2),slope=0.2)",
       "leakyrelu(clipped_relu(elu(%0,alpha=0.7),threshold=2),slope=0.2)"},
      {"%3", "%3"},
      {"0.1", "0.1"},
  };
  for (const auto& [in, want] : cases) EXPECT_EQ(reprinted(in), want) << in;
}

TEST(CalcExpr, NodesComeAfterTheirArguments) {
  Result<std::vector<ExprNode>> n = expr_parse("add(exp(%0),1.5,beta=2)");
  ASSERT_TRUE(n) << n.status().message();
  ASSERT_EQ(n->size(), 4u);
  EXPECT_EQ(n.value()[0].kind, ExprKind::INPUT);
  EXPECT_EQ(n.value()[1].kind, ExprKind::CALL);
  EXPECT_EQ(n.value()[1].op, Opcode::EXP);
  EXPECT_EQ(n.value()[1].arg[0], 0);
  EXPECT_EQ(n.value()[2].kind, ExprKind::CONST);
  EXPECT_EQ(n.value()[2].value, 1.5f);
  EXPECT_EQ(n.value()[3].op, Opcode::ADD);
  EXPECT_EQ(n.value()[3].arg[0], 1);
  EXPECT_EQ(n.value()[3].arg[1], 2);
  EXPECT_EQ(n.value()[3].imm.f[0], 1.f);
  EXPECT_EQ(n.value()[3].imm.f[1], 2.f);
  EXPECT_EQ(n.value()[3].col, 1);
  // Into a caller's array: too small is an error, not an overrun.
  ExprNode three[3];
  int count = 0;
  EXPECT_FALSE(expr_parse("add(exp(%0),1.5,beta=2)", three, 3, &count));
}

// neg(neg(…(%0)…)) 70 deep.
std::string deep_nesting() {
  std::string s;
  for (int i = 0; i < 70; ++i) s += "neg(";
  return s + "%0" + std::string(70, ')');
}

TEST(CalcExpr, ErrorsNameTheColumn) {
  const std::pair<std::string, const char*> cases[] = {
      {"", "column 1: expected an input like %0, a number or a call like exp(...), got the end"},
      {"exq(%0)", "column 1: unknown function 'exq'"},
      {"EXP(%0)", "column 1: unknown function 'EXP' (names are lowercase)"},
      {"exp(softmax(%0))", "column 5: SOFTMAX is not an elementwise op"},
      {"calc(%0)", "column 1: CALC is not an elementwise op"},
      {"add(%0)", "column 1: add takes 2 arguments, got 1"},
      {"exp(%0,%1)", "column 1: exp takes 1 argument, got 2"},
      {"exp()", "column 5: expected an input like %0, a number or a call like exp(...), got ')'"},
      {"exp(%0", "column 7: expected ',' or ')' in exp(...), got the end"},
      {"exp(%0))", "column 8: unexpected ')' after the expression"},
      {"exp", "column 4: expected '(' after 'exp', got the end"},
      {"%", "column 2: expected an input number after '%', got the end"},
      {"%99999999999", "column 2: input number too large"},
      {"relu(%0,slope=1)", "column 9: relu takes no immediates, got 'slope'"},
      {"add(%0,%1,gamma=1)", "column 11: add has no immediate 'gamma' (it takes alpha, beta)"},
      {"add(%0,%1,alpha=1,alpha=2)", "column 19: immediate 'alpha' given twice"},
      {"gelu(%0,approx=fast)", "column 16: immediate 'approx' of gelu must be one of none|tanh, got 'fast'"},
      {"add(%0,alpha=2,%1)", "column 16: arguments of add come before its immediates"},
      {"act_bwd(%0,%1)", "column 1: act_bwd needs immediate 'fn'"},
      {"mul(%0,1.2.3)", "column 8: bad number '1.2.3'"},
      {"mul(%0,1e)", "column 8: bad number '1e'"},
      {"mul(%0,-nan)", "column 8: bad number '-nan'"},
      {"mul(%0,1e39)", "column 8: number '1e39' is out of f32 range"},
      {"mul(%0,1e400)", "column 8: bad number '1e400'"},
      {"scale(%0,alpha=x)", "column 16: bad number 'x'"},
      {deep_nesting(), "column 257: nested more than 64 deep"},
  };
  for (const auto& [text, want] : cases) EXPECT_EQ(parse_error(text), want) << text;
}

// ---- CALC in programs ----

std::string record_error(const std::vector<Shape>& shapes, const std::string& expr) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  std::vector<Var> in;
  for (size_t k = 0; k < shapes.size(); ++k) in.push_back(g.input("x" + std::to_string(k), shapes[k]));
  calc(in, expr);
  return g.status() ? "" : g.status().message();
}

TEST(CalcShape, ErrorsSayWhatIsWrong) {
  auto has = [](const std::string& msg, const std::string& part) { return msg.find(part) != std::string::npos; };
  std::string e = record_error({Shape{3, 4}}, "add(%0,%1)");
  EXPECT_TRUE(has(e, "CALC: bad expr \"add(%0,%1)\": column 8: %1 is out of range (1 input)")) << e;
  e = record_error({Shape{3, 4}, Shape{4}}, "exq(%0)");
  EXPECT_TRUE(has(e, "CALC: bad expr \"exq(%0)\": column 1: unknown function 'exq'")) << e;
  e = record_error({Shape{3, 4}, Shape{5}}, "add(%0,%1)");
  EXPECT_TRUE(has(e, "CALC: operand 2 (f32[5]) does not broadcast with the inputs before it ([3,4])")) << e;
  EXPECT_EQ(record_error({Shape{3, 1}, Shape{4}, Shape()}, "add(%0,%1)"), "");  // %2 only broadcasts
}

TEST(CalcShape, OutputIsTheBroadcastOfEveryInput) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var y = calc({g.input("a", {3, 1}), g.input("b", {4}), g.input("c", {2, 1, 1})}, "mul(%0,%1)");
  ASSERT_TRUE(g.status()) << g.status().message();
  EXPECT_EQ(y.shape(), (Shape{2, 3, 4}));
}

TEST(CalcListing, ErrorsAtTheirPlace) {
  const std::string head = "input %x : f32[2,3]\nforward:\n";
  auto error = [](const std::string& text) {
    Context ctx;
    Program p(ctx);
    const Status s = program_parse(text, "t.nnasm", &p);
    return s ? std::string("parsed") : s.message();
  };
  EXPECT_EQ(error(head + "  CALC %x -> %y expr=\"exq(%0)\"\n"),
            "t.nnasm:3:3: error: CALC: bad expr \"exq(%0)\": column 1: unknown function 'exq'");
  EXPECT_EQ(error(head + "  CALC %x -> %y expr=exp(%0)\n"),
            "t.nnasm:3:17: error: immediate 'expr' of CALC takes a string in double quotes, got 'exp'");
  EXPECT_EQ(error(head + "  CALC %x -> %y expr=\"exp(%0)\n"), "t.nnasm:3:22: error: unterminated string");
  EXPECT_EQ(error(head + "  CALC %x -> %y expr=\"exp\\(%0)\"\n"),
            "t.nnasm:3:26: error: a backslash in a string escapes only '\"' and '\\'");
  EXPECT_EQ(error(head + "  CALC %x -> %y\n"), "t.nnasm:3:3: error: CALC needs immediate 'expr'");
  EXPECT_EQ(error(head + "  CALC %x -> %y expr=\"neg(%0)\"  ; a comment \"with quotes\"\n"), "parsed");
}

// ---- CALC made by the pass equals the chain, bitwise ----

struct ChainCase {
  const char* name;
  std::function<Var(Var a, Var b, Var c)> chain;  // a: [3,37], b: [37], c: [3,1]
  const char* expr;                               // what chain-fusion makes of it
};

std::vector<ChainCase> chain_cases() {
  return {
      {"softmax numerator", [](Var a, Var, Var c) { return exp(a - c); }, "exp(sub(%0,%1))"},
      {"a leaf read twice", [](Var a, Var b, Var) { return tanh((a + b) * a); }, "tanh(mul(add(%0,%1),%0))"},
      {"every unary op",
       [](Var a, Var, Var) {
         Var u = scale(neg(a), 0.5f) + exp(tanh(a)) + log(square(a) + sigmoid(a)) + sqrt(abs(a));
         Var v = relu(a) + leakyrelu(a, 0.1f) + elu(a) + clipped_relu(a, 0.5f);
         return maximum(u, v) + (gelu(a) * gelu(a, true) * swish(a, 1.5f) - step(a));
       },
       nullptr},
      {"binary ops with immediates", [](Var a, Var b, Var c) { return minimum(add(a, b, 0.5f, -2.f) / (c + a), a); },
       "minimum(div(add(%0,%1,alpha=0.5,beta=-2),add(%2,%0)),%0)"},
  };
}

struct Outcome {
  std::vector<float> y;
  std::string kernel;
};

Outcome run(const Program& p, const JitConfig& jit) {
  Context& ctx = *Context::of(p);
  ctx.set_jit(jit);
  ctx.set_opt_level(0);
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(p);
  EXPECT_TRUE(ex) << ex.status().message();
  if (!ex) return {};
  const char* names[] = {"a", "b", "c"};
  for (int k = 0; k < 3; ++k) {
    Tensor* t = ex.value()->tensor(names[k]);
    for (int64_t i = 0; i < t->numel(); ++i) t->f32()[i] = std::sin(1.3f * static_cast<float>(i) + static_cast<float>(k));
  }
  ex.value()->run();
  const Tensor* y = ex.value()->tensor("y");
  return {std::vector<float>(y->f32(), y->f32() + y->numel()), ex.value()->kernel_name(p.code().size() - 1)};
}

TEST(CalcChain, FusedEqualsTheChainBitwise) {
  std::vector<JitConfig> levels = {JitConfig{false, Isa::REF}};
  for (Isa isa : jit_levels()) levels.push_back(JitConfig{true, isa});
  for (const ChainCase& c : chain_cases()) {
    SCOPED_TRACE(c.name);
    Context ctx;
    Program chain(ctx);
    Graph g(chain);
    g.output(c.chain(g.input("a", {3, 37}), g.input("b", {37}), g.input("c", {3, 1})), "y");
    ASSERT_TRUE(g.status()) << g.status().message();
    Program fused = chain;
    ASSERT_TRUE(optimize(fused, 1, nullptr, {"chain-fusion"}));
    ASSERT_EQ(fused.code().size(), 1u) << program_print(fused);
    ASSERT_EQ(fused.code()[0].op, Opcode::CALC);
    if (c.expr) {
      EXPECT_EQ(fused.code()[0].imm[0].ident, c.expr);
    }
    for (const JitConfig& jit : levels) {
      SCOPED_TRACE(isa_name(jit.isa()));
      const Outcome want = run(chain, jit), got = run(fused, jit);
      ASSERT_EQ(want.y.size(), got.y.size());
      EXPECT_EQ(std::memcmp(want.y.data(), got.y.data(), want.y.size() * 4), 0);
      EXPECT_EQ(got.kernel, jit.enabled ? fmt::format("f32_calc__{}", isa_name(jit.isa())) : "ref");
    }
  }
}

}  // namespace
}  // namespace nnasm

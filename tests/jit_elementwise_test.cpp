// Generated elementwise kernels against the reference kernels, stamped from the opcode table:
// every unary, binary and ACT_BWD op (every one of them must have a JIT hook and a case here) at
// every ISA level the machine has, over sizes 1…W−1, W, W+1, 2W+3, 5W+3 and a large one, and the
// broadcast patterns of binary ops. Each run goes through Program + Executor twice, once with the
// JIT at the level under test and once with it off (the oracle), and checks: the kernel that ran is
// the generated one (by name), the results match (bitwise for IEEE-exact ops, within a tolerance
// for the ones built on jit/vmath.h), the output's padding is untouched (guard band), the
// inputs are unchanged. Every kernel also computes the same bits with its output written over an
// input (in place, as the memory planner arranges). Also: code pages are never writable and
// executable at once, and the kernel cache hands out one kernel per descriptor.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engine/executor.h"
#include "isa/program.h"
#include "tests/jit_levels.h"
#include "tests/one_op_program.h"

namespace nnasm {
namespace {

constexpr uint32_t GUARD = 0x7fa5a5a5u;  // a NaN payload no kernel computes

struct Tol {
  double atol = 0, rtol = 0;
  bool exact() const { return atol == 0 && rtol == 0; }
};

struct Case {
  std::string label;      // test name
  Opcode op;
  std::vector<std::pair<std::string, Imm>> imms;
  std::string jit_op;     // the kernel name's semantic part, e.g. "gelu_tanh", "act_bwd_elu"
  Tol tol;                // {0, 0}: bitwise
  double lo = -4, hi = 4;  // range of x (the last input)
  bool specials = true;   // inject NaN, ±inf, ±0, a denormal (only where the reference's limits agree)
  int n_in = 0;           // inputs, for a variadic op (CALC); 0: the op's count
};

Imm enum_imm(int64_t i) {
  Imm m;
  m.type = ImmType::ENUM;
  m.i = i;
  return m;
}

const Tol EXACT{0, 0};
const Tol MATH{1e-38, 1e-6};  // a few ulp on both sides; atol for denormal results
const Tol CANCEL{4e-7, 1e-6};  // the reference loses absolute accuracy (1 + erf, 1 − t², s(1 − s))
const Tol CANCEL_GELU_TANH_BWD{2e-6, 1e-6};  // 1 − tanh²u in float, times up to |x|·k·(1 + 3cx²) ≈ 17
const Tol COMPOSED{1e-6, 4e-6};  // CALC: the errors of several vmath-based ops add up

Imm str_imm(const char* s) {
  Imm m;
  m.type = ImmType::STR;
  m.ident = s;
  return m;
}

std::vector<Case> unary_cases() {
  return {
      {"SCALE", Opcode::SCALE, {{"alpha", imm_f(0.75)}}, "scale", EXACT},
      {"SCALE_neg3", Opcode::SCALE, {{"alpha", imm_f(-3)}}, "scale", EXACT},
      {"NEG", Opcode::NEG, {}, "neg", EXACT},
      {"EXP", Opcode::EXP, {}, "exp", MATH, -100, 90},
      {"LOG", Opcode::LOG, {}, "log", MATH, -1, 50},
      {"SQRT", Opcode::SQRT, {}, "sqrt", EXACT, -1, 50},
      {"ABS", Opcode::ABS, {}, "abs", EXACT},
      {"SQUARE", Opcode::SQUARE, {}, "square", EXACT},
      {"RELU", Opcode::RELU, {}, "relu", EXACT},
      {"LEAKYRELU", Opcode::LEAKYRELU, {{"slope", imm_f(0.1)}}, "leakyrelu", EXACT},
      {"ELU", Opcode::ELU, {{"alpha", imm_f(1)}}, "elu", MATH, -8, 4},
      {"ELU_a1_5", Opcode::ELU, {{"alpha", imm_f(1.5)}}, "elu", MATH, -8, 4},
      {"CLIPPED_RELU", Opcode::CLIPPED_RELU, {{"threshold", imm_f(6)}}, "clipped_relu", EXACT, -8, 8},
      {"CLIPPED_RELU_half", Opcode::CLIPPED_RELU, {{"threshold", imm_f(0.5)}}, "clipped_relu", EXACT},
      {"SIGMOID", Opcode::SIGMOID, {}, "sigmoid", MATH, -30, 30},
      {"TANH", Opcode::TANH, {}, "tanh", MATH, -8, 8},
      {"GELU", Opcode::GELU, {}, "gelu", CANCEL, -6, 4, false},
      {"GELU_tanh", Opcode::GELU, {{"approx", enum_imm(1)}}, "gelu_tanh", CANCEL, -6, 4, false},
      {"SWISH", Opcode::SWISH, {{"beta", imm_f(1)}}, "swish", CANCEL, -20, 10, false},
      {"SWISH_b1_7", Opcode::SWISH, {{"beta", imm_f(1.7)}}, "swish", CANCEL, -20, 10, false},
      {"STEP", Opcode::STEP, {}, "step", EXACT},
      {"ERF", Opcode::ERF, {}, "erf", MATH, -6, 6},
      {"CLAMP", Opcode::CLAMP, {{"min", imm_f(-1.5)}, {"max", imm_f(2)}}, "clamp", EXACT},
      {"CLAMP_min_only", Opcode::CLAMP, {{"min", imm_f(0)}, {"max", imm_f(INFINITY)}}, "clamp", EXACT},
      {"CLAMP_empty", Opcode::CLAMP, {{"min", imm_f(1)}, {"max", imm_f(-1)}}, "clamp", EXACT},
      {"RECIPROCAL", Opcode::RECIPROCAL, {}, "reciprocal", EXACT},
      {"FLOOR", Opcode::FLOOR, {}, "floor", EXACT, -100, 100},
      {"CEIL", Opcode::CEIL, {}, "ceil", EXACT, -100, 100},
      // Halves (x.5) come up often enough at this range and float spacing to meet the ties.
      {"ROUND", Opcode::ROUND, {}, "round", EXACT, -8, 8},
      {"ROUND_wide", Opcode::ROUND, {}, "round", EXACT, -3e7, 3e7},
      {"SIGN", Opcode::SIGN, {}, "sign", EXACT},
      {"SOFTPLUS", Opcode::SOFTPLUS, {}, "softplus", MATH, -110, 30},
      {"HARDSIGMOID", Opcode::HARDSIGMOID, {{"alpha", imm_f(0.2)}, {"beta", imm_f(0.5)}}, "hardsigmoid", EXACT, -8, 8},
      {"HARDSWISH", Opcode::HARDSWISH, {}, "hardswish", EXACT, -8, 8},
      {"SELU", Opcode::SELU, {{"alpha", imm_f(1.6732632)}, {"gamma", imm_f(1.050701)}}, "selu", MATH, -8, 4},
  };
}

std::vector<Case> binary_cases() {
  return {
      {"ADD", Opcode::ADD, {}, "add", EXACT},
      {"ADD_scaled", Opcode::ADD, {{"alpha", imm_f(0.5)}, {"beta", imm_f(-2)}}, "add", EXACT},
      {"SUB", Opcode::SUB, {}, "sub", EXACT},
      {"MUL", Opcode::MUL, {}, "mul", EXACT},
      {"DIV", Opcode::DIV, {}, "div", EXACT},
      {"MAXIMUM", Opcode::MAXIMUM, {}, "maximum", EXACT},
      {"MINIMUM", Opcode::MINIMUM, {}, "minimum", EXACT},
      {"PRELU", Opcode::PRELU, {}, "prelu", EXACT},
      {"EQUAL", Opcode::EQUAL, {}, "equal", EXACT},
      {"LESS", Opcode::LESS, {}, "less", EXACT},
      {"LESS_EQUAL", Opcode::LESS_EQUAL, {}, "less_equal", EXACT},
      {"GREATER", Opcode::GREATER, {}, "greater", EXACT},
      {"GREATER_EQUAL", Opcode::GREATER_EQUAL, {}, "greater_equal", EXACT},
  };
}

// WHERE: three streamed operands (its broadcasts run through the parity suite at the native level).
std::vector<Case> select_cases() { return {{"WHERE", Opcode::WHERE, {}, "where", EXACT}}; }

// ACT_BWD's fn values in opcodes.def order.
std::vector<Case> act_bwd_cases() {
  auto c = [](const char* label, int64_t fn, double alpha, const char* name, Tol tol, double lo, double hi,
              bool specials) {
    return Case{label, Opcode::ACT_BWD, {{"fn", enum_imm(fn)}, {"alpha", imm_f(alpha)}}, std::string("act_bwd_") + name,
                tol, lo, hi, specials};
  };
  return {
      c("ACT_BWD_relu", 0, 0, "relu", EXACT, -4, 4, true),
      c("ACT_BWD_leakyrelu", 1, 0.1, "leakyrelu", EXACT, -4, 4, true),
      c("ACT_BWD_elu", 2, 1, "elu", MATH, -8, 4, true),
      c("ACT_BWD_elu_a0_7", 2, 0.7, "elu", MATH, -8, 4, true),
      c("ACT_BWD_clipped_relu", 3, 6, "clipped_relu", EXACT, -8, 8, true),
      c("ACT_BWD_clipped_relu_1", 3, 1, "clipped_relu", EXACT, -2, 2, true),
      c("ACT_BWD_sigmoid", 4, 0, "sigmoid", CANCEL, -20, 20, true),
      c("ACT_BWD_tanh", 5, 0, "tanh", CANCEL, -8, 8, true),
      c("ACT_BWD_gelu", 6, 0, "gelu", CANCEL, -6, 4, false),
      c("ACT_BWD_gelu_tanh", 7, 0, "gelu_tanh", CANCEL_GELU_TANH_BWD, -6, 4, false),
      c("ACT_BWD_swish", 8, 1, "swish", CANCEL, -20, 10, false),
      c("ACT_BWD_swish_b1_3", 8, 1.3, "swish", CANCEL, -20, 10, false),
      c("ACT_BWD_abs", 9, 0, "abs", EXACT, -4, 4, true),
  };
}

// CALC: compositions of the ops' snippets, with every op somewhere, and registers under pressure.
std::vector<Case> calc_cases() {
  auto c = [](const char* label, const char* expr, int n_in, Tol tol, double lo, double hi, bool specials) {
    return Case{label, Opcode::CALC, {{"expr", str_imm(expr)}}, "calc", tol, lo, hi, specials, n_in};
  };
  return {
      c("CALC_exp_sub", "exp(sub(%0,%1))", 2, MATH, -40, 40, true),
      c("CALC_exact_ops", "add(mul(%0,%1),scale(maximum(%0,neg(%1)),alpha=0.5),alpha=2,beta=-1)", 2, EXACT, -4, 4, true),
      c("CALC_exact_ops_2", "div(minimum(clipped_relu(%0,threshold=1.5),relu(%1)),add(sqrt(abs(%2)),square(%1)))", 3,
        EXACT, -4, 4, true),
      c("CALC_lstm", "mul(sigmoid(%0),tanh(%1))", 2, COMPOSED, -8, 8, true),
      c("CALC_activations",
        "add(maximum(gelu(%0,approx=tanh),swish(%1,beta=1.5)),minimum(elu(%0,alpha=1.2),leakyrelu(%1,slope=0.2)))", 2,
        COMPOSED, -4, 4, false),
      c("CALC_log_step_gelu", "sub(mul(gelu(%0),step(%1)),log(add(square(%2),1)))", 3, COMPOSED, -4, 4, false),
      c("CALC_act_bwd_constant", "mul(act_bwd(%0,%1,fn=tanh),2.5)", 2, COMPOSED, -4, 4, true),
      c("CALC_one_input_twice", "mul(%0,exp(neg(square(%0))))", 1, COMPOSED, -4, 4, true),
      c("CALC_input_only", "%1", 2, EXACT, -4, 4, true),
      // The ops added for imported models, composed: masks, clamps, erf, prelu, selu.
      c("CALC_import_ops",
        "add(clamp(erf(%0),min=-0.5,max=inf),mul(greater_equal(%1,%0),hardswish(prelu(%1,%0))))", 2, COMPOSED, -4, 4,
        false),
      c("CALC_import_ops_exact", "sub(mul(less(%0,%1),floor(%0)),div(sign(%1),ceil(clamp(%1,min=1,max=3))))", 2, EXACT,
        -4, 4, true),
      // The output register may be input 0's: a root reading input 0 second writes elsewhere first.
      c("CALC_root_reads_input0_second", "maximum(neg(%1),%0)", 2, EXACT, -4, 4, true),
  };
}

std::vector<Case> all_cases() {
  std::vector<Case> v = unary_cases();
  for (auto* more : {binary_cases, select_cases, act_bwd_cases, calc_cases})
    for (Case& c : more()) v.push_back(c);
  return v;
}

std::vector<Isa> isas() { return jit_levels(); }

int width(Isa isa) { return vector_floats(isa); }

std::vector<int64_t> sizes(Isa isa) {
  const int w = width(isa);
  std::vector<int64_t> s;
  for (int n = 1; n <= w + 1; ++n) s.push_back(n);
  s.push_back(2 * w + 3);
  s.push_back(5 * w + 3);
  s.push_back(10007);
  return s;
}

size_t padded_words(int64_t numel) { return std::max<size_t>(16, (static_cast<size_t>(numel) * 4 + 63) / 64 * 16); }

using Built = OneOpProgram;

std::unique_ptr<Built> build(const Case& c, const std::vector<Shape>& shapes, const JitConfig& jit, std::string* err) {
  std::vector<TensorType> types;
  for (const Shape& sh : shapes) types.push_back(TensorType{DType::F32, sh});
  return one_op_program(c.op, c.imms, types, false, jit, err);
}

std::vector<float> special_values() {
  return {NAN, INFINITY, -INFINITY, 0.f, -0.f, 1e-40f, -1e-40f, FLT_MAX, -FLT_MIN, 1.f};
}

// Values for input k of `c` (numel n): the last input is x, in [c.lo, c.hi] (ACT_BWD's dy comes
// first, in [−2, 2]), with specials at scattered positions in every operand (so binary ops meet
// them on either side).
std::vector<float> case_input(const Case& c, size_t k, size_t n_inputs, int64_t n, std::mt19937& rng) {
  const bool is_x = k + 1 == n_inputs || c.op != Opcode::ACT_BWD;
  std::uniform_real_distribution<double> u(is_x ? c.lo : -2, is_x ? c.hi : 2);
  const std::vector<float> sp = special_values();
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    v[i] = static_cast<float>(u(rng));
    if (c.specials && n >= 8 && i % 7 == static_cast<int64_t>(k) && (i / 7) < static_cast<int64_t>(sp.size()))
      v[i] = sp[static_cast<size_t>(i / 7)];
  }
  return v;
}

// Runs `c` on `shapes` with the JIT at `isa` and with the reference; returns what went wrong.
// `want_kernel` is the expected kernel name ("ref" where the JIT must decline).
std::string run_case(const Case& c, const std::vector<Shape>& shapes, Isa isa, const std::string& want_kernel,
                     std::mt19937& rng) {
  std::string err;
  std::unique_ptr<Built> j = build(c, shapes, JitConfig{true, isa}, &err);
  std::unique_ptr<Built> r = build(c, shapes, JitConfig{false, isa}, &err);
  if (!j || !r) return "build failed: " + err;
  if (want_kernel != j->ex->kernel_name(0))
    return fmt::format("kernel {}, expected {} {}", j->ex->kernel_name(0), want_kernel, err);
  if (std::string("ref") != r->ex->kernel_name(0)) return "the reference context ran a generated kernel";

  // Same inputs for both.
  std::vector<std::vector<uint32_t>> before;
  for (size_t k = 0; k < shapes.size(); ++k) {
    Tensor& tj = j->ctx.at(j->in[k]);
    Tensor& tr = r->ctx.at(r->in[k]);
    const std::vector<float> v = case_input(c, k, shapes.size(), tj.numel(), rng);
    std::copy(v.begin(), v.end(), tj.f32());
    std::copy(v.begin(), v.end(), tr.f32());
    const uint32_t* w = static_cast<const uint32_t*>(tj.data.data());
    before.emplace_back(w, w + padded_words(tj.numel()));
  }
  Tensor& yj = j->ctx.at(j->out);
  Tensor& yr = r->ctx.at(r->out);
  const int64_t n = yj.numel();
  const size_t words = padded_words(n);
  uint32_t* gj = static_cast<uint32_t*>(yj.data.data());
  for (size_t i = 0; i < words; ++i) gj[i] = GUARD;

  j->ex->run();
  r->ex->run();

  std::string problems;
  for (size_t i = static_cast<size_t>(n); i < words; ++i)
    if (gj[i] != GUARD) {
      problems += fmt::format("guard band overwritten at word {} past {} elements\n", i - n, n);
      break;
    }
  for (size_t k = 0; k < shapes.size(); ++k) {
    const uint32_t* w = static_cast<const uint32_t*>(j->ctx.at(j->in[k]).data.data());
    if (!std::equal(before[k].begin(), before[k].end(), w)) problems += fmt::format("input {} was modified\n", k);
  }
  int bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float a = yj.f32()[i], b = yr.f32()[i];
    bool ok;
    if (std::isnan(a) || std::isnan(b)) {
      ok = std::isnan(a) && std::isnan(b);
    } else if (c.tol.exact()) {
      ok = std::memcmp(&a, &b, 4) == 0;
    } else {
      // ACT_BWD: dx = dy·f'(x), so the absolute part of the tolerance scales with |dy|.
      const double scale = c.op == Opcode::ACT_BWD ? std::fabs(double(j->ctx.at(j->in[0]).f32()[i])) : 1;
      ok = a == b || std::fabs(double(a) - b) <= c.tol.atol * scale + c.tol.rtol * std::fabs(double(b));
    }
    if (!ok && bad++ < 5) {
      std::string xs;
      for (size_t k = 0; k < shapes.size(); ++k) {
        const Tensor& t = j->ctx.at(j->in[k]);
        if (t.numel() == n) xs += fmt::format(" x{}={:.9g}", k, t.f32()[i]);
      }
      uint32_t ab, bb;
      std::memcpy(&ab, &a, 4);
      std::memcpy(&bb, &b, 4);
      problems += fmt::format("element {}: jit {:.9g} ({:#010x}), ref {:.9g} ({:#010x});{}\n", i, a, ab, b, bb, xs);
    }
  }
  if (bad) problems += fmt::format("{} of {} elements differ\n", bad, n);
  return problems;
}

const Case& find_case(const std::string& label) {
  static const std::vector<Case> all = all_cases();
  for (const Case& c : all)
    if (c.label == label) return c;
  // A label the table lacks is the test's own typo: say so and stop (no exceptions needed).
  fmt::print(stderr, "jit_elementwise_test: no case '{}'\n", label);
  std::abort();
}

std::string kernel_name(const Case& c, const std::string& pattern, Isa isa) {
  return fmt::format("f32_{}{}__{}", c.jit_op, pattern, isa_name(isa));
}

class JitElementwise : public ::testing::TestWithParam<Case> {};

void PrintTo(const Case& c, std::ostream* os) { *os << c.label; }

// Unary ops and ACT_BWD on one shape per size; binary ops on the same-shape case too.
TEST_P(JitElementwise, MatchesReferenceOverSizes) {
  const Case& c = GetParam();
  std::mt19937 rng(42);
  const int n_in = c.n_in ? c.n_in : op_info(c.op).n_in;
  for (Isa isa : isas()) {
    for (int64_t n : sizes(isa)) {
      const std::vector<Shape> shapes(static_cast<size_t>(n_in), Shape{n});
      const std::string p = run_case(c, shapes, isa, kernel_name(c, "", isa), rng);
      EXPECT_TRUE(p.empty()) << isa_name(isa) << " n=" << n << "\n" << p;
    }
    // A multi-dimensional shape: the kernel only sees the element count.
    const std::vector<Shape> shapes(static_cast<size_t>(n_in), Shape{3, 5, 7});
    const std::string p = run_case(c, shapes, isa, kernel_name(c, "", isa), rng);
    EXPECT_TRUE(p.empty()) << isa_name(isa) << " [3,5,7]\n" << p;
  }
}

// Binary ops: the broadcast patterns neural nets produce, on either side, and one the JIT leaves
// to the reference.
class JitBroadcast : public ::testing::TestWithParam<Case> {};

TEST_P(JitBroadcast, Patterns) {
  const Case& c = GetParam();
  std::mt19937 rng(7);
  for (Isa isa : isas()) {
    const int w = width(isa);
    struct P {
      Shape a, b;
      std::string pattern;
    };
    std::vector<P> ps;
    for (int64_t n : {int64_t(2), int64_t(w - 1), int64_t(w), int64_t(w + 1), int64_t(2 * w + 3), int64_t(5 * w + 3)}) {
      ps.push_back({Shape{n}, Shape{}, "_bscalar"});
      ps.push_back({Shape{3, n}, Shape{1}, "_bscalar"});
      ps.push_back({Shape{}, Shape{n}, "_ascalar"});
      ps.push_back({Shape{3, n}, Shape{n}, "_brow"});
      ps.push_back({Shape{n}, Shape{4, n}, "_arow"});
      ps.push_back({Shape{2, 3, n}, Shape{3, n}, "_brow"});
      ps.push_back({Shape{5, n}, Shape{5, 1}, "_bcol"});
      ps.push_back({Shape{5, 1}, Shape{5, n}, "_acol"});
      ps.push_back({Shape{2, 3, n}, Shape{2, 3, 1}, "_bcol"});
    }
    // Rows of one element: a [3, 1] operand is a row of [2, 3, 1]; a single element is a scalar.
    ps.push_back({Shape{3, 1}, Shape{1}, "_bscalar"});
    ps.push_back({Shape{1}, Shape{4, 1}, "_ascalar"});
    ps.push_back({Shape{2, 3, 1}, Shape{3, 1}, "_brow"});
    ps.push_back({Shape{}, Shape{}, ""});
    ps.push_back({Shape{37, 301}, Shape{301}, "_brow"});
    ps.push_back({Shape{301, 37}, Shape{301, 1}, "_bcol"});
    ps.push_back({Shape{2, 4, 6, 9}, Shape{6, 9}, "_brow"});
    ps.push_back({Shape{2, 4, 6, 9}, Shape{2, 4, 1, 1}, "_bcol"});
    // Not covered: both sides broadcast, or a 1 in the middle. The reference runs.
    ps.push_back({Shape{5, 1}, Shape{1, 7}, "ref"});
    ps.push_back({Shape{2, 3, 4}, Shape{2, 1, 4}, "ref"});
    for (const P& p : ps) {
      const std::string want = p.pattern == "ref" ? "ref" : kernel_name(c, p.pattern, isa);
      const std::string problems = run_case(c, {p.a, p.b}, isa, want, rng);
      EXPECT_TRUE(problems.empty()) << isa_name(isa) << " " << p.a.str() << " with " << p.b.str() << "\n" << problems;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, JitElementwise, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.label; });
INSTANTIATE_TEST_SUITE_P(Ops, JitBroadcast, ::testing::ValuesIn(binary_cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.label; });

// ---- CAST: the generator over lanes of either dtype ----

struct CastCase {
  const char* label;
  DType from, to;
  const char* jit_op;
};

// Bits of n values of `from` for a cast: f32 over ±3e9 (beyond i32's range both ways) with NaN,
// ±inf, ±0, ±2^31, the floats next to it, halves and denormals scattered among them; i32 over its
// whole range with its extremes and 2^24 + 1 (the first integer f32 rounds).
std::vector<uint32_t> cast_input(DType from, int64_t n, std::mt19937& rng) {
  const std::vector<float> fs = {NAN, INFINITY, -INFINITY, 0.f, -0.f, 2147483648.f, -2147483648.f, 2147483520.f,
                                 -2147483904.f, 2.5f, -2.5f, -0.75f, 1e-40f};
  const std::vector<int32_t> is = {INT32_MIN, INT32_MAX, 0, -1, 16777217, -16777217, 16777216};
  std::vector<uint32_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    if (from == DType::F32) {
      float f = static_cast<float>(std::uniform_real_distribution<double>(-3e9, 3e9)(rng));
      if (i % 5 == 1) f = static_cast<float>(std::uniform_real_distribution<double>(-100, 100)(rng));
      if (i % 3 == 2 && static_cast<size_t>(i / 3) < fs.size()) f = fs[static_cast<size_t>(i / 3)];
      std::memcpy(&v[i], &f, 4);
    } else {
      int32_t k = static_cast<int32_t>(rng());
      if (i % 3 == 2 && static_cast<size_t>(i / 3) < is.size()) k = is[static_cast<size_t>(i / 3)];
      std::memcpy(&v[i], &k, 4);
    }
  }
  return v;
}

// Every direction at every JIT level, over the size sweep: the generated kernel ran, its bits are
// the reference's, nothing past the output was written.
TEST(JitCast, MatchesReferenceBitwise) {
  const CastCase cases[] = {{"f32 to i32", DType::F32, DType::I32, "cast_to_i32"},
                            {"i32 to f32", DType::I32, DType::F32, "cast_from_i32"},
                            {"f32 to f32", DType::F32, DType::F32, "cast_copy"},
                            {"i32 to i32", DType::I32, DType::I32, "cast_copy"}};
  std::mt19937 rng(5);
  for (const CastCase& c : cases) {
    const std::vector<std::pair<std::string, Imm>> imms = {{"to", enum_imm(c.to == DType::I32 ? 1 : 0)}};
    for (Isa isa : isas()) {
      std::vector<Shape> shapes;
      for (int64_t n : sizes(isa)) shapes.push_back(Shape{n});
      shapes.push_back(Shape{3, 5, 7});
      for (const Shape& sh : shapes) {
        SCOPED_TRACE(fmt::format("{} {} {}", c.label, isa_name(isa), sh.str()));
        std::string err;
        const std::vector<TensorType> types = {TensorType{c.from, sh}};
        std::unique_ptr<Built> j = one_op_program(Opcode::CAST, imms, types, false, JitConfig{true, isa}, &err);
        std::unique_ptr<Built> r = one_op_program(Opcode::CAST, imms, types, false, JitConfig{false, isa}, &err);
        ASSERT_TRUE(j && r) << err;
        EXPECT_EQ(fmt::format("f32_{}__{}", c.jit_op, isa_name(isa)), j->ex->kernel_name(0));
        const int64_t n = sh.numel();
        const std::vector<uint32_t> x = cast_input(c.from, n, rng);
        std::memcpy(j->ctx.at(j->in[0]).data.data(), x.data(), x.size() * 4);
        std::memcpy(r->ctx.at(r->in[0]).data.data(), x.data(), x.size() * 4);
        uint32_t* yj = static_cast<uint32_t*>(j->ctx.at(j->out).data.data());
        const size_t words = padded_words(n);
        for (size_t i = 0; i < words; ++i) yj[i] = GUARD;
        j->ex->run();
        r->ex->run();
        const uint32_t* yr = static_cast<const uint32_t*>(r->ctx.at(r->out).data.data());
        int bad = 0;
        for (int64_t i = 0; i < n; ++i)
          if (yj[i] != yr[i] && bad++ < 5) ADD_FAILURE() << fmt::format("element {}: x {:#010x}, jit {:#010x}, ref {:#010x}", i, x[i], yj[i], yr[i]);
        for (size_t i = static_cast<size_t>(n); i < words; ++i) EXPECT_EQ(yj[i], GUARD) << "guard band at word " << i;
      }
    }
  }
}

// ---- In place: the output written over an input (engine/memory_plan.h, ops/op.h) ----

// x_i inputs; t = COPY(x_k); u = op(x_0, …, t, …); y = COPY(u), an output. At opt level 1 the
// planner writes u over t (t dies at the op); at 0 nothing is planned.
struct InPlaceRun {
  std::unique_ptr<Built> b = std::make_unique<Built>();
  TensorId t = NO_TENSOR, u = NO_TENSOR;
};

InPlaceRun in_place_program(const Case& c, const Shape& shape, size_t k, Isa isa, int opt, std::string* err) {
  InPlaceRun r;
  Built& b = *r.b;
  b.ctx.set_jit(JitConfig{isa != Isa::REF, isa == Isa::REF ? Isa::AVX512 : isa});
  b.ctx.set_opt_level(opt);
  b.ctx.set_flush_denormals(false);  // the sweep holds denormals (engine/denormals.h)
  b.ctx.set_threads(2);  // big sizes run as parts, each in place over its own slice
  b.ctx.set_log([err](const std::string& m) { *err += m + "\n"; });
  const int n_in = c.n_in ? c.n_in : op_info(c.op).n_in;
  std::vector<TensorId> operands;
  for (int i = 0; i < n_in; ++i) {
    TensorDesc d;
    d.name = fmt::format("x{}", i);
    d.type = TensorType{DType::F32, shape};
    d.role = Role::INPUT;
    b.in.push_back(b.p.declare(d).value());
    operands.push_back(b.in.back());
  }
  auto append = [&](Instruction ins, const std::vector<std::pair<std::string, Imm>>& imms) {
    for (const auto& [key, v] : imms)
      if (Status s = set_imm(ins, key, v); !s) *err += s.message();
    Result<std::vector<TensorId>> out = b.p.append_new(ins);
    if (!out) *err += out.status().message();
    return out ? out.value()[0] : NO_TENSOR;
  };
  r.t = operands[k] = append(make_instruction(Opcode::COPY, {b.in[k]}, {}), {});
  r.u = append(make_instruction(c.op, operands, {}), c.imms);
  b.out = append(make_instruction(Opcode::COPY, {r.u}, {}), {});
  if (!err->empty()) return InPlaceRun{nullptr};
  b.p.mark_output(b.out);
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(b.p);
  if (!ex) {
    *err += ex.status().message();
    return InPlaceRun{nullptr};
  }
  b.ex = std::move(ex.value());
  return r;
}

// Every elementwise kernel, reference and generated, computes the same bits with its output
// written over input k as with an output of its own.
TEST_P(JitElementwise, InPlaceMatchesOutOfPlace) {
  const Case& c = GetParam();
  std::mt19937 rng(11);
  std::vector<Isa> levels{Isa::REF};
  for (Isa isa : isas()) levels.push_back(isa);
  const size_t n_in = static_cast<size_t>(c.n_in ? c.n_in : op_info(c.op).n_in);
  for (Isa isa : levels) {
    const int w = width(isa == Isa::REF ? Isa::AVX2 : isa);
    for (int64_t n : {int64_t(1), int64_t(w - 1), int64_t(w + 1), int64_t(2 * w + 3), int64_t(70001)}) {
      for (size_t k = 0; k < n_in; ++k) {
        SCOPED_TRACE(fmt::format("{} n={} input {}", isa_name(isa), n, k));
        std::string err;
        InPlaceRun in = in_place_program(c, Shape{n}, k, isa, 1, &err);
        InPlaceRun own = in_place_program(c, Shape{n}, k, isa, 0, &err);
        ASSERT_TRUE(in.b && own.b) << err;
        const PlannedTensor* u = in.b->ex->memory_plan().find(in.u);
        ASSERT_TRUE(u);
        EXPECT_EQ(u->in_place_of, in.t);
        EXPECT_STREQ(in.b->ex->kernel_name(1), own.b->ex->kernel_name(1));
        if (isa != Isa::REF && n > 64 * 1024) {
          EXPECT_GT(in.b->ex->parts(1), 1);
        }
        for (size_t i = 0; i < n_in; ++i) {
          const std::vector<float> v = case_input(c, i, n_in, n, rng);
          std::copy(v.begin(), v.end(), in.b->ctx.at(in.b->in[i]).f32());
          std::copy(v.begin(), v.end(), own.b->ctx.at(own.b->in[i]).f32());
        }
        in.b->ex->run();
        own.b->ex->run();
        const float* y_in = in.b->ctx.at(in.b->out).f32();
        const float* y_own = own.b->ctx.at(own.b->out).f32();
        int64_t differ = 0;
        for (int64_t i = 0; i < n; ++i) differ += std::memcmp(&y_in[i], &y_own[i], 4) != 0;
        EXPECT_EQ(differ, 0) << "elements differ in place, first input " << k;
      }
    }
  }
}

// CALC: any number of inputs, each streamed, one element, a row or a column of the output, on
// one [rows, inner] split (a row and a column together included); other broadcasts run the
// reference.
TEST(JitCalc, BroadcastPatterns) {
  const Case& c = find_case("CALC_exact_ops_2");
  std::mt19937 rng(11);
  for (Isa isa : isas()) {
    const std::string jit = kernel_name(c, "", isa);
    const int w = width(isa);
    std::vector<std::pair<std::vector<Shape>, std::string>> ps;
    for (int64_t n : {int64_t(1), int64_t(w - 1), int64_t(w), int64_t(w + 1), int64_t(2 * w + 3), int64_t(301)}) {
      ps.push_back({{Shape{3, n}, Shape{n}, Shape{3, 1}}, jit});
      ps.push_back({{Shape{}, Shape{4, n}, Shape{n}}, jit});
      ps.push_back({{Shape{5, 1}, Shape{1, n}, Shape{}}, jit});
      ps.push_back({{Shape{2, 3, n}, Shape{2, 3, 1}, Shape{1}}, jit});
      ps.push_back({{Shape{n}, Shape{n}, Shape{n}}, jit});
    }
    ps.push_back({{Shape{2, 3, 4}, Shape{2, 1, 4}, Shape{4}}, "ref"});    // a 1 in the middle
    ps.push_back({{Shape{2, 3, 4}, Shape{4}, Shape{2, 3, 1}}, jit});      // a row of 4, a column of 6
    ps.push_back({{Shape{2, 3, 4}, Shape{3, 4}, Shape{2, 3, 1}}, "ref"});  // rows of 12 against columns of 6
    for (const auto& [shapes, want] : ps) {
      const std::string problems = run_case(c, shapes, isa, want, rng);
      EXPECT_TRUE(problems.empty()) << isa_name(isa) << " " << shapes[0].str() << ", " << shapes[1].str() << ", "
                                    << shapes[2].str() << "\n" << problems;
    }
  }
}

// ---- Optimizer steps: multi-input, multi-output, in place ----

struct OptimCase {
  std::string label;
  Opcode op;
  std::vector<std::pair<std::string, Imm>> imms;
  std::string jit_op;
};

void PrintTo(const OptimCase& c, std::ostream* os) { *os << c.label; }

std::vector<OptimCase> optim_cases() {
  return {
      {"SGD", Opcode::SGD, {}, "sgd"},
      {"SGD_momentum", Opcode::SGD, {{"momentum", imm_f(0.9)}}, "sgd"},
      {"SGD_nesterov_decay", Opcode::SGD,
       {{"momentum", imm_f(0.9)}, {"nesterov", imm_i(1)}, {"weight_decay", imm_f(0.01)}}, "sgd"},
      {"ADAM", Opcode::ADAM, {}, "adam"},
      {"ADAM_decay", Opcode::ADAM, {{"beta1", imm_f(0.8)}, {"weight_decay", imm_f(0.01)}}, "adam"},
      {"ADAMW", Opcode::ADAMW, {}, "adamw"},
      {"RMSPROP", Opcode::RMSPROP, {}, "rmsprop"},
      {"RMSPROP_decay", Opcode::RMSPROP, {{"alpha", imm_f(0.9)}, {"weight_decay", imm_f(0.05)}}, "rmsprop"},
  };
}

// The operands of one step: w, g, state..., then the scalars lr (and t); `updated` are the
// indices of the inputs the op writes (its outputs, in order).
struct OptimBuilt {
  Context ctx;
  Program p{ctx};
  std::vector<TensorId> in;
  std::unique_ptr<Executor> ex;
};

std::vector<int> updated_inputs(Opcode op) {
  return op == Opcode::ADAM || op == Opcode::ADAMW ? std::vector<int>{0, 2, 3} : std::vector<int>{0, 2};
}

std::unique_ptr<OptimBuilt> build_optim(const OptimCase& c, int64_t n, const JitConfig& jit, std::string* err) {
  auto b = std::make_unique<OptimBuilt>();
  b->ctx.set_jit(jit);
  b->ctx.set_log([err](const std::string& m) { *err += m + "\n"; });
  const bool adam = c.op == Opcode::ADAM || c.op == Opcode::ADAMW;
  const int n_arrays = adam ? 4 : 3, n_scalars = adam ? 2 : 1;
  for (int k = 0; k < n_arrays + n_scalars; ++k) {
    TensorDesc d;
    d.name = fmt::format("x{}", k);
    d.type = TensorType{DType::F32, k < n_arrays ? Shape{n} : Shape{}};
    d.role = Role::INPUT;
    b->in.push_back(b->p.declare(d).value());
  }
  Instruction ins = make_instruction(c.op, b->in, {});
  for (const auto& [key, v] : c.imms)
    if (Status s = set_imm(ins, key, v); !s) {
      *err += s.message();
      return nullptr;
    }
  ins.out.clear();
  for (int k : updated_inputs(c.op)) ins.out.push_back(b->in[static_cast<size_t>(k)]);
  if (Status s = b->p.append(ins); !s) {
    *err += s.message();
    return nullptr;
  }
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(b->p);
  if (!ex) {
    *err += ex.status().message();
    return nullptr;
  }
  b->ex = std::move(ex.value());
  return b;
}

class JitOptimizer : public ::testing::TestWithParam<OptimCase> {};

// Three steps with the JIT and with the reference, from the same state: every updated operand
// bitwise equal, its padding untouched, the other operands unchanged.
TEST_P(JitOptimizer, MatchesReferenceBitwiseOverSizes) {
  const OptimCase& c = GetParam();
  std::mt19937 rng(3);
  for (Isa isa : isas()) {
    for (int64_t n : sizes(isa)) {
      std::string err;
      std::unique_ptr<OptimBuilt> j = build_optim(c, n, JitConfig{true, isa}, &err);
      std::unique_ptr<OptimBuilt> r = build_optim(c, n, JitConfig{false, isa}, &err);
      ASSERT_TRUE(j && r) << err;
      EXPECT_EQ(std::string(j->ex->kernel_name(0)), kernel_name(Case{"", c.op, {}, c.jit_op, EXACT}, "", isa)) << err;
      const std::vector<int> upd = updated_inputs(c.op);
      const bool adam = c.op == Opcode::ADAM || c.op == Opcode::ADAMW;
      std::uniform_real_distribution<float> u(-2, 2), pos(0, 1);
      std::vector<std::vector<uint32_t>> before(j->in.size());
      for (size_t k = 0; k < j->in.size(); ++k) {
        Tensor& tj = j->ctx.at(j->in[k]);
        Tensor& tr = r->ctx.at(r->in[k]);
        const bool second_moment = (adam && k == 3) || (!adam && k == 2 && c.op == Opcode::RMSPROP);
        for (int64_t i = 0; i < tj.numel(); ++i) tj.f32()[i] = tr.f32()[i] = second_moment ? pos(rng) : u(rng);
        if (tj.numel() == 1 && tj.desc.type.shape.rank == 0)
          tj.f32()[0] = tr.f32()[0] = (adam && k == 5) ? 3.f : 0.05f;  // t, lr
        uint32_t* w = static_cast<uint32_t*>(tj.data.data());
        const bool is_updated = std::find(upd.begin(), upd.end(), static_cast<int>(k)) != upd.end();
        if (is_updated)
          for (size_t i = static_cast<size_t>(tj.numel()); i < padded_words(tj.numel()); ++i) w[i] = GUARD;
        before[k].assign(w, w + padded_words(tj.numel()));
      }
      for (int step = 0; step < 3; ++step) {
        j->ex->run();
        r->ex->run();
      }
      for (size_t k = 0; k < j->in.size(); ++k) {
        const Tensor& tj = j->ctx.at(j->in[k]);
        const Tensor& tr = r->ctx.at(r->in[k]);
        const int64_t m = tj.numel();
        const uint32_t* w = static_cast<const uint32_t*>(tj.data.data());
        const bool is_updated = std::find(upd.begin(), upd.end(), static_cast<int>(k)) != upd.end();
        if (!is_updated) {
          EXPECT_TRUE(std::equal(before[k].begin(), before[k].end(), w)) << isa_name(isa) << " n=" << n << ": input "
                                                                         << k << " was modified";
          continue;
        }
        EXPECT_EQ(0, std::memcmp(tj.data.data(), tr.data.data(), static_cast<size_t>(m) * 4))
            << isa_name(isa) << " n=" << n << ": operand " << k << " differs, e.g. " << tj.f32()[0] << " vs "
            << tr.f32()[0];
        for (size_t i = static_cast<size_t>(m); i < padded_words(m); ++i)
          if (w[i] != GUARD) {
            ADD_FAILURE() << isa_name(isa) << " n=" << n << ": guard band of operand " << k << " overwritten";
            break;
          }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, JitOptimizer, ::testing::ValuesIn(optim_cases()),
                         [](const ::testing::TestParamInfo<OptimCase>& i) { return i.param.label; });

// Stamped from the opcode table: every elementwise op has a JIT hook and a case above (and for
// ACT_BWD, every fn); so has every optimizer step that is elementwise.
TEST(JitElementwiseCoverage, EveryElementwiseOpHasAJitKernelAndACase) {
  std::set<Opcode> covered;
  std::set<int64_t> act_fns;
  covered.insert(Opcode::CAST);  // JitCast below: its dtypes need cases of their own
  for (const Case& c : all_cases()) {
    covered.insert(c.op);
    if (c.op == Opcode::ACT_BWD) act_fns.insert(c.imms[0].second.i);
  }
  // Elementwise ops without a generated kernel, each with its reason in its op file: POW (a
  // vectorized pow needs a log in more than float precision; pow-reduce rewrites the constant
  // exponents models use into ops that have kernels).
  // SIN and COS (a range reduction correct for every float needs Payne–Hanek, which vmath lacks).
  const std::set<Opcode> reference_only = {Opcode::POW, Opcode::SIN, Opcode::COS};
  for (const OpInfo& info : all_ops()) {
    if (info.category != OpCategory::ELEMENTWISE_UNARY && info.category != OpCategory::ELEMENTWISE_BINARY) continue;
    if (reference_only.count(info.op)) {
      EXPECT_EQ(op_hooks(info.op).jit, nullptr) << info.mnemonic << " has a JIT hook now: give it a case";
      continue;
    }
    EXPECT_NE(op_hooks(info.op).jit, nullptr) << info.mnemonic << " has no JIT hook";
    EXPECT_TRUE(covered.count(info.op)) << info.mnemonic << " has no case in jit_elementwise_test";
  }
  const OpInfo& act = op_info(Opcode::ACT_BWD);
  EXPECT_EQ(act_fns.size(), act.imms[0].choices.size()) << "an ACT_BWD fn has no case";
  std::set<Opcode> optim;
  for (const OptimCase& c : optim_cases()) optim.insert(c.op);
  for (const OpInfo& info : all_ops()) {
    if (info.category != OpCategory::OPTIMIZER) continue;
    // The elementwise steps (every array operand shaped like the weight); ADVANCE, LR_SCHEDULE
    // and CLIP_GRAD_NORM are scalar work or a reduction.
    const bool elementwise = info.op == Opcode::SGD || info.op == Opcode::ADAM || info.op == Opcode::ADAMW ||
                             info.op == Opcode::RMSPROP;
    if (!elementwise) continue;
    EXPECT_NE(op_hooks(info.op).jit, nullptr) << info.mnemonic << " has no JIT hook";
    EXPECT_TRUE(optim.count(info.op)) << info.mnemonic << " has no case in jit_elementwise_test";
  }
}

// A program with several elementwise kernels: no mapping of the process is ever writable and
// executable at once, before or after the kernels run.
TEST(JitElementwiseCode, NoPageIsWritableAndExecutable) {
  if (isas().empty()) GTEST_SKIP() << "no JIT level on this machine";
  auto rwx = []() {
    std::ifstream maps("/proc/self/maps");
    std::string line, found;
    while (std::getline(maps, line)) {
      std::string addr, perms;
      std::istringstream(line) >> addr >> perms;
      if (perms.size() >= 3 && perms[1] == 'w' && perms[2] == 'x') found += line + "\n";
    }
    return found;
  };
  for (Isa isa : isas()) {
    std::string err;
    std::unique_ptr<Built> b = build(find_case("EXP"), {Shape{1000}}, JitConfig{true, isa}, &err);
    ASSERT_TRUE(b) << err;
    EXPECT_EQ(b->ex->kernel_name(0), "f32_exp__" + std::string(isa_name(isa)));
    EXPECT_EQ(rwx(), "");
    b->ex->run();
    EXPECT_EQ(rwx(), "");
  }
}

// The cache maps one descriptor to one kernel: preparing the same program again generates
// nothing, and two instructions with the same op, size and immediates share their code.
TEST(JitElementwiseCode, CacheReturnsTheSameKernelForTheSameDescriptor) {
  if (isas().empty()) GTEST_SKIP() << "no JIT level on this machine";
  Context ctx;
  ctx.set_jit(JitConfig{true, cpu_info().best});
  Program p(ctx);
  TensorDesc d;
  d.name = "x";
  d.type = TensorType{DType::F32, Shape{4, 25}};
  d.role = Role::INPUT;
  const TensorId x = p.declare(d).value();
  d.name = "x2";
  d.type = TensorType{DType::F32, Shape{100}};
  const TensorId x2 = p.declare(d).value();
  const TensorId a = p.append_new(make_instruction(Opcode::TANH, {x}, {})).value()[0];
  const TensorId b = p.append_new(make_instruction(Opcode::TANH, {x2}, {})).value()[0];  // same count
  const TensorId c = p.append_new(make_instruction(Opcode::SIGMOID, {x2}, {})).value()[0];
  p.mark_output(a);
  p.mark_output(b);
  p.mark_output(c);
  auto ex = Executor::prepare(p);
  ASSERT_TRUE(ex) << ex.status().message();
  const size_t kernels = ctx.kernels().size();
  EXPECT_EQ(kernels, 2u);  // tanh for 100 elements, sigmoid for 100 elements
  auto again = Executor::prepare(p);
  ASSERT_TRUE(again);
  EXPECT_EQ(ctx.kernels().size(), kernels);
  EXPECT_EQ(std::string(ex.value()->kernel_name(0)), ex.value()->kernel_name(1));
  EXPECT_EQ(std::string(ex.value()->kernel_name(2)), "f32_sigmoid__" + std::string(isa_name(cpu_info().best)));
}

// JIT off, or capped at REF: every step runs the reference kernel.
TEST(JitElementwiseCode, DisabledJitRunsTheReference) {
  for (JitConfig cfg : {JitConfig{false, Isa::AVX512}, JitConfig{true, Isa::REF}}) {
    std::string err;
    std::unique_ptr<Built> b = build(find_case("RELU"), {Shape{100}}, cfg, &err);
    ASSERT_TRUE(b) << err;
    EXPECT_EQ(std::string(b->ex->kernel_name(0)), "ref");
  }
}

}  // namespace
}  // namespace nnasm

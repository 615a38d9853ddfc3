// Generated row-wise and reduction kernels (jit/rowwise.h) against the reference kernels:
// SOFTMAX, LOGSOFTMAX and the REDUCE ops along the last axis (the row layout) and along a middle
// and the first axis (the col layout), keepdims; SOFTMAX_CE and its fused backward with i32 ids
// (out-of-range ones included) and f32 targets; CLIP_GRAD_NORM over several gradients. At every
// ISA level the machine has, over lengths 1…W−1, W, W+1, 2W+3, 1000, 10007 and several row counts,
// with special values (NaN, ±inf, ±1000) scattered in. Each check asserts the kernel that ran (by
// name), the results against the reference within the op's stated bound, the output's guard band,
// and that two runs give the same bits. GLOBAL_AVGPOOL must run REDUCE_MEAN's row kernel, bit for
// bit. Every op of the REDUCE category, the softmax losses and the
// norm clip must have a JIT hook and a case here.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engine/executor.h"
#include "isa/program.h"
#include "ops/reduce/axis.h"
#include "tests/jit_levels.h"
#include "tests/one_op_program.h"

namespace nnasm {
namespace {

constexpr uint32_t GUARD = 0x7fa5a5a5u;
constexpr double EPS = 1.0 / (1 << 24);  // half an ulp at 1

std::vector<Isa> isas() { return jit_levels(); }

int width(Isa isa) { return vector_floats(isa); }

std::vector<int64_t> lengths(Isa isa) {
  const int w = width(isa);
  std::vector<int64_t> s;
  for (int n = 1; n <= w + 1; ++n) s.push_back(n);
  s.push_back(2 * w + 3);
  s.push_back(1000);
  s.push_back(10007);
  return s;
}

size_t padded_words(int64_t numel) { return std::max<size_t>(16, (static_cast<size_t>(numel) * 4 + 63) / 64 * 16); }

using Built = OneOpProgram;

std::unique_ptr<Built> build(Opcode op, const std::vector<std::pair<std::string, Imm>>& imms,
                             const std::vector<TensorType>& types, bool in_place, const JitConfig& jit, std::string* err) {
  return one_op_program(op, imms, types, in_place, jit, err);
}

// The allowed difference at output element i, given the reference value there.
using TolFn = std::function<double(int64_t i, float ref)>;

// Fills the inputs of both programs alike, runs both (the JIT one twice) and compares.
std::string run_and_compare(Built& j, Built& r, const std::function<void(std::vector<Tensor*>&)>& fill,
                            const TolFn& tol) {
  std::vector<Tensor*> ts;
  for (TensorId id : j.in) ts.push_back(&j.ctx.at(id));
  fill(ts);
  for (size_t k = 0; k < j.in.size(); ++k)
    std::memcpy(r.ctx.at(r.in[k]).data.data(), j.ctx.at(j.in[k]).data.data(), static_cast<size_t>(ts[k]->numel()) * 4);
  Tensor& yj = j.ctx.at(j.out);
  const int64_t n = yj.numel();
  const size_t words = padded_words(n);
  uint32_t* gj = static_cast<uint32_t*>(yj.data.data());
  for (size_t i = 0; i < words; ++i) gj[i] = GUARD;
  j.ex->run();
  std::vector<uint32_t> first(gj, gj + n);
  j.ex->run();
  r.ex->run();
  std::string problems;
  if (!std::equal(first.begin(), first.end(), gj)) problems += "two runs differ\n";
  for (size_t i = static_cast<size_t>(n); i < words; ++i)
    if (gj[i] != GUARD) {
      problems += fmt::format("guard band overwritten at word {} past {} elements\n", i - n, n);
      break;
    }
  const Tensor& yr = r.ctx.at(r.out);
  int bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float a = yj.f32()[i], b = yr.f32()[i];
    bool ok;
    if (std::isnan(a) || std::isnan(b)) ok = std::isnan(a) && std::isnan(b);
    else ok = a == b || std::fabs(double(a) - b) <= tol(i, b);
    if (!ok && bad++ < 5) problems += fmt::format("element {}: jit {:.9g}, ref {:.9g} (tol {:.3g})\n", i, a, b, tol(i, b));
  }
  if (bad) problems += fmt::format("{} of {} elements differ\n", bad, n);
  return problems;
}

// Uniform values in [lo, hi]; with specials, every 97th element (offset 5) cycles through NaN,
// −inf, +inf, 1000, −1000 and every 13th is ±1000.
void fill_x(Tensor& t, std::mt19937& rng, bool specials, double lo = -4, double hi = 4) {
  std::uniform_real_distribution<double> u(lo, hi);
  const float sp[] = {NAN, -INFINITY, INFINITY, 1000.f, -1000.f};
  for (int64_t i = 0; i < t.numel(); ++i) {
    float v = static_cast<float>(u(rng));
    if (specials && i % 97 == 5) v = sp[(i / 97) % 5];
    else if (specials && i % 13 == 7) v = (i / 13) % 2 ? 1000.f : -1000.f;
    t.f32()[i] = v;
  }
}

// Factors for REDUCE_PROD: ±[0.5, 1.5], so no partial product of any order overflows or
// underflows; with specials, every 97th element (offset 5) cycles through NaN, −inf, +inf, 0, −0,
// whose effect on a product does not depend on the order (inf·0 is NaN in any order).
void fill_factors(Tensor& t, std::mt19937& rng, bool specials) {
  std::uniform_real_distribution<double> u(0.5, 1.5);
  const float sp[] = {NAN, -INFINITY, INFINITY, 0.f, -0.f};
  for (int64_t i = 0; i < t.numel(); ++i) {
    float v = static_cast<float>(u(rng));
    if (rng() & 1) v = -v;
    if (specials && i % 97 == 5) v = sp[(i / 97) % 5];
    t.f32()[i] = v;
  }
}

// ---- SOFTMAX, LOGSOFTMAX, REDUCE_* ----

struct AxisCase {
  std::string label;
  Opcode op;
  std::string jit_op;
};

void PrintTo(const AxisCase& c, std::ostream* os) { *os << c.label; }

std::vector<AxisCase> axis_cases() {
  return {{"SOFTMAX", Opcode::SOFTMAX, "softmax"},          {"LOGSOFTMAX", Opcode::LOGSOFTMAX, "logsoftmax"},
          {"REDUCE_SUM", Opcode::REDUCE_SUM, "reduce_sum"}, {"REDUCE_MEAN", Opcode::REDUCE_MEAN, "reduce_mean"},
          {"REDUCE_MAX", Opcode::REDUCE_MAX, "reduce_max"}, {"REDUCE_MIN", Opcode::REDUCE_MIN, "reduce_min"},
          {"REDUCE_PROD", Opcode::REDUCE_PROD, "reduce_prod"}};
}

bool is_reduce(Opcode op) {
  return op == Opcode::REDUCE_SUM || op == Opcode::REDUCE_MEAN || op == Opcode::REDUCE_MAX || op == Opcode::REDUCE_MIN ||
         op == Opcode::REDUCE_PROD;
}

// Runs one shape along `axis`; returns what went wrong.
std::string run_axis(const AxisCase& c, const Shape& shape, int axis, bool keepdims, bool specials, Isa isa,
                     std::mt19937& rng) {
  std::vector<std::pair<std::string, Imm>> imms = {{"axis", imm_i(axis)}};
  if (is_reduce(c.op)) imms.push_back({"keepdims", imm_i(keepdims ? 1 : 0)});
  const std::vector<TensorType> types = {TensorType{DType::F32, shape}};
  std::string err;
  auto j = build(c.op, imms, types, false, JitConfig{true, isa}, &err);
  auto r = build(c.op, imms, types, false, JitConfig{false, isa}, &err);
  if (!j || !r) return "build failed: " + err;
  const AxisSplit sp = split_at(shape, normalize_axis(axis, shape.rank));
  const std::string want =
      fmt::format("f32_{}__{}_{}", c.jit_op, isa_name(isa), sp.inner == 1 ? "row" : "col");
  if (want != j->ex->kernel_name(0)) return fmt::format("kernel {}, expected {} {}", j->ex->kernel_name(0), want, err);
  if (std::string("ref") != r->ex->kernel_name(0)) return "the reference context ran a generated kernel";

  const Tensor& x = j->ctx.at(j->in[0]);
  const double len = static_cast<double>(sp.len);
  // The summation bound: the row layout's tree or the col layout's index order.
  const double sum_ulps = 4 + (sp.inner == 1 ? std::ceil(len / (4 * width(isa))) + 8 : len);
  TolFn tol;
  std::vector<double> abs_sum;  // Σ|x| per output row, for the reductions
  auto fill = [&](std::vector<Tensor*>& ts) {
    if (c.op == Opcode::REDUCE_PROD) fill_factors(*ts[0], rng, specials);
    else fill_x(*ts[0], rng, specials);
    abs_sum.assign(static_cast<size_t>(sp.outer * sp.inner), 0);
    for (int64_t o = 0; o < sp.outer; ++o)
      for (int64_t i = 0; i < sp.inner; ++i)
        for (int64_t l = 0; l < sp.len; ++l)
          abs_sum[static_cast<size_t>(o * sp.inner + i)] += std::fabs(x.f32()[(o * sp.len + l) * sp.inner + i]);
  };
  switch (c.op) {
    case Opcode::REDUCE_MAX:
    case Opcode::REDUCE_MIN: tol = [](int64_t, float) { return 0.0; }; break;
    case Opcode::REDUCE_PROD:  // each product rounds once, in either order: (len − 1)·ulp relative
      tol = [&](int64_t, float b) { return 2 * len * EPS * std::fabs(b) + 1e-38; };
      break;
    case Opcode::REDUCE_SUM:
      tol = [&](int64_t i, float) { return 2 * sum_ulps * EPS * abs_sum[static_cast<size_t>(i)] + 1e-30; };
      break;
    case Opcode::REDUCE_MEAN:
      tol = [&](int64_t i, float b) {
        return 2 * sum_ulps * EPS * abs_sum[static_cast<size_t>(i)] / len + 2 * EPS * std::fabs(b) + 1e-30;
      };
      break;
    case Opcode::SOFTMAX:
      tol = [&](int64_t, float b) { return (12 + 2 * sum_ulps) * EPS * std::fabs(b) + 1e-40; };
      break;
    default:  // LOGSOFTMAX: absolute, from ln Σ and x − m (|x − m| up to ~2000 with the specials)
      tol = [&](int64_t, float b) { return (8 + 2 * sum_ulps) * EPS + 4 * EPS * std::fabs(b); };
  }
  return run_and_compare(*j, *r, fill, tol);
}

class JitAxis : public ::testing::TestWithParam<AxisCase> {};

TEST_P(JitAxis, LastAxisOverLengthsAndRows) {
  const AxisCase& c = GetParam();
  std::mt19937 rng(11);
  for (Isa isa : isas())
    for (int64_t len : lengths(isa))
      for (int64_t rows : {int64_t(1), int64_t(3), int64_t(7)}) {
        if (len >= 1000 && rows > 3) continue;
        for (bool specials : {false, true}) {
          const std::string p = run_axis(c, Shape{rows, len}, -1, false, specials, isa, rng);
          EXPECT_TRUE(p.empty()) << isa_name(isa) << " " << rows << "x" << len << (specials ? " specials" : "") << "\n"
                                 << p;
        }
      }
}

TEST_P(JitAxis, MiddleAndFirstAxis) {
  const AxisCase& c = GetParam();
  std::mt19937 rng(12);
  for (Isa isa : isas()) {
    const int w = width(isa);
    std::vector<std::pair<Shape, int>> shapes;
    for (int64_t len : {int64_t(1), int64_t(5), int64_t(w + 1), int64_t(300)})
      for (int64_t inner : {int64_t(2), int64_t(w - 1), int64_t(w), int64_t(w + 1), int64_t(2 * w + 3), int64_t(4 * w),
                            int64_t(9 * w + 5)}) {
        shapes.push_back({Shape{3, len, inner}, 1});
      }
    shapes.push_back({Shape{1000, 37}, 0});
    shapes.push_back({Shape{2, 3, 4, 5}, 1});
    shapes.push_back({Shape{2, 3, 4, 5}, -3});
    for (const auto& [shape, axis] : shapes)
      for (bool specials : {false, true}) {
        const std::string p = run_axis(c, shape, axis, false, specials, isa, rng);
        EXPECT_TRUE(p.empty()) << isa_name(isa) << " " << shape.str() << " axis " << axis << "\n" << p;
      }
  }
}

// The reductions with keepdims = 1 (the kernel is the same; only the output shape differs).
TEST(JitAxisKeepdims, Reductions) {
  std::mt19937 rng(13);
  for (const AxisCase& c : axis_cases()) {
    if (!is_reduce(c.op)) continue;
    for (Isa isa : isas())
      for (const auto& [shape, axis] : std::vector<std::pair<Shape, int>>{{Shape{4, 37}, -1}, {Shape{4, 37, 19}, 1}}) {
        const std::string p = run_axis(c, shape, axis, true, true, isa, rng);
        EXPECT_TRUE(p.empty()) << c.label << " " << isa_name(isa) << " " << shape.str() << "\n" << p;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, JitAxis, ::testing::ValuesIn(axis_cases()),
                         [](const ::testing::TestParamInfo<AxisCase>& i) { return i.param.label; });

// ---- SOFTMAX_CE, SOFTMAX_CE_BWD ----

std::string run_ce(bool bwd, bool ids, int64_t rows, int64_t classes, bool specials, Isa isa, std::mt19937& rng) {
  std::vector<TensorType> types = {TensorType{DType::F32, Shape{rows, classes}},
                                   ids ? TensorType{DType::I32, Shape{rows}} : TensorType{DType::F32, Shape{rows, classes}}};
  if (bwd) types.push_back(TensorType{DType::F32, Shape{}});
  const Opcode op = bwd ? Opcode::SOFTMAX_CE_BWD : Opcode::SOFTMAX_CE;
  std::string err;
  auto j = build(op, {}, types, false, JitConfig{true, isa}, &err);
  auto r = build(op, {}, types, false, JitConfig{false, isa}, &err);
  if (!j || !r) return "build failed: " + err;
  const std::string want =
      fmt::format("f32_softmax_ce{}_{}__{}", bwd ? "_bwd" : "", ids ? "ids" : "probs", isa_name(isa));
  if (want != j->ex->kernel_name(0)) return fmt::format("kernel {}, expected {} {}", j->ex->kernel_name(0), want, err);
  const double sum_ulps = 4 + std::ceil(double(classes) / (4 * width(isa))) + 8;
  const float dloss = 1.25f;
  auto fill = [&](std::vector<Tensor*>& ts) {
    fill_x(*ts[0], rng, specials);
    if (ids) {
      std::uniform_int_distribution<int32_t> u(0, static_cast<int32_t>(classes - 1));
      for (int64_t r2 = 0; r2 < rows; ++r2) {
        int32_t id = u(rng);
        if (r2 % 5 == 3) id = (r2 / 5) % 2 ? static_cast<int32_t>(classes) : -1;  // out of range: that row NaN
        ts[1]->i32()[r2] = id;
      }
    } else {
      std::uniform_real_distribution<float> u(0, 1);
      for (int64_t r2 = 0; r2 < rows; ++r2) {
        double s = 0;
        for (int64_t k = 0; k < classes; ++k) {
          float t = (k % 3 == 1) ? 0.f : u(rng);
          ts[1]->f32()[r2 * classes + k] = t;
          s += t;
        }
        for (int64_t k = 0; k < classes && s > 0; ++k) ts[1]->f32()[r2 * classes + k] /= static_cast<float>(s);
      }
    }
    if (bwd) ts[2]->f32()[0] = dloss;
  };
  const double scale = dloss / double(rows);
  TolFn tol = bwd ? TolFn([&](int64_t, float b) { return (8 + 2 * sum_ulps) * EPS * (std::fabs(b) + scale) + 1e-40; })
                  : TolFn([&](int64_t, float b) { return (16 + 4 * sum_ulps) * EPS * (std::fabs(b) + 1); });
  return run_and_compare(*j, *r, fill, tol);
}

TEST(JitSoftmaxCe, IdsAndTargetsOverSizes) {
  std::mt19937 rng(21);
  for (Isa isa : isas())
    for (bool bwd : {false, true})
      for (bool ids : {true, false})
        for (int64_t classes : lengths(isa))
          for (int64_t rows : {int64_t(1), int64_t(4), int64_t(11)}) {
            if (classes >= 1000 && rows > 4) continue;
            for (bool specials : {false, true}) {
              const std::string p = run_ce(bwd, ids, rows, classes, specials, isa, rng);
              EXPECT_TRUE(p.empty()) << isa_name(isa) << (bwd ? " bwd" : " fwd") << (ids ? " ids " : " probs ") << rows
                                     << "x" << classes << (specials ? " specials" : "") << "\n"
                                     << p;
            }
          }
}

// ---- CLIP_GRAD_NORM ----

TEST(JitClipGradNorm, SeveralGradientsBothBranches) {
  std::mt19937 rng(31);
  for (Isa isa : isas()) {
    const int w = width(isa);
    const std::vector<std::vector<Shape>> sets = {
        {Shape{1}},
        {Shape{int64_t(w - 1)}, Shape{int64_t(w)}, Shape{int64_t(w + 1)}},
        {Shape{64, 100}, Shape{100}, Shape{int64_t(2 * w + 3)}, Shape{10007}},
    };
    for (const auto& shapes : sets)
      for (double max_norm : {0.5, 1e6}) {
        std::vector<TensorType> types;
        for (const Shape& s : shapes) types.push_back(TensorType{DType::F32, s});
        const std::vector<std::pair<std::string, Imm>> imms = {{"max_norm", imm_f(max_norm)}};
        std::string err;
        auto j = build(Opcode::CLIP_GRAD_NORM, imms, types, true, JitConfig{true, isa}, &err);
        auto r = build(Opcode::CLIP_GRAD_NORM, imms, types, true, JitConfig{false, isa}, &err);
        ASSERT_TRUE(j && r) << err;
        EXPECT_EQ(std::string(j->ex->kernel_name(0)), fmt::format("f32_clip_grad_norm__{}", isa_name(isa))) << err;
        std::vector<std::vector<uint32_t>> before;
        for (size_t k = 0; k < shapes.size(); ++k) {
          Tensor& tj = j->ctx.at(j->in[k]);
          fill_x(tj, rng, false, -2, 2);
          std::memcpy(r->ctx.at(r->in[k]).data.data(), tj.data.data(), static_cast<size_t>(tj.numel()) * 4);
          uint32_t* wds = static_cast<uint32_t*>(tj.data.data());
          for (size_t i = static_cast<size_t>(tj.numel()); i < padded_words(tj.numel()); ++i) wds[i] = GUARD;
        }
        j->ex->run();
        r->ex->run();
        for (size_t k = 0; k < shapes.size(); ++k) {
          const Tensor& tj = j->ctx.at(j->in[k]);
          const Tensor& tr = r->ctx.at(r->in[k]);
          int bad = 0;
          for (int64_t i = 0; i < tj.numel(); ++i) {
            const float a = tj.f32()[i], b = tr.f32()[i];
            if (!(a == b || std::fabs(double(a) - b) <= 2 * EPS * std::fabs(b)) && bad++ < 3)
              ADD_FAILURE() << isa_name(isa) << " gradient " << k << " element " << i << ": " << a << " vs " << b;
          }
          const uint32_t* wds = static_cast<const uint32_t*>(tj.data.data());
          for (size_t i = static_cast<size_t>(tj.numel()); i < padded_words(tj.numel()); ++i)
            if (wds[i] != GUARD) {
              ADD_FAILURE() << isa_name(isa) << " guard band of gradient " << k << " overwritten";
              break;
            }
        }
      }
  }
}

// Deterministic: two contexts generating the same clip kernel give the same bits.
TEST(JitClipGradNorm, TwoRunsBitwiseEqual) {
  for (Isa isa : isas()) {
    const std::vector<TensorType> types = {TensorType{DType::F32, Shape{1000}}, TensorType{DType::F32, Shape{37, 3}}};
    const std::vector<std::pair<std::string, Imm>> imms = {{"max_norm", imm_f(1)}};
    std::vector<std::vector<float>> results;
    for (int run = 0; run < 2; ++run) {
      std::string err;
      auto j = build(Opcode::CLIP_GRAD_NORM, imms, types, true, JitConfig{true, isa}, &err);
      ASSERT_TRUE(j) << err;
      std::mt19937 rng(5);
      std::vector<float> all;
      for (TensorId id : j->in) fill_x(j->ctx.at(id), rng, false);
      j->ex->run();
      for (TensorId id : j->in) all.insert(all.end(), j->ctx.at(id).f32(), j->ctx.at(id).f32() + j->ctx.at(id).numel());
      results.push_back(all);
    }
    EXPECT_EQ(0, std::memcmp(results[0].data(), results[1].data(), results[0].size() * 4)) << isa_name(isa);
  }
}

// ---- GLOBAL_AVGPOOL: REDUCE_MEAN's row kernel over the N·C planes ----

// The kernel that runs is REDUCE_MEAN's for [N·C, H·W] along the last axis (checked against the
// reference above), so the results must be its bits exactly.
TEST(JitGlobalAvgPool, IsReduceMeanOfThePlanes) {
  std::mt19937 rng(14);
  for (Isa isa : isas())
    for (int64_t len : lengths(isa))
      for (const Shape& s : {Shape{1, 1, 1, len}, Shape{2, 3, len, 1}, Shape{3, 1, 1, len}}) {
        std::string err;
        auto j = build(Opcode::GLOBAL_AVGPOOL, {}, {TensorType{DType::F32, s}}, false, JitConfig{true, isa}, &err);
        auto m = build(Opcode::REDUCE_MEAN, {}, {TensorType{DType::F32, Shape{s[0] * s[1], s[2] * s[3]}}}, false,
                       JitConfig{true, isa}, &err);
        ASSERT_TRUE(j && m) << err;
        EXPECT_EQ(std::string(j->ex->kernel_name(0)), fmt::format("f32_reduce_mean__{}_row", isa_name(isa)));
        for (bool specials : {false, true}) {
          const std::string p = run_and_compare(
              *j, *m, [&](std::vector<Tensor*>& ts) { fill_x(*ts[0], rng, specials); },
              [](int64_t, float) { return 0.0; });
          EXPECT_TRUE(p.empty()) << isa_name(isa) << " " << s.str() << (specials ? " specials" : "") << "\n" << p;
        }
      }
}

// ---- coverage and code pages ----

TEST(JitRowwiseCoverage, EveryReductionAndSoftmaxLossHasAJitKernelAndACase) {
  // GLOBAL_AVGPOOL_NCHWC's kernel is a pooling kernel, with its cases in tests/pool_nchwc_test.cpp.
  std::set<Opcode> covered = {Opcode::SOFTMAX_CE, Opcode::SOFTMAX_CE_BWD, Opcode::CLIP_GRAD_NORM,
                              Opcode::GLOBAL_AVGPOOL, Opcode::GLOBAL_AVGPOOL_NCHWC};
  for (const AxisCase& c : axis_cases()) covered.insert(c.op);
  // Reductions without a generated kernel, each with its reason in its op file: ARGMAX and
  // ARGMIN (positions, not values: ops/reduce/argmax.cpp).
  const std::set<Opcode> reference_only = {Opcode::ARGMAX, Opcode::ARGMIN};
  for (const OpInfo& info : all_ops()) {
    if (info.category != OpCategory::REDUCE) continue;
    if (reference_only.count(info.op)) {
      EXPECT_EQ(op_hooks(info.op).jit, nullptr) << info.mnemonic << " has a JIT hook now: give it a case";
      continue;
    }
    EXPECT_TRUE(covered.count(info.op)) << info.mnemonic << " has no case in jit_rowwise_test";
  }
  for (Opcode op : covered) EXPECT_NE(op_hooks(op).jit, nullptr) << op_info(op).mnemonic << " has no JIT hook";
}

TEST(JitRowwiseCode, NoPageIsWritableAndExecutable) {
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
    auto b = build(Opcode::SOFTMAX, {}, {TensorType{DType::F32, Shape{8, 1000}}}, false, JitConfig{true, isa}, &err);
    ASSERT_TRUE(b) << err;
    EXPECT_EQ(std::string(b->ex->kernel_name(0)), fmt::format("f32_softmax__{}_row", isa_name(isa)));
    EXPECT_EQ(rwx(), "");
    b->ex->run();
    EXPECT_EQ(rwx(), "");
  }
}

}  // namespace
}  // namespace nnasm

// The vectorized math of jit/vmath.h against double-precision std:: results, at every ISA
// level this machine has: a dense sweep of each function's useful range, random bit patterns
// (every magnitude, NaN and inf included) and the special values (±0, ±inf, NaN, denormals,
// FLT_MIN/MAX, overflow and underflow thresholds). Each function's maximum error must stay
// within the bound vmath.h documents; the measured maxima are printed.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "jit/elementwise.h"
#include "jit/vmath.h"
#include "tests/jit_levels.h"

namespace nnasm {
namespace {

using Xbyak::Xmm;
using Regs = std::vector<Xmm>;
using Emit = std::function<void(VecGen&, const Xmm&, const Xmm&, const Regs&)>;

struct Fn {
  const char* name;
  int tmps;
  Emit emit;
  double (*ref)(double);
  double lo, hi;     // the dense sweep
  double max_ulp;    // the documented bound
  double (*amplifier)(double) = nullptr;  // the bound grows by ulp_per_amp·|amplifier(x)|
  double ulp_per_amp = 0;
};

const double K = vmath::GELU_TANH_K, C = vmath::GELU_TANH_C;

double ref_sigmoid(double x) { return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x)); }
double ref_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }
double ref_gelu(double x) {
  if (std::isinf(x)) return x > 0 ? x : -0.0;
  return x * ref_cdf(x);
}
double ref_gelu_tanh(double x) {
  if (std::isinf(x)) return x > 0 ? x : -0.0;
  const double u = K * (x + C * x * x * x);
  return x / (1 + std::exp(-2 * u));
}
double two_u(double x) { return 2 * K * (x + C * x * x * x); }
double ref_exp(double x) { return std::exp(x); }
double ref_expm1(double x) { return std::expm1(x); }
double ref_log(double x) { return std::log(x); }
double ref_tanh(double x) { return std::tanh(x); }
double ref_erf(double x) { return std::erf(x); }
double ref_softplus(double x) { return std::isinf(x) ? (x > 0 ? x : 0) : std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x))); }

std::vector<Fn> functions() {
  return {
      {"exp", vmath::EXP_TMPS, vmath::exp, ref_exp, -104, 89, vmath::EXP_MAX_ULP},
      {"expm1", vmath::EXPM1_TMPS, vmath::expm1, ref_expm1, -20, 89, vmath::EXPM1_MAX_ULP},
      {"log", vmath::LOG_TMPS, vmath::log, ref_log, 0, 4, vmath::LOG_MAX_ULP},
      {"tanh", vmath::TANH_TMPS, vmath::tanh, ref_tanh, -10, 10, vmath::TANH_MAX_ULP},
      {"sigmoid", vmath::SIGMOID_TMPS, vmath::sigmoid, ref_sigmoid, -105, 30, vmath::SIGMOID_MAX_ULP},
      {"normal_cdf", vmath::NORMAL_CDF_TMPS, vmath::normal_cdf, ref_cdf, -15, 8, vmath::NORMAL_CDF_MAX_ULP},
      {"gelu", vmath::GELU_TMPS, vmath::gelu, ref_gelu, -15, 8, vmath::GELU_MAX_ULP},
      {"erf", vmath::ERF_TMPS, vmath::erf, ref_erf, -5, 5, vmath::ERF_MAX_ULP},
      {"softplus", vmath::SOFTPLUS_TMPS, vmath::softplus, ref_softplus, -105, 30, vmath::SOFTPLUS_MAX_ULP},
      {"gelu_tanh", vmath::GELU_TANH_TMPS, vmath::gelu_tanh, ref_gelu_tanh, -12, 8, vmath::GELU_TANH_MAX_ULP, two_u,
       vmath::GELU_TANH_ULP_PER_2U},
  };
}

std::vector<Isa> isas() { return jit_levels(); }

// Applies f to x with a kernel from the elementwise generator (so dst is src's register, the
// hardest case for a snippet).
std::vector<float> apply(const Fn& f, Isa isa, const std::vector<float>& x, std::string* error) {
  KernelCache cache;
  EwSpec s;
  s.op = std::string("vmath_") + f.name;
  s.isa = isa;
  s.inner = static_cast<int64_t>(x.size());
  s.in = {Feed::STREAM};
  s.n_tmp = f.tmps;
  Emit emit = f.emit;
  s.body = [emit](VecGen& v, const std::vector<Xmm>& dst, const std::vector<Xmm>& src, const std::vector<Xmm>& tmp) {
    emit(v, dst[0], src[0], tmp);
  };
  Result<KernelRef> k = elementwise_kernel(s, cache);
  if (!k) {
    *error = k.status().message();
    return {};
  }
  std::vector<float> in(x.size() + 16), y(x.size() + 16);
  std::copy(x.begin(), x.end(), in.begin());
  const void* ins[] = {in.data()};
  void* outs[] = {y.data()};
  KernelArgs args{};
  args.in = ins;
  args.out = outs;
  args.n_in = 1;
  args.n_out = 1;
  k.value()->fn()(&args);
  y.resize(x.size());
  return y;
}

// The spacing of floats at |v| (2^-149 in the denormal range); inf counts as 2^128.
double ulp_at(double v) {
  const double a = std::fabs(v);
  if (a < FLT_MIN) return std::ldexp(1.0, -149);
  return std::ldexp(1.0, std::ilogb(a) - 23);
}

double as_double(float y) { return std::isinf(y) ? std::copysign(std::ldexp(1.0, 128), y) : y; }

struct Stats {
  double max_err = 0;  // in ulp; with an amplifier, in ulp less the amplified part of the bound
  float worst_x = 0;
  double worst_got = 0, worst_want = 0;
  std::vector<std::string> failures;
};

// Error of one result in ulps; NaN results must match NaN references. Exceeding the bound is
// recorded as a failure.
void check(const Fn& f, float x, float got, Stats* st) {
  const double want = f.ref(x);
  if (std::isnan(want) || std::isnan(got)) {
    if (std::isnan(want) != std::isnan(got) && st->failures.size() < 8)
      st->failures.push_back(fmt::format("{}({:a}) = {}, expected {}", f.name, x, got, want));
    return;
  }
  const double w = std::fabs(want) > std::ldexp(1.0, 128) ? std::copysign(std::ldexp(1.0, 128), want) : want;
  const double err = std::fabs(as_double(got) - w);
  double ulps = err / ulp_at(w);
  if (f.amplifier && std::isfinite(x)) ulps -= f.ulp_per_amp * std::fabs(f.amplifier(x));
  const bool ok = ulps <= f.max_ulp;
  if (ulps > st->max_err) {
    st->max_err = ulps;
    st->worst_x = x;
    st->worst_got = got;
    st->worst_want = want;
  }
  if (!ok && st->failures.size() < 8)
    st->failures.push_back(fmt::format("{}({:.9g}) = {:.9g}, expected {:.17g} ({:.2f} ulp)", f.name, x, got, want,
                                       err / ulp_at(w)));
}

std::vector<float> special_values() {
  std::vector<float> v = {0.f, -0.f, INFINITY, -INFINITY, NAN, -NAN, FLT_MIN, -FLT_MIN, FLT_MAX, -FLT_MAX,
                          FLT_TRUE_MIN, -FLT_TRUE_MIN, 1e-40f, -1e-40f, FLT_MIN / 2, -FLT_MIN / 2, 1.f, -1.f,
                          0.5f, -0.5f, 1e-10f, -1e-10f, 1e10f, -1e10f, 1e30f, -1e30f, 88.7f, 88.72f, 88.7228f,
                          88.73f, 89.f, 100.f, -87.3f, -88.f, -103.9f, -103.97f, -104.f, -105.f, -150.f, 9.f,
                          9.1f, -9.1f, 0.625f, -0.625f, 0.6249f, 0.3466f, -0.3466f, 0.3467f, 14.f, -14.f, 15.f,
                          -15.f, 16.f, -16.f, 1.41421354f, 1.41421366f, 0.70710677f};
  const uint32_t snan = 0x7fa00001u;
  float s;
  std::memcpy(&s, &snan, 4);
  v.push_back(s);
  return v;
}

// NNASM_VMATH_SWEEP=k sweeps 2^k points instead of 2^20 (for a slower, denser check).
std::vector<float> sweep(const Fn& f, std::mt19937& rng) {
  std::vector<float> x;
  const char* env = std::getenv("NNASM_VMATH_SWEEP");
  const int n = 1 << (env ? std::max(10, std::min(28, std::atoi(env))) : 20);
  for (int i = 0; i <= n; ++i) x.push_back(static_cast<float>(f.lo + (f.hi - f.lo) * i / n));
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < (1 << 18); ++i) {
    const uint32_t b = bits(rng);
    float v;
    std::memcpy(&v, &b, 4);
    x.push_back(v);
  }
  // Near zero, every binade.
  for (int e = -149; e < 0; ++e)
    for (float m : {1.f, 1.37f, 1.99f}) {
      x.push_back(std::ldexp(m, e));
      x.push_back(-std::ldexp(m, e));
    }
  for (float v : special_values()) x.push_back(v);
  return x;
}

void PrintTo(const Fn& f, std::ostream* os) { *os << f.name; }

class VmathTest : public ::testing::TestWithParam<Fn> {};

TEST_P(VmathTest, WithinTheDocumentedBoundAtEveryIsa) {
  const Fn& f = GetParam();
  std::mt19937 rng(1234);
  const std::vector<float> x = sweep(f, rng);
  for (Isa isa : isas()) {
    std::string err;
    const std::vector<float> y = apply(f, isa, x, &err);
    ASSERT_EQ(y.size(), x.size()) << isa_name(isa) << ": " << err;
    Stats st;
    for (size_t i = 0; i < x.size(); ++i) check(f, x[i], y[i], &st);
    std::string msg;
    for (const std::string& s : st.failures) msg += "  " + s + "\n";
    EXPECT_TRUE(st.failures.empty()) << isa_name(isa) << ": " << msg;
    fmt::print("  {:10} {:6}: max {:.3f} ulp (bound {}) at x = {:.9g}: {:.9g} vs {:.17g}\n", f.name, isa_name(isa),
               st.max_err, f.max_ulp, st.worst_x, st.worst_got, st.worst_want);
  }
}

// The limits vmath.h promises, exactly.
TEST_P(VmathTest, SpecialValuesExactly) {
  const Fn& f = GetParam();
  struct Case {
    float x, want;
  };
  std::vector<Case> cases;
  const std::string n = f.name;
  if (n == "exp") cases = {{-INFINITY, 0}, {INFINITY, INFINITY}, {88.73f, INFINITY}, {1000, INFINITY}, {-1000, 0},
                           {0, 1}, {-0.f, 1}, {1e-40f, 1}, {-105, 0}};
  if (n == "expm1") cases = {{-INFINITY, -1}, {INFINITY, INFINITY}, {0, 0}, {-30, -1}, {100, INFINITY}};
  if (n == "log") cases = {{0, -INFINITY}, {-0.f, -INFINITY}, {-1, NAN}, {-INFINITY, NAN}, {INFINITY, INFINITY},
                           {1, 0}, {FLT_TRUE_MIN, static_cast<float>(-149 * std::log(2.0))}, {-1e-40f, NAN}};
  if (n == "tanh") cases = {{INFINITY, 1}, {-INFINITY, -1}, {0, 0}, {20, 1}, {-20, -1}, {1e-40f, 1e-40f}, {1e30f, 1}};
  if (n == "sigmoid") cases = {{INFINITY, 1}, {-INFINITY, 0}, {0, 0.5f}, {-200, 0}, {50, 1}};
  if (n == "normal_cdf") cases = {{INFINITY, 1}, {-INFINITY, 0}, {-40, 0}, {40, 1}};
  if (n == "gelu" || n == "gelu_tanh")
    cases = {{INFINITY, INFINITY}, {-INFINITY, 0}, {0, 0}, {-100, 0}, {100, 100}};
  for (Isa isa : isas()) {
    std::vector<float> x;
    for (const Case& c : cases) x.push_back(c.x);
    std::string err;
    const std::vector<float> y = apply(f, isa, x, &err);
    ASSERT_EQ(y.size(), x.size()) << err;
    for (size_t i = 0; i < cases.size(); ++i) {
      if (std::isnan(cases[i].want)) {
        EXPECT_TRUE(std::isnan(y[i])) << isa_name(isa) << " " << f.name << "(" << cases[i].x << ") = " << y[i];
      } else if (n == "log" && cases[i].x == FLT_TRUE_MIN) {
        EXPECT_NEAR(y[i], cases[i].want, 1e-4) << isa_name(isa) << " log(denormal)";
      } else {
        EXPECT_EQ(y[i], cases[i].want) << isa_name(isa) << " " << f.name << "(" << cases[i].x << ")";
      }
    }
    // The sign of zero: tanh(−0) = −0, gelu(−0) = gelu(−inf) = −0.
    if (n == "tanh" || n == "gelu" || n == "gelu_tanh") {
      std::vector<float> z = apply(f, isa, {-0.f, -INFINITY}, &err);
      EXPECT_TRUE(std::signbit(z[0])) << isa_name(isa) << " " << n << "(-0) = " << z[0];
      if (n != "tanh") {
        EXPECT_TRUE(std::signbit(z[1])) << isa_name(isa) << " " << n << "(-inf) = " << z[1];
      }
    }
  }
}

// Every NaN gives NaN, whatever its sign or payload.
TEST_P(VmathTest, NanInNanOut) {
  const Fn& f = GetParam();
  std::vector<float> x;
  for (uint32_t b : {0x7fc00000u, 0xffc00000u, 0x7fa00001u, 0x7f800001u, 0xffffffffu, 0x7fffffffu}) {
    float v;
    std::memcpy(&v, &b, 4);
    x.push_back(v);
  }
  for (Isa isa : isas()) {
    std::string err;
    const std::vector<float> y = apply(f, isa, x, &err);
    ASSERT_EQ(y.size(), x.size()) << err;
    for (size_t i = 0; i < x.size(); ++i) EXPECT_TRUE(std::isnan(y[i])) << isa_name(isa) << " lane " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(All, VmathTest, ::testing::ValuesIn(functions()),
                         [](const ::testing::TestParamInfo<Fn>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace nnasm

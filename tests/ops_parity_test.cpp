// Op parity tests: every opcode of isa/opcodes.def is run against a naive implementation written
// here (plain loops in double, indices computed from scratch, nothing from ops/) over the size
// sweep 1, 7, 15, 16, 17, 33 and a large case, with every immediate exercised and a guard band
// after each output. The case table is keyed by opcode and the parameterized suite is stamped from
// all_ops(), so an op added to the table without cases (or an immediate never set) fails here.
// In-place ops (the optimizer steps, OPF_INPLACE) are built with the inputs they update as their
// outputs, and every one of those outputs is compared. Ops whose operands are all f32[] by
// contract (ADVANCE, LR_SCHEDULE) are exempt from the size sweep, and sweep their values instead.
// Special values (NaN, ±inf, huge inputs) and shape-inference errors follow the parity cases.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include "tests/conv_bf16_naive.h"
#include "tests/linear_bf16_naive.h"
#include "tests/conv_i8_naive.h"
#include "tests/linear_i8_naive.h"
#include "tests/nchwc_naive.h"
#include "tests/nchwc_dwconv_naive.h"
#include "tests/nchwc_blocking.h"
#include "tests/op_harness.h"

namespace nnasm::test {
namespace {

constexpr int64_t SWEEP[] = {1, 7, 15, 16, 17, 33};
constexpr int64_t LARGE = 1000;
const double INF = std::numeric_limits<double>::infinity();
const double NaN = std::numeric_limits<double>::quiet_NaN();

const Tolerance ELEMENTWISE{1e-6, 1e-5};
const Tolerance EXACT{0, 0};
// A sum of k f32 terms, relative to Σ|terms|: recursive summation errs by about k·u.
Tolerance sum_tol(int64_t k) { return {1e-6, 2e-6 + 1.2e-7 * static_cast<double>(k)}; }

Expected expect_like(const HostTensor& t, Tolerance tol) { return Expected{HostTensor{t.type, {}}, {}, tol}; }

// Runs the cases of one op and records what they covered.
class ParityRun {
 public:
  explicit ParityRun(Opcode op) : op_(op), rng_(0x5eedu + static_cast<uint32_t>(op)) {}
  std::mt19937& rng() { return rng_; }

  void check(const std::vector<HostTensor>& in, const std::vector<ImmArg>& imms, const Expected& want) {
    check_all(in, imms, {want});
  }

  // For ops with several outputs (the in-place optimizer steps): one expectation per output.
  void check_all(const std::vector<HostTensor>& in, const std::vector<ImmArg>& imms,
                 const std::vector<Expected>& want) {
    SCOPED_TRACE(describe(op_, in, imms));
    ++cases_;
    for (const ImmArg& a : imms)
      if (!is_default(a)) exercised_.insert(a.key);
    for (const HostTensor& t : in) {
      for (int d = 0; d < t.type.shape.rank; ++d) sizes_.insert(t.type.shape.dims[d]);
      sizes_.insert(count_of(t.type.shape));
      max_numel_ = std::max(max_numel_, count_of(t.type.shape));
      saw_i32_ |= t.type.dtype == DType::I32;
      saw_non_scalar_ |= t.type.shape.rank > 0;
    }
    for (const Expected& w : want) {
      sizes_.insert(count_of(w.t.type.shape));
      ASSERT_EQ(w.t.v.size(), static_cast<size_t>(count_of(w.t.type.shape))) << "test error: expectation size";
    }
    EXPECT_TRUE(matches_all(want, run_op(op_, in, imms, training_)));
  }

  // A case the op must refuse (an immediate's value it does not take, as CONV2D_NCHWC's
  // groups other than 1): its immediates count as exercised, and the refusal names the op and
  // `needle`.
  void check_rejected(const std::vector<HostTensor>& in, const std::vector<ImmArg>& imms, const std::string& needle) {
    SCOPED_TRACE(describe(op_, in, imms));
    for (const ImmArg& a : imms)
      if (!is_default(a)) exercised_.insert(a.key);
    std::vector<TensorType> types;
    for (const HostTensor& t : in) types.push_back(t.type);
    EXPECT_TRUE(append_fails(op_, types, imms, {op_info(op_).mnemonic, needle}));
  }

  // The mode the following cases run in (RunState::training); inference unless set.
  void set_training(bool t) { training_ = t; }

  // For ops whose contract allows only f32[] operands (a step counter, a learning rate): the
  // size sweep does not apply. Coverage then checks that no case had a larger operand.
  void scalar_operands_only() { scalar_only_ = true; }

  // The op's cases set every immediate of its schema to a non-default value at least once, cover
  // the size sweep among operand dimensions and element counts, include a large operand, and
  // (for ops that move bytes of any dtype) an i32 case.
  void expect_coverage() const {
    const OpInfo& info = op_info(op_);
    EXPECT_GT(cases_, 0);
    for (const ImmSpec& s : info.imms)
      EXPECT_TRUE(exercised_.count(s.key)) << info.mnemonic << ": no case sets immediate '" << s.key
                                           << "' to a value other than its default";
    if (scalar_only_) {
      EXPECT_FALSE(saw_non_scalar_) << info.mnemonic << ": declared scalar-only, yet a case has a non-scalar operand";
      return;
    }
    for (int64_t n : SWEEP) EXPECT_TRUE(sizes_.count(n)) << info.mnemonic << ": no operand has size " << n;
    EXPECT_GE(max_numel_, LARGE) << info.mnemonic << ": no large case";
    if (info.flags & OPF_ANY_DTYPE) {
      EXPECT_TRUE(saw_i32_) << info.mnemonic << ": no i32 case";
    }
  }

 private:
  bool is_default(const ImmArg& a) const {
    const OpInfo& info = op_info(op_);
    const int k = imm_index(info, a.key);
    if (k < 0) return true;  // not an immediate of the op: the run reports it
    if (!info.imms[k].has_default) return false;
    const Imm& d = info.imms[k].default_value;
    switch (a.value.type) {
      case ImmType::F32: return a.value.f == d.f;
      case ImmType::ENUM: return a.value.ident == d.ident;
      case ImmType::INTS: return a.value.ints == d.ints;
      case ImmType::STR: return a.value.ident == d.ident;
      default: return a.value.i == d.i;
    }
  }

  Opcode op_;
  std::mt19937 rng_;
  int cases_ = 0;
  std::set<std::string> exercised_;
  std::set<int64_t> sizes_;
  int64_t max_numel_ = 0;
  bool saw_i32_ = false;
  bool saw_non_scalar_ = false;
  bool scalar_only_ = false;
  bool training_ = false;
};

// ---------------------------------------------------------------------------------------------
// Elementwise

std::vector<Shape> elementwise_shapes() {
  return {Shape{1},     Shape{7},        Shape{15},   Shape{16},     Shape{17},
          Shape{33},    Shape{1031},     Shape(),     Shape{3, 5, 7}, Shape{2, 3, 4, 5},
          Shape{16, 1}, Shape{1, 17, 1}, Shape{65, 70}};
}

using Fn1 = std::function<double(double)>;

void unary_sweep(ParityRun& r, const std::vector<ImmArg>& imms, const Fn1& f, double lo = -2, double hi = 2) {
  for (const Shape& s : elementwise_shapes()) {
    const HostTensor x = random_f32(s, r.rng(), lo, hi);
    Expected e = expect_like(x, ELEMENTWISE);
    for (double v : x.v) e.t.v.push_back(f(v));
    r.check({x}, imms, e);
  }
}

double sigmoid_d(double x) { return 1 / (1 + std::exp(-x)); }
double gelu_erf_d(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_d(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::acos(-1.0)) * (x + 0.044715 * x * x * x)));
}

void cases_scale(ParityRun& r) {
  unary_sweep(r, {}, [](double x) { return x; });
  unary_sweep(r, {imm_f("alpha", -0.75)}, [](double x) { return -0.75 * x; });
  unary_sweep(r, {imm_f("alpha", 3.5)}, [](double x) { return 3.5 * x; });
}
void cases_neg(ParityRun& r) { unary_sweep(r, {}, [](double x) { return -x; }); }
void cases_exp(ParityRun& r) { unary_sweep(r, {}, [](double x) { return std::exp(x); }, -4, 4); }
void cases_log(ParityRun& r) { unary_sweep(r, {}, [](double x) { return std::log(x); }, 0.01, 4); }
void cases_sqrt(ParityRun& r) { unary_sweep(r, {}, [](double x) { return std::sqrt(x); }, 0, 4); }
void cases_abs(ParityRun& r) { unary_sweep(r, {}, [](double x) { return x < 0 ? -x : x; }); }
void cases_square(ParityRun& r) { unary_sweep(r, {}, [](double x) { return x * x; }); }
void cases_relu(ParityRun& r) { unary_sweep(r, {}, [](double x) { return x > 0 ? x : 0; }); }
void cases_leakyrelu(ParityRun& r) {
  unary_sweep(r, {}, [](double x) { return x > 0 ? x : 0.01 * x; });
  unary_sweep(r, {imm_f("slope", 0.2)}, [](double x) { return x > 0 ? x : 0.2 * x; });
  unary_sweep(r, {imm_f("slope", -0.5)}, [](double x) { return x > 0 ? x : -0.5 * x; });
}
void cases_elu(ParityRun& r) {
  unary_sweep(r, {}, [](double x) { return x > 0 ? x : std::exp(x) - 1; }, -4, 2);
  unary_sweep(r, {imm_f("alpha", 0.5)}, [](double x) { return x > 0 ? x : 0.5 * (std::exp(x) - 1); }, -4, 2);
}
void cases_clipped_relu(ParityRun& r) {
  for (double t : {6.0, 1.5, 0.25}) {
    std::vector<ImmArg> imms;
    if (t != 6.0) imms.push_back(imm_f("threshold", t));
    unary_sweep(r, imms, [t](double x) { return x < 0 ? 0 : (x > t ? t : x); }, -8, 8);
  }
}
void cases_sigmoid(ParityRun& r) { unary_sweep(r, {}, sigmoid_d, -8, 8); }
void cases_tanh(ParityRun& r) { unary_sweep(r, {}, [](double x) { return std::tanh(x); }, -4, 4); }
void cases_gelu(ParityRun& r) {
  unary_sweep(r, {}, gelu_erf_d, -4, 4);
  unary_sweep(r, {imm_enum("approx", "none")}, gelu_erf_d, -4, 4);
  unary_sweep(r, {imm_enum("approx", "tanh")}, gelu_tanh_d, -4, 4);
}
void cases_erf(ParityRun& r) { unary_sweep(r, {}, [](double x) { return std::erf(x); }, -4, 4); }
void cases_clamp(ParityRun& r) {
  struct Bounds {
    double lo, hi;  // ±inf: left at the default
  };
  for (const Bounds& c : {Bounds{-INF, INF}, Bounds{-0.5, 1.25}, Bounds{0, INF}, Bounds{-INF, 6}, Bounds{1, -1}}) {
    std::vector<ImmArg> imms;
    if (c.lo != -INF) imms.push_back(imm_f("min", c.lo));
    if (c.hi != INF) imms.push_back(imm_f("max", c.hi));
    unary_sweep(r, imms, [c](double x) { return std::min(std::max(x, c.lo), c.hi); }, -8, 8);
  }
}
void cases_reciprocal(ParityRun& r) { unary_sweep(r, {}, [](double x) { return 1 / x; }); }
void cases_floor(ParityRun& r) { unary_sweep(r, {}, [](double x) { return std::floor(x); }, -8, 8); }
void cases_ceil(ParityRun& r) { unary_sweep(r, {}, [](double x) { return std::ceil(x); }, -8, 8); }
// Random values and, on every shape, a quarter of them whole or halves (the ties, to even).
void cases_round(ParityRun& r) {
  for (const Shape& s : elementwise_shapes()) {
    HostTensor x = random_f32(s, r.rng(), -8, 8);
    for (size_t i = 0; i < x.v.size(); i += 4) x.v[i] = std::round(x.v[i] * 2) / 2;
    Expected e = expect_like(x, EXACT);
    for (double v : x.v) e.t.v.push_back(std::nearbyint(v));  // the default mode: ties to even
    r.check({x}, {}, e);
  }
}
// Every direction on every shape: f32 → i32 over ±3e9 (saturating outside i32's range) and small
// values; i32 → f32 over i32's range (rounded to the nearest float); the same-dtype copies.
void cases_cast(ParityRun& r) {
  auto to_i32 = [](double x) {
    if (std::isnan(x)) return 0.0;
    if (x >= 2147483648.0) return 2147483647.0;
    if (x <= -2147483649.0) return -2147483648.0;
    return std::trunc(x);
  };
  for (const Shape& s : elementwise_shapes()) {
    HostTensor x = random_f32(s, r.rng(), -3e9, 3e9);
    for (size_t i = 1; i < x.v.size(); i += 2) x.v[i] = static_cast<float>(x.v[i] * 1e-8);  // within ±30
    Expected e{HostTensor{TensorType{DType::I32, s}, {}}, {}, EXACT};
    for (double v : x.v) e.t.v.push_back(to_i32(v));
    r.check({x}, {imm_enum("to", "i32")}, e);
    r.check({x}, {imm_enum("to", "f32")}, Expected{x, {}, EXACT});
    const HostTensor k = random_i32(s, r.rng());
    Expected f{HostTensor{TensorType{DType::F32, s}, {}}, {}, EXACT};
    for (double v : k.v) f.t.v.push_back(static_cast<float>(v));
    r.check({k}, {imm_enum("to", "f32")}, f);
    r.check({k}, {imm_enum("to", "i32")}, Expected{k, {}, EXACT});
  }
}
void cases_sign(ParityRun& r) { unary_sweep(r, {}, [](double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : x; }); }
void cases_softplus(ParityRun& r) {
  unary_sweep(r, {}, [](double x) { return std::log1p(std::exp(x)); }, -20, 20);
}
double unit_clamp_d(double t) { return std::min(1.0, std::max(0.0, t)); }
void cases_hardsigmoid(ParityRun& r) {
  // ONNX's defaults; PyTorch's nn.Hardsigmoid (1/6, 1/2); another pair. The immediates as floats.
  const double sixth = static_cast<float>(1.0 / 6);
  unary_sweep(r, {}, [](double x) { return unit_clamp_d(static_cast<float>(0.2) * x + 0.5); }, -5, 5);
  unary_sweep(r, {imm_f("alpha", sixth)}, [sixth](double x) { return unit_clamp_d(sixth * x + 0.5); }, -5, 5);
  unary_sweep(r, {imm_f("alpha", 0.75), imm_f("beta", -0.25)}, [](double x) { return unit_clamp_d(0.75 * x - 0.25); },
              -3, 3);
}
void cases_hardswish(ParityRun& r) {
  unary_sweep(r, {}, [](double x) { return x * unit_clamp_d(x / 6 + 0.5); }, -5, 5);
}
void cases_selu(ParityRun& r) {
  const double a = static_cast<float>(1.6732632), g = static_cast<float>(1.050701);
  unary_sweep(r, {}, [a, g](double x) { return g * (x > 0 ? x : a * std::expm1(x)); }, -6, 3);
  unary_sweep(r, {imm_f("alpha", 1.5), imm_f("gamma", 2)}, [](double x) { return 2 * (x > 0 ? x : 1.5 * std::expm1(x)); },
              -6, 3);
}
// Angles of a positional encoding's size and beyond.
void cases_sin(ParityRun& r) {
  unary_sweep(r, {}, [](double x) { return std::sin(x); }, -8, 8);
  unary_sweep(r, {}, [](double x) { return std::sin(x); }, -3000, 3000);
}
void cases_cos(ParityRun& r) {
  unary_sweep(r, {}, [](double x) { return std::cos(x); }, -8, 8);
  unary_sweep(r, {}, [](double x) { return std::cos(x); }, -3000, 3000);
}
void cases_swish(ParityRun& r) {
  unary_sweep(r, {}, [](double x) { return x * sigmoid_d(x); }, -6, 6);
  unary_sweep(r, {imm_f("beta", 1.75)}, [](double x) { return x * sigmoid_d(1.75 * x); }, -6, 6);
  unary_sweep(r, {imm_f("beta", -0.5)}, [](double x) { return x * sigmoid_d(-0.5 * x); }, -6, 6);
}

// Numpy broadcasting written out: trailing dimensions aligned; 1 or a missing dimension stretches.
// Requires compatible shapes.
Shape broadcast_ref(const Shape& a, const Shape& b) {
  Shape o;
  o.rank = std::max(a.rank, b.rank);
  for (int i = 0; i < o.rank; ++i) {
    const int ia = i - (o.rank - a.rank), ib = i - (o.rank - b.rank);
    const int64_t da = ia >= 0 ? a.dims[ia] : 1, db = ib >= 0 ? b.dims[ib] : 1;
    o.dims[i] = da == 1 ? db : da;
  }
  return o;
}

// Offset into an operand of shape `in` of the broadcast result's index `idx` (whose trailing
// in.rank entries line up with `in`).
int64_t broadcast_offset(const std::vector<int64_t>& idx, size_t first, const Shape& in) {
  const size_t lead = idx.size() - first - static_cast<size_t>(in.rank);
  std::vector<int64_t> j(static_cast<size_t>(in.rank));
  for (int d = 0; d < in.rank; ++d) j[d] = in.dims[d] == 1 ? 0 : idx[first + lead + d];
  return ravel(j, in);
}

std::vector<std::pair<Shape, Shape>> binary_shapes() {
  std::vector<std::pair<Shape, Shape>> v;
  for (const Shape& s : elementwise_shapes()) v.push_back({s, s});
  const std::vector<std::pair<Shape, Shape>> bc = {
      {Shape{3, 4}, Shape{4}},           {Shape{4}, Shape{3, 4}},         {Shape{3, 1}, Shape{1, 4}},
      {Shape{2, 3, 4}, Shape{3, 1}},     {Shape(), Shape{5}},             {Shape{5}, Shape()},
      {Shape{1}, Shape{33}},             {Shape{17, 1}, Shape{15}},       {Shape{2, 1, 16}, Shape{7, 1}},
      {Shape{65, 70}, Shape{70}},        {Shape{65, 1}, Shape{1, 70}},    {Shape{2, 3, 4, 5}, Shape{3, 1, 5}},
      {Shape{1, 3, 1, 5}, Shape{2, 1, 4, 1}}, {Shape{7, 1, 1}, Shape{1}}, {Shape(), Shape{2, 3, 4, 5}}};
  v.insert(v.end(), bc.begin(), bc.end());
  return v;
}

using Fn2 = std::function<double(double, double)>;

// `mag(a, b, y)` is the magnitude the rounding error of y scales with.
void binary_sweep(ParityRun& r, const std::vector<ImmArg>& imms, const Fn2& f,
                  const std::function<double(double, double, double)>& mag, bool b_away_from_zero = false) {
  for (const auto& [sa, sb] : binary_shapes()) {
    const HostTensor a = random_f32(sa, r.rng());
    HostTensor b = random_f32(sb, r.rng());
    if (b_away_from_zero)
      for (double& v : b.v) v = static_cast<float>(v < 0 ? v - 0.25 : v + 0.25);
    const Shape so = broadcast_ref(sa, sb);
    Expected e{HostTensor{TensorType{DType::F32, so}, {}}, {}, ELEMENTWISE};
    for (int64_t i = 0; i < count_of(so); ++i) {
      const std::vector<int64_t> idx = unravel(i, so);
      const double x = a.v[broadcast_offset(idx, 0, sa)], y = b.v[broadcast_offset(idx, 0, sb)];
      e.t.v.push_back(f(x, y));
      e.mag.push_back(mag(x, y, e.t.v.back()));
    }
    r.check({a, b}, imms, e);
  }
}

double mag_result(double, double, double y) { return std::fabs(y); }

void cases_add(ParityRun& r) {
  const std::pair<double, double> coefficients[] = {{1, 1}, {0.5, -1.5}, {-2, 0}, {1, 3}};
  for (const auto& c : coefficients) {
    const double al = c.first, be = c.second;
    std::vector<ImmArg> imms;
    if (al != 1) imms.push_back(imm_f("alpha", al));
    if (be != 1) imms.push_back(imm_f("beta", be));
    binary_sweep(r, imms, [al, be](double a, double b) { return al * a + be * b; },
                 [al, be](double a, double b, double) { return std::fabs(al * a) + std::fabs(be * b); });
  }
}
void cases_sub(ParityRun& r) {
  binary_sweep(r, {}, [](double a, double b) { return a - b; },
               [](double a, double b, double) { return std::fabs(a) + std::fabs(b); });
}
void cases_mul(ParityRun& r) { binary_sweep(r, {}, [](double a, double b) { return a * b; }, mag_result); }
void cases_div(ParityRun& r) { binary_sweep(r, {}, [](double a, double b) { return a / b; }, mag_result, true); }
// POW: a > 0 with any b (exponents large enough to overflow and underflow), and a of either sign
// with whole-number b (odd and even, negative ones); std::pow in double is the oracle.
void cases_pow(ParityRun& r) {
  for (const auto& [sa, sb] : binary_shapes()) {
    HostTensor a = random_f32(sa, r.rng(), 0.05, 4);
    const HostTensor b = random_f32(sb, r.rng(), -3, 3);
    HostTensor a2 = random_f32(sa, r.rng(), -3, 3);
    HostTensor b2 = random_f32(sb, r.rng(), -4, 4);
    for (double& v : b2.v) v = std::round(v);
    for (const auto& [x, y] : {std::pair<const HostTensor&, const HostTensor&>{a, b}, {a2, b2}}) {
      const Shape so = broadcast_ref(sa, sb);
      Expected e{HostTensor{TensorType{DType::F32, so}, {}}, {}, ELEMENTWISE};
      for (int64_t i = 0; i < count_of(so); ++i) {
        const std::vector<int64_t> idx = unravel(i, so);
        e.t.v.push_back(std::pow(x.v[broadcast_offset(idx, 0, sa)], y.v[broadcast_offset(idx, 0, sb)]));
      }
      r.check({x, y}, {}, e);
    }
  }
  // Beyond float's range: overflow to inf, underflow to 0.
  const HostTensor big = host_f32({10, 10, 0.1, 2, 1e-20});
  r.check({big, host_f32({39, -39, 50, 200, 3})}, {}, Expected{host_f32({INF, 1e-39, 1e-50, INF, 0}), {}, {1e-44, 1e-6}});
}

// Comparisons: inputs on a grid of 0.5 in [−2, 2], so that ties are common.
void compare_sweep(ParityRun& r, const std::function<bool(double, double)>& holds) {
  for (const auto& [sa, sb] : binary_shapes()) {
    HostTensor a = random_f32(sa, r.rng()), b = random_f32(sb, r.rng());
    for (HostTensor* t : {&a, &b})
      for (double& v : t->v) v = std::round(2 * v) / 2;
    const Shape so = broadcast_ref(sa, sb);
    Expected e{HostTensor{TensorType{DType::F32, so}, {}}, {}, EXACT};
    for (int64_t i = 0; i < count_of(so); ++i) {
      const std::vector<int64_t> idx = unravel(i, so);
      e.t.v.push_back(holds(a.v[broadcast_offset(idx, 0, sa)], b.v[broadcast_offset(idx, 0, sb)]) ? 1 : 0);
    }
    r.check({a, b}, {}, e);
  }
}
void cases_equal(ParityRun& r) { compare_sweep(r, [](double a, double b) { return a == b; }); }
void cases_less(ParityRun& r) { compare_sweep(r, [](double a, double b) { return a < b; }); }
void cases_less_equal(ParityRun& r) { compare_sweep(r, [](double a, double b) { return a <= b; }); }
void cases_greater(ParityRun& r) { compare_sweep(r, [](double a, double b) { return a > b; }); }
void cases_greater_equal(ParityRun& r) { compare_sweep(r, [](double a, double b) { return a >= b; }); }

void cases_prelu(ParityRun& r) {
  binary_sweep(r, {}, [](double a, double b) { return a > 0 ? a : b * a; }, mag_result);
}

void cases_maximum(ParityRun& r) {
  binary_sweep(r, {}, [](double a, double b) { return a > b ? a : b; }, mag_result);
}
void cases_minimum(ParityRun& r) {
  binary_sweep(r, {}, [](double a, double b) { return a < b ? a : b; }, mag_result);
}

// CALC: expressions over several inputs, each broadcast to the output.
using FnN = std::function<double(const std::vector<double>&)>;

void calc_sweep(ParityRun& r, const std::string& expr, const std::vector<std::vector<Shape>>& cases, const FnN& f,
                const FnN& mag, double lo = -2, double hi = 2) {
  for (const std::vector<Shape>& shapes : cases) {
    std::vector<HostTensor> in;
    Shape so;
    for (const Shape& s : shapes) {
      in.push_back(random_f32(s, r.rng(), lo, hi));
      so = broadcast_ref(so, s);
    }
    Expected e{HostTensor{TensorType{DType::F32, so}, {}}, {}, ELEMENTWISE};
    for (int64_t i = 0; i < count_of(so); ++i) {
      const std::vector<int64_t> idx = unravel(i, so);
      std::vector<double> x;
      for (const HostTensor& t : in) x.push_back(t.v[broadcast_offset(idx, 0, t.type.shape)]);
      e.t.v.push_back(f(x));
      e.mag.push_back(mag(x));
    }
    r.check(in, {imm_str("expr", expr)}, e);
  }
}

void cases_calc(ParityRun& r) {
  // One input at every size of the sweep.
  std::vector<std::vector<Shape>> one;
  for (const Shape& s : elementwise_shapes()) one.push_back({s});
  calc_sweep(r, "add(mul(%0,%0),scale(%0,alpha=-0.5))", one, [](const std::vector<double>& x) {
    return x[0] * x[0] - 0.5 * x[0];
  }, [](const std::vector<double>& x) { return x[0] * x[0] + std::fabs(0.5 * x[0]); });
  // Three inputs, broadcast: a row, a column, one element; a constant.
  const std::vector<std::vector<Shape>> three = {
      {Shape{3, 4}, Shape{4}, Shape{3, 1}},       {Shape{65, 70}, Shape{70}, Shape{65, 1}},
      {Shape{17}, Shape{17}, Shape()},            {Shape(), Shape{33}, Shape{1}},
      {Shape{2, 3, 4, 5}, Shape{3, 1, 5}, Shape{5}}, {Shape{7, 1}, Shape{1, 16}, Shape{15, 7, 1}}};
  calc_sweep(r, "sub(mul(%0,%1),div(%2,add(square(%2),1.5)))", three, [](const std::vector<double>& x) {
    return x[0] * x[1] - x[2] / (x[2] * x[2] + 1.5);
  }, [](const std::vector<double>& x) { return std::fabs(x[0] * x[1]) + std::fabs(x[2]); });
  // Activations and exp, an input named twice, one not named at all (it still broadcasts).
  calc_sweep(r, "mul(sigmoid(%0),tanh(add(%1,exp(%0),beta=0.5)))", three, [](const std::vector<double>& x) {
    return sigmoid_d(x[0]) * std::tanh(x[1] + 0.5 * std::exp(x[0]));
  }, [](const std::vector<double>&) { return 1.0; });
}

// ---------------------------------------------------------------------------------------------
// Linear algebra

Shape with_matrix(std::vector<int64_t> batch, int64_t rows, int64_t cols) {
  batch.push_back(rows);
  batch.push_back(cols);
  return shape_of(batch);
}

// y[batch, i, j] = Σ_p A[batch_a, i, p]·B[batch_b, p, j], A and B read through the transposes.
Expected matmul_ref(const HostTensor& a, const HostTensor& b, bool ta, bool tb) {
  const Shape &as = a.type.shape, &bs = b.type.shape;
  const int64_t m = ta ? as.dims[as.rank - 1] : as.dims[as.rank - 2];
  const int64_t k = ta ? as.dims[as.rank - 2] : as.dims[as.rank - 1];
  const int64_t n = tb ? bs.dims[bs.rank - 2] : bs.dims[bs.rank - 1];
  const Shape ab = shape_of(std::vector<int64_t>(as.dims.begin(), as.dims.begin() + as.rank - 2));
  const Shape bb = shape_of(std::vector<int64_t>(bs.dims.begin(), bs.dims.begin() + bs.rank - 2));
  const Shape batch = broadcast_ref(ab, bb);
  std::vector<int64_t> out_dims(batch.dims.begin(), batch.dims.begin() + batch.rank);
  out_dims.push_back(m);
  out_dims.push_back(n);
  const Shape ys = shape_of(out_dims);
  Expected e{HostTensor{TensorType{DType::F32, ys}, {}}, {}, sum_tol(k)};
  // Row and column steps of A[i, p] and B[p, j] inside one matrix.
  const int64_t a_i = ta ? 1 : k, a_p = ta ? m : 1, b_p = tb ? 1 : n, b_j = tb ? k : 1;
  for (int64_t f = 0; f < count_of(ys); ++f) {
    const std::vector<int64_t> idx = unravel(f, ys);
    const std::vector<int64_t> bidx(idx.begin(), idx.end() - 2);
    const int64_t i = idx[idx.size() - 2], j = idx[idx.size() - 1];
    const int64_t a0 = broadcast_offset(bidx, 0, ab) * m * k, b0 = broadcast_offset(bidx, 0, bb) * k * n;
    double acc = 0, mag = 0;
    for (int64_t p = 0; p < k; ++p) {
      const double t = a.v[a0 + i * a_i + p * a_p] * b.v[b0 + p * b_p + j * b_j];
      acc += t;
      mag += std::fabs(t);
    }
    e.t.v.push_back(acc);
    e.mag.push_back(mag);
  }
  return e;
}

void matmul_case(ParityRun& r, const std::vector<int64_t>& batch_a, const std::vector<int64_t>& batch_b, int64_t m,
                 int64_t k, int64_t n, bool ta, bool tb) {
  const HostTensor a = random_f32(with_matrix(batch_a, ta ? k : m, ta ? m : k), r.rng());
  const HostTensor b = random_f32(with_matrix(batch_b, tb ? n : k, tb ? k : n), r.rng());
  std::vector<ImmArg> imms;
  if (ta) imms.push_back(imm_b("transA", true));
  if (tb) imms.push_back(imm_b("transB", true));
  r.check({a, b}, imms, matmul_ref(a, b, ta, tb));
}

void cases_matmul(ParityRun& r) {
  struct Mkn {
    int64_t m, k, n;
  };
  // M = 4 and 5 straddle the small-M (GEMV) path of the reference GEMM.
  const Mkn sizes[] = {{1, 1, 1}, {1, 33, 1}, {4, 70, 33}, {5, 16, 17}, {7, 15, 16}, {17, 33, 7}, {16, 17, 15}, {33, 7, 17}, {65, 70, 65}};
  struct Batches {
    std::vector<int64_t> a, b;
    Mkn s;
  };
  const Batches batched[] = {
      {{2, 1}, {5}, {3, 4, 6}},        // [2,1,3,4]·[5,4,6] → [2,5,3,6]
      {{}, {2}, {3, 4, 5}},            // a shared by every batch of b
      {{2}, {}, {7, 16, 17}},          // b shared by every batch of a
      {{2, 3}, {2, 3}, {7, 5, 3}},     // no broadcasting
      {{1, 3}, {4, 1}, {7, 2, 9}},     // both sides stretch
      {{3, 1, 2}, {1, 4, 1}, {2, 3, 2}},
      {{2, 1, 3, 1}, {1, 2, 1, 2}, {2, 3, 4}},  // batch rank 4: a rank-6 result
  };
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      for (const Mkn& s : sizes) matmul_case(r, {}, {}, s.m, s.k, s.n, ta, tb);
      for (const Batches& c : batched) matmul_case(r, c.a, c.b, c.s.m, c.s.k, c.s.n, ta, tb);
    }
}

// LINEAR's fused activations, written out in double: name, act_alpha, f.
struct LinearAct {
  const char* name;
  double alpha;
  std::function<double(double)> f;
};
const std::vector<LinearAct>& linear_acts() {
  static const std::vector<LinearAct> acts = {
      {"none", 0.3, [](double z) { return z; }},
      {"relu", 0, [](double z) { return z > 0 ? z : 0; }},
      {"leakyrelu", 0.1, [](double z) { return z > 0 ? z : 0.1 * z; }},
      {"elu", 0.7, [](double z) { return z > 0 ? z : 0.7 * (std::exp(z) - 1); }},
      {"clipped_relu", 0.5, [](double z) { return z < 0 ? 0 : (z > 0.5 ? 0.5 : z); }},
      {"sigmoid", 0, sigmoid_d},
      {"tanh", 0, [](double z) { return std::tanh(z); }},
      {"gelu", 0, gelu_erf_d},
      {"gelu_tanh", 0, gelu_tanh_d},
      {"swish", 1.5, [](double z) { return z * sigmoid_d(1.5 * z); }},
  };
  return acts;
}

// MATMUL with each fused activation: plain, transposed B at few rows (the packed kernel, not the
// dot kernel, which has no epilogue), and batched.
void cases_matmul_act(ParityRun& r) {
  cases_matmul(r);
  for (const LinearAct& act : linear_acts())
    for (bool tb : {false, true}) {
      const HostTensor a = random_f32(with_matrix({2}, 3, 16), r.rng());
      const HostTensor b = random_f32(with_matrix({}, tb ? 17 : 16, tb ? 16 : 17), r.rng());
      Expected e = matmul_ref(a, b, false, tb);
      for (double& v : e.t.v) v = act.f(v);
      e.tol = Tolerance{e.tol.atol + 1e-6, 1.2 * e.tol.rtol + 1e-6};
      std::vector<ImmArg> imms = {imm_enum("act", act.name), imm_f("act_alpha", act.alpha)};
      if (tb) imms.push_back(imm_b("transB", true));
      r.check({a, b}, imms, e);
    }
}

// LINEAR's sizes (LINEAR_BF16's too): x's leading dims, in and out.
struct LinearCase {
  std::vector<int64_t> rows;
  int64_t in, out;
};
const std::vector<LinearCase>& linear_cases() {
  static const std::vector<LinearCase> cases = {
      {{}, 1, 1},   {{}, 7, 1},     {{1}, 1, 7},         {{3}, 17, 33},   {{2, 3}, 16, 15},
      {{1}, 33, 7}, {{65}, 70, 65}, {{2, 2, 2}, 15, 16}, {{1031}, 1, 3}, {{7}, 33, 17}};
  return cases;
}

void cases_linear(ParityRun& r) {
  // Without an activation (default immediates), then every activation on every case.
  for (int a = -1; a < static_cast<int>(linear_acts().size()); ++a) {
    for (const LinearCase& c : linear_cases()) {
      std::vector<int64_t> xd = c.rows;
      xd.push_back(c.in);
      const HostTensor x = random_f32(shape_of(xd), r.rng());
      const HostTensor w = random_f32(Shape{c.in, c.out}, r.rng());
      const HostTensor b = random_f32(Shape{c.out}, r.rng());
      std::vector<int64_t> yd = c.rows;
      yd.push_back(c.out);
      // An activation passes the sum's error on times |f'| (at most 1.13, gelu) and adds its own
      // few ulp of f (at most 1 + |z|).
      const Tolerance st = sum_tol(c.in + 1);
      Expected e{HostTensor{TensorType{DType::F32, shape_of(yd)}, {}}, {},
                 a < 0 ? st : Tolerance{st.atol + 1e-6, 1.2 * st.rtol + 1e-6}};
      std::vector<ImmArg> imms;
      if (a >= 0) imms = {imm_enum("act", linear_acts()[a].name), imm_f("act_alpha", linear_acts()[a].alpha)};
      const int64_t rows = count_of(x.type.shape) / c.in;
      for (int64_t row = 0; row < rows; ++row)
        for (int64_t j = 0; j < c.out; ++j) {
          double acc = b.v[j], mag = std::fabs(b.v[j]);
          for (int64_t p = 0; p < c.in; ++p) {
            const double t = x.v[row * c.in + p] * w.v[p * c.out + j];
            acc += t;
            mag += std::fabs(t);
          }
          e.t.v.push_back(a < 0 ? acc : linear_acts()[a].f(acc));
          e.mag.push_back(mag);
        }
      r.check({x, w, b}, imms, e);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Convolution: one naive visitor of every (output, kernel tap) pair that touches the input,
// shared by the forward and both gradient products.

struct ConvCase {
  int64_t n, c, h, w, o, kh, kw;
  std::vector<int64_t> stride, pad, dilation;
  int64_t groups;
};

int64_t conv_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) { return (in + 2 * p - d * (k - 1) - 1) / s + 1; }

// Calls f(y_index, x_index, w_index) for every product y += x·w of the convolution.
void conv_taps(const ConvCase& c, const std::function<void(int64_t, int64_t, int64_t)>& f) {
  const int64_t ho = conv_out(c.h, c.kh, c.stride[0], c.pad[0], c.dilation[0]);
  const int64_t wo = conv_out(c.w, c.kw, c.stride[1], c.pad[1], c.dilation[1]);
  const int64_t cg = c.c / c.groups, og = c.o / c.groups;
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t o = 0; o < c.o; ++o)
      for (int64_t oy = 0; oy < ho; ++oy)
        for (int64_t ox = 0; ox < wo; ++ox)
          for (int64_t cl = 0; cl < cg; ++cl)
            for (int64_t i = 0; i < c.kh; ++i)
              for (int64_t j = 0; j < c.kw; ++j) {
                const int64_t iy = oy * c.stride[0] - c.pad[0] + i * c.dilation[0];
                const int64_t ix = ox * c.stride[1] - c.pad[1] + j * c.dilation[1];
                if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) continue;
                const int64_t ci = (o / og) * cg + cl;
                f(((n * c.o + o) * ho + oy) * wo + ox, ((n * c.c + ci) * c.h + iy) * c.w + ix,
                  ((o * cg + cl) * c.kh + i) * c.kw + j);
              }
}

const std::vector<ConvCase>& conv_cases() {
  static const std::vector<ConvCase> cases = {
      {1, 1, 7, 7, 1, 3, 3, {1, 1}, {0, 0}, {1, 1}, 1},
      {2, 3, 15, 16, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},
      {1, 16, 5, 5, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 16},   // depthwise
      {3, 4, 17, 9, 6, 5, 3, {2, 1}, {2, 1}, {1, 1}, 2},     // two groups, a stride
      {1, 2, 33, 8, 3, 3, 3, {2, 2}, {0, 1}, {2, 2}, 1},     // dilation
      {2, 5, 6, 7, 7, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1},      // pointwise: no im2col
      {1, 3, 4, 1, 2, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1},      // a 1-wide image
      {1, 1, 28, 28, 6, 5, 5, {1, 1}, {2, 2}, {1, 1}, 1},    // LeNet's first layer
      {2, 6, 14, 14, 16, 5, 5, {1, 1}, {0, 0}, {1, 1}, 1},   // LeNet's second
      {1, 3, 11, 13, 5, 3, 3, {1, 1}, {2, 2}, {2, 2}, 1},    // stride 1 dilated: direct kernels both ways
      {1, 7, 9, 37, 13, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},    // channel blocks and a row of 4 vectors and a tail
      {1, 2, 6, 6, 3, 3, 3, {1, 1}, {3, 3}, {1, 1}, 1},      // padded past the kernel: no direct data gradient
      // The depthwise kernel: two images, a row of 3 / 5 vectors with a tail; 5×5 taps (weights
      // broadcast per tap) over rows enough for its row loop; dilated rows, unequal padding;
      // no padding; a 70-wide row in two column blocks.
      {2, 5, 9, 37, 5, 3, 3, {1, 1}, {1, 1}, {1, 1}, 5},
      {1, 3, 21, 19, 3, 5, 5, {1, 1}, {2, 2}, {1, 1}, 3},
      {1, 4, 13, 11, 4, 3, 3, {1, 1}, {2, 0}, {2, 1}, 4},
      {1, 2, 30, 70, 2, 3, 3, {1, 1}, {0, 0}, {1, 1}, 2},
      // The depthwise kernel at stride 2 (even lanes gathered from two vectors): two images of
      // an odd width; an even width, unpadded, its last vector's second half past the row; 5×5
      // padded by 2 and by (2, 1); a 112-wide row of 56 outputs (MobileNetV2's) over rows
      // enough for the row loop; dilated; one stride 2 and the other 1, both ways; a map
      // narrower than a vector; 7×7 padded by 3 (four pairs of tap columns).
      {2, 5, 9, 37, 5, 3, 3, {2, 2}, {1, 1}, {1, 1}, 5},
      {1, 3, 10, 70, 3, 3, 3, {2, 2}, {0, 0}, {1, 1}, 3},
      {1, 4, 21, 19, 4, 5, 5, {2, 2}, {2, 2}, {1, 1}, 4},
      {2, 3, 16, 64, 3, 5, 5, {2, 2}, {2, 1}, {1, 1}, 3},
      {1, 3, 41, 112, 3, 3, 3, {2, 2}, {1, 1}, {1, 1}, 3},
      {1, 2, 17, 23, 2, 3, 3, {2, 2}, {2, 2}, {2, 2}, 2},
      {1, 3, 15, 33, 3, 3, 3, {2, 1}, {1, 1}, {1, 1}, 3},
      {1, 3, 15, 33, 3, 3, 3, {1, 2}, {1, 0}, {1, 1}, 3},
      {1, 5, 7, 7, 5, 3, 3, {2, 2}, {1, 1}, {1, 1}, 5},
      {1, 2, 19, 29, 2, 7, 7, {2, 2}, {3, 3}, {1, 1}, 2},
      // Stride 1 on maps of one vector a row: the direct kernel's flat mode at both levels (odd
      // channel counts, more than one block of them; 7×7, two 5×5 images, 3×3; 17 channels on
      // 7×7; unpadded; dilated, flat on AVX-512 only); a 12-wide row: flat on AVX-512, row mode
      // on AVX2. 1×1: unpadded on two 7×7 images (flat in place on AVX-512, GEMM on AVX2) and on
      // 5×5 (flat in place at both levels); padded by 1 (flat over a padded copy, no junk).
      {1, 33, 7, 7, 17, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},
      {2, 33, 5, 5, 17, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},
      {1, 33, 3, 3, 17, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},
      {1, 31, 12, 12, 10, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},
      {1, 17, 7, 7, 33, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},
      {1, 19, 7, 7, 21, 3, 3, {1, 1}, {0, 0}, {1, 1}, 1},
      {1, 13, 7, 7, 7, 3, 3, {1, 1}, {2, 2}, {2, 2}, 1},
      {2, 37, 7, 7, 35, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1},
      {1, 23, 5, 5, 19, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1},
      {1, 9, 5, 5, 11, 1, 1, {1, 1}, {1, 1}, {1, 1}, 1},
      // Winograd F(2×2, 3×3) at the JIT levels: odd output sizes (a half tile at the bottom and
      // right), padding 1 and 0 (two images of 16 tiles in one product), five images of 56 tiles
      // in products of two and a last one of one, and channel counts past a vector.
      {1, 9, 13, 15, 11, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},
      {2, 8, 10, 9, 16, 3, 3, {1, 1}, {0, 0}, {1, 1}, 1},
      {5, 8, 16, 14, 9, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},
      {1, 8, 9, 130, 8, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},  // output transform in bands of one tile row
      {1, 16, 89, 91, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},  // products in bands of 23 tile rows and a last of 22
      // Stride 2 on few input channels: the direct kernel at stride 2 (ResNet's 7×7 stem on odd
      // sizes, a 3×3 one on one channel, an even 4×4 kernel with unequal padding).
      {2, 3, 23, 21, 10, 7, 7, {2, 2}, {3, 3}, {1, 1}, 1},
      {1, 1, 12, 15, 5, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1},
      {1, 4, 9, 10, 17, 4, 4, {2, 2}, {0, 2}, {1, 1}, 1},
      {1, 40, 16, 16, 24, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},
  };
  return cases;
}

std::vector<ImmArg> conv_imms(const ConvCase& c) {
  return {imm_ints("stride", c.stride), imm_ints("pad", c.pad), imm_ints("dilation", c.dilation), imm_i("groups", c.groups)};
}

Shape conv_y_shape(const ConvCase& c) {
  return Shape{c.n, c.o, conv_out(c.h, c.kh, c.stride[0], c.pad[0], c.dilation[0]),
               conv_out(c.w, c.kw, c.stride[1], c.pad[1], c.dilation[1])};
}

// The direct sum of convolution c (bias b when `bias`) in double, and the sum of the terms'
// magnitudes, per output element.
std::pair<std::vector<double>, std::vector<double>> conv_sums(const ConvCase& c, const HostTensor& x, const HostTensor& w,
                                                              const HostTensor& b, bool bias) {
  const Shape ys = conv_y_shape(c);
  std::vector<double> acc(count_of(ys)), mag(count_of(ys));
  const int64_t plane = ys.dims[2] * ys.dims[3];
  for (int64_t i = 0; i < count_of(ys); ++i)
    if (bias) acc[i] = b.v[(i / plane) % c.o], mag[i] = std::fabs(acc[i]);
  conv_taps(c, [&](int64_t yi, int64_t xi, int64_t wi) {
    acc[yi] += x.v[xi] * w.v[wi];
    mag[yi] += std::fabs(x.v[xi] * w.v[wi]);
  });
  return {acc, mag};
}

void cases_conv2d(ParityRun& r) {
  for (int a = -1; a < static_cast<int>(linear_acts().size()); ++a) {
    for (size_t ci = 0; ci < conv_cases().size(); ++ci) {
      const ConvCase& c = conv_cases()[ci];
      if (a >= 0 && ci % 3 != static_cast<size_t>(a) % 3) continue;  // each activation on a third of the cases
      const bool bias = ci != 5;
      const HostTensor x = random_f32(Shape{c.n, c.c, c.h, c.w}, r.rng());
      const HostTensor w = random_f32(Shape{c.o, c.c / c.groups, c.kh, c.kw}, r.rng());
      const HostTensor b = random_f32(Shape{c.o}, r.rng());
      const Shape ys = conv_y_shape(c);
      const auto [acc, mag] = conv_sums(c, x, w, b, bias);
      const Tolerance st = sum_tol(c.c / c.groups * c.kh * c.kw + 1);
      Expected e{HostTensor{TensorType{DType::F32, ys}, {}}, mag, a < 0 ? st : Tolerance{st.atol + 1e-6, 1.2 * st.rtol + 1e-6}};
      for (double v : acc) e.t.v.push_back(a < 0 ? v : linear_acts()[a].f(v));
      std::vector<ImmArg> imms = conv_imms(c);
      if (a >= 0) imms.insert(imms.end(), {imm_enum("act", linear_acts()[a].name), imm_f("act_alpha", linear_acts()[a].alpha)});
      if (bias) r.check({x, w, b}, imms, e);
      else r.check({x, w}, imms, e);
    }
  }
}

void cases_conv2d_bwd_data(ParityRun& r) {
  for (const ConvCase& c : conv_cases()) {
    const HostTensor dy = random_f32(conv_y_shape(c), r.rng());
    const HostTensor w = random_f32(Shape{c.o, c.c / c.groups, c.kh, c.kw}, r.rng());
    const HostTensor x = random_f32(Shape{c.n, c.c, c.h, c.w}, r.rng());  // only its shape counts
    std::vector<double> acc(x.v.size()), mag(x.v.size());
    conv_taps(c, [&](int64_t yi, int64_t xi, int64_t wi) {
      acc[xi] += dy.v[yi] * w.v[wi];
      mag[xi] += std::fabs(dy.v[yi] * w.v[wi]);
    });
    Expected e{HostTensor{x.type, acc}, mag, sum_tol(c.o / c.groups * c.kh * c.kw)};
    r.check({dy, w, x}, conv_imms(c), e);
  }
}

void cases_conv2d_bwd_weight(ParityRun& r) {
  for (const ConvCase& c : conv_cases()) {
    const HostTensor x = random_f32(Shape{c.n, c.c, c.h, c.w}, r.rng());
    const HostTensor dy = random_f32(conv_y_shape(c), r.rng());
    const HostTensor w = random_f32(Shape{c.o, c.c / c.groups, c.kh, c.kw}, r.rng());  // only its shape
    std::vector<double> acc(w.v.size()), mag(w.v.size());
    conv_taps(c, [&](int64_t yi, int64_t xi, int64_t wi) {
      acc[wi] += dy.v[yi] * x.v[xi];
      mag[wi] += std::fabs(dy.v[yi] * x.v[xi]);
    });
    const Shape& ys = dy.type.shape;
    Expected e{HostTensor{w.type, acc}, mag, sum_tol(c.n * ys.dims[2] * ys.dims[3])};
    r.check({x, dy, w}, conv_imms(c), e);
  }
}

// Winograd's G (F(2×2, 3×3)) for the tests' own weight transform, in double.
constexpr double WINOGRAD_G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};

// u[4i + j, o, c] = Σ G[i][a]·G[j][b]·w[o, c, a, b] of weights [o, c, 3, 3].
std::vector<double> winograd_u(const std::vector<double>& w, int64_t o, int64_t c) {
  std::vector<double> u(16 * o * c);
  for (int e = 0; e < 16; ++e)
    for (int64_t k = 0; k < o * c; ++k)
      for (int a = 0; a < 3; ++a)
        for (int b = 0; b < 3; ++b) u[e * o * c + k] += WINOGRAD_G[e / 4][a] * WINOGRAD_G[e % 4][b] * w[k * 9 + a * 3 + b];
  return u;
}

void cases_conv_weights_winograd(ParityRun& r) {
  for (auto [o, c] : {std::pair<int64_t, int64_t>{1, 1}, {3, 5}, {7, 15}, {16, 17}, {33, 8}, {64, 65}}) {
    const HostTensor w = random_f32(Shape{o, c, 3, 3}, r.rng());
    std::vector<double> mag(16 * o * c);
    for (int e = 0; e < 16; ++e)
      for (int64_t k = 0; k < o * c; ++k)
        for (int t = 0; t < 9; ++t) mag[e * o * c + k] += std::fabs(WINOGRAD_G[e / 4][t / 3] * WINOGRAD_G[e % 4][t % 3] * w.v[k * 9 + t]);
    r.check({w}, {}, Expected{HostTensor{TensorType{DType::F32, Shape{16, o, c}}, winograd_u(w.v, o, c)}, mag, sum_tol(9)});
  }
}

// The direct sum of a 3×3 stride-1 convolution against Winograd's from the transformed weights:
// odd maps (a last tile half outside), one-pixel outputs, a pad on one axis only, channel counts
// around the vector widths.
void cases_conv2d_winograd(ParityRun& r) {
  const std::vector<ConvCase> cases = {
      {1, 1, 7, 7, 1, 3, 3, {1, 1}, {0, 0}, {1, 1}, 1},    {2, 3, 15, 16, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},
      {1, 7, 9, 37, 13, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},  {2, 9, 6, 6, 17, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},
      {1, 16, 14, 14, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1}, {1, 3, 2, 2, 2, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},
      {1, 2, 3, 3, 5, 3, 3, {1, 1}, {0, 0}, {1, 1}, 1},    {1, 2, 3, 4, 3, 3, 3, {1, 1}, {1, 0}, {1, 1}, 1},
      {2, 33, 7, 7, 35, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},  {1, 64, 28, 28, 64, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},
  };
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const ConvCase& c = cases[ci];
    const bool bias = ci % 3 != 1, relu = ci % 4 == 1, leaky = ci % 4 == 3;
    const HostTensor x = random_f32(Shape{c.n, c.c, c.h, c.w}, r.rng());
    const HostTensor w = random_f32(Shape{c.o, c.c, 3, 3}, r.rng());
    const HostTensor b = random_f32(Shape{c.o}, r.rng());
    const std::vector<double> ud = winograd_u(w.v, c.o, c.c);
    const HostTensor u{TensorType{DType::F32, Shape{16, c.o, c.c}}, ud};
    const Shape ys = conv_y_shape(c);
    const auto [acc, mag] = conv_sums(c, x, w, b, bias);
    // The transforms add and subtract partial sums: a few times the direct sum's rounding.
    const Tolerance st = sum_tol(c.c * 9 + 1);
    Expected e{HostTensor{TensorType{DType::F32, ys}, {}}, mag, Tolerance{4 * st.atol, 4 * st.rtol}};
    for (double v : acc) e.t.v.push_back(relu ? std::max(v, 0.0) : leaky && v < 0 ? 0.125 * v : v);
    std::vector<ImmArg> imms = conv_imms(c);
    if (relu) imms.push_back(imm_enum("act", "relu"));
    if (leaky) imms.insert(imms.end(), {imm_enum("act", "leakyrelu"), imm_f("act_alpha", 0.125)});
    if (bias) r.check({x, u, b}, imms, e);
    else r.check({x, u}, imms, e);
  }
  const HostTensor x = random_f32(Shape{1, 3, 6, 6}, r.rng()), u = random_f32(Shape{16, 2, 3}, r.rng());
  r.check_rejected({x, u}, {imm_ints("stride", {2, 2})}, "stride and dilation must be [1,1]");
  r.check_rejected({x, u}, {imm_ints("dilation", {2, 1})}, "stride and dilation must be [1,1]");
  r.check_rejected({x, random_f32(Shape{16, 3, 1}, r.rng())}, {imm_i("groups", 3)}, "groups 1");
}

#include "tests/parity_cases_dwconv_nchwc.h"
#include "tests/parity_cases_conv_nchwc.h"

// ---------------------------------------------------------------------------------------------
// Pooling

#include "tests/parity_cases_pool.h"

// ---------------------------------------------------------------------------------------------
// Along one axis

int axis_ref(int64_t axis, int rank) { return static_cast<int>(axis < 0 ? axis + rank : axis); }

// For each position of the other dimensions, in row-major order, the flat offsets along `axis`.
std::vector<std::vector<int64_t>> lines_along(const Shape& s, int axis) {
  std::vector<std::vector<int64_t>> lines;
  for (int64_t f = 0; f < count_of(s); ++f) {
    std::vector<int64_t> idx = unravel(f, s);
    if (idx[axis] != 0) continue;
    std::vector<int64_t> line;
    for (int64_t j = 0; j < s.dims[axis]; ++j) {
      idx[axis] = j;
      line.push_back(ravel(idx, s));
    }
    lines.push_back(line);
  }
  return lines;
}

struct AxisCase {
  Shape s;
  int64_t axis;  // −1 is left to the default
};

std::vector<AxisCase> axis_cases() {
  return {{Shape{1}, -1},          {Shape{7}, 0},          {Shape{15}, -1},          {Shape{16}, 0},
          {Shape{3, 17}, -1},      {Shape{3, 17}, 0},      {Shape{17, 3}, 0},        {Shape{2, 33, 5}, 1},
          {Shape{2, 33, 5}, 0},    {Shape{2, 33, 5}, -1},  {Shape{2, 33, 5}, -2},    {Shape{4, 1031}, -1},
          {Shape{1031, 2}, 0},     {Shape{2, 3, 4, 5}, 2}, {Shape{2, 3, 4, 5}, -3},  {Shape{16, 1}, 1},
          {Shape{1, 16}, 0},       {Shape{2, 1, 3, 1, 2, 7}, 4}};
}

std::vector<ImmArg> axis_imm(int64_t axis) {
  if (axis == -1) return {};
  return {imm_i("axis", axis)};
}

void softmax_cases(ParityRun& r, bool log) {
  for (const AxisCase& c : axis_cases()) {
    const HostTensor x = random_f32(c.s, r.rng(), -4, 4);
    const int axis = axis_ref(c.axis, c.s.rank);
    const int64_t len = c.s.dims[axis];
    Expected e = expect_like(x, log ? Tolerance{1e-6 + 1.2e-7 * len, 2e-6} : Tolerance{1e-7, 2e-6 + 1.2e-7 * len});
    e.t.v.assign(x.v.size(), 0);
    if (log) e.mag.assign(x.v.size(), 0);
    for (const std::vector<int64_t>& line : lines_along(c.s, axis)) {
      double mx = -INF, sum = 0;
      for (int64_t f : line) mx = std::max(mx, x.v[f]);
      for (int64_t f : line) sum += std::exp(x.v[f] - mx);
      for (int64_t f : line) {
        e.t.v[f] = log ? x.v[f] - mx - std::log(sum) : std::exp(x.v[f] - mx) / sum;
        if (log) e.mag[f] = std::fabs(x.v[f] - mx) + std::fabs(std::log(sum));
      }
    }
    r.check({x}, axis_imm(c.axis), e);
  }
}
void cases_softmax(ParityRun& r) { softmax_cases(r, false); }
void cases_logsoftmax(ParityRun& r) { softmax_cases(r, true); }

enum class Red { SUM, MEAN, MAX, MIN, PROD };

void reduce_cases(ParityRun& r, Red kind) {
  for (const AxisCase& c : axis_cases())
    for (bool keep : {false, true}) {
      const HostTensor x = random_f32(c.s, r.rng());
      const int axis = axis_ref(c.axis, c.s.rank);
      const int64_t len = c.s.dims[axis];
      std::vector<int64_t> yd;
      for (int d = 0; d < c.s.rank; ++d)
        if (d != axis)
          yd.push_back(c.s.dims[d]);
        else if (keep)
          yd.push_back(1);
      const bool extremum = kind == Red::MAX || kind == Red::MIN;
      Expected e{HostTensor{TensorType{DType::F32, shape_of(yd)}, {}}, {}, extremum ? EXACT : sum_tol(len)};
      for (const std::vector<int64_t>& line : lines_along(c.s, axis)) {
        double acc = kind == Red::MAX ? -INF : kind == Red::MIN ? INF : kind == Red::PROD ? 1 : 0, mag = 0;
        for (int64_t f : line) {
          if (kind == Red::MAX) acc = std::max(acc, x.v[f]);
          else if (kind == Red::MIN) acc = std::min(acc, x.v[f]);
          else if (kind == Red::PROD) acc *= x.v[f];
          else acc += x.v[f];
          mag += std::fabs(x.v[f]);
        }
        if (kind == Red::PROD) mag = std::fabs(acc);  // a product's rounding is relative to itself
        if (kind == Red::MEAN) {
          acc /= static_cast<double>(len);
          mag /= static_cast<double>(len);
        }
        e.t.v.push_back(acc);
        e.mag.push_back(mag);
      }
      std::vector<ImmArg> imms = axis_imm(c.axis);
      if (keep) imms.push_back(imm_b("keepdims", true));
      r.check({x}, imms, e);
    }
}
void cases_reduce_sum(ParityRun& r) { reduce_cases(r, Red::SUM); }
void cases_reduce_mean(ParityRun& r) { reduce_cases(r, Red::MEAN); }
void cases_reduce_max(ParityRun& r) { reduce_cases(r, Red::MAX); }
void cases_reduce_min(ParityRun& r) { reduce_cases(r, Red::MIN); }
void cases_reduce_prod(ParityRun& r) { reduce_cases(r, Red::PROD); }

// ARGMAX/ARGMIN: values on a grid of 0.5 in [−2, 2] (ties common: the first index wins).
void arg_cases(ParityRun& r, bool max) {
  for (const AxisCase& c : axis_cases())
    for (bool keep : {false, true}) {
      HostTensor x = random_f32(c.s, r.rng());
      for (double& v : x.v) v = std::round(2 * v) / 2;
      const int axis = axis_ref(c.axis, c.s.rank);
      std::vector<int64_t> yd;
      for (int d = 0; d < c.s.rank; ++d)
        if (d != axis) yd.push_back(c.s.dims[d]);
        else if (keep) yd.push_back(1);
      Expected e{HostTensor{TensorType{DType::I32, shape_of(yd)}, {}}, {}, EXACT};
      for (const std::vector<int64_t>& line : lines_along(c.s, axis)) {
        size_t best = 0;
        for (size_t j = 1; j < line.size(); ++j)
          if (max ? x.v[line[j]] > x.v[line[best]] : x.v[line[j]] < x.v[line[best]]) best = j;
        e.t.v.push_back(static_cast<double>(best));
      }
      std::vector<ImmArg> imms = axis_imm(c.axis);
      if (keep) imms.push_back(imm_b("keepdims", true));
      r.check({x}, imms, e);
    }
}
void cases_argmax(ParityRun& r) { arg_cases(r, true); }
void cases_argmin(ParityRun& r) { arg_cases(r, false); }

// ---------------------------------------------------------------------------------------------
// Shape and data movement

HostTensor random_of(DType dt, const Shape& s, std::mt19937& rng) {
  return dt == DType::I32 ? random_i32(s, rng) : random_f32(s, rng);
}

void cases_reshape(ParityRun& r) {
  struct Case {
    Shape in;
    std::vector<int64_t> to;
    DType dt;
  };
  const Case cases[] = {
      {Shape{2, 3, 4}, {4, -1}, DType::F32},  {Shape{2, 3, 4}, {24}, DType::F32},
      {Shape{2, 3, 4}, {-1}, DType::F32},     {Shape{24}, {2, -1, 4}, DType::F32},
      {Shape{7}, {7, 1}, DType::F32},         {Shape{1}, {}, DType::F32},
      {Shape(), {1, 1, 1}, DType::F32},       {Shape{15}, {3, 5}, DType::F32},
      {Shape{16}, {2, 2, 2, 2}, DType::F32},  {Shape{17}, {1, 17, 1}, DType::F32},
      {Shape{33}, {-1, 11}, DType::F32},      {Shape{65, 70}, {70, -1}, DType::F32},
      {Shape{2, 3, 4, 5}, {5, 4, 3, 2}, DType::F32}, {Shape{2, 3, 4}, {6, -1}, DType::I32},
      {Shape{1031}, {-1}, DType::I32},        {Shape{3, 5}, {1, 1, 15, 1, 1, 1}, DType::I32},
  };
  for (const Case& c : cases) {
    const HostTensor x = random_of(c.dt, c.in, r.rng());
    int64_t known = 1;
    for (int64_t d : c.to)
      if (d != -1) known *= d;
    std::vector<int64_t> yd = c.to;
    for (int64_t& d : yd)
      if (d == -1) d = count_of(c.in) / known;
    Expected e{HostTensor{TensorType{c.dt, shape_of(yd)}, x.v}, {}, EXACT};
    r.check({x}, {imm_ints("shape", c.to)}, e);
  }
}

void cases_transpose(ParityRun& r) {
  struct Case {
    Shape in;
    std::vector<int64_t> perm;
    DType dt;
  };
  std::vector<Case> cases = {
      {Shape{7}, {0}, DType::F32},           {Shape{1}, {0}, DType::F32},
      {Shape(), {}, DType::F32},             {Shape{3, 5}, {1, 0}, DType::F32},
      {Shape{15, 16}, {1, 0}, DType::F32},   {Shape{17, 33}, {1, 0}, DType::F32},
      {Shape{65, 70}, {1, 0}, DType::F32},   {Shape{1, 1}, {1, 0}, DType::F32},
      {Shape{2, 3, 4, 5}, {3, 1, 0, 2}, DType::F32}, {Shape{2, 3, 4, 5}, {0, 2, 1, 3}, DType::F32},
      {Shape{2, 3, 4, 5}, {-1, -2, -3, -4}, DType::F32},
      {Shape{3, 1, 4, 1, 5}, {4, 2, 0, 3, 1}, DType::F32},
      {Shape{2, 1, 3, 2, 1, 2}, {5, 4, 3, 2, 1, 0}, DType::F32},
      {Shape{3, 4, 5}, {2, 0, 1}, DType::I32}, {Shape{16, 17}, {1, 0}, DType::I32},
      // Trailing dimensions kept in place, some named from the end: a channel shuffle's copy.
      {Shape{1, 2, 7, 3, 5}, {0, 2, 1, -2, -1}, DType::F32}, {Shape{2, 3, 1, 17}, {1, 0, 2, 3}, DType::I32},
  };
  std::vector<int64_t> perm = {0, 1, 2};
  do cases.push_back({Shape{2, 3, 4}, perm, DType::F32});
  while (std::next_permutation(perm.begin(), perm.end()));
  for (const Case& c : cases) {
    const HostTensor x = random_of(c.dt, c.in, r.rng());
    const int rank = c.in.rank;
    std::vector<int> p;
    for (int64_t v : c.perm) p.push_back(axis_ref(v, rank));
    std::vector<int64_t> yd;
    for (int d = 0; d < rank; ++d) yd.push_back(c.in.dims[p[d]]);
    const Shape ys = shape_of(yd);
    Expected e{HostTensor{TensorType{c.dt, ys}, {}}, {}, EXACT};
    for (int64_t f = 0; f < count_of(ys); ++f) {
      const std::vector<int64_t> j = unravel(f, ys);
      std::vector<int64_t> i(static_cast<size_t>(rank));
      for (int d = 0; d < rank; ++d) i[p[d]] = j[d];
      e.t.v.push_back(x.v[ravel(i, c.in)]);
    }
    r.check({x}, {imm_ints("perm", c.perm)}, e);
  }
}

void cases_concat(ParityRun& r) {
  struct Case {
    std::vector<Shape> in;
    int64_t axis;  // 0 is left to the default
    DType dt;
  };
  const Case cases[] = {
      {{Shape{2, 3, 4}, Shape{2, 1, 4}, Shape{2, 5, 4}}, 1, DType::F32},
      {{Shape{2, 3, 4}, Shape{2, 1, 4}, Shape{2, 5, 4}}, 1, DType::I32},
      {{Shape{2, 3, 4}, Shape{2, 3, 4}, Shape{2, 3, 1}}, 2, DType::I32},
      {{Shape{7}, Shape{15}, Shape{16}}, 0, DType::F32},
      {{Shape{3, 17}, Shape{3, 16}, Shape{3, 1}}, -1, DType::F32},
      {{Shape{1, 33}, Shape{7, 33}, Shape{17, 33}}, 0, DType::F32},
      {{Shape{1, 33}, Shape{7, 33}}, -2, DType::F32},
      {{Shape{5, 4}}, 1, DType::F32},
      {{Shape{65, 70}, Shape{65, 70}}, 0, DType::F32},
      {{Shape{65, 7}, Shape{65, 70}}, 1, DType::F32},
      {{Shape{2, 3, 4, 5}, Shape{2, 3, 1, 5}, Shape{2, 3, 2, 5}}, 2, DType::F32},
      {{Shape{2, 1, 3}, Shape{2, 1, 3}, Shape{2, 1, 3}, Shape{2, 1, 3}}, 1, DType::F32},
      // NCHW along channels (a U-Net's skip connection), odd planes.
      {{Shape{2, 3, 5, 7}, Shape{2, 1, 5, 7}, Shape{2, 16, 5, 7}}, 1, DType::F32},
      {{Shape{1, 17, 3, 3}, Shape{1, 15, 3, 3}}, 1, DType::I32},
  };
  for (const Case& c : cases) {
    std::vector<HostTensor> xs;
    for (const Shape& s : c.in) xs.push_back(random_of(c.dt, s, r.rng()));
    const int axis = axis_ref(c.axis, c.in[0].rank);
    Shape ys = c.in[0];
    for (size_t k = 1; k < c.in.size(); ++k) ys.dims[axis] += c.in[k].dims[axis];
    Expected e{HostTensor{TensorType{c.dt, ys}, {}}, {}, EXACT};
    for (int64_t f = 0; f < count_of(ys); ++f) {
      std::vector<int64_t> idx = unravel(f, ys);
      size_t k = 0;
      while (idx[axis] >= c.in[k].dims[axis]) idx[axis] -= c.in[k++].dims[axis];
      e.t.v.push_back(xs[k].v[ravel(idx, c.in[k])]);
    }
    std::vector<ImmArg> imms;
    if (c.axis != 0) imms.push_back(imm_i("axis", c.axis));
    r.check(xs, imms, e);
  }
}

void cases_slice(ParityRun& r) {
  struct Case {
    Shape in;
    int64_t axis, start, end;
    DType dt;
  };
  const Case cases[] = {
      {Shape{7}, 0, 2, 5, DType::F32},          {Shape{7}, 0, -3, -1, DType::F32},
      {Shape{7}, 0, -100, 100, DType::F32},     {Shape{15}, 0, 0, 1, DType::F32},
      {Shape{16}, -1, -1, 16, DType::F32},      {Shape{17}, 0, 1, -1, DType::F32},
      {Shape{33}, 0, 5, 1000, DType::F32},      {Shape{3, 17}, 1, -5, -2, DType::F32},
      {Shape{3, 17}, 0, 1, 2, DType::F32},      {Shape{2, 33, 5}, 1, -20, -5, DType::F32},
      {Shape{2, 33, 5}, -1, 1, 100, DType::F32}, {Shape{2, 33, 5}, 0, -1, 100, DType::F32},
      {Shape{1031}, 0, 10, -10, DType::F32},    {Shape{4, 5}, -2, -1000, 2, DType::F32},
      {Shape{2, 7, 3}, 1, -4, 6, DType::I32},   {Shape{65, 70}, 0, 3, -2, DType::I32},
      {Shape{65, 70}, 1, 33, 49, DType::I32},   {Shape{2, 3, 4, 5}, 2, 1, 3, DType::F32},
  };
  for (const Case& c : cases) {
    const HostTensor x = random_of(c.dt, c.in, r.rng());
    const int axis = axis_ref(c.axis, c.in.rank);
    const int64_t n = c.in.dims[axis];
    const int64_t lo = std::min(std::max(c.start < 0 ? c.start + n : c.start, int64_t{0}), n);
    const int64_t hi = std::min(std::max(c.end < 0 ? c.end + n : c.end, int64_t{0}), n);
    Shape ys = c.in;
    ys.dims[axis] = hi - lo;
    Expected e{HostTensor{TensorType{c.dt, ys}, {}}, {}, EXACT};
    for (int64_t f = 0; f < count_of(ys); ++f) {
      std::vector<int64_t> idx = unravel(f, ys);
      idx[axis] += lo;
      e.t.v.push_back(x.v[ravel(idx, c.in)]);
    }
    r.check({x}, {imm_i("axis", c.axis), imm_i("start", c.start), imm_i("end", c.end)}, e);
  }
}

void cases_copy(ParityRun& r) {
  for (DType dt : {DType::F32, DType::I32})
    for (const Shape& s : elementwise_shapes()) {
      const HostTensor x = random_of(dt, s, r.rng());
      r.check({x}, {}, Expected{x, {}, EXACT});
    }
}

void cases_fill(ParityRun& r) {
  const std::pair<DType, double> fills[] = {{DType::F32, 0},  {DType::F32, 2.5},       {DType::F32, -1e30},
                                            {DType::I32, 0},  {DType::I32, -3},        {DType::I32, 7},
                                            {DType::I32, 2147483647.0}, {DType::I32, -2147483648.0}};
  for (const auto& [dt, value] : fills)
    for (const Shape& s : elementwise_shapes()) {
      const HostTensor x = random_of(dt, s, r.rng());
      Expected e{HostTensor{x.type, std::vector<double>(x.v.size(), static_cast<float>(value))}, {}, EXACT};
      if (dt == DType::I32) e.t.v.assign(x.v.size(), value);
      std::vector<ImmArg> imms;
      if (value != 0) imms.push_back(imm_f("value", value));
      r.check({x}, imms, e);
    }
}

// ASSIGN dst, src -> dst: built with dst as its in-place output, which must end as src (src
// itself is checked unchanged).
void cases_assign(ParityRun& r) {
  for (DType dt : {DType::F32, DType::I32})
    for (const Shape& s : elementwise_shapes()) {
      const HostTensor dst = random_of(dt, s, r.rng()), src = random_of(dt, s, r.rng());
      r.check({dst, src}, {}, Expected{src, {}, EXACT});
    }
}

// ---------------------------------------------------------------------------------------------
// Masks and activation backward

void cases_step(ParityRun& r) {
  unary_sweep(r, {}, [](double x) { return x >= 0 ? 1 : 0; });
}

// f'(x) by a central difference of f in double: an oracle that shares no formula with the kernel.
// The error (h²·f'''/6 plus rounding ε/h) is about 1e-10 for the smooth activations here.
double derivative_of(const Fn1& f, double x) {
  const double h = 1e-5;
  return (f(x + h) - f(x - h)) / (2 * h);
}

void cases_act_bwd(ParityRun& r) {
  struct Fn {
    const char* name;
    double alpha;  // 0: left at the default
    double lo, hi;
    std::function<double(double, double)> d;  // f'(x) for the activation's immediate a
  };
  const auto step_d = [](double x) { return x > 0 ? 1.0 : 0.0; };
  const std::vector<Fn> fns = {
      {"relu", 0, -3, 3, [&](double x, double) { return step_d(x); }},
      {"leakyrelu", 0.2, -3, 3, [](double x, double a) { return x > 0 ? 1 : a; }},
      {"leakyrelu", 0, -3, 3, [](double x, double a) { return x > 0 ? 1 : a; }},
      {"elu", 0.5, -4, 2, [](double x, double a) { return x > 0 ? 1 : a * std::exp(x); }},
      {"elu", 1, -4, 2, [](double x, double a) { return x > 0 ? 1 : a * std::exp(x); }},
      {"clipped_relu", 1.5, -1, 3, [](double x, double a) { return x > 0 && x < a ? 1 : 0; }},
      {"clipped_relu", 0, -1, 3, [](double, double) { return 0.0; }},  // threshold 0: flat everywhere
      {"sigmoid", 0, -6, 6, [](double x, double) { return derivative_of(sigmoid_d, x); }},
      {"tanh", 0, -3, 3, [](double x, double) { return derivative_of([](double v) { return std::tanh(v); }, x); }},
      {"gelu", 0, -4, 4, [](double x, double) { return derivative_of(gelu_erf_d, x); }},
      {"gelu_tanh", 0, -4, 4, [](double x, double) { return derivative_of(gelu_tanh_d, x); }},
      {"swish", 1.75, -5, 5,
       [](double x, double a) { return derivative_of([a](double v) { return v * sigmoid_d(a * v); }, x); }},
      {"swish", -0.5, -5, 5,
       [](double x, double a) { return derivative_of([a](double v) { return v * sigmoid_d(a * v); }, x); }},
      {"abs", 0, -3, 3, [](double x, double) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); }},
  };
  for (const Fn& fn : fns)
    for (const Shape& s : elementwise_shapes()) {
      const HostTensor dy = random_f32(s, r.rng());
      const HostTensor x = random_f32(s, r.rng(), fn.lo, fn.hi);
      // The kernel evaluates f' in float: its error scales with the size of f's terms, ~1 + |a·x|.
      Expected e = expect_like(dy, {1e-6, 1e-5});
      for (size_t i = 0; i < x.v.size(); ++i) {
        e.t.v.push_back(dy.v[i] * fn.d(x.v[i], fn.alpha));
        e.mag.push_back(std::fabs(dy.v[i]) * (1 + std::fabs(x.v[i]) * (1 + std::fabs(fn.alpha))));
      }
      std::vector<ImmArg> imms = {imm_enum("fn", fn.name)};
      if (fn.alpha != 0) imms.push_back(imm_f("alpha", fn.alpha));
      r.check({dy, x}, imms, e);
    }
}

// ---------------------------------------------------------------------------------------------
// Broadcast and pad (any dtype)

void cases_expand(ParityRun& r) {
  struct Case {
    Shape in;
    std::vector<int64_t> to;
    DType dt;
  };
  const Case cases[] = {
      {Shape{1}, {7}, DType::F32},
      {Shape(), {15}, DType::F32},
      {Shape{16}, {16}, DType::F32},
      {Shape{1, 17}, {3, 17}, DType::F32},
      {Shape{33, 1}, {33, 4}, DType::F32},
      {Shape{3, 1}, {2, 3, 7}, DType::F32},
      {Shape{1, 70}, {65, 70}, DType::F32},
      {Shape{65, 1}, {65, 70}, DType::F32},
      {Shape{2, 1, 3, 1}, {2, 5, 3, 4}, DType::F32},
      {Shape{1, 3, 1, 5, 1, 2}, {2, 3, 4, 5, 1, 2}, DType::F32},
      {Shape(), {1, 1, 1, 1, 1, 1}, DType::I32},
      {Shape{7, 1}, {2, 7, 16}, DType::I32},
      {Shape{1, 1031}, {2, 1031}, DType::I32},
      {Shape{17}, {17}, DType::I32},
  };
  for (const Case& c : cases) {
    const HostTensor x = random_of(c.dt, c.in, r.rng());
    const Shape ys = shape_of(c.to);
    Expected e{HostTensor{TensorType{c.dt, ys}, {}}, {}, EXACT};
    for (int64_t f = 0; f < count_of(ys); ++f) e.t.v.push_back(x.v[broadcast_offset(unravel(f, ys), 0, c.in)]);
    r.check({x}, {imm_ints("shape", c.to)}, e);
  }
}

void cases_pad(ParityRun& r) {
  struct Case {
    Shape in;
    std::vector<int64_t> pads;
    double value;  // 0 is left to the default
    DType dt;
  };
  const Case cases[] = {
      {Shape{7}, {2, 3}, 0, DType::F32},
      {Shape{1}, {0, 0}, 1.5, DType::F32},
      {Shape(), {}, 2, DType::F32},
      {Shape{15}, {1, 0}, -1, DType::F32},
      {Shape{16}, {0, 1}, 0, DType::F32},
      {Shape{3, 17}, {1, 0, 2, 3}, 0.5, DType::F32},
      {Shape{2, 33, 5}, {0, 1, 1, 0, 2, 0}, 0, DType::F32},
      {Shape{65, 70}, {1, 2, 3, 4}, 0, DType::F32},
      {Shape{2, 3, 4, 5}, {1, 0, 1, 0, 0, 1, 0, 1}, -2.5, DType::F32},
      {Shape{2, 1, 3, 1, 2, 1}, {1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0}, 3, DType::F32},
      {Shape{4, 5}, {0, 0, 0, 0}, 9, DType::F32},
      {Shape{3, 4}, {1, 1, 1, 1}, -7, DType::I32},
      {Shape{1031}, {2, 5}, 0, DType::I32},
      {Shape{2, 7, 3}, {0, 2, 1, 1, 0, 3}, 16777216, DType::I32},
      {Shape{1, 1}, {0, 0, 0, 0}, -2147483648.0, DType::I32},
  };
  for (const Case& c : cases) {
    const HostTensor x = random_of(c.dt, c.in, r.rng());
    const int rank = c.in.rank;
    std::vector<int64_t> yd;
    for (int d = 0; d < rank; ++d) yd.push_back(c.pads[d] + c.in.dims[d] + c.pads[rank + d]);
    const Shape ys = shape_of(yd);
    const double fill = c.dt == DType::F32 ? static_cast<double>(static_cast<float>(c.value)) : c.value;
    Expected e{HostTensor{TensorType{c.dt, ys}, {}}, {}, EXACT};
    for (int64_t f = 0; f < count_of(ys); ++f) {
      std::vector<int64_t> idx = unravel(f, ys);
      bool inside = true;
      for (int d = 0; d < rank; ++d) {
        idx[d] -= c.pads[d];
        inside &= idx[d] >= 0 && idx[d] < c.in.dims[d];
      }
      e.t.v.push_back(inside ? x.v[ravel(idx, c.in)] : fill);
    }
    std::vector<ImmArg> imms = {imm_ints("pads", c.pads)};
    if (c.value != 0) imms.push_back(imm_f("value", c.value));
    r.check({x}, imms, e);
  }
}

// ---------------------------------------------------------------------------------------------
// Losses

// Targets for a softmax cross-entropy over logits of shape `x`: i32 class ids, or f32 rows of
// probabilities (random, some zero) or one-hot rows.
enum class Targets { IDS, PROBS, ONE_HOT };

HostTensor ce_targets(const Shape& x, Targets kind, std::mt19937& rng) {
  const int64_t c = x.dims[x.rank - 1], rows = count_of(x) / c;
  std::uniform_int_distribution<int64_t> cls(0, c - 1);
  if (kind == Targets::IDS) {
    HostTensor t{TensorType{DType::I32, shape_of(std::vector<int64_t>(x.dims.begin(), x.dims.begin() + x.rank - 1))},
                 {}};
    for (int64_t row = 0; row < rows; ++row) t.v.push_back(static_cast<double>(cls(rng)));
    return t;
  }
  HostTensor t{TensorType{DType::F32, x}, std::vector<double>(static_cast<size_t>(count_of(x)), 0)};
  std::uniform_real_distribution<double> u(0, 1);
  for (int64_t row = 0; row < rows; ++row) {
    double* tr = t.v.data() + row * c;
    if (kind == Targets::ONE_HOT) {
      tr[cls(rng)] = 1;
      continue;
    }
    for (int64_t j = 0; j < c; ++j) tr[j] = u(rng) < 0.2 ? 0 : static_cast<float>(u(rng));
    // Unnormalized rows are fine: the op is defined for any target weights.
  }
  return t;
}

// Per-row target weights, one-hot for class ids.
double ce_weight(const HostTensor& t, int64_t c, int64_t row, int64_t j) {
  if (t.type.dtype == DType::I32) return t.v[row] == static_cast<double>(j) ? 1 : 0;
  return t.v[row * c + j];
}

struct CeCase {
  Shape x;
  Targets kind;
};

std::vector<CeCase> ce_cases() {
  return {{Shape{1}, Targets::IDS},         {Shape{7}, Targets::IDS},
          {Shape{3, 15}, Targets::IDS},     {Shape{16, 16}, Targets::PROBS},
          {Shape{5, 17}, Targets::IDS},     {Shape{2, 3, 33}, Targets::IDS},
          {Shape{33, 7}, Targets::ONE_HOT}, {Shape{40, 33}, Targets::IDS},
          {Shape{4, 1031}, Targets::PROBS}, {Shape{2, 2, 2, 5}, Targets::PROBS},
          {Shape{1, 1}, Targets::ONE_HOT},  {Shape{17}, Targets::PROBS}};
}

void cases_softmax_ce(ParityRun& r) {
  for (const CeCase& cc : ce_cases()) {
    const HostTensor x = random_f32(cc.x, r.rng(), -4, 4);
    const HostTensor t = ce_targets(cc.x, cc.kind, r.rng());
    const int64_t c = cc.x.dims[cc.x.rank - 1], rows = count_of(cc.x) / c;
    double loss = 0, mag = 0;
    for (int64_t row = 0; row < rows; ++row) {
      const double* xr = x.v.data() + row * c;
      double mx = -INF, sum = 0;
      for (int64_t j = 0; j < c; ++j) mx = std::max(mx, xr[j]);
      for (int64_t j = 0; j < c; ++j) sum += std::exp(xr[j] - mx);
      const double lse = std::log(sum);
      for (int64_t j = 0; j < c; ++j) {
        const double w = ce_weight(t, c, row, j);
        loss -= w * (xr[j] - mx - lse);
        mag += std::fabs(w) * (std::fabs(xr[j]) + std::fabs(mx) + lse + 1);
      }
    }
    // The kernel sums C exponentials in float per row: lse errs by about C·u.
    Expected e{host(DType::F32, Shape(), {loss / static_cast<double>(rows)}),
               {mag / static_cast<double>(rows)},
               {1e-7, 2e-6 + 1.2e-7 * static_cast<double>(c)}};
    r.check({x, t}, {}, e);
  }
}

void cases_softmax_ce_bwd(ParityRun& r) {
  for (const CeCase& cc : ce_cases()) {
    const HostTensor x = random_f32(cc.x, r.rng(), -4, 4);
    const HostTensor t = ce_targets(cc.x, cc.kind, r.rng());
    const HostTensor dloss = random_f32(Shape(), r.rng());
    const int64_t c = cc.x.dims[cc.x.rank - 1], rows = count_of(cc.x) / c;
    const double scale = dloss.v[0] / static_cast<double>(rows);
    Expected e = expect_like(x, {1e-7, 2e-6 + 1.2e-7 * static_cast<double>(c)});
    for (int64_t row = 0; row < rows; ++row) {
      const double* xr = x.v.data() + row * c;
      double mx = -INF, sum = 0;
      for (int64_t j = 0; j < c; ++j) mx = std::max(mx, xr[j]);
      for (int64_t j = 0; j < c; ++j) sum += std::exp(xr[j] - mx);
      for (int64_t j = 0; j < c; ++j) {
        const double p = std::exp(xr[j] - mx) / sum, w = ce_weight(t, c, row, j);
        e.t.v.push_back((p - w) * scale);
        e.mag.push_back(std::fabs(scale) * (p * (1 + std::fabs(xr[j] - mx) + std::log(sum)) + std::fabs(w)));
      }
    }
    r.check({x, t, dloss}, {}, e);
  }
}

void cases_mse(ParityRun& r) {
  for (const Shape& s : elementwise_shapes()) {
    const HostTensor a = random_f32(s, r.rng()), b = random_f32(s, r.rng());
    double sum = 0;
    for (size_t i = 0; i < a.v.size(); ++i) sum += (a.v[i] - b.v[i]) * (a.v[i] - b.v[i]);
    r.check({a, b}, {}, Expected{host(DType::F32, Shape(), {sum / static_cast<double>(a.v.size())}), {}, {0, 1e-6}});
  }
}

// −[t·log σ(x) + (1 − t)·log(1 − σ(x))], with log σ written out stably for either sign.
double log_sigmoid(double x) { return x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x)); }

void cases_bce_logits(ParityRun& r) {
  int k = 0;
  for (const Shape& s : elementwise_shapes()) {
    const double range = k % 3 == 2 ? 60 : 6;  // some cases far out, where e^x overflows naively
    const HostTensor x = random_f32(s, r.rng(), -range, range);
    HostTensor t = random_f32(s, r.rng(), 0, 1);
    if (k++ % 2) {
      for (double& v : t.v) v = v < 0.5 ? 0 : 1;
    }
    double sum = 0;
    for (size_t i = 0; i < x.v.size(); ++i) sum -= t.v[i] * log_sigmoid(x.v[i]) + (1 - t.v[i]) * log_sigmoid(-x.v[i]);
    r.check({x, t}, {}, Expected{host(DType::F32, Shape(), {sum / static_cast<double>(x.v.size())}), {}, {1e-7, 1e-6}});
  }
}

// ---------------------------------------------------------------------------------------------
// Optimizer steps. Immediates set here are float-exact, as a listing stores them.

HostTensor scalar(double v) { return host(DType::F32, Shape(), {static_cast<float>(v)}); }

void cases_advance(ParityRun& r) {
  r.scalar_operands_only();
  for (double t : {0.0, 1.0, 7.0, 41.0, 1e6, 16777215.0, -3.0, 0.5})
    r.check_all({scalar(t)}, {}, {Expected{scalar(t + 1), {}, EXACT}});
}

struct Schedule {
  const char* kind;
  double base;
  int64_t warmup = 0, step_size = 1;
  double gamma = 0.1;
  int64_t total = 1;
  double min = 0;
};

// The contract's formula, written out: linear warm-up over `warmup` steps, then the kind.
double schedule_ref(const Schedule& s, double t) {
  // The immediates as the instruction holds them (explicit values here are float-exact).
  const double base = s.base, gamma = s.gamma, mn = s.min, w = static_cast<double>(s.warmup);
  if (s.warmup > 0 && t <= w) return base * t / w;
  const std::string kind = s.kind;
  if (kind == "step") return base * std::pow(gamma, std::floor((t - w - 1) / static_cast<double>(s.step_size)));
  if (kind == "cosine") {
    const double p = std::min(1.0, (t - w) / (static_cast<double>(s.total) - w));
    return mn + (base - mn) * (1 + std::cos(std::acos(-1.0) * p)) / 2;
  }
  return base;
}

std::vector<ImmArg> schedule_imms(const Schedule& s) {
  const Schedule d{"constant", 0};
  std::vector<ImmArg> imms = {imm_enum("kind", s.kind), imm_f("base", s.base)};
  if (s.warmup != d.warmup) imms.push_back(imm_i("warmup", s.warmup));
  if (s.step_size != d.step_size) imms.push_back(imm_i("step_size", s.step_size));
  if (s.gamma != d.gamma) imms.push_back(imm_f("gamma", s.gamma));
  if (s.total != d.total) imms.push_back(imm_i("total", s.total));
  if (s.min != d.min) imms.push_back(imm_f("min", s.min));
  return imms;
}

std::vector<Schedule> schedules() {
  return {
      {"constant", 0.125},
      {"constant", 0.5, 10},
      {"step", 1, 0, 3, 0.5},
      {"step", 0.25, 4, 5, 0.75},
      {"step", 2, 0, 1},  // gamma at its default
      {"cosine", 1, 0, 1, 0.1, 20},
      {"cosine", 0.5, 5, 1, 0.1, 25, 0.0625},
      {"cosine", 0.75, 3, 1, 0.1, 4, 0.25},  // one step of decay after the warm-up
  };
}

void cases_lr_schedule(ParityRun& r) {
  r.scalar_operands_only();
  for (const Schedule& s : schedules()) {
    std::vector<double> ts;
    for (int t = 1; t <= 45; ++t) ts.push_back(t);
    for (double t : {100.0, 1000.0, 16777216.0}) ts.push_back(t);
    if (s.warmup > 0) ts.push_back(0);
    for (double t : ts)
      r.check_all({scalar(t)}, schedule_imms(s),
                  {Expected{host(DType::F32, Shape(), {schedule_ref(s, t)}), {}, {1e-12, 1e-6}}});
  }
}

void cases_clip_grad_norm(ParityRun& r) {
  struct Case {
    std::vector<Shape> shapes;
    double max_norm;
  };
  const Case cases[] = {
      {{Shape{7}}, 0.5},
      {{Shape{1}}, 100},
      {{Shape{15}, Shape{16}, Shape{17}}, 1},
      {{Shape{33, 2}, Shape{1}}, 1e3},
      {{Shape{1031}, Shape{3, 5}}, 2.5},
      {{Shape(), Shape{16, 16}}, 4},
      {{Shape{2, 3, 4}, Shape{4}, Shape{3, 1}, Shape{7, 7}}, 0.25},
  };
  for (const Case& c : cases) {
    std::vector<HostTensor> gs;
    double ss = 0;
    for (const Shape& s : c.shapes) {
      gs.push_back(random_f32(s, r.rng()));
      for (double v : gs.back().v) ss += v * v;
    }
    const double norm = std::sqrt(ss), k = norm > c.max_norm ? c.max_norm / (norm + 1e-6) : 1;
    std::vector<Expected> want;
    for (const HostTensor& g : gs) {
      want.push_back(expect_like(g, ELEMENTWISE));
      for (double v : g.v) want.back().t.v.push_back(v * k);
    }
    r.check_all(gs, {imm_f("max_norm", c.max_norm)}, want);
  }
  // A norm of exactly max_norm is left alone: ‖(3, 4)‖ = 5.
  const HostTensor g = host_f32({3, 4});
  r.check_all({g}, {imm_f("max_norm", 5)}, {Expected{g, {}, EXACT}});
}

// Weight, gradient and state tensors for one optimizer case of shape `s`; state that holds
// squares is non-negative.
struct StepOperands {
  HostTensor w, g, a, b;  // a, b: the state (momentum / first and second moments / square average)
};

StepOperands step_operands(const Shape& s, std::mt19937& rng) {
  return {random_f32(s, rng), random_f32(s, rng), random_f32(s, rng), random_f32(s, rng, 0, 2)};
}

const Tolerance STEP_TOL{1e-7, 1e-6};

void cases_sgd(ParityRun& r) {
  struct Config {
    double momentum, weight_decay;
    bool nesterov;
  };
  const Config configs[] = {{0, 0, false}, {0.875, 0, false}, {0.5, 0, true}, {0, 0.125, false}, {0.75, 0.0625, true}};
  for (const Config& c : configs)
    for (const Shape& s : elementwise_shapes()) {
      const StepOperands o = step_operands(s, r.rng());
      const HostTensor lr = random_f32(Shape(), r.rng(), 0.01, 0.5);
      const double mu = c.momentum, wd = c.weight_decay, l = lr.v[0];
      Expected w = expect_like(o.w, STEP_TOL), v = expect_like(o.a, STEP_TOL);
      for (size_t i = 0; i < o.w.v.size(); ++i) {
        const double g = o.g.v[i] + wd * o.w.v[i], vn = mu * o.a.v[i] + g;
        const double gmag = std::fabs(o.g.v[i]) + std::fabs(wd * o.w.v[i]), vmag = std::fabs(mu * o.a.v[i]) + gmag;
        v.t.v.push_back(vn);
        v.mag.push_back(vmag);
        w.t.v.push_back(o.w.v[i] - l * (c.nesterov ? g + mu * vn : vn));
        w.mag.push_back(std::fabs(o.w.v[i]) + l * (gmag + vmag));
      }
      std::vector<ImmArg> imms;
      if (mu != 0) imms.push_back(imm_f("momentum", mu));
      if (c.nesterov) imms.push_back(imm_b("nesterov", true));
      if (wd != 0) imms.push_back(imm_f("weight_decay", wd));
      r.check_all({o.w, o.g, o.a, lr}, imms, {w, v});
    }
}

struct AdamConfig {
  double beta1, beta2, eps, weight_decay;
  bool defaults;  // leave every immediate at its default (the values above must be those)
};

void adam_cases(ParityRun& r, bool decoupled) {
  const double default_wd = decoupled ? 0.01 : 0;
  const AdamConfig configs[] = {{0.9, 0.999, 1e-8, default_wd, true},
                                {0.875, 0.9921875, 0.0009765625, 0.125, false},
                                {0.5, 0.75, 0.25, 0, false}};
  int k = 0;
  for (const AdamConfig& c : configs)
    for (const Shape& s : elementwise_shapes()) {
      const StepOperands o = step_operands(s, r.rng());
      const HostTensor lr = random_f32(Shape(), r.rng(), 0.001, 0.1);
      const double steps[] = {1, 2, 3, 10, 1000};
      const HostTensor t = scalar(steps[k++ % 5]);
      // Every f32 immediate, defaults included, is held rounded to float.
      const double b1 = static_cast<float>(c.beta1), b2 = static_cast<float>(c.beta2);
      const double eps = static_cast<float>(c.eps), wd = static_cast<float>(c.weight_decay), l = lr.v[0];
      const double c1 = 1 - std::pow(b1, t.v[0]), c2 = 1 - std::pow(b2, t.v[0]);
      Expected w = expect_like(o.w, STEP_TOL), m = expect_like(o.a, STEP_TOL), v = expect_like(o.b, STEP_TOL);
      for (size_t i = 0; i < o.w.v.size(); ++i) {
        double w0 = o.w.v[i], g = o.g.v[i];
        if (decoupled)
          w0 -= l * wd * w0;
        else
          g += wd * w0;
        const double gmag = std::fabs(o.g.v[i]) + std::fabs(wd * o.w.v[i]);
        const double mn = b1 * o.a.v[i] + (1 - b1) * g, vn = b2 * o.b.v[i] + (1 - b2) * g * g;
        const double mmag = std::fabs(b1 * o.a.v[i]) + (1 - b1) * gmag;
        const double denom = std::sqrt(vn / c2) + eps;
        m.t.v.push_back(mn);
        m.mag.push_back(mmag);
        v.t.v.push_back(vn);
        v.mag.push_back(vn);
        w.t.v.push_back(w0 - l * (mn / c1) / denom);
        w.mag.push_back(std::fabs(o.w.v[i]) + l * (mmag / c1) / denom);
      }
      std::vector<ImmArg> imms;
      if (!c.defaults) {
        imms = {imm_f("beta1", c.beta1), imm_f("beta2", c.beta2), imm_f("eps", c.eps)};
        if (c.weight_decay != default_wd) imms.push_back(imm_f("weight_decay", c.weight_decay));
      }
      r.check_all({o.w, o.g, o.a, o.b, lr, t}, imms, {w, m, v});
    }
}
void cases_adam(ParityRun& r) { adam_cases(r, false); }
void cases_adamw(ParityRun& r) { adam_cases(r, true); }

void cases_rmsprop(ParityRun& r) {
  struct Config {
    double alpha, eps, weight_decay;
    bool defaults;
  };
  const Config configs[] = {{0.99, 1e-8, 0, true}, {0.875, 0.0009765625, 0.125, false}, {0.5, 0.25, 0, false}};
  for (const Config& c : configs)
    for (const Shape& s : elementwise_shapes()) {
      const StepOperands o = step_operands(s, r.rng());
      const HostTensor lr = random_f32(Shape(), r.rng(), 0.001, 0.1);
      const double a = static_cast<float>(c.alpha), eps = static_cast<float>(c.eps), wd = c.weight_decay;
      const double l = lr.v[0];
      Expected w = expect_like(o.w, STEP_TOL), sq = expect_like(o.b, STEP_TOL);
      for (size_t i = 0; i < o.w.v.size(); ++i) {
        const double g = o.g.v[i] + wd * o.w.v[i], gmag = std::fabs(o.g.v[i]) + std::fabs(wd * o.w.v[i]);
        const double sn = a * o.b.v[i] + (1 - a) * g * g, denom = std::sqrt(sn) + eps;
        sq.t.v.push_back(sn);
        sq.mag.push_back(sn);
        w.t.v.push_back(o.w.v[i] - l * g / denom);
        w.mag.push_back(std::fabs(o.w.v[i]) + l * gmag / denom);
      }
      std::vector<ImmArg> imms;
      if (!c.defaults) {
        imms = {imm_f("alpha", c.alpha), imm_f("eps", c.eps)};
        if (wd != 0) imms.push_back(imm_f("weight_decay", wd));
      }
      r.check_all({o.w, o.g, o.b, lr}, imms, {w, sq});
    }
}

// ---------------------------------------------------------------------------------------------
#include "tests/parity_cases_shape4d.h"

// The table, stamped from the opcode table

#include "tests/parity_cases_norm.h"
#include "tests/parity_cases_index.h"
#include "tests/parity_cases_nchwc.h"
#include "tests/parity_cases_pool_nchwc.h"
#include "tests/parity_cases_recurrent.h"
#include "tests/parity_cases_recurrent_bwd.h"
#include "tests/parity_cases_quant.h"

using CaseFn = void (*)(ParityRun&);

const std::map<Opcode, CaseFn>& parity_table() {
  static const std::map<Opcode, CaseFn> t = {
      {Opcode::MATMUL, cases_matmul_act},
      {Opcode::LINEAR, cases_linear},
      {Opcode::CONV2D, cases_conv2d},
      {Opcode::CONV2D_BWD_DATA, cases_conv2d_bwd_data},
      {Opcode::CONV2D_BWD_WEIGHT, cases_conv2d_bwd_weight},
      {Opcode::DWCONV2D_NCHWC, cases_dwconv2d_nchwc},
      {Opcode::CONV2D_NCHWC, cases_conv2d_nchwc},
      {Opcode::MAXPOOL2D, cases_maxpool2d},
      {Opcode::AVGPOOL2D, cases_avgpool2d},
      {Opcode::MAXPOOL2D_BWD, cases_maxpool2d_bwd},
      {Opcode::AVGPOOL2D_BWD, cases_avgpool2d_bwd},
      {Opcode::ADD, cases_add},
      {Opcode::SUB, cases_sub},
      {Opcode::MUL, cases_mul},
      {Opcode::DIV, cases_div},
      {Opcode::MAXIMUM, cases_maximum},
      {Opcode::MINIMUM, cases_minimum},
      {Opcode::SCALE, cases_scale},
      {Opcode::NEG, cases_neg},
      {Opcode::EXP, cases_exp},
      {Opcode::LOG, cases_log},
      {Opcode::SQRT, cases_sqrt},
      {Opcode::ABS, cases_abs},
      {Opcode::SQUARE, cases_square},
      {Opcode::RELU, cases_relu},
      {Opcode::LEAKYRELU, cases_leakyrelu},
      {Opcode::ELU, cases_elu},
      {Opcode::CLIPPED_RELU, cases_clipped_relu},
      {Opcode::SIGMOID, cases_sigmoid},
      {Opcode::TANH, cases_tanh},
      {Opcode::GELU, cases_gelu},
      {Opcode::SWISH, cases_swish},
      {Opcode::SOFTMAX, cases_softmax},
      {Opcode::LOGSOFTMAX, cases_logsoftmax},
      {Opcode::REDUCE_SUM, cases_reduce_sum},
      {Opcode::REDUCE_MEAN, cases_reduce_mean},
      {Opcode::REDUCE_MAX, cases_reduce_max},
      {Opcode::RESHAPE, cases_reshape},
      {Opcode::TRANSPOSE, cases_transpose},
      {Opcode::CONCAT, cases_concat},
      {Opcode::SLICE, cases_slice},
      {Opcode::COPY, cases_copy},
      {Opcode::FILL, cases_fill},
      {Opcode::ASSIGN, cases_assign},
      {Opcode::STEP, cases_step},
      {Opcode::ACT_BWD, cases_act_bwd},
      {Opcode::CALC, cases_calc},
      {Opcode::EXPAND, cases_expand},
      {Opcode::PAD, cases_pad},
      {Opcode::FLATTEN, cases_flatten},
      {Opcode::UPSAMPLE_NEAREST, cases_upsample_nearest},
      {Opcode::GLOBAL_AVGPOOL, cases_global_avgpool},
      {Opcode::TO_NCHWC, cases_to_nchwc},
      {Opcode::TO_NCHW, cases_to_nchw},
      {Opcode::CONV_WEIGHTS_NCHWC, cases_conv_weights_nchwc},
      {Opcode::CONV_WEIGHTS_WINOGRAD, cases_conv_weights_winograd},
      {Opcode::CONV2D_WINOGRAD, cases_conv2d_winograd},
      {Opcode::MAXPOOL2D_NCHWC, cases_maxpool2d_nchwc},
      {Opcode::AVGPOOL2D_NCHWC, cases_avgpool2d_nchwc},
      {Opcode::GLOBAL_AVGPOOL_NCHWC, cases_global_avgpool_nchwc},
      {Opcode::SOFTMAX_CE, cases_softmax_ce},
      {Opcode::SOFTMAX_CE_BWD, cases_softmax_ce_bwd},
      {Opcode::MSE, cases_mse},
      {Opcode::BCE_LOGITS, cases_bce_logits},
      {Opcode::ADVANCE, cases_advance},
      {Opcode::LR_SCHEDULE, cases_lr_schedule},
      {Opcode::CLIP_GRAD_NORM, cases_clip_grad_norm},
      {Opcode::SGD, cases_sgd},
      {Opcode::ADAM, cases_adam},
      {Opcode::ADAMW, cases_adamw},
      {Opcode::RMSPROP, cases_rmsprop},
      {Opcode::BATCHNORM2D, cases_batchnorm2d},
      {Opcode::BATCHNORM2D_BWD, cases_batchnorm2d_bwd},
      {Opcode::DROPOUT, cases_dropout},
      {Opcode::GATHER, cases_gather},
      {Opcode::LSTM, cases_lstm},
      {Opcode::GRU, cases_gru},
      {Opcode::RNN, cases_rnn},
      {Opcode::LSTM_BWD, cases_lstm_bwd},
      {Opcode::GRU_BWD, cases_gru_bwd},
      {Opcode::RNN_BWD, cases_rnn_bwd},
      {Opcode::GATHER_BWD, cases_gather_bwd},
      {Opcode::WHERE, cases_where},
      {Opcode::POW, cases_pow},
      {Opcode::ERF, cases_erf},
      {Opcode::CLAMP, cases_clamp},
      {Opcode::EQUAL, cases_equal},
      {Opcode::LESS, cases_less},
      {Opcode::LESS_EQUAL, cases_less_equal},
      {Opcode::GREATER, cases_greater},
      {Opcode::GREATER_EQUAL, cases_greater_equal},
      {Opcode::PRELU, cases_prelu},
      {Opcode::RECIPROCAL, cases_reciprocal},
      {Opcode::FLOOR, cases_floor},
      {Opcode::CEIL, cases_ceil},
      {Opcode::ROUND, cases_round},
      {Opcode::CAST, cases_cast},
      {Opcode::QUANTIZE, cases_quantize},
      {Opcode::DEQUANTIZE, cases_dequantize},
      {Opcode::LINEAR_BF16, cases_linear_bf16},
      {Opcode::LINEAR_WEIGHTS_I8, cases_linear_weights_i8},
      {Opcode::LINEAR_I8, cases_linear_i8},
      {Opcode::CONV_WEIGHTS_I8, cases_conv_weights_i8},
      {Opcode::CONV2D_I8, cases_conv2d_i8},
      {Opcode::CONV_WEIGHTS_BF16, cases_conv_weights_bf16},
      {Opcode::CONV2D_BF16, cases_conv2d_bf16},
      {Opcode::SIGN, cases_sign},
      {Opcode::SOFTPLUS, cases_softplus},
      {Opcode::HARDSIGMOID, cases_hardsigmoid},
      {Opcode::HARDSWISH, cases_hardswish},
      {Opcode::SELU, cases_selu},
      {Opcode::REDUCE_MIN, cases_reduce_min},
      {Opcode::REDUCE_PROD, cases_reduce_prod},
      {Opcode::ARGMAX, cases_argmax},
      {Opcode::ARGMIN, cases_argmin},
      {Opcode::SIN, cases_sin},
      {Opcode::COS, cases_cos},
  };
  return t;
}

std::vector<Opcode> every_opcode() {
  std::vector<Opcode> v;
  for (const OpInfo& info : all_ops()) v.push_back(info.op);
  return v;
}

class OpParity : public ::testing::TestWithParam<Opcode> {};

TEST_P(OpParity, MatchesNaiveReference) {
  const Opcode op = GetParam();
  auto it = parity_table().find(op);
  ASSERT_NE(it, parity_table().end()) << op_info(op).mnemonic << " has no parity cases in parity_table()";
  ParityRun run(op);
  it->second(run);
  run.expect_coverage();
}

INSTANTIATE_TEST_SUITE_P(AllOps, OpParity, ::testing::ValuesIn(every_opcode()),
                         [](const ::testing::TestParamInfo<Opcode>& p) {
                           return std::string(op_info(p.param).mnemonic);
                         });

TEST(OpParityTable, EveryOpcodeHasCases) {
  // Counted from the .def file itself, so the check does not trust all_ops() alone.
  size_t rows = 0;
#define OPCODE(id, NAME, MN, NIN, NOUT, SCHEMA, CAT, FLAGS) ++rows;
#include "isa/opcodes.def"
#undef OPCODE
  ASSERT_EQ(all_ops().size(), rows);
  for (const OpInfo& info : all_ops())
    EXPECT_EQ(parity_table().count(info.op), 1u) << info.mnemonic << " has no parity cases";
  EXPECT_EQ(parity_table().size(), all_ops().size()) << "the table names an opcode that no longer exists";
}

// ---------------------------------------------------------------------------------------------
// Special values

Expected expect_values(const HostTensor& like, std::vector<double> v, Tolerance tol = EXACT) {
  return Expected{HostTensor{like.type, std::move(v)}, {}, tol};
}

TEST(OpSpecialValues, MaximumAndMinimumPropagateNaN) {
  const HostTensor a = host_f32({NaN, 1, NaN, 2, -INF, 0.5});
  const HostTensor b = host_f32({1, NaN, NaN, -3, 5, INF});
  EXPECT_TRUE(matches(expect_values(a, {NaN, NaN, NaN, 2, 5, INF}), run_op(Opcode::MAXIMUM, {a, b}, {})));
  EXPECT_TRUE(matches(expect_values(a, {NaN, NaN, NaN, -3, -INF, 0.5}), run_op(Opcode::MINIMUM, {a, b}, {})));
  // Broadcasting a NaN scalar poisons every element.
  const HostTensor s = host(DType::F32, Shape(), {NaN});
  const HostTensor v = host_f32({-1, 0, 1, 2, 3, 4, 5});
  EXPECT_TRUE(matches(expect_values(v, std::vector<double>(7, NaN)), run_op(Opcode::MAXIMUM, {v, s}, {})));
  EXPECT_TRUE(matches(expect_values(v, std::vector<double>(7, NaN)), run_op(Opcode::MINIMUM, {s, v}, {})));
}

TEST(OpSpecialValues, ActivationsPropagateNaN) {
  const HostTensor x = host_f32({NaN, -1, 0, 3, 10});
  EXPECT_TRUE(matches(expect_values(x, {NaN, 0, 0, 3, 10}), run_op(Opcode::RELU, {x}, {})));
  EXPECT_TRUE(matches(expect_values(x, {NaN, 0, 0, 3, 6}), run_op(Opcode::CLIPPED_RELU, {x}, {})));
  for (Opcode op : {Opcode::LEAKYRELU, Opcode::ELU, Opcode::SIGMOID, Opcode::TANH, Opcode::GELU, Opcode::SWISH,
                    Opcode::EXP, Opcode::ABS, Opcode::NEG, Opcode::SQUARE}) {
    const OpOutput y = run_op(op, {host_f32({NaN})}, {});
    ASSERT_TRUE(y.status) << y.status.message();
    EXPECT_TRUE(std::isnan(y.v[0])) << op_info(op).mnemonic << "(NaN) = " << y.v[0];
  }
}

TEST(OpSpecialValues, ReduceMaxPropagatesNaN) {
  // NaN first, in the middle, last, and a row without NaN.
  const HostTensor x = host(DType::F32, Shape{4, 4}, {NaN, 0, 1, 2, 1, NaN, 3, 2, 1, 2, 3, NaN, -1, -5, -2, -3});
  EXPECT_TRUE(matches(Expected{host(DType::F32, Shape{4}, {NaN, NaN, NaN, -1}), {}, EXACT},
                      run_op(Opcode::REDUCE_MAX, {x}, {})));
  EXPECT_TRUE(matches(Expected{host(DType::F32, Shape{1, 4}, {NaN, NaN, 3, NaN}), {}, EXACT},
                      run_op(Opcode::REDUCE_MAX, {x}, {imm_i("axis", 0), imm_b("keepdims", true)})));
  const HostTensor all_neg_inf = host_f32({-INF, -INF});
  EXPECT_TRUE(matches(Expected{host(DType::F32, Shape(), {-INF}), {}, EXACT},
                      run_op(Opcode::REDUCE_MAX, {all_neg_inf}, {})));
}

TEST(OpSpecialValues, LogSqrtDivEdgeCases) {
  const HostTensor x = host_f32({0, -1, INF, 1, -0.0});
  EXPECT_TRUE(matches(expect_values(x, {-INF, NaN, INF, 0, -INF}), run_op(Opcode::LOG, {x}, {})));
  EXPECT_TRUE(matches(expect_values(x, {0, NaN, INF, 1, 0}), run_op(Opcode::SQRT, {x}, {})));
  const HostTensor a = host_f32({1, -1, 0, 2, 1});
  const HostTensor b = host_f32({0, 0, 0, -0.0, INF});
  EXPECT_TRUE(matches(expect_values(a, {INF, -INF, NaN, -INF, 0}), run_op(Opcode::DIV, {a, b}, {})));
}

TEST(OpSpecialValues, SaturatingActivationsStayFinite) {
  const HostTensor x = host_f32({100, -100, 1000, -1000, 88, -88});
  OpOutput y = run_op(Opcode::SIGMOID, {x}, {});
  ASSERT_TRUE(y.status) << y.status.message();
  for (size_t i = 0; i < y.v.size(); ++i) {
    EXPECT_TRUE(std::isfinite(y.v[i])) << "SIGMOID(" << x.v[i] << ") = " << y.v[i];
    EXPECT_NEAR(y.v[i], x.v[i] > 0 ? 1.0 : 0.0, 1e-30 + (x.v[i] > 0 ? 1e-7 : 0)) << "SIGMOID(" << x.v[i] << ")";
    EXPECT_GE(y.v[i], 0.0);
    EXPECT_LE(y.v[i], 1.0);
  }
  EXPECT_TRUE(matches(expect_values(x, {1, -1, 1, -1, 1, -1}), run_op(Opcode::TANH, {x}, {})));
  EXPECT_TRUE(matches(expect_values(x, {100, -1, 1000, -1, 88, -1}, ELEMENTWISE), run_op(Opcode::ELU, {x}, {})));
  for (Opcode op : {Opcode::SWISH, Opcode::GELU}) {
    for (const std::vector<ImmArg>& imms : {std::vector<ImmArg>{}, std::vector<ImmArg>{imm_enum("approx", "tanh")}}) {
      if (op == Opcode::SWISH && !imms.empty()) continue;
      const OpOutput z = run_op(op, {x}, imms);
      ASSERT_TRUE(z.status) << z.status.message();
      // Saturated: x for large positive x, 0 for large negative x.
      EXPECT_TRUE(matches(expect_values(x, {100, 0, 1000, 0, 88, 0}, {1e-6, 1e-6}), z)) << op_info(op).mnemonic;
    }
  }
}

TEST(OpSpecialValues, SoftmaxOfLargeValuesStaysFinite) {
  const HostTensor x = host(DType::F32, Shape{2, 4}, {1000, 1000, 999, -1000, -1000, -1001, 500, 1000});
  const double e1 = std::exp(-1.0), z0 = 2 + e1, z1 = 1 + std::exp(-500.0);
  EXPECT_TRUE(matches(expect_values(x, {1 / z0, 1 / z0, e1 / z0, 0, 0, 0, std::exp(-500.0) / z1, 1 / z1}, {1e-7, 1e-6}),
                      run_op(Opcode::SOFTMAX, {x}, {})));
  EXPECT_TRUE(matches(expect_values(x, {-std::log(z0), -std::log(z0), -1 - std::log(z0), -2000 - std::log(z0), -2000,
                                        -2001, -500, 0},
                                    {1e-6, 1e-6}),
                      run_op(Opcode::LOGSOFTMAX, {x}, {})));
  // −inf entries get probability 0 and do not disturb the rest.
  const HostTensor m = host_f32({-INF, 0, -INF, 0});
  EXPECT_TRUE(matches(expect_values(m, {0, 0.5, 0, 0.5}, {1e-7, 1e-6}), run_op(Opcode::SOFTMAX, {m}, {})));
  EXPECT_TRUE(matches(expect_values(m, {-INF, -std::log(2.0), -INF, -std::log(2.0)}, {1e-6, 1e-6}),
                      run_op(Opcode::LOGSOFTMAX, {m}, {})));
}

TEST(OpSpecialValues, ReduceMinAndArgExtremaWithNaN) {
  // NaN first, in the middle, last, and a row without NaN (ties: the first index).
  const HostTensor x = host(DType::F32, Shape{4, 4}, {NaN, 0, 1, 2, 1, NaN, -3, 2, 1, 2, 3, NaN, -1, -5, -5, 4});
  EXPECT_TRUE(matches(Expected{host(DType::F32, Shape{4}, {NaN, NaN, NaN, -5}), {}, EXACT},
                      run_op(Opcode::REDUCE_MIN, {x}, {})));
  EXPECT_TRUE(matches(Expected{host(DType::I32, Shape{4}, {0, 1, 3, 3}), {}, EXACT}, run_op(Opcode::ARGMAX, {x}, {})));
  EXPECT_TRUE(matches(Expected{host(DType::I32, Shape{4}, {0, 1, 3, 1}), {}, EXACT}, run_op(Opcode::ARGMIN, {x}, {})));
  EXPECT_TRUE(matches(Expected{host(DType::I32, Shape{1, 4}, {0, 1, 2, 2}), {}, EXACT},
                      run_op(Opcode::ARGMAX, {x}, {imm_i("axis", 0), imm_b("keepdims", true)})));
  const HostTensor inf = host_f32({INF, INF});
  EXPECT_TRUE(matches(Expected{host(DType::F32, Shape(), {INF}), {}, EXACT}, run_op(Opcode::REDUCE_MIN, {inf}, {})));
}

TEST(OpSpecialValues, ReduceProdOfZerosAndInfinities) {
  const HostTensor x = host(DType::F32, Shape{4, 3}, {0, INF, 2, -0.0, 3, 1, INF, -2, 1, NaN, 0, 1});
  EXPECT_TRUE(matches(Expected{host(DType::F32, Shape{4}, {NaN, -0.0, -INF, NaN}), {}, EXACT},
                      run_op(Opcode::REDUCE_PROD, {x}, {})));
  const OpOutput y = run_op(Opcode::REDUCE_PROD, {x}, {});
  ASSERT_TRUE(y.status) << y.status.message();
  EXPECT_TRUE(std::signbit(y.v[1]));
}

TEST(OpSpecialValues, ReductionsOfInfinities) {
  const HostTensor x = host(DType::F32, Shape{3, 2}, {INF, 1, -INF, 1, INF, -INF});
  EXPECT_TRUE(matches(Expected{host(DType::F32, Shape{3}, {INF, -INF, NaN}), {}, EXACT},
                      run_op(Opcode::REDUCE_SUM, {x}, {})));
  EXPECT_TRUE(matches(Expected{host(DType::F32, Shape{3}, {INF, -INF, NaN}), {}, EXACT},
                      run_op(Opcode::REDUCE_MEAN, {x}, {})));
  EXPECT_TRUE(matches(Expected{host(DType::F32, Shape{3}, {INF, 1, INF}), {}, EXACT},
                      run_op(Opcode::REDUCE_MAX, {x}, {})));
}

// C's pow on the special cases: ±0, ±inf, NaN, negative bases.
TEST(OpSpecialValues, PowFollowsC) {
  const HostTensor a = host_f32({NaN, 1, -8, -2, -2, 0, -0.0, 0, -0.0, -INF, -INF, 0.5, 2, -1, INF});
  const HostTensor b = host_f32({0, NaN, 1.0 / 3, 3, 2, -1, -1, -2, 3, 3, -2, INF, -INF, INF, -0.5});
  EXPECT_TRUE(matches(expect_values(a, {1, 1, NaN, -8, 4, INF, -INF, INF, -0.0, -INF, 0, 0, 0, 1, 0}),
                      run_op(Opcode::POW, {a, b}, {})));
  // The sign of a zero result follows C: (−0)^3 = −0.
  const OpOutput z = run_op(Opcode::POW, {host_f32({-0.0}), host_f32({3})}, {});
  ASSERT_TRUE(z.status) << z.status.message();
  EXPECT_TRUE(std::signbit(z.v[0]));
}

TEST(OpSpecialValues, ComparisonsOfNaNAreFalse) {
  const HostTensor a = host_f32({NaN, NaN, 1, 0, -0.0, INF, -INF});
  const HostTensor b = host_f32({NaN, 1, NaN, -0.0, 0, INF, INF});
  const std::pair<Opcode, std::vector<double>> want[] = {
      {Opcode::EQUAL, {0, 0, 0, 1, 1, 1, 0}},         {Opcode::LESS, {0, 0, 0, 0, 0, 0, 1}},
      {Opcode::LESS_EQUAL, {0, 0, 0, 1, 1, 1, 1}},    {Opcode::GREATER, {0, 0, 0, 0, 0, 0, 0}},
      {Opcode::GREATER_EQUAL, {0, 0, 0, 1, 1, 1, 0}}};
  for (const auto& [op, v] : want) EXPECT_TRUE(matches(expect_values(a, v), run_op(op, {a, b}, {}))) << op_info(op).mnemonic;
}

TEST(OpSpecialValues, ClampKeepsNaNAndSignedZeros) {
  const HostTensor x = host_f32({NaN, -INF, INF, -0.0, 0, 3, -3});
  EXPECT_TRUE(matches(expect_values(x, {NaN, -1, 2, 0, 0, 2, -1}),
                      run_op(Opcode::CLAMP, {x}, {imm_f("min", -1), imm_f("max", 2)})));
  // Unbounded: x itself, −0 included; min > max: max everywhere but NaN.
  const OpOutput id = run_op(Opcode::CLAMP, {x}, {});
  ASSERT_TRUE(id.status) << id.status.message();
  EXPECT_TRUE(std::isnan(id.v[0]));
  EXPECT_TRUE(std::signbit(id.v[3]));
  EXPECT_TRUE(matches(expect_values(x, {NaN, 1, 1, 1, 1, 1, 1}),
                      run_op(Opcode::CLAMP, {x}, {imm_f("min", 5), imm_f("max", 1)})));
  // A NaN bound bounds nothing.
  EXPECT_TRUE(matches(expect_values(x, {NaN, -INF, 2, 0, 0, 2, -3}),
                      run_op(Opcode::CLAMP, {x}, {imm_f("min", NaN), imm_f("max", 2)})));
}

TEST(OpSpecialValues, ErfLimits) {
  const HostTensor x = host_f32({NaN, -INF, INF, -0.0, 0, 10, -10, 1e-40});
  const OpOutput y = run_op(Opcode::ERF, {x}, {});
  EXPECT_TRUE(matches(expect_values(x, {NaN, -1, 1, 0, 0, 1, -1, 1.1283791670955126e-40}, {1e-44, 0}), y));
  ASSERT_TRUE(y.status);
  EXPECT_TRUE(std::signbit(y.v[3]));
}

TEST(OpSpecialValues, RoundingSignAndReciprocalAtSpecials) {
  const HostTensor x = host_f32({NaN, -INF, INF, -0.0, 0, -0.5, 0.5, -4, 1e-40});
  EXPECT_TRUE(matches(expect_values(x, {NaN, -INF, INF, 0, 0, -1, 0, -4, 0}), run_op(Opcode::FLOOR, {x}, {})));
  EXPECT_TRUE(matches(expect_values(x, {NaN, -INF, INF, 0, 0, 0, 1, -4, 1}), run_op(Opcode::CEIL, {x}, {})));
  EXPECT_TRUE(matches(expect_values(x, {NaN, -1, 1, 0, 0, -1, 1, -1, 1}), run_op(Opcode::SIGN, {x}, {})));
  EXPECT_TRUE(matches(expect_values(x, {NaN, 0, 0, -INF, INF, -2, 2, -0.25, INF}), run_op(Opcode::RECIPROCAL, {x}, {})));
  // Zeros keep their sign: ceil(−0.5) = −0, sign(−0) = −0, floor(−0) = −0.
  for (Opcode op : {Opcode::FLOOR, Opcode::CEIL, Opcode::SIGN}) {
    const OpOutput y = run_op(op, {x}, {});
    ASSERT_TRUE(y.status) << y.status.message();
    EXPECT_TRUE(std::signbit(y.v[3])) << op_info(op).mnemonic;
    EXPECT_FALSE(std::signbit(y.v[4])) << op_info(op).mnemonic;
  }
  EXPECT_TRUE(std::signbit(run_op(Opcode::CEIL, {x}, {}).v[5]));
}

TEST(OpSpecialValues, RoundHalvesToEven) {
  const HostTensor x = host_f32({NaN, -INF, INF, -0.0, 0, -0.5, 0.5, 1.5, 2.5, -2.5, -3.5, 0.49999997, 8388609, -0.3});
  const OpOutput y = run_op(Opcode::ROUND, {x}, {});
  EXPECT_TRUE(matches(expect_values(x, {NaN, -INF, INF, 0, 0, 0, 0, 2, 2, -2, -4, 0, 8388609, 0}), y));
  ASSERT_TRUE(y.status) << y.status.message();
  // The sign stays: round(−0.5) = round(−0.3) = −0, as numpy and vroundps give.
  for (size_t i : {3u, 5u, 13u}) EXPECT_TRUE(std::signbit(y.v[i])) << i;
  EXPECT_FALSE(std::signbit(y.v[6]));
}

TEST(OpSpecialValues, CastSaturatesAndRounds) {
  const HostTensor x = host_f32({NaN, -INF, INF, -0.0, 2147483648.0, -2147483648.0, 2147483520.0, -2147483904.0, -1.99,
                                 1.99, 1e-40, -1e30});
  EXPECT_TRUE(matches(Expected{host(DType::I32, x.type.shape,
                                    {0, -2147483648.0, 2147483647, 0, 2147483647, -2147483648.0, 2147483520,
                                     -2147483648.0, -1, 1, 0, -2147483648.0}),
                               {}, EXACT},
                      run_op(Opcode::CAST, {x}, {imm_enum("to", "i32")})));
  const HostTensor k = host(DType::I32, Shape{6}, {16777217, -16777217, 16777219, 2147483647, -2147483648.0, 33554435});
  EXPECT_TRUE(matches(Expected{host(DType::F32, Shape{6}, {16777216, -16777216, 16777220, 2147483648.0, -2147483648.0,
                                                           33554436}),
                               {}, EXACT},
                      run_op(Opcode::CAST, {k}, {imm_enum("to", "f32")})));
}

TEST(OpSpecialValues, SoftActivationsAtTheLimits) {
  const HostTensor x = host_f32({NaN, -INF, INF, -200, 200, 0});
  EXPECT_TRUE(matches(expect_values(x, {NaN, 0, INF, std::exp(-200.0), 200, std::log(2.0)}, {1e-45, 1e-6}),
                      run_op(Opcode::SOFTPLUS, {x}, {})));
  EXPECT_TRUE(matches(expect_values(x, {NaN, 0, 1, 0, 1, 0.5}), run_op(Opcode::HARDSIGMOID, {x}, {})));
  // x·0 at −inf is NaN, as ONNX's formula and PyTorch's hardswish give.
  EXPECT_TRUE(matches(expect_values(x, {NaN, NaN, INF, -0.0, 200, 0}), run_op(Opcode::HARDSWISH, {x}, {})));
  const double ag = static_cast<double>(1.6732632f) * static_cast<double>(1.050701f);
  EXPECT_TRUE(matches(expect_values(x, {NaN, -ag, INF, -ag, 200 * static_cast<double>(1.050701f), 0}, {0, 1e-6}),
                      run_op(Opcode::SELU, {x}, {})));
}

TEST(OpSpecialValues, SinCosAtSpecialsAndHugeAngles) {
  const HostTensor x = host_f32({NaN, INF, -INF, -0.0, 0, 1e30, -1e-40});
  std::vector<double> s = {NaN, NaN, NaN, 0, 0, std::sin(static_cast<double>(1e30f)), -1e-40};
  std::vector<double> c = {NaN, NaN, NaN, 1, 1, std::cos(static_cast<double>(1e30f)), 1};
  EXPECT_TRUE(matches(expect_values(x, s, {1e-44, 1e-6}), run_op(Opcode::SIN, {x}, {})));
  EXPECT_TRUE(matches(expect_values(x, c, {0, 1e-6}), run_op(Opcode::COS, {x}, {})));
  EXPECT_TRUE(std::signbit(run_op(Opcode::SIN, {x}, {}).v[3]));
}

TEST(OpSpecialValues, StepAtZeroAndNaN) {
  const HostTensor x = host_f32({0, -0.0, NaN, 1e-30, -1e-30, INF, -INF});
  EXPECT_TRUE(matches(expect_values(x, {1, 1, 0, 1, 0, 1, 0}), run_op(Opcode::STEP, {x}, {})));
}

// At a kink the derivative is the left (zero) one, as PyTorch; NaN in x gives NaN.
TEST(OpSpecialValues, ActBwdAtKinksAndNaN) {
  const HostTensor dy = host_f32({2, 2, 2, 2});
  const HostTensor x = host_f32({0, -0.0, 1.5, NaN});
  const auto act = [&](const char* fn, double alpha) {
    std::vector<ImmArg> imms = {imm_enum("fn", fn)};
    if (alpha != 0) imms.push_back(imm_f("alpha", alpha));
    return run_op(Opcode::ACT_BWD, {dy, x}, imms);
  };
  EXPECT_TRUE(matches(expect_values(x, {0, 0, 2, NaN}), act("relu", 0)));
  EXPECT_TRUE(matches(expect_values(x, {0.5, 0.5, 2, NaN}), act("leakyrelu", 0.25)));
  EXPECT_TRUE(matches(expect_values(x, {0, 0, 2, NaN}), act("abs", 0)));
  // clipped_relu: 0 at both ends of [0, threshold].
  EXPECT_TRUE(matches(expect_values(x, {0, 0, 0, NaN}), act("clipped_relu", 1.5)));
  EXPECT_TRUE(matches(expect_values(x, {1, 1, 2, NaN}), act("elu", 0.5)));
  for (const char* fn : {"sigmoid", "tanh", "gelu", "gelu_tanh", "swish"}) {
    const OpOutput y = act(fn, 1);
    ASSERT_TRUE(y.status) << y.status.message();
    EXPECT_TRUE(std::isnan(y.v[3])) << fn;
  }
}

TEST(OpSpecialValues, SoftmaxCeClassIdOutOfRangeGivesNaN) {
  const HostTensor x = host(DType::F32, Shape{3, 4}, {1, 2, 3, 4, 0, 0, 0, 0, -1, 5, 2, 0});
  for (double bad : {4.0, -1.0, 2147483647.0}) {
    SCOPED_TRACE(bad);
    const HostTensor ids = host(DType::I32, Shape{3}, {0, bad, 2});
    EXPECT_TRUE(
        matches(Expected{host(DType::F32, Shape(), {NaN}), {}, EXACT}, run_op(Opcode::SOFTMAX_CE, {x, ids}, {})));
    const OpOutput dx = run_op(Opcode::SOFTMAX_CE_BWD, {x, ids, host(DType::F32, Shape(), {1})}, {});
    ASSERT_TRUE(dx.status) << dx.status.message();
    ASSERT_TRUE(dx.problems.empty());
    for (int j = 0; j < 4; ++j) {
      EXPECT_TRUE(std::isfinite(dx.v[j])) << j;   // row 0 has a valid id
      EXPECT_TRUE(std::isnan(dx.v[4 + j])) << j;  // row 1 does not
      EXPECT_TRUE(std::isfinite(dx.v[8 + j])) << j;
    }
  }
  // Valid ids, for contrast: every row finite.
  const OpOutput ok = run_op(Opcode::SOFTMAX_CE, {x, host(DType::I32, Shape{3}, {3, 0, 1})}, {});
  ASSERT_TRUE(ok.status) << ok.status.message();
  EXPECT_TRUE(std::isfinite(ok.v[0]));
}

TEST(OpSpecialValues, LossesOfExtremeLogitsStayFinite) {
  // Logits of ±1000: a naive e^x overflows. The right class wins by 2000: loss ≈ 0, else ≈ 2000.
  const HostTensor x = host(DType::F32, Shape{2, 2}, {1000, -1000, -1000, 1000});
  EXPECT_TRUE(matches(Expected{host(DType::F32, Shape(), {0}), {}, {1e-6, 0}},
                      run_op(Opcode::SOFTMAX_CE, {x, host(DType::I32, Shape{2}, {0, 1})}, {})));
  EXPECT_TRUE(matches(Expected{host(DType::F32, Shape(), {2000}), {}, {0, 1e-6}},
                      run_op(Opcode::SOFTMAX_CE, {x, host(DType::I32, Shape{2}, {1, 0})}, {})));
  const HostTensor z = host_f32({1000, -1000, 1000, -1000});
  const HostTensor t = host_f32({1, 0, 0, 1});
  // Terms: 0, 0, 1000, 1000 → mean 500.
  EXPECT_TRUE(
      matches(Expected{host(DType::F32, Shape(), {500}), {}, {0, 1e-6}}, run_op(Opcode::BCE_LOGITS, {z, t}, {})));
}

TEST(OpSpecialValues, LrScheduleWithoutWarmupIsFiniteAtZero) {
  // Before the first ADVANCE, t is 0: with no warm-up there is no 0/0.
  for (const char* kind : {"constant", "cosine"}) {
    const OpOutput lr = run_op(Opcode::LR_SCHEDULE, {host(DType::F32, Shape(), {0})},
                               {imm_enum("kind", kind), imm_f("base", 0.5), imm_i("total", 10)});
    EXPECT_TRUE(matches(Expected{host(DType::F32, Shape(), {0.5}), {}, EXACT}, lr)) << kind;
  }
}

// ---------------------------------------------------------------------------------------------
// Shape errors

TensorType f32(std::initializer_list<int64_t> d) { return TensorType{DType::F32, Shape(d)}; }
TensorType i32(std::initializer_list<int64_t> d) { return TensorType{DType::I32, Shape(d)}; }

TEST(OpShapeErrors, BinaryShapesThatDoNotBroadcast) {
  for (Opcode op : {Opcode::ADD, Opcode::SUB, Opcode::MUL, Opcode::DIV, Opcode::MAXIMUM, Opcode::MINIMUM, Opcode::POW, Opcode::PRELU,
                    Opcode::EQUAL, Opcode::LESS, Opcode::LESS_EQUAL, Opcode::GREATER, Opcode::GREATER_EQUAL}) {
    const std::string mn = op_info(op).mnemonic;
    EXPECT_TRUE(append_fails(op, {f32({3, 4}), f32({5})}, {}, {mn, "f32[3,4]", "f32[5]"}));
    EXPECT_TRUE(append_fails(op, {f32({2, 3, 4}), f32({3, 2})}, {}, {mn, "f32[2,3,4]", "f32[3,2]"}));
    EXPECT_TRUE(append_fails(op, {f32({3, 1}), f32({2, 4})}, {}, {mn, "f32[3,1]", "f32[2,4]"}));
  }
  EXPECT_TRUE(append_fails(Opcode::ADD, {f32({3, 4}), f32({3})}, {imm_f("alpha", 2)}, {"ADD", "f32[3,4]", "f32[3]"}));
}

TEST(OpShapeErrors, WinogradWeightsAndConvolution) {
  const auto f32 = [](std::initializer_list<int64_t> d) { return TensorType{DType::F32, Shape(d)}; };
  EXPECT_TRUE(append_fails(Opcode::CONV_WEIGHTS_WINOGRAD, {f32({4, 3, 5, 5})}, {},
                           {"CONV_WEIGHTS_WINOGRAD", "f32[4,3,5,5]", "f32[O, C, 3, 3]"}));
  EXPECT_TRUE(append_fails(Opcode::CONV_WEIGHTS_WINOGRAD, {f32({4, 3, 3})}, {}, {"f32[4,3,3]"}));
  EXPECT_TRUE(append_fails(Opcode::CONV2D_WINOGRAD, {f32({1, 3, 6, 6}), f32({9, 4, 3})}, {},
                           {"CONV2D_WINOGRAD", "f32[9,4,3]", "f32[16, O, C]"}));
  EXPECT_TRUE(append_fails(Opcode::CONV2D_WINOGRAD, {f32({1, 5, 6, 6}), f32({16, 4, 3})}, {}, {"CONV2D_WINOGRAD"}));
  EXPECT_TRUE(append_fails(Opcode::CONV2D_WINOGRAD, {f32({1, 3, 6, 6}), f32({16, 4, 3})}, {imm_ints("pad", {2, 2})},
                           {"padding at most 1"}));
  EXPECT_TRUE(append_fails(Opcode::CONV2D_WINOGRAD, {f32({1, 3, 6, 6}), f32({16, 4, 3}), f32({5})}, {},
                           {"bias", "f32[5]", "f32[4]"}));
  EXPECT_TRUE(append_fails(Opcode::CONV2D_WINOGRAD, {f32({1, 3, 6, 6})}, {}, {"2 or 3 inputs"}));
}

TEST(OpShapeErrors, Matmul) {
  EXPECT_TRUE(append_fails(Opcode::MATMUL, {f32({3, 4}), f32({5, 6})}, {}, {"MATMUL", "f32[3,4]", "f32[5,6]"}));
  // transB makes b [N, K]: K is 6 here, not 4.
  EXPECT_TRUE(append_fails(Opcode::MATMUL, {f32({3, 4}), f32({4, 6})}, {imm_b("transB", true)},
                           {"MATMUL", "f32[3,4]", "f32[4,6]"}));
  EXPECT_TRUE(append_fails(Opcode::MATMUL, {f32({4, 3}), f32({3, 6})}, {imm_b("transA", true)},
                           {"MATMUL", "f32[4,3]", "f32[3,6]"}));
  EXPECT_TRUE(append_fails(Opcode::MATMUL, {f32({2, 3, 4}), f32({3, 4, 5})}, {},
                           {"MATMUL", "f32[2,3,4]", "f32[3,4,5]"}));
  EXPECT_TRUE(append_fails(Opcode::MATMUL, {f32({4}), f32({4, 5})}, {}, {"MATMUL", "f32[4]", "rank"}));
  EXPECT_TRUE(append_fails(Opcode::MATMUL, {f32({3, 4}), i32({4, 5})}, {}, {"MATMUL", "i32[4,5]", "f32"}));
}

TEST(OpShapeErrors, Linear) {
  EXPECT_TRUE(append_fails(Opcode::LINEAR, {f32({2, 4}), f32({5, 3}), f32({3})}, {},
                           {"LINEAR", "f32[2,4]", "f32[5,3]"}));
  EXPECT_TRUE(append_fails(Opcode::LINEAR, {f32({2, 4}), f32({4, 3}), f32({4})}, {}, {"LINEAR", "f32[4]", "f32[4,3]"}));
  EXPECT_TRUE(append_fails(Opcode::LINEAR, {f32({2, 4}), f32({4, 3}), f32({1, 3})}, {},
                           {"LINEAR", "f32[1,3]", "f32[4,3]"}));
  EXPECT_TRUE(append_fails(Opcode::LINEAR, {f32({2, 4}), f32({12}), f32({3})}, {}, {"LINEAR", "f32[12]", "rank 2"}));
  EXPECT_TRUE(append_fails(Opcode::LINEAR, {f32({}), f32({1, 3}), f32({3})}, {}, {"LINEAR", "f32[]"}));
}

TEST(OpShapeErrors, Reshape) {
  EXPECT_TRUE(append_fails(Opcode::RESHAPE, {f32({2, 3})}, {imm_ints("shape", {4, 2})},
                           {"RESHAPE", "f32[2,3]", "[4,2]"}));
  EXPECT_TRUE(append_fails(Opcode::RESHAPE, {f32({2, 3})}, {imm_ints("shape", {4, -1})},
                           {"RESHAPE", "f32[2,3]", "[4,-1]"}));
  EXPECT_TRUE(append_fails(Opcode::RESHAPE, {f32({2, 3})}, {imm_ints("shape", {-1, 3, -1})}, {"RESHAPE", "-1"}));
  EXPECT_TRUE(append_fails(Opcode::RESHAPE, {f32({2, 3})}, {imm_ints("shape", {0, 6})},
                           {"RESHAPE", "dimension 0 is 0"}));
  EXPECT_TRUE(append_fails(Opcode::RESHAPE, {i32({2, 3})}, {imm_ints("shape", {1, 2, 3, 1, 1, 1, 1})},
                           {"RESHAPE", "rank 7"}));
  // Dimensions whose product wraps around int64 must not be taken for a match.
  const int64_t big = std::numeric_limits<int64_t>::max();
  EXPECT_TRUE(append_fails(Opcode::RESHAPE, {f32({6})}, {imm_ints("shape", {6, big, big})}, {"RESHAPE", "f32[6]"}));
  EXPECT_TRUE(append_fails(Opcode::RESHAPE, {f32({6})}, {imm_ints("shape", {2, int64_t{1} << 62, 4})},
                           {"RESHAPE", "f32[6]"}));
}

TEST(OpShapeErrors, Transpose) {
  EXPECT_TRUE(append_fails(Opcode::TRANSPOSE, {f32({2, 3})}, {imm_ints("perm", {0, 0})}, {"TRANSPOSE", "[0,0]"}));
  EXPECT_TRUE(append_fails(Opcode::TRANSPOSE, {f32({2, 3, 4})}, {imm_ints("perm", {0, 3, 1})},
                           {"TRANSPOSE", "[0,3,1]"}));
  EXPECT_TRUE(append_fails(Opcode::TRANSPOSE, {f32({2, 3, 4})}, {imm_ints("perm", {1, 0})},
                           {"TRANSPOSE", "[1,0]", "f32[2,3,4]"}));
  EXPECT_TRUE(append_fails(Opcode::TRANSPOSE, {f32({2, 3})}, {imm_ints("perm", {-1, 1})}, {"TRANSPOSE", "[-1,1]"}));
}

TEST(OpShapeErrors, Concat) {
  EXPECT_TRUE(append_fails(Opcode::CONCAT, {f32({2, 3}), f32({2, 4})}, {}, {"CONCAT", "f32[2,3]", "f32[2,4]"}));
  EXPECT_TRUE(append_fails(Opcode::CONCAT, {f32({2, 3, 4}), f32({2, 1, 4}), f32({2, 5, 3})}, {imm_i("axis", 1)},
                           {"CONCAT", "f32[2,3,4]", "f32[2,5,3]"}));
  EXPECT_TRUE(append_fails(Opcode::CONCAT, {f32({2, 3}), i32({2, 3})}, {}, {"CONCAT", "f32[2,3]", "i32[2,3]"}));
  EXPECT_TRUE(append_fails(Opcode::CONCAT, {f32({2, 3}), f32({2, 3, 1})}, {}, {"CONCAT", "f32[2,3]", "f32[2,3,1]"}));
  EXPECT_TRUE(append_fails(Opcode::CONCAT, {f32({2, 3}), f32({2, 3})}, {imm_i("axis", 2)},
                           {"CONCAT", "f32[2,3]", "axis 2"}));
  EXPECT_TRUE(append_fails(Opcode::CONCAT, {}, {}, {"CONCAT"}));
}

TEST(OpShapeErrors, Slice) {
  const auto slice = [](int64_t axis, int64_t start, int64_t end) {
    return std::vector<ImmArg>{imm_i("axis", axis), imm_i("start", start), imm_i("end", end)};
  };
  EXPECT_TRUE(append_fails(Opcode::SLICE, {f32({2, 5})}, slice(1, 3, 1), {"SLICE", "f32[2,5]", "[3:1]"}));
  EXPECT_TRUE(append_fails(Opcode::SLICE, {f32({2, 5})}, slice(1, 2, 2), {"SLICE", "f32[2,5]", "[2:2]"}));
  EXPECT_TRUE(append_fails(Opcode::SLICE, {f32({2, 5})}, slice(1, 7, 9), {"SLICE", "f32[2,5]", "[7:9]"}));
  EXPECT_TRUE(append_fails(Opcode::SLICE, {i32({2, 5})}, slice(-1, -1, -3), {"SLICE", "i32[2,5]", "[-1:-3]"}));
  EXPECT_TRUE(append_fails(Opcode::SLICE, {f32({2, 5})}, slice(2, 0, 1), {"SLICE", "f32[2,5]", "axis 2"}));
  // A required immediate left unset is caught before shape inference can read it.
  Context ctx;
  Program p(ctx);
  TensorDesc d;
  d.name = "x";
  d.type = f32({2, 5});
  d.role = Role::INPUT;
  Instruction ins = make_instruction(Opcode::SLICE, {p.declare(d).value()}, {});
  ins.imm.pop_back();
  const Result<std::vector<TensorId>> r = p.append_new(ins);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("SLICE"), std::string::npos) << r.status().message();
}

TEST(OpShapeErrors, AxisOutOfRange) {
  for (Opcode op : {Opcode::SOFTMAX, Opcode::LOGSOFTMAX, Opcode::REDUCE_SUM, Opcode::REDUCE_MEAN, Opcode::REDUCE_MAX,
                    Opcode::REDUCE_MIN, Opcode::REDUCE_PROD, Opcode::ARGMAX, Opcode::ARGMIN}) {
    const std::string mn = op_info(op).mnemonic;
    EXPECT_TRUE(append_fails(op, {f32({3, 4})}, {imm_i("axis", 2)}, {mn, "f32[3,4]", "axis 2"}));
    EXPECT_TRUE(append_fails(op, {f32({3, 4})}, {imm_i("axis", -3)}, {mn, "f32[3,4]", "axis -3"}));
    EXPECT_TRUE(append_fails(op, {f32({})}, {}, {mn, "f32[]"}));
  }
}

TEST(OpShapeErrors, FillValueNotAnI32) {
  EXPECT_TRUE(append_fails(Opcode::FILL, {i32({3})}, {imm_f("value", 2.5)}, {"FILL", "i32[3]", "2.5"}));
  EXPECT_TRUE(append_fails(Opcode::FILL, {i32({3})}, {imm_f("value", 2147483648.0)}, {"FILL", "i32[3]"}));
  EXPECT_TRUE(append_fails(Opcode::FILL, {i32({3})}, {imm_f("value", NaN)}, {"FILL", "i32[3]"}));
}

TEST(OpShapeErrors, AssignNeedsDstsType) {
  EXPECT_TRUE(append_fails(Opcode::ASSIGN, {f32({3, 4}), f32({4, 3})}, {}, {"ASSIGN", "f32[4,3]", "f32[3,4]"}));
  EXPECT_TRUE(append_fails(Opcode::ASSIGN, {f32({3}), i32({3})}, {}, {"ASSIGN", "i32[3]", "f32[3]"}));
  EXPECT_TRUE(append_fails(Opcode::ASSIGN, {f32({}), f32({1})}, {}, {"ASSIGN", "f32[1]", "f32[]"}));
}

TEST(OpShapeErrors, I32IntoFloatOps) {
  EXPECT_TRUE(append_fails(Opcode::EXP, {i32({3})}, {}, {"EXP", "i32[3]", "f32"}));
  EXPECT_TRUE(append_fails(Opcode::LESS, {f32({3}), i32({3})}, {}, {"LESS", "operand 2", "i32[3]", "f32"}));
  EXPECT_TRUE(append_fails(Opcode::ADD, {f32({3, 4}), i32({4})}, {}, {"ADD", "operand 2", "i32[4]"}));
  EXPECT_TRUE(append_fails(Opcode::LINEAR, {f32({2, 4}), f32({4, 3}), i32({3})}, {},
                           {"LINEAR", "operand 3", "i32[3]"}));
}

TEST(OpShapeErrors, SoftmaxCeTargets) {
  // Accepted: i32 class ids shaped like the logits without their last axis, or f32 like the logits.
  for (const std::vector<TensorType>& ok :
       {std::vector<TensorType>{f32({3, 4}), i32({3})}, std::vector<TensorType>{f32({2, 3, 4}), i32({2, 3})},
        std::vector<TensorType>{f32({4}), i32({})}, std::vector<TensorType>{f32({3, 4}), f32({3, 4})}}) {
    for (Opcode op : {Opcode::SOFTMAX_CE, Opcode::SOFTMAX_CE_BWD}) {
      std::vector<TensorType> in = ok;
      if (op == Opcode::SOFTMAX_CE_BWD) in.push_back(f32({}));
      Context ctx;
      Program p(ctx);
      std::vector<TensorId> ids;
      TensorId out = NO_TENSOR;
      const Status st = build_op(p, op, in, {}, &ids, &out);
      ASSERT_TRUE(st) << st.message();
      EXPECT_EQ(p.desc(out).type, op == Opcode::SOFTMAX_CE ? f32({}) : ok[0]);
    }
  }
  EXPECT_TRUE(append_fails(Opcode::SOFTMAX_CE, {f32({3, 4}), i32({3, 4})}, {}, {"SOFTMAX_CE", "i32[3,4]", "i32[3]"}));
  EXPECT_TRUE(append_fails(Opcode::SOFTMAX_CE, {f32({3, 4}), i32({4})}, {}, {"SOFTMAX_CE", "i32[4]"}));
  EXPECT_TRUE(append_fails(Opcode::SOFTMAX_CE, {f32({3, 4}), f32({3})}, {}, {"SOFTMAX_CE", "f32[3]", "f32[3,4]"}));
  EXPECT_TRUE(append_fails(Opcode::SOFTMAX_CE, {f32({}), i32({})}, {}, {"SOFTMAX_CE", "f32[]", "rank"}));
  EXPECT_TRUE(append_fails(Opcode::SOFTMAX_CE_BWD, {f32({3, 4}), i32({3}), f32({1})}, {},
                           {"SOFTMAX_CE_BWD", "f32[1]", "f32[]"}));
}

TEST(OpShapeErrors, ExpandAndPad) {
  EXPECT_TRUE(
      append_fails(Opcode::EXPAND, {f32({3, 4})}, {imm_ints("shape", {4, 4})}, {"EXPAND", "f32[3,4]", "[4,4]"}));
  EXPECT_TRUE(append_fails(Opcode::EXPAND, {f32({2, 3})}, {imm_ints("shape", {3})}, {"EXPAND", "f32[2,3]", "[3]"}));
  EXPECT_TRUE(
      append_fails(Opcode::EXPAND, {f32({3})}, {imm_ints("shape", {1, 1, 1, 1, 1, 1, 3})}, {"EXPAND", "f32[3]"}));
  EXPECT_TRUE(append_fails(Opcode::PAD, {f32({3, 4})}, {imm_ints("pads", {1, 1})}, {"PAD", "f32[3,4]", "[1,1]"}));
  EXPECT_TRUE(append_fails(Opcode::PAD, {f32({3, 4})}, {imm_ints("pads", {1, -1, 0, 0})}, {"PAD", "[1,-1,0,0]"}));
  EXPECT_TRUE(
      append_fails(Opcode::PAD, {i32({3})}, {imm_ints("pads", {1, 1}), imm_f("value", 2.5)}, {"PAD", "i32[3]", "2.5"}));
  // A fill value an i32 cannot hold is refused, not converted (which would be undefined).
  for (double v : {2147483648.0, -2147483904.0, INF, NaN})
    EXPECT_TRUE(append_fails(Opcode::PAD, {i32({3})}, {imm_ints("pads", {1, 1}), imm_f("value", v)}, {"PAD", "i32[3]"}))
        << v;
}

TEST(OpShapeErrors, OptimizerOperands) {
  EXPECT_TRUE(
      append_fails(Opcode::SGD, {f32({3, 4}), f32({4}), f32({3, 4}), f32({})}, {}, {"SGD", "f32[4]", "f32[3,4]"}));
  EXPECT_TRUE(
      append_fails(Opcode::SGD, {f32({3, 4}), f32({3, 4}), f32({3, 4}), f32({1})}, {}, {"SGD", "f32[1]", "f32[]"}));
  EXPECT_TRUE(append_fails(Opcode::ADAM, {f32({2}), f32({2}), f32({2}), f32({3}), f32({}), f32({})}, {},
                           {"ADAM", "f32[3]", "f32[2]"}));
  EXPECT_TRUE(append_fails(Opcode::ADAMW, {f32({2}), f32({2}), f32({2}), f32({2}), f32({}), f32({2})}, {},
                           {"ADAMW", "operand 6", "f32[]"}));
  EXPECT_TRUE(append_fails(Opcode::RMSPROP, {f32({2}), f32({2}), f32({5}), f32({})}, {}, {"RMSPROP", "f32[5]"}));
  EXPECT_TRUE(append_fails(Opcode::ADVANCE, {f32({2})}, {}, {"ADVANCE", "f32[2]", "f32[]"}));
  EXPECT_TRUE(append_fails(Opcode::LR_SCHEDULE, {f32({})},
                           {imm_enum("kind", "step"), imm_f("base", 1), imm_i("step_size", 0)},
                           {"LR_SCHEDULE", "step_size"}));
  EXPECT_TRUE(append_fails(Opcode::LR_SCHEDULE, {f32({})},
                           {imm_enum("kind", "constant"), imm_f("base", 1), imm_i("warmup", -1)},
                           {"LR_SCHEDULE", "warmup"}));
  EXPECT_TRUE(append_fails(Opcode::CLIP_GRAD_NORM, {f32({3})}, {imm_f("max_norm", 0)}, {"CLIP_GRAD_NORM", "max_norm"}));
  // Outputs of an in-place op must be the very inputs it updates.
  Context ctx;
  Program p(ctx);
  std::vector<TensorId> ids;
  ASSERT_TRUE(declare_inputs(p, {f32({3}), f32({3}), f32({3}), f32({})}, &ids));
  const Result<std::vector<TensorId>> fresh = p.append_new(make_instruction(Opcode::SGD, ids, {}));
  ASSERT_FALSE(fresh.is_ok());
  EXPECT_NE(fresh.status().message().find("SGD updates its operands in place"), std::string::npos)
      << fresh.status().message();
  Instruction swapped = make_instruction(Opcode::SGD, ids, {ids[2], ids[0]});
  const Status st = p.append(swapped);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("SGD: output 1 must be input 1"), std::string::npos) << st.message();
}

// Operands that every op of a category accepts, with the immediates it requires. Operands listed
// in `i32` are i32 whatever the dtype under test (indices); `i32_out`: the output is i32 for
// every accepted input (positions).
struct ValidCase {
  std::vector<Shape> shapes;
  std::vector<ImmArg> imms;
  std::vector<size_t> i32 = {};
  bool i32_out = false;
};

ValidCase valid_case(const OpInfo& info) {
  switch (info.op) {
    case Opcode::ACT_BWD:
      return {{Shape{3, 4}, Shape{3, 4}}, {imm_enum("fn", "tanh")}};
    case Opcode::CALC:
      return {{Shape{3, 4}, Shape{4}, Shape{3, 1}}, {imm_str("expr", "add(mul(%0,%1),%2)")}};
    case Opcode::EXPAND:
      return {{Shape{3, 1}}, {imm_ints("shape", {2, 3, 4})}};
    case Opcode::PAD:
      return {{Shape{3, 4}}, {imm_ints("pads", {1, 0, 2, 1})}};
    case Opcode::SOFTMAX_CE_BWD:
      return {{Shape{3, 4}, Shape{3, 4}, Shape()}, {}};
    case Opcode::ASSIGN:
      return {{Shape{3, 4}, Shape{3, 4}}, {}};
    case Opcode::ADVANCE:
      return {{Shape()}, {}};
    case Opcode::LR_SCHEDULE:
      return {{Shape()}, {imm_enum("kind", "cosine"), imm_f("base", 0.1)}};
    case Opcode::CLIP_GRAD_NORM:
      return {{Shape{3, 4}, Shape{5}}, {imm_f("max_norm", 1)}};
    case Opcode::SGD:
    case Opcode::RMSPROP:
      return {{Shape{3, 4}, Shape{3, 4}, Shape{3, 4}, Shape()}, {}};
    case Opcode::ADAM:
    case Opcode::ADAMW:
      return {{Shape{3, 4}, Shape{3, 4}, Shape{3, 4}, Shape{3, 4}, Shape(), Shape()}, {}};
    case Opcode::MATMUL: return {{Shape{3, 4}, Shape{4, 5}}, {}};
    case Opcode::LINEAR: return {{Shape{3, 4}, Shape{4, 5}, Shape{5}}, {}};
    case Opcode::CONV2D: return {{Shape{2, 3, 5, 5}, Shape{4, 3, 3, 3}, Shape{4}}, {}};
    case Opcode::CONV2D_BWD_DATA: return {{Shape{2, 4, 3, 3}, Shape{4, 3, 3, 3}, Shape{2, 3, 5, 5}}, {}};
    case Opcode::CONV2D_BWD_WEIGHT: return {{Shape{2, 3, 5, 5}, Shape{2, 4, 3, 3}, Shape{4, 3, 3, 3}}, {}};
    case Opcode::DWCONV2D_NCHWC: return {{Shape{2, 2, 5, 5, 8}, Shape{2, 3, 3, 8}, Shape{12}}, {}};
    case Opcode::CONV2D_NCHWC: return {{Shape{2, 1, 5, 5, 8}, Shape{1, 1, 3, 3, 8, 8}, Shape{7}}, {}};
    case Opcode::MAXPOOL2D:
    case Opcode::AVGPOOL2D: return {{Shape{2, 3, 5, 5}}, {imm_ints("kernel", {2, 2})}};
    case Opcode::MAXPOOL2D_BWD:
    case Opcode::AVGPOOL2D_BWD: return {{Shape{2, 3, 2, 2}, Shape{2, 3, 5, 5}}, {imm_ints("kernel", {2, 2})}};
    case Opcode::RESHAPE: return {{Shape{3, 4}}, {imm_ints("shape", {12})}};
    case Opcode::TRANSPOSE: return {{Shape{3, 4}}, {imm_ints("perm", {1, 0})}};
    case Opcode::SLICE: return {{Shape{3, 4}}, {imm_i("axis", 0), imm_i("start", 0), imm_i("end", 2)}};
    case Opcode::BATCHNORM2D: return {{Shape{2, 3, 4, 4}, Shape{3}, Shape{3}, Shape{3}, Shape{3}}, {}};
    case Opcode::BATCHNORM2D_BWD: return {{Shape{2, 3, 4, 4}, Shape{3}, Shape{3}, Shape{3}, Shape{2, 3, 4, 4}}, {}};
    case Opcode::UPSAMPLE_NEAREST: return {{Shape{2, 3, 4, 5}}, {}};
    case Opcode::GLOBAL_AVGPOOL: return {{Shape{2, 3, 4, 5}}, {}};
    case Opcode::TO_NCHWC: return {{Shape{2, 3, 4, 5}}, {}};
    case Opcode::TO_NCHW: return {{Shape{2, 1, 4, 5, 8}}, {imm_i("channels", 3)}};
    case Opcode::CONV_WEIGHTS_NCHWC: return {{Shape{4, 3, 3, 3}}, {}};
    case Opcode::CONV_WEIGHTS_WINOGRAD: return {{Shape{4, 3, 3, 3}}, {}};
    case Opcode::CONV2D_WINOGRAD: return {{Shape{1, 3, 5, 5}, Shape{16, 4, 3}, Shape{4}}, {}};
    case Opcode::MAXPOOL2D_NCHWC:
    case Opcode::AVGPOOL2D_NCHWC: return {{Shape{2, 1, 5, 5, 8}}, {imm_ints("kernel", {2, 2})}};
    case Opcode::GLOBAL_AVGPOOL_NCHWC: return {{Shape{2, 1, 4, 5, 16}}, {}};
    case Opcode::GATHER: return {{Shape{3, 4}, Shape{2, 5}}, {}, {1}};
    case Opcode::LSTM: return {{Shape{3, 2, 4}, Shape{1, 8, 4}, Shape{1, 8, 2}, Shape{1, 16}}, {}};
    case Opcode::GRU: return {{Shape{3, 2, 4}, Shape{1, 6, 4}, Shape{1, 6, 2}, Shape{1, 12}}, {}};
    case Opcode::RNN: return {{Shape{3, 2, 4}, Shape{1, 2, 4}, Shape{1, 2, 2}, Shape{1, 4}}, {}};
    // The forward's operands, then y [T,D,N,H], dy, the last h's (and c's) gradient [D,N,H].
    case Opcode::LSTM_BWD:
      return {{Shape{3, 2, 4}, Shape{1, 8, 4}, Shape{1, 8, 2}, Shape{1, 16}, Shape{3, 1, 2, 2}, Shape{3, 1, 2, 2},
               Shape{1, 2, 2}, Shape{1, 2, 2}},
              {}};
    case Opcode::GRU_BWD:
      return {{Shape{3, 2, 4}, Shape{1, 6, 4}, Shape{1, 6, 2}, Shape{1, 12}, Shape{3, 1, 2, 2}, Shape{3, 1, 2, 2},
               Shape{1, 2, 2}},
              {}};
    case Opcode::RNN_BWD:
      return {{Shape{3, 2, 4}, Shape{1, 2, 4}, Shape{1, 2, 2}, Shape{1, 4}, Shape{3, 1, 2, 2}, Shape{3, 1, 2, 2},
               Shape{1, 2, 2}},
              {}};
    case Opcode::GATHER_BWD: return {{Shape{2, 5, 4}, Shape{2, 5}, Shape{3, 4}}, {}, {1}};
    case Opcode::WHERE: return {{Shape{3, 1}, Shape{3, 4}, Shape{4}}, {}};
    case Opcode::CAST: return {{Shape{3, 4}}, {imm_enum("to", "i32")}, {}, true};
    case Opcode::ARGMAX:
    case Opcode::ARGMIN: return {{Shape{3, 4}}, {}, {}, true};
    default: break;
  }
  switch (info.category) {
    case OpCategory::ELEMENTWISE_BINARY: return {{Shape{3, 4}, Shape{4}}, {}};
    default: return {std::vector<Shape>(info.n_in < 0 ? 2 : info.n_in, Shape{3, 4}), {}};
  }
}

// Stamped from the table: every op accepts f32 operands of a valid case; with i32 operands, the
// ops that move bytes accept them and every other op refuses them by name.
TEST(OpShapeErrors, DtypeFollowsTheFlags) {
  for (const OpInfo& info : all_ops()) {
    SCOPED_TRACE(info.mnemonic);
    // The ops of the reduced types state each operand's dtype apart (tests/quantize_test.cpp).
    if (info.flags & OPF_REDUCED) continue;
    const ValidCase c = valid_case(info);
    for (DType dt : {DType::F32, DType::I32}) {
      std::vector<TensorType> in;
      for (size_t k = 0; k < c.shapes.size(); ++k) {
        const bool index = std::find(c.i32.begin(), c.i32.end(), k) != c.i32.end();
        in.push_back(TensorType{index ? DType::I32 : dt, c.shapes[k]});
      }
      Context ctx;
      Program p(ctx);
      std::vector<TensorId> ids;
      TensorId out = NO_TENSOR;
      const Status st = build_op(p, info.op, in, c.imms, &ids, &out);
      if (dt == DType::F32 || (info.flags & OPF_ANY_DTYPE)) {
        EXPECT_TRUE(st.is_ok()) << dtype_name(dt) << ": " << st.message();
        if (st) {
          EXPECT_EQ(p.desc(out).type.dtype, c.i32_out ? DType::I32 : dt);
        }
      } else {
        EXPECT_TRUE(append_fails(info.op, in, c.imms, {info.mnemonic, in[0].str(), "f32"}));
      }
    }
  }
}

// Stamped from the table: a wrong number of operands is refused, naming the op.
TEST(OpShapeErrors, OperandCountFollowsTheTable) {
  for (const OpInfo& info : all_ops()) {
    SCOPED_TRACE(info.mnemonic);
    const int n = info.n_in < 0 ? 0 : info.n_in + 1;
    EXPECT_TRUE(append_fails(info.op, std::vector<TensorType>(n, f32({3, 4})), {}, {info.mnemonic, "input"}));
    if (info.n_in > 1) {
      EXPECT_TRUE(append_fails(info.op, std::vector<TensorType>(info.n_in - 1, f32({3, 4})), {},
                               {info.mnemonic, "input"}));
    }
  }
}

}  // namespace
}  // namespace nnasm::test

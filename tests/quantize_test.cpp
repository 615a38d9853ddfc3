// QUANTIZE and DEQUANTIZE beyond the parity sweep: every JIT level and the reference (JIT off)
// against a naive loop written here, with the kernel that ran asserted; the halves, saturation,
// NaN, ±inf and a zero scale; each shape error; autodiff's refusal (no gradient); a listing with
// i8 and u8 params that round-trips and runs at every level.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "engine/autodiff.h"
#include "serialize/listing.h"
#include "tests/op_harness.h"
#include "tests/run_levels.h"

namespace nnasm::test {
namespace {

const double INF = std::numeric_limits<double>::infinity();
const double NaN = std::numeric_limits<double>::quiet_NaN();

double lo_of(DType t) { return t == DType::I8 ? -128 : 0; }
double hi_of(DType t) { return t == DType::I8 ? 127 : 255; }

// ONNX's QuantizeLinear in double: the f32 quotient, numpy's rint, the zero point, saturation;
// NaN gives the zero point (nnasm's rule).
double naive_quantize(double x, double scale, double zp, DType t) {
  const double q = std::nearbyint(static_cast<double>(static_cast<float>(x / scale)));
  if (std::isnan(q)) return zp;
  return std::min(hi_of(t), std::max(lo_of(t), q + zp));
}

struct AxisCase {
  Shape x;
  int64_t axis;
  bool per_axis;
};

std::vector<AxisCase> axis_cases() {
  std::vector<AxisCase> v;
  for (int64_t n : {1, 7, 15, 17, 33, 1031}) v.push_back({Shape{n}, 1, false});
  for (int64_t n : {1, 7, 15, 17, 33}) {
    v.push_back({Shape{n, 3}, 0, true});      // axis 0: rows of 3 per channel
    v.push_back({Shape{2, n, 5}, 1, true});   // axis 1
    v.push_back({Shape{3, n}, -1, true});     // the last axis
    v.push_back({Shape{3, 4, n}, -1, true});
  }
  v.push_back({Shape{3, 1031}, -1, true});
  v.push_back({Shape{1031, 3}, 0, true});
  return v;
}

TEST(Quantize, MatchesNaiveLoopAtEveryLevelAndWithJitOff) {
  std::mt19937 rng(17);
  for (const Level& lv : levels()) {
    for (DType t : {DType::I8, DType::U8}) {
      for (const AxisCase& c : axis_cases()) {
        const int64_t n = count_of(c.x);
        const int64_t a = c.axis < 0 ? c.axis + c.x.rank : c.axis;
        const Shape ss = c.per_axis ? Shape{c.x[static_cast<int>(a)]} : Shape();
        HostTensor scale = random_f32(ss, rng, 0.01, 0.05);
        std::uniform_int_distribution<int> zpd(static_cast<int>(lo_of(t)), static_cast<int>(hi_of(t)));
        HostTensor zp{TensorType{t, ss}, {}};
        for (size_t i = 0; i < scale.v.size(); ++i) zp.v.push_back(zpd(rng));
        const HostTensor x = random_f32(c.x, rng, -8, 8);
        HostTensor want{TensorType{t, c.x}, {}};
        for (int64_t i = 0; i < n; ++i) {
          const size_t ch = c.per_axis ? static_cast<size_t>(unravel(i, c.x)[static_cast<size_t>(a)]) : 0;
          want.v.push_back(naive_quantize(x.v[i], scale.v[ch], zp.v[ch], t));
        }
        SCOPED_TRACE(describe(Opcode::QUANTIZE, {x, scale, zp}, {}) + " axis " + std::to_string(c.axis) + " " +
                     (lv.isa.empty() ? "ref" : lv.isa));
        const OpOutput y = run_op(Opcode::QUANTIZE, {x, scale, zp}, {imm_i("axis", c.axis)}, false, lv.cfg);
        EXPECT_TRUE(matches(Expected{want, {}, {0, 0}}, y));
        expect_kernel(y, lv, "f32_quantize_" + std::string(dtype_name(t)));
      }
    }
  }
}

TEST(Dequantize, MatchesNaiveLoopAtEveryLevelAndWithJitOff) {
  std::mt19937 rng(23);
  for (const Level& lv : levels()) {
    for (DType t : {DType::I8, DType::U8, DType::I32}) {
      for (const AxisCase& c : axis_cases()) {
        const int64_t n = count_of(c.x);
        const int64_t a = c.axis < 0 ? c.axis + c.x.rank : c.axis;
        const Shape ss = c.per_axis ? Shape{c.x[static_cast<int>(a)]} : Shape();
        const HostTensor scale = random_f32(ss, rng, 0.01, 0.05);
        const int lo = t == DType::I32 ? -100000 : static_cast<int>(lo_of(t));
        const int hi = t == DType::I32 ? 100000 : static_cast<int>(hi_of(t));
        std::uniform_int_distribution<int> d(lo, hi);
        HostTensor zp{TensorType{t, ss}, {}}, x{TensorType{t, c.x}, {}};
        for (size_t i = 0; i < scale.v.size(); ++i) zp.v.push_back(d(rng));
        for (int64_t i = 0; i < n; ++i) x.v.push_back(d(rng));
        HostTensor want{TensorType{DType::F32, c.x}, {}};
        for (int64_t i = 0; i < n; ++i) {
          const size_t ch = c.per_axis ? static_cast<size_t>(unravel(i, c.x)[static_cast<size_t>(a)]) : 0;
          // |x − zp| < 2^24: the difference is exact in f32, and in double so is the product.
          want.v.push_back(static_cast<float>((x.v[i] - zp.v[ch]) * scale.v[ch]));
        }
        SCOPED_TRACE(describe(Opcode::DEQUANTIZE, {x, scale, zp}, {}) + " axis " + std::to_string(c.axis) + " " +
                     (lv.isa.empty() ? "ref" : lv.isa));
        const OpOutput y = run_op(Opcode::DEQUANTIZE, {x, scale, zp}, {imm_i("axis", c.axis)}, false, lv.cfg);
        EXPECT_TRUE(matches(Expected{want, {}, {0, 0}}, y));
        expect_kernel(y, lv, std::string(dtype_name(t)) + "_dequantize");
      }
    }
  }
}

// Values given to every level; scale, zero point and the expected outputs per element.
void expect_quantize(const std::vector<double>& x, double scale, double zp, DType t, const std::vector<double>& want) {
  const HostTensor hx = host_f32(x), hs = host(DType::F32, Shape(), {scale}), hz = host(t, Shape(), {zp});
  for (const Level& lv : levels()) {
    SCOPED_TRACE(lv.isa.empty() ? "ref" : lv.isa);
    EXPECT_TRUE(matches(Expected{host(t, hx.type.shape, want), {}, {0, 0}},
                        run_op(Opcode::QUANTIZE, {hx, hs, hz}, {}, false, lv.cfg)));
  }
}

TEST(Quantize, HalvesRoundToEven) {
  // x / scale = 2.5, −2.5, 3.5, −3.5, 0.5, −0.5, 1.5, 0.25, 0.75 with scale 2 (exact quotients).
  const std::vector<double> x = {5, -5, 7, -7, 1, -1, 3, 0.5, 1.5};
  expect_quantize(x, 2, 0, DType::I8, {2, -2, 4, -4, 0, 0, 2, 0, 1});
  expect_quantize(x, 2, 10, DType::U8, {12, 8, 14, 6, 10, 10, 12, 10, 11});
  // 17 of them, so the tie sits in a vector and in the tail at both widths.
  std::vector<double> xs, want;
  for (int i = 0; i < 17; ++i) {
    xs.push_back(i % 2 ? 2.5 : -3.5);
    want.push_back(i % 2 ? 2 : -4);
  }
  expect_quantize(xs, 1, 0, DType::I8, want);
}

TEST(Quantize, SaturatesAndNaNGivesTheZeroPoint) {
  const std::vector<double> x = {1e30, -1e30, INF, -INF, NaN, 127.4, 127.6, -128.5, -129, 300};
  expect_quantize(x, 1, 0, DType::I8, {127, -128, 127, -128, 0, 127, 127, -128, -128, 127});
  expect_quantize(x, 1, -3, DType::I8, {127, -128, 127, -128, -3, 124, 125, -128, -128, 127});
  expect_quantize(x, 1, 7, DType::U8, {255, 0, 255, 0, 7, 134, 135, 0, 0, 255});
  // A zero scale: ±x/0 = ±inf saturates, 0/0 = NaN gives the zero point.
  expect_quantize({1, -1, 0, NaN}, 0, 5, DType::U8, {255, 0, 5, 5});
  // A NaN scale: the zero point everywhere.
  expect_quantize({1, -1, 0}, NaN, -7, DType::I8, {-7, -7, -7});
}

TEST(Dequantize, ExtremesOfEachType) {
  const HostTensor s = host(DType::F32, Shape(), {0.5});
  for (const Level& lv : levels()) {
    SCOPED_TRACE(lv.isa.empty() ? "ref" : lv.isa);
    const HostTensor x8 = host(DType::I8, Shape{4}, {-128, 127, 0, -1});
    EXPECT_TRUE(matches(Expected{host(DType::F32, Shape{4}, {-127.5, 0, -63.5, -64}), {}, {0, 0}},
                        run_op(Opcode::DEQUANTIZE, {x8, s, host(DType::I8, Shape(), {127})}, {}, false, lv.cfg)));
    const HostTensor xu = host(DType::U8, Shape{3}, {0, 255, 128});
    EXPECT_TRUE(matches(Expected{host(DType::F32, Shape{3}, {-64, 63.5, 0}), {}, {0, 0}},
                        run_op(Opcode::DEQUANTIZE, {xu, s, host(DType::U8, Shape(), {128})}, {}, false, lv.cfg)));
  }
}

TEST(Quantize, ShapeErrorsNameTheOperand) {
  const TensorType x{DType::F32, Shape{2, 3}}, s{DType::F32, Shape()}, z8{DType::I8, Shape()};
  auto fails = [](Opcode op, std::vector<TensorType> in, std::vector<ImmArg> imms, std::vector<std::string> needles) {
    EXPECT_TRUE(append_fails(op, in, imms, needles));
  };
  fails(Opcode::QUANTIZE, {TensorType{DType::I32, Shape{2, 3}}, s, z8}, {}, {"QUANTIZE", "x", "must be f32"});
  fails(Opcode::QUANTIZE, {x, TensorType{DType::I32, Shape()}, z8}, {}, {"scale", "i32[]", "must be f32"});
  fails(Opcode::QUANTIZE, {x, s, TensorType{DType::F32, Shape()}}, {}, {"zero point", "must be i8 or u8"});
  fails(Opcode::QUANTIZE, {x, s, TensorType{DType::I32, Shape()}}, {}, {"zero point", "must be i8 or u8"});
  fails(Opcode::QUANTIZE, {x, TensorType{DType::F32, Shape{2, 3}}, z8}, {}, {"scale", "f32[2,3]", "1-D"});
  fails(Opcode::QUANTIZE, {x, TensorType{DType::F32, Shape{4}}, TensorType{DType::I8, Shape{4}}}, {},
        {"scale", "f32[4]", "must be [3]", "axis 1"});
  fails(Opcode::QUANTIZE, {x, TensorType{DType::F32, Shape{3}}, TensorType{DType::I8, Shape{2}}}, {},
        {"zero point", "i8[2]", "scale's shape [3]"});
  fails(Opcode::QUANTIZE, {x, TensorType{DType::F32, Shape{3}}, TensorType{DType::I8, Shape{3}}},
        {imm_i("axis", 2)}, {"axis 2", "out of range"});
  fails(Opcode::QUANTIZE, {x, TensorType{DType::F32, Shape{3}}, TensorType{DType::I8, Shape{3}}},
        {imm_i("axis", -3)}, {"axis -3", "out of range"});
  fails(Opcode::DEQUANTIZE, {x, s, TensorType{DType::F32, Shape()}}, {}, {"DEQUANTIZE", "x", "must be i8, u8 or i32"});
  fails(Opcode::DEQUANTIZE, {TensorType{DType::I8, Shape{2, 3}}, s, TensorType{DType::U8, Shape()}}, {},
        {"zero point", "u8[]", "x's dtype i8"});
  fails(Opcode::DEQUANTIZE, {TensorType{DType::U8, Shape{2, 3}}, TensorType{DType::F32, Shape{3}},
                             TensorType{DType::U8, Shape{3}}},
        {imm_i("axis", 0)}, {"DEQUANTIZE", "scale", "must be [2]", "axis 0"});
}

TEST(Quantize, PerTensorIgnoresTheAxisAndTypesFollowTheZeroPoint) {
  Context ctx;
  Program p(ctx);
  std::vector<TensorId> ids;
  const TensorType x{DType::F32, Shape{4}}, s{DType::F32, Shape{1}}, z{DType::U8, Shape{1}};
  ASSERT_TRUE(declare_inputs(p, {x, s, z}, &ids));
  std::vector<TensorId> q;
  ASSERT_TRUE(append_op(p, Opcode::QUANTIZE, ids, {imm_i("axis", 5)}, &q));
  EXPECT_EQ(p.desc(q[0]).type, (TensorType{DType::U8, Shape{4}}));
  std::vector<TensorId> d;
  ASSERT_TRUE(append_op(p, Opcode::DEQUANTIZE, {q[0], ids[1], ids[2]}, {}, &d));
  EXPECT_EQ(p.desc(d[0]).type, (TensorType{DType::F32, Shape{4}}));
}

TEST(Quantize, HasNoGradient) {
  Context ctx;
  Program p(ctx);
  std::vector<TensorId> ids;
  ASSERT_TRUE(declare_inputs(p, {TensorType{DType::F32, Shape{4}}, TensorType{DType::F32, Shape()},
                                 TensorType{DType::I8, Shape()}},
                             &ids));
  std::vector<TensorId> q, d;
  ASSERT_TRUE(append_op(p, Opcode::QUANTIZE, ids, {}, &q));
  ASSERT_TRUE(append_op(p, Opcode::DEQUANTIZE, {q[0], ids[1], ids[2]}, {}, &d));
  const Result<std::vector<TensorId>> g = grad(p, d[0], {ids[0]});
  ASSERT_FALSE(g);
  EXPECT_NE(g.status().message().find("DEQUANTIZE"), std::string::npos) << g.status().message();
  EXPECT_NE(g.status().message().find("no backward rule"), std::string::npos) << g.status().message();
  // Through the scale alone, too: QUANTIZE's output is piecewise constant and integer.
  const Result<std::vector<TensorId>> gq = grad(p, d[0], {ids[1]});
  EXPECT_FALSE(gq);
}

// A per-axis int8 weight dequantized and a per-tensor u8 activation round trip: the listing
// prints as it parses, and runs (optimized, i8/u8 params initialized from their values) to the
// values worked out by hand at every level.
constexpr char kQuantListing[] =
    "input  %x : f32[2,3]\n"
    "param  @s : f32[3] = [0.5, 0.25, 2]\n"
    "param  @w : i8[2,3] = [-128, 127, 0, 4, -4, 3]\n"
    "param  @z : i8[3] = [-3, 0, 5]\n"
    "param  @t : f32[] = [0.5]\n"
    "param  @u : u8[] = [128]\n"
    "output %y\n"
    "output %r\n"
    "\n"
    "forward:\n"
    "  DEQUANTIZE @w, @s, @z -> %wf  axis=-1\n"
    "  ADD        %x, %wf -> %y\n"
    "  QUANTIZE   %y, @t, @u -> %q  axis=0\n"
    "  DEQUANTIZE %q, @t, @u -> %r\n";

TEST(Quantize, ListingWithI8ParamsRoundTripsAndRuns) {
  Context ctx;
  Program p(ctx);
  Status st = program_parse(kQuantListing, "q.nnasm", &p);
  ASSERT_TRUE(st) << st.message();
  const std::string text = program_print(p);
  EXPECT_NE(text.find("QUANTIZE"), std::string::npos) << text;
  EXPECT_NE(text.find("i8[2,3] = [-128, 127, 0, 4, -4, 3]"), std::string::npos) << text;
  Context ctx2;
  Program q(ctx2);
  st = program_parse(text, "q.nnasm", &q);
  ASSERT_TRUE(st) << st.message() << "\n" << text;
  EXPECT_EQ(program_print(q), text);
  // w − z per column, times s: [[-62.5, 31.75, -10], [3.5, -1, -4]]; plus x = 1..6.
  const std::vector<float> y = {-61.5f, 33.75f, -7, 7.5f, 4, 2};
  // y / 0.5 rounded, + 128, saturated to 0…255, − 128, × 0.5: −61.5 → −123 → 5 → −61.5 stays;
  // 33.75 → 67.5 → 68 (even) → 34; 7.5 → 15; 4 → 8; 2 → 4; −7 → −14.
  const std::vector<float> r = {-61.5f, 34, -7, 7.5f, 4, 2};
  for (const Level& lv : levels()) {
    SCOPED_TRACE(lv.isa.empty() ? "ref" : lv.isa);
    Context c;
    c.set_jit(lv.cfg.jit);
    Program prog(c);
    ASSERT_TRUE(program_parse(text, "q.nnasm", &prog));
    Result<std::unique_ptr<Executor>> ex = Executor::prepare(prog);
    ASSERT_TRUE(ex) << ex.status().message();
    for (int i = 0; i < 6; ++i) c.at(prog.find("x")).f32()[i] = static_cast<float>(i + 1);
    ex.value()->run();
    for (size_t i = 0; i < 6; ++i) {
      EXPECT_EQ(c.at(prog.find("y")).f32()[i], y[i]) << i;
      EXPECT_EQ(c.at(prog.find("r")).f32()[i], r[i]) << i;
    }
  }
}

}  // namespace
}  // namespace nnasm::test

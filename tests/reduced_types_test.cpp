// The reduced-precision storage types bf16, i8 and u8 through the stack: the listing (values,
// rounding, range errors at file:line:col, initializers), the guard that keeps them away from
// every instruction not flagged OPF_REDUCED, storage sizes, model files, .npy, training's refusal
// and the C API's.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "api/nnasm.h"
#include "engine/autodiff.h"
#include "engine/executor.h"
#include "engine/init.h"
#include "engine/optimizer.h"
#include "isa/bf16.h"
#include "serialize/listing.h"
#include "serialize/model_file.h"
#include "serialize/model_frame.h"
#include "serialize/npy.h"
#include "tests/temp_dir_test.h"

namespace nnasm {
namespace {

// The error of parsing `text` as t.nnasm; "" if it parsed.
std::string parse_error(const std::string& text) {
  Context ctx;
  Program p(ctx);
  Status s = program_parse(text, "t.nnasm", &p);
  return s ? "" : s.message();
}

// "t.nnasm:LINE:COL: error: " for the first `needle` on line `line` (1-based) of `text`.
std::string at(const std::string& text, int line, const std::string& needle) {
  size_t start = 0;
  for (int l = 1; l < line; ++l) start = text.find('\n', start) + 1;
  return fmt::format("t.nnasm:{}:{}: error: ", line, text.find(needle, start) - start + 1);
}

// The stored bits of every element of `name`, as init_tensor gives them from the parsed values.
template <typename T>
std::vector<T> stored(const Program& p, const std::string& name) {
  Tensor t;
  t.desc = p.desc(p.find(name));
  EXPECT_TRUE(t.allocate());
  init_tensor(t, Context::of(p)->seed());
  std::vector<T> v(static_cast<size_t>(t.numel()));
  std::memcpy(v.data(), t.storage(), v.size() * sizeof(T));
  return v;
}

// Declares `name` in `p` with `role` and `type`; NO_TENSOR (and a test failure) if refused.
TensorId declare_as(Program& p, const char* name, Role role, TensorType type) {
  TensorDesc d;
  d.name = name;
  d.role = role;
  d.type = type;
  Result<TensorId> id = p.declare(d);
  EXPECT_TRUE(id) << id.status().message();
  return id ? *id : NO_TENSOR;
}

constexpr char kEdges[] =
    "param @h : bf16[11] = [1.5, -2, 1.00390625, 1.01171875, 1.0039062500001, -0, 9.18355e-41, 3.3895314e+38, "
    "nan, -inf, 0.1]\n"
    "param @a : i8[4] = [-128, 127, 0, -1]\n"
    "param @b : u8[3] = [0, 255, 7]\n";

TEST(ReducedTypes, ListingRoundTripsBitwiseWithEdgeValues) {
  Context ctx;
  Program p(ctx);
  ASSERT_TRUE(program_parse(kEdges, "t.nnasm", &p)) << parse_error(kEdges);
  const std::vector<uint16_t> h = stored<uint16_t>(p, "h");
  // Ties go to the even mantissa (1.00390625 is halfway between 1 and 1+2^-7; 1.01171875 between
  // 1+2^-7 and 1+2^-6); just above a tie rounds up; -0, the smallest subnormal, the largest finite
  // value, NaN and -inf keep their meaning.
  const std::vector<uint16_t> want = {0x3fc0, 0xc000, 0x3f80, 0x3f82, 0x3f81, 0x8000, 0x0001, 0x7f7f, 0x7fc0, 0xff80, 0x3dcd};
  EXPECT_EQ(h, want);
  EXPECT_EQ(stored<int8_t>(p, "a"), (std::vector<int8_t>{-128, 127, 0, -1}));
  EXPECT_EQ(stored<uint8_t>(p, "b"), (std::vector<uint8_t>{0, 255, 7}));

  const std::string text = program_print(p);
  EXPECT_NE(text.find("bf16[11]"), std::string::npos) << text;
  EXPECT_NE(text.find("i8[4] = [-128, 127, 0, -1]"), std::string::npos) << text;
  EXPECT_NE(text.find("u8[3] = [0, 255, 7]"), std::string::npos) << text;
  Context ctx2;
  Program q(ctx2);
  ASSERT_TRUE(program_parse(text, "t.nnasm", &q)) << text;
  EXPECT_EQ(program_print(q), text);
  EXPECT_EQ(stored<uint16_t>(q, "h"), want);
  EXPECT_EQ(stored<int8_t>(q, "a"), stored<int8_t>(p, "a"));
  EXPECT_EQ(stored<uint8_t>(q, "b"), stored<uint8_t>(p, "b"));
}

TEST(ReducedTypes, BfloatRoundingMatchesTheBitTrickOnManyFloats) {
  // The usual f32 → bf16 rounding (add 0x7fff plus the lowest kept bit, truncate) on finite
  // values; the direct double rounding must agree with it for every f32 input.
  for (uint32_t bits = 0; bits < 0x7f800000u; bits += 0x1235) {
    for (uint32_t b : {bits, bits | 0x8000u, bits | 0x7fffu, (bits & ~0xffffu) | 0x8000u, (bits & ~0xffffu) | 0x18000u}) {
      if ((b & 0x7fffffff) >= 0x7f800000) continue;
      float f;
      std::memcpy(&f, &b, 4);
      const uint32_t r = (b + 0x7fff + ((b >> 16) & 1)) >> 16;
      bool overflow;
      ASSERT_EQ(bf16_from_double(f, &overflow), r) << std::hex << b;
      ASSERT_EQ(overflow, (r & 0x7fff) == 0x7f80) << std::hex << b;
    }
  }
}

TEST(ReducedTypes, OutOfRangeValuesAreErrorsAtTheirLineAndColumn) {
  const std::string i8 = "param @a : i8[3] = [1, -129, 2]\n";
  EXPECT_EQ(parse_error(i8), at(i8, 1, "-129") + "an i8 value must be an integer in -128..127, got '-129'");
  const std::string i8hi = "param @a : f32[1] = [1]\nparam @c : i8[2] = [127,\n  128]\n";
  EXPECT_EQ(parse_error(i8hi), at(i8hi, 3, "128") + "an i8 value must be an integer in -128..127, got '128'");
  const std::string u8 = "param @b : u8[2] = [255, 256]\n";
  EXPECT_EQ(parse_error(u8), at(u8, 1, "256") + "an u8 value must be an integer in 0..255, got '256'");
  const std::string neg = "param @b : u8[1] = [-1]\n";
  EXPECT_EQ(parse_error(neg), at(neg, 1, "-1") + "an u8 value must be an integer in 0..255, got '-1'");
  const std::string frac = "param @b : i8[1] = [1.5]\n";
  EXPECT_EQ(parse_error(frac), at(frac, 1, "1.5") + "an i8 value must be an integer in -128..127, got '1.5'");
  const std::string nan = "const @b : i8[1] = [nan]\n";
  EXPECT_EQ(parse_error(nan).rfind(at(nan, 1, "nan"), 0), 0u) << parse_error(nan);
  const std::string big = "param @h : bf16[2] = [1, 3.4e38]\n";
  EXPECT_EQ(parse_error(big).rfind(at(big, 1, "3.4e38") + "number '3.4e38' is out of bf16 range", 0), 0u)
      << parse_error(big);
  const std::string huge = "param @h : bf16[1] = [1e300]\n";
  EXPECT_EQ(parse_error(huge).rfind(at(huge, 1, "1e300"), 0), 0u) << parse_error(huge);
  const std::string type = "param @h : f16[1] = [1]\n";
  EXPECT_EQ(parse_error(type), at(type, 1, "f16") + "unknown element type 'f16' (expected f32, i32, bf16, i8 or u8)");
}

TEST(ReducedTypes, InitializersForReducedTypes) {
  const std::string text =
      "param @z : i8[3] init=zeros\nparam @o : u8[2] init=ones\nparam @c : i8[2] init=constant value=-5\n"
      "param @hz : bf16[2] init=constant value=1.00390625\nparam @hn : bf16[64,8] init=he_normal\n"
      "param @fn : f32[64,8] init=he_normal\n";
  Context ctx(11);
  Program p(ctx);
  ASSERT_TRUE(program_parse(text, "t.nnasm", &p)) << parse_error(text);
  EXPECT_EQ(stored<int8_t>(p, "z"), (std::vector<int8_t>{0, 0, 0}));
  EXPECT_EQ(stored<uint8_t>(p, "o"), (std::vector<uint8_t>{1, 1}));
  EXPECT_EQ(stored<int8_t>(p, "c"), (std::vector<int8_t>{-5, -5}));
  EXPECT_EQ(stored<uint16_t>(p, "hz"), (std::vector<uint16_t>{0x3f80, 0x3f80}));
  // A random bf16 init draws what an f32 param of that name draws, then rounds it.
  Context ctx2(11);
  Program q(ctx2);
  ASSERT_TRUE(program_parse("param @hn : f32[64,8] init=he_normal\n", "t.nnasm", &q));
  const std::vector<float> f = stored<float>(q, "hn");
  const std::vector<uint16_t> h = stored<uint16_t>(p, "hn");
  ASSERT_EQ(f.size(), h.size());
  for (size_t i = 0; i < f.size(); ++i) ASSERT_EQ(h[i], bf16_from_f32(f[i])) << i;

  for (const char* kind : {"he_normal", "uniform low=0 high=1", "normal mean=0 std=1", "xavier_uniform"}) {
    const std::string bad = fmt::format("param @f : f32[2]\nparam @w : i8[4,4] init={}\n", kind);
    const std::string msg = parse_error(bad);
    EXPECT_EQ(msg.rfind(at(bad, 2, "@w") + "@w is i8[4,4]: init=", 0), 0u) << msg;
    EXPECT_NE(msg.find("quantize an f32 param instead"), std::string::npos) << msg;
  }
  EXPECT_NE(parse_error("param @w : u8[4] init=he_uniform\n").find("@w is u8[4]"), std::string::npos);
  EXPECT_NE(parse_error("param @w : i8[4] init=constant value=300\n").find("init value 300 is not an integer in -128..127"),
            std::string::npos)
      << parse_error("param @w : i8[4] init=constant value=300\n");
  EXPECT_NE(parse_error("param @w : u8[4] init=constant value=0.5\n").find("not an integer in 0..255"), std::string::npos);
}

TEST(ReducedTypes, Bf16InputsAndOutputsAreRefused) {
  const std::string in = "input %x : bf16[4]\n";
  EXPECT_EQ(parse_error(in), at(in, 1, "%x") + "%x is bf16[4]: model inputs and outputs are f32, i32, i8 or u8 "
                                              "(declare it f32 and QUANTIZE it inside the program)");
  const std::string out = "param @w : bf16[4] init=zeros\noutput @w\n";
  EXPECT_EQ(parse_error(out).rfind(at(out, 2, "@w") + "output @w is", 0), 0u) << parse_error(out);
  const std::string typed = "output %y : bf16[4]\n";
  EXPECT_NE(parse_error(typed).find("model inputs and outputs are f32, i32, i8 or u8"), std::string::npos)
      << parse_error(typed);
  // The same through the API, and Program::finish for an output marked after it was typed.
  Context ctx;
  Program p(ctx);
  p.mark_output(declare_as(p, "w", Role::PARAM, {DType::BF16, Shape{4}}));
  const Status s = p.finish();
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("output @w is bf16[4]: model inputs and outputs are f32, i32, i8 or u8"), std::string::npos)
      << s.message();
}

// i8 and u8 are whole bytes a caller can hand over: inputs and outputs may have them.
TEST(ReducedTypes, EightBitInputsAndOutputsAreAccepted) {
  for (const char* t : {"i8", "u8"}) {
    Context ctx;
    Program p(ctx);
    const std::string text = fmt::format("input %x : {0}[4]\nparam @w : {0}[4] init=zeros\noutput @w\n", t);
    const Status s = program_parse(text, "t.nnasm", &p);
    EXPECT_TRUE(s) << s.message();
    EXPECT_TRUE(p.finish()) << t;
  }
}

// Declares x0.. of `types` as params (consts can be folded; params never are) and appends `op`.
Status append_with(Opcode op, const std::vector<TensorType>& types, std::string* msg) {
  Context ctx;
  Program p(ctx);
  std::vector<TensorId> in;
  for (size_t k = 0; k < types.size(); ++k) in.push_back(declare_as(p, fmt::format("x{}", k).c_str(), Role::PARAM, types[k]));
  const OpInfo& info = op_info(op);
  const size_t n_out = info.n_out < 0 ? in.size() : std::min<size_t>(info.n_out, in.size());
  // An in-place op's outputs are its inputs; any other gets new temporaries.
  const Status s = info.flags & OPF_INPLACE
                       ? p.append(make_instruction(op, in, std::vector<TensorId>(in.begin(), in.begin() + n_out)))
                       : p.append_new(make_instruction(op, in, {})).status();
  if (msg) *msg = s ? "" : s.message();
  return s;
}

TEST(ReducedTypes, EveryInstructionWithoutTheFlagRefusesReducedOperands) {
  int checked = 0;
  for (const OpInfo& info : all_ops()) {
    if (info.flags & OPF_REDUCED) continue;
    const int n_in = info.n_in < 0 ? 2 : info.n_in;
    if (n_in == 0) continue;
    for (DType dt : {DType::BF16, DType::I8, DType::U8}) {
      // Every input reduced, then only the last one (the others f32).
      for (int only_last = 0; only_last < 2; ++only_last) {
        std::vector<TensorType> types(n_in, TensorType{only_last ? DType::F32 : dt, Shape{4}});
        types.back().dtype = dt;
        std::string msg;
        const Status s = append_with(info.op, types, &msg);
        ASSERT_FALSE(s) << info.mnemonic << " accepted " << dtype_name(dt);
        const std::string want = fmt::format("{}: input {} (@x{} : {}[4]) is {}; only instructions that take "
                                             "reduced-precision operands",
                                             info.mnemonic, only_last ? n_in : 1, only_last ? n_in - 1 : 0,
                                             dtype_name(dt), dtype_name(dt));
        EXPECT_EQ(msg.rfind(want, 0), 0u) << msg;
        EXPECT_NE(msg.find("accept bf16, i8 and u8"), std::string::npos) << msg;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(ReducedTypes, NamedFamiliesAreRefusedWithTheirImmediates) {
  Context ctx;
  Program p(ctx);
  const std::string text =
      "param @q : i8[2,4] init=zeros\nparam @f : f32[2,4] init=ones\nparam @i : i32[3] init=zeros\n"
      "param @m : f32[4,3] init=ones\nparam @h : bf16[4,3] init=zeros\n";
  ASSERT_TRUE(program_parse(text, "t.nnasm", &p));
  struct Case {
    const char* line;
    const char* want;
  } cases[] = {
      {"ADD @f, @q -> %y", "ADD: input 2 (@q : i8[2,4]) is i8"},
      {"COPY @q -> %y", "COPY: input 1 (@q : i8[2,4]) is i8"},
      {"RESHAPE @q -> %y shape=[8]", "RESHAPE: input 1 (@q : i8[2,4]) is i8"},
      {"GATHER @q, @i -> %y axis=0", "GATHER: input 1 (@q : i8[2,4]) is i8"},
      {"CAST @q -> %y to=f32", "CAST: input 1 (@q : i8[2,4]) is i8"},
      {"MATMUL @f, @h -> %y", "MATMUL: input 2 (@h : bf16[4,3]) is bf16"},
  };
  for (const Case& c : cases) {
    const std::string listing = text + "\nforward:\n  " + c.line + "\n";
    const std::string msg = parse_error(listing);
    EXPECT_EQ(msg.rfind(at(listing, 8, c.line) + c.want, 0), 0u) << msg;
  }
  // An output declared reduced is refused too, before shape inference runs.
  Context ctx2;
  Program q(ctx2);
  const TensorId xi = declare_as(q, "x", Role::INPUT, {DType::F32, Shape{4}});
  const TensorId yi = declare_as(q, "y", Role::TEMPORARY, {DType::U8, Shape{4}});
  const Status s = q.append(make_instruction(Opcode::COPY, {xi}, {yi}));
  ASSERT_FALSE(s);
  EXPECT_EQ(s.message().rfind("COPY: output 1 (%y : u8[4]) is u8", 0), 0u) << s.message();
}

TEST(ReducedTypes, StorageIsSizedByType) {
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(storage_bytes({DType::I8, Shape{100}}), 128u);
  EXPECT_EQ(storage_bytes({DType::U8, Shape{64}}), 64u);
  EXPECT_EQ(storage_bytes({DType::BF16, Shape{100}}), 256u);
  EXPECT_EQ(storage_bytes({DType::F32, Shape{100}}), 448u);
  // A prepared program allocates each param at its own size; the f32 part runs as before.
  Context ctx;
  Program p(ctx);
  const std::string text =
      "input %x : f32[4]\nparam @q : i8[1000] init=ones\nparam @h : bf16[3] = [1, 2, 3]\nparam @b : f32[4] init=ones\n"
      "output %y\n\nforward:\n  ADD %x, @b -> %y\n";
  ASSERT_TRUE(program_parse(text, "t.nnasm", &p)) << parse_error(text);
  auto ex = Executor::prepare(p);
  ASSERT_TRUE(ex) << ex.status().message();
  EXPECT_EQ(ctx.at(p.find("q")).data.bytes(), 1000u);
  EXPECT_EQ(ctx.at(p.find("h")).data.bytes(), 6u);
  const int8_t* q = static_cast<const int8_t*>(ctx.at(p.find("q")).storage());
  EXPECT_EQ(q[0] + q[999], 2);
  // The whole-program bound counts each tensor at its size: 1000 i8 values fit in 1024 bytes.
  EXPECT_TRUE(check_program_bytes(p, 1024 + 64 + 64 + 64 + 64));
  EXPECT_FALSE(check_program_bytes(p, 1000));
  for (int i = 0; i < 4; ++i) (*ex)->tensor("x")->f32()[i] = float(i);
  (*ex)->run();
  EXPECT_EQ((*ex)->tensor("y")->f32()[3], 4.f);
}

// A program with params of every type, with values that are not what initialization would give.
std::string mixed_model(Context& ctx, Program& p) {
  const std::string text =
      "input %x : f32[4]\nparam @b : f32[4] init=ones\nparam @h : bf16[5] init=normal mean=0 std=1\n"
      "param @q : i8[7] init=zeros\nparam @u : u8[3] init=ones\nstate @n : i32[2] init=zeros\n"
      "const @k : i8[2] = [-3, 4]\nconst @z : bf16[2] init=zeros\noutput %y\n\nforward:\n  ADD %x, @b -> %y\n";
  EXPECT_TRUE(program_parse(text, "t.nnasm", &p)) << parse_error(text);
  auto ex = Executor::prepare(p);
  EXPECT_TRUE(ex) << ex.status().message();
  int8_t* q = static_cast<int8_t*>(ctx.at(p.find("q")).storage());
  for (int i = 0; i < 7; ++i) q[i] = static_cast<int8_t>(-128 + 37 * i);
  uint8_t* u = static_cast<uint8_t*>(ctx.at(p.find("u")).storage());
  u[0] = 0, u[1] = 255, u[2] = 128;
  uint16_t* h = static_cast<uint16_t*>(ctx.at(p.find("h")).storage());
  h[4] = 0x0001, h[3] = 0xff7f;
  return model_encode(p);
}

TEST(ReducedTypes, ModelFilesRoundTripBitwiseWithMixedTypes) {
  Context ctx(5);
  Program p(ctx);
  const std::string bytes = mixed_model(ctx, p);
  Context ctx2;
  Program q(ctx2);
  const Status s = model_decode(bytes, "m.nnm", &q);
  ASSERT_TRUE(s) << s.message();
  for (const char* name : {"b", "h", "q", "u", "n", "z"}) {
    Tensor& a = ctx.at(p.find(name));
    if (!a.allocated()) {  // what prepare left out (unused), the file stores as initialized
      ASSERT_TRUE(a.allocate());
      init_tensor(a, ctx.seed());
    }
    const Tensor& b = ctx2.at(q.find(name));
    ASSERT_EQ(a.desc.type, b.desc.type) << name;
    ASSERT_TRUE(b.allocated()) << name;
    EXPECT_EQ(std::memcmp(a.storage(), b.storage(), size_t(a.numel()) * dtype_size(a.desc.type.dtype)), 0) << name;
  }
  EXPECT_EQ(model_encode(q), bytes);
}

TEST(ReducedTypes, DamagedModelFilesAreRefusedWithTheByteOffset) {
  Context ctx(5);
  Program p(ctx);
  const std::string bytes = mixed_model(ctx, p);
  for (size_t n = 0; n < bytes.size(); n += 7) {
    Context c;
    Program q(c);
    ASSERT_FALSE(model_decode(bytes.substr(0, n), "m.nnm", &q)) << n;
  }
  // Each record's dtype byte (found by its name: the records follow the listing's order), forged
  // with valid checksums: an unknown code, then a known code the listing does not declare.
  const uint64_t data = [&] {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t(uint8_t(bytes[64 + 32 + 8 + i])) << (8 * i);
    return v;
  }();
  const size_t rec = bytes.find(std::string("\x01\x00\x00\x00\x00\x00\x00\x00q", 9), data);
  ASSERT_NE(rec, std::string::npos);
  const size_t dtype_at = rec + 9 + 1;
  ASSERT_EQ(bytes[dtype_at], 3);  // i8
  for (uint8_t forged : {uint8_t(5), uint8_t(200), uint8_t(2)}) {
    std::string bad = bytes;
    bad[dtype_at] = static_cast<char>(forged);
    reseal_model_image(&bad);
    Context c;
    Program q(c);
    const Status s = model_decode(bad, "m.nnm", &q);
    ASSERT_FALSE(s);
    const std::string want = forged == 2 ? "tensor 2 ('q'): type bf16[7], the listing declares i8[7]"
                                         : fmt::format("tensor 2 ('q'): dtype byte {} is no element type", forged);
    EXPECT_EQ(s.message().rfind(fmt::format("m.nnm: byte {}: error: section DATA", dtype_at), 0), 0u) << s.message();
    EXPECT_NE(s.message().find(want), std::string::npos) << s.message();
  }
}

class ReducedNpy : public TempDirTest {};

TEST_F(ReducedNpy, IntegerTypesRoundTripAndBfloatWritesItsValuesAsF32) {
  const std::vector<int8_t> a = {-128, -1, 0, 1, 127, 5};
  ASSERT_TRUE(npy_write(path("a.npy"), {DType::I8, Shape{2, 3}}, a.data()));
  EXPECT_NE(get("a.npy").find("'descr': '|i1'"), std::string::npos);
  NpyArray r;
  ASSERT_TRUE(npy_read(path("a.npy"), &r));
  EXPECT_EQ(r.type, (TensorType{DType::I8, Shape{2, 3}}));
  EXPECT_EQ(std::memcmp(r.bytes.data(), a.data(), a.size()), 0);
  const std::string file = get("a.npy");
  NpyArray m;
  ASSERT_TRUE(npy_read_bytes(file, "a.npy", &m));
  EXPECT_EQ(m.bytes, r.bytes);
  ASSERT_FALSE(npy_read_bytes(file.substr(0, file.size() - 1), "a.npy", &m));

  const std::vector<uint8_t> u = {0, 255, 128};
  ASSERT_TRUE(npy_write(path("u.npy"), {DType::U8, Shape{3}}, u.data()));
  ASSERT_TRUE(npy_read(path("u.npy"), &r));
  EXPECT_EQ(r.type, (TensorType{DType::U8, Shape{3}}));
  EXPECT_EQ(r.bytes, u);
  EXPECT_EQ(r.descr, "|u1");

  const std::vector<uint16_t> h = {0x3fc0, 0x8000, 0x0001, 0x7f7f};
  ASSERT_TRUE(npy_write(path("h.npy"), {DType::BF16, Shape{4}}, h.data()));
  ASSERT_TRUE(npy_read(path("h.npy"), &r));
  EXPECT_EQ(r.type, (TensorType{DType::F32, Shape{4}}));
  for (size_t i = 0; i < h.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &r.f32[i], 4);
    EXPECT_EQ(bits, uint32_t(h[i]) << 16) << i;
  }
}

// A loss that depends on the f32 param @b, not on the i8 param @q.
constexpr char kTrainable[] =
    "input %x : f32[4]\ninput %t : f32[4]\nparam @b : f32[4] init=ones\nparam @q : i8[4] init=zeros\n"
    "output %l\n\nforward:\n  ADD %x, @b -> %y\n  MSE %y, %t -> %l\n";

TEST(ReducedTypes, TrainingRefusesReducedParams) {
  Context ctx;
  Program p(ctx);
  ASSERT_TRUE(program_parse(kTrainable, "t.nnasm", &p)) << parse_error(kTrainable);
  // grad with respect to it, and an optimizer handed its gradient, say why.
  Result<std::vector<TensorId>> g = grad(p, p.find("l"), {p.find("q")});
  ASSERT_FALSE(g);
  EXPECT_EQ(g.status().message(),
            "param @q is i8: training updates f32 params only; train in f32 and quantize the inference model");
  Status s = add_optimizer(p, sgd(0.1), {{p.find("q"), p.find("b")}});
  ASSERT_FALSE(s);
  EXPECT_EQ(s.message().rfind("add_optimizer: param @q is i8: training updates f32 params only", 0), 0u) << s.message();
  // A reduced param the loss does not depend on is left alone: the f32 one trains.
  s = make_trainable(p, p.find("l"), sgd(0.1));
  ASSERT_TRUE(s) << s.message();
  EXPECT_NE(p.find("b.grad"), NO_TENSOR);
  EXPECT_EQ(p.find("q.grad"), NO_TENSOR);
  // A training listing that updates a reduced param in place is refused by the guard.
  const std::string upd = "param @q : i8[4] init=zeros\nparam @g : f32[4] init=zeros\nstate @v : f32[4] init=zeros\n"
                          "state @lr : f32[] init=zeros\n\nupdate:\n  SGD @q, @g, @v, @lr -> @q, @v\n";
  EXPECT_NE(parse_error(upd).find("SGD: input 1 (@q : i8[4]) is i8"), std::string::npos) << parse_error(upd);
}

TEST(ReducedTypes, TheCApiRefusesBf16InputsAndOutputs) {
  const char* listings[] = {
      "input %x : bf16[4]\nparam @b : f32[4] init=ones\noutput %y\n\nforward:\n  ADD %x, @b -> %y\n",
      "input %x : f32[4]\nparam @w : bf16[4] init=zeros\noutput @w\noutput %y\n\nforward:\n  COPY %x -> %y\n",
  };
  for (const char* l : listings) {
    nnasm_model* m = nullptr;
    EXPECT_NE(nnasm_model_load_memory(l, std::strlen(l), nullptr, &m), NNASM_OK);
    EXPECT_EQ(m, nullptr);
    EXPECT_NE(std::string(nnasm_last_error()).find("model inputs and outputs are f32, i32, i8 or u8"), std::string::npos)
        << nnasm_last_error();
  }
  static_assert(NNASM_BF16 == int(DType::BF16) && NNASM_I8 == int(DType::I8) && NNASM_U8 == int(DType::U8),
                "the C API's dtype codes are the engine's");
}

// A u8 input fed as bytes, dequantized and quantized again to an i8 and a u8 output read as bytes.
TEST(ReducedTypes, TheCApiFeedsAndReadsEightBitTensors) {
  const char* l = "input %x : u8[4]\nconst @s : f32[] = [0.5]\nconst @z : u8[] = [128]\nconst @zi : i8[] = [-3]\n"
                  "output %yi\noutput %yu\n\nforward:\n  DEQUANTIZE %x, @s, @z -> %f\n"
                  "  QUANTIZE %f, @s, @zi -> %yi\n  QUANTIZE %f, @s, @z -> %yu\n";
  nnasm_model* m = nullptr;
  ASSERT_EQ(nnasm_model_load_memory(l, std::strlen(l), nullptr, &m), NNASM_OK) << nnasm_last_error();
  nnasm_tensor_info info;
  info.struct_size = sizeof info;
  ASSERT_EQ(nnasm_model_input_info(m, 0, &info), NNASM_OK);
  EXPECT_EQ(info.dtype, NNASM_U8);
  EXPECT_EQ(info.bytes, 4u);
  ASSERT_EQ(nnasm_model_output_info(m, 0, &info), NNASM_OK);
  EXPECT_EQ(info.dtype, NNASM_I8);
  EXPECT_EQ(info.bytes, 4u);
  ASSERT_EQ(nnasm_model_output_info(m, 1, &info), NNASM_OK);
  EXPECT_EQ(info.dtype, NNASM_U8);
  nnasm_instance* in = nullptr;
  ASSERT_EQ(nnasm_instance_create(m, &in), NNASM_OK) << nnasm_last_error();
  const uint8_t x[4] = {0, 100, 128, 255};
  // A buffer of f32's size is refused: the size is the u8 tensor's, one byte an element.
  float wrong[4] = {};
  EXPECT_EQ(nnasm_instance_set_input(in, "x", wrong, sizeof wrong), NNASM_ERR_SIZE_MISMATCH);
  ASSERT_EQ(nnasm_instance_set_input(in, "x", x, sizeof x), NNASM_OK) << nnasm_last_error();
  ASSERT_EQ(nnasm_instance_run(in), NNASM_OK) << nnasm_last_error();
  int8_t yi[4];
  uint8_t yu[4];
  ASSERT_EQ(nnasm_instance_get_output(in, "yi", yi, sizeof yi), NNASM_OK) << nnasm_last_error();
  ASSERT_EQ(nnasm_instance_get_output(in, "yu", yu, sizeof yu), NNASM_OK) << nnasm_last_error();
  // f = (x − 128)·0.5 = −64, −14, 0, 63.5; yi = sat(rne(f / 0.5) − 3), yu = sat(rne(f / 0.5) + 128) = x.
  const int want_i[4] = {-128, -31, -3, 124};
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(yi[k], want_i[k]) << k;
    EXPECT_EQ(yu[k], x[k]) << k;
  }
  nnasm_instance_free(in);
  nnasm_model_free(m);
}

TEST(ReducedTypes, BadListingsNeverCrash) {
  // Every prefix of a listing with reduced types parses or fails with a message.
  const std::string text = std::string(kEdges) + "input %x : f32[4]\nparam @z : i8[4] init=constant value=-7\n"
                                                 "output %y\n\nforward:\n  ADD %x, @z -> %y\n";
  for (size_t n = 0; n <= text.size(); ++n) {
    Context ctx;
    Program p(ctx);
    const Status s = program_parse(text.substr(0, n), "t.nnasm", &p);
    EXPECT_TRUE(s || !s.message().empty()) << n;
  }
}

}  // namespace
}  // namespace nnasm

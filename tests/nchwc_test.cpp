// The blocked channel layout's ops beyond the parity and gradient tables: TO_NCHWC and TO_NCHW at
// every level (the reference and each JIT level the machine has) against tests/nchwc_naive.h,
// bit for bit (NaN payloads, signed zeros and denormals included), with a guard band after the
// output and the kernel that ran asserted by name; large tensors split into parallel parts whose
// boundaries fall inside an image; every shape error of the three ops; a listing using all three
// round-trips and runs; autodiff's backward code for the reorders and its refusal for the packed
// weights.
#include <cstring>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engine/autodiff.h"
#include "serialize/listing.h"
#include "shell/shell.h"
#include "tests/jit_levels.h"
#include "tests/nchwc_naive.h"
#include "tests/op_harness.h"

namespace nnasm::test {
namespace {

// Random floats, with NaNs of several payloads and signs, ±0, denormals and ±inf among them.
std::vector<float> values(int64_t n, std::mt19937& rng) {
  const uint32_t specials[] = {0x7fc00001u, 0xffc00002u, 0x7f800005u, 0x80000000u, 0x00000000u,
                               0x00000001u, 0x807fffffu, 0x7f800000u, 0xff800000u};
  std::uniform_int_distribution<int> pick(0, 19), which(0, 8);
  std::uniform_real_distribution<float> u(-2, 2);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) {
    v = u(rng);
    if (pick(rng) == 0) std::memcpy(&v, &specials[which(rng)], 4);
  }
  return x;
}

struct Ran {
  std::vector<float> y;
  std::string kernel;
  int parts = 0;
  std::string problems;  // the guard band, or the input overwritten
};

// Runs `op` once on x at `isa` with `threads` threads, the output's storage (padding included)
// filled with GUARD_WORD first.
Ran run_reorder(Opcode op, const TensorType& xt, const std::vector<float>& x, const std::vector<ImmArg>& imms, Isa isa,
                int threads = 1) {
  Ran r;
  Context ctx;
  ctx.set_jit(JitConfig{true, isa});
  ctx.set_threads(threads);
  ctx.set_flush_denormals(false);
  Program p(ctx);
  std::vector<TensorId> ids;
  TensorId out = NO_TENSOR;
  const Status st = build_op(p, op, {xt}, imms, &ids, &out);
  EXPECT_TRUE(st) << st.message();
  if (!st) return r;
  p.mark_output(out);
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(p);
  EXPECT_TRUE(ex) << ex.status().message();
  if (!ex) return r;
  Tensor& xin = ctx.at(ids[0]);
  std::memcpy(xin.f32(), x.data(), x.size() * sizeof(float));
  Tensor& y = ctx.at(out);
  uint32_t* yw = static_cast<uint32_t*>(y.data.data());
  const size_t n = static_cast<size_t>(y.numel()), words = padded_bytes(y.numel()) / 4;
  for (size_t i = 0; i < words; ++i) yw[i] = GUARD_WORD;
  ex.value()->run();
  r.y.assign(y.f32(), y.f32() + n);
  for (size_t i = n; i < words; ++i)
    if (yw[i] != GUARD_WORD) {
      r.problems += fmt::format("guard band overwritten {} words past the {} elements\n", i - n, n);
      break;
    }
  if (std::memcmp(xin.f32(), x.data(), x.size() * sizeof(float)) != 0) r.problems += "the input was modified\n";
  r.kernel = ex.value()->kernel_name(0);
  r.parts = ex.value()->parts(0);
  return r;
}

// The first element whose bits differ, or "".
std::string first_difference(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return fmt::format("{} elements, expected {}", got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], 4) != 0) return fmt::format("element {}: {} instead of {}", i, got[i], want[i]);
  return "";
}

// The kernel each level runs: zmm code for b = 16 at AVX-512, ymm code for the rest.
std::string kernel_for(bool to_blocked, int64_t b, Isa isa) {
  if (isa == Isa::REF) return "ref";
  const char* code = isa == Isa::AVX512 && b == 16 ? "avx512" : "avx2";
  return to_blocked ? fmt::format("f32_nchw_to_nchwc{}__{}", b, code) : fmt::format("f32_nchwc{}_to_nchw__{}", b, code);
}

std::vector<Isa> levels() {
  std::vector<Isa> v{Isa::REF};
  for (Isa i : jit_levels()) v.push_back(i);
  return v;
}

struct ReorderCase {
  int64_t n, c, h, w, b;
};

// Both reorders of one case at one level: TO_NCHWC from x, TO_NCHW from a blocked tensor whose
// padding lanes hold values too.
void check_both(const ReorderCase& k, Isa isa, int threads, std::mt19937& rng, int* max_parts = nullptr) {
  SCOPED_TRACE(fmt::format("{} N={} C={} {}x{} b={} threads={}", isa_name(isa), k.n, k.c, k.h, k.w, k.b, threads));
  const int64_t hw = k.h * k.w, cb = nchwc_naive_blocks(k.c, k.b);
  const std::vector<float> x = values(k.n * k.c * hw, rng);
  const Ran to = run_reorder(Opcode::TO_NCHWC, TensorType{DType::F32, Shape{k.n, k.c, k.h, k.w}}, x,
                             {imm_i("block", k.b)}, isa, threads);
  EXPECT_EQ(to.kernel, kernel_for(true, k.b, isa));
  EXPECT_EQ(to.problems, "");
  EXPECT_EQ(first_difference(to.y, naive_to_nchwc(x, k.n, k.c, hw, k.b)), "");

  const std::vector<float> xb = values(k.n * cb * hw * k.b, rng);
  const Ran back = run_reorder(Opcode::TO_NCHW, TensorType{DType::F32, Shape{k.n, cb, k.h, k.w, k.b}}, xb,
                               {imm_i("channels", k.c)}, isa, threads);
  EXPECT_EQ(back.kernel, kernel_for(false, k.b, isa));
  EXPECT_EQ(back.problems, "");
  EXPECT_EQ(first_difference(back.y, naive_to_nchw(xb, k.n, k.c, hw, k.b)), "");
  if (max_parts) *max_parts = std::max({*max_parts, to.parts, back.parts});
}

// Channels 1, b − 1, b, b + 1 of both blocks and 2b + 3 of b = 16; maps of one pixel, of fewer
// than a vector, of a vector and a tail, and of several vectors and a tail; one and two images.
TEST(NchwcReorder, EveryLevelMatchesTheLayoutBitwise) {
  std::mt19937 rng(5);
  for (Isa isa : levels())
    for (int64_t b : {8, 16})
      for (int64_t c : {1, 7, 8, 9, 15, 16, 17, 35})
        for (const auto& [h, w] : {std::pair<int64_t, int64_t>{1, 1}, {3, 5}, {7, 7}, {13, 11}})
          for (int64_t n : {1, 2}) check_both(ReorderCase{n, c, h, w, b}, isa, 1, rng);
}

// Large enough to split into one part a thread, and each part writes what the whole would. The
// parts' ranges of (n, channel block) pairs end at images (3 images of 3 blocks of 16, the last
// partial, over 3 threads) or inside them (over 2 threads; 5 blocks of 8 an image, over 2 or 3).
TEST(NchwcReorder, LargeTensorsSplitIntoPartsBitwise) {
  std::mt19937 rng(6);
  for (Isa isa : jit_levels())
    for (int64_t b : {8, 16})
      for (int threads : {2, 3}) {
        int parts = 0;
        check_both(ReorderCase{3, 35, 56, 57, b}, isa, threads, rng, &parts);
        EXPECT_EQ(parts, threads);
      }
}

// ---------------------------------------------------------------------------------------------
// Shape errors

TensorType f32(std::initializer_list<int64_t> d) { return TensorType{DType::F32, Shape(d)}; }

TEST(NchwcShapeErrors, ToNchwc) {
  const Opcode op = Opcode::TO_NCHWC;
  EXPECT_TRUE(append_fails(op, {f32({3, 8, 8})}, {}, {"TO_NCHWC: input operand 1 (f32[3,8,8]) must be NCHW (rank 4)"}));
  EXPECT_TRUE(append_fails(op, {f32({1, 3, 8, 8, 16})}, {}, {"TO_NCHWC", "(f32[1,3,8,8,16])", "rank 4"}));
  for (int64_t b : {0, 4, 12, 32, -16})
    EXPECT_TRUE(append_fails(op, {f32({1, 3, 8, 8})}, {imm_i("block", b)},
                             {fmt::format("TO_NCHWC: block must be 8 or 16 (a vector of floats), got {}", b)}));
  EXPECT_TRUE(append_fails(op, {TensorType{DType::I32, Shape{1, 3, 8, 8}}}, {}, {"TO_NCHWC", "i32[1,3,8,8]", "f32"}));
  Context ctx;
  Program p(ctx);
  std::vector<TensorId> ids;
  TensorId out = NO_TENSOR;
  ASSERT_TRUE(build_op(p, op, {f32({2, 17, 3, 5})}, {imm_i("block", 8)}, &ids, &out));
  EXPECT_EQ(p.desc(out).type, f32({2, 3, 3, 5, 8}));
}

TEST(NchwcShapeErrors, ToNchw) {
  const Opcode op = Opcode::TO_NCHW;
  const std::vector<ImmArg> c3 = {imm_i("channels", 3)};
  EXPECT_TRUE(append_fails(op, {f32({1, 3, 8, 8})}, c3,
                           {"TO_NCHW: input operand 1 (f32[1,3,8,8]) must be blocked NCHWc (rank 5, last dim 8 or 16)"}));
  EXPECT_TRUE(append_fails(op, {f32({1, 1, 8, 8, 4})}, c3, {"TO_NCHW", "(f32[1,1,8,8,4])", "last dim 8 or 16"}));
  EXPECT_TRUE(append_fails(op, {f32({1, 1, 8, 8, 32})}, c3, {"TO_NCHW", "(f32[1,1,8,8,32])", "last dim 8 or 16"}));
  for (int64_t c : {17, 8, 0, -1})
    EXPECT_TRUE(append_fails(op, {f32({1, 2, 3, 3, 8})}, {imm_i("channels", c)},
                             {fmt::format("TO_NCHW: channels={} does not fit input operand 1 (f32[1,2,3,3,8]): its 2 "
                                          "blocks of 8 hold 9 to 16 channels",
                                          c)}));
  EXPECT_TRUE(append_fails(op, {f32({1, 2, 3, 3, 8})}, {}, {"TO_NCHW", "channels"}));  // required
  EXPECT_TRUE(append_fails(op, {TensorType{DType::I32, Shape{1, 1, 2, 2, 8}}}, c3, {"TO_NCHW", "i32[1,1,2,2,8]", "f32"}));
  for (int64_t c : {9, 16}) {
    Context ctx;
    Program p(ctx);
    std::vector<TensorId> ids;
    TensorId out = NO_TENSOR;
    ASSERT_TRUE(build_op(p, op, {f32({2, 2, 3, 5, 8})}, {imm_i("channels", c)}, &ids, &out));
    EXPECT_EQ(p.desc(out).type, f32({2, c, 3, 5}));
  }
}

TEST(NchwcShapeErrors, ConvWeightsNchwc) {
  const Opcode op = Opcode::CONV_WEIGHTS_NCHWC;
  EXPECT_TRUE(append_fails(op, {f32({4, 3, 3})}, {},
                           {"CONV_WEIGHTS_NCHWC: weights operand 1 (f32[4,3,3]) must be [O, C, kh, kw] (rank 4)"}));
  for (int64_t b : {1, 12, 64})
    EXPECT_TRUE(append_fails(op, {f32({4, 3, 3, 3})}, {imm_i("block", b)},
                             {fmt::format("CONV_WEIGHTS_NCHWC: block must be 8 or 16 (a vector of floats), got {}", b)}));
  EXPECT_TRUE(append_fails(op, {f32({4, 3, 3, 3})}, {imm_b("depthwise", true)},
                           {"CONV_WEIGHTS_NCHWC: depthwise=1 needs weights [C, 1, kh, kw], got operand 1 (f32[4,3,3,3])"}));
  EXPECT_TRUE(append_fails(op, {TensorType{DType::I32, Shape{4, 3, 3, 3}}}, {}, {"CONV_WEIGHTS_NCHWC", "i32", "f32"}));
  struct Ok {
    TensorType w;
    std::vector<ImmArg> imms;
    TensorType y;
  };
  for (const Ok& k : {Ok{f32({35, 33, 3, 3}), {}, f32({3, 3, 3, 3, 16, 16})},
                      Ok{f32({7, 9, 1, 5}), {imm_i("block", 8)}, f32({1, 2, 1, 5, 8, 8})},
                      Ok{f32({17, 1, 3, 3}), {imm_i("block", 8), imm_b("depthwise", true)}, f32({3, 3, 3, 8})},
                      Ok{f32({5, 1, 1, 1}), {imm_b("depthwise", true)}, f32({1, 1, 1, 16})}}) {
    Context ctx;
    Program p(ctx);
    std::vector<TensorId> ids;
    TensorId out = NO_TENSOR;
    ASSERT_TRUE(build_op(p, op, {k.w}, k.imms, &ids, &out));
    EXPECT_EQ(p.desc(out).type, k.y);
  }
}

// ---------------------------------------------------------------------------------------------
// Listings and gradients

// A program using all three ops prints, parses back to the same text, and runs: the round trip
// through the blocked layout gives x back, and the packed depthwise weights are in place.
TEST(NchwcListing, AllThreeOpsRoundTripAndRun) {
  const char* text = R"(
input  %x : f32[1,3,5,5]
param  @w : f32[3,1,3,3]  init=uniform low=-1 high=1
output %y
output %pw

forward:
  TO_NCHWC            %x -> %xb  block=8
  TO_NCHW             %xb -> %y  channels=3
  CONV_WEIGHTS_NCHWC  @w -> %pw  block=8 depthwise=1
)";
  Context ctx;
  Program p(ctx);
  ASSERT_TRUE(program_parse(text, "nchwc.nnasm", &p));
  const std::string printed = program_print(p);
  for (const char* s : {"TO_NCHWC", "block=8 ", "; f32[1,1,5,5,8]", "channels=3", "; f32[1,3,5,5]",
                        "block=8 depthwise=1", "; f32[1,3,3,8]"})
    EXPECT_NE(printed.find(s), std::string::npos) << s << " in\n" << printed;
  Context ctx2;
  Program q(ctx2);
  ASSERT_TRUE(program_parse(printed, "printed.nnasm", &q));
  EXPECT_EQ(program_print(q), printed);

  Result<std::unique_ptr<Executor>> ex = Executor::prepare(q);
  ASSERT_TRUE(ex) << ex.status().message();
  std::mt19937 rng(8);
  const std::vector<float> x = values(75, rng);
  std::memcpy(ex.value()->tensor("x")->f32(), x.data(), sizeof(float) * x.size());
  ex.value()->run();
  const Tensor* y = ex.value()->tensor("y");
  EXPECT_EQ(first_difference(std::vector<float>(y->f32(), y->f32() + y->numel()), x), "");
  const Tensor* w = ex.value()->tensor("w");
  const Tensor* pw = ex.value()->tensor("pw");
  EXPECT_EQ(first_difference(std::vector<float>(pw->f32(), pw->f32() + pw->numel()),
                             naive_pack_depthwise(std::vector<float>(w->f32(), w->f32() + w->numel()), 3, 9, 8)),
            "");
}

// Each reorder's backward code is the other reorder, with the forward's C or b.
TEST(NchwcGradients, EachReordersGradientIsTheOther) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {2, 11, 3, 3});
  Var xb = g.record(Opcode::TO_NCHWC, {x}, {{"block", nnasm::imm_i(8)}}, Loc::here());
  Var y = g.record(Opcode::TO_NCHW, {xb}, {{"channels", nnasm::imm_i(11)}}, Loc::here());
  ASSERT_TRUE(g.status()) << g.status().message();
  const Result<std::vector<TensorId>> r = grad(p, y.id(), {x.id()});
  ASSERT_TRUE(r) << r.status().message();
  const std::string text = program_print(p);
  const size_t backward = text.find("backward:");
  ASSERT_NE(backward, std::string::npos) << text;
  const std::string bwd = text.substr(backward);
  EXPECT_NE(bwd.find("TO_NCHWC"), std::string::npos) << bwd;
  EXPECT_NE(bwd.find("block=8"), std::string::npos) << bwd;
  EXPECT_NE(bwd.find("channels=11"), std::string::npos) << bwd;
  EXPECT_EQ(p.desc(r.value()[0]).type, p.desc(x.id()).type);
}

// The packed weights have no gradient: autodiff names the instruction.
TEST(NchwcGradients, PackedWeightsHaveNoGradientAndSaySo) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var w = g.param("w", {4, 3, 3, 3}, {InitKind::UNIFORM, -1, 1});
  Var pw = g.record(Opcode::CONV_WEIGHTS_NCHWC, {w}, {{"block", nnasm::imm_i(8)}}, Loc::here());
  ASSERT_TRUE(g.status()) << g.status().message();
  const Result<std::vector<TensorId>> r = grad(p, pw.id(), {w.id()});
  ASSERT_FALSE(r.is_ok());
  const std::string m = r.status().message();
  EXPECT_NE(m.find("(CONV_WEIGHTS_NCHWC -> "), std::string::npos) << m;
  EXPECT_NE(m.find("has no backward rule"), std::string::npos) << m;
}

}  // namespace
}  // namespace nnasm::test

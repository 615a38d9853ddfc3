// LSTM, GRU and RNN on their generated kernels (ops/recurrent/recurrent_jit.cpp) at every JIT level
// the machine has, against the reference kernel: hidden sizes around the vector widths (1, 7, 15,
// 16, 17, 33), odd input sizes, batches of 1 to 3, 1 to 5 steps and a longer sequence, every
// direction, layout, initial state, sequence lengths (clamped ones included) and each op's own
// immediate, with a guard band after every output; the generated kernel must be the one that ran.
// Then the property the per-frame stepping relies on: one step at a time, the last h and c fed
// back, gives bitwise the whole sequence's outputs, at every level (the reference included).
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "tests/jit_levels.h"
#include "tests/op_harness.h"

namespace nnasm {
namespace {

using test::HostTensor;
using test::ImmArg;

struct Case {
  Opcode op = Opcode::LSTM;
  int64_t t = 1, n = 1, i = 1, h = 1;
  int dir = 0;  // 0 forward, 1 reverse, 2 bidirectional
  bool batch_first = false, initial = false, lens = false;
  bool flag = false;  // LSTM peephole, GRU linear_before_reset, RNN relu
  std::string str() const {
    return fmt::format("{} T={} N={} I={} H={} dir={} bf={} initial={} lens={} flag={}", op_info(op).mnemonic, t, n,
                       i, h, dir, int(batch_first), int(initial), int(lens), int(flag));
  }
};

int gates(Opcode op) { return op == Opcode::LSTM ? 4 : op == Opcode::GRU ? 3 : 1; }

std::vector<ImmArg> imms(const Case& c) {
  static const char* dirs[] = {"forward", "reverse", "bidirectional"};
  std::vector<ImmArg> v = {test::imm_enum("direction", dirs[c.dir]), test::imm_b("batch_first", c.batch_first),
                           test::imm_b("initial", c.initial), test::imm_b("lens", c.lens)};
  if (c.op == Opcode::LSTM) v.push_back(test::imm_b("peephole", c.flag));
  if (c.op == Opcode::GRU) v.push_back(test::imm_b("linear_before_reset", c.flag));
  if (c.op == Opcode::RNN) v.push_back(test::imm_enum("activation", c.flag ? "relu" : "tanh"));
  return v;
}

// PyTorch's initialisation scale (±1/√H) for the weights and biases; x, h0 in ±1, c0 in ±2.
std::vector<HostTensor> inputs(const Case& c, std::mt19937& rng) {
  const int64_t d = c.dir == 2 ? 2 : 1, gh = gates(c.op) * c.h;
  const double k = 1 / std::sqrt(static_cast<double>(c.h));
  std::vector<HostTensor> in;
  in.push_back(test::random_f32(c.batch_first ? Shape{c.n, c.t, c.i} : Shape{c.t, c.n, c.i}, rng, -1, 1));
  in.push_back(test::random_f32(Shape{d, gh, c.i}, rng, -k, k));
  in.push_back(test::random_f32(Shape{d, gh, c.h}, rng, -k, k));
  in.push_back(test::random_f32(Shape{d, 2 * gh}, rng, -k, k));
  const Shape state = c.batch_first ? Shape{c.n, d, c.h} : Shape{d, c.n, c.h};
  if (c.initial) {
    in.push_back(test::random_f32(state, rng, -1, 1));
    if (c.op == Opcode::LSTM) in.push_back(test::random_f32(state, rng, -2, 2));
  }
  if (c.lens) {
    // Every length from below 0 to past T (clamped), T itself and 0 among them.
    HostTensor l{TensorType{DType::I32, Shape{c.n}}, {}};
    std::uniform_int_distribution<int64_t> u(-1, c.t + 1);
    for (int64_t b = 0; b < c.n; ++b) l.v.push_back(static_cast<double>(b == 0 ? c.t : b == 1 ? 0 : u(rng)));
    in.push_back(l);
  }
  if (c.op == Opcode::LSTM && c.flag) in.push_back(test::random_f32(Shape{d, 3 * c.h}, rng, -0.5, 0.5));
  return in;
}

test::OpOutput run(const Case& c, const std::vector<HostTensor>& in, Isa isa, int threads = 1) {
  test::RunConfig cfg;
  cfg.set_jit = true;
  cfg.jit = JitConfig{isa != Isa::REF, isa};
  cfg.threads = threads;
  return test::run_op(c.op, in, imms(c), false, cfg);
}

std::string kernel_of(Opcode op, Isa isa) {
  return fmt::format("f32_{}__{}", op == Opcode::LSTM ? "lstm" : op == Opcode::GRU ? "gru" : "rnn", isa_name(isa));
}

// The JIT's outputs against the reference's: within the rounding of other summation orders and
// the vector math's few ulps, relative to each value's magnitude (c grows with the steps).
::testing::AssertionResult near_reference(const Case& c, const test::OpOutput& ref, const test::OpOutput& got) {
  std::vector<test::Expected> want;
  const double tol = 2e-5 * std::sqrt(static_cast<double>(c.t));
  for (const HostTensor& o : ref.outs) want.push_back(test::Expected{o, {}, test::Tolerance{tol, tol}});
  return test::matches_all(want, got);
}

void check(const Case& c, std::mt19937& rng) {
  SCOPED_TRACE(c.str());
  const std::vector<HostTensor> in = inputs(c, rng);
  const test::OpOutput ref = run(c, in, Isa::REF);
  ASSERT_TRUE(ref.status) << ref.status.message();
  ASSERT_TRUE(ref.problems.empty()) << ref.problems[0];
  for (Isa isa : jit_levels()) {
    SCOPED_TRACE(isa_name(isa));
    const test::OpOutput got = run(c, in, isa);
    EXPECT_EQ(got.kernel, kernel_of(c.op, isa));
    EXPECT_TRUE(near_reference(c, ref, got));
  }
}

// Every combination of direction, layout, initial state, lengths and the op's flag, each at a
// hidden size around the vector widths, with the other sizes varying from case to case.
void sweep(Opcode op) {
  std::mt19937 rng(static_cast<unsigned>(op) * 7919u);
  const int64_t hs[] = {1, 7, 15, 16, 17, 33}, is[] = {1, 3, 5, 19};
  int k = 0;
  for (int combo = 0; combo < 48; ++combo)
    for (int64_t h : hs) {
      Case c;
      c.op = op;
      c.dir = combo % 3;
      c.batch_first = combo / 3 % 2;
      c.initial = combo / 6 % 2;
      c.lens = combo / 12 % 2;
      c.flag = combo / 24 % 2;
      c.h = h;
      c.t = 1 + k % 5;
      c.n = 1 + k / 5 % 3;
      c.i = is[k / 3 % 4];
      ++k;
      check(c, rng);
      if (::testing::Test::HasFatalFailure()) return;
    }
}

TEST(RecurrentJit, LstmMatchesTheReference) { sweep(Opcode::LSTM); }
TEST(RecurrentJit, GruMatchesTheReference) { sweep(Opcode::GRU); }
TEST(RecurrentJit, RnnMatchesTheReference) { sweep(Opcode::RNN); }

// Longer sequences and larger layers: a bidirectional batch of 41 steps with lengths, and rows of
// W and R long enough for the block product to loop over k (AVX2 from 129 floats, AVX-512 from
// 513), with tails.
TEST(RecurrentJit, LongSequencesAndWideLayersMatchTheReference) {
  struct Size {
    int64_t t, n, i, h;
    int dir;  // -1: the flag's (forward, reverse)
    bool lens, batch_first;
  };
  const Size sizes[] = {
      {41, 3, 27, 67, 2, true, false}, {6, 2, 5, 300, -1, false, true}, {2, 2, 601, 529, 0, false, false}};
  std::mt19937 rng(5);
  for (Opcode op : {Opcode::LSTM, Opcode::GRU, Opcode::RNN})
    for (int flag = 0; flag < 2; ++flag)
      for (const Size& z : sizes) {
        Case c;
        c.op = op;
        c.t = z.t;
        c.n = z.n;
        c.i = z.i;
        c.h = z.h;
        c.dir = z.dir < 0 ? flag : z.dir;
        c.initial = true;
        c.lens = z.lens;
        c.batch_first = z.batch_first;
        c.flag = flag;
        check(c, rng);
      }
}

// A bidirectional layer runs one direction a part on two threads, each with the bits of the
// whole kernel's.
TEST(RecurrentJit, BidirectionalSplitsIntoTwoPartsWithTheSameBits) {
  std::mt19937 rng(9);
  for (Opcode op : {Opcode::LSTM, Opcode::GRU, Opcode::RNN})
    for (Isa isa : jit_levels()) {
      Case c;
      c.op = op;
      c.t = 16;
      c.n = 2;
      c.i = 32;
      c.h = 64;
      c.dir = 2;
      c.initial = true;
      SCOPED_TRACE(c.str() + " " + isa_name(isa));
      const std::vector<HostTensor> in = inputs(c, rng);
      const test::OpOutput one = run(c, in, isa, 1), two = run(c, in, isa, 2);
      ASSERT_TRUE(one.status && two.status);
      EXPECT_EQ(two.parts, 2);
      EXPECT_EQ(two.kernel, kernel_of(op, isa));
      ASSERT_EQ(one.outs.size(), two.outs.size());
      for (size_t k = 0; k < one.outs.size(); ++k) EXPECT_EQ(one.outs[k].v, two.outs[k].v) << "output " << k;
    }
}

// The whole sequence at once against one step a run, h (and c) carried from each run's last
// state to the next's initial one: bitwise equal at every level, in either direction (a reversed
// layer stepped from the last step to the first).
TEST(RecurrentJit, OneStepAtATimeGivesTheWholeSequencesBits) {
  std::vector<Isa> levels = jit_levels();
  levels.insert(levels.begin(), Isa::REF);
  std::mt19937 rng(13);
  int k = 0;
  for (Isa isa : levels)
    for (Opcode op : {Opcode::LSTM, Opcode::GRU, Opcode::RNN})
      for (int64_t t : {5, 28})
        for (int64_t n : {1, 3}) {
          Case c;
          c.op = op;
          c.t = t;
          c.n = n;
          c.i = 19;
          c.h = k % 2 ? 33 : 16;
          c.dir = k % 3 == 2 ? 1 : 0;
          c.batch_first = k % 4 == 1;
          c.flag = k / 2 % 2;
          c.initial = true;
          ++k;
          SCOPED_TRACE(c.str() + " " + isa_name(isa));
          const std::vector<HostTensor> in = inputs(c, rng);
          const test::OpOutput whole = run(c, in, isa);
          ASSERT_TRUE(whole.status) << whole.status.message();
          if (isa != Isa::REF) {
            EXPECT_EQ(whole.kernel, kernel_of(op, isa));
          }
          Case s = c;
          s.t = 1;
          std::vector<HostTensor> step = in;
          step[0].type.shape = c.batch_first ? Shape{c.n, 1, c.i} : Shape{1, c.n, c.i};
          const bool lstm = op == Opcode::LSTM;
          for (int64_t j = 0; j < t; ++j) {
            const int64_t tt = c.dir == 1 ? t - 1 - j : j;
            step[0].v.clear();
            // Row b of x at time tt, and of y.
            auto at = [&](int64_t b) { return static_cast<size_t>(c.batch_first ? b * t + tt : tt * c.n + b); };
            for (int64_t b = 0; b < c.n; ++b)
              for (int64_t e = 0; e < c.i; ++e) step[0].v.push_back(in[0].v[at(b) * c.i + e]);
            const test::OpOutput got = run(s, step, isa);
            ASSERT_TRUE(got.status) << got.status.message();
            for (int64_t b = 0; b < c.n; ++b)
              for (int64_t e = 0; e < c.h; ++e)
                ASSERT_EQ(got.outs[0].v[static_cast<size_t>(b * c.h + e)], whole.outs[0].v[at(b) * c.h + e])
                    << "step " << tt << " row " << b << " unit " << e;
            step[4].v = got.outs[1].v;  // h0 ← the last h
            if (lstm) step[5].v = got.outs[2].v;
            if (j == t - 1) {
              EXPECT_EQ(got.outs[1].v, whole.outs[1].v);
              if (lstm) {
                EXPECT_EQ(got.outs[2].v, whole.outs[2].v);
              }
            }
          }
        }
}

}  // namespace
}  // namespace nnasm

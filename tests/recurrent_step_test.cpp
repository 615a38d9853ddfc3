// Recurrent layers stepped once per run (RecurrentOptions::step): a step program run T times gives
// bitwise the y rows and final h (and c) of the whole-sequence program with the same weights, for
// LSTM, GRU and RNN with two layers, at every JIT level and with the JIT off; reset_state starts
// the sequence over; instances keep their own state; the C API's reset does the same. Also the
// shell functions' layouts (PyTorch's y and h_n), names, initialisation and errors, and what the
// passes and the verifier do with ASSIGN.
#include <cmath>
#include <cstring>
#include <functional>
#include <regex>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "api/nnasm.h"
#include "engine/executor.h"
#include "serialize/listing.h"
#include "shell/shell.h"
#include "tests/jit_levels.h"

namespace nnasm {
namespace {

constexpr int64_t T = 5, N = 3, I = 7, H = 17, LAYERS = 2;

enum class Kind { LSTM, GRU, RNN };
const char* kind_name(Kind k) { return k == Kind::LSTM ? "lstm" : k == Kind::GRU ? "gru" : "rnn"; }

Recurrent layer(Kind k, Var x, const RecurrentOptions& o) {
  return k == Kind::LSTM ? lstm(x, H, o) : k == Kind::GRU ? gru(x, H, o) : rnn(x, H, o);
}

// Records the model: the whole sequence (x [T, N, I]) or one step (x [N, I]); outputs y, h (and
// c). The RNN runs relu, the GRU its linear_before_reset default.
void record(Kind k, bool step, Graph& g) {
  RecurrentOptions o;
  o.name = "rec";
  o.layers = LAYERS;
  o.step = step;
  if (k == Kind::RNN) o.nonlinearity = Activation::RELU;
  const Recurrent r = layer(k, g.input("x", step ? Shape{N, I} : Shape{T, N, I}), o);
  g.output(r.y, "y");
  g.output(r.h, "h");
  if (k == Kind::LSTM) g.output(r.c, "c");
}

float input_value(int64_t t, int64_t n, int64_t i) {
  return std::sin(0.37f * static_cast<float>(t * N * I + n * I + i) + 0.2f);
}

std::vector<float> read(const Executor& ex, const std::string& name) {
  const TensorId id = ex.program().find(name);
  const float* d = static_cast<const float*>(ex.data(id));
  return std::vector<float>(d, d + ex.program().desc(id).type.shape.numel());
}

// Bitwise: the same floats, not merely close ones.
bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

// A whole-sequence run and its results.
struct Sequence {
  std::vector<float> y, h, c;
};

struct Built {
  std::unique_ptr<Context> ctx;
  std::unique_ptr<Program> p;
  std::unique_ptr<Executor> ex;
};

Built build(Kind k, bool step, const JitConfig& jit, Status* st) {
  Built b;
  b.ctx = std::make_unique<Context>(step ? 7 : 11);  // different seeds: the weights are copied
  b.ctx->set_jit(jit);
  b.p = std::make_unique<Program>(*b.ctx);
  Graph g(*b.p);
  record(k, step, g);
  if (!g.status()) {
    *st = g.status();
    return b;
  }
  auto ex = Executor::prepare(*b.p);
  if (!ex) {
    *st = ex.status();
    return b;
  }
  b.ex = std::move(ex.value());
  *st = Status::ok();
  return b;
}

// Copies every param of `to` from the tensor of the same name in `from`.
void copy_weights(const Built& from, Built& to) {
  int copied = 0;
  for (TensorId id : to.p->tensors()) {
    const TensorDesc& d = to.p->desc(id);
    if (d.role != Role::PARAM) continue;
    const Tensor* src = from.ex->tensor(d.name);
    ASSERT_NE(src, nullptr) << d.name;
    ASSERT_EQ(src->desc.type, d.type) << d.name;
    std::memcpy(to.ctx->at(id).f32(), src->f32(), static_cast<size_t>(src->numel()) * sizeof(float));
    ++copied;
  }
  EXPECT_EQ(copied, 3 * LAYERS);
  to.ctx->params_changed();
}

Sequence run_sequence(Built& s) {
  float* x = static_cast<float*>(s.ex->data(s.ex->program().find("x")));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < I; ++i) x[(t * N + n) * I + i] = input_value(t, n, i);
  s.ex->run();
  Sequence out{read(*s.ex, "y"), read(*s.ex, "h"), {}};
  if (s.ex->program().find("c") != NO_TENSOR) out.c = read(*s.ex, "c");
  return out;
}

// Steps `ex` through the sequence, checking each y row and the final h and c against `want`
// bitwise.
void expect_steps_match(Executor& ex, const Sequence& want, const char* what) {
  SCOPED_TRACE(what);
  float* x = static_cast<float*>(ex.data(ex.program().find("x")));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < I; ++i) x[n * I + i] = input_value(t, n, i);
    ex.run();
    const std::vector<float> y = read(ex, "y");
    ASSERT_EQ(y.size(), static_cast<size_t>(N * H));
    EXPECT_TRUE(same_bits(y.data(), want.y.data() + t * N * H, y.size())) << "y at step " << t;
  }
  const std::vector<float> h = read(ex, "h");
  ASSERT_EQ(h.size(), want.h.size());
  EXPECT_TRUE(same_bits(h.data(), want.h.data(), h.size())) << "last h";
  if (!want.c.empty()) {
    const std::vector<float> c = read(ex, "c");
    ASSERT_EQ(c.size(), want.c.size());
    EXPECT_TRUE(same_bits(c.data(), want.c.data(), c.size())) << "last c";
  }
}

std::vector<JitConfig> configs() {
  std::vector<JitConfig> v;
  for (Isa isa : jit_levels()) v.push_back(JitConfig{true, isa});
  v.push_back(JitConfig{false, Isa::REF});
  return v;
}

// The whole-sequence program and the stepped one, the second with the first's weights.
Status build_pair(Kind k, const JitConfig& jit, Built* seq, Built* step) {
  Status st;
  *seq = build(k, false, jit, &st);
  if (!st) return st;
  *step = build(k, true, jit, &st);
  if (!st) return st;
  copy_weights(*seq, *step);
  return Status::ok();
}

class RecurrentStep : public ::testing::TestWithParam<Kind> {};

TEST_P(RecurrentStep, StepsMatchTheWholeSequenceBitwiseAndResetStartsOver) {
  const Kind k = GetParam();
  for (const JitConfig& jit : configs()) {
    SCOPED_TRACE(jit.enabled ? isa_name(jit.cap) : "jit off");
    Built seq, step;
    const Status st = build_pair(k, jit, &seq, &step);
    ASSERT_TRUE(st) << st.message();
    const Sequence want = run_sequence(seq);
    ASSERT_EQ(want.y.size(), static_cast<size_t>(T * N * H));
    ASSERT_EQ(want.h.size(), static_cast<size_t>(LAYERS * N * H));

    expect_steps_match(*step.ex, want, "first pass");
    // The state holds each layer's last h: rows of h.
    const std::vector<float> h = read(*step.ex, "h");
    for (int64_t l = 0; l < LAYERS; ++l) {
      const std::vector<float> s = read(*step.ex, fmt::format("rec.l{}.h", l));
      EXPECT_TRUE(same_bits(s.data(), h.data() + l * N * H, static_cast<size_t>(N * H))) << "layer " << l;
    }
    step.ex->reset_state();
    for (int64_t l = 0; l < LAYERS; ++l)
      for (float v : read(*step.ex, fmt::format("rec.l{}.h", l))) ASSERT_EQ(v, 0.0f);
    expect_steps_match(*step.ex, want, "after reset_state");
    step.ex->reset_state();
    expect_steps_match(*step.ex, want, "after a second reset_state");
  }
}

TEST_P(RecurrentStep, InstancesKeepTheirOwnState) {
  const Kind k = GetParam();
  for (const JitConfig& jit : configs()) {
    SCOPED_TRACE(jit.enabled ? isa_name(jit.cap) : "jit off");
    Built seq, step;
    const Status st = build_pair(k, jit, &seq, &step);
    ASSERT_TRUE(st) << st.message();
    const Sequence want = run_sequence(seq);
    // Two characters: a runs two steps ahead, then b runs the whole sequence, then a finishes
    // from a reset. Neither sees the other's state, nor the template's.
    auto a = step.ex->instantiate();
    ASSERT_TRUE(a) << a.status().message();
    auto b = step.ex->instantiate();
    ASSERT_TRUE(b) << b.status().message();
    const TensorId h0 = step.ex->program().find("rec.l0.h");
    EXPECT_NE(a.value()->data(h0), step.ex->data(h0));
    EXPECT_NE(a.value()->data(h0), b.value()->data(h0));
    float* xa = static_cast<float*>(a.value()->data(a.value()->program().find("x")));
    for (int64_t i = 0; i < N * I; ++i) xa[i] = 0.5f;
    a.value()->run();
    a.value()->run();
    expect_steps_match(*b.value(), want, "instance b while a is mid-sequence");
    a.value()->reset_state();
    expect_steps_match(*a.value(), want, "instance a after its reset");
    for (float v : read(*step.ex, "rec.l0.h")) ASSERT_EQ(v, 0.0f);  // the template's own, untouched
    expect_steps_match(*step.ex, want, "the template");
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, RecurrentStep, ::testing::Values(Kind::LSTM, Kind::GRU, Kind::RNN),
                         [](const ::testing::TestParamInfo<Kind>& p) { return std::string(kind_name(p.param)); });

// The step program as a listing through the C API: instances step the sequence of the same
// weights (the same seed and names), reset starts over, two instances do not share state.
TEST(RecurrentStep, CApiResetStartsTheSequenceOver) {
  // The default seed and JIT settings (NNASM_JIT, NNASM_ISA), as the C API's model has them:
  // generated kernels sum in another order than the reference, so both must use the same.
  Context seq_ctx;
  Program seq_p(seq_ctx);
  Graph sg(seq_p);
  record(Kind::LSTM, false, sg);
  ASSERT_TRUE(sg.status()) << sg.status().message();
  auto seq_ex = Executor::prepare(seq_p);
  ASSERT_TRUE(seq_ex) << seq_ex.status().message();
  Built seq;
  seq.ex = std::move(seq_ex.value());
  const Sequence want = run_sequence(seq);

  Context ctx;
  Program p(ctx);
  Graph g(p);
  record(Kind::LSTM, true, g);
  ASSERT_TRUE(g.status()) << g.status().message();
  const std::string listing = program_print(p);
  EXPECT_TRUE(std::regex_search(listing, std::regex(R"(ASSIGN +@rec\.l1\.c, %\w+ -> @rec\.l1\.c )"))) << listing;
  nnasm_model* m = nullptr;
  ASSERT_EQ(nnasm_model_load_memory(listing.data(), listing.size(), nullptr, &m), NNASM_OK) << nnasm_last_error();
  nnasm_instance *a = nullptr, *b = nullptr;
  ASSERT_EQ(nnasm_instance_create(m, &a), NNASM_OK) << nnasm_last_error();
  ASSERT_EQ(nnasm_instance_create(m, &b), NNASM_OK) << nnasm_last_error();
  auto steps = [&](nnasm_instance* in, int64_t count, std::vector<float>* ys) {
    for (int64_t t = 0; t < count; ++t) {
      float x[N * I], y[N * H];
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < I; ++i) x[n * I + i] = input_value(t, n, i);
      ASSERT_EQ(nnasm_instance_set_input(in, "x", x, sizeof x), NNASM_OK) << nnasm_last_error();
      ASSERT_EQ(nnasm_instance_run(in), NNASM_OK);
      ASSERT_EQ(nnasm_instance_get_output(in, "y", y, sizeof y), NNASM_OK) << nnasm_last_error();
      ys->insert(ys->end(), y, y + N * H);
    }
  };
  std::vector<float> ya, yb, ya2;
  steps(a, 3, &ya);
  steps(b, T, &yb);  // a is mid-sequence meanwhile
  ASSERT_EQ(nnasm_instance_reset_state(a), NNASM_OK);
  steps(a, T, &ya2);
  ASSERT_EQ(yb.size(), want.y.size());
  EXPECT_TRUE(same_bits(yb.data(), want.y.data(), yb.size()));
  ASSERT_EQ(ya2.size(), want.y.size());
  EXPECT_TRUE(same_bits(ya2.data(), want.y.data(), ya2.size()));
  EXPECT_TRUE(same_bits(ya.data(), want.y.data(), ya.size()));
  float c[LAYERS * N * H];
  ASSERT_EQ(nnasm_instance_get_output(a, "c", c, sizeof c), NNASM_OK) << nnasm_last_error();
  EXPECT_TRUE(same_bits(c, want.c.data(), want.c.size()));
  EXPECT_EQ(nnasm_instance_reset_state(nullptr), NNASM_ERR_INVALID_ARGUMENT);
  nnasm_instance_free(a);
  nnasm_instance_free(b);
  nnasm_model_free(m);
}

// ---------------------------------------------------------------------------------------------
// The shell functions: PyTorch's layouts, names, initialisation, errors

TEST(RecurrentShell, BidirectionalLayersGivePyTorchsYAndHn) {
  for (bool batch_first : {false, true}) {
    SCOPED_TRACE(batch_first ? "batch_first" : "time-major");
    Context ctx;
    Program p(ctx);
    Graph g(p);
    RecurrentOptions o;
    o.layers = 2;
    o.bidirectional = true;
    o.batch_first = batch_first;
    Var x = g.input("x", batch_first ? Shape{N, T, I} : Shape{T, N, I});
    const Recurrent r = lstm(x, H, o);
    ASSERT_TRUE(g.status()) << g.status().message();
    EXPECT_EQ(r.y.shape(), (batch_first ? Shape{N, T, 2 * H} : Shape{T, N, 2 * H}));
    EXPECT_EQ(r.h.shape(), (Shape{4, N, H}));
    EXPECT_EQ(r.c.shape(), (Shape{4, N, H}));
    g.output(r.y, "y");
    g.output(r.h, "h");
    // The names, the second layer reading both directions of the first, the initialisation.
    ASSERT_NE(p.find("lstm0.l1.w"), NO_TENSOR);
    EXPECT_EQ(p.desc(p.find("lstm0.l0.w")).type.shape, (Shape{2, 4 * H, I}));
    EXPECT_EQ(p.desc(p.find("lstm0.l1.w")).type.shape, (Shape{2, 4 * H, 2 * H}));
    EXPECT_EQ(p.desc(p.find("lstm0.l1.r")).type.shape, (Shape{2, 4 * H, H}));
    EXPECT_EQ(p.desc(p.find("lstm0.l1.b")).type.shape, (Shape{2, 8 * H}));
    const double bound = static_cast<float>(1 / std::sqrt(double(H)));  // as the listing spells it
    const InitSpec want{InitKind::UNIFORM, -bound, bound};
    for (const char* w : {"lstm0.l0.w", "lstm0.l0.r", "lstm0.l0.b", "lstm0.l1.w"})
      EXPECT_EQ(p.desc(p.find(w)).init, want) << w;
    auto ex = Executor::prepare(p);
    ASSERT_TRUE(ex) << ex.status().message();
    const Tensor* b = ex.value()->tensor("lstm0.l1.b");
    float lo = 1, hi = -1;
    for (int64_t k = 0; k < b->numel(); ++k) lo = std::min(lo, b->f32()[k]), hi = std::max(hi, b->f32()[k]);
    EXPECT_GE(lo, -bound);
    EXPECT_LE(hi, bound);
    EXPECT_LT(lo, 0);
    EXPECT_GT(hi, 0);

    float* xd = static_cast<float*>(ex.value()->data(ex.value()->program().find("x")));
    for (int64_t k = 0; k < T * N * I; ++k) xd[k] = std::cos(0.3f * static_cast<float>(k));
    ex.value()->run();
    const std::vector<float> y = read(*ex.value(), "y"), h = read(*ex.value(), "h");
    // PyTorch's property: the last layer's forward direction ends at the last step, its backward
    // direction at the first; h_n's rows are layer 1 forward and backward (rows 2 and 3).
    auto y_at = [&](int64_t t, int64_t n, int64_t j) { return y[batch_first ? (n * T + t) * 2 * H + j : (t * N + n) * 2 * H + j]; };
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < H; ++j) {
        EXPECT_EQ(y_at(T - 1, n, j), h[(2 * N + n) * H + j]);
        EXPECT_EQ(y_at(0, n, H + j), h[(3 * N + n) * H + j]);
      }
  }
}

TEST(RecurrentShell, BatchFirstComputesWhatTimeMajorComputes) {
  for (Kind k : {Kind::LSTM, Kind::GRU, Kind::RNN}) {
    SCOPED_TRACE(kind_name(k));
    std::vector<float> y[2], h[2];
    for (int bf = 0; bf < 2; ++bf) {
      Context ctx;  // one seed, one set of names: the same weights
      Program p(ctx);
      Graph g(p);
      RecurrentOptions o;
      o.layers = 2;
      o.bidirectional = true;
      o.batch_first = bf;
      const Recurrent r = layer(k, g.input("x", bf ? Shape{N, T, I} : Shape{T, N, I}), o);
      g.output(r.y, "y");
      g.output(r.h, "h");
      ASSERT_TRUE(g.status()) << g.status().message();
      auto ex = Executor::prepare(p);
      ASSERT_TRUE(ex) << ex.status().message();
      float* xd = static_cast<float*>(ex.value()->data(ex.value()->program().find("x")));
      for (int64_t t = 0; t < T; ++t)
        for (int64_t n = 0; n < N; ++n)
          for (int64_t i = 0; i < I; ++i) xd[(bf ? n * T + t : t * N + n) * I + i] = input_value(t, n, i);
      ex.value()->run();
      y[bf] = read(*ex.value(), "y");
      h[bf] = read(*ex.value(), "h");
    }
    EXPECT_EQ(h[0], h[1]);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t j = 0; j < 2 * H; ++j)
          ASSERT_EQ(y[0][(t * N + n) * 2 * H + j], y[1][(n * T + t) * 2 * H + j]) << t << "," << n << "," << j;
  }
}

// A message with the caller's line and the reason, for each misuse.
TEST(RecurrentShell, MisuseIsAClearError) {
  struct Case {
    const char* what;
    std::function<void(Graph&)> build;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {"rank", [](Graph& g) { lstm(g.input("x", {N, I}), H); }, {"lstm", "f32[3,7]", "T,N,I"}},
      {"step rank", [](Graph& g) {
         RecurrentOptions o;
         o.step = true;
         gru(g.input("x", {T, N, I}), H, o);
       }, {"gru", "f32[5,3,7]", "N,I"}},
      {"hidden", [](Graph& g) { rnn(g.input("x", {T, N, I}), 0); }, {"rnn", "hidden size 0"}},
      {"layers", [](Graph& g) {
         RecurrentOptions o;
         o.layers = 0;
         lstm(g.input("x", {T, N, I}), H, o);
       }, {"lstm", "layers=0"}},
      {"step bidirectional", [](Graph& g) {
         RecurrentOptions o;
         o.step = o.bidirectional = true;
         lstm(g.input("x", {N, I}), H, o);
       }, {"lstm", "step", "bidirectional"}},
      {"nonlinearity", [](Graph& g) {
         RecurrentOptions o;
         o.nonlinearity = Activation::SIGMOID;
         rnn(g.input("x", {T, N, I}), H, o);
       }, {"rnn", "nonlinearity", "TANH", "RELU"}},
      {"name taken", [](Graph& g) {
         g.param("m.l0.w", {1});
         RecurrentOptions o;
         o.name = "m";
         lstm(g.input("x", {T, N, I}), H, o);
       }, {"m.l0.w"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Context ctx;
    Program p(ctx);
    Graph g(p);
    c.build(g);
    ASSERT_FALSE(g.status());
    const std::string& m = g.status().message();
    EXPECT_NE(m.find("recurrent_step_test.cpp:"), std::string::npos) << m;
    for (const std::string& s : c.needles) EXPECT_NE(m.find(s), std::string::npos) << m << " lacks " << s;
  }
}

// ---------------------------------------------------------------------------------------------
// ASSIGN through the passes and the verifier

// The forward section writes state in place in an inference program: the verifier takes it, the
// passes keep ASSIGN and the readers of its destination where they are (tanh(@s) reads only
// state, which derive would otherwise hoist into the derive section and compute once), and the
// state stays out of the arena.
TEST(Assign, PassesKeepItAndTheReadersOfItsDestination) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {4});
  Var s = g.state("s", {4}, {InitKind::CONSTANT, 0.25, 0});
  Var y = x + tanh(s);
  g.assign(s, y);
  g.output(y * 2.f, "y");
  ASSERT_TRUE(g.status()) << g.status().message();
  ASSERT_TRUE(p.finish());
  ASSERT_TRUE(p.check_state_writable());
  EXPECT_EQ(p.carried_state(), std::vector<TensorId>{s.id()});
  auto ex = Executor::prepare(p);
  ASSERT_TRUE(ex) << ex.status().message();
  const Program& run = ex.value()->program();
  EXPECT_FALSE(run.has_section(Section::DERIVE)) << program_print(run);
  int assigns = 0;
  for (const Instruction& ins : run.code()) assigns += ins.op == Opcode::ASSIGN;
  EXPECT_EQ(assigns, 1) << program_print(run);
  EXPECT_EQ(ex.value()->memory_plan().find(s.id()), nullptr);
  float* xd = static_cast<float*>(ex.value()->data(run.find("x")));
  for (int i = 0; i < 4; ++i) xd[i] = 0.1f * static_cast<float>(i);
  double sd[4] = {0.25, 0.25, 0.25, 0.25};
  for (int r = 0; r < 3; ++r) {
    ex.value()->run();
    const std::vector<float> out = read(*ex.value(), "y");
    for (int i = 0; i < 4; ++i) {
      sd[i] = 0.1 * i + std::tanh(sd[i]);
      EXPECT_NEAR(out[static_cast<size_t>(i)], 2 * sd[i], 1e-5) << "run " << r;
    }
  }
  ex.value()->reset_state();
  for (float v : read(*ex.value(), "s")) EXPECT_EQ(v, 0.25f);
}

// An ASSIGN whose result nobody reads is kept (it is the point), and the listing round-trips.
TEST(Assign, KeptWhenNothingReadsItAndRoundTrips) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {2, 3});
  Var s = g.state("s", {2, 3});
  g.assign(s, x + s);
  g.output(relu(x), "y");
  ASSERT_TRUE(g.status()) << g.status().message();
  auto ex = Executor::prepare(p);
  ASSERT_TRUE(ex) << ex.status().message();
  const std::string text = program_print(ex.value()->program());
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(ASSIGN +@s, %\w+ -> @s )"))) << text;
  Context ctx2;
  Program q(ctx2);
  ASSERT_TRUE(program_parse(program_print(p), "t.nnasm", &q));
  EXPECT_EQ(program_print(q), program_print(p));
}

TEST(Assign, RefusesAConstAndAMismatchedValue) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var k = g.constant("k", {2}, {1, 2});
  Var x = g.input("x", {2});
  g.assign(k, x);
  ASSERT_FALSE(g.status());
  EXPECT_NE(g.status().message().find("ASSIGN updates @k in place, but it is a const"), std::string::npos)
      << g.status().message();
  Context ctx2;
  Program p2(ctx2);
  Graph g2(p2);
  g2.assign(g2.state("s", {3}), g2.input("x", {2}));
  ASSERT_FALSE(g2.status());
  EXPECT_NE(g2.status().message().find("ASSIGN: src operand 2 (f32[2]) must have dst's type f32[3]"), std::string::npos)
      << g2.status().message();
}

}  // namespace
}  // namespace nnasm

// The memory planner (engine/memory_plan.h): offsets worked out by hand for small programs, the
// MLP figures docs/memory.md quotes (with the sample listings they come from), in-place rewriting,
// fan-out, the verifier turning down bad plans, and the executor's arena (what tensor() shows,
// opt level 0, results equal to unplanned runs). Every program any test prepares is verified
// too: Executor::prepare runs verify_plan on each plan it makes.
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "engine/executor.h"
#include "engine/memory_plan.h"
#include "engine/optimizer.h"
#include "engine/passes/pass.h"
#include "serialize/listing.h"
#include "shell/shell.h"

namespace nnasm {
namespace {

constexpr size_t SLOT_1K = 4096;  // f32[1024]

std::unique_ptr<Executor> prepared(const Program& p) {
  auto ex = Executor::prepare(p);
  EXPECT_TRUE(ex) << ex.status().message();
  return ex ? std::move(ex.value()) : nullptr;
}

// The slot of `v`, failing the test (and giving an empty slot) if it is not planned.
PlannedTensor slot_of(const MemoryPlan& plan, Var v) {
  const PlannedTensor* t = plan.find(v.id());
  EXPECT_TRUE(t) << "%" << v.name() << " is not planned";
  return t ? *t : PlannedTensor{};
}

// The -O1 passes but chain fusion, which would make one CALC of the elementwise chains these
// tests plan.
void unfused(Context& ctx) {
  std::vector<std::string> names;
  for (const PassInfo& pass : all_passes())
    if (std::string(pass.name) != "chain-fusion") names.push_back(pass.name);
  ctx.set_passes(names);
}

bool overlap(const PlannedTensor& a, const PlannedTensor& b) {
  return a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
}

void fill_inputs(Context& ctx, const Program& p) {
  for (TensorId id : p.inputs()) {
    Tensor& t = ctx.at(id);
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (t.desc.type.dtype == DType::F32) t.f32()[i] = static_cast<float>((i * 7919) % 255) / 127.f - 1.f;
      else t.i32()[i] = static_cast<int32_t>(i % 10);
    }
  }
}

// ---- offsets by hand ----

// a = softmax(x), b = softmax(a), c = softmax(b), d = a + c, y = softmax(d): a lives over
// instructions 0–3, b 1–2, c 2–3, d 3–4. SOFTMAX may not write in place; the ADD may, over a (its
// first input dying there). Largest first, ties by first use: {a, d} at 0, b above it, c above
// both (it meets b at 2): three slots, the most ever live at once.
TEST(MemoryPlan, OffsetsWorkedOutByHand) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {1024});
  Var a = softmax(x), b = softmax(a), c = softmax(b), d = a + c;
  g.output(softmax(d), "y");
  ASSERT_TRUE(g.status()) << g.status().message();
  const MemoryPlan plan = plan_memory(p);
  ASSERT_TRUE(verify_plan(p, plan)) << verify_plan(p, plan).message();
  ASSERT_EQ(plan.tensors.size(), 4u);
  EXPECT_EQ(slot_of(plan, a).offset, 0u);
  EXPECT_EQ(slot_of(plan, b).offset, SLOT_1K);
  EXPECT_EQ(slot_of(plan, c).offset, 2 * SLOT_1K);
  EXPECT_EQ(slot_of(plan, d).offset, 0u);
  EXPECT_EQ(slot_of(plan, d).in_place_of, a.id());
  EXPECT_EQ(slot_of(plan, a).first, 0u);
  EXPECT_EQ(slot_of(plan, a).last, 3u);
  EXPECT_EQ(plan.arena_bytes, 3 * SLOT_1K);
  EXPECT_EQ(plan.peak_bytes, 3 * SLOT_1K);
  EXPECT_EQ(plan.unplanned_bytes, 4 * SLOT_1K);
  EXPECT_EQ(plan.sharing(a.id()), std::vector<TensorId>{d.id()});
  EXPECT_TRUE(plan.sharing(b.id()).empty());
}

// A big tensor is placed first; the small ones before and after it, never live together, share
// the slot above it.
TEST(MemoryPlan, SmallTensorsShareTheSpaceBesideABigOne) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {1024});
  Var s = softmax(x);                 // 0–1
  Var big = expand(s, {4, 1024});     // 1–2, 16 KiB
  Var r = reduce_sum(big, 0);         // 2–3
  g.output(softmax(r), "y");
  ASSERT_TRUE(g.status()) << g.status().message();
  const MemoryPlan plan = plan_memory(p);
  ASSERT_TRUE(verify_plan(p, plan)) << verify_plan(p, plan).message();
  EXPECT_EQ(slot_of(plan, big).offset, 0u);
  EXPECT_EQ(slot_of(plan, s).offset, 4 * SLOT_1K);
  EXPECT_EQ(slot_of(plan, r).offset, 4 * SLOT_1K);
  EXPECT_EQ(plan.arena_bytes, 5 * SLOT_1K);
  EXPECT_EQ(plan.peak_bytes, 5 * SLOT_1K);
}

// Sizes are whole 64-byte lines, so an odd element count still gets aligned neighbours.
TEST(MemoryPlan, SlotsAreWholeLines) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {3, 5});
  Var a = softmax(x);
  Var b = softmax(a);
  g.output(softmax(b), "y");
  const MemoryPlan plan = plan_memory(p);
  EXPECT_EQ(slot_of(plan, a).bytes, 64u);
  EXPECT_EQ(slot_of(plan, b).offset % 64, 0u);
  EXPECT_TRUE(verify_plan(p, plan));
}

// ---- in place and fan-out ----

struct FanOut {
  Context ctx;
  Program p{ctx};
  Graph g{p};  // the Vars' names go through it
  Var a, b, c, d, y;
  explicit FanOut(int opt_level = 1) {
    ctx.set_opt_level(opt_level);
    unfused(ctx);
    Var x = g.input("x", {64, 33});
    a = exp(x);
    b = softmax(a);
    c = tanh(a);
    d = b + c;
    y = softmax(d);
    g.output(y, "y");
    EXPECT_TRUE(g.status()) << g.status().message();
  }
  std::vector<float> run(Executor& ex) {
    fill_inputs(ctx, p);
    ex.run();
    const Tensor& t = ctx.at(y.id());
    return std::vector<float>(t.f32(), t.f32() + t.numel());
  }
  // The plan with `v`'s slot moved to `offset`.
  MemoryPlan moved(Var v, size_t offset) const {
    MemoryPlan out;
    const MemoryPlan plan = plan_memory(p);
    for (PlannedTensor t : plan.tensors) {
      if (t.id == v.id()) t.offset = offset;
      out.add(t);
    }
    out.arena_bytes = plan.arena_bytes;
    return out;
  }
};

// a = exp(x) is read by softmax (a stays live) and last by tanh, which takes a's slot; the ADD
// takes b's (its first input, dying there). Two slots for four temporaries, and bitwise the
// result of the unplanned run.
TEST(MemoryPlan, FanOutKeepsSharedInputsApart) {
  FanOut f, unplanned_f(0);
  auto ex = prepared(f.p);
  auto unplanned = prepared(unplanned_f.p);
  ASSERT_TRUE(ex && unplanned);
  const MemoryPlan& plan = ex->memory_plan();
  EXPECT_TRUE(unplanned->memory_plan().tensors.empty());
  EXPECT_FALSE(overlap(slot_of(plan, f.a), slot_of(plan, f.b)));
  EXPECT_EQ(slot_of(plan, f.c).in_place_of, f.a.id());
  EXPECT_EQ(slot_of(plan, f.c).offset, slot_of(plan, f.a).offset);
  EXPECT_EQ(slot_of(plan, f.d).in_place_of, f.b.id());
  EXPECT_EQ(plan.arena_bytes, 2 * slot_of(plan, f.a).bytes);
  const std::vector<float> y = f.run(*ex), want = unplanned_f.run(*unplanned);
  EXPECT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * 4)) << "planned and unplanned runs differ";
}

// A chain of elementwise ops runs in one slot.
TEST(MemoryPlan, ElementwiseChainRunsInPlace) {
  Context ctx;
  unfused(ctx);
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {1000});
  std::vector<Var> t{exp(x)};
  t.push_back(tanh(t.back()));
  t.push_back(sigmoid(t.back()));
  t.push_back(t.back() * t.back());
  t.push_back(neg(t.back()));
  g.output(square(t.back()), "y");
  ASSERT_TRUE(g.status()) << g.status().message();
  auto ex = prepared(p);
  ASSERT_TRUE(ex);
  const MemoryPlan& plan = ex->memory_plan();
  ASSERT_EQ(plan.tensors.size(), t.size());
  for (size_t k = 1; k < t.size(); ++k) EXPECT_EQ(slot_of(plan, t[k]).in_place_of, t[k - 1].id()) << k;
  EXPECT_EQ(plan.arena_bytes, padded_bytes(1000 * 4));
  fill_inputs(ctx, p);
  ex->run();
  const float* xv = ex->tensor("x")->f32();
  const float* y = ex->tensor("y")->f32();
  for (int i = 0; i < 1000; ++i) {
    const double s = 1 / (1 + std::exp(-std::tanh(std::exp(double(xv[i])))));
    EXPECT_NEAR(y[i], s * s * s * s, 1e-5) << i;
  }
}

// A RESHAPE (a view, OPF_VIEW) whose input dies there takes over the input's slot and copies
// nothing; the values come through.
TEST(MemoryPlan, ViewTakesItsDyingInputsSlot) {
  Context ctx;
  unfused(ctx);
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {4, 250});
  Var a = exp(x);
  Var b = reshape(a, {1000});
  g.output(neg(b), "y");
  ASSERT_TRUE(g.status()) << g.status().message();
  auto ex = prepared(p);
  ASSERT_TRUE(ex);
  const MemoryPlan& plan = ex->memory_plan();
  EXPECT_EQ(slot_of(plan, b).in_place_of, a.id());
  EXPECT_EQ(slot_of(plan, b).offset, slot_of(plan, a).offset);
  fill_inputs(ctx, p);
  ex->run();
  const float* xv = ex->tensor("x")->f32();
  const float* y = ex->tensor("y")->f32();
  for (int i = 0; i < 1000; ++i) EXPECT_NEAR(y[i], -std::exp(double(xv[i])), 1e-5) << i;
}

// A broadcast input is never written over: its slot is smaller than the output.
TEST(MemoryPlan, NoInPlaceOverABroadcastInput) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {8, 16});
  Var r = g.input("r", {16});
  Var row = exp(r);                // [16], dies at the first ADD
  Var sm = softmax(x);             // [8, 16], dies there too
  Var sum = row + sm;              // over sm, input 1
  Var row2 = exp(r);
  Var sum2 = x + row2;             // x is an input and row2 broadcast: a slot of its own
  g.output(sum * sum2, "y");
  ASSERT_TRUE(g.status()) << g.status().message();
  const MemoryPlan plan = plan_memory(p);
  EXPECT_EQ(slot_of(plan, sum).in_place_of, sm.id());
  EXPECT_EQ(slot_of(plan, sum2).in_place_of, NO_TENSOR);
  EXPECT_TRUE(verify_plan(p, plan));
}

// ---- what is not planned ----

void mlp(Graph& g, int64_t batch, bool train) {
  Var x = g.input("x", {batch, 784});
  Var h = relu(linear(relu(linear(x, 256)), 128));
  if (train) {
    Var labels = g.input("labels", {batch}, DType::I32);
    g.output(softmax_ce(linear(h, 10), labels), "loss");
    ASSERT_TRUE(make_trainable(g.program(), g.program().find("loss"), sgd(0.01, 0.9)));
  } else {
    g.output(softmax(linear(h, 10)), "probs");
  }
  ASSERT_TRUE(g.status()) << g.status().message();
}

TEST(MemoryPlan, OutputsGradientsAndPersistentTensorsKeepTheirStorage) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  mlp(g, 8, true);
  const MemoryPlan plan = plan_memory(p);
  const Uses u(p);
  size_t private_temporaries = 0;
  for (TensorId id : p.tensors()) {
    const TensorDesc& d = p.desc(id);
    const bool observable = u.observable(id);
    if (d.role == Role::TEMPORARY && !observable) ++private_temporaries;
    if (observable) {
      EXPECT_FALSE(plan.find(id)) << d.name;
    }
  }
  EXPECT_EQ(plan.tensors.size(), private_temporaries);
  for (const char* name : {"loss", "x", "labels", "w0", "w0.grad", "b2.grad", "w0.mom", "opt.t"})
    EXPECT_FALSE(plan.find(p.find(name))) << name;
}

// ---- the MLP figures (docs/memory.md) ----

std::string read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The MLP recorded by the shell and prepared at `opt_level`.
struct Mlp {
  Context ctx{7};
  Program p{ctx};
  std::unique_ptr<Executor> ex;
  Mlp(int64_t batch, bool train, int opt_level = 1) {
    ctx.set_opt_level(opt_level);
    Graph g(p);
    mlp(g, batch, train);
    ex = prepared(p);
  }
  // The sample listing docs/memory.md's command reads is this program.
  void expect_sample(const std::string& path) const {
    Context c;
    Program sample(c);
    Status s = program_parse(read(path), path, &sample);
    ASSERT_TRUE(s) << s.message();
    EXPECT_EQ(program_print(sample), program_print(p)) << path << " is not what the shell records";
  }
};

TEST(MemoryPlan, MlpInferenceArenaIsAFewKiB) {
  Mlp m(1, false);
  m.expect_sample("samples/listing/mlp_b1_infer.nnasm");
  ASSERT_TRUE(m.ex);
  const MemoryPlan& plan = m.ex->memory_plan();
  // [1,256] and [1,128] activations; the logits reuse the first one's slot.
  EXPECT_EQ(plan.arena_bytes, 1024u + 512u);
  EXPECT_EQ(plan.arena_bytes, plan.peak_bytes);
  EXPECT_EQ(plan.unplanned_bytes, 1024u + 512u + 64u);
}

// Batch 64, 784-256-128-10, SGD with momentum. As run (the optimizer fused both ReLUs into their
// LINEARs), the arena is the peak live set — the first hidden activation, the second one's
// gradient and the first one's, at the MATMUL making the latter — so no placement does better:
// 160 KiB of 293.1. The program as written, planned without optimizing, keeps its
// pre-activations in place: 160 KiB of 389.1, under half.
TEST(MemoryPlan, MlpTrainingArenaIsThePeakLiveSet) {
  Mlp m(64, true);
  m.expect_sample("samples/listing/mlp_b64_train.nnasm");
  ASSERT_TRUE(m.ex);
  const MemoryPlan& plan = m.ex->memory_plan();
  const size_t kib = 1024;
  EXPECT_EQ(plan.arena_bytes, plan.peak_bytes);
  EXPECT_EQ(plan.arena_bytes, (64 + 32 + 64) * kib);
  EXPECT_EQ(plan.unplanned_bytes, 300160u);  // 54.6%
  const MemoryPlan as_written = plan_memory(m.p);
  EXPECT_TRUE(verify_plan(m.p, as_written));
  EXPECT_EQ(as_written.arena_bytes, as_written.peak_bytes);
  EXPECT_EQ(as_written.arena_bytes, (64 + 32 + 64) * kib);
  EXPECT_EQ(as_written.unplanned_bytes, 398464u);  // 41.1%
  EXPECT_LE(as_written.arena_bytes * 2, as_written.unplanned_bytes);
}

// Training with the arena gives what training with storage of its own gives.
TEST(MemoryPlan, MlpTrainingMatchesTheUnplannedRun) {
  std::vector<std::vector<float>> results[2];
  for (int opt : {0, 1}) {
    Mlp m(64, true, opt);
    ASSERT_TRUE(m.ex);
    EXPECT_EQ(m.ex->memory_plan().tensors.empty(), opt == 0);
    fill_inputs(m.ctx, m.p);
    for (int s = 0; s < 3; ++s) m.ex->train_step();
    for (const char* name : {"loss", "w0", "b0", "w1", "w2", "b2", "w0.grad", "w2.grad"}) {
      const Tensor* t = m.ex->tensor(name);
      results[opt].emplace_back(t->f32(), t->f32() + t->numel());
    }
  }
  for (size_t k = 0; k < results[0].size(); ++k)
    for (size_t i = 0; i < results[0][k].size(); ++i)
      ASSERT_NEAR(results[0][k][i], results[1][k][i], 1e-5 + 1e-4 * std::fabs(results[0][k][i])) << k << " " << i;
}

// ---- the verifier ----

TEST(MemoryPlan, VerifierRejectsOverlapsOfLiveTensors) {
  FanOut f;
  const MemoryPlan good = plan_memory(f.p);
  ASSERT_TRUE(verify_plan(f.p, good));
  // b is live while a is: the same slot is wrong.
  Status s = verify_plan(f.p, f.moved(f.b, slot_of(good, f.a).offset));
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("%" + f.b.name()), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("live together"), std::string::npos) << s.message();
  // In place, but a line off: a partial overlap is never sanctioned.
  MemoryPlan shifted = f.moved(f.c, slot_of(good, f.a).offset + 64);
  shifted.arena_bytes += 64;
  EXPECT_FALSE(verify_plan(f.p, shifted));
}

TEST(MemoryPlan, VerifierRejectsBadSlots) {
  FanOut f;
  const MemoryPlan good = plan_memory(f.p);
  Status s = verify_plan(f.p, f.moved(f.a, 32));
  EXPECT_NE(s.message().find("aligned"), std::string::npos) << s.message();
  s = verify_plan(f.p, f.moved(f.a, good.arena_bytes));
  EXPECT_NE(s.message().find("outside the arena"), std::string::npos) << s.message();
  MemoryPlan with_output = good;
  with_output.add(PlannedTensor{f.y.id(), 0, 256, 4, 4, NO_TENSOR});
  s = verify_plan(f.p, with_output);
  EXPECT_NE(s.message().find("not a temporary private"), std::string::npos) << s.message();
  MemoryPlan twice = good;
  twice.add(good.tensors[0]);
  s = verify_plan(f.p, twice);
  EXPECT_NE(s.message().find("twice"), std::string::npos) << s.message();
}

// ---- the executor's arena ----

TEST(MemoryPlan, EachExecutorOwnsItsArena) {
  FanOut f;
  auto first = prepared(f.p);
  ASSERT_TRUE(first);
  Tensor* a = first->tensor(f.a.name());
  ASSERT_TRUE(a);
  void* const slot = a->arena_slot;
  ASSERT_NE(slot, nullptr);
  EXPECT_EQ(a->f32(), slot);
  EXPECT_FALSE(a->data.data());  // no storage of its own
  EXPECT_EQ(first->tensor("y")->arena_slot, nullptr);
  // The context's tensor is not the executor's record and has no slot.
  const Tensor& in_context = f.ctx.at(f.a.id());
  EXPECT_NE(&in_context, a);
  EXPECT_EQ(in_context.arena_slot, nullptr);
  const std::vector<float> want = f.run(*first);

  // A second planned executor of the same program has its own slot and leaves the first's alone.
  auto second = prepared(f.p);
  ASSERT_TRUE(second);
  Tensor* a2 = second->tensor(f.a.name());
  ASSERT_TRUE(a2);
  EXPECT_NE(a2, a);
  EXPECT_NE(a2->arena_slot, slot);
  EXPECT_EQ(first->tensor(f.a.name())->arena_slot, slot);

  // So does an executor that does not plan: the temporary gets storage in the context.
  f.ctx.set_opt_level(0);
  auto unplanned = prepared(f.p);
  ASSERT_TRUE(unplanned);
  EXPECT_TRUE(unplanned->tensor(f.a.name())->data.data());
  EXPECT_EQ(first->tensor(f.a.name())->arena_slot, slot);
  EXPECT_EQ(f.run(*unplanned), want);

  // Each runs right, in any order, and one's end does not touch the other.
  Tensor& y = f.ctx.at(f.y.id());
  std::fill(y.f32(), y.f32() + y.numel(), 0.f);
  EXPECT_EQ(f.run(*second), want);
  second.reset();
  std::fill(y.f32(), y.f32() + y.numel(), 0.f);
  EXPECT_EQ(f.run(*first), want);
  EXPECT_EQ(first->tensor(f.a.name())->arena_slot, slot);
}

// An instance's planned temporaries are its own records too, in the instance's arena.
TEST(MemoryPlan, AnInstanceHasItsOwnArenaRecords) {
  FanOut f;
  auto ex = prepared(f.p);
  ASSERT_TRUE(ex);
  auto inst = ex->instantiate();
  ASSERT_TRUE(inst) << inst.status().message();
  Tensor* a = ex->tensor(f.a.name());
  Tensor* ai = (*inst)->tensor(f.a.name());
  ASSERT_TRUE(a && ai);
  EXPECT_NE(ai->arena_slot, nullptr);
  EXPECT_NE(ai->arena_slot, a->arena_slot);
  EXPECT_EQ((*inst)->data(f.a.id()), ai->arena_slot);
}

// Planning and its check stay cheap on long programs: 3,000 instructions with fan-out.
TEST(MemoryPlan, LongProgramsArePlannedAndVerified) {
  Context ctx;
  unfused(ctx);
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {16, 16});
  Var h = x, skip = exp(x);
  for (int i = 0; i < 1000; ++i) {
    Var s = softmax(h);           // keeps h live one more instruction
    h = tanh(h) + s;              // in place over tanh's output
    if (i % 10 == 9) skip = skip * h;  // a long-lived value read every ten steps
  }
  g.output(h + skip, "y");
  ASSERT_TRUE(g.status()) << g.status().message();
  ASSERT_GT(p.code().size(), 3000u);
  auto ex = prepared(p);
  ASSERT_TRUE(ex);
  EXPECT_EQ(ex->memory_plan().arena_bytes, ex->memory_plan().peak_bytes);
  EXPECT_LE(ex->memory_plan().arena_bytes, 4 * 1024u);
}

}  // namespace
}  // namespace nnasm

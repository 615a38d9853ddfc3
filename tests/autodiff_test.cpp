// Autodiff (engine/autodiff.h) as a user meets it: the backward section it writes (read through
// the listing), the gradients it computes, the work it leaves out, its memo, and the round trip of
// a differentiated program through the listing printer and parser.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/autodiff.h"
#include "engine/executor.h"
#include "serialize/listing.h"
#include "shell/shell.h"

namespace nnasm {
namespace {

std::unique_ptr<Executor> prepared(const Program& p) {
  auto ex = Executor::prepare(p);
  EXPECT_TRUE(ex) << ex.status().message();
  return ex ? std::move(ex.value()) : nullptr;
}

std::vector<Instruction> section(const Program& p, Section s) {
  const auto [b, e] = p.section_range(s);
  return std::vector<Instruction>(p.code().begin() + static_cast<std::ptrdiff_t>(b),
                                  p.code().begin() + static_cast<std::ptrdiff_t>(e));
}

// The text of one section of a listing, from its label to the next blank line.
std::string listing_section(const std::string& listing, const std::string& label) {
  const size_t b = listing.find(label + ":\n");
  if (b == std::string::npos) return "";
  const size_t e = listing.find("\n\n", b);
  return listing.substr(b, e == std::string::npos ? std::string::npos : e - b);
}

// f = x0·x0 + x0·x1 (the neon example): ∂f/∂x0 = 2·x0 + x1, ∂f/∂x1 = x0.
struct Neon {
  Context ctx;
  Program p{ctx};
  Graph g{p};
  Var x0, x1, f;
  Neon() {
    x0 = g.input("x0", {});
    x1 = g.input("x1", {});
    f = x0 * x0 + x0 * x1;
    g.output(f, "f");
  }
};

TEST(Autodiff, NeonExampleBackwardListing) {
  Neon n;
  ASSERT_TRUE(n.g.status()) << n.g.status().message();
  const Result<std::vector<TensorId>> gs = grad(n.p, n.f.id(), {n.x0.id(), n.x1.id()});
  ASSERT_TRUE(gs) << gs.status().message();
  ASSERT_EQ(gs.value().size(), 2u);
  EXPECT_EQ(n.p.desc(gs.value()[0]).name, "x0.grad");
  EXPECT_EQ(n.p.desc(gs.value()[1]).name, "x1.grad");

  const std::string listing = program_print(n.p);
  const std::string bwd = listing_section(listing, "backward");
  ASSERT_FALSE(bwd.empty()) << listing;
  // Seed, the two products' rules (x0 appears in both), the accumulation of x0's three partials.
  std::vector<Opcode> ops;
  for (const Instruction& ins : section(n.p, Section::BACKWARD)) ops.push_back(ins.op);
  const std::vector<Opcode> want = {Opcode::FILL, Opcode::MUL, Opcode::MUL, Opcode::ADD,
                                    Opcode::MUL,  Opcode::MUL, Opcode::ADD};
  EXPECT_EQ(ops, want) << bwd;
  EXPECT_NE(bwd.find("FILL         %f -> %"), std::string::npos) << bwd;
  EXPECT_NE(bwd.find("value=1"), std::string::npos) << bwd;
  EXPECT_NE(bwd.find(", %x0 -> %x1.grad"), std::string::npos) << bwd;
  EXPECT_NE(bwd.find("ADD "), std::string::npos) << bwd;
  EXPECT_NE(bwd.find("-> %x0.grad  alpha=1 beta=1"), std::string::npos) << bwd;
  // The forward section is untouched and comes first.
  EXPECT_LT(listing.find("forward:"), listing.find("backward:"));
  EXPECT_EQ(section(n.p, Section::FORWARD).size(), 3u);
}

TEST(Autodiff, NeonExampleNumerically) {
  Neon n;
  const Result<std::vector<TensorId>> gs = grad(n.p, n.f.id(), {n.x0.id(), n.x1.id()});
  ASSERT_TRUE(gs) << gs.status().message();
  auto ex = prepared(n.p);
  ASSERT_TRUE(ex);
  const float points[][2] = {{0, 0}, {1, 2}, {-3, 0.5f}, {2.5f, -4}, {1e3f, 1e-3f}};
  for (const auto& pt : points) {
    ex->tensor("x0")->f32()[0] = pt[0];
    ex->tensor("x1")->f32()[0] = pt[1];
    ex->run(Section::FORWARD);
    ex->run(Section::BACKWARD);
    EXPECT_EQ(ex->tensor("f")->f32()[0], pt[0] * pt[0] + pt[0] * pt[1]);
    EXPECT_EQ(ex->tensor("x0.grad")->f32()[0], 2 * pt[0] + pt[1]) << pt[0] << ", " << pt[1];
    EXPECT_EQ(ex->tensor("x1.grad")->f32()[0], pt[0]) << pt[0] << ", " << pt[1];
  }
}

TEST(Autodiff, AskingAgainReturnsTheSameTensorsAndAppendsNothing) {
  Neon n;
  const Result<std::vector<TensorId>> first = grad(n.p, n.f.id(), {n.x0.id(), n.x1.id()});
  ASSERT_TRUE(first) << first.status().message();
  const size_t code = n.p.code().size(), tensors = n.p.tensors().size();
  const std::string listing = program_print(n.p);
  const Result<std::vector<TensorId>> second = grad(n.p, n.f.id(), {n.x0.id(), n.x1.id()});
  ASSERT_TRUE(second) << second.status().message();
  EXPECT_EQ(second.value(), first.value());
  const Result<std::vector<TensorId>> reversed = grad(n.p, n.f.id(), {n.x1.id(), n.x0.id()});
  ASSERT_TRUE(reversed) << reversed.status().message();
  EXPECT_EQ(reversed.value(), (std::vector<TensorId>{first.value()[1], first.value()[0]}));
  EXPECT_EQ(n.p.code().size(), code);
  EXPECT_EQ(n.p.tensors().size(), tensors);
  EXPECT_EQ(program_print(n.p), listing);
}

// A two-layer net: nobody asked for d loss / d x, so no MATMUL computes it (the first layer's
// dY·W0ᵀ), and the target gets no gradient code (MSE's −g for it).
TEST(Autodiff, OnlyNeededWorkIsGenerated) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {4, 3});
  Var t = g.input("t", {4, 2});
  Var k = g.constant("k", {2}, {0.5, -1});
  LinearOptions l0, l1;
  l0.name = "l0";
  l1.name = "l1";
  Var z = linear(tanh(linear(x, 5, l0)), 2, l1);
  Var y = z * k;
  Var loss = mse(y, t);
  ASSERT_TRUE(g.status()) << g.status().message();
  const Result<std::vector<std::pair<TensorId, TensorId>>> grads = backward(p, loss.id());
  ASSERT_TRUE(grads) << grads.status().message();
  std::vector<std::string> names;
  for (const auto& [w, gw] : grads.value()) names.push_back(p.desc(gw).name);
  EXPECT_EQ(names, (std::vector<std::string>{"l0.w.grad", "l0.b.grad", "l1.w.grad", "l1.b.grad"}));

  const TensorId w0 = p.find("l0.w"), w1 = p.find("l1.w");
  ASSERT_NE(w0, NO_TENSOR);
  ASSERT_NE(w1, NO_TENSOR);
  int input_gradients = 0;
  for (const Instruction& ins : section(p, Section::BACKWARD)) {
    const auto reads = [&](TensorId id) { return std::find(ins.in.begin(), ins.in.end(), id) != ins.in.end(); };
    if (ins.op == Opcode::MATMUL && ins.i(1) == 1) {
      ++input_gradients;
      EXPECT_FALSE(reads(w0)) << "the gradient of %x is computed: " << program_print(p);
      EXPECT_EQ(ins.in[1], w1);  // the hidden layer's input gradient is needed
    }
    EXPECT_NE(ins.op, Opcode::NEG) << "the target got gradient code: " << program_print(p);
    // k's gradient would be dy·z: nothing in the backward section needs z.
    EXPECT_FALSE(reads(z.id())) << "the gradient of @k is computed: " << program_print(p);
  }
  EXPECT_EQ(input_gradients, 1);
  for (const char* absent : {"x.grad", "t.grad", "k.grad"}) EXPECT_EQ(p.find(absent), NO_TENSOR) << absent;
}

TEST(Autodiff, SeveralUsesAccumulate) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {5});
  Var y = x * x + 3.f * x + exp(x);
  ASSERT_TRUE(g.status()) << g.status().message();
  const Result<std::vector<TensorId>> gs = grad(p, y.id(), {x.id()});
  ASSERT_TRUE(gs) << gs.status().message();
  int adds = 0;
  for (const Instruction& ins : section(p, Section::BACKWARD)) adds += ins.op == Opcode::ADD;
  EXPECT_GE(adds, 3) << "four uses of x, so at least three accumulations: " << program_print(p);
  auto ex = prepared(p);
  ASSERT_TRUE(ex);
  const float xs[] = {-2, -0.5f, 0, 0.75f, 3};
  std::copy(xs, xs + 5, ex->tensor("x")->f32());
  ex->run(Section::FORWARD);
  ex->run(Section::BACKWARD);
  for (int i = 0; i < 5; ++i)
    EXPECT_NEAR(ex->tensor("x.grad")->f32()[i], 2 * xs[i] + 3 + std::exp(static_cast<double>(xs[i])), 1e-5) << xs[i];
}

TEST(Autodiff, IndependentTensorGetsAZeroGradient) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var a = g.input("a", {2, 3}), b = g.input("b", {3, 2});
  Var y = reduce_sum(square(a));
  ASSERT_TRUE(g.status()) << g.status().message();
  const Result<std::vector<TensorId>> gs = grad(p, y.id(), {b.id(), a.id()});
  ASSERT_TRUE(gs) << gs.status().message();
  const TensorDesc& gb = p.desc(gs.value()[0]);
  EXPECT_EQ(gb.name, "b.grad");
  EXPECT_EQ(gb.type, b.type());
  auto ex = prepared(p);
  ASSERT_TRUE(ex);
  for (int i = 0; i < 6; ++i) {
    ex->tensor("a")->f32()[i] = static_cast<float>(i) - 2.5f;
    ex->tensor("b")->f32()[i] = 9;
  }
  ex->run(Section::FORWARD);
  ex->run(Section::BACKWARD);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(ex->tensor("b.grad")->f32()[i], 0.f);
    EXPECT_EQ(ex->tensor("a.grad")->f32()[i], 2 * (static_cast<float>(i) - 2.5f));
  }
}

TEST(Autodiff, GradientNamesAvoidTakenNames) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {2});
  Var taken = g.input("x.grad", {2});
  Var y = reduce_sum(x * taken);
  ASSERT_TRUE(g.status()) << g.status().message();
  const Result<std::vector<TensorId>> gs = grad(p, y.id(), {x.id()});
  ASSERT_TRUE(gs) << gs.status().message();
  EXPECT_EQ(p.desc(gs.value()[0]).name, "x.grad.1");
  EXPECT_EQ(p.find("x.grad"), taken.id());
}

TEST(Autodiff, Errors) {
  Neon n;
  Context other;
  Program q(other);
  Graph h(q);
  Var z = h.input("z", {});
  EXPECT_FALSE(grad(n.p, z.id(), {n.x0.id()}).is_ok());
  EXPECT_FALSE(grad(n.p, n.f.id(), {z.id()}).is_ok());
  EXPECT_FALSE(grad(n.p, NO_TENSOR, {n.x0.id()}).is_ok());
  const Result<std::vector<std::pair<TensorId, TensorId>>> none = backward(n.p, n.f.id());
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.status().message().find("depends on no param"), std::string::npos) << none.status().message();
  EXPECT_FALSE(n.p.has_section(Section::BACKWARD));
}

// A small classifier, differentiated with respect to its params and its input, printed, parsed
// back into a fresh Context with the same seed, and run on the same data: the same gradients,
// bit for bit, and the same listing again.
TEST(Autodiff, BackwardProgramRoundTripsThroughTheListing) {
  const uint64_t seed = 1234;
  Context ctx(seed);
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {3, 4});
  Var t = g.input("t", {3}, DType::I32);
  LinearOptions o;
  o.name = "fc";
  Var h = gelu(linear(x, 6, o), true);
  Var logits = concat({slice(h, 1, 0, 3), reduce_max(h, -1, true) * h}, 1);
  Var loss = softmax_ce(logits, t) + 0.1f * reduce_mean(reduce_sum(square(h), 1), 0);
  g.output(loss, "loss");
  ASSERT_TRUE(g.status()) << g.status().message();
  std::vector<TensorId> wrt = {x.id(), p.find("fc.w"), p.find("fc.b")};
  const Result<std::vector<TensorId>> gs = grad(p, loss.id(), wrt);
  ASSERT_TRUE(gs) << gs.status().message();

  const std::string text = program_print(p);
  Context ctx2(seed);
  Program q(ctx2);
  const Status parsed = program_parse(text, "roundtrip.nnasm", &q);
  ASSERT_TRUE(parsed) << parsed.message() << "\n" << text;
  EXPECT_EQ(program_print(q), text);
  ASSERT_TRUE(q.has_section(Section::BACKWARD));
  EXPECT_EQ(section(q, Section::BACKWARD).size(), section(p, Section::BACKWARD).size());

  auto e1 = prepared(p), e2 = prepared(q);
  ASSERT_TRUE(e1 && e2);
  for (int round = 0; round < 3; ++round) {
    for (Executor* e : {e1.get(), e2.get()}) {
      for (int i = 0; i < 12; ++i) e->tensor("x")->f32()[i] = std::sin(1.7f * static_cast<float>(i + 5 * round));
      for (int i = 0; i < 3; ++i) e->tensor("t")->i32()[i] = (i + round) % 4;
      e->run(Section::FORWARD);
      e->run(Section::BACKWARD);
    }
    for (const char* name : {"loss", "x.grad", "fc.w.grad", "fc.b.grad", "fc.w"}) {
      const Tensor* a = e1->tensor(name);
      const Tensor* b = e2->tensor(name);
      ASSERT_TRUE(a && b) << name;
      ASSERT_EQ(a->numel(), b->numel());
      EXPECT_EQ(std::memcmp(a->data.data(), b->data.data(), static_cast<size_t>(a->numel()) * 4), 0) << name;
      for (int64_t i = 0; i < a->numel(); ++i) EXPECT_TRUE(std::isfinite(a->f32()[i])) << name;
    }
  }
  // The parsed program finds its gradients by name rather than generating them again.
  const size_t code = q.code().size();
  const Result<std::vector<std::pair<TensorId, TensorId>>> found = backward(q, q.find("loss"));
  ASSERT_TRUE(found) << found.status().message();
  EXPECT_EQ(q.code().size(), code);
  ASSERT_EQ(found.value().size(), 2u);
  EXPECT_EQ(q.desc(found.value()[0].second).name, "fc.w.grad");
  EXPECT_EQ(q.desc(found.value()[1].second).name, "fc.b.grad");
}

}  // namespace
}  // namespace nnasm

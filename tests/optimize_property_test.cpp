// The optimizer against random programs: for hundreds of seeds, a generator records a random
// valid program (elementwise ops with random immediates, SCALE chains, MATMUL + bias, LINEAR,
// activations, transposes and reshapes in pairs, fills that make identities, repeated
// subexpressions, constants, and fan-out: every value may be read again later), adds the
// gradient of a loss with respect to the input and every param, and runs it at -O0 and at -O1.
// Outputs and gradients must agree within float reassociation error.
#include <cmath>
#include <map>

#include <gtest/gtest.h>

#include "engine/autodiff.h"
#include "engine/executor.h"
#include "engine/passes/pass.h"
#include "jit/rng.h"
#include "shell/shell.h"

namespace nnasm {
namespace {

constexpr int SEEDS = 300;

struct Recorded {
  std::vector<TensorId> outputs;  // values, then gradients
};

// Records a random program over [rows, n] values into p.
Recorded record_random(Program& p, uint64_t seed) {
  Rng r(seed);
  Graph g(p);
  const int64_t rows = 1 + static_cast<int64_t>(r.below(4)), n = 1 + static_cast<int64_t>(r.below(9));
  Var x = g.input("x", {rows, n});
  Var target = g.input("target", {rows, n});
  Var w = g.param("w", {n, n}, {InitKind::UNIFORM, -0.5, 0.5});
  Var b = g.param("b", {n}, {InitKind::UNIFORM, -0.5, 0.5});
  Var c = g.constant("c", {n}, [&] {
    std::vector<double> v;
    for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<float>(r.uniform() - 0.5));
    return v;
  }());
  std::vector<Var> pool{x, x, tanh(x)};
  auto pick = [&] { return pool[r.below(pool.size())]; };
  auto alpha = [&] {
    const float choices[] = {1.f, -1.f, 0.5f, 2.f, 0.25f};
    return choices[r.below(5)];
  };
  const int steps = 4 + static_cast<int>(r.below(14));
  for (int s = 0; s < steps; ++s) {
    Var a = pick(), v;
    switch (r.below(16)) {
      case 0: v = scale(a, alpha()); break;
      case 1: v = scale(scale(a, alpha()), alpha()); break;
      case 2: v = add(a, scale(pick(), alpha()), alpha(), alpha()); break;
      case 3: v = scale(a, alpha()) - pick(); break;
      case 4: v = relu(a); break;
      case 5: v = sigmoid(a) * pick(); break;
      case 6: v = tanh(a); break;
      case 7: v = leakyrelu(a, 0.1f); break;
      case 8: v = matmul(a, w) + b; break;
      case 9: v = relu(matmul(a, w) + b); break;
      case 10: v = transpose(transpose(a, {1, 0}), {1, 0}); break;
      case 11: v = reshape(reshape(a, {rows * n}), {rows, n}); break;
      case 12: v = a + fill(a, 0) * pick(); break;
      case 13: v = tanh(a) + tanh(a); break;  // the same subexpression twice
      case 14: v = maximum(a, pick()) + c * scale(c, 2.f); break;  // constants fold
      case 15: v = linear(a, w, b, Activation::TANH); break;
    }
    pool.push_back(v);
  }
  Recorded rec;
  Var last = pool.back();
  g.output(last, "y");
  Var other = pool[r.below(pool.size())];
  if (other.id() != last.id() && other.id() != x.id()) g.output(other, "z");
  EXPECT_TRUE(g.status()) << g.status().message();
  Var loss = mse(last, target) + reduce_sum(reduce_sum(other * other));
  g.output(loss, "loss");
  rec.outputs = p.outputs();
  Result<std::vector<TensorId>> grads = grad(p, loss.id(), {x.id(), w.id(), b.id()});
  EXPECT_TRUE(grads) << grads.status().message();
  if (grads) rec.outputs.insert(rec.outputs.end(), grads.value().begin(), grads.value().end());
  return rec;
}

// Every recorded output's values after forward + backward at `level`; *n_instructions: how many
// instructions ran.
std::vector<std::vector<float>> run_at(Program& p, const Recorded& rec, int level, size_t* n_instructions) {
  Context& ctx = *Context::of(p);
  ctx.set_opt_level(level);
  auto ex = Executor::prepare(p);
  EXPECT_TRUE(ex) << ex.status().message();
  if (!ex) return {};
  for (const char* name : {"x", "target"}) {
    Tensor* t = ex.value()->tensor(name);
    for (int64_t i = 0; i < t->numel(); ++i) t->f32()[i] = std::sin(1.3f * static_cast<float>(i) + (name[0] == 'x' ? 0.f : 2.f));
  }
  ex.value()->run(Section::FORWARD);
  ex.value()->run(Section::BACKWARD);
  *n_instructions = ex.value()->program().code().size();
  std::vector<std::vector<float>> v;
  for (TensorId id : rec.outputs) {
    const Tensor& t = ctx.at(id);
    v.emplace_back(t.f32(), t.f32() + t.numel());
  }
  return v;
}

TEST(OptimizeProperty, RandomProgramsComputeTheSameAtO0AndO1) {
  int shrunk = 0;
  for (uint64_t seed = 1; seed <= SEEDS; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    Context ctx(seed);
    Program p(ctx);
    const Recorded rec = record_random(p, seed);
    if (::testing::Test::HasFailure()) return;
    size_t n0 = 0, n1 = 0;
    const auto want = run_at(p, rec, 0, &n0);
    const auto have = run_at(p, rec, 1, &n1);
    ASSERT_EQ(want.size(), have.size());
    for (size_t k = 0; k < want.size(); ++k) {
      ASSERT_EQ(want[k].size(), have[k].size());
      for (size_t i = 0; i < want[k].size(); ++i) {
        const float a = want[k][i], b = have[k][i];
        ASSERT_NEAR(a, b, 1e-5 + 1e-4 * std::fabs(a)) << ctx.at(rec.outputs[k]).desc.name << "[" << i << "]";
      }
    }
    shrunk += n1 < n0;
  }
  // The generator makes foldable patterns often: most programs get shorter.
  EXPECT_GT(shrunk, SEEDS / 2);
}

}  // namespace
}  // namespace nnasm

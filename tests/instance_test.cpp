// Executor::instantiate: an instance computes what its template computes, bitwise, at every ISA
// level and with parallel parts; it writes only its own memory (the template's outputs stay as
// they were); run_steps in slices equals one run.
#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "tests/jit_levels.h"
#include "tests/test_programs.h"

namespace nnasm {
namespace {

void fill(float* p, int64_t n, float phase) {
  for (int64_t i = 0; i < n; ++i) p[i] = std::sin(0.31f * static_cast<float>(i) + phase);
}

std::vector<float> read(const Executor& ex, const Program& p, const std::string& name) {
  const float* d = static_cast<const float*>(ex.data(p.find(name)));
  return std::vector<float>(d, d + p.desc(p.find(name)).type.shape.numel());
}

TEST(Instance, ComputesWhatItsTemplateComputesAndWritesOnlyItsOwnMemory) {
  for (Isa isa : jit_levels()) {
    SCOPED_TRACE(isa_name(isa));
    Context ctx;
    ctx.set_jit(JitConfig{true, isa});
    Program p(ctx);
    Graph g(p);
    record_every_op(g);
    ASSERT_TRUE(g.status()) << g.status().message();
    auto ex = Executor::prepare(p);
    ASSERT_TRUE(ex) << ex.status().message();
    Executor& t = *ex.value();
    auto made = t.instantiate();
    ASSERT_TRUE(made) << made.status().message();
    Executor& in = *made.value();
    const Program& run = t.program();
    for (const char* name : {"a", "b"}) EXPECT_NE(t.data(run.find(name)), in.data(run.find(name))) << name;

    fill(static_cast<float*>(t.data(run.find("a"))), 15, 0);
    fill(static_cast<float*>(t.data(run.find("b"))), 5, 1);
    t.run();
    const std::vector<float> y_template = read(t, run, "y");
    fill(static_cast<float*>(in.data(run.find("a"))), 15, 2);
    fill(static_cast<float*>(in.data(run.find("b"))), 5, 3);
    in.run();
    EXPECT_EQ(read(t, run, "y"), y_template);  // the instance's run left the template's output alone
    EXPECT_NE(read(in, run, "y"), y_template);
    fill(static_cast<float*>(in.data(run.find("a"))), 15, 0);
    fill(static_cast<float*>(in.data(run.find("b"))), 5, 1);
    in.run();
    EXPECT_EQ(read(in, run, "y"), y_template);
  }
}

TEST(Instance, ParallelPartsAndSlicedRunsMatch) {
  Context ctx;
  ctx.set_threads(2);
  Program p(ctx);
  Graph g(p);
  Var x = g.input("x", {1, 3, 32, 32});
  Conv2dOptions o;
  o.pad = {1, 1};
  Var h = max_pool2d(relu(batchnorm2d(conv2d(x, 32, {3, 3}, o))), {2, 2});
  g.output(softmax(linear(relu(linear(reshape(h, {1, 32 * 16 * 16}), 512)), 10)), "y");
  ASSERT_TRUE(g.status()) << g.status().message();
  auto ex = Executor::prepare(p);
  ASSERT_TRUE(ex) << ex.status().message();
  Executor& t = *ex.value();
  const Program& run = t.program();
  int parted = 0;
  for (size_t i = 0; i < run.code().size(); ++i) parted += t.parts(i) > 1;
  if (ctx.jit().isa() != Isa::REF) {
    EXPECT_GT(parted, 0);
  }
  auto made = t.instantiate();
  ASSERT_TRUE(made) << made.status().message();
  Executor& in = *made.value();
  fill(static_cast<float*>(t.data(run.find("x"))), 3 * 32 * 32, 0.5f);
  std::memcpy(in.data(run.find("x")), t.data(run.find("x")), 3 * 32 * 32 * 4);
  t.run();
  in.run();
  EXPECT_EQ(read(in, run, "y"), read(t, run, "y"));
  std::memset(in.data(run.find("y")), 0, 40);
  int calls = 1;
  while (!in.run_steps(2)) ++calls;
  const auto [fb, fe] = run.section_range(Section::FORWARD);
  EXPECT_EQ(calls, static_cast<int>((fe - fb + 1) / 2));
  EXPECT_EQ(read(in, run, "y"), read(t, run, "y"));
}

}  // namespace
}  // namespace nnasm

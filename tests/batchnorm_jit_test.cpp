// BATCHNORM2D and BATCHNORM2D_BWD on their generated kernels: the kernels really run at every JIT
// level, in training and in inference, and a training step (forward statistics, running-average
// update, backward sums, SGD) ends with the parameters and running statistics the reference
// kernels give, within the rounding of their different summation orders. The one-op parity
// tables (tests/parity_cases_norm.h) cover the sizes.
#include <cmath>

#include <gtest/gtest.h>

#include "engine/executor.h"
#include "engine/optimizer.h"
#include "shell/shell.h"
#include "tests/jit_levels.h"

namespace nnasm {
namespace {

struct BnModel {
  explicit BnModel(Isa isa) : ctx(11), p(ctx) {
    ctx.set_jit(JitConfig{isa != Isa::REF, isa});
    Graph g(p);
    // A plane of 63 floats: whole vector groups, single vectors and a tail at both levels.
    Var x = g.input("x", {3, 5, 7, 9});
    Var c = conv2d(x, 6, {3, 3}, Conv2dOptions{});
    Var y = batchnorm2d(c);
    g.output(reduce_mean(reshape(square(y), {3 * 6 * 5 * 7}), 0), "loss");
    ok = g.status() && make_trainable(p, p.find("loss"), sgd(0.1f));
    if (!ok) return;
    auto made = Executor::prepare(p);
    ok = static_cast<bool>(made);
    if (!ok) return;
    ex = std::move(made.value());
    Tensor* xt = ex->tensor("x");
    for (int64_t i = 0; i < xt->numel(); ++i) xt->f32()[i] = static_cast<float>(std::sin(0.7 * static_cast<double>(i)) * 2 + 0.5);
  }
  // The '@' tensors' values by name.
  std::vector<std::pair<std::string, std::vector<float>>> persistent() const {
    std::vector<std::pair<std::string, std::vector<float>>> v;
    for (TensorId id : p.tensors()) {
      if (p.desc(id).sigil() != '@') continue;
      const Tensor* t = ex->tensor(p.desc(id).name);
      v.emplace_back(p.desc(id).name, std::vector<float>(t->f32(), t->f32() + t->numel()));
    }
    return v;
  }
  Context ctx;
  Program p;
  std::unique_ptr<Executor> ex;
  bool ok = false;
};

TEST(BatchNormJit, KernelsRunAndTrainAsTheReference) {
  BnModel ref(Isa::REF);
  ASSERT_TRUE(ref.ok);
  for (int step = 0; step < 3; ++step) ref.ex->train_step();
  ref.ex->set_training(false);
  ref.ex->run();
  for (Isa isa : jit_levels()) {
    SCOPED_TRACE(isa_name(isa));
    BnModel m(isa);
    ASSERT_TRUE(m.ok);
    int bn = 0;
    for (size_t i = 0; i < m.ex->program().code().size(); ++i) {
      const Opcode op = m.ex->program().code()[i].op;
      if (op != Opcode::BATCHNORM2D && op != Opcode::BATCHNORM2D_BWD) continue;
      ++bn;
      const std::string k = m.ex->kernel_name(i);
      EXPECT_NE(k.find(op == Opcode::BATCHNORM2D ? "f32_batchnorm2d__" : "f32_batchnorm2d_bwd__"), std::string::npos) << k;
      EXPECT_NE(k.find(isa_name(isa)), std::string::npos) << k;
    }
    EXPECT_EQ(bn, 2);
    for (int step = 0; step < 3; ++step) m.ex->train_step();
    m.ex->set_training(false);
    m.ex->run();
    const auto want = ref.persistent(), got = m.persistent();
    ASSERT_EQ(got.size(), want.size());
    for (size_t t = 0; t < want.size(); ++t)
      for (size_t i = 0; i < want[t].second.size(); ++i)
        ASSERT_NEAR(got[t].second[i], want[t].second[i], 1e-5 + 1e-4 * std::fabs(want[t].second[i])) << want[t].first << "[" << i << "]";
    EXPECT_NEAR(m.ex->tensor("loss")->f32()[0], ref.ex->tensor("loss")->f32()[0], 1e-5);
  }
}

}  // namespace
}  // namespace nnasm

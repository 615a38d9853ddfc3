// export_inference (serialize/export.h): a trained classifier, trained for a few steps, saved and
// loaded, exported: the export has no labels, loss, backward, update or optimizer state, runs in
// inference mode, and computes the trained program's forward outputs bit for bit; and each misuse
// is refused with a message that says what to do.
#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "engine/executor.h"
#include "engine/optimizer.h"
#include "serialize/export.h"
#include "serialize/model_file.h"
#include "shell/shell.h"
#include "tests/temp_dir_test.h"

namespace nnasm {
namespace {

constexpr int64_t kBatch = 4, kIn = 6, kHidden = 5, kClasses = 3;

// x → linear → relu → dropout → linear = logits → softmax = probs; loss = softmax_ce(logits,
// labels), trained by SGD with momentum (so the file carries optimizer state).
void record(Program& p, bool probs) {
  Graph g(p);
  Var x = g.input("x", {kBatch, kIn});
  Var labels = g.input("labels", {kBatch}, DType::I32);
  Var h = relu(linear(x, kHidden));
  g.output(h, "hidden_out");
  Var logits = linear(dropout(h, 0.25f), kClasses);
  if (probs) g.output(softmax(logits), "probs");
  g.output(softmax_ce(logits, labels), "loss");
  ASSERT_TRUE(g.status()) << g.status().message();
  p.desc(p.find("hidden_out")).is_output = false;  // an intermediate, reachable by --output only
  ASSERT_TRUE(make_trainable(p, p.find("loss"), sgd(0.1, 0.9)));
}

void bind(Executor& ex, int step) {
  float* x = ex.tensor("x")->f32();
  for (int i = 0; i < kBatch * kIn; ++i) x[i] = std::sin(0.37f * i + step);
  if (Tensor* y = ex.tensor("labels"))
    for (int i = 0; i < kBatch; ++i) y->i32()[i] = (i + step) % kClasses;
}

class ExportTest : public TempDirTest {
 protected:
  // Trains the classifier for a few steps and saves it as trained.nnm.
  void SetUp() override {
    TempDirTest::SetUp();
    Context ctx(5);
    Program p(ctx);
    record(p, true);
    auto ex = std::move(Executor::prepare(p).value());
    for (int s = 0; s < 5; ++s) {
      bind(*ex, s);
      ex->train_step();
    }
    ASSERT_TRUE(model_save(p, path("trained.nnm"), {ex->run_index()}));
  }
};

TEST_F(ExportTest, KeepsTheForwardOutputsAndDropsTraining) {
  Context tctx;
  Program trained(tctx);
  ASSERT_TRUE(model_load(path("trained.nnm"), &trained));
  ASSERT_EQ(trained_losses(trained), std::vector<TensorId>{trained.find("loss")});

  Context ctx;
  Program exported(ctx);
  const Status s = export_inference(trained, {}, &exported);
  ASSERT_TRUE(s) << s.message();
  ASSERT_TRUE(model_save(exported, path("infer.nnm")));
  Context lctx;
  Program infer(lctx);
  ASSERT_TRUE(model_load(path("infer.nnm"), &infer));

  EXPECT_FALSE(infer.training());
  EXPECT_FALSE(infer.has_section(Section::BACKWARD));
  EXPECT_FALSE(infer.has_section(Section::UPDATE));
  EXPECT_EQ(infer.find("labels"), NO_TENSOR);
  EXPECT_EQ(infer.find("loss"), NO_TENSOR);
  ASSERT_EQ(infer.inputs().size(), 1u);
  EXPECT_EQ(infer.desc(infer.inputs()[0]).name, "x");
  ASSERT_EQ(infer.outputs().size(), 1u);
  EXPECT_EQ(infer.desc(infer.outputs()[0]).name, "probs");
  for (TensorId id : infer.tensors()) EXPECT_NE(infer.desc(id).role, Role::STATE) << infer.desc(id).name;

  // The trained program's forward run in inference mode (dropout off) is the oracle, bit for bit.
  // (Bitwise holds here because every layer's K fits one block: for big layers, kernels of a
  // program that trains its weights read them as they change, and an inference program's may
  // pack them once, which can change the summation order and so the last bits.)
  auto tex = std::move(Executor::prepare(trained).value());
  ASSERT_TRUE(tex->set_training(false));
  auto iex = std::move(Executor::prepare(infer).value());
  for (int step = 0; step < 2; ++step) {
    bind(*tex, step);
    bind(*iex, step);
    tex->run();
    iex->run();
    const Tensor* want = tex->tensor("probs");
    const Tensor* got = iex->tensor("probs");
    ASSERT_EQ(got->numel(), kBatch * kClasses);
    EXPECT_EQ(std::memcmp(got->f32(), want->f32(), sizeof(float) * kBatch * kClasses), 0) << "step " << step;
  }
}

TEST_F(ExportTest, OutputsByNameIncludingAnIntermediate) {
  Context tctx;
  Program trained(tctx);
  ASSERT_TRUE(model_load(path("trained.nnm"), &trained));
  Context ctx;
  Program exported(ctx);
  ExportOptions o;
  o.outputs = {"%hidden_out"};
  const Status s = export_inference(trained, o, &exported);
  ASSERT_TRUE(s) << s.message();
  ASSERT_EQ(exported.outputs().size(), 1u);
  EXPECT_EQ(exported.desc(exported.outputs()[0]).name, "hidden_out");
  EXPECT_EQ(exported.code().size(), 2u) << "the linear layer and its relu, nothing after them";
}

Status export_named(const std::string& file, std::vector<std::string> outputs) {
  Context tctx;
  Program trained(tctx);
  NNASM_TRY(model_load(file, &trained));
  Context ctx;
  Program exported(ctx);
  ExportOptions o;
  o.outputs = std::move(outputs);
  return export_inference(trained, o, &exported);
}

TEST_F(ExportTest, MisuseIsRefusedWithAMessage) {
  Status s = export_named(path("trained.nnm"), {"nope"});
  ASSERT_FALSE(s);
  EXPECT_EQ(s.message(), "--output nope: no tensor named 'nope' (the outputs: %probs, %loss)");
  // A gradient is not computed by the forward section.
  Context tctx;
  Program trained(tctx);
  ASSERT_TRUE(model_load(path("trained.nnm"), &trained));
  std::string grad_name;  // a loaded program has no autodiff memo: find a gradient by its name
  for (TensorId id : trained.tensors())
    if (trained.desc(id).name.find(".grad") != std::string::npos) grad_name = trained.desc(id).name;
  ASSERT_FALSE(grad_name.empty());
  s = export_named(path("trained.nnm"), {grad_name});
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("is not computed by the forward section"), std::string::npos) << s.message();

  // Already an inference model.
  {
    Context ctx;
    Program exported(ctx);
    ASSERT_TRUE(export_inference(trained, {}, &exported));
    ASSERT_TRUE(model_save(exported, path("infer.nnm")));
  }
  s = export_named(path("infer.nnm"), {});
  ASSERT_FALSE(s);
  EXPECT_EQ(s.message(), "already an inference model (it has no backward or update section): nothing to export");

  // Nothing but the loss to keep.
  {
    Context ctx(5);
    Program p(ctx);
    record(p, false);
    ASSERT_TRUE(model_save(p, path("loss_only.nnm")));
  }
  s = export_named(path("loss_only.nnm"), {});
  ASSERT_FALSE(s);
  EXPECT_EQ(s.message(),
            "no forward output besides the loss %loss: name the tensor to keep with --output NAME (e.g. the logits), "
            "or record it as an output");
}

}  // namespace
}  // namespace nnasm

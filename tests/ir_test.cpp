// The IR without a runtime: programs over a DescriptorMap (descriptors alone, no storage, threads,
// kernels or allocator) are built, verified, printed and parsed exactly as over a Context, and
// refused, with a message, where running them would need values.

#include <gtest/gtest.h>

#include "engine/executor.h"
#include "ops/op.h"
#include "serialize/listing.h"
#include "shell/shell.h"
#include "tests/read_text.h"

namespace nnasm {
namespace {

TEST(Ir, GoldenListingsRoundTripOverDescriptorsAlone) {
  for (const char* name : {"tests/golden/mlp.nnasm", "tests/golden/immediates.nnasm", "tests/golden/integers.nnasm"}) {
    const std::string text = read_text(name);
    ASSERT_FALSE(text.empty()) << name;
    DescriptorMap descs(op_semantics());
    Program p(descs);
    Status s = program_parse(text, name, &p);
    ASSERT_TRUE(s) << s.message();
    EXPECT_TRUE(p.finish());
    EXPECT_EQ(program_print(p), text) << name;
    EXPECT_EQ(descs.size(), p.tensors().size());
    EXPECT_FALSE(descs.stores_values());
  }
}

TEST(Ir, ShapeInferenceAndVerificationNeedNoRuntime) {
  DescriptorMap descs(op_semantics());
  Program p(descs);
  Graph g(p);
  Var x = g.input("x", {4, 7});
  Var y = softmax(relu(linear(x, 5)));
  g.output(y, "y");
  ASSERT_TRUE(g.status()) << g.status().message();
  EXPECT_EQ(p.desc(y.id()).type.shape, Shape({4, 5}));
  // The verifier's errors come through the same interface.
  Result<std::vector<TensorId>> r = p.append_new(make_instruction(Opcode::ADD, {x.id(), y.id()}, {}));
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("ADD"), std::string::npos) << r.status().message();
}

TEST(Ir, RunningNeedsAContext) {
  DescriptorMap descs(op_semantics());
  Program p(descs);
  ASSERT_TRUE(program_parse(read_text("tests/golden/mlp.nnasm"), "mlp.nnasm", &p));
  EXPECT_EQ(Context::of(p), nullptr);
  auto ex = Executor::prepare(p);
  ASSERT_FALSE(ex);
  EXPECT_NE(ex.status().message().find("Context"), std::string::npos) << ex.status().message();

  Context ctx;
  Program q(ctx);
  EXPECT_EQ(Context::of(q), &ctx);
}

}  // namespace
}  // namespace nnasm

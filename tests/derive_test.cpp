// The derive section: what it may read, when the executor runs it (before the first forward run,
// then only after the params change), that instances read their template's results, and that the
// derive pass hoists weight computations without changing what a program computes.
#include <vector>

#include <gtest/gtest.h>

#include "engine/context.h"
#include "engine/executor.h"
#include "serialize/listing.h"

namespace nnasm {
namespace {

// y = x · w², the square in the derive section.
constexpr const char* SQUARED_WEIGHT = R"(input %x : f32[3]
param @w : f32[3]  init=ones
output %y

derive:
  SQUARE @w -> %w2

forward:
  MUL %x, %w2 -> %y
)";

std::vector<float> values(const Tensor* t) { return std::vector<float>(t->f32(), t->f32() + t->numel()); }

void set(Tensor* t, std::vector<float> v) { std::copy(v.begin(), v.end(), t->f32()); }

// `text` parsed into p and prepared at -O`opt` (p's context), or null with a test failure.
std::unique_ptr<Executor> prepared(const char* text, Program& p, int opt = 0) {
  Context::of(p)->set_opt_level(opt);
  const Status read = program_parse(text, "t.nnasm", &p);
  EXPECT_TRUE(read) << read.message();
  if (!read) return nullptr;
  auto made = Executor::prepare(p);
  EXPECT_TRUE(made) << made.status().message();
  return made ? std::move(made.value()) : nullptr;
}

TEST(DeriveSection, RunsFirstThenOnlyWhenParamsChange) {
  Context ctx;
  Program p(ctx);
  auto made = prepared(SQUARED_WEIGHT, p);
  ASSERT_TRUE(made);
  Executor& ex = *made;
  set(ex.tensor("x"), {1, 2, 3});
  set(ex.tensor("w"), {2, 3, 4});
  ex.run();
  EXPECT_EQ(values(ex.tensor("y")), (std::vector<float>{4, 18, 48}));
  // Written without saying so, a param does not reach the derived weights: the derive section
  // is off the per-run path.
  set(ex.tensor("w"), {1, 1, 1});
  ex.run();
  EXPECT_EQ(values(ex.tensor("y")), (std::vector<float>{4, 18, 48}));
  ctx.params_changed();
  ex.run();
  EXPECT_EQ(values(ex.tensor("y")), (std::vector<float>{1, 2, 3}));
  // run_steps starts a run the same way.
  set(ex.tensor("w"), {0, 2, 0});
  ctx.params_changed();
  while (!ex.run_steps(1)) {
  }
  EXPECT_EQ(values(ex.tensor("y")), (std::vector<float>{0, 8, 0}));
}

TEST(DeriveSection, InstancesReadTheirTemplatesResults) {
  Context ctx;
  Program p(ctx);
  auto made = prepared(SQUARED_WEIGHT, p);
  ASSERT_TRUE(made);
  Executor& ex = *made;
  set(ex.tensor("w"), {2, 3, 4});
  // The template never ran: instantiate derives first.
  auto inst = ex.instantiate();
  ASSERT_TRUE(inst) << inst.status().message();
  Executor& in = *inst.value();
  const std::vector<float> x = {1, 1, 2};
  std::copy(x.begin(), x.end(), static_cast<float*>(in.data(p.find("x"))));
  in.run();
  const float* y = static_cast<const float*>(in.data(p.find("y")));
  EXPECT_EQ(std::vector<float>(y, y + 3), (std::vector<float>{4, 9, 32}));
}

TEST(DeriveSection, AnUpdateSectionCountsAsAChange) {
  // SGD with a fixed gradient of 1 and rate 0.5 takes w from 3 to 2.5, then 2.
  constexpr const char* text = R"(input %x : f32[1]
param @w : f32[1]  init=ones
state @g : f32[1]  = [1]
state @v : f32[1]  init=zeros
state @lr : f32[]  = [0.5]
output %y

derive:
  SQUARE @w -> %w2

forward:
  MUL %x, %w2 -> %y

update:
  SGD @w, @g, @v, @lr -> @w, @v
)";
  Context ctx;
  Program p(ctx);
  auto made = prepared(text, p);
  ASSERT_TRUE(made);
  Executor& ex = *made;
  set(ex.tensor("x"), {1});
  set(ex.tensor("w"), {3});
  ex.train_step();
  EXPECT_EQ(ex.tensor("y")->f32()[0], 9.f);
  ex.train_step();
  EXPECT_EQ(ex.tensor("y")->f32()[0], 6.25f);
  ex.run();
  EXPECT_EQ(ex.tensor("y")->f32()[0], 4.f);
}

TEST(DeriveSection, ReadsOnlyParamsConstantsAndState) {
  Context ctx;
  Program p(ctx);
  const Status s = program_parse("input %x : f32[3]\noutput %y\n\nderive:\n  SQUARE %x -> %y\n", "t.nnasm", &p);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("t.nnasm:5:3: error: SQUARE: input 1 (%x) is input: the derive section reads only"),
            std::string::npos)
      << s.message();
  Program q(ctx);
  const Status order = program_parse("param @w : f32[3]  init=ones\noutput %y\n\nforward:\n  SQUARE @w -> %t\n\nderive:\n  SQUARE @w -> %y\n",
                                     "t.nnasm", &q);
  ASSERT_FALSE(order);
  EXPECT_NE(order.message().find("section 'derive:' must come before 'forward:'"), std::string::npos) << order.message();
  Program r(ctx);
  const Status random = program_parse("param @w : f32[3]  init=ones\n\nderive:\n  DROPOUT @w -> %d\n", "t.nnasm", &r);
  ASSERT_FALSE(random);
  EXPECT_NE(random.message().find("DROPOUT cannot be in the derive section"), std::string::npos) << random.message();
}

TEST(DeriveSection, PassHoistsWeightsAndComputesTheSame) {
  constexpr const char* text = R"(input %x : f32[2,3]
param @w : f32[4,3]  init=uniform low=-1 high=1
param @b : f32[4]  init=uniform low=-1 high=1
output %y

forward:
  TRANSPOSE @w -> %wt  perm=[1,0]
  SCALE @b -> %b2  alpha=2
  LINEAR %x, %wt, %b2 -> %y
)";
  std::vector<float> got[2];
  for (int opt : {0, 1}) {
    Context ctx;
    Program p(ctx);
    auto made = prepared(text, p, opt);
    ASSERT_TRUE(made);
    Executor& ex = *made;
    const auto [db, de] = ex.program().section_range(Section::DERIVE);
    EXPECT_EQ(de - db, opt ? 2u : 0u);
    set(ex.tensor("x"), {1, -2, 3, 0.5f, 0.25f, -1});
    ex.run();
    got[opt] = values(ex.tensor("y"));
  }
  EXPECT_EQ(got[0], got[1]);
}

}  // namespace
}  // namespace nnasm

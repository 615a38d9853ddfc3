// The optimizer's passes, one golden pair each: tests/passes/PASS.in.nnasm, optimized by that
// pass alone, printed with each changed instruction's reason, must equal PASS.out.nnasm. Every
// listing holds positive cases and negative ones (an intermediate with a second reader, an
// output, one the backward section reads), commented in the input. The optimized program must
// also compute what the original computes. Regenerate the goldens after a deliberate change with
// NNASM_UPDATE_GOLDEN=1 (then read the diff).
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "engine/executor.h"
#include "engine/passes/pass.h"
#include "serialize/listing.h"
#include "tests/read_text.h"

namespace nnasm {
namespace {

// Every f32 input and output value after one run of `p` (forward, then backward when present),
// by name, with the inputs filled deterministically. The program runs as it is (opt level 0).
std::map<std::string, std::vector<float>> run_values(const Program& p) {
  Context::of(p)->set_opt_level(0);
  auto ex = Executor::prepare(p);
  EXPECT_TRUE(ex) << ex.status().message();
  if (!ex) return {};
  for (TensorId id : p.inputs()) {
    Tensor& t = Context::of(p)->at(id);
    for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = std::sin(0.7f * static_cast<float>(i) + 0.3f);
  }
  ex.value()->run(Section::FORWARD);
  ex.value()->run(Section::BACKWARD);
  std::map<std::string, std::vector<float>> v;
  for (TensorId id : p.outputs()) {
    const Tensor& t = Context::of(p)->at(id);
    v[t.desc.name].assign(t.f32(), t.f32() + t.numel());
  }
  return v;
}

class PassGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(PassGolden, MatchesAndComputesTheSame) {
  const std::string name = GetParam();
  const std::string in_path = "tests/passes/" + name + ".in.nnasm", out_path = "tests/passes/" + name + ".out.nnasm";
  Context ctx;
  // The passes that depend on the JIT level see AVX2 (blocks of 8), which every x86-64 machine
  // running the suite has, whatever NNASM_ISA says.
  if (name == "winograd" || name == "nchwc") ctx.set_jit(JitConfig{true, Isa::AVX2});
  Program p(ctx);
  const Status read = program_parse_file(in_path, &p);
  ASSERT_TRUE(read) << read.message();
  Program q = p;
  OptimizeReport report;
  const Status st = optimize(q, 1, &report, {name});
  ASSERT_TRUE(st) << st.message();
  EXPECT_FALSE(report.rewrites.empty()) << name << " rewrote nothing";
  const std::string got = program_print(q, [&q](size_t i) { return q.code()[i].note; });
  if (std::getenv("NNASM_UPDATE_GOLDEN")) std::ofstream(out_path) << got;
  EXPECT_EQ(got, read_text(out_path)) << "(NNASM_UPDATE_GOLDEN=1 rewrites " << out_path << ")";

  // The golden parses back, and both programs compute the same outputs.
  Context ctx2;
  Program back(ctx2);
  const Status parsed = program_parse(got, out_path, &back);
  EXPECT_TRUE(parsed) << parsed.message();
  // A CALC runs its ops' own arithmetic in the chain's order: equal to the last bit. Folding a
  // batch norm into a convolution's weights rounds each product once more.
  // Winograd's transforms and a blocked convolution's order of sums round differently.
  const double tol = name == "chain-fusion" ? 0 : name == "bn-fold" || name == "winograd" || name == "nchwc" ? 1e-5 : 1e-6;
  const auto want = run_values(p), have = run_values(q);
  ASSERT_EQ(want.size(), have.size());
  for (const auto& [tensor, values] : want) {
    ASSERT_TRUE(have.count(tensor)) << tensor;
    ASSERT_EQ(values.size(), have.at(tensor).size()) << tensor;
    for (size_t i = 0; i < values.size(); ++i)
      EXPECT_NEAR(values[i], have.at(tensor)[i], tol + tol * std::fabs(values[i])) << tensor << "[" << i << "]";
  }
}

std::vector<const char*> pass_names() {
  std::vector<const char*> v;
  for (const PassInfo& p : all_passes()) v.push_back(p.name);
  return v;
}

INSTANTIATE_TEST_SUITE_P(EveryPass, PassGolden, ::testing::ValuesIn(pass_names()),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           std::string n = i.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

TEST(Optimize, UnknownPassIsAnError) {
  Context ctx;
  Program p(ctx);
  const Status s = optimize(p, 1, nullptr, {"no-such-pass"});
  EXPECT_EQ(s.message(), "unknown pass 'no-such-pass'");
}

// A second round finds nothing more: every tree was taken whole.
TEST(ChainFusion, ReachesAFixedPointInOneRound) {
  Context ctx;
  Program p(ctx);
  ASSERT_TRUE(program_parse_file("tests/passes/chain-fusion.in.nnasm", &p));
  OptimizeReport report;
  ASSERT_TRUE(optimize(p, 1, &report, {"chain-fusion"}));
  EXPECT_EQ(report.rounds, 2);
}

// At -O1 act-fusion runs first: an activation LINEAR can take becomes its epilogue, and what
// follows fuses on its own.
TEST(ChainFusion, ActivationsGoToLinearFirst) {
  Context ctx;
  Program p(ctx);
  ASSERT_TRUE(program_parse("input %x : f32[2,4]\nparam @w : f32[4,3]\nparam @b : f32[3]\noutput %y\nforward:\n"
                            "  LINEAR %x, @w, @b -> %h\n  RELU %h -> %r\n  SCALE %r -> %s alpha=2\n"
                            "  EXP %s -> %y\n",
                            "t.nnasm", &p));
  ASSERT_TRUE(optimize(p, 1));
  ASSERT_EQ(p.code().size(), 2u);
  EXPECT_EQ(p.code()[0].op, Opcode::LINEAR);
  EXPECT_EQ(p.code()[0].imm[0].ident, "relu");
  EXPECT_EQ(p.code()[1].op, Opcode::CALC);
  EXPECT_EQ(p.code()[1].imm[0].ident, "exp(scale(%0,alpha=2))");
}

}  // namespace
}  // namespace nnasm

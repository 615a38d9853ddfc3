// The opcode table: ids and mnemonics unique, schemas well-formed, every op registered.
#include <set>

#include <gtest/gtest.h>

#include "isa/activation.h"
#include "isa/instruction.h"
#include "isa/opcode.h"
#include "ops/op.h"

namespace nnasm {
namespace {

TEST(OpcodeTable, IdsAndMnemonicsAreUnique) {
  std::set<int> ids;
  std::set<std::string> names;
  for (const OpInfo& op : all_ops()) {
    EXPECT_TRUE(ids.insert(static_cast<int>(op.op)).second) << op.mnemonic;
    EXPECT_TRUE(names.insert(op.mnemonic).second) << op.mnemonic;
    EXPECT_EQ(op_by_mnemonic(op.mnemonic), &op_info(op.op));
    EXPECT_EQ(opcode_from_id(static_cast<uint32_t>(op.op)), op.op);
  }
  EXPECT_EQ(op_by_mnemonic("NOPE"), nullptr);
  EXPECT_EQ(opcode_from_id(9999), Opcode::INVALID);
  EXPECT_EQ(opcode_from_id(0), Opcode::INVALID);
}

TEST(OpcodeTable, IdsArePermanent) {
  // Files store ids: these must never change.
  EXPECT_EQ(static_cast<int>(Opcode::MATMUL), 1);
  EXPECT_EQ(static_cast<int>(Opcode::ADD), 10);
  EXPECT_EQ(static_cast<int>(Opcode::RELU), 27);
  EXPECT_EQ(static_cast<int>(Opcode::SOFTMAX), 40);
  EXPECT_EQ(static_cast<int>(Opcode::FILL), 55);
}

TEST(OpcodeTable, SchemasParse) {
  const OpInfo& add = op_info(Opcode::ADD);
  ASSERT_EQ(add.imms.size(), 2u);
  EXPECT_EQ(add.imms[0].key, "alpha");
  EXPECT_EQ(add.imms[0].type, ImmType::F32);
  EXPECT_TRUE(add.imms[0].has_default);
  EXPECT_EQ(add.imms[1].default_value.f, 1.0);
  const OpInfo& gelu = op_info(Opcode::GELU);
  ASSERT_EQ(gelu.imms.size(), 1u);
  EXPECT_EQ(gelu.imms[0].type, ImmType::ENUM);
  EXPECT_EQ(gelu.imms[0].choices, (std::vector<std::string>{"none", "tanh"}));
  EXPECT_EQ(gelu.imms[0].default_value.ident, "none");
  const OpInfo& slice = op_info(Opcode::SLICE);
  ASSERT_EQ(slice.imms.size(), 3u);
  for (const ImmSpec& s : slice.imms) EXPECT_FALSE(s.has_default);
  EXPECT_EQ(op_info(Opcode::RESHAPE).imms[0].type, ImmType::INTS);
  EXPECT_EQ(op_info(Opcode::CONCAT).n_in, -1);
  const OpInfo& calc = op_info(Opcode::CALC);
  ASSERT_EQ(calc.imms.size(), 1u);
  EXPECT_EQ(calc.imms[0].type, ImmType::STR);
  EXPECT_FALSE(calc.imms[0].has_default);
  for (const OpInfo& op : all_ops())
    for (const ImmSpec& s : op.imms) {
      EXPECT_FALSE(s.key.empty()) << op.mnemonic;
      if (s.type == ImmType::ENUM) {
        EXPECT_GE(s.choices.size(), 2u) << op.mnemonic;
      }
    }
}

TEST(OpcodeTable, EveryOpHasShapeAndReferenceKernel) {
  for (const OpInfo& op : all_ops()) {
    EXPECT_NE(op_hooks(op.op).shape, nullptr) << op.mnemonic;
    EXPECT_NE(op_hooks(op.op).ref, nullptr) << op.mnemonic;
  }
}

TEST(OpcodeTable, ImmediatesPrintAsTheListingWritesThem) {
  Imm f;
  f.type = ImmType::F32;
  f.f = 0.1f;
  EXPECT_EQ(imm_to_string(f), "0.1");
  Imm l;
  l.type = ImmType::INTS;
  l.ints = {2, -1, 3};
  EXPECT_EQ(imm_to_string(l), "[2,-1,3]");
  EXPECT_EQ(imm_to_string(imm_str("exp(%0)")), "\"exp(%0)\"");
  EXPECT_EQ(imm_to_string(imm_str("a \"b\" \\c")), "\"a \\\"b\\\" \\\\c\"");
  EXPECT_EQ(imm_str("x"), imm_str("x"));
  EXPECT_FALSE(imm_str("x") == imm_str("y"));
  EXPECT_EQ(float_to_string(1e-8), "1e-08");
  EXPECT_EQ(float_to_string(-INFINITY), "-inf");
}

}  // namespace
}  // namespace nnasm

namespace nnasm {
namespace {

// The compile-time walk of the schema text (NNASM_IMM) agrees with the runtime parse of it
// (op_info) for every key and enum choice of every op.
TEST(OpcodeTable, ImmIndexMatchesSchemaOrder) {
  for (const OpInfo& info : all_ops()) {
    for (size_t k = 0; k < info.imms.size(); ++k) {
      const ImmSpec& s = info.imms[k];
      EXPECT_EQ(imm_index(info.op, s.key), static_cast<int>(k)) << info.mnemonic << " " << s.key;
      for (size_t c = 0; c < s.choices.size(); ++c)
        EXPECT_EQ(imm_choice(info.op, s.key, s.choices[c]), static_cast<int>(c)) << info.mnemonic << " " << s.choices[c];
      EXPECT_EQ(imm_choice(info.op, s.key, "no_such_choice"), -1);
    }
    EXPECT_EQ(imm_index(info.op, "no_such_key"), -1) << info.mnemonic;
  }
  static_assert(NNASM_IMM(MATMUL, transB) == 1 && NNASM_IMM(CONV2D, act_alpha) == 5);
  static_assert(NNASM_IMM_SHARED(axis, Opcode::REDUCE_SUM, Opcode::ARGMAX) == 0);
  static_assert(imm_index_shared({Opcode::MATMUL, Opcode::LINEAR}, "act") == -1);  // 2 and 0
  static_assert(NNASM_CHOICE(GELU, approx, tanh) == 1);
}

// Every op with a fused activation epilogue is one fused_act_imms knows.
TEST(OpcodeTable, FusedActivationImmediates) {
  for (const OpInfo& info : all_ops()) {
    EXPECT_EQ(fused_act_imms(info.op).act, imm_index(info, "act")) << info.mnemonic;
    EXPECT_EQ(fused_act_imms(info.op).alpha, imm_index(info, "act_alpha")) << info.mnemonic;
  }
}

// isa/activations.def, the `act` and `fn` choices and the activation ops agree.
TEST(OpcodeTable, ActivationTableMatchesTheSchemas) {
  for (Opcode op : {Opcode::MATMUL, Opcode::LINEAR, Opcode::CONV2D}) {
    const ImmSpec& act = op_info(op).imms[fused_act_imms(op).act];
    ASSERT_EQ(act.choices.size(), static_cast<size_t>(ACTIVATION_COUNT));
    for (int a = 0; a < ACTIVATION_COUNT; ++a) EXPECT_EQ(act.choices[a], ACTIVATIONS[a].name);
  }
  const ImmSpec& fn = op_info(Opcode::ACT_BWD).imms[NNASM_IMM(ACT_BWD, fn)];
  ASSERT_EQ(fn.choices.size(), static_cast<size_t>(ACTIVATION_COUNT));  // without none, with abs
  EXPECT_EQ(fn.choices.back(), "abs");
  std::set<Opcode> ops;
  for (int a = 1; a < ACTIVATION_COUNT; ++a) {
    const ActivationInfo& r = ACTIVATIONS[a];
    EXPECT_EQ(fn.choices[act_bwd_fn(r.act)], r.name);
    EXPECT_TRUE(op_info(r.op).flags & OPF_ACTIVATION) << r.name;
    if (r.alpha_imm >= 0) {
      EXPECT_EQ(op_info(r.op).imms[r.alpha_imm].type, ImmType::F32) << r.name;
    }
    // The op computes this row under the row's select choice.
    Instruction ins = make_instruction(r.op, {}, {});
    if (r.select_imm >= 0) ins.imm[r.select_imm].i = r.select_choice;
    EXPECT_EQ(activation_of(ins), r.act) << r.name;
    ops.insert(r.op);
  }
  for (const OpInfo& info : all_ops())
    EXPECT_EQ(ops.count(info.op) == 1, (info.flags & OPF_ACTIVATION) != 0) << info.mnemonic;
}

}  // namespace
}  // namespace nnasm

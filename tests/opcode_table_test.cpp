// The opcode table: ids and mnemonics unique, schemas well-formed, every op registered.
#include <set>

#include <gtest/gtest.h>

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

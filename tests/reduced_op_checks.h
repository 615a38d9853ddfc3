// Checks the reduced-precision products' tests share (linear_i8, conv_i8, conv_bf16): the product
// has no backward rule, and its weight-layout op reads only a param, so the derive pass hoists it
// while act fusion takes a following activation into the product's epilogue.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/autodiff.h"
#include "engine/passes/pass.h"
#include "isa/activation.h"
#include "ops/elementwise/activation.h"
#include "serialize/listing.h"
#include "tests/op_harness.h"

namespace nnasm::test {

// `op` on inputs of types `in`: a gradient through it with respect to each input in `wrt` is
// refused, with a message naming the op.
inline void expect_no_gradient(Opcode op, const std::vector<TensorType>& in, const std::vector<size_t>& wrt) {
  Context ctx;
  Program p(ctx);
  std::vector<TensorId> ids;
  ASSERT_TRUE(declare_inputs(p, in, &ids));
  std::vector<TensorId> y;
  ASSERT_TRUE(append_op(p, op, ids, {}, &y));
  for (size_t k : wrt) {
    const Result<std::vector<TensorId>> g = grad(p, y[0], {ids[k]});
    ASSERT_FALSE(g) << k;
    EXPECT_NE(g.status().message().find(op_info(op).mnemonic), std::string::npos) << g.status().message();
    EXPECT_NE(g.status().message().find("no backward rule"), std::string::npos) << g.status().message();
  }
}

// `listing`: `layout` of a param, then `product`, then an activation `act` with immediate
// `alpha`. After the derive and act-fusion passes two instructions are left: `layout` in the
// derive section and `product` in the forward one, carrying the activation.
inline void expect_derive_and_act_fusion(const char* listing, Opcode layout, Opcode product, Activation act,
                                         float alpha) {
  Context ctx;
  Program p(ctx);
  ASSERT_TRUE(program_parse(listing, "t.nnasm", &p));
  ASSERT_TRUE(optimize(p, 1, nullptr, {"derive", "act-fusion"}));
  ASSERT_EQ(p.code().size(), 2u);
  EXPECT_EQ(p.code()[0].op, layout);
  EXPECT_EQ(p.code()[0].section, Section::DERIVE);
  EXPECT_EQ(p.code()[1].op, product);
  EXPECT_EQ(p.code()[1].section, Section::FORWARD);
  EXPECT_EQ(fused_act(p.code()[1]), act);
  EXPECT_FLOAT_EQ(static_cast<float>(fused_act_alpha(p.code()[1])), alpha);
}

}  // namespace nnasm::test

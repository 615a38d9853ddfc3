// CALC's expression language: the text of its `expr` immediate, parsed into a flat list of nodes.
//
//   expr   := call | input | number
//   call   := name "(" expr {"," expr} {"," key "=" value} ")"
//   input  := "%" digits                          the CALC's input k, from 0
//   number := [-] digits [. digits] [e [±] digits]  | inf | -inf | nan   an f32 constant
//   name   := the lowercase mnemonic of an elementwise op: scale neg exp log sqrt abs square relu
//             leakyrelu elu clipped_relu sigmoid tanh gelu swish step erf clamp reciprocal floor
//             ceil sign softplus hardsigmoid hardswish selu add sub mul div maximum minimum prelu
//             equal less less_equal greater greater_equal act_bwd
//   key    := one of the op's immediates, as its schema names it; value: a number, or an enum
//             choice (gelu(%0,approx=tanh)). Immediates left out take the op's defaults.
// Spaces may separate tokens. e.g. "exp(sub(%0,%1))", "add(scale(%0,alpha=2),%1,beta=-1)".
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "isa/status.h"
#include "ops/elementwise/elementwise_op.h"

namespace nnasm {

enum class ExprKind : uint8_t { INPUT, CONST, CALL };

struct ExprNode {
  ExprKind kind = ExprKind::CONST;
  int input = 0;                // INPUT: k of %k
  float value = 0;              // CONST
  Opcode op = Opcode::INVALID;  // CALL: an op with an ElementwiseOp
  int arg[2] = {-1, -1};        // CALL: the argument nodes (as many as the op's arity), earlier in the list
  EwImms imm;                   // CALL: the op's immediates, defaults filled in
  int col = 0;                  // where the node starts in the text (1-based), for messages
};

// Nesting deeper than this is refused (the parser recurses).
constexpr int EXPR_MAX_DEPTH = 64;

// Parses `text` into at most `cap` nodes in evaluation order: every node after its arguments, the
// root last; *n is the count. Errors name the column: "column 5: unknown function 'exq'".
// Allocates nothing on success, so that CALC's reference kernel can parse at run time into its
// scratch memory. A text of c characters never needs more than c nodes.
Status expr_parse(std::string_view text, ExprNode* nodes, int cap, int* n);
// The same into a vector (allocates).
Result<std::vector<ExprNode>> expr_parse(std::string_view text);

// The text of `nodes` (root last), immediates at their defaults left out: what parses back to
// the same nodes.
std::string expr_print(const std::vector<ExprNode>& nodes);

}  // namespace nnasm

// The activations MATMUL, LINEAR, LINEAR_BF16, LINEAR_I8, CONV2D, CONV2D_I8 and CONV2D_NCHWC can fuse (their
// `act` immediate), named as in the listing, expanded from isa/activations.def. The scalar functions are
// ops/elementwise/activation.h, the JIT snippets jit/act_snippet.h.
#pragma once
#include <cstdint>
#include <string_view>

#include "isa/activations.def"
#include "isa/instruction.h"
#include "isa/opcode.h"

namespace nnasm {

// The `act` choices, in their schema order: NONE, then the rows of isa/activations.def. ACT_BWD's
// `fn` is the same list without NONE (fn = act − 1).
enum class Activation {
  NONE,
#define NNASM_ACT_ENUM(NAME, name, OP, alpha, select) NAME,
  NNASM_ACTIVATIONS(NNASM_ACT_ENUM)
#undef NNASM_ACT_ENUM
};
#define NNASM_ACT_COUNT(NAME, name, OP, alpha, select) +1
constexpr int ACTIVATION_COUNT = 1 NNASM_ACTIVATIONS(NNASM_ACT_COUNT);
#undef NNASM_ACT_COUNT

// One activation as its own instruction: `op`, with immediate `alpha_imm` as act_alpha (-1: the
// activation has no immediate, act_alpha is 0), computing it when immediate `select_imm` (-1:
// always) holds choice `select_choice`.
struct ActivationInfo {
  Activation act;
  const char* name;
  Opcode op;
  int alpha_imm;
  int select_imm;
  int select_choice;
};

namespace act_detail {
constexpr ActivationInfo row(Activation act, const char* name, Opcode op, std::string_view alpha,
                             std::string_view select) {
  const size_t eq = select.find('=');
  return {act,
          name,
          op,
          alpha.empty() ? -1 : imm_index(op, alpha),
          select.empty() ? -1 : imm_index(op, select.substr(0, eq)),
          select.empty() ? -1 : imm_choice(op, select.substr(0, eq), select.substr(eq + 1))};
}
}  // namespace act_detail

// Indexed by Activation.
constexpr ActivationInfo ACTIVATIONS[ACTIVATION_COUNT] = {
    {Activation::NONE, "none", Opcode::INVALID, -1, -1, -1},
#define NNASM_ACT_ROW(NAME, name, OP, alpha, select) \
  act_detail::row(Activation::NAME, name, Opcode::OP, alpha, select),
    NNASM_ACTIVATIONS(NNASM_ACT_ROW)
#undef NNASM_ACT_ROW
};

// Every immediate a row names is in its op's schema; a typo there does not build.
#define NNASM_ACT_CHECK(NAME, name, OP, alpha, select)                                               \
  static_assert(std::string_view(alpha).empty() || ACTIVATIONS[int(Activation::NAME)].alpha_imm >= 0, \
                "isa/activations.def: " #NAME "'s alpha is no immediate of " #OP);                   \
  static_assert(std::string_view(select).empty() || ACTIVATIONS[int(Activation::NAME)].select_choice >= 0, \
                "isa/activations.def: " #NAME "'s select is no enum choice of " #OP);
NNASM_ACTIVATIONS(NNASM_ACT_CHECK)
#undef NNASM_ACT_CHECK

inline const char* activation_name(Activation a) { return ACTIVATIONS[static_cast<int>(a)].name; }

// ACT_BWD's `fn` for the derivative of `f` (not NONE).
constexpr int64_t act_bwd_fn(Activation f) { return static_cast<int64_t>(f) - 1; }
#define NNASM_ACT_FN_CHECK(NAME, name, OP, alpha, select)                            \
  static_assert(imm_choice(Opcode::ACT_BWD, "fn", name) == act_bwd_fn(Activation::NAME) && \
                imm_choice(Opcode::LINEAR, "act", name) == static_cast<int>(Activation::NAME));
NNASM_ACTIVATIONS(NNASM_ACT_FN_CHECK)
#undef NNASM_ACT_FN_CHECK

// The activation an instruction of an activation op (RELU, GELU, ...) computes; NONE for other ops.
inline Activation activation_of(const Instruction& ins) {
  for (int a = 1; a < ACTIVATION_COUNT; ++a) {
    const ActivationInfo& r = ACTIVATIONS[a];
    if (r.op == ins.op && (r.select_imm < 0 || ins.i(r.select_imm) == r.select_choice)) return r.act;
  }
  return Activation::NONE;
}
// The immediate of `ins` (an instruction computing `f`) that act_alpha stands for; 0 if none.
inline double activation_alpha(const Instruction& ins, Activation f) {
  const int k = ACTIVATIONS[static_cast<int>(f)].alpha_imm;
  return k < 0 ? 0 : ins.f(k);
}

// Where an op with a fused activation epilogue keeps it: the positions of its `act` and
// `act_alpha` immediates; -1 for ops without one. tests/opcode_table_test.cpp checks that every
// op with an `act` immediate is here.
struct FusedActImms {
  int act = -1, alpha = -1;
};
constexpr FusedActImms fused_act_imms(Opcode op) {
  switch (op) {
    case Opcode::MATMUL: return {NNASM_IMM(MATMUL, act), NNASM_IMM(MATMUL, act_alpha)};
    case Opcode::LINEAR: return {NNASM_IMM(LINEAR, act), NNASM_IMM(LINEAR, act_alpha)};
    case Opcode::LINEAR_BF16: return {NNASM_IMM(LINEAR_BF16, act), NNASM_IMM(LINEAR_BF16, act_alpha)};
    case Opcode::LINEAR_I8: return {NNASM_IMM(LINEAR_I8, act), NNASM_IMM(LINEAR_I8, act_alpha)};
    case Opcode::CONV2D: return {NNASM_IMM(CONV2D, act), NNASM_IMM(CONV2D, act_alpha)};
    case Opcode::CONV2D_I8: return {NNASM_IMM(CONV2D_I8, act), NNASM_IMM(CONV2D_I8, act_alpha)};
    case Opcode::CONV2D_BF16: return {NNASM_IMM(CONV2D_BF16, act), NNASM_IMM(CONV2D_BF16, act_alpha)};
    case Opcode::CONV2D_WINOGRAD: return {NNASM_IMM(CONV2D_WINOGRAD, act), NNASM_IMM(CONV2D_WINOGRAD, act_alpha)};
    case Opcode::DWCONV2D_NCHWC: return {NNASM_IMM(DWCONV2D_NCHWC, act), NNASM_IMM(DWCONV2D_NCHWC, act_alpha)};
    case Opcode::CONV2D_NCHWC: return {NNASM_IMM(CONV2D_NCHWC, act), NNASM_IMM(CONV2D_NCHWC, act_alpha)};
    default: return {};
  }
}
// The fused activation of `ins` and its act_alpha; NONE and 0 for an op without one.
inline Activation fused_act(const Instruction& ins) {
  const int k = fused_act_imms(ins.op).act;
  return k < 0 ? Activation::NONE : static_cast<Activation>(ins.i(k));
}
inline double fused_act_alpha(const Instruction& ins) {
  const int k = fused_act_imms(ins.op).alpha;
  return k < 0 ? 0 : ins.f(k);
}

}  // namespace nnasm

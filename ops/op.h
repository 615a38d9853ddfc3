// What every op file provides to the registry: shape inference, a reference kernel and the
// optional JIT, parallel-split and gradient hooks, behind the one calling convention of
// jit/abi.h. Kernels get operand pointers, operand types and the instruction (for immediates),
// all resolved at prepare.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "isa/instruction.h"
#include "isa/status.h"
#include "isa/tensor_map.h"
#include "jit/abi.h"
#include "ops/grad.h"

namespace nnasm {

struct ElementwiseOp;  // ops/elementwise/elementwise_op.h

struct OpHooks {
  ShapeFn shape = nullptr;
  KernelFn ref = nullptr;
  ScratchFn scratch = nullptr;
  // The backward rule (ops/grad.h). nullptr: the op has none, and autodiff says so by name.
  GradFn grad = nullptr;
  // The JIT kernel generator. nullptr: reference kernel only (the op file says why).
  JitFn jit = nullptr;
  // Parallel parts of the JIT kernel. nullptr: always one part.
  PartsFn parts = nullptr;
  // The op as a building block of CALC's expressions. nullptr: not an elementwise op.
  const ElementwiseOp* elementwise = nullptr;
  // OPF_UPDATES_STATE ops: bit k set when the kernel updates input k in place in training mode
  // (through a cast of KernelArgs::in[k]). 0 for every other op.
  uint32_t state_inputs = 0;
  // What a part reads and finishes, for joining parallel steps. nullptr: unknown (never joined).
  SpanFn span = nullptr;
};

// One function per opcode, defined in that op's file; a missing one is a link error.
#define OPCODE(id, NAME, MN, NIN, NOUT, SCHEMA, CAT, FLAGS) OpHooks op_hooks_##NAME();
#include "isa/opcodes.def"
#undef OPCODE

// The hooks of `op` (a valid opcode).
const OpHooks& op_hooks(Opcode op);

// Shape inference of one instruction through its op's hook: `in` holds the input types in order;
// fills `out` (n_out entries). The message names the op and the operands; the caller adds the
// location.
Status infer_types(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out);
// For an OPF_UPDATES_STATE op, the inputs it updates in place when training (bit k: input k);
// 0 for other ops.
uint32_t state_inputs(Opcode op);
// The two above as the interface a tensor map hands its programs (isa/tensor_map.h).
const OpSemantics& op_semantics();

// Shared shape checks, so every op words its errors alike.
Status require_f32(const Instruction& ins, const std::vector<TensorType>& in);
std::string operand_str(const Instruction& ins, int k, const TensorType& t);  // "operand 2 (f32[3,4])"

}  // namespace nnasm

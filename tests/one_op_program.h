// One instruction as a prepared program at a chosen JIT setting: what the JIT parity tests compare
// (the same instruction with the JIT on and off).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "engine/executor.h"
#include "isa/program.h"

namespace nnasm {

struct OneOpProgram {
  Context ctx;
  Program p{ctx};
  std::vector<TensorId> in;
  TensorId out = NO_TENSOR;
  std::unique_ptr<Executor> ex;
};

// `op` on inputs x0, x1, ... of `types` with immediates `imms`; in_place: the outputs are the
// inputs (CLIP_GRAD_NORM). Messages (errors and the context's log) are appended to `err`; nullptr
// on error.
inline std::unique_ptr<OneOpProgram> one_op_program(Opcode op, const std::vector<std::pair<std::string, Imm>>& imms,
                                                    const std::vector<TensorType>& types, bool in_place,
                                                    const JitConfig& jit, std::string* err) {
  auto b = std::make_unique<OneOpProgram>();
  b->ctx.set_jit(jit);
  b->ctx.set_flush_denormals(false);  // kernels are compared at denormals too (engine/denormals.h)
  b->ctx.set_log([err](const std::string& m) { *err += m + "\n"; });
  auto failed = [&](const Status& s) {
    *err += s.message();
    return nullptr;
  };
  for (size_t k = 0; k < types.size(); ++k) {
    TensorDesc d;
    d.name = fmt::format("x{}", k);
    d.type = types[k];
    d.role = Role::INPUT;
    Result<TensorId> id = b->p.declare(d);
    if (!id) return failed(id.status());
    b->in.push_back(id.value());
  }
  Instruction ins = make_instruction(op, b->in, in_place ? b->in : std::vector<TensorId>{});
  for (const auto& [key, v] : imms)
    if (Status s = set_imm(ins, key, v); !s) return failed(s);
  if (in_place) {
    if (Status s = b->p.append(ins); !s) return failed(s);
  } else {
    Result<std::vector<TensorId>> outs = b->p.append_new(ins);
    if (!outs) return failed(outs.status());
    b->out = outs.value()[0];
    b->p.mark_output(b->out);
  }
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(b->p);
  if (!ex) return failed(ex.status());
  b->ex = std::move(ex.value());
  return b;
}

}  // namespace nnasm

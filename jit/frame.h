// The one prologue/epilogue every generated kernel uses (System V x86-64): RAII, so a generator
// cannot forget the epilogue. The constructor saves the callee-saved registers the kernel asked
// for; the destructor emits vzeroupper (no AVX→SSE transition penalty in the caller), restores
// them and returns. The KernelArgs pointer arrives in rdi.
#pragma once
#include <cstddef>

#include <xbyak/xbyak.h>

#include "jit/abi.h"

namespace nnasm {

class Frame {
 public:
  // `saved`: how many of rbx, rbp, r12, r13, r14, r15 (in that order) the kernel uses.
  Frame(Xbyak::CodeGenerator& g, int saved) : g_(g), saved_(saved) {
    for (int i = 0; i < saved_; ++i) g_.push(callee_saved(i));
  }
  ~Frame() {
    g_.vzeroupper();
    for (int i = saved_; i-- > 0;) g_.pop(callee_saved(i));
    g_.ret();
  }
  Frame(const Frame&) = delete;
  Frame& operator=(const Frame&) = delete;

  static const Xbyak::Reg64& args() {
    static const Xbyak::Reg64 r(Xbyak::Operand::RDI);
    return r;
  }
  // Loads the data pointer of input / output k into `dst`.
  void load_in(const Xbyak::Reg64& dst, int k) {
    g_.mov(dst, g_.ptr[args() + offsetof(KernelArgs, in)]);
    g_.mov(dst, g_.ptr[dst + 8 * k]);
  }
  void load_out(const Xbyak::Reg64& dst, int k) {
    g_.mov(dst, g_.ptr[args() + offsetof(KernelArgs, out)]);
    g_.mov(dst, g_.ptr[dst + 8 * k]);
  }

  static Xbyak::Reg64 callee_saved(int i) {
    static const int ids[] = {Xbyak::Operand::RBX, Xbyak::Operand::RBP, Xbyak::Operand::R12,
                              Xbyak::Operand::R13, Xbyak::Operand::R14, Xbyak::Operand::R15};
    return Xbyak::Reg64(ids[i]);
  }

 private:
  Xbyak::CodeGenerator& g_;
  int saved_;
};

}  // namespace nnasm

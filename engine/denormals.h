// Denormal floats flushed to zero while kernels run: MXCSR's FTZ (results) and DAZ (inputs) bits
// for the length of a scope, the caller's mode restored at its end, so a host's own float code
// never sees ours. Why: on Intel cores an operation on a denormal takes a microcode assist of a
// hundred cycles or more, and a training run whose loss gets small fills its gradients with them
// (BM_train_step_mlp_b64_late/flush:0|1 times the MLP's step once fit to its batch, with them kept
// and flushed: docs/benchmarks.md). TensorFlow's CPU kernels and XNNPACK's threads flush too; a denormal is below
// 1.2e-38, so flushing changes no result a network depends on. Context::set_flush_denormals(false)
// (or NNASM_FLUSH_DENORMALS=0) keeps them. A no-op off x86.
#pragma once
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace nnasm {

// The mode for the length of a scope, the caller's given back at its end. That is two MXCSR
// writes a run, each waiting for the floating-point work before it: nothing beside a program's
// work but for the tiniest (docs/benchmarks.md measures it on a 32³ product). A thread that
// already flushes (FTZ and DAZ set, as many game engines' are) pays nothing: the scope then
// writes nothing.
class DenormalScope {
 public:
  explicit DenormalScope(bool flush) {
#if defined(__x86_64__) || defined(__i386__)
    if (!flush) return;
    saved_ = _mm_getcsr();
    constexpr unsigned FTZ = 0x8000, DAZ = 0x0040;
    if ((saved_ & (FTZ | DAZ)) != (FTZ | DAZ)) {
      _mm_setcsr(saved_ | FTZ | DAZ);
      restore_ = true;
    }
#else
    (void)flush;
#endif
  }
  ~DenormalScope() {
#if defined(__x86_64__) || defined(__i386__)
    if (restore_) _mm_setcsr(saved_);
#endif
  }
  DenormalScope(const DenormalScope&) = delete;
  DenormalScope& operator=(const DenormalScope&) = delete;

 private:
  unsigned saved_ = 0;
  bool restore_ = false;
};

}  // namespace nnasm

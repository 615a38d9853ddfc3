// Denormal floats flushed to zero while kernels run: MXCSR's FTZ (results) and DAZ (inputs) bits
// for the length of a scope, the caller's mode restored at its end, so a host's own float code
// never sees ours. Why: on Intel cores an operation on a denormal takes a microcode assist of a
// hundred cycles or more, and a training run whose loss gets small fills its gradients with them
// (the README's MLP step, once fit to its batch, takes 1.67 ms on a Xeon with them kept and 0.50
// flushed: BM_train_step_mlp_b64_late). TensorFlow's CPU kernels and XNNPACK's threads flush too; a denormal is below
// 1.2e-38, so flushing changes no result a network depends on. Context::set_flush_denormals(false)
// (or NNASM_FLUSH_DENORMALS=0) keeps them. A no-op off x86.
#pragma once
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace nnasm {

// Sets this thread's mode to flush denormals or not, leaving it so: for the pool's own workers,
// which run nothing but parts (so nothing of a host's sees the mode), where a scope's two MXCSR
// writes per part would each wait for the floating-point work before them. Writes MXCSR only
// when the mode changes.
inline void set_thread_flush_denormals(bool flush) {
#if defined(__x86_64__) || defined(__i386__)
  constexpr unsigned FTZ = 0x8000, DAZ = 0x0040;
  const unsigned csr = _mm_getcsr(), want = flush ? csr | FTZ | DAZ : csr & ~(FTZ | DAZ);
  if (want != csr) _mm_setcsr(want);
#else
  (void)flush;
#endif
}

// The mode for the length of a scope, the caller's given back at its end. Setting and giving it
// back costs a run about 27 ns on the Xeon of README's Benchmarks (each MXCSR write waits for the
// floating-point work before it): nothing beside a program's work but for the tiniest ones (a
// 32³ product takes 0.38 µs). A thread that already flushes (FTZ and DAZ set, as many game
// engines' are) pays nothing: the scope then writes nothing.
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

// The dispatch stream's code: a frame that keeps rsp 16-byte aligned, then per call
// `mov rdi, arg; call fn` (15 bytes), or `mov rdi, arg; mov rax, fn; call rax` (22 bytes) where
// the target lies farther away than a rel32 call reaches (the C++ functions may).
#include "jit/stream.h"

#include <xbyak/xbyak.h>

namespace nnasm {

namespace {
constexpr size_t BYTES_PER_CALL = 22;
constexpr size_t FRAME_BYTES = 16;
}  // namespace

Result<std::shared_ptr<const JitKernel>> build_stream(const std::string& name, const std::vector<StreamCall>& calls) {
  return build_kernel(name, FRAME_BYTES + BYTES_PER_CALL * calls.size(), [&](Xbyak::CodeGenerator& g) {
    // rsp is 8 (mod 16) at entry; the callees expect 0 (mod 16) before their call pushes.
    g.sub(g.rsp, 8);
    for (const StreamCall& c : calls) {
      g.mov(g.rdi, reinterpret_cast<uint64_t>(c.arg));
      // A direct call where the target is within reach of a rel32 (generated kernels usually are).
      const int64_t rel = reinterpret_cast<int64_t>(c.fn) - reinterpret_cast<int64_t>(g.getCurr());
      if (rel - 5 == static_cast<int32_t>(rel - 5) && rel == static_cast<int32_t>(rel)) {
        g.call(c.fn);
      } else {
        g.mov(g.rax, reinterpret_cast<uint64_t>(c.fn));
        g.call(g.rax);
      }
    }
    g.add(g.rsp, 8);
    g.ret();
    return Status::ok();
  });
}

}  // namespace nnasm

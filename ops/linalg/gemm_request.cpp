// MATMUL's and LINEAR's shared JIT hooks (see the header).
#include "ops/linalg/gemm_request.h"

namespace nnasm {
namespace {

// The whole product as r asks for it: K blocked for a split along it where r reads a trained
// weight.
GemmJitDesc whole_of(GemmJitDesc whole, const JitRequest& r) {
  whole.two_k_blocks = r.reads_trained_param;
  return whole;
}
// The descriptor of the part r asks for.
GemmJitDesc part_of(const GemmJitDesc& whole, const JitRequest& r) {
  return jit_gemm_part(whole_of(whole, r), r.isa, r.part, r.n_parts, r.split_reduction);
}

}  // namespace

Result<std::shared_ptr<const JitKernel>> gemm_request_jit(GemmJitDesc whole, const JitRequest& r, KernelCache& cache) {
  return jit_gemm(part_of(whole, r), r.isa, cache);
}

bool gemm_request_span(GemmJitDesc whole, const JitRequest& r, bool output, int k, int64_t* begin, int64_t* end) {
  return jit_gemm_span(part_of(whole, r), r.isa, output, k, begin, end);
}

int gemm_request_parts(GemmJitDesc whole, const JitRequest& r, int threads) {
  return jit_gemm_parts(whole_of(whole, r), r.isa, threads);
}

}  // namespace nnasm

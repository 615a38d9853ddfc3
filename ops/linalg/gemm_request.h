// What MATMUL's and LINEAR's JIT hooks share: from the whole product's descriptor (each op builds
// its own), the kernel, span and part count a JitRequest asks for. In training a product that
// reads a trained weight blocks K for a split along it (JitRequest::reads_trained_param); a part
// is the slice jit_gemm_part makes (along K with JitRequest::split_reduction).
#pragma once
#include <cstdint>
#include <memory>

#include "jit/gemm.h"
#include "ops/op.h"

namespace nnasm {

Result<std::shared_ptr<const JitKernel>> gemm_request_jit(GemmJitDesc whole, const JitRequest& r, KernelCache& cache);
bool gemm_request_span(GemmJitDesc whole, const JitRequest& r, bool output, int k, int64_t* begin, int64_t* end);
int gemm_request_parts(GemmJitDesc whole, const JitRequest& r, int threads);

}  // namespace nnasm

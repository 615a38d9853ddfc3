// CLIP_GRAD_NORM: scale a set of gradients together so their global L2 norm is at most max_norm.
//
// Computes   n = ‖(g_1, …, g_n)‖₂ (accumulated in double); if n > max_norm every g_i is scaled
//            by max_norm / (n + 1e-6), as torch.nn.utils.clip_grad_norm_.
// Inputs     g_1 … g_n: f32, any shapes.
// Outputs    the same tensors, updated in place (output k is input k).
// Immediates max_norm: f32, required, > 0.
// Gradient   none: update instructions are never differentiated.
// Kernels    reference: two passes over all gradients.
//            JIT (jit/rowwise.h), AVX2/AVX-512 `f32_clip_grad_norm__<isa>`: the same two
//            passes; Σ g² in double from exactly widened floats (8 double accumulators, a fixed
//            tree: deterministic, and within a few double ulps of the reference's sum, so the f32
//            scale almost always has the reference's bits; at most 1 ulp apart).
#include <cmath>

#include "jit/rowwise.h"
#include "ops/optim/optim_common.h"

namespace nnasm {
namespace {

Status clip_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(require_f32(ins, in));
  if (!(ins.f(NNASM_IMM(CLIP_GRAD_NORM, max_norm)) > 0)) return Status::error("CLIP_GRAD_NORM: max_norm must be positive");
  std::vector<int> same(in.size());
  for (size_t k = 0; k < in.size(); ++k) same[k] = static_cast<int>(k);
  return inplace_outputs(ins, in, out, same);
}

void clip_ref(const KernelArgs* k) {
  double ss = 0;
  for (int i = 0; i < k->n_in; ++i) {
    const float* g = static_cast<const float*>(k->in[i]);
    const int64_t n = k->in_type[i].shape.numel();
    for (int64_t j = 0; j < n; ++j) ss += static_cast<double>(g[j]) * g[j];
  }
  const double norm = std::sqrt(ss), max_norm = k->ins->f(0);
  if (!(norm > max_norm)) return;
  const float s = static_cast<float>(max_norm / (norm + 1e-6));
  for (int i = 0; i < k->n_out; ++i) {
    float* g = static_cast<float*>(k->out[i]);
    const int64_t n = k->out_type[i].shape.numel();
    for (int64_t j = 0; j < n; ++j) g[j] *= s;
  }
}

Result<KernelRef> clip_jit(const JitRequest& r, KernelCache& cache) {
  std::vector<int64_t> sizes;
  for (size_t k = 0; k < r.ins.in.size(); ++k) sizes.push_back(r.in[k].shape.numel());
  if (r.ins.out.size() != r.ins.in.size()) return KernelRef();
  return clip_norm_kernel(r.isa, sizes, r.ins.f(NNASM_IMM(CLIP_GRAD_NORM, max_norm)), cache);
}

}  // namespace

OpHooks op_hooks_CLIP_GRAD_NORM() { return {clip_shape, clip_ref, nullptr, nullptr, clip_jit}; }

}  // namespace nnasm

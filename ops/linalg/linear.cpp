// LINEAR: a dense layer.
//
// Computes   y = act(x·W + b), act one of the activation ops' functions (ops/elementwise/activation.h).
// Inputs     x: f32[..., in] (rank ≥ 1); W: f32[in, out] (stored input-major, as the listing and
//            the shell's linear() create it); b: f32[out].
// Outputs    y: f32[..., out].
// Immediates act: enum none|relu|leakyrelu|elu|clipped_relu|sigmoid|tanh|gelu|gelu_tanh|swish,
//            default none; act_alpha: f32, the activation's own immediate (leakyrelu's slope,
//            elu's alpha, clipped_relu's threshold, swish's beta), default 0 (not the
//            activation op's default: set it).
// Gradient   on rows = x flattened to [rows, in]: dx = dZ·Wᵀ, dW = xᵀ·dZ, db = Σ_rows dZ
//            (MATMUL with transpose flags, REDUCE_SUM), dZ = dY·act'(z) for the pre-activation
//            z, which a fused LINEAR does not keep, so act' comes from the output y: relu and
//            clipped_relu as ACT_BWD(dY, y) (y > 0 ⇔ z > 0, 0 < y < t ⇔ 0 < z < t), leakyrelu
//            likewise for act_alpha ≥ 0, sigmoid dY·(y − y²), tanh dY·(1 − y²). The others
//            (elu, gelu, gelu_tanh, swish, leakyrelu with a negative slope) have no backward
//            rule here: autodiff fails with "LINEAR with act=gelu has no backward rule: unfuse
//            it" (write LINEAR then the activation op).
// Kernels    reference: bias rows, then ops/linalg/gemm.h's GEMM accumulates x·W (a row of y never
//            depends on the other rows).
//            JIT (jit/gemm.h): GEMM with the bias fused into the store,
//            `f32_linear__avx512_14x32` / `__avx2_6x16`, or `__<isa>_gemv_mN` for a few rows; big
//            ones as parallel parts, each its own slice of the output columns. With act, the last
//            K block's epilogue applies the activation's snippet (jit/act_snippet.h, the
//            activation ops' own code): `f32_linear_relu__avx512_14x32`.
#include <algorithm>

#include "jit/gemm.h"
#include "ops/elementwise/activation.h"
#include "ops/linalg/act_grad.h"
#include "ops/linalg/gemm.h"
#include "ops/linalg/gemm_request.h"
#include "ops/op.h"

namespace nnasm {
namespace {

Status linear_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(require_f32(ins, in));
  const Shape &x = in[0].shape, &w = in[1].shape, &b = in[2].shape;
  if (x.rank < 1) return Status::errorf("LINEAR: {} must have rank 1 or more", operand_str(ins, 0, in[0]));
  if (w.rank != 2) return Status::errorf("LINEAR: weight {} must have rank 2 [in, out]", operand_str(ins, 1, in[1]));
  if (w[0] != x[x.rank - 1])
    return Status::errorf("LINEAR: {} has {} features but weight {} expects {}", operand_str(ins, 0, in[0]),
                          x[x.rank - 1], operand_str(ins, 1, in[1]), w[0]);
  if (b.rank != 1 || b[0] != w[1])
    return Status::errorf("LINEAR: bias {} must be [{}] to match weight {}", operand_str(ins, 2, in[2]), w[1],
                          operand_str(ins, 1, in[1]));
  Shape y = x;
  y[y.rank - 1] = w[1];
  (*out)[0] = TensorType{DType::F32, y};
  return Status::ok();
}

GemmShape gemm_shape(const TensorType* in) {
  const Shape& w = in[1].shape;
  return GemmShape{in[0].shape.numel() / w[0], w[1], w[0], false, false};
}

GemmJitDesc jit_desc(const Instruction& ins, const TensorType* in) {
  const GemmShape g = gemm_shape(in);
  GemmJitDesc d;
  d.op = "linear";
  d.m = g.m;
  d.n = g.n;
  d.k = g.k;
  d.bias = true;
  d.act = fused_act(ins);
  d.act_alpha = static_cast<float>(fused_act_alpha(ins));
  return d;
}

// Enough for whichever kernel runs: the reference's packing blocks or the JIT's.
size_t linear_scratch(const Instruction& ins, const TensorType* in, const TensorType*) {
  return std::max(gemm_scratch_floats(gemm_shape(in)) * sizeof(float), jit_gemm_scratch_bytes(jit_desc(ins, in)));
}

Result<std::shared_ptr<const JitKernel>> linear_jit(const JitRequest& r, KernelCache& cache) {
  return gemm_request_jit(jit_desc(r.ins, r.in), r, cache);
}

bool linear_span(const JitRequest& r, bool output, int k, int64_t* begin, int64_t* end) {
  return gemm_request_span(jit_desc(r.ins, r.in), r, output, k, begin, end);
}

int linear_parts(const JitRequest& r, int threads) { return gemm_request_parts(jit_desc(r.ins, r.in), r, threads); }

void linear_ref(const KernelArgs* k) {
  const GemmShape g = gemm_shape(k->in_type);
  const float* b = static_cast<const float*>(k->in[2]);
  float* y = static_cast<float*>(k->out[0]);
  // Start from the bias in every row, then accumulate x·W on top.
  for (int64_t r = 0; r < g.m; ++r) std::copy(b, b + g.n, y + r * g.n);
  gemm_accumulate(g, static_cast<const float*>(k->in[0]), static_cast<const float*>(k->in[1]), y,
                  static_cast<float*>(k->scratch));
  const auto f = fused_act(*k->ins);
  if (f == Activation::NONE) return;
  const float a = static_cast<float>(fused_act_alpha(*k->ins));
  for (int64_t i = 0; i < g.m * g.n; ++i) y[i] = act::apply(f, y[i], a);
}

Status linear_grad(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy,
                   const std::vector<bool>& need, std::vector<TensorId>* dx) {
  const Shape& w = b.type(ins.in[1]).shape;
  const int64_t rows = b.type(ins.in[0]).shape.numel() / w[0];
  Result<TensorId> dz = act_grad_from_output(b, ins, dy[0]);
  if (!dz.is_ok()) return dz.status();
  const TensorId dy2 = b.reshape(*dz, Shape{rows, w[1]});
  if (need[0])
    (*dx)[0] = b.reshape(b.emit(Opcode::MATMUL, {dy2, ins.in[1]}, {{"transB", imm_i(1)}}), b.type(ins.in[0]).shape);
  if (need[1])
    (*dx)[1] = b.emit(Opcode::MATMUL, {b.reshape(ins.in[0], Shape{rows, w[0]}), dy2}, {{"transA", imm_i(1)}});
  if (need[2]) (*dx)[2] = b.emit(Opcode::REDUCE_SUM, {dy2}, {{"axis", imm_i(0)}});
  return b.status();
}

}  // namespace

OpHooks op_hooks_LINEAR() {
  OpHooks h{linear_shape, linear_ref, linear_scratch, linear_grad, linear_jit, linear_parts};
  h.span = linear_span;
  return h;
}

}  // namespace nnasm

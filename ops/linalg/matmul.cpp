// MATMUL: batched matrix product.
//
// Computes   y[b] = act(op(a[b]) · op(b[b])), op = transpose when transA / transB is 1.
// Inputs     a: f32[..., M, K] ([..., K, M] with transA), rank ≥ 2.
//            b: f32[..., K, N] ([..., N, K] with transB), rank ≥ 2.
//            Leading (batch) dimensions broadcast numpy-style, as numpy.matmul.
// Outputs    y: f32[batch..., M, N].
// Immediates transA, transB: bool, default 0. act, act_alpha: a fused activation as LINEAR's
//            (default none; the optimizer's act-fusion pass writes it).
// Gradient   dZ from the output as LINEAR's (ops/linalg/act_grad.h), then two MATMULs with the transpose flags chosen so nothing is transposed in memory
//            (dA = dY·op(B)ᵀ, dB = op(A)ᵀ·dY, each laid out as its operand is stored), then
//            summed over broadcast batch dimensions.
// Kernels    reference: ops/linalg/gemm.h's GEMM per batch (Eigen packets, each element of y
//            summed in an order fixed by K and the transposes: a row never depends on M). JIT
//            (jit/gemm.h): packed GEMM `f32_matmul__avx512_14x32` / `__avx2_6x16`, GEMV
//            `__<isa>_gemv_mN` for a few rows, dot products `__<isa>_dot_mN` for a few rows with
//            transB (without act); the batch loops (broadcast included) are inside the kernel;
//            an activation runs in the last K block's store, `f32_matmul_relu__avx2_6x16`. Big GEMMs and
//            GEMVs run as parallel parts, each its own slice of N (jit_gemm_parts).
#include <algorithm>

#include "jit/gemm.h"
#include "ops/elementwise/activation.h"
#include "ops/elementwise/broadcast.h"
#include "ops/linalg/act_grad.h"
#include "ops/linalg/gemm.h"
#include "ops/linalg/gemm_request.h"
#include "ops/op.h"

namespace nnasm {
namespace {

Shape batch_of(const Shape& s) { return Shape::of(s.dims.data(), s.rank - 2); }

Status matmul_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(require_f32(ins, in));
  for (int k = 0; k < 2; ++k)
    if (in[k].shape.rank < 2) return Status::errorf("MATMUL: {} must have rank 2 or more", operand_str(ins, k, in[k]));
  const Shape &a = in[0].shape, &b = in[1].shape;
  const bool ta = ins.i(NNASM_IMM(MATMUL, transA)), tb = ins.i(NNASM_IMM(MATMUL, transB));
  int64_t m = a[a.rank - (ta ? 1 : 2)], ka = a[a.rank - (ta ? 2 : 1)];
  int64_t kb = b[b.rank - (tb ? 1 : 2)], n = b[b.rank - (tb ? 2 : 1)];
  if (ka != kb)
    return Status::errorf("MATMUL: inner dimensions differ: {} has K={}, {} has K={}", operand_str(ins, 0, in[0]), ka,
                          operand_str(ins, 1, in[1]), kb);
  Shape batch;
  if (!broadcast_shapes(batch_of(a), batch_of(b), &batch))
    return Status::errorf("MATMUL: batch dimensions of {} and {} do not broadcast", operand_str(ins, 0, in[0]),
                          operand_str(ins, 1, in[1]));
  if (batch.rank + 2 > MAX_RANK) return Status::error("MATMUL: result rank exceeds 6");
  Shape y = batch;
  y.rank += 2;
  y[y.rank - 2] = m;
  y[y.rank - 1] = n;
  (*out)[0] = TensorType{DType::F32, y};
  return Status::ok();
}

GemmShape gemm_shape(const Instruction& ins, const TensorType* in, const TensorType* out) {
  const Shape &as = in[0].shape, &ys = out[0].shape;
  const bool ta = ins.i(NNASM_IMM(MATMUL, transA)), tb = ins.i(NNASM_IMM(MATMUL, transB));
  return GemmShape{ys[ys.rank - 2], ys[ys.rank - 1], as[as.rank - (ta ? 2 : 1)], ta, tb};
}

GemmJitDesc jit_desc(const Instruction& ins, const TensorType* in, const TensorType* out) {
  const GemmShape g = gemm_shape(ins, in, out);
  GemmJitDesc d;
  d.op = "matmul";
  d.m = g.m;
  d.n = g.n;
  d.k = g.k;
  d.trans_a = g.trans_a;
  d.trans_b = g.trans_b;
  d.act = fused_act(ins);
  d.act_alpha = static_cast<float>(fused_act_alpha(ins));
  d.batch = batch_of(out[0].shape);
  d.a_batch = batch_of(in[0].shape);
  d.b_batch = batch_of(in[1].shape);
  return d;
}

// Enough for whichever kernel runs: the reference's packing blocks or the JIT's.
size_t matmul_scratch(const Instruction& ins, const TensorType* in, const TensorType* out) {
  return std::max(gemm_scratch_floats(gemm_shape(ins, in, out)) * sizeof(float),
                  jit_gemm_scratch_bytes(jit_desc(ins, in, out)));
}

Result<std::shared_ptr<const JitKernel>> matmul_jit(const JitRequest& r, KernelCache& cache) {
  return gemm_request_jit(jit_desc(r.ins, r.in, r.out), r, cache);
}

bool matmul_span(const JitRequest& r, bool output, int k, int64_t* begin, int64_t* end) {
  return gemm_request_span(jit_desc(r.ins, r.in, r.out), r, output, k, begin, end);
}

int matmul_parts(const JitRequest& r, int threads) { return gemm_request_parts(jit_desc(r.ins, r.in, r.out), r, threads); }

void matmul_ref(const KernelArgs* k) {
  const Shape &as = k->in_type[0].shape, &bs = k->in_type[1].shape, &ys = k->out_type[0].shape;
  const GemmShape g = gemm_shape(*k->ins, k->in_type, k->out_type);
  const float* A = static_cast<const float*>(k->in[0]);
  const float* B = static_cast<const float*>(k->in[1]);
  float* Y = static_cast<float*>(k->out[0]);
  const int64_t a_mat = g.m * g.k, b_mat = g.k * g.n, y_mat = g.m * g.n;
  std::fill(Y, Y + ys.numel(), 0.f);
  BroadcastWalk(batch_of(ys), batch_of(as), batch_of(bs)).for_each([&](int64_t yb, int64_t ab, int64_t bb) {
    gemm_accumulate(g, A + ab * a_mat, B + bb * b_mat, Y + yb * y_mat, static_cast<float*>(k->scratch));
  });
  const auto f = fused_act(*k->ins);
  if (f == Activation::NONE) return;
  const float alpha = static_cast<float>(fused_act_alpha(*k->ins));
  for (int64_t i = 0; i < ys.numel(); ++i) Y[i] = act::apply(f, Y[i], alpha);
}

Status matmul_grad(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy,
                   const std::vector<bool>& need, std::vector<TensorId>* dx) {
  const bool ta = ins.i(NNASM_IMM(MATMUL, transA)), tb = ins.i(NNASM_IMM(MATMUL, transB));
  Result<TensorId> dz = act_grad_from_output(b, ins, dy[0]);
  if (!dz) return dz.status();
  const TensorId A = ins.in[0], B = ins.in[1], dY = *dz;
  auto mm = [&](TensorId x, TensorId y, bool t1, bool t2) {
    return b.emit(Opcode::MATMUL, {x, y}, {{"transA", imm_i(t1)}, {"transB", imm_i(t2)}});
  };
  if (need[0]) {
    const TensorId da = !ta ? (tb ? mm(dY, B, false, false) : mm(dY, B, false, true))
                            : (tb ? mm(B, dY, true, true) : mm(B, dY, false, true));
    (*dx)[0] = b.sum_to(da, b.type(A).shape);
  }
  if (need[1]) {
    const TensorId db = !tb ? (ta ? mm(A, dY, false, false) : mm(A, dY, true, false))
                            : (ta ? mm(dY, A, true, true) : mm(dY, A, true, false));
    (*dx)[1] = b.sum_to(db, b.type(B).shape);
  }
  return b.status();
}

}  // namespace

OpHooks op_hooks_MATMUL() {
  OpHooks h{matmul_shape, matmul_ref, matmul_scratch, matmul_grad, matmul_jit, matmul_parts};
  h.span = matmul_span;
  return h;
}

}  // namespace nnasm

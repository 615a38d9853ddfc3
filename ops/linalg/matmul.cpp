// MATMUL: batched matrix product.
//
// Computes   y[b] = op(a[b]) · op(b[b]), op = transpose when transA / transB is 1.
// Inputs     a: f32[..., M, K] ([..., K, M] with transA), rank ≥ 2.
//            b: f32[..., K, N] ([..., N, K] with transB), rank ≥ 2.
//            Leading (batch) dimensions broadcast numpy-style, as numpy.matmul.
// Outputs    y: f32[batch..., M, N].
// Immediates transA, transB: bool, default 0.
// Gradient   added with autodiff (training issue): dA = dY·Bᵀ, dB = Aᵀ·dY.
// Kernels    reference: i-p-j loop accumulating in f32; JIT GEMM comes with the JIT issue.
#include "ops/elementwise/broadcast.h"
#include "ops/op.h"

namespace nnasm {
namespace {

enum { TRANS_A, TRANS_B };

struct Dims {
  int64_t m, k, n;
};

Shape batch_of(const Shape& s) { return Shape::of(s.dims.data(), s.rank - 2); }

Status matmul_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(require_f32(ins, in));
  for (int k = 0; k < 2; ++k)
    if (in[k].shape.rank < 2) return Status::errorf("MATMUL: {} must have rank 2 or more", operand_str(ins, k, in[k]));
  const Shape &a = in[0].shape, &b = in[1].shape;
  const bool ta = ins.i(TRANS_A), tb = ins.i(TRANS_B);
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

void matmul_ref(const KernelArgs* k) {
  const Shape &as = k->in_type[0].shape, &bs = k->in_type[1].shape, &ys = k->out_type[0].shape;
  const bool ta = k->ins->i(TRANS_A), tb = k->ins->i(TRANS_B);
  const int64_t m = ys[ys.rank - 2], n = ys[ys.rank - 1], kk = as[as.rank - (ta ? 2 : 1)];
  // Element strides of row and column index for each operand.
  const int64_t a_ri = ta ? 1 : kk, a_ci = ta ? m : 1;
  const int64_t b_ri = tb ? 1 : n, b_ci = tb ? kk : 1;
  const float* A = static_cast<const float*>(k->in[0]);
  const float* B = static_cast<const float*>(k->in[1]);
  float* Y = static_cast<float*>(k->out[0]);
  const int64_t a_mat = m * kk, b_mat = kk * n, y_mat = m * n;
  BroadcastWalk(batch_of(ys), batch_of(as), batch_of(bs)).for_each([&](int64_t yb, int64_t ab, int64_t bb) {
    const float* a = A + ab * a_mat;
    const float* b = B + bb * b_mat;
    float* y = Y + yb * y_mat;
    for (int64_t i = 0; i < m; ++i) {
      float* yr = y + i * n;
      for (int64_t j = 0; j < n; ++j) yr[j] = 0.f;
      for (int64_t p = 0; p < kk; ++p) {
        const float av = a[i * a_ri + p * a_ci];
        const float* br = b + p * b_ri;
        if (b_ci == 1)
          for (int64_t j = 0; j < n; ++j) yr[j] += av * br[j];
        else
          for (int64_t j = 0; j < n; ++j) yr[j] += av * br[j * b_ci];
      }
    }
  });
}

}  // namespace

OpHooks op_hooks_MATMUL() { return {matmul_shape, matmul_ref}; }

}  // namespace nnasm

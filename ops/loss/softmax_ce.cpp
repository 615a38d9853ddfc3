// SOFTMAX_CE and its fused backward: softmax cross-entropy over the last axis.
//
// Computes   SOFTMAX_CE      loss = mean over rows r of −Σ_c t[r,c]·log softmax(x[r])_c
//                            (with class ids: −log softmax(x[r])_label[r]).
//            SOFTMAX_CE_BWD  dx = (softmax(x) − t)·dloss / rows.
// Inputs     x: f32 [..., C] logits, rank ≥ 1 (rows = everything before the last axis).
//            t: i32 [...] class ids (x's shape without its last axis), or f32 x's shape
//            (one-hot rows or probabilities).  BWD also takes dloss: f32[].
// Outputs    loss: f32[] (rank 0).  BWD: dx, x's shape.
// Gradient   SOFTMAX_CE: one SOFTMAX_CE_BWD for x; none for the labels (an error if asked).
//            SOFTMAX_CE_BWD: none.
// Kernels    reference: per row max, log-sum-exp, then the loss or the gradient; numerically
//            stable for any finite logits.
//            JIT (jit/rowwise.h), AVX2/AVX-512: `f32_softmax_ce_{ids,probs}__<isa>` and
//            `f32_softmax_ce_bwd_{ids,probs}__<isa>`: per row a max pass, a Σ e^(x − m) pass, then
//            (ids) one element, or (probs, BWD) a third pass; row terms summed in double. Error of
//            lse = ln Σ: absolute ≤ ulp(lse)·LOG_MAX_ULP + the relative error of Σ (≤ 1.5 ulp per
//            term + (⌈C/(4W)⌉ + log2(4W)) ulp of summation); the loss inherits it per row (plus,
//            for f32 targets, the f32 summation of the row's terms); dx relative ≤ EXP_MAX_ULP +
//            that error of lse/ulp + 1.5 ulp. Bitwise deterministic per ISA.
// Notes      a class id outside 0..C−1 makes that row's loss NaN (never an out-of-bounds read).
//            The fused backward pays: it replaces softmax, subtract and scale passes.
#include <cmath>

#include "jit/rowwise.h"
#include "ops/op.h"

namespace nnasm {
namespace {

struct Rows {
  int64_t rows, classes;
};

Rows rows_of(const Shape& x) {
  const int64_t c = x[x.rank - 1];
  return {x.numel() / c, c};
}

Status check_logits_labels(const Instruction& ins, const std::vector<TensorType>& in) {
  const TensorType &x = in[0], &t = in[1];
  const char* mn = ins.info().mnemonic;
  if (x.dtype != DType::F32 || x.shape.rank < 1)
    return Status::errorf("{}: logits {} must be f32 of rank 1 or more", mn, operand_str(ins, 0, x));
  if (t.dtype == DType::F32) {
    if (t.shape != x.shape)
      return Status::errorf("{}: f32 targets {} must have the logits' shape {}", mn, operand_str(ins, 1, t), x.str());
  } else {
    const Shape want = Shape::of(x.shape.dims.data(), x.shape.rank - 1);
    if (t.shape != want)
      return Status::errorf("{}: class ids {} must be i32{} for logits {}", mn, operand_str(ins, 1, t), want.str(),
                            x.str());
  }
  return Status::ok();
}

Status ce_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(check_logits_labels(ins, in));
  (*out)[0] = TensorType{DType::F32, Shape{}};
  return Status::ok();
}

Status ce_bwd_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(check_logits_labels(ins, in));
  if (in[2].dtype != DType::F32 || in[2].shape.rank != 0)
    return Status::errorf("SOFTMAX_CE_BWD: dloss {} must be f32[]", operand_str(ins, 2, in[2]));
  (*out)[0] = in[0];
  return Status::ok();
}

// Max and log Σ e^(x − max) of one row.
void row_lse(const float* x, int64_t c, float* m, float* lse) {
  float mx = -INFINITY;
  for (int64_t j = 0; j < c; ++j) mx = std::fmax(mx, x[j]);
  float s = 0;
  for (int64_t j = 0; j < c; ++j) s += std::exp(x[j] - mx);
  *m = mx;
  *lse = std::log(s);
}

// Target probability of class j in row r (one-hot from an id, or the f32 target itself);
// `bad` is set when an id is out of range.
float target(const KernelArgs* k, const Rows& d, int64_t r, int64_t j, bool* bad) {
  if (k->in_type[1].dtype == DType::F32) return static_cast<const float*>(k->in[1])[r * d.classes + j];
  const int32_t id = static_cast<const int32_t*>(k->in[1])[r];
  if (id < 0 || id >= d.classes) *bad = true;
  return id == j ? 1.f : 0.f;
}

void ce_ref(const KernelArgs* k) {
  const Rows d = rows_of(k->in_type[0].shape);
  const float* x = static_cast<const float*>(k->in[0]);
  double total = 0;
  for (int64_t r = 0; r < d.rows; ++r) {
    const float* xr = x + r * d.classes;
    float m, lse;
    row_lse(xr, d.classes, &m, &lse);
    bool bad = false;
    double row = 0;
    for (int64_t j = 0; j < d.classes; ++j) {
      const float t = target(k, d, r, j, &bad);
      if (t != 0) row -= t * (xr[j] - m - lse);
    }
    total += bad ? NAN : row;
  }
  *static_cast<float*>(k->out[0]) = static_cast<float>(total / static_cast<double>(d.rows));
}

void ce_bwd_ref(const KernelArgs* k) {
  const Rows d = rows_of(k->in_type[0].shape);
  const float* x = static_cast<const float*>(k->in[0]);
  const float scale = *static_cast<const float*>(k->in[2]) / static_cast<float>(d.rows);
  float* dx = static_cast<float*>(k->out[0]);
  for (int64_t r = 0; r < d.rows; ++r) {
    const float* xr = x + r * d.classes;
    float m, lse;
    row_lse(xr, d.classes, &m, &lse);
    bool bad = false;
    for (int64_t j = 0; j < d.classes; ++j)
      dx[r * d.classes + j] = (std::exp(xr[j] - m - lse) - target(k, d, r, j, &bad)) * scale;
    if (bad)
      for (int64_t j = 0; j < d.classes; ++j) dx[r * d.classes + j] = NAN;
  }
}

Status ce_grad(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy, const std::vector<bool>& need,
               std::vector<TensorId>* dx) {
  if (need[1]) return Status::error("SOFTMAX_CE has no gradient with respect to its targets");
  (*dx)[0] = b.emit(Opcode::SOFTMAX_CE_BWD, {ins.in[0], ins.in[1], dy[0]});
  return b.status();
}

template <bool BWD>
Result<KernelRef> ce_jit(const JitRequest& r, KernelCache& cache) {
  const Rows d = rows_of(r.in[0].shape);
  return softmax_ce_kernel(r.isa, d.rows, d.classes, r.in[1].dtype != DType::F32, BWD, cache);
}

}  // namespace

OpHooks op_hooks_SOFTMAX_CE() { return {ce_shape, ce_ref, nullptr, ce_grad, ce_jit<false>}; }
OpHooks op_hooks_SOFTMAX_CE_BWD() { return {ce_bwd_shape, ce_bwd_ref, nullptr, nullptr, ce_jit<true>}; }

}  // namespace nnasm

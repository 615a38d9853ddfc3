// CONV_WEIGHTS_NCHWC: convolution weights packed for the blocked convolutions (ops/layout/nchwc.h),
// dense or depthwise. The layout pass derives them from a convolution's weights in inference
// programs.
//
// Computes   dense       y[ob, cb, i, j, ci, co] = w[ob·b + co, cb·b + ci, i, j], 0 past O or C:
//                        for each input channel of a tap, a vector of b output channels.
//            depthwise   y[cb, i, j, c] = w[cb·b + c, 0, i, j], 0 past C.
// Inputs     w: f32[O, C, kh, kw] (PyTorch's layout); depthwise: f32[C, 1, kh, kw].
// Outputs    dense: f32[⌈O/b⌉, ⌈C/b⌉, kh, kw, b, b]; depthwise: f32[⌈C/b⌉, kh, kw, b].
// Immediates block: b, 8 or 16 (default 16); depthwise: 0 or 1 (default 0).
// Gradient   none: the layout pass leaves training programs alone, so the packed weights are
//            never on a path autodiff walks, and autodiff names the op if asked.
// Kernels    reference only: it runs once after the params change (in the program's derived
//            section), never per run, so a generated kernel would save nothing a user notices.
// Notes      A move: NaN payloads and signed zeros pass unchanged. Does not allocate.
#include "ops/layout/nchwc.h"
#include "ops/op.h"

namespace nnasm {
namespace {

Status conv_weights_nchwc_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(require_f32(ins, in));
  const Shape& w = in[0].shape;
  if (w.rank != 4)
    return Status::errorf("CONV_WEIGHTS_NCHWC: weights {} must be [O, C, kh, kw] (rank 4)", operand_str(ins, 0, in[0]));
  const int64_t b = ins.i(NNASM_IMM(CONV_WEIGHTS_NCHWC, block));
  if (!nchwc_block_valid(b))
    return Status::errorf("CONV_WEIGHTS_NCHWC: block must be 8 or 16 (a vector of floats), got {}", b);
  if (ins.i(NNASM_IMM(CONV_WEIGHTS_NCHWC, depthwise)) == 0) {
    (*out)[0] = TensorType{DType::F32, Shape{nchwc_blocks(w[0], b), nchwc_blocks(w[1], b), w[2], w[3], b, b}};
    return Status::ok();
  }
  if (w[1] != 1)
    return Status::errorf("CONV_WEIGHTS_NCHWC: depthwise=1 needs weights [C, 1, kh, kw], got {}",
                          operand_str(ins, 0, in[0]));
  (*out)[0] = TensorType{DType::F32, Shape{nchwc_blocks(w[0], b), w[2], w[3], b}};
  return Status::ok();
}

void conv_weights_nchwc_ref(const KernelArgs* k) {
  const Shape& ws = k->in_type[0].shape;
  const int64_t o_n = ws[0], c_n = ws[1], taps = ws[2] * ws[3];
  const bool depthwise = k->ins->i(NNASM_IMM(CONV_WEIGHTS_NCHWC, depthwise)) != 0;
  const int64_t b = k->ins->i(NNASM_IMM(CONV_WEIGHTS_NCHWC, block));
  const float* w = static_cast<const float*>(k->in[0]);
  float* y = static_cast<float*>(k->out[0]);
  if (depthwise) {
    for (int64_t cb = 0; cb < nchwc_blocks(o_n, b); ++cb)
      for (int64_t t = 0; t < taps; ++t)
        for (int64_t l = 0; l < b; ++l) {
          const int64_t c = cb * b + l;
          *y++ = c < o_n ? w[c * taps + t] : 0.f;
        }
    return;
  }
  for (int64_t ob = 0; ob < nchwc_blocks(o_n, b); ++ob)
    for (int64_t cb = 0; cb < nchwc_blocks(c_n, b); ++cb)
      for (int64_t t = 0; t < taps; ++t)
        for (int64_t ci = 0; ci < b; ++ci)
          for (int64_t co = 0; co < b; ++co) {
            const int64_t o = ob * b + co, c = cb * b + ci;
            *y++ = o < o_n && c < c_n ? w[(o * c_n + c) * taps + t] : 0.f;
          }
}

}  // namespace

OpHooks op_hooks_CONV_WEIGHTS_NCHWC() { return {conv_weights_nchwc_shape, conv_weights_nchwc_ref}; }

}  // namespace nnasm

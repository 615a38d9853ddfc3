// TO_NCHWC and TO_NCHW: activations into the blocked channel layout and back (ops/layout/nchwc.h).
// The layout pass puts them at the edges of a run of blocked convolutions in inference programs.
//
// Computes   TO_NCHWC  y[n, c / b, h, w, c mod b] = x[n, c, h, w]; the padding lanes (c ≥ C in
//                      the last block) are 0.
//            TO_NCHW   y[n, c, h, w] = x[n, c / b, h, w, c mod b] for c < channels; the padding
//                      lanes of x go nowhere.
// Inputs     TO_NCHWC  x: f32[N, C, H, W].
//            TO_NCHW   x: f32[N, Cb, H, W, b], b 8 or 16.
// Outputs    TO_NCHWC  y: f32[N, ⌈C/b⌉, H, W, b].
//            TO_NCHW   y: f32[N, channels, H, W].
// Immediates TO_NCHWC  block: b, 8 or 16 (a vector of floats at AVX2 and AVX-512); default 16.
//            TO_NCHW   channels: C, required; (Cb − 1)·b < channels ≤ Cb·b, so that only the last
//                      block has padding lanes.
// Gradient   TO_NCHWC: dx = TO_NCHW(dy, channels = C). TO_NCHW: dx = TO_NCHWC(dy, block = b),
//            whose zero padding lanes are the right gradient: padding lanes never reach y.
// Kernels    reference: loops over (n, block, pixel, lane). JIT (ops/layout/nchwc_reorder_jit.h):
//            tiles of b channels × b pixels transposed in registers, whole vectors loaded and
//            stored, masked loads and stores for the last pixels of a plane, the channels past C
//            zeroed (TO_NCHWC) or not stored (TO_NCHW); `f32_nchw_to_nchwc16__avx512` and
//            `f32_nchwc16_to_nchw__avx512` in zmm; b = 8, at either level, in ymm
//            (`f32_nchw_to_nchwc8__avx2`); b = 16 at AVX2 as two tiles of 8 channels in ymm
//            (`f32_nchw_to_nchwc16__avx2`). They run once per activation at a blocked region's
//            edge, so they move data at memory speed; a large tensor splits into parallel parts
//            over its (n, channel block) pairs.
// Notes      A move: NaN payloads and signed zeros pass unchanged, and every kernel writes the
//            reference's bits. Does not allocate.
#include "ops/layout/nchwc.h"
#include "ops/layout/nchwc_reorder_jit.h"
#include "ops/op.h"

namespace nnasm {
namespace {

Status to_nchwc_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(require_f32(ins, in));
  const Shape& x = in[0].shape;
  if (x.rank != 4) return Status::errorf("TO_NCHWC: input {} must be NCHW (rank 4)", operand_str(ins, 0, in[0]));
  const int64_t b = ins.i(NNASM_IMM(TO_NCHWC, block));
  if (!nchwc_block_valid(b)) return Status::errorf("TO_NCHWC: block must be 8 or 16 (a vector of floats), got {}", b);
  (*out)[0] = TensorType{DType::F32, Shape{x[0], nchwc_blocks(x[1], b), x[2], x[3], b}};
  return Status::ok();
}

Status to_nchw_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(require_f32(ins, in));
  const Shape& x = in[0].shape;
  if (x.rank != 5 || !nchwc_block_valid(x[4]))
    return Status::errorf("TO_NCHW: input {} must be blocked NCHWc (rank 5, last dim 8 or 16)",
                          operand_str(ins, 0, in[0]));
  const int64_t channels = ins.i(NNASM_IMM(TO_NCHW, channels)), cb = x[1], b = x[4];
  if (channels <= (cb - 1) * b || channels > cb * b)
    return Status::errorf("TO_NCHW: channels={} does not fit input {}: its {} blocks of {} hold {} to {} channels",
                          channels, operand_str(ins, 0, in[0]), cb, b, (cb - 1) * b + 1, cb * b);
  (*out)[0] = TensorType{DType::F32, Shape{x[0], channels, x[2], x[3]}};
  return Status::ok();
}

// The plain side's sizes with the block size b.
NchwcGeom geom(const Shape& plain, int64_t b) { return NchwcGeom{plain[0], plain[1], plain[2] * plain[3], b}; }

void to_nchwc_ref(const KernelArgs* k) {
  const NchwcGeom g = geom(k->in_type[0].shape, k->out_type[0].shape[4]);
  const float* x = static_cast<const float*>(k->in[0]);
  float* y = static_cast<float*>(k->out[0]);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t cb = 0; cb < g.blocks(); ++cb)
      for (int64_t p = 0; p < g.pixels; ++p)
        for (int64_t l = 0; l < g.b; ++l) {
          const int64_t c = cb * g.b + l;
          *y++ = c < g.c ? x[(n * g.c + c) * g.pixels + p] : 0.f;
        }
}

void to_nchw_ref(const KernelArgs* k) {
  const NchwcGeom g = geom(k->out_type[0].shape, k->in_type[0].shape[4]);
  const float* x = static_cast<const float*>(k->in[0]);
  float* y = static_cast<float*>(k->out[0]);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t c = 0; c < g.c; ++c)
      for (int64_t p = 0; p < g.pixels; ++p)
        *y++ = x[((n * g.blocks() + c / g.b) * g.pixels + p) * g.b + c % g.b];
}

Status to_nchwc_grad(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy,
                     const std::vector<bool>&, std::vector<TensorId>* dx) {
  (*dx)[0] = b.emit(Opcode::TO_NCHW, {dy[0]}, {{"channels", imm_i(b.type(ins.in[0]).shape[1])}});
  return b.status();
}

Status to_nchw_grad(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy,
                    const std::vector<bool>&, std::vector<TensorId>* dx) {
  (*dx)[0] = b.emit(Opcode::TO_NCHWC, {dy[0]}, {{"block", imm_i(b.type(ins.in[0]).shape[4])}});
  return b.status();
}

Result<std::shared_ptr<const JitKernel>> to_nchwc_jit(const JitRequest& r, KernelCache& cache) {
  return nchwc_reorder_jit_kernel(geom(r.in[0].shape, r.out[0].shape[4]), true, r.isa, r.part, r.n_parts, cache);
}

Result<std::shared_ptr<const JitKernel>> to_nchw_jit(const JitRequest& r, KernelCache& cache) {
  return nchwc_reorder_jit_kernel(geom(r.out[0].shape, r.in[0].shape[4]), false, r.isa, r.part, r.n_parts, cache);
}

int to_nchwc_parts(const JitRequest& r, int threads) {
  return nchwc_reorder_jit_parts(geom(r.in[0].shape, r.out[0].shape[4]), threads);
}

int to_nchw_parts(const JitRequest& r, int threads) {
  return nchwc_reorder_jit_parts(geom(r.out[0].shape, r.in[0].shape[4]), threads);
}

}  // namespace

OpHooks op_hooks_TO_NCHWC() {
  return {to_nchwc_shape, to_nchwc_ref, nullptr, to_nchwc_grad, to_nchwc_jit, to_nchwc_parts};
}
OpHooks op_hooks_TO_NCHW() { return {to_nchw_shape, to_nchw_ref, nullptr, to_nchw_grad, to_nchw_jit, to_nchw_parts}; }

}  // namespace nnasm

// DWCONV2D_NCHWC: depthwise 2-D convolution over the blocked channel layout (ops/layout/nchwc.h).
//
// Computes   y[n, cb, oy, ox, c] = act(bias[cb·b + c] + Σ_{i, j} w[cb, i, j, c] ·
//                x[n, cb, oy·sh − ph + i·dh, ox·sw − pw + j·dw, c]), zero padding outside the map,
//            over every lane c < b; the bias is 0 past C and without a bias input. CONV2D with
//            groups = C = O, in the blocked layout.
// Inputs     x: f32[N, Cb, H, W, b], b = 8 or 16; w: the depthwise weights packed f32[Cb, kh, kw, b]
//            (nchwc.h: zero past C); bias: f32[C] with ⌈C/b⌉ = Cb, optional (two inputs: none).
// Outputs    y: f32[N, Cb, Ho, Wo, b], Ho = ⌊(H + 2ph − dh·(kh − 1) − 1) / sh⌋ + 1, Wo likewise.
//            Its padding lanes (c ≥ C) hold act(the sum over x's padding lanes), finite where
//            those are.
// Immediates stride, pad, dilation: [h, w] pairs as CONV2D's; act, act_alpha: a fused activation
//            as LINEAR's.
// Gradient   none (autodiff names the op): the layout pass that makes this op rewrites inference
//            programs only and leaves training programs in NCHW, where CONV2D has its gradient.
// Kernels    reference: the loops of the formula, bias first, then the taps in (i, j) order.
//            JIT, b = 16 on AVX-512 (zmm) and b = 8 on AVX2 (ymm; also on an AVX-512 machine),
//            within dwconv_nchwc_jit_applies: the generated kernel of ops/conv/dwconv_nchwc.h (a
//            block of up to 16 output pixels of a row in registers, the weights of the channel
//            block in registers over all its rows (on AVX2 a tap row's at a time), each tap one
//            whole-vector FMA, an input vector that several of the block's taps read loaded once
//            for all of them, the taps in the padding left out of the code; fused bias and
//            activation before the store), `f32_dwconv2d_nchwc_bias_relu__avx512_3x3_16px`. A
//            bound kernel runs it over the part's share of the N·Cb·Ho output rows: the rows
//            are split evenly, so a part may start or end inside a channel block's plane (one
//            image of 32 channels at b = 16 is two planes, one a thread; 144 channels, nine
//            planes, split in the fifth). Channel blocks whose bias would be read past C take
//            it from a zero-padded copy in the scratch. b = 16 below AVX-512: the reference.
// Notes      Every output gets the same arithmetic however the rows are split, so the result
//            does not depend on the thread count. Padding lanes of x meet zero weights, so
//            they add 0 wherever x's padding lanes are finite.
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "ops/conv/conv_geom.h"
#include "ops/conv/dwconv_nchwc.h"
#include "ops/elementwise/activation.h"
#include "ops/layout/nchwc.h"
#include "ops/op.h"

namespace nnasm {
namespace {

constexpr int STRIDE = NNASM_IMM(DWCONV2D_NCHWC, stride), PAD = NNASM_IMM(DWCONV2D_NCHWC, pad),
              DILATION = NNASM_IMM(DWCONV2D_NCHWC, dilation);
// Work per part below which a split does not pay for the hand-off (CONV2D's threshold).
constexpr int64_t PART_FLOPS = int64_t(1) << 20;

Status dwconv_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  const char* op = ins.info().mnemonic;
  if (in.size() != 2 && in.size() != 3)
    return Status::errorf("{} takes 2 or 3 inputs (x, w, optional bias), got {}", op, in.size());
  NNASM_TRY(require_f32(ins, in));
  const Shape &x = in[0].shape, &w = in[1].shape;
  if (x.rank != 5) return Status::errorf("{}: input {} must be blocked NCHWc [N, Cb, H, W, b] (rank 5)", op, operand_str(ins, 0, in[0]));
  const int64_t b = x[4];
  if (!nchwc_block_valid(b))
    return Status::errorf("{}: input {} has blocks of {} channels; b must be 8 or 16", op, operand_str(ins, 0, in[0]), b);
  if (w.rank != 4 || w[0] != x[1] || w[3] != b || w[1] < 1 || w[2] < 1)
    return Status::errorf("{}: weight {} must be packed depthwise weights [Cb, kh, kw, b] = [{}, kh, kw, {}]", op,
                          operand_str(ins, 1, in[1]), x[1], b);
  if (in.size() == 3 && (in[2].shape.rank != 1 || nchwc_blocks(in[2].shape[0], b) != x[1] || in[2].shape[0] < 1))
    return Status::errorf("{}: bias {} must be f32[C], one per channel, with ⌈C/{}⌉ = {} blocks as input {}", op,
                          operand_str(ins, 2, in[2]), b, x[1], operand_str(ins, 0, in[0]));
  int64_t sh, sw, ph, pw, dh, dw;
  NNASM_TRY(conv_pair_imm(ins, STRIDE, 1, &sh, &sw));
  NNASM_TRY(conv_pair_imm(ins, PAD, 0, &ph, &pw));
  NNASM_TRY(conv_pair_imm(ins, DILATION, 1, &dh, &dw));
  const int64_t ho = conv_out_size(x[2], w[1], sh, ph, dh), wo = conv_out_size(x[3], w[2], sw, pw, dw);
  if (ho < 1 || wo < 1)
    return Status::errorf("{}: a {}x{} kernel (dilation [{},{}]) does not fit input {} padded by [{},{}]", op, w[1], w[2],
                          dh, dw, operand_str(ins, 0, in[0]), ph, pw);
  (*out)[0] = TensorType{DType::F32, Shape{x[0], x[1], ho, wo, b}};
  return Status::ok();
}

}  // namespace

DwNchwc dwconv_nchwc_geometry(const Instruction& ins, const TensorType* in) {
  const Shape &x = in[0].shape, &w = in[1].shape;
  DwNchwc d{};
  d.n = x[0], d.cb = x[1], d.h = x[2], d.w = x[3], d.b = x[4];
  d.kh = w[1], d.kw = w[2];
  d.sh = ins.ints(STRIDE)[0], d.sw = ins.ints(STRIDE)[1];
  d.ph = ins.ints(PAD)[0], d.pw = ins.ints(PAD)[1];
  d.dh = ins.ints(DILATION)[0], d.dw = ins.ints(DILATION)[1];
  d.ho = conv_out_size(d.h, d.kh, d.sh, d.ph, d.dh);
  d.wo = conv_out_size(d.w, d.kw, d.sw, d.pw, d.dw);
  d.bias = ins.in.size() == 3;
  d.c = d.bias ? in[2].shape[0] : d.cb * d.b;
  d.act = fused_act(ins);
  d.act_alpha = static_cast<float>(fused_act_alpha(ins));
  return d;
}

namespace {

void dwconv_ref(const KernelArgs* a) {
  const DwNchwc d = dwconv_nchwc_geometry(*a->ins, a->in_type);
  const float* x = static_cast<const float*>(a->in[0]);
  const float* w = static_cast<const float*>(a->in[1]);
  const float* bias = d.bias ? static_cast<const float*>(a->in[2]) : nullptr;
  float* y = static_cast<float*>(a->out[0]);
  for (int64_t n = 0; n < d.n; ++n)
    for (int64_t cb = 0; cb < d.cb; ++cb) {
      const float* xp = x + (n * d.cb + cb) * d.in_plane();
      const float* wb = w + cb * d.taps() * d.b;
      float* yp = y + (n * d.cb + cb) * d.out_plane();
      for (int64_t oy = 0; oy < d.ho; ++oy)
        for (int64_t ox = 0; ox < d.wo; ++ox)
          for (int64_t c = 0; c < d.b; ++c) {
            float s = bias && cb * d.b + c < d.c ? bias[cb * d.b + c] : 0.f;
            for (int64_t i = 0; i < d.kh; ++i) {
              const int64_t iy = oy * d.sh - d.ph + i * d.dh;
              if (iy < 0 || iy >= d.h) continue;
              for (int64_t j = 0; j < d.kw; ++j) {
                const int64_t ix = ox * d.sw - d.pw + j * d.dw;
                if (ix >= 0 && ix < d.w) s += wb[(i * d.kw + j) * d.b + c] * xp[(iy * d.w + ix) * d.b + c];
              }
            }
            yp[(oy * d.wo + ox) * d.b + c] = act::apply(d.act, s, d.act_alpha);
          }
    }
}

// The last channel block's bias, zero past C, when C is not a whole number of blocks.
bool bias_tail(const DwNchwc& d) { return d.bias && d.c % d.b != 0; }

size_t dwconv_scratch(const Instruction& ins, const TensorType* in, const TensorType*) {
  return bias_tail(dwconv_nchwc_geometry(ins, in)) ? 64 : 0;
}

// One call of the generated kernel: `blocks` channel blocks from cb0 of image n, the rows its
// kernel was made for.
struct DwCall {
  int64_t n, cb0, blocks;
  KernelFn fn;
  bool last_block_bias_tail;  // the last of the blocks takes the zero-padded bias copy
};

struct DwPart {
  DwNchwc d;
  std::vector<DwCall> calls;
  std::vector<std::shared_ptr<const JitKernel>> keep;
};

void dwconv_part(const KernelArgs* a, const void* data) {
  const DwPart& k = *static_cast<const DwPart*>(data);
  const DwNchwc& d = k.d;
  const float* x = static_cast<const float*>(a->in[0]);
  const float* w = static_cast<const float*>(a->in[1]);
  const float* bias = d.bias ? static_cast<const float*>(a->in[2]) : nullptr;
  float* y = static_cast<float*>(a->out[0]);
  for (const DwCall& c : k.calls) {
    const int64_t plane = c.n * d.cb + c.cb0;
    int64_t blocks = c.blocks - (c.last_block_bias_tail ? 1 : 0);
    const float* xc = x + plane * d.in_plane();
    const float* wc = w + c.cb0 * d.taps() * d.b;
    const float* bc = bias ? bias + c.cb0 * d.b : nullptr;
    float* yc = y + plane * d.out_plane();
    if (blocks > 0) call_kernel(c.fn, {xc, wc, bc, &blocks}, yc);
    if (!c.last_block_bias_tail) continue;
    float* tail = static_cast<float*>(a->scratch);
    const int64_t first = (c.cb0 + blocks) * d.b;
    std::fill(tail, tail + d.b, 0.f);
    std::copy(bias + first, bias + d.c, tail);
    int64_t one = 1;
    call_kernel(c.fn, {xc + blocks * d.in_plane(), wc + blocks * d.taps() * d.b, tail, &one}, yc + blocks * d.out_plane());
  }
}

// Whether the generated kernel runs d on `isa`: b = 16 needs AVX-512.
bool dwconv_jit_runs(const DwNchwc& d, Isa isa) {
  return isa >= (d.b == 16 ? Isa::AVX512 : Isa::AVX2) && dwconv_nchwc_jit_applies(d);
}

Result<std::shared_ptr<const JitKernel>> dwconv_jit(const JitRequest& r, KernelCache& cache) {
  auto k = std::make_shared<DwPart>();
  k->d = dwconv_nchwc_geometry(r.ins, r.in);
  const DwNchwc& d = k->d;
  if (!dwconv_jit_runs(d, r.isa)) return std::shared_ptr<const JitKernel>();
  // The part's share of the N·Cb·Ho output rows, as runs of whole planes within one image and
  // the partial planes at either end.
  const int64_t rows = d.n * d.cb * d.ho;
  const int64_t begin = rows * r.part / r.n_parts, end = rows * (r.part + 1) / r.n_parts;
  std::string name;
  for (int64_t pos = begin; pos < end;) {
    const int64_t plane = pos / d.ho, r0 = pos % d.ho, r1 = std::min(d.ho, r0 + end - pos);
    const int64_t n = plane / d.cb, cb = plane % d.cb;
    const int64_t blocks = r0 == 0 && r1 == d.ho ? std::min((end - pos) / d.ho, d.cb - cb) : 1;
    Result<std::shared_ptr<const JitKernel>> kernel = dwconv_nchwc_kernel(d, r0, r1, r.isa, cache);
    if (!kernel || !kernel.value()) return kernel;
    k->keep.push_back(kernel.value());
    name = kernel.value()->name();
    k->calls.push_back({n, cb, blocks, kernel.value()->fn(), bias_tail(d) && cb + blocks == d.cb});
    pos += (blocks - 1) * d.ho + r1 - r0;
  }
  if (k->calls.empty()) return std::shared_ptr<const JitKernel>();
  const std::string key = fmt::format("dwconv2d_nchwc:{}:{}x{}x{}x{}x{}:c{}:k{}x{}:s{}x{}:p{}x{}:d{}x{}:bias{}:act{}:{}:part{}/{}",
                                      isa_name(r.isa), d.n, d.cb, d.h, d.w, d.b, d.c, d.kh, d.kw, d.sh, d.sw, d.ph, d.pw,
                                      d.dh, d.dw, int(d.bias), static_cast<int>(d.act), d.act_alpha, r.part, r.n_parts);
  return cache.get(key, [&] { return build_bound_kernel(name, dwconv_part, std::shared_ptr<const void>(k)); });
}

int dwconv_parts(const JitRequest& r, int threads) {
  const DwNchwc d = dwconv_nchwc_geometry(r.ins, r.in);
  if (threads <= 1 || !dwconv_jit_runs(d, r.isa)) return 1;
  const int64_t rows = d.n * d.cb * d.ho, flops = 2 * rows * d.wo * d.b * d.taps();
  return static_cast<int>(std::clamp<int64_t>(std::min(flops / PART_FLOPS, rows), 1, threads));
}

}  // namespace

OpHooks op_hooks_DWCONV2D_NCHWC() {
  return {dwconv_shape, dwconv_ref, dwconv_scratch, nullptr, dwconv_jit, dwconv_parts};
}

}  // namespace nnasm

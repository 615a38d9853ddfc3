// CONV2D_NCHWC: dense 2-D convolution over the blocked channel layout (ops/layout/nchwc.h).
//
// Computes   y[n, ob, oy, ox, co] = act(bias[ob·b + co] + Σ_{cb, i, j, ci} w[ob, cb, i, j, ci, co] ·
//                x[n, cb, oy·sh − ph + i·dh, ox·sw − pw + j·dw, ci] + r[n, ob, oy, ox, co]), zero
//            padding outside the map, bias[ob·b + co] read as 0 past O and without a bias, r as 0
//            without residual; over ALL lanes, so the padding lanes of y are defined too
//            (act(r) where the packed weights are zero past O, as TO_NCHWC's zeros past C keep
//            the input's padding lanes out of every sum). The residual is ResNet's
//            relu(conv(x) + identity) in one instruction (oneDNN's "sum" post-op).
// Inputs     x: f32[N, ⌈C/b⌉, H, W, b], b = 8 or 16; w: the packed dense weights
//            f32[⌈O/b⌉, ⌈C/b⌉, kh, kw, b, b] (nchwc.h); bias: f32[O], optional; with residual=1
//            the LAST input r: f32[N, ⌈O/b⌉, Ho, Wo, b], shaped exactly as y. So the inputs are
//            (x, w), (x, w, bias), and with residual=1 (x, w, r) or (x, w, bias, r).
// Outputs    y: f32[N, ⌈O/b⌉, Ho, Wo, b], Ho = ⌊(H + 2ph − dh·(kh − 1) − 1) / sh⌋ + 1, Wo likewise.
// Immediates stride, pad, dilation: [h, w] pairs, as CONV2D's; groups must be 1 (depthwise
//            convolutions are DWCONV2D_NCHWC); act, act_alpha: a fused activation as LINEAR's;
//            residual: whether the last input r is added before the activation.
// Gradient   none: the layout pass (engine/passes/nchwc_layout.cpp) rewrites inference programs
//            only and leaves training programs in NCHW, whose CONV2D has its gradients.
// Kernels    reference: plain loops over the output and, per output pixel, its taps in the map.
//            JIT, b = 16 at AVX-512 and b = 8 at AVX2 and above (b = 16 under an AVX2 cap runs the
//            reference): the direct kernel of ops/conv/conv_nchwc.h, OB output blocks × R pixels
//            of accumulators over the input blocks, lanes and taps, each input lane broadcast (on
//            AVX-512 as the FMA's {1to16} operand), the input read in place (a tap in the padding
//            is left out of that pixel's code), bias, residual (one load and add per output
//            vector, at the store's offsets) and activation before the store,
//            `f32_conv2d_nchwc_bias_sum_relu__avx512_1x28`. The parts split the images, else the
//            output blocks, else the output pixels, whichever gives the parts equal work; each
//            part reads the elements of r at the outputs it writes.
// Notes      The sum runs over every input lane, padding lanes included: their weights are zero
//            (nchwc.h), and a finite padding lane adds nothing. A NaN or inf in a padding lane
//            of x would spread; TO_NCHWC and the blocked ops never write one there. The op is
//            LINALG, never in place, so r and y never share bytes.
#include <algorithm>

#include <fmt/format.h>

#include "ops/conv/conv_geom.h"
#include "ops/conv/conv_nchwc.h"
#include "ops/elementwise/activation.h"
#include "ops/layout/nchwc.h"
#include "ops/op.h"

namespace nnasm {
namespace {

constexpr int64_t PART_FLOPS = int64_t(1) << 20;  // per part, below which a split does not pay

// The geometry in channels: c = ⌈C/b⌉·b, o = ⌈O/b⌉·b.
ConvGeom geom(const Instruction& ins, const Shape& x, const Shape& w) {
  const int64_t b = x[4];
  return conv_geom_of(ins, x[0], x[1] * b, x[2], x[3], w[0] * b, w[2], w[3]);
}

bool has_residual(const Instruction& ins) { return ins.i(NNASM_IMM(CONV2D_NCHWC, residual)) != 0; }
// Whether n_in inputs hold a bias (it is the third input then).
bool has_bias(const Instruction& ins, size_t n_in) { return n_in == (has_residual(ins) ? 4u : 3u); }

Status conv2d_nchwc_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  const char* op = ins.info().mnemonic;
  const bool residual = has_residual(ins);
  if (!residual && in.size() != 2 && in.size() != 3)
    return Status::errorf("{} takes 2 or 3 inputs (x, w, optional bias), got {}", op, in.size());
  if (residual && in.size() != 3 && in.size() != 4)
    return Status::errorf("{} with residual=1 takes 3 or 4 inputs (x, w, optional bias, residual), got {}", op, in.size());
  NNASM_TRY(require_f32(ins, in));
  const Shape &x = in[0].shape, &w = in[1].shape;
  if (x.rank != 5 || !nchwc_block_valid(x[4]))
    return Status::errorf("{}: input {} must be blocked NCHWc [N, C/b, H, W, b] with b = 8 or 16", op, operand_str(ins, 0, in[0]));
  const int64_t b = x[4];
  if (w.rank != 6 || w[4] != b || w[5] != b)
    return Status::errorf("{}: weight {} must be packed [O/b, C/b, kh, kw, b, b] with input {}'s b = {}", op,
                          operand_str(ins, 1, in[1]), operand_str(ins, 0, in[0]), b);
  if (w[1] != x[1])
    return Status::errorf("{}: weight {} takes {} input blocks, but input {} has {}", op, operand_str(ins, 1, in[1]), w[1],
                          operand_str(ins, 0, in[0]), x[1]);
  NNASM_TRY(conv_imms_check(ins));
  if (ins.i(CONV_GROUPS) != 1)
    return Status::errorf("{}: groups must be 1 (a depthwise convolution is DWCONV2D_NCHWC), got {}", op, ins.i(CONV_GROUPS));
  const ConvGeom g = geom(ins, x, w);
  NNASM_TRY(conv_fits(ins, g, in[0], 0));
  if (has_bias(ins, in.size()) && (in[2].shape.rank != 1 || nchwc_blocks(in[2].shape[0], b) != w[0] || in[2].shape[0] < 1))
    return Status::errorf("{}: bias {} must be f32[O] for the weight's {} output blocks of {}", op, operand_str(ins, 2, in[2]),
                          w[0], b);
  const Shape ys{g.n, w[0], g.ho, g.wo, b};
  if (residual && in.back().shape != ys)
    return Status::errorf("{}: residual {} must be shaped as the output f32{}", op,
                          operand_str(ins, static_cast<int>(in.size()) - 1, in.back()), ys.str());
  (*out)[0] = TensorType{DType::F32, ys};
  return Status::ok();
}

void conv2d_nchwc_ref(const KernelArgs* a) {
  const Shape &xs = a->in_type[0].shape, &ws = a->in_type[1].shape;
  const ConvGeom g = geom(*a->ins, xs, ws);
  const float* x = static_cast<const float*>(a->in[0]);
  const float* w = static_cast<const float*>(a->in[1]);
  const float* bias = has_bias(*a->ins, static_cast<size_t>(a->n_in)) ? static_cast<const float*>(a->in[2]) : nullptr;
  const float* res = has_residual(*a->ins) ? static_cast<const float*>(a->in[a->n_in - 1]) : nullptr;
  const int64_t o_len = bias ? a->in_type[2].shape[0] : 0;
  float* y = static_cast<float*>(a->out[0]);
  const int64_t b = xs[4], cbs = xs[1], obs = ws[0];
  const auto f = fused_act(*a->ins);
  const float alpha = static_cast<float>(fused_act_alpha(*a->ins));
  float acc[16];
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t ob = 0; ob < obs; ++ob)
      for (int64_t oy = 0; oy < g.ho; ++oy)
        for (int64_t ox = 0; ox < g.wo; ++ox) {
          for (int64_t co = 0; co < b; ++co) acc[co] = ob * b + co < o_len ? bias[ob * b + co] : 0.f;
          for (int64_t cb = 0; cb < cbs; ++cb)
            for (int64_t i = 0; i < g.kh; ++i) {
              const int64_t iy = oy * g.sh - g.ph + i * g.dh;
              if (iy < 0 || iy >= g.h) continue;
              for (int64_t j = 0; j < g.kw; ++j) {
                const int64_t ix = ox * g.sw - g.pw + j * g.dw;
                if (ix < 0 || ix >= g.w) continue;
                const float* xp = x + (((n * cbs + cb) * g.h + iy) * g.w + ix) * b;
                const float* wp = w + (((ob * cbs + cb) * g.kh + i) * g.kw + j) * b * b;
                for (int64_t ci = 0; ci < b; ++ci)
                  for (int64_t co = 0; co < b; ++co) acc[co] += wp[ci * b + co] * xp[ci];
              }
            }
          const int64_t yo = (((n * obs + ob) * g.ho + oy) * g.wo + ox) * b;
          if (res)
            for (int64_t co = 0; co < b; ++co) acc[co] += res[yo + co];
          for (int64_t co = 0; co < b; ++co) y[yo + co] = act::apply(f, acc[co], alpha);
        }
}

// How the parts divide the work: along the images, the output blocks or the output pixels.
enum class SplitAxis { IMAGES, BLOCKS, PIXELS };

// The axis that gives `parts` parts the most equal work (the images, then the blocks on a tie),
// and its unit count.
SplitAxis split_axis(const NchwcConv& d, int parts, int64_t* units) {
  const std::pair<SplitAxis, int64_t> axes[] = {
      {SplitAxis::IMAGES, d.n1 - d.n0}, {SplitAxis::BLOCKS, d.ob1 - d.ob0}, {SplitAxis::PIXELS, d.p1 - d.p0}};
  SplitAxis best = SplitAxis::IMAGES;
  double best_share = 0;
  for (const auto& [axis, n] : axes) {
    if (n < parts) continue;
    const double share = static_cast<double>(n) / parts / static_cast<double>((n + parts - 1) / parts);  // ≤ 1
    if (share > best_share + 1e-9) best_share = share, best = axis, *units = n;
  }
  return best;
}

int64_t most_units(const NchwcConv& d) { return std::max({d.n1 - d.n0, d.ob1 - d.ob0, d.p1 - d.p0}); }

NchwcConv whole_kernel(const JitRequest& r) {
  const ConvGeom g = geom(r.ins, r.in[0].shape, r.in[1].shape);
  NchwcConv d = nchwc_conv_geometry(g, static_cast<int>(r.in[0].shape[4]));
  if (has_bias(r.ins, r.ins.in.size())) d.bias_channels = r.in[2].shape[0];
  d.residual = has_residual(r.ins);
  d.act = fused_act(r.ins);
  d.act_alpha = static_cast<float>(fused_act_alpha(r.ins));
  return d;
}

int conv2d_nchwc_parts(const JitRequest& r, int threads) {
  const NchwcConv d = whole_kernel(r);
  const int64_t flops = 2 * (d.n1 - d.n0) * d.y_blocks * d.lanes * (d.p1 - d.p0) * d.cb * d.lanes * d.kh * d.kw;
  return static_cast<int>(std::clamp<int64_t>(std::min(flops / PART_FLOPS, most_units(d)), 1, threads));
}

Result<std::shared_ptr<const JitKernel>> conv2d_nchwc_jit(const JitRequest& r, KernelCache& cache) {
  NchwcConv d = whole_kernel(r);
  if (r.n_parts > 1) {
    int64_t units = 0;
    const SplitAxis axis = split_axis(d, r.n_parts, &units);
    const int64_t a = units * r.part / r.n_parts, e = units * (r.part + 1) / r.n_parts;
    switch (axis) {
      case SplitAxis::IMAGES: d.n0 = a, d.n1 = e; break;
      case SplitAxis::BLOCKS: d.ob0 = a, d.ob1 = e; break;
      case SplitAxis::PIXELS: d.p0 = a, d.p1 = e; break;
    }
  }
  return nchwc_conv_kernel(d, r.isa, cache);
}

}  // namespace

OpHooks op_hooks_CONV2D_NCHWC() {
  return {conv2d_nchwc_shape, conv2d_nchwc_ref, nullptr, nullptr, conv2d_nchwc_jit, conv2d_nchwc_parts};
}

}  // namespace nnasm

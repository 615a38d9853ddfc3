// CONV_WEIGHTS_BF16 and CONV2D_BF16: a convolution whose weight is stored in bf16, made of
// LINEAR_BF16's generated kernel (ops/quant/linear_bf16.h) over im2col rows rather than a GEMM of
// its own.
//
// CONV_WEIGHTS_BF16
// Computes   wt[c, i, j, o] = w[o, c, i, j]: the weight transposed so that, read as [C·kh·kw, O],
//            it is the [in, out] matrix LINEAR_BF16's kernel streams (and the shape still carries
//            kh and kw for CONV2D_BF16's shape inference).
// Inputs     w: bf16[O, C, kh, kw] (PyTorch's layout).
// Outputs    wt: bf16[C, kh, kw, O].
// Gradient   none (a layout op of inference weights).
// Kernels    reference only: its input is a param or constant, so the derive pass hoists it and it
//            runs once, not per run.
//
// CONV2D_BF16
// Computes   y[n, o, oy, ox] = act(b[o] + Σ_{c, i, j} bf16(x[n, c, oy·sh − ph + i·dh,
//            ox·sw − pw + j·dw]) · wt[c, i, j, o]), zero padding: each x value rounded to the
//            nearest bf16 (ties to even), the products of bf16 values (exact in f32) summed in
//            f32 in an unspecified order, then the bias and the fused activation.
// Inputs     x: f32[N, C, H, W]; wt: bf16[C, kh, kw, O] from CONV_WEIGHTS_BF16; b: f32[O],
//            optional (two inputs: no bias).
// Outputs    y: f32[N, O, Ho, Wo], Ho and Wo as CONV2D's.
// Immediates stride, pad, dilation, groups (1 only: grouped and depthwise convolutions stay f32),
//            act, act_alpha: as CONV2D's.
// Gradient   none: bf16 weights are inference storage (training stays f32, CONV2D); autodiff
//            refuses a program that needs one through this op, by name.
// Kernels    reference: a direct loop over c, i, j in order per output, x rounded as it is read.
//            JIT (AVX2 and AVX-512, with vdpbf16ps where the CPU has AVX512_BF16): a bound kernel
//            (jit/kernel.h) whose driver takes each image's output pixels in tiles of T rows:
//            im2col of the tile into the scratch as rows [T, C·kh·kw] (one output pixel's patch
//            a row, the layout LINEAR_BF16's x has), then LINEAR_BF16's kernel for [T, K]·[K, O]
//            with the bias (zeros without one) and the activation fused into its epilogue,
//            writing [T, O], then that transposed into y's [O, Ho·Wo] columns of the tile (16
//            channels at a time). T keeps the tile's rows near 128 KB, in L2 (a multiple of 8
//            rows: the dpbf16 kernel's row block; 4 tiles an image or more where it has 32 rows,
//            for the parts). im2col finds the taps inside the image once a pixel and copies
//            channel by channel, fixed-size copies for kernel widths 1, 3, 5 and 7 at dilation 1
//            (where the map's interior is most of the work). Where the time goes, against f32
//            CONV2D: docs/benchmarks.md "Reduced precision".
//            Parallel parts: ranges of (image, tile) units, each tile computed as on one thread
//            (the same bits at any thread count). Names `bf16_conv2d__avx512_dpbf16_8x32`.
// Notes      NaN and ±inf propagate as in f32 arithmetic; denormals as LINEAR_BF16's.
#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "isa/activation.h"
#include "isa/bf16.h"
#include "jit/abi.h"
#include "ops/conv/conv_geom.h"
#include "ops/elementwise/activation.h"
#include "ops/op.h"
#include "ops/quant/linear_bf16.h"

namespace nnasm {
namespace {

// ---- CONV_WEIGHTS_BF16 ----

Status conv_weights_bf16_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  if (in[0].dtype != DType::BF16)
    return Status::errorf("CONV_WEIGHTS_BF16: the weight, {}, must be bf16 (QUANTIZE or a bf16 param gives one)",
                          operand_str(ins, 0, in[0]));
  const Shape& w = in[0].shape;
  if (w.rank != 4)
    return Status::errorf("CONV_WEIGHTS_BF16: the weight, {}, must be [out, in, kh, kw] (rank 4)", operand_str(ins, 0, in[0]));
  (*out)[0] = TensorType{DType::BF16, Shape{w[1], w[2], w[3], w[0]}};
  return Status::ok();
}

void conv_weights_bf16_ref(const KernelArgs* a) {
  const Shape& s = a->in_type[0].shape;
  const int64_t o = s[0], k = s[1] * s[2] * s[3];
  const uint16_t* w = static_cast<const uint16_t*>(a->in[0]);
  uint16_t* wt = static_cast<uint16_t*>(a->out[0]);
  for (int64_t r = 0; r < o; ++r)
    for (int64_t c = 0; c < k; ++c) wt[c * o + r] = w[r * k + c];
}

// ---- CONV2D_BF16 ----

// The geometry of x and wt [C, kh, kw, O] (shapes already checked).
ConvGeom geom(const Instruction& ins, const TensorType* in) {
  const Shape &x = in[0].shape, &w = in[1].shape;
  return conv_geom_of(ins, x[0], x[1], x[2], x[3], w[3], w[1], w[2]);
}

Status conv2d_bf16_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  if (in.size() != 2 && in.size() != 3)
    return Status::errorf("CONV2D_BF16 takes 2 or 3 inputs (x, wt, optional bias), got {}", in.size());
  if (in[0].dtype != DType::F32)
    return Status::errorf("CONV2D_BF16: x, {}, must be f32 (it is rounded to bf16 in the kernel)", operand_str(ins, 0, in[0]));
  if (in[0].shape.rank != 4) return Status::errorf("CONV2D_BF16: x, {}, must be NCHW (rank 4)", operand_str(ins, 0, in[0]));
  if (in[1].dtype != DType::BF16)
    return Status::errorf("CONV2D_BF16: the weight, {}, must be bf16 from CONV_WEIGHTS_BF16 (an f32 weight takes CONV2D)",
                          operand_str(ins, 1, in[1]));
  if (in[1].shape.rank != 4)
    return Status::errorf("CONV2D_BF16: the weight, {}, must be [in, kh, kw, out] (rank 4), as CONV_WEIGHTS_BF16 gives it",
                          operand_str(ins, 1, in[1]));
  NNASM_TRY(conv_imms_check(ins));
  if (ins.i(CONV_GROUPS) != 1)
    return Status::errorf("CONV2D_BF16: groups must be 1, got {} (grouped and depthwise convolutions stay f32: CONV2D)",
                          ins.i(CONV_GROUPS));
  if (in[1].shape[0] != in[0].shape[1])
    return Status::errorf("CONV2D_BF16: the weight, {}, takes {} input channels, but x, {}, has {}", operand_str(ins, 1, in[1]),
                          in[1].shape[0], operand_str(ins, 0, in[0]), in[0].shape[1]);
  const ConvGeom g = geom(ins, in.data());
  NNASM_TRY(conv_fits(ins, g, in[0], 0));
  if (in.size() == 3 && (in[2].dtype != DType::F32 || in[2].shape.rank != 1 || in[2].shape[0] != g.o))
    return Status::errorf("CONV2D_BF16: the bias, {}, must be f32[{}], one per output channel", operand_str(ins, 2, in[2]), g.o);
  (*out)[0] = TensorType{DType::F32, Shape{g.n, g.o, g.ho, g.wo}};
  return Status::ok();
}

void conv2d_bf16_ref(const KernelArgs* a) {
  const ConvGeom g = geom(*a->ins, a->in_type);
  const float* x = static_cast<const float*>(a->in[0]);
  const uint16_t* w = static_cast<const uint16_t*>(a->in[1]);
  const float* b = a->n_in == 3 ? static_cast<const float*>(a->in[2]) : nullptr;
  float* y = static_cast<float*>(a->out[0]);
  const Activation f = fused_act(*a->ins);
  const float alpha = static_cast<float>(fused_act_alpha(*a->ins));
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t o = 0; o < g.o; ++o)
      for (int64_t oy = 0; oy < g.ho; ++oy)
        for (int64_t ox = 0; ox < g.wo; ++ox) {
          float z = 0;
          for (int64_t c = 0; c < g.c; ++c)
            for (int64_t i = 0; i < g.kh; ++i) {
              const int64_t iy = oy * g.sh - g.ph + i * g.dh;
              if (iy < 0 || iy >= g.h) continue;
              for (int64_t j = 0; j < g.kw; ++j) {
                const int64_t ix = ox * g.sw - g.pw + j * g.dw;
                if (ix < 0 || ix >= g.w) continue;
                const float xv = bf16_to_f32(bf16_from_f32(x[((n * g.c + c) * g.h + iy) * g.w + ix]));
                z += xv * bf16_to_f32(w[((c * g.kh + i) * g.kw + j) * g.o + o]);
              }
            }
          y[((n * g.o + o) * g.ho + oy) * g.wo + ox] = act::apply(f, z + (b ? b[o] : 0.f), alpha);
        }
}

// ---- JIT: im2col rows, LINEAR_BF16's kernel, a transpose ----

constexpr int64_t TILE_BYTES = 128 * 1024;    // a tile's im2col rows
constexpr int64_t PART_FLOPS = int64_t(1) << 20;  // per part, below which a split does not pay (CONV2D's)

constexpr int64_t MIN_TILES = 4;  // an image's tiles where it has 8 rows for each: parts for one image

// Output pixels a tile: a multiple of 8 (the dpbf16 kernel's row block), at most the image's,
// and small enough that a small map (a 7×7 output: 49 rows) still makes MIN_TILES units for the
// parallel parts. The kernel streams W once per 8-row block whatever the tiles, and each output
// row's sums do not depend on the rows beside it, so the tiles change neither the cost nor a bit.
int64_t tile_rows(const ConvGeom& g) {
  const int64_t by_bytes = std::max<int64_t>(8, TILE_BYTES / (4 * g.k()) / 8 * 8);
  const int64_t by_count = std::max<int64_t>(8, ((g.p() + MIN_TILES - 1) / MIN_TILES + 7) / 8 * 8);
  return std::min({by_bytes, by_count, g.p()});
}
int64_t tiles_per_image(const ConvGeom& g) { return (g.p() + tile_rows(g) - 1) / tile_rows(g); }
int64_t round16(int64_t floats) { return (floats + 15) / 16 * 16; }

// The synthetic LINEAR_BF16 operand types of a tile of `rows`: x [rows, K], W [K, O], b [O].
void tile_types(const ConvGeom& g, int64_t rows, TensorType* t) {
  t[0] = TensorType{DType::F32, Shape{rows, g.k()}};
  t[1] = TensorType{DType::BF16, Shape{g.k(), g.o}};
  t[2] = TensorType{DType::F32, Shape{g.o}};
}

// The scratch: the tile's im2col rows, its [T, O] product, then LINEAR_BF16's kernel's own.
struct TileScratch {
  int64_t cols = 0, prod = 0;  // float offsets
  size_t bytes = 0;
};
TileScratch tile_scratch(const Instruction& ins, const ConvGeom& g) {
  const int64_t t = tile_rows(g);
  TileScratch s;
  s.prod = round16(t * g.k());
  const int64_t lin = round16(s.prod + t * g.o);
  TensorType types[4];
  tile_types(g, t, types);
  types[3] = TensorType{DType::F32, Shape{t, g.o}};
  s.cols = 0;
  s.bytes = static_cast<size_t>(lin) * sizeof(float) + op_hooks(Opcode::LINEAR_BF16).scratch(ins, types, types + 3);
  return s;
}

size_t conv2d_bf16_scratch(const Instruction& ins, const TensorType* in, const TensorType*) {
  const ConvGeom g = geom(ins, in);
  if (g.n * g.p() * g.k() * g.o == 0) return 0;
  return tile_scratch(ins, g).bytes;
}

// One channel's taps of a pixel: rows [i0, i1) of the kernel, taps [j0, j1) of each, from src
// (tap (i0, j0)) into dst (the patch row at tap (i0, 0)). KW > 0: the kernel's width, a
// compile-time constant, with every tap of a row inside the image at dilation 1 (the interior of
// the map: a fixed-size copy the compiler inlines, where a memcpy call costs more than its
// 3 floats); 0: any.
template <int KW>
inline void copy_taps(const ConvGeom& g, const float* src, float* dst, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  for (int64_t i = i0; i < i1; ++i, src += g.dh * g.w, dst += g.kw) {
    if constexpr (KW > 0) {
      for (int j = 0; j < KW; ++j) dst[j] = src[j];
    } else {
      for (int64_t j = j0; j < j1; ++j) dst[j] = src[(j - j0) * g.dw];
    }
  }
}

// Rows p0 … p0 + rows − 1 of image x's patch matrix: row t is output pixel p0 + t's patch, in
// wt's (c, i, j) order, zeros where it reads the padding. Each row is written in order; the taps
// inside the image ([i0, i1) × [j0, j1), the same for every channel) are found once a pixel, so
// that the channel loop only copies.
template <int KW>
void im2col_rows_kw(const ConvGeom& g, const float* x, int64_t p0, int64_t rows, float* cols) {
  const int64_t k = g.k(), hw = g.h * g.w, taps = g.kh * g.kw;
  auto first_inside = [](int64_t at, int64_t d, int64_t n) {  // the first tap with at + j·d ≥ 0
    return at >= 0 ? 0 : std::min(n, (-at + d - 1) / d);
  };
  auto end_inside = [](int64_t at, int64_t d, int64_t n, int64_t size) {  // past the last with at + j·d < size
    return at >= size ? 0 : std::min(n, (size - at + d - 1) / d);
  };
  for (int64_t t = 0; t < rows; ++t) {
    const int64_t p = p0 + t, oy = p / g.wo, ox = p % g.wo;
    const int64_t y0 = oy * g.sh - g.ph, x0 = ox * g.sw - g.pw;
    const int64_t i0 = first_inside(y0, g.dh, g.kh), i1 = std::max(i0, end_inside(y0, g.dh, g.kh, g.h));
    const int64_t j0 = first_inside(x0, g.dw, g.kw), j1 = std::max(j0, end_inside(x0, g.dw, g.kw, g.w));
    float* row = cols + t * k;
    const bool whole_rows = j0 == 0 && j1 == g.kw;
    if (i1 - i0 < g.kh || !whole_rows) std::fill(row, row + k, 0.f);
    if (i1 == i0 || j1 == j0) continue;
    const float* src = x + (y0 + i0 * g.dh) * g.w + x0 + j0 * g.dw;  // channel 0's tap (i0, j0)
    float* dst = row + i0 * g.kw;
    if (KW > 0 && whole_rows)
      for (int64_t c = 0; c < g.c; ++c) copy_taps<KW>(g, src + c * hw, dst + c * taps, i0, i1, j0, j1);
    else
      for (int64_t c = 0; c < g.c; ++c) copy_taps<0>(g, src + c * hw, dst + c * taps, i0, i1, j0, j1);
  }
}

// The kernel widths a ResNet or MobileNet uses, at dilation 1, get the fixed-size copy.
void im2col_rows(const ConvGeom& g, const float* x, int64_t p0, int64_t rows, float* cols) {
  const int kw = g.dw == 1 ? static_cast<int>(g.kw) : 0;
  switch (kw) {
    case 1: return im2col_rows_kw<1>(g, x, p0, rows, cols);
    case 3: return im2col_rows_kw<3>(g, x, p0, rows, cols);
    case 5: return im2col_rows_kw<5>(g, x, p0, rows, cols);
    case 7: return im2col_rows_kw<7>(g, x, p0, rows, cols);
    default: return im2col_rows_kw<0>(g, x, p0, rows, cols);
  }
}

struct ConvBf16Kernel {
  ConvGeom g;
  int64_t tile = 0, tiles = 0;  // rows a tile, tiles an image
  int64_t u0 = 0, u1 = 0;       // the part's (image, tile) units, image-major
  TileScratch s;
  KernelFn full = nullptr, last = nullptr;  // LINEAR_BF16's kernel for a whole tile and the image's last
  std::vector<float> zero_bias;             // O zeros where there is no bias
  std::vector<std::shared_ptr<const JitKernel>> keep;
};

// The tile's product [rows, O] into y's columns yn[o·Ho·Wo + t]: 16 channels at a time, so that
// each row of the product is read a cache line at a time (channel by channel, a 512-channel
// product read with a 2 KB stride took a third of a 1×1 layer's time) while 16 rows of y are
// written in order.
void transpose_out(const ConvGeom& g, const float* prod, int64_t rows, float* yn) {
  constexpr int64_t B = 16;
  const int64_t p = g.p();
  for (int64_t o0 = 0; o0 < g.o; o0 += B) {
    const int64_t o1 = std::min(g.o, o0 + B);
    for (int64_t t = 0; t < rows; ++t)
      for (int64_t o = o0; o < o1; ++o) yn[o * p + t] = prod[t * g.o + o];
  }
}

void conv2d_bf16_forward(const KernelArgs* a, const void* data) {
  const ConvBf16Kernel& k = *static_cast<const ConvBf16Kernel*>(data);
  const ConvGeom& g = k.g;
  const float* x = static_cast<const float*>(a->in[0]);
  const void* w = a->in[1];
  const float* b = a->n_in == 3 ? static_cast<const float*>(a->in[2]) : k.zero_bias.data();
  float* y = static_cast<float*>(a->out[0]);
  float* scratch = static_cast<float*>(a->scratch);
  float* cols = scratch + k.s.cols;
  float* prod = scratch + k.s.prod;
  void* lin = scratch + round16(k.s.prod + k.tile * g.o);
  const int64_t image = g.c * g.h * g.w, p = g.p();
  for (int64_t u = k.u0; u < k.u1; ++u) {
    const int64_t n = u / k.tiles, p0 = u % k.tiles * k.tile, rows = std::min(k.tile, p - p0);
    im2col_rows(g, x + n * image, p0, rows, cols);
    call_kernel(rows == k.tile ? k.full : k.last, {cols, w, b}, prod, lin);
    transpose_out(g, prod, rows, y + n * g.o * p + p0);
  }
}

int64_t units_of(const ConvGeom& g) { return g.n * tiles_per_image(g); }

int conv2d_bf16_parts(const JitRequest& r, int threads) {
  const ConvGeom g = geom(r.ins, r.in);
  if (threads <= 1 || g.n * g.p() * g.k() * g.o == 0) return 1;
  const int64_t flops = 2 * g.n * g.o * g.p() * g.k();
  return static_cast<int>(std::clamp<int64_t>(std::min<int64_t>(flops / PART_FLOPS, units_of(g)), 1, threads));
}

Result<std::shared_ptr<const JitKernel>> conv2d_bf16_jit(const JitRequest& r, KernelCache& cache) {
  const ConvGeom g = geom(r.ins, r.in);
  if (g.n * g.p() * g.k() * g.o == 0 || r.split_reduction) return std::shared_ptr<const JitKernel>();
  const bool dpbf16 = r.isa == Isa::AVX512 && cpu_info().avx512_bf16;
  auto k = std::make_shared<ConvBf16Kernel>();
  k->g = g;
  k->tile = tile_rows(g);
  k->tiles = tiles_per_image(g);
  k->u0 = units_of(g) * r.part / r.n_parts;
  k->u1 = units_of(g) * (r.part + 1) / r.n_parts;
  k->s = tile_scratch(r.ins, g);
  if (r.ins.in.size() == 2) k->zero_bias.assign(static_cast<size_t>(g.o), 0.f);
  const int64_t rest = g.p() % k->tile;
  TensorType t[3];
  tile_types(g, k->tile, t);
  Result<std::shared_ptr<const JitKernel>> full = linear_bf16_kernel(r.ins, t, r.isa, dpbf16, cache);
  if (!full || !full.value()) return full;
  k->full = full.value()->fn();
  k->keep.push_back(full.value());
  if (rest) {
    tile_types(g, rest, t);
    Result<std::shared_ptr<const JitKernel>> last = linear_bf16_kernel(r.ins, t, r.isa, dpbf16, cache);
    if (!last || !last.value()) return last;
    k->last = last.value()->fn();
    k->keep.push_back(last.value());
  }
  // "bf16_linear…" -> "bf16_conv2d…"
  const std::string name = "bf16_conv2d" + full.value()->name().substr(11);
  const std::string key = fmt::format("conv_bf16:{}:{}x{}x{}x{}:{}x{}x{}:s{}x{}:p{}x{}:d{}x{}:bias{}:act{}:{}:part{}/{}",
                                      isa_name(r.isa), g.n, g.c, g.h, g.w, g.o, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.dh,
                                      g.dw, r.ins.in.size() == 3, static_cast<int>(fused_act(r.ins)),
                                      fused_act_alpha(r.ins), r.part, r.n_parts);
  return cache.get(key, [&] { return build_bound_kernel(name, conv2d_bf16_forward, std::shared_ptr<const void>(k)); });
}

}  // namespace

// No gradient hooks: autodiff refuses a path through either op, by name.
OpHooks op_hooks_CONV_WEIGHTS_BF16() { return {conv_weights_bf16_shape, conv_weights_bf16_ref, nullptr, nullptr, nullptr, nullptr}; }

OpHooks op_hooks_CONV2D_BF16() {
  return {conv2d_bf16_shape, conv2d_bf16_ref, conv2d_bf16_scratch, nullptr, conv2d_bf16_jit, conv2d_bf16_parts};
}

}  // namespace nnasm

// The CONV2D family's bound kernels: descriptors, the drivers, and the cache keys.
#include "ops/conv/conv_jit.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>

#include <fmt/format.h>

#include "jit/act_snippet.h"
#include "jit/elementwise.h"
#include "jit/gemm.h"
#include "ops/conv/conv_depthwise.h"
#include "ops/conv/conv_direct.h"
#include "ops/conv/conv_winograd.h"

namespace nnasm {
namespace {

constexpr int64_t PART_FLOPS = int64_t(1) << 20;  // per part, below which a split does not pay
constexpr int64_t STRIDED_DIRECT_CHANNELS = 4;     // input channels a strided direct kernel takes (direct_forward)
constexpr int64_t FLAT_POINTWISE_VECTORS = 4;      // the direct kernel's widest column block

// What a driver needs: the geometry, its images [n0, n1), and the kernels it calls.
struct ConvKernel {
  ConvGeom g;
  int64_t n0 = 0, n1 = 0;
  int64_t o0 = 0;  // the part's first output channel (a channel split: o0 … o0 + dc.og, or the
                   // GEMM's rows)
  bool bias = false;
  KernelFn gemm = nullptr;
  KernelFn gemm_rest = nullptr;    // Winograd: the product of a last, smaller group of images
  KernelFn weight_gemm = nullptr;  // Winograd: U = K·wᵀ; null when in[1] is U (CONV2D_WINOGRAD)
  KernelFn epilogue = nullptr;  // forward: bias and activation; null when neither
  KernelFn direct = nullptr;    // the direct or depthwise kernel (conv_direct.h, conv_depthwise.h) instead of im2col + GEMM
  DirectConv dc{};               // its geometry: forward as g; data gradient with g's roles swapped
  int64_t channels = 0;          // Winograd: the part's output channels (o0 on), its scratch and
  WinogradScratch ws{};          // transforms
  WinogradTransforms wt{};
  std::vector<std::shared_ptr<const JitKernel>> keep;
};

// The data gradient of a stride-1 convolution is a stride-1 convolution of dy with the weights
// flipped in space and their channel roles swapped, padded by (k − 1)·d − p: it takes the direct
// kernel when that padding is not negative.
bool direct_data_gradient(const ConvGeom& g) {
  return direct_conv_applies(g) && g.ph <= (g.kh - 1) * g.dh && g.pw <= (g.kw - 1) * g.dw;
}

// `lanes`: the forward kernel's vector width (16 on AVX-512); the weight gradient's is always 8.
DirectConv direct_geometry(const ConvGeom& g, ConvPass pass, int lanes = 8) {
  DirectConv d = pass != ConvPass::BACKWARD_DATA ? DirectConv{g.cg(), g.og(), g.ho, g.wo, g.kh, g.kw, g.dh, g.dw}
                                                 : DirectConv{g.og(), g.cg(), g.h, g.w, g.kh, g.kw, g.dh, g.dw};
  d.lanes = lanes;
  if (pass == ConvPass::FORWARD) d.sh = g.sh, d.sw = g.sw;
  return d;
}

// The data gradient of a stride-1 depthwise convolution is the depthwise convolution of dy with
// the weights flipped in space, padded by (k − 1)·d − p, which the depthwise kernel takes. A
// strided one's would read dy dilated by the stride (a transposed convolution): it keeps
// im2col + GEMM.
ConvGeom depthwise_data_geometry(const ConvGeom& g) {
  ConvGeom t = g;
  t.h = g.ho, t.w = g.wo, t.ho = g.h, t.wo = g.w;
  t.ph = (g.kh - 1) * g.dh - g.ph, t.pw = (g.kw - 1) * g.dw - g.pw;
  return t;
}

bool depthwise(const ConvGeom& g, ConvPass pass) {
  if (pass == ConvPass::FORWARD) return depthwise_applies(g);
  return pass == ConvPass::BACKWARD_DATA && g.sh == 1 && g.sw == 1 && depthwise_applies(g) &&
         depthwise_applies(depthwise_data_geometry(g));
}

int lanes_of(Isa isa) { return isa == Isa::AVX512 ? 16 : 8; }

// Whether the forward pass takes the direct kernel's flat mode (conv_direct.h) at `lanes`: on a
// map whose rows fit one vector (wo ≤ lanes: the 7×7 and 14×14 maps of a classifier's last
// stages). There row mode fills wo of each row's lanes and streams the block's weights past them
// once per row, and im2col + GEMM unrolls the input and computes whole tiles of columns; the flat
// row fills every lane but the junk columns', streams the weights once per column block and
// copies nothing but the padded input. It takes such a map when it runs at most one vector more
// than row mode's ho (a 5×5 kernel's junk on a 14-wide map is too much). A 1×1 unpadded
// convolution has no im2col to save, and the GEMM keeps pace with a flat row of several column
// blocks (each streams the whole input again): flat only within one column block.
bool flat_forward(const ConvGeom& g, int lanes) {
  if (g.wo > lanes || !direct_flat_applies(g, lanes)) return false;
  const int64_t vectors = (g.ho * (g.wo + (g.kw - 1) * g.dw) + lanes - 1) / lanes;
  return g.pointwise() ? vectors <= FLAT_POINTWISE_VECTORS : vectors <= g.ho + 1;
}

// Whether the forward pass takes the direct kernel at `lanes` floats a vector, rather than
// im2col + GEMM: flat where flat_forward says, else in row mode, which holds ob output channels ×
// nv vectors of one output row in registers and, for each row, streams the block's weights (ob·k
// floats, k = cg·kh·kw) past them once. A row of one vector gives each broadcast weight a single
// FMA, partly masked; and once k is past 256 a block of up to 30 channels' weights outgrows L1,
// so they come from L2 or beyond again for every row. There the GEMM wins, unless flat mode takes
// the map. With few input channels the weights stay in L1 and row mode still wins, as it does on
// rows of two vectors or more. Otherwise a 1×1 stride-1 unpadded convolution is a plain GEMM (x
// is already its B). Strided, the direct kernel (row mode) pays on few input channels only (a
// CNN's stem: im2col's column matrix, 7 MB for ResNet's, stays in no cache); on many, the padded
// copy of every channel's phases cost more than im2col + GEMM (ResNet's 1×1 and 3×3 stride-2
// convolutions measured slower direct).
bool direct_forward(const ConvGeom& g, int lanes) {
  if (g.sh != 1 || g.sw != 1) return direct_conv_applies(g, true) && g.cg() <= STRIDED_DIRECT_CHANNELS;
  return flat_forward(g, lanes) || (direct_conv_applies(g) && !g.pointwise() && (g.wo > lanes || g.k() <= 256));
}

// The forward direct kernel's geometry at `lanes` (flat where flat_forward says), and whether
// it reads x in place (flat without junk, unpadded: the planes are x's).
DirectConv forward_direct_geometry(const ConvGeom& g, int lanes) {
  DirectConv d = direct_geometry(g, ConvPass::FORWARD, lanes);
  d.flat = flat_forward(g, lanes);
  return d;
}

bool reads_in_place(const ConvGeom& g, const DirectConv& d) { return d.flat && !d.flat_junk() && g.ph == 0 && g.pw == 0; }

// Its scratch: the padded input (unless it reads x in place), then the flat buffer.
int64_t padded_input_floats(const ConvGeom& g, const DirectConv& d) {
  return reads_in_place(g, d) ? 0 : (d.padded_floats() + 15) / 16 * 16;
}

size_t forward_direct_scratch(const ConvGeom& g, int lanes) {
  if (!direct_forward(g, lanes)) return 0;
  const DirectConv d = forward_direct_geometry(g, lanes);
  return static_cast<size_t>(padded_input_floats(g, d) + d.flat_buffer_floats()) * sizeof(float);
}

// A single image's forward pass splits its output channels into the parts instead of its
// images: on the direct or depthwise kernel, or, ungrouped, as rows of the GEMM's tiled product,
// each part running the whole im2col (each output element is summed in the same order either
// way: jit_gemm's row slices sum as the whole product).
bool split_channels(const ConvGeom& g, ConvPass pass) {
  return pass == ConvPass::FORWARD && g.n == 1 && (g.groups == 1 || depthwise(g, pass));
}

void forward_direct(const KernelArgs* a, const void* data) {
  const ConvKernel& k = *static_cast<const ConvKernel*>(data);
  const ConvGeom& g = k.g;
  const float* x = static_cast<const float*>(a->in[0]);
  const float* w = static_cast<const float*>(a->in[1]);
  const float* b = k.bias ? static_cast<const float*>(a->in[2]) : nullptr;
  float* y = static_cast<float*>(a->out[0]);
  float* xp = static_cast<float*>(a->scratch);
  float* flat = xp + padded_input_floats(g, k.dc);
  const bool in_place = reads_in_place(g, k.dc);
  const int64_t image = g.c * g.h * g.w, out_image = g.o * g.p();
  for (int64_t n = k.n0; n < k.n1; ++n)
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const float* xg = x + n * image + grp * g.cg() * g.h * g.w;
      if (!in_place) direct_conv_pad(k.dc, xg, g.h, g.w, g.ph, g.pw, xp);
      const int64_t o = grp * g.og() + k.o0;
      call_kernel(k.direct, {in_place ? xg : xp, w + o * g.k(), b ? b + o : nullptr, flat}, y + n * out_image + o * g.p());
    }
}

// Channels [o0, o0 + the kernel's count) of images [n0, n1), straight from x into y.
void forward_depthwise(const KernelArgs* a, const void* data) {
  const ConvKernel& k = *static_cast<const ConvKernel*>(data);
  const ConvGeom& g = k.g;
  const float* x = static_cast<const float*>(a->in[0]) + k.o0 * g.h * g.w;
  const float* w = static_cast<const float*>(a->in[1]) + k.o0 * g.kh * g.kw;
  const float* b = k.bias ? static_cast<const float*>(a->in[2]) + k.o0 : nullptr;
  float* y = static_cast<float*>(a->out[0]) + k.o0 * g.p();
  for (int64_t n = k.n0; n < k.n1; ++n) call_kernel(k.direct, {x + n * g.c * g.h * g.w, w, b}, y + n * g.o * g.p());
}

// Channels [o0, o0 + channels) of images [n0, n1) by F(2×2, 3×3): the part's weights
// transformed once, then per product (winograd_products: a group of images, or a band of one
// image's tile rows) the input tiles, the 16 GEMMs and the output tiles; each image's epilogue
// once its last product is out.
void forward_winograd(const KernelArgs* a, const void* data) {
  const ConvKernel& k = *static_cast<const ConvKernel*>(data);
  const ConvGeom& g = k.g;
  const float* x = static_cast<const float*>(a->in[0]);
  const float* bias = k.bias ? static_cast<const float*>(a->in[2]) + k.o0 : nullptr;
  float* y = static_cast<float*>(a->out[0]);
  float* s = static_cast<float*>(a->scratch);
  const WinogradScratch& ws = k.ws;
  // U: the part's rows of each of the 16 planes, given or transformed here.
  const float* u = static_cast<const float*>(a->in[1]) + k.o0 * g.c;
  int64_t u_plane = g.o * g.c;
  if (k.weight_gemm) {
    call_kernel(k.weight_gemm, {winograd_weight_matrix(), static_cast<const float*>(a->in[1]) + k.o0 * g.c * 9}, s + ws.u,
                s + ws.gemm);
    u = s + ws.u, u_plane = ws.u_plane;
  }
  const WinogradTiles t = winograd_tiles(g);
  const WinogradProducts pr = winograd_products(g);
  const int64_t image = g.c * g.h * g.w, out_image = g.o * g.p();
  // A product: tile rows [ty0, ty1) of `images` images side by side (several whole images, or one
  // image's band of rows: winograd_products), a dense row of `columns` tiles in V and M.
  for (int64_t n0 = k.n0; n0 < k.n1; n0 += pr.images) {
    const int64_t images = std::min(pr.images, k.n1 - n0);
    for (int64_t ty0 = 0; ty0 < t.th; ty0 += pr.rows) {
      const int64_t ty1 = std::min(t.th, ty0 + pr.rows), band = (ty1 - ty0) * t.tw, columns = images * band;
      for (int64_t i = 0; i < images; ++i) {
        if (images > 1 || ty0 == 0) k.wt.pad(g, x + (n0 + i) * image, s + ws.xp);  // one image's copy at a time
        k.wt.input(g, s + ws.xp, ty0, ty1, s + ws.v + i * band, ws.v_plane, columns);
      }
      const KernelFn gemm = columns == pr.columns ? k.gemm : k.gemm_rest;
      for (int64_t e = 0; e < 16; ++e)
        call_kernel(gemm, {u + e * u_plane, s + ws.v + e * ws.v_plane}, s + ws.m + e * ws.m_plane, s + ws.gemm);
      for (int64_t i = 0; i < images; ++i)
        k.wt.output(g, s + ws.m + i * band, ws.m_plane, columns, ty0, ty1, k.o0, k.channels, y + (n0 + i) * out_image,
                    s + ws.tmp);
    }
    for (int64_t i = 0; i < images; ++i) {  // each image's bias and activation once its tiles are out
      float* yo = y + (n0 + i) * out_image + k.o0 * g.p();
      if (k.epilogue) call_kernel(k.epilogue, {yo, bias}, yo);
    }
  }
}

// One of the 16 products of F(2×2, 3×3) for `channels` output channels over `columns` tiles,
// M[ξ] = U[ξ]·V[ξ] (jit_gemm's operands are dense: V's and M's rows are the product's tiles);
// and the weights' transform for those channels, U = K·wᵀ (K: winograd_weight_matrix).
GemmJitDesc winograd_gemm(const ConvGeom& g, int64_t channels, int64_t columns) {
  GemmJitDesc d;
  d.op = "conv2d_winograd";
  d.m = channels, d.n = columns, d.k = g.c;
  return d;
}

GemmJitDesc winograd_weight_gemm(const ConvGeom& g, int64_t channels) {
  GemmJitDesc d;
  d.op = "conv2d_winograd_weights";
  d.m = 16, d.n = channels * g.c, d.k = 9, d.trans_b = true;
  return d;
}

size_t winograd_gemm_bytes(const ConvGeom& g, int64_t channels) {
  return std::max(jit_gemm_scratch_bytes(winograd_gemm(g, channels, winograd_products(g).columns)),
                  jit_gemm_scratch_bytes(winograd_weight_gemm(g, channels)));
}

// dx of images [n0, n1): dy convolved with the flipped weights (in the scratch).
void backward_data_depthwise(const KernelArgs* a, const void* data) {
  const ConvKernel& k = *static_cast<const ConvKernel*>(data);
  const ConvGeom& g = k.g;
  const float* dy = static_cast<const float*>(a->in[0]);
  const float* w = static_cast<const float*>(a->in[1]);
  float* dx = static_cast<float*>(a->out[0]);
  float* wt = static_cast<float*>(a->scratch);
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t t = 0; t < g.kh * g.kw; ++t) wt[c * g.kh * g.kw + t] = w[c * g.kh * g.kw + g.kh * g.kw - 1 - t];
  for (int64_t n = k.n0; n < k.n1; ++n) call_kernel(k.direct, {dy + n * g.o * g.p(), wt}, dx + n * g.c * g.h * g.w);
}

// dw from per-weight vector sums over every image (fixed order: images, then the 8 lanes).
void backward_weight_direct(const KernelArgs* a, const void* data) {
  const ConvKernel& k = *static_cast<const ConvKernel*>(data);
  const ConvGeom& g = k.g;
  const float* x = static_cast<const float*>(a->in[0]);
  const float* dy = static_cast<const float*>(a->in[1]);
  float* dw = static_cast<float*>(a->out[0]);
  float* sums = static_cast<float*>(a->scratch);  // [o, k][8]
  float* xp = sums + g.o * g.k() * 8;
  std::memset(sums, 0, static_cast<size_t>(g.o * g.k() * 8) * sizeof(float));
  const int64_t image = g.c * g.h * g.w, out_image = g.o * g.p();
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      direct_conv_pad(k.dc, x + n * image + grp * g.cg() * g.h * g.w, g.h, g.w, g.ph, g.pw, xp);
      call_kernel(k.direct, {xp, dy + n * out_image + grp * g.og() * g.p()}, sums + grp * g.og() * g.k() * 8);
    }
  for (int64_t e = 0; e < g.o * g.k(); ++e) {
    const float* l = sums + e * 8;
    dw[e] = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
  }
}

void backward_data_direct(const KernelArgs* a, const void* data) {
  const ConvKernel& k = *static_cast<const ConvKernel*>(data);
  const ConvGeom& g = k.g;
  const float* dy = static_cast<const float*>(a->in[0]);
  const float* w = static_cast<const float*>(a->in[1]);
  float* dx = static_cast<float*>(a->out[0]);
  float* wt = static_cast<float*>(a->scratch);  // [groups][cg][og][kh][kw], flipped
  float* dyp = wt + (g.o * g.k() + 15) / 16 * 16;
  for (int64_t grp = 0; grp < g.groups; ++grp)
    for (int64_t o = 0; o < g.og(); ++o)
      for (int64_t c = 0; c < g.cg(); ++c)
        for (int64_t i = 0; i < g.kh; ++i)
          for (int64_t j = 0; j < g.kw; ++j)
            wt[(((grp * g.cg() + c) * g.og() + o) * g.kh + i) * g.kw + j] =
                w[(((grp * g.og() + o) * g.cg() + c) * g.kh + (g.kh - 1 - i)) * g.kw + (g.kw - 1 - j)];
  const int64_t image = g.c * g.h * g.w, out_image = g.o * g.p();
  for (int64_t n = k.n0; n < k.n1; ++n)
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      direct_conv_pad(k.dc, dy + n * out_image + grp * g.og() * g.p(), g.ho, g.wo, (g.kh - 1) * g.dh - g.ph,
                      (g.kw - 1) * g.dw - g.pw, dyp);
      call_kernel(k.direct, {dyp, wt + grp * g.k() * g.og()}, dx + n * image + grp * g.cg() * g.h * g.w);
    }
}

GemmJitDesc gemm_desc(const ConvGeom& g, ConvPass pass) {
  GemmJitDesc d;
  d.op = "conv2d";
  switch (pass) {
    case ConvPass::FORWARD: d.m = g.og(), d.n = g.p(), d.k = g.k(); break;
    case ConvPass::BACKWARD_DATA:
      d.op = "conv2d_bwd_data";
      d.m = g.k(), d.n = g.p(), d.k = g.og(), d.trans_a = true;
      break;
    case ConvPass::BACKWARD_WEIGHT:
      d.op = "conv2d_bwd_weight";
      d.m = g.og(), d.n = g.k(), d.k = g.p(), d.trans_b = true, d.accumulate = true;
      break;
  }
  return d;
}

void forward(const KernelArgs* a, const void* data) {
  const ConvKernel& k = *static_cast<const ConvKernel*>(data);
  const ConvGeom& g = k.g;
  const float* x = static_cast<const float*>(a->in[0]);
  const float* w = static_cast<const float*>(a->in[1]);
  float* y = static_cast<float*>(a->out[0]);
  float* cols = static_cast<float*>(a->scratch);
  float* gemm_scratch = cols + conv_cols_floats(g);
  const int64_t image = g.c * g.h * g.w, out_image = g.o * g.p();
  for (int64_t n = k.n0; n < k.n1; ++n) {
    float* yn = y + n * out_image;
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const float* m = x + n * image + grp * g.cg() * g.h * g.w;
      if (!g.pointwise()) {
        im2col(g, x + n * image, grp, cols);
        m = cols;
      }
      call_kernel(k.gemm, {w + grp * g.og() * g.k(), m}, yn + grp * g.og() * g.p(), gemm_scratch);
    }
    float* yo = yn + k.o0 * g.p();
    if (k.epilogue) call_kernel(k.epilogue, {yo, k.bias ? static_cast<const float*>(a->in[2]) + k.o0 : nullptr}, yo);
  }
}

void backward_data(const KernelArgs* a, const void* data) {
  const ConvKernel& k = *static_cast<const ConvKernel*>(data);
  const ConvGeom& g = k.g;
  const float* dy = static_cast<const float*>(a->in[0]);
  const float* w = static_cast<const float*>(a->in[1]);
  float* dx = static_cast<float*>(a->out[0]);
  float* cols = static_cast<float*>(a->scratch);
  float* gemm_scratch = cols + conv_cols_floats(g);
  const int64_t image = g.c * g.h * g.w, out_image = g.o * g.p();
  std::memset(dx + k.n0 * image, 0, static_cast<size_t>((k.n1 - k.n0) * image) * sizeof(float));
  for (int64_t n = k.n0; n < k.n1; ++n) {
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      float* dst = g.pointwise() ? dx + n * image + grp * g.cg() * g.h * g.w : cols;
      call_kernel(k.gemm, {w + grp * g.og() * g.k(), dy + n * out_image + grp * g.og() * g.p()}, dst, gemm_scratch);
      if (!g.pointwise()) col2im_add(g, cols, grp, dx + n * image);
    }
  }
}

void backward_weight(const KernelArgs* a, const void* data) {
  const ConvKernel& k = *static_cast<const ConvKernel*>(data);
  const ConvGeom& g = k.g;
  const float* x = static_cast<const float*>(a->in[0]);
  const float* dy = static_cast<const float*>(a->in[1]);
  float* dw = static_cast<float*>(a->out[0]);
  float* cols = static_cast<float*>(a->scratch);
  float* gemm_scratch = cols + conv_cols_floats(g);
  const int64_t image = g.c * g.h * g.w, out_image = g.o * g.p();
  std::memset(dw, 0, static_cast<size_t>(g.o * g.k()) * sizeof(float));
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const float* m = x + n * image + grp * g.cg() * g.h * g.w;
      if (!g.pointwise()) {
        im2col(g, x + n * image, grp, cols);
        m = cols;
      }
      call_kernel(k.gemm, {dy + n * out_image + grp * g.og() * g.p(), m}, dw + grp * g.og() * g.k(), gemm_scratch);
    }
  }
}

// The forward epilogue over `channels` channels of an image: y = act(y + b[channel]), rows =
// channels; or act(y) alone.
Result<KernelRef> epilogue_kernel(const JitRequest& r, KernelCache& cache, const ConvGeom& g, int64_t channels, bool bias) {
  const auto f = fused_act(r.ins);
  const float alpha = static_cast<float>(fused_act_alpha(r.ins));
  if (!bias && f == Activation::NONE) return KernelRef();
  const ActSnippet act = act_snippet(f, alpha);
  EwSpec s;
  s.op = fmt::format("conv2d_{}{}", bias ? "bias_" : "", activation_name(f));
  s.imms = fmt::format("alpha={}", alpha);
  s.isa = r.isa;
  s.rows = bias ? channels : 1;
  s.inner = bias ? g.p() : channels * g.p();
  s.in = bias ? std::vector<Feed>{Feed::STREAM, Feed::COL} : std::vector<Feed>{Feed::STREAM};
  s.n_tmp = act.n_tmp;
  s.body = [act, bias](VecGen& v, const std::vector<Xbyak::Xmm>& dst, const std::vector<Xbyak::Xmm>& src,
                       const std::vector<Xbyak::Xmm>& tmp) {
    if (bias) {
      v.g.vaddps(dst[0], src[0], src[1]);
      act.body(v, dst[0], dst[0], tmp);
    } else {
      act.body(v, dst[0], src[0], tmp);
    }
  };
  return elementwise_kernel(s, cache);
}

// Gives k the forward epilogue over `channels` channels, when there is one to run, and appends
// its name to the kernel's.
Status attach_epilogue(const JitRequest& r, KernelCache& cache, const ConvGeom& g, int64_t channels, ConvKernel& k,
                       std::string* name) {
  Result<KernelRef> e = epilogue_kernel(r, cache, g, channels, k.bias);
  if (!e) return e.status();
  if (e.value()) {
    k.epilogue = e.value()->fn();
    k.keep.push_back(e.value());
    *name += "+" + e.value()->name().substr(4);  // without the "f32_"
  }
  return Status::ok();
}

// Gives k the direct kernel of its geometry k.dc (forward: with the bias and activation) and
// returns its name; an empty name when the level has no such kernel (REF).
Result<std::string> attach_direct(const JitRequest& r, KernelCache& cache, ConvPass pass, ConvKernel& k) {
  if (pass == ConvPass::FORWARD) {
    k.dc.bias = k.bias;
    k.dc.act = fused_act(r.ins);
    k.dc.act_alpha = static_cast<float>(fused_act_alpha(r.ins));
  }
  Result<std::shared_ptr<const JitKernel>> direct = direct_conv_kernel(k.dc, r.isa, cache);
  if (!direct) return direct.status();
  if (!direct.value()) return std::string();
  k.direct = direct.value()->fn();
  k.keep.push_back(direct.value());
  return direct.value()->name();
}

}  // namespace

int64_t conv_cols_floats(const ConvGeom& g) { return (g.k() * g.p() + 15) / 16 * 16; }

size_t conv_ref_scratch(const ConvGeom& g, const GemmShape& s) {
  return static_cast<size_t>(conv_cols_floats(g)) * sizeof(float) + gemm_scratch_floats(s) * sizeof(float);
}

size_t conv_winograd_scratch(const ConvGeom& g) {
  return static_cast<size_t>(winograd_scratch(g, g.o, winograd_gemm_bytes(g, g.o), true).floats) * sizeof(float);
}

size_t conv_jit_scratch(const ConvGeom& g, ConvPass pass) {
  const size_t gemm = static_cast<size_t>(conv_cols_floats(g)) * sizeof(float) + jit_gemm_scratch_bytes(gemm_desc(g, pass));
  if (depthwise(g, pass)) return std::max(gemm, static_cast<size_t>(g.o * g.kh * g.kw) * sizeof(float));
  if (pass == ConvPass::FORWARD && winograd_applies(g))
    return static_cast<size_t>(winograd_scratch(g, g.o, winograd_gemm_bytes(g, g.o)).floats) * sizeof(float);
  size_t direct = 0;
  // The scratch hook does not know the level: the larger of the two levels' needs.
  if (pass == ConvPass::FORWARD) direct = std::max(forward_direct_scratch(g, 8), forward_direct_scratch(g, 16));
  if (pass == ConvPass::BACKWARD_DATA && direct_data_gradient(g))
    direct = static_cast<size_t>((g.o * g.k() + 15) / 16 * 16 + direct_geometry(g, pass, 16).padded_floats()) * sizeof(float);
  if (pass == ConvPass::BACKWARD_WEIGHT && direct_weight_applies(g))
    direct = static_cast<size_t>(g.o * g.k() * 8 + direct_geometry(g, ConvPass::FORWARD).padded_floats()) * sizeof(float);
  return std::max(gemm, direct);
}

int conv_jit_parts(const ConvGeom& g, ConvPass pass, int threads) {
  if (pass == ConvPass::BACKWARD_WEIGHT || threads <= 1) return 1;
  const int64_t flops = 2 * g.n * g.o * g.p() * g.k();
  const int64_t units = split_channels(g, pass) ? g.o / 8 : g.n;  // at least 8 channels a part
  return static_cast<int>(std::clamp<int64_t>(std::min<int64_t>(flops / PART_FLOPS, units), 1, threads));
}

Result<std::shared_ptr<const JitKernel>> conv_jit(const JitRequest& r, KernelCache& cache, ConvPass pass,
                                                  const ConvGeom& g, bool u_given) {
  auto k = std::make_shared<ConvKernel>();
  k->g = g;
  const bool by_channel = split_channels(g, pass);
  k->n0 = by_channel ? 0 : g.n * r.part / r.n_parts;
  k->n1 = by_channel ? g.n : g.n * (r.part + 1) / r.n_parts;
  k->bias = pass == ConvPass::FORWARD && r.ins.in.size() == 3;
  const std::string key = fmt::format("conv:{}{}:{}:{}x{}x{}x{}:{}x{}x{}:s{}x{}:p{}x{}:d{}x{}:g{}:bias{}:act{}:{}:part{}/{}",
                                      static_cast<int>(pass), u_given ? "u" : "", isa_name(r.isa), g.n, g.c, g.h, g.w, g.o, g.kh, g.kw, g.sh,
                                      g.sw, g.ph, g.pw, g.dh, g.dw, g.groups, int(k->bias), static_cast<int>(fused_act(r.ins)),
                                      fused_act_alpha(r.ins), r.part, r.n_parts);
  if (!u_given && depthwise(g, pass)) {
    const bool fwd = pass == ConvPass::FORWARD;
    if (by_channel) k->o0 = g.o * r.part / r.n_parts;
    DepthwiseConv d = depthwise_geometry(fwd ? g : depthwise_data_geometry(g),
                                         by_channel ? g.o * (r.part + 1) / r.n_parts - k->o0 : g.c);
    if (fwd) {
      d.bias = k->bias;
      d.act = fused_act(r.ins);
      d.act_alpha = static_cast<float>(fused_act_alpha(r.ins));
    }
    Result<std::shared_ptr<const JitKernel>> kernel = depthwise_kernel(d, r.isa, cache);
    if (!kernel || !kernel.value()) return kernel;
    k->direct = kernel.value()->fn();
    k->keep.push_back(kernel.value());
    const std::string name = fwd ? kernel.value()->name() : "f32_conv2d_bwd_data" + kernel.value()->name().substr(10);
    return cache.get(key, [&] {
      return build_bound_kernel(name, fwd ? forward_depthwise : backward_data_depthwise, std::shared_ptr<const void>(k));
    });
  }
  // The part's output channels: all of them, or its share when a single image splits them.
  k->o0 = by_channel ? g.o * r.part / r.n_parts : 0;
  k->channels = by_channel ? g.o * (r.part + 1) / r.n_parts - k->o0 : g.o;
  if (pass == ConvPass::FORWARD && (u_given ? winograd_fits(g) : winograd_applies(g))) {
    k->ws = winograd_scratch(g, k->channels, winograd_gemm_bytes(g, k->channels), u_given);
    k->wt = winograd_transforms(r.isa);
    // The last product of the part: a smaller group of images, or a shorter band of tile rows.
    const WinogradProducts pr = winograd_products(g);
    const WinogradTiles t = winograd_tiles(g);
    const int64_t rest = pr.images > 1 || pr.rows == t.th ? (k->n1 - k->n0) % pr.images * t.t() : t.th % pr.rows * t.tw;
    Result<std::shared_ptr<const JitKernel>> gemm = jit_gemm(winograd_gemm(g, k->channels, pr.columns), r.isa, cache);
    if (!gemm || !gemm.value()) return gemm;
    Result<std::shared_ptr<const JitKernel>> gemm_rest =
        jit_gemm(winograd_gemm(g, k->channels, rest ? rest : pr.columns), r.isa, cache);
    if (!gemm_rest || !gemm_rest.value()) return gemm_rest;
    k->gemm_rest = gemm_rest.value()->fn();
    k->keep.push_back(gemm_rest.value());
    k->gemm = gemm.value()->fn();
    k->keep.push_back(gemm.value());
    if (!u_given) {
      Result<std::shared_ptr<const JitKernel>> weight_gemm = jit_gemm(winograd_weight_gemm(g, k->channels), r.isa, cache);
      if (!weight_gemm || !weight_gemm.value()) return weight_gemm;
      k->weight_gemm = weight_gemm.value()->fn();
      k->keep.push_back(weight_gemm.value());
    }
    std::string name = gemm.value()->name();
    NNASM_TRY(attach_epilogue(r, cache, g, k->channels, *k, &name));
    return cache.get(key, [&] { return build_bound_kernel(name, forward_winograd, std::shared_ptr<const void>(k)); });
  }
  if (u_given) return std::shared_ptr<const JitKernel>();  // in[1] is U: nothing else reads it
  if ((pass == ConvPass::FORWARD && direct_forward(g, lanes_of(r.isa))) ||
      (pass == ConvPass::BACKWARD_DATA && direct_data_gradient(g))) {
    k->dc = pass == ConvPass::FORWARD ? forward_direct_geometry(g, lanes_of(r.isa)) : direct_geometry(g, pass, lanes_of(r.isa));
    if (by_channel) k->dc.og = k->channels;
    Result<std::string> name = attach_direct(r, cache, pass, *k);
    if (!name) return name.status();
    if (name.value().empty()) return std::shared_ptr<const JitKernel>();
    if (pass != ConvPass::FORWARD) name.value().replace(0, 10, "f32_conv2d_bwd_data");  // "f32_conv2d…"
    const BoundFn fn = pass == ConvPass::FORWARD ? forward_direct : backward_data_direct;
    return cache.get(key, [&] { return build_bound_kernel(name.value(), fn, std::shared_ptr<const void>(k)); });
  }
  if (pass == ConvPass::BACKWARD_WEIGHT && direct_weight_applies(g)) {
    k->dc = direct_geometry(g, pass);
    Result<std::shared_ptr<const JitKernel>> direct = direct_weight_kernel(k->dc, r.isa, cache);
    if (!direct || !direct.value()) return direct;
    k->direct = direct.value()->fn();
    k->keep.push_back(direct.value());
    const std::string name = direct.value()->name();
    return cache.get(key, [&] { return build_bound_kernel(name, backward_weight_direct, std::shared_ptr<const void>(k)); });
  }
  GemmJitDesc gd = gemm_desc(g, pass);
  int64_t channels = g.o;
  if (by_channel && r.n_parts > 1) {
    k->o0 = gd.m_begin = g.o * r.part / r.n_parts;
    gd.m_end = g.o * (r.part + 1) / r.n_parts;
    channels = gd.m_end - gd.m_begin;
  }
  Result<std::shared_ptr<const JitKernel>> gemm = jit_gemm(gd, r.isa, cache);
  if (!gemm || !gemm.value()) return gemm;
  k->gemm = gemm.value()->fn();
  k->keep.push_back(gemm.value());
  std::string name = gemm.value()->name();
  if (pass == ConvPass::FORWARD) NNASM_TRY(attach_epilogue(r, cache, g, channels, *k, &name));
  const BoundFn fn = pass == ConvPass::FORWARD ? forward : pass == ConvPass::BACKWARD_DATA ? backward_data : backward_weight;
  return cache.get(key, [&] { return build_bound_kernel(name, fn, std::shared_ptr<const void>(k)); });
}

}  // namespace nnasm

// CONV_WEIGHTS_WINOGRAD and CONV2D_WINOGRAD: a 3×3 stride-1 convolution by Winograd's
// F(2×2, 3×3) (ops/conv/conv_winograd.h) with the weights' transform as an instruction of its
// own, so that an inference program computes it once, in the derive section, instead of in
// every run as CONV2D's kernel must (the winograd pass, engine/passes/winograd.cpp, makes the
// pair from CONV2D).
//
// CONV_WEIGHTS_WINOGRAD
// Computes   u[4i + j, o, c] = Σ_{a, b} G[i][a]·G[j][b]·w[o, c, a, b], G the 4 × 3 matrix of
//            F(2×2, 3×3) (conv_winograd.cpp), the 16 products a tile's weights take.
// Inputs     w: f32[O, C, 3, 3].
// Outputs    u: f32[16, O, C].
// Gradient   none: the winograd pass makes it only in inference programs.
// Kernels    reference only: it runs in the derive section, once after the params change.
//
// CONV2D_WINOGRAD
// Computes   y = act(conv(x, w) + b) as CONV2D with a 3×3 kernel, stride 1, from u =
//            CONV_WEIGHTS_WINOGRAD(w): each 2×2 output tile is Aᵀ [Σ_c u[·, o, c] ⊙ (Bᵀ d_c B)] A
//            over the tile's 4×4 input patches d_c (zero padding).
// Inputs     x: f32[N, C, H, W]; u: f32[16, O, C]; b: f32[O], optional.
// Outputs    y: f32[N, O, Ho, Wo], Ho = H + 2ph − 2, Wo likewise.
// Immediates CONV2D's: stride and dilation must be [1,1], groups 1, pad at most 1 a side; act,
//            act_alpha as CONV2D's.
// Gradient   none: the winograd pass makes it only in inference programs.
// Kernels    reference: the transforms in plain loops, one tile at a time.
//            JIT: CONV2D's Winograd driver (ops/conv/conv_jit.cpp) reading u in place — the
//            padded input, the input transform, 16 generated GEMMs, the output transform and
//            the bias/activation epilogue — `f32_conv2d_winograd__avx512_14x32`; a single image
//            splits its output channels into the parts.
// Notes      The result differs from the direct sum by the transforms' rounding, as CONV2D's
//            own Winograd kernel does (the parity tests bound it).
#include <algorithm>

#include "ops/conv/conv_geom.h"
#include "ops/conv/conv_jit.h"
#include "ops/conv/conv_winograd.h"
#include "ops/elementwise/activation.h"
#include "ops/op.h"

namespace nnasm {
namespace {

Status weights_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(require_f32(ins, in));
  const Shape& w = in[0].shape;
  if (w.rank != 4 || w[2] != 3 || w[3] != 3)
    return Status::errorf("CONV_WEIGHTS_WINOGRAD: weights {} must be f32[O, C, 3, 3]", operand_str(ins, 0, in[0]));
  (*out)[0] = TensorType{DType::F32, Shape{16, w[0], w[1]}};
  return Status::ok();
}

void weights_ref(const KernelArgs* a) {
  const Shape& s = a->in_type[0].shape;
  const int64_t oc = s[0] * s[1];
  const float* w = static_cast<const float*>(a->in[0]);
  const float* k = winograd_weight_matrix();
  float* u = static_cast<float*>(a->out[0]);
  for (int64_t e = 0; e < 16; ++e)
    for (int64_t i = 0; i < oc; ++i) {
      float acc = 0;
      for (int t = 0; t < 9; ++t) acc += k[e * 9 + t] * w[i * 9 + t];
      u[e * oc + i] = acc;
    }
}

// The geometry of CONV2D with u's weights [O, C, 3, 3].
Status geometry(const Instruction& ins, const std::vector<TensorType>& in, ConvGeom* g) {
  if (in.size() != 2 && in.size() != 3)
    return Status::errorf("CONV2D_WINOGRAD takes 2 or 3 inputs (x, u, optional bias), got {}", in.size());
  NNASM_TRY(require_f32(ins, in));
  const Shape& u = in[1].shape;
  if (u.rank != 3 || u[0] != 16)
    return Status::errorf("CONV2D_WINOGRAD: transformed weights {} must be f32[16, O, C] (CONV_WEIGHTS_WINOGRAD)",
                          operand_str(ins, 1, in[1]));
  NNASM_TRY(conv_geom(ins, in[0], 0, TensorType{DType::F32, Shape{u[1], u[2], 3, 3}}, 1, g));
  if (!winograd_fits(*g))
    return Status::error("CONV2D_WINOGRAD: stride and dilation must be [1,1], groups 1 and padding at most 1");
  return Status::ok();
}

Status conv_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  ConvGeom g;
  NNASM_TRY(geometry(ins, in, &g));
  if (in.size() == 3 && (in[2].dtype != DType::F32 || in[2].shape.rank != 1 || in[2].shape[0] != g.o))
    return Status::errorf("CONV2D_WINOGRAD: bias {} must be f32[{}], one per output channel", operand_str(ins, 2, in[2]),
                          g.o);
  (*out)[0] = TensorType{DType::F32, Shape{g.n, g.o, g.ho, g.wo}};
  return Status::ok();
}

ConvGeom geom(const Instruction& ins, const TensorType* in) {
  const Shape& u = in[1].shape;
  return conv_geom_unchecked(ins, in[0].shape, Shape{u[1], u[2], 3, 3});
}

// Floats of the reference kernel's scratch: one tile's 16 sums for every output channel.
int64_t ref_floats(const ConvGeom& g) { return 16 * g.o; }

size_t conv_scratch(const Instruction& ins, const TensorType* in, const TensorType*) {
  const ConvGeom g = geom(ins, in);
  return std::max(static_cast<size_t>(ref_floats(g)) * sizeof(float), conv_winograd_scratch(g));
}

void conv_ref(const KernelArgs* a) {
  const ConvGeom g = geom(*a->ins, a->in_type);
  const float* x = static_cast<const float*>(a->in[0]);
  const float* u = static_cast<const float*>(a->in[1]);
  const float* b = a->n_in == 3 ? static_cast<const float*>(a->in[2]) : nullptr;
  float* y = static_cast<float*>(a->out[0]);
  float* m = static_cast<float*>(a->scratch);  // [o][16]
  const Activation f = fused_act(*a->ins);
  const float alpha = static_cast<float>(fused_act_alpha(*a->ins));
  const int64_t oc = g.o * g.c;
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t ty = 0; ty < (g.ho + 1) / 2; ++ty)
      for (int64_t tx = 0; tx < (g.wo + 1) / 2; ++tx) {
        std::fill(m, m + 16 * g.o, 0.f);
        for (int64_t c = 0; c < g.c; ++c) {
          float d[4][4], t[4][4], v[16];
          for (int i = 0; i < 4; ++i)
            for (int j = 0; j < 4; ++j) {
              const int64_t iy = 2 * ty - g.ph + i, ix = 2 * tx - g.pw + j;
              d[i][j] = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w ? x[((n * g.c + c) * g.h + iy) * g.w + ix] : 0.f;
            }
          for (int j = 0; j < 4; ++j) {  // Bᵀ d
            t[0][j] = d[0][j] - d[2][j];
            t[1][j] = d[1][j] + d[2][j];
            t[2][j] = d[2][j] - d[1][j];
            t[3][j] = d[1][j] - d[3][j];
          }
          for (int i = 0; i < 4; ++i) {  // (Bᵀ d) B
            v[4 * i + 0] = t[i][0] - t[i][2];
            v[4 * i + 1] = t[i][1] + t[i][2];
            v[4 * i + 2] = t[i][2] - t[i][1];
            v[4 * i + 3] = t[i][1] - t[i][3];
          }
          for (int64_t o = 0; o < g.o; ++o)
            for (int e = 0; e < 16; ++e) m[o * 16 + e] += u[e * oc + o * g.c + c] * v[e];
        }
        for (int64_t o = 0; o < g.o; ++o) {
          const float* mo = m + o * 16;
          float r[2][4];
          for (int j = 0; j < 4; ++j) {  // Aᵀ M
            r[0][j] = mo[j] + mo[4 + j] + mo[8 + j];
            r[1][j] = mo[4 + j] - mo[8 + j] - mo[12 + j];
          }
          for (int i = 0; i < 2; ++i)
            for (int j = 0; j < 2; ++j) {
              const int64_t oy = 2 * ty + i, ox = 2 * tx + j;
              if (oy >= g.ho || ox >= g.wo) continue;
              const float s = j == 0 ? r[i][0] + r[i][1] + r[i][2] : r[i][1] - r[i][2] - r[i][3];  // (Aᵀ M) A
              y[((n * g.o + o) * g.ho + oy) * g.wo + ox] = act::apply(f, s + (b ? b[o] : 0.f), alpha);
            }
        }
      }
}

Result<std::shared_ptr<const JitKernel>> conv_jit_hook(const JitRequest& r, KernelCache& cache) {
  return conv_jit(r, cache, ConvPass::FORWARD, geom(r.ins, r.in), true);
}

int conv_parts(const JitRequest& r, int threads) { return conv_jit_parts(geom(r.ins, r.in), ConvPass::FORWARD, threads); }

}  // namespace

OpHooks op_hooks_CONV_WEIGHTS_WINOGRAD() { return {weights_shape, weights_ref}; }
OpHooks op_hooks_CONV2D_WINOGRAD() { return {conv_shape, conv_ref, conv_scratch, nullptr, conv_jit_hook, conv_parts}; }

}  // namespace nnasm

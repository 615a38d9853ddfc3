// The geometry every CONV2D-family instruction shares: sizes from the operand types and the
// immediates (stride, pad, dilation, groups — the first four immediates of each of them), the
// shape checks with their messages, and the im2col / col2im transforms that turn a convolution
// into GEMMs: for image n and group g, cols[(c·kh + i)·kw + j][oy·Wo + ox] =
// x[n, g·Cg + c, oy·sh − ph + i·dh, ox·sw − pw + j·dw] (0 outside the image), so that
// y[n, g·Og + o, :, :] = W_g[o, :] · cols.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "isa/instruction.h"

namespace nnasm {

struct ConvGeom {
  int64_t n, c, h, w;   // input
  int64_t o, kh, kw;    // weights [o, c/groups, kh, kw]
  int64_t sh, sw, ph, pw, dh, dw, groups;
  int64_t ho, wo;       // output
  int64_t cg() const { return c / groups; }
  int64_t og() const { return o / groups; }
  int64_t k() const { return cg() * kh * kw; }  // GEMM depth: a column of cols
  int64_t p() const { return ho * wo; }         // output pixels per channel
  // cols is x itself: 1×1 kernel, stride 1, no padding (then only the GEMM runs).
  bool pointwise() const { return kh == 1 && kw == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0; }
};

// Immediate positions shared by CONV2D, CONV2D_BWD_DATA, CONV2D_BWD_WEIGHT, CONV2D_NCHWC, CONV2D_I8 and
// CONV2D_BF16 (the fused activation: isa/activation.h's fused_act).
#define NNASM_CONV_IMM(key)                                                                   \
  NNASM_IMM_SHARED(key, Opcode::CONV2D, Opcode::CONV2D_BWD_DATA, Opcode::CONV2D_BWD_WEIGHT, \
                   Opcode::CONV2D_NCHWC, Opcode::CONV2D_I8, Opcode::CONV2D_BF16)
constexpr int CONV_STRIDE = NNASM_CONV_IMM(stride), CONV_PAD = NNASM_CONV_IMM(pad),
              CONV_DILATION = NNASM_CONV_IMM(dilation), CONV_GROUPS = NNASM_CONV_IMM(groups);
#undef NNASM_CONV_IMM

// Immediate k of `ins` as a pair [h, w] into *a, *b: an error naming the op and the key unless it
// has two entries, each at least lo. (Stride, pad and dilation of any op that has them.)
Status conv_pair_imm(const Instruction& ins, int k, int64_t lo, int64_t* a, int64_t* b);
// Outputs along one axis of `in` inputs under a kernel of k taps, stride s, padding p each side
// and dilation d (below 1: the kernel does not fit).
int64_t conv_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d);

// The stride, pad, dilation and groups of `ins` (any of the three conv ops) by key, as
// GradBuilder::emit takes them for another of the three.
std::vector<std::pair<const char*, Imm>> conv_geom_imms(const Instruction& ins);

// The geometry of input shape x and weight shape w under ins's immediates, or an error naming
// the operand at fault (`op` is the mnemonic, x_k and w_k the operand positions for messages).
Status conv_geom(const Instruction& ins, const TensorType& x, int x_k, const TensorType& w, int w_k, ConvGeom* g);
// The same for a kernel: the shapes are already checked.
ConvGeom conv_geom_unchecked(const Instruction& ins, const Shape& x, const Shape& w);

// The parts of conv_geom that do not depend on the layout, for ops whose operands are laid out
// otherwise (CONV2D_NCHWC): the immediates' own checks (pairs; stride and dilation at least 1,
// pad at least 0; groups at least 1), the geometry of the given sizes under ins's immediates, and
// the check that the kernel fits the padded input (x, operand x_k, named in the message).
Status conv_imms_check(const Instruction& ins);
ConvGeom conv_geom_of(const Instruction& ins, int64_t n, int64_t c, int64_t h, int64_t w, int64_t o, int64_t kh, int64_t kw);
Status conv_fits(const Instruction& ins, const ConvGeom& g, const TensorType& x, int x_k);

// cols [k, p] of image `x` (one image's [c, h, w] block) for group g. Does not allocate.
void im2col(const ConvGeom& g, const float* x, int64_t group, float* cols);
// The adjoint: dx (one image) += cols scattered back, for group g.
void col2im_add(const ConvGeom& g, const float* cols, int64_t group, float* dx);

}  // namespace nnasm

// Convolution geometry, shape checks, im2col and col2im.
#include "ops/conv/conv_geom.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ops/op.h"

namespace nnasm {

namespace {

// dst[k] = src[2k], k < n: stride 2 as a constant and restrict pointers, which the compiler
// vectorizes (a stride only known at run time left im2col's strided rows scalar).
void gather_stride2(const float* __restrict src, int64_t n, float* __restrict dst) {
  for (int64_t k = 0; k < n; ++k) dst[k] = src[2 * k];
}

}  // namespace

Status conv_pair_imm(const Instruction& ins, int k, int64_t lo, int64_t* a, int64_t* b) {
  const std::vector<int64_t>& v = ins.ints(k);
  const char* key = ins.info().imms[k].key.c_str();
  if (v.size() != 2) return Status::errorf("{}: {} must have 2 entries [h, w], got [{}]", ins.info().mnemonic, key, fmt::join(v, ","));
  if (v[0] < lo || v[1] < lo)
    return Status::errorf("{}: {} must be at least {}, got [{}]", ins.info().mnemonic, key, lo, fmt::join(v, ","));
  *a = v[0];
  *b = v[1];
  return Status::ok();
}

int64_t conv_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) { return (in + 2 * p - d * (k - 1) - 1) / s + 1; }

ConvGeom conv_geom_of(const Instruction& ins, int64_t n, int64_t c, int64_t h, int64_t w, int64_t o, int64_t kh, int64_t kw) {
  ConvGeom g{};
  g.n = n, g.c = c, g.h = h, g.w = w;
  g.o = o, g.kh = kh, g.kw = kw;
  g.sh = ins.ints(CONV_STRIDE)[0], g.sw = ins.ints(CONV_STRIDE)[1];
  g.ph = ins.ints(CONV_PAD)[0], g.pw = ins.ints(CONV_PAD)[1];
  g.dh = ins.ints(CONV_DILATION)[0], g.dw = ins.ints(CONV_DILATION)[1];
  g.groups = ins.i(CONV_GROUPS);
  g.ho = conv_out_size(g.h, g.kh, g.sh, g.ph, g.dh);
  g.wo = conv_out_size(g.w, g.kw, g.sw, g.pw, g.dw);
  return g;
}

ConvGeom conv_geom_unchecked(const Instruction& ins, const Shape& x, const Shape& w) {
  return conv_geom_of(ins, x[0], x[1], x[2], x[3], w[0], w[2], w[3]);
}

std::vector<std::pair<const char*, Imm>> conv_geom_imms(const Instruction& ins) {
  // CONV2D_BWD_DATA's immediates are exactly the geometry ones.
  std::vector<std::pair<const char*, Imm>> imms;
  for (const ImmSpec& s : op_info(Opcode::CONV2D_BWD_DATA).imms)
    imms.emplace_back(s.key.c_str(), ins.imm[imm_index(ins.info(), s.key)]);
  return imms;
}

Status conv_imms_check(const Instruction& ins) {
  int64_t a, b;
  NNASM_TRY(conv_pair_imm(ins, CONV_STRIDE, 1, &a, &b));
  NNASM_TRY(conv_pair_imm(ins, CONV_PAD, 0, &a, &b));
  NNASM_TRY(conv_pair_imm(ins, CONV_DILATION, 1, &a, &b));
  const int64_t groups = ins.i(CONV_GROUPS);
  if (groups < 1) return Status::errorf("{}: groups must be at least 1, got {}", ins.info().mnemonic, groups);
  return Status::ok();
}

Status conv_fits(const Instruction& ins, const ConvGeom& g, const TensorType& x, int x_k) {
  if (g.ho >= 1 && g.wo >= 1) return Status::ok();
  return Status::errorf("{}: a {}x{} kernel (dilation [{},{}]) does not fit input {} padded by [{},{}]", ins.info().mnemonic,
                        g.kh, g.kw, g.dh, g.dw, operand_str(ins, x_k, x), g.ph, g.pw);
}

Status conv_geom(const Instruction& ins, const TensorType& x, int x_k, const TensorType& w, int w_k, ConvGeom* out) {
  const char* op = ins.info().mnemonic;
  if (x.shape.rank != 4) return Status::errorf("{}: input {} must be NCHW (rank 4)", op, operand_str(ins, x_k, x));
  if (w.shape.rank != 4)
    return Status::errorf("{}: weight {} must be [out, in/groups, kh, kw] (rank 4)", op, operand_str(ins, w_k, w));
  NNASM_TRY(conv_imms_check(ins));
  const int64_t groups = ins.i(CONV_GROUPS);
  const Shape &xs = x.shape, &ws = w.shape;
  if (xs[1] % groups || ws[0] % groups)
    return Status::errorf("{}: groups={} must divide the input channels ({}) and the output channels ({})", op, groups,
                          xs[1], ws[0]);
  if (ws[1] * groups != xs[1])
    return Status::errorf("{}: weight {} takes {} input channels per group, but input {} has {} in {} group{}", op,
                          operand_str(ins, w_k, w), ws[1], operand_str(ins, x_k, x), xs[1], groups, groups == 1 ? "" : "s");
  const ConvGeom g = conv_geom_unchecked(ins, xs, ws);
  NNASM_TRY(conv_fits(ins, g, x, x_k));
  *out = g;
  return Status::ok();
}

void im2col(const ConvGeom& g, const float* x, int64_t group, float* cols) {
  const int64_t cg = g.cg(), p = g.p();
  for (int64_t c = 0; c < cg; ++c) {
    const float* plane = x + (group * cg + c) * g.h * g.w;
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j) {
        float* row = cols + ((c * g.kh + i) * g.kw + j) * p;
        // Output columns ox whose input column ix = ox·sw − pw + j·dw lies inside [0, w).
        const int64_t off = j * g.dw - g.pw;
        const int64_t ox0 = std::min(g.wo, off >= 0 ? 0 : (-off + g.sw - 1) / g.sw);
        const int64_t ox1 = std::max(ox0, std::min(g.wo, g.w - off > 0 ? (g.w - off + g.sw - 1) / g.sw : 0));
        for (int64_t oy = 0; oy < g.ho; ++oy, row += g.wo) {
          const int64_t iy = oy * g.sh - g.ph + i * g.dh;
          if (iy < 0 || iy >= g.h) {
            std::fill(row, row + g.wo, 0.f);
            continue;
          }
          const float* src = plane + iy * g.w;  // src[ox·sw + off], in bounds for ox in [ox0, ox1)
          std::fill(row, row + ox0, 0.f);
          if (g.sw == 1) std::memcpy(row + ox0, src + ox0 + off, static_cast<size_t>(ox1 - ox0) * sizeof(float));
          else if (g.sw == 2) gather_stride2(src + ox0 * 2 + off, ox1 - ox0, row + ox0);
          else
            for (int64_t ox = ox0; ox < ox1; ++ox) row[ox] = src[ox * g.sw + off];
          std::fill(row + ox1, row + g.wo, 0.f);
        }
      }
    }
  }
}

void col2im_add(const ConvGeom& g, const float* cols, int64_t group, float* dx) {
  const int64_t cg = g.cg(), p = g.p();
  for (int64_t c = 0; c < cg; ++c) {
    float* plane = dx + (group * cg + c) * g.h * g.w;
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j) {
        const float* row = cols + ((c * g.kh + i) * g.kw + j) * p;
        const int64_t off = j * g.dw - g.pw;
        const int64_t ox0 = std::min(g.wo, off >= 0 ? 0 : (-off + g.sw - 1) / g.sw);
        const int64_t ox1 = std::max(ox0, std::min(g.wo, g.w - off > 0 ? (g.w - off + g.sw - 1) / g.sw : 0));
        for (int64_t oy = 0; oy < g.ho; ++oy, row += g.wo) {
          const int64_t iy = oy * g.sh - g.ph + i * g.dh;
          if (iy < 0 || iy >= g.h) continue;
          float* dst = plane + iy * g.w;
          for (int64_t ox = ox0; ox < ox1; ++ox) dst[ox * g.sw + off] += row[ox];
        }
      }
    }
  }
}

}  // namespace nnasm

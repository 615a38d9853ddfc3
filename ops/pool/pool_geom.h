// The geometry the pooling instructions share (MAXPOOL2D, AVGPOOL2D, their _BWD ops and the
// blocked MAXPOOL2D_NCHWC and AVGPOOL2D_NCHWC): sizes from x's type and the immediates kernel,
// stride, pad (the first three of each, then AVGPOOL's count_include_pad, then ceil_mode), the
// shape checks with their messages, the clipping of a window to the image, and the max's fold.
// Output (oy, ox) pools the window of rows [oy·sh − ph, oy·sh − ph + kh) and columns
// [ox·sw − pw, ox·sw − pw + kw), the part outside the image being padding (PyTorch's pooling).
// ceil_mode=1 rounds the output size up, as PyTorch does: a last window may reach past the right
// padding (that part counts for nothing), but it must start inside the image or the left
// padding, so PyTorch drops a last window that would start in the right padding.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "isa/instruction.h"
#include "isa/status.h"

namespace nnasm {

// Immediate positions shared by the six pooling ops (POOL_COUNT_INCLUDE_PAD: the AVGPOOLs only).
#define NNASM_POOL_IMM(key)                                                                                 \
  NNASM_IMM_SHARED(key, Opcode::MAXPOOL2D, Opcode::AVGPOOL2D, Opcode::MAXPOOL2D_BWD, Opcode::AVGPOOL2D_BWD, \
                   Opcode::MAXPOOL2D_NCHWC, Opcode::AVGPOOL2D_NCHWC)
constexpr int POOL_KERNEL = NNASM_POOL_IMM(kernel), POOL_STRIDE = NNASM_POOL_IMM(stride), POOL_PAD = NNASM_POOL_IMM(pad),
              POOL_COUNT_INCLUDE_PAD = NNASM_IMM_SHARED(count_include_pad, Opcode::AVGPOOL2D, Opcode::AVGPOOL2D_BWD,
                                                        Opcode::AVGPOOL2D_NCHWC),
              // Last in each schema (added later, so old listings keep their meaning), so its
              // position differs between the max and the average ops.
              POOL_MAX_CEIL_MODE = NNASM_IMM_SHARED(ceil_mode, Opcode::MAXPOOL2D, Opcode::MAXPOOL2D_BWD,
                                                    Opcode::MAXPOOL2D_NCHWC),
              POOL_AVG_CEIL_MODE = NNASM_IMM_SHARED(ceil_mode, Opcode::AVGPOOL2D, Opcode::AVGPOOL2D_BWD,
                                                    Opcode::AVGPOOL2D_NCHWC);
#undef NNASM_POOL_IMM

// The max's fold, from −inf in row-major window order: takes v when larger, and any NaN, so NaN
// sticks once in (the window's last NaN is the result).
inline float pool_max_fold(float m, float v) { return ((v > m) | (v != v)) ? v : m; }

struct PoolGeom {
  int64_t n, c, h, w;   // input (c: channel blocks for the NCHWc ops)
  int64_t kh, kw, sh, sw, ph, pw;
  int64_t ho, wo;       // output
  int64_t planes() const { return n * c; }
  // The rows [*lo, *hi) of the image that output row oy's window covers (never empty: pad is at
  // most half the kernel); the same for columns with col_range.
  void row_range(int64_t oy, int64_t* lo, int64_t* hi) const {
    const int64_t a = oy * sh - ph;
    *lo = std::max<int64_t>(a, 0);
    *hi = std::min(a + kh, h);
  }
  void col_range(int64_t ox, int64_t* lo, int64_t* hi) const {
    const int64_t a = ox * sw - pw;
    *lo = std::max<int64_t>(a, 0);
    *hi = std::min(a + kw, w);
  }
  // AVGPOOL's divisor for output (oy, ox): without padding counted, the image elements of its
  // window; counting padding, the window's part inside the padded input, as PyTorch's: kh·kw
  // except for a ceil_mode window that reaches past the right padding. The product of a row and
  // a column factor.
  int64_t divisor(bool include_pad, int64_t oy, int64_t ox) const {
    return divisor_factor(0, include_pad, oy) * divisor_factor(1, include_pad, ox);
  }
  // The divisor's factor along axis d (0: rows, 1: columns) for output o along it.
  int64_t divisor_factor(int d, bool include_pad, int64_t o) const {
    const int64_t in = d ? w : h, k = d ? kw : kh, p = d ? pw : ph, a = o * (d ? sw : sh) - p;
    return include_pad ? std::min(a + k, in + p) - a : std::min(a + k, in) - std::max<int64_t>(a, 0);
  }
  // Whether every window lies inside the padded input: always without ceil_mode; with it, unless
  // a partial last window was added. The generated kernels need it (they read whole windows).
  bool windows_fit() const { return (ho - 1) * sh + kh <= h + 2 * ph && (wo - 1) * sw + kw <= w + 2 * pw; }
  // Output columns [*lo, *hi) whose window tap j (0 ≤ j < kw) reads a column inside the image.
  void tap_cols(int64_t j, int64_t* lo, int64_t* hi) const {
    const int64_t off = j - pw;  // input column = ox·sw + off
    *lo = std::min(wo, off >= 0 ? 0 : (-off + sw - 1) / sw);
    *hi = std::max(*lo, std::min(wo, w - off > 0 ? (w - off + sw - 1) / sw : 0));
  }
};

// A run of outputs [o0, o0 + count) along one axis whose windows keep the same taps [lo, hi) of
// the window (0 ≤ lo < hi ≤ the kernel's size along the axis; the rest fall in the padding or
// past the image) and, where asked, the same divisor factor.
struct PoolSpan {
  int64_t o0, count, lo, hi, factor;
};
// The runs along axis d (0: rows, 1: columns), in order: each output whose window starts in the
// leading padding or reaches past the image alone (merged with the one before when equal), the
// interior ones, whose windows lie whole in the image, as one run. `factor` is
// divisor_factor(d, include_pad, o) when `by_divisor`, else 0 (and runs are not split by it).
// Allocates.
std::vector<PoolSpan> pool_spans(const PoolGeom& g, int d, bool by_divisor, bool include_pad);

// The geometry of input x (operand x_k, for messages) under ins's immediates, or an error naming
// the immediate or operand at fault.
Status pool_geom(const Instruction& ins, const TensorType& x, int x_k, PoolGeom* g);
// The same for a kernel: the shape is already checked.
PoolGeom pool_geom_unchecked(const Instruction& ins, const Shape& x);
// Whether x (operand x_k, for messages) is a blocked activation f32[N, Cb, H, W, b] with a block
// of 8 or 16 (ops/layout/nchwc.h), or the error that says why not. pool_geom checks it for the
// _NCHWC ops.
Status nchwc_pool_input(const Instruction& ins, const TensorType& x, int x_k);

}  // namespace nnasm

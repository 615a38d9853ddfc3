// The geometry the pooling instructions share (MAXPOOL2D, AVGPOOL2D and their _BWD ops): sizes
// from x's type and the immediates kernel, stride, pad (the first three of each, then AVGPOOL's
// count_include_pad, then ceil_mode), the shape checks with their messages, and the clipping of a
// window to the image. Output (oy, ox) pools the window of rows [oy·sh − ph, oy·sh − ph + kh) and
// columns [ox·sw − pw, ox·sw − pw + kw), the part outside the image being padding (PyTorch's
// pooling). ceil_mode=1 rounds the output size up, as PyTorch does: a last window may reach past
// the right padding (that part counts for nothing), but it must start inside the image or the
// left padding, so PyTorch drops a last window that would start in the right padding.
#pragma once
#include <algorithm>
#include <cstdint>

#include "isa/instruction.h"
#include "isa/status.h"

namespace nnasm {

// Immediate positions shared by the four pooling ops (POOL_COUNT_INCLUDE_PAD: the AVGPOOLs only).
#define NNASM_POOL_IMM(key) \
  NNASM_IMM_SHARED(key, Opcode::MAXPOOL2D, Opcode::AVGPOOL2D, Opcode::MAXPOOL2D_BWD, Opcode::AVGPOOL2D_BWD)
constexpr int POOL_KERNEL = NNASM_POOL_IMM(kernel), POOL_STRIDE = NNASM_POOL_IMM(stride), POOL_PAD = NNASM_POOL_IMM(pad),
              POOL_COUNT_INCLUDE_PAD = NNASM_IMM_SHARED(count_include_pad, Opcode::AVGPOOL2D, Opcode::AVGPOOL2D_BWD),
              // Last in each schema (added later, so old listings keep their meaning), so its
              // position differs between the max and the average ops.
              POOL_MAX_CEIL_MODE = NNASM_IMM_SHARED(ceil_mode, Opcode::MAXPOOL2D, Opcode::MAXPOOL2D_BWD),
              POOL_AVG_CEIL_MODE = NNASM_IMM_SHARED(ceil_mode, Opcode::AVGPOOL2D, Opcode::AVGPOOL2D_BWD);
#undef NNASM_POOL_IMM

struct PoolGeom {
  int64_t n, c, h, w;   // input
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
  // AVGPOOL's divisor for output (oy, ox), whose window clipped to the image is rows [r0, r1) and
  // columns [c0, c1). Counting padding, it is the window's part inside the padded input, as
  // PyTorch's: kh·kw except for a ceil_mode window that reaches past the right padding.
  int64_t divisor(bool include_pad, int64_t oy, int64_t ox, int64_t r0, int64_t r1, int64_t c0, int64_t c1) const {
    if (!include_pad) return (r1 - r0) * (c1 - c0);
    const int64_t a = oy * sh - ph, b = ox * sw - pw;
    return (std::min(a + kh, h + ph) - a) * (std::min(b + kw, w + pw) - b);
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

// The geometry of input x (operand x_k, for messages) under ins's immediates, or an error naming
// the immediate or operand at fault.
Status pool_geom(const Instruction& ins, const TensorType& x, int x_k, PoolGeom* g);
// The same for a kernel: the shape is already checked.
PoolGeom pool_geom_unchecked(const Instruction& ins, const Shape& x);

}  // namespace nnasm

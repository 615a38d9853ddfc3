// Pooling geometry and shape checks.
#include "ops/pool/pool_geom.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "isa/program.h"
#include "ops/layout/nchwc.h"
#include "ops/op.h"

namespace nnasm {

namespace {

// Immediate k as an [h, w] pair of sizes no tensor exceeds (so no sum below overflows), or the
// error that says why it is not one.
Status pair_of(const Instruction& ins, int k) {
  const std::vector<int64_t>& v = ins.ints(k);
  const char *op = ins.info().mnemonic, *key = ins.info().imms[k].key.c_str();
  if (v.size() != 2) return Status::errorf("{}: {} must have 2 entries [h, w], got [{}]", op, key, fmt::join(v, ","));
  for (int64_t e : v)
    if (e > MAX_TENSOR_ELEMENTS) return Status::errorf("{}: {} [{}] is too large", op, key, fmt::join(v, ","));
  return Status::ok();
}

// Outputs along one axis of `in` elements, padded by `pad` at each end: PyTorch's
// pooling_output_shape. Requires in + 2·pad ≥ k.
int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t pad, bool ceil) {
  const int64_t span = in + 2 * pad - k;
  int64_t n = (ceil ? (span + s - 1) / s : span / s) + 1;
  // A last window must start inside the image or its left padding, never in the right padding.
  if (ceil && (n - 1) * s >= in + pad) --n;
  return n;
}

}  // namespace

Status nchwc_pool_input(const Instruction& ins, const TensorType& x, int x_k) {
  const char* op = ins.info().mnemonic;
  if (x.shape.rank != 5)
    return Status::errorf("{}: input {} must be NCHWc [N, Cb, H, W, b] (rank 5)", op, operand_str(ins, x_k, x));
  if (!nchwc_block_valid(x.shape[4]))
    return Status::errorf("{}: input {} has blocks of {} channels; a block must be 8 or 16", op,
                          operand_str(ins, x_k, x), x.shape[4]);
  return Status::ok();
}

PoolGeom pool_geom_unchecked(const Instruction& ins, const Shape& x) {
  PoolGeom g{};
  g.n = x[0], g.c = x[1], g.h = x[2], g.w = x[3];
  const std::vector<int64_t>&k = ins.ints(POOL_KERNEL), &s = ins.ints(POOL_STRIDE), &p = ins.ints(POOL_PAD);
  g.kh = k[0], g.kw = k[1];
  g.sh = s[0] ? s[0] : k[0];
  g.sw = s[1] ? s[1] : k[1];
  g.ph = p[0], g.pw = p[1];
  const bool max = ins.op == Opcode::MAXPOOL2D || ins.op == Opcode::MAXPOOL2D_BWD || ins.op == Opcode::MAXPOOL2D_NCHWC;
  const bool ceil = ins.i(max ? POOL_MAX_CEIL_MODE : POOL_AVG_CEIL_MODE) != 0;
  g.ho = out_size(g.h, g.kh, g.sh, g.ph, ceil);
  g.wo = out_size(g.w, g.kw, g.sw, g.pw, ceil);
  return g;
}

std::vector<PoolSpan> pool_spans(const PoolGeom& g, int d, bool by_divisor, bool include_pad) {
  const int64_t in = d ? g.w : g.h, k = d ? g.kw : g.kh, s = d ? g.sw : g.sh, p = d ? g.pw : g.ph;
  const int64_t out = d ? g.wo : g.ho;
  std::vector<PoolSpan> spans;
  const auto add = [&](int64_t o, int64_t count) {
    const int64_t a = o * s - p;
    const PoolSpan r{o, count, std::max<int64_t>(0, -a), std::min(k, in - a),
                     by_divisor ? g.divisor_factor(d, include_pad, o) : 0};
    PoolSpan* last = spans.empty() ? nullptr : &spans.back();
    if (last && last->lo == r.lo && last->hi == r.hi && last->factor == r.factor) last->count += count;
    else spans.push_back(r);
  };
  const int64_t first = std::min(out, (p + s - 1) / s);  // outputs whose window starts in the padding
  int64_t end = out;  // from here windows reach past the image
  while (end > first && (end - 1) * s - p + k > in) --end;
  for (int64_t o = 0; o < first; ++o) add(o, 1);
  if (end > first) add(first, end - first);
  for (int64_t o = end; o < out; ++o) add(o, 1);
  return spans;
}

Status pool_geom(const Instruction& ins, const TensorType& x, int x_k, PoolGeom* out) {
  const char* op = ins.info().mnemonic;
  if (ins.op == Opcode::MAXPOOL2D_NCHWC || ins.op == Opcode::AVGPOOL2D_NCHWC) {
    NNASM_TRY(nchwc_pool_input(ins, x, x_k));
  } else if (x.shape.rank != 4) {
    return Status::errorf("{}: input {} must be NCHW (rank 4)", op, operand_str(ins, x_k, x));
  }
  for (int k : {POOL_KERNEL, POOL_STRIDE, POOL_PAD}) NNASM_TRY(pair_of(ins, k));
  const std::vector<int64_t>&k = ins.ints(POOL_KERNEL), &s = ins.ints(POOL_STRIDE), &p = ins.ints(POOL_PAD);
  if (k[0] < 1 || k[1] < 1) return Status::errorf("{}: kernel must be at least 1, got [{}]", op, fmt::join(k, ","));
  const bool stride_is_kernel = s[0] == 0 && s[1] == 0;
  if (!stride_is_kernel && (s[0] < 1 || s[1] < 1))
    return Status::errorf("{}: stride must be at least 1 (or [0,0], the kernel), got [{}]", op, fmt::join(s, ","));
  if (p[0] < 0 || p[1] < 0) return Status::errorf("{}: pad must be at least 0, got [{}]", op, fmt::join(p, ","));
  // As PyTorch: a window must hold at least one element of the image.
  if (2 * p[0] > k[0] || 2 * p[1] > k[1])
    return Status::errorf("{}: pad [{}] must be at most half the kernel [{}]", op, fmt::join(p, ","), fmt::join(k, ","));
  if (x.shape[2] + 2 * p[0] < k[0] || x.shape[3] + 2 * p[1] < k[1])
    return Status::errorf("{}: a {}x{} kernel does not fit input {} padded by [{}]", op, k[0], k[1],
                          operand_str(ins, x_k, x), fmt::join(p, ","));
  *out = pool_geom_unchecked(ins, x.shape);
  return Status::ok();
}

}  // namespace nnasm

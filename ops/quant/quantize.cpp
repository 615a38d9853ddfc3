// QUANTIZE and DEQUANTIZE: ONNX's QuantizeLinear and DequantizeLinear, the conversions between
// f32 and the 8-bit storage types that reduced-precision inference keeps weights and activations
// in. The two share their operand checks, their per-tensor / per-axis layout and their kernel
// generator, so they live in one file.
//
// Computes   QUANTIZE:   y = saturate(round_half_to_even(x / scale) + zero_point), as ONNX: a true
//                        division (never a multiply by the reciprocal, which rounds differently),
//                        rounding with halves to even whatever the MXCSR's rounding mode, the zero
//                        point added, then clamped to the output type's range ([−128, 127] or
//                        [0, 255]).
//            DEQUANTIZE: y = f32(x − zero_point) · scale (the difference exact for i8 and u8; for
//                        i32 it wraps, and converts to f32 rounding to nearest).
// Inputs     x:          QUANTIZE f32; DEQUANTIZE i8, u8 or i32 (ONNX's int32 bias). Any shape.
//            scale:      f32, [] or [1] (per tensor), or [C] with C = x.shape[axis] (per axis:
//                        element i along `axis` uses scale[i]).
//            zero_point: scale's element count ([] and [1] both mean per tensor). QUANTIZE: i8 or
//                        u8, and the output has its dtype (so the listing needs no type immediate);
//                        DEQUANTIZE: x's dtype. ONNX makes it optional (0 of u8): an importer
//                        supplies the constant.
// Outputs    y:          x's shape; QUANTIZE zero_point's dtype, DEQUANTIZE f32.
// Immediates axis:       the per-axis axis, negative from the end (default 1, as ONNX); ignored
//                        per tensor (as ONNX), out of range per axis is an error.
// Gradient   none: quantized tensors carry no gradient (they are inference storage; training
//            stays f32), so autodiff refuses a program that needs one through these ops, by name.
// Kernels    reference loops here. JIT for AVX2 and AVX-512 (one generator below), bitwise equal
//            to the reference: QUANTIZE is vdivps, vroundps / vrndscaleps with the round-to-
//            nearest-even immediate, NaN lanes zeroed, a clamp to ±512 in f32 (so vcvtps2dq is
//            exact), the zero point added and the result clamped in i32, then narrowed (vpmovdb on
//            AVX-512; vpshufb + vpunpckldq on AVX2) and stored; DEQUANTIZE widens (vpmovsxbd /
//            vpmovzxbd), subtracts, converts (vcvtdq2ps) and multiplies. Tails: AVX-512 opmasks,
//            AVX2 mask tables for the f32 side, and byte-wise inserts and extracts for the 8-bit
//            side, so nothing past the last element is read or written.
// Notes      NaN x gives the zero point (ONNX leaves it to the cast; a zero point is the value
//            that dequantizes to 0). ±inf saturates. The scale's values are a run-time property:
//            a zero scale gives saturated values (x/0 = ±inf; 0/0 = NaN gives the zero point), a
//            NaN scale gives the zero point everywhere, a negative scale mirrors. Nothing checks
//            them here: an op has no hook that sees a constant's values at prepare, so
//            the tools that write scales (issue 30's `nnasm quantize`, an ONNX importer) are where
//            a zero or NaN scale is refused.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>
#include <xbyak/xbyak.h>

#include "jit/frame.h"
#include "jit/vecgen.h"
#include "ops/op.h"
#include "ops/quant/round.h"
#include "ops/reduce/axis.h"

namespace nnasm {
namespace {

const int AXIS = NNASM_IMM_SHARED(axis, Opcode::QUANTIZE, Opcode::DEQUANTIZE);

// How scale and zero point run along x, in x's element order: `rows` rows of `inner` elements.
//   SCALAR  one scale for all (rows 1).
//   COL     row r uses scale[r % C] (per axis, on an axis with elements after it).
//   ROW     element j of every row uses scale[j] (per axis on the last axis: inner = C).
enum class QuantFeed : uint8_t { SCALAR, COL, ROW };
struct QuantLayout {
  QuantFeed feed = QuantFeed::SCALAR;
  int64_t rows = 1, inner = 0, channels = 1;
};

bool per_tensor(const TensorType& scale) { return scale.shape.numel() == 1; }

QuantLayout layout_of(const Instruction& ins, const TensorType& x, const TensorType& scale) {
  QuantLayout l;
  const int64_t n = x.shape.numel();
  if (per_tensor(scale)) {
    l.inner = n;
    return l;
  }
  const AxisSplit sp = split_at(x.shape, normalize_axis(ins.i(AXIS), x.shape.rank));
  l.channels = sp.len;
  if (sp.inner == 1) {
    l.feed = QuantFeed::ROW;
    l.rows = sp.outer;
    l.inner = sp.len;
  } else {
    l.feed = QuantFeed::COL;
    l.rows = sp.outer * sp.len;
    l.inner = sp.inner;
  }
  return l;
}

bool is_8bit(DType t) { return t == DType::I8 || t == DType::U8; }

// The checks both ops share: scale f32 of rank ≤ 1 and the right length, zero point of scale's
// element count. The dtypes of x and the zero point are each op's own.
Status check_scale(const Instruction& ins, const std::vector<TensorType>& in) {
  const char* mn = ins.info().mnemonic;
  const TensorType &x = in[0], &scale = in[1], &zp = in[2];
  if (scale.dtype != DType::F32)
    return Status::errorf("{}: the scale, {}, must be f32", mn, operand_str(ins, 1, scale));
  if (scale.shape.rank > 1)
    return Status::errorf("{}: the scale, {}, must be a scalar ([] or [1]: per tensor) or 1-D [C] (per axis)", mn,
                          operand_str(ins, 1, scale));
  if (zp.shape.rank > 1 || zp.shape.numel() != scale.shape.numel())
    return Status::errorf("{}: the zero point, {}, must have the scale's shape {}", mn, operand_str(ins, 2, zp),
                          scale.shape.str());
  if (per_tensor(scale)) return Status::ok();
  int axis = 0;
  NNASM_TRY(axis_of(ins, AXIS, x, &axis));
  if (scale.shape[0] != x.shape[axis])
    return Status::errorf("{}: the scale, {}, must be [{}] (x's extent along axis {}) or a scalar for per-tensor "
                          "quantization",
                          mn, operand_str(ins, 1, scale), x.shape[axis], ins.i(AXIS));
  return Status::ok();
}

Status quantize_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  if (in[0].dtype != DType::F32) return Status::errorf("QUANTIZE: x, {}, must be f32", operand_str(ins, 0, in[0]));
  if (!is_8bit(in[2].dtype))
    return Status::errorf("QUANTIZE: the zero point, {}, must be i8 or u8 (it gives the output's dtype)",
                          operand_str(ins, 2, in[2]));
  NNASM_TRY(check_scale(ins, in));
  (*out)[0] = TensorType{in[2].dtype, in[0].shape};
  return Status::ok();
}

Status dequantize_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  if (!is_8bit(in[0].dtype) && in[0].dtype != DType::I32)
    return Status::errorf("DEQUANTIZE: x, {}, must be i8, u8 or i32", operand_str(ins, 0, in[0]));
  if (in[2].dtype != in[0].dtype)
    return Status::errorf("DEQUANTIZE: the zero point, {}, must have x's dtype {}", operand_str(ins, 2, in[2]),
                          dtype_name(in[0].dtype));
  NNASM_TRY(check_scale(ins, in));
  (*out)[0] = TensorType{DType::F32, in[0].shape};
  return Status::ok();
}

// ---- reference ----

int32_t load_int(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::I8: return static_cast<const int8_t*>(p)[i];
    case DType::U8: return static_cast<const uint8_t*>(p)[i];
    default: return static_cast<const int32_t*>(p)[i];
  }
}

int32_t quantize_one(float x, float scale, int32_t zp, int32_t lo, int32_t hi) {
  float q = round_half_even(x / scale);
  if (std::isnan(q)) return zp;
  q = std::min(std::max(q, -QCLAMP), QCLAMP);
  return std::min(std::max(static_cast<int32_t>(q) + zp, lo), hi);
}

float dequantize_one(int32_t x, float scale, int32_t zp) {
  const int32_t d = static_cast<int32_t>(static_cast<uint32_t>(x) - static_cast<uint32_t>(zp));
  return static_cast<float>(d) * scale;
}

// Element (r, j) of the layout uses channel c: the same index arithmetic as the JIT's.
template <typename F>
void for_each_element(const QuantLayout& l, F&& f) {
  for (int64_t r = 0; r < l.rows; ++r)
    for (int64_t j = 0; j < l.inner; ++j)
      f(r * l.inner + j, l.feed == QuantFeed::SCALAR ? 0 : l.feed == QuantFeed::COL ? r % l.channels : j);
}

void quantize_ref(const KernelArgs* a) {
  const QuantLayout l = layout_of(*a->ins, a->in_type[0], a->in_type[1]);
  const float* x = static_cast<const float*>(a->in[0]);
  const float* scale = static_cast<const float*>(a->in[1]);
  const DType t = a->out_type[0].dtype;
  const int32_t lo = t == DType::I8 ? -128 : 0, hi = t == DType::I8 ? 127 : 255;
  void* y = a->out[0];
  for_each_element(l, [&](int64_t i, int64_t c) {
    const int32_t q = quantize_one(x[i], scale[c], load_int(a->in[2], t, c), lo, hi);
    if (t == DType::I8) static_cast<int8_t*>(y)[i] = static_cast<int8_t>(q);
    else static_cast<uint8_t*>(y)[i] = static_cast<uint8_t>(q);
  });
}

void dequantize_ref(const KernelArgs* a) {
  const QuantLayout l = layout_of(*a->ins, a->in_type[0], a->in_type[1]);
  const float* scale = static_cast<const float*>(a->in[1]);
  const DType t = a->in_type[0].dtype;
  float* y = static_cast<float*>(a->out[0]);
  for_each_element(l, [&](int64_t i, int64_t c) {
    y[i] = dequantize_one(load_int(a->in[0], t, i), scale[c], load_int(a->in[2], t, c));
  });
}

// ---- JIT ----
//
// Register map. General: rdi KernelArgs*, rsi x and rdx y (at the current row), r8 the scale,
// r9 the zero point, rcx the element index in the row, rax the channel of the row (COL), r10 the
// rows left, r11 scratch. Vector (ymm on AVX2, zmm on AVX-512): 0 the value, 1 scratch (its xmm
// view assembles 8-bit tails), 2 the scale, 3 the zero point (i32 lanes), 4 the NaN mask on AVX2,
// 15 the AVX2 tail mask. Opmasks: k1 the tail, k2 the NaN mask.

using namespace Xbyak;
using namespace Xbyak::util;

constexpr int64_t MAX_ELEMS = int64_t(1) << 28;  // byte offsets stay within int32
constexpr size_t MEASURE_BYTES = 16 * 1024;
constexpr int ORD = 0x07;  // vcmpps: neither operand NaN

struct QuantSpec {
  bool quantize = true;
  Isa isa = Isa::AVX2;
  DType int_type = DType::I8;  // QUANTIZE's y, DEQUANTIZE's x (and the zero point's)
  QuantLayout l;
};

class QuantGen {
 public:
  QuantGen(CodeGenerator& g, const QuantSpec& s) : g_(g), s_(s), v_(g, s.isa) {}

  Status emit() {
    {
      Frame f(g_, 0);
      f.load_in(rsi, 0);
      f.load_in(r8, 1);
      f.load_in(r9, 2);
      f.load_out(rdx, 0);
      const int W = v_.width();
      tail_ = static_cast<int>(s_.l.inner % W);
      if (tail_) v_.set_tail(tail_, Ymm(15));
      if (s_.l.feed == QuantFeed::SCALAR) broadcast_channel(r8, r9);
      g_.xor_(eax, eax);
      g_.mov(r10, s_.l.rows);
      Label row;
      g_.L(row);
      if (s_.l.feed == QuantFeed::COL) {
        g_.lea(r11, ptr[r8 + rax * 4]);
        g_.lea(rcx, ptr[r9 + rax * zp_size()]);
        broadcast_channel(r11, rcx);
      }
      emit_row();
      g_.add(rsi, static_cast<int32_t>(s_.l.inner * x_size()));
      g_.add(rdx, static_cast<int32_t>(s_.l.inner * y_size()));
      if (s_.l.feed == QuantFeed::COL) {
        Label same;
        g_.inc(rax);
        g_.cmp(rax, static_cast<int32_t>(s_.l.channels));
        g_.jne(same);
        g_.xor_(eax, eax);
        g_.L(same);
      }
      g_.dec(r10);
      g_.jnz(row, CodeGenerator::T_NEAR);
    }
    v_.finish();
    return Status::ok();
  }

 private:
  int zp_size() const { return static_cast<int>(dtype_size(s_.int_type)); }
  int x_size() const { return s_.quantize ? 4 : zp_size(); }
  int y_size() const { return s_.quantize ? zp_size() : 4; }
  bool is_signed() const { return s_.int_type != DType::U8; }

  // The scale and zero point at *scale, *zp into every lane of registers 2 and 3.
  void broadcast_channel(const Reg64& scale, const Reg64& zp) {
    g_.vbroadcastss(v_.vreg(2), dword[scale]);
    if (s_.int_type == DType::I32) {
      g_.vpbroadcastd(v_.vreg(3), dword[zp]);
      return;
    }
    if (is_signed()) g_.movsx(r11d, byte[zp]);
    else g_.movzx(r11d, byte[zp]);
    g_.vmovd(Xmm(3), r11d);
    g_.vpbroadcastd(v_.vreg(3), Xmm(3));
  }

  // One row: whole vectors in a loop, then the tail.
  void emit_row() {
    const int W = v_.width();
    const int64_t full = s_.l.inner / W;
    g_.xor_(ecx, ecx);
    if (full > 0) {
      Label loop;
      g_.L(loop);
      block(W);
      g_.add(rcx, W);
      g_.cmp(rcx, static_cast<int32_t>(full * W));
      g_.jb(loop, CodeGenerator::T_NEAR);
    }
    if (tail_) block(tail_);
  }

  // `count` integers of int_type at base + rcx·size into the i32 lanes of dst.
  void load_ints(const Xmm& dst, const Reg64& base, int count) {
    if (s_.int_type == DType::I32) {
      v_.load(dst, ptr[base + rcx * 4], count);
      return;
    }
    auto widen = [&](const Xmm& d, const Operand& src) {
      if (is_signed()) g_.vpmovsxbd(d, src);
      else g_.vpmovzxbd(d, src);
    };
    if (count == v_.width()) {
      if (v_.avx512()) widen(dst, xword[base + rcx]);
      else widen(dst, qword[base + rcx]);
      return;
    }
    const Xmm t(1);
    g_.vpxor(t, t, t);
    for (int j = 0; j < count; ++j) g_.vpinsrb(t, t, byte[base + rcx + j], j);
    widen(dst, t);
  }

  // The i32 lanes of src (each within the 8-bit type's range) as bytes at y + rcx, `count` of them.
  void store_bytes(const Xmm& src, int count) {
    if (v_.avx512()) {
      if (count == v_.width()) g_.vpmovdb(xword[rdx + rcx], src);
      else g_.vpmovdb(xword[rdx + rcx] | k1, src);
      return;
    }
    // Bytes 0, 4, 8, 12 of each 128-bit half to its first four, then the halves side by side.
    g_.vpshufb(src, src, v_.cst_u32({0x0c080400u, 0x80808080u, 0x80808080u, 0x80808080u}));
    const Xmm lo(src.getIdx()), t(1);
    g_.vextracti128(t, Ymm(src.getIdx()), 1);
    g_.vpunpckldq(lo, lo, t);
    if (count == v_.width()) {
      g_.vmovq(qword[rdx + rcx], lo);
      return;
    }
    int j = 0;
    if (count >= 4) {
      g_.vmovd(dword[rdx + rcx], lo);
      j = 4;
    }
    for (; j < count; ++j) g_.vpextrb(byte[rdx + rcx + j], lo, j);
  }

  void block(int count) {
    const Xmm v = v_.vreg(0), scale = v_.vreg(2), zp = v_.vreg(3);
    if (s_.l.feed == QuantFeed::ROW) {
      v_.load(scale, ptr[r8 + rcx * 4], count);
      load_ints(zp, r9, count);
    }
    if (s_.quantize) {
      v_.load(v, ptr[rsi + rcx * 4], count);
      g_.vdivps(v, v, scale);
      if (v_.avx512()) g_.vrndscaleps(v, v, 0);
      else g_.vroundps(v, v, 0);
      const VMask m = v_.mask(0, v_.vreg(4));
      v_.cmp(m, v, v, ORD);
      v_.keep(v, m, v);
      g_.vminps(v, v, v_.cst(QCLAMP));
      g_.vmaxps(v, v, v_.cst(-QCLAMP));
      g_.vcvtps2dq(v, v);
      g_.vpaddd(v, v, zp);
      const bool i8 = s_.int_type == DType::I8;
      g_.vpmaxsd(v, v, v_.cst_u32({static_cast<uint32_t>(i8 ? -128 : 0)}));
      g_.vpminsd(v, v, v_.cst_u32({i8 ? 127u : 255u}));
      store_bytes(v, count);
    } else {
      load_ints(v, rsi, count);
      g_.vpsubd(v, v, zp);
      g_.vcvtdq2ps(v, v);
      g_.vmulps(v, v, scale);
      v_.store(ptr[rdx + rcx * 4], v, count);
    }
  }

  CodeGenerator& g_;
  const QuantSpec& s_;
  VecGen v_;
  int tail_ = 0;
};

Result<std::shared_ptr<const JitKernel>> quant_jit(const JitRequest& r, KernelCache& cache, bool quantize) {
  const int64_t n = r.in[0].shape.numel();
  if (n <= 0 || n > MAX_ELEMS) return std::shared_ptr<const JitKernel>();
  QuantSpec s;
  s.quantize = quantize;
  s.isa = r.isa;
  s.int_type = r.in[2].dtype;
  s.l = layout_of(r.ins, r.in[0], r.in[1]);
  const char* feed = s.l.feed == QuantFeed::SCALAR ? "" : s.l.feed == QuantFeed::COL ? "_axis" : "_lastaxis";
  const std::string name = quantize ? fmt::format("f32_quantize_{}{}__{}", dtype_name(s.int_type), feed, isa_name(s.isa))
                                    : fmt::format("{}_dequantize{}__{}", dtype_name(s.int_type), feed, isa_name(s.isa));
  const std::string key = fmt::format("{}|{}x{}|{}", name, s.l.rows, s.l.inner, s.l.channels);
  return build_kernel_measured(cache, key, name, MEASURE_BYTES, [&s](CodeGenerator& g) { return QuantGen(g, s).emit(); });
}

Result<std::shared_ptr<const JitKernel>> quantize_jit(const JitRequest& r, KernelCache& cache) {
  return quant_jit(r, cache, true);
}
Result<std::shared_ptr<const JitKernel>> dequantize_jit(const JitRequest& r, KernelCache& cache) {
  return quant_jit(r, cache, false);
}

}  // namespace

// No gradient hook: autodiff refuses a path through either op, by name.
OpHooks op_hooks_QUANTIZE() { return {quantize_shape, quantize_ref, nullptr, nullptr, quantize_jit}; }
OpHooks op_hooks_DEQUANTIZE() { return {dequantize_shape, dequantize_ref, nullptr, nullptr, dequantize_jit}; }

}  // namespace nnasm

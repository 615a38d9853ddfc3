// LINEAR_WEIGHTS_I8 and LINEAR_I8: a dense layer with an i8 weight and activations quantized to u8
// on the fly (ONNX's DynamicQuantizeLinear then MatMulInteger), the integer product exact in i32.
// A quarter of LINEAR's weight bytes, and four products per instruction (vpdpbusd).
//
// LINEAR_WEIGHTS_I8
// Computes   the weight in the layout LINEAR_I8 reads: wp[q, o, j] = w[4q + j, o] (0 for 4q + j ≥ K:
//            the pad weights make whatever the kernel holds in the pad activations harmless), and
//            colsum[o] = Σ_k w[k, o] (the zero point's correction).
// Inputs     w: i8[K, O] (input-major, as LINEAR's).
// Outputs    wp: i8[⌈K/4⌉, O, 4]; colsum: i32[O].
// Gradient   none (inference storage).
// Kernels    reference only: its input is a param or constant, so the derive pass
//            (engine/passes/derive.cpp) runs it once, not per run.
//
// LINEAR_I8
// Computes   for each row of x (x_scale=row), or for all of x at once (x_scale=tensor, exactly ONNX's
//            DynamicQuantizeLinear):
//              lo = min(0, min x), hi = max(0, max x), sx = (hi − lo) / 255 (f32),
//              zp = sat_u8(rne(−lo / sx)), q_k = sat_u8(rne(x_k / sx) + zp) (true divisions, as
//              QUANTIZE; rne rounds halves to even),
//              acc_o = Σ_k q_k·w[k, o] − zp·colsum_o (i32, exact),
//              y_o = act(fma(f32(acc_o), sx·s_o, b_o) + p), p = Σ_k x_k·0 over the row (tensor).
//            x_scale=given (a static QDQ model's activation quantization): sx and zp are inputs,
//            no min/max pass; q_k = sat_u8(rne(x_k / sx) + zp) exactly as QUANTIZE, the rest as
//            above (p per row).
// Inputs     x: f32[..., K] (rank ≥ 1; the leading dims are rows); wp, colsum: LINEAR_WEIGHTS_I8's;
//            scale: f32[O] or [1], the weight's scale per output channel (or one); b: f32[O];
//            x_scale=given only: sx f32[] or [1], zp u8[] or [1] (7 inputs; 5 otherwise).
// Outputs    y: f32[..., O].
// Immediates act, act_alpha: as LINEAR's (ops/linalg/linear.cpp). x_scale: row (one scale and zero
//            point per row of x: a batch's rows do not change one another's results), tensor or
//            given.
// Gradient   none: int8 weights are inference storage; training stays f32 (LINEAR).
// Kernels    reference: plain loops. JIT (AVX2 and AVX-512): per row, a min/max pass (x_scale=given:
//            none; sx and zp read from their inputs once, p summed in the quantizing pass), then
//            the row quantized into the scratch; then tiles of up to 4 rows × several vectors of columns
//            stream wp (one vector load = W columns × 4 k) against each row's broadcast quad of q,
//            accumulating in i32, and the epilogue (the zero point's correction, the conversion,
//            the fma with sx·s and b, p, the activation snippet, the store) fused. With VNNI
//            (`i8_linear__avx512_vnni_4x64`, AVX-VNNI's `__avx2_vnni_…`): vpdpbusd. Without
//            (`__avx512_4x32`, `__avx2_4x8`): q kept as u16, wp widened (vpmovsxbw), vpmaddwd
//            (exact: never vpmaddubsw, which saturates) into pairs of k per column, the pairs added
//            once per tile. The integer part is exact, and the epilogue is the reference's f32
//            operations in its order, so the JIT equals the reference bitwise before the
//            activation (and after it for none, relu, leakyrelu and clipped_relu, whose snippets
//            are exact). Parallel parts split the columns in whole vectors; each part quantizes
//            every row itself (in its own scratch), so the values do not depend on the threads.
// Notes      K ≤ 65536 keeps the i32 sums exact (255·128·K < 2^31). An all-zero row has sx = 0: its
//            q and zp are 0 (the kernels divide by 1 instead), so y = act(fma(0, 0·s, b)). A row
//            (x_scale=tensor: any element of x) with a NaN or ±inf gives NaN outputs, through p;
//            its q are then unspecified. Denormals follow the run's flushing, alike in both
//            kernels. x_scale=given: sx is data and nothing checks it (as QUANTIZE's scale): sx = 0
//            divides by 1 instead (as the dynamic modes' all-zero row), so y = act(b + p); a NaN or
//            ±inf sx gives NaN outputs (f32(acc)·NaN, or q = zp and 0·inf); a negative sx mirrors
//            q and gives the same product as QUANTIZE then DEQUANTIZE would.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <fmt/format.h>
#include <xbyak/xbyak.h>

#include "isa/activation.h"
#include "jit/act_snippet.h"
#include "jit/frame.h"
#include "jit/vecgen.h"
#include "ops/elementwise/activation.h"
#include "ops/op.h"
#include "ops/quant/linear_i8.h"
#include "ops/quant/i8_quant.h"

namespace nnasm {
namespace {

constexpr int64_t MAX_K = 65536;

int64_t quads(int64_t k) { return (k + 3) / 4; }

// ---- LINEAR_WEIGHTS_I8 ----

Status weights_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  if (in[0].dtype != DType::I8 || in[0].shape.rank != 2)
    return Status::errorf("LINEAR_WEIGHTS_I8: the weight, {}, must be i8[in, out] (QUANTIZE an f32 weight first)",
                          operand_str(ins, 0, in[0]));
  const int64_t k = in[0].shape[0], o = in[0].shape[1];
  (*out)[0] = TensorType{DType::I8, Shape{quads(k), o, 4}};
  (*out)[1] = TensorType{DType::I32, Shape{o}};
  return Status::ok();
}

void weights_ref(const KernelArgs* a) {
  const int64_t k = a->in_type[0].shape[0], o = a->in_type[0].shape[1];
  const int8_t* w = static_cast<const int8_t*>(a->in[0]);
  int8_t* wp = static_cast<int8_t*>(a->out[0]);
  int32_t* colsum = static_cast<int32_t*>(a->out[1]);
  std::fill(colsum, colsum + o, 0);
  for (int64_t q = 0; q < quads(k); ++q)
    for (int64_t c = 0; c < o; ++c)
      for (int64_t j = 0; j < 4; ++j) {
        const int64_t kk = 4 * q + j;
        const int8_t v = kk < k ? w[kk * o + c] : 0;
        wp[(q * o + c) * 4 + j] = v;
        colsum[c] += v;
      }
}

// ---- LINEAR_I8: shape ----

bool tensor_scale(const Instruction& ins) {
  return ins.i(NNASM_IMM(LINEAR_I8, x_scale)) == NNASM_CHOICE(LINEAR_I8, x_scale, tensor);
}
bool given_scale(const Instruction& ins) {
  return ins.i(NNASM_IMM(LINEAR_I8, x_scale)) == NNASM_CHOICE(LINEAR_I8, x_scale, given);
}

// A per-tensor quantization parameter: rank 0, or rank 1 of one element.
bool one_element(const Shape& s) { return s.rank == 0 || (s.rank == 1 && s[0] == 1); }

Status linear_i8_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  const bool given = given_scale(ins);
  const size_t want = given ? 7 : 5;
  if (in.size() != want)
    return Status::errorf("LINEAR_I8 x_scale={} takes {} inputs ({}), got {}",
                          given ? "given" : tensor_scale(ins) ? "tensor" : "row", want,
                          given ? "x, wp, colsum, scale, b, sx, zp" : "x, wp, colsum, scale, b; x_scale=given adds sx, zp",
                          in.size());
  const Shape& x = in[0].shape;
  if (in[0].dtype != DType::F32)
    return Status::errorf("LINEAR_I8: x, {}, must be f32 (it is quantized to u8 in the kernel)",
                          operand_str(ins, 0, in[0]));
  if (x.rank < 1) return Status::errorf("LINEAR_I8: x, {}, must have rank 1 or more", operand_str(ins, 0, in[0]));
  const int64_t k = x[x.rank - 1];
  if (k > MAX_K)
    return Status::errorf("LINEAR_I8: x, {}, has {} features; at most {} keep the i32 sums exact (use LINEAR or "
                          "LINEAR_BF16)",
                          operand_str(ins, 0, in[0]), k, MAX_K);
  const Shape& wp = in[1].shape;
  if (in[1].dtype != DType::I8 || wp.rank != 3 || wp[2] != 4 || wp[0] != quads(k))
    return Status::errorf("LINEAR_I8: the packed weight, {}, must be i8[{}, out, 4] for x's {} features "
                          "(LINEAR_WEIGHTS_I8's first output)",
                          operand_str(ins, 1, in[1]), quads(k), k);
  const int64_t o = wp[1];
  if (in[2].dtype != DType::I32 || in[2].shape.rank != 1 || in[2].shape[0] != o)
    return Status::errorf("LINEAR_I8: the column sums, {}, must be i32[{}] (LINEAR_WEIGHTS_I8's second output)",
                          operand_str(ins, 2, in[2]), o);
  const Shape& s = in[3].shape;
  if (in[3].dtype != DType::F32 || s.rank != 1 || (s[0] != o && s[0] != 1))
    return Status::errorf("LINEAR_I8: the weight scale, {}, must be f32[{}] (per output) or f32[1]",
                          operand_str(ins, 3, in[3]), o);
  if (in[4].dtype != DType::F32 || in[4].shape.rank != 1 || in[4].shape[0] != o)
    return Status::errorf("LINEAR_I8: the bias, {}, must be f32[{}] to match the weight",
                          operand_str(ins, 4, in[4]), o);
  if (given && (in[5].dtype != DType::F32 || !one_element(in[5].shape)))
    return Status::errorf("LINEAR_I8: x's scale, {}, must be f32[] or f32[1] (one per tensor)",
                          operand_str(ins, 5, in[5]));
  if (given && (in[6].dtype != DType::U8 || !one_element(in[6].shape)))
    return Status::errorf("LINEAR_I8: x's zero point, {}, must be u8[] or u8[1] (one per tensor; QUANTIZE's u8)",
                          operand_str(ins, 6, in[6]));
  Shape y = x;
  y[y.rank - 1] = o;
  (*out)[0] = TensorType{DType::F32, y};
  return Status::ok();
}

struct Dims {
  int64_t rows, in, out;
};
Dims dims_of(const TensorType* in) {
  const Shape& x = in[0].shape;
  int64_t rows = 1;
  for (int d = 0; d + 1 < x.rank; ++d) rows *= x[d];
  return Dims{rows, x[x.rank - 1], in[1].shape[1]};
}

// ---- LINEAR_I8: reference ----

using QParams = I8QParams;
QParams qparams(const float* x, int64_t n) { return i8_qparams(x, n); }

void linear_i8_ref(const KernelArgs* a) {
  const Dims d = dims_of(a->in_type);
  const float* x = static_cast<const float*>(a->in[0]);
  const int8_t* wp = static_cast<const int8_t*>(a->in[1]);
  const int32_t* colsum = static_cast<const int32_t*>(a->in[2]);
  const float* scale = static_cast<const float*>(a->in[3]);
  const bool per_out = a->in_type[3].shape[0] == d.out && d.out != 1;
  const float* b = static_cast<const float*>(a->in[4]);
  float* y = static_cast<float*>(a->out[0]);
  const Activation f = fused_act(*a->ins);
  const float alpha = static_cast<float>(fused_act_alpha(*a->ins));
  const bool whole = tensor_scale(*a->ins), given = given_scale(*a->ins);
  const QParams all = whole ? qparams(x, d.rows * d.in) : QParams{};
  const float gsx = given ? *static_cast<const float*>(a->in[5]) : 0.f;
  const int32_t gzp = given ? *static_cast<const uint8_t*>(a->in[6]) : 0;
  std::vector<int32_t> q(static_cast<size_t>(d.in));
  for (int64_t r = 0; r < d.rows; ++r) {
    const float* xr = x + r * d.in;
    const QParams qp = whole ? all : given ? i8_given_qparams(gsx, gzp, xr, d.in) : qparams(xr, d.in);
    for (int64_t k = 0; k < d.in; ++k) q[k] = quantize_u8(xr[k] / qp.div, qp.zp);
    for (int64_t o = 0; o < d.out; ++o) {
      int32_t acc = 0;
      for (int64_t k = 0; k < d.in; ++k) acc += q[k] * wp[((k / 4) * d.out + o) * 4 + k % 4];
      acc -= qp.zp * colsum[o];
      const float t = qp.sx * scale[per_out ? o : 0];
      y[r * d.out + o] = act::apply(f, std::fma(static_cast<float>(acc), t, b[o]) + qp.p, alpha);
    }
  }
}

// ---- JIT ----
//
// Register map. General: rdi KernelArgs*; rsi x and rdx y at the current row block; rbx the
// scratch; r8 wp, r9 colsum, r10 the scale, r11 the bias; r13 row blocks left; r14 the current
// column block's byte offset (4 bytes a column in wp's quad rows, colsum, scale, b and y alike);
// r12 column blocks left; rax wp and r15 the q rows at the current quad; rcx quads left (and the
// quantizing passes' counter, with rax x and r15 q there).
// Scratch: [0, 16) the tensor's sx, zp, p, divisor; [64 + 16i, …) row i's; from 128 the block's q
// rows, qs bytes apart (u8, or u16 for the widening kernel); the lanes past K hold zp, against
// zero weights (LINEAR_WEIGHTS_I8's padding) or never read.
// Vector, AVX-512: 8 … 23 the accumulators, 24 … 31 the tile's wp vectors (a single row's stream
// through them in turn), 7 the broadcast q quad, 6 a product, 1 and 2 a tail's wp; the
// epilogue's temporaries 0 … 5. AVX2: 6 … 13 the accumulators, 0 … 3 the tile's wp, 4 q, 5 a
// product, 14 and 5 a tail's wp, 15 the column tail mask; the epilogue's 0 … 4 and 14. The
// quantizing passes use 0 … 5 (and AVX2's 14 for the x tail mask). Opmasks: k1 the column tail
// (VecGen), k3 x's tail (set before each use: the activation snippets clobber k2 … k7).

using namespace Xbyak;
using namespace Xbyak::util;

constexpr int MR = 4;                            // rows per block
constexpr int64_t MAX_BYTES = int64_t(1) << 30;  // offsets stay within int32
constexpr size_t MEASURE_BYTES = 64 * 1024;
constexpr int Q_BASE = 128;

int vector_width(Isa isa) { return isa == Isa::AVX512 ? 16 : 8; }
int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }
// Bytes of one q row: u16 (the widening kernel's) for whole vectors of up to 16 elements.
int64_t q_row_bytes(int64_t in) { return round_up(round_up(in, 16) * 2, 64); }

struct I8Spec {
  Isa isa = Isa::AVX2;
  bool vnni = false;
  bool tensor = false;
  bool given = false;  // x_scale=given: sx, zp from inputs 5 and 6, p per row in the quantizing pass
  bool per_out = true;
  Dims d{};
  int64_t c0 = 0, c1 = 0;  // the part's columns [c0, c1): whole vectors, but for the last part
  Activation act = Activation::NONE;
  float act_alpha = 0;
};

class I8Gen {
 public:
  I8Gen(CodeGenerator& g, const I8Spec& s) : g_(g), s_(s), v_(g, s.isa) {}

  // Column vectors per tile row: at most 8 accumulators for a single row (independent chains
  // for batch 1), 16 (AVX-512) or 8 for several, and as many wp vectors as the map has room for.
  static int vectors_per_row(const I8Spec& s, int mr) {
    const int per = s.vnni ? 1 : 2;
    const bool z = s.isa == Isa::AVX512;
    if (mr == 1) return 8 / per;
    int nv = std::max(1, (z ? 16 : 8) / (mr * per));
    return std::max(1, std::min(nv, (z ? 8 : 4) / per));
  }

  Status emit() {
    const int W = v_.width();
    qs_ = q_row_bytes(s_.d.in);
    esize_ = s_.vnni ? 1 : 2;
    {
      Frame f(g_, 6);
      f.load_in(rsi, 0);
      f.load_in(r8, 1);
      f.load_in(r9, 2);
      f.load_in(r10, 3);
      f.load_in(r11, 4);
      f.load_out(rdx, 0);
      g_.mov(rbx, ptr[Frame::args() + offsetof(KernelArgs, scratch)]);
      if (s_.d.out % W) v_.set_tail(static_cast<int>(s_.d.out % W), Ymm(15));
      if (s_.tensor) {
        g_.mov(rax, rsi);
        minmax(s_.d.rows * s_.d.in, 0);
      }
      if (s_.given) {
        f.load_in(rax, 5);
        g_.vmovss(Xmm(0), dword[rax]);
        f.load_in(rax, 6);
        g_.movzx(eax, byte[rax]);
        g_.mov(dword[rbx + 4], eax);
        finish_given(Xmm(0));
      }
      const int64_t full = s_.d.rows / MR, rest = s_.d.rows % MR;
      repeat(r13, full, [&] {
        row_block(MR);
        g_.add(rsi, static_cast<int32_t>(MR * s_.d.in * 4));
        g_.add(rdx, static_cast<int32_t>(MR * s_.d.out * 4));
      });
      if (rest) row_block(static_cast<int>(rest));
    }
    v_.finish();
    return Status::ok();
  }

 private:
  bool z() const { return v_.avx512(); }
  int slot(int i) const { return s_.tensor ? 0 : 64 + 16 * i; }
  int per() const { return s_.vnni ? 1 : 2; }
  Xmm acc(int i, int j, int h) const { return v_.vreg((z() ? 8 : 6) + (i * nv_ + j) * per() + h); }

  // body() n times (none for n = 0), `counter` counting down.
  template <typename F>
  void repeat(const Reg64& counter, int64_t n, F body) {
    if (n <= 0) return;
    Label loop;
    g_.mov(counter, n);
    g_.L(loop);
    body();
    g_.dec(counter);
    g_.jnz(loop, CodeGenerator::T_NEAR);
  }

  // Through ecx: rax holds x here, and a tail comes after its loop, which leaves rcx free.
  void set_k3(uint32_t bits) {
    g_.mov(ecx, bits);
    g_.kmovd(k3, ecx);
  }

  // x's tail of `count` elements at `src` into `dst`, the lanes past it 0.
  void load_x_tail(const Xmm& dst, const Address& src, int count) {
    if (z()) {
      set_k3((1u << count) - 1);
      g_.vmovups(dst | k3 | T_z, src);
    } else {
      g_.vmovups(Ymm(14), v_.lane_mask((1u << count) - 1));
      g_.vmaskmovps(dst, Ymm(14), src);
    }
  }

  // Horizontal `op` of the lanes of `r` into its lane 0.
  template <typename Op>
  void hreduce(const Xmm& r, const Xmm& t, Op op) {
    if (z()) {
      g_.vextractf64x4(Ymm(t.getIdx()), Zmm(r.getIdx()), 1);
      op(Ymm(r.getIdx()), Ymm(r.getIdx()), Ymm(t.getIdx()));
    }
    g_.vextractf128(Xmm(t.getIdx()), Ymm(r.getIdx()), 1);
    op(Xmm(r.getIdx()), Xmm(r.getIdx()), Xmm(t.getIdx()));
    g_.vmovhlps(Xmm(t.getIdx()), Xmm(t.getIdx()), Xmm(r.getIdx()));
    op(Xmm(r.getIdx()), Xmm(r.getIdx()), Xmm(t.getIdx()));
    g_.vshufps(Xmm(t.getIdx()), Xmm(r.getIdx()), Xmm(r.getIdx()), 1);
    op(Xmm(r.getIdx()), Xmm(r.getIdx()), Xmm(t.getIdx()));
  }

  // lo, hi and p of n elements of x at rax (rax advanced), then sx, zp, p and the divisor into
  // the scratch at `at`: the reference's qparams, operation for operation (min and max differ
  // only in which NaN or zero sign they keep, which nothing downstream sees).
  void minmax(int64_t n, int at) {
    const int W = v_.width();
    const Xmm lo = v_.vreg(0), hi = v_.vreg(1), p = v_.vreg(2), zero = v_.vreg(3), v = v_.vreg(4);
    g_.vxorps(lo, lo, lo);
    g_.vxorps(hi, hi, hi);
    g_.vxorps(p, p, p);
    g_.vxorps(zero, zero, zero);
    auto one = [&](const Xmm& x) {
      g_.vminps(lo, lo, x);
      g_.vmaxps(hi, hi, x);
      g_.vfmadd231ps(p, x, zero);
    };
    repeat(rcx, n / W, [&] {
      g_.vmovups(v, ptr[rax]);
      one(v);
      g_.add(rax, W * 4);
    });
    if (n % W) {
      load_x_tail(v, ptr[rax], static_cast<int>(n % W));
      one(v);
    }
    const Xmm t = v_.vreg(5);
    hreduce(lo, t, [&](const Xmm& d, const Xmm& a, const Xmm& b) { g_.vminps(d, a, b); });
    hreduce(hi, t, [&](const Xmm& d, const Xmm& a, const Xmm& b) { g_.vmaxps(d, a, b); });
    hreduce(p, t, [&](const Xmm& d, const Xmm& a, const Xmm& b) { g_.vaddps(d, a, b); });
    const Xmm l(0), h(1), pp(2), sx(3), dv(4), q(5);
    g_.vsubss(sx, h, l);
    g_.vdivss(sx, sx, v_.cst(255.f));
    g_.vmovss(dword[rbx + at], sx);
    g_.vmovss(dword[rbx + at + 8], pp);
    store_divisor(sx, dv, q, at + 12);
    g_.vxorps(q, l, v_.cst_bits(0x80000000u));
    g_.vdivss(q, q, dv);
    g_.vroundss(q, q, q, 0);
    g_.vmaxss(q, q, v_.cst(-QCLAMP));
    g_.vminss(q, q, v_.cst(QCLAMP));
    g_.vcvtss2si(eax, q);
    g_.xor_(ecx, ecx);
    g_.test(eax, eax);
    g_.cmovs(eax, ecx);
    g_.mov(ecx, 255);
    g_.cmp(eax, ecx);
    g_.cmovg(eax, ecx);
    g_.mov(dword[rbx + at + 4], eax);
  }

  // x_scale=given: sx (in `sx`) and the divisor into slot 0 (zp is there already).
  void finish_given(const Xmm& sx) {
    const Xmm dv(4), z(5);
    g_.vmovss(dword[rbx], sx);
    store_divisor(sx, dv, z, 12);
  }

  // div = sx == 0 ? 1 : sx into the scratch at `at` (NaN ≠ 0: unordered sets ZF and PF); dv holds it.
  void store_divisor(const Xmm& sx, const Xmm& dv, const Xmm& z, int at) {
    Label keep;
    g_.vmovaps(dv, sx);
    g_.vxorps(z, z, z);
    g_.vucomiss(sx, z);
    g_.jp(keep);
    g_.jne(keep);
    g_.vmovss(dv, v_.cst(1.f));
    g_.L(keep);
    g_.vmovss(dword[rbx + at], dv);
  }

  // The row at rax quantized into the q row at r15 (whole vectors: the pad lanes get zp); for
  // x_scale=given also p = Σ x·0 of the row into the slot.
  void quantize_row(int at) {
    const int W = v_.width();
    const Xmm dv = v_.vreg(0), zp = v_.vreg(1), v = v_.vreg(2), zero = v_.vreg(3), t = v_.vreg(4);
    v_.broadcast(dv, dword[rbx + at + 12]);
    v_.broadcast(zp, dword[rbx + at + 4]);
    const Xmm p = v_.vreg(5);
    if (z()) g_.vpxord(zero, zero, zero);
    else g_.vpxor(zero, zero, zero);
    if (s_.given) g_.vxorps(p, p, p);
    auto one = [&]() {
      if (s_.given) g_.vfmadd231ps(p, v, zero);
      g_.vdivps(v, v, dv);
      if (z()) g_.vrndscaleps(v, v, 0);
      else g_.vroundps(v, v, 0);
      g_.vmaxps(v, v, v_.cst(-QCLAMP));
      g_.vminps(v, v, v_.cst(QCLAMP));
      g_.vcvtps2dq(v, v);
      g_.vpaddd(v, v, zp);
      g_.vpmaxsd(v, v, zero);
      g_.vpminsd(v, v, v_.cst_u32({255}));
      if (z()) {
        if (s_.vnni) g_.vpmovdb(xword[r15], Zmm(v.getIdx()));
        else g_.vpmovdw(yword[r15], Zmm(v.getIdx()));
      } else {
        g_.vextracti128(Xmm(t.getIdx()), Ymm(v.getIdx()), 1);
        g_.vpackusdw(Xmm(v.getIdx()), Xmm(v.getIdx()), Xmm(t.getIdx()));
        if (s_.vnni) {
          g_.vpackuswb(Xmm(v.getIdx()), Xmm(v.getIdx()), Xmm(v.getIdx()));
          g_.vmovq(qword[r15], Xmm(v.getIdx()));
        } else {
          g_.vmovdqu(xword[r15], Xmm(v.getIdx()));
        }
      }
    };
    const int64_t n = s_.d.in;
    repeat(rcx, n / W, [&] {
      g_.vmovups(v, ptr[rax]);
      one();
      g_.add(rax, W * 4);
      g_.add(r15, W * esize_);
    });
    if (n % W) {
      load_x_tail(v, ptr[rax], static_cast<int>(n % W));
      one();
    }
    if (s_.given) {
      hreduce(p, t, [&](const Xmm& d, const Xmm& a, const Xmm& b) { g_.vaddps(d, a, b); });
      g_.vmovss(dword[rbx + at + 8], Xmm(p.getIdx()));
    }
  }

  void row_block(int mr) {
    for (int i = 0; i < mr; ++i) {
      if (s_.given) {
        g_.vmovups(Xmm(0), xword[rbx]);  // sx, zp, (p), the divisor: p comes next
        g_.vmovups(xword[rbx + slot(i)], Xmm(0));
      } else if (!s_.tensor) {
        g_.lea(rax, ptr[rsi + i * s_.d.in * 4]);
        minmax(s_.d.in, slot(i));
      }
      g_.lea(rax, ptr[rsi + i * s_.d.in * 4]);
      g_.lea(r15, ptr[rbx + Q_BASE + i * qs_]);
      quantize_row(slot(i));
    }
    nv_ = vectors_per_row(s_, mr);
    const int nb = nv_ * v_.width();
    g_.mov(r14, s_.c0 * 4);
    const int64_t full = (s_.c1 - s_.c0) / nb;
    const int tail = static_cast<int>((s_.c1 - s_.c0) % nb);
    repeat(r12, full, [&] {
      col_block(mr, nb);
      g_.add(r14, nb * 4);
    });
    if (tail) col_block(mr, tail);
  }

  // wp's partial last vector (the column tail's dwords, the rest 0) into `dst`.
  void load_w_tail(const Xmm& dst, const Address& src) {
    if (z()) g_.vmovdqu32(dst | k1 | T_z, src);
    else g_.vpmaskmovd(dst, Ymm(15), src);
  }

  // wp vector j of the current quad (count columns) into `dst` (VNNI) or widened to i16 into
  // dst and dst2 (its two halves).
  void load_w(int j, int count, const Xmm& dst, const Xmm& dst2, const Xmm& t1, const Xmm& t2) {
    const int W = v_.width();
    const Address src = ptr[rax + j * W * 4];
    if (s_.vnni) {
      if (count != W) load_w_tail(dst, src);
      else if (z()) g_.vmovdqu32(dst, src);
      else g_.vmovdqu(dst, src);
      return;
    }
    if (count == W) {
      if (z()) {
        g_.vpmovsxbw(dst, yword[rax + j * W * 4]);
        g_.vpmovsxbw(dst2, yword[rax + j * W * 4 + W * 2]);
      } else {
        g_.vpmovsxbw(dst, xword[rax + j * W * 4]);
        g_.vpmovsxbw(dst2, xword[rax + j * W * 4 + W * 2]);
      }
      return;
    }
    load_w_tail(t1, src);
    if (z()) {
      g_.vpmovsxbw(dst, Ymm(t1.getIdx()));
      g_.vextracti64x4(Ymm(t2.getIdx()), Zmm(t1.getIdx()), 1);
      g_.vpmovsxbw(dst2, Ymm(t2.getIdx()));
    } else {
      g_.vpmovsxbw(dst, Xmm(t1.getIdx()));
      g_.vextracti128(Xmm(t2.getIdx()), Ymm(t1.getIdx()), 1);
      g_.vpmovsxbw(dst2, Xmm(t2.getIdx()));
    }
  }

  void dot(const Xmm& a, const Xmm& q, const Operand& w) {
    if (z()) g_.vpdpbusd(a, q, w);
    else g_.vpdpbusd(a, q, w, VexEncoding);
  }

  // One quad of k for `cols` columns and mr rows.
  void step(int mr, int cols) {
    const int W = v_.width();
    const int nv = (cols + W - 1) / W;
    const Xmm qb = v_.vreg(z() ? 7 : 4);
    const Xmm t1 = v_.vreg(z() ? 1 : 14), t2 = v_.vreg(z() ? 2 : 5);
    auto bcast_q = [&](int i) {
      if (s_.vnni) g_.vpbroadcastd(qb, dword[r15 + i * qs_]);
      else g_.vpbroadcastq(qb, qword[r15 + i * qs_]);
    };
    auto count = [&](int j) { return std::min(W, cols - j * W); };
    const int wb = z() ? 24 : 0, pool = z() ? 8 : 4;
    const Xmm prod = v_.vreg(z() ? 6 : 5);
    if (mr == 1) {
      // One row: wp streams through a rotating pool (VNNI's whole vectors straight from memory).
      bcast_q(0);
      for (int j = 0; j < nv; ++j) {
        if (s_.vnni) {
          if (count(j) == W) {
            dot(acc(0, j, 0), qb, ptr[rax + j * W * 4]);
          } else {
            load_w_tail(t1, ptr[rax + j * W * 4]);
            dot(acc(0, j, 0), qb, t1);
          }
          continue;
        }
        const Xmm wa = v_.vreg(wb + (2 * j) % pool), wc = v_.vreg(wb + (2 * j + 1) % pool);
        load_w(j, count(j), wa, wc, t1, t2);
        g_.vpmaddwd(prod, wa, qb);
        g_.vpaddd(acc(0, j, 0), acc(0, j, 0), prod);
        g_.vpmaddwd(prod, wc, qb);
        g_.vpaddd(acc(0, j, 1), acc(0, j, 1), prod);
      }
      return;
    }
    for (int j = 0; j < nv; ++j)
      load_w(j, count(j), v_.vreg(wb + j * per()), v_.vreg(wb + j * per() + (per() - 1)), t1, t2);
    for (int i = 0; i < mr; ++i) {
      bcast_q(i);
      for (int j = 0; j < nv; ++j)
        for (int h = 0; h < per(); ++h) {
          const Xmm w = v_.vreg(wb + j * per() + h);
          if (s_.vnni) {
            dot(acc(i, j, 0), qb, w);
          } else {
            g_.vpmaddwd(prod, w, qb);
            g_.vpaddd(acc(i, j, h), acc(i, j, h), prod);
          }
        }
    }
  }

  void col_block(int mr, int cols) {
    const int W = v_.width();
    const int nv = (cols + W - 1) / W;
    for (int i = 0; i < mr; ++i)
      for (int j = 0; j < nv; ++j)
        for (int h = 0; h < per(); ++h) {
          const Xmm a = acc(i, j, h);
          if (z()) g_.vpxord(a, a, a);
          else g_.vpxor(a, a, a);
        }
    g_.lea(rax, ptr[r8 + r14]);
    g_.lea(r15, ptr[rbx + Q_BASE]);
    repeat(rcx, quads(s_.d.in), [&] {
      step(mr, cols);
      g_.add(rax, static_cast<int32_t>(s_.d.out * 4));
      g_.add(r15, 4 * esize_);
    });
    epilogue(mr, cols);
  }

  void combine(int i, int j) { i8_combine_pairs(v_, acc(i, j, 0), acc(i, j, 1)); }

  // − zp·colsum, the conversion, fma with sx·s and b, + p, the activation, the store.
  void epilogue(int mr, int cols) {
    const int W = v_.width();
    const ActSnippet act = act_snippet(s_.act, s_.act_alpha);
    const std::vector<Xmm> tmp{v_.vreg(0), v_.vreg(1), v_.vreg(2), v_.vreg(3), v_.vreg(4), v_.vreg(z() ? 5 : 14)};
    const Xmm t0 = tmp[0], t1 = tmp[1];
    for (int i = 0; i < mr; ++i)
      for (int j = 0; j * W < cols; ++j) {
        const int count = std::min(W, cols - j * W);
        if (!s_.vnni) combine(i, j);
        const Xmm y = acc(i, j, 0);
        const int at = slot(i);
        v_.load(t0, ptr[r9 + r14 + j * W * 4], count);
        v_.broadcast(t1, dword[rbx + at + 4]);
        g_.vpmulld(t0, t0, t1);
        g_.vpsubd(y, y, t0);
        g_.vcvtdq2ps(y, y);
        v_.broadcast(t1, dword[rbx + at]);
        if (s_.per_out) v_.load(t0, ptr[r10 + r14 + j * W * 4], count);
        else v_.broadcast(t0, dword[r10]);
        g_.vmulps(t0, t1, t0);
        v_.load(t1, ptr[r11 + r14 + j * W * 4], count);
        g_.vfmadd213ps(y, t0, t1);
        v_.broadcast(t1, dword[rbx + at + 8]);
        g_.vaddps(y, y, t1);
        act.body(v_, y, y, tmp);
        v_.store(ptr[rdx + r14 + i * s_.d.out * 4 + j * W * 4], y, count);
      }
  }

  CodeGenerator& g_;
  const I8Spec& s_;
  VecGen v_;
  int nv_ = 1;
  int64_t qs_ = 0;
  int esize_ = 1;
};

size_t linear_i8_scratch(const Instruction&, const TensorType* in, const TensorType*) {
  return static_cast<size_t>(Q_BASE + MR * q_row_bytes(dims_of(in).in));
}

Result<std::shared_ptr<const JitKernel>> linear_i8_jit(const JitRequest& r, KernelCache& cache) {
  return linear_i8_kernel(r.ins, r.in, r.isa, linear_i8_has_vnni(r.isa), cache, r.part, r.n_parts);
}

// Parts split the columns in whole vectors; each quantizes every row again (rows·K divisions
// against rows·K·O/parts products), so only a large product is split.
int linear_i8_parts(const JitRequest& r, int threads) {
  const Dims d = dims_of(r.in);
  if (threads <= 1 || d.rows * d.in * d.out < (int64_t(1) << 18)) return 1;
  const int64_t vecs = (d.out + vector_width(r.isa) - 1) / vector_width(r.isa);
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, vecs / 2)));
}

}  // namespace

void i8_combine_pairs(VecGen& v, const Xbyak::Xmm& a, const Xbyak::Xmm& b) {
  using Xbyak::Zmm;
  if (v.avx512()) {
    std::vector<uint32_t> ev, od;
    for (uint32_t c = 0; c < 16; ++c) {
      ev.push_back(2 * c);
      od.push_back(2 * c + 1);
    }
    const Zmm t0(0), t1(1);
    v.g.vmovdqu32(t0, v.cst_u32(ev));
    v.g.vmovdqu32(t1, v.cst_u32(od));
    v.g.vpermi2d(t0, Zmm(a.getIdx()), Zmm(b.getIdx()));
    v.g.vpermi2d(t1, Zmm(a.getIdx()), Zmm(b.getIdx()));
    v.g.vpaddd(a, t0, t1);
  } else {
    v.g.vphaddd(a, a, b);
    v.g.vpermq(Xbyak::Ymm(a.getIdx()), Xbyak::Ymm(a.getIdx()), 0xd8);
  }
}

bool linear_i8_has_vnni(Isa isa) {
  return (isa == Isa::AVX512 && cpu_info().avx512_vnni) || (isa == Isa::AVX2 && cpu_info().avx_vnni);
}

Result<std::shared_ptr<const JitKernel>> linear_i8_kernel(const Instruction& ins, const TensorType* in, Isa isa,
                                                          bool vnni, KernelCache& cache, int part, int n_parts) {
  I8Spec s;
  s.d = dims_of(in);
  if (s.d.rows <= 0 || s.d.in <= 0 || s.d.out <= 0 || s.d.in > MAX_K) return std::shared_ptr<const JitKernel>();
  if (s.d.rows * s.d.in * 4 > MAX_BYTES || quads(s.d.in) * s.d.out * 4 > MAX_BYTES || MR * s.d.out * 4 > MAX_BYTES)
    return std::shared_ptr<const JitKernel>();
  if (isa == Isa::REF || (vnni && !linear_i8_has_vnni(isa))) return std::shared_ptr<const JitKernel>();
  s.isa = isa;
  s.vnni = vnni;
  s.tensor = tensor_scale(ins);
  s.given = given_scale(ins);
  s.per_out = in[3].shape[0] == s.d.out && s.d.out != 1;
  s.act = fused_act(ins);
  s.act_alpha = static_cast<float>(fused_act_alpha(ins));
  const int W = vector_width(isa);
  const int64_t vecs = (s.d.out + W - 1) / W;
  s.c0 = vecs * part / n_parts * W;
  s.c1 = std::min(s.d.out, vecs * (part + 1) / n_parts * W);
  if (s.c1 <= s.c0) return std::shared_ptr<const JitKernel>();
  const std::string act = s.act == Activation::NONE ? "" : fmt::format("_{}", activation_name(s.act));
  const int mr = static_cast<int>(std::min<int64_t>(s.d.rows, MR));
  const std::string name = fmt::format("i8_linear{}__{}{}_{}x{}", act, isa_name(s.isa), s.vnni ? "_vnni" : "", mr,
                                       I8Gen::vectors_per_row(s, mr) * W);
  const std::string key = fmt::format("{}|{}x{}x{}|{}|{}|{}|{}-{}", name, s.d.rows, s.d.in, s.d.out, s.act_alpha,
                                      s.tensor + 2 * s.given, s.per_out, s.c0, s.c1);
  return build_kernel_measured(cache, key, name, MEASURE_BYTES, [&s](CodeGenerator& g) { return I8Gen(g, s).emit(); });
}

// Reference only: LINEAR_WEIGHTS_I8 runs once, in the derive section, where its input is a param.
OpHooks op_hooks_LINEAR_WEIGHTS_I8() { return {weights_shape, weights_ref}; }

// No gradient hook: autodiff refuses a path through it, by name.
OpHooks op_hooks_LINEAR_I8() {
  return {linear_i8_shape, linear_i8_ref, linear_i8_scratch, nullptr, linear_i8_jit, linear_i8_parts};
}

}  // namespace nnasm

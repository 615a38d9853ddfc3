// WHERE: elementwise selection by a condition, with numpy broadcasting of all three operands
// (ONNX Where, torch.where; attention masks, masked_fill).
//
// Computes   y = cond ≠ 0 ? a : b, elementwise after broadcasting cond, a and b to one shape.
// Inputs     cond: f32 or i32; true where nonzero (for f32: NaN is true, ±0 false). a, b: one
//            dtype, f32 or i32. Shapes broadcast numpy-style (trailing dimensions aligned).
// Outputs    y: a's dtype, the broadcast shape of the three.
// Gradient   a: dy where cond is true, b: dy where it is false (WHERE(cond, dy, 0) and
//            WHERE(cond, 0, dy)), each summed over the dimensions its input was broadcast along;
//            none to cond (piecewise constant: a zero gradient).
// Kernels    reference: one loop over broadcast rows. JIT (jit/elementwise.h), bitwise equal
//            to the reference: the three operands streamed, a row, a column or one element as the
//            generator reads them (the ROW and COL ones on one [rows, inner] split, as CALC's);
//            f32_where__<isa> for an f32 cond (a vcmpps against 0), f32_where_i32cond__<isa> for
//            an i32 one (an integer compare); other broadcasts run the reference. The kernel moves
//            bits, so i32 a and b take the same code.
// Notes      Not a CALC building block: CALC's functions take one or two arguments.
#include "jit/elementwise.h"
#include "ops/elementwise/broadcast.h"
#include "ops/op.h"

namespace nnasm {
namespace {

Status where_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  if (in[1].dtype != in[2].dtype)
    return Status::errorf("WHERE: {} and {} must have one dtype", operand_str(ins, 1, in[1]), operand_str(ins, 2, in[2]));
  Shape s;
  if (!broadcast_shapes(in[0].shape, in[1].shape, &s) || !broadcast_shapes(s, in[2].shape, &s))
    return Status::errorf("WHERE: {}, {} and {} do not broadcast together", operand_str(ins, 0, in[0]),
                          operand_str(ins, 1, in[1]), operand_str(ins, 2, in[2]));
  (*out)[0] = TensorType{in[1].dtype, s};
  return Status::ok();
}

// Reads every operand's element before writing y's (y may be an input: ops/op.h).
template <typename C>
void select(const C* cond, const uint32_t* a, const uint32_t* b, uint32_t* y, const Shape& out,
            const KernelArgs* k) {
  BroadcastWalkN<3>(out, {&k->in_type[0].shape, &k->in_type[1].shape, &k->in_type[2].shape})
      .for_each_row([&](int64_t o, const BroadcastWalkN<3>::Offsets& off, int64_t n,
                        const BroadcastWalkN<3>::Offsets& step) {
        for (int64_t j = 0; j < n; ++j) {
          const uint32_t v = cond[off[0] + j * step[0]] != 0 ? a[off[1] + j * step[1]] : b[off[2] + j * step[2]];
          y[o + j] = v;
        }
      });
}

void where_ref(const KernelArgs* k) {
  const uint32_t* a = static_cast<const uint32_t*>(k->in[1]);
  const uint32_t* b = static_cast<const uint32_t*>(k->in[2]);
  uint32_t* y = static_cast<uint32_t*>(k->out[0]);
  const Shape& out = k->out_type[0].shape;
  // An f32 cond compares as a float (−0 is false, NaN true); an i32 one as an integer.
  if (k->in_type[0].dtype == DType::I32) select(static_cast<const int32_t*>(k->in[0]), a, b, y, out, k);
  else select(static_cast<const float*>(k->in[0]), a, b, y, out, k);
}

Status where_grad(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy,
                  const std::vector<bool>& need, std::vector<TensorId>* dx) {
  if (!need[1] && !need[2]) return b.status();
  const TensorId zero = b.constant(0.f);
  if (need[1]) (*dx)[1] = b.sum_to(b.emit(Opcode::WHERE, {ins.in[0], dy[0], zero}), b.type(ins.in[1]).shape);
  if (need[2]) (*dx)[2] = b.sum_to(b.emit(Opcode::WHERE, {ins.in[0], zero, dy[0]}), b.type(ins.in[2]).shape);
  return b.status();
}

// ---- JIT ----
bool where_layout(const JitRequest& r, EwSpec* s) {
  return broadcast_layout({r.in[0].shape, r.in[1].shape, r.in[2].shape}, r.out[0].shape, s);
}

Result<KernelRef> where_jit(const JitRequest& r, KernelCache& cache) {
  EwSpec s;
  if (!where_layout(r, &s)) return KernelRef();
  const bool int_cond = r.in[0].dtype == DType::I32;
  s.op = int_cond ? "where_i32cond" : "where";
  s.isa = r.isa;
  s.n_tmp = 1;
  // src: cond, a, b; t0: the AVX2 mask. The mask says where cond is zero (+0 or −0 for f32;
  // an ordered compare, so NaN counts as nonzero), and picks b there.
  s.body = [int_cond](VecGen& v, const std::vector<Xbyak::Xmm>& dst, const std::vector<Xbyak::Xmm>& src,
                      const std::vector<Xbyak::Xmm>& t) {
    const VMask zero = v.mask(0, t[0]);
    if (!int_cond) v.cmp(zero, src[0], v.cst(0.f), VecGen::CMP_EQ);
    else if (v.avx512()) v.g.vpcmpeqd(zero.k, src[0], v.cst_bits(0));
    else v.g.vpcmpeqd(zero.v, src[0], v.cst_bits(0));
    v.blend(dst[0], zero, src[1], src[2]);
  };
  elementwise_part(&s, r.part, r.n_parts);
  return elementwise_kernel(s, cache);
}

int where_parts(const JitRequest& r, int threads) {
  EwSpec s;
  if (!where_layout(r, &s)) return 1;
  return elementwise_max_parts(s, threads);
}

}  // namespace

OpHooks op_hooks_WHERE() { return {where_shape, where_ref, nullptr, where_grad, where_jit, where_parts}; }

}  // namespace nnasm
